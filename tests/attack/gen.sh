#!/usr/bin/env bash
# gen.sh DIR: the big adversarial requests (see README.md), written into DIR.
set -eu
d=$1
mkdir -p "$d"
rep() { local s=$1 n=$2; awk -v s="$s" -v n="$n" 'BEGIN { for (i = 0; i < n; i++) printf "%s", s }'; }
# a schema pattern of 2,000 and 100,000 nested groups (a stack overflow once)
for n in 2000 100000; do
  { echo "POST /v1/chat/completions"
    printf '{"messages":[{"role":"user","content":"hi"}],"max_tokens":4,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"string","pattern":"'
    rep "(" $n; printf a; rep ")" $n; printf '"}}}}\n'; } > "$d/pattern-$n.req"
done
# GBNF of 10,000 and 100,000 nested groups
for n in 10000 100000; do
  { echo "POST /v1/completions"
    printf '{"prompt":"hi","max_tokens":4,"grammar":"root ::= '; rep "(" $n; printf '\\"a\\"'; rep ")" $n; printf '"}\n'; } > "$d/gbnf-$n.req"
done
# a tool's parameters nested 100,000 deep (JSON past jansson's depth limit) and 1,500 deep (under it)
for n in 1500 100000; do
  { echo "POST /v1/chat/completions"
    printf '{"messages":[{"role":"user","content":"hi"}],"max_tokens":4,"tools":[{"type":"function","function":{"name":"f","parameters":'
    rep '{"type":"array","items":' $n; printf '{"type":"integer"}'; rep "}" $n; printf '}}],"tool_choice":"required"}\n'; } > "$d/tool-deep-$n.req"
done
# an object of 5,000 required properties, and anyOf 50 x 50 objects (sampled)
{ echo "POST /v1/chat/completions"
  printf '{"messages":[{"role":"user","content":"hi"}],"max_tokens":16,"temperature":1,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object","properties":{'
  awk 'BEGIN { for (i = 0; i < 5000; i++) printf "%s\"p%d\":{\"type\":\"string\"}", i ? "," : "", i }'
  printf '},"required":['
  awk 'BEGIN { for (i = 0; i < 5000; i++) printf "%s\"p%d\"", i ? "," : "", i }'
  printf ']}}}}\n'; } > "$d/wide-required.req"
{ echo "POST /v1/chat/completions"
  printf '{"messages":[{"role":"user","content":"hi"}],"max_tokens":16,"temperature":1,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"anyOf":['
  awk 'BEGIN { for (i = 0; i < 50; i++) { printf "%s{\"anyOf\":[", i ? "," : ""
    for (j = 0; j < 50; j++) printf "%s{\"type\":\"object\",\"properties\":{\"k%d_%d\":{\"type\":\"integer\"}},\"required\":[\"k%d_%d\"]}", j ? "," : "", i, j, i, j
    printf "]}" } }'
  printf ']}}}}\n'; } > "$d/wide-anyof.req"
# a chat template argument nested deep, 20,000 messages
{ echo "POST /v1/chat/completions"
  printf '{"messages":[{"role":"user","content":"hi"}],"max_tokens":4,"chat_template_kwargs":{"x":'; rep "[" 1500; rep "]" 1500; printf '}}\n'; } > "$d/kwargs-deep.req"
{ echo "POST /v1/chat/completions"
  printf '{"max_tokens":1,"messages":['
  awk 'BEGIN { for (i = 0; i < 20000; i++) printf "%s{\"role\":\"user\",\"content\":\"aaaaaaaaaaaaaaaaaaaa\"}", i ? "," : "" }'
  printf ']}\n'; } > "$d/many-messages.req"
