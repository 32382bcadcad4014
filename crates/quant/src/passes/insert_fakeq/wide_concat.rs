//! Concats of values with very different ranges keep 16 bits.
//!
//! A concat's output has one scale. When it joins values whose calibrated
//! ranges differ by orders of magnitude (a detector head joins box
//! coordinates up to hundreds with class scores below one), the 8-bit scale
//! that covers the widest input rounds the narrowest one to a handful of
//! levels, often to zero: ONNX Runtime and NNCF quantize it that way and
//! lose the scores. Here the observer of such a concat's result stores
//! 16 bits instead (what a `storage = "i16"` hint would ask for), when the
//! narrowest input would keep fewer than [`MIN_LEVELS`] of the 8-bit
//! output's levels; the inputs keep their own 8-bit types (each is
//! requantized into the wide output exactly enough), and `quant-lint` says
//! which concat was widened and why, naming the inputs.

use crate::calibration::stats::ObserverStats;
use crate::records::hints::{is_skipped, STORAGE};
use qopt_dialect_fp::op_names as fp_op;
use qopt_dialect_qnn::op_names as qnn_op;
use qopt_ir_core::{Context, IntType, Module, OpId, Signedness, ValueId};

/// The fewest levels of an 8-bit output scale the narrowest input of a
/// concat may keep before the concat's output is stored in 16 bits.
pub(crate) const MIN_LEVELS: f64 = 16.0;

/// The storage a widened concat's output takes.
pub(super) const WIDE: IntType = IntType { width: 16, signedness: Signedness::Signless };

/// The observers (of `observers`) of `fp.concat` results to store wide:
/// every concat input and the result observed, with calibrated ranges, no
/// `storage` of its own, and the narrowest input keeping fewer than
/// [`MIN_LEVELS`] of the 256 levels of a scale covering them all.
pub(super) fn wide_concat_observers(ctx: &Context, module: &Module, observers: &[OpId]) -> Vec<OpId> {
    let range_of = |observer: OpId| -> Option<f64> {
        let stats = ObserverStats::load(ctx, module, observer).ok()?;
        let lo = stats.min.iter().copied().fold(0.0f32, f32::min);
        let hi = stats.max.iter().copied().fold(0.0f32, f32::max);
        (stats.has_data() && lo.is_finite() && hi.is_finite()).then_some(f64::from(hi) - f64::from(lo))
    };
    let observer_of = |v: ValueId| -> Option<OpId> {
        let def = module.defining_op(v);
        (!def.is_none() && module.op_is(ctx, def, qnn_op::OBSERVE)).then_some(def)
    };
    let mut wide = Vec::new();
    for &observer in observers {
        if module.op_attr(ctx, observer, STORAGE).is_some() {
            continue;
        }
        let concat = module.defining_op(module.operand(observer, 0));
        if concat.is_none() || !module.op_is(ctx, concat, fp_op::CONCAT) || is_skipped(ctx, module, concat) {
            continue;
        }
        let inputs: Option<Vec<f64>> =
            module.operands(concat).map(|v| observer_of(v).and_then(range_of)).collect();
        let (Some(inputs), Some(output)) = (inputs, range_of(observer)) else { continue };
        let narrowest = inputs.iter().copied().fold(f64::INFINITY, f64::min);
        let widest = inputs.iter().copied().fold(output, f64::max);
        if narrowest > 0.0 && 255.0 * narrowest / widest < MIN_LEVELS {
            wide.push(observer);
        }
    }
    wide
}
