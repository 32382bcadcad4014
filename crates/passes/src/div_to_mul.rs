//! `div-to-mul`: turns a division by a constant into a multiplication by its
//! reciprocal, `fp.div(x, c)` → `fp.mul(x, 1/c)`, so that the quantizer sees
//! a product, which `fuse` turns into an exact `qnn.mul`, instead of a
//! division that stays a float island between quantized values (a detector's
//! box decoding halves a sum, a normalization divides by a constant scale).
//!
//! The reciprocal is a new `fp.constant` of `c`'s shape and element type,
//! computed in f64 and rounded once; the product takes the division's
//! location. Only a constant divisor of the result's float element type
//! whose elements are all finite and nonzero is rewritten (a zero or
//! infinite divisor, or NaN, keeps the division: its reciprocal would not
//! mean the same). Statistic: `divisions`.
//!
//! Numerics: `x · (1/c)` rounds twice where `x / c` rounds once, so results
//! agree over the reals, not bit for bit (exactly for a power-of-two `c`);
//! egg proves it per run with `--verify-equiv` (`div-by-channel-constant`,
//! `mul-by-channel-constant`).
//!
//! ```text
//! %two = fp.constant() {value = dense<2.0> : tensor<f32>} : () -> tensor<f32>
//! %y = fp.div(%x, %two) : (tensor<1x2x84xf32>, tensor<f32>) -> tensor<1x2x84xf32> loc("/div_0/Div")
//! // -> %half = fp.constant() {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
//! //    %y = fp.mul(%x, %half) : (tensor<1x2x84xf32>, tensor<f32>) -> tensor<1x2x84xf32> loc("/div_0/Div")
//! ```

use crate::each_op::rewrite_each;
use qopt_dialect_fp::constants::{dense, replace_with_op_on_constant};
use qopt_dialect_fp::op_names as fp_op;
use qopt_ir_core::pass::PassOptions;
use qopt_ir_core::{
    constant_value, dense_values_f64, AttrData, Context, Module, OpId, Pass, PassContext, PassInfo,
    PassOutcome, PassResult, TypeData,
};

/// The `div-to-mul` pass; see the module docs.
pub struct DivToMul;

// x · (1/c) rounds the reciprocal, then the product.
const INFO: PassInfo = PassInfo::real_rewrite(
    "div-to-mul",
    "turns divisions by a constant into multiplications by its reciprocal",
    "Rewrites `fp.div(x, c)` with a constant `c` whose elements are finite and nonzero into \
     `fp.mul(x, 1/c)` (a new constant of `c`'s shape, computed in f64 and rounded once), so that the \
     quantizer makes it an exact `qnn.mul` instead of leaving a float division between quantized values. \
     Statistic: `divisions`.\n\n\
     ```\n\
     %y = fp.div(%x, %two) : (tensor<1x2x84xf32>, tensor<f32>) -> tensor<1x2x84xf32>\n\
     // -> %y = fp.mul(%x, %half) : (tensor<1x2x84xf32>, tensor<f32>) -> tensor<1x2x84xf32>\n\
     ```",
);

impl Pass for DivToMul {
    fn info(&self) -> &'static PassInfo {
        &INFO
    }

    fn run(&self, cx: &mut PassContext<'_>, module: &mut Module, _options: &PassOptions) -> PassResult {
        let divisions = rewrite_each(cx.ctx, module, fp_op::DIV, mul_by_reciprocal);
        cx.add_stat("divisions", divisions);
        Ok(PassOutcome::from_changed(divisions > 0))
    }
}

/// Rewrites `fp.div(x, c)` into `fp.mul(x, 1/c)`; `None` (nothing changed)
/// when the divisor is not a constant of finite, nonzero floats.
fn mul_by_reciprocal(ctx: &mut Context, module: &mut Module, op: OpId) -> Option<()> {
    let (x, c) = (module.operand(op, 0), module.operand(op, 1));
    let AttrData::Dense(divisor) = ctx.attr_data(constant_value(ctx, module, c)?).clone() else {
        return None;
    };
    let elem = ctx.element_type(divisor.ty);
    let result_ty = module.value_type(module.result(op, 0));
    if !matches!(ctx.type_data(elem), TypeData::Float(_)) || ctx.element_type(result_ty) != elem {
        return None;
    }
    let values = dense_values_f64(ctx, &divisor, elem)?;
    if values.iter().any(|v| !v.is_finite() || *v == 0.0) {
        return None;
    }
    let reciprocals: Vec<f64> = values.iter().map(|v| 1.0 / v).collect();
    let reciprocal = dense(ctx, divisor.ty, &reciprocals).ok()?;
    replace_with_op_on_constant(ctx, module, op, (fp_op::MUL, x), (reciprocal, c))
}
