#!/usr/bin/env python3
"""Writes zoo.imatrix.dat: a synthetic importance matrix in llama-imatrix's
legacy layout for the five tensors of the shared quantization zoo
(../shared/fixtures/quant), so the weighted quantizers meet the zoo's
awkward rows: log-normal weights, 2% of columns weighing 50-500, and a
32-column run of zero weights in every 512 (a whole block weighted 0).

Layout: int32 entries; per entry int32 name length, name, int32 calls,
int32 values, float32 values (the mean times the calls); then int32
chunks, int32 dataset length, dataset name."""
import random
import struct
import sys

random.seed(7002)
TENSORS = [("zoo.a_normal.weight", 256, 1), ("zoo.b_uniform.weight", 512, 1), ("zoo.c_mixed.weight", 1024, 1),
           ("zoo.d_blockscale.weight", 768, 1), ("zoo.e_3d.weight", 256, 3)]
CALLS = 7
out = struct.pack("<i", len(TENSORS))
for name, ne0, experts in TENSORS:
    n = ne0 * experts
    vals = []
    for j in range(n):
        r = random.random()
        if 64 <= j % 512 < 96:
            v = 0.0
        elif r < 0.02:
            v = random.uniform(50, 500)
        else:
            v = random.lognormvariate(0, 1.5)
        vals.append(v * CALLS)
    b = name.encode()
    out += struct.pack("<i", len(b)) + b + struct.pack("<ii", CALLS, n) + struct.pack("<%df" % n, *vals)
dataset = b"synthetic-zoo"
out += struct.pack("<i", 5) + struct.pack("<i", len(dataset)) + dataset
open(sys.argv[1] if len(sys.argv) > 1 else "zoo.imatrix.dat", "wb").write(out)
