//! [`AccelConvRelu`], the toy accelerator's pattern for qopt's `fuse` pass: a
//! float conv + relu between quantized values that the engine supports goes
//! straight to it (DMA in, `accel.conv2d_relu`, DMA out), with no
//! `qnn.conv2d_relu` in between. Anything else it declines, and `fuse`'s
//! built-in pattern makes the `qnn` op (which `accel-lower` can still take
//! later). The check is [`crate::check_conv`], as for `accel-lower`, so both
//! routes agree on what the engine takes.

use crate::accel_lower::{check_conv_attrs, on_device};
use crate::ops::conv::Elements;
use qopt_dialect_fp::op_names as fp_op;
use qopt_dialect_qnn::quant_params::quant_element;
use qopt_ir_core::{Rewriter, ValueId};
use qopt_quant::{integer_bias, Activation, FuseSite, QuantPattern};

/// The `fuse` pattern `fused-accel-conv2d-relu`; see the module docs.
pub struct AccelConvRelu;

impl QuantPattern for AccelConvRelu {
    fn name(&self) -> &'static str {
        "fused-accel-conv2d-relu"
    }

    fn root(&self) -> &'static str {
        fp_op::CONV2D
    }

    fn rewrite(&self, rw: &mut Rewriter<'_>, site: &FuseSite) -> Result<Option<ValueId>, String> {
        if site.activation != Activation::Relu {
            return Ok(None);
        }
        let (x, w) = match site.operands.as_slice() {
            [x, w] | [x, w, _] => (x.quantized(), w.quantized()),
            _ => return Ok(None),
        };
        let (Some(x), Some(w)) = (x, w) else { return Ok(None) };
        let (Some(qx), Some(qw)) = (
            quant_element(rw.ctx, rw.module.value_type(x)).cloned(),
            quant_element(rw.ctx, rw.module.value_type(w)).cloned(),
        ) else {
            return Ok(None);
        };
        let mut operands = vec![x, w];
        if let Some(&bias) = site.operands.get(2) {
            let Some(b) = integer_bias(rw, bias, &qx, &qw)? else { return Ok(None) };
            operands.push(b);
        }
        let types: Vec<_> = operands.iter().map(|&v| rw.module.value_type(v)).collect();
        let attrs = rw.module.op_attrs(site.op);
        let bias = types.get(2).copied();
        let checked =
            check_conv_attrs(rw.ctx, attrs, types[0], types[1], bias, site.output, Elements::Quantized);
        let Ok(contract) = checked else {
            return Ok(None);
        };
        let loc = rw.module.op_loc(site.op);
        on_device(rw, operands, site.output, &contract, loc).map(Some)
    }
}
