#!/usr/bin/env python3
"""Calibration time: ONNX Runtime's quantize_static against qopt's `calibrate` pass, same model
and same calibration data.

usage: scripts/.venv/bin/python scripts/ort_calibration_bench.py [--models resnet_tiny,resnet18ish]
           [--methods MinMax,Percentile,Entropy,Distribution] [--runs 3] [--qopt-runs 5]
           [--threads 2] [--json OUT.json | --json -] [--skip-ort] [--skip-qopt] [--wait-for-passes]

ONNX Runtime (QDQ, QInt8 asymmetric activations, per-channel QInt8 symmetric weights, the scheme
of the shared reference models), per calibration method, medians of --runs runs with
`intra_op_num_threads = --threads` forced on every session ORT creates. The model is first put
through quant_pre_process (skip_symbolic_shape=True; it folds BN into Conv, and with it
quantize_static MinMax reproduces the shared ort_qdq_minmax.onnx bit for bit); that step is
timed on its own and is not included in the figures below, which start from its output:
  - quantize_static: the whole call (load + shape inference, calibration, QDQ rewrite, save);
  - calibration alone: create_calibrator(...) (augment the graph, write it, create the
    session), collect_data(reader) and compute_data(), timed separately.
The calibration samples are loaded into memory before timing (ORT gets numpy arrays).

qopt, as a subprocess after one warm-up run, medians of --qopt-runs runs (wall time of the
command alone, which includes reading the .qir and calib.npy and printing the result):
  qopt m.qir --pass='fold-bn,insert-observers{observer=OBS},calibrate{data=calib.npy}' -o /dev/null
for OBS in minmax, histogram, plus the medians of as many `--timing` runs (each pass, and the
calibrate pass's phases: `prepare`, compiling the model and loading its weights, and
`run-samples`, the loop over the data, the counterpart of ORT's collect), and the same
pipelines followed by `insert-fakeq{method=...}` (the counterpart of the whole quantize_static).

Models: resnet_tiny uses the shared calib.npy (32 samples); resnet18ish is generated under
scripts/.work/models/resnet18ish (make_resnet18ish.py) with calib16.npy, 16 standard-normal
samples from a fixed seed, the file both ORT and qopt read.
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import qopt_common as C  # noqa: E402

ORT_METHODS = ["MinMax", "Percentile", "Entropy", "Distribution"]
QOPT_OBSERVERS = ["minmax", "histogram"]
# Full-pipeline counterparts of quantize_static: (observer, insert-fakeq options).
QOPT_FULL = [("minmax", "method=minmax"), ("minmax", "method=minmax weight-method=minmax"),
             ("histogram", "method=percentile"), ("histogram", "method=entropy"), ("histogram", "method=mse")]


def bench_ort(model: Path, calib_path: Path, methods: list[str], runs: int, work: Path) -> dict:
    import numpy as np
    import onnxruntime
    from onnxruntime.quantization import CalibrationMethod, create_calibrator
    from onnxruntime.quantization.registry import QDQRegistry, QLinearOpsRegistry

    x = np.load(calib_path)
    # ORT's recommended pre-processing (folds BN into Conv; the shared ort_qdq_minmax.onnx files
    # were made this way), timed on its own; both timed paths below start from its output.
    pre = work / "pre.onnx"
    pre_times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        C.ort_preprocess(model, pre)
        pre_times.append(time.perf_counter() - t0)
    model = pre
    C.ort_quantize(model, work / "warmup.onnx", x, "MinMax", preprocess=False)  # untimed warm-up
    op_types = list(set(QLinearOpsRegistry.keys()) | set(QDQRegistry.keys()))  # as quantize_static
    results = {}
    for method in methods:
        if method not in CalibrationMethod.__members__:
            results[method] = {"error": f"CalibrationMethod.{method} not in this onnxruntime"}
            continue
        r = {"quantize_static": [], "setup": [], "collect": [], "compute": []}
        try:
            for i in range(runs):
                out = work / f"ort_{method}.onnx"
                gc.collect()
                t0 = time.perf_counter()
                C.ort_quantize(model, out, x, method, preprocess=False)
                r["quantize_static"].append(time.perf_counter() - t0)

                with tempfile.TemporaryDirectory(prefix="ortcal.", dir=work) as tmp:
                    gc.collect()
                    t0 = time.perf_counter()
                    cal = create_calibrator(Path(model), op_types,
                                            augmented_model_path=str(Path(tmp) / "augmented_model.onnx"),
                                            calibrate_method=CalibrationMethod[method], extra_options={})
                    t1 = time.perf_counter()
                    cal.collect_data(C.ort_reader(model, x))
                    t2 = time.perf_counter()
                    ranges = cal.compute_data()
                    t3 = time.perf_counter()
                    n_tensors = len(ranges.data) if hasattr(ranges, "data") else len(ranges)
                    del cal, ranges
                r["setup"].append(t1 - t0)
                r["collect"].append(t2 - t1)
                r["compute"].append(t3 - t2)
                C.log(f"  ORT {method} run {i + 1}/{runs}: quantize_static {r['quantize_static'][-1]:.3f} s, "
                      f"calibrator setup {t1 - t0:.3f} + collect {t2 - t1:.3f} + compute {t3 - t2:.3f} s")
        except Exception as e:  # noqa: BLE001 - report and go on with the other methods
            results[method] = {"error": f"{type(e).__name__}: {e}"}
            C.log(f"  ORT {method} failed: {e}")
            continue
        res = {k: C.summarize(v) for k, v in r.items()}
        res["calibration"] = C.summarize([a + b for a, b in zip(r["collect"], r["compute"])])
        res["calibration_with_setup"] = C.summarize(
            [a + b + c for a, b, c in zip(r["setup"], r["collect"], r["compute"])])
        res["preprocess"] = C.summarize(pre_times)
        res["tensors_calibrated"] = n_tensors
        res["onnxruntime"] = onnxruntime.__version__
        results[method] = res
    return results


def parse_timing(stderr: str) -> dict:
    """Per-phase wall times of qopt's --timing report (parse, pipeline, each pass, print)."""
    out = {}
    for line in stderr.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1].startswith("("):
            try:
                secs = float(parts[0])
            except ValueError:
                continue
            name = parts[-1]
            if name == "verify":
                continue
            out[name] = out.get(name, 0.0) + secs
    return out


def bench_qopt(bins: dict, model: Path, calib_path: Path, runs: int, work: Path, full: bool) -> dict:
    m = work / "m.qir"
    C.run([bins["qimport"], model, "-o", m])
    results = {}
    pipelines = [(f"calibrate, observer={o}", o, None) for o in QOPT_OBSERVERS]
    if full:
        pipelines += [(f"+ insert-fakeq{{{meth}}}, observer={o}", o, meth) for o, meth in QOPT_FULL]
    for label, obs, meth in pipelines:
        pipe = f"fold-bn,insert-observers{{observer={obs}}},calibrate{{data={calib_path}}}"
        if meth:
            pipe += f",insert-fakeq{{{meth}}}"
        cmd = [bins["qopt"], m, f"--pass={pipe}", "-o", "/dev/null"]
        try:
            res = C.time_cmd(cmd, runs, warmup=1)
        except RuntimeError as e:
            msg = str(e).split("--- stderr ---")[-1].strip().splitlines()
            results[label] = {"error": msg[0] if msg else str(e), "command": C.fmt_cmd(cmd)}
            C.log(f"  qopt {label}: FAILED: {results[label]['error']}")
            continue
        res["command"] = C.fmt_cmd(cmd)
        # The passes and their phases, medians over as many --timing runs.
        reports = [parse_timing(p.stderr + p.stdout)
                   for p in (C.run(cmd + ["--timing"], quiet=True) for _ in range(runs))]
        res["timing_report"] = {k: C.summarize([r[k] for r in reports if k in r])["median_s"]
                                for k in reports[0]}
        res["timing_min"] = {k: min(r[k] for r in reports if k in r) for k in reports[0]}
        C.log(f"  qopt {label}: median {res['median_s']:.3f} s; --timing medians {res['timing_report']}")
        results[label] = res
    return results


def fmt_s(v) -> str:
    if v is None:
        return "—"
    return f"{v * 1000:.0f} ms" if v < 10 else f"{v:.1f} s"


def fmt_t(t: dict) -> str:
    """Median, and the minimum in parentheses (the least disturbed run on a shared machine)."""
    return f"{fmt_s(t['median_s'])} ({fmt_s(t['min_s'])})"


def table(report: dict) -> str:
    lines = []
    for model, r in report["models"].items():
        lines.append(f"\n### {model} ({r['calibration_samples']} calibration samples, {r['calib']})\n")
        lines.append(f"median (minimum) of the timed runs; load average {r.get('load', '?')}\n")
        lines.append("| tool | configuration | whole call | calibration (collect + compute) | setup / collect / compute (medians) |")
        lines.append("|---|---|---|---|---|")
        pre = next((o["preprocess"] for o in r.get("ort", {}).values() if "preprocess" in o), None)
        if pre:
            lines.append(f"| ORT | quant_pre_process (before every ORT row; not in them) | {fmt_s(pre['median_s'])} | | |")
        for meth, o in r.get("ort", {}).items():
            if "error" in o:
                lines.append(f"| ORT {o.get('onnxruntime', '')} | {meth} | error: {o['error'][:80]} | | |")
                continue
            lines.append(
                f"| ORT {o['onnxruntime']} | quantize_static {meth} | {fmt_t(o['quantize_static'])} | "
                f"{fmt_t(o['calibration'])} | {fmt_s(o['setup']['median_s'])} / "
                f"{fmt_s(o['collect']['median_s'])} / {fmt_s(o['compute']['median_s'])} |")
        for label, q in r.get("qopt", {}).items():
            if "error" in q:
                lines.append(f"| qopt | {label} | error: {q['error'][:100]} | | |")
                continue
            t = q.get("timing_report", {})
            split = " / ".join(f"{k} {fmt_s(v)}" for k, v in t.items() if k in ("parse", "fold-bn", "calibrate",
                                                                                   "insert-fakeq", "print"))
            lines.append(f"| qopt | {label} | {fmt_t(q)} | calibrate pass {fmt_s(t.get('calibrate'))} "
                         f"(prepare {fmt_s(t.get('prepare'))}, run-samples {fmt_s(t.get('run-samples'))}) | "
                         f"{split} |")
        bar = r.get("bar")
        if bar:
            lines.append("")
            for k, v in bar.items():
                lines.append(f"- {k}: {v}")
    return "\n".join(lines)


def check_bar(r: dict) -> dict:
    q, o = r.get("qopt", {}), r.get("ort", {})
    mm, hi = q.get("calibrate, observer=minmax"), q.get("calibrate, observer=histogram")
    out = {}
    ort_mm = o.get("MinMax")
    hi = hi if hi and "error" not in hi else None
    mm = mm if mm and "error" not in mm else None
    if hi and ort_mm and "error" not in ort_mm:
        # Like for like: the loop over the samples alone on both sides, then
        # calibration with its setup (qopt: the whole calibrate pass, which
        # compiles the model and loads its weights; ORT: create_calibrator too).
        t, tmin = hi["timing_report"], hi["timing_min"]
        for what, qkey, key in (
                ("qopt run-samples / ORT MinMax collect + compute", "run-samples", "calibration"),
                ("qopt calibrate pass / ORT MinMax calibration incl. setup", "calibrate", "calibration_with_setup")):
            if qkey not in t:
                continue
            ratio = t[qkey] / ort_mm[key]["median_s"]
            rmin = tmin[qkey] / ort_mm[key]["min_s"]
            out[f"histogram observers: {what}"] = (f"{ratio:.2f}x of medians, {rmin:.2f}x of minima "
                                                   f"({'PASS' if ratio < 1 else 'FAIL'}: must be < 1)")
        ratio = hi["median_s"] / ort_mm["quantize_static"]["median_s"]
        out["histogram observers: whole qopt command / ORT MinMax whole quantize_static"] = f"{ratio:.2f}x"
    if hi and mm:
        ratio = hi["median_s"] / mm["median_s"]
        rmin = hi["min_s"] / mm["min_s"]
        out["qopt histogram / qopt minmax (whole command)"] = (
            f"{ratio:.2f}x of medians, {rmin:.2f}x of minima ({'PASS' if ratio <= 1.5 else 'FAIL'}: must be <= 1.5)")
        a, b = hi["timing_report"].get("calibrate"), mm["timing_report"].get("calibrate")
        if a and b:
            out["qopt histogram / qopt minmax (calibrate pass, medians of --timing runs)"] = f"{a / b:.2f}x"
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="resnet_tiny,resnet18ish")
    ap.add_argument("--methods", default=",".join(ORT_METHODS), help="ORT calibration methods")
    ap.add_argument("--runs", type=int, default=3, help="timed runs per ORT configuration")
    ap.add_argument("--qopt-runs", type=int, default=5, help="timed runs per qopt command (after 1 warm-up)")
    ap.add_argument("--threads", type=int, default=2, help="ORT intra-op threads")
    ap.add_argument("--json", help="write the JSON report to this file ('-': stdout, the table then goes to stderr)")
    ap.add_argument("--models-dir", type=Path, default=C.DEFAULT_MODELS_DIR)
    ap.add_argument("--bin-dir", type=Path, default=C.DEFAULT_BIN_DIR)
    ap.add_argument("--work-dir", type=Path, default=C.DEFAULT_WORK_DIR)
    ap.add_argument("--skip-ort", action="store_true")
    ap.add_argument("--skip-qopt", action="store_true")
    ap.add_argument("--no-full", action="store_true", help="skip the qopt pipelines that end in insert-fakeq")
    ap.add_argument("--wait-for-passes", type=float, default=0, metavar="SECONDS",
                    help="if qopt lacks calibrate, rebuild and poll every SECONDS until it has it")
    args = ap.parse_args()

    C.force_ort_threads(args.threads)
    bins = None
    if not args.skip_qopt:
        needed = {"fold-bn", "insert-observers", "calibrate"} | (set() if args.no_full else {"insert-fakeq"})
        C.wait_for_passes(args.bin_dir, needed, args.wait_for_passes, rebuild=args.wait_for_passes > 0)
        bins = C.binaries(args.bin_dir)

    import numpy as np
    import onnxruntime

    report = {"machine": {"platform": platform.platform(), "python": platform.python_version(),
                          "onnxruntime": onnxruntime.__version__, "ort_threads": args.threads},
              "models": {}}
    for name in args.models.split(","):
        d = C.model_dir(name, args.models_dir, args.work_dir)
        calib = C.calib_file(d)
        work = args.work_dir / "bench" / name
        work.mkdir(parents=True, exist_ok=True)
        r = {"model": str(d / "model.onnx"), "calib": str(calib),
             "calibration_samples": int(np.load(calib, mmap_mode="r").shape[0])}
        load0 = os.getloadavg()[0]
        C.log(f"== {name}: {r['calibration_samples']} samples from {calib}; load average {load0:.2f}")
        if load0 > 1.0:
            C.log("warning: the machine is busy (load average > 1 on 2 cores); timings will be disturbed")
        if not args.skip_ort:
            with contextlib.redirect_stdout(sys.stderr):  # ORT's calibrators print progress
                r["ort"] = bench_ort(d / "model.onnx", calib, args.methods.split(","), args.runs, work)
        if bins:
            r["qopt"] = bench_qopt(bins, d / "model.onnx", calib, args.qopt_runs, work, not args.no_full)
        r["load"] = "%.2f at start, %.2f at end" % (load0, os.getloadavg()[0])
        r["bar"] = check_bar(r)
        report["models"][name] = r

    text = table(report)
    if args.json == "-":
        print(text, file=sys.stderr)
        json.dump(report, sys.stdout, indent=1)
        print()
    else:
        print(text)
        if args.json:
            Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
