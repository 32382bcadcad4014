//! `--bench N --profile`: where the time goes. The first sample is run N
//! more times with the interpreter's per-op callback; the time between two
//! callbacks is the op's (its kernel plus the interpreter's bookkeeping). The
//! report sums it per op name and lists the slowest single ops by location.
//!
//! With `--backend=x86` the compiled kernels are timed one by one instead
//! ([`compiled_report`]): per op, its time, its share, and for products
//! (conv, dense) GOP/s and the share of the core's int8 peak at the measured
//! clock.

use qopt_codegen_x86::{measure_clock_hz, JitModule, Workspace};
use qopt_interp::{Interpreter, Tensor};
use qopt_ir_core::{loc_to_string, Context, FxHashMap, Module, OpId};
use std::fmt::Write as _;
use std::time::Instant;

/// Accumulated op times over the profiled runs.
pub(crate) struct Profile {
    runs: usize,
    per_op: FxHashMap<OpId, f64>,
}

/// How many single ops the report lists.
const SLOWEST: usize = 10;

impl Profile {
    /// Runs `func` of `interpreter` on `inputs` `runs` times (at least once), timing each op.
    pub fn measure(
        interpreter: &mut Interpreter<'_>,
        func: &str,
        inputs: &[Tensor],
        runs: usize,
    ) -> Result<Profile, String> {
        let mut per_op: FxHashMap<OpId, f64> = FxHashMap::default();
        for _ in 0..runs.max(1) {
            let mut last = Instant::now();
            interpreter
                .run_with(func, inputs, &mut |op, _| {
                    let now = Instant::now();
                    *per_op.entry(op).or_default() += (now - last).as_secs_f64() * 1000.0;
                    last = now;
                })
                .map_err(|e| e.to_string())?;
        }
        Ok(Profile { runs: runs.max(1), per_op })
    }

    /// The report: a table per op name (ms per run, share, op count), then
    /// the slowest ops with their locations.
    pub fn report(&self, ctx: &Context, module: &Module) -> String {
        let runs = self.runs as f64;
        let total: f64 = self.per_op.values().sum::<f64>() / runs;
        let mut by_name: FxHashMap<&str, (f64, usize)> = FxHashMap::default();
        for (&op, &ms) in &self.per_op {
            let entry = by_name.entry(ctx.op_name_str(module.op_name(op))).or_default();
            entry.0 += ms / runs;
            entry.1 += 1;
        }
        let mut names: Vec<(&str, (f64, usize))> = by_name.into_iter().collect();
        names.sort_by(|a, b| b.1 .0.total_cmp(&a.1 .0).then(a.0.cmp(b.0)));
        let share = |ms: f64| if total > 0.0 { 100.0 * ms / total } else { 0.0 };
        let mut out = format!("profile: {total:.3} ms per run in ops ({} runs)\n", self.runs);
        let _ = writeln!(out, "  {:<28} {:>10} {:>7} {:>5}", "op", "ms/run", "share", "ops");
        for (name, (ms, count)) in &names {
            let _ = writeln!(out, "  {name:<28} {ms:>10.3} {:>6.1}% {count:>5}", share(*ms));
        }
        let mut ops: Vec<(OpId, f64)> = self.per_op.iter().map(|(&op, &ms)| (op, ms / runs)).collect();
        ops.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let _ = writeln!(out, "  slowest ops:");
        for (op, ms) in ops.iter().take(SLOWEST) {
            let name = ctx.op_name_str(module.op_name(*op));
            let loc = loc_to_string(ctx, module.op_loc(*op));
            let _ = writeln!(out, "  {ms:>10.3} ms {:>6.1}%  {name} {loc}", share(*ms));
        }
        out
    }
}

/// `--profile` of compiled code: runs the program `runs` times on `threads`
/// threads on `inputs`, timing each kernel, and reports per op.
pub(crate) fn compiled_report(
    jit: &JitModule,
    inputs: &[Tensor],
    (runs, threads): (usize, usize),
) -> Result<String, String> {
    let runs = runs.max(1);
    let times =
        jit.profile_tensors(inputs, &mut Workspace::new(), (runs, threads)).map_err(|e| e.to_string())?;
    let program = jit.program();
    let mut per_op = vec![0f64; program.ops.len()];
    let mut kernels: Vec<Vec<(&str, f64)>> = vec![Vec::new(); program.ops.len()];
    for (k, t) in program.kernels.iter().zip(&times) {
        let ms = t.as_secs_f64() * 1000.0 / runs as f64;
        per_op[k.op] += ms;
        kernels[k.op].push((&k.strategy, ms));
    }
    let total: f64 = per_op.iter().sum();
    let hz = measure_clock_hz().map_err(|e| e.to_string())?;
    let (macs_per_cycle, how) = program.target.int8_peak_macs_per_cycle();
    let peak_gmacs = hz * f64::from(macs_per_cycle) / 1e9;
    let share = |ms: f64| if total > 0.0 { 100.0 * ms / total } else { 0.0 };
    let (thread_count, peak_of) = match threads {
        1 => ("1 thread".to_string(), String::new()),
        n => (
            format!("{n} threads; a kernel's time runs from barrier to barrier"),
            format!("; %peak of {n} cores"),
        ),
    };
    let mut out = format!(
        "profile: {total:.3} ms per run in compiled kernels ({runs} runs, {thread_count}); clock {:.2} GHz measured, \
         int8 peak {macs_per_cycle} MAC/cycle ({how}) = {peak_gmacs:.1} GMAC/s per core{peak_of}\n",
        hz / 1e9
    );
    let _ = writeln!(
        out,
        "  {:>9} {:>6} {:>7} {:>6}  {:<22} {:<28} strategy",
        "ms/run", "share", "GOP/s", "%peak", "op", "location"
    );
    let mut order: Vec<usize> = (0..per_op.len()).collect();
    order.sort_by(|&a, &b| per_op[b].total_cmp(&per_op[a]).then(a.cmp(&b)));
    for i in order {
        let (op, ms) = (&program.ops[i], per_op[i]);
        let (gops, peak) = if op.multiply_accumulates > 0 && ms > 0.0 {
            let gmacs = op.multiply_accumulates as f64 / (ms / 1000.0) / 1e9;
            (format!("{:.1}", 2.0 * gmacs), format!("{:.0}%", 100.0 * gmacs / (peak_gmacs * threads as f64)))
        } else {
            ("-".to_string(), "-".to_string())
        };
        let how: Vec<String> = match &kernels[i][..] {
            [(strategy, _)] => vec![strategy.to_string()],
            several => several.iter().map(|(strategy, ms)| format!("{strategy} [{ms:.3} ms]")).collect(),
        };
        let _ = writeln!(
            out,
            "  {ms:>9.3} {:>5.1}% {gops:>7} {peak:>6}  {:<22} {:<28} {}",
            share(ms),
            op.name,
            op.location,
            how.join("; ")
        );
    }
    Ok(out)
}
