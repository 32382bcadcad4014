//! Golden files of the `qnn` dialect: one insta snapshot per
//! `tests/dialect-qnn/*.qir` file (repository root), run through the `qopt` driver
//! (which registers the fp and qnn dialects) by [`qopt_driver::golden`]: RUN
//! lines, `expected-error` comments and the print round trip are described there.

use qopt_driver::{golden::Golden, Driver};
use std::path::Path;

#[test]
fn golden() {
    let driver = Driver::new("qopt");
    let golden = Golden::new(&driver, Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."));
    insta::glob!("../../../tests/dialect-qnn", "*.qir", |path| {
        insta::assert_snapshot!(golden.run(path));
    });
}
