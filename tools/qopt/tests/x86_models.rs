//! The x86 backend on every test model (`tests/models`) after the `quantize`
//! pipeline, as a user runs it: `qimport`, `qopt --pass='quantize{...}'`,
//! then `qrun --batch` over the test samples with the interpreter and with
//! `--backend=x86` (one thread and two). The outputs must be identical bit
//! for bit. Also with `reduce-range` weights, which put every conv and dense
//! on the x86 backend's `vpmaddubsw` path on CPUs without VNNI; and every
//! exporter-style model of `tests/import-models`, whose float heads run by
//! host calls.

mod common;

use common::c::{c_compiler, c_program, host_call_library, RUST_STATIC_LIBRARY_LIBS};
use common::{repo, scratch};
use qopt_npy as npy;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Runs a tool; panics with its stderr on failure; returns stdout.
fn run(tool: &str, args: &[&str]) -> String {
    let out = Command::new(tool).args(args).output().expect("the tool starts");
    assert!(out.status.success(), "{tool} {args:?} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs `q` on the samples of `input` (along dimension 0) in the
/// interpreter, then with `--backend=x86` on one thread and two, and asserts
/// that the x86 outputs are the interpreter's bytes; returns the file of the
/// interpreter's outputs.
fn assert_x86_matches_interpreter(what: &str, q: &Path, input: &Path, work: &Path) -> PathBuf {
    let p = |p: &Path| p.display().to_string();
    let reference = work.join("interp.npz");
    run(env!("CARGO_BIN_EXE_qrun"), &[&p(q), "--input", &p(input), "--batch", "-o", &p(&reference)]);
    for threads in ["1", "2"] {
        let compiled = work.join(format!("x86-{threads}.npz"));
        let x86 = [
            &p(q),
            "--input",
            &p(input),
            "--batch",
            "--backend=x86",
            "--threads",
            threads,
            "-o",
            &p(&compiled),
        ];
        run(env!("CARGO_BIN_EXE_qrun"), &x86);
        assert_eq!(
            std::fs::read(&reference).unwrap(),
            std::fs::read(&compiled).unwrap(),
            "{what}, {threads} thread(s): the x86 backend's outputs differ from the interpreter's"
        );
    }
    reference
}

fn check_model(name: &str) {
    if !std::is_x86_feature_detected!("avx2") {
        println!("notice: x86 backend on {name}: skipped, this CPU lacks AVX2");
        return;
    }
    let dir = repo().join("tests/models").join(name);
    let work = scratch(name);
    let fp = work.join("fp.qir");
    let p = |p: &Path| p.display().to_string();
    run(env!("CARGO_BIN_EXE_qimport"), &[&p(&dir.join("model.onnx")), "-o", &p(&fp)]);
    for options in ["", " reduce-range=true"] {
        let q = work.join("q.qir");
        let pipeline = format!("--pass=quantize{{data={}{options}}}", p(&dir.join("calib.npy")));
        run(env!("CARGO_BIN_EXE_qopt"), &[&p(&fp), &pipeline, "-o", &p(&q)]);
        assert_x86_matches_interpreter(&format!("{name}{options}"), &q, &dir.join("test.npy"), &work);
    }
}

#[test]
fn digits_mlp() {
    check_model("digits_mlp");
}

#[test]
fn digits_cnn() {
    check_model("digits_cnn");
}

#[test]
fn resnet_tiny() {
    check_model("resnet_tiny");
}

#[test]
fn mnist_mbv2() {
    check_model("mnist_mbv2");
}

/// Every exporter-style model of `tests/import-models` (softmax and box
/// decoding heads, transposed convs, layer norms, token ids into a gather)
/// after `quantize` calibrated on its sample: the ops the backend does not
/// compile run by host calls, and the outputs are the interpreter's bits on
/// one thread and two; and each model's `qcompile` object, linked into a C
/// program with the host-call library, writes the same bytes from `_run`
/// and `_run_with_workspace` (under a hostile MXCSR).
#[test]
fn exporter_style_models_run_whole_after_quantize() {
    if !std::is_x86_feature_detected!("avx2") {
        println!("notice: exporter-style models on x86: skipped, this CPU lacks AVX2");
        return;
    }
    let p = |p: &Path| p.display().to_string();
    let models = repo().join("tests/import-models");
    let mut names: Vec<String> = std::fs::read_dir(&models)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.path().join("model.onnx").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert!(names.len() >= 6, "{names:?}");
    for name in names {
        let dir = models.join(&name);
        let work = scratch(&name);
        let (fp, q) = (work.join("fp.qir"), work.join("q.qir"));
        let args = std::fs::read_to_string(dir.join("args")).unwrap();
        let mut import = vec![p(&dir.join("model.onnx")), "-o".into(), p(&fp)];
        import.extend(args.split_whitespace().map(String::from));
        run(env!("CARGO_BIN_EXE_qimport"), &import.iter().map(String::as_str).collect::<Vec<_>>());
        let sample = p(&dir.join("input_0.npy"));
        run(
            env!("CARGO_BIN_EXE_qopt"),
            &[&p(&fp), &format!("--pass=quantize{{data={sample}}}"), "-o", &p(&q)],
        );
        let reference = assert_x86_matches_interpreter(&name, &q, &dir.join("input_0.npy"), &work);
        linked_from_c(&name, &q, &dir.join("input_0.npy"), &reference, &work);
    }
}

/// Compiles `q` with qcompile, links it from C with the host-call library,
/// runs it on `input` and compares every output's bytes with `reference`
/// (qrun's); prints a notice and returns without a C compiler.
fn linked_from_c(name: &str, q: &Path, input: &Path, reference: &Path, work: &Path) {
    let Some(cc) = c_compiler(name) else {
        return;
    };
    let p = |p: &Path| p.display().to_string();
    let object = work.join("model.o");
    run(env!("CARGO_BIN_EXE_qcompile"), &[&p(q), "-o", &p(&object)]);
    let expected = npy::read_npz_file(reference).expect("qrun's outputs");
    let main_c = work.join("main.c");
    std::fs::write(&main_c, c_program("model", 1, expected.len())).unwrap();
    let prog = work.join("prog");
    let library = host_call_library().expect("libqopt_host_calls.a beside the test");
    let linked = Command::new(&cc)
        .args(["-std=c11", "-O1", "-o", &p(&prog), &p(&main_c), &p(&object), &p(&library)])
        .args(RUST_STATIC_LIBRARY_LIBS)
        .output()
        .expect("the C compiler starts");
    assert!(linked.status.success(), "{name}: linking failed:\n{}", String::from_utf8_lossy(&linked.stderr));
    let input_bin = work.join("input.bin");
    std::fs::write(&input_bin, npy::read_npy_file(input).expect("the input").data).unwrap();
    for mode in ["run", "workspace"] {
        let outputs: Vec<_> = (0..expected.len()).map(|j| work.join(format!("out{j}-{mode}.bin"))).collect();
        let ran = Command::new(&prog)
            .arg(mode)
            .arg(&input_bin)
            .args(&outputs)
            .output()
            .expect("the program starts");
        assert!(ran.status.success(), "{name}: {mode}: {}", String::from_utf8_lossy(&ran.stderr));
        for (j, ((_, want), got)) in expected.iter().zip(&outputs).enumerate() {
            assert_eq!(
                std::fs::read(got).unwrap(),
                want.data,
                "{name}: {mode}: output {j} differs from qrun's"
            );
        }
    }
}

/// The first `n` samples (along dimension 0) of the `.npy` at `from`, written to `to`.
fn first_samples(from: &Path, to: &Path, n: usize) {
    let mut array = npy::read_npy_file(from).expect("a data file");
    let per_sample = array.data.len() / array.shape[0].max(1);
    array.shape[0] = array.shape[0].min(n);
    array.data.truncate(per_sample * array.shape[0]);
    npy::write_npy_file(to, &array).unwrap();
}

/// `"key": <number>` in the JSON text `json`, after `after`.
fn json_number(json: &str, after: &str, key: &str) -> f64 {
    let from = json.find(after).unwrap_or_else(|| panic!("no {after} in {json}"));
    let tail = &json[from..];
    let at =
        tail.find(&format!("\"{key}\": ")).unwrap_or_else(|| panic!("no {key} in {tail}")) + key.len() + 4;
    let end = tail[at..].find([',', '}']).map_or(tail.len(), |e| at + e);
    tail[at..end].trim().parse().unwrap_or_else(|_| panic!("{key} is not a number in {tail}"))
}

/// Every exporter-style model of `tests/import-models` quantized in mixed
/// precision ([`check_mixed_precision`]); the reference models are the
/// `--ignored` test below (3 minutes in a debug build).
#[test]
fn mixed_precision_models_run_whole_after_quantize_search() {
    check_mixed_precision(&["tests/import-models"]);
}

/// [`check_mixed_precision`] on the reference models of `tests/models`.
#[test]
#[ignore = "heavy: two quantize-searches per reference model in a debug build"]
fn mixed_precision_reference_models_run_whole_after_quantize_search() {
    check_mixed_precision(&["tests/models"]);
}

/// Every model of `folders` quantized in mixed precision, as
/// `quantize-search` makes it: a first search measures the int8 model's
/// output SQNR, a second one asks for 3 dB more (`min-sqnr`), so that some
/// values are kept i16, and `quantize` replays its hints. The x86 backend
/// runs the mixed model (its i16 regions by host calls) with the
/// interpreter's bits on one thread and two, and across the models some
/// value is always kept wide. A model with `calib.npy` is searched on its
/// first 8 samples, an exporter-style one on its `input_0.npy`.
fn check_mixed_precision(folders: &[&str]) {
    if !std::is_x86_feature_detected!("avx2") {
        println!("notice: mixed-precision models on x86: skipped, this CPU lacks AVX2");
        return;
    }
    let p = |p: &Path| p.display().to_string();
    let mut models: Vec<PathBuf> = Vec::new();
    for folder in folders {
        let mut dirs: Vec<_> = std::fs::read_dir(repo().join(folder))
            .unwrap()
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|d| d.join("model.onnx").is_file())
            .collect();
        dirs.sort();
        models.extend(dirs);
    }
    assert!(models.len() >= 4, "{models:?}");
    let mut widened = 0;
    for dir in models {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let work = scratch(&format!("mixed-{name}"));
        let (fp, hinted, mixed) = (work.join("fp.qir"), work.join("hinted.qir"), work.join("mixed.qir"));
        let mut import = vec![p(&dir.join("model.onnx")), "-o".into(), p(&fp)];
        let data = if dir.join("calib.npy").is_file() {
            let data = work.join("data.npy");
            first_samples(&dir.join("calib.npy"), &data, 8);
            data
        } else {
            let args = std::fs::read_to_string(dir.join("args")).unwrap();
            import.extend(args.split_whitespace().map(String::from));
            dir.join("input_0.npy")
        };
        run(env!("CARGO_BIN_EXE_qimport"), &import.iter().map(String::as_str).collect::<Vec<_>>());
        let report = work.join("report.json");
        let search = |goal: &str| {
            let pass = format!("--pass=quantize-search{{data={} report={}{goal}}}", p(&data), p(&report));
            run(env!("CARGO_BIN_EXE_qopt"), &[&p(&fp), &pass, "-o", &p(&hinted)]);
            std::fs::read_to_string(&report).unwrap()
        };
        let int8_db = json_number(&search(""), "\"quantized\"", "sqnr_db");
        search(&format!(" min-sqnr={:.2}", int8_db + 3.0));
        let hints = std::fs::read_to_string(&hinted).unwrap().matches("qnn.cast_hint").count();
        widened += hints;
        run(
            env!("CARGO_BIN_EXE_qopt"),
            &[&p(&hinted), &format!("--pass=quantize{{data={}}}", p(&data)), "-o", &p(&mixed)],
        );
        assert_x86_matches_interpreter(&format!("{name} ({hints} values kept i16)"), &mixed, &data, &work);
    }
    assert!(widened > 0, "no model kept a value wide");
}
