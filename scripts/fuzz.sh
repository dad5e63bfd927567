#!/usr/bin/env bash
# Builds and runs the libFuzzer harnesses (fuzz/fuzz_*.c) with clang.
#
#   scripts/fuzz.sh build   build build-fuzz/fuzz_* only
#   scripts/fuzz.sh ci      build, replay each harness's corpus (seeds from
#                           fuzz/seeds_<name>.sh plus the regression inputs in
#                           tests/corrupt/<name>/), then fuzz each for
#                           FUZZ_SECONDS (default 20) seconds
#
# A crash leaves its input in build-fuzz/crashes/; fix the bug and add the
# input to tests/corrupt/<name>/ so it is replayed forever after.
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-build}"
export RW_FIXTURES="${RW_FIXTURES:-$(cd .. && pwd)/shared/fixtures}"
SAN="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all -Wno-unknown-warning-option"
# Only the modules the harnesses exercise: parsers of untrusted input.
make -s BUILD=build-fuzz CC=clang OPT=-O1 SAN="$SAN" LIB_MODULES="base gguf chat tokenizer grammar" build-fuzz/librewind.a
libs="-lm -pthread $(pkg-config --libs jansson libpcre2-8 libmicrohttpd) -lunistring"
harnesses=()
for src in fuzz/fuzz_*.c; do
  name=$(basename "$src" .c); name=${name#fuzz_}
  clang -std=c17 -g -O1 -D_GNU_SOURCE -Isrc -Iinclude -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
    -o "build-fuzz/fuzz_$name" "$src" build-fuzz/librewind.a $libs
  harnesses+=("$name")
done
[ "$mode" = "ci" ] || exit 0
mkdir -p build-fuzz/crashes
for name in "${harnesses[@]}"; do
  corpus="build-fuzz/corpus-$name"
  mkdir -p "$corpus"
  [ -x "fuzz/seeds_$name.sh" ] && "fuzz/seeds_$name.sh" "$corpus"
  dirs=("$corpus")
  [ -d "tests/corrupt/$name" ] && dirs+=("tests/corrupt/$name")
  echo "fuzz $name: replaying $(find "${dirs[@]}" -type f | wc -l) inputs"
  "build-fuzz/fuzz_$name" -runs=0 "${dirs[@]}" 2>&1 | tail -n 2
  echo "fuzz $name: fuzzing for ${FUZZ_SECONDS:-20}s"
  "build-fuzz/fuzz_$name" -max_total_time="${FUZZ_SECONDS:-20}" -max_len=65536 -timeout=30 -rss_limit_mb=4096 \
    -artifact_prefix=build-fuzz/crashes/ -print_final_stats=0 "$corpus" 2>&1 | tail -n 3
done
echo "fuzz: all harnesses passed"
