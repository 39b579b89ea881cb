//! The Balance pass of RemovePodsViolatingTopologySpreadConstraint (descheduler v0.36
//! `topologyspreadconstraint.go`), over the zero-copy snapshot.
//!
//! 1. Counted pods: the non-terminal pods on the nodes in scope that pass the plugin's
//!    `namespaces` and `labelSelector` and the evictor's Filter, grouped by namespace.
//! 2. Per namespace, the distinct constraints of those pods whose `whenUnsatisfiable` is allowed
//!    by `constraints`, each parsed the way the scheduler does: label selector merged with the
//!    owning pod's values of `matchLabelKeys`, `nodeAffinityPolicy` Honor and `nodeTaintsPolicy`
//!    Ignore unless set, the owning pod's nodeSelector/required affinity and tolerations
//!    (NoSchedule/NoExecute) for the inclusion policies. A constraint whose selector is invalid is
//!    skipped.
//! 3. Domains: every value of the topology key on the eligible nodes in scope (so empty domains
//!    count), plus the value of any node hosting a counted pod. A pod counts in the domain of its
//!    node when it matches the selector and is not terminating.
//! 4. Skip the constraint when max − min ≤ maxSkew. Otherwise descheduler's two-pointer balancing:
//!    idealAvg = pods ÷ domains; domains by size ascending; i from the smallest, j from the
//!    largest; j moves down when at or below the average; i moves up while skew(j, i) ≤ maxSkew;
//!    else move min(ceil(size_j − avg), ceil(avg − size_i), ceil((skew − maxSkew) / 2)) pods from
//!    the back of domain j to domain i.
//! 5. Inside a domain, pods pinned by nodeSelector/node affinity and pods of higher priority are
//!    kept (front of the list); before each move, the pods that fit a node of a below-average
//!    domain are moved to the back (a stable partition), so they are chosen first. With
//!    `topologyBalanceNodeFit`, a chosen pod that fits no below-average node (other than its own)
//!    is not evicted but still counts as moved.
//! 6. The chosen pods, in the order chosen, are evicted after Filter and PreEvictionFilter; a
//!    node-limit refusal skips the node's other pods, a total-limit refusal ends the pass, any
//!    other refusal moves on to the next pod.
//!
//! Deliberate differences from descheduler, where its result depends on Go map order or unstable
//! sorts: namespaces, constraints, domains of equal size and pods of equal rank are taken in
//! snapshot order (pod order for pods, node scope order for domains), and evictions are issued in
//! the order the pods were chosen instead of map order.

use std::collections::{HashMap as StdHashMap, HashSet as StdHashSet};
use std::hash::{BuildHasherDefault, DefaultHasher};
use std::rc::Rc;

use rebalancer_policy_sdk::k8s::affinity::pod_matches_node_selector_and_required_affinity;
use rebalancer_policy_sdk::k8s::selector::{label_selector_is_valid, label_selector_matches};
use rebalancer_policy_sdk::k8s::taints::tolerates_all;
use rebalancer_policy_sdk::model::{
    ArchivedInclusionPolicy, ArchivedKeyValue, ArchivedLabelSelector, ArchivedTolerationOperator,
    ArchivedTopologySpreadConstraint, ArchivedWhenUnsatisfiable, StrId, TaintEffect,
};
use rebalancer_policy_sdk::view::taint_effect;
use rebalancer_policy_sdk::{Cluster, Context, Details, NodeRef, PodRef, Refusal};

use descheduler_common::scope::PodScope;
use descheduler_common::signature::{push_node_selector_term, push_requirements};

use crate::args::RemovePodsViolatingTopologySpreadConstraintArgs;

/// std's maps with a fixed-key hasher: the default `RandomState` seeds itself from the host's
/// randomness, which the policy sandbox does not provide (no `wasi:random` import).
type HashMap<K, V> = StdHashMap<K, V, BuildHasherDefault<DefaultHasher>>;
type HashSet<T> = StdHashSet<T, BuildHasherDefault<DefaultHasher>>;

/// nodeFit candidates are sent to the host in chunks of this size; the search stops at the first
/// chunk with a fitting node.
const FIT_CHUNK: usize = 64;

/// Namespaces with more distinct constraints than this get a label index of their pods, so each
/// constraint looks only at the pods its `matchLabels` select.
const INDEX_FROM_CONSTRAINTS: usize = 4;

/// Summary of one pass, for logs and tests.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub nodes: usize,
    /// Pods counted (in scope, passing the plugin's filters and the evictor's Filter).
    pub counted: usize,
    /// Distinct constraints looked at.
    pub constraints: usize,
    /// Constraints whose domains were more than maxSkew apart.
    pub imbalanced: usize,
    /// Pods chosen to move and evicted-to-be.
    pub chosen: usize,
    /// Pods chosen to move that fit no below-average node (topologyBalanceNodeFit).
    pub not_fitting: usize,
    pub proposed: usize,
    pub refused: usize,
    /// Why the pass stopped early, if it did.
    pub stopped: Option<String>,
}

pub fn balance(
    ctx: &mut Context<'_>,
    args: &RemovePodsViolatingTopologySpreadConstraintArgs,
) -> Result<Outcome, String> {
    let mut details = Details::default();
    let outcome = propose(ctx, args, &mut details);
    details.finish(ctx);
    outcome
}

fn propose(
    ctx: &mut Context<'_>,
    args: &RemovePodsViolatingTopologySpreadConstraintArgs,
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
    let (hard, soft) = (args.hard(), args.soft());
    if !hard && !soft {
        outcome.stopped = Some("constraints is empty: no constraint to balance".into());
        return Ok(outcome);
    }

    // Counted pods, in snapshot order (one sequential pass), grouped by namespace in order of
    // first appearance.
    let filter = PodScope::try_new(
        cluster,
        args.namespaces.as_ref(),
        args.label_selector.as_ref(),
    )?;
    let mut in_scope = vec![false; cluster.node_count()];
    for &n in &scope {
        in_scope[n as usize] = true;
    }
    let listed: Vec<u32> = cluster
        .pods()
        .filter(|pod| {
            pod.node().is_some_and(|n| in_scope[n as usize])
                && !pod.is_terminal()
                && filter.admits(*pod)
        })
        .map(|pod| pod.id)
        .collect();
    let mut passes = vec![false; cluster.pod_count()];
    for p in ctx.filter(&listed) {
        if let Some(slot) = passes.get_mut(p as usize) {
            *slot = true;
        }
    }
    let mut namespaces: Vec<(StrId, Vec<u32>)> = Vec::new();
    let mut ns_position: HashMap<StrId, usize> = HashMap::default();
    let mut last: Option<(StrId, usize)> = None;
    for &p in &listed {
        if !passes[p as usize] {
            continue;
        }
        outcome.counted += 1;
        let ns = cluster.pod(p).namespace_id();
        let i = match last {
            Some((last_ns, i)) if last_ns == ns => i,
            _ => *ns_position.entry(ns).or_insert_with(|| {
                namespaces.push((ns, Vec::new()));
                namespaces.len() - 1
            }),
        };
        last = Some((ns, i));
        namespaces[i].1.push(p);
    }

    let mut balancer = Balancer {
        cluster,
        scope: &scope,
        node_fit: args.topology_balance_node_fit,
        lowest_priority_first: args.evict_lowest_priority_first,
        eligible: HashMap::default(),
        chosen: Vec::new(),
        chosen_set: HashSet::default(),
    };
    for (_, pods) in &namespaces {
        let mut constraints: Vec<Tsc<'_>> = Vec::new();
        let mut seen: HashSet<Vec<u32>> = HashSet::default();
        for &p in pods {
            let pod = cluster.pod(p);
            for c in pod.topology_spread().iter() {
                let allowed = match c.when_unsatisfiable {
                    ArchivedWhenUnsatisfiable::DoNotSchedule => hard,
                    ArchivedWhenUnsatisfiable::ScheduleAnyway => soft,
                };
                if !allowed {
                    continue;
                }
                match Tsc::new(pod, c) {
                    Ok(tsc) => {
                        if seen.insert(tsc.signature()) {
                            constraints.push(tsc);
                        }
                    }
                    Err(e) => details.log(ctx, || {
                        format!(
                            "topology spread constraint of {}/{} skipped: {e}",
                            pod.namespace(),
                            pod.name()
                        )
                    }),
                }
            }
        }
        outcome.constraints += constraints.len();
        let index =
            (constraints.len() > INDEX_FROM_CONSTRAINTS).then(|| LabelIndex::new(cluster, pods));
        for tsc in &constraints {
            let candidates = match &index {
                Some(index) => index.candidates(tsc).unwrap_or(&pods[..]),
                None => pods,
            };
            balancer.constraint(ctx, tsc, candidates, &mut outcome, details);
        }
    }
    outcome.chosen = balancer.chosen.len();

    // Evictions, in the order the pods were chosen.
    let mut node_limit_reached: HashSet<u32> = HashSet::default();
    for (pod_id, reason) in std::mem::take(&mut balancer.chosen) {
        let pod = cluster.pod(pod_id);
        let node_name = pod.raw.node_name.to_native();
        if node_limit_reached.contains(&node_name) {
            continue;
        }
        if !ctx.is_evictable(pod_id) || !ctx.passes_pre_eviction_filter(pod_id) {
            continue;
        }
        match ctx.propose_eviction(pod_id, &reason) {
            Ok(()) => outcome.proposed += 1,
            Err(Refusal::NodeLimit) => {
                outcome.refused += 1;
                node_limit_reached.insert(node_name);
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
    Ok(outcome)
}

/// One constraint as descheduler parses it (`newTopologySpreadConstraint`).
struct Tsc<'a> {
    /// The pod the constraint was read from: its nodeSelector/affinity and tolerations drive the
    /// inclusion policies.
    owner: PodRef<'a>,
    raw: &'a ArchivedTopologySpreadConstraint,
    /// `matchLabelKeys` with the owner's values, merged into the selector.
    pairs: Vec<(StrId, StrId)>,
    honor_affinity: bool,
    honor_taints: bool,
}

impl<'a> Tsc<'a> {
    fn new(owner: PodRef<'a>, raw: &'a ArchivedTopologySpreadConstraint) -> Result<Self, String> {
        if raw
            .label_selector
            .as_ref()
            .is_some_and(|s| !label_selector_is_valid(s))
        {
            return Err("its label selector is invalid".into());
        }
        let mut pairs: Vec<(StrId, StrId)> = Vec::new();
        for key in raw.match_label_keys.iter() {
            let key = key.to_native();
            if let Some(value) = owner.label_id(key)
                && !pairs.contains(&(key, value))
            {
                pairs.push((key, value));
            }
        }
        pairs.sort_unstable();
        let honor_affinity = raw
            .node_affinity_policy
            .as_ref()
            .is_none_or(|p| *p == ArchivedInclusionPolicy::Honor);
        let honor_taints = raw
            .node_taints_policy
            .as_ref()
            .is_some_and(|p| *p == ArchivedInclusionPolicy::Honor);
        Ok(Tsc {
            owner,
            raw,
            pairs,
            honor_affinity,
            honor_taints,
        })
    }

    fn topology_key(&self) -> StrId {
        self.raw.topology_key.to_native()
    }

    fn max_skew(&self) -> i64 {
        i64::from(self.raw.max_skew.to_native())
    }

    /// The merged selector matches the pod (a nil selector matches nothing).
    fn matches(&self, pod: PodRef<'_>) -> bool {
        let Some(selector) = self.raw.label_selector.as_ref() else {
            return false;
        };
        label_selector_matches(selector, &pod.raw.labels)
            && self.pairs.iter().all(|&(k, v)| pod.label_id(k) == Some(v))
    }

    /// `matchNodeInclusionPolicies`.
    fn eligible(&self, node: NodeRef<'_>) -> bool {
        (!self.honor_affinity || pod_matches_node_selector_and_required_affinity(self.owner, node))
            && (!self.honor_taints
                || tolerates_all(
                    self.owner,
                    node,
                    &[TaintEffect::NoSchedule, TaintEffect::NoExecute],
                ))
    }

    /// What decides the eligible nodes: the topology key and, per honored policy, the owner's
    /// node affinity or tolerations.
    fn eligibility_key(&self) -> Vec<u32> {
        let mut out = vec![self.topology_key()];
        out.push(u32::from(self.honor_affinity));
        if self.honor_affinity {
            let pod = self.owner;
            push_kvs(&mut out, pod.node_selector());
            match pod.affinity().node_required.as_ref() {
                None => out.push(u32::MAX),
                Some(terms) => {
                    out.push(terms.len() as u32);
                    for t in terms.iter() {
                        push_node_selector_term(&mut out, t);
                    }
                }
            }
        }
        out.push(u32::from(self.honor_taints));
        if self.honor_taints {
            let tolerations = self.owner.tolerations();
            out.push(tolerations.len() as u32);
            for t in tolerations.iter() {
                out.push(t.key.to_native());
                out.push(match t.operator {
                    ArchivedTolerationOperator::Equal => 0,
                    ArchivedTolerationOperator::Exists => 1,
                });
                out.push(t.value.to_native());
                out.push(
                    t.effect
                        .as_ref()
                        .map_or(u32::MAX, |e| taint_effect(e) as u32),
                );
            }
        }
        out
    }

    /// Everything descheduler compares (`reflect.DeepEqual`) to drop duplicate constraints.
    fn signature(&self) -> Vec<u32> {
        let raw = self.raw;
        let mut out = vec![
            raw.max_skew.to_native() as u32,
            match raw.when_unsatisfiable {
                ArchivedWhenUnsatisfiable::DoNotSchedule => 0,
                ArchivedWhenUnsatisfiable::ScheduleAnyway => 1,
            },
            raw.min_domains.as_ref().map_or(1, |m| m.to_native()) as u32,
        ];
        push_selector(&mut out, raw.label_selector.as_ref());
        out.push(self.pairs.len() as u32);
        for &(k, v) in &self.pairs {
            out.push(k);
            out.push(v);
        }
        out.extend(self.eligibility_key());
        out
    }

    /// For reasons: `maxSkew 1, topologyKey zone, DoNotSchedule`.
    fn describe(&self, cluster: Cluster<'_>) -> String {
        let when = match self.raw.when_unsatisfiable {
            ArchivedWhenUnsatisfiable::DoNotSchedule => "DoNotSchedule",
            ArchivedWhenUnsatisfiable::ScheduleAnyway => "ScheduleAnyway",
        };
        format!(
            "topologyKey {}, maxSkew {}, {when}",
            cluster.str(self.topology_key()),
            self.max_skew()
        )
    }
}

fn push_kvs(out: &mut Vec<u32>, kvs: &[ArchivedKeyValue]) {
    out.push(kvs.len() as u32);
    for kv in kvs {
        out.push(kv.key.to_native());
        out.push(kv.value.to_native());
    }
}

fn push_selector(out: &mut Vec<u32>, selector: Option<&ArchivedLabelSelector>) {
    match selector {
        None => out.push(u32::MAX),
        Some(s) => {
            out.push(0);
            push_kvs(out, &s.match_labels);
            push_requirements(out, &s.match_expressions);
        }
    }
}

/// The eligible nodes in scope of a constraint (`filterEligibleNodes`) and its domains.
struct Eligible {
    /// Domain values of the eligible nodes carrying the key, in scope order.
    values: Vec<StrId>,
    /// Eligible nodes per domain value, in scope order.
    nodes: HashMap<StrId, Vec<u32>>,
}

impl Eligible {
    fn new(cluster: Cluster<'_>, scope: &[u32], tsc: &Tsc<'_>) -> Self {
        let key = tsc.topology_key();
        let mut values = Vec::new();
        let mut nodes: HashMap<StrId, Vec<u32>> = HashMap::default();
        for &n in scope {
            let node = cluster.node(n);
            let Some(value) = node.label_id(key) else {
                continue;
            };
            if !tsc.eligible(node) {
                continue;
            }
            let list = nodes.entry(value).or_default();
            if list.is_empty() {
                values.push(value);
            }
            list.push(n);
        }
        Eligible { values, nodes }
    }
}

/// One topology domain while balancing.
struct Domain {
    value: StrId,
    /// Matching pods still in the domain, kept pods first.
    pods: Vec<u32>,
    /// Pods counted in the domain: its pods plus the ones moved in.
    size: usize,
}

/// Pods of a namespace by `(label key, value)`, for constraints with `matchLabels`.
struct LabelIndex {
    by_label: HashMap<(StrId, StrId), Vec<u32>>,
}

impl LabelIndex {
    fn new(cluster: Cluster<'_>, pods: &[u32]) -> Self {
        let mut by_label: HashMap<(StrId, StrId), Vec<u32>> = HashMap::default();
        for &p in pods {
            for kv in cluster.pod(p).raw.labels.iter() {
                by_label
                    .entry((kv.key.to_native(), kv.value.to_native()))
                    .or_default()
                    .push(p);
            }
        }
        LabelIndex { by_label }
    }

    /// The smallest bucket among the selector's `matchLabels` and the merged pairs (a superset of
    /// the pods the constraint selects), or `None` when there is nothing to narrow by.
    fn candidates(&self, tsc: &Tsc<'_>) -> Option<&[u32]> {
        let selector = tsc.raw.label_selector.as_ref()?;
        let pairs = selector
            .match_labels
            .iter()
            .map(|kv| (kv.key.to_native(), kv.value.to_native()))
            .chain(tsc.pairs.iter().copied());
        let mut best: Option<&[u32]> = None;
        for pair in pairs {
            let bucket = self.by_label.get(&pair).map_or(&[][..], Vec::as_slice);
            if best.is_none_or(|b| bucket.len() < b.len()) {
                best = Some(bucket);
            }
        }
        best
    }
}

/// Whether pods fit some node of the below-average domains (other than their own), cached for
/// one constraint.
struct FitCheck {
    below: Vec<u32>,
    cache: HashMap<u32, bool>,
}

impl FitCheck {
    /// `PodFitsAnyOtherNode(pod, nodesBelowIdealAvg)`.
    fn fits(&mut self, ctx: &mut Context<'_>, pod: PodRef<'_>) -> bool {
        if let Some(&fits) = self.cache.get(&pod.id) {
            return fits;
        }
        let own = pod.node();
        let fits = self.below.chunks(FIT_CHUNK).any(|chunk| {
            let fitting = if own.is_some_and(|n| chunk.contains(&n)) {
                let others: Vec<u32> = chunk.iter().copied().filter(|&n| Some(n) != own).collect();
                ctx.node_fit(pod.id, &others)
            } else {
                ctx.node_fit(pod.id, chunk)
            };
            !fitting.is_empty()
        });
        self.cache.insert(pod.id, fits);
        fits
    }
}

/// The balancing state of the whole pass.
struct Balancer<'a, 's> {
    cluster: Cluster<'a>,
    scope: &'s [u32],
    node_fit: bool,
    /// `evictLowestPriorityFirst`: the documented intent instead of descheduler's order.
    lowest_priority_first: bool,
    eligible: HashMap<Vec<u32>, Rc<Eligible>>,
    /// Pods to evict with their reasons, in the order chosen.
    chosen: Vec<(u32, String)>,
    chosen_set: HashSet<u32>,
}

impl Balancer<'_, '_> {
    /// Count one constraint's domains and, when they are skewed, choose the pods to move.
    fn constraint(
        &mut self,
        ctx: &mut Context<'_>,
        tsc: &Tsc<'_>,
        candidates: &[u32],
        outcome: &mut Outcome,
        details: &mut Details,
    ) {
        let cluster = self.cluster;
        let key = tsc.topology_key();
        let eligible = Rc::clone(
            self.eligible
                .entry(tsc.eligibility_key())
                .or_insert_with(|| Rc::new(Eligible::new(cluster, self.scope, tsc))),
        );

        let mut domains: Vec<Domain> = eligible
            .values
            .iter()
            .map(|&value| Domain {
                value,
                pods: Vec::new(),
                size: 0,
            })
            .collect();
        let mut position: HashMap<StrId, usize> = eligible
            .values
            .iter()
            .enumerate()
            .map(|(i, &v)| (v, i))
            .collect();
        let mut sum = 0usize;
        for &p in candidates {
            let pod = cluster.pod(p);
            if pod.has_deletion_timestamp() || !tsc.matches(pod) {
                continue;
            }
            let Some(node) = pod.node() else { continue };
            let Some(value) = cluster.node(node).label_id(key) else {
                continue;
            };
            let i = *position.entry(value).or_insert_with(|| {
                domains.push(Domain {
                    value,
                    pods: Vec::new(),
                    size: 0,
                });
                domains.len() - 1
            });
            domains[i].pods.push(p);
            domains[i].size += 1;
            sum += 1;
        }
        let (Some(min), Some(max)) = (
            domains.iter().map(|d| d.size).min(),
            domains.iter().map(|d| d.size).max(),
        ) else {
            return;
        };
        if (max - min) as i64 <= tsc.max_skew() {
            return;
        }
        outcome.imbalanced += 1;

        // sortDomains: the pods are taken from the back of each domain's list. Its first rule
        // (pods the evictor refuses go to the front) never applies: every counted pod passed
        // the evictor's Filter when it was listed, as in descheduler.
        for d in &mut domains {
            d.pods.sort_by_cached_key(|&p| {
                let pod = cluster.pod(p);
                let priority = if self.lowest_priority_first {
                    Priority::Descending(std::cmp::Reverse(pod.priority()))
                } else {
                    Priority::Ascending(pod.priority())
                };
                (!pinned(pod), priority)
            });
        }
        domains.sort_by_key(|d| d.size);
        let ideal = sum as f64 / domains.len() as f64;
        let mut fit = FitCheck {
            below: domains
                .iter()
                .filter(|d| (d.size as f64) < ideal)
                .filter_map(|d| eligible.nodes.get(&d.value))
                .flatten()
                .copied()
                .collect(),
            cache: HashMap::default(),
        };

        let max_skew = tsc.max_skew();
        let mut i = 0usize;
        let mut j = domains.len() - 1;
        while i < j {
            if domains[j].size as f64 <= ideal {
                j -= 1;
            }
            let skew = domains[j].size as i64 - domains[i].size as i64;
            if skew <= max_skew {
                i += 1;
                continue;
            }
            let above = (domains[j].size as f64 - ideal).ceil();
            let below = (ideal - domains[i].size as f64).ceil();
            let half = ((skew - max_skew) as f64 / 2.0).ceil();
            let moves = above.min(below).min(half);
            if moves <= 0.0 {
                i += 1;
                continue;
            }
            let moves = moves as usize;
            let reason = format!(
                "pods matching the topology spread constraint ({}) of {}/{} are skewed: {}={} has \
                 {} of them and {}={} has {} ({:.2} per domain on average); {moves} should move",
                tsc.describe(cluster),
                tsc.owner.namespace(),
                tsc.owner.name(),
                cluster.str(key),
                cluster.str(domains[j].value),
                domains[j].size,
                cluster.str(key),
                cluster.str(domains[i].value),
                domains[i].size,
                ideal
            );
            let taken = take_preferring_fit(ctx, &mut fit, cluster, &mut domains[j].pods, moves);
            for p in taken {
                if self.node_fit && !fit.fits(ctx, cluster.pod(p)) {
                    outcome.not_fitting += 1;
                    details.log(ctx, || {
                        let pod = cluster.pod(p);
                        format!(
                            "{}/{} would move for its topology spread but fits no node of a \
                             below-average domain: not evicted",
                            pod.namespace(),
                            pod.name()
                        )
                    });
                    continue;
                }
                if self.chosen_set.insert(p) {
                    self.chosen.push((p, reason.clone()));
                }
            }
            domains[j].size -= moves;
            domains[i].size += moves;
        }
    }
}

/// Remove and return the last `moves` pods of the domain's list after a stable partition that puts
/// the pods fitting a below-average node at the back (descheduler's `sort.SliceStable` before
/// each move), without asking the host about more pods than needed. The pods left keep their
/// order; partitioning them again later gives the same order descheduler's list has.
fn take_preferring_fit(
    ctx: &mut Context<'_>,
    fit: &mut FitCheck,
    cluster: Cluster<'_>,
    pods: &mut Vec<u32>,
    moves: usize,
) -> Vec<u32> {
    let mut fitting: Vec<usize> = Vec::new();
    for idx in (0..pods.len()).rev() {
        if fitting.len() == moves {
            break;
        }
        if fit.fits(ctx, cluster.pod(pods[idx])) {
            fitting.push(idx);
        }
    }
    fitting.reverse();
    let mut take = vec![false; pods.len()];
    let mut taken: Vec<u32> = Vec::with_capacity(moves);
    if fitting.len() < moves {
        // Every pod was looked at: the fitting ones go, plus the last non-fitting ones.
        let need = moves - fitting.len();
        let non_fitting: Vec<usize> = (0..pods.len())
            .filter(|i| fitting.binary_search(i).is_err())
            .collect();
        for &idx in &non_fitting[non_fitting.len().saturating_sub(need)..] {
            take[idx] = true;
            taken.push(pods[idx]);
        }
    }
    for &idx in &fitting {
        take[idx] = true;
        taken.push(pods[idx]);
    }
    let mut k = 0;
    pods.retain(|_| {
        let keep = !take[k];
        k += 1;
        keep
    });
    taken
}

/// Whether descheduler's `hasSelectorOrAffinity` holds: a nodeSelector or a node affinity.
/// Such pods sort before the others of their domain, so they move last.
fn pinned(pod: PodRef<'_>) -> bool {
    let affinity = pod.affinity();
    !pod.node_selector().is_empty()
        || affinity.node_required.is_some()
        || !affinity.node_preferred.is_empty()
}

/// The priority part of the order inside a domain (front = kept, back = moved first).
///
/// descheduler v0.36 compares with `!comparePodsByPriority(i, j)`, which is "i's priority <= j's"
/// with an unset priority below every set one: ascending, so the highest-priority pods sit at
/// the back and move first. (Pods of equal priority compare "less" both ways, so Go's unstable
/// sort leaves them in an arbitrary order; a stable sort keeps the listing order, one of the
/// orders descheduler can produce.) `evictLowestPriorityFirst` reverses it, unset last.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
enum Priority {
    Ascending(Option<i32>),
    Descending(std::cmp::Reverse<Option<i32>>),
}
