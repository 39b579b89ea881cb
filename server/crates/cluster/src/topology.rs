//! CPU topology: NodeResourceTopology objects and koordlet's annotations on them, attached to
//! the snapshot's node table (layout 3's `node-cpu-topology` section).
//!
//! Owns reading `topology.node.k8s.io/v1alpha1` NodeResourceTopology (`zones`,
//! `topologyPolicies`) and the Koordinator annotations koordlet writes on it
//! (`node.koordinator.sh/cpu-topology`, `pod-cpu-allocs`, `cpu-shared-pools`,
//! `be-cpu-shared-pools`, `kubelet.koordinator.sh/cpu-manager-policy`, and the copies of the
//! node's `node.koordinator.sh/reservation` and `system-qos-resource`; those two are read from
//! the Node when the NRT lacks them). CPU lists go through the SDK's parser, so host and
//! policies agree. Like Koordinator, nothing here refuses a document: each annotation or field
//! that cannot be read is left out (the rest of the node's topology is kept) and named in one
//! [`WarningCode::InvalidTopology`] warning; an NRT for a node the snapshot does not hold is
//! named there too.

use std::collections::HashMap;

use rebalancer_policy_sdk::k8s::cpuset::parse_cpu_list;
use rebalancer_policy_sdk::model::{
    CpuInfo, CpuPool, KeyValue, NONE, NodeCpuTopology, NumaZone, PodCpuAlloc, StrId, ZoneResource,
};
use serde::Deserialize;

use super::convert::Ctx;
use super::objects::{Kind, ObjectSet};
use super::usage::{Joins, Reuse};
use super::wire::{ObjectMeta, Qty};
use super::{IngestWarning, WarningCode, sample_list};

pub const CPU_TOPOLOGY: &str = "node.koordinator.sh/cpu-topology";
pub const POD_CPU_ALLOCS: &str = "node.koordinator.sh/pod-cpu-allocs";
pub const CPU_SHARED_POOLS: &str = "node.koordinator.sh/cpu-shared-pools";
pub const BE_CPU_SHARED_POOLS: &str = "node.koordinator.sh/be-cpu-shared-pools";
pub const CPU_MANAGER_POLICY: &str = "kubelet.koordinator.sh/cpu-manager-policy";
pub const NODE_RESERVATION: &str = "node.koordinator.sh/reservation";
pub const SYSTEM_QOS_RESOURCE: &str = "node.koordinator.sh/system-qos-resource";

pub(crate) const KIND: &str = "NodeResourceTopology";
pub(crate) const GROUP: &str = "topology.node.k8s.io";

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Nrt<'a> {
    #[serde(borrow, default)]
    metadata: ObjectMeta<'a>,
    #[serde(default)]
    topology_policies: Option<Vec<String>>,
    #[serde(borrow, default)]
    zones: Option<Vec<Zone<'a>>>,
}

#[derive(Deserialize)]
struct Zone<'a> {
    name: Option<String>,
    #[serde(rename = "type")]
    zone_type: Option<String>,
    #[serde(borrow, default)]
    resources: Option<Vec<ZoneRes<'a>>>,
}

#[derive(Deserialize)]
struct ZoneRes<'a> {
    name: Option<String>,
    #[serde(borrow)]
    capacity: Option<Qty<'a>>,
    #[serde(borrow)]
    allocatable: Option<Qty<'a>>,
    #[serde(borrow)]
    available: Option<Qty<'a>>,
}

#[derive(Deserialize)]
struct CpuTopologyJson {
    #[serde(default)]
    detail: Option<Vec<CpuJson>>,
}

#[derive(Deserialize)]
struct CpuJson {
    id: u32,
    core: u32,
    socket: u32,
    node: u32,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct KubeletPolicyJson {
    #[serde(default)]
    policy: String,
    #[serde(default)]
    options: Option<HashMap<String, String>>,
    #[serde(default, rename = "reservedCPUs")]
    reserved_cpus: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PodAllocJson {
    #[serde(default)]
    namespace: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    uid: String,
    #[serde(default)]
    cpuset: String,
    #[serde(default)]
    managed_by_kubelet: bool,
}

#[derive(Deserialize)]
struct PoolJson {
    #[serde(default)]
    socket: i32,
    #[serde(default)]
    node: i32,
    #[serde(default)]
    cpuset: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReservationJson {
    #[serde(default, rename = "reservedCPUs")]
    reserved_cpus: String,
    #[serde(default)]
    apply_policy: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SystemQosJson {
    #[serde(default)]
    cpuset: String,
    #[serde(default)]
    cpuset_exclusive: Option<bool>,
}

/// Fill the node CPU topology table of the snapshot being built in `ctx` (its node and pod rows
/// are complete) from the NodeResourceTopology objects of `objects` and the nodes' annotations.
pub(crate) fn attach(
    ctx: &mut Ctx,
    objects: &ObjectSet,
    joins: &mut Joins,
    mut reuse: Option<Reuse<'_, ParsedNrt>>,
) -> Vec<IngestWarning> {
    let mut problems: Vec<String> = Vec::new();
    let tables = ctx.builder.snapshot();
    let node_count = tables.nodes.len();
    let mut topology = vec![NodeCpuTopology::default(); node_count];

    for entry in objects.entries.iter().filter(|e| {
        matches!(&e.kind, Kind::Other(k) if &**k == KIND)
            && e.api_version.split_once('/').map_or("", |(g, _)| g) == GROUP
    }) {
        let name = &*entry.name;
        let parsed = Reuse::get_or_parse(&mut reuse, objects, entry, |text| {
            let nrt: Nrt<'_> = serde_json::from_str(text).map_err(|e| e.to_string())?;
            Ok(parse_nrt(
                ctx,
                &nrt,
                &format!("NodeResourceTopology {name}"),
            ))
        });
        let parsed = match parsed {
            Ok(p) => p,
            Err(e) => {
                problems.push(format!("NodeResourceTopology {name}: {e}"));
                continue;
            }
        };
        let Some(node) = joins.node(ctx, name) else {
            problems.push(format!("NodeResourceTopology {name}: no such node"));
            continue;
        };
        problems.extend(parsed.problems.iter().cloned());
        let t = &mut topology[node];
        *t = parsed.topology.clone();
        // koordlet names the kubelet-pinned pods; join them to this snapshot's pods.
        for alloc in &mut t.pod_allocs {
            let (namespace, pod) = (
                ctx.builder.str(alloc.namespace).to_owned(),
                ctx.builder.str(alloc.name).to_owned(),
            );
            alloc.pod = joins.pod(ctx, &namespace, &pod).map_or(NONE, |i| i as u32);
        }
    }

    // The node's own copies of the reservation and system-QoS annotations, where the NRT has
    // none (a cluster without koordlet's NRT still says what it reserves).
    let (reservation_key, qos_key) = (
        ctx.builder.lookup(NODE_RESERVATION),
        ctx.builder.lookup(SYSTEM_QOS_RESOURCE),
    );
    if reservation_key.is_some() || qos_key.is_some() {
        for (node, t) in topology.iter_mut().enumerate() {
            let tables = ctx.builder.snapshot();
            let find = |key: Option<StrId>| {
                let key = key?;
                tables
                    .node_annotations
                    .get(node)?
                    .iter()
                    .find(|kv| kv.key == key)
                    .map(|kv| ctx.builder.str(kv.value).to_owned())
            };
            let (reservation, qos) = (find(reservation_key), find(qos_key));
            let name = ctx.builder.str(tables.nodes[node].name).to_owned();
            let what = format!("Node {name}");
            if t.node_reserved.is_empty()
                && t.node_reservation_policy == 0
                && let Some(text) = reservation
            {
                reservation_annotation(ctx, t, &text, &what, &mut problems);
            }
            if t.system_qos_cpus.is_empty()
                && let Some(text) = qos
            {
                system_qos_annotation(t, &text, &what, &mut problems);
            }
        }
    }

    ctx.builder.snapshot_mut().node_cpu = topology;
    if problems.is_empty() {
        return Vec::new();
    }
    let n = problems.len();
    vec![IngestWarning::new(
        WarningCode::InvalidTopology,
        n,
        format!(
            "{n} CPU topology object(s) or annotation(s) could not be read and are ignored: {}",
            sample_list(problems.iter().map(String::as_str), n)
        ),
    )]
}

fn zone(ctx: &mut Ctx, z: &Zone<'_>) -> Result<NumaZone, String> {
    let name = z.name.as_deref().unwrap_or("");
    let mut resources = Vec::new();
    for r in z.resources.iter().flatten() {
        let rname = r.name.as_deref().unwrap_or("");
        let milli = |q: &Option<Qty<'_>>, field: &str| -> Result<i64, String> {
            match q {
                None => Ok(0),
                Some(q) => rebalancer_policy_sdk::k8s::quantity::parse_milli(&q.0)
                    .map_err(|e| format!("resources[{rname}].{field}: {e}")),
            }
        };
        resources.push(ZoneResource {
            name: ctx.builder.intern(rname),
            capacity: milli(&r.capacity, "capacity")?,
            allocatable: milli(&r.allocatable, "allocatable")?,
            available: milli(&r.available, "available")?,
        });
    }
    Ok(NumaZone {
        name: ctx.builder.intern(name),
        numa: name.strip_prefix("node-").and_then(|id| id.parse().ok()),
        zone_type: ctx.builder.intern(z.zone_type.as_deref().unwrap_or("")),
        resources,
    })
}

fn cpus(text: &str, field: &str) -> Result<Vec<u32>, String> {
    parse_cpu_list(text).map_err(|e| format!("{field}: {e}"))
}

/// koordlet's annotations, read through `get` (the NRT's annotations).
/// An NRT as read from its JSON, before it is joined to the snapshot's node and pods (its
/// `pod_allocs` have no pod index yet): what a live build keeps while the NRT is unchanged.
pub(crate) struct ParsedNrt {
    topology: NodeCpuTopology,
    /// The parts that could not be read, each named.
    problems: Vec<String>,
}

fn parse_nrt(ctx: &mut Ctx, nrt: &Nrt<'_>, what: &str) -> ParsedNrt {
    let mut problems = Vec::new();
    let mut t = NodeCpuTopology {
        has_nrt: true,
        ..NodeCpuTopology::default()
    };
    t.topology_policies = nrt
        .topology_policies
        .iter()
        .flatten()
        .map(|p| ctx.builder.intern(p))
        .collect();
    for (i, z) in nrt.zones.iter().flatten().enumerate() {
        match zone(ctx, z) {
            Ok(z) => t.zones.push(z),
            Err(e) => problems.push(format!("{what}: zones[{i}]: {e}")),
        }
    }
    let annotations: HashMap<&str, &str> = nrt
        .metadata
        .annotations
        .as_ref()
        .map(|m| m.0.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect())
        .unwrap_or_default();
    read_annotations(
        ctx,
        &mut t,
        &|key| annotations.get(key).copied(),
        what,
        &mut problems,
    );
    ParsedNrt {
        topology: t,
        problems,
    }
}

fn read_annotations<'a>(
    ctx: &mut Ctx,
    t: &mut NodeCpuTopology,
    get: &dyn Fn(&str) -> Option<&'a str>,
    what: &str,
    problems: &mut Vec<String>,
) {
    let mut fail = |key: &str, e: String| problems.push(format!("{what}: annotation {key}: {e}"));

    if let Some(text) = get(CPU_TOPOLOGY) {
        match serde_json::from_str::<CpuTopologyJson>(text) {
            Ok(topo) => {
                let mut list: Vec<CpuInfo> = topo
                    .detail
                    .into_iter()
                    .flatten()
                    .map(|c| CpuInfo {
                        id: c.id,
                        core: c.core,
                        socket: c.socket,
                        numa: c.node,
                    })
                    .collect();
                list.sort_by_key(|c| c.id);
                if list.windows(2).any(|w| w[0].id == w[1].id) {
                    fail(CPU_TOPOLOGY, "a CPU id appears twice".into());
                } else {
                    t.cpus = list;
                }
            }
            Err(e) => fail(CPU_TOPOLOGY, e.to_string()),
        }
    }
    if let Some(text) = get(CPU_MANAGER_POLICY) {
        match serde_json::from_str::<KubeletPolicyJson>(text) {
            Ok(p) => match cpus(&p.reserved_cpus, "reservedCPUs") {
                Ok(reserved) => {
                    t.kubelet_policy = ctx.builder.intern(&p.policy);
                    let mut options: Vec<(String, String)> =
                        p.options.into_iter().flatten().collect();
                    options.sort();
                    t.kubelet_options = options
                        .iter()
                        .map(|(k, v)| KeyValue {
                            key: ctx.builder.intern(k),
                            value: ctx.builder.intern(v),
                        })
                        .collect();
                    t.kubelet_reserved = reserved;
                }
                Err(e) => fail(CPU_MANAGER_POLICY, e),
            },
            Err(e) => fail(CPU_MANAGER_POLICY, e.to_string()),
        }
    }
    if let Some(text) = get(POD_CPU_ALLOCS) {
        match serde_json::from_str::<Option<Vec<PodAllocJson>>>(text) {
            Ok(list) => {
                for (i, a) in list.into_iter().flatten().enumerate() {
                    match cpus(&a.cpuset, &format!("[{i}].cpuset")) {
                        Ok(set) => {
                            t.pod_allocs.push(PodCpuAlloc {
                                namespace: ctx.builder.intern(&a.namespace),
                                name: ctx.builder.intern(&a.name),
                                uid: ctx.builder.intern(&a.uid),
                                // Joined to the snapshot's pods by `attach`.
                                pod: NONE,
                                cpus: set,
                                managed_by_kubelet: a.managed_by_kubelet,
                            });
                        }
                        Err(e) => fail(POD_CPU_ALLOCS, e),
                    }
                }
            }
            Err(e) => fail(POD_CPU_ALLOCS, e.to_string()),
        }
    }
    for (key, target) in [
        (CPU_SHARED_POOLS, &mut t.shared_pools),
        (BE_CPU_SHARED_POOLS, &mut t.be_shared_pools),
    ] {
        let Some(text) = get(key) else { continue };
        match serde_json::from_str::<Option<Vec<PoolJson>>>(text) {
            Ok(list) => {
                for (i, p) in list.into_iter().flatten().enumerate() {
                    match cpus(&p.cpuset, &format!("[{i}].cpuset")) {
                        Ok(set) => target.push(CpuPool {
                            socket: p.socket,
                            numa: p.node,
                            cpus: set,
                        }),
                        Err(e) => fail(key, e),
                    }
                }
            }
            Err(e) => fail(key, e.to_string()),
        }
    }
    if let Some(text) = get(NODE_RESERVATION) {
        reservation_annotation(ctx, t, text, what, problems);
    }
    if let Some(text) = get(SYSTEM_QOS_RESOURCE) {
        system_qos_annotation(t, text, what, problems);
    }
}

fn reservation_annotation(
    ctx: &mut Ctx,
    t: &mut NodeCpuTopology,
    text: &str,
    what: &str,
    problems: &mut Vec<String>,
) {
    let parsed = serde_json::from_str::<ReservationJson>(text)
        .map_err(|e| e.to_string())
        .and_then(|r| Ok((cpus(&r.reserved_cpus, "reservedCPUs")?, r.apply_policy)));
    match parsed {
        Ok((reserved, policy)) => {
            t.node_reserved = reserved;
            t.node_reservation_policy = ctx.builder.intern(&policy);
        }
        Err(e) => problems.push(format!("{what}: annotation {NODE_RESERVATION}: {e}")),
    }
}

fn system_qos_annotation(
    t: &mut NodeCpuTopology,
    text: &str,
    what: &str,
    problems: &mut Vec<String>,
) {
    let parsed = serde_json::from_str::<SystemQosJson>(text)
        .map_err(|e| e.to_string())
        .and_then(|q| {
            Ok((
                cpus(&q.cpuset, "cpuset")?,
                q.cpuset_exclusive.unwrap_or(true),
            ))
        });
    match parsed {
        Ok((set, exclusive)) => {
            t.system_qos_cpus = set;
            t.system_qos_exclusive = exclusive;
        }
        Err(e) => problems.push(format!("{what}: annotation {SYSTEM_QOS_RESOURCE}: {e}")),
    }
}
