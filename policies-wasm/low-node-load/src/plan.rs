//! The Balance pass of LowNodeLoad (Koordinator `loadaware/low_node_load.go`,
//! `utilization_util.go`, `utils/sorter`), over the zero-copy snapshot.
//!
//! 1. Usage, once per run ([`Measured`]): for every node in scope with a fresh metric, per
//!    resource slot: NodeMetric `systemUsage` + every `podsMetric` entry (pods gone from the
//!    cluster included), or metrics.k8s.io's node usage; prod usage = the metrics of its
//!    non-terminal koord-prod pods; `pods` = its non-terminal pods. Capacity is raw allocatable.
//! 2. Per pool (the implicit default pool first, then `nodePools`): its nodes, thresholds per
//!    node (`newThresholds`, absolute or deviations from the pool's mean), classification into
//!    low, source, prod-low, prod-source and both-low nodes.
//! 3. Gates in Koordinator's order, the anomaly detectors ([`crate::detector`]) between them.
//! 4. Node pass, then prod pass: sources by weighted usage score; per source, candidates
//!    (namespaces, pod selectors, evictor Filter, nodeFit with the usage check) in
//!    `PodSorter` + usage-match order; one proposal at a time, each admitted one taking its
//!    metric off the node and the budget, until the node is no longer above its high
//!    thresholds or some budget resource is used up.
//!
//! Nodes, pods and resources are dense indexes; strings are built only for reasons and logs.
//! Ties the Go code leaves to map order are broken by node name and pod uid, namespace, name.

use std::cmp::Ordering;

use descheduler_common::scope::NamespaceFilter;
use descheduler_common::utilization::whole_units;
use rebalancer_policy_sdk::k8s::koordinator::{
    KoordQos, LABEL_PRIORITY_CLASS, LABEL_QOS, PriorityClass,
};
use rebalancer_policy_sdk::k8s::selector::ResolvedSelector;
use rebalancer_policy_sdk::model::{ArchivedUsageSource, NONE, QosClass, StrId};
use rebalancer_policy_sdk::view::kv_get;
use rebalancer_policy_sdk::{Cluster, Context, Details, PodRef, Refusal};

use crate::args::{LowNodeLoadArgs, Pool, Resolved, resolve};
use crate::detector::{Detectors, NODE_KEY, PROD_KEY};

/// `controller.kubernetes.io/pod-deletion-cost`.
pub const DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";
/// `scheduling.koordinator.sh/eviction-cost`.
pub const EVICTION_COST: &str = "scheduling.koordinator.sh/eviction-cost";

/// Targets asked of the host's nodeFit at a time (those whose usage check already passed).
const FIT_CHUNK: usize = 8;

/// Summary of one run, for the log line and tests (node counts summed over pools).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub nodes: usize,
    /// Nodes in scope without a fresh metric (skipped entirely).
    pub unmeasured: usize,
    pub pools: usize,
    pub low: usize,
    pub high: usize,
    pub prod_low: usize,
    pub prod_high: usize,
    pub both_low: usize,
    /// Sources (node and prod) the detectors found anomalous.
    pub anomalous: usize,
    pub proposed: usize,
    pub refused: usize,
    /// Evictions a dry run logged instead of proposing.
    pub dry_run: usize,
    /// Why each pool that stopped early stopped (`pool: why`), and why the run stopped.
    pub stopped: Vec<String>,
}

/// How a resource's amounts compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Milli-units.
    Cpu,
    /// The pod count (a pod's metric holds none).
    Pods,
    /// Whole units (`Quantity.Value()`).
    Other,
}

/// One resource slot of the run: the union of every pool's threshold resources, memory and
/// `pods`, sorted by name (the reason lists resources in this order).
#[derive(Debug, Clone)]
struct Res {
    name: String,
    id: Option<StrId>,
    kind: Kind,
}

impl Res {
    /// `getResourceValue`: cpu in milli-units, the rest in whole units rounded up.
    fn value(&self, milli: i64) -> i64 {
        if self.kind == Kind::Cpu {
            milli
        } else {
            whole_units(milli)
        }
    }
}

/// A pod's metric of one resource (`None`: absent from its metric, or no metric).
fn metric(pod: PodRef<'_>, res: &Res) -> Option<i64> {
    let id = res.id?;
    pod.usage()
        .usage
        .iter()
        .find(|q| q.resource.to_native() == id)
        .map(|q| q.milli.to_native())
}

fn has_metric(pod: PodRef<'_>) -> bool {
    pod.usage().source != ArchivedUsageSource::None
}

/// Label and annotation keys resolved once per run.
struct Keys {
    priority_class: Option<StrId>,
    qos: Option<StrId>,
    deletion_cost: Option<StrId>,
    eviction_cost: Option<StrId>,
}

impl Keys {
    fn new(cluster: Cluster<'_>) -> Self {
        Keys {
            priority_class: cluster.lookup(LABEL_PRIORITY_CLASS),
            qos: cluster.lookup(LABEL_QOS),
            deletion_cost: cluster.lookup(DELETION_COST),
            eviction_cost: cluster.lookup(EVICTION_COST),
        }
    }

    /// `GetPodQoSClassWithDefault` with the label key resolved ([`KoordQos::of`]).
    fn koord_qos(&self, pod: PodRef<'_>) -> KoordQos {
        let raw = self
            .qos
            .and_then(|k| pod.label_id(k))
            .map_or(KoordQos::None, |v| {
                KoordQos::from_name(pod.cluster().str(v))
            });
        match raw {
            KoordQos::None => match pod.qos() {
                QosClass::Guaranteed => KoordQos::Lsr,
                QosClass::Burstable => KoordQos::Ls,
                QosClass::BestEffort => KoordQos::Be,
            },
            q => q,
        }
    }

    /// `GetPodPriorityClassWithDefault` with the label key resolved ([`PriorityClass::of`]).
    fn priority_class(&self, pod: PodRef<'_>) -> PriorityClass {
        let raw = match self.priority_class.and_then(|k| pod.label_id(k)) {
            Some(v) => PriorityClass::from_name(pod.cluster().str(v)),
            None => pod
                .priority()
                .map_or(PriorityClass::None, PriorityClass::from_priority),
        };
        match raw {
            PriorityClass::None => match self.koord_qos(pod) {
                KoordQos::System | KoordQos::Lse | KoordQos::Lsr | KoordQos::Ls => {
                    PriorityClass::Prod
                }
                KoordQos::Be => PriorityClass::Batch,
                KoordQos::None => PriorityClass::None,
            },
            class => class,
        }
    }

    /// An int32 annotation as Kubernetes reads a deletion cost: no sign `+`, no leading zeros,
    /// anything invalid is 0.
    fn cost(&self, pod: PodRef<'_>, key: Option<StrId>) -> i32 {
        let Some(value) = key.and_then(|k| kv_get(pod.annotations(), k)) else {
            return 0;
        };
        let text = pod.cluster().str(value);
        let digits = text.strip_prefix('-').unwrap_or(text);
        let valid = !digits.is_empty()
            && digits.bytes().all(|b| b.is_ascii_digit())
            && (digits == "0" || !digits.starts_with('0'));
        if valid { text.parse().unwrap_or(0) } else { 0 }
    }
}

/// Usage of every node in scope, measured once per run.
struct Measured {
    /// Node ids in scope, in scope order (dense index `k`).
    nodes: Vec<u32>,
    /// Per node: has a fresh metric.
    fresh: Vec<bool>,
    /// Per node: the metric's update time.
    update_ms: Vec<i64>,
    /// Per node × slot, milli-units.
    capacity: Vec<i64>,
    usage: Vec<i64>,
    prod: Vec<i64>,
    /// Non-terminal pods of node `k`: `pods[pod_start[k]..pod_start[k + 1]]`; the prod ones
    /// likewise in `prod_pods`.
    pods: Vec<u32>,
    pod_start: Vec<usize>,
    prod_pods: Vec<u32>,
    prod_start: Vec<usize>,
}

impl Measured {
    fn pods_of(&self, k: usize, prod: bool) -> &[u32] {
        if prod {
            &self.prod_pods[self.prod_start[k]..self.prod_start[k + 1]]
        } else {
            &self.pods[self.pod_start[k]..self.pod_start[k + 1]]
        }
    }
}

fn measure(
    cluster: Cluster<'_>,
    scope: Vec<u32>,
    res: &[Res],
    keys: &Keys,
    now: i64,
    expiration_seconds: i64,
) -> Result<Measured, String> {
    let width = res.len();
    let n = scope.len();
    let mut position = vec![NONE; cluster.node_count()];
    let mut fresh = vec![false; n];
    let mut update_ms = vec![0; n];
    let mut capacity = vec![0i64; n * width];
    let mut usage = vec![0i64; n * width];
    let prod = vec![0i64; n * width];
    let mut node_metric = vec![false; n];
    let slot_of = |id: StrId| res.iter().position(|r| r.id == Some(id));
    for (k, &id) in scope.iter().enumerate() {
        let slot = position
            .get_mut(id as usize)
            .ok_or_else(|| format!("host listed node {id}, which is not in the snapshot"))?;
        *slot = k as u32;
        let node = cluster.node(id);
        let row = node.usage();
        let update = row.update_ms.as_ref().map(|t| t.to_native());
        let source_ok = row.source != ArchivedUsageSource::None;
        // isNodeMetricExpired: no update time, or at least nodeMetricExpirationSeconds old.
        let ok = source_ok && update.is_some_and(|u| now - u < expiration_seconds * 1000);
        fresh[k] = ok;
        update_ms[k] = update.unwrap_or(0);
        // Raw allocatable replaces allocatable wholesale when present.
        let list = if row.raw_allocatable.is_empty() {
            &node.raw.allocatable
        } else {
            &row.raw_allocatable
        };
        for q in list.iter() {
            if let Some(r) = slot_of(q.resource.to_native()) {
                capacity[k * width + r] = q.milli.to_native();
            }
        }
        if !ok {
            continue;
        }
        // A NodeMetric's usage is systemUsage + every podsMetric entry (those of pods gone from
        // the cluster here, the others below); a metrics.k8s.io node's is its NodeMetrics usage.
        node_metric[k] = row.source == ArchivedUsageSource::NodeMetric;
        let base: &[_] = if node_metric[k] {
            &row.system
        } else {
            &row.node
        };
        let gone: &[_] = if node_metric[k] { &row.gone_pods } else { &[] };
        for q in base.iter().chain(gone) {
            if let Some(r) = slot_of(q.resource.to_native()) {
                usage[k * width + r] += q.milli.to_native();
            }
        }
    }
    let pods_slot = res.iter().position(|r| r.kind == Kind::Pods);
    // Metric slots: (resource id, slot).
    let metric_slots: Vec<(StrId, usize)> = res
        .iter()
        .enumerate()
        .filter(|(_, r)| r.kind != Kind::Pods)
        .filter_map(|(i, r)| r.id.map(|id| (id, i)))
        .collect();
    // One pass: metrics summed, pods counted and classified (1 = pod, 2 = prod pod).
    let mut class = vec![0u8; cluster.pod_count()];
    let mut counts = vec![0usize; n];
    let mut prod_counts = vec![0usize; n];
    let mut prod = prod;
    for pod in cluster.pods() {
        let Some(node) = pod.node() else { continue };
        let k = position[node as usize];
        if k == NONE || !fresh[k as usize] {
            continue;
        }
        let k = k as usize;
        let row = pod.usage();
        let measured = row.source != ArchivedUsageSource::None;
        // A NodeMetric counts every podsMetric entry, terminal pods included.
        if measured && node_metric[k] && row.source == ArchivedUsageSource::NodeMetric {
            for q in row.usage.iter() {
                let id = q.resource.to_native();
                if let Some(&(_, r)) = metric_slots.iter().find(|(i, _)| *i == id) {
                    usage[k * width + r] += q.milli.to_native();
                }
            }
        }
        if pod.is_terminal() {
            continue;
        }
        counts[k] += 1;
        class[pod.id as usize] = 1;
        if keys.priority_class(pod) == PriorityClass::Prod {
            class[pod.id as usize] = 2;
            prod_counts[k] += 1;
            if measured {
                for q in row.usage.iter() {
                    let id = q.resource.to_native();
                    if let Some(&(_, r)) = metric_slots.iter().find(|(i, _)| *i == id) {
                        prod[k * width + r] += q.milli.to_native();
                    }
                }
            }
        }
    }
    let mut pod_start = Vec::with_capacity(n + 1);
    let mut prod_start = Vec::with_capacity(n + 1);
    let (mut a, mut b) = (0, 0);
    for k in 0..n {
        pod_start.push(a);
        prod_start.push(b);
        a += counts[k];
        b += prod_counts[k];
        if let Some(r) = pods_slot {
            usage[k * width + r] = counts[k] as i64 * 1000;
            prod[k * width + r] = prod_counts[k] as i64 * 1000;
        }
    }
    pod_start.push(a);
    prod_start.push(b);
    let mut pods = vec![0u32; a];
    let mut prod_pods = vec![0u32; b];
    let mut fill = pod_start.clone();
    let mut prod_fill = prod_start.clone();
    for (id, &c) in class.iter().enumerate() {
        if c == 0 {
            continue;
        }
        let node = cluster.pod(id as u32).raw.node.to_native();
        let k = position[node as usize] as usize;
        pods[fill[k]] = id as u32;
        fill[k] += 1;
        if c == 2 {
            prod_pods[prod_fill[k]] = id as u32;
            prod_fill[k] += 1;
        }
    }
    Ok(Measured {
        nodes: scope,
        fresh,
        update_ms,
        capacity,
        usage,
        prod,
        pods,
        pod_start,
        prod_pods,
        prod_start,
    })
}

/// `newThresholds` for one resource of a pool: the low and high percentages of the node and
/// prod usage; `None` low: the low threshold equals the high one (`keepHighWithoutLow`).
#[derive(Debug, Clone, Copy)]
struct Spec {
    low: Option<f64>,
    high: f64,
    prod_low: Option<f64>,
    prod_high: f64,
}

/// Per node of a pool: the four thresholds per pool resource, milli-units.
#[derive(Debug, Clone, Copy, Default)]
struct Limits {
    low: i64,
    high: i64,
    prod_low: i64,
    prod_high: i64,
}

/// What the node and prod passes of one pool share.
struct PoolRun<'p> {
    pool: &'p Pool,
    /// The pool's threshold resources (slots, ascending name).
    names: Vec<usize>,
    /// Per slot: the configured (absolute) percentages, for reasons.
    specs: Vec<Option<Spec>>,
    /// Measured nodes of the pool (dense `k`), and per node × pool resource its limits.
    members: Vec<usize>,
    limits: Vec<Limits>,
    /// Pool-local copies of the usage (phantom usage and evictions change them).
    usage: Vec<i64>,
    prod: Vec<i64>,
}

impl PoolRun<'_> {
    fn limit(&self, m: usize, j: usize) -> Limits {
        self.limits[m * self.names.len() + j]
    }
}

/// Everything one run reads.
struct Run<'a, 'c> {
    cluster: Cluster<'c>,
    args: &'a LowNodeLoadArgs,
    resolved: &'a Resolved,
    res: Vec<Res>,
    keys: Keys,
    measured: Measured,
    namespaces: NamespaceFilter,
    pod_selectors: Vec<ResolvedSelector>,
    now: i64,
    nodes_det: Detectors,
    prod_det: Detectors,
    details: Details,
    outcome: Outcome,
    /// The run's total eviction limit was reached.
    done: bool,
    /// Scratch of [`Run::fit`], reused across candidates: the pod's metric per pool resource,
    /// the usage-checked targets of a chunk and their node ids.
    amounts: Vec<i64>,
    chunk: Vec<usize>,
    chunk_ids: Vec<u32>,
}

pub fn balance(ctx: &mut Context<'_>, args: &LowNodeLoadArgs) -> Result<Outcome, String> {
    let resolved = resolve(args).map_err(|errors| {
        let list: Vec<String> = errors.iter().map(ToString::to_string).collect();
        format!("invalid args: {}", list.join("; "))
    })?;
    let cluster = ctx.cluster;
    let now = ctx.now_ms();
    let scope = ctx.nodes();
    let res = resources(cluster, &resolved);
    let keys = Keys::new(cluster);
    let measured = measure(
        cluster,
        scope,
        &res,
        &keys,
        now,
        resolved.node_metric_expiration_seconds,
    )?;
    let mut run = Run {
        cluster,
        args,
        resolved: &resolved,
        outcome: Outcome {
            nodes: measured.nodes.len(),
            unmeasured: measured.fresh.iter().filter(|f| !**f).count(),
            pools: resolved.pools.len(),
            ..Outcome::default()
        },
        res,
        keys,
        measured,
        namespaces: NamespaceFilter::new(cluster, args.evictable_namespaces.as_ref()),
        pod_selectors: args
            .pod_selectors
            .iter()
            .filter_map(|s| s.selector.as_ref())
            .map(|s| s.resolve(cluster))
            .collect(),
        now,
        nodes_det: Detectors::load(ctx, NODE_KEY, now),
        prod_det: Detectors::load(ctx, PROD_KEY, now),
        details: Details::default(),
        done: false,
        amounts: Vec::new(),
        chunk: Vec::with_capacity(FIT_CHUNK),
        chunk_ids: Vec::with_capacity(FIT_CHUNK),
    };
    let mut processed = vec![false; run.measured.nodes.len()];
    for pool in &resolved.pools {
        if run.done {
            break;
        }
        if let Some(why) = run.pool(ctx, pool, &mut processed) {
            run.outcome
                .stopped
                .push(format!("pool {}: {why}", pool.name));
        }
    }
    let Run {
        nodes_det,
        prod_det,
        details,
        mut outcome,
        ..
    } = run;
    details.finish(ctx);
    for detectors in [nodes_det, prod_det] {
        if let Err(e) = detectors.save(ctx) {
            outcome
                .stopped
                .push(format!("anomaly detectors not saved: {e}"));
        }
    }
    Ok(outcome)
}

/// The run's resource slots: every pool's threshold resources, memory and pods, by name.
fn resources(cluster: Cluster<'_>, resolved: &Resolved) -> Vec<Res> {
    let mut names: Vec<&str> = vec!["memory", "pods"];
    for pool in &resolved.pools {
        for map in [&pool.low, &pool.high, &pool.prod_low, &pool.prod_high] {
            names.extend(map.keys().map(String::as_str));
        }
    }
    names.sort_unstable();
    names.dedup();
    names
        .into_iter()
        .map(|name| Res {
            name: name.to_owned(),
            id: cluster.lookup(name),
            kind: match name {
                "cpu" => Kind::Cpu,
                "pods" => Kind::Pods,
                _ => Kind::Other,
            },
        })
        .collect()
}

/// `resourceThreshold`: `int64(pct × 0.01 × capacity)`, cpu in milli-units, the rest in whole
/// units (returned in milli-units).
fn threshold(pct: f64, capacity: i64, kind: Kind) -> i64 {
    if kind == Kind::Cpu {
        (pct * 0.01 * capacity as f64) as i64
    } else {
        ((pct * 0.01 * whole_units(capacity) as f64) as i64).saturating_mul(1000)
    }
}

/// `usage × 100 / capacity` on the values Koordinator compares (`calcAverageResourceUsagePercent`).
fn percent_value(res: &Res, used: i64, capacity: i64) -> Option<f64> {
    let total = res.value(capacity);
    (capacity != 0 && total != 0).then(|| res.value(used) as f64 / total as f64 * 100.0)
}

impl Run<'_, '_> {
    fn width(&self) -> usize {
        self.res.len()
    }

    /// One pool; `Some(why)` when it stopped before evicting.
    fn pool(
        &mut self,
        ctx: &mut Context<'_>,
        pool: &Pool,
        processed: &mut [bool],
    ) -> Option<String> {
        let cluster = self.cluster;
        let width = self.width();
        // filterNodes: a nil selector takes every node, processed or not.
        let selector = pool.node_selector.as_ref().map(|s| s.resolve(cluster));
        let in_pool: Vec<usize> = (0..self.measured.nodes.len())
            .filter(|&k| match &selector {
                None => true,
                Some(s) => {
                    !processed[k]
                        && s.matches(cluster, &cluster.node(self.measured.nodes[k]).raw.labels)
                }
            })
            .collect();
        if in_pool.is_empty() {
            return Some("no nodes".into());
        }
        let mut run = self.pool_run(pool, &in_pool);
        let members = run.members.len();
        let n_names = run.names.len();

        // classifyNodes.
        let (mut low, mut high, mut prod_low, mut prod_high, mut both_low) =
            (vec![], vec![], vec![], vec![], vec![]);
        for m in 0..members {
            let k = run.members[m];
            let unschedulable = cluster.node(self.measured.nodes[k]).is_unschedulable();
            let (mut is_low, mut over, mut prod_is_low, mut prod_over) =
                (!unschedulable, false, !unschedulable, false);
            for j in 0..n_names {
                let r = run.names[j];
                let l = run.limit(m, j);
                let used = run.usage[k * width + r];
                let prod = run.prod[k * width + r];
                is_low &= used <= l.low;
                over |= used > l.high;
                prod_is_low &= prod <= l.prod_low;
                prod_over |= prod > l.prod_high;
            }
            if is_low {
                if prod_over {
                    prod_high.push(m);
                } else if prod_is_low {
                    both_low.push(m);
                } else {
                    low.push(m);
                }
            } else if over {
                high.push(m);
            } else if prod_over {
                prod_high.push(m);
            } else if prod_is_low {
                prod_low.push(m);
            }
        }
        for list in [
            &mut low,
            &mut high,
            &mut prod_low,
            &mut prod_high,
            &mut both_low,
        ] {
            list.sort_by_key(|&m| cluster.node(self.measured.nodes[run.members[m]]).name());
        }
        let o = &mut self.outcome;
        o.low += low.len();
        o.high += high.len();
        o.prod_low += prod_low.len();
        o.prod_high += prod_high.len();
        o.both_low += both_low.len();

        if high.is_empty() && prod_high.is_empty() {
            return Some("no node is above its high thresholds".into());
        }
        let abnormal = self.anomalous(&run, &high, false);
        let abnormal_prod = self.anomalous(&run, &prod_high, true);
        self.outcome.anomalous += abnormal.len() + abnormal_prod.len();
        if abnormal.is_empty() && abnormal_prod.is_empty() {
            return Some(format!(
                "no source is anomalous yet: none of the {} nodes above their high thresholds \
                 has been above them for more than {} rounds",
                high.len() + prod_high.len(),
                pool.condition.consecutive_abnormalities
            ));
        }
        if low.is_empty() && prod_low.is_empty() && both_low.is_empty() {
            return Some("no node is under its low thresholds".into());
        }
        for (list, prod) in [(&low, false), (&prod_low, true), (&both_low, false)] {
            for &m in list.iter() {
                self.reset(&run, m, prod);
            }
        }
        let all_low = low.len() + prod_low.len() + both_low.len();
        if all_low as i64 <= i64::from(self.args.number_of_nodes) {
            return Some(format!(
                "{all_low} nodes are under their low thresholds, not more than numberOfNodes ({})",
                self.args.number_of_nodes
            ));
        }
        if all_low == in_pool.len() {
            return Some("all nodes are under their low thresholds".into());
        }

        let mut sources = abnormal;
        let mut prod_sources = abnormal_prod;
        self.sort_sources(&run, &mut sources, false);
        self.sort_sources(&run, &mut prod_sources, true);

        // Budgets (targetAvailableUsage), per pool resource.
        let node_only = self.available(&run, &low, false);
        let mut both = self.available(&run, &both_low, false);
        let prod_only = self.available(&run, &prod_low, true);
        let prod_both = self.available(&run, &both_low, true);
        let mut budget: Vec<i128> = node_only.iter().zip(&both).map(|(a, b)| a + b).collect();
        let targets: Vec<usize> = low.iter().chain(&both_low).copied().collect();
        self.pass(ctx, &mut run, &sources, &targets, &mut budget, false);
        // What the node pass left of the both-low room caps their prod room.
        for (b, left) in both.iter_mut().zip(&budget) {
            if *b > *left {
                *b = *left;
            }
        }
        let mut prod_budget: Vec<i128> = (0..n_names)
            .map(|j| prod_only[j] + prod_both[j].min(both[j]))
            .collect();
        let prod_targets: Vec<usize> = prod_low.iter().chain(&both_low).copied().collect();
        if !self.done {
            self.pass(
                ctx,
                &mut run,
                &prod_sources,
                &prod_targets,
                &mut prod_budget,
                true,
            );
        }

        // tryMarkNodesAsNormal.
        for (list, prod) in [(&sources, false), (&prod_sources, true)] {
            for &m in list.iter() {
                let name = cluster.node(self.measured.nodes[run.members[m]]).name();
                let detectors = if prod {
                    &mut self.prod_det
                } else {
                    &mut self.nodes_det
                };
                if let Some(d) = detectors.get(name) {
                    d.mark_normal(self.now, &pool.condition);
                }
            }
        }
        for &m in &high {
            processed[run.members[m]] = true;
        }
        None
    }

    /// The pool's resources, thresholds per member and usage copies.
    fn pool_run<'p>(&self, pool: &'p Pool, in_pool: &[usize]) -> PoolRun<'p> {
        let width = self.width();
        let fix = self.args.keep_high_without_low;
        let base = if pool.use_deviation_thresholds {
            0.0
        } else {
            100.0
        };
        // newThresholds: resources of any of the four maps, and memory.
        let mut specs: Vec<Option<Spec>> = vec![None; width];
        let mut names = Vec::new();
        for (r, res) in self.res.iter().enumerate() {
            let name = res.name.as_str();
            let listed = name == "memory"
                || [&pool.low, &pool.high, &pool.prod_low, &pool.prod_high]
                    .iter()
                    .any(|m| m.contains_key(name));
            if !listed {
                continue;
            }
            names.push(r);
            let pair = |low: &crate::args::Thresholds, high: &crate::args::Thresholds| match low
                .get(name)
            {
                Some(&l) => (Some(l), high.get(name).copied().unwrap_or(0.0)),
                None => match high.get(name) {
                    Some(&h) if fix => (None, h),
                    _ => (Some(base), base),
                },
            };
            let (low, high) = pair(&pool.low, &pool.high);
            let (prod_low, prod_high) = pair(&pool.prod_low, &pool.prod_high);
            specs[r] = Some(Spec {
                low,
                high,
                prod_low,
                prod_high,
            });
        }
        let members: Vec<usize> = in_pool
            .iter()
            .copied()
            .filter(|&k| self.measured.fresh[k])
            .collect();
        // calcAverageResourceUsagePercent over the measured nodes of the pool.
        let (mut average, mut prod_average) = (vec![0.0f64; width], vec![0.0f64; width]);
        if pool.use_deviation_thresholds && !members.is_empty() {
            for &k in &members {
                for (r, res) in self.res.iter().enumerate() {
                    let cap = self.measured.capacity[k * width + r];
                    if let Some(p) = percent_value(res, self.measured.usage[k * width + r], cap) {
                        average[r] += p;
                    }
                    if let Some(p) = percent_value(res, self.measured.prod[k * width + r], cap) {
                        prod_average[r] += p;
                    }
                }
            }
            for v in average.iter_mut().chain(prod_average.iter_mut()) {
                *v /= members.len() as f64;
            }
        }
        let normalize = |p: f64| p.clamp(0.0, 100.0);
        let mut limits = Vec::with_capacity(members.len() * names.len());
        for &k in &members {
            for &r in &names {
                let spec = specs[r].expect("a pool resource has a spec");
                let kind = self.res[r].kind;
                let cap = self.measured.capacity[k * width + r];
                let pair = |low: Option<f64>, high: f64, mean: f64| -> (i64, i64) {
                    if !pool.use_deviation_thresholds {
                        let h = threshold(high, cap, kind);
                        return (low.map_or(h, |l| threshold(l, cap, kind)), h);
                    }
                    match low {
                        Some(0.0) => (cap, cap),
                        Some(l) => (
                            threshold(normalize(mean - l), cap, kind),
                            threshold(normalize(mean + high), cap, kind),
                        ),
                        None => {
                            let h = threshold(normalize(mean + high), cap, kind);
                            (h, h)
                        }
                    }
                };
                let (low, high) = pair(spec.low, spec.high, average[r]);
                let (prod_low, prod_high) = pair(spec.prod_low, spec.prod_high, prod_average[r]);
                limits.push(Limits {
                    low,
                    high,
                    prod_low,
                    prod_high,
                });
            }
        }
        PoolRun {
            pool,
            names,
            specs,
            members,
            limits,
            usage: self.measured.usage.clone(),
            prod: self.measured.prod.clone(),
        }
    }

    /// `filterRealAbnormalNodes`: the sources whose detector says anomalous (all of them when
    /// `consecutiveAbnormalities` is 1).
    fn anomalous(&mut self, run: &PoolRun<'_>, sources: &[usize], prod: bool) -> Vec<usize> {
        let condition = run.pool.condition;
        if condition.consecutive_abnormalities == 1 {
            return sources.to_vec();
        }
        let cache = self.resolved.detector_cache_timeout_ms;
        let mut out = Vec::new();
        for &m in sources {
            let k = run.members[m];
            let name = self.cluster.node(self.measured.nodes[k]).name();
            let update = (self.measured.update_ms[k], self.args.count_metric_updates);
            let detectors = if prod {
                &mut self.prod_det
            } else {
                &mut self.nodes_det
            };
            if detectors.mark_source(name, self.now, &condition, cache, Some(update)) {
                out.push(m);
            }
        }
        out
    }

    /// `resetNodesAsNormal` for one node.
    fn reset(&mut self, run: &PoolRun<'_>, m: usize, prod: bool) {
        let name = self
            .cluster
            .node(self.measured.nodes[run.members[m]])
            .name();
        let detectors = if prod {
            &mut self.prod_det
        } else {
            &mut self.nodes_det
        };
        if let Some(d) = detectors.get(name) {
            d.reset();
        }
    }

    /// `sortNodesByUsage`, highest weighted usage first; ties by node name.
    fn sort_sources(&self, run: &PoolRun<'_>, sources: &mut [usize], prod: bool) {
        let width = self.width();
        let pods_slot = self.res.iter().position(|r| r.kind == Kind::Pods);
        let mut scored: Vec<(i64, &str, usize)> = sources
            .iter()
            .map(|&m| {
                let k = run.members[m];
                let usage = if prod { &run.prod } else { &run.usage };
                // The usage map holds the pool's resources and pods.
                let slots = run
                    .names
                    .iter()
                    .copied()
                    .chain(pods_slot.filter(|p| !run.names.contains(p)));
                let (mut score, mut weights) = (0i64, 0i64);
                for r in slots {
                    let res = &self.res[r];
                    let weight = run.pool.weights.get(&res.name).copied().unwrap_or(0);
                    let cap = res.value(self.measured.capacity[k * width + r]);
                    let used = res.value(usage[k * width + r]);
                    let s = if cap == 0 {
                        0
                    } else {
                        used.min(cap).saturating_mul(1000) / cap
                    };
                    score += s * weight;
                    weights += weight;
                }
                let score = if weights == 0 { 0 } else { score / weights };
                (score, self.cluster.node(self.measured.nodes[k]).name(), m)
            })
            .collect();
        scored.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(b.1)));
        for (slot, (_, _, m)) in sources.iter_mut().zip(scored) {
            *slot = m;
        }
    }

    /// `targetAvailableUsage`: Σ over `nodes` of (high threshold − usage), per pool resource.
    fn available(&self, run: &PoolRun<'_>, nodes: &[usize], prod: bool) -> Vec<i128> {
        let width = self.width();
        let mut out = vec![0i128; run.names.len()];
        for &m in nodes {
            let k = run.members[m];
            for (j, &r) in run.names.iter().enumerate() {
                let l = run.limit(m, j);
                let (limit, used) = if prod {
                    (l.prod_high, run.prod[k * width + r])
                } else {
                    (l.high, run.usage[k * width + r])
                };
                out[j] += i128::from(limit) - i128::from(used);
            }
        }
        out
    }

    /// The node is above its (prod) high threshold on some pool resource.
    fn over(&self, run: &PoolRun<'_>, m: usize, prod: bool) -> bool {
        let k = run.members[m];
        let width = self.width();
        run.names.iter().enumerate().any(|(j, &r)| {
            let l = run.limit(m, j);
            if prod {
                run.prod[k * width + r] > l.prod_high
            } else {
                run.usage[k * width + r] > l.high
            }
        })
    }

    /// `balancePods` for one pass.
    fn pass(
        &mut self,
        ctx: &mut Context<'_>,
        run: &mut PoolRun<'_>,
        sources: &[usize],
        targets: &[usize],
        budget: &mut [i128],
        prod: bool,
    ) {
        if targets.is_empty() || sources.is_empty() {
            return;
        }
        let cluster = self.cluster;
        let node_fit = self.resolved.node_fit;
        let lazy_fit = node_fit && self.args.reserve_only_evicted;
        for &m in sources {
            if self.done {
                return;
            }
            let k = run.members[m];
            // Namespaces and pod selectors here, then the evictor's Filter in one host call.
            let local: Vec<u32> = self
                .measured
                .pods_of(k, prod)
                .iter()
                .copied()
                .filter(|&p| {
                    let pod = cluster.pod(p);
                    self.namespaces.allows(pod.namespace_id())
                        && (self.pod_selectors.is_empty()
                            || self
                                .pod_selectors
                                .iter()
                                .any(|s| s.matches(cluster, &pod.raw.labels)))
                })
                .collect();
            if local.is_empty() {
                continue;
            }
            let mut removable = ctx.filter(&local);
            if node_fit {
                // Pods without a metric never pass nodeFit's usage check.
                removable.retain(|&p| has_metric(cluster.pod(p)));
            }
            if node_fit && !lazy_fit {
                // Koordinator checks every candidate (before sorting), and a fitting one's
                // usage stays on its target. Checked in uid order for determinism.
                removable.sort_by(|&a, &b| cluster.pod(a).uid().cmp(cluster.pod(b).uid()));
                removable.retain(|&p| self.fit(ctx, run, p, targets, prod, true).is_some());
            }
            if removable.is_empty() {
                continue;
            }
            self.sort_pods(run, m, &mut removable, prod);
            self.evict(ctx, run, m, &removable, targets, budget, prod, lazy_fit);
        }
    }

    /// `podFitsAnyNodeWithThreshold`: the first target (in order) where the pod's metric keeps
    /// every pool resource at or under the target's high threshold and the host's nodeFit
    /// predicates pass; with `reserve`, the pod's metric is added to that target's usage.
    fn fit(
        &mut self,
        ctx: &mut Context<'_>,
        run: &mut PoolRun<'_>,
        pod: u32,
        targets: &[usize],
        prod: bool,
        reserve: bool,
    ) -> Option<usize> {
        let width = self.width();
        let p = self.cluster.pod(pod);
        let mut amounts = std::mem::take(&mut self.amounts);
        let mut chunk = std::mem::take(&mut self.chunk);
        let mut ids = std::mem::take(&mut self.chunk_ids);
        amounts.clear();
        amounts.extend(
            run.names
                .iter()
                .map(|&r| metric(p, &self.res[r]).unwrap_or(0)),
        );
        let mut found = None;
        let mut rest = targets.iter().copied();
        'chunks: loop {
            chunk.clear();
            ids.clear();
            for t in rest.by_ref() {
                let k = run.members[t];
                let usage = if prod { &run.prod } else { &run.usage };
                let fits = run.names.iter().enumerate().all(|(j, &r)| {
                    let l = run.limit(t, j);
                    let limit = if prod { l.prod_high } else { l.high };
                    usage[k * width + r] + amounts[j] <= limit
                });
                if fits {
                    chunk.push(t);
                    ids.push(self.measured.nodes[k]);
                    if chunk.len() == FIT_CHUNK {
                        break;
                    }
                }
            }
            if chunk.is_empty() {
                break;
            }
            let fitting = ctx.node_fit(pod, &ids);
            for (i, id) in ids.iter().enumerate() {
                if fitting.contains(id) {
                    found = Some(chunk[i]);
                    break 'chunks;
                }
            }
        }
        if let (Some(t), true) = (found, reserve) {
            let k = run.members[t];
            let usage = if prod { &mut run.prod } else { &mut run.usage };
            for (j, &r) in run.names.iter().enumerate() {
                usage[k * width + r] += amounts[j];
            }
        }
        self.amounts = amounts;
        self.chunk = chunk;
        self.chunk_ids = ids;
        found
    }

    /// `SortPodsByUsage`: `PodSorter` (koord priority class, priority, k8s QoS, koord QoS,
    /// deletion cost, eviction cost), then the usage match against the node's excess (pods
    /// without a metric last), then newest first; ties by uid, namespace, name.
    fn sort_pods(&self, run: &PoolRun<'_>, m: usize, pods: &mut [u32], prod: bool) {
        let width = self.width();
        let k = run.members[m];
        // The excess over the high threshold of each overused resource, with its weight.
        let mut excess: Vec<(usize, i64, i64)> = Vec::new();
        for (j, &r) in run.names.iter().enumerate() {
            let l = run.limit(m, j);
            let (used, limit) = if prod {
                (run.prod[k * width + r], l.prod_high)
            } else {
                (run.usage[k * width + r], l.high)
            };
            if used > limit {
                let res = &self.res[r];
                let weight = run.pool.weights.get(&res.name).copied().unwrap_or(0);
                excess.push((r, res.value(used - limit), weight));
            }
        }
        let keys = &self.keys;
        let cluster = self.cluster;
        let mut keyed: Vec<(PodKey, u32)> = pods
            .iter()
            .map(|&id| {
                let pod = cluster.pod(id);
                let measured = has_metric(pod);
                let mut score = 0.0;
                if measured {
                    let (mut sum, mut weights) = (0.0f64, 0i64);
                    for &(r, cap, weight) in &excess {
                        let res = &self.res[r];
                        let Some(amount) = metric(pod, res) else {
                            continue;
                        };
                        let s = if cap == 0 {
                            0.0
                        } else {
                            let ratio = res.value(amount) as f64 / cap as f64;
                            if ratio >= 1.0 {
                                1.0 / ratio + 1.0
                            } else {
                                ratio
                            }
                        };
                        sum += s * weight as f64;
                        weights += weight;
                    }
                    if weights != 0 {
                        score = sum / weights as f64;
                    }
                }
                let key = PodKey {
                    class: class_order(keys.priority_class(pod)),
                    priority: pod.priority().unwrap_or(0),
                    k8s_qos: match pod.qos() {
                        QosClass::BestEffort => 1,
                        QosClass::Burstable => 2,
                        QosClass::Guaranteed => 3,
                    },
                    koord_qos: qos_order(keys.koord_qos(pod)),
                    deletion_cost: keys.cost(pod, keys.deletion_cost),
                    eviction_cost: keys.cost(pod, keys.eviction_cost),
                    unmeasured: !measured,
                    score,
                    creation_ms: pod.creation_ms(),
                };
                (key, id)
            })
            .collect();
        keyed.sort_by(|(a, pa), (b, pb)| {
            a.cmp(b).then_with(|| {
                let (x, y) = (cluster.pod(*pa), cluster.pod(*pb));
                x.uid()
                    .cmp(y.uid())
                    .then_with(|| x.namespace().cmp(y.namespace()))
                    .then_with(|| x.name().cmp(y.name()))
            })
        });
        for (slot, (_, id)) in pods.iter_mut().zip(keyed) {
            *slot = id;
        }
    }

    /// `evictPods` for one source node.
    #[allow(clippy::too_many_arguments)]
    fn evict(
        &mut self,
        ctx: &mut Context<'_>,
        run: &mut PoolRun<'_>,
        m: usize,
        pods: &[u32],
        targets: &[usize],
        budget: &mut [i128],
        prod: bool,
        lazy_fit: bool,
    ) {
        let cluster = self.cluster;
        let width = self.width();
        let k = run.members[m];
        let node = cluster.node(self.measured.nodes[k]);
        for &id in pods {
            // continueEvictionCond.
            if !self.over(run, m, prod) {
                self.reset(run, m, prod);
                return;
            }
            if budget.iter().any(|&b| b <= 0) {
                return;
            }
            let pod = cluster.pod(id);
            // reserveOnlyEvicted: nodeFit now, against what earlier evictions reserved.
            let target = if lazy_fit {
                match self.fit(ctx, run, id, targets, prod, false) {
                    Some(t) => Some(t),
                    None => {
                        self.details.log(ctx, || {
                            format!(
                                "{}/{} stays on {}: no target fits it below its high thresholds",
                                pod.namespace(),
                                pod.name(),
                                node.name()
                            )
                        });
                        continue;
                    }
                }
            } else {
                None
            };
            let reason = self.reason(run, m, prod);
            if self.args.dry_run {
                self.outcome.dry_run += 1;
                self.details.log(ctx, || {
                    format!(
                        "dry run: would evict {}/{} from {}: {reason}",
                        pod.namespace(),
                        pod.name(),
                        node.name()
                    )
                });
            } else {
                match ctx.propose_eviction(id, &reason) {
                    Ok(()) => self.outcome.proposed += 1,
                    Err(refusal) => {
                        self.outcome.refused += 1;
                        match refusal {
                            Refusal::TotalLimit => {
                                self.done = true;
                                self.outcome
                                    .stopped
                                    .push("the run's total eviction limit was reached".into());
                                return;
                            }
                            Refusal::NodeLimit => return,
                            other => {
                                self.details.log(ctx, || {
                                    format!(
                                        "eviction of {}/{} refused: {other}",
                                        pod.namespace(),
                                        pod.name()
                                    )
                                });
                                continue;
                            }
                        }
                    }
                }
            }
            if !has_metric(pod) {
                continue;
            }
            if let Some(t) = target {
                let tk = run.members[t];
                let usage = if prod { &mut run.prod } else { &mut run.usage };
                for &r in &run.names {
                    usage[tk * width + r] += metric(pod, &self.res[r]).unwrap_or(0);
                }
            }
            for (j, &r) in run.names.iter().enumerate() {
                let res = &self.res[r];
                let amount = if res.kind == Kind::Pods {
                    1000
                } else {
                    metric(pod, res).unwrap_or(0)
                };
                budget[j] -= i128::from(amount);
                run.usage[k * width + r] -= amount;
                if prod {
                    run.prod[k * width + r] -= amount;
                }
            }
        }
    }

    /// `overUtilizedEvictionReason`: each pool resource the node is above, by name.
    fn reason(&self, run: &PoolRun<'_>, m: usize, prod: bool) -> String {
        use std::fmt::Write;
        let width = self.width();
        let k = run.members[m];
        let kind = if prod { "prod" } else { "node" };
        let mut text = String::from("node is overutilized");
        for (j, &r) in run.names.iter().enumerate() {
            let l = run.limit(m, j);
            let (used, limit) = if prod {
                (run.prod[k * width + r], l.prod_high)
            } else {
                (run.usage[k * width + r], l.high)
            };
            if used <= limit {
                continue;
            }
            let cap = self.measured.capacity[k * width + r];
            let percent = |v: i64| {
                if cap == 0 {
                    0.0
                } else {
                    100.0 * v as f64 / cap as f64
                }
            };
            // The configured percentage; with deviations, the effective one.
            let spec = run.specs[r].expect("a pool resource has a spec");
            let configured = if prod { spec.prod_high } else { spec.high };
            let shown = if run.pool.use_deviation_thresholds {
                percent(limit)
            } else {
                configured
            };
            let _ = write!(
                text,
                ", {kind} {} usage({:.2}%)>threshold({:.2}%)",
                self.res[r].name,
                percent(used),
                shown
            );
        }
        text
    }
}

/// The eviction order of a pod before its uid, name and namespace break ties (first evicted
/// first).
#[derive(Debug, Clone, Copy)]
struct PodKey {
    class: u8,
    priority: i32,
    k8s_qos: u8,
    koord_qos: u8,
    deletion_cost: i32,
    eviction_cost: i32,
    unmeasured: bool,
    score: f64,
    creation_ms: i64,
}

impl PodKey {
    fn cmp(&self, other: &PodKey) -> Ordering {
        (
            self.class,
            self.priority,
            self.k8s_qos,
            self.koord_qos,
            self.deletion_cost,
            self.eviction_cost,
            self.unmeasured,
        )
            .cmp(&(
                other.class,
                other.priority,
                other.k8s_qos,
                other.koord_qos,
                other.deletion_cost,
                other.eviction_cost,
                other.unmeasured,
            ))
            // Best usage match first, then newest first.
            .then_with(|| other.score.total_cmp(&self.score))
            .then_with(|| other.creation_ms.cmp(&self.creation_ms))
    }
}

/// `koordPriorityClassOrder`: free < batch < mid < prod < none.
fn class_order(class: PriorityClass) -> u8 {
    match class {
        PriorityClass::Free => 1,
        PriorityClass::Batch => 2,
        PriorityClass::Mid => 3,
        PriorityClass::Prod => 4,
        PriorityClass::None => 5,
    }
}

/// `koordQoSClassOrder`: BE < LS < LSR < LSE = SYSTEM < none.
fn qos_order(qos: KoordQos) -> u8 {
    match qos {
        KoordQos::Be => 1,
        KoordQos::Ls => 2,
        KoordQos::Lsr => 3,
        KoordQos::Lse | KoordQos::System => 4,
        KoordQos::None => 5,
    }
}
