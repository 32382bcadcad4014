//! `quantize-search{data=... max-drop=... labels=...|reference=...}`:
//! automatic mixed precision. It measures how much each quantized value
//! ("site": a layer's output with the layer's weights, or a function
//! argument) costs alone, then keeps the fewest most sensitive sites wide
//! (i16 by default) until the quantized model's metric is within `max-drop`
//! of the float model's (and, with `min-sqnr`, its outputs' SQNR against the
//! float model's is at least that many dB), and writes its decisions as
//! `qnn.cast_hint` ops that `quantize` replays.
//!
//! **Scheme.** The pass takes the options of `insert-observers`, `calibrate`
//! and `insert-fakeq` and runs those passes itself, on clones of the module,
//! so every measurement uses the scheme `quantize` with the same options will
//! build. Measurements run the fake-quant model: `qnn.fake_quant` computes
//! exactly the rounding and clamping the integer ops do, so it predicts the
//! integer model up to the requantize rounding of each layer's output stage
//! (the README's table shows the two within 0.1 dB), at a fraction of the cost.
//!
//! **Steps** (the module is changed only at the end):
//! 1. the float model's outputs on the evaluation data (`eval-data`, default
//!    `data`; `batches` limits both): the reference for the SQNR, and for the
//!    metric unless `labels` or `reference` is given;
//! 2. the fully quantized model (calibrated on `data`) and its metric; with a
//!    storage `wide` (i16, i8), the sites whose wide form could overflow the
//!    accumulator (below) are left out of the search;
//! 3. per site, the model with only that site quantized (every other
//!    `qnn.fake_quant` removed, every other layer's bias back to its float
//!    value): SQNR against the float outputs and the metric;
//! 4. sites sorted from most to least sensitive (worst metric alone, then
//!    lowest SQNR alone); bisection finds the fewest leading sites that,
//!    widened to `wide`, bring the drop to at most `max-drop`, re-measuring
//!    the whole model for each candidate; then each chosen site, least
//!    sensitive first, is dropped again when the model still meets the
//!    target without it;
//! 5. a `qnn.cast_hint {kind = wide}` after each chosen value, located at
//!    its producer (the ONNX node after `qimport`).
//!
//! **Accumulators.** A wide activation multiplies into the accumulator of
//! every conv and dense reading it: an i16 input with 8-bit weights stays
//! within i32 only while `Σ|w|·max|x| + |b|` does. Each candidate is lowered
//! as `quantize` lowers it (`insert-fakeq`, `propagate-qparams`,
//! `expand-fakeq`, `quantize-constants`) and `quant-lint`'s bound
//! ([`accumulator_overflow`], `accumulator-bits`, default 32) is computed for
//! every layer. A site is skipped when widening it alone makes a layer's
//! bound exceed the accumulator where the scheme without wide sites does not;
//! under weights narrower than the wide layers' (`weight-type=i4`, wide
//! i16: a hinted layer gets 8-bit weights) also when it does so with every
//! layer's weights at the wide width, since the layers reading it may be
//! chosen too. When every site wide overflows nothing new, no site is
//! checked alone. Skipped sites are in the table and report with the layer
//! and bound; statistic `overflow-skipped-sites`.
//!
//! The metric is top-1 accuracy against `labels` (int64 or int32 class
//! indices, one per sample), else top-1 agreement with `reference` (a `.npy`
//! of outputs, one row per sample), else top-1 agreement with the float
//! model. The drop is the float model's metric minus the candidate's. Hints
//! already in the module are kept and their values are not searched. The
//! sensitivity table goes to standard error as a note, and to `report` as
//! JSON (written atomically). Statistics: `sites`, `widened-sites`,
//! `overflow-skipped-sites`, `evaluations`.

use crate::passes::{Calibrate, InsertFakeq, InsertObservers};
use crate::records::hints::storage_kind;
use crate::search::evaluate::{Evaluation, Measurement};
use crate::search::report::{decibels, percent, Report};
use crate::search::settings::{
    parse_max_drop, parse_min_sqnr, run_pass, scheme_passes, SchemeOptions, Settings,
};
use crate::search::sites::{fake_quant_owners, find_sites, insert_hint, only_site};
use crate::search::Search;
use qopt_interp::progress::Progress;
use qopt_ir_core::equivalence::Relation;
use qopt_ir_core::pass::{OptionKind, OptionSpec, PassOptions};
use qopt_ir_core::PassInfo;
use qopt_ir_core::PassResult;
use qopt_ir_core::{BadOptionValue, Diagnostic, Module, Pass, PassContext, PassOutcome, Severity, SrcPos};
use std::path::Path;
use std::time::Instant;

/// The `quantize-search` pass; see the module docs.
pub struct QuantizeSearch;

const INFO: PassInfo = PassInfo {
    name: "quantize-search",
    summary: "automatic mixed precision: keep the fewest most sensitive values wide (qnn.cast_hint) within max-drop",
    preserves_semantics: false,
    // The pass only adds `qnn.cast_hint` ops (`cast-hint-is-identity`).
    equivalence: Some(Relation::Exact),
    description: "Runs on the float model (after `fold-bn`). With the options of `insert-observers`, `calibrate` \
     and `insert-fakeq`, it measures on clones of the module: the float model's outputs on the \
     evaluation data (`eval-data`, default `data`), the fully quantized model (fake-quant), and for \
     each quantized value (a layer's output with the layer's weights, or an argument) the model \
     with that value alone quantized: SQNR against the float outputs and the metric (accuracy \
     with `labels`, else top-1 agreement with `reference` or with the float model). It then \
     bisects over the values sorted by sensitivity for the fewest that, kept `wide` (i16, i8 or \
     float), bring the metric's drop to at most `max-drop` (`0.1%` or `0.001`) and, with `min-sqnr`, \
     the outputs' SQNR to at least that many dB, re-measuring the \
     whole model each time, drops again any chosen value the target does not need (a value whose \
     wide form could overflow a conv or dense accumulator, by quant-lint's bound, is never kept wide), and writes \
     a `qnn.cast_hint {kind = wide}` after each chosen value, which `quantize` with the same \
     options replays. The sensitivity table is printed as a note and written to `report` as \
     JSON.\n\n\
     ```\n\
     %y = fp.conv2d(%x, %w, %b) ... loc(\"/conv1/Conv\")\n\
     // -> %y = fp.conv2d(...); %h = qnn.cast_hint(%y) {kind = \"i16\"} ... loc(\"/conv1/Conv\")\n\
     ```",
};

impl Pass for QuantizeSearch {
    fn info(&self) -> &'static PassInfo {
        &INFO
    }

    fn options(&self) -> Vec<OptionSpec> {
        let mut options: Vec<OptionSpec> = Vec::new();
        for (_, pass) in scheme_passes() {
            for spec in pass.options() {
                if !options.iter().any(|o| o.name == spec.name) {
                    options.push(spec);
                }
            }
        }
        options.extend([
            OptionSpec::new("eval-data", OptionKind::String, "")
                .reads_file()
                .help("samples the metric is measured on (default: data), a .npy, .npz or directory"),
            OptionSpec::new("labels", OptionKind::String, "")
                .reads_file()
                .help("class indices of the evaluation samples (.npy of int64 or int32): the metric is accuracy"),
            OptionSpec::new("reference", OptionKind::String, "").reads_file().help(
                "reference outputs of the evaluation samples (.npy, one row per sample): the metric is top-1 \
                 agreement with them (default: agreement with the float model)",
            ),
            OptionSpec::new("max-drop", OptionKind::String, "1%")
                .help("the largest drop of the metric from the float model's: a percentage (0.1%) or a fraction"),
            OptionSpec::new("min-sqnr", OptionKind::String, "").help(
                "also the smallest SQNR of the outputs against the float model's, in dB (30): values are kept \
                 wide until both hold (default: none)",
            ),
            OptionSpec::new("wide", OptionKind::Enum(&["i16", "i8", "float"]), "i16")
                .help("what a sensitive value is kept as: i16 (W8A16 layers), i8 (over a narrower scheme), or float"),
            OptionSpec::new("report", OptionKind::String, "")
                .writes_file()
                .help("write the sensitivity table and the decisions to this JSON file"),
            OptionSpec::new("accumulator-bits", OptionKind::Int, "32").help(
                "width of the signed accumulator of conv and dense (as quant-lint's): a value whose wide form \
                 could overflow it is not kept wide",
            ),
        ]);
        options
    }

    fn check_options(&self, options: &PassOptions) -> Result<(), BadOptionValue> {
        for (_, pass) in scheme_passes() {
            pass.check_options(options)?;
        }
        parse_max_drop(options.string("max-drop")).map_err(|e| BadOptionValue::new("max-drop", e))?;
        parse_min_sqnr(options.string("min-sqnr")).map_err(|e| BadOptionValue::new("min-sqnr", e))?;
        let bits = options.int("accumulator-bits");
        if !(8..=64).contains(&bits) {
            return Err(BadOptionValue::new(
                "accumulator-bits",
                format!("accumulator-bits must be 8 to 64, got {bits}"),
            ));
        }
        if !options.string("labels").is_empty() && !options.string("reference").is_empty() {
            return Err(BadOptionValue::new(
                "reference",
                "give 'labels' (accuracy) or 'reference' (agreement), not both",
            ));
        }
        Ok(())
    }

    fn run(&self, cx: &mut PassContext<'_>, module: &mut Module, options: &PassOptions) -> PassResult {
        let mut started = Instant::now();
        let settings = Settings::read(options)?;
        let sub_options = SchemeOptions::read(options)?;
        let evaluation = Evaluation::open(cx.ctx, module, &settings)?;
        let mut search = Search { settings: &settings, scheme: &sub_options, evaluation, evaluations: 0 };

        // 1. The float model.
        let float_outputs = search.evaluation.outputs(cx.ctx, module)?;
        let target = search.evaluation.target(&float_outputs)?;
        let float_metric = target.metric(&float_outputs);
        search.evaluation.float = Some(float_outputs);

        // 2. Calibrated once: observers are identities, so their statistics
        // do not depend on which values end up quantized.
        let mut observed = module.clone();
        run_pass(cx, &InsertObservers, &mut observed, &sub_options.observers, true)?;
        run_pass(cx, &Calibrate, &mut observed, &sub_options.calibrate, true)?;
        let sites = find_sites(cx.ctx, &observed);
        let mut quantized = observed.clone();
        run_pass(cx, &InsertFakeq, &mut quantized, &sub_options.fakeq, true)?;
        let full = search.measure(cx.ctx, &quantized, &target)?;

        cx.add_phase("float-and-quantized", started.elapsed());
        started = Instant::now();

        // Sites whose wide form could overflow an accumulator stay out.
        let overflows = search.overflows(cx, &observed, &sites)?;
        if storage_kind(&settings.wide).is_some() {
            cx.add_phase("accumulator-check", started.elapsed());
            started = Instant::now();
        }

        // 3. Each site alone.
        let owners = fake_quant_owners(cx.ctx, &quantized, &sites);
        let mut rows = Vec::with_capacity(sites.len());
        let progress = Progress::new(sites.len(), "sites").with_label("quantize-search");
        for (index, site) in sites.iter().enumerate() {
            progress.redraw();
            let alone = only_site(cx.ctx, module, &quantized, &owners, index, site);
            let measured = search.measure(cx.ctx, &alone, &target);
            progress.advance();
            match measured {
                Ok(row) => rows.push(row),
                Err(e) => {
                    progress.finish();
                    return Err(e);
                }
            }
        }
        progress.redraw();
        progress.finish();

        cx.add_phase("sensitivity", started.elapsed());
        started = Instant::now();

        // 4. Most sensitive first; bisect for the fewest, then prune.
        let mut order: Vec<usize> = (0..sites.len()).collect();
        order.sort_by(|&a, &b| {
            rows[a].metric.total_cmp(&rows[b].metric).then(rows[a].sqnr_db.total_cmp(&rows[b].sqnr_db))
        });
        let meets = |m: &Measurement| {
            float_metric - m.metric <= settings.max_drop + 1e-12
                && settings.min_sqnr.is_none_or(|db| m.sqnr_db >= db)
        };
        let eligible: Vec<usize> = order.iter().copied().filter(|&i| overflows[i].is_none()).collect();
        let skipped = order.len() - eligible.len();
        let mut chosen: Vec<usize> = Vec::new();
        let mut result = full.clone();
        let mut reached = meets(&full);
        if !reached && !eligible.is_empty() {
            let all = search.widened(cx, module, &observed, &sites, &eligible, &target)?;
            if meets(&all) {
                let (mut failing, mut passing, mut at_passing) = (0usize, eligible.len(), all);
                while passing - failing > 1 {
                    let middle = (failing + passing) / 2;
                    let m = search.widened(cx, module, &observed, &sites, &eligible[..middle], &target)?;
                    if meets(&m) {
                        (passing, at_passing) = (middle, m);
                    } else {
                        failing = middle;
                    }
                }
                chosen = eligible[..passing].to_vec();
                result = at_passing;
                for position in (0..chosen.len()).rev() {
                    if chosen.len() == 1 {
                        break;
                    }
                    let mut fewer = chosen.clone();
                    fewer.remove(position);
                    let m = search.widened(cx, module, &observed, &sites, &fewer, &target)?;
                    if meets(&m) {
                        (chosen, result) = (fewer, m);
                    }
                }
                reached = true;
            } else {
                let (that_can, hinted) = if skipped > 0 {
                    (
                        format!(" that can be ({skipped} more could overflow an accumulator)"),
                        "those values are",
                    )
                } else {
                    (String::new(), "every value is")
                };
                cx.warn_unlocated(format!(
                    "even with all {} quantized values kept {}{that_can}, the {} drops by {} (SQNR {}; {}); \
                         {hinted} hinted",
                    eligible.len(),
                    settings.wide,
                    target.name(),
                    percent(float_metric - all.metric),
                    decibels(all.sqnr_db),
                    settings.goal()
                ));
                chosen = eligible.clone();
                result = all;
            }
        } else if !reached {
            cx.warn_unlocated(format!(
                "the {} drops by {} (SQNR {}; {}), and no quantized value can be kept {}: the {} form of each \
                 could overflow an accumulator",
                target.name(),
                percent(float_metric - full.metric),
                decibels(full.sqnr_db),
                settings.goal(),
                settings.wide,
                settings.wide
            ));
        }

        cx.add_phase("search", started.elapsed());

        // 5. The hints.
        for &index in &chosen {
            insert_hint(cx.ctx, module, &sites[index], &settings.wide);
        }

        let report = Report {
            settings: &settings,
            target: &target,
            samples: search.evaluation.samples(),
            float_metric,
            full: &full,
            result: &result,
            reached,
            sites: &sites,
            rows: &rows,
            order: &order,
            chosen: &chosen,
            overflows: &overflows,
            evaluations: search.evaluations,
        };
        if !settings.report.is_empty() {
            let json = report.json();
            qopt_ir_core::write_file_atomically(Path::new(&settings.report), |out| {
                out.write_all(json.as_bytes())
            })
            .map_err(|e| format!("cannot write the report '{}': {e}", settings.report))?;
        }
        cx.warn(Diagnostic {
            severity: Severity::Note,
            ..Diagnostic::warning(None, SrcPos::NONE, report.text())
        });
        cx.add_stat("sites", sites.len() as u64);
        cx.add_stat("widened-sites", chosen.len() as u64);
        cx.add_stat("overflow-skipped-sites", skipped as u64);
        cx.add_stat("evaluations", search.evaluations);
        Ok(PassOutcome::from_changed(!chosen.is_empty()))
    }
}
