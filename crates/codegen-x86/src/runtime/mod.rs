//! Running a [`Program`] in this process: [`JitModule`] maps the code read +
//! execute and the rodata read-only between guard pages, checks the caller's buffers against the
//! program's signature, and calls the kernels in order over a
//! [`Workspace`] (the activation arena), on one thread or several.
//!
//! With several threads, each kernel's work items are split into one
//! contiguous range per thread and every thread waits for the others before
//! the next kernel starts (kernels read what earlier kernels wrote). The
//! threads are the workspace's pool (`runtime/threads.rs`), started on the first
//! multi-threaded run and kept until the workspace is dropped.

pub(crate) mod clock;
pub(crate) mod executable;
pub(crate) mod guard;
pub(crate) mod tensors;
pub(crate) mod threads;

use crate::abi::BUFFER_ALIGN;
use crate::buffer::{Elements, ElementsMut};
use crate::error::{CodegenError, CodegenErrorKind};
use crate::module::{KernelEntry, Program};
use crate::runtime::executable::ExecutableCode;
use crate::runtime::guard::{GuardSide, GuardedRegion};
use crate::runtime::threads::{SpinBarrier, WorkerPool};
use crate::target::CpuFeatures;
use qopt_host_calls::{HostCallDescriptor, HostRunner};
use qopt_interp::KernelRegistry;
use qopt_ir_core::Context;
use std::time::{Duration, Instant};

/// A program mapped into memory, ready to run.
#[derive(Debug)]
pub struct JitModule {
    program: Program,
    code: Option<ExecutableCode>,
    rodata: GuardedRegion,
    /// Runs the program's host calls, when it has any.
    host: Option<HostRunner>,
    /// The kernels between barriers with several threads, in order: a run
    /// of serial kernels ([`KernelEntry::serial`]) is one segment, any other
    /// kernel one of its own. Empty when every kernel is serial: then more
    /// threads gain nothing and the caller's thread runs them all.
    segments: Vec<std::ops::Range<usize>>,
}

/// The `segments` of a [`JitModule`] running `kernels`.
fn barrier_segments(kernels: &[KernelEntry]) -> Vec<std::ops::Range<usize>> {
    if kernels.iter().all(|k| k.serial) {
        return Vec::new();
    }
    let mut segments = Vec::new();
    let mut start = 0;
    while start < kernels.len() {
        let n = match kernels[start].serial {
            true => kernels[start..].iter().take_while(|k| k.serial).count(),
            false => 1,
        };
        segments.push(start..start + n);
        start += n;
    }
    segments
}

/// The activation arena a [`JitModule`] runs in; keep one per thread of
/// callers and reuse it across runs.
#[derive(Debug, Default)]
pub struct Workspace {
    blocks: Vec<ArenaBlock>,
    /// Set by [`Workspace::guarded`]: the arena sits between guard pages.
    guarded: Option<Option<GuardedRegion>>,
    /// The threads of multi-threaded runs, kept between runs.
    pool: Option<WorkerPool>,
}

#[repr(C, align(64))]
#[derive(Copy, Clone, Debug)]
struct ArenaBlock([u8; BUFFER_ALIGN]);

impl Workspace {
    /// An empty workspace; it grows on first use.
    pub fn new() -> Workspace {
        Workspace::default()
    }

    /// A workspace whose arena ends flush against an inaccessible guard page
    /// (and has one before it), so a kernel that overruns the arena faults.
    /// For tests and debugging; runs are as fast.
    pub fn guarded() -> Workspace {
        Workspace { blocks: Vec::new(), guarded: Some(None), pool: None }
    }

    /// The pool for `threads` threads, started on first use.
    fn pool(&mut self, threads: usize) -> Result<&WorkerPool, CodegenError> {
        let pool = match self.pool.take() {
            Some(pool) if pool.threads() == threads => pool,
            // A pool of another size is dropped (its threads joined) first.
            _ => WorkerPool::new(threads).map_err(|e| {
                CodegenError::new(CodegenErrorKind::Memory, format!("cannot start {threads} threads: {e}"))
            })?,
        };
        Ok(self.pool.insert(pool))
    }

    fn arena(&mut self, bytes: usize) -> Result<*mut u8, CodegenError> {
        if let Some(region) = &mut self.guarded {
            if region.as_ref().is_none_or(|r| r.len() != bytes) {
                *region = Some(GuardedRegion::new(bytes, GuardSide::End { align: BUFFER_ALIGN })?);
            }
            return Ok(region.as_ref().map_or(std::ptr::null_mut(), GuardedRegion::as_mut_ptr));
        }
        let blocks = bytes.div_ceil(BUFFER_ALIGN);
        if self.blocks.len() < blocks {
            let more = blocks - self.blocks.len();
            self.blocks.try_reserve_exact(more).map_err(|_| {
                CodegenError::new(
                    CodegenErrorKind::Memory,
                    format!("cannot allocate an arena of {bytes} bytes"),
                )
            })?;
            self.blocks.resize(blocks, ArenaBlock([0; BUFFER_ALIGN]));
        }
        Ok(self.blocks.as_mut_ptr().cast())
    }
}

impl JitModule {
    /// Maps `program`. Its code must only use features this CPU has. Its
    /// host calls (if any) run the ops of the fp and qnn dialects with the
    /// interpreter's standard kernels.
    pub fn new(program: Program) -> Result<JitModule, CodegenError> {
        JitModule::with_host_context(program, || Ok(qopt_dialect_qnn::context()), KernelRegistry::standard())
    }

    /// [`JitModule::new`] with the context its host calls parse their ops in
    /// (made by `context` when the program has host calls: it must have
    /// their dialects) and the kernels they run with: what a driver with
    /// dialects of its own passes.
    pub fn with_host_context(
        program: Program,
        context: impl FnOnce() -> Result<Context, String>,
        kernels: KernelRegistry,
    ) -> Result<JitModule, CodegenError> {
        let host = match program.host_ops.is_empty() {
            true => None,
            false => Some(
                context()
                    .and_then(|ctx| HostRunner::new(ctx, &program.host_module, kernels))
                    .map_err(|m| CodegenError::new(CodegenErrorKind::InvalidInput, m))?,
            ),
        };
        let missing = program.target.features.missing_from(&CpuFeatures::host());
        if missing != CpuFeatures::NONE {
            return Err(CodegenError::new(
                CodegenErrorKind::MissingCpuFeatures,
                format!("the program was compiled for {missing}, which this CPU lacks"),
            ));
        }
        let code = if program.code.is_empty() { None } else { Some(ExecutableCode::new(&program.code)?) };
        let mut rodata = GuardedRegion::new(program.rodata.len(), GuardSide::Start)?;
        rodata.as_mut_slice().copy_from_slice(&program.rodata);
        rodata.make_read_only()?;
        let segments = barrier_segments(&program.kernels);
        Ok(JitModule { program, code, rodata, host, segments })
    }

    /// The program it runs.
    pub fn program(&self) -> &Program {
        &self.program
    }

    /// Runs the program on `inputs`, writing `outputs`, on `threads` threads
    /// (1 runs on the caller's). Buffers must match the program's signature
    /// in number, element type and length.
    pub fn run(
        &self,
        inputs: &[Elements<'_>],
        outputs: &mut [ElementsMut<'_>],
        workspace: &mut Workspace,
        threads: usize,
    ) -> Result<(), CodegenError> {
        let io = self.bind(inputs, outputs)?;
        let call = self.call(&io, workspace)?;
        let kernels = &self.program.kernels;
        let threads = if self.segments.is_empty() { 1 } else { threads.max(1) };
        if threads == 1 {
            for k in kernels {
                call.step(k, 0, 1)?;
            }
            return Ok(());
        }
        let barrier = SpinBarrier::new(threads);
        let failure = std::sync::Mutex::new(None);
        let worker = |t: usize| {
            for segment in &self.segments {
                for k in &kernels[segment.clone()] {
                    if let Err(e) = call.share(k, t, threads) {
                        failure.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(e);
                    }
                }
                barrier.wait();
            }
        };
        workspace.pool(threads)?.run(&worker);
        failure.into_inner().unwrap_or_else(|e| e.into_inner()).map_or(Ok(()), Err)
    }

    /// Runs the program `runs` times on `threads` threads and returns the
    /// total time spent in each kernel, in the order of
    /// [`Program::kernels`]. With several threads a kernel's time is the
    /// caller's from the barrier before it to the barrier after it, so it
    /// counts the wait for the slowest thread.
    pub fn profile(
        &self,
        inputs: &[Elements<'_>],
        outputs: &mut [ElementsMut<'_>],
        workspace: &mut Workspace,
        (runs, threads): (usize, usize),
    ) -> Result<Vec<Duration>, CodegenError> {
        let io = self.bind(inputs, outputs)?;
        let call = self.call(&io, workspace)?;
        let kernels = &self.program.kernels;
        let mut times = vec![Duration::ZERO; kernels.len()];
        let threads = threads.max(1);
        if threads == 1 {
            for _ in 0..runs {
                for (k, time) in kernels.iter().zip(&mut times) {
                    let start = Instant::now();
                    call.step(k, 0, 1)?;
                    *time += start.elapsed();
                }
            }
            return Ok(times);
        }
        let barrier = SpinBarrier::new(threads);
        let failure = std::sync::Mutex::new(None);
        let timed = std::sync::Mutex::new(std::mem::take(&mut times));
        let worker = |t: usize| {
            let mut mine = (t == 0).then(|| timed.lock().unwrap_or_else(|e| e.into_inner()));
            barrier.wait();
            let mut start = Instant::now();
            for (i, k) in kernels.iter().enumerate() {
                if let Err(e) = call.share(k, t, threads) {
                    failure.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(e);
                }
                barrier.wait();
                if let Some(times) = mine.as_mut() {
                    let now = Instant::now();
                    times[i] += now - start;
                    start = now;
                }
            }
        };
        let pool = workspace.pool(threads)?;
        for _ in 0..runs {
            pool.run(&worker);
        }
        if let Some(e) = failure.into_inner().unwrap_or_else(|e| e.into_inner()) {
            return Err(e);
        }
        Ok(timed.into_inner().unwrap_or_else(|e| e.into_inner()))
    }

    /// The io table of `inputs` and `outputs`, checked against the signature.
    fn bind(
        &self,
        inputs: &[Elements<'_>],
        outputs: &mut [ElementsMut<'_>],
    ) -> Result<Vec<*mut u8>, CodegenError> {
        let bad = |m: String| CodegenError::new(CodegenErrorKind::BadArguments, m);
        let p = &self.program;
        if inputs.len() != p.inputs.len() || outputs.len() != p.outputs.len() {
            return Err(bad(format!(
                "@{} takes {} inputs and {} outputs, got {} and {}",
                p.function,
                p.inputs.len(),
                p.outputs.len(),
                inputs.len(),
                outputs.len()
            )));
        }
        let check = |what: &str, i: usize, element, len, sig: &crate::module::TensorSignature| {
            if element != sig.element || len != sig.len() {
                return Err(bad(format!(
                    "{what} {i} must hold {} {} elements ({}), got {len} {element}",
                    sig.len(),
                    sig.element,
                    sig.type_text
                )));
            }
            Ok(())
        };
        for (i, (x, sig)) in inputs.iter().zip(&p.inputs).enumerate() {
            check("input", i, x.element_type(), x.len(), sig)?;
        }
        for (j, (y, sig)) in outputs.iter().zip(&p.outputs).enumerate() {
            check("output", j, y.element_type(), y.len(), sig)?;
        }
        let mut io: Vec<*mut u8> = inputs.iter().map(|x| x.as_ptr().cast_mut()).collect();
        io.extend(outputs.iter_mut().map(|y| y.as_mut_ptr()));
        Ok(io)
    }

    fn call<'a>(&'a self, io: &'a [*mut u8], workspace: &mut Workspace) -> Result<Call<'a>, CodegenError> {
        Ok(Call {
            program: &self.program,
            host: self.host.as_ref(),
            code: self.code.as_ref().map_or(std::ptr::null(), |c| c.entry()),
            arena: workspace.arena(self.program.arena_bytes)?,
            rodata: self.rodata.as_mut_ptr().cast_const(),
            io,
        })
    }
}

/// The pointers one run passes to every kernel.
struct Call<'a> {
    program: &'a Program,
    host: Option<&'a HostRunner>,
    code: *const u8,
    arena: *mut u8,
    rodata: *const u8,
    io: &'a [*mut u8],
}

// SAFETY: the pointers are only passed to kernels, which by the convention of
// abi.rs write disjoint bytes for disjoint work ranges; the buffers outlive
// the scope the threads run in.
unsafe impl Sync for Call<'_> {}

impl Call<'_> {
    /// Thread `t` of `threads`' share of step `k`: [`step`](Self::step),
    /// or for a serial kernel all of it on thread 0 and nothing elsewhere.
    fn share(&self, k: &KernelEntry, t: usize, threads: usize) -> Result<(), CodegenError> {
        match (k.serial, t) {
            (true, 0) => self.step(k, 0, 1),
            (true, _) => Ok(()),
            (false, _) => self.step(k, t, threads),
        }
    }

    /// Thread `t` of `threads`' share of step `k`: its range of the
    /// kernel's work items, or the whole host call on thread 0.
    fn step(&self, k: &KernelEntry, t: usize, threads: usize) -> Result<(), CodegenError> {
        let Some(i) = k.host else {
            self.kernel(k.offset, k.work * t / threads, k.work * (t + 1) / threads);
            return Ok(());
        };
        if t != 0 {
            return Ok(());
        }
        let (Some(host), Some(op)) = (self.host, self.program.host_ops.get(i)) else {
            return Err(CodegenError::new(CodegenErrorKind::InvalidInput, "a host call without its op"));
        };
        let failed =
            |m: String| CodegenError::new(CodegenErrorKind::HostCall, format!("{}: {m}", op.describe));
        // SAFETY: the module compiler wrote the op's descriptor at this
        // offset of the rodata, gave its operands and results places of
        // their types' sizes (results in the arena or the outputs, apart
        // from its operands); `run` checked the io buffers against the
        // signature, the arena holds `arena_bytes`, and the other threads
        // wait at the barrier while thread 0 runs it.
        unsafe {
            let call = HostCallDescriptor::decode(self.rodata.add(op.descriptor)).map_err(failed)?;
            host.run(&call, (self.arena, self.rodata, self.io.as_ptr())).map_err(failed)
        }
    }

    fn kernel(&self, offset: usize, begin: usize, end: usize) {
        if begin >= end {
            return;
        }
        #[cfg(target_arch = "x86_64")]
        // SAFETY: JitModule::new mapped the program's code, which the module
        // compiler laid out with a kernel at `offset`, and checked that this
        // CPU has every feature the target allows; `run` checked that the io
        // buffers match the signature, the arena holds `arena_bytes`, and
        // rodata holds the program's rodata, which is every byte the
        // kernels address.
        unsafe {
            crate::abi::call_kernel(self.code.add(offset), self.arena, self.rodata, self.io, begin, end);
        }
    }
}
