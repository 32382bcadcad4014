#!/usr/bin/env python3
"""Latency of qopt's x86 backend against ONNX Runtime's int8 CPU kernels, side by side.

usage: scripts/.venv/bin/python scripts/x86_vs_ort.py
           [--models all|reference|import|NAME,...] [--runs 30] [--rounds 3] [--threads 1,2]
           [--configs default,reduce-range] [--alternate]

Models: `reference` is every model of ../shared/models that imports (digits_mlp, digits_cnn,
resnet_tiny, mnist_mbv2) plus resnet18ish; `import` is every exporter-style model of
tests/import-models (its calibration set: 16 perturbed copies of its input_0.npy, written under
scripts/.work); `all` (the default) is both.

For each model, in one process run on one machine:
  ONNX Runtime: the float model quantized by quantize_static (MinMax on the model's calibration
    set, per-channel int8 weights), with uint8 and with int8 activations, each in QDQ and in
    QOperator format (a variant ONNX Runtime cannot quantize or run is left out), each run
    with `intra_op_num_threads` = 1 and 2 (graph optimizations on, the default), median of
    --runs runs after a warm-up;
  qopt: `qimport` + `qopt --pass='quantize{data=calib}'` (plus the config's options), then
    `qrun q.qir --backend=x86 --bench RUNS --threads T` on the same input as ONNX Runtime
    (compiled once, not timed; its compile time is printed too).
The two are timed alternately, --rounds times (ORT, qopt, ORT, qopt, ...), and each keeps its best
median, so that load from elsewhere on a shared machine hits both alike; the table shows those
medians and the ratio ORT/qopt (> 1: qopt is faster) against ORT's fastest variant.

With --alternate (one thread): the model is compiled ahead of time instead (`qcompile` and the
system C compiler make a shared library, called through ctypes) and ONNX Runtime's two models
and qopt's run in turn in this one process, in blocks of 12 inferences (the first 2 of each
untimed), about --runs inferences each: all three see the same load at the same time.
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import qopt_common as C  # noqa: E402

CONFIGS = {"default": "", "reduce-range": "reduce-range=true"}
REFERENCE_MODELS = ["digits_mlp", "digits_cnn", "resnet_tiny", "mnist_mbv2", C.RESNET18ISH]
IMPORT_MODELS_DIR = C.REPO / "tests" / "import-models"
# ONNX Runtime's variants: (format, activation type).
ORT_VARIANTS = [("QDQ", "QUInt8"), ("QOperator", "QUInt8"), ("QDQ", "QInt8"), ("QOperator", "QInt8")]



def older_than(path, source):
    """Whether `path` is missing or older than `source` (a tool or an input
    it was made from): cached models are remade after a rebuild of qopt."""
    return not Path(path).exists() or Path(path).stat().st_mtime < Path(source).stat().st_mtime

def import_models() -> list[str]:
    return sorted(d.name for d in IMPORT_MODELS_DIR.iterdir() if (d / "model.onnx").exists())


def model_names(spec: str) -> list[str]:
    groups = {"reference": REFERENCE_MODELS, "import": import_models()}
    groups["all"] = groups["reference"] + groups["import"]
    return groups.get(spec, spec.split(","))


def prepared_model(name: str, args, work: Path):
    """(folder with model.onnx, calibration .npy, qimport's extra arguments, the input ONNX
    Runtime and qrun both time, as an array and a .npy path or None for random inputs)."""
    import numpy as np

    imported = IMPORT_MODELS_DIR / name
    if not (imported / "model.onnx").exists():
        d = C.model_dir(name, args.models_dir, C.DEFAULT_WORK_DIR)
        return d, C.calib_file(d), ["--batch", "1"], None, None
    sample_path = imported / "input_0.npy"
    sample = np.load(sample_path)
    calib = work / "calib.npy"
    if not calib.exists():
        rng = np.random.default_rng(7)
        if np.issubdtype(sample.dtype, np.floating):
            copies = [sample * (1 + 0.25 * rng.uniform(-1, 1, sample.shape)) + 0.25 * rng.uniform(-1, 1, sample.shape)
                      for _ in range(16)]
        else:  # token ids: the sample's ids, shuffled
            copies = [rng.permutation(sample.ravel()).reshape(sample.shape) for _ in range(16)]
        np.save(calib, np.concatenate(copies).astype(sample.dtype))
    extra = (imported / "args").read_text().split() if (imported / "args").exists() else []
    return imported, calib, extra, sample, sample_path


def ort_model(model: Path, out: Path, calib, fmt: str, activations: str) -> None:
    """quantize_static with `activations` (QUInt8 or QInt8) in format `fmt` (QDQ or QOperator)."""
    import contextlib
    import tempfile

    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static

    with tempfile.TemporaryDirectory(prefix="ortpre.") as tmp, contextlib.redirect_stdout(sys.stderr):
        pre = Path(tmp) / "pre.onnx"
        C.ort_preprocess(model, pre)
        quantize_static(
            str(pre), str(out), C.ort_reader(pre, calib),
            quant_format=QuantFormat[fmt], per_channel=True,
            activation_type=QuantType[activations], weight_type=QuantType.QInt8,
            calibrate_method=CalibrationMethod.MinMax,
        )


def ort_median_ms(model: Path, threads: int, runs: int, x) -> float:
    """Median ms of ONNX Runtime on `x` (None: standard normal) as the first input, after warm-up."""
    return statistics.median(C.ort_latencies_ms(model, threads, runs, x))


def qopt_bench(bins: dict, qir: Path, threads: int, runs: int, x_path) -> tuple[float, float]:
    """(median ms, compile ms) of `qrun --backend=x86 --bench` on `x_path` (None: random inputs)."""
    inputs = ["--input", x_path] if x_path else ["--random-inputs"]
    out = C.run([bins["qrun"], qir, *inputs, "--backend=x86", "--threads", str(threads),
                 "--bench", str(runs)]).stdout
    median = float(re.search(r"latency: median ([0-9.]+) ms", out).group(1))
    compiled = re.search(r"compiled in ([0-9.]+) ms", out)
    return median, float(compiled.group(1)) if compiled else float("nan")


def compiled_library(bins: dict, qir: Path, out_dir: Path):
    """`qcompile` + the system C compiler: the model as a shared library, loaded with ctypes,
    and its `run` entry (float buffers in, float buffers out) with its buffer sizes."""
    import ctypes
    import shutil

    obj, lib, header = out_dir / f"{qir.stem}.o", out_dir / f"lib{qir.stem}.so", out_dir / f"{qir.stem}.h"
    C.run([bins["qcompile"], qir, "-o", obj, "--header", header, "--prefix", "qm"])
    cc = os.environ.get("CC") or shutil.which("cc") or "gcc"
    C.run([cc, "-shared", "-o", lib, obj])
    text = header.read_text()
    macro = lambda name: int(re.search(rf"#define QM_{name} \(?(-?\d+)\)?", text).group(1))
    sizes = ([macro(f"INPUT{i}_ELEMENTS") for i in range(macro("NUM_INPUTS"))],
             [macro(f"OUTPUT{i}_ELEMENTS") for i in range(macro("NUM_OUTPUTS"))])
    so = ctypes.CDLL(str(lib))
    so.qm_run.restype = ctypes.c_int
    return so, sizes


def alternate(bins: dict, ort_models: dict, qir: Path, out_dir: Path, runs: int, x=None) -> dict:
    """One thread, one process: ONNX Runtime's two models and qopt's compiled library run in
    turn, in short blocks of inferences (the first two of each block untimed), about `runs`
    timed inferences each; the median of each. A burst of load on a shared machine lands on all
    three alike. ONNX Runtime goes through its Python API (about 8 us per run on an Identity
    model), qopt through ctypes."""
    import ctypes

    import numpy as np
    import onnxruntime as ort

    so, (in_sizes, out_sizes) = compiled_library(bins, qir, out_dir)
    sessions = {f: ort.InferenceSession(str(p), C.ort_session_options(1), providers=["CPUExecutionProvider"])
                for f, p in ort_models.items()}
    spec = next(iter(sessions.values())).get_inputs()[0]
    shape = [d if isinstance(d, int) else 1 for d in spec.shape]
    if x is None:
        x = np.random.default_rng(1).standard_normal(shape, dtype=np.float32)
    if len(in_sizes) != 1 or in_sizes[0] != x.size:
        raise RuntimeError(f"{qir}: the library takes inputs of {in_sizes} elements, ONNX Runtime {x.size}")
    outs = [np.empty(n, dtype=np.float32) for n in out_sizes]
    args = [x.ctypes.data_as(ctypes.c_void_p)] + [o.ctypes.data_as(ctypes.c_void_p) for o in outs]

    def ours():
        rc = so.qm_run(*args)
        if rc != 0:
            raise RuntimeError(f"qm_run returned {rc}")

    runners = {f: (lambda s=s: s.run(None, {spec.name: x})) for f, s in sessions.items()}
    runners["qopt"] = ours
    times = {k: [] for k in runners}
    # Blocks of BLOCK inferences, the first WARM of each untimed: one inference each in turn
    # would have each evict the other's weights and activations from cache.
    block, warm = 12, 2
    for _ in range(max(1, runs // (block - warm))):
        for k, f in runners.items():
            for i in range(block):
                start = time.perf_counter()
                f()
                if i >= warm:
                    times[k].append((time.perf_counter() - start) * 1e3)
    return {k: statistics.median(v) for k, v in times.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="all", help="all, reference, import, or names separated by commas")
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--configs", default="default,reduce-range")
    ap.add_argument("--alternate", action="store_true",
                    help="one thread only: time ONNX Runtime and qopt's compiled library (qcompile + cc) "
                         "in turn in this process, in blocks of 12 inferences, about --runs each")
    ap.add_argument("--bin-dir", type=Path, default=C.DEFAULT_BIN_DIR)
    ap.add_argument("--models-dir", type=Path, default=C.DEFAULT_MODELS_DIR)
    args = ap.parse_args()
    import numpy as np

    bins = C.binaries(args.bin_dir)
    work = C.DEFAULT_WORK_DIR / "x86"
    rows = []
    for name in model_names(args.models):
        mw = work / name
        mw.mkdir(parents=True, exist_ok=True)
        d, calib_path, import_args, x, x_path = prepared_model(name, args, mw)
        calib = np.load(calib_path)
        ort_models = {}
        for fmt, activations in ORT_VARIANTS:
            label = f"{fmt} {'u8' if activations == 'QUInt8' else 's8'}"
            path = mw / f"ort_{activations.lower()}_{fmt.lower()}.onnx"
            failed = mw / f"{path.name}.failed"
            if not path.exists() and not failed.exists():
                try:
                    ort_model(d / "model.onnx", path, calib, fmt, activations)
                    ort_median_ms(path, 1, 1, x)
                except Exception as e:  # noqa: BLE001 - a variant ONNX Runtime refuses is left out
                    C.log(f"{name}: ONNX Runtime {label}: {e}")
                    path.unlink(missing_ok=True)
                    failed.write_text(str(e))
            if path.exists():
                ort_models[label] = path
        fp = mw / "fp.qir"
        if older_than(fp, bins["qimport"]):
            C.run([bins["qimport"], d / "model.onnx", "-o", fp, *import_args])
        for cfg in args.configs.split(","):
            q = mw / f"q_{cfg}.qir"
            if older_than(q, bins["qopt"]) or older_than(q, fp):
                opts = f" {CONFIGS[cfg]}" if CONFIGS[cfg] else ""
                C.run([bins["qopt"], fp, f"--pass=quantize{{data={calib_path}{opts}}}", "-o", q])
            if args.alternate:
                med = alternate(bins, ort_models, q, mw, args.runs, x)
                ours = med.pop("qopt")
                rows.append((name, cfg, 1, med, ours, min(med.values()) / ours, float("nan")))
                C.log(f"{name} {cfg} alternating: ORT {med}, qopt {ours:.3f} ms")
                continue
            for threads in (int(t) for t in args.threads.split(",")):
                # Interleaved rounds; each side keeps its best median, so a burst of load
                # on the shared machine during one round does not decide the row.
                ort = {f: float("inf") for f in ort_models}
                ours, compile_ms = float("inf"), float("nan")
                for _ in range(args.rounds):
                    for f, p in ort_models.items():
                        ort[f] = min(ort[f], ort_median_ms(p, threads, args.runs, x))
                    median, compile_ms = qopt_bench(bins, q, threads, args.runs, x_path)
                    ours = min(ours, median)
                rows.append((name, cfg, threads, ort, ours, min(ort.values()) / ours, compile_ms))
                C.log(f"{name} {cfg} {threads}t: ORT " + ", ".join(f"{k} {v:.3f} ms" for k, v in ort.items())
                      + f"; qopt x86 {ours:.3f} ms")
    labels = [f"{fmt} {'u8' if a == 'QUInt8' else 's8'}" for fmt, a in ORT_VARIANTS]
    print("| model | qopt config | threads | " + " | ".join(f"ORT {l} ms" for l in labels)
          + " | qopt x86 ms | ORT best / qopt | qopt compile ms |")
    print("|---|---|---|" + "---|" * len(labels) + "---|---|---|")
    for name, cfg, threads, ort, ours, ratio, compile_ms in rows:
        compiled = "-" if compile_ms != compile_ms else f"{compile_ms:.0f}"
        cells = " | ".join(f"{ort[l]:.3f}" if l in ort else "-" for l in labels)
        print(f"| {name} | {cfg} | {threads} | {cells} | {ours:.3f} | {ratio:.2f}x | {compiled} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
