#!/usr/bin/env bash
# The demo: synthesize a Qwen3-0.6B-shaped model with random weights (no real
# weights can be downloaded here), show its layout, and generate from it.
# The model is kept in build/demo/ and reused on the next run.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/rewind
model=build/demo/qwen3-0.6b-q8_0.gguf
mkdir -p build/demo
if [ ! -f "$model" ]; then
  echo "== rewind synth: a random-weight model with Qwen3-0.6B's shapes (Q8_0)"
  time "$bin" synth --arch qwen3 --preset qwen3-0.6b --type q8_0 --seed 1 -o "$model"
fi
echo "== rewind inspect (first lines)"
"$bin" inspect "$model" | head -n 20
echo "== rewind generate: 32 tokens, greedy"
"$bin" generate "$model" -p "Once upon a time" -n 32
echo
echo "== demo finished"
