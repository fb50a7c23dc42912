#!/usr/bin/env python3
"""Summarise memfmt's Google Benchmark JSON output: NCHW vs NHWC per layer, conversion vs memcpy.

Reads the JSON files written with --benchmark_out and prints, for every benchmark whose name has a
format component (nchw/nhwc/ncdhw/ndhwc), a row: layer, NCHW, NHWC, ratio (NHWC/NCHW throughput),
winner. Conversion benchmarks report their ratio_to_memcpy counter. Writes summary.md,
summary.json and, with matplotlib (Debian python3-matplotlib; without it the charts are skipped
with the reason printed), ratios.png (NHWC/NCHW per layer) and networks.png (images/s per network
by policy and peer) into --out.

Pairing rule: two benchmarks are the same case when their names are equal after the format
component is removed. Throughput is the first counter whose name contains "FLOP" (GFLOP/s) or,
failing that, 1 / real_time.

Whole-network benchmarks (BM_network/<model>/<dtype>/<pass>/<policy>, counters images_per_s and
optionally ms_per_batch, conversions, conversion_ms, arena_bytes) are kept out of that table and get
their own: policy, ms/batch, images/s, conversions, speed vs the same network's channels-first
policy (nchw or channels_first; JSON key "network"). fwd and inference, train and training, f32 and
float32 name the same thing; the batch is a "batch" counter, a "batch:N" name component or
"batch N" in the label.

Peers (benchmarks/peers/bench_peers.py's BM_peer/<model>/<dtype>/<pass>/<runner>/batch:<N> rows:
pytorch_nchw, pytorch_channels_last, onnxruntime) are listed (JSON key "peers") and joined with the
network rows of the same model, dtype, pass, batch and resolution: ratio_vs_<runner> = memfmt
images/s / the peer's (> 1: memfmt faster; JSON key "network_vs_peers", with "note" saying why a
ratio is missing).

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


def load(paths):
    rows = []
    for p in paths:
        try:
            with open(p) as f:
                data = json.load(f)
        except (OSError, ValueError) as e:
            print(f"summarize: skipping {p}: {e}", file=sys.stderr)
            continue
        for b in data.get("benchmarks", []):
            if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
                continue
            b["_file"] = os.path.basename(p)
            rows.append(b)
    return rows


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


def ms_per_batch(b, batch):
    """The ms_per_batch counter, else batch / images_per_s, else Google Benchmark's real_time."""
    if "ms_per_batch" in b:
        return b["ms_per_batch"]
    if batch and b.get("images_per_s"):
        return batch / b["images_per_s"] * 1e3
    scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}.get(b.get("time_unit", "ns"), float("nan"))
    return b.get("real_time", float("nan")) * scale


def network_rows(rows):
    """BM_network/<model>/<dtype>/<pass>/<policy>: one row per policy, compared with its nchw run."""
    groups = {}
    order = []
    for b in rows:
        if is_peer(b) or ("images_per_s" not in b and not b["name"].startswith("BM_network/")):
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
                   "conversions": None, "conversion_ms": None, "arena_bytes": None, "speed_vs_nchw": None,
                   "label": "", "status": status(b)}
            if row["status"] != "ok":
                out.append(row)
                continue
            ms = ms_per_batch(b, case["batch"])
            ref_ms = ms_per_batch(ref, case["batch"]) if ref and status(ref) == "ok" else float("nan")
            row.update(ms_per_batch=ms, images_per_s=b["images_per_s"], conversions=b.get("conversions", float("nan")),
                       conversion_ms=b.get("conversion_ms", float("nan")), arena_bytes=b.get("arena_bytes", float("nan")),
                       speed_vs_nchw=ref_ms / ms if ms and ms > 0 else float("nan"), label=b.get("label", ""))
            out.append(row)
    return out


def peer_rows(rows):
    """bench_peers.py's rows (BM_peer/<model>/<dtype>/<pass>/<runner>/batch:<N>); later files win."""
    out = {}
    for b in rows:
        if not is_peer(b):
            continue
        key = (b.get("model"), b.get("dtype"), b.get("pass"), b.get("batch"), b.get("resolution"), b.get("runner"))
        out[key] = {"model": b.get("model"), "dtype": b.get("dtype"), "pass": b.get("pass"), "batch": b.get("batch"),
                    "resolution": b.get("resolution"), "frames": b.get("frames"), "runner": b.get("runner"),
                    "ms_per_batch": None if b.get("error_occurred") else b.get("ms_per_batch"),
                    "images_per_s": None if b.get("error_occurred") else b.get("images_per_s"),
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
                                 "conversions", "arena_bytes", "status")}
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


def table(headers, rows):
    widths = [max(len(h), *(len(fmt(r[i])) for r in rows)) for i, h in enumerate(headers)] if rows else [len(h) for h in headers]
    line = "| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths)) + " |"
    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    body = ["| " + " | ".join(fmt(c).ljust(w) for c, w in zip(r, widths)) + " |" for r in rows]
    return "\n".join([line, sep] + body)


def charts(pairs, vs_peers, nets, out):
    """ratios.png (per-layer NHWC/NCHW) and networks.png (images/s by policy and peer) with matplotlib;
    returns the files written, or a reason why none were."""
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
            key = (n["model"], n["dtype"], n["pass"], n["batch"])
            groups.setdefault(key, []).append((n["variant"], n["images_per_s"], "memfmt"))
    for v in vs_peers:
        key = (v["model"], v["dtype"], v["pass"], v["batch"])
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
    return written, None if written else "charts skipped: no rows to draw"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json", nargs="+")
    ap.add_argument("--out", default=None, help="folder for summary.md, summary.json, ratios.png, networks.png")
    a = ap.parse_args()
    rows = load(a.json)
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
        md.append("\n## Whole network: NCHW vs NHWC vs the format plan (speed vs nchw: > 1 is faster)\n")
        md.append(table(["network", "variant", "ms/batch", "images/s", "conversions", "conversion ms", "vs nchw"],
                        [[n["case"], n["variant"], n["ms_per_batch"], n["images_per_s"], int(n["conversions"])
                          if n["conversions"] is not None and not math.isnan(n["conversions"]) else n["conversions"],
                          n["conversion_ms"], n["speed_vs_nchw"] if n["status"] == "ok" else n["status"]]
                         for n in nets]))
    peers = peer_rows(rows)
    vs = network_vs_peers(nets, peers)
    if vs:
        md.append("\n## memfmt vs peers (memfmt images/s / the peer's: > 1 is memfmt faster)\n")
        md.append(table(["network", "dtype", "pass", "batch", "policy", "images/s", "conversions", "arena MB",
                         "vs PyTorch NCHW", "vs PyTorch channels_last", "vs ONNX Runtime", "note"],
                        [[v["model"], v["dtype"], v["pass"], v["batch"], v["policy"], v["images_per_s"],
                          v["conversions"], v["arena_bytes"] / 2**20 if isinstance(v["arena_bytes"], (int, float)) else None,
                          v["ratio_vs_pytorch_nchw"], v["ratio_vs_pytorch_channels_last"], v["ratio_vs_onnxruntime"], v["note"]]
                         for v in vs]))
    if peers:
        md.append("\n## Peers (bench_peers.py: PyTorch, ONNX Runtime; same threads)\n")
        md.append(table(["network", "dtype", "pass", "batch", "resolution", "runner", "ms/batch", "images/s", "status"],
                        [[p["model"], p["dtype"], p["pass"], p["batch"], p["resolution"], p["runner"],
                          p["ms_per_batch"], p["images_per_s"], p["status"]] for p in peers]))
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
    text = "\n".join(md) if md else "no benchmark results found"
    print(text)
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "summary.md"), "w") as f:
            f.write(text + "\n")
        with open(os.path.join(a.out, "summary.json"), "w") as f:
            json.dump({"layers": pairs, "wrapper_overhead": over, "conversion": conv, "network": nets,
                       "peers": peers, "network_vs_peers": vs}, f, indent=1)
        written, why = charts(pairs, vs, nets, a.out)
        if why:
            print("\nsummarize: " + why)
        print(f"\nwritten: {a.out}/" + ", ".join(["summary.md", "summary.json"] + written))


if __name__ == "__main__":
    main()
