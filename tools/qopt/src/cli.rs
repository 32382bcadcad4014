//! Command-line flags of the opt driver.

use clap::{ArgAction, Parser};
use std::path::PathBuf;

/// Flags shared by `qopt` and every driver built on it.
#[derive(Parser, Debug)]
#[command(
    version,
    about = "Parse, verify, transform and print .qir modules",
    after_help = "Examples:\n  \
        qopt model.qir                                   verify and print in canonical form\n  \
        qopt model.qir --pass=canonicalize -o out.qir    run a pipeline, write atomically\n  \
        qopt - --pass='a,b{k=v list=[1,2]}' < in.qir     read stdin; pass options in braces\n  \
        qopt cases.qir --split-input-file                each '// -----' case on its own\n  \
        qopt model.qir --pass=canonicalize --print-ir-after-all --timing --stats"
)]
pub struct Cli {
    /// Input `.qir` file, `-` for standard input.
    #[arg(default_value = "-")]
    pub input: String,
    /// Pass pipeline, e.g. `canonicalize,dce` or `pass{opt=1 list=[1,2]}`.
    #[arg(long = "pass", visible_alias = "pass-pipeline", value_name = "PIPELINE")]
    pub pass: Option<String>,
    /// Output file (written atomically); standard output by default.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Accept ops of dialects that are not registered.
    #[arg(long)]
    pub allow_unregistered_dialect: bool,
    /// Treat each `// -----` separated part of the input as its own module.
    #[arg(long)]
    pub split_input_file: bool,
    /// Do not verify the IR after each pass.
    #[arg(long)]
    pub no_verify_each: bool,
    /// Print the IR after every pass (to stderr, or --print-ir-dir).
    #[arg(long)]
    pub print_ir_after_all: bool,
    /// Print the IR before every pass.
    #[arg(long)]
    pub print_ir_before_all: bool,
    /// Print the IR before the named passes (comma-separated).
    #[arg(long, value_name = "PASSES", value_delimiter = ',')]
    pub print_ir_before: Vec<String>,
    /// Print the IR after the named passes (comma-separated).
    #[arg(long, value_name = "PASSES", value_delimiter = ',')]
    pub print_ir_after: Vec<String>,
    /// Print the IR after a pass only if the pass changed it.
    #[arg(long)]
    pub print_ir_after_change: bool,
    /// Write IR dumps as one file per pass into this directory.
    #[arg(long, value_name = "DIR")]
    pub print_ir_dir: Option<PathBuf>,
    /// Print a timing report (parse, verify, each pass, print).
    #[arg(long)]
    pub timing: bool,
    /// Print per-pass statistics.
    #[arg(long)]
    pub stats: bool,
    /// Directory for reproducer files of failing passes (default: the temp dir).
    #[arg(long, value_name = "DIR")]
    pub reproducer_dir: Option<PathBuf>,
    /// List the registered passes and named pipelines with their options.
    #[arg(long)]
    pub list_passes: bool,
    /// More logging (-v: info, -vv: debug, -vvv: trace) on stderr.
    #[arg(short = 'v', action = ArgAction::Count)]
    pub verbose: u8,
    /// Only errors on stderr.
    #[arg(short = 'q', long)]
    pub quiet: bool,
}
