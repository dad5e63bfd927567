#!/usr/bin/env bash
# soak.sh - rewind serve for N minutes under mixed traffic; reports resident
# memory over time, request outcomes by kind and status, and p50/p99 latency
# Not part of make test: `make soak` (SOAK_MINUTES,
# SOAK_MODEL, SOAK_CLIENTS) or
#
#   scripts/soak.sh [--minutes N] [--model FILE.gguf] [--clients N] [--rewind BIN]
#                   [--cache-bytes B] [--max-state-bytes B] [--out DIR]
#
# Traffic, from N client loops at once, each picking at random:
#   stream    a streaming completion read to its end
#   cancel    a streaming completion the client hangs up on after 0.3 s
#   n4        a whole completion with n = 4 choices
#   hit       a chat turn that repeats one of 8 fixed conversations (cache hits)
#   miss      a completion of a fresh random prompt (cache misses)
#   bad       a malformed request (bad JSON, unknown field, wrong types, huge stop)
#   health    GET /health
# Every request is one curl with its status and time; the server's RSS is
# sampled every 5 s. At the end: RSS min/max/last against the budgets
# (cache + state, plus the weights file, plus 512 MiB of fixed overhead), a
# table of outcomes, and latency percentiles per kind. Exit status 1 if the
# server died, any request got a 5xx or no answer (other than the hung-up
# ones), or RSS went beyond the bound.
set -u
MINUTES=5
FIX="${RW_FIXTURES:-../shared/fixtures}"
MODEL="$FIX/qwen35/qwen35-Q8_0.gguf"
CLIENTS=8
REWIND="${REWIND:-build/rewind}"
CACHE_BYTES=256M
STATE_BYTES=256M
OUT=
while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) MINUTES=$2; shift 2 ;;
    --model) MODEL=$2; shift 2 ;;
    --clients) CLIENTS=$2; shift 2 ;;
    --rewind) REWIND=$2; shift 2 ;;
    --cache-bytes) CACHE_BYTES=$2; shift 2 ;;
    --max-state-bytes) STATE_BYTES=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    *) echo "usage: $0 [--minutes N] [--model FILE.gguf] [--clients N] [--rewind BIN] [--cache-bytes B] [--max-state-bytes B] [--out DIR]" >&2; exit 2 ;;
  esac
done
[ -f "$MODEL" ] || { echo "soak: no model $MODEL (set --model or RW_FIXTURES)" >&2; exit 2; }
[ -x "$REWIND" ] || { echo "soak: no $REWIND (make first)" >&2; exit 2; }
command -v curl >/dev/null || { echo "soak: needs curl" >&2; exit 2; }
d=${OUT:-$(mktemp -d)}
mkdir -p "$d"
bytes() { # 256M -> bytes
  local v=${1%[KkMmGg]} u=${1#"${1%[KkMmGg]}"}
  case "$u" in K|k) echo $((v << 10)) ;; M|m) echo $((v << 20)) ;; G|g) echo $((v << 30)) ;; *) echo "$v" ;; esac
}

"$REWIND" serve "$MODEL" --port 0 --ctx 1024 --parallel 4 --max-queue 32 --threads 2 \
  --cache-bytes "$CACHE_BYTES" --max-state-bytes "$STATE_BYTES" 2> "$d/server.log" &
spid=$!
port=
for _ in $(seq 1 600); do
  port=$(grep -ao 'listening on http://127.0.0.1:[0-9]*' "$d/server.log" 2>/dev/null | sed 's/.*://')
  [ -n "$port" ] && break
  kill -0 $spid 2>/dev/null || { echo "soak: the server exited: $(cat "$d/server.log")" >&2; exit 1; }
  sleep 0.1
done
[ -n "$port" ] || { kill $spid; echo "soak: the server did not start" >&2; exit 1; }
url="http://127.0.0.1:$port"
end=$(( $(date +%s) + MINUTES * 60 ))
t0=$(date +%s)

# resident memory every 5 s: seconds since start, RSS in KiB
( while kill -0 $spid 2>/dev/null && [ "$(date +%s)" -lt "$end" ]; do
    echo "$(( $(date +%s) - t0 )) $(awk '/^VmRSS/ {print $2}' /proc/$spid/status 2>/dev/null)"
    sleep 5
  done ) > "$d/rss" &
rss_pid=$!

# one request: KIND then curl arguments; appends "KIND STATUS SECONDS" (000 = no answer)
req() {
  local kind=$1; shift
  local r
  r=$(curl -s -o /dev/null -w '%{http_code} %{time_total}' "$@" 2>/dev/null)
  echo "$kind ${r:-000 0}" >> "$d/requests.$BASHPID"
}

client() {
  local i=0 kinds=(stream stream cancel n4 hit hit miss bad health)
  while [ "$(date +%s)" -lt "$end" ] && kill -0 $spid 2>/dev/null; do
    local k=${kinds[RANDOM % ${#kinds[@]}]}
    local words="w$RANDOM w$RANDOM w$RANDOM w$RANDOM w$RANDOM w$RANDOM"
    case $k in
      stream) req stream --max-time 120 -N "$url/v1/completions" \
                -d "{\"prompt\":\"$words\",\"max_tokens\":48,\"stream\":true,\"stop\":[\"zzq\",\"\\n\\n\\n\"]}" ;;
      cancel) req cancel --max-time 0.3 -N "$url/v1/completions" \
                -d "{\"prompt\":\"$words\",\"max_tokens\":400,\"ignore_eos\":true,\"stream\":true}" ;;
      n4) req n4 --max-time 120 "$url/v1/completions" -d "{\"prompt\":\"$words\",\"max_tokens\":16,\"n\":4}" ;;
      hit) local c=$((RANDOM % 8))
           req hit --max-time 120 "$url/v1/chat/completions" \
             -d "{\"messages\":[{\"role\":\"system\",\"content\":\"conversation $c: you answer briefly and well, $c times\"},{\"role\":\"user\",\"content\":\"question $c\"}],\"max_tokens\":12,\"temperature\":0}" ;;
      miss) req miss --max-time 120 "$url/v1/completions" -d "{\"prompt\":\"$words $words\",\"max_tokens\":12}" ;;
      bad) case $((RANDOM % 4)) in
             0) req bad --max-time 30 "$url/v1/completions" -d '{"prompt": "a",' ;;
             1) req bad --max-time 30 "$url/v1/completions" -d '{"prompt":"a","frobnicate":1}' ;;
             2) req bad --max-time 30 "$url/v1/chat/completions" -d '{"messages":"hi"}' ;;
             3) req bad --max-time 30 "$url/v1/completions" -d "{\"prompt\":\"a\",\"stop\":[\"$(head -c 70000 /dev/zero | tr '\0' a)\"]}" ;;
           esac ;;
      health) req health --max-time 10 "$url/health" ;;
    esac
    i=$((i + 1))
  done
}

for c in $(seq 1 "$CLIENTS"); do client & done
wait $(jobs -p | grep -v "^$spid\$" | grep -v "^$rss_pid\$") 2>/dev/null
wait $rss_pid 2>/dev/null
alive=1
kill -0 $spid 2>/dev/null || alive=0
curl -s "$url/metrics" > "$d/metrics" 2>/dev/null
kill -TERM $spid 2>/dev/null
wait $spid 2>/dev/null
cat "$d"/requests.* > "$d/requests" 2>/dev/null

weights=$(stat -c %s "$MODEL")
bound_kib=$(( ($(bytes "$CACHE_BYTES") + $(bytes "$STATE_BYTES") + weights + (512 << 20)) >> 10 ))
echo "soak: $MINUTES min, $CLIENTS clients, model $(basename "$MODEL"), cache $CACHE_BYTES, state $STATE_BYTES; files in $d"
echo
echo "resident memory (MiB) over time:"
step=$(( ($(wc -l < "$d/rss") + 29) / 30 ))
awk -v s="$step" '$2 != "" && (NR - 1) % s == 0 {printf "  %4ds %8.1f\n", $1, $2 / 1024}' "$d/rss"
awk -v b="$bound_kib" '$2 != "" {if (min == "" || $2 < min) min = $2; if ($2 > max) max = $2; last = $2}
  END {printf "  min %.1f, max %.1f, last %.1f MiB; bound (cache + state + weights + 512 MiB) %.1f MiB\n",
       min / 1024, max / 1024, last / 1024, b / 1024}' "$d/rss"
echo
echo "outcomes (kind status count):"
awk '{print $1, $2}' "$d/requests" | sort | uniq -c | awk '{printf "  %-7s %s %6d\n", $2, $3, $1}'
echo
echo "latency by kind (seconds; answered requests):"
for k in stream cancel n4 hit miss bad health; do
  awk -v k="$k" '$1 == k && $2 != "000" {print $3}' "$d/requests" | sort -g > "$d/lat.$k"
  n=$(wc -l < "$d/lat.$k")
  [ "$n" -gt 0 ] || continue
  p50=$(awk -v n="$n" 'NR == int((n - 1) * 0.50) + 1' "$d/lat.$k")
  p99=$(awk -v n="$n" 'NR == int((n - 1) * 0.99) + 1' "$d/lat.$k")
  printf "  %-7s n %6d  p50 %8.3f  p99 %8.3f\n" "$k" "$n" "$p50" "$p99"
done
grep -E '^rewind_(requests_cancelled_total|prompt_tokens_cached_total|http_hangups_total|admissions_held)' "$d/metrics" | sed 's/^/  /'

rc=0
[ $alive -eq 1 ] || { echo "FAIL: the server died: $(tail -5 "$d/server.log")"; rc=1; }
n5=$(awk '$2 ~ /^5/' "$d/requests" | wc -l)
[ "$n5" -eq 0 ] || { echo "FAIL: $n5 answers were 5xx"; rc=1; }
lost=$(awk '$2 == "000" && $1 != "cancel"' "$d/requests" | wc -l)
[ "$lost" -eq 0 ] || { echo "FAIL: $lost requests got no answer"; rc=1; }
max_kib=$(awk '$2 != "" && $2 > m {m = $2} END {print m + 0}' "$d/rss")
[ "$max_kib" -le "$bound_kib" ] || { echo "FAIL: RSS $max_kib KiB beyond the bound $bound_kib KiB"; rc=1; }
[ $rc -eq 0 ] && echo "soak: ok"
exit $rc
