#!/usr/bin/env bash
# LoRA adapters (--lora, --lora-scaled) on the fixtures, with adapter files
# written here by make_lora.py in llama.cpp's layout:
# - on the qwen3 and qwen35 (hybrid) F32 files, the logits with an adapter
#   equal, within float rounding, those of the same model with the adapter
#   merged into its weights in double (W + B A * scale * alpha / rank,
#   computed independently in Python), and differ clearly from the model's
#   own;
# - scale 0 gives the model's own logits bit for bit; the adapter twice at
#   0.25 equals it once at 0.5 within rounding; batch, step, chunked and
#   1- or 2-thread passes give the same bits, also on the hybrid qwen35 Q8_0
#   file with an F16 adapter on its DeltaNet and attention projections;
# - a state saved with an adapter is refused without it (another model);
# - bad adapters are clear errors: another architecture, a model file, a
#   transposed lora_a, a lora_a without lora_b, a token-embedding pair, a
#   tensor that is no pair, a missing file, a bad --lora-scaled;
# - rewind serve --lora-scaled: GET /lora-adapters lists it, a greedy
#   completion equals `rewind generate` with the adapter, the prefix cache's
#   answer equals the first, POST /lora-adapters is a 501 that says why, a
#   request's "lora" at the loaded scales is accepted and any other a 400.
set -u
REWIND="${REWIND:-build/rewind}"
FIX="${RW_FIXTURES:-../shared/fixtures}"
F="$FIX/qwen3/qwen3-F32.gguf"
H="$FIX/qwen35/qwen35-Q8_0.gguf"
[ -f "$F" ] && [ -f "$H" ] || { echo "skipped: no fixtures"; exit 77; }
command -v python3 >/dev/null || { echo "skipped: no python3"; exit 77; }
command -v curl >/dev/null || { echo "skipped: no curl (scripts/setup.sh installs it)"; exit 77; }
d=$(mktemp -d)
pid=
fail() { echo "FAIL: $*"; [ -n "$pid" ] && kill "$pid" 2>/dev/null; exit 1; }
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$d"' EXIT
mk="python3 $(dirname "$0")/make_lora.py"

# max |a - b| over two float32 files, and max |a - c|
maxdiff() {
  python3 - "$1" "$2" <<'EOF'
import struct, sys
a, b = (open(p, "rb").read() for p in sys.argv[1:3])
assert len(a) == len(b) and a, (len(a), len(b))
x, y = (struct.unpack("<%df" % (len(v) // 4), v) for v in (a, b))
print(max(abs(p - q) for p, q in zip(x, y)))
EOF
}
below() { python3 -c "import sys; sys.exit(0 if float('$1') <= float('$2') else 1)"; }

"$REWIND" inspect "$F" --json >"$d/f.json" || fail "inspect"
$mk "$F" "$d/f.json" "$d/a.gguf" --merged "$d/qwen3-merged.gguf" --scale 0.5 --rank 4 --alpha 8 --seed 1 || fail "make_lora"
printf 'The quick brown fox jumps over the lazy dog, then it rests in the shade of a tree.' >"$d/p.txt"
"$REWIND" tokenize "$F" -f "$d/p.txt" >"$d/ids" || fail "tokenize"
lg() { # OUT MODEL [options...]
  local out=$1 model=$2
  shift 2
  "$REWIND" logits "$model" --ids "$d/ids" --out "$d/$out" "$@" 2>"$d/err" || fail "logits $out: $(cat "$d/err")"
}
# merged NAME MODEL ADAPTER SCALE: the logits with ADAPTER:SCALE against
# those of MODEL's merged copy (NAME-merged.gguf, written by make_lora.py)
# and against MODEL's own; the ids in $d/ids
merged() {
  local name=$1 model=$2 adapter=$3 scale=$4 m e
  lg "$name-lora.f32" "$model" --lora-scaled "$adapter:$scale"
  lg "$name-merged.f32" "$d/$name-merged.gguf"
  lg "$name-base.f32" "$model"
  m=$(maxdiff "$d/$name-lora.f32" "$d/$name-merged.f32")
  below "$m" 1e-3 || fail "$name: adapter against the merged model: max |diff| $m"
  e=$(maxdiff "$d/$name-lora.f32" "$d/$name-base.f32")
  below 1.0 "$e" || fail "$name: the adapter changes the logits by only $e"
  echo "$name: adapter vs merged weights max |diff| $m; vs no adapter $e"
}
merged qwen3 "$F" "$d/a.gguf" 0.5
cp "$d/qwen3-lora.f32" "$d/lora.f32"
cp "$d/qwen3-base.f32" "$d/base.f32"
lg zero.f32 "$F" --lora-scaled "$d/a.gguf:0"
cmp -s "$d/zero.f32" "$d/base.f32" || fail "scale 0 is not the model's own logits"
lg twice.f32 "$F" --lora-scaled "$d/a.gguf:0.25,$d/a.gguf:0.25"
t=$(maxdiff "$d/twice.f32" "$d/lora.f32")
below "$t" 1e-3 || fail "two adapters at 0.25 against one at 0.5: $t"
lg one.f32 "$F" --lora "$d/a.gguf"
o=$(maxdiff "$d/one.f32" "$d/lora.f32")
below 1e-3 "$o" || fail "--lora (scale 1) gives the scale-0.5 logits"
lg step.f32 "$F" --lora-scaled "$d/a.gguf:0.5" --mode step --threads 1
cmp -s "$d/step.f32" "$d/lora.f32" || fail "F32: step / 1 thread differs from batch"
# llama.cpp's arithmetic (B's input rounded to f16 for an F16 B): still the
# merged model's logits within rounding, batch and step the same bits
$mk "$F" "$d/f.json" "$d/a16.gguf" --type f16 --scale 0.5 --rank 4 --alpha 8 --seed 1 || fail "make_lora"
lg g1.f32 "$F" --lora-scaled "$d/a16.gguf:0.5" --numerics ggml
lg g2.f32 "$F" --lora-scaled "$d/a16.gguf:0.5" --numerics ggml --mode step
cmp -s "$d/g1.f32" "$d/g2.f32" || fail "ggml numerics: step differs from batch"
lg g3.f32 "$F" --lora-scaled "$d/a16.gguf:0.5"
g=$(maxdiff "$d/g1.f32" "$d/g3.f32")
below "$g" 0.1 && below 1e-6 "$g" || fail "F16 adapter: ggml numerics $g from the default's (rounded: > 0, < 0.1)"
echo "F16 adapter: ggml numerics (A x rounded to f16) vs the default: max |diff| $g"

# the hybrid F32 file against its merged weights: the DeltaNet projections
# (attn_qkv, attn_gate, ssm_alpha / beta / out) take the update too
H32="$FIX/qwen35/qwen35-F32.gguf"
if [ -f "$H32" ]; then
  "$REWIND" inspect "$H32" --json >"$d/h32.json" || fail "inspect"
  $mk "$H32" "$d/h32.json" "$d/c.gguf" --merged "$d/qwen35-merged.gguf" --scale 0.3 --rank 8 --alpha 16 --seed 3 \
    --targets attn_qkv,attn_gate,ssm_out,ssm_beta,ssm_alpha,attn_q,attn_v,ffn_up,ffn_down || fail "make_lora"
  "$REWIND" tokenize "$H32" -f "$d/p.txt" >"$d/ids" || fail "tokenize"
  merged qwen35 "$H32" "$d/c.gguf" 0.3
fi

# the hybrid file, an F16 adapter on its DeltaNet, attention and FFN matrices
"$REWIND" inspect "$H" --json >"$d/h.json" || fail "inspect"
$mk "$H" "$d/h.json" "$d/b.gguf" --type f16 --rank 8 --alpha 16 --seed 3 \
  --targets attn_qkv,attn_gate,ssm_out,ssm_beta,ssm_alpha,attn_q,attn_v,ffn_up,ffn_down || fail "make_lora"
"$REWIND" tokenize "$H" -f "$d/p.txt" >"$d/ids" || fail "tokenize"
lg hbase.f32 "$H"
lg hbatch.f32 "$H" --lora-scaled "$d/b.gguf:0.3" --threads 2
e=$(maxdiff "$d/hbatch.f32" "$d/hbase.f32")
below 0.1 "$e" || fail "the hybrid's adapter changes the logits by only $e"
lg hstep.f32 "$H" --lora-scaled "$d/b.gguf:0.3" --mode step --threads 1
cmp -s "$d/hstep.f32" "$d/hbatch.f32" || fail "qwen35: step differs from batch"
lg hchunk.f32 "$H" --lora-scaled "$d/b.gguf:0.3" --chunks 3,5
cmp -s "$d/hchunk.f32" "$d/hbatch.f32" || fail "qwen35: chunks 3,5 differ from batch"
lg hrep.f32 "$H" --lora-scaled "$d/b.gguf:0.3" --replay-from 7
cmp -s "$d/hrep.f32" "$d/hbatch.f32" || fail "qwen35: a rewind to 7 and replay differs"
echo "qwen35 Q8_0 with an F16 adapter: batch, step, chunks and rewind bitwise equal (vs no adapter $e)"

# a state saved with the adapter belongs to another model
lg saved.f32 "$H" --lora-scaled "$d/b.gguf:0.3" --save-state "$d/state"
if "$REWIND" logits "$H" --ids "$d/ids" --out "$d/x.f32" --load-state "$d/state" 2>"$d/err"; then
  fail "a state saved with an adapter loaded without it"
fi
grep -qi "model" "$d/err" || fail "state refused without saying why: $(cat "$d/err")"
lg again.f32 "$H" --lora-scaled "$d/b.gguf:0.3" --load-state "$d/state"

# bad adapters: exit 1 and a message
bad_adapter() { # NAME PATTERN [make_lora options...]
  local name=$1 pat=$2
  shift 2
  $mk "$F" "$d/f.json" "$d/$name.gguf" "$@" || fail "make_lora $name"
  "$REWIND" logits "$F" --ids "$d/ids" --out "$d/x.f32" --lora "$d/$name.gguf" 2>"$d/err"
  [ $? -eq 1 ] || fail "adapter $name: not exit 1"
  grep -qiE "$pat" "$d/err" || fail "adapter $name: $(cat "$d/err")"
}
"$REWIND" tokenize "$F" -f "$d/p.txt" >"$d/ids"
bad_adapter arch 'architecture "llama"' --arch llama
bad_adapter model 'not an adapter' --general-type model
bad_adapter transposed 'do not fit' --bad transposed
bad_adapter nob 'has no .*lora_b' --bad no-b
bad_adapter embd 'token_embd.weight that takes adapters' --bad embd
bad_adapter extra 'neither a .lora_a' --bad extra
"$REWIND" logits "$F" --ids "$d/ids" --out "$d/x.f32" --lora "$F" 2>"$d/err"
[ $? -eq 1 ] && grep -q "not an adapter" "$d/err" || fail "a model as adapter: $(cat "$d/err")"
"$REWIND" logits "$F" --ids "$d/ids" --out "$d/x.f32" --lora "$d/none.gguf" 2>"$d/err"
[ $? -eq 1 ] && grep -q "none.gguf" "$d/err" || fail "a missing adapter: $(cat "$d/err")"
"$REWIND" logits "$F" --ids "$d/ids" --out "$d/x.f32" --lora-scaled "$d/a.gguf" 2>"$d/err"
[ $? -eq 2 ] && grep -q "FILE:SCALE" "$d/err" || fail "--lora-scaled without a scale: $(cat "$d/err")"

# the server
. "$(dirname "$0")/../server/serve_lib.sh"
serve_start "$d/log" "$F" --ctx 256 --kv f32 --threads 1 --parallel 2 --lora-scaled "$d/a.gguf:0.5"
pid=$serve_pid port=$serve_port
curl -s "http://127.0.0.1:$port/lora-adapters" >"$d/list.json" || fail "GET /lora-adapters"
python3 - "$d/list.json" "$d/a.gguf" <<'EOF' || fail "GET /lora-adapters: $(cat "$d/list.json")"
import json, sys
l = json.load(open(sys.argv[1]))
assert l == [{"id": 0, "path": sys.argv[2], "scale": 0.5}], l
EOF
st=$(curl -s -o "$d/set.json" -w '%{http_code}' "http://127.0.0.1:$port/lora-adapters" -d '[{"id":0,"scale":1}]')
[ "$st" = 501 ] && grep -q "at load" "$d/set.json" || fail "POST /lora-adapters: $st $(cat "$d/set.json")"
body='{"prompt":"The quick brown fox","max_tokens":12,"temperature":0,"ignore_eos":true,"return_token_ids":true}'
for k in 1 2; do
  curl -s "http://127.0.0.1:$port/v1/completions" -d "$body" >"$d/c$k.json" || fail "completion $k"
done
"$REWIND" generate "$F" -p "The quick brown fox" -n 12 --print-ids --lora-scaled "$d/a.gguf:0.5" 2>/dev/null \
  | tail -n 1 >"$d/gen.ids"
"$REWIND" generate "$F" -p "The quick brown fox" -n 12 --print-ids 2>/dev/null | tail -n 1 >"$d/plain.ids"
python3 - "$d" <<'EOF' || fail "server against generate"
import json, sys
d = sys.argv[1]
c = [json.load(open(f"{d}/c{k}.json")) for k in (1, 2)]
ids = [x["choices"][0]["token_ids"] for x in c]
gen = [int(t) for t in open(f"{d}/gen.ids").read().split()]
plain = [int(t) for t in open(f"{d}/plain.ids").read().split()]
assert ids[0] == gen[-len(ids[0]):], (ids[0], gen)
assert ids[1] == ids[0], ids
assert c[1]["usage"]["prompt_tokens_details"]["cached_tokens"] > 0, c[1]["usage"]
assert plain[-12:] != gen[-12:], "the adapter changed nothing in 12 greedy tokens"
EOF
# a request's "lora" (llama-server's): the loaded scales are accepted, others refused
lora_req() { # LORA_JSON ROUTE: prints the status
  curl -s -o "$d/l.json" -w '%{http_code}' "http://127.0.0.1:$port$2" \
    -d "{\"prompt\":\"The quick brown fox\",\"max_tokens\":12,\"n_predict\":12,\"temperature\":0,\"ignore_eos\":true,\"return_token_ids\":true,\"lora\":$1}"
}
[ "$(lora_req '[{"id":0,"scale":0.5}]' /v1/completions)" = 200 ] || fail "lora at the loaded scale: $(cat "$d/l.json")"
python3 -c "import json,sys; a=json.load(open('$d/l.json')); b=json.load(open('$d/c1.json')); sys.exit(a['choices'][0]['token_ids'] != b['choices'][0]['token_ids'])" ||
  fail "lora at the loaded scale: other tokens"
[ "$(lora_req '[{"id":0,"scale":0.5}]' /completion)" = 200 ] || fail "/completion lora: $(cat "$d/l.json")"
for l in '[{"id":0,"scale":1}]' '[]' '[{"id":3,"scale":1}]' '{"id":0}' '[{"id":0}]'; do
  st=$(lora_req "$l" /v1/completions)
  [ "$st" = 400 ] && grep -q '"param":"lora"' "$d/l.json" || fail "lora $l: $st $(cat "$d/l.json")"
done
grep -q "per-request LoRA scales are not supported" <(lora_req '[]' /v1/chat/completions; cat "$d/l.json") ||
  fail "chat lora []: $(cat "$d/l.json")"
kill -TERM "$pid"
wait "$pid"
pid=
echo "ok"
