"""qexport's files in ONNX and ONNX Runtime, against qrun.

For every reference model (the shared models, and resnet18ish when it is under
scripts/.work/models or --resnet18ish asks to generate it), float, quantized by
`qopt --pass='quantize{data=calib.npy}'` and quantized with reduce-range weights
(`quantize{data=calib.npy reduce-range}`, 7-bit weights as ONNX Runtime's reduce_range), and for
each export format (QDQ, QOperator, and the default `auto`: QDQ with QLinear ops for the
layers whose int8 weights could saturate ONNX Runtime's u8 x s8 kernels):

1. `qexport` writes the model; `onnx.checker.check_model(full_check=True)` must accept it;
2. ONNX Runtime runs it on the test samples, with graph optimizations off (the ops as ONNX
   defines them) and on (ORT's fused int8 kernels), and its outputs are compared with qrun's
   outputs of the .qir it came from: the largest difference, in output quantization steps for
   quantized models (the scale of the output's DequantizeLinear), and the share of elements
   that differ;
3. `qimport` reads the file back (a QDQ or auto file of a quantized model then goes through
   `qopt --pass=fuse,canonicalize,dce`, the end of the quantize pipeline) and qrun must give
   bit-identical outputs.

Prints one table (Markdown with --markdown FILE too). Exit status 1 if the checker rejects
a file or a re-import is not bit-identical; differences from ONNX Runtime are reported, not
judged (docs/onnx-export.md explains them).

    scripts/.venv/bin/python scripts/ort_crosscheck.py                  # every model found
    scripts/.venv/bin/python scripts/ort_crosscheck.py --models digits_cnn --samples 50
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import qopt_common as qc  # noqa: E402

SHARED_MODELS = ["digits_mlp", "digits_cnn", "resnet_tiny", "mnist_mbv2"]
FORMATS = ["qdq", "qoperator", "auto"]
# The models checked per reference model: the float one and two quantizations (pass options).
KINDS = {"float": None, "int8": "", "int8-reduce-range": " reduce-range"}


def qrun_outputs(qrun: Path, qir: Path, test: Path, out: Path) -> np.ndarray:
    qc.run([qrun, qir, "--input", test, "--batch", "-o", out])
    with np.load(out) as z:
        return z[z.files[0]]


def output_step(model) -> float | None:
    """The scale of the DequantizeLinear that makes the graph's output, if one does."""
    from onnx import numpy_helper

    inits = {t.name: t for t in model.graph.initializer}
    out = model.graph.output[0].name
    for node in model.graph.node:
        if out in node.output and node.op_type == "DequantizeLinear" and node.input[1] in inits:
            return float(numpy_helper.to_array(inits[node.input[1]]).reshape(-1)[0])
    return None


def compare(got: np.ndarray, want: np.ndarray, step: float | None) -> dict:
    got = got.reshape(want.shape).astype(np.float64)
    want = want.astype(np.float64)
    diff = np.abs(got - want)
    row = {
        "max_abs": float(diff.max()),
        "differ": float((diff > 0).mean()),
        "top1": float((got.reshape(got.shape[0], -1).argmax(1) == want.reshape(want.shape[0], -1).argmax(1)).mean()),
    }
    if step:
        steps = np.rint(diff / step)
        row["max_steps"] = int(steps.max())
        row["over_one_step"] = int((steps > 1).sum())
    else:
        row["max_rel"] = float(diff.max() / max(np.abs(want).max(), 1e-30))
    return row


def check_model(name: str, args, bins: dict, work: Path) -> list[dict]:
    import onnx

    d = qc.model_dir(name, args.models_dir, args.work_dir)
    out = work / name
    out.mkdir(parents=True, exist_ok=True)
    test = d / "test.npy"
    if args.samples:
        x = np.load(test)[: args.samples]
        test = out / "test.npy"
        np.save(test, x)
    x = np.load(test)
    qc.run([bins["qimport"], d / "model.onnx", "-o", out / "float.qir"])
    calib = qc.calib_file(d)
    for kind, options in KINDS.items():
        if options is not None:
            qc.run([bins["qopt"], out / "float.qir", f"--pass=quantize{{data={calib}{options}}}", "-o", out / f"{kind}.qir"])
    rows = []
    for kind in KINDS:
        quantized = kind != "float"
        qir = out / f"{kind}.qir"
        want = qrun_outputs(bins["qrun"], qir, test, out / f"{kind}.qrun.npz")
        for fmt in FORMATS:
            onnx_path = out / f"{kind}.{fmt}.onnx"
            qc.run([bins["qexport"], qir, "-o", onnx_path, f"--format={fmt}"])
            model = onnx.load(str(onnx_path))
            row = {"model": name, "kind": kind, "format": fmt, "samples": int(x.shape[0])}
            try:
                onnx.checker.check_model(model, full_check=True)
                row["checker"] = "ok"
            except Exception as e:  # noqa: BLE001 - the checker's own exception types vary
                row["checker"] = f"FAIL: {e}"
            step = output_step(model) if quantized else None
            row["step"] = step
            for optimize in (False, True):
                got = qc.ort_run(onnx_path, x, optimize=optimize)
                row["ort_opt" if optimize else "ort"] = compare(got, want, step)
            back = out / f"{kind}.{fmt}.back.qir"
            qc.run([bins["qimport"], onnx_path, "-o", back])
            if quantized and fmt != "qoperator":
                qc.run([bins["qopt"], back, "--pass=fuse,canonicalize,dce", "-o", back])
            again = qrun_outputs(bins["qrun"], back, test, out / f"{kind}.{fmt}.back.npz")
            row["reimport_identical"] = bool(np.array_equal(again.view(np.uint32), want.view(np.uint32)))
            rows.append(row)
            qc.log(f"{name} {kind} {fmt}: {json.dumps(row)}")
    return rows


def describe(r: dict) -> str:
    if "max_steps" in r:
        return f"{r['max_steps']} step{'s' if r['max_steps'] != 1 else ''} ({r['differ'] * 100:.2f} % differ)"
    return f"{r['max_rel']:.1e} rel. ({r['differ'] * 100:.1f} % differ)"


def table(rows: list[dict]) -> str:
    lines = [
        "| model | model kind | format | samples | onnx.checker | ORT, optimizations off vs qrun | "
        "ORT, optimizations on vs qrun | top-1 agreement (off / on) | re-imported, qrun bit-identical |",
        "|---|---|---|---:|---|---|---|---|---|",
    ]
    for r in rows:
        kind = {"float": "float", "int8": "int8", "int8-reduce-range": "int8, reduce-range"}[r["kind"]]
        fmt = {"qdq": "QDQ", "qoperator": "QOperator", "auto": "auto (default)"}[r["format"]]
        top1 = f"{r['ort']['top1'] * 100:.1f} % / {r['ort_opt']['top1'] * 100:.1f} %"
        lines.append(
            f"| {r['model']} | {kind} | {fmt} | {r['samples']} | {r['checker']} | {describe(r['ort'])} | "
            f"{describe(r['ort_opt'])} | {top1} | {'yes' if r['reimport_identical'] else 'NO'} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="*", help="models to check (default: the shared ones, and resnet18ish if present)")
    ap.add_argument("--resnet18ish", action="store_true", help="generate resnet18ish if it is not there yet")
    ap.add_argument("--samples", type=int, default=0, help="run only the first N test samples of each model")
    ap.add_argument("--models-dir", type=Path, default=qc.DEFAULT_MODELS_DIR)
    ap.add_argument("--bin-dir", type=Path, default=qc.DEFAULT_BIN_DIR)
    ap.add_argument("--work-dir", type=Path, default=qc.DEFAULT_WORK_DIR)
    ap.add_argument("--markdown", type=Path, help="also write the table to this file")
    ap.add_argument("--json", type=Path, help="write every measured figure to this file")
    args = ap.parse_args()

    bins = qc.binaries(args.bin_dir)
    bins["qexport"] = args.bin_dir / "qexport"
    if not bins["qexport"].exists():
        raise SystemExit(f"{bins['qexport']} not found: build with `cargo build --release -p qopt-tools`")
    models = args.models
    if not models:
        models = list(SHARED_MODELS)
        if args.resnet18ish or (args.work_dir / "models" / qc.RESNET18ISH / "model.onnx").exists():
            models.append(qc.RESNET18ISH)
    work = args.work_dir / "ort-crosscheck"
    rows = []
    for name in models:
        rows.extend(check_model(name, args, bins, work))
    text = table(rows)
    print(text)
    if args.markdown:
        args.markdown.write_text(text)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    failed = [r for r in rows if r["checker"] != "ok" or not r["reimport_identical"]]
    for r in failed:
        qc.log(f"FAILED: {r['model']} {r['kind']} {r['format']}: checker {r['checker']}, "
               f"re-import identical: {r['reimport_identical']}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
