//! `qexport`: writes one function of a `.qir` module as an ONNX model, float
//! ops as the ONNX ops they come from and quantized ops as QDQ or QOperator
//! nodes (by default QDQ, with QOperator for the layers ONNX Runtime's x86
//! u8 × s8 kernels could saturate). The translation is `qopt_onnx::export_module`; see
//! `docs/onnx-export.md`.
//!
//! The module is parsed and verified with qopt's dialects, exported, checked
//! by importing the result again (the importer's structural rules), and
//! written atomically to `-o`: nothing is written when any step fails.
//!
//! Exit codes: 0 success; 1 the input cannot be read, does not parse or
//! verify, cannot be exported (one error listing every op and value ONNX
//! cannot express, each at its line), or the output cannot be written;
//! 2 usage errors; 141, quietly, when the reader of standard output (`-o -`)
//! went away, as for the other tools.

use clap::{Parser, ValueEnum};
use qopt_driver::{write_file_atomically, Driver, EndsOnClosedPipe, EXIT_FAILURE, EXIT_OK, EXIT_USAGE};
use qopt_ir_core::{parse_source, verify, Diagnostic, Diagnostics, Severity, SourceMap, SourceText};
use qopt_onnx::{export_module, problems_heading, ExportError, ExportFormat, ExportOptions, EXPORT_OPSETS};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

/// `--format`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
enum Format {
    /// QDQ, with QLinear ops for the conv and dense layers ONNX Runtime's u8 × s8 kernels could
    /// saturate on x86 without VNNI.
    Auto,
    /// QuantizeLinear / DequantizeLinear around float ops.
    Qdq,
    /// QLinearConv, QGemm, QLinearAdd, ... where they exist; QDQ elsewhere.
    Qoperator,
}

/// Export a function of a .qir module as an ONNX model (QDQ and/or QOperator for quantized ops).
#[derive(Parser, Debug)]
#[command(
    version,
    after_help = "Examples:\n  \
        qexport model.qir -o model.onnx                      float, or QDQ (+ QLinear ops where ONNX Runtime needs them)\n  \
        qexport model.int8.qir -o model.onnx --format=qdq         QDQ only (portable)\n  \
        qexport model.int8.qir -o model.onnx --format=qoperator   QLinearConv, QGemm, ...\n  \
        qexport model.qir -o model.onnx --function main --opset 21"
)]
struct Cli {
    /// The `.qir` module, `-` for standard input.
    input: String,
    /// The ONNX file to write (atomically); `-` for standard output.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: PathBuf,
    /// How quantized ops are written.
    #[arg(long, value_enum, default_value = "auto")]
    format: Format,
    /// The function to export.
    #[arg(long, value_name = "NAME", default_value = "main")]
    function: String,
    /// The standard ONNX opset (default: the lowest that expresses the model, at least 17).
    #[arg(long, value_name = "N", value_parser = parse_opset)]
    opset: Option<i64>,
}

fn parse_opset(text: &str) -> Result<i64, String> {
    let n: i64 = text.parse().map_err(|_| format!("'{text}' is not a number"))?;
    if !EXPORT_OPSETS.contains(&n) {
        return Err(format!(
            "opset {n} is not supported (opsets {} to {})",
            EXPORT_OPSETS.start(),
            EXPORT_OPSETS.end()
        ));
    }
    Ok(n)
}

const TOOL: &str = "qexport";

fn run() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { EXIT_USAGE } else { EXIT_OK };
        }
    };
    let fail = |message: String| {
        eprintln!("{TOOL}: error: {message}");
        EXIT_FAILURE
    };
    if let Err(message) = qopt_driver::refuse_output_over_input(&cli.output, &[Path::new(&cli.input)]) {
        return fail(message);
    }
    let (name, source) = match read_input(&cli.input) {
        Ok(s) => s,
        Err(e) => return fail(format!("cannot read '{}': {e}", cli.input)),
    };
    if let Some(why) = qopt_driver::not_qir_text(source.bytes()) {
        return fail(format!("'{name}': {why}"));
    }
    let driver = Driver::new(TOOL);
    let mut ctx = match driver.new_context() {
        Ok(ctx) => ctx,
        Err(e) => return fail(format!("registering dialects failed: {e}")),
    };
    let source = Arc::new(source);
    let mut sources = SourceMap::new();
    sources.add(name.as_str().into(), source.clone());
    let report = |d: &Diagnostics| {
        eprint!("{}", d.render(&sources));
        EXIT_FAILURE
    };
    let module = match parse_source(&mut ctx, &source, &name) {
        Ok(m) => m,
        Err(d) => return report(&d),
    };
    if let Err(d) = verify(&mut ctx, &module) {
        return report(&d);
    }
    let format = match cli.format {
        Format::Auto => ExportFormat::Auto,
        Format::Qdq => ExportFormat::Qdq,
        Format::Qoperator => ExportFormat::QOperator,
    };
    let options = ExportOptions { format, function: cli.function.clone(), opset: cli.opset };
    let exported = match export_module(&ctx, &module, &options) {
        Ok(e) => e,
        Err(ExportError::Problems(problems)) => {
            let file: Arc<str> = name.as_str().into();
            let first = problems.iter().map(|p| p.pos).find(|p| p.is_some()).unwrap_or_default();
            let mut diag = Diagnostic::error(Some(file.clone()), first, problems_heading(&problems));
            for p in &problems {
                let note = Diagnostic {
                    severity: Severity::Note,
                    ..Diagnostic::error(Some(file.clone()), p.pos, p.describe())
                };
                diag = diag.with_note(note);
            }
            return report(&Diagnostics(vec![diag]));
        }
        Err(e) => return fail(format!("{name}: {e}")),
    };
    let target = cli.output.display().to_string();
    let written = if target == "-" {
        let mut out = EndsOnClosedPipe(io::stdout().lock());
        out.write_all(&exported.bytes).and_then(|()| out.flush())
    } else {
        write_file_atomically(&cli.output, |w| w.write_all(&exported.bytes))
    };
    if let Err(e) = written {
        let target = if target == "-" { "standard output".to_string() } else { target };
        return fail(format!("cannot write {target}: {e}"));
    }
    eprintln!(
        "{TOOL}: {name} -> {target}: {}, opset {}, {} nodes ({}), {} initializers{}",
        form(cli.format, &exported),
        exported.opset,
        exported.nodes,
        node_counts(&exported.op_types),
        exported.initializers,
        ort_note(cli.format, &exported)
    );
    EXIT_OK
}

/// `QDQ`, `QOperator`, or what `auto` wrote: `QDQ` with the layers it wrote
/// as QLinear ops.
fn form(format: Format, exported: &qopt_onnx::Exported) -> String {
    match format {
        Format::Qdq => "QDQ".into(),
        Format::Qoperator => "QOperator".into(),
        Format::Auto if exported.integer_layers == 0 => "QDQ".into(),
        Format::Auto => format!(
            "QDQ with {} of {} conv/dense layers as QLinear ops (their int8 weights could saturate ONNX \
             Runtime's u8 × s8 kernels)",
            exported.integer_layers, exported.layers
        ),
    }
}

/// Whether ONNX Runtime's default session computes the quantized layers as
/// qopt does on x86 without VNNI (`Exported::u8_s8_saturating`).
fn ort_note(format: Format, exported: &qopt_onnx::Exported) -> String {
    if exported.layers == 0 {
        return String::new();
    }
    match exported.u8_s8_saturating.as_slice() {
        [] => "; ONNX Runtime's int8 kernels compute every layer without saturation on x86 (AVX2, no VNNI)"
            .into(),
        layers => format!(
            "; warning: on x86 without VNNI, ONNX Runtime's u8 × s8 kernels can saturate in {} layer{} ({}), \
             so its default session may differ from qrun by more than one output step ({})",
            layers.len(),
            if layers.len() == 1 { "" } else { "s" },
            if layers.len() > 6 {
                format!("{}, … {} more", layers[..5].join(", "), layers.len() - 5)
            } else {
                layers.join(", ")
            },
            match format {
                Format::Qdq => "--format=auto avoids it",
                _ => "int8 activations or quantize{reduce-range} avoid it",
            }
        ),
    }
}

/// `Conv 3, QuantizeLinear 7`: each op type with its count, most frequent first.
fn node_counts(op_types: &[String]) -> String {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for t in op_types {
        match counts.iter_mut().find(|(name, _)| name == t) {
            Some((_, n)) => *n += 1,
            None => counts.push((t, 1)),
        }
    }
    counts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    counts.iter().map(|(name, n)| format!("{name} {n}")).collect::<Vec<_>>().join(", ")
}

/// The input's display name and text; `-` reads standard input.
fn read_input(input: &str) -> io::Result<(String, SourceText)> {
    if input == "-" {
        return Ok(("<stdin>".to_string(), SourceText::read_stdin()?));
    }
    Ok((input.to_string(), SourceText::read_file(std::path::Path::new(input))?))
}

fn main() -> ExitCode {
    ExitCode::from(run() as u8)
}
