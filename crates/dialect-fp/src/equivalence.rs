//! The identities of the `fp` dialect for the equivalence checker
//! (`qopt --verify-equiv`, `docs/verification.md`): one line each, named for
//! what it states. `(fp.op ?a ?t operands...)` binds the op's attributes to
//! `?a` and its result type to `?t`.

use crate::ops::norm::BATCH_NORM_EPSILON;
use qopt_ir_core::equivalence::{EquivRule, Relation};
use qopt_ir_core::{Arity, Traits};

/// `x op c = x` for the constant `c` that is the operation's identity.
fn identity(name: &'static str, op: &str, value: &str, operand_first: bool) -> EquivRule {
    let lhs = if operand_first { format!("({op} ?a ?t ?x ?c)") } else { format!("({op} ?a ?t ?c ?x)") };
    EquivRule::new(Relation::Exact, name, lhs, "?x").when(format!("(is-splat ?c {value}) (same-type ?x ?t)"))
}

/// Per-channel scaling and shifting of a layer's output as new weights and
/// bias: the layer is linear in its weight and bias per output channel
/// (`weight_axis` of the weight holds the output channels; the output's
/// channel axis is 1). `when` limits the rules (a transposed convolution's
/// weight holds its output channels on axis 1 only with one group).
fn linear_in_weight_and_bias(op: &'static str, weight_axis: i64, when: &str, rules: &mut Vec<EquivRule>) {
    let real = |name: String, lhs: String, rhs: String| {
        EquivRule::new(Relation::Real, name, lhs, rhs).when(when.to_string())
    };
    let short = op.trim_start_matches("fp.");
    rules.extend([
        real(
            format!("{short}-times-channel-vector-scales-weight-and-bias"),
            format!("(chan-mul ({op} ?a ?t ?x ?w ?b) ?s 1)"),
            format!("({op} ?a ?t ?x (chan-mul ?w ?s {weight_axis}) (* ?b ?s))"),
        ),
        real(
            format!("{short}-without-bias-times-channel-vector-scales-weight"),
            format!("(chan-mul ({op} ?a ?t ?x ?w) ?s 1)"),
            format!("({op} ?a ?t ?x (chan-mul ?w ?s {weight_axis}))"),
        ),
        real(
            format!("{short}-plus-channel-vector-shifts-bias"),
            format!("(chan-add ({op} ?a ?t ?x ?w ?b) ?s 1)"),
            format!("({op} ?a ?t ?x ?w (+ ?b ?s))"),
        ),
        real(
            format!("{short}-without-bias-plus-channel-vector-is-its-bias"),
            format!("(chan-add ({op} ?a ?t ?x ?w) ?s 1)"),
            format!("({op} ?a ?t ?x ?w (+ (zeros-of-axis ?w {weight_axis}) ?s))"),
        ),
    ]);
}

/// What `equalize` needs: a layer's output channels rescaled by a positive
/// vector, undone in the next layer's input channels. The checker does not
/// know the pass's scales; it brings both models to one normal form of its
/// own instead, where every output channel of a layer with a constant weight
/// has the range (largest magnitude) 1:
///
/// - `layer(x, w, b) = chan-mul(layer(x, w / r, b / r), r)` with `r` the
///   weight's per-output-channel range (1 for an all-zero channel), exact
///   over the reals for any `r > 0`;
/// - `relu(s · x) = s · relu(x)` for `s > 0` (not for a clip: `min(6, s·x)`
///   is not `s · min(6, x)`);
/// - `layer(s · x, w, b) = layer(x, w · s, b)` with `s` along the weight's
///   input-channel axis (zero padding stays zero; depthwise: each output
///   channel reads its own input channel, so along the output axis).
///
/// A rescaled pair `w1 / s`, `w2 · s` then reaches `w1 / r1` and `w2 · r1`
/// from both sides, equal up to the rounding of the stored weights.
/// `activation_axis` is the channel axis of the layer's output and input
/// (1 for NC..., -1 for a dense's features); `input_axis` the weight's
/// input-channel axis; `when` limits the input-scaling rule to the layers
/// it is true of.
fn rescaling(
    op: &'static str,
    activation_axis: i64,
    input_axis: i64,
    when: &str,
    name: &str,
    rules: &mut Vec<EquivRule>,
) {
    let real = |name: String, lhs: String, rhs: String| EquivRule::new(Relation::Real, name, lhs, rhs);
    let short = op.trim_start_matches("fp.");
    let range = "(chan-absmax ?w 0)";
    if name.is_empty() {
        rules.extend([
            real(
                format!("{short}-is-its-range-normalized-form-times-range"),
                format!("({op} ?a ?t ?x ?w ?b)"),
                format!("(chan-mul ({op} ?a ?t ?x (chan-div ?w {range} 0) (/ ?b {range})) {range} {activation_axis})"),
            )
            .when("(is-constant ?w)"),
            real(
                format!("{short}-without-bias-is-its-range-normalized-form-times-range"),
                format!("({op} ?a ?t ?x ?w)"),
                format!("(chan-mul ({op} ?a ?t ?x (chan-div ?w {range} 0)) {range} {activation_axis})"),
            )
            .when("(is-constant ?w)"),
        ]);
    }
    let kind = if name.is_empty() { short.to_string() } else { format!("{short}-{name}") };
    rules.extend([
        real(
            format!("{kind}-of-channel-scaled-input-scales-weight-inputs"),
            format!("({op} ?a ?t (chan-mul ?x ?s {activation_axis}) ?w ?b)"),
            format!("({op} ?a ?t ?x (chan-mul ?w ?s {input_axis}) ?b)"),
        )
        .when(when.to_string()),
        real(
            format!("{kind}-without-bias-of-channel-scaled-input-scales-weight-inputs"),
            format!("({op} ?a ?t (chan-mul ?x ?s {activation_axis}) ?w)"),
            format!("({op} ?a ?t ?x (chan-mul ?w ?s {input_axis}))"),
        )
        .when(when.to_string()),
    ]);
}

/// A layer fed a per-channel shift of its input, `layer(x + s, w, b)`, is the
/// layer on `x` with the bias `b + Σ_{c,k} w[o,c,k] · s[c]`: every tap reads
/// the shift, so `when` must keep the rule to layers without padding (a pad
/// reads 0, not `s`). `activation_axis` is the input's channel axis and
/// `input_axis` the weight's (0 for a depthwise conv, whose output channel
/// `c` reads input channel `c` only). Exact over the reals; what
/// `absorb-bias` puts into layer2's bias.
fn shifted_input(
    op: &'static str,
    activation_axis: i64,
    input_axis: i64,
    when: &str,
    name: &str,
    rules: &mut Vec<EquivRule>,
) {
    let short = op.trim_start_matches("fp.");
    let kind = if name.is_empty() { short.to_string() } else { format!("{short}-{name}") };
    let into_bias = format!("(chan-sum (chan-mul ?w ?s {input_axis}) 0)");
    // Constant weights, bias and shift only: the new bias is then a constant,
    // never an expression other rules would keep rewriting.
    let when = format!("{when} (is-constant ?w) (is-constant ?s)");
    let real = |name: String, lhs: String, rhs: String, extra: &str| {
        EquivRule::new(Relation::Real, name, lhs, rhs).when(format!("{when}{extra}"))
    };
    rules.extend([
        real(
            format!("{kind}-of-channel-shifted-input-shifts-bias"),
            format!("({op} ?a ?t (chan-add ?x ?s {activation_axis}) ?w ?b)"),
            format!("({op} ?a ?t ?x ?w (+ ?b {into_bias}))"),
            " (is-constant ?b)",
        ),
        real(
            format!("{kind}-without-bias-of-channel-shifted-input-gets-a-bias"),
            format!("({op} ?a ?t (chan-add ?x ?s {activation_axis}) ?w)"),
            format!("({op} ?a ?t ?x ?w {into_bias})"),
            "",
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
        // x / c = x · (1/c): what `div-to-mul` rewrites.
        real(
            "div-by-channel-constant",
            "(fp.div ?a ?t ?x ?c)".into(),
            "(chan-mul ?x (/ 1.0 (channel-vector ?c ?t 1)) 1)".into(),
        )
        .when("(same-type ?x ?t)"),
        real(
            "add-of-channel-constant",
            "(fp.add ?a ?t ?x ?c)".into(),
            "(chan-add ?x (channel-vector ?c ?t 1) 1)".into(),
        )
        .when("(same-type ?x ?t)"),
        // The same along the last axis, a dense layer's features.
        real(
            "add-of-feature-constant",
            "(fp.add ?a ?t ?x ?c)".into(),
            "(chan-add ?x (channel-vector ?c ?t -1) -1)".into(),
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
    // hard_swish(x) = x · clip(x + 3, 0, 6) / 6, as exporters decompose it
    // (constants and attributes within 4 f32 ulps; add and mul commute by the
    // rules above, so one operand order is enough).
    let clip_of_x_plus_3 = "(fp.clip ?c ?t (fp.add ?d ?t ?x ?three))";
    let clip_is_relu6 = "(is-near ?three 3.0) (attr-near ?c min 0.0) (attr-near ?c max 6.0)";
    let hard_swish = "(fp.hard_swish {} ?t ?x)";
    for (name, lhs, when) in [
        (
            "x-times-clip-over-6-is-hard-swish",
            format!("(fp.div ?a ?t (fp.mul ?b ?t ?x {clip_of_x_plus_3}) ?six)"),
            format!("{clip_is_relu6} (is-near ?six 6.0)"),
        ),
        (
            "x-times-clip-times-a-sixth-is-hard-swish",
            format!("(fp.mul ?a ?t (fp.mul ?b ?t ?x {clip_of_x_plus_3}) ?sixth)"),
            format!("{clip_is_relu6} (is-near ?sixth 0.16666666666666666)"),
        ),
        (
            "x-times-clip-over-6-first-is-hard-swish",
            format!("(fp.mul ?b ?t ?x (fp.div ?a ?t {clip_of_x_plus_3} ?six))"),
            format!("{clip_is_relu6} (is-near ?six 6.0)"),
        ),
        (
            "x-times-a-sixth-of-clip-is-hard-swish",
            format!("(fp.mul ?b ?t ?x (fp.mul ?a ?t {clip_of_x_plus_3} ?sixth))"),
            format!("{clip_is_relu6} (is-near ?sixth 0.16666666666666666)"),
        ),
        (
            "x-times-hard-sigmoid-is-hard-swish",
            "(fp.mul ?b ?t ?x (fp.hard_sigmoid ?h ?t ?x))".to_string(),
            "(attr-near ?h alpha 0.16666666666666666) (attr-near ?h beta 0.5)".to_string(),
        ),
    ] {
        rules.push(real(name, lhs, hard_swish.to_string()).when(when));
    }
    // x·Wᵀ sums the same products as a matmul by the transposed matrix, in
    // an order of the kernel's choosing.
    rules.push(real(
        "dense-is-matmul-by-transpose",
        "(fp.dense ?a ?t ?x ?w)".into(),
        "(fp.matmul {} ?t ?x (fp.transpose {perm = [1, 0]} (transposed-type ?w) ?w))".into(),
    ));
    for op in ["fp.conv2d", "fp.conv1d"] {
        linear_in_weight_and_bias(op, 0, "", &mut rules);
    }
    // A dense's output features are on axis 1 only for rank-2 activations.
    linear_in_weight_and_bias("fp.dense", 0, "(rank-is ?x 2)", &mut rules);
    // Positive per-channel scales through a layer and a relu (`equalize`).
    rescaling("fp.conv2d", 1, 1, "(lacks-attr ?a groups)", "", &mut rules);
    rescaling("fp.conv2d", 1, 0, "(depthwise ?a ?w)", "depthwise", &mut rules);
    rescaling("fp.conv1d", 1, 1, "(lacks-attr ?a groups)", "", &mut rules);
    rescaling("fp.conv1d", 1, 0, "(depthwise ?a ?w)", "depthwise", &mut rules);
    rescaling("fp.dense", -1, 1, "", "", &mut rules);
    for axis in [1, -1] {
        rules.push(
            real(
                if axis == 1 {
                    "relu-of-positive-channel-scale-is-scaled-relu"
                } else {
                    "relu-of-positive-feature-scale-is-scaled-relu"
                },
                format!("(fp.relu ?a ?t (chan-mul ?x ?s {axis}))"),
                format!("(chan-mul (fp.relu ?a ?t ?x) ?s {axis})"),
            )
            .when("(all-positive ?s)"),
        );
    }
    // A dense layer's features are its last axis whatever the rank: shifts
    // along it (what `absorb-bias` records for a dense) go into its bias.
    rules.extend([
        real(
            "dense-plus-feature-vector-shifts-bias",
            "(chan-add (fp.dense ?a ?t ?x ?w ?b) ?s -1)".into(),
            "(fp.dense ?a ?t ?x ?w (+ ?b ?s))".into(),
        ),
        real(
            "dense-without-bias-plus-feature-vector-is-its-bias",
            "(chan-add (fp.dense ?a ?t ?x ?w) ?s -1)".into(),
            "(fp.dense ?a ?t ?x ?w (+ (zeros-of-axis ?w 0) ?s))".into(),
        ),
        // The other way (`recognize-dense` folds an add into the bias).
        real(
            "dense-is-its-bias-added-to-the-bias-less-dense",
            "(fp.dense ?a ?t ?x ?w ?b)".into(),
            "(chan-add (fp.dense ?a ?t ?x ?w) ?b -1)".into(),
        ),
    ]);
    // A shift of a layer's input channels goes into its bias (`absorb-bias`'s
    // layer2): no padding, one group or depthwise.
    shifted_input("fp.conv2d", 1, 1, "(lacks-attr ?a pad) (lacks-attr ?a groups)", "", &mut rules);
    shifted_input("fp.conv2d", 1, 0, "(lacks-attr ?a pad) (depthwise ?a ?w)", "depthwise", &mut rules);
    shifted_input("fp.conv1d", 1, 1, "(lacks-attr ?a pad) (lacks-attr ?a groups)", "", &mut rules);
    shifted_input("fp.conv1d", 1, 0, "(lacks-attr ?a pad) (depthwise ?a ?w)", "depthwise", &mut rules);
    shifted_input("fp.dense", -1, 1, "", "", &mut rules);
    // relu(y) = relu(y − p) + p for 0 ≤ p ≤ y, with p the value's recorded
    // per-channel minimum where positive (`recorded-floor`): true on the
    // calibrated range only, where the records hold (`absorb-bias`).
    for (axis, what) in [(1, "channel"), (-1, "feature")] {
        let floor = format!("(recorded-floor ?y {axis})");
        rules.push(EquivRule::new(
            Relation::CalibratedRange,
            format!("relu-of-value-above-its-recorded-{what}-minimum-is-shifted-relu"),
            "(fp.relu ?a ?t ?y)".to_string(),
            format!("(chan-add (fp.relu ?a ?t (chan-add ?y (- 0.0 {floor}) {axis})) {floor} {axis})"),
        ));
    }
    // Weights C_in × C_out/groups × k...: with one group (the default, left
    // out of the node), axis 1 holds the output channels.
    for op in ["fp.conv_transpose2d", "fp.conv_transpose1d"] {
        linear_in_weight_and_bias(op, 1, "(lacks-attr ?a groups)", &mut rules);
    }
    unary_commutes_with_reshape(&mut rules);
    // A per-channel scale or shift moves through a reshape that keeps the
    // batch and channel dimensions (a squeeze after a conv): what `fold-bn`
    // does with a batch norm after one.
    for f in ["chan-mul", "chan-add"] {
        rules.push(
            EquivRule::new(
                Relation::Exact,
                format!("{f}-commutes-with-channel-keeping-reshape"),
                format!("({f} (fp.reshape ?a ?t ?x) ?s 1)"),
                format!("(fp.reshape ?a ?t ({f} ?x ?s 1))"),
            )
            .when("(same-leading-dims ?x ?t 2)"),
        );
    }
    over_unit_height("fp.conv1d", "fp.conv2d", &mut rules);
    over_unit_height("fp.conv_transpose1d", "fp.conv_transpose2d", &mut rules);
    rules
}

/// `f(reshape(x)) = reshape(f(x))` for every elementwise unary op `f` of
/// the dialect (its result has its operand's type): it computes each element
/// alone, wherever the element sits. `conv1d-to-conv2d` moves a 1-D layer's
/// activation before the reshape back, next to the layer it fuses into.
fn unary_commutes_with_reshape(rules: &mut Vec<EquivRule>) {
    let unary = Traits::ELEMENTWISE | Traits::SAME_OPERANDS_AND_RESULT_TYPE;
    for def in crate::ops::all() {
        if !def.has(unary) || def.operands != Arity::Exact(1) {
            continue;
        }
        let op = def.name;
        rules.push(
            EquivRule::new(
                Relation::Exact,
                format!("{}-commutes-with-reshape", op.trim_start_matches("fp.")),
                format!("({op} ?b ?t (fp.reshape ?a ?u ?x))"),
                format!("(fp.reshape ?a ?t ({op} ?b (type-of ?x) ?x))"),
            )
            .when("(same-element ?x ?t)"),
        );
    }
}

/// A 1-D convolution (or transposed convolution) is the 2-D one over a unit
/// height between reshapes: the input N×C×L as N×C×1×L, the weight as
/// O×C×1×K, each window attribute with the height's entry first (stride and
/// dilation 1, no padding, no output padding), and the N×O×1×L' result back
/// as N×O×L'. The interpreter computes the 1-D op as that 2-D one, so the
/// identity is exact; it is what `conv1d-to-conv2d` rewrites.
fn over_unit_height(one_d: &str, two_d: &str, rules: &mut Vec<EquivRule>) {
    let attrs = "(attrs-insert ?a stride:0:1 dilation:0:1 pad:0:0 pad:2:0 output_padding:0:0)";
    let unit =
        |v: &str| format!("(fp.reshape (shape-attrs (unit-dim-type {v} 2)) (unit-dim-type {v} 2) {v})");
    let short = one_d.trim_start_matches("fp.");
    for (operands, bias, suffix) in [("?x ?w ?b", " ?b", ""), ("?x ?w", "", "-without-bias")] {
        rules.push(EquivRule::new(
            Relation::Exact,
            format!("{short}{suffix}-is-{}-over-unit-height", two_d.trim_start_matches("fp.")),
            format!("({one_d} ?a ?t {operands})"),
            format!(
                "(fp.reshape (shape-attrs ?t) ?t ({two_d} {attrs} (unit-dim-type ?t 2) {} {}{bias}))",
                unit("?x"),
                unit("?w")
            ),
        ));
    }
}
