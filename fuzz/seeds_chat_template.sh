#!/usr/bin/env bash
# Seed corpus for fuzz_chat_template: the real templates of the fixtures.
set -eu
out="$1"; fx="${RW_FIXTURES:-../shared/fixtures}"
mkdir -p "$out"
[ -d "$fx/chat/templates" ] || exit 0
for f in "$fx"/chat/templates/*.jinja; do cp "$f" "$out/$(basename "$f")"; done
