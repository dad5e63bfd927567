#!/usr/bin/env bash
# test_matmul with RW_PANELS=0: no panels packed on the fly, so every row
# count above the few-row forms takes a kernel's group form (the K-quants'
# two groups a call from 17 rows), bitwise against the reference as with
# panels. RW_PANELS is read once per process, hence a run of its own.
set -u
bin="${REWIND:-build/rewind}"
t="$(dirname "$bin")/tests/kernels/test_matmul"
[ -x "$t" ] || { echo "skipped: no $t"; exit 77; }
RW_PANELS=0 "$t"
