//! The identities of the `qnn` dialect for the equivalence checker
//! (`qopt --verify-equiv`, `docs/verification.md`), one line each:
//!
//! - the definitions of its identity-like ops and of `qnn.fake_quant`, and
//!   that a zero bias adds nothing to an integer layer;
//! - what quantizing absorbs (a relu when the zero point is the storage
//!   minimum, a clip's top when it quantizes to the storage maximum) and what
//!   commutes with it (relu, and every quant-agnostic `fp` op with
//!   dequantization, §9);
//! - `qnn.lookup` as the table of a unary `fp` function (§7.5), built by the
//!   checker from the function's own kernel;
//! - under `requantization`, each integer op as the float op between
//!   dequantize and quantize (`qnn.conv2d(x, w, b) ≈ quantize(fp.conv2d(
//!   dequantize x, dequantize w, dequantize b))`), requantize as
//!   quantize(dequantize) and requantize chains. These prove that `fuse`
//!   wired operands, attributes, axes and types right; the rounding of the
//!   integer arithmetic is what the relation leaves out.
//!
//! In a pattern `(qnn.op ?a ?t operands...)` binds the op's attributes to
//! `?a` and its result type to `?t`.

use crate::op_names;
use qopt_dialect_fp::{FpDialect, QUANT_AGNOSTIC_ONLY_WHEN};
use qopt_ir_core::equivalence::{EquivRule, Relation};
use qopt_ir_core::interfaces::{LookupActivation, QuantizableOp};
use qopt_ir_core::{Arity, Dialect, OpDef, Traits};

/// The most operands a `qnn.concat` rule is stated for.
const MAX_CONCAT_OPERANDS: usize = 16;

/// The most results of a variadic quant-agnostic op (`fp.split`) a rule is
/// stated for.
const MAX_SPLIT_RESULTS: u32 = 16;

/// `(qnn.dequantize {} (expressed ?v) ?v)`: the real value of `?v`.
fn dequantized(v: &str) -> String {
    format!("(qnn.dequantize {{}} (expressed {v}) {v})")
}

/// The rule defining a weighted integer op (`qnn.conv2d`, `qnn.dense` and
/// their relu forms, with and without bias) as its float op between
/// dequantize and quantize; `activation` wraps the float op's text.
fn weighted_definition(qnn: &str, fp: &str, bias: bool, activation: Activation) -> EquivRule {
    let operands = if bias { "?x ?w ?b" } else { "?x ?w" };
    let bias_value = if bias {
        " (qnn.dequantize {} (expressed (as-bias ?b ?x ?w)) (as-bias ?b ?x ?w))".to_string()
    } else {
        String::new()
    };
    let float_op = format!(
        "({fp} (attrs-without ?a rounding relu_max) (expressed ?t) {} {}{bias_value})",
        dequantized("?x"),
        dequantized("?w")
    );
    let name = format!(
        "{}{}-is-quantized-{}",
        qnn.trim_start_matches("qnn."),
        if bias { "" } else { "-without-bias" },
        fp.trim_start_matches("fp.")
    );
    let (body, when) = match activation {
        Activation::None => (float_op, ""),
        Activation::Relu => (format!("(fp.relu {{}} (expressed ?t) {float_op})"), "(lacks-attr ?a relu_max)"),
        Activation::ClipToReluMax => (
            format!(
                "(fp.clip (attrs-merge {{min = 0.0 : f32}} (attrs-pick ?a relu_max:max)) (expressed ?t) {float_op})"
            ),
            "(has-attr ?a relu_max)",
        ),
    };
    let name = match activation {
        Activation::ClipToReluMax => format!("{name}-clipped-at-relu-max"),
        _ => name,
    };
    EquivRule::new(
        Relation::Requantization,
        name,
        format!("({qnn} ?a ?t {operands})"),
        format!("(qnn.quantize {{}} ?t {body})"),
    )
    .when(when)
}

/// The activation a weighted op's relu form applies.
#[derive(Copy, Clone)]
enum Activation {
    None,
    Relu,
    ClipToReluMax,
}

/// The rule defining an integer op whose operands are all activations, with
/// the float op's attributes, as its float op between dequantize and quantize.
fn activation_definition(qnn: &str, fp: &str, operands: usize) -> EquivRule {
    let vars: Vec<String> = (0..operands).map(|i| format!("?x{i}")).collect();
    let reals: Vec<String> = vars.iter().map(|v| dequantized(v)).collect();
    let short = qnn.trim_start_matches("qnn.");
    let name = if qnn == "qnn.concat" {
        format!("concat-of-{operands}-is-quantized-concat")
    } else {
        format!("{short}-is-quantized-{}", fp.trim_start_matches("fp."))
    };
    EquivRule::new(
        Relation::Requantization,
        name,
        format!("({qnn} ?a ?t {})", vars.join(" ")),
        format!(
            "(qnn.quantize {{}} ?t ({fp} (attrs-without ?a rounding) (expressed ?t) {}))",
            reals.join(" ")
        ),
    )
}

/// Operand and result counts a rule about `def` is stated for.
fn counts(arity: Arity, most: u32) -> std::ops::RangeInclusive<u32> {
    match arity {
        Arity::Exact(n) => n..=n,
        Arity::AtLeast(n) => n..=most.max(n),
        Arity::Range(lo, hi) => lo..=hi.min(most.max(lo)),
    }
}

/// `dequantize(op(q...)) = op(dequantize(q)...)` and `quantize(op(dequantize(
/// q)...)) = op(q...)` (to `q`'s own type) for a quant-agnostic `fp` op
/// (§9): it moves stored values without computing on them, so it gives the
/// same reals on either side of dequantization. Its data operands are every
/// operand of a variadic op (concat) and the first of any other; the rest
/// (indices, shapes) must not be quantized.
fn dequantize_commutes(def: &OpDef, rules: &mut Vec<EquivRule>) {
    let short = def.name.trim_start_matches("fp.");
    let variadic = def.interfaces.get::<QuantizableOp>().is_some_and(|q| q.variadic);
    // An op agnostic for one value of an attribute only: that value, or the
    // attribute left out (it is the default).
    let only_when = QUANT_AGNOSTIC_ONLY_WHEN.iter().find(|(name, ..)| *name == def.name);
    let conditions: Vec<(&str, String)> = match only_when {
        Some(&(_, attribute, value)) => vec![
            ("", format!("(attr-is ?b {attribute} {value})")),
            ("-by-default", format!("(lacks-attr ?b {attribute})")),
        ],
        None => vec![("", String::new())],
    };
    let most = if variadic { MAX_CONCAT_OPERANDS as u32 } else { 4 };
    for operands in counts(def.operands, most).filter(|&n| n >= 1) {
        let data = if variadic { operands } else { 1 };
        let quantized: Vec<String> = (0..data).map(|i| format!("?q{i}")).collect();
        let rest: Vec<String> = (data..operands).map(|i| format!("?o{i}")).collect();
        let rest_text: String = rest.iter().map(|o| format!(" {o}")).collect();
        let not_quantized: String = rest.iter().map(|o| format!(" (not-quantized {o})")).collect();
        let same_element =
            |t: &str| -> String { quantized.iter().map(|q| format!(" (same-element {q} {t})")).collect() };
        for result in counts(def.results, MAX_SPLIT_RESULTS).filter(|&n| n >= 1).map(|n| n - 1) {
            let head = if result == 0 { def.name.to_string() } else { format!("{}#{result}", def.name) };
            let reals: String = quantized.iter().map(|q| format!(" {}", dequantized(q))).collect();
            let dequantized_pattern: String = quantized
                .iter()
                .enumerate()
                .map(|(i, q)| format!(" (qnn.dequantize ?c{i} ?v{i} {q})"))
                .collect();
            for (suffix, mode) in &conditions {
                let tag = format!("{short}{suffix}-{operands}-{result}");
                rules.push(
                    EquivRule::new(
                        Relation::Exact,
                        format!("dequantize-commutes-with-{tag}"),
                        format!("(qnn.dequantize ?a ?t ({head} ?b ?u {}{rest_text}))", quantized.join(" ")),
                        format!("({head} ?b ?t{reals}{rest_text})"),
                    )
                    .when(format!("{mode}{}{not_quantized}", same_element("?u"))),
                );
                rules.push(
                    EquivRule::new(
                        Relation::Exact,
                        format!("quantize-to-own-type-commutes-with-{tag}"),
                        format!("(qnn.quantize ?a ?t ({head} ?b ?u{dequantized_pattern}{rest_text}))"),
                        format!("({head} ?b ?t {}{rest_text})", quantized.join(" ")),
                    )
                    .when(format!("{mode}{}{not_quantized}", same_element("?t"))),
                );
            }
        }
    }
}

/// `quantize(f(dequantize(q))) = lookup(q)` for a unary `fp` function `f`
/// (the `LookupActivation` interface), with an optional relu or clip after
/// it: the table is `f` run by its kernel on every stored value of `q`'s type
/// (`(domain ?q)`), so the identity is exact (§7.5).
fn lookup_definitions(def: &OpDef, rules: &mut Vec<EquivRule>) {
    let short = def.name.trim_start_matches("fp.");
    let domain = "(domain ?q)";
    let on_domain = |t: &str| format!("(shaped-like {t} {domain})");
    let float_of = |input: &str, on: bool| {
        let ty = |t: &str| if on { on_domain(t) } else { t.to_string() };
        format!("({} ?b {} (qnn.dequantize ?c {} {input}))", def.name, ty("?u"), ty("?v"))
    };
    let activations = [("", None), ("-relu", Some("fp.relu")), ("-clip", Some("fp.clip"))];
    for (suffix, activation) in activations {
        let wrap = |inner: String, on: bool| match activation {
            None => inner,
            Some(act) => {
                let ty = if on { on_domain("?w") } else { "?w".to_string() };
                format!("({act} ?r {ty} {inner})")
            }
        };
        let lhs = format!("(qnn.quantize ?a ?t {})", wrap(float_of("?q", false), false));
        let table = format!(
            "(table-attrs (qnn.quantize ?a {} {}))",
            on_domain("?t"),
            wrap(float_of(domain, true), true)
        );
        rules.push(EquivRule::new(
            Relation::Exact,
            format!("quantized-{short}{suffix}-is-a-lookup"),
            lhs,
            format!("(qnn.lookup {table} ?t ?q)"),
        ));
    }
}

/// `quantize-constants` rounds a float bias to i32 in accumulator units
/// (§6.1) once the activation and weight are dequantized: within half a unit
/// of `s_x·s_w[c]`, which the integer op rounds at anyway.
fn bias_rounding(def: &OpDef, rules: &mut Vec<EquivRule>) {
    let Some(q) = def.interfaces.get::<QuantizableOp>() else { return };
    let (Some(w), Some(b), [x]) = (q.weight, q.bias, q.activations.as_slice()) else { return };
    let operands = b.max(w).max(*x) + 1;
    let pattern = |bias: &str| -> String {
        let mut items = vec![format!("({} ?a ?t", def.name)];
        for i in 0..operands {
            items.push(if i == *x {
                "(qnn.dequantize ?c ?u ?x)".to_string()
            } else if i == w {
                "(qnn.dequantize ?d ?v ?w)".to_string()
            } else if i == b {
                bias.to_string()
            } else {
                format!("?o{i}")
            });
        }
        format!("{})", items.join(" "))
    };
    rules.push(EquivRule::new(
        Relation::Requantization,
        format!("{}-bias-rounds-to-accumulator-units", def.name.trim_start_matches("fp.")),
        pattern("?b"),
        pattern("(qnn.dequantize {} (type-of ?b) (rounded-bias ?b ?x ?w))"),
    ));
}

/// The rules (see the module docs).
pub fn rules() -> Vec<EquivRule> {
    let exact = |name, lhs, rhs| EquivRule::new(Relation::Exact, name, lhs, rhs);
    let requantization = |name, lhs, rhs| EquivRule::new(Relation::Requantization, name, lhs, rhs);
    let mut rules = vec![
        // §3.4 of docs/quant-semantics.md: fake quantization is the round trip
        // through the type held by its `type` attribute.
        exact(
            "fake-quant-is-dequantize-of-quantize",
            "(qnn.fake_quant ?a ?t ?x)",
            "(qnn.dequantize {} ?t (qnn.quantize {} (tensor-of ?t (attr-type ?a type)) ?x))",
        ),
        exact("observe-is-identity", "(qnn.observe ?a ?t ?x)", "?x"),
        exact("cast-hint-is-identity", "(qnn.cast_hint ?a ?t ?x)", "?x"),
        exact("requantize-to-own-type", "(qnn.requantize ?a ?t ?q)", "?q").when("(same-type ?q ?t)"),
        // §10: a stored value survives the round trip through its own type.
        exact("quantize-of-dequantize-to-own-type", "(qnn.quantize ?a ?t (qnn.dequantize ?b ?u ?q))", "?q")
            .when("(same-type ?q ?t)"),
        // Negative reals quantize to the zero point, which is the storage
        // minimum: the clamp does what the relu did.
        exact("quantize-applies-relu", "(qnn.quantize ?a ?t (fp.relu ?b ?u ?y))", "(qnn.quantize ?a ?t ?y)")
            .when("(zero-point-at-min ?t)"),
        // Reals above the clip's top quantize to the storage maximum anyway.
        exact(
            "quantize-applies-clip-top",
            "(qnn.quantize ?a ?t (fp.clip ?b ?u ?y))",
            "(qnn.quantize ?a ?t (fp.relu {} ?u ?y))",
        )
        .when("(clip-saturates ?b ?t)"),
        // §9: relu on stored values is max(q, zero point).
        exact(
            "relu-commutes-with-quantize",
            "(qnn.quantize ?a ?t (fp.relu ?b ?u ?y))",
            "(fp.relu ?b ?t (qnn.quantize ?a ?t ?y))",
        ),
        requantization(
            "requantize-is-quantized-dequantize",
            "(qnn.requantize ?a ?t ?q)",
            "(qnn.quantize {} ?t (qnn.dequantize {} (expressed ?q) ?q))",
        ),
        // Quantizing through a type at least as fine that holds every real of
        // the last rounds where quantizing once would.
        requantization(
            "requantize-of-quantize-through-a-covering-type",
            "(qnn.requantize ?a ?t (qnn.quantize ?b ?u ?y))",
            "(qnn.quantize ?b ?t ?y)",
        )
        .when("(covers ?u ?t)"),
        // Through a type at least as fine that holds every real of the last,
        // a chain of requantizes rounds where one would.
        requantization(
            "requantize-chain",
            "(qnn.requantize ?a ?t (qnn.requantize ?b ?u ?q))",
            "(qnn.requantize ?a ?t ?q)",
        )
        .when("(covers ?u ?t)"),
        // §6: acc = wrap32(Σ (x − zp_x)(w − zp_w) + b[c]) with b[c] = 0 is the
        // accumulator without a bias, bit for bit. (Not so in `fp`: a float
        // sum of −0.0 plus 0.0 is +0.0.)
        zero_bias_adds_nothing("conv2d-with-zero-bias-is-without-bias", op_names::CONV2D),
        zero_bias_adds_nothing("conv2d-relu-with-zero-bias-is-without-bias", op_names::CONV2D_RELU),
        zero_bias_adds_nothing("dense-with-zero-bias-is-without-bias", op_names::DENSE),
        zero_bias_adds_nothing("dense-relu-with-zero-bias-is-without-bias", op_names::DENSE_RELU),
        zero_bias_adds_nothing("conv-transpose2d-with-zero-bias-is-without-bias", op_names::CONV_TRANSPOSE2D),
        zero_bias_adds_nothing(
            "conv-transpose2d-relu-with-zero-bias-is-without-bias",
            op_names::CONV_TRANSPOSE2D_RELU,
        ),
    ];
    for (qnn, fp, relu) in [("qnn.conv2d", "fp.conv2d", false), ("qnn.conv2d_relu", "fp.conv2d", true)]
        .into_iter()
        .chain([("qnn.dense", "fp.dense", false), ("qnn.dense_relu", "fp.dense", true)])
        .chain([
            ("qnn.conv_transpose2d", "fp.conv_transpose2d", false),
            ("qnn.conv_transpose2d_relu", "fp.conv_transpose2d", true),
        ])
    {
        for bias in [true, false] {
            if relu {
                rules.push(weighted_definition(qnn, fp, bias, Activation::Relu));
                rules.push(weighted_definition(qnn, fp, bias, Activation::ClipToReluMax));
            } else {
                rules.push(weighted_definition(qnn, fp, bias, Activation::None));
            }
        }
    }
    // §7.6: the slope is a float operand the float op reads as it is.
    rules.push(EquivRule::new(
        Relation::Requantization,
        "prelu-is-quantized-prelu",
        "(qnn.prelu ?a ?t ?x ?s)".to_string(),
        format!("(qnn.quantize {{}} ?t (fp.prelu {{}} (expressed ?t) {} ?s))", dequantized("?x")),
    ));
    for (qnn, fp, operands) in [
        ("qnn.add", "fp.add", 2),
        ("qnn.sub", "fp.sub", 2),
        ("qnn.mul", "fp.mul", 2),
        ("qnn.avg_pool2d", "fp.avg_pool2d", 1),
        ("qnn.global_avg_pool2d", "fp.global_avg_pool2d", 1),
    ] {
        rules.push(activation_definition(qnn, fp, operands));
    }
    for operands in 1..=MAX_CONCAT_OPERANDS {
        rules.push(activation_definition("qnn.concat", "fp.concat", operands));
    }
    for def in FpDialect.ops() {
        if def.has(Traits::QUANT_AGNOSTIC) {
            dequantize_commutes(&def, &mut rules);
        }
        bias_rounding(&def, &mut rules);
        if def.interfaces.get::<LookupActivation>().is_some() {
            lookup_definitions(&def, &mut rules);
        }
    }
    rules
}

/// `op(x, w, b) = op(x, w)` for an integer layer `op` whose bias `b` is zero.
fn zero_bias_adds_nothing(name: &'static str, op: &str) -> EquivRule {
    EquivRule::new(Relation::Exact, name, format!("({op} ?a ?t ?x ?w ?b)"), format!("({op} ?a ?t ?x ?w)"))
        .when("(is-splat ?b 0.0)")
}
