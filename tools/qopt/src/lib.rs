//! The opt driver as a library: `qopt` is [`Driver::new("qopt").main()`], and a
//! downstream crate builds its own `myopt` the same way after registering its
//! dialects and passes, as mlir-opt's main is reused:
//!
//! ```no_run
//! let mut driver = qopt_driver::Driver::new("myopt");
//! driver.add_dialects(|ctx| { let _ = ctx; /* ctx.register_dialect(MyDialect) */ Ok(()) });
//! std::process::exit(driver.run(std::env::args_os()));
//! ```
//!
//! Besides running pipelines, the driver reports on its registry:
//! `--list-passes`, `--list-dialects`, `--list-ops[=DIALECT]` and
//! `--emit-op-docs DIR` (a Markdown op reference per dialect, [`op_docs`]),
//! `--emit-pass-docs FILE` (the Markdown pass reference, [`pass_docs`]).
//! `--diagnostics=json` writes diagnostics as JSON lines ([`diagnostic_to_json`]).
//!
//! Exit codes: 0 success; 1 bad input, failed verification or a failing pass;
//! 2 usage errors (bad flags, unknown pass, bad pass options, unknown dialect).

mod cli;
pub mod compile;
mod diagnostics;
pub mod golden;
pub mod op_docs;
pub mod pass_docs;
pub mod run;

pub use cli::{Cli, DiagnosticFormat, VerifyEquiv, VerifyNumericsMode};
pub use diagnostics::{diagnostic_to_json, MAX_REPORTED_DIAGNOSTICS, PIPELINE_FILE};
pub use op_docs::{InterfaceDoc, STANDARD_INTERFACE_DOCS};
pub use qopt_ir_core::{write_file_atomically, write_files_atomically};

use diagnostics::Reporter;
use qopt_ir_core::pass::pipeline::nearest_name;
use qopt_ir_core::pass::{
    FileOption, FileUse, Instrumentation, PassFilter, PassManager, PassRegistry, PipelineError, TimingTree,
};
use qopt_ir_core::{
    parse_module_chunk, parse_source, print_module, split_input, verify, Context, Diagnostic, Module,
    SourceMap, SourceText, SrcPos,
};
use std::ffi::OsString;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;
use tracing_subscriber::fmt::format::FmtSpan;

/// An error if `output` names the same existing file as one of `inputs`:
/// tools that turn one kind of file into another (`qimport`, `qexport`,
/// `qcompile`, `qrun -o`) would replace their source with something else.
/// `qopt` reads its whole input before writing and may rewrite it in place.
pub fn refuse_output_over_input(output: &Path, inputs: &[&Path]) -> Result<(), String> {
    for input in inputs {
        if same_file(output, input) {
            return Err(format!(
                "the output '{}' is the input '{}'; writing it would replace the input: name another output",
                output.display(),
                input.display()
            ));
        }
    }
    Ok(())
}

/// Refuses a run that would write over a file it reads, before anything
/// runs: `-o` or a pass option that writes a file ([`FileUse::Written`]:
/// `collect-calibration-data{out=}`, `quantize-search{report=}`) naming the
/// model or a file a pass reads (`data=`, `labels=`, `reference=`), and two
/// outputs naming one file. `-o` may name the model: qopt reads it whole
/// before writing. The error points at the pass option in the pipeline text.
fn refuse_writing_over_inputs(cli: &Cli, pipeline: &PassManager) -> Result<(), PipelineError> {
    let files = pipeline.file_options();
    let model = Path::new(&cli.input);
    let reads_model = cli.input != "-";
    let describe = |f: &FileOption| format!("'{}' of pass '{}'", f.option, f.pass);
    for (index, written) in files.iter().enumerate().filter(|(_, f)| f.usage == FileUse::Written) {
        let path = Path::new(&written.path);
        let clash = if reads_model && same_target(path, model) {
            Some("the model qopt reads".to_string())
        } else if cli.output_file().is_some_and(|out| same_target(path, out)) {
            Some("the -o output".to_string())
        } else {
            files
                .iter()
                .enumerate()
                .find(|&(other, f)| other != index && same_target(path, Path::new(&f.path)))
                .map(|(_, f)| {
                    let role = if f.usage == FileUse::Read { "reads" } else { "writes" };
                    format!("the file {} {role}", describe(f))
                })
        };
        if let Some(clash) = clash {
            let message = format!(
                "{} would write '{}', which is {clash}; writing it would destroy that: name another file",
                describe(written),
                written.path
            );
            return Err(PipelineError { offset: written.offset, message });
        }
    }
    if let Some(out) = cli.output_file() {
        if let Some(read) =
            files.iter().find(|f| f.usage == FileUse::Read && same_target(out, Path::new(&f.path)))
        {
            let message = format!(
                "the -o output '{}' is '{}', which {} reads; writing the model there would destroy it: \
                 name another output",
                out.display(),
                read.path,
                describe(read)
            );
            return Err(PipelineError { offset: read.offset, message });
        }
    }
    Ok(())
}

/// Whether `a` and `b` name one regular file: the same existing file
/// (through links and `..`), or, where either does not exist yet, the same
/// name in the same existing directory. Devices (`/dev/null`) clash with
/// nothing: writing one destroys nothing.
fn same_target(a: &Path, b: &Path) -> bool {
    let device = |p: &Path| std::fs::metadata(p).is_ok_and(|m| !m.is_file() && !m.is_dir());
    if device(a) || device(b) {
        return false;
    }
    if same_file(a, b) {
        return true;
    }
    let place = |p: &Path| -> Option<(PathBuf, std::ffi::OsString)> {
        let name = p.file_name()?.to_os_string();
        let parent = match p.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent,
            _ => Path::new("."),
        };
        Some((std::fs::canonicalize(parent).ok()?, name))
    };
    matches!((place(a), place(b)), (Some(x), Some(y)) if x == y)
}

/// Whether `a` and `b` exist and are one file (through links and `..`).
fn same_file(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        match (std::fs::metadata(a), std::fs::metadata(b)) {
            (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    {
        matches!((std::fs::canonicalize(a), std::fs::canonicalize(b)), (Ok(x), Ok(y)) if x == y)
    }
}

/// Exit code: success.
pub const EXIT_OK: i32 = 0;
/// Exit code: the input, its verification or a pass failed.
pub const EXIT_FAILURE: i32 = 1;
/// Exit code: the command line is wrong.
pub const EXIT_USAGE: i32 = 2;

type DialectSetup = Box<dyn Fn(&mut Context) -> Result<(), String>>;

/// A configurable opt driver; see the crate docs.
pub struct Driver {
    tool: &'static str,
    dialects: Vec<DialectSetup>,
    passes: PassRegistry,
    interface_docs: Vec<InterfaceDoc>,
}

impl Driver {
    /// A driver named `tool` with qopt's own dialects and passes registered.
    pub fn new(tool: &'static str) -> Driver {
        let mut passes = PassRegistry::new();
        // invariant: the registry is empty and the generic and quantization
        // passes' names are distinct and valid, so registering them cannot fail.
        let _ = qopt_passes::register_generic_passes(&mut passes);
        let _ = qopt_quant::register_quant_passes(&mut passes);
        let mut driver =
            Driver { tool, dialects: Vec::new(), passes, interface_docs: STANDARD_INTERFACE_DOCS.to_vec() };
        driver.add_dialects(qopt_dialect_fp::register);
        driver.add_dialects(qopt_dialect_qnn::register);
        driver
    }

    /// The tool's name (`qopt`, `myopt`): the first word of its golden RUN lines.
    pub fn tool(&self) -> &'static str {
        self.tool
    }

    /// Adds a step that registers dialects in each new context.
    pub fn add_dialects(&mut self, setup: impl Fn(&mut Context) -> Result<(), String> + 'static) {
        self.dialects.push(Box::new(setup));
    }

    /// The pass registry, to register more passes and named pipelines.
    pub fn passes_mut(&mut self) -> &mut PassRegistry {
        &mut self.passes
    }

    /// The Markdown pass reference of this driver's passes and pipelines
    /// (what `--emit-pass-docs` writes; see [`pass_docs::render_pass_docs`]).
    pub fn pass_docs(&self) -> String {
        pass_docs::render_pass_docs(&self.passes)
    }

    /// Adds a description of an interface for `--emit-op-docs` (those of
    /// `qopt_ir_core::interfaces` are known already).
    pub fn add_interface_doc(&mut self, doc: InterfaceDoc) {
        self.interface_docs.push(doc);
    }

    /// Writes the op reference of every registered dialect except builtin and
    /// func into `dir` (see [`op_docs::emit_op_docs`]); returns the paths written.
    pub fn emit_op_docs(&self, dir: &Path) -> Result<Vec<PathBuf>, String> {
        let ctx = self.new_context().map_err(|e| format!("registering dialects failed: {e}"))?;
        op_docs::emit_op_docs(&ctx, dir, &self.interface_docs)
            .map_err(|e| format!("cannot write op docs to '{}': {e}", dir.display()))
    }

    /// A fresh context with every registered dialect.
    pub fn new_context(&self) -> Result<Context, String> {
        let mut ctx = Context::new();
        for setup in &self.dialects {
            setup(&mut ctx)?;
        }
        Ok(ctx)
    }

    /// Runs with the process's arguments and exits with the driver's code.
    pub fn main(&self) -> std::process::ExitCode {
        std::process::ExitCode::from(self.run(std::env::args_os()) as u8)
    }

    /// Runs with `args` (the first is the program name) and returns the exit code.
    pub fn run(&self, args: impl IntoIterator<Item = impl Into<OsString> + Clone>) -> i32 {
        run_parsed(self.tool, args, |cli: &Cli, out, err| {
            init_tracing(cli);
            self.run_cli(cli, out, err)
        })
    }

    /// Runs a parsed command line, writing results to `out` and messages to `err`.
    pub fn run_cli(&self, cli: &Cli, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
        let tool = self.tool;
        let no_sources = SourceMap::new();
        let reporter = Reporter { tool, format: cli.diagnostics, sources: &no_sources };
        if let Some(code) = self.report_registry(cli, out, err, reporter) {
            return code;
        }
        let pipeline_text = cli.pass.as_deref().unwrap_or("");
        let checked = PassManager::parse(&self.passes, pipeline_text).and_then(|pipeline| {
            if pipeline.is_empty() {
                return Ok(pipeline);
            }
            // Options that name something a context registry must know (a
            // backend target) are usage errors too; a context that cannot be
            // built is reported when the input is run.
            if let Ok(ctx) = self.new_context() {
                pipeline.check_options_against(&ctx)?;
            }
            refuse_writing_over_inputs(cli, &pipeline)?;
            Ok(pipeline)
        });
        let pipeline = match checked {
            Ok(p) => p,
            Err(e) => {
                match cli.diagnostics {
                    DiagnosticFormat::Human => {
                        let rendered = e.render(pipeline_text);
                        let _ = writeln!(err, "{tool}: invalid pass pipeline\n{}", rendered.trim_end());
                    }
                    DiagnosticFormat::Json => {
                        // Byte columns, like every other diagnostic.
                        let pos =
                            SrcPos { line: 1, col: u32::try_from(e.offset).unwrap_or(u32::MAX - 1) + 1 };
                        reporter
                            .diagnostic(err, &Diagnostic::error(Some(PIPELINE_FILE.into()), pos, e.message));
                    }
                }
                return EXIT_USAGE;
            }
        };
        if let Some(message) = self.unknown_dump_pass(cli) {
            reporter.tool_error(err, None, &message);
            return EXIT_USAGE;
        }
        let (display_name, source) = match read_input(&cli.input) {
            Ok(s) => s,
            Err(e) => {
                reporter.tool_error(err, Some(&cli.input), &format!("cannot read '{}': {e}", cli.input));
                return EXIT_FAILURE;
            }
        };
        if let Some(why) = not_qir_text(source.bytes()) {
            reporter.tool_error(err, Some(&display_name), &format!("'{display_name}': {why}"));
            return EXIT_FAILURE;
        }
        let source = Arc::new(source);
        let mut sources = SourceMap::new();
        sources.add(display_name.as_str().into(), source.clone());

        let mut run = Invocation {
            driver: self,
            cli,
            source: &source,
            name: &display_name,
            pipeline: &pipeline,
            reporter: Reporter { sources: &sources, ..reporter },
            timing: TimingTree::new(),
            summary: None,
        };
        let code = if cli.split_input_file { run.split(out, err) } else { run.whole(out, err) };
        if cli.timing {
            let _ = err.write_all(run.timing.render().as_bytes());
        }
        code
    }

    /// The error for a name in `--print-ir-before=` / `--print-ir-after=` that
    /// is no registered pass (such a filter would silently never match).
    fn unknown_dump_pass(&self, cli: &Cli) -> Option<String> {
        let flags = [("--print-ir-before", &cli.print_ir_before), ("--print-ir-after", &cli.print_ir_after)];
        let (flag, name) = flags
            .iter()
            .flat_map(|(flag, names)| names.iter().map(move |name| (flag, name)))
            .find(|(_, name)| self.passes.get(name).is_none())?;
        let passes = self.passes.names().filter(|n| self.passes.get(n).is_some());
        Some(match nearest_name(name, passes) {
            Some(near) => format!("unknown pass '{name}' in {flag}; did you mean '{near}'?"),
            None if self.passes.get_pipeline(name).is_some() => {
                format!("'{name}' in {flag} is a named pipeline; name the passes it runs instead")
            }
            None => format!("unknown pass '{name}' in {flag}; {} --list-passes lists them", self.tool),
        })
    }

    /// `--list-passes`, `--list-dialects`, `--list-ops` and `--emit-op-docs`:
    /// the exit code if any was given (the input is then not read).
    fn report_registry(
        &self,
        cli: &Cli,
        out: &mut dyn Write,
        err: &mut dyn Write,
        reporter: Reporter<'_>,
    ) -> Option<i32> {
        let needs_dialects = cli.list_dialects || cli.list_ops.is_some() || cli.emit_op_docs.is_some();
        if !cli.list_passes && !needs_dialects && cli.emit_pass_docs.is_none() {
            return None;
        }
        if cli.list_passes {
            let _ = out.write_all(self.passes.list_text().as_bytes());
        }
        if let Some(file) = &cli.emit_pass_docs {
            let text = pass_docs::render_pass_docs(&self.passes);
            if let Err(e) = write_file_atomically(file, |w| w.write_all(text.as_bytes())) {
                let message = format!("cannot write the pass docs to '{}': {e}", file.display());
                reporter.tool_error(err, None, &message);
                return Some(EXIT_FAILURE);
            }
        }
        if !needs_dialects {
            return Some(EXIT_OK);
        }
        let ctx = match self.new_context() {
            Ok(ctx) => ctx,
            Err(e) => {
                reporter.tool_error(err, None, &format!("registering dialects failed: {e}"));
                return Some(EXIT_FAILURE);
            }
        };
        if let Some(Some(dialect)) = &cli.list_ops {
            if ctx.dialect(dialect).is_none() {
                let message = match nearest_name(dialect, ctx.dialects().map(|d| d.name())) {
                    Some(near) => format!("unknown dialect '{dialect}'; did you mean '{near}'?"),
                    None => format!("unknown dialect '{dialect}'"),
                };
                reporter.tool_error(err, None, &message);
                return Some(EXIT_USAGE);
            }
        }
        if cli.list_dialects {
            let _ = out.write_all(op_docs::list_dialects(&ctx).as_bytes());
        }
        if let Some(dialect) = &cli.list_ops {
            let _ = out.write_all(op_docs::list_ops(&ctx, dialect.as_deref()).as_bytes());
        }
        if let Some(dir) = &cli.emit_op_docs {
            if let Err(e) = op_docs::emit_op_docs(&ctx, dir, &self.interface_docs) {
                let message = format!("cannot write op docs to '{}': {e}", dir.display());
                reporter.tool_error(err, None, &message);
                return Some(EXIT_FAILURE);
            }
        }
        let _ = out.flush();
        Some(EXIT_OK)
    }
}

/// The state of one `run_cli` call once its input is read.
struct Invocation<'a> {
    driver: &'a Driver,
    cli: &'a Cli,
    source: &'a SourceText,
    name: &'a str,
    pipeline: &'a PassManager,
    reporter: Reporter<'a>,
    timing: TimingTree,
    /// What the pipeline did, for the line printed when a file is written.
    summary: Option<String>,
}

impl Invocation<'_> {
    /// One module: parse, verify, transform, then stream the result to its target.
    fn whole(&mut self, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
        let source = self.source;
        let Ok((ctx, module)) = self.process(source.bytes(), Some(source), 0, err) else {
            return EXIT_FAILURE;
        };
        let start = Instant::now();
        let written = match self.cli.output_file() {
            Some(path) => write_file_atomically(path, |w| print_module(&ctx, &module, w)),
            None => {
                let mut w = io::BufWriter::with_capacity(1 << 20, out);
                print_module(&ctx, &module, &mut w).and_then(|_| w.flush())
            }
        };
        self.timing.add_phase("print", start.elapsed());
        let code = self.finish_write(written, err);
        let regular = |path: &Path| std::fs::metadata(path).is_ok_and(|m| m.is_file());
        if let (EXIT_OK, Some(path), false) =
            (code, self.cli.output_file().filter(|p| regular(p)), self.cli.quiet)
        {
            let what = self.summary.as_deref().unwrap_or("verified");
            let _ = writeln!(err, "{}: {what} -> {}", self.driver.tool, path.display());
        }
        code
    }

    /// Each `// -----` case on its own; failing cases report and print nothing.
    fn split(&mut self, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
        let mut rendered = Vec::new();
        let mut failed = false;
        for (i, chunk) in split_input(self.source.bytes()).into_iter().enumerate() {
            if i > 0 {
                rendered.extend_from_slice(b"// -----\n");
            }
            match self.process(chunk.text, None, chunk.line_offset, err) {
                Ok((ctx, module)) => {
                    let start = Instant::now();
                    // invariant: printing into a Vec cannot fail.
                    let _ = print_module(&ctx, &module, &mut rendered);
                    self.timing.add_phase("print", start.elapsed());
                }
                Err(()) => failed = true,
            }
        }
        let written = match self.cli.output_file() {
            // The run exits 1: like any failed run it leaves `-o` as it was.
            Some(path) if failed => {
                let message = format!("'{}' was not written: a case failed", path.display());
                self.reporter.tool_error(err, None, &message);
                return EXIT_FAILURE;
            }
            Some(path) => write_file_atomically(path, |w| w.write_all(&rendered)),
            None => out.write_all(&rendered).and_then(|_| out.flush()),
        };
        match self.finish_write(written, err) {
            EXIT_OK if failed => EXIT_FAILURE,
            code => code,
        }
    }

    fn finish_write(&self, written: io::Result<()>, err: &mut dyn Write) -> i32 {
        match written {
            Ok(()) => EXIT_OK,
            Err(e) => {
                let target =
                    self.cli.output_file().map_or("standard output".to_string(), |p| p.display().to_string());
                self.reporter.tool_error(err, None, &format!("cannot write {target}: {e}"));
                EXIT_FAILURE
            }
        }
    }

    /// Parses, verifies and transforms one module; diagnostics go to `err`.
    /// `mapped` is the whole mapped input when `text` is all of it (lets the
    /// parser release parsed pages).
    fn process(
        &mut self,
        text: &[u8],
        mapped: Option<&SourceText>,
        line_offset: u32,
        err: &mut dyn Write,
    ) -> Result<(Context, Module), ()> {
        let (cli, name, reporter) = (self.cli, self.name, self.reporter);
        let mut ctx = match self.driver.new_context() {
            Ok(ctx) => ctx,
            Err(e) => {
                reporter.tool_error(err, None, &format!("registering dialects failed: {e}"));
                return Err(());
            }
        };
        ctx.set_allow_unregistered(cli.allow_unregistered_dialect);
        let start = Instant::now();
        let parsed = match mapped {
            Some(source) => parse_source(&mut ctx, source, name),
            None => parse_module_chunk(&mut ctx, text, name, line_offset),
        };
        self.timing.add_phase("parse", start.elapsed());
        let mut module: Module = parsed.map_err(|d| reporter.diagnostics(err, &d))?;
        let start = Instant::now();
        let verified = verify(&mut ctx, &module);
        self.timing.add_phase("verify", start.elapsed());
        verified.map_err(|d| reporter.diagnostics(err, &d))?;

        let mut inst = Instrumentation {
            tool_name: self.driver.tool.to_string(),
            verify_each: !cli.no_verify_each,
            print_before: filter(cli.print_ir_before_all, &cli.print_ir_before),
            print_after: filter(cli.print_ir_after_all, &cli.print_ir_after),
            print_after_change: cli.print_ir_after_change,
            print_dir: cli.print_ir_dir.clone(),
            timing: cli.timing,
            // Always kept: the summary line reads quant-lint's.
            statistics: true,
            reproducer_dir: Some(cli.reproducer_dir.clone().unwrap_or_else(std::env::temp_dir)),
            // A reproducer replays the pipeline from the input text, so no
            // copy of the module is kept before each pass.
            reproducer_input: Some(text),
            // IR dumps stream to the run's own error output.
            print_sink: Box::new(&mut *err),
            ..Instrumentation::default()
        };
        // The numerics hook runs first: when a proof fails, the report still
        // says whether the pass moved the results (a missing rule or a bug).
        let numerics_report = qopt_equiv::NumericsReport::default();
        let numerics_settings = cli.verify_numerics.map(|inputs| qopt_equiv::NumericsSettings {
            inputs,
            seed: cli.verify_numerics_seed,
            mode: match cli.verify_numerics_mode {
                VerifyNumericsMode::Fail => qopt_equiv::Mode::Fail,
                VerifyNumericsMode::Warn => qopt_equiv::Mode::Warn,
            },
        });
        if let Some(settings) = numerics_settings {
            inst.hooks.push(Box::new(qopt_equiv::NumericsHook::new(settings, numerics_report.clone())));
        }
        let equiv_report = qopt_equiv::SharedReport::default();
        if let Some(mode) = cli.verify_equiv {
            let mode = match mode {
                VerifyEquiv::Fail => qopt_equiv::Mode::Fail,
                VerifyEquiv::Warn => qopt_equiv::Mode::Warn,
            };
            let hook = qopt_equiv::EquivHook::new(mode, qopt_equiv::Limits::default(), equiv_report.clone());
            inst.hooks.push(Box::new(hook));
        }
        let result = self.pipeline.run(&mut ctx, &mut module, &mut inst);
        drop(inst);
        if cli.verify_equiv.is_some() {
            let _ = err.write_all(qopt_equiv::render(&equiv_report.borrow()).as_bytes());
        }
        if let Some(settings) = &numerics_settings {
            let block = qopt_equiv::render_numerics(settings, &numerics_report.borrow());
            let _ = err.write_all(block.as_bytes());
        }
        match result {
            Ok(run) => {
                for w in &run.warnings {
                    reporter.diagnostic(err, w);
                }
                self.summary = Some(run_summary(self.pipeline, &run));
                if cli.stats {
                    let _ = err.write_all(run.render_statistics().as_bytes());
                }
                if let Some(t) = run.timing {
                    self.timing.add_child(t);
                }
            }
            Err(failure) => {
                reporter.diagnostics(err, &failure.diagnostics);
                match cli.diagnostics {
                    DiagnosticFormat::Human => {
                        let _ = writeln!(err, "{}", failure.message());
                    }
                    DiagnosticFormat::Json => {
                        let headline = format!("pass '{}' failed", failure.pass);
                        let mut d = Diagnostic::error(Some(name.into()), SrcPos::NONE, headline);
                        if let Some(line) = &failure.reproducer_message {
                            d = d.with_note(Diagnostic::error(None, SrcPos::NONE, line.clone()));
                        }
                        reporter.diagnostic(err, &d);
                    }
                }
                return Err(());
            }
        }
        Ok((ctx, module))
    }
}

/// What a run did, in one line: the pipeline as given, how many passes ran
/// and warned, and, when `quant-lint` ran last, the shape of the result:
/// `quantize{data=c.npy}: 15 passes; 5 qnn ops, 0 float ops, 1 quantize,
/// 1 dequantize, 17024 weight bytes; 0 warnings`.
fn run_summary(pipeline: &PassManager, run: &qopt_ir_core::RunReport) -> String {
    if pipeline.is_empty() {
        return "verified".to_string();
    }
    let mut parts = vec![match pipeline.len() {
        1 => "1 pass".to_string(),
        n => format!("{n} passes"),
    }];
    let lint = run.statistics.iter().rev().find(|(pass, _)| pass == "quant-lint");
    if let Some((_, stats)) = lint {
        let stat = |name: &str| stats.iter().find(|(n, _)| *n == name).map_or(0, |&(_, v)| v);
        let plural = |n: u64, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        parts.push(
            [
                plural(stat("qnn-ops"), "qnn op", "qnn ops"),
                plural(stat("float-ops"), "float op", "float ops"),
                plural(stat("quantizes"), "quantize", "quantizes"),
                plural(stat("dequantizes"), "dequantize", "dequantizes"),
                plural(stat("weight-bytes"), "weight byte", "weight bytes"),
            ]
            .join(", "),
        );
    }
    let warnings = run.warnings.len() as u64;
    parts.push(format!("{warnings} warning{}", if warnings == 1 { "" } else { "s" }));
    format!("{}: {}", pipeline.pipeline_text(), parts.join("; "))
}

fn filter(all: bool, names: &[String]) -> PassFilter {
    if all {
        PassFilter::All
    } else if names.is_empty() {
        PassFilter::None
    } else {
        PassFilter::Named(names.to_vec())
    }
}

/// Why `bytes` cannot be `.qir` text, when they are plainly another kind of
/// file: one line instead of twenty parse errors quoting binary garbage.
pub fn not_qir_text(bytes: &[u8]) -> Option<&'static str> {
    let head = &bytes[..bytes.len().min(512)];
    if head.starts_with(b"\x93NUMPY") {
        return Some("this is a .npy array, not a .qir model; give it to qrun with --input");
    }
    if head.starts_with(b"PK\x03\x04") {
        return Some(
            "this is a zip archive (an .npz?), not a .qir model; give an .npz to qrun with --inputs",
        );
    }
    // .qir is text: no NUL and hardly any other control bytes.
    let binary = head.iter().any(|&b| b == 0 || (b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r' | 0x0c)));
    if !binary {
        return None;
    }
    // An ONNX ModelProto starts with field 1 (ir_version) as a varint: byte 0x08.
    Some(if head.first() == Some(&0x08) {
        "this looks like an ONNX model, not a .qir model; import it with qimport"
    } else {
        "this is a binary file, not a .qir model"
    })
}

fn read_input(input: &str) -> io::Result<(String, SourceText)> {
    if input == "-" {
        Ok(("<stdin>".to_string(), SourceText::read_stdin()?))
    } else {
        Ok((input.to_string(), SourceText::read_file(Path::new(input))?))
    }
}

fn init_tracing(cli: &Cli) {
    let level = match (cli.quiet, cli.verbose) {
        (true, _) => tracing::Level::ERROR,
        (false, 0) => tracing::Level::WARN,
        (false, 1) => tracing::Level::INFO,
        (false, 2) => tracing::Level::DEBUG,
        _ => tracing::Level::TRACE,
    };
    // Span open and close events show each pass starting and (with its busy time)
    // finishing from -v on; the pass manager's debug events come with -vv.
    let _ = tracing_subscriber::fmt()
        .with_max_level(level)
        .with_span_events(FmtSpan::NEW | FmtSpan::CLOSE)
        .with_writer(io::stderr)
        .without_time()
        .try_init();
}

/// The shared start of every driver: parses `args` as the command line `C`,
/// named after `tool` (so `--version` says `myopt 1.2.0` for a downstream
/// driver, not this crate's name); on a parse error prints clap's message
/// and returns 2 (0 for `--help` and `--version`); otherwise calls `run`
/// with the command line and the locked standard output and error.
pub(crate) fn run_parsed<C, I, T>(
    tool: &'static str,
    args: I,
    run: impl FnOnce(&C, &mut dyn Write, &mut dyn Write) -> i32,
) -> i32
where
    C: clap::CommandFactory + clap::FromArgMatches,
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let parsed = C::command().name(tool).try_get_matches_from(args).and_then(|m| C::from_arg_matches(&m));
    let cli = match parsed {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { EXIT_USAGE } else { EXIT_OK };
        }
    };
    let stdout = io::stdout();
    let stderr = io::stderr();
    run(&cli, &mut EndsOnClosedPipe(stdout.lock()), &mut stderr.lock())
}

/// The exit status of a process that wrote to a pipe nobody reads any more:
/// 128 + SIGPIPE, what a shell reports for a program the signal ended.
pub const EXIT_BROKEN_PIPE: i32 = 141;

/// Standard output that ends the process quietly with [`EXIT_BROKEN_PIPE`]
/// when its reader has gone (`qopt big.qir | head`): Rust ignores SIGPIPE,
/// so the write would otherwise fail and be reported as an error. Output
/// files are not affected: `-o` writes a temporary file, and nothing is
/// renamed over a target after standard output fails. Every tool writes
/// standard output through it (`qexport -o -` too).
pub struct EndsOnClosedPipe<W: Write>(pub W);

impl<W: Write> EndsOnClosedPipe<W> {
    fn check<T>(result: io::Result<T>) -> io::Result<T> {
        match result {
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => std::process::exit(EXIT_BROKEN_PIPE),
            other => other,
        }
    }
}

impl<W: Write> Write for EndsOnClosedPipe<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        Self::check(self.0.write(buf))
    }

    fn flush(&mut self) -> io::Result<()> {
        Self::check(self.0.flush())
    }
}
