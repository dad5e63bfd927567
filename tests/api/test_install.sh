#!/usr/bin/env bash
# make install into a temporary prefix, then the examples built only
# against the installed rewind.h and `pkg-config --cflags --libs rewind`
# (shared library) and again statically, run on a fixture model (a hybrid
# one: the prefix cache and state files matter most there); and the
# installed libraries' global symbols are rw_ ones only.
set -u
fx="${RW_FIXTURES:-../shared/fixtures}"
build="${RW_BUILD:-build}"
fail=0
check() { "$@" || { echo "FAILED: $*"; fail=1; }; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
san=()
mk=(BUILD="$build")
if [ "${RW_SANITIZE:-0}" = 1 ]; then
  sf="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
  san=($sf)
  mk+=(OPT=-O1 "SAN=$sf")
fi
make -s "${mk[@]}" install PREFIX="$tmp/prefix" > "$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; exit 1; }
for f in include/rewind.h lib/librewind.a lib/librewind.so lib/librewind.so.0 lib/pkgconfig/rewind.pc bin/rewind; do
  check test -e "$tmp/prefix/$f"
done
readelf -d "$tmp/prefix/lib/librewind.so" | grep -q "Library soname: \[librewind.so.0\]" || { echo "no soname"; fail=1; }

# both libraries export exactly the functions of the installed header (its
# declarations, comments taken out), nothing else
sed 's|/\*.*\*/||g' "$tmp/prefix/include/rewind.h" | grep -o '^RW_API [^(]*(' | grep -o 'rw_[a-z0-9_]*($' |
  tr -d '(' | sort -u > "$tmp/header.syms"
check test "$(wc -l < "$tmp/header.syms")" -ge 30
nm -D --defined-only "$tmp/prefix/lib/librewind.so" | awk 'NF == 3 { print $3 }' | sort -u > "$tmp/so.syms"
nm -g --defined-only "$tmp/prefix/lib/librewind.a" | awk 'NF == 3 { print $3 }' | sort -u > "$tmp/a.syms"
diff "$tmp/header.syms" "$tmp/so.syms" > "$tmp/d" || { echo "librewind.so exports other than the header:"; cat "$tmp/d"; fail=1; }
diff "$tmp/header.syms" "$tmp/a.syms" > "$tmp/d" || { echo "librewind.a exports other than the header:"; cat "$tmp/d"; fail=1; }
grep -q '^rw_model_open$' "$tmp/so.syms" || { echo "rw_model_open not exported"; fail=1; }
# the engine library needs no HTTP library (the server is the program's)
libs=$(PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig" pkg-config --libs --static rewind)
check test -n "$libs"
if grep -q microhttpd <<<"$libs"; then echo "pkg-config --libs --static rewind names an HTTP library: $libs"; fail=1; fi
if ldd "$tmp/prefix/lib/librewind.so" | grep -q microhttpd; then echo "librewind.so links an HTTP library"; fail=1; fi

export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"
for ex in chat cache; do
  cc -std=c17 -Wall -Wextra -Werror "${san[@]}" examples/$ex.c $(pkg-config --cflags --libs rewind) \
    -o "$tmp/$ex" 2> "$tmp/cc.log" || { cat "$tmp/cc.log"; fail=1; }
  cc -std=c17 -Wall -Wextra -Werror "${san[@]}" examples/$ex.c -o "$tmp/$ex-static" \
    $(pkg-config --static --cflags rewind) "$tmp/prefix/lib/librewind.a" $(pkg-config --static --libs-only-l rewind | sed 's/-lrewind//') \
    2> "$tmp/cc.log" || { cat "$tmp/cc.log"; fail=1; }
done
[ $fail = 0 ] || exit 1

m="$fx/qwen35/qwen35-Q8_0.gguf"
[ -f "$m" ] || { echo "skipped: no fixtures at $fx (install and symbols checked)"; exit 77; }
for v in "" -static; do
  out=$(LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/chat$v" "$m" "Hello there" 8 2>&1) || { echo "$out"; fail=1; }
  grep -q "^rewind 0\." <<<"$out" || { echo "chat$v: $out"; fail=1; }
  grep -q "generated: 8, pieces streamed" <<<"$out" || { echo "chat$v: $out"; fail=1; }
  out=$(LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/cache$v" "$m" "$tmp/state$v.rws" 2>&1) || { echo "$out"; fail=1; }
  grep -q "conversation 2: .* [1-9][0-9]* cached" <<<"$out" || { echo "cache$v: $out"; fail=1; }
  grep -q "cached answer equals" <<<"$out" || { echo "cache$v: $out"; fail=1; }
  grep -q "bitwise the same" <<<"$out" || { echo "cache$v: $out"; fail=1; }
done
# a missing file is an error with a message, not a crash
out=$(LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/chat" "$tmp/missing.gguf" hi 2>&1)
check test $? = 1
grep -q "cannot open .*missing.gguf" <<<"$out" || { echo "$out"; fail=1; }
exit $fail
