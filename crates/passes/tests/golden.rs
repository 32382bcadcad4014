//! Golden files: one insta snapshot per `tests/passes/*.qir` file (repo root).
//!
//! Each file opens with one or more `// RUN: qopt %s <flags>` lines: the command
//! as typed, with `%s` standing for the file (single or double quotes group words,
//! as in a shell). Each RUN line goes through the `qopt` driver library
//! ([`Driver::run_cli`]) with the `test` dialect registered (see
//! `src/test_dialect.rs`), and the snapshot holds, per RUN line, the exit code,
//! standard output and standard error. Paths are shown relative to the repository
//! root, and reproducer files go to a scratch directory shown as
//! `<reproducer-dir>`, so snapshots do not depend on the checkout or the process.
//! Multi-case files use `--split-input-file`; every case opens with a sentence
//! saying what it shows and uses its own function names.

#[path = "../src/test_dialect.rs"]
mod test_dialect;

use clap::Parser as _;
use qopt_driver::{Cli, Driver};
use std::path::{Path, PathBuf};

fn repo_root() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.canonicalize().unwrap_or(root)
}

/// `tests/passes/...` for a path under the repository (with `/` separators).
fn repo_relative(path: &Path) -> String {
    let rel = path.strip_prefix(repo_root()).unwrap_or(path);
    rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/")
}

/// The `// RUN:` lines at the top of the file, without the prefix.
fn run_lines(name: &str, source: &str) -> Vec<String> {
    let lines: Vec<String> = source
        .lines()
        .map_while(|line| line.strip_prefix("// RUN:"))
        .map(|run| run.trim().to_string())
        .collect();
    assert!(!lines.is_empty(), "{name}: line 1 must be `// RUN: qopt %s <flags>`");
    lines
}

/// Splits a RUN line into words; `'...'` and `"..."` group (and are removed).
fn split_words(name: &str, line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            (None, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    assert!(quote.is_none(), "{name}: unterminated quote in RUN line {line:?}");
    if in_word {
        words.push(word);
    }
    words
}

fn driver() -> Driver {
    let mut driver = Driver::new("qopt");
    driver.add_dialects(test_dialect::register_test_dialect);
    driver
}

/// Runs every RUN line of one golden file and returns the text to snapshot.
fn run_golden(path: &Path) -> String {
    let name = repo_relative(path);
    let source = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{name}: {e}"));
    let absolute = path.to_string_lossy().into_owned();
    let scratch = std::env::temp_dir().join(format!("qopt-passes-golden-{}", std::process::id()));
    let scratch_text = scratch.to_string_lossy().into_owned();
    let pid = format!("-{}-", std::process::id());
    let driver = driver();
    let mut snapshot = String::new();
    for line in run_lines(&name, &source) {
        let mut args = split_words(&name, &line);
        assert_eq!(args.first().map(String::as_str), Some("qopt"), "{name}: RUN lines start with `qopt`");
        for arg in &mut args {
            *arg = arg.replace("%s", &absolute);
        }
        args.extend(["--reproducer-dir".to_string(), scratch_text.clone()]);
        let cli = Cli::try_parse_from(&args).unwrap_or_else(|e| panic!("{name}: bad RUN line {line:?}: {e}"));
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = driver.run_cli(&cli, &mut out, &mut err);
        let clean = |bytes: &[u8]| {
            String::from_utf8_lossy(bytes)
                .replace(&absolute, &name)
                .replace(&scratch_text, "<reproducer-dir>")
                .replace(&pid, "-<pid>-")
        };
        snapshot.push_str(&format!(
            "// RUN: {line}\nexit code: {code}\n--- stdout\n{}--- stderr\n{}",
            clean(&out),
            clean(&err)
        ));
    }
    let _ = std::fs::remove_dir_all(&scratch);
    snapshot
}

#[test]
fn golden() {
    insta::glob!("../../../tests/passes", "*.qir", |path| {
        insta::assert_snapshot!(run_golden(path));
    });
}

#[test]
fn run_lines_split_like_a_shell() {
    assert_eq!(
        split_words("t", "qopt %s --pass='canonicalize{fold=false max-iterations=2}' -v"),
        ["qopt", "%s", "--pass=canonicalize{fold=false max-iterations=2}", "-v"]
    );
    assert_eq!(split_words("t", "  a \"b c\"  ''  "), ["a", "b c", ""]);
}
