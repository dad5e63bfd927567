#!/usr/bin/env bash
# rewind perplexity on the qwen35 (hybrid) and qwen3 fixtures: the first
# chunk's figure equals the one computed here from `rewind logits` of the
# same ids (the second half's predictions, -log softmax in double; f16 KV
# cache in both), the output does not depend on the thread count, and bad
# input is a clear error (a text shorter than one chunk, no -f).
set -u
fx="${RW_FIXTURES:-../shared/fixtures}"
bin="${REWIND:-build/rewind}"
[ -d "$fx/qwen35" ] || { echo "no fixtures"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { if ! "$@"; then echo "FAILED: $*"; fail=1; fi; }
head -c 12000 "$fx/README.md" >"$tmp/text.txt"
ctx=48
for model in "$fx/qwen35/qwen35-Q8_0.gguf" "$fx/qwen3/qwen3-Q8_0.gguf"; do
  "$bin" perplexity "$model" -f "$tmp/text.txt" --ctx $ctx --chunks 3 --threads 2 >"$tmp/p2.txt" 2>"$tmp/err.txt"
  check [ $? -eq 0 ]
  "$bin" perplexity "$model" -f "$tmp/text.txt" --ctx $ctx --chunks 3 --threads 1 >"$tmp/p1.txt" 2>/dev/null
  check cmp -s "$tmp/p1.txt" "$tmp/p2.txt"
  check grep -q "3 chunks of $ctx, 23 scored per chunk" "$tmp/err.txt"
  check grep -qE '^\[1\][0-9.]+,\[2\][0-9.]+,\[3\][0-9.]+$' "$tmp/p2.txt"
  check grep -qE '^Final estimate: PPL = [0-9.]+ \+/- [0-9.]+$' "$tmp/p2.txt"
  # the first chunk from the logits of its ids (the tokenizer's BOS, if
  # any, is already its first token)
  "$bin" tokenize "$model" -f "$tmp/text.txt" | tr ' ' '\n' | head -n $ctx >"$tmp/chunk.ids"
  "$bin" logits "$model" --ids "$tmp/chunk.ids" --kv f16 --out "$tmp/chunk.f32"
  check [ $? -eq 0 ]
  python3 - "$tmp/chunk.ids" "$tmp/chunk.f32" "$tmp/p2.txt" $ctx <<'PY' || fail=1
import math, re, struct, sys
ids = [int(x) for x in open(sys.argv[1]).read().split()]
raw = open(sys.argv[2], "rb").read()
n = int(sys.argv[4])
nv = len(raw) // 4 // n
rows = struct.unpack("<%df" % (n * nv), raw)
nll = 0.0
for i in range(n // 2, n - 1):
    row = rows[i * nv:(i + 1) * nv]
    m = max(row)
    s = math.fsum(math.exp(v - m) for v in row)
    nll += -(row[ids[i + 1]] - m - math.log(s))
want = math.exp(nll / (n - 1 - n // 2))
got = float(re.match(r"\[1\]([0-9.]+)", open(sys.argv[3]).read()).group(1))
ok = abs(got - want) <= 1e-4 + 1e-10 * want  # printed to 4 decimals
print("chunk 1: rewind perplexity %.4f, from the logits %.6f" % (got, want))
sys.exit(0 if ok else 1)
PY
done
# errors
"$bin" perplexity "$fx/qwen35/qwen35-Q8_0.gguf" -f "$tmp/text.txt" --ctx 100000 >/dev/null 2>"$tmp/err.txt"
check [ $? -eq 1 ]
check grep -q "fewer than one chunk" "$tmp/err.txt"
"$bin" perplexity "$fx/qwen35/qwen35-Q8_0.gguf" >/dev/null 2>&1
check [ $? -eq 2 ]
"$bin" perplexity "$fx/qwen35/qwen35-Q8_0.gguf" -f "$tmp/missing.txt" >/dev/null 2>&1
check [ $? -eq 1 ]
exit $fail
