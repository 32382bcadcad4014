//! ONNX `Resize` end to end against ONNX's own outputs: every model in
//! `tests/data/resize` (one Resize node each, made with
//! `scripts/make_resize_fixtures.py`) is imported and run by the interpreter
//! on its stored input, and the output is compared with the stored one:
//! - `<case>__ref`, ONNX's reference implementation (`onnx.reference`, which
//!   computes in f64 and rounds once, as `fp.resize` does): bit for bit;
//! - `<case>__ort`, ONNX Runtime's, for the case the reference cannot run
//!   (`tf_half_pixel_for_nn`): to 1e-6 of the largest output (ONNX Runtime
//!   computes in f32). The script checks ONNX Runtime against the reference
//!   on the other cases.

use qopt_interp::{Interpreter, KernelRegistry, Tensor};
use qopt_ir_core::Context;
use qopt_npy::read_npz_file;
use qopt_onnx::{import_model, ImportOptions};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/resize")
}

/// The arrays of `refs.npz`, by name.
fn arrays() -> BTreeMap<String, Tensor> {
    let path = data_dir().join("refs.npz");
    let members = read_npz_file(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    members
        .into_iter()
        .map(|(name, raw)| {
            let name = name.trim_end_matches(".npy").to_string();
            (name, Tensor::from_raw(&raw).unwrap())
        })
        .collect()
}

/// Imports `<case>.onnx` with the batch size of `x` (one case has a dynamic
/// batch) and runs it on `x`.
fn run_case(case: &str, x: &Tensor) -> Tensor {
    let path = data_dir().join(format!("{case}.onnx"));
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut ctx = Context::new();
    let options = ImportOptions { batch: Some(x.shape()[0] as i64), ..Default::default() };
    let module = import_model(&mut ctx, &bytes, &options).unwrap_or_else(|e| panic!("{case}: {e}"));
    let kernels = KernelRegistry::standard();
    let mut interp = Interpreter::new(&ctx, &module, &kernels);
    let mut out = interp.run("main", std::slice::from_ref(x)).unwrap_or_else(|e| panic!("{case}: {e}"));
    assert_eq!(out.len(), 1, "{case}: one output");
    out.remove(0)
}

#[test]
fn resize_matches_onnx_reference_and_runtime() {
    let arrays = arrays();
    let cases: Vec<String> = std::fs::read_dir(data_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "onnx"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    assert!(cases.len() >= 20, "only {} cases", cases.len());
    let (mut exact, mut runtime) = (0, 0);
    for case in &cases {
        let x = &arrays[&format!("{case}__x")];
        let got = run_case(case, x);
        let values = got.to_f64_vec();
        if let Some(want) = arrays.get(&format!("{case}__ref")) {
            assert_eq!(got.shape(), want.shape(), "{case}: shape");
            let want = want.to_f64_vec();
            let differ = values.iter().zip(&want).filter(|(a, b)| a.to_bits() != b.to_bits()).count();
            assert_eq!(
                differ, 0,
                "{case}: {differ} elements differ from ONNX's reference\n{values:?}\n{want:?}"
            );
            exact += 1;
        } else {
            let want = &arrays[&format!("{case}__ort")];
            assert_eq!(got.shape(), want.shape(), "{case}: shape");
            let want = want.to_f64_vec();
            let largest = want.iter().fold(0f64, |m, v| m.max(v.abs()));
            let worst = values.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0f64, f64::max);
            assert!(worst <= 1e-6 * largest, "{case}: |error| {worst:e} vs ONNX Runtime");
            runtime += 1;
        }
    }
    assert!(
        exact >= 20 && runtime >= 1,
        "{exact} cases against the reference, {runtime} against ONNX Runtime"
    );
}
