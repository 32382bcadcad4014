//! End-to-end tests of the `toy-opt` binary, run as a user runs it.
//!
//! Golden files: one insta snapshot per `tests/*.qir`. Each file opens with
//! `// RUN: toy-opt %s <flags>` lines; each runs the built binary from the
//! crate directory with `%s` = `tests/<file>`, and the snapshot holds, per RUN
//! line, the exit code, standard output and standard error. On top of that:
//!
//! - `// expected-error: <text>` / `// expected-warning: <text>` at the end of
//!   a line says some RUN line reports that severity at that line with a
//!   message containing `<text>`; every error and warning any RUN line reports
//!   must be expected this way. A RUN line that reports an error exits with 1,
//!   one that reports none exits with 0.
//! - Output of a successful run reads back to itself: it is run through
//!   `toy-opt` again (same split mode, no passes) and must print unchanged.
//!
//! Then `--list-passes`, `--list-dialects` and `--list-ops` show qopt's
//! registrations and this crate's side by side.

use qopt_ir_core::ScratchDir;
use std::path::Path;
use std::process::Command;

const TOOL: &str = env!("CARGO_BIN_EXE_toy-opt");

/// Runs `toy-opt` with `args` in the crate directory: `(exit code, stdout, stderr)`.
fn toy_opt(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(TOOL)
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap_or_else(|e| panic!("cannot run {TOOL}: {e}"));
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
}

/// An expected diagnostic: line (1-based), severity word, text.
#[derive(Debug)]
struct Expected {
    line: usize,
    severity: &'static str,
    text: String,
    seen: bool,
}

fn expectations(source: &str) -> Vec<Expected> {
    let mut out = Vec::new();
    for (i, line) in source.lines().enumerate() {
        for severity in ["error", "warning"] {
            let marker = format!("// expected-{severity}: ");
            if let Some(at) = line.find(&marker) {
                let text = line[at + marker.len()..].trim().to_string();
                out.push(Expected { line: i + 1, severity, text, seen: false });
            }
        }
    }
    out
}

/// `(line, severity, message)` of each `file:line:col: severity: message` in `stderr`.
fn reported<'a>(file: &str, stderr: &'a str) -> Vec<(usize, &'a str, &'a str)> {
    let prefix = format!("{file}:");
    let mut out = Vec::new();
    for line in stderr.lines() {
        let Some(rest) = line.strip_prefix(&prefix) else { continue };
        let mut parts = rest.splitn(3, ':');
        let (Some(l), Some(_col), Some(tail)) = (parts.next(), parts.next(), parts.next()) else { continue };
        let Ok(l) = l.parse::<usize>() else { continue };
        for severity in ["error", "warning"] {
            if let Some(message) = tail.strip_prefix(&format!(" {severity}: ")) {
                out.push((l, severity, message));
            }
        }
    }
    out
}

/// Runs every RUN line of one golden file, checks it, and returns the snapshot text.
fn run_golden(path: &Path) -> String {
    let name = path.file_name().and_then(|n| n.to_str()).expect("a file name").to_string();
    let file = format!("tests/{name}");
    let source = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{file}: {e}"));
    let runs: Vec<&str> = source.lines().map_while(|l| l.strip_prefix("// RUN: ")).collect();
    assert!(!runs.is_empty(), "{file}: line 1 must be `// RUN: toy-opt %s <flags>`");
    let mut expected = expectations(&source);
    let mut unexpected = Vec::new();
    let mut snapshot = String::new();
    for run in runs {
        let words: Vec<&str> = run.split_whitespace().collect();
        assert_eq!(words.first(), Some(&"toy-opt"), "{file}: RUN line {run:?} must start with toy-opt");
        let args: Vec<&str> = words[1..].iter().map(|&w| if w == "%s" { file.as_str() } else { w }).collect();
        let (code, out, err) = toy_opt(&args);
        let diagnostics = reported(&file, &err);
        for &(line, severity, message) in &diagnostics {
            let matches = expected
                .iter_mut()
                .filter(|e| e.line == line && e.severity == severity && message.contains(&e.text));
            let mut found = false;
            for e in matches {
                e.seen = true;
                found = true;
            }
            if !found {
                unexpected.push(format!("{file}:{line}: {severity}: {message}"));
            }
        }
        let failed = diagnostics.iter().any(|d| d.1 == "error");
        assert_eq!(code, i32::from(failed), "{file}: `{run}` exit code\n{err}");
        if code == 0 {
            check_round_trip(&name, args.contains(&"--split-input-file"), &out);
        }
        snapshot.push_str(&format!("// RUN: {run}\nexit code: {code}\n--- stdout\n{out}--- stderr\n{err}"));
    }
    let missing: Vec<String> = expected
        .iter()
        .filter(|e| !e.seen)
        .map(|e| format!("{file}:{}: {}: {}", e.line, e.severity, e.text))
        .collect();
    assert!(missing.is_empty(), "expected but not reported:\n{}", missing.join("\n"));
    assert!(unexpected.is_empty(), "reported but not expected:\n{}", unexpected.join("\n"));
    snapshot
}

/// The printed output parses, verifies and prints to itself.
fn check_round_trip(name: &str, split: bool, printed: &str) {
    let dir = ScratchDir::new("toy-accel-golden");
    let path = dir.join(name);
    std::fs::write(&path, printed).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let path_text = path.to_string_lossy().into_owned();
    let mut args = vec![path_text.as_str()];
    if split {
        args.push("--split-input-file");
    }
    let (code, out, err) = toy_opt(&args);
    assert_eq!(code, 0, "{name}: the printed output does not verify:\n{err}");
    assert_eq!(out, printed, "{name}: printing the printed output changed it");
}

#[test]
fn golden() {
    insta::glob!("*.qir", |path| {
        insta::assert_snapshot!(run_golden(path));
    });
}

/// `--list-passes` shows every pass qopt's own driver has, and `accel-lower`
/// with its option.
#[test]
fn lists_qopt_passes_and_accel_lower() {
    let (code, out, err) = toy_opt(&["--list-passes"]);
    assert_eq!(code, 0, "{err}");
    let mut qopt = qopt_driver::Driver::new("qopt");
    let qopt_passes: Vec<&str> = qopt.passes_mut().names().collect();
    assert!(qopt_passes.contains(&"canonicalize"), "qopt registers its generic passes: {qopt_passes:?}");
    for name in qopt_passes.iter().copied().chain(["accel-lower"]) {
        assert!(
            out.lines().any(|l| l.split_whitespace().next() == Some(name)),
            "{name} is not listed:\n{out}"
        );
    }
    assert!(out.contains("max-channels=<int> (default: 512)"), "{out}");
}

/// `--list-dialects` and `--list-ops` show `accel` beside qopt's dialects.
#[test]
fn lists_accel_dialect_and_ops() {
    let (code, out, err) = toy_opt(&["--list-dialects"]);
    assert_eq!(code, 0, "{err}");
    for dialect in ["accel", "fp", "qnn"] {
        assert!(
            out.lines().any(|l| l.split_whitespace().next() == Some(dialect)),
            "{dialect} is not listed:\n{out}"
        );
    }
    let (code, out, err) = toy_opt(&["--list-ops=accel"]);
    assert_eq!(code, 0, "{err}");
    let ops: Vec<&str> = out.lines().filter_map(|l| l.split_whitespace().next()).collect();
    assert_eq!(ops, ["accel.conv2d_relu", "accel.dma_in", "accel.dma_out"], "{out}");
}

/// A `max-channels` below 1 is a usage error (exit 2) placed at the value in
/// the pipeline text, found before any pass runs: no reproducer is written.
#[test]
fn rejects_bad_max_channels() {
    let scratch = ScratchDir::new("toy-accel-reproducers");
    let scratch_text = scratch.to_string_lossy().into_owned();
    let args =
        ["tests/ops.qir", "--pass=accel-lower{max-channels=0}", "--reproducer-dir", scratch_text.as_str()];
    let (code, out, err) = toy_opt(&args);
    let written = std::fs::read_dir(&scratch).map_or(0, |d| d.count());
    assert_eq!(code, 2, "{err}");
    assert!(out.is_empty(), "{out}");
    assert_eq!(
        err,
        "toy-opt: invalid pass pipeline\nerror: pass 'accel-lower': 'max-channels' must be at least 1, got 0\n  \
         accel-lower{max-channels=0}\n                           ^\n"
    );
    assert_eq!(written, 0, "no reproducer");
}
