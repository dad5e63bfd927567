#!/usr/bin/env bash
# Seed corpus for fuzz_gbnf: the test grammars, each alone and followed by a
# NUL and some walk bytes; and the schemas' GBNF is left to fuzz_schema.
set -eu
out="$1"
mkdir -p "$out"
for f in tests/grammar/gbnf/*.gbnf; do
  b=$(basename "$f" .gbnf)
  cp "$f" "$out/$b.gbnf"
  { cat "$f"; printf '\0\001\002\003\377\020\041\100\007\010\011'; } > "$out/$b.walk"
done
