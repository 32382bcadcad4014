//! The identities that define the `accel` ops for qopt's equivalence checker
//! (`toy-opt --verify-equiv`, qopt's `docs/verification.md`), so that
//! `accel-lower` is proven on every run the way qopt's own passes are:
//!
//! | rule | identity |
//! |---|---|
//! | `accel-dma-in-is-identity` | `accel.dma_in(x) = x` |
//! | `accel-dma-out-is-identity` | `accel.dma_out(x) = x` |
//! | `accel-conv2d-relu-KxK-stride-S-is-qnn` | `accel.conv2d_relu(x, w, b) {stride = [S, S]}` with a K×K weight `= qnn.conv2d_relu(x, w, b)` with the parameters the engine implies |
//!
//! The conv rules are generated from the contract itself
//! ([`KERNEL_SIZES`], [`STRIDES`], [`implied_pad`], [`ConvParams::implied`]),
//! one per kernel size and stride the engine takes: the same values the
//! verifier checks and the interpreter kernel runs, so the rules cannot state
//! another convolution than the engine's. The kernel size is read off the
//! weight's type by the checker's `dim-is` condition. An `accel.conv2d_relu`
//! with any other attribute matches no rule and stays unproven.
//!
//! A missing bias, which `accel-lower` supplies as zeros, is the `qnn`
//! dialect's own identity (`conv2d-relu-with-zero-bias-is-without-bias`).
//! Every rule here is `exact`: the engine adds nothing to the arithmetic.

use crate::ops::conv::{implied_pad, ConvParams, KERNEL_SIZES, STRIDES};
use qopt_dialect_qnn::op_names as qnn_op;
use qopt_ir_core::equivalence::{EquivRule, Relation};

/// `[a, b, ...]`, as an attribute prints.
fn int_list(values: &[i64]) -> String {
    let items: Vec<String> = values.iter().map(i64::to_string).collect();
    format!("[{}]", items.join(", "))
}

/// The rules (see the module docs).
pub(crate) fn rules() -> Vec<EquivRule> {
    let mut rules = vec![
        EquivRule::new(Relation::Exact, "accel-dma-in-is-identity", "(accel.dma_in ?a ?t ?x)", "?x")
            .when("(same-type ?x ?t)"),
        EquivRule::new(Relation::Exact, "accel-dma-out-is-identity", "(accel.dma_out ?a ?t ?x)", "?x")
            .when("(same-type ?x ?t)"),
    ];
    for kernel in KERNEL_SIZES {
        for stride in STRIDES {
            let strides = [stride, stride];
            let params = ConvParams::implied(&strides);
            let qnn_attrs = format!(
                "{{stride = {}, pad = {}, dilation = {}, groups = {}, rounding = \"{}\"}}",
                int_list(&strides),
                int_list(&[implied_pad(kernel); 4]),
                int_list(params.dilation),
                params.groups,
                params.rounding.name(),
            );
            rules.push(
                EquivRule::new(
                    Relation::Exact,
                    format!("accel-conv2d-relu-{kernel}x{kernel}-stride-{stride}-is-qnn"),
                    format!("(accel.conv2d_relu {{stride = {}}} ?t ?x ?w ?b)", int_list(&strides)),
                    format!("({} {qnn_attrs} ?t ?x ?w ?b)", qnn_op::CONV2D_RELU),
                )
                .when(format!("(dim-is ?w 2 {kernel}) (dim-is ?w 3 {kernel})")),
            );
        }
    }
    rules
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every rule compiles beside qopt's own, and no name is taken twice.
    #[test]
    fn the_rules_compile_beside_qopts() {
        let mut ctx = qopt_ir_core::Context::new();
        crate::register_dialects(&mut ctx).unwrap();
        let registered = qopt_equiv::registered_rules(&ctx);
        assert_eq!(registered.iter().filter(|(dialect, _)| dialect == "accel").count(), rules().len());
        let mut names: Vec<&str> = registered.iter().map(|(_, r)| r.name.as_ref()).collect();
        names.sort_unstable();
        let all = names.len();
        names.dedup();
        assert_eq!(names.len(), all, "rule names are unique");
        qopt_equiv::rules::compile(&mut ctx, &registered, Relation::Requantization).unwrap();
    }

    #[test]
    fn one_conv_rule_per_kernel_size_and_stride() {
        let rules = rules();
        assert_eq!(rules.len(), 2 + KERNEL_SIZES.len() * STRIDES.len());
        let same = rules.iter().find(|r| r.name == "accel-conv2d-relu-3x3-stride-2-is-qnn").unwrap();
        assert_eq!(same.lhs, "(accel.conv2d_relu {stride = [2, 2]} ?t ?x ?w ?b)");
        assert_eq!(
            same.rhs,
            "(qnn.conv2d_relu {stride = [2, 2], pad = [1, 1, 1, 1], dilation = [1, 1], groups = 1, \
             rounding = \"half_away_from_zero\"} ?t ?x ?w ?b)"
        );
        assert_eq!(same.when, "(dim-is ?w 2 3) (dim-is ?w 3 3)");
        let pointwise = rules.iter().find(|r| r.name == "accel-conv2d-relu-1x1-stride-1-is-qnn").unwrap();
        assert!(pointwise.rhs.contains("pad = [0, 0, 0, 0]"), "{}", pointwise.rhs);
    }
}
