#!/usr/bin/env bash
# The demo (`make demo`): the motivating table, on an embedded default.
#
# Makes a model with Qwen3.5-0.8B's shapes and random weights once (`rewind
# synth`, no download; kept in build/demo/), starts `rewind serve` on a free
# loopback port with the prefix cache on, plays a scripted multi-turn
# conversation through the OpenAI-compatible HTTP API (`rewind demo-client`:
# a ~1,950-token system prompt; cold, exact repeat, same system prompt with
# another question, the conversation extended by the answer and a new turn)
# and prints time to first token and cached / total prompt tokens per turn,
# then stops the server. scripts/demo_chat.sh does the work.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== rewind: a hybrid model's prompt cache through the HTTP server"
scripts/demo_chat.sh "$@"
echo "== demo finished"
