//! Support for the passes' unit tests (with the `testing` feature, other
//! crates' too): a context with the `test` dialect, programmatic builders for
//! large IR (10,000-op chains and nests, which would be slow to write as
//! text), a pipeline run with verification after each pass that returns the
//! printed result and the statistics, and [`check_pass`], which parses `.qir`
//! text and runs it.

use crate::pass::{Instrumentation, PassManager, PassRegistry};
use crate::testing::register_test_dialect;
use crate::{
    module_to_string, parse_module, verify, BlockId, Context, Module, OpId, OpName, OperationState,
    PassError, SourceMap, ValueId,
};
use std::sync::Arc;

/// What a successful pipeline run left.
#[derive(Debug)]
pub struct RunOutput {
    /// The printed module.
    pub ir: String,
    /// The statistics of every pass, in pipeline order, each sorted by name.
    pub stats: Vec<(&'static str, u64)>,
}

impl RunOutput {
    /// One counter (0 if absent).
    pub fn stat(&self, name: &str) -> u64 {
        self.stats.iter().filter(|(n, _)| *n == name).map(|(_, v)| v).sum()
    }
}

/// A context with the `test` dialect registered and unregistered ops allowed.
pub fn test_context() -> Context {
    let mut ctx = Context::new();
    // invariant: a fresh context has no `test` dialect yet.
    let _ = register_test_dialect(&mut ctx);
    ctx.set_allow_unregistered(true);
    ctx
}

/// Parses `input`, runs `pipeline` of the passes in `registry` over it and
/// prints the result.
pub fn check_pass(registry: &PassRegistry, pipeline: &str, input: &str) -> Result<RunOutput, String> {
    let mut ctx = test_context();
    let module = parse_module(&mut ctx, input.as_bytes(), "input.qir").map_err(|diagnostics| {
        let mut sources = SourceMap::new();
        sources.add("input.qir".into(), Arc::new(input.as_bytes().to_vec()));
        diagnostics.render(&sources)
    })?;
    TestIr { ctx, module }.run(registry, pipeline)
}

/// Runs `f` on a thread with a 256 KiB stack, so recursion over IR depth or
/// chain length shows up as a stack overflow.
pub fn on_small_stack(f: impl FnOnce() + Send + 'static) {
    let joined = std::thread::Builder::new().stack_size(256 * 1024).spawn(f).map(|handle| handle.join());
    match joined {
        Ok(Ok(())) => {}
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        Err(error) => panic!("cannot spawn the test thread: {error}"),
    }
}

/// A module under construction in a `test` context. Every value is `i64`.
pub struct TestIr {
    /// Its context.
    pub ctx: Context,
    /// The module.
    pub module: Module,
}

impl Default for TestIr {
    /// An empty module in a [`test_context`].
    fn default() -> TestIr {
        TestIr { ctx: test_context(), module: Module::new() }
    }
}

impl TestIr {
    /// Appends `func.func @name` taking `inputs` and returning `results` i64s, with
    /// an empty entry block; returns the function and its entry block.
    pub fn function(&mut self, name: &str, inputs: usize, results: usize) -> (OpId, BlockId) {
        self.function_with_visibility(name, inputs, results, None)
    }

    /// [`Self::function`] with `sym_visibility` set.
    pub fn function_with_visibility(
        &mut self,
        name: &str,
        inputs: usize,
        results: usize,
        visibility: Option<&str>,
    ) -> (OpId, BlockId) {
        let i64 = self.ctx.common().i64;
        let signature = self.ctx.function_type(&vec![i64; inputs], &vec![i64; results]);
        let signature = self.ctx.type_attr(signature);
        let sym_name = self.ctx.string_attr(name);
        let mut entries = vec![("sym_name", sym_name), ("function_type", signature)];
        if let Some(visibility) = visibility {
            entries.push(("sym_visibility", self.ctx.string_attr(visibility)));
        }
        let attrs = self.ctx.dict_attr(&entries);
        let func = self.module.create_op(OperationState::new(OpName::FUNC).attrs(attrs).regions(1));
        let body = self.module.body();
        self.module.append_op(body, func);
        let region = self.module.region(func, 0);
        let entry = self.module.append_block(region, &vec![i64; inputs]);
        (func, entry)
    }

    /// Appends op `name` with `operands` and `results` i64 results to `block`.
    pub fn op(&mut self, block: BlockId, name: &str, operands: &[ValueId], results: usize) -> Vec<ValueId> {
        let op = self.op_with(block, name, operands, results, 0, &[]);
        self.module.results(op).collect()
    }

    /// Appends a general op: `regions` regions (each with one empty block) and
    /// the given attributes.
    pub fn op_with(
        &mut self,
        block: BlockId,
        name: &str,
        operands: &[ValueId],
        results: usize,
        regions: usize,
        attrs: &[(&str, crate::Attribute)],
    ) -> OpId {
        let i64 = self.ctx.common().i64;
        let name = self.ctx.op_name(name);
        let attrs = self.ctx.dict_attr(attrs);
        let state = OperationState::new(name)
            .operands(operands)
            .results(&vec![i64; results])
            .attrs(attrs)
            .regions(regions);
        let op = self.module.create_op(state);
        self.module.append_op(block, op);
        for i in 0..regions {
            let region = self.module.region(op, i);
            self.module.append_block(region, &[]);
        }
        op
    }

    /// Appends `test.const` with `value`.
    pub fn constant(&mut self, block: BlockId, value: i64) -> ValueId {
        let value = self.ctx.i64_attr(value);
        let op = self.op_with(block, "test.const", &[], 1, 0, &[("value", value)]);
        self.module.result(op, 0)
    }

    /// Appends `func.return` of `values`.
    pub fn ret(&mut self, block: BlockId, values: &[ValueId]) {
        let op = self.module.create_op(OperationState::new(OpName::RETURN).operands(values));
        self.module.append_op(block, op);
    }

    /// Verifies the module, runs `pipeline` (verifying after each pass) and prints
    /// the result.
    pub fn run(mut self, registry: &PassRegistry, pipeline: &str) -> Result<RunOutput, String> {
        let stats = self.run_unprinted(registry, pipeline)?;
        Ok(RunOutput { ir: module_to_string(&self.ctx, &self.module), stats })
    }

    /// [`Self::run`] without printing; returns the statistics.
    pub fn run_unprinted(
        &mut self,
        registry: &PassRegistry,
        pipeline: &str,
    ) -> Result<Vec<(&'static str, u64)>, String> {
        verify(&mut self.ctx, &self.module).map_err(|d| PassError::from(d).to_string())?;
        let manager = PassManager::parse(registry, pipeline).map_err(|e| e.render(pipeline))?;
        let mut inst =
            Instrumentation { statistics: true, reproducer_dir: None, ..Instrumentation::default() };
        let report = manager
            .run(&mut self.ctx, &mut self.module, &mut inst)
            .map_err(|failure| PassError::from(failure.diagnostics).to_string())?;
        Ok(report.statistics.into_iter().flat_map(|(_, counters)| counters).collect())
    }
}
