#!/usr/bin/env bash
# The cache layer's invariants through `rewind logits`' hooks, on every
# fixture model file: a sequence's logits are bitwise the same in one pass,
# one token per pass, in passes of odd sizes, batched with another sequence
# of another length, rewound (--replay-from) to positions near and far, and
# saved to a state file then loaded and continued.
set -u
bin="${REWIND:-build/rewind}"
fx="${RW_FIXTURES:-../shared/fixtures}"
[ -d "$fx" ] || { echo "skipped: no fixtures at $fx"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { if ! "$@"; then echo "FAILED: $*"; fail=1; fi; }
n=340; nb=123
[ "${RW_SANITIZE:-0}" = 1 ] && n=280 && nb=57
# only the architectures this build loads; the others are named as skipped
. "$(dirname "$0")/../fixture_lib.sh"
fixture_models "$bin" "$fx" || { echo "FAILED: rewind architectures"; exit 1; }
models=$fixture_kept
# under the sanitizers (about ten times slower): one file per kind of state
[ "${RW_SANITIZE:-0}" = 1 ] && models=$(tr ' ' '\n' <<<"$models" | grep -e qwen3-F32 -e qwen35-F32 -e qwen3next-F32 -e granitehybrid-F32 -e lfm2-F32 -e nemotron_h-F32 -e gemma3-F32 -e gpt-oss-F32)
replays="0 3 60 $((n - 300)) $((n - 17)) $((n - 5)) $((n - 1))"
[ "${RW_SANITIZE:-0}" = 1 ] && replays="3 $((n - 270)) $((n - 5))"
for model in $models; do
  V=$(fixture_vocab "$bin" "$model")
  awk -v n=$n -v v="$V" 'BEGIN { srand(11); for (i = 0; i < n; i++) printf "%d\n", int(rand() * (v - 2)) + 1 }' > "$tmp/a.ids"
  awk -v n=$nb -v v="$V" 'BEGIN { srand(12); for (i = 0; i < n; i++) printf "%d\n", int(rand() * (v - 2)) + 1 }' > "$tmp/b.ids"
  r() { "$bin" logits "$model" --threads 2 "$@"; }
  r --ids "$tmp/a.ids" --out "$tmp/ref.f32" || { echo "FAILED: $model does not run"; fail=1; continue; }
  r --ids "$tmp/b.ids" --out "$tmp/refb.f32"
  r --ids "$tmp/a.ids" --out "$tmp/x.f32" --mode step; check cmp -s "$tmp/ref.f32" "$tmp/x.f32"
  r --ids "$tmp/a.ids" --out "$tmp/x.f32" --chunks 7,1,33,300; check cmp -s "$tmp/ref.f32" "$tmp/x.f32"
  r --ids "$tmp/a.ids" --out "$tmp/x.f32" --ids "$tmp/b.ids" --out "$tmp/y.f32" --chunks 5,64
  check cmp -s "$tmp/ref.f32" "$tmp/x.f32"; check cmp -s "$tmp/refb.f32" "$tmp/y.f32"
  for R in $replays; do
    r --ids "$tmp/a.ids" --out "$tmp/x.f32" --chunks 29 --replay-from $R; check cmp -s "$tmp/ref.f32" "$tmp/x.f32"
  done
  head -n 150 "$tmp/a.ids" > "$tmp/p.ids"; tail -n +151 "$tmp/a.ids" > "$tmp/q.ids"
  r --ids "$tmp/p.ids" --out "$tmp/p.f32" --save-state "$tmp/st.bin"
  r --ids "$tmp/q.ids" --out "$tmp/q.f32" --load-state "$tmp/st.bin" --chunks 3,50
  row=$(( $(stat -c %s "$tmp/ref.f32") / n ))
  check cmp -s <(tail -c +$((150 * row + 1)) "$tmp/ref.f32") "$tmp/q.f32"
  echo "$(basename "$model"): ok"
done
# errors: a truncated state file and another model's file are refused
m1="$fx/qwen35/qwen35-F32.gguf"; m2="$fx/qwen3/qwen3-F32.gguf"
if [ -f "$m1" ] && [ -f "$m2" ]; then
  "$bin" logits "$m1" --ids "$tmp/p.ids" --out "$tmp/p.f32" --save-state "$tmp/st.bin"
  head -c 5000 "$tmp/st.bin" > "$tmp/trunc.bin"
  out=$("$bin" logits "$m1" --ids "$tmp/q.ids" --out "$tmp/q.f32" --load-state "$tmp/trunc.bin" 2>&1); rc=$?
  check [ $rc -eq 1 ]; check grep -q "truncated or corrupted" <<<"$out"
  out=$("$bin" logits "$m2" --ids "$tmp/q.ids" --out "$tmp/q.f32" --load-state "$tmp/st.bin" 2>&1); rc=$?
  check [ $rc -eq 1 ]; check grep -q "another model" <<<"$out"
fi
exit $fail
