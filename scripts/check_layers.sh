#!/usr/bin/env bash
# Checks every `#include "module/..."` under src/, bench/ and tools/ against
# the dependency rules in docs/architecture.md (its ```deps block): a file
# of module M may include M's own headers and those of the modules listed
# for M. Prints each violation; exit 1 if any, or if a module has no rule.
set -u
cd "$(dirname "$0")/.."
declare -A allowed
while IFS= read -r line; do
  mod=${line%%:*}
  allowed[$mod]=" $mod ${line#*:} "
done < <(awk '/^```deps/{on=1; next} /^```/{on=0} on && NF' docs/architecture.md)
bad=0
for f in $(find src bench tools -name '*.[ch]' | sort); do
  case $f in
    src/*) mod=$(cut -d/ -f2 <<<"$f") ;;
    *) mod=${f%%/*} ;;
  esac
  if [ -z "${allowed[$mod]+x}" ]; then
    echo "$f: module '$mod' has no rule in docs/architecture.md"
    bad=1
    continue
  fi
  while IFS= read -r inc; do
    dep=${inc%%/*}
    case "${allowed[$mod]}" in
      *" $dep "*) ;;
      *) echo "$f: includes $inc, but $mod may not use $dep"; bad=1 ;;
    esac
  done < <(sed -n 's/^#include "\([a-z_0-9]*\/[^"]*\)".*/\1/p' "$f")
done
exit $bad
