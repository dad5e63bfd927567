#!/usr/bin/env bash
# rewind chat-template: exact output with no newline added, raise_exception's
# message alone on stderr, enable_thinking undefined unless given, --now,
# --tools, bos/eos options, usage errors, and ChatML for a model file
# without a template.
set -u
REWIND="${REWIND:-build/rewind}"
fail() { echo "FAIL: $*"; exit 1; }
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT

printf '%s' '[{"role":"system","content":"S"},{"role":"user","content":"Hi \u00e9"}]' > "$d/m.json"
printf '%s' '[{"type":"function","function":{"name":"f"}}]' > "$d/tools.json"
cat > "$d/t.jinja" <<'T'
{%- for m in messages %}<{{ m.role }}>{{ m.content }}
{% endfor %}
{%- if add_generation_prompt %}GEN{% endif %}|{{ enable_thinking is defined }}:{{ enable_thinking }}|{{ bos_token }}{{ eos_token }}|{{ strftime_now('%Y-%m-%d %H:%M') }}|{{ tools | tojson }}
T

"$REWIND" chat-template "$d/t.jinja" --messages "$d/m.json" --now 2025-03-14T09:26:53 > "$d/out" || fail "plain render exited $?"
printf '<system>S\n<user>Hi \xc3\xa9\n|False:||2025-03-14 09:26|null' | cmp -s - "$d/out" || fail "plain render: $(cat "$d/out")"

"$REWIND" chat-template "$d/t.jinja" --messages "$d/m.json" --add-generation-prompt --enable-thinking false \
  --bos-token '<s>' --eos-token '</s>' --tools "$d/tools.json" --now 2025-03-14T09:26:53 > "$d/out" || fail "full render exited $?"
printf '<system>S\n<user>Hi \xc3\xa9\nGEN|True:False|<s></s>|2025-03-14 09:26|[{"type": "function", "function": {"name": "f"}}]' |
  cmp -s - "$d/out" || fail "full render: $(cat "$d/out")"

# raise_exception: non-zero exit, exactly the message on stderr, nothing on stdout
printf '%s' "{% if messages[0].role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}x" > "$d/raise.jinja"
"$REWIND" chat-template "$d/raise.jinja" --messages "$d/m.json" > "$d/out" 2> "$d/err"
rc=$?
[ $rc -eq 1 ] || fail "raise_exception exit code $rc"
[ "$(cat "$d/err")" = "System role not supported" ] || fail "raise_exception stderr: $(cat "$d/err")"
[ ! -s "$d/out" ] || fail "raise_exception printed output"

# a syntax error and an evaluation error say where
printf '%s' 'a{% if %}' > "$d/bad.jinja"
"$REWIND" chat-template "$d/bad.jinja" --messages "$d/m.json" > /dev/null 2> "$d/err" && fail "syntax error accepted"
grep -q 'line 1' "$d/err" || fail "syntax error without position: $(cat "$d/err")"
printf '%s' $'\n\n{{ messages[0].content + 1 }}' > "$d/bad.jinja"
"$REWIND" chat-template "$d/bad.jinja" --messages "$d/m.json" > /dev/null 2> "$d/err" && fail "type error accepted"
grep -q 'line 3' "$d/err" || fail "type error without position: $(cat "$d/err")"

# bad messages JSON, missing files, usage errors
printf '%s' '[{"role": ' > "$d/broken.json"
"$REWIND" chat-template "$d/t.jinja" --messages "$d/broken.json" > /dev/null 2>&1; [ $? -eq 1 ] || fail "broken JSON not an error"
"$REWIND" chat-template "$d/none.jinja" --messages "$d/m.json" > /dev/null 2>&1; [ $? -eq 1 ] || fail "missing template not an error"
"$REWIND" chat-template "$d/t.jinja" > /dev/null 2>&1; [ $? -eq 2 ] || fail "missing --messages not a usage error"
"$REWIND" chat-template "$d/t.jinja" --messages "$d/m.json" --enable-thinking maybe > /dev/null 2>&1
[ $? -eq 2 ] || fail "bad --enable-thinking not a usage error"
"$REWIND" chat-template "$d/t.jinja" --messages "$d/m.json" --now 2025-03-14 > /dev/null 2>&1
[ $? -eq 2 ] || fail "bad --now not a usage error"

# a model file without tokenizer.chat_template renders ChatML
fx="${RW_FIXTURES:-../shared/fixtures}"
if [ -f "$fx/quant/zoo-Q8_0.gguf" ]; then
  "$REWIND" chat-template "$fx/quant/zoo-Q8_0.gguf" --messages "$d/m.json" --add-generation-prompt > "$d/out" || fail "GGUF render exited $?"
  printf '<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi \xc3\xa9<|im_end|>\n<|im_start|>assistant\n' |
    cmp -s - "$d/out" || fail "ChatML fallback: $(cat "$d/out")"
fi
echo ok
