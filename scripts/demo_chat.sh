#!/usr/bin/env bash
# Plays a scripted multi-turn conversation through the HTTP API and prints
# the table of time to first token and cached / total prompt tokens per turn
# (cold, exact repeat, shared prefix, extended conversation).
#
#   scripts/demo_chat.sh [MODEL.gguf]
#
# Without MODEL it makes a Qwen3.5-0.8B-shaped model with random weights once
# (build/demo/qwen35-0.8b-q8_0.gguf, `rewind synth`). Starts `rewind serve` on
# a free loopback port, runs `rewind demo-client` against it, stops it.
set -euo pipefail
cd "$(dirname "$0")/.."
R=build/rewind
M="${1:-build/demo/qwen35-0.8b-q8_0.gguf}"
if [ ! -f "$M" ]; then
  mkdir -p "$(dirname "$M")"
  echo "demo: synthesizing $M (qwen35-0.8b shapes, random weights, Q8_0)"
  "$R" synth --arch qwen35 --preset qwen35-0.8b --type q8_0 -o "$M" >/dev/null
fi
log=$(mktemp)
"$R" serve "$M" --port 0 --ctx 4096 2> "$log" &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -f "$log"' EXIT
port=
for _ in $(seq 1 600); do
  port=$(grep -ao 'listening on http://127.0.0.1:[0-9]*' "$log" | sed 's/.*://' || true)
  [ -n "$port" ] && break
  kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; exit 1; }
  sleep 0.1
done
[ -n "$port" ] || { echo "demo: the server did not start" >&2; cat "$log" >&2; exit 1; }
echo "demo: rewind serve on 127.0.0.1:$port"
"$R" demo-client --port "$port" --wait 60
