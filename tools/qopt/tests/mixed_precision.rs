//! Mixed precision end to end (`docs/quantization.md` §13), as a user runs
//! it: `quantize-search` on a float model writes `qnn.cast_hint`s, `quantize`
//! replays them into a model with i8 and i16 regions that `quant-lint`
//! passes, `qrun` runs it in the interpreter and, with `--backend=x86`, falls
//! back to the interpreter with one notice; `qcompile` lists the ops it
//! cannot compile. The model and data are the quantize-search golden test's
//! (`scripts/make_search_fixtures.py`): fc1's output has one channel 30 times
//! the range of the others, so i8 loses it and i16 keeps it.

use qopt_interp::npy;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn scratch() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("qopt-mixed-precision-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn tool(tool: &str, args: &[&str]) -> Output {
    Command::new(tool).args(args).output().expect("the tool starts")
}

/// Runs a tool; panics with its stderr on failure; returns stderr.
fn run(name: &str, args: &[&str]) -> String {
    let out = tool(name, args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{name} {args:?} failed:\n{stderr}");
    stderr
}

fn path(p: &Path) -> String {
    p.to_str().unwrap().to_string()
}

fn floats(file: &Path) -> Vec<f64> {
    npy::read_npy_file(file).unwrap().to_vec::<f32>().unwrap().into_iter().map(f64::from).collect()
}

fn sqnr(out: &[f64], reference: &[f64]) -> f64 {
    let signal: f64 = reference.iter().map(|r| r * r).sum();
    let noise: f64 = out.iter().zip(reference).map(|(o, r)| (o - r) * (o - r)).sum();
    10.0 * (signal / noise).log10()
}

/// The first function of the quantize-search golden test.
fn float_model(dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(repo().join("tests/passes/quantize-search.qir")).unwrap();
    let start = text.find("func.func").unwrap();
    let end = text[start..].find("// -----").map_or(text.len(), |e| start + e);
    let file = dir.join("float.qir");
    std::fs::write(&file, &text[start..end]).unwrap();
    file
}

#[test]
fn searched_hints_replay_into_a_lint_clean_mixed_model_that_runs() {
    let dir = scratch();
    let data = path(&repo().join("tests/passes/data/search-x8.npy"));
    let float = float_model(&dir);
    let (hinted, mixed, int8, report) =
        (dir.join("hinted.qir"), dir.join("mixed.qir"), dir.join("int8.qir"), dir.join("report.json"));
    let search = format!("--pass=quantize-search{{data={data} max-drop=0 report={}}}", path(&report));
    let note = run(env!("CARGO_BIN_EXE_qopt"), &[&path(&float), &search, "-o", &path(&hinted)]);
    assert!(note.contains("kept 1 of 4 values i16"), "{note}");
    let hinted_text = std::fs::read_to_string(&hinted).unwrap();
    assert_eq!(hinted_text.matches("qnn.cast_hint").count(), 1, "{hinted_text}");
    let hint = hinted_text.lines().find(|l| l.contains("qnn.cast_hint")).unwrap();
    assert!(hint.contains(r#"{kind = "i16"}"#) && hint.ends_with(r#"loc("fc1")"#), "{hint}");
    let json = std::fs::read_to_string(&report).unwrap();
    assert!(
        json.contains(r#""layer": "fc1", "op": "fp.dense""#) && json.contains(r#""decision": "i16""#),
        "{json}"
    );

    // quantize replays the hint; quant-lint (its last pass) stays silent.
    let quantize = format!("--pass=quantize{{data={data}}}");
    let stderr = run(env!("CARGO_BIN_EXE_qopt"), &[&path(&hinted), &quantize, "-o", &path(&mixed)]);
    assert!(!stderr.contains("warning"), "{stderr}");
    run(env!("CARGO_BIN_EXE_qopt"), &[&path(&float), &quantize, "-o", &path(&int8)]);
    let text = std::fs::read_to_string(&mixed).unwrap();
    assert!(!text.contains("fp.dense") && !text.contains("qnn.cast_hint"), "{text}");
    assert_eq!(text.matches("-> tensor<1x16x!qnn.uniform<i16:").count(), 1, "fc1 writes i16:\n{text}");
    assert!(text.contains("qnn.dense_relu(%") && text.contains("(tensor<1x16x!qnn.uniform<i16:"), "{text}");
    run(
        env!("CARGO_BIN_EXE_qopt"),
        &[&path(&mixed), "--pass=quant-lint{werror=true}", "-o", &path(&dir.join("l.qir"))],
    );

    // The interpreter runs it, and the i16 region recovers what i8 loses.
    let outputs: Vec<Vec<f64>> = [&float, &int8, &mixed]
        .iter()
        .map(|model| {
            let out = dir.join(format!("{}.npy", model.file_stem().unwrap().to_str().unwrap()));
            run(env!("CARGO_BIN_EXE_qrun"), &[&path(model), "--input", &data, "--batch", "-o", &path(&out)]);
            floats(&out)
        })
        .collect();
    let (int8_db, mixed_db) = (sqnr(&outputs[1], &outputs[0]), sqnr(&outputs[2], &outputs[0]));
    assert!(mixed_db > int8_db + 10.0, "mixed {mixed_db} dB, int8 {int8_db} dB");

    // x86: one notice naming the i16 ops, then the interpreter's outputs.
    let x86_out = dir.join("x86.npy");
    let stderr = run(
        env!("CARGO_BIN_EXE_qrun"),
        &[&path(&mixed), "--input", &data, "--batch", "--backend=x86", "-o", &path(&x86_out)],
    );
    assert_eq!(stderr.matches("note:").count(), 1, "{stderr}");
    assert!(stderr.contains("running the model in the interpreter instead"), "{stderr}");
    assert!(
        stderr.contains(r#"loc(fused["fc1", "relu1"]): qnn.dense_relu: the result: 16-bit storage"#),
        "{stderr}"
    );
    assert!(
        stderr.contains(r#"loc(fused["fc2", "relu2"]): qnn.dense_relu: the input: 16-bit storage"#),
        "{stderr}"
    );
    assert_eq!(floats(&x86_out), outputs[2]);

    // An all-i8 model still compiles, without the notice.
    let stderr = run(
        env!("CARGO_BIN_EXE_qrun"),
        &[&path(&int8), "--input", &data, "--batch", "--backend=x86", "-o", &path(&dir.join("x86-int8.npy"))],
    );
    assert!(!stderr.contains("interpreter"), "{stderr}");

    // qcompile refuses the mixed model, listing both ops.
    let out = tool(env!("CARGO_BIN_EXE_qcompile"), &[&path(&mixed), "-o", &path(&dir.join("m.o"))]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("2 ops the backend does not handle"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}
