//! `fold-bn`: folds each inference-mode `fp.batch_norm`, and each per-channel
//! `fp.mul` by a constant or `fp.add` of a constant, into the `fp.conv2d`,
//! `fp.conv1d`, `fp.conv_transpose2d`, `fp.conv_transpose1d` or `fp.dense`
//! before it (TVM's `FoldScaleAxis`, forward direction), and the affine part
//! of an `fp.hard_sigmoid` after any of them.
//!
//! All of them compute `y[n, o, ...] = Σ w[o, ...] · x[...] + b[o]` where each
//! weight element belongs to one output channel `o`: along weight axis 0 for
//! convolutions (O×(C/groups)×kernel for any `groups`, depthwise included) and
//! dense layers (O×K); for transposed convolutions (C×(O/groups)×kernel)
//! element `[c, j, ...]` belongs to channel `g·(O/groups) + j`, `g` the group
//! of input channel `c`. A per-channel affine map `y ↦ (y - m) · s + t` after
//! it is therefore the same op with
//!
//! `w'[o, ...] = w[o, ...] · s[o]` (every weight element of channel `o`) and
//! `b'[o] = (b[o] - m[o]) · s[o] + t[o]`
//!
//! (`b = 0` when the op has no bias). A batch norm is the map with
//! `s = scale / sqrt(var + ε)`, `m = mean`, `t = bias` (ε is its `epsilon`,
//! default 1e-5); `fp.mul(y, c)` is `s = c`, `m = t = 0`; `fp.add(y, c)` is `s = 1`,
//! `m = 0`, `t = c`. `fp.hard_sigmoid(y) {alpha, beta}` is
//! `clip(alpha·y + beta, 0, 1)`: with `alpha > 0` its affine part is the map
//! `s = alpha`, `m = 0`, `t = beta`, and what is left is an
//! `fp.clip {min = 0, max = 1}` after the folded op, which `fuse` turns into
//! `qnn.conv2d_relu {relu_max = 1.0}` with an exact upper bound, like a ReLU6
//! (MobileNetV3's squeeze-excite gates). The new weight and bias are computed
//! in f64 from the stored values and rounded once to the element type. A
//! missing bias becomes a new constant operand, except after a multiply. The
//! new op keeps the old one's attributes and computes the folded op's value,
//! so it gets the location
//! `fused[<producer>, <folded op>]` (so do its new `fp.constant`s); after a
//! hard sigmoid it computes the value before the clip, so its location is
//! `fused[<producer>, "<hard sigmoid's name>.pre_clip"]`, which nothing in the
//! float model matches, and the clip takes the hard sigmoid's location. Where
//! `s` is all ones (an add) it keeps the weight operand itself. The constants
//! left without uses are erased.
//!
//! It assumes, and checks (an op that does not qualify is left alone, never a
//! panic):
//!
//! - the weight, the bias (if any) and the folded op's other operands are
//!   constants (results of a registered [`Traits::CONSTANT_LIKE`] op) of one float
//!   element type with static shapes, and the folded values are finite;
//! - the conv or dense result has exactly one use: the folded op. A batch norm
//!   after a shared conv or dense is kept with a warning and counted in
//!   `kept-batch-norms` (so is one after a conv or dense that cannot be folded for
//!   any other reason); a multiply, add or hard sigmoid after one is left
//!   alone silently;
//! - the batch norm's channel axis 1 is the output channel axis: always for a
//!   convolution (NCHW, NCL) or transposed convolution, for a dense only when
//!   its result has rank 2 (N×C);
//! - the multiply's or add's constant varies at most along the output channel
//!   axis (`[C, 1, 1]` after an NCHW conv2d, `[C, 1]` after a conv1d, `[C]` after
//!   a dense, as `simplify-inference` makes them; any shape that broadcasts along
//!   every other axis, or a splat), in either operand order, and does not
//!   broadcast the result to a larger shape.
//!
//! A batch norm after a chain of reshapes from a convolution's result that
//! keep its batch and channel dimensions (`conv2d → squeeze → batch norm`,
//! how tf2onnx writes a 1-D layer) moves before the reshapes and folds like
//! one right after the convolution.
//!
//! Batch norms after anything else are left to `simplify-inference`, silently;
//! so are hard sigmoids with `alpha ≤ 0`.
//! Ops are visited once, in pre-order, so `conv → mul → add` and `conv → batch
//! norm → batch norm` fold completely. Statistics: `folded-batch-norms`,
//! `folded-scales` (multiplies and adds folded), `folded-hard-sigmoids`,
//! `kept-batch-norms`.
//!
//! ```text
//! // before: w = [1, 2], b = [0.5, -1]; scale = [1, 4], bias = [1, 0], mean = [2, 1],
//! // var = [3, 3], ε = 1, so s = [1, 4] / sqrt(4) = [0.5, 2]
//! %y = fp.conv2d(%x, %w, %b) : (tensor<1x1x4x4xf32>, tensor<2x1x1x1xf32>, tensor<2xf32>) -> tensor<1x2x4x4xf32> loc("conv1")
//! %z = fp.batch_norm(%y, %scale, %bias, %mean, %var) {epsilon = 1.0 : f32} : (tensor<1x2x4x4xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<1x2x4x4xf32>
//! // after: w' = [1 · 0.5, 2 · 2], b' = [(0.5 - 2) · 0.5 + 1, (-1 - 1) · 2 + 0]
//! %0 = fp.constant() {value = dense<[[[[0.5]]], [[[4.0]]]]> : tensor<2x1x1x1xf32>} : () -> tensor<2x1x1x1xf32> loc("conv1")
//! %1 = fp.constant() {value = dense<[0.25, -4.0]> : tensor<2xf32>} : () -> tensor<2xf32> loc("conv1")
//! %z = fp.conv2d(%x, %0, %1) : (tensor<1x1x4x4xf32>, tensor<2x1x1x1xf32>, tensor<2xf32>) -> tensor<1x2x4x4xf32> loc("conv1")
//! ```

use qopt_dialect_fp::op_names as fp_op;
use qopt_dialect_fp::{attrs, shape, BATCH_NORM_EPSILON, BATCH_NORM_PARAMETERS};
use qopt_ir_core::equivalence::Relation;
use qopt_ir_core::pass::PassOptions;
use qopt_ir_core::PassInfo;
use qopt_ir_core::PassResult;
use qopt_ir_core::{
    constant_value, dense_values_f64, type_to_string, AttrData, Attribute, Context, InsertPoint, Module,
    OpId, Pass, PassContext, PassOutcome, Rewriter, Type, ValueId,
};
use smallvec::SmallVec;

use qopt_dialect_fp::constants::{create_constant, dense, erase_if_unused_constant, not_constants};

/// The `fold-bn` pass; see the module docs.
pub struct FoldBn;

const INFO: PassInfo = PassInfo {
    name: "fold-bn",
    summary:
        "fold batch norms, per-channel constant scales and shifts, and hard sigmoids' affine parts into the \
     conv or dense before them",
    description: "Folds `fp.batch_norm` with constant parameters, and `fp.mul` / `fp.add` by a per-channel \
     constant, into a preceding `fp.conv2d`, `fp.conv1d`, `fp.conv_transpose2d`, \
     `fp.conv_transpose1d` or `fp.dense` with constant weight \
     (and bias) whose result has no other use: `w'[o, ...] = w[o, ...] * s[o]` and \
     `b'[o] = (b[o] - mean[o]) * s[o] + beta[o]` with `s = scale / sqrt(var + epsilon)` \
     (a multiply by `c` is `s = c`; an add of `c` is `b' = b + c`; a transposed convolution's \
     weight C×(O/groups)×kernel is scaled by the output channel of each element), computed in f64 and \
     rounded once. A missing bias becomes a new constant. `fp.hard_sigmoid {alpha, beta}` with \
     `alpha > 0` after any of them folds `s = alpha`, `b' = alpha·b + beta` \
     and leaves `fp.clip {min = 0, max = 1}`, which `fuse` treats like a ReLU6. Batch norms after a \
     conv or dense that cannot be folded (e.g. one with other users) are kept with a warning; one after \
     reshapes of a convolution's result that keep the batch and channel dimensions (a squeeze) moves \
     before them and folds. \
     Statistics: `folded-batch-norms`, `folded-scales`, `folded-hard-sigmoids`, `kept-batch-norms`.\n\n\
     ```\n\
     %y = fp.conv2d(%x, %w, %b) : ...\n\
     %z = fp.batch_norm(%y, %scale, %bias, %mean, %var) {epsilon = 1.0e-5 : f32} : ...\n\
     // -> %z = fp.conv2d(%x, %w', %b') : ...\n\
     ```",
    preserves_semantics: true,
    // Folded weights and biases are computed in f64 and rounded once.
    equivalence: Some(Relation::Real),
};

impl Pass for FoldBn {
    fn info(&self) -> &'static PassInfo {
        &INFO
    }

    fn run(&self, cx: &mut PassContext<'_>, module: &mut Module, _options: &PassOptions) -> PassResult {
        let names = Names::new(cx.ctx);
        let candidates: Vec<OpId> = module.ops_where(|op| {
            let name = module.op_name(op);
            name == names.batch_norm || name == names.mul || name == names.add || name == names.hard_sigmoid
        });
        let (mut folded_bn, mut folded_scales, mut folded_hard_sigmoids, mut kept) = (0u64, 0u64, 0u64, 0u64);
        for op in candidates {
            if module.is_erased(op) {
                continue;
            }
            let is_bn = module.op_name(op) == names.batch_norm;
            let is_hard_sigmoid = module.op_name(op) == names.hard_sigmoid;
            match fold_into_producer(cx.ctx, module, &names, op) {
                Outcome::Folded if is_bn => folded_bn += 1,
                Outcome::Folded if is_hard_sigmoid => folded_hard_sigmoids += 1,
                Outcome::Folded => folded_scales += 1,
                Outcome::Kept(reason) if is_bn => {
                    kept += 1;
                    cx.warn_at(module, op, format!("fold-bn: fp.batch_norm kept: {reason}"));
                }
                Outcome::Kept(_) | Outcome::Skipped => {}
            }
        }
        cx.add_stat("folded-batch-norms", folded_bn);
        cx.add_stat("folded-scales", folded_scales);
        cx.add_stat("folded-hard-sigmoids", folded_hard_sigmoids);
        cx.add_stat("kept-batch-norms", kept);
        Ok(PassOutcome::from_changed(folded_bn + folded_scales + folded_hard_sigmoids > 0))
    }
}

qopt_ir_core::interned_op_names! {
    /// The interned names of the ops the pass reads.
    struct Names {
        batch_norm = fp_op::BATCH_NORM, mul = fp_op::MUL, add = fp_op::ADD,
        hard_sigmoid = fp_op::HARD_SIGMOID, conv2d = fp_op::CONV2D, conv1d = fp_op::CONV1D,
        conv_transpose2d = fp_op::CONV_TRANSPOSE2D, conv_transpose1d = fp_op::CONV_TRANSPOSE1D,
        dense = fp_op::DENSE,
    }
}

impl Names {
    /// The name and weight rank of a conv or dense `op`, `None` for any other op.
    fn producer(&self, module: &Module, op: OpId) -> Option<(&'static str, usize)> {
        if op.is_none() || module.is_erased(op) {
            return None;
        }
        let name = module.op_name(op);
        if name == self.conv2d {
            Some((fp_op::CONV2D, 4))
        } else if name == self.conv1d {
            Some((fp_op::CONV1D, 3))
        } else if name == self.conv_transpose2d {
            Some((fp_op::CONV_TRANSPOSE2D, 4))
        } else if name == self.conv_transpose1d {
            Some((fp_op::CONV_TRANSPOSE1D, 3))
        } else if name == self.dense {
            Some((fp_op::DENSE, 2))
        } else {
            None
        }
    }
}

/// What became of one batch norm, multiply or add.
enum Outcome {
    /// Folded into the conv or dense before it.
    Folded,
    /// It follows a conv or dense but cannot be folded, for this reason.
    Kept(String),
    /// It does not follow a conv or dense (or is not a multiply or add by a
    /// constant).
    Skipped,
}

/// The kind of op folded into the producer.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    BatchNorm,
    Mul,
    Add,
    /// `clip(alpha·y + beta, 0, 1)`: the affine part folds, a clip stays.
    HardSigmoid,
}

/// The conv or dense an op follows, with its constant weight and bias read.
struct Producer {
    op: OpId,
    /// `fp.conv2d`, `fp.conv1d`, `fp.conv_transpose2d`, `fp.conv_transpose1d`
    /// or `fp.dense`.
    name: &'static str,
    /// The input `x`.
    input: ValueId,
    weight: ValueId,
    weight_values: Vec<f64>,
    /// The bias operand, its type and values, if there is one.
    bias: Option<(ValueId, Type, Vec<f64>)>,
    /// Output channels (weight axis 0, or groups × weight axis 1 for a
    /// transposed convolution).
    channels: usize,
    /// Which output channel each weight element belongs to.
    layout: WeightLayout,
    /// The result's shape and element type.
    result_shape: Vec<i64>,
    elem: Type,
    /// The output channel axis of the result: 1 for a conv, the last for a dense.
    channel_axis: usize,
}

/// How the elements of a weight (row-major) map to output channels.
#[derive(Clone, Copy, Debug)]
enum WeightLayout {
    /// O×…: element `i` of an `O·row`-element weight belongs to channel `i / row`.
    OutputFirst,
    /// C×(O/groups)×kernel, a transposed convolution: element
    /// `[c, j, k]` belongs to channel `(c / in_per_group)·per_group + j`.
    Transposed { in_per_group: usize, per_group: usize, kernel: usize },
}

impl WeightLayout {
    /// The output channel of weight element `i`, `row` being the weight's
    /// length divided by the number of output channels.
    fn channel(self, i: usize, row: usize) -> usize {
        match self {
            WeightLayout::OutputFirst => i / row,
            WeightLayout::Transposed { in_per_group, per_group, kernel } => {
                let c = i / (per_group * kernel);
                (c / in_per_group) * per_group + (i / kernel) % per_group
            }
        }
    }
}

/// The per-channel map `y ↦ (y - sub) · scale + add`.
struct Affine {
    scale: Vec<f64>,
    sub: Vec<f64>,
    add: Vec<f64>,
}

/// Folds `op` (a batch norm, multiply or add) into the conv or dense before it
/// if it can; on anything but `Folded` the IR is unchanged.
fn fold_into_producer(ctx: &mut Context, module: &mut Module, names: &Names, op: OpId) -> Outcome {
    let name = module.op_name(op);
    let kind = if name == names.batch_norm {
        Kind::BatchNorm
    } else if name == names.mul {
        Kind::Mul
    } else if name == names.add {
        Kind::Add
    } else if name == names.hard_sigmoid {
        Kind::HardSigmoid
    } else {
        return Outcome::Skipped;
    };
    if module.num_results(op) != 1 {
        return Outcome::Skipped;
    }
    // `y`, the producer's result, and for a multiply or add its constant operand.
    let (y, other) = match kind {
        Kind::BatchNorm => {
            if module.num_operands(op) != 1 + BATCH_NORM_PARAMETERS.len() {
                return Outcome::Skipped;
            }
            (module.operand(op, 0), None)
        }
        Kind::HardSigmoid => {
            if module.num_operands(op) != 1 {
                return Outcome::Skipped;
            }
            (module.operand(op, 0), None)
        }
        Kind::Mul | Kind::Add => {
            if module.num_operands(op) != 2 {
                return Outcome::Skipped;
            }
            let (a, b) = (module.operand(op, 0), module.operand(op, 1));
            let follows = |v: ValueId| names.producer(module, module.defining_op(v)).is_some();
            if follows(a) && constant_value(ctx, module, b).is_some() {
                (a, Some(b))
            } else if follows(b) && constant_value(ctx, module, a).is_some() {
                (b, Some(a))
            } else {
                return Outcome::Skipped;
            }
        }
    };
    if kind == Kind::BatchNorm {
        if let Some(sunk) = sink_below_reshapes(ctx, module, names, op) {
            return fold_into_producer(ctx, module, names, sunk);
        }
    }
    let producer_op = module.defining_op(y);
    let Some((producer_name, weight_rank)) = names.producer(module, producer_op) else {
        return Outcome::Skipped;
    };
    let other_uses = module.uses(y).filter(|u| u.op != op).count();
    if other_uses > 0 && kind == Kind::HardSigmoid {
        return Outcome::Skipped;
    }
    if other_uses > 0 {
        return Outcome::Kept(format!(
            "the {producer_name} before it has {other_uses} other use{}",
            if other_uses == 1 { "" } else { "s" }
        ));
    }
    let producer = match read_producer(ctx, module, producer_op, producer_name, weight_rank) {
        Ok(p) => p,
        Err(reason) => return Outcome::Kept(reason),
    };
    let affine = match (kind, other) {
        (Kind::BatchNorm, _) => batch_norm_affine(ctx, module, op, &producer),
        (Kind::HardSigmoid, _) => match qopt_dialect_fp::hard_sigmoid_params(ctx, module.op_attrs(op)) {
            Ok((alpha, beta)) if alpha > 0.0 => Ok(Affine {
                scale: vec![alpha; producer.channels],
                sub: vec![0.0; producer.channels],
                add: vec![beta; producer.channels],
            }),
            _ => return Outcome::Skipped,
        },
        (Kind::Mul | Kind::Add, Some(c)) => {
            constant_affine(ctx, module, op, y, c, &producer, kind == Kind::Mul)
        }
        (Kind::Mul | Kind::Add, None) => return Outcome::Skipped,
    };
    let affine = match affine {
        Ok(a) => a,
        Err(reason) => return Outcome::Kept(reason),
    };
    match rebuild(ctx, module, op, &producer, &affine, kind != Kind::Mul, kind == Kind::HardSigmoid) {
        Ok(()) => Outcome::Folded,
        Err(reason) => Outcome::Kept(reason),
    }
}

/// Moves batch norm `bn`, which follows a chain of reshapes from a
/// convolution's result (`conv → squeeze → batch norm`, how tf2onnx writes a
/// 1-D layer), to that result: `bn(reshape(…(y)))` becomes
/// `reshape(…(bn(y)))`, the same per-channel map on the same elements when
/// every reshape keeps the batch and channel dimensions. Returns the new
/// batch norm, which then folds like one right after its convolution; `None`
/// (nothing changed) when the chain is not one (a reshape's result used
/// twice, a moved channel, a dense before it).
fn sink_below_reshapes(ctx: &mut Context, module: &mut Module, names: &Names, bn: OpId) -> Option<OpId> {
    let y = module.operand(bn, 0);
    let leading = |ty: Type| -> Option<[i64; 2]> {
        let shape = ctx.tensor_shape(ty)?;
        let lead = [*shape.first()?, *shape.get(1)?];
        lead.iter().all(|&d| d >= 0).then_some(lead)
    };
    let want = leading(module.value_type(y))?;
    let (value, chain) = qopt_dialect_fp::reshape_chain(ctx, module, y, |ty| leading(ty) == Some(want));
    let first_reshape = *chain.last()?;
    let (producer_name, _) = names.producer(module, module.defining_op(value))?;
    if producer_name == fp_op::DENSE || module.uses(value).count() != 1 {
        return None;
    }
    let params: SmallVec<[ValueId; 4]> = module.operands(bn).skip(1).collect();
    let mut operands = vec![value];
    operands.extend(params);
    let state = qopt_ir_core::OperationState::new(names.batch_norm)
        .operands(&operands)
        .results(&[module.value_type(value)])
        .attrs(module.op_attrs(bn))
        .loc(module.op_loc(bn));
    // At the batch norm, whose parameters are defined before it, and the
    // reshapes moved after it, outermost last.
    let sunk = module.create_op(state);
    module.insert_op_before(bn, sunk);
    for &reshape in chain.iter().rev() {
        module.move_op_before(reshape, bn);
    }
    module.set_operand(first_reshape, 0, module.result(sunk, 0));
    module.replace_all_uses(module.result(bn, 0), y);
    // invariant: the batch norm's result has no uses left.
    module.erase_op(bn).ok()?;
    Some(sunk)
}

/// Reads the conv or dense `op` and its constant weight and bias.
fn read_producer(
    ctx: &Context,
    module: &Module,
    op: OpId,
    name: &'static str,
    weight_rank: usize,
) -> Result<Producer, String> {
    let operands = module.num_operands(op);
    if !(2..=3).contains(&operands) || module.num_results(op) != 1 {
        return Err(format!("the {name} before it does not have 2 or 3 operands and 1 result"));
    }
    let (result_shape, elem) = shape::tensor_parts(ctx, module.value_type(module.result(op, 0)))
        .map(|(s, e)| (s.to_vec(), e))
        .ok_or_else(|| format!("the {name} before it does not produce a tensor"))?;
    if !shape::is_float_element(ctx, elem) {
        return Err(format!("the {name} before it does not have float elements"));
    }
    let weight = module.operand(op, 1);
    let (weight_shape, weight_values) = read_constant(ctx, module, weight, elem)
        .ok_or_else(|| format!("the weight of the {name} before it is not a constant"))?;
    if weight_shape.len() != weight_rank {
        return Err(format!("the weight of the {name} before it does not have rank {weight_rank}"));
    }
    let dim = |i: usize| usize::try_from(weight_shape[i]).unwrap_or(0);
    let (channels, layout) = if name == fp_op::CONV_TRANSPOSE2D || name == fp_op::CONV_TRANSPOSE1D {
        let groups = attrs::int_in(ctx, module.op_attrs(op), "groups", 1)?;
        let groups = usize::try_from(groups).unwrap_or(0);
        let (inputs, per_group) = (dim(0), dim(1));
        if groups == 0 || inputs % groups != 0 {
            return Err(format!(
                "the {name} before it does not split its {inputs} input channels into {groups} groups"
            ));
        }
        let kernel = weight_values.len().checked_div(inputs * per_group).unwrap_or(0);
        let layout = WeightLayout::Transposed { in_per_group: inputs / groups, per_group, kernel };
        (per_group.checked_mul(groups).unwrap_or(0), layout)
    } else {
        (dim(0), WeightLayout::OutputFirst)
    };
    if channels == 0 || weight_values.is_empty() || weight_values.len() % channels != 0 {
        return Err(format!("the weight of the {name} before it is empty"));
    }
    let channel_axis = if name == fp_op::DENSE { result_shape.len().saturating_sub(1) } else { 1 };
    match result_shape.get(channel_axis) {
        Some(&c) if usize::try_from(c) == Ok(channels) || shape::is_dynamic(c) => {}
        _ => return Err(format!("the result of the {name} before it does not have {channels} channels")),
    }
    let bias = if operands == 3 {
        let b = module.operand(op, 2);
        let (_, values) = read_constant(ctx, module, b, elem)
            .ok_or_else(|| format!("the bias of the {name} before it is not a constant"))?;
        if values.len() != channels {
            return Err(format!("the bias of the {name} before it does not have {channels} elements"));
        }
        Some((b, module.value_type(b), values))
    } else {
        None
    };
    Ok(Producer {
        op,
        name,
        input: module.operand(op, 0),
        weight,
        weight_values,
        bias,
        channels,
        layout,
        result_shape,
        elem,
        channel_axis,
    })
}

/// The shape and values (in f64) of the constant `v`, if it is a constant of
/// element type `elem`, a float type, with a static shape.
fn read_constant(ctx: &Context, module: &Module, v: ValueId, elem: Type) -> Option<(Vec<i64>, Vec<f64>)> {
    let attr = constant_value(ctx, module, v)?;
    let AttrData::Dense(d) = ctx.attr_data(attr) else { return None };
    if d.ty != module.value_type(v) || ctx.element_type(d.ty) != elem || !shape::is_float_element(ctx, elem) {
        return None;
    }
    let shape = ctx.tensor_shape(d.ty)?.to_vec();
    let values = dense_values_f64(ctx, d, elem)?;
    Some((shape, values))
}

/// The batch norm `op` as a per-channel map of its input's channels.
fn batch_norm_affine(
    ctx: &Context,
    module: &Module,
    op: OpId,
    producer: &Producer,
) -> Result<Affine, String> {
    if producer.channel_axis != 1 {
        return Err(format!(
            "the {} before it has a rank-{} result, whose features are not on the channel axis 1",
            producer.name,
            producer.result_shape.len()
        ));
    }
    let mut values: SmallVec<[Vec<f64>; 4]> = SmallVec::new();
    let mut missing: Vec<&str> = Vec::new();
    for (i, name) in BATCH_NORM_PARAMETERS.iter().enumerate() {
        match read_constant(ctx, module, module.operand(op, 1 + i), producer.elem) {
            Some((_, v)) => values.push(v),
            None => missing.push(name),
        }
    }
    if !missing.is_empty() {
        return Err(not_constants(&missing));
    }
    if values.iter().any(|v| v.len() != producer.channels) {
        return Err(format!(
            "its parameters do not all have {} elements, one per output channel of the {}",
            producer.channels, producer.name
        ));
    }
    let epsilon = attrs::float_in(ctx, module.op_attrs(op), "epsilon", BATCH_NORM_EPSILON)?;
    let [scale, bias, mean, var] = [&values[0], &values[1], &values[2], &values[3]];
    let s: Vec<f64> = scale.iter().zip(var).map(|(&g, &v)| g / (v + epsilon).sqrt()).collect();
    Ok(Affine { scale: s, sub: mean.clone(), add: bias.clone() })
}

/// The multiply (`mul`) or add of the constant `c` (the other operand being the
/// producer's result `y`) as a per-channel map.
fn constant_affine(
    ctx: &Context,
    module: &Module,
    op: OpId,
    y: ValueId,
    c: ValueId,
    producer: &Producer,
    mul: bool,
) -> Result<Affine, String> {
    if module.value_type(module.result(op, 0)) != module.value_type(y) {
        return Err("it broadcasts to a larger result".to_string());
    }
    let (shape, values) = read_constant(ctx, module, c, producer.elem)
        .ok_or("its other operand is not a float constant of the same element type")?;
    let per_channel = channel_values(
        &shape,
        &values,
        producer.result_shape.len(),
        producer.channel_axis,
        producer.channels,
    )
    .ok_or("its constant varies along an axis other than the output channels")?;
    let zeros = vec![0.0; producer.channels];
    Ok(if mul {
        Affine { scale: per_channel, sub: zeros.clone(), add: zeros }
    } else {
        Affine { scale: vec![1.0; producer.channels], sub: zeros, add: per_channel }
    })
}

/// The `channels` values of a constant of `shape` that broadcasts against a
/// rank-`rank` result varying only along `axis`, or of a constant whose elements
/// are all equal; `None` otherwise.
fn channel_values(
    shape: &[i64],
    values: &[f64],
    rank: usize,
    axis: usize,
    channels: usize,
) -> Option<Vec<f64>> {
    if shape.len() <= rank {
        let offset = rank - shape.len();
        let channel_only = shape.iter().enumerate().all(|(j, &d)| {
            if offset + j == axis {
                d == 1 || usize::try_from(d) == Ok(channels)
            } else {
                d == 1
            }
        });
        if channel_only {
            if values.len() == channels {
                return Some(values.to_vec());
            }
            if let [v] = values {
                return Some(vec![*v; channels]);
            }
        }
    }
    let first = *values.first()?;
    values.iter().all(|&v| v == first).then(|| vec![first; channels])
}

/// Replaces `op` and its producer by one producer with the folded weight and
/// bias (a bias is always made if `with_bias`), followed by
/// `fp.clip {min = 0, max = 1}` if `then_clip` (a hard sigmoid); on `Err` the
/// IR is unchanged.
fn rebuild(
    ctx: &mut Context,
    module: &mut Module,
    op: OpId,
    producer: &Producer,
    affine: &Affine,
    with_bias: bool,
    then_clip: bool,
) -> Result<(), String> {
    let channels = producer.channels;
    let row = producer.weight_values.len() / channels;
    let weights: Vec<f64> = producer
        .weight_values
        .iter()
        .enumerate()
        .map(|(i, &w)| w * affine.scale[producer.layout.channel(i, row)])
        .collect();
    let old_bias = producer.bias.as_ref().map(|(_, _, b)| b.as_slice());
    let biases: Vec<f64> = (0..channels)
        .map(|o| (old_bias.map_or(0.0, |b| b[o]) - affine.sub[o]) * affine.scale[o] + affine.add[o])
        .collect();
    if !weights.iter().chain(&biases).all(|v| v.is_finite()) {
        return Err("the folded weight or bias would not be finite".to_string());
    }
    // An add scales by 1: the weight stays as it is (and stays shared).
    let w_attr = if affine.scale.iter().all(|&s| s == 1.0) {
        None
    } else {
        let weight_ty = module.value_type(producer.weight);
        Some(dense(ctx, weight_ty, &weights)?)
    };
    let b_attr = if producer.bias.is_some() || with_bias {
        let bias_ty = match &producer.bias {
            Some((_, ty, _)) => *ty,
            None => ctx.tensor_type(&[channels as i64], producer.elem),
        };
        Some(dense(ctx, bias_ty, &biases)?)
    } else {
        None
    };

    // The constants the old ops used, erased below if nothing else uses them.
    let mut constants: SmallVec<[ValueId; 6]> = SmallVec::new();
    constants.push(producer.weight);
    constants.extend(producer.bias.as_ref().map(|(b, _, _)| *b));
    constants.extend(module.operands(op).filter(|&v| module.defining_op(v) != producer.op));

    let result = module.result(op, 0);
    let result_ty = module.value_type(result);
    // The folded op computes what `op` did: a fused location whose last part
    // is `op`'s, so layer-by-layer comparison matches it there. Before a clip
    // it computes a value the float model does not have: its last part is a
    // name nothing matches, and the clip takes `op`'s location.
    let (producer_loc, op_loc) = (module.op_loc(producer.op), module.op_loc(op));
    let last = if then_clip {
        let name = ctx.location_names(op_loc).first().map_or("hard_sigmoid", |n| n).to_string();
        ctx.name_loc(&format!("{name}.pre_clip"))
    } else {
        op_loc
    };
    let loc = ctx.fused_loc(&[producer_loc, last]);
    let attrs = module.op_attrs(producer.op);
    let clip_attrs = then_clip.then(|| {
        let (zero, one) = (ctx.float_attr(0.0, producer.elem), ctx.float_attr(1.0, producer.elem));
        ctx.dict_attr(&[("min", zero), ("max", one)])
    });
    let mut rewriter = Rewriter::new(ctx, module);
    rewriter.set_insertion_point(InsertPoint::Before(producer.op));
    rewriter.set_loc(loc);
    let built = build_folded(&mut rewriter, producer, w_attr, b_attr, attrs).and_then(|v| match clip_attrs {
        Some(clip) => {
            rewriter.set_loc(op_loc);
            let c = rewriter.create_inferred(fp_op::CLIP, &[v], clip)?;
            Ok(rewriter.module.result(c, 0))
        }
        None => Ok(v),
    });
    let created = rewriter.take_changes().created;
    let kept = match built {
        Ok(v) if rewriter.module.value_type(v) == result_ty => None,
        Ok(v) => Some(format!(
            "the folded {} would have type {}",
            producer.name,
            type_to_string(rewriter.ctx, rewriter.module.value_type(v))
        )),
        Err(ref e) => Some(format!("the folded {} cannot be built: {e}", producer.name)),
    };
    let folded = match (kept, built) {
        (None, Ok(v)) => v,
        (reason, _) => {
            // Users come after what they use, so erase in reverse creation order.
            for &c in created.iter().rev() {
                let _ = rewriter.module.erase_op(c);
            }
            return Err(reason.unwrap_or_else(|| "nothing was built".to_string()));
        }
    };
    rewriter.replace_all_uses(result, folded);
    // invariant: `op` has no uses left, and it was the producer's only user, so
    // both erase.
    let _ = rewriter.erase_op(op);
    let _ = rewriter.erase_op(producer.op);
    for &c in &constants {
        erase_if_unused_constant(ctx, module, c);
    }
    Ok(())
}

/// The new weight (`None`: the old one) and bias constants, then the producer
/// over them; returns the producer's result.
fn build_folded(
    rewriter: &mut Rewriter<'_>,
    producer: &Producer,
    weight: Option<Attribute>,
    bias: Option<Attribute>,
    attrs: Attribute,
) -> Result<ValueId, String> {
    let mut operands: SmallVec<[ValueId; 3]> = SmallVec::new();
    operands.push(producer.input);
    operands.push(match weight {
        Some(w) => create_constant(rewriter, w)?,
        None => producer.weight,
    });
    if let Some(b) = bias {
        operands.push(create_constant(rewriter, b)?);
    }
    let op = rewriter.create_inferred(producer.name, &operands, attrs)?;
    if rewriter.module.num_results(op) != 1 {
        return Err("it does not have one result".to_string());
    }
    Ok(rewriter.module.result(op, 0))
}

#[cfg(test)]
mod tests {
    use super::{channel_values, FoldBn};
    use crate::test_ir::{on_small_stack, registry, test_context, TestIr};
    use qopt_ir_core::pass::{Instrumentation, PassManager, PassRegistry};
    use qopt_ir_core::{module_to_string, parse_module};
    use std::sync::Arc;

    /// Parses `input` (fp and test dialects) and runs `fold-bn` over it; with
    /// `verified`, the input is verified first and the output after the pass,
    /// otherwise neither is. Returns the printed module, the statistics and the
    /// warnings' messages.
    /// The statistics and warnings of a run that folded one batch norm and nothing else.
    fn assert_one_batch_norm_folded(stats: &[(&str, u64)], warnings: &[String]) {
        let folded = [
            ("folded-batch-norms", 1),
            ("folded-hard-sigmoids", 0),
            ("folded-scales", 0),
            ("kept-batch-norms", 0),
        ];
        assert_eq!(stats, folded);
        assert!(warnings.is_empty(), "{warnings:?}");
    }

    fn fold(input: &str, verified: bool) -> (String, Vec<(&'static str, u64)>, Vec<String>) {
        let mut ctx = test_context();
        qopt_dialect_fp::register(&mut ctx).unwrap();
        let mut module = parse_module(&mut ctx, input.as_bytes(), "input.qir").unwrap();
        if verified {
            qopt_ir_core::verify(&mut ctx, &module).unwrap();
        }
        let mut registry = PassRegistry::new();
        registry.register(Arc::new(FoldBn)).unwrap();
        let manager = PassManager::parse(&registry, "fold-bn").unwrap();
        let mut inst = Instrumentation {
            statistics: true,
            verify_each: verified,
            reproducer_dir: None,
            ..Instrumentation::default()
        };
        let report = match manager.run(&mut ctx, &mut module, &mut inst) {
            Ok(report) => report,
            Err(failure) => panic!("{}", failure.message()),
        };
        let stats = report.statistics.into_iter().flat_map(|(_, counters)| counters).collect();
        let warnings = report.warnings.iter().map(|d| d.message.to_string()).collect();
        (module_to_string(&ctx, &module), stats, warnings)
    }

    #[test]
    fn channel_values_accepts_channel_only_shapes_and_splats() {
        // NCHW result, channel axis 1, 2 channels.
        assert_eq!(channel_values(&[2, 1, 1], &[3.0, 4.0], 4, 1, 2), Some(vec![3.0, 4.0]));
        assert_eq!(channel_values(&[1, 2, 1, 1], &[3.0, 4.0], 4, 1, 2), Some(vec![3.0, 4.0]));
        assert_eq!(channel_values(&[], &[5.0], 4, 1, 2), Some(vec![5.0, 5.0]));
        assert_eq!(channel_values(&[1, 1, 1], &[5.0], 4, 1, 2), Some(vec![5.0, 5.0]));
        // [C] would broadcast along W, not C.
        assert_eq!(channel_values(&[2], &[3.0, 4.0], 4, 1, 2), None);
        // ... unless its values are all equal.
        assert_eq!(channel_values(&[2], &[3.0, 3.0], 4, 1, 2), Some(vec![3.0, 3.0]));
        // Dense, rank 2: [C] is the last axis.
        assert_eq!(channel_values(&[3], &[1.0, 2.0, 3.0], 2, 1, 3), Some(vec![1.0, 2.0, 3.0]));
        assert_eq!(channel_values(&[3, 1], &[1.0, 2.0, 3.0], 2, 1, 3), None);
        assert_eq!(channel_values(&[0], &[], 2, 1, 3), None);
    }

    /// A dynamic batch size is fine: only the weight and parameters need static
    /// shapes. s = 1 / sqrt(3 + 1) = 0.5.
    #[test]
    fn dynamic_batch_folds() {
        let input = r#"func.func @f(%x: tensor<?x1x2x2xf32>) -> tensor<?x1x2x2xf32> {
  %w = fp.constant() {value = dense<4.0> : tensor<1x1x1x1xf32>} : () -> tensor<1x1x1x1xf32>
  %one = fp.constant() {value = dense<1.0> : tensor<1xf32>} : () -> tensor<1xf32>
  %three = fp.constant() {value = dense<3.0> : tensor<1xf32>} : () -> tensor<1xf32>
  %y = fp.conv2d(%x, %w) : (tensor<?x1x2x2xf32>, tensor<1x1x1x1xf32>) -> tensor<?x1x2x2xf32>
  %z = fp.batch_norm(%y, %one, %one, %one, %three) {epsilon = 1.0 : f32} : (tensor<?x1x2x2xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<?x1x2x2xf32>
  func.return %z : tensor<?x1x2x2xf32>
}
"#;
        let (ir, stats, warnings) = fold(input, true);
        assert!(!ir.contains("batch_norm"), "{ir}");
        assert!(ir.contains("dense<[[[[2.0]]]]> : tensor<1x1x1x1xf32>"), "{ir}");
        // b' = (0 - 1) · 0.5 + 1 = 0.5.
        assert!(ir.contains("dense<[0.5]> : tensor<1xf32>"), "{ir}");
        assert_one_batch_norm_folded(&stats, &warnings);
    }

    /// A transposed convolution with two groups (weight 4×3×2×2: 2 input and
    /// 3 output channels per group) and a bias, then a batch norm over its 6
    /// channels, folds; the folded op computes what the pair did (both run by
    /// the interpreter). The scale differs per channel, so a weight element
    /// scaled by the wrong channel would show.
    #[test]
    fn conv_transpose_folds_per_group() {
        use qopt_interp::{Interpreter, KernelRegistry, Tensor};
        let list = |values: &[f64]| values.iter().map(|v| format!("{v:?}")).collect::<Vec<_>>().join(", ");
        // dense<[[[[..], [..]], ...]]> for 4×3×2×2, values (i mod 7) / 4 - 0.75.
        let rows: Vec<String> = (0..24)
            .map(|r| format!("[{}]", list(&[(2 * r) % 7, (2 * r + 1) % 7].map(|v| v as f64 * 0.25 - 0.75))))
            .collect();
        let kernels: Vec<String> = rows.chunks(2).map(|k| format!("[{}]", k.join(", "))).collect();
        let inputs: Vec<String> = kernels.chunks(3).map(|c| format!("[{}]", c.join(", "))).collect();
        let w = format!("[{}]", inputs.join(", "));
        let vec6 =
            |f: fn(f64) -> f64| format!("[{}]", list(&(0..6).map(|c| f(c as f64)).collect::<Vec<_>>()));
        let (b, scale, shift, mean, var) = (
            vec6(|c| c * 0.5 - 1.0),
            vec6(|c| c + 0.5),
            vec6(|c| 2.0 - c),
            vec6(|c| c * 0.1),
            vec6(|c| c * c + 0.25),
        );
        let input = format!(
            r#"func.func @f(%x: tensor<1x4x3x3xf32>) -> tensor<1x6x6x6xf32> {{
  %w = fp.constant() {{value = dense<{w}> : tensor<4x3x2x2xf32>}} : () -> tensor<4x3x2x2xf32>
  %b = fp.constant() {{value = dense<{b}> : tensor<6xf32>}} : () -> tensor<6xf32>
  %s = fp.constant() {{value = dense<{scale}> : tensor<6xf32>}} : () -> tensor<6xf32>
  %t = fp.constant() {{value = dense<{shift}> : tensor<6xf32>}} : () -> tensor<6xf32>
  %m = fp.constant() {{value = dense<{mean}> : tensor<6xf32>}} : () -> tensor<6xf32>
  %v = fp.constant() {{value = dense<{var}> : tensor<6xf32>}} : () -> tensor<6xf32>
  %y = fp.conv_transpose2d(%x, %w, %b) {{groups = 2, stride = [2, 2]}} : (tensor<1x4x3x3xf32>, tensor<4x3x2x2xf32>, tensor<6xf32>) -> tensor<1x6x6x6xf32>
  %z = fp.batch_norm(%y, %s, %t, %m, %v) : (tensor<1x6x6x6xf32>, tensor<6xf32>, tensor<6xf32>, tensor<6xf32>, tensor<6xf32>) -> tensor<1x6x6x6xf32>
  func.return %z : tensor<1x6x6x6xf32>
}}
"#
        );
        let (ir, stats, warnings) = fold(&input, true);
        assert!(!ir.contains("batch_norm") && ir.contains("fp.conv_transpose2d"), "{ir}");
        assert_one_batch_norm_folded(&stats, &warnings);
        let x = Tensor::from_f32(&[1, 4, 3, 3], (0..36).map(|i| ((i * 5) % 11) as f32 * 0.2 - 1.0).collect())
            .unwrap();
        let run = |text: &str| {
            let mut ctx = test_context();
            qopt_dialect_fp::register(&mut ctx).unwrap();
            let module = parse_module(&mut ctx, text.as_bytes(), "input.qir").unwrap();
            let kernels = KernelRegistry::standard();
            let mut interp = Interpreter::new(&ctx, &module, &kernels);
            interp.run("f", std::slice::from_ref(&x)).unwrap().remove(0).to_f64_vec()
        };
        let (before, after) = (run(&input), run(&ir));
        assert_eq!(before.len(), 216);
        let worst = before.iter().zip(&after).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
        assert!(worst < 1e-5, "worst difference {worst}");
    }

    /// IR the verifier would reject (parameters of the wrong length, integer
    /// weights, an empty weight, a batch norm with four operands, a multiply by
    /// an integer constant) leaves the pass without a panic and the IR as it was.
    #[test]
    fn odd_ir_is_left_alone() {
        let input = r#"func.func @f(%x: tensor<1x2x2x2xf32>) -> (tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>, tensor<1x0x2x2xf32>, tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>) {
  %w = fp.constant() {value = dense<1.0> : tensor<2x2x1x1xf32>} : () -> tensor<2x2x1x1xf32>
  %wi = fp.constant() {value = dense<1> : tensor<2x2x1x1xi8>} : () -> tensor<2x2x1x1xi8>
  %we = fp.constant() {value = dense<1.0> : tensor<0x2x1x1xf32>} : () -> tensor<0x2x1x1xf32>
  %p3 = fp.constant() {value = dense<1.0> : tensor<3xf32>} : () -> tensor<3xf32>
  %p2 = fp.constant() {value = dense<1.0> : tensor<2xf32>} : () -> tensor<2xf32>
  %p0 = fp.constant() {value = dense<[]> : tensor<0xf32>} : () -> tensor<0xf32>
  %ci = fp.constant() {value = dense<2> : tensor<2x1x1xi32>} : () -> tensor<2x1x1xi32>
  %0 = fp.conv2d(%x, %w) : (tensor<1x2x2x2xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x2x2xf32>
  %1 = fp.batch_norm(%0, %p3, %p3, %p3, %p3) : (tensor<1x2x2x2xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<1x2x2x2xf32>
  %2 = fp.conv2d(%x, %wi) : (tensor<1x2x2x2xf32>, tensor<2x2x1x1xi8>) -> tensor<1x2x2x2xf32>
  %3 = fp.batch_norm(%2, %p2, %p2, %p2, %p2) : (tensor<1x2x2x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<1x2x2x2xf32>
  %4 = fp.conv2d(%x, %we) : (tensor<1x2x2x2xf32>, tensor<0x2x1x1xf32>) -> tensor<1x0x2x2xf32>
  %5 = fp.batch_norm(%4, %p0, %p0, %p0, %p0) : (tensor<1x0x2x2xf32>, tensor<0xf32>, tensor<0xf32>, tensor<0xf32>, tensor<0xf32>) -> tensor<1x0x2x2xf32>
  %6 = fp.conv2d(%x, %w) : (tensor<1x2x2x2xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x2x2xf32>
  %7 = fp.batch_norm(%6, %p2, %p2, %p2) : (tensor<1x2x2x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<1x2x2x2xf32>
  %8 = fp.conv2d(%x, %w) : (tensor<1x2x2x2xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x2x2xf32>
  %9 = fp.mul(%8, %ci) : (tensor<1x2x2x2xf32>, tensor<2x1x1xi32>) -> tensor<1x2x2x2xf32>
  func.return %1, %3, %5, %7, %9 : tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>, tensor<1x0x2x2xf32>, tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>
}
"#;
        let mut ctx = test_context();
        qopt_dialect_fp::register(&mut ctx).unwrap();
        let parsed = parse_module(&mut ctx, input.as_bytes(), "input.qir").unwrap();
        let before = module_to_string(&ctx, &parsed);
        let (ir, stats, warnings) = fold(input, false);
        assert_eq!(ir, before);
        assert_eq!(
            stats,
            [
                ("folded-batch-norms", 0),
                ("folded-hard-sigmoids", 0),
                ("folded-scales", 0),
                ("kept-batch-norms", 3)
            ]
        );
        assert_eq!(
            warnings,
            [
                "fold-bn: fp.batch_norm kept: its parameters do not all have 2 elements, one per output \
                 channel of the fp.conv2d",
                "fold-bn: fp.batch_norm kept: the weight of the fp.conv2d before it is not a constant",
                "fold-bn: fp.batch_norm kept: the weight of the fp.conv2d before it is empty",
            ]
        );
    }

    /// 2,000 conv → batch norm pairs in a chain fold on a small stack.
    #[test]
    fn a_2000_layer_chain() {
        on_small_stack(|| {
            let mut text = String::from(
                "func.func @f(%x: tensor<1x2x1x1xf32>) -> tensor<1x2x1x1xf32> {\n  \
                 %w = fp.constant() {value = dense<1.0> : tensor<2x2x1x1xf32>} : () -> tensor<2x2x1x1xf32>\n  \
                 %p = fp.constant() {value = dense<1.0> : tensor<2xf32>} : () -> tensor<2xf32>\n  \
                 %v = fp.constant() {value = dense<3.0> : tensor<2xf32>} : () -> tensor<2xf32>\n",
            );
            let mut last = "%x".to_string();
            for i in 0..2_000 {
                text.push_str(&format!(
                    "  %y{i} = fp.conv2d({last}, %w) : (tensor<1x2x1x1xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x1x1xf32>\n  \
                     %z{i} = fp.batch_norm(%y{i}, %p, %p, %p, %v) {{epsilon = 1.0 : f32}} : (tensor<1x2x1x1xf32>, \
                     tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<1x2x1x1xf32>\n"
                ));
                last = format!("%z{i}");
            }
            text.push_str(&format!("  func.return {last} : tensor<1x2x1x1xf32>\n}}\n"));
            let (ir, stats, _) = fold(&text, true);
            assert_eq!(stats[0], ("folded-batch-norms", 2_000));
            assert!(!ir.contains("batch_norm"));
            // s = 1 / sqrt(3 + 1) = 0.5, b' = (0 - 1) · 0.5 + 1 = 0.5.
            assert_eq!(ir.matches("dense<[[[[0.5]], [[0.5]]], [[[0.5]], [[0.5]]]]>").count(), 2_000);
            assert_eq!(ir.matches("fp.conv2d").count(), 2_000);
        });
    }

    /// `TestIr` works with the pass registered among the generic ones.
    #[test]
    fn registered_with_the_generic_passes() {
        let mut ctx = test_context();
        qopt_dialect_fp::register(&mut ctx).unwrap();
        let module = parse_module(&mut ctx, b"func.func @f() {\n  func.return\n}\n", "input.qir").unwrap();
        let out = TestIr { ctx, module }.run(&registry(), "fold-bn").unwrap();
        assert_eq!(out.stat("folded-batch-norms"), 0);
    }
}
