//! What `qopt` does with a user's mistakes on a quantization run: options
//! that cannot work are usage errors with a caret before any data is read,
//! options that would do nothing are refused, a file the run reads is never
//! written over, a refused input leaves no reproducer behind, and a result
//! whose accumulators can wrap is an error, not a warning.

use qopt_ir_core::ScratchDir;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const MODEL: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/digits_mlp.qir");
const CALIB: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/models/digits_mlp/calib.npy");

/// A directory of its own for one test (removed when the test ends), with
/// the model and a copy of the calibration data.
struct Scratch(ScratchDir);

impl Scratch {
    fn with_model_and_data(name: &str) -> Scratch {
        let scratch = Scratch(ScratchDir::new(&format!("user-errors-{name}")));
        std::fs::copy(MODEL, scratch.path("m.qir")).expect("copy the model");
        std::fs::copy(CALIB, scratch.path("c.npy")).expect("copy the data");
        scratch
    }

    fn dir(&self) -> &Path {
        self.0.path()
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir().join(name)
    }

    fn files(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.dir())
            .expect("list scratch dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }
}

/// Runs qopt in `dir` with reproducers going to `dir/repro`.
fn qopt_in(dir: &Path, args: &[&str]) -> Output {
    let repro = dir.join("repro");
    std::fs::create_dir_all(&repro).expect("create reproducer dir");
    Command::new(env!("CARGO_BIN_EXE_qopt"))
        .current_dir(dir)
        .args(args)
        .arg("--reproducer-dir")
        .arg(&repro)
        .output()
        .expect("qopt runs")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn reproducers(dir: &Path) -> usize {
    std::fs::read_dir(dir.join("repro")).map_or(0, |entries| entries.count())
}

/// The column of the caret line's `^` and the pipeline line above it.
fn caret_under(err: &str) -> Option<&str> {
    let lines: Vec<&str> = err.lines().collect();
    let at = lines.iter().position(|l| l.trim_start().starts_with('^') && l.trim() == "^")?;
    let column = lines[at].find('^')?;
    lines.get(at.checked_sub(1)?).and_then(|pipeline| pipeline.get(column..))
}

#[test]
fn an_output_that_is_an_input_is_refused_and_the_input_kept() {
    let s = Scratch::with_model_and_data("over-inputs");
    let data = std::fs::read(s.path("c.npy")).expect("read data");
    let model = std::fs::read(s.path("m.qir")).expect("read model");
    let cases: [(&[&str], &str); 5] = [
        (&["m.qir", "--pass=quantize{data=c.npy}", "-o", "c.npy"], "c.npy}"),
        (&["m.qir", "--pass=collect-calibration-data{data=c.npy out=c.npy}", "-o", "/dev/null"], "c.npy}"),
        (&["m.qir", "--pass=collect-calibration-data{data=c.npy out=m.qir}", "-o", "/dev/null"], "m.qir}"),
        (&["m.qir", "--pass=quantize-search{data=c.npy report=./m.qir}", "-o", "/dev/null"], "./m.qir}"),
        (&["m.qir", "--pass=collect-calibration-data{data=c.npy out=x.npz}", "-o", "x.npz"], "x.npz}"),
    ];
    for (args, at) in cases {
        let out = qopt_in(s.dir(), args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("would destroy"), "{args:?}: {err}");
        assert_eq!(caret_under(&err), Some(at), "{args:?}: {err}");
        assert_eq!(std::fs::read(s.path("c.npy")).expect("data"), data, "{args:?} changed the data");
        assert_eq!(std::fs::read(s.path("m.qir")).expect("model"), model, "{args:?} changed the model");
        assert!(!s.path("x.npz").exists());
    }
    // The model itself may be rewritten in place: qopt reads it first.
    let out = qopt_in(s.dir(), &["m.qir", "--pass=canonicalize", "-o", "m.qir"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn bad_option_values_are_usage_errors_at_the_option_before_any_data_runs() {
    let s = Scratch::with_model_and_data("bad-values");
    // `data=missing.npy` would fail once calibration starts: these must fail first.
    let cases = [
        ("quantize{data=missing.npy weight-type=i9x}", "i9x}"),
        ("quantize{data=missing.npy activation-type=f32}", "f32}"),
        ("quantize{data=missing.npy observer=nosuch}", "nosuch}"),
        ("quantize{data=missing.npy method=nosuch}", "nosuch}"),
        ("quantize{data=missing.npy ops=[fp.bogus]}", "[fp.bogus]}"),
        ("quantize{data=missing.npy percentile=99.9}", "99.9}"),
        ("quantize{data=missing.npy bins=512}", "512}"),
        ("quantize{data=missing.npy averaging-constant=0.5}", "0.5}"),
        ("quantize{data=missing.npy threads=100000}", "100000}"),
        ("insert-fakeq{weight-type=s8}", "s8}"),
        ("insert-observers{observer=histogram averaging-constant=0.5}", "0.5}"),
    ];
    for (pipeline, at) in cases {
        let out = qopt_in(s.dir(), &["m.qir", &format!("--pass={pipeline}"), "-o", "out.qir"]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{pipeline}: {err}");
        assert_eq!(caret_under(&err), Some(at), "{pipeline}: {err}");
        // The caret shows the option: the pipeline's expansion would be noise.
        assert!(!err.contains("expanded to"), "{pipeline}: {err}");
        assert!(!err.contains("missing.npy: cannot open"), "{pipeline} ran calibration: {err}");
        assert!(!s.path("out.qir").exists() && reproducers(s.dir()) == 0, "{pipeline}: {:?}", s.files());
    }
}

#[test]
fn a_skip_name_no_op_has_is_an_error_with_a_suggestion() {
    let s = Scratch::with_model_and_data("skip-typo");
    let out = qopt_in(s.dir(), &["m.qir", "--pass=quantize{data=c.npy skip=[relu0]}", "-o", "out.qir"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("'skip' names 'relu0' that no op's location has, so it would skip nothing"),
        "{err}"
    );
    assert!(err.contains("did you mean 'relu0_4'?"), "{err}");
    assert!(!s.path("out.qir").exists());
    assert_eq!(reproducers(s.dir()), 0, "a user error wrote a reproducer");
}

#[test]
fn skipping_the_first_layer_leaves_the_model_input_float() {
    let s = Scratch::with_model_and_data("skip-first");
    let out = qopt_in(s.dir(), &["m.qir", "--pass=quantize{data=c.npy skip=[fc0_3]}", "-o", "out.qir"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = std::fs::read_to_string(s.path("out.qir")).expect("output");
    assert!(text.contains("fp.dense(%arg0,"), "the skipped layer does not read the argument:\n{text}");
    assert!(!text.contains("qnn.quantize(%arg0)"), "the model input is still quantized:\n{text}");
}

#[test]
fn a_histogram_method_in_quantize_observes_with_histograms() {
    let s = Scratch::with_model_and_data("percentile");
    let out = qopt_in(s.dir(), &["m.qir", "--pass=quantize{data=c.npy method=percentile}", "-o", "out.qir"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // Asked for a histogram method with another observer: one error, not one per observer.
    let pipeline = "--pass=quantize{data=c.npy method=percentile observer=minmax}";
    let out = qopt_in(s.dir(), &["m.qir", pipeline, "-o", "out2.qir"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.matches("needs a histogram").count(), 1, "{err}");
    assert!(err.contains("(nor do 3 others)"), "{err}");
}

#[test]
fn a_refused_input_writes_no_reproducer() {
    let s = Scratch::with_model_and_data("no-reproducer");
    let out = qopt_in(s.dir(), &["m.qir", "--pass=quantize{data=missing.npy}", "-o", "out.qir"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("missing.npy"), "{err}");
    assert!(!err.contains("reproducer"), "{err}");
    assert_eq!(reproducers(s.dir()), 0, "{:?}", s.files());
}

#[cfg(unix)]
#[test]
fn a_fifo_as_data_is_refused_at_once() {
    let s = Scratch::with_model_and_data("fifo");
    let fifo = s.path("f.npy");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo runs");
    assert!(made.success());
    let mut child = Command::new(env!("CARGO_BIN_EXE_qopt"))
        .current_dir(s.dir())
        .args(["m.qir", "--pass=quantize{data=f.npy}", "-o", "/dev/null"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("qopt starts");
    let start = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if start.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            panic!("qopt blocked on the FIFO");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("output");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("f.npy: is a FIFO (named pipe), not a regular file"), "{err}");
}

#[test]
fn a_result_whose_accumulators_can_wrap_is_an_error_naming_the_layers() {
    let s = Scratch::with_model_and_data("w16a16");
    let pipeline = "--pass=quantize{data=c.npy activation-type=i16 weight-type=i16}";
    let out = qopt_in(s.dir(), &["m.qir", pipeline, "-o", "out.qir"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("error: the i32 accumulator can overflow"), "{err}");
    assert!(err.contains("loc(\"fc0_3\")"), "{err}");
    assert!(err.contains("pass 'quant-lint' failed"), "{err}");
    assert!(!s.path("out.qir").exists());
    assert_eq!(reproducers(s.dir()), 0);
    // W8A16 keeps its accumulators in range.
    let pipeline = "--pass=quantize{data=c.npy activation-type=i16}";
    let out = qopt_in(s.dir(), &["m.qir", pipeline, "-o", "out.qir"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn writing_a_file_says_what_ran_and_where_it_went() {
    let s = Scratch::with_model_and_data("summary");
    let out = qopt_in(s.dir(), &["m.qir", "--pass=quantize{data=c.npy}", "-o", "out.qir"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.starts_with(
            "qopt: quantize{data=c.npy}: 17 passes; 5 qnn ops, 0 float ops, 1 quantize, 1 dequantize, "
        ),
        "{err}"
    );
    assert!(last.ends_with("; 0 warnings -> out.qir"), "{err}");
    // Standard output and -q print no such line.
    for args in [&["m.qir"][..], &["m.qir", "-o", "out.qir", "-q"][..]] {
        let out = qopt_in(s.dir(), args);
        assert_eq!(out.status.code(), Some(0));
        assert!(stderr(&out).is_empty(), "{args:?}: {}", stderr(&out));
    }
}

#[test]
fn verify_numerics_refuses_an_input_count_it_would_run_for_minutes() {
    let s = Scratch::with_model_and_data("numerics-bound");
    let out = qopt_in(s.dir(), &["m.qir", "--pass=cse", "--verify-numerics=1000000"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("1000000 is not in 1..=100000"), "{}", stderr(&out));
}
