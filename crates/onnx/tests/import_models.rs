//! Models written the way real exporters write them (`tests/import-models`,
//! made by `scripts/make_import_models.py`: PyTorch, Paddle2ONNX,
//! tf2onnx and ultralytics graph patterns) import with the flags in their `args` file,
//! and the interpreter's outputs match ONNX Runtime's stored ones: on every
//! output, max |error| ≤ 1e-4 × max |ONNX Runtime output|.

use qopt_interp::{Interpreter, KernelRegistry, Tensor};
use qopt_ir_core::Context;
use qopt_npy::read_npy_file;
use qopt_onnx::{import_model, ImportOptions};
use std::path::{Path, PathBuf};

fn models_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/import-models")
}

fn load(path: &Path) -> Tensor {
    let raw = read_npy_file(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Tensor::from_raw(&raw).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The import options an `args` file gives (`--input-shape NAME=AxBxC`, repeated).
fn options(args: &str) -> ImportOptions {
    let mut options = ImportOptions::default();
    let words: Vec<&str> = args.split_whitespace().collect();
    for pair in words.chunks(2) {
        let [flag, value] = pair else { panic!("args: dangling '{}'", pair[0]) };
        assert_eq!(*flag, "--input-shape", "args: unknown flag");
        let (name, dims) = value.split_once('=').expect("args: NAME=SHAPE");
        let shape = dims.split('x').map(|d| d.parse().expect("args: a size")).collect();
        options.input_shapes.push((name.to_string(), shape));
    }
    options
}

/// The numbered files `prefix_0.npy`, `prefix_1.npy`, ... in `dir`.
fn numbered(dir: &Path, prefix: &str) -> Vec<Tensor> {
    (0..)
        .map(|i| dir.join(format!("{prefix}_{i}.npy")))
        .take_while(|p| p.exists())
        .map(|p| load(&p))
        .collect()
}

/// The worst error of `got` against `want`, relative to `want`'s largest magnitude.
fn relative_error(got: &Tensor, want: &Tensor) -> f64 {
    assert_eq!(got.shape(), want.shape(), "output shapes differ");
    let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
    let scale = w.iter().fold(0.0f64, |m, v| m.max(v.abs())).max(f64::MIN_POSITIVE);
    g.iter().zip(&w).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max) / scale
}

#[test]
fn exporter_style_models_match_onnx_runtime() {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(models_dir())
        .expect("tests/import-models")
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("model.onnx").exists())
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 6, "expected the six exporter-style models, found {}", dirs.len());
    let kernels = KernelRegistry::standard();
    for dir in dirs {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let args = std::fs::read_to_string(dir.join("args")).unwrap_or_default();
        let bytes = std::fs::read(dir.join("model.onnx")).unwrap();
        let mut ctx = Context::new();
        let module =
            import_model(&mut ctx, &bytes, &options(&args)).unwrap_or_else(|e| panic!("{name}: {e}"));
        let inputs = numbered(&dir, "input");
        let expected = numbered(&dir, "output");
        let mut interp = Interpreter::new(&ctx, &module, &kernels);
        let outputs = interp.run("main", &inputs).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(outputs.len(), expected.len(), "{name}: output count");
        for (i, (got, want)) in outputs.iter().zip(&expected).enumerate() {
            let err = relative_error(got, want);
            eprintln!("{name}: output {i}: relative error {err:.2e}");
            assert!(err <= 1e-4, "{name}: output {i} differs from ONNX Runtime's by {err:.2e} (relative)");
        }
    }
}
