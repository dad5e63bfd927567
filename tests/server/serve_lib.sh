# serve_lib.sh - sourced by the server tests (not a test itself).
#
# serve_start LOG MODEL [serve options...]
#   starts "$REWIND" serve MODEL --port 0 [options] in the background with
#   its stderr in LOG, waits up to 60 s for it to listen, and sets
#   serve_pid and serve_port. Calls the test's own fail() if the server
#   exits first or never listens (then killed here).
serve_start() {
  local log=$1
  shift
  rm -f "$log" # never a previous server's port: the child may open the file after the first look
  "$REWIND" serve "$@" --port 0 2> "$log" &
  serve_pid=$!
  serve_port=
  for _ in $(seq 1 600); do
    serve_port=$(grep -ao 'listening on http://127.0.0.1:[0-9]*' "$log" 2>/dev/null | sed 's/.*://')
    [ -n "$serve_port" ] && return 0
    kill -0 "$serve_pid" 2>/dev/null || fail "server exited: $(cat "$log")"
    sleep 0.1
  done
  kill "$serve_pid" 2>/dev/null
  fail "server did not start: $(cat "$log")"
}

# serve_post PORT PATH BODY OUT
#   POSTs BODY (JSON) to http://127.0.0.1:PORT/PATH, the answer in OUT;
#   prints the HTTP status.
serve_post() {
  curl -s --max-time 120 -o "$4" -w '%{http_code}' "http://127.0.0.1:$1$2" -H 'Content-Type: application/json' -d "$3"
}

# serve_json FILE EXPR
#   prints the Python expression EXPR over the JSON in FILE (as d); lists
#   of numbers space separated, booleans as true/false.
serve_json() {
  python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
v = eval(sys.argv[2])
if isinstance(v, bool): print("true" if v else "false")
elif isinstance(v, list): print(" ".join(str(x) for x in v))
else: print(v)' "$1" "$2"
}
