#!/usr/bin/env bash
# Checks every `#include "module/..."` under src/, bench/ and tools/ against
# the dependency rules in docs/architecture.md (its ```deps block): a file
# of module M may include M's own headers and those of the modules listed
# for M. Prints each violation; exit 1 if any, or if a module has no rule.
#
# Then the files of each module form a tree, no circles: from the object
# files of a build (RW_BUILD, default build/; `nm`: the global symbols each
# object defines and those it uses), file A depends on file B of the same
# module when A calls a function (or uses a variable) that B defines. A set
# of files that reach one another (a strongly connected set: a.c -> b.c ->
# a.c, or longer) is a circle: each is printed with the edges inside it and
# one symbol per edge, and fails the check unless all its files are in one
# entry of the allow-list below.
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

# Circles not broken yet (none now), one per line with a comment saying
# why: "module: files". A circle found passes if all its files are in one
# entry of its module; a new circle (or one grown by a file) fails. Remove
# an entry when its circle is broken.
allowed_circles=$(sed 's/#.*//' <<'EOF'
EOF
)
build=${RW_BUILD:-build}
if [ ! -d "$build/obj/src" ]; then
  echo "no object files in $build/obj: build first (make), the file circles are read from them"
  exit 1
fi
objs=$(find "$build/obj/src" "$build/obj/bench" "$build/obj/tools" -name '*.o' 2>/dev/null | sort)
circles=$(
  # "OBJECT: [ADDRESS] TYPE SYMBOL" -> "MODULE FILE U|D SYMBOL"
  [ -z "$objs" ] || nm -g -A $objs | awk -v build="$build/obj/" '
    {
      c = index($0, ":")
      path = substr($0, length(build) + 1, c - length(build) - 1)
      split(path, part, "/")
      if (part[1] == "src") { m = part[2]; f = substr(path, length(m) + 6) }
      else { m = part[1]; f = substr(path, length(m) + 2) }
      sub(/\.o$/, ".c", f)
      n = split(substr($0, c + 1), x, " ")
    }
    n == 2 && x[1] == "U" { print m, f, "U", x[2] }
    n == 3 && x[2] ~ /^[TDBRVGSC]$/ { print m, f, "D", x[3] }' | awk '
    # input "MODULE FILE U|D SYMBOL"; prints each strongly connected set of
    # two files or more (Tarjan), "MODULE: files | a.c->b.c (symbol) ...".
    $3 == "D" { def[$1 SUBSEP $4] = $2; node[$1 SUBSEP $2] = 1; next }
    { ref[++nref] = $1 SUBSEP $2 SUBSEP $4; node[$1 SUBSEP $2] = 1 }
    END {
      for (i = 1; i <= nref; i++) {
        split(ref[i], r, SUBSEP)
        k = r[1] SUBSEP r[3]
        if (!(k in def) || def[k] == r[2]) continue
        to = def[k]
        e = r[1] SUBSEP r[2] SUBSEP to
        if (e in why) continue
        why[e] = r[3]
        k = r[1] SUBSEP r[2]
        adj[k, ++nadj[k]] = to
      }
      for (n in node) {
        split(n, p, SUBSEP)
        if (!(n in idx)) strong(p[1], p[2])
      }
    }
    function strong(m, v,    i, w, k, set, cnt, line, a, b, t) {
      k = m SUBSEP v
      idx[k] = low[k] = ++counter
      stack[++sp] = v
      on[k] = 1
      for (i = 1; i <= nadj[k]; i++) {
        w = adj[k, i]
        if (!((m SUBSEP w) in idx)) {
          strong(m, w)
          if (low[m SUBSEP w] < low[k]) low[k] = low[m SUBSEP w]
        } else if (on[m SUBSEP w] && idx[m SUBSEP w] < low[k]) low[k] = idx[m SUBSEP w]
      }
      if (low[k] != idx[k]) return
      cnt = 0
      do { w = stack[sp--]; on[m SUBSEP w] = 0; set[++cnt] = w } while (w != v)
      if (cnt < 2) return
      for (a = 2; a <= cnt; a++)
        for (b = a; b > 1 && set[b - 1] > set[b]; b--) { t = set[b]; set[b] = set[b - 1]; set[b - 1] = t }
      line = m ":"
      for (a = 1; a <= cnt; a++) line = line " " set[a]
      line = line " |"
      for (a = 1; a <= cnt; a++)
        for (b = 1; b <= cnt; b++)
          if ((m SUBSEP set[a] SUBSEP set[b]) in why)
            line = line " " set[a] "->" set[b] " (" why[m SUBSEP set[a] SUBSEP set[b]] ")"
      print line
    }' | sort
)
while IFS= read -r c; do
  [ -n "$c" ] || continue
  mod=${c%%:*}
  files=${c#*: }
  files=${files%% |*}
  ok=0
  while IFS= read -r a; do
    [ "${a%%:*}" = "$mod" ] || continue
    ok=1
    for f in $files; do
      case " ${a#*:} " in *" $f "*) ;; *) ok=0 ;; esac
    done
    [ $ok = 1 ] && break
  done <<<"$allowed_circles"
  if [ $ok = 0 ]; then
    echo "circle in $c"
    bad=1
  fi
done <<<"$circles"
exit $bad
