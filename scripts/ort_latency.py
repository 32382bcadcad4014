#!/usr/bin/env python3
"""Float inference latency of one model, ONNX Runtime and qopt's interpreter side by side.

Usage (after `cargo build --release -p qopt-tools` and the venv of scripts/README.md):

    scripts/.venv/bin/python scripts/ort_latency.py MODEL_DIR [--runs 20]

MODEL_DIR holds model.onnx (for example scripts/.work/models/resnet18ish, which
quant_eval.py generates). ONNX Runtime runs with one intra-op thread and its
default graph optimizations; qopt imports the model and times it with
`qrun --random-inputs --bench RUNS` (execution only, one thread). Both after a
warm-up, in the same process run, so the figures are comparable.
"""
import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import onnxruntime as ort

import qopt_common as C

REPO = Path(__file__).resolve().parent.parent


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model_dir", type=Path)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--bin-dir", type=Path, default=REPO / "target" / "release")
    args = ap.parse_args()
    onnx_path = args.model_dir / "model.onnx"

    times = C.ort_latencies_ms(onnx_path, 1, args.runs)
    print(f"onnxruntime {ort.__version__}, 1 thread: median {statistics.median(times):.2f} ms, "
          f"min {min(times):.2f} ms ({args.runs} runs)")

    with tempfile.TemporaryDirectory() as tmp:
        qir = Path(tmp) / "model.qir"
        subprocess.run([str(args.bin_dir / "qimport"), str(onnx_path), "-o", str(qir), "--batch", "1"], check=True)
        out = subprocess.run([str(args.bin_dir / "qrun"), str(qir), "--random-inputs", "--bench", str(args.runs)],
                             check=True, capture_output=True, text=True).stdout.strip()
        print(f"qopt interpreter, 1 thread: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
