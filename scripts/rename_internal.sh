#!/usr/bin/env bash
# Gives every global symbol of the library that lacks the rw_ prefix the one
# internal naming scheme, rw_<module>__<name> with the module's folder name
# (as rw_chat__, rw_pcache__, rw_server__ already are; the tokenizer keeps
# its rw_tok__): srv_x -> rw_server__x, eng_x -> rw_engine__x,
# mdl_x -> rw_models__x, tok_x -> rw_tok__x; other names get the prefix in
# front (rw_chat__v_int, rw_tok__str_map_get, rw_cache__rec_buf_alloc). The symbols are
# read from a built tree's objects (BUILD, default build), so the script
# also renames what was added since; identifiers are replaced as whole words
# in src/, tests/, bench/, tools/ and fuzz/. Run it, rebuild, run the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
# the old prefix a module's names carry, and the module's new one
old_prefix() {
  case $1 in server) echo srv ;; engine) echo eng ;; models) echo mdl ;; tokenizer) echo tok ;; pcache) echo pc ;; *) echo "$1" ;; esac
}
new_prefix() {
  case $1 in tokenizer) echo tok ;; *) echo "$1" ;; esac
}
map=$(mktemp)
trap 'rm -f "$map"' EXIT
for o in $(find "$build/obj/src" -name '*.o' | sort); do
  mod=$(cut -d/ -f3 <<<"${o#"$build"/}") # obj/src/MODULE/file.o
  [ "$mod" = cli ] && continue
  s=$(old_prefix "$mod")
  t=$(new_prefix "$mod")
  nm -g --defined-only "$o" | awk 'NF == 3 && $3 !~ /^rw_/ {print $3}' | while read -r sym; do
    base=${sym#"$s"_}
    echo "$sym rw_${t}__${base}"
  done
done | sort -u > "$map"
[ -s "$map" ] || { echo "rename_internal: nothing to rename"; exit 0; }
# one sed script, longest names first (no name is renamed inside a longer one: \b on both sides)
sedf=$(mktemp)
trap 'rm -f "$map" "$sedf"' EXIT
sort -k1,1 -r "$map" | awk '{printf "s/\\<%s\\>/%s/g\n", $1, $2}' > "$sedf"
files=$(grep -rlwF -f <(cut -d' ' -f1 "$map") src tests bench tools fuzz --include='*.c' --include='*.h' || true)
[ -n "$files" ] && sed -i -f "$sedf" $files
echo "rename_internal: $(wc -l < "$map") symbols in $(wc -w <<<"$files") files"
