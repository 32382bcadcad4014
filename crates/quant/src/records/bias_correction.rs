//! [`BiasRecord`]: the attribute `qnn.bias_correction` on a conv or dense
//! whose bias a pass corrected, so the IR says what was changed and why.
//!
//! ```text
//! %y = fp.conv2d(%x, %wq, %b) {qnn.bias_correction = {correction = dense<[0.01, -0.02]> : tensor<2xf64>,
//!        float_mean = dense<[0.31, 1.2]> : tensor<2xf64>, quant_mean = dense<[0.32, 1.18]> : tensor<2xf64>,
//!        samples = 500}} : ...
//! ```
//!
//! - `correction` (always): per output channel, what has been subtracted from
//!   the bias, so the float model's bias is the stored bias + `correction`.
//!   `insert-fakeq`'s fast bias correction and `bias-correct` both keep it up
//!   to date; `bias-correct` needs it to run the float model with the float
//!   biases.
//! - `float_mean`, `quant_mean`, `samples` (written by `bias-correct`): the
//!   per-channel mean of the op's result over `samples` calibration samples,
//!   in the float model and in the fake-quant model, both with the float bias
//!   (stored bias + `correction`). `bias-correct` makes `correction` equal to
//!   `quant_mean − float_mean`; with the means present it does not measure
//!   again, so they can be read, edited, or removed (to measure again).
//! - `kept = false` (written by `bias-correct`): the correction the means call
//!   for was rejected, because it raised the error of the layer's quantized
//!   output on the data; `correction` is then 0. Remove it to apply the means.
//!
//! The records belong to the fake-quant model: `expand-fakeq` removes them
//! ([`drop_records`]), so integer ops never carry them.
//!
//! Invariant: every vector has one value per output channel; [`BiasRecord::load`]
//! refuses anything else, and non-finite values, with a message naming the field.

use super::channel_record::{drop_record_attrs, vector_attr, write_record, RecordReader};
use qopt_dialect_fp::constants::{create_constant, dense, erase_if_unused_constant};
use qopt_ir_core::interfaces::QuantizableOp;
use qopt_ir_core::{constant_value, AttrData, Context, InsertPoint, Module, OpId, Rewriter, ValueId};

/// The attribute's name (the `fp` dialect declares it an annotation of its
/// weighted ops, so the equivalence checker ignores it).
pub const BIAS_CORRECTION: &str = qopt_dialect_fp::attrs::BIAS_CORRECTION;

/// The contents of [`BIAS_CORRECTION`] (see the module docs).
#[derive(Clone, Debug, PartialEq)]
pub struct BiasRecord {
    /// Subtracted from the bias so far, per output channel.
    pub correction: Vec<f64>,
    /// The measured means, when `bias-correct` measured them.
    pub measured: Option<MeasuredMeans>,
    /// False when `bias-correct` rejected the correction the means call for.
    pub kept: bool,
}

/// The per-channel means of an op's result that `bias-correct` measured.
#[derive(Clone, Debug, PartialEq)]
pub struct MeasuredMeans {
    /// The float model's mean.
    pub float_mean: Vec<f64>,
    /// The fake-quant model's mean, with the float bias.
    pub quant_mean: Vec<f64>,
    /// The calibration samples they are means over.
    pub samples: i64,
}

impl MeasuredMeans {
    /// `quant_mean − float_mean`: the correction these means call for.
    pub fn error(&self) -> Vec<f64> {
        self.quant_mean.iter().zip(&self.float_mean).map(|(q, f)| q - f).collect()
    }
}

impl BiasRecord {
    /// No correction yet, for `channels` output channels.
    pub fn none(channels: usize) -> BiasRecord {
        BiasRecord { correction: vec![0.0; channels], measured: None, kept: true }
    }

    /// The record on `op`, or [`BiasRecord::none`] without one; an error when
    /// it is malformed or its vectors do not have `channels` values.
    pub fn load(ctx: &Context, module: &Module, op: OpId, channels: usize) -> Result<BiasRecord, String> {
        let Some(record) = RecordReader::open(ctx, module, op, BIAS_CORRECTION, channels)? else {
            return Ok(BiasRecord::none(channels));
        };
        let correction = record.vector("correction")?.unwrap_or_else(|| vec![0.0; channels]);
        let measured = match (record.vector("float_mean")?, record.vector("quant_mean")?, record.samples()?) {
            (Some(float_mean), Some(quant_mean), Some(samples)) => {
                Some(MeasuredMeans { float_mean, quant_mean, samples })
            }
            (None, None, None) => None,
            _ => {
                return Err(format!(
                    "'{BIAS_CORRECTION}' needs 'float_mean', 'quant_mean' and 'samples' together \
                     (remove all three to measure again)"
                ))
            }
        };
        let kept = record.flag("kept")?.unwrap_or(true);
        Ok(BiasRecord { correction, measured, kept })
    }

    /// Writes the record onto `op` (replacing any earlier one).
    pub fn store(&self, ctx: &mut Context, module: &mut Module, op: OpId) -> Result<(), String> {
        let mut entries = vec![("correction", vector_attr(ctx, &self.correction)?)];
        if let Some(m) = &self.measured {
            entries.push(("float_mean", vector_attr(ctx, &m.float_mean)?));
            entries.push(("quant_mean", vector_attr(ctx, &m.quant_mean)?));
            entries.push(("samples", ctx.i64_attr(m.samples)));
        }
        if !self.kept {
            entries.push(("kept", ctx.bool_attr(false)));
        }
        write_record(ctx, module, op, BIAS_CORRECTION, &entries);
        Ok(())
    }
}

/// Removes every [`BIAS_CORRECTION`] record of `module` (`expand-fakeq`
/// does: the records describe float biases of the fake-quant model, which
/// the integer model no longer has). Returns how many were removed.
pub fn drop_records(ctx: &mut Context, module: &mut Module) -> usize {
    drop_record_attrs(ctx, module, BIAS_CORRECTION)
}

/// Subtracts `shift` (one value per output channel) from the constant bias
/// of `op`, adding a bias operand if it has none. The new bias constant has
/// the old one's type and location (the op's, for a new bias).
pub fn subtract_from_bias(
    ctx: &mut Context,
    module: &mut Module,
    op: OpId,
    q: &QuantizableOp,
    shift: &[f64],
) -> Result<(), String> {
    let Some(b) = q.bias else { return Err("the op has no bias operand".into()) };
    let operands = module.num_operands(op);
    if b > operands {
        return Err("the op lacks operands before its bias".into());
    }
    let result_ty = module.value_type(module.result(op, 0));
    let elem = ctx.element_type(result_ty);
    let (old_bias, values) = if b < operands {
        let bias = module.operand(op, b);
        let attr = constant_value(ctx, module, bias).ok_or("the bias is not a constant")?;
        let values = match ctx.attr_data(attr) {
            AttrData::Dense(d) => qopt_ir_core::dense_values_f64(ctx, d, ctx.element_type(d.ty))
                .ok_or("the bias values cannot be read")?,
            _ => return Err("the bias is not a dense constant".into()),
        };
        (Some(bias), values)
    } else {
        (None, vec![0.0; shift.len()])
    };
    if values.len() != shift.len() {
        return Err(format!("the bias has {} values for {} output channels", values.len(), shift.len()));
    }
    let corrected: Vec<f64> = values.iter().zip(shift).map(|(v, s)| v - s).collect();
    let bias_ty = match old_bias {
        Some(v) => module.value_type(v),
        None => ctx.tensor_type(&[shift.len() as i64], elem),
    };
    let value = dense(ctx, bias_ty, &corrected)?;
    let loc = match old_bias.map(|v| module.defining_op(v)) {
        Some(def) if !def.is_none() => module.op_loc(def),
        _ => module.op_loc(op),
    };
    let mut rewriter = Rewriter::new(ctx, module);
    rewriter.set_insertion_point(InsertPoint::Before(op));
    rewriter.set_loc(loc);
    let new_bias = create_constant(&mut rewriter, value)?;
    match old_bias {
        Some(old) => {
            module.set_operand(op, b, new_bias);
            erase_if_unused_constant(ctx, module, old);
        }
        None => {
            let mut all: Vec<ValueId> = (0..operands).map(|i| module.operand(op, i)).collect();
            all.push(new_bias);
            module.set_operands(op, &all);
        }
    }
    Ok(())
}
