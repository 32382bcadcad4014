//! One side of a `qopt --verify-numerics` comparison: the module's entry
//! function run in the reference interpreter on N deterministic random
//! inputs ([`SampleRuns::run`]), with what the comparison needs to know about
//! its results.
//!
//! - **Entry function**: `@main` if the module has one, else its only public
//!   function with a body (the one `qrun` runs by default).
//! - **Inputs**: input `k` is [`qopt_interp::random_arguments`] seeded with
//!   `seed + k`: floats standard normal, quantized values uniform over the
//!   storage range, booleans fair, plain integers in `0..=7`
//!   ([`IntegerValues::Small`]). A dynamic dimension is not guessed: the side
//!   is not run.
//! - **Kernels**: those installed in the context (a downstream dialect's
//!   included), else the standard ones.
//!
//! Every reason a side cannot run (no entry function, a dynamic or huge
//! argument, a missing kernel, an error while running, more output elements
//! than [`MAX_KEPT_ELEMENTS`]) is a message, never a panic.

use crate::difference::QuantGrid;
use qopt_interp::{random_arguments, IntegerValues, Interpreter, KernelRegistry, RandomInputs, Tensor};
use qopt_ir_core::{function_signature, type_to_string, Context, Module, OpId, OpView, Type};

/// The most output elements one side keeps for comparison, over all its
/// inputs (2^26: 256 MiB of f32).
pub const MAX_KEPT_ELEMENTS: u64 = 1 << 26;

/// How inputs are drawn: small plain integers, no guessed dynamic sizes.
const INPUTS: RandomInputs = RandomInputs { integers: IntegerValues::Small, dynamic_size: None };

/// The entry function of a module run on every input.
#[derive(Clone, Debug)]
pub struct SampleRuns {
    /// The function's name, without `@`.
    pub function: String,
    /// Its argument types.
    pub args: Vec<Type>,
    /// Its result types.
    pub results: Vec<Type>,
    /// The quantization grid of each result, if it has one.
    pub grids: Vec<Option<QuantGrid>>,
    /// The op producing each result (`OpId::NONE` for an argument), to locate
    /// messages.
    pub producers: Vec<OpId>,
    /// The results of each input, in input order.
    pub outputs: Vec<Vec<Tensor>>,
}

impl SampleRuns {
    /// Runs the entry function of `module` on `count` inputs, input `k` drawn
    /// with seed `seed + k`; an error says why it cannot run.
    pub fn run(ctx: &Context, module: &Module, count: u32, seed: u64) -> Result<SampleRuns, String> {
        let (func, function) = entry_function(ctx, module)?;
        let view = OpView::new(ctx, module, func);
        let (args, results) = function_signature(&view).map_err(|e| format!("@{function}: {e}"))?;
        let (args, results) = (args.to_vec(), results.to_vec());
        let (grids, producers) = result_grids(ctx, module, func, &results);
        let kernels = KernelRegistry::of(ctx).cloned().unwrap_or_else(KernelRegistry::standard);
        let mut interpreter = Interpreter::new(ctx, module, &kernels);
        interpreter.prepare(&function).map_err(|e| e.to_string())?;
        let mut outputs = Vec::with_capacity(count as usize);
        let mut kept = 0u64;
        for k in 0..count {
            let inputs = random_arguments(ctx, &args, seed.wrapping_add(u64::from(k)), &INPUTS)
                .map_err(|e| format!("argument #{} of @{function} {}", e.argument, e.message))?;
            let values = interpreter.run(&function, &inputs).map_err(|e| format!("input #{k}: {e}"))?;
            kept += values.iter().map(|t| t.len() as u64).sum::<u64>();
            if kept > MAX_KEPT_ELEMENTS {
                return Err(format!(
                    "the results of {count} inputs have more than {MAX_KEPT_ELEMENTS} elements to keep for \
                     the comparison; ask for fewer inputs"
                ));
            }
            outputs.push(values);
        }
        Ok(SampleRuns { function, args, results, grids, producers, outputs })
    }

    /// `@main(tensor<1x4xf32>) -> tensor<1x2xf32>`, for messages.
    pub fn signature_text(&self, ctx: &Context) -> String {
        let list =
            |types: &[Type]| types.iter().map(|&t| type_to_string(ctx, t)).collect::<Vec<_>>().join(", ");
        format!("@{}({}) -> ({})", self.function, list(&self.args), list(&self.results))
    }
}

/// `@main`, else the only public function with a body.
fn entry_function(ctx: &Context, module: &Module) -> Result<(OpId, String), String> {
    let mut public = Vec::new();
    for op in module.top_level_ops() {
        if ctx.op_name_str(module.op_name(op)) != "func.func"
            || module.num_regions(op) != 1
            || module.first_block(module.region(op, 0)).is_none()
        {
            continue;
        }
        let Some(name) = module.op_attr(ctx, op, "sym_name").and_then(|a| ctx.attr_as_str(a)) else {
            continue;
        };
        if name == "main" {
            return Ok((op, name.to_string()));
        }
        let private =
            module.op_attr(ctx, op, "sym_visibility").and_then(|a| ctx.attr_as_str(a)) == Some("private");
        if !private {
            public.push((op, name.to_string()));
        }
    }
    match public.len() {
        1 => Ok(public.remove(0)),
        0 => Err("the module has no @main and no public function with a body".to_string()),
        n => {
            let names: Vec<String> = public.iter().take(4).map(|(_, name)| format!("@{name}")).collect();
            let more = if n > 4 { ", ..." } else { "" };
            Err(format!("the module has no @main and {n} public functions ({}{more})", names.join(", ")))
        }
    }
}

/// The grid and producer of each result of `func`, read off its
/// `func.return` (none found: no grids, no producers).
fn result_grids(
    ctx: &Context,
    module: &Module,
    func: OpId,
    results: &[Type],
) -> (Vec<Option<QuantGrid>>, Vec<OpId>) {
    let body = module.first_block(module.region(func, 0));
    let terminator = module.last_op(body);
    let returned: Vec<_> =
        if terminator.is_some() && ctx.op_name_str(module.op_name(terminator)) == "func.return" {
            module.operands(terminator).collect()
        } else {
            Vec::new()
        };
    results
        .iter()
        .enumerate()
        .map(|(i, &ty)| match returned.get(i) {
            Some(&value) => {
                let producer = module.defining_op(value);
                (QuantGrid::of_result(ctx, module, ty, producer), producer)
            }
            None => (QuantGrid::of_result(ctx, module, ty, OpId::NONE), OpId::NONE),
        })
        .unzip()
}
