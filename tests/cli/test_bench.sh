#!/usr/bin/env bash
# rewind bench kernels: a quick run prints the table and valid JSON with a
# positive figure for every measured type; bad arguments are usage errors.
# rewind bench model on a fixture: peak RSS and the weights resident (the
# whole small file, mapped once), decode's weight bytes against the read
# bandwidth, and --depth (runs after N tokens of context).
set -u
REWIND="${REWIND:-build/rewind}"
fail() { echo "FAIL: $*"; exit 1; }

out=$("$REWIND" bench kernels --quick --types Q8_0,Q4_K,F16 --threads 2) || fail "text run exited $?"
echo "$out" | grep -q '^read bandwidth' || fail "no bandwidth line: $out"
for t in Q8_0 Q4_K F16; do echo "$out" | grep -q "^$t " || fail "no row for $t"; done

json=$("$REWIND" bench kernels --quick --types Q6_K --json) || fail "json run exited $?"
case "$json" in
  '{"cpu":'*'"types":[{"type":"Q6_K"'*'}]}') ;;
  *) fail "unexpected JSON: $json" ;;
esac
for k in read_bandwidth_gbs one_row_gbs one_row_share_of_paired_read one_row_in_cache_gbs one_row_ref_gbs many_row_gops many_row_ref_gops; do
  echo "$json" | grep -Eq "\"$k\":[0-9]*\.?[0-9]*[1-9]" || fail "$k missing or not positive: $json"
done
# the int8 peak: positive where the CPU has AVX-512 VNNI (printed then), 0 elsewhere
if grep -qw avx512_vnni /proc/cpuinfo 2>/dev/null; then
  echo "$json" | grep -Eq '"int8_peak_gmacs_per_core":[0-9]*\.?[0-9]*[1-9]' || fail "no int8 peak: $json"
  echo "$out" | grep -q '^int8 peak of one core' || fail "no int8 peak line: $out"
else
  echo "$json" | grep -q '"int8_peak_gmacs_per_core":0' || fail "int8 peak without AVX-512 VNNI: $json"
fi

"$REWIND" bench kernels --types NOPE >/dev/null 2>&1; [ $? -eq 2 ] || fail "bad --types is not a usage error"
"$REWIND" bench nothing >/dev/null 2>&1; [ $? -eq 2 ] || fail "unknown benchmark is not a usage error"
"$REWIND" bench >/dev/null 2>&1; [ $? -eq 2 ] || fail "missing benchmark is not a usage error"
FIX="${RW_FIXTURES:-../shared/fixtures}"
M="$FIX/qwen35/qwen35-Q8_0.gguf"
if [ -f "$M" ]; then
  out=$("$REWIND" bench model "$M" --prompt 16 --gen 4 --reps 1 --threads 2) || fail "bench model exited $?"
  echo "$out" | grep -Eq '^peak RSS [0-9.]+ MiB, of which weights resident [0-9.]+ MiB' || fail "no memory line: $out"
  echo "$out" | grep -Eq '^decode reads [0-9.]+ MiB of weights a token: [0-9.]+ GB/s .*best read loop [0-9.]+ GB/s' ||
    fail "no decode bandwidth line: $out"
  json=$("$REWIND" bench model "$M" --prompt 16 --gen 4 --reps 1 --threads 2 --depth 40 --json) || fail "depth run exited $?"
  echo "$json" | grep -q '"depth":40' || fail "no depth in JSON: $json"
  size=$(stat -c %s "$M")
  # the weights resident: the file's pages, at most the file rounded to pages
  res=$(echo "$json" | sed -n 's/.*"weights_resident_mib":\([0-9.]*\).*/\1/p')
  awk -v r="$res" -v s="$size" 'BEGIN { exit !(r > 0 && r * 1048576 <= s + 4096) }' || fail "weights resident $res MiB for a $size-byte file"
  # of them in huge pages: 0 where the kernel maps the file with small pages, never more than the file
  huge=$(echo "$json" | sed -n 's/.*"weights_huge_page_mib":\([0-9.]*\).*/\1/p')
  awk -v h="$huge" -v s="$size" 'BEGIN { exit !(h != "" && h >= 0 && h * 1048576 <= s + 2097152) }' ||
    fail "weights in huge pages '$huge' MiB for a $size-byte file"
  echo "$out" | grep -Eq 'of them in huge pages' || fail "no huge-page share: $out"
  for k in prefill_tok_s decode_tok_s weight_bytes_per_token decode_weight_gbs read_bandwidth_gbs; do
    echo "$json" | grep -Eq "\"$k\":[0-9]*\.?[0-9]*[1-9]" || fail "$k missing or not positive: $json"
  done
  "$REWIND" bench model "$M" --depth -1 >/dev/null 2>&1; [ $? -eq 2 ] || fail "bad --depth is not a usage error"
fi
echo ok
