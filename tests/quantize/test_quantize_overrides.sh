#!/usr/bin/env bash
# rewind quantize --tensor-type / --tensor-type-file against llama-quantize's
# files with the same options (data/tensor_type_golden.txt: their sha256,
# made by hand): patterns searched for in the names (alternation, classes,
# \d, upper case lowered), the first found deciding, overrides of the mix's
# own choices (the attention-V kind: its counter left as llama-quantize
# leaves it), of expert tensors, with --pure and into F16; and bad items
# are clear errors. A set whose F32 fixture is not the file the hashes were
# made from is skipped with a message.
set -u
REWIND="$(cd "$(dirname "${REWIND:-build/rewind}")" && pwd)/$(basename "${REWIND:-build/rewind}")"
FIX="$(cd "${RW_FIXTURES:-../shared/fixtures}" 2>/dev/null && pwd)" || { echo "skipped: no fixtures"; exit 77; }
[ -f "$FIX/qwen35/qwen35-F32.gguf" ] || { echo "skipped: no fixtures"; exit 77; }
GOLDEN="$(cd "$(dirname "$0")/data" && pwd)/tensor_type_golden.txt"
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
cd "$d" || exit 1
printf 'attn_qkv=q8_0\nblk\\.\\d+\\.ffn_down=q5_k  output=q6_k\n' > types.txt

declare -A want_sha
while read -r _ kind set sha; do
  [ "$kind" = fixture ] && want_sha[$set]=$sha
done < <(grep '^#   fixture ' "$GOLDEN")

n=0 skipped=""
while IFS='|' read -r set type sha args; do
  case "$set" in '#'* | '') continue ;; esac
  src="$FIX/$set/$set-F32.gguf"
  if [ "$(sha256sum "$src" | cut -c1-64)" != "${want_sha[$set]}" ]; then
    skipped="$skipped $set"
    continue
  fi
  read -r -a argv <<< "$args"
  "$REWIND" quantize "${argv[@]}" "$src" out.gguf "$type" 2>err || { bad "$set $type $args: $(cat err)"; continue; }
  [ "$(sha256sum out.gguf | cut -c1-64)" = "$sha" ] || bad "$set $type $args: not llama-quantize's file"
  n=$((n + 1))
done < "$GOLDEN"
[ -n "$skipped" ] && echo "skipped (not the fixtures the hashes were made from):$skipped"
[ "$n" -ge 8 ] || [ -n "$skipped" ] || bad "only $n files compared"
echo "$n files compared with llama-quantize --tensor-type's"

src="$FIX/qwen35/qwen35-F32.gguf"
for item in "attn_q" "=q8_0" "attn_q=" "attn_q=q9_9" "attn_q=iq2_xxs" "(attn=q8_0"; do
  out=$("$REWIND" quantize --tensor-type "$item" "$src" x.gguf Q4_K_M 2>&1) && bad "$item passed"
  echo "$out" | grep -q "tensor type override" || bad "$item: $out"
done
out=$("$REWIND" quantize --tensor-type-file none.txt "$src" x.gguf Q4_K_M 2>&1) && bad "a missing types file passed"
echo "$out" | grep -q "cannot read" || bad "missing types file: $out"
[ ! -e x.gguf ] || bad "a refused override wrote a file"

[ "$fail" = 0 ] && echo "PASS test_quantize_overrides.sh"
exit "$fail"
