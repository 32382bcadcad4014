//! Command-line flags of the opt driver.

use clap::{ArgAction, Parser, ValueEnum};
use std::path::PathBuf;

/// How diagnostics are written to standard error (`--diagnostics`).
#[derive(Copy, Clone, PartialEq, Eq, Debug, Default, ValueEnum)]
pub enum DiagnosticFormat {
    /// `file:line:col: error: message`, the source line and a caret.
    #[default]
    Human,
    /// one JSON object per diagnostic and line.
    Json,
}

/// What `--verify-equiv` does with a pass it cannot prove.
#[derive(Copy, Clone, PartialEq, Eq, Debug, Default, ValueEnum)]
pub enum VerifyEquiv {
    /// A failed or unknown proof fails the run (exit 1, with a reproducer).
    #[default]
    Fail,
    /// Report every outcome and go on.
    Warn,
}

/// What `--verify-numerics` does with a pass whose results moved beyond its
/// relation (`--verify-numerics-mode`).
#[derive(Copy, Clone, PartialEq, Eq, Debug, Default, ValueEnum)]
pub enum VerifyNumericsMode {
    /// Such a pass fails the run (exit 1, with a reproducer).
    #[default]
    Fail,
    /// Report every pass and go on.
    Warn,
}

/// The most inputs `--verify-numerics=N` runs per side of a pass: each input
/// is a whole interpreter run, twice per pass, so a mistyped N of a million
/// would silently run for many minutes.
pub const MAX_VERIFY_NUMERICS_INPUTS: u32 = 100_000;

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
        qopt model.qir --pass=canonicalize --print-ir-after-all --timing --stats\n  \
        qopt model.qir --pass=cse -vv                    log pass spans and events on stderr\n  \
        qopt model.qir --pass=fold-bn --verify-equiv     prove each pass by equality saturation\n  \
        qopt model.qir --pass=fold-bn --verify-numerics  run each pass's input and output on 8 random inputs\n  \
        qopt model.qir --diagnostics=json                one JSON object per diagnostic on stderr\n  \
        qopt --list-dialects                             registered dialects with summaries\n  \
        qopt --list-ops=fp                               ops of one dialect: arity, traits, summary\n  \
        qopt --emit-op-docs docs/dialects                write one Markdown op reference per dialect
        qopt --emit-pass-docs docs/passes.md             write the Markdown pass reference"
)]
pub struct Cli {
    /// Input `.qir` file, `-` for standard input.
    #[arg(default_value = "-")]
    pub input: String,
    /// Pass pipeline, e.g. `canonicalize,dce` or `pass{opt=1 list=[1,2]}`.
    #[arg(long = "pass", visible_alias = "pass-pipeline", value_name = "PIPELINE")]
    pub pass: Option<String>,
    /// Output file (written atomically); standard output by default or with `-o -`.
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
    /// Prove each pass by equality saturation under the relation it declares
    /// (docs/verification.md); `--verify-equiv=warn` reports without failing.
    #[arg(long, value_name = "MODE", value_enum, num_args = 0..=1, require_equals = true, default_missing_value = "fail")]
    pub verify_equiv: Option<VerifyEquiv>,
    /// Run the module before and after each pass on N random inputs (default
    /// 8, at most 100000) in the interpreter and report the largest difference of the results;
    /// a pass that keeps semantics fails the run if its results move beyond
    /// its relation (docs/verification.md).
    #[arg(
        long,
        value_name = "N",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "8",
        value_parser = clap::value_parser!(u32).range(1..=MAX_VERIFY_NUMERICS_INPUTS as i64)
    )]
    pub verify_numerics: Option<u32>,
    /// The seed of `--verify-numerics`: input k is drawn with seed N + k.
    #[arg(long, value_name = "N", default_value_t = 0, requires = "verify_numerics")]
    pub verify_numerics_seed: u64,
    /// `fail`: a pass whose results break its relation fails the run; `warn`:
    /// report and go on.
    #[arg(long, value_name = "MODE", value_enum, default_value_t, requires = "verify_numerics")]
    pub verify_numerics_mode: VerifyNumericsMode,
    /// Directory for reproducer files of failing passes (default: the temp dir).
    #[arg(long, value_name = "DIR")]
    pub reproducer_dir: Option<PathBuf>,
    /// List the registered passes and named pipelines with their options.
    #[arg(long)]
    pub list_passes: bool,
    /// List the registered dialects with their summaries.
    #[arg(long)]
    pub list_dialects: bool,
    /// List the registered ops (of one dialect with `--list-ops=DIALECT`):
    /// arity, traits and summary.
    #[arg(long, value_name = "DIALECT", num_args = 0..=1, require_equals = true)]
    pub list_ops: Option<Option<String>>,
    /// Write a Markdown op reference per registered dialect (not builtin, func)
    /// into this directory, as `DIR/<dialect>.md`.
    #[arg(long, value_name = "DIR")]
    pub emit_op_docs: Option<PathBuf>,
    /// Write the Markdown pass reference (every registered pass and named
    /// pipeline with its options) to this file.
    #[arg(long, value_name = "FILE")]
    pub emit_pass_docs: Option<PathBuf>,
    /// How diagnostics are written to stderr: `human`, or `json` (one object per line).
    #[arg(long, value_name = "FORMAT", value_enum, default_value_t = DiagnosticFormat::Human)]
    pub diagnostics: DiagnosticFormat,
    /// More logging on stderr (-v: pass spans, -vv: debug events, -vvv: trace).
    #[arg(short = 'v', action = ArgAction::Count)]
    pub verbose: u8,
    /// Only errors on stderr.
    #[arg(short = 'q', long)]
    pub quiet: bool,
}

impl Cli {
    /// The `-o` file, or `None` for standard output (no `-o`, or `-o -`).
    pub fn output_file(&self) -> Option<&std::path::Path> {
        self.output.as_deref().filter(|p| p.as_os_str() != "-")
    }
}
