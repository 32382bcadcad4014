//! The pass-manager hook behind `qopt --verify-numerics[=N]`: runs the
//! module before and after each pass on the same N random inputs in the
//! reference interpreter ([`SampleRuns`]) and reports, per pass, the largest
//! difference of the entry function's results ([`measure`]). A complement to
//! the proofs of `--verify-equiv`, not a replacement: it tests a few points
//! where the proof covers every input, but it runs what the proof cannot
//! model and it measures what a pass that changes numerics on purpose does.
//!
//! What a pass is held to ([`Criterion`]) follows the relation it declares
//! ([`qopt_ir_core::Pass::equivalence`]):
//!
//! | relation | the results must be |
//! |---|---|
//! | `exact`, `integer-exact` | identical (floats by value: NaN equals NaN, `-0.0` equals `0.0`) |
//! | `real` | within [`REAL_TOLERANCE`] of each result's largest magnitude |
//! | `requantization` | nothing: measured, with the difference in steps of the result's quantization grid |
//! | `calibrated-range` | nothing: measured (random inputs leave the calibrated range the relation holds on) |
//! | none, but the pass preserves semantics | as `real` |
//! | none | nothing: the figures are informational |
//!
//! `requantization` allows each rewritten op to round differently by up to a
//! step of its own grid, and such a step, taken by an early layer, moves
//! every later one: at the results no bound follows from the relation (on
//! `resnet_tiny`, `quantize-constants`, proven under it, moves the logits by
//! 2 steps on one input in 8). Only a comparison op by op, each op fed the
//! same operands on both sides, could hold such a pass to 1 step; that is not
//! done here, so these passes are measured and reported, not judged.
//!
//! A judged pass whose results break its criterion, or whose results cannot
//! be compared (another count or shape), fails the pipeline at that pass, with
//! a reproducer, unless the mode is [`Mode::Warn`]. A side that cannot run
//! (dynamic argument shapes, a missing kernel, a runtime error) is reported
//! as not run and never fails the pipeline.
//!
//! The results after a pass are kept as the results before the next one, so
//! a pipeline of P passes costs P + 1 rounds of N runs.

use crate::difference::{measure, Difference, Side};
use crate::hook::Mode;
use crate::sample_runs::SampleRuns;
use qopt_ir_core::equivalence::Relation;
use qopt_ir_core::pass::{PassInstrumentation, PassOutcome, PassRun};
use qopt_ir_core::{type_to_string, Context, Diagnostic, Diagnostics, Module, OpId, Pass, Severity, SrcPos};
use std::cell::RefCell;
use std::rc::Rc;

/// The inputs `--verify-numerics` runs without a count.
pub const DEFAULT_INPUTS: u32 = 8;

/// Under `real`, the largest difference allowed, relative to the result's
/// largest magnitude before the pass.
pub const REAL_TOLERANCE: f64 = 1e-4;

/// Slack on a step count computed from real values (dequantization rounds
/// in f32), so a difference of exactly one step is shown as 1, not 1.00.
const STEP_SLACK: f64 = 1e-3;

/// How a run of `--verify-numerics` measures.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct NumericsSettings {
    /// Inputs per side.
    pub inputs: u32,
    /// Input `k` is drawn with seed `seed + k`.
    pub seed: u64,
    /// Whether a failed pass fails the pipeline.
    pub mode: Mode,
}

impl Default for NumericsSettings {
    fn default() -> Self {
        NumericsSettings { inputs: DEFAULT_INPUTS, seed: 0, mode: Mode::Fail }
    }
}

/// What a pass's results are held to (see the module docs).
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Criterion {
    /// Identical results, under this relation.
    Identical(Relation),
    /// Within [`REAL_TOLERANCE`]; `declared` is false for a pass that
    /// preserves semantics without declaring a relation.
    Real {
        /// Whether the pass declared `real`.
        declared: bool,
    },
    /// Not judged: rounding differences compound across layers (see the
    /// module docs); measured and reported.
    Requantization,
    /// Not judged: the pass keeps the results only on the calibrated range,
    /// which random inputs leave; measured and reported.
    CalibratedRange,
    /// Not judged: the pass changes numerics on purpose.
    Informational,
}

impl Criterion {
    /// The criterion of `pass`.
    pub fn of(pass: &dyn Pass) -> Criterion {
        match pass.equivalence() {
            Some(relation @ (Relation::Exact | Relation::IntegerExact)) => Criterion::Identical(relation),
            Some(Relation::Real) => Criterion::Real { declared: true },
            Some(Relation::Requantization) => Criterion::Requantization,
            Some(Relation::CalibratedRange) => Criterion::CalibratedRange,
            None if pass.preserves_semantics() => Criterion::Real { declared: false },
            None => Criterion::Informational,
        }
    }

    /// `exact`, `real (rel ≤ 1e-4)`, ...: the criterion in a report line.
    pub fn describe(self) -> String {
        match self {
            Criterion::Identical(relation) => relation.to_string(),
            Criterion::Real { declared: true } => format!("real (rel ≤ {REAL_TOLERANCE:e})"),
            Criterion::Real { declared: false } => format!("real, assumed (rel ≤ {REAL_TOLERANCE:e})"),
            Criterion::Requantization => {
                "requantization, measured only (rounding compounds over layers)".to_string()
            }
            Criterion::CalibratedRange => {
                "calibrated-range, measured only (random inputs leave the calibrated range)".to_string()
            }
            Criterion::Informational => {
                "informational (changes numerics on purpose; random inputs leave the calibrated range)"
                    .to_string()
            }
        }
    }

    /// Whether a pass held to this criterion can fail the run.
    pub fn judged(self) -> bool {
        matches!(self, Criterion::Identical(_) | Criterion::Real { .. })
    }

    /// What the criterion asks of the results, for an error message.
    fn requirement(self) -> String {
        match self {
            Criterion::Identical(_) => "identical results".to_string(),
            Criterion::Real { .. } => {
                format!("results within {REAL_TOLERANCE:e} of their largest magnitude")
            }
            Criterion::Requantization | Criterion::CalibratedRange | Criterion::Informational => {
                "nothing".to_string()
            }
        }
    }

    /// Whether `diff` (of a result with or without a grid) breaks the criterion.
    fn broken_by(self, diff: &Difference) -> bool {
        match self {
            Criterion::Identical(_) => !diff.identical,
            Criterion::Real { .. } => diff.relative > REAL_TOLERANCE,
            Criterion::Requantization | Criterion::CalibratedRange | Criterion::Informational => false,
        }
    }
}

/// One line of the report: a pass and what running it found.
#[derive(Clone, Debug)]
pub struct NumericsLine {
    /// 1-based position in the pipeline.
    pub position: usize,
    /// The pass name.
    pub pass: String,
    /// The verdict and the figures, or why the pass was not run.
    pub text: String,
    /// Whether the pass broke its criterion.
    pub failed: bool,
}

/// The report every pass of a run appends to.
pub type NumericsReport = Rc<RefCell<Vec<NumericsLine>>>;

/// Renders the report as the block `qopt` prints to standard error.
pub fn render_numerics(settings: &NumericsSettings, report: &[NumericsLine]) -> String {
    let mut out = format!(
        "===- Numerics checks (--verify-numerics: {} inputs, seed {}) -===\n",
        settings.inputs, settings.seed
    );
    for line in report {
        out.push_str(&format!("  {:>2}. {:<20} {}\n", line.position, line.pass, line.text));
    }
    out
}

/// One input's result that stands out: the largest difference, or the
/// first that breaks the criterion.
#[derive(Clone, Debug)]
struct Located {
    input: usize,
    result: usize,
    diff: Difference,
}

/// Both sides over every input.
#[derive(Clone, Debug, Default)]
struct Comparison {
    /// The largest relative difference (ties: the larger |Δ|).
    worst: Option<Located>,
    /// Every result of every input identical.
    identical: bool,
    /// The largest step count over the results with a grid.
    max_steps: Option<f64>,
    /// The first result breaking the criterion.
    broken: Option<Located>,
}

/// Compares the results of `after` against `before`, or says why they
/// cannot be compared.
fn compare(
    ctx: &Context,
    before: &SampleRuns,
    after: &SampleRuns,
    criterion: Criterion,
) -> Result<Comparison, String> {
    if before.function != after.function {
        return Err(format!("the entry function changed from @{} to @{}", before.function, after.function));
    }
    if before.args != after.args || before.results.len() != after.results.len() {
        return Err(format!(
            "the signature changed from {} to {}",
            before.signature_text(ctx),
            after.signature_text(ctx)
        ));
    }
    let mut cmp = Comparison { identical: true, ..Comparison::default() };
    for (input, (old, new)) in before.outputs.iter().zip(&after.outputs).enumerate() {
        for (result, (old_value, new_value)) in old.iter().zip(new).enumerate() {
            let (Some(&old_ty), Some(&new_ty)) = (before.results.get(result), after.results.get(result))
            else {
                continue;
            };
            let grid = match (after.grids.get(result), before.grids.get(result)) {
                (Some(Some(g)), _) | (_, Some(Some(g))) => Some(g),
                _ => None,
            };
            let diff = measure(
                ctx,
                Side { tensor: old_value, ty: old_ty },
                Side { tensor: new_value, ty: new_ty },
                grid,
            )
            .map_err(|e| format!("result #{result} of @{}: {e}", after.function))?;
            cmp.identical &= diff.identical;
            if let Some(steps) = diff.steps {
                cmp.max_steps = Some(cmp.max_steps.map_or(steps, |m: f64| m.max(steps)));
            }
            if cmp.broken.is_none() && criterion.broken_by(&diff) {
                cmp.broken = Some(Located { input, result, diff: diff.clone() });
            }
            let larger = cmp
                .worst
                .as_ref()
                .is_none_or(|w| (diff.relative, diff.max_abs) > (w.diff.relative, w.diff.max_abs));
            if larger {
                cmp.worst = Some(Located { input, result, diff });
            }
        }
    }
    Ok(cmp)
}

/// `8 inputs, largest |Δ| 2.4e-07 (rel 1.1e-06) at result #0 of @main; max steps 0`.
fn figures(cmp: &Comparison, inputs: usize, function: &str) -> String {
    let mut text = match (&cmp.worst, cmp.identical) {
        (Some(w), false) => format!(
            "{inputs} inputs, largest |Δ| {} (rel {}) at result #{} of @{function}",
            sci(w.diff.max_abs),
            sci(w.diff.relative),
            w.result
        ),
        _ => format!("{inputs} inputs, identical results"),
    };
    if let Some(steps) = cmp.max_steps {
        text.push_str(&format!("; max steps {}", step_text(steps)));
    }
    text
}

/// `2.4e-07`: two significant digits, a two-digit exponent; `0`, `inf`, `NaN`.
fn sci(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let text = format!("{x:.1e}");
    match text.split_once('e') {
        Some((mantissa, exponent)) => {
            let (sign, digits) = match exponent.strip_prefix('-') {
                Some(d) => ("-", d),
                None => ("+", exponent),
            };
            format!("{mantissa}e{sign}{digits:0>2}")
        }
        None => text,
    }
}

/// A step count: a whole number when it is one (within the slack), else two
/// decimals.
fn step_text(steps: f64) -> String {
    if !steps.is_finite() {
        return format!("{steps}");
    }
    if (steps - steps.round()).abs() <= STEP_SLACK {
        format!("{}", steps.round())
    } else {
        format!("{steps:.2}")
    }
}

/// The hook (see the module docs).
pub struct NumericsHook {
    settings: NumericsSettings,
    report: NumericsReport,
    /// The runs before the current pass.
    before: Option<Result<SampleRuns, String>>,
    /// The runs after the last pass and its position: the next pass's runs
    /// before it.
    last_after: Option<(usize, Result<SampleRuns, String>)>,
}

impl NumericsHook {
    /// A hook appending to `report`.
    pub fn new(settings: NumericsSettings, report: NumericsReport) -> NumericsHook {
        NumericsHook { settings, report, before: None, last_after: None }
    }

    fn run(&self, ctx: &Context, module: &Module) -> Result<SampleRuns, String> {
        SampleRuns::run(ctx, module, self.settings.inputs, self.settings.seed)
    }

    fn push(&self, run: &PassRun<'_>, text: String, failed: bool) {
        let line = NumericsLine { position: run.position, pass: run.pass.name().to_string(), text, failed };
        self.report.borrow_mut().push(line);
    }
}

impl PassInstrumentation for NumericsHook {
    fn timing_name(&self) -> Option<&'static str> {
        Some("verify-numerics")
    }

    fn before_pass(
        &mut self,
        run: &PassRun<'_>,
        ctx: &mut Context,
        module: &Module,
    ) -> Result<(), Diagnostics> {
        // Nothing touches the module between one pass's after-hook and the
        // next one's before-hook, so the runs after the previous pass are the
        // runs before this one.
        self.before = match self.last_after.take() {
            Some((position, runs)) if position + 1 == run.position => Some(runs),
            _ => Some(self.run(ctx, module)),
        };
        Ok(())
    }

    fn after_pass(
        &mut self,
        run: &PassRun<'_>,
        _outcome: PassOutcome,
        ctx: &mut Context,
        module: &Module,
    ) -> Result<(), Diagnostics> {
        let before = self.before.take().unwrap_or_else(|| self.run(ctx, module));
        let after = self.run(ctx, module);
        let criterion = Criterion::of(run.pass);
        let verdict = judge(ctx, criterion, &before, &after, self.settings.seed);
        self.last_after = Some((run.position, after));
        let (text, failure) = match verdict {
            Verdict::Reported(text) => (text, None),
            Verdict::Failed { text, detail, producer, input_seed } => {
                (text, Some((detail, producer, input_seed)))
            }
        };
        self.push(run, text, failure.is_some());
        let Some((detail, producer, input_seed)) = failure else { return Ok(()) };
        if self.settings.mode == Mode::Warn {
            return Ok(());
        }
        let headline = format!(
            "--verify-numerics: pass '{}' ({}) must keep {}, but {detail}",
            run.pass.name(),
            criterion.describe(),
            criterion.requirement()
        );
        let diag = if producer.is_some() {
            Diagnostic::at_op(ctx, module, producer, Severity::Error, headline)
        } else {
            Diagnostic::error(module.source_name().cloned(), SrcPos::NONE, headline)
        };
        let settings = self.settings;
        let mut notes = Vec::new();
        if let Some(seed) = input_seed {
            notes.push(format!(
                "input #k is drawn with seed {} + k; float and quantized arguments are those of \
                 `qrun --random-inputs --seed {seed}`",
                settings.seed
            ));
        }
        notes.push(format!(
            "to see this again, add `--verify-numerics={} --verify-numerics-seed={}` to the replay command; \
             `qrun REPRODUCER.qir --random-inputs --seed N --compare AFTER.qir` finds the first located \
             value that differs",
            settings.inputs, settings.seed
        ));
        let diag = notes.into_iter().fold(diag, |d, text| {
            d.with_note(Diagnostic {
                severity: Severity::Note,
                ..Diagnostic::error(None, SrcPos::NONE, text)
            })
        });
        Err(Diagnostics(vec![diag]))
    }
}

/// What one pass's check comes to.
enum Verdict {
    /// A report line: judged and kept, informational, or not run.
    Reported(String),
    /// A report line for a judged pass that broke its criterion, what broke
    /// it, the op producing that result after the pass (if known) and the
    /// seed of the input that broke it (if one did).
    Failed { text: String, detail: String, producer: OpId, input_seed: Option<u64> },
}

/// The verdict on the runs before and after a pass held to `criterion`.
fn judge(
    ctx: &Context,
    criterion: Criterion,
    before: &Result<SampleRuns, String>,
    after: &Result<SampleRuns, String>,
    seed: u64,
) -> Verdict {
    let (old, new) = match (before, after) {
        (Err(why), _) => return Verdict::Reported(format!("not run: before the pass, {why}")),
        (_, Err(why)) => return Verdict::Reported(format!("not run: after the pass, {why}")),
        (Ok(old), Ok(new)) => (old, new),
    };
    let judged = criterion.judged();
    let cmp = match compare(ctx, old, new, criterion) {
        Ok(cmp) => cmp,
        Err(why) if judged => {
            let text = format!("FAILED under {}: {why}", criterion.describe());
            let detail = format!("the results cannot be compared: {why}");
            return Verdict::Failed { text, detail, producer: OpId::NONE, input_seed: None };
        }
        Err(why) => return Verdict::Reported(format!("{}: {why}", criterion.describe())),
    };
    let figures = figures(&cmp, new.outputs.len(), &new.function);
    let Some(broken) = &cmp.broken else {
        let verdict = if judged { "ok under " } else { "" };
        return Verdict::Reported(format!("{verdict}{}: {figures}", criterion.describe()));
    };
    let steps = broken.diff.steps.map(|s| format!(", {} steps", step_text(s))).unwrap_or_default();
    let input_seed = seed.wrapping_add(broken.input as u64);
    let input = format!("input #{} (seed {input_seed})", broken.input);
    let result = format!("result #{} of @{}", broken.result, new.function);
    let detail = match (old.results.get(broken.result), new.results.get(broken.result)) {
        // The same values, but not the same type: only `exact` minds.
        (Some(&old_ty), Some(&new_ty)) if broken.diff.max_abs == 0.0 && old_ty != new_ty => format!(
            "{result} changed type from {} to {} (same values on {input})",
            type_to_string(ctx, old_ty),
            type_to_string(ctx, new_ty)
        ),
        _ => format!(
            "{input} differs at {result} by |Δ| {} (rel {}{steps})",
            sci(broken.diff.max_abs),
            sci(broken.diff.relative)
        ),
    };
    Verdict::Failed {
        text: format!("FAILED under {}: {figures}; first: {detail}", criterion.describe()),
        producer: new.producers.get(broken.result).copied().unwrap_or(OpId::NONE),
        detail,
        input_seed: Some(input_seed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_are_short_and_scientific() {
        assert_eq!(sci(2.4e-7), "2.4e-07");
        assert_eq!(sci(1.0), "1.0e+00");
        assert_eq!(sci(12345.0), "1.2e+04");
        assert_eq!(sci(0.0), "0");
        assert_eq!(sci(f64::INFINITY), "inf");
        assert_eq!(step_text(1.0000001), "1");
        assert_eq!(step_text(0.5), "0.50");
    }

    #[test]
    fn each_pass_is_held_to_its_declared_relation() {
        let mut registry = qopt_ir_core::pass::PassRegistry::new();
        qopt_passes::register_generic_passes(&mut registry).unwrap();
        qopt_quant::register_quant_passes(&mut registry).unwrap();
        let criterion = |name: &str| Criterion::of(&**registry.get(name).unwrap());
        assert_eq!(criterion("canonicalize"), Criterion::Identical(Relation::Exact));
        assert_eq!(criterion("calibrate"), Criterion::Identical(Relation::Exact));
        assert_eq!(criterion("fold-bn"), Criterion::Real { declared: true });
        assert_eq!(criterion("recognize-gelu"), Criterion::Real { declared: false });
        assert_eq!(criterion("insert-fakeq"), Criterion::Informational);
        assert_eq!(criterion("fuse"), Criterion::Requantization);
        assert_eq!(criterion("quantize-constants"), Criterion::Requantization);
        assert_eq!(criterion("absorb-bias"), Criterion::CalibratedRange);
    }

    #[test]
    fn criteria_judge_differences() {
        let diff = |identical, relative, steps| Difference { identical, max_abs: relative, relative, steps };
        let exact = Criterion::Identical(Relation::Exact);
        assert!(!exact.broken_by(&diff(true, 0.0, None)));
        assert!(exact.broken_by(&diff(false, 0.0, None)), "another type of the same values");
        let real = Criterion::Real { declared: true };
        assert!(!real.broken_by(&diff(false, 0.9e-4, None)));
        assert!(real.broken_by(&diff(false, 1.1e-4, None)));
        for measured_only in [Criterion::Requantization, Criterion::CalibratedRange, Criterion::Informational]
        {
            assert!(!measured_only.judged());
            assert!(!measured_only.broken_by(&diff(false, f64::INFINITY, Some(9.0))));
        }
        assert!(exact.judged() && real.judged());
        assert!(!Criterion::Informational.broken_by(&diff(false, f64::INFINITY, None)));
    }
}
