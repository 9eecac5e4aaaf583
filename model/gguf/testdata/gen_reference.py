#!/usr/bin/env python3
"""Writes a GGUF reference file with gguf-py (the package llama.cpp maintains), for the Go tests.

Usage: gen_reference.py OUT.gguf [SEED]

The file holds:
  - one metadata key of every GGUF value type, arrays of every element type and an array of
    arrays (keys "test.*"), general.alignment = 64;
  - for each tensor type T in TYPES a tensor "q.T" of shape [2, 256] holding T blocks, and
    "want.T", an F32 tensor of the same shape: gguf.quants.dequantize of those blocks.
Blocks of types gguf-py can quantize come from gguf.quants.quantize of random normal data (F16
and BF16 data also hold infinities, NaN, signed zero and subnormals); the K-quants, which gguf-py
only dequantizes, get random bytes with finite random fp16 scales.

The committed testdata/reference.gguf is `gen_reference.py testdata/reference.gguf` (seed 1);
TestPythonInterop checks that the script still writes exactly that file.
"""
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q

TYPES = ["F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K"]
ROWS, COLS = 2, 256

# Offsets of the fp16 scales inside a K-quant block, which must be finite.
K_HALVES = {"Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208]}


def blocks(name, rng):
    qt = Q[name]
    if name in K_HALVES:
        bs, ts = gguf.GGML_QUANT_SIZES[qt]
        nb = ROWS * COLS // bs
        raw = rng.integers(0, 256, size=(nb, ts), dtype=np.uint8)
        for off in K_HALVES[name]:
            h = (rng.standard_normal(nb) * 0.01).astype(np.float16)
            raw[:, off:off + 2] = h.view(np.uint8).reshape(nb, 2)
        return raw.reshape(ROWS, -1)
    x = rng.standard_normal((ROWS, COLS)).astype(np.float32) * 2
    if name in ("F16", "BF16"):
        x[0, :8] = [np.inf, -np.inf, np.nan, -0.0, 1e-6, -3e-7, 65504, 1e-40]
    if name == "F32":
        return x
    return gguf.quants.quantize(x, qt)


def main():
    out = sys.argv[1]
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(out, arch="test")
    w.add_custom_alignment(64)
    w.add_uint8("test.u8", 200)
    w.add_int8("test.i8", -100)
    w.add_uint16("test.u16", 60000)
    w.add_int16("test.i16", -30000)
    w.add_uint32("test.u32", 4000000000)
    w.add_int32("test.i32", -2000000000)
    w.add_float32("test.f32", 0.1)
    w.add_bool("test.bool", True)
    w.add_string("test.str", "héllo, wörld ✓")
    w.add_uint64("test.u64", 18000000000000000000)
    w.add_int64("test.i64", -9000000000000000000)
    w.add_float64("test.f64", -2.5e-300)
    for t, vals in [
        (gguf.GGUFValueType.UINT8, [0, 1, 255]),
        (gguf.GGUFValueType.INT8, [-128, 0, 127]),
        (gguf.GGUFValueType.UINT16, [0, 65535]),
        (gguf.GGUFValueType.INT16, [-32768, 32767]),
        (gguf.GGUFValueType.UINT32, [0, 4294967295]),
        (gguf.GGUFValueType.INT32, [-2147483648, 2147483647]),
        (gguf.GGUFValueType.FLOAT32, [1.5, -0.25]),
        (gguf.GGUFValueType.BOOL, [True, False, True]),
        (gguf.GGUFValueType.STRING, ["a", "", "ĠParis"]),
        (gguf.GGUFValueType.UINT64, [0, 18446744073709551615]),
        (gguf.GGUFValueType.INT64, [-9223372036854775808, 9223372036854775807]),
        (gguf.GGUFValueType.FLOAT64, [1e300, -1e-300]),
    ]:
        w.add_key_value("test.arr." + t.name.lower(), vals, gguf.GGUFValueType.ARRAY, sub_type=t)
    w.add_key_value("test.arr.nested", [[1, 2], [3]], gguf.GGUFValueType.ARRAY)
    for name in TYPES:
        b = blocks(name, rng)
        qt = Q[name]
        want = gguf.quants.dequantize(b, qt).astype(np.float32)
        assert want.shape == (ROWS, COLS), (name, want.shape)
        if name == "F32":
            w.add_tensor("q." + name, b)
        else:
            w.add_tensor("q." + name, b.view(np.uint8), raw_dtype=qt)
        w.add_tensor("want." + name, want)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
