#!/usr/bin/env bash
# Runs the benchmarks (make bench): every speed target of the issues is
# measured here, never in a timed test. Extra arguments go to the kernel
# benchmarks, e.g. scripts/bench.sh --threads 2.
#
#   rewind bench kernels    matmul per weight type: one-row GB/s vs the
#                           measured read bandwidth, 512-row GOP/s, ref speedups
#   rewind bench ops        attention, delta rule, conv1d, Mamba2 scan per token
#   rewind bench model      prefill (512 tokens) and decode tokens/s and peak
#                           memory on synthesized Qwen3-0.6B and Qwen3.5-0.8B
#                           files (made once with rewind synth, kept in build/bench)
#   rewind bench state      bytes of a sequence's state (KV per token, one recurrent
#                           checkpoint, logged inputs per token) and rewind costs
#   rewind bench chat       a multi-turn conversation with and without the prefix
#                           cache: time to first token, cached / recomputed tokens
#   rewind bench serve      the HTTP server with 1, 4 and 16 concurrent streaming
#                           clients on the Qwen3.5-0.8B Q8_0 file: generated
#                           tokens/s and time to first token p50/p99
#   rewind bench sampler    microseconds per token of the sampler settings
#                           on 151936-token rows
#   rewind bench tokenizer  MB/s on the Qwen3 vocabulary (when ../shared/fixtures is there), on a
#                           repeated paragraph and on Debian's license texts
set -eu
cd "$(dirname "$0")/.."
bin=build/rewind
mkdir -p build/bench
echo "== rewind bench kernels"
$bin bench kernels "$@"
echo "== rewind bench ops"
$bin bench ops "$@"
echo "== rewind bench sampler"
$bin bench sampler
for spec in "qwen3 qwen3-0.6b q8_0" "qwen35 qwen35-0.8b q8_0" "qwen35 qwen35-0.8b q4_k_m"; do
  set -- $spec
  f="build/bench/$2-$3.gguf"
  [ -f "$f" ] || $bin synth --arch "$1" --preset "$2" --type "$3" --seed 1 -o "$f"
  echo "== rewind bench model $f --prompt 512 --gen 64 --threads 2"
  $bin bench model "$f" --prompt 512 --gen 64 --threads 2
done
f=build/bench/qwen35-0.8b-q8_0.gguf
echo "== rewind bench state $f --prompt 2048 --threads 2"
$bin bench state "$f" --prompt 2048 --threads 2
echo "== rewind bench chat $f --turns 8 --system-tokens 1950 --threads 2"
$bin bench chat "$f" --turns 8 --system-tokens 1950 --threads 2
echo "== rewind bench serve $f --clients 1,4,16 --threads 2"
$bin bench serve "$f" --clients 1,4,16 --threads 2
vocab="${RW_FIXTURES:-../shared/fixtures}/tokenizer/ggml-vocab-qwen3.gguf"
if [ -f "$vocab" ]; then
  echo "== rewind bench tokenizer $vocab"
  $bin bench tokenizer "$vocab"
  # the built-in paragraph repeats, which the word cache makes easy; Debian's
  # license texts (base-files) are ordinary English prose without that
  lic=/usr/share/common-licenses
  if [ -f "$lic/GPL-3" ]; then
    mkdir -p build/bench
    cat "$lic"/Apache-2.0 "$lic"/Artistic "$lic"/GFDL-1.3 "$lic"/GPL-3 "$lic"/LGPL-3 "$lic"/MPL-2.0 > build/bench/english.txt 2>/dev/null
    echo "== rewind bench tokenizer $vocab -f build/bench/english.txt --reps 10"
    $bin bench tokenizer "$vocab" -f build/bench/english.txt --reps 10
  fi
fi
