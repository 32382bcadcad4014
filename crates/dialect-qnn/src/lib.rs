//! The `qnn` dialect: quantized tensors and the ops that make, convert and
//! compute on them, with integer semantics written down exactly in
//! `docs/quant-semantics.md`.
//!
//! - Types: `!qnn.uniform<...>` is ir-core type data; this dialect adds its
//!   semantic checks ([`QnnDialect::verify_type`]: expressed type f32/f16/bf16,
//!   every scale finite, positive and a normal f32).
//! - Ops (one module per family under `ops/`): `quantize`, `dequantize`,
//!   `requantize`, `fake_quant`, `cast_hint`, `stop_fusion`; `observe`;
//!   `conv2d`, `conv2d_relu`, `conv_transpose2d`, `conv_transpose2d_relu`, `dense`, `dense_relu`, `add`, `mul`, `concat`;
//!   `avg_pool2d`, `global_avg_pool2d`; `lookup`.
//!   Each op's description is its reference, with a `.qir` example.
//! - [`fixed_point`]: the arithmetic of the semantics page (quantize,
//!   dequantize, fixed-point multipliers, the rounding shift), which the
//!   interpreter and the backends match bit for bit.
//! - [`quant_params`]: reading parameters out of types and deriving each op's
//!   multipliers in the one f64 operation order the page fixes.
//!
//! Register with [`register`]. Invariants: verifiers, inference and folders
//! never panic on IR content; folders apply only rules the semantics page
//! proves exact.

#![warn(missing_docs)]

pub mod equivalence;
pub mod fixed_point;
mod ops;

/// The name of every `qnn` op as a constant (`op_names::CONV2D`), one
/// group per op family, so code outside the dialect never spells an op name.
pub mod op_names {
    pub use crate::ops::compute::names::*;
    pub use crate::ops::convert::names::*;
    pub use crate::ops::lookup::names::*;
    pub use crate::ops::observe::names::*;
    pub use crate::ops::pool::names::*;
}
/// A context with the `fp` and `qnn` dialects registered: what a quantized
/// model needs.
pub fn context() -> qopt_ir_core::Context {
    let mut ctx = qopt_ir_core::Context::new();
    // invariant: a fresh context has neither dialect, and their names differ.
    let _ = qopt_dialect_fp::register(&mut ctx);
    let _ = register(&mut ctx);
    ctx
}

/// Names of the discardable `qnn.` attributes passes put on ops of any dialect.
pub mod attr_names {
    /// The unit attribute that keeps an op float through every quantization
    /// pass: `insert-observers` puts it on the ops its `skip` and `ops`
    /// options leave out (and on the relu or clip that would fuse into one),
    /// and a person may write it. No pass observes, fake-quantizes the weights
    /// of, propagates parameters through or fuses such an op; `quant-lint`
    /// reports it as skipped by the user.
    pub const SKIP: &str = "qnn.skip";
}
pub mod quant_params;

pub use fixed_point::Rounding;
pub use ops::lookup::MAX_LOOKUP_BITS;
pub use ops::observe::BUILTIN_OBSERVERS;
pub use ops::{relu_max_of, rounding_of};

use qopt_ir_core::{Context, Dialect, OpDef, Type, TypeData};

/// The `qnn` dialect; see the crate docs.
#[derive(Copy, Clone, Debug, Default)]
pub struct QnnDialect;

impl Dialect for QnnDialect {
    fn name(&self) -> &'static str {
        "qnn"
    }
    fn summary(&self) -> &'static str {
        "quantized types and ops: quantize, requantize, observers, integer conv/dense/add/mul/concat"
    }
    fn ops(&self) -> Vec<OpDef> {
        ops::all()
    }
    fn equivalence_rules(&self) -> Vec<qopt_ir_core::equivalence::EquivRule> {
        equivalence::rules()
    }
    /// Quantized types get the semantic checks of `docs/quant-semantics.md` §2
    /// (ir-core already checked their structure). `!qnn.<other>` opaque types
    /// do not exist.
    fn verify_type(&self, ctx: &Context, ty: Type) -> Result<(), String> {
        match ctx.type_data(ty) {
            TypeData::Quant(q) => quant_params::check_semantics(q),
            TypeData::Opaque { name, .. } => {
                Err(format!("!{name} is not a type of the qnn dialect (it defines only !qnn.uniform<...>)"))
            }
            _ => Ok(()),
        }
    }
}

/// Registers the `qnn` dialect in `ctx`.
pub fn register(ctx: &mut Context) -> Result<(), String> {
    ctx.register_dialect(QnnDialect)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registers_every_op_once() {
        let mut ctx = Context::new();
        register(&mut ctx).unwrap();
        assert!(register(&mut ctx).is_err());
        let names: Vec<&str> = QnnDialect.ops().iter().map(|d| d.name).collect();
        for name in [
            "qnn.quantize",
            "qnn.dequantize",
            "qnn.requantize",
            "qnn.fake_quant",
            "qnn.cast_hint",
            "qnn.stop_fusion",
            "qnn.observe",
            "qnn.conv2d",
            "qnn.conv2d_relu",
            "qnn.conv_transpose2d",
            "qnn.conv_transpose2d_relu",
            "qnn.dense",
            "qnn.dense_relu",
            "qnn.add",
            "qnn.mul",
            "qnn.concat",
            "qnn.avg_pool2d",
            "qnn.global_avg_pool2d",
            "qnn.lookup",
        ] {
            assert!(names.contains(&name), "{name} is missing");
        }
        for def in QnnDialect.ops() {
            assert!(def.description.contains("```"), "{} has no .qir example", def.name);
            assert!(!def.summary.is_empty());
        }
    }
}
