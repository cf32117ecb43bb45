#!/usr/bin/env python3
"""Oracle fixtures for trueno-quant, from the `gguf` package's numpy ports of GGML's formats.

    python3 scripts/quant_fixtures.py OUT_DIR

For each format writes OUT_DIR/<NAME>.raw.q (random blocks: random bytes with finite random
f16 scales), OUT_DIR/<NAME>.raw.deq (the oracle's f32 dequantization of them), and for the
formats the oracle can quantize (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) OUT_DIR/<NAME>.f32 (input
rows), <NAME>.q (the oracle's bytes) and <NAME>.deq. meta.json lists what was written.
oracle.gguf is a file from the package's GGUFWriter (every value type, nested arrays,
several tensor types); oracle_gguf.json records what went into it.
tests/oracle.rs in crates/trueno-quant reads them (TRUENO_QUANT_FIXTURES=OUT_DIR).
"""

import json
import os
import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import GGUFValueType as V
from gguf import GGUFWriter
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


def fnv64(data: bytes) -> int:
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def write_gguf(rng, out):
    path = os.path.join(out, "oracle.gguf")
    w = GGUFWriter(path, arch="trueno-test")
    kvs = [
        ("test.u8", V.UINT8, 200), ("test.i8", V.INT8, -100), ("test.u16", V.UINT16, 65000),
        ("test.i16", V.INT16, -32000), ("test.u32", V.UINT32, 4000000000),
        ("test.i32", V.INT32, -2000000000), ("test.f32", V.FLOAT32, -1.25),
        ("test.bool", V.BOOL, True), ("test.string", V.STRING, "héllo, GGUF"),
        ("test.u64", V.UINT64, 2**63 + 5), ("test.i64", V.INT64, -(2**62)),
        ("test.f64", V.FLOAT64, 1e-300),
        ("test.empty_string", V.STRING, ""),
    ]
    for key, vt, val in kvs:
        w.add_key_value(key, val, vt)
    arrays = [
        ("test.array.i32", V.INT32, [1, -2, 3]),
        ("test.array.f32", V.FLOAT32, [0.5, -0.25]),
        ("test.array.string", V.STRING, ["a", "bc", ""]),
        ("test.array.bool", V.BOOL, [True, False, True]),
        ("test.array.nested", V.ARRAY, [[1, 2], [3]]),
    ]
    for key, sub, val in arrays:
        w.add_key_value(key, val, V.ARRAY, sub_type=sub)
    tensors = []
    f = rng.standard_normal((3, 64)).astype(np.float32)
    w.add_tensor("t.f32", f)
    tensors.append(("t.f32", [64, 3], "F32", f.tobytes()))
    h = rng.standard_normal((2, 32)).astype(np.float16)
    w.add_tensor("t.f16", h)
    tensors.append(("t.f16", [32, 2], "F16", h.tobytes()))
    for name in ["Q8_0", "Q4_0"]:
        x = rng.standard_normal((4, 64)).astype(np.float32)
        q = quantize(x, T[name])
        w.add_tensor(f"t.{name}", q, raw_dtype=T[name])
        tensors.append((f"t.{name}", [64, 4], name, q.tobytes()))
    raw, _ = random_blocks(rng, "Q4_K")
    k = raw[:6].reshape(2, 3 * 144)
    w.add_tensor("t.Q4_K", k, raw_dtype=T.Q4_K)
    tensors.append(("t.Q4_K", [768, 2], "Q4_K", k.tobytes()))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    expect = {
        "kv": [[k, vt.name, v] for k, vt, v in kvs]
        + [[k, "ARRAY", {"sub": sub.name, "items": v}] for k, sub, v in arrays],
        "tensors": [
            {"name": n, "dims": d, "type": t, "bytes": len(b), "fnv64": fnv64(b)}
            for n, d, t, b in tensors
        ],
    }
    with open(os.path.join(out, "oracle_gguf.json"), "w") as fh:
        json.dump(expect, fh, indent=1)


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
    write_gguf(rng, out)
    with open(os.path.join(out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print(f"wrote oracle fixtures for {len(meta)} formats to {out}")


if __name__ == "__main__":
    main()
