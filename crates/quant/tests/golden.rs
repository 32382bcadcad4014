//! Golden files: one insta snapshot per `tests/passes/*.qir` file (repo root).
//!
//! Each file opens with one or more `// RUN: qopt %s <flags>` lines: the command
//! as typed, with `%s` standing for the file (single or double quotes group words,
//! as in a shell). Each RUN line goes through the `qopt` driver library
//! ([`Driver::run_cli`]) with the `test` dialect registered (see
//! `qopt_ir_core::testing`), and the snapshot holds, per RUN line, the exit code,
//! standard output and standard error. Paths are shown relative to the repository
//! root, and reproducer files go to a scratch directory shown as
//! `<reproducer-dir>`, so snapshots do not depend on the checkout or the process.
//! Multi-case files use `--split-input-file`; every case opens with a sentence
//! saying what it shows and uses its own function names.

use qopt_driver::{golden::Golden, Driver};
use std::path::Path;

#[test]
fn golden() {
    let mut driver = Driver::new("qopt");
    driver.add_dialects(qopt_ir_core::testing::register_test_dialect);
    let golden = Golden::new(&driver, Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."));
    insta::glob!("../../../tests/passes", "*.qir", |path| {
        insta::assert_snapshot!(golden.run(path));
    });
}
