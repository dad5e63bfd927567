#!/usr/bin/env bash
# rewind bench kernels: a quick run prints the table and valid JSON with a
# positive figure for every measured type; bad arguments are usage errors.
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
for k in read_bandwidth_gbs one_row_gbs one_row_ref_gbs many_row_gops many_row_ref_gops; do
  echo "$json" | grep -Eq "\"$k\":[0-9]*\.?[0-9]*[1-9]" || fail "$k missing or not positive: $json"
done

"$REWIND" bench kernels --types NOPE >/dev/null 2>&1; [ $? -eq 2 ] || fail "bad --types is not a usage error"
"$REWIND" bench nothing >/dev/null 2>&1; [ $? -eq 2 ] || fail "unknown benchmark is not a usage error"
"$REWIND" bench >/dev/null 2>&1; [ $? -eq 2 ] || fail "missing benchmark is not a usage error"
echo ok
