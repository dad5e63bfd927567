#!/usr/bin/env bash
# The module rules of docs/architecture.md hold for every include line, and
# the checker does catch a violation (a rule set without engine -> sampler);
# no two files of a module call each other, directly or around a circle
# (read from the objects of RW_BUILD), and the checker does catch one.
set -u
cd "$(dirname "$0")/../.."
RW_BUILD=$(cd "${RW_BUILD:-build}" && pwd) || exit 1
export RW_BUILD
scripts/check_layers.sh || exit 1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/docs" "$tmp/scripts"
sed 's/^engine: base cache models sampler/engine: base cache models/' docs/architecture.md > "$tmp/docs/architecture.md"
cp scripts/check_layers.sh "$tmp/scripts/"
cp -r src bench tools "$tmp/"
mkdir -p "$tmp/empty/obj/src"
if RW_BUILD="$tmp/empty" "$tmp/scripts/check_layers.sh" > "$tmp/out" 2>&1; then
  echo "the checker missed engine including sampler"; exit 1
fi
grep -q "may not use sampler" "$tmp/out" || { cat "$tmp/out"; exit 1; }

# The file circles: a fake build whose two sampler objects call each other
# fails, and names both files and a symbol of each edge; the same circle
# between two files of an allowed circle (the first entry of the script's
# allow-list, or, while the list is empty, an entry added to a copy of the
# script) passes.
mkdir -p "$tmp/b/obj/src/sampler"
printf 'int circ_b(int);\nint circ_a(int x) { return x ? circ_b(x - 1) : 0; }\n' > "$tmp/a.c"
printf 'int circ_a(int);\nint circ_b(int x) { return x ? circ_a(x - 1) : 1; }\n' > "$tmp/b.c"
cc -c -o "$tmp/b/obj/src/sampler/circ_a.o" "$tmp/a.c" && cc -c -o "$tmp/b/obj/src/sampler/circ_b.o" "$tmp/b.c" || exit 1
if RW_BUILD="$tmp/b" scripts/check_layers.sh > "$tmp/out" 2>&1; then
  echo "the checker missed a circle between two files"; exit 1
fi
grep -q "^circle in sampler: circ_a.c circ_b.c | circ_a.c->circ_b.c (circ_b) circ_b.c->circ_a.c (circ_a)$" "$tmp/out" ||
  { cat "$tmp/out"; exit 1; }
rm -r "$tmp/b/obj/src/sampler"
entry=$(sed -n '/^allowed_circles=/,/^EOF$/p' scripts/check_layers.sh | sed 's/#.*//' | grep -v '^allowed_circles=' |
  grep -m1 '^[a-z_0-9]*: [^ ]*\.c [^ ]*\.c')
checker=scripts/check_layers.sh
if [ -z "$entry" ]; then
  entry="sampler: circ_a.c circ_b.c"
  cp docs/architecture.md "$tmp/docs/"
  sed "/^allowed_circles=/a $entry" scripts/check_layers.sh > "$tmp/scripts/check_layers.sh"
  checker="$tmp/scripts/check_layers.sh"
fi
set -- ${entry#*: }
mod=${entry%%:*}
mkdir -p "$tmp/b/obj/src/$mod"
cc -c -o "$tmp/b/obj/src/$mod/${1%.c}.o" "$tmp/a.c" && cc -c -o "$tmp/b/obj/src/$mod/${2%.c}.o" "$tmp/b.c" || exit 1
RW_BUILD="$tmp/b" bash "$checker" || { echo "an allowed circle ($mod: $1 $2) failed"; exit 1; }
exit 0
