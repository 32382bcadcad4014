//! The checked-in op reference (`docs/dialects/*.md`) is exactly what the
//! default driver's registry generates: one file per registered dialect (builtin
//! and func excepted), byte for byte, and no file for a dialect that is not
//! registered. Likewise the pass reference (`docs/passes.md`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const REGENERATE: &str = "cargo run -p qopt-tools --bin qopt -- --emit-op-docs docs/dialects";

/// The `.md` files of `dir` by file name.
fn markdown_files(dir: &Path) -> BTreeMap<String, String> {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()));
    let mut files = BTreeMap::new();
    for entry in entries {
        let path = entry.expect("directory entry").path();
        if path.extension().is_some_and(|e| e == "md") {
            let name = path.file_name().expect("file name").to_string_lossy().into_owned();
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
            files.insert(name, text);
        }
    }
    files
}

/// The first differing line, 1-based, with both versions.
fn first_difference(expected: &str, actual: &str) -> String {
    let (mut e, mut a) = (expected.lines(), actual.lines());
    let mut line = 0;
    loop {
        line += 1;
        match (e.next(), a.next()) {
            (None, None) => return "the files differ only in line breaks".to_string(),
            (x, y) if x == y => continue,
            (x, y) => return format!("line {line}:\n  generated:  {x:?}\n  checked in: {y:?}"),
        }
    }
}

#[test]
fn checked_in_op_docs_match_the_registry() {
    let checked_in_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/dialects");
    let generated_dir: PathBuf =
        std::env::temp_dir().join(format!("qopt-op-docs-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&generated_dir);
    let written = qopt_driver::Driver::new("qopt").emit_op_docs(&generated_dir).expect("op docs are written");
    assert!(!written.is_empty(), "the default driver documents at least one dialect");

    let generated = markdown_files(&generated_dir);
    let checked_in = markdown_files(&checked_in_dir);
    let _ = std::fs::remove_dir_all(&generated_dir);

    let mut problems = Vec::new();
    for (name, text) in &generated {
        match checked_in.get(name) {
            None => problems.push(format!("docs/dialects/{name} is missing")),
            Some(old) if old != text => {
                problems.push(format!("docs/dialects/{name} is stale; {}", first_difference(text, old)))
            }
            Some(_) => {}
        }
    }
    for name in checked_in.keys().filter(|name| !generated.contains_key(*name)) {
        problems.push(format!("docs/dialects/{name} documents no registered dialect; delete it"));
    }
    assert!(problems.is_empty(), "{}\nRegenerate the op docs with: {REGENERATE}", problems.join("\n"));
}

#[test]
fn checked_in_pass_docs_match_the_registry() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/passes.md");
    let checked_in = std::fs::read_to_string(&path).expect("docs/passes.md exists");
    let generated = qopt_driver::Driver::new("qopt").pass_docs();
    assert!(
        generated == checked_in,
        "docs/passes.md is stale; {}\nRegenerate it with: \
         cargo run -p qopt-tools --bin qopt -- --emit-pass-docs docs/passes.md",
        first_difference(&generated, &checked_in)
    );
}
