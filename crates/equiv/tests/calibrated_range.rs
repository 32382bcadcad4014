//! `absorb-bias` is proven under the `calibrated-range` relation, which
//! assumes the per-channel minima the pass records on layer1
//! (`qnn.bias_absorption`), and under no stricter one; hand-written broken
//! absorptions (an amount above the recorded minimum, the wrong sign, no or
//! wrongly computed compensation in layer2, a padded layer2, a malformed
//! record) are not proven.

#[allow(dead_code)]
mod common;

use common::{context, parse};
use qopt_equiv::{check, Limits, Outcome};
use qopt_ir_core::equivalence::Relation;
use qopt_ir_core::pass::{Instrumentation, PassManager, PassRegistry};
use qopt_ir_core::{parse_module, split_input};
use std::path::Path;

fn outcome(before: &str, after: &str, relation: Relation) -> Outcome {
    let mut ctx = context();
    let (before, after) = (parse(&mut ctx, before), parse(&mut ctx, after));
    let result = check(&mut ctx, &before, &after, relation, &Limits::default());
    println!("{}", result.summary(4));
    result.outcome
}

fn assert_proven(before: &str, after: &str) {
    assert_eq!(outcome(before, after, Relation::CalibratedRange), Outcome::Proven, "{after}");
}

fn assert_failed(before: &str, after: &str, what: &str) {
    match outcome(before, after, Relation::CalibratedRange) {
        Outcome::Failed(_) => {}
        other => panic!("{what} was not caught: {other:?}"),
    }
}

fn repo(path: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(path).to_str().unwrap().to_string()
}

/// The real pass on every case of its golden file, absorbing all of each
/// minimum and half of it: proven under `calibrated-range`; every case
/// where it moved something is not proven under `real` (the proof needs the
/// records), and the case where it moved nothing is.
#[test]
fn absorb_bias_is_proven_on_its_golden_cases_under_calibrated_range_only() {
    let text = std::fs::read_to_string(repo("tests/passes/absorb-bias.qir")).unwrap();
    let data = repo("tests/passes/data/calib-x4.npy");
    let mut registry = PassRegistry::new();
    qopt_passes::register_generic_passes(&mut registry).unwrap();
    qopt_quant::register_quant_passes(&mut registry).unwrap();
    for fraction in ["1.0", "0.5"] {
        let pipeline = format!("absorb-bias{{data={data} fraction={fraction}}}");
        let manager = PassManager::parse(&registry, &pipeline).unwrap_or_else(|e| panic!("{}", e.message));
        let mut moved = 0;
        for (i, chunk) in split_input(text.as_bytes()).into_iter().enumerate() {
            let mut ctx = context();
            let before = parse_module(&mut ctx, chunk.text, "absorb-bias.qir").unwrap();
            let mut after = before.clone();
            let mut inst = Instrumentation { reproducer_dir: None, ..Instrumentation::default() };
            manager.run(&mut ctx, &mut after, &mut inst).unwrap_or_else(|e| panic!("{pipeline}: {e:?}"));
            let limits = Limits::default();
            let calibrated = check(&mut ctx, &before, &after, Relation::CalibratedRange, &limits);
            println!("case {i}, fraction {fraction}: {}", calibrated.summary(4));
            assert_eq!(calibrated.outcome, Outcome::Proven, "case {i}, fraction {fraction}");
            let real = check(&mut ctx, &before, &after, Relation::Real, &limits);
            // The first three cases hold pairs; the fourth none.
            let biases_moved = i < 3;
            moved += usize::from(biases_moved);
            if biases_moved {
                assert!(matches!(real.outcome, Outcome::Failed(_)), "case {i} proven without the records");
            } else {
                assert_eq!(real.outcome, Outcome::Proven, "case {i}: nothing moved");
            }
        }
        assert_eq!(moved, 3);
    }
}

/// dense → relu → dense. fc1's outputs are at least [-1.5, 1.5] on the
/// calibration data (as recorded), so a = [0, 1.5]: b1 = [0.5, 2] becomes
/// [0.5, 0.5] and b2 = [0.25, -0.5] gains W2 · a = [3 · 1.5, 4 · 1.5].
fn dense_pair(b1: &str, record: &str, b2: &str) -> String {
    format!(
        r#"
func.func @main(%x: tensor<1x3xf32>) -> tensor<1x2xf32> {{
  %w1 = fp.constant() {{value = dense<[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]> : tensor<2x3xf32>}} : () -> tensor<2x3xf32>
  %b1 = fp.constant() {{value = dense<{b1}> : tensor<2xf32>}} : () -> tensor<2xf32>
  %w2 = fp.constant() {{value = dense<[[2.0, 3.0], [-1.0, 4.0]]> : tensor<2x2xf32>}} : () -> tensor<2x2xf32>
  %b2 = fp.constant() {{value = dense<{b2}> : tensor<2xf32>}} : () -> tensor<2xf32>
  %h = fp.dense(%x, %w1, %b1) {record} : (tensor<1x3xf32>, tensor<2x3xf32>, tensor<2xf32>) -> tensor<1x2xf32> loc("fc1")
  %r = fp.relu(%h) : (tensor<1x2xf32>) -> tensor<1x2xf32> loc("relu1")
  %y = fp.dense(%r, %w2, %b2) : (tensor<1x2xf32>, tensor<2x2xf32>, tensor<2xf32>) -> tensor<1x2xf32> loc("fc2")
  func.return %y : tensor<1x2xf32>
}}
"#
    )
}

fn record(absorbed: &str, channel_min: &str) -> String {
    format!(
        "{{qnn.bias_absorption = {{absorbed = dense<{absorbed}> : tensor<2xf64>, \
         channel_min = dense<{channel_min}> : tensor<2xf64>, samples = 6}}}}"
    )
}

#[test]
fn a_dense_pair_is_proven_and_each_broken_absorption_is_caught() {
    let before = dense_pair("[0.5, 2.0]", "", "[0.25, -0.5]");
    let recorded = record("[0.0, 1.5]", "[-1.5, 1.5]");
    let right = dense_pair("[0.5, 0.5]", &recorded, "[4.75, 5.5]");
    assert_proven(&before, &right);
    // The proof rests on the record: under `real`, or without the record,
    // the same rewrite is not proven.
    assert!(matches!(outcome(&before, &right, Relation::Real), Outcome::Failed(_)));
    assert!(matches!(outcome(&before, &right, Relation::Requantization), Outcome::Failed(_)));
    assert_failed(&before, &dense_pair("[0.5, 0.5]", "", "[4.75, 5.5]"), "an absorption without a record");
    // A half absorbed, as fraction = 0.5 does: a = [0, 0.75].
    let half = record("[0.0, 0.75]", "[-1.5, 1.5]");
    assert_proven(&before, &dense_pair("[0.5, 1.25]", &half, "[2.5, 2.5]"));

    // a = 2 on channel 1, above its recorded minimum 1.5 (record and biases
    // agree on the amount): relu would cut what layer2 gets back.
    let above = record("[0.0, 2.0]", "[-1.5, 1.5]");
    assert_failed(&before, &dense_pair("[0.5, 0.0]", &above, "[6.25, 7.5]"), "an amount above the minimum");
    // A sign wrong on one side: W2 · a subtracted from layer2's bias, or a
    // added to layer1's (recorded as absorbed, or as −a, which agrees with
    // the biases). Both signs wrong, b1 + a and b2 − W2 · a, would be right
    // on the range (y + a ≥ 0 there too) and is not a case.
    assert_failed(
        &before,
        &dense_pair("[0.5, 0.5]", &recorded, "[-4.25, -6.5]"),
        "a subtracted compensation",
    );
    assert_failed(&before, &dense_pair("[0.5, 3.5]", &recorded, "[4.75, 5.5]"), "a raised bias");
    let negative = record("[0.0, -1.5]", "[-1.5, 1.5]");
    assert_failed(&before, &dense_pair("[0.5, 3.5]", &negative, "[4.75, 5.5]"), "a raised bias, recorded");
    // Layer2 not compensated.
    assert_failed(&before, &dense_pair("[0.5, 0.5]", &recorded, "[0.25, -0.5]"), "a missing compensation");
    // Compensated with W2ᵀ · a (summed over the output axis): [-1.5, 6].
    assert_failed(&before, &dense_pair("[0.5, 0.5]", &recorded, "[-1.25, 5.5]"), "the wrong axis");
    // A record the checker cannot read (a minimum too few) assumes nothing.
    let malformed = "{qnn.bias_absorption = {absorbed = dense<[0.0, 1.5]> : tensor<2xf64>, \
                     channel_min = dense<[1.5]> : tensor<1xf64>, samples = 6}}";
    assert_failed(&before, &dense_pair("[0.5, 0.5]", malformed, "[4.75, 5.5]"), "a malformed record");
}

/// conv2d (1×1: x and −x, plus b1 = [6, 6]) → relu → `layer2`, on a 1×1×3×3
/// input; conv1's outputs are recorded at least [1, 3].
fn conv_pair(b1: &str, record: &str, layer2: &str) -> String {
    format!(
        r#"
func.func @main(%x: tensor<1x1x3x3xf32>) -> tensor<1x2x2x2xf32> {{
  %w1 = fp.constant() {{value = dense<[[[[1.0]]], [[[-1.0]]]]> : tensor<2x1x1x1xf32>}} : () -> tensor<2x1x1x1xf32>
  %b1 = fp.constant() {{value = dense<{b1}> : tensor<2xf32>}} : () -> tensor<2xf32>
  %h = fp.conv2d(%x, %w1, %b1) {record} : (tensor<1x1x3x3xf32>, tensor<2x1x1x1xf32>, tensor<2xf32>) -> tensor<1x2x3x3xf32> loc("conv1")
  %r = fp.relu(%h) : (tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32> loc("relu1")
{layer2}
  func.return %y : tensor<1x2x2x2xf32>
}}
"#
    )
}

/// Layer2 a 2×2 conv with one group, two outputs; input channel 0's taps sum
/// to 10 and 2 for the outputs, channel 1's to 2 and -4.
fn full_conv(b2: &str, pad: bool) -> String {
    let (attrs, out) = if pad { (" {pad = [1, 1, 1, 1]}", "4x4") } else { ("", "2x2") };
    let result = if pad {
        "  %p = fp.conv2d(%r, %w2, %b2){attrs} : (tensor<1x2x3x3xf32>, tensor<2x2x2x2xf32>, tensor<2xf32>) -> tensor<1x2x4x4xf32> loc(\"conv2\")\n  %y = fp.max_pool2d(%p) {kernel = [3, 3]} : (tensor<1x2x4x4xf32>) -> tensor<1x2x2x2xf32>"
    } else {
        "  %y = fp.conv2d(%r, %w2, %b2){attrs} : (tensor<1x2x3x3xf32>, tensor<2x2x2x2xf32>, tensor<2xf32>) -> tensor<1x2x{out}xf32> loc(\"conv2\")"
    };
    let result = result.replace("{attrs}", attrs).replace("{out}", out);
    format!(
        "  %w2 = fp.constant() {{value = dense<[[[[1.0, 2.0], [3.0, 4.0]], [[0.5, 0.5], [1.0, 0.0]]], \
         [[[0.5, 0.5], [0.5, 0.5]], [[-1.0, -1.0], [-1.0, -1.0]]]]> : tensor<2x2x2x2xf32>}} : () -> tensor<2x2x2x2xf32>\n  \
         %b2 = fp.constant() {{value = dense<{b2}> : tensor<2xf32>}} : () -> tensor<2xf32>\n{result}"
    )
}

/// Layer2 depthwise (groups = 2): channel 0's taps sum to 4, channel 1's to 1.
fn depthwise(b2: &str) -> String {
    format!(
        "  %w2 = fp.constant() {{value = dense<[[[[1.0, 1.0], [1.0, 1.0]]], [[[2.0, 0.0], [0.0, -1.0]]]]> : \
         tensor<2x1x2x2xf32>}} : () -> tensor<2x1x2x2xf32>\n  \
         %b2 = fp.constant() {{value = dense<{b2}> : tensor<2xf32>}} : () -> tensor<2xf32>\n  \
         %y = fp.conv2d(%r, %w2, %b2) {{groups = 2}} : (tensor<1x2x3x3xf32>, tensor<2x1x2x2xf32>, tensor<2xf32>) \
         -> tensor<1x2x2x2xf32> loc(\"conv2\")"
    )
}

#[test]
fn a_conv_pair_is_proven_and_a_wrong_axis_or_a_padded_layer2_is_not() {
    let recorded = record("[1.0, 3.0]", "[1.0, 3.0]");
    // a = [1, 3]: b2 = [0.25, 0] gains [10 · 1 + 2 · 3, 2 · 1 − 4 · 3].
    let before = conv_pair("[6.0, 6.0]", "", &full_conv("[0.25, 0.0]", false));
    assert_proven(&before, &conv_pair("[5.0, 3.0]", &recorded, &full_conv("[16.25, -10.0]", false)));
    assert!(matches!(
        outcome(
            &before,
            &conv_pair("[5.0, 3.0]", &recorded, &full_conv("[16.25, -10.0]", false)),
            Relation::Real
        ),
        Outcome::Failed(_)
    ));
    // Compensated with the weight's output axis as if depthwise, a[o] · Σ W2[o]:
    // [1 · 12, 3 · (−2)].
    assert_failed(
        &before,
        &conv_pair("[5.0, 3.0]", &recorded, &full_conv("[12.25, -6.0]", false)),
        "a conv compensated along the wrong axis",
    );
    // A padded layer2 reads 0 at its border, not a: the same compensation
    // is not proven.
    let padded = conv_pair("[6.0, 6.0]", "", &full_conv("[0.25, 0.0]", true));
    assert_failed(
        &padded,
        &conv_pair("[5.0, 3.0]", &recorded, &full_conv("[16.25, -10.0]", true)),
        "a padded layer2",
    );
}

#[test]
fn a_depthwise_layer2_is_proven_and_compensated_as_a_full_conv_is_not() {
    let recorded = record("[1.0, 3.0]", "[1.0, 3.0]");
    let before = conv_pair("[6.0, 6.0]", "", &depthwise("[0.0, 0.0]"));
    // b2[c] += a[c] · Σ_k W2[c, 0, k] = [1 · 4, 3 · 1].
    assert_proven(&before, &conv_pair("[5.0, 3.0]", &recorded, &depthwise("[4.0, 3.0]")));
    // Input channels read on weight axis 1 (one group), which has a single
    // index: a[0] for both outputs, [1 · 4, 1 · 1].
    assert_failed(
        &before,
        &conv_pair("[5.0, 3.0]", &recorded, &depthwise("[4.0, 1.0]")),
        "a depthwise layer2 compensated as a full conv",
    );
}

/// conv → relu → depthwise → relu → conv with both first layers recorded,
/// as `absorb-bias` leaves it (the third golden case, written out): the
/// depthwise conv is layer2 of one pair and layer1 of the next.
#[test]
fn a_chain_through_a_depthwise_conv_is_proven() {
    let chain = |b1: &str, r1: &str, bd: &str, r2: &str, b3: &str| {
        let (b3_def, conv3) = if b3.is_empty() {
            (String::new(), "fp.conv2d(%r2, %w3) : (tensor<1x2x2x2xf32>, tensor<1x2x1x1xf32>)".to_string())
        } else {
            (
                format!(
                    "  %b3 = fp.constant() {{value = dense<{b3}> : tensor<1xf32>}} : () -> tensor<1xf32>\n"
                ),
                "fp.conv2d(%r2, %w3, %b3) : (tensor<1x2x2x2xf32>, tensor<1x2x1x1xf32>, tensor<1xf32>)"
                    .to_string(),
            )
        };
        format!(
            r#"
func.func @main(%x: tensor<1x1x3x3xf32>) -> tensor<1x1x2x2xf32> {{
  %w1 = fp.constant() {{value = dense<[[[[1.0]]], [[[1.0]]]]> : tensor<2x1x1x1xf32>}} : () -> tensor<2x1x1x1xf32>
  %b1 = fp.constant() {{value = dense<{b1}> : tensor<2xf32>}} : () -> tensor<2xf32>
  %wd = fp.constant() {{value = dense<[[[[1.0, 1.0], [1.0, 1.0]]], [[[2.0, 0.0], [0.0, 0.0]]]]> : tensor<2x1x2x2xf32>}} : () -> tensor<2x1x2x2xf32>
  %bd = fp.constant() {{value = dense<{bd}> : tensor<2xf32>}} : () -> tensor<2xf32>
  %w3 = fp.constant() {{value = dense<[[[[1.0]], [[-2.0]]]]> : tensor<1x2x1x1xf32>}} : () -> tensor<1x2x1x1xf32>
{b3_def}  %h1 = fp.conv2d(%x, %w1, %b1) {r1} : (tensor<1x1x3x3xf32>, tensor<2x1x1x1xf32>, tensor<2xf32>) -> tensor<1x2x3x3xf32>
  %r1 = fp.relu(%h1) : (tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
  %h2 = fp.conv2d(%r1, %wd, %bd) {r2} : (tensor<1x2x3x3xf32>, tensor<2x1x2x2xf32>, tensor<2xf32>) -> tensor<1x2x2x2xf32>
  %r2 = fp.relu(%h2) : (tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32>
  %y = {conv3} -> tensor<1x1x2x2xf32>
  func.return %y : tensor<1x1x2x2xf32>
}}
"#
        )
    };
    let with = |groups: bool, absorbed: &str, min: &str| {
        let groups = if groups { "groups = 2, " } else { "" };
        format!(
            "{{{groups}qnn.bias_absorption = {{absorbed = dense<{absorbed}> : tensor<2xf64>, \
             channel_min = dense<{min}> : tensor<2xf64>, samples = 10}}}}"
        )
    };
    // Minima [0.5, -1] and [3, 0.25]: a1 = [0.5, 0], bd = [0, 0] + [0.5 · 4, 0]
    // − a2 = [2, 0] − [3, 0.25], b3 = 3 · 1 + 0.25 · (−2).
    let before = chain("[1.0, 1.0]", "", "[0.0, 0.0]", "{groups = 2}", "");
    let r1 = with(false, "[0.5, 0.0]", "[0.5, -1.0]");
    let r2 = with(true, "[3.0, 0.25]", "[3.0, 0.25]");
    assert_proven(&before, &chain("[0.5, 1.0]", &r1, "[-1.0, -0.25]", &r2, "[2.5]"));
    // The second pair's compensation forgotten.
    assert_failed(
        &before,
        &chain("[0.5, 1.0]", &r1, "[-1.0, -0.25]", &r2, ""),
        "a chain missing its last bias",
    );
}
