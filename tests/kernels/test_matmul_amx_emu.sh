#!/usr/bin/env bash
# The AMX tier on a CPU without AMX: test_matmul with RW_AMX_EMULATE=1 runs
# its tier-against-reference and batch-invariance checks for the AMX tier's
# own types (Q8_0, Q4_K, Q5_K, Q6_K) on emulated tiles (amx_emu.h), bitwise
# as on the hardware; in the sanitizer build the emulated tile loads and
# stores are checked for bounds too. Skipped where the CPU has AMX (the
# plain test_matmul runs the tier on its tiles) or lacks AVX-512 VBMI.
set -u
bin="${REWIND:-build/rewind}"
t="$(dirname "$bin")/tests/kernels/test_matmul"
[ -x "$t" ] || { echo "skipped: no $t"; exit 77; }
RW_AMX_EMULATE=1 "$t"
