#!/usr/bin/env bash
# rewind bench state and rewind bench chat run and report (their numbers are
# for make bench; here only that they work: bench chat also checks that the
# cached answers equal the plain ones and fails otherwise).
set -u
bin="${REWIND:-build/rewind}"
fx="${RW_FIXTURES:-../shared/fixtures}"
m="$fx/qwen35/qwen35-F32.gguf"
[ -f "$m" ] || { echo "skipped: no fixtures at $fx"; exit 77; }
fail=0
out=$("$bin" bench state "$m" --prompt 300 --threads 2) || fail=1
grep -q "one recurrent checkpoint" <<<"$out" || fail=1
grep -q "^  16 " <<<"$out" || fail=1
out=$("$bin" bench chat "$m" --turns 5 --system-tokens 120 --gen 4 --threads 2) || fail=1
grep -q "regenerate" <<<"$out" || fail=1
grep -q "from the cache" <<<"$out" || fail=1
"$bin" bench chat "$m" --turns 2 --system-tokens 50 --gen 2 --json | grep -q '"turns"' || fail=1
[ $fail = 0 ] || echo "$out"
exit $fail
