//! `absorb-bias` against its definition, on small models and random data:
//!
//! - on a conv → relu → depthwise conv → relu → conv chain (two pairs sharing
//!   the depthwise conv), the outputs on every calibration sample are those
//!   of the original model to float rounding, the first layer's biases went
//!   down exactly by its positive recorded minima, and an input far outside
//!   the calibrated range does change the result (the relation holds on the
//!   calibrated range only);
//! - the new biases of a dense pair and of a conv pair with a non-square,
//!   multi-tap second weight equal `b1 − a` and `b2 + W2 · a`, with the minima
//!   `a` computed here from the data, independently of the pass (a wrong sign
//!   or a sum over the wrong axis of W2 gives other numbers), also with
//!   `fraction=0.5`;
//! - running the pass again, with or without data, changes nothing.

// Each test binary uses part of the shared helpers (this one not `repo`).
mod common;

use common::{constant_operand, context, ops_named, parse, run_pipeline, write_data};
use qopt_interp::{run_function, KernelRegistry, Tensor};
use qopt_ir_core::SplitMix64;
use qopt_ir_core::{dense_values_f64, module_to_string, AttrData, Context, Module, OpId};

/// The `channel_min` recorded on `op`.
fn recorded_minima(ctx: &Context, module: &Module, op: OpId) -> Vec<f64> {
    let record = module.op_attr(ctx, op, "qnn.bias_absorption").expect("a record");
    let minima = ctx.dict_get(record, "channel_min").expect("channel_min");
    match ctx.attr_data(minima) {
        AttrData::Dense(d) => dense_values_f64(ctx, d, ctx.element_type(d.ty)).unwrap(),
        _ => panic!("not dense"),
    }
}

/// `values` as a nested dense literal of `shape` (`[[1.0, 2.0], [3.0, 4.0]]`).
fn nested(values: &[f32], shape: &[usize]) -> String {
    let mut parts: Vec<String> = values.iter().map(|x| format!("{x:e}")).collect();
    for &dim in shape.iter().rev() {
        parts = parts.chunks(dim).map(|c| format!("[{}]", c.join(", "))).collect();
    }
    parts.concat()
}

/// `%name = fp.constant` of `values` with `shape`.
fn constant(name: &str, values: &[f32], shape: &[usize]) -> String {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let ty = format!("tensor<{}xf32>", dims.join("x"));
    format!("  %{name} = fp.constant() {{value = dense<{}> : {ty}}} : () -> {ty}\n", nested(values, shape))
}

/// Runs `text`'s @main on each sample (`per_sample` values of `shape`).
fn outputs(ctx: &Context, module: &Module, data: &[f32], shape: &[usize]) -> Vec<Vec<f64>> {
    let kernels = KernelRegistry::standard();
    let per_sample: usize = shape.iter().product();
    data.chunks(per_sample)
        .map(|x| {
            let input = [Tensor::from_f32(shape, x.to_vec()).unwrap()];
            run_function(ctx, module, "main", &input, &kernels).unwrap().remove(0).to_f64_vec()
        })
        .collect()
}

/// conv (3×3, padding 1, 2 → 4 channels) → relu → depthwise 2×2 (no padding)
/// → relu → conv 1×1 (4 → 3, no bias), on 5×5 inputs in [0, 1]. The biases
/// keep most pre-relu values of both pairs positive, so both pairs absorb.
fn chain_model(rng: &mut SplitMix64) -> String {
    let w1 = rng.vec_f32(4 * 2 * 9, -0.1, 0.1);
    let wd = rng.vec_f32(4 * 4, 0.1, 0.5);
    let w3 = rng.vec_f32(3 * 4, -1.0, 1.0);
    let mut text = String::from("func.func @main(%x: tensor<1x2x5x5xf32>) -> tensor<1x3x4x4xf32> {\n");
    text += &constant("w1", &w1, &[4, 2, 3, 3]);
    text += &constant("b1", &[2.0, -1.0, 3.0, 0.5], &[4]);
    text += &constant("wd", &wd, &[4, 1, 2, 2]);
    text += &constant("bd", &[1.5, 1.0, 2.0, -3.0], &[4]);
    text += &constant("w3", &w3, &[3, 4, 1, 1]);
    text += "  %c1 = fp.conv2d(%x, %w1, %b1) {pad = [1, 1, 1, 1]} : (tensor<1x2x5x5xf32>, tensor<4x2x3x3xf32>, tensor<4xf32>) -> tensor<1x4x5x5xf32>\n";
    text += "  %r1 = fp.relu(%c1) : (tensor<1x4x5x5xf32>) -> tensor<1x4x5x5xf32>\n";
    text += "  %c2 = fp.conv2d(%r1, %wd, %bd) {groups = 4} : (tensor<1x4x5x5xf32>, tensor<4x1x2x2xf32>, tensor<4xf32>) -> tensor<1x4x4x4xf32>\n";
    text += "  %r2 = fp.relu(%c2) : (tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>\n";
    text +=
        "  %y = fp.conv2d(%r2, %w3) : (tensor<1x4x4x4xf32>, tensor<3x4x1x1xf32>) -> tensor<1x3x4x4xf32>\n";
    text += "  func.return %y : tensor<1x3x4x4xf32>\n}\n";
    text
}

#[test]
fn outputs_are_unchanged_on_the_calibration_samples() {
    let mut rng = SplitMix64::new(11);
    let text = chain_model(&mut rng);
    let samples = 24;
    let shape = [1, 2, 5, 5];
    let data = rng.vec_f32(samples * 50, 0.0, 1.0);
    let (_data, path) = write_data("chain", &[samples, 1, 2, 5, 5], data.clone());

    let mut ctx = context();
    let original = parse(&mut ctx, &text);
    let mut module = parse(&mut ctx, &text);
    run_pipeline(&mut ctx, &mut module, &format!("absorb-bias{{data=\"{}\"}}", path.display()));

    let convs = ops_named(&ctx, &module, "fp.conv2d");
    let (b1_before, b1_after) = (
        constant_operand(&ctx, &original, ops_named(&ctx, &original, "fp.conv2d")[0], 2),
        constant_operand(&ctx, &module, convs[0], 2),
    );
    let minima = recorded_minima(&ctx, &module, convs[0]);
    let mut lowered = 0;
    for c in 0..4 {
        let moved = b1_before[c] - b1_after[c];
        let expected = minima[c].max(0.0);
        assert!(
            (moved - expected).abs() <= 1e-5 * (1.0 + expected),
            "channel {c}: moved {moved}, minimum {}",
            minima[c]
        );
        lowered += usize::from(moved > 0.0);
    }
    assert!(lowered >= 2, "the example absorbs on too few channels: {minima:?}");
    // The depthwise conv is the first of the second pair too: it has minima.
    assert!(recorded_minima(&ctx, &module, convs[1]).iter().any(|&m| m > 0.0));
    // And the last conv got a bias.
    assert_eq!(module.num_operands(convs[2]), 3);

    let before = outputs(&ctx, &original, &data, &shape);
    let after = outputs(&ctx, &module, &data, &shape);
    let scale = before.iter().flatten().fold(0.0f64, |m, v| m.max(v.abs()));
    let worst =
        before.iter().flatten().zip(after.iter().flatten()).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
    assert!(worst <= 1e-5 * scale, "worst difference {worst} at output scale {scale}");

    // Far below the calibrated range, relu cuts where the absorbed model does not.
    let outside = vec![-50.0f32; 50];
    let (a, b) = (outputs(&ctx, &original, &outside, &shape), outputs(&ctx, &module, &outside, &shape));
    let apart = a[0].iter().zip(&b[0]).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max);
    assert!(apart > 1e-3, "outside the calibrated range the models should differ");
}

/// Smallest value per channel of rows of `h` (`channels` per row).
fn column_minima(h: &[f64], channels: usize) -> Vec<f64> {
    let mut m = vec![f64::INFINITY; channels];
    for (i, v) in h.iter().enumerate() {
        m[i % channels] = m[i % channels].min(*v);
    }
    m
}

#[test]
fn biases_match_an_independent_computation() {
    let mut rng = SplitMix64::new(5);
    // dense 3 → 4 → relu → dense 4 → 2.
    let (w1, b1) = (rng.vec_f32(12, -0.5, 0.5), [1.5f32, -2.0, 0.8, 2.5]);
    let (w2, b2) = (rng.vec_f32(8, -1.0, 1.0), [0.1f32, -0.3]);
    let samples = 30;
    let data = rng.vec_f32(samples * 3, -1.0, 1.0);
    let (_data, path) = write_data("dense", &[samples, 1, 3], data.clone());
    let mut text = String::from("func.func @main(%x: tensor<1x3xf32>) -> tensor<1x2xf32> {\n");
    text += &constant("w1", &w1, &[4, 3]);
    text += &constant("b1", &b1, &[4]);
    text += &constant("w2", &w2, &[2, 4]);
    text += &constant("b2", &b2, &[2]);
    text += "  %h = fp.dense(%x, %w1, %b1) : (tensor<1x3xf32>, tensor<4x3xf32>, tensor<4xf32>) -> tensor<1x4xf32>\n";
    text += "  %r = fp.relu(%h) : (tensor<1x4xf32>) -> tensor<1x4xf32>\n";
    text += "  %y = fp.dense(%r, %w2, %b2) : (tensor<1x4xf32>, tensor<2x4xf32>, tensor<2xf32>) -> tensor<1x2xf32>\n";
    text += "  func.return %y : tensor<1x2xf32>\n}\n";
    let h: Vec<f64> = data
        .chunks(3)
        .flat_map(|x| {
            (0..4).map(|c| {
                f64::from(b1[c]) + (0..3).map(|i| f64::from(w1[c * 3 + i]) * f64::from(x[i])).sum::<f64>()
            })
        })
        .collect();
    let minima = column_minima(&h, 4);
    assert!(minima.iter().any(|&m| m > 0.1) && minima.iter().any(|&m| m < 0.0), "{minima:?}");
    for fraction in [1.0, 0.5] {
        let a: Vec<f64> = minima.iter().map(|&m| fraction * m.max(0.0)).collect();
        let want_b1: Vec<f64> = (0..4).map(|c| f64::from(b1[c]) - a[c]).collect();
        let want_b2: Vec<f64> = (0..2)
            .map(|o| f64::from(b2[o]) + (0..4).map(|c| f64::from(w2[o * 4 + c]) * a[c]).sum::<f64>())
            .collect();
        let mut ctx = context();
        let mut module = parse(&mut ctx, &text);
        run_pipeline(
            &mut ctx,
            &mut module,
            &format!("absorb-bias{{data=\"{}\" fraction={fraction}}}", path.display()),
        );
        let dense = ops_named(&ctx, &module, "fp.dense");
        let (got_b1, got_b2) =
            (constant_operand(&ctx, &module, dense[0], 2), constant_operand(&ctx, &module, dense[1], 2));
        for (got, want) in got_b1.iter().zip(&want_b1).chain(got_b2.iter().zip(&want_b2)) {
            assert!(
                (got - want).abs() < 1e-5,
                "fraction {fraction}: b1 {got_b1:?} b2 {got_b2:?}, expected {want_b1:?} {want_b2:?}"
            );
        }
    }

    // conv 1×1 (1 → 3 channels) → relu → conv 2×2 (3 → 2, no padding): b2[o]
    // gains Σ_{c,kh,kw} W2[o,c,kh,kw] · a[c], with W2 not square.
    let (w1, b1) = ([0.5f32, -0.25, 1.0], [2.0f32, 1.0, -0.5]);
    let w2 = rng.vec_f32(2 * 3 * 4, -1.0, 1.0);
    let data = rng.vec_f32(samples * 9, -1.0, 1.0);
    let (_data, path) = write_data("conv", &[samples, 1, 1, 3, 3], data.clone());
    let mut text = String::from("func.func @main(%x: tensor<1x1x3x3xf32>) -> tensor<1x2x2x2xf32> {\n");
    text += &constant("w1", &w1, &[3, 1, 1, 1]);
    text += &constant("b1", &b1, &[3]);
    text += &constant("w2", &w2, &[2, 3, 2, 2]);
    text += "  %h = fp.conv2d(%x, %w1, %b1) : (tensor<1x1x3x3xf32>, tensor<3x1x1x1xf32>, tensor<3xf32>) -> tensor<1x3x3x3xf32>\n";
    text += "  %r = fp.relu(%h) : (tensor<1x3x3x3xf32>) -> tensor<1x3x3x3xf32>\n";
    text += "  %y = fp.conv2d(%r, %w2) : (tensor<1x3x3x3xf32>, tensor<2x3x2x2xf32>) -> tensor<1x2x2x2xf32>\n";
    text += "  func.return %y : tensor<1x2x2x2xf32>\n}\n";
    let x_min = data.iter().fold(f64::INFINITY, |m, &v| m.min(f64::from(v)));
    let x_max = data.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(f64::from(v)));
    let minima: Vec<f64> = (0..3)
        .map(|c| {
            let w = f64::from(w1[c]);
            f64::from(b1[c]) + if w >= 0.0 { w * x_min } else { w * x_max }
        })
        .collect();
    let a: Vec<f64> = minima.iter().map(|m| m.max(0.0)).collect();
    assert!(a.iter().filter(|&&v| v > 0.0).count() == 2, "{minima:?}");
    let want_b2: Vec<f64> = (0..2)
        .map(|o| (0..3).map(|c| a[c] * (0..4).map(|k| f64::from(w2[(o * 3 + c) * 4 + k])).sum::<f64>()).sum())
        .collect();
    let mut ctx = context();
    let mut module = parse(&mut ctx, &text);
    run_pipeline(&mut ctx, &mut module, &format!("absorb-bias{{data=\"{}\"}}", path.display()));
    let convs = ops_named(&ctx, &module, "fp.conv2d");
    let (got_b1, got_b2) =
        (constant_operand(&ctx, &module, convs[0], 2), constant_operand(&ctx, &module, convs[1], 2));
    for c in 0..3 {
        assert!((got_b1[c] - (f64::from(b1[c]) - a[c])).abs() < 1e-6, "b1 {got_b1:?}, a {a:?}");
    }
    for (got, want) in got_b2.iter().zip(&want_b2) {
        assert!((got - want).abs() < 1e-5, "b2 {got_b2:?}, expected {want_b2:?}");
    }
}

#[test]
fn a_rerun_changes_nothing() {
    let mut rng = SplitMix64::new(23);
    let text = chain_model(&mut rng);
    let samples = 8;
    let (_data, path) = write_data("rerun", &[samples, 1, 2, 5, 5], rng.vec_f32(samples * 50, 0.0, 1.0));
    let mut ctx = context();
    let mut module = parse(&mut ctx, &text);
    let with_data = format!("absorb-bias{{data=\"{}\"}}", path.display());
    run_pipeline(&mut ctx, &mut module, &with_data);
    let once = module_to_string(&ctx, &module);
    assert!(once.contains("qnn.bias_absorption"));
    run_pipeline(&mut ctx, &mut module, "absorb-bias");
    assert_eq!(module_to_string(&ctx, &module), once, "a rerun without data");
    run_pipeline(&mut ctx, &mut module, &with_data);
    assert_eq!(module_to_string(&ctx, &module), once, "a rerun with data");
}

/// The records describe the float model: `expand-fakeq` drops them, so
/// integer ops never carry them.
#[test]
fn expand_fakeq_drops_the_records() {
    let mut rng = SplitMix64::new(29);
    let text = chain_model(&mut rng);
    let samples = 4;
    let (_data, path) = write_data("expand", &[samples, 1, 2, 5, 5], rng.vec_f32(samples * 50, 0.0, 1.0));
    let data = format!("data=\"{}\"", path.display());
    let mut ctx = context();
    let mut module = parse(&mut ctx, &text);
    run_pipeline(
        &mut ctx,
        &mut module,
        &format!("absorb-bias{{{data}}},insert-observers,calibrate{{{data}}},insert-fakeq"),
    );
    assert!(module_to_string(&ctx, &module).contains("qnn.bias_absorption"));
    run_pipeline(&mut ctx, &mut module, "expand-fakeq");
    assert!(!module_to_string(&ctx, &module).contains("qnn.bias_absorption"));
}
