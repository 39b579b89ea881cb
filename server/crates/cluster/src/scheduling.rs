//! Scheduling predicates and scoring: where a pod (or a reservation for its replacement) may go.
//!
//! Owns: the simulated scheduler's filters and score over a snapshot, plus the capacity that
//! reservations hold. The filters are descheduler's `NodeFit` — the very function the evictor's
//! `nodeFit` uses (`rebalancer_policy_sdk::evictor::node_fit_error`: node selector and required
//! node affinity, NoSchedule/NoExecute taints, requests against allocatable minus the non-terminal
//! pods' requests, a free pod slot, cordoned nodes, required pod anti-affinity) — so a policy,
//! reservation placement and the simulator can never disagree on what fits. On top of it: the
//! node must be Ready, and what reservations hold on a node counts as used (resources, pod slots,
//! and the reserved pod's labels for anti-affinity). Score: least allocated (cpu and memory,
//! equal weights, the pod included), ties broken by node name so placement is deterministic.
//! Plain functions over the archive view; no I/O.

use std::collections::BTreeMap;
use std::fmt;

use rebalancer_policy_sdk::evictor::{ClusterIndex, NodeFitError, node_fit_error};
use rebalancer_policy_sdk::k8s::affinity::{
    pod_affinity_term_selects, pod_matches_node_selector_and_required_affinity,
};
use rebalancer_policy_sdk::k8s::selector::label_selector_is_valid;
use rebalancer_policy_sdk::k8s::taints::tolerates_all;
use rebalancer_policy_sdk::model::{StrId, TaintEffect};
use rebalancer_policy_sdk::view::{Cluster, NodeRef, PodRef};

/// Capacity a reservation holds on a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    /// Node id in the snapshot.
    pub node: u32,
    /// `(resource name, milli-amount)`.
    pub requests: Vec<(String, i64)>,
    /// The snapshot pod the reservation was made for: its labels stand in for the future
    /// pod's in anti-affinity checks (`None` once that pod is gone).
    pub template_pod: Option<u32>,
}

/// Why a node was not chosen.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Unfit {
    /// The caller excluded it (the pod's current node).
    Excluded,
    /// The caller pinned another node.
    NotTarget,
    /// The node's `Ready` condition is not `True`.
    NotReady,
    /// Not enough of a resource once reservations are counted.
    Reserved(String),
    /// One of descheduler's `NodeFit` checks.
    Fit(String),
}

impl Unfit {
    fn from_fit(e: NodeFitError) -> Unfit {
        Unfit::Fit(match e {
            NodeFitError::NodeSelectorMismatch => {
                "node(s) didn't match Pod's node affinity/selector".into()
            }
            NodeFitError::UntoleratedTaints => "node(s) had untolerated taint".into(),
            NodeFitError::Insufficient(r) => format!("Insufficient {r}"),
            NodeFitError::Unschedulable => "node(s) were unschedulable".into(),
            NodeFitError::AntiAffinity => "node(s) didn't match pod anti-affinity rules".into(),
        })
    }
}

impl fmt::Display for Unfit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unfit::Excluded => f.write_str("node(s) excluded (the pod's current node)"),
            Unfit::NotTarget => f.write_str("node(s) were not the requested target node"),
            Unfit::NotReady => f.write_str("node(s) were not ready"),
            Unfit::Reserved(r) => write!(f, "Insufficient {r} (held by reservations)"),
            Unfit::Fit(s) => f.write_str(s),
        }
    }
}

/// No node fits: per reason, how many nodes it ruled out (kube-scheduler's message shape).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unschedulable {
    pub nodes: usize,
    pub reasons: BTreeMap<Unfit, usize>,
}

impl fmt::Display for Unschedulable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "0/{} nodes are available", self.nodes)?;
        let mut first = true;
        for (reason, count) in &self.reasons {
            f.write_str(if first { ": " } else { ", " })?;
            first = false;
            write!(f, "{count} {reason}")?;
        }
        f.write_str(".")
    }
}

/// Where a pod may go, beyond the predicates.
#[derive(Debug, Clone, Copy, Default)]
pub struct Constraints<'s> {
    /// Only this node (by name).
    pub target: Option<&'s str>,
    /// Never these nodes (by name).
    pub exclude: &'s [String],
}

/// The predicates and score over one snapshot plus what reservations hold.
pub struct Scheduler<'a> {
    cluster: Cluster<'a>,
    index: &'a ClusterIndex,
    /// Per node: held milli-amounts by resource id.
    held: Vec<Vec<(StrId, i64)>>,
    /// Per node: reservations held (each takes a pod slot).
    held_count: Vec<i64>,
    /// Per node: the reserved pods (for anti-affinity).
    held_pods: Vec<Vec<u32>>,
    /// Per node: its position in name order (the score's tie-break).
    name_rank: Vec<u32>,
}

impl<'a> Scheduler<'a> {
    /// `index` must have been built from `cluster`; `held` are the reservations holding capacity.
    pub fn new(cluster: Cluster<'a>, index: &'a ClusterIndex, held: &[Held]) -> Self {
        let n = cluster.node_count();
        let mut by_name: Vec<u32> = (0..n as u32).collect();
        by_name.sort_unstable_by(|&a, &b| cluster.node(a).name().cmp(cluster.node(b).name()));
        let mut name_rank = vec![0; n];
        for (rank, &node) in by_name.iter().enumerate() {
            name_rank[node as usize] = rank as u32;
        }
        let mut s = Scheduler {
            cluster,
            index,
            held: vec![Vec::new(); n],
            held_count: vec![0; n],
            held_pods: vec![Vec::new(); n],
            name_rank,
        };
        for h in held {
            s.hold(h);
        }
        s
    }

    /// Count `h` as held from now on: later placements see its resources, its pod slot and
    /// its template pod's labels, as they would a reservation's (what-if places a series of
    /// moves this way). A node id outside the snapshot is ignored.
    pub fn hold(&mut self, h: &Held) {
        let node = h.node as usize;
        if node >= self.held_count.len() {
            return;
        }
        self.held_count[node] += 1;
        if let Some(p) = h.template_pod {
            self.held_pods[node].push(p);
        }
        for (name, milli) in &h.requests {
            // A resource the snapshot never names cannot be asked for by anyone else.
            let Some(id) = self.cluster.lookup(name) else {
                continue;
            };
            let sums = &mut self.held[node];
            match sums.iter_mut().find(|(r, _)| *r == id) {
                Some((_, total)) => *total = total.saturating_add(*milli),
                None => sums.push((id, *milli)),
            }
        }
    }

    /// Milli-amount of `resource` held by reservations on `node`.
    pub fn held_on(&self, node: u32, resource: &str) -> i64 {
        let Some(id) = self.cluster.lookup(resource) else {
            return 0;
        };
        self.held_of(node, id)
    }

    /// Reservations holding capacity on `node`.
    pub fn held_count(&self, node: u32) -> i64 {
        self.held_count.get(node as usize).copied().unwrap_or(0)
    }

    fn held_of(&self, node: u32, id: StrId) -> i64 {
        self.held
            .get(node as usize)
            .and_then(|sums| sums.iter().find(|(r, _)| *r == id))
            .map_or(0, |&(_, m)| m)
    }

    /// What a node already has in use of `resource` for `pod`: the non-terminal pods' requests
    /// plus the reservations', minus the pod's own when it is bound there (its replacement takes
    /// its place).
    fn used(&self, pod: PodRef<'_>, node: NodeRef<'_>, id: StrId) -> i64 {
        let own = if pod.node() == Some(node.id) && !pod.is_terminal() {
            pod.request(id)
        } else {
            0
        };
        self.index
            .requested(node.id, id)
            .saturating_sub(own)
            .saturating_add(self.held_of(node.id, id))
    }

    /// Why `pod` (or a copy of it) cannot go to `node`, `None` when it can.
    pub fn unfit(&self, pod: PodRef<'_>, node: NodeRef<'_>) -> Option<Unfit> {
        if !node.is_ready() {
            return Some(Unfit::NotReady);
        }
        if let Some(e) = node_fit_error(self.index, pod, node) {
            return Some(Unfit::from_fit(e));
        }
        // NodeFit skips the resource checks on the pod's own node (the pod is counted there);
        // a copy of the pod must still fit once the original is gone, and reservations count.
        let held = self.held_count(node.id);
        let short = |r: String| {
            if held > 0 {
                Unfit::Reserved(r)
            } else {
                Unfit::from_fit(NodeFitError::Insufficient(r))
            }
        };
        for q in pod.raw.requests.iter() {
            let (id, want) = (q.resource.to_native(), q.milli.to_native());
            if want
                > node
                    .allocatable(id)
                    .saturating_sub(self.used(pod, node, id))
            {
                return Some(short(self.cluster.str(id).to_owned()));
            }
        }
        if let Some(pods) = self.index.ids().pods {
            let own = i64::from(pod.node() == Some(node.id) && !pod.is_terminal());
            let slots = i64::from(self.index.active_pod_count(node.id)) - own + held;
            if node.allocatable(pods) - slots * 1000 < 1000 {
                return Some(short("pods".into()));
            }
        }
        if held == 0 {
            return None;
        }
        let reserved = &self.held_pods[node.id as usize];
        let terms = &pod.affinity().pod_anti_affinity_required;
        let conflict = terms.iter().any(|term| {
            term.label_selector
                .as_ref()
                .is_some_and(|s| !label_selector_is_valid(s))
                || (node.label_id(term.topology_key.to_native()).is_some()
                    && reserved.iter().any(|&other| {
                        other != pod.id
                            && pod_affinity_term_selects(pod, term, self.cluster.pod(other))
                    }))
        });
        conflict.then(|| Unfit::Fit("node(s) didn't match pod anti-affinity rules".into()))
    }

    /// Least-allocated score (0–100): the mean over cpu and memory of the share of allocatable
    /// left once the pod is placed.
    pub fn score(&self, pod: PodRef<'_>, node: NodeRef<'_>) -> i64 {
        let ids = self.index.ids();
        let mut total = 0;
        for id in [ids.cpu, ids.memory] {
            let Some(id) = id else { continue };
            let alloc = node.allocatable(id);
            if alloc <= 0 {
                continue;
            }
            let after = self.used(pod, node, id).saturating_add(pod.request(id));
            let free = alloc.saturating_sub(after).max(0);
            // 0 ≤ free ≤ alloc, so the share is 0–100; i128 only when ×100 overflows (a
            // 128-bit division is slow and this runs for every node of every placement).
            total += match free.checked_mul(100) {
                Some(scaled) => scaled / alloc,
                None => i64::try_from(i128::from(free) * 100 / i128::from(alloc)).unwrap_or(0),
            };
        }
        total / 2
    }

    /// Whether a copy of `pod` is short of a resource or a pod slot on `node` once what is
    /// held there counts: the checks [`Scheduler::unfit`] ends with, without building a
    /// reason. When true, `unfit` is `Some` (maybe with an earlier reason).
    fn short(&self, pod: PodRef<'_>, node: NodeRef<'_>) -> bool {
        let own = pod.node() == Some(node.id) && !pod.is_terminal();
        let short_of = pod.raw.requests.iter().any(|q| {
            let id = q.resource.to_native();
            q.milli.to_native()
                > node
                    .allocatable(id)
                    .saturating_sub(self.used(pod, node, id))
        });
        short_of
            || self.index.ids().pods.is_some_and(|pods| {
                let slots = i64::from(self.index.active_pod_count(node.id)) - i64::from(own)
                    + self.held_count(node.id);
                node.allocatable(pods) - slots * 1000 < 1000
            })
    }

    fn excluded(node: NodeRef<'_>, constraints: &Constraints<'_>) -> Option<Unfit> {
        if constraints.target.is_some_and(|t| t != node.name()) {
            Some(Unfit::NotTarget)
        } else if constraints.exclude.iter().any(|e| e == node.name()) {
            Some(Unfit::Excluded)
        } else {
            None
        }
    }

    /// The best node for a copy of `pod`: feasible, highest score, then lowest name.
    ///
    /// The full predicates are the costly part (anti-affinity looks at every pod of the
    /// node), so they run last: the nodes that pass the cheap checks (not excluded, ready, not
    /// cordoned, room, taints, node selector and affinity) are ranked by score and name, and
    /// the first of them [`Scheduler::unfit`] accepts is the answer (most often the first). Only
    /// when no node fits are the reasons of every node collected, for the message.
    pub fn place(
        &self,
        pod: PodRef<'_>,
        constraints: Constraints<'_>,
    ) -> Result<u32, Unschedulable> {
        // The constraints as interned names (a name the snapshot never interned is no node's).
        let target = constraints.target.map(|t| self.cluster.lookup(t));
        let exclude: Vec<StrId> = constraints
            .exclude
            .iter()
            .filter_map(|e| self.cluster.lookup(e))
            .collect();
        let allowed = |node: NodeRef<'_>| {
            let name = node.name_id();
            target.is_none_or(|t| t == Some(name)) && !exclude.contains(&name)
        };
        let mut ranked: Vec<(i64, u32, u32)> = self
            .cluster
            .nodes()
            // Checks `unfit` makes too, cheapest first; anti-affinity (the costly one) waits.
            .filter(|&node| {
                allowed(node)
                    && node.is_ready()
                    && !node.is_unschedulable()
                    && !self.short(pod, node)
                    && tolerates_all(
                        pod,
                        node,
                        &[TaintEffect::NoSchedule, TaintEffect::NoExecute],
                    )
                    && pod_matches_node_selector_and_required_affinity(pod, node)
            })
            .map(|node| {
                (
                    self.score(pod, node),
                    self.name_rank[node.id as usize],
                    node.id,
                )
            })
            .collect();
        let order = |a: &(i64, u32, u32), b: &(i64, u32, u32)| b.0.cmp(&a.0).then(a.1.cmp(&b.1));
        let fits = |node: u32| self.unfit(pod, self.cluster.node(node)).is_none();
        // Most often the best-ranked node fits: no need to sort the others.
        if let Some(&(_, _, node)) = ranked.iter().min_by(|a, b| order(a, b))
            && fits(node)
        {
            return Ok(node);
        }
        ranked.sort_unstable_by(order);
        if let Some(&(_, _, node)) = ranked.iter().skip(1).find(|&&(_, _, node)| fits(node)) {
            return Ok(node);
        }
        let mut reasons: BTreeMap<Unfit, usize> = BTreeMap::new();
        for node in self.cluster.nodes() {
            if let Some(reason) =
                Self::excluded(node, &constraints).or_else(|| self.unfit(pod, node))
            {
                *reasons.entry(reason).or_default() += 1;
            }
        }
        Err(Unschedulable {
            nodes: self.cluster.node_count(),
            reasons,
        })
    }
}

#[cfg(test)]
mod tests;
