#!/usr/bin/env bash
# rewind perplexity on the qwen35 (hybrid) and qwen3 fixtures: the first
# chunk's figure equals the one computed here from `rewind logits` of the
# same ids (the second half's predictions, -log softmax in double; f16 KV
# cache in both), the output does not depend on the thread count, and bad
# input is a clear error (a text shorter than one chunk, no -f). Then the
# KL divergence against a base file and the HellaSwag score (below).
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
# --kl-divergence: the F32 file's base (llama-perplexity's layout: its size,
# its tokens, each row within half a step of the F32 logits' log-softmax),
# the Q4_K_M file against it (chunk 1's KL and top-token agreement as
# computed here from both files' logits), the F32 file against its own base
# (KL about 0, the same top token, the same perplexities), thread invariance
f32="$fx/qwen35/qwen35-F32.gguf" q4="$fx/qwen35/qwen35-Q4_K_M.gguf"
"$bin" perplexity "$f32" -f "$tmp/text.txt" --ctx $ctx --chunks 3 --kv f32 --kl-divergence-base "$tmp/base.kld" \
  >"$tmp/plain.txt" 2>/dev/null
check [ $? -eq 0 ]
"$bin" perplexity "$q4" --kl-divergence --kl-divergence-base "$tmp/base.kld" --kv f32 --threads 2 >"$tmp/kl2.txt" 2>/dev/null
check [ $? -eq 0 ]
"$bin" perplexity "$q4" --kl-divergence --kl-divergence-base "$tmp/base.kld" --kv f32 --threads 1 >"$tmp/kl1.txt" 2>/dev/null
check cmp -s "$tmp/kl1.txt" "$tmp/kl2.txt"
"$bin" perplexity "$f32" --kl-divergence --kl-divergence-base "$tmp/base.kld" --kv f32 >"$tmp/self.txt" 2>/dev/null
check [ $? -eq 0 ]
"$bin" tokenize "$f32" -f "$tmp/text.txt" | tr ' ' '\n' | head -n $ctx >"$tmp/chunk.ids"
"$bin" logits "$f32" --ids "$tmp/chunk.ids" --kv f32 --out "$tmp/base.f32" && \
  "$bin" logits "$q4" --ids "$tmp/chunk.ids" --kv f32 --out "$tmp/q.f32"
check [ $? -eq 0 ]
"$bin" tokenize "$f32" -f "$tmp/text.txt" | tr ' ' '\n' | head -n $((3 * ctx)) >"$tmp/all.ids"
python3 - "$tmp" $ctx <<'PY' || fail=1
import math, re, struct, sys
tmp, n = sys.argv[1], int(sys.argv[2])
raw = open(tmp + "/base.kld", "rb").read()
ok = raw[:8] == b"_logits_"
n_ctx, n_vocab, n_chunk = struct.unpack("<3i", raw[8:20])
nv = 2 * ((n_vocab + 1) // 2) + 4
scored = n_ctx - 1 - n_ctx // 2
ok &= (n_ctx, n_chunk) == (n, 3) and len(raw) == 20 + 4 * n_ctx * n_chunk + 2 * nv * scored * n_chunk
toks = list(struct.unpack("<%di" % (n_ctx * n_chunk), raw[20:20 + 4 * n_ctx * n_chunk]))
ok &= toks == [int(x) for x in open(tmp + "/all.ids").read().split()]
def rows(path):
    r = open(path, "rb").read()
    f = struct.unpack("<%df" % (len(r) // 4), r)
    return [f[i * n_vocab:(i + 1) * n_vocab] for i in range(n)]
def logsm(row):
    m = max(row)
    s = m + math.log(math.fsum(math.exp(v - m) for v in row))
    return [v - s for v in row]
base, q = rows(tmp + "/base.f32"), rows(tmp + "/q.f32")
off = 20 + 4 * n_ctx * n_chunk
kl, same, worst = 0.0, 0, 0.0
for j in range(scored):
    at = off + 2 * nv * j
    scale, lo = struct.unpack("<2f", raw[at:at + 8])
    qs = struct.unpack("<%dH" % n_vocab, raw[at + 8:at + 8 + 2 * n_vocab])
    lp = [scale * v + lo for v in qs]
    want = logsm(base[n // 2 + j])
    top = max(want)
    for v in range(n_vocab):  # kept values within half a step of the log-softmax
        if want[v] > top - 15.99:
            worst = max(worst, abs(lp[v] - want[v]) - scale / 2)
    lq = logsm(q[n // 2 + j])
    kl += math.fsum(math.exp(a) * (a - b) for a, b in zip(lp, lq) if a > -16)
    same += max(range(n_vocab), key=lambda v: q[n // 2 + j][v]) == max(range(n_vocab), key=lambda v: qs[v])
kl /= scored
line = [l for l in open(tmp + "/kl2.txt") if re.match(r"\s+1 ", l)][0].split()
got_kl, got_same = float(line[7]), float(line[14])
ok &= worst < 1e-4 and abs(got_kl - kl) <= 1e-5 + 1e-4 * kl and abs(got_same - 100.0 * same / scored) < 1e-3
print("base rows within %.2g of half a step; chunk 1 KL %.5f (here %.6f), same top %.3f%% (here %.3f%%)"
      % (worst, got_kl, kl, got_same, 100.0 * same / scored))
self = open(tmp + "/self.txt").read()
ppl = [float(x) for x in re.findall(r"\[\d\]([0-9.]+)", open(tmp + "/plain.txt").read())]
self_ppl = [float(l.split()[1]) for l in self.splitlines() if re.match(r"\s+\d ", l)]
self_kl = float(re.search(r"Mean +KLD : +(-?[0-9.]+)", self).group(1))
ok &= self_ppl == ppl and abs(self_kl) < 1e-4 and re.search(r"Same top p +: +100\.0+ ", self) is not None
print("own base: KL %.6f, perplexities %s" % (self_kl, "equal" if self_ppl == ppl else "differ"))
sys.exit(0 if ok else 1)
PY
# a base file that is not one, or not this model's, or cut short, or another context
kl_err() { "$bin" perplexity "$f32" --kl-divergence --kl-divergence-base "$1" "${@:3}" >/dev/null 2>"$tmp/err.txt"
  check [ $? -eq 1 ]; check grep -q "$2" "$tmp/err.txt"; }
kl_err "$tmp/text.txt" "not a base file"
kl_err "$tmp/none.kld" "cannot open"
head -c 5000 "$tmp/base.kld" >"$tmp/short.kld"
kl_err "$tmp/short.kld" "bytes, not the"
python3 -c "import sys; b=bytearray(open(sys.argv[1],'rb').read()); b[12:16]=(511).to_bytes(4,'little'); open(sys.argv[2],'wb').write(b)" \
  "$tmp/base.kld" "$tmp/vocab.kld"
kl_err "$tmp/vocab.kld" "vocabulary of 511 tokens"
kl_err "$tmp/base.kld" "written with --ctx $ctx, not 64" --ctx 64
"$bin" perplexity "$f32" --kl-divergence >/dev/null 2>&1
check [ $? -eq 2 ]
"$bin" perplexity "$f32" --kl-divergence --kl-divergence-base "$tmp/base.kld" -f "$tmp/text.txt" >/dev/null 2>&1
check [ $? -eq 2 ]
"$bin" perplexity "$f32" -f "$tmp/text.txt" --ctx $ctx --chunks 1 --kl-divergence-base "$tmp/no/such/dir.kld" \
  >/dev/null 2>"$tmp/err.txt"
check [ $? -eq 1 ]
check grep -q "cannot write" "$tmp/err.txt"
# --hellaswag: each task's choice as computed here from the logits of each
# ending's whole text (so no rewind), on the hybrid fixture; threads; errors
python3 - "$fx/README.md" "$tmp/hs.txt" <<'PY'
import random, re, sys
words = re.findall(r"[A-Za-z]+", open(sys.argv[1]).read())
random.seed(7)
out = []
for t in range(8):
    out.append("Task %d: " % t + " ".join(random.choice(words) for _ in range(random.randint(6, 20))))
    out.append(str(random.randint(0, 3)))
    out += [" ".join(random.choice(words) for _ in range(random.randint(2, 9))) for _ in range(4)]
open(sys.argv[2], "w").write("\n".join(out) + "\n")
PY
"$bin" perplexity "$q4" --hellaswag -f "$tmp/hs.txt" --threads 2 >"$tmp/hs2.txt" 2>/dev/null
check [ $? -eq 0 ]
"$bin" perplexity "$q4" --hellaswag -f "$tmp/hs.txt" --threads 1 >"$tmp/hs1.txt" 2>/dev/null
check cmp -s "$tmp/hs1.txt" "$tmp/hs2.txt"
mapfile -t hs <"$tmp/hs.txt"
for t in $(seq 0 7); do
  for e in 0 1 2 3; do
    "$bin" tokenize "$q4" "${hs[$((6 * t))]} ${hs[$((6 * t + 2 + e))]}" >"$tmp/hs.$t.$e.ids"
    "$bin" logits "$q4" --ids "$tmp/hs.$t.$e.ids" --out "$tmp/hs.$t.$e.f32" || fail=1
  done
done
python3 - "$tmp" "$tmp/hs.txt" "$tmp/hs2.txt" <<'PY' || fail=1
import math, struct, sys
tmp, lines, got = sys.argv[1], open(sys.argv[2]).read().split("\n"), open(sys.argv[3]).read().splitlines()
right, want = 0, []
for t in range(8):
    ids = [[int(x) for x in open("%s/hs.%d.%d.ids" % (tmp, t, e)).read().split()] for e in range(4)]
    cp = 0
    while all(cp < len(i) for i in ids) and len({i[cp] for i in ids}) == 1:
        cp += 1
    score = []
    for e in range(4):
        raw = open("%s/hs.%d.%d.f32" % (tmp, t, e), "rb").read()
        nv = len(raw) // 4 // len(ids[e])
        f = struct.unpack("<%df" % (len(raw) // 4), raw)
        lp = 0.0
        for j in range(cp - 1, len(ids[e]) - 1):  # row j predicts token j + 1
            row = f[j * nv:(j + 1) * nv]
            m = max(row)
            lp += row[ids[e][j + 1]] - m - math.log(math.fsum(math.exp(v - m) for v in row))
        score.append(lp / (len(ids[e]) - cp))
    best = max(range(4), key=lambda e: (score[e], -e))
    right += best == int(lines[6 * t + 1])
    want.append("%d\t%3.8f%%" % (t + 1, 100.0 * right / (t + 1)))
    lines[6 * t + 1] = str(best)
open(tmp + "/hs_best.txt", "w").write("\n".join(lines))  # every task's label: the choice made here
rows = [l.split("\t")[0] + "\t" + l.split("\t")[1] for l in got[1:9]]
print("hellaswag: rewind %s, from the whole texts' logits %s" % (rows[-1].split("\t")[1], want[-1].split("\t")[1]))
sys.exit(0 if rows == want and got[-1].startswith("Final HellaSwag acc_norm") else 1)
PY
# labelled with those choices, every task is right
"$bin" perplexity "$q4" --hellaswag -f "$tmp/hs_best.txt" >"$tmp/hsb.txt" 2>/dev/null
check grep -q "^Final HellaSwag acc_norm = 100.0000% .* over 8 tasks" "$tmp/hsb.txt"
printf 'a\n0\nb\nc\nd\n' >"$tmp/hs5.txt"
"$bin" perplexity "$q4" --hellaswag -f "$tmp/hs5.txt" >/dev/null 2>"$tmp/err.txt"
check [ $? -eq 1 ]
check grep -q "six lines a task" "$tmp/err.txt"
printf 'a b\n4\nc\nd\ne\nf\n' >"$tmp/hs6.txt"
"$bin" perplexity "$q4" --hellaswag -f "$tmp/hs6.txt" >/dev/null 2>"$tmp/err.txt"
check [ $? -eq 1 ]
check grep -q "not 0-3" "$tmp/err.txt"
"$bin" perplexity "$q4" --hellaswag -f "$tmp/hs.txt" --kl-divergence >/dev/null 2>&1
check [ $? -eq 2 ]
# errors
"$bin" perplexity "$fx/qwen35/qwen35-Q8_0.gguf" -f "$tmp/text.txt" --ctx 100000 >/dev/null 2>"$tmp/err.txt"
check [ $? -eq 1 ]
check grep -q "fewer than one chunk" "$tmp/err.txt"
"$bin" perplexity "$fx/qwen35/qwen35-Q8_0.gguf" >/dev/null 2>&1
check [ $? -eq 2 ]
"$bin" perplexity "$fx/qwen35/qwen35-Q8_0.gguf" -f "$tmp/missing.txt" >/dev/null 2>&1
check [ $? -eq 1 ]
exit $fail
