//! The identities of the `qnn` dialect for the equivalence checker
//! (`qopt --verify-equiv`, `docs/verification.md`): the definitions of its
//! identity-like ops and of `qnn.fake_quant`, and that a zero bias adds
//! nothing, one line each.

use crate::op_names;
use qopt_ir_core::equivalence::{EquivRule, Relation};

/// The rules (see the module docs).
pub fn rules() -> Vec<EquivRule> {
    let exact = |name, lhs, rhs| EquivRule::new(Relation::Exact, name, lhs, rhs);
    vec![
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
        // §6: acc = wrap32(Σ (x − zp_x)(w − zp_w) + b[c]) with b[c] = 0 is the
        // accumulator without a bias, bit for bit. (Not so in `fp`: a float
        // sum of −0.0 plus 0.0 is +0.0.)
        zero_bias_adds_nothing("conv2d-with-zero-bias-is-without-bias", op_names::CONV2D),
        zero_bias_adds_nothing("conv2d-relu-with-zero-bias-is-without-bias", op_names::CONV2D_RELU),
        zero_bias_adds_nothing("dense-with-zero-bias-is-without-bias", op_names::DENSE),
        zero_bias_adds_nothing("dense-relu-with-zero-bias-is-without-bias", op_names::DENSE_RELU),
    ]
}

/// `op(x, w, b) = op(x, w)` for an integer layer `op` whose bias `b` is zero.
fn zero_bias_adds_nothing(name: &'static str, op: &str) -> EquivRule {
    EquivRule::new(Relation::Exact, name, format!("({op} ?a ?t ?x ?w ?b)"), format!("({op} ?a ?t ?x ?w)"))
        .when("(is-splat ?b 0.0)")
}
