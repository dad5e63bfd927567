#!/usr/bin/env bash
# A Responses chain keeps its routing key in its ids (docs/scale-out.md): the
# first response of a chain is named after the balancer's X-Rewind-Route-Key,
# every later one after its previous response, whatever key that request
# carries; without a key the id is random. So nginx, which keys a request on
# its previous_response_id's first 16 digits, keeps the chain on one replica.
set -u
REWIND="${REWIND:-build/rewind}"
FIX="${RW_FIXTURES:-../shared/fixtures}"
F="$FIX/qwen3/qwen3-Q8_0.gguf"
[ -f "$F" ] || { echo "skipped: no $F"; exit 77; }
fail() { echo "FAIL: $*"; [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null; exit 1; }
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
. "$(dirname "$0")/serve_lib.sh"
serve_start "$d/log" "$F" --ctx 512 --threads 1 --parallel 1
pid=$serve_pid
url="http://127.0.0.1:$serve_port/v1/responses"
post() { # BODY [KEY] -> the response's id
  local h=()
  [ -n "${2:-}" ] && h=(-H "X-Rewind-Route-Key: $2")
  curl -s -H 'Content-Type: application/json' "${h[@]}" -d "$1" "$url" | grep -o '"id":"resp_[0-9a-f]*"' | head -n 1 | sed 's/"id":"\(.*\)"/\1/'
}
id1=$(post '{"input":"hello","max_output_tokens":2}' 0123456789abcdef)
case $id1 in resp_0123456789abcdef????????) ;; *) fail "first id '$id1' does not carry the route key" ;; esac
id2=$(post "{\"input\":\"more\",\"max_output_tokens\":2,\"previous_response_id\":\"$id1\"}" fedcba9876543210)
case $id2 in resp_0123456789abcdef????????) ;; *) fail "continued id '$id2' does not carry the chain's key" ;; esac
[ "$id2" != "$id1" ] || fail "two responses share the id $id1"
id3=$(post '{"input":"hello","max_output_tokens":2}')
case $id3 in resp_????????????????????????) ;; *) fail "id '$id3' without a key" ;; esac
id4=$(post '{"input":"hello","max_output_tokens":2}' 'not-hex-at-all!!')
case $id4 in resp_0123456789abcdef*|resp_not*) fail "a malformed key was used: $id4" ;; esac
kill -TERM "$pid"
wait "$pid"
pid=
echo ok
