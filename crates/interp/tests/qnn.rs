//! Quantized functions run end to end with [`KernelRegistry::standard`]: the
//! executor hands the `qnn` kernels their operand types, constants of
//! quantized types arrive as stored integers, and the integer pipeline agrees
//! with the float one it approximates.

use qopt_interp::{run_function, KernelRegistry, Tensor};
use qopt_ir_core::{parse_module, verify, Context, Module};

fn load(text: &str) -> (Context, Module) {
    let mut ctx = Context::new();
    qopt_dialect_fp::register(&mut ctx).unwrap();
    qopt_dialect_qnn::register(&mut ctx).unwrap();
    let module = parse_module(&mut ctx, text.as_bytes(), "t.qir").unwrap_or_else(|d| panic!("{d}"));
    verify(&mut ctx, &module).unwrap_or_else(|d| panic!("{d}"));
    (ctx, module)
}

/// The dense example of `docs/quant-semantics.md` §6, with constant weights
/// and bias, through the executor.
#[test]
fn dense_worked_example() {
    let (ctx, m) = load(
        r#"
module {
  func.func @main(%x: tensor<1x3x!qnn.uniform<u8:f32, 0.5:128>>) -> (tensor<1x2x!qnn.uniform<i8:f32, 0.25:-10>>, tensor<1x2x!qnn.uniform<i8:f32, 0.25:-10>>) {
    %w = fp.constant() {value = dense<[[4, 1, 9], [-8, 8, 3]]> : tensor<2x3x!qnn.uniform<i8:f32:0, {0.25:0, 0.125:0}>>} : () -> tensor<2x3x!qnn.uniform<i8:f32:0, {0.25:0, 0.125:0}>>
    %b = fp.constant() {value = dense<[10, -4]> : tensor<2xi32>} : () -> tensor<2xi32>
    %y = qnn.dense(%x, %w, %b) : (tensor<1x3x!qnn.uniform<u8:f32, 0.5:128>>, tensor<2x3x!qnn.uniform<i8:f32:0, {0.25:0, 0.125:0}>>, tensor<2xi32>) -> tensor<1x2x!qnn.uniform<i8:f32, 0.25:-10>>
    %r = qnn.dense_relu(%x, %w, %b) : (tensor<1x3x!qnn.uniform<u8:f32, 0.5:128>>, tensor<2x3x!qnn.uniform<i8:f32:0, {0.25:0, 0.125:0}>>, tensor<2xi32>) -> tensor<1x2x!qnn.uniform<i8:f32, 0.25:-10>>
    func.return %y, %r : tensor<1x2x!qnn.uniform<i8:f32, 0.25:-10>>, tensor<1x2x!qnn.uniform<i8:f32, 0.25:-10>>
  }
}
"#,
    );
    let x = Tensor::U8(ndarray::arr2(&[[130u8, 126, 128]]).into_dyn());
    let out = run_function(&ctx, &m, "main", &[x], &KernelRegistry::standard()).unwrap();
    assert_eq!(out[0], Tensor::I8(ndarray::arr2(&[[-2i8, -19]]).into_dyn()));
    assert_eq!(out[1], Tensor::I8(ndarray::arr2(&[[-2i8, -10]]).into_dyn()));
}

/// quantize → observe → conv2d_relu → stop_fusion → concat (requantizing the
/// input beside the conv output) → dequantize, against the same network in f32
/// on fake-quantized inputs.
#[test]
fn quantized_network_tracks_its_float_version() {
    let qx = "tensor<1x2x5x5x!qnn.uniform<u8:f32, 0.02:128>>";
    let qw = "tensor<3x2x3x3x!qnn.uniform<i8<-127:127>:f32:0, {0.01:0, 0.02:0, 0.015:0}>>";
    let qy = "tensor<1x3x5x5x!qnn.uniform<i8:f32, 0.05:-128>>";
    let qc = "tensor<1x5x5x5x!qnn.uniform<i8:f32, 0.05:-128>>";
    let text = format!(
        r#"
module {{
  func.func @main(%x: tensor<1x2x5x5xf32>, %wf: tensor<3x2x3x3xf32>) -> (tensor<1x5x5x5xf32>, tensor<1x2x5x5xf32>) {{
    %q = qnn.quantize(%x) : (tensor<1x2x5x5xf32>) -> {qx}
    %w = qnn.quantize(%wf) : (tensor<3x2x3x3xf32>) -> {qw}
    %h = qnn.observe(%q) {{observer = "minmax"}} : ({qx}) -> {qx}
    %y = qnn.conv2d_relu(%h, %w) {{pad = [1, 1, 1, 1]}} : ({qx}, {qw}) -> {qy}
    %s = qnn.stop_fusion(%y) : ({qy}) -> {qy}
    %c = qnn.concat(%s, %h) {{axis = 1}} : ({qy}, {qx}) -> {qc}
    %d = qnn.dequantize(%c) : ({qc}) -> tensor<1x5x5x5xf32>
    %f = qnn.fake_quant(%x) {{type = !qnn.uniform<u8:f32, 0.02:128>}} : (tensor<1x2x5x5xf32>) -> tensor<1x2x5x5xf32>
    func.return %d, %f : tensor<1x5x5x5xf32>, tensor<1x2x5x5xf32>
  }}
  func.func @float(%x: tensor<1x2x5x5xf32>, %w: tensor<3x2x3x3xf32>) -> tensor<1x3x5x5xf32> {{
    %y = fp.conv2d(%x, %w) {{pad = [1, 1, 1, 1]}} : (tensor<1x2x5x5xf32>, tensor<3x2x3x3xf32>) -> tensor<1x3x5x5xf32>
    %r = fp.relu(%y) : (tensor<1x3x5x5xf32>) -> tensor<1x3x5x5xf32>
    func.return %r : tensor<1x3x5x5xf32>
  }}
}}
"#
    );
    let (ctx, m) = load(&text);
    let xs: Vec<f32> = (0..50).map(|i| ((i as f32) * 0.37).sin() * 2.0).collect();
    let ws: Vec<f32> = (0..54).map(|i| ((i as f32) * 0.71).cos() * 0.8).collect();
    let x = Tensor::from_f32(&[1, 2, 5, 5], xs).unwrap();
    let wf = Tensor::from_f32(&[3, 2, 3, 3], ws).unwrap();
    let kernels = KernelRegistry::standard();
    let out = run_function(&ctx, &m, "main", &[x.clone(), wf.clone()], &kernels).unwrap();
    let fake_x = out[1].clone();
    // The float network on the values the integer one sees (weights
    // fake-quantized per channel through their own quantize → dequantize).
    let wq: Vec<f64> = wf
        .to_f64_vec()
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let s = [0.01f32, 0.02, 0.015][i / 18];
            ((v as f32 / s).round_ties_even().clamp(-127.0, 127.0) * s) as f64
        })
        .collect();
    let wq = Tensor::from_f32(&[3, 2, 3, 3], wq.iter().map(|&v| v as f32).collect()).unwrap();
    let float = run_function(&ctx, &m, "float", &[fake_x.clone(), wq], &kernels).unwrap();
    let got = out[0].to_f64_vec();
    let (conv_part, input_part) = got.split_at(75);
    // The conv output is within half an output step (0.025) of the float one,
    // plus the f32 error of the float reference.
    for (i, (&q, &f)) in conv_part.iter().zip(&float[0].to_f64_vec()).enumerate() {
        let f = f.min(255.0 * 0.05);
        assert!((q - f).abs() <= 0.025 + 1e-4, "conv output {i}: integer {q}, float {f}");
    }
    // The second input of the concat was requantized from scale 0.02 to 0.05:
    // within half an output step of the fake-quantized input (clamped to the
    // output's range, which is [0, 12.75] with zero point −128).
    for (i, (&q, &f)) in input_part.iter().zip(&fake_x.to_f64_vec()).enumerate() {
        assert!((q - f.clamp(0.0, 12.75)).abs() <= 0.025 + 1e-6, "input {i}: {q} vs {f}");
    }
}

#[test]
fn kernel_errors_name_the_op() {
    let (ctx, m) = load(
        r#"
module {
  func.func @main(%x: tensor<2x!qnn.uniform<i8:f32, 0.5:0>>) -> tensor<2x!qnn.uniform<i8:f32, 0.25:0>> {
    %y = qnn.requantize(%x) {rounding = "half_up"} : (tensor<2x!qnn.uniform<i8:f32, 0.5:0>>) -> tensor<2x!qnn.uniform<i8:f32, 0.25:0>> loc("rq")
    func.return %y : tensor<2x!qnn.uniform<i8:f32, 0.25:0>>
  }
}
"#,
    );
    let x = Tensor::I8(ndarray::arr1(&[3i8, -64]).into_dyn());
    let out = run_function(&ctx, &m, "main", &[x], &KernelRegistry::standard()).unwrap();
    assert_eq!(out[0], Tensor::I8(ndarray::arr1(&[6i8, -128]).into_dyn()));
    // Without the qnn kernels the op is reported by name and location.
    let x = Tensor::I8(ndarray::arr1(&[3i8, -64]).into_dyn());
    let e = run_function(&ctx, &m, "main", &[x], &KernelRegistry::with_fp()).unwrap_err();
    assert_eq!(e.to_string(), "error at loc(\"rq\") ('qnn.requantize'): no kernel for 'qnn.requantize'");
}
