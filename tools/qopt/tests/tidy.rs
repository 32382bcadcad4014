//! Tidy: rules about the source tree that reviews kept finding broken,
//! checked by reading the tree (as rust-analyzer's `tidy.rs` does).
//!
//! - Every `.rs` file opens with `//!`: what the file holds, for a reader who
//!   finds it from the folder names.
//! - No op name as a string literal (`"fp.conv2d"`) outside the dialect
//!   crates: code names ops through `op_names` constants, so renaming an op
//!   or finding its users is a compiler's job. Test code (files under
//!   `tests/` or `benches/`, `tests.rs`, `*_tests.rs`, `testing.rs`, and
//!   what follows `#[cfg(test)]` in a file) builds IR by name and is exempt,
//!   as are the files of [`OP_NAME_ALLOWED`].
//! - No `util.rs` or `utils.rs`: a helper lives with the concept it serves.
//! - No file over [`MAX_LINES_OF_CODE`] lines of code (not blank, not a
//!   comment).
//! - `docs/architecture.md` states no counts of things that change as code
//!   lands (ops, passes, tests, files): such a number is generated
//!   (`docs/passes.md`, `docs/dialects/`) or left out; measured figures go
//!   to README's benchmark section.
//!
//! Each check is a function of a file's path and text, so the unit tests at
//! the end show each one failing on a file that breaks its rule.

use std::path::{Path, PathBuf};

/// The most lines of code a file may have.
const MAX_LINES_OF_CODE: usize = 1_000;

/// Files outside the dialect crates that may spell a dialect name as a
/// string: the parser recognizes the `!qnn.uniform` type by name.
const OP_NAME_ALLOWED: &[&str] = &["crates/ir-core/src/text/parser/types.rs"];

/// The dialect crates, which define the op names.
const DIALECT_CRATES: &[&str] = &["crates/dialect-fp/", "crates/dialect-qnn/"];

/// The pages that must not state volatile counts.
const COUNT_FREE_DOCS: &[&str] = &["docs/architecture.md"];

/// Nouns whose count drifts as code lands.
const COUNTED_NOUNS: &[&str] = &[
    "ops",
    "op",
    "passes",
    "pass",
    "tests",
    "test",
    "files",
    "file",
    "crates",
    "lowerings",
    "kernels",
    "dialects",
    "float ops",
    "integer ops",
    "node tests",
    "lines",
];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every file under the repository root with one of `extensions`, as paths
/// relative to the root with `/` separators (build output, VCS data and
/// fuzzing corpora left out).
fn files_with(extensions: &[&str]) -> Vec<(String, PathBuf)> {
    let root = repo();
    let skip = ["target", ".git", "corpus", "artifacts", "node_modules", ".venv"];
    let mut found = Vec::new();
    let mut pending = vec![root.clone()];
    while let Some(dir) = pending.pop() {
        let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for entry in entries {
            let path = entry.expect("a directory entry").path();
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            if path.is_dir() {
                if !skip.contains(&name.as_str()) {
                    pending.push(path);
                }
            } else if extensions.iter().any(|ext| name.ends_with(ext)) {
                let relative = path.strip_prefix(&root).expect("under the root");
                found.push((relative.to_string_lossy().replace('\\', "/"), path));
            }
        }
    }
    found.sort();
    found
}

/// `Some(problem)` when the file does not open with a `//!` comment.
fn missing_module_doc(path: &str, text: &str) -> Option<String> {
    (!text.starts_with("//!"))
        .then(|| format!("{path}: does not open with a `//!` comment saying what it holds"))
}

/// Whether `path` is test code as a whole.
fn is_test_file(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    path.split('/').any(|part| part == "tests" || part == "benches")
        || name == "tests.rs"
        || name == "testing.rs"
        || name.ends_with("_tests.rs")
}

/// The op-name literals (`"fp.conv2d"`, `b"qnn.lookup"`) outside comments
/// and outside what follows `#[cfg(test)]`, as `path:line: literal`.
fn op_name_literals(path: &str, text: &str) -> Vec<String> {
    if is_test_file(path)
        || DIALECT_CRATES.iter().any(|d| path.starts_with(d))
        || OP_NAME_ALLOWED.contains(&path)
    {
        return Vec::new();
    }
    let mut found = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let code = line.trim_start();
        if code.starts_with("#[cfg(test)]") {
            break;
        }
        if code.starts_with("//") {
            continue;
        }
        for dialect in ["fp.", "qnn."] {
            let mut rest = line;
            while let Some(at) = rest.find(&format!("\"{dialect}")) {
                let after = &rest[at + 1..];
                let name_len = after.find(|c: char| !(c.is_ascii_alphanumeric() || c == '.' || c == '_'));
                if let Some(len) =
                    name_len.filter(|&len| after[len..].starts_with('"') && len > dialect.len())
                {
                    found.push(format!("{path}:{}: \"{}\"", number + 1, &after[..len]));
                }
                rest = after;
            }
        }
    }
    found
}

/// `Some(problem)` for a file named `util.rs` or `utils.rs`.
fn catch_all_module(path: &str) -> Option<String> {
    let name = path.rsplit('/').next().unwrap_or(path);
    matches!(name, "util.rs" | "utils.rs")
        .then(|| format!("{path}: a catch-all module; put each helper with the concept it serves"))
}

/// Lines that are neither blank nor only a comment.
fn lines_of_code(text: &str) -> usize {
    text.lines().filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with("//")).count()
}

/// `Some(problem)` for a file over [`MAX_LINES_OF_CODE`].
fn too_long(path: &str, text: &str) -> Option<String> {
    let n = lines_of_code(text);
    (n > MAX_LINES_OF_CODE)
        .then(|| format!("{path}: {n} lines of code, more than {MAX_LINES_OF_CODE}; split it"))
}

/// Counts of things that drift (`28 float ops`, `nine generic passes`), as
/// `path:line: phrase`. Numbers in code blocks and in figures with units
/// (`1.2 ms`, `14 %`) are not counts of things.
fn volatile_counts(path: &str, text: &str) -> Vec<String> {
    const NUMBER_WORDS: &[&str] =
        &["two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"];
    let mut found = Vec::new();
    let mut in_code = false;
    for (number, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        let words: Vec<&str> = line.split(|c: char| c.is_whitespace() || c == '(' || c == ',').collect();
        for (i, word) in words.iter().enumerate() {
            let is_number = (!word.is_empty() && word.chars().all(|c| c.is_ascii_digit()))
                || NUMBER_WORDS.contains(&word.to_ascii_lowercase().as_str());
            if !is_number {
                continue;
            }
            // The noun may follow an adjective: "9 generic passes".
            for skip in 1..=2 {
                let noun: Vec<&str> = words.iter().skip(i + skip).take(2).copied().collect();
                let one = noun.first().map(|w| w.trim_end_matches(['.', ';', ':', ')'])).unwrap_or("");
                let two = noun.join(" ");
                let two = two.trim_end_matches(['.', ';', ':', ')']);
                if COUNTED_NOUNS.contains(&one) || COUNTED_NOUNS.contains(&two) {
                    found.push(format!("{path}:{}: \"{}\"", number + 1, line.trim()));
                    break;
                }
            }
        }
    }
    found.dedup();
    found
}

#[test]
fn the_tree_is_tidy() {
    let mut problems = Vec::new();
    for (path, file) in files_with(&[".rs"]) {
        let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{path}: {e}"));
        problems.extend(missing_module_doc(&path, &text));
        problems.extend(op_name_literals(&path, &text));
        problems.extend(catch_all_module(&path));
        problems.extend(too_long(&path, &text));
    }
    for path in COUNT_FREE_DOCS {
        let text = std::fs::read_to_string(repo().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
        problems.extend(volatile_counts(path, &text));
    }
    assert!(problems.is_empty(), "{} tidy problems:\n{}", problems.len(), problems.join("\n"));
}

#[test]
fn each_check_catches_what_it_guards() {
    assert!(missing_module_doc("a.rs", "use std::fmt;\n").is_some());
    assert!(missing_module_doc("a.rs", "// a comment\n").is_some());
    assert!(missing_module_doc("a.rs", "//! What this holds.\n").is_none());

    let literal = "fn f(m: &Module) -> bool {\n    m.op_is(ctx, op, \"fp.conv2d\")\n}\n";
    assert_eq!(
        op_name_literals("crates/quant/src/a.rs", literal),
        ["crates/quant/src/a.rs:2: \"fp.conv2d\""]
    );
    assert_eq!(op_name_literals("crates/quant/src/a.rs", "let n = b\"qnn.lookup\";").len(), 1);
    assert!(op_name_literals("crates/dialect-fp/src/a.rs", literal).is_empty());
    assert!(op_name_literals("crates/quant/tests/a.rs", literal).is_empty());
    assert!(op_name_literals("crates/quant/src/a_tests.rs", literal).is_empty());
    let in_tests = format!("fn g() {{}}\n#[cfg(test)]\nmod tests {{\n{literal}}}\n");
    assert!(op_name_literals("crates/quant/src/a.rs", &in_tests).is_empty());
    assert!(op_name_literals("crates/quant/src/a.rs", "// calls \"fp.conv2d\"\n").is_empty());
    assert!(op_name_literals("crates/quant/src/a.rs", "let ir = \"%y = fp.relu(%x)\";").is_empty());

    assert!(catch_all_module("crates/quant/src/util.rs").is_some());
    assert!(catch_all_module("crates/quant/src/utils.rs").is_some());
    assert!(catch_all_module("crates/quant/src/utility.rs").is_none());

    let long = "let x = 1;\n".repeat(MAX_LINES_OF_CODE + 1);
    assert!(too_long("a.rs", &long).is_some());
    let commented = format!("{}{}", "// note\n\n".repeat(5_000), "let x = 1;\n".repeat(10));
    assert!(too_long("a.rs", &commented).is_none());

    assert_eq!(volatile_counts("d.md", "The fp dialect has 28 float ops.\n").len(), 1);
    assert_eq!(volatile_counts("d.md", "It leaves out one of the nine generic passes.\n").len(), 1);
    assert_eq!(volatile_counts("d.md", "It runs 155 node tests (see below).\n").len(), 1);
    assert!(volatile_counts("d.md", "resnet18ish runs in 19.4 ms, 1.11× faster.\n").is_empty());
    assert!(volatile_counts("d.md", "```\n3 ops\n```\n").is_empty());
}
