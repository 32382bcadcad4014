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

use crate::scratch_cleanup::ScratchGuard;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_write_leaves_the_old_file_untouched() {
        let dir = std::env::temp_dir().join(format!("qopt-output-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
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
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn a_symlink_is_followed_and_the_mode_is_kept() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("qopt-output-link-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (real, link) = (dir.join("real.qir"), dir.join("link.qir"));
        std::fs::write(&real, "old").unwrap();
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o640)).unwrap();
        std::os::unix::fs::symlink("real.qir", &link).unwrap();
        write_file_atomically(&link, |w| w.write_all(b"new")).unwrap();
        assert!(link.is_symlink(), "the link is still a link");
        assert_eq!(std::fs::read_to_string(&real).unwrap(), "new");
        assert_eq!(std::fs::metadata(&real).unwrap().permissions().mode() & 0o777, 0o640);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 2, "no temporary file is left behind");
        std::fs::remove_dir_all(&dir).unwrap();
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
        let dir = std::env::temp_dir().join(format!("qopt-output-interrupt-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
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
        std::fs::remove_dir_all(&dir).unwrap();
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
