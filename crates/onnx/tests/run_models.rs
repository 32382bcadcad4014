//! End to end: every reference model in `tests/models` is imported and run by
//! the interpreter on all its test samples, and the outputs are compared with
//! ONNX Runtime's, stored beside the model:
//! - float models: max |error| ≤ 1e-5 × max |output| per model (the ONNX
//!   Runtime agreement the interpreter promises; float summation order
//!   differs), and the same top-1 class on every sample;
//! - QDQ models (ONNX Runtime's `quantize_static` output): within one
//!   quantization step of the output's dequantized type on every element.

use qopt_interp::{Interpreter, KernelRegistry, Tensor};
use qopt_ir_core::{Context, Module, TypeData};
use qopt_npy::read_npy_file;
use qopt_onnx::{import_model, ImportOptions};
use std::path::{Path, PathBuf};

fn model_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/models").join(name)
}

fn import(ctx: &mut Context, path: &Path) -> Module {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    import_model(ctx, &bytes, &ImportOptions::default()).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn load(path: PathBuf) -> Tensor {
    let raw = read_npy_file(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Tensor::from_raw(&raw).unwrap()
}

/// Sample `i` of a stacked dataset, reshaped to the model's input shape.
fn sample(data: &Tensor, i: usize, shape: &[usize]) -> Tensor {
    let Tensor::F32(a) = data else { panic!("test data must be f32") };
    let row = a.index_axis(ndarray::Axis(0), i).iter().copied().collect();
    Tensor::from_f32(shape, row).unwrap()
}

/// The static input shape of `@main`'s only argument.
fn input_shape(ctx: &Context, module: &Module) -> Vec<usize> {
    let func = module.lookup_symbol(ctx, "main").unwrap();
    let entry = module.first_block(module.region(func, 0));
    let ty = module.value_type(module.block_args(entry)[0]);
    ctx.tensor_shape(ty).unwrap().iter().map(|&d| d as usize).collect()
}

/// Runs every sample of `test` and returns each sample's first output as f64s.
fn outputs(ctx: &Context, module: &Module, test: &Tensor) -> Vec<Vec<f64>> {
    let shape = input_shape(ctx, module);
    let kernels = KernelRegistry::standard();
    let mut interp = Interpreter::new(ctx, module, &kernels);
    (0..test.shape()[0])
        .map(|i| {
            let out =
                interp.run("main", &[sample(test, i, &shape)]).unwrap_or_else(|e| panic!("sample {i}: {e}"));
            out[0].to_f64_vec()
        })
        .collect()
}

fn argmax(v: &[f64]) -> usize {
    (0..v.len()).fold(0, |best, i| if v[i] > v[best] { i } else { best })
}

fn check_float(name: &str) {
    let dir = model_dir(name);
    let mut ctx = Context::new();
    let module = import(&mut ctx, &dir.join("model.onnx"));
    let test = load(dir.join("test.npy"));
    let reference = load(dir.join("ref_fp32.npy")).to_f64_vec();
    let got = outputs(&ctx, &module, &test);
    let classes = reference.len() / got.len();
    let max_ref = reference.iter().fold(0f64, |m, v| m.max(v.abs()));
    let mut max_err = 0f64;
    for (i, out) in got.iter().enumerate() {
        let want = &reference[i * classes..(i + 1) * classes];
        assert_eq!(out.len(), classes, "{name}: sample {i} has {} outputs", out.len());
        for (a, b) in out.iter().zip(want) {
            max_err = max_err.max((a - b).abs());
        }
        assert_eq!(argmax(out), argmax(want), "{name}: top-1 of sample {i} differs from ONNX Runtime's");
    }
    assert!(max_err <= 1e-5 * max_ref, "{name}: max |error| {max_err:e} > 1e-5 × max |output| {max_ref:e}");
}

/// The scale of the quantized value the function's output is dequantized from.
fn output_step(ctx: &Context, module: &Module) -> f64 {
    let func = module.lookup_symbol(ctx, "main").unwrap();
    let entry = module.first_block(module.region(func, 0));
    let ret = module.block_ops(entry).last().unwrap();
    let dq = module.defining_op(module.operand(ret, 0));
    assert_eq!(ctx.op_name_str(module.op_name(dq)), "qnn.dequantize", "the QDQ model ends in a dequantize");
    let elem = ctx.element_type(module.value_type(module.operand(dq, 0)));
    match ctx.type_data(elem) {
        TypeData::Quant(q) => match &q.params {
            qopt_ir_core::QuantParams::PerTensor { scale, .. } => *scale,
            other => panic!("per-axis output: {other:?}"),
        },
        other => panic!("not quantized: {other:?}"),
    }
}

fn check_qdq(name: &str) {
    let dir = model_dir(name);
    let mut ctx = Context::new();
    let module = import(&mut ctx, &dir.join("ort_qdq_minmax.onnx"));
    let test = load(dir.join("test.npy"));
    let reference = load(dir.join("ref_ort_int8.npy")).to_f64_vec();
    let step = output_step(&ctx, &module);
    let got: Vec<f64> = outputs(&ctx, &module, &test).into_iter().flatten().collect();
    assert_eq!(got.len(), reference.len());
    let worst = got.iter().zip(&reference).map(|(a, b)| (a - b).abs()).fold(0f64, f64::max);
    assert!(worst <= step * 1.000_001, "{name}: worst |error| {worst} exceeds one output step {step}");
}

#[test]
fn digits_mlp_float_matches_onnx_runtime() {
    check_float("digits_mlp");
}

#[test]
fn digits_cnn_float_matches_onnx_runtime() {
    check_float("digits_cnn");
}

#[test]
fn resnet_tiny_float_matches_onnx_runtime() {
    check_float("resnet_tiny");
}

#[test]
fn digits_mlp_qdq_matches_onnx_runtime_int8() {
    check_qdq("digits_mlp");
}

#[test]
fn digits_cnn_qdq_matches_onnx_runtime_int8() {
    check_qdq("digits_cnn");
}

#[test]
fn resnet_tiny_qdq_matches_onnx_runtime_int8() {
    check_qdq("resnet_tiny");
}
