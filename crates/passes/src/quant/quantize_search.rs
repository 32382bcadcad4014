//! `quantize-search{data=... max-drop=... labels=...|reference=...}`:
//! automatic mixed precision. It measures how much each quantized value
//! ("site": a layer's output with the layer's weights, or a function
//! argument) costs alone, then keeps the fewest most sensitive sites wide
//! (i16 by default) until the quantized model's metric is within `max-drop`
//! of the float model's, and writes its decisions as `qnn.cast_hint` ops that
//! `quantize` replays.
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

use super::calibrate::{CalibrationData, DataSettings};
use qopt_dialect_qnn::quant_params::{accumulator_overflow, AccumulatorOverflow};
use super::util::{loc_names, op_named, quantizable, storage_kind, storage_text, users, STORAGE};
use super::{Calibrate, ExpandFakeq, InsertFakeq, InsertObservers, PropagateQparams, QuantizeConstants};
use qopt_dialect_qnn::op_names as qnn_op;
use qopt_interp::npy::read_npy_file;
use qopt_interp::progress::Progress;
use qopt_interp::{DType, Interpreter, KernelRegistry, Tensor};
use qopt_ir_core::interfaces::FusedActivation;
use qopt_ir_core::pass::pipeline::parse_pipeline;
use qopt_ir_core::pass::{OptionKind, OptionSpec, PassOptions};
use qopt_ir_core::{
    BadOptionValue, Context, Diagnostic, FxHashMap, IntType, Module, OpId, OperationState, Pass, PassContext,
    PassError, PassOutcome, Severity, SrcPos, ValueDef, ValueId,
};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};
use std::path::Path;
use std::time::Instant;

/// The `quantize-search` pass; see the module docs.
pub struct QuantizeSearch;

/// The options this pass adds to those of the passes it runs.
const OWN_OPTIONS: [&str; 7] =
    ["eval-data", "labels", "reference", "max-drop", "wide", "report", "accumulator-bits"];

/// The passes whose options the search takes, in pipeline order.
fn scheme_passes() -> [(&'static str, Box<dyn Pass>); 3] {
    [
        ("insert-observers", Box::new(InsertObservers)),
        ("calibrate", Box::new(Calibrate)),
        ("insert-fakeq", Box::new(InsertFakeq)),
    ]
}

/// `max-drop` as a fraction: `"0.1%"` is 0.001, a plain number is a fraction
/// (`"0.001"`); it must be in [0, 1).
pub fn parse_max_drop(text: &str) -> Result<f64, String> {
    let trimmed = text.trim();
    let (number, scale) = match trimmed.strip_suffix('%') {
        Some(percent) => (percent.trim(), 0.01),
        None => (trimmed, 1.0),
    };
    let value = number
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .map(|v| v * scale)
        .ok_or_else(|| format!("'max-drop' must be a percentage like 0.1% or a fraction like 0.001, got '{text}'"))?;
    if !(0.0..1.0).contains(&value) {
        return Err(format!("'max-drop' must be at least 0 and below 100%, got '{text}'"));
    }
    Ok(value)
}

impl Pass for QuantizeSearch {
    fn name(&self) -> &'static str {
        "quantize-search"
    }

    fn summary(&self) -> &'static str {
        "automatic mixed precision: keep the fewest most sensitive values wide (qnn.cast_hint) within max-drop"
    }

    /// The pass only adds `qnn.cast_hint` ops (`cast-hint-is-identity`).
    fn equivalence(&self) -> Option<qopt_ir_core::equivalence::Relation> {
        Some(qopt_ir_core::equivalence::Relation::Exact)
    }

    fn description(&self) -> &'static str {
        "Runs on the float model (after `fold-bn`). With the options of `insert-observers`, `calibrate` \
         and `insert-fakeq`, it measures on clones of the module: the float model's outputs on the \
         evaluation data (`eval-data`, default `data`), the fully quantized model (fake-quant), and for \
         each quantized value (a layer's output with the layer's weights, or an argument) the model \
         with that value alone quantized: SQNR against the float outputs and the metric (accuracy \
         with `labels`, else top-1 agreement with `reference` or with the float model). It then \
         bisects over the values sorted by sensitivity for the fewest that, kept `wide` (i16, i8 or \
         float), bring the metric's drop to at most `max-drop` (`0.1%` or `0.001`), re-measuring the \
         whole model each time, drops again any chosen value the target does not need (a value whose \
         wide form could overflow a conv or dense accumulator, by quant-lint's bound, is never kept wide), and writes \
         a `qnn.cast_hint {kind = wide}` after each chosen value, which `quantize` with the same \
         options replays. The sensitivity table is printed as a note and written to `report` as \
         JSON.\n\n\
         ```\n\
         %y = fp.conv2d(%x, %w, %b) ... loc(\"/conv1/Conv\")\n\
         // -> %y = fp.conv2d(...); %h = qnn.cast_hint(%y) {kind = \"i16\"} ... loc(\"/conv1/Conv\")\n\
         ```"
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

    fn run(
        &self,
        cx: &mut PassContext<'_>,
        module: &mut Module,
        options: &PassOptions,
    ) -> Result<PassOutcome, PassError> {
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
        let meets = |m: &Measurement| float_metric - m.metric <= settings.max_drop + 1e-12;
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
                    (format!(" that can be ({skipped} more could overflow an accumulator)"), "those values are")
                } else {
                    (String::new(), "every value is")
                };
                cx.warn(Diagnostic::warning(
                    None,
                    SrcPos::NONE,
                    format!(
                        "even with all {} quantized values kept {}{that_can}, the {} drops by {} (max-drop {}); \
                         {hinted} hinted",
                        eligible.len(),
                        settings.wide,
                        target.name(),
                        percent(float_metric - all.metric),
                        percent(settings.max_drop)
                    ),
                ));
                chosen = eligible.clone();
                result = all;
            }
        } else if !reached {
            cx.warn(Diagnostic::warning(
                None,
                SrcPos::NONE,
                format!(
                    "the {} drops by {} (max-drop {}), and no quantized value can be kept {}: the {} form of each \
                     could overflow an accumulator",
                    target.name(),
                    percent(float_metric - full.metric),
                    percent(settings.max_drop),
                    settings.wide,
                    settings.wide
                ),
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
            qopt_ir_core::write_file_atomically(Path::new(&settings.report), |out| out.write_all(json.as_bytes()))
                .map_err(|e| format!("cannot write the report '{}': {e}", settings.report))?;
        }
        cx.warn(Diagnostic { severity: Severity::Note, ..Diagnostic::warning(None, SrcPos::NONE, report.text()) });
        cx.add_stat("sites", sites.len() as u64);
        cx.add_stat("widened-sites", chosen.len() as u64);
        cx.add_stat("overflow-skipped-sites", skipped as u64);
        cx.add_stat("evaluations", search.evaluations);
        Ok(PassOutcome::from_changed(!chosen.is_empty()))
    }
}

/// The pass's own options, checked.
struct Settings {
    data: DataSettings,
    eval_data: String,
    labels: String,
    reference: String,
    max_drop: f64,
    wide: String,
    report: String,
    threads: usize,
    accumulator_bits: u32,
}

impl Settings {
    fn read(options: &PassOptions) -> Result<Settings, PassError> {
        let data = DataSettings::read(options)?;
        let eval_data = match options.string("eval-data") {
            "" => data.data.clone(),
            path => path.to_string(),
        };
        let threads = match usize::try_from(options.int("threads")) {
            Ok(0) => std::thread::available_parallelism().map_or(1, |n| n.get()),
            Ok(n) => n,
            Err(_) => return Err(format!("'threads' must be at least 0, got {}", options.int("threads")).into()),
        };
        Ok(Settings {
            data,
            eval_data,
            labels: options.string("labels").to_string(),
            reference: options.string("reference").to_string(),
            max_drop: parse_max_drop(options.string("max-drop"))?,
            wide: options.string("wide").to_string(),
            report: options.string("report").to_string(),
            threads,
            accumulator_bits: u32::try_from(options.int("accumulator-bits"))
                .ok()
                .filter(|b| (8..=64).contains(b))
                .ok_or_else(|| format!("accumulator-bits must be 8 to 64, got {}", options.int("accumulator-bits")))?,
        })
    }
}

/// The options of each pass the search runs: those of the search's options
/// given explicitly that the pass declares.
struct SchemeOptions {
    observers: PassOptions,
    calibrate: PassOptions,
    fakeq: PassOptions,
    /// `insert-fakeq`'s options with `weight-type` at the weight width of a
    /// layer whose output is kept wide, when that is wider than
    /// `weight-type` (`weight-type=i4`, wide i16: `i8`); `None` otherwise.
    fakeq_wide_weights: Option<PassOptions>,
}

impl SchemeOptions {
    fn read(options: &PassOptions) -> Result<SchemeOptions, PassError> {
        let [(o, observers), (c, calibrate), (f, fakeq)] = scheme_passes();
        let given = |pass: &dyn Pass| -> Vec<String> {
            let specs = pass.options();
            options
                .iter()
                .filter(|(key, _)| {
                    options.is_explicit(key) && !OWN_OPTIONS.contains(key) && specs.iter().any(|s| s.name == *key)
                })
                .map(|(key, value)| format!("{key}={value}"))
                .collect()
        };
        let fakeq_given = given(fakeq.as_ref());
        let fakeq_options = pass_options(f, fakeq.as_ref(), &fakeq_given)?;
        let weights = storage_kind(fakeq_options.string("weight-type"));
        let wide_weights = storage_kind(options.string("wide")).zip(weights).and_then(|(wide, weights)| {
            let hinted = IntType { width: wide.width.min(8), signedness: weights.signedness };
            (hinted.width > weights.width).then_some(hinted)
        });
        let fakeq_wide_weights = match wide_weights {
            Some(hinted) => {
                let mut forced: Vec<String> =
                    fakeq_given.iter().filter(|o| !o.starts_with("weight-type=")).cloned().collect();
                forced.push(format!("weight-type={}", storage_text(hinted)));
                Some(pass_options(f, fakeq.as_ref(), &forced)?)
            }
            None => None,
        };
        Ok(SchemeOptions {
            observers: pass_options(o, observers.as_ref(), &given(observers.as_ref()))?,
            calibrate: pass_options(c, calibrate.as_ref(), &given(calibrate.as_ref()))?,
            fakeq: fakeq_options,
            fakeq_wide_weights,
        })
    }
}

/// The options of `pass` (registered as `name`) with `given` (`key=value`
/// each) and defaults for the rest.
fn pass_options(name: &str, pass: &dyn Pass, given: &[String]) -> Result<PassOptions, PassError> {
    let text = if given.is_empty() { name.to_string() } else { format!("{name}{{{}}}", given.join(" ")) };
    let elements = parse_pipeline(&text).map_err(|e| format!("options for {name}: {e}"))?;
    let [element] = &elements[..] else { return Err(format!("options for {name}: not one pass").into()) };
    element.resolve_options(&pass.options()).map_err(|e| format!("options for {name}: {e}").into())
}

/// Runs `pass` on `module`; its warnings are passed on when `forward` (the
/// first, fully quantized run: what `quantize` would warn about).
fn run_pass(
    cx: &mut PassContext<'_>,
    pass: &dyn Pass,
    module: &mut Module,
    options: &PassOptions,
    forward: bool,
) -> Result<(), PassError> {
    let warnings = {
        let mut inner = PassContext::new(cx.ctx);
        pass.run(&mut inner, module, options)?;
        inner.warnings().to_vec()
    };
    if forward {
        warnings.into_iter().for_each(|w| cx.warn(w));
    }
    Ok(())
}

/// One quantized value the search may keep wide.
struct Site {
    /// The observed value (a layer's output after its relu or clip, or an argument).
    value: ValueId,
    /// Its observer in the calibrated module.
    observer: OpId,
    /// The op computing it (through its fused relu or clip), if not an argument.
    producer: Option<OpId>,
    /// The producer's location name (the ONNX node), or `<func>.argN`.
    name: String,
    /// The producer's op name, or `argument`.
    op: String,
}

/// The observers of the calibrated module, in program order, except those
/// with a `storage` already (the user's hints, kept as they are).
fn find_sites(ctx: &Context, observed: &Module) -> Vec<Site> {
    observed
        .walk_preorder(observed.root())
        .filter(|&op| op_named(ctx, observed, op, qnn_op::OBSERVE) && observed.num_operands(op) == 1)
        .filter(|&op| observed.op_attr(ctx, op, STORAGE).is_none())
        .map(|observer| {
            let value = observed.operand(observer, 0);
            let producer = producer_of(ctx, observed, value);
            let loc = producer.map_or(observed.op_loc(observer), |p| observed.op_loc(p));
            let name = loc_names(ctx, loc).first().map_or_else(|| "?".to_string(), |n| n.to_string());
            let op = producer.map_or("argument", |p| ctx.op_name_str(observed.op_name(p))).to_string();
            Site { value, observer, producer, name, op }
        })
        .collect()
}

/// The op computing `value`, through the relu or clip ops fused into it.
fn producer_of(ctx: &Context, module: &Module, value: ValueId) -> Option<OpId> {
    let mut def = module.defining_op(value);
    while !def.is_none()
        && module.num_operands(def) > 0
        && ctx.op_def(module.op_name(def)).is_some_and(|d| d.interfaces.get::<FusedActivation>().is_some())
    {
        def = module.defining_op(module.operand(def, 0));
    }
    (!def.is_none()).then_some(def)
}

/// The site each `qnn.fake_quant` of the fully quantized module belongs to:
/// an activation's is the site of its value, a weight's or constant
/// operand's that of the op using it; `None` for the others.
fn fake_quant_owners(ctx: &Context, quantized: &Module, sites: &[Site]) -> Vec<(OpId, Option<usize>)> {
    let by_value: FxHashMap<ValueId, usize> = sites.iter().enumerate().map(|(i, s)| (s.value, i)).collect();
    let by_producer: FxHashMap<OpId, usize> =
        sites.iter().enumerate().filter_map(|(i, s)| s.producer.map(|p| (p, i))).collect();
    quantized
        .walk_preorder(quantized.root())
        .filter(|&op| op_named(ctx, quantized, op, qnn_op::FAKE_QUANT))
        .map(|fq| {
            let owner = by_value.get(&quantized.operand(fq, 0)).copied().or_else(|| {
                users(quantized, quantized.result(fq, 0)).into_iter().find_map(|u| by_producer.get(&u).copied())
            });
            (fq, owner)
        })
        .collect()
}

/// The fully quantized module with only site `index` quantized: every other
/// fake quant removed, and every other layer's bias back to the float
/// model's (bias correction changed it for the weights now float).
fn only_site(
    ctx: &Context,
    float: &Module,
    quantized: &Module,
    owners: &[(OpId, Option<usize>)],
    index: usize,
    site: &Site,
) -> Module {
    let mut alone = quantized.clone();
    for &(fq, owner) in owners {
        if owner != Some(index) {
            let (input, output) = (alone.operand(fq, 0), alone.result(fq, 0));
            alone.replace_all_uses(output, input);
            // Unused now, and an identity: erasing cannot fail.
            let _ = alone.erase_op(fq);
        }
    }
    let layers: Vec<OpId> = float.walk_preorder(float.root()).collect();
    for op in layers {
        if Some(op) == site.producer || quantizable(ctx, float, op).and_then(|q| q.bias).is_none() {
            continue;
        }
        restore_constant_operands(float, &mut alone, op);
    }
    alone
}

/// Gives `op` of `alone` (a quantized clone of `float`) the operands it has
/// in `float` where those are constants: bias correction replaced its bias
/// (erasing the old constant, or adding a bias it did not have). An erased
/// constant is recreated before `op`; other operands stay as they are.
fn restore_constant_operands(float: &Module, alone: &mut Module, op: OpId) {
    let mut operands: Vec<ValueId> = alone.operands(op).collect();
    operands.truncate(float.num_operands(op));
    for (i, slot) in operands.iter_mut().enumerate() {
        let original = float.operand(op, i);
        let def = float.defining_op(original);
        if def.is_none() || *slot == original || float.num_operands(def) != 0 || float.num_results(def) != 1 {
            continue;
        }
        if alone.is_erased(def) {
            let state = OperationState::new(float.op_name(def))
                .results(&[float.value_type(original)])
                .attrs(float.op_attrs(def))
                .loc(float.op_loc(def));
            let copy = alone.create_op(state);
            alone.insert_op_before(op, copy);
            *slot = alone.result(copy, 0);
        } else {
            *slot = original;
        }
    }
    alone.set_operands(op, &operands);
}

/// Puts `qnn.cast_hint {kind}` after `site`'s value in `module` and routes
/// the value's other uses through it.
fn insert_hint(ctx: &mut Context, module: &mut Module, site: &Site, kind: &str) {
    let value = site.value;
    let ty = module.value_type(value);
    let name = ctx.op_name(qnn_op::CAST_HINT);
    let attrs = {
        let kind = ctx.string_attr(kind);
        ctx.dict_attr(&[("kind", kind)])
    };
    // Located at the layer (the ONNX node), as the sensitivity table names it.
    let def = module.value_def(value);
    let loc = match def {
        ValueDef::Result { op, .. } => module.op_loc(site.producer.unwrap_or(op)),
        ValueDef::BlockArg { .. } => ctx.name_loc(&site.name),
    };
    let hint = module.create_op(OperationState::new(name).operands(&[value]).results(&[ty]).attrs(attrs).loc(loc));
    match def {
        ValueDef::Result { op, .. } => module.insert_op_after(op, hint),
        ValueDef::BlockArg { block, .. } => {
            let first = module.first_op(block);
            if first.is_none() {
                module.append_op(block, hint);
            } else {
                module.insert_op_before(first, hint);
            }
        }
    }
    let result = module.result(hint, 0);
    module.replace_uses_where(value, result, |u| u.op != hint);
}

/// A model's score on the evaluation data.
#[derive(Clone)]
struct Measurement {
    /// The metric, as a fraction (accuracy or agreement).
    metric: f64,
    /// Output SQNR against the float model, in dB (infinite when equal).
    sqnr_db: f64,
}

/// The evaluation data set, read call by call at each measurement (so
/// memory does not grow with its samples), and the float outputs.
struct Evaluation {
    func: String,
    /// The opened data set.
    data: CalibrationData,
    /// The interpreter calls each measurement makes.
    calls: usize,
    per_call: usize,
    threads: usize,
    float: Option<Outputs>,
    labels: String,
    reference: String,
}

/// The first result of a function over every call, flattened per sample.
struct Outputs {
    values: Vec<f64>,
    per_sample: usize,
}

impl Outputs {
    fn samples(&self) -> usize {
        self.values.len() / self.per_sample.max(1)
    }

    fn rows(&self) -> std::slice::ChunksExact<'_, f64> {
        self.values.chunks_exact(self.per_sample.max(1))
    }
}

/// What the metric compares the top-1 class with.
enum Target {
    /// Accuracy: one class index per sample.
    Labels(Vec<i64>),
    /// Agreement: the reference's top-1 class per sample; `float` when the
    /// reference is the float model.
    Agreement { classes: Vec<usize>, float: bool },
}

impl Target {
    fn name(&self) -> &'static str {
        match self {
            Target::Labels(_) => "accuracy",
            Target::Agreement { .. } => "top-1 agreement",
        }
    }

    /// Whether the top-1 class of `row`, the outputs of sample `sample`, is the target's.
    fn hit(&self, sample: usize, row: &[f64]) -> bool {
        let predicted = argmax(row);
        match self {
            Target::Labels(labels) => labels.get(sample).is_some_and(|&l| predicted as i64 == l),
            Target::Agreement { classes, .. } => classes.get(sample) == Some(&predicted),
        }
    }

    fn metric(&self, outputs: &Outputs) -> f64 {
        let predicted = outputs.rows().map(argmax);
        let hits = match self {
            Target::Labels(labels) => predicted.zip(labels).filter(|(p, &l)| *p as i64 == l).count(),
            Target::Agreement { classes, .. } => predicted.zip(classes).filter(|(p, c)| p == *c).count(),
        };
        hits as f64 / outputs.samples().max(1) as f64
    }
}

/// The index of the largest value (the first of equals).
fn argmax(row: &[f64]) -> usize {
    row.iter().enumerate().fold((0, f64::NEG_INFINITY), |best, (i, &v)| if v > best.1 { (i, v) } else { best }).0
}

impl Evaluation {
    /// Opens the evaluation samples for `module`'s function.
    fn open(ctx: &Context, module: &Module, settings: &Settings) -> Result<Evaluation, PassError> {
        let data = &settings.data;
        let opened = CalibrationData::open(ctx, module, &data.func, &settings.eval_data, data.batch_size)?;
        let (calls, _) = opened.calls(data.batches);
        let per_call = opened.per_call;
        Ok(Evaluation {
            func: data.func.clone(),
            data: opened,
            calls,
            per_call,
            threads: settings.threads,
            float: None,
            labels: settings.labels.clone(),
            reference: settings.reference.clone(),
        })
    }

    fn samples(&self) -> usize {
        self.calls * self.per_call
    }

    /// The metric's target, checked against the float outputs' shape.
    fn target(&self, float: &Outputs) -> Result<Target, PassError> {
        let samples = float.samples();
        if float.per_sample < 2 {
            return Err(format!(
                "the first result of @{} has {} value(s) per sample; top-1 metrics need at least 2 classes",
                self.func, float.per_sample
            )
            .into());
        }
        if !self.labels.is_empty() {
            let raw = read_npy_file(&self.labels).map_err(|e| format!("'labels' ({}): {e}", self.labels))?;
            let labels: Vec<i64> = match raw.dtype {
                DType::I64 => raw.to_vec::<i64>().map_err(|e| format!("'labels' ({}): {e}", self.labels))?,
                DType::I32 => raw
                    .to_vec::<i32>()
                    .map_err(|e| format!("'labels' ({}): {e}", self.labels))?
                    .into_iter()
                    .map(i64::from)
                    .collect(),
                other => {
                    return Err(format!(
                        "'labels' ({}) holds {}; class indices must be int64 or int32",
                        self.labels,
                        other.name()
                    )
                    .into())
                }
            };
            if labels.len() < samples {
                return Err(format!(
                    "'labels' ({}) has {} entries, fewer than the {samples} evaluation samples",
                    self.labels,
                    labels.len()
                )
                .into());
            }
            if let Some((i, l)) =
                labels.iter().take(samples).enumerate().find(|(_, &l)| l < 0 || l as usize >= float.per_sample)
            {
                return Err(format!(
                    "'labels' ({}) entry {i} is {l}, not a class of the {} outputs per sample",
                    self.labels, float.per_sample
                )
                .into());
            }
            return Ok(Target::Labels(labels[..samples].to_vec()));
        }
        if !self.reference.is_empty() {
            let raw =
                read_npy_file(&self.reference).map_err(|e| format!("'reference' ({}): {e}", self.reference))?;
            let values = Tensor::from_raw(&raw).map_err(|e| format!("'reference' ({}): {e}", self.reference))?;
            // One row per sample, each as long as the model's outputs: a file
            // of other rows would only be cut into the wrong samples.
            let row: usize = values.shape().iter().skip(1).product();
            let one_per_sample = values.shape().len() == 1 && float.per_sample == 1;
            if !one_per_sample && (values.shape().len() < 2 || row != float.per_sample) {
                return Err(format!(
                    "'reference' ({}) has shape {:?}, but the model gives {} outputs per sample: the reference \
                     needs one row of {} per sample",
                    self.reference,
                    values.shape(),
                    float.per_sample,
                    float.per_sample
                )
                .into());
            }
            let values = values.to_f64_vec();
            if values.len() < samples * float.per_sample {
                return Err(format!(
                    "'reference' ({}) has {} values, fewer than {samples} samples of {} outputs",
                    self.reference,
                    values.len(),
                    float.per_sample
                )
                .into());
            }
            if values.iter().any(|v| !v.is_finite()) {
                return Err(format!("'reference' ({}) holds NaN or infinity", self.reference).into());
            }
            let classes = values.chunks_exact(float.per_sample).take(samples).map(argmax).collect();
            return Ok(Target::Agreement { classes, float: false });
        }
        Ok(Target::Agreement { classes: float.rows().map(argmax).collect(), float: true })
    }

    /// The float model's outputs over every call, kept: the reference of
    /// every later measurement.
    fn outputs(&self, ctx: &Context, module: &Module) -> Result<Outputs, PassError> {
        let mut values = Vec::new();
        let mut per_call_len = None;
        self.run_calls(ctx, module, &mut |_, call| {
            if *per_call_len.get_or_insert(call.len()) != call.len() {
                return Err(format!("the first result of @{} changes size between calls", self.func));
            }
            if let Some(i) = call.iter().position(|v| !v.is_finite()) {
                return Err(format!(
                    "the model computes NaN or infinity (output value {}) on the evaluation data",
                    values.len() + i
                ));
            }
            values.extend(call);
            Ok(())
        })?;
        let per_sample = per_call_len.unwrap_or(0) / self.per_call.max(1);
        Ok(Outputs { values, per_sample })
    }

    /// Runs `module`'s function over every call and hands each call's first
    /// result (as f64) to `consume` in call order. Workers (`threads`) take
    /// calls in turn and read their inputs from the data set, so at most one
    /// call per worker is held.
    fn run_calls(
        &self,
        ctx: &Context,
        module: &Module,
        consume: &mut Consumer<'_>,
    ) -> Result<(), PassError> {
        let standard;
        let kernels = match KernelRegistry::of(ctx) {
            Some(k) => k,
            None => {
                standard = KernelRegistry::standard();
                &standard
            }
        };
        let mut prepared = Interpreter::new(ctx, module, kernels);
        prepared.prepare(&self.func).map_err(|e| e.to_string())?;
        let calls = self.calls;
        let workers = self.threads.clamp(1, calls.max(1));
        let claim = AtomicUsize::new(0);
        let abort = AtomicBool::new(false);
        // The call whose turn it is, and the first error.
        let state: Mutex<(usize, Option<String>, &mut Consumer<'_>)> = Mutex::new((0, None, consume));
        let turn = Condvar::new();
        std::thread::scope(|scope| {
            for _ in 0..workers {
                let mut interp = prepared.fork();
                let (claim, abort, state, turn) = (&claim, &abort, &state, &turn);
                let (func, dataset) = (&self.func, &self.data.dataset);
                scope.spawn(move || loop {
                    let call = claim.fetch_add(1, Ordering::Relaxed);
                    if call >= calls {
                        break;
                    }
                    // A claimed call always takes its turn, so later calls never wait forever.
                    let output = (!abort.load(Ordering::Relaxed)).then(|| -> Result<Vec<f64>, String> {
                        let inputs = dataset.read_call(call).map_err(|e| e.to_string())?;
                        let results = interp.run(func, &inputs).map_err(|e| e.to_string())?;
                        let first = results.first().ok_or_else(|| format!("@{func} returns nothing"))?;
                        if !matches!(first.dtype(), DType::F32 | DType::F64) {
                            return Err(format!(
                                "the first result of @{func} is {}; the search compares float outputs",
                                first.describe()
                            ));
                        }
                        Ok(first.to_f64_vec())
                    });
                    let mut guard = state.lock().unwrap_or_else(PoisonError::into_inner);
                    while guard.0 != call {
                        guard = turn.wait(guard).unwrap_or_else(PoisonError::into_inner);
                    }
                    let failure = match output {
                        Some(Ok(values)) if guard.1.is_none() => (guard.2)(call, values).err(),
                        Some(Err(e)) => Some(e),
                        _ => None,
                    };
                    if let Some(e) = failure {
                        abort.store(true, Ordering::Relaxed);
                        guard.1.get_or_insert(e);
                    }
                    guard.0 += 1;
                    drop(guard);
                    turn.notify_all();
                });
            }
        });
        let (_, error, _) = state.into_inner().unwrap_or_else(PoisonError::into_inner);
        match error {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    }
}

/// What [`Evaluation::run_calls`] hands each call's outputs to.
type Consumer<'c> = dyn FnMut(usize, Vec<f64>) -> Result<(), String> + Send + 'c;

/// The measurements of one search.
struct Search<'a> {
    settings: &'a Settings,
    scheme: &'a SchemeOptions,
    evaluation: Evaluation,
    evaluations: u64,
}

impl Search<'_> {
    /// The metric and SQNR of `module`.
    /// Each call's outputs are compared with the float ones as they come, in
    /// call order, and then dropped.
    fn measure(&mut self, ctx: &Context, module: &Module, target: &Target) -> Result<Measurement, PassError> {
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
            hits += call.chunks_exact(per_sample).enumerate().filter(|(i, row)| target.hit(first_sample + i, row)).count();
            seen += call.len();
            Ok(())
        })?;
        if seen != float.values.len() {
            return Err(format!("the first result of @{} changes size between models", self.evaluation.func).into());
        }
        let sqnr_db = if noise == 0.0 { f64::INFINITY } else { 10.0 * (signal / noise).log10() };
        let metric = hits as f64 / (seen / per_sample).max(1) as f64;
        Ok(Measurement { metric, sqnr_db })
    }

    /// The measurement of the model quantized with `chosen` sites kept wide:
    /// storage widths through the calibrated module's observers (what
    /// `insert-observers` makes of the hints), float through the hints and
    /// the whole scheme again (a float value changes what is observed).
    fn widened(
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
    fn overflows(
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
    fn lowered_overflows(
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
struct SiteOverflow {
    /// The layer (the same op in the calibrated module and its lowered clones).
    op: OpId,
    /// Its location name.
    layer: String,
    detail: AccumulatorOverflow,
}

/// Each conv or dense of a lowered module (reading `qnn.dequantize` of a
/// quantized activation and weight) whose `bits`-bit accumulator could
/// overflow, by `quant-lint`'s bound, in program order.
fn layer_overflows(ctx: &Context, module: &Module, bits: u32) -> Vec<SiteOverflow> {
    let dequantized = |value: ValueId| {
        let def = module.defining_op(value);
        (!def.is_none() && op_named(ctx, module, def, qnn_op::DEQUANTIZE) && module.num_operands(def) == 1)
            .then(|| module.operand(def, 0))
    };
    let operand = |op: OpId, index: Option<usize>| index.filter(|&i| i < module.num_operands(op)).map(|i| module.operand(op, i));
    module
        .walk_preorder(module.root())
        .filter_map(|op| {
            let q = quantizable(ctx, module, op)?;
            let x = dequantized(operand(op, q.activations.first().copied())?)?;
            let w = dequantized(operand(op, q.weight)?)?;
            let bias = operand(op, q.bias).and_then(dequantized);
            let detail = accumulator_overflow(ctx, module, x, w, bias, bits)?;
            let layer = loc_names(ctx, module.op_loc(op)).first().map_or_else(|| "?".to_string(), |n| n.to_string());
            Some(SiteOverflow { op, layer, detail })
        })
        .collect()
}

/// `fraction` as a percentage with two decimals.
fn percent(fraction: f64) -> String {
    format!("{:.2} %", 100.0 * fraction)
}

/// A decibel figure with two decimals, `inf` when exact.
fn decibels(db: f64) -> String {
    if db.is_finite() {
        format!("{db:.2} dB")
    } else {
        "inf dB".to_string()
    }
}

/// What the search found, for the note and the JSON report.
struct Report<'a> {
    settings: &'a Settings,
    target: &'a Target,
    samples: usize,
    float_metric: f64,
    full: &'a Measurement,
    result: &'a Measurement,
    reached: bool,
    sites: &'a [Site],
    rows: &'a [Measurement],
    order: &'a [usize],
    chosen: &'a [usize],
    overflows: &'a [Option<SiteOverflow>],
    evaluations: u64,
}

impl Report<'_> {
    fn metric_text(&self) -> String {
        match self.target {
            Target::Labels(_) => format!("accuracy against {}", self.settings.labels),
            Target::Agreement { float: true, .. } => "top-1 agreement with the float model".to_string(),
            Target::Agreement { float: false, .. } => format!("top-1 agreement with {}", self.settings.reference),
        }
    }

    fn decision(&self, index: usize) -> String {
        if self.chosen.contains(&index) {
            self.settings.wide.clone()
        } else if let Some(o) = &self.overflows[index] {
            format!(
                "quantized: {} could overflow the i{} accumulator of {} (channel {}, |acc| ≤ {}, limit {})",
                self.settings.wide, self.settings.accumulator_bits, o.layer, o.detail.channel, o.detail.bound,
                o.detail.limit
            )
        } else {
            "quantized".to_string()
        }
    }

    /// The table, most sensitive first.
    fn text(&self) -> String {
        let mut out = format!(
            "quantize-search: {} on {} samples of {}: float {}, quantized {} (drop {}, SQNR {}), max-drop {}\n",
            self.metric_text(),
            self.samples,
            self.settings.eval_data,
            percent(self.float_metric),
            percent(self.full.metric),
            percent(self.float_metric - self.full.metric),
            decibels(self.full.sqnr_db),
            percent(self.settings.max_drop),
        );
        let width = self.sites.iter().map(|s| s.name.len()).max().unwrap_or(5).max(5);
        let op_width = self.sites.iter().map(|s| s.op.len()).max().unwrap_or(2).max(2);
        let _ = writeln!(out, "  rank  {:width$}  {:op_width$}  SQNR alone  metric alone  decision", "layer", "op");
        for (rank, &i) in self.order.iter().enumerate() {
            let _ = writeln!(
                out,
                "  {:>4}  {:width$}  {:op_width$}  {:>10}  {:>12}  {}",
                rank + 1,
                self.sites[i].name,
                self.sites[i].op,
                decibels(self.rows[i].sqnr_db),
                percent(self.rows[i].metric),
                self.decision(i),
            );
        }
        let _ = write!(
            out,
            "kept {} of {} values {}{}: {} {} (drop {}, SQNR {}){}; {} evaluations",
            self.chosen.len(),
            self.sites.len(),
            self.settings.wide,
            match self.overflows.iter().filter(|o| o.is_some()).count() {
                0 => String::new(),
                n => format!(" ({n} more stayed quantized: as {} they could overflow an accumulator)", self.settings.wide),
            },
            self.target.name(),
            percent(self.result.metric),
            percent(self.float_metric - self.result.metric),
            decibels(self.result.sqnr_db),
            if self.reached { "" } else { ", max-drop not reached" },
            self.evaluations,
        );
        out
    }

    fn json(&self) -> String {
        let number = |v: f64| if v.is_finite() { format!("{v}") } else { "null".to_string() };
        let mut out = String::from("{\n");
        let _ = writeln!(out, "  \"metric\": {},", json_string(&self.metric_text()));
        let _ = writeln!(out, "  \"eval_data\": {},", json_string(&self.settings.eval_data));
        let _ = writeln!(out, "  \"samples\": {},", self.samples);
        let _ = writeln!(out, "  \"max_drop\": {},", number(self.settings.max_drop));
        let _ = writeln!(out, "  \"wide\": {},", json_string(&self.settings.wide));
        let _ = writeln!(out, "  \"float_metric\": {},", number(self.float_metric));
        let _ = writeln!(
            out,
            "  \"quantized\": {{\"metric\": {}, \"sqnr_db\": {}}},",
            number(self.full.metric),
            number(self.full.sqnr_db)
        );
        let _ = writeln!(
            out,
            "  \"result\": {{\"metric\": {}, \"sqnr_db\": {}, \"reached\": {}}},",
            number(self.result.metric),
            number(self.result.sqnr_db),
            self.reached
        );
        let _ = writeln!(out, "  \"evaluations\": {},", self.evaluations);
        let _ = writeln!(out, "  \"accumulator_bits\": {},", self.settings.accumulator_bits);
        out.push_str("  \"layers\": [\n");
        for (rank, &i) in self.order.iter().enumerate() {
            let _ = write!(
                out,
                "    {{\"rank\": {}, \"layer\": {}, \"op\": {}, \"sqnr_db_alone\": {}, \"metric_alone\": {}, \
                 \"decision\": {}}}",
                rank + 1,
                json_string(&self.sites[i].name),
                json_string(&self.sites[i].op),
                number(self.rows[i].sqnr_db),
                number(self.rows[i].metric),
                json_string(&self.decision(i)),
            );
            if let Some(o) = &self.overflows[i] {
                out.pop();
                let _ = write!(
                    out,
                    ", \"overflow\": {{\"layer\": {}, \"channel\": {}, \"bound\": {}, \"limit\": {}}}}}",
                    json_string(&o.layer),
                    o.detail.channel,
                    o.detail.bound,
                    o.detail.limit
                );
            }
            out.push_str(if rank + 1 < self.order.len() { ",\n" } else { "\n" });
        }
        out.push_str("  ]\n}\n");
        out
    }
}

/// `text` as a JSON string literal.
fn json_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::{argmax, json_string, parse_max_drop, Outputs, Target};

    /// Three samples of three classes: top-1 classes 2, 0, 1.
    fn outputs() -> Outputs {
        Outputs { values: vec![0.1, 0.2, 0.9, 5.0, -1.0, 4.0, 0.0, 0.5, 0.25], per_sample: 3 }
    }

    #[test]
    fn accuracy_counts_top1_hits_against_labels() {
        assert_eq!(Target::Labels(vec![2, 0, 1]).metric(&outputs()), 1.0);
        assert_eq!(Target::Labels(vec![2, 1, 0]).metric(&outputs()), 1.0 / 3.0);
        assert_eq!(Target::Labels(vec![0, 1, 2]).metric(&outputs()), 0.0);
    }

    #[test]
    fn agreement_compares_top1_classes() {
        let same = Target::Agreement { classes: vec![2, 0, 1], float: true };
        assert_eq!(same.metric(&outputs()), 1.0);
        let one_off = Target::Agreement { classes: vec![2, 2, 1], float: false };
        assert_eq!(one_off.metric(&outputs()), 2.0 / 3.0);
    }

    #[test]
    fn max_drop_reads_percentages_and_fractions() {
        assert_eq!(parse_max_drop("0.1%").unwrap(), 0.1 * 0.01);
        assert_eq!(parse_max_drop(" 2 % ").unwrap(), 0.02);
        assert_eq!(parse_max_drop("0.001").unwrap(), 0.001);
        assert_eq!(parse_max_drop("0").unwrap(), 0.0);
        for bad in ["", "%", "abc", "-1%", "100%", "1.5", "nan", "inf%"] {
            assert!(parse_max_drop(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn argmax_takes_the_first_of_equals() {
        assert_eq!(argmax(&[0.0, 3.0, 3.0, -1.0]), 1);
        assert_eq!(argmax(&[-5.0]), 0);
    }

    #[test]
    fn json_strings_are_escaped() {
        assert_eq!(json_string("a\"b\\c\n"), "\"a\\\"b\\\\c\\u000a\"");
    }
}
