"""Fixtures for the ONNX forms of opsets 18 to 21, with the `onnx` package's reference evaluator as
the truth (Debian's libonnx-testdata stops at opset 17).

  pip install 'onnx>=1.16' safetensors numpy
  python3 record_opset_fixtures.py data/opset

Each case is a small model that a convolution feeds (so that the plans' formats differ) and one
input "input" -> one output "output", written as NAME.onnx with NAME.safetensors holding the input
and the reference evaluator's output. test_onnx_opsets.cpp runs every one in three plans on the
reference backend and oneDNN. The forms:
  - Gelu (opset 20), exact and tanh;
  - GroupNormalization with a scale and bias per group (18) and per channel (21);
  - LayerNormalization over C of a channels-last transpose, at 18 (17's op, as the exporters keep it);
  - ReduceMean / ReduceSum / ReduceMax / ReduceMin with axes as an input (18; ReduceMax and
    ReduceMin at 20 too);
  - Pad with an axes input (18), negative axes among them;
  - Split by num_outputs (18), uneven, the last part smaller;
  - Resize with an axes attribute (18), by scales and by sizes.
The bytes do not depend on the machine: the weights and inputs come from one seeded generator.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from safetensors.numpy import save_file

RNG = np.random.default_rng(20261207)


def const(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def conv_stem(c_in, c_out, h, w):
    """input [1, c_in, h, w] -> 3x3 same conv -> "x" [1, c_out, h, w]; its initializers."""
    weight = RNG.standard_normal((c_out, c_in, 3, 3)).astype(np.float32) * 0.3
    bias = RNG.standard_normal(c_out).astype(np.float32) * 0.1
    node = helper.make_node("Conv", ["input", "stem.w", "stem.b"], ["x"], pads=[1, 1, 1, 1], kernel_shape=[3, 3])
    return [node], [const("stem.w", weight), const("stem.b", bias)]


def model(name, opset, c_in, c_out, h, w, nodes, inits, out_shape, deprecated=False):
    stem, stem_inits = conv_stem(c_in, c_out, h, w)
    graph = helper.make_graph(
        stem + nodes, name,
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, c_in, h, w])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, out_shape)],
        stem_inits + inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="memfmt fixtures")
    m.ir_version = 8 if opset <= 18 else 9 if opset <= 20 else 10
    # The checker refuses ops that a later release deprecated (GroupNormalization-18, which files
    # written before onnx 1.16 still have); their inference is checked then by the evaluator alone.
    if not deprecated:
        onnx.checker.check_model(m, full_check=True)
    return m


def cases():
    r = RNG
    f32 = np.float32
    yield "gelu_exact_opset20", model("gelu", 20, 3, 8, 6, 6, [helper.make_node("Gelu", ["x"], ["output"])],
                                      [], [1, 8, 6, 6])
    yield "gelu_tanh_opset20", model("gelu_tanh", 20, 3, 8, 6, 6,
                                     [helper.make_node("Gelu", ["x"], ["output"], approximate="tanh")],
                                     [], [1, 8, 6, 6])
    yield "group_norm_opset18", model(
        "group_norm18", 18, 3, 8, 5, 6,
        [helper.make_node("GroupNormalization", ["x", "g.scale", "g.bias"], ["output"], num_groups=4, epsilon=1e-3)],
        [const("g.scale", r.uniform(0.5, 1.5, 4).astype(f32)), const("g.bias", r.standard_normal(4).astype(f32))],
        [1, 8, 5, 6], deprecated=True)
    yield "group_norm_opset21", model(
        "group_norm21", 21, 3, 8, 5, 6,
        [helper.make_node("GroupNormalization", ["x", "g.scale", "g.bias"], ["output"], num_groups=2)],
        [const("g.scale", r.uniform(0.5, 1.5, 8).astype(f32)), const("g.bias", r.standard_normal(8).astype(f32))],
        [1, 8, 5, 6])
    yield "layer_norm_channels_last_opset18", model(
        "layer_norm", 18, 3, 8, 4, 5,
        [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 3, 1]),
         helper.make_node("LayerNormalization", ["t", "ln.w", "ln.b"], ["n"], axis=-1, epsilon=1e-6),
         helper.make_node("Transpose", ["n"], ["output"], perm=[0, 3, 1, 2])],
        [const("ln.w", r.uniform(0.5, 1.5, 8).astype(f32)), const("ln.b", r.standard_normal(8).astype(f32))],
        [1, 8, 4, 5])
    # Channel attention (squeeze: ReduceMean over H, W; gate by ReduceMax over C) with axes inputs.
    yield "reduce_axes_input_opset18", model(
        "reduce18", 18, 3, 6, 5, 4,
        [helper.make_node("ReduceMean", ["x", "hw"], ["m"], keepdims=1),
         helper.make_node("ReduceSum", ["x", "c"], ["s"], keepdims=1),
         helper.make_node("ReduceMax", ["x", "c"], ["mx"], keepdims=1),
         helper.make_node("ReduceMin", ["x", "hw"], ["mn"], keepdims=1),
         helper.make_node("Add", ["x", "m"], ["a"]),
         helper.make_node("Mul", ["a", "s"], ["b"]),
         helper.make_node("Sub", ["b", "mx"], ["d"]),
         helper.make_node("Add", ["d", "mn"], ["output"])],
        [const("hw", np.array([2, 3], np.int64)), const("c", np.array([1], np.int64))],
        [1, 6, 5, 4])
    yield "reduce_max_min_opset20", model(
        "reduce20", 20, 3, 6, 5, 4,
        [helper.make_node("ReduceMax", ["x", "w"], ["mx"], keepdims=1),
         helper.make_node("ReduceMin", ["x", "h"], ["mn"], keepdims=1),
         helper.make_node("Add", ["x", "mx"], ["a"]),
         helper.make_node("Sub", ["a", "mn"], ["output"])],
        [const("w", np.array([-1], np.int64)), const("h", np.array([2], np.int64))],
        [1, 6, 5, 4])
    yield "pad_axes_input_opset18", model(
        "pad18", 18, 3, 4, 5, 6,
        [helper.make_node("Pad", ["x", "p1", "", "a1"], ["r"], mode="reflect"),
         helper.make_node("Pad", ["r", "p2", "v", "a2"], ["output"], mode="constant")],
        [const("p1", np.array([1, 2, 2, 0], np.int64)), const("a1", np.array([2, 3], np.int64)),
         const("p2", np.array([0, 3], np.int64)), const("a2", np.array([-1], np.int64)),
         const("v", np.array(0.5, f32))],
        [1, 4, 8, 11])
    yield "split_num_outputs_opset18", model(
        "split18", 18, 3, 7, 4, 4,
        [helper.make_node("Split", ["x"], ["s0", "s1", "s2"], axis=1, num_outputs=3),
         helper.make_node("Relu", ["s0"], ["r0"]),
         helper.make_node("Concat", ["s2", "r0", "s1"], ["output"], axis=1)],
        [], [1, 7, 4, 4])
    yield "resize_axes_opset18", model(
        "resize18", 18, 3, 4, 4, 5,
        [helper.make_node("Resize", ["x", "", "sc"], ["u"], mode="linear", axes=[2, 3]),
         helper.make_node("Resize", ["u", "", "", "sz"], ["output"], mode="nearest", axes=[3, 2],
                          coordinate_transformation_mode="asymmetric", nearest_mode="floor")],
        [const("sc", np.array([2.0, 2.0], f32)), const("sz", np.array([15, 12], np.int64))],
        [1, 4, 12, 15])


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "opset")
    os.makedirs(out, exist_ok=True)
    for name, m in cases():
        x = RNG.standard_normal(tuple(d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim)).astype(np.float32)
        (y,) = ReferenceEvaluator(m).run(None, {"input": x})
        want = tuple(d.dim_value for d in m.graph.output[0].type.tensor_type.shape.dim)
        assert y.shape == want, (name, y.shape, want)
        onnx.save(m, os.path.join(out, name + ".onnx"))
        fixture = os.path.join(out, name + ".safetensors")
        save_file({"input": x, "output": np.ascontiguousarray(y, np.float32)}, fixture)
        os.chmod(fixture, 0o644)
        print(f"{name}: opset {m.opset_import[0].version}, output {list(y.shape)} (onnx {onnx.__version__})")


if __name__ == "__main__":
    main()
