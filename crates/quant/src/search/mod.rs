//! The mechanism of `quantize-search` (the pass is
//! [`crate::passes::quantize_search`]): [`sites`] it may keep wide, the
//! [`evaluate`] of a candidate, the search itself, and its [`report`].

pub mod evaluate;
pub mod report;
pub mod settings;
pub mod sites;
#[cfg(test)]
mod tests;

use crate::passes::{
    Calibrate, ExpandFakeq, InsertFakeq, InsertObservers, PropagateQparams, QuantizeConstants,
};
use crate::quantizable::quantizable;
use crate::records::hints::{storage_kind, STORAGE};
use crate::search::evaluate::{Evaluation, Measurement, Target};
use crate::search::settings::{pass_options, run_pass, SchemeOptions, Settings};
use crate::search::sites::{insert_hint, Site};
use qopt_dialect_qnn::op_names as qnn_op;
use qopt_dialect_qnn::quant_params::{accumulator_overflow, AccumulatorOverflow};
use qopt_ir_core::pass::PassOptions;
use qopt_ir_core::{Context, Module, OpId, Pass, PassContext, PassError, ValueId};

/// The measurements of one search.
pub(crate) struct Search<'a> {
    pub(crate) settings: &'a Settings,
    pub(crate) scheme: &'a SchemeOptions,
    pub(crate) evaluation: Evaluation,
    pub(crate) evaluations: u64,
}

impl Search<'_> {
    /// The metric and SQNR of `module`.
    /// Each call's outputs are compared with the float ones as they come, in
    /// call order, and then dropped.
    pub(crate) fn measure(
        &mut self,
        ctx: &Context,
        module: &Module,
        target: &Target,
    ) -> Result<Measurement, PassError> {
        self.evaluations += 1;
        // invariant: `run` stores the float model's outputs before it measures
        // any quantized module, and nothing clears them.
        let float = self.evaluation.float.as_ref().expect("the float outputs come first");
        let (mut signal, mut noise, mut hits, mut seen) = (0.0f64, 0.0f64, 0usize, 0usize);
        let per_sample = float.per_sample.max(1);
        self.evaluation.run_calls(ctx, module, &mut |_, call| {
            let reference = float.values.get(seen..seen + call.len()).ok_or_else(|| {
                format!("the first result of @{} changes size between models", self.evaluation.func)
            })?;
            if let Some(i) = call.iter().position(|v| !v.is_finite()) {
                return Err(format!(
                    "the model computes NaN or infinity (output value {}) on the evaluation data",
                    seen + i
                ));
            }
            for (&r, &o) in reference.iter().zip(&call) {
                (signal, noise) = (signal + r * r, noise + (o - r) * (o - r));
            }
            let first_sample = seen / per_sample;
            hits += call
                .chunks_exact(per_sample)
                .enumerate()
                .filter(|(i, row)| target.hit(first_sample + i, row))
                .count();
            seen += call.len();
            Ok(())
        })?;
        if seen != float.values.len() {
            return Err(
                format!("the first result of @{} changes size between models", self.evaluation.func).into()
            );
        }
        let sqnr_db = if noise == 0.0 { f64::INFINITY } else { 10.0 * (signal / noise).log10() };
        let metric = hits as f64 / (seen / per_sample).max(1) as f64;
        Ok(Measurement { metric, sqnr_db })
    }

    /// The measurement of the model quantized with `chosen` sites kept wide:
    /// storage widths through the calibrated module's observers (what
    /// `insert-observers` makes of the hints), float through the hints and
    /// the whole scheme again (a float value changes what is observed).
    pub(crate) fn widened(
        &mut self,
        cx: &mut PassContext<'_>,
        float: &Module,
        observed: &Module,
        sites: &[Site],
        chosen: &[usize],
        target: &Target,
    ) -> Result<Measurement, PassError> {
        let mut candidate = if storage_kind(&self.settings.wide).is_some() {
            let mut candidate = observed.clone();
            let kind = cx.ctx.string_attr(&self.settings.wide);
            for &i in chosen {
                let attrs = cx.ctx.dict_set(candidate.op_attrs(sites[i].observer), STORAGE, kind);
                candidate.set_op_attrs(sites[i].observer, attrs);
            }
            candidate
        } else {
            let mut candidate = float.clone();
            for &i in chosen {
                insert_hint(cx.ctx, &mut candidate, &sites[i], &self.settings.wide);
            }
            run_pass(cx, &InsertObservers, &mut candidate, &self.scheme.observers, false)?;
            run_pass(cx, &Calibrate, &mut candidate, &self.scheme.calibrate, false)?;
            candidate
        };
        run_pass(cx, &InsertFakeq, &mut candidate, &self.scheme.fakeq, false)?;
        self.measure(cx.ctx, &candidate, target)
    }

    /// For each site, whether its `wide` storage could overflow an
    /// accumulator (see the module docs): the first layer that overflows
    /// with it and not without. All `None` for `wide=float`.
    pub(crate) fn overflows(
        &self,
        cx: &mut PassContext<'_>,
        observed: &Module,
        sites: &[Site],
    ) -> Result<Vec<Option<SiteOverflow>>, PassError> {
        let mut found: Vec<Option<SiteOverflow>> = (0..sites.len()).map(|_| None).collect();
        if storage_kind(&self.settings.wide).is_none() || sites.is_empty() {
            return Ok(found);
        }
        let every: Vec<usize> = (0..sites.len()).collect();
        let fakeq = &self.scheme.fakeq;
        // New overflows: layers in `with` that do not overflow in `without`.
        let new = |with: Vec<SiteOverflow>, without: &[SiteOverflow]| {
            with.into_iter().filter(|o| without.iter().all(|w| w.op != o.op)).collect::<Vec<_>>()
        };
        let plain = self.lowered_overflows(cx, observed, sites, &[], fakeq)?;
        let all = self.lowered_overflows(cx, observed, sites, &every, fakeq)?;
        if new(all, &plain).is_empty() {
            return Ok(found);
        }
        let wide_weights = match &self.scheme.fakeq_wide_weights {
            Some(options) => Some((options, self.lowered_overflows(cx, observed, sites, &[], options)?)),
            None => None,
        };
        for (index, slot) in found.iter_mut().enumerate() {
            let mut caused = new(self.lowered_overflows(cx, observed, sites, &[index], fakeq)?, &plain);
            if caused.is_empty() {
                if let Some((options, base)) = &wide_weights {
                    caused = new(self.lowered_overflows(cx, observed, sites, &[index], options)?, base);
                }
            }
            // The first such layer in program order.
            *slot = caused.into_iter().next();
        }
        Ok(found)
    }

    /// The layers of `observed` whose accumulator could overflow once the
    /// module is lowered as `quantize` lowers it (`insert-fakeq` with
    /// `fakeq`, `propagate-qparams`, `expand-fakeq`, `quantize-constants`)
    /// with `chosen` sites at `wide` storage.
    pub(crate) fn lowered_overflows(
        &self,
        cx: &mut PassContext<'_>,
        observed: &Module,
        sites: &[Site],
        chosen: &[usize],
        fakeq: &PassOptions,
    ) -> Result<Vec<SiteOverflow>, PassError> {
        let mut lowered = observed.clone();
        let kind = cx.ctx.string_attr(&self.settings.wide);
        for &i in chosen {
            let attrs = cx.ctx.dict_set(lowered.op_attrs(sites[i].observer), STORAGE, kind);
            lowered.set_op_attrs(sites[i].observer, attrs);
        }
        run_pass(cx, &InsertFakeq, &mut lowered, fakeq, false)?;
        for (name, pass) in [
            ("propagate-qparams", &PropagateQparams as &dyn Pass),
            ("expand-fakeq", &ExpandFakeq),
            ("quantize-constants", &QuantizeConstants),
        ] {
            run_pass(cx, pass, &mut lowered, &pass_options(name, pass, &[])?, false)?;
        }
        Ok(layer_overflows(cx.ctx, &lowered, self.settings.accumulator_bits))
    }
}

/// A layer whose accumulator could overflow: for a site, the first where its
/// wide form could.
pub(crate) struct SiteOverflow {
    /// The layer (the same op in the calibrated module and its lowered clones).
    pub(crate) op: OpId,
    /// Its location name.
    pub(crate) layer: String,
    pub(crate) detail: AccumulatorOverflow,
}

/// Each conv or dense of a lowered module (reading `qnn.dequantize` of a
/// quantized activation and weight) whose `bits`-bit accumulator could
/// overflow, by `quant-lint`'s bound, in program order.
pub(crate) fn layer_overflows(ctx: &Context, module: &Module, bits: u32) -> Vec<SiteOverflow> {
    let dequantized = |value: ValueId| {
        let def = module.defining_op(value);
        (!def.is_none() && module.op_is(ctx, def, qnn_op::DEQUANTIZE) && module.num_operands(def) == 1)
            .then(|| module.operand(def, 0))
    };
    let operand = |op: OpId, index: Option<usize>| {
        index.filter(|&i| i < module.num_operands(op)).map(|i| module.operand(op, i))
    };
    module
        .walk_preorder(module.root())
        .filter_map(|op| {
            let q = quantizable(ctx, module, op)?;
            let x = dequantized(operand(op, q.activations.first().copied())?)?;
            let w = dequantized(operand(op, q.weight)?)?;
            let bias = operand(op, q.bias).and_then(dequantized);
            let detail =
                accumulator_overflow(ctx, module, x, (w, q.weight_channel_axis.unwrap_or(0)), bias, bits)?;
            let layer = ctx
                .location_names(module.op_loc(op))
                .first()
                .map_or_else(|| "?".to_string(), |n| n.to_string());
            Some(SiteOverflow { op, layer, detail })
        })
        .collect()
}
