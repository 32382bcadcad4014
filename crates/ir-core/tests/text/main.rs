//! Tests of the `.qir` text format, as one test binary (`cargo test -p qopt-ir-core --test text`):
//!
//! - [`golden`]: every `tests/ir-core/**/*.qir` file runs the command named on its
//!   first line (`// RUN: roundtrip`, `// RUN: errors`, optionally with
//!   `--split-input-file`) and its output is an insta snapshot;
//! - [`malformed`]: bad inputs, each asserted to fail with a located, readable error
//!   through one `check_error` helper; nesting limits and error recovery;
//! - [`roundtrip_prop`]: random modules built through the `Module` API print, parse
//!   and print again to the same text and to a structurally equal module.

mod golden;
mod malformed;
mod roundtrip_prop;
