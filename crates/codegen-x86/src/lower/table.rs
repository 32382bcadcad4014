//! The one table of the ops this backend compiles out of the box: every op
//! name and the lowering that compiles it ([`register`]). Each lowering
//! lives in the file of its op family beside this one.

use super::alias::Alias;
use super::binary::Binary;
use super::concat::QuantConcat;
use super::conv::Conv2dLowering;
use super::convert::Convert;
use super::dense::DenseLowering;
use super::lookup::Lookup;
use super::pooling::Pool;
use super::requantize::Requantize;
use super::resize::Resize;
use super::{movement, Lowerings, OpLowering};
use qopt_dialect_fp::op_names as fp_op;
use qopt_dialect_qnn::op_names as qnn_op;
use std::sync::Arc;

/// Registers every built-in lowering.
pub(super) fn register(l: &mut Lowerings) {
    let convert: Arc<dyn OpLowering> = Arc::new(Convert);
    for name in [qnn_op::QUANTIZE, qnn_op::DEQUANTIZE] {
        l.register(name, convert.clone());
    }
    l.register(qnn_op::REQUANTIZE, Arc::new(Requantize));
    let binary: Arc<dyn OpLowering> = Arc::new(Binary);
    for name in [qnn_op::ADD, qnn_op::MUL] {
        l.register(name, binary.clone());
    }
    l.register(qnn_op::CONCAT, Arc::new(QuantConcat));
    l.register(qnn_op::LOOKUP, Arc::new(Lookup));
    let pool: Arc<dyn OpLowering> = Arc::new(Pool);
    for name in [qnn_op::AVG_POOL2D, qnn_op::GLOBAL_AVG_POOL2D, fp_op::MAX_POOL2D, fp_op::MAX_POOL1D] {
        l.register(name, pool.clone());
    }
    l.register(fp_op::RESIZE, Arc::new(Resize));
    for (name, lowering) in movement::lowerings() {
        l.register(name, lowering);
    }
    let conv = Arc::new(Conv2dLowering::default());
    l.register(qnn_op::CONV2D, conv.clone());
    l.register(qnn_op::CONV2D_RELU, conv);
    let dense = Arc::new(DenseLowering::default());
    l.register(qnn_op::DENSE, dense.clone());
    l.register(qnn_op::DENSE_RELU, dense);
    let alias: Arc<dyn OpLowering> = Arc::new(Alias);
    for name in ["fp.reshape", "fp.flatten", "fp.squeeze", "fp.unsqueeze", "qnn.cast_hint", "qnn.stop_fusion"]
    {
        l.register(name, alias.clone());
    }
}
