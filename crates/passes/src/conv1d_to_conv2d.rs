//! `conv1d-to-conv2d`: states every 1-D convolution as the 2-D one over a
//! unit height, so that the quantizer, the integer ops and the x86 backend,
//! which know `fp.conv2d` and `fp.conv_transpose2d`, serve the 1-D layers of
//! speech and sequence models too (an `fp.conv1d` has no `qnn` counterpart
//! and would stay a float island between quantized values).
//!
//! `fp.conv1d(x, w[, b])` becomes `fp.reshape(fp.conv2d(fp.reshape(x), w',
//! b))`: the input N×C×L read as N×C×1×L, the weight a new constant of the
//! same values as O×(C/g)×1×K (or an `fp.reshape` of it when it is computed),
//! the attributes the 1-D ones with the height's entry first (`stride = [s]`
//! → `[1, s]`, `pad = [b, e]` → `[0, b, 0, e]`, `dilation = [d]` → `[1, d]`,
//! `groups` as it is; an attribute left out stays out), and the N×O×1×L'
//! result reshaped back to N×O×L' under the convolution's location.
//!
//! Then an elementwise unary op (a relu, a clip, a sigmoid) that reads a
//! chain of reshapes of a 2-D convolution's result, each value used once,
//! moves before the reshapes, next to the layer it fuses into: the back
//! reshape of a rewritten layer, and tf2onnx's `Conv → Squeeze → Relu` for
//! a 1-D layer alike.
//! `fp.conv_transpose1d` becomes `fp.conv_transpose2d` the same way (its
//! `output_padding = [p]` → `[0, p]`). An input that is itself a reshape of
//! a value of the wanted 2-D type is read as that value, so a stack of 1-D
//! layers keeps no reshapes between them. Shapes must be static (a reshape
//! names its target); others are left alone. Statistics: `rewritten`,
//! `activations-moved`.
//!
//! Numerics: the interpreter computes a 1-D convolution as that 2-D one, so
//! results are identical; egg proves it per run with `--verify-equiv`
//! (`conv1d-is-conv2d-over-unit-height` and its siblings,
//! `relu-commutes-with-reshape` and the other unary ops').
//!
//! ```text
//! %y = fp.conv1d(%x, %w) {pad = [1, 1]} : (tensor<1x4x64xf32>, tensor<16x4x3xf32>) -> tensor<1x16x64xf32>
//! // -> %x2 = fp.reshape(%x) {shape = [1, 4, 1, 64]} : (tensor<1x4x64xf32>) -> tensor<1x4x1x64xf32>
//! //    %c = fp.conv2d(%x2, %w2) {pad = [0, 1, 0, 1]} : (tensor<1x4x1x64xf32>, tensor<16x4x1x3xf32>) -> tensor<1x16x1x64xf32>
//! //    %y = fp.reshape(%c) {shape = [1, 16, 64]} : (tensor<1x16x1x64xf32>) -> tensor<1x16x64xf32>
//! ```

use crate::each_op::rewrite_each;
use qopt_dialect_fp::constants::{create_constant, erase_if_unused_constant};
use qopt_dialect_fp::op_names as fp_op;
use qopt_ir_core::equivalence::Relation;
use qopt_ir_core::pass::PassOptions;
use qopt_ir_core::{
    constant_value, Arity, AttrData, Attribute, Context, DenseElements, InsertPoint, Module, OpId,
    OperationState, Pass, PassContext, PassInfo, PassOutcome, PassResult, Rewriter, Traits, Type, ValueId,
};

/// The `conv1d-to-conv2d` pass; see the module docs.
pub struct Conv1dToConv2d;

const INFO: PassInfo = PassInfo {
    name: "conv1d-to-conv2d",
    summary: "states 1-D convolutions as 2-D ones over a unit height, which the quantizer and backends serve",
    preserves_semantics: true,
    equivalence: Some(Relation::Exact),
    description: "Rewrites `fp.conv1d` and `fp.conv_transpose1d` with static shapes into `fp.conv2d` and \
     `fp.conv_transpose2d` over a unit height: the N×C×L input reshaped to N×C×1×L, the weight to \
     O×C×1×K (a new constant when it is one), each window attribute given the height's entry first \
     (`stride = [s]` → `[1, s]`, `pad = [b, e]` → `[0, b, 0, e]`, `dilation` and `output_padding` \
     likewise), and the result reshaped back. Then an elementwise unary op (relu, clip, sigmoid) reading \
     reshapes of a 2-D convolution's result (each value used once) moves before them, next to the \
     layer: tf2onnx's `Conv → Squeeze → Relu` too. The interpreter computes both alike, so results are \
     identical; `quantize` runs it after `fold-bn` so that 1-D layers become `qnn.conv2d_relu`. \
     Statistics: `rewritten`, `activations-moved`.\n\n\
     ```\n\
     %y = fp.conv1d(%x, %w) {pad = [1, 1]} : (tensor<1x4x64xf32>, tensor<16x4x3xf32>) -> tensor<1x16x64xf32>\n\
     // -> %x2 = fp.reshape(%x) {shape = [1, 4, 1, 64]} : (tensor<1x4x64xf32>) -> tensor<1x4x1x64xf32>\n\
     //    %c = fp.conv2d(%x2, %w2) {pad = [0, 1, 0, 1]} : (tensor<1x4x1x64xf32>, tensor<16x4x1x3xf32>) -> tensor<1x16x1x64xf32>\n\
     //    %y = fp.reshape(%c) {shape = [1, 16, 64]} : (tensor<1x16x1x64xf32>) -> tensor<1x16x64xf32>\n\
     ```",
};

/// Each window attribute's entry for the unit height, inserted at the index
/// given (`pad` lists begins then ends, so it gets two).
const HEIGHT_ENTRIES: [(&str, usize, i64); 5] =
    [("stride", 0, 1), ("dilation", 0, 1), ("pad", 0, 0), ("pad", 2, 0), ("output_padding", 0, 0)];

impl Pass for Conv1dToConv2d {
    fn info(&self) -> &'static PassInfo {
        &INFO
    }

    fn run(&self, cx: &mut PassContext<'_>, module: &mut Module, _options: &PassOptions) -> PassResult {
        let rewritten = rewrite_each(cx.ctx, module, fp_op::CONV1D, |ctx, module, op| {
            over_unit_height(ctx, module, op, fp_op::CONV2D)
        }) + rewrite_each(cx.ctx, module, fp_op::CONV_TRANSPOSE1D, |ctx, module, op| {
            over_unit_height(ctx, module, op, fp_op::CONV_TRANSPOSE2D)
        });
        let activations = module.ops_where(|op| {
            cx.ctx.op_def(module.op_name(op)).is_some_and(|d| d.has(unary()) && d.operands == Arity::Exact(1))
        });
        let moved = activations.into_iter().filter(|&op| next_to_layer(cx.ctx, module, op).is_some()).count();
        if moved > 0 {
            undo_reshape_pairs(cx.ctx, module);
        }
        cx.add_stats(&[("rewritten", rewritten), ("activations-moved", moved as u64)]);
        Ok(PassOutcome::from_changed(rewritten + moved as u64 > 0))
    }
}

/// Reads `reshape(reshape(x))` back to its own type as `x`: the pairs a
/// moved activation leaves between two rewritten layers (the back reshape of
/// one, the input reshape of the next).
fn undo_reshape_pairs(ctx: &Context, module: &mut Module) {
    let is_reshape = |module: &Module, op: OpId| ctx.op_name_str(module.op_name(op)) == fp_op::RESHAPE;
    for outer in module.ops_where(|op| is_reshape(module, op)) {
        if module.is_erased(outer) {
            continue;
        }
        let inner = module.defining_op(module.operand(outer, 0));
        if inner.is_none() || !is_reshape(module, inner) {
            continue;
        }
        let (source, result) = (module.operand(inner, 0), module.result(outer, 0));
        if module.value_type(source) == module.value_type(result) {
            module.replace_all_uses(result, source);
            // invariant: neither has a use left once nothing reads them.
            let _ = module.erase_op(outer);
            if !module.op_has_uses(inner) {
                let _ = module.erase_op(inner);
            }
        }
    }
}

/// The traits of an elementwise unary op keeping its operand's type (a relu,
/// a clip, a sigmoid).
fn unary() -> Traits {
    Traits::ELEMENTWISE | Traits::SAME_OPERANDS_AND_RESULT_TYPE | Traits::PURE
}

/// Moves the elementwise unary op `activation`, whose operand is a chain of
/// reshapes of a 2-D convolution's result, before the reshapes, next to the
/// layer it fuses into: `f(reshape(…(y)))` becomes `reshape(…(f(y)))`, the
/// same function of the same elements. `None` (nothing changed) unless every
/// value on the way has that one use.
fn next_to_layer(ctx: &Context, module: &mut Module, activation: OpId) -> Option<()> {
    let is =
        |module: &Module, op: OpId, name: &str| !op.is_none() && ctx.op_name_str(module.op_name(op)) == name;
    let (value, chain) = qopt_dialect_fp::reshape_chain(ctx, module, module.operand(activation, 0), |_| true);
    let layer = module.defining_op(value);
    let first_reshape = *chain.last()?;
    if !(is(module, layer, fp_op::CONV2D) || is(module, layer, fp_op::CONV_TRANSPOSE2D))
        || module.uses(value).count() != 1
    {
        return None;
    }
    let state = OperationState::new(module.op_name(activation))
        .operands(&[value])
        .results(&[module.value_type(value)])
        .attrs(module.op_attrs(activation))
        .loc(module.op_loc(activation));
    let moved = module.create_op(state);
    module.insert_op_before(first_reshape, moved);
    module.set_operand(first_reshape, 0, module.result(moved, 0));
    // The reshapes now hold the activation's values: its name, for layer
    // comparisons and quant-lint.
    for &reshape in &chain {
        module.set_op_loc(reshape, module.op_loc(activation));
    }
    module.replace_all_uses(module.result(activation, 0), module.operand(activation, 0));
    // invariant: the activation's result has no uses left.
    module.erase_op(activation).ok()
}

/// Rewrites the 1-D convolution `op` as `two_d` over a unit height; `None`
/// (nothing changed) when a shape is not static or an attribute not an
/// integer array.
fn over_unit_height(ctx: &mut Context, module: &mut Module, op: OpId, two_d: &str) -> Option<()> {
    let (x, w) = (module.operand(op, 0), module.operand(op, 1));
    let bias = (module.num_operands(op) > 2).then(|| module.operand(op, 2));
    let y = module.result(op, 0);
    let [x_ty, w_ty, y_ty] = [x, w, y].map(|v| module.value_type(v));
    let [x2_ty, w2_ty, y2_ty] = [x_ty, w_ty, y_ty].map(|t| with_unit_height(ctx, t));
    let (x2_ty, w2_ty, y2_ty) = (x2_ty?, w2_ty?, y2_ty?);
    let attrs = attrs_over_unit_height(ctx, module.op_attrs(op))?;
    let weight = match constant_value(ctx, module, w).map(|a| ctx.attr_data(a).clone()) {
        Some(AttrData::Dense(values)) => {
            Some(ctx.dense_attr(DenseElements::from_bytes(ctx, w2_ty, values.bytes.to_vec()).ok()?))
        }
        _ => None,
    };
    let loc = module.op_loc(op);
    let mut rewriter = Rewriter::new(ctx, module);
    rewriter.set_insertion_point(InsertPoint::Before(op));
    rewriter.set_loc(loc);
    let x2 = reshape(&mut rewriter, x, x2_ty)?;
    let w2 = match weight {
        Some(value) => {
            // A constant weight has a defining op.
            let weight_loc = rewriter.module.op_loc(rewriter.module.defining_op(w));
            rewriter.set_loc(weight_loc);
            let constant = create_constant(&mut rewriter, value).ok()?;
            rewriter.set_loc(loc);
            constant
        }
        None => reshape(&mut rewriter, w, w2_ty)?,
    };
    let mut operands = vec![x2, w2];
    operands.extend(bias);
    let name = rewriter.ctx.op_name(two_d);
    let conv = rewriter.create(OperationState::new(name).operands(&operands).results(&[y2_ty]).attrs(attrs));
    let y2 = rewriter.module.result(conv, 0);
    let back = reshape(&mut rewriter, y2, y_ty)?;
    rewriter.replace_op(op, &[back]).ok()?;
    erase_if_unused_constant(ctx, module, w);
    Some(())
}

/// `ty` (a static N×C×L tensor type) as N×C×1×L.
fn with_unit_height(ctx: &mut Context, ty: Type) -> Option<Type> {
    let shape = ctx.tensor_shape(ty)?;
    if shape.len() != 3 || shape.iter().any(|&d| d < 0) {
        return None;
    }
    let (elem, widened) = (ctx.element_type(ty), [shape[0], shape[1], 1, shape[2]]);
    Some(ctx.tensor_type(&widened, elem))
}

/// The 1-D window attributes `attrs` with the unit height's entries; other
/// attributes as they are.
fn attrs_over_unit_height(ctx: &mut Context, mut attrs: Attribute) -> Option<Attribute> {
    for (name, index, value) in HEIGHT_ENTRIES {
        let Some(array) = ctx.dict_get(attrs, name) else { continue };
        let mut items = ctx.attr_as_i64_array(array)?;
        if index > items.len() {
            return None;
        }
        items.insert(index, value);
        let array = ctx.i64_array_attr(&items);
        attrs = ctx.dict_set(attrs, name, array);
    }
    Some(attrs)
}

/// `fp.reshape(v)` to the static type `ty`, or the value `v` was reshaped
/// from when it has that type (a 1-D layer fed by one this pass rewrote
/// reads the 2-D result directly).
fn reshape(rewriter: &mut Rewriter<'_>, v: ValueId, ty: Type) -> Option<ValueId> {
    let def = rewriter.module.defining_op(v);
    if !def.is_none() && rewriter.ctx.op_name_str(rewriter.module.op_name(def)) == fp_op::RESHAPE {
        let source = rewriter.module.operand(def, 0);
        if rewriter.module.value_type(source) == ty {
            return Some(source);
        }
    }
    let shape = rewriter.ctx.tensor_shape(ty)?.to_vec();
    let shape = rewriter.ctx.i64_array_attr(&shape);
    let attrs = rewriter.ctx.dict_attr(&[("shape", shape)]);
    let name = rewriter.ctx.op_name(fp_op::RESHAPE);
    let op = rewriter.create(OperationState::new(name).operands(&[v]).results(&[ty]).attrs(attrs));
    Some(rewriter.module.result(op, 0))
}
