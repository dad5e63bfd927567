#!/usr/bin/env bash
# The module rules of docs/architecture.md hold for every include line, and
# the checker does catch a violation (a rule set without engine -> sampler).
set -u
cd "$(dirname "$0")/../.."
scripts/check_layers.sh || exit 1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/docs" "$tmp/scripts"
sed 's/^engine: base cache models sampler/engine: base cache models/' docs/architecture.md > "$tmp/docs/architecture.md"
cp scripts/check_layers.sh "$tmp/scripts/"
cp -r src bench tools "$tmp/"
if "$tmp/scripts/check_layers.sh" > "$tmp/out" 2>&1; then
  echo "the checker missed engine including sampler"; exit 1
fi
grep -q "may not use sampler" "$tmp/out" || { cat "$tmp/out"; exit 1; }
