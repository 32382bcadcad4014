//! `fuse` turns `dequantize → <LookupActivation op> → [relu | clip(0, c)] →
//! quantize` into one `qnn.lookup` whose table it computes with the model's
//! own kernels, so the fused model gives the fake-quant model's outputs bit for
//! bit. For every op with the interface (sigmoid, tanh, exp, erf, softplus,
//! hard_swish, hard_sigmoid, gelu in both forms), random 2- to 8-bit input and
//! output types (signed, unsigned, narrowed, per tensor, f32, f16 and bf16
//! expressed), with and without an activation after the op: the module before
//! `fuse` and after it run on the same random inputs (including values far
//! outside the input's range, ±inf and NaN) and the outputs are compared bit
//! for bit.

// Only the context and the pipeline runner are used here.
mod common;

use common::{context, run_pipeline};
use qopt_interp::{run_function, KernelRegistry, Tensor};
use qopt_ir_core::interfaces::LookupActivation;
use qopt_ir_core::SplitMix64;
use qopt_ir_core::{module_to_string, parse_module};

/// A random per-tensor quantized type of 2 to 8 bits with `expressed`
/// (a narrowed signed range one time in six), and the reals of its storage
/// range.
fn quant_type(rng: &mut SplitMix64, expressed: &str) -> (String, f64, f64) {
    let bits = 2 + rng.below(7) as u32;
    let signed = rng.below(2) == 0;
    let (mut lo, hi) =
        if signed { (-(1i64 << (bits - 1)), (1i64 << (bits - 1)) - 1) } else { (0, (1i64 << bits) - 1) };
    let storage = if signed && rng.below(6) == 0 {
        lo += 1;
        format!("i{bits}<{lo}:{hi}>")
    } else {
        format!("{}{bits}", if signed { 'i' } else { 'u' })
    };
    let zp = lo + rng.below((hi - lo + 1) as u64) as i64;
    // Scales from 2^-10 to 2, so a table spans from a small part of an
    // activation's interesting range to far beyond it.
    let scale = 2f64.powf(rng.uniform(-10.0, 1.0)) as f32;
    let real = |q: i64| f64::from(scale) * (q - zp) as f64;
    (format!("!qnn.uniform<{storage}:{expressed}, {scale:e}:{zp}>"), real(lo), real(hi))
}

/// The ops with the `LookupActivation` interface and the attributes to try.
fn lookup_ops() -> Vec<(&'static str, Vec<&'static str>)> {
    let ctx = context();
    let ops: Vec<&'static str> = ctx
        .op_defs()
        .iter()
        .filter(|d| d.interfaces.get::<LookupActivation>().is_some())
        .map(|d| d.name)
        .collect();
    assert!(ops.len() >= 8, "{ops:?}");
    ops.into_iter()
        .map(|name| {
            let attrs = match name {
                "fp.hard_sigmoid" => vec![
                    "",
                    " {alpha = 0.16666667 : f32, beta = 0.5 : f32}",
                    " {alpha = -0.3 : f32, beta = 0.25 : f32}",
                ],
                "fp.gelu" => vec!["", " {approximate = \"tanh\"}"],
                _ => vec![""],
            };
            (name, attrs)
        })
        .collect()
}

#[test]
fn fused_lookups_are_bit_identical_to_the_fake_quant_model() {
    let kernels = KernelRegistry::standard();
    let mut rng = SplitMix64::new(0x5EED_1007);
    let n = 96;
    let mut cases = 0;
    for (op, attr_sets) in lookup_ops() {
        for attrs in attr_sets {
            for round in 0..12 {
                let expressed = *rng.pick(&["f32", "f32", "f16", "bf16"]);
                let (qin, lo, hi) = quant_type(&mut rng, expressed);
                let (qout, _, _) = quant_type(&mut rng, expressed);
                let f = format!("tensor<{n}x{expressed}>");
                let (tin, tout) = (format!("tensor<{n}x{qin}>"), format!("tensor<{n}x{qout}>"));
                let activation = match round % 3 {
                    0 => String::new(),
                    1 => format!("  %a = fp.relu(%y) : ({f}) -> {f}\n"),
                    _ => format!(
                        "  %a = fp.clip(%y) {{max = {:e} : f32, min = 0.0 : f32}} : ({f}) -> {f}\n",
                        rng.uniform(0.1, 4.0) as f32
                    ),
                };
                let last = if activation.is_empty() { "%y" } else { "%a" };
                let text = format!(
                    "func.func @main(%x: {f}) -> {f} {{\n  \
                     %q = qnn.quantize(%x) : ({f}) -> {tin}\n  \
                     %d = qnn.dequantize(%q) : ({tin}) -> {f}\n  \
                     %y = {op}(%d){attrs} : ({f}) -> {f}\n{activation}  \
                     %o = qnn.quantize({last}) : ({f}) -> {tout}\n  \
                     %e = qnn.dequantize(%o) : ({tout}) -> {f}\n  \
                     func.return %e : {f}\n}}\n"
                );
                let mut ctx = context();
                let fake = parse_module(&mut ctx, text.as_bytes(), "case.qir")
                    .unwrap_or_else(|d| panic!("{d}\n{text}"));
                let mut fused = fake.clone();
                run_pipeline(&mut ctx, &mut fused, "fuse,dce");
                let printed = module_to_string(&ctx, &fused);
                assert!(printed.contains("qnn.lookup") && !printed.contains(op), "{text}\n{printed}");
                assert_eq!(printed.matches("qnn.quantize").count(), 1, "{printed}");

                // Inputs over the table's whole input range and beyond it, and
                // the special values.
                let margin = (hi - lo) / 4.0;
                let mut x: Vec<f32> =
                    (0..n - 4).map(|_| rng.uniform(lo - margin, hi + margin) as f32).collect();
                x.extend([f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 0.0]);
                let input = [Tensor::from_f32(&[n], x).unwrap()];
                let want = run_function(&ctx, &fake, "main", &input, &kernels).unwrap();
                let got = run_function(&ctx, &fused, "main", &input, &kernels).unwrap();
                assert!(want[0].bit_equal(&got[0]), "{text}\n{printed}\n{:?}\n{:?}", want[0], got[0]);
                cases += 1;
            }
        }
    }
    assert!(cases >= 100, "{cases} cases");
}

/// The sites the pattern declines stay float between their dequantize and
/// quantize: 16-bit input storage (a table of 65,536 entries is not made) and
/// a per-axis input.
#[test]
fn wide_or_per_axis_inputs_stay_float() {
    let text = "func.func @main(%x: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {\n  \
        %q = qnn.quantize(%x) : (tensor<2x4xf32>) -> tensor<2x4x!qnn.uniform<i16:f32, 0.001:0>>\n  \
        %d = qnn.dequantize(%q) : (tensor<2x4x!qnn.uniform<i16:f32, 0.001:0>>) -> tensor<2x4xf32>\n  \
        %y = fp.sigmoid(%d) : (tensor<2x4xf32>) -> tensor<2x4xf32>\n  \
        %o = qnn.quantize(%y) : (tensor<2x4xf32>) -> tensor<2x4x!qnn.uniform<u8:f32, 0.00390625:0>>\n  \
        %e = qnn.dequantize(%o) : (tensor<2x4x!qnn.uniform<u8:f32, 0.00390625:0>>) -> tensor<2x4xf32>\n  \
        %p = qnn.quantize(%x) : (tensor<2x4xf32>) -> tensor<2x4x!qnn.uniform<i8:f32:0, {0.1:0, 0.2:0}>>\n  \
        %pd = qnn.dequantize(%p) : (tensor<2x4x!qnn.uniform<i8:f32:0, {0.1:0, 0.2:0}>>) -> tensor<2x4xf32>\n  \
        %t = fp.tanh(%pd) : (tensor<2x4xf32>) -> tensor<2x4xf32>\n  \
        %to = qnn.quantize(%t) : (tensor<2x4xf32>) -> tensor<2x4x!qnn.uniform<i8:f32, 0.0078125:0>>\n  \
        %te = qnn.dequantize(%to) : (tensor<2x4x!qnn.uniform<i8:f32, 0.0078125:0>>) -> tensor<2x4xf32>\n  \
        func.return %e, %te : tensor<2x4xf32>, tensor<2x4xf32>\n}\n";
    let mut ctx = context();
    let mut module = parse_module(&mut ctx, text.as_bytes(), "case.qir").unwrap();
    run_pipeline(&mut ctx, &mut module, "fuse,dce");
    let printed = module_to_string(&ctx, &module);
    assert!(!printed.contains("qnn.lookup"), "{printed}");
    assert!(printed.contains("fp.sigmoid") && printed.contains("fp.tanh"), "{printed}");
}
