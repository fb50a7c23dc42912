#!/usr/bin/env python3
"""Writes fixtures/reference_writer.safetensors with the safetensors package's own writer (PyPI
`safetensors`, its Rust serializer; no numpy or torch needed), so that the reader is checked against
a file it did not write. Element i of each tensor follows the formula named beside it; the test
recomputes the formulas.

    python3 -m venv /tmp/st && /tmp/st/bin/pip install safetensors
    /tmp/st/bin/python tests/io/gen_safetensors_fixture.py
"""
import ctypes
import os
import struct

from safetensors import TensorSpec, serialize

def f32(n): return [0.5 * i - 3.0 for i in range(n)]        # F32: 0.5 i - 3
def f64(n): return [1.0 / (i + 1) for i in range(n)]        # F64: 1 / (i + 1)
def f16(n): return [0.25 * i - 1.0 for i in range(n)]       # F16: 0.25 i - 1 (exact in binary16)
def bf16(n): return [2.0 ** i for i in range(n)]            # BF16: 2^i (exact in bfloat16)
def i64(n): return [(-1) ** i * (i + 1) * 1000003 for i in range(n)]  # I64: (-1)^i (i + 1) 1000003
def i8(n): return [i - 2 for i in range(n)]                 # I8: i - 2
def boolean(n): return [i % 2 == 1 for i in range(n)]       # BOOL: i odd

def bf16_bytes(values):
    return b"".join(struct.pack("<I", struct.unpack("<I", struct.pack("<f", v))[0])[2:] for v in values)

tensors = {
    "conv.weight": ("float32", [2, 3, 1, 2], struct.pack("<12f", *f32(12))),
    "bn.running_var": ("float64", [3], struct.pack("<3d", *f64(3))),
    "half": ("float16", [2, 2], struct.pack("<4e", *f16(4))),
    "bf": ("bfloat16", [3], bf16_bytes(bf16(3))),
    "bn.num_batches_tracked": ("int64", [], struct.pack("<q", *i64(1))),
    "codes": ("int8", [4], struct.pack("<4b", *i8(4))),
    "mask": ("bool", [2], struct.pack("<2?", *boolean(2))),
    "empty": ("float32", [0, 3], b""),
}
keep = []
specs = {}
for name, (dtype, shape, data) in tensors.items():
    buf = ctypes.create_string_buffer(data, max(len(data), 1))
    keep.append(buf)
    specs[name] = TensorSpec(dtype=dtype, shape=shape, data_ptr=ctypes.addressof(buf), data_len=len(data))
out = bytes(serialize(specs, metadata={"format": "pt", "writer": "safetensors"}))
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "reference_writer.safetensors")
with open(path, "wb") as f:
    f.write(out)
print(path, len(out), "bytes")
