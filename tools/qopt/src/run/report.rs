//! What `qrun` writes on standard output for each mode: text for people, or
//! with `--json` one JSON document (see [`super::json`] for numbers).
//!
//! JSON documents (keys in this order):
//!
//! ```text
//! run:     {"mode":"run","model":M,"function":F,"outputs":[OUT...]}
//!          OUT = {"name":"out0","dtype":"float32","shape":[1,10],"min":x,"max":x,
//!                 "mean":x,"argmax":k|null,"nan_count":n[,"values":[...]]}
//!                                                  values with --print
//! bench:   {"mode":"bench","model":M,"function":F,"runs":N,
//!           "median_ms":x,"min_ms":x,"max_ms":x}
//! compare: {"mode":"compare","reference":M,"other":M2,"function":F,"runs":K,
//!           "rows":[ROW...],"unmatched_other":["loc(\"x\")",...]}
//!          ROW = {"value":"loc(\"fc1\")","op":fp_op::DENSE,"kind":"op"|"output",
//!                 "shape":[1,8],"sqnr_db":x,"cosine":x,"max_abs_error":x,
//!                 "mean_abs_error":x,"note":null|"..."}
//! ```
//!
//! `min`, `max`, `mean` and `argmax` leave NaN out and are `null` when every
//! value is NaN (or there is none); `argmax` is given for outputs of shape
//! `[1, N]` only. In a compare row the four metrics are `null`
//! when the value could not be compared, and `note` says why.

use super::bench::Latency;
use super::compare::{Comparison, Outcome, Row};
use super::expect::ExpectReport;
use super::tensor_text::{integers, number, tensor};
use qopt_interp::Tensor;
use qopt_ir_core::json::Json;
use std::fmt::Write as _;

/// Names the run and its inputs for the JSON documents.
pub(crate) struct Header<'a> {
    pub model: &'a str,
    pub func: &'a str,
}

/// Minimum, maximum, mean and (for `[1, N]`) argmax of a tensor's values other
/// than NaN, and how many are NaN; for integers also the exact minimum and
/// maximum (an int64 above 2^53 is not an f64).
struct Summary {
    int_range: Option<(i64, i64)>,
    min: Option<f64>,
    max: Option<f64>,
    mean: Option<f64>,
    argmax: Option<usize>,
    nans: usize,
}

fn summarize(t: &Tensor) -> Summary {
    let values = t.to_f64_vec();
    let nans = values.iter().filter(|v| v.is_nan()).count();
    let numbers = || values.iter().copied().filter(|v| !v.is_nan());
    if nans == values.len() {
        return Summary { int_range: None, min: None, max: None, mean: None, argmax: None, nans };
    }
    let int_range = integers(t).and_then(|v| Some((*v.iter().min()?, *v.iter().max()?)));
    let min = numbers().fold(f64::INFINITY, f64::min);
    let max = numbers().fold(f64::NEG_INFINITY, f64::max);
    let mean = numbers().sum::<f64>() / (values.len() - nans) as f64;
    // The first largest value; NaN never wins.
    let argmax = (t.rank() == 2 && t.shape()[0] == 1).then(|| {
        values
            .iter()
            .enumerate()
            .fold(0, |best, (i, &v)| if v > values[best] || values[best].is_nan() { i } else { best })
    });
    Summary { int_range, min: Some(min), max: Some(max), mean: Some(mean), argmax, nans }
}

/// One line per output (named by `names`), or with `print` its header line
/// and values.
pub(crate) fn run_text(outputs: &[Tensor], names: &[String], print: bool) -> String {
    let mut out = String::new();
    for (t, name) in outputs.iter().zip(names) {
        let _ = write!(out, "{name}: {}", t.describe());
        if print {
            let _ = writeln!(out, "\n{}", tensor(t));
            continue;
        }
        let s = summarize(t);
        let show = |v: Option<f64>| v.map_or("-".to_string(), number);
        let (min, max) = match s.int_range {
            Some((lo, hi)) => (lo.to_string(), hi.to_string()),
            None => (show(s.min), show(s.max)),
        };
        let _ = write!(out, "  min {min} max {max} mean {}", show(s.mean));
        if let Some(i) = s.argmax {
            let _ = write!(out, " argmax {i}");
        }
        if s.nans > 0 {
            let _ = write!(out, " ({} NaN)", s.nans);
        }
        out.push('\n');
    }
    out
}

/// The `run` JSON document.
pub(crate) fn run_json(
    header: &Header<'_>,
    outputs: &[Tensor],
    names: &[String],
    print: bool,
    expectation: Option<&ExpectReport>,
) -> String {
    let outputs = outputs
        .iter()
        .zip(names)
        .map(|(t, name)| {
            let s = summarize(t);
            let num = |v: Option<f64>| v.map_or(Json::Null, Json::Num);
            let (min, max) = match s.int_range {
                Some((lo, hi)) => (Json::Int(lo), Json::Int(hi)),
                None => (num(s.min), num(s.max)),
            };
            let mut fields = vec![
                ("name", Json::str(name.as_str())),
                ("dtype", Json::str(t.dtype().name())),
                ("shape", Json::sizes(t.shape())),
                ("min", min),
                ("max", max),
                ("mean", num(s.mean)),
                ("argmax", s.argmax.map_or(Json::Null, |i| Json::Int(i as i64))),
                ("nan_count", Json::Int(s.nans as i64)),
            ];
            if print {
                let values = match integers(t) {
                    Some(ints) => ints.into_iter().map(Json::Int).collect(),
                    None => t.to_f64_vec().into_iter().map(Json::Num).collect(),
                };
                fields.push(("values", Json::Arr(values)));
            }
            Json::Obj(fields)
        })
        .collect();
    let mut fields = vec![
        ("mode", Json::str("run")),
        ("model", Json::str(header.model)),
        ("function", Json::str(header.func)),
        ("outputs", Json::Arr(outputs)),
    ];
    if let Some(e) = expectation {
        fields.push(("expect", expect_json(e)));
    }
    document(fields)
}

/// The `--expect` check: the reference, tolerances and each output's result.
fn expect_json(e: &ExpectReport) -> Json {
    let outputs = e
        .outputs
        .iter()
        .map(|o| {
            let worst = o.worst.as_ref().map_or(Json::Null, |(index, got, want)| {
                Json::Obj(vec![
                    ("index", Json::sizes(index)),
                    ("got", Json::Num(*got)),
                    ("expected", Json::Num(*want)),
                ])
            });
            Json::Obj(vec![
                ("name", Json::str(o.name.as_str())),
                ("elements", Json::Int(o.elements as i64)),
                ("atol", Json::Num(o.atol)),
                ("mismatches", Json::Int(o.mismatches as i64)),
                ("max_abs_error", Json::Num(o.max_abs_error)),
                ("worst", worst),
            ])
        })
        .collect();
    Json::Obj(vec![
        ("reference", Json::str(e.reference.as_str())),
        ("rtol", Json::Num(e.tolerance.rtol)),
        ("atol", e.tolerance.atol.map_or(Json::str("scaled"), Json::Num)),
        ("passed", Json::Bool(e.passed())),
        ("outputs", Json::Arr(outputs)),
    ])
}

/// The `bench` JSON document.
pub(crate) fn bench_json(header: &Header<'_>, latency: &Latency) -> String {
    document(vec![
        ("mode", Json::str("bench")),
        ("model", Json::str(header.model)),
        ("function", Json::str(header.func)),
        ("runs", Json::Int(latency.runs as i64)),
        ("median_ms", Json::Num(latency.median_ms)),
        ("min_ms", Json::Num(latency.min_ms)),
        ("max_ms", Json::Num(latency.max_ms)),
    ])
}

/// Why a row has no metrics, if it has none.
fn note(row: &Row, other: &str) -> Option<String> {
    match &row.outcome {
        Outcome::Stats(_) => None,
        Outcome::Missing => Some(format!("not in {other}")),
        Outcome::ShapeMismatch(shape) => Some(format!("shape {shape:?} in {other}")),
    }
}

/// The comparison table of the values both models have, then a line for each
/// model listing its values that match nothing in the other.
pub(crate) fn compare_text(cmp: &Comparison, reference: &str, other: &str) -> String {
    let header = ["value", "op", "shape", "SQNR dB", "cosine", "max abs err", "mean abs err", ""];
    let mut lines: Vec<[String; 8]> = vec![header.map(String::from)];
    let unmatched_reference: Vec<String> =
        cmp.rows.iter().filter(|r| matches!(r.outcome, Outcome::Missing)).map(|r| r.value.clone()).collect();
    for row in cmp.rows.iter().filter(|r| !matches!(r.outcome, Outcome::Missing)) {
        let metrics = match &row.outcome {
            Outcome::Stats(s) => [
                sqnr_text(s.sqnr_db()),
                format!("{:.6}", s.cosine()),
                number(s.max_abs_error()),
                number(s.mean_abs_error()),
            ],
            _ => ["-", "-", "-", "-"].map(String::from),
        };
        let [sqnr, cosine, max_abs, mean_abs] = metrics;
        let shape = format!("{:?}", row.shape);
        let note = note(row, other).unwrap_or_default();
        lines.push([row.value.clone(), row.op.clone(), shape, sqnr, cosine, max_abs, mean_abs, note]);
    }
    let mut widths = [0usize; 8];
    for line in &lines {
        for (w, cell) in widths.iter_mut().zip(line) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for line in &lines {
        let mut text = String::new();
        for (i, (cell, &w)) in line.iter().zip(&widths).enumerate() {
            // Names left-aligned, numbers right-aligned, two spaces apart.
            let _ = match i {
                0..=2 => write!(text, "{cell:<w$}  "),
                7 => write!(text, "{cell}"),
                _ => write!(text, "{cell:>w$}  "),
            };
        }
        out.push_str(text.trim_end());
        out.push('\n');
    }
    if cmp.outputs_only {
        let _ = writeln!(out, "{other} ran as compiled x86-64 code: only the outputs are compared");
    }
    for (model, unmatched) in [(reference, &unmatched_reference), (other, &cmp.unmatched_other)] {
        if !unmatched.is_empty() {
            const SHOWN: usize = 10;
            let names = unmatched.iter().take(SHOWN).cloned().collect::<Vec<_>>().join(", ");
            let more = unmatched.len().saturating_sub(SHOWN);
            let more = if more > 0 { format!(" and {more} more") } else { String::new() };
            let _ = writeln!(out, "{} value(s) of {model} match nothing: {names}{more}", unmatched.len());
        }
    }
    out
}

fn sqnr_text(db: f64) -> String {
    if db.is_finite() {
        format!("{db:.2}")
    } else {
        number(db)
    }
}

/// The `compare` JSON document.
pub(crate) fn compare_json(header: &Header<'_>, other: &str, runs: usize, cmp: &Comparison) -> String {
    let rows = cmp
        .rows
        .iter()
        .map(|row| {
            let kind = if row.output { "output" } else { "op" };
            let metric = |f: fn(&super::metrics::ErrorStats) -> f64| match &row.outcome {
                Outcome::Stats(s) => Json::Num(f(s)),
                _ => Json::Null,
            };
            Json::Obj(vec![
                ("value", Json::str(&row.value)),
                ("op", Json::str(&row.op)),
                ("kind", Json::str(kind)),
                ("shape", Json::sizes(&row.shape)),
                ("sqnr_db", metric(|s| s.sqnr_db())),
                ("cosine", metric(|s| s.cosine())),
                ("max_abs_error", metric(|s| s.max_abs_error())),
                ("mean_abs_error", metric(|s| s.mean_abs_error())),
                ("note", note(row, other).map_or(Json::Null, Json::Str)),
            ])
        })
        .collect();
    document(vec![
        ("mode", Json::str("compare")),
        ("reference", Json::str(header.model)),
        ("other", Json::str(other)),
        ("function", Json::str(header.func)),
        ("runs", Json::Int(runs as i64)),
        ("rows", Json::Arr(rows)),
        ("unmatched_other", Json::Arr(cmp.unmatched_other.iter().map(Json::str).collect())),
        ("outputs_only", Json::Bool(cmp.outputs_only)),
    ])
}

/// One JSON document and a line break.
fn document(fields: Vec<(&'static str, Json)>) -> String {
    Json::Obj(fields).to_text() + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::metrics::ErrorStats;
    use qopt_dialect_fp::op_names as fp_op;

    fn out0() -> Vec<String> {
        vec!["out0".to_string()]
    }

    #[test]
    fn summary_lines_give_range_mean_and_argmax() {
        let t = Tensor::from_f32(&[1, 4], vec![0.5, 2.0, -1.0, 2.0]).unwrap();
        assert_eq!(
            run_text(&[t], &out0(), false),
            "out0: float32 [1, 4]  min -1 max 2 mean 0.875 argmax 1\n"
        );
        let t = Tensor::from_f32(&[2, 2], vec![0.0; 4]).unwrap();
        assert_eq!(run_text(&[t], &out0(), false), "out0: float32 [2, 2]  min 0 max 0 mean 0\n");
        let t = Tensor::from_f32(&[1, 3], vec![f32::NAN, 2.0, f32::NAN]).unwrap();
        assert_eq!(
            run_text(&[t], &out0(), false),
            "out0: float32 [1, 3]  min 2 max 2 mean 2 argmax 1 (2 NaN)\n"
        );
        let t = Tensor::from_f32(&[1, 2], vec![f32::NAN; 2]).unwrap();
        assert_eq!(run_text(&[t], &out0(), false), "out0: float32 [1, 2]  min - max - mean - (2 NaN)\n");
    }

    #[test]
    fn int64_outputs_are_exact_in_summaries_values_and_json() {
        use qopt_npy::RawArray;
        let values = [9_007_199_254_740_993i64, -9_223_372_036_854_775_807];
        let t = Tensor::from_raw(&RawArray::from_elements(vec![2], &values).unwrap()).unwrap();
        let line = run_text(std::slice::from_ref(&t), &out0(), false);
        assert!(
            line.starts_with("out0: int64 [2]  min -9223372036854775807 max 9007199254740993 mean"),
            "{line}"
        );
        let json = run_json(&Header { model: "m.qir", func: "main" }, &[t], &out0(), true, None);
        assert!(json.contains(r#""min":-9223372036854775807,"max":9007199254740993,"#), "{json}");
        assert!(json.contains(r#""values":[9007199254740993,-9223372036854775807]"#), "{json}");
    }

    #[test]
    fn compare_rows_align_and_say_why_metrics_are_missing() {
        let row = |value: &str, outcome| Row {
            value: value.into(),
            op: fp_op::DENSE.into(),
            shape: vec![1, 2],
            output: false,
            outcome,
        };
        let cmp = Comparison {
            rows: vec![
                row("loc(\"fc1\")", Outcome::Stats(ErrorStats::of(&[1.0, 2.0], &[1.0, 2.0]))),
                row("loc(\"fc2\")", Outcome::Missing),
            ],
            unmatched_other: vec!["loc(\"extra\")".into()],
            outputs_only: false,
        };
        let text = compare_text(&cmp, "a.qir", "b.qir");
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("value       op        shape   SQNR dB"), "{text}");
        assert!(lines[1].contains("inf  1.000000"), "{text}");
        assert_eq!(lines[2], "1 value(s) of a.qir match nothing: loc(\"fc2\")");
        assert_eq!(lines[3], "1 value(s) of b.qir match nothing: loc(\"extra\")");
        let json = compare_json(&Header { model: "a.qir", func: "main" }, "b.qir", 1, &cmp);
        assert!(json.contains(r#""sqnr_db":"inf","cosine":1,"#), "{json}");
        assert!(json.contains(r#""sqnr_db":null"#), "{json}");
    }
}
