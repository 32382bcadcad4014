//! [`AccelTarget`]: the toy accelerator as a target of qopt's
//! `partition{target=accel}`, registered in the context's
//! [`qopt_passes::BackendTargets`] by [`crate::register_extensions`].
//!
//! What it declares it runs is its one engine, judged by the same contract
//! as everything else in this crate ([`crate::check_conv`]):
//!
//! - `qnn.conv2d_relu` that the contract accepts as it is (a quantized
//!   model, as `accel-lower` takes it);
//! - `fp.conv2d` whose only user is an `fp.relu`, when its shapes and
//!   parameters fit the contract with float elements
//!   ([`crate::Elements::Float`]: the vendor's quantizer, `accel-quantize`,
//!   gives it the engine's i8 types and rounding), and that `fp.relu`. The
//!   engine always applies the relu, so a conv without one stays on the host.
//!
//! No other op, not even cheap elementwise ones: the accelerator has no
//! engine for them, and a region of only convolutions + relus is what
//! `accel-quantize` knows how to quantize.

use crate::accel_lower::check_conv_attrs;
use crate::ops::conv::Elements;
use qopt_dialect_fp::op_names as fp_op;
use qopt_dialect_qnn::op_names as qnn_op;
use qopt_ir_core::{Context, Module, OpId};
use qopt_passes::BackendSupport;

/// The name `partition{target=...}` knows the accelerator by, and the
/// prefix of its region functions (`@accel_0`, ...).
pub const ACCEL_TARGET: &str = "accel";

/// The `accel` partitioning target; see the module docs.
#[derive(Copy, Clone, Debug, Default)]
pub struct AccelTarget;

impl BackendSupport for AccelTarget {
    fn name(&self) -> &'static str {
        ACCEL_TARGET
    }

    fn summary(&self) -> &'static str {
        "the toy accelerator's conv + relu engine: qnn.conv2d_relu it takes, and fp.conv2d + fp.relu it will take once quantized"
    }

    fn supports(&self, ctx: &Context, module: &Module, op: OpId) -> bool {
        match ctx.op_name_str(module.op_name(op)) {
            qnn_op::CONV2D_RELU => conv_fits(ctx, module, op, Elements::Quantized),
            fp_op::CONV2D => engine_relu(ctx, module, op).is_some(),
            fp_op::RELU => {
                let producer = module.defining_op(module.operand(op, 0));
                producer.is_some()
                    && ctx.op_name_str(module.op_name(producer)) == fp_op::CONV2D
                    && engine_relu(ctx, module, producer) == Some(op)
            }
            _ => false,
        }
    }
}

/// The `fp.relu` that makes the float convolution `conv` an engine op: the
/// conv's only user, with the conv fitting the contract.
pub(crate) fn engine_relu(ctx: &Context, module: &Module, conv: OpId) -> Option<OpId> {
    let result = module.result(conv, 0);
    let mut uses = module.uses(result);
    let relu = uses.next()?.op;
    if uses.next().is_some() || ctx.op_name_str(module.op_name(relu)) != fp_op::RELU {
        return None;
    }
    conv_fits(ctx, module, conv, Elements::Float).then_some(relu)
}

/// Whether the convolution `op` fits the engine's contract with `elements`.
fn conv_fits(ctx: &Context, module: &Module, op: OpId, elements: Elements) -> bool {
    if module.num_operands(op) < 2 {
        return false;
    }
    let operand = |i: usize| module.value_type(module.operand(op, i));
    let bias = (module.num_operands(op) > 2).then(|| operand(2));
    let result = module.value_type(module.result(op, 0));
    check_conv_attrs(ctx, module.op_attrs(op), operand(0), operand(1), bias, result, elements).is_ok()
}
