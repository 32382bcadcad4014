//! The checker proves the standard passes on their golden inputs and on a
//! model's layers, and catches deliberately broken passes (registered only
//! here) at the op where they went wrong.

#[allow(dead_code)]
mod common;

use common::{context, run, try_run};
use qopt_equiv::{check, Limits, Outcome};
use qopt_ir_core::equivalence::Relation;
use qopt_ir_core::{loc_to_string, parse_module, split_input, verify, Context, Module};
use std::path::Path;

fn golden(name: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/passes").join(name))
        .unwrap()
}

/// Runs `pass` on every case of `tests/passes/<file>` and checks it under
/// `relation`; returns the outcomes in case order.
fn check_cases(file: &str, pass: &str, relation: Relation) -> Vec<Outcome> {
    let text = golden(file);
    let mut outcomes = Vec::new();
    for chunk in split_input(text.as_bytes()) {
        let mut ctx = context();
        let Ok(before) = parse_module(&mut ctx, chunk.text, file) else { continue };
        if verify(&mut ctx, &before).is_err() {
            continue;
        }
        let mut after = before.clone();
        if !try_run(&mut ctx, &mut after, pass) {
            continue;
        }
        outcomes.push(check(&mut ctx, &before, &after, relation, &Limits::default()).outcome);
    }
    outcomes
}

#[test]
fn the_standard_passes_are_proven_on_their_golden_cases() {
    let mut failures = Vec::new();
    for (file, pass, relation) in [
        ("fold-bn.qir", "fold-bn", Relation::Real),
        ("fold-bn-scale-axis.qir", "fold-bn", Relation::Real),
        ("simplify-inference.qir", "simplify-inference", Relation::Real),
        ("fold-constant.qir", "fold-constant", Relation::Real),
        ("canonicalize.qir", "canonicalize", Relation::Exact),
        ("cse.qir", "cse", Relation::Exact),
        ("dce.qir", "dce", Relation::Exact),
        ("expand-fakeq.qir", "expand-fakeq", Relation::Exact),
        ("quantize-constants.qir", "quantize-constants", Relation::Requantization),
        ("fuse.qir", "fuse", Relation::Requantization),
        ("recognize-hard-swish.qir", "recognize-hard-swish", Relation::Real),
        ("recognize-dense.qir", "recognize-dense", Relation::Real),
        ("div-to-mul.qir", "div-to-mul", Relation::Real),
        ("conv1d-to-conv2d.qir", "conv1d-to-conv2d", Relation::Exact),
        ("equalize.qir", "equalize", Relation::Real),
    ] {
        let outcomes = check_cases(file, pass, relation);
        assert!(!outcomes.is_empty(), "{file}: no case");
        for (i, outcome) in outcomes.iter().enumerate() {
            match outcome {
                Outcome::Proven => {}
                // Ops with regions (the test dialect's) are not modelled: never "proven".
                Outcome::Unknown(why) if why.contains("has regions") => {}
                other => failures.push(format!("{file} case {i}: {pass} is not proven: {other:?}")),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The name in `loc("name")` of an op, if any.
fn loc_name(ctx: &Context, module: &Module, op: Option<qopt_ir_core::OpId>) -> String {
    op.map(|op| loc_to_string(ctx, module.op_loc(op))).unwrap_or_default()
}

/// A convolution, a batch norm and a relu.
const CONV_BN: &str = include_str!("../../../tests/fixtures/conv_bn_relu.qir");

#[test]
fn fold_bn_with_a_wrong_epsilon_is_caught_at_the_folded_conv() {
    let mut ctx = context();
    let before = parse_module(&mut ctx, CONV_BN.as_bytes(), "conv_bn.qir").unwrap();
    // The real pass, on a module whose epsilon was changed first: what a
    // fold-bn that read the wrong epsilon produces.
    let wrong = CONV_BN.replace("epsilon = 1.0e-3", "epsilon = 1.0e-2");
    let mut after = parse_module(&mut ctx, wrong.as_bytes(), "conv_bn.qir").unwrap();
    run(&mut ctx, &mut after, "fold-bn");
    let right = {
        let mut m = before.clone();
        run(&mut ctx, &mut m, "fold-bn");
        m
    };
    assert_eq!(check(&mut ctx, &before, &right, Relation::Real, &Limits::default()).outcome, Outcome::Proven);
    let result = check(&mut ctx, &before, &after, Relation::Real, &Limits::default());
    println!("{}", result.summary(4));
    let Outcome::Failed(f) = result.outcome else { panic!("a wrong epsilon was not caught") };
    println!(
        "first difference: before {}, after {}; rules that fired: {:?}",
        loc_name(&ctx, &before, f.before_op),
        loc_name(&ctx, &after, f.after_op),
        f.rules_fired
    );
    assert_eq!(f.function, "main");
    assert!(loc_name(&ctx, &after, f.after_op).contains("conv1"), "{}", loc_name(&ctx, &after, f.after_op));
    assert!(!f.rules_fired.is_empty());
}

#[test]
fn swapped_sub_operands_are_caught_at_the_sub() {
    let text = r#"
func.func @main(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  %d = fp.sub(%x, %y) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> loc("sub1")
  %r = fp.relu(%d) : (tensor<4xf32>) -> tensor<4xf32> loc("relu1")
  func.return %r : tensor<4xf32>
}
"#;
    let mut ctx = context();
    let before = parse_module(&mut ctx, text.as_bytes(), "sub.qir").unwrap();
    let swapped = text.replace("fp.sub(%x, %y)", "fp.sub(%y, %x)");
    let after = parse_module(&mut ctx, swapped.as_bytes(), "sub.qir").unwrap();
    let Outcome::Failed(f) = check(&mut ctx, &before, &after, Relation::Exact, &Limits::default()).outcome
    else {
        panic!("swapped operands were not caught")
    };
    assert!(loc_name(&ctx, &after, f.after_op).contains("sub1"));
    // Addition commutes, so the same swap of an fp.add is proven.
    let (add, add_swapped) = (text.replace("fp.sub", "fp.add"), swapped.replace("fp.sub", "fp.add"));
    let before = parse_module(&mut ctx, add.as_bytes(), "add.qir").unwrap();
    let after = parse_module(&mut ctx, add_swapped.as_bytes(), "add.qir").unwrap();
    assert_eq!(
        check(&mut ctx, &before, &after, Relation::Exact, &Limits::default()).outcome,
        Outcome::Proven
    );
}

#[test]
fn merging_convolutions_with_different_strides_is_caught() {
    let text = r#"
func.func @main(%x: tensor<1x1x4x4xf32>) -> (tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>) {
  %w = fp.constant() {value = dense<1.0> : tensor<1x1x3x3xf32>} : () -> tensor<1x1x3x3xf32>
  %a = fp.conv2d(%x, %w) {stride = [2, 2], pad = [1, 1, 1, 1]} : (tensor<1x1x4x4xf32>, tensor<1x1x3x3xf32>) -> tensor<1x1x2x2xf32> loc("conv_a")
  %b = fp.conv2d(%x, %w) {stride = [1, 1]} : (tensor<1x1x4x4xf32>, tensor<1x1x3x3xf32>) -> tensor<1x1x2x2xf32> loc("conv_b")
  func.return %a, %b : tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>
}
"#;
    let mut ctx = context();
    let before = parse_module(&mut ctx, text.as_bytes(), "conv.qir").unwrap();
    verify(&mut ctx, &before).unwrap();
    // A CSE that ignores attributes: the second result reuses the first conv.
    let merged = text.replace("func.return %a, %b", "func.return %a, %a");
    let after = parse_module(&mut ctx, merged.as_bytes(), "conv.qir").unwrap();
    let Outcome::Failed(f) = check(&mut ctx, &before, &after, Relation::Exact, &Limits::default()).outcome
    else {
        panic!("the merge was not caught")
    };
    assert_eq!(f.result, 1);
    assert!(loc_name(&ctx, &before, f.before_op).contains("conv_b"));
    assert!(loc_name(&ctx, &after, f.after_op).contains("conv_a"));
}

#[test]
fn a_limit_gives_unknown_never_proven() {
    let mut ctx = context();
    let before = parse_module(&mut ctx, CONV_BN.as_bytes(), "conv_bn.qir").unwrap();
    let mut after = before.clone();
    run(&mut ctx, &mut after, "fold-bn");
    let tight = Limits { iterations: 1, ..Limits::default() };
    match check(&mut ctx, &before, &after, Relation::Real, &tight).outcome {
        Outcome::Unknown(why) => assert!(why.contains("iteration limit"), "{why}"),
        other => panic!("expected unknown, got {other:?}"),
    }
    // Without the real-arithmetic rules fold-bn cannot be proven exact.
    assert!(matches!(
        check(&mut ctx, &before, &after, Relation::Exact, &Limits::default()).outcome,
        Outcome::Failed(_)
    ));
}

#[test]
fn every_registered_rule_parses() {
    let mut ctx = context();
    let rules = qopt_equiv::registered_rules(&ctx);
    assert!(rules.len() >= 20, "{} rules", rules.len());
    let mut names: Vec<&str> = rules.iter().map(|(_, r)| r.name.as_ref()).collect();
    names.sort_unstable();
    let before = names.len();
    names.dedup();
    assert_eq!(before, names.len(), "rule names are unique");
    qopt_equiv::rules::compile(&mut ctx, &rules, Relation::Requantization).unwrap();
}

#[test]
fn ops_without_results_or_operands_are_effects_in_order() {
    let text = r#"
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  test.first() : () -> ()
  test.second() : () -> ()
  func.return %x : tensor<4xf32>
}
"#;
    let mut ctx = context();
    let before = parse_module(&mut ctx, text.as_bytes(), "effects.qir").unwrap();
    assert_eq!(
        check(&mut ctx, &before, &before.clone(), Relation::Exact, &Limits::default()).outcome,
        Outcome::Proven
    );
    let dropped = text.replace("  test.second() : () -> ()\n", "");
    let after = parse_module(&mut ctx, dropped.as_bytes(), "effects.qir").unwrap();
    assert!(matches!(
        check(&mut ctx, &before, &after, Relation::Exact, &Limits::default()).outcome,
        Outcome::Failed(_)
    ));
    let swapped = text
        .replace("test.first", "test.tmp")
        .replace("test.second", "test.first")
        .replace("test.tmp", "test.second");
    let after = parse_module(&mut ctx, swapped.as_bytes(), "effects.qir").unwrap();
    assert!(matches!(
        check(&mut ctx, &before, &after, Relation::Exact, &Limits::default()).outcome,
        Outcome::Failed(_)
    ));
}

/// A quantized conv → relu and a max pool whose output another type
/// quantizes, as `expand-fakeq` and `quantize-constants` leave them.
const QUANTIZED_CONV_POOL: &str = r#"
func.func @main(%x: tensor<1x1x2x2xf32>) -> tensor<1x2x1x1xf32> {
  %xq = qnn.quantize(%x) : (tensor<1x1x2x2xf32>) -> tensor<1x1x2x2x!qnn.uniform<u8:f32, 0.25:128>> loc("in")
  %xd = qnn.dequantize(%xq) : (tensor<1x1x2x2x!qnn.uniform<u8:f32, 0.25:128>>) -> tensor<1x1x2x2xf32>
  %w = fp.constant() {value = dense<[[[[2]]], [[[-4]]]]> : tensor<2x1x1x1x!qnn.uniform<i8:f32:0, {0.5:0, 0.25:0}>>} : () -> tensor<2x1x1x1x!qnn.uniform<i8:f32:0, {0.5:0, 0.25:0}>>
  %wd = qnn.dequantize(%w) : (tensor<2x1x1x1x!qnn.uniform<i8:f32:0, {0.5:0, 0.25:0}>>) -> tensor<2x1x1x1xf32>
  %b = fp.constant() {value = dense<[1, 8]> : tensor<2x!qnn.uniform<i32:f32:0, {0.125:0, 0.0625:0}>>} : () -> tensor<2x!qnn.uniform<i32:f32:0, {0.125:0, 0.0625:0}>>
  %bd = qnn.dequantize(%b) : (tensor<2x!qnn.uniform<i32:f32:0, {0.125:0, 0.0625:0}>>) -> tensor<2xf32>
  %y = fp.conv2d(%xd, %wd, %bd) : (tensor<1x1x2x2xf32>, tensor<2x1x1x1xf32>, tensor<2xf32>) -> tensor<1x2x2x2xf32> loc("conv")
  %r = fp.relu(%y) : (tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32> loc("relu")
  %rq = qnn.quantize(%r) : (tensor<1x2x2x2xf32>) -> tensor<1x2x2x2x!qnn.uniform<i8:f32, 0.05:-100>> loc("relu")
  %rd = qnn.dequantize(%rq) : (tensor<1x2x2x2x!qnn.uniform<i8:f32, 0.05:-100>>) -> tensor<1x2x2x2xf32>
  %p = fp.max_pool2d(%rd) {kernel = [2, 2], stride = [2, 2]} : (tensor<1x2x2x2xf32>) -> tensor<1x2x1x1xf32> loc("pool")
  %pq = qnn.quantize(%p) : (tensor<1x2x1x1xf32>) -> tensor<1x2x1x1x!qnn.uniform<i8:f32, 0.1:-128>> loc("pool")
  %pd = qnn.dequantize(%pq) : (tensor<1x2x1x1x!qnn.uniform<i8:f32, 0.1:-128>>) -> tensor<1x2x1x1xf32>
  func.return %pd : tensor<1x2x1x1xf32>
}
"#;

/// `fuse` on [`QUANTIZED_CONV_POOL`], printed, after `mutate` (what a broken
/// fuse would have printed), parsed back; with the module before.
fn fused_and_mutated(ctx: &mut Context, mutate: impl Fn(&str) -> String) -> (Module, Module) {
    let before = parse_module(ctx, QUANTIZED_CONV_POOL.as_bytes(), "conv_pool.qir").unwrap();
    verify(ctx, &before).unwrap();
    let mut after = before.clone();
    run(ctx, &mut after, "fuse");
    let mut text = Vec::new();
    qopt_ir_core::print_module(ctx, &after, &mut text).unwrap();
    let text = String::from_utf8(text).unwrap();
    let mutated = mutate(&text);
    assert_ne!(mutated, text, "the mutation changed nothing:\n{text}");
    let after = parse_module(ctx, mutated.as_bytes(), "conv_pool.qir").unwrap();
    verify(ctx, &after).unwrap();
    (before, after)
}

#[test]
fn the_real_fuse_is_proven_under_requantization_only() {
    let mut ctx = context();
    let (before, after) = fused_and_mutated(&mut ctx, |t| format!("{t}\n"));
    let proven = check(&mut ctx, &before, &after, Relation::Requantization, &Limits::default());
    assert_eq!(proven.outcome, Outcome::Proven, "{}", proven.summary(4));
    // The integer ops round differently from the float ones: not exact.
    let exact = check(&mut ctx, &before, &after, Relation::Exact, &Limits::default());
    assert!(matches!(exact.outcome, Outcome::Failed(_)), "{}", exact.summary(4));
}

#[test]
fn a_fuse_that_drops_a_zero_point_is_caught_at_the_conv() {
    let mut ctx = context();
    // The fused conv's output (and everything reading it) typed with zero
    // point 0 instead of the quantize's -100.
    let (before, after) = fused_and_mutated(&mut ctx, |t| t.replace("0.05:-100", "0.05:0"));
    let result = check(&mut ctx, &before, &after, Relation::Requantization, &Limits::default());
    let Outcome::Failed(f) = result.outcome else { panic!("not caught: {}", result.summary(4)) };
    let at = loc_name(&ctx, &after, f.after_op);
    println!("caught at {at}: {:?}", f.rules_fired);
    assert!(at.contains("conv"), "{at}");
    assert!(!f.rules_fired.is_empty());
}

#[test]
fn a_requantize_with_the_wrong_multiplier_is_caught_at_the_pool() {
    let mut ctx = context();
    // The pool's requantize from 0.05 to 0.1 computed with the multiplier
    // for 0.125: its result holds q·0.05/0.125.
    let (before, after) = fused_and_mutated(&mut ctx, |t| {
        assert!(t.contains("qnn.requantize"), "fuse made no requantize:\n{t}");
        t.replace("0.1:-128", "0.125:-128")
    });
    let result = check(&mut ctx, &before, &after, Relation::Requantization, &Limits::default());
    let Outcome::Failed(f) = result.outcome else { panic!("not caught: {}", result.summary(4)) };
    assert!(loc_name(&ctx, &after, f.after_op).contains("pool"), "{}", loc_name(&ctx, &after, f.after_op));
}

#[test]
fn a_default_spelled_out_is_the_same_op_and_a_real_difference_is_caught() {
    // 4x4 input, 3x3 kernel: pad [1, 1, 1, 1] and pad [0, 0, 2, 2] give the
    // same 4x4 result shape, but not the same values.
    let text = r#"
func.func @main(%x: tensor<1x1x4x4xf32>, %w: tensor<1x1x3x3xf32>) -> tensor<1x1x4x4xf32> {
  %y = fp.conv2d(%x, %w) {pad = [1, 1, 1, 1]} : (tensor<1x1x4x4xf32>, tensor<1x1x3x3xf32>) -> tensor<1x1x4x4xf32> loc("conv1")
  func.return %y : tensor<1x1x4x4xf32>
}
"#;
    let mut ctx = context();
    let before = parse_module(&mut ctx, text.as_bytes(), "conv.qir").unwrap();
    verify(&mut ctx, &before).unwrap();
    let spelled = text.replace(
        "{pad = [1, 1, 1, 1]}",
        "{dilation = [1, 1], groups = 1, pad = [1, 1, 1, 1], stride = [1, 1]}",
    );
    let after = parse_module(&mut ctx, spelled.as_bytes(), "conv.qir").unwrap();
    verify(&mut ctx, &after).unwrap();
    let result = check(&mut ctx, &before, &after, Relation::Exact, &Limits::default());
    assert_eq!(result.outcome, Outcome::Proven);
    assert_eq!(result.iterations, 0, "one e-node from the start, no rule needed");
    let shifted = text.replace("{pad = [1, 1, 1, 1]}", "{pad = [0, 0, 2, 2], stride = [1, 1]}");
    let after = parse_module(&mut ctx, shifted.as_bytes(), "conv.qir").unwrap();
    verify(&mut ctx, &after).unwrap();
    let Outcome::Failed(f) = check(&mut ctx, &before, &after, Relation::Exact, &Limits::default()).outcome
    else {
        panic!("a different padding was not caught")
    };
    assert!(loc_name(&ctx, &after, f.after_op).contains("conv1"));
}

#[test]
fn the_default_rounding_spelled_out_is_the_same_qnn_op() {
    let text = r#"
func.func @main(%x: tensor<1x8x4x4x!qnn.uniform<i8:f32, 0.05:-3>>, %w: tensor<8x8x1x1x!qnn.uniform<i8:f32, 0.01:0>>) -> tensor<1x8x4x4x!qnn.uniform<i8:f32, 0.1:-128>> {
  %y = qnn.conv2d_relu(%x, %w) : (tensor<1x8x4x4x!qnn.uniform<i8:f32, 0.05:-3>>, tensor<8x8x1x1x!qnn.uniform<i8:f32, 0.01:0>>) -> tensor<1x8x4x4x!qnn.uniform<i8:f32, 0.1:-128>> loc("conv1")
  func.return %y : tensor<1x8x4x4x!qnn.uniform<i8:f32, 0.1:-128>>
}
"#;
    let mut ctx = context();
    let before = parse_module(&mut ctx, text.as_bytes(), "qconv.qir").unwrap();
    verify(&mut ctx, &before).unwrap();
    let with = |attrs: &str| text.replace("(%x, %w) :", &format!("(%x, %w) {attrs} :"));
    let spelled = with("{pad = [0, 0, 0, 0], rounding = \"half_away_from_zero\"}");
    let after = parse_module(&mut ctx, spelled.as_bytes(), "qconv.qir").unwrap();
    verify(&mut ctx, &after).unwrap();
    assert_eq!(
        check(&mut ctx, &before, &after, Relation::Exact, &Limits::default()).outcome,
        Outcome::Proven
    );
    let other = with("{rounding = \"half_to_even\"}");
    let after = parse_module(&mut ctx, other.as_bytes(), "qconv.qir").unwrap();
    verify(&mut ctx, &after).unwrap();
    assert!(matches!(
        check(&mut ctx, &before, &after, Relation::Exact, &Limits::default()).outcome,
        Outcome::Failed(_)
    ));
}

#[test]
fn a_zero_bias_adds_nothing_to_an_integer_convolution() {
    let text = r#"
func.func @main(%x: tensor<1x8x4x4x!qnn.uniform<i8:f32, 0.05:-3>>, %w: tensor<8x8x1x1x!qnn.uniform<i8:f32, 0.01:0>>) -> tensor<1x8x4x4x!qnn.uniform<i8:f32, 0.1:-128>> {
  %y = qnn.conv2d(%x, %w) : (tensor<1x8x4x4x!qnn.uniform<i8:f32, 0.05:-3>>, tensor<8x8x1x1x!qnn.uniform<i8:f32, 0.01:0>>) -> tensor<1x8x4x4x!qnn.uniform<i8:f32, 0.1:-128>> loc("conv1")
  func.return %y : tensor<1x8x4x4x!qnn.uniform<i8:f32, 0.1:-128>>
}
"#;
    let mut ctx = context();
    let before = parse_module(&mut ctx, text.as_bytes(), "qconv.qir").unwrap();
    verify(&mut ctx, &before).unwrap();
    let with_bias = |value: &str| {
        let constant = format!(
            "%b = fp.constant() {{value = dense<{value}> : tensor<8xi32>}} : () -> tensor<8xi32>\n  %y = qnn.conv2d(%x, %w, %b) : (tensor<1x8x4x4x!qnn.uniform<i8:f32, 0.05:-3>>, tensor<8x8x1x1x!qnn.uniform<i8:f32, 0.01:0>>, tensor<8xi32>)"
        );
        text.replace(
            "%y = qnn.conv2d(%x, %w) : (tensor<1x8x4x4x!qnn.uniform<i8:f32, 0.05:-3>>, tensor<8x8x1x1x!qnn.uniform<i8:f32, 0.01:0>>)",
            &constant,
        )
    };
    let zero = parse_module(&mut ctx, with_bias("0").as_bytes(), "qconv.qir").unwrap();
    verify(&mut ctx, &zero).unwrap();
    assert_eq!(check(&mut ctx, &before, &zero, Relation::Exact, &Limits::default()).outcome, Outcome::Proven);
    let one = parse_module(&mut ctx, with_bias("1").as_bytes(), "qconv.qir").unwrap();
    verify(&mut ctx, &one).unwrap();
    assert!(matches!(
        check(&mut ctx, &before, &one, Relation::Exact, &Limits::default()).outcome,
        Outcome::Failed(_)
    ));
}

/// A transposed convolution whose output a per-channel constant shifts and
/// a batch norm scales (what PP-OCRv4's detector does), then an SE-like
/// branch whose hard sigmoid fold-bn folds into a convolution.
const CONV_TRANSPOSE_BN: &str = r#"
func.func @main(%x: tensor<1x2x2x2xf32>) -> tensor<1x2x4x4xf32> {
  %w = fp.constant() {value = dense<[[[[0.5, -1.0], [0.25, 2.0]], [[1.0, 0.5], [-0.5, 0.75]]], [[[0.125, 1.5], [-2.0, 0.5]], [[0.3, -0.7], [1.1, 0.2]]]]> : tensor<2x2x2x2xf32>} : () -> tensor<2x2x2x2xf32>
  %t = fp.conv_transpose2d(%x, %w) {stride = [2, 2]} : (tensor<1x2x2x2xf32>, tensor<2x2x2x2xf32>) -> tensor<1x2x4x4xf32> loc("deconv")
  %c = fp.constant() {value = dense<[[[[0.3]], [[-0.6]]]]> : tensor<1x2x1x1xf32>} : () -> tensor<1x2x1x1xf32>
  %s = fp.add(%t, %c) : (tensor<1x2x4x4xf32>, tensor<1x2x1x1xf32>) -> tensor<1x2x4x4xf32> loc("shift")
  %g = fp.constant() {value = dense<[1.5, 0.5]> : tensor<2xf32>} : () -> tensor<2xf32>
  %b = fp.constant() {value = dense<[0.1, -0.2]> : tensor<2xf32>} : () -> tensor<2xf32>
  %m = fp.constant() {value = dense<[0.3, 0.4]> : tensor<2xf32>} : () -> tensor<2xf32>
  %v = fp.constant() {value = dense<[0.8, 1.2]> : tensor<2xf32>} : () -> tensor<2xf32>
  %n = fp.batch_norm(%s, %g, %b, %m, %v) : (tensor<1x2x4x4xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<1x2x4x4xf32> loc("bn")
  %k = fp.constant() {value = dense<[[[[0.5]], [[1.0]]], [[[-2.0]], [[0.25]]]]> : tensor<2x2x1x1xf32>} : () -> tensor<2x2x1x1xf32>
  %y = fp.conv2d(%n, %k) : (tensor<1x2x4x4xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x4x4xf32> loc("se_conv")
  %h = fp.hard_sigmoid(%y) {alpha = 0.1666667 : f32, beta = 0.5 : f32} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> loc("gate")
  %r = fp.mul(%n, %h) : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> loc("scale")
  func.return %r : tensor<1x2x4x4xf32>
}
"#;

#[test]
fn fold_bn_into_a_transposed_convolution_is_proven_and_a_wrong_one_is_found_there() {
    let mut ctx = context();
    let before = parse_module(&mut ctx, CONV_TRANSPOSE_BN.as_bytes(), "deconv.qir").unwrap();
    verify(&mut ctx, &before).unwrap();
    let mut after = before.clone();
    run(&mut ctx, &mut after, "fold-bn");
    let proven = check(&mut ctx, &before, &after, Relation::Real, &Limits::default());
    assert_eq!(proven.outcome, Outcome::Proven, "{}", proven.summary(4));
    // The same fold from a batch norm with another epsilon: wrong at the
    // transposed convolution, not at the SE convolution the pass also made.
    let wrong = CONV_TRANSPOSE_BN.replace(
        "fp.batch_norm(%s, %g, %b, %m, %v)",
        "fp.batch_norm(%s, %g, %b, %m, %v) {epsilon = 0.5 : f32}",
    );
    let mut after = parse_module(&mut ctx, wrong.as_bytes(), "deconv.qir").unwrap();
    run(&mut ctx, &mut after, "fold-bn");
    let result = check(&mut ctx, &before, &after, Relation::Real, &Limits::default());
    let Outcome::Failed(f) = result.outcome else { panic!("not caught: {}", result.summary(4)) };
    assert!(
        loc_name(&ctx, &before, f.before_op).contains("deconv"),
        "{}",
        loc_name(&ctx, &before, f.before_op)
    );
    assert!(loc_name(&ctx, &after, f.after_op).contains("deconv"), "{}", loc_name(&ctx, &after, f.after_op));
}

#[test]
fn a_hard_swish_recognized_from_the_wrong_constant_is_caught() {
    let chain = |three: &str| {
        format!(
            r#"
func.func @main(%x: tensor<8xf32>) -> tensor<8xf32> {{
  %three = fp.constant() {{value = dense<{three}> : tensor<f32>}} : () -> tensor<f32>
  %six = fp.constant() {{value = dense<6.0> : tensor<f32>}} : () -> tensor<f32>
  %a = fp.add(%three, %x) : (tensor<f32>, tensor<8xf32>) -> tensor<8xf32>
  %c = fp.clip(%a) {{max = 6.0 : f32, min = 0.0 : f32}} : (tensor<8xf32>) -> tensor<8xf32>
  %m = fp.mul(%c, %x) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %y = fp.div(%m, %six) : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32> loc("hs")
  func.return %y : tensor<8xf32>
}}
"#
        )
    };
    let recognized = r#"
func.func @main(%x: tensor<8xf32>) -> tensor<8xf32> {
  %y = fp.hard_swish(%x) : (tensor<8xf32>) -> tensor<8xf32> loc("hs")
  func.return %y : tensor<8xf32>
}
"#;
    let mut ctx = context();
    let after = parse_module(&mut ctx, recognized.as_bytes(), "hs.qir").unwrap();
    let right = parse_module(&mut ctx, chain("3.0").as_bytes(), "hs.qir").unwrap();
    let result = check(&mut ctx, &right, &after, Relation::Real, &Limits::default());
    assert_eq!(result.outcome, Outcome::Proven, "{}", result.summary(4));
    let wrong = parse_module(&mut ctx, chain("2.0").as_bytes(), "hs.qir").unwrap();
    let result = check(&mut ctx, &wrong, &after, Relation::Real, &Limits::default());
    assert!(matches!(result.outcome, Outcome::Failed(_)), "{}", result.summary(4));
}

/// dense → relu → dense with `w1`, `b1` and `w2` (2×2 each) spelled out.
fn dense_pair(w1: &str, b1: &str, w2: &str) -> String {
    format!(
        r#"
func.func @main(%x: tensor<3x2xf32>) -> tensor<3x2xf32> {{
  %w1 = fp.constant() {{value = dense<{w1}> : tensor<2x2xf32>}} : () -> tensor<2x2xf32>
  %b1 = fp.constant() {{value = dense<{b1}> : tensor<2xf32>}} : () -> tensor<2xf32>
  %w2 = fp.constant() {{value = dense<{w2}> : tensor<2x2xf32>}} : () -> tensor<2x2xf32>
  %h = fp.dense(%x, %w1, %b1) : (tensor<3x2xf32>, tensor<2x2xf32>, tensor<2xf32>) -> tensor<3x2xf32> loc("fc1")
  %r = fp.relu(%h) : (tensor<3x2xf32>) -> tensor<3x2xf32> loc("relu1")
  %y = fp.dense(%r, %w2) : (tensor<3x2xf32>, tensor<2x2xf32>) -> tensor<3x2xf32> loc("fc2")
  func.return %y : tensor<3x2xf32>
}}
"#
    )
}

/// The real `equalize` is proven on a dense pair (r1 = [1, 4], r2 = [4, 1],
/// s = [0.5, 2]); what a broken one would write is caught: the second
/// weight scaled along its output axis instead of its input axis, and a
/// negative scale (s = [-0.5, 2]) through the relu, which a purely linear
/// pair would allow but relu does not.
#[test]
fn equalize_is_proven_and_a_wrong_axis_or_a_negative_scale_is_caught() {
    let mut ctx = context();
    let before_text = dense_pair("[[1.0, 0.5], [-4.0, 2.0]]", "[1.0, 8.0]", "[[4.0, 1.0], [-2.0, 0.5]]");
    let before = parse_module(&mut ctx, before_text.as_bytes(), "pair.qir").unwrap();
    let mut real = before.clone();
    run(&mut ctx, &mut real, "equalize");
    let result = check(&mut ctx, &before, &real, Relation::Real, &Limits::default());
    assert_eq!(result.outcome, Outcome::Proven, "{}", result.summary(4));
    // What the real pass writes: rows of w1 and b1 divided by s, columns of w2 times s.
    let right = dense_pair("[[2.0, 1.0], [-2.0, 1.0]]", "[2.0, 4.0]", "[[2.0, 2.0], [-1.0, 1.0]]");
    let right = parse_module(&mut ctx, right.as_bytes(), "pair.qir").unwrap();
    assert_eq!(check(&mut ctx, &before, &right, Relation::Real, &Limits::default()).outcome, Outcome::Proven);
    for (what, w1, b1, w2) in [
        // Rows of w2 times s instead of its columns.
        ("the wrong axis of w2", "[[2.0, 1.0], [-2.0, 1.0]]", "[2.0, 4.0]", "[[2.0, 0.5], [-4.0, 1.0]]"),
        // s = [-0.5, 2]: w1 row 0 and b1[0] negated, w2 column 0 negated.
        (
            "a negative scale through relu",
            "[[-2.0, -1.0], [-2.0, 1.0]]",
            "[-2.0, 4.0]",
            "[[-2.0, 2.0], [1.0, 1.0]]",
        ),
    ] {
        let after = parse_module(&mut ctx, dense_pair(w1, b1, w2).as_bytes(), "pair.qir").unwrap();
        let result = check(&mut ctx, &before, &after, Relation::Real, &Limits::default());
        let Outcome::Failed(f) = result.outcome else {
            panic!("{what} was not caught: {}", result.summary(4))
        };
        // At one of the pair's layers (the checker names the first it cannot match).
        let at = loc_name(&ctx, &after, f.after_op);
        assert!(at.contains("fc1") || at.contains("fc2"), "{what}: {at}");
    }
}

/// `relu6-to-relu=true` changes the model (the clip becomes a relu): the
/// checker does not prove it; without it the clip pair is left alone and
/// the run is proven.
#[test]
fn equalize_relu6_to_relu_is_not_proven() {
    let text = golden("equalize-relu6-to-relu.qir");
    let mut ctx = context();
    let before = parse_module(&mut ctx, text.as_bytes(), "equalize-relu6-to-relu.qir").unwrap();
    let mut changed = before.clone();
    run(&mut ctx, &mut changed, "equalize{relu6-to-relu=true}");
    let result = check(&mut ctx, &before, &changed, Relation::Real, &Limits::default());
    assert!(matches!(result.outcome, Outcome::Failed(_)), "{}", result.summary(4));
    let mut kept = before.clone();
    run(&mut ctx, &mut kept, "equalize");
    assert_eq!(check(&mut ctx, &before, &kept, Relation::Real, &Limits::default()).outcome, Outcome::Proven);
}

/// A dense of rank-3 activations keeps its features on axis 2: a scale
/// along axis 1 (the sequence) is not a scale of its output features, even
/// when the two axes have the same size.
#[test]
fn a_sequence_scale_is_not_folded_into_a_rank_3_dense() {
    let before = r#"
func.func @main(%x: tensor<2x2x2xf32>) -> tensor<2x2x2xf32> {
  %w = fp.constant() {value = dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>} : () -> tensor<2x2xf32>
  %b = fp.constant() {value = dense<[0.5, -0.5]> : tensor<2xf32>} : () -> tensor<2xf32>
  %c = fp.constant() {value = dense<[[[2.0], [3.0]]]> : tensor<1x2x1xf32>} : () -> tensor<1x2x1xf32>
  %y = fp.dense(%x, %w, %b) : (tensor<2x2x2xf32>, tensor<2x2xf32>, tensor<2xf32>) -> tensor<2x2x2xf32>
  %z = fp.mul(%y, %c) : (tensor<2x2x2xf32>, tensor<1x2x1xf32>) -> tensor<2x2x2xf32> loc("scale")
  func.return %z : tensor<2x2x2xf32>
}
"#;
    // The scale applied to the output features instead: wrong.
    let after = r#"
func.func @main(%x: tensor<2x2x2xf32>) -> tensor<2x2x2xf32> {
  %w = fp.constant() {value = dense<[[2.0, 4.0], [9.0, 12.0]]> : tensor<2x2xf32>} : () -> tensor<2x2xf32>
  %b = fp.constant() {value = dense<[1.0, -1.5]> : tensor<2xf32>} : () -> tensor<2xf32>
  %y = fp.dense(%x, %w, %b) : (tensor<2x2x2xf32>, tensor<2x2xf32>, tensor<2xf32>) -> tensor<2x2x2xf32> loc("scale")
  func.return %y : tensor<2x2x2xf32>
}
"#;
    let mut ctx = context();
    let before = parse_module(&mut ctx, before.as_bytes(), "dense3.qir").unwrap();
    verify(&mut ctx, &before).unwrap();
    let after = parse_module(&mut ctx, after.as_bytes(), "dense3.qir").unwrap();
    verify(&mut ctx, &after).unwrap();
    let outcome = check(&mut ctx, &before, &after, Relation::Real, &Limits::default()).outcome;
    assert!(
        !matches!(outcome, Outcome::Proven),
        "a sequence scale was folded into the features: {outcome:?}"
    );
}
