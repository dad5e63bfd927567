#!/usr/bin/env bash
# Crash safety of the prefix cache's disk tier (docs/persistence.md): a
# server under load (conversations going on, a small memory budget so that
# entries are evicted, a small disk budget so that files are removed, a
# short write-through delay so that writes are always under way) is killed
# with SIGKILL at random moments, again and again, each time restarted on
# the same folder. After every restart: temporary files of the killed
# process are gone, no file failed validation, and a conversation goes on
# with tokens from disk, bitwise `rewind generate`'s answer. At the end
# `rewind cache-verify` reads every file in full: all valid.
# RW_CRASH_LOOPS (default 4) sets the number of kills; RW_CRASH_SEED the seed.
set -u
REWIND="${REWIND:-build/rewind}"
FIX="${RW_FIXTURES:-../shared/fixtures}"
F="$FIX/qwen35/qwen35-F32.gguf"
[ -f "$F" ] || { echo "skipped: no $F"; exit 77; }
command -v curl >/dev/null || { echo "skipped: no curl (scripts/setup.sh installs it)"; exit 77; }
LOOPS="${RW_CRASH_LOOPS:-4}"
RANDOM="${RW_CRASH_SEED:-24}"
d=$(mktemp -d)
pid= load=
fail() { echo "FAIL: $*"; [ -n "$load" ] && kill "$load" 2>/dev/null; [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; exit 1; }
trap '[ -n "$load" ] && kill "$load" 2>/dev/null; [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$d"' EXIT
. "$(dirname "$0")/serve_lib.sh"
dir="$d/cache"
ids=$(tr -s ' \n' ' ' < "$FIX/qwen35/qwen35.prompt.ids")
start() {
  serve_start "$d/log" "$F" --ctx 512 --kv f32 --threads 1 --parallel 4 --cache-bytes 3M --cache-dir "$dir" \
    --cache-dir-bytes 6M --cache-dir-delay 0.05
  pid=$serve_pid port=$serve_port
}
post() { # IDS N_GEN -> stdout: the response
  curl -s --max-time 60 "http://127.0.0.1:$port/v1/completions" \
    -d "{\"prompt\":[${1// /,}],\"max_tokens\":$2,\"temperature\":0,\"ignore_eos\":true,\"return_token_ids\":true}"
}
# conversations: prompt prefixes of different lengths, extended by their answers
load_loop() {
  local k=0
  while :; do
    k=$((k + 1))
    local n=$(( 10 + (k * 37) % 90 ))
    local p=$(echo $ids | cut -d' ' -f1-$n)
    local a=$(post "$p" 4 | grep -o '"token_ids":\[[0-9,]*\]' | sed 's/.*\[//; s/\]//; s/,/ /g')
    [ -n "$a" ] && post "$p $a $(echo $ids | cut -d' ' -f$((n + 1))-$((n + 8)))" 3 > /dev/null
  done
}
metric() { curl -s "http://127.0.0.1:$port/metrics" | grep "^$1" | sed 's/.* //'; }

# leftovers of crashes: a temporary file of a process of this host that is
# gone, and an old one of another host; both removed by the first scan
mkdir -p "$dir"
host=$(hostname | tr './' '__')
echo x > "$dir/0123456789abcdef-0000000000000000-3.rwc.tmp.$host.4194000.7"
echo x > "$dir/0123456789abcdef-0000000000000000-4.rwc.tmp.otherhost.12.0"
touch -d '2 hours ago' "$dir/0123456789abcdef-0000000000000000-4.rwc.tmp.otherhost.12.0"
echo x > "$dir/0123456789abcdef-0000000000000000-5.rwc.tmp.otherhost.13.0" # another host's, recent: left

for i in $(seq 1 "$LOOPS"); do
  start
  post "$(echo $ids | cut -d' ' -f1-5)" 1 > /dev/null # after the first lookup the folder has been scanned
  for t in "$dir"/*.tmp.*; do
    [ -e "$t" ] || continue
    case "$t" in *".$pid."*|*-5.rwc.tmp.otherhost.13.0) ;; *) fail "round $i: a dead process's temporary file is still there: $t" ;; esac
  done
  inv=$(metric 'rewind_prefix_cache_disk_invalid_total')
  [ "$inv" = 0 ] || fail "round $i: $inv files failed validation after a kill: $(cat "$d/log")"
  load_loop > /dev/null 2>&1 &
  load=$!
  sleep "$(( RANDOM % 15 / 10 )).$(( RANDOM % 10 ))"
  kill -9 "$pid"; wait "$pid" 2>/dev/null; pid=
  kill "$load" 2>/dev/null; wait "$load" 2>/dev/null; load=
  echo "round $i: killed with $(ls "$dir" | grep -c '\.rwc$') files, $(ls "$dir" | grep -c '\.tmp\.') temporary"
done

# after the last kill: a conversation from disk, bitwise generate's
start
P=$(echo $ids | cut -d' ' -f1-40)
A=$(post "$P" 4 | grep -o '"token_ids":\[[0-9,]*\]' | sed 's/.*\[//; s/\]//; s/,/ /g')
kill -TERM "$pid"; wait "$pid"; pid=
start
echo "$P $A $(echo $ids | cut -d' ' -f41-50)" > "$d/p"
post "$(cat "$d/p")" 5 > "$d/r.json"
grep -o '"token_ids":\[[0-9,]*\]' "$d/r.json" | sed 's/.*\[//; s/\]//; s/,/ /g' > "$d/got"
"$REWIND" generate "$F" --ids "$d/p" -n 5 --print-ids > "$d/want" || fail "generate failed"
cmp -s "$d/want" "$d/got" || fail "after the kills: server '$(cat "$d/got")' vs generate '$(cat "$d/want")'"
c=$(grep -o '"cached_tokens_disk":[0-9]*' "$d/r.json" | sed 's/.*://')
[ "${c:-0}" -ge 40 ] || fail "after the kills: only ${c:-0} tokens from disk: $(cat "$d/r.json")"
kill -TERM "$pid"; wait "$pid"; pid=
"$REWIND" cache-verify "$F" "$dir" --kv f32 --ctx 512 > "$d/verify" 2>&1 || fail "cache-verify: $(cat "$d/verify")"
echo "$(cat "$d/verify"); last turn: $c tokens from disk"
exit 0
