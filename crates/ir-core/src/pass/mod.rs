//! Passes and the pass manager.
//!
//! - [`Pass`]: a stateless transformation of a [`Module`], with a flag name, a
//!   summary, typed options ([`OptionSpec`]) and a `run` that receives the options
//!   already type-checked ([`PassOptions`]).
//! - [`PassRegistry`]: passes and [`NamedPipeline`]s by name, and the
//!   `--list-passes` text.
//! - [`PassManager`]: a parsed pipeline (`fold-bn,insert-observers{bins=2048}`, see
//!   [`pipeline`] for the text syntax) that runs over a module under
//!   [`Instrumentation`]: verify-each, IR printing before/after/after-change, a
//!   [`TimingTree`], per-pass statistics, `tracing` spans, user hooks
//!   ([`PassInstrumentation`]) and, when a pass fails, a reproducer file that
//!   replays the failure with one command.
//!
//! Passes keep no state between runs: everything a pass needs is in the IR or its
//! options, so any pass runs on IR from any source and a reproducer (input IR plus
//! the one failing pass) is enough to replay a failure.

mod instrument;
mod manager;
pub mod pipeline;
mod registry;
mod timing;

#[cfg(test)]
mod test_passes;

pub use instrument::{Instrumentation, PassFilter, PassInstrumentation, PassRun};
pub use manager::{FileOption, PassManager, PipelineFailure, RunReport};
pub use pipeline::{FileUse, OptionKind, OptionSpec, OptionValue, PassOptions, PipelineError};
pub use registry::{NamedPipeline, PassRegistry};
pub use timing::{TimingNode, TimingTree};

use crate::{Context, Diagnostic, Diagnostics, Module, SrcPos};
use std::fmt;

/// What [`Pass::run`] returns: how the module changed, or why the pass failed.
pub type PassResult = Result<PassOutcome, PassError>;

/// What a pass is, declared once per pass as a `const` (see [`Pass::info`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PassInfo {
    /// The flag name used in pipelines, kebab-case (`fold-bn`).
    pub name: &'static str,
    /// One line for `--list-passes`.
    pub summary: &'static str,
    /// Whether the pass keeps the module's meaning exactly.
    pub preserves_semantics: bool,
    /// The relation under which `--verify-equiv` proves the pass (usually
    /// [`Relation::Exact`](crate::equivalence::Relation::Exact) for a pass
    /// that preserves semantics), or `None` when it is not checked.
    pub equivalence: Option<crate::equivalence::Relation>,
    /// Longer prose, ideally with a before/after `.qir` example (may be empty).
    pub description: &'static str,
}

impl PassInfo {
    /// A pass that keeps the module's meaning over the reals: its float
    /// results may differ by rounding (constants folded in f64, sums in
    /// another order), so `--verify-equiv` proves it under
    /// [`Relation::Real`](crate::equivalence::Relation::Real).
    pub const fn real_rewrite(
        name: &'static str,
        summary: &'static str,
        description: &'static str,
    ) -> PassInfo {
        PassInfo {
            name,
            summary,
            preserves_semantics: true,
            equivalence: Some(crate::equivalence::Relation::Real),
            description,
        }
    }
}

/// A transformation of a module, registered by name in a [`PassRegistry`].
///
/// Passes are stateless: `run` may be called many times, on many modules, with
/// different options, and it reads only the IR and the options it is given.
/// Options are declared by [`options`](Pass::options) and type-checked before the
/// pipeline starts, so reading them with the [`PassOptions`] getters for their
/// declared kinds cannot fail.
pub trait Pass: Send + Sync {
    /// What the pass is: its name, documentation and how it relates the
    /// module before and after, in one declarative record.
    fn info(&self) -> &'static PassInfo;

    /// The flag name used in pipelines, kebab-case (`fold-bn`).
    fn name(&self) -> &'static str {
        self.info().name
    }

    /// One line for `--list-passes`.
    fn summary(&self) -> &'static str {
        self.info().summary
    }

    /// Longer prose, ideally with a before/after `.qir` example.
    fn description(&self) -> &'static str {
        self.info().description
    }

    /// The options the pass accepts.
    fn options(&self) -> Vec<OptionSpec> {
        Vec::new()
    }

    /// Checks option values beyond their kind (`max-iterations` at least 1),
    /// before any pass runs: the pipeline parser reports an error here at the
    /// option's value in the pipeline text, as a usage error, instead of a
    /// pass failure blamed on the input.
    fn check_options(&self, options: &PassOptions) -> Result<(), BadOptionValue> {
        let _ = options;
        Ok(())
    }

    /// Whether the pass keeps the module's meaning exactly (so translation
    /// validation can check it).
    fn preserves_semantics(&self) -> bool {
        self.info().preserves_semantics
    }

    /// The relation under which `qopt --verify-equiv` proves the pass, or
    /// `None` when it is not checked (the pass changes numerics on purpose, or
    /// no rules state what it does).
    fn equivalence(&self) -> Option<crate::equivalence::Relation> {
        self.info().equivalence
    }

    /// Checks options against what the context knows, before any pass runs:
    /// a name that must be registered in one of the context's registries (a
    /// backend target, an observer, an op). The driver reports a refusal as a
    /// usage error at the option's value in the pipeline text. By default every
    /// option set is fine (the option types were checked when the pipeline was
    /// parsed).
    fn check_options_against(&self, ctx: &Context, options: &PassOptions) -> Result<(), BadOptionValue> {
        let _ = (ctx, options);
        Ok(())
    }

    /// Transforms `module`. Returning `Err` fails the pipeline; the module may then
    /// be left half-transformed (the pass manager keeps a copy for the reproducer).
    fn run(&self, cx: &mut PassContext<'_>, module: &mut Module, options: &PassOptions) -> PassResult;
}

/// An option value its pass cannot take, from [`Pass::check_options`].
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct BadOptionValue {
    /// The option's name.
    pub option: &'static str,
    /// What is wrong, a full sentence naming the option
    /// (`max-iterations must be at least 1, got 0`).
    pub message: String,
}

impl BadOptionValue {
    /// A bad value of `option`.
    pub fn new(option: &'static str, message: impl Into<String>) -> BadOptionValue {
        BadOptionValue { option, message: message.into() }
    }
}

impl From<BadOptionValue> for PassError {
    fn from(bad: BadOptionValue) -> PassError {
        PassError::from(bad.message)
    }
}

/// Whether a pass changed the module.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum PassOutcome {
    /// The module may have changed.
    Changed,
    /// The module is exactly as before.
    Unchanged,
}

impl PassOutcome {
    /// `Changed` if `changed`, else `Unchanged`.
    pub fn from_changed(changed: bool) -> PassOutcome {
        if changed {
            PassOutcome::Changed
        } else {
            PassOutcome::Unchanged
        }
    }
}

/// What a running pass gets besides the module: the [`Context`], and sinks for
/// statistics and warnings.
pub struct PassContext<'a> {
    /// The context the module's types, attributes and op names live in.
    pub ctx: &'a mut Context,
    statistics: Vec<(&'static str, u64)>,
    warnings: Vec<Diagnostic>,
    phases: Vec<(&'static str, std::time::Duration)>,
}

impl<'a> PassContext<'a> {
    /// A pass context over `ctx` with no statistics or warnings yet (the pass
    /// manager makes one per pass execution; tests and passes that run other passes
    /// can make their own).
    pub fn new(ctx: &'a mut Context) -> PassContext<'a> {
        PassContext { ctx, statistics: Vec::new(), warnings: Vec::new(), phases: Vec::new() }
    }
}

impl PassContext<'_> {
    /// Adds `n` to the counter `name` (kebab-case, a plural noun:
    /// `folded-batch-norms`), shown by `--stats`.
    pub fn add_stat(&mut self, name: &'static str, n: u64) {
        match self.statistics.iter_mut().find(|(existing, _)| *existing == name) {
            Some((_, count)) => *count = count.saturating_add(n),
            None => self.statistics.push((name, n)),
        }
    }

    /// [`add_stat`](Self::add_stat) for each `(name, n)`.
    pub fn add_stats(&mut self, stats: &[(&'static str, u64)]) {
        stats.iter().for_each(|&(name, n)| self.add_stat(name, n));
    }

    /// Records that the pass spent `wall` in its phase `name` (kebab-case:
    /// `prepare`, `run-samples`); `--timing` shows the phases under the pass,
    /// in the order first recorded, and adds up repeated names.
    pub fn add_phase(&mut self, name: &'static str, wall: std::time::Duration) {
        match self.phases.iter_mut().find(|(existing, _)| *existing == name) {
            Some((_, total)) => *total += wall,
            None => self.phases.push((name, wall)),
        }
    }

    /// Reports a warning; the pipeline goes on. A warning without a file is
    /// attributed to the module's source file.
    pub fn warn(&mut self, diagnostic: Diagnostic) {
        self.warnings.push(diagnostic);
    }

    /// Records a warning about the module as a whole, with no location.
    pub fn warn_unlocated(&mut self, message: impl Into<String>) {
        self.warnings.push(Diagnostic::warning(None, SrcPos::NONE, message));
    }

    /// Records a warning located at `op` (see [`Diagnostic::at_op`]).
    pub fn warn_at(&mut self, module: &Module, op: crate::OpId, message: impl Into<String>) {
        let d = Diagnostic::at_op(self.ctx, module, op, crate::Severity::Warning, message);
        self.warnings.push(d);
    }

    /// The counters so far, sorted by name.
    pub fn statistics(&self) -> Vec<(&'static str, u64)> {
        let mut statistics = self.statistics.clone();
        statistics.sort_unstable_by_key(|(name, _)| *name);
        statistics
    }

    /// The warnings so far, in the order reported.
    pub fn warnings(&self) -> &[Diagnostic] {
        &self.warnings
    }

    /// The sorted counters, the warnings and the phases.
    pub(crate) fn into_parts(self) -> PassRecords {
        let mut statistics = self.statistics;
        statistics.sort_unstable_by_key(|(name, _)| *name);
        PassRecords { statistics, warnings: self.warnings, phases: self.phases }
    }
}

/// What a finished pass recorded in its [`PassContext`].
pub(crate) struct PassRecords {
    pub statistics: Vec<(&'static str, u64)>,
    pub warnings: Vec<Diagnostic>,
    pub phases: Vec<(&'static str, std::time::Duration)>,
}

/// Why a pass failed: one or more diagnostics (errors, possibly with notes).
///
/// An error a pass returns is, by default, a refusal of its input: the model,
/// the data or an option the user gave cannot be handled, and the diagnostics
/// say why, so the pass manager writes no reproducer. A pass that finds its
/// own invariants broken on valid input returns [`PassError::internal`]; that
/// failure, like a panic, invalid IR after the pass or a failed instrumentation
/// check, is a fault of the compiler and gets a reproducer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PassError {
    /// What went wrong, where. Diagnostics without a file are attributed to the
    /// module's source file.
    pub diagnostics: Diagnostics,
    /// Whether the pass failed on input it should have handled (a bug to
    /// report, with a reproducer) rather than refused bad input.
    pub internal: bool,
}

impl PassError {
    /// A refusal located at `op` ([`Diagnostic::at_op`]): what a pass returns
    /// when the input at that op is not what it handles.
    pub fn at_op(ctx: &Context, module: &Module, op: crate::OpId, message: impl Into<String>) -> PassError {
        Diagnostic::at_op(ctx, module, op, crate::Severity::Error, message).into()
    }

    /// A failure of the pass itself on input it should handle.
    pub fn internal(diagnostics: impl Into<Diagnostics>) -> PassError {
        PassError { diagnostics: diagnostics.into(), internal: true }
    }
}

impl From<String> for PassError {
    /// An error without a source position.
    fn from(message: String) -> PassError {
        PassError::from(Diagnostic::error(None, SrcPos::NONE, message))
    }
}

impl From<&str> for PassError {
    /// An error without a source position.
    fn from(message: &str) -> PassError {
        PassError::from(message.to_string())
    }
}

impl From<Diagnostic> for PassError {
    fn from(diagnostic: Diagnostic) -> PassError {
        PassError { diagnostics: Diagnostics(vec![diagnostic]), internal: false }
    }
}

impl From<Diagnostics> for PassError {
    fn from(diagnostics: Diagnostics) -> PassError {
        PassError { diagnostics, internal: false }
    }
}

impl fmt::Display for PassError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, diagnostic) in self.diagnostics.0.iter().enumerate() {
            if index > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{}: {}", diagnostic.severity, diagnostic.message)?;
        }
        Ok(())
    }
}

impl std::error::Error for PassError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pass_context_accumulates_and_sorts_statistics() {
        let mut ctx = Context::new();
        let mut cx = PassContext::new(&mut ctx);
        cx.add_stat("zeta", 1);
        cx.add_stat("alpha", 2);
        cx.add_stat("zeta", 3);
        cx.add_stat("zeta", u64::MAX);
        assert_eq!(cx.statistics(), vec![("alpha", 2), ("zeta", u64::MAX)]);
        cx.warn_unlocated("hmm");
        assert_eq!(cx.warnings().len(), 1);
    }

    #[test]
    fn pass_errors_convert_and_display() {
        let error = PassError::from("no batch norm to fold");
        assert_eq!(error.to_string(), "error: no batch norm to fold");
        assert_eq!(error.diagnostics.0[0].pos, SrcPos::NONE);
        let two = PassError::from(Diagnostics(vec![
            Diagnostic::error(None, SrcPos::NONE, "a"),
            Diagnostic::warning(None, SrcPos::NONE, "b"),
        ]));
        assert_eq!(two.to_string(), "error: a\nwarning: b");
        assert_eq!(PassOutcome::from_changed(true), PassOutcome::Changed);
        assert_eq!(PassOutcome::from_changed(false), PassOutcome::Unchanged);
    }
}
