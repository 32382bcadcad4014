//! What the tools' integration tests share: a process's output as text,
//! paths in the repository, and scratch directories named after the test.

// Each test binary uses some of these.
#![allow(dead_code)]

pub mod c;

use qopt_ir_core::ScratchDir;
use std::path::{Path, PathBuf};

/// Output bytes as text (invalid UTF-8 replaced).
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `path` (relative to the repository root) as a string argument.
pub fn repo_path(path: &str) -> String {
    repo().join(path).to_string_lossy().into_owned()
}

/// A fresh directory under the temp dir for one test of this test binary,
/// removed when dropped (also when the test fails).
pub fn scratch(name: &str) -> ScratchDir {
    ScratchDir::new(&format!("{}-{name}", env!("CARGO_CRATE_NAME")))
}
