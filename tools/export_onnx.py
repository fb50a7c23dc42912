#!/usr/bin/python3
"""Export a PyTorch model to ONNX with its weights, for memfmt's ONNX import.

  export_onnx.py resnet50 resnet50.onnx --input-shape 1,3,224,224
  export_onnx.py mypkg.nets:small_unet unet.onnx --kwargs '{"width": 8}' --output-fixture unet.safetensors

MODEL is a torchvision model name (random weights: torch.manual_seed(--seed) before it is built),
one under a torchvision subpackage (segmentation.deeplabv3_resnet50; give it
--kwargs '{"weights_backbone": null}' so that nothing is downloaded), or MODULE:ATTR, a class or
factory called with --kwargs. A model that returns a dict (torchvision's segmentation models:
{"out": ..., "aux": ...}) is exported with its "out" entry as the graph output; a detector
(detection.ssdlite320_mobilenet_v3_large ...) on the first image of the input batch, with its boxes,
scores and labels as the graph outputs. By default batch-norm parameters and
running statistics are randomised too (otherwise a fresh BN is the identity and a check of the
imported model would not see it); --plain-init keeps PyTorch's initialisation.

--keep-batchnorm exports BatchNormalization nodes (torch.onnx's TrainingMode.PRESERVE on a model in
eval mode); the default (EVAL) lets the exporter fold them into the convolutions, as most deployed
ONNX files have it. --output-fixture writes the input and PyTorch's output as a safetensors file
(tensors named as the ONNX graph's input and output) for checks that do not need torch.
"""
import argparse
import importlib
import inspect
import json
import struct
import sys

import torch


def build_model(spec, kwargs):
    if ":" in spec:
        module_name, attr = spec.split(":", 1)
        sys.path.insert(0, ".")
        factory = getattr(importlib.import_module(module_name), attr)
    else:
        import torchvision

        *package, name = spec.split(".")
        factory = None
        try:
            scope = importlib.import_module(".".join(["torchvision.models"] + package))
            factory = getattr(scope, name, None)
        except ImportError:
            pass
        if factory is None:
            raise SystemExit(f"export_onnx: torchvision has no model '{spec}'")
    return factory(**kwargs)


class FirstImageDetections(torch.nn.Module):
    """A torchvision detector (which takes a list of [C, H, W] images) on the batch's first image:
    its boxes, scores and labels as three outputs."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        found = self.model([x[0]])[0]
        return found["boxes"], found["scores"], found["labels"]


class OutEntry(torch.nn.Module):
    """The "out" entry of a model that returns a dict, as one tensor."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x)["out"]


def randomise_batch_norm(model, generator):
    for m in model.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.track_running_stats:
            with torch.no_grad():
                n = m.num_features
                m.running_mean.copy_(torch.randn(n, generator=generator) * 0.1)
                m.running_var.copy_(torch.rand(n, generator=generator) + 0.5)
                if m.affine:
                    m.weight.copy_(torch.rand(n, generator=generator) + 0.5)
                    m.bias.copy_(torch.randn(n, generator=generator) * 0.1)


SAFETENSORS_DTYPES = {torch.float32: "F32", torch.float64: "F64", torch.float16: "F16",
                      torch.bfloat16: "BF16", torch.int64: "I64", torch.int32: "I32"}


def write_safetensors(path, tensors):
    """The safetensors layout: 8-byte little-endian header size, JSON header, raw tensors."""
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        t = t.detach().contiguous().cpu()
        data = t.view(torch.uint8).numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": SAFETENSORS_DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="torchvision model name or MODULE:ATTR")
    p.add_argument("output", help="the .onnx file to write")
    p.add_argument("--input-shape", default="1,3,224,224", help="comma-separated input extents (default 1,3,224,224)")
    p.add_argument("--kwargs", default="{}", help="JSON keyword arguments for the model's constructor")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--opset", type=int, help="the opset to write (default 13; 18 with --exporter dynamo)")
    p.add_argument("--exporter", choices=["torchscript", "dynamo"], default="torchscript",
                   help="PyTorch's TorchScript exporter (default) or torch.export's (dynamo=True, PyTorch 2.5+, "
                        "needs onnxscript), which PyTorch 2.9 and later use unless told otherwise")
    p.add_argument("--keep-batchnorm", action="store_true", help="keep BatchNormalization nodes (not folded)")
    p.add_argument("--dynamic-batch", action="store_true", help="make the batch dim symbolic")
    p.add_argument("--plain-init", action="store_true", help="keep PyTorch's batch-norm initialisation")
    p.add_argument("--input-name", default="input")
    p.add_argument("--output-name", default="output")
    p.add_argument("--output-fixture", help="write input and PyTorch's output to this safetensors file")
    a = p.parse_args()

    torch.manual_seed(a.seed)
    model = build_model(a.model, json.loads(a.kwargs))
    if not a.plain_init:
        randomise_batch_norm(model, torch.Generator().manual_seed(a.seed + 1))
    model.eval()
    shape = [int(s) for s in a.input_shape.split(",")]
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(a.seed + 2))
    if a.model.startswith("detection."):
        if a.output_fixture:
            raise SystemExit("export_onnx: --output-fixture takes one output; a detector has boxes, scores, labels")
        model = FirstImageDetections(model).eval()
    with torch.no_grad():
        returned = model(x)
    if isinstance(returned, dict):
        if "out" not in returned:
            raise SystemExit(f"export_onnx: {a.model} returns a dict without an 'out' entry ({list(returned)})")
        model = OutEntry(model).eval()

    if a.opset is None:
        a.opset = 18 if a.exporter == "dynamo" else 13
    training = torch.onnx.TrainingMode.PRESERVE if a.keep_batchnorm else torch.onnx.TrainingMode.EVAL
    dynamic = {a.input_name: {0: "batch"}, a.output_name: {0: "batch"}} if a.dynamic_batch else None
    kwargs = dict(export_params=True, opset_version=a.opset, do_constant_folding=True, input_names=[a.input_name],
                  output_names=[a.output_name], dynamic_axes=dynamic, training=training)
    has_dynamo = "dynamo" in inspect.signature(torch.onnx.export).parameters
    if a.exporter == "dynamo":
        if not has_dynamo:
            raise SystemExit(f"export_onnx: PyTorch {torch.__version__} has no dynamo exporter (2.5 or later has)")
        # torch.export's graphs keep BatchNormalization in eval mode and take no training mode; the
        # weights stay inside the file, as the TorchScript exporter writes them.
        del kwargs["training"]
        kwargs.update(dynamo=True, external_data=False)
        if a.keep_batchnorm:
            print("export_onnx: the dynamo exporter keeps BatchNormalization anyway", file=sys.stderr)
    elif has_dynamo:
        # PyTorch 2.9 and later export with torch.export unless told otherwise.
        kwargs["dynamo"] = False
    torch.onnx.export(model, (x,), a.output, **kwargs)
    params = sum(t.numel() for t in model.state_dict().values())
    print(f"export_onnx: {a.model} -> {a.output} ({a.exporter}, opset {a.opset}, input {shape}, {params} state_dict elements)")
    if a.output_fixture:
        with torch.no_grad():
            y = model(x)
        write_safetensors(a.output_fixture, {a.input_name: x, a.output_name: y})
        print(f"export_onnx: input and output {list(y.shape)} -> {a.output_fixture}")


if __name__ == "__main__":
    main()
