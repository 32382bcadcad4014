//! The one table of the ops this backend compiles out of the box: every op
//! name and the lowering that compiles it ([`register`]). Each lowering
//! lives in the file of its op family beside this one.

use super::alias::Alias;
use super::binary::Binary;
use super::concat::QuantConcat;
use super::conv::Conv2dLowering;
use super::conv_transpose::ConvTransposeLowering;
use super::convert::Convert;
use super::dense::DenseLowering;
use super::lookup::Lookup;
use super::pooling::Pool;
use super::prelu::Prelu;
use super::requantize::Requantize;
use super::resize::Resize;
use super::rows::RowLowering;
use super::{movement, Lowerings, OpLowering};
use qopt_dialect_fp::op_names as fp_op;
use qopt_dialect_qnn::op_names as qnn_op;
use std::sync::Arc;

/// Registers every built-in lowering.
pub(super) fn register(l: &mut Lowerings) {
    let table: Vec<(&[&str], Arc<dyn OpLowering>)> = vec![
        (&[qnn_op::QUANTIZE, qnn_op::DEQUANTIZE], Arc::new(RowLowering(Convert))),
        (&[qnn_op::REQUANTIZE], Arc::new(RowLowering(Requantize))),
        (&[qnn_op::PRELU], Arc::new(RowLowering(Prelu))),
        (&[qnn_op::ADD, qnn_op::SUB, qnn_op::MUL], Arc::new(RowLowering(Binary))),
        (&[qnn_op::CONCAT], Arc::new(RowLowering(QuantConcat))),
        (&[qnn_op::LOOKUP], Arc::new(RowLowering(Lookup))),
        (
            &[qnn_op::AVG_POOL2D, qnn_op::GLOBAL_AVG_POOL2D, fp_op::MAX_POOL2D, fp_op::MAX_POOL1D],
            Arc::new(RowLowering(Pool)),
        ),
        (&[fp_op::RESIZE], Arc::new(RowLowering(Resize))),
        (&[fp_op::TRANSPOSE], Arc::new(RowLowering(movement::Transpose))),
        (&[fp_op::STRIDED_SLICE], Arc::new(RowLowering(movement::StridedSlice))),
        (&[fp_op::SPLIT], Arc::new(RowLowering(movement::Split))),
        (&[fp_op::CONCAT], Arc::new(RowLowering(movement::Concat))),
        (&[fp_op::PAD], Arc::new(RowLowering(movement::Pad))),
        (&[fp_op::RELU], Arc::new(RowLowering(movement::Relu))),
        (&[qnn_op::CONV2D, qnn_op::CONV2D_RELU], Arc::new(Conv2dLowering::default())),
        (
            &[qnn_op::CONV_TRANSPOSE2D, qnn_op::CONV_TRANSPOSE2D_RELU],
            Arc::new(ConvTransposeLowering::default()),
        ),
        (&[qnn_op::DENSE, qnn_op::DENSE_RELU], Arc::new(DenseLowering::default())),
        (&[fp_op::RESHAPE, fp_op::FLATTEN, qnn_op::CAST_HINT, qnn_op::STOP_FUSION], Arc::new(Alias)),
    ];
    for (names, lowering) in table {
        for name in names {
            l.register(name, lowering.clone());
        }
    }
}
