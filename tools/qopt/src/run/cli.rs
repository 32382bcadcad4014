//! Command-line flags of `qrun` and of every run driver built on
//! [`RunDriver`](super::RunDriver). `docs/qrun.md` describes each with an example.

use super::engine::Backend;
use clap::Parser;
use qopt_codegen_x86::TargetCpu;
use std::path::PathBuf;

/// Flags of the run driver.
#[derive(Parser, Debug)]
#[command(
    version,
    about = "Run a function of a .qir model on .npy inputs, time it, or compare two models layer by layer",
    after_help = "Examples:\n  \
        qrun model.qir --input x.npy                     one line per output: shape, dtype, min/max/mean\n  \
        qrun model.qir --inputs in.npz --print           print every output's values\n  \
        qrun model.qir --input x.npy -o out.npz          write the outputs (named as the model names them)\n  \
        qrun model.qir --input test.npy --batch --expect ref.npy --atol 1e-4   check against a reference\n  \
        qrun model.qir --input test.npy --batch          run [N, ...] samples in model-sized chunks\n  \
        qrun model.qir --random-inputs --seed 3 --bench 20\n  \
        qrun quant.qir --input x.npy --backend=x86 --bench 20   compiled x86-64 code, in process\n  \
        qrun model.qir --input x.npy --compare quant.qir SQNR, cosine, errors per located op\n  \
        qrun model.qir --input x.npy --json              one JSON document on stdout"
)]
pub struct RunCli {
    /// The model, a `.qir` file.
    #[arg(value_name = "MODEL.qir")]
    pub model: PathBuf,
    /// The function to run.
    #[arg(long = "func", value_name = "NAME", default_value = "main")]
    pub func: String,
    /// An input `.npy` file; repeat once per function argument, in order.
    #[arg(long = "input", value_name = "FILE.npy", conflicts_with_all = ["inputs", "random_inputs"])]
    pub input: Vec<PathBuf>,
    /// A `.npz` archive of inputs: members `arg0`, `arg1`, ... by name if any
    /// member has such a name, else one member per argument in archive order.
    #[arg(long, value_name = "FILE.npz", conflicts_with = "random_inputs")]
    pub inputs: Option<PathBuf>,
    /// Generate deterministic inputs: floats standard normal, integers uniform
    /// over their storage range, dynamic dimensions of size 1.
    #[arg(long)]
    pub random_inputs: bool,
    /// The seed of `--random-inputs` (default 0).
    // Checked by the driver, not by `requires`: clap skips that check when a
    // conflicting flag such as `--input` is also given.
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Run float inputs holding NaN or ±inf (a warning instead of an error).
    #[arg(long)]
    pub allow_nonfinite: bool,
    /// The inputs hold many samples along dimension 0: run them in chunks of
    /// the model's batch size on every core and stack the outputs.
    #[arg(long, conflicts_with = "random_inputs")]
    pub batch: bool,
    /// Write the outputs to this `.npz` file (atomically), members named by
    /// the function's `result_names` (ONNX output names) or `out0`, `out1`, ...;
    /// a `.npy` name writes the one output of a single-output function.
    #[arg(short = 'o', long, value_name = "OUT.npz")]
    pub output: Option<PathBuf>,
    /// Check the outputs against stored references: a `.npy` for a function
    /// with one output, or a `.npz` with one member per output, named as the
    /// outputs are. Element by element `|out − ref| ≤ atol + rtol·|ref|`; a
    /// mismatch exits 1 after reporting the worst element.
    #[arg(long, value_name = "REF.npy|REF.npz", conflicts_with = "compare")]
    pub expect: Option<PathBuf>,
    /// The relative tolerance of --expect.
    #[arg(long, value_name = "R", default_value_t = 1e-5, requires = "expect", value_parser = parse_tolerance)]
    pub rtol: f64,
    /// The absolute tolerance of --expect (default: per output
    /// max(1e-8, 8·ε·max|ref|), ε the epsilon of its float type, so a float
    /// model passes against another runtime's float outputs).
    #[arg(long, value_name = "A", requires = "expect", value_parser = parse_tolerance)]
    pub atol: Option<f64>,
    /// Print every output's dtype, shape and values (summarized when large).
    #[arg(long)]
    pub print: bool,
    /// Time N runs of the function after one warm-up run.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub bench: Option<u32>,
    /// With --bench: also time every op over the runs (first sample) and
    /// print where the time goes, per op name and the slowest ops.
    #[arg(long, requires = "bench", conflicts_with = "json")]
    pub profile: bool,
    /// Compare with another model on the same inputs, per located op (this
    /// model is the reference).
    #[arg(long, value_name = "OTHER.qir", conflicts_with_all = ["output", "print", "bench"])]
    pub compare: Option<PathBuf>,
    /// Write one JSON document to standard output instead of text.
    #[arg(long)]
    pub json: bool,
    /// Where to run: the reference interpreter, or x86-64 code compiled in
    /// process (bit-exact with it). With --compare, the backend runs OTHER
    /// and the reference model runs in the interpreter.
    #[arg(long, value_enum, default_value = "interp")]
    pub backend: Backend,
    /// With --backend=x86: the CPU to generate code for (it must be this one
    /// or a subset of it): native, x86-64-v3 (AVX2) or x86-64-v4 (AVX-512).
    #[arg(long, value_name = "CPU", default_value = "native", value_parser = parse_target_cpu)]
    pub target_cpu: TargetCpu,
    /// With --backend=x86: threads each run of the compiled code uses.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub threads: u32,
    /// Accept ops of dialects that are not registered (they still need kernels to run).
    #[arg(long)]
    pub allow_unregistered_dialect: bool,
}

fn parse_tolerance(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(t) if t >= 0.0 && t.is_finite() => Ok(t),
        _ => Err(format!("'{text}' is not a finite number >= 0")),
    }
}

fn parse_target_cpu(text: &str) -> Result<TargetCpu, String> {
    text.parse::<TargetCpu>().map_err(|e| e.message)
}
