//! [`HostRunner`]: a program's host module parsed and ready, and each host
//! call's buffers read as the interpreter's tensors and written back.

use crate::descriptor::{HostCallDescriptor, HostPlace};
use qopt_interp::{DType, KernelRegistry, Tensor};
use qopt_ir_core::{function_signature, parse_module, type_to_string, Context, Module, OpView, Type};

/// The storage type and shape of one buffer of a host call.
#[derive(Clone, Debug)]
struct Buffer {
    dtype: DType,
    shape: Vec<usize>,
}

impl Buffer {
    fn of(ctx: &Context, ty: Type) -> Result<Buffer, String> {
        let shape = ctx
            .tensor_shape(ty)
            .and_then(|s| s.iter().map(|&d| usize::try_from(d).ok()).collect::<Option<Vec<_>>>())
            .ok_or_else(|| format!("{} is not a statically shaped tensor", type_to_string(ctx, ty)))?;
        Ok(Buffer { dtype: DType::of_element(ctx, ctx.element_type(ty))?, shape })
    }

    fn bytes(&self) -> usize {
        self.shape.iter().product::<usize>() * self.dtype.size()
    }
}

/// The bytes a buffer of `t`'s storage type holds for it (row-major).
pub fn tensor_bytes(t: &Tensor) -> Vec<u8> {
    t.to_raw().data
}

/// The tensor of storage type `dtype` and `shape` whose buffer holds
/// `bytes` (a boolean is any non-zero byte).
pub fn tensor_from_bytes(dtype: DType, shape: &[usize], bytes: &[u8]) -> Result<Tensor, String> {
    Tensor::from_le_bytes(dtype, shape, bytes).map_err(|e| e.to_string())
}

/// A program's host module parsed, with the buffers of each function, and
/// the kernels its ops run with.
pub struct HostRunner {
    ctx: Context,
    module: Module,
    kernels: KernelRegistry,
    /// Per `@host<N>`: its name, and its operands' and results' buffers.
    functions: Vec<(String, Vec<Buffer>, Vec<Buffer>)>,
}

impl std::fmt::Debug for HostRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostRunner").field("functions", &self.functions.len()).finish_non_exhaustive()
    }
}

impl HostRunner {
    /// Parses and verifies `text` (a program's host module) in `ctx`, which
    /// must have the dialects of its ops, to run with `kernels`.
    pub fn new(mut ctx: Context, text: &str, kernels: KernelRegistry) -> Result<HostRunner, String> {
        let module = parse_module(&mut ctx, text.as_bytes(), "host-calls.qir")
            .map_err(|e| format!("the host-call module does not parse: {e:?}"))?;
        qopt_ir_core::verify(&mut ctx, &module)
            .map_err(|e| format!("the host-call module does not verify: {e:?}"))?;
        let mut functions = Vec::new();
        loop {
            let name = format!("host{}", functions.len());
            let Some(func) = module.lookup_symbol(&ctx, &name) else { break };
            let (args, results) = function_signature(&OpView::new(&ctx, &module, func))?;
            let buffers =
                |types: &[Type]| types.iter().map(|&t| Buffer::of(&ctx, t)).collect::<Result<Vec<_>, _>>();
            functions.push((name, buffers(args)?, buffers(results)?));
        }
        Ok(HostRunner { ctx, module, kernels, functions })
    }

    /// Runs the host call `call` on the buffers of one run: each place
    /// resolved against `arena`, `rodata` and the io table `io` (of
    /// `call.io_slots` pointers).
    ///
    /// # Safety
    /// Every place of `call` must address a buffer of its function's type
    /// within the arena, the read-only data or the io table's buffers, the
    /// result buffers writable and overlapping no operand, and no other
    /// thread may touch them during the call.
    pub unsafe fn run(
        &self,
        call: &HostCallDescriptor,
        (arena, rodata, io): (*mut u8, *const u8, *const *mut u8),
    ) -> Result<(), String> {
        let (function, args, results) = self
            .functions
            .get(call.function)
            .ok_or_else(|| format!("the host module has no @host{}", call.function))?;
        if args.len() != call.operands.len() || results.len() != call.results.len() {
            return Err(format!("@{function}'s buffers do not match its host call"));
        }
        let address = |place: HostPlace| -> Result<*mut u8, String> {
            // SAFETY: the caller guarantees that the place is within these bases.
            Ok(unsafe {
                match place {
                    HostPlace::Arena(offset) => arena.add(offset),
                    HostPlace::Rodata(offset) => rodata.add(offset).cast_mut(),
                    HostPlace::Io(slot) if slot < call.io_slots => *io.add(slot),
                    HostPlace::Io(slot) => return Err(format!("io slot {slot} of {}", call.io_slots)),
                }
            })
        };
        let mut inputs = Vec::with_capacity(args.len());
        for (buffer, &place) in args.iter().zip(&call.operands) {
            // SAFETY: the caller guarantees the buffer's bytes at the place.
            let bytes = unsafe { std::slice::from_raw_parts(address(place)?, buffer.bytes()) };
            inputs.push(tensor_from_bytes(buffer.dtype, &buffer.shape, bytes)?);
        }
        let outputs = with_default_float_environment(|| {
            qopt_interp::run_function(&self.ctx, &self.module, function, &inputs, &self.kernels)
        })
        .map_err(|e| e.to_string())?;
        for ((buffer, &place), t) in results.iter().zip(&call.results).zip(&outputs) {
            let bytes = tensor_bytes(t);
            if bytes.len() != buffer.bytes() {
                return Err(format!(
                    "@{function} returned {} bytes where {} were planned",
                    bytes.len(),
                    buffer.bytes()
                ));
            }
            // SAFETY: the caller guarantees a writable buffer of this size
            // at the place, overlapping no operand.
            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), address(place)?, bytes.len()) };
        }
        Ok(())
    }
}

/// Runs `f` with MXCSR at its default (round to nearest even, no
/// flush-to-zero, no denormals-are-zero, every exception masked) and gives
/// the caller's back after: the interpreter's float arithmetic is defined in
/// that environment, and the caller of compiled code may have set another.
pub(crate) fn with_default_float_environment<T>(f: impl FnOnce() -> T) -> T {
    #[cfg(target_arch = "x86_64")]
    {
        const DEFAULT_MXCSR: u32 = 0x1F80;
        let mut caller: u32 = 0;
        // SAFETY: stmxcsr and ldmxcsr read and write only the given u32s;
        // 0x1F80 is the power-on MXCSR.
        unsafe {
            std::arch::asm!("stmxcsr [{}]", in(reg) &mut caller, options(nostack));
            std::arch::asm!("ldmxcsr [{}]", in(reg) &DEFAULT_MXCSR, options(nostack, readonly));
        }
        let result = f();
        // SAFETY: as above; restores the caller's value (its exception flags
        // as they were, too).
        unsafe { std::arch::asm!("ldmxcsr [{}]", in(reg) &caller, options(nostack, readonly)) };
        result
    }
    #[cfg(not(target_arch = "x86_64"))]
    f()
}
