//! Which ops of one block go together: maximal connected regions of
//! supported ops that never form a cycle with the ops left outside
//! (TVM's AnnotateTarget + MergeCompilerRegions, in one walk).
//!
//! The block's ops are nodes of a data-flow graph (constants are not nodes:
//! they are cloned into every region that uses them and so connect nothing).
//! Each node starts as its own cluster. In program order, every supported op
//! is merged with the cluster of each supported op that feeds it, one edge at
//! a time, when the **contraction is legal**: the only paths from the
//! producer's cluster to the consumer's are direct edges. Another path
//! (through an op outside both, e.g. an unsupported op or a
//! `qnn.stop_fusion`) would make the merged region feed itself, so the
//! clusters stay apart. The cluster graph is therefore acyclic after every
//! step, and so is the module after outlining.
//!
//! The path search is an explicit-stack depth-first search over clusters,
//! bounded by program order: every op on a path into the consumer's cluster
//! comes before the op being merged, so clusters made only of later ops are
//! skipped. Nothing recurses over graph depth.
//!
//! ```text
//! a = supported(x)        a and c are both supported, b is not:
//! b = unsupported(a)      merging {a, c} would give the cycle
//! c = supported(a, b)     {a, c} -> b -> {a, c}, so a and c stay in
//!                         two regions: {a} and {c}
//! ```

use qopt_ir_core::{BlockId, FxHashMap, FxHashSet, Module, OpId};

/// Groups the `supported` ops of `block` into regions: each region's ops in
/// program order, the regions ordered by their first op. `is_node` says which
/// ops take part in the data flow at all (false for constants, whose uses
/// never connect two ops).
pub fn find_regions(
    module: &Module,
    block: BlockId,
    is_node: impl Fn(OpId) -> bool,
    supported: impl Fn(OpId) -> bool,
) -> Vec<Vec<OpId>> {
    let ops: Vec<OpId> = module.block_ops(block).filter(|&op| is_node(op)).collect();
    let index: FxHashMap<OpId, usize> = ops.iter().enumerate().map(|(i, &op)| (op, i)).collect();
    let member: Vec<bool> = ops.iter().map(|&op| supported(op)).collect();
    let mut graph = ClusterGraph::new(ops.len());
    // producers[v]: the nodes feeding node v, in operand order, without repeats.
    let mut producers: Vec<Vec<usize>> = vec![Vec::new(); ops.len()];
    for (v, &op) in ops.iter().enumerate() {
        for operand in module.operands(op) {
            let Some(&u) = index.get(&module.defining_op(operand)) else { continue };
            if !producers[v].contains(&u) {
                producers[v].push(u);
                graph.add_edge(u, v);
            }
        }
    }
    for v in 0..ops.len() {
        if !member[v] {
            continue;
        }
        for &u in &producers[v] {
            if member[u] {
                graph.contract_if_acyclic(u, v, v);
            }
        }
    }
    let mut by_cluster: FxHashMap<usize, usize> = FxHashMap::default();
    let mut regions: Vec<Vec<OpId>> = Vec::new();
    for v in (0..ops.len()).filter(|&v| member[v]) {
        let cluster = graph.find(v);
        let slot = *by_cluster.entry(cluster).or_insert_with(|| {
            regions.push(Vec::new());
            regions.len() - 1
        });
        regions[slot].push(ops[v]);
    }
    regions
}

/// Clusters of nodes (union-find) with the edges between them. Edge sets
/// hold node ids that may have been merged since; they are read through
/// [`find`](Self::find).
struct ClusterGraph {
    parent: Vec<usize>,
    successors: Vec<FxHashSet<usize>>,
    /// The smallest program index in the cluster (at its representative).
    first: Vec<usize>,
}

impl ClusterGraph {
    fn new(nodes: usize) -> ClusterGraph {
        ClusterGraph {
            parent: (0..nodes).collect(),
            successors: vec![FxHashSet::default(); nodes],
            first: (0..nodes).collect(),
        }
    }

    fn add_edge(&mut self, from: usize, to: usize) {
        self.successors[from].insert(to);
    }

    /// The representative of `node`'s cluster (with path halving).
    fn find(&mut self, mut node: usize) -> usize {
        while self.parent[node] != node {
            self.parent[node] = self.parent[self.parent[node]];
            node = self.parent[node];
        }
        node
    }

    /// Merges the clusters of `producer` and `consumer` (a producer feeds
    /// the consumer directly) unless another path joins them, which the
    /// merge would turn into a cycle. `horizon` is the latest program index
    /// in the consumer's cluster.
    fn contract_if_acyclic(&mut self, producer: usize, consumer: usize, horizon: usize) {
        let (from, to) = (self.find(producer), self.find(consumer));
        if from == to || self.has_indirect_path(from, to, horizon) {
            return;
        }
        // Keep the representative with the larger edge set; move the other's edges in.
        let (keep, gone) =
            if self.successors[from].len() >= self.successors[to].len() { (from, to) } else { (to, from) };
        self.parent[gone] = keep;
        self.first[keep] = self.first[keep].min(self.first[gone]);
        let moved = std::mem::take(&mut self.successors[gone]);
        self.successors[keep].extend(moved);
    }

    /// Whether a path leads from cluster `from` to cluster `to` other than a
    /// direct edge. Clusters whose first op comes after `horizon` cannot lie
    /// on such a path (program order is a topological order).
    fn has_indirect_path(&mut self, from: usize, to: usize, horizon: usize) -> bool {
        let mut seen: FxHashSet<usize> = FxHashSet::default();
        let mut stack: Vec<usize> = Vec::new();
        let starts: Vec<usize> = self.successors[from].iter().copied().collect();
        for s in starts {
            let c = self.find(s);
            if c != to && c != from && seen.insert(c) {
                stack.push(c);
            }
        }
        while let Some(cluster) = stack.pop() {
            if self.first[cluster] > horizon {
                continue;
            }
            let next: Vec<usize> = self.successors[cluster].iter().copied().collect();
            for s in next {
                let c = self.find(s);
                if c == to {
                    return true;
                }
                if c != cluster && seen.insert(c) {
                    stack.push(c);
                }
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::ClusterGraph;

    /// The diamond of the module docs as a bare graph: 0 -> 1 -> 2 and
    /// 0 -> 2, with node 1 unsupported.
    #[test]
    fn a_diamond_through_an_outside_node_is_not_contracted() {
        let mut g = ClusterGraph::new(3);
        g.add_edge(0, 1);
        g.add_edge(1, 2);
        g.add_edge(0, 2);
        g.contract_if_acyclic(0, 2, 2);
        assert_ne!(g.find(0), g.find(2), "merging 0 and 2 would close the cycle through 1");
    }

    #[test]
    fn a_chain_contracts_into_one_cluster() {
        let mut g = ClusterGraph::new(3);
        g.add_edge(0, 1);
        g.add_edge(1, 2);
        g.contract_if_acyclic(0, 1, 1);
        g.contract_if_acyclic(1, 2, 2);
        assert_eq!(g.find(0), g.find(2));
    }

    /// Once 0, 1 and 2 are one cluster, the edge 2 -> 4 cannot pull 4 in
    /// while the merged cluster also reaches 4 through the outside node 3,
    /// whichever member's edges lead there.
    #[test]
    fn merged_clusters_keep_the_edges_of_both() {
        let mut g = ClusterGraph::new(5);
        for (a, b) in [(0, 2), (1, 2), (1, 3), (3, 4), (2, 4)] {
            g.add_edge(a, b);
        }
        g.contract_if_acyclic(0, 2, 2);
        g.contract_if_acyclic(1, 2, 2);
        assert_eq!(g.find(0), g.find(1));
        g.contract_if_acyclic(2, 4, 4);
        assert_ne!(g.find(2), g.find(4), "path 1 -> 3 -> 4 besides the direct edge 2 -> 4");
    }
}
