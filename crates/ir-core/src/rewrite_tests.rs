//! Unit tests of the rewrite machinery ([`crate::Rewriter`], [`crate::PatternSet`],
//! [`crate::apply_patterns_greedily`]), on IR built with the helpers of
//! `module_tests.rs`.

use crate::module_tests::{assert_sound, ops_of, uses_of, Ir};
use crate::{
    apply_patterns_greedily, Attribute, BlockId, EraseError, GreedyConfig, GreedyStats, InsertPoint,
    Location, OpId, OpName, OperationState, PatternSet, RewritePattern, Rewriter,
};

// ---- rewriter ------------------------------------------------------------------------

fn sorted(mut ops: Vec<OpId>) -> Vec<OpId> {
    ops.sort();
    ops.dedup();
    ops
}

#[test]
fn rewriter_records_created_modified_and_erased_ops() {
    let mut ir = Ir::new();
    let body = ir.body();
    let x = ir.konst(body, 1);
    let y = ir.konst(body, 2);
    let (x_op, y_op) = (ir.m.defining_op(x), ir.m.defining_op(y));
    let n = ir.append(body, "test.neg", &[x]);
    let s = ir.append(body, "test.effect", &[ir.val(n)]);
    let neg = ir.ctx.op_name("test.neg");
    let i64 = ir.i64;

    let mut rw = Rewriter::new(&mut ir.ctx, &mut ir.m);
    assert!(!rw.has_changes(), "a fresh rewriter has no changes");
    rw.set_insertion_point(InsertPoint::Before(n));
    let fresh = rw.create(OperationState::new(neg).operands(&[y]).results(&[i64]));
    let fresh_v = rw.module.result(fresh, 0);
    rw.set_operand(n, 0, y);
    let tag = rw.ctx.string_attr("tagged");
    let attrs = rw.ctx.dict_attr(&[("tag", tag)]);
    rw.set_attrs(s, attrs);
    let n_v = rw.module.result(n, 0);
    rw.replace_all_uses(n_v, fresh_v);
    assert_eq!(rw.erase_op(n), Ok(()), "neg is unused after the RAUW");
    assert!(rw.has_changes(), "changes were recorded");

    let changes = rw.take_changes();
    assert_eq!(changes.created, vec![fresh], "one op created");
    assert_eq!(changes.erased, vec![n], "one op erased");
    assert_eq!(sorted(changes.modified.clone()), sorted(vec![n, s]), "neg's operand and the sink changed");
    assert_eq!(
        sorted(changes.lost_use.clone()),
        sorted(vec![x_op, y_op, n]),
        "x lost neg's use, y lost it at the erase, neg lost the sink's use"
    );
    assert!(!rw.has_changes(), "take_changes leaves none");
    assert!(rw.take_changes().is_empty(), "a second take is empty");
    drop(rw);
    assert_sound(&ir.m, "after rewriter edits");
    assert_eq!(ops_of(&ir.m, body), vec![x_op, y_op, fresh, s], "neg replaced by the fresh op");
    assert_eq!(uses_of(&ir.m, fresh_v), vec![(s, 0)], "the sink uses the fresh op");
    assert_eq!(ir.m.op_attr(&ir.ctx, s, "tag"), Some(tag), "the sink got its attribute");
}

#[test]
fn rewriter_records_nothing_for_a_refused_erase() {
    let mut ir = Ir::new();
    let c = ir.konst(ir.body(), 1);
    ir.append(ir.body(), "test.effect", &[c]);
    let c_op = ir.m.defining_op(c);
    let mut rw = Rewriter::new(&mut ir.ctx, &mut ir.m);
    assert!(matches!(rw.erase_op(c_op), Err(EraseError::ResultInUse { .. })), "the const is used");
    assert!(!rw.has_changes(), "a refused erase records nothing");
    drop(rw);
    assert_sound(&ir.m, "after a refused rewriter erase");
}

#[test]
fn rewriter_replace_op_records_the_users_and_the_erase() {
    let mut ir = Ir::new();
    let body = ir.body();
    let x = ir.konst(body, 1);
    let n = ir.append(body, "test.neg", &[x]);
    let s = ir.append(body, "test.effect", &[ir.val(n)]);
    let mut rw = Rewriter::new(&mut ir.ctx, &mut ir.m);
    assert_eq!(rw.replace_op(n, &[x]), Ok(()), "neg replaced by x");
    let changes = rw.take_changes();
    assert!(changes.created.is_empty(), "nothing created");
    assert_eq!(changes.erased, vec![n], "neg erased");
    assert_eq!(sorted(changes.modified), vec![s], "the sink's operand changed");
    drop(rw);
    assert_sound(&ir.m, "after rewriter replace_op");
    assert_eq!(uses_of(&ir.m, x), vec![(s, 0)], "only the sink uses x");
}

#[test]
fn rewriter_insertion_points_place_new_ops() {
    let mut ir = Ir::new();
    let body = ir.body();
    let first = ir.append(body, "test.effect", &[]);
    let last = ir.append(body, "test.effect", &[]);
    let sink = ir.ctx.op_name("test.effect");
    let here = ir.ctx.name_loc("here");

    let mut rw = Rewriter::new(&mut ir.ctx, &mut ir.m);
    assert_eq!(rw.insertion_point(), InsertPoint::Detached, "a fresh rewriter creates detached ops");
    let loose = rw.create(OperationState::new(sink));
    rw.set_insertion_point(InsertPoint::Before(last));
    let b1 = rw.create(OperationState::new(sink));
    let b2 = rw.create(OperationState::new(sink));
    assert_eq!(rw.insertion_point(), InsertPoint::Before(last), "Before stays on its anchor");
    rw.set_insertion_point(InsertPoint::After(first));
    let a1 = rw.create(OperationState::new(sink));
    let a2 = rw.create(OperationState::new(sink));
    assert_eq!(rw.insertion_point(), InsertPoint::After(a2), "After moves past each created op");
    rw.set_insertion_point(InsertPoint::End(body));
    rw.set_loc(here);
    let e = rw.create(OperationState::new(sink));
    assert_eq!(rw.take_changes().created, vec![loose, b1, b2, a1, a2, e], "all creations recorded in order");
    drop(rw);

    assert_sound(&ir.m, "after creating through the rewriter");
    assert_eq!(ir.m.op_block(loose), BlockId::NONE, "Detached leaves the op outside any block");
    assert_eq!(ops_of(&ir.m, body), vec![first, a1, a2, b1, b2, last, e], "ops land in creation order");
    assert_eq!(ir.m.op_loc(e), here, "new ops take the rewriter's location");
    assert_eq!(ir.m.op_loc(a1), Location::UNKNOWN, "before set_loc the location is unknown");
}

#[test]
fn rewriter_create_inferred_uses_the_registered_inference() {
    let mut ir = Ir::new();
    let x = ir.konst(ir.body(), 1);
    let i64 = ir.i64;
    let mut rw = Rewriter::new(&mut ir.ctx, &mut ir.m);
    rw.set_insertion_point(InsertPoint::End(rw.module.body()));
    let n = rw.create_inferred("test.neg", &[x], Attribute::EMPTY_DICT).expect("test.neg infers its type");
    assert_eq!(rw.module.value_type(rw.module.result(n, 0)), i64, "neg's result takes its operand's type");
    let err = rw.create_inferred("test.effect", &[x], Attribute::EMPTY_DICT);
    assert!(err.is_err(), "test.effect has no inference, so create_inferred reports an error");
    assert_eq!(rw.take_changes().created, vec![n], "only the successful creation is recorded");
}

// ---- greedy driver ---------------------------------------------------------------

/// The ops of a block as `name` or `name(=value)` for constants, so results of
/// the greedy driver compare as one readable vector.
fn body_names(ir: &Ir, block: BlockId) -> Vec<String> {
    ops_of(&ir.m, block)
        .into_iter()
        .map(|op| {
            let name = ir.name_of(op);
            match (name == "test.const").then(|| ir.const_of(ir.val(op))).flatten() {
                Some(c) => format!("{name}(={c})"),
                None => name.to_string(),
            }
        })
        .collect()
}

fn run(
    ir: &mut Ir,
    scope: OpId,
    patterns: Vec<Box<dyn RewritePattern>>,
    config: &GreedyConfig,
) -> GreedyStats {
    let set = PatternSet::new(&mut ir.ctx, patterns);
    let stats = apply_patterns_greedily(&mut ir.ctx, &mut ir.m, scope, &set, config);
    assert_sound(&ir.m, "after the greedy driver");
    stats
}

fn hits(stats: &GreedyStats, name: &str) -> u64 {
    stats.pattern_hits.iter().find(|(n, _)| n == name).map_or(0, |h| h.1)
}

#[test]
fn greedy_folds_an_add_of_constants_and_removes_the_dead_inputs() {
    let mut ir = Ir::new();
    let body = ir.body();
    let c1 = ir.konst(body, 2);
    let c2 = ir.konst(body, 3);
    let a = ir.append(body, "test.add", &[c1, c2]);
    let s = ir.append(body, "test.effect", &[ir.val(a)]);
    let root = ir.m.root();
    let stats = run(&mut ir, root, Vec::new(), &GreedyConfig::default());

    assert_eq!(body_names(&ir, body), ["test.const(=5)", "test.effect"], "2 + 3 folded to 5; inputs dead");
    assert_eq!(ir.const_of(ir.m.operand(s, 0)), Some(5), "the sink uses the folded constant");
    assert!(ir.m.is_erased(a), "the add is gone");
    assert_eq!((stats.folded, stats.dead_erased), (1, 2), "one fold, two dead constants");
    assert!(stats.converged, "the driver converged");
    assert_eq!(stats.iterations, 2, "one sweep changing things, one confirming nothing changes");
    assert!(stats.changed() && stats.pattern_hits.is_empty(), "changed, without any pattern");
}

#[test]
fn greedy_folds_a_chain_of_adds() {
    let mut ir = Ir::new();
    let body = ir.body();
    let c1 = ir.konst(body, 1);
    let c2 = ir.konst(body, 2);
    let a1 = ir.append(body, "test.add", &[c1, c2]);
    let c3 = ir.konst(body, 3);
    let a2 = ir.append(body, "test.add", &[ir.val(a1), c3]);
    ir.append(body, "test.effect", &[ir.val(a2)]);
    let root = ir.m.root();
    let stats = run(&mut ir, root, Vec::new(), &GreedyConfig::default());
    assert_eq!(body_names(&ir, body), ["test.const(=6)", "test.effect"], "(1 + 2) + 3 folded to 6");
    assert_eq!((stats.folded, stats.dead_erased), (2, 4), "two folds; three inputs and one partial sum dead");
    assert!(stats.converged, "the driver converged");
}

#[test]
fn greedy_folds_an_add_of_zero_to_the_other_operand() {
    let mut ir = Ir::new();
    let (r, inner) = ir.region_op(ir.body(), 1);
    let x = ir.m.block_args(inner)[0];
    let zero = ir.konst(inner, 0);
    let a = ir.append(inner, "test.add", &[x, zero]);
    let b = ir.append(inner, "test.add", &[zero, ir.val(a)]);
    let s = ir.append(inner, "test.effect", &[ir.val(b)]);
    let stats = run(&mut ir, r, Vec::new(), &GreedyConfig::default());
    assert_eq!(ops_of(&ir.m, inner), vec![s], "both adds and the zero are gone");
    assert_eq!(uses_of(&ir.m, x), vec![(s, 0)], "the sink uses x directly");
    assert_eq!((stats.folded, stats.dead_erased), (2, 1), "x + 0 and 0 + x folded; the zero died");
}

#[test]
fn greedy_leaves_constants_the_folder_declines_unfolded() {
    let mut ir = Ir::new();
    let body = ir.body();
    let f32 = ir.ctx.common().f32;
    let one = ir.ctx.float_attr(1.0, f32);
    let attrs = ir.ctx.dict_attr(&[("value", one)]);
    let name = ir.ctx.op_name("test.const");
    let c = ir.m.create_op(OperationState::new(name).results(&[f32]).attrs(attrs));
    ir.m.append_op(body, c);
    let a = ir.make_with("test.add", &[ir.val(c), ir.val(c)], &[f32], 0);
    ir.m.append_op(body, a);
    ir.append(body, "test.effect", &[ir.val(a)]);
    let root = ir.m.root();
    let stats = run(&mut ir, root, Vec::new(), &GreedyConfig::default());
    assert_eq!(
        body_names(&ir, body),
        ["test.const", "test.add", "test.effect"],
        "the folder only knows integers"
    );
    assert!(!stats.changed() && stats.converged, "nothing to do, converged at once");
    assert_eq!(stats.iterations, 1, "one sweep suffices to see nothing changes");
}

#[test]
fn greedy_removes_dead_pure_ops_but_keeps_side_effects_and_regions() {
    let mut ir = Ir::new();
    let body = ir.body();
    let c = ir.konst(body, 1);
    let n1 = ir.append(body, "test.neg", &[c]);
    ir.append(body, "test.neg", &[ir.val(n1)]);
    let kept = ir.konst(body, 2);
    ir.append(body, "test.effect", &[kept]);
    ir.append(body, "test.effect", &[]);
    let (_, inner) = ir.region_op(body, 0);
    ir.konst(inner, 3);
    let root = ir.m.root();
    let stats = run(&mut ir, root, Vec::new(), &GreedyConfig::default());
    assert_eq!(
        body_names(&ir, body),
        ["test.const(=2)", "test.effect", "test.effect", "test.region"],
        "the dead neg chain and its constant are gone; sinks, their input and the region op stay"
    );
    assert!(ops_of(&ir.m, inner).is_empty(), "the dead constant inside the region is gone too");
    assert_eq!(stats.dead_erased, 4, "neg, neg, const, nested const");
    assert!(stats.converged, "the driver converged");
}

#[test]

fn greedy_keeps_terminators() {
    // `func.return` is Pure and has no results, so "pure and unused" holds for
    // it; MLIR's isOpTriviallyDead excludes terminators for this reason.
    let mut ir = Ir::new();
    let i64 = ir.i64;
    let f = ir.m.create_op(OperationState::new(OpName::FUNC).regions(1));
    ir.m.append_op(ir.body(), f);
    let entry = ir.m.append_block(ir.m.region(f, 0), &[i64]);
    let x = ir.m.block_args(entry)[0];
    let ret = ir.m.create_op(OperationState::new(OpName::RETURN).operands(&[x]));
    ir.m.append_op(entry, ret);
    let root = ir.m.root();
    let stats = run(&mut ir, root, Vec::new(), &GreedyConfig::default());
    assert_eq!(ops_of(&ir.m, entry), vec![ret], "the function keeps its return");
    assert_eq!(stats.dead_erased, 0, "a terminator is never dead");
}

#[test]
fn greedy_switches_turn_folding_and_dead_removal_off() {
    let mut ir = Ir::new();
    let body = ir.body();
    let c1 = ir.konst(body, 2);
    let c2 = ir.konst(body, 3);
    let a = ir.append(body, "test.add", &[c1, c2]);
    ir.append(body, "test.effect", &[ir.val(a)]);
    ir.append(body, "test.neg", &[c1]);
    let before = body_names(&ir, body);
    let root = ir.m.root();
    let off = GreedyConfig { fold: false, remove_dead: false, ..GreedyConfig::default() };
    let stats = run(&mut ir, root, Vec::new(), &off);
    assert_eq!(body_names(&ir, body), before, "with both switches off nothing changes");
    assert!(!stats.changed() && stats.converged, "unchanged and converged");

    let fold_only = GreedyConfig { remove_dead: false, ..GreedyConfig::default() };
    let stats = run(&mut ir, root, Vec::new(), &fold_only);
    assert_eq!(
        body_names(&ir, body),
        ["test.const(=2)", "test.const(=3)", "test.const(=5)", "test.effect", "test.neg"],
        "folding without dead removal keeps the inputs and the unused neg"
    );
    assert_eq!((stats.folded, stats.dead_erased), (1, 0), "one fold, no erasures");
}

#[test]
fn greedy_only_touches_ops_inside_the_scope() {
    let mut ir = Ir::new();
    let body = ir.body();
    let outside = ir.konst(body, 9);
    let (r, inner) = ir.region_op(body, 0);
    ir.konst(inner, 1);
    let stats = run(&mut ir, r, Vec::new(), &GreedyConfig::default());
    assert!(ops_of(&ir.m, inner).is_empty(), "the dead constant in scope is gone");
    assert!(!ir.m.is_erased(ir.m.defining_op(outside)), "the dead constant outside the scope stays");
    assert!(!ir.m.is_erased(r), "the scope op itself is never touched");
    assert_eq!(stats.dead_erased, 1, "one erasure");
}

/// `neg(neg(x)) -> x`.
struct NegNeg;

impl RewritePattern for NegNeg {
    fn name(&self) -> &str {
        "neg-neg-to-x"
    }
    fn root(&self) -> Option<&str> {
        Some("test.neg")
    }
    fn match_and_rewrite(&self, op: OpId, rw: &mut Rewriter<'_>) -> bool {
        let inner = rw.module.defining_op(rw.module.operand(op, 0));
        if inner.is_none() || rw.ctx.op_name_str(rw.module.op_name(inner)) != "test.neg" {
            return false;
        }
        let x = rw.module.operand(inner, 0);
        rw.replace_op(op, &[x]).is_ok()
    }
}

#[test]
fn greedy_applies_a_custom_pattern_and_counts_hits() {
    let mut ir = Ir::new();
    let (r, inner) = ir.region_op(ir.body(), 2);
    let (x, y) = (ir.m.block_args(inner)[0], ir.m.block_args(inner)[1]);
    let mut v = x;
    for _ in 0..2 {
        let n = ir.append(inner, "test.neg", &[v]);
        v = ir.val(n);
    }
    let sx = ir.append(inner, "test.effect", &[v]);
    let mut w = y;
    for _ in 0..4 {
        let n = ir.append(inner, "test.neg", &[w]);
        w = ir.val(n);
    }
    let sy = ir.append(inner, "test.effect", &[w]);
    let odd = ir.append(inner, "test.neg", &[x]);
    ir.append(inner, "test.effect", &[ir.val(odd)]);

    let stats = run(&mut ir, r, vec![Box::new(NegNeg)], &GreedyConfig::default());
    assert_eq!(ir.m.operand(sx, 0), x, "neg(neg(x)) became x");
    assert_eq!(ir.m.operand(sy, 0), y, "neg(neg(neg(neg(y)))) became y");
    assert_eq!(
        body_names(&ir, inner),
        ["test.effect", "test.effect", "test.neg", "test.effect"],
        "only the single neg survives"
    );
    assert_eq!(hits(&stats, "neg-neg-to-x"), 3, "one hit for the pair, two for the quadruple");
    assert_eq!(stats.pattern_hits.len(), 1, "only patterns that hit are listed");
    assert_eq!(stats.rewrites(), 3, "rewrites() sums the hits");
    assert_eq!(stats.dead_erased, 3, "the inner neg of each hit died");
    assert!(stats.converged, "the driver converged");
}

/// Sets the sink's `phase` from `from` to `to`; with `recorded` false it edits
/// the module behind the rewriter's back, so the driver does not requeue the op.
struct Flip {
    name: &'static str,
    from: i64,
    to: i64,
    recorded: bool,
}

impl RewritePattern for Flip {
    fn name(&self) -> &str {
        self.name
    }
    fn root(&self) -> Option<&str> {
        Some("test.effect")
    }
    fn match_and_rewrite(&self, op: OpId, rw: &mut Rewriter<'_>) -> bool {
        let phase = rw.module.op_attr(rw.ctx, op, "phase").and_then(|a| rw.ctx.attr_as_int(a));
        if phase != Some(i128::from(self.from)) {
            return false;
        }
        let to = rw.ctx.i64_attr(self.to);
        let attrs = rw.ctx.dict_set(rw.module.op_attrs(op), "phase", to);
        if self.recorded {
            rw.set_attrs(op, attrs);
        } else {
            rw.module.set_op_attrs(op, attrs);
        }
        true
    }
}

fn ping_pong(recorded: bool) -> Vec<Box<dyn RewritePattern>> {
    vec![
        Box::new(Flip { name: "phase-0-to-1", from: 0, to: 1, recorded }),
        Box::new(Flip { name: "phase-1-to-0", from: 1, to: 0, recorded }),
    ]
}

fn phased_sink(ir: &mut Ir) -> OpId {
    let s = ir.append(ir.body(), "test.effect", &[]);
    let zero = ir.ctx.i64_attr(0);
    let attrs = ir.ctx.dict_attr(&[("phase", zero)]);
    ir.m.set_op_attrs(s, attrs);
    s
}

#[test]
fn greedy_ping_pong_stops_at_the_rewrite_bound_without_converging() {
    // Recorded edits requeue the sink, so one sweep never ends by itself: the
    // rewrite bound is what stops it, inside the iteration bound.
    let mut ir = Ir::new();
    phased_sink(&mut ir);
    let root = ir.m.root();
    let config = GreedyConfig {
        max_iterations: 3,
        max_rewrites: 101,
        max_rewrites_per_op: u64::MAX,
        ..GreedyConfig::default()
    };
    let stats = run(&mut ir, root, ping_pong(true), &config);
    assert!(!stats.converged, "a ping-pong pair never converges");
    assert!(stats.iterations <= config.max_iterations, "the iteration bound holds");
    assert_eq!(stats.rewrites(), 101, "exactly max_rewrites applications");
    assert_eq!(
        (hits(&stats, "phase-0-to-1"), hits(&stats, "phase-1-to-0")),
        (51, 50),
        "the two patterns alternate, starting with the one that matches phase 0"
    );
}

#[test]
fn greedy_ping_pong_stops_at_the_per_sweep_bound_by_default() {
    // With the default limits a self-undoing pattern pair is cut off within one
    // sweep after max_rewrites_per_op rewrites per op in scope (the sink and the
    // module body's ops), not after ten million.
    let mut ir = Ir::new();
    phased_sink(&mut ir);
    let root = ir.m.root();
    let config = GreedyConfig::default();
    let stats = run(&mut ir, root, ping_pong(true), &config);
    assert!(!stats.converged, "a ping-pong pair never converges");
    assert_eq!(stats.iterations, 1, "cut off inside the first sweep");
    assert!(stats.rewrites() <= 2 * config.max_rewrites_per_op, "bounded by ops in scope x per-op bound");
}

#[test]
fn greedy_ping_pong_stops_at_the_iteration_bound_without_converging() {
    // Unrecorded edits are not requeued, so each sweep applies one flip and the
    // iteration bound is what stops it.
    let mut ir = Ir::new();
    let s = phased_sink(&mut ir);
    let root = ir.m.root();
    let config = GreedyConfig { max_iterations: 5, ..GreedyConfig::default() };
    let stats = run(&mut ir, root, ping_pong(false), &config);
    assert!(!stats.converged, "a ping-pong pair never converges");
    assert_eq!(stats.iterations, 5, "every allowed sweep ran");
    assert_eq!((hits(&stats, "phase-0-to-1"), hits(&stats, "phase-1-to-0")), (3, 2), "one flip per sweep");
    let phase = ir.m.op_attr(&ir.ctx, s, "phase").and_then(|a| ir.ctx.attr_as_int(a));
    assert_eq!(phase, Some(1), "an odd number of flips leaves phase 1");
}

/// Marks a `test.effect` as claimed by this pattern, if nobody claimed it yet.
struct Claim {
    name: &'static str,
    benefit: u16,
    rooted: bool,
}

impl RewritePattern for Claim {
    fn name(&self) -> &str {
        self.name
    }
    fn root(&self) -> Option<&str> {
        self.rooted.then_some("test.effect")
    }
    fn benefit(&self) -> u16 {
        self.benefit
    }
    fn match_and_rewrite(&self, op: OpId, rw: &mut Rewriter<'_>) -> bool {
        if rw.ctx.op_name_str(rw.module.op_name(op)) != "test.effect"
            || rw.module.op_attr(rw.ctx, op, "claimed").is_some()
        {
            return false;
        }
        let me = rw.ctx.string_attr(self.name);
        let attrs = rw.ctx.dict_set(rw.module.op_attrs(op), "claimed", me);
        rw.set_attrs(op, attrs);
        true
    }
}

#[test]
fn greedy_tries_higher_benefit_first_across_rooted_and_any_root_patterns() {
    for (rooted_high, case) in
        [(true, "rooted pattern has the higher benefit"), (false, "any-root is higher")]
    {
        let mut ir = Ir::new();
        let s = ir.append(ir.body(), "test.effect", &[]);
        let patterns: Vec<Box<dyn RewritePattern>> = vec![
            Box::new(Claim { name: "low", benefit: 1, rooted: !rooted_high }),
            Box::new(Claim { name: "high", benefit: 5, rooted: rooted_high }),
        ];
        let root = ir.m.root();
        let stats = run(&mut ir, root, patterns, &GreedyConfig::default());
        let claimed =
            ir.m.op_attr(&ir.ctx, s, "claimed").and_then(|a| ir.ctx.attr_as_str(a).map(String::from));
        assert_eq!(claimed.as_deref(), Some("high"), "{case}: the higher benefit pattern wins");
        assert_eq!((hits(&stats, "high"), hits(&stats, "low")), (1, 0), "{case}: one hit, for the winner");
        assert!(stats.converged, "{case}: converged once claimed");
    }
}
