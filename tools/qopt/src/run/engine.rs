//! Where a function runs (`--backend`): the reference interpreter, or the
//! same function compiled to x86-64 code by `qopt-codegen-x86` and run in
//! process through the JIT, on `--threads` threads per run.
//!
//! Both take and give the interpreter's tensors, so every mode of the run
//! driver (plain runs, `--batch`, `--bench`, `--compare`) works with either.
//! Compiled code exposes only the function's outputs: a `--compare` whose
//! other model is compiled compares outputs only.
//!
//! Ops the backend does not compile (float islands such as a trailing
//! softmax, 16-bit storage, downstream ops without a lowering) run in the
//! interpreter's kernels by host calls between the compiled ones; one note
//! on standard error names each ([`Compiled::new`]).

use super::model::Model;
use crate::Driver;
use qopt_codegen_x86::{
    compile, CodegenError, CodegenErrorKind, JitModule, Lowerings, Target, TargetCpu, Workspace,
};
use qopt_interp::{Interpreter, KernelRegistry, Tensor};

/// The `--backend` choice.
#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Backend {
    /// The reference interpreter.
    Interp,
    /// x86-64 machine code through the JIT (bit-exact with the interpreter).
    X86,
}

/// A model compiled for this CPU.
pub(crate) struct Compiled {
    pub jit: JitModule,
    /// How long compiling and mapping took.
    pub compile_time: std::time::Duration,
}

impl Compiled {
    /// Compiles function `func` of `model` for `cpu`, which this CPU must
    /// run; its host calls parse their ops in a context with the dialects of
    /// `driver` and run with `kernels`.
    pub fn new(
        model: &Model,
        func: &str,
        cpu: TargetCpu,
        (driver, kernels): (&Driver, &KernelRegistry),
    ) -> Result<Compiled, String> {
        let start = std::time::Instant::now();
        let build = || -> Result<JitModule, CodegenError> {
            let target = Target::for_running(cpu)?;
            let program = compile(&model.ctx, &model.module, func, &Lowerings::of(&model.ctx), &target)?;
            JitModule::with_host_context(program, || driver.new_context(), kernels.clone())
        };
        let jit = build().map_err(|e| match e.kind {
            CodegenErrorKind::Unsupported => format!(
                "{}: {e}\n  (the interpreter runs every op: leave out --backend=x86 to run the model there)",
                model.name
            ),
            _ => format!("{}: {e}", model.name),
        })?;
        Ok(Compiled { jit, compile_time: start.elapsed() })
    }

    /// The note naming the ops that run by host calls, if any.
    pub fn host_call_note(&self, model: &Model) -> Option<String> {
        let host_ops = &self.jit.program().host_ops;
        if host_ops.is_empty() {
            return None;
        }
        let ops: Vec<String> =
            host_ops.iter().map(|op| format!("  {}: {}", op.describe, op.reason)).collect();
        Some(format!(
            "note: {}: {} op{} run{} in the interpreter by host calls (the rest is x86 code):\n{}",
            model.name,
            ops.len(),
            if ops.len() == 1 { "" } else { "s" },
            if ops.len() == 1 { "s" } else { "" },
            ops.join("\n")
        ))
    }
}

/// One worker's way of running the function.
pub(crate) enum Engine<'m> {
    /// The interpreter, with its plan and constant caches.
    Interpreter(Interpreter<'m>),
    /// Compiled code, with this worker's arena.
    Compiled { compiled: &'m Compiled, workspace: Workspace, threads: usize },
}

impl<'m> Engine<'m> {
    /// An interpreter of `model` with `kernels`.
    pub fn interpreter(model: &'m Model, kernels: &'m KernelRegistry) -> Engine<'m> {
        Engine::Interpreter(Interpreter::new(&model.ctx, &model.module, kernels))
    }

    /// Runs `func` on `inputs`; a failure names the model, the samples
    /// (`during`) and, from the interpreter, the op.
    pub fn run(
        &mut self,
        model: &Model,
        func: &str,
        inputs: &[Tensor],
        during: Option<String>,
    ) -> Result<Vec<Tensor>, String> {
        match self {
            Engine::Interpreter(interpreter) => {
                interpreter.run(func, inputs).map_err(|e| model.failure(during, &e))
            }
            Engine::Compiled { compiled, workspace, threads } => {
                compiled.jit.run_tensors(inputs, workspace, *threads).map_err(|e| {
                    let during = during.map(|d| format!(" ({d})")).unwrap_or_default();
                    format!("{}{during}: compiled code: {e}", model.name)
                })
            }
        }
    }
}
