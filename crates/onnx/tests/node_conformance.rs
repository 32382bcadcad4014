//! ONNX's own backend node tests, a subset kept in `tests/onnx-node`: each is
//! imported with [`import_model`], run by the interpreter and compared with
//! ONNX's expected outputs at ONNX's tolerances (`rtol = 1e-3`, `atol = 1e-7`,
//! NaN equal to NaN; integers and booleans exactly, same element type and shape).
//!
//! Each directory holds `model.onnx` (inputs that must be constant already
//! frozen into initializers), `input_K.npy` for the remaining graph inputs in
//! order and `output_K.npy` for the graph outputs. The subset is written by
//! `scripts/onnx_conformance.py --export-subset tests/onnx-node`, which runs the
//! whole suite (see `docs/onnx-import.md`, "Conformance"); this test needs no
//! Python.

use qopt_interp::{Interpreter, KernelRegistry, Tensor};
use qopt_ir_core::Context;
use qopt_npy::read_npy_file;
use qopt_onnx::{import_model, ImportOptions};
use std::path::{Path, PathBuf};

/// ONNX's backend test tolerances for node tests.
const RTOL: f64 = 1e-3;
const ATOL: f64 = 1e-7;

fn suite_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/onnx-node")
}

/// `prefix_0.npy`, `prefix_1.npy`, ... in `dir`, until one is missing.
fn numbered(dir: &Path, prefix: &str) -> Result<Vec<Tensor>, String> {
    let mut tensors = Vec::new();
    loop {
        let path = dir.join(format!("{prefix}_{}.npy", tensors.len()));
        if !path.exists() {
            return Ok(tensors);
        }
        let raw = read_npy_file(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        tensors.push(Tensor::from_raw(&raw).map_err(|e| format!("{}: {e}", path.display()))?);
    }
}

/// Where `got` differs from `expected`, if it does.
fn difference(got: &Tensor, expected: &Tensor) -> Option<String> {
    if got.dtype() != expected.dtype() || got.shape() != expected.shape() {
        return Some(format!(
            "{:?} {:?}, expected {:?} {:?}",
            got.dtype(),
            got.shape(),
            expected.dtype(),
            expected.shape()
        ));
    }
    if got.all_close(expected, RTOL, ATOL) {
        return None;
    }
    let (a, b) = (got.to_f64_vec(), expected.to_f64_vec());
    let close =
        |x: f64, y: f64| (x.is_nan() && y.is_nan()) || x == y || (x - y).abs() <= ATOL + RTOL * y.abs();
    let bad: Vec<usize> = (0..a.len()).filter(|&i| !close(a[i], b[i])).collect();
    let first = bad.first().copied().unwrap_or(0);
    Some(format!(
        "{} of {} elements differ; element {first}: {} (expected {})",
        bad.len(),
        a.len(),
        a.get(first).copied().unwrap_or(f64::NAN),
        b.get(first).copied().unwrap_or(f64::NAN)
    ))
}

/// Imports, runs and compares one test; the error says what went wrong.
fn check(dir: &Path, kernels: &KernelRegistry) -> Result<(), String> {
    let bytes = std::fs::read(dir.join("model.onnx")).map_err(|e| format!("model.onnx: {e}"))?;
    let mut ctx = Context::new();
    let module =
        import_model(&mut ctx, &bytes, &ImportOptions::default()).map_err(|e| format!("import: {e}"))?;
    let inputs = numbered(dir, "input")?;
    let expected = numbered(dir, "output")?;
    if expected.is_empty() {
        return Err("no output_0.npy".into());
    }
    let got =
        Interpreter::new(&ctx, &module, kernels).run("main", &inputs).map_err(|e| format!("run: {e}"))?;
    if got.len() != expected.len() {
        return Err(format!("{} outputs, expected {}", got.len(), expected.len()));
    }
    let problems: Vec<String> = got
        .iter()
        .zip(&expected)
        .enumerate()
        .filter_map(|(k, (g, e))| difference(g, e).map(|d| format!("output {k}: {d}")))
        .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

#[test]
fn onnx_node_tests_match_onnx_outputs() {
    let root = suite_dir();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|p| p.join("model.onnx").exists())
        .collect();
    dirs.sort();
    // The INDEX the export writes lists exactly the tests present.
    let index = std::fs::read_to_string(root.join("INDEX")).expect("tests/onnx-node/INDEX");
    let listed: Vec<&str> =
        index.lines().filter(|l| !l.starts_with('#')).filter_map(|l| l.split_whitespace().next()).collect();
    let present: Vec<String> =
        dirs.iter().map(|d| d.file_name().unwrap().to_string_lossy().into_owned()).collect();
    assert_eq!(listed, present, "tests/onnx-node/INDEX and the directories differ; re-export the subset");
    assert!(dirs.len() >= 50, "only {} node tests in {}", dirs.len(), root.display());

    let kernels = KernelRegistry::standard();
    let failures: Vec<String> = dirs
        .iter()
        .filter_map(|dir| {
            check(dir, &kernels).err().map(|e| format!("{}: {e}", dir.file_name().unwrap().to_string_lossy()))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} node tests fail:\n{}",
        failures.len(),
        dirs.len(),
        failures.join("\n")
    );
}

/// Supported op types no exported test covers: every ONNX node test of
/// `And`, `Or`, `Xor` and `Not` alone declares opset 1 or 7, older than the
/// 11 to 28 qimport reads (`Or` passes only inside `_expanded` tests, which
/// the export leaves out). `crates/onnx/src/fold.rs` tests their evaluation.
/// `QLinearConv`'s one node test declares opset 10, and ONNX has no node
/// tests of ONNX Runtime's `com.microsoft` ops: the ONNX export round trips
/// (`tools/qopt/tests/qexport.rs`) import all of them.
const NOT_COVERED: &[&str] = &[
    "And",
    "Not",
    "Or",
    "QLinearConv",
    "Xor",
    "com.microsoft.QGemm",
    "com.microsoft.QLinearAdd",
    "com.microsoft.QLinearAveragePool",
    "com.microsoft.QLinearConcat",
    "com.microsoft.QLinearGlobalAveragePool",
    "com.microsoft.QLinearMul",
];

#[test]
fn the_subset_covers_every_supported_op_type() {
    let index = std::fs::read_to_string(suite_dir().join("INDEX")).expect("tests/onnx-node/INDEX");
    let covered: std::collections::BTreeSet<&str> =
        index.lines().filter(|l| !l.starts_with('#')).filter_map(|l| l.split_whitespace().nth(1)).collect();
    let missing: Vec<&str> = qopt_onnx::supported_op_types()
        .filter(|op| !covered.contains(op) && !NOT_COVERED.contains(op))
        .collect();
    assert!(
        missing.is_empty(),
        "no test in tests/onnx-node for {missing:?}: re-export the subset \
         (scripts/onnx_conformance.py --export-subset tests/onnx-node) or list them in NOT_COVERED"
    );
    let stale: Vec<&&str> = NOT_COVERED.iter().filter(|op| covered.contains(**op)).collect();
    assert!(stale.is_empty(), "{stale:?} are covered now: drop them from NOT_COVERED");
}

#[test]
fn a_wrong_expected_value_is_caught() {
    // The comparison itself: one element off by more than the tolerance fails,
    // NaN matches NaN, and element types must agree.
    let t = |v: Vec<f32>| Tensor::from_f32(&[v.len()], v).unwrap();
    assert!(difference(&t(vec![1.0, f32::NAN]), &t(vec![1.0005, f32::NAN])).is_none());
    let d = difference(&t(vec![1.0, 2.0]), &t(vec![1.0, 2.01])).expect("differs");
    assert!(d.starts_with("1 of 2 elements differ; element 1"), "{d}");
    let ints = Tensor::I64(ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&[2]), vec![1, 2]).unwrap());
    assert!(difference(&t(vec![1.0, 2.0]), &ints).is_some());
}
