#!/usr/bin/env bash
# Seed corpus for fuzz_chat_template: the real templates of the fixtures,
# each alone (the harness's own conversation) and followed by a NUL and a
# conversation with tools calls, tool results, reasoning and odd characters.
set -eu
out="$1"; fx="${RW_FIXTURES:-../shared/fixtures}"
mkdir -p "$out"
[ -d "$fx/chat/templates" ] || exit 0
conv='[{"role":"system","content":"Be brief. \u00e9\u00a0\u200b"},{"role":"user","content":"Hi {{ x }} {% if %}"},'
conv+='{"role":"assistant","content":"","reasoning_content":"think","tool_calls":[{"id":"c1","type":"function",'
conv+='"function":{"name":"get","arguments":{"city":"Paris","n":2.5,"ok":true,"tags":["a",null]}}}]},'
conv+='{"role":"tool","tool_call_id":"c1","content":"{\"t\": 21}"},{"role":"assistant","content":"<think>x</think>Done"},'
conv+='{"role":"user","content":[{"type":"text","text":"part"}]}]'
for f in "$fx"/chat/templates/*.jinja; do
  b=$(basename "$f" .jinja)
  cp "$f" "$out/$b.jinja"
  { cat "$f"; printf '\0%s' "$conv"; } > "$out/$b.conv"
done
