//! Writing output files atomically: a temporary file in the same directory,
//! renamed over the target only once everything was written, so a failed run
//! never leaves a half-written or clobbered output file. A target that exists
//! and is not a regular file (`/dev/null`, a pipe, a terminal) is written in
//! place: renaming over it would replace the device itself. A symbolic link
//! is followed: the temporary file goes beside the link's target and replaces
//! the target, so the link stays a link. The permissions of a file being
//! replaced are kept.
//!
//! Every tool's `-o` goes through [`write_file_atomically`], and so do passes
//! that write files (`collect-calibration-data`); [`scratch_path_beside`]
//! names the hidden scratch files and directories such writers keep beside
//! their target until they finish. The temporary file is also removed when
//! the process is interrupted by a signal ([`ScratchGuard`]).
//!
//! [`write_files_atomically`] writes a set of files that belong together (an
//! object file and the C header that describes it) as one unit: every file,
//! or none. Each is first written completely to its temporary file; only
//! then are they renamed over their targets, one after the other, with
//!
//! - an exclusive advisory lock (`flock`) held on every target's directory
//!   for the renames, so two processes writing the same set commit one
//!   after the other and the set last committed is whole: concurrent writers
//!   never leave one writer's object beside another's header. (Readers do
//!   not take the lock; one that opens the files in the microseconds between
//!   two renames of one commit can still see the old and the new file.)
//!   Locking the directories rather than a lock file leaves nothing behind;
//! - interrupts held back ([`with_interrupts_deferred`]) so a signal cannot
//!   stop the process between two renames;
//! - a rename that fails undoing the ones before it: each replaced file was
//!   kept as a hard link beside it and is put back, and a file that did not
//!   exist before is removed.
//!
//! A target that is a directory is refused before anything is written.

use crate::scratch_cleanup::{with_interrupts_deferred, ScratchGuard};
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A hidden path in `path`'s directory, `.<file name>.qopt-<tag>-<pid>`, for
/// scratch data that becomes `path` (same file system, so a rename is atomic).
pub fn scratch_path_beside(path: &Path, tag: &str) -> PathBuf {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "out".into());
    dir.join(format!(".{name}.qopt-{tag}-{}", std::process::id()))
}

/// Writes the bytes `produce` emits to `path` atomically.
pub fn write_file_atomically(
    path: &Path,
    produce: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    // Write through a symbolic link to the file it names.
    let resolved = std::fs::canonicalize(path).ok().filter(|_| path.is_symlink());
    let path = resolved.as_deref().unwrap_or(path);
    let existing = std::fs::metadata(path).ok();
    if let Some(meta) = &existing {
        if !meta.is_file() {
            let mut w =
                BufWriter::with_capacity(1 << 20, std::fs::OpenOptions::new().write(true).open(path)?);
            produce(&mut w)?;
            return w.flush();
        }
    }
    let tmp = scratch_path_beside(path, "tmp");
    let _interrupt_cleanup = ScratchGuard::new(&tmp);
    let result = (|| {
        let file = File::create(&tmp)?;
        let mut w = BufWriter::with_capacity(1 << 20, file);
        produce(&mut w)?;
        w.flush()?;
        let file = w.into_inner().map_err(|e| e.into_error())?;
        file.sync_data()
            .or_else(|e| if e.kind() == io::ErrorKind::InvalidInput { Ok(()) } else { Err(e) })?;
        if let Some(meta) = &existing {
            file.set_permissions(meta.permissions())?;
        }
        drop(file);
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Writes every `(path, bytes)` of `files` as one unit: all of them or, when
/// anything fails, none (see the module docs). Paths must differ. A target
/// that is a special file (`/dev/null`, a pipe) cannot be part of the unit:
/// it is written in place once every temporary file is complete, before the
/// renames. Symbolic links are followed and permissions kept, as by
/// [`write_file_atomically`].
pub fn write_files_atomically(files: &[(&Path, &[u8])]) -> io::Result<()> {
    let mut staged: Vec<Staged> = Vec::with_capacity(files.len());
    for &(path, _) in files {
        let resolved = std::fs::canonicalize(path).ok().filter(|_| path.is_symlink());
        let path = resolved.unwrap_or_else(|| path.to_path_buf());
        let existing = std::fs::metadata(&path).ok();
        if existing.as_ref().is_some_and(|m| m.is_dir()) {
            return Err(io::ErrorKind::IsADirectory.into());
        }
        staged.push(Staged { tmp: None, path, existing });
    }
    let mut guards = Vec::with_capacity(files.len());
    let written = (|| {
        for (stage, &(_, bytes)) in staged.iter_mut().zip(files) {
            if stage.existing.as_ref().is_some_and(|m| !m.is_file()) {
                continue;
            }
            let tmp = scratch_path_beside(&stage.path, &unique_tag("tmp"));
            guards.push(ScratchGuard::new(&tmp));
            stage.tmp = Some(tmp.clone());
            let mut file = File::create(&tmp)?;
            file.write_all(bytes)?;
            file.sync_data().or_else(|e| {
                if e.kind() == io::ErrorKind::InvalidInput {
                    Ok(())
                } else {
                    Err(e)
                }
            })?;
            if let Some(meta) = &stage.existing {
                file.set_permissions(meta.permissions())?;
            }
        }
        // A special file cannot be replaced, only written: first, outside the
        // lock and with signals acting at once (a pipe may block), so that a
        // failing one leaves the regular files as they were.
        for (stage, &(_, bytes)) in staged.iter().zip(files) {
            if stage.tmp.is_none() {
                std::fs::OpenOptions::new().write(true).open(&stage.path)?.write_all(bytes)?;
            }
        }
        let renamed = staged.iter().filter(|s| s.tmp.is_some());
        let _locks = lock_directories(renamed.map(|s| s.path.as_path()))?;
        with_interrupts_deferred(|| commit(&staged))
    })();
    for tmp in staged.iter().filter_map(|s| s.tmp.as_ref()) {
        if written.is_err() {
            let _ = std::fs::remove_file(tmp);
        }
    }
    drop(guards);
    written
}

/// `tag` and a number new in this process: scratch names of threads writing
/// the same target at once differ.
fn unique_tag(tag: &str) -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!("{tag}{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// One file of [`write_files_atomically`]: its target (a link resolved), what
/// was there, and the temporary file (none for a special file).
struct Staged {
    tmp: Option<PathBuf>,
    path: PathBuf,
    existing: Option<std::fs::Metadata>,
}

/// Renames every temporary file over its target; on a failure puts back
/// what the earlier renames replaced.
fn commit(staged: &[Staged]) -> io::Result<()> {
    // (target, its previous version kept as a hard link, if it existed)
    let mut done: Vec<(&Path, Option<PathBuf>)> = Vec::new();
    let mut result = Ok(());
    for stage in staged {
        let Some(tmp) = &stage.tmp else { continue };
        let backup = match &stage.existing {
            Some(_) => {
                let backup = scratch_path_beside(&stage.path, &unique_tag("old"));
                let _ = std::fs::remove_file(&backup);
                std::fs::hard_link(&stage.path, &backup).ok().map(|()| backup)
            }
            None => None,
        };
        if let Err(e) = std::fs::rename(tmp, &stage.path) {
            if let Some(backup) = backup {
                let _ = std::fs::remove_file(backup);
            }
            result = Err(e);
            break;
        }
        done.push((&stage.path, backup));
    }
    for (path, backup) in done.into_iter().rev() {
        match backup {
            Some(backup) if result.is_err() => {
                let _ = std::fs::rename(backup, path);
            }
            Some(backup) => {
                let _ = std::fs::remove_file(backup);
            }
            None if result.is_err() => {
                let _ = std::fs::remove_file(path);
            }
            None => {}
        }
    }
    result
}

/// Exclusive `flock`s on the directories of `paths`, taken in one order
/// (sorted canonical paths) so that writers of overlapping sets cannot
/// deadlock; released when the files are dropped. A file system without
/// `flock` (some network mounts) goes unlocked.
fn lock_directories<'p>(paths: impl Iterator<Item = &'p Path>) -> io::Result<Vec<File>> {
    let mut dirs: Vec<PathBuf> = paths
        .map(|p| {
            let dir = match p.parent() {
                Some(d) if !d.as_os_str().is_empty() => d,
                _ => Path::new("."),
            };
            std::fs::canonicalize(dir)
        })
        .collect::<io::Result<_>>()?;
    dirs.sort();
    dirs.dedup();
    let mut locks = Vec::with_capacity(dirs.len());
    for dir in dirs {
        let handle = File::open(&dir)?;
        match handle.lock() {
            Ok(()) => locks.push(handle),
            Err(e) if e.kind() == io::ErrorKind::Unsupported => {}
            Err(e) => return Err(e),
        }
    }
    Ok(locks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ScratchDir;

    #[test]
    fn failed_write_leaves_the_old_file_untouched() {
        let dir = ScratchDir::new("output-test");
        let target = dir.join("out.qir");
        std::fs::write(&target, "old").unwrap();
        let err = write_file_atomically(&target, |w| {
            w.write_all(b"partial")?;
            Err(io::Error::other("pass failed"))
        });
        assert!(err.is_err());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "old");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "temporary file was removed");
        write_file_atomically(&target, |w| w.write_all(b"new")).unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "new");
    }

    #[cfg(unix)]
    #[test]
    fn a_symlink_is_followed_and_the_mode_is_kept() {
        use std::os::unix::fs::PermissionsExt;
        let dir = ScratchDir::new("output-link");
        let (real, link) = (dir.join("real.qir"), dir.join("link.qir"));
        std::fs::write(&real, "old").unwrap();
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o640)).unwrap();
        std::os::unix::fs::symlink("real.qir", &link).unwrap();
        write_file_atomically(&link, |w| w.write_all(b"new")).unwrap();
        assert!(link.is_symlink(), "the link is still a link");
        assert_eq!(std::fs::read_to_string(&real).unwrap(), "new");
        assert_eq!(std::fs::metadata(&real).unwrap().permissions().mode() & 0o777, 0o640);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 2, "no temporary file is left behind");
    }

    /// A child process (this test binary, re-run with an environment
    /// variable) is interrupted by SIGINT in the middle of writing; it must
    /// die of the signal, leave the old target untouched and no temporary
    /// file behind.
    #[cfg(unix)]
    #[test]
    fn an_interrupted_write_leaves_no_temporary_file() {
        use std::os::unix::process::ExitStatusExt;
        const CHILD: &str = "QOPT_INTERRUPTED_WRITE_TARGET";
        if let Ok(target) = std::env::var(CHILD) {
            let _ = write_file_atomically(Path::new(&target), |w| {
                w.write_all(b"partial")?;
                w.flush()?;
                // SAFETY: raising a signal in this (child) process.
                unsafe { libc::raise(libc::SIGINT) };
                w.write_all(b" and never finished")
            });
            std::process::exit(0);
        }
        let dir = ScratchDir::new("output-interrupt");
        let target = dir.join("out.qir");
        std::fs::write(&target, "old").unwrap();
        let status = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "atomic_file::tests::an_interrupted_write_leaves_no_temporary_file",
                "--nocapture",
            ])
            .env(CHILD, &target)
            .status()
            .unwrap();
        assert_eq!(status.signal(), Some(libc::SIGINT), "the child dies of the signal: {status:?}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "old");
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left.len(), 1, "only the target is left: {left:?}");
    }

    /// The names in `dir`, sorted.
    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_set_of_files_is_written_whole_or_not_at_all() {
        let dir = ScratchDir::new("output-set");
        let (object, header) = (dir.join("m.o"), dir.join("m.h"));
        write_files_atomically(&[(&object, b"object 1"), (&header, b"header 1")]).unwrap();
        assert_eq!(std::fs::read(&object).unwrap(), b"object 1");
        assert_eq!(std::fs::read(&header).unwrap(), b"header 1");

        // One target a directory: nothing is written, the others are kept.
        let adir = dir.join("adir");
        std::fs::create_dir(&adir).unwrap();
        for files in
            [[(&adir, b"object 2"), (&header, b"header 2")], [(&object, b"object 2"), (&adir, b"header 2")]]
        {
            let files: Vec<(&Path, &[u8])> = files.iter().map(|(p, b)| (p.as_path(), &b[..])).collect();
            let err = write_files_atomically(&files).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::IsADirectory);
            assert_eq!(std::fs::read(&object).unwrap(), b"object 1");
            assert_eq!(std::fs::read(&header).unwrap(), b"header 1");
            assert_eq!(names(&dir), ["adir", "m.h", "m.o"], "no temporary file is left");
        }

        // A special file that cannot be written (/dev/full): the regular file
        // is left as it was.
        let full = Path::new("/dev/full");
        if full.exists() {
            let err = write_files_atomically(&[(&header, b"header 4"), (full, b"object 4")]).unwrap_err();
            assert_eq!(err.raw_os_error(), Some(28), "ENOSPC: {err}");
            assert_eq!(std::fs::read(&header).unwrap(), b"header 1");
        }

        // A missing directory for one file: neither is written.
        let lost = dir.join("no-such-dir").join("m.o");
        assert!(write_files_atomically(&[(&lost, b"object 3"), (&header, b"header 3")]).is_err());
        assert!(write_files_atomically(&[(&header, b"header 3"), (&lost, b"object 3")]).is_err());
        assert_eq!(std::fs::read(&header).unwrap(), b"header 1");
        assert_eq!(names(&dir), ["adir", "m.h", "m.o"]);
    }

    /// Threads writing different pairs to the same two files, over and over:
    /// when they are done the two files always come from the same writer.
    #[test]
    fn concurrent_writers_of_one_set_never_leave_a_mixed_set() {
        let dir = ScratchDir::new("output-race");
        let (object, header) = (dir.join("m.o"), dir.join("m.h"));
        // Large enough that writing one file takes a while.
        let payload = |who: u8| vec![who; 1 << 18];
        for round in 0..40 {
            std::thread::scope(|scope| {
                for who in [b'a', b'b'] {
                    let (object, header) = (&object, &header);
                    scope.spawn(move || {
                        let body = payload(who);
                        write_files_atomically(&[(object, &body), (header, &[who])]).unwrap();
                    });
                }
            });
            let (o, h) = (std::fs::read(&object).unwrap(), std::fs::read(&header).unwrap());
            assert_eq!(o[0], h[0], "round {round}: the object of one writer beside the header of the other");
            assert_eq!(o, payload(h[0]));
        }
        assert_eq!(names(&dir), ["m.h", "m.o"], "no temporary or backup file is left");
    }

    /// A signal during a deferred group of steps ends the process only
    /// after the group: the child (this test binary again) raises SIGTERM
    /// in the group, then writes a marker file; it must die of the signal
    /// with the marker written.
    #[cfg(unix)]
    #[test]
    fn a_signal_waits_for_a_deferred_group_of_steps() {
        use std::os::unix::process::ExitStatusExt;
        const CHILD: &str = "QOPT_DEFERRED_SIGNAL_MARKER";
        if let Ok(marker) = std::env::var(CHILD) {
            let _guard = ScratchGuard::new(Path::new(&format!("{marker}.scratch")));
            with_interrupts_deferred(|| {
                // SAFETY: raising a signal in this (child) process.
                unsafe { libc::raise(libc::SIGTERM) };
                std::fs::write(&marker, "the group finished").unwrap();
            });
            std::process::exit(0);
        }
        let dir = ScratchDir::new("output-deferred");
        let marker = dir.join("marker");
        let status = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "atomic_file::tests::a_signal_waits_for_a_deferred_group_of_steps",
                "--nocapture",
            ])
            .env(CHILD, &marker)
            .status()
            .unwrap();
        assert_eq!(status.signal(), Some(libc::SIGTERM), "the child dies of the signal: {status:?}");
        assert_eq!(std::fs::read_to_string(&marker).unwrap(), "the group finished");
    }

    /// A pipe target nobody reads blocks the write; an interrupt must still
    /// end the process (the pipe is written before the renames, whose
    /// signals are held back) and leave no temporary file.
    #[cfg(unix)]
    #[test]
    fn an_interrupt_ends_a_write_blocked_on_a_pipe() {
        use std::os::unix::process::ExitStatusExt;
        const CHILD: &str = "QOPT_BLOCKED_PIPE_DIR";
        if let Ok(dir) = std::env::var(CHILD) {
            let dir = Path::new(&dir);
            let _ = write_files_atomically(&[(&dir.join("m.h"), b"header"), (&dir.join("fifo"), b"object")]);
            std::process::exit(0);
        }
        let dir = ScratchDir::new("output-fifo");
        let fifo = std::ffi::CString::new(dir.join("fifo").to_str().unwrap()).unwrap();
        // SAFETY: mkfifo with a valid C string.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "atomic_file::tests::an_interrupt_ends_a_write_blocked_on_a_pipe"])
            .env(CHILD, dir.path())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(300));
        // SAFETY: signalling the child this test started.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
        let mut status = None;
        for _ in 0..100 {
            status = child.try_wait().unwrap();
            if status.is_some() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        if status.is_none() {
            let _ = child.kill();
            let _ = child.wait();
        }
        assert_eq!(
            status.and_then(|s| s.signal()),
            Some(libc::SIGINT),
            "the child dies of the signal: {status:?}"
        );
        assert_eq!(names(&dir), ["fifo"], "no header, no temporary file");
    }

    #[test]
    fn special_files_are_written_in_place_not_replaced() {
        let null = Path::new("/dev/null");
        if !null.exists() {
            return;
        }
        write_file_atomically(null, |w| w.write_all(b"discarded")).unwrap();
        let meta = std::fs::metadata(null).unwrap();
        assert!(!meta.is_file(), "/dev/null is still a device, not a regular file");
    }
}
