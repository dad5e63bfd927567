#!/usr/bin/env bash
# /v1/embeddings and /v1/rerank through the real server on the qwen3 F32
# fixture:
# - the last-token, mean and CLS embeddings of the fixture prompt equal an
#   independent computation from llama.cpp's own residual stream (the
#   fixture's layers golden) with the file's output_norm, L2-normalized;
# - shape, unit norm, `dimensions` (the first d dimensions renormalized),
#   base64 = the same float32 bits as the float form, token-id inputs;
# - an input batched with others equals it alone bitwise, and an input whose
#   prefix the prefix cache holds equals the one computed by a server
#   without a cache bitwise (the cache reported the reuse); the same on a
#   hybrid model with n-gram drafting on and a generation running beside;
# - rerank: every document once, sorted by score, scores in [0, 1] and
#   equal to softmax(yes, no) of `rewind logits` on the same prompt ids,
#   top_n, return_documents, the aliases, markup in a document kept as text;
# - llama-server's own shape at /embedding(s): embd_normalize, and every
#   token's vector under --pooling none;
# - a client that hangs up cancels its inputs;
# - errors: 400 in OpenAI's shape for empty inputs, bad dimensions or
#   encoding, token ids outside the vocabulary, inputs beyond the context.
set -u
REWIND="${REWIND:-build/rewind}"
FIX="${RW_FIXTURES:-../shared/fixtures}"
F="$FIX/qwen3/qwen3-F32.gguf"
[ -f "$F" ] || { echo "skipped: no $F"; exit 77; }
command -v curl >/dev/null || { echo "skipped: no curl (scripts/setup.sh installs it)"; exit 77; }
command -v python3 >/dev/null || { echo "skipped: no python3"; exit 77; }
d=$(mktemp -d)
pid=
fail() { echo "FAIL: $*"; [ -n "$pid" ] && kill "$pid" 2>/dev/null; exit 1; }
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$d"' EXIT

. "$(dirname "$0")/serve_lib.sh"
start() { # extra serve options...
  serve_start "$d/log" "$F" --ctx 512 --kv f32 --threads 1 --parallel 4 "$@"
  pid=$serve_pid port=$serve_port
}
stop() { kill -TERM "$pid"; wait "$pid"; pid=; }
post() { # PATH BODY NAME -> $d/NAME.json, prints the HTTP status
  curl -s --max-time 120 -o "$d/$3.json" -w '%{http_code}' "http://127.0.0.1:$port$1" -d "$2"
}
ok() { # PATH BODY NAME: must be 200
  local st
  st=$(post "$1" "$2" "$3")
  [ "$st" = 200 ] || fail "$1 $3: status $st: $(cat "$d/$3.json")"
}
bad() { # PATH BODY NAME PARAM: must be a 400 in OpenAI's error shape naming PARAM ("" = any)
  local st
  st=$(post "$1" "$2" "$3")
  [ "$st" = 400 ] || fail "$3: status $st (want 400): $(cat "$d/$3.json")"
  python3 - "$d/$3.json" "$4" <<'EOF' || fail "$3: not an OpenAI error: $(cat "$d/$3.json")"
import json, sys
e = json.load(open(sys.argv[1]))["error"]
assert e["type"] == "invalid_request_error" and e["message"], e
assert not sys.argv[2] or e["param"] == sys.argv[2], e
EOF
}
py() { python3 - "$d" "$FIX" "$@" || fail "check failed: $*"; }
ids=$(tr -s ' \n' ',' < "$FIX/qwen3/qwen3.prompt.ids" | sed 's/,$//')

# ---- the pooled state is llama.cpp's last residual, normed and normalized ----
# the reference: output_norm (from the file, at the offset the fixture's
# JSON gives) applied to the layers golden's last layer, then pooled
cat > "$d/ref.py" <<'EOF'
import json, math, struct, sys
def reference(fix, pooling):
    meta = json.load(open(f"{fix}/qwen3/qwen3-F32.json"))
    hp = meta["hparams"]; n_layer, e, n = hp["n_layer"], hp["n_embd"], meta["n_prompt"]
    eps = meta["gguf_metadata"]["qwen3.attention.layer_norm_rms_epsilon"]
    t = [x for x in meta["tensors"] if x["name"] == "output_norm.weight"][0]
    with open(f"{fix}/qwen3/qwen3-F32.gguf", "rb") as f:
        f.seek(t["offset"]); w = struct.unpack(f"<{e}f", f.read(4 * e))
    raw = open(f"{fix}/qwen3/qwen3-F32.layers.f32", "rb").read()
    last = struct.unpack(f"<{n * e}f", raw[(n_layer - 1) * n * e * 4:n_layer * n * e * 4])
    def normed(r):
        x = last[r * e:(r + 1) * e]
        s = 1.0 / math.sqrt(sum(v * v for v in x) / e + eps)
        return [x[j] * s * w[j] for j in range(e)]
    if pooling == "last": v = normed(n - 1)
    elif pooling == "cls": v = normed(0)
    else:
        rows = [normed(r) for r in range(n)]
        v = [sum(r[j] for r in rows) / n for j in range(e)]
    nv = math.sqrt(sum(x * x for x in v))
    return [x / nv for x in v]
EOF
for pooling in last mean cls; do
  start --pooling $pooling --cache-bytes 0
  ok /v1/embeddings "{\"input\":[$ids]}" ref_$pooling
  py $pooling <<'EOF'
import json, sys
sys.path.insert(0, sys.argv[1]); from ref import reference
got = json.load(open(f"{sys.argv[1]}/ref_{sys.argv[3]}.json"))["data"][0]["embedding"]
want = reference(sys.argv[2], sys.argv[3])
err = max(abs(a - b) for a, b in zip(got, want))
assert len(got) == len(want) and err < 2e-5, (sys.argv[3], err)
print(f"{sys.argv[3]} pooling: max |server - llama.cpp reference| = {err:.2e}")
EOF
  stop
done

# ---- shape, norm, dimensions, base64, batched = alone, cached = uncached ----
start --pooling last --cache-bytes 256M
A="\"The quick brown fox jumps over the lazy dog\""
B="\"Embeddings map text to vectors\""
ok /v1/embeddings "{\"model\":\"x\",\"input\":$A}" a
ok /v1/embeddings "{\"input\":$A,\"encoding_format\":\"base64\"}" a64
ok /embeddings "{\"input\":$A,\"embd_normalize\":-1}" native_raw
ok /embedding "{\"content\":[$A,$B]}" native
ok /v1/embeddings "{\"input\":$B,\"encoding_format\":\"base64\"}" b64
ok /v1/embeddings "{\"input\":[$A,$B,[5,6,7,8]],\"encoding_format\":\"base64\"}" batch
ok /v1/embeddings "{\"input\":[[5,6,7,8]],\"encoding_format\":\"base64\"}" ids64
ok /v1/embeddings "{\"input\":$A,\"dimensions\":16}" dims
py <<'EOF'
import base64, json, math, struct, sys
d = sys.argv[1]
J = lambda n: json.load(open(f"{d}/{n}.json"))
a = J("a")
assert a["object"] == "list" and a["model"] and a["usage"]["prompt_tokens"] > 0
assert a["usage"]["total_tokens"] == a["usage"]["prompt_tokens"]
e = a["data"][0]
assert e["object"] == "embedding" and e["index"] == 0 and len(e["embedding"]) == 256
v = e["embedding"]
assert abs(math.sqrt(sum(x * x for x in v)) - 1) < 1e-5
# base64: little-endian float32, the same bits as the float form read back as float32
b = base64.b64decode(J("a64")["data"][0]["embedding"])
assert b == struct.pack("<256f", *v), "base64 differs from the float form"
# batched inputs: each equals the same input alone, bitwise
batch = J("batch")["data"]
assert [x["index"] for x in batch] == [0, 1, 2]
assert batch[0]["embedding"] == J("a64")["data"][0]["embedding"], "batched A != A alone"
assert batch[1]["embedding"] == J("b64")["data"][0]["embedding"], "batched B != B alone"
assert batch[2]["embedding"] == J("ids64")["data"][0]["embedding"], "batched ids != ids alone"
assert J("batch")["usage"]["prompt_tokens"] == J("a")["usage"]["prompt_tokens"] + J("b64")["usage"]["prompt_tokens"] + 4
# llama-server's own shape: [{index, embedding: [[...]]}], embd_normalize -1 = the raw pooled state
raw = J("native_raw")[0]["embedding"]
assert len(raw) == 1 and len(raw[0]) == 256 and J("native_raw")[0]["index"] == 0
nr = math.sqrt(sum(x * x for x in raw[0]))
assert abs(nr - 1) > 1e-3 and max(abs(x / nr - y) for x, y in zip(raw[0], v)) < 1e-6
nat = J("native")
assert [x["index"] for x in nat] == [0, 1] and nat[0]["embedding"][0] == v
# dimensions: the first 16 of the pooled vector, renormalized
w = J("dims")["data"][0]["embedding"]
assert len(w) == 16 and abs(math.sqrt(sum(x * x for x in w)) - 1) < 1e-5
n16 = math.sqrt(sum(x * x for x in v[:16]))
assert max(abs(x - y / n16) for x, y in zip(w, v[:16])) < 1e-5
EOF
# a shared prefix: the second input's first 100 tokens come from the cache
P1=$(tr -s ' \n' ' ' < "$FIX/qwen3/qwen3.prompt.ids" | cut -d' ' -f1-100 | tr ' ' ',')
P2=$(tr -s ' \n' ' ' < "$FIX/qwen3/qwen3.prompt.ids" | cut -d' ' -f1-120 | tr ' ' ',')
ok /v1/embeddings "{\"input\":[$P1],\"encoding_format\":\"base64\"}" p1
ok /v1/embeddings "{\"input\":[$P2],\"encoding_format\":\"base64\"}" p2c
ok /v1/embeddings "{\"input\":[$P1],\"encoding_format\":\"base64\"}" p1c
curl -s "http://127.0.0.1:$port/metrics" > "$d/m"
cached=$(grep -o '^rewind_prompt_tokens_cached_total{tier="memory"} [0-9]*' "$d/m" | awk '{print $2}')
[ "${cached:-0}" -ge 199 ] || fail "the prefix cache served ${cached:-0} tokens (want >= 100 + 99)"
# the rerank prompts of one query share their head: the cache serves it too
ok /v1/rerank '{"query":"what is a fox","documents":["a fox is an animal","Paris is in France","foxes eat mice","x"]}' rr_warm
stop
start --pooling last --cache-bytes 0
ok /v1/embeddings "{\"input\":[$P2],\"encoding_format\":\"base64\"}" p2u
ok /v1/embeddings "{\"input\":[$P1],\"encoding_format\":\"base64\"}" p1u
py <<'EOF'
import json, sys
d = sys.argv[1]
E = lambda n: json.load(open(f"{d}/{n}.json"))["data"][0]["embedding"]
assert E("p2c") == E("p2u"), "an input after a cached prefix differs from the uncached one"
assert E("p1c") == E("p1u") == E("p1"), "a whole cached input differs from the uncached one"
EOF

# ---- rerank ----
Q='what is a fox'
DOCS='["a fox is an animal","Paris is in France","foxes eat mice","x"]'
ok /v1/rerank "{\"model\":\"m\",\"query\":\"$Q\",\"documents\":$DOCS}" rr
ok /rerank "{\"query\":\"$Q\",\"documents\":$DOCS,\"top_n\":2,\"return_documents\":true}" rr_top
ok /v1/reranking "{\"query\":\"$Q\",\"documents\":[{\"text\":\"a fox is an animal\"},\"x\"]}" rr_obj
ok /reranking "{\"query\":\"$Q\",\"documents\":[\"x\"]}" rr_alias
py "$DOCS" <<'EOF'
import json, sys
d = sys.argv[1]; docs = json.loads(sys.argv[3])
J = lambda n: json.load(open(f"{d}/{n}.json"))
r = J("rr")
res = r["results"]
assert sorted(x["index"] for x in res) == list(range(len(docs)))
sc = [x["relevance_score"] for x in res]
assert all(0 <= s <= 1 for s in sc) and sc == sorted(sc, reverse=True), sc
assert all("document" not in x for x in res) and r["usage"]["prompt_tokens"] > 0
t = J("rr_top")["results"]
assert len(t) == 2 and [x["index"] for x in t] == [x["index"] for x in res[:2]]
assert all(x["document"]["text"] == docs[x["index"]] for x in t)
assert [x["relevance_score"] for x in t] == sc[:2]
w = J("rr_warm")["results"]
assert {x["index"]: x["relevance_score"] for x in w} == {x["index"]: x["relevance_score"] for x in res}, \
    "rerank scores differ with the prefix cache"
o = {x["index"]: x["relevance_score"] for x in J("rr_obj")["results"]}
s = {x["index"]: x["relevance_score"] for x in res}
assert o[0] == s[0] and o[1] == s[3], (o, s)
# the prompt of document 0, for the independent check below
pre = ("<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the Instruct "
       "provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n<|im_start|>user\n")
body = ("<Instruct>: Given a web search query, retrieve relevant passages that answer the query\n"
        f"<Query>: what is a fox\n<Document>: {docs[0]}")
suf = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
json.dump({"content": pre + body + suf, "add_special": False, "parse_special": True}, open(f"{d}/tok_req.json", "w"))
print(s[0], file=open(f"{d}/score0", "w"))
EOF
curl -s "http://127.0.0.1:$port/tokenize" -d @"$d/tok_req.json" > "$d/tok.json"
curl -s "http://127.0.0.1:$port/tokenize" -d '{"content":"yes"}' > "$d/yes.json"
curl -s "http://127.0.0.1:$port/tokenize" -d '{"content":"no"}' > "$d/no.json"
python3 -c "import json,sys; print(' '.join(map(str, json.load(open(sys.argv[1]))['tokens'])))" "$d/tok.json" > "$d/rr0.ids"
"$REWIND" logits "$F" --ids "$d/rr0.ids" --out "$d/rr0.f32" --threads 1 > /dev/null 2>&1 || fail "rewind logits failed"
py <<'EOF'
import json, math, os, struct, sys
d = sys.argv[1]
raw = open(f"{d}/rr0.f32", "rb").read()
V = 512
last = struct.unpack(f"<{V}f", raw[-4 * V:])
yes = json.load(open(f"{d}/yes.json"))["tokens"][0]
no = json.load(open(f"{d}/no.json"))["tokens"][0]
want = 1 / (1 + math.exp(last[no] - last[yes]))
got = float(open(f"{d}/score0").read())
assert abs(got - want) < 1e-5, (got, want)
print(f"rerank: score {got:.6f}, softmax(yes, no) of rewind logits {want:.6f}")
EOF

# ---- errors ----
bad /v1/embeddings '{"input":""}' e_empty input
bad /v1/embeddings '{"input":[]}' e_empty_list input
bad /v1/embeddings '{"input":[[]]}' e_empty_ids input
bad /v1/embeddings '{}' e_none input
bad /v1/embeddings '{"input":"x","dimensions":0}' e_dim0 dimensions
bad /v1/embeddings '{"input":"x","dimensions":257}' e_dim_big dimensions
bad /v1/embeddings '{"input":"x","dimensions":"8"}' e_dim_str dimensions
bad /v1/embeddings '{"input":"x","encoding_format":"hex"}' e_fmt encoding_format
bad /v1/embeddings '{"input":[1,2,99999]}' e_vocab input
bad /v1/embeddings '{"input":[1,{"a":1}]}' e_type input
long=$(python3 -c "print(','.join(['5'] * 600))")
bad /v1/embeddings "{\"input\":[$long]}" e_ctx input
[ "$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['error']['code'])" "$d/e_ctx.json")" = context_length_exceeded ] ||
  fail "too long: $(cat "$d/e_ctx.json")"
bad /v1/embeddings 'not json' e_json ""
bad /embedding '{"input":"x","embd_normalize":"2"}' e_norm embd_normalize
bad /v1/rerank '{"documents":["a"]}' r_noquery query
bad /v1/rerank '{"query":"q","documents":[]}' r_nodocs documents
bad /v1/rerank '{"query":"q","documents":[1]}' r_numdoc documents
bad /v1/rerank '{"query":"q","documents":["a"],"top_n":0}' r_top top_n
# a document's markup stays text: "<|im_end|>" is several tokens, not one
ok /v1/rerank '{"query":"q","documents":["x"]}' g1
ok /v1/rerank '{"query":"q","documents":["<|im_end|>"]}' g2
py <<'EOF2'
import json, sys
d = sys.argv[1]
t = lambda n: json.load(open(f"{d}/{n}.json"))["usage"]["prompt_tokens"]
assert t("g2") > t("g1") + 2, (t("g1"), t("g2"))
EOF2
# the server still answers
ok /v1/embeddings '{"input":"still here"}' after
stop

# ---- a hybrid model (DeltaNet + attention), with speculative n-gram
# drafts on and a generation running beside: an input after a cached prefix
# (the recurrent state restored from a checkpoint) equals the uncached one,
# and embeddings batched with a generation equal those made alone ----
H="$FIX/qwen35/qwen35-F32.gguf"
if [ -f "$H" ]; then
  hids=$(tr -s ' \n' ' ' < "$FIX/qwen35/qwen35.prompt.ids")
  H1=$(echo $hids | cut -d' ' -f1-90 | tr ' ' ',')
  H2=$(echo $hids | cut -d' ' -f1-120 | tr ' ' ',')
  serve_start "$d/log" "$H" --ctx 512 --kv f32 --threads 1 --parallel 4 --cache-bytes 0 --pooling last
  pid=$serve_pid port=$serve_port
  ok /v1/embeddings "{\"input\":[[$H1],[$H2]],\"encoding_format\":\"base64\"}" h_plain
  stop
  serve_start "$d/log" "$H" --ctx 512 --kv f32 --threads 1 --parallel 4 --cache-bytes 256M --pooling last --spec ngram
  pid=$serve_pid port=$serve_port
  ok /v1/embeddings "{\"input\":[$H1],\"encoding_format\":\"base64\"}" h1
  # a long generation runs while the second input is embedded
  curl -s --max-time 120 "http://127.0.0.1:$port/v1/completions" \
    -d '{"prompt":"count to a hundred:","max_tokens":200,"temperature":0,"ignore_eos":true}' > "$d/gen.json" &
  gen=$!
  sleep 0.3
  ok /v1/embeddings "{\"input\":[[$H2],[$H1]],\"encoding_format\":\"base64\"}" h2
  wait $gen
  grep -q '"completion_tokens":200' "$d/gen.json" || fail "the generation beside the embeddings: $(cat "$d/gen.json")"
  curl -s "http://127.0.0.1:$port/metrics" > "$d/m"
  cached=$(grep -o '^rewind_prompt_tokens_cached_total{tier="memory"} [0-9]*' "$d/m" | awk '{print $2}')
  [ "${cached:-0}" -ge 60 ] || fail "hybrid: the prefix cache served ${cached:-0} tokens"
  stop
  py <<'EOF2'
import json, sys
d = sys.argv[1]
E = lambda n: [x["embedding"] for x in json.load(open(f"{d}/{n}.json"))["data"]]
plain, h1, h2 = E("h_plain"), E("h1"), E("h2")
assert h1[0] == plain[0] and h2[1] == plain[0], "hybrid: the input alone differs"
assert h2[0] == plain[1], "hybrid: the input after a cached prefix differs from the uncached one"
EOF2
fi

# a client that hangs up cancels its inputs (the engine's cancelled counter)
serve_start "$d/log" "$F" --ctx 4096 --kv f32 --threads 1 --parallel 2 --max-queue 8 --pooling mean
pid=$serve_pid port=$serve_port
big=$(python3 -c "print(','.join(['[' + ','.join(['5'] * 4000) + ']'] * 8))")
curl -s -m 0.1 "http://127.0.0.1:$port/v1/embeddings" -d "{\"input\":[$big]}" > /dev/null
n=0
for _ in $(seq 1 100); do
  n=$(curl -s "http://127.0.0.1:$port/metrics" | grep -o '^rewind_requests_cancelled_total [0-9]*' | awk '{print $2}')
  [ "${n:-0}" -ge 1 ] && break
  sleep 0.1
done
[ "${n:-0}" -ge 1 ] || fail "a hung-up embeddings request was not cancelled"
ok /v1/embeddings '{"input":"after the hang-up"}' after_hangup
stop

# --pooling none gives no single vector: refused on the OpenAI route; the
# native route gives every token's vector (each normalized), the last one
# that of last-token pooling
start --pooling none
bad /v1/embeddings '{"input":"x"}' e_pool_none ""
ok /embedding "{\"input\":[$ids]}" none_rows
stop
py <<'EOF2'
import json, math, sys
d = sys.argv[1]
rows = json.load(open(f"{d}/none_rows.json"))[0]["embedding"]
last = json.load(open(f"{d}/ref_last.json"))["data"][0]["embedding"]
assert len(rows) == 128 and all(abs(math.sqrt(sum(x * x for x in r)) - 1) < 1e-5 for r in rows)
assert max(abs(a - b) for a, b in zip(rows[-1], last)) < 1e-7, "the last token's row differs from last pooling"
EOF2
echo "ok"
