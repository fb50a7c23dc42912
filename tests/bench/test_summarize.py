#!/usr/bin/python3
"""Self-test of benchmarks/summarize.py on the committed fixtures (no pytest, no benchmark run).

  test_summarize.py SOURCE_DIR

Runs summarize.py on fixtures/{conv,network,peers,gpu_network,gpu_peers,planner}.json and checks summary.json against ratios
computed by hand from the fixtures' numbers: NHWC/NCHW per layer, speed against the network's
channels-first run (old names BM_network/resnet50/f32/fwd/nchw and new ones .../inference/optimal in
one group), memfmt / peer images/s (the ONNX import's rows against ONNX Runtime, train rows'
ms_per_step), the calibrated plan's check against the priors' plan and all channels_last with the
noise margin, the goal table, and that a skipped peer or memfmt row gives no ratio but a reason;
the GPU network table (bench_network_cudnn's rows, kept out of the CPU one): images/s per policy,
NHWC/NCHW, the training speedup per dtype, the ResNet-50 training headline and PyTorch on the same GPU
(the planned row against it; a CPU peer or a failed GPU peer gives no ratio), absent without GPU rows;
the Planner table (bench_planner's solve + explain CPU ms and ms per 1,000 nodes, recomputed here from
the fixture's raw times and units), absent without its rows; the engines table (fixtures/engines.json:
memfmt / each engine, the fastest engine, OMP_WAIT_POLICY=PASSIVE against the default, the goals from
the same turns, unsupported bf16 rows kept with their reason); bench_peers.py's rounds in turns with a
stand-in for memfmt's command line (no engine package needed). It also checks bench_peers.py's --match
reading of the same network fixture and of the GPU one, and that its ONNX Runtime
sessions start their threads on the process's startup CPUs. The PNG
charts are checked only where matplotlib is importable. Exit 0 when every check holds, 1 otherwise.
"""
import importlib.util
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import threading

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL: " + what)


def near(a, b):
    return a is not None and b is not None and abs(a - b) <= 1e-9 * max(1.0, abs(b))


def main():
    src = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    fixtures = os.path.join(src, "tests", "bench", "fixtures")
    files = [os.path.join(fixtures, f) for f in ("conv.json", "network.json", "peers.json", "gpu_network.json", "gpu_peers.json",
                                                 "planner.json", "machine_load.json")]
    with tempfile.TemporaryDirectory() as out:
        r = subprocess.run([sys.executable, os.path.join(src, "benchmarks", "summarize.py"), "--out", out] + files,
                           capture_output=True, text=True)
        check(r.returncode == 0, f"summarize.py exit {r.returncode}: {r.stderr[-500:]}")
        printed = r.stdout  # r is reused below
        with open(os.path.join(out, "summary.json")) as f:
            s = json.load(f)
        with open(os.path.join(out, "summary.md")) as f:
            md = f.read()

        layers = {p["case"]: p for p in s["layers"]}
        check(near(layers["BM_conv/fwd/f32/3x3_56"]["ratio_nhwc_over_nchw"], 60 / 40), "3x3_56 NHWC/NCHW = 1.5")
        check(layers["BM_conv/fwd/f32/grouped"]["winner"] == "NCHW", "grouped: NCHW wins at 0.5")

        nets = {(n["model"], n["dtype"], n["pass"], n["batch"], n["policy"]): n for n in s["network"]}
        check(len(nets) == 18, f"18 network rows, got {len(nets)}")
        # old name: batch from the label; new name without ms_per_batch: ms = batch / images_per_s.
        check(near(nets[("resnet50", "float32", "inference", 1, "nhwc")]["speed_vs_nchw"], 100 / 80), "nhwc vs nchw")
        opt = nets[("resnet50", "float32", "inference", 1, "optimal")]
        check(near(opt["ms_per_batch"], 40.0) and near(opt["speed_vs_nchw"], 100 / 40), "optimal 40 ms, 2.5x nchw")
        mob = nets[("mobilenet_v2", "float32", "training", 8, "optimal")]
        check(near(mob["speed_vs_nchw"], (8 / 20) / (8 / 32)), "batch:8 component; channels_first is the reference")
        bf = nets[("mobilenet_v2", "bfloat16", "training", 8, "optimal")]
        check(bf["status"] == "unsupported on this CPU (needs avx512_core)", f"bf16 status: {bf['status']}")
        check(nets[("unet", "float32", "inference", 1, "pytorch_eager")]["resolution"] == 224, "resolution counter")

        cal = nets[("resnet50", "float32", "inference", 1, "optimal_calibrated")]
        check(cal["calibration_s"] == 3.5 and near(cal["conversion_ms"], 0.25) and cal["arena_bytes"] == 6291456,
              "calibrated row: calibration_s, conversion_ms, arena_bytes counters")
        train = nets[("resnet50", "float32", "training", 8, "optimal")]
        check(near(train["ms_per_batch"], 2000.0) and near(train["conversion_ms"], 1.5), "train row: ms_per_step read")
        skipped = nets[("resnet50", "float32", "training", 8, "all_channels_first")]
        check(skipped["status"].startswith("error: unsupported: runtime::trainer") and skipped["images_per_s"] is None,
              f"a trainer the backend cannot run keeps its row with the reason: {skipped['status']}")
        check(math.isnan(train["speed_vs_nchw"]), "no speed vs a channels-first row that did not run")
        onnx = nets[("onnx:resnet50", "float32", "inference", 1, "optimal")]
        check(onnx["resolution"] == 224 and math.isnan(onnx["speed_vs_nchw"]),
              "ONNX rows are their own network (no nchw row of theirs: no speed ratio)")

        vs = {(v["model"], v["dtype"], v["pass"], v["batch"], v["policy"]): v for v in s["network_vs_peers"]}
        check(len(vs) == 18, f"18 joined rows, got {len(vs)}")
        check(near(vs[("onnx:resnet50", "float32", "inference", 1, "optimal")]["ratio_vs_onnxruntime"], 30 / 40),
              "the ONNX import joins ONNX Runtime on the same model and batch: 30 / 40")
        check(near(vs[("resnet50", "float32", "training", 8, "optimal")]["ratio_vs_pytorch_channels_last"], 4 / 2),
              "train row / PyTorch channels_last training step = 2")

        # The calibrated plan against the priors' plan and all channels_last, 5% noise margin.
        check(s["noise_margin"] == 0.05, "default noise margin 0.05")
        c = {(r["model"], r["batch"]): r for r in s["calibration"]}
        check(len(c) == 3, f"3 calibrated runs, got {sorted(c)}")
        r = c[("resnet50", 1)]
        check(near(r["ratio_vs_optimal"], 24.5 / 25) and r["at_least_optimal"] is True,
              "0.98 of the priors' plan is within the 5% margin")
        check(near(r["ratio_vs_all_channels_last"], 24.5 / 20) and r["at_least_all_channels_last"] and r["holds"],
              "resnet50: 1.225x all channels_last, holds")
        check(r["ratio_vs_pytorch_eager"] is None, "no pytorch_eager row at batch 1: no ratio")
        m = c[("mobilenet_v2", 8)]
        check(near(m["ratio_vs_optimal"], 0.9) and m["at_least_optimal"] is False and near(
            m["ratio_vs_all_channels_last"], 90 / 110) and m["holds"] is False, "mobilenet: 0.9x is outside the margin")
        o = c[("onnx:mobilenet_v2", 8)]
        check(near(o["ratio_vs_optimal"], 60 / 55) and o["at_least_all_channels_last"] is None and o["holds"] is None,
              "no all_channels_last row: the check is open, not passed")
        by = s["calibration_by_model"]
        check(by["resnet50"]["holds"] is True and by["mobilenet_v2"] == {
            "holds": False, "runs": 1, "failed": ["float32 inference batch 8"]} and by["onnx:mobilenet_v2"]["holds"] is None,
              f"per-model verdicts: {by}")
        check("per model: resnet50 yes; mobilenet_v2 NO (fails at float32 inference batch 8)" in md, "per-model line")

        # Goals: planned memfmt / PyTorch channels_last >= 1.2, the ONNX import / ONNX Runtime >= 1.0.
        g = {(r["model"], r["batch"]): r for r in s["goals"]}
        check(sorted(g) == [("mobilenet_v2", 1), ("mobilenet_v2", 8), ("resnet50", 1), ("resnet50", 8)], "4 goal rows")
        pt, ort = g[("resnet50", 1)]["pytorch_channels_last"], g[("resnet50", 1)]["onnxruntime"]
        check(pt["policy"] == "optimal_calibrated" and near(pt["ratio"], 24.5 / 16) and pt["met"] is True,
              "resnet50 b1: calibrated 24.5 / 16 = 1.53 meets 1.2")
        check(ort["policy"] == "optimal" and near(ort["ratio"], 0.75) and ort["met"] is False,
              "resnet50 b1: ONNX import 30 / 40 misses 1.0 (falls back to optimal)")
        pt, ort = g[("mobilenet_v2", 8)]["pytorch_channels_last"], g[("mobilenet_v2", 8)]["onnxruntime"]
        check(near(pt["ratio"], 90 / 80) and pt["met"] is False, "mobilenet b8: 1.125 misses 1.2")
        check(ort["policy"] == "optimal_calibrated" and near(ort["ratio"], 60 / 50) and ort["met"] is True,
              "mobilenet b8: ONNX import calibrated 60 / 50 = 1.2 meets 1.0")
        check(g[("resnet50", 8)]["pytorch_channels_last"]["met"] is None and "no resnet50 optimal run"
              in g[("resnet50", 8)]["note"], "a goal without a memfmt row is open, with the reason")
        o = vs[("resnet50", "float32", "inference", 1, "optimal")]
        check(near(o["ratio_vs_pytorch_nchw"], 25 / 20), "optimal / pytorch_nchw = 1.25")
        check(near(o["ratio_vs_pytorch_channels_last"], 25 / 16), "optimal / pytorch_channels_last = 1.5625")
        check(near(o["ratio_vs_onnxruntime"], 25 / 40), "optimal / onnxruntime = 0.625")
        check(near(vs[("resnet50", "float32", "inference", 1, "nchw")]["ratio_vs_onnxruntime"], 10 / 40),
              "old-name nchw row joins the batch-1 peers (not the batch-8 one)")
        m = vs[("mobilenet_v2", "float32", "training", 8, "optimal")]
        check(near(m["ratio_vs_pytorch_channels_last"], 32 / 16), "mobilenet training optimal / channels_last = 2")
        check(m["ratio_vs_onnxruntime"] is None and "inference only" in m["note"], "skipped ORT: no ratio, reason")
        check(m["ratio_vs_pytorch_nchw"] is None, "absent peer row: no ratio")
        b = vs[("mobilenet_v2", "bfloat16", "training", 8, "optimal")]
        check(all(b["ratio_vs_" + p] is None for p in ("pytorch_nchw", "pytorch_channels_last", "onnxruntime"))
              and "avx512_core" in b["note"], "memfmt row that did not run: no ratios")
        u = vs[("unet", "float32", "inference", 1, "pytorch_eager")]
        check(u["ratio_vs_pytorch_channels_last"] is None and u["note"] == "no peer ran resolution 224",
              "a peer at another resolution (128) does not join a 224 row")
        check(re.search(r"\| resnet50 +\| float32 +\| inference \| 1 +\| optimal +\| 25 .*\| 1\.56 ", md) is not None,
              "markdown table row")
        r3d = vs[("r3d_18", "float32", "inference", 2, "optimal")]
        check(r3d["resolution"] == 112 and nets[("r3d_18", "float32", "inference", 2, "optimal")]["frames"] == 8,
              "FxRxR label: 8 frames, 112px")
        check(r3d["ratio_vs_pytorch_channels_last"] is None and r3d["note"] == "no peer ran frames 8",
              "a peer with 16 frames does not join an 8-frame row")
        check(len(s["peers"]) == 15, "15 peer rows (11 CPU, 4 GPU)")

        # The same plan under two policies (the fixture's nhwc and all_channels_last rows share a
        # plan_id): 80 / 50 ms, past the 1.1 spread, so the run is flagged as inconsistent there.
        spread = s["same_plan_spread"]
        check(len(spread) == 1 and spread[0]["policies"] == ["all_channels_last", "nhwc"] and
              near(spread[0]["spread"], 1.6) and not spread[0]["consistent"],
              f"same-plan spread: {spread}")
        check(re.search(r"\| resnet50 +\| float32 +\| inference +\| 1 +\| all_channels_last, nhwc +\| 50 +\| 80 +\| 1\.6 +\| NO", md)
              is not None, "run consistency markdown row")

        # The machine's load: bench_convert and bench_network over 10 % of the cores used by others,
        # bench_peers over 5 % stolen; only the network and peer stages reach the goals' notes.
        load = s["machine_load"]
        check([(r["stage"], r["busy"]) for r in load] == [("bench_conv", False), ("bench_convert", True),
                                                           ("bench_network", True), ("bench_peers", True)],
              f"busy stages: {[(r['stage'], r['busy']) for r in load]}")
        note = ("machine busy during bench_network (others 40%, steal 0%), bench_peers (others 3%, steal 6%): "
                "the ratio compares runs under different loads")
        check(all(r["machine_busy"] and r["note"].endswith(note) for r in s["goals"]),
              f"every goal names the busy stages: {[r['note'] for r in s['goals']]}")
        check("bench_convert" not in s["goals"][0]["note"], "a busy stage no ratio rests on stays out of the notes")
        check(re.search(r"\| bench_network +\| 200 +\| 2 +\| 0\.4 +\| 0 +\| busy", md) is not None,
              "machine load markdown row")
        # A rerun over the same folder reads its earlier summary.json too: its load rows do not repeat.
        again = subprocess.run([sys.executable, os.path.join(src, "benchmarks", "summarize.py"), "--out", out] + files +
                               [os.path.join(out, "summary.json")], capture_output=True, text=True)
        with open(os.path.join(out, "summary.json")) as f:
            check(again.returncode == 0 and len(json.load(f)["machine_load"]) == 4,
                  "an earlier summary.json adds no machine load rows")

        # The GPU table: bench_network_cudnn's rows, none of them in the CPU table (still 18 rows above).
        gpu = {(t["model"], t["dtype"], t["pass"], t["batch"]): t for t in s["gpu_network"]}
        check(len(gpu) == 6, f"6 GPU network runs, got {sorted(gpu)}")
        f32 = gpu[("resnet50", "float32", "inference", 32)]
        check(near(f32["nhwc_over_nchw"], 1500 / 1000) and f32["best_policy"] == "optimal_calibrated"
              and near(f32["best_over_nchw"], 1.65) and near(f32["images_per_s"]["pytorch_eager"], 1400),
              f"GPU fwd: NHWC/NCHW 1.5, calibrated fastest: {f32}")
        check(near(gpu[("mobilenet_v2", "float16", "inference", 1)]["nhwc_over_nchw"], 0.8), "GPU NHWC slower: 0.8")
        bf = gpu[("resnet50", "bfloat16", "training", 32)]
        check(bf["nhwc_over_nchw"] is None and "compute capability" in bf["note"], f"refused dtype: reason {bf}")
        sp = {(r["model"], r["batch"]): r for r in s["gpu_training_speedup"]}
        check(near(sp[("resnet50", 32)]["speedup"]["float16"], 2.5) and sp[("resnet50", 32)]["speedup"]["bfloat16"] is None
              and near(sp[("resnet50", 1)]["speedup"]["float16"], 0.5), f"training speedups: {sp}")
        check("runtime::trainer" in sp[("resnet50", 32)]["notes"]["float32"], "a trainer the backend lacks: reason")
        h = s["gpu_headline"]
        check(h["model"] == "resnet50" and h["batch"] == 32 and [d["dtype"] for d in h["dtypes"]] == list(
            ("float32", "float16", "bfloat16")), f"headline: the largest batch, every dtype: {h}")
        f16 = h["dtypes"][1]
        check(near(f16["ratio"], 2.5) and near(f16["channels_last_images_per_s"], 2000)
              and near(f16["channels_first_images_per_s"], 800), "headline float16: 2000 / 800")
        check(h["dtypes"][2]["ratio"] is None and "compute capability" in h["dtypes"][2]["note"], "headline bf16: why")
        check("**Headline: ResNet-50 training on the GPU, batch 32, float16**: channels-last 2000 images/s vs "
              "channels-first 800: 2.5x" in md, "headline line in summary.md")
        check(re.search(r"\| resnet50 +\| 32 +\| - +\| 2\.5 +\| - +\|", md) is not None, "speedup table row")
        # PyTorch on the same GPU: the planned row (optimal_calibrated 1650, else optimal) over its images/s.
        check(f32["planned_policy"] == "optimal_calibrated" and near(f32["pytorch"]["pytorch_cuda_nchw"], 1100)
              and near(f32["ratio_vs_pytorch_cuda_nchw"], 1650 / 1100)
              and near(f32["ratio_vs_pytorch_cuda_channels_last"], 1650 / 1320), f"GPU vs PyTorch: {f32}")
        f16t = gpu[("resnet50", "float16", "training", 32)]
        check(f16t["planned_policy"] == "optimal" and near(f16t["ratio_vs_pytorch_cuda_channels_last"], 2100 / 1400)
              and f16t["ratio_vs_pytorch_cuda_nchw"] is None and "pytorch_cuda_nchw" not in f16t["pytorch"],
              f"GPU vs PyTorch, training; a failed peer gives no ratio: {f16t}")
        check(gpu[("mobilenet_v2", "float16", "inference", 1)]["pytorch"] == {}, "no GPU peer ran: none joined")
        check("## GPU: memfmt vs PyTorch on the same GPU" in md
              and re.search(r"\| resnet50 +\| float32 +\| inference +\| 32 +\| optimal_calibrated +\| 1650 +\| 1100 +\| 1320 +\| 1\.5 +\| 1\.25 +\|", md)
              is not None, "GPU vs PyTorch table row")

        # The Planner table: only BM_solve_explain rows, CPU time in ms whatever the row's unit, by
        # family (default priors first) then size.
        with open(os.path.join(fixtures, "planner.json")) as f:
            raw = [b for b in json.load(f)["benchmarks"] if b["name"].startswith("BM_solve_explain/")]
        unit_ms = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}
        want = sorted(((b["name"].split("/")[2], int(b["nodes"]), b["cpu_time"] * unit_ms[b["time_unit"]]) for b in raw))
        family = {"0": "default priors", "1": "batch norm indifferent"}
        got = s.get("planner", [])
        check([(p["family"], p["nodes"]) for p in got] == [(family[f], n) for f, n, _ in want],
              f"planner rows by family then nodes: {[(p['family'], p['nodes']) for p in got]}")
        for p, (_, nodes, ms) in zip(got, want):
            check(near(p["solve_explain_ms"], ms) and near(p["ms_per_1000_nodes"], ms / nodes * 1000),
                  f"planner {p['family']} {nodes} nodes: {ms} ms, {ms / nodes * 1000} per 1,000 nodes: {p}")
        check(near(got[0]["solve_explain_ms"], 0.54) if got else False, "a row timed in us: 540 us = 0.54 ms")
        check(re.search(r"\| batch norm indifferent \| 10002 +\| 255 +\| 25\.5 +\|", md) is not None,
              "planner markdown row: 0.255 s over 10,002 nodes")

        has_mpl = importlib.util.find_spec("matplotlib") is not None
        for png in ("ratios.png", "networks.png"):
            path = os.path.join(out, png)
            if has_mpl:
                with open(path, "rb") as f:
                    check(f.read(8) == b"\x89PNG\r\n\x1a\n", f"{png} is a PNG")
            else:
                check(not os.path.exists(path) and "matplotlib" in printed, f"{png} skipped with a reason")
        if not has_mpl:
            print("test_summarize: matplotlib not importable; the chart checks were the skip path")

    # Without bench_network_cudnn's JSON there is no GPU table.
    with tempfile.TemporaryDirectory() as out:
        r = subprocess.run([sys.executable, os.path.join(src, "benchmarks", "summarize.py"), "--out", out,
                            os.path.join(fixtures, "network.json")], capture_output=True, text=True)
        check(r.returncode == 0, f"summarize.py without GPU rows: exit {r.returncode}: {r.stderr[-500:]}")
        with open(os.path.join(out, "summary.json")) as f:
            s = json.load(f)
        check("gpu_network" not in s and "GPU (cuDNN)" not in r.stdout, "no GPU rows: no GPU table")
        check("planner" not in s and "Planner" not in r.stdout, "no bench_planner rows: no Planner table")

    # The engines table (fixtures/engines.json: memfmt's command line and the peers in turns): memfmt /
    # each engine per case, the fastest engine, OMP_WAIT_POLICY=PASSIVE against the default, the goals
    # from the same turns, and the rows that did not run keeping their reasons.
    with tempfile.TemporaryDirectory() as out:
        r = subprocess.run([sys.executable, os.path.join(src, "benchmarks", "summarize.py"), "--out", out,
                            os.path.join(fixtures, "engines.json")], capture_output=True, text=True)
        check(r.returncode == 0, f"summarize.py on engines.json: exit {r.returncode}: {r.stderr[-500:]}")
        with open(os.path.join(out, "summary.json")) as f:
            s = json.load(f)
        eng = {(e["model"], e["dtype"], e["batch"]): e for e in s["engines"]}
        check(sorted(eng) == [("mobilenet_v2", "float32", 8), ("resnet50", "bfloat16", 1), ("resnet50", "float32", 1)],
              f"3 engine cases: {sorted(eng)}")
        e = eng[("resnet50", "float32", 1)]
        check(near(e["ratio_vs_pytorch_nchw"], 3.0) and near(e["ratio_vs_pytorch_channels_last"], 2.5)
              and near(e["ratio_vs_onnxruntime"], 1.2) and near(e["ratio_vs_openvino"], 0.75),
              f"memfmt 30 images/s over 10, 12, 25, 40: {e}")
        check(e["best_peer"] == "openvino" and near(e["ratio_vs_best_peer"], 0.75), "the fastest engine: OpenVINO 40")
        check(e["ratio_vs_pytorch_compile"] is None and "time limit" in e["note"], "a skipped engine: no ratio, reason")
        check(near(e["passive_over_default"], 0.5) and e["memfmt_plan"] == "optimal_calibrated", "PASSIVE 15 / 30")
        b = eng[("resnet50", "bfloat16", 1)]
        check(b["memfmt"] is None and b["ratio_vs_openvino"] is None and b["peers"]["openvino"] == 50
              and "needs avx512_core" in b["note"] and "no bfloat16 convolution" in b["note"],
              f"bf16: memfmt unsupported on this CPU keeps its row, no ratio: {b}")
        m = eng[("mobilenet_v2", "float32", 8)]
        check(m["peers"]["pytorch_nchw"] is None and m["status"]["pytorch_nchw"] == "no row"
              and near(m["ratio_vs_onnxruntime"], 0.8), f"an engine without a row: {m}")
        check(s["engine_versions"]["onnxruntime"] == ["onnxruntime 1.32.0"]
              and s["engine_versions"]["memfmt"] == ["memfmt 1234abc (oneDNN 2.6.3)"], "versions per engine")
        wait = {(w["model"], w["dtype"]): w for w in s["omp_wait"]}
        check(near(wait[("resnet50", "float32")]["passive_over_default"], 0.5)
              and wait[("resnet50", "bfloat16")]["passive_over_default"] is None, f"omp_wait rows: {wait}")
        g = {(x["model"], x["batch"]): x for x in s["goals"]}
        pt, ort = g[("resnet50", 1)]["pytorch_channels_last"], g[("resnet50", 1)]["onnxruntime"]
        check(near(pt["ratio"], 2.5) and pt["met"] is True and near(ort["ratio"], 1.2) and ort["met"] is True
              and pt["memfmt"] == "memfmt run resnet50", f"goals from the engines table: {g[('resnet50', 1)]}")
        check(g[("mobilenet_v2", 8)]["onnxruntime"]["met"] is False, "mobilenet b8: 200 / 250 misses 1.0")
        check(re.search(r"\| resnet50 +\| inference \| 1 +\| 30 +\| 10 \(3\.00x\) +\| 12 \(2\.50x\) +\| not run +\| "
                        r"25 \(1\.20x\) +\| 40 \(0\.75x\) +\| 0\.75x OpenVINO", r.stdout) is not None,
                  "engines markdown row")
        check("Versions: memfmt 1234abc (oneDNN 2.6.3); torch 2.15.0; onnxruntime 1.32.0; openvino 2026.4.1"
              in r.stdout, "versions line")
        path = os.path.join(out, "engines.png")
        if importlib.util.find_spec("matplotlib") is not None:
            with open(path, "rb") as f:
                check(f.read(8) == b"\x89PNG\r\n\x1a\n", "engines.png is a PNG")
        else:
            check(not os.path.exists(path), "no matplotlib: no engines.png")

    # bench_peers.py with memfmt's runners only (no engine package needed): a stand-in `memfmt run`
    # that answers 20 ms per image with the default waiting and 25 under OMP_WAIT_POLICY=PASSIVE, and
    # refuses bfloat16 as oneDNN does on a CPU without avx512_core. Rounds in turns, medians, versions,
    # reasons, and that the passive runner alone gets PASSIVE whatever the caller's environment says.
    with tempfile.TemporaryDirectory() as tmp:
        fake = os.path.join(tmp, "memfmt")
        with open(fake, "w") as f:
            f.write(f"#!{sys.executable}\n" + """import json, os, sys
args = sys.argv[1:]
value = lambda flag: args[args.index(flag) + 1]
if value("--dtype") == "bfloat16":
    sys.exit("memfmt run: bfloat16 needs avx512_core, which oneDNN does not find on this CPU")
ms = (25.0 if os.environ.get("OMP_WAIT_POLICY") == "PASSIVE" else 20.0) * int(value("--batch"))
print(json.dumps({"policy": "all_channels_last", "ms_per_batch": ms, "repeat": int(value("--repeat")),
                  "plan": {"conversions": 1}}))
""")
        os.chmod(fake, 0o755)
        onnx_dir = os.path.join(tmp, "onnx")
        os.makedirs(onnx_dir)
        open(os.path.join(onnx_dir, "resnet50_224x224.onnx"), "w").close()  # exists: not exported
        result = os.path.join(tmp, "peers.json")
        env = dict(os.environ, OMP_WAIT_POLICY="ACTIVE")
        r = subprocess.run([sys.executable, os.path.join(src, "benchmarks", "peers", "bench_peers.py"),
                            "--models", "resnet50", "--batches", "1,8", "--dtypes", "float32,bfloat16", "--passes",
                            "inference,training", "--runners", "memfmt,memfmt_passive", "--rounds", "3", "--gap", "0",
                            "--min-reps", "2", "--reps", "4", "--case-seconds", "0", "--onnx-dir", onnx_dir,
                            "--memfmt", fake, "--out", result], capture_output=True, text=True, env=env)
        check(r.returncode == 0, f"bench_peers.py with a stand-in memfmt: exit {r.returncode}: {r.stderr[-500:]}")
        with open(result) as f:
            doc = json.load(f)
        rows = {(b["runner"], b["dtype"], b["pass"], b["batch"]): b for b in doc["benchmarks"]}
        check(len(rows) == 16, f"16 rows (2 runners x 2 dtypes x 2 passes x 2 batches), got {len(rows)}")
        d, p = rows[("memfmt", "float32", "inference", 8)], rows[("memfmt_passive", "float32", "inference", 8)]
        check(near(d["ms_per_batch"], 160.0) and near(d["images_per_s"], 50.0) and d["rounds"] == 3
              and d["round_ms_per_batch"] == [160.0] * 3 and d["wait_policy"] == "default",
              f"default waiting (the caller's ACTIVE dropped): 20 ms per image, 3 rounds: {d}")
        check(near(p["ms_per_batch"], 200.0) and p["wait_policy"] == "PASSIVE", f"PASSIVE: 25 ms per image: {p}")
        check(d["reps"] == 6 and d["plan"] == "all_channels_last", f"2 passes per round (--min-reps), plan: {d}")
        check(d["version"].startswith("memfmt") and doc["context"]["memfmt"] == d["version"], "memfmt's version")
        bf = rows[("memfmt", "bfloat16", "inference", 1)]
        check(bf.get("error_occurred") and bf["error_message"] == "unsupported on this CPU (needs avx512_core)",
              f"bf16 refused: {bf.get('error_message')}")
        tr = rows[("memfmt", "float32", "training", 1)]
        check(tr.get("error_occurred") and "inference" in tr["error_message"], "training: skipped with the reason")

    # bench_peers.py --match: the cases of the network fixture (no torch needed to read them).
    sys.path.insert(0, os.path.join(src, "benchmarks", "peers"))
    import bench_peers

    class Args:
        batches = [1, 8]
        resolution = 96
        frames = 16

    cases = sorted(set(bench_peers.matched_cases(os.path.join(fixtures, "network.json"), Args)))
    want = sorted({("resnet50", "float32", "inference", 1, 224, 16), ("mobilenet_v2", "float32", "training", 8, 96, 16),
                   ("mobilenet_v2", "bfloat16", "training", 8, 96, 16), ("unet", "float32", "inference", 1, 224, 16),
                   ("r3d_18", "float32", "inference", 2, 112, 8), ("mobilenet_v2", "float32", "inference", 8, 224, 16),
                   ("resnet50", "float32", "training", 8, 224, 16)})
    check(cases == want, f"--match cases {cases} != {want}")
    # The GPU rows (BM_network_cudnn/...) are matched too: the cases bench_peers --device cuda runs.
    gpu_cases = set(bench_peers.matched_cases(os.path.join(fixtures, "gpu_network.json"), Args))
    check(("resnet50", "float16", "training", 32, 224, 16) in gpu_cases
          and ("mobilenet_v2", "float16", "inference", 1, 224, 16) in gpu_cases and len(gpu_cases) == 6,
          f"--match GPU cases: {sorted(gpu_cases)}")

    # startup_cpus(): a thread started inside runs on the CPUs the process started with, as ONNX
    # Runtime's session threads must after libgomp pinned the caller, and the caller's pin comes back.
    if bench_peers.STARTUP_CPUS is not None:
        before = os.sched_getaffinity(0)
        pinned = {min(before)}
        seen = {}
        os.sched_setaffinity(0, pinned)
        try:
            with bench_peers.startup_cpus():
                t = threading.Thread(target=lambda: seen.update(cpus=os.sched_getaffinity(0)))
                t.start()
                t.join()
            check(seen.get("cpus") == bench_peers.STARTUP_CPUS,
                  f"startup_cpus: a thread started inside runs on {seen.get('cpus')}, not {bench_peers.STARTUP_CPUS}")
            check(os.sched_getaffinity(0) == pinned, f"startup_cpus: the caller is left on {os.sched_getaffinity(0)}")
        finally:
            os.sched_setaffinity(0, before)

    print(f"test_summarize: {'FAILED ' + str(len(failures)) if failures else 'all'} checks"
          f"{'' if failures else ' passed'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
