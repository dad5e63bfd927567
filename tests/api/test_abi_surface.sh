#!/usr/bin/env bash
# The library's surface, from the build folder (no install):
# - build/librewind.so exports exactly the functions include/rewind.h marks
#   RW_API (nm -D --defined-only against the header);
# - how far the programs (rewind serve and the other commands: src/server,
#   src/cli, bench/, tools/, src/synth) still are from using only the
#   header: the library symbols their objects use that the header does not
#   declare, counted per program module against a ceiling below. The counts
#   may only go down (a new internal call from a program fails here); each
#   module's goal is 0. RW_VERBOSE=1 lists the symbols by defining module.
set -u
export LC_ALL=C # sort and join agree on the order
cd "$(dirname "$0")/../.."
build="${RW_BUILD:-build}"
so="$build/librewind.so"
[ -e "$so" ] || { echo "no $so (make all builds it)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

# the header's functions, comments taken out (as tests/api/test_install.sh)
sed 's|/\*.*\*/||g' include/rewind.h | grep -o '^RW_API [^(]*(' | grep -o 'rw_[a-z0-9_]*($' | tr -d '(' |
  sort -u > "$tmp/header"
[ "$(wc -l < "$tmp/header")" -ge 30 ] || { echo "too few RW_API functions read from the header"; exit 1; }
nm -D --defined-only "$so" | awk 'NF == 3 { print $3 }' | sort -u > "$tmp/so"
if ! diff "$tmp/header" "$tmp/so" > "$tmp/d"; then
  echo "$so exports other than the header's functions (< header only, > library only):"
  cat "$tmp/d"
  fail=1
fi

# Ceilings: the internal library symbols each program module still uses.
# cli: the synthesizer's command alone (cmd_synth.c; every other command
# object is on the header: tests/api/test_cli_symbols.sh). bench: 98 since
# the helpers that open models below the header moved from cli to
# bench/bench_models.c (rw_model_load); 99 with `bench experts`, which times
# the grouped product (rw_matmul_grouped) alone, as `bench kernels` does
# rw_matmul: a kernel entry no embedder calls, so not the header's; 100
# with `bench model`'s read loop over a model's stored panels
# (rw_model_largest_panels: the bandwidth over weights already resident).
declare -A ceiling=([server]=0 [cli]=0 [bench]=100 [tools]=0 [synth]=26)
# "SYMBOL MODULE" for every global the library's modules define
for d in "$build"/obj/src/*/; do
  mod=$(basename "$d")
  case $mod in cli | server | synth) continue ;; esac
  find "$d" -name '*.o' -print0 | xargs -0 -r nm -g --defined-only 2>/dev/null |
    awk -v m="$mod" 'NF == 3 { print $3, m }'
done | sort -u -k1,1 > "$tmp/libdefs"
[ -s "$tmp/libdefs" ] || { echo "no library objects under $build/obj/src"; exit 1; }
total=0
for mod in server cli bench tools synth; do
  case $mod in bench | tools) dir="$build/obj/$mod" ;; *) dir="$build/obj/src/$mod" ;; esac
  find "$dir" -name '*.o' -print0 | xargs -0 -r nm -u | awk 'NF == 2 { print $2 }' | sort -u > "$tmp/used"
  join "$tmp/used" "$tmp/libdefs" | awk 'NR == FNR { h[$1] = 1; next } !($1 in h)' "$tmp/header" - > "$tmp/internal"
  n=$(wc -l < "$tmp/internal")
  total=$((total + n))
  by=$(awk '{ c[$2]++ } END { for (m in c) printf "%s %d, ", m, c[m] }' "$tmp/internal" | sed 's/, $//')
  echo "$mod: $n internal library symbols (ceiling ${ceiling[$mod]}${by:+; from $by})"
  [ "${RW_VERBOSE:-0}" = 1 ] && sed 's/^/    /' "$tmp/internal"
  if [ "$n" -gt "${ceiling[$mod]}" ]; then
    echo "  $mod uses more of the library's internals than before: call the header's functions instead"
    echo "  (or, where the header lacks one, add it there); RW_VERBOSE=1 lists them"
    fail=1
  fi
done
echo "programs' internal library symbols in all: $total (the goal: 0)"
exit $fail
