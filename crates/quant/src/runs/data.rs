//! The calibration data of the passes that run a function over a data set
//! (`calibrate`, `collect-calibration-data`, `bias-correct`, `absorb-bias`,
//! `round-weights`, `quantize-search`): their shared options
//! ([`DataSettings`]), the data set opened against the function's arguments
//! ([`CalibrationData`]), and how calls are chunked for threads
//! ([`chunk_calls`]).

use super::dataset::{ArgSpec, Dataset};
use qopt_interp::DType;
use qopt_ir_core::pass::{OptionKind, OptionSpec, PassOptions};
use qopt_ir_core::{
    type_to_string, AttrData, BadOptionValue, Context, Diagnostic, Module, OpId, PassError, TypeData, DYNAMIC,
};
use std::path::Path;

/// Interpreter calls per chunk, the unit of parallel work and of merging: an
/// eighth of the calls, between 8 and 64, so small data sets still spread over
/// the cores and large ones merge rarely. It depends on the number of calls
/// only, never on the thread count, which keeps the result the same for any
/// number of threads.
pub fn chunk_calls(calls: usize) -> usize {
    (calls / 8).clamp(8, 64)
}

/// The options `names` are counts, so not negative ([`Pass::check_options`]
/// of the passes that run a data set).
pub fn check_counts(options: &PassOptions, names: &[&'static str]) -> Result<(), BadOptionValue> {
    for &name in names {
        let v = options.int(name);
        if v < 0 {
            return Err(BadOptionValue::new(name, format!("'{name}' must be at least 0, got {v}")));
        }
        if name == "threads" && v > MAX_THREADS {
            let message = format!("'threads' must be 0 (every core) to {MAX_THREADS}, got {v}");
            return Err(BadOptionValue::new(name, message));
        }
    }
    Ok(())
}

/// The help of `data` for passes that read calibration data.
pub const CALIBRATION_DATA: &str =
    "calibration data: a .npy, an .npz (one member per argument) or a directory of them";

/// The counts every pass with worker threads checks ([`check_counts`]).
pub const COUNT_OPTIONS: [&str; 3] = ["batches", "batch-size", "threads"];

/// The option `threads` of a pass that runs a data set on worker threads.
pub fn threads_option() -> OptionSpec {
    OptionSpec::new("threads", OptionKind::Int, "0").help("worker threads (0: every core)")
}

/// The option `threads` as a thread count, 0 meaning every core.
pub fn worker_threads(options: &PassOptions) -> Result<usize, PassError> {
    Ok(match non_negative(options, "threads")? {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    })
}

/// The most worker threads a data pass takes, as `qrun --threads`.
pub const MAX_THREADS: i64 = 256;

/// Option `name` as a count, refused when negative.
pub fn non_negative(options: &PassOptions, name: &str) -> Result<usize, PassError> {
    let v = options.int(name);
    usize::try_from(v).map_err(|_| format!("'{name}' must be at least 0, got {v}").into())
}

/// The options of a pass that runs a function over a data set (`calibrate`,
/// `collect-calibration-data`), checked: `data`, `batches`, `batch-size`, `func`.
pub struct DataSettings {
    /// The data set's path.
    pub data: String,
    /// The most interpreter calls (0: every sample).
    pub batches: usize,
    /// Samples per call for a dynamic batch dimension (0: 1).
    pub batch_size: usize,
    /// The function to run, without `@`.
    pub func: String,
}

impl DataSettings {
    /// The four options; `data_help` says what the data is for.
    pub fn options(data_help: &'static str) -> Vec<OptionSpec> {
        vec![
            OptionSpec::new("data", OptionKind::String, "").required().reads_file().help(data_help),
            OptionSpec::new("batches", OptionKind::Int, "0")
                .help("stop after this many interpreter calls (0: use every sample)"),
            OptionSpec::new("batch-size", OptionKind::Int, "0").help(
                "samples per call when the batch dimension is dynamic (0: 1); must match a static batch",
            ),
            OptionSpec::new("func", OptionKind::String, "main").help("the function to run"),
        ]
    }

    /// [`DataSettings::options`] for calibration data, and `threads`.
    pub fn calibration_options() -> Vec<OptionSpec> {
        let mut options = DataSettings::options(CALIBRATION_DATA);
        options.push(threads_option());
        options
    }

    /// The options of a pass that declared [`DataSettings::options`].
    pub fn read(options: &PassOptions) -> Result<DataSettings, PassError> {
        let data = options.string("data").to_string();
        if data.is_empty() {
            return Err("'data' must name a .npy, .npz or directory".into());
        }
        Ok(DataSettings {
            data,
            batches: non_negative(options, "batches")?,
            batch_size: non_negative(options, "batch-size")?,
            func: options.string("func").trim_start_matches('@').to_string(),
        })
    }

    /// Opens the data set for the function (see [`CalibrationData::open`]).
    pub fn open(&self, ctx: &Context, module: &Module) -> Result<CalibrationData, PassError> {
        CalibrationData::open(ctx, module, &self.func, &self.data, self.batch_size)
    }
}

/// The `func.func` named `name`.
fn lookup_function(ctx: &Context, module: &Module, name: &str) -> Result<OpId, PassError> {
    match module.lookup_symbol(ctx, name) {
        Some(op) if module.op_name(op) == qopt_ir_core::OpName::FUNC && module.num_regions(op) == 1 => Ok(op),
        Some(_) => Err(format!("@{name} is not a function with a body").into()),
        None => Err(format!("there is no function @{name} to calibrate (set 'func')").into()),
    }
}

/// What each argument of `func` expects from the data set.
fn arg_specs(
    ctx: &Context,
    module: &Module,
    func: OpId,
    batch_size: usize,
) -> Result<Vec<ArgSpec>, PassError> {
    let inputs = match module.op_attr(ctx, func, "function_type").map(|a| ctx.attr_data(a)) {
        Some(AttrData::Type(t)) => match ctx.type_data(*t) {
            TypeData::Function { inputs, .. } => inputs.to_vec(),
            _ => return Err("the function has no function type".into()),
        },
        _ => return Err("the function has no function type".into()),
    };
    let mut specs = Vec::new();
    for (i, ty) in inputs.into_iter().enumerate() {
        let shape = ctx.tensor_shape(ty).ok_or_else(|| format!("argument {i} is not a tensor"))?.to_vec();
        let dtype = DType::of_element(ctx, ctx.element_type(ty))?;
        let mut dims = Vec::with_capacity(shape.len());
        for (d, &size) in shape.iter().enumerate() {
            match (d, size) {
                (0, DYNAMIC) => dims.push(batch_size.max(1)),
                (_, DYNAMIC) => {
                    return Err(format!(
                    "argument {i} ({}) has a dynamic dimension {d}; only the batch dimension may be dynamic",
                    type_to_string(ctx, ty)
                )
                    .into())
                }
                (0, b) if batch_size > 0 && b as usize != batch_size => {
                    return Err(format!(
                        "'batch-size' is {batch_size}, but argument {i} has the static batch {b} ({}); \
                         leave 'batch-size' unset or use a function with a dynamic batch",
                        type_to_string(ctx, ty)
                    )
                    .into())
                }
                (_, n) => dims.push(n as usize),
            }
        }
        specs.push(ArgSpec::new(format!("arg{i}"), dtype, dims));
    }
    Ok(specs)
}

/// A function's calibration data set, opened against its arguments: what
/// `calibrate`, `collect-calibration-data`, `bias-correct`, `absorb-bias` and
/// `round-weights` run over.
pub struct CalibrationData {
    /// The samples, streamed.
    pub dataset: Dataset,
    /// Samples per interpreter call (the function's batch).
    pub per_call: usize,
}

impl CalibrationData {
    /// Opens `data` for function `@func` of `module` (`batch_size` for a
    /// dynamic batch dimension, 0: 1). Fails on a missing function, data that
    /// does not fit its arguments, or fewer samples than one batch.
    pub fn open(
        ctx: &Context,
        module: &Module,
        func: &str,
        data: &str,
        batch_size: usize,
    ) -> Result<CalibrationData, PassError> {
        let op = lookup_function(ctx, module, func)?;
        let specs = arg_specs(ctx, module, op, batch_size)?;
        let dataset = Dataset::open(Path::new(data), &specs).map_err(|e| e.to_string())?;
        let per_call = dataset.batch().max(1);
        if dataset.len() / per_call == 0 {
            return Err(format!(
                "'{data}' has {} sample(s), fewer than one batch of {per_call}",
                dataset.len()
            )
            .into());
        }
        Ok(CalibrationData { dataset, per_call })
    }

    /// The interpreter calls to make (at most `batches` when it is not 0),
    /// and a warning when samples that do not fill a last batch go unused.
    pub fn calls(&self, batches: usize) -> (usize, Option<Diagnostic>) {
        let calls = self.dataset.len() / self.per_call;
        let leftover = self.dataset.len() % self.per_call;
        if batches > 0 {
            return (calls.min(batches), None);
        }
        let warning = (leftover > 0).then(|| {
            Diagnostic::warning(
                None,
                qopt_ir_core::SrcPos::NONE,
                format!(
                    "the last {leftover} sample(s) do not fill a batch of {} and are not used",
                    self.per_call
                ),
            )
        });
        (calls, warning)
    }
}
