//! `recognize-hard-swish` keeps the meaning over the reals: each recognized
//! decomposition of HardSwish and the `fp.hard_swish` that replaces it agree
//! on 4096 inputs in [−8, 8] plus the kinks (±3) and zeros, to
//! `1e-6 · max(1, |y|)`.

#[allow(dead_code)]
mod common;

use qopt_interp::{run_function, KernelRegistry, Tensor};
use qopt_ir_core::SplitMix64;
use qopt_ir_core::{module_to_string, parse_module, verify};

/// The forms, as `%y` computed from `%x` (`T` the tensor type, `S` a scalar).
const CASES: &[(&str, &str)] = &[
    (
        "paddle",
        "%a = fp.add(%x, %three) : (T, S) -> T\n  %c = fp.clip(%a) {max = 6.0 : f32, min = 0.0 : f32} : (T) -> T\n  \
         %m = fp.mul(%x, %c) : (T, T) -> T\n  %y = fp.div(%m, %six) : (T, S) -> T",
    ),
    (
        "times a sixth",
        "%a = fp.add(%three, %x) : (S, T) -> T\n  %c = fp.clip(%a) {max = 6.0 : f32, min = 0.0 : f32} : (T) -> T\n  \
         %m = fp.mul(%c, %x) : (T, T) -> T\n  %y = fp.mul(%m, %sixth) : (T, S) -> T",
    ),
    (
        "hard sigmoid",
        "%h = fp.hard_sigmoid(%x) {alpha = 0.1666667 : f32, beta = 0.5 : f32} : (T) -> T\n  \
         %y = fp.mul(%x, %h) : (T, T) -> T",
    ),
];

#[test]
fn every_form_agrees_with_fp_hard_swish() {
    let n = 4096usize;
    let mut rng = SplitMix64::new(0x5a1f);
    let mut input: Vec<f32> = (0..n - 6).map(|_| rng.uniform_f32(-8.0, 8.0)).collect();
    input.extend([0.0, -0.0, 3.0, -3.0, 1e-6, -1e-6]);
    let ty = format!("tensor<{n}xf32>");
    let kernels = KernelRegistry::standard();
    let inputs = [Tensor::from_f32(&[n], input.clone()).unwrap()];
    for &(name, body) in CASES {
        let body = body.replace('S', "tensor<f32>").replace('T', &ty);
        let text = format!(
            "func.func @main(%x: {ty}) -> {ty} {{\n  \
             %three = fp.constant() {{value = dense<3.0> : tensor<f32>}} : () -> tensor<f32>\n  \
             %six = fp.constant() {{value = dense<6.0> : tensor<f32>}} : () -> tensor<f32>\n  \
             %sixth = fp.constant() {{value = dense<0.16666667> : tensor<f32>}} : () -> tensor<f32>\n  \
             {body}\n  func.return %y : {ty}\n}}\n"
        );
        let mut ctx = common::context();
        let reference =
            parse_module(&mut ctx, text.as_bytes(), "case.qir").unwrap_or_else(|d| panic!("{d:?}"));
        verify(&mut ctx, &reference).unwrap_or_else(|d| panic!("{name}: {d:?}"));
        let mut fused = parse_module(&mut ctx, text.as_bytes(), "case.qir").unwrap();
        common::run_pipeline(&mut ctx, &mut fused, "recognize-hard-swish");
        let printed = module_to_string(&ctx, &fused);
        assert!(printed.contains("fp.hard_swish(%arg0)"), "{name}: not recognized:\n{printed}");
        let run = |module| run_function(&ctx, module, "main", &inputs, &kernels).unwrap();
        let (want, got) = (run(&reference)[0].to_f64_vec(), run(&fused)[0].to_f64_vec());
        let mut largest = 0.0f64;
        for ((a, b), x) in want.iter().zip(&got).zip(&input) {
            let error = (a - b).abs();
            assert!(error <= 1e-6 * a.abs().max(1.0), "{name}: x = {x}: chain {a}, fp.hard_swish {b}");
            largest = largest.max(error / a.abs().max(1.0));
        }
        println!("{name}: largest difference {largest:.3e} (relative where |y| ≥ 1)");
    }
}
