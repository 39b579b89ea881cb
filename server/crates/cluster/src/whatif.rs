//! Cluster balance and what-if: per-node requested and measured cpu, memory and pods, their
//! spread across nodes against a profile's thresholds, and where a series of moves would land
//! (`GET /clusters/{name}/balance`, `POST /clusters/{name}/what-if`).
//!
//! Owns: [`node_stats`] (a node's requests, allocatable and measured usage), [`balance`] (mean,
//! spread and nodes beyond the thresholds), and [`what_if`], which places each move with the
//! very [`Scheduler`] the simulated backend places reservations with, under the executor's
//! reservation rule (any node but the pod's own, `exclude = [source node]`), each placement
//! holding its room for the next as a reservation would. The source keeps its pod while the
//! later moves are placed (reservations are made before their evictions), so what-if never
//! counts on room a move has not freed yet. Thresholds are taken as given: reading them from a
//! profile is the caller's job.
//! Must not: do I/O or know about decisions, profiles or HTTP. Plain functions over the archive.

use std::collections::HashMap;

use rebalancer_policy_sdk::evictor::ClusterIndex;
use rebalancer_policy_sdk::model::{ArchivedQuantity, ArchivedUsageSource};
use rebalancer_policy_sdk::view::{Cluster, PodRef};
use serde::Serialize;

use crate::scheduling::{Constraints, Held, Scheduler};

/// One resource of a node: what pods request, what the node offers, what is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceStat {
    /// Sum of the effective requests of the node's non-terminal pods (cpu in millicores,
    /// memory in bytes).
    pub requested: i64,
    pub allocatable: i64,
    /// Measured usage (Koordinator's NodeMetric, else metrics.k8s.io); null when the cluster
    /// reports none for the node.
    pub used: Option<i64>,
}

/// A node's pods: how many non-terminal pods it holds and how many it may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodStat {
    pub count: i64,
    /// Allocatable `pods`.
    pub capacity: i64,
}

/// One node's load.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeStat {
    pub name: String,
    /// The `Ready` condition is `True`.
    pub ready: bool,
    /// Cordoned (`spec.unschedulable`).
    pub unschedulable: bool,
    /// Millicores.
    pub cpu: ResourceStat,
    /// Bytes.
    pub memory: ResourceStat,
    pub pods: PodStat,
}

/// What a threshold compares against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub enum Basis {
    /// Pod requests against allocatable (LowNodeUtilization, HighNodeUtilization).
    Requested,
    /// Measured usage (LowNodeLoad).
    Usage,
}

/// Percentages per resource; a resource the plugin does not configure is absent.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Levels {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pods: Option<f64>,
}

/// A balance plugin's thresholds, in percent.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Threshold {
    /// The plugin they come from (`LowNodeUtilization`, `HighNodeUtilization`, `LowNodeLoad`).
    pub plugin: String,
    pub basis: Basis,
    /// The levels are deviations from the mean (`useDeviationThresholds`): a node is low
    /// at or below `mean − low` and high above `mean + high` (both clamped to 0–100).
    pub deviation: bool,
    /// At or under these a node is underutilized.
    pub low: Levels,
    /// Over these a node is overutilized (empty for HighNodeUtilization).
    pub high: Levels,
}

/// How one resource is spread over the nodes, in percent of allocatable.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Spread {
    pub mean: f64,
    /// Population standard deviation.
    pub stddev: f64,
    pub min: f64,
    pub max: f64,
    /// Nodes strictly above the first threshold's high level (0 without thresholds).
    pub above: u32,
    /// Nodes at or below the first threshold's low level (0 without thresholds), as
    /// descheduler and Koordinator count underutilized nodes.
    pub below: u32,
}

/// The cluster's balance: per resource, the spread of the Ready nodes' percentages — requested
/// ones, or measured ones (nodes with a measurement only) when the first threshold's basis is
/// `usage`.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Balance {
    pub cpu: Spread,
    pub memory: Spread,
    pub pods: Spread,
}

/// Milli-amounts of one node, kept exact while moves are applied.
#[derive(Debug, Clone, Copy, Default)]
struct Load {
    cpu: i64,
    memory: i64,
    count: i64,
    cpu_used: Option<i64>,
    memory_used: Option<i64>,
}

fn bytes_from_milli(milli: i64) -> i64 {
    milli.div_euclid(1000) + i64::from(milli.rem_euclid(1000) != 0)
}

fn amount(list: &[ArchivedQuantity], id: Option<u32>) -> i64 {
    id.and_then(|id| list.iter().find(|q| q.resource.to_native() == id))
        .map_or(0, |q| q.milli.to_native())
}

/// Resource ids of the snapshot's string table.
#[derive(Clone, Copy)]
struct Ids {
    cpu: Option<u32>,
    memory: Option<u32>,
    pods: Option<u32>,
}

impl Ids {
    fn of(cluster: Cluster<'_>) -> Ids {
        Ids {
            cpu: cluster.lookup("cpu"),
            memory: cluster.lookup("memory"),
            pods: cluster.lookup("pods"),
        }
    }
}

fn loads(cluster: Cluster<'_>, ids: Ids) -> Vec<Load> {
    let mut loads: Vec<Load> = cluster
        .nodes()
        .map(|node| {
            let usage = node.usage();
            let measured = usage.source != ArchivedUsageSource::None;
            Load {
                cpu_used: measured.then(|| amount(&usage.node, ids.cpu)),
                memory_used: measured.then(|| amount(&usage.node, ids.memory)),
                ..Load::default()
            }
        })
        .collect();
    for pod in cluster.pods() {
        let Some(node) = pod.node() else { continue };
        if pod.is_terminal() {
            continue;
        }
        let load = &mut loads[node as usize];
        load.cpu = load.cpu.saturating_add(amount(&pod.raw.requests, ids.cpu));
        load.memory = load
            .memory
            .saturating_add(amount(&pod.raw.requests, ids.memory));
        load.count += 1;
    }
    loads
}

fn stats(cluster: Cluster<'_>, ids: Ids, loads: &[Load]) -> Vec<NodeStat> {
    cluster
        .nodes()
        .zip(loads)
        .map(|(node, load)| {
            let alloc = &node.raw.allocatable;
            NodeStat {
                name: node.name().to_owned(),
                ready: node.is_ready(),
                unschedulable: node.is_unschedulable(),
                cpu: ResourceStat {
                    requested: load.cpu,
                    allocatable: amount(alloc, ids.cpu),
                    used: load.cpu_used,
                },
                memory: ResourceStat {
                    requested: bytes_from_milli(load.memory),
                    allocatable: bytes_from_milli(amount(alloc, ids.memory)),
                    used: load.memory_used.map(bytes_from_milli),
                },
                pods: PodStat {
                    count: load.count,
                    capacity: amount(alloc, ids.pods) / 1000,
                },
            }
        })
        .collect()
}

/// Every node of the snapshot, in node-table order.
pub fn node_stats(cluster: Cluster<'_>) -> Vec<NodeStat> {
    let ids = Ids::of(cluster);
    stats(cluster, ids, &loads(cluster, ids))
}

fn percent(value: i64, of: i64) -> Option<f64> {
    (of > 0).then(|| value as f64 * 100.0 / of as f64)
}

/// The spread of `values` (percentages), counted against `low`/`high` levels (absolute, or
/// deviations from the mean when `deviation`).
fn spread(values: &[f64], low: Option<f64>, high: Option<f64>, deviation: bool) -> Spread {
    if values.is_empty() {
        return Spread::default();
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let variance = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
    let (low, high) = if deviation {
        // descheduler clamps the deviation levels to [0, 100].
        (
            low.map(|l| (mean - l).clamp(0.0, 100.0)),
            high.map(|h| (mean + h).clamp(0.0, 100.0)),
        )
    } else {
        (low, high)
    };
    Spread {
        mean,
        stddev: variance.sqrt(),
        min: values.iter().copied().fold(f64::INFINITY, f64::min),
        max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        above: high.map_or(0, |h| values.iter().filter(|&&v| v > h).count() as u32),
        below: low.map_or(0, |l| values.iter().filter(|&&v| v <= l).count() as u32),
    }
}

/// The balance of `nodes` against the first of `thresholds` (see [`Balance`]). Not-ready nodes
/// and nodes without any of a resource are left out of that resource's figures, as descheduler
/// leaves them out of its averages.
pub fn balance(nodes: &[NodeStat], thresholds: &[Threshold]) -> Balance {
    let first = thresholds.first();
    let usage = first.is_some_and(|t| t.basis == Basis::Usage);
    let deviation = first.is_some_and(|t| t.deviation);
    let level = |pick: fn(&Levels) -> Option<f64>| {
        first.map_or((None, None), |t| (pick(&t.low), pick(&t.high)))
    };
    let ready = || nodes.iter().filter(|n| n.ready);
    let resource = |stat: fn(&NodeStat) -> ResourceStat, pick: fn(&Levels) -> Option<f64>| {
        let values: Vec<f64> = ready()
            .filter_map(|n| {
                let s = stat(n);
                let value = if usage { s.used? } else { s.requested };
                percent(value, s.allocatable)
            })
            .collect();
        let (low, high) = level(pick);
        spread(&values, low, high, deviation)
    };
    let pods: Vec<f64> = ready()
        .filter_map(|n| percent(n.pods.count, n.pods.capacity))
        .collect();
    let (low, high) = level(|l| l.pods);
    Balance {
        cpu: resource(|n| n.cpu, |l| l.cpu),
        memory: resource(|n| n.memory, |l| l.memory),
        pods: spread(&pods, low, high, deviation),
    }
}

/// A move to simulate: the pod a decision would move, and the node it was proposed on.
#[derive(Debug, Clone, Copy)]
pub struct MoveRequest<'r> {
    pub pod_uid: &'r str,
    /// The node the decision was proposed on (the executor's `source_node`).
    pub from: &'r str,
}

/// Where a move lands, or why it does not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Landing {
    /// Placed on this node.
    Node(String),
    /// Not placed; why, in words (`pod no longer exists`, `no node fits: 0/3 nodes …`).
    Nowhere(String),
}

/// The outcome of [`what_if`]: one landing per request, in order, and every node before and
/// after the placed moves.
#[derive(Debug, Clone, PartialEq)]
pub struct WhatIf {
    pub landings: Vec<Landing>,
    pub before: Vec<NodeStat>,
    pub after: Vec<NodeStat>,
}

/// The reason a pod cannot be moved at all, as the executor's staleness check words it.
fn stale(pod: PodRef<'_>, from: &str) -> Option<String> {
    if pod.has_deletion_timestamp() {
        return Some("pod is already terminating (being deleted)".into());
    }
    let now = pod.node_name();
    (now != from).then(|| {
        let now = if now.is_empty() {
            "unscheduled".to_owned()
        } else {
            format!("on node {now}")
        };
        format!("pod is now {now}, not on node {from} where it was proposed")
    })
}

/// Place `requests` in order, each on the node the simulated backend would reserve for it
/// (the best node but its own, given `held` and the earlier placements), and the load of every
/// node before and after. Requested cpu, memory and the pod count move from source to target;
/// measured usage moves with the pod's own measured usage where the snapshot has it (a pod
/// without a measurement leaves both nodes' `used` unchanged; an unmeasured node stays
/// unmeasured). A pod named twice moves once: its later requests are not placed.
pub fn what_if(
    cluster: Cluster<'_>,
    index: &ClusterIndex,
    held: &[Held],
    requests: &[MoveRequest<'_>],
) -> WhatIf {
    let ids = Ids::of(cluster);
    let wanted: HashMap<&str, Option<u32>> = requests.iter().map(|r| (r.pod_uid, None)).collect();
    let mut pods = wanted;
    for pod in cluster.pods() {
        if let Some(slot) = pods.get_mut(pod.uid()) {
            *slot = Some(pod.id);
        }
    }
    let before = loads(cluster, ids);
    let mut after = before.clone();
    let mut scheduler = Scheduler::new(cluster, index, held);
    let mut moved: HashMap<u32, usize> = HashMap::new();
    let mut landings = Vec::with_capacity(requests.len());
    for (i, request) in requests.iter().enumerate() {
        let Some(id) = pods.get(request.pod_uid).copied().flatten() else {
            landings.push(Landing::Nowhere("pod no longer exists".into()));
            continue;
        };
        if let Some(&earlier) = moved.get(&id) {
            landings.push(Landing::Nowhere(format!(
                "pod is already moved by an earlier move of this what-if (#{})",
                earlier + 1
            )));
            continue;
        }
        let pod = cluster.pod(id);
        if let Some(why) = stale(pod, request.from) {
            landings.push(Landing::Nowhere(why));
            continue;
        }
        let exclude = [request.from.to_owned()];
        let constraints = Constraints {
            target: None,
            exclude: &exclude,
        };
        let target = match scheduler.place(pod, constraints) {
            Ok(node) => node,
            Err(unschedulable) => {
                landings.push(Landing::Nowhere(format!("no node fits: {unschedulable}")));
                continue;
            }
        };
        moved.insert(id, i);
        scheduler.hold(&Held {
            node: target,
            requests: pod
                .raw
                .requests
                .iter()
                .map(|q| {
                    (
                        cluster.str(q.resource.to_native()).to_owned(),
                        q.milli.to_native(),
                    )
                })
                .collect(),
            template_pod: Some(id),
        });
        if let Some(source) = pod.node()
            && !pod.is_terminal()
        {
            let cpu = amount(&pod.raw.requests, ids.cpu);
            let memory = amount(&pod.raw.requests, ids.memory);
            let usage = pod.usage();
            let measured = (usage.source != ArchivedUsageSource::None).then(|| {
                (
                    amount(&usage.usage, ids.cpu),
                    amount(&usage.usage, ids.memory),
                )
            });
            for (node, sign) in [(source as usize, -1), (target as usize, 1)] {
                let load = &mut after[node];
                load.cpu = load.cpu.saturating_add(sign * cpu);
                load.memory = load.memory.saturating_add(sign * memory);
                load.count += sign;
                if let Some((cpu_used, memory_used)) = measured {
                    load.cpu_used = load.cpu_used.map(|u| (u + sign * cpu_used).max(0));
                    load.memory_used = load.memory_used.map(|u| (u + sign * memory_used).max(0));
                }
            }
        }
        landings.push(Landing::Node(cluster.node(target).name().to_owned()));
    }
    WhatIf {
        landings,
        before: stats(cluster, ids, &before),
        after: stats(cluster, ids, &after),
    }
}

#[cfg(test)]
mod tests;
