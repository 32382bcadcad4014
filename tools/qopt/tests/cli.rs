//! The `qopt` binary's contract: exit codes, stdin, atomic `-o`, split input,
//! located diagnostics, pipeline errors with suggestions.

mod common;

use common::{scratch, text};
use qopt_ir_core::PassInfo;
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
fn dash_output_is_standard_output() {
    let dir = scratch("dash-output");
    let input = dir.join("in.qir");
    std::fs::write(&input, VALID).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_qopt"))
        .current_dir(&dir)
        .args([input.to_str().unwrap(), "-o", "-"])
        .output()
        .expect("qopt runs");
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    assert_eq!(text(&out.stdout), CANONICAL);
    assert!(!dir.join("-").exists(), "`-o -` wrote a file named '-'");
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
fn bad_option_values_are_usage_errors_located_in_the_pipeline() {
    let dir = scratch("option-values");
    for (pipeline, message, caret) in [
        (
            "canonicalize{max-iterations=0}",
            "pass 'canonicalize': max-iterations must be at least 1, got 0",
            30,
        ),
        (
            "canonicalize{max-iterations=-1}",
            "pass 'canonicalize': max-iterations must be at least 1, got -1",
            30,
        ),
        (
            "cse,fold-constant{max-elements=-5}",
            "pass 'fold-constant': max-elements must not be negative, got -5",
            33,
        ),
        ("insert-observers{bins=0}", "pass 'insert-observers': 'bins' must be between 1 and", 24),
    ] {
        let pass = format!("--pass={pipeline}");
        let repro = format!("--reproducer-dir={}", dir.display());
        let out = qopt(&["-", &pass, &repro], Some(VALID));
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{pipeline}: {err}");
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines[0], "qopt: invalid pass pipeline", "{err}");
        assert!(lines[1].starts_with(&format!("error: {message}")), "{err}");
        assert_eq!(lines[2], format!("  {pipeline}"));
        assert_eq!(lines[3], format!("{}^", " ".repeat(caret)), "{err}");
        assert!(out.stdout.is_empty());
    }
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "no reproducer is written");
}

#[test]
fn unknown_names_in_print_ir_filters_are_usage_errors_with_the_nearest_name() {
    for (flag, message) in [
        (
            "--print-ir-after=bogus",
            "qopt: error: unknown pass 'bogus' in --print-ir-after; qopt --list-passes lists them",
        ),
        (
            "--print-ir-after=canonicalise",
            "qopt: error: unknown pass 'canonicalise' in --print-ir-after; did you mean 'canonicalize'?",
        ),
        ("--print-ir-before=cse,nonsense", "qopt: error: unknown pass 'nonsense' in --print-ir-before"),
    ] {
        let out = qopt(&["-", "--pass=cse", flag], Some(VALID));
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag}: {err}");
        assert!(err.starts_with(message), "{flag}: {err}");
        assert!(out.stdout.is_empty());
    }
    // A registered pass that is not in the pipeline is fine: nothing to print.
    assert_eq!(qopt(&["-", "--pass=cse", "--print-ir-after=dce"], Some(VALID)).status.code(), Some(0));
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
fn split_input_file_with_a_failing_case_keeps_the_output_file() {
    let dir = scratch("split-keep");
    let target = dir.join("keep.qir");
    std::fs::write(&target, "previous contents").unwrap();
    let input = format!("{VALID}// -----\nfunc.func @g() {{\n  %0 = \n}}\n");
    let out = qopt(&["-", "--split-input-file", "-o", target.to_str().unwrap()], Some(&input));
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "previous contents");
    let err = text(&out.stderr);
    assert!(
        err.ends_with(&format!("qopt: error: '{}' was not written: a case failed\n", target.display())),
        "{err}"
    );
    let out = qopt(&["-", "--split-input-file", "-o", target.to_str().unwrap()], Some(VALID));
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(std::fs::read_to_string(&target).unwrap(), CANONICAL);
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "no temporary file is left behind");
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

#[test]
fn list_dialects_prints_each_dialect_with_its_summary_sorted() {
    let out = qopt(&["--list-dialects"], None);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let listing = text(&out.stdout);
    let names: Vec<&str> = listing.lines().map(|l| l.split_whitespace().next().unwrap_or("")).collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(names, sorted, "{listing}");
    for name in ["builtin", "fp", "func"] {
        assert!(names.contains(&name), "{name} missing from:\n{listing}");
    }
    assert!(listing.lines().any(|l| l.starts_with("fp ") && l.contains("float tensor ops")), "{listing}");
}

#[test]
fn list_ops_shows_arity_traits_and_summary_and_filters_by_dialect() {
    let out = qopt(&["--list-ops"], None);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let listing = text(&out.stdout);
    let names: Vec<&str> = listing.lines().map(|l| l.split_whitespace().next().unwrap_or("")).collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(names, sorted, "{listing}");
    let add = listing.lines().find(|l| l.starts_with("fp.add ")).expect("fp.add is listed");
    let add: Vec<&str> = add.split("  ").map(str::trim).filter(|c| !c.is_empty()).collect();
    assert_eq!(
        add,
        [
            "fp.add",
            "2 operands -> 1 result",
            "[Pure, Commutative, Elementwise]",
            "elementwise addition with broadcasting"
        ]
    );
    assert!(listing.contains("fp.conv2d") && listing.contains("2 to 3 operands -> 1 result"), "{listing}");
    assert!(listing.contains("func.func") && listing.contains("0 results, 1 region"), "{listing}");

    let out = qopt(&["--list-ops=fp"], None);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let listing = text(&out.stdout);
    assert!(listing.lines().count() > 20, "{listing}");
    assert!(listing.lines().all(|l| l.starts_with("fp.")), "{listing}");

    let out = qopt(&["--list-ops=fq"], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("unknown dialect 'fq'; did you mean 'fp'?"), "{}", text(&out.stderr));
}

#[test]
fn emit_op_docs_writes_one_markdown_file_per_dialect() {
    let scratch_dir = scratch("op-docs");
    let dir = scratch_dir.join("docs");
    let out = qopt(&["--emit-op-docs", dir.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let fp = std::fs::read_to_string(dir.join("fp.md")).expect("fp.md is written");
    assert!(fp.starts_with("# The `fp` dialect\n"), "{fp}");
    assert!(fp.contains("- [fp.conv2d](#fpconv2d): "), "the table of contents links each op");
    let conv = &fp[fp.find("\n## fp.conv2d\n").expect("an fp.conv2d section")..];
    let conv = &conv[..conv[1..].find("\n## ").map_or(conv.len(), |end| end + 1)];
    for expected in [
        "- operands: 2 to 3\n",
        "- results: 1\n",
        "- regions: 0\n",
        "- traits: `Pure`\n",
        "`QuantizableOp`: activation operand 0; weight operand 1 (output channels on axis 0); bias operand 2",
        "```\n%y = fp.conv2d(",
    ] {
        assert!(conv.contains(expected), "{expected:?} missing from:\n{conv}");
    }
    assert!(!dir.join("builtin.md").exists() && !dir.join("func.md").exists());
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| !name.ends_with(".md"))
        .collect();
    assert!(leftovers.is_empty(), "no temporary files are left: {leftovers:?}");
}

/// Each line of `stderr` is one JSON object.
fn json_lines(stderr: &str) -> Vec<&str> {
    let lines: Vec<&str> = stderr.lines().collect();
    for line in &lines {
        assert!(line.starts_with("{\"severity\":") && line.ends_with('}'), "not a JSON object: {line}");
    }
    lines
}

#[test]
fn json_diagnostics_are_one_object_per_line() {
    let out =
        qopt(&["-", "--diagnostics=json"], Some("func.func @f() {\n  %0 = t.op(%nope) : (f32) -> f32\n}\n"));
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert_eq!(
        json_lines(&err),
        [
            r#"{"severity":"error","file":"<stdin>","line":2,"col":13,"message":"use of undefined value %nope","notes":[]}"#
        ]
    );

    let input = "func.func @f(%x: f32) -> f32 {\n  %0 = acc.op(%x) : (f32) -> f32\n  \
                 %1 = acc.op2(%x) : (f32) -> f32\n  func.return %0 : f32\n}\n";
    let out = qopt(&["-", "--diagnostics=json"], Some(input));
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    let lines = json_lines(&err);
    assert_eq!(lines.len(), 2, "{err}");
    assert!(lines[0].contains(r#""line":2,"col":8,"message":"unregistered op 'acc.op'"#), "{err}");
    assert!(lines[1].contains(r#""line":3,"col":8,"#), "{err}");

    let out = qopt(&["-", "--diagnostics=json", "--pass=cse,{"], Some(VALID));
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert_eq!(
        json_lines(&err),
        [
            r#"{"severity":"error","file":"<pipeline>","line":1,"col":5,"message":"expected a pass name, found '{'","notes":[]}"#
        ]
    );

    let out = qopt(&["/nonexistent/model.qir", "--diagnostics=json"], None);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        json_lines(&err)[0].starts_with(
            r#"{"severity":"error","file":"/nonexistent/model.qir","line":null,"col":null,"message":"cannot read"#
        ),
        "{err}"
    );
}

/// A pass that fails with a located error, to see how pass failures are reported.
struct FailingPass;

const INFO: PassInfo = PassInfo {
    name: "test-fail",
    summary: "fail with an error at line 2",
    preserves_semantics: false,
    equivalence: None,
    description: "",
};

impl qopt_ir_core::Pass for FailingPass {
    fn info(&self) -> &'static PassInfo {
        &INFO
    }

    fn run(
        &self,
        _cx: &mut qopt_ir_core::PassContext<'_>,
        _module: &mut qopt_ir_core::Module,
        _options: &qopt_ir_core::pass::PassOptions,
    ) -> Result<qopt_ir_core::PassOutcome, qopt_ir_core::PassError> {
        let pos = qopt_ir_core::SrcPos { line: 2, col: 3 };
        Err(qopt_ir_core::PassError::internal(qopt_ir_core::Diagnostic::error(
            None,
            pos,
            "cannot handle \"this\"",
        )))
    }
}

#[test]
fn json_diagnostics_report_pass_failures_with_the_reproducer_as_a_note() {
    use clap::Parser as _;
    let dir = scratch("json-pass-failure");
    let input = dir.join("in.qir");
    std::fs::write(&input, VALID).unwrap();
    let mut driver = qopt_driver::Driver::new("qopt");
    driver.passes_mut().register(std::sync::Arc::new(FailingPass)).unwrap();
    let args = [
        "qopt",
        input.to_str().unwrap(),
        "--pass=test-fail",
        "--diagnostics=json",
        "--reproducer-dir",
        dir.to_str().unwrap(),
    ];
    let cli = qopt_driver::Cli::try_parse_from(args).unwrap();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    assert_eq!(driver.run_cli(&cli, &mut out, &mut err), 1);
    assert!(out.is_empty());
    let err = text(&err);
    let lines = json_lines(&err);
    let file = input.to_str().unwrap();
    assert_eq!(lines.len(), 2, "{err}");
    assert_eq!(
        lines[0],
        format!(
            r#"{{"severity":"error","file":"{file}","line":2,"col":3,"message":"cannot handle \"this\"","notes":[]}}"#
        )
    );
    let headline = format!(
        r#"{{"severity":"error","file":"{file}","line":null,"col":null,"message":"pass 'test-fail' failed","notes":[{{"severity":"note","file":null,"line":null,"col":null,"message":"reproducer written to "#
    );
    assert!(lines[1].starts_with(&headline), "{err}");
    assert!(lines[1].contains("replay with: qopt "), "{err}");
}

#[test]
fn verbose_flags_log_pass_spans_and_events_on_stderr() {
    let out = qopt(&["-", "--pass=cse"], Some(VALID));
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stderr.is_empty(), "quiet by default: {}", text(&out.stderr));

    let out = qopt(&["-", "--pass=cse", "-v"], Some(VALID));
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(err.contains("INFO pipeline{passes=1}:pass{name=\"cse\" position=1}"), "{err}");
    assert!(!err.contains("DEBUG"), "-v logs no debug events: {err}");

    let out = qopt(&["-", "--pass=cse", "-vv"], Some(VALID));
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(err.contains("pass{name=\"cse\" position=1}"), "the pass span: {err}");
    assert!(err.contains("DEBUG") && err.contains("pass finished outcome=Unchanged"), "{err}");
    assert_eq!(text(&out.stdout), CANONICAL, "logs never reach stdout");
}

#[test]
fn help_mentions_the_registry_and_diagnostics_flags() {
    let out = qopt(&["--help"], None);
    assert_eq!(out.status.code(), Some(0));
    let help = text(&out.stdout);
    for flag in
        ["--list-dialects", "--list-ops=fp", "--emit-op-docs docs/dialects", "--diagnostics=json", "-vv"]
    {
        assert!(help.contains(flag), "{flag} missing from the examples:\n{help}");
    }
    let out = qopt(&["--version"], None);
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stdout).starts_with("qopt "), "{}", text(&out.stdout));
}

/// `qopt big.qir | head`: when the reader of standard output goes away,
/// qopt ends quietly with 141 (128 + SIGPIPE), as a program the signal
/// ended, instead of reporting "Broken pipe" as an error.
#[cfg(unix)]
#[test]
fn a_closed_stdout_pipe_ends_quietly() {
    use std::io::Read;
    let dir = scratch("closed-pipe");
    // Printed, far more than a pipe's buffer holds.
    let mut module_text = String::from("func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n");
    let mut last = "%x".to_string();
    for i in 0..20_000 {
        module_text += &format!("  %v{i} = fp.relu({last}) : (tensor<4xf32>) -> tensor<4xf32>\n");
        last = format!("%v{i}");
    }
    module_text += &format!("  func.return {last} : tensor<4xf32>\n}}\n");
    let model = dir.join("big.qir");
    std::fs::write(&model, module_text).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_qopt"))
        .arg(&model)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("qopt starts");
    let mut head = [0u8; 16];
    child.stdout.take().expect("stdout is piped").read_exact(&mut head).expect("qopt prints");
    // The read end is closed here, when the handle is dropped.
    let out = child.wait_with_output().expect("qopt finishes");
    assert_eq!(out.status.code(), Some(141), "stderr: {}", text(&out.stderr));
    assert!(out.stderr.is_empty(), "nothing is reported: {}", text(&out.stderr));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The reproducer of a pass that fails after others is the input text as
/// given with the pipeline up to the failing pass, and replaying it fails
/// the same way.
#[test]
fn a_reproducer_is_the_input_text_with_the_pipeline_up_to_the_failing_pass() {
    let dir = scratch("reproducer-prefix");
    let input = "// a relu chain canonicalize cannot finish in one sweep\n\
        func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n\
        %a = fp.relu(%x) : (tensor<4xf32>) -> tensor<4xf32>\n\
        %b = fp.relu(%a) : (tensor<4xf32>) -> tensor<4xf32>\n\
        %c = fp.relu(%b) : (tensor<4xf32>) -> tensor<4xf32>\n\
        func.return %c : tensor<4xf32>\n}\n";
    let repro = format!("--reproducer-dir={}", dir.display());
    let out = qopt(&["-", "--pass=cse,dce,canonicalize{max-iterations=1},symbol-dce", &repro], Some(input));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let files: Vec<PathBuf> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    let [file] = &files[..] else { panic!("one reproducer: {files:?}") };
    let written = std::fs::read_to_string(file).unwrap();
    let header = "// qopt-reproducer: --pass='cse,dce,canonicalize{max-iterations=1}'\n";
    assert_eq!(written, format!("{header}{input}"));
    // The replay fails too and writes its own reproducer: into the scratch
    // directory, not the temp directory.
    let replays = dir.join("replays");
    let replay_repro = format!("--reproducer-dir={}", replays.display());
    let replay =
        qopt(&[file.to_str().unwrap(), "--pass=cse,dce,canonicalize{max-iterations=1}", &replay_repro], None);
    assert_eq!(replay.status.code(), Some(1));
    assert!(
        text(&replay.stderr).contains("canonicalize did not converge after 1 iteration"),
        "{}",
        text(&replay.stderr)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
