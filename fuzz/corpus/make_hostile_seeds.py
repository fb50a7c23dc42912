#!/usr/bin/env python3
"""Writes the fuzz seeds of hostile inputs that once crashed or fooled memfmt's readers.

Needs Debian's python3-onnx (any onnx package) for the ONNX seeds; run from the repository root:
    python3 fuzz/corpus/make_hostile_seeds.py
Seeds (each its own file, committed):
  fuzz_onnx_import/gemm6_b_rank1.onnx, gemm6_b_rank0.onnx  Gemm at opset 6 with B of rank 1 / 0
                                                           (libonnx 1.12's inference crashed on them)
  fuzz_onnx_import/same_padding.onnx  TensorFlow-style "same" padding computed at run time
                                      (Shape -> Gather -> arithmetic -> Clip -> Concat -> Pad)
  fuzz_onnx_import/non_utf8_names.onnx, duplicate_writer.onnx, duplicate_input.onnx
  fuzz_safetensors/deep_metadata, deep_shape      1,000 nested arrays in the header
  fuzz_json_files/deep_network, nul_timing_cache  the same nesting in a network; a NUL byte
"""
import os
import struct

ROOT = os.path.dirname(os.path.abspath(__file__))


def write(target, name, data):
    with open(os.path.join(ROOT, target, name), "wb") as f:
        f.write(data)


def onnx_seeds():
    import onnx
    from onnx import TensorProto, helper

    def model(nodes, inputs, outputs, inits=(), opset=13):
        g = helper.make_graph(nodes, "seed", inputs, outputs, initializer=list(inits))
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 8
        return m.SerializeToString()

    x2 = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    for rank, dims in (("1", [4]), ("0", [])):
        b = helper.make_tensor("B", TensorProto.FLOAT, dims, [1.0] * (4 if dims else 1))
        c = helper.make_tensor("C", TensorProto.FLOAT, [4], [0.5] * 4)
        write("fuzz_onnx_import", "gemm6_b_rank" + rank + ".onnx",
              model([helper.make_node("Gemm", ["x", "B", "C"], ["y"], name="gemm")], [x2], [y], [b, c], opset=6))

    # pad = max((ceil(i / s) - 1) * s + (k - 1) * d + 1 - i, 0) per spatial dim, split before/after.
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 10, 9])
    ints = lambda name, v: helper.make_tensor(name, TensorProto.INT64, [len(v)], v)
    inits = [ints("hw", [2, 3]), ints("s", [2, 2]), ints("s_minus", [1, 1]), ints("kd", [3, 3]),
             ints("zero", [0]), ints("two", [2, 2]), ints("zeros2", [0, 0]),
             helper.make_tensor("w", TensorProto.FLOAT, [4, 3, 3, 3], [0.01] * 108)]
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "hw"], ["i"], axis=0),
        helper.make_node("Add", ["i", "s_minus"], ["i_up"]),
        helper.make_node("Div", ["i_up", "s"], ["blocks"]),  # ceil(i / s) in integers
        helper.make_node("Sub", ["blocks", "s_minus"], ["b1"]),
        helper.make_node("Mul", ["b1", "s"], ["span"]),
        helper.make_node("Add", ["span", "kd"], ["need"]),
        helper.make_node("Sub", ["need", "i"], ["raw"]),
        helper.make_node("Max", ["raw", "zeros2"], ["total_max"]),
        helper.make_node("Clip", ["raw", "zero"], ["total"]),
        helper.make_node("Div", ["total", "two"], ["before"]),
        helper.make_node("Sub", ["total", "before"], ["after"]),
        helper.make_node("Concat", ["zeros2", "before", "zeros2", "after"], ["pads"], axis=0),
        helper.make_node("Pad", ["x", "pads"], ["padded"], name="same_pad"),
        helper.make_node("Conv", ["padded", "w"], ["y"], strides=[2, 2], name="conv"),
    ]
    write("fuzz_onnx_import", "same_padding.onnx", model(nodes, [x], [y], inits))

    x4 = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])
    m = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y\u00e9"], name="relu")], "seed", [x4],
                                            [helper.make_tensor_value_info("y\u00e9", TensorProto.FLOAT, None)]),
                          opset_imports=[helper.make_opsetid("", 13)])
    data = m.SerializeToString().replace("y\u00e9".encode(), b"y\xff")  # same length: a name that is not UTF-8
    write("fuzz_onnx_import", "non_utf8_names.onnx", data)
    write("fuzz_onnx_import", "duplicate_writer.onnx",
          model([helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Sigmoid", ["x"], ["y"])], [x4], [y]))
    write("fuzz_onnx_import", "duplicate_input.onnx",
          model([helper.make_node("Relu", ["x"], ["y"])], [x4, x4], [y]))


def json_seeds():
    # Past the readers' 64 levels; the tests build the 100,000 levels that crashed.
    deep = b"[" * 1000 + b"]" * 1000
    for name, header in (("deep_metadata", b'{"__metadata__": ' + deep + b"}"),
                         ("deep_shape", b'{"w": {"dtype": "F32", "shape": ' + deep + b', "data_offsets": [0, 0]}}')):
        write("fuzz_safetensors", name, struct.pack("<Q", len(header)) + header)
    write("fuzz_json_files", "deep_network",
          b'\x00{"format": "memfmt.network", "version": 1, "nodes": [{"extents": ' + deep + b"}]}")
    write("fuzz_json_files", "nul_timing_cache",
          b'\x03{"format": "memfmt.timing_cache", "version": 1, "layers": {}}\x00junk')


if __name__ == "__main__":
    json_seeds()
    onnx_seeds()
