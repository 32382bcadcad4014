//! The run driver as a library: `qrun` is `RunDriver::new("qrun").main()`,
//! and a downstream crate builds its own run tool the same way after adding
//! its dialects (through the [`Driver`] it wraps, as for `myopt`) and kernels:
//!
//! ```no_run
//! use qopt_driver::run::RunDriver;
//! let mut run = RunDriver::new("toy-run");
//! run.driver_mut().add_dialects(|ctx| { let _ = ctx; /* ctx.register_dialect(MyDialect) */ Ok(()) });
//! // run.kernels_mut().register("accel.conv", my_conv_kernel);
//! std::process::exit(run.run(std::env::args_os()));
//! ```
//!
//! A run parses and verifies the model (`model`), gathers and checks its
//! inputs (`inputs`; random ones from `qopt_interp::random_arguments`), cuts
//! them into chunks with `--batch` (`samples`) run on every core (`parallel`,
//! with a `progress` bar on a terminal), then does one of:
//!
//! - run: print a summary line or the values of each output, write them with
//!   `--output`;
//! - `--bench N`: time N runs after a warm-up (`bench`); with `--profile`,
//!   per-op times too (`profile`);
//! - `--compare OTHER`: run both models, compare every located value
//!   (`compare`, `metrics`).
//!
//! `report` writes the text or `--json` document (`qopt_ir_core::json`, numbers and
//! tensors by `tensor_text`). `docs/qrun.md` is the user's reference.
//!
//! Exit codes: 0 success; 1 a bad model, bad inputs or a failing run (messages
//! name the argument, or the op and its location); 2 usage errors.

mod bench;
mod cli;
mod compare;
mod engine;
mod expect;
mod inputs;
mod metrics;
pub(crate) mod model;
mod parallel;
mod profile;
mod report;
mod samples;
mod tensor_text;

pub use cli::RunCli;

use crate::diagnostics::Reporter;
use crate::{
    refuse_output_over_input, write_file_atomically, DiagnosticFormat, Driver, EXIT_FAILURE, EXIT_OK,
    EXIT_USAGE,
};
use bench::Latency;
use compare::{Comparison, Pair};
use engine::{Backend, Compiled, Engine};
use expect::{ExpectReport, Tolerance};
use inputs::InputSource;
use model::{LoadError, Model, Signature};
use qopt_codegen_x86::{TargetCpu, Workspace};
use qopt_interp::progress::Progress;
use qopt_interp::{Interpreter, KernelRegistry, Tensor};
use qopt_npy::{self as npy, RawArray};
use report::Header;
use samples::Samples;
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The kernels `qrun` runs with: every `fp` and `qnn` op.
pub fn standard_kernels() -> KernelRegistry {
    KernelRegistry::standard()
}

/// A configurable run driver; see the module docs.
pub struct RunDriver {
    driver: Driver,
    kernels: KernelRegistry,
}

/// Why a run stopped: a message to print, a usage error, or diagnostics
/// already printed.
enum Failure {
    Message(String),
    Usage(String),
    Reported,
}

impl From<String> for Failure {
    fn from(message: String) -> Failure {
        Failure::Message(message)
    }
}

impl RunDriver {
    /// A driver named `tool` with qopt's dialects and [`standard_kernels`].
    pub fn new(tool: &'static str) -> RunDriver {
        RunDriver::with_parts(Driver::new(tool), standard_kernels())
    }

    /// A driver whose models are parsed with `driver`'s dialects and run with
    /// `kernels`; the tool is named after `driver`.
    pub fn with_parts(driver: Driver, kernels: KernelRegistry) -> RunDriver {
        RunDriver { driver, kernels }
    }

    /// The tool's name.
    pub fn tool(&self) -> &'static str {
        self.driver.tool()
    }

    /// The wrapped opt driver, to add dialects.
    pub fn driver_mut(&mut self) -> &mut Driver {
        &mut self.driver
    }

    /// The kernel registry, to add kernels.
    pub fn kernels_mut(&mut self) -> &mut KernelRegistry {
        &mut self.kernels
    }

    /// Runs with the process's arguments and exits with the driver's code.
    pub fn main(&self) -> std::process::ExitCode {
        std::process::ExitCode::from(self.run(std::env::args_os()) as u8)
    }

    /// Runs with `args` (the first is the program name) and returns the exit code.
    pub fn run(&self, args: impl IntoIterator<Item = impl Into<OsString> + Clone>) -> i32 {
        crate::run_parsed(self.tool(), args, |cli: &RunCli, out, err| self.run_cli(cli, out, err))
    }

    /// Runs a parsed command line, writing results to `out` and messages to
    /// `err` (the progress bar, on a terminal only, goes to the process's
    /// standard error).
    pub fn run_cli(&self, cli: &RunCli, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
        match self.execute(cli, out, err) {
            Ok(()) => EXIT_OK,
            Err(Failure::Reported) => EXIT_FAILURE,
            Err(Failure::Message(message)) => {
                let _ = writeln!(err, "{}: error: {message}", self.tool());
                EXIT_FAILURE
            }
            Err(Failure::Usage(message)) => {
                let _ = writeln!(err, "{}: error: {message}", self.tool());
                EXIT_USAGE
            }
        }
    }

    fn execute(&self, cli: &RunCli, out: &mut dyn Write, err: &mut dyn Write) -> Result<(), Failure> {
        if cli.backend == Backend::Interp && (cli.threads != 1 || cli.target_cpu != TargetCpu::Native) {
            return Err(Failure::Usage("--threads and --target-cpu apply to --backend=x86".into()));
        }
        if cli.seed.is_some() && !cli.random_inputs {
            return Err(Failure::Usage("--seed applies to --random-inputs only".into()));
        }
        if let Some(output) = &cli.output {
            let mut inputs: Vec<&Path> = vec![&cli.model];
            inputs.extend(cli.input.iter().map(PathBuf::as_path));
            inputs.extend(cli.inputs.as_deref());
            inputs.extend(cli.expect.as_deref());
            refuse_output_over_input(output, &inputs)?;
        }
        let reference = self.load(&cli.model, cli, err)?;
        let sig = reference.signature(&cli.func)?;
        let source = match (&cli.inputs, cli.random_inputs) {
            (_, true) => InputSource::Random(cli.seed.unwrap_or(0)),
            (Some(archive), false) => InputSource::Archive(archive.clone()),
            (None, false) => InputSource::Files(cli.input.clone()),
        };
        let inputs = inputs::gather(&reference, &sig, &source)?;
        for warning in inputs::check(&reference, &sig, &inputs, cli.batch, cli.allow_nonfinite)? {
            let _ = writeln!(err, "{}: warning: {warning}", self.tool());
        }
        let other = match &cli.compare {
            Some(path) => {
                let other = self.load(path, cli, err)?;
                let other_sig = other.signature(&cli.func)?;
                // Warnings were given for the reference already. An error says
                // which model it is about: the inputs fit the reference.
                inputs::check(&other, &other_sig, &inputs, cli.batch, cli.allow_nonfinite)
                    .map_err(|e| format!("the --compare model '{}': {e}", other.name))?;
                Some((other, other_sig))
            }
            None => None,
        };
        let tensors: Vec<Tensor> = inputs.into_iter().map(|i| i.tensor).collect();
        let samples =
            if cli.batch { Samples::batched(&reference, &sig, tensors)? } else { Samples::Whole(tensors) };
        let header = Header { model: &reference.name, func: &sig.func };
        let (text, expectation) = match &other {
            Some((other, other_sig)) => {
                let pair = Pair { reference: &reference, other, reference_sig: &sig, other_sig };
                let cmp = self.compare(cli, &pair, &samples, err)?;
                let text = if cli.json {
                    report::compare_json(&header, &other.name, samples.chunks(), &cmp)
                } else {
                    report::compare_text(&cmp, &reference.name, &other.name)
                };
                (text, None)
            }
            None => self.run_model(cli, &reference, &sig, &samples, &header, err)?,
        };
        out.write_all(text.as_bytes())
            .and_then(|()| out.flush())
            .map_err(|e| Failure::Message(format!("cannot write standard output: {e}")))?;
        match expectation {
            Some(report) if !report.passed() => Err(Failure::Message(format!(
                "the outputs differ from '{}' beyond the tolerance (rtol {}, atol {})",
                report.reference,
                tensor_text::number(report.tolerance.rtol),
                report.tolerance.atol.map_or("scaled with the reference".to_string(), tensor_text::number)
            ))),
            _ => Ok(()),
        }
    }

    /// Parses and verifies a model; parse and verification errors are printed
    /// like qopt's.
    fn load(&self, path: &Path, cli: &RunCli, err: &mut dyn Write) -> Result<Model, Failure> {
        Model::load(&self.driver, path, cli.allow_unregistered_dialect).map_err(|e| match e {
            LoadError::Message(message) => Failure::Message(message),
            LoadError::Diagnostics(sources, diagnostics) => {
                let reporter =
                    Reporter { tool: self.tool(), format: DiagnosticFormat::Human, sources: &sources };
                reporter.diagnostics(err, &diagnostics);
                Failure::Reported
            }
        })
    }

    /// Runs the model (and `--bench`, `--output`, `--expect`); returns the
    /// text to print and the `--expect` check.
    fn run_model(
        &self,
        cli: &RunCli,
        model: &Model,
        sig: &Signature,
        samples: &Samples,
        header: &Header<'_>,
        err: &mut dyn Write,
    ) -> Result<(String, Option<ExpectReport>), Failure> {
        let compiled = self.compiled(cli, model, &sig.func, err)?;
        let mut workers = self.engines(cli, model, compiled.as_ref(), samples.chunks());
        let progress = Progress::new(samples.chunks(), "batches").with_label("qrun");
        let outputs = run_all(&mut workers, model, sig, samples, &progress);
        progress.finish();
        let outputs = outputs?;
        if let Some(path) = &cli.output {
            write_outputs(path, &outputs, &sig.output_names)?;
            let engine = match &compiled {
                Some(c) => format!("x86-64 code for {}", c.jit.program().target.cpu),
                None => "the interpreter".to_string(),
            };
            let runs = match samples.count() {
                Some(n) => {
                    format!("{n} sample{} in {} run{}", plural(n), samples.chunks(), plural(samples.chunks()))
                }
                None => "once".to_string(),
            };
            let written: Vec<String> = outputs
                .iter()
                .zip(&sig.output_names)
                .map(|(t, name)| format!("{name} {}", t.describe()))
                .collect();
            let _ = writeln!(
                err,
                "{}: {}: @{} ran {runs} on {engine}; wrote {} ({})",
                self.tool(),
                model.name,
                sig.func,
                path.display(),
                written.join(", ")
            );
        }
        let tolerance = Tolerance { rtol: cli.rtol, atol: cli.atol };
        let expectation = cli
            .expect
            .as_ref()
            .map(|path| expect::check(path, &outputs, &sig.output_names, tolerance))
            .transpose()?;
        let expect_text = expectation.as_ref().map_or(String::new(), ExpectReport::text);
        let Some(runs) = cli.bench else {
            let text = if cli.json {
                report::run_json(header, &outputs, &sig.output_names, cli.print, expectation.as_ref())
            } else {
                report::run_text(&outputs, &sig.output_names, cli.print) + &expect_text
            };
            return Ok((text, expectation));
        };
        // The run above was the warm-up: plans and constants are built. The
        // bar counts timed runs (drawn between them, at most ten times a second).
        let hidden = Progress::hidden();
        let timed = Progress::new(runs as usize, "timed runs").with_label("bench");
        let latency = Latency::measure(runs as usize, || {
            let run = run_all(&mut workers, model, sig, samples, &hidden).map(drop);
            timed.advance();
            timed.redraw();
            run
        });
        timed.finish();
        let latency = latency?;
        let profile = match (cli.profile, workers.first_mut()) {
            (true, Some(Engine::Interpreter(interpreter))) => {
                let inputs = samples.chunk(0)?;
                let profile = profile::Profile::measure(interpreter, &sig.func, &inputs, runs as usize)?;
                profile.report(&model.ctx, &model.module)
            }
            (true, Some(Engine::Compiled { compiled, threads, .. })) => {
                profile::compiled_report(&compiled.jit, &samples.chunk(0)?, (runs as usize, *threads))?
            }
            _ => String::new(),
        };
        let text = if cli.json {
            report::bench_json(header, &latency)
        } else {
            let values =
                if cli.print { report::run_text(&outputs, &sig.output_names, true) } else { String::new() };
            let compiled = compiled.as_ref().map_or(String::new(), |c| {
                let p = c.jit.program();
                format!(
                    "compiled in {:.1} ms: {} kernels, {} bytes of code, {} of rodata, arena {} bytes\n",
                    c.compile_time.as_secs_f64() * 1000.0,
                    p.kernels.len(),
                    p.code.len(),
                    p.rodata.len(),
                    p.arena_bytes
                )
            });
            format!("{values}{expect_text}{compiled}{}\n{profile}", latency.line())
        };
        Ok((text, expectation))
    }

    /// Function `func` of `model` compiled for `--backend=x86` (`None` for
    /// the interpreter), its host calls running with contexts of every
    /// registered dialect and the run's kernels; the note naming them goes
    /// to `err`.
    fn compiled(
        &self,
        cli: &RunCli,
        model: &Model,
        func: &str,
        err: &mut dyn Write,
    ) -> Result<Option<Compiled>, Failure> {
        if cli.backend == Backend::Interp {
            return Ok(None);
        }
        let compiled = Compiled::new(model, func, cli.target_cpu, (&self.driver, &self.kernels))?;
        if let Some(note) = compiled.host_call_note(model) {
            let _ = writeln!(err, "{note}");
        }
        Ok(Some(compiled))
    }

    /// The engines `--batch` chunks run on: interpreters on every core, or
    /// compiled code on as many workers as `--threads` leaves cores for.
    fn engines<'m>(
        &'m self,
        cli: &RunCli,
        model: &'m Model,
        compiled: Option<&'m Compiled>,
        chunks: usize,
    ) -> Vec<Engine<'m>> {
        let threads = cli.threads as usize;
        match compiled {
            None => (0..parallel::threads().min(chunks))
                .map(|_| Engine::interpreter(model, &self.kernels))
                .collect(),
            Some(compiled) => (0..(parallel::threads() / threads).clamp(1, chunks.max(1)))
                .map(|_| Engine::Compiled { compiled, workspace: Workspace::new(), threads })
                .collect(),
        }
    }

    /// Runs both models of `pair` on every chunk and merges the comparisons.
    fn compare(
        &self,
        cli: &RunCli,
        pair: &Pair<'_>,
        samples: &Samples,
        err: &mut dyn Write,
    ) -> Result<Comparison, Failure> {
        let (a, b) = (pair.reference, pair.other);
        let compiled = self.compiled(cli, b, &pair.other_sig.func, err)?;
        let others = self.engines(cli, b, compiled.as_ref(), samples.chunks());
        let mut workers: Vec<_> = others
            .into_iter()
            .map(|other| (Interpreter::new(&a.ctx, &a.module, &self.kernels), other))
            .collect();
        let progress = Progress::new(samples.chunks(), "batches").with_label("qrun");
        let per_run = parallel::run_chunks(&mut workers, samples.chunks(), &progress, |(a, b), i| {
            let inputs = samples.chunk(i)?;
            pair.compare_run(a, b, &inputs, samples.describe(i), |m, e| m.failure(samples.describe(i), &e))
        });
        progress.finish();
        let mut runs = per_run?.into_iter();
        let mut cmp = runs.next().unwrap_or_default();
        for more in runs {
            cmp.merge(more);
        }
        Ok(cmp)
    }
}

/// `"s"` unless `n` is 1.
fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// Runs every chunk of `samples` and returns the (stacked) outputs.
fn run_all(
    workers: &mut [Engine<'_>],
    model: &Model,
    sig: &Signature,
    samples: &Samples,
    progress: &Progress,
) -> Result<Vec<Tensor>, String> {
    let runs = parallel::run_chunks(workers, samples.chunks(), progress, |engine, i| {
        let inputs = samples.chunk(i)?;
        engine.run(model, &sig.func, &inputs, samples.describe(i))
    })?;
    match samples {
        Samples::Whole(_) => Ok(runs.into_iter().next().unwrap_or_default()),
        Samples::Batched { .. } => samples::stack(runs),
    }
}

/// Writes `outputs` to `path` atomically: a `.npy` (by its extension) of the
/// one output, otherwise a `.npz` whose members are named by `names`. A
/// `.npy` path for several outputs is refused, since one array cannot hold
/// them.
fn write_outputs(path: &Path, outputs: &[Tensor], names: &[String]) -> Result<(), String> {
    let npy_path = path.extension().is_some_and(|e| e.eq_ignore_ascii_case("npy"));
    let written = match (npy_path, outputs) {
        (true, [one]) => write_file_atomically(path, |w| npy::write_npy(&one.to_raw(), w)),
        (true, several) => {
            return Err(format!(
                "cannot write '{}': a .npy file holds one array, and the function returns {} outputs; \
                 name an .npz file to get them all",
                path.display(),
                several.len()
            ))
        }
        (false, _) => {
            let arrays: Vec<(String, RawArray)> =
                outputs.iter().zip(names).map(|(t, name)| (name.clone(), t.to_raw())).collect();
            write_file_atomically(path, |w| npy::write_npz(&arrays, w))
        }
    };
    written.map_err(|e| format!("cannot write '{}': {e}", path.display()))
}
