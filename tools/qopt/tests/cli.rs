//! The `qopt` binary's contract: exit codes, stdin, atomic `-o`, split input,
//! located diagnostics, pipeline errors with suggestions.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

const VALID: &str =
    "func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n  func.return %x : tensor<4xf32>\n}\n";
const CANONICAL: &str =
    "module {\n  func.func @f(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n    func.return %arg0 : tensor<4xf32>\n  }\n}\n";

fn qopt(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_qopt"))
        .args(args)
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("qopt starts");
    if let Some(text) = stdin {
        // qopt may exit (a usage error) before reading its input: a broken pipe is fine.
        let mut pipe = child.stdin.take().expect("stdin is piped");
        match pipe.write_all(text.as_bytes()) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
            Err(e) => panic!("write stdin: {e}"),
        }
    }
    child.wait_with_output().expect("qopt finishes")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A fresh directory under the temp dir for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("qopt-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}

#[test]
fn valid_input_prints_canonical_form_and_exits_0() {
    let dir = scratch("valid");
    let input = dir.join("in.qir");
    std::fs::write(&input, VALID).unwrap();
    let out = qopt(&[input.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    assert_eq!(text(&out.stdout), CANONICAL);
}

#[test]
fn stdin_is_read_for_dash_and_by_default() {
    for args in [&["-"][..], &[][..]] {
        let out = qopt(args, Some(VALID));
        assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
        assert_eq!(text(&out.stdout), CANONICAL);
    }
}

#[test]
fn parse_errors_are_located_and_exit_1() {
    let out = qopt(&["-"], Some("func.func @f() {\n  %0 = t.op(%nope) : (f32) -> f32\n}\n"));
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.starts_with("<stdin>:2:13: error: use of undefined value %nope\n"), "{err}");
    assert!(err.contains("  %0 = t.op(%nope) : (f32) -> f32\n            ^\n"), "{err}");
    assert!(out.stdout.is_empty());
}

#[test]
fn verification_errors_exit_1_and_unregistered_ops_need_the_flag() {
    let input =
        "func.func @f(%x: f32) -> f32 {\n  %0 = acc.op(%x) : (f32) -> f32\n  func.return %0 : f32\n}\n";
    let out = qopt(&["-"], Some(input));
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("<stdin>:2:8: error: unregistered op 'acc.op'"),
        "{}",
        text(&out.stderr)
    );
    let out = qopt(&["-", "--allow-unregistered-dialect"], Some(input));
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
}

#[test]
fn missing_file_exits_1_with_its_name() {
    let out = qopt(&["/nonexistent/model.qir"], None);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("cannot read '/nonexistent/model.qir'"), "{}", text(&out.stderr));
}

#[test]
fn usage_errors_exit_2() {
    assert_eq!(qopt(&["--no-such-flag"], None).status.code(), Some(2));
    let out = qopt(&["-", "--pass=cannonicalize"], Some(VALID));
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("unknown pass 'cannonicalize'; did you mean 'canonicalize'?"),
        "{}",
        text(&out.stderr)
    );
    let out = qopt(&["-", "--pass=canonicalize{max-iteration=3}"], Some(VALID));
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("did you mean 'max-iterations'?"), "{}", text(&out.stderr));
    let out = qopt(&["-", "--pass=cse,{"], Some(VALID));
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn output_file_is_written_atomically() {
    let dir = scratch("atomic");
    let target = dir.join("out.qir");
    std::fs::write(&target, "previous contents").unwrap();
    let out = qopt(&["-", "-o", target.to_str().unwrap()], Some("garbage here"));
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "previous contents",
        "a failed run keeps the old file"
    );
    let out = qopt(&["-", "-o", target.to_str().unwrap()], Some(VALID));
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    assert_eq!(std::fs::read_to_string(&target).unwrap(), CANONICAL);
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "no temporary file is left behind");
}

#[test]
fn split_input_file_processes_each_case_and_reports_failures() {
    let input = format!("{VALID}// -----\nfunc.func @g() {{\n  %0 = \n}}\n// -----\n{VALID}");
    let out = qopt(&["-", "--split-input-file"], Some(&input));
    assert_eq!(out.status.code(), Some(1), "one case fails");
    assert_eq!(text(&out.stdout), format!("{CANONICAL}// -----\n// -----\n{CANONICAL}"));
    let err = text(&out.stderr);
    assert!(err.starts_with("<stdin>:7:1: error:"), "line numbers are those of the whole file: {err}");
}

#[test]
fn list_passes_names_every_pass_with_options() {
    let out = qopt(&["--list-passes"], None);
    assert_eq!(out.status.code(), Some(0));
    let listing = text(&out.stdout);
    for pass in ["canonicalize", "cse", "dce", "symbol-dce"] {
        assert!(listing.contains(pass), "{pass} missing from:\n{listing}");
    }
    assert!(listing.contains("max-iterations"), "{listing}");
}

#[test]
fn timing_and_statistics_go_to_stderr() {
    let out = qopt(&["-", "--pass=cse,dce", "--timing", "--stats"], Some(VALID));
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let err = text(&out.stderr);
    for phase in ["parse", "verify", "cse", "dce", "print", "Execution time report"] {
        assert!(err.contains(phase), "{phase} missing from:\n{err}");
    }
    assert_eq!(text(&out.stdout), CANONICAL);
}
