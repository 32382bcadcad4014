//! Mixed precision end to end (`docs/quantization.md` §13), as a user runs
//! it: `quantize-search` on a float model writes `qnn.cast_hint`s, `quantize`
//! replays them into a model with i8 and i16 regions that `quant-lint`
//! passes, `qrun` runs it in the interpreter and, with `--backend=x86`, falls
//! back to the interpreter with one notice; `qcompile` lists the ops it
//! cannot compile. The model and data are the quantize-search golden test's
//! (`scripts/make_search_fixtures.py`): fc1's output has one channel 30 times
//! the range of the others, so i8 loses it and i16 keeps it. A second model
//! is the same trap before a 300-input layer, whose i32 accumulator i16
//! inputs would overflow: the search must leave that value i8.

mod common;

use common::{repo, scratch};
use qopt_npy as npy;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

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
    let dir = scratch("replay");
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
    assert!(!stderr.contains("warning:"), "{stderr}");
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

    // x86: one note naming the i16 ops, which run by host calls, and the
    // interpreter's outputs.
    let x86_out = dir.join("x86.npy");
    let stderr = run(
        env!("CARGO_BIN_EXE_qrun"),
        &[&path(&mixed), "--input", &data, "--batch", "--backend=x86", "-o", &path(&x86_out)],
    );
    assert_eq!(stderr.matches("note:").count(), 1, "{stderr}");
    assert!(stderr.contains("run in the interpreter by host calls"), "{stderr}");
    assert!(
        stderr.contains(r#"qnn.dense_relu at "#)
            && stderr.contains(r#"loc(fused["fc1", "relu1"]): the result: 16-bit storage"#),
        "{stderr}"
    );
    assert!(stderr.contains(r#"loc(fused["fc2", "relu2"]): the input: 16-bit storage"#), "{stderr}");
    assert_eq!(floats(&x86_out), outputs[2]);

    // An all-i8 model still compiles, without the notice.
    let stderr = run(
        env!("CARGO_BIN_EXE_qrun"),
        &[&path(&int8), "--input", &data, "--batch", "--backend=x86", "-o", &path(&dir.join("x86-int8.npy"))],
    );
    assert!(!stderr.contains("interpreter"), "{stderr}");

    // qcompile compiles the mixed model, its i16 ops as host calls.
    let out = tool(env!("CARGO_BIN_EXE_qcompile"), &[&path(&mixed), "-o", &path(&dir.join("m.o"))]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("2 ops run by host calls"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// x (8) → fc1 (8 → 300, bias 60 on channel 0) → relu → fc2 (300 → 4): as
/// in the first model, relu1's channel 0 spans ~60 while the others span
/// ~2, so i8 steps lose the others and the search would keep relu1 i16. But
/// fc2 multiplies 300 inputs by weights of ±0.3 (±127 at 8 bits; the input
/// from channel 0 by 0.001, 0 at 8 bits): with relu1 at i16 (|x − zp| up to
/// 65535) its accumulator reaches 299·127·65535 ≈ 2.49e9 > 2^31 − 1.
fn overflow_model() -> String {
    let mut state = 0x2545_F491_4F6C_DD1D_u64;
    let mut unit = || {
        // xorshift64, mapped to [-0.5, 0.5)
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5
    };
    let rows = |rows: usize, cols: usize, value: &mut dyn FnMut(usize, usize) -> f64| {
        let rows: Vec<String> = (0..rows)
            .map(|r| {
                format!(
                    "[{}]",
                    (0..cols).map(|c| format!("{:.4}", value(r, c))).collect::<Vec<_>>().join(", ")
                )
            })
            .collect();
        format!("[{}]", rows.join(", "))
    };
    let w1 = rows(300, 8, &mut |_, _| unit());
    let b1: Vec<String> = (0..300).map(|i| if i == 0 { "60.0".into() } else { "0.0".into() }).collect();
    let w2 = rows(4, 300, &mut |_, c| {
        if c == 0 {
            0.001
        } else if unit() < 0.0 {
            -0.3
        } else {
            0.3
        }
    });
    format!(
        r#"func.func @main(%x: tensor<1x8xf32>) -> tensor<1x4xf32> {{
  %w1 = fp.constant() {{value = dense<{w1}> : tensor<300x8xf32>}} : () -> tensor<300x8xf32> loc("w1")
  %b1 = fp.constant() {{value = dense<[{}]> : tensor<300xf32>}} : () -> tensor<300xf32> loc("b1")
  %w2 = fp.constant() {{value = dense<{w2}> : tensor<4x300xf32>}} : () -> tensor<4x300xf32> loc("w2")
  %b2 = fp.constant() {{value = dense<[0.0, 0.0, 0.0, 0.0]> : tensor<4xf32>}} : () -> tensor<4xf32> loc("b2")
  %y1 = fp.dense(%x, %w1, %b1) : (tensor<1x8xf32>, tensor<300x8xf32>, tensor<300xf32>) -> tensor<1x300xf32> loc("fc1")
  %r1 = fp.relu(%y1) : (tensor<1x300xf32>) -> tensor<1x300xf32> loc("relu1")
  %y2 = fp.dense(%r1, %w2, %b2) : (tensor<1x300xf32>, tensor<4x300xf32>, tensor<4xf32>) -> tensor<1x4xf32> loc("fc2")
  func.return %y2 : tensor<1x4xf32>
}}
"#,
        b1.join(", ")
    )
}

/// `quantize-search` leaves quantized (i8) a value whose i16 form would let
/// a layer's i32 accumulator overflow, says so in its table and report, and
/// its hints replay into a model `quant-lint` passes; also under 4-bit
/// weights, where the overflow needs the reading layer hinted too. With a 64-bit
/// accumulator the same search keeps that value i16, and `quant-lint`
/// (32 bits) reports the overflow: the check is what kept it out.
#[test]
fn the_search_keeps_no_value_wide_whose_accumulator_would_overflow() {
    let dir = scratch("overflow");
    let data = path(&repo().join("tests/passes/data/search-x8.npy"));
    let float = dir.join("float.qir");
    std::fs::write(&float, overflow_model()).unwrap();
    let (hinted, report) = (dir.join("hinted.qir"), dir.join("report.json"));
    let search = format!("--pass=quantize-search{{data={data} max-drop=0 report={}}}", path(&report));
    let out = tool(env!("CARGO_BIN_EXE_qopt"), &[&path(&float), &search, "--stats", "-o", &path(&hinted)]);
    let note = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{note}");
    let row = note.lines().find(|l| l.contains(" fc1 ")).unwrap_or_else(|| panic!("{note}"));
    assert!(
        row.contains("quantized: i16 could overflow the i32 accumulator of fc2")
            && row.contains("limit 2147483647"),
        "{row}"
    );
    assert!(
        note.contains("kept 2 of 3 values i16 (1 more stayed quantized: as i16 they could overflow"),
        "{note}"
    );
    assert!(note.contains("(1 more could overflow an accumulator)"), "{note}");
    assert!(note.contains("1 overflow-skipped-sites"), "{note}");
    let json = std::fs::read_to_string(&report).unwrap();
    let fc1 = json.lines().find(|l| l.contains(r#""layer": "fc1""#)).unwrap_or_else(|| panic!("{json}"));
    assert!(
        fc1.contains(r#""overflow": {"layer": "fc2", "channel": "#)
            && fc1.contains(r#""limit": 2147483647}"#),
        "{fc1}"
    );
    let hinted_text = std::fs::read_to_string(&hinted).unwrap();
    for hint in hinted_text.lines().filter(|l| l.contains("qnn.cast_hint")) {
        assert!(!hint.ends_with(r#"loc("fc1")"#), "relu1 hinted i16:\n{hinted_text}");
    }
    let lint = "--pass=quantize{data=DATA},quant-lint{werror=true}".replace("DATA", &data);
    run(env!("CARGO_BIN_EXE_qopt"), &[&path(&hinted), &lint, "-o", &path(&dir.join("mixed.qir"))]);

    // 4-bit weights: relu1 at i16 alone leaves fc2 within i32 (299·7·65535),
    // but a hinted fc2 gets 8-bit weights, and both together overflow; the
    // search checks a value with the layers reading it at 8-bit weights.
    let search4 = format!("--pass=quantize-search{{data={data} max-drop=0 weight-type=i4}}");
    let hinted4 = dir.join("hinted4.qir");
    let note = run(env!("CARGO_BIN_EXE_qopt"), &[&path(&float), &search4, "-o", &path(&hinted4)]);
    let row = note.lines().find(|l| l.contains(" fc1 ")).unwrap_or_else(|| panic!("{note}"));
    assert!(row.contains("quantized: i16 could overflow the i32 accumulator of fc2"), "{row}");
    let lint4 = "--pass=quantize{data=DATA weight-type=i4},quant-lint{werror=true}".replace("DATA", &data);
    run(env!("CARGO_BIN_EXE_qopt"), &[&path(&hinted4), &lint4, "-o", &path(&dir.join("mixed4.qir"))]);

    // A 64-bit accumulator: relu1 is the first value kept i16, and quantize
    // (whose quant-lint checks i32 accumulators) refuses the result: fc2 can
    // overflow, and nothing is written.
    let wide = dir.join("wide.qir");
    let search64 = format!("--pass=quantize-search{{data={data} max-drop=0 accumulator-bits=64}}");
    let note = run(env!("CARGO_BIN_EXE_qopt"), &[&path(&float), &search64, "-o", &path(&wide)]);
    let row = note.lines().find(|l| l.contains(" fc1 ")).unwrap_or_else(|| panic!("{note}"));
    assert!(row.trim_end().ends_with(" i16"), "{row}");
    let quantize = format!("--pass=quantize{{data={data}}}");
    let out = tool(env!("CARGO_BIN_EXE_qopt"), &[&path(&wide), &quantize, "-o", &path(&dir.join("w.qir"))]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("error: the i32 accumulator can overflow"), "{stderr}");
    assert!(stderr.contains(r#"loc("fc2")"#), "{stderr}");
    assert!(!dir.join("w.qir").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Computed values stored in 32 bits (a hand edit) are one more width the
/// kernels do not compute on: `--backend=x86` runs those ops by host calls
/// with one note naming them, and the outputs are the interpreter's.
#[test]
fn thirty_two_bit_values_run_by_host_calls() {
    let dir = scratch("i32-storage");
    let model = dir.join("i32.qir");
    let q = "!qnn.uniform<i32:f32, 0.001:0>";
    std::fs::write(
        &model,
        format!(
            "func.func @main(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {{\n  \
             %q = qnn.quantize(%x) : (tensor<1x4xf32>) -> tensor<1x4x{q}>\n  \
             %y = qnn.dequantize(%q) : (tensor<1x4x{q}>) -> tensor<1x4xf32>\n  \
             func.return %y : tensor<1x4xf32>\n}}\n"
        ),
    )
    .unwrap();
    let x86 = dir.join("x86.npy");
    let interp = dir.join("interp.npy");
    let args = [&path(&model), "--random-inputs", "--backend=x86", "-o", &path(&x86)];
    let stderr = run(env!("CARGO_BIN_EXE_qrun"), &args);
    assert!(stderr.contains("2 ops run in the interpreter by host calls"), "{stderr}");
    assert!(stderr.contains("qnn.quantize at line 2:8: the result: 32-bit storage"), "{stderr}");
    run(env!("CARGO_BIN_EXE_qrun"), &[&path(&model), "--random-inputs", "-o", &path(&interp)]);
    assert_eq!(std::fs::read(&x86).unwrap(), std::fs::read(&interp).unwrap());
    let _ = std::fs::remove_dir_all(&dir);
}
