//! What the measurement records (`bias_correction.rs`, `bias_absorption.rs`)
//! share: a dictionary attribute on an op whose fields are vectors of one
//! finite value per output channel and a positive sample count, read with
//! located errors, written whole, and dropped from a module at once.

use qopt_ir_core::{dense_values_f64, AttrData, Attribute, Context, DenseElements, Module, OpId};

/// An op's record attribute `name`, open for reading its fields.
pub(crate) struct RecordReader<'c> {
    ctx: &'c Context,
    name: &'static str,
    dict: Attribute,
    channels: usize,
}

impl<'c> RecordReader<'c> {
    /// The record `name` on `op` for `channels` output channels: `None`
    /// when the op has none, an error when it is not a dictionary.
    pub(crate) fn open(
        ctx: &'c Context,
        module: &Module,
        op: OpId,
        name: &'static str,
        channels: usize,
    ) -> Result<Option<RecordReader<'c>>, String> {
        let Some(dict) = module.op_attr(ctx, op, name) else { return Ok(None) };
        if !matches!(ctx.attr_data(dict), AttrData::Dict(_)) {
            return Err(format!("'{name}' must be a dictionary"));
        }
        Ok(Some(RecordReader { ctx, name, dict, channels }))
    }

    /// Field `field` ([`channel_field`]).
    pub(crate) fn vector(&self, field: &str) -> Result<Option<Vec<f64>>, String> {
        channel_field(self.ctx, self.name, self.dict, field, self.channels)
    }

    /// Boolean field `field`, `None` when absent.
    pub(crate) fn flag(&self, field: &str) -> Result<Option<bool>, String> {
        let Some(a) = self.ctx.dict_get(self.dict, field) else { return Ok(None) };
        match self.ctx.attr_data(a) {
            AttrData::Bool(b) => Ok(Some(*b)),
            _ => Err(format!("'{}': '{field}' must be true or false", self.name)),
        }
    }

    /// The field `samples`: a positive integer, or `None` when absent.
    pub(crate) fn samples(&self) -> Result<Option<i64>, String> {
        let Some(a) = self.ctx.dict_get(self.dict, "samples") else { return Ok(None) };
        self.ctx
            .attr_as_int(a)
            .and_then(|n| i64::try_from(n).ok())
            .filter(|&n| n > 0)
            .map(Some)
            .ok_or_else(|| format!("'{}': 'samples' must be a positive integer", self.name))
    }
}

/// Writes the record `name` with `entries` onto `op`, replacing any earlier one.
pub(crate) fn write_record(
    ctx: &mut Context,
    module: &mut Module,
    op: OpId,
    name: &str,
    entries: &[(&str, Attribute)],
) {
    let dict = ctx.dict_attr(entries);
    let attrs = ctx.dict_set(module.op_attrs(op), name, dict);
    module.set_op_attrs(op, attrs);
}

/// Removes the attribute `name` from every op of `module` that has it;
/// returns how many ops had it. Shared by the measurement records.
pub(crate) fn drop_record_attrs(ctx: &mut Context, module: &mut Module, name: &str) -> usize {
    let ops: Vec<OpId> = module.ops_where(|op| module.op_attr(ctx, op, name).is_some());
    for &op in &ops {
        let attrs = ctx.dict_remove(module.op_attrs(op), name);
        module.set_op_attrs(op, attrs);
    }
    ops.len()
}

/// `values` as a `tensor<Nxf64>` dense attribute.
pub(crate) fn vector_attr(ctx: &mut Context, values: &[f64]) -> Result<Attribute, String> {
    let f64_ty = ctx.common().f64;
    let ty = ctx.tensor_type(&[values.len() as i64], f64_ty);
    Ok(ctx.dense_attr(DenseElements::from_f64(ctx, ty, values)?))
}

/// Field `name` of the record attribute `record` (the dictionary `dict`): a
/// dense float tensor of one finite value per output channel, or `None` when
/// the field is absent.
pub(crate) fn channel_field(
    ctx: &Context,
    record: &str,
    dict: Attribute,
    name: &str,
    channels: usize,
) -> Result<Option<Vec<f64>>, String> {
    let Some(attr) = ctx.dict_get(dict, name) else { return Ok(None) };
    let values = match ctx.attr_data(attr) {
        AttrData::Dense(d) => dense_values_f64(ctx, d, ctx.element_type(d.ty)),
        _ => None,
    }
    .ok_or_else(|| format!("'{record}': '{name}' must be a dense float tensor"))?;
    if values.len() != channels {
        return Err(format!(
            "'{record}': '{name}' has {} values for {channels} output channels",
            values.len()
        ));
    }
    if let Some(bad) = values.iter().find(|v| !v.is_finite()) {
        return Err(format!("'{record}': '{name}' holds {bad}"));
    }
    Ok(Some(values))
}
