#!/usr/bin/env python3
"""make_lora.py - writes a LoRA adapter for a GGUF model, in the layout of
llama.cpp's convert_lora_to_gguf.py, and (for an F32 model) the same model
with the adapter merged into its weights, computed here in double:
W' = W + (B A) * scale * alpha / rank. Used by test_lora.sh.

  make_lora.py MODEL INSPECT_JSON ADAPTER_OUT [--merged OUT] [--rank R]
      [--alpha A] [--scale S] [--seed N] [--std X] [--targets a,b] [--type f32|f16]
      [--arch NAME] [--general-type T] [--bad transposed|no-b|embd|extra]

INSPECT_JSON is `rewind inspect MODEL --json` (names, shapes, offsets).
--targets names the weights by their suffix (attn_q, ffn_down, ...);
--bad writes an adapter that must be refused.
"""
import argparse
import json
import random
import struct
import sys


def gguf_string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def write_gguf(path, kvs, tensors):
    """kvs: [(key, 'str'|'f32', value)]; tensors: [(name, ne, type, bytes)]."""
    align = 32
    out = bytearray(b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)))
    for key, kind, value in kvs:
        out += gguf_string(key)
        if kind == "str":
            out += struct.pack("<I", 8) + gguf_string(value)
        else:
            out += struct.pack("<If", 6, value)
    offset = 0
    for name, ne, ty, data in tensors:
        out += gguf_string(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", n) for n in ne)
        out += struct.pack("<IQ", ty, offset)
        offset += (len(data) + align - 1) // align * align
    out += b"\0" * (-len(out) % align)
    for _, _, _, data in tensors:
        out += data + b"\0" * (-len(data) % align)
    with open(path, "wb") as f:
        f.write(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("inspect_json")
    ap.add_argument("adapter")
    ap.add_argument("--merged")
    ap.add_argument("--rank", type=int, default=4)
    ap.add_argument("--alpha", type=float, default=8.0)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--std", type=float, default=0.5, help="of A's and B's values (normal)")
    ap.add_argument("--targets", default="attn_q,attn_v,attn_output,ffn_down")
    ap.add_argument("--type", default="f32", choices=["f32", "f16"])
    ap.add_argument("--arch")
    ap.add_argument("--general-type", default="adapter")
    ap.add_argument("--bad", choices=["transposed", "no-b", "embd", "extra"])
    a = ap.parse_args()

    info = json.load(open(a.inspect_json))
    meta = {m["key"]: m["value"] for m in info["metadata"]} if isinstance(info["metadata"], list) else info["metadata"]
    arch = a.arch or meta["general.architecture"]
    rng = random.Random(a.seed)
    fmt, ty, size = ("f", 0, 4) if a.type == "f32" else ("e", 1, 2)
    targets = a.targets.split(",")
    r = a.rank
    s_eff = a.scale * a.alpha / r if a.alpha else a.scale
    adapter_tensors, deltas = [], {}
    for t in info["tensors"]:
        base = t["name"][: -len(".weight")] if t["name"].endswith(".weight") else None
        if not base or base.split(".")[-1] not in targets or len(t["ne"]) != 2:
            continue
        n_in, n_out = t["ne"]
        # A {n_in, r}: r rows of n_in; B {r, n_out}: n_out rows of r. Values
        # rounded to the file's type first, so the merge uses what is stored.
        A = [[rng.gauss(0, a.std) for _ in range(n_in)] for _ in range(r)]
        B = [[rng.gauss(0, a.std) for _ in range(r)] for _ in range(n_out)]
        A = [list(struct.unpack("<%d%s" % (n_in, fmt), struct.pack("<%d%s" % (n_in, fmt), *row))) for row in A]
        B = [list(struct.unpack("<%d%s" % (r, fmt), struct.pack("<%d%s" % (r, fmt), *row))) for row in B]
        a_bytes = b"".join(struct.pack("<%d%s" % (n_in, fmt), *row) for row in A)
        b_bytes = b"".join(struct.pack("<%d%s" % (r, fmt), *row) for row in B)
        a_ne, b_ne = [n_in, r], [r, n_out]
        if a.bad == "transposed":
            a_ne = [r, n_in]
        adapter_tensors.append((t["name"] + ".lora_a", a_ne, ty, a_bytes))
        if a.bad != "no-b":
            adapter_tensors.append((t["name"] + ".lora_b", b_ne, ty, b_bytes))
        deltas[t["name"]] = (t, A, B)
    if a.bad == "embd":
        n_embd, n_vocab = next(t["ne"] for t in info["tensors"] if t["name"] == "token_embd.weight")
        adapter_tensors.append(("token_embd.weight.lora_a", [n_embd, r], 0, b"\0" * (4 * n_embd * r)))
        adapter_tensors.append(("token_embd.weight.lora_b", [r, n_vocab], 0, b"\0" * (4 * r * n_vocab)))
    if a.bad == "extra":
        adapter_tensors.append(("blk.0.something.weight", [4], 0, b"\0" * 16))
    kvs = [("general.architecture", "str", arch), ("general.type", "str", a.general_type),
           ("adapter.type", "str", "lora"), ("adapter.lora.alpha", "f32", a.alpha)]
    write_gguf(a.adapter, kvs, adapter_tensors)

    if a.merged:
        data = bytearray(open(a.model, "rb").read())
        for name, (t, A, B) in deltas.items():
            if t["type"] != "F32":
                sys.exit("make_lora.py: --merged needs F32 weights (%s is %s)" % (name, t["type"]))
            n_in, n_out = t["ne"]
            off = t["offset"]
            W = struct.unpack_from("<%df" % (n_in * n_out), data, off)
            merged = []
            for o in range(n_out):
                Bo = B[o]
                row = W[o * n_in:(o + 1) * n_in]
                merged.extend(row[i] + s_eff * sum(Bo[k] * A[k][i] for k in range(r)) for i in range(n_in))
            struct.pack_into("<%df" % (n_in * n_out), data, off, *merged)
        with open(a.merged, "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
