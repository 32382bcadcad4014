//! `collect-calibration-data{data=PATH out=FILE.npz}`: runs a function
//! (`@main`) over a data set and writes the boundary tensors of every
//! function that runs, for a backend's own quantizer (TVM's "calibration
//! data of the partitioned graph", named `profile_subgraph` by its
//! reviewers because it works on any graph).
//!
//! - **Members.** For the run function and for every function a `func.call`
//!   runs on the way (at any depth; after `partition`, the outlined regions):
//!   `<function>/input<k>` and `<function>/output<k>`, the function's name
//!   without `@`. Each member stacks one entry per run of its function along
//!   a new leading dimension: `[runs, shape...]`. The outlined functions and
//!   `@main` run once per interpreter call, so their members have one entry
//!   per call (`[calls, batch, ...]` for `@main` with a batch dimension;
//!   `crate::runs::dataset` reads such a member back as one whole argument
//!   per entry). Quantized values are their stored integers (the types in the
//!   IR give their scales). Members appear in the order their first entry
//!   arrives: the run function's inputs, each callee's inputs then outputs,
//!   the run function's outputs.
//! - **Data** as `calibrate` takes it (`crate::runs::dataset`: a `.npy`, an
//!   `.npz` with one member per argument, or a directory; `batches`,
//!   `batch-size`, `func`); NaN or infinite data is refused the same way.
//! - **Streaming.** Samples are read one call at a time and every entry goes
//!   straight to its member's scratch file ([`qopt_npy::NpzStream`]), so
//!   memory does not grow with the number of samples. The archive is
//!   assembled at the end and renamed over `out` atomically; any error leaves
//!   `out` as it was. Members are STORED (what `np.savez` writes, so
//!   `np.load` reads them) and without ZIP64 records: more than 4 GiB is an
//!   error.
//! - **Any IR.** Without calls (an unpartitioned model) the archive holds
//!   the run function's boundary only.
//! - **The module does not change**: the pass only reads it.
//!
//! Runs on one thread, in sample order. Statistics: `samples`, `calls`,
//! `members`.
//!
//! ```text
//! // after partition{target=accel}: @main calls @accel_0 and @accel_1
//! collect-calibration-data{data=calib.npy out=boundary.npz}
//! // boundary.npz: main/input0, accel_0/input0, accel_0/output0,
//! //               accel_1/input0, accel_1/output0, main/output0
//! ```

use crate::runs::data::{check_counts, DataSettings};
use qopt_interp::{Interpreter, KernelRegistry, RunObserver, Tensor};
use qopt_ir_core::equivalence::Relation;
use qopt_ir_core::pass::{OptionKind, OptionSpec, PassOptions};
use qopt_ir_core::BadOptionValue;
use qopt_ir_core::PassInfo;
use qopt_ir_core::PassResult;
use qopt_ir_core::{AttrData, Context, FxHashMap, Module, OpId, OpName, Pass, PassContext, PassOutcome};
use qopt_npy::NpzStream;
use std::path::Path;

/// The `collect-calibration-data` pass; see the module docs.
pub struct CollectCalibrationData;

const INFO: PassInfo = PassInfo {
    name: "collect-calibration-data",
    summary: "run @main over a data set and write every called function's inputs and outputs to an .npz",
    description:
        "Runs the function (`@main`) in the reference interpreter over `data` (as `calibrate` reads \
     it) and writes `out`, an uncompressed `.npz` with members `<function>/input<k>` and \
     `<function>/output<k>` for the run function and every function called on the way (after \
     `partition`, the outlined regions), each stacking one entry per run along a new leading \
     dimension. Memory does not grow with the number of samples; `out` is written atomically. \
     The module is not changed.\n\n\
     ```\n\
     collect-calibration-data{data=calib.npy out=boundary.npz}\n\
     // boundary.npz: main/input0, accel_0/input0, accel_0/output0, main/output0\n\
     ```",
    preserves_semantics: true,
    equivalence: Some(Relation::Exact),
};

impl Pass for CollectCalibrationData {
    fn info(&self) -> &'static PassInfo {
        &INFO
    }

    fn options(&self) -> Vec<OptionSpec> {
        let mut options = DataSettings::options(
            "input data: a .npy, an .npz (one member per argument) or a directory of them",
        );
        options.insert(
            1,
            OptionSpec::new("out", OptionKind::String, "")
                .required()
                .writes_file()
                .help("the .npz to write (atomically) with every function's inputs and outputs"),
        );
        options
    }

    fn check_options(&self, options: &PassOptions) -> Result<(), BadOptionValue> {
        check_counts(options, &["batches", "batch-size"])
    }

    fn run(&self, cx: &mut PassContext<'_>, module: &mut Module, options: &PassOptions) -> PassResult {
        let settings = DataSettings::read(options)?;
        let out = options.string("out");
        if out.is_empty() {
            return Err("'out' must name the .npz file to write".into());
        }
        let (func, ctx): (&str, &Context) = (&settings.func, cx.ctx);
        let module: &Module = module;
        let opened = settings.open(ctx, module)?;
        let (calls, leftover) = opened.calls(settings.batches);
        let stream = NpzStream::create(Path::new(out))
            .map_err(|e| format!("'out': cannot write '{out}' (its scratch files go beside it): {e}"))?;
        let kernels = KernelRegistry::of_or_standard(ctx).into_owned();
        let mut interpreter = Interpreter::new(ctx, module, &kernels);
        let mut recorder = BoundaryRecorder::new(ctx, module, stream);
        for call in 0..calls {
            let inputs =
                opened.dataset.read(call * opened.per_call, opened.per_call).map_err(|e| e.to_string())?;
            recorder.record(func, "input", &inputs.iter().collect::<Vec<_>>());
            let outputs = interpreter
                .run_observed(func, &inputs, &mut recorder)
                .map_err(|e| format!("@{func}, call {call}: {e}"))?;
            recorder.record(func, "output", &outputs.iter().collect::<Vec<_>>());
            if let Some(e) = recorder.error.take() {
                return Err(format!("'{out}': {e}").into());
            }
        }
        let members = recorder.stream.len();
        recorder.stream.finish().map_err(|e| format!("cannot write '{out}': {e}"))?;
        leftover.into_iter().for_each(|w| cx.warn(w));
        cx.add_stat("samples", (calls * opened.per_call) as u64);
        cx.add_stat("calls", calls as u64);
        cx.add_stat("members", members as u64);
        Ok(PassOutcome::Unchanged)
    }
}

/// Appends every function boundary a run passes to the archive.
struct BoundaryRecorder {
    stream: NpzStream,
    /// The callee's name of every `func.call` of the module.
    callees: FxHashMap<OpId, String>,
    /// `(function, "input" | "output", k)` → member index.
    members: FxHashMap<(String, &'static str, usize), usize>,
    /// The first failure while recording (the interpreter's hook cannot fail).
    error: Option<String>,
}

impl BoundaryRecorder {
    fn new(ctx: &Context, module: &Module, stream: NpzStream) -> BoundaryRecorder {
        let callees = module
            .walk_preorder(module.root())
            .filter(|&op| module.op_name(op) == OpName::CALL)
            .filter_map(|op| match module.op_attr(ctx, op, "callee").map(|a| ctx.attr_data(a)) {
                Some(AttrData::SymbolRef(s)) => Some((op, ctx.symbol_str(*s).to_string())),
                _ => None,
            })
            .collect();
        BoundaryRecorder { stream, callees, members: FxHashMap::default(), error: None }
    }

    /// Appends `tensors` as entries of `<function>/<side><k>`, creating the
    /// members on their first entry.
    fn record(&mut self, function: &str, side: &'static str, tensors: &[&Tensor]) {
        for (k, tensor) in tensors.iter().enumerate() {
            if self.error.is_some() {
                return;
            }
            let raw = tensor.to_raw();
            let key = (function.to_string(), side, k);
            let member = match self.members.get(&key) {
                Some(&m) => Ok(m),
                None => {
                    let name = format!("{function}/{side}{k}");
                    let added = self.stream.add_member(&name, raw.dtype, &raw.shape);
                    if let Ok(m) = added {
                        self.members.insert(key, m);
                    }
                    added
                }
            };
            if let Err(e) = member.and_then(|m| self.stream.append(m, &raw)) {
                self.error = Some(e.to_string());
            }
        }
    }
}

impl RunObserver for BoundaryRecorder {
    fn op_done(&mut self, op: OpId, results: &[Tensor]) {
        if let Some(callee) = self.callees.get(&op).cloned() {
            self.record(&callee, "output", &results.iter().collect::<Vec<_>>());
        }
    }

    fn call_entered(&mut self, call: OpId, _callee: OpId, args: &[&Tensor]) {
        if let Some(callee) = self.callees.get(&call).cloned() {
            self.record(&callee, "input", args);
        }
    }
}
