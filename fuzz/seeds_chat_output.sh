#!/usr/bin/env bash
# Seed corpus for fuzz_chat_output: model outputs in every call format, with
# and without a think block, well-formed and broken, under a few format /
# flag bytes (see the harness), plus an openai-shaped conversation.
set -eu
out="$1"
mkdir -p "$out"
i=0
seed() { # FORMAT FLAGS TEXT
  printf "\\x$(printf %02x "$1")\\x$(printf %02x "$2")\\x07%s" "$3" > "$out/seed$i"
  i=$((i + 1))
}
xml='<tool_call>
<function=f>
<parameter=a>
3
</parameter>
<parameter=s>
hi <b>
</parameter>
</function>
</tool_call>'
json='<tool_call>
{"name": "f", "arguments": {"a": 3, "s": "x\"y", "n": [1, {"b": null}]}}
</tool_call>'
for flags in 1 3 5 7 12 13; do
  seed 7 $flags 'ok <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f
```json
{"a": 1}
```<｜tool▁call▁end｜>
<｜tool▁call▁begin｜>g<｜tool▁sep｜>{"s": "x"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>'
  seed 8 $flags 'Hm.<TOOLCALL>[{"name": "f", "arguments": {"a": 1}}, {"name": "g", "arguments": "{\"s\": 2}"}]</TOOLCALL>'
  seed 9 $flags '<|tool_call_start|>[f(a=1, s="x\"y", l=[1, 2.5, None], d={"k": True}), g()]<|tool_call_end|>after'
  seed 10 $flags '[TOOL_CALLS][{"name": "f", "arguments": {"a": 1}, "id": "abcdefghi"}, {"name": "g", "arguments": {}}]'
  seed 4 $flags '<|python_tag|>brave_search.call(query="x")'
  seed 4 $flags '<|python_tag|>{"name": "f", "parameters": {"a": [1, {"b": "c"}]}}'
  seed 10 $flags '[{"name": "f", "arguments": {"a": 1}}]'
  seed 10 $flags 'x[TOOL_CALLS]f[ARGS]{"a": [1, "b"]}[TOOL_CALLS]g[ARGS]{}'
done
for flags in 1 3 5 7; do
  seed 2 $flags "<think>r</think>Text before.
$xml
$xml"
  seed 3 $flags "Sure. $json
$json"
  seed 4 $flags '{"name": "f", "parameters": {"a": 1}}; {"name": "f", "parameters": {}}'
  seed 5 $flags '<|tool_call|>[{"name": "f", "arguments": {"a": 1}}, {"name": "f", "arguments": {}}]'
  seed 1 $flags '<TOOLCALL>[{"name": "f", "arguments": {"a": 1}}]</TOOLCALL> and <tool_call>{"name": "f"}</tool_call>'
  seed 3 $flags '<tool_call>{"name": "f", "arguments": {"s": "cut'
  seed 2 $flags '<tool_call>
<function=f>
<parameter=a>
1
</parameter>
<parameter=s'
done
seed 0 9 '[{"role":"developer","content":"x"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},{"role":"tool","tool_call_id":"call_1","content":"r"}]'
