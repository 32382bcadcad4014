//! Reading the quantized operands and results of an op for the integer
//! kernels: storage of at most 8 bits (one byte per element, `i8` or `u8`
//! buffers), the storage range, and per-tensor or per-axis parameters, with
//! `Unsupported` errors (never panics) for what the kernels do not compile.
//!
//! The expressed type plays no part in integer arithmetic, so any of f32, f16
//! and bf16 is accepted here (`lower/convert.rs`, which computes in floats, is
//! stricter).

use crate::buffer::ElementType;
use crate::error::CodegenError;
use crate::kernels::quant_params::ByteQuant;
use crate::lower::LowerOp;
use qopt_dialect_qnn::quant_params::{self, check_quant_type, ScaleZp};
use qopt_ir_core::{type_to_string, QuantType, Type};

/// A quantized tensor type as a byte kernel sees it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct QuantOperand<'a> {
    /// The type.
    pub quant: &'a QuantType,
    /// `u8` buffers (unsigned storage) rather than `i8`.
    pub unsigned: bool,
    /// Smallest stored value of the type (narrowed range included).
    pub qmin: i32,
    /// Largest stored value.
    pub qmax: i32,
    /// Every parameter entry (one when per tensor).
    pub params: Vec<ScaleZp>,
    /// The quantized axis of a per-axis type.
    pub axis: Option<usize>,
}

impl<'a> QuantOperand<'a> {
    /// The quantized tensor type `ty` (`what` names it in errors): an error
    /// when it is not quantized, invalid, or stored in more than 8 bits.
    pub(crate) fn of(op: &LowerOp<'a>, ty: Type, what: &str) -> Result<QuantOperand<'a>, CodegenError> {
        let quant = op.quant_of(ty).ok_or_else(|| {
            op.unsupported(format!(
                "{what} must be a tensor of !qnn.uniform elements here, got {}",
                type_to_string(op.ctx, ty)
            ))
        })?;
        check_quant_type(quant).map_err(|e| op.invalid(format!("{what}: {e}")))?;
        if quant.storage.width > 8 {
            return Err(op.unsupported(format!(
                "{what} has {}-bit storage; compiled kernels hold 8 bits at most",
                quant.storage.width
            )));
        }
        let unsigned = op.element_of(ty, what)? == ElementType::U8;
        let (qmin, qmax) = quant_params::storage_range(quant);
        Ok(QuantOperand {
            quant,
            unsigned,
            qmin: qmin as i32,
            qmax: qmax as i32,
            params: quant_params::params(quant),
            axis: quant_params::axis(quant),
        })
    }

    /// The per-tensor parameters, or `Unsupported` naming `what`.
    pub(crate) fn per_tensor(&self, op: &LowerOp<'_>, what: &str) -> Result<ByteQuant, CodegenError> {
        match (self.axis, self.params.as_slice()) {
            (None, [p]) => Ok(ByteQuant {
                element: if self.unsigned { ElementType::U8 } else { ElementType::I8 },
                scale: p.scale,
                zero_point: p.zero_point as i32,
                qmin: self.qmin,
                qmax: self.qmax,
            }),
            _ => Err(
                op.unsupported(format!("{what} is quantized per axis; this op is compiled per tensor only"))
            ),
        }
    }

    /// The smallest and largest value the buffer's bytes can hold (the
    /// storage type's full byte range, whatever the type's narrowed range).
    pub(crate) fn byte_range(&self) -> (i32, i32) {
        if self.unsigned {
            (0, 255)
        } else {
            (-128, 127)
        }
    }
}

/// Checks that every operand and result of `op` has a static shape and at
/// most `i32::MAX` bytes, so that every offset and stride of its kernels is
/// a 32-bit immediate: bigger tensors are `Unsupported` when planning,
/// never an error or a wrong address later.
pub(crate) fn check_tensor_sizes(op: &LowerOp<'_>) -> Result<(), CodegenError> {
    let types = (0..op.num_operands())
        .map(|i| (op.operand_type(i), format!("operand {i}")))
        .chain((0..op.num_results()).map(|j| (op.result_type(j), format!("result {j}"))));
    for (ty, what) in types {
        let shape = op.shape_of(ty, &what)?;
        let size = op.element_of(ty, &what)?.size();
        let bytes = shape.iter().try_fold(size, |acc, &d| acc.checked_mul(d));
        if bytes.is_none_or(|b| b > i32::MAX as usize) {
            return Err(
                op.unsupported(format!("{what} holds more than 2 GiB; kernels address 32-bit offsets"))
            );
        }
    }
    Ok(())
}
