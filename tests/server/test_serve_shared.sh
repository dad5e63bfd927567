#!/usr/bin/env bash
# Two replicas sharing one --cache-dir (docs/persistence.md):
# both serve conversations at once with small memory and disk budgets, so
# both write and evict files in the same folder. Checked: the completed
# files never exceed the disk budget (sampled while they run), no file
# fails validation (their counters, then `rewind cache-verify` reads every
# file in full), and a conversation started on replica A goes on on
# replica B with its prefix from the shared folder (cached_tokens_disk),
# bitwise `rewind generate`'s answer.
set -u
REWIND="${REWIND:-build/rewind}"
FIX="${RW_FIXTURES:-../shared/fixtures}"
F="$FIX/qwen35/qwen35-F32.gguf"
[ -f "$F" ] || { echo "skipped: no $F"; exit 77; }
command -v curl >/dev/null || { echo "skipped: no curl (scripts/setup.sh installs it)"; exit 77; }
d=$(mktemp -d)
pa= pb= la= lb=
cleanup() { for p in $la $lb; do kill "$p" 2>/dev/null; done; for p in $pa $pb; do kill -9 "$p" 2>/dev/null; done; }
fail() { echo "FAIL: $*"; cleanup; exit 1; }
trap 'cleanup; rm -rf "$d"' EXIT
. "$(dirname "$0")/serve_lib.sh"
dir="$d/shared"
BUDGET=$((5 << 20))
ids=$(tr -s ' \n' ' ' < "$FIX/qwen35/qwen35.prompt.ids")
opts="--ctx 512 --kv f32 --threads 1 --parallel 4 --cache-bytes 3M --cache-dir $dir --cache-dir-bytes $BUDGET --cache-dir-delay 0.05"
serve_start "$d/log-a" "$F" $opts; pa=$serve_pid; port_a=$serve_port
serve_start "$d/log-b" "$F" $opts; pb=$serve_pid; port_b=$serve_port
post() { # PORT IDS N_GEN -> stdout: the response
  curl -s --max-time 60 "http://127.0.0.1:$1/v1/completions" \
    -d "{\"prompt\":[${2// /,}],\"max_tokens\":$3,\"temperature\":0,\"ignore_eos\":true,\"return_token_ids\":true}"
}
answer() { grep -o '"token_ids":\[[0-9,]*\]' | sed 's/.*\[//; s/\]//; s/,/ /g'; }
load_loop() { # PORT OFFSET: conversations, each extended by its answer
  local k=$2
  while :; do
    k=$((k + 1))
    local n=$(( 10 + (k * 41) % 100 ))
    local p=$(echo $ids | cut -d' ' -f1-$n)
    local a=$(post "$1" "$p" 4 | answer)
    [ -n "$a" ] && post "$1" "$p $a $(echo $ids | cut -d' ' -f$((n + 1))-$((n + 6)))" 3 > /dev/null
  done
}
load_loop "$port_a" 0 > /dev/null 2>&1 & la=$!
load_loop "$port_b" 7 > /dev/null 2>&1 & lb=$!
max=0
for _ in $(seq 1 40); do
  sleep 0.1
  b=$(find "$dir" -name '*.rwc' -printf '%s\n' 2>/dev/null | awk '{s += $1} END {print s + 0}')
  [ "$b" -gt "$max" ] && max=$b
  [ "$b" -le "$BUDGET" ] || fail "the shared folder holds $b bytes of entries, over the budget of $BUDGET"
done
kill "$la" "$lb"; wait "$la" "$lb" 2>/dev/null; la= lb=
pending() { curl -s "http://127.0.0.1:$1/metrics" | grep '^rewind_prefix_cache_disk_pending' | sed 's/.* //'; }
# the load's last writes done on both: a write of B's after A's entry below
# would make room by evicting the oldest files, A's too under this budget
for _ in $(seq 1 200); do
  [ "$(pending "$port_a")" = 0 ] && [ "$(pending "$port_b")" = 0 ] && break
  sleep 0.1
done
for port in $port_a $port_b; do
  m=$(curl -s "http://127.0.0.1:$port/metrics")
  echo "$m" | grep -q '^rewind_prefix_cache_disk_invalid_total 0$' || fail "invalid files on :$port: $(echo "$m" | grep disk)"
  echo "$m" | grep -q '^rewind_prefix_cache_disk_writes_total [1-9]' || fail "no writes on :$port"
done
ev=$(curl -s "http://127.0.0.1:$port_a/metrics" | grep '^rewind_prefix_cache_disk_evictions_total' | sed 's/.* //')
ev_b=$(curl -s "http://127.0.0.1:$port_b/metrics" | grep '^rewind_prefix_cache_disk_evictions_total' | sed 's/.* //')

# a conversation started on A goes on on B from the shared folder
P=$(echo $ids | cut -d' ' -f30-100) # a prefix the load did not make
writes() { curl -s "http://127.0.0.1:$1/metrics" | grep '^rewind_prefix_cache_disk_writes_total' | sed 's/.* //'; }
w0=$(writes "$port_a")
A=$(post "$port_a" "$P" 6 | answer)
[ -n "$A" ] || fail "no answer from A"
for _ in $(seq 1 200); do # A's write-through: written, nothing queued
  [ "$(writes "$port_a")" -gt "$w0" ] && [ "$(pending "$port_a")" = 0 ] && break
  sleep 0.1
done
echo "$P $A $(echo $ids | cut -d' ' -f101-110)" > "$d/p"
post "$port_b" "$(cat "$d/p")" 5 > "$d/r.json"
answer < "$d/r.json" > "$d/got"
"$REWIND" generate "$F" --ids "$d/p" -n 5 --print-ids > "$d/want" || fail "generate failed"
cmp -s "$d/want" "$d/got" || fail "B: '$(cat "$d/got")' vs generate '$(cat "$d/want")'"
c=$(grep -o '"cached_tokens_disk":[0-9]*' "$d/r.json" | sed 's/.*://')
[ "${c:-0}" -ge 70 ] || fail "B took only ${c:-0} tokens from the shared folder: $(cat "$d/r.json")"
kill -TERM "$pa" "$pb"; wait "$pa" "$pb"; pa= pb=
b=$(find "$dir" -name '*.rwc' -printf '%s\n' | awk '{s += $1} END {print s + 0}')
[ "$b" -le "$BUDGET" ] || fail "after shutdown the folder holds $b bytes, over the budget of $BUDGET"
"$REWIND" cache-verify "$F" "$dir" --kv f32 --ctx 512 > "$d/verify" 2>&1 || fail "cache-verify: $(cat "$d/verify")"
echo "two replicas: at most $max of $BUDGET bytes; files evicted by A $ev, by B $ev_b; $(cat "$d/verify");" \
  "B continued A's conversation with $c tokens from disk"
exit 0
