#!/usr/bin/env bash
# quantize_vs_llama.sh - rewind quantize and llama.cpp's llama-quantize side
# by side on the same input file, machine and run: for each type, both write
# the file, the script says whether the two files are identical byte for
# byte and prints each one's wall time and peak RSS as a markdown table.
# llama-quantize is a measuring instrument only: nothing else uses it.
#
#   LLAMA_QUANTIZE=path/to/llama-quantize scripts/quantize_vs_llama.sh IN.gguf [TYPE...]
#
# Environment (defaults): THREADS (2), REWIND (build/rewind), OUT (a
# temporary folder for the two outputs, removed after each type).
set -u
[ $# -ge 1 ] || { echo "usage: LLAMA_QUANTIZE=... $0 IN.gguf [TYPE...]" >&2; exit 2; }
in=$1
shift
types=${*:-Q4_K_M Q5_K_M Q6_K Q8_0 Q4_0}
llq=${LLAMA_QUANTIZE:?set LLAMA_QUANTIZE to the path of llama-quantize}
rw=${REWIND:-build/rewind}
threads=${THREADS:-2}
out=${OUT:-$(mktemp -d)}
trap 'rm -f "$out/rw.gguf" "$out/ll.gguf"' EXIT
export LD_LIBRARY_PATH="$(dirname "$llq")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
timed() { # wall seconds and peak RSS (MiB) of a command, or "failed"
  /usr/bin/time -f "%e %M" -o "$out/time" "$@" > "$out/log" 2>&1 || { echo failed; return; }
  awk '{printf "%.1f s, %.0f MiB", $1, $2 / 1024}' "$out/time"
}
echo "rewind quantize vs llama-quantize, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $threads threads, $(date -u +%F), rewind $(git rev-parse --short HEAD 2>/dev/null)"
echo "input: $in ($(du -m "$in" | cut -f1) MiB)"
echo
echo "| type | identical | rewind | llama-quantize | output MiB |"
echo "|---|---|---|---|---:|"
for t in $types; do
  r=$(timed "$rw" quantize "$in" "$out/rw.gguf" "$t" --threads "$threads")
  l=$(timed "$llq" "$in" "$out/ll.gguf" "$t" "$threads")
  same=no
  cmp -s "$out/rw.gguf" "$out/ll.gguf" && same=yes
  echo "| $t | $same | $r | $l | $(du -m "$out/rw.gguf" 2>/dev/null | cut -f1) |"
  rm -f "$out/rw.gguf" "$out/ll.gguf"
done
