#!/usr/bin/env bash
# rewind serve's API key without argv: --api-key-file FILE
# and the environment variable REWIND_API_KEY; the key is not in the
# process's command line (ps); requests without it get 401, with it 200;
# --api-key and --api-key-file together are refused.
set -u
REWIND="${REWIND:-build/rewind}"
FIX="${RW_FIXTURES:-../shared/fixtures}"
F="$FIX/qwen3/qwen3-Q8_0.gguf"
[ -f "$F" ] || { echo "skipped: no $F"; exit 77; }
command -v curl >/dev/null || { echo "skipped: no curl (scripts/setup.sh installs it)"; exit 77; }
fail() { echo "FAIL: $*"; [ -n "${serve_pid:-}" ] && kill "$serve_pid" 2>/dev/null; exit 1; }
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
. "$(dirname "$0")/serve_lib.sh"

code() { # KEY (or "") -> the status of GET /v1/models
  if [ -n "$1" ]; then curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $1" "http://127.0.0.1:$serve_port/v1/models"
  else curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$serve_port/v1/models"; fi
}

printf 'file-key-123\n' > "$d/key"
serve_start "$d/log" "$F" --ctx 256 --threads 1 --api-key-file "$d/key"
tr '\0' ' ' < /proc/$serve_pid/cmdline | grep -q file-key-123 && fail "the key is in the command line"
[ "$(code file-key-123)" = 200 ] || fail "the key from the file: $(code file-key-123)"
[ "$(code "")" = 401 ] || fail "no key: $(code "")"
[ "$(code file-key-12)" = 401 ] || fail "a wrong key: $(code file-key-12)"
kill -TERM "$serve_pid"; wait "$serve_pid"

REWIND_API_KEY=env-key-456 serve_start "$d/log" "$F" --ctx 256 --threads 1
tr '\0' ' ' < /proc/$serve_pid/cmdline | grep -q env-key-456 && fail "the key is in the command line"
[ "$(code env-key-456)" = 200 ] || fail "the key from REWIND_API_KEY: $(code env-key-456)"
[ "$(code "")" = 401 ] || fail "no key (env): $(code "")"
kill -TERM "$serve_pid"; wait "$serve_pid"

"$REWIND" serve "$F" --api-key a --api-key-file "$d/key" --port 0 2> "$d/err" && fail "two keys accepted"
grep -q "once" "$d/err" || fail "two keys: $(cat "$d/err")"
: > "$d/empty"
"$REWIND" serve "$F" --api-key-file "$d/empty" --port 0 2> "$d/err" && fail "an empty key file accepted"
grep -q "empty" "$d/err" || fail "empty key file: $(cat "$d/err")"
echo "ok"
