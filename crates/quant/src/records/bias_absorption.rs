//! [`AbsorptionRecord`]: the attribute `qnn.bias_absorption` that `absorb-bias`
//! writes on the first layer of each pair, so the IR says what it measured
//! and what it moved.
//!
//! ```text
//! %h = fp.conv2d(%x, %w1, %b1) {qnn.bias_absorption = {absorbed = dense<[0.0, 0.4]> : tensor<2xf64>,
//!        channel_min = dense<[-1.3, 0.4]> : tensor<2xf64>, samples = 500}} : ...
//! ```
//!
//! - `channel_min`, `samples` (together): per output channel, the smallest
//!   value of the layer's result over `samples` calibration samples, with
//!   the layer's original bias (stored bias + `absorbed`), so the minima do
//!   not depend on what was absorbed. With them present `absorb-bias` does not
//!   measure again, so they can be read, edited, or removed (to measure again).
//! - `absorbed` (default zeros): per output channel, what has been moved out
//!   of this layer's bias into the next layer's, so a rerun moves only the
//!   difference to what it wants absorbed.
//!
//! Invariant: every vector has one finite value per output channel, and
//! `absorbed` is never negative; [`AbsorptionRecord::load`] refuses anything
//! else with a message naming the field.

use super::channel_record::{drop_record_attrs, vector_attr, write_record, RecordReader};
use qopt_ir_core::{Context, Module, OpId};

/// The attribute's name (the `fp` dialect declares it an annotation of its
/// weighted ops, so the equivalence checker leaves it out of the op's
/// identity, and reads it as the op's recorded range, which the
/// `calibrated-range` relation assumes: `qopt_dialect_fp::attrs::recorded_minima`).
pub const BIAS_ABSORPTION: &str = qopt_dialect_fp::attrs::BIAS_ABSORPTION;

/// The contents of [`BIAS_ABSORPTION`] (see the module docs).
#[derive(Clone, Debug, PartialEq)]
pub struct AbsorptionRecord {
    /// Moved out of the bias so far, per output channel.
    pub absorbed: Vec<f64>,
    /// The measured minima, when present.
    pub measured: Option<MeasuredMinima>,
}

/// The per-channel minima of a layer's result over the calibration data.
#[derive(Clone, Debug, PartialEq)]
pub struct MeasuredMinima {
    /// The smallest value of each output channel, with the original bias.
    pub channel_min: Vec<f64>,
    /// The calibration samples they are minima over.
    pub samples: i64,
}

impl AbsorptionRecord {
    /// Nothing absorbed or measured yet, for `channels` output channels.
    pub fn none(channels: usize) -> AbsorptionRecord {
        AbsorptionRecord { absorbed: vec![0.0; channels], measured: None }
    }

    /// The record on `op`, or [`AbsorptionRecord::none`] without one; an
    /// error when it is malformed or its vectors do not have `channels` values.
    pub fn load(
        ctx: &Context,
        module: &Module,
        op: OpId,
        channels: usize,
    ) -> Result<AbsorptionRecord, String> {
        let Some(record) = RecordReader::open(ctx, module, op, BIAS_ABSORPTION, channels)? else {
            return Ok(AbsorptionRecord::none(channels));
        };
        let absorbed = record.vector("absorbed")?.unwrap_or_else(|| vec![0.0; channels]);
        if let Some(bad) = absorbed.iter().find(|&&a| a < 0.0) {
            return Err(format!(
                "'{BIAS_ABSORPTION}': 'absorbed' holds {bad}, but absorbed amounts are at least 0"
            ));
        }
        let measured = match (record.vector("channel_min")?, record.samples()?) {
            (Some(channel_min), Some(samples)) => Some(MeasuredMinima { channel_min, samples }),
            (None, None) => None,
            _ => {
                return Err(format!(
                    "'{BIAS_ABSORPTION}' needs 'channel_min' and 'samples' together (remove both to measure again)"
                ))
            }
        };
        Ok(AbsorptionRecord { absorbed, measured })
    }

    /// Writes the record onto `op` (replacing any earlier one).
    pub fn store(&self, ctx: &mut Context, module: &mut Module, op: OpId) -> Result<(), String> {
        let mut entries = vec![("absorbed", vector_attr(ctx, &self.absorbed)?)];
        if let Some(m) = &self.measured {
            entries.push(("channel_min", vector_attr(ctx, &m.channel_min)?));
            entries.push(("samples", ctx.i64_attr(m.samples)));
        }
        write_record(ctx, module, op, BIAS_ABSORPTION, &entries);
        Ok(())
    }
}

/// Removes every [`BIAS_ABSORPTION`] record of `module` (`expand-fakeq`
/// does: the minima describe float pre-activations, which the integer model
/// no longer has). Returns how many were removed.
pub fn drop_records(ctx: &mut Context, module: &mut Module) -> usize {
    drop_record_attrs(ctx, module, BIAS_ABSORPTION)
}
