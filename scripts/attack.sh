#!/usr/bin/env bash
# scripts/attack.sh - the adversarial corpus (tests/attack/) against a real
# `rewind serve`, with control requests whose answers must not change.
#
#   scripts/attack.sh [--build DIR]... [--clients N] [--rounds R] [--short]
#
# For each build folder (default: build, and build-asan when it exists): a
# server on 127.0.0.1 over the qwen35 fixture with --cache-bytes 64M and
# --max-state-bytes 256M; the control prompts answered one by one first
# (the reference); then R rounds of every corpus request and every control
# prompt, shuffled, from N concurrent clients (at most 64; loopback only;
# every request has a 60 s limit, so it stops by itself). Fails on: the
# server dying, a sanitizer report in its log, any 5xx or failed
# connection, a control answer lost or changed, and (normal build) a peak
# resident memory above weights + cache + state budget + 256 MiB, or an
# idle one (3 s after the load) above weights + cache + 10% + 64 MiB.
# Prints requests, crashes, 5xx, lost, p99 latency and RSS start/peak/idle.
# --short: 8 clients, 1 round (what CI runs, tests/server/test_attack.sh).
set -u
cd "$(dirname "$0")/.."
builds=() clients=64 rounds=3
while [ $# -gt 0 ]; do
  case $1 in
    --build) builds+=("$2"); shift 2 ;;
    --clients) clients=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --short) clients=8 rounds=1; shift ;;
    *) echo "usage: scripts/attack.sh [--build DIR]... [--clients N] [--rounds R] [--short]" >&2; exit 2 ;;
  esac
done
[ "$clients" -gt 64 ] && clients=64
if [ ${#builds[@]} -eq 0 ]; then
  builds=(build)
  [ -x build-asan/rewind ] && builds+=(build-asan)
fi
FIX="${RW_FIXTURES:-../shared/fixtures}"
M="$FIX/qwen35/qwen35-Q8_0.gguf"
[ -f "$M" ] || { echo "skipped: no fixtures in $FIX"; exit 77; }
command -v curl >/dev/null || { echo "skipped: no curl"; exit 77; }
tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
mkdir -p "$tmp/corpus"
cp tests/attack/*.req "$tmp/corpus/"
bash tests/attack/gen.sh "$tmp/corpus"
cache=$((64 << 20)) state=$((256 << 20))
weights=$(stat -c %s "$M")
rss_kb() { awk -v k="$2" '$1 == k ":" { print $2 }' "/proc/$1/status" 2>/dev/null; }
# the control prompts: distinct, short, greedy
for i in $(seq 1 8); do
  printf 'POST /v1/completions\n{"prompt":"Control prompt number %d: count with me","max_tokens":8,"temperature":0}\n' "$i" \
    > "$tmp/control-$i.req"
done

# send REQ OUT: one request; OUT gets "status seconds" and OUT.body the body
send() {
  local req=$1 out=$2 line method path
  line=$(head -n 1 "$req")
  method=${line%% *} path=${line#* }
  tail -n +2 "$req" > "$out.in"
  curl -s -o "$out.body" -w '%{http_code} %{time_total}\n' -X "$method" --max-time 60 \
    -H 'Content-Type: application/json' --data-binary @"$out.in" "http://127.0.0.1:$port$path" > "$out" 2>/dev/null ||
    echo "000 60" > "$out"
  rm -f "$out.in"
}
export -f send

fail=0
for b in "${builds[@]}"; do
  bin="$b/rewind"
  [ -x "$bin" ] || { echo "attack: no $bin"; fail=1; continue; }
  san=0; case "$b" in *asan*) san=1 ;; esac
  log="$tmp/$(basename "$b").log"
  "$bin" serve "$M" --port 0 --parallel 4 --threads 2 --ctx 2048 --cache-bytes 64M --max-state-bytes 256M \
    --max-queue 256 2> "$log" &
  pid=$!
  port=
  for _ in $(seq 1 600); do
    port=$(grep -ao 'listening on http://127.0.0.1:[0-9]*' "$log" 2>/dev/null | sed 's/.*://')
    [ -n "$port" ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  [ -n "$port" ] || { echo "attack $b: the server did not start"; cat "$log"; fail=1; pid=; continue; }
  export port
  rss0=$(rss_kb "$pid" VmRSS)
  # the reference answers, one by one
  for i in $(seq 1 8); do
    send "$tmp/control-$i.req" "$tmp/ref-$i"
    cp "$tmp/ref-$i.body" "$tmp/refbody-$i"
  done
  # the attack: every corpus request and control prompt, R rounds, shuffled
  jobs="$tmp/jobs"
  : > "$jobs"
  for r in $(seq 1 "$rounds"); do
    for f in "$tmp"/corpus/*.req; do echo "$f $tmp/out-$r-$(basename "$f" .req)" >> "$jobs"; done
    for i in $(seq 1 8); do echo "$tmp/control-$i.req $tmp/ctl-$r-$i" >> "$jobs"; done
  done
  t0=$(date +%s.%N)
  shuf "$jobs" | xargs -P "$clients" -n 2 bash -c 'send "$0" "$1"'
  t1=$(date +%s.%N)
  n_req=$(wc -l < "$jobs")
  alive=1; kill -0 "$pid" 2>/dev/null || alive=0
  results() { find "$tmp" -maxdepth 1 \( -name 'out-*' -o -name 'ctl-*' \) ! -name '*.body' -exec cat {} +; }
  n5xx=$(results | awk '$1 >= 500 || $1 == "000"' | wc -l)
  lost=0
  for r in $(seq 1 "$rounds"); do
    for i in $(seq 1 8); do
      st=$(cut -d' ' -f1 "$tmp/ctl-$r-$i" 2>/dev/null)
      want=$(sed 's/"id":"[^"]*"//; s/"created":[0-9]*//' "$tmp/refbody-$i" | grep -o '"text":"[^"]*"')
      got=$(sed 's/"id":"[^"]*"//; s/"created":[0-9]*//' "$tmp/ctl-$r-$i.body" 2>/dev/null | grep -o '"text":"[^"]*"')
      if [ "$st" != 200 ] || [ -z "$want" ] || [ "$want" != "$got" ]; then lost=$((lost + 1)); fi
    done
  done
  p99=$(results | awk 'NF == 2 { print $2 }' | sort -n |
        awk '{ v[NR] = $1 } END { i = int(NR * 0.99); if (i < 1) i = 1; print v[i] }')
  peak=$(rss_kb "$pid" VmHWM)
  sleep 3
  idle=$(rss_kb "$pid" VmRSS)
  kill -TERM "$pid" 2>/dev/null
  for _ in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  pid=
  sanity=$(grep -c -e 'AddressSanitizer' -e 'runtime error' -e 'LeakSanitizer' "$log")
  printf 'attack %s: %d requests from %d clients in %.1f s; crashes %d, 5xx %d, lost or changed %d, sanitizer reports %d, p99 %.2f s; RSS start %d MiB, peak %d MiB, idle %d MiB\n' \
    "$b" "$n_req" "$clients" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" $((1 - alive)) "$n5xx" "$lost" "$sanity" "${p99:-0}" \
    $((${rss0:-0} / 1024)) $((${peak:-0} / 1024)) $((${idle:-0} / 1024))
  [ $alive = 1 ] && [ "$n5xx" = 0 ] && [ "$lost" = 0 ] && [ "$sanity" = 0 ] || {
    fail=1
    for f in $(find "$tmp" -maxdepth 1 \( -name 'out-*' -o -name 'ctl-*' \) ! -name '*.body'); do
      awk -v f="$(basename "$f")" '$1 >= 500 || $1 == "000" { print f ": " $0 }' "$f"
    done | head -5
    grep -m 20 -e 'AddressSanitizer' -e 'runtime error' -e 'ERROR' "$log"
  }
  if [ $san = 0 ]; then
    budget_peak=$(( (weights + cache + state + (256 << 20)) / 1024 ))
    budget_idle=$(( (weights + cache + cache / 10 + (64 << 20)) / 1024 ))
    [ "${peak:-0}" -le $budget_peak ] || { echo "attack $b: peak RSS $((peak / 1024)) MiB over $((budget_peak / 1024)) MiB"; fail=1; }
    [ "${idle:-0}" -le $budget_idle ] || { echo "attack $b: idle RSS $((idle / 1024)) MiB over $((budget_idle / 1024)) MiB"; fail=1; }
  fi
  rm -f "$tmp"/out-* "$tmp"/ctl-* "$tmp"/ref-*
done
exit $fail
