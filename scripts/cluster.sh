#!/usr/bin/env bash
# Replicas of `rewind serve` behind nginx, on loopback (docs/scale-out.md).
#
#   scripts/cluster.sh up [--dir DIR] [--replicas N] [--port P] [--model M.gguf] [-- SERVE_OPTIONS...]
#   scripts/cluster.sh down [--dir DIR]
#   scripts/cluster.sh demo [MODEL.gguf]        (make demo-cluster)
#
# up: starts N (3) replicas on free loopback ports, all with --cache-dir
# DIR/cache (the shared cache tier) and --replica-id r1..rN, then nginx
# (deploy/nginx/nginx.conf.in filled in as DIR/nginx.conf, run as the current
# user, no system service) on port P (default: a free one) routing by
# deploy/nginx/rewind_key.js. Writes DIR/cluster.env (the ports and process
# ids, for `down` and for scripts). DIR defaults to build/cluster. nginx is
# installed through scripts/setup.sh when missing (RW_NO_INSTALL=1: fail
# instead). REWIND names the binary (build/rewind).
# down: stops nginx and the replicas of DIR.
# demo: scripts/cluster_demo.sh (two users, one replica killed mid-way).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
REWIND="${REWIND:-$ROOT/build/rewind}"
NGINX_JS_MOD=/usr/lib/nginx/modules/ngx_http_js_module.so
cmd="${1:-}"
[ $# -gt 0 ] && shift
DIR="$ROOT/build/cluster" N=3 PORT= MODEL=
SERVE=()
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) DIR=$2; shift 2 ;;
    --replicas) N=$2; shift 2 ;;
    --port) PORT=$2; shift 2 ;;
    --model) MODEL=$2; shift 2 ;;
    --) shift; SERVE=("$@"); break ;;
    *) [ "$cmd" = demo ] && break; echo "cluster: unknown argument $1" >&2; exit 2 ;;
  esac
done

have_nginx() { command -v nginx >/dev/null && [ -f "$NGINX_JS_MOD" ]; }

down() {
  # cluster.env lists the replicas from their start on (up writes it before
  # it waits for them), nginx.pid exists while nginx runs
  [ -f "$DIR/cluster.env" ] || [ -f "$DIR/nginx.pid" ] || { echo "cluster: nothing running in $DIR"; return 0; }
  # shellcheck disable=SC1091
  [ -f "$DIR/cluster.env" ] && . "$DIR/cluster.env"
  if [ -f "$DIR/nginx.pid" ]; then
    nginx -c "$DIR/nginx.conf" -p "$DIR" -e "$DIR/error.log" -s quit 2>/dev/null || kill "$(cat "$DIR/nginx.pid")" 2>/dev/null || true
  fi
  for p in ${REPLICA_PIDS:-}; do kill -TERM "$p" 2>/dev/null || true; done
  # a replica finishes its pending disk writes before it exits (rewind serve
  # --shutdown-timeout); past 30 s it is killed
  for p in ${REPLICA_PIDS:-}; do
    for _ in $(seq 1 300); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
  done
  for _ in $(seq 1 50); do [ -f "$DIR/nginx.pid" ] || break; sleep 0.1; done
  rm -f "$DIR/cluster.env"
  echo "cluster: stopped ($DIR)"
}

up() {
  [ -n "$MODEL" ] || { echo "cluster: up needs --model M.gguf" >&2; exit 2; }
  [ -x "$REWIND" ] || { echo "cluster: no $REWIND (make all)" >&2; exit 1; }
  if ! have_nginx; then
    [ "${RW_NO_INSTALL:-0}" = 1 ] && { echo "cluster: nginx with the njs module is not installed (scripts/setup.sh)" >&2; exit 1; }
    "$ROOT/scripts/setup.sh"
    have_nginx || { echo "cluster: nginx with the njs module is still missing" >&2; exit 1; }
  fi
  if [ -f "$DIR/cluster.env" ] || [ -f "$DIR/nginx.pid" ]; then down; fi
  mkdir -p "$DIR/cache" "$DIR/tmp"
  local pids="" ports=""
  for i in $(seq 1 "$N"); do
    local log="$DIR/r$i.log"
    rm -f "$log"
    "$REWIND" serve "$MODEL" --port 0 --replica-id "r$i" --cache-dir "$DIR/cache" "${SERVE[@]}" 2> "$log" &
    pids="$pids $!"
  done
  echo "REPLICA_PIDS=\"${pids# }\"" > "$DIR/cluster.env"
  for i in $(seq 1 "$N"); do
    local pid port=
    pid=$(echo $pids | cut -d' ' -f"$i")
    for _ in $(seq 1 600); do
      port=$(grep -ao 'listening on http://127.0.0.1:[0-9]*' "$DIR/r$i.log" 2>/dev/null | sed 's/.*://' || true)
      [ -n "$port" ] && break
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if [ -z "$port" ]; then
      echo "cluster: replica r$i did not start:" >&2; cat "$DIR/r$i.log" >&2
      for p in $pids; do kill "$p" 2>/dev/null || true; done
      exit 1
    fi
    ports="$ports $port"
  done
  ports=${ports# } pids=${pids# }
  local servers="" p
  for p in $ports; do servers="${servers}server 127.0.0.1:$p max_fails=1 fail_timeout=10s;\n        "; done
  local try ok=0
  for try in $(seq 1 20); do
    local np=${PORT:-$((20000 + (RANDOM % 20000)))}
    sed -e "s|@RUN@|$DIR|g" -e "s|@JS_DIR@|$ROOT/deploy/nginx|g" -e "s|@LISTEN@|127.0.0.1:$np|g" \
        -e "s|^\( *\)@SERVERS@$|\1$servers|" -e "s|^pid |user $(id -un);\npid |" \
        "$ROOT/deploy/nginx/nginx.conf.in" > "$DIR/nginx.conf"
    rm -f "$DIR/nginx.pid"
    if nginx -c "$DIR/nginx.conf" -p "$DIR" -e "$DIR/error.log" 2> "$DIR/nginx.start.log"; then ok=1; PORT=$np; break; fi
    grep -q "Address already in use" "$DIR/nginx.start.log" && [ -z "${PORT:-}" ] && continue
    break
  done
  if [ $ok != 1 ]; then
    echo "cluster: nginx did not start:" >&2; cat "$DIR/nginx.start.log" >&2
    for p in $pids; do kill "$p" 2>/dev/null || true; done
    exit 1
  fi
  cat > "$DIR/cluster.env" <<ENV
CLUSTER_PORT=$PORT
REPLICA_PORTS="$ports"
REPLICA_PIDS="$pids"
ENV
  for _ in $(seq 1 100); do
    curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && break
    sleep 0.1
  done
  echo "cluster: nginx on http://127.0.0.1:$PORT -> replicas r1..r$N on ports $ports (cache tier $DIR/cache)"
}

case "$cmd" in
  up) up ;;
  down) down ;;
  demo) exec "$ROOT/scripts/cluster_demo.sh" "$@" ;;
  *) sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
esac
