//! The C entry of the static library: [`qopt_host_call`], which the entry
//! points of a `qcompile` object call for each op the program runs in the
//! interpreter. Each program's host module is parsed once per process (the
//! runners are cached by the address of its text, and a hit is checked
//! against the text itself, so a library unloaded and another loaded at the
//! same address is parsed anew) in a context with the fp and qnn dialects,
//! and its ops run with the interpreter's standard kernels.

use crate::descriptor::HostCallDescriptor;
use crate::runner::{with_default_float_environment, HostRunner};
use qopt_interp::KernelRegistry;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// The symbol of [`qopt_host_call`], which objects with host calls import.
pub const HOST_CALL_SYMBOL: &str = "qopt_host_call";

/// What [`qopt_host_call`] returns when the op ran.
pub const HOST_CALL_OK: i32 = 0;
/// What it returns when the op failed (the message went to standard error).
pub const HOST_CALL_FAILED: i32 = 1;

/// A parsed host module and the text it was parsed from.
type CachedRunner = (Box<[u8]>, Arc<HostRunner>);

/// Runners by the address of their program's host module text.
fn runners() -> &'static Mutex<HashMap<usize, CachedRunner>> {
    static RUNNERS: OnceLock<Mutex<HashMap<usize, CachedRunner>>> = OnceLock::new();
    RUNNERS.get_or_init(Default::default)
}

/// The runner of the host module at `text` (`len` bytes), parsed on first use.
fn runner(text: *const u8, len: usize) -> Result<Arc<HostRunner>, String> {
    // SAFETY: the descriptor the compiler wrote gives the text's place and
    // length within the program's read-only data.
    let bytes = unsafe { std::slice::from_raw_parts(text, len) };
    let mut cache = runners().lock().unwrap_or_else(|e| e.into_inner());
    if let Some((cached, r)) = cache.get(&(text as usize)) {
        if **cached == *bytes {
            return Ok(Arc::clone(r));
        }
    }
    let text = std::str::from_utf8(bytes).map_err(|_| "the host module is not UTF-8".to_string())?;
    let runner = Arc::new(HostRunner::new(qopt_dialect_qnn::context(), text, KernelRegistry::standard())?);
    cache.insert(text.as_ptr() as usize, (bytes.into(), Arc::clone(&runner)));
    Ok(runner)
}

/// Runs the host call described at `descriptor` on one run's buffers:
/// `arena`, `rodata` (the program's read-only data) and the io table `io`.
/// Returns [`HOST_CALL_OK`], or [`HOST_CALL_FAILED`] after printing why to
/// standard error.
///
/// # Safety
/// Only the entry points of a qcompile object call it, with a descriptor of
/// their program's read-only data and the bases and io table they pass
/// their kernels.
#[no_mangle]
pub unsafe extern "C" fn qopt_host_call(
    descriptor: *const u8,
    arena: *mut u8,
    rodata: *const u8,
    io: *const *mut u8,
) -> i32 {
    let run = || -> Result<(), String> {
        // SAFETY: the caller passes a descriptor the compiler wrote.
        let call = unsafe { HostCallDescriptor::decode(descriptor) }?;
        // SAFETY: the descriptor places the text within the read-only data.
        let runner = runner(unsafe { rodata.add(call.text_offset) }, call.text_len)?;
        // SAFETY: the compiler planned these places for these buffers, and
        // the entry point runs one step at a time.
        unsafe { runner.run(&call, (arena, rodata, io)) }
    };
    // Everything, parsing included, in the default MXCSR; the caller's
    // (control bits and exception flags) is given back.
    match with_default_float_environment(|| std::panic::catch_unwind(run)) {
        Ok(Ok(())) => HOST_CALL_OK,
        Ok(Err(message)) => {
            eprintln!("qopt host call: {message}");
            HOST_CALL_FAILED
        }
        Err(_) => {
            eprintln!("qopt host call: the interpreter panicked");
            HOST_CALL_FAILED
        }
    }
}
