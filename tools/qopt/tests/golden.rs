//! Golden files of the driver itself (`tests/qopt/*.qir`): IR printing,
//! statistics, split input, JSON and human diagnostics, pass failures with their
//! reproducer. One insta snapshot per file, through [`qopt_driver::golden`].

use qopt_driver::{golden::Golden, Driver};
use std::path::Path;

#[test]
fn golden() {
    let driver = Driver::new("qopt");
    let golden = Golden::new(&driver, Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."));
    insta::glob!("../../../tests/qopt", "*.qir", |path| {
        insta::assert_snapshot!(golden.run(path));
    });
}
