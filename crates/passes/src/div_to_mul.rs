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

use qopt_dialect_fp::constants::{create_constant, dense, erase_if_unused_constant};
use qopt_dialect_fp::op_names as fp_op;
use qopt_ir_core::equivalence::Relation;
use qopt_ir_core::pass::PassOptions;
use qopt_ir_core::{
    constant_value, dense_values_f64, AttrData, Attribute, Context, InsertPoint, Module, OpId, Pass,
    PassContext, PassInfo, PassOutcome, PassResult, Rewriter, TypeData,
};

/// The `div-to-mul` pass; see the module docs.
pub struct DivToMul;

const INFO: PassInfo = PassInfo {
    name: "div-to-mul",
    summary: "turns divisions by a constant into multiplications by its reciprocal",
    preserves_semantics: true,
    // x · (1/c) rounds the reciprocal, then the product.
    equivalence: Some(Relation::Real),
    description: "Rewrites `fp.div(x, c)` with a constant `c` whose elements are finite and nonzero into \
     `fp.mul(x, 1/c)` (a new constant of `c`'s shape, computed in f64 and rounded once), so that the \
     quantizer makes it an exact `qnn.mul` instead of leaving a float division between quantized values. \
     Statistic: `divisions`.\n\n\
     ```\n\
     %y = fp.div(%x, %two) : (tensor<1x2x84xf32>, tensor<f32>) -> tensor<1x2x84xf32>\n\
     // -> %y = fp.mul(%x, %half) : (tensor<1x2x84xf32>, tensor<f32>) -> tensor<1x2x84xf32>\n\
     ```",
};

impl Pass for DivToMul {
    fn info(&self) -> &'static PassInfo {
        &INFO
    }

    fn run(&self, cx: &mut PassContext<'_>, module: &mut Module, _options: &PassOptions) -> PassResult {
        let div = cx.ctx.op_name(fp_op::DIV);
        let mut divisions = 0u64;
        for op in module.ops_where(|op| module.op_name(op) == div) {
            divisions += u64::from(mul_by_reciprocal(cx.ctx, module, op).is_some());
        }
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
    let (loc, divisor_loc) = (module.op_loc(op), module.op_loc(module.defining_op(c)));
    let mut rewriter = Rewriter::new(ctx, module);
    rewriter.set_insertion_point(InsertPoint::Before(op));
    rewriter.set_loc(divisor_loc);
    let reciprocal = create_constant(&mut rewriter, reciprocal).ok()?;
    rewriter.set_loc(loc);
    let mul = rewriter.create_inferred(fp_op::MUL, &[x, reciprocal], Attribute::EMPTY_DICT).ok()?;
    let y = rewriter.module.result(mul, 0);
    if rewriter.module.value_type(y) != result_ty {
        let _ = rewriter.module.erase_op(mul);
        erase_if_unused_constant(ctx, module, reciprocal);
        return None;
    }
    rewriter.replace_op(op, &[y]).ok()?;
    erase_if_unused_constant(ctx, module, c);
    Some(())
}
