//! Feasible target nodes for a group of duplicates (descheduler's `getTargetNodes`).
//!
//! descheduler reduces the duplicate pods to distinct (tolerations, required node affinity,
//! nodeSelector) combinations; for each combination, the nodes whose NoSchedule/NoExecute taints
//! the pod tolerates and whose labels match its nodeSelector + required affinity are collected, and
//! added to the owner's target set only when there are at least two of them. Because pods with
//! equal constraints match the same nodes, the result is the union over all duplicates — this
//! module computes exactly that, caching on interned signatures:
//! - nodes are grouped into *taint classes* (same NoSchedule/NoExecute taints), so a toleration
//!   set is checked once per class, not once per node;
//! - a selector (nodeSelector + required affinity) is evaluated once per node and cached as a
//!   bitset; pods without any selector match every node without evaluation.
//!
//! Owns no eviction logic and no Kubernetes semantics of its own: the predicates come from
//! `rebalancer_policy_sdk::k8s`.

use descheduler_common::signature::push_node_selector_term;
use rebalancer_policy_sdk::k8s::{affinity, taints};
use rebalancer_policy_sdk::model::TaintEffect;
use rebalancer_policy_sdk::model::{ArchivedTaintEffect, ArchivedTolerationOperator};
use rebalancer_policy_sdk::{Cluster, NodeRef, PodRef};

use crate::intern::{FxHashMap, SliceInterner};

/// A fixed-size set of scope positions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BitSet {
    words: Vec<u64>,
}

impl BitSet {
    pub fn new(len: usize) -> Self {
        BitSet {
            words: vec![0; len.div_ceil(64)],
        }
    }

    #[inline]
    pub fn insert(&mut self, i: usize) {
        self.words[i / 64] |= 1 << (i % 64);
    }

    pub fn count(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    pub fn union_with(&mut self, other: &BitSet) {
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a |= b;
        }
    }

    pub fn intersect_with(&mut self, other: &BitSet) {
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a &= b;
        }
    }

    pub fn clear(&mut self) {
        self.words.iter_mut().for_each(|w| *w = 0);
    }

    /// The members, ascending.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.words.iter().enumerate().flat_map(|(i, &word)| {
            let mut w = word;
            std::iter::from_fn(move || {
                if w == 0 {
                    return None;
                }
                let bit = w.trailing_zeros() as usize;
                w &= w - 1;
                Some(i * 64 + bit)
            })
        })
    }
}

/// The (tolerations, selector) constraint of a pod, as two interned signature ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Constraint {
    tolerations: u32,
    selector: u32,
}

/// Cached feasibility over the nodes in scope.
pub struct Feasibility<'a> {
    cluster: Cluster<'a>,
    /// The nodes in scope, by scope position.
    nodes: &'a [u32],
    /// A node (id) of each taint class, to evaluate tolerations against.
    class_repr: Vec<u32>,
    /// Scope positions of each taint class.
    class_members: Vec<BitSet>,
    tolerations: SliceInterner,
    /// Per toleration signature (computed when first seen): the positions of the taint classes
    /// it tolerates.
    tolerated: Vec<BitSet>,
    selectors: SliceInterner,
    /// Per selector signature (computed when first seen): the positions it matches; `None` for a
    /// pod without nodeSelector and required affinity, which matches every node.
    matched: Vec<Option<BitSet>>,
    constraints: FxHashMap<Constraint, (BitSet, usize)>,
    scratch: Vec<u32>,
    union: BitSet,
}

impl std::fmt::Debug for Feasibility<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Feasibility")
            .field("nodes", &self.nodes.len())
            .field("taint_classes", &self.class_repr.len())
            .field("constraints", &self.constraints.len())
            .finish()
    }
}

impl<'a> Feasibility<'a> {
    pub fn new(cluster: Cluster<'a>, nodes: &'a [u32]) -> Self {
        let mut classes = SliceInterner::default();
        let mut class_repr = Vec::new();
        let mut class_members: Vec<BitSet> = Vec::new();
        let mut key = Vec::new();
        for (pos, &node) in nodes.iter().enumerate() {
            key.clear();
            for taint in cluster.node(node).raw.taints.iter() {
                let effect = match taint.effect {
                    ArchivedTaintEffect::NoSchedule => 1,
                    ArchivedTaintEffect::NoExecute => 3,
                    // PreferNoSchedule does not repel: descheduler filters it out here.
                    ArchivedTaintEffect::PreferNoSchedule => continue,
                };
                key.extend([taint.key.to_native(), taint.value.to_native(), effect]);
            }
            let (class, new) = classes.intern(&key);
            if new {
                class_repr.push(node);
                class_members.push(BitSet::new(nodes.len()));
            }
            class_members[class as usize].insert(pos);
        }
        Feasibility {
            cluster,
            nodes,
            class_repr,
            class_members,
            tolerations: SliceInterner::default(),
            tolerated: Vec::new(),
            selectors: SliceInterner::default(),
            matched: Vec::new(),
            constraints: FxHashMap::default(),
            scratch: Vec::new(),
            union: BitSet::new(nodes.len()),
        }
    }

    /// Number of distinct nodes in scope that at least one of `pods` could land on, counting a
    /// constraint's nodes only when it matches two or more (descheduler's `getTargetNodes`).
    pub fn target_node_count(&mut self, pods: impl IntoIterator<Item = u32>) -> usize {
        let mut seen: Vec<Constraint> = Vec::new();
        for pod in pods {
            let constraint = self.constraint_of(self.cluster.pod(pod));
            if !seen.contains(&constraint) {
                seen.push(constraint);
            }
        }
        if seen.len() == 1 {
            let (_, count) = self.constraint_nodes(seen[0]);
            return if count >= 2 { count } else { 0 };
        }
        let mut union = std::mem::replace(&mut self.union, BitSet::new(0));
        union.clear();
        for constraint in seen {
            let (bits, count) = self.constraint_nodes(constraint);
            if count >= 2 {
                union.union_with(bits);
            }
        }
        let count = union.count();
        self.union = union;
        count
    }

    /// The pod's constraint and the nodes in scope it allows (taints tolerated, selector and
    /// required affinity matched), by scope position. Those nodes belong to the owner's target
    /// set only when there are at least two of them.
    pub fn pod_nodes(&mut self, pod: u32) -> (Constraint, &BitSet, usize) {
        let constraint = self.constraint_of(self.cluster.pod(pod));
        let (bits, count) = self.constraint_nodes(constraint);
        (constraint, bits, count)
    }

    fn constraint_of(&mut self, pod: PodRef<'a>) -> Constraint {
        let tolerations = self.toleration_signature(pod);
        let selector = self.selector_signature(pod);
        Constraint {
            tolerations,
            selector,
        }
    }

    fn toleration_signature(&mut self, pod: PodRef<'a>) -> u32 {
        let key = &mut self.scratch;
        key.clear();
        for t in pod.tolerations().iter() {
            let operator = match t.operator {
                ArchivedTolerationOperator::Equal => 0,
                ArchivedTolerationOperator::Exists => 1,
            };
            let effect = match t.effect.as_ref() {
                None => 0,
                Some(ArchivedTaintEffect::NoSchedule) => 1,
                Some(ArchivedTaintEffect::PreferNoSchedule) => 2,
                Some(ArchivedTaintEffect::NoExecute) => 3,
            };
            key.extend([t.key.to_native(), operator, t.value.to_native(), effect]);
        }
        let (id, new) = self.tolerations.intern(key);
        if new {
            let mut tolerated = BitSet::new(self.nodes.len());
            for (class, &repr) in self.class_repr.iter().enumerate() {
                if tolerates_scheduling_taints(pod, self.cluster.node(repr)) {
                    tolerated.union_with(&self.class_members[class]);
                }
            }
            self.tolerated.push(tolerated);
        }
        id
    }

    fn selector_signature(&mut self, pod: PodRef<'a>) -> u32 {
        let key = &mut self.scratch;
        key.clear();
        let node_selector = pod.node_selector();
        key.push(node_selector.len() as u32);
        for kv in node_selector {
            key.extend([kv.key.to_native(), kv.value.to_native()]);
        }
        let selective = match pod.affinity().node_required.as_ref() {
            None => {
                key.push(u32::MAX);
                !node_selector.is_empty()
            }
            Some(terms) => {
                key.push(terms.len() as u32);
                for term in terms.iter() {
                    push_node_selector_term(key, term);
                }
                true
            }
        };
        let (id, new) = self.selectors.intern(key);
        if new {
            if selective {
                let mut matched = BitSet::new(self.nodes.len());
                for (pos, &node) in self.nodes.iter().enumerate() {
                    if matches_node_selection(pod, self.cluster.node(node)) {
                        matched.insert(pos);
                    }
                }
                self.matched.push(Some(matched));
            } else {
                self.matched.push(None);
            }
        }
        id
    }

    fn constraint_nodes(&mut self, constraint: Constraint) -> (&BitSet, usize) {
        let entry = self.constraints.entry(constraint).or_insert_with(|| {
            let mut bits = self.tolerated[constraint.tolerations as usize].clone();
            if let Some(matched) = &self.matched[constraint.selector as usize] {
                bits.intersect_with(matched);
            }
            let count = bits.count();
            (bits, count)
        });
        (&entry.0, entry.1)
    }
}

/// The pod tolerates every NoSchedule/NoExecute taint of the node
/// (`TolerationsTolerateTaintsWithFilter` with descheduler's effect filter).
fn tolerates_scheduling_taints(pod: PodRef<'_>, node: NodeRef<'_>) -> bool {
    taints::tolerates_all(
        pod,
        node,
        &[TaintEffect::NoSchedule, TaintEffect::NoExecute],
    )
}

/// The node matches the pod's nodeSelector and required node affinity
/// (`PodMatchNodeSelector`).
fn matches_node_selection(pod: PodRef<'_>, node: NodeRef<'_>) -> bool {
    affinity::pod_matches_node_selector_and_required_affinity(pod, node)
}
