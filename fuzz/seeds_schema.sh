#!/usr/bin/env bash
# Seed corpus for fuzz_schema: the test schemas.
set -eu
out="$1"
mkdir -p "$out"
cp tests/grammar/schemas/*.json "$out/"
