#!/usr/bin/env python3
"""Summarise memfmt's Google Benchmark JSON output: NCHW vs NHWC per layer, conversion vs memcpy.

Reads the JSON files written with --benchmark_out and prints, for every benchmark whose name has a
format component (nchw/nhwc/ncdhw/ndhwc), a row: layer, NCHW, NHWC, ratio (NHWC/NCHW throughput),
winner. Conversion benchmarks report their ratio_to_memcpy counter. Writes summary.md,
summary.json and ratios.svg (a bar chart of NHWC/NCHW) into --out.

Pairing rule: two benchmarks are the same case when their names are equal after the format
component is removed. Throughput is the first counter whose name contains "FLOP" (GFLOP/s) or,
failing that, 1 / real_time.

Whole-network benchmarks (BM_network/<net>/<dtype>/<pass>/<variant>, counter images_per_s) are kept
out of that table and get their own: variant, ms/batch, images/s, conversions, speed vs the same
network's nchw (or all_channels_first) variant (JSON key "network").

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


def network_rows(rows):
    """BM_network/<net>/<dtype>/<pass>/<variant>: one row per variant, compared with its nchw
    (all_channels_first) run."""
    groups = {}
    order = []
    for b in rows:
        if "images_per_s" not in b and not b["name"].startswith("BM_network/"):
            continue
        parts = clean(b["name"]).split("/")
        base, variant = "/".join(parts[:-1]), parts[-1]
        if base not in groups:
            groups[base] = {}
            order.append(base)
        groups[base][variant] = b
    out = []
    for base in order:
        ref = groups[base].get("nchw", groups[base].get("all_channels_first"))
        for variant, b in groups[base].items():
            why = status(b)
            if why != "ok":
                out.append({"case": base, "variant": variant, "ms_per_batch": None, "images_per_s": None,
                            "conversions": None, "conversion_ms": None, "speed_vs_nchw": None, "label": "",
                            "status": why})
                continue
            ms = b.get("ms_per_batch", float("nan"))
            ref_ms = ref.get("ms_per_batch", float("nan")) if ref and status(ref) == "ok" else float("nan")
            out.append({"case": base, "variant": variant, "ms_per_batch": ms, "images_per_s": b["images_per_s"],
                        "conversions": b.get("conversions", float("nan")),
                        "conversion_ms": b.get("conversion_ms", float("nan")),
                        "speed_vs_nchw": ref_ms / ms if ms and ms > 0 else float("nan"),
                        "label": b.get("label", ""), "status": "ok"})
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


def svg_chart(pairs, path):
    pairs = [p for p in pairs if p["status"] == "ok"]
    if not pairs:
        return
    bar_h, gap, left, width = 16, 6, 330, 420
    height = 40 + len(pairs) * (bar_h + gap)
    vmax = max(2.0, max(p["ratio_nhwc_over_nchw"] for p in pairs if not math.isnan(p["ratio_nhwc_over_nchw"])))
    x1 = left + width / 2
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 60}" height="{height}" font-family="sans-serif" font-size="11">',
             f'<text x="{left}" y="14" font-size="12">NHWC / NCHW throughput (log scale; right of the line = NHWC faster)</text>',
             f'<line x1="{x1}" y1="22" x2="{x1}" y2="{height - 4}" stroke="black"/>']
    for i, p in enumerate(pairs):
        y = 28 + i * (bar_h + gap)
        r = p["ratio_nhwc_over_nchw"]
        if math.isnan(r) or r <= 0:
            continue
        w = math.log2(r) / math.log2(vmax) * (width / 2)
        x = x1 if w >= 0 else x1 + w
        color = "#2a7" if w >= 0 else "#c44"
        parts.append(f'<text x="{left - 6}" y="{y + 12}" text-anchor="end">{p["case"]}</text>')
        parts.append(f'<rect x="{x:.1f}" y="{y}" width="{abs(w):.1f}" height="{bar_h}" fill="{color}"/>')
        parts.append(f'<text x="{x1 + max(w, 0) + 4:.1f}" y="{y + 12}">{r:.2f}x</text>')
    parts.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(parts))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json", nargs="+")
    ap.add_argument("--out", default=None, help="folder for summary.md, summary.json, ratios.svg")
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
            json.dump({"layers": pairs, "wrapper_overhead": over, "conversion": conv, "network": nets}, f, indent=1)
        svg_chart(pairs, os.path.join(a.out, "ratios.svg"))
        print(f"\nwritten: {a.out}/summary.md, summary.json, ratios.svg")


if __name__ == "__main__":
    main()
