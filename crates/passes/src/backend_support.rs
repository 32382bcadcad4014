//! What a backend runs: the [`BackendSupport`] predicate that
//! `partition{target=NAME}` asks of every op, and [`BackendTargets`], the
//! registry of targets by name, kept as an extension of the [`Context`].
//!
//! A downstream crate registers its backend in the same setup closure that
//! registers its dialect, exactly as it adds a range method or a fusion
//! pattern, so the stateless `partition` pass finds it through the context it
//! runs with:
//!
//! ```
//! # use qopt_ir_core::{Context, Module, OpId};
//! # use qopt_passes::{BackendSupport, BackendTargets};
//! # use std::sync::Arc;
//! struct ReluOnly;
//! impl BackendSupport for ReluOnly {
//!     fn name(&self) -> &'static str { "relu_only" }
//!     fn summary(&self) -> &'static str { "runs fp.relu and nothing else" }
//!     fn supports(&self, ctx: &Context, module: &Module, op: OpId) -> bool {
//!         ctx.op_name_str(module.op_name(op)) == "fp.relu"
//!     }
//! }
//! let mut ctx = Context::new();
//! BackendTargets::install(&mut ctx).add(Arc::new(ReluOnly)).unwrap();
//! assert!(BackendTargets::of(&ctx).get("relu_only").is_some());
//! ```
//!
//! The predicate answers for one op at a time and only says whether the
//! backend can run it; `partition` decides the regions (connectivity, no
//! cycles, `qnn.stop_fusion` and `qnn.cast_hint` boundaries) and never asks
//! about constants, `func.*` ops or ops with regions.
//!
//! Built in: [`QNN_TARGET`] (`qnn`), an integer-only backend that runs every
//! `qnn` op computing on stored integers and the quant-agnostic ops (max
//! pools, shape ops, relu) whose operands and results are all quantized.
//! It is what qopt's own tests partition for, and the shape of a backend that
//! takes a quantized model as qopt's `fuse` leaves it.

use qopt_dialect_qnn::op_names as qnn_op;
use qopt_dialect_qnn::quant_params::quant_element;
use qopt_ir_core::pass::pipeline::nearest_name;
use qopt_ir_core::{Context, Module, OpId};
use std::sync::{Arc, OnceLock};

/// What one backend runs; see the module docs.
pub trait BackendSupport: Send + Sync {
    /// The name `partition{target=...}` selects it by, and the prefix of the
    /// functions partitioning outlines (`@NAME_0`, `@NAME_1`, ...): ASCII
    /// letters, digits and `_`.
    fn name(&self) -> &'static str;
    /// One line for the docs and error messages.
    fn summary(&self) -> &'static str;
    /// Whether the backend runs `op`, an op of a function body that is not a
    /// constant, not a `func.*` op and has no regions.
    fn supports(&self, ctx: &Context, module: &Module, op: OpId) -> bool;
}

/// The backend targets `partition` knows, kept as an extension of the [`Context`].
pub struct BackendTargets {
    targets: Vec<Arc<dyn BackendSupport>>,
}

impl Default for BackendTargets {
    /// The built-in targets.
    fn default() -> BackendTargets {
        BackendTargets { targets: vec![Arc::new(QnnIntegerTarget)] }
    }
}

impl BackendTargets {
    /// The targets installed in `ctx`, or the built-in ones.
    pub fn of(ctx: &Context) -> &BackendTargets {
        static BUILTIN: OnceLock<BackendTargets> = OnceLock::new();
        ctx.extension::<BackendTargets>().unwrap_or_else(|| BUILTIN.get_or_init(BackendTargets::default))
    }

    /// The targets of `ctx` for adding to, installing the built-in ones first if needed.
    pub fn install(ctx: &mut Context) -> &mut BackendTargets {
        ctx.extension_mut::<BackendTargets>()
    }

    /// Adds a target; fails if the name is taken or is not a valid symbol prefix.
    pub fn add(&mut self, target: Arc<dyn BackendSupport>) -> Result<(), String> {
        let name = target.name();
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!("backend target name '{name}' must be ASCII letters, digits and '_'"));
        }
        if self.get(name).is_some() {
            return Err(format!("a backend target named '{name}' is already registered"));
        }
        self.targets.push(target);
        Ok(())
    }

    /// The target named `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn BackendSupport>> {
        self.targets.iter().find(|t| t.name() == name)
    }

    /// The target named `name`, or an error that lists every registered
    /// target and suggests the nearest name.
    pub fn find(&self, name: &str) -> Result<&Arc<dyn BackendSupport>, String> {
        self.get(name).ok_or_else(|| {
            let known: Vec<&str> = self.targets.iter().map(|t| t.name()).collect();
            let hint = match nearest_name(name, known.iter().copied()) {
                Some(near) => format!("; did you mean '{near}'?"),
                None => String::new(),
            };
            format!("unknown backend target '{name}' (registered: {}){hint}", known.join(", "))
        })
    }

    /// Every target, in the order added.
    pub fn all(&self) -> &[Arc<dyn BackendSupport>] {
        &self.targets
    }
}

/// The name of the built-in integer-only target.
pub const QNN_TARGET: &str = "qnn";

/// The `qnn` ops that compute on stored integers (not the conversions
/// between float and quantized values, the observers or the annotations).
const INTEGER_QNN_OPS: [&str; 15] = [
    qnn_op::CONV2D,
    qnn_op::CONV2D_RELU,
    qnn_op::CONV_TRANSPOSE2D,
    qnn_op::CONV_TRANSPOSE2D_RELU,
    qnn_op::DENSE,
    qnn_op::DENSE_RELU,
    qnn_op::ADD,
    qnn_op::SUB,
    qnn_op::MUL,
    qnn_op::CONCAT,
    qnn_op::PRELU,
    qnn_op::AVG_POOL2D,
    qnn_op::GLOBAL_AVG_POOL2D,
    qnn_op::LOOKUP,
    qnn_op::REQUANTIZE,
];

/// `qnn`: every `qnn` op that computes on stored integers, and every
/// quant-agnostic op whose operands and results are all quantized; see the
/// module docs.
pub struct QnnIntegerTarget;

impl BackendSupport for QnnIntegerTarget {
    fn name(&self) -> &'static str {
        QNN_TARGET
    }

    fn summary(&self) -> &'static str {
        "integer-only: qnn compute ops (conv2d, conv_transpose2d, dense, add, mul, concat, pools, lookup, requantize) and \
         quant-agnostic ops on quantized values"
    }

    fn supports(&self, ctx: &Context, module: &Module, op: OpId) -> bool {
        let name = ctx.op_name_str(module.op_name(op));
        if INTEGER_QNN_OPS.contains(&name) {
            return true;
        }
        let quantized = |v| quant_element(ctx, module.value_type(v)).is_some();
        qopt_dialect_fp::is_quant_agnostic(ctx, module, op)
            && module.num_operands(op) > 0
            && module.operands(op).all(quantized)
            && module.results(op).all(quantized)
    }
}
