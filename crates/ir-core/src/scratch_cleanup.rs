//! Scratch files removed when the process is interrupted. A [`ScratchGuard`]
//! registers a file (or an empty-once-cleaned directory) for as long as it
//! lives; the first guard installs handlers for SIGINT, SIGTERM and SIGHUP
//! (only where the signal still has its default action, so a program's own
//! handler is left alone) that unlink every registered file, then remove
//! every registered directory, and then die of the same signal, as if no
//! handler had run. So `^C` during `qopt big.qir -o out.qir` leaves neither a
//! half-written `out.qir` (it is written atomically) nor its temporary file.
//!
//! The handler may only do what is async-signal-safe: it reads fixed tables
//! of atomic pointers to C strings and calls `unlink` and `rmdir`. A
//! registered string is never freed (a guard leaks its few bytes), because a
//! handler running on another thread may still be reading it. Past 256 files
//! or 16 directories at once, further paths are not guarded.

use std::path::Path;

/// Keeps `path` registered for removal on an interrupt until dropped.
pub struct ScratchGuard {
    #[cfg(unix)]
    slot: Option<usize>,
}

impl ScratchGuard {
    /// Registers the file `path`.
    pub fn new(path: &Path) -> ScratchGuard {
        ScratchGuard::register(path, false)
    }

    /// Registers the directory `path`, removed after the files (so it must
    /// hold only guarded files).
    pub fn directory(path: &Path) -> ScratchGuard {
        ScratchGuard::register(path, true)
    }

    fn register(path: &Path, directory: bool) -> ScratchGuard {
        #[cfg(unix)]
        {
            ScratchGuard { slot: unix::register(path, directory) }
        }
        #[cfg(not(unix))]
        {
            let _ = (path, directory);
            ScratchGuard {}
        }
    }
}

impl Drop for ScratchGuard {
    fn drop(&mut self) {
        #[cfg(unix)]
        if let Some(slot) = self.slot {
            unix::unregister(slot);
        }
    }
}

/// Runs `steps` with the interrupt cleanup held back: a SIGINT, SIGTERM or
/// SIGHUP arriving meanwhile removes the registered files and ends the
/// process only once `steps` has returned (and only if no other deferral is
/// still running). Keep `steps` short: the process does not stop meanwhile.
pub fn with_interrupts_deferred<T>(steps: impl FnOnce() -> T) -> T {
    #[cfg(unix)]
    {
        let _deferred = unix::Deferral::begin();
        steps()
    }
    #[cfg(not(unix))]
    {
        steps()
    }
}

#[cfg(unix)]
mod unix {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    use std::path::Path;
    use std::ptr::null_mut;
    use std::sync::atomic::{AtomicI32, AtomicPtr, AtomicUsize, Ordering};
    use std::sync::Once;

    /// Slots `0..FILES` hold files, the rest directories.
    const FILES: usize = 256;
    const SLOTS: usize = FILES + 16;
    static PATHS: [AtomicPtr<libc::c_char>; SLOTS] = [const { AtomicPtr::new(null_mut()) }; SLOTS];
    static INSTALL: Once = Once::new();
    /// How many [`Deferral`]s are alive.
    static DEFERRED: AtomicUsize = AtomicUsize::new(0);
    /// A signal that arrived during a deferral, 0 if none.
    static PENDING: AtomicI32 = AtomicI32::new(0);

    /// While alive, the handler notes signals in [`PENDING`] instead of
    /// acting; the last one to end acts on a noted signal.
    pub(super) struct Deferral;

    impl Deferral {
        pub(super) fn begin() -> Deferral {
            INSTALL.call_once(install_handlers);
            DEFERRED.fetch_add(1, Ordering::SeqCst);
            Deferral
        }
    }

    impl Drop for Deferral {
        fn drop(&mut self) {
            if DEFERRED.fetch_sub(1, Ordering::SeqCst) == 1 {
                let signal = PENDING.swap(0, Ordering::SeqCst);
                if signal != 0 {
                    clean_up_and_die(signal);
                }
            }
        }
    }

    pub(super) fn register(path: &Path, directory: bool) -> Option<usize> {
        INSTALL.call_once(install_handlers);
        let text = CString::new(path.as_os_str().as_bytes()).ok()?;
        let ptr = text.into_raw();
        let range = if directory { FILES..SLOTS } else { 0..FILES };
        let slot = range.into_iter().find(|&i| {
            PATHS[i].compare_exchange(null_mut(), ptr, Ordering::AcqRel, Ordering::Acquire).is_ok()
        });
        if slot.is_none() {
            // Never published, so no handler can be reading it.
            // SAFETY: `ptr` came from `CString::into_raw` just above.
            drop(unsafe { CString::from_raw(ptr) });
        }
        slot
    }

    pub(super) fn unregister(slot: usize) {
        // The string is leaked on purpose: see the module docs.
        PATHS[slot].store(null_mut(), Ordering::Release);
    }

    fn install_handlers() {
        for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            // SAFETY: sigaction with a zeroed struct as the query, and a
            // handler that only calls async-signal-safe functions.
            unsafe {
                let mut current: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(signal, std::ptr::null(), &mut current) != 0
                    || current.sa_sigaction != libc::SIG_DFL
                {
                    continue;
                }
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
                libc::sigemptyset(&mut action.sa_mask);
                libc::sigaction(signal, &action, std::ptr::null_mut());
            }
        }
    }

    extern "C" fn on_signal(signal: libc::c_int) {
        if DEFERRED.load(Ordering::SeqCst) > 0 {
            PENDING.store(signal, Ordering::SeqCst);
            // The deferral may have ended (on another thread) before the
            // store; then whichever side takes the noted signal acts on it.
            if DEFERRED.load(Ordering::SeqCst) > 0 || PENDING.swap(0, Ordering::SeqCst) == 0 {
                return;
            }
        }
        clean_up_and_die(signal);
    }

    /// Removes every registered file, then every registered directory, and
    /// ends the process with `signal`; async-signal-safe.
    fn clean_up_and_die(signal: libc::c_int) {
        for (i, slot) in PATHS.iter().enumerate() {
            let path = slot.load(Ordering::Acquire);
            if !path.is_null() {
                // SAFETY: registered strings are valid C strings and never freed.
                unsafe {
                    if i < FILES {
                        libc::unlink(path);
                    } else {
                        libc::rmdir(path);
                    }
                }
            }
        }
        // SAFETY: restoring the default action and raising the signal again;
        // it is blocked until this handler returns, then ends the process
        // with the status the signal gives.
        unsafe {
            libc::signal(signal, libc::SIG_DFL);
            libc::raise(signal);
        }
    }
}
