#!/usr/bin/env python3
"""Prints a GGUF file as gguf-py's GGUFReader sees it, as JSON, for the Go tests.

Usage: dump.py FILE.gguf

{"version", "alignment", "data_offset", "fields": {key: {"types": [type names], "value": ...}},
 "tensors": [{"name", "type", "shape" (ggml order), "offset" (absolute), "values" (dequantized,
 flattened)}]}. The GGUF.* pseudo-fields of the header are left out.
"""
import json
import sys

import numpy as np
import gguf


def value(field):
    return field.contents()


def main():
    r = gguf.GGUFReader(sys.argv[1])
    fields = {}
    for k, f in r.fields.items():
        if k.startswith("GGUF."):
            continue
        fields[k] = {"types": [t.name for t in f.types], "value": value(f)}
    tensors = []
    for t in r.tensors:
        v = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32).reshape(-1)
        tensors.append({"name": t.name, "type": t.tensor_type.name, "shape": [int(d) for d in t.shape],
                        "offset": int(t.data_offset), "values": [float(x) for x in v]})
    print(json.dumps({"version": int(r.fields["GGUF.version"].contents()), "alignment": int(r.alignment),
                      "data_offset": int(r.data_offset), "fields": fields, "tensors": tensors}))


if __name__ == "__main__":
    main()
