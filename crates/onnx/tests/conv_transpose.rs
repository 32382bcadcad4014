//! `ConvTranspose` end to end against ONNX Runtime: every model in
//! `tests/onnx/conv_transpose` (one ConvTranspose node each, written by
//! `scripts/make_conv_transpose_fixtures.py`) is imported and run by the
//! interpreter on its stored input, and the output must match ONNX Runtime's,
//! stored beside it, to max |error| ≤ 1e-5 × max |output| (float summation
//! order differs), with the same shape. The cases cover groups (depthwise
//! too), strides, dilations, asymmetric pads, output padding, `auto_pad` and
//! `output_shape`, 1-D and 2-D.

use qopt_interp::{Interpreter, KernelRegistry, Tensor};
use qopt_ir_core::Context;
use qopt_npy::read_npy_file;
use qopt_onnx::{import_model, ImportOptions};
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/onnx/conv_transpose")
}

fn load(path: &Path) -> Tensor {
    let raw = read_npy_file(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Tensor::from_raw(&raw).unwrap()
}

/// max |ours − ONNX Runtime's| / max |ONNX Runtime's| for the model `name`.
fn relative_error(name: &str) -> f64 {
    let dir = fixtures();
    let bytes = std::fs::read(dir.join(format!("{name}.onnx"))).unwrap_or_else(|e| panic!("{name}: {e}"));
    let mut ctx = Context::new();
    let module =
        import_model(&mut ctx, &bytes, &ImportOptions::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
    let input = load(&dir.join(format!("{name}.input.npy")));
    let want = load(&dir.join(format!("{name}.ort.npy")));
    let kernels = KernelRegistry::standard();
    let mut interp = Interpreter::new(&ctx, &module, &kernels);
    let got = interp.run("main", &[input]).unwrap_or_else(|e| panic!("{name}: {e}")).remove(0);
    assert_eq!(got.shape(), want.shape(), "{name}: output shape");
    let (got, want) = (got.to_f64_vec(), want.to_f64_vec());
    let max_ref = want.iter().fold(0f64, |m, v| m.max(v.abs()));
    let max_err = got.iter().zip(&want).fold(0f64, |m, (a, b)| m.max((a - b).abs()));
    max_err / max_ref
}

#[test]
fn conv_transpose_matches_onnx_runtime() {
    let mut names: Vec<String> = std::fs::read_dir(fixtures())
        .unwrap()
        .filter_map(|entry| {
            let path = entry.unwrap().path();
            let name = path.file_name()?.to_str()?.strip_suffix(".onnx")?.to_string();
            Some(name)
        })
        .collect();
    names.sort();
    assert_eq!(names.len(), 10, "{names:?}");
    let mut worst = 0f64;
    for name in &names {
        let err = relative_error(name);
        println!("{name}: max |error| / max |output| = {err:.2e}");
        assert!(err <= 1e-5, "{name}: max |error| is {err:e} of max |output|");
        worst = worst.max(err);
    }
    println!("worst: {worst:.2e}");
}
