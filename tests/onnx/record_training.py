#!/usr/bin/python3
"""Records one training step of committed ONNX fixtures in PyTorch, for test_onnx_training.

For each model: the PyTorch module of fixture_models.py is built as tools/export_onnx.py built it
(seed 0, batch norm randomised), each of its tensors matched to the ONNX initializer that holds its
values (the same name, or one the exporter renamed and reshaped, such as a GroupNorm weight as
onnx::Mul_60 of shape [C, 1, 1]), then converted to float64 and put in
training mode (batch norm on batch statistics, updating its running statistics; dropout off, as the
exported graph has none), and run forward on a random input; the loss is sum(output * R) for a
random R. The .safetensors file holds, keyed by ONNX tensor names and in ONNX's shapes:
input, output_grad (R), output, grad:<initializer> for every initializer that is a trainable
parameter, after:<initializer> for the batch-norm running statistics after the step.

  cd tests/onnx && /usr/bin/python3 record_training.py

(python3-torch 1.13, python3-onnx 1.12: the same bytes again).
"""
import os
import sys

import numpy as np
import onnx
import torch
from onnx import numpy_helper

import fixture_models

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import export_onnx  # noqa: E402  (the exporter's model construction and safetensors writer)

# (ONNX file under data/, its fixture_models factory, batch: the ONNX input's first extent).
MODELS = [
    ("small_mobilenet_v2", "small_mobilenet_v2", 8),
    ("small_groupnorm_net", "SmallGroupNormNet", 1),
    ("small_layernorm2d_net", "SmallLayerNorm2dNet", 1),
]


def onnx_names_of(model, initializers):
    """state_dict key -> the ONNX initializer holding its values (same name, or same values)."""
    names = {}
    for key, tensor in model.state_dict().items():
        if not tensor.is_floating_point():
            continue
        if key in initializers:
            names[key] = key
            continue
        flat = tensor.detach().cpu().numpy().ravel()
        for name, array in initializers.items():
            if array.size == flat.size and np.array_equal(array.ravel(), flat.astype(array.dtype)):
                names[key] = name
                break
    return names


def record(name, factory, batch, seed=0):
    proto = onnx.load(f"data/{name}.onnx")
    initializers = {t.name: numpy_helper.to_array(t) for t in proto.graph.initializer}
    torch.manual_seed(seed)  # as export_onnx.py builds it
    model = export_onnx.build_model("fixture_models:" + factory, {})
    export_onnx.randomise_batch_norm(model, torch.Generator().manual_seed(seed + 1))
    names = onnx_names_of(model, initializers)
    model = model.double().train()
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    shape = [batch] + [d.dim_value for d in proto.graph.input[0].type.tensor_type.shape.dim[1:]]
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand(shape, generator=gen, dtype=torch.float64) * 2 - 1
    y = model(x)
    r = torch.rand(y.shape, generator=gen, dtype=torch.float64) * 2 - 1
    (y * r).sum().backward()
    out = {"input": x, "output_grad": r, "output": y.detach()}
    params = dict(model.named_parameters())
    buffers = dict(model.named_buffers())
    for key, onnx_name in names.items():
        shape = initializers[onnx_name].shape
        if key in params:
            if params[key].grad is None:
                raise SystemExit(f"{name}: {key} has no gradient")
            out["grad:" + onnx_name] = params[key].grad.reshape(shape)
        elif key.endswith(("running_mean", "running_var")):
            out["after:" + onnx_name] = buffers[key].detach().reshape(shape)
    missing = [k for k in params if k not in names]
    if missing:
        raise SystemExit(f"{name}: no ONNX initializer holds {missing}")
    out = {k: v.float() for k, v in sorted(out.items())}
    export_onnx.write_safetensors(f"data/{name}.training.safetensors", out)
    grads = sum(k.startswith("grad:") for k in out)
    print(f"record_training: {name}: batch {batch}, {grads} gradients -> data/{name}.training.safetensors")


if __name__ == "__main__":
    for entry in MODELS:
        record(*entry)
