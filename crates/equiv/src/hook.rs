//! The pass-manager hook behind `qopt --verify-equiv`: keeps the module
//! before each pass that declares a relation and checks the pass after it.
//! A failed or unknown check fails the pipeline at that pass (with a
//! reproducer, like any pass failure) unless the mode is [`Mode::Warn`].

use crate::analysis::Memo;
use crate::check::{check_with_memo, Limits, Outcome};
use qopt_ir_core::pass::{PassInstrumentation, PassOutcome, PassRun};
use qopt_ir_core::{Context, Diagnostic, Diagnostics, Module, Severity, SrcPos};
use std::cell::RefCell;
use std::rc::Rc;

/// Whether a pass that fails its check (an unproven one under
/// `--verify-equiv`, one whose results moved too far under
/// `--verify-numerics`) fails the run.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    /// A failed or unknown check fails the pipeline.
    Fail,
    /// Every outcome is reported; the pipeline goes on.
    Warn,
}

/// One line of the report: a pass and what its check found.
#[derive(Clone, Debug)]
pub struct ReportLine {
    /// 1-based position in the pipeline.
    pub position: usize,
    /// The pass name.
    pub pass: String,
    /// Relation, outcome, e-nodes, time; or why the pass is not checked.
    pub text: String,
    /// Whether the check did not prove the pass.
    pub unproven: bool,
}

/// The report every check of a run appends to.
pub type SharedReport = Rc<RefCell<Vec<ReportLine>>>;

/// Renders the report as the block `qopt` prints to standard error.
pub fn render(report: &[ReportLine]) -> String {
    let mut out = String::from("===- Equivalence checks (--verify-equiv) -===\n");
    for line in report {
        out.push_str(&format!("  {:>2}. {:<20} {}\n", line.position, line.pass, line.text));
    }
    out
}

/// The hook (see the module docs).
pub struct EquivHook {
    mode: Mode,
    limits: Limits,
    report: SharedReport,
    before: Option<Module>,
    memo: Memo,
}

impl EquivHook {
    /// A hook appending to `report`.
    pub fn new(mode: Mode, limits: Limits, report: SharedReport) -> EquivHook {
        EquivHook { mode, limits, report, before: None, memo: Memo::default() }
    }
}

impl PassInstrumentation for EquivHook {
    fn before_pass(
        &mut self,
        run: &PassRun<'_>,
        _ctx: &mut Context,
        module: &Module,
    ) -> Result<(), Diagnostics> {
        self.before = run.pass.equivalence().map(|_| module.clone());
        Ok(())
    }

    fn timing_name(&self) -> Option<&'static str> {
        Some("verify-equiv")
    }

    fn after_pass(
        &mut self,
        run: &PassRun<'_>,
        _outcome: PassOutcome,
        ctx: &mut Context,
        module: &Module,
    ) -> Result<(), Diagnostics> {
        let pass = run.pass.name().to_string();
        let (Some(relation), Some(before)) = (run.pass.equivalence(), self.before.take()) else {
            let why = if run.pass.preserves_semantics() {
                "not checked: no rules state what the pass does yet"
            } else {
                "not checked: the pass changes numerics on purpose"
            };
            let line = ReportLine { position: run.position, pass, text: why.to_string(), unproven: false };
            self.report.borrow_mut().push(line);
            return Ok(());
        };
        let result = check_with_memo(ctx, &mut self.memo, &before, module, relation, &self.limits);
        let text = result.summary(self.limits.ulps);
        let unproven = result.outcome != Outcome::Proven;
        self.report.borrow_mut().push(ReportLine {
            position: run.position,
            pass: pass.clone(),
            text: text.clone(),
            unproven,
        });
        if !unproven || self.mode == Mode::Warn {
            return Ok(());
        }
        let headline = format!("--verify-equiv: pass '{pass}' is not proven: {text}");
        let diag = match &result.outcome {
            Outcome::Failed(f) => {
                // At the op after the pass. When the pass made that op (it has
                // no source line), at the line of the op before the pass where
                // the two first differ, with a note naming the new op.
                let mut d = match (f.after_op, f.before_op) {
                    (Some(op), Some(old)) if !module.op_pos(op).is_some() && before.op_pos(old).is_some() => {
                        let made = format!("the pass made {} there", op_text(ctx, module, op));
                        Diagnostic::error(before.source_name().cloned(), before.op_pos(old), headline)
                            .with_note(Diagnostic {
                                severity: Severity::Note,
                                ..Diagnostic::error(None, SrcPos::NONE, made)
                            })
                    }
                    (Some(op), _) => Diagnostic::at_op(ctx, module, op, Severity::Error, headline),
                    (None, _) => Diagnostic::error(module.source_name().cloned(), SrcPos::NONE, headline),
                };
                if let Some(op) = f.before_op {
                    let what = format!(
                        "before the pass, the first difference on the way from that result is {}",
                        op_text(ctx, &before, op)
                    );
                    d = d.with_note(Diagnostic {
                        severity: Severity::Note,
                        ..Diagnostic::error(None, SrcPos::NONE, what)
                    });
                }
                let fired = if f.rules_fired.is_empty() {
                    "no rule fired".to_string()
                } else {
                    let list: Vec<String> =
                        f.rules_fired.iter().take(8).map(|(r, n)| format!("{r} ×{n}")).collect();
                    format!("rules that fired: {}", list.join(", "))
                };
                d.with_note(Diagnostic {
                    severity: Severity::Note,
                    ..Diagnostic::error(None, SrcPos::NONE, fired)
                })
            }
            _ => Diagnostic::error(module.source_name().cloned(), SrcPos::NONE, headline),
        };
        Err(Diagnostics(vec![diag]))
    }
}

/// An op's name and, where it has one, its location: `fp.conv2d loc("conv1")`.
fn op_text(ctx: &Context, module: &Module, op: qopt_ir_core::OpId) -> String {
    let name = ctx.op_name_str(module.op_name(op));
    match qopt_ir_core::loc_to_string(ctx, module.op_loc(op)) {
        loc if loc.is_empty() => name.to_string(),
        loc => format!("{name} {loc}"),
    }
}
