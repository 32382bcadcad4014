"""qexport's int8 files in ONNX Runtime on an x86 CPU with AVX2 and without VNNI, against qrun.

ONNX Runtime's int8 kernels depend on the CPU: with VNNI (or AVX-512 VNNI, AMX) they are
exact, on AVX2 alone its u8 x s8 kernels add pairs of products with `vpmaddubsw`, which
saturates at i16 (docs/onnx-export.md, "In ONNX Runtime"). To measure the AVX2 kernels on any
x86 machine, ONNX Runtime runs under `qemu-x86_64 -cpu Haswell` (QEMU >= 7.2 emulates AVX2;
`apt-get install qemu-user`), which makes its CPU detection pick the AVX2 kernels.

For each model: `qimport` its model.onnx, `qopt --pass='quantize{data=calib.npy}'`, `qrun` on
its test.npy (the reference), `qexport` in each format (qdq, qoperator, auto = the default),
and ONNX Runtime with graph optimizations off and on (the default session). Prints the
largest difference in output steps (the scale of the output's DequantizeLinear), the share
of elements that differ and top-1 agreement with qrun.

    scripts/.venv/bin/python scripts/ort_avx2_check.py --markdown avx2.md
    scripts/.venv/bin/python scripts/ort_avx2_check.py --models mnist_mbv2 --samples 100   # ~15 min
    scripts/.venv/bin/python scripts/ort_avx2_check.py --models digits_mlp --cpu max   # the host's kernels
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import qopt_common as qc  # noqa: E402

MODELS = ["digits_mlp", "digits_cnn", "resnet_tiny", "mnist_mbv2"]
FORMATS = ["qdq", "qoperator", "auto"]

# Runs in the emulated process: one model, one optimization level, every sample.
CHILD = r"""
import json, sys
import numpy as np
import onnxruntime as ort
model, test, out, optimize = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "on"
so = ort.SessionOptions()
so.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimize
                               else ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
so.intra_op_num_threads = 1
s = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
x = np.load(test)
name = s.get_inputs()[0].name
np.save(out, np.concatenate([s.run(None, {name: x[i:i + 1]})[0] for i in range(x.shape[0])]))
"""


def output_step(path: Path) -> float:
    import onnx
    from onnx import numpy_helper

    m = onnx.load(str(path))
    outs = {o.name for o in m.graph.output}
    inits = {i.name: i for i in m.graph.initializer}
    for node in m.graph.node:
        if node.op_type == "DequantizeLinear" and node.output[0] in outs:
            return float(numpy_helper.to_array(inits[node.input[1]]))
    raise SystemExit(f"{path}: the output is not a DequantizeLinear")


def ort_outputs(args, model: Path, test: Path, out: Path, optimize: bool) -> np.ndarray:
    cmd = [sys.executable, "-c", CHILD, model, test, out, "on" if optimize else "off"]
    if args.cpu != "max":
        cmd = ["qemu-x86_64", "-cpu", args.cpu] + cmd
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"{qc.fmt_cmd(cmd)} failed:\n{p.stderr}")
    return np.load(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="*", default=MODELS)
    ap.add_argument("--cpu", default="Haswell", help="QEMU CPU model (AVX2, no VNNI), or 'max' to run natively")
    ap.add_argument("--models-dir", type=Path, default=qc.DEFAULT_MODELS_DIR)
    ap.add_argument("--bin-dir", type=Path, default=qc.DEFAULT_BIN_DIR)
    ap.add_argument("--work-dir", type=Path, default=qc.DEFAULT_WORK_DIR / "ort-avx2")
    ap.add_argument("--samples", type=int, default=0, help="only the first N test samples (emulation is slow)")
    ap.add_argument("--markdown", type=Path)
    args = ap.parse_args()
    bins = qc.binaries(args.bin_dir)
    bins["qexport"] = args.bin_dir / "qexport"
    rows = []
    for name in args.models:
        d = args.models_dir / name
        out = args.work_dir / name
        out.mkdir(parents=True, exist_ok=True)
        test = d / "test.npy"
        if args.samples:
            np.save(out / "test.npy", np.load(test)[: args.samples])
            test = out / "test.npy"
        qc.run([bins["qimport"], d / "model.onnx", "-o", out / "float.qir"])
        qc.run([bins["qopt"], out / "float.qir", f"--pass=quantize{{data={qc.calib_file(d)}}}", "-o", out / "int8.qir"])
        qc.run([bins["qrun"], out / "int8.qir", "--input", test, "--batch", "-o", out / "qrun.npz"])
        want = next(iter(np.load(out / "qrun.npz").values()))
        for fmt in FORMATS:
            onnx_path = out / f"int8.{fmt}.onnx"
            summary = qc.run([bins["qexport"], out / "int8.qir", "-o", onnx_path, f"--format={fmt}"]).stderr.strip()
            step = output_step(onnx_path)
            row = {"model": name, "format": fmt, "samples": int(want.shape[0]), "qexport": summary}
            for optimize in (False, True):
                got = ort_outputs(args, onnx_path, test, out / f"int8.{fmt}.{optimize}.npy", optimize)
                diff = np.abs(got.astype(np.float64) - want)
                row["on" if optimize else "off"] = {
                    "max_steps": int(np.round(diff.max() / step)),
                    "differ": float((diff > 0).mean()),
                    "top1": float((got.argmax(1) == want.argmax(1)).mean()),
                }
            rows.append(row)
            qc.log(json.dumps(row))
    lines = [
        f"| model | format | samples | ORT off vs qrun: max steps (elements differing) | ORT on (default session): max steps (elements differing) | top-1 agreement off / on |",
        "|---|---|---:|---|---|---|",
    ]
    for r in rows:
        cell = lambda m: f"{m['max_steps']} ({m['differ'] * 100:.2f} %)"  # noqa: E731
        lines.append(
            f"| {r['model']} | {r['format']} | {r['samples']} | {cell(r['off'])} | {cell(r['on'])} | "
            f"{r['off']['top1'] * 100:.2f} % / {r['on']['top1'] * 100:.2f} % |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    if args.markdown:
        args.markdown.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
