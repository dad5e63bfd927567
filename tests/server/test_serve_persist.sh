#!/usr/bin/env bash
# Persistence of the prefix cache's disk tier (docs/persistence.md), on
# every fixture architecture: a conversation's first turn on a server with
# --cache-dir (write-through, the default), then the server stops - by
# SIGTERM (graceful: pending writes are flushed) or by SIGKILL two seconds
# after the answer (the write-through delay is one second) - and a new
# server on the same folder serves the second turn with its cached tokens
# from the disk tier (usage.prompt_tokens_details.cached_tokens_disk and
# /metrics), and the answer is bitwise `rewind generate`'s (no cache).
# Also: SIGTERM during startup stops the server at once (a FIFO named like
# a cache file does not hang it), and entries made with another KV type or
# a longer context are left alone, not deleted.
set -u
REWIND="${REWIND:-build/rewind}"
FIX="${RW_FIXTURES:-../shared/fixtures}"
[ -f "$FIX/qwen35/qwen35-F32.gguf" ] || { echo "skipped: no fixtures in $FIX"; exit 77; }
command -v curl >/dev/null || { echo "skipped: no curl (scripts/setup.sh installs it)"; exit 77; }
d=$(mktemp -d)
pid=
fail() { echo "FAIL: $*"; [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; exit 1; }
trap '[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$d"' EXIT
. "$(dirname "$0")/serve_lib.sh"

start() { # MODEL DIR [options]
  local m=$1 dir=$2
  shift 2
  serve_start "$d/log" "$m" --ctx 512 --kv f32 --threads 1 --parallel 2 --cache-bytes 256M --cache-dir "$dir" "$@"
  pid=$serve_pid port=$serve_port
}
ask() { # IDS N_GEN NAME -> $d/NAME.{json,ids,prompt}
  curl -s --max-time 120 "http://127.0.0.1:$port/v1/completions" \
    -d "{\"prompt\":[${1// /,}],\"max_tokens\":$2,\"temperature\":0,\"ignore_eos\":true,\"return_token_ids\":true}" \
    > "$d/$3.json"
  grep -o '"token_ids":\[[0-9,]*\]' "$d/$3.json" | sed 's/.*\[//; s/\]//; s/,/ /g' > "$d/$3.ids"
  echo "$1" > "$d/$3.prompt"
}
field() { grep -o "\"$2\":[0-9]*" "$d/$1.json" | head -1 | sed 's/.*://'; }
expect() { # MODEL NAME N_GEN
  "$REWIND" generate "$1" --ids "$d/$2.prompt" -n "$3" --print-ids > "$d/$2.want" || fail "generate failed"
  cmp -s "$d/$2.want" "$d/$2.ids" || fail "$2: server '$(cat "$d/$2.ids")' vs generate '$(cat "$d/$2.want")'"
}

one() { # ARCH TERM|KILL: in a subshell of its own (its own server, log and folder)
  local arch=$1 how=$2
  local F="$FIX/$arch/$arch-F32.gguf" log="$d/log-$arch-$how"
  [ -f "$F" ] || fail "no $F"
  local ids=$(tr -s ' \n' ' ' < "$FIX/$arch/$arch.prompt.ids")
  local A=$(echo $ids | cut -d' ' -f1-60) MORE=$(echo $ids | cut -d' ' -f61-80)
  local dir="$d/cache-$arch-$how"
  serve_start "$log" "$F" --ctx 512 --kv f32 --threads 1 --parallel 2 --cache-bytes 256M --cache-dir "$dir"
  pid=$serve_pid port=$serve_port
  ask "$A" 8 "$arch-$how-1"
  if [ $how = TERM ]; then
    kill -TERM "$pid"; wait "$pid"; local rc=$?
    [ $rc = 0 ] || fail "$arch: SIGTERM exit status $rc: $(cat "$log")"
    grep -q "rewind serve: stopped" "$log" || fail "$arch: no clean stop: $(cat "$log")"
  else
    # 2 s after the answer (the write-through delay is 1 s); a machine too
    # loaded for that (sanitizers, parallel tests) gets up to 20 s more
    sleep 2
    for _ in $(seq 1 200); do ls "$dir"/*.rwc > /dev/null 2>&1 && break; sleep 0.1; done
    kill -9 "$pid"; wait "$pid" 2>/dev/null
  fi
  pid=
  ls "$dir"/*.rwc > /dev/null 2>&1 || fail "$arch/$how: nothing reached the disk tier"
  serve_start "$log" "$F" --ctx 512 --kv f32 --threads 1 --parallel 2 --cache-bytes 256M --cache-dir "$dir"
  pid=$serve_pid port=$serve_port
  local B="$A $(cat "$d/$arch-$how-1.ids") $MORE"
  ask "$B" 6 "$arch-$how-2"
  expect "$F" "$arch-$how-2" 6
  local c=$(field "$arch-$how-2" cached_tokens) cd_=$(field "$arch-$how-2" cached_tokens_disk)
  [ "${c:-0}" -ge 60 ] || fail "$arch/$how: after the restart only ${c:-0} cached tokens: $(cat "$d/$arch-$how-2.json")"
  [ "$cd_" = "$c" ] || fail "$arch/$how: $c cached tokens, $cd_ of them from disk"
  curl -s "http://127.0.0.1:$port/metrics" > "$d/m-$arch-$how"
  grep -q "rewind_prompt_tokens_cached_total{tier=\"disk\"} $c\$" "$d/m-$arch-$how" ||
    fail "$arch/$how: metrics: $(grep tier= "$d/m-$arch-$how")"
  kill -TERM "$pid"; wait "$pid"; pid=
  echo "$arch $how: second turn $c of $(echo $B | wc -w) prompt tokens from disk, answer = generate's"
}
# every architecture and both ways of stopping at once (the waits overlap)
jobs_=
for arch in llama qwen3 qwen35 qwen35moe qwen3next granitehybrid lfm2 nemotron_h gemma3 gpt-oss; do
  for how in TERM KILL; do
    ( one $arch $how ) > "$d/out-$arch-$how" 2>&1 &
    jobs_="$jobs_ $!"
  done
done
bad=0
for j in $jobs_; do wait "$j" || bad=1; done
cat "$d"/out-*
[ $bad = 0 ] || fail "see above"

# --cache-dir-write evict: nothing written while serving, everything at the graceful stop
F="$FIX/qwen35/qwen35-F32.gguf"
A=$(echo $(tr -s ' \n' ' ' < "$FIX/qwen35/qwen35.prompt.ids") | cut -d' ' -f1-60)
start "$F" "$d/cache-evict" --cache-dir-write evict
ask "$A" 8 ev1
sleep 1.5
ls "$d/cache-evict"/*.rwc > /dev/null 2>&1 && fail "evict mode wrote before any eviction"
kill -TERM "$pid"; wait "$pid"; pid=
ls "$d/cache-evict"/*.rwc > /dev/null 2>&1 || fail "evict mode: nothing written at the graceful stop"
start "$F" "$d/cache-evict" --cache-dir-write evict
ask "$A $(cat "$d/ev1.ids") 5 6 7" 3 ev2; expect "$F" ev2 3
[ "$(field ev2 cached_tokens_disk)" -ge 60 ] || fail "evict mode: $(cat "$d/ev2.json")"
kill -TERM "$pid"; wait "$pid"; pid=
echo "evict mode: written at the stop, read back after the restart"

# entries another configuration cannot use are left alone, not deleted
dir="$d/cache-qwen35-TERM"
n_before=$(ls "$dir"/*.rwc | wc -l)
serve_start "$d/log" "$F" --ctx 512 --kv f16 --threads 1 --cache-dir "$dir"; pid=$serve_pid port=$serve_port
ask "$(echo $(tr -s ' \n' ' ' < "$FIX/qwen35/qwen35.prompt.ids") | cut -d' ' -f1-20)" 2 f16
kill -TERM "$pid"; wait "$pid"; pid=
grep -q "other models or configurations alone" "$d/log" || fail "no note about the f32 files: $(cat "$d/log")"
serve_start "$d/log" "$F" --ctx 32 --kv f32 --threads 1 --cache-dir "$dir"; pid=$serve_pid port=$serve_port
ask "$(echo $(tr -s ' \n' ' ' < "$FIX/qwen35/qwen35.prompt.ids") | cut -d' ' -f1-10)" 2 short
kill -TERM "$pid"; wait "$pid"; pid=
grep -q "longer than the context" "$d/log" || fail "no note about the long entries: $(cat "$d/log")"
n_f32=$(ls "$dir"/*.rwc | wc -l)
[ "$n_f32" -ge "$n_before" ] || fail "entries were deleted by other configurations: $n_before before, $n_f32 after"

# a FIFO named like a cache file, and SIGTERM during startup
mkfifo "$d/cache-qwen35-TERM/$(ls "$dir" | grep rwc | head -1 | cut -c1-17)0000000000000000-5.rwc"
start "$F" "$dir"
ask "$A" 2 fifo
[ -s "$d/fifo.ids" ] || fail "no answer with a FIFO in the folder: $(cat "$d/log")"
kill -TERM "$pid"; wait "$pid"; pid=
"$REWIND" serve "$F" --port 0 --cache-dir "$dir" 2> "$d/log" &
pid=$!
sleep 0.05
kill -TERM "$pid"
for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$pid" 2>/dev/null && fail "SIGTERM during startup did not stop the server: $(cat "$d/log")"
pid=
exit 0
