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
#
# On a CPU with AVX-512 the first build folder that is not a sanitizer build
# runs again, for the tests that exercise the kernels and the models (the C
# tests of kernels/, models/ and cache/ but the long property test, and the
# logits and model CLI scripts: about 4 minutes on 2 cores), with
# RW_KERNELS=avx2, so that the AVX2 tier, which must compute the AVX-512
# tier's bits, is covered there too (named BUILD[avx2]:...).
set -u
cd "$(dirname "$0")/.."
export RW_FIXTURES="${RW_FIXTURES:-$(cd .. && pwd)/shared/fixtures}"
limit="${RW_TEST_TIMEOUT:-900}"
pass=0; fail=0; skip=0; failed=()
# run_one NAME TEST BUILD SAN [ENV=VALUE...]: runs one test and counts it
run_one() {
  local name=$1 t=$2 build=$3 san=$4; shift 4
  local start=$EPOCHREALTIME log rc secs
  log=$(mktemp)
  env "$@" RW_SANITIZE=$san REWIND="$build/rewind" RW_BUILD="$build" timeout "$limit" "$t" >"$log" 2>&1
  rc=$?
  secs=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.1f", b-a}')
  if [ $rc -eq 0 ]; then pass=$((pass+1)); echo "PASS  $name (${secs}s)"
  elif [ $rc -eq 77 ]; then skip=$((skip+1)); echo "SKIP  $name: $(tail -n 1 "$log")"
  else fail=$((fail+1)); failed+=("$name"); echo "FAIL  $name (exit $rc, ${secs}s)"; tail -n 30 "$log" | sed 's/^/    /'
  fi
  rm -f "$log"
}
avx2_build=""
for build in "$@"; do
  san=0; case "$build" in *asan*) san=1 ;; esac
  [ $san = 0 ] && [ -z "$avx2_build" ] && avx2_build=$build
  tests=()
  while IFS= read -r t; do tests+=("$t"); done < <(find "$build/tests" -type f -name 'test_*' -perm -u+x 2>/dev/null | sort)
  while IFS= read -r t; do tests+=("$t"); done < <(find tests -type f -name 'test_*.sh' 2>/dev/null | sort)
  for t in "${tests[@]}"; do run_one "$build:${t#"$build"/}" "$t" "$build" $san; done
done
# the AVX2 tier on an AVX-512 machine (see the head)
has_avx512() {
  local f
  for f in avx512f avx512bw avx512vl avx512dq avx512_vnni avx512_bf16; do
    grep -qw "$f" /proc/cpuinfo 2>/dev/null || return 1
  done
}
if [ -n "$avx2_build" ] && has_avx512; then
  tests=()
  while IFS= read -r t; do tests+=("$t"); done < <(find "$avx2_build/tests/kernels" "$avx2_build/tests/models" \
    "$avx2_build/tests/cache" -type f -name 'test_*' -perm -u+x ! -name test_seq_props 2>/dev/null | sort)
  tests+=(tests/cache/test_logits_hooks.sh tests/models/test_cli_models.sh)
  for t in "${tests[@]}"; do run_one "$avx2_build[avx2]:${t#"$avx2_build"/}" "$t" "$avx2_build" 0 RW_KERNELS=avx2; done
fi
for f in "${failed[@]+"${failed[@]}"}"; do echo "failed: $f"; done
echo "tests: $pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
