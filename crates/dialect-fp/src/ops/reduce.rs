//! Reductions over axes: `fp.reduce_mean`, `fp.reduce_max`, `fp.reduce_min`,
//! `fp.reduce_sum` (ONNX `ReduceMean`, `ReduceMax`, `ReduceMin`,
//! `ReduceSum`).
//!
//! Attributes: `axes` (integers, negative counting from the back, each at
//! most once; missing or empty: every axis) and `keepdims` (default `true`:
//! reduced dimensions stay with size 1; `false`: they are dropped).

use super::{common_element, tensor_operands, Elements, Sig, Signature, Sigs};
use crate::attrs;
use crate::shape::normalize_axis;
use qopt_ir_core::{Arity, Attribute, Context, OpDef, Traits, Type};

qopt_ir_core::op_name_constants! {
    REDUCE_MEAN = "fp.reduce_mean", REDUCE_MAX = "fp.reduce_max", REDUCE_MIN = "fp.reduce_min",
    REDUCE_SUM = "fp.reduce_sum",
}

pub(crate) fn ops() -> Vec<OpDef> {
    let reduce = |name: &'static str, what: &'static str, description: &'static str| {
        super::with_signature::<Reduce>(
            OpDef::new(name, what).description(description).operands(Arity::Exact(1)).traits(Traits::PURE),
        )
    };
    vec![
        reduce(
            names::REDUCE_MEAN,
            "mean over axes",
            "`fp.reduce_mean(x) {axes, keepdims}`: the mean over `axes` (all when missing or empty), \
             summed in f64 and divided once; `keepdims` (default `true`) keeps reduced dimensions with \
             size 1 (ONNX ReduceMean).\n\n\
             ```\n%y = fp.reduce_mean(%x) {axes = [-1]} : (tensor<1x16x64xf32>) -> tensor<1x16x1xf32>\n```",
        ),
        reduce(
            names::REDUCE_MAX,
            "maximum over axes",
            "`fp.reduce_max(x) {axes, keepdims}`: the maximum over `axes` (NaN if any element is NaN), \
             as `fp.reduce_mean` otherwise (ONNX ReduceMax).\n\n\
             ```\n%y = fp.reduce_max(%x) {axes = [1], keepdims = false} : (tensor<2x5x3xf32>) -> tensor<2x3xf32>\n```",
        ),
        reduce(
            names::REDUCE_MIN,
            "minimum over axes",
            "`fp.reduce_min(x) {axes, keepdims}`: the minimum over `axes` (NaN if any element is NaN), \
             as `fp.reduce_mean` otherwise (ONNX ReduceMin).\n\n\
             ```\n%y = fp.reduce_min(%x) : (tensor<2x5xf32>) -> tensor<1x1xf32>\n```",
        ),
        reduce(
            names::REDUCE_SUM,
            "sum over axes",
            "`fp.reduce_sum(x) {axes, keepdims}`: the sum over `axes`, accumulated in f64 and rounded once, \
             as `fp.reduce_mean` otherwise (ONNX ReduceSum).\n\n\
             ```\n%y = fp.reduce_sum(%x) {axes = [0, 2]} : (tensor<2x5x3xf32>) -> tensor<1x5x1xf32>\n```",
        ),
    ]
}

/// The dimensions `dims` keep after a reduction of the axes marked in
/// `reduced`: a reduced axis becomes `one` with `keepdims`, else goes.
pub fn reduced_dims<T: Copy>(dims: &[T], reduced: &[bool], keepdims: bool, one: T) -> Vec<T> {
    dims.iter()
        .zip(reduced)
        .filter_map(|(&d, &r)| match (r, keepdims) {
            (false, _) => Some(d),
            (true, true) => Some(one),
            (true, false) => None,
        })
        .collect()
}

/// The reduction of `rank` dimensions that `attrs` asks for: which axes are
/// reduced, and whether they are kept.
pub fn reduce_axes(ctx: &Context, attrs: Attribute, rank: usize) -> Result<(Vec<bool>, bool), String> {
    let keepdims = attrs::boolean_in(ctx, attrs, "keepdims", true)?;
    let mut reduced = vec![false; rank];
    match attrs::opt_int_array_in(ctx, attrs, "axes", None)? {
        Some(axes) if !axes.is_empty() => {
            for &axis in &axes {
                let a = normalize_axis(axis, rank)?;
                if reduced[a] {
                    return Err(format!("'axes' names dimension {a} twice"));
                }
                reduced[a] = true;
            }
        }
        _ => reduced.iter_mut().for_each(|r| *r = true),
    }
    Ok((reduced, keepdims))
}

struct Reduce;

impl Signature for Reduce {
    fn check(ctx: &Context, operands: &[Type], attrs: Attribute) -> Result<Sigs, String> {
        let ops = tensor_operands(ctx, operands, &["input"], 1)?;
        let elem = common_element(ctx, &ops, Elements::Float)?;
        let x = &ops[0];
        let (reduced, keepdims) = reduce_axes(ctx, attrs, x.rank())?;
        let shape = reduced_dims(x.shape, &reduced, keepdims, 1);
        Ok(smallvec::smallvec![Sig::new(&shape, elem)])
    }
}
