"""Writes hardmax.onnx: Conv -> Hardmax -> Conv on a [1, 3, 8, 8] input. Hardmax has no memfmt layer,
so `memfmt plan` plans around it as an opaque barrier and `memfmt run` refuses the model, naming the
op and node. Run with a Python that has the onnx package."""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(0)
w1 = numpy_helper.from_array(rng.uniform(-1, 1, (4, 3, 1, 1)).astype(np.float32), "w1")
w2 = numpy_helper.from_array(rng.uniform(-1, 1, (2, 4, 3, 3)).astype(np.float32), "w2")
graph = helper.make_graph(
    [helper.make_node("Conv", ["input", "w1"], ["a"], name="conv1"),
     helper.make_node("Hardmax", ["a"], ["b"], name="hardmax"),
     helper.make_node("Conv", ["b", "w2"], ["output"], name="conv2", pads=[1, 1, 1, 1])],
    "hardmax",
    [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 8, 8])],
    [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 2, 8, 8])],
    [w1, w2])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
onnx.checker.check_model(model)
onnx.save(model, "hardmax.onnx")
