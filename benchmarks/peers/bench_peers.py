#!/usr/bin/python3
"""memfmt against today's inference engines on the CPU (and PyTorch on a CUDA GPU), each in its own
process, rounds taken in turns.

  bench_peers.py --models resnet50,mobilenet_v2 --batches 1,8 --threads 2 --out peers.json
  bench_peers.py --memfmt build-bench/tools/memfmt --runners memfmt,pytorch_nchw,onnxruntime,openvino \\
      --models resnet50 --batches 1,8 --dtypes float32,bfloat16 --rounds 3 --out peers.json
  bench_peers.py --match out/bench/bench_network_b8.json --runners pytorch_nchw,pytorch_channels_last
  bench_peers.py --device cuda --match gpu/bench_network_cudnn_b32.json --dtypes float32,float16,bfloat16

Run it with a Python that has the peers (scripts/bench.sh makes a venv with PyTorch 2.x, torchvision,
onnx, onnxruntime, openvino and matplotlib from PyPI); a runner whose package is missing gets rows
that say so. Models: torchvision's resnet50, mobilenet_v2, efficientnet_b0, convnext_tiny,
regnet_y_800mf, resnext50_32x4d (TABLE_MODELS: the engines table), vgg16_bn, shufflenet_v2_x1_0,
video.r3d_18, the UNet defined below (the models header's unet: same channels, max pooling,
ConvTranspose2d 2x2/2 upsampling, [skip, upsampled] concatenation) and torchvision's segmentation
models deeplabv3_mobilenet_v3_large, lraspp_mobilenet_v3_large, deeplabv3_resnet50 and fcn_resnet50
(21 classes, no auxiliary head, the "out" entry of their dict as the output). Random weights
(torch.manual_seed(--seed)); timing does not depend on their values.

Runners (each in a process of its own: a worker started per runner and model, or memfmt's command
line per round; see "Processes" below):
  pytorch_nchw           PyTorch eager, model and input contiguous (NCHW / NCDHW)
  pytorch_channels_last  PyTorch eager, model and input in torch.channels_last (channels_last_3d for r3d_18)
  pytorch_compile        torch.compile(model, dynamic=False) of the channels_last model (Inductor; compiled
                         once per batch and dtype in the warm-up, compile_s in the row; Inductor's cache in
                         --inductor-cache); inference only
  onnxruntime            onnxruntime.InferenceSession, CPUExecutionProvider, ORT_ENABLE_ALL, on the ONNX file
                         of tools/export_onnx.py (batch-norm folded, batch dimension symbolic)
  openvino               openvino.Core().compile_model on the same file reshaped to the batch, "CPU",
                         PERFORMANCE_HINT LATENCY, INFERENCE_PRECISION_HINT f32 or bf16
  memfmt                 `memfmt run FILE --random --batch B --backend onednn --threads T --repeat R
                         --cache CACHE --calibrate --dtype D --json` (--memfmt names the binary): the same
                         ONNX file imported and run in the plan runtime::channels_last returns, layer
                         timings kept in --memfmt-cache between rounds and runs
  memfmt_passive         the same with OMP_WAIT_POLICY=PASSIVE: memfmt's default OpenMP waiting against
                         passive waiting, in the same turns (scripts/bench.sh --omp-passive)
  pytorch_cuda_nchw, pytorch_cuda_channels_last
                         PyTorch on the first CUDA device (--device cuda makes them the default runners),
                         torch.backends.cudnn.benchmark on, parameters in the case's dtype (model.half() /
                         model.bfloat16(), as bench_network_cudnn's f16/bf16 rows). Each pass copies its
                         input in from host memory, and an inference pass its output back; the time ends
                         after torch.cuda.synchronize().
Passes:
  inference  model.eval() under torch.inference_mode()
  training   model.train(); forward, mean of the output as the loss, backward, and (--optimizer sgd,
             the default) an SGD step without momentum. ONNX Runtime's and OpenVINO's packages,
             torch.compile here and memfmt's command line run inference only: their training rows are
             skipped with that reason.
bfloat16 on the CPU: PyTorch under torch.autocast("cpu", torch.bfloat16) (weights float32, as AMP),
OpenVINO with INFERENCE_PRECISION_HINT bf16, memfmt with --dtype bfloat16. ONNX Runtime's CPU
execution provider has no bfloat16 convolution kernels: its bf16 rows say so and do not run. A runner
whose engine has no bf16 kernels on this CPU (PyTorch: torch.ops.mkldnn._is_mkldnn_bf16_supported()
false; OpenVINO: no BF16 among the CPU's OPTIMIZATION_CAPABILITIES, where its hint would run f32;
memfmt: oneDNN without avx512_core) gets a row "unsupported on this CPU (...)" instead of a number.

Threads: every runner uses --threads (torch.set_num_threads and OMP_NUM_THREADS, intra_op_num_threads
with inter_op 1, INFERENCE_NUM_THREADS, memfmt run --threads). Waiting and placement: each engine
keeps its own defaults, so every runner's process (memfmt's too) starts without OMP_WAIT_POLICY,
OMP_PROC_BIND, OMP_PLACES, GOMP_SPINCOUNT, GOMP_CPU_AFFINITY or KMP_* from this environment;
memfmt_passive adds OMP_WAIT_POLICY=PASSIVE.

Processes: an engine's threads that spin after a pass slow whatever runs next on the same cores
(PyTorch and ONNX Runtime in one process: ONNX Runtime's MobileNetV2 at batch 1 ran at 220 images/s,
alone at 502), so no two engines share a process. The peers' workers are this script with --worker
(one per runner and model, kept for the model's cases, asked for one round at a time over a pipe, its
log in --log-dir); memfmt's command line is started anew for every round. --gap seconds pass between
two turns, for the last one's spinning threads to go to sleep.

Timing: for each case (model, dtype, pass, batch) --rounds rounds; in each round every runner in turn
(the order rotates from round to round) runs --warmup untimed passes, then timed passes until --reps
are done, or --case-seconds have passed and at least --min-reps are done; a round's time is the
median of its passes, a row's the median of its rounds (round_ms_per_batch lists them). memfmt's
round is its command line's median of --reps passes after its own warm-up. ms per batch, images/s =
batch / ms. --time-limit bounds the whole run: cases left when it is spent are recorded as skipped.

--match reads memfmt's Google Benchmark JSON (names BM_network/<model>/<dtype>/<pass>/<policy>, and
BM_network_cudnn/... for the CUDA runners) and runs the same (model, dtype, pass, batch) cases that
--models, --dtypes and --passes admit: the batch comes from a "batch" counter, a "batch:N" name
component or "batch N" in the label, else --batches; the resolution from a "resolution" counter or
"RxR" ("FxRxR" with frames) in the label, else --resolution (and --frames). Pass names fwd/inference
and train/training are the same; dtypes f32/float32, bf16/bfloat16, f16/float16 likewise.

--export-only writes the ONNX files of the float32 inference cases (into --onnx-dir, kept where they
exist; opset --opset) and runs nothing: bench_network imports them for its BM_network/onnx:<model> rows.

Output (--out, Google Benchmark-like so benchmarks/summarize.py reads it with the other files):
  {"context": {"date", "host_name", "num_cpus", "threads", "cpu_flags" (bf16-relevant ones),
               "versions": {runner: version}, "torch", "torchvision", "onnxruntime", "openvino", "memfmt",
               "rounds", "notes": [...]},
   "benchmarks": [{"name": "BM_peer/<model>/<dtype>/<pass>/<runner>/batch:<N>", "run_type": "iteration",
                   "model", "runner", "pass", "dtype", "batch", "resolution", "frames", "threads",
                   "version" (the engine's, e.g. "torch 2.15.0"), "wait_policy" ("default" or "PASSIVE"),
                   "ms_per_batch", "images_per_s", "reps" (timed passes, all rounds), "rounds",
                   "round_ms_per_batch", "real_time" (= ms_per_batch), "time_unit": "ms", "compile_s"
                   (pytorch_compile), "plan" (memfmt: the plan its --calibrate kept),
                   and for a case that did not run: "error_occurred": true, "error_message": why}]}
"""
import argparse
import contextlib
import copy
import datetime
import json
import math
import os
import re
import socket
import statistics
import subprocess
import sys
import time

# torchvision's segmentation models: not in the models header, so memfmt runs them only through
# ONNX import (memfmt run, or bench_network's BM_network/onnx rows on the files written here).
SEGMENTATION = ["deeplabv3_mobilenet_v3_large", "lraspp_mobilenet_v3_large", "deeplabv3_resnet50", "fcn_resnet50"]
# The engines table (scripts/bench.sh): memfmt and every runner on these, batch 1 and 8, 224x224.
TABLE_MODELS = ["resnet50", "mobilenet_v2", "efficientnet_b0", "convnext_tiny", "regnet_y_800mf", "resnext50_32x4d"]
MODELS = ["resnet50", "mobilenet_v2", "unet", "resnext50_32x4d", "vgg16_bn", "r3d_18", "shufflenet_v2_x1_0",
          "convnext_tiny", "efficientnet_b0", "regnet_y_800mf"] + SEGMENTATION
RUNNERS = ["pytorch_nchw", "pytorch_channels_last", "pytorch_compile", "onnxruntime", "openvino"]
MEMFMT_RUNNERS = ["memfmt", "memfmt_passive"]
ONNX_RUNNERS = ["onnxruntime", "openvino"] + MEMFMT_RUNNERS
CUDA_RUNNERS = ["pytorch_cuda_nchw", "pytorch_cuda_channels_last"]
PASSES = ["inference", "training"]
HERE = os.path.dirname(os.path.abspath(__file__))
EXPORTER = os.path.join(HERE, "..", "..", "tools", "export_onnx.py")

# The CPUs this process may use, read before torch loads libgomp: with OMP_PROC_BIND set, libgomp
# pins the main thread to one CPU as it loads, and every thread an engine later starts inherits that
# single CPU (ONNX Runtime on one core, once). The workers start without OMP_PROC_BIND; they still
# start engines' threads on these CPUs (startup_cpus) wherever a caller's environment pins.
STARTUP_CPUS = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None

sys.path.insert(0, os.path.join(HERE, ".."))
import summarize  # noqa: E402  (the BM_network name and label parsing, shared with the tables)

# PyTorch is imported by the processes that use it: the PyTorch workers, and the parent only to export
# ONNX files (in a child process) or with --export-only. The other workers and the parent's timing
# loop never load it, so no idle PyTorch thread pool shares their cores.
WORKER_RUNNER = (sys.argv[sys.argv.index("--worker") + 1] if __name__ == "__main__" and "--worker" in sys.argv[1:-1]
                 else None)
torch = None
nn = None
if __name__ != "__main__" or (WORKER_RUNNER or "").startswith("pytorch"):
    try:
        import torch
        import torch.nn as nn
    except ImportError:  # the error is reported where torch is needed; UNet below needs nn only with torch
        torch = None
        nn = None


if nn is not None:
    class DoubleConv(nn.Module):
        """(conv 3x3 without bias, batch norm, relu) twice, as the header's detail::double_conv."""

        def __init__(self, cin, cout):
            super().__init__()
            self.double_conv = nn.Sequential(
                nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
                nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))

        def forward(self, x):
            return self.double_conv(x)

    class Down(nn.Module):
        def __init__(self, cin, cout):
            super().__init__()
            self.maxpool_conv = nn.Sequential(nn.MaxPool2d(2), DoubleConv(cin, cout))

        def forward(self, x):
            return self.maxpool_conv(x)

    class Up(nn.Module):
        """ConvTranspose2d 2x2/2 with bias halves the channels; the skip comes first in the concat."""

        def __init__(self, cin, cout):
            super().__init__()
            self.up = nn.ConvTranspose2d(cin, cout, 2, stride=2)
            self.conv = DoubleConv(2 * cout, cout)

        def forward(self, x, skip):
            return self.conv(torch.cat([skip, self.up(x)], dim=1))

    class UNet(nn.Module):
        """models.hpp's unet: widths 64..1024 (times width), 2 classes; 31,037,698 parameters at width 1."""

        def __init__(self, classes=2, width=1.0):
            super().__init__()
            w = [max(1, round(64 * (1 << i) * width)) for i in range(5)]
            self.inc = DoubleConv(3, w[0])
            self.down1, self.down2, self.down3, self.down4 = (Down(w[i], w[i + 1]) for i in range(4))
            self.up1, self.up2, self.up3, self.up4 = (Up(w[4 - i], w[3 - i]) for i in range(4))
            self.outc = nn.Module()
            self.outc.conv = nn.Conv2d(w[0], classes, 1)

        def forward(self, x):
            s0 = self.inc(x)
            s1 = self.down1(s0)
            s2 = self.down2(s1)
            s3 = self.down3(s2)
            h = self.down4(s3)
            h = self.up4(self.up3(self.up2(self.up1(h, s3), s2), s1), s0)
            return self.outc.conv(h)


def export_spec(model):
    """The MODEL argument of tools/export_onnx.py (run with this folder as its working directory)."""
    if model == "unet":
        return "bench_peers:UNet"
    if model == "r3d_18":
        return "torchvision.models.video:r3d_18"
    if model in SEGMENTATION:
        return "segmentation." + model
    return model


def export_kwargs(model):
    """The --kwargs of tools/export_onnx.py: a segmentation model's backbone is built without weights."""
    return ["--kwargs", json.dumps({"weights_backbone": None})] if model in SEGMENTATION else []


def build(model):
    import torchvision

    if model == "unet":
        return UNet()
    if model == "r3d_18":
        return torchvision.models.video.r3d_18()
    if model in SEGMENTATION:
        if os.path.dirname(EXPORTER) not in sys.path:
            sys.path.insert(0, os.path.dirname(EXPORTER))
        from export_onnx import OutEntry  # the tensor the ONNX file's output is

        return OutEntry(getattr(torchvision.models.segmentation, model)(weights_backbone=None))
    return getattr(torchvision.models, model)()


def input_shape(model, batch, resolution, frames):
    if model == "r3d_18":
        return [batch, 3, frames, resolution, resolution]
    return [batch, 3, resolution, resolution]


def check_resolution(model, resolution):
    """The extents the header's builders accept (the same message a memfmt run would give)."""
    if model == "unet" and resolution % 16:
        return f"unet: resolution {resolution} must be a multiple of 16"
    if model == "vgg16_bn":
        f = resolution // 32
        if resolution % 32 or not f or (7 % f and f % 7):
            return f"vgg16_bn: resolution {resolution} must be a multiple of 32 whose /32 divides 7 or is a multiple of it"
    return None


def time_passes(step, warmup, reps, case_seconds, min_reps=3):
    """(median seconds, passes): warmup untimed passes, then timed ones until reps are done, or
    case_seconds have passed and at least min_reps are done."""
    for _ in range(warmup):
        step()
    times = []
    start = time.perf_counter()
    while len(times) < max(reps, 1):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
        if len(times) >= min(max(min_reps, 1), reps) and time.perf_counter() - start > case_seconds:
            break
    return statistics.median(times), len(times)


def torch_dtype(name):
    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]


def short_error(e):
    return f"{type(e).__name__}: {e}".strip().splitlines()[0][:300] if str(e).strip() else type(e).__name__


def onnx_file(case, a, notes=None):
    """tools/export_onnx.py's file for this model and resolution (batch symbolic), written once."""
    res = case["resolution"]
    tag = f"{case['frames']}x{res}x{res}" if case["model"] == "r3d_18" else f"{res}x{res}"
    path = os.path.abspath(os.path.join(a.onnx_dir, f"{case['model']}_{tag}.onnx"))
    if os.path.exists(path):
        return path
    os.makedirs(a.onnx_dir, exist_ok=True)
    shape = ",".join(str(s) for s in input_shape(case["model"], 1, res, case["frames"]))
    tmp = path + ".part"  # a stopped export leaves no file that a later run would take as whole
    cmd = [sys.executable, EXPORTER, export_spec(case["model"]), tmp, "--input-shape", shape,
           "--dynamic-batch", "--seed", str(a.seed), "--opset", str(a.opset)] + export_kwargs(case["model"])
    r = subprocess.run(cmd, cwd=HERE, capture_output=True, text=True)
    if r.returncode != 0 or not os.path.exists(tmp):
        tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"ONNX export failed: {tail[0]}")
    os.replace(tmp, path)
    return path


@contextlib.contextmanager
def startup_cpus():
    """The calling thread on the process's startup CPUs while inside, on its own (pinned) ones after."""
    if STARTUP_CPUS is None:
        yield
        return
    pinned = os.sched_getaffinity(0)
    os.sched_setaffinity(0, STARTUP_CPUS)
    try:
        yield
    finally:
        os.sched_setaffinity(0, pinned)


def cpu_flags():
    """The x86 flags that decide the engines' bfloat16 kernels, from /proc/cpuinfo (empty elsewhere)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    have = set(line.split(":", 1)[1].split())
                    return sorted(have & {"avx2", "avx512f", "avx512bw", "avx512_bf16", "avx512_fp16", "amx_bf16",
                                          "amx_tile", "avx_vnni", "avx512_vnni"})
    except OSError:
        pass
    return []


# ---------------------------------------------------------------------------------------------
# The workers: one process per runner and model. Each answers JSON lines on a pipe: "setup" builds
# the model (or session), "time" runs one round of a case, and end of input ends it.

class Engine:
    """One runner's model in a worker process."""

    def __init__(self, req):
        self.runner, self.model = req["runner"], req["model"]
        self.threads, self.seed = req["threads"], req["seed"]
        self.resolution, self.frames = req["resolution"], req["frames"]
        self.onnx, self.optimizer = req.get("onnx"), req.get("optimizer", "sgd")
        self.prepared = {}
        self.notes = []
        if self.runner in ("onnxruntime", "openvino"):
            self.setup_onnx()
        else:
            self.setup_torch()

    # PyTorch (eager, compiled, CUDA)
    def setup_torch(self):
        if torch is None:
            raise RuntimeError(f"PyTorch is not importable by {sys.executable}")
        torch.set_num_threads(self.threads)
        import torchvision

        self.version = f"torch {torch.__version__}"
        self.versions = {"torch": torch.__version__, "torchvision": torchvision.__version__}
        if self.runner in CUDA_RUNNERS:
            if not torch.cuda.is_available():
                raise RuntimeError(f"{self.runner} needs a CUDA device, and torch {torch.__version__} sees none")
            torch.backends.cudnn.benchmark = True  # PyTorch's fastest cuDNN algorithms, as its users run
            self.versions.update(gpu=torch.cuda.get_device_name(0), cudnn=torch.backends.cudnn.version())
        torch.manual_seed(self.seed)
        self.base = build(self.model)

    def torch_bf16_why(self):
        """Why PyTorch has no bfloat16 kernels on this CPU, else None."""
        try:
            ok = torch.ops.mkldnn._is_mkldnn_bf16_supported()
        except (AttributeError, RuntimeError):
            ok = True  # no such query in this version: let it run
        if ok:
            return None
        return ("unsupported on this CPU (PyTorch's oneDNN has no bfloat16 kernels here: "
                "torch.ops.mkldnn._is_mkldnn_bf16_supported() is false; autocast would emulate them)")

    def torch_step(self, case, a):
        cuda = self.runner in CUDA_RUNNERS
        dt = case["dtype"]
        if self.runner == "pytorch_compile" and case["pass"] != "inference":
            raise Skip("torch.compile is timed on inference only here")
        if not cuda and dt == "float16":
            raise Skip("float16 on the CPU is not among the compared cases (bfloat16 is)")
        if not cuda and dt == "bfloat16":
            why = self.torch_bf16_why()
            if why:
                raise Skip(why)
        dev = torch.device("cuda" if cuda else "cpu")
        # CUDA: parameters in the case's dtype; CPU: float32 parameters under autocast (AMP).
        m = copy.deepcopy(self.base).to(device=dev, dtype=torch_dtype(dt) if cuda else torch.float32)
        x = torch.randn(*input_shape(self.model, case["batch"], self.resolution, self.frames))
        if cuda:
            x = x.to(torch_dtype(dt))
        if self.runner.endswith("channels_last") or self.runner == "pytorch_compile":
            fmt = torch.channels_last_3d if x.dim() == 5 else torch.channels_last
            m = m.to(memory_format=fmt)
            x = x.contiguous(memory_format=fmt)
        def autocast():  # a new context each pass
            return (torch.autocast("cpu", dtype=torch.bfloat16) if not cuda and dt == "bfloat16"
                    else contextlib.nullcontext())
        sync = torch.cuda.synchronize if cuda else (lambda: None)
        if case["pass"] == "inference":
            m.eval()
            fn = m
            if self.runner == "pytorch_compile":
                fn = torch.compile(m, dynamic=False)

            def step():
                with torch.inference_mode(), autocast():
                    fn(x.to(dev)).cpu()
            return step
        m.train()
        opt = torch.optim.SGD(m.parameters(), lr=1e-4) if self.optimizer == "sgd" else None

        def train_step():
            for p in m.parameters():
                p.grad = None
            with autocast():
                loss = m(x.to(dev)).float().mean()
            loss.backward()
            if opt is not None:
                opt.step()
            sync()
        return train_step

    # ONNX Runtime and OpenVINO on the exported file
    def setup_onnx(self):
        import numpy as np

        self.np = np
        if self.runner == "onnxruntime":
            import onnxruntime as ort

            self.version = f"onnxruntime {ort.__version__}"
            self.versions = {"onnxruntime": ort.__version__}
            so = ort.SessionOptions()
            so.intra_op_num_threads = self.threads
            so.inter_op_num_threads = 1
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            # The session's threads start in its constructor; see startup_cpus.
            with startup_cpus():
                self.session = ort.InferenceSession(self.onnx, so, providers=["CPUExecutionProvider"])
            self.input_name = self.session.get_inputs()[0].name
        else:
            import openvino as ov

            self.version = f"openvino {ov.get_version().split('-')[0]}"
            self.versions = {"openvino": ov.get_version()}
            self.core = ov.Core()
            self.ov_model_path = self.onnx
            caps = self.core.get_property("CPU", "OPTIMIZATION_CAPABILITIES")
            self.ov_bf16 = any(str(c).upper() == "BF16" for c in caps)

    def onnx_step(self, case, a):
        if case["pass"] != "inference":
            raise Skip(f"the {self.runner} package runs inference only")
        shape = input_shape(self.model, case["batch"], self.resolution, self.frames)
        x = self.np.random.default_rng(self.seed).standard_normal(shape).astype(self.np.float32)
        if self.runner == "onnxruntime":
            if case["dtype"] != "float32":
                raise Skip(f"unsupported: ONNX Runtime's CPU execution provider has no {case['dtype']} convolution "
                           "kernels")
            return lambda: self.session.run(None, {self.input_name: x})
        if case["dtype"] == "float16":
            raise Skip("float16 on the CPU is not among the compared cases (bfloat16 is)")
        if case["dtype"] == "bfloat16" and not self.ov_bf16:
            raise Skip("unsupported on this CPU (OpenVINO lists no BF16 optimization capability here: its bf16 "
                       "hint would run f32)")
        hint = "bf16" if case["dtype"] == "bfloat16" else "f32"
        m = self.core.read_model(self.ov_model_path)
        m.reshape({m.inputs[0].get_any_name(): shape})
        with startup_cpus():
            compiled = self.core.compile_model(m, "CPU", {"INFERENCE_NUM_THREADS": self.threads,
                                                          "PERFORMANCE_HINT": "LATENCY",
                                                          "INFERENCE_PRECISION_HINT": hint})
        ran = str(compiled.get_property("INFERENCE_PRECISION_HINT")).lower()
        if hint == "bf16" and "bf16" not in ran:
            raise Skip(f"unsupported on this CPU (OpenVINO compiled the bf16 request as {ran})")
        req = compiled.create_infer_request()
        return lambda: req.infer({0: x})

    def time(self, req):
        case = req["case"]
        key = (case["dtype"], case["pass"], case["batch"])
        compile_s = None
        if key not in self.prepared:
            t0 = time.perf_counter()
            step = self.onnx_step(case, req) if self.runner in ("onnxruntime", "openvino") else self.torch_step(case, req)
            if self.runner == "pytorch_compile":
                with startup_cpus():
                    step()  # compiles
                compile_s = time.perf_counter() - t0
            self.prepared.clear()  # one case's buffers at a time
            self.prepared[key] = step
        step = self.prepared[key]
        with startup_cpus():
            med, reps = time_passes(step, req["warmup"], req["reps"], req["case_seconds"], req["min_reps"])
        out = {"ok": True, "seconds": med, "reps": reps}
        if compile_s is not None:
            out["compile_s"] = compile_s
        return out


class Skip(Exception):
    """A case the runner does not run, with the reason (a row, not a failure)."""


def worker_main():
    """--worker: answers the parent's JSON requests on stdin, one JSON line each on the original stdout;
    whatever the libraries print goes to stderr (the parent's log file)."""
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    engine = None
    for line in sys.stdin:
        req = json.loads(line)
        try:
            if req["op"] == "setup":
                engine = Engine(req)
                reply = {"ok": True, "version": engine.version, "versions": engine.versions}
            elif req["op"] == "time":
                reply = engine.time(req)
            else:
                reply = {"error": f"unknown request {req['op']}"}
        except Skip as e:
            reply = {"skip": str(e)}
        except Exception as e:  # a runner's failure is a row with its reason, not the end of the run
            reply = {"error": short_error(e)}
        proto.write(json.dumps(reply) + "\n")
    return 0


# Variables that set an engine's thread waiting or placement: the peers start with their own defaults.
PLACEMENT_VARS = ("OMP_WAIT_POLICY", "OMP_PROC_BIND", "OMP_PLACES", "GOMP_SPINCOUNT", "GOMP_CPU_AFFINITY")


def peer_env(runner, a):
    env = {k: v for k, v in os.environ.items() if k not in PLACEMENT_VARS and not k.startswith("KMP_")}
    env["OMP_NUM_THREADS"] = str(a.threads)
    env["PYTHONUNBUFFERED"] = "1"
    if runner == "pytorch_compile" and a.inductor_cache:
        env["TORCHINDUCTOR_CACHE_DIR"] = os.path.abspath(a.inductor_cache)
    return env


class Worker:
    """The parent's handle on one runner's worker process for one model."""

    def __init__(self, runner, model, case, a, onnx):
        os.makedirs(a.log_dir, exist_ok=True)
        self.log_path = os.path.join(a.log_dir, f"{runner}_{model}.log")
        self.log = open(self.log_path, "w")
        self.p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", runner], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=self.log, env=peer_env(runner, a), text=True,
                                  cwd=HERE)
        self.timeout = a.request_timeout
        self.reply = self.ask({"op": "setup", "runner": runner, "model": model, "threads": a.threads,
                               "seed": a.seed, "resolution": case["resolution"], "frames": case["frames"],
                               "onnx": onnx, "optimizer": a.optimizer})

    def ask(self, req):
        import selectors

        try:
            self.p.stdin.write(json.dumps(req) + "\n")
            self.p.stdin.flush()
        except (BrokenPipeError, OSError):
            return {"error": self.died()}
        sel = selectors.DefaultSelector()
        sel.register(self.p.stdout, selectors.EVENT_READ)
        if not sel.select(self.timeout):
            self.p.kill()
            return {"error": f"no answer within {self.timeout:g} s (--request-timeout); see {self.log_path}"}
        line = self.p.stdout.readline()
        if not line:
            return {"error": self.died()}
        return json.loads(line)

    def died(self):
        code = self.p.wait()
        self.log.flush()
        try:
            with open(self.log_path) as f:
                tail = [s for s in f.read().strip().splitlines() if s.strip()][-1:]
        except OSError:
            tail = []
        return f"worker exited with code {code}" + (f" ({tail[0][:200]})" if tail else "") + f"; see {self.log_path}"

    def close(self):
        try:
            self.p.stdin.close()
            self.p.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            self.p.kill()
            self.p.wait()
        self.log.close()


# ---------------------------------------------------------------------------------------------
# memfmt: its command line, a new process per round.

def memfmt_version(a):
    try:
        rev = subprocess.run(["git", "-C", os.path.join(HERE, "..", ".."), "describe", "--always", "--dirty"],
                             capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        rev = ""
    dnnl = ""
    try:
        dnnl = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "libdnnl-dev"], capture_output=True, text=True,
                              timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        pass
    return "memfmt" + (f" {rev}" if rev else "") + (f" (oneDNN {dnnl.split('-')[0]})" if dnnl else "")


def memfmt_env(runner, a):
    """The peers' environment (no waiting or placement variables: OpenMP's defaults), PASSIVE for memfmt_passive."""
    env = peer_env(runner, a)
    if runner == "memfmt_passive":
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    return env


def memfmt_repeat(a, times):
    """Passes for memfmt run's next round: --memfmt-reps, else as the peers' rounds (--min-reps in the
    first; then enough for --case-seconds at the last round's speed, at most --reps)."""
    if a.memfmt_reps is not None:
        return max(a.memfmt_reps, 1)
    n = min(a.min_reps, a.reps)
    if times and times[-1] > 0:
        n = max(n, min(a.reps, math.ceil(a.case_seconds / times[-1])))
    return max(n, 1)


def memfmt_round(runner, case, onnx, a, repeat):
    """One round of memfmt's command line: (seconds per batch, passes, extra fields) or raises Skip /
    RuntimeError with the reason."""
    if case["pass"] != "inference":
        raise Skip("memfmt run times inference; bench_network's train rows time the training step")
    cmd = [a.memfmt, "run", onnx, "--random", "--batch", str(case["batch"]), "--backend", "onednn", "--threads",
           str(a.threads), "--repeat", str(repeat), "--dtype", case["dtype"], "--json"]
    if a.memfmt_cache:
        cmd += ["--cache", a.memfmt_cache]
    if a.memfmt_calibrate:
        cmd += ["--calibrate"]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, env=memfmt_env(runner, a), timeout=a.request_timeout)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"memfmt run took over {a.request_timeout:g} s (--request-timeout)")
    if r.returncode != 0:
        msg = " ".join(r.stderr.strip().splitlines()[-2:]) or f"exit {r.returncode}"
        m = re.search(r"needs (\w+)\b.* on this CPU", msg)
        if m:
            raise Skip(f"unsupported on this CPU (needs {m.group(1)})")
        raise RuntimeError(f"memfmt run exit {r.returncode}: {msg[:300]}")
    j = json.loads(r.stdout)
    extra = {"plan": j.get("policy"), "conversions": (j.get("plan") or {}).get("conversions")}
    return j["ms_per_batch"] / 1e3, j.get("repeat"), extra


# ---------------------------------------------------------------------------------------------
# The table: cases in order, each case's rounds in turns.

def table_run(a, cases, notes):
    rows, versions = [], {}
    start = time.perf_counter()
    flags = cpu_flags()
    memfmt_ver = memfmt_version(a) if any(r in MEMFMT_RUNNERS for r in a.runners) else None
    if memfmt_ver:
        for r in a.runners:
            if r in MEMFMT_RUNNERS:
                versions[r] = memfmt_ver
    by_model = []
    for c in cases:
        if not by_model or by_model[-1][0] != (c["model"], c["resolution"], c["frames"]):
            by_model.append(((c["model"], c["resolution"], c["frames"]), []))
        by_model[-1][1].append(c)
    n_done = 0
    for (model, res, frames), model_cases in by_model:
        workers, broken = {}, {}
        onnx, onnx_why = None, None
        needs_onnx = any(r in ONNX_RUNNERS for r in a.runners) and any(c["pass"] == "inference" for c in model_cases)
        bad_res = check_resolution(model, res) or (None if model in MODELS else f"unknown model {model}")
        if needs_onnx and bad_res is None:
            try:
                onnx = onnx_file(model_cases[0], a)
            except Exception as e:
                onnx_why = short_error(e)
        for case in model_cases:
            n_done += 1
            result = {r: {"times": [], "reps": 0, "extra": {}} for r in a.runners}
            why = {}
            for r in a.runners:
                if bad_res:
                    why[r] = bad_res
                elif r in broken:
                    why[r] = broken[r]
                elif r in ONNX_RUNNERS and onnx is None and case["pass"] == "inference":
                    why[r] = onnx_why or "no ONNX file"
                elif r in MEMFMT_RUNNERS and not a.memfmt:
                    why[r] = "no memfmt binary (--memfmt)"
            if a.time_limit and time.perf_counter() - start > a.time_limit:
                for r in a.runners:
                    why.setdefault(r, f"time limit of {a.time_limit:g} s spent (a longer --time-limit, or bench.sh "
                                      "--full, runs it)")
            for rnd in range(a.rounds):
                shift = rnd % len(a.runners)
                for r in a.runners[shift:] + a.runners[:shift]:
                    if r in why:
                        continue
                    try:
                        if r in MEMFMT_RUNNERS:
                            sec, reps, extra = memfmt_round(r, case, onnx, a, memfmt_repeat(a, result[r]["times"]))
                        else:
                            if r not in workers:
                                w = Worker(r, model, case, a, onnx)
                                if "ok" not in w.reply:
                                    broken[r] = w.reply.get("error") or w.reply.get("skip")
                                    w.close()
                                    raise Skip(broken[r])
                                workers[r] = w
                                versions[r] = w.reply["version"]
                                notes_versions.update(w.reply.get("versions", {}))
                            ans = workers[r].ask({"op": "time", "case": case, "warmup": a.warmup, "reps": a.reps,
                                                  "min_reps": a.min_reps, "case_seconds": a.case_seconds})
                            if "skip" in ans:
                                raise Skip(ans["skip"])
                            if "error" in ans:
                                if workers[r].p.poll() is not None:  # the worker died: none for this model
                                    broken[r] = ans["error"]
                                    workers.pop(r).close()
                                raise RuntimeError(ans["error"])
                            sec, reps, extra = ans["seconds"], ans["reps"], {k: v for k, v in ans.items()
                                                                             if k == "compile_s"}
                        result[r]["times"].append(sec)
                        result[r]["reps"] += reps or 0
                        for k, v in extra.items():
                            result[r]["extra"].setdefault(k, v)
                    except Skip as e:
                        why[r] = str(e)
                    except Exception as e:
                        why[r] = "error: " + short_error(e)
                    if a.gap > 0:
                        time.sleep(a.gap)
            for r in a.runners:
                row = dict(case, runner=r, run_type="iteration", time_unit="ms", threads=a.threads,
                           name=f"BM_peer/{case['model']}/{case['dtype']}/{case['pass']}/{r}/batch:{case['batch']}",
                           version=versions.get(r), wait_policy="PASSIVE" if r == "memfmt_passive" else "default")
                times = result[r]["times"]
                if r not in why and times:
                    med = statistics.median(times)
                    row.update(ms_per_batch=med * 1e3, real_time=med * 1e3, images_per_s=case["batch"] / med,
                               reps=result[r]["reps"], rounds=len(times),
                               round_ms_per_batch=[t * 1e3 for t in times], **result[r]["extra"])
                    done = f"{med * 1e3:.1f} ms/batch, {case['batch'] / med:.2f} images/s ({len(times)} rounds)"
                else:
                    w = why.get(r, "no round ran")
                    row.update(error_occurred=True, error_message=w if w.startswith(("error", "unsupported"))
                               else "skipped: " + w)
                    done = row["error_message"]
                rows.append(row)
                print(f"[peers {n_done}/{len(cases)}] {case['model']} {case['dtype']} {case['pass']} batch "
                      f"{case['batch']} {case['resolution']}px {r}: {done}", flush=True)
        for w in workers.values():
            w.close()
    return rows, versions, flags


# The engines' versions the workers reported (torch, torchvision, onnxruntime, openvino, gpu, cudnn).
notes_versions = {}


def matched_cases(path, a):
    """(model, dtype, pass, batch, resolution, frames) of every BM_network row of memfmt's JSON file."""
    with open(path) as f:
        try:
            data = json.load(f)
        except json.JSONDecodeError as e:
            raise SystemExit(f"bench_peers: --match {path} is not complete JSON ({e}); was the benchmark stopped "
                             "before it finished writing?")
    cases = []
    for b in data.get("benchmarks", []):
        if not b.get("name", "").startswith(("BM_network/", "BM_network_cudnn/")):
            continue
        c = summarize.network_case(b)
        if c is None:
            continue
        model = summarize.base_model(c["model"])
        for n in [c["batch"]] if c["batch"] is not None else a.batches:
            cases.append((model, c["dtype"], c["pass"], n, c["resolution"] or a.resolution, c["frames"] or a.frames))
    return cases


def plan(a):
    if a.match:
        raw = []
        for p in a.match:
            raw += [c for c in matched_cases(p, a)
                    if c[0] in a.models and c[1] in a.dtypes and c[2] in a.passes]
    else:
        raw = [(m, d, p, n, a.resolution, a.frames) for m in a.models for d in a.dtypes for p in a.passes
               for n in a.batches]
    seen, cases = set(), []
    for c in raw:
        if c not in seen:
            seen.add(c)
            cases.append(c)
    # One model at a time (its workers are started once for all its cases), in --models' order; within
    # a model float32 first, inference before training, small batches first.
    order = {m: i for i, m in enumerate(a.models)}
    dtypes = ["float32", "bfloat16", "float16"]
    cases.sort(key=lambda c: (order.get(c[0], len(order)), c[4], c[5], dtypes.index(c[1]) if c[1] in dtypes else 9,
                              PASSES.index(c[2]) if c[2] in PASSES else len(PASSES), c[3]))
    return [{"model": m, "dtype": d, "pass": p, "batch": n, "resolution": r, "frames": f} for m, d, p, n, r, f in cases]


def export_only(a):
    """Writes (or keeps) the ONNX file of every float32 inference case: one per model and input size."""
    done, failed = set(), 0
    for case in plan(a):
        key = (case["model"], case["resolution"], case["frames"])
        if case["pass"] != "inference" or case["dtype"] != "float32" or key in done:
            continue
        done.add(key)
        why = check_resolution(case["model"], case["resolution"])
        try:
            if why is None:
                print(f"bench_peers: ONNX file {onnx_file(case, a)}", flush=True)
        except Exception as e:  # one model's export failing leaves the others' files
            why = short_error(e)
        if why is not None:
            failed += 1
            print(f"bench_peers: no ONNX file for {case['model']} at {case['resolution']}px: {why}", flush=True)
    return 1 if failed else 0


def csv(kind):
    return lambda s: [kind(v) for v in s.split(",") if v]


def main():
    if "--worker" in sys.argv[1:]:
        return worker_main()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", type=csv(str), default=list(MODELS), help="comma-separated; default all")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                    help="cuda: the runners default to " + ", ".join(CUDA_RUNNERS))
    ap.add_argument("--runners", type=csv(str), default=None,
                    help="default: " + ", ".join(RUNNERS) + " (--device cuda: " + ", ".join(CUDA_RUNNERS) +
                    "); also " + ", ".join(MEMFMT_RUNNERS) + " (with --memfmt)")
    ap.add_argument("--passes", type=csv(str), default=list(PASSES))
    ap.add_argument("--dtypes", type=csv(str), default=["float32"],
                    help="float32 (default), bfloat16, float16 (float16: the CUDA runners)")
    ap.add_argument("--batches", type=csv(int), default=[1, 8])
    ap.add_argument("--resolution", type=int, default=224, help="input H = W (bench_network's MEMFMT_BENCH_RESOLUTION)")
    ap.add_argument("--frames", type=int, default=16, help="input D of r3d_18")
    ap.add_argument("--match", action="append", help="memfmt benchmark JSON: run its BM_network cases")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=1, help="rounds per case, every runner in turn in each")
    ap.add_argument("--warmup", type=int, default=2, help="untimed passes at the start of every round")
    ap.add_argument("--reps", type=int, default=10, help="timed passes per round at most")
    ap.add_argument("--min-reps", type=int, default=3, help="timed passes per round at least")
    ap.add_argument("--case-seconds", type=float, default=5.0,
                    help="a round stops after this many seconds of timed passes once --min-reps are done")
    ap.add_argument("--time-limit", type=float, default=0, help="seconds for the whole run; 0: none")
    ap.add_argument("--gap", type=float, default=0.1, help="seconds between two runners' turns")
    ap.add_argument("--optimizer", choices=["sgd", "none"], default="sgd")
    ap.add_argument("--onnx-dir", default="onnx", help="where the exported ONNX files are written and reused")
    ap.add_argument("--opset", type=int, default=17, help="ONNX opset of the exported files")
    ap.add_argument("--memfmt", help="memfmt's command-line binary (build/tools/memfmt) for the memfmt runners")
    ap.add_argument("--memfmt-cache", help="timing cache file for memfmt run --cache (layer timings kept)")
    ap.add_argument("--memfmt-reps", type=int, default=None,
                    help="memfmt run --repeat in every round (default: as many passes as the peers' rounds take)")
    ap.add_argument("--no-memfmt-calibrate", dest="memfmt_calibrate", action="store_false",
                    help="memfmt run without --calibrate (the solved plan, not the fastest of three)")
    ap.add_argument("--inductor-cache", default=None, help="TORCHINDUCTOR_CACHE_DIR of the pytorch_compile workers")
    ap.add_argument("--log-dir", default=None, help="the workers' logs (default: beside --out, else ./peers_logs)")
    ap.add_argument("--request-timeout", type=float, default=1800,
                    help="seconds a worker or memfmt run may take for one setup or round")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--export-only", action="store_true",
                    help="only write the ONNX files of the float32 inference cases (for bench_network's ONNX rows)")
    ap.add_argument("--out", help="JSON file to write")
    a = ap.parse_args()
    if a.runners is None:
        a.runners = list(CUDA_RUNNERS if a.device == "cuda" else RUNNERS)
    if (a.threads < 1 or a.resolution < 1 or a.frames < 1 or a.reps < 1 or a.warmup < 0 or a.rounds < 1
            or a.min_reps < 1):
        ap.error(f"--threads {a.threads}, --resolution {a.resolution}, --frames {a.frames}, --reps {a.reps}, "
                 f"--min-reps {a.min_reps}, --rounds {a.rounds} must be positive and --warmup {a.warmup} not negative")
    for name, got, known in (("--models", a.models, MODELS),
                             ("--runners", a.runners, RUNNERS + MEMFMT_RUNNERS + CUDA_RUNNERS),
                             ("--passes", a.passes, PASSES), ("--dtypes", a.dtypes, ["float32", "bfloat16", "float16"])):
        bad = [v for v in got if v not in known]
        if bad:
            ap.error(f"{name}: unknown {', '.join(bad)} (known: {', '.join(known)})")
    if a.memfmt:
        a.memfmt = os.path.abspath(a.memfmt)
    if a.log_dir is None:
        a.log_dir = os.path.join(os.path.dirname(os.path.abspath(a.out)), "peers_logs") if a.out else "peers_logs"
    if a.export_only:
        return export_only(a)

    notes = []
    cases = plan(a)
    rows, versions, flags = table_run(a, cases, notes)
    out = {"context": {"date": datetime.datetime.now().isoformat(timespec="seconds"), "host_name": socket.gethostname(),
                       "executable": "bench_peers.py", "num_cpus": os.cpu_count(), "threads": a.threads,
                       "cpu_flags": flags, "rounds": a.rounds, "versions": versions,
                       "torch": notes_versions.get("torch"), "torchvision": notes_versions.get("torchvision"),
                       "onnxruntime": notes_versions.get("onnxruntime"), "openvino": notes_versions.get("openvino"),
                       "memfmt": next((v for r, v in versions.items() if r in MEMFMT_RUNNERS), None),
                       "gpu": notes_versions.get("gpu"), "cudnn": notes_versions.get("cudnn"), "notes": notes},
           "benchmarks": rows}
    for n in notes:
        print("bench_peers: " + n)
    if a.out:
        os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
        with open(a.out, "w") as f:
            json.dump(out, f, indent=1)
        print(f"bench_peers: {len(rows)} rows -> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
