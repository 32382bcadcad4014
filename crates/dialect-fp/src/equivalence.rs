//! The identities of the `fp` dialect for the equivalence checker
//! (`qopt --verify-equiv`, `docs/verification.md`): one line each, named for
//! what it states. `(fp.op ?a ?t operands...)` binds the op's attributes to
//! `?a` and its result type to `?t`.

use crate::ops::norm::BATCH_NORM_EPSILON;
use qopt_ir_core::equivalence::{EquivRule, Relation};

/// `x op c = x` for the constant `c` that is the operation's identity.
fn identity(name: &'static str, op: &str, value: &str, operand_first: bool) -> EquivRule {
    let lhs = if operand_first { format!("({op} ?a ?t ?x ?c)") } else { format!("({op} ?a ?t ?c ?x)") };
    EquivRule::new(Relation::Exact, name, lhs, "?x").when(format!("(is-splat ?c {value}) (same-type ?x ?t)"))
}

/// Per-channel scaling and shifting of a layer's output as new weights and
/// bias: the layer is linear in its weight and bias per output channel
/// (`weight_axis` of the weight holds the output channels; the output's
/// channel axis is 1).
fn linear_in_weight_and_bias(op: &'static str, rules: &mut Vec<EquivRule>) {
    let real = |name: String, lhs: String, rhs: String| EquivRule::new(Relation::Real, name, lhs, rhs);
    let short = op.trim_start_matches("fp.");
    rules.extend([
        real(
            format!("{short}-times-channel-vector-scales-weight-and-bias"),
            format!("(chan-mul ({op} ?a ?t ?x ?w ?b) ?s 1)"),
            format!("({op} ?a ?t ?x (chan-mul ?w ?s 0) (* ?b ?s))"),
        ),
        real(
            format!("{short}-without-bias-times-channel-vector-scales-weight"),
            format!("(chan-mul ({op} ?a ?t ?x ?w) ?s 1)"),
            format!("({op} ?a ?t ?x (chan-mul ?w ?s 0))"),
        ),
        real(
            format!("{short}-plus-channel-vector-shifts-bias"),
            format!("(chan-add ({op} ?a ?t ?x ?w ?b) ?s 1)"),
            format!("({op} ?a ?t ?x ?w (+ ?b ?s))"),
        ),
        real(
            format!("{short}-without-bias-plus-channel-vector-is-its-bias"),
            format!("(chan-add ({op} ?a ?t ?x ?w) ?s 1)"),
            format!("({op} ?a ?t ?x ?w (+ (zeros-of-axis ?w 0) ?s))"),
        ),
    ]);
}

/// The rules (see the module docs).
pub fn rules() -> Vec<EquivRule> {
    let exact = |name, lhs, rhs| EquivRule::new(Relation::Exact, name, lhs, rhs);
    let real = |name: &'static str, lhs: String, rhs: String| EquivRule::new(Relation::Real, name, lhs, rhs);
    // γ / √(σ² + ε), BN's per-channel scale.
    let bn_scale = format!("(/ ?g (sqrt (+ ?v (attr-f64 ?a epsilon {BATCH_NORM_EPSILON:e}))))");
    let mut rules = vec![
        identity("add-zero", "fp.add", "0.0", true),
        identity("zero-add", "fp.add", "0.0", false),
        identity("sub-zero", "fp.sub", "0.0", true),
        identity("mul-one", "fp.mul", "1.0", true),
        identity("one-mul", "fp.mul", "1.0", false),
        identity("div-one", "fp.div", "1.0", true),
        exact("add-commutes", "(fp.add ?a ?t ?x ?y)", "(fp.add ?a ?t ?y ?x)"),
        exact("mul-commutes", "(fp.mul ?a ?t ?x ?y)", "(fp.mul ?a ?t ?y ?x)"),
        exact("relu-is-idempotent", "(fp.relu ?a ?t (fp.relu ?b ?t ?x))", "(fp.relu ?a ?t ?x)"),
        exact("reshape-of-reshape", "(fp.reshape ?a ?t (fp.reshape ?b ?u ?x))", "(fp.reshape ?a ?t ?x)"),
        exact("reshape-to-own-type", "(fp.reshape ?a ?t ?x)", "?x").when("(same-type ?x ?t)"),
        exact("flatten-to-own-type", "(fp.flatten ?a ?t ?x)", "?x").when("(same-type ?x ?t)"),
        exact("concat-of-one", "(fp.concat ?a ?t ?x)", "?x").when("(same-type ?x ?t)"),
        real(
            "batch-norm-is-channel-affine",
            "(fp.batch_norm ?a ?t ?x ?g ?b ?m ?v)".into(),
            format!("(chan-add (chan-mul ?x {bn_scale} 1) (- ?b (* ?m {bn_scale})) 1)"),
        ),
        real(
            "mul-by-channel-constant",
            "(fp.mul ?a ?t ?x ?c)".into(),
            "(chan-mul ?x (channel-vector ?c ?t 1) 1)".into(),
        )
        .when("(same-type ?x ?t)"),
        real(
            "add-of-channel-constant",
            "(fp.add ?a ?t ?x ?c)".into(),
            "(chan-add ?x (channel-vector ?c ?t 1) 1)".into(),
        )
        .when("(same-type ?x ?t)"),
        // clip(αx + β, 0, 1): the affine part is linear, so it folds into a
        // layer before it like a batch norm does.
        real(
            "hard-sigmoid-is-clipped-affine",
            "(fp.hard_sigmoid ?a ?t ?x)".into(),
            "(fp.clip {max = 1.0 : f32, min = 0.0 : f32} ?t \
             (chan-add (chan-mul ?x (attr-f64 ?a alpha 0.2) 1) (attr-f64 ?a beta 0.5) 1))"
                .into(),
        ),
    ];
    // x·Wᵀ sums the same products as a matmul by the transposed matrix, in
    // an order of the kernel's choosing.
    rules.push(real(
        "dense-is-matmul-by-transpose",
        "(fp.dense ?a ?t ?x ?w)".into(),
        "(fp.matmul {} ?t ?x (fp.transpose {perm = [1, 0]} (transposed-type ?w) ?w))".into(),
    ));
    for op in ["fp.conv2d", "fp.conv1d", "fp.dense"] {
        linear_in_weight_and_bias(op, &mut rules);
    }
    rules
}
