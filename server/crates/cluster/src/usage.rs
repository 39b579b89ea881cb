//! Measured usage: Koordinator's NodeMetric, metrics.k8s.io's NodeMetrics and PodMetrics, and the
//! `node.koordinator.sh/raw-allocatable` node annotation, attached to the snapshot's node and
//! pod tables (layout 3's `node-usage` and `pod-usage` sections).
//!
//! Owns reading those objects (kept raw in the object set: they are not rows of their own) and
//! joining them to nodes by name and to pods by namespace/name (NodeMetric's `podsMetric` carries
//! no uid). Like Koordinator, which carries on past a NodeMetric it cannot read, nothing here
//! refuses a document: an object or annotation that cannot be read is left out and named in an
//! [`WarningCode::InvalidUsage`] warning, and a metric for a node or pod the snapshot does not
//! hold in a [`WarningCode::UsageWithoutObject`] one. NodeMetric `podsMetric` entries of pods no
//! longer in the cluster are not warned about: Koordinator counts them in the node's usage, so
//! they are summed into [`NodeUsage::gone_pods`].
//!
//! Precedence: a node's usage comes from its NodeMetric when it has one, else from its
//! NodeMetrics; a pod's from its NodeMetric entry, else from its PodMetrics.

use std::collections::HashMap;
use std::sync::Arc;

use rebalancer_policy_sdk::model::{NodeUsage, PodUsage, Quantity, StrId, UsageSource};
use serde::Deserialize;

use super::convert::{self, Ctx};
use super::objects::{Entry, Kind, ObjectSet, qualified};
use super::wire::{QtyMap, Str};
use super::{IngestWarning, WarningCode, sample_list};

/// The annotation koord-manager writes with a node's allocatable before overcommitment.
pub const RAW_ALLOCATABLE: &str = "node.koordinator.sh/raw-allocatable";

/// The usage kinds, by `kind` and API group.
const KINDS: [(&str, &str); 3] = [
    ("NodeMetric", "slo.koordinator.sh"),
    ("NodeMetrics", "metrics.k8s.io"),
    ("PodMetrics", "metrics.k8s.io"),
];

/// Whether `kind` of `api_version` is read here or by [`super::topology`] (so it is not
/// reported as an unknown kind).
pub(crate) fn is_usage_kind(kind: &str, api_version: &str) -> bool {
    let group = api_version.split_once('/').map_or("", |(g, _)| g);
    is_metric_kind(kind, api_version)
        || (kind == super::topology::KIND && group == super::topology::GROUP)
}

/// Whether `kind` of `api_version` is one of the usage kinds this module reads.
fn is_metric_kind(kind: &str, api_version: &str) -> bool {
    let group = api_version.split_once('/').map_or("", |(g, _)| g);
    KINDS.iter().any(|&(k, g)| k == kind && g == group)
}

// ----------------------------------------------------------------------------------- the wire

/// The object being read: its identity (from the object set) and how warnings name it.
struct Named<'e> {
    namespace: &'e str,
    name: &'e str,
    what: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct NodeMetric<'a> {
    #[serde(default)]
    spec: Option<NodeMetricSpec>,
    #[serde(borrow)]
    status: Option<NodeMetricStatus<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct NodeMetricSpec {
    metric_collect_policy: Option<MetricCollectPolicy>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct MetricCollectPolicy {
    aggregate_duration_seconds: Option<i64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct NodeMetricStatus<'a> {
    #[serde(borrow)]
    update_time: Option<Str<'a>>,
    #[serde(borrow)]
    node_metric: Option<NodeMetricInfo<'a>>,
    #[serde(borrow)]
    pods_metric: Option<Vec<PodMetricInfo<'a>>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct NodeMetricInfo<'a> {
    #[serde(borrow)]
    node_usage: Option<ResourceMap<'a>>,
    #[serde(borrow)]
    system_usage: Option<ResourceMap<'a>>,
}

#[derive(Deserialize)]
struct ResourceMap<'a> {
    #[serde(borrow)]
    resources: Option<QtyMap<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PodMetricInfo<'a> {
    #[serde(borrow)]
    namespace: Option<Str<'a>>,
    #[serde(borrow)]
    name: Option<Str<'a>>,
    #[serde(borrow)]
    pod_usage: Option<ResourceMap<'a>>,
}

/// metrics.k8s.io NodeMetrics.
#[derive(Deserialize)]
struct NodeMetrics<'a> {
    #[serde(borrow)]
    timestamp: Option<Str<'a>>,
    #[serde(borrow)]
    window: Option<Str<'a>>,
    #[serde(borrow)]
    usage: Option<QtyMap<'a>>,
}

/// metrics.k8s.io PodMetrics.
#[derive(Deserialize)]
struct PodMetrics<'a> {
    #[serde(borrow)]
    timestamp: Option<Str<'a>>,
    #[serde(borrow)]
    containers: Option<Vec<ContainerMetrics<'a>>>,
}

#[derive(Deserialize)]
struct ContainerMetrics<'a> {
    #[serde(borrow)]
    usage: Option<QtyMap<'a>>,
}

// ------------------------------------------------------------------------------ parse cache

/// A usage object as read from its JSON, before it is joined to the snapshot's rows: what a
/// live build keeps while the object's JSON is unchanged, so a revision re-reads only the
/// metrics that changed (its quantities' resource ids stay valid while the string table does).
pub(crate) enum Parsed {
    /// `None`: no `status` yet (Koordinator skips such a node).
    NodeMetric(Option<ParsedNodeMetric>),
    NodeMetrics {
        update_ms: Option<i64>,
        window_ms: Option<i64>,
        usage: Vec<Quantity>,
    },
    PodMetrics {
        total: Vec<Quantity>,
    },
}

pub(crate) struct ParsedNodeMetric {
    update_ms: Option<i64>,
    window_ms: Option<i64>,
    node_total: Vec<Quantity>,
    system: Vec<Quantity>,
    /// `(namespace, name, usage)` of each `podsMetric` entry.
    pods: Vec<(String, String, Vec<Quantity>)>,
}

/// Parsed usage objects by the key of their packed JSON (see `PackedJson::key`), with the
/// error text of those that could not be read.
pub(crate) type ParseCache<T> = HashMap<usize, Result<Arc<T>, String>>;

/// The cache a live build reads (`previous`) and the one it fills for the next (`next`: only
/// the objects of this build, so deleted ones are forgotten).
pub(crate) struct Reuse<'c, T> {
    pub previous: &'c ParseCache<T>,
    pub next: &'c mut ParseCache<T>,
}

impl<T> Reuse<'_, T> {
    /// The object at `entry` parsed, from the previous build when its JSON is the same object.
    pub(crate) fn get_or_parse(
        reuse: &mut Option<Reuse<'_, T>>,
        objects: &ObjectSet,
        entry: &Entry,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> Result<Arc<T>, String> {
        let key = objects.store.shared(entry.span).map(|json| json.key());
        if let (Some(reuse), Some(key)) = (reuse.as_mut(), key)
            && let Some(found) = reuse.previous.get(&key)
        {
            reuse.next.insert(key, found.clone());
            return found.clone();
        }
        let parsed = parse(&objects.store.get(entry.span)).map(Arc::new);
        if let (Some(reuse), Some(key)) = (reuse.as_mut(), key) {
            reuse.next.insert(key, parsed.clone());
        }
        parsed
    }
}

// ------------------------------------------------------------------------------------- attach

/// What went wrong, gathered into one warning per code.
#[derive(Default)]
struct Problems {
    invalid: Vec<String>,
    orphans: Vec<String>,
}

/// Fill the node and pod usage tables of the snapshot being built in `ctx` (its node and pod
/// rows are complete) from the usage objects of `objects`; the warnings of what was left out.
pub(crate) fn attach(
    ctx: &mut Ctx,
    objects: &ObjectSet,
    joins: &mut Joins,
    mut reuse: Option<Reuse<'_, Parsed>>,
) -> Vec<IngestWarning> {
    let mut problems = Problems::default();
    let tables = ctx.builder.snapshot();
    let node_count = tables.nodes.len();
    let pod_count = tables.pods.len();
    let mut node_usage = vec![NodeUsage::default(); node_count];
    let mut pod_usage = vec![PodUsage::default(); pod_count];

    let raw_key = ctx.builder.lookup(RAW_ALLOCATABLE);

    // Raw allocatable, from the nodes' annotations.
    if let Some(key) = raw_key {
        let tables = ctx.builder.snapshot();
        let found: Vec<(usize, String)> = tables
            .node_annotations
            .iter()
            .enumerate()
            .filter_map(|(i, a)| {
                a.iter()
                    .find(|kv| kv.key == key)
                    .map(|kv| (i, ctx.builder.str(kv.value).to_owned()))
            })
            .collect();
        for (node, text) in found {
            let name = ctx
                .builder
                .str(ctx.builder.snapshot().nodes[node].name)
                .to_owned();
            match resource_list(ctx, &text) {
                Ok(list) => node_usage[node].raw_allocatable = list,
                Err(e) => problems.invalid.push(format!(
                    "Node {name}: annotation {RAW_ALLOCATABLE}: {e} (allocatable is used)"
                )),
            }
        }
    }

    let usage_entries: Vec<&Entry> = objects
        .entries
        .iter()
        .filter(|e| {
            matches!(&e.kind, Kind::Other(_)) && is_metric_kind(e.kind.as_str(), &e.api_version)
        })
        .collect();
    // NodeMetrics first, so that a NodeMetric of the same node replaces it; PodMetrics after
    // NodeMetric, so that they only fill pods without a NodeMetric entry.
    let order = |e: &&Entry| match e.kind.as_str() {
        "NodeMetrics" => 0,
        "NodeMetric" => 1,
        _ => 2,
    };
    let mut usage_entries = usage_entries;
    usage_entries.sort_by_key(order);
    for entry in usage_entries {
        let obj = Named {
            namespace: &entry.namespace,
            name: &entry.name,
            what: format!(
                "{} {}",
                entry.kind.as_str(),
                qualified(&entry.namespace, &entry.name)
            ),
        };
        let kind = entry.kind.as_str();
        let parsed = Reuse::get_or_parse(&mut reuse, objects, entry, |text| match kind {
            "NodeMetric" => serde_json::from_str::<NodeMetric<'_>>(text)
                .map_err(|e| e.to_string())
                .and_then(|m| parse_node_metric(ctx, &m)),
            "NodeMetrics" => serde_json::from_str::<NodeMetrics<'_>>(text)
                .map_err(|e| e.to_string())
                .and_then(|m| parse_node_metrics(ctx, &m)),
            _ => serde_json::from_str::<PodMetrics<'_>>(text)
                .map_err(|e| e.to_string())
                .and_then(|m| parse_pod_metrics(ctx, &m)),
        });
        let parsed = match parsed {
            Ok(p) => p,
            Err(e) => {
                problems.invalid.push(format!("{}: {e}", obj.what));
                continue;
            }
        };
        match &*parsed {
            Parsed::NodeMetric(m) => node_metric(
                ctx,
                m.as_ref(),
                joins,
                &mut node_usage,
                &mut pod_usage,
                &obj,
                &mut problems,
            ),
            Parsed::NodeMetrics {
                update_ms,
                window_ms,
                usage,
            } => node_metrics(
                ctx,
                (*update_ms, *window_ms, usage),
                joins,
                &mut node_usage,
                &obj,
                &mut problems,
            ),
            Parsed::PodMetrics { total } => {
                pod_metrics(ctx, total, joins, &mut pod_usage, &obj, &mut problems)
            }
        }
    }

    let tables = ctx.builder.snapshot_mut();
    tables.node_usage = node_usage;
    tables.pod_usage = pod_usage;
    warnings(problems)
}

fn warnings(problems: Problems) -> Vec<IngestWarning> {
    let mut out = Vec::new();
    if !problems.invalid.is_empty() {
        let n = problems.invalid.len();
        out.push(IngestWarning::new(
            WarningCode::InvalidUsage,
            n,
            format!(
                "{n} usage object(s) or annotation(s) could not be read and are ignored: {}",
                sample_list(problems.invalid.iter().map(String::as_str), n)
            ),
        ));
    }
    if !problems.orphans.is_empty() {
        let n = problems.orphans.len();
        out.push(IngestWarning::new(
            WarningCode::UsageWithoutObject,
            n,
            format!(
                "{n} metric(s) name a node or pod the snapshot does not hold and are ignored: {}",
                sample_list(problems.orphans.iter().map(String::as_str), n)
            ),
        ));
    }
    out
}

/// A JSON resource list (`{"cpu": "8", "memory": "16Gi"}`), in milli-units.
fn resource_list(ctx: &mut Ctx, text: &str) -> Result<Vec<Quantity>, String> {
    let map: QtyMap<'_> = serde_json::from_str(text).map_err(|e| e.to_string())?;
    quantities(ctx, &Some(map), "")
}

fn quantities(
    ctx: &mut Ctx,
    map: &Option<QtyMap<'_>>,
    base: &str,
) -> Result<Vec<Quantity>, String> {
    convert::milli_list(ctx, map, base, false).map_err(|e| {
        if e.field.is_empty() {
            e.message.to_string()
        } else {
            format!("{}: {}", e.field, e.message)
        }
    })
}

fn resources(
    ctx: &mut Ctx,
    map: &Option<ResourceMap<'_>>,
    base: &str,
) -> Result<Vec<Quantity>, String> {
    match map {
        Some(m) => quantities(ctx, &m.resources, base),
        None => Ok(Vec::new()),
    }
}

fn time(s: &Option<Str<'_>>, field: &str) -> Result<Option<i64>, String> {
    match s.as_deref() {
        None | Some("") => Ok(None),
        Some(t) => convert::parse_time_ms(t)
            .map(Some)
            .ok_or_else(|| format!("{field}: {t:?} is not an RFC 3339 time")),
    }
}

/// A Go duration as metrics-server writes it (`30s`, `1m0s`), in ms.
fn duration_ms(s: &str) -> Option<i64> {
    let ns = rebalancer_policy_sdk::k8s::duration::parse_go_duration(s).ok()?;
    i64::try_from(ns / 1_000_000).ok()
}

/// Add `b` into `a`, resource by resource.
fn add(a: &mut Vec<Quantity>, b: &[Quantity]) {
    for q in b {
        match a.iter_mut().find(|x| x.resource == q.resource) {
            Some(x) => x.milli = x.milli.saturating_add(q.milli),
            None => a.push(*q),
        }
    }
}

/// Nodes by name and pods by namespace/name in the tables being built, for the objects that
/// name them (metrics, NodeResourceTopology, koordlet's `pod-cpu-allocs`: NodeMetric's
/// `podsMetric` carries no uid). Each map is built once per snapshot build, on first use, and
/// shared by the usage and topology passes.
#[derive(Default)]
pub(crate) struct Joins {
    nodes: Option<HashMap<String, usize>>,
    /// Pods by namespace and the hash of their name, checked against the name on lookup (no
    /// copy of 150,000 names per build); the rare second pod of a hash is in `pods_clashing`.
    pods: Option<HashMap<(StrId, u64), usize, convert::FxBuild>>,
    pods_clashing: HashMap<(StrId, String), usize>,
}

fn name_hash(name: &str) -> u64 {
    use std::hash::BuildHasher;
    convert::FxBuild::default().hash_one(name)
}

impl Joins {
    /// The index of node `name`.
    pub(crate) fn node(&mut self, ctx: &Ctx, name: &str) -> Option<usize> {
        let index = self.nodes.get_or_insert_with(|| {
            let b = &ctx.builder;
            b.snapshot()
                .nodes
                .iter()
                .enumerate()
                .map(|(i, n)| (b.str(n.name).to_owned(), i))
                .collect()
        });
        index.get(name).copied()
    }

    /// The index of pod `namespace/name`.
    pub(crate) fn pod(&mut self, ctx: &Ctx, namespace: &str, name: &str) -> Option<usize> {
        let ns = ctx.builder.lookup(namespace)?;
        let pods = &ctx.builder.snapshot().pods;
        let clashing = &mut self.pods_clashing;
        let index = self.pods.get_or_insert_with(|| {
            let mut index =
                HashMap::with_capacity_and_hasher(pods.len(), convert::FxBuild::default());
            for (i, p) in pods.iter().enumerate() {
                match index.entry((p.namespace, name_hash(&p.name))) {
                    std::collections::hash_map::Entry::Occupied(_) => {
                        clashing.insert((p.namespace, p.name.clone()), i);
                    }
                    std::collections::hash_map::Entry::Vacant(slot) => {
                        slot.insert(i);
                    }
                }
            }
            index
        });
        match index.get(&(ns, name_hash(name))) {
            Some(&i) if pods[i].name == name => Some(i),
            Some(_) => clashing.get(&(ns, name.to_owned())).copied(),
            None => None,
        }
    }
}

fn parse_node_metric(ctx: &mut Ctx, m: &NodeMetric<'_>) -> Result<Parsed, String> {
    let Some(status) = &m.status else {
        return Ok(Parsed::NodeMetric(None));
    };
    let update_ms = time(&status.update_time, "status.updateTime")?;
    let (node_total, system) = match &status.node_metric {
        Some(info) => (
            resources(
                ctx,
                &info.node_usage,
                "status.nodeMetric.nodeUsage.resources",
            )?,
            resources(
                ctx,
                &info.system_usage,
                "status.nodeMetric.systemUsage.resources",
            )?,
        ),
        None => (Vec::new(), Vec::new()),
    };
    let mut pods = Vec::new();
    for (i, p) in status.pods_metric.iter().flatten().enumerate() {
        let usage = resources(
            ctx,
            &p.pod_usage,
            &format!("status.podsMetric[{i}].podUsage.resources"),
        )?;
        pods.push((
            p.namespace.as_deref().unwrap_or("").to_owned(),
            p.name.as_deref().unwrap_or("").to_owned(),
            usage,
        ));
    }
    let window_ms = m
        .spec
        .as_ref()
        .and_then(|s| s.metric_collect_policy.as_ref())
        .and_then(|p| p.aggregate_duration_seconds)
        .filter(|&s| s > 0)
        .map(|s| s.saturating_mul(1000));
    Ok(Parsed::NodeMetric(Some(ParsedNodeMetric {
        update_ms,
        window_ms,
        node_total,
        system,
        pods,
    })))
}

/// The node a metric object is named after, or an orphan problem.
fn node_of(
    ctx: &Ctx,
    joins: &mut Joins,
    obj: &Named<'_>,
    problems: &mut Problems,
) -> Option<usize> {
    let node = joins.node(ctx, obj.name);
    if node.is_none() {
        problems
            .orphans
            .push(format!("{} (no such node)", obj.what));
    }
    node
}

#[allow(clippy::too_many_arguments)]
fn node_metric(
    ctx: &mut Ctx,
    m: Option<&ParsedNodeMetric>,
    joins: &mut Joins,
    node_usage: &mut [NodeUsage],
    pod_usage: &mut [PodUsage],
    obj: &Named<'_>,
    problems: &mut Problems,
) {
    let Some(node) = node_of(ctx, joins, obj, problems) else {
        return;
    };
    let Some(m) = m else {
        // Not reported yet: Koordinator skips the node; so do we (no usage).
        return;
    };
    let mut gone = Vec::new();
    for (ns, pod, usage) in &m.pods {
        match joins.pod(ctx, ns, pod) {
            Some(index) => {
                pod_usage[index] = PodUsage {
                    source: UsageSource::NodeMetric,
                    usage: usage.clone(),
                }
            }
            None => add(&mut gone, usage),
        }
    }
    node_usage[node] = NodeUsage {
        source: UsageSource::NodeMetric,
        update_ms: m.update_ms,
        window_ms: m.window_ms,
        node: m.node_total.clone(),
        system: m.system.clone(),
        gone_pods: gone,
        raw_allocatable: std::mem::take(&mut node_usage[node].raw_allocatable),
    };
}

fn parse_node_metrics(ctx: &mut Ctx, m: &NodeMetrics<'_>) -> Result<Parsed, String> {
    let update_ms = time(&m.timestamp, "timestamp")?;
    let window_ms = match m.window.as_deref() {
        None | Some("") => None,
        Some(w) => Some(duration_ms(w).ok_or_else(|| format!("window: {w:?} is not a duration"))?),
    };
    let usage = quantities(ctx, &m.usage, "usage")?;
    Ok(Parsed::NodeMetrics {
        update_ms,
        window_ms,
        usage,
    })
}

fn node_metrics(
    ctx: &mut Ctx,
    (update_ms, window_ms, usage): (Option<i64>, Option<i64>, &[Quantity]),
    joins: &mut Joins,
    node_usage: &mut [NodeUsage],
    obj: &Named<'_>,
    problems: &mut Problems,
) {
    let Some(node) = node_of(ctx, joins, obj, problems) else {
        return;
    };
    node_usage[node] = NodeUsage {
        source: UsageSource::MetricsApi,
        update_ms,
        window_ms,
        node: usage.to_vec(),
        system: Vec::new(),
        gone_pods: Vec::new(),
        raw_allocatable: std::mem::take(&mut node_usage[node].raw_allocatable),
    };
}

fn parse_pod_metrics(ctx: &mut Ctx, m: &PodMetrics<'_>) -> Result<Parsed, String> {
    time(&m.timestamp, "timestamp")?;
    let mut total = Vec::new();
    for (i, c) in m.containers.iter().flatten().enumerate() {
        let usage = quantities(ctx, &c.usage, &format!("containers[{i}].usage"))?;
        add(&mut total, &usage);
    }
    Ok(Parsed::PodMetrics { total })
}

fn pod_metrics(
    ctx: &mut Ctx,
    total: &[Quantity],
    joins: &mut Joins,
    pod_usage: &mut [PodUsage],
    obj: &Named<'_>,
    problems: &mut Problems,
) {
    let Some(index) = joins.pod(ctx, obj.namespace, obj.name) else {
        problems.orphans.push(format!("{} (no such pod)", obj.what));
        return;
    };
    if pod_usage[index].source == UsageSource::None {
        pod_usage[index] = PodUsage {
            source: UsageSource::MetricsApi,
            usage: total.to_vec(),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::duration_ms;

    #[test]
    fn go_durations() {
        assert_eq!(duration_ms("30s"), Some(30_000));
        assert_eq!(duration_ms("1m0s"), Some(60_000));
        assert_eq!(duration_ms("1.5s"), Some(1_500));
        assert_eq!(duration_ms("250ms"), Some(250));
        assert_eq!(duration_ms("1h2m3s"), Some(3_723_000));
        assert_eq!(duration_ms(""), None);
        assert_eq!(duration_ms("5x"), None);
    }
}
