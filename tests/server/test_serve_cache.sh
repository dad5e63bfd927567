#!/usr/bin/env bash
# The prefix cache through the real server, on a hybrid model (DeltaNet +
# attention): an exact repeat, a shared prefix and an extended prompt report
# cached tokens and give exactly `rewind generate`'s greedy ids; with a tiny
# memory budget and a disk tier, a restarted server finds the entries on
# disk again (cached tokens from the disk tier in /metrics), and a corrupted
# file is removed, not trusted.
set -u
REWIND="${REWIND:-build/rewind}"
FIX="${RW_FIXTURES:-../shared/fixtures}"
F="$FIX/qwen35/qwen35-F32.gguf"
[ -f "$F" ] || { echo "skipped: no $F"; exit 77; }
command -v curl >/dev/null || { echo "skipped: no curl (scripts/setup.sh installs it)"; exit 77; }
d=$(mktemp -d)
pid=
fail() { echo "FAIL: $*"; [ -n "$pid" ] && kill "$pid" 2>/dev/null; exit 1; }
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$d"' EXIT

. "$(dirname "$0")/serve_lib.sh"
start() { # extra serve options...
  serve_start "$d/log" "$F" --ctx 1024 --kv f32 --threads 1 --parallel 2 "$@"
  pid=$serve_pid port=$serve_port
}
stop() { kill -TERM "$pid"; wait "$pid"; pid=; }

ids_of() { tr -s ' \n' ' ' < "$FIX/qwen35/qwen35.prompt.ids" | cut -d' ' -f"$1"; }
ask() { # IDS(space separated) N_GEN NAME -> $d/NAME.ids, $d/NAME.cached
  curl -s --max-time 120 "http://127.0.0.1:$port/v1/completions" \
    -d "{\"prompt\":[${1// /,}],\"max_tokens\":$2,\"temperature\":0,\"ignore_eos\":true,\"return_token_ids\":true}" \
    > "$d/$3.json"
  grep -o '"token_ids":\[[0-9,]*\]' "$d/$3.json" | sed 's/.*\[//; s/\]//; s/,/ /g' > "$d/$3.ids"
  grep -o '"cached_tokens":[0-9]*' "$d/$3.json" | sed 's/.*://' > "$d/$3.cached"
  echo "$1" > "$d/$3.prompt"
}
expect() { # NAME N_GEN
  "$REWIND" generate "$F" --ids "$d/$1.prompt" -n "$2" --print-ids > "$d/want" || fail "generate failed"
  cmp -s "$d/want" "$d/$1.ids" || fail "$1: server '$(cat "$d/$1.ids")' vs generate '$(cat "$d/want")'"
}
cached() { cat "$d/$1.cached"; }

start --cache-bytes 1G
A=$(ids_of 1-100)
ask "$A" 8 a; expect a 8
[ "$(cached a)" = 0 ] || fail "cold request reports $(cached a) cached tokens"
ask "$A" 8 a2; expect a2 8
[ "$(cached a2)" = 100 ] || fail "exact repeat: $(cached a2) of 100 cached"
B="$(ids_of 1-90) $(ids_of 101-120)"
ask "$B" 6 b; expect b 6
[ "$(cached b)" -ge 80 ] || fail "shared prefix of 90: only $(cached b) cached"
C="$A $(cat "$d/a.ids") $(ids_of 101-125)"
ask "$C" 6 c; expect c 6
[ "$(cached c)" -ge 100 ] || fail "extended prompt: only $(cached c) cached"
curl -s "http://127.0.0.1:$port/metrics" > "$d/m"
grep -q 'rewind_prompt_tokens_cached_total{tier="memory"} [1-9]' "$d/m" || fail "metrics: no memory-tier tokens"
# the running-state budget defaults to what --parallel sequences of --ctx
# positions hold (not a share of the machine's memory): a few MiB here, and
# more than twice that with twice the sequences of twice the length
state_budget() { curl -s "http://127.0.0.1:$port/metrics" | awk '/^rewind_budget_bytes\{kind="state"\}/ { print $2 }'; }
b1=$(state_budget)
[ -n "$b1" ] && [ "$b1" -gt 0 ] && [ "$b1" -lt $((256 << 20)) ] || fail "default state budget $b1"
stop
serve_start "$d/log" "$F" --ctx 2048 --kv f32 --threads 1 --parallel 4; pid=$serve_pid port=$serve_port
b2=$(state_budget)
[ "$b2" -gt $((2 * b1)) ] || fail "state budget $b2 at 4 x 2048 against $b1 at 2 x 1024"
stop
serve_start "$d/log" "$F" --ctx 1024 --threads 1 --max-state-bytes 12345678; pid=$serve_pid port=$serve_port
[ "$(state_budget)" = 12345678 ] || fail "--max-state-bytes not the budget: $(state_budget)"
stop

# only the two fine checkpoints, with prefaulted state memory, and the
# library's own retention (--checkpoints 0): the same answers, and the exact
# repeat still served whole
for k in 2 0; do
  start --cache-bytes 1G --checkpoints $k --prefault
  ask "$A" 8 k$k; expect k$k 8
  ask "$A" 8 k${k}r; expect k${k}r 8
  [ "$(cached k${k}r)" = 100 ] || fail "--checkpoints $k: exact repeat $(cached k${k}r) of 100 cached"
  ask "$B" 6 k${k}b; expect k${k}b 6
  stop
done

# a tiny memory tier and a disk tier: entries go to disk, a restart finds them
start --cache-bytes 1 --cache-dir "$d/cache"
ask "$A" 8 e1; expect e1 8
ask "$B" 6 e2; expect e2 6
stop
ls "$d/cache"/*.rwc > /dev/null 2>&1 || fail "no state files in the disk tier"
start --cache-bytes 64M --cache-dir "$d/cache"
ask "$A" 8 e3; expect e3 8
[ "$(cached e3)" -ge 90 ] || fail "after a restart: only $(cached e3) cached"
curl -s "http://127.0.0.1:$port/metrics" > "$d/m"
grep -q 'rewind_prompt_tokens_cached_total{tier="disk"} [1-9]' "$d/m" || fail "metrics: no disk-tier tokens"
stop
# a corrupted file is removed with a warning and never used
for f in "$d/cache"/*.rwc; do printf 'garbage' | dd of="$f" bs=1 seek=100 conv=notrunc 2>/dev/null; done
start --cache-bytes 64M --cache-dir "$d/cache"
ask "$B" 6 e4; expect e4 6
stop
grep -q "prefix cache: removing" "$d/log" || fail "no warning about the corrupted file: $(cat "$d/log")"
exit 0
