//! Running a [`Program`] in this process: [`JitModule`] maps the code read +
//! execute and the rodata read-only, checks the caller's buffers against the
//! program's signature, and calls the kernels in order over a
//! [`Workspace`] (the activation arena), on one thread or several.
//!
//! With several threads, each kernel's work items are split into one
//! contiguous range per thread and every thread waits for the others before
//! the next kernel starts (kernels read what earlier kernels wrote).

use crate::abi::BUFFER_ALIGN;
use crate::buffer::{Elements, ElementsMut};
use crate::error::{CodegenError, CodegenErrorKind};
use crate::jit::ExecutableCode;
use crate::module::Program;
use crate::target::CpuFeatures;
use memmap2::{Mmap, MmapMut};

/// A program mapped into memory, ready to run.
#[derive(Debug)]
pub struct JitModule {
    program: Program,
    code: Option<ExecutableCode>,
    rodata: Mmap,
}

/// The activation arena a [`JitModule`] runs in; keep one per thread of
/// callers and reuse it across runs.
#[derive(Debug, Default)]
pub struct Workspace {
    blocks: Vec<ArenaBlock>,
}

#[repr(C, align(64))]
#[derive(Copy, Clone, Debug)]
struct ArenaBlock([u8; BUFFER_ALIGN]);

impl Workspace {
    /// An empty workspace; it grows on first use.
    pub fn new() -> Workspace {
        Workspace::default()
    }

    fn arena(&mut self, bytes: usize) -> Result<*mut u8, CodegenError> {
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
    /// Maps `program`. Its code must only use features this CPU has.
    pub fn new(program: Program) -> Result<JitModule, CodegenError> {
        let missing = program.target.features.missing_from(&CpuFeatures::host());
        if missing != CpuFeatures::NONE {
            return Err(CodegenError::new(
                CodegenErrorKind::MissingCpuFeatures,
                format!("the program was compiled for {missing}, which this CPU lacks"),
            ));
        }
        let code = if program.code.is_empty() { None } else { Some(ExecutableCode::new(&program.code)?) };
        let memory =
            |e: std::io::Error| CodegenError::new(CodegenErrorKind::Memory, format!("mapping rodata: {e}"));
        let mut rodata = MmapMut::map_anon(program.rodata.len().max(1)).map_err(memory)?;
        rodata[..program.rodata.len()].copy_from_slice(&program.rodata);
        let rodata = rodata.make_read_only().map_err(memory)?;
        Ok(JitModule { program, code, rodata })
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
        for (i, (x, sig)) in inputs.iter().zip(&p.inputs).enumerate() {
            if x.element_type() != sig.element || x.len() != sig.len() {
                return Err(bad(format!(
                    "input {i} must hold {} {} elements ({}), got {} {}",
                    sig.len(),
                    sig.element,
                    sig.type_text,
                    x.len(),
                    x.element_type()
                )));
            }
        }
        for (j, (y, sig)) in outputs.iter().zip(&p.outputs).enumerate() {
            if y.element_type() != sig.element || y.len() != sig.len() {
                return Err(bad(format!(
                    "output {j} must hold {} {} elements ({}), got {} {}",
                    sig.len(),
                    sig.element,
                    sig.type_text,
                    y.len(),
                    y.element_type()
                )));
            }
        }
        let mut io: Vec<*mut u8> = inputs.iter().map(|x| x.as_ptr().cast_mut()).collect();
        io.extend(outputs.iter_mut().map(|y| y.as_mut_ptr()));
        let arena = workspace.arena(p.arena_bytes)?;
        let call = Call {
            code: self.code.as_ref().map_or(std::ptr::null(), |c| c.entry()),
            arena,
            rodata: self.rodata.as_ptr(),
            io: &io,
        };
        let threads = threads.max(1);
        if threads == 1 {
            for k in &p.kernels {
                call.kernel(k.offset, 0, k.work);
            }
            return Ok(());
        }
        let barrier = std::sync::Barrier::new(threads);
        let worker = |t: usize| {
            for k in &p.kernels {
                let (begin, end) = (k.work * t / threads, k.work * (t + 1) / threads);
                call.kernel(k.offset, begin, end);
                barrier.wait();
            }
        };
        std::thread::scope(|s| {
            for t in 1..threads {
                let worker = &worker;
                s.spawn(move || worker(t));
            }
            worker(0);
        });
        Ok(())
    }
}

/// The pointers one run passes to every kernel.
struct Call<'a> {
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
