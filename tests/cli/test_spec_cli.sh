#!/usr/bin/env bash
# rewind generate --draft: greedy ids equal to plain generation with another
# fixture as draft, with the model as its own draft (every draft accepted),
# adaptive and fixed, at every --draft-max; a sampled run reproduces with its
# seed; a draft with another vocabulary is a clear error; synth --layers
# makes a shallow model that loads.
set -u
fx="${RW_FIXTURES:-../shared/fixtures}"
bin="${REWIND:-build/rewind}"
[ -d "$fx/qwen35" ] || { echo "no fixtures"; exit 77; }
model="$fx/qwen35/qwen35-Q8_0.gguf"
ids="$fx/qwen3/qwen3.prompt.ids"
fail=0
check() { if ! "$@"; then echo "FAILED: $*"; fail=1; fi; }
gen() { "$bin" generate "$model" --ids "$ids" -n 19 --print-ids "$@"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

plain=$(gen) || { echo "plain generate failed"; exit 1; }
for k in 1 2 5 15; do
    check [ "$(gen --draft "$fx/llama/llama-Q8_0.gguf" --draft-max $k --draft-fixed 2>/dev/null)" = "$plain" ]
    check [ "$(gen --draft "$fx/qwen35/qwen35-F32.gguf" --draft-max $k 2>/dev/null)" = "$plain" ]
done
self=$(gen --draft "$model" --draft-max 4 --draft-fixed 2>"$tmp/err"); check [ "$self" = "$plain" ]
# 18 tokens after the first, up to 5 a pass: 4 passes (5 5 5 3), 14 drafts all accepted
check grep -q "4 verify passes, 14 drafted, 14 accepted (100.0%)" "$tmp/err"
# sampled: the same seed gives the same tokens
a=$(gen --temp 0.8 --seed 3 --draft "$fx/qwen35/qwen35-F32.gguf" 2>/dev/null)
b=$(gen --temp 0.8 --seed 3 --draft "$fx/qwen35/qwen35-F32.gguf" 2>/dev/null)
check [ -n "$a" ]
check [ "$a" = "$b" ]
check [ "$(wc -w <<<"$a")" -eq 19 ]
# another vocabulary: an error at start, naming the problem
"$bin" synth --arch qwen3 --preset qwen3-tiny -o "$tmp/tiny.gguf" || { echo "synth failed"; exit 1; }
"$bin" generate "$model" --ids "$ids" -n 4 --draft "$tmp/tiny.gguf" >/dev/null 2>"$tmp/err"
check [ $? -eq 1 ]
check grep -q "same vocabulary" "$tmp/err"
check [ "$("$bin" generate "$model" --ids "$ids" -n 2 --draft-max 16 2>&1 >/dev/null | grep -c "draft-max")" -eq 1 ]
# synth --layers: a shallow model of the same shapes
"$bin" synth --arch qwen35 --preset qwen35-tiny --layers 2 --vocab "$model" -o "$tmp/d2.gguf" || { echo "synth --layers failed"; exit 1; }
check [ "$("$bin" inspect "$tmp/d2.gguf" 2>/dev/null | grep -c "block_count.*= 2\|block_count.*2$")" -ge 1 ]
# rewind bench spec runs every part (its shape only; no timing is checked)
out=$("$bin" bench spec "$model" --draft "$tmp/d2.gguf" --k 1,3 --gen 6 --prompt 8 --reps 1 --seqs 2 --threads 1)
check [ $? -eq 0 ]
check [ "$(grep -c "x plain" <<<"$out")" -eq 8 ]
check grep -q "K=3  ( 4 tok)" <<<"$out"
# --json: everything as one object
js=$("$bin" bench spec "$model" --draft "$tmp/d2.gguf" --k 1,3 --gen 6 --prompt 8 --reps 1 --seqs 2 --threads 1 --json)
check [ $? -eq 0 ]
check grep -q '"verify":\[{"k":1,"tokens":2,"ms_mean":' <<<"$js"
check grep -q '{"k":3,"tokens":4,' <<<"$js"
check grep -q '"decode":\[{"seqs":1,"runs":\[{"name":"plain","tok_s":' <<<"$js"
check grep -q '{"seqs":2,"runs":' <<<"$js"
check grep -q '"name":"self-draft K=4","tok_s":[0-9.e+]*,"vs_plain":[0-9.e+]*,"drafted":[0-9]*,"accepted":[0-9]*,"acceptance":1,' <<<"$js"
check [ "$(grep -o '"name":"draft adaptive<=4"' <<<"$js" | wc -l)" -eq 2 ]
"$bin" bench spec "$model" --k 99 >/dev/null 2>&1; check [ $? -eq 2 ]
exit $fail
