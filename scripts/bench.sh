#!/usr/bin/env bash
# Runs the benchmarks (make bench). Extra arguments go to each benchmark,
# e.g. scripts/bench.sh --threads 2 or scripts/bench.sh --json.
#
#   rewind bench kernels   matmul per weight type: one-row GB/s vs the
#                          measured read bandwidth, 512-row GOP/s, ref speedups
set -eu
cd "$(dirname "$0")/.."
build/rewind bench kernels "$@"
