#!/usr/bin/env bash
# llama-server's parity routes through the real server:
# - /infill on a model whose vocabulary has FIM tokens (a synthesized
#   qwen3-shaped model with Qwen3's vocabulary, where <|fim_prefix|> etc. are
#   found by their text): its greedy tokens are exactly those of the prompt
#   PRE prefix prompt SUF suffix MID (built here with /tokenize) run through
#   /v1/completions and `rewind generate`; input_extra adds the repository
#   and file-separator context; streamed pieces add up to the whole answer;
#   the stats (stop_type, tokens_cached, timings) are there;
# - /v1/completions suffix: the same prompt as /infill's; echo: the prompt's
#   text before the output (whole and streamed), the output unchanged;
# - a model without FIM tokens: /infill and suffix are a 400 that says so;
# - /slots: what each slot holds after a request, save to a file under
#   --slot-save-path, erase, restore into a fresh server (slot 1), after
#   which the same request reuses it (cached tokens in usage) and answers
#   bitwise as without it; file names with a folder, "..", a leading dot or
#   none are refused (nothing written elsewhere); a corrupt, truncated,
#   foreign or missing file is a 400 and the server keeps serving; no
#   --slot-save-path: 501; an unknown action or slot: 400; --no-slots: 501;
#   a busy slot: 503 (and fail_on_no_slot when all are);
# - /completion: the tokens /v1/completions gives for the same prompt (ids
#   or text), in the native shape, whole and streamed; n_probs: the same
#   logprobs as /v1/completions' logprobs; bad requests are 400s.
set -u
REWIND="${REWIND:-build/rewind}"
FIX="${RW_FIXTURES:-../shared/fixtures}"
F="$FIX/qwen3/qwen3-F32.gguf"
V="$FIX/tokenizer/ggml-vocab-qwen3.gguf"
[ -f "$F" ] && [ -f "$V" ] || { echo "skipped: no $F or $V"; exit 77; }
command -v curl >/dev/null || { echo "skipped: no curl (scripts/setup.sh installs it)"; exit 77; }
command -v python3 >/dev/null || { echo "skipped: no python3"; exit 77; }
d=$(mktemp -d)
pid=
fail() { echo "FAIL: $*"; [ -n "$pid" ] && kill "$pid" 2>/dev/null; exit 1; }
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$d"' EXIT

. "$(dirname "$0")/serve_lib.sh"
start() { # MODEL extra serve options...
  serve_start "$d/log" "$@" --ctx 512 --kv f32 --threads 1 --parallel 2
  pid=$serve_pid port=$serve_port
}
stop() { # a clean exit: under the sanitizers, no leak or error reported
  kill -TERM "$pid"
  wait "$pid" || { pid=; fail "the server exited with $?: $(tail -20 "$d/log")"; }
  pid=
}
post() { serve_post "$port" "$1" "$2" "$d/$3.json"; } # PATH BODY NAME -> $d/NAME.json, prints the status
j() { serve_json "$d/$1.json" "$2"; }                  # NAME EXPR
ids_json() { echo "[$(echo "$1" | tr ' ' ',')]"; }
# native_stream PATH BODY WHOLE N: the native route streamed: pieces, the
# last event (only it "stop": true) with the stats of N predicted tokens;
# the pieces and the events' completion_probabilities add up to the whole
# answer in $d/WHOLE.json
native_stream() {
  curl -s -N --max-time 60 "http://127.0.0.1:$port$1" -d "$2" > "$d/$3.sse"
  python3 - "$d/$3.sse" "$d/$3.json" "$4" <<'PY' || fail "$1 stream: $(cat "$d/$3.sse")"
import json, sys
ev = [json.loads(l[6:]) for l in open(sys.argv[1]) if l.startswith("data: ")]
whole = json.load(open(sys.argv[2]))
assert ev and all(not e["stop"] for e in ev[:-1]) and ev[-1]["stop"], ev
assert "".join(e["content"] for e in ev) == whole["content"], (ev, whole)
assert ev[-1]["stop_type"] == "limit" and ev[-1]["tokens_predicted"] == int(sys.argv[3]), ev[-1]
assert [p for e in ev for p in e.get("completion_probabilities", [])] == whole.get("completion_probabilities", []), ev
PY
}

# ---- fill-in-the-middle ----
C="$d/coder.gguf"
"$REWIND" synth --arch qwen3 --preset qwen3-tiny --type q8_0 --vocab "$V" -o "$C" > /dev/null || fail "synth failed"
start "$C" --cache-bytes 64M --slot-save-path "$d/cslots"
PRE='def add(a, b):\n    return '
SUF='\n\nprint(add(1, 2))\n'
[ "$(post /tokenize "{\"content\":\"<|fim_prefix|>$PRE<|fim_suffix|>$SUF<|fim_middle|>\",\"parse_special\":true}" tok)" = 200 ] ||
  fail "tokenize: $(cat "$d/tok.json")"
want_prompt=$(j tok 'd["tokens"]')
[ "$(echo "$want_prompt" | wc -w)" -gt 10 ] || fail "FIM prompt tokens: $want_prompt"
GEN='"n_predict":8,"temperature":0,"ignore_eos":true'
[ "$(post /infill "{\"input_prefix\":\"$PRE\",\"input_suffix\":\"$SUF\",$GEN}" inf)" = 200 ] ||
  fail "infill: $(cat "$d/inf.json")"
got=$(j inf 'd["tokens"]')
[ "$(echo "$got" | wc -w)" = 8 ] || fail "infill tokens: $(cat "$d/inf.json")"
[ "$(j inf 'd["stop"]')" = true ] && [ "$(j inf 'd["stop_type"]')" = limit ] || fail "infill stop: $(cat "$d/inf.json")"
[ "$(j inf 'd["tokens_predicted"]')" = 8 ] && [ "$(j inf 'd["tokens_evaluated"]')" = "$(echo "$want_prompt" | wc -w)" ] ||
  fail "infill counts: $(cat "$d/inf.json")"
[ "$(j inf 'sorted(k for k in d["timings"] if k in ("cache_n", "prompt_n", "predicted_n", "prompt_ms", "predicted_ms"))')" = \
  "cache_n predicted_ms predicted_n prompt_ms prompt_n" ] || fail "infill timings: $(cat "$d/inf.json")"
echo "$want_prompt" > "$d/fim.ids"
"$REWIND" generate "$C" --ids "$d/fim.ids" -n 8 --kv f32 --threads 1 --print-ids > "$d/want" || fail "generate failed"
[ "$(tr -s ' \n' ' ' < "$d/want" | sed 's/ $//')" = "$got" ] || fail "infill '$got' vs generate '$(cat "$d/want")'"
# the same prompt through /v1/completions: as ids, and as a prompt with a suffix
CGEN='"max_tokens":8,"temperature":0,"ignore_eos":true,"return_token_ids":true'
[ "$(post /v1/completions "{\"prompt\":$(ids_json "$want_prompt"),$CGEN}" cids)" = 200 ] || fail "completions: $(cat "$d/cids.json")"
[ "$(j cids 'd["choices"][0]["token_ids"]')" = "$got" ] || fail "completions on the FIM ids: $(cat "$d/cids.json")"
[ "$(post /v1/completions "{\"prompt\":\"$PRE\",\"suffix\":\"$SUF\",$CGEN}" csuf)" = 200 ] || fail "suffix: $(cat "$d/csuf.json")"
[ "$(j csuf 'd["prompt_token_ids"]')" = "$want_prompt" ] || fail "suffix prompt $(j csuf 'd["prompt_token_ids"]') vs $want_prompt"
[ "$(j csuf 'd["choices"][0]["token_ids"]')" = "$got" ] || fail "suffix answer: $(cat "$d/csuf.json")"
# the same again: the prefix cache serves it, and says so
[ "$(post /infill "{\"input_prefix\":\"$PRE\",\"input_suffix\":\"$SUF\",$GEN}" inf2)" = 200 ] || fail "infill again"
[ "$(j inf2 'd["tokens"]')" = "$got" ] || fail "infill again differs: $(cat "$d/inf2.json")"
[ "$(j inf2 'd["tokens_cached"]')" -gt 0 ] && [ "$(j inf2 'd["timings"]["cache_n"]')" -gt 0 ] ||
  fail "infill again: nothing cached: $(cat "$d/inf2.json")"
# "prompt" goes after the prefix (each part tokenized by itself)
[ "$(post /infill "{\"input_prefix\":\"$PRE\",\"prompt\":\"a +\",\"input_suffix\":\"$SUF\",$GEN}" infp)" = 200 ] || fail "infill prompt"
post /tokenize "{\"content\":\"<|fim_prefix|>${PRE}\",\"parse_special\":true}" tokp1 > /dev/null
post /tokenize '{"content":"a +"}' tokp2 > /dev/null
post /tokenize "{\"content\":\"<|fim_suffix|>$SUF<|fim_middle|>\",\"parse_special\":true}" tokp3 > /dev/null
echo "$(j tokp1 'd["tokens"]') $(j tokp2 'd["tokens"]') $(j tokp3 'd["tokens"]')" > "$d/fimp.ids"
"$REWIND" generate "$C" --ids "$d/fimp.ids" -n 8 --kv f32 --threads 1 --print-ids > "$d/wantp" || fail "generate (prompt) failed"
[ "$(tr -s ' \n' ' ' < "$d/wantp" | sed 's/ $//')" = "$(j infp 'd["tokens"]')" ] || fail "infill with prompt vs generate: $(cat "$d/infp.json")"
[ "$(j infp 'd["tokens_evaluated"]')" = "$(wc -w < "$d/fimp.ids")" ] || fail "infill with prompt: $(cat "$d/infp.json")"
# nothing around the cursor: the three FIM tokens
[ "$(post /infill '{"n_predict":2,"temperature":0}' infe)" = 200 ] && [ "$(j infe 'd["tokens_evaluated"]')" = 3 ] ||
  fail "empty infill: $(cat "$d/infe.json")"
# input_extra: the repository and file-separator tokens of Qwen's format
EXTRA='[{"filename":"util.py","text":"def sub(a, b):\n    return a - b\n"}]'
[ "$(post /infill "{\"input_prefix\":\"$PRE\",\"input_suffix\":\"$SUF\",\"input_extra\":$EXTRA,$GEN}" infx)" = 200 ] ||
  fail "infill extra: $(cat "$d/infx.json")"
post /tokenize "{\"content\":\"<|repo_name|>myproject\n<|file_sep|>util.py\ndef sub(a, b):\n    return a - b\n<|file_sep|>filename\n<|fim_prefix|>$PRE<|fim_suffix|>$SUF<|fim_middle|>\",\"parse_special\":true}" tokx > /dev/null
echo "$(j tokx 'd["tokens"]')" > "$d/fimx.ids"
"$REWIND" generate "$C" --ids "$d/fimx.ids" -n 8 --kv f32 --threads 1 --print-ids > "$d/wantx" || fail "generate (extra) failed"
[ "$(tr -s ' \n' ' ' < "$d/wantx" | sed 's/ $//')" = "$(j infx 'd["tokens"]')" ] || fail "infill extra vs generate on Qwen's layout"
[ "$(j infx 'd["tokens_evaluated"]')" = "$(j tokx 'len(d["tokens"])')" ] || fail "infill extra: $(cat "$d/infx.json")"
# a prefix longer than the context: cut from its start, "truncated"
LONG=$(python3 -c 'print("x = 1\\n" * 400, end="")')
[ "$(post /infill "{\"input_prefix\":\"$LONG\",\"input_suffix\":\"$SUF\",$GEN}" inft)" = 200 ] || fail "long infill: $(cat "$d/inft.json")"
[ "$(j inft 'd["truncated"]')" = true ] && [ "$(j inft 'd["tokens_evaluated"]')" -le 512 ] || fail "long infill: $(cat "$d/inft.json")"
# streamed: pieces, then the last event with the stats
native_stream /infill "{\"input_prefix\":\"$PRE\",\"input_suffix\":\"$SUF\",$GEN,\"stream\":true}" inf 8
# echo: the prompt's text, then the same output
[ "$(post /v1/completions '{"prompt":"Hello world","max_tokens":4,"temperature":0,"ignore_eos":true}' plain)" = 200 ] || fail "plain"
[ "$(post /v1/completions '{"prompt":"Hello world","max_tokens":4,"temperature":0,"ignore_eos":true,"echo":true,"logprobs":1}' echo)" = 200 ] ||
  fail "echo: $(cat "$d/echo.json")"
python3 -c 'import json, sys
e, p = (json.load(open(f))["choices"][0]["text"] for f in sys.argv[1:])
assert e == "Hello world" + p, (e, p)' "$d/echo.json" "$d/plain.json" || fail "echo text: $(cat "$d/echo.json") vs $(cat "$d/plain.json")"
# with logprobs the prompt's tokens come first (the first one's null), then
# the output's, whose offsets count from the echoed text's start
python3 -c 'import json, sys
c = json.load(open(sys.argv[1]))["choices"][0]
lp, n = c["logprobs"], json.load(open(sys.argv[1]))["usage"]["prompt_tokens"]
assert len(lp["tokens"]) == n + 4 and lp["token_logprobs"][0] is None and lp["top_logprobs"][0] is None, lp
assert lp["text_offset"][0] == 0 and lp["text_offset"][n] == 11 and "".join(lp["tokens"][:n]) == "Hello world", lp' \
  "$d/echo.json" || fail "echo offsets: $(cat "$d/echo.json")"
curl -s -N --max-time 60 "http://127.0.0.1:$port/v1/completions" \
  -d '{"prompt":"Hello world","max_tokens":4,"temperature":0,"ignore_eos":true,"echo":true,"stream":true}' > "$d/esse"
python3 - "$d/esse" "$d/echo.json" <<'PY' || fail "echo stream: $(cat "$d/esse")"
import json, sys
ev = [json.loads(l[6:]) for l in open(sys.argv[1]) if l.startswith("data: {")]
assert ev[0]["choices"][0]["text"] == "Hello world", ev[0]
assert "".join(e["choices"][0].get("text", "") for e in ev if e["choices"]) == json.load(open(sys.argv[2]))["choices"][0]["text"]
PY
# response_fields: only those, a path's value under the path (as llama.vim asks)
RF='"response_fields":["content","timings/prompt_n","timings/predicted_ms","tokens_cached","truncated"]'
[ "$(post /infill "{\"input_prefix\":\"$PRE\",\"input_suffix\":\"$SUF\",$GEN,$RF}" infr)" = 200 ] || fail "response_fields"
[ "$(j infr 'sorted(d)')" = "content timings/predicted_ms timings/prompt_n tokens_cached truncated" ] &&
  [ "$(j infr 'd["content"] == json.load(open(sys.argv[1].rsplit("/", 1)[0] + "/inf.json"))["content"]')" = true ] ||
  fail "response_fields: $(cat "$d/infr.json")"
# busy slots: two long answers run in both; their slots refuse save and
# erase (503), and fail_on_no_slot says none is free
for k in 1 2; do
  curl -s -N --max-time 120 "http://127.0.0.1:$port/infill" \
    -d "{\"input_prefix\":\"$PRE\",\"n_predict\":400,\"temperature\":0,\"ignore_eos\":true,\"stream\":true}" > "$d/long$k" &
  eval "long$k=\$!"
done
busy=
for _ in $(seq 1 400); do # curl and grep only: the answers take a few seconds
  curl -s "http://127.0.0.1:$port/slots" > "$d/sb.json"
  [ "$(grep -o '"is_processing":true' "$d/sb.json" | wc -l)" = 2 ] && { busy=1; break; }
  sleep 0.01
done
[ -n "$busy" ] || fail "two long answers never ran together: $(cat "$d/sb.json")"
fb=$(curl -s -o "$d/fb.json" -w '%{http_code}' "http://127.0.0.1:$port/slots?fail_on_no_slot=1")
sv0=$(post '/slots/0?action=save' '{"filename":"busy.bin"}' bz0)
er1=$(post '/slots/1?action=erase' '' bz1)
curl -s "http://127.0.0.1:$port/slots" > "$d/sb2.json"
[ "$(grep -o '"is_processing":true' "$d/sb2.json" | wc -l)" = 2 ] || fail "the long answers ended too soon to test busy slots"
[ "$fb" = 503 ] || fail "fail_on_no_slot with every slot busy: $fb $(cat "$d/fb.json")"
[ "$sv0" = 503 ] || fail "save of a busy slot: $sv0 $(cat "$d/bz0.json")"
[ "$er1" = 503 ] || fail "erase of a busy slot: $er1 $(cat "$d/bz1.json")"
[ "$(j sb 'all(s["id_task"] > 0 and s["n_prompt_tokens"] > 0 for s in d)')" = true ] || fail "busy slots: $(cat "$d/sb.json")"
wait "$long1" "$long2"
grep -q '"stop":true' "$d/long1" && grep -q '"stop":true' "$d/long2" || fail "the long answers did not end"
[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/slots?fail_on_no_slot=1")" = 200 ] || fail "fail_on_no_slot when idle"
[ ! -e "$d/cslots/busy.bin" ] || fail "a busy slot was saved"
[ "$(post /v1/completions '{"prompt":"x","echo":"yes"}' bad)" = 400 ] || fail "echo must be a boolean"
[ "$(post /v1/completions '{"prompt":"x","suffix":3}' bad)" = 400 ] || fail "suffix must be a string"
[ "$(post /infill '{"input_prefix":3}' bad)" = 400 ] || fail "input_prefix must be a string"
[ "$(post /infill '{"input_extra":[{"filename":"a"}]}' bad)" = 400 ] || fail "input_extra without text"
stop

# ---- a model without FIM tokens; slots ----
mkdir "$d/slots" "$d/elsewhere"
start "$F" --cache-bytes 64M --slot-save-path "$d/slots"
[ "$(post /infill '{"input_prefix":"a","input_suffix":"b"}' nofim)" = 400 ] || fail "infill without FIM tokens: $(cat "$d/nofim.json")"
grep -q "fill-in-the-middle tokens" "$d/nofim.json" || fail "infill 400 message: $(cat "$d/nofim.json")"
[ "$(post /v1/completions '{"prompt":"a","suffix":"b"}' nofim2)" = 400 ] || fail "suffix without FIM tokens"
grep -q '"param":"suffix"' "$d/nofim2.json" || fail "suffix 400: $(cat "$d/nofim2.json")"

curl -s "http://127.0.0.1:$port/slots" > "$d/s0.json"
[ "$(j s0 'len(d)')" = 2 ] && [ "$(j s0 '[s["n_tokens"] for s in d]')" = "0 0" ] &&
  [ "$(j s0 '[s["is_processing"] for s in d] == [False, False] and d[0]["n_ctx"] == 512')" = true ] || fail "slots at start: $(cat "$d/s0.json")"
[ "$(post '/slots/0?action=save' '{"filename":"empty.bin"}' se)" = 400 ] || fail "save of an empty slot: $(cat "$d/se.json")"
A=$(tr -s ' \n' ' ' < "$FIX/qwen3/qwen3.prompt.ids" | cut -d' ' -f1-60)
ASK="{\"prompt\":$(ids_json "$A"),\"max_tokens\":8,\"temperature\":0,\"ignore_eos\":true,\"return_token_ids\":true}"
[ "$(post /v1/completions "$ASK" a1)" = 200 ] || fail "request: $(cat "$d/a1.json")"
ans=$(j a1 'd["choices"][0]["token_ids"]')
curl -s "http://127.0.0.1:$port/slots" > "$d/s1.json"
held=$(j s1 'd[0]["n_tokens"]')
[ "$held" -ge 60 ] && [ "$(j s1 'd[0]["n_prompt_tokens"]')" = 60 ] && [ "$(j s1 'len(d[0]["prompt"]) > 0')" = true ] ||
  fail "slot 0 after a request: $(cat "$d/s1.json")"
[ "$(post '/slots/0?action=save' '{"filename":"a.bin"}' sv)" = 200 ] || fail "save: $(cat "$d/sv.json")"
[ "$(j sv 'd["n_saved"]')" = "$held" ] && [ "$(j sv 'd["n_written"]')" = "$(stat -c %s "$d/slots/a.bin")" ] &&
  [ "$(j sv '"save_ms" in d["timings"]')" = true ] || fail "save answer: $(cat "$d/sv.json")"
# file names: plain names inside the folder only
for bad in '../elsewhere/x.bin' '/tmp/x.bin' '.hidden' 'a/b.bin' '' '..'; do
  [ "$(post '/slots/0?action=save' "{\"filename\":\"$bad\"}" tr)" = 400 ] || fail "filename '$bad' accepted: $(cat "$d/tr.json")"
done
[ "$(post '/slots/0?action=save' '{}' tr)" = 400 ] || fail "no filename"
[ "$(post '/slots/0?action=restore' '{"filename":"../slots/a.bin"}' tr)" = 400 ] || fail "restore through .."
[ -z "$(ls "$d/elsewhere")" ] && [ "$(ls "$d/slots")" = a.bin ] || fail "files written: $(ls -R "$d")"
[ "$(post '/slots/0?action=load' '{"filename":"a.bin"}' ba)" = 400 ] || fail "unknown action"
[ "$(post '/slots/7?action=save' '{"filename":"a.bin"}' ba)" = 400 ] || fail "unknown slot"
[ "$(post '/slots/x?action=save' '{"filename":"a.bin"}' ba)" = 400 ] || fail "slot id not a number"
[ "$(post '/slots/0?action=erase' '' er)" = 200 ] && [ "$(j er 'd["n_erased"]')" = "$held" ] || fail "erase: $(cat "$d/er.json")"
curl -s "http://127.0.0.1:$port/slots" > "$d/s2.json"
[ "$(j s2 'd[0]["n_tokens"]')" = 0 ] || fail "slot 0 after erase: $(cat "$d/s2.json")"
# corrupt, truncated, foreign and missing files: 400, and the server goes on
cp "$d/slots/a.bin" "$d/slots/bad.bin"
python3 -c 'import sys; p = sys.argv[1]; b = bytearray(open(p, "rb").read()); b[len(b) // 2] ^= 0x5a; open(p, "wb").write(b)' "$d/slots/bad.bin"
head -c 100 "$d/slots/a.bin" > "$d/slots/short.bin"
echo "not a state file" > "$d/slots/text.bin"
for f in bad.bin short.bin text.bin missing.bin; do
  [ "$(post '/slots/1?action=restore' "{\"filename\":\"$f\"}" rb)" = 400 ] || fail "restore of $f: $(cat "$d/rb.json")"
  grep -q "$d" "$d/rb.json" && fail "the folder's path in an answer: $(cat "$d/rb.json")"
done
[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health")" = 200 ] || fail "server down after bad files"
stop

# a fresh server (empty prefix cache): restored into slot 1, the same
# request reuses it and answers the same
start "$F" --cache-bytes 64M --slot-save-path "$d/slots"
[ "$(post '/slots/1?action=restore' '{"filename":"a.bin"}' rs)" = 200 ] || fail "restore: $(cat "$d/rs.json")"
[ "$(j rs 'd["n_restored"]')" = "$held" ] && [ "$(j rs 'd["id_slot"]')" = 1 ] || fail "restore answer: $(cat "$d/rs.json")"
curl -s "http://127.0.0.1:$port/slots" > "$d/s3.json"
[ "$(j s3 'd[1]["n_tokens"]')" = "$held" ] || fail "slot 1 after restore: $(cat "$d/s3.json")"
[ "$(post /v1/completions "$ASK" a2)" = 200 ] || fail "request after restore"
[ "$(j a2 'd["usage"]["prompt_tokens_details"]["cached_tokens"]')" -ge 59 ] || fail "restored slot not reused: $(cat "$d/a2.json")"
[ "$(j a2 'd["choices"][0]["token_ids"]')" = "$ans" ] || fail "after restore '$(j a2 'd["choices"][0]["token_ids"]')' vs '$ans'"
echo "$A" > "$d/a.ids"
"$REWIND" generate "$F" --ids "$d/a.ids" -n 8 --kv f32 --threads 1 --print-ids > "$d/wanta" || fail "generate failed"
[ "$(tr -s ' \n' ' ' < "$d/wanta" | sed 's/ $//')" = "$ans" ] || fail "server '$ans' vs generate '$(cat "$d/wanta")'"
# a state file of another model
cp "$d/slots/a.bin" "$d/keep.bin"
stop
start "$C" --cache-bytes 64M --slot-save-path "$d/slots"
[ "$(post '/slots/0?action=restore' '{"filename":"a.bin"}' fo)" = 400 ] || fail "another model's file: $(cat "$d/fo.json")"
stop
# without --slot-save-path: save and restore are not offered
start "$F" --cache-bytes 64M
[ "$(post '/slots/0?action=save' '{"filename":"a.bin"}' ns)" = 501 ] || fail "save without --slot-save-path: $(cat "$d/ns.json")"
[ "$(post '/slots/0?action=erase' '' ne)" = 200 ] || fail "erase without --slot-save-path"
# /completion (llama-server's native completion): the tokens /v1/completions
# gives for the same prompt, as ids and as text, in the native shape
NGEN='"n_predict":8,"temperature":0,"ignore_eos":true'
[ "$(post /completion "{\"prompt\":$(ids_json "$A"),$NGEN}" nc)" = 200 ] || fail "/completion: $(cat "$d/nc.json")"
[ "$(j nc 'd["tokens"]')" = "$ans" ] || fail "/completion '$(j nc 'd["tokens"]')' vs '$ans'"
[ "$(j nc 'd["stop"]')" = true ] && [ "$(j nc 'd["stop_type"]')" = limit ] && [ "$(j nc 'd["tokens_predicted"]')" = 8 ] &&
  [ "$(j nc 'd["tokens_evaluated"]')" = 60 ] && [ "$(j nc '"predicted_n" in d["timings"]')" = true ] ||
  fail "/completion answer: $(cat "$d/nc.json")"
[ "$(post /v1/completions '{"prompt":"Hello world","max_tokens":6,"temperature":0,"ignore_eos":true,"return_token_ids":true}' ct)" = 200 ] ||
  fail "completions (text)"
[ "$(post /completion '{"prompt":"Hello world","n_predict":6,"temperature":0,"ignore_eos":true}' nt)" = 200 ] || fail "/completion (text)"
[ "$(j nt 'd["tokens"]')" = "$(j ct 'd["choices"][0]["token_ids"]')" ] &&
  [ "$(j nt 'd["content"]')" = "$(j ct 'd["choices"][0]["text"]')" ] &&
  [ "$(j nt 'd["tokens_evaluated"]')" = "$(j ct 'd["usage"]["prompt_tokens"]')" ] ||
  fail "/completion (text) $(cat "$d/nt.json") vs $(cat "$d/ct.json")"
native_stream /completion '{"prompt":"Hello world","n_predict":6,"temperature":0,"ignore_eos":true,"stream":true}' nt 6
# n_probs: llama-server's completion_probabilities, the logprobs /v1/completions gives
[ "$(post /completion '{"prompt":"Hello world","n_predict":6,"temperature":0,"ignore_eos":true,"n_probs":3}' np)" = 200 ] ||
  fail "/completion n_probs: $(cat "$d/np.json")"
[ "$(post /v1/completions '{"prompt":"Hello world","max_tokens":6,"temperature":0,"ignore_eos":true,"logprobs":3}' cp)" = 200 ] ||
  fail "completions logprobs"
[ "$(j np '[p["id"] for p in d["completion_probabilities"]] == d["tokens"]')" = true ] &&
  [ "$(j np '[p["logprob"] for p in d["completion_probabilities"]] == json.load(open(sys.argv[1].rsplit("/", 1)[0] + "/cp.json"))["choices"][0]["logprobs"]["token_logprobs"]')" = true ] &&
  [ "$(j np 'all(len(p["top_logprobs"]) == 3 and "id" in p["top_logprobs"][0] for p in d["completion_probabilities"])')" = true ] ||
  fail "/completion n_probs: $(cat "$d/np.json") vs $(cat "$d/cp.json")"
native_stream /completion '{"prompt":"Hello world","n_predict":6,"temperature":0,"ignore_eos":true,"n_probs":3,"stream":true}' np 6
for bad in '{}' '{"prompt":5}' '{"prompt":"a","n_predict":"x"}' '[]' '{'; do
  [ "$(post /completion "$bad" ncb)" = 400 ] || fail "/completion $bad: $(cat "$d/ncb.json")"
done
stop
start "$F" --no-slots
[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/slots")" = 501 ] || fail "GET /slots with --no-slots"
[ "$(post '/slots/0?action=erase' '' ne)" = 501 ] || fail "erase with --no-slots"
stop
echo "ok"
