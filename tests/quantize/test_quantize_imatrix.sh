#!/usr/bin/env bash
# rewind quantize --imatrix against llama-quantize --imatrix's own files:
# - the 35 files of data/imatrix_golden.txt (their sha256, made by hand with
#   llama-quantize from the same fixtures and matrices): qwen35 (a hybrid)
#   in 15 types, gpt-oss (MoE: a matrix per expert) in 5 incl. MXFP4_MOE,
#   qwen3 with a legacy .dat matrix, and the quantization zoo with --pure in
#   the 11 types that weigh (Q4_0..Q5_1, Q2_K..Q6_K, IQ4_NL, IQ4_XS) under
#   a synthetic matrix with zero-weight blocks; the same bytes for 1 and 2
#   threads;
# - the matrix changes the quantized bytes (not only the metadata);
# - a missing, junk or non-finite matrix, a model file given as one and a
#   matrix made for another model are clear errors that write nothing.
# A set whose F32 fixture is not the file the hashes were made from is
# skipped with a message.
set -u
REWIND="$(cd "$(dirname "${REWIND:-build/rewind}")" && pwd)/$(basename "${REWIND:-build/rewind}")"
FIX="$(cd "${RW_FIXTURES:-../shared/fixtures}" 2>/dev/null && pwd)" || { echo "skipped: no fixtures"; exit 77; }
[ -f "$FIX/qwen35/qwen35-F32.gguf" ] || { echo "skipped: no fixtures"; exit 77; }
DATA="$(cd "$(dirname "$0")/data" && pwd)"
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
src_of() { [ "$1" = zoo ] && echo "$FIX/quant/zoo-F32.gguf" || echo "$FIX/$1/$1-F32.gguf"; }

declare -A want_sha
while read -r _ kind set sha; do
  [ "$kind" = fixture ] && want_sha[$set]=$sha
done < <(grep '^#   fixture ' "$DATA/imatrix_golden.txt")

n=0 skipped="" threads=1
cd "$DATA" || exit 1
while read -r set matrix pure type sha; do
  case "$set" in '#'* | '') continue ;; esac
  src=$(src_of "$set")
  if [ "$(sha256sum "$src" | cut -c1-64)" != "${want_sha[$set]}" ]; then
    case " $skipped " in *" $set "*) ;; *) skipped="$skipped $set" ;; esac
    continue
  fi
  opt=()
  [ "$pure" = --pure ] && opt=(--pure)
  threads=$((3 - threads))
  out="$d/$set-$type.gguf"
  if ! "$REWIND" quantize "${opt[@]}" --imatrix "$matrix" "$src" "$out" "$type" --threads "$threads" 2>"$d/err"; then
    bad "$set $type: $(cat "$d/err")"
    continue
  fi
  [ "$(sha256sum "$out" | cut -c1-64)" = "$sha" ] || bad "$set $type ($matrix): not llama-quantize --imatrix's file"
  n=$((n + 1))
done < imatrix_golden.txt
[ -n "$skipped" ] && echo "skipped (not the fixtures the hashes were made from):$skipped"
[ "$n" -ge 30 ] || [ -n "$skipped" ] || bad "only $n files compared"
echo "$n files compared with llama-quantize --imatrix's"

# The matrix reaches the quantized bytes: beyond the header the files differ.
src="$FIX/qwen35/qwen35-F32.gguf"
"$REWIND" quantize "$src" "$d/plain.gguf" Q4_K_M 2>/dev/null || bad "plain Q4_K_M"
"$REWIND" quantize --imatrix qwen35.imatrix.gguf "$src" "$d/weighted.gguf" Q4_K_M 2>/dev/null || bad "weighted Q4_K_M"
[ "$(tail -c 100000 "$d/plain.gguf" | sha256sum)" != "$(tail -c 100000 "$d/weighted.gguf" | sha256sum)" ] ||
  bad "the importance matrix left the tensor data as it was"

# Errors.
expect_err() { # WHAT PATTERN ARGS...
  local what=$1 pat=$2 out rc
  shift 2
  out=$("$REWIND" quantize "$@" 2>&1)
  rc=$?
  [ "$rc" -ne 0 ] && [ "$rc" -lt 128 ] || bad "$what: exit $rc"
  echo "$out" | grep -q -- "$pat" || bad "$what: '$out' lacks '$pat'"
  [ ! -e "$d/x.gguf" ] || bad "$what: wrote the output"
}
expect_err "a missing matrix" "cannot open" --imatrix "$d/none.dat" "$src" "$d/x.gguf" Q4_K_M
printf 'junk' > "$d/junk.dat"
expect_err "a junk matrix" "importance matrix" --imatrix "$d/junk.dat" "$src" "$d/x.gguf" Q4_K_M
expect_err "a model as the matrix" "no imatrix metadata" --imatrix "$src" "$src" "$d/x.gguf" Q4_K_M
expect_err "another model's matrix" "values for blk" --imatrix gpt-oss.imatrix.gguf "$src" "$d/x.gguf" Q4_K_M
python3 - "$d/nan.dat" <<'EOF'
import struct, sys
name = b"blk.0.attn_q.weight"
vals = [1.0] * 64
vals[5] = float("nan")
open(sys.argv[1], "wb").write(struct.pack("<i", 1) + struct.pack("<i", len(name)) + name + struct.pack("<ii", 1, 64) +
                              struct.pack("<64f", *vals))
EOF
expect_err "a non-finite value" "non-finite" --imatrix "$d/nan.dat" "$src" "$d/x.gguf" Q4_K_M

[ "$fail" = 0 ] && echo "PASS test_quantize_imatrix.sh"
exit "$fail"
