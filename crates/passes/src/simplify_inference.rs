//! `simplify-inference`: rewrites each inference-mode `fp.batch_norm` whose four
//! parameters are constants into a per-channel multiply and add (TVM's
//! `SimplifyInference`):
//!
//! `scale · (x - mean) / sqrt(var + ε) + bias = x · s + b` with
//! `s = scale / sqrt(var + ε)` and `b = bias - mean · s`.
//!
//! `s` and `b` are computed in f64 (`b` from the unrounded `s`) and rounded once
//! to the element type of `x`. They are new `fp.constant`s shaped `[C, 1, ..., 1]`
//! with rank(x) - 2 ones (`[C, 1, 1]` for NCHW, `[C]` for a rank-2 `x`), so they
//! broadcast along axis 1, the channel axis. The new ops (`fp.mul`, `fp.add` and
//! the two constants) take the batch norm's location; parameter constants left
//! without uses are erased.
//!
//! A batch norm with a parameter that is not a constant (the result of a
//! registered [`Traits::CONSTANT_LIKE`] op) is kept, with a warning naming its
//! location; so is one whose parameters differ in length, or whose rewrite would
//! change the result type (a dynamic channel dimension when C = 1). Every batch
//! norm is rewritten, also one after a convolution: run `fold-bn` first to fold
//! those into the convolution's weights instead. Statistic: `batch-norms`
//! (batch norms rewritten).
//!
//! ```text
//! // before (var = 3, ε = 1: sqrt(4) = 2)
//! %y = fp.batch_norm(%x, %scale, %bias, %mean, %var) {epsilon = 1.0 : f32} : (tensor<1x2x4x4xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<1x2x4x4xf32> loc("bn1")
//! // after, with scale = [1, 4], bias = [1, 0], mean = [2, 1], var = [3, 3]
//! %0 = fp.constant() {value = dense<[[[0.5]], [[2.0]]]> : tensor<2x1x1xf32>} : () -> tensor<2x1x1xf32> loc("bn1")
//! %1 = fp.constant() {value = dense<[[[0.0]], [[-2.0]]]> : tensor<2x1x1xf32>} : () -> tensor<2x1x1xf32> loc("bn1")
//! %2 = fp.mul(%x, %0) : (tensor<1x2x4x4xf32>, tensor<2x1x1xf32>) -> tensor<1x2x4x4xf32> loc("bn1")
//! %y = fp.add(%2, %1) : (tensor<1x2x4x4xf32>, tensor<2x1x1xf32>) -> tensor<1x2x4x4xf32> loc("bn1")
//! ```

use qopt_dialect_fp::op_names as fp_op;
use qopt_dialect_fp::{attrs, shape, BATCH_NORM_EPSILON, BATCH_NORM_PARAMETERS};
use qopt_ir_core::pass::PassOptions;
use qopt_ir_core::PassInfo;
use qopt_ir_core::PassResult;
use qopt_ir_core::{
    constant_value, dense_values_f64, type_to_string, AttrData, Attribute, Context, InsertPoint, Module,
    OpId, Pass, PassContext, PassOutcome, Rewriter, ValueId,
};
use smallvec::SmallVec;

use qopt_dialect_fp::constants::{create_constant, dense, erase_if_unused_constant, not_constants};

/// The `simplify-inference` pass; see the module docs.
pub struct SimplifyInference;

// The scale and shift are computed in f64 and rounded once.
const INFO: PassInfo = PassInfo::real_rewrite(
    "simplify-inference",
    "rewrite batch norms with constant parameters into a per-channel multiply and add",
    "Rewrites `fp.batch_norm(x, scale, bias, mean, var) {epsilon}` whose parameters are \
     constants into `fp.add(fp.mul(x, s), b)` with `s = scale / sqrt(var + epsilon)` and \
     `b = bias - mean * s`, computed in f64 and shaped [C, 1, ..., 1] to broadcast along \
     axis 1. Batch norms with non-constant parameters are kept with a warning. Run \
     `fold-bn` first to fold batch norms into preceding convolutions instead.\n\n\
     ```\n\
     %y = fp.batch_norm(%x, %scale, %bias, %mean, %var) {epsilon = 1.0 : f32} : ...\n\
     // -> %0 = fp.mul(%x, %s) ...; %y = fp.add(%0, %b) ...\n\
     ```",
);

impl Pass for SimplifyInference {
    fn info(&self) -> &'static PassInfo {
        &INFO
    }

    fn run(&self, cx: &mut PassContext<'_>, module: &mut Module, _options: &PassOptions) -> PassResult {
        let batch_norm = cx.ctx.op_name(fp_op::BATCH_NORM);
        let candidates: Vec<OpId> = module.ops_where(|op| module.op_name(op) == batch_norm);
        let mut rewritten = 0u64;
        for op in candidates {
            match simplify_batch_norm(cx.ctx, module, op) {
                Ok(()) => rewritten += 1,
                Err(reason) => warn_kept(cx, module, op, &reason),
            }
        }
        cx.add_stat("batch-norms", rewritten);
        Ok(PassOutcome::from_changed(rewritten > 0))
    }
}

/// Rewrites one batch norm (see the module docs), or says why it is kept; on
/// `Err` the IR is unchanged.
fn simplify_batch_norm(ctx: &mut Context, module: &mut Module, op: OpId) -> Result<(), String> {
    if module.num_operands(op) != 1 + BATCH_NORM_PARAMETERS.len() || module.num_results(op) != 1 {
        return Err("it does not have 5 operands and 1 result".to_string());
    }
    let x = module.operand(op, 0);
    let params: SmallVec<[ValueId; 4]> =
        (1..=BATCH_NORM_PARAMETERS.len()).map(|i| module.operand(op, i)).collect();
    let constants: SmallVec<[Option<Attribute>; 4]> =
        params.iter().map(|&v| constant_value(ctx, module, v)).collect();
    let missing: Vec<&str> = BATCH_NORM_PARAMETERS
        .iter()
        .zip(&constants)
        .filter(|(_, c)| c.is_none())
        .map(|(&name, _)| name)
        .collect();
    if !missing.is_empty() {
        return Err(not_constants(&missing));
    }

    // scale, bias, mean, var as f64, each of one element per channel.
    let mut values: SmallVec<[Vec<f64>; 4]> = SmallVec::new();
    for (name, attr) in BATCH_NORM_PARAMETERS.iter().zip(constants.iter().flatten()) {
        let read = match ctx.attr_data(*attr) {
            AttrData::Dense(d) if ctx.tensor_shape(d.ty).is_some_and(|s| s.len() == 1) => {
                dense_values_f64(ctx, d, ctx.element_type(d.ty))
            }
            _ => None,
        };
        values.push(read.ok_or_else(|| format!("{name} is not a constant vector of numbers"))?);
    }
    let channels = values[0].len();
    if values.iter().any(|v| v.len() != channels) {
        let lengths: Vec<String> = BATCH_NORM_PARAMETERS
            .iter()
            .zip(&values)
            .map(|(name, v)| format!("{name} {}", v.len()))
            .collect();
        return Err(format!("its parameters differ in length ({})", lengths.join(", ")));
    }
    let epsilon = attrs::float_in(ctx, module.op_attrs(op), "epsilon", BATCH_NORM_EPSILON)?;
    let (scales, biases) = per_channel_affine(&values[0], &values[1], &values[2], &values[3], epsilon);

    let result_ty = module.value_type(module.result(op, 0));
    let (rank, elem) = shape::tensor_parts(ctx, module.value_type(x))
        .map(|(s, e)| (s.len(), e))
        .ok_or("its input is not a tensor")?;
    if rank < 2 {
        return Err("its input has rank below 2".to_string());
    }
    // [C, 1, ..., 1]: aligned with x from the back, C falls on axis 1.
    let mut const_shape = vec![1i64; rank - 1];
    const_shape[0] = channels as i64;
    let const_ty = ctx.tensor_type(&const_shape, elem);
    let s_attr = dense(ctx, const_ty, &scales)?;
    let b_attr = dense(ctx, const_ty, &biases)?;

    let loc = module.op_loc(op);
    let mut rewriter = Rewriter::new(ctx, module);
    rewriter.set_insertion_point(InsertPoint::Before(op));
    rewriter.set_loc(loc);
    let built = build_affine(&mut rewriter, x, s_attr, b_attr);
    let created = rewriter.take_changes().created;
    let kept = match built {
        Ok(y) if rewriter.module.value_type(y) == result_ty => None,
        Ok(y) => Some(format!(
            "the rewrite would change its result type to {}",
            type_to_string(rewriter.ctx, rewriter.module.value_type(y))
        )),
        Err(e) => Some(format!("the rewrite failed: {e}")),
    };
    if let Some(reason) = kept {
        // Users come after what they use, so erase in reverse creation order.
        for &c in created.iter().rev() {
            let _ = rewriter.module.erase_op(c);
        }
        return Err(reason);
    }
    let y = rewriter.module.result(created[created.len() - 1], 0);
    // invariant: every use of the batch norm's result moves to `y`, so erasing
    // it cannot fail.
    rewriter.replace_op(op, &[y]).map_err(|e| format!("cannot erase it: {e:?}"))?;
    for &p in &params {
        erase_if_unused_constant(ctx, module, p);
    }
    Ok(())
}

/// `s = scale / sqrt(var + ε)` and `b = bias - mean · s` per channel, in f64.
fn per_channel_affine(
    scale: &[f64],
    bias: &[f64],
    mean: &[f64],
    var: &[f64],
    epsilon: f64,
) -> (Vec<f64>, Vec<f64>) {
    let s: Vec<f64> = scale.iter().zip(var).map(|(&g, &v)| g / (v + epsilon).sqrt()).collect();
    let b: Vec<f64> = bias.iter().zip(mean).zip(&s).map(|((&beta, &m), &s)| beta - m * s).collect();
    (s, b)
}

/// `%s`, `%b` as `fp.constant`, then `fp.add(fp.mul(x, %s), %b)`; returns the sum.
fn build_affine(
    rewriter: &mut Rewriter<'_>,
    x: ValueId,
    s: Attribute,
    b: Attribute,
) -> Result<ValueId, String> {
    let s = create_constant(rewriter, s)?;
    let b = create_constant(rewriter, b)?;
    let none = rewriter.ctx.dict_attr(&[]);
    let mul = rewriter.create_inferred(fp_op::MUL, &[x, s], none)?;
    let scaled = rewriter.module.result(mul, 0);
    let add = rewriter.create_inferred(fp_op::ADD, &[scaled, b], none)?;
    Ok(rewriter.module.result(add, 0))
}

/// Warns that the batch norm `op` is kept, naming its location.
fn warn_kept(cx: &mut PassContext<'_>, module: &Module, op: OpId, reason: &str) {
    // The op's location (`loc("bn2")`) follows as a note.
    cx.warn_at(module, op, format!("simplify-inference: fp.batch_norm kept: {reason}"));
}

#[cfg(test)]
mod tests {
    use super::{not_constants, per_channel_affine};
    use crate::test_ir::{on_small_stack, registry, test_context, TestIr};
    use qopt_ir_core::parse_module;

    /// Parses `input` in a context with the `fp` and `test` dialects and runs
    /// `pipeline` over it.
    fn run_fp(pipeline: &str, input: &str) -> crate::test_ir::RunOutput {
        let mut ctx = test_context();
        qopt_dialect_fp::register(&mut ctx).unwrap();
        let module = parse_module(&mut ctx, input.as_bytes(), "input.qir").unwrap();
        TestIr { ctx, module }.run(&registry(), pipeline).unwrap()
    }

    #[test]
    fn per_channel_constants() {
        // var + ε = 4, 16, 0.25: square roots 2, 4, 0.5.
        let (s, b) = per_channel_affine(
            &[1.0, 8.0, 1.0],
            &[1.0, 0.0, -1.0],
            &[2.0, 1.0, 3.0],
            &[3.0, 15.0, -0.75],
            1.0,
        );
        assert_eq!(s, [0.5, 2.0, 2.0]);
        assert_eq!(b, [0.0, -2.0, -7.0]);
    }

    #[test]
    fn missing_parameter_lists() {
        assert_eq!(not_constants(&["mean"]), "mean is not a constant");
        assert_eq!(not_constants(&["scale", "var"]), "scale and var are not constants");
        assert_eq!(not_constants(&["scale", "bias", "var"]), "scale, bias and var are not constants");
    }

    /// A rank-3 input (N×C×L) gets [C, 1] constants.
    #[test]
    fn rank_3_input_gets_c_by_1_constants() {
        let input = r#"func.func @f(%x: tensor<2x2x5xf32>) -> tensor<2x2x5xf32> {
  %g = fp.constant() {value = dense<[2.0, 1.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %b = fp.constant() {value = dense<[0.0, 1.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %m = fp.constant() {value = dense<[1.0, -1.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %v = fp.constant() {value = dense<[3.0, 0.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %y = fp.batch_norm(%x, %g, %b, %m, %v) {epsilon = 1.0 : f32} : (tensor<2x2x5xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<2x2x5xf32>
  func.return %y : tensor<2x2x5xf32>
}
"#;
        let out = run_fp("simplify-inference", input);
        assert_eq!(
            out.ir,
            "module {
  func.func @f(%arg0: tensor<2x2x5xf32>) -> tensor<2x2x5xf32> {
    %0 = fp.constant() {value = dense<[[1.0], [1.0]]> : tensor<2x1xf32>} : () -> tensor<2x1xf32>
    %1 = fp.constant() {value = dense<[[-1.0], [2.0]]> : tensor<2x1xf32>} : () -> tensor<2x1xf32>
    %2 = fp.mul(%arg0, %0) : (tensor<2x2x5xf32>, tensor<2x1xf32>) -> tensor<2x2x5xf32>
    %3 = fp.add(%2, %1) : (tensor<2x2x5xf32>, tensor<2x1xf32>) -> tensor<2x2x5xf32>
    func.return %3 : tensor<2x2x5xf32>
  }
}
"
        );
        assert_eq!(out.stats, [("batch-norms", 1)]);
    }

    /// 10,000 batch norms in a chain, all sharing one set of parameters, are
    /// rewritten on a small stack; the shared parameters go once the last user does.
    #[test]
    fn a_10000_batch_norm_chain() {
        on_small_stack(|| {
            let mut text = String::from(
                "func.func @f(%x: tensor<1x2xf32>) -> tensor<1x2xf32> {\n  \
                 %p = fp.constant() {value = dense<1.0> : tensor<2xf32>} : () -> tensor<2xf32>\n",
            );
            let mut last = "%x".to_string();
            for i in 0..10_000 {
                text.push_str(&format!(
                    "  %y{i} = fp.batch_norm({last}, %p, %p, %p, %p) {{epsilon = 3.0 : f32}} : \
                     (tensor<1x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<1x2xf32>\n"
                ));
                last = format!("%y{i}");
            }
            text.push_str(&format!("  func.return {last} : tensor<1x2xf32>\n}}\n"));
            let out = run_fp("simplify-inference", &text);
            assert_eq!(out.stats, [("batch-norms", 10_000)]);
            assert!(!out.ir.contains("batch_norm"));
            assert!(!out.ir.contains("dense<1.0>"), "the shared parameters are erased");
            // s = 1 / sqrt(1 + 3) = 0.5, b = 1 - 1 · 0.5 = 0.5.
            assert_eq!(
                out.ir.matches("fp.constant() {value = dense<[0.5, 0.5]> : tensor<2xf32>}").count(),
                20_000
            );
        });
    }
}
