//! `qimport`: imports an ONNX model into a verified `.qir` module in the `fp`
//! dialect (`qnn` for QDQ models), written to standard output or atomically
//! to `-o`. The translation is the `qopt_onnx` crate; see
//! `docs/onnx-import.md`.
//!
//! Exit codes: 0 success; 1 the model cannot be read or imported (errors
//! name the file); 2 usage errors.

use clap::Parser;
use qopt_driver::{write_file_atomically, EXIT_FAILURE, EXIT_OK, EXIT_USAGE};
use qopt_ir_core::{print_module, Context};
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
        qimport model.onnx --batch 8             fix a dynamic batch dimension to 8"
)]
struct Cli {
    /// The ONNX model file.
    model: PathBuf,
    /// Output file (written atomically); standard output by default.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
    /// The size of a dynamic batch dimension (dimension 0 of the inputs).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i64).range(1..))]
    batch: Option<i64>,
}

fn run() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { EXIT_USAGE } else { EXIT_OK };
        }
    };
    let model = cli.model.display().to_string();
    let fail = |message: String| {
        eprintln!("qimport: error: {model}: {message}");
        EXIT_FAILURE
    };
    let bytes = match std::fs::read(&cli.model) {
        Ok(bytes) => bytes,
        Err(e) => return fail(format!("cannot read the file: {e}")),
    };
    let mut ctx = Context::new();
    let options = ImportOptions { batch: cli.batch };
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
        Ok(()) => EXIT_OK,
        Err(e) => {
            let target = cli.output.map_or("standard output".to_string(), |p| p.display().to_string());
            eprintln!("qimport: error: cannot write {target}: {e}");
            EXIT_FAILURE
        }
    }
}

fn main() -> ExitCode {
    ExitCode::from(run() as u8)
}
