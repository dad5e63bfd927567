#!/usr/bin/env bash
# The server is built on the public API: the objects of src/server reference
# no rw_ function that include/rewind.h does not declare (RW_API), but for
# the ones still listed in ALLOW below (each to be made public or replaced,
# then taken off the list: a listed name the objects no longer use fails
# too, so the list only shrinks). And librewind.so exports exactly the
# header's functions. The checker is shown to catch an object that calls an
# internal function.
set -u
cd "$(dirname "$0")/../.."
build="${RW_BUILD:-build}"
objs=("$build"/obj/src/server/*.o)
[ -e "${objs[0]}" ] || { echo "skipped: no server objects in $build/obj/src/server"; exit 77; }
command -v nm > /dev/null || { echo "skipped: no nm"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

# Internal functions the server still calls, with what they need first
# (none now: a new one must be made public instead of listed here).
ALLOW=()

# the header's functions: RW_API declarations, comments taken out
sed 's|/\*.*\*/||g' include/rewind.h | grep -o '^RW_API [^(]*(' | grep -o 'rw_[a-z0-9_]*($' | tr -d '(' |
  sort -u > "$tmp/header"
[ "$(wc -l < "$tmp/header")" -ge 30 ] || { echo "too few RW_API functions read from include/rewind.h"; exit 1; }
printf '%s\n' "${ALLOW[@]}" | sort -u > "$tmp/allow"

# stray: the rw_ functions objects $@ use but neither define nor find in
# the header or the allow list
stray() {
  nm --defined-only "$@" 2> /dev/null | awk 'NF == 3 { print $3 }' | sort -u > "$tmp/defined"
  nm -u "$@" 2> /dev/null | awk '{ print $NF }' | grep '^rw_' | sort -u > "$tmp/used"
  comm -23 "$tmp/used" "$tmp/defined" | comm -23 - "$tmp/header" > "$tmp/internal"
  comm -23 "$tmp/internal" "$tmp/allow"
}

out=$(stray "${objs[@]}")
if [ -n "$out" ]; then
  echo "src/server uses internal functions (not in include/rewind.h):"
  echo "$out"
  fail=1
fi
stale=$(comm -13 "$tmp/internal" "$tmp/allow")
if [ -n "$stale" ]; then
  echo "allow-listed but no longer used by src/server (take them off ALLOW):"
  echo "$stale"
  fail=1
fi
echo "src/server: $(wc -l < "$tmp/internal") internal functions still used (allowed: ${#ALLOW[@]})"

# the checker catches a call to an internal function
printf 'struct rw_model;\nint rw_model_seq_new(struct rw_model *m);\nint f(struct rw_model *m) { return rw_model_seq_new(m); }\n' \
  > "$tmp/bad.c"
if cc -c -o "$tmp/bad.o" "$tmp/bad.c" 2> /dev/null; then
  grep -qx rw_model_seq_new <<< "$(stray "${objs[@]}" "$tmp/bad.o")" ||
    { echo "the check missed an object calling rw_model_seq_new"; fail=1; }
fi

# the shared library exports exactly the header's functions
if [ -e "$build/librewind.so" ]; then
  nm -D --defined-only "$build/librewind.so" | awk 'NF == 3 { print $3 }' | sort -u > "$tmp/so"
  diff "$tmp/header" "$tmp/so" > "$tmp/d" || { echo "librewind.so exports other than the header:"; cat "$tmp/d"; fail=1; }
fi
exit $fail
