#!/usr/bin/env bash
# Seed corpus for fuzz_tokenize: the fixtures' tokenizer test texts.
set -eu
out="$1"; fx="${RW_FIXTURES:-../shared/fixtures}"
mkdir -p "$out"
[ -d "$fx/tokenizer" ] || exit 0
for f in "$fx"/tokenizer/*.inp; do head -c 4096 "$f" > "$out/$(basename "$f")"; done
