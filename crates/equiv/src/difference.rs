//! How far apart two runs of one function result are: the measure behind
//! `qopt --verify-numerics` ([`crate::numerics`]).
//!
//! Each side's value is taken as the real numbers it stands for: a quantized
//! tensor (stored integers of a `!qnn.uniform` type) is dequantized exactly as
//! `qnn.dequantize` computes it, every other tensor is widened to f64. Then:
//!
//! - **identical**: same IR type, same shape, and every stored element equal
//!   (floats by value, so `-0.0` equals `0.0` and any NaN equals any NaN);
//! - **|Δ|**: the largest elementwise difference of the real values (a NaN
//!   against a number, or infinities of different sign, is infinite);
//! - **relative**: |Δ| over the largest finite magnitude of the value before
//!   the pass (0 when both are 0, infinite when only |Δ| is not);
//! - **steps**: |Δ| in steps of the output's quantization grid, when it has
//!   one ([`QuantGrid`]): the stored-integer difference when both sides are
//!   the same quantized type, else |Δ| over the scale of each element's
//!   coordinate on the grid's axis.
//!
//! A shape mismatch is not a difference but an error message; nothing here
//! panics on any tensors or types.

use qopt_dialect_qnn::op_names as qnn_op;
use qopt_dialect_qnn::quant_params::{axis, params_at, quant_element};
use qopt_interp::{dequantize_tensor, Tensor};
use qopt_ir_core::{type_to_string, Context, Module, OpId, QuantType, Type};

/// The quantization grid a function result lies on: its own quantized type,
/// or that of the `qnn.dequantize` that produces it.
#[derive(Clone, Debug, PartialEq)]
pub struct QuantGrid(pub QuantType);

impl QuantGrid {
    /// The grid of result `value_type`, produced by `producer` (an op of
    /// `module`, or [`OpId::NONE`] for a function argument).
    pub fn of_result(ctx: &Context, module: &Module, value_type: Type, producer: OpId) -> Option<QuantGrid> {
        if let Some(q) = quant_element(ctx, value_type) {
            return Some(QuantGrid(q.clone()));
        }
        if producer.is_none() || ctx.op_name_str(module.op_name(producer)) != qnn_op::DEQUANTIZE {
            return None;
        }
        let input = module.operands(producer).next()?;
        quant_element(ctx, module.value_type(input)).map(|q| QuantGrid(q.clone()))
    }

    /// The scale of the element at row-major position `flat` of a tensor of
    /// `shape` (the parameters of its coordinate on the axis of a per-axis
    /// grid); `None` when the axis does not fit the shape.
    fn scale_at(&self, shape: &[usize], flat: usize) -> Option<f64> {
        let index = match axis(&self.0) {
            None => 0,
            Some(a) => {
                let inner: usize = shape.get(a + 1..)?.iter().product();
                let size = *shape.get(a)?;
                (flat / inner.max(1)) % size.max(1)
            }
        };
        params_at(&self.0, index).map(|p| p.scale)
    }
}

/// One side of a comparison: a result's value and its IR type.
#[derive(Copy, Clone)]
pub struct Side<'a> {
    /// The value.
    pub tensor: &'a Tensor,
    /// Its IR type.
    pub ty: Type,
}

/// How far apart two values of one result are (see the module docs).
#[derive(Clone, Debug, PartialEq)]
pub struct Difference {
    /// Same type, shape and stored elements.
    pub identical: bool,
    /// The largest elementwise difference of the real values.
    pub max_abs: f64,
    /// `max_abs` over the largest finite magnitude before the pass.
    pub relative: f64,
    /// The largest difference in steps of the grid, when there is one.
    pub steps: Option<f64>,
}

/// Measures `after` against `before`; `grid` is the quantization grid of the
/// result (after the pass, else before it). An error says why the two cannot
/// be compared (their shapes differ, or a value cannot be dequantized).
pub fn measure(
    ctx: &Context,
    before: Side<'_>,
    after: Side<'_>,
    grid: Option<&QuantGrid>,
) -> Result<Difference, String> {
    let shape = before.tensor.shape();
    if shape != after.tensor.shape() {
        return Err(format!(
            "the shape changed from {:?} ({}) to {:?} ({})",
            shape,
            type_to_string(ctx, before.ty),
            after.tensor.shape(),
            type_to_string(ctx, after.ty)
        ));
    }
    let identical = before.ty == after.ty && stored_equal(before.tensor, after.tensor);
    let (old, new) = (real_values(ctx, before)?, real_values(ctx, after)?);
    let mut max_abs = 0.0f64;
    let mut magnitude = 0.0f64;
    let mut steps = grid.map(|_| 0.0f64);
    // Both sides on the same grid: the stored integers (at most 32 bits, so
    // exact in f64) differ by whole steps.
    let stored_steps: Option<Vec<f64>> = (before.ty == after.ty && quant_element(ctx, after.ty).is_some())
        .then(|| {
            let old_stored = before.tensor.to_f64_vec();
            old_stored.iter().zip(after.tensor.to_f64_vec()).map(|(a, b)| (a - b).abs()).collect()
        });
    for (flat, (&x, &y)) in old.iter().zip(&new).enumerate() {
        if x.is_finite() {
            magnitude = magnitude.max(x.abs());
        }
        let delta = element_difference(x, y);
        max_abs = max_abs.max(delta);
        if let (Some(grid), Some(worst)) = (grid, steps.as_mut()) {
            let in_steps = match &stored_steps {
                Some(stored) => stored.get(flat).copied().unwrap_or(f64::INFINITY),
                None if delta == 0.0 => 0.0,
                None => grid.scale_at(shape, flat).map_or(f64::INFINITY, |s| delta / s),
            };
            *worst = worst.max(in_steps);
        }
    }
    let relative = if max_abs == 0.0 {
        0.0
    } else if magnitude == 0.0 {
        f64::INFINITY
    } else {
        max_abs / magnitude
    };
    Ok(Difference { identical, max_abs, relative, steps })
}

/// |x − y|, with NaN equal to NaN and equal infinities 0 apart.
fn element_difference(x: f64, y: f64) -> f64 {
    if (x.is_nan() && y.is_nan()) || x == y {
        0.0
    } else if x.is_nan() || y.is_nan() {
        f64::INFINITY
    } else {
        (x - y).abs()
    }
}

/// Whether both tensors have the same dtype and every stored element equal
/// (floats by value; NaN equals NaN).
fn stored_equal(a: &Tensor, b: &Tensor) -> bool {
    match (a, b) {
        (Tensor::F32(x), Tensor::F32(y)) => {
            x.iter().zip(y.iter()).all(|(p, q)| p == q || (p.is_nan() && q.is_nan()))
        }
        (Tensor::F64(x), Tensor::F64(y)) => {
            x.iter().zip(y.iter()).all(|(p, q)| p == q || (p.is_nan() && q.is_nan()))
        }
        _ => a == b,
    }
}

/// The real values of a side, row-major.
fn real_values(ctx: &Context, side: Side<'_>) -> Result<Vec<f64>, String> {
    match quant_element(ctx, side.ty) {
        Some(q) => dequantize_tensor(side.tensor, q).map(|t| t.to_f64_vec()).map_err(|e| {
            format!("cannot dequantize a {} value: {}", type_to_string(ctx, side.ty), e.message)
        }),
        None => Ok(side.tensor.to_f64_vec()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use qopt_ir_core::{parse_module, AttrData, TypeData};

    /// The argument types of a function taking `types`, in a context with
    /// the `qnn` dialect.
    fn types(ctx: &mut Context, types: &[&str]) -> Vec<Type> {
        qopt_dialect_fp::register(ctx).unwrap();
        qopt_dialect_qnn::register(ctx).unwrap();
        let args: Vec<String> = types.iter().enumerate().map(|(i, t)| format!("%a{i}: {t}")).collect();
        let text = format!("func.func @f({}) {{\n  func.return\n}}\n", args.join(", "));
        let module = parse_module(ctx, text.as_bytes(), "t.qir").unwrap();
        let op = module.lookup_symbol(ctx, "f").unwrap();
        let attr = module.op_attr(ctx, op, "function_type").unwrap();
        let AttrData::Type(ty) = ctx.attr_data(attr) else { panic!("a type attribute") };
        let TypeData::Function { inputs, .. } = ctx.type_data(*ty) else { panic!("a function type") };
        inputs.to_vec()
    }

    fn f32s(values: &[f32]) -> Tensor {
        Tensor::from_f32(&[values.len()], values.to_vec()).unwrap()
    }

    fn i8s(shape: &[usize], values: &[i8]) -> Tensor {
        Tensor::I8(ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(shape), values.to_vec()).unwrap())
    }

    #[test]
    fn floats_compare_by_value_with_nan_equal_to_nan() {
        let mut ctx = Context::new();
        let t = types(&mut ctx, &["tensor<4xf32>"])[0];
        let side = |tensor| Side { tensor, ty: t };
        let a = f32s(&[1.0, -0.0, f32::NAN, 4.0]);
        let b = f32s(&[1.0, 0.0, f32::NAN, 4.0]);
        let d = measure(&ctx, side(&a), side(&b), None).unwrap();
        assert_eq!(d, Difference { identical: true, max_abs: 0.0, relative: 0.0, steps: None });
        let c = f32s(&[1.0, 0.0, f32::NAN, 3.5]);
        let d = measure(&ctx, side(&a), side(&c), None).unwrap();
        assert!(!d.identical);
        assert_eq!((d.max_abs, d.relative), (0.5, 0.5 / 4.0));
        let nan = f32s(&[1.0, 0.0, 2.0, 4.0]);
        assert_eq!(measure(&ctx, side(&a), side(&nan), None).unwrap().max_abs, f64::INFINITY);
        let zeros = f32s(&[0.0; 4]);
        let d = measure(&ctx, side(&zeros), side(&nan), None).unwrap();
        assert_eq!(d.relative, f64::INFINITY, "any difference from all zeros is infinitely relative");
    }

    #[test]
    fn quantized_results_are_measured_in_real_values_and_steps() {
        let mut ctx = Context::new();
        let t = types(
            &mut ctx,
            &[
                "tensor<2x2x!qnn.uniform<i8:f32, 0.5:0>>",
                "tensor<2x2x!qnn.uniform<i8:f32, 0.25:0>>",
                "tensor<2x2x!qnn.uniform<i8:f32:1, {0.5:0, 0.25:0}>>",
                "tensor<2x2xf32>",
            ],
        );
        let a = i8s(&[2, 2], &[2, 4, 6, 8]);
        let b = i8s(&[2, 2], &[2, 5, 6, 5]);
        let grid = QuantGrid(quant_element(&ctx, t[0]).unwrap().clone());
        let d =
            measure(&ctx, Side { tensor: &a, ty: t[0] }, Side { tensor: &b, ty: t[0] }, Some(&grid)).unwrap();
        assert!(!d.identical);
        assert_eq!((d.max_abs, d.steps), (1.5, Some(3.0)), "the stored integers differ by 3");
        assert_eq!(d.relative, 1.5 / 4.0);
        // The same stored integers on another grid are other real values.
        let d = measure(&ctx, Side { tensor: &a, ty: t[0] }, Side { tensor: &a, ty: t[1] }, None).unwrap();
        assert!(!d.identical, "another type is not identical");
        assert_eq!(d.max_abs, 2.0);
        // A float result on a per-axis grid: steps by the scale of each
        // element's column.
        let axis_grid = QuantGrid(quant_element(&ctx, t[2]).unwrap().clone());
        let x = Tensor::from_f32(&[2, 2], vec![0.0, 0.0, 0.0, 0.0]).unwrap();
        let y = Tensor::from_f32(&[2, 2], vec![0.5, 0.25, 0.0, 0.5]).unwrap();
        let d = measure(&ctx, Side { tensor: &x, ty: t[3] }, Side { tensor: &y, ty: t[3] }, Some(&axis_grid));
        assert_eq!(d.unwrap().steps, Some(2.0), "0.5 in the column of scale 0.25");
    }

    #[test]
    fn another_shape_is_an_error() {
        let mut ctx = Context::new();
        let t = types(&mut ctx, &["tensor<4xf32>"])[0];
        let a = f32s(&[1.0; 4]);
        let b = f32s(&[1.0; 3]);
        let e = measure(&ctx, Side { tensor: &a, ty: t }, Side { tensor: &b, ty: t }, None).unwrap_err();
        assert!(e.starts_with("the shape changed from [4]"), "{e}");
    }
}
