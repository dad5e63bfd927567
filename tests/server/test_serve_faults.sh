#!/usr/bin/env bash
# Disk faults under the prefix cache's disk tier (docs/persistence.md): a
# bit-flipped file, a truncated one, a file replaced by another model's, a
# read-only folder and a full disk. Every time the server keeps serving,
# answers are bitwise `rewind generate`'s (never a wrong prefix: nothing is
# taken from a bad file), the trouble is counted in /metrics and said once
# in the log. The full disk and the read-only folder use a small tmpfs
# (mounted when running as root; otherwise the full disk is skipped and the
# folder made read-only with chmod).
set -u
REWIND="${REWIND:-build/rewind}"
FIX="${RW_FIXTURES:-../shared/fixtures}"
F="$FIX/qwen35/qwen35-F32.gguf"
L="$FIX/llama/llama-F32.gguf"
[ -f "$F" ] && [ -f "$L" ] || { echo "skipped: no fixtures in $FIX"; exit 77; }
command -v curl >/dev/null || { echo "skipped: no curl (scripts/setup.sh installs it)"; exit 77; }
d=$(mktemp -d)
pid= mnt=
fail() { echo "FAIL: $*"; [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; exit 1; }
trap '[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; [ -n "$mnt" ] && umount "$mnt" 2>/dev/null; chmod -R u+w "$d" 2>/dev/null; rm -rf "$d"' EXIT
. "$(dirname "$0")/serve_lib.sh"
ids=$(tr -s ' \n' ' ' < "$FIX/qwen35/qwen35.prompt.ids")
A=$(echo $ids | cut -d' ' -f1-60)

start() { # MODEL DIR [options]
  local m=$1 dir_=$2
  shift 2
  serve_start "${log:-$d/log}" "$m" --ctx 512 --kv f32 --threads 1 --cache-bytes 64M --cache-dir "$dir_" "$@"
  pid=$serve_pid port=$serve_port
}
stop() { kill -TERM "$pid"; wait "$pid"; pid=; }
ask() { # IDS N_GEN NAME
  curl -s --max-time 60 "http://127.0.0.1:$port/v1/completions" \
    -d "{\"prompt\":[${1// /,}],\"max_tokens\":$2,\"temperature\":0,\"ignore_eos\":true,\"return_token_ids\":true}" \
    > "$d/$3.json"
  grep -o '"token_ids":\[[0-9,]*\]' "$d/$3.json" | sed 's/.*\[//; s/\]//; s/,/ /g' > "$d/$3.ids"
  echo "$1" > "$d/$3.prompt"
}
expect() { # MODEL NAME N_GEN
  "$REWIND" generate "$1" --ids "$d/$2.prompt" -n "$3" --print-ids > "$d/$2.want" || fail "generate failed"
  cmp -s "$d/$2.want" "$d/$2.ids" || fail "$2: server '$(cat "$d/$2.ids")' vs generate '$(cat "$d/$2.want")'"
}
metric() { curl -s "http://127.0.0.1:$port/metrics" | grep "^$1" | sed 's/.* //'; }
write_errors() { # waits (up to 20 s: a loaded machine) until at least $1 writes failed; prints how many
  local we=0
  for _ in $(seq 1 200); do
    we=$(curl -s "http://127.0.0.1:$port/metrics" | grep 'rewind_prefix_cache_disk_errors_total{kind="write"}' | sed 's/.* //')
    [ "${we:-0}" -ge "$1" ] && break
    sleep 0.1
  done
  echo "${we:-0}"
}
first_turn() { # DIR [NAME] -> the folder holds the first turn's entry; $d/NAME.ids its answer
  local t=${2:-t1}
  start "$F" "$1"; ask "$A" 6 $t; expect "$F" $t 6; stop
  ls "$1"/*.rwc > /dev/null 2>&1 || fail "nothing written to $1"
}
second_turn() { # NAME FIRST: the next turn must be right, with nothing from disk
  start "$F" "$dir"
  ask "$A $(cat "$d/$2.ids") $(echo $ids | cut -d' ' -f61-70)" 4 "$1"
  expect "$F" "$1" 4
  c=$(grep -o '"cached_tokens_disk":[0-9]*' "$d/$1.json" | sed 's/.*://')
  [ "$c" = 0 ] || fail "$1: $c tokens taken from a bad file"
}

# bit flips (in the header, the state, the logits' end), a truncation, and
# another model's file: each in a subshell of its own, at once
one_fault() {
  local fault=$1
  log="$d/log-$fault"
  dir="$d/c-$fault"
  first_turn "$dir" "t1-$fault"
  local f=$(ls "$dir"/*.rwc | head -1)
  local size=$(stat -c %s "$f") at=0
  case $fault in
    flip-head) at=100 ;;
    flip-state) at=$((size / 2)) ;;
    flip-tail) at=$((size - 3)) ;;
  esac
  case $fault in
    flip-*) local b=$(od -An -tu1 -j "$at" -N1 "$f" | tr -d ' ')
            printf "\\$(printf '%03o' $(( b ^ 16 )))" | dd of="$f" bs=1 seek="$at" conv=notrunc 2>/dev/null ;;
    truncate) truncate -s $((size - 1000)) "$f" ;;
    other-model) # the llama model's entry for the same tokens, put in its place
      local ld="$d/llama-cache"; start "$L" "$ld"; ask "$A" 6 l1; stop
      cp "$(ls "$ld"/*.rwc | head -1)" "$f" ;;
  esac
  second_turn "$fault" "t1-$fault"
  local inv=$(metric rewind_prefix_cache_disk_invalid_total)
  [ "$inv" = 1 ] || fail "$fault: $inv invalid files counted: $(cat "$log")"
  stop
  [ -e "$f" ] && fail "$fault: the bad file is still there"
  [ "$(grep -c 'prefix cache: removing' "$log")" = 1 ] || fail "$fault: not said once: $(cat "$log")"
  echo "$fault: refused, counted, removed; the answer is generate's"
}
jobs_=
for fault in flip-head flip-state flip-tail truncate other-model; do
  ( one_fault $fault ) > "$d/out-$fault" 2>&1 &
  jobs_="$jobs_ $!"
done
bad=0
for j in $jobs_; do wait "$j" || bad=1; done
cat "$d"/out-*
[ $bad = 0 ] || fail "see above"

# a read-only folder: what is there is still read; writes fail, said once
log="$d/log"
dir="$d/ro"
if [ "$(id -u)" = 0 ] && mkdir -p "$dir" && mount -t tmpfs -o size=64m tmpfs "$dir" 2>/dev/null; then
  mnt=$dir
  first_turn "$dir"
  mount -o remount,ro "$dir" || fail "cannot remount read-only"
else
  first_turn "$dir"
  chmod a-w "$dir"
fi
start "$F" "$dir" --cache-dir-delay 0.1
ask "$A $(cat "$d/t1.ids") $(echo $ids | cut -d' ' -f61-70)" 4 ro1; expect "$F" ro1 4
grep -q '"cached_tokens_disk":[1-9]' "$d/ro1.json" || fail "read-only folder: nothing read from it: $(cat "$d/ro1.json")"
for k in 1 2 3; do ask "$(echo $ids | cut -d' ' -f$((k * 10))-$((k * 10 + 30)))" 3 "ro-new$k"; expect "$F" "ro-new$k" 3; done
sleep 0.5 # the write-through delay
ask "$(echo $ids | cut -d' ' -f5-40)" 3 ro-last; expect "$F" ro-last 3
we=$(write_errors 2)
[ "${we:-0}" -ge 2 ] || fail "read-only folder: ${we:-0} write errors counted: $(cat "$d/log")"
stop
[ "$(grep -c 'cannot write to the disk tier' "$d/log")" = 1 ] || fail "read-only: not said once: $(cat "$d/log")"
echo "read-only folder: entries read, $we failed writes counted and said once"
if [ -n "$mnt" ]; then umount "$mnt"; mnt=; fi
chmod -R u+w "$d"

# a full disk: a tmpfs too small for one entry
dir="$d/full"
if [ "$(id -u)" = 0 ] && mkdir -p "$dir" && mount -t tmpfs -o size=48k tmpfs "$dir" 2>/dev/null; then
  mnt=$dir
  start "$F" "$dir" --cache-dir-delay 0.1
  for k in 1 2 3; do ask "$(echo $ids | cut -d' ' -f$k-$((k + 50)))" 3 "full$k"; expect "$F" "full$k" 3; sleep 0.4; done
  we=$(write_errors 2)
  [ "${we:-0}" -ge 2 ] || fail "full disk: ${we:-0} write errors counted: $(cat "$d/log")"
  stop
  grep -q 'No space left' "$d/log" || fail "full disk: not said: $(cat "$d/log")"
  [ "$(grep -c 'cannot write to the disk tier' "$d/log")" = 1 ] || fail "full disk: not said once: $(cat "$d/log")"
  ls "$dir" | grep -q tmp && fail "full disk: a temporary file stayed: $(ls "$dir")"
  umount "$mnt"; mnt=
  echo "full disk: $we failed writes counted and said once, no temporary file left, answers right"
else
  echo "full disk: skipped (needs root to mount a small tmpfs)"
fi

# the model file truncated while served: the server lives on, the requests
# that need the lost weights fail (the next ones with a 503), /health and
# /metrics say it, the log says it once, and nothing computed from the lost
# pages reaches the disk tier: with the file back, answers are right
cp "$F" "$d/m.gguf"
dir="$d/trunc"
mkdir -p "$dir"
start "$d/m.gguf" "$dir" --cache-dir-delay 0.1
ask "$A" 4 tr1; expect "$F" tr1 4
truncate -s $(($(stat -c %s "$F") / 2)) "$d/m.gguf"
B=$(echo $ids | cut -d' ' -f20-70)
code() { curl -s -o "$d/$2.json" -w '%{http_code}' --max-time 60 "http://127.0.0.1:$port/v1/completions" \
  -d "{\"prompt\":[${1// /,}],\"max_tokens\":3,\"temperature\":0}"; }
c1=$(code "$B" tr2)
case "$c1" in 5*) ;; *) fail "truncated model: first request answered $c1: $(cat "$d/tr2.json")";; esac
grep -q 'truncated on disk' "$d/tr2.json" || fail "truncated model: the error does not say why: $(cat "$d/tr2.json")"
c2=$(code "$A" tr3)
[ "$c2" = 503 ] || fail "truncated model: the next request answered $c2: $(cat "$d/tr3.json")"
[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health")" = 503 ] || fail "truncated model: /health not 503"
[ "$(metric rewind_model_file_faults_total)" -ge 1 ] || fail "truncated model: not counted in /metrics"
kill -0 "$pid" || fail "truncated model: the server died: $(cat "$d/log")"
stop
[ "$(grep -c 'truncated on disk' "$d/log")" = 1 ] || fail "truncated model: not said once in the log: $(cat "$d/log")"
cp "$F" "$d/m.gguf"
start "$d/m.gguf" "$dir"
ask "$B" 3 tr4; expect "$F" tr4 3
ask "$A" 4 tr5; expect "$F" tr5 4
stop
echo "model file truncated while served: 5xx then 503, /health 503, counted, said once, the disk tier clean"
exit 0
