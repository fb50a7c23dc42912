#!/usr/bin/env python3
"""Summarise memfmt's Google Benchmark JSON output: NCHW vs NHWC per layer, conversion vs memcpy.

Reads the JSON files written with --benchmark_out and prints, for every benchmark whose name has a
format component (nchw/nhwc/ncdhw/ndhwc), a row: layer, NCHW, NHWC, ratio (NHWC/NCHW throughput),
winner. Conversion benchmarks report their ratio_to_memcpy counter. Writes summary.md,
summary.json and, with matplotlib (Debian python3-matplotlib; without it the charts are skipped
with the reason printed), ratios.png (NHWC/NCHW per layer) and networks.png (images/s per network,
pass and batch by policy, the ONNX import's policies and peer) into --out.

Pairing rule: two benchmarks are the same case when their names are equal after the format
component is removed. Throughput is the first counter whose name contains "FLOP" (GFLOP/s) or,
failing that, 1 / real_time.

Whole-network benchmarks (BM_network/<model>/<dtype>/<pass>/<policy>, counters images_per_s and
optionally ms_per_batch (ms_per_step on training rows), conversions, conversion_ms, arena_bytes,
calibration_s) are kept out of that table and get their own: policy, ms/batch, images/s,
conversions, conversion ms, arena MB, calibration s, speed vs the same network's channels-first
policy (nchw or channels_first; JSON key "network"). BM_network/onnx:<model>/... rows (memfmt
running the ONNX file ONNX Runtime runs) are their own network there and join the peers of <model>. fwd and inference, train and training, f32 and
float32 name the same thing; the batch is a "batch" counter, a "batch:N" name component or
"batch N" in the label.

Peers (benchmarks/peers/bench_peers.py's BM_peer/<model>/<dtype>/<pass>/<runner>/batch:<N> rows:
pytorch_nchw, pytorch_channels_last, onnxruntime) are listed (JSON key "peers") and joined with the
network rows of the same model, dtype, pass, batch and resolution: ratio_vs_<runner> = memfmt
images/s / the peer's (> 1: memfmt faster; JSON key "network_vs_peers", with "note" saying why a
ratio is missing).

The engines table (JSON "engines", only where bench_peers.py's rows include its "memfmt" runner: memfmt's
command line on the ONNX file, taken in turns with the peers, each in its own process): per model, dtype,
pass, batch and resolution memfmt's images/s, each engine's (pytorch_nchw, pytorch_channels_last,
pytorch_compile, onnxruntime, openvino), ratio_vs_<engine> = memfmt / the engine, the fastest engine
and memfmt over it, the reasons of rows that did not run ("unsupported on this CPU (...)" stays a
row); the versions each engine's rows recorded ("engine_versions"); and where the "memfmt_passive"
runner ran (bench.sh --omp-passive), memfmt under OMP_WAIT_POLICY=PASSIVE over its default waiting
("omp_wait"). The goals take both ratios from this table where it has the case. engines.png draws
memfmt / each engine per network and batch, a panel per dtype.

The calibrated plan (policy optimal_calibrated) is checked per network run against the priors'
plan (optimal), all_channels_last and pytorch_eager: ratio = calibrated images/s / the other's, and
it holds when the ratio is >= 1 - --noise-margin (default 0.05) against optimal and
all_channels_last (JSON "calibration", per model "calibration_by_model"). The goals (JSON "goals"):
ResNet-50 and MobileNetV2, float32 inference, batch 1 and 8: memfmt's planned row
(optimal_calibrated where it ran, else optimal) / PyTorch channels_last >= 1.2, and the ONNX
import's planned row / ONNX Runtime >= 1.0; "met" is None where a side did not run.

GPU networks (bench_network_cudnn's BM_network_cudnn/<model>/<dtype>/<pass>/<policy> rows) stay out of
the tables above and get their own, only where such rows exist (JSON "gpu_network"): images/s per
policy, NHWC/NCHW (all_channels_last / all_channels_first images/s) and the fastest policy per run;
per model and batch the training steps' NHWC/NCHW per dtype ("gpu_training_speedup"); and the
headline, ResNet-50 training at the largest batch, channels-last against channels-first per dtype
("gpu_headline"), with the reason where a side did not run. PyTorch on the same GPU
(bench_peers.py --device cuda: runners pytorch_cuda_nchw, pytorch_cuda_channels_last) joins each
run of the same model, dtype, pass, batch and resolution: its images/s ("pytorch") and
ratio_vs_<runner> = memfmt's planned row (optimal_calibrated where it ran, else optimal) / the peer's.

The planner's own time (bench_planner's BM_solve_explain/<blocks>/<family> rows: graph::solve and
explain's text on models::bottleneck_chain networks; family 0 the default priors, 1 batch norm
indifferent) gets a Planner table, only where such rows exist (JSON "planner"): family, nodes, CPU ms
per solve + explain and ms per 1,000 nodes.

The machine's load per stage (scripts/bench.sh's machine_load.json: seconds, the share of all
cores' time other processes used, the share the hypervisor stole) gets its own table (JSON
"machine_load"); a stage over BUSY_OTHERS or BUSY_STEAL is marked busy, and the goals whose ratios
rest on a busy network or peer stage say so in their note (JSON "machine_busy"): such a ratio compares
runs made under different loads.

A benchmark that did not run (Google Benchmark's error_occurred) keeps its row: its numbers are
empty and its "status" says why, e.g. "unsupported on this CPU (needs avx512_core)" where the
backend refused an element type the CPU cannot compute in; rows that ran have status "ok".
"""
import argparse
import json
import math
import os
import re
import sys

CHANNELS_FIRST = {"nchw", "ncdhw"}
CHANNELS_LAST = {"nhwc", "ndhwc"}


def read_json(paths):
    """(path, parsed document) for each file; one that cannot be read or parsed is named and skipped."""
    docs = []
    for p in paths:
        try:
            with open(p) as f:
                docs.append((p, json.load(f)))
        except (OSError, ValueError) as e:
            print(f"summarize: skipping {p}: {e}", file=sys.stderr)
    return docs


def load(docs):
    """The benchmark rows of the documents (aggregates other than the median left out)."""
    rows = []
    for p, data in docs:
        for b in data.get("benchmarks", []) if isinstance(data, dict) else []:
            if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
                continue
            b["_file"] = os.path.basename(p)
            rows.append(b)
    return rows


# A stage is busy when other processes used more than this share of all cores' time, or the
# hypervisor stole more than this share: its timings then measure the neighbours as well.
BUSY_OTHERS = 0.10
BUSY_STEAL = 0.05
# The stages whose timings the goals' ratios compare (bench.sh's stage names).
RATIO_STAGES = ("bench_network", "bench_peers", "bench_network onnx", "engines")


MACHINE_LOAD_FORMAT = "memfmt.machine_load"


def machine_load(docs):
    """bench.sh's per-stage load rows (its machine_load.json: {"format": MACHINE_LOAD_FORMAT,
    "machine_load": [...]}; an earlier summary.json among the inputs is not one), each marked busy or not."""
    out = []
    for _, data in docs:
        if not isinstance(data, dict) or data.get("format") != MACHINE_LOAD_FORMAT:
            continue
        for r in data.get("machine_load", []):
            r = dict(r)
            r["busy"] = r.get("others_cpu_share", 0) > BUSY_OTHERS or r.get("steal_share", 0) > BUSY_STEAL
            out.append(r)
    return out


def busy_note(load):
    """The note a ratio gets when a stage it rests on was busy; "" when none was."""
    busy = [r for r in load if r["busy"] and r["stage"] in RATIO_STAGES]
    if not busy:
        return ""
    return "machine busy during " + ", ".join(
        f"{r['stage']} (others {r['others_cpu_share']:.0%}, steal {r['steal_share']:.0%})" for r in busy) + \
        ": the ratio compares runs under different loads"


def status(b):
    """"ok", or why the benchmark did not run (the backend's refusal of a dtype this CPU lacks)."""
    if not b.get("error_occurred"):
        return "ok"
    msg = b.get("error_message", "")
    m = re.search(r"needs (\w+)\b.* on this CPU", msg)
    if m:
        return f"unsupported on this CPU (needs {m.group(1)})"
    return "error: " + msg


def throughput(b):
    for want in ("FLOP", "GB/S"):
        for k, v in b.items():
            if isinstance(v, (int, float)) and want in k.upper() and not k.startswith("ratio"):
                return float(v), k
    t = b.get("real_time")
    return (1.0 / t if t else float("nan")), "1/time"


def split_format(name):
    parts = name.split("/")
    for i, p in enumerate(parts):
        if p in CHANNELS_FIRST or p in CHANNELS_LAST:
            return "/".join(parts[:i] + parts[i + 1:]), p
    return None, None


def conv_pairs(rows):
    pairs = {}
    order = []
    for b in rows:
        base, fmt = split_format(clean(b["name"]))
        if base is None:
            continue
        if base not in pairs:
            pairs[base] = {}
            order.append(base)
        if "overhead_pct_median" in b or "images_per_s" in b or b["name"].startswith("BM_network/"):
            continue
        side = "cf" if fmt in CHANNELS_FIRST else "cl"
        pairs[base][side] = b
    out = []
    for base in order:
        p = pairs[base]
        if "cf" not in p or "cl" not in p:
            continue
        why = [s for s in (status(p["cf"]), status(p["cl"])) if s != "ok"]
        if why:
            out.append({"case": base, "nchw": None, "nhwc": None, "unit": None, "ratio_nhwc_over_nchw": None,
                        "winner": None, "impl_nchw": "", "impl_nhwc": "", "status": why[0]})
            continue
        cf, unit = throughput(p["cf"])
        cl, _ = throughput(p["cl"])
        ratio = cl / cf if cf > 0 else float("nan")
        out.append({
            "case": base,
            "nchw": cf,
            "nhwc": cl,
            "unit": unit,
            "ratio_nhwc_over_nchw": ratio,
            "winner": "NHWC" if ratio > 1.0 else "NCHW",
            "impl_nchw": p["cf"].get("label", ""),
            "impl_nhwc": p["cl"].get("label", ""),
            "status": "ok",
        })
    return out


def overhead_rows(rows):
    """BM_overhead/...: this library's wrapper vs a direct backend call, timed alternately in one run."""
    out = []
    for b in rows:
        if "overhead_pct_median" in b and not b.get("error_occurred"):
            out.append({"case": clean(b["name"]), "wrapper_ms": b.get("wrapper_ms_median", float("nan")),
                        "direct_ms": b.get("direct_ms_median", float("nan")),
                        "overhead_pct_median": b["overhead_pct_median"],
                        "overhead_pct_min": b.get("overhead_pct_min", float("nan"))})
    return out


REFERENCE_POLICIES = ("nchw", "channels_first", "all_channels_first", "ncdhw")
PASS_NAMES = {"fwd": "inference", "forward": "inference", "inference": "inference", "infer": "inference",
              "train": "training", "training": "training", "fwd_bwd": "training", "train_step": "training"}
DTYPE_NAMES = {"f32": "float32", "fp32": "float32", "float32": "float32", "bf16": "bfloat16",
               "bfloat16": "bfloat16", "f16": "float16", "fp16": "float16", "float16": "float16"}
PEERS = ("pytorch_nchw", "pytorch_channels_last", "onnxruntime")
GPU_PEERS = ("pytorch_cuda_nchw", "pytorch_cuda_channels_last")


def is_peer(b):
    return b["name"].startswith("BM_peer/")


def base_model(model):
    """The model a network row runs, with an ONNX-import marker dropped: resnet50_onnx joins resnet50."""
    for affix in ("onnx_", "onnx:", "onnx-"):
        if model.startswith(affix):
            return model[len(affix):]
    for affix in ("_onnx", ":onnx", "-onnx", ".onnx"):
        if model.endswith(affix):
            return model[:-len(affix)]
    return model


def network_case(b):
    """model, dtype, pass, batch, resolution and policy of a BM_network/<model>/<dtype>/<pass>/<policy> row.

    dtype and pass come out in the peers' spelling (float32, inference/training). The batch is a
    "batch" counter, a "batch:N" or plain-number name component, or "batch N" in the label; the
    resolution (and frames of a 3-D net) a "resolution" ("frames") counter or "RxR" ("FxRxR") in the
    label; None where the row does not say.
    """
    parts = clean(b["name"]).split("/")
    if len(parts) < 5:
        return None
    extra = parts[5:]
    batch = b.get("batch")
    if batch is None:
        for p in extra:
            m = re.fullmatch(r"(?:batch:|b)?(\d+)", p)
            if m:
                batch = int(m.group(1))
    label = b.get("label", "") or ""
    if batch is None:
        m = re.search(r"\bbatch (\d+)", label)
        batch = int(m.group(1)) if m else None
    res, frames = b.get("resolution"), b.get("frames")
    m = re.search(r"\b(?:(\d+)x)?(\d+)x(\d+)\b", label)
    if res is None and m:
        res = int(m.group(3))
    if frames is None and m and m.group(1):
        frames = int(m.group(1))
    return {"model": parts[1], "dtype": DTYPE_NAMES.get(parts[2], parts[2]), "pass": PASS_NAMES.get(parts[3], parts[3]),
            "batch": int(batch) if batch is not None else None, "resolution": int(res) if res is not None else None,
            "frames": int(frames) if frames is not None else None, "policy": parts[4]}


def milliseconds(b, field="real_time"):
    """Google Benchmark's real_time (or cpu_time) of a row in ms, whatever its time_unit."""
    scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}.get(b.get("time_unit", "ns"), float("nan"))
    return b.get(field, float("nan")) * scale


def ms_per_batch(b, batch):
    """The ms_per_batch (ms_per_step) counter, else batch / images_per_s, else Google Benchmark's real_time."""
    for counter in ("ms_per_batch", "ms_per_step"):
        if counter in b:
            return b[counter]
    if batch and b.get("images_per_s"):
        return batch / b["images_per_s"] * 1e3
    return milliseconds(b)


GPU_NETWORK = "BM_network_cudnn/"


def is_gpu_network(b):
    return b["name"].startswith(GPU_NETWORK)


def network_rows(rows, gpu=False):
    """BM_network/<model>/<dtype>/<pass>/<policy>: one row per policy, compared with its nchw run.
    gpu: bench_network_cudnn's BM_network_cudnn/... rows instead (kept out of the CPU table)."""
    groups = {}
    order = []
    for b in rows:
        if is_peer(b) or is_gpu_network(b) != gpu:
            continue
        if "images_per_s" not in b and not b["name"].startswith(("BM_network/", GPU_NETWORK)):
            continue
        case = network_case(b)
        if case is None:
            continue
        parts = clean(b["name"]).split("/")
        # Grouped by what the row runs, so fwd/nchw and inference/optimal of one network compare.
        key = (case["model"], case["dtype"], case["pass"], case["batch"], case["resolution"])
        if key not in groups:
            groups[key] = {}
            order.append(key)
        groups[key][case["policy"]] = (b, case, "/".join(parts[:4] + parts[5:]))
    out = []
    for key in order:
        ref = next((groups[key][p][0] for p in REFERENCE_POLICIES if p in groups[key]), None)
        for variant, (b, case, base) in groups[key].items():
            row = {"case": base, "variant": variant, **case, "ms_per_batch": None, "images_per_s": None,
                   "conversions": None, "conversion_ms": None, "arena_bytes": None, "calibration_s": None,
                   "speed_vs_nchw": None, "label": "", "status": status(b)}
            if row["status"] != "ok":
                out.append(row)
                continue
            ms = ms_per_batch(b, case["batch"])
            ref_ms = ms_per_batch(ref, case["batch"]) if ref and status(ref) == "ok" else float("nan")
            row.update(plan_id=b.get("plan_id"), ms_per_batch=ms, images_per_s=b["images_per_s"], conversions=b.get("conversions", float("nan")),
                       conversion_ms=b.get("conversion_ms", float("nan")), arena_bytes=b.get("arena_bytes", float("nan")),
                       calibration_s=b.get("calibration_s"), speed_vs_nchw=ref_ms / ms if ms and ms > 0 else float("nan"), label=b.get("label", ""))
            out.append(row)
    return out


# The GPU network table (bench_network_cudnn): images/s per policy, channels-last over
# channels-first, and the training speedup of channels-last per dtype; the headline is ResNet-50
# training.
GPU_POLICIES = ("all_channels_first", "all_channels_last", "pytorch_eager", "optimal", "optimal_calibrated")
GPU_DTYPES = ("float32", "float16", "bfloat16")
HEADLINE_MODEL = "resnet50"


# Two policies that plan the same formats and conversions (bench_network's plan_id) run the same
# work; their times differ only by how fast the machine was at each moment. A spread over this
# says the run's ratios at that size are noise.
SAME_PLAN_SPREAD = 1.10


def same_plan_spread(nets, limit=SAME_PLAN_SPREAD):
    """Rows of one network, dtype, pass and batch that ran the same plan under different policies:
    slowest ms / fastest ms, and whether it stays within `limit`."""
    groups = {}
    for n in nets:
        if n["status"] != "ok" or n.get("plan_id") is None or not n["ms_per_batch"]:
            continue
        key = (n["model"], n["dtype"], n["pass"], n["batch"], n["resolution"], n["plan_id"])
        groups.setdefault(key, []).append(n)
    out = []
    for (model, dtype, pas, batch, _res, _id), rows in groups.items():
        if len(rows) < 2:
            continue
        fast = min(rows, key=lambda r: r["ms_per_batch"])
        slow = max(rows, key=lambda r: r["ms_per_batch"])
        spread = slow["ms_per_batch"] / fast["ms_per_batch"]
        out.append({"model": model, "dtype": dtype, "pass": pas, "batch": batch,
                    "policies": sorted(r["variant"] for r in rows), "fastest_ms": fast["ms_per_batch"],
                    "slowest_ms": slow["ms_per_batch"], "spread": spread, "consistent": spread <= limit})
    return out


def cl_over_cf(group):
    """all_channels_last images/s / all_channels_first's where both ran, else None."""
    cf, cl = group.get("all_channels_first"), group.get("all_channels_last")
    if cf and cl and cf["status"] == "ok" and cl["status"] == "ok" and cf["images_per_s"]:
        return cl["images_per_s"] / cf["images_per_s"]
    return None


def why_not(group, policies):
    """The distinct reasons the given policies' rows did not run (or that they are missing)."""
    notes = []
    for p in policies:
        r = group.get(p)
        why = "no row" if r is None else (None if r["status"] == "ok" else r["status"])
        if why and why not in notes:
            notes.append(why)
    return "; ".join(notes)


def gpu_network(gpu_nets, peers=()):
    """Per GPU network run (model, dtype, pass, batch, resolution): images/s per policy, the
    all_channels_last / all_channels_first ratio (None where a side did not run), the fastest policy,
    and PyTorch on the GPU (GPU_PEERS rows of peers): its images/s and the planned row / its images/s."""
    groups, order = {}, []
    for n in gpu_nets:
        key = (n["model"], n["dtype"], n["pass"], n["batch"], n["resolution"])
        if key not in groups:
            groups[key] = {}
            order.append(key)
        groups[key][n["policy"]] = n
    out = []
    for key in order:
        g = groups[key]
        ran = {p: r["images_per_s"] for p, r in g.items() if r["status"] == "ok" and r["images_per_s"]}
        best = max(ran, key=ran.get) if ran else None
        cf = ran.get("all_channels_first")
        planned = next((p for p in (CALIBRATED, "optimal") if p in ran), None)
        torch_ips, ratios = {}, {}
        for runner in GPU_PEERS:
            match = [p for p in peers if p["runner"] == runner and p["model"] == base_model(key[0])
                     and p["dtype"] == key[1] and p["pass"] == key[2] and p["batch"] == key[3]
                     and (key[4] is None or p["resolution"] == key[4]) and p["status"] == "ok"]
            if match:
                torch_ips[runner] = match[-1]["images_per_s"]
                ratios["ratio_vs_" + runner] = ran[planned] / torch_ips[runner] if planned and torch_ips[runner] else None
        out.append({"model": key[0], "dtype": key[1], "pass": key[2], "batch": key[3], "resolution": key[4],
                    "images_per_s": {p: ran.get(p) for p in GPU_POLICIES if p in g},
                    "nhwc_over_nchw": cl_over_cf(g), "best_policy": best,
                    "best_over_nchw": ran[best] / cf if best and cf else None,
                    "planned_policy": planned, "pytorch": torch_ips,
                    **{"ratio_vs_" + r: ratios.get("ratio_vs_" + r) for r in GPU_PEERS},
                    "note": why_not(g, [p for p in GPU_POLICIES if p in g]),
                    "_group": g})
    return out


def gpu_training_speedup(runs):
    """Per model and batch of the training runs: all_channels_last / all_channels_first images/s per dtype."""
    out, index = [], {}
    for t in runs:
        if t["pass"] != "training":
            continue
        key = (t["model"], t["batch"], t["resolution"])
        if key not in index:
            index[key] = {"model": t["model"], "batch": t["batch"], "resolution": t["resolution"],
                          "speedup": {}, "notes": {}}
            out.append(index[key])
        index[key]["speedup"][t["dtype"]] = t["nhwc_over_nchw"]
        if t["nhwc_over_nchw"] is None:
            index[key]["notes"][t["dtype"]] = why_not(t["_group"], ("all_channels_first", "all_channels_last"))
    return out


def gpu_headline(runs):
    """ResNet-50 training at the largest batch that has rows: channels-last vs channels-first images/s
    per dtype, with the reason where a side did not run; None without ResNet-50 training rows."""
    training = [t for t in runs if t["model"] == HEADLINE_MODEL and t["pass"] == "training"]
    if not training:
        return None
    batch = max((t["batch"] for t in training if t["batch"] is not None), default=None)
    out = {"model": HEADLINE_MODEL, "pass": "training", "batch": batch, "dtypes": []}
    for t in sorted((t for t in training if t["batch"] == batch),
                    key=lambda t: GPU_DTYPES.index(t["dtype"]) if t["dtype"] in GPU_DTYPES else 9):
        g = t["_group"]
        ips = {p: g[p]["images_per_s"] if p in g and g[p]["status"] == "ok" else None
               for p in ("all_channels_first", "all_channels_last")}
        out["dtypes"].append({"dtype": t["dtype"], "channels_first_images_per_s": ips["all_channels_first"],
                              "channels_last_images_per_s": ips["all_channels_last"], "ratio": t["nhwc_over_nchw"],
                              "note": "" if t["nhwc_over_nchw"] is not None
                              else why_not(g, ("all_channels_first", "all_channels_last"))})
    return out


def short(text, width=120):
    return text if len(text) <= width else text[:width - 3] + "..."


def gpu_markdown(runs, speedup, headline):
    md = ["\n## GPU (cuDNN) whole networks: images/s per policy (bench_network_cudnn; NHWC/NCHW: "
          "all_channels_last / all_channels_first)\n"]
    if headline:
        for d in headline["dtypes"]:
            what = (f"channels-last {fmt(d['channels_last_images_per_s'])} images/s vs channels-first "
                    f"{fmt(d['channels_first_images_per_s'])}: {fmt(d['ratio'])}x" if d["ratio"] is not None
                    else "not measured: " + short(d["note"], 200))
            md.append(f"**Headline: ResNet-50 training on the GPU, batch {headline['batch']}, {d['dtype']}**: {what}  ")
        md.append("")
    md.append(table(["network", "dtype", "pass", "batch"] + list(GPU_POLICIES) + ["NHWC/NCHW", "best", "note"],
                    [[t["model"], t["dtype"], t["pass"], t["batch"]] + [t["images_per_s"].get(p) for p in GPU_POLICIES]
                     + [t["nhwc_over_nchw"], t["best_policy"], short(t["note"])] for t in runs]))
    with_torch = [t for t in runs if t["pytorch"]]
    if with_torch:
        md.append("\n## GPU: memfmt vs PyTorch on the same GPU (memfmt's planned row images/s / PyTorch's: "
                  "> 1 is memfmt faster)\n")
        md.append(table(["network", "dtype", "pass", "batch", "memfmt plan", "memfmt images/s", "PyTorch NCHW images/s",
                         "PyTorch channels_last images/s", "vs PyTorch NCHW", "vs PyTorch channels_last"],
                        [[t["model"], t["dtype"], t["pass"], t["batch"], t["planned_policy"],
                          t["images_per_s"].get(t["planned_policy"]) if t["planned_policy"] else None]
                         + [t["pytorch"].get(r) for r in GPU_PEERS] + [t["ratio_vs_" + r] for r in GPU_PEERS]
                         for t in with_torch]))
    if speedup:
        md.append("\n## GPU training: channels-last speedup (all_channels_last / all_channels_first images/s)\n")
        md.append(table(["network", "batch"] + list(GPU_DTYPES) + ["note"],
                        [[s["model"], s["batch"]] + [s["speedup"].get(d) for d in GPU_DTYPES]
                         + [short("; ".join(f"{d}: {w}" for d, w in s["notes"].items()))] for s in speedup]))
    return md


def peer_rows(rows):
    """bench_peers.py's rows (BM_peer/<model>/<dtype>/<pass>/<runner>/batch:<N>); later files win."""
    out = {}
    for b in rows:
        if not is_peer(b):
            continue
        key = (b.get("model"), b.get("dtype"), b.get("pass"), b.get("batch"), b.get("resolution"), b.get("runner"))
        out[key] = {"model": b.get("model"), "dtype": b.get("dtype"), "pass": b.get("pass"), "batch": b.get("batch"),
                    "resolution": b.get("resolution"), "frames": b.get("frames"), "runner": b.get("runner"),
                    "version": b.get("version"), "threads": b.get("threads"), "wait_policy": b.get("wait_policy"),
                    "ms_per_batch": None if b.get("error_occurred") else b.get("ms_per_batch"),
                    "images_per_s": None if b.get("error_occurred") else b.get("images_per_s"),
                    "rounds": b.get("rounds"), "round_ms_per_batch": b.get("round_ms_per_batch"),
                    **{k: b[k] for k in ("plan", "conversions", "compile_s") if k in b},
                    "status": "ok" if not b.get("error_occurred") else b.get("error_message", "error")}
    return list(out.values())


def missing_peer(n, peers):
    """Why no peer joins network row n: the first of its attributes that no peer row of the model has."""
    same = [p for p in peers if p["model"] == base_model(n["model"])]
    for attr in ("dtype", "pass", "batch", "resolution", "frames"):
        if n[attr] is not None:
            narrower = [p for p in same if p[attr] == n[attr]]
            if not narrower:
                return f"no peer ran {attr} {n[attr]}"
            same = narrower
    return "no peer ran this case"


def network_vs_peers(nets, peers):
    """Each memfmt network row with the peers of the same model, dtype, pass and batch (and resolution
    and frames where the row states them): ratio_vs_<runner> = memfmt images/s / the peer's images/s (> 1: memfmt
    faster); None where the peer has no row or did not run."""
    out = []
    for n in nets:
        row = {k: n[k] for k in ("model", "dtype", "pass", "batch", "resolution", "policy", "images_per_s",
                                 "conversions", "conversion_ms", "arena_bytes", "status")}
        row["peers"] = {}
        notes = []
        for runner in PEERS:
            match = [p for p in peers if p["runner"] == runner and p["model"] == base_model(n["model"])
                     and p["dtype"] == n["dtype"] and p["pass"] == n["pass"] and p["batch"] == n["batch"]
                     and (n["resolution"] is None or p["resolution"] == n["resolution"])
                     and (n["frames"] is None or p["frames"] == n["frames"])]
            peer = match[-1] if match else None
            row["peers"][runner] = peer["images_per_s"] if peer else None
            ok = peer and peer["status"] == "ok" and n["status"] == "ok" and peer["images_per_s"]
            row["ratio_vs_" + runner] = n["images_per_s"] / peer["images_per_s"] if ok else None
            if peer and peer["status"] != "ok":
                notes.append(f"{runner} {peer['status']}")
        if n["status"] != "ok":
            notes.insert(0, "memfmt " + n["status"])
        elif not any(row["peers"].values()):
            notes.append(missing_peer(n, peers))
        row["note"] = "; ".join(notes)
        if any(v is not None for v in row["peers"].values()) or any(
                p["model"] == base_model(n["model"]) for p in peers):
            out.append(row)
    return out


# The engines table (bench_peers.py's rounds in turns, each engine in its own process): memfmt's
# command line on the ONNX file against PyTorch 2.x, torch.compile, ONNX Runtime and OpenVINO.
MEMFMT_RUNNER = "memfmt"
MEMFMT_PASSIVE = "memfmt_passive"
ENGINE_PEERS = ("pytorch_nchw", "pytorch_channels_last", "pytorch_compile", "onnxruntime", "openvino")
RUNNER_TITLES = {"memfmt": "memfmt", "memfmt_passive": "memfmt, OMP_WAIT_POLICY=PASSIVE",
                 "pytorch_nchw": "PyTorch eager NCHW", "pytorch_channels_last": "PyTorch eager channels_last",
                 "pytorch_compile": "torch.compile", "onnxruntime": "ONNX Runtime", "openvino": "OpenVINO"}


def engine_versions(peers):
    """Per runner of the engines table, the versions its rows recorded (usually one)."""
    out = {}
    for p in peers:
        if p["runner"] in (MEMFMT_RUNNER, MEMFMT_PASSIVE) + ENGINE_PEERS and p.get("version"):
            out.setdefault(p["runner"], [])
            if p["version"] not in out[p["runner"]]:
                out[p["runner"]].append(p["version"])
    return out


def engines(peers):
    """Per case (model, dtype, pass, batch, resolution) that has a memfmt runner row: memfmt's images/s,
    each peer's, ratio_vs_<peer> = memfmt / the peer (> 1: memfmt faster; None where either did not run),
    the fastest peer that ran and memfmt over it, and why a side did not run ("note")."""
    groups, order = {}, []
    for p in peers:
        key = (p["model"], p["dtype"], p["pass"], p["batch"], p["resolution"])
        if key not in groups:
            groups[key] = {}
            order.append(key)
        groups[key][p["runner"]] = p
    out = []
    for key in order:
        g = groups[key]
        if MEMFMT_RUNNER not in g:
            continue
        m = g[MEMFMT_RUNNER]
        mine = m["images_per_s"] if m["status"] == "ok" else None
        row = {"model": key[0], "dtype": key[1], "pass": key[2], "batch": key[3], "resolution": key[4],
               "memfmt": mine, "memfmt_plan": m.get("plan"), "memfmt_status": m["status"], "peers": {},
               "status": {}}
        notes = [] if mine else ["memfmt " + m["status"]]
        best = None
        for runner in ENGINE_PEERS:
            p = g.get(runner)
            ips = p["images_per_s"] if p and p["status"] == "ok" else None
            row["peers"][runner] = ips
            row["status"][runner] = p["status"] if p else "no row"
            row["ratio_vs_" + runner] = mine / ips if mine and ips else None
            if p and p["status"] != "ok":
                notes.append(f"{RUNNER_TITLES[runner]}: {p['status']}")
            if ips and (best is None or ips > row["peers"][best]):
                best = runner
        row["best_peer"] = best
        row["ratio_vs_best_peer"] = row["ratio_vs_" + best] if best else None
        pas = g.get(MEMFMT_PASSIVE)
        if pas is not None:
            passive = pas["images_per_s"] if pas["status"] == "ok" else None
            row["memfmt_passive"] = passive
            row["passive_over_default"] = passive / mine if passive and mine else None
            if passive is None and pas["status"] != m["status"]:
                notes.append("memfmt passive: " + pas["status"])
        row["note"] = "; ".join(notes)
        out.append(row)
    return out


def engines_markdown(rows, versions):
    md = ["\n## memfmt vs today's engines (images/s; in brackets memfmt / the engine, > 1: memfmt faster; "
          "each engine in its own process, rounds in turns, medians)\n"]
    if versions:
        seen = []
        for r, v in versions.items():
            for one in v:
                if one not in seen:
                    seen.append(one)
        md.append("Versions: " + "; ".join(seen) + "\n")
    present = [r for r in ENGINE_PEERS if any(row["status"][r] != "no row" for row in rows)]

    def cell(row, runner):
        ips = row["peers"][runner]
        if ips is None:
            st = row["status"][runner]
            return "-" if st == "no row" else ("unsupported" if st.startswith("unsupported") else "not run")
        ratio = row["ratio_vs_" + runner]
        return fmt(ips) + (f" ({ratio:.2f}x)" if ratio is not None else "")

    for dtype in sorted({r["dtype"] for r in rows}, key=lambda d: (d != "float32", d)):
        sub = [r for r in rows if r["dtype"] == dtype]
        md.append(f"\n**{dtype}**\n")
        md.append(table(["network", "pass", "batch", "memfmt"] + [RUNNER_TITLES[r] for r in present]
                        + ["vs best engine", "note"],
                        [[r["model"], r["pass"], r["batch"], r["memfmt"] if r["memfmt"] is not None else
                          ("unsupported" if r["memfmt_status"].startswith("unsupported") else "not run")]
                         + [cell(r, p) for p in present]
                         + [f"{r['ratio_vs_best_peer']:.2f}x {RUNNER_TITLES[r['best_peer']]}"
                            if r["ratio_vs_best_peer"] is not None else "-", short(r["note"], 300)]
                         for r in sub]))
    passive = [r for r in rows if "memfmt_passive" in r]
    if passive:
        md.append("\n## memfmt's OpenMP waiting: the default against OMP_WAIT_POLICY=PASSIVE (images/s; same turns)\n")
        md.append(table(["network", "dtype", "batch", "default", "PASSIVE", "PASSIVE / default"],
                        [[r["model"], r["dtype"], r["batch"], r["memfmt"], r["memfmt_passive"],
                          r["passive_over_default"]] for r in passive]))
    return md


NOISE_MARGIN = 0.05
CALIBRATED = "optimal_calibrated"
CALIBRATION_BASELINES = ("optimal", "all_channels_last", "pytorch_eager")


def calibration_check(nets, margin=NOISE_MARGIN):
    """The planner's acceptance check: per network run (model, dtype, pass, batch, resolution) with
    an optimal_calibrated row, its images/s over the priors' optimal plan, all_channels_last and
    pytorch_eager (> 1: calibrated faster). at_least_<policy> holds when the ratio is >= 1 - margin:
    two runs of one plan differ by a few percent on a busy machine, so a calibrated plan within the
    margin counts as not slower. None where either row did not run."""
    groups = {}
    for n in nets:
        key = (n["model"], n["dtype"], n["pass"], n["batch"], n["resolution"])
        groups.setdefault(key, {})[n["variant"]] = n
    out = []
    for (model, dtype, pass_, batch, res), g in groups.items():
        cal = g.get(CALIBRATED)
        if cal is None:
            continue
        row = {"model": model, "dtype": dtype, "pass": pass_, "batch": batch, "resolution": res,
               "images_per_s": cal["images_per_s"], "calibration_s": cal["calibration_s"], "status": cal["status"]}
        for policy in CALIBRATION_BASELINES:
            other = g.get(policy)
            ok = cal["status"] == "ok" and other and other["status"] == "ok" and other["images_per_s"]
            ratio = cal["images_per_s"] / other["images_per_s"] if ok else None
            row["ratio_vs_" + policy] = ratio
            row["at_least_" + policy] = None if ratio is None else ratio >= 1.0 - margin
        checks = [row["at_least_optimal"], row["at_least_all_channels_last"]]
        row["holds"] = None if None in checks else all(checks)
        out.append(row)
    return out


def calibration_by_model(rows):
    """Per model: whether calibrated >= the priors' plan and >= all_channels_last held in every run
    that measured both (None: no run did), and which runs it failed in."""
    out = {}
    for r in rows:
        m = out.setdefault(r["model"], {"holds": None, "runs": 0, "failed": []})
        if r["holds"] is None:
            continue
        m["runs"] += 1
        if not r["holds"]:
            m["failed"].append(f"{r['dtype']} {r['pass']} batch {r['batch']}")
        m["holds"] = not m["failed"]
    return out


# The performance goals: memfmt's planned network against PyTorch channels_last, and the same ONNX
# file through memfmt's importer against ONNX Runtime; float32 inference.
GOAL_MODELS = ("resnet50", "mobilenet_v2")
GOAL_BATCHES = (1, 8)
GOAL_VS_PYTORCH_CL = 1.2
GOAL_VS_ORT = 1.0
PLANNED = (CALIBRATED, "optimal")  # the plan memfmt would run: calibrated where it ran, else the priors'


def goals(vs, busy="", eng=()):
    """Per goal model and batch: the planned memfmt row's ratio to PyTorch channels_last (goal
    GOAL_VS_PYTORCH_CL) and the ONNX import's planned row's ratio to ONNX Runtime (goal GOAL_VS_ORT).
    Where the engines table (eng: memfmt's command line and the peers in turns) has the case with a
    memfmt number, both sides come from it (memfmt "memfmt run", policy the plan it kept). met is
    None where a side did not run; note says which."""
    def planned(model, batch):
        rows = [v for v in vs if v["model"] == model and v["dtype"] == "float32" and v["pass"] == "inference"
                and v["batch"] == batch and v["status"] == "ok"]
        for policy in PLANNED:
            hit = [v for v in rows if v["policy"] == policy]
            if hit:
                return hit[-1]
        return None

    out = []
    for model in GOAL_MODELS:
        for batch in GOAL_BATCHES:
            row = {"model": model, "batch": batch}
            notes = []
            turns = [e for e in eng if e["model"] == model and e["dtype"] == "float32" and e["pass"] == "inference"
                     and e["batch"] == batch and e["memfmt"]]
            for side, memfmt_model, runner, goal in (("pytorch_channels_last", model, "pytorch_channels_last",
                                                      GOAL_VS_PYTORCH_CL),
                                                     ("onnxruntime", "onnx:" + model, "onnxruntime", GOAL_VS_ORT)):
                if turns:
                    e = turns[-1]
                    m = {"policy": e["memfmt_plan"] or "memfmt run", "images_per_s": e["memfmt"],
                         "peers": e["peers"], "ratio_vs_" + runner: e["ratio_vs_" + runner]}
                    memfmt_model = "memfmt run " + model
                else:
                    m = planned(memfmt_model, batch)
                ratio = m["ratio_vs_" + runner] if m else None
                row[side] = {"memfmt": memfmt_model, "policy": m["policy"] if m else None,
                             "memfmt_images_per_s": m["images_per_s"] if m else None,
                             "peer_images_per_s": m["peers"].get(runner) if m else None,
                             "ratio": ratio, "goal": goal, "met": None if ratio is None else ratio >= goal}
                if m is None:
                    notes.append(f"no {memfmt_model} optimal run")
                elif ratio is None:
                    notes.append(f"no {runner} run to compare")
            if busy:
                notes.append(busy)
            row["machine_busy"] = bool(busy)
            row["note"] = "; ".join(notes)
            out.append(row)
    return out


# bench_planner's network families (the second name component of its rows).
PLANNER_FAMILIES = {"0": "default priors", "1": "batch norm indifferent"}


def planner_rows(rows):
    """bench_planner's BM_solve_explain/<blocks>/<family> rows (solve() and explain()'s text, what a user
    waits for): CPU ms per call and per 1,000 nodes (its "nodes" counter), by family then size. CPU
    time, as the planner is single-threaded and a busy machine's wall time would count other work."""
    out = {}
    for b in rows:
        parts = clean(b["name"]).split("/")
        if parts[0] != "BM_solve_explain" or len(parts) < 3:
            continue
        family = PLANNER_FAMILIES.get(parts[2], parts[2])
        nodes = int(b["nodes"]) if "nodes" in b else None
        row = {"family": family, "blocks": int(parts[1]), "nodes": nodes, "solve_explain_ms": None,
               "ms_per_1000_nodes": None, "status": status(b)}
        if row["status"] == "ok":
            ms = milliseconds(b, "cpu_time")
            row.update(solve_explain_ms=ms, ms_per_1000_nodes=ms / nodes * 1000 if nodes else None)
        out[(family, row["blocks"])] = row  # a later file's run of the same case wins
    families = list(PLANNER_FAMILIES.values())
    return sorted(out.values(), key=lambda r: (families.index(r["family"]) if r["family"] in families
                                               else len(families), r["family"], r["blocks"]))


def clean(name):
    """Drops Google Benchmark's run-setting suffixes (min_time:, real_time, iterations: ...)."""
    keep = [p for p in name.split("/") if not (p.startswith(("min_time:", "iterations:", "repeats:"))
                                                or p in ("real_time", "manual_time", "process_time"))]
    return "/".join(keep)


def convert_rows(rows):
    out = []
    for b in rows:
        if "ratio_to_memcpy" in b and not b.get("error_occurred"):
            out.append({"case": clean(b["name"]), "ratio_to_memcpy": b["ratio_to_memcpy"],
                        "GB/s": b.get("GB/s", b.get("bytes_per_second", 0) / 1e9),
                        "memcpy GB/s": b.get("memcpy_GB/s"), "core-to-core ns": b.get("core_to_core_ns")})
    return out


def fmt(x):
    if x is None:
        return "-"
    if isinstance(x, float):
        if math.isnan(x):
            return "-"
        return f"{x:.3g}" if abs(x) < 100 else f"{x:.0f}"
    return str(x)


def mebibytes(b):
    return b / 2**20 if isinstance(b, (int, float)) else None


def verdict(ok):
    return "-" if ok is None else ("yes" if ok else "NO")


def table(headers, rows):
    widths = [max(len(h), *(len(fmt(r[i])) for r in rows)) for i, h in enumerate(headers)] if rows else [len(h) for h in headers]
    line = "| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths)) + " |"
    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    body = ["| " + " | ".join(fmt(c).ljust(w) for c, w in zip(r, widths)) + " |" for r in rows]
    return "\n".join([line, sep] + body)


def charts(pairs, vs_peers, nets, out, eng=()):
    """ratios.png (per-layer NHWC/NCHW), networks.png (images/s by policy and peer) and engines.png
    (memfmt / each engine per network, batch and dtype) with matplotlib; returns the files written, or
    a reason why none were."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        return [], f"charts skipped: matplotlib is not importable ({e}; Debian: python3-matplotlib)"
    written = []
    ok = [p for p in pairs if p["status"] == "ok" and p["ratio_nhwc_over_nchw"] and p["ratio_nhwc_over_nchw"] > 0]
    if ok:
        fig, ax = plt.subplots(figsize=(9, 1.2 + 0.28 * len(ok)))
        r = [p["ratio_nhwc_over_nchw"] for p in ok]
        y = range(len(ok))
        ax.barh(y, [math.log2(v) for v in r], color=["#2a7" if v >= 1 else "#c44" for v in r])
        ax.set_yticks(list(y), [p["case"] for p in ok], fontsize=7)
        ax.invert_yaxis()
        ax.axvline(0, color="black", linewidth=0.8)
        ticks = [t for t in (0.125, 0.25, 0.5, 0.8, 1, 1.25, 1.5, 2, 3, 4, 8) if min(r) / 1.2 <= t <= max(r) * 1.2] or [1]
        ax.set_xticks([math.log2(t) for t in ticks], [f"{t:g}x" for t in ticks])
        for i, v in enumerate(r):
            ax.text(math.log2(v), i, f" {v:.2f}x ", va="center", ha="left" if v >= 1 else "right", fontsize=6)
        ax.set_title("NHWC / NCHW throughput per layer (right of the line: NHWC faster)")
        fig.tight_layout()
        fig.savefig(os.path.join(out, "ratios.png"), dpi=110)
        plt.close(fig)
        written.append("ratios.png")
    groups = {}
    for n in nets:
        if n["status"] == "ok" and n["images_per_s"]:
            # The ONNX import's rows share the panel of the network they were exported from.
            key = (base_model(n["model"]), n["dtype"], n["pass"], n["batch"])
            name = n["variant"] if base_model(n["model"]) == n["model"] else "onnx import " + n["variant"]
            groups.setdefault(key, []).append((name, n["images_per_s"], "memfmt"))
    for v in vs_peers:
        key = (base_model(v["model"]), v["dtype"], v["pass"], v["batch"])
        if key in groups:
            have = {name for name, _, _ in groups[key]}
            for runner, ips in v["peers"].items():
                if ips and runner not in have:
                    groups[key].append((runner, ips, "peer"))
    if groups:
        cols = min(3, len(groups))
        rows_n = (len(groups) + cols - 1) // cols
        fig, axes = plt.subplots(rows_n, cols, figsize=(5.2 * cols, 0.6 + 2.4 * rows_n), squeeze=False)
        for ax, (key, bars) in zip(axes.flat, groups.items()):
            ax.barh(range(len(bars)), [b[1] for b in bars], color=["#37a" if b[2] == "memfmt" else "#999" for b in bars])
            ax.set_yticks(range(len(bars)), [b[0] for b in bars], fontsize=7)
            ax.invert_yaxis()
            ax.set_title("%s %s %s, batch %s" % key, fontsize=8)
            ax.set_xlabel("images/s (blue: memfmt, grey: peer)", fontsize=7)
            ax.tick_params(axis="x", labelsize=7)
        for ax in list(axes.flat)[len(groups):]:
            ax.axis("off")
        fig.tight_layout()
        fig.savefig(os.path.join(out, "networks.png"), dpi=110)
        plt.close(fig)
        written.append("networks.png")
    if engines_chart(plt, eng, os.path.join(out, "engines.png")):
        written.append("engines.png")
    return written, None if written else "charts skipped: no rows to draw"


def engines_chart(plt, eng, path):
    """One panel per dtype: per network and batch a bar per engine, memfmt's images/s over the engine's on
    a log scale (right of 1: memfmt faster). False when no ratio exists."""
    panels = []
    for dtype in sorted({e["dtype"] for e in eng}, key=lambda d: (d != "float32", d)):
        sub = [e for e in eng if e["dtype"] == dtype and e["pass"] == "inference"]
        if any(e["ratio_vs_" + r] for e in sub for r in ENGINE_PEERS):
            panels.append((dtype, sub))
    if not panels:
        return False
    colours = {"pytorch_nchw": "#bbb", "pytorch_channels_last": "#888", "pytorch_compile": "#555",
               "onnxruntime": "#37a", "openvino": "#a53"}
    height = max(len(sub) for _, sub in panels)
    fig, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 1.2 + 0.55 * height), squeeze=False)
    for ax, (dtype, sub) in zip(axes.flat, panels):
        runners = [r for r in ENGINE_PEERS if any(e["ratio_vs_" + r] for e in sub)]
        width = 0.8 / max(len(runners), 1)
        for j, r in enumerate(runners):
            ys = [i + (j - (len(runners) - 1) / 2) * width for i in range(len(sub))]
            vals = [math.log2(e["ratio_vs_" + r]) if e["ratio_vs_" + r] else 0 for e in sub]
            ax.barh(ys, vals, height=width, color=colours.get(r, "#999"), label=RUNNER_TITLES.get(r, r))
        ax.set_yticks(range(len(sub)), [f"{e['model']} b{e['batch']}" for e in sub], fontsize=7)
        ax.invert_yaxis()
        ax.axvline(0, color="black", linewidth=0.8)
        ratios = [e["ratio_vs_" + r] for e in sub for r in runners if e["ratio_vs_" + r]]
        steps = ((0.125, 0.25, 0.5, 1, 2, 4, 8, 16) if max(ratios) / min(ratios) > 4
                 else (0.5, 0.67, 0.8, 1, 1.25, 1.5, 2, 3))  # labels that do not overlap
        ticks = [t for t in steps if min(ratios) / 1.3 <= t <= max(ratios) * 1.3]
        ax.set_xticks([math.log2(t) for t in ticks or [1]], [f"{t:g}x" for t in ticks or [1]], fontsize=7)
        ax.set_title(f"memfmt / engine, {dtype} inference (right of the line: memfmt faster)", fontsize=8)
        ax.legend(fontsize=6, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json", nargs="+")
    ap.add_argument("--out", default=None, help="folder for summary.md, summary.json, ratios.png, networks.png")
    ap.add_argument("--noise-margin", type=float, default=NOISE_MARGIN,
                    help="relative slack of the calibrated-plan check (default %(default)s: within 5%% is not slower)")
    a = ap.parse_args()
    docs = read_json(a.json)
    rows = load(docs)
    pairs = conv_pairs(rows)
    conv = convert_rows(rows)
    over = []
    md = []
    if pairs:
        units = sorted({p["unit"] for p in pairs if p["unit"]})
        md.append("## NCHW vs NHWC (throughput: %s)\n" % (", ".join(units) or "-"))
        md.append(table(["layer", "NCHW", "NHWC", "unit", "NHWC/NCHW", "winner"],
                        [[p["case"], p["nchw"], p["nhwc"], p["unit"], p["ratio_nhwc_over_nchw"],
                          p["winner"] if p["status"] == "ok" else p["status"]] for p in pairs]))
    nets = network_rows(rows)
    if nets:
        md.append("\n## Whole network: NCHW vs NHWC vs the format plan (speed vs nchw: > 1 is faster; "
                  "train rows: ms per training step; arena: peak activation memory)\n")
        md.append(table(["network", "variant", "ms/batch", "images/s", "conversions", "conversion ms", "arena MB",
                         "calibration s", "vs nchw"],
                        [[n["case"], n["variant"], n["ms_per_batch"], n["images_per_s"], int(n["conversions"])
                          if n["conversions"] is not None and not math.isnan(n["conversions"]) else n["conversions"],
                          n["conversion_ms"], mebibytes(n["arena_bytes"]), n["calibration_s"],
                          n["speed_vs_nchw"] if n["status"] == "ok" else n["status"]]
                         for n in nets]))
    peers = peer_rows(rows)
    gpu_table = gpu_network(network_rows(rows, gpu=True), peers)
    gpu_speedup = gpu_training_speedup(gpu_table)
    headline = gpu_headline(gpu_table)
    if gpu_table:
        md += gpu_markdown(gpu_table, gpu_speedup, headline)
    vs = network_vs_peers(nets, peers)
    if vs:
        md.append("\n## memfmt vs peers (memfmt images/s / the peer's: > 1 is memfmt faster)\n")
        md.append(table(["network", "dtype", "pass", "batch", "policy", "images/s", "conversions", "arena MB",
                         "vs PyTorch NCHW", "vs PyTorch channels_last", "vs ONNX Runtime", "note"],
                        [[v["model"], v["dtype"], v["pass"], v["batch"], v["policy"], v["images_per_s"],
                          v["conversions"], mebibytes(v["arena_bytes"]),
                          v["ratio_vs_pytorch_nchw"], v["ratio_vs_pytorch_channels_last"], v["ratio_vs_onnxruntime"], v["note"]]
                         for v in vs]))
    cal = calibration_check(nets, a.noise_margin)
    by_model = calibration_by_model(cal)
    if cal:
        md.append("\n## Calibrated plan vs the priors' plan and all channels_last (calibrated images/s / the "
                  "other's; holds: >= %g, i.e. 1 - the %g%% noise margin, against both)\n"
                  % (1 - a.noise_margin, a.noise_margin * 100))
        md.append(table(["network", "dtype", "pass", "batch", "calibrated images/s", "calibration s", "vs optimal",
                         "vs all_channels_last", "vs pytorch_eager", "holds"],
                        [[c["model"], c["dtype"], c["pass"], c["batch"], c["images_per_s"], c["calibration_s"],
                          c["ratio_vs_optimal"], c["ratio_vs_all_channels_last"], c["ratio_vs_pytorch_eager"],
                          verdict(c["holds"]) if c["status"] == "ok" else c["status"]] for c in cal]))
        md.append("\nper model: " + "; ".join(
            f"{m} {verdict(v['holds'])}" + (f" (fails at {', '.join(v['failed'])})" if v["failed"] else "")
            for m, v in by_model.items()))
    spread = same_plan_spread(nets)
    if spread:
        md.append("\n## Run consistency: policies that ran the same plan (slowest / fastest ms; over %g the "
                  "machine's speed changed during the run, and ratios at that size are noise)\n" % SAME_PLAN_SPREAD)
        md.append(table(["network", "dtype", "pass", "batch", "policies", "fastest ms", "slowest ms", "spread",
                         "consistent"],
                        [[s["model"], s["dtype"], s["pass"], s["batch"], ", ".join(s["policies"]), s["fastest_ms"],
                          s["slowest_ms"], s["spread"], verdict(s["consistent"])] for s in spread]))
    stages = machine_load(docs)
    eng = engines(peers)
    eng_versions = engine_versions(peers)
    if eng:
        md += engines_markdown(eng, eng_versions)
    goal_rows = goals(vs, busy_note(stages), eng) if nets or eng else []
    if goal_rows:
        md.append("\n## Goals: memfmt >= %gx PyTorch channels_last, memfmt's ONNX import >= %gx ONNX Runtime "
                  "(float32 inference; from the engines table where it has the case, memfmt run on the ONNX file in "
                  "turns with the peers; else bench_network, which runs %s where it ran, else optimal)\n"
                  % (GOAL_VS_PYTORCH_CL, GOAL_VS_ORT, CALIBRATED))
        md.append(table(["network", "batch", "memfmt plan", "vs PyTorch channels_last", "met", "ONNX import plan",
                         "vs ONNX Runtime", "met", "note"],
                        [[g["model"], g["batch"], g["pytorch_channels_last"]["policy"],
                          g["pytorch_channels_last"]["ratio"], verdict(g["pytorch_channels_last"]["met"]),
                          g["onnxruntime"]["policy"], g["onnxruntime"]["ratio"], verdict(g["onnxruntime"]["met"]),
                          g["note"]] for g in goal_rows]))
    if peers:
        md.append("\n## Peers (bench_peers.py: memfmt's command line, PyTorch, ONNX Runtime, OpenVINO; same threads, "
                  "each in its own process)\n")
        md.append(table(["network", "dtype", "pass", "batch", "resolution", "runner", "version", "ms/batch", "images/s",
                         "rounds (ms/batch)", "status"],
                        [[p["model"], p["dtype"], p["pass"], p["batch"], p["resolution"], p["runner"], p.get("version"),
                          p["ms_per_batch"], p["images_per_s"],
                          ", ".join(fmt(float(t)) for t in p["round_ms_per_batch"])
                          if p.get("round_ms_per_batch") else None,
                          p["status"]] for p in peers]))
    over = overhead_rows(rows)
    if over:
        md.append("\n## memfmt wrapper vs a direct backend call (same primitive)\n")
        md.append(table(["case", "wrapper ms", "direct ms", "overhead % (median)", "overhead % (fastest)"],
                        [[o["case"], o["wrapper_ms"], o["direct_ms"], o["overhead_pct_median"], o["overhead_pct_min"]]
                         for o in over]))
    if conv:
        md.append("\n## Conversion vs memcpy (same run)\n")
        md.append(table(["case", "GB/s", "memcpy GB/s", "ratio to memcpy", "core-to-core ns"],
                        [[c["case"], c["GB/s"], c["memcpy GB/s"], c["ratio_to_memcpy"], c["core-to-core ns"]]
                         for c in conv]))
    planner = planner_rows(rows)
    if planner:
        md.append("\n## Planner: graph::solve + explain on bottleneck chains (bench_planner; CPU ms, one thread; "
                  "batch norm indifferent: the plan converts inside every block, the harder case)\n")
        md.append(table(["family", "nodes", "solve+explain ms", "ms per 1,000 nodes"],
                        [[p["family"], p["nodes"], p["solve_explain_ms"] if p["status"] == "ok" else p["status"],
                          p["ms_per_1000_nodes"]] for p in planner]))
    if stages:
        md.append("\n## Machine during the run (share of all cores' time; busy: others > %g or steal > %g)\n"
                  % (BUSY_OTHERS, BUSY_STEAL))
        md.append(table(["stage", "seconds", "cores", "other processes", "stolen", "busy"],
                        [[r["stage"], r["seconds"], r["cores"], r["others_cpu_share"], r["steal_share"],
                          "busy" if r["busy"] else "quiet"] for r in stages]))
    text = "\n".join(md) if md else "no benchmark results found"
    print(text)
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "summary.md"), "w") as f:
            f.write(text + "\n")
        with open(os.path.join(a.out, "summary.json"), "w") as f:
            json.dump({"layers": pairs, "wrapper_overhead": over, "conversion": conv, "network": nets,
                       "peers": peers, "network_vs_peers": vs, "noise_margin": a.noise_margin, "calibration": cal,
                       "calibration_by_model": by_model, "goals": goal_rows, "machine_load": stages,
                       "same_plan_spread": spread, "engines": eng, "engine_versions": eng_versions,
                       "omp_wait": [{k: r[k] for k in ("model", "dtype", "pass", "batch", "memfmt", "memfmt_passive",
                                                       "passive_over_default")} for r in eng if "memfmt_passive" in r],
                       **({"gpu_network": [{k: v for k, v in t.items() if k != "_group"} for t in gpu_table],
                           "gpu_training_speedup": gpu_speedup, "gpu_headline": headline} if gpu_table else {}),
                       **({"planner": planner} if planner else {})},
                      f, indent=1)
        written, why = charts(pairs, vs, nets, a.out, eng)
        if why:
            print("\nsummarize: " + why)
        print(f"\nwritten: {a.out}/" + ", ".join(["summary.md", "summary.json"] + written))


if __name__ == "__main__":
    main()
