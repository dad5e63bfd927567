#!/usr/bin/env bash
# rewind bench experts: a small run prints a row per type and shape with a
# figure for each row count, valid JSON with a positive GOP/s for each, and
# bad arguments are usage errors.
set -u
REWIND="${REWIND:-build/rewind}"
fail() { echo "FAIL: $*"; exit 1; }

out=$("$REWIND" bench experts --experts 4 --rows 1,9,17 --types q4_K,q6_K --threads 2) || fail "text run exited $?"
for t in Q4_K Q6_K; do
  for s in gate/up down; do
    line=$(echo "$out" | grep "^$t *$s ") || fail "no row for $t $s: $out"
    n=$(echo "$line" | grep -o ' ms ' | wc -l)
    [ "$n" -eq 3 ] || fail "expected 3 timings in: $line"
  done
done

json=$("$REWIND" bench experts --experts 2 --rows 1,16 --types q4_K --json) || fail "json run exited $?"
case "$json" in
  '{"cpu":'*'"results":[{"type":"Q4_K","shape":"gate/up"'*'}]}') ;;
  *) fail "unexpected JSON: $json" ;;
esac
n=$(echo "$json" | grep -Eo '"gops":[0-9]*\.?[0-9]*[1-9]' | wc -l)
[ "$n" -eq 4 ] || fail "expected 4 positive gops, got $n: $json"

"$REWIND" bench experts --rows 0 >/dev/null 2>&1; [ $? -eq 2 ] || fail "--rows 0 is not a usage error"
"$REWIND" bench experts --rows 1,x >/dev/null 2>&1; [ $? -eq 2 ] || fail "--rows 1,x is not a usage error"
"$REWIND" bench experts --types bogus >/dev/null 2>&1; [ $? -eq 2 ] || fail "--types bogus is not a usage error"
"$REWIND" bench experts --bogus >/dev/null 2>&1; [ $? -eq 2 ] || fail "unknown option is not a usage error"
echo ok
