//! The `fp` dialect: float tensor ops with ONNX semantics in NCHW layout
//! (conv, dense, matmul, batch norm, elementwise arithmetic and activations,
//! pooling, and shape ops), their verifiers, result-type inference, folders and
//! canonicalization patterns.
//!
//! Register with [`register`] (or `ctx.register_dialect(FpDialect)`). The op
//! reference is each op's description (`ops/*.rs`, one module per family).
//! [`attrs`] and [`shape`] are public because other dialects (`qnn`) read
//! attributes and infer shapes with the same rules.
//!
//! Invariants: all operands and the result of an op share one float element
//! type (f16, bf16, f32, f64) unless the op says otherwise; ops with the
//! `QuantAgnostic` trait also accept one quantized element type throughout.
//! Verifiers and inference never panic on IR content.

#![warn(missing_docs)]

pub mod attrs;
pub mod constants;
pub mod equivalence;
mod ops;

/// The name of every `fp` op as a constant (`op_names::CONV2D`), one
/// group per op family, so code outside the dialect never spells an op name.
pub mod op_names {
    pub use crate::ops::constant::names::*;
    pub use crate::ops::conv::names::*;
    pub use crate::ops::elementwise::names::*;
    pub use crate::ops::linear::names::*;
    pub use crate::ops::norm::names::*;
    pub use crate::ops::pool::names::*;
    pub use crate::ops::reduce::names::*;
    pub use crate::ops::shape::names::*;
}
pub mod shape;

/// Shape rules of the shape ops, shared with kernels that execute them.
pub use ops::conv::conv_transpose_shape;
pub use ops::elementwise::{hard_sigmoid_params, leaky_relu_alpha};
pub use ops::norm::{instance_norm_epsilon, layer_norm_params, BATCH_NORM_EPSILON, BATCH_NORM_PARAMETERS};
pub use ops::reduce::{reduce_axes, reduced_dims};
pub use ops::shape::{
    depth_space_params, reshape_chain, reshape_target, resize_keeps_dimension, resize_mode, resize_params,
    resize_scaled_size, slice_axes, slice_len, tile_repeats, transpose_perm, NearestMode, ResizeCoordinates,
    ResizeMode, ResizeParams, SliceAxis,
};

use qopt_ir_core::{
    Attribute, Context, Dialect, Location, Module, OpDef, OpId, RewritePattern, Rewriter, Traits, Type,
    ValueId,
};

/// The `fp` dialect; see the crate docs.
#[derive(Copy, Clone, Debug, Default)]
pub struct FpDialect;

impl Dialect for FpDialect {
    fn name(&self) -> &'static str {
        "fp"
    }
    fn summary(&self) -> &'static str {
        "float tensor ops with ONNX semantics (NCHW)"
    }
    fn ops(&self) -> Vec<OpDef> {
        ops::all()
    }
    fn materialize_constant(
        &self,
        rewriter: &mut Rewriter<'_>,
        value: Attribute,
        ty: Type,
        loc: Location,
    ) -> Option<ValueId> {
        ops::constant::materialize(rewriter, value, ty, loc)
    }
    fn canonicalization_patterns(&self) -> Vec<Box<dyn RewritePattern>> {
        ops::canonicalization_patterns()
    }
    fn equivalence_rules(&self) -> Vec<qopt_ir_core::equivalence::EquivRule> {
        equivalence::rules()
    }
}

/// The `QuantAgnostic` ops that are so for one value of a string attribute
/// only, which is also the attribute's default: `(op, attribute, value)`.
/// `fp.resize` in nearest mode moves values; linear and cubic interpolation
/// compute new ones. [`is_quant_agnostic`] and the equivalence rules that
/// commute these ops with dequantization both read this table.
pub const QUANT_AGNOSTIC_ONLY_WHEN: &[(&str, &str, &str)] = &[(op_names::RESIZE, "mode", "nearest")];

/// Whether `op` is quant-agnostic as it stands: its definition has the
/// `QuantAgnostic` trait and, for an op of [`QUANT_AGNOSTIC_ONLY_WHEN`], the
/// attribute has the value or is left out. Passes ask this, not the trait
/// alone.
pub fn is_quant_agnostic(ctx: &Context, module: &Module, op: OpId) -> bool {
    let Some(def) = ctx.op_def(module.op_name(op)) else { return false };
    if !def.has(Traits::QUANT_AGNOSTIC) {
        return false;
    }
    match QUANT_AGNOSTIC_ONLY_WHEN.iter().find(|(name, ..)| *name == def.name) {
        Some(&(_, attribute, value)) => {
            module.op_attr(ctx, op, attribute).is_none_or(|a| ctx.attr_as_str(a) == Some(value))
        }
        None => true,
    }
}

/// Registers the `fp` dialect in `ctx`.
pub fn register(ctx: &mut Context) -> Result<(), String> {
    ctx.register_dialect(FpDialect)
}

#[cfg(test)]
mod tests {
    use super::*;
    use qopt_ir_core::interfaces::QuantizableOp;
    use qopt_ir_core::{parse_module, verify};

    /// Splits `a, b<c, d>, e` at top-level commas.
    fn split_top(text: &str) -> Vec<String> {
        let (mut out, mut cur, mut depth) = (Vec::new(), String::new(), 0i32);
        for c in text.chars() {
            match c {
                '<' | '(' | '[' | '{' => depth += 1,
                '>' | ')' | ']' | '}' => depth -= 1,
                ',' if depth == 0 => {
                    out.push(std::mem::take(&mut cur).trim().to_string());
                    continue;
                }
                _ => {}
            }
            cur.push(c);
        }
        if !cur.trim().is_empty() {
            out.push(cur.trim().to_string());
        }
        out
    }

    /// Wraps one example op line in a function whose arguments are its operands.
    fn example_module(line: &str) -> String {
        let open = line.find('(').unwrap();
        let close = open + line[open..].find(')').unwrap();
        let names = split_top(&line[open + 1..close]);
        let sig = line.rfind(" : (").unwrap();
        let arrow = line.rfind(") -> ").unwrap();
        let types = split_top(&line[sig + 4..arrow]);
        assert_eq!(names.len(), types.len(), "operands and types of {line}");
        let mut args: Vec<String> = Vec::new();
        for (n, t) in names.iter().zip(&types) {
            let arg = format!("{n}: {t}");
            if !args.contains(&arg) {
                args.push(arg);
            }
        }
        format!(
            "module {{\n  func.func @example({}) {{\n    {line}\n    func.return\n  }}\n}}\n",
            args.join(", ")
        )
    }

    /// Every op documents itself with a `.qir` example, and every example verifies.
    #[test]
    fn description_examples_verify() {
        for def in FpDialect.ops() {
            assert!(!def.summary.is_empty(), "{} has no summary", def.name);
            let block = def
                .description
                .split("```\n")
                .nth(1)
                .unwrap_or_else(|| panic!("{} has no example", def.name));
            let lines: Vec<&str> = block.lines().filter(|l| l.contains(def.name)).collect();
            assert!(!lines.is_empty(), "{}'s example does not use it", def.name);
            for line in lines {
                let text = example_module(line.trim());
                let mut ctx = Context::new();
                register(&mut ctx).unwrap();
                let module = parse_module(&mut ctx, text.as_bytes(), "example.qir")
                    .unwrap_or_else(|d| panic!("{}: example does not parse:\n{d}\n{text}", def.name));
                verify(&mut ctx, &module)
                    .unwrap_or_else(|d| panic!("{}: example does not verify:\n{d}\n{text}", def.name));
            }
        }
    }

    #[test]
    fn traits_and_interfaces() {
        let ops = FpDialect.ops();
        let def = |name: &str| ops.iter().find(|d| d.name == name).unwrap();
        // Every op is listed once, under its family's name constant.
        let names: std::collections::BTreeSet<&str> = ops.iter().map(|d| d.name).collect();
        assert_eq!(names.len(), ops.len(), "an op is defined twice");
        for (name, channels) in [("fp.conv2d", 1), ("fp.conv1d", 1), ("fp.dense", -1)] {
            assert_eq!(
                def(name).interfaces.get::<QuantizableOp>(),
                Some(&QuantizableOp::weighted(0, 1, Some(2), 0).with_channel_axis(Some(channels)))
            );
        }
        for name in ["fp.matmul", "fp.batch_matmul", "fp.add", "fp.sub", "fp.mul", "fp.div"] {
            assert_eq!(
                def(name).interfaces.get::<QuantizableOp>(),
                Some(&QuantizableOp::activations(&[0, 1]))
            );
        }
        // The unary functions `fuse` tabulates: observed as activations, one operand.
        let lookup: Vec<&str> = ops
            .iter()
            .filter(|d| d.interfaces.get::<qopt_ir_core::interfaces::LookupActivation>().is_some())
            .map(|d| d.name)
            .collect();
        assert_eq!(
            lookup,
            [
                "fp.sigmoid",
                "fp.tanh",
                "fp.exp",
                "fp.erf",
                "fp.softplus",
                "fp.hard_swish",
                "fp.hard_sigmoid",
                "fp.leaky_relu",
                "fp.gelu"
            ]
        );
        for name in lookup {
            assert_eq!(def(name).interfaces.get::<QuantizableOp>(), Some(&QuantizableOp::activations(&[0])));
            assert_eq!(def(name).operands, qopt_ir_core::Arity::Exact(1));
            assert!(def(name).has(Traits::ELEMENTWISE | Traits::SAME_OPERANDS_AND_RESULT_TYPE));
        }
        let agnostic: Vec<&str> =
            ops.iter().filter(|d| d.has(Traits::QUANT_AGNOSTIC)).map(|d| d.name).collect();
        assert_eq!(
            agnostic,
            [
                "fp.relu",
                "fp.max_pool2d",
                "fp.max_pool1d",
                "fp.reshape",
                "fp.flatten",
                "fp.depth_to_space",
                "fp.space_to_depth",
                "fp.tile",
                "fp.resize",
                "fp.gather",
                "fp.transpose",
                "fp.concat",
                "fp.split",
                "fp.pad",
                "fp.strided_slice"
            ]
        );
        let commutative: Vec<&str> =
            ops.iter().filter(|d| d.has(Traits::COMMUTATIVE)).map(|d| d.name).collect();
        assert_eq!(commutative, ["fp.max", "fp.min", "fp.add", "fp.mul"]);
        assert!(def("fp.constant").has(Traits::CONSTANT_LIKE | Traits::PURE));
        assert!(ops.iter().all(|d| d.has(Traits::PURE)), "every fp op is pure");
        let names: Vec<String> =
            FpDialect.canonicalization_patterns().iter().map(|p| p.name().to_string()).collect();
        assert_eq!(names, ["relu-relu", "reshape-reshape"]);
    }

    #[test]
    fn resize_is_quant_agnostic_in_nearest_mode_only() {
        let mut ctx = Context::new();
        register(&mut ctx).unwrap();
        let resize = |attrs: &str| {
            format!(
                "fp.resize(%x) {{{attrs}scales = [1.0, 2.0], sizes = [2, 4]}} : (tensor<2x2xf32>) -> tensor<2x4xf32>"
            )
        };
        let text = format!(
            "module {{\n  func.func @f(%x: tensor<2x2xf32>) {{\n    %0 = {}\n    %1 = {}\n    %2 = {}\n    \
             %3 = fp.relu(%x) : (tensor<2x2xf32>) -> tensor<2x2xf32>\n    \
             %4 = fp.add(%x, %x) : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>\n    func.return\n  }}\n}}\n",
            resize(""),
            resize("mode = \"linear\", "),
            resize("mode = \"cubic\", "),
        );
        let module = parse_module(&mut ctx, text.as_bytes(), "t.qir").unwrap_or_else(|d| panic!("{d}"));
        verify(&mut ctx, &module).unwrap_or_else(|d| panic!("{d}"));
        let func = module.top_level_ops().next().unwrap();
        let body = module.first_block(module.region(func, 0));
        let agnostic: Vec<bool> =
            module.block_ops(body).map(|op| is_quant_agnostic(&ctx, &module, op)).collect();
        assert_eq!(agnostic, [true, false, false, true, false, false]);
    }

    #[test]
    fn registers_once() {
        let mut ctx = Context::new();
        register(&mut ctx).unwrap();
        assert_eq!(register(&mut ctx).unwrap_err(), "dialect 'fp' is already registered");
    }
}
