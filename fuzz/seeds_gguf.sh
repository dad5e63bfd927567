#!/usr/bin/env bash
# Seed corpus for fuzz_gguf: small fixture GGUFs whole, and the first 32 KiB
# (the header and metadata) of the larger ones. $1 = output folder.
set -eu
out="$1"; fx="${RW_FIXTURES:-../shared/fixtures}"
mkdir -p "$out"
[ -d "$fx" ] || exit 0
for f in "$fx"/quant/zoo-Q4_K.gguf "$fx"/quant/zoo-Q8_0.gguf "$fx"/quant/zoo-IQ4_XS.gguf; do
  [ -f "$f" ] && cp "$f" "$out/$(basename "$f")"
done
for f in "$fx"/*/*.gguf; do
  head -c 32768 "$f" > "$out/head-$(basename "$f")"
done
