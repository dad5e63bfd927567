#!/usr/bin/env bash
# make test-aarch64: the NEON tier, tested on an x86-64 Debian machine.
#
# Cross-compiles for AArch64 (Debian's gcc-aarch64-linux-gnu, the arm64
# builds of the libraries) into build-aarch64/ and runs, under qemu-aarch64
# (user-mode emulation; its default CPU has the dot-product and i8mm
# extensions) with RW_KERNELS=neon, the tests that prove the tier:
#   kernels/test_matmul      every type and numerics mode, NEON against the
#                            reference bitwise, and batch invariance
#   kernels/test_ops         the ops of every tier against the reference
#   kernels/test_ops_model   attention, SwiGLU, MoE routing per tier
#   kernels/test_ops_seq     the sequence kernels (DeltaNet, SSM scan, conv):
#                            bitwise batch / chunk invariance
#   kernels/test_quant_edge  the quantizers' edge cases (portable C on ARM)
#   base/test_threadpool     the pool's sleeps and wake-ups
#   cache/test_state_files   saved states: every tier reads every tier's
#   models/test_models_fixtures  RW_FIXTURE_MODEL=qwen3 (F32, F16, BF16, Q8_0,
#                            Q4_0, Q4_K_M, Q5_K_M, Q6_K against llama.cpp's
#                            goldens, and bit for bit under ggml numerics;
#                            batch and step logits bitwise equal: the forward
#                            pass's batch invariance) and qwen35 (the hybrid:
#                            DeltaNet layers)
#   kernels/test_tiers_logits.sh  every fixture file of every architecture
#                            (gemma3, gpt-oss, nemotron_h, lfm2 ...): the
#                            `rewind logits` of a sequence bitwise equal on
#                            the neon and ref tiers (the CLI under qemu)
# About 6 minutes on 2 cores after the build (about 7 from clean).
# Left out: cache/test_seq_props (the cache layer's invariants on every
# architecture) takes over 7 minutes under emulation even at its sanitizer
# size; it runs the same kernels as the tests above. The rest of the suite
# (server, chat, grammar, tokenizer: no kernel code) is architecture-
# independent C and stays with make test.
#
# The packages (cross compiler, arm64 libraries, qemu-user) are installed by
# scripts/setup.sh --aarch64 when missing. Speed is not measured here:
# emulation says nothing about a real ARM CPU (docs/arm.md).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --aarch64 --quiet

BUILD=build-aarch64
CC=aarch64-linux-gnu-gcc
export PKG_CONFIG_LIBDIR=/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig
TESTS=(kernels/test_matmul kernels/test_ops kernels/test_ops_model kernels/test_ops_seq kernels/test_quant_edge
       base/test_threadpool cache/test_state_files models/test_models_fixtures)
targets=("$BUILD/rewind")
for t in "${TESTS[@]}"; do targets+=("$BUILD/tests/$t"); done
# only these tests' binaries (and the library): the other tests are not run here
mkdir -p "$BUILD"
make -j"$(nproc)" CC="$CC" BUILD="$BUILD" "${targets[@]}" >"$BUILD/build.log" 2>&1 || {
  tail -n 40 "$BUILD/build.log"
  echo "test-aarch64: the cross build failed (log: $BUILD/build.log)"
  exit 1
}

# qemu runs the arm64 loader and libraries of the multiarch packages (in
# /lib and /usr/lib/aarch64-linux-gnu; setup.sh installs libc6:arm64). The
# cross toolchain's root (-L /usr/aarch64-linux-gnu) is only the fallback:
# the threaded tests ran over 10 times slower with it.
QEMU=(qemu-aarch64)
[ -e /lib/ld-linux-aarch64.so.1 ] || QEMU+=(-L /usr/aarch64-linux-gnu)
# the CLI for the shell tests: REWIND runs it under qemu
printf '#!/bin/sh\nexec %s "$(dirname "$0")/rewind" "$@"\n' "${QEMU[*]}" >"$BUILD/rewind-qemu"
chmod +x "$BUILD/rewind-qemu"
export RW_FIXTURES="${RW_FIXTURES:-$(cd .. && pwd)/shared/fixtures}"
export RW_KERNELS=neon
limit="${RW_TEST_TIMEOUT:-900}"
pass=0; fail=0; skip=0; failed=()
# run NAME [NEED=REGEX] ENV=VALUE... -- TEST: runs one test and counts it;
# with NEED its output must also match REGEX
run() {
  local name=$1 need=""; shift
  local envs=()
  while [ "$1" != "--" ]; do
    case "$1" in NEED=*) need=${1#NEED=} ;; *) envs+=("$1") ;; esac
    shift
  done
  shift
  local start=$EPOCHREALTIME log rc secs
  log=$(mktemp)
  if [[ "$1" == *.sh ]]; then # a shell test of tests/, the CLI under qemu
    env "${envs[@]+"${envs[@]}"}" REWIND="$BUILD/rewind-qemu" timeout "$limit" "tests/$1" >"$log" 2>&1
  else
    env "${envs[@]+"${envs[@]}"}" timeout "$limit" "${QEMU[@]}" "$BUILD/tests/$1" >"$log" 2>&1
  fi
  rc=$?
  if [ $rc -eq 0 ] && [ -n "$need" ] && ! grep -qE "$need" "$log"; then
    echo "    output lacks /$need/"; rc=1
  fi
  secs=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.1f", b-a}')
  if [ $rc -eq 0 ]; then pass=$((pass+1)); echo "PASS  aarch64[neon]:$name (${secs}s)"
  elif [ $rc -eq 77 ]; then skip=$((skip+1)); echo "SKIP  aarch64[neon]:$name: $(tail -n 1 "$log")"
  else fail=$((fail+1)); failed+=("$name"); echo "FAIL  aarch64[neon]:$name (exit $rc, ${secs}s)"; tail -n 30 "$log" | sed 's/^/    /'
  fi
  rm -f "$log"
}
set +e
for t in "${TESTS[@]}"; do
  case "$t" in
    kernels/test_matmul) # the NEON tier must have run (an emulator without the dot product would leave the reference alone)
      run "$t" NEED='^neon +Q8_0 +worst relative difference 0$' RW_TEST_VERBOSE=1 -- "$t" ;;
    models/test_models_fixtures)
      run "$t[qwen3]" RW_FIXTURE_MODEL=qwen3 -- "$t"
      run "$t[qwen35]" RW_FIXTURE_MODEL=qwen35 -- "$t" ;;
    *) run "$t" -- "$t" ;;
  esac
done
# every architecture's logits, neon against ref (the neon tier must have run)
run kernels/test_tiers_logits.sh NEED=': bitwise equal on ref neon$' -- kernels/test_tiers_logits.sh
for f in "${failed[@]+"${failed[@]}"}"; do echo "failed: aarch64[neon]:$f"; done
echo "aarch64 tests: $pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
