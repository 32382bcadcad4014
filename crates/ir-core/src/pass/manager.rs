//! The pass manager: a pipeline parsed against a [`PassRegistry`], and running it
//! over a module under [`Instrumentation`].
//!
//! Parsing resolves everything up front: unknown passes (with a "did you mean"),
//! bad options and broken named-pipeline expansions are reported before any pass
//! runs, with byte offsets into the pipeline text. Named pipelines stay a nested
//! group, so the timing report shows where their passes came from.
//!
//! Running a pass, in order:
//! 1. keep a copy of the module for the reproducer (if a reproducer directory is
//!    set and the input text is not given), call the hooks' `before_pass`,
//!    print the IR if asked;
//! 2. run the pass (a panic is caught and reported like an error);
//! 3. verify the module (verify-each);
//! 4. call the hooks' `after_pass`, print the IR if asked (after-change compares
//!    the printed text);
//!
//! and on the first failure in 2–4 write the reproducer and stop with a
//! [`PipelineFailure`]. The reproducer is the input text with the pipeline up
//! to and including the failing pass when the driver gives that text
//! ([`Instrumentation::reproducer_input`]: passes are stateless, so replaying
//! them rebuilds the failing pass's input, and no copy of the module is kept),
//! else the IR before that pass with the one-pass pipeline.

use super::instrument::{
    replay_flags, shell_word, text_fingerprint, write_reproducer, DumpPoint, ReproducerIr,
};
use super::pipeline::{
    nearest_name, parse_pipeline, FileUse, OptionValue, PassOptions, PipelineElement, PipelineError,
};
use super::registry::PassRegistry;
use super::timing::{TimingNode, TimingTree};
use super::{Instrumentation, Pass, PassContext, PassOutcome, PassRun};
use crate::{verify, Context, Diagnostic, Diagnostics, Module, SrcPos};
use std::fmt;
use std::fmt::Write as _;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Named pipelines may name other named pipelines this many levels deep.
const MAX_PIPELINE_DEPTH: usize = 16;

/// A parsed, resolved pipeline, ready to run on any number of modules.
#[derive(Clone)]
pub struct PassManager {
    entries: Vec<Entry>,
    num_passes: usize,
}

#[derive(Clone)]
enum Entry {
    Pass(Scheduled),
    /// A named pipeline and what it expanded to.
    Group {
        name: &'static str,
        text: String,
        entries: Vec<Entry>,
    },
}

#[derive(Clone)]
struct Scheduled {
    pass: Arc<dyn Pass>,
    options: PassOptions,
    /// The pass with its explicit options, canonical.
    text: String,
    /// 1-based among all pass executions.
    position: usize,
    /// Byte offset of the pass name in the user's text (of the outermost
    /// named pipeline when the pass comes from an expansion).
    offset: usize,
    /// How the pass was reached through named pipelines (`in pipeline ...
    /// (expanded to ...): `), empty when the user named it.
    context: String,
    /// The same without the expansion (`in pipeline 'quantize{...}': `), for
    /// errors placed at an option the user wrote.
    pipelines: String,
    /// Byte offset in the user's text of each option's value: where the user
    /// wrote it, or where the outermost named pipeline got the option of that
    /// name it passed on; the pass name's offset otherwise.
    option_offsets: Vec<(&'static str, usize)>,
}

impl Scheduled {
    fn option_offset(&self, option: &str) -> usize {
        self.option_offsets.iter().find(|(name, _)| *name == option).map_or(self.offset, |&(_, at)| at)
    }

    /// `'pass': message`, after how the pass was reached through named
    /// pipelines: with their expansion, unless the error is placed at an
    /// option the user wrote (the caret then shows what to change).
    fn located(&self, option: &str, message: &str) -> String {
        let at_users_option = self.option_offsets.iter().any(|(name, _)| *name == option);
        let context = if at_users_option { &self.pipelines } else { &self.context };
        format!("{context}'{}': {message}", self.pass.name())
    }
}

/// A pass option naming a file, from [`PassManager::file_options`].
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct FileOption {
    /// The pass that reads or writes it.
    pub pass: &'static str,
    /// The option's name.
    pub option: &'static str,
    /// The path as given.
    pub path: String,
    /// Whether the pass reads or writes it.
    pub usage: FileUse,
    /// Byte offset in the pipeline text where the user gave it (the outermost
    /// named pipeline's option, or its name).
    pub offset: usize,
}

impl fmt::Debug for PassManager {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("PassManager").field(&self.pipeline_text()).finish()
    }
}

impl PassManager {
    /// Parses `text` (see [`super::pipeline`] for the syntax), looks every name up
    /// in `registry`, type-checks options and expands named pipelines. Errors carry
    /// a byte offset into `text` ([`PipelineError::render`] shows it); errors inside
    /// a named pipeline's expansion are reported at that pipeline's name.
    pub fn parse(registry: &PassRegistry, text: &str) -> Result<PassManager, PipelineError> {
        let mut expander =
            Expander { registry, stack: Vec::new(), top_offset: 0, top_options: Vec::new(), position: 0 };
        let entries = expander.build(text)?;
        Ok(PassManager { entries, num_passes: expander.position })
    }

    /// Asks every pass whether its options make sense in `ctx`
    /// ([`Pass::check_options_against`]: names that registries in the context must
    /// know), before anything runs. The first refusal is an error at the
    /// option's value, like an unknown option.
    pub fn check_options_against(&self, ctx: &Context) -> Result<(), PipelineError> {
        for s in self.scheduled() {
            if let Err(bad) = s.pass.check_options_against(ctx, &s.options) {
                let offset = s.option_offset(bad.option);
                return Err(PipelineError { offset, message: s.located(bad.option, &bad.message) });
            }
        }
        Ok(())
    }

    /// Every non-empty option value naming a file ([`FileUse`]), in pipeline order.
    pub fn file_options(&self) -> Vec<FileOption> {
        let mut files = Vec::new();
        for s in self.scheduled() {
            for spec in s.pass.options() {
                if spec.file == FileUse::None {
                    continue;
                }
                if let Some(OptionValue::String(path)) = s.options.get(spec.name) {
                    if !path.is_empty() {
                        files.push(FileOption {
                            pass: s.pass.name(),
                            option: spec.name,
                            path: path.clone(),
                            usage: spec.file,
                            offset: s.option_offset(spec.name),
                        });
                    }
                }
            }
        }
        files
    }

    /// The scheduled passes in run order, named pipelines expanded.
    fn scheduled(&self) -> Vec<&Scheduled> {
        let mut passes = Vec::with_capacity(self.num_passes);
        let mut stack: Vec<std::slice::Iter<'_, Entry>> = vec![self.entries.iter()];
        while let Some(top) = stack.last_mut() {
            match top.next() {
                Some(Entry::Pass(s)) => passes.push(s),
                Some(Entry::Group { entries, .. }) => stack.push(entries.iter()),
                None => {
                    stack.pop();
                }
            }
        }
        passes
    }

    /// The number of pass executions (named pipelines expanded).
    pub fn len(&self) -> usize {
        self.num_passes
    }

    /// True if the pipeline runs no pass.
    pub fn is_empty(&self) -> bool {
        self.num_passes == 0
    }

    /// The pipeline as canonical text: named pipelines by name, each element with
    /// the options that were given (in declaration order, values normalized, e.g.
    /// `a{flag=true n=3},quantize{bits=8}`). Parsing it gives the same pipeline.
    pub fn pipeline_text(&self) -> String {
        join_texts(&self.entries, false)
    }

    /// The pipeline as canonical text with named pipelines expanded into their
    /// passes.
    pub fn expanded_text(&self) -> String {
        join_texts(&self.entries, true)
    }

    /// Runs the pipeline over `module`. On success the report holds the timing tree
    /// and statistics if `inst` asked for them, and the passes' warnings. On failure
    /// the module is left as the failing pass left it.
    pub fn run(
        &self,
        ctx: &mut Context,
        module: &mut Module,
        inst: &mut Instrumentation<'_>,
    ) -> Result<RunReport, PipelineFailure> {
        let span = tracing::info_span!("pipeline", passes = self.num_passes);
        let _entered = span.enter();
        let start = Instant::now();
        let mut runner = Runner {
            ctx,
            module,
            inst,
            report: RunReport::default(),
            fingerprint: None,
            passes_run: Vec::new(),
        };
        let mut nodes = Vec::new();
        runner.run_entries(&self.entries, &mut nodes)?;
        let mut report = runner.report;
        if runner.inst.timing {
            let mut tree = TimingTree::new();
            tree.push_node(TimingNode {
                name: "pipeline".to_string(),
                wall: start.elapsed(),
                children: nodes,
            });
            report.timing = Some(tree);
        }
        Ok(report)
    }
}

fn join_texts(entries: &[Entry], expand: bool) -> String {
    let mut texts = Vec::with_capacity(entries.len());
    for entry in entries {
        match entry {
            Entry::Pass(scheduled) => texts.push(scheduled.text.clone()),
            Entry::Group { entries, .. } if expand => {
                let inner = join_texts(entries, true);
                if !inner.is_empty() {
                    texts.push(inner);
                }
            }
            Entry::Group { text, .. } => texts.push(text.clone()),
        }
    }
    texts.join(",")
}

/// `name{k=v ...}` with the explicitly given options, in declaration order.
fn canonical_text(name: &str, options: &PassOptions) -> String {
    let explicit: Vec<String> = options
        .iter()
        .filter(|(key, _)| options.is_explicit(key))
        .map(|(key, value)| format!("{key}={value}"))
        .collect();
    if explicit.is_empty() {
        name.to_string()
    } else {
        format!("{name}{{{}}}", explicit.join(" "))
    }
}

/// Builds entries from pipeline text, expanding named pipelines recursively.
struct Expander<'r> {
    registry: &'r PassRegistry,
    /// Canonical texts of the named pipelines being expanded, outermost first.
    stack: Vec<String>,
    /// Offset in the user's text of the outermost pipeline being expanded.
    top_offset: usize,
    /// The options the user gave that pipeline: key and value offset.
    top_options: Vec<(String, usize)>,
    /// Pass executions so far.
    position: usize,
}

impl Expander<'_> {
    fn build(&mut self, text: &str) -> Result<Vec<Entry>, PipelineError> {
        let elements = parse_pipeline(text).map_err(|error| self.locate(error, text))?;
        let mut entries = Vec::with_capacity(elements.len());
        for element in elements {
            entries.push(self.element(&element, text)?);
        }
        Ok(entries)
    }

    fn element(&mut self, element: &PipelineElement, text: &str) -> Result<Entry, PipelineError> {
        if let Some(pass) = self.registry.get(&element.name) {
            let options =
                element.resolve_options(&pass.options()).map_err(|error| self.locate(error, text))?;
            let option_offsets: Vec<(&'static str, usize)> = pass
                .options()
                .iter()
                .filter_map(|spec| {
                    let given = element.options.iter().find(|given| given.key == spec.name)?;
                    Some((spec.name, self.user_offset(given.key.as_str(), given.value_offset)?))
                })
                .collect();
            if let Err(bad) = pass.check_options(&options) {
                let offset = element
                    .options
                    .iter()
                    .find(|given| given.key == bad.option)
                    .map_or(element.name_offset, |given| given.value_offset);
                let message = format!("pass '{}': {}", pass.name(), bad.message);
                return Err(self.locate(PipelineError { offset, message }, text));
            }
            self.position += 1;
            let at_name = PipelineError { offset: element.name_offset, message: String::new() };
            let located = self.locate(at_name, text);
            let text = canonical_text(pass.name(), &options);
            return Ok(Entry::Pass(Scheduled {
                pass: pass.clone(),
                options,
                text,
                position: self.position,
                offset: located.offset,
                context: located.message,
                pipelines: self.chain_prefix(),
                option_offsets,
            }));
        }
        let Some(pipeline) = self.registry.get_pipeline(&element.name) else {
            let message = match nearest_name(&element.name, self.registry.names()) {
                Some(near) => format!("unknown pass '{}'; did you mean '{near}'?", element.name),
                None => format!("unknown pass '{}'", element.name),
            };
            return Err(self.locate(PipelineError { offset: element.name_offset, message }, text));
        };
        let options = element.resolve_options(&pipeline.options).map_err(|error| self.locate(error, text))?;
        let canonical = canonical_text(pipeline.name, &options);
        if self.stack.is_empty() {
            self.top_offset = element.name_offset;
            self.top_options =
                element.options.iter().map(|given| (given.key.clone(), given.value_offset)).collect();
        }
        if self.stack.contains(&canonical) {
            let chain = self.chain(&canonical);
            let message = format!("pipeline '{canonical}' expands to itself: {chain}");
            return Err(PipelineError { offset: self.top_offset, message });
        }
        if self.stack.len() >= MAX_PIPELINE_DEPTH {
            let chain = self.chain(&canonical);
            let message = format!("named pipelines nest more than {MAX_PIPELINE_DEPTH} levels deep: {chain}");
            return Err(PipelineError { offset: self.top_offset, message });
        }
        let expansion = (pipeline.expand)(&options);
        tracing::debug!(pipeline = %canonical, expansion = %expansion, "expanding named pipeline");
        self.stack.push(canonical.clone());
        let entries = self.build(&expansion);
        self.stack.pop();
        Ok(Entry::Group { name: pipeline.name, text: canonical, entries: entries? })
    }

    /// `a -> b -> next`
    fn chain(&self, next: &str) -> String {
        let mut chain: Vec<&str> = self.stack.iter().map(String::as_str).collect();
        chain.push(next);
        chain.join(" -> ")
    }

    /// `in pipeline 'a' -> 'b': ` for a pass from named pipelines, else empty.
    fn chain_prefix(&self) -> String {
        if self.stack.is_empty() {
            return String::new();
        }
        let chain = self.stack.iter().map(|name| format!("'{name}'")).collect::<Vec<_>>().join(" -> ");
        format!("in pipeline {chain}: ")
    }

    /// Where the user wrote the value of option `key` whose value sits at
    /// `offset` in the text being built: there in the user's own text; in an
    /// expansion, at the outermost pipeline's option of the same name (named
    /// pipelines pass their options on by name), if the user gave one.
    fn user_offset(&self, key: &str, offset: usize) -> Option<usize> {
        if self.stack.is_empty() {
            return Some(offset);
        }
        self.top_options.iter().find(|(given, _)| given == key).map(|&(_, at)| at)
    }

    /// Moves an error in the expansion `text` of a named pipeline to the outermost
    /// pipeline in the user's text, saying where it came from: to the option
    /// the user gave it when the error is about an option passed on, else to
    /// the pipeline's name. Errors in the user's own text stay as they are.
    fn locate(&self, error: PipelineError, text: &str) -> PipelineError {
        if self.stack.is_empty() {
            return error;
        }
        let chain = self.stack.iter().map(|name| format!("'{name}'")).collect::<Vec<_>>().join(" -> ");
        let option_at = parse_pipeline(text).ok().and_then(|elements| {
            let element = elements.iter().rfind(|e| e.name_offset <= error.offset)?;
            let option = element.options.iter().rfind(|o| o.key_offset <= error.offset)?;
            self.user_offset(&option.key, option.value_offset)
        });
        let message = match option_at {
            // The caret shows what to change; the expansion would be noise.
            Some(_) => format!("in pipeline {chain}: {}", error.message),
            None => format!("in pipeline {chain} (expanded to '{text}'): {}", error.message),
        };
        PipelineError { offset: option_at.unwrap_or(self.top_offset), message }
    }
}

/// What a successful run produced besides the module.
#[derive(Clone, Debug, Default)]
pub struct RunReport {
    /// With [`Instrumentation::timing`]: one top-level node `pipeline`, a child per
    /// pass execution (named pipelines as nested groups) and under each pass its
    /// `verify`.
    pub timing: Option<TimingTree>,
    /// With [`Instrumentation::statistics`]: per pass execution that added any, its
    /// counters sorted by name, in pipeline order.
    pub statistics: Vec<(String, Vec<(&'static str, u64)>)>,
    /// The warnings passes reported, in order.
    pub warnings: Vec<Diagnostic>,
    /// Whether any pass reported [`PassOutcome::Changed`].
    pub changed: bool,
}

impl RunReport {
    /// The `--stats` text:
    ///
    /// ```text
    /// ===- Pass statistics -===
    ///  fold-bn
    ///    3 folded-batch-norms
    ///   12 visited-ops
    /// ```
    pub fn render_statistics(&self) -> String {
        let mut out = String::from("===- Pass statistics -===\n");
        for (pass, counters) in &self.statistics {
            let _ = writeln!(out, " {pass}");
            let width = counters.iter().map(|(_, n)| n.to_string().len()).max().unwrap_or(1);
            for (name, n) in counters {
                let _ = writeln!(out, "   {n:>width$} {name}");
            }
        }
        out
    }
}

/// Why a pipeline stopped.
#[derive(Clone, Debug)]
pub struct PipelineFailure {
    /// The failing pass's name.
    pub pass: String,
    /// Its 1-based position among the pipeline's pass executions.
    pub position: usize,
    /// The warnings reported before the failure, then the errors: the pass's own,
    /// or "pass 'x' produced invalid IR" followed by the verifier's.
    pub diagnostics: Diagnostics,
    /// The reproducer file, if one was written.
    pub reproducer: Option<PathBuf>,
    /// The line [`message`](Self::message) adds about the reproducer: where it is
    /// and the command that replays the failure, or why it could not be written.
    pub reproducer_message: Option<String>,
}

impl PipelineFailure {
    /// `pass 'x' failed`, then a line saying where the reproducer is and how to
    /// replay it (or why it could not be written):
    ///
    /// ```text
    /// pass 'fold-bn' failed
    /// reproducer written to /tmp/qopt-reproducer-42-fold-bn.qir; replay with: qopt /tmp/qopt-reproducer-42-fold-bn.qir --pass='fold-bn'
    /// ```
    pub fn message(&self) -> String {
        match &self.reproducer_message {
            Some(line) => format!("pass '{}' failed\n{line}", self.pass),
            None => format!("pass '{}' failed", self.pass),
        }
    }
}

impl fmt::Display for PipelineFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message())
    }
}

impl std::error::Error for PipelineFailure {}

/// The state of one run.
struct Runner<'r, 'i> {
    ctx: &'r mut Context,
    module: &'r mut Module,
    inst: &'r mut Instrumentation<'i>,
    report: RunReport,
    /// Fingerprint of the printed module as the previous pass left it, if known.
    fingerprint: Option<(u64, u64)>,
    /// The pipeline texts of the passes that ran so far, for a reproducer
    /// replayed from the input text.
    passes_run: Vec<String>,
}

impl Runner<'_, '_> {
    fn run_entries(&mut self, entries: &[Entry], nodes: &mut Vec<TimingNode>) -> Result<(), PipelineFailure> {
        for entry in entries {
            match entry {
                Entry::Pass(scheduled) => nodes.push(self.run_pass(scheduled)?),
                Entry::Group { name, entries, .. } => {
                    let start = Instant::now();
                    let mut children = Vec::new();
                    self.run_entries(entries, &mut children)?;
                    nodes.push(TimingNode { name: name.to_string(), wall: start.elapsed(), children });
                }
            }
        }
        Ok(())
    }

    fn run_pass(&mut self, scheduled: &Scheduled) -> Result<TimingNode, PipelineFailure> {
        let pass = &*scheduled.pass;
        let name = pass.name();
        let position = scheduled.position;
        let span = tracing::info_span!("pass", name, position);
        let _entered = span.enter();
        let run = PassRun { pass, options: &scheduled.options, position, text: &scheduled.text };

        // With the input text at hand the reproducer replays the pipeline from
        // it, and no copy of the module is needed.
        let needs_copy = self.inst.reproducer_dir.is_some() && self.inst.reproducer_input.is_none();
        let snapshot = needs_copy.then(|| self.module.clone());
        let mut hooks = std::mem::take(&mut self.inst.hooks);
        let mut hook_times = vec![Duration::ZERO; hooks.len()];
        let before = hooks.iter_mut().zip(&mut hook_times).try_for_each(|(hook, time)| {
            let start = Instant::now();
            let result = hook.before_pass(&run, self.ctx, self.module);
            *time += start.elapsed();
            result
        });
        self.inst.hooks = hooks;
        if let Err(diagnostics) = before {
            return Err(self.fail(scheduled, snapshot, diagnostics, Fault::Compiler));
        }
        if self.inst.print_before.matches(name) {
            self.dump(name, position, DumpPoint::Before);
        }
        let tracks_change = self.inst.tracks_change(name);
        let fingerprint_before = match self.fingerprint.take() {
            Some(known) => Some(known),
            None if tracks_change => Some(text_fingerprint(self.ctx, self.module)),
            None => None,
        };

        // Run the pass.
        let start = Instant::now();
        let mut cx = PassContext::new(self.ctx);
        let result = catch_unwind(AssertUnwindSafe(|| pass.run(&mut cx, self.module, &scheduled.options)));
        let super::PassRecords { statistics, warnings, phases } = cx.into_parts();
        let mut wall = start.elapsed();
        for mut warning in warnings {
            self.attribute(&mut warning);
            self.report.warnings.push(warning);
        }
        if self.inst.statistics && !statistics.is_empty() {
            self.report.statistics.push((name.to_string(), statistics));
        }
        let outcome = match result {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(error)) => {
                let fault = if error.internal { Fault::Compiler } else { Fault::Input };
                return Err(self.fail(scheduled, snapshot, error.diagnostics, fault));
            }
            Err(payload) => {
                let what = panic_message(payload.as_ref());
                let message = format!("pass '{name}' panicked: {what}");
                let diagnostic = Diagnostic::error(None, SrcPos::NONE, message);
                return Err(self.fail(scheduled, snapshot, Diagnostics(vec![diagnostic]), Fault::Compiler));
            }
        };
        tracing::debug!(?outcome, "pass finished");
        self.report.changed |= outcome == PassOutcome::Changed;

        // Verify.
        let mut children: Vec<TimingNode> =
            phases.into_iter().map(|(phase, wall)| TimingNode::new(phase, wall)).collect();
        if self.inst.verify_each {
            tracing::debug!("verifying");
            let start = Instant::now();
            let verified = verify(self.ctx, self.module);
            let elapsed = start.elapsed();
            if let Err(errors) = verified {
                let headline =
                    Diagnostic::error(None, SrcPos::NONE, format!("pass '{name}' produced invalid IR"));
                let mut diagnostics = vec![headline];
                diagnostics.extend(errors.0);
                return Err(self.fail(scheduled, snapshot, Diagnostics(diagnostics), Fault::Compiler));
            }
            wall += elapsed;
            children.push(TimingNode::new("verify", elapsed));
        }

        let mut hooks = std::mem::take(&mut self.inst.hooks);
        let after = hooks.iter_mut().zip(&mut hook_times).try_for_each(|(hook, time)| {
            let start = Instant::now();
            let result = hook.after_pass(&run, outcome, self.ctx, self.module);
            *time += start.elapsed();
            result
        });
        for (hook, &time) in hooks.iter().zip(&hook_times) {
            if let Some(line) = hook.timing_name() {
                wall += time;
                children.push(TimingNode::new(line, time));
            }
        }
        self.inst.hooks = hooks;
        if let Err(diagnostics) = after {
            return Err(self.fail(scheduled, snapshot, diagnostics, Fault::Compiler));
        }

        if tracks_change {
            let after = text_fingerprint(self.ctx, self.module);
            self.fingerprint = Some(after);
            if fingerprint_before != Some(after) {
                self.dump(name, position, DumpPoint::After);
            }
        } else if self.inst.prints_after(name) {
            self.dump(name, position, DumpPoint::After);
        }
        self.passes_run.push(scheduled.text.clone());
        Ok(TimingNode { name: name.to_string(), wall, children })
    }

    fn dump(&mut self, pass: &str, position: usize, point: DumpPoint) {
        if let Err(error) = self.inst.dump(self.ctx, self.module, pass, position, point) {
            let when = if point == DumpPoint::Before { "before" } else { "after" };
            let mut warning = Diagnostic::warning(
                None,
                SrcPos::NONE,
                format!("cannot print the IR {when} pass '{pass}': {error}"),
            );
            self.attribute(&mut warning);
            self.report.warnings.push(warning);
        }
    }

    /// Attributes a diagnostic without a file to the module's source file.
    fn attribute(&self, diagnostic: &mut Diagnostic) {
        if diagnostic.file.is_none() {
            diagnostic.file = self.module.source_name().cloned();
        }
    }

    /// Builds the failure for `scheduled`; for a fault of the compiler, writes
    /// the reproducer: the input text with every pass up to this one, or
    /// `snapshot` with this pass.
    fn fail(
        &mut self,
        scheduled: &Scheduled,
        snapshot: Option<Module>,
        errors: Diagnostics,
        fault: Fault,
    ) -> PipelineFailure {
        let name = scheduled.pass.name();
        tracing::debug!(pass = name, "pass failed");
        let mut diagnostics = std::mem::take(&mut self.report.warnings);
        for mut error in errors.0 {
            self.attribute(&mut error);
            diagnostics.push(error);
        }
        let mut reproducer = None;
        let mut reproducer_message = None;
        let input = match (self.inst.reproducer_input, snapshot) {
            _ if fault == Fault::Input => None,
            (Some(text), _) => {
                let mut pipeline = std::mem::take(&mut self.passes_run);
                pipeline.push(scheduled.text.clone());
                Some((pipeline.join(","), ReproducerIr::Text(text)))
            }
            (None, Some(before)) => Some((scheduled.text.clone(), ReproducerIr::Module(self.ctx, before))),
            (None, None) => None,
        };
        if let (Some(dir), Some((pipeline, ir))) = (&self.inst.reproducer_dir, input) {
            let tool = &self.inst.tool_name;
            let flags = replay_flags(&pipeline, self.ctx.allows_unregistered());
            match write_reproducer(dir, tool, name, &flags, ir) {
                Ok(path) => {
                    let shown = path.display().to_string();
                    reproducer_message = Some(format!(
                        "reproducer written to {shown}; replay with: {tool} {} {flags}",
                        shell_word(&shown)
                    ));
                    reproducer = Some(path);
                }
                Err((path, error)) => {
                    reproducer_message =
                        Some(format!("could not write a reproducer to {}: {error}", path.display()))
                }
            }
        }
        PipelineFailure {
            pass: name.to_string(),
            position: scheduled.position,
            diagnostics: Diagnostics(diagnostics),
            reproducer,
            reproducer_message,
        }
    }
}

/// Whose fault a failure is: only the compiler's gets a reproducer.
#[derive(Copy, Clone, PartialEq, Eq)]
enum Fault {
    /// The pass refused its input (model, data or options) with a diagnosis.
    Input,
    /// A panic, invalid IR, a failed check, or a pass's [`PassError::internal`].
    Compiler,
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        text.to_string()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "(no message)".to_string()
    }
}

#[cfg(test)]
#[path = "manager_tests.rs"]
mod tests;
