#!/usr/bin/env bash
# Every kernel tier computes the same bits: on every fixture model file this
# build loads, the logits of one sequence are bitwise equal on each tier this
# CPU runs (`--kernels ref|avx2|avx512|amx|neon`), and on the AVX2 tier with
# and without AVX-VNNI. A tier the CPU lacks is named as skipped; so is an
# architecture this build does not load. Also: --kernels refuses an unknown
# name and a tier this CPU lacks with a clear message (exit status 2), and
# RW_KERNELS naming either is said once and ignored (as RW_NUMERICS and
# RW_PREFETCH naming no setting).
set -u
bin="${REWIND:-build/rewind}"
fx="${RW_FIXTURES:-../shared/fixtures}"
[ -d "$fx" ] || { echo "skipped: no fixtures at $fx"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { if ! "$@"; then echo "FAILED: $*"; fail=1; fi; }
. "$(dirname "$0")/../fixture_lib.sh"
fixture_models "$bin" "$fx" || { echo "FAILED: rewind architectures"; exit 1; }
lacks="" # the tiers this CPU cannot run
for model in $fixture_kept; do
  # under the sanitizers (about ten times slower): the F32 file of each architecture
  [ "${RW_SANITIZE:-0}" = 1 ] && [[ "$model" != *-F32.gguf ]] && continue
  V=$(fixture_vocab "$bin" "$model")
  awk -v v="$V" 'BEGIN { srand(7); for (i = 0; i < 70; i++) printf "%d\n", int(rand() * (v - 2)) + 1 }' > "$tmp/a.ids"
  ran=""
  for k in ref avx2 avx2-novnni avx512 amx neon; do
    tier=${k%-novnni}; env=(); [ "$k" = avx2-novnni ] && env=(RW_AVX_VNNI=0)
    out=$(env "${env[@]}" "$bin" logits "$model" --kernels "$tier" --threads 2 --ids "$tmp/a.ids" --out "$tmp/$k.f32" 2>&1)
    rc=$?
    if [ $rc -eq 2 ] && grep -q "this CPU cannot run" <<<"$out"; then
      [[ " $lacks " == *" $tier "* ]] || lacks="$lacks $tier"
      continue
    fi
    [ $rc -eq 0 ] || { echo "FAILED: $(basename "$model") does not run on $k: $out"; fail=1; continue; }
    ran="$ran $k"
    [ "$k" = ref ] || check cmp -s "$tmp/ref.f32" "$tmp/$k.f32"
  done
  echo "$(basename "$model"): bitwise equal on$ran"
done
for k in $lacks; do echo "skipped: the $k tier (this CPU cannot run it)"; done
# errors: an unknown tier, and (where the CPU lacks one) a tier it cannot run
out=$("$bin" logits "$fx/qwen3/qwen3-F32.gguf" --kernels avx --ids "$tmp/a.ids" --out "$tmp/x.f32" 2>&1); rc=$?
check [ $rc -eq 2 ]; check grep -q -- '--kernels must be ref, avx2, avx512, amx or neon, not "avx"' <<<"$out"
for k in $lacks; do
  out=$("$bin" logits "$fx/qwen3/qwen3-F32.gguf" --kernels $k --ids "$tmp/a.ids" --out "$tmp/x.f32" 2>&1); rc=$?
  check [ $rc -eq 2 ]; check grep -q -- "--kernels $k: this CPU cannot run the $k kernels" <<<"$out"
  break
done
# RW_KERNELS naming an unknown tier (or one this CPU lacks) says so once and
# runs on the default tier, with the default tier's logits
printf '1\n2\n3\n' > "$tmp/a.ids"
out=$(RW_KERNELS=avx "$bin" logits "$fx/qwen3/qwen3-F32.gguf" --ids "$tmp/a.ids" --out "$tmp/e.f32" 2>&1); rc=$?
check [ $rc -eq 0 ]; check grep -q -- 'RW_KERNELS=avx ignored (kernels must be ref, avx2, avx512, amx or neon, not "avx"); using' <<<"$out"
check [ "$(grep -c 'RW_KERNELS=' <<<"$out")" -eq 1 ]
"$bin" logits "$fx/qwen3/qwen3-F32.gguf" --ids "$tmp/a.ids" --out "$tmp/d.f32" >/dev/null 2>&1
check cmp -s "$tmp/e.f32" "$tmp/d.f32"
for k in $lacks; do
  out=$(RW_KERNELS=$k "$bin" logits "$fx/qwen3/qwen3-F32.gguf" --ids "$tmp/a.ids" --out "$tmp/e.f32" 2>&1); rc=$?
  check [ $rc -eq 0 ]; check grep -q -- "RW_KERNELS=$k ignored (this CPU cannot run the $k kernels); using" <<<"$out"
  break
done
out=$(RW_NUMERICS=fastest RW_PREFETCH=l3 "$bin" logits "$fx/qwen3/qwen3-F32.gguf" --ids "$tmp/a.ids" --out "$tmp/e.f32" 2>&1); rc=$?
check [ $rc -eq 0 ]; check cmp -s "$tmp/e.f32" "$tmp/d.f32"
check grep -q -- 'RW_NUMERICS=fastest ignored (numerics must be auto, fast or ggml, not "fastest"); using auto' <<<"$out"
check grep -q -- "RW_PREFETCH=l3 ignored (rw_set_weight_prefetch: 'l3' is not auto, l1 or l2); using l" <<<"$out"
check [ "$(grep -c 'ignored' <<<"$out")" -eq 2 ]
exit $fail
