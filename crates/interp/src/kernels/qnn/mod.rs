//! Kernels of the `qnn` dialect, bit for bit the integer semantics of
//! `docs/quant-semantics.md`.
//!
//! - [`convert`]: `quantize`, `dequantize`, `requantize`, `fake_quant` and the
//!   identities `cast_hint`, `stop_fusion`, `observe` (§3, §5, §8);
//! - [`conv`]: `conv2d`, `conv2d_relu` by im2col + GEMM (§6), and
//!   [`QuantConv2d`], the same computation with explicit parameters for
//!   downstream ops that fix them;
//! - [`conv_transpose`]: `conv_transpose2d`, `conv_transpose2d_relu` (§6.2);
//! - [`linear`]: `dense`, `dense_relu` by GEMM (§6);
//! - [`accumulate`]: what conv and dense share: the exact accumulation and the
//!   output stage (bias, `wrap32`, requantization, relu clamp, saturation);
//! - [`elementwise`]: `add`, `mul` with numpy broadcasting and `concat` (§7);
//! - [`pool`]: `avg_pool2d`, `global_avg_pool2d` (§7.4);
//! - [`lookup`]: `lookup`, a table indexed by the stored input value (§7.5).
//!
//! Every rule is applied by calling the function of `qopt_dialect_qnn` that
//! implements it (`fixed_point` for the arithmetic, `quant_params` for the
//! multipliers and parameters); nothing here re-derives a multiplier or a
//! rounding. Quantized tensors hold their stored integers ([`DType::of_element`]
//! of the storage type); kernels widen them to `i64`, compute, and narrow the
//! results (already saturated to the result's storage range) to the result's
//! storage dtype. Scales and zero points come from the operand and result
//! types of the [`KernelContext`]; each operand is checked against its type
//! first, so a tensor of the wrong dtype or shape is an error naming it.

mod accumulate;
mod conv;
mod conv_transpose;
mod convert;
pub use convert::dequantize_tensor;
mod elementwise;
mod linear;
mod lookup;
mod pool;

pub use accumulate::Relu;
pub use conv::QuantConv2d;

use super::fp::operand;
use crate::error::{bail, InterpError};
use crate::registry::{KernelContext, KernelRegistry};
use crate::tensor::{DType, Tensor};
use ndarray::ArrayD;
use qopt_dialect_fp::attrs;
use qopt_dialect_qnn::quant_params::{self, ScaleZp};
use qopt_dialect_qnn::Rounding;
use qopt_ir_core::{type_to_string, QuantType, Type, TypeData};

/// Registers a kernel for every `qnn` op: each op-family file lists its own.
pub(crate) fn register(r: &mut KernelRegistry) {
    for (name, kernel) in [
        convert::kernels(),
        conv::kernels(),
        conv_transpose::kernels(),
        linear::kernels(),
        elementwise::kernels(),
        pool::kernels(),
        lookup::kernels(),
    ]
    .into_iter()
    .flatten()
    {
        r.register(name, kernel);
    }
}

/// The quantized element type of tensor type `ty`, or an error naming it as `what`.
fn quant_of<'a>(kc: &KernelContext<'a>, ty: Type, what: &str) -> Result<&'a QuantType, InterpError> {
    match kc.ctx.type_data(kc.ctx.element_type(ty)) {
        TypeData::Quant(q) => Ok(q),
        _ => bail!(
            "{what} must have a quantized element type (!qnn.uniform<...>), got {}",
            type_to_string(kc.ctx, ty)
        ),
    }
}

/// Operand `i` checked against its type (dtype and static dimensions), with
/// that type; `what` names it in errors.
fn typed_operand<'t>(
    kc: &KernelContext<'_>,
    ops: &[&'t Tensor],
    i: usize,
    what: &str,
) -> Result<(&'t Tensor, Type), InterpError> {
    let t = operand(ops, i)?;
    let ty = kc.operand_type(i)?;
    t.check_type(kc.ctx, ty).map_err(|e| InterpError::new(format!("{what} {}", e.message)))?;
    Ok((t, ty))
}

/// The operands of a weighted op (conv, transposed conv, dense): `x` and
/// `w` with their quantized types, and the optional i32 bias.
struct WeightedOperands<'a, 't> {
    x: (&'t Tensor, &'a QuantType),
    w: (&'t Tensor, &'a QuantType),
    bias: Option<&'t Tensor>,
}

/// Reads `[x, w]` or `[x, w, b]` (see [`WeightedOperands`]).
fn weighted_operands<'a, 't>(
    kc: &KernelContext<'a>,
    ops: &[&'t Tensor],
) -> Result<WeightedOperands<'a, 't>, InterpError> {
    let x = quant_operand(kc, ops, 0, "input")?;
    let w = quant_operand(kc, ops, 1, "weight")?;
    let bias = match ops.len() {
        2 => None,
        3 => Some(typed_operand(kc, ops, 2, "bias")?.0),
        n => bail!("expects 2 or 3 operands, got {n}"),
    };
    Ok(WeightedOperands { x, w, bias })
}

/// Operand `i`, which must be quantized, with its quantized element type.
fn quant_operand<'a, 't>(
    kc: &KernelContext<'a>,
    ops: &[&'t Tensor],
    i: usize,
    what: &str,
) -> Result<(&'t Tensor, &'a QuantType), InterpError> {
    let (t, ty) = typed_operand(kc, ops, i, what)?;
    Ok((t, quant_of(kc, ty, what)?))
}

/// The quantized element type of result 0.
fn result_quant<'a>(kc: &KernelContext<'a>) -> Result<&'a QuantType, InterpError> {
    quant_of(kc, kc.result_type(0)?, "result")
}

/// The parameters of a per-tensor type, or an error naming `what`.
fn per_tensor(q: &QuantType, what: &str) -> Result<ScaleZp, InterpError> {
    match quant_params::per_tensor(q) {
        Some(p) => Ok(p),
        None => bail!("{what} must be quantized per tensor, not per axis"),
    }
}

/// The `rounding` attribute (§4.3; default `half_away_from_zero`). A value
/// that names no mode is an error, not the default.
fn rounding(kc: &KernelContext<'_>) -> Result<Rounding, InterpError> {
    let name = attrs::one_of_in(kc.ctx, kc.attrs, Rounding::ATTR, Rounding::NAMES[0], &Rounding::NAMES)?;
    Rounding::parse(name).ok_or_else(|| InterpError::new(format!("unknown rounding mode \"{name}\"")))
}

/// The stored integers of a quantized tensor, widened to `i64`.
fn ints(t: &Tensor, what: &str) -> Result<ArrayD<i64>, InterpError> {
    Ok(match t {
        Tensor::I8(a) => a.mapv(i64::from),
        Tensor::U8(a) => a.mapv(i64::from),
        Tensor::I16(a) => a.mapv(i64::from),
        Tensor::I32(a) => a.mapv(i64::from),
        Tensor::I64(a) => a.clone(),
        other => bail!("{what} must hold stored integers, got a {} tensor", other.dtype()),
    })
}

/// `values` (row-major, of `shape`) as a tensor of the result's storage dtype.
/// Kernels saturate to the result's storage range first, so every value fits;
/// one that does not is an error, never a wrap.
fn narrow(kc: &KernelContext<'_>, shape: &[usize], values: Vec<i64>) -> Result<Tensor, InterpError> {
    fn build<T: TryFrom<i64>>(shape: &[usize], values: Vec<i64>) -> Result<ArrayD<T>, InterpError> {
        let values = values
            .into_iter()
            .map(|v| {
                T::try_from(v)
                    .map_err(|_| InterpError::new(format!("value {v} does not fit the result storage")))
            })
            .collect::<Result<Vec<T>, _>>()?;
        ArrayD::from_shape_vec(shape, values).map_err(|e| InterpError::new(e.to_string()))
    }
    let dtype = DType::of_element(kc.ctx, kc.result_element(0)?)?;
    Ok(match dtype {
        DType::I8 => Tensor::I8(build(shape, values)?),
        DType::U8 => Tensor::U8(build(shape, values)?),
        DType::I16 => Tensor::I16(build(shape, values)?),
        DType::I32 => Tensor::I32(build(shape, values)?),
        DType::I64 => Tensor::I64(build(shape, values)?),
        other => bail!("the result must have integer storage, got {other}"),
    })
}

/// Which parameter entry of a quantized type applies to each element of a
/// tensor (§2): entry 0 for a per-tensor type; for a per-axis type, the
/// element's coordinate along the axis.
#[derive(Debug)]
struct ParamIndex {
    /// Every entry's parameters.
    entries: Vec<ScaleZp>,
    /// Elements per step along the axis (row-major), at least 1.
    inner: usize,
}

impl ParamIndex {
    /// The entries of `q` for a tensor of `shape`; an error, naming `what`,
    /// if per-axis parameters do not fit the shape.
    fn new(q: &QuantType, shape: &[usize], what: &str) -> Result<ParamIndex, InterpError> {
        let entries = quant_params::params(q);
        let Some(axis) = quant_params::axis(q) else { return Ok(ParamIndex { entries, inner: 1 }) };
        match shape.get(axis) {
            Some(&size) if size == entries.len() => {}
            Some(&size) => bail!(
                "{what}: per-axis quantization along axis {axis} has {} parameter entries but the dimension is {size}",
                entries.len()
            ),
            None => bail!("{what}: per-axis quantization axis {axis} is not a dimension of shape {shape:?}"),
        }
        let inner = shape[axis + 1..].iter().product::<usize>().max(1);
        Ok(ParamIndex { entries, inner })
    }

    /// The entry of the element at row-major position `flat`.
    fn of(&self, flat: usize) -> usize {
        (flat / self.inner) % self.entries.len().max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::fp::tests::{run_typed, run_typed_err};
    use qopt_ir_core::Context;

    #[test]
    fn registry_covers_every_qnn_op() {
        let mut ctx = Context::new();
        qopt_dialect_fp::register(&mut ctx).unwrap();
        qopt_dialect_qnn::register(&mut ctx).unwrap();
        let r = KernelRegistry::standard();
        for def in ctx.op_defs() {
            if def.name.starts_with("qnn.") || def.name.starts_with("fp.") {
                assert!(r.contains(def.name), "no kernel for {}", def.name);
            }
        }
    }

    #[test]
    fn operands_are_checked_against_their_types() {
        let mut ctx = Context::new();
        let q = i8t(&[2], &[1, 2]);
        let ty = "tensor<2x!qnn.uniform<i8:f32, 0.5:0>>";
        let e = run_typed_err(
            &mut ctx,
            convert::requantize,
            &[&q],
            &["tensor<3x!qnn.uniform<i8:f32, 0.5:0>>"],
            "{}",
            &[ty],
        );
        assert_eq!(e, "input expects tensor<3x!qnn.uniform<i8:f32, 0.5:0>>, got int8 [2]");
        let e = run_typed_err(&mut ctx, convert::requantize, &[&q], &["tensor<2xi8>"], "{}", &[ty]);
        assert!(e.contains("input must have a quantized element type"), "{e}");
        let e = run_typed_err(&mut ctx, convert::requantize, &[&q], &[ty], "{rounding = \"up\"}", &[ty]);
        assert!(e.contains("rounding"), "{e}");
        // Without operand types a qnn kernel cannot know the parameters.
        let e = crate::kernels::fp::tests::run_all(&mut ctx, convert::requantize, &[&q], "{}", &[ty])
            .unwrap_err();
        assert!(e.message.contains("type of operand #0 is not known"), "{e}");
        let u = crate::kernels::fp::tests::f32t(&[2], &[1., 2.]);
        let e =
            run_typed_err(&mut ctx, convert::dequantize, &[&u], &["tensor<2xf32>"], "{}", &["tensor<2xf32>"]);
        assert!(e.contains("quantized element type"), "{e}");
        let _ = run_typed(&mut ctx, convert::requantize, &[&q], &[ty], "{}", &[ty]);
    }

    #[test]
    fn param_index_per_axis() {
        use qopt_ir_core::{FloatKind, IntType, QuantParams, Signedness};
        let q = QuantType {
            storage: IntType { width: 8, signedness: Signedness::Signless },
            storage_min: -128,
            storage_max: 127,
            expressed: FloatKind::F32,
            params: QuantParams::PerAxis {
                axis: 1,
                scales: [0.1, 0.2, 0.3].into(),
                zero_points: [0, 1, 2].into(),
            },
        };
        let p = ParamIndex::new(&q, &[2, 3, 2], "x").unwrap();
        let entries: Vec<usize> = (0..12).map(|i| p.of(i)).collect();
        assert_eq!(entries, [0, 0, 1, 1, 2, 2, 0, 0, 1, 1, 2, 2]);
        assert!(ParamIndex::new(&q, &[2, 2], "x").unwrap_err().message.contains("3 parameter entries"));
        assert!(ParamIndex::new(&q, &[2], "x").unwrap_err().message.contains("not a dimension"));
    }

    macro_rules! int_tensor {
        ($($name:ident: $t:ty => $v:ident),*) => {$(
            /// A tensor of stored integers of this type.
            pub(crate) fn $name(shape: &[usize], data: &[$t]) -> Tensor {
                Tensor::$v(ArrayD::from_shape_vec(shape, data.to_vec()).unwrap())
            }
        )*};
    }
    int_tensor!(i8t: i8 => I8, u8t: u8 => U8, i16t: i16 => I16, i32t: i32 => I32);
}
