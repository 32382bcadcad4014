//! The ops of the `qnn` dialect, one module per family, and the checks their
//! verifiers share.
//!
//! - [`convert`]: `quantize`, `dequantize`, `requantize`, `fake_quant`,
//!   `cast_hint`, `stop_fusion`;
//! - [`observe`]: `observe` and its statistics attributes;
//! - [`compute`]: `conv2d`, `conv2d_relu`, `dense`, `dense_relu`, `add`, `mul`,
//!   `concat` on quantized operands;
//! - [`pool`]: `avg_pool2d`, `global_avg_pool2d`;
//! - [`lookup`]: `lookup`, a table of a unary function's values.
//!
//! Verifiers read operand and result types only after the core verifier has
//! checked counts and type well-formedness, but they still never index beyond
//! the counts they check and never panic on IR content.

use crate::fixed_point::Rounding;
use qopt_dialect_fp::{attrs, shape};
use qopt_ir_core::interfaces::AttributeDefaults;
use qopt_ir_core::{type_to_string, Attribute, Context, FloatKind, OpDef, QuantType, Type, TypeData};

pub(crate) mod compute;
pub(crate) mod convert;
pub(crate) mod lookup;
pub(crate) mod observe;
pub(crate) mod pool;

/// Every op of the dialect.
pub(crate) fn all() -> Vec<OpDef> {
    let mut ops = convert::ops();
    ops.extend(observe::ops());
    ops.extend(compute::ops());
    ops.extend(pool::ops());
    ops.extend(lookup::ops());
    ops
}

/// One tensor operand or result, as a check sees it.
#[derive(Copy, Clone)]
pub(crate) struct Tensor<'c> {
    /// "input", "result", "operand #2": for messages.
    pub what: &'c str,
    pub ty: Type,
    pub shape: &'c [i64],
    pub elem: Type,
}

impl<'c> Tensor<'c> {
    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// The quantized element type, or an error naming the tensor.
    pub fn quant(&self, ctx: &'c Context) -> Result<&'c QuantType, String> {
        match ctx.type_data(self.elem) {
            TypeData::Quant(q) => Ok(q),
            _ => Err(format!(
                "{} must have a quantized element type (!qnn.uniform<...>), got {}",
                self.what,
                type_to_string(ctx, self.ty)
            )),
        }
    }

    /// The quantized element type, which must be per tensor.
    pub fn per_tensor_quant(&self, ctx: &'c Context) -> Result<&'c QuantType, String> {
        let q = self.quant(ctx)?;
        if crate::quant_params::axis(q).is_some() {
            return Err(format!(
                "{} must be quantized per tensor, got per-axis {}",
                self.what,
                type_to_string(ctx, self.elem)
            ));
        }
        Ok(q)
    }

    /// The float kind of the element type, which must be f32, f16 or bf16 (the
    /// expressed types quantized types allow).
    pub fn expressible_float(&self, ctx: &Context) -> Result<FloatKind, String> {
        match ctx.type_data(self.elem) {
            TypeData::Float(k @ (FloatKind::F32 | FloatKind::F16 | FloatKind::BF16)) => Ok(*k),
            _ => Err(format!(
                "{} must have element type f32, f16 or bf16, got {}",
                self.what,
                type_to_string(ctx, self.ty)
            )),
        }
    }

    /// An error unless the tensor has rank `rank`; `layout` helps the reader.
    pub fn expect_rank(&self, ctx: &Context, rank: usize, layout: &str) -> Result<(), String> {
        if self.rank() == rank {
            return Ok(());
        }
        Err(format!("{} must have rank {rank} ({layout}), got {}", self.what, type_to_string(ctx, self.ty)))
    }
}

/// `ty` as a tensor, or an error naming it as `what`.
pub(crate) fn tensor<'c>(ctx: &'c Context, ty: Type, what: &'c str) -> Result<Tensor<'c>, String> {
    match shape::tensor_parts(ctx, ty) {
        Some((shape, elem)) => Ok(Tensor { what, ty, shape, elem }),
        None => Err(format!("{what} must be a tensor, got {}", type_to_string(ctx, ty))),
    }
}

/// An error unless `got` equals `want`: `result shape must be 2x3 (<why>), got 3x2`.
pub(crate) fn expect_shape(what: &str, got: &[i64], want: &[i64], why: &str) -> Result<(), String> {
    if got == want {
        return Ok(());
    }
    Err(format!(
        "{what} shape must be {} ({why}), got {}",
        shape::shape_to_string(want),
        shape::shape_to_string(got)
    ))
}

/// The `rounding` attribute (default [`Rounding::default`],
/// `half_away_from_zero`).
pub(crate) fn rounding_in(ctx: &Context, attrs: Attribute) -> Result<Rounding, String> {
    let name = attrs::one_of_in(ctx, attrs, Rounding::ATTR, Rounding::default().name(), &Rounding::NAMES)?;
    Ok(Rounding::parse(name).unwrap_or_default())
}

/// `rounding` with the default [`rounding_in`] reads when it is missing, by
/// name, for the [`AttributeDefaults`] interface of every op that has one.
pub(crate) fn rounding_defaults(ctx: &mut Context) -> Vec<(&'static str, Attribute)> {
    vec![(Rounding::ATTR, ctx.string_attr(Rounding::default().name()))]
}

/// The [`AttributeDefaults`] of an op whose only defaulted attribute is
/// `rounding` (ops with more extend [`rounding_defaults`]).
pub(crate) const ROUNDING_DEFAULT: AttributeDefaults = AttributeDefaults(rounding_defaults);

/// The `rounding` attribute of the op whose attributes are `attrs`, or the
/// default when it is missing or malformed (the verifier reports malformed ones).
pub fn rounding_of(ctx: &Context, attrs: Attribute) -> Rounding {
    rounding_in(ctx, attrs).unwrap_or_default()
}

/// The `relu_max` attribute of a `_relu` op whose attributes are `attrs`: a
/// finite float > 0, or `None` when missing.
pub(crate) fn relu_max_in(ctx: &Context, attrs: Attribute) -> Result<Option<f64>, String> {
    match qopt_dialect_fp::attrs::opt_float_in(ctx, attrs, "relu_max")? {
        Some(m) if !(m.is_finite() && m > 0.0) => {
            Err(format!("'relu_max' must be finite and above 0, got {m}"))
        }
        other => Ok(other),
    }
}

/// The `relu_max` attribute of a `_relu` op (`None` when missing or
/// malformed; the verifier reports malformed ones).
pub fn relu_max_of(ctx: &Context, attrs: Attribute) -> Option<f64> {
    relu_max_in(ctx, attrs).ok().flatten()
}

/// The description text of the `relu_max` attribute, for `concat!`.
macro_rules! relu_max_doc {
    () => {
        "`relu_max` (optional float > 0): a fused `clip(0, relu_max)` (ReLU6 is 6.0): the output is also \
         clamped at `quantize(relu_max)` in the result's parameters (`docs/quant-semantics.md` §6)"
    };
}
pub(crate) use relu_max_doc;

/// The description text of the `rounding` attribute, for `concat!` in op
/// descriptions.
macro_rules! rounding_doc {
    () => {
        "`rounding` (optional string: `\"half_away_from_zero\"` (default), `\"half_to_even\"` or \
         `\"half_up\"`): how ties of the fixed-point rescaling round (`docs/quant-semantics.md` §4.3)"
    };
}
pub(crate) use rounding_doc;

/// An attribute's text for a message, cut to about 60 characters (a weight
/// blob would otherwise fill the screen).
pub(crate) fn describe(ctx: &Context, attr: Attribute) -> String {
    let text = qopt_ir_core::attr_to_string(ctx, attr);
    if text.chars().count() <= 60 {
        return text;
    }
    let cut: String = text.chars().take(57).collect();
    format!("{cut}...")
}

#[cfg(test)]
mod robustness_tests;
