//! Golden-file tests for any crate built on the driver (qopt's own dialects and
//! passes, or a downstream backend's): the `.qir` equivalent of LLVM's lit and
//! FileCheck, run through [`Driver::run_cli`] in process.
//!
//! A golden file opens with one or more `// RUN: qopt %s <flags>` lines (the
//! driver's own name in place of `qopt` for a downstream tool): the command as
//! typed (`'...'` and `"..."` group words as in a shell), `%s` standing for the
//! file and `%S` for its directory (as in lit; data files beside a test). [`Golden::run`] executes each and returns the text to
//! snapshot (with `insta`): per RUN line the exit code, standard output and
//! standard error, with the file shown relative to the repository, reproducer
//! files in a scratch directory shown as `<reproducer-dir>` and the process id
//! as `<pid>`, so snapshots do not depend on the checkout or the run. On top:
//!
//! - `// expected-error: <text>` beside an op (`// expected-error@+N: <text>`
//!   for the line N below, `@-N` above) says the run must report an error
//!   containing `<text>` on that line. In a file with such comments every error
//!   must be expected, and every `// -----` case must fail.
//! - `// expected-warning: <text>` (same `@+N` / `@-N` forms) says some RUN
//!   line reports a warning containing `<text>` on that line. In a file with
//!   such comments every warning any RUN line reports must be expected (the
//!   runs may still succeed: analysis passes such as `quant-lint` warn and
//!   exit 0).
//! - Output of a successful run must read back to itself: it goes through the
//!   driver again (same split mode and unregistered-op allowance, no passes)
//!   and must print unchanged.
//!
//! This is test-harness code: a malformed golden file or an unmet expectation
//! panics on purpose, because a panic is how a `#[test]` fails. Nothing in the
//! tools calls it.
//!
//! ```no_run
//! # let driver = qopt_driver::Driver::new("qopt");
//! let golden = qopt_driver::golden::Golden::new(&driver, "/path/to/repo");
//! let snapshot = golden.run(std::path::Path::new("/path/to/repo/tests/x/ops.qir"));
//! ```

use crate::{Cli, Driver};
use clap::Parser as _;
use qopt_ir_core::ScratchDir;
use std::path::{Path, PathBuf};

/// Runs golden files through one driver; see the module docs.
pub struct Golden<'a> {
    driver: &'a Driver,
    repo_root: PathBuf,
}

impl<'a> Golden<'a> {
    /// A runner for `driver`; file names in snapshots are relative to `repo_root`.
    pub fn new(driver: &'a Driver, repo_root: impl Into<PathBuf>) -> Golden<'a> {
        let root: PathBuf = repo_root.into();
        let repo_root = root.canonicalize().unwrap_or(root);
        Golden { driver, repo_root }
    }

    /// Runs every RUN line of the golden file at `path`, checks its expectations
    /// (panicking with a message on a mismatch) and returns the snapshot text.
    pub fn run(&self, path: &Path) -> String {
        let name = self.relative(path);
        let source = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{name}: {e}"));
        let absolute = path.to_string_lossy().into_owned();
        let directory = path.parent().map(|d| d.to_string_lossy().into_owned()).unwrap_or_default();
        let relative_directory =
            Path::new(&name).parent().map(|d| d.to_string_lossy().into_owned()).unwrap_or_default();
        let expected = expectations(&name, &source);
        let expected_warnings = expectations_of(&name, &source, "warning");
        // Reproducers of failing passes go here; removed at the end, also when
        // a check fails.
        let scratch = ScratchDir::new(&format!("golden-{}", sanitize(&name)));
        let scratch_text = scratch.to_string_lossy().into_owned();
        let pid = format!("-{}-", std::process::id());
        let clean_line = |text: &str| {
            let text = text.replace(&absolute, &name).replace(&scratch_text, "<reproducer-dir>");
            let text =
                if directory.is_empty() { text } else { text.replace(&directory, &relative_directory) };
            text.replace(&pid, "-<pid>-")
        };
        // A caret under a line that held an absolute path moves left with the
        // text before it, so snapshots do not depend on where the repository is.
        let clean = |text: String| {
            let lines: Vec<&str> = text.split('\n').collect();
            let cleaned: Vec<String> = lines
                .iter()
                .enumerate()
                .map(|(i, line)| match (line.strip_suffix('^'), i.checked_sub(1)) {
                    (Some(indent), Some(above)) if indent.bytes().all(|b| b == b' ') => {
                        let prefix: String = lines[above].chars().take(indent.len()).collect();
                        format!("{}^", " ".repeat(clean_line(&prefix).chars().count()))
                    }
                    _ => clean_line(line),
                })
                .collect();
            cleaned.join("\n")
        };
        let mut snapshot = String::new();
        let mut all_stderr = String::new();
        for line in run_lines(&name, &source) {
            let mut args = split_words(&name, &line);
            let tool = self.driver.tool();
            assert_eq!(args.first().map(String::as_str), Some(tool), "{name}: RUN lines start with `{tool}`");
            for arg in &mut args {
                *arg = arg.replace("%s", &absolute).replace("%S", &directory);
            }
            args.extend(["--reproducer-dir".to_string(), scratch_text.clone()]);
            let split = args.iter().any(|a| a == "--split-input-file");
            let unregistered = args.iter().any(|a| a == "--allow-unregistered-dialect");
            let (code, out, err) = self.invoke(&name, &args);
            let (out, err) = (clean(out), clean(err));
            if !expected.is_empty() {
                check_expected(&name, &expected, &err, "error");
                check_every_case_fails(&name, &source, &out);
            }
            all_stderr.push_str(&err);
            if code == 0 {
                self.check_round_trip(&name, split, unregistered, &out);
            }
            snapshot
                .push_str(&format!("// RUN: {line}\nexit code: {code}\n--- stdout\n{out}--- stderr\n{err}"));
        }
        if !expected_warnings.is_empty() {
            check_expected(&name, &expected_warnings, &all_stderr, "warning");
        }
        snapshot
    }

    /// `tests/x/y.qir` for a path under the repository (with `/` separators).
    fn relative(&self, path: &Path) -> String {
        let rel = path.strip_prefix(&self.repo_root).unwrap_or(path);
        rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/")
    }

    /// Runs the driver on `args` (the program name first): exit code, stdout, stderr.
    fn invoke(&self, name: &str, args: &[String]) -> (i32, String, String) {
        let cli = Cli::try_parse_from(args).unwrap_or_else(|e| panic!("{name}: bad RUN line {args:?}: {e}"));
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = self.driver.run_cli(&cli, &mut out, &mut err);
        (code, String::from_utf8_lossy(&out).into_owned(), String::from_utf8_lossy(&err).into_owned())
    }

    /// Runs printed output through the driver again (same split mode and
    /// unregistered-op allowance, no passes); it must print unchanged.
    fn check_round_trip(&self, name: &str, split: bool, unregistered: bool, printed: &str) {
        let dir = ScratchDir::new("golden-rt");
        let file = dir.join(sanitize(name));
        std::fs::write(&file, printed).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let mut args = vec![self.driver.tool().to_string(), file.to_string_lossy().into_owned()];
        if split {
            args.push("--split-input-file".to_string());
        }
        if unregistered {
            args.push("--allow-unregistered-dialect".to_string());
        }
        let (code, out, err) = self.invoke(name, &args);
        assert_eq!(code, 0, "{name}: the printed output does not verify:\n{err}");
        assert_eq!(out, printed, "{name}: printing the printed output changed it");
    }
}

fn sanitize(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '.' { c } else { '_' }).collect()
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
pub fn split_words(name: &str, line: &str) -> Vec<String> {
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

/// An `expected-error` comment: the line it points at (1-based) and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    /// The line the error must be reported on.
    pub line: usize,
    /// Text the error message must contain.
    pub text: String,
}

/// The `expected-error` comments of a golden file.
pub fn expectations(name: &str, source: &str) -> Vec<Expected> {
    expectations_of(name, source, "error")
}

/// The `expected-<severity>` comments of a golden file (`error`, `warning`).
pub fn expectations_of(name: &str, source: &str, severity: &str) -> Vec<Expected> {
    let marker = format!("// expected-{severity}");
    let mut out = Vec::new();
    for (i, line) in source.lines().enumerate() {
        let Some(at) = line.find(&marker) else { continue };
        let rest = &line[at + marker.len()..];
        let (offset, text) = match rest.split_once(':') {
            Some((offset, text)) => (offset, text.trim()),
            None => panic!("{name}:{}: expected-{severity} needs `: <text>`", i + 1),
        };
        let target = match offset.strip_prefix('@') {
            None if offset.is_empty() => i + 1,
            Some(rel) => {
                let delta: i64 =
                    rel.parse().unwrap_or_else(|_| panic!("{name}:{}: bad offset {rel:?}", i + 1));
                usize::try_from(i as i64 + 1 + delta)
                    .unwrap_or_else(|_| panic!("{name}:{}: offset before line 1", i + 1))
            }
            _ => panic!("{name}:{}: bad expected-{severity} syntax {rest:?}", i + 1),
        };
        assert!(!text.is_empty(), "{name}:{}: expected-{severity} needs a message", i + 1);
        out.push(Expected { line: target, text: text.to_string() });
    }
    out
}

/// Checks the diagnostics of `severity` (`error`, `warning`) in `stderr`
/// against the expectations: each expected one is reported on its line, and
/// no other one is.
fn check_expected(name: &str, expected: &[Expected], stderr: &str, severity: &str) {
    let mut matched = vec![false; expected.len()];
    let prefix = format!("{name}:");
    let tag = format!(" {severity}: ");
    let mut unexpected = Vec::new();
    for line in stderr.lines() {
        let Some(rest) = line.strip_prefix(&prefix) else {
            if line.contains(&format!(":{tag}")) {
                unexpected.push(line.to_string());
            }
            continue;
        };
        // `line:col: <severity>: message`
        let mut parts = rest.splitn(3, ':');
        let (Some(l), Some(_col), Some(tail)) = (parts.next(), parts.next(), parts.next()) else { continue };
        let Some(message) = tail.strip_prefix(&tag) else { continue };
        let Ok(l) = l.parse::<usize>() else { continue };
        let mut found = false;
        for (e, m) in expected.iter().zip(matched.iter_mut()) {
            if e.line == l && message.contains(&e.text) {
                *m = true;
                found = true;
            }
        }
        if !found {
            unexpected.push(line.to_string());
        }
    }
    let missing: Vec<String> = expected
        .iter()
        .zip(&matched)
        .filter(|(_, m)| !**m)
        .map(|(e, _)| format!("{name}:{}: {}", e.line, e.text))
        .collect();
    assert!(
        missing.is_empty(),
        "expected {severity}s not reported:\n{}\n--- stderr\n{stderr}",
        missing.join("\n")
    );
    assert!(unexpected.is_empty(), "unexpected {severity}s:\n{}", unexpected.join("\n"));
}

/// Every `// -----` case of a file with expectations must fail: none may print.
fn check_every_case_fails(name: &str, source: &str, stdout: &str) {
    let cases = source.lines().filter(|l| l.trim() == "// -----").count() + 1;
    let printed = stdout.matches("module").count();
    assert_eq!(printed, 0, "{name}: {cases} cases, but some verified and printed:\n{stdout}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_lines_split_like_a_shell() {
        assert_eq!(
            split_words("t", "qopt %s --pass='canonicalize{fold=false max-iterations=2}' -v"),
            ["qopt", "%s", "--pass=canonicalize{fold=false max-iterations=2}", "-v"]
        );
        assert_eq!(split_words("t", "  a \"b c\"  ''  "), ["a", "b c", ""]);
    }

    #[test]
    fn expected_error_comments_parse() {
        let source =
            "a // expected-error: one\n// expected-error@+1: two\nb\nc // expected-error@-2: three\n";
        let got: Vec<(usize, String)> =
            expectations("t", source).into_iter().map(|e| (e.line, e.text)).collect();
        assert_eq!(got, [(1, "one".to_string()), (3, "two".to_string()), (2, "three".to_string())]);
        let warnings = expectations_of("t", "x // expected-warning@+1: careful\ny\n", "warning");
        assert_eq!(warnings, [Expected { line: 2, text: "careful".to_string() }]);
        assert!(expectations("t", "x // expected-warning: careful\n").is_empty());
    }
}
