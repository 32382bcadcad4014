//! Tiny passes and pipelines for the pass-manager tests, and a module builder that
//! does not need the parser.

use super::pipeline::{OptionKind, OptionSpec, OptionValue, PassOptions};
use super::registry::{NamedPipeline, PassRegistry};
use super::{Pass, PassContext, PassError, PassOutcome};
use crate::equivalence::Relation;
use crate::PassInfo;
use crate::PassResult;
use crate::{Context, Diagnostic, Module, OpName, OperationState, SrcPos};
use std::sync::Arc;

const MODES: &[&str] = &["fast", "exact"];

fn spec(name: &'static str, kind: OptionKind, default: &'static str, help: &'static str) -> OptionSpec {
    OptionSpec { name, kind, default, required: false, help, file: Default::default() }
}

/// A module with one identity function `@name(tensor<4xf32>) -> tensor<4xf32>` per
/// name.
pub(super) fn build_module(ctx: &mut Context, names: &[&str]) -> Module {
    let mut module = Module::new();
    let f32 = ctx.common().f32;
    let tensor = ctx.tensor_type(&[4], f32);
    let signature = ctx.function_type(&[tensor], &[tensor]);
    let signature = ctx.type_attr(signature);
    for name in names {
        let sym_name = ctx.string_attr(name);
        let attrs = ctx.dict_attr(&[("sym_name", sym_name), ("function_type", signature)]);
        let func = module.create_op(OperationState::new(OpName::FUNC).attrs(attrs).regions(1));
        let body = module.body();
        module.append_op(body, func);
        let region = module.region(func, 0);
        let entry = module.append_block(region, &[tensor]);
        let arg = module.block_args(entry)[0];
        let ret = module.create_op(OperationState::new(OpName::RETURN).operands(&[arg]));
        module.append_op(entry, ret);
    }
    module
}

/// The `sym_name`s of the module's functions, in order.
pub(super) fn function_names(ctx: &Context, module: &Module) -> Vec<String> {
    module
        .top_level_ops()
        .filter_map(|op| module.op_attr(ctx, op, "sym_name"))
        .filter_map(|name| ctx.attr_as_str(name).map(str::to_string))
        .collect()
}

fn rename_functions(cx: &mut PassContext<'_>, module: &mut Module, suffix: &str) -> u64 {
    let funcs: Vec<_> = module.top_level_ops().filter(|&op| module.op_name(op) == OpName::FUNC).collect();
    for &func in &funcs {
        let Some(old) = module.op_attr(cx.ctx, func, "sym_name") else { continue };
        let new = format!("{}{suffix}", cx.ctx.attr_as_str(old).unwrap_or_default());
        let new = cx.ctx.string_attr(&new);
        let attrs = cx.ctx.dict_set(module.op_attrs(func), "sym_name", new);
        module.set_op_attrs(func, attrs);
    }
    funcs.len() as u64
}

/// `test-rename-funcs{suffix=_renamed}`: appends `suffix` to every function name.
/// Always claims a change, even with an empty suffix.
pub(super) struct RenameFuncs;

const RENAMEFUNCS_INFO: PassInfo = PassInfo {
    name: "test-rename-funcs",
    summary: "append a suffix to every function name",
    preserves_semantics: false,
    equivalence: None,
    description: "",
};

impl Pass for RenameFuncs {
    fn info(&self) -> &'static PassInfo {
        &RENAMEFUNCS_INFO
    }

    fn options(&self) -> Vec<OptionSpec> {
        vec![spec("suffix", OptionKind::String, "_renamed", "appended to each function name")]
    }
    fn run(&self, cx: &mut PassContext<'_>, module: &mut Module, options: &PassOptions) -> PassResult {
        let renamed = rename_functions(cx, module, options.string("suffix"));
        cx.add_stat("renamed-functions", renamed);
        Ok(PassOutcome::Changed)
    }
}

/// `test-noop`: does nothing.
pub(super) struct Noop;

const NOOP_INFO: PassInfo = PassInfo {
    name: "test-noop",
    summary: "do nothing",
    preserves_semantics: true,
    equivalence: Some(Relation::Exact),
    description: "",
};

impl Pass for Noop {
    fn info(&self) -> &'static PassInfo {
        &NOOP_INFO
    }

    fn run(&self, _: &mut PassContext<'_>, _: &mut Module, _: &PassOptions) -> PassResult {
        Ok(PassOutcome::Unchanged)
    }
}

/// `test-phases`: records the phases `load` (twice, 1 ms each) and `work`
/// (2 ms), and changes nothing.
pub(super) struct Phases;

const PHASES_INFO: PassInfo = PassInfo {
    name: "test-phases",
    summary: "record phase timings",
    preserves_semantics: false,
    equivalence: None,
    description: "",
};

impl Pass for Phases {
    fn info(&self) -> &'static PassInfo {
        &PHASES_INFO
    }

    fn run(&self, cx: &mut PassContext<'_>, _: &mut Module, _: &PassOptions) -> PassResult {
        let ms = std::time::Duration::from_millis;
        cx.add_phase("load", ms(1));
        cx.add_phase("work", ms(2));
        cx.add_phase("load", ms(1));
        Ok(PassOutcome::Unchanged)
    }
}

/// `test-fail`: renames the functions (so the module differs from its input), then
/// fails: as a fault of the pass, or with `refuse` as a refusal of its input.
pub(super) struct Fail;

const FAIL_INFO: PassInfo = PassInfo {
    name: "test-fail",
    summary: "change the IR, then fail",
    preserves_semantics: false,
    equivalence: None,
    description: "",
};

impl Pass for Fail {
    fn info(&self) -> &'static PassInfo {
        &FAIL_INFO
    }

    fn options(&self) -> Vec<OptionSpec> {
        vec![
            spec("code", OptionKind::Int, "7", "reported in the error"),
            spec("refuse", OptionKind::Bool, "false", "fail as a refusal of the input"),
        ]
    }
    fn run(&self, cx: &mut PassContext<'_>, module: &mut Module, options: &PassOptions) -> PassResult {
        rename_functions(cx, module, "_half_done");
        let message = format!("test-fail failed with code {}", options.int("code"));
        if options.bool("refuse") {
            Err(PassError::from(message))
        } else {
            Err(PassError::internal(Diagnostic::error(None, SrcPos::NONE, message)))
        }
    }
}

/// `test-panic`: panics.
pub(super) struct Panic;

const PANIC_INFO: PassInfo = PassInfo {
    name: "test-panic",
    summary: "panic",
    preserves_semantics: false,
    equivalence: None,
    description: "",
};

impl Pass for Panic {
    fn info(&self) -> &'static PassInfo {
        &PANIC_INFO
    }

    fn run(&self, _: &mut PassContext<'_>, _: &mut Module, _: &PassOptions) -> PassResult {
        panic!("test-panic panicked on purpose")
    }
}

/// `test-break-ir`: puts an op of an unregistered dialect (`bogus.op`) at the start
/// of every function, which the verifier rejects unless unregistered dialects are
/// allowed.
pub(super) struct BreakIr;

const BREAKIR_INFO: PassInfo = PassInfo {
    name: "test-break-ir",
    summary: "insert an unregistered op",
    preserves_semantics: false,
    equivalence: None,
    description: "",
};

impl Pass for BreakIr {
    fn info(&self) -> &'static PassInfo {
        &BREAKIR_INFO
    }

    fn run(&self, cx: &mut PassContext<'_>, module: &mut Module, _: &PassOptions) -> PassResult {
        let bogus = cx.ctx.op_name("bogus.op");
        let funcs: Vec<_> = module.top_level_ops().filter(|&op| module.op_name(op) == OpName::FUNC).collect();
        for func in funcs {
            let region = module.region(func, 0);
            let entry = module.first_block(region);
            let first = module.first_op(entry);
            let op = module.create_op(OperationState::new(bogus));
            module.insert_op_before(first, op);
        }
        Ok(PassOutcome::Changed)
    }
}

/// `test-options{count=3 mode=fast sizes=[1,2] flag label=...}`: reports its
/// options as statistics (and a warning when `flag` is set); changes nothing.
pub(super) struct Options;

const OPTIONS_INFO: PassInfo = PassInfo {
    name: "test-options",
    summary: "a pass with options of every kind",
    preserves_semantics: false,
    equivalence: None,
    description: "",
};

impl Pass for Options {
    fn info(&self) -> &'static PassInfo {
        &OPTIONS_INFO
    }

    fn options(&self) -> Vec<OptionSpec> {
        vec![
            spec("count", OptionKind::Int, "3", "how many"),
            spec("mode", OptionKind::Enum(MODES), "", "how"),
            spec("sizes", OptionKind::List(Box::new(OptionKind::Int)), "[1,2]", "which sizes"),
            spec("flag", OptionKind::Bool, "", "whether to warn"),
            OptionSpec { required: true, ..spec("label", OptionKind::String, "", "") },
            spec("data", OptionKind::String, "", "a file read").reads_file(),
            spec("report", OptionKind::String, "", "a file written").writes_file(),
        ]
    }
    fn run(&self, cx: &mut PassContext<'_>, _: &mut Module, options: &PassOptions) -> PassResult {
        cx.add_stat("count", options.int("count").unsigned_abs());
        cx.add_stat("sizes", options.list("sizes").len() as u64);
        if options.string("mode") == "exact" {
            cx.add_stat("exact-runs", 1);
        }
        if options.bool("flag") {
            cx.warn_unlocated(format!("flag set on '{}'", options.string("label")));
        }
        Ok(PassOutcome::Unchanged)
    }
}

/// A registry with every test pass and these pipelines:
/// - `test-pipeline{suffix=_p}` = `test-rename-funcs{suffix=<suffix>},test-noop`
/// - `test-outer` = `test-pipeline{suffix=_o},test-noop`
/// - `test-cycle-a` = `test-noop,test-cycle-b`; `test-cycle-b` = `test-cycle-a`
/// - `test-countdown{n=2}` = `test-noop,test-countdown{n=1}`, ..., `test-countdown{n=0}` = `test-noop`
/// - `test-bad-expansion` = `test-noop,test-options` (misses a required option)
pub(super) fn test_registry() -> PassRegistry {
    let mut registry = PassRegistry::new();
    let passes: [Arc<dyn Pass>; 7] = [
        Arc::new(RenameFuncs),
        Arc::new(Noop),
        Arc::new(Phases),
        Arc::new(Fail),
        Arc::new(Panic),
        Arc::new(BreakIr),
        Arc::new(Options),
    ];
    let pipelines = [
        NamedPipeline {
            name: "test-pipeline",
            summary: "rename, then do nothing",
            options: vec![spec("suffix", OptionKind::String, "_p", "passed to test-rename-funcs")],
            expand: |options| {
                let suffix = options.get("suffix").map(|value| value.to_string()).unwrap_or_default();
                format!("test-rename-funcs{{suffix={suffix}}},test-noop")
            },
        },
        NamedPipeline {
            name: "test-forward",
            summary: "test-options twice, passing on its options",
            options: vec![
                spec("count", OptionKind::String, "3", "passed to the first test-options"),
                spec("data", OptionKind::String, "", "passed to the first test-options"),
            ],
            expand: |options| {
                let given = |name: &str| options.get(name).map(|value| value.to_string()).unwrap_or_default();
                format!(
                    "test-options{{label=a count={} data={}}},test-options{{label=b report=r.json}}",
                    given("count"),
                    given("data")
                )
            },
        },
        NamedPipeline {
            name: "test-outer",
            summary: "a pipeline naming a pipeline",
            options: Vec::new(),
            expand: |_| "test-pipeline{suffix=_o},test-noop".to_string(),
        },
        NamedPipeline {
            name: "test-cycle-a",
            summary: "expands to itself through test-cycle-b",
            options: Vec::new(),
            expand: |_| "test-noop,test-cycle-b".to_string(),
        },
        NamedPipeline {
            name: "test-cycle-b",
            summary: "expands to test-cycle-a",
            options: Vec::new(),
            expand: |_| "test-cycle-a".to_string(),
        },
        NamedPipeline {
            name: "test-countdown",
            summary: "test-noop n+1 times, through n nested pipelines",
            options: vec![spec("n", OptionKind::Int, "0", "nesting depth")],
            expand: |options| match options.get("n") {
                Some(OptionValue::Int(n)) if *n > 0 => format!("test-noop,test-countdown{{n={}}}", n - 1),
                _ => "test-noop".to_string(),
            },
        },
        NamedPipeline {
            name: "test-bad-expansion",
            summary: "expands to an invalid pipeline",
            options: Vec::new(),
            expand: |_| "test-noop,test-options".to_string(),
        },
    ];
    for pass in passes {
        if let Err(error) = registry.register(pass) {
            panic!("{error}");
        }
    }
    for pipeline in pipelines {
        if let Err(error) = registry.register_pipeline(pipeline) {
            panic!("{error}");
        }
    }
    registry
}
