//! The Deschedule pass of RemovePodsViolatingInterPodAntiAffinity (descheduler v0.36
//! `pod_antiaffinity.go` and `utils.CheckPodsWithAntiAffinityExist`), over the zero-copy snapshot.
//!
//! 1. The working set: the non-terminal pods on the nodes in scope that pass the plugin's
//!    `namespaces` and `labelSelector` (not the evictor's Filter: unevictable pods still count as
//!    existing pods, terminating ones included). The working set is both the candidates and the
//!    pods that can cause a violation.
//! 2. Nodes in scope order; on each, its working-set pods by priority, QoS and
//!    prefer-no-eviction. A pod violates its required anti-affinity when one of its
//!    `requiredDuringScheduling…` terms selects another working-set pod (not the same name) in
//!    one of the term's namespaces (the pod's own when the term lists none; `namespaceSelector`
//!    is not supported) whose node is in the same topology domain: the same node, or both nodes
//!    carrying the term's `topologyKey` with the same value. A term with an invalid label
//!    selector ends the check with "no violation", as in descheduler.
//! 3. A violator that passes Filter and PreEvictionFilter is proposed; once accepted it leaves the
//!    working set, so its counterpart is no longer a violator. A node-limit refusal moves on to
//!    the next node, a total-limit refusal ends the pass, any other refusal moves on to the next
//!    pod.
//! 4. With `includePreferredAntiAffinity` (off by default), a pod without a required violation
//!    whose `preferredDuringScheduling…` terms select a pod in its domain is a violator too, but
//!    only when another node in scope passes nodeFit and is clean for every preferred term; an
//!    accepted proposal then counts the pod as placed on that node for the preferred checks of
//!    the rest of the pass.
//!
//! Matching uses a per-namespace label index of the working set, so a term costs the pods its
//! `matchLabels` select, not the whole namespace.

use std::collections::{HashMap as StdHashMap, HashSet as StdHashSet};
use std::hash::{BuildHasherDefault, DefaultHasher};

use rebalancer_policy_sdk::k8s::affinity::same_topology_domain;
use rebalancer_policy_sdk::k8s::selector::{label_selector_is_valid, label_selector_matches};
use rebalancer_policy_sdk::model::{ArchivedPodAffinityTerm, StrId};
use rebalancer_policy_sdk::{Cluster, Context, Details, NodeRef, PodRef, Refusal};

pub use descheduler_common::order::PREFER_NO_EVICTION;
use descheduler_common::order::eviction_order;
use descheduler_common::scope::PodScope;

use crate::args::RemovePodsViolatingInterPodAntiAffinityArgs;

/// std's maps with a fixed-key hasher: the default `RandomState` seeds itself from the host's
/// randomness, which the policy sandbox does not provide (no `wasi:random` import).
type HashMap<K, V> = StdHashMap<K, V, BuildHasherDefault<DefaultHasher>>;
type HashSet<T> = StdHashSet<T, BuildHasherDefault<DefaultHasher>>;

/// nodeFit candidates are sent to the host in chunks of this size; the search stops at the first
/// chunk with a fitting node.
const FIT_CHUNK: usize = 64;

/// Summary of one pass, for logs and tests.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub nodes: usize,
    /// Working-set pods with anti-affinity terms the pass looks at.
    pub with_terms: usize,
    /// Pods found violating (before the evictor's filters).
    pub violators: usize,
    pub proposed: usize,
    pub refused: usize,
    /// Why the pass stopped early, if it did.
    pub stopped: Option<String>,
}

/// Membership of a pod in the working set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Member {
    /// Not considered (other node, terminal, filtered out by namespace or label selector).
    Out,
    Present,
    /// Proposed by this pass: no longer an existing pod.
    Evicted,
}

/// The working-set pods of one namespace.
#[derive(Debug, Default)]
struct Namespace {
    pods: Vec<u32>,
    /// `(label key, value)` → pods carrying it, in snapshot order.
    by_label: HashMap<(StrId, StrId), Vec<u32>>,
}

/// The working set and its indexes.
struct WorkingSet<'a> {
    cluster: Cluster<'a>,
    member: Vec<Member>,
    namespaces: HashMap<StrId, Namespace>,
    /// Pods evicted for their preferred terms, counted on the node they would move to (only by
    /// the preferred checks).
    placed: Vec<(u32, u32)>,
}

/// Another pod that makes a pod a violator.
#[derive(Debug, Clone, Copy)]
struct Culprit {
    pod: u32,
    node: u32,
}

impl<'a> WorkingSet<'a> {
    /// The pods of `namespace` a term's selector may select: the smallest `matchLabels` bucket,
    /// or every pod of the namespace.
    fn candidates(&self, namespace: StrId, term: &ArchivedPodAffinityTerm) -> &[u32] {
        let Some(ns) = self.namespaces.get(&namespace) else {
            return &[];
        };
        let Some(selector) = term.label_selector.as_ref() else {
            return &[];
        };
        let mut best: Option<&[u32]> = None;
        for kv in selector.match_labels.iter() {
            let bucket = ns
                .by_label
                .get(&(kv.key.to_native(), kv.value.to_native()))
                .map_or(&[][..], Vec::as_slice);
            if best.is_none_or(|b| bucket.len() < b.len()) {
                best = Some(bucket);
            }
        }
        best.unwrap_or(&ns.pods)
    }

    /// The term's namespaces, without duplicates.
    fn term_namespaces(owner: PodRef<'_>, term: &ArchivedPodAffinityTerm) -> Vec<StrId> {
        if term.namespaces.is_empty() {
            return vec![owner.namespace_id()];
        }
        let mut out: Vec<StrId> = Vec::with_capacity(term.namespaces.len());
        for ns in term.namespaces.iter() {
            let ns = ns.to_native();
            if !out.contains(&ns) {
                out.push(ns);
            }
        }
        out
    }

    /// Whether `other` is a pod the term of `owner` selects (another name, matching labels).
    fn selects(owner: PodRef<'_>, term: &ArchivedPodAffinityTerm, other: PodRef<'_>) -> bool {
        other.name() != owner.name()
            && term
                .label_selector
                .as_ref()
                .is_some_and(|s| label_selector_matches(s, &other.raw.labels))
    }

    /// The first present pod the term selects in the topology domain of `node`.
    fn violation(
        &self,
        owner: PodRef<'_>,
        term: &ArchivedPodAffinityTerm,
        node: NodeRef<'_>,
    ) -> Option<Culprit> {
        let key = term.topology_key.to_native();
        for ns in Self::term_namespaces(owner, term) {
            for &id in self.candidates(ns, term) {
                if self.member[id as usize] != Member::Present {
                    continue;
                }
                let other = self.cluster.pod(id);
                let Some(other_node) = other.node() else {
                    continue;
                };
                if Self::selects(owner, term, other)
                    && same_topology_domain(node, self.cluster.node(other_node), key)
                {
                    return Some(Culprit {
                        pod: id,
                        node: other_node,
                    });
                }
            }
        }
        None
    }

    /// Like [`WorkingSet::violation`], also counting the pods placed by preferred evictions.
    fn preferred_violation(
        &self,
        owner: PodRef<'_>,
        term: &ArchivedPodAffinityTerm,
        node: NodeRef<'_>,
    ) -> Option<Culprit> {
        if let Some(c) = self.violation(owner, term, node) {
            return Some(c);
        }
        let key = term.topology_key.to_native();
        let namespaces = Self::term_namespaces(owner, term);
        self.placed
            .iter()
            .find(|&&(pod, target)| {
                let other = self.cluster.pod(pod);
                namespaces.contains(&other.namespace_id())
                    && Self::selects(owner, term, other)
                    && same_topology_domain(node, self.cluster.node(target), key)
            })
            .map(|&(pod, target)| Culprit { pod, node: target })
    }

    /// The nodes hosting a pod the term selects (present or placed).
    fn nodes_selected_by(&self, owner: PodRef<'_>, term: &ArchivedPodAffinityTerm) -> Vec<u32> {
        let mut nodes = Vec::new();
        for ns in Self::term_namespaces(owner, term) {
            for &id in self.candidates(ns, term) {
                let other = self.cluster.pod(id);
                if self.member[id as usize] == Member::Present
                    && Self::selects(owner, term, other)
                    && let Some(n) = other.node()
                {
                    nodes.push(n);
                }
            }
        }
        let namespaces = Self::term_namespaces(owner, term);
        for &(pod, target) in &self.placed {
            let other = self.cluster.pod(pod);
            if namespaces.contains(&other.namespace_id()) && Self::selects(owner, term, other) {
                nodes.push(target);
            }
        }
        nodes
    }
}

/// Why a pod is proposed.
enum Violation {
    Required {
        term: usize,
        culprit: Culprit,
    },
    Preferred {
        term: usize,
        culprit: Culprit,
        target: u32,
    },
}

pub fn deschedule(
    ctx: &mut Context<'_>,
    args: &RemovePodsViolatingInterPodAntiAffinityArgs,
) -> Result<Outcome, String> {
    let mut details = Details::default();
    let outcome = propose(ctx, args, &mut details);
    details.finish(ctx);
    outcome
}

fn propose(
    ctx: &mut Context<'_>,
    args: &RemovePodsViolatingInterPodAntiAffinityArgs,
    details: &mut Details,
) -> Result<Outcome, String> {
    let cluster = ctx.cluster;
    let scope = ctx.nodes();
    let mut outcome = Outcome {
        nodes: scope.len(),
        ..Outcome::default()
    };
    if let Some(&bad) = scope.iter().find(|&&n| n as usize >= cluster.node_count()) {
        return Err(format!(
            "host listed node {bad}, which is not in the snapshot"
        ));
    }
    let preferred = args.include_preferred_anti_affinity;
    let has_terms = |pod: PodRef<'_>| {
        !pod.affinity().pod_anti_affinity_required.is_empty()
            || (preferred && !pod.affinity().pod_anti_affinity_preferred.is_empty())
    };

    let filter = PodScope::try_new(
        cluster,
        args.namespaces.as_ref(),
        args.label_selector.as_ref(),
    )?;
    let mut in_scope = vec![false; cluster.node_count()];
    for &n in &scope {
        in_scope[n as usize] = true;
    }
    let mut set = WorkingSet {
        cluster,
        member: vec![Member::Out; cluster.pod_count()],
        namespaces: HashMap::default(),
        placed: Vec::new(),
    };
    // Pass 1, in snapshot order: membership, the nodes hosting a pod with terms and the
    // namespaces those terms look at.
    let mut present: Vec<u32> = Vec::new();
    let mut node_has_terms = vec![false; cluster.node_count()];
    let mut referenced: HashSet<StrId> = HashSet::default();
    for pod in cluster.pods() {
        let Some(node) = pod.node().filter(|&n| in_scope[n as usize]) else {
            continue;
        };
        if pod.is_terminal() || !filter.admits(pod) {
            continue;
        }
        set.member[pod.id as usize] = Member::Present;
        present.push(pod.id);
        if has_terms(pod) {
            outcome.with_terms += 1;
            node_has_terms[node as usize] = true;
            let affinity = pod.affinity();
            let preferred_terms = affinity
                .pod_anti_affinity_preferred
                .iter()
                .map(|w| &w.term)
                .filter(|_| preferred);
            for term in affinity
                .pod_anti_affinity_required
                .iter()
                .chain(preferred_terms)
            {
                referenced.extend(WorkingSet::term_namespaces(pod, term));
            }
        }
    }
    if outcome.with_terms == 0 {
        return Ok(outcome);
    }
    // Pass 2: the label index of the namespaces the terms look at, and the pods of the nodes
    // that host a pod with terms (the only nodes with possible violators).
    let mut by_node: HashMap<u32, Vec<u32>> = HashMap::default();
    for &id in &present {
        let pod = cluster.pod(id);
        let ns = pod.namespace_id();
        if referenced.contains(&ns) {
            let ns = set.namespaces.entry(ns).or_default();
            ns.pods.push(id);
            for kv in pod.raw.labels.iter() {
                ns.by_label
                    .entry((kv.key.to_native(), kv.value.to_native()))
                    .or_default()
                    .push(id);
            }
        }
        if let Some(node) = pod.node().filter(|&n| node_has_terms[n as usize]) {
            by_node.entry(node).or_default().push(id);
        }
    }

    let prefer_no_eviction = cluster.lookup(PREFER_NO_EVICTION);
    'nodes: for &node_id in &scope {
        if !node_has_terms[node_id as usize] {
            continue;
        }
        let node = cluster.node(node_id);
        let mut pods = by_node.remove(&node_id).unwrap_or_default();
        pods.retain(|&p| set.member[p as usize] == Member::Present);
        pods.sort_by_cached_key(|&p| eviction_order(cluster.pod(p), prefer_no_eviction));
        for pod_id in pods {
            let pod = cluster.pod(pod_id);
            if !has_terms(pod) {
                continue;
            }
            let violation = match required_violation(&set, pod, node) {
                Some((term, culprit)) => Violation::Required { term, culprit },
                None if preferred => match preferred_violation(&set, pod, node) {
                    Some((term, culprit)) => {
                        outcome.violators += 1;
                        if !ctx.is_evictable(pod_id) || !ctx.passes_pre_eviction_filter(pod_id) {
                            continue;
                        }
                        match better_node(ctx, &set, pod, &scope) {
                            Some(target) => Violation::Preferred {
                                term,
                                culprit,
                                target,
                            },
                            None => {
                                details.log(ctx, || {
                                    format!(
                                        "{}/{} violates its preferred pod anti-affinity, but no \
                                         other node fits it and satisfies every preferred term",
                                        pod.namespace(),
                                        pod.name()
                                    )
                                });
                                continue;
                            }
                        }
                    }
                    None => continue,
                },
                None => continue,
            };
            if matches!(violation, Violation::Required { .. }) {
                outcome.violators += 1;
                if !ctx.is_evictable(pod_id) || !ctx.passes_pre_eviction_filter(pod_id) {
                    continue;
                }
            }
            let reason = describe(cluster, pod, node, &violation);
            match ctx.propose_eviction(pod_id, &reason) {
                Ok(()) => {
                    outcome.proposed += 1;
                    set.member[pod_id as usize] = Member::Evicted;
                    if let Violation::Preferred { target, .. } = violation {
                        set.placed.push((pod_id, target));
                    }
                }
                Err(Refusal::NodeLimit) => {
                    outcome.refused += 1;
                    continue 'nodes;
                }
                Err(Refusal::TotalLimit) => {
                    outcome.refused += 1;
                    outcome.stopped = Some("the run's total eviction limit was reached".into());
                    return Ok(outcome);
                }
                Err(other) => {
                    outcome.refused += 1;
                    details.log(ctx, || {
                        format!(
                            "eviction of {}/{} refused: {other}",
                            pod.namespace(),
                            pod.name()
                        )
                    });
                }
            }
        }
    }
    Ok(outcome)
}

/// `CheckPodsWithAntiAffinityExist`: the first required term (index) that selects a present pod
/// in the pod's domain. A term with an invalid selector ends the check with no violation.
fn required_violation(
    set: &WorkingSet<'_>,
    pod: PodRef<'_>,
    node: NodeRef<'_>,
) -> Option<(usize, Culprit)> {
    for (i, term) in pod.affinity().pod_anti_affinity_required.iter().enumerate() {
        if term
            .label_selector
            .as_ref()
            .is_some_and(|s| !label_selector_is_valid(s))
        {
            return None;
        }
        if let Some(culprit) = set.violation(pod, term, node) {
            return Some((i, culprit));
        }
    }
    None
}

/// The first preferred term (index) that selects a present or placed pod in the pod's domain.
/// Terms with an invalid selector select nothing.
fn preferred_violation(
    set: &WorkingSet<'_>,
    pod: PodRef<'_>,
    node: NodeRef<'_>,
) -> Option<(usize, Culprit)> {
    pod.affinity()
        .pod_anti_affinity_preferred
        .iter()
        .enumerate()
        .filter(|(_, w)| valid_selector(&w.term))
        .find_map(|(i, w)| set.preferred_violation(pod, &w.term, node).map(|c| (i, c)))
}

fn valid_selector(term: &ArchivedPodAffinityTerm) -> bool {
    term.label_selector
        .as_ref()
        .is_some_and(label_selector_is_valid)
}

/// The first node in scope, other than the pod's, that is clean for every preferred term of the
/// pod (no selected pod in its topology domain) and passes nodeFit.
fn better_node(
    ctx: &mut Context<'_>,
    set: &WorkingSet<'_>,
    pod: PodRef<'_>,
    scope: &[u32],
) -> Option<u32> {
    let cluster = set.cluster;
    // Per valid preferred term: (topology key, nodes hosting a selected pod, their key values).
    let dirty: Vec<(StrId, HashSet<u32>, HashSet<StrId>)> = pod
        .affinity()
        .pod_anti_affinity_preferred
        .iter()
        .filter(|w| valid_selector(&w.term))
        .map(|w| {
            let key = w.term.topology_key.to_native();
            let nodes: HashSet<u32> = set.nodes_selected_by(pod, &w.term).into_iter().collect();
            let values = nodes
                .iter()
                .filter_map(|&n| cluster.node(n).label_id(key))
                .collect();
            (key, nodes, values)
        })
        .collect();
    let current = pod.node();
    let clean: Vec<u32> = scope
        .iter()
        .copied()
        .filter(|&n| Some(n) != current)
        .filter(|&n| {
            let node = cluster.node(n);
            dirty.iter().all(|(key, nodes, values)| {
                !nodes.contains(&n) && node.label_id(*key).is_none_or(|v| !values.contains(&v))
            })
        })
        .collect();
    clean
        .chunks(FIT_CHUNK)
        .find_map(|chunk| ctx.node_fit(pod.id, chunk).first().copied())
}

/// The proposal's reason: which term, which pod, which domain.
fn describe(cluster: Cluster<'_>, pod: PodRef<'_>, node: NodeRef<'_>, v: &Violation) -> String {
    let (kind, term, culprit) = match v {
        Violation::Required { term, culprit } => (
            "required".to_string(),
            &pod.affinity().pod_anti_affinity_required[*term],
            culprit,
        ),
        Violation::Preferred { term, culprit, .. } => {
            let w = &pod.affinity().pod_anti_affinity_preferred[*term];
            (
                format!("preferred, weight {}", w.weight.to_native()),
                &w.term,
                culprit,
            )
        }
    };
    let key = cluster.str(term.topology_key.to_native());
    let other = cluster.pod(culprit.pod);
    let other_node = cluster.node(culprit.node);
    let placed = if pod_is_elsewhere(other, culprit.node) {
        " (where an earlier eviction of this pass sends it)"
    } else {
        ""
    };
    let place = if culprit.node == node.id {
        format!("on the same node {}", node.name())
    } else {
        format!(
            "on node {}{placed}, which has the same {key}={} as node {}",
            other_node.name(),
            other_node.label(key).unwrap_or(""),
            node.name()
        )
    };
    let mut reason = format!(
        "pod anti-affinity ({kind}, topologyKey {key}) is violated by {}/{} {place}",
        other.namespace(),
        other.name()
    );
    if let Violation::Preferred { target, .. } = v {
        reason.push_str(&format!(
            "; node {} fits it and satisfies every preferred anti-affinity term",
            cluster.node(*target).name()
        ));
    }
    reason
}

fn pod_is_elsewhere(pod: PodRef<'_>, node: u32) -> bool {
    pod.node() != Some(node)
}
