#!/usr/bin/env bash
# Replicas behind nginx (scripts/cluster.sh, deploy/nginx; docs/scale-out.md):
# 3 replicas of a hybrid fixture model (qwen35 Q8_0) sharing one
# --cache-dir, nginx routing by the njs prefix key on a consistent-hash ring.
# 20 conversations of 4 chat turns, each turn of all 20 sent at once (keyed
# by X-Session-Id, by `user`, or by their system prompt):
#   - affinity: turns 2 and 3 land on the replica of turn 1 (X-Rewind-Replica,
#     the replica's own name) and find their prefix in its cache; each
#     replica's rewind_requests_finished_total equals the requests that named
#     it, and more than one replica takes conversations;
#   - the answers (token ids and text) are bitwise a single server's;
#   - one replica is killed (SIGKILL) before turn 4: its conversations go to
#     other replicas, every other conversation stays where it was (only the
#     dead replica's keys move on the ring), answers still bitwise equal;
#     the moved conversations restore their prefix from the shared tier
#     (usage's cached_tokens_disk; the victim is killed once the folder is
#     quiet, i.e. its write-through is done).
# Plus the key rules for the endpoints the test does not generate on
# (/v1/completions, /v1/messages, /v1/responses chains), read from the
# X-Rewind-Route-Key / -Source headers nginx adds.
# Skipped (77) when nginx or its njs module is absent (scripts/setup.sh).
set -u
REWIND="${REWIND:-build/rewind}"
FIX="${RW_FIXTURES:-../shared/fixtures}"
F="$FIX/qwen35/qwen35-Q8_0.gguf"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
[ -f "$F" ] || { echo "skipped: no $F"; exit 77; }
command -v curl >/dev/null || { echo "skipped: no curl (scripts/setup.sh installs it)"; exit 77; }
if ! command -v nginx >/dev/null || [ ! -f /usr/lib/nginx/modules/ngx_http_js_module.so ]; then
  echo "skipped: nginx with the njs module is not installed (scripts/setup.sh installs nginx and libnginx-mod-http-js)"
  exit 77
fi
REWIND=$(cd "$(dirname "$REWIND")" && pwd)/$(basename "$REWIND")
export REWIND
d=$(mktemp -d)
pid=
OPTS=(--threads 1 --ctx 1024 --kv f32 --parallel 4 --cache-bytes 64M --cache-dir-delay 0.05)
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null
  RW_NO_INSTALL=1 "$ROOT/scripts/cluster.sh" down --dir "$d/cl" >/dev/null 2>&1
  rm -rf "$d"
}
fail() { echo "FAIL: $*"; [ -f "$d/cl/error.log" ] && tail -5 "$d/cl/error.log"; exit 1; }
trap cleanup EXIT
trap 'exit 1' TERM INT # a time limit's signal still stops the replicas and nginx
. "$(dirname "$0")/serve_lib.sh"

NC=20
sys_of() { # a system prompt of its own per conversation (~300 bytes)
  local s="You are assistant $1 of the river survey team. Answer in short sentences about waters in region $1."
  echo "$s Keep notes on basin $(( $1 * 7 )) and station $(( $1 * 13 + 5 )). Always cite the gauge of region $1."
}
# ask TAG PORT C T: turn T of conversation C through PORT -> $d/TAG.C.T.{h,json,ids,text,cached,replica}
ask() {
  local tag=$1 port=$2 c=$3 t=$4 f="$d/$1.$3.$4" hdr=() extra=""
  local msgs="$d/$tag.$c.msgs"
  [ "$t" = 1 ] && printf '{"role":"system","content":"%s"}' "$(sys_of "$c")" > "$msgs"
  printf ',{"role":"user","content":"Question %s of conversation %s: how high is the water today?"}' "$t" "$c" >> "$msgs"
  case $((c % 3)) in
    0) hdr=(-H "X-Session-Id: session-$c") ;;
    1) extra=",\"user\":\"user-$c\"" ;;
  esac
  curl -s --max-time 60 -D "$f.h" -o "$f.json" "${hdr[@]}" "http://127.0.0.1:$port/v1/chat/completions" \
    -d "{\"messages\":[$(cat "$msgs")],\"max_tokens\":4,\"temperature\":0,\"return_token_ids\":true$extra}"
  grep -q '"token_ids"' "$f.json" || { echo "$tag conversation $c turn $t: $(cat "$f.json")" > "$d/error"; return 1; }
  grep -o '"token_ids":\[[0-9,]*\]' "$f.json" > "$f.ids"
  grep -o '"content":"\([^"\\]\|\\.\)*"' "$f.json" | sed 's/^"content"://' > "$f.text"
  grep -o '"cached_tokens":[0-9]*' "$f.json" | sed 's/.*://' > "$f.cached"
  tr -d '\r' < "$f.h" | sed -n 's/^X-Rewind-Replica: //Ip' > "$f.replica"
  # the answer goes back as the next turn's history; without U+0000, which the server's JSON parser refuses
  printf ',{"role":"assistant","content":%s}' "$(sed 's/\\u0000//g' "$f.text")" >> "$msgs"
}
turn() { # TAG PORT T: turn T of every conversation at once (the server batches them)
  local c pids=""
  for c in $(seq 1 $NC); do ask "$1" "$2" "$c" "$3" & pids="$pids $!"; done
  for c in $pids; do wait "$c"; done
  [ -f "$d/error" ] && fail "$(cat "$d/error")"
  return 0
}
replica() { cat "$d/cl.$1.$2.replica"; }
cached() { cat "$d/cl.$1.$2.cached"; }
same_as_single() { # C T
  cmp -s "$d/cl.$1.$2.ids" "$d/one.$1.$2.ids" && cmp -s "$d/cl.$1.$2.text" "$d/one.$1.$2.text" ||
    fail "conversation $1 turn $2: cluster $(cat "$d/cl.$1.$2.ids") $(cat "$d/cl.$1.$2.text") vs one server $(cat "$d/one.$1.$2.ids") $(cat "$d/one.$1.$2.text")"
}

# the reference: one server holding every conversation
serve_start "$d/one.log" "$F" "${OPTS[@]}"
pid=$serve_pid
for t in 1 2 3 4; do turn one "$serve_port" "$t"; done
kill -TERM "$pid"; wait "$pid"; pid=

RW_NO_INSTALL=1 "$ROOT/scripts/cluster.sh" up --dir "$d/cl" --model "$F" -- "${OPTS[@]}" > "$d/up.log" 2>&1 ||
  fail "cluster up: $(cat "$d/up.log")"
. "$d/cl/cluster.env"
P=$CLUSTER_PORT

# turns 1-3: affinity, prefix hits on the replica, same answers
for t in 1 2 3; do
  turn cl "$P" "$t"
  for c in $(seq 1 $NC); do same_as_single "$c" "$t"; done
done
for c in $(seq 1 $NC); do
  r=$(replica "$c" 1)
  [ -n "$r" ] || fail "conversation $c: no X-Rewind-Replica header"
  for t in 2 3; do
    [ "$(replica "$c" "$t")" = "$r" ] || fail "conversation $c: turn 1 on $r, turn $t on $(replica "$c" "$t")"
    [ "$(cached "$c" "$t")" -gt 0 ] || fail "conversation $c turn $t on its replica $r: no cached tokens"
  done
done
i=0
for port in $REPLICA_PORTS; do
  i=$((i + 1))
  n_hdr=$(cat "$d"/cl.*.replica | grep -cx "r$i")
  n_met=$(curl -s "http://127.0.0.1:$port/metrics" | sed -n 's/^rewind_requests_finished_total //p')
  [ "$n_hdr" = "$n_met" ] || fail "replica r$i: $n_hdr requests named it, its counter says $n_met"
  [ "$n_hdr" -gt 0 ] && echo "r$i" >> "$d/used"
done
[ "$(wc -l < "$d/used")" -ge 2 ] || fail "every conversation went to one replica"

# kill the replica holding conversation 1 (a crash: no shutdown work)
victim=$(replica 1 1)
vi=${victim#r}
vpid=$(echo $REPLICA_PIDS | cut -d' ' -f"$vi")
# the victim's entries reach the shared folder about --cache-dir-delay after
# each request (write-through): wait until the folder is quiet (no write
# under way, no new file for half a second), then crash it. (Its
# rewind_prefix_cache_disk_pending gauge is refreshed only when the cache
# is used, so it is stale on an idle replica.)
quiet=0 last=
for _ in $(seq 1 100); do
  now_files=$(ls "$d/cl/cache")
  if [ "$now_files" = "$last" ] && ! grep -q '\.tmp\.' <<< "$now_files"; then
    quiet=$((quiet + 1)); [ $quiet -ge 5 ] && break
  else
    quiet=0
  fi
  last=$now_files
  sleep 0.1
done
[ $quiet -ge 5 ] || fail "the shared folder never became quiet: $(ls "$d/cl/cache" | tail -3)"
kill -KILL "$vpid"; while kill -0 "$vpid" 2>/dev/null; do sleep 0.05; done
moved=0 from_disk=0
turn cl "$P" 4
for c in $(seq 1 $NC); do
  same_as_single "$c" 4
  now=$(replica "$c" 4) before=$(replica "$c" 3)
  [ -n "$now" ] || fail "conversation $c turn 4: no answer from a replica"
  if [ "$before" = "$victim" ]; then
    [ "$now" != "$victim" ] || fail "conversation $c: served by the killed replica $victim"
    moved=$((moved + 1))
    # its entries were in the shared tier: the new replica restores its prefix from disk
    cd4=$(grep -o '"cached_tokens_disk":[0-9]*' "$d/cl.$c.4.json" | sed 's/.*://')
    [ "${cd4:-0}" -gt 0 ] || fail "conversation $c moved $victim -> $now: no cached tokens from the shared tier: $(cat "$d/cl.$c.4.json")"
    from_disk=$((from_disk + cd4))
  else
    [ "$now" = "$before" ] || fail "conversation $c moved $before -> $now though its replica is alive"
  fi
done
[ "$moved" -gt 0 ] || fail "no conversation was on the killed replica"
disk=0
for port in $REPLICA_PORTS; do
  v=$(curl -s --max-time 5 "http://127.0.0.1:$port/metrics" 2>/dev/null | sed -n 's/^rewind_prompt_tokens_cached_total{tier="disk"} //p')
  disk=$((disk + ${v:-0}))
done
[ "$disk" -ge "$from_disk" ] || fail "the replicas count $disk prompt tokens from disk, the answers $from_disk"
echo "failover: $moved conversations moved off $victim, same answers, $from_disk prompt tokens from the shared tier"

# the key rules, from the headers nginx adds (these endpoints need not exist on the replica)
key() { # PATH BODY [HEADER] -> "source key"
  local h=()
  [ -n "${3:-}" ] && h=(-H "$3")
  curl -s -o /dev/null -D "$d/kh" "${h[@]}" "http://127.0.0.1:$P$1" -d "$2"
  echo "$(tr -d '\r' < "$d/kh" | sed -n 's/^X-Rewind-Route-Source: //Ip') $(tr -d '\r' < "$d/kh" | sed -n 's/^X-Rewind-Route-Key: //Ip')"
}
expect_key() { [ "$1" = "$2" ] || fail "routing key: $3: '$1' vs '$2'"; }
long=$(printf 'x%.0s' $(seq 1 1100))
k1=$(key /v1/messages '{"model":"m","system":"S","messages":[{"role":"user","content":"hi"}]}')
k2=$(key /v1/messages '{"model":"m","system":[{"type":"text","text":"S"}],"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]},{"role":"assistant","content":"yo"},{"role":"user","content":"more"}]}')
expect_key "$k1" "$k2" "/v1/messages turns 1 and 2"
case "$k1" in prompt\ *) ;; *) fail "/v1/messages: source '$k1'" ;; esac
k3=$(key /v1/messages '{"model":"m","system":"S","messages":[{"role":"user","content":"other"}]}')
[ "$k1" != "$k3" ] || fail "/v1/messages: another first message, same key"
k1=$(key /v1/responses "{\"model\":\"m\",\"instructions\":\"$long\",\"input\":\"a\"}")
k2=$(key /v1/responses "{\"model\":\"m\",\"instructions\":\"$long\",\"input\":[{\"role\":\"user\",\"content\":\"b\"}]}")
expect_key "$k1" "$k2" "/v1/responses sharing a system prompt over K bytes"
kh=${k1#prompt }
k3=$(key /v1/responses "{\"model\":\"m\",\"previous_response_id\":\"resp_${kh}0123456789\",\"input\":\"c\"}")
expect_key "$k3" "chain $kh" "/v1/responses previous_response_id carries its root's key"
k1=$(key /v1/completions '{"model":"m","prompt":"abc"}')
k2=$(key /v1/completions '{"model":"n","prompt":"abc"}')
[ "$k1" != "$k2" ] || fail "/v1/completions: the model is not in the key"
k1=$(key /v1/completions '{"prompt":"abc","user":"u1"}')
k2=$(key /v1/chat/completions '{"messages":[],"user":"u1"}')
expect_key "$k1" "$k2" "user field"
k1=$(key /v1/completions '{"prompt":"abc","user":"u1"}' "X-Session-Id: s1")
case "$k1" in session\ *) ;; *) fail "X-Session-Id does not take precedence: '$k1'" ;; esac

# the replicas stop cleanly (under the sanitizers: no report in their logs)
RW_NO_INSTALL=1 "$ROOT/scripts/cluster.sh" down --dir "$d/cl" > /dev/null 2>&1
for l in "$d/one.log" "$d"/cl/r*.log; do
  grep -q -e 'ERROR: AddressSanitizer' -e 'ERROR: LeakSanitizer' -e 'runtime error' "$l" && fail "$(basename "$l"): $(cat "$l")"
done
exit 0
