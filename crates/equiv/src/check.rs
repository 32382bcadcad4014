//! One check: the functions of a module before and after a pass in one
//! e-graph, saturated with the dialects' rules allowed under the pass's
//! relation, until every result of the old function shares an e-class with
//! the matching result of the new one (proven), the rules run out (failed),
//! or a limit stops the run (unknown).

use crate::analysis::{EqAnalysis, Memo};
use crate::bridge::{add_function, Added};
use crate::lang::Node;
use crate::rules;
use egg::{EGraph, Id, Runner, StopReason};
use qopt_interp::KernelRegistry;
use qopt_ir_core::equivalence::{EquivRule, Relation};
use qopt_ir_core::{Context, FxHashSet, Module, OpId, ValueId};
use std::time::{Duration, Instant};

/// Bounds of one check.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Saturation iterations.
    pub iterations: usize,
    /// E-nodes.
    pub nodes: usize,
    /// Wall time of the saturation.
    pub time: Duration,
    /// How many ulps two float constants may differ by under a relation that
    /// tolerates rounding.
    pub ulps: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { iterations: 30, nodes: 200_000, time: Duration::from_secs(10), ulps: 4 }
    }
}

/// How a check ended.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Every result is in the class of its counterpart.
    Proven,
    /// The rules ran out (saturation) with a result unproven.
    Failed(Failure),
    /// A limit stopped the run, or the module holds what the checker does
    /// not model; the reason says which.
    Unknown(String),
}

/// The first unproven result and where the two functions first differ.
#[derive(Clone, Debug, PartialEq)]
pub struct Failure {
    /// The function.
    pub function: String,
    /// The result's index.
    pub result: usize,
    /// The op of the old module at the first difference (none: an argument).
    pub before_op: Option<OpId>,
    /// The op of the new module at the first difference.
    pub after_op: Option<OpId>,
    /// The rules that fired, most applications first.
    pub rules_fired: Vec<(String, usize)>,
}

/// What one check found.
#[derive(Clone, Debug)]
pub struct Check {
    /// The relation checked.
    pub relation: Relation,
    /// The outcome.
    pub outcome: Outcome,
    /// E-nodes at the end.
    pub nodes: usize,
    /// Saturation iterations run.
    pub iterations: usize,
    /// Time of the whole check.
    pub time: Duration,
    /// Float constants matched within the tolerance, and the largest
    /// distance used (ulps).
    pub approx_matches: usize,
    /// The largest ulp distance of those matches.
    pub max_ulps: u32,
    /// Ranges the IR records from calibration that the check assumed
    /// (under `calibrated-range` only: one per op holding a record).
    pub ranges_assumed: usize,
}

impl Check {
    /// One line for a report: relation, outcome, e-nodes, time.
    pub fn summary(&self, ulps: u32) -> String {
        let ranges = if self.relation.assumes_recorded_ranges() {
            let plural = if self.ranges_assumed == 1 { "" } else { "s" };
            format!("{} recorded range{plural} assumed; ", self.ranges_assumed)
        } else {
            String::new()
        };
        let relation = if self.relation.tolerates_rounding() {
            format!(
                "{} ({ranges}float constants within {ulps} ulps, two computed ones {}; {} matched, largest {})",
                self.relation,
                ulps.saturating_mul(2),
                self.approx_matches,
                self.max_ulps
            )
        } else {
            self.relation.to_string()
        };
        let outcome = match &self.outcome {
            Outcome::Proven => "proven".to_string(),
            Outcome::Failed(f) => format!("FAILED at result #{} of @{}", f.result, f.function),
            Outcome::Unknown(why) => format!("unknown ({why})"),
        };
        format!(
            "{outcome}: {relation}, {} e-nodes, {} iterations, {:.1} ms",
            self.nodes,
            self.iterations,
            self.time.as_secs_f64() * 1e3
        )
    }
}

/// The rules every registered dialect states, with the dialect's name.
pub fn registered_rules(ctx: &Context) -> Vec<(String, EquivRule)> {
    ctx.dialects()
        .flat_map(|d| d.equivalence_rules().into_iter().map(move |r| (d.name().to_string(), r)))
        .collect()
}

/// A function with a body, by symbol name.
fn functions(ctx: &Context, module: &Module) -> Vec<(String, OpId)> {
    module
        .top_level_ops()
        .filter(|&op| ctx.op_name_str(module.op_name(op)) == "func.func")
        .filter(|&op| module.num_regions(op) == 1 && !module.first_block(module.region(op, 0)).is_none())
        .filter_map(|op| {
            let name = module.op_attr(ctx, op, "sym_name").and_then(|a| ctx.attr_as_str(a))?;
            Some((name.to_string(), op))
        })
        .collect()
}

/// Checks that `after` means what `before` does under `relation`.
pub fn check(
    ctx: &mut Context,
    before: &Module,
    after: &Module,
    relation: Relation,
    limits: &Limits,
) -> Check {
    check_with_memo(ctx, &mut Memo::default(), before, after, relation, limits)
}

/// [`check`], sharing decoded constants and folded values with the other
/// checks of a run through `memo` (which must come from the same `ctx`).
pub fn check_with_memo(
    ctx: &mut Context,
    memo: &mut Memo,
    before: &Module,
    after: &Module,
    relation: Relation,
    limits: &Limits,
) -> Check {
    let start = Instant::now();
    let ended = |outcome: Outcome| Check {
        relation,
        outcome,
        nodes: 0,
        iterations: 0,
        time: start.elapsed(),
        approx_matches: 0,
        max_ulps: 0,
        ranges_assumed: 0,
    };
    let rules_text = registered_rules(ctx);
    let rewrites = match rules::compile(ctx, &rules_text, relation) {
        Ok(r) => r,
        Err(e) => return ended(Outcome::Unknown(e)),
    };
    let pairs: Vec<(String, OpId, OpId)> = {
        let new = functions(ctx, after);
        functions(ctx, before)
            .into_iter()
            .filter_map(|(name, b)| new.iter().find(|(n, _)| *n == name).map(|&(_, a)| (name, b, a)))
            .collect()
    };
    let kernels = KernelRegistry::of_or_standard(ctx).into_owned();
    let mut runner: Runner<Node, EqAnalysis<'_>> =
        Runner::new(EqAnalysis::new(ctx, memo, kernels, relation, limits.ulps));
    let mut added: Vec<(String, Added, Added)> = Vec::new();
    for (name, b, a) in pairs {
        let base = runner.egraph.analysis.arg_types.len() as u32;
        let args: Vec<_> = before.block_args(before.first_block(before.region(b, 0))).to_vec();
        let new_args: Vec<_> = after.block_args(after.first_block(after.region(a, 0))).to_vec();
        let types: Vec<_> = args.iter().map(|&v| before.value_type(v)).collect();
        if types != new_args.iter().map(|&v| after.value_type(v)).collect::<Vec<_>>() {
            let why = format!("the signature of @{name} changed");
            return ended(Outcome::Unknown(why));
        }
        runner.egraph.analysis.arg_types.extend(types);
        let eg = &mut runner.egraph;
        let (old, new) = match (add_function(eg, before, b, base), add_function(eg, after, a, base)) {
            (Ok(old), Ok(new)) => (old, new),
            (Err(e), _) | (_, Err(e)) => return ended(Outcome::Unknown(format!("@{name}: {e}"))),
        };
        if old.results.len() != new.results.len() || old.effects.len() != new.effects.len() {
            let failure = Failure {
                function: name,
                result: old.results.len().min(new.results.len()),
                before_op: None,
                after_op: None,
                rules_fired: Vec::new(),
            };
            return ended(Outcome::Failed(failure));
        }
        added.push((name, old, new));
    }
    runner.egraph.rebuild();
    let roots: Vec<(Id, Id)> = added
        .iter()
        .flat_map(|(_, old, new)| {
            let results = old.results.iter().zip(&new.results).map(|(b, a)| (old.values[b], new.values[a]));
            results.chain(old.effects.iter().copied().zip(new.effects.iter().copied())).collect::<Vec<_>>()
        })
        .collect();
    let proven = |runner: &Runner<Node, EqAnalysis<'_>>| {
        roots.iter().all(|&(b, a)| runner.egraph.find(b) == runner.egraph.find(a))
    };
    let mut iterations = 0;
    if !proven(&runner) {
        let hook_roots = roots.clone();
        runner = runner
            .with_iter_limit(limits.iterations)
            .with_node_limit(limits.nodes)
            .with_time_limit(limits.time)
            .with_hook(move |r| {
                if hook_roots.iter().all(|&(b, a)| r.egraph.find(b) == r.egraph.find(a)) {
                    Err(PROVEN.to_string())
                } else {
                    Ok(())
                }
            })
            .run(&rewrites);
        iterations = runner.iterations.len();
    }
    let outcome = if proven(&runner) {
        Outcome::Proven
    } else {
        match &runner.stop_reason {
            Some(StopReason::Saturated) | None => {
                Outcome::Failed(first_failure(&runner, &added, before, after))
            }
            Some(StopReason::IterationLimit(n)) => Outcome::Unknown(format!("iteration limit {n} reached")),
            Some(StopReason::NodeLimit(n)) => Outcome::Unknown(format!("e-node limit {n} reached")),
            Some(StopReason::TimeLimit(s)) => Outcome::Unknown(format!("time limit {s} s reached")),
            Some(StopReason::Other(why)) => Outcome::Unknown(why.clone()),
        }
    };
    let analysis = &runner.egraph.analysis;
    Check {
        relation,
        outcome,
        nodes: runner.egraph.total_number_of_nodes(),
        iterations,
        time: start.elapsed(),
        approx_matches: analysis.approx_matches,
        max_ulps: analysis.max_ulps_used,
        ranges_assumed: analysis.ranges_assumed,
    }
}

/// The op after the pass whose location is `ob`'s name, or a fused location
/// holding it (a fold names the ops it merged). Only a name identifies an op
/// across the two functions; a file position does not. Where several ops
/// share the name (a lowering into transfers around a compute op), the one
/// with the most operands among those whose value the function before the
/// pass does not have: the op doing the work.
fn at_location(
    eg: &EGraph<Node, EqAnalysis<'_>>,
    before: &Module,
    ob: OpId,
    (old, new): (&Added, &Added),
    after: &Module,
) -> Option<OpId> {
    let ctx = &*eg.analysis.ctx;
    let text = qopt_ir_core::loc_to_string(ctx, before.op_loc(ob));
    let name = text.strip_prefix("loc(").and_then(|t| t.strip_suffix(')'))?;
    if !(name.len() > 2 && name.starts_with('"') && name.ends_with('"')) {
        return None;
    }
    let known: FxHashSet<Id> = old.values.values().map(|&id| eg.find(id)).collect();
    let is_new = |op: OpId| {
        !after.results(op).any(|r| new.values.get(&r).is_some_and(|&id| known.contains(&eg.find(id))))
    };
    let named: Vec<OpId> = new
        .ops
        .iter()
        .copied()
        .filter(|&op| {
            let there = qopt_ir_core::loc_to_string(ctx, after.op_loc(op));
            there == text || (there.starts_with("loc(fused[") && there.contains(name))
        })
        .collect();
    let mut best: Option<OpId> = None;
    for &op in named.iter().filter(|&&op| is_new(op)) {
        if best.is_none_or(|b| after.num_operands(op) > after.num_operands(b)) {
            best = Some(op);
        }
    }
    best.or_else(|| named.first().copied())
}

/// The earliest op (in program order) among those `result` depends on
/// before the pass, with operands, whose value the function after the pass
/// does not have and which no value it does have was computed from: what a
/// pass folded away (a batch norm into its conv) leads to a value both
/// functions have, what it got wrong leads to none.
fn first_lost_value(
    eg: &EGraph<Node, EqAnalysis<'_>>,
    old: &Added,
    new: &Added,
    before: &Module,
    result: ValueId,
) -> Option<OpId> {
    let kept: FxHashSet<Id> = new.values.values().map(|&id| eg.find(id)).collect();
    let is_kept = |v: ValueId| old.values.get(&v).is_some_and(|&id| kept.contains(&eg.find(id)));
    let mut needed: FxHashSet<OpId> = FxHashSet::default();
    let mut stack = vec![result];
    while let Some(v) = stack.pop() {
        let def = before.defining_op(v);
        if def.is_none() || !needed.insert(def) {
            continue;
        }
        stack.extend(before.operands(def));
    }
    // Whether a kept value was computed from the op's results, in reverse
    // program order so that every user is seen before its operands.
    let mut leads_to_kept: FxHashSet<OpId> = FxHashSet::default();
    for &op in old.ops.iter().rev() {
        let leads = before.results(op).any(|r| {
            before.uses(r).any(|u| before.results(u.op).any(is_kept) || leads_to_kept.contains(&u.op))
        });
        if leads {
            leads_to_kept.insert(op);
        }
    }
    old.ops.iter().copied().find(|&op| {
        needed.contains(&op)
            && before.num_operands(op) > 0
            && !before.results(op).any(is_kept)
            && !leads_to_kept.contains(&op)
    })
}

/// The earliest op (in program order) among those `result` depends on after
/// the pass, with operands, whose results are none of the values before the
/// pass while each of its operands is one of them.
fn first_new_value(
    eg: &EGraph<Node, EqAnalysis<'_>>,
    old: &Added,
    new: &Added,
    after: &Module,
    result: ValueId,
) -> Option<OpId> {
    let known: FxHashSet<Id> = old.values.values().map(|&id| eg.find(id)).collect();
    let is_known = |v: ValueId| new.values.get(&v).is_some_and(|&id| known.contains(&eg.find(id)));
    let mut needed: FxHashSet<OpId> = FxHashSet::default();
    let mut stack = vec![result];
    while let Some(v) = stack.pop() {
        let def = after.defining_op(v);
        if def.is_none() || !needed.insert(def) {
            continue;
        }
        stack.extend(after.operands(def));
    }
    new.ops.iter().copied().find(|&op| {
        needed.contains(&op)
            && after.num_operands(op) > 0
            && !after.results(op).any(is_known)
            && after.operands(op).all(|v| {
                let def = after.defining_op(v);
                is_known(v) || (def.is_some() && after.num_operands(def) == 0)
            })
    })
}

/// The hook's stop reason once every result is proven.
const PROVEN: &str = "proven";

/// The first unproven result, and the first place where the two functions
/// differ on the way to it: the earliest op after the pass that computes a
/// value the function before never had from operands it had (constants
/// aside: a wrong constant shows at the op using it), with the op before the
/// pass at the same location. When every value after the pass was there
/// before (results swapped, merged), the walk down from the result instead:
/// while both sides are the same op, step into its first unproven operand
/// pair (iteratively) unless that pair is a function argument.
fn first_failure(
    runner: &Runner<Node, EqAnalysis<'_>>,
    added: &[(String, Added, Added)],
    before: &Module,
    after: &Module,
) -> Failure {
    let eg = &runner.egraph;
    let mut fired: Vec<(String, usize)> = Vec::new();
    for it in &runner.iterations {
        for (name, &n) in &it.applied {
            match fired.iter_mut().find(|(r, _)| r.as_str() == name.as_str()) {
                Some((_, count)) => *count += n,
                None => fired.push((name.to_string(), n)),
            }
        }
    }
    fired.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    for (function, old, new) in added {
        for (index, (&vb, &va)) in old.results.iter().zip(&new.results).enumerate() {
            let same = |b: ValueId, a: ValueId| eg.find(old.values[&b]) == eg.find(new.values[&a]);
            if same(vb, va) {
                continue;
            }
            let lost = first_lost_value(eg, old, new, before, vb);
            // The lost op and its counterpart after the pass; else the first
            // new value after the pass (a lost op without a location, such as
            // a dequantize fuse removed, names nothing a person can find).
            let counterpart = lost.and_then(|ob| at_location(eg, before, ob, (old, new), after));
            let (lost, made) = match counterpart {
                Some(oa) => (lost, Some(oa)),
                None => {
                    let made = first_new_value(eg, old, new, after, va);
                    let at = made.and_then(|oa| {
                        old.ops.iter().copied().find(|&op| before.op_loc(op) == after.op_loc(oa))
                    });
                    (at.or(lost), made)
                }
            };
            if lost.is_some() || made.is_some() {
                let ob = lost;
                return Failure {
                    function: function.clone(),
                    result: index,
                    before_op: ob,
                    after_op: made,
                    rules_fired: fired,
                };
            }
            let (mut ob, mut oa) = (before.defining_op(vb), after.defining_op(va));
            while ob.is_some() && oa.is_some() && before.op_name(ob) == after.op_name(oa) {
                let n = before.num_operands(ob).min(after.num_operands(oa));
                let Some(k) = (0..n).find(|&k| !same(before.operand(ob, k), after.operand(oa, k))) else {
                    break;
                };
                let (nb, na) =
                    (before.defining_op(before.operand(ob, k)), after.defining_op(after.operand(oa, k)));
                if nb.is_none() || na.is_none() {
                    break;
                }
                (ob, oa) = (nb, na);
            }
            let op = |op: OpId| Some(op).filter(|op| op.is_some());
            return Failure {
                function: function.clone(),
                result: index,
                before_op: op(ob),
                after_op: op(oa),
                rules_fired: fired,
            };
        }
    }
    Failure { function: String::new(), result: 0, before_op: None, after_op: None, rules_fired: fired }
}
