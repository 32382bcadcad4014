//! [`ScratchDir`]: a fresh directory under the system's temp directory that
//! is removed, with everything in it, when the value is dropped, also when a
//! panic unwinds through its owner (a failing test). Tests and the golden
//! runner keep their files in one, so a test run leaves nothing in the temp
//! directory.

use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A directory `<temp>/qopt-<tag>-<pid>-<n>`, removed when dropped.
#[derive(Debug)]
pub struct ScratchDir {
    path: PathBuf,
}

impl ScratchDir {
    /// Creates a new, empty directory named after `tag` (unique within the
    /// process, so tests running in parallel never share one). Panics when
    /// it cannot be created: it is meant for tests.
    pub fn new(tag: &str) -> ScratchDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("qopt-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        // invariant: only tests and the golden runner make one, and a test
        // that cannot make its scratch directory fails with this message.
        std::fs::create_dir_all(&path)
            .unwrap_or_else(|e| panic!("cannot create the scratch directory '{}': {e}", path.display()));
        ScratchDir { path }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Deref for ScratchDir {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.path
    }
}

impl AsRef<Path> for ScratchDir {
    fn as_ref(&self) -> &Path {
        &self.path
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_directory_and_its_files_are_removed_on_drop_and_on_panic() {
        let dir = ScratchDir::new("scratch-dir-test");
        let path = dir.path().to_path_buf();
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("sub").join("f"), "x").unwrap();
        assert_ne!(ScratchDir::new("scratch-dir-test").path(), path, "each one is new");
        drop(dir);
        assert!(!path.exists());

        let inside = std::thread::spawn(|| {
            let dir = ScratchDir::new("scratch-dir-panic");
            let path = dir.path().to_path_buf();
            std::panic::panic_any(path);
        })
        .join()
        .unwrap_err();
        let path = inside.downcast_ref::<PathBuf>().expect("the panic carries the path");
        assert!(!path.exists(), "removed while unwinding");
    }
}
