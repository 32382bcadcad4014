//! The identities of the `qnn` dialect for the equivalence checker
//! (`qopt --verify-equiv`, `docs/verification.md`): the definitions of its
//! identity-like ops and of `qnn.fake_quant`, one line each.

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
    ]
}
