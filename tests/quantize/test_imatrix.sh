#!/usr/bin/env bash
# rewind imatrix against llama-imatrix's own files (data/qwen35.imatrix.gguf
# and data/gpt-oss.imatrix.gguf: llama-imatrix -f calib.txt -c 128
# --chunks 4 on the fixtures' F32 files, made by hand):
# - the same file but for the last bits of the sums: the same metadata
#   (dataset, chunk count and size), the same tensors in the same order
#   with the same shapes, every count equal (the MoE's per expert too),
#   every sum within 1e-3 relative (llama.cpp's attention rounds otherwise;
#   measured: 1.2e-4 at most, and the first layer's inputs bit for bit);
# - the same file whatever the threads and the kernel tier (every tier
#   computes the same bits);
# - quantize --imatrix takes it;
# - a text shorter than one chunk and a missing text are clear errors.
set -u
REWIND="$(cd "$(dirname "${REWIND:-build/rewind}")" && pwd)/$(basename "${REWIND:-build/rewind}")"
FIX="$(cd "${RW_FIXTURES:-../shared/fixtures}" 2>/dev/null && pwd)" || { echo "skipped: no fixtures"; exit 77; }
[ -f "$FIX/qwen35/qwen35-F32.gguf" ] || { echo "skipped: no fixtures"; exit 77; }
command -v python3 > /dev/null || { echo "skipped: no python3"; exit 77; }
DATA="$(cd "$(dirname "$0")/data" && pwd)"
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
cd "$DATA" || exit 1

compare() { # OURS THEIRS: the layout equal, counts equal, sums close
  python3 - "$REWIND" "$1" "$2" <<'EOF'
import json, struct, subprocess, sys
rw, ours, theirs = sys.argv[1:4]
def load(p):
    j = json.loads(subprocess.check_output([rw, "inspect", p, "--json"]))
    data = open(p, "rb").read()
    vals = {t["name"]: struct.unpack("<%df" % (t["nbytes"] // 4), data[t["offset"]:t["offset"] + t["nbytes"]])
            for t in j["tensors"]}
    return j, vals
(ja, a), (jb, b) = load(ours), load(theirs)
if json.dumps(ja["metadata"]) != json.dumps(jb["metadata"]): sys.exit("metadata differs")
if [(t["name"], t["type"], t["ne"]) for t in ja["tensors"]] != [(t["name"], t["type"], t["ne"]) for t in jb["tensors"]]:
    sys.exit("tensor table differs")
worst = 0.0
for k in a:
    if k.endswith(".counts"):
        if a[k] != b[k]: sys.exit("%s: counts %s, llama-imatrix's %s" % (k, a[k][:4], b[k][:4]))
        continue
    for x, y in zip(a[k], b[k]):
        worst = max(worst, abs(x - y) / max(abs(y), 1e-30))
if worst > 1e-3: sys.exit("sums differ by %.3g relative" % worst)
print("%s: llama-imatrix's layout and counts, sums within %.2g" % (ours.rsplit("/", 1)[-1], worst))
EOF
}

for set in qwen35 gpt-oss; do
  out="$d/$set.imatrix.gguf"
  "$REWIND" imatrix "$FIX/$set/$set-F32.gguf" -f calib.txt -o "$out" --ctx 128 --chunks 4 --threads 2 2>"$d/err" ||
    { bad "imatrix $set: $(cat "$d/err")"; continue; }
  compare "$out" "$set.imatrix.gguf" || bad "$set: not llama-imatrix's statistics"
done

# The same bits whatever the threads and the tier.
f="$FIX/qwen35/qwen35-F32.gguf"
"$REWIND" imatrix "$f" -f calib.txt -o "$d/t1.gguf" --ctx 128 --chunks 2 --threads 1 2>/dev/null || bad "imatrix 1 thread"
"$REWIND" imatrix "$f" -f calib.txt -o "$d/ref.gguf" --ctx 128 --chunks 2 --threads 2 --kernels ref 2>/dev/null ||
  bad "imatrix ref"
"$REWIND" imatrix "$f" -f calib.txt -o "$d/t2.gguf" --ctx 128 --chunks 2 --threads 2 2>/dev/null || bad "imatrix"
cmp -s "$d/t1.gguf" "$d/t2.gguf" || bad "1 and 2 threads give other statistics"
cmp -s "$d/ref.gguf" "$d/t2.gguf" || bad "the ref tier gives other statistics"

# quantize takes it, and it weighs.
"$REWIND" quantize --imatrix "$d/t2.gguf" "$f" "$d/q.gguf" Q4_K_M 2>/dev/null || bad "quantize with our matrix"
"$REWIND" quantize "$f" "$d/p.gguf" Q4_K_M 2>/dev/null || bad "quantize"
[ "$(tail -c 100000 "$d/q.gguf" | sha256sum)" != "$(tail -c 100000 "$d/p.gguf" | sha256sum)" ] ||
  bad "our matrix did not change the quantized weights"

# Errors.
head -c 200 calib.txt > "$d/short.txt"
out=$("$REWIND" imatrix "$f" -f "$d/short.txt" -o "$d/x.gguf" 2>&1) && bad "a short text passed"
echo "$out" | grep -q "fewer than one chunk" || bad "short text: $out"
out=$("$REWIND" imatrix "$f" -f "$d/none.txt" -o "$d/x.gguf" 2>&1) && bad "a missing text passed"
echo "$out" | grep -q "cannot read" || bad "missing text: $out"
[ ! -e "$d/x.gguf" ] || bad "a failed run wrote a file"

[ "$fail" = 0 ] && echo "PASS test_imatrix.sh"
exit "$fail"
