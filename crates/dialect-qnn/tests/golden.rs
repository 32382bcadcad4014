//! Golden files of the `qnn` dialect: one insta snapshot per
//! `tests/dialect-qnn/*.qir` file (repository root), run through the `qopt`
//! driver library with the `fp` and `qnn` dialects registered.
//!
//! The conventions are those of `tests/dialect-fp` (`crates/dialect-fp/tests/golden.rs`):
//!
//! - Each file opens with one or more `// RUN: qopt %s <flags>` lines: the
//!   command as typed, `%s` standing for the file. Each runs through
//!   [`Driver::run_cli`]; the snapshot holds, per RUN line, the exit code,
//!   standard output and standard error, with paths relative to the repository
//!   root.
//! - `// expected-error: <text>` beside an op (or `// expected-error@+N: <text>`
//!   on the line N above it, `@-N` below) says the run must report an error
//!   containing `<text>` at that line; every error reported must be expected
//!   this way, and every `// -----` case of a file with expectations must fail.
//! - Output that succeeded must read back to itself: it is run through the
//!   driver again (same split mode, no passes) and must print unchanged.

use clap::Parser as _;
use qopt_driver::{Cli, Driver};
use std::path::{Path, PathBuf};

fn repo_root() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.canonicalize().unwrap_or(root)
}

/// `tests/dialect-qnn/...` for a path under the repository (with `/` separators).
fn repo_relative(path: &Path) -> String {
    let rel = path.strip_prefix(repo_root()).unwrap_or(path);
    rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/")
}

fn driver() -> Driver {
    let mut driver = Driver::new("qopt");
    driver.add_dialects(|ctx| {
        // A driver that already knows a dialect must not register it twice.
        if ctx.dialect("fp").is_none() {
            qopt_dialect_fp::register(ctx)?;
        }
        if ctx.dialect("qnn").is_none() {
            qopt_dialect_qnn::register(ctx)?;
        }
        Ok(())
    });
    driver
}

/// The `// RUN:` lines at the top of the file, split into words.
fn run_lines(name: &str, source: &str) -> Vec<(String, Vec<String>)> {
    let lines: Vec<(String, Vec<String>)> = source
        .lines()
        .map_while(|line| line.strip_prefix("// RUN:"))
        .map(|run| (run.trim().to_string(), run.split_whitespace().map(str::to_string).collect()))
        .collect();
    assert!(!lines.is_empty(), "{name}: line 1 must be `// RUN: qopt %s <flags>`");
    for (line, words) in &lines {
        assert_eq!(
            words.first().map(String::as_str),
            Some("qopt"),
            "{name}: RUN line {line:?} must start with qopt"
        );
    }
    lines
}

/// Runs the driver on `args` (the program name first); `(exit code, stdout, stderr)`.
fn run(driver: &Driver, args: &[String]) -> (i32, String, String) {
    let cli = Cli::try_parse_from(args).unwrap_or_else(|e| panic!("bad command line {args:?}: {e}"));
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = driver.run_cli(&cli, &mut out, &mut err);
    (code, String::from_utf8_lossy(&out).into_owned(), String::from_utf8_lossy(&err).into_owned())
}

/// An `expected-error` comment: the line it points at (1-based) and its text.
#[derive(Debug)]
struct Expected {
    line: usize,
    text: String,
    matched: bool,
}

fn expectations(name: &str, source: &str) -> Vec<Expected> {
    let mut out = Vec::new();
    for (i, line) in source.lines().enumerate() {
        let Some(at) = line.find("// expected-error") else { continue };
        let rest = &line[at + "// expected-error".len()..];
        let (offset, text) = match rest.split_once(':') {
            Some((offset, text)) => (offset, text.trim()),
            None => panic!("{name}:{}: expected-error needs `: <text>`", i + 1),
        };
        let target = match offset.strip_prefix('@') {
            None if offset.is_empty() => i + 1,
            Some(rel) => {
                let delta: i64 =
                    rel.parse().unwrap_or_else(|_| panic!("{name}:{}: bad offset {rel:?}", i + 1));
                usize::try_from(i as i64 + 1 + delta)
                    .unwrap_or_else(|_| panic!("{name}:{}: offset before line 1", i + 1))
            }
            _ => panic!("{name}:{}: bad expected-error syntax {rest:?}", i + 1),
        };
        assert!(!text.is_empty(), "{name}:{}: expected-error needs a message", i + 1);
        out.push(Expected { line: target, text: text.to_string(), matched: false });
    }
    out
}

/// Checks the errors in `stderr` against the file's `expected-error` comments.
fn check_expected_errors(name: &str, source: &str, stderr: &str) {
    let mut expected = expectations(name, source);
    let prefix = format!("{name}:");
    let mut unexpected = Vec::new();
    for line in stderr.lines() {
        let Some(rest) = line.strip_prefix(&prefix) else {
            if line.contains(": error:") {
                unexpected.push(line.to_string());
            }
            continue;
        };
        // `line:col: error: message`
        let mut parts = rest.splitn(3, ':');
        let (Some(l), Some(_col), Some(tail)) = (parts.next(), parts.next(), parts.next()) else { continue };
        let Some(message) = tail.strip_prefix(" error: ") else { continue };
        let Ok(l) = l.parse::<usize>() else { continue };
        let mut found = false;
        for e in expected.iter_mut().filter(|e| e.line == l && message.contains(&e.text)) {
            e.matched = true;
            found = true;
        }
        if !found {
            unexpected.push(line.to_string());
        }
    }
    let missing: Vec<String> =
        expected.iter().filter(|e| !e.matched).map(|e| format!("{name}:{}: {}", e.line, e.text)).collect();
    assert!(
        missing.is_empty(),
        "expected errors not reported:\n{}\n--- stderr\n{stderr}",
        missing.join("\n")
    );
    assert!(unexpected.is_empty(), "unexpected errors:\n{}", unexpected.join("\n"));
}

/// Every `// -----` case of a file with expectations must fail: none may print.
fn check_every_case_fails(name: &str, source: &str, stdout: &str) {
    let cases = source.lines().filter(|l| l.trim() == "// -----").count() + 1;
    let printed = stdout.matches("module").count();
    assert_eq!(printed, 0, "{name}: {cases} cases, but some verified and printed:\n{stdout}");
}

/// Runs the printed output through the driver again and checks it prints unchanged.
fn check_round_trip(driver: &Driver, name: &str, split: bool, printed: &str) {
    let dir = std::env::temp_dir().join(format!("qopt-dialect-qnn-golden-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let file = dir.join(name.replace('/', "_"));
    std::fs::write(&file, printed).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let mut args = vec!["qopt".to_string(), file.to_string_lossy().into_owned()];
    if split {
        args.push("--split-input-file".to_string());
    }
    let (code, out, err) = run(driver, &args);
    let _ = std::fs::remove_file(&file);
    assert_eq!(code, 0, "{name}: the printed output does not verify:\n{err}");
    assert_eq!(out, printed, "{name}: printing the printed output changed it");
}

/// Runs every RUN line of one golden file and returns the text to snapshot.
fn run_golden(path: &Path) -> String {
    let name = repo_relative(path);
    let source = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{name}: {e}"));
    let absolute = path.to_string_lossy().into_owned();
    let has_expectations = !expectations(&name, &source).is_empty();
    let driver = driver();
    let mut snapshot = String::new();
    for (line, words) in run_lines(&name, &source) {
        let args: Vec<String> = words.iter().map(|w| w.replace("%s", &absolute)).collect();
        let split = args.iter().any(|a| a == "--split-input-file");
        let (code, out, err) = run(&driver, &args);
        let err = err.replace(&absolute, &name);
        if has_expectations {
            check_expected_errors(&name, &source, &err);
            check_every_case_fails(&name, &source, &out);
        } else {
            assert_eq!(code, 0, "{name}: `{line}` failed:\n{err}");
        }
        if code == 0 {
            check_round_trip(&driver, &name, split, &out);
        }
        snapshot.push_str(&format!("// RUN: {line}\nexit code: {code}\n--- stdout\n{out}--- stderr\n{err}"));
    }
    snapshot
}

#[test]
fn golden() {
    insta::glob!("../../../tests/dialect-qnn", "*.qir", |path| {
        insta::assert_snapshot!(run_golden(path));
    });
}

#[test]
fn expected_error_comments_parse() {
    let source = "a // expected-error: one\n// expected-error@+1: two\nb\nc // expected-error@-2: three\n";
    let got: Vec<(usize, String)> = expectations("t", source).into_iter().map(|e| (e.line, e.text)).collect();
    assert_eq!(got, [(1, "one".to_string()), (3, "two".to_string()), (2, "three".to_string())]);
}
