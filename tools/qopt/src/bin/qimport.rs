//! `qimport`: imports an ONNX model into a verified `.qir` module in the `fp`
//! dialect (`qnn` for QDQ models), written to standard output or atomically
//! to `-o`. The translation is the `qopt_onnx` crate; see
//! `docs/onnx-import.md`.
//!
//! `--list-ops` prints the supported ONNX op types instead, one per line
//! (`qopt_onnx::supported_op_types`), for scripts such as
//! `scripts/onnx_conformance.py`; `--list-evaluated-ops` those of them it
//! evaluates when a node's inputs are all constant
//! (`qopt_onnx::evaluated_op_types`).
//!
//! Exit codes: 0 success; 1 the model cannot be read or imported (errors
//! name the file); 2 usage errors.

use clap::Parser;
use qopt_driver::{refuse_output_over_input, write_file_atomically, EXIT_FAILURE, EXIT_OK, EXIT_USAGE};
use qopt_ir_core::{print_module, Context, MAX_DIM};
use qopt_onnx::{import_model, ImportOptions};
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

/// Import an ONNX model as a .qir module (fp dialect; qnn for QDQ models).
#[derive(Parser, Debug)]
#[command(
    version,
    after_help = "Examples:\n  \
        qimport model.onnx                       print the module\n  \
        qimport model.onnx -o model.qir          write it atomically\n  \
        qimport model.onnx --batch 8             fix a dynamic batch dimension to 8\n  \
        qimport model.onnx --input-shape x=1x3x48x192   fix every dynamic dimension of input x\n  \
        qimport --list-ops                       the supported ONNX op types, one per line\n  \
        qimport --list-evaluated-ops             those evaluated at import on constant inputs"
)]
struct Cli {
    /// The ONNX model file.
    #[arg(required_unless_present_any = ["list_ops", "list_evaluated_ops"])]
    model: Option<PathBuf>,
    /// Print the supported ONNX op types (standard domain), one per line, and exit.
    #[arg(long = "list-ops", conflicts_with_all = ["model", "output", "batch", "input_shape"])]
    list_ops: bool,
    /// Print the op types evaluated at import when all of a node's inputs are
    /// constant (a subset of --list-ops), one per line, and exit.
    #[arg(
        long = "list-evaluated-ops",
        conflicts_with_all = ["model", "output", "batch", "input_shape", "list_ops"]
    )]
    list_evaluated_ops: bool,
    /// Output file (written atomically); standard output by default or with `-o -`.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
    /// The size of a dynamic batch dimension (dimension 0 of the inputs).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i64).range(1..=MAX_DIM))]
    batch: Option<i64>,
    /// The whole shape of a graph input, `NAME=1x3x48x192`: fixes its dynamic
    /// dimensions (repeat for several inputs).
    #[arg(long = "input-shape", value_name = "NAME=SHAPE", value_parser = parse_input_shape)]
    input_shape: Vec<(String, Vec<i64>)>,
}

/// `NAME=1x3x48x192` into the name and the sizes (each at least 1).
fn parse_input_shape(text: &str) -> Result<(String, Vec<i64>), String> {
    let (name, shape) = text.rsplit_once('=').ok_or("expected NAME=SHAPE, like x=1x3x224x224")?;
    if name.is_empty() {
        return Err("the input name is empty (expected NAME=SHAPE)".into());
    }
    let sizes = shape
        .split('x')
        .map(|d| match d.trim().parse::<i64>() {
            Ok(v) if (1..=MAX_DIM).contains(&v) => Ok(v),
            _ => Err(format!(
                "'{d}' is not a size from 1 to 2^48 = {MAX_DIM} (expected NAME=SHAPE, like x=1x3x224x224)"
            )),
        })
        .collect::<Result<Vec<i64>, String>>()?;
    Ok((name.to_string(), sizes))
}

fn run() -> i32 {
    let mut cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { EXIT_USAGE } else { EXIT_OK };
        }
    };
    // `-o -` is standard output, as without -o.
    cli.output = cli.output.filter(|p| p.as_os_str() != "-");
    // clap makes the model required without --list-ops or --list-evaluated-ops
    // and an error with either.
    let Some(path) = cli.model.clone() else {
        return if cli.list_evaluated_ops {
            list_ops(qopt_onnx::evaluated_op_types())
        } else {
            list_ops(qopt_onnx::supported_op_types())
        };
    };
    let model = path.display().to_string();
    let fail = |message: String| {
        eprintln!("qimport: error: {model}: {message}");
        EXIT_FAILURE
    };
    if let Some(output) = &cli.output {
        if let Err(message) = refuse_output_over_input(output, &[&path]) {
            return fail(message);
        }
    }
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) => return fail(format!("cannot read the file: {e}")),
    };
    let mut ctx = Context::new();
    let options = ImportOptions { batch: cli.batch, input_shapes: cli.input_shape.clone() };
    let module = match import_model(&mut ctx, &bytes, &options) {
        Ok(module) => module,
        Err(e) => return fail(e.to_string()),
    };
    let written = match &cli.output {
        Some(path) => write_file_atomically(path, |w| print_module(&ctx, &module, w)),
        None => {
            let stdout = io::stdout();
            let mut w = io::BufWriter::with_capacity(1 << 20, stdout.lock());
            print_module(&ctx, &module, &mut w).and_then(|()| w.flush())
        }
    };
    match written {
        Ok(()) => {
            eprintln!("qimport: {model}: {}", summary(&ctx, &module));
            EXIT_OK
        }
        Err(e) => {
            let target = cli.output.map_or("standard output".to_string(), |p| p.display().to_string());
            eprintln!("qimport: error: cannot write {target}: {e}");
            EXIT_FAILURE
        }
    }
}

/// `--list-ops`, `--list-evaluated-ops`: `names` on standard output, one per line.
fn list_ops(mut names: impl Iterator<Item = &'static str>) -> i32 {
    let mut out = io::stdout().lock();
    let written = names.try_for_each(|name| writeln!(out, "{name}"));
    match written.and_then(|()| out.flush()) {
        Ok(()) => EXIT_OK,
        Err(e) => {
            eprintln!("qimport: error: cannot write standard output: {e}");
            EXIT_FAILURE
        }
    }
}

/// `57 ops, 11689512 parameters; inputs 1x3x224x224xf32; outputs 1x1000xf32`:
/// the ops of the module (constants and the function's own ops apart), the
/// elements of its constants, and `@main`'s argument and result types.
fn summary(ctx: &Context, module: &qopt_ir_core::Module) -> String {
    let (mut ops, mut parameters) = (0u64, 0u64);
    let mut signature = (Vec::new(), Vec::new());
    for op in module.walk_preorder(module.root()) {
        let name = ctx.op_name_str(module.op_name(op));
        let constant =
            ctx.op_def(module.op_name(op)).is_some_and(|d| d.has(qopt_ir_core::Traits::CONSTANT_LIKE));
        if constant {
            let ty = module.value_type(module.result(op, 0));
            parameters += qopt_ir_core::static_num_elements(ctx, ty).unwrap_or(0);
        } else if name == "func.func" {
            if let Some(qopt_ir_core::AttrData::Type(t)) =
                module.op_attr(ctx, op, "function_type").map(|a| ctx.attr_data(a))
            {
                if let qopt_ir_core::TypeData::Function { inputs, results } = ctx.type_data(*t) {
                    signature = (inputs.to_vec(), results.to_vec());
                }
            }
        } else if !name.starts_with("func.") && !name.starts_with("builtin.") {
            ops += 1;
        }
    }
    let types = |list: &[qopt_ir_core::Type]| {
        list.iter()
            .map(|&t| {
                qopt_ir_core::type_to_string(ctx, t)
                    .trim_start_matches("tensor<")
                    .trim_end_matches('>')
                    .to_string()
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "{ops} ops, {parameters} parameters; inputs {}; outputs {}",
        types(&signature.0),
        types(&signature.1)
    )
}

fn main() -> ExitCode {
    ExitCode::from(run() as u8)
}
