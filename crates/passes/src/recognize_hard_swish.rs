//! `recognize-hard-swish`: turns the decompositions of HardSwish that
//! exporters write into one `fp.hard_swish`, so that the quantizer sees one
//! activation (an exact lookup table after `fuse`) instead of three or four
//! float ops between quantized values.
//!
//! `hard_swish(x) = x · clip(x + 3, 0, 6) / 6 = x · clip(x/6 + 1/2, 0, 1)`.
//! Recognized, with `x` any float tensor:
//!
//! - Paddle2ONNX's before opset 14: `x · clip(x + 3, 0, 6) / 6`, the division
//!   also written as a multiplication by `1/6`, and the `/ 6` also applied to
//!   the clip before the product (`x · (clip(x + 3, 0, 6) / 6)`);
//! - the HardSigmoid form: `x · hard_sigmoid(x) {alpha = 1/6, beta = 1/2}`.
//!
//! Every `fp.add` and `fp.mul` may have its operands in either order; `clip`
//! is `fp.clip {min = 0, max = 6}`. Constants (3, 6, 1/6) and `alpha`, `beta`
//! may be 4 f32 ulps off (see [`crate::fp_chains`]), and no op of the chain
//! may change `x`'s type. A chain is rewritten only when each intermediate
//! value has exactly one user, the next op of the chain. Statistic:
//! `hard-swishes`.
//!
//! Numerics: `fp.hard_swish` computes in f64 and rounds once, the chain
//! rounds after every op, so results differ by an f32 ulp or so. Like
//! `recognize-gelu` and `fold-bn`, the pass keeps the meaning over the reals.
//!
//! ```text
//! %a = fp.add(%x, %three) : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
//! %c = fp.clip(%a) {max = 6.0 : f32, min = 0.0 : f32} : (tensor<8xf32>) -> tensor<8xf32>
//! %m = fp.mul(%x, %c) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
//! %y = fp.div(%m, %six) : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32> loc("hs")
//! // -> %y = fp.hard_swish(%x) : (tensor<8xf32>) -> tensor<8xf32> loc("hs")
//! ```

use qopt_dialect_fp::op_names as fp_op;
use qopt_ir_core::pass::PassOptions;
use qopt_ir_core::PassInfo;
use qopt_ir_core::PassResult;
use qopt_ir_core::{Context, Module, OpId, Pass, PassContext, PassOutcome, ValueId};
use smallvec::SmallVec;

use crate::fp_chains::{
    binary, f32_ulp, is_constant, keeps_float_type, other_than_constant, replace_chain, single_use_def, unary,
};

/// The `recognize-hard-swish` pass; see the module docs.
pub struct RecognizeHardSwish;

// Not checked yet: no rules state the HardSwish decompositions.
const INFO: PassInfo = PassInfo::real_rewrite(
    "recognize-hard-swish",
    "fuses the decompositions of HardSwish exporters write (x·clip(x+3,0,6)/6, x·hard_sigmoid(x)) into fp.hard_swish",
    "Rewrites `x · clip(x + 3, 0, 6) / 6` (the division also as `· 1/6`, or applied to the clip \
     first) and `x · hard_sigmoid(x) {alpha = 1/6, beta = 1/2}` into `fp.hard_swish(x)`, for any \
     operand order of `fp.add` and `fp.mul` and constants within 4 f32 ulps, when every \
     intermediate value has one user and no op changes `x`'s type. The chain's location goes to \
     the new op. `fp.hard_swish` rounds once, the chain after every op: results differ by about \
     an ulp. Statistic: `hard-swishes`.\n\n\
     ```\n\
     %a = fp.add(%x, %three) ...; %c = fp.clip(%a) {max = 6.0 : f32, min = 0.0 : f32} ...\n\
     %m = fp.mul(%x, %c) ...; %y = fp.div(%m, %six) ...\n\
     // -> %y = fp.hard_swish(%x) : (tensor<8xf32>) -> tensor<8xf32>\n\
     ```",
);

impl Pass for RecognizeHardSwish {
    fn info(&self) -> &'static PassInfo {
        &INFO
    }

    fn run(&self, cx: &mut PassContext<'_>, module: &mut Module, _options: &PassOptions) -> PassResult {
        let names = Names::new(cx.ctx);
        let candidates: Vec<OpId> =
            module.ops_where(|op| module.op_name(op) == names.mul || module.op_name(op) == names.div);
        let mut found_count = 0u64;
        for op in candidates {
            if module.is_erased(op) {
                continue;
            }
            let Some((x, chain)) = match_hard_swish(cx.ctx, module, &names, op) else { continue };
            let attrs = cx.ctx.dict_attr(&[]);
            if replace_chain(cx.ctx, module, op, &chain, fp_op::HARD_SWISH, x, attrs).is_ok() {
                found_count += 1;
            }
        }
        cx.add_stat("hard-swishes", found_count);
        Ok(PassOutcome::from_changed(found_count > 0))
    }
}

qopt_ir_core::interned_op_names! {
    /// The interned names of the ops the pass reads.
    struct Names {
        mul = fp_op::MUL, div = fp_op::DIV, add = fp_op::ADD, clip = fp_op::CLIP,
        hard_sigmoid = fp_op::HARD_SIGMOID,
    }
}

/// The chain's other ops, each after its users.
type Chain = SmallVec<[OpId; 4]>;

/// `x` and the chain ending at `y_op` if it computes `hard_swish(x)` in one
/// of the forms of the module docs.
fn match_hard_swish(ctx: &Context, module: &Module, names: &Names, y_op: OpId) -> Option<(ValueId, Chain)> {
    let name = module.op_name(y_op);
    let mut candidates: SmallVec<[(ValueId, Chain); 2]> = SmallVec::new();
    // (x · clip(x + 3, 0, 6)) / 6 and (x · clip(x + 3, 0, 6)) · 1/6.
    let product = if name == names.div {
        let (n, d) = binary(module, y_op, names.div)?;
        is_constant(ctx, module, d, 6.0).then_some(n)
    } else {
        other_than_constant(ctx, module, y_op, names.mul, 1.0 / 6.0)
    };
    if let Some(product) = product {
        if let Some(mul) = single_use_def(module, product, names.mul) {
            let (p, q) = binary(module, mul, names.mul)?;
            for (x, c) in [(p, q), (q, p)] {
                if let Some(mut chain) = relu6_of_x_plus_3(ctx, module, names, c, x) {
                    chain.insert(0, mul);
                    candidates.push((x, chain));
                }
            }
        }
    }
    // x · (clip(x + 3, 0, 6) / 6) and x · hard_sigmoid(x).
    if name == names.mul {
        let (p, q) = binary(module, y_op, names.mul)?;
        for (x, h) in [(p, q), (q, p)] {
            if let Some(div) = single_use_def(module, h, names.div) {
                let (n, d) = binary(module, div, names.div)?;
                if is_constant(ctx, module, d, 6.0) {
                    if let Some(mut chain) = relu6_of_x_plus_3(ctx, module, names, n, x) {
                        chain.insert(0, div);
                        candidates.push((x, chain));
                    }
                }
            }
            if let Some(hs) = single_use_def(module, h, names.hard_sigmoid) {
                if unary(module, hs) == Some(x) && hard_sigmoid_is_sixth(ctx, module, hs) {
                    candidates.push((x, SmallVec::from_slice(&[hs])));
                }
            }
        }
    }
    candidates.into_iter().find(|(x, chain)| keeps_float_type(ctx, module, *x, y_op, chain))
}

/// The ops computing `c = clip(x + 3, 0, 6)` from `x`, each after its users.
fn relu6_of_x_plus_3(ctx: &Context, module: &Module, names: &Names, c: ValueId, x: ValueId) -> Option<Chain> {
    let clip = single_use_def(module, c, names.clip)?;
    let bound = |name: &str| module.op_attr(ctx, clip, name).and_then(|a| ctx.attr_as_f64(a));
    if bound("min") != Some(0.0) || bound("max") != Some(6.0) {
        return None;
    }
    let shifted = unary(module, clip)?;
    let add = single_use_def(module, shifted, names.add)?;
    (other_than_constant(ctx, module, add, names.add, 3.0)? == x).then(|| SmallVec::from_slice(&[clip, add]))
}

/// Whether the `fp.hard_sigmoid` `op` has alpha = 1/6 and beta = 1/2 (within 4 f32 ulps).
fn hard_sigmoid_is_sixth(ctx: &Context, module: &Module, op: OpId) -> bool {
    let Ok((alpha, beta)) = qopt_dialect_fp::hard_sigmoid_params(ctx, module.op_attrs(op)) else {
        return false;
    };
    let near = |v: f64, want: f64| (v - want).abs() <= 4.0 * f32_ulp(want);
    near(alpha, 1.0 / 6.0) && near(beta, 0.5)
}
