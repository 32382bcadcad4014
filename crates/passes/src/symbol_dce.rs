//! `symbol-dce`: erases private functions that nothing live refers to.
//!
//! Roots are every top-level op that is not a private `func.func`
//! (`sym_visibility = "private"`): public functions and any other top-level op,
//! and the module op's own attributes. A private function is live when a live op
//! (anywhere inside a live top-level op, the op itself included) refers to it by
//! a symbol reference attribute, at any depth inside arrays and dictionaries
//! (`callee = @f`, `table = [@f, {then = @g}]`). Liveness spreads from the roots
//! over a worklist, so private functions that only call each other, or are only
//! called from dead private functions, are erased too. Attributes are walked with
//! an explicit stack, each interned attribute once.
//!
//! Assumes: symbols are referenced only through `SymbolRef` attributes (not by
//! string attributes), and only top-level `func.func` ops are candidates.
//! Statistic: `erased-functions`.
//!
//! ```text
//! // before
//! func.func @main(%x: i64) -> i64 {
//!   %0 = func.call @used(%x) : (i64) -> i64
//!   func.return %0 : i64
//! }
//! func.func private @used(%x: i64) -> i64 { func.return %x : i64 }
//! func.func private @unused(%x: i64) -> i64 { func.return %x : i64 }
//! // after: @unused is gone
//! ```

use qopt_ir_core::equivalence::Relation;
use qopt_ir_core::pass::PassOptions;
use qopt_ir_core::PassInfo;
use qopt_ir_core::PassResult;
use qopt_ir_core::{
    AttrData, Attribute, Context, FxHashMap, FxIndexSet, Module, OpId, OpName, Pass, PassContext,
    PassOutcome, Symbol,
};

/// The `symbol-dce` pass; see the module docs.
pub struct SymbolDce;

const INFO: PassInfo = PassInfo {
    name: "symbol-dce",
    summary: "erase private functions that no live code refers to",
    preserves_semantics: true,
    equivalence: Some(Relation::Exact),
    description: "Public functions and other top-level ops are live; a private function is live if a \
     live op refers to it through a symbol reference attribute (also inside arrays and \
     dictionaries). Private functions that are not live are erased.\n\n\
     ```\n\
     func.func private @unused(%x: i64) -> i64   // erased unless something live says @unused\n\
     ```",
};

impl Pass for SymbolDce {
    fn info(&self) -> &'static PassInfo {
        &INFO
    }

    fn run(&self, cx: &mut PassContext<'_>, module: &mut Module, _options: &PassOptions) -> PassResult {
        let dead = dead_private_functions(cx.ctx, module);
        let mut erased = 0u64;
        for func in dead {
            // invariant: a function's results and nested values are not used
            // outside it, so erasing cannot fail; a refusal just keeps it.
            if module.erase_op(func).is_ok() {
                erased += 1;
            }
        }
        cx.add_stat("erased-functions", erased);
        Ok(PassOutcome::from_changed(erased > 0))
    }
}

/// The private top-level functions that no live op refers to, in module order.
fn dead_private_functions(ctx: &Context, module: &Module) -> Vec<OpId> {
    // Private functions by name; a name the context never interned cannot be
    // referred to at all.
    let mut private: FxHashMap<Symbol, OpId> = FxHashMap::default();
    let mut candidates: Vec<OpId> = Vec::new();
    let mut live: Vec<OpId> = Vec::new();
    for op in module.top_level_ops() {
        if is_private_function(ctx, module, op) {
            candidates.push(op);
            let name = module.op_attr(ctx, op, "sym_name").and_then(|a| ctx.attr_as_str(a));
            if let Some(symbol) = name.and_then(|name| ctx.lookup_symbol(name)) {
                private.insert(symbol, op);
            }
        } else {
            live.push(op);
        }
    }
    if candidates.is_empty() {
        return candidates;
    }
    let mut reached: FxIndexSet<OpId> = live.iter().copied().collect();
    let mut walker = SymbolRefs::default();
    walker.visit(ctx, module.op_attrs(module.root()));
    let mut worklist = live;
    loop {
        // Private functions that references found so far make live.
        for symbol in walker.found.drain(..) {
            if let Some(&func) = private.get(&symbol) {
                if reached.insert(func) {
                    worklist.push(func);
                }
            }
        }
        let Some(top) = worklist.pop() else { break };
        for op in module.walk_preorder(top) {
            walker.visit(ctx, module.op_attrs(op));
        }
    }
    candidates.retain(|op| !reached.contains(op));
    candidates
}

/// A top-level `func.func` with `sym_visibility = "private"`.
fn is_private_function(ctx: &Context, module: &Module, op: OpId) -> bool {
    module.op_name(op) == OpName::FUNC
        && module.op_attr(ctx, op, "sym_visibility").and_then(|a| ctx.attr_as_str(a)) == Some("private")
}

/// Collects the symbols referred to inside attributes, visiting each interned
/// attribute once over the whole walk.
#[derive(Default)]
struct SymbolRefs {
    seen: FxIndexSet<Attribute>,
    stack: Vec<Attribute>,
    found: Vec<Symbol>,
}

impl SymbolRefs {
    fn visit(&mut self, ctx: &Context, attr: Attribute) {
        self.stack.push(attr);
        while let Some(attr) = self.stack.pop() {
            if !self.seen.insert(attr) {
                continue;
            }
            match ctx.attr_data(attr) {
                AttrData::SymbolRef(symbol) => self.found.push(*symbol),
                AttrData::Array(items) => self.stack.extend(items.iter().copied()),
                AttrData::Dict(entries) => self.stack.extend(entries.iter().map(|&(_, value)| value)),
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::test_ir::{on_small_stack, registry, TestIr};

    /// `@main` refers to `@f0`, `@f0` to `@f1`, ... `@f9999`; `@g0` ... `@g9999` refer
    /// to each other the same way but nothing live refers to `@g0`; `@deep` is
    /// referred to only from the bottom of a 10,000-deep array attribute. (The
    /// references are `test.effect {ref = @f1}` rather than calls: verifying a call
    /// looks its callee up by a linear scan of the module.)
    #[test]
    fn a_10000_function_call_chain_and_deep_attribute() {
        on_small_stack(|| {
            let mut ir = TestIr::default();
            let (_, main) = ir.function("main", 0, 0);
            let mut deep = ir.ctx.symbol_ref_attr("deep");
            for _ in 0..10_000 {
                deep = ir.ctx.array_attr(&[deep]);
            }
            let (_, deep_body) = ir.function_with_visibility("deep", 0, 0, Some("private"));
            ir.ret(deep_body, &[]);
            ir.op_with(main, "test.effect", &[], 0, 0, &[("table", deep)]);
            for prefix in ["f", "g"] {
                for i in 0..10_000 {
                    let (_, body) =
                        ir.function_with_visibility(&format!("{prefix}{i}"), 0, 0, Some("private"));
                    if i + 1 < 10_000 {
                        let next = ir.ctx.symbol_ref_attr(&format!("{prefix}{}", i + 1));
                        ir.op_with(body, "test.effect", &[], 0, 0, &[("ref", next)]);
                    }
                    ir.ret(body, &[]);
                }
            }
            let first = ir.ctx.symbol_ref_attr("f0");
            ir.op_with(main, "test.effect", &[], 0, 0, &[("ref", first)]);
            ir.ret(main, &[]);
            // Not printed: the printer recurses over attribute depth, and the
            // parser caps nesting at 200 levels anyway.
            let stats = ir.run_unprinted(&registry(), "symbol-dce").unwrap();
            assert_eq!(stats, [("erased-functions", 10_000)]);
            let names: Vec<&str> = ir
                .module
                .top_level_ops()
                .filter_map(|op| ir.module.op_attr(&ir.ctx, op, "sym_name"))
                .filter_map(|name| ir.ctx.attr_as_str(name))
                .collect();
            assert_eq!(names.len(), 10_002);
            assert_eq!(names[..3], ["main", "deep", "f0"]);
            assert!(names.iter().all(|name| !name.starts_with('g')));
        });
    }
}
