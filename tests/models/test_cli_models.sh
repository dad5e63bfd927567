#!/usr/bin/env bash
# rewind logits / generate on the qwen3 F32 fixture: output size, batch ==
# step, greedy ids equal llama.cpp's (F32 files with the default numerics,
# quantized ones with --numerics ggml), the default numerics (qwen35 Q8_0),
# usage and file errors.
set -u
fx="${RW_FIXTURES:-../shared/fixtures}"
bin="${REWIND:-build/rewind}"
[ -d "$fx/qwen3" ] || { echo "no fixtures"; exit 77; }
model="$fx/qwen3/qwen3-F32.gguf"
ids="$fx/qwen3/qwen3.prompt.ids"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { if ! "$@"; then echo "FAILED: $*"; fail=1; fi; }

"$bin" logits "$model" --ids "$ids" --kv f32 --out "$tmp/b.f32"; check [ $? -eq 0 ]
"$bin" logits "$model" --ids "$ids" --kv f32 --mode step --out "$tmp/s.f32"; check [ $? -eq 0 ]
check [ "$(stat -c %s "$tmp/b.f32")" -eq $((128 * 512 * 4)) ]
check cmp -s "$tmp/b.f32" "$tmp/s.f32"

# generate: greedy ids equal llama.cpp's for each file's reliable prefix,
# with the default numerics for an F32 file and ggml's for a quantized one
# (whose goldens are judged against the F32 model under the default: that
# is test_models_fixtures'); the sanitizer build checks two files
files=("$fx"/qwen3/*.gguf "$fx"/llama/*.gguf "$fx"/gemma3/*.gguf)
[ "${RW_SANITIZE:-0}" = 1 ] && files=("$fx/qwen3/qwen3-Q8_0.gguf" "$fx/llama/llama-F32.gguf")
for f in "${files[@]}"; do
  m=$(basename "$(dirname "$f")")
  nm=(); case "$f" in *-F32.gguf) ;; *) nm=(--numerics ggml) ;; esac
  got=$("$bin" generate "$f" --ids "$fx/$m/$m.prompt.ids" -n 32 --print-ids "${nm[@]}")
  check python3 -c "
import json, sys
d = json.load(open(sys.argv[1])); got = list(map(int, sys.argv[2].split())); k = d['greedy_reliable_prefix']
assert len(got) == 32 and got[:k] == d['greedy_ids'][:k], (sys.argv[1], got, d['greedy_ids'], k)" "${f%.gguf}.json" "$got"
done

# logits and generate default to the library's numerics (auto, which is
# fast: our summation order); RW_NUMERICS and --numerics still choose. On a
# Q8_0 file the default equals --numerics fast and auto bitwise and differs
# from ggml; generate's default ids are auto's, and there is a prompt whose
# greedy continuation parts between the two orders (at token 20 on AVX-512).
q="$fx/qwen35/qwen35-Q8_0.gguf"
qids="$fx/qwen35/qwen35.prompt.ids"
if [ -f "$q" ]; then
  "$bin" logits "$q" --ids "$qids" --out "$tmp/qd.f32"; check [ $? -eq 0 ]
  "$bin" logits "$q" --ids "$qids" --numerics ggml --out "$tmp/qg.f32"; check [ $? -eq 0 ]
  "$bin" logits "$q" --ids "$qids" --numerics fast --out "$tmp/qa.f32"; check [ $? -eq 0 ]
  RW_NUMERICS=auto "$bin" logits "$q" --ids "$qids" --out "$tmp/qe.f32"; check [ $? -eq 0 ]
  check cmp -s "$tmp/qd.f32" "$tmp/qa.f32"
  check cmp -s "$tmp/qd.f32" "$tmp/qe.f32"
  check [ "$(cmp -s "$tmp/qd.f32" "$tmp/qg.f32"; echo $?)" -eq 1 ]
  awk 'BEGIN { for (i = 0; i < 64; i++) printf "%d ", (i * 37 + 101) % 509; print "" }' > "$tmp/g.ids"
  gd=$("$bin" generate "$q" --ids "$tmp/g.ids" -n 48 --print-ids)
  ga=$("$bin" generate "$q" --ids "$tmp/g.ids" -n 48 --numerics auto --print-ids)
  gg=$("$bin" generate "$q" --ids "$tmp/g.ids" -n 48 --numerics ggml --print-ids)
  check [ -n "$gd" ]
  check [ "$gd" = "$ga" ]
  check [ "$gd" != "$gg" ]
fi

# 600 ids: the batch pass runs in two chunks (512 + 88) and the cache grows
# past its first allocation; every row must still equal the step pass.
awk 'BEGIN { for (i = 0; i < 600; i++) printf "%d ", (i * 37 + 11) % 509; print "" }' > "$tmp/long.ids"
"$bin" logits "$model" --ids "$tmp/long.ids" --kv f32 --out "$tmp/lb.f32"; check [ $? -eq 0 ]
"$bin" logits "$model" --ids "$tmp/long.ids" --kv f32 --mode step --out "$tmp/ls.f32"; check [ $? -eq 0 ]
check [ "$(stat -c %s "$tmp/lb.f32")" -eq $((600 * 512 * 4)) ]
check cmp -s "$tmp/lb.f32" "$tmp/ls.f32"

# bench model: one JSON object with positive rates and memory
out=$("$bin" bench model "$model" --prompt 16 --gen 4 --threads 1 --json); check [ $? -eq 0 ]
check python3 -c "import json,sys; d=json.loads(sys.argv[1]); assert d['prompt']==16 and d['gen']==4 and d['threads']==1; assert d['prefill_tok_s']>0 and d['decode_tok_s']>0 and d['peak_rss_mib']>0" "$out"
"$bin" bench model "$model" --prompt 8 --gen 2 --threads 1 | grep -q "^tg2 "; check [ $? -eq 0 ]

# usage errors exit 2, runtime errors exit 1 with a one-line message
"$bin" logits "$model" --ids "$ids" 2>/dev/null; check [ $? -eq 2 ]
"$bin" logits "$model" --ids "$ids" --mode sideways --out "$tmp/x" 2>/dev/null; check [ $? -eq 2 ]
"$bin" logits "$model" --ids "$ids" --kv q4 --out "$tmp/x" 2>/dev/null; check [ $? -eq 2 ]
"$bin" logits "$tmp/none.gguf" --ids "$ids" --out "$tmp/x" 2>/dev/null; check [ $? -eq 1 ]
echo "1 2 999999" > "$tmp/bad.ids"
msg=$("$bin" logits "$model" --ids "$tmp/bad.ids" --out "$tmp/x" 2>&1); check [ $? -eq 1 ]
check grep -q "outside the vocabulary" <<<"$msg"
echo "1 two" > "$tmp/bad2.ids"
"$bin" logits "$model" --ids "$tmp/bad2.ids" --out "$tmp/x" 2>/dev/null; check [ $? -eq 1 ]
"$bin" generate "$model" --ids "$ids" 2>/dev/null; check [ $? -eq 2 ]
exit $fail
