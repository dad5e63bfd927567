#!/usr/bin/env bash
# rewind bench ops: a quick run prints a row per kernel and valid JSON with a
# positive time for each; bad arguments are usage errors.
set -u
REWIND="${REWIND:-build/rewind}"
fail() { echo "FAIL: $*"; exit 1; }

if [ "${RW_SANITIZE:-0}" != 1 ]; then # the reference kernels are slow under the sanitizers: one run there
  out=$("$REWIND" bench ops --quick --ctx 512 --threads 2) || fail "text run exited $?"
  for op in attn_decode_f32 attn_decode_f16 attn_decode_f16_paged attn_prefill_f32 delta_rule conv1d ssm_scan; do
    echo "$out" | grep -q "^$op " || fail "no row for $op: $out"
  done
fi

json=$("$REWIND" bench ops --quick --ctx 512 --json) || fail "json run exited $?"
case "$json" in
  '{"threads":'*'"ops":[{"name":"attn_decode_f32"'*'}]}') ;;
  *) fail "unexpected JSON: $json" ;;
esac
n=$(echo "$json" | grep -Eo '"us_per_token":[0-9]*\.?[0-9]*[1-9]' | wc -l)
[ "$n" -eq 7 ] || fail "expected 7 positive us_per_token, got $n: $json"

"$REWIND" bench ops --ctx 10 >/dev/null 2>&1; [ $? -eq 2 ] || fail "--ctx below 512 is not a usage error"
"$REWIND" bench ops --bogus >/dev/null 2>&1; [ $? -eq 2 ] || fail "unknown option is not a usage error"
echo ok
