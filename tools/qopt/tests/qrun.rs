//! The `qrun` binary's contract: outputs of hand-checked models, `--output`,
//! `--batch`, `--bench`, `--compare`, `--json`, `--random-inputs`, and every
//! error path with its exit code and message.

mod common;

use common::{scratch, text};
use qopt_npy::{self as npy, NpyElement, RawArray};
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn qrun(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_qrun")).args(args).stdin(Stdio::null()).output().expect("qrun starts")
}

/// Runs qrun, expects exit code `code`, returns (stdout, stderr).
fn expect(code: i32, args: &[&str]) -> (String, String) {
    let out = qrun(args);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(code), "qrun {args:?}\nstdout: {stdout}\nstderr: {stderr}");
    (stdout, stderr)
}

/// A model under `tests/qrun/`.
fn model(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/qrun").join(name).display().to_string()
}

fn array<T: NpyElement>(shape: &[usize], values: &[T]) -> RawArray {
    RawArray::from_elements(shape.to_vec(), values).expect("values fill the shape")
}

/// Writes `a` as `dir/name` and returns the path as a string.
fn npy_file(dir: &Path, name: &str, a: &RawArray) -> String {
    let path = dir.join(name);
    npy::write_npy_file(&path, a).expect("write .npy");
    path.display().to_string()
}

fn read_npz(path: &Path) -> Vec<(String, RawArray)> {
    npy::read_npz_file(path).expect("read .npz")
}

fn f32s(a: &RawArray) -> Vec<f32> {
    a.to_vec::<f32>().expect("float32 data")
}

/// The MLP input x = [1, 2, 3, 4].
fn mlp_input(dir: &Path) -> String {
    npy_file(dir, "x.npy", &array(&[1, 4], &[1.0f32, 2.0, 3.0, 4.0]))
}

/// The conv net input: 0..15 as one 4x4 image.
fn conv_image(offset: f32) -> Vec<f32> {
    (0..16).map(|i| i as f32 + offset).collect()
}

// ---- running -----------------------------------------------------------------

#[test]
fn mlp_output_matches_the_hand_computed_values() {
    let dir = scratch("mlp");
    let x = mlp_input(&dir);
    let (stdout, stderr) = expect(0, &[&model("mlp.qir"), "--input", &x]);
    assert_eq!(stdout, "out0: float32 [1, 2]  min 1.75 max 4 mean 2.875 argmax 0\n");
    assert!(stderr.is_empty(), "{stderr}");
    let (stdout, _) = expect(0, &[&model("mlp.qir"), "--input", &x, "--print"]);
    assert_eq!(stdout, "out0: float32 [1, 2]\n[[   4, 1.75]]\n");
}

#[test]
fn output_archive_round_trips_and_inputs_come_from_an_archive() {
    let dir = scratch("output");
    let inputs = dir.join("in.npz");
    npy::write_npz_file(&inputs, &[("x".to_string(), array(&[1, 1, 4, 4], &conv_image(0.0)))]).unwrap();
    let out = dir.join("out.npz");
    let (stdout, _) =
        expect(0, &[&model("conv.qir"), "--inputs", inputs.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(stdout.lines().count(), 2, "{stdout}");
    let arrays = read_npz(&out);
    let names: Vec<&str> = arrays.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["out0", "out1"]);
    assert_eq!(arrays[0].1.shape, [1, 1]);
    assert_eq!(f32s(&arrays[0].1), [67.5]);
    assert_eq!(f32s(&arrays[1].1), [7.0]);
    // No temporary file is left beside the output.
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 2);
}

#[test]
fn archive_members_named_argk_match_by_name() {
    let dir = scratch("argk");
    let archive = dir.join("in.npz");
    let members = [
        ("other".to_string(), array(&[3], &[0.0f32; 3])),
        ("arg0".to_string(), array(&[1, 4], &[1.0f32, 2.0, 3.0, 4.0])),
    ];
    npy::write_npz_file(&archive, &members).unwrap();
    let (stdout, _) = expect(0, &[&model("mlp.qir"), "--inputs", archive.to_str().unwrap()]);
    assert!(stdout.contains("max 4 mean 2.875"), "{stdout}");
    // A name that is not arg0 leaves argument #0 without input.
    npy::write_npz_file(&archive, &[("arg1".to_string(), array(&[1, 4], &[0.0f32; 4]))]).unwrap();
    let (_, stderr) = expect(1, &[&model("mlp.qir"), "--inputs", archive.to_str().unwrap()]);
    assert!(stderr.contains("missing input for argument #0 of @main: "), "{stderr}");
}

#[test]
fn batch_runs_every_sample_and_stacks_the_outputs() {
    let dir = scratch("batch");
    let samples = 5;
    let images: Vec<f32> = (0..samples).flat_map(|s| conv_image(s as f32)).collect();
    let all = npy_file(&dir, "all.npy", &array(&[samples, 1, 4, 4], &images));
    let out = dir.join("out.npz");
    let (stdout, stderr) =
        expect(0, &[&model("conv.qir"), "--input", &all, "--batch", "-o", out.to_str().unwrap()]);
    assert!(stdout.starts_with("out0: float32 [5, 1]"), "{stdout}");
    // No progress bar outside a terminal: only the line saying what was written.
    assert_eq!(
        stderr,
        format!(
            "qrun: {}: @main ran 5 samples in 5 runs on the interpreter; wrote {} (out0 float32 [5, 1], out1 float32 [5, 1])\n",
            model("conv.qir"),
            out.display()
        )
    );
    let stacked = read_npz(&out);
    assert_eq!(stacked[0].1.shape, [samples, 1]);
    // Each row equals a run on that sample alone.
    for s in 0..samples {
        let one = npy_file(&dir, &format!("x{s}.npy"), &array(&[1, 1, 4, 4], &conv_image(s as f32)));
        let single = dir.join(format!("out{s}.npz"));
        expect(0, &[&model("conv.qir"), "--input", &one, "-o", single.to_str().unwrap()]);
        let single = read_npz(&single);
        for k in 0..2 {
            assert_eq!(f32s(&stacked[k].1)[s], f32s(&single[k].1)[0], "output {k} sample {s}");
        }
    }
    // Box filter sums grow by 9 per unit of offset: 67.5 + 9·s.
    assert_eq!(f32s(&stacked[0].1), [67.5, 76.5, 85.5, 94.5, 103.5]);
}

#[test]
fn batch_needs_a_multiple_of_the_model_batch() {
    let dir = scratch("batch-shape");
    let bad = npy_file(&dir, "bad.npy", &array(&[3, 5], &[0.0f32; 15]));
    let (_, stderr) = expect(1, &[&model("mlp.qir"), "--input", &bad, "--batch"]);
    assert!(
        stderr.contains("argument #0 of @main expects tensor<1x4xf32> (with --batch, dimension 0 may be any positive multiple), got float32 [3, 5]"),
        "{stderr}"
    );
}

#[test]
fn several_samples_without_batch_suggest_batch() {
    let dir = scratch("batch-hint");
    let three = npy_file(&dir, "three.npy", &array(&[3, 4], &[0.0f32; 12]));
    let (_, stderr) = expect(1, &[&model("mlp.qir"), "--input", &three]);
    assert!(
        stderr.contains("expects tensor<1x4xf32>, got float32 [3, 4] ('")
            && stderr.contains("'); it holds 3 batches of that shape: add --batch to run them one at a time"),
        "{stderr}"
    );
    let wrong = npy_file(&dir, "wrong.npy", &array(&[3, 5], &[0.0f32; 15]));
    let (_, stderr) = expect(1, &[&model("mlp.qir"), "--input", &wrong]);
    assert!(!stderr.contains("--batch"), "no hint where --batch would not help: {stderr}");
}

#[test]
fn bench_prints_one_latency_line() {
    let dir = scratch("bench");
    let x = mlp_input(&dir);
    let (stdout, _) = expect(0, &[&model("mlp.qir"), "--input", &x, "--bench", "3"]);
    let line = stdout.strip_suffix('\n').expect("one line");
    let rest = line.strip_prefix("latency: median ").expect("prefix");
    let (median, rest) = rest.split_once(" ms, min ").expect("min");
    let (min, rest) = rest.split_once(" ms, max ").expect("max");
    let (max, rest) = rest.split_once(" ms (").expect("runs");
    assert_eq!(rest, "3 runs)");
    let ms = |s: &str| -> f64 {
        let (_, decimals) = s.split_once('.').expect("a decimal point");
        assert_eq!(decimals.len(), 3, "three decimals in {s}");
        s.parse().expect("a number")
    };
    let (median, min, max) = (ms(median), ms(min), ms(max));
    assert!(min <= median && median <= max, "{line}");
    let (profiled, _) = expect(0, &[&model("mlp.qir"), "--input", &x, "--bench", "3", "--profile"]);
    let report: Vec<&str> = profiled.lines().collect();
    assert!(
        report[1].starts_with("profile: ") && report[1].ends_with(" ms per run in ops (3 runs)"),
        "{profiled}"
    );
    assert!(report.iter().any(|l| l.trim_start().starts_with("fp.dense ")), "{profiled}");
    assert!(report.contains(&"  slowest ops:"), "{profiled}");
    let (json, _) = expect(0, &[&model("mlp.qir"), "--input", &x, "--bench", "2", "--json"]);
    assert!(json.starts_with("{\"mode\":\"bench\",") && json.contains("\"runs\":2,\"median_ms\":"), "{json}");
}

#[test]
fn random_inputs_are_deterministic_and_in_range() {
    let dir = scratch("random");
    let run = |seed: &str, name: &str| {
        let out = dir.join(name);
        expect(0, &[&model("types.qir"), "--random-inputs", "--seed", seed, "-o", out.to_str().unwrap()]);
        read_npz(&out)
    };
    let (a, b, c) = (run("7", "a.npz"), run("7", "b.npz"), run("8", "c.npz"));
    assert_eq!(a, b);
    assert_ne!(a, c);
    let q = a[0].1.to_vec::<i8>().unwrap();
    assert!(q.iter().all(|&v| v >= -127), "narrowed storage range: {q:?}");
    assert_eq!(a[1].1.dtype, npy::DType::Bool);
    assert_eq!(a[2].1.dtype, npy::DType::U8);
    assert_eq!(a[3].1.shape, [1, 3], "a dynamic dimension gets size 1");
    assert!(f32s(&a[3].1).iter().all(|v| v.is_finite() && v.abs() < 10.0));
}

/// A model whose one argument is a `[n, n]` f32 tensor.
fn square_relu(dir: &Path, n: u64) -> String {
    let t = format!("tensor<{n}x{n}xf32>");
    let text = format!(
        "func.func @main(%x: {t}) -> {t} {{\n  %y = fp.relu(%x) : ({t}) -> {t}\n  func.return %y : {t}\n}}\n"
    );
    let path = dir.join(format!("square{n}.qir"));
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

#[test]
fn random_inputs_too_large_or_beyond_memory_are_errors_not_aborts() {
    let dir = scratch("random-huge");
    let (_, stderr) = expect(1, &[&square_relu(&dir, 100_000), "--random-inputs"]);
    assert!(stderr.contains("more than the interpreter's limit of 2147483648 elements"), "{stderr}");
    // 6.4 GB, under the element limit, beyond a 2 GB address-space limit: the
    // allocation used to abort the process (exit 134).
    #[cfg(target_os = "linux")]
    {
        let script =
            format!("ulimit -v 2000000 && exec \"$0\" {} --random-inputs", square_relu(&dir, 40_000));
        let out = Command::new("sh").args(["-c", &script, env!("CARGO_BIN_EXE_qrun")]).output().unwrap();
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert_eq!(
            stderr,
            "qrun: error: cannot generate argument #0 of @main: needs 6400000000 bytes for its 1600000000 \
             elements, which cannot be allocated\n"
        );
    }
}

#[test]
fn int64_values_print_exactly() {
    let dir = scratch("int64");
    let model = dir.join("id.qir");
    let t = "tensor<2xi64>";
    std::fs::write(&model, format!("func.func @main(%x: {t}) -> {t} {{\n  func.return %x : {t}\n}}\n"))
        .unwrap();
    let x = npy_file(&dir, "x.npy", &array(&[2], &[9_007_199_254_740_993i64, -9_223_372_036_854_775_807]));
    let m = model.to_str().unwrap();
    let (stdout, _) = expect(0, &[m, "--input", &x, "--print"]);
    assert_eq!(stdout, "out0: int64 [2]\n[    9007199254740993, -9223372036854775807]\n");
    let (stdout, _) = expect(0, &[m, "--input", &x, "--json", "--print"]);
    assert!(stdout.contains(r#""values":[9007199254740993,-9223372036854775807]"#), "{stdout}");
}

// ---- comparing ----------------------------------------------------------------

#[test]
fn a_model_compared_with_itself_has_infinite_sqnr() {
    let dir = scratch("self");
    let x = mlp_input(&dir);
    let (stdout, _) = expect(0, &[&model("mlp.qir"), "--input", &x, "--compare", &model("mlp.qir")]);
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines[0].starts_with("value") && lines[0].contains("SQNR dB"), "{stdout}");
    let values: Vec<&str> = lines[1..].iter().map(|l| l.split("  ").next().unwrap().trim()).collect();
    assert_eq!(
        values,
        [
            "loc(\"fc1.weight\")",
            "loc(\"fc1.bias\")",
            "loc(\"fc1\")",
            "loc(\"relu1\")",
            "loc(\"fc2.weight\")",
            "loc(\"fc2.bias\")",
            "loc(\"fc2\")",
            "output #0"
        ]
    );
    for line in &lines[1..] {
        let cells: Vec<&str> = line.split_whitespace().collect();
        let n = cells.len();
        assert_eq!(&cells[n - 4..], ["inf", "1.000000", "0", "0"], "{line}");
    }
}

#[test]
fn a_perturbed_copy_has_finite_sqnr_where_it_differs() {
    let dir = scratch("perturbed");
    let x = mlp_input(&dir);
    let other = model("mlp_perturbed.qir");
    let (stdout, _) = expect(0, &[&model("mlp.qir"), "--input", &x, "--compare", &other]);
    // The cells of a row, counted from the right: SQNR, cosine, max and mean abs error.
    let metrics = |name: &str| -> Vec<String> {
        let line = stdout.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("{name}: {stdout}"));
        let cells: Vec<String> = line.split_whitespace().map(String::from).collect();
        cells[cells.len() - 4..].to_vec()
    };
    assert_eq!(metrics("loc(\"fc1\")")[0], "inf");
    // fc2: reference [4, 1.75], other [4.15, 1.75] (2.1 · 1.5 adds 0.15):
    // SQNR = 10·log10(19.0625 / 0.0225) = 29.28 dB (f32 rounding aside).
    assert_eq!(metrics("loc(\"fc2\")"), ["29.28", "0.999911", "0.15", "0.0749998"], "{stdout}");
    assert!(stdout.contains("loc(\"fc2\")         fp.dense"), "{stdout}");
    assert_eq!(metrics("output #0")[0], "29.28");
    let unmatched = format!("1 value(s) of {other} match nothing: loc(\"extra\") (fp.sigmoid [1, 3])\n");
    assert!(stdout.ends_with(&unmatched), "{stdout}");

    let (json, _) = expect(0, &[&model("mlp.qir"), "--input", &x, "--compare", &other, "--json"]);
    assert_eq!(json.lines().count(), 1);
    assert_balanced(&json);
    for key in [
        "\"mode\":\"compare\"",
        "\"rows\":[",
        "\"sqnr_db\":\"inf\"",
        "\"kind\":\"output\"",
        "\"unmatched_other\":[\"loc(\\\"extra\\\") (fp.sigmoid [1, 3])\"]",
    ] {
        assert!(json.contains(key), "{key} in {json}");
    }
}

#[test]
fn quantized_values_are_dequantized_before_comparing() {
    let dir = scratch("quant");
    let x = npy_file(&dir, "x.npy", &array(&[2], &[-1.0f32, 1.0]));
    let (stdout, _) =
        expect(0, &[&model("weights.qir"), "--input", &x, "--compare", &model("quant_weights.qir")]);
    let w = stdout.lines().find(|l| l.starts_with("loc(\"w\")")).expect("a row for w");
    assert!(w.contains("inf  1.000000"), "{stdout}");
    let out1 = stdout.lines().find(|l| l.starts_with("output #1")).expect("a row for output #1");
    assert!(out1.contains("inf  1.000000"), "{stdout}");
}

#[test]
fn quantized_activations_are_dequantized_and_matched_by_location() {
    let dir = scratch("quant-activations");
    let x = mlp_input(&dir);
    let (stdout, _) = expect(0, &[&model("mlp.qir"), "--input", &x, "--compare", &model("mlp_quant.qir")]);
    // fc1 is [1.5, -1, 1] in mlp.qir; in mlp_quant.qir the i8 values [4, -2, 2]
    // at scale 0.4 stand for [1.6, -0.8, 0.8]: errors -0.1, -0.2, 0.2 give
    // 10·log10(4.25 / 0.09) = 16.74 dB.
    let fc1 = stdout.lines().find(|l| l.starts_with("loc(\"fc1\")")).expect("a row for fc1");
    let cells: Vec<&str> = fc1.split_whitespace().collect();
    assert_eq!(cells[cells.len() - 4..], ["16.74", "0.990148", "0.2", "0.166667"], "{stdout}");
    assert!(
        stdout.contains(
            "match nothing: loc(\"fc1.float\") (fp.dense [1, 3]), loc(\"fc1.dequantize\") (qnn.dequantize [1, 3])"
        ),
        "{stdout}"
    );
}

#[test]
fn batch_compare_merges_the_statistics_of_every_sample() {
    let dir = scratch("batch-compare");
    let images: Vec<f32> = (0..4).flat_map(|s| conv_image(s as f32)).collect();
    let all = npy_file(&dir, "all.npy", &array(&[4, 1, 4, 4], &images));
    let (json, _) = expect(
        0,
        &[&model("conv.qir"), "--input", &all, "--batch", "--compare", &model("conv.qir"), "--json"],
    );
    assert_balanced(&json);
    assert!(json.contains("\"runs\":4"), "{json}");
    assert!(json.contains("{\"value\":\"loc(\\\"heads\\\")#1\",\"op\":\"fp.split\",\"kind\":\"op\",\"shape\":[1,1],\"sqnr_db\":\"inf\",\"cosine\":1,"), "{json}");
}

#[test]
fn compare_errors_name_the_other_model_and_its_extra_outputs_are_reported() {
    let dir = scratch("compare-other");
    let x = mlp_input(&dir);
    let write = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    let (a, b) = ("tensor<1x4xf32>", "tensor<4xf32>");
    let one = write("one.qir", &format!("func.func @main(%x: {a}) -> {a} {{\n  func.return %x : {a}\n}}\n"));
    let two = write(
        "two.qir",
        &format!("func.func @main(%x: {a}) -> ({a}, {a}) {{\n  func.return %x, %x : {a}, {a}\n}}\n"),
    );
    let other_shape =
        write("flat.qir", &format!("func.func @main(%x: {b}) -> {b} {{\n  func.return %x : {b}\n}}\n"));
    let (_, stderr) = expect(1, &[&one, "--input", &x, "--compare", &other_shape]);
    assert!(
        stderr.starts_with(&format!(
            "qrun: error: the --compare model '{other_shape}': argument #0 of @main expects {b}"
        )),
        "{stderr}"
    );
    let (stdout, _) = expect(0, &[&one, "--input", &x, "--compare", &two]);
    assert!(stdout.contains(&format!("1 value(s) of {two} match nothing: output #1")), "{stdout}");
}

// ---- JSON ---------------------------------------------------------------------

/// Brackets and braces outside strings nest properly.
fn assert_balanced(json: &str) {
    let mut stack = Vec::new();
    let (mut in_string, mut escaped) = (false, false);
    for c in json.trim_end().chars() {
        match (in_string, escaped, c) {
            (true, true, _) => escaped = false,
            (true, false, '\\') => escaped = true,
            (true, false, '"') => in_string = false,
            (true, false, _) => {}
            (false, _, '"') => in_string = true,
            (false, _, '{' | '[') => stack.push(c),
            (false, _, '}') => assert_eq!(stack.pop(), Some('{'), "{json}"),
            (false, _, ']') => assert_eq!(stack.pop(), Some('['), "{json}"),
            _ => {}
        }
    }
    assert!(stack.is_empty() && !in_string, "{json}");
}

#[test]
fn json_summary_has_every_output() {
    let dir = scratch("json");
    let x = npy_file(&dir, "x.npy", &array(&[1, 1, 4, 4], &conv_image(0.0)));
    let (json, _) = expect(0, &[&model("conv.qir"), "--input", &x, "--json", "--print"]);
    assert_balanced(&json);
    assert!(json.starts_with("{\"mode\":\"run\",\"model\":"), "{json}");
    assert!(json.contains("\"function\":\"main\""), "{json}");
    assert!(
        json.contains("{\"name\":\"out0\",\"dtype\":\"float32\",\"shape\":[1,1],\"min\":67.5,\"max\":67.5,\"mean\":67.5,\"argmax\":0,\"nan_count\":0,\"values\":[67.5]}"),
        "{json}"
    );
    assert!(json.contains("\"name\":\"out1\""), "{json}");
}

// ---- errors -------------------------------------------------------------------

#[test]
fn wrong_shape_and_dtype_name_the_argument() {
    let dir = scratch("wrong");
    let shape = npy_file(&dir, "shape.npy", &array(&[1, 5], &[0.0f32; 5]));
    let (stdout, stderr) = expect(1, &[&model("mlp.qir"), "--input", &shape]);
    assert!(stdout.is_empty());
    assert_eq!(
        stderr,
        format!(
            "qrun: error: argument #0 of @main expects tensor<1x4xf32>, got float32 [1, 5] ('{shape}')\n"
        )
    );
    let dtype = npy_file(&dir, "dtype.npy", &array(&[1, 4], &[0.0f64; 4]));
    let (_, stderr) = expect(1, &[&model("mlp.qir"), "--input", &dtype]);
    assert!(stderr.contains("argument #0 of @main expects tensor<1x4xf32>, got float64 [1, 4]"), "{stderr}");
}

#[test]
fn missing_and_extra_inputs_are_errors() {
    let dir = scratch("missing");
    let (_, stderr) = expect(1, &[&model("mlp.qir")]);
    assert_eq!(stderr, "qrun: error: missing input for argument #0 of @main (tensor<1x4xf32>)\n");
    let x = mlp_input(&dir);
    let (_, stderr) = expect(1, &[&model("mlp.qir"), "--input", &x, "--input", &x]);
    assert!(stderr.contains("2 inputs given, but @main takes 1 argument(s)"), "{stderr}");
}

#[test]
fn nonfinite_inputs_are_errors_unless_allowed() {
    let dir = scratch("nan");
    let x = npy_file(&dir, "nan.npy", &array(&[1, 4], &[1.0f32, 2.0, f32::NAN, f32::INFINITY]));
    let (_, stderr) = expect(1, &[&model("mlp.qir"), "--input", &x]);
    assert!(
        stderr.contains("argument #0 of @main ('")
            && stderr.contains("has NaN at element [0, 2] (2 non-finite element(s)); pass --allow-nonfinite"),
        "{stderr}"
    );
    let (stdout, stderr) = expect(0, &[&model("mlp.qir"), "--input", &x, "--allow-nonfinite"]);
    assert!(stderr.starts_with("qrun: warning: argument #0 of @main"), "{stderr}");
    assert!(stdout.starts_with("out0: float32 [1, 2]"), "{stdout}");
}

#[test]
fn an_op_without_kernel_is_named_with_its_location() {
    let dir = scratch("no-kernel");
    let x = npy_file(&dir, "x.npy", &array(&[2], &[1.0f32, -1.0]));
    let m = model("no_kernel.qir");
    let (_, stderr) = expect(1, &[&m, "--input", &x, "--allow-unregistered-dialect"]);
    assert_eq!(
        stderr,
        format!("qrun: error: {m}: at loc(\"mystery\") ('test.mystery'): no kernel for 'test.mystery'\n")
    );
}

#[test]
fn bad_models_and_missing_files_exit_1() {
    let (_, stderr) = expect(1, &[&model("bad.qir")]);
    assert!(
        stderr.starts_with(&format!("{}:2:16: error: use of undefined value %nope\n", model("bad.qir"))),
        "{stderr}"
    );
    let (_, stderr) = expect(1, &[&model("no_kernel.qir")]);
    assert!(
        stderr.contains("error:") && stderr.contains("test.mystery"),
        "unregistered ops need the flag: {stderr}"
    );
    let (_, stderr) = expect(1, &["/nonexistent/model.qir"]);
    assert!(stderr.starts_with("qrun: error: cannot read '/nonexistent/model.qir': "), "{stderr}");
    let (_, stderr) = expect(1, &[&model("mlp.qir"), "--input", "/nonexistent/x.npy"]);
    assert!(stderr.starts_with("qrun: error: cannot read '/nonexistent/x.npy': "), "{stderr}");
    let (_, stderr) = expect(1, &[&model("mlp.qir"), "--func", "nope", "--random-inputs"]);
    assert!(stderr.contains("no function @nope in"), "{stderr}");
}

#[test]
fn binary_files_given_as_the_model_get_one_line_saying_what_they_are() {
    let dir = scratch("wrong-kind");
    let onnx = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/models/digits_mlp/model.onnx");
    let npy = npy_file(&dir, "x.npy", &array(&[1, 4], &[1.0f32, 2.0, 3.0, 4.0]));
    for (file, why) in [
        (
            onnx.display().to_string(),
            "this looks like an ONNX model, not a .qir model; import it with qimport",
        ),
        (npy.clone(), "this is a .npy array, not a .qir model; give it to qrun with --input"),
    ] {
        let (_, stderr) = expect(1, &[&file, "--random-inputs"]);
        assert_eq!(stderr, format!("qrun: error: '{file}': {why}\n"));
        let (_, stderr) = expect(1, &[&model("mlp.qir"), "--input", &npy, "--compare", &file]);
        assert_eq!(stderr, format!("qrun: error: '{file}': {why}\n"));
    }
    let qopt = Command::new(env!("CARGO_BIN_EXE_qopt")).arg(&onnx).output().unwrap();
    assert_eq!(qopt.status.code(), Some(1));
    assert_eq!(
        text(&qopt.stderr),
        format!(
            "qopt: error: '{}': this looks like an ONNX model, not a .qir model; import it with qimport\n",
            onnx.display()
        )
    );
}

#[test]
fn usage_errors_exit_2() {
    let m = model("mlp.qir");
    for args in [
        vec![m.as_str(), "--no-such-flag"],
        vec![m.as_str(), "--bench", "0"],
        vec![m.as_str(), "--random-inputs", "--input", "x.npy"],
        vec![m.as_str(), "--seed", "3"],
        // clap's `requires` let this through when a conflicting input flag was given.
        vec![m.as_str(), "--input", "x.npy", "--seed", "3"],
        vec![m.as_str(), "--seed", "0", "--inputs", "x.npz"],
        vec![m.as_str(), "--compare", "b.qir", "--print"],
        vec![],
    ] {
        let out = qrun(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out.stderr));
        assert!(out.stdout.is_empty());
    }
}

/// Whether this CPU runs the x86 backend's AVX2 code; prints a notice when not.
fn x86_backend_here(test: &str) -> bool {
    let here = std::is_x86_feature_detected!("avx2");
    if !here {
        println!("notice: {test}: skipped, this CPU lacks AVX2 for --backend=x86");
    }
    here
}

#[test]
fn the_x86_backend_gives_the_interpreters_bits() {
    if !x86_backend_here("the_x86_backend_gives_the_interpreters_bits") {
        return;
    }
    let dir = scratch("x86-bits");
    let m = model("convert_chain.qir");
    let (interp, x86) = (dir.join("interp.npz"), dir.join("x86.npz"));
    expect(0, &[&m, "--random-inputs", "--seed", "5", "-o", interp.to_str().unwrap()]);
    for threads in ["1", "2"] {
        expect(
            0,
            &[
                &m,
                "--random-inputs",
                "--seed",
                "5",
                "--backend=x86",
                "--threads",
                threads,
                "-o",
                x86.to_str().unwrap(),
            ],
        );
        assert_eq!(read_npz(&interp), read_npz(&x86), "--threads {threads}");
    }
    let (stdout, _) = expect(0, &[&m, "--random-inputs", "--compare", &m, "--backend=x86"]);
    assert!(stdout.contains("ran as compiled x86-64 code: only the outputs are compared"), "{stdout}");
    for line in stdout.lines().filter(|l| l.starts_with("output #")) {
        assert!(line.contains("inf  1.000000") && line.contains(" 0  "), "outputs must be identical: {line}");
    }
    for (threads, says) in
        [("1", "(3 runs, 1 thread)"), ("2", "(3 runs, 2 threads; a kernel's time runs from barrier")]
    {
        let (stdout, _) = expect(
            0,
            &[&m, "--random-inputs", "--backend=x86", "--bench", "3", "--profile", "--threads", threads],
        );
        assert!(stdout.contains("latency: median"), "{stdout}");
        assert!(
            stdout.contains("ms per run in compiled kernels") && stdout.contains("loc(\"requantize\")"),
            "{stdout}"
        );
        assert!(stdout.contains(says), "--threads {threads}: {stdout}");
    }
}

#[test]
fn the_x86_backend_names_the_ops_it_runs_by_host_calls() {
    if !x86_backend_here("the_x86_backend_names_the_ops_it_runs_by_host_calls") {
        return;
    }
    let m = model("conv.qir");
    let (interpreted, _) = expect(0, &[&m, "--random-inputs"]);
    let (compiled, stderr) = expect(0, &[&m, "--random-inputs", "--backend=x86"]);
    assert!(
        stderr.contains("2 ops run in the interpreter by host calls (the rest is x86 code):"),
        "{stderr}"
    );
    assert!(stderr.contains("fp.conv2d at ") && stderr.contains("no x86 lowering"), "{stderr}");
    assert_eq!(compiled, interpreted);
    let (_, stderr) = expect(2, &[&m, "--random-inputs", "--backend=x86", "--target-cpu", "zen4"]);
    assert!(
        stderr.contains("unknown target CPU 'zen4'; expected one of native, x86-64-v3, x86-64-v4"),
        "{stderr}"
    );
    let (_, stderr) = expect(2, &[&m, "--random-inputs", "--threads", "2"]);
    assert!(stderr.contains("--threads and --target-cpu apply to --backend=x86"), "{stderr}");
    if !std::is_x86_feature_detected!("avx512f") {
        let (_, stderr) = expect(
            1,
            &[&model("convert_chain.qir"), "--random-inputs", "--backend=x86", "--target-cpu", "x86-64-v4"],
        );
        assert!(stderr.contains("target CPU x86-64-v4 needs avx512f"), "{stderr}");
    }
}

/// `-o out.npy` writes a `.npy` of the one output; with several outputs it is
/// refused (a `.npy` holds one array) and nothing is written.
#[test]
fn npy_outputs_hold_the_one_output_and_are_refused_for_several() {
    let dir = scratch("npy-output");
    let x = dir.join("x.npy");
    npy::write_npy_file(&x, &array(&[1, 4], &[0.5f32, -1.0, 2.0, 0.25])).unwrap();
    let (single, npz) = (dir.join("y.npy"), dir.join("y.npz"));
    let x = x.to_str().unwrap();
    expect(0, &[&model("mlp.qir"), "--input", x, "-o", single.to_str().unwrap()]);
    expect(0, &[&model("mlp.qir"), "--input", x, "-o", npz.to_str().unwrap()]);
    let one = npy::read_npy_file(&single).expect("a .npy file");
    let all = npy::read_npz_file(&npz).expect("an .npz file");
    assert_eq!(all.len(), 1);
    assert_eq!((one.shape.clone(), one.data.clone()), (all[0].1.shape.clone(), all[0].1.data.clone()));

    let several = dir.join("several.npy");
    let (_, stderr) = expect(1, &[&model("types.qir"), "--random-inputs", "-o", several.to_str().unwrap()]);
    assert!(
        stderr.contains("a .npy file holds one array, and the function returns 4 outputs; name an .npz file"),
        "{stderr}"
    );
    assert!(!several.exists(), "nothing is written");
    let _ = std::fs::remove_dir_all(&dir);
}

// ---- --expect, output names, outputs over inputs ------------------------------

#[test]
fn expect_passes_within_tolerance_and_fails_with_the_worst_element() {
    let dir = scratch("expect");
    let x = mlp_input(&dir);
    // fc2 gives [4, 1.75]: the reference is off by 1e-6 and 0.5.
    let close = npy_file(&dir, "close.npy", &array(&[1, 2], &[4.000001f32, 1.75]));
    let (stdout, _) = expect(0, &[&model("mlp.qir"), "--input", &x, "--expect", &close, "--rtol", "1e-5"]);
    assert!(
        stdout.contains("expect out0: ok, 0 of 2 values outside rtol 0.00001 atol 3.8147e-6 (8 ε·max|ref|)"),
        "{stdout}"
    );
    let off = npy_file(&dir, "off.npy", &array(&[2], &[4.0f32, 2.25]));
    let (stdout, stderr) = expect(1, &[&model("mlp.qir"), "--input", &x, "--expect", &off, "--atol", "0.1"]);
    assert!(
        stdout.contains("expect out0: MISMATCH, 1 of 2 values outside rtol 0.00001 atol 0.1, max abs error 0.5; worst at [0, 1]: got 1.75, expected 2.25"),
        "{stdout}"
    );
    assert!(stderr.contains("error: the outputs differ from '"), "{stderr}");
    let (json, _) = expect(1, &[&model("mlp.qir"), "--input", &x, "--expect", &off, "--json"]);
    assert!(json.contains("\"expect\":{\"reference\":") && json.contains("\"passed\":false"), "{json}");
}

/// With the default tolerances a float model passes against its own ONNX
/// Runtime reference (digits_mlp differs by 9.5e-6 on values up to 23,
/// which numpy's absolute 1e-8 refused), and `-o` says what it wrote.
#[test]
fn a_float_model_passes_against_its_onnx_runtime_reference_by_default() {
    let dir = scratch("float-reference");
    let models = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/models/digits_mlp");
    let qir = dir.join("digits_mlp.qir");
    let imported = Command::new(env!("CARGO_BIN_EXE_qimport"))
        .arg(models.join("model.onnx"))
        .arg("-o")
        .arg(&qir)
        .output()
        .expect("qimport starts");
    assert!(imported.status.success(), "{}", text(&imported.stderr));
    let (test, reference) = (models.join("test.npy"), models.join("ref_fp32.npy"));
    let out = dir.join("out.npz");
    let (stdout, stderr) = expect(
        0,
        &[
            qir.to_str().unwrap(),
            "--input",
            test.to_str().unwrap(),
            "--batch",
            "--expect",
            reference.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ],
    );
    assert!(
        stdout.contains("expect fc2_11_out: ok, 0 of 5970 values outside rtol 0.00001 atol 0.0000"),
        "{stdout}"
    );
    assert_eq!(
        stderr,
        format!(
            "qrun: {}: @main ran 597 samples in 597 runs on the interpreter; wrote {} (fc2_11_out float32 [597, 10])\n",
            qir.display(),
            out.display()
        )
    );
    let (_, stderr) = expect(
        1,
        &[
            qir.to_str().unwrap(),
            "--input",
            test.to_str().unwrap(),
            "--batch",
            "--expect",
            reference.to_str().unwrap(),
            "--atol",
            "1e-8",
        ],
    );
    assert!(stderr.contains("beyond the tolerance (rtol 0.00001, atol 1e-8)"), "{stderr}");
}

/// One step of a quantized output is a mismatch with the default
/// tolerances, however large the values beside it.
#[test]
fn a_one_step_quantized_difference_fails_by_default() {
    let dir = scratch("one-step");
    let q = "tensor<1x4x!qnn.uniform<i8:f32, 0.1:0>>";
    let qir = dir.join("q.qir");
    std::fs::write(
        &qir,
        format!(
            "func.func @main(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {{\n  \
             %q = qnn.quantize(%x) : (tensor<1x4xf32>) -> {q} loc(\"q\")\n  \
             %y = qnn.dequantize(%q) : ({q}) -> tensor<1x4xf32> loc(\"dq\")\n  \
             func.return %y : tensor<1x4xf32>\n}}\n"
        ),
    )
    .unwrap();
    let x = npy_file(&dir, "x.npy", &array(&[1, 4], &[12.7f32, -12.8, 0.31, 5.0]));
    let out = dir.join("y.npy");
    let (_, stderr) = expect(0, &[qir.to_str().unwrap(), "--input", &x, "-o", out.to_str().unwrap()]);
    assert!(stderr.contains("@main ran once on the interpreter; wrote "), "{stderr}");
    let same = out.display().to_string();
    expect(0, &[qir.to_str().unwrap(), "--input", &x, "--expect", &same]);
    let mut stepped = npy::read_npy_file(&out).unwrap();
    let third: [u8; 4] = stepped.data[8..12].try_into().unwrap();
    let value = f32::from_le_bytes(third) + 0.1;
    stepped.data[8..12].copy_from_slice(&value.to_le_bytes());
    let stepped = npy_file(&dir, "stepped.npy", &stepped);
    let (stdout, _) = expect(1, &[qir.to_str().unwrap(), "--input", &x, "--expect", &stepped]);
    assert!(stdout.contains("expect out0: MISMATCH, 1 of 4 values outside"), "{stdout}");
}

#[test]
fn expect_archives_match_members_by_output_name_and_bad_references_are_errors() {
    let dir = scratch("expect-npz");
    let inputs = dir.join("in.npz");
    npy::write_npz_file(&inputs, &[("x".to_string(), array(&[1, 1, 4, 4], &conv_image(0.0)))]).unwrap();
    let inputs = inputs.to_str().unwrap();
    let reference = dir.join("ref.npz");
    // Members in the other order: they are matched by name.
    npy::write_npz_file(
        &reference,
        &[("out1".to_string(), array(&[1], &[7.0f32])), ("out0".to_string(), array(&[1, 1], &[67.5f32]))],
    )
    .unwrap();
    let (stdout, _) =
        expect(0, &[&model("conv.qir"), "--inputs", inputs, "--expect", reference.to_str().unwrap()]);
    assert!(stdout.contains("expect out0: ok") && stdout.contains("expect out1: ok"), "{stdout}");
    let missing = dir.join("missing.npz");
    npy::write_npz_file(&missing, &[("out0".to_string(), array(&[1, 1], &[67.5f32]))]).unwrap();
    let (_, stderr) =
        expect(1, &[&model("conv.qir"), "--inputs", inputs, "--expect", missing.to_str().unwrap()]);
    assert!(stderr.contains("has no member 'out1' for output 'out1' (members: out0)"), "{stderr}");
    let one = npy_file(&dir, "one.npy", &array(&[1], &[7.0f32]));
    let (_, stderr) = expect(1, &[&model("conv.qir"), "--inputs", inputs, "--expect", &one]);
    assert!(stderr
        .contains("is one array, but the function returns 2 outputs; give an .npz with members out0, out1"));
    let (_, stderr) = expect(2, &[&model("conv.qir"), "--inputs", inputs, "--rtol", "0.1"]);
    assert!(stderr.contains("--expect"), "--rtol needs --expect: {stderr}");
    let (_, stderr) = expect(2, &[&model("conv.qir"), "--inputs", inputs, "--expect", &one, "--atol=-1"]);
    assert!(stderr.contains("'-1' is not a finite number >= 0"), "{stderr}");
}

#[test]
fn outputs_are_named_by_the_functions_result_names() {
    let dir = scratch("result-names");
    let text = std::fs::read_to_string(model("mlp.qir")).unwrap().replace(
        "-> tensor<1x2xf32> {",
        "-> tensor<1x2xf32> attributes {arg_names = [\"features\"], result_names = [\"logits\"]} {",
    );
    let named = dir.join("named.qir");
    std::fs::write(&named, text).unwrap();
    let x = mlp_input(&dir);
    let out = dir.join("out.npz");
    let (stdout, _) = expect(0, &[named.to_str().unwrap(), "--input", &x, "-o", out.to_str().unwrap()]);
    assert!(stdout.starts_with("logits: float32 [1, 2]"), "{stdout}");
    assert_eq!(read_npz(&out)[0].0, "logits");
}

#[test]
fn an_output_over_an_input_is_refused_and_the_input_kept() {
    let dir = scratch("output-over-input");
    let x = mlp_input(&dir);
    let before = std::fs::read(&x).unwrap();
    let (_, stderr) = expect(1, &[&model("mlp.qir"), "--input", &x, "-o", &x]);
    assert!(stderr.contains("writing it would replace the input: name another output"), "{stderr}");
    assert_eq!(std::fs::read(&x).unwrap(), before);
}

// ---- the ONNX conformance comparison ------------------------------------------

/// `scripts/onnx_conformance.py`'s comparison, without Python, on a few of
/// ONNX's node tests (`tests/onnx-node`): `qimport`, `qrun -o out.npz`, then
/// each graph output found in the archive **by its ONNX name** and compared
/// with `output_K.npy` at ONNX's tolerances. The script read members as
/// `out0`, `out1`, ... after qrun began naming them after the model's
/// outputs, and reported 0 of 1,061 tests passing; this keeps the names the
/// script relies on tested.
#[test]
fn onnx_node_test_outputs_are_found_by_the_models_output_names() {
    use qopt_interp::Tensor;
    let dir = scratch("onnx-node");
    let suite = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/onnx-node");
    for test in [
        "test_abs",
        "test_add_bcast",
        "test_split_zero_size_splits_opset13",
        "test_layer_normalization_2d_axis1",
    ] {
        let case = suite.join(test);
        let bytes = std::fs::read(case.join("model.onnx")).expect("the node test's model");
        let graph = qopt_onnx::decode_model(&bytes).expect("the model decodes").graph.expect("a graph");
        let names: Vec<String> = graph.output.iter().map(|o| o.name.clone()).collect();
        let qir = dir.join(format!("{test}.qir"));
        let imported = Command::new(env!("CARGO_BIN_EXE_qimport"))
            .arg(case.join("model.onnx"))
            .arg("-o")
            .arg(&qir)
            .output()
            .expect("qimport starts");
        assert!(imported.status.success(), "{test}: {}", text(&imported.stderr));
        let out = dir.join(format!("{test}.npz"));
        let mut args = vec![
            qir.display().to_string(),
            "--allow-nonfinite".into(),
            "-o".into(),
            out.display().to_string(),
        ];
        for k in 0.. {
            let input = case.join(format!("input_{k}.npy"));
            if !input.exists() {
                break;
            }
            args.extend(["--input".to_string(), input.display().to_string()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        expect(0, &args);
        let members = read_npz(&out);
        let member_names: Vec<&str> = members.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(member_names, names, "{test}: qrun names the members after the model's outputs");
        for (k, name) in names.iter().enumerate() {
            let got = &members.iter().find(|(n, _)| n == name).expect("the member").1;
            let want = npy::read_npy_file(case.join(format!("output_{k}.npy"))).expect("the expected output");
            let (got, want) = (Tensor::from_raw(got).unwrap(), Tensor::from_raw(&want).unwrap());
            assert_eq!((got.dtype(), got.shape()), (want.dtype(), want.shape()), "{test}: output {name}");
            assert!(got.all_close(&want, 1e-3, 1e-7), "{test}: output {name} differs");
        }
    }
}
