#!/usr/bin/env bash
# Runs every test of the given build folders and prints one summary line.
#
#   scripts/run-tests.sh BUILD_DIR...
#
# A test is either a C program BUILD_DIR/tests/<module>/test_* or a shell
# script tests/<module>/test_*.sh (run once per build folder with REWIND set
# to that folder's binary). Exit status 0 = passed, 77 = skipped (e.g. no
# ../shared/fixtures in a user's clone), anything else = failed. Each test
# has a time limit (RW_TEST_TIMEOUT seconds, default 900).
set -u
cd "$(dirname "$0")/.."
export RW_FIXTURES="${RW_FIXTURES:-$(cd .. && pwd)/shared/fixtures}"
limit="${RW_TEST_TIMEOUT:-900}"
pass=0; fail=0; skip=0; failed=()
for build in "$@"; do
  san=0; case "$build" in *asan*) san=1 ;; esac
  tests=()
  while IFS= read -r t; do tests+=("$t"); done < <(find "$build/tests" -type f -name 'test_*' -perm -u+x 2>/dev/null | sort)
  while IFS= read -r t; do tests+=("$t"); done < <(find tests -type f -name 'test_*.sh' 2>/dev/null | sort)
  for t in "${tests[@]}"; do
    name="$build:${t#"$build"/}"
    start=$EPOCHREALTIME
    log=$(mktemp)
    RW_SANITIZE=$san REWIND="$build/rewind" RW_BUILD="$build" timeout "$limit" "$t" >"$log" 2>&1
    rc=$?
    secs=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.1f", b-a}')
    if [ $rc -eq 0 ]; then pass=$((pass+1)); echo "PASS  $name (${secs}s)"
    elif [ $rc -eq 77 ]; then skip=$((skip+1)); echo "SKIP  $name: $(tail -n 1 "$log")"
    else fail=$((fail+1)); failed+=("$name"); echo "FAIL  $name (exit $rc, ${secs}s)"; tail -n 30 "$log" | sed 's/^/    /'
    fi
    rm -f "$log"
  done
done
for f in "${failed[@]+"${failed[@]}"}"; do echo "failed: $f"; done
echo "tests: $pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
