//! Unit tests of `manager.rs`.

use super::super::test_passes::{build_module, function_names, test_registry, RenameFuncs};
use super::super::{PassFilter, PassInstrumentation};
use super::*;
use crate::{module_to_string, parse_module};
use std::io::{self, Write};
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

fn parse(text: &str) -> PassManager {
    PassManager::parse(&test_registry(), text).unwrap_or_else(|error| panic!("{}", error.render(text)))
}

/// `error@<offset>: <message>` for a pipeline that must not parse.
fn parse_error(text: &str) -> String {
    match PassManager::parse(&test_registry(), text) {
        Ok(manager) => panic!("{text:?} parsed as {}", manager.pipeline_text()),
        Err(error) => format!("error@{}: {}", error.offset, error.message),
    }
}

/// Instrumentation that prints nothing and writes no reproducer.
fn quiet() -> Instrumentation<'static> {
    Instrumentation { print_sink: Box::new(io::sink()), reproducer_dir: None, ..Instrumentation::default() }
}

fn fresh() -> (Context, Module) {
    let mut ctx = Context::new();
    let mut module = build_module(&mut ctx, &["main", "helper"]);
    module.set_source_name(Some("in.qir".into()));
    (ctx, module)
}

fn run(text: &str, inst: &mut Instrumentation<'_>) -> (Context, Module, Result<RunReport, PipelineFailure>) {
    let (mut ctx, mut module) = fresh();
    let result = parse(text).run(&mut ctx, &mut module, inst);
    (ctx, module, result)
}

fn run_ok(text: &str, inst: &mut Instrumentation<'_>) -> (Context, Module, RunReport) {
    let (ctx, module, result) = run(text, inst);
    match result {
        Ok(report) => (ctx, module, report),
        Err(failure) => panic!("{}\n{}", failure.diagnostics, failure.message()),
    }
}

fn run_err(text: &str, inst: &mut Instrumentation<'_>) -> PipelineFailure {
    match run(text, inst).2 {
        Ok(_) => panic!("{text:?} should fail"),
        Err(failure) => failure,
    }
}

/// A `Write` whose bytes the test can read after handing it to the manager.
#[derive(Clone, Default)]
struct SharedBuf(Arc<Mutex<Vec<u8>>>);

impl SharedBuf {
    fn text(&self) -> String {
        let bytes = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

impl Write for SharedBuf {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_nanos());
        let dir = std::env::temp_dir().join(format!("qopt-pass-test-{tag}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or_else(|error| panic!("{}: {error}", dir.display()));
        TempDir(dir)
    }

    fn files(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&self.0)
            .unwrap_or_else(|error| panic!("{error}"))
            .filter_map(|entry| entry.ok())
            .map(|entry| entry.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

// ---- parsing ----------------------------------------------------------

#[test]
fn parses_options_and_fills_defaults() {
    let manager = parse(" test-options{flag=1 label=x sizes=4 count=5}, test-noop ");
    assert_eq!(manager.len(), 2);
    assert!(!manager.is_empty());
    // Canonical: declaration order, normalized values, explicit options only.
    assert_eq!(manager.pipeline_text(), "test-options{count=5 sizes=[4] flag=true label=x},test-noop");
    assert_eq!(parse(&manager.pipeline_text()).pipeline_text(), manager.pipeline_text());

    let mut inst = Instrumentation { statistics: true, ..quiet() };
    let (_, _, report) = run_ok("test-options{label=y}", &mut inst);
    assert_eq!(report.statistics, vec![("test-options".to_string(), vec![("count", 3), ("sizes", 2)])]);
    let (_, _, report) = run_ok("test-options{label=y mode=exact count=-4 sizes=[]}", &mut inst);
    assert_eq!(
        report.statistics,
        vec![("test-options".to_string(), vec![("count", 4), ("exact-runs", 1), ("sizes", 0)])]
    );
}

#[test]
fn unknown_passes_get_a_suggestion_at_the_name() {
    assert_eq!(
        parse_error("test-noop,test-nop"),
        "error@10: unknown pass 'test-nop'; did you mean 'test-noop'?"
    );
    assert_eq!(
        parse_error("test-noop, test-pipelin{suffix=x}"),
        "error@11: unknown pass 'test-pipelin'; did you mean 'test-pipeline'?"
    );
    assert_eq!(parse_error("zzz"), "error@0: unknown pass 'zzz'");
}

#[test]
fn option_errors_point_into_the_text() {
    assert_eq!(
        parse_error("test-noop,test-options{label=a count=many}"),
        "error@37: option 'count' of pass 'test-options' expects an integer, got 'many'"
    );
    assert_eq!(
        parse_error("test-options{label=a cont=1}"),
        "error@21: unknown option 'cont' for pass 'test-options'; did you mean 'count'?"
    );
    assert_eq!(
        parse_error("test-options{label=a mode=exakt}"),
        "error@26: option 'mode' of pass 'test-options' expects one of fast, exact, got 'exakt'; \
         did you mean 'exact'?"
    );
    assert_eq!(
        parse_error("test-options{label=a sizes=[1,x]}"),
        "error@27: option 'sizes' of pass 'test-options' expects a list of integers, got 'x' as list \
         element 2"
    );
    assert_eq!(
        parse_error("test-options{label=a flag=maybe}"),
        "error@26: option 'flag' of pass 'test-options' expects a boolean (true, false, 1 or 0), got \
         'maybe'"
    );
    assert_eq!(
        parse_error("test-noop,test-options"),
        "error@10: missing required option 'label' for pass 'test-options'"
    );
    assert_eq!(
        parse_error("test-noop{x}"),
        "error@10: unknown option 'x' for pass 'test-noop', which takes no options"
    );
    assert_eq!(parse_error("test-noop,,"), "error@10: expected a pass name, found ','");
}

#[test]
fn named_pipelines_expand_into_groups() {
    let manager = parse("test-noop,test-pipeline{suffix=_x}");
    assert_eq!(manager.len(), 3);
    assert_eq!(manager.pipeline_text(), "test-noop,test-pipeline{suffix=_x}");
    assert_eq!(manager.expanded_text(), "test-noop,test-rename-funcs{suffix=_x},test-noop");
    assert_eq!(parse("test-pipeline").expanded_text(), "test-rename-funcs{suffix=_p},test-noop");
    assert_eq!(parse("test-outer").expanded_text(), "test-rename-funcs{suffix=_o},test-noop,test-noop");
    assert_eq!(parse("test-countdown{n=3}").len(), 4);

    let (ctx, module, _) = run_ok("test-outer,test-pipeline{suffix=\"-y\"}", &mut quiet());
    assert_eq!(function_names(&ctx, &module), ["main_o-y", "helper_o-y"]);
}

/// An option a named pipeline passes on is blamed where the user wrote
/// it, not on the pipeline's name.
#[test]
fn errors_in_options_passed_on_point_at_the_users_option() {
    let error = parse_error("test-noop,test-forward{data=d.npy count=many}");
    assert!(error.starts_with("error@40: in pipeline 'test-forward{count=many data=d.npy}'"), "{error}");
    assert!(
        error.ends_with("option 'count' of pass 'test-options' expects an integer, got 'many'"),
        "{error}"
    );
}

#[test]
fn file_options_are_listed_with_where_the_user_gave_them() {
    let manager = parse("test-forward{data=d.npy},test-options{label=c data=\"e f.npy\"}");
    let files: Vec<(&str, String, FileUse, usize)> = manager
        .file_options()
        .into_iter()
        .map(|file| (file.option, file.path, file.usage, file.offset))
        .collect();
    assert_eq!(
        files,
        [
            ("data", "d.npy".to_string(), FileUse::Read, 18),
            // Not given by the user: at the pipeline's name.
            ("report", "r.json".to_string(), FileUse::Written, 0),
            ("data", "e f.npy".to_string(), FileUse::Read, 51),
        ]
    );
}

#[test]
fn named_pipeline_errors_are_reported_at_the_pipeline_name() {
    assert_eq!(
        parse_error("test-noop, test-cycle-a"),
        "error@11: pipeline 'test-cycle-a' expands to itself: test-cycle-a -> test-cycle-b -> test-cycle-a"
    );
    assert_eq!(
        parse_error("test-bad-expansion"),
        "error@0: in pipeline 'test-bad-expansion' (expanded to 'test-noop,test-options'): missing \
         required option 'label' for pass 'test-options'"
    );
    assert_eq!(
        parse_error("test-noop,test-pipeline{suffx=1}"),
        "error@24: unknown option 'suffx' for pass 'test-pipeline'; did you mean 'suffix'?"
    );
    let deep = parse_error("test-noop,test-countdown{n=20}");
    assert!(
        deep.starts_with(
            "error@10: named pipelines nest more than 16 levels deep: test-countdown{n=20} -> \
             test-countdown{n=19} -> "
        ),
        "{deep}"
    );
    assert!(deep.ends_with("-> test-countdown{n=4}"), "{deep}");
    assert_eq!(parse("test-countdown{n=15}").len(), 16);
}

// ---- running ----------------------------------------------------------

#[test]
fn runs_passes_in_order_and_reports_changes() {
    let (ctx, module, report) =
        run_ok("test-rename-funcs{suffix=_a},test-noop,test-rename-funcs{suffix=_b}", &mut quiet());
    assert_eq!(function_names(&ctx, &module), ["main_a_b", "helper_a_b"]);
    assert!(report.changed);
    assert!(report.timing.is_none() && report.statistics.is_empty() && report.warnings.is_empty());

    let (ctx, module, report) = run_ok("test-noop", &mut quiet());
    assert_eq!(function_names(&ctx, &module), ["main", "helper"]);
    assert!(!report.changed);

    let empty = parse("  ");
    assert!(empty.is_empty());
    let (mut ctx, mut module) = fresh();
    let mut inst = Instrumentation { timing: true, ..quiet() };
    let report = empty.run(&mut ctx, &mut module, &mut inst).unwrap_or_else(|failure| panic!("{failure}"));
    assert!(!report.changed);
    let timing = report.timing.unwrap_or_default();
    assert_eq!(timing.nodes().len(), 1);
    assert!(timing.nodes()[0].children.is_empty());
}

#[test]
fn a_pipeline_runs_again_on_other_modules() {
    let manager = parse("test-rename-funcs{suffix=_z}");
    for names in [&["a"][..], &["b", "c"]] {
        let mut ctx = Context::new();
        let mut module = build_module(&mut ctx, names);
        manager.run(&mut ctx, &mut module, &mut quiet()).unwrap_or_else(|failure| panic!("{failure}"));
        let expected: Vec<String> = names.iter().map(|name| format!("{name}_z")).collect();
        assert_eq!(function_names(&ctx, &module), expected);
    }
}

#[test]
fn collects_and_renders_statistics() {
    let pipeline = "test-rename-funcs,test-noop,test-rename-funcs{suffix=_2},test-options{label=s count=12}";
    let mut inst = Instrumentation { statistics: true, ..quiet() };
    let (_, _, report) = run_ok(pipeline, &mut inst);
    assert_eq!(
        report.statistics,
        vec![
            ("test-rename-funcs".to_string(), vec![("renamed-functions", 2)]),
            ("test-rename-funcs".to_string(), vec![("renamed-functions", 2)]),
            ("test-options".to_string(), vec![("count", 12), ("sizes", 2)]),
        ]
    );
    assert_eq!(
        report.render_statistics(),
        "===- Pass statistics -===\n \
         test-rename-funcs\n   2 renamed-functions\n \
         test-rename-funcs\n   2 renamed-functions\n \
         test-options\n   12 count\n    2 sizes\n"
    );
    let (_, _, report) = run_ok(pipeline, &mut quiet());
    assert!(report.statistics.is_empty(), "statistics are off by default");
}

#[test]
fn warnings_are_collected_and_attributed_to_the_input() {
    let (_, _, report) = run_ok("test-options{label=w flag}", &mut quiet());
    assert_eq!(report.warnings.len(), 1);
    assert_eq!(report.warnings[0].to_string(), "in.qir: warning: flag set on 'w'");

    let failure = run_err("test-options{label=w flag},test-fail", &mut quiet());
    let messages: Vec<&str> = failure.diagnostics.0.iter().map(|d| d.message.as_str()).collect();
    assert_eq!(messages, ["flag set on 'w'", "test-fail failed with code 7"]);
}

// ---- printing ---------------------------------------------------------

#[test]
fn print_after_all_writes_a_header_and_the_ir_per_pass() {
    let sink = SharedBuf::default();
    let mut inst = Instrumentation {
        print_after: PassFilter::All,
        print_before: PassFilter::Named(vec!["test-noop".to_string()]),
        print_sink: Box::new(sink.clone()),
        ..quiet()
    };
    let (ctx, module, _) = run_ok("test-rename-funcs,test-noop", &mut inst);
    let text = sink.text();
    let headers: Vec<&str> = text.lines().filter(|line| line.starts_with("// -----//")).collect();
    assert_eq!(
        headers,
        [
            "// -----// IR Dump After test-rename-funcs (1) //----- //",
            "// -----// IR Dump Before test-noop (2) //----- //",
            "// -----// IR Dump After test-noop (2) //----- //",
        ]
    );
    // Needs the printer: every dump is the module as printed.
    let printed = module_to_string(&ctx, &module);
    assert!(printed.contains("@main_renamed"), "{printed}");
    assert_eq!(text.matches(printed.as_str()).count(), 3, "{text}");
    assert!(text.starts_with("// -----// IR Dump After test-rename-funcs (1) //----- //\n"));
}

#[test]
fn print_after_change_compares_the_printed_ir() {
    let sink = SharedBuf::default();
    let mut inst =
        Instrumentation { print_after_change: true, print_sink: Box::new(sink.clone()), ..quiet() };
    // The empty-suffix rename claims a change but changes nothing; only the
    // third pass really changes the IR.
    run_ok("test-noop,test-rename-funcs{suffix=\"\"},test-rename-funcs,test-noop", &mut inst);
    let text = sink.text();
    let headers: Vec<&str> = text.lines().filter(|line| line.starts_with("// -----//")).collect();
    assert_eq!(headers, ["// -----// IR Dump After test-rename-funcs (3) //----- //"], "{text}");

    // Restricted to named passes.
    let sink = SharedBuf::default();
    let mut inst = Instrumentation {
        print_after_change: true,
        print_after: PassFilter::Named(vec!["test-noop".to_string()]),
        print_sink: Box::new(sink.clone()),
        ..quiet()
    };
    run_ok("test-rename-funcs,test-noop", &mut inst);
    assert_eq!(sink.text(), "");
}

#[test]
fn print_dir_gets_one_file_per_dump() {
    let dir = TempDir::new("print-dir");
    let target = dir.0.join("dumps");
    let mut inst = Instrumentation {
        print_before: PassFilter::All,
        print_after: PassFilter::Named(vec!["test-noop".to_string()]),
        print_dir: Some(target.clone()),
        ..quiet()
    };
    run_ok("test-rename-funcs,test-noop", &mut inst);
    let dumps = TempDir(target);
    assert_eq!(
        dumps.files(),
        ["01-test-rename-funcs-before.qir", "02-test-noop-after.qir", "02-test-noop-before.qir"]
    );
    let first = read(&dumps.0.join("01-test-rename-funcs-before.qir"));
    assert!(first.starts_with("// -----// IR Dump Before test-rename-funcs (1) //----- //\n"), "{first}");
    // Needs the printer.
    assert!(first.contains("@main("), "{first}");
    let after = read(&dumps.0.join("02-test-noop-after.qir"));
    assert!(after.contains("@main_renamed("), "{after}");
}

#[test]
fn print_failures_become_warnings() {
    let dir = TempDir::new("print-fail");
    let blocker = dir.0.join("file");
    std::fs::write(&blocker, "not a directory").unwrap_or_else(|error| panic!("{error}"));
    let mut inst =
        Instrumentation { print_after: PassFilter::All, print_dir: Some(blocker.join("sub")), ..quiet() };
    let (_, _, report) = run_ok("test-noop", &mut inst);
    assert_eq!(report.warnings.len(), 1);
    assert!(
        report.warnings[0].message.starts_with("cannot print the IR after pass 'test-noop': "),
        "{}",
        report.warnings[0]
    );
}

// ---- failures ---------------------------------------------------------

#[test]
fn verify_each_catches_invalid_ir_and_names_the_pass() {
    // Needs the verifier: it must reject the unregistered `bogus.op`.
    let failure = run_err("test-noop,test-break-ir,test-noop", &mut quiet());
    assert_eq!((failure.pass.as_str(), failure.position), ("test-break-ir", 2));
    assert_eq!(
        failure.diagnostics.0[0].to_string(),
        "in.qir: error: pass 'test-break-ir' produced invalid IR"
    );
    assert!(failure.diagnostics.0.len() > 1, "the verifier's own diagnostics follow");
    assert_eq!(failure.message(), "pass 'test-break-ir' failed");
    assert!(failure.reproducer.is_none() && failure.reproducer_message.is_none());

    let mut unchecked = Instrumentation { verify_each: false, ..quiet() };
    run_ok("test-noop,test-break-ir,test-noop", &mut unchecked);
}

#[test]
fn a_failing_pass_writes_a_reproducer_of_its_input() {
    let dir = TempDir::new("reproducer");
    let mut inst = Instrumentation { reproducer_dir: Some(dir.0.clone()), ..quiet() };
    let failure = run_err("test-rename-funcs{suffix=_a},test-fail{code=3},test-noop", &mut inst);
    assert_eq!((failure.pass.as_str(), failure.position), ("test-fail", 2));
    assert_eq!(failure.diagnostics.to_string(), "in.qir: error: test-fail failed with code 3\n");
    let file_name = format!("qopt-reproducer-{}-test-fail.qir", std::process::id());
    let path = dir.0.join(&file_name);
    assert_eq!(failure.reproducer.as_deref(), Some(path.as_path()));
    assert_eq!(dir.files(), std::slice::from_ref(&file_name), "no temporary file is left behind");
    assert_eq!(
        failure.message(),
        format!(
            "pass 'test-fail' failed\nreproducer written to {0}; replay with: qopt {0} --pass='test-fail{{code=3}}'",
            path.display()
        )
    );
    assert_eq!(failure.to_string(), failure.message());

    let text = read(&path);
    let (header, body) = text.split_once('\n').unwrap_or_else(|| panic!("{text}"));
    assert_eq!(header, "// qopt-reproducer: --pass='test-fail{code=3}'");
    // The body is the IR before the failing pass, not what it left behind.
    let (mut ctx, mut expected) = fresh();
    let mut cx = PassContext::new(&mut ctx);
    let options = parse("test-rename-funcs{suffix=_a}");
    let Some(Entry::Pass(scheduled)) = options.entries.first() else { panic!("one pass") };
    RenameFuncs.run(&mut cx, &mut expected, &scheduled.options).unwrap_or_else(|error| panic!("{error}"));
    // Needs the printer and the parser.
    assert_eq!(body, module_to_string(&ctx, &expected));
    let mut replay_ctx = Context::new();
    let replayed = parse_module(&mut replay_ctx, text.as_bytes(), &file_name)
        .unwrap_or_else(|diagnostics| panic!("{diagnostics}"));
    assert_eq!(function_names(&replay_ctx, &replayed), ["main_a", "helper_a"]);
}

#[test]
fn the_reproducer_replays_with_unregistered_ops_allowed() {
    let dir = TempDir::new("reproducer-unregistered");
    let mut inst =
        Instrumentation { reproducer_dir: Some(dir.0.clone()), tool_name: "myopt".into(), ..quiet() };
    let (mut ctx, mut module) = fresh();
    ctx.set_allow_unregistered(true);
    let failure = parse("test-fail")
        .run(&mut ctx, &mut module, &mut inst)
        .err()
        .unwrap_or_else(|| panic!("test-fail should fail"));
    let path = dir.0.join(format!("myopt-reproducer-{}-test-fail.qir", std::process::id()));
    assert_eq!(failure.reproducer.as_deref(), Some(path.as_path()));
    assert!(failure.message().ends_with(&format!(
        "replay with: myopt {} --pass='test-fail' --allow-unregistered-dialect",
        path.display()
    )));
    let text = read(&path);
    assert!(
        text.starts_with("// myopt-reproducer: --pass='test-fail' --allow-unregistered-dialect\n"),
        "{text}"
    );
}

/// A pass that refuses its input (bad data, an option it cannot honour)
/// has said what is wrong: no reproducer, which would only copy the input.
#[test]
fn a_pass_refusing_its_input_writes_no_reproducer() {
    let dir = TempDir::new("reproducer-refusal");
    let mut inst = Instrumentation { reproducer_dir: Some(dir.0.clone()), ..quiet() };
    let failure = run_err("test-noop,test-fail{refuse}", &mut inst);
    assert_eq!((failure.pass.as_str(), failure.position), ("test-fail", 2));
    assert!(failure.reproducer.is_none() && failure.reproducer_message.is_none());
    assert_eq!(failure.message(), "pass 'test-fail' failed");
    assert!(dir.files().is_empty(), "{:?}", dir.files());
}

#[test]
fn an_unwritable_reproducer_is_reported_with_the_failure() {
    let dir = TempDir::new("reproducer-blocked");
    let blocker = dir.0.join("file");
    std::fs::write(&blocker, "not a directory").unwrap_or_else(|error| panic!("{error}"));
    let mut inst = Instrumentation { reproducer_dir: Some(blocker.join("sub")), ..quiet() };
    let failure = run_err("test-fail", &mut inst);
    assert_eq!(failure.pass, "test-fail");
    assert!(failure.reproducer.is_none());
    let message = failure.message();
    assert!(message.starts_with("pass 'test-fail' failed\ncould not write a reproducer to "), "{message}");
}

#[test]
fn a_panicking_pass_fails_like_an_error() {
    let failure = run_err("test-noop,test-panic", &mut quiet());
    assert_eq!((failure.pass.as_str(), failure.position), ("test-panic", 2));
    assert_eq!(
        failure.diagnostics.0[0].message,
        "pass 'test-panic' panicked: test-panic panicked on purpose"
    );
}

// ---- hooks and timing -------------------------------------------------

/// Records every call; fails after the pass at `fail_at`.
struct Recorder {
    calls: Arc<Mutex<Vec<String>>>,
    fail_at: usize,
}

impl PassInstrumentation for Recorder {
    fn before_pass(&mut self, run: &PassRun<'_>, _: &mut Context, _: &Module) -> Result<(), Diagnostics> {
        let mut calls = self.calls.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        calls.push(format!("before {} {}", run.position, run.text));
        Ok(())
    }
    fn after_pass(
        &mut self,
        run: &PassRun<'_>,
        outcome: PassOutcome,
        _: &mut Context,
        _: &Module,
    ) -> Result<(), Diagnostics> {
        let mut calls = self.calls.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        calls.push(format!("after {} {outcome:?}", run.position));
        if run.position == self.fail_at {
            let error = Diagnostic::error(None, SrcPos::NONE, "hook says no");
            return Err(Diagnostics(vec![error]));
        }
        Ok(())
    }
}

#[test]
fn hooks_run_around_every_pass_and_can_fail_it() {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let recorder = Recorder { calls: calls.clone(), fail_at: 2 };
    let mut inst = Instrumentation { hooks: vec![Box::new(recorder)], ..quiet() };
    let failure = run_err("test-rename-funcs{suffix=_h},test-noop,test-noop", &mut inst);
    assert_eq!((failure.pass.as_str(), failure.position), ("test-noop", 2));
    assert_eq!(failure.diagnostics.to_string(), "in.qir: error: hook says no\n");
    let calls = calls.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone();
    assert_eq!(
        calls,
        [
            "before 1 test-rename-funcs{suffix=_h}",
            "after 1 Changed",
            "before 2 test-noop",
            "after 2 Unchanged"
        ]
    );
    assert_eq!(inst.hooks.len(), 1, "hooks are given back after the run");
}

#[test]
fn timing_tree_has_a_line_per_pass_with_its_verification() {
    let mut inst = Instrumentation { timing: true, ..quiet() };
    let (_, _, report) = run_ok("test-noop,test-pipeline,test-noop", &mut inst);
    let Some(timing) = report.timing else { panic!("timing was requested") };
    let report = timing.render_with(|_| Duration::ZERO);
    let lines: Vec<&str> = report.lines().skip(6).collect();
    assert_eq!(
        lines,
        [
            "    0.0000 (  0.0%)  pipeline",
            "    0.0000 (  0.0%)    test-noop",
            "    0.0000 (  0.0%)      verify",
            "    0.0000 (  0.0%)    test-pipeline",
            "    0.0000 (  0.0%)      test-rename-funcs",
            "    0.0000 (  0.0%)        verify",
            "    0.0000 (  0.0%)      test-noop",
            "    0.0000 (  0.0%)        verify",
            "    0.0000 (  0.0%)    test-noop",
            "    0.0000 (  0.0%)      verify",
        ],
        "{report}"
    );
    let pipeline = &timing.nodes()[0];
    let first = &pipeline.children[0];
    assert!(first.wall >= first.children[0].wall, "a pass's time includes its verification");

    let mut driver = TimingTree::new();
    driver.add_phase("parse", Duration::from_millis(1));
    driver.add_child(timing);
    assert_eq!(driver.nodes().len(), 2);

    let mut inst = Instrumentation { timing: true, verify_each: false, ..quiet() };
    let (_, _, report) = run_ok("test-noop", &mut inst);
    let timing = report.timing.unwrap_or_default();
    assert!(timing.nodes()[0].children[0].children.is_empty(), "no verification, no verify line");
}

#[test]
fn phases_a_pass_records_nest_under_it_before_its_verification() {
    let mut inst = Instrumentation { timing: true, ..quiet() };
    let (_, _, report) = run_ok("test-phases", &mut inst);
    let Some(timing) = report.timing else { panic!("timing was requested") };
    let pass = &timing.nodes()[0].children[0];
    let phases: Vec<(&str, Duration)> = pass.children.iter().map(|c| (c.name.as_str(), c.wall)).collect();
    let ms = Duration::from_millis;
    assert_eq!(phases[..2], [("load", ms(2)), ("work", ms(2))], "repeated names add up, first order kept");
    assert_eq!(phases[2].0, "verify");
}
