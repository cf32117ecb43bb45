#!/usr/bin/env python3
"""Oracle fixtures for trueno-quant, from the `gguf` package's numpy ports of GGML's formats.

    python3 scripts/quant_fixtures.py OUT_DIR

For each format writes OUT_DIR/<NAME>.raw.q (random blocks: random bytes with finite random
f16 scales), OUT_DIR/<NAME>.raw.deq (the oracle's f32 dequantization of them), and for the
formats the oracle can quantize (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) OUT_DIR/<NAME>.f32 (input
rows), <NAME>.q (the oracle's bytes) and <NAME>.deq. meta.json lists what was written.
tests/oracle.rs in crates/trueno-quant reads them (TRUENO_QUANT_FIXTURES=OUT_DIR).
"""

import json
import os
import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.constants import GGML_QUANT_SIZES
from gguf.quants import dequantize, quantize

# Byte offsets of the f16 scale fields in each block (kept finite in the random blocks).
F16_FIELDS = {
    "Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2], "Q8_0": [0],
    "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208],
}
QUANTIZABLE = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0"]
BLOCKS = 512


def random_blocks(rng, name):
    qtype = T[name]
    block, size = GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, size=(BLOCKS, size), dtype=np.uint8)
    for off in F16_FIELDS[name]:
        # Scales over many binades, subnormals included, never NaN or Inf.
        mag = np.exp2(rng.uniform(-26, 4, size=BLOCKS)) * rng.choice([-1, 1], size=BLOCKS)
        raw[:, off:off + 2] = mag.astype(np.float16).view(np.uint8).reshape(BLOCKS, 2)
    return raw, block


def input_rows(rng, block):
    """Rows of varied shape: gaussian at several scales, uniform, all-positive, constant,
    zero, a lone outlier, tiny (subnormal-ish) values, and exact ties around rounding."""
    n = BLOCKS * block
    x = rng.standard_normal(n).astype(np.float32)
    x *= np.repeat(np.exp2(rng.uniform(-8, 8, size=BLOCKS)), block).astype(np.float32)
    x = x.reshape(BLOCKS, block)
    x[0] = 0.0
    x[1] = 3.25
    x[2] = np.abs(x[2]) + 1.0
    x[3] = 0.0
    x[3, 7] = -5.0
    x[4] = rng.uniform(-1, 1, size=block).astype(np.float32) * np.float32(1e-30)
    x[5] = (np.arange(block, dtype=np.float32) - block / 2) * np.float32(0.5)
    x[6] = -np.abs(x[6])
    return x.reshape(-1)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(20261122)
    meta = {}
    for name in F16_FIELDS:
        raw, block = random_blocks(rng, name)
        deq = dequantize(raw, T[name]).astype(np.float32)
        raw.tofile(os.path.join(out, f"{name}.raw.q"))
        deq.tofile(os.path.join(out, f"{name}.raw.deq"))
        entry = {"raw_blocks": BLOCKS, "block_elems": block}
        if name in QUANTIZABLE:
            x = input_rows(rng, block)
            q = quantize(x.reshape(1, -1), T[name]).reshape(-1)
            x.tofile(os.path.join(out, f"{name}.f32"))
            q.tofile(os.path.join(out, f"{name}.q"))
            dequantize(q.reshape(1, -1), T[name]).astype(np.float32).tofile(
                os.path.join(out, f"{name}.deq"))
            entry["quantized_elems"] = int(x.size)
        meta[name] = entry
    with open(os.path.join(out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print(f"wrote oracle fixtures for {len(meta)} formats to {out}")


if __name__ == "__main__":
    main()
