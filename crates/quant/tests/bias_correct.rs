//! `bias-correct` against its definition, on small models and random data:
//!
//! - a dense layer's corrected bias equals b − mean(W_q·x_q − W·x), computed
//!   here from the fake-quant formula, independently of the pass;
//! - after correcting a conv → relu → depthwise conv chain, the mean error of
//!   every output channel of both layers over the calibration data is ~0
//!   (a wrong sign, axis or order of correction leaves it far from 0);
//! - `insert-fakeq`'s fast correction followed by `bias-correct` ends with the
//!   biases of `bias-correct` alone (the float model adds back what the fast
//!   correction subtracted), and correcting again changes nothing.

// Each test binary uses part of the shared helpers (this one not `repo`).
mod common;

use common::{constant_operand, context, ops_named, parse, run_pipeline, write_data};
use qopt_interp::{run_function, KernelRegistry, Tensor};
use qopt_ir_core::SplitMix64;
use qopt_ir_core::{module_to_string, Context, Module};

/// `qnn.fake_quant` of one value to i8 with `scale` and `zero_point`.
fn fake_quant(v: f64, scale: f64, zero_point: f64) -> f64 {
    let q = ((v as f32 / scale as f32) as f64).round_ties_even() + zero_point;
    (q.clamp(-128.0, 127.0) - zero_point) * scale
}

#[test]
fn dense_bias_is_b_minus_the_mean_output_error() {
    let w = [[0.31, -0.57, 0.12], [0.88, 0.049, -0.23]];
    let b = [0.2, -0.1];
    let text = "func.func @main(%x: tensor<1x3xf32>) -> tensor<1x2xf32> {
  %xq = qnn.fake_quant(%x) {type = !qnn.uniform<i8:f32, 0.05:-10>} : (tensor<1x3xf32>) -> tensor<1x3xf32>
  %w = fp.constant() {value = dense<[[0.31, -0.57, 0.12], [0.88, 0.049, -0.23]]> : tensor<2x3xf32>} : () -> tensor<2x3xf32>
  %wq = qnn.fake_quant(%w) {type = !qnn.uniform<i8:f32, 0.1:0>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %b = fp.constant() {value = dense<[0.2, -0.1]> : tensor<2xf32>} : () -> tensor<2xf32>
  %d = fp.dense(%xq, %wq, %b) : (tensor<1x3xf32>, tensor<2x3xf32>, tensor<2xf32>) -> tensor<1x2xf32>
  func.return %d : tensor<1x2xf32>
}";
    let samples = 40;
    let mut rng = SplitMix64::new(7);
    let data = rng.vec_f32(samples * 3, -1.0, 2.0);
    let (_data, path) = write_data("dense", &[samples, 1, 3], data.clone());

    // The definition: e_j = mean over samples of Σ_i (Wq[j][i]·xq_i − W[j][i]·x_i).
    let mut error = [0.0f64; 2];
    for x in data.chunks(3) {
        for (j, row) in w.iter().enumerate() {
            for (i, &wji) in row.iter().enumerate() {
                let wji = f64::from(wji as f32);
                let xi = f64::from(x[i]);
                error[j] += fake_quant(wji, 0.1, 0.0) * fake_quant(xi, 0.05, -10.0) - wji * xi;
            }
        }
    }
    let expected: Vec<f64> = (0..2).map(|j| f64::from(b[j] as f32) - error[j] / samples as f64).collect();
    assert!(error.iter().all(|e| e.abs() / samples as f64 > 1e-3), "the example has no error to correct");

    let mut ctx = context();
    let mut module = parse(&mut ctx, text);
    run_pipeline(&mut ctx, &mut module, &format!("bias-correct{{data=\"{}\"}}", path.display()));
    let dense = ops_named(&ctx, &module, "fp.dense")[0];
    let corrected = constant_operand(&ctx, &module, dense, 2);
    for (got, want) in corrected.iter().zip(&expected) {
        assert!((got - want).abs() < 1e-6, "bias {corrected:?}, expected {expected:?}");
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

/// A conv (3×3, padding 1, 2 → 3 channels, no bias) → relu → a depthwise conv
/// with a bias, returning both convs' results; the fake-quant model when
/// `quantized`, else the float one.
fn chain(w1: &[f32], w2: &[f32], b2: &[f32], quantized: bool) -> String {
    let (x, w1q, r1q, w2q) = if quantized { ("xq", "w1q", "r1q", "w2q") } else { ("x", "w1", "r1", "w2") };
    let mut text = String::from(
        "func.func @main(%x: tensor<1x2x4x4xf32>) -> (tensor<1x3x4x4xf32>, tensor<1x3x2x2xf32>) {\n",
    );
    if quantized {
        text += "  %xq = qnn.fake_quant(%x) {type = !qnn.uniform<i8:f32, 0.03:-20>} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>\n";
    }
    text += &format!(
        "  %w1 = fp.constant() {{value = dense<{}> : tensor<3x2x3x3xf32>}} : () -> tensor<3x2x3x3xf32>\n",
        nested(w1, &[3, 2, 3, 3])
    );
    if quantized {
        text += "  %w1q = qnn.fake_quant(%w1) {type = !qnn.uniform<i8:f32, 0.25:0>} : (tensor<3x2x3x3xf32>) -> tensor<3x2x3x3xf32>\n";
    }
    text += &format!(
        "  %c1 = fp.conv2d(%{x}, %{w1q}) {{pad = [1, 1, 1, 1]}} : (tensor<1x2x4x4xf32>, tensor<3x2x3x3xf32>) -> tensor<1x3x4x4xf32>\n"
    );
    text += "  %r1 = fp.relu(%c1) : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>\n";
    if quantized {
        text += "  %r1q = qnn.fake_quant(%r1) {type = !qnn.uniform<i8:f32, 0.05:-128>} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>\n";
    }
    text += &format!(
        "  %w2 = fp.constant() {{value = dense<{}> : tensor<3x1x2x2xf32>}} : () -> tensor<3x1x2x2xf32>\n",
        nested(w2, &[3, 1, 2, 2])
    );
    if quantized {
        text += "  %w2q = qnn.fake_quant(%w2) {type = !qnn.uniform<i8:f32, 0.25:0>} : (tensor<3x1x2x2xf32>) -> tensor<3x1x2x2xf32>\n";
    }
    text += &format!(
        "  %b2 = fp.constant() {{value = dense<{}> : tensor<3xf32>}} : () -> tensor<3xf32>\n",
        nested(b2, &[3])
    );
    text += &format!(
        "  %c2 = fp.conv2d(%{r1q}, %{w2q}, %b2) {{groups = 3, stride = [2, 2]}} : (tensor<1x3x4x4xf32>, tensor<3x1x2x2xf32>, tensor<3xf32>) -> tensor<1x3x2x2xf32>\n"
    );
    text += "  func.return %c1, %c2 : tensor<1x3x4x4xf32>, tensor<1x3x2x2xf32>\n}\n";
    text
}

/// Per channel (axis 1) of each result, the mean over samples of quantized − float.
fn mean_errors(
    ctx: &Context,
    quant: &Module,
    float: &Module,
    data: &[f32],
    sample: &[usize],
) -> Vec<Vec<f64>> {
    let kernels = KernelRegistry::standard();
    let len: usize = sample.iter().product();
    let mut sums: Vec<Vec<f64>> = Vec::new();
    let mut counts: Vec<f64> = Vec::new();
    for x in data.chunks(len) {
        let input = [Tensor::from_f32(sample, x.to_vec()).unwrap()];
        let q = run_function(ctx, quant, "main", &input, &kernels).unwrap();
        let f = run_function(ctx, float, "main", &input, &kernels).unwrap();
        sums.resize(q.len(), Vec::new());
        counts.resize(q.len(), 0.0);
        for (r, (q, f)) in q.iter().zip(&f).enumerate() {
            let channels = q.shape()[1];
            let inner: usize = q.shape()[2..].iter().product();
            sums[r].resize(channels, 0.0);
            for (k, (qv, fv)) in q.to_f64_vec().iter().zip(f.to_f64_vec()).enumerate() {
                sums[r][(k / inner) % channels] += qv - fv;
            }
            counts[r] += inner as f64;
        }
    }
    sums.into_iter().zip(counts).map(|(s, n)| s.into_iter().map(|v| v / n).collect()).collect()
}

#[test]
fn corrected_chain_has_no_mean_error_per_channel() {
    let mut rng = SplitMix64::new(11);
    let w1 = rng.vec_f32(3 * 2 * 9, -1.0, 1.0);
    let w2 = rng.vec_f32(3 * 4, -1.0, 1.0);
    let b2 = vec![0.5, -0.25, 0.1];
    let samples = 24;
    let sample = [1, 2, 4, 4];
    let data = rng.vec_f32(samples * 32, -0.5, 2.0);
    let (_data, path) = write_data("chain", &[samples, 1, 2, 4, 4], data.clone());

    let mut ctx = context();
    let float = parse(&mut ctx, &chain(&w1, &w2, &b2, false));
    let mut quant = parse(&mut ctx, &chain(&w1, &w2, &b2, true));
    let before = mean_errors(&ctx, &quant, &float, &data, &sample);
    let largest = before.iter().flatten().fold(0.0f64, |m, e| m.max(e.abs()));
    assert!(largest > 1e-2, "the quantized chain has no mean error to correct: {before:?}");

    run_pipeline(&mut ctx, &mut quant, &format!("bias-correct{{data=\"{}\"}}", path.display()));
    let convs = ops_named(&ctx, &quant, "fp.conv2d");
    assert_eq!(quant.num_operands(convs[0]), 3, "the first conv got no bias");
    let after = mean_errors(&ctx, &quant, &float, &data, &sample);
    for (layer, errors) in after.iter().enumerate() {
        for (c, e) in errors.iter().enumerate() {
            assert!(e.abs() < 1e-5, "layer {layer} channel {c}: mean error {e} after correction ({after:?})");
        }
    }
}

#[test]
fn fast_then_empirical_equals_empirical_and_a_rerun_changes_nothing() {
    let mut rng = SplitMix64::new(5);
    let w1 = rng.vec_f32(3 * 2 * 9, -1.0, 1.0);
    let w2 = rng.vec_f32(3 * 4, -1.0, 1.0);
    let b2 = vec![0.5, -0.25, 0.1];
    let samples = 16;
    let data = rng.vec_f32(samples * 32, -0.5, 2.0);
    let (_data, path) = write_data("fast", &[samples, 1, 2, 4, 4], data);
    let data = format!("data=\"{}\"", path.display());
    let float = chain(&w1, &w2, &b2, false);
    let front = format!("insert-observers,calibrate{{{data}}}");
    let pipelines = [
        format!("{front},insert-fakeq{{weight-type=i4 bias-correction=false}},bias-correct{{{data}}}"),
        format!("{front},insert-fakeq{{weight-type=i4}},bias-correct{{{data}}}"),
    ];
    let mut biases = Vec::new();
    for pipeline in &pipelines {
        let mut ctx = context();
        let mut module = parse(&mut ctx, &float);
        run_pipeline(&mut ctx, &mut module, pipeline);
        let convs = ops_named(&ctx, &module, "fp.conv2d");
        let b: Vec<Vec<f64>> = convs.iter().map(|&op| constant_operand(&ctx, &module, op, 2)).collect();
        biases.push(b);
        if biases.len() == 2 {
            let once = module_to_string(&ctx, &module);
            run_pipeline(&mut ctx, &mut module, &format!("bias-correct{{{data}}}"));
            assert_eq!(once, module_to_string(&ctx, &module), "a second bias-correct changed the IR");
        }
    }
    for (without, with) in biases[0].iter().flatten().zip(biases[1].iter().flatten()) {
        assert!(
            (without - with).abs() < 1e-5,
            "fast + empirical {:?} vs empirical {:?}",
            biases[1],
            biases[0]
        );
    }
}

#[test]
fn a_conv_with_a_folded_batch_norm_has_no_mean_error_after_correction() {
    // conv (no bias) → batch norm: fold-bn gives the conv the batch norm's
    // shift as its bias, which bias-correct then corrects; the float model
    // is the original, with the batch norm.
    let mut rng = SplitMix64::new(23);
    let w = rng.vec_f32(3 * 2 * 9, -1.0, 1.0);
    let text = format!(
        "func.func @main(%x: tensor<1x2x4x4xf32>) -> tensor<1x3x4x4xf32> {{
  %w = fp.constant() {{value = dense<{}> : tensor<3x2x3x3xf32>}} : () -> tensor<3x2x3x3xf32>
  %c = fp.conv2d(%x, %w) {{pad = [1, 1, 1, 1]}} : (tensor<1x2x4x4xf32>, tensor<3x2x3x3xf32>) -> tensor<1x3x4x4xf32>
  %scale = fp.constant() {{value = dense<[1.5, 0.5, -2.0]> : tensor<3xf32>}} : () -> tensor<3xf32>
  %shift = fp.constant() {{value = dense<[0.25, -1.0, 0.5]> : tensor<3xf32>}} : () -> tensor<3xf32>
  %mean = fp.constant() {{value = dense<[0.1, -0.2, 0.3]> : tensor<3xf32>}} : () -> tensor<3xf32>
  %var = fp.constant() {{value = dense<[1.0, 2.0, 0.5]> : tensor<3xf32>}} : () -> tensor<3xf32>
  %z = fp.batch_norm(%c, %scale, %shift, %mean, %var) {{epsilon = 0.001 : f32}} : (tensor<1x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<1x3x4x4xf32>
  func.return %z : tensor<1x3x4x4xf32>
}}",
        nested(&w, &[3, 2, 3, 3])
    );
    let samples = 16;
    let sample = [1, 2, 4, 4];
    let data = rng.vec_f32(samples * 32, -0.5, 2.0);
    let (_data, path) = write_data("bn", &[samples, 1, 2, 4, 4], data.clone());
    let data_option = format!("data=\"{}\"", path.display());

    let mut ctx = context();
    let float = parse(&mut ctx, &text);
    let mut quant = parse(&mut ctx, &text);
    let front = format!("fold-bn,insert-observers,calibrate{{{data_option}}},insert-fakeq{{weight-type=i4 bias-correction=false}}");
    run_pipeline(&mut ctx, &mut quant, &front);
    let before = mean_errors(&ctx, &quant, &float, &data, &sample);
    assert!(before[0].iter().any(|e| e.abs() > 1e-2), "nothing to correct: {before:?}");
    run_pipeline(&mut ctx, &mut quant, &format!("bias-correct{{{data_option}}}"));
    let after = mean_errors(&ctx, &quant, &float, &data, &sample);
    // The output is the conv's result behind its output fake_quant: what
    // remains is that rounding's mean, far below the weights' error.
    let largest_before = before[0].iter().fold(0.0f64, |m, e| m.max(e.abs()));
    for (c, e) in after[0].iter().enumerate() {
        assert!(e.abs() < 0.1 * largest_before, "channel {c}: mean error {e} after, {before:?} before");
    }
}

/// The sweeps merge each batch in batch order and carry activations between
/// layers through a scratch file: 1, 2 and 5 worker threads write the same
/// module, byte for byte.
#[test]
fn the_thread_count_does_not_change_the_corrected_module() {
    let mut rng = SplitMix64::new(23);
    let w1 = rng.vec_f32(3 * 2 * 9, -1.0, 1.0);
    let w2 = rng.vec_f32(3 * 4, -1.0, 1.0);
    let b2 = vec![0.5, -0.25, 0.1];
    let samples = 37;
    let (_dir, path) = write_data("threads", &[samples, 1, 2, 4, 4], rng.vec_f32(samples * 32, -0.5, 2.0));
    let mut texts = Vec::new();
    for threads in [1, 2, 5] {
        let mut ctx = context();
        let mut quant = parse(&mut ctx, &chain(&w1, &w2, &b2, true));
        run_pipeline(
            &mut ctx,
            &mut quant,
            &format!("bias-correct{{data=\"{}\" threads={threads}}}", path.display()),
        );
        texts.push(module_to_string(&ctx, &quant));
    }
    assert!(texts[0].contains("qnn.bias_correction"), "nothing was corrected:\n{}", texts[0]);
    assert_eq!(texts[0], texts[1], "1 and 2 threads differ");
    assert_eq!(texts[0], texts[2], "1 and 5 threads differ");
}
