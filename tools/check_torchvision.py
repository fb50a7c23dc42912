#!/usr/bin/python3
"""Run torchvision's models through ONNX and `memfmt run`, and compare with PyTorch's outputs.

  check_torchvision.py [--memfmt build/tools/memfmt] [--backend onednn] [--models resnet18,vit_b_16]
                       [--exporters torchscript:17,dynamo:18,dynamo:20]

Each model is exported by export_onnx.py (random weights, fixed seed, batch-norm statistics
randomised) with PyTorch's output recorded beside it, then run by `memfmt run` in three plans (all
channels-first, all channels-last, optimal). A model passes when every plan's output is within
--rtol of the largest magnitude of PyTorch's. Token models (ViT, Swin) and detectors (their box
decoding and non-maximum suppression), which memfmt plans around but does not run, pass when
`memfmt plan` plans them and `memfmt run` refuses them with a message.
Each model is exported once per --exporters entry, EXPORTER:OPSET: PyTorch's TorchScript exporter
(every PyTorch), and torch.export's "dynamo" exporter, the default of PyTorch 2.9 and later (needs
PyTorch 2.5 or later and onnxscript). The default is torchscript:13 under PyTorch 1.x, and under
PyTorch 2 torchscript:17 plus dynamo at opsets 18 and 20 (Gelu is an op from 20), as people export
today. Run it with the Python that has the PyTorch to check, for example the venv that
scripts/bench.sh makes (build-bench/peers-venv/bin/python).
Prints one line per model, exporter and plan; exits 1 when any fails. A model the exporter cannot
write (torch.export and torchvision's detectors) is a SKIP line with the exporter's error. Needs torch, torchvision and
numpy; the exports take a few minutes per exporter.
"""
import argparse
import json
import os
import re
import struct
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SEGMENTATION = '{"weights_backbone": null, "num_classes": 5}'
DETECTION = SEGMENTATION

# name, input shape, constructor kwargs, whether memfmt runs it. Input sizes are the smallest each
# model's fixed pooling allows (AlexNet's and VGG's adaptive pooling to 6x6 / 7x7 exports only from
# inputs that divide evenly; Inception V3 needs 75x75 or more).
MODELS = [
    ("alexnet", "1,3,224,224", "{}", True),
    ("convnext_tiny", "1,3,64,64", "{}", True),
    ("densenet121", "1,3,64,64", "{}", True),
    ("efficientnet_b0", "1,3,64,64", "{}", True),
    ("efficientnet_v2_s", "1,3,64,64", "{}", True),
    ("googlenet", "1,3,64,64", "{}", True),
    ("inception_v3", "1,3,299,299", '{"aux_logits": false, "init_weights": true}', True),
    ("mnasnet0_5", "1,3,64,64", "{}", True),
    ("mobilenet_v2", "1,3,64,64", "{}", True),
    ("mobilenet_v3_large", "1,3,64,64", "{}", True),
    ("mobilenet_v3_small", "1,3,64,64", "{}", True),
    ("regnet_x_400mf", "1,3,64,64", "{}", True),
    ("regnet_y_400mf", "1,3,64,64", "{}", True),
    ("resnet18", "1,3,64,64", "{}", True),
    ("resnet50", "1,3,64,64", "{}", True),
    ("resnext50_32x4d", "1,3,64,64", "{}", True),
    ("shufflenet_v2_x1_0", "1,3,64,64", "{}", True),
    ("squeezenet1_0", "1,3,64,64", "{}", True),
    ("squeezenet1_1", "1,3,64,64", "{}", True),
    ("vgg11_bn", "1,3,224,224", "{}", True),
    ("wide_resnet50_2", "1,3,64,64", "{}", True),
    ("video.r3d_18", "1,3,8,32,32", "{}", True),
    ("video.mc3_18", "1,3,8,32,32", "{}", True),
    ("video.r2plus1d_18", "1,3,8,32,32", "{}", True),
    ("segmentation.fcn_resnet50", "1,3,64,64", SEGMENTATION, True),
    ("segmentation.deeplabv3_mobilenet_v3_large", "1,3,64,64", SEGMENTATION, True),
    ("segmentation.lraspp_mobilenet_v3_large", "1,3,64,64", SEGMENTATION, True),
    ("detection.ssdlite320_mobilenet_v3_large", "1,3,320,320", DETECTION, False),
    ("detection.fasterrcnn_mobilenet_v3_large_320_fpn", "1,3,320,320", DETECTION, False),
    ("vit_b_16", "1,3,224,224", "{}", False),
    ("swin_t", "1,3,224,224", "{}", False),
]
PLANS = ["all_channels_first", "all_channels_last", "optimal"]
DTYPES = {"F32": np.float32, "F64": np.float64, "F16": np.float16, "I64": np.int64}


def load_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        tensors[name] = np.frombuffer(body[begin:end], DTYPES[entry["dtype"]]).reshape(entry["shape"])
    return tensors


def torch_version():
    import torch

    return torch.__version__


def default_exporters():
    """TorchScript at opset 13 under PyTorch 1.x; under PyTorch 2 also what people export with today."""
    import torch

    major, minor = (int(v) for v in torch.__version__.split(".")[:2])
    if major < 2:
        return ["torchscript:13"]
    exporters = ["torchscript:17"]
    try:
        import onnxscript  # noqa: F401  (the dynamo exporter's dependency)

        if (major, minor) >= (2, 5):
            exporters += ["dynamo:18", "dynamo:20"]
    except ImportError:
        print("check_torchvision: no onnxscript, so no dynamo exporter runs", file=sys.stderr)
    return exporters


def run(cmd):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def check(name, shape, kwargs, runnable, exporter, args, work):
    kind, opset = exporter.split(":")
    base = os.path.join(work, name.replace(".", "_") + "." + kind + opset)
    fixture = ["--output-fixture", base + ".safetensors"] if runnable else []
    export = run([sys.executable, os.path.join(HERE, "export_onnx.py"), name, base + ".onnx", "--input-shape", shape,
                  "--kwargs", kwargs, "--exporter", kind, "--opset", opset] + fixture)
    name = f"{name} ({exporter})"
    if export.returncode != 0:
        # PyTorch's exporter could not write the model (torch.export cannot trace the detectors'
        # data-dependent control flow): no ONNX file for memfmt to check, which is not its failure.
        lines = re.sub(r"\x1b\[[0-9;]*m", "", export.stdout).strip().splitlines()  # without colours
        # The exception's own line ("torch.export...Error: ..."), the last one raised.
        raised = [l for l in lines if re.match(r"^[\w.]*(Error|Exception): ", l.strip())]
        why = raised[-1] if raised else lines[-1] if lines else "no output"
        return [(name, "export", None, why.strip()[:300])]
    if not runnable:
        plan = run([args.memfmt, "plan", base + ".onnx"])
        refused = run([args.memfmt, "run", base + ".onnx", "--repeat", "1"])
        ok = plan.returncode == 0 and refused.returncode == 1 and "cannot run" in refused.stdout
        if not ok:
            return [(name, "plan", False, (plan.stdout + refused.stdout)[-300:])]
        layers = plan.stdout.splitlines()[1].split(":", 1)[1].strip()  # "N layers, M conversions + ..."
        return [(name, "plan", True, layers)]
    recorded = load_safetensors(base + ".safetensors")
    expected = recorded["output"].astype(np.float64)
    scale = float(np.abs(expected).max())
    rows = []
    for p in PLANS:
        out = base + "." + p + ".safetensors"
        r = run([args.memfmt, "run", base + ".onnx", "--input", base + ".safetensors", "--output", out,
                 "--backend", args.backend, "--policy", p, "--repeat", "1"])
        if r.returncode != 0:
            # The first refused node is the cause; the rest follow from it.
            rows.append((name, p, False, " | ".join(r.stdout.strip().splitlines()[:2])[:400]))
            continue
        got = load_safetensors(out)["output"]
        if got.shape != expected.shape:
            rows.append((name, p, False, f"shape {got.shape}, PyTorch's {expected.shape}"))
            continue
        err = float(np.abs(got - expected).max()) / scale
        rows.append((name, p, err <= args.rtol, f"max error {err:.2e} of the largest magnitude {scale:.3g}"))
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--memfmt", default=os.path.join(HERE, "..", "build", "tools", "memfmt"))
    p.add_argument("--backend", default="onednn", choices=["reference", "onednn", "cudnn"])
    p.add_argument("--models", help="comma-separated subset of the model names")
    p.add_argument("--rtol", type=float, default=1e-4)
    p.add_argument("--exporters", help="comma-separated EXPORTER:OPSET entries (torchscript or dynamo)")
    args = p.parse_args()
    exporters = args.exporters.split(",") if args.exporters else default_exporters()
    for e in exporters:
        kind, _, opset = e.partition(":")
        if kind not in ("torchscript", "dynamo") or not opset.isdigit():
            p.error(f"exporter '{e}': EXPORTER:OPSET with EXPORTER torchscript or dynamo")
    chosen = MODELS
    if args.models:
        wanted = args.models.split(",")
        unknown = set(wanted) - {m[0] for m in MODELS}
        if unknown:
            p.error("unknown models: " + ", ".join(sorted(unknown)))
        chosen = [m for m in MODELS if m[0] in wanted]
    failed = not_exported = 0
    with tempfile.TemporaryDirectory(prefix="memfmt_torchvision_") as work:
        for exporter in exporters:
            for name, shape, kwargs, runnable in chosen:
                for model, what, ok, detail in check(name, shape, kwargs, runnable, exporter, args, work):
                    not_exported += ok is None
                    failed += ok is False
                    tag = "ok  " if ok else "FAIL" if ok is False else "SKIP"
                    print(f"{tag} {model:60s} {what:20s} {detail}", flush=True)
    print(f"{len(chosen)} models, exporters {', '.join(exporters)} (PyTorch {torch_version()}), {failed} failures, "
          f"{not_exported} exports PyTorch could not write (SKIP)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
