"""ONNX's backend node tests as qopt's importer and interpreter conformance suite.

For every node test (a directory with `model.onnx` and `test_data_set_N/{input,output}_K.pb`):

1. its op types are checked against `qimport --list-ops`; a test using any other op type
   (or a node of another domain) is *skipped*;
2. `qimport model.onnx -o model.qir` runs; when it stops because an input must be a
   constant (Reshape's shape, Slice's starts, Pad's pads, ReduceX's axes, ...), that input's
   test data becomes an initializer (and leaves the graph inputs) and the import is retried;
   a dynamic input dimension gets `--input-shape` from the test data (an input with a size
   0, which qimport reads as "unknown", is frozen instead); when it stops at a node of an op
   type it evaluates only on constants (`qimport --list-evaluated-ops`: Cast, Equal, Where,
   Range, ConstantOfShape, integer Add, ...), the graph inputs that node is computed from are
   frozen, so that qimport evaluates it at import and its result is compared; extra outputs
   qimport does not produce (LayerNormalization's Mean and InvStdDev, MaxPool's Indices) are
   dropped from the model when nothing reads them, and the remaining outputs are compared;
3. `qrun model.qir --input x.npy ... -o out.npz` runs on the remaining inputs, and each
   output is compared with the expected one at ONNX's own tolerances (`rtol=1e-3`,
   `atol=1e-7`, NaN equal to NaN, the same shape; integers and booleans exactly).

Each test with supported ops ends as one of:

- `pass`;
- `mismatch`: an output differs (values, shape or element type);
- `crash`: qimport or qrun died by a signal, exited with a code other than 0, 1 or 2,
  printed a panic, or ran past the time limit;
- `rejected`: qimport or qrun refused it cleanly (exit 1 with a message), grouped by reason.

The exit status is 1 when any test mismatches or crashes, or the harness itself fails on a
test (an exception in this script, counted as `rejected: harness error`), else 0.

The interpreter keeps f16 and bf16 values widened to f32, u16 in i32 and u32 in i64: inputs of
those types are given to qrun in the wider type, and qrun's outputs are converted back to the
expected type before comparing (f16 and bf16 round to nearest even).

When the installed `onnx` package has no `backend/test/data/node` (recent wheels leave it
out), the tests are generated from the package's own case definitions
(`onnx.backend.test.case.node`) into `scripts/.work/onnx-node-data-<version>/`, once.

`--export-subset DIR` copies the two smallest passing single-op tests per supported op type
that qimport converts and the smallest it evaluates at import (plain .npy element types
only), and the tests that found bugs, into DIR (the frozen model, `input_K.npy` as given to
qrun, `output_K.npy` expected, an `INDEX` and a `README.md`) for the Rust test
`crates/onnx/tests/node_conformance.rs`, which needs no Python.

Usage (see scripts/README.md):

    scripts/.venv/bin/python scripts/onnx_conformance.py
    scripts/.venv/bin/python scripts/onnx_conformance.py --markdown report.md --json report.json
    scripts/.venv/bin/python scripts/onnx_conformance.py --filter 'test_(reshape|slice)' -v
    scripts/.venv/bin/python scripts/onnx_conformance.py --export-subset tests/onnx-node
"""
from __future__ import annotations

import argparse
import collections
import concurrent.futures
import copy
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

SCRIPTS = Path(__file__).resolve().parent
REPO = SCRIPTS.parent
DEFAULT_WORK_DIR = SCRIPTS / ".work"

# The tolerances of ONNX's backend test runner for node tests.
RTOL = 1e-3
ATOL = 1e-7

# Element types the interpreter stores in a wider type (see crates/interp/src/tensor.rs).
WIDENED = {
    np.dtype(np.float16): np.dtype(np.float32),
    np.dtype(np.uint16): np.dtype(np.int32),
    np.dtype(np.uint32): np.dtype(np.int64),
}
try:  # onnx reads bfloat16 tensors as ml_dtypes.bfloat16
    import ml_dtypes

    WIDENED[np.dtype(ml_dtypes.bfloat16)] = np.dtype(np.float32)
    # qrun writes 4-bit integers (quantized ones included) one to a byte.
    WIDENED[np.dtype(ml_dtypes.int4)] = np.dtype(np.int8)
    WIDENED[np.dtype(ml_dtypes.uint4)] = np.dtype(np.uint8)
except ImportError:  # pragma: no cover - onnx depends on ml_dtypes
    pass

# The .npy element types qrun reads.
NPY_NATIVE = {np.dtype(t) for t in (np.float32, np.float64, np.int8, np.uint8, np.int16, np.int32, np.int64, np.bool_)}

# Attempts at one import: one more than the inputs that may be frozen, plus input shapes.
MAX_IMPORT_ATTEMPTS = 32


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# Binaries
# ---------------------------------------------------------------------------------------------


def default_bin_dir() -> Path:
    """QOPT_BIN_DIR, else whichever of target/release and target/debug has the newer qimport."""
    if "QOPT_BIN_DIR" in os.environ:
        return Path(os.environ["QOPT_BIN_DIR"])
    candidates = [REPO / "target" / p for p in ("release", "debug") if (REPO / "target" / p / "qimport").exists()]
    if not candidates:
        return REPO / "target" / "release"
    return max(candidates, key=lambda d: (d / "qimport").stat().st_mtime)


def listed_ops(qimport: Path, flag: str) -> set[str]:
    """The op types `qimport FLAG` prints, one per line."""
    p = subprocess.run([str(qimport), flag], capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(
            f"`{qimport} {flag}` failed (exit {p.returncode}): {p.stderr.strip()}\n"
            "rebuild qimport: cargo build -p qopt-tools"
        )
    return {line.strip() for line in p.stdout.splitlines() if line.strip()}


def evaluated_ops(qimport: Path) -> set[str]:
    """The op types `qimport --list-evaluated-ops` prints: those it evaluates on constants."""
    return listed_ops(qimport, "--list-evaluated-ops")


def supported_ops(qimport: Path) -> set[str]:
    """The op types `qimport --list-ops` prints."""
    ops = listed_ops(qimport, "--list-ops")
    if not ops:
        raise SystemExit(f"`{qimport} --list-ops` printed no op types")
    return ops


# ---------------------------------------------------------------------------------------------
# The node tests
# ---------------------------------------------------------------------------------------------


def package_node_dir() -> Path:
    return Path(onnx.__file__).resolve().parent / "backend" / "test" / "data" / "node"


def _serialize_value(value, type_proto: onnx.TypeProto, name: str) -> bytes:
    """A test value as onnx's own `cmd_tools.py generate-data` writes it."""
    if type_proto.HasField("map_type"):
        return numpy_helper.from_dict(value, name).SerializeToString()
    if type_proto.HasField("sequence_type"):
        return numpy_helper.from_list(value, name).SerializeToString()
    if type_proto.HasField("optional_type"):
        return numpy_helper.from_optional(value, name).SerializeToString()
    if isinstance(value, onnx.TensorProto):
        return value.SerializeToString()
    return numpy_helper.from_array(value, name).SerializeToString()


def generate_node_data(dest: Path) -> None:
    """Writes every node test of `onnx.backend.test.case.node` to `dest` in the layout of
    onnx's `backend/test/data/node`; a `.complete` file marks a finished run."""
    import warnings

    import onnx.backend.test.case.node as node_cases

    log(f"generating ONNX {onnx.__version__} node tests into {dest} (once) ...")
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = node_cases.collect_testcases()
    for case in cases:
        out = dest / case.name
        out.mkdir()
        (out / "model.onnx").write_bytes(case.model.SerializeToString())
        for i, (inputs, outputs) in enumerate(case.data_sets):
            ds = out / f"test_data_set_{i}"
            ds.mkdir()
            for j, value in enumerate(inputs):
                vi = case.model.graph.input[j]
                (ds / f"input_{j}.pb").write_bytes(_serialize_value(value, vi.type, vi.name))
            for j, value in enumerate(outputs):
                vi = case.model.graph.output[j]
                (ds / f"output_{j}.pb").write_bytes(_serialize_value(value, vi.type, vi.name))
    (dest / ".complete").write_text(f"onnx {onnx.__version__}, {len(cases)} tests\n")
    log(f"  {len(cases)} tests")


def node_test_root(arg: str | None, work_dir: Path) -> Path:
    if arg:
        return Path(arg)
    packaged = package_node_dir()
    if packaged.is_dir() and any(packaged.iterdir()):
        return packaged
    generated = work_dir / f"onnx-node-data-{onnx.__version__}"
    if not (generated / ".complete").exists():
        generate_node_data(generated)
    return generated


def op_key(node: onnx.NodeProto) -> str:
    return node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"


def model_op_types(model: onnx.ModelProto) -> list[str]:
    """The op types of the main graph, sorted; nodes of subgraphs count too (qimport
    rejects graph attributes, and the If/Loop/Scan holding them is never supported)."""
    found: set[str] = set()
    stack = [model.graph]
    while stack:
        graph = stack.pop()
        for node in graph.node:
            found.add(op_key(node))
            for attr in node.attribute:
                if attr.HasField("g"):
                    stack.append(attr.g)
                stack.extend(attr.graphs)
    return sorted(found)


def opset_of(model: onnx.ModelProto) -> int | None:
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return imp.version
    return None


def read_tensor(path: Path) -> onnx.TensorProto:
    t = onnx.TensorProto()
    t.ParseFromString(path.read_bytes())
    return t


def data_sets(test_dir: Path) -> list[tuple[list[Path], list[Path]]]:
    def index(p: Path) -> int:
        return int(p.stem.rsplit("_", 1)[1])

    sets = []
    for ds in sorted(test_dir.glob("test_data_set_*"), key=index):
        inputs = sorted(ds.glob("input_*.pb"), key=index)
        outputs = sorted(ds.glob("output_*.pb"), key=index)
        sets.append((inputs, outputs))
    return sets


# ---------------------------------------------------------------------------------------------
# Running one test
# ---------------------------------------------------------------------------------------------


@dataclass
class Outcome:
    name: str
    ops: list[str]
    opset: int | None
    status: str  # pass | mismatch | crash | rejected | skipped
    stage: str = ""  # import | run | compare | harness
    reason: str = ""  # the category of a rejection or crash
    message: str = ""
    frozen: list[str] = field(default_factory=list)
    # Those of `frozen` frozen so that qimport evaluates a node at import (see inputs_to_evaluate).
    evaluated: list[str] = field(default_factory=list)
    input_shapes: list[str] = field(default_factory=list)
    dropped_outputs: list[str] = field(default_factory=list)


@dataclass
class Step:
    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool = False


def run_cmd(cmd: list, timeout: float) -> Step:
    try:
        p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        def text(b):
            return b.decode(errors="replace") if isinstance(b, bytes) else (b or "")

        return Step(None, text(e.stdout), text(e.stderr), timed_out=True)
    return Step(p.returncode, p.stdout, p.stderr)


def crash_of(step: Step, tool: str) -> str | None:
    """Why `step` counts as a crash, None if it does not."""
    if step.timed_out:
        return f"{tool} timed out"
    if step.returncode is not None and step.returncode < 0:
        return f"{tool} killed by signal {-step.returncode}"
    if step.returncode not in (0, 1, 2):
        return f"{tool} exited with {step.returncode}"
    if "panicked" in step.stderr or "RUST_BACKTRACE" in step.stderr:
        return f"{tool} panicked"
    return None


def error_text(step: Step) -> str:
    """The error lines of a failed step, without the `qimport: error: <file>: ` prefix."""
    lines = [l for l in step.stderr.splitlines() if l.strip()]
    text = "\n".join(lines) if lines else step.stdout.strip()
    return re.sub(r"^(qimport|qrun): error: (\S*?\.(onnx|qir)(\s\([^)]*\))?: )?", "", text)


# Categories of clean rejections: the first pattern found in the message (lower case) names it.
REJECT_REASONS = [
    (r"unsupported onnx ops", "unsupported op type"),
    (r"opset \d+ is not supported", "unsupported opset version"),
    (r"is not a tensor", "sequence or optional values"),
    (r"must be a constant", "needs a constant input (not test data)"),
    (r"dynamic size", "dynamic input shape"),
    (r"block_size", "blocked quantization"),
    (r"element type|data type|dtype|not a float type|must hold floats|interpreter storage|quantized type|casting to", "element type"),
    (r"only \d-d|\d-d and \d-d|input rank|must have rank", "input rank"),
    (r"evaluates \w+ only on constants", "evaluated only on constants, input computed by a converted op"),
    (r"casting a computed", "Cast of a computed value (evaluated only on constants)"),
    (r"output.*not supported|training mode", "training outputs (Indices, Mean, running statistics)"),
    (r"dilat", "dilations"),
    (r"mode '|mode = ", "mode"),
    (r"attribute|allowzero", "attribute value"),
]


def reject_reason(stage: str, message: str) -> str:
    """A short category of a clean rejection (`import: element type`), to group them."""
    # Without the `node 'NAME' (OpType): ` prefix: a node named after its output ('output')
    # must not read as a message about outputs.
    m = re.sub(r"^node '[^']*' \([\w.]+\): ", "", message).lower()
    for pattern, label in REJECT_REASONS:
        if re.search(pattern, m):
            return f"{stage}: {label}"
    return f"{stage}: other"


FREEZE_BY_NAME = re.compile(r"\('([^']+)'\) must be a constant")
FREEZE_BY_INDEX = re.compile(r"node '([^']*)' \([\w.]+\): input #(\d+)\b[^\n]*must be a constant")
DYNAMIC_INPUT = re.compile(r"input '([^']+)' has a dynamic size")


def input_to_freeze(message: str, model: onnx.ModelProto) -> str | None:
    """The graph input an import error asks to be constant, if it names one."""
    m = FREEZE_BY_NAME.search(message)
    if m:
        return m.group(1)
    m = FREEZE_BY_INDEX.search(message)
    if m:
        node_name, k = m.group(1), int(m.group(2))
        for node in model.graph.node:
            if node.name == node_name or (not node.name and node.output and node.output[0] == node_name):
                return node.input[k] if k < len(node.input) else None
    return None


NODE_ERROR = re.compile(r"node '([^']*)' \(([\w.]+)\): ")


def find_node(model: onnx.ModelProto, label: str) -> onnx.NodeProto | None:
    """The node qimport names `label` (its name, else its first output)."""
    for node in model.graph.node:
        if node.name == label or (not node.name and node.output and node.output[0] == label):
            return node
    return None


def graph_inputs_feeding(values: list[str], model: onnx.ModelProto) -> list[str]:
    """The graph inputs `values` are computed from (those of them that are graph inputs
    included), in graph order."""
    producer = {o: n for n in model.graph.node for o in n.output if o}
    seen, stack, found = set(), list(values), set()
    while stack:
        v = stack.pop()
        if v in seen or not v:
            continue
        seen.add(v)
        node = producer.get(v)
        if node is None:
            found.add(v)
        else:
            stack.extend(node.input)
    return [vi.name for vi in model.graph.input if vi.name in found]


def inputs_to_evaluate(message: str, model: onnx.ModelProto, evaluated: set[str]) -> list[str]:
    """When an import error names a node of an op type qimport evaluates on constants
    (`qimport --list-evaluated-ops`: Cast, Equal, Where, Range, ..., and integer Add, Mul,
    ...), the graph inputs that node's inputs are computed from: frozen, they make qimport
    evaluate it (and the nodes before it) at import, and the evaluated results are compared
    like any other output. (Nodes of other op types in between are still converted.)"""
    m = NODE_ERROR.search(message)
    if not m or m.group(2) not in evaluated:
        return []
    node = find_node(model, m.group(1))
    return graph_inputs_feeding(list(node.input), model) if node is not None else []


DROP_OUTPUTS = re.compile(r"node '([^']*)' \([\w.]+\): the (?:Mean and InvStdDev outputs|Indices output)")


def outputs_to_drop(message: str, model: onnx.ModelProto) -> list[str]:
    """The extra outputs of the node an import error names as unsupported (LayerNormalization's
    Mean and InvStdDev, MaxPool's Indices) when nothing else reads them: without them the node
    still computes its first output, which is compared."""
    m = DROP_OUTPUTS.search(message)
    if not m:
        return []
    for node in model.graph.node:
        if node.name == m.group(1) or (not node.name and node.output and node.output[0] == m.group(1)):
            extra = [o for o in node.output[1:] if o]
            read = {i for n in model.graph.node for i in n.input}
            return [] if read & set(extra) else extra
    return []


def prepared_model(model: onnx.ModelProto, frozen: dict[str, onnx.TensorProto], dropped: list[str]) -> onnx.ModelProto:
    """`model` with the inputs in `frozen` moved to initializers holding their test data and
    the outputs in `dropped` removed."""
    if not frozen and not dropped:
        return model
    m = copy.deepcopy(model)
    keep = [vi for vi in m.graph.input if vi.name not in frozen]
    del m.graph.input[:]
    m.graph.input.extend(keep)
    if dropped:
        kept_outputs = [vi for vi in m.graph.output if vi.name not in dropped]
        del m.graph.output[:]
        m.graph.output.extend(kept_outputs)
        for node in m.graph.node:
            names = ["" if o in dropped else o for o in node.output]
            while names and not names[-1]:
                names.pop()
            del node.output[:]
            node.output.extend(names)
    for name, tensor in frozen.items():
        t = copy.deepcopy(tensor)
        t.name = name
        m.graph.initializer.append(t)
    # Initializers outside the graph inputs need IR version 4.
    if m.ir_version < 4:
        m.ir_version = 4
    return m


def to_storage(array: np.ndarray) -> np.ndarray:
    """An input in the type qrun reads for it (f16/bf16 as f32, u16 as i32, u32 as i64)."""
    wider = WIDENED.get(array.dtype)
    return array.astype(wider) if wider is not None else array


def from_storage(got: np.ndarray, expected: np.ndarray) -> tuple[np.ndarray | None, str]:
    """qrun's output `got` in `expected`'s element type, or None and why not."""
    want_storage = WIDENED.get(expected.dtype, expected.dtype)
    if got.dtype != want_storage:
        return None, f"element type {got.dtype} (expected {expected.dtype}, stored as {want_storage})"
    if got.dtype == expected.dtype:
        return got, ""
    if np.issubdtype(expected.dtype, np.integer):
        info = np.iinfo(expected.dtype)
        if got.size and (got.min() < info.min or got.max() > info.max):
            return None, f"values outside {expected.dtype} in the {got.dtype} storage"
    return got.astype(expected.dtype), ""


def compare(got: np.ndarray, expected: np.ndarray, rtol: float, atol: float) -> str | None:
    """None if `got` matches `expected`, else what differs."""
    if got.shape != expected.shape:
        return f"shape {list(got.shape)} (expected {list(expected.shape)})"
    converted, why = from_storage(got, expected)
    if converted is None:
        return why
    if expected.dtype == np.bool_ or np.issubdtype(expected.dtype, np.integer):
        bad = converted != expected
    else:
        a = converted.astype(np.float64)
        b = expected.astype(np.float64)
        bad = ~np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=True)
    if not bad.any():
        return None
    idx = tuple(int(i) for i in np.argwhere(bad)[0])
    if expected.dtype == np.bool_ or np.issubdtype(expected.dtype, np.integer):
        detail = ""
    else:
        with np.errstate(invalid="ignore"):
            err = np.abs(converted.astype(np.float64) - expected.astype(np.float64))
        detail = f", max |error| {np.nanmax(np.where(bad, err, 0)):.3g}"
    return (
        f"{int(bad.sum())} of {bad.size} elements differ{detail}; first at {list(idx)}: "
        f"{converted[idx]!r} (expected {expected[idx]!r})"
    )


def run_test(test_dir: Path, ops: list[str], bins: dict, work: Path, rtol: float, atol: float, timeout: float) -> Outcome:
    model = onnx.load(str(test_dir / "model.onnx"))
    out = Outcome(test_dir.name, ops, opset_of(model), "pass")
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    graph_inputs = [vi.name for vi in model.graph.input]
    initializers = {t.name for t in model.graph.initializer}
    arg_names = [n for n in graph_inputs if n not in initializers]
    sets = data_sets(test_dir)
    if not sets:
        out.status, out.stage, out.reason, out.message = "rejected", "harness", "no test data", "no test_data_set_*"
        return out
    frozen_names: list[str] = []
    evaluated: list[str] = []
    dropped: list[str] = []
    shapes: dict[str, list[int]] = {}
    for ds_index, (input_paths, output_paths) in enumerate(sets):
        ds_work = work / f"set{ds_index}" if len(sets) > 1 else work
        ds_work.mkdir(exist_ok=True)
        # Sequence, map or optional test values are not TensorProtos: the import decides.
        data_error = None
        try:
            inputs = {name: read_tensor(p) for name, p in zip(arg_names, input_paths)}
            expected = [numpy_helper.to_array(read_tensor(p)) for p in output_paths]
            if len(input_paths) != len(arg_names):
                data_error = f"{len(input_paths)} input files for {len(arg_names)} graph inputs"
        except Exception as e:
            inputs, expected = {}, []
            data_error = f"{type(e).__name__}: {e}"
        # Import, freezing inputs and fixing shapes as qimport asks.
        model_path, qir_path = ds_work / "model.onnx", ds_work / "model.qir"
        for _ in range(MAX_IMPORT_ATTEMPTS):
            m = prepared_model(model, {n: inputs[n] for n in frozen_names}, dropped)
            onnx.save(m, str(model_path))
            cmd = [bins["qimport"], model_path, "-o", qir_path]
            for name, dims in shapes.items():
                cmd += ["--input-shape", f"{name}={'x'.join(map(str, dims))}"]
            step = run_cmd(cmd, timeout)
            crash = crash_of(step, "qimport")
            if crash:
                out.status, out.stage, out.reason, out.message = "crash", "import", crash, step.stderr.strip()[-2000:]
                return out
            if step.returncode == 0:
                break
            message = error_text(step)
            name = input_to_freeze(message, model)
            if name in inputs and name not in frozen_names:
                frozen_names.append(name)
                continue
            evaluate = [
                n for n in inputs_to_evaluate(message, model, bins["evaluated"]) if n in inputs and n not in frozen_names
            ]
            if evaluate:
                frozen_names.extend(evaluate)
                evaluated.extend(evaluate)
                continue
            extra = [o for o in outputs_to_drop(message, model) if o not in dropped]
            if extra:
                dropped.extend(extra)
                continue
            dyn = DYNAMIC_INPUT.search(message)
            if dyn and dyn.group(1) in inputs and dyn.group(1) not in [*shapes, *frozen_names]:
                # A size qimport takes as dynamic: give the test data's shape, or, for an
                # empty tensor (a size 0 is "unknown" to qimport), its data.
                dims = list(inputs[dyn.group(1)].dims)
                if dims and all(d >= 1 for d in dims):
                    shapes[dyn.group(1)] = dims
                else:
                    frozen_names.append(dyn.group(1))
                continue
            out.status, out.stage = "rejected", "import"
            out.reason, out.message = reject_reason("import", message), message
            out.frozen, out.evaluated = list(frozen_names), list(evaluated)
            out.input_shapes, out.dropped_outputs = list(shapes), list(dropped)
            return out
        else:
            out.status, out.stage, out.reason = "rejected", "import", "import: too many retries"
            return out
        if data_error:
            out.status, out.stage, out.reason = "rejected", "harness", "test data are not plain tensors"
            out.message = data_error
            return out
        out.frozen, out.evaluated = list(frozen_names), list(evaluated)
        out.input_shapes, out.dropped_outputs = list(shapes), list(dropped)
        output_names = [vi.name for vi in model.graph.output]
        expected = [e for name, e in zip(output_names, expected) if name not in dropped]
        output_names = [name for name in output_names if name not in dropped]
        for k, e in enumerate(expected):
            np.save(ds_work / f"expected_{k}.npy", e)
        # Run.
        cmd = [bins["qrun"], qir_path, "--allow-nonfinite", "-o", ds_work / "out.npz"]
        for k, name in enumerate(n for n in arg_names if n not in frozen_names):
            path = ds_work / f"input_{k}.npy"
            np.save(path, to_storage(numpy_helper.to_array(inputs[name])))
            cmd += ["--input", path]
        step = run_cmd(cmd, timeout)
        crash = crash_of(step, "qrun")
        if crash:
            out.status, out.stage, out.reason, out.message = "crash", "run", crash, step.stderr.strip()[-2000:]
            return out
        if step.returncode != 0:
            message = error_text(step)
            out.status, out.stage, out.reason, out.message = "rejected", "run", reject_reason("run", message), message
            return out
        # Compare.
        with np.load(ds_work / "out.npz") as z:
            got = qrun_outputs(z, output_names)
        if len(got) != len(expected):
            out.status, out.stage = "mismatch", "compare"
            out.message = f"{len(got)} outputs, expected {len(expected)}"
            return out
        problems = []
        for k, (g, e) in enumerate(zip(got, expected)):
            why = compare(g, e, rtol, atol)
            if why:
                problems.append(f"output {k} ({output_names[k]}): {why}")
        if problems:
            out.status, out.stage = "mismatch", "compare"
            out.message = "; ".join(problems) + (f" (data set {ds_index})" if len(sets) > 1 else "")
            return out
    return out


def qrun_outputs(archive, output_names: list[str]) -> list:
    """The arrays of qrun's `-o out.npz`, in the model's output order. qrun names each
    member after the model's output (qimport keeps the ONNX names as the function's
    `result_names`), or `out0`, `out1`, ... when those cannot name members (empty,
    repeated, with a `/`); either way the members come in output order."""
    if len(archive.files) == len(output_names) and all(n in archive.files for n in output_names):
        return [archive[n] for n in output_names]
    return [archive[n] for n in archive.files]


# ---------------------------------------------------------------------------------------------
# Reports
# ---------------------------------------------------------------------------------------------

STATUSES = ("pass", "mismatch", "crash", "rejected")


def summarize(outcomes: list[Outcome], supported: set[str]) -> dict:
    counts = collections.Counter(o.status for o in outcomes)
    tested = [o for o in outcomes if o.status != "skipped"]
    per_op: dict[str, collections.Counter] = {op: collections.Counter() for op in sorted(supported)}
    for o in tested:
        for op in o.ops:
            per_op.setdefault(op, collections.Counter())[o.status] += 1
    reasons = collections.defaultdict(list)
    for o in tested:
        if o.status in ("rejected", "crash"):
            reasons[(o.status, o.reason)].append(o.name)
    return {
        "onnx_version": onnx.__version__,
        "total_node_tests": len(outcomes),
        "skipped": counts["skipped"],
        "with_supported_ops": len(tested),
        **{s: counts[s] for s in STATUSES},
        "pass_evaluated": sum(1 for o in tested if o.status == "pass" and o.evaluated),
        "per_op": {op: {s: c[s] for s in STATUSES} for op, c in per_op.items()},
        "reasons": {f"{s}: {r}": names for (s, r), names in sorted(reasons.items())},
    }


def evaluated_note(summary: dict) -> str:
    return (
        f"{summary['pass_evaluated']} of the {summary['pass']} passing tests pass with data inputs frozen "
        "so that qimport evaluates their nodes at import (it evaluates those op types, and integer "
        "arithmetic, only on constants)."
    )


def summary_table(summary: dict) -> list[str]:
    return [
        "| pass | mismatch | crash | rejected | total with supported ops | skipped (op not supported) | node tests |",
        "|---:|---:|---:|---:|---:|---:|---:|",
        f"| {summary['pass']} | {summary['mismatch']} | {summary['crash']} | {summary['rejected']} "
        f"| {summary['with_supported_ops']} | {summary['skipped']} | {summary['total_node_tests']} |",
    ]


def per_op_table(summary: dict) -> list[str]:
    lines = ["| op type | tests | pass | mismatch | crash | rejected |", "|---|---:|---:|---:|---:|---:|"]
    for op, c in summary["per_op"].items():
        total = sum(c.values())
        lines.append(f"| {op} | {total} | {c['pass']} | {c['mismatch']} | {c['crash']} | {c['rejected']} |")
    return lines


def markdown(summary: dict, outcomes: list[Outcome], command: str) -> str:
    lines = [
        "# ONNX backend node tests: qopt conformance",
        "",
        f"ONNX {summary['onnx_version']}; produced by `{command}`; tolerances rtol={RTOL:g}, atol={ATOL:g}.",
        "",
        *summary_table(summary),
        "",
        evaluated_note(summary),
        "",
        "## Per op type",
        "",
        "A test counts under every op type of its graph (the `_expanded` tests have several).",
        "",
        *per_op_table(summary),
        "",
        "## Rejections and crashes by reason",
        "",
        "| status: reason | tests |",
        "|---|---:|",
    ]
    for reason, names in summary["reasons"].items():
        lines.append(f"| {reason} | {len(names)} |")
    lines += ["", "## Every test with supported ops that did not pass", "", "| test | status | message |", "|---|---|---|"]
    for o in outcomes:
        if o.status in ("mismatch", "crash", "rejected"):
            msg = " ".join(o.message.split()).replace("|", "\\|")
            if len(msg) > 300:
                msg = msg[:297] + "..."
            lines.append(f"| {o.name} | {o.status} | {msg} |")
    passed = [o for o in outcomes if o.status == "pass"]
    lines += ["", f"## Passing tests ({len(passed)})", ""]
    for o in passed:
        notes = []
        needed = [n for n in o.frozen if n not in o.evaluated]
        if needed:
            notes.append(f"frozen: {', '.join(needed)}")
        if o.evaluated:
            notes.append(f"frozen to be evaluated at import: {', '.join(o.evaluated)}")
        if o.dropped_outputs:
            notes.append(f"outputs dropped: {', '.join(o.dropped_outputs)}")
        if o.input_shapes:
            notes.append(f"--input-shape for {', '.join(o.input_shapes)}")
        lines.append(f"- {o.name}" + (f" ({'; '.join(notes)})" if notes else ""))
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# The subset for the Rust test
# ---------------------------------------------------------------------------------------------


# Exported whenever they pass, beside the smallest tests: the ones that found bugs.
SUBSET_ALWAYS = (
    "test_clip_min_greater_than_max",
    "test_mod_float32_mixed_sign_fmod_0",
    "test_spacetodepth_crd_mode_example",
)

SUBSET_README = """# ONNX backend node tests (a subset)

Small tests of ONNX {version}'s backend node test suite (`onnx/backend/test/case/node`,
Apache-2.0, by the ONNX Project Contributors) that qopt passes, for
`crates/onnx/tests/node_conformance.rs`. Each directory holds `model.onnx` (inputs
that qimport needs as constants frozen into initializers, extra outputs it does not
produce dropped; see `INDEX`), `input_K.npy` for the remaining graph inputs in order and
`output_K.npy`, ONNX's expected values of the remaining graph outputs. Tests marked
"evaluated at import" in `INDEX` have their data inputs frozen too, so that qimport
evaluates the node on constants (`Cast`, `Equal`, `Where`, `Range`, integer `Add`, ...:
`qimport --list-evaluated-ops`).

Generated by `scripts/onnx_conformance.py --export-subset tests/onnx-node`: the
{per_op} smallest passing single-op tests per supported op type that qimport converts, and
the smallest it evaluates at import ({per_op} if it converts none), plus the tests that found
bugs; do not edit by hand. The whole suite and its results: `docs/onnx-import.md`,
"Conformance".
"""


def export_subset(dest: Path, outcomes: list[Outcome], work_dir: Path, per_op: int, budget: int) -> None:
    """Copies up to `per_op` of the smallest passing single-op tests per op type (plain .npy
    element types only, one data set), and those of SUBSET_ALWAYS that pass, into `dest`,
    replacing it, within `budget` bytes."""
    candidates: dict[str, list[tuple[int, Outcome, Path]]] = collections.defaultdict(list)
    for o in outcomes:
        if o.status != "pass" or len(o.ops) != 1 or o.input_shapes or "_expanded" in o.name:
            continue
        work = work_dir / o.name
        if not (work / "model.qir").exists():  # several data sets
            continue
        files = [work / "model.onnx", *sorted(work.glob("input_*.npy"))]
        arrays = [np.load(p) for p in files[1:]]
        expected = [np.load(p) for p in sorted(work.glob("expected_*.npy"))]
        if any(a.dtype not in NPY_NATIVE for a in arrays + expected):
            continue
        size = sum(p.stat().st_size for p in files) + sum(e.nbytes + 128 for e in expected)
        candidates[o.ops[0]].append((size, o, work))
    if dest.exists():
        for child in dest.iterdir():
            if child.is_dir():
                shutil.rmtree(child)
    dest.mkdir(parents=True, exist_ok=True)
    chosen = []
    for op in sorted(candidates):
        ranked = sorted(candidates[op], key=lambda c: (c[0], c[1].name))
        # The smallest tests qimport converts, and the smallest it evaluates at import (one if
        # it converts others of the op type too): both paths stay covered.
        converted = [c for c in ranked if not c[1].evaluated][:per_op]
        evaluated = [c for c in ranked if c[1].evaluated][: max(1, per_op - len(converted))]
        picked = converted + evaluated
        chosen += picked + [c for c in ranked if c[1].name in SUBSET_ALWAYS and c not in picked]
    total = 0
    written = []
    for size, o, work in sorted(chosen, key=lambda c: c[0]):
        if total + size > budget:
            log(f"  leaving out {o.name} ({size} bytes): over the {budget}-byte budget")
            continue
        target = dest / o.name
        target.mkdir()
        shutil.copy(work / "model.onnx", target / "model.onnx")
        for p in sorted(work.glob("input_*.npy")):
            shutil.copy(p, target / p.name)
        for p in work.glob("expected_*.npy"):
            shutil.copy(p, target / p.name.replace("expected_", "output_"))
        total += sum(p.stat().st_size for p in target.iterdir())
        written.append(o)
    index = ["# test  op type  frozen inputs  dropped outputs  evaluated at import"]
    for o in sorted(written, key=lambda o: o.name):
        index.append(
            f"{o.name}  {o.ops[0]}  {','.join(o.frozen) or '-'}  {','.join(o.dropped_outputs) or '-'}  "
            f"{'yes' if o.evaluated else '-'}"
        )
    (dest / "INDEX").write_text("\n".join(index) + "\n")
    (dest / "README.md").write_text(SUBSET_README.format(version=onnx.__version__, per_op=per_op))
    ops_covered = sorted({o.ops[0] for o in written})
    log(f"exported {len(written)} tests ({total} bytes) covering {len(ops_covered)} op types into {dest}")


# ---------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin-dir", type=Path, default=None, help="where qimport and qrun are (default: QOPT_BIN_DIR, else the newer of target/release and target/debug)")
    ap.add_argument("--node-dir", default=None, help="the node tests (default: the onnx package's backend/test/data/node, else generated)")
    ap.add_argument("--work-dir", type=Path, default=DEFAULT_WORK_DIR, help="scratch space (default: scripts/.work)")
    ap.add_argument("--filter", default=None, help="only tests whose name matches this regular expression")
    ap.add_argument("--jobs", type=int, default=2, help="tests run at once (default 2)")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per qimport or qrun run before it counts as a crash")
    ap.add_argument("--rtol", type=float, default=RTOL)
    ap.add_argument("--atol", type=float, default=ATOL)
    ap.add_argument("--markdown", type=Path, default=None, help="write the report as markdown to this file")
    ap.add_argument("--json", type=Path, default=None, help="write every outcome and the summary as JSON to this file")
    ap.add_argument("--export-subset", type=Path, default=None, metavar="DIR", help="copy small passing tests into DIR for the Rust test")
    ap.add_argument("--per-op", type=int, default=2, help="tests per op type with --export-subset (default 2)")
    ap.add_argument("--subset-budget", type=int, default=300_000, help="bytes at most with --export-subset (default 300000)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every test's outcome")
    args = ap.parse_args()
    if args.export_subset and args.filter:
        ap.error("--export-subset picks from every test: leave out --filter")

    bin_dir = args.bin_dir or default_bin_dir()
    bins = {name: bin_dir / name for name in ("qimport", "qrun")}
    for name, path in bins.items():
        if not path.exists():
            raise SystemExit(f"{path} not found: build with `cargo build -p qopt-tools` (or pass --bin-dir)")
    supported = supported_ops(bins["qimport"])
    evaluated = evaluated_ops(bins["qimport"])
    root = node_test_root(args.node_dir, args.work_dir)
    run_dir = args.work_dir / "onnx-conformance"
    log(f"node tests: {root}\nbinaries: {bin_dir} ({len(supported)} op types, {len(evaluated)} evaluated on constants)")

    tests = sorted(p for p in root.iterdir() if (p / "model.onnx").exists())
    if args.filter:
        tests = [p for p in tests if re.search(args.filter, p.name)]
    outcomes: dict[str, Outcome] = {}
    todo = []
    for t in tests:
        model = onnx.load(str(t / "model.onnx"), load_external_data=False)
        ops = model_op_types(model)
        if ops and all(op in supported for op in ops):
            todo.append((t, ops))
        else:
            outcomes[t.name] = Outcome(t.name, ops, opset_of(model), "skipped")
    log(f"{len(tests)} node tests, {len(todo)} with supported ops only")

    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = {
            pool.submit(run_test, t, ops, {**bins, "evaluated": evaluated}, run_dir / t.name, args.rtol, args.atol, args.timeout): t
            for t, ops in todo
        }
        for done, f in enumerate(concurrent.futures.as_completed(futures), 1):
            t = futures[f]
            try:
                o = f.result()
            except Exception as e:  # a harness failure must not hide the other tests
                o = Outcome(t.name, [], None, "rejected", "harness", "harness error", f"{type(e).__name__}: {e}")
            outcomes[t.name] = o
            if args.verbose or o.status in ("mismatch", "crash"):
                detail = f" [{o.reason}]" if o.reason else ""
                log(f"[{done}/{len(todo)}] {o.name}: {o.status}{detail} {o.message[:400]}")
    ordered = [outcomes[t.name] for t in tests]
    summary = summarize(ordered, supported)
    log(f"ran in {time.perf_counter() - start:.1f} s")

    print("\n".join(summary_table(summary)))
    print(evaluated_note(summary))
    print()
    print("\n".join(per_op_table(summary)))
    print()
    for reason, names in summary["reasons"].items():
        shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
        print(f"{reason}: {len(names)} ({shown})")

    command = "scripts/.venv/bin/python scripts/onnx_conformance.py " + " ".join(
        a for a in sys.argv[1:]
    )
    if args.markdown:
        args.markdown.write_text(markdown(summary, ordered, command.strip()))
        log(f"wrote {args.markdown}")
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "tests": [o.__dict__ for o in ordered]}, indent=1))
        log(f"wrote {args.json}")
    if args.export_subset:
        export_subset(args.export_subset, ordered, run_dir, args.per_op, args.subset_budget)
    # An exception in this script is its own bug, not qopt's verdict: it fails the run
    # (reading qrun's outputs under stale names once turned every test into one, exit 0).
    harness = [o for o in ordered if o.reason == "harness error"]
    if harness:
        log(f"error: the harness failed on {len(harness)} tests, e.g. {harness[0].name}: {harness[0].message}")
    return 1 if summary["mismatch"] or summary["crash"] or harness else 0


if __name__ == "__main__":
    sys.exit(main())
