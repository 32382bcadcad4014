"""Helpers shared by the scripts in this folder: where the models and the qopt binaries are,
running a command, timing it, and generating the resnet18ish model with its data.

Not a script of its own; `ort_calibration_bench.py` and `quant_eval.py` import it.
"""
from __future__ import annotations

import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent
REPO = SCRIPTS.parent
DEFAULT_MODELS_DIR = Path(os.environ.get("QOPT_MODELS_DIR", REPO / ".." / "shared" / "models"))
DEFAULT_BIN_DIR = Path(os.environ.get("QOPT_BIN_DIR", REPO / "target" / "release"))
DEFAULT_WORK_DIR = SCRIPTS / ".work"

# The generated model: ResNet-18 topology, 1x3x224x224 -> 1000, seeded random weights.
RESNET18ISH = "resnet18ish"
# Calibration data of resnet18ish: standard normal samples with this seed (the generator's own
# calib.npy has 8 samples; the benchmarks use this larger, equally deterministic set).
RESNET18ISH_CALIB_SEED = 20240601
RESNET18ISH_CALIB_SAMPLES = 16


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def fmt_cmd(cmd) -> str:
    return " ".join(shlex.quote(str(c)) for c in cmd)


def run(cmd, *, capture=True, check=True, quiet=False) -> subprocess.CompletedProcess:
    """Runs a command; on failure prints it with its output and raises."""
    if not quiet:
        log("$ " + fmt_cmd(cmd))
    p = subprocess.run([str(c) for c in cmd], capture_output=capture, text=True)
    if check and p.returncode != 0:
        raise RuntimeError(
            f"command failed (exit {p.returncode}): {fmt_cmd(cmd)}\n"
            f"--- stdout ---\n{(p.stdout or '')[-4000:]}\n--- stderr ---\n{(p.stderr or '')[-4000:]}"
        )
    return p


def time_cmd(cmd, runs: int, warmup: int = 1) -> dict:
    """Wall time of a command: `warmup` untimed runs, then `runs` timed ones."""
    log(f"$ {fmt_cmd(cmd)}   (x{warmup} warm-up, x{runs} timed)")
    for _ in range(warmup):
        run(cmd, quiet=True)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        run(cmd, quiet=True)
        times.append(time.perf_counter() - t0)
    return summarize(times)


def summarize(times: list[float]) -> dict:
    return {
        "median_s": statistics.median(times),
        "min_s": min(times),
        "max_s": max(times),
        "runs": len(times),
        "all_s": times,
    }


def binaries(bin_dir: Path) -> dict[str, Path]:
    out = {}
    for name in ("qopt", "qimport", "qrun", "qcompile"):
        p = bin_dir / name
        if not p.exists():
            raise SystemExit(
                f"{p} not found: build with `CARGO_TARGET_DIR={bin_dir.parent} cargo build --release -p qopt-tools`"
            )
        out[name] = p
    return out


def list_passes(qopt: Path) -> set[str]:
    p = run([qopt, "--list-passes"], quiet=True)
    names = set()
    for line in p.stdout.splitlines():
        if line.startswith("  ") and not line.startswith("    "):
            names.add(line.split()[0])
    return names


def wait_for_passes(bin_dir: Path, needed: set[str], poll_s: float, rebuild: bool) -> None:
    """Blocks until `qopt --list-passes` shows every pass of `needed` (rebuilding between polls)."""
    while True:
        if rebuild:
            env = dict(os.environ, CARGO_TARGET_DIR=str(bin_dir.parent))
            r = subprocess.run(["cargo", "build", "--release", "-p", "qopt-tools"], cwd=REPO, env=env,
                               capture_output=True, text=True)
            if r.returncode != 0:
                log("build failed (someone may be mid-edit); retrying later:\n" + r.stderr[-2000:])
        if (bin_dir / "qopt").exists():
            missing = needed - list_passes(bin_dir / "qopt")
            if not missing:
                return
            log(f"qopt lacks passes {sorted(missing)}; polling again in {poll_s:.0f} s")
        if poll_s <= 0:
            raise SystemExit("required qopt passes are missing")
        time.sleep(poll_s)


def model_dir(name: str, models_dir: Path, work_dir: Path) -> Path:
    """The folder of a model; resnet18ish is generated under the work folder on first use."""
    if name == RESNET18ISH:
        d = work_dir / "models" / RESNET18ISH
        ensure_resnet18ish(d, models_dir)
        return d
    d = models_dir / name
    if not (d / "model.onnx").exists():
        raise SystemExit(f"no model.onnx in {d}")
    return d


def ensure_resnet18ish(d: Path, models_dir: Path) -> None:
    """Writes model.onnx, calib.npy (8) and test.npy (2) with scripts/make_resnet18ish.py, plus
    calib16.npy (RESNET18ISH_CALIB_SAMPLES standard-normal samples, fixed seed), and, when
    onnxruntime is importable, ref_fp32.npy (ONNX Runtime float outputs on test.npy),
    ort_qdq_minmax.onnx (quantize_static: QDQ, int8 activations asymmetric, per-channel int8
    symmetric weights, MinMax on calib16.npy) and ref_ort_int8.npy (that model's outputs with
    graph optimizations disabled), as the shared folder holds them for the other models."""
    import numpy as np

    if not (d / "model.onnx").exists():
        d.mkdir(parents=True, exist_ok=True)
        run([sys.executable, Path(__file__).resolve().parent / "make_resnet18ish.py", d])
    calib = d / "calib16.npy"
    if not calib.exists():
        rng = np.random.default_rng(RESNET18ISH_CALIB_SEED)
        np.save(calib, rng.standard_normal((RESNET18ISH_CALIB_SAMPLES, 3, 224, 224)).astype(np.float32))
    try:
        import onnxruntime as ort  # noqa: F401
    except ImportError:
        return
    if not (d / "ref_fp32.npy").exists():
        np.save(d / "ref_fp32.npy", ort_run(d / "model.onnx", np.load(d / "test.npy"), optimize=True))
    if not (d / "ref_ort_int8.npy").exists():
        if not (d / "ort_qdq_minmax.onnx").exists():
            ort_quantize(d / "model.onnx", d / "ort_qdq_minmax.onnx", np.load(calib), "MinMax")
        np.save(d / "ref_ort_int8.npy", ort_run(d / "ort_qdq_minmax.onnx", np.load(d / "test.npy"), optimize=False))


def calib_file(d: Path) -> Path:
    c = d / "calib16.npy"
    return c if c.exists() else d / "calib.npy"


# --- ONNX Runtime (used for references and for the calibration benchmark only) -------------

def ort_session_options(threads: int = 0, optimize: bool = True):
    import onnxruntime as ort

    so = ort.SessionOptions()
    if threads:
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
    if not optimize:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return so


def ort_run(model: Path, x, optimize: bool = True, threads: int = 0):
    """Runs a batch-1 model over every sample of x (dim 0); returns the stacked first output."""
    import numpy as np
    import onnxruntime as ort

    s = ort.InferenceSession(str(model), ort_session_options(threads, optimize), providers=["CPUExecutionProvider"])
    name = s.get_inputs()[0].name
    return np.concatenate([s.run(None, {name: x[i:i + 1]})[0] for i in range(x.shape[0])])


def ort_reader(model: Path, x):
    """A CalibrationDataReader over the samples of x, one sample per call."""
    import onnx
    from onnxruntime.quantization import CalibrationDataReader

    name = onnx.load(str(model), load_external_data=False).graph.input[0].name

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.i = 0

        def get_next(self):
            if self.i >= x.shape[0]:
                return None
            self.i += 1
            return {name: x[self.i - 1:self.i]}

        def __len__(self):
            return x.shape[0]

        def set_range(self, start_index, end_index):  # for CalibStridedMinMax
            raise NotImplementedError

    return Reader()


# The scheme of the shared reference models (README): QDQ, int8 activations (asymmetric),
# per-channel int8 weights (symmetric, ORT's default for int8 weights).
ORT_EXTRA_OPTIONS = {"ActivationSymmetric": False, "WeightSymmetric": True}


def ort_preprocess(model: Path, out: Path) -> None:
    """ONNX Runtime's recommended pre-processing (quant_pre_process: ORT's basic graph
    optimizations, which fold BatchNormalization into Conv, plus ONNX shape inference; the
    sympy-based symbolic shape inference is skipped, the models have static shapes). With it,
    quantize_static MinMax reproduces the shared ort_qdq_minmax.onnx files bit for bit."""
    import contextlib

    from onnxruntime.quantization.shape_inference import quant_pre_process

    with contextlib.redirect_stdout(sys.stderr):
        quant_pre_process(str(model), str(out), skip_symbolic_shape=True)


def ort_quantize(model: Path, out: Path, calib, method: str, preprocess: bool = True):
    """quantize_static with the reference scheme; `model` is pre-processed first unless told not to."""
    import contextlib
    import tempfile

    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static

    with tempfile.TemporaryDirectory(prefix="ortpre.") as tmp, contextlib.redirect_stdout(sys.stderr):
        src = model
        if preprocess:
            src = Path(tmp) / "pre.onnx"
            ort_preprocess(model, src)
        quantize_static(
            str(src), str(out), ort_reader(src, calib),
            quant_format=QuantFormat.QDQ, per_channel=True,
            activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
            calibrate_method=CalibrationMethod[method], extra_options=dict(ORT_EXTRA_OPTIONS),
        )


def force_ort_threads(threads: int) -> None:
    """Makes every onnxruntime.SessionOptions() created from now on (including the one ORT's
    calibrator creates inside quantize_static) use `threads` intra-op threads."""
    import onnxruntime as ort

    base = ort.SessionOptions
    if getattr(base, "_qopt_threads", None) is not None:
        base = base.__mro__[1]

    class ThreadedSessionOptions(base):
        _qopt_threads = threads

        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            self.intra_op_num_threads = threads
            self.inter_op_num_threads = 1

    ort.SessionOptions = ThreadedSessionOptions


def ort_latencies_ms(model: Path, threads: int, runs: int, x=None) -> list[float]:
    """ONNX Runtime's latency of `runs` timed runs of `model` (default graph
    optimizations, `threads` intra-op threads) on `x` as its first input (by
    default standard normal with dynamic dimensions 1), after 3 warm-up runs."""
    import time

    import numpy as np
    import onnxruntime as ort

    s = ort.InferenceSession(str(model), ort_session_options(threads), providers=["CPUExecutionProvider"])
    spec = s.get_inputs()[0]
    shape = [d if isinstance(d, int) else 1 for d in spec.shape]
    if x is None:
        x = np.random.default_rng(1).standard_normal(shape, dtype=np.float32)
    for _ in range(3):
        s.run(None, {spec.name: x})
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        s.run(None, {spec.name: x})
        times.append((time.perf_counter() - start) * 1e3)
    return times
