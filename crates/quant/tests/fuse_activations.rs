//! `fuse` drops a relu or `clip(0, c)` after an op without an activation
//! form (`qnn.add`) when the quantize after it already applies it: its zero
//! point is the storage minimum and, for the clip, `c` quantizes to the
//! storage maximum. That is exact exactly when `quantize(activation(y))` and
//! `quantize(y)` agree for every `y`: for random output types (2 to 8 bits,
//! signed and unsigned, the zero point at the minimum or above it) and clip
//! bounds at, just below and just above the top of the type's range, the
//! fake-quant models with and without the activation are run on a grid of
//! sums 64 times finer than the output's step and spanning twice its range.
//! Where `fuse` drops the activation they agree bit for bit; where it keeps it
//! they differ somewhere on the grid.

// Only the context, the pipeline runner and the generator are used here.
mod common;

use common::{context, run_pipeline};
use qopt_interp::{run_function, KernelRegistry, Tensor};
use qopt_ir_core::SplitMix64;
use qopt_ir_core::{module_to_string, parse_module};

/// `a + b` (b is fed zeros), then `activation` if any, quantized to `out`
/// and dequantized; `a` arrives as i16 with scale `step`.
fn model(step: f32, activation: &str, out: &str, n: usize) -> String {
    let f = format!("tensor<{n}xf32>");
    let (ta, tb) = (
        format!("tensor<{n}x!qnn.uniform<i16:f32, {step:e}:0>>"),
        format!("tensor<{n}x!qnn.uniform<i8:f32, 0.5:0>>"),
    );
    let tout = format!("tensor<{n}x{out}>");
    let (act, last) = if activation.is_empty() {
        (String::new(), "%s")
    } else {
        (format!("  %r = {activation} : ({f}) -> {f} loc(\"act\")\n"), "%r")
    };
    format!(
        "func.func @main(%a: {f}, %b: {f}) -> {f} {{\n  \
         %aq = qnn.quantize(%a) : ({f}) -> {ta}\n  \
         %ad = qnn.dequantize(%aq) : ({ta}) -> {f}\n  \
         %bq = qnn.quantize(%b) : ({f}) -> {tb}\n  \
         %bd = qnn.dequantize(%bq) : ({tb}) -> {f}\n  \
         %s = fp.add(%ad, %bd) : ({f}, {f}) -> {f} loc(\"add\")\n{act}  \
         %o = qnn.quantize({last}) : ({f}) -> {tout}\n  \
         %e = qnn.dequantize(%o) : ({tout}) -> {f}\n  \
         func.return %e : {f}\n}}\n"
    )
}

#[test]
fn an_activation_is_dropped_exactly_when_the_output_type_applies_it() {
    let kernels = KernelRegistry::standard();
    let mut rng = SplitMix64::new(0xAC71_0A7E);
    let n = 2 * 32768;
    let (mut dropped, mut kept) = (0, 0);
    for round in 0..48 {
        let bits = 2 + rng.below(7) as i64;
        let signed = rng.below(2) == 0;
        let (lo, hi) =
            if signed { (-(1i64 << (bits - 1)), (1i64 << (bits - 1)) - 1) } else { (0, (1i64 << bits) - 1) };
        let zp = if rng.below(3) == 0 { lo + 1 + rng.below((hi - lo) as u64) as i64 } else { lo };
        let scale = 2f64.powf(rng.uniform(-8.0, 1.0)) as f32;
        let out = format!("!qnn.uniform<{}{bits}:f32, {scale:e}:{zp}>", if signed { 'i' } else { 'u' });
        let f = format!("tensor<{n}xf32>");
        let top = f64::from(scale) * (hi - zp) as f64;
        let activation = if round % 4 == 0 {
            "fp.relu(%s)".to_string()
        } else {
            // The top of the range, nudged by up to a few f32 ulps or a step.
            let c = match round % 4 {
                1 => top as f32,
                2 => (top * (1.0 + f64::from(*rng.pick(&[-3.0f32, -1.0, 1.0, 3.0])) * 1.2e-7)) as f32,
                _ => (top + f64::from(scale) * rng.uniform(-1.5, 1.5)) as f32,
            };
            if c <= 0.0 {
                continue;
            }
            format!("fp.clip(%s) {{max = {c:e} : f32, min = 0.0 : f32}}")
        };
        let with = model(scale / 64.0, &activation, &out, n);
        let without = model(scale / 64.0, "", &out, n);
        let mut ctx = context();
        let with_act =
            parse_module(&mut ctx, with.as_bytes(), "with.qir").unwrap_or_else(|d| panic!("{d}\n{with}"));
        let without_act = parse_module(&mut ctx, without.as_bytes(), "without.qir").unwrap();
        let mut fused = with_act.clone();
        run_pipeline(&mut ctx, &mut fused, "fuse,dce");
        let printed = module_to_string(&ctx, &fused);
        let is_dropped = printed.contains("qnn.add") && !printed.contains("loc(\"act\")");

        // Sums k·step for every i16 k: twice the output's range around 0.
        let a: Vec<f32> = (-32768..32768).map(|k| k as f32 * (scale / 64.0)).collect();
        let inputs = [Tensor::from_f32(&[n], a).unwrap(), Tensor::from_f32(&[n], vec![0.0; n]).unwrap()];
        let want = run_function(&ctx, &without_act, "main", &inputs, &kernels).unwrap();
        let got = run_function(&ctx, &with_act, "main", &inputs, &kernels).unwrap();
        let agree = want[0].bit_equal(&got[0]);
        assert_eq!(
            is_dropped, agree,
            "{activation} into {out} ({f}): dropped {is_dropped}, agree {agree}\n{printed}"
        );
        if is_dropped {
            dropped += 1;
        } else {
            kept += 1;
        }
    }
    assert!(dropped >= 10 && kept >= 10, "{dropped} dropped, {kept} kept");
}
