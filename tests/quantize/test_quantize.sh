#!/usr/bin/env bash
# rewind quantize against llama-quantize's own files (../shared/fixtures):
# - every quantized model fixture that llama-quantize made from its set's
#   F32 file (Q4_0, Q8_0, Q4_K_M, Q5_K_M, Q6_K, F16, BF16, MXFP4_MOE over
#   ten architectures) is reproduced byte for byte: the per-tensor types of
#   the mixes, the quantized bytes, the tensor order and the metadata;
#   qwen35mtp-Q8_0 is left out: its tensors are in the converter's order
#   and its norms differ from the F32 file's (not made by llama-quantize
#   from it);
# - every file of the quantization zoo (llama-quantize --pure, 17 types)
#   likewise with --pure;
# - 1 and 2 threads write the same file;
# - an F16 input converts through f32 as llama-quantize does: F16 -> Q8_0
#   equals F16 -> F32 -> Q8_0;
# - a quantized input is refused unless --allow-requantize, and then the
#   result loads and runs;
# - --output-tensor-type / --token-embedding-type change that tensor alone
#   (on a tied model the output type goes to the token embedding): every
#   other tensor's type and bytes are the fixture's (checked against
#   llama-quantize with the same options by hand: identical files);
# - bad types, inputs and outputs are clear errors that leave no file.
set -u
REWIND="${REWIND:-build/rewind}"
FIX="${RW_FIXTURES:-../shared/fixtures}"
[ -f "$FIX/qwen3/qwen3-F32.gguf" ] && [ -f "$FIX/quant/zoo-F32.gguf" ] || { echo "skipped: no fixtures"; exit 77; }
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

n=0 threads=1
for f32 in "$FIX"/*/*-F32.gguf; do
  set_name=$(basename "$f32" -F32.gguf)
  [ "$set_name" = zoo ] && continue
  for q in "$(dirname "$f32")/$set_name"-*.gguf; do
    type=${q##*/$set_name-}
    type=${type%.gguf}
    case "$type" in F32 | *ssm_in*) continue ;; esac # the legacy-layout file is the converter's, not llama-quantize's
    [ "$set_name-$type" = qwen35mtp-Q8_0 ] && continue
    threads=$((3 - threads))
    if ! "$REWIND" quantize "$f32" "$d/out.gguf" "$type" --threads $threads 2> "$d/err"; then
      bad "quantize $set_name $type: $(cat "$d/err")"
      continue
    fi
    cmp -s "$d/out.gguf" "$q" || bad "$set_name $type: not llama-quantize's file"
    n=$((n + 1))
  done
done
[ $n -ge 20 ] || bad "only $n model fixtures compared"
echo "$n model fixtures compared byte for byte"

n=0
for z in "$FIX"/quant/zoo-*.gguf; do
  type=${z##*/zoo-}
  type=${type%.gguf}
  [ "$type" = F32 ] && continue
  [ "$type" = MXFP4 ] && type=MXFP4_MOE
  "$REWIND" quantize "$FIX/quant/zoo-F32.gguf" "$d/z.gguf" "$type" --pure 2> "$d/err" || { bad "zoo $type: $(cat "$d/err")"; continue; }
  cmp -s "$d/z.gguf" "$z" || bad "zoo $type: not llama-quantize --pure's file"
  n=$((n + 1))
done
[ $n -ge 17 ] || bad "only $n zoo files compared"
echo "$n zoo files compared byte for byte"

# threads
F="$FIX/qwen35/qwen35-F32.gguf"
"$REWIND" quantize "$F" "$d/t1.gguf" Q4_K_S --threads 1 2> /dev/null &&
  "$REWIND" quantize "$F" "$d/t2.gguf" q4_k_s --threads 2 2> /dev/null || bad "Q4_K_S"
cmp -s "$d/t1.gguf" "$d/t2.gguf" || bad "1 and 2 threads wrote different files"

# F16 input: through f32
H="$FIX/qwen3/qwen3-F16.gguf"
"$REWIND" quantize "$H" "$d/h8.gguf" Q8_0 2> /dev/null && "$REWIND" quantize "$H" "$d/h32.gguf" F32 2> /dev/null &&
  "$REWIND" quantize "$d/h32.gguf" "$d/h32-8.gguf" Q8_0 2> /dev/null || bad "F16 input"
cmp -s "$d/h8.gguf" "$d/h32-8.gguf" || bad "F16 -> Q8_0 differs from F16 -> F32 -> Q8_0"

# requantizing
Q="$FIX/qwen3/qwen3-Q8_0.gguf"
if "$REWIND" quantize "$Q" "$d/rq.gguf" Q4_K_M 2> "$d/err"; then bad "a Q8_0 input requantized without --allow-requantize"; fi
grep -q "already Q8_0" "$d/err" || bad "the refusal does not say why: $(cat "$d/err")"
[ -e "$d/rq.gguf" ] && bad "a refused conversion left a file"
"$REWIND" quantize "$Q" "$d/rq.gguf" Q4_K_M --allow-requantize 2> /dev/null || bad "--allow-requantize"
"$REWIND" generate "$d/rq.gguf" -p "Hello" -n 4 > /dev/null 2>&1 || bad "the requantized file does not run"
"$REWIND" inspect "$d/rq.gguf" --json | grep -q '"general.file_type":15' || bad "file_type of Q4_K_M is not 15"

# overrides: the named tensor gets the type, every other tensor is the
# fixture's, byte for byte
same_but() { # FILE FIXTURE TENSOR TYPE
  "$REWIND" inspect "$1" --json > "$d/a.json" && "$REWIND" inspect "$2" --json > "$d/b.json" || return 1
  python3 - "$1" "$2" "$3" "$4" "$d/a.json" "$d/b.json" << 'PY'
import json, sys
fa, fb, name, ty = sys.argv[1:5]
a, b = (json.load(open(p)) for p in sys.argv[5:7])
ta, tb = ({t["name"]: t for t in j["tensors"]} for j in (a, b))
da, db = open(fa, "rb").read(), open(fb, "rb").read()
assert ta.keys() == tb.keys(), "tensor names differ"
assert ta[name]["type"] == ty, "%s is %s, not %s" % (name, ta[name]["type"], ty)
for n, t in ta.items():
    if n == name:
        continue
    u = tb[n]
    assert t["type"] == u["type"], n
    assert da[t["offset"]:t["offset"] + t["nbytes"]] == db[u["offset"]:u["offset"] + u["nbytes"]], n
PY
}
G="$FIX/gemma3/gemma3-F32.gguf"
"$REWIND" quantize "$G" "$d/o.gguf" Q4_K_M --output-tensor-type q8_0 2> /dev/null &&
  same_but "$d/o.gguf" "$FIX/gemma3/gemma3-Q4_K_M.gguf" token_embd.weight Q8_0 || bad "--output-tensor-type on a tied model"
"$REWIND" quantize "$F" "$d/o.gguf" Q4_K_M --token-embedding-type f16 2> /dev/null &&
  same_but "$d/o.gguf" "$FIX/qwen35/qwen35-Q4_K_M.gguf" token_embd.weight F16 || bad "--token-embedding-type"
"$REWIND" quantize "$F" "$d/o.gguf" Q8_0 --output-tensor-type Q6_K 2> /dev/null &&
  same_but "$d/o.gguf" "$FIX/qwen35/qwen35-Q8_0.gguf" output.weight Q6_K || bad "--output-tensor-type"
"$REWIND" quantize "$F" "$d/x.gguf" Q8_0 --output-tensor-type q9_9 2> "$d/err"
[ $? -eq 1 ] && grep -q 'unknown tensor type "q9_9"' "$d/err" || bad "unknown tensor type: $(cat "$d/err")"

# errors
"$REWIND" quantize "$F" "$d/x.gguf" Q4_K_X 2> "$d/err"
[ $? -eq 1 ] && grep -q 'unknown quantization type "Q4_K_X"' "$d/err" || bad "unknown type: $(cat "$d/err")"
"$REWIND" quantize "$d/none.gguf" "$d/x.gguf" Q8_0 2> "$d/err" && bad "a missing input"
grep -q "none.gguf" "$d/err" || bad "missing input not named: $(cat "$d/err")"
printf 'not a gguf file at all' > "$d/junk.gguf"
"$REWIND" quantize "$d/junk.gguf" "$d/x.gguf" Q8_0 2> /dev/null && bad "a junk input"
"$REWIND" quantize "$F" "$d/no/such/dir/x.gguf" Q8_0 2> /dev/null && bad "an output in a missing folder"
[ -e "$d/x.gguf" ] && bad "a failed run left an output"
"$REWIND" quantize "$F" "$d/x.gguf" 2> /dev/null
[ $? -eq 2 ] || bad "a missing type is not a usage error"
exit $fail
