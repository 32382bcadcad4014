//! `recognize-gelu` end to end: each decomposition of GELU it recognizes (the
//! erf form with a division or a multiplication and the three groupings of the
//! outer product, the tanh form with `x³` as a power or as multiplications) is
//! run through the interpreter before and after the pass on the same random
//! inputs (plus zeros, tails and large values), and the outputs agree to
//! `|a − b| ≤ 1e-6 · max(1, |a|)`, `a` the decomposed chain's output. The
//! floor of 1 is for the negative tail, where `1 + erf(x/√2)` cancels: there
//! the step-by-step f32 chain, not the fused op, loses its relative accuracy,
//! while the two stay within 1e-7 of each other in absolute terms (measured:
//! 8.3e-8 at most where |y| < 1, 1.2e-7 relative elsewhere, printed with
//! `--nocapture`).

// Only the context and the pipeline runner are used here.
#[allow(dead_code)]
mod common;

use qopt_ir_core::SplitMix64;

use qopt_interp::{run_function, KernelRegistry, Tensor};
use qopt_ir_core::{module_to_string, parse_module, verify};

/// The constants every case declares, as f32 values an exporter writes.
const CONSTANTS: &str = "\
  %sqrt2 = fp.constant() {value = dense<1.4142135> : tensor<f32>} : () -> tensor<f32>
  %rsqrt2 = fp.constant() {value = dense<0.70710677> : tensor<f32>} : () -> tensor<f32>
  %one = fp.constant() {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %half = fp.constant() {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %three = fp.constant() {value = dense<3.0> : tensor<f32>} : () -> tensor<f32>
  %k = fp.constant() {value = dense<0.044715> : tensor<f32>} : () -> tensor<f32>
  %s = fp.constant() {value = dense<0.7978845608> : tensor<f32>} : () -> tensor<f32>
";

/// Each case: its name, whether it is the tanh form, and its body computing
/// `%y` from `%x` (`T` stands for the tensor type, `S` for `tensor<f32>`).
const CASES: &[(&str, bool, &str)] = &[
    (
        "erf_div_pytorch",
        false,
        "%0 = fp.div(%x, %sqrt2) : (T, S) -> T
  %1 = fp.erf(%0) : (T) -> T
  %2 = fp.add(%1, %one) : (T, S) -> T
  %3 = fp.mul(%x, %2) : (T, T) -> T
  %y = fp.mul(%3, %half) : (T, S) -> T",
    ),
    (
        "erf_mul_half_first",
        false,
        "%h = fp.mul(%half, %x) : (S, T) -> T
  %0 = fp.mul(%x, %rsqrt2) : (T, S) -> T
  %1 = fp.erf(%0) : (T) -> T
  %2 = fp.add(%one, %1) : (S, T) -> T
  %y = fp.mul(%2, %h) : (T, T) -> T",
    ),
    (
        "erf_half_on_factor",
        false,
        "%0 = fp.mul(%rsqrt2, %x) : (S, T) -> T
  %1 = fp.erf(%0) : (T) -> T
  %2 = fp.add(%1, %one) : (T, S) -> T
  %3 = fp.mul(%half, %2) : (S, T) -> T
  %y = fp.mul(%x, %3) : (T, T) -> T",
    ),
    (
        "tanh_pow",
        true,
        "%h = fp.mul(%x, %half) : (T, S) -> T
  %0 = fp.pow(%x, %three) : (T, S) -> T
  %1 = fp.mul(%k, %0) : (S, T) -> T
  %2 = fp.add(%x, %1) : (T, T) -> T
  %3 = fp.mul(%s, %2) : (S, T) -> T
  %4 = fp.tanh(%3) : (T) -> T
  %5 = fp.add(%4, %one) : (T, S) -> T
  %y = fp.mul(%h, %5) : (T, T) -> T",
    ),
    (
        "tanh_mul_cube",
        true,
        "%sq = fp.mul(%x, %x) : (T, T) -> T
  %0 = fp.mul(%sq, %x) : (T, T) -> T
  %1 = fp.mul(%0, %k) : (T, S) -> T
  %2 = fp.add(%1, %x) : (T, T) -> T
  %3 = fp.mul(%2, %s) : (T, S) -> T
  %4 = fp.tanh(%3) : (T) -> T
  %5 = fp.add(%one, %4) : (S, T) -> T
  %6 = fp.mul(%5, %x) : (T, T) -> T
  %y = fp.mul(%half, %6) : (S, T) -> T",
    ),
];

/// Relative tolerance, with a floor of 1 on the magnitude.
const TOLERANCE: f64 = 1e-6;

#[test]
fn decomposed_and_fused_gelus_agree_on_random_inputs() {
    let n = 4096usize;
    let mut rng = SplitMix64::new(0x6e1u64);
    let mut input: Vec<f32> = (0..n - 12).map(|_| rng.uniform_f32(-8.0, 8.0)).collect();
    input.extend([0.0, -0.0, 1e-6, -1e-6, 0.5, -0.5, 3.0, -3.0, 10.0, -10.0, 30.0, -30.0]);
    let ty = format!("tensor<{n}xf32>");
    let kernels = KernelRegistry::standard();
    let inputs = [Tensor::from_f32(&[n], input.clone()).unwrap()];
    for &(name, tanh, body) in CASES {
        let body = body.replace('S', "tensor<f32>").replace('T', &ty);
        let text = format!(
            "func.func @main(%x: {ty}) -> {ty} {{\n{CONSTANTS}  {body}\n  func.return %y : {ty}\n}}\n"
        );
        let mut ctx = common::context();
        let reference =
            parse_module(&mut ctx, text.as_bytes(), "case.qir").unwrap_or_else(|d| panic!("{d:?}\n{text}"));
        verify(&mut ctx, &reference).unwrap_or_else(|d| panic!("{name}: {d:?}"));
        let mut fused = parse_module(&mut ctx, text.as_bytes(), "case.qir").unwrap();
        common::run_pipeline(&mut ctx, &mut fused, "recognize-gelu");
        let printed = module_to_string(&ctx, &fused);
        let want_op = if tanh { "fp.gelu(%arg0) {approximate = \"tanh\"}" } else { "fp.gelu(%arg0) :" };
        assert!(printed.contains(want_op), "{name}: not recognized:\n{printed}");
        let ops = printed.lines().filter(|l| l.contains(" = fp.") && !l.contains("fp.constant")).count();
        assert_eq!(ops, 1, "{name}: only the gelu is left:\n{printed}");

        let run = |module| run_function(&ctx, module, "main", &inputs, &kernels).unwrap();
        let (want, got) = (run(&reference), run(&fused));
        let (want, got) = (want[0].to_f64_vec(), got[0].to_f64_vec());
        // The largest difference where |y| < 1, and relative to |y| where |y| ≥ 1.
        let (mut below_1, mut above_1) = (0.0f64, 0.0f64);
        for ((a, b), x) in want.iter().zip(&got).zip(&input) {
            let error = (a - b).abs();
            assert!(error <= TOLERANCE * a.abs().max(1.0), "{name}: x = {x}: chain {a}, fp.gelu {b}");
            if a.abs() < 1.0 {
                below_1 = below_1.max(error);
            } else {
                above_1 = above_1.max(error / a.abs());
            }
        }
        println!("{name}: largest difference {below_1:.3e} where |y| < 1, {above_1:.3e} relative elsewhere");
    }
}
