//! Shape ops, all quant-agnostic (they move elements without changing their
//! values, so a quantized tensor keeps its quantized type): `fp.reshape`,
//! `fp.flatten`, `fp.transpose`, `fp.concat`, `fp.split`, `fp.pad`,
//! `fp.strided_slice`, `fp.gather`, `fp.depth_to_space`, `fp.space_to_depth`,
//! `fp.tile` and `fp.resize` (quant-agnostic in nearest mode only: linear and
//! cubic interpolation compute new values), with ONNX semantics; plus their
//! identity folders and the `reshape-reshape` pattern.

use super::{common_element, tensor_operands, variadic_operands, Elements, Operand, Sig, Signature, Sigs};
use crate::attrs;
use crate::shape::{dims_compatible, is_dynamic, normalize_axis, num_elements, shape_to_string};
use qopt_ir_core::interfaces::QuantizableOp;
use qopt_ir_core::{
    Arity, Attribute, Context, FoldResult, Module, OpDef, OpId, OperationState, RewritePattern, Rewriter,
    Traits, Type, ValueId, DYNAMIC,
};
use smallvec::SmallVec;

qopt_ir_core::op_name_constants! {
    RESHAPE = "fp.reshape", FLATTEN = "fp.flatten", TRANSPOSE = "fp.transpose", CONCAT = "fp.concat",
    SPLIT = "fp.split", PAD = "fp.pad", STRIDED_SLICE = "fp.strided_slice", GATHER = "fp.gather",
    DEPTH_TO_SPACE = "fp.depth_to_space", SPACE_TO_DEPTH = "fp.space_to_depth", TILE = "fp.tile",
    RESIZE = "fp.resize",
}

pub(crate) fn ops() -> Vec<OpDef> {
    let traits = Traits::PURE | Traits::QUANT_AGNOSTIC;
    vec![
        super::with_signature::<Reshape>(
            OpDef::new(names::RESHAPE, "reshapes to a static target shape (ONNX Reshape)")
                .description(
                    "`fp.reshape(x) {shape = [...]}`: the same elements in row-major order under a new \
                     shape. In `shape`, one entry may be `-1` (inferred from the element count) and `0` \
                     copies the input's size at that index (ONNX, `allowzero = 0`); other entries are \
                     sizes. The element counts must match when known. A reshape to the operand's own type \
                     folds away, and `reshape(reshape(x))` becomes one reshape.\n\n\
                     ```\n%y = fp.reshape(%x) {shape = [0, -1]} : (tensor<1x512x1x1xf32>) -> tensor<1x512xf32>\n```",
                )
                .operands(Arity::Exact(1))
                .traits(traits)
                .folder(fold_to_operand_if_same_type),
        ),
        super::with_signature::<Flatten>(
            OpDef::new(names::FLATTEN, "flattens to 2-D around an axis (ONNX Flatten)")
                .description(
                    "`fp.flatten(x) {axis = 1}`: the result is 2-D, (d0·…·d(axis-1)) × (d(axis)·…·d(n-1)); \
                     `axis` is in [-rank, rank] (default 1; negative counts from the back).\n\n\
                     ```\n%y = fp.flatten(%x) {axis = 1} : (tensor<1x512x7x7xf32>) -> tensor<1x25088xf32>\n```",
                )
                .operands(Arity::Exact(1))
                .traits(traits)
                .folder(fold_to_operand_if_same_type),
        ),
        super::with_signature::<DepthSpace<true>>(
            OpDef::new(names::DEPTH_TO_SPACE, "moves channel blocks into space (ONNX DepthToSpace)")
                .description(
                    "`fp.depth_to_space(x) {blocksize, mode}`: N×C×H×W becomes N×(C/b²)×(H·b)×(W·b) with \
                     `b = blocksize` (≥ 1, `C` divisible by b²); `mode` is `\"DCR\"` (default: depth, column, \
                     row) or `\"CRD\"`, as in ONNX. Values move unchanged (quant-agnostic).\n\n\
                     ```\n%y = fp.depth_to_space(%x) {blocksize = 2} : (tensor<1x8x2x3xf32>) -> tensor<1x2x4x6xf32>\n```",
                )
                .operands(Arity::Exact(1))
                .traits(traits),
        ),
        super::with_signature::<DepthSpace<false>>(
            OpDef::new(names::SPACE_TO_DEPTH, "moves spatial blocks into channels (ONNX SpaceToDepth)")
                .description(
                    "`fp.space_to_depth(x) {blocksize, mode}`: N×C×H×W becomes N×(C·b²)×(H/b)×(W/b) with \
                     `b = blocksize` (≥ 1, dividing H and W); `mode` is `\"DCR\"` (default) or `\"CRD\"` \
                     (ONNX opset 28), the inverse of `fp.depth_to_space` in the same mode. \
                     Quant-agnostic.\n\n\
                     ```\n%y = fp.space_to_depth(%x) {blocksize = 2} : (tensor<1x2x4x6xf32>) -> tensor<1x8x2x3xf32>\n```",
                )
                .operands(Arity::Exact(1))
                .traits(traits),
        ),
        super::with_signature::<Tile>(
            OpDef::new(names::TILE, "repeats a tensor along each dimension (ONNX Tile)")
                .description(
                    "`fp.tile(x) {repeats = [...]}`: one repeat count (≥ 1) per dimension; result dimension \
                     i is `x.shape[i] · repeats[i]`, the input copied in every block. Quant-agnostic.\n\n\
                     ```\n%y = fp.tile(%x) {repeats = [1, 2]} : (tensor<3x4xf32>) -> tensor<3x8xf32>\n```",
                )
                .operands(Arity::Exact(1))
                .traits(traits),
        ),
        super::with_signature::<Resize>(
            OpDef::new(names::RESIZE, "resizes by nearest, linear or cubic interpolation (ONNX Resize)")
                .description(
                    "`fp.resize(x) {sizes = [...], scales = [...], mode, coordinate_transformation_mode, \
                     nearest_mode, cubic_coeff_a, exclude_outside, antialias}`: ONNX Resize over every \
                     dimension of a tensor of any rank. `sizes` is the result shape, one entry per \
                     dimension (`-1`: `floor(in · scale)` of the input's size when the op runs, for a \
                     dynamic one). `scales` (finite, > 0, one per dimension) are the factors of the \
                     coordinate mapping: ONNX's scales when the model gave scales, `out / in` when it gave \
                     sizes. Output index `y` maps to the input coordinate `x` by \
                     `coordinate_transformation_mode`: `\"half_pixel\"` (default) `(y + 0.5) / scale − 0.5`, \
                     `\"half_pixel_symmetric\"` (the same, centred when `out ≠ in · scale`), \
                     `\"pytorch_half_pixel\"` (the same, but −0.5 when `in · scale` is 1), \
                     `\"align_corners\"` `y · (in − 1) / (in · scale − 1)` (0 when `in · scale` is 1), \
                     `\"asymmetric\"` `y / scale` or `\"tf_half_pixel_for_nn\"` `(y + 0.5) / scale` \
                     (`\"tf_crop_and_resize\"` is not supported). `in · scale` is taken in f64 as ONNX's \
                     reference takes it; ONNX Runtime uses the output size there, which differs when the \
                     model's scales give a fractional `in · scale`. `mode` is `\"nearest\"` (default: one \
                     neighbour, by `nearest_mode` `\"round_prefer_floor\"` (default), `\"round_prefer_ceil\"`, \
                     `\"floor\"` or `\"ceil\"`), `\"linear\"` or `\"cubic\"` (`cubic_coeff_a`, default \
                     −0.75). Neighbours outside the input take the edge value; with `exclude_outside = true` \
                     (linear, cubic) they get weight 0 and the others are renormalized. `antialias = true` \
                     (linear, cubic) stretches the filter by `1 / scale` when downscaling. Attributes of \
                     another mode are an error. Dimensions are resized one after the other in f64 and \
                     rounded once, as ONNX's reference implementation does (cubic weights in f32, as \
                     there); a dimension with scale 1 and its size unchanged is left as it is. Nearest \
                     copies values, so on it the op is quant-agnostic (a quantized tensor keeps its type; \
                     one quantized per axis keeps that dimension as it is); linear and cubic compute new \
                     values and take float tensors only (`qopt_dialect_fp::is_quant_agnostic` asks the \
                     mode). A resize that changes nothing folds away.\n\n\
                     ```\n%y = fp.resize(%x) {scales = [1.0, 1.0, 2.0, 2.0], sizes = [1, 3, 8, 8]} : \
                     (tensor<1x3x4x4xf32>) -> tensor<1x3x8x8xf32>\n\
                     %z = fp.resize(%x) {coordinate_transformation_mode = \"align_corners\", mode = \"linear\", \
                     scales = [1.0, 1.0, 1.75, 1.75], sizes = [1, 3, 7, 7]} : (tensor<1x3x4x4xf32>) -> \
                     tensor<1x3x7x7xf32>\n```",
                )
                .operands(Arity::Exact(1))
                .traits(traits)
                .folder(fold_resize),
        ),
        super::with_signature::<Gather>(
            OpDef::new(names::GATHER, "takes slices along an axis by index (ONNX Gather)")
                .description(
                    "`fp.gather(x, indices) {axis}`: with integer (i32 or i64) `indices` of any shape, the \
                     result is `x.shape[..axis] ++ indices.shape ++ x.shape[axis+1..]`, each index selecting a \
                     slice of `x` along `axis` (default 0; negative indices count from the end). An index out \
                     of range is an error when the op runs. Values are moved unchanged, so it is \
                     quant-agnostic (embedding lookups).\n\n\
                     ```\n%y = fp.gather(%table, %ids) : (tensor<1000x64xf32>, tensor<1x16xi64>) -> tensor<1x16x64xf32>\n```",
                )
                .operands(Arity::Exact(2))
                .traits(traits),
        ),
        super::with_signature::<Transpose>(
            OpDef::new(names::TRANSPOSE, "permutes dimensions (ONNX Transpose)")
                .description(
                    "`fp.transpose(x) {perm = [...]}`: result dimension i is input dimension `perm[i]`; \
                     `perm` is a permutation of 0..rank (default: reversed). The identity permutation \
                     folds away.\n\n\
                     ```\n%y = fp.transpose(%x) {perm = [0, 2, 3, 1]} : (tensor<1x3x224x224xf32>) -> tensor<1x224x224x3xf32>\n```",
                )
                .operands(Arity::Exact(1))
                .traits(traits)
                .folder(fold_transpose),
        ),
        super::with_signature::<Concat>(
            OpDef::new(names::CONCAT, "joins tensors along an axis (ONNX Concat)")
                .description(
                    "`fp.concat(x0, x1, ...) {axis}`: one or more operands of one rank and one element \
                     type (a quantized type must be the same for all), equal in every dimension but \
                     `axis` (required; negative counts from the back); the result's `axis` size is the \
                     sum. A concat of one operand folds to it.\n\n\
                     ```\n%y = fp.concat(%a, %b) {axis = 1} : (tensor<1x64x28x28xf32>, tensor<1x32x28x28xf32>) -> tensor<1x96x28x28xf32>\n```",
                )
                .operands(Arity::AtLeast(1))
                .traits(traits)
                .interface(QuantizableOp::variadic())
                .folder(fold_to_operand_if_same_type),
        ),
        super::with_signature::<Split>(
            OpDef::new(names::SPLIT, "cuts a tensor into parts along an axis (ONNX Split)")
                .description(
                    "`fp.split(x) {axis, sizes = [...]}`: one result per entry of `sizes` (non-negative, \
                     summing to the size of `axis` when it is known); `axis` defaults to 0.\n\n\
                     ```\n%y:2 = fp.split(%x) {axis = 1, sizes = [32, 32]} : (tensor<1x64x8x8xf32>) -> \
                     (tensor<1x32x8x8xf32>, tensor<1x32x8x8xf32>)\n```",
                )
                .operands(Arity::Exact(1))
                .results(Arity::AtLeast(1))
                .traits(traits)
                .folder(fold_to_operand_if_same_type),
        ),
        super::with_signature::<Pad>(
            OpDef::new(names::PAD, "pads a tensor (ONNX Pad)")
                .description(
                    "`fp.pad(x) {pads = [b0, b1, ..., e0, e1, ...], mode, value}`: adds `b_i` elements \
                     before and `e_i` after dimension i (`pads` has 2·rank non-negative entries, ONNX \
                     order). `mode` is `\"constant\"` (default; fills with `value`, default `0.0`), \
                     `\"reflect\"` (mirrors without repeating the edge; pads smaller than the dimension) or \
                     `\"edge\"` (repeats the edge; the dimension must not be empty). On a quantized tensor \
                     only constant padding with value 0 is allowed (it pads with the zero point). Zero pads \
                     fold away.\n\n\
                     ```\n%y = fp.pad(%x) {pads = [0, 0, 1, 1, 0, 0, 1, 1]} : (tensor<1x3x4x4xf32>) -> tensor<1x3x6x6xf32>\n```",
                )
                .operands(Arity::Exact(1))
                .traits(traits)
                .folder(fold_pad),
        ),
        super::with_signature::<StridedSlice>(
            OpDef::new(names::STRIDED_SLICE, "takes a strided slice (ONNX Slice)")
                .description(
                    "`fp.strided_slice(x) {begin, end, strides, axes}`: for each listed axis, elements \
                     `begin, begin + stride, ...` up to but excluding `end`. ONNX `Slice` semantics: \
                     negative `begin`/`end` count from the back, both are clamped into the dimension \
                     (`end` may be a large number meaning \"to the end\"), negative strides walk backwards, \
                     `strides` defaults to ones and `axes` to 0..n (unique, negative allowed); unlisted \
                     axes are kept whole. A slice that keeps everything folds away.\n\n\
                     ```\n%y = fp.strided_slice(%x) {axes = [1], begin = [1], end = [9223372036854775807], strides = [2]} : \
                     (tensor<4x10xf32>) -> tensor<4x5xf32>\n```",
                )
                .operands(Arity::Exact(1))
                .traits(traits)
                .folder(fold_strided_slice),
        ),
    ]
}

pub(crate) fn patterns() -> Vec<Box<dyn RewritePattern>> {
    vec![Box::new(ReshapeReshape)]
}

/// The single operand of a one-operand shape op, float or quantized.
fn single<'c>(ctx: &'c Context, operands: &[Type]) -> Result<(Operand<'c>, Type), String> {
    let ops = tensor_operands(ctx, operands, &["input"], 1)?;
    let elem = common_element(ctx, &ops, Elements::FloatOrQuant)?;
    Ok((ops[0], elem))
}

// ---- reshape ----------------------------------------------------------------

struct Reshape;

impl Signature for Reshape {
    fn check(ctx: &Context, operands: &[Type], attrs: Attribute) -> Result<Sigs, String> {
        let (x, elem) = single(ctx, operands)?;
        let target = attrs::opt_int_array_in(ctx, attrs, "shape", None)?
            .ok_or("needs a 'shape' attribute (the target shape)")?;
        let shape = reshape_target(x.shape, &target)?;
        Ok(smallvec::smallvec![Sig { shape, elem }])
    }
}

/// The chain of `fp.reshape`s that `value` comes out of, walked back while
/// each reshape's result has exactly one use and `keep` accepts the type of
/// its operand: the value the chain starts from, and the reshapes, the one
/// producing `value` first. What moves an op from after reshapes to before
/// them (`fold-bn`'s batch norm, `conv1d-to-conv2d`'s activation) reads.
pub fn reshape_chain(
    ctx: &Context,
    module: &Module,
    value: ValueId,
    keep: impl Fn(Type) -> bool,
) -> (ValueId, Vec<OpId>) {
    let (mut value, mut chain) = (value, Vec::new());
    loop {
        let def = module.defining_op(value);
        if def.is_none()
            || ctx.op_name_str(module.op_name(def)) != names::RESHAPE
            || module.uses(value).count() != 1
        {
            return (value, chain);
        }
        let source = module.operand(def, 0);
        if !keep(module.value_type(source)) {
            return (value, chain);
        }
        chain.push(def);
        value = source;
    }
}

/// The result shape of reshaping `input` to `target` (ONNX rules, see the op).
pub fn reshape_target(input: &[i64], target: &[i64]) -> Result<SmallVec<[i64; 4]>, String> {
    let mut out: SmallVec<[i64; 4]> = SmallVec::with_capacity(target.len());
    let mut inferred = None;
    for (i, &t) in target.iter().enumerate() {
        match t {
            -1 if inferred.is_some() => return Err("'shape' may contain -1 only once".to_string()),
            -1 => {
                inferred = Some(i);
                out.push(DYNAMIC);
            }
            0 => match input.get(i) {
                Some(&d) => out.push(d),
                None => {
                    return Err(format!(
                        "'shape' entry {i} is 0 (copy the input size) but the input has rank {}",
                        input.len()
                    ))
                }
            },
            t if t < 0 => return Err(format!("'shape' entries must be sizes, 0 or -1, got {t}")),
            t => out.push(t),
        }
    }
    let total = num_elements(input);
    let known: Option<i64> = out
        .iter()
        .enumerate()
        .filter(|&(i, _)| Some(i) != inferred)
        .try_fold(1i64, |acc, (_, &d)| if is_dynamic(d) { None } else { acc.checked_mul(d) });
    match (inferred, total, known) {
        (Some(i), Some(total), Some(known)) => {
            if known == 0 {
                return Err("cannot infer the -1 entry of 'shape' when the other entries hold no elements"
                    .to_string());
            }
            if total % known != 0 {
                return Err(format!(
                    "cannot reshape {} ({total} elements) into {}: {total} is not a multiple of {known}",
                    shape_to_string(input),
                    target_to_string(target)
                ));
            }
            out[i] = total / known;
        }
        (None, Some(total), Some(known)) if total != known => {
            return Err(format!(
                "cannot reshape {} ({total} elements) into {} ({known} elements)",
                shape_to_string(input),
                shape_to_string(&out)
            ));
        }
        _ => {}
    }
    Ok(out)
}

fn target_to_string(target: &[i64]) -> String {
    let parts: Vec<String> = target.iter().map(|d| d.to_string()).collect();
    format!("[{}]", parts.join(", "))
}

/// Folds a one-result op whose result has its first operand's type to that
/// operand (reshape to the same shape, flatten of a 2-D tensor at axis 1,
/// concat or split of one part).
fn fold_to_operand_if_same_type(
    _ctx: &mut Context,
    m: &Module,
    op: OpId,
    _constants: &[Option<Attribute>],
) -> Option<SmallVec<[FoldResult; 1]>> {
    if m.num_operands(op) != 1 || m.num_results(op) != 1 {
        return None;
    }
    let x = m.operand(op, 0);
    (m.value_type(x) == m.value_type(m.result(op, 0))).then(|| smallvec::smallvec![FoldResult::Value(x)])
}

/// `reshape(reshape(x)) -> reshape(x)`: only the final shape matters. The new
/// op spells the outer result's shape (`-1` for its one unknown size), so a `0`
/// entry meant for the inner result is not misread against `x`.
struct ReshapeReshape;

impl RewritePattern for ReshapeReshape {
    fn name(&self) -> &str {
        "reshape-reshape"
    }
    fn root(&self) -> Option<&str> {
        Some(names::RESHAPE)
    }
    fn match_and_rewrite(&self, op: OpId, rewriter: &mut Rewriter<'_>) -> bool {
        let m = &*rewriter.module;
        if m.num_operands(op) != 1 || m.num_results(op) != 1 {
            return false;
        }
        let inner = m.defining_op(m.operand(op, 0));
        if inner.is_none()
            || rewriter.ctx.op_name_str(m.op_name(inner)) != names::RESHAPE
            || m.num_operands(inner) != 1
        {
            return false;
        }
        let x = m.operand(inner, 0);
        let result_ty = m.value_type(m.result(op, 0));
        let Some((out_shape, _)) = crate::shape::tensor_parts(rewriter.ctx, result_ty) else { return false };
        // A literal 0 would mean "copy"; more than one unknown size cannot be spelled.
        if out_shape.contains(&0) || out_shape.iter().filter(|&&d| is_dynamic(d)).count() > 1 {
            return false;
        }
        let target: Vec<i64> = out_shape.to_vec();
        let Some((x_shape, _)) = crate::shape::tensor_parts(rewriter.ctx, m.value_type(x)) else {
            return false;
        };
        // The new reshape must give exactly the outer result type.
        if reshape_target(x_shape, &target).ok().as_deref() != Some(out_shape) {
            return false;
        }
        let shape_attr = rewriter.ctx.i64_array_attr(&target);
        let attrs = rewriter.ctx.dict_set(m.op_attrs(op), "shape", shape_attr);
        let name = m.op_name(op);
        let loc = m.op_loc(op);
        let new = rewriter
            .create(OperationState::new(name).operands(&[x]).results(&[result_ty]).attrs(attrs).loc(loc));
        let value = rewriter.module.result(new, 0);
        rewriter.replace_op(op, &[value]).is_ok()
    }
}

// ---- flatten ----------------------------------------------------------------

struct Flatten;

impl Signature for Flatten {
    fn check(ctx: &Context, operands: &[Type], attrs: Attribute) -> Result<Sigs, String> {
        let (x, elem) = single(ctx, operands)?;
        let rank = x.rank() as i64;
        let axis = attrs::int_in(ctx, attrs, "axis", 1)?;
        if axis < -rank || axis > rank {
            return Err(format!(
                "'axis' {axis} is out of range for rank {rank} (expected {} to {rank})",
                -rank
            ));
        }
        let axis = if axis < 0 { axis + rank } else { axis } as usize;
        let product = |dims: &[i64]| -> i64 {
            if dims.contains(&0) {
                return 0;
            }
            num_elements(dims).unwrap_or(DYNAMIC)
        };
        Ok(smallvec::smallvec![Sig::new(&[product(&x.shape[..axis]), product(&x.shape[axis..])], elem)])
    }
}

// ---- transpose --------------------------------------------------------------

/// `fp.depth_to_space` (`TO_SPACE`) and `fp.space_to_depth`.
struct DepthSpace<const TO_SPACE: bool>;

/// The block size of `fp.depth_to_space` or `fp.space_to_depth` and whether
/// its mode is CRD.
pub fn depth_space_params(ctx: &Context, attrs: Attribute) -> Result<(i64, bool), String> {
    let b = attrs::int_in(ctx, attrs, "blocksize", 0)?;
    if b < 1 {
        return Err(format!("'blocksize' must be at least 1, got {b}"));
    }
    let crd = attrs::one_of_in(ctx, attrs, "mode", "DCR", &["DCR", "CRD"])? == "CRD";
    Ok((b, crd))
}

impl<const TO_SPACE: bool> Signature for DepthSpace<TO_SPACE> {
    fn check(ctx: &Context, operands: &[Type], attrs: Attribute) -> Result<Sigs, String> {
        let (x, elem) = single(ctx, operands)?;
        if x.rank() != 4 {
            return Err(format!("input must have rank 4 (NxCxHxW), got {}", shape_to_string(x.shape)));
        }
        let (b, _) = depth_space_params(ctx, attrs)?;
        let [n, c, h, w] = [x.shape[0], x.shape[1], x.shape[2], x.shape[3]];
        let scale = |d: i64, by: i64| if is_dynamic(d) { d } else { d * by };
        let shape: SmallVec<[i64; 4]> = if TO_SPACE {
            if !is_dynamic(c) && c % (b * b) != 0 {
                return Err(format!("channels ({c}) must be divisible by blocksize² ({})", b * b));
            }
            smallvec::smallvec![n, if is_dynamic(c) { c } else { c / (b * b) }, scale(h, b), scale(w, b)]
        } else {
            for (what, d) in [("height", h), ("width", w)] {
                if !is_dynamic(d) && d % b != 0 {
                    return Err(format!("{what} ({d}) must be divisible by blocksize ({b})"));
                }
            }
            let div = |d: i64| if is_dynamic(d) { d } else { d / b };
            smallvec::smallvec![n, scale(c, b * b), div(h), div(w)]
        };
        Ok(smallvec::smallvec![Sig { shape, elem }])
    }
}

struct Tile;

/// The repeat counts of `fp.tile` for rank `rank`, each at least 1.
pub fn tile_repeats(ctx: &Context, attrs: Attribute, rank: usize) -> Result<SmallVec<[i64; 4]>, String> {
    let repeats = attrs::opt_int_array_in(ctx, attrs, "repeats", Some(rank))?
        .ok_or("needs 'repeats' (one count per dimension)")?;
    if let Some(r) = repeats.iter().find(|&&r| r < 1) {
        return Err(format!("'repeats' must be at least 1, got {r}"));
    }
    Ok(repeats)
}

impl Signature for Tile {
    fn check(ctx: &Context, operands: &[Type], attrs: Attribute) -> Result<Sigs, String> {
        let (x, elem) = single(ctx, operands)?;
        let repeats = tile_repeats(ctx, attrs, x.rank())?;
        let shape: SmallVec<[i64; 4]> =
            x.shape.iter().zip(&repeats).map(|(&d, &r)| if is_dynamic(d) { d } else { d * r }).collect();
        Ok(smallvec::smallvec![Sig { shape, elem }])
    }
}

// ---- resize -----------------------------------------------------------------

/// The interpolation of `fp.resize` (ONNX's `mode`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ResizeMode {
    /// One neighbour, chosen by [`NearestMode`]; values are copied.
    Nearest,
    /// Linear interpolation between the two neighbours (per dimension).
    Linear,
    /// Cubic convolution over four neighbours (per dimension).
    Cubic,
}

/// How `fp.resize` maps an output index to an input coordinate (ONNX's
/// `coordinate_transformation_mode`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ResizeCoordinates {
    /// `(y + 0.5) / scale − 0.5`.
    HalfPixel,
    /// `half_pixel` shifted so the output is centred on the input when
    /// `out ≠ in · scale` (ONNX opset 19).
    HalfPixelSymmetric,
    /// `half_pixel`, but −0.5 when `in · scale` is 1.
    PytorchHalfPixel,
    /// `y · (in − 1) / (in · scale − 1)`, 0 when `in · scale` is 1.
    AlignCorners,
    /// `y / scale`.
    Asymmetric,
    /// `(y + 0.5) / scale` (ONNX opsets 11 to 17).
    TfHalfPixelForNn,
}

impl ResizeCoordinates {
    /// The input coordinate of output index `y` of a dimension of input size
    /// `input` and output size `output`, with `output_width = scale · input`
    /// taken in f64 as ONNX's reference does. The interpreter and the x86
    /// backend both map coordinates through this one function.
    pub fn source(self, y: f64, input: usize, output: usize, scale: f64) -> f64 {
        let input = input as f64;
        let output_width = scale * input;
        match self {
            ResizeCoordinates::HalfPixel => (y + 0.5) / scale - 0.5,
            ResizeCoordinates::HalfPixelSymmetric => {
                let adjustment = output as f64 / output_width;
                let center = input / 2.0;
                let offset = center * (1.0 - adjustment);
                offset + (y + 0.5) / scale - 0.5
            }
            ResizeCoordinates::PytorchHalfPixel if output_width == 1.0 => -0.5,
            ResizeCoordinates::PytorchHalfPixel => (y + 0.5) / scale - 0.5,
            ResizeCoordinates::AlignCorners if output_width == 1.0 => 0.0,
            ResizeCoordinates::AlignCorners => y * (input - 1.0) / (output_width - 1.0),
            ResizeCoordinates::Asymmetric => y / scale,
            ResizeCoordinates::TfHalfPixelForNn => (y + 0.5) / scale,
        }
    }
}

/// Which neighbour nearest `fp.resize` takes (ONNX's `nearest_mode`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum NearestMode {
    /// Round, halves down.
    RoundPreferFloor,
    /// Round, halves up.
    RoundPreferCeil,
    /// Round down.
    Floor,
    /// Round up.
    Ceil,
}

/// The checked attributes of `fp.resize`.
#[derive(Clone, Debug, PartialEq)]
pub struct ResizeParams {
    /// The result size per dimension; -1 means `floor(in · scale)` of the
    /// input's size (see [`resize_scaled_size`]).
    pub sizes: SmallVec<[i64; 4]>,
    /// The scale of each dimension's coordinate mapping (finite, > 0).
    pub scales: SmallVec<[f64; 4]>,
    /// Nearest, linear or cubic.
    pub mode: ResizeMode,
    /// The coordinate mapping.
    pub coordinates: ResizeCoordinates,
    /// Nearest mode's rounding.
    pub nearest: NearestMode,
    /// Cubic mode's `A` (ONNX `cubic_coeff_a`).
    pub cubic_coeff_a: f64,
    /// Linear and cubic: neighbours outside the input get weight 0.
    pub exclude_outside: bool,
    /// Linear and cubic: widen the filter when downscaling.
    pub antialias: bool,
}

impl ResizeParams {
    /// The size of result dimension `i` when the input's size there is `input`
    /// ([`DYNAMIC`] when unknown, which makes a `-1` entry unknown too).
    pub fn out_size(&self, i: usize, input: i64) -> Result<i64, String> {
        let (Some(&size), Some(&scale)) = (self.sizes.get(i), self.scales.get(i)) else {
            return Err(format!("'sizes' and 'scales' have no entry for dimension {i}"));
        };
        let out = match size {
            -1 if is_dynamic(input) => return Ok(DYNAMIC),
            -1 => resize_scaled_size(input, scale)?,
            size => size,
        };
        if input == 0 && out > 0 {
            return Err(format!("dimension {i} is empty and cannot be resized to {out}"));
        }
        Ok(out)
    }
}

/// The mode of an `fp.resize` with attributes `attrs` (default nearest).
pub fn resize_mode(ctx: &Context, attrs: Attribute) -> Result<ResizeMode, String> {
    Ok(match attrs::one_of_in(ctx, attrs, "mode", "nearest", &["nearest", "linear", "cubic"])? {
        "linear" => ResizeMode::Linear,
        "cubic" => ResizeMode::Cubic,
        _ => ResizeMode::Nearest,
    })
}

/// The output size ONNX computes from an input size and a scale:
/// `floor(in · scale)`, the product taken in f64.
pub fn resize_scaled_size(input: i64, scale: f64) -> Result<i64, String> {
    let product = (input as f64 * scale).floor();
    // 2^62 is far beyond any tensor and keeps the conversion exact.
    if !(0.0..4.611_686_018_427_388e18).contains(&product) {
        return Err(format!("size {input} scaled by {scale} is out of range"));
    }
    Ok(product as i64)
}

/// Whether `fp.resize` leaves a dimension as it is: the same size and a scale
/// of 1 (within 1e-9 relative, as ONNX's reference checks, so that
/// `pytorch_half_pixel` on a size-1 dimension copies it too).
pub fn resize_keeps_dimension(input: i64, output: i64, scale: f64) -> bool {
    input == output && (scale - 1.0).abs() <= 1e-9 * scale.abs().max(1.0)
}

/// The checked attributes of an `fp.resize` of a tensor of rank `rank`.
pub fn resize_params(ctx: &Context, attrs: Attribute, rank: usize) -> Result<ResizeParams, String> {
    let sizes = attrs::opt_int_array_in(ctx, attrs, "sizes", Some(rank))?
        .ok_or("needs 'sizes' (the result size of each dimension, -1 for floor(input size · scale))")?;
    if let Some(s) = sizes.iter().find(|&&s| s < -1) {
        return Err(format!("'sizes' entries must be sizes or -1, got {s}"));
    }
    let scales = attrs::opt_float_array_in(ctx, attrs, "scales", Some(rank))?
        .ok_or("needs 'scales' (the coordinate scale of each dimension)")?;
    if let Some(s) = scales.iter().find(|s| !(s.is_finite() && **s > 0.0)) {
        return Err(format!("'scales' entries must be finite and positive, got {s}"));
    }
    let mode = resize_mode(ctx, attrs)?;
    let coordinates = match attrs::one_of_in(
        ctx,
        attrs,
        "coordinate_transformation_mode",
        "half_pixel",
        &[
            "half_pixel",
            "half_pixel_symmetric",
            "pytorch_half_pixel",
            "align_corners",
            "asymmetric",
            "tf_half_pixel_for_nn",
        ],
    )? {
        "half_pixel_symmetric" => ResizeCoordinates::HalfPixelSymmetric,
        "pytorch_half_pixel" => ResizeCoordinates::PytorchHalfPixel,
        "align_corners" => ResizeCoordinates::AlignCorners,
        "asymmetric" => ResizeCoordinates::Asymmetric,
        "tf_half_pixel_for_nn" => ResizeCoordinates::TfHalfPixelForNn,
        _ => ResizeCoordinates::HalfPixel,
    };
    let only_for = |name: &str, modes: &str, applies: bool| -> Result<(), String> {
        if !applies && ctx.dict_get(attrs, name).is_some() {
            return Err(format!("'{name}' applies to {modes} mode only"));
        }
        Ok(())
    };
    only_for("nearest_mode", "nearest", mode == ResizeMode::Nearest)?;
    only_for("cubic_coeff_a", "cubic", mode == ResizeMode::Cubic)?;
    only_for("exclude_outside", "linear and cubic", mode != ResizeMode::Nearest)?;
    only_for("antialias", "linear and cubic", mode != ResizeMode::Nearest)?;
    let nearest = match attrs::one_of_in(
        ctx,
        attrs,
        "nearest_mode",
        "round_prefer_floor",
        &["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"],
    )? {
        "round_prefer_ceil" => NearestMode::RoundPreferCeil,
        "floor" => NearestMode::Floor,
        "ceil" => NearestMode::Ceil,
        _ => NearestMode::RoundPreferFloor,
    };
    let cubic_coeff_a = attrs::float_in(ctx, attrs, "cubic_coeff_a", -0.75)?;
    if !cubic_coeff_a.is_finite() {
        return Err(format!("'cubic_coeff_a' must be finite, got {cubic_coeff_a}"));
    }
    let exclude_outside = attrs::boolean_in(ctx, attrs, "exclude_outside", false)?;
    let antialias = attrs::boolean_in(ctx, attrs, "antialias", false)?;
    Ok(ResizeParams { sizes, scales, mode, coordinates, nearest, cubic_coeff_a, exclude_outside, antialias })
}

struct Resize;

impl Signature for Resize {
    fn check(ctx: &Context, operands: &[Type], attrs: Attribute) -> Result<Sigs, String> {
        let (x, elem) = single(ctx, operands)?;
        let params = resize_params(ctx, attrs, x.rank())?;
        if params.mode != ResizeMode::Nearest && crate::shape::is_quant_element(ctx, elem) {
            return Err(format!(
                "{} interpolation computes new values, so it takes a float tensor, not {}",
                if params.mode == ResizeMode::Linear { "linear" } else { "cubic" },
                qopt_ir_core::type_to_string(ctx, elem)
            ));
        }
        let shape: SmallVec<[i64; 4]> =
            x.shape.iter().enumerate().map(|(i, &d)| params.out_size(i, d)).collect::<Result<_, _>>()?;
        // Per-axis parameters belong to their index: that dimension must stay as it is.
        if let qopt_ir_core::TypeData::Quant(q) = ctx.type_data(elem) {
            if let qopt_ir_core::QuantParams::PerAxis { axis, .. } = &q.params {
                let a = *axis as usize;
                if a < shape.len() && !resize_keeps_dimension(x.shape[a], shape[a], params.scales[a]) {
                    return Err(format!(
                        "the input is quantized per axis along dimension {a}, which must keep its size and \
                         scale 1"
                    ));
                }
            }
        }
        Ok(smallvec::smallvec![Sig { shape, elem }])
    }
}

/// A resize that keeps every dimension (same size, scale 1) folds to its operand.
fn fold_resize(
    ctx: &mut Context,
    m: &Module,
    op: OpId,
    _constants: &[Option<Attribute>],
) -> Option<SmallVec<[FoldResult; 1]>> {
    if m.num_operands(op) != 1 || m.num_results(op) != 1 {
        return None;
    }
    let shape = ctx.tensor_shape(m.value_type(m.operand(op, 0)))?;
    let params = resize_params(ctx, m.op_attrs(op), shape.len()).ok()?;
    let keeps_all = shape.iter().enumerate().all(|(i, &d)| {
        !is_dynamic(d)
            && params.out_size(i, d).is_ok_and(|out| resize_keeps_dimension(d, out, params.scales[i]))
    });
    if !keeps_all {
        return None;
    }
    fold_to_operand_if_same_type(ctx, m, op, &[])
}

struct Gather;

impl Signature for Gather {
    fn check(ctx: &Context, operands: &[Type], attrs: Attribute) -> Result<Sigs, String> {
        let [x, indices] = operands else {
            return Err(format!("expects 2 operands, found {}", operands.len()));
        };
        let (x, elem) = single(ctx, std::slice::from_ref(x))?;
        let Some((index_shape, index_elem)) = crate::shape::tensor_parts(ctx, *indices) else {
            return Err("indices must be a tensor".into());
        };
        let integer =
            matches!(ctx.type_data(index_elem), qopt_ir_core::TypeData::Int(i) if matches!(i.width, 32 | 64));
        if !integer {
            return Err(format!(
                "indices must be a tensor of i32 or i64, got {}",
                qopt_ir_core::type_to_string(ctx, *indices)
            ));
        }
        let axis = normalize_axis(attrs::int_in(ctx, attrs, "axis", 0)?, x.rank())
            .map_err(|e| format!("'axis': {e}"))?;
        let mut shape: SmallVec<[i64; 4]> = x.shape[..axis].into();
        shape.extend_from_slice(index_shape);
        shape.extend_from_slice(&x.shape[axis + 1..]);
        Ok(smallvec::smallvec![Sig { shape, elem }])
    }
}

struct Transpose;

impl Signature for Transpose {
    fn check(ctx: &Context, operands: &[Type], attrs: Attribute) -> Result<Sigs, String> {
        let (x, elem) = single(ctx, operands)?;
        let perm = transpose_perm(ctx, attrs, x.rank())?;
        let shape: SmallVec<[i64; 4]> = perm.iter().map(|&p| x.shape[p]).collect();
        Ok(smallvec::smallvec![Sig { shape, elem }])
    }
}

/// The checked permutation of a transpose of rank `rank`.
pub fn transpose_perm(ctx: &Context, attrs: Attribute, rank: usize) -> Result<SmallVec<[usize; 4]>, String> {
    let default: Vec<i64> = (0..rank as i64).rev().collect();
    let perm = attrs::int_array_in(ctx, attrs, "perm", Some(rank), &default)?;
    let mut seen = vec![false; rank];
    let mut out = SmallVec::with_capacity(rank);
    for &p in &perm {
        let valid = usize::try_from(p).ok().filter(|&p| p < rank);
        match valid {
            Some(p) if !seen[p] => {
                seen[p] = true;
                out.push(p);
            }
            _ => {
                return Err(format!(
                    "'perm' must be a permutation of 0..{rank}, got {}",
                    target_to_string(&perm)
                ))
            }
        }
    }
    Ok(out)
}

fn fold_transpose(
    ctx: &mut Context,
    m: &Module,
    op: OpId,
    _constants: &[Option<Attribute>],
) -> Option<SmallVec<[FoldResult; 1]>> {
    if m.num_operands(op) != 1 || m.num_results(op) != 1 {
        return None;
    }
    let x = m.operand(op, 0);
    let rank = ctx.tensor_shape(m.value_type(x))?.len();
    let perm = transpose_perm(ctx, m.op_attrs(op), rank).ok()?;
    let identity = perm.iter().enumerate().all(|(i, &p)| i == p);
    (identity && m.value_type(x) == m.value_type(m.result(op, 0)))
        .then(|| smallvec::smallvec![FoldResult::Value(x)])
}

// ---- concat and split -------------------------------------------------------

struct Concat;

impl Signature for Concat {
    fn check(ctx: &Context, operands: &[Type], attrs: Attribute) -> Result<Sigs, String> {
        let ops = variadic_operands(ctx, operands, 1)?;
        let elem = common_element(ctx, &ops, Elements::FloatOrQuant)?;
        let first = &ops[0];
        let axis = attrs::opt_int_in(ctx, attrs, "axis")?.ok_or("needs an 'axis' attribute")?;
        let axis = normalize_axis(axis, first.rank()).map_err(|e| format!("'axis': {e}"))?;
        let mut shape: SmallVec<[i64; 4]> = first.shape.into();
        for o in &ops[1..] {
            if o.rank() != first.rank() {
                return Err(format!(
                    "{} has rank {} but operand #0 has rank {}; concatenated tensors share one rank",
                    o.label(),
                    o.rank(),
                    first.rank()
                ));
            }
            for (d, (a, &b)) in shape.iter_mut().zip(o.shape).enumerate() {
                if d == axis {
                    continue;
                }
                if !dims_compatible(*a, b) {
                    return Err(format!(
                        "{} has size {b} in dimension {d} but operand #0 has {}; only dimension {axis} may differ",
                        o.label(),
                        *a
                    ));
                }
                if is_dynamic(*a) {
                    *a = b;
                }
            }
        }
        let sizes: Vec<i64> = ops.iter().map(|o| o.shape[axis]).collect();
        shape[axis] = if sizes.iter().any(|&s| is_dynamic(s)) {
            DYNAMIC
        } else {
            sizes.iter().try_fold(0i64, |acc, &s| acc.checked_add(s)).ok_or("concatenated size overflows")?
        };
        Ok(smallvec::smallvec![Sig { shape, elem }])
    }
}

struct Split;

impl Signature for Split {
    fn check(ctx: &Context, operands: &[Type], attrs: Attribute) -> Result<Sigs, String> {
        let (x, elem) = single(ctx, operands)?;
        let axis = attrs::int_in(ctx, attrs, "axis", 0)?;
        let axis = normalize_axis(axis, x.rank()).map_err(|e| format!("'axis': {e}"))?;
        let sizes = attrs::opt_int_array_in(ctx, attrs, "sizes", None)?
            .ok_or("needs a 'sizes' attribute (one size per result)")?;
        if sizes.is_empty() {
            return Err("'sizes' must not be empty".to_string());
        }
        attrs::check_at_least("sizes", &sizes, 0)?;
        let total = sizes.iter().try_fold(0i64, |acc, &s| acc.checked_add(s)).ok_or("'sizes' overflow")?;
        let dim = x.shape[axis];
        if !is_dynamic(dim) && total != dim {
            return Err(format!("'sizes' add up to {total} but dimension {axis} has size {dim}"));
        }
        Ok(sizes
            .iter()
            .map(|&s| {
                let mut shape: SmallVec<[i64; 4]> = x.shape.into();
                shape[axis] = s;
                Sig { shape, elem }
            })
            .collect())
    }
}

// ---- pad --------------------------------------------------------------------

struct Pad;

impl Signature for Pad {
    fn check(ctx: &Context, operands: &[Type], attrs: Attribute) -> Result<Sigs, String> {
        let (x, elem) = single(ctx, operands)?;
        let rank = x.rank();
        let pads = attrs::opt_int_array_in(ctx, attrs, "pads", Some(2 * rank))?
            .ok_or("needs a 'pads' attribute (begin paddings, then end paddings)")?;
        attrs::check_at_least("pads", &pads, 0)?;
        let mode = attrs::one_of_in(ctx, attrs, "mode", "constant", &["constant", "reflect", "edge"])?;
        let value = attrs::float_in(ctx, attrs, "value", 0.0)?;
        if crate::shape::is_quant_element(ctx, elem) && (mode != "constant" || value != 0.0) {
            return Err(format!(
                "a quantized tensor can only be padded with mode \"constant\" and value 0, got mode \"{mode}\" \
                 and value {value}"
            ));
        }
        let mut shape: SmallVec<[i64; 4]> = SmallVec::with_capacity(rank);
        for (i, &d) in x.shape.iter().enumerate() {
            let (b, e) = (pads[i], pads[rank + i]);
            if !is_dynamic(d) {
                if mode == "reflect" && (b >= d || e >= d) && (b > 0 || e > 0) {
                    return Err(format!(
                        "\"reflect\" padding of dimension {i} must be smaller than its size {d}, got {b} and {e}"
                    ));
                }
                if mode == "edge" && d == 0 && (b > 0 || e > 0) {
                    return Err(format!("\"edge\" padding needs a non-empty dimension {i}"));
                }
            }
            shape.push(if is_dynamic(d) {
                DYNAMIC
            } else {
                d.checked_add(b).and_then(|v| v.checked_add(e)).ok_or("padded size overflows")?
            });
        }
        Ok(smallvec::smallvec![Sig { shape, elem }])
    }
}

fn fold_pad(
    ctx: &mut Context,
    m: &Module,
    op: OpId,
    _constants: &[Option<Attribute>],
) -> Option<SmallVec<[FoldResult; 1]>> {
    if m.num_operands(op) != 1 || m.num_results(op) != 1 {
        return None;
    }
    let pads = attrs::opt_int_array_in(ctx, m.op_attrs(op), "pads", None).ok()??;
    if pads.iter().any(|&p| p != 0) {
        return None;
    }
    fold_to_operand_if_same_type(ctx, m, op, &[])
}

// ---- strided slice ----------------------------------------------------------

struct StridedSlice;

/// One axis of a slice, read from the attributes.
pub struct SliceAxis {
    /// The sliced dimension.
    pub axis: usize,
    /// First index (negative counts from the back).
    pub begin: i64,
    /// One past the last index (negative counts from the back).
    pub end: i64,
    /// Step, never 0 (negative walks backwards).
    pub stride: i64,
}

/// The checked axes of a slice of a tensor of rank `rank`.
pub fn slice_axes(ctx: &Context, attrs: Attribute, rank: usize) -> Result<Vec<SliceAxis>, String> {
    let begin = attrs::opt_int_array_in(ctx, attrs, "begin", None)?.ok_or("needs a 'begin' attribute")?;
    let n = begin.len();
    let end = attrs::opt_int_array_in(ctx, attrs, "end", Some(n))?.ok_or("needs an 'end' attribute")?;
    let strides = attrs::int_array_in(ctx, attrs, "strides", Some(n), &vec![1; n])?;
    let default_axes: Vec<i64> = (0..n as i64).collect();
    let axes = attrs::int_array_in(ctx, attrs, "axes", Some(n), &default_axes)?;
    let mut seen = vec![false; rank];
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let axis = normalize_axis(axes[i], rank).map_err(|e| format!("'axes': {e}"))?;
        if std::mem::replace(&mut seen[axis], true) {
            return Err(format!("'axes' lists dimension {axis} twice"));
        }
        if strides[i] == 0 {
            return Err("'strides' must not contain 0".to_string());
        }
        out.push(SliceAxis { axis, begin: begin[i], end: end[i], stride: strides[i] });
    }
    Ok(out)
}

/// The number of elements a slice takes from a dimension of size `dim` (ONNX
/// Slice: negative indices count from the back, then clamping).
pub fn slice_len(dim: i64, begin: i64, end: i64, stride: i64) -> i64 {
    if dim <= 0 || stride == 0 {
        return 0;
    }
    let (dim, begin, end, stride) = (dim as i128, begin as i128, end as i128, stride as i128);
    let wrap = |v: i128| if v < 0 { v + dim } else { v };
    let len = if stride > 0 {
        let b = wrap(begin).clamp(0, dim);
        let e = wrap(end).clamp(0, dim);
        (e - b + stride - 1).div_euclid(stride)
    } else {
        let b = wrap(begin).clamp(0, dim - 1);
        let e = wrap(end).clamp(-1, dim - 1);
        (b - e + (-stride) - 1).div_euclid(-stride)
    };
    len.max(0) as i64
}

impl Signature for StridedSlice {
    fn check(ctx: &Context, operands: &[Type], attrs: Attribute) -> Result<Sigs, String> {
        let (x, elem) = single(ctx, operands)?;
        let axes = slice_axes(ctx, attrs, x.rank())?;
        let mut shape: SmallVec<[i64; 4]> = x.shape.into();
        for a in &axes {
            let d = x.shape[a.axis];
            shape[a.axis] = if is_dynamic(d) { DYNAMIC } else { slice_len(d, a.begin, a.end, a.stride) };
        }
        Ok(smallvec::smallvec![Sig { shape, elem }])
    }
}

fn fold_strided_slice(
    ctx: &mut Context,
    m: &Module,
    op: OpId,
    _constants: &[Option<Attribute>],
) -> Option<SmallVec<[FoldResult; 1]>> {
    if m.num_operands(op) != 1 || m.num_results(op) != 1 {
        return None;
    }
    let x = m.operand(op, 0);
    let shape = ctx.tensor_shape(m.value_type(x))?;
    let axes = slice_axes(ctx, m.op_attrs(op), shape.len()).ok()?;
    // With stride 1 a slice keeping all `d` elements of a known size starts at 0.
    let keeps_all = axes.iter().all(|a| {
        let d = shape[a.axis];
        a.stride == 1 && !is_dynamic(d) && slice_len(d, a.begin, a.end, 1) == d
    });
    (keeps_all && m.value_type(x) == m.value_type(m.result(op, 0)))
        .then(|| smallvec::smallvec![FoldResult::Value(x)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn onnx_slice_lengths() {
        assert_eq!(slice_len(10, 1, i64::MAX, 2), 5);
        assert_eq!(slice_len(10, -3, -1, 1), 2);
        assert_eq!(slice_len(10, 0, 100, 1), 10);
        assert_eq!(slice_len(10, 8, 2, 1), 0);
        // Backwards: from the last element down past the first.
        assert_eq!(slice_len(10, -1, i64::MIN, -1), 10);
        assert_eq!(slice_len(10, 9, 0, -3), 3);
        assert_eq!(slice_len(10, 100, -100, -4), 3);
        assert_eq!(slice_len(0, 0, 5, 1), 0);
        assert_eq!(slice_len(0, -1, -5, -1), 0);
        assert_eq!(slice_len(5, i64::MIN, i64::MAX, i64::MAX), 1);
    }

    #[test]
    fn resize_sizes_and_identity() {
        // ONNX: floor(in · scale) with the product in f64.
        assert_eq!(resize_scaled_size(3, 2.5), Ok(7));
        assert_eq!(resize_scaled_size(10, 0.33), Ok(3));
        assert_eq!(resize_scaled_size(0, 4.0), Ok(0));
        assert!(resize_scaled_size(1 << 40, 1e30).is_err());
        assert!(resize_keeps_dimension(5, 5, 1.0));
        assert!(!resize_keeps_dimension(5, 5, 1.001));
        assert!(!resize_keeps_dimension(5, 6, 1.0));
        let mut ctx = Context::new();
        let sizes = ctx.i64_array_attr(&[-1, 6]);
        let f64_ty = ctx.common().f64;
        let (a, b) = (ctx.float_attr(2.0, f64_ty), ctx.float_attr(1.5, f64_ty));
        let scales = ctx.array_attr(&[a, b]);
        let attrs = ctx.dict_attr(&[("sizes", sizes), ("scales", scales)]);
        let params = resize_params(&ctx, attrs, 2).unwrap();
        assert_eq!(
            (params.mode, params.coordinates, params.nearest),
            (ResizeMode::Nearest, ResizeCoordinates::HalfPixel, NearestMode::RoundPreferFloor)
        );
        assert_eq!(params.out_size(0, 3), Ok(6));
        assert_eq!(params.out_size(0, DYNAMIC), Ok(DYNAMIC));
        assert_eq!(params.out_size(1, 4), Ok(6));
        assert!(params.out_size(1, 0).unwrap_err().contains("empty"));
        assert!(resize_params(&ctx, attrs, 3).unwrap_err().contains("'sizes' must have 3 elements"));
    }

    #[test]
    fn reshape_targets() {
        assert_eq!(reshape_target(&[1, 512, 7, 7], &[0, -1]).unwrap().as_slice(), &[1, 25088]);
        assert_eq!(reshape_target(&[DYNAMIC, 4, 6], &[-1, 24]).unwrap().as_slice(), &[DYNAMIC, 24]);
        assert_eq!(reshape_target(&[DYNAMIC, 4], &[0, 2, 2]).unwrap().as_slice(), &[DYNAMIC, 2, 2]);
        // ONNX leaves 0 / 0 undefined: an inferred size next to a zero size is an error.
        assert!(reshape_target(&[0, 4], &[0, -1]).is_err());
        assert_eq!(reshape_target(&[0, 4], &[-1, 0]).unwrap().as_slice(), &[0, 4]);
        assert!(reshape_target(&[2, 3], &[0, 0, 0]).is_err());
        assert!(reshape_target(&[0, 4], &[0, -1, 0]).is_err());
        assert!(reshape_target(&[2, 3], &[-2, 3]).is_err());
    }
}
