//! Where a function runs (`--backend`): the reference interpreter, or the
//! same function compiled to x86-64 code by `qopt-codegen-x86` and run in
//! process through the JIT, on `--threads` threads per run.
//!
//! Both take and give the interpreter's tensors, so every mode of the run
//! driver (plain runs, `--batch`, `--bench`, `--compare`) works with either.
//! Compiled code exposes only the function's outputs: a `--compare` whose
//! other model is compiled compares outputs only.
//!
//! A model with quantized values stored in other than 8 bits (the i16 and i4
//! regions of mixed precision, `docs/quantization.md` §13), which the x86
//! backend does not compile yet, runs in the interpreter instead, after one
//! notice on standard error listing the ops the backend refused
//! ([`Compiled::new_or_fallback`]).

use super::model::Model;
use qopt_codegen_x86::{
    compile, CodegenError, CodegenErrorKind, JitModule, Lowerings, Target, TargetCpu, Workspace,
};
use qopt_interp::{Interpreter, KernelRegistry, Tensor};
use qopt_ir_core::{Traits, TypeData};

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
    /// run; or `None` when the backend refuses ops and the
    /// model stores quantized values in other than 8 bits (i16, i4: mixed
    /// precision): the caller runs the interpreter, and this prints one
    /// notice naming the refused ops and their locations.
    pub fn new_or_fallback(model: &Model, func: &str, cpu: TargetCpu) -> Result<Option<Compiled>, String> {
        match Compiled::build(model, func, cpu) {
            Ok(compiled) => Ok(Some(compiled)),
            Err(e) if e.kind == CodegenErrorKind::Unsupported && has_non_byte_storage(model) => {
                eprintln!(
                    "note: {}: the x86 backend does not compile quantized values stored in other than 8 bits \
                     (mixed precision) yet; running the model in the interpreter instead. {}",
                    model.name, e.message
                );
                Ok(None)
            }
            Err(e) if e.kind == CodegenErrorKind::Unsupported => Err(format!(
                "{}: {e}\n  (the interpreter runs every op: leave out --backend=x86 to run the model there)",
                model.name
            )),
            Err(e) => Err(format!("{}: {e}", model.name)),
        }
    }

    /// Compiles, without naming the model in errors.
    fn build(model: &Model, func: &str, cpu: TargetCpu) -> Result<Compiled, CodegenError> {
        let start = std::time::Instant::now();
        let target = Target::for_running(cpu)?;
        let program = compile(&model.ctx, &model.module, func, &Lowerings::of(&model.ctx), &target)?;
        let jit = JitModule::new(program)?;
        Ok(Compiled { jit, compile_time: start.elapsed() })
    }
}

/// Whether an op of `model` produces a tensor of quantized values stored in
/// other than 8 bits (constant 32-bit biases aside: the backend compiles
/// those; computed values in 32 bits it does not).
fn has_non_byte_storage(model: &Model) -> bool {
    let (ctx, module) = (&model.ctx, &model.module);
    module.walk_preorder(module.root()).any(|op| {
        let constant =
            ctx.op_def(module.op_name(op)).is_some_and(|d| d.traits.contains(Traits::CONSTANT_LIKE));
        module.results(op).any(|r| match ctx.type_data(ctx.element_type(module.value_type(r))) {
            TypeData::Quant(q) => q.storage.width != 8 && !(constant && q.storage.width == 32),
            _ => false,
        })
    })
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
