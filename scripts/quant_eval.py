#!/usr/bin/env python3
"""Accuracy and SQNR of qopt's post-training quantization on the reference models, next to
ONNX Runtime's int8 figures.

usage: scripts/.venv/bin/python scripts/quant_eval.py
           [--models digits_mlp,digits_cnn,resnet_tiny,mnist_mbv2,resnet18ish]
           [--configs ort-exact,defaults,weight-mse,hist-percentile,hist-entropy,hist-mse,...|beyond]
           [--ort-methods MinMax,Percentile,Entropy] [--layers [--worst N]] [--json OUT.json | --json -]
           [--wait-for-passes SECONDS]

The model math is done by the qopt binaries only (numpy computes the metrics):
  qimport model.onnx -o fp.qir
  qopt fp.qir --pass='fold-bn,insert-observers{...},calibrate{data=calib.npy},insert-fakeq{...}' -o fq.qir
  qrun fq.qir --input test.npy --batch -o out.npz          (one member: [samples, classes])
The configurations of the README's "Beyond min-max" table (`--configs beyond`) add passes before
`insert-observers` (equalize, quantize-search), after `insert-fakeq` (bias-correct, round-weights), the
integer lowering, or a second qopt run on the first one's output (quantize-search, then quantize).
For each configuration: top-1 accuracy vs test_labels.npy (where present), top-1 agreement with
ref_fp32.npy (ONNX Runtime's float outputs) and SQNR = 10·log10(Σ ref² / Σ (out − ref)²) over all
test outputs. The same metrics are computed for ref_ort_int8.npy (ONNX Runtime's QDQ model,
optimizations off), for the float model run by qrun (`fp32 (qrun)`, should be ~exact) and for
ORT's QDQ model imported by qimport and run by qrun (`ORT QDQ (qrun)`).

With --ort-methods, ONNX Runtime also quantizes the model (quant_pre_process, then quantize_static,
QDQ, the reference scheme, with each calibration method) and the QDQ model is imported by qimport
and run by qrun: rows `ORT <method> (qrun)`; `ORT MinMax (qrun)` reproduces the shared
ort_qdq_minmax.onnx bit for bit.

With --layers, also runs `qrun fp.qir --input test.npy --batch --compare X.qir --json` for every
quantized model X (qopt's and ORT's imported QDQ model) and prints the layers with the lowest
SQNR, side by side, to show where qopt loses against ORT.

resnet18ish is generated under scripts/.work/models/resnet18ish (see qopt_common.py): its
calibration set is calib16.npy, and its ref_fp32.npy / ref_ort_int8.npy are computed there with
onnxruntime (the only use of ORT here, for references, as for the shared models).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import qopt_common as C  # noqa: E402

MODELS = ["digits_mlp", "digits_cnn", "resnet_tiny", "mnist_mbv2", "resnet18ish"]

ORT_SCHEME = ("activation-type=i8 activation-scheme=asymmetric weight-type=i8 weight-scheme=symmetric "
              "per-channel=true method=minmax")
# name -> (insert-observers options, insert-fakeq options)
CONFIGS = {
    "ort-scheme": ("", ORT_SCHEME),
    # ORT's scheme with ORT's weight ranges too (plain per-channel max |w|), where qopt has weight-method
    "ort-scheme-wminmax": ("", ORT_SCHEME + " weight-method=minmax"),
    # ONNX Runtime's algorithm too: no bias correction (min-max weights, float biases)
    "ort-exact": ("", ORT_SCHEME + " weight-method=minmax bias-correction=false"),
    "no-bias-correction": ("", "bias-correction=false"),
    "weight-mse": ("", "weight-method=mse"),
    "defaults": ("", ""),
    "hist-minmax": ("observer=histogram", "method=minmax"),
    "hist-percentile": ("observer=histogram", "method=percentile"),
    "hist-entropy": ("observer=histogram", "method=entropy"),
    "hist-mse": ("observer=histogram", "method=mse"),
}
# The whole `quantize` pipeline, to integer ops: name -> its options besides data.
INT_CONFIGS = {
    "int8": "",
    "int8-ort-exact": ORT_SCHEME + " weight-method=minmax bias-correction=false bias-correct=false",
    "int8-no-bias-correct": "bias-correct=false",
    "int8-percentile": "observer=histogram method=percentile",
}
CONFIGS.update({name: None for name in INT_CONFIGS})

# The README's "Beyond min-max" rows: name -> the qopt runs, each on the previous one's output
# (the first on fp.qir); DATA stands for data=<calibration file>.
INT_TAIL = "propagate-qparams,expand-fakeq,quantize-constants,fuse,canonicalize,dce,quant-lint"
PER_TENSOR = "insert-fakeq{per-channel=false weight-method=minmax bias-correction=false}"
W4_MINMAX = "insert-fakeq{weight-type=i4 weight-method=minmax bias-correction=false}"
CAL = "insert-observers,calibrate{DATA}"
BEYOND_CONFIGS = {
    # int8 per-tensor weights, min-max, no bias correction: ONNX Runtime's per-tensor algorithm
    "pt-minmax": [f"fold-bn,{CAL},{PER_TENSOR}"],
    "pt-equalize": [f"fold-bn,equalize,{CAL},{PER_TENSOR}"],
    "pt-equalize-relu6": [f"fold-bn,equalize{{relu6-to-relu=true}},{CAL},{PER_TENSOR}"],
    "pt-equalize-bias-correct": [f"fold-bn,equalize,{CAL},{PER_TENSOR},bias-correct{{DATA}}"],
    "pt-equalize-bias-correct-int": [f"fold-bn,equalize,{CAL},{PER_TENSOR},bias-correct{{DATA}},{INT_TAIL}"],
    # W4A8 per-channel
    "w4-minmax": [f"fold-bn,{CAL},{W4_MINMAX}"],
    "w4-mse": [f"fold-bn,{CAL},insert-fakeq{{weight-type=i4}}"],
    "w4-round-weights": [f"fold-bn,{CAL},insert-fakeq{{weight-type=i4}},round-weights{{DATA}}"],
    "w4-round-weights-int": [f"fold-bn,{CAL},insert-fakeq{{weight-type=i4}},round-weights{{DATA}},{INT_TAIL}"],
    # int8 per-channel: mixed precision searched on the calibration data, replayed by quantize
    "int8-search": ["fold-bn,quantize-search{DATA max-drop=0.1%}", "quantize{DATA}"],
}
CONFIGS.update({name: None for name in BEYOND_CONFIGS})
# --configs beyond: the table's qopt rows, in its order.
BEYOND = ["pt-minmax", "pt-equalize", "pt-equalize-relu6", "pt-equalize-bias-correct",
          "pt-equalize-bias-correct-int", "w4-minmax", "w4-mse", "w4-round-weights", "w4-round-weights-int",
          "int8", "int8-no-bias-correct", "int8-search"]

DEFAULT_CONFIGS = ["ort-exact", "defaults", "weight-mse", "hist-percentile", "hist-entropy", "hist-mse"]

# README of the shared models: what ORT's int8 reaches (accuracy %, SQNR dB).
README_ORT = {"digits_mlp": (98.32, 41.2), "digits_cnn": (98.49, 31.4), "resnet_tiny": (None, 37.1),
              "mnist_mbv2": (97.90, 28.9)}


def config_steps(calib: Path, cfg: str) -> list[str]:
    """The pipelines of `cfg`, one per qopt run."""
    if cfg in INT_CONFIGS:
        return [f"quantize{{data={calib} {INT_CONFIGS[cfg]}}}".replace(" }", "}")]
    if cfg in BEYOND_CONFIGS:
        return [step.replace("DATA", f"data={calib}") for step in BEYOND_CONFIGS[cfg]]
    return [pipeline(calib, *CONFIGS[cfg])]


def pass_names(step: str) -> set[str]:
    """The pass names of a pipeline, options left out."""
    names, depth, name = set(), 0, ""
    for ch in step + ",":
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif depth == 0 and ch == ",":
            names.add(name.strip())
            name = ""
        elif depth == 0:
            name += ch
    return names


def pipeline(calib: Path, obs_opts: str, fq_opts: str) -> str:
    obs = f"insert-observers{{{obs_opts}}}" if obs_opts else "insert-observers"
    fq = f"insert-fakeq{{{fq_opts}}}" if fq_opts else "insert-fakeq"
    return f"fold-bn,{obs},calibrate{{data={calib}}},{fq}"


def metrics(out, ref, labels) -> dict:
    import numpy as np

    out = np.asarray(out, np.float64).reshape(ref.shape)
    ref = np.asarray(ref, np.float64)
    err = float(np.sum((out - ref) ** 2))
    sig = float(np.sum(ref ** 2))
    sqnr = float("inf") if err == 0 else 10 * np.log10(sig / err)
    pred = out.reshape(out.shape[0], -1).argmax(1)
    m = {"sqnr_db": sqnr,
         "agreement": float(np.mean(pred == ref.reshape(ref.shape[0], -1).argmax(1))),
         "max_abs_err": float(np.max(np.abs(out - ref)))}
    m["accuracy"] = float(np.mean(pred == labels)) if labels is not None else None
    return m


def qrun_outputs(bins, qir: Path, test: Path, out: Path):
    import numpy as np

    C.run([bins["qrun"], qir, "--input", test, "--batch", "-o", out])
    with np.load(out) as z:
        return z[z.files[0]]  # the one output, named as the model names it


def compare_layers(bins, ref_qir: Path, other: Path, test: Path) -> list[dict]:
    p = C.run([bins["qrun"], ref_qir, "--input", test, "--batch", "--compare", other, "--json"])
    return json.loads(p.stdout)["rows"]


def pct(v):
    return "—" if v is None else f"{100 * v:.2f} %"


def db(v):
    return "—" if v is None else ("inf" if v == float("inf") else f"{v:.2f}")


def eval_model(name: str, bins, args) -> dict:
    import numpy as np

    d = C.model_dir(name, args.models_dir, args.work_dir)
    calib = C.calib_file(d)
    test = d / "test.npy"
    work = args.work_dir / "eval" / name
    work.mkdir(parents=True, exist_ok=True)
    ref = np.load(d / "ref_fp32.npy") if (d / "ref_fp32.npy").exists() else None
    labels = np.load(d / "test_labels.npy") if (d / "test_labels.npy").exists() else None
    res = {"dir": str(d), "calib": str(calib), "test_samples": int(np.load(test, mmap_mode="r").shape[0]),
           "rows": {}, "commands": []}

    fp = work / "fp.qir"
    cmd = [bins["qimport"], d / "model.onnx", "-o", fp]
    C.run(cmd)
    res["commands"].append(C.fmt_cmd(cmd))
    fp_out = qrun_outputs(bins, fp, test, work / "fp_out.npz")
    if ref is None:  # no ONNX Runtime reference: the float model run by qrun is the reference
        ref = fp_out
        res["reference"] = "qrun fp.qir (no ref_fp32.npy)"
    res["rows"]["fp32 (qrun)"] = metrics(fp_out, ref, labels)

    if (d / "ref_ort_int8.npy").exists():
        res["rows"]["ORT int8 (ref_ort_int8.npy)"] = metrics(np.load(d / "ref_ort_int8.npy"), ref, labels)
    ort_qir = None
    if (d / "ort_qdq_minmax.onnx").exists():
        ort_qir = work / "ort_qdq.qir"
        try:
            C.run([bins["qimport"], d / "ort_qdq_minmax.onnx", "-o", ort_qir])
            res["rows"]["ORT QDQ (qrun)"] = metrics(qrun_outputs(bins, ort_qir, test, work / "ort_out.npz"), ref,
                                                    labels)
        except RuntimeError as e:
            C.log(f"ORT QDQ model of {name} did not import/run: {e}")
            ort_qir = None

    for method in args.ort_methods:
        # ONNX Runtime picks the quantization parameters (quantize_static, same scheme and data as
        # ort_qdq_minmax.onnx, another calibration method); qimport + qrun run the QDQ model.
        label = f"ORT {method} (qrun)"
        onnx_q = work / f"ort_{method}.onnx"
        try:
            if not onnx_q.exists():
                import contextlib
                import numpy as np
                with contextlib.redirect_stdout(sys.stderr):
                    C.ort_quantize(d / "model.onnx", onnx_q, np.load(calib), method)
            qir = work / f"ort_{method}.qir"
            C.run([bins["qimport"], onnx_q, "-o", qir])
            res["rows"][label] = metrics(qrun_outputs(bins, qir, test, work / f"ort_{method}_out.npz"), ref, labels)
        except Exception as e:  # noqa: BLE001
            res["rows"][label] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0]}"}

    layers = {}
    if args.layers:
        # The reference of the per-layer comparison has its batch norms folded, as both qopt's
        # and ORT's quantized models do, so a conv's value means conv + BN in all three.
        fp_ref = work / "fp_folded.qir"
        C.run([bins["qopt"], fp, "--pass=fold-bn", "-o", fp_ref])
        if ort_qir:
            layers["ORT QDQ (qrun)"] = compare_layers(bins, fp_ref, ort_qir, test)
    for cfg in args.configs:
        fq = work / f"fq_{cfg}.qir"
        steps = config_steps(calib, cfg)
        seconds = 0.0
        try:
            source = fp
            for i, step in enumerate(steps):
                target = fq if i + 1 == len(steps) else work / f"fq_{cfg}.step{i}.qir"
                cmd = [bins["qopt"], source, f"--pass={step}", "-o", target]
                res["commands"].append(C.fmt_cmd(cmd))
                start = time.perf_counter()
                C.run(cmd)
                seconds += time.perf_counter() - start
                source = target
            out = qrun_outputs(bins, fq, test, work / f"out_{cfg}.npz")
        except RuntimeError as e:
            err = str(e).split("--- stderr ---")[-1].strip().splitlines()
            res["rows"][cfg] = {"error": err[0] if err else str(e)}
            C.log(f"{name} {cfg}: FAILED: {res['rows'][cfg]['error']}")
            continue
        res["rows"][cfg] = metrics(out, ref, labels)
        res["rows"][cfg]["qopt_seconds"] = seconds
        if args.layers:
            layers[cfg] = compare_layers(bins, fp_ref, fq, test)
    if layers:
        res["layers"] = layers
    return res


def layer_table(name: str, layers: dict, worst: int) -> str:
    """The layers where the first qopt configuration is worst, with every model's SQNR there."""
    def key(row):
        return row["value"] + ("" if row.get("note") is None or "occurrence" not in (row.get("note") or "")
                               else " " + row["note"])

    def val(x):
        return float(x) if isinstance(x, (int, float)) or x in ("inf", "-inf", "nan") else None

    per = {cfg: {key(r): r for r in rows} for cfg, rows in layers.items()}
    cfgs = list(layers)
    main = next((c for c in cfgs if not c.startswith("ORT")), cfgs[0])
    rows = [r for r in layers[main] if val(r.get("sqnr_db")) is not None and r["op"] != "fp.constant"]
    rows.sort(key=lambda r: val(r["sqnr_db"]))
    lines = [f"\n{name}: the {worst} located values with the lowest SQNR under `{main}` "
             f"(qrun fp_folded.qir --input test.npy --batch --compare X.qir, where fp_folded.qir = "
             f"qopt fp.qir --pass=fold-bn; dB)\n",
             "| value | op | shape | " + " | ".join(cfgs) + " |", "|---|---|---|" + "---|" * len(cfgs)]
    for r in rows[:worst]:
        k = key(r)
        cells = []
        for c in cfgs:
            x = per[c].get(k)
            cells.append(db(val(x["sqnr_db"])) if x and val(x.get("sqnr_db")) is not None else "—")
        lines.append(f"| {r['value']} | {r['op']} | {r['shape']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def table(report: dict) -> str:
    lines = ["| model | config | accuracy | agreement with fp32 | SQNR dB | qopt s | ORT int8 accuracy / SQNR |",
             "|---|---|---|---|---|---|---|"]
    for name, r in report["models"].items():
        ort = r["rows"].get("ORT int8 (ref_ort_int8.npy)")
        ort_cell = f"{pct(ort['accuracy'])} / {db(ort['sqnr_db'])}" if ort else "—"
        for cfg, m in r["rows"].items():
            if "error" in m:
                lines.append(f"| {name} | {cfg} | error: {m['error'][:90]} | | | | {ort_cell} |")
                continue
            secs = f"{m['qopt_seconds']:.1f}" if "qopt_seconds" in m else ""
            lines.append(f"| {name} | {cfg} | {pct(m['accuracy'])} | {pct(m['agreement'])} | {db(m['sqnr_db'])} | "
                         f"{secs} | {ort_cell} |")
    readme = [f"{n}: measured {db(r['rows']['ORT int8 (ref_ort_int8.npy)']['sqnr_db'])} dB vs README "
              f"{README_ORT[n][1]} dB" + (f", accuracy {pct(r['rows']['ORT int8 (ref_ort_int8.npy)']['accuracy'])} "
                                         f"vs README {README_ORT[n][0]} %" if README_ORT[n][0] else "")
              for n, r in report["models"].items()
              if n in README_ORT and "ORT int8 (ref_ort_int8.npy)" in r["rows"]]
    if readme:
        lines += ["", "ORT int8 check against the shared README: " + "; ".join(readme)]
    return "\n".join(lines)


def finite_json(x):
    """JSON has no infinities: write them as strings, as qrun --json does."""
    if isinstance(x, float) and (x != x or x in (float("inf"), float("-inf"))):
        return str(x)
    if isinstance(x, dict):
        return {k: finite_json(v) for k, v in x.items()}
    if isinstance(x, list):
        return [finite_json(v) for v in x]
    return x


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--configs", default=",".join(DEFAULT_CONFIGS),
                    help="comma-separated, from: " + ", ".join(CONFIGS) + "; 'beyond' stands for " + ",".join(BEYOND))
    ap.add_argument("--ort-methods", default="",
                    help="also quantize with ORT's quantize_static using these calibration methods "
                         "(e.g. Percentile,Entropy,Distribution; needs onnxruntime) and run the result with qrun")
    ap.add_argument("--layers", action="store_true", help="per-layer SQNR with qrun --compare")
    ap.add_argument("--worst", type=int, default=12, help="layers listed per model with --layers")
    ap.add_argument("--json", help="write the JSON report to this file ('-': stdout, tables then go to stderr)")
    ap.add_argument("--models-dir", type=Path, default=C.DEFAULT_MODELS_DIR)
    ap.add_argument("--bin-dir", type=Path, default=C.DEFAULT_BIN_DIR)
    ap.add_argument("--work-dir", type=Path, default=C.DEFAULT_WORK_DIR)
    ap.add_argument("--wait-for-passes", type=float, default=0, metavar="SECONDS",
                    help="if qopt lacks a pass, rebuild and poll every SECONDS until it has them")
    args = ap.parse_args()
    args.configs = [c for part in args.configs.split(",") for c in (BEYOND if part == "beyond" else [part])]
    args.ort_methods = [m for m in args.ort_methods.split(",") if m]
    for c in args.configs:
        if c not in CONFIGS:
            ap.error(f"unknown config {c!r}; known: {', '.join(CONFIGS)}")

    needed = {"fold-bn", "insert-observers", "calibrate", "insert-fakeq"}
    for c in args.configs:
        needed |= {n for step in config_steps(Path("calib.npy"), c) for n in pass_names(step)} - {"quantize"}
    C.wait_for_passes(args.bin_dir, needed, args.wait_for_passes, rebuild=args.wait_for_passes > 0)
    bins = C.binaries(args.bin_dir)
    report = {"configs": {c: " then ".join(config_steps(Path("calib.npy"), c)) for c in args.configs}, "models": {}}
    for name in args.models.split(","):
        C.log(f"== {name}")
        report["models"][name] = eval_model(name, bins, args)

    text = table(report)
    for name, r in report["models"].items():
        if r.get("layers"):
            text += "\n" + layer_table(name, r["layers"], args.worst)
    if args.json == "-":
        print(text, file=sys.stderr)
        json.dump(finite_json(report), sys.stdout, indent=1, default=str)
        print()
    else:
        print(text)
        if args.json:
            Path(args.json).write_text(json.dumps(finite_json(report), indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
