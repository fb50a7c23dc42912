#!/usr/bin/python3
"""Peers of memfmt's network benchmarks: PyTorch (NCHW and channels_last; on the CPU and on a CUDA GPU)
and ONNX Runtime (CPU).

  bench_peers.py --models resnet50,mobilenet_v2 --batches 1,8 --threads 2 --out peers.json
  bench_peers.py --match out/bench/bench_network.json --out peers.json   # the cases memfmt ran
  bench_peers.py --device cuda --match gpu/bench_network_cudnn_b32.json --dtypes float32,float16,bfloat16

Models are the ones include/memfmt/graph/models.hpp builds: torchvision's resnet50, mobilenet_v2,
resnext50_32x4d, vgg16_bn, video.r3d_18, shufflenet_v2_x1_0, convnext_tiny, and the UNet defined
below (same channels, max pooling, ConvTranspose2d 2x2/2 upsampling, [skip, upsampled]
concatenation, module names as the header's node names); and torchvision's segmentation models
deeplabv3_mobilenet_v3_large, lraspp_mobilenet_v3_large, deeplabv3_resnet50 and fcn_resnet50 (21
classes, no auxiliary head; the "out" entry of their dict is the output), which memfmt runs through
ONNX import only. Random weights (torch.manual_seed(--seed)); timing does not depend on their
values.

Runners:
  pytorch_nchw           the model and input contiguous (NCHW / NCDHW)
  pytorch_channels_last  model and input in torch.channels_last (channels_last_3d for r3d_18)
  onnxruntime            onnxruntime.InferenceSession, CPUExecutionProvider, on the ONNX file that
                         tools/export_onnx.py writes (batch-norm folded, batch dimension symbolic)
  pytorch_cuda_nchw, pytorch_cuda_channels_last
                         the same two on the first CUDA device (--device cuda makes them the default
                         runners), torch.backends.cudnn.benchmark on, parameters in the case's dtype
                         (model.half() / model.bfloat16(), as bench_network_cudnn's f16/bf16 rows).
                         Each pass copies its input in from host memory, and an inference pass its
                         output back, as bench_network_cudnn's passes do; the time ends after
                         torch.cuda.synchronize().
Passes:
  inference  model.eval() under torch.no_grad()
  training   model.train(); forward, mean of the output as the loss, backward, and (--optimizer sgd,
             the default) an SGD step without momentum. ONNX Runtime's CPU package has no training:
             its training rows are skipped with that reason.
Each runner uses --threads intra-op threads (torch.set_num_threads; intra_op_num_threads).
Waiting threads spin by default (OpenMP's and ONNX Runtime's pools alike), which is fastest on an
idle machine; on a shared one a spinning thread burns the time slice its peer needs and one pass can
take 10x longer. OMP_WAIT_POLICY=PASSIVE makes PyTorch's (and memfmt's oneDNN) threads sleep, and
here also turns off ONNX Runtime's spinning (session.intra_op.allow_spinning = 0).

Timing: --warmup untimed passes, then timed passes until --reps are done or --case-seconds have
passed (at least 3); ms per batch is the median, images/s = batch / median. --time-limit bounds the
whole run: cases left when it is spent are recorded as skipped, not run.

--match reads memfmt's Google Benchmark JSON (names BM_network/<model>/<dtype>/<pass>/<policy>, and
BM_network_cudnn/... for the CUDA runners) and
runs the same (model, dtype, pass, batch) cases that --models, --dtypes and --passes admit: the batch
comes from a "batch" counter, a "batch:N" name component or "batch N" in the label, else --batches;
the resolution from a "resolution" counter or "RxR" ("FxRxR" with frames) in the label, else
--resolution (and --frames). Pass names fwd/inference and
train/training are the same; dtypes f32/float32, bf16/bfloat16, f16/float16 likewise.

--export-only writes the ONNX files of the float32 inference cases (into --onnx-dir, kept where they
exist) and runs nothing: bench_network imports them for its BM_network/onnx:<model> rows.

Output (--out, Google Benchmark-like so benchmarks/summarize.py reads it with the other files):
  {"context": {"date", "host_name", "num_cpus", "threads", "torch", "torchvision", "onnxruntime",
               "notes": [why a runner is absent]},
   "benchmarks": [{"name": "BM_peer/<model>/<dtype>/<pass>/<runner>/batch:<N>", "run_type": "iteration",
                   "model", "runner", "pass", "dtype", "batch", "resolution", "frames",
                   "ms_per_batch", "images_per_s", "reps", "real_time" (= ms_per_batch), "time_unit": "ms",
                   and for a case that did not run: "error_occurred": true, "error_message": why}]}
"""
import argparse
import contextlib
import copy
import datetime
import json
import os
import socket
import statistics
import subprocess
import sys
import time

# torchvision's segmentation models: not in the models header, so memfmt runs them only through
# ONNX import (memfmt run, or bench_network's BM_network/onnx rows on the files written here).
SEGMENTATION = ["deeplabv3_mobilenet_v3_large", "lraspp_mobilenet_v3_large", "deeplabv3_resnet50", "fcn_resnet50"]
MODELS = ["resnet50", "mobilenet_v2", "unet", "resnext50_32x4d", "vgg16_bn", "r3d_18", "shufflenet_v2_x1_0",
          "convnext_tiny"] + SEGMENTATION
RUNNERS = ["pytorch_nchw", "pytorch_channels_last", "onnxruntime"]
CUDA_RUNNERS = ["pytorch_cuda_nchw", "pytorch_cuda_channels_last"]
PASSES = ["inference", "training"]
HERE = os.path.dirname(os.path.abspath(__file__))
EXPORTER = os.path.join(HERE, "..", "..", "tools", "export_onnx.py")

# The CPUs this process may use, read before torch loads libgomp: with OMP_PROC_BIND set (bench.sh
# sets close), libgomp pins the main thread to one CPU as it loads, and every thread ONNX Runtime
# later starts inherits that single CPU (`OMP_PROC_BIND=close bench_peers.py --models mobilenet_v2
# --batches 1` without the restore below timed ONNX Runtime on one core).
STARTUP_CPUS = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None

sys.path.insert(0, os.path.join(HERE, ".."))
import summarize  # noqa: E402  (the BM_network name and label parsing, shared with the tables)

try:
    import torch
    import torch.nn as nn
except ImportError:  # the error is reported by main(); UNet below needs nn only when torch exists
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


def time_passes(step, warmup, reps, case_seconds):
    for _ in range(warmup):
        step()
    times = []
    start = time.perf_counter()
    while len(times) < max(reps, 1):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
        if len(times) >= 3 and time.perf_counter() - start > case_seconds:
            break
    return statistics.median(times), len(times)


def torch_dtype(name):
    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]


def pytorch_case(base, case, runner, a):
    dt = torch_dtype(case["dtype"])
    cuda = runner in CUDA_RUNNERS
    dev = torch.device("cuda" if cuda else "cpu")
    m = copy.deepcopy(base).to(device=dev, dtype=dt)
    x = torch.randn(*input_shape(case["model"], case["batch"], case["resolution"], case["frames"])).to(dt)
    if runner.endswith("channels_last"):
        fmt = torch.channels_last_3d if x.dim() == 5 else torch.channels_last
        m = m.to(memory_format=fmt)
        x = x.contiguous(memory_format=fmt)
    # On the GPU the input comes from host memory every pass (a no-op on the CPU).
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    if case["pass"] == "inference":
        m.eval()

        def step():
            with torch.no_grad():
                m(x.to(dev)).cpu()
    else:
        m.train()
        opt = torch.optim.SGD(m.parameters(), lr=1e-4) if a.optimizer == "sgd" else None

        def step():
            for p in m.parameters():
                p.grad = None
            m(x.to(dev)).float().mean().backward()
            if opt is not None:
                opt.step()
            sync()
    return time_passes(step, a.warmup, a.reps, a.case_seconds)


def onnx_file(case, a, notes):
    """tools/export_onnx.py's file for this model and resolution (batch symbolic), written once."""
    res = case["resolution"]
    tag = f"{case['frames']}x{res}x{res}" if case["model"] == "r3d_18" else f"{res}x{res}"
    path = os.path.abspath(os.path.join(a.onnx_dir, f"{case['model']}_{tag}.onnx"))
    if os.path.exists(path):
        return path
    os.makedirs(a.onnx_dir, exist_ok=True)
    shape = ",".join(str(s) for s in input_shape(case["model"], 1, res, case["frames"]))
    cmd = [sys.executable, EXPORTER, export_spec(case["model"]), path, "--input-shape", shape,
           "--dynamic-batch", "--seed", str(a.seed)] + export_kwargs(case["model"])
    r = subprocess.run(cmd, cwd=HERE, capture_output=True, text=True)
    if r.returncode != 0 or not os.path.exists(path):
        tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"ONNX export failed: {tail[0]}")
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


def ort_case(case, a, notes):
    path = onnx_file(case, a, notes)
    # The session's threads start in its constructor and the calling thread works beside them.
    with startup_cpus():
        return ort_session_case(case, path, a)


def ort_session_case(case, path, a):
    import numpy as np
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if os.environ.get("OMP_WAIT_POLICY", "").upper() == "PASSIVE":
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    name = s.get_inputs()[0].name
    x = np.random.default_rng(a.seed).standard_normal(
        input_shape(case["model"], case["batch"], case["resolution"], case["frames"])).astype(np.float32)
    return time_passes(lambda: s.run(None, {name: x}), a.warmup, a.reps, a.case_seconds)


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
    # ResNet-50 and MobileNetV2 in fp32 inference first (the cases memfmt's goal compares with both
    # peers), then their training step, then the other models: a short --time-limit still covers them.
    order = {m: i for i, m in enumerate(MODELS)}
    cases.sort(key=lambda c: (order.get(c[0], len(MODELS)) > 1, c[1] != "float32",
                              PASSES.index(c[2]) if c[2] in PASSES else len(PASSES), order.get(c[0], len(MODELS)), c[3]))
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
                print(f"bench_peers: ONNX file {onnx_file(case, a, [])}", flush=True)
        except Exception as e:  # one model's export failing leaves the others' files
            why = f"{type(e).__name__}: {e}".splitlines()[0][:300]
        if why is not None:
            failed += 1
            print(f"bench_peers: no ONNX file for {case['model']} at {case['resolution']}px: {why}", flush=True)
    return 1 if failed else 0


def csv(kind):
    return lambda s: [kind(v) for v in s.split(",") if v]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", type=csv(str), default=list(MODELS), help="comma-separated; default all")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                    help="cuda: the runners default to " + ", ".join(CUDA_RUNNERS))
    ap.add_argument("--runners", type=csv(str), default=None,
                    help="default: " + ", ".join(RUNNERS) + " (--device cuda: " + ", ".join(CUDA_RUNNERS) + ")")
    ap.add_argument("--passes", type=csv(str), default=list(PASSES))
    ap.add_argument("--dtypes", type=csv(str), default=["float32"],
                    help="float32 (default), bfloat16, float16 (the last two PyTorch only)")
    ap.add_argument("--batches", type=csv(int), default=[1, 8])
    ap.add_argument("--resolution", type=int, default=224, help="input H = W (bench_network's MEMFMT_BENCH_RESOLUTION)")
    ap.add_argument("--frames", type=int, default=16, help="input D of r3d_18")
    ap.add_argument("--match", action="append", help="memfmt benchmark JSON: run its BM_network cases")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--reps", type=int, default=10, help="timed passes per case (fewer after --case-seconds)")
    ap.add_argument("--case-seconds", type=float, default=5.0)
    ap.add_argument("--time-limit", type=float, default=0, help="seconds for the whole run; 0: none")
    ap.add_argument("--optimizer", choices=["sgd", "none"], default="sgd")
    ap.add_argument("--onnx-dir", default="onnx", help="where the exported ONNX files are written and reused")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--export-only", action="store_true",
                    help="only write the ONNX files of the float32 inference cases (for bench_network's ONNX rows)")
    ap.add_argument("--out", help="JSON file to write")
    a = ap.parse_args()
    if a.runners is None:
        a.runners = list(CUDA_RUNNERS if a.device == "cuda" else RUNNERS)
    if a.threads < 1 or a.resolution < 1 or a.frames < 1 or a.reps < 1 or a.warmup < 0:
        ap.error(f"--threads {a.threads}, --resolution {a.resolution}, --frames {a.frames}, --reps {a.reps} "
                 f"must be positive and --warmup {a.warmup} not negative")
    for name, got, known in (("--models", a.models, MODELS), ("--runners", a.runners, RUNNERS + CUDA_RUNNERS),
                             ("--passes", a.passes, PASSES), ("--dtypes", a.dtypes, ["float32", "bfloat16", "float16"])):
        bad = [v for v in got if v not in known]
        if bad:
            ap.error(f"{name}: unknown {', '.join(bad)} (known: {', '.join(known)})")
    if torch is None:
        print("bench_peers: PyTorch is not importable by " + sys.executable +
              " (Debian: apt-get install python3-torch python3-torchvision); nothing to run", file=sys.stderr)
        return 3

    torch.set_num_threads(a.threads)
    import torchvision

    gpu = None
    if any(r in CUDA_RUNNERS for r in a.runners):
        if not torch.cuda.is_available():
            print(f"bench_peers: {', '.join(r for r in a.runners if r in CUDA_RUNNERS)} need a CUDA device, and "
                  f"torch {torch.__version__} sees none", file=sys.stderr)
            return 3
        torch.backends.cudnn.benchmark = True  # PyTorch's fastest cuDNN algorithms, as its users run
        gpu = torch.cuda.get_device_name(0)

    if a.export_only:
        return export_only(a)

    notes = []
    have_ort = False
    ort_version = None
    if "onnxruntime" in a.runners:
        try:
            import onnxruntime
            import numpy  # noqa: F401  (onnxruntime's inputs)
            have_ort, ort_version = True, onnxruntime.__version__
        except ImportError as e:
            notes.append(f"onnxruntime: not importable by {sys.executable} ({e}); pip install onnxruntime")

    rows = []
    start = time.perf_counter()
    cases = plan(a)
    models = {}
    for i, case in enumerate(cases):
        bad_res = check_resolution(case["model"], case["resolution"])
        if case["model"] not in MODELS:
            bad_res = f"unknown model {case['model']}"
        for runner in a.runners:
            row = dict(case, runner=runner, run_type="iteration", time_unit="ms",
                       name=f"BM_peer/{case['model']}/{case['dtype']}/{case['pass']}/{runner}/batch:{case['batch']}")
            why = bad_res
            if why is None and runner == "onnxruntime":
                if not have_ort:
                    why = "onnxruntime not installed"
                elif case["pass"] != "inference":
                    why = "the onnxruntime CPU package runs inference only"
                elif case["dtype"] != "float32":
                    why = "ONNX files are exported in float32 only"
            if why is None and a.time_limit and time.perf_counter() - start > a.time_limit:
                why = f"time limit of {a.time_limit:g} s spent (a longer --time-limit, or bench.sh --full, runs it)"
            if why is None:
                try:
                    if runner == "onnxruntime":
                        med, reps = ort_case(case, a, notes)
                    else:
                        if case["model"] not in models:
                            models.clear()  # one model at a time: vgg16_bn alone is 0.5 GB of weights
                            torch.manual_seed(a.seed)
                            models[case["model"]] = build(case["model"])
                        med, reps = pytorch_case(models[case["model"]], case, runner, a)
                    row.update(ms_per_batch=med * 1e3, real_time=med * 1e3, images_per_s=case["batch"] / med,
                               reps=reps)
                except Exception as e:  # a peer's failure is a row with its reason, not the end of the run
                    why = f"{type(e).__name__}: {e}".splitlines()[0][:300]
            if why is not None:
                row.update(error_occurred=True, error_message="skipped: " + why)
            rows.append(row)
            done = (f"{row['ms_per_batch']:.1f} ms/batch, {row['images_per_s']:.2f} images/s ({row['reps']} reps)"
                    if why is None else row["error_message"])
            print(f"[peers {i + 1}/{len(cases)}] {case['model']} {case['dtype']} {case['pass']} batch {case['batch']} "
                  f"{case['resolution']}px {runner}: {done}", flush=True)

    out = {"context": {"date": datetime.datetime.now().isoformat(timespec="seconds"), "host_name": socket.gethostname(),
                       "executable": "bench_peers.py", "num_cpus": os.cpu_count(), "threads": a.threads,
                       "torch": torch.__version__, "torchvision": torchvision.__version__, "onnxruntime": ort_version,
                       "gpu": gpu, "cudnn": torch.backends.cudnn.version() if gpu else None,
                       "notes": notes},
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
