//! The timing tree behind `--timing`: named wall-clock durations nested like the
//! work they measure (driver phases, the pipeline, each pass execution, the
//! verification after it), rendered in the style of MLIR's execution time report.
//!
//! Invariants:
//! - a node's duration includes its children's (a pass's line includes the
//!   verification listed under it); the report's total is the sum of the top-level
//!   nodes;
//! - nodes added with [`TimingTree::add_phase`] or [`TimingTree::add_child`] are
//!   merged into a sibling of the same name (one `parse` line for all cases of a
//!   split input), children merged position by position; the pass manager builds
//!   its nodes directly, so a pass that runs twice gets two lines.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

/// One measured piece of work.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimingNode {
    /// What was measured: a phase (`parse`), `pipeline`, a pass or named-pipeline
    /// name, `verify`.
    pub name: String,
    /// Wall time, including the children's.
    pub wall: Duration,
    /// The parts, in the order they ran.
    pub children: Vec<TimingNode>,
}

impl TimingNode {
    /// A leaf node.
    pub fn new(name: impl Into<String>, wall: Duration) -> TimingNode {
        TimingNode { name: name.into(), wall, children: Vec::new() }
    }

    /// Adds `other`'s time to this node and merges its children position by
    /// position (same position and name: merged; otherwise appended).
    fn absorb(&mut self, other: TimingNode) {
        self.wall += other.wall;
        for (index, child) in other.children.into_iter().enumerate() {
            match self.children.get_mut(index) {
                Some(mine) if mine.name == child.name => mine.absorb(child),
                _ => self.children.push(child),
            }
        }
    }
}

/// A forest of [`TimingNode`]s plus a stack of nodes still being measured.
///
/// ```
/// # use qopt_ir_core::pass::TimingTree;
/// # use std::time::Duration;
/// let mut timing = TimingTree::new();
/// timing.add_phase("parse", Duration::from_millis(1));
/// let sum = timing.time("pipeline", |timing| {
///     timing.add_phase("canonicalize", Duration::from_millis(5));
///     2 + 2
/// });
/// assert_eq!(sum, 4);
/// assert_eq!(timing.nodes()[1].children[0].name, "canonicalize");
/// ```
#[derive(Clone, Debug, Default)]
pub struct TimingTree {
    roots: Vec<TimingNode>,
    open: Vec<(TimingNode, Instant)>,
}

impl TimingTree {
    /// An empty tree.
    pub fn new() -> TimingTree {
        TimingTree::default()
    }

    /// True if nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.roots.is_empty() && self.open.is_empty()
    }

    /// The finished top-level nodes.
    pub fn nodes(&self) -> &[TimingNode] {
        &self.roots
    }

    /// Consumes the tree, returning its finished top-level nodes.
    pub fn into_nodes(self) -> Vec<TimingNode> {
        self.roots
    }

    /// Records a finished phase under the innermost open node (or at the top),
    /// adding to a sibling of the same name if there is one.
    pub fn add_phase(&mut self, name: &str, wall: Duration) {
        self.add_node(TimingNode::new(name, wall));
    }

    /// Grafts the top-level nodes of `tree` (e.g. a pipeline run's
    /// [`RunReport::timing`](crate::pass::RunReport::timing)) under the innermost
    /// open node, merging into siblings of the same name. Nodes still open in
    /// `tree` are closed first.
    pub fn add_child(&mut self, mut tree: TimingTree) {
        while tree.pop().is_some() {}
        for node in tree.roots {
            self.add_node(node);
        }
    }

    /// Records `node` as is under the innermost open node (or at the top), without
    /// merging it into a sibling.
    pub fn push_node(&mut self, node: TimingNode) {
        match self.open.last_mut() {
            Some((parent, _)) => parent.children.push(node),
            None => self.roots.push(node),
        }
    }

    fn add_node(&mut self, node: TimingNode) {
        let siblings = match self.open.last_mut() {
            Some((parent, _)) => &mut parent.children,
            None => &mut self.roots,
        };
        match siblings.iter_mut().find(|sibling| sibling.name == node.name) {
            Some(sibling) => sibling.absorb(node),
            None => siblings.push(node),
        }
    }

    /// Starts measuring `name`; what is recorded until the matching [`pop`](Self::pop)
    /// nests under it.
    pub fn push(&mut self, name: &str) {
        self.open.push((TimingNode::new(name, Duration::ZERO), Instant::now()));
    }

    /// Stops the innermost open measurement, records it (merging like
    /// [`add_phase`](Self::add_phase)) and returns its duration; `None` if nothing
    /// is open.
    pub fn pop(&mut self) -> Option<Duration> {
        let (mut node, start) = self.open.pop()?;
        node.wall = start.elapsed();
        let wall = node.wall;
        self.add_node(node);
        Some(wall)
    }

    /// Runs `work`, recording its duration as `name`; what `work` records in the
    /// tree it is given nests under `name`.
    pub fn time<R>(&mut self, name: &str, work: impl FnOnce(&mut TimingTree) -> R) -> R {
        self.push(name);
        let result = work(self);
        self.pop();
        result
    }

    /// The sum of the top-level durations.
    pub fn total(&self) -> Duration {
        self.roots.iter().map(|node| node.wall).sum()
    }

    /// The execution time report:
    ///
    /// ```text
    /// ===-------------------------------------------------------------------------===
    ///                           ... Execution time report ...
    /// ===-------------------------------------------------------------------------===
    ///   Total Execution Time: 0.0123 seconds
    ///
    ///   ----Wall Time----  ----Name----
    ///     0.0010 (  8.1%)  parse
    ///     0.0100 ( 81.3%)  pipeline
    ///     0.0050 ( 40.6%)    canonicalize
    ///     0.0012 (  9.8%)      verify
    /// ```
    pub fn render(&self) -> String {
        self.render_with(|wall| wall)
    }

    /// [`render`](Self::render) with every duration passed through `wall` first, so
    /// that tests can print a deterministic report (`|_| Duration::ZERO`). With a
    /// zero total, every percentage is 0.0.
    pub fn render_with(&self, wall: impl Fn(Duration) -> Duration) -> String {
        let rule = "===-------------------------------------------------------------------------===";
        let total: Duration = self.roots.iter().map(|node| wall(node.wall)).sum();
        let mut out = String::new();
        out.push_str(rule);
        out.push('\n');
        out.push_str("                          ... Execution time report ...\n");
        out.push_str(rule);
        out.push('\n');
        let _ = writeln!(out, "  Total Execution Time: {:.4} seconds", total.as_secs_f64());
        out.push('\n');
        out.push_str("  ----Wall Time----  ----Name----\n");
        let mut stack: Vec<(&TimingNode, usize)> = self.roots.iter().rev().map(|node| (node, 0)).collect();
        while let Some((node, depth)) = stack.pop() {
            let seconds = wall(node.wall).as_secs_f64();
            let percent = if total.is_zero() { 0.0 } else { 100.0 * seconds / total.as_secs_f64() };
            let _ = writeln!(out, "  {seconds:>8.4} ({percent:>5.1}%)  {}{}", "  ".repeat(depth), node.name);
            stack.extend(node.children.iter().rev().map(|child| (child, depth + 1)));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn node(name: &str, wall: u64, children: Vec<TimingNode>) -> TimingNode {
        TimingNode { name: name.to_string(), wall: ms(wall), children }
    }

    #[test]
    fn renders_the_report_with_percentages_and_indentation() {
        let mut timing = TimingTree::new();
        timing.add_phase("parse", ms(10));
        timing.push_node(node(
            "pipeline",
            80,
            vec![node("canonicalize", 50, vec![node("verify", 10, vec![])]), node("dce", 30, vec![])],
        ));
        timing.add_phase("print", ms(10));
        assert_eq!(
            timing.render(),
            "===-------------------------------------------------------------------------===\n\
             \x20                         ... Execution time report ...\n\
             ===-------------------------------------------------------------------------===\n\
             \x20 Total Execution Time: 0.1000 seconds\n\
             \n\
             \x20 ----Wall Time----  ----Name----\n\
             \x20   0.0100 ( 10.0%)  parse\n\
             \x20   0.0800 ( 80.0%)  pipeline\n\
             \x20   0.0500 ( 50.0%)    canonicalize\n\
             \x20   0.0100 ( 10.0%)      verify\n\
             \x20   0.0300 ( 30.0%)    dce\n\
             \x20   0.0100 ( 10.0%)  print\n"
        );
    }

    #[test]
    fn zero_durations_render_deterministically() {
        let mut timing = TimingTree::new();
        timing.time("pipeline", |timing| timing.add_phase("a", ms(3)));
        let report = timing.render_with(|_| Duration::ZERO);
        assert!(report.contains("Total Execution Time: 0.0000 seconds"), "{report}");
        assert!(report.ends_with("    0.0000 (  0.0%)  pipeline\n    0.0000 (  0.0%)    a\n"), "{report}");
    }

    #[test]
    fn repeated_phases_and_grafted_trees_merge_by_name() {
        let mut timing = TimingTree::new();
        timing.add_phase("parse", ms(1));
        timing.add_phase("parse", ms(2));
        for _ in 0..2 {
            let mut run = TimingTree::new();
            run.push_node(node("pipeline", 5, vec![node("a", 2, vec![]), node("a", 3, vec![])]));
            timing.add_child(run);
        }
        assert_eq!(
            timing.nodes(),
            &[
                node("parse", 3, vec![]),
                node("pipeline", 10, vec![node("a", 4, vec![]), node("a", 6, vec![])]),
            ]
        );
        assert_eq!(timing.total(), ms(13));
    }

    #[test]
    fn push_and_pop_nest_and_unbalanced_pop_is_none() {
        let mut timing = TimingTree::new();
        timing.push("outer");
        timing.push("inner");
        timing.add_phase("leaf", ms(1));
        assert!(timing.pop().is_some());
        assert!(timing.pop().is_some());
        assert_eq!(timing.pop(), None);
        let outer = &timing.nodes()[0];
        assert_eq!(outer.name, "outer");
        assert_eq!(outer.children[0].name, "inner");
        assert_eq!(outer.children[0].children[0], node("leaf", 1, vec![]));
        assert!(outer.wall >= outer.children[0].wall);
    }
}
