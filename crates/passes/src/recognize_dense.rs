//! `recognize-dense`: turns the fully connected layers exporters write as a
//! `MatMul` by a constant matrix, often followed by an `Add` of a constant
//! vector (tf2onnx's classifier heads, PyTorch's `nn.Linear` on 3-D inputs,
//! every projection of a transformer), into one `fp.dense` with its bias,
//! so that the quantizer sees a layer (a weight quantized symmetric per
//! output channel, an i32 bias) instead of a product of two activations
//! followed by an 8-bit add.
//!
//! - `fp.matmul(x, W)` with `W` a constant K×N matrix becomes
//!   `fp.dense(x, Wᵀ)` (a new N×K constant, the layout of a dense weight),
//!   for `x` of any rank ≥ 2 (…×K).
//! - `fp.add(d, b)` or `fp.add(b, d)`, where `d` is an `fp.dense` without a
//!   bias whose only user is the add and `b` a constant of shape `[N]` or
//!   `[1, …, 1, N]` (one value per output feature), becomes
//!   `fp.dense(x, W, b)`, when the add keeps `d`'s type. The location is the
//!   fused one of both ops, so quant-lint and the exporter name both nodes.
//!
//! Statistics: `dense-layers` (matmuls rewritten), `dense-biases` (adds
//! folded into a dense's bias).
//!
//! Numerics: a dense sums the same products as the matmul (the kernels may
//! sum them in another order) and adds the bias once, so results agree over
//! the reals (egg proves it per run with `--verify-equiv`:
//! `dense-is-matmul-by-transpose`, `dense-without-bias-plus-feature-vector-is-its-bias`).
//!
//! ```text
//! %w = fp.constant() {value = dense<...> : tensor<16x4xf32>} : () -> tensor<16x4xf32>
//! %m = fp.matmul(%x, %w) : (tensor<1x16xf32>, tensor<16x4xf32>) -> tensor<1x4xf32> loc("matmul_0")
//! %b = fp.constant() {value = dense<...> : tensor<4xf32>} : () -> tensor<4xf32>
//! %y = fp.add(%m, %b) : (tensor<1x4xf32>, tensor<4xf32>) -> tensor<1x4xf32> loc("add_2")
//! // -> %y = fp.dense(%x, %wt, %b) : (tensor<1x16xf32>, tensor<4x16xf32>, tensor<4xf32>) -> tensor<1x4xf32>
//! //         loc(fused["matmul_0", "add_2"])
//! ```

use crate::each_op::rewrite_each;
use qopt_dialect_fp::constants::{create_constant, erase_if_unused_constant, replace_with_op_on_constant};
use qopt_dialect_fp::op_names as fp_op;
use qopt_ir_core::pass::PassOptions;
use qopt_ir_core::{
    constant_value, element_kind, AttrData, Attribute, Context, DenseElements, InsertPoint, Module, OpId,
    Pass, PassContext, PassInfo, PassOutcome, PassResult, Rewriter,
};

/// The `recognize-dense` pass; see the module docs.
pub struct RecognizeDense;

// The dense sums the matmul's products in an order of its kernel's choosing.
const INFO: PassInfo = PassInfo::real_rewrite(
    "recognize-dense",
    "turns matmuls by a constant matrix, and a constant bias added after, into fp.dense layers",
    "Rewrites `fp.matmul(x, W)` with a constant K×N `W` into `fp.dense(x, Wᵀ)` (a new \
     N×K constant), and `fp.add` of a bias-less dense (its only user) and a constant of shape [N] or \
     [1, …, 1, N] into that dense's bias, under the fused location of both ops. The quantizer then \
     quantizes the weight per output channel and the bias as i32, as for any dense layer, instead of \
     a product of activations and an 8-bit add. Statistics: `dense-layers`, `dense-biases`.\n\n\
     ```\n\
     %m = fp.matmul(%x, %w) : (tensor<1x16xf32>, tensor<16x4xf32>) -> tensor<1x4xf32>\n\
     %y = fp.add(%m, %b) : (tensor<1x4xf32>, tensor<4xf32>) -> tensor<1x4xf32>\n\
     // -> %y = fp.dense(%x, %wt, %b) : (tensor<1x16xf32>, tensor<4x16xf32>, tensor<4xf32>) -> tensor<1x4xf32>\n\
     ```",
);

impl Pass for RecognizeDense {
    fn info(&self) -> &'static PassInfo {
        &INFO
    }

    fn run(&self, cx: &mut PassContext<'_>, module: &mut Module, _options: &PassOptions) -> PassResult {
        let layers = rewrite_each(cx.ctx, module, fp_op::MATMUL, dense_of_matmul);
        let biases = rewrite_each(cx.ctx, module, fp_op::ADD, fold_bias);
        cx.add_stats(&[("dense-layers", layers), ("dense-biases", biases)]);
        Ok(PassOutcome::from_changed(layers + biases > 0))
    }
}

/// Rewrites `fp.matmul(x, W)` with a constant matrix `W` into `fp.dense(x, Wᵀ)`;
/// `None` (nothing changed) when it is not one.
fn dense_of_matmul(ctx: &mut Context, module: &mut Module, op: OpId) -> Option<()> {
    let (x, w) = (module.operand(op, 0), module.operand(op, 1));
    let x_rank = ctx.tensor_shape(module.value_type(x))?.len();
    let AttrData::Dense(weight) = ctx.attr_data(constant_value(ctx, module, w)?) else { return None };
    if x_rank < 2 || ctx.tensor_shape(weight.ty)?.len() != 2 {
        return None;
    }
    let transposed = transpose_matrix(ctx, &weight.clone())?;
    let transposed = ctx.dense_attr(transposed);
    replace_with_op_on_constant(ctx, module, op, (fp_op::DENSE, x), (transposed, w))
}

/// Folds `fp.add` of a bias-less dense (its only user) and a constant per
/// output feature into the dense's bias; `None` when it is not one.
fn fold_bias(ctx: &mut Context, module: &mut Module, add: OpId) -> Option<()> {
    let dense_name = ctx.op_name(fp_op::DENSE);
    let operands = [module.operand(add, 0), module.operand(add, 1)];
    let (d, b) = [(operands[0], operands[1]), (operands[1], operands[0])].into_iter().find(|&(d, _)| {
        let def = module.defining_op(d);
        !def.is_none() && module.op_name(def) == dense_name && module.num_operands(def) == 2
    })?;
    let dense = module.defining_op(d);
    let mut users = module.uses(d);
    if users.next().map(|u| u.op) != Some(add) || users.next().is_some() {
        return None;
    }
    if module.value_type(module.result(add, 0)) != module.value_type(d) {
        return None;
    }
    let AttrData::Dense(bias) = ctx.attr_data(constant_value(ctx, module, b)?).clone() else { return None };
    let n = *ctx.tensor_shape(module.value_type(d))?.last()?;
    let shape = ctx.tensor_shape(bias.ty)?;
    let (last, ones) = shape.split_last()?;
    if *last != n
        || ones.iter().any(|&s| s != 1)
        || ctx.element_type(bias.ty) != ctx.element_type(module.value_type(d))
    {
        return None;
    }
    let vector_ty = ctx.tensor_type(&[n], ctx.element_type(bias.ty));
    let vector = DenseElements::from_bytes(ctx, vector_ty, bias.bytes.to_vec()).ok()?;
    let vector = ctx.dense_attr(vector);
    let loc = ctx.fused_loc(&[module.op_loc(dense), module.op_loc(add)]);
    let (x, w) = (module.operand(dense, 0), module.operand(dense, 1));
    let mut rewriter = Rewriter::new(ctx, module);
    rewriter.set_insertion_point(InsertPoint::Before(add));
    rewriter.set_loc(loc);
    let bias_value = create_constant(&mut rewriter, vector).ok()?;
    let with_bias =
        rewriter.create_inferred(fp_op::DENSE, &[x, w, bias_value], Attribute::EMPTY_DICT).ok()?;
    let y = rewriter.module.result(with_bias, 0);
    rewriter.replace_op(add, &[y]).ok()?;
    let _ = module.erase_op(dense);
    erase_if_unused_constant(ctx, module, b);
    Some(())
}

/// The N×K transpose of a K×N dense constant, element bytes moved as they are.
fn transpose_matrix(ctx: &mut Context, matrix: &DenseElements) -> Option<DenseElements> {
    let &[k, n] = ctx.tensor_shape(matrix.ty)? else { return None };
    let (k, n) = (usize::try_from(k).ok()?, usize::try_from(n).ok()?);
    let elem = ctx.element_type(matrix.ty);
    let size = element_kind(ctx, elem)?.bytes();
    let ty = ctx.tensor_type(&[n as i64, k as i64], elem);
    if matrix.splat {
        return DenseElements::from_bytes(ctx, ty, matrix.bytes.to_vec()).ok();
    }
    let mut bytes = vec![0u8; matrix.bytes.len()];
    for row in 0..k {
        for col in 0..n {
            let from = (row * n + col) * size;
            let to = (col * k + row) * size;
            bytes[to..to + size].copy_from_slice(matrix.bytes.get(from..from + size)?);
        }
    }
    DenseElements::from_bytes(ctx, ty, bytes).ok()
}
