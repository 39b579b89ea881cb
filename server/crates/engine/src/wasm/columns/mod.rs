//! The `columns` import (ABI 1.4): the snapshot as typed columns pulled by name, the string
//! table, and typed detail accessors, for guests that do not read the rkyv archive (any language
//! but Rust).
//!
//! Owns: the column catalog ([`CATALOG`], which `columns()` lists and `docs/abi.md` documents),
//! computing a column from the archive the evaluation already holds (read in place, no copy of
//! the model), the enum codes, and the caps on what a guest may ask for in one call.
//! Must not: keep anything a guest named beyond the call (names are looked up, never stored), or
//! read anything but the evaluation's snapshot.
//!
//! Columns are computed on each call: one pass over the rows of the archive (a 150k-pod column
//! costs ~1 ms, less than lowering it into the guest), so there is nothing to cache per revision.

use rebalancer_policy_sdk::caps::quote_prefix;
use rebalancer_policy_sdk::evictor::ClusterIndex;
use rebalancer_policy_sdk::model::{
    ArchivedPodPhase, ArchivedQosClass, ArchivedQuantity, ArchivedUnhealthyPodEvictionPolicy,
    ArchivedUsageSource, NONE,
};
use rebalancer_policy_sdk::view::{Cluster, kv_get};
use rkyv::rend::u32_le;

use super::bindings::rebalancer::policy::columns::{self as wit, ColumnType};
use super::caps::QUOTED_PREFIX_BYTES;
use super::host::HostState;

mod details;

/// An absent `u32` value.
pub const ABSENT_U32: u32 = NONE;
/// An absent `s64` value.
pub const ABSENT_S64: i64 = i64::MIN;

/// Ids one call may name: the rows of the table, or this many when the table is smaller (so a
/// call never makes the host build more than asking for every row a few times would).
pub const MIN_IDS_PER_CALL: usize = 1024;

/// The tables of the snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Table {
    Nodes,
    Pods,
    Namespaces,
    Owners,
    Pdbs,
    PriorityClasses,
    Pvcs,
}

impl Table {
    const ALL: [Table; 7] = [
        Table::Nodes,
        Table::Pods,
        Table::Namespaces,
        Table::Owners,
        Table::Pdbs,
        Table::PriorityClasses,
        Table::Pvcs,
    ];

    pub(super) fn name(self) -> &'static str {
        match self {
            Table::Nodes => "nodes",
            Table::Pods => "pods",
            Table::Namespaces => "namespaces",
            Table::Owners => "owners",
            Table::Pdbs => "pdbs",
            Table::PriorityClasses => "priority-classes",
            Table::Pvcs => "pvcs",
        }
    }

    /// What one row is, for errors.
    fn row_name(self) -> &'static str {
        match self {
            Table::Nodes => "node",
            Table::Pods => "pod",
            Table::Namespaces => "namespace",
            Table::Owners => "owner",
            Table::Pdbs => "PDB",
            Table::PriorityClasses => "priority class",
            Table::Pvcs => "PVC",
        }
    }

    fn parse(name: &str) -> Result<Table, String> {
        Table::ALL
            .into_iter()
            .find(|t| t.name() == name)
            .ok_or_else(|| {
                format!(
                    "unknown table {}: the tables are {}",
                    quote_prefix(name, QUOTED_PREFIX_BYTES),
                    Table::ALL.map(Table::name).join(", ")
                )
            })
    }

    pub(super) fn rows(self, c: &Cluster<'_>) -> usize {
        let a = c.archive();
        match self {
            Table::Nodes => a.nodes.len(),
            Table::Pods => a.pods.len(),
            Table::Namespaces => a.namespaces.len(),
            Table::Owners => a.owners.len(),
            Table::Pdbs => a.pdbs.len(),
            Table::PriorityClasses => a.priority_classes.len(),
            Table::Pvcs => a.pvcs.len(),
        }
    }
}

/// One entry of the catalog. A `name` ending in `:<…>` is a family: `label:<key>` serves
/// `label:app`, `label:topology.kubernetes.io/zone`, …
pub(super) struct Spec {
    pub table: Table,
    pub name: &'static str,
    pub kind: ColumnType,
    pub description: &'static str,
}

const fn spec(
    table: Table,
    name: &'static str,
    kind: ColumnType,
    description: &'static str,
) -> Spec {
    Spec {
        table,
        name,
        kind,
        description,
    }
}

use ColumnType::{S64, StringId, Text, U32};
use Table::{Namespaces, Nodes, Owners, Pdbs, Pods, PriorityClasses, Pvcs};

/// Every column the host serves. `docs/abi.md` lists the same, with units and codes.
#[rustfmt::skip]
pub(super) const CATALOG: &[Spec] = &[
    spec(Nodes, "name", StringId, "node name"),
    spec(Nodes, "uid", Text, "metadata.uid"),
    spec(Nodes, "ready", U32, "1 when the Ready condition is True, else 0"),
    spec(Nodes, "unschedulable", U32, "1 when spec.unschedulable, else 0"),
    spec(Nodes, "creation-ms", S64, "metadata.creationTimestamp, ms since the Unix epoch"),
    spec(Nodes, "allocatable:<resource>", S64, "status.allocatable[resource] in milli-units; s64::MIN when the node does not list it"),
    spec(Nodes, "requested:<resource>", S64, "summed effective requests of the node's non-terminal pods in milli-units; 0 when none requests it"),
    spec(Nodes, "active-pods", U32, "number of the node's non-terminal pods (terminating ones included)"),
    spec(Nodes, "usage:<resource>", S64, "measured usage (NodeMetric, else metrics.k8s.io) in milli-units; s64::MIN when not measured"),
    spec(Nodes, "system-usage:<resource>", S64, "NodeMetric systemUsage (usage outside pods) in milli-units; s64::MIN when not reported"),
    spec(Nodes, "raw-allocatable:<resource>", S64, "the node.koordinator.sh/raw-allocatable annotation in milli-units; s64::MIN when absent"),
    spec(Nodes, "usage-source", U32, "where usage comes from: 0 none, 1 NodeMetric, 2 metrics.k8s.io"),
    spec(Nodes, "usage-update-ms", S64, "when usage was measured, ms since the Unix epoch; s64::MIN when not said"),
    spec(Nodes, "usage-window-ms", S64, "the window usage averages over, ms; s64::MIN when not said"),
    spec(Nodes, "label:<key>", StringId, "the label's value; u32::MAX when the node lacks the label"),
    spec(Nodes, "annotation:<key>", StringId, "the annotation's value; u32::MAX when absent"),
    spec(Nodes, "taint-count", U32, "number of spec.taints"),
    spec(Pods, "name", Text, "metadata.name"),
    spec(Pods, "uid", Text, "metadata.uid"),
    spec(Pods, "namespace", StringId, "metadata.namespace"),
    spec(Pods, "namespace-row", U32, "row of the namespaces table; u32::MAX when the snapshot has no Namespace object for it"),
    spec(Pods, "node", U32, "node id (row of nodes); u32::MAX when unscheduled or on a node not in the snapshot"),
    spec(Pods, "node-name", StringId, "spec.nodeName (0, the empty string, when unscheduled)"),
    spec(Pods, "owner", U32, "row of owners (the first ownerReference); u32::MAX when none"),
    spec(Pods, "owner-kind", StringId, "kind of the first ownerReference; 0 (\"\") when none"),
    spec(Pods, "phase", U32, "status.phase: 0 Pending, 1 Running, 2 Succeeded, 3 Failed, 4 Unknown"),
    spec(Pods, "qos", U32, "QoS class: 0 BestEffort, 1 Burstable, 2 Guaranteed"),
    spec(Pods, "reason", StringId, "status.reason (e.g. Evicted, NodeLost); 0 when unset"),
    spec(Pods, "creation-ms", S64, "metadata.creationTimestamp, ms since the Unix epoch"),
    spec(Pods, "start-ms", S64, "status.startTime, ms since the Unix epoch; s64::MIN when absent"),
    spec(Pods, "deletion-ms", S64, "metadata.deletionTimestamp, ms since the Unix epoch; s64::MIN when absent"),
    spec(Pods, "priority", S64, "spec.priority; s64::MIN when absent"),
    spec(Pods, "priority-class", StringId, "spec.priorityClassName; 0 when unset"),
    spec(Pods, "restarts", S64, "sum of restartCount over the pod's container statuses (init and app containers)"),
    spec(Pods, "request:<resource>", S64, "effective request (max of init containers and sum of app containers, plus overhead) in milli-units; 0 when not requested"),
    spec(Pods, "usage:<resource>", S64, "measured usage in milli-units; s64::MIN when not measured"),
    spec(Pods, "usage-source", U32, "where usage comes from: 0 none, 1 NodeMetric, 2 metrics.k8s.io"),
    spec(Pods, "label:<key>", StringId, "the label's value; u32::MAX when the pod lacks the label"),
    spec(Pods, "annotation:<key>", StringId, "the annotation's value; u32::MAX when absent"),
    spec(Pods, "has-resource-claims", U32, "1 when spec.resourceClaims is not empty"),
    spec(Namespaces, "name", StringId, "metadata.name"),
    spec(Namespaces, "label:<key>", StringId, "the label's value; u32::MAX when absent"),
    spec(Owners, "namespace", StringId, "namespace of the owned pods"),
    spec(Owners, "kind", StringId, "ownerReference kind (ReplicaSet, StatefulSet, Job, ...)"),
    spec(Owners, "name", StringId, "ownerReference name"),
    spec(Owners, "uid", StringId, "ownerReference uid"),
    spec(Pdbs, "namespace", StringId, "metadata.namespace"),
    spec(Pdbs, "name", StringId, "metadata.name"),
    spec(Pdbs, "disruptions-allowed", S64, "status.disruptionsAllowed"),
    spec(Pdbs, "current-healthy", S64, "status.currentHealthy"),
    spec(Pdbs, "desired-healthy", S64, "status.desiredHealthy"),
    spec(Pdbs, "expected-pods", S64, "status.expectedPods"),
    spec(Pdbs, "unhealthy-pod-eviction-policy", U32, "0 IfHealthyBudget, 1 AlwaysAllow"),
    spec(PriorityClasses, "name", StringId, "metadata.name"),
    spec(PriorityClasses, "value", S64, "value"),
    spec(Pvcs, "namespace", StringId, "metadata.namespace"),
    spec(Pvcs, "name", StringId, "metadata.name"),
    spec(Pvcs, "storage-class", StringId, "spec.storageClassName; u32::MAX when unset"),
];

/// The catalog entry serving `name` of `table`, and the family parameter (`app` for
/// `label:app`; empty for a plain column).
fn find(table: Table, name: &str) -> Result<(&'static Spec, &str), String> {
    for spec in CATALOG.iter().filter(|s| s.table == table) {
        match spec.name.split_once(":<") {
            None if spec.name == name => return Ok((spec, "")),
            Some((family, _)) => {
                if let Some(param) = name
                    .strip_prefix(family)
                    .and_then(|rest| rest.strip_prefix(':'))
                {
                    return Ok((spec, param));
                }
            }
            None => {}
        }
    }
    Err(format!(
        "table {} has no column {} (columns() lists them)",
        table.name(),
        quote_prefix(name, QUOTED_PREFIX_BYTES)
    ))
}

/// A computed column.
pub(super) enum Column {
    U32(Vec<u32>),
    S64(Vec<i64>),
    Text(Vec<String>),
}

impl Column {
    fn kind_name(kind: ColumnType) -> &'static str {
        match kind {
            ColumnType::U32 => "u32",
            ColumnType::S64 => "s64",
            ColumnType::StringId => "string-id",
            ColumnType::Text => "text",
        }
    }
}

fn qty(list: &[ArchivedQuantity], resource: Option<u32>) -> Option<i64> {
    let resource = resource?;
    list.iter()
        .find(|q| q.resource.to_native() == resource)
        .map(|q| q.milli.to_native())
}

fn opt_s64(v: Option<i64>) -> i64 {
    v.unwrap_or(ABSENT_S64)
}

fn kv(pairs: &[rebalancer_policy_sdk::model::ArchivedKeyValue], key: Option<u32>) -> u32 {
    key.and_then(|k| kv_get(pairs, k)).unwrap_or(ABSENT_U32)
}

pub(super) fn usage_source_code(s: &ArchivedUsageSource) -> u32 {
    match s {
        ArchivedUsageSource::None => 0,
        ArchivedUsageSource::NodeMetric => 1,
        ArchivedUsageSource::MetricsApi => 2,
    }
}

fn phase_code(p: &ArchivedPodPhase) -> u32 {
    match p {
        ArchivedPodPhase::Pending => 0,
        ArchivedPodPhase::Running => 1,
        ArchivedPodPhase::Succeeded => 2,
        ArchivedPodPhase::Failed => 3,
        ArchivedPodPhase::Unknown => 4,
    }
}

fn qos_code(q: &ArchivedQosClass) -> u32 {
    match q {
        ArchivedQosClass::BestEffort => 0,
        ArchivedQosClass::Burstable => 1,
        ArchivedQosClass::Guaranteed => 2,
    }
}

fn native(v: &u32_le) -> u32 {
    v.to_native()
}

/// Compute column `name` of `table`, checking that it is of one of the `wanted` kinds.
pub(super) fn column(
    c: &Cluster<'_>,
    index: &ClusterIndex,
    table: &str,
    name: &str,
    wanted: &[ColumnType],
) -> Result<Column, String> {
    let table = Table::parse(table)?;
    let (spec, param) = find(table, name)?;
    if !wanted.contains(&spec.kind) {
        return Err(format!(
            "column {} of {} is {}, not {}: use column-{}",
            quote_prefix(name, QUOTED_PREFIX_BYTES),
            table.name(),
            Column::kind_name(spec.kind),
            wanted
                .iter()
                .map(|k| Column::kind_name(*k))
                .collect::<Vec<_>>()
                .join(" or "),
            match spec.kind {
                ColumnType::U32 | ColumnType::StringId => "u32",
                ColumnType::S64 => "s64",
                ColumnType::Text => "text",
            }
        ));
    }
    // The id of the family parameter; `None` when no object uses that string (then no row has
    // it: every value is absent).
    let key = c.lookup(param);
    let a = c.archive();
    let u32s = |f: &dyn Fn(u32) -> u32| Column::U32((0..table.rows(c) as u32).map(f).collect());
    let s64s = |f: &dyn Fn(u32) -> i64| Column::S64((0..table.rows(c) as u32).map(f).collect());
    let texts =
        |f: &dyn Fn(u32) -> String| Column::Text((0..table.rows(c) as u32).map(f).collect());
    let family = spec.name.split_once(":<").map_or(spec.name, |(f, _)| f);
    Ok(match (table, family) {
        (Nodes, "name") => u32s(&|i| c.node(i).name_id()),
        (Nodes, "uid") => texts(&|i| a.nodes[i as usize].uid.as_str().to_owned()),
        (Nodes, "ready") => u32s(&|i| u32::from(c.node(i).is_ready())),
        (Nodes, "unschedulable") => u32s(&|i| u32::from(c.node(i).is_unschedulable())),
        (Nodes, "creation-ms") => s64s(&|i| a.nodes[i as usize].creation_ms.to_native()),
        (Nodes, "allocatable") => s64s(&|i| opt_s64(qty(&a.nodes[i as usize].allocatable, key))),
        (Nodes, "requested") => s64s(&|i| key.map_or(0, |k| index.requested(i, k))),
        (Nodes, "active-pods") => u32s(&|i| index.active_pod_count(i)),
        (Nodes, "usage") => s64s(&|i| opt_s64(qty(&c.node(i).usage().node, key))),
        (Nodes, "system-usage") => s64s(&|i| opt_s64(qty(&c.node(i).usage().system, key))),
        (Nodes, "raw-allocatable") => {
            s64s(&|i| opt_s64(qty(&c.node(i).usage().raw_allocatable, key)))
        }
        (Nodes, "usage-source") => u32s(&|i| usage_source_code(&c.node(i).usage().source)),
        (Nodes, "usage-update-ms") => {
            s64s(&|i| opt_s64(c.node(i).usage().update_ms.as_ref().map(|v| v.to_native())))
        }
        (Nodes, "usage-window-ms") => {
            s64s(&|i| opt_s64(c.node(i).usage().window_ms.as_ref().map(|v| v.to_native())))
        }
        (Nodes, "label") => u32s(&|i| kv(&a.nodes[i as usize].labels, key)),
        (Nodes, "annotation") => u32s(&|i| kv(c.node(i).annotations(), key)),
        (Nodes, "taint-count") => u32s(&|i| a.nodes[i as usize].taints.len() as u32),
        (Pods, "name") => texts(&|i| c.pod(i).name().to_owned()),
        (Pods, "uid") => texts(&|i| c.pod(i).uid().to_owned()),
        (Pods, "namespace") => u32s(&|i| c.pod(i).namespace_id()),
        (Pods, "namespace-row") => {
            let rows = namespace_rows(c);
            u32s(&|i| row_of(&rows, c.pod(i).namespace_id()))
        }
        (Pods, "node") => u32s(&|i| native(&a.pods[i as usize].node)),
        (Pods, "node-name") => u32s(&|i| native(&a.pods[i as usize].node_name)),
        (Pods, "owner") => u32s(&|i| native(&a.pods[i as usize].owner)),
        (Pods, "owner-kind") => u32s(&|i| {
            a.pods[i as usize]
                .owner_refs
                .first()
                .map_or(0, |r| r.kind.to_native())
        }),
        (Pods, "phase") => u32s(&|i| phase_code(&a.pods[i as usize].phase)),
        (Pods, "qos") => u32s(&|i| qos_code(&a.pods[i as usize].qos)),
        (Pods, "reason") => u32s(&|i| native(&a.pods[i as usize].reason)),
        (Pods, "creation-ms") => s64s(&|i| c.pod(i).creation_ms()),
        (Pods, "start-ms") => s64s(&|i| opt_s64(c.pod(i).start_ms())),
        (Pods, "deletion-ms") => s64s(&|i| {
            opt_s64(
                a.pods[i as usize]
                    .deletion_ms
                    .as_ref()
                    .map(|v| v.to_native()),
            )
        }),
        (Pods, "priority") => s64s(&|i| opt_s64(c.pod(i).priority().map(i64::from))),
        (Pods, "priority-class") => u32s(&|i| native(&a.pods[i as usize].priority_class_name)),
        (Pods, "restarts") => s64s(&|i| {
            c.pod(i)
                .all_containers()
                .iter()
                .filter(|k| {
                    !matches!(
                        k.kind,
                        rebalancer_policy_sdk::model::ArchivedContainerKind::Ephemeral
                    )
                })
                .map(|k| i64::from(k.restart_count.to_native()))
                .sum()
        }),
        (Pods, "request") => s64s(&|i| key.map_or(0, |k| c.pod(i).request(k))),
        (Pods, "usage") => s64s(&|i| opt_s64(qty(&c.pod(i).usage().usage, key))),
        (Pods, "usage-source") => u32s(&|i| usage_source_code(&c.pod(i).usage().source)),
        (Pods, "label") => u32s(&|i| kv(&a.pods[i as usize].labels, key)),
        (Pods, "annotation") => u32s(&|i| kv(c.pod(i).annotations(), key)),
        (Pods, "has-resource-claims") => {
            u32s(&|i| u32::from(a.pods[i as usize].has_resource_claims))
        }
        (Namespaces, "name") => u32s(&|i| native(&a.namespaces[i as usize].name)),
        (Namespaces, "label") => u32s(&|i| kv(&a.namespaces[i as usize].labels, key)),
        (Owners, "namespace") => u32s(&|i| native(&a.owners[i as usize].namespace)),
        (Owners, "kind") => u32s(&|i| native(&a.owners[i as usize].kind)),
        (Owners, "name") => u32s(&|i| native(&a.owners[i as usize].name)),
        (Owners, "uid") => u32s(&|i| native(&a.owners[i as usize].uid)),
        (Pdbs, "namespace") => u32s(&|i| native(&a.pdbs[i as usize].namespace)),
        (Pdbs, "name") => u32s(&|i| native(&a.pdbs[i as usize].name)),
        (Pdbs, "disruptions-allowed") => {
            s64s(&|i| i64::from(a.pdbs[i as usize].disruptions_allowed.to_native()))
        }
        (Pdbs, "current-healthy") => {
            s64s(&|i| i64::from(a.pdbs[i as usize].current_healthy.to_native()))
        }
        (Pdbs, "desired-healthy") => {
            s64s(&|i| i64::from(a.pdbs[i as usize].desired_healthy.to_native()))
        }
        (Pdbs, "expected-pods") => {
            s64s(&|i| i64::from(a.pdbs[i as usize].expected_pods.to_native()))
        }
        (Pdbs, "unhealthy-pod-eviction-policy") => u32s(&|i| match a.pdbs[i as usize]
            .unhealthy_pod_eviction_policy
        {
            ArchivedUnhealthyPodEvictionPolicy::IfHealthyBudget => 0,
            ArchivedUnhealthyPodEvictionPolicy::AlwaysAllow => 1,
        }),
        (PriorityClasses, "name") => u32s(&|i| native(&a.priority_classes[i as usize].name)),
        (PriorityClasses, "value") => {
            s64s(&|i| i64::from(a.priority_classes[i as usize].value.to_native()))
        }
        (Pvcs, "namespace") => u32s(&|i| native(&a.pvcs[i as usize].namespace)),
        (Pvcs, "name") => u32s(&|i| native(&a.pvcs[i as usize].name)),
        (Pvcs, "storage-class") => u32s(&|i| {
            a.pvcs[i as usize]
                .storage_class
                .as_ref()
                .map_or(ABSENT_U32, native)
        }),
        (table, family) => {
            // Unreachable while every catalog entry has an arm above (the catalog test checks).
            return Err(format!(
                "column {family} of {} is listed but not served",
                table.name()
            ));
        }
    })
}

/// Rows of the namespaces table by name id, sorted for binary search.
pub(super) fn namespace_rows(c: &Cluster<'_>) -> Vec<(u32, u32)> {
    let mut rows: Vec<(u32, u32)> = c
        .archive()
        .namespaces
        .iter()
        .enumerate()
        .map(|(row, ns)| (ns.name.to_native(), row as u32))
        .collect();
    rows.sort_unstable();
    rows
}

fn row_of(rows: &[(u32, u32)], name: u32) -> u32 {
    rows.binary_search_by_key(&name, |(n, _)| *n)
        .map_or(ABSENT_U32, |i| rows[i].1)
}

/// Check the ids a call names against `table`: each a row of it, and not more of them than
/// [`MIN_IDS_PER_CALL`] or the table's rows, whichever is more.
pub(super) fn check_ids(ids: &[u32], rows: usize, what: &str) -> Result<(), String> {
    let most = rows.max(MIN_IDS_PER_CALL);
    if ids.len() > most {
        return Err(format!(
            "{} {what} ids in one call, more than the {most} allowed (the table's rows, or \
             {MIN_IDS_PER_CALL} when it has fewer)",
            ids.len()
        ));
    }
    if let Some((at, id)) = ids.iter().enumerate().find(|(_, id)| **id as usize >= rows) {
        return Err(format!(
            "{what} id {id} (at index {at}) is not in the snapshot, which has {rows}"
        ));
    }
    Ok(())
}

/// What a detail accessor answers: one entry per row asked for, or why the rows were refused.
type Answer<T> = wasmtime::Result<Result<Vec<T>, String>>;

impl HostState {
    /// One entry per row of `table` in `rows`, computed by `f` from the evaluation's snapshot
    /// and its index; an error when `rows` names a row the table does not have (or too many).
    fn per_row<T>(
        &mut self,
        table: Table,
        rows: &[u32],
        f: impl Fn(&Cluster<'_>, &ClusterIndex, u32) -> T,
    ) -> Answer<T> {
        let session = self.session()?;
        let (snapshot, index) = (session.snapshot.clone(), session.index.clone());
        let c = snapshot.cluster();
        let what = table.row_name();
        Ok(check_ids(rows, table.rows(&c), what)
            .map(|()| rows.iter().map(|&row| f(&c, &index, row)).collect()))
    }
}

impl wit::Host for HostState {
    fn columns(&mut self) -> wasmtime::Result<Vec<wit::ColumnInfo>> {
        self.session()?;
        Ok(CATALOG
            .iter()
            .map(|s| wit::ColumnInfo {
                table: s.table.name().to_string(),
                name: s.name.to_string(),
                kind: s.kind,
                description: s.description.to_string(),
            })
            .collect())
    }

    fn row_count(&mut self, table: String) -> wasmtime::Result<Result<u32, String>> {
        let snapshot = self.session()?.snapshot.clone();
        let c = snapshot.cluster();
        Ok(Table::parse(&table).map(|t| t.rows(&c) as u32))
    }

    fn strings(&mut self) -> wasmtime::Result<Vec<String>> {
        let snapshot = self.session()?.snapshot.clone();
        let strings = &snapshot.cluster().archive().strings;
        Ok(strings.iter().map(|s| s.as_str().to_owned()).collect())
    }

    fn strings_of(&mut self, ids: Vec<u32>) -> wasmtime::Result<Result<Vec<String>, String>> {
        let snapshot = self.session()?.snapshot.clone();
        let c = snapshot.cluster();
        let count = c.archive().strings.len();
        Ok(check_ids(&ids, count, "string")
            .map(|()| ids.iter().map(|id| c.str(*id).to_owned()).collect()))
    }

    fn string_id(&mut self, s: String) -> wasmtime::Result<Option<u32>> {
        let snapshot = self.session()?.snapshot.clone();
        Ok(snapshot.cluster().lookup(&s))
    }

    fn column_u32(
        &mut self,
        table: String,
        name: String,
    ) -> wasmtime::Result<Result<Vec<u32>, String>> {
        let session = self.session()?;
        let (snapshot, index) = (session.snapshot.clone(), session.index.clone());
        let c = snapshot.cluster();
        Ok(column(
            &c,
            &index,
            &table,
            &name,
            &[ColumnType::U32, ColumnType::StringId],
        )
        .map(|col| match col {
            Column::U32(v) => v,
            Column::S64(_) | Column::Text(_) => unreachable!("kind checked"),
        }))
    }

    fn column_s64(
        &mut self,
        table: String,
        name: String,
    ) -> wasmtime::Result<Result<Vec<i64>, String>> {
        let session = self.session()?;
        let (snapshot, index) = (session.snapshot.clone(), session.index.clone());
        let c = snapshot.cluster();
        Ok(
            column(&c, &index, &table, &name, &[ColumnType::S64]).map(|col| match col {
                Column::S64(v) => v,
                Column::U32(_) | Column::Text(_) => unreachable!("kind checked"),
            }),
        )
    }

    fn column_text(
        &mut self,
        table: String,
        name: String,
    ) -> wasmtime::Result<Result<Vec<String>, String>> {
        let session = self.session()?;
        let (snapshot, index) = (session.snapshot.clone(), session.index.clone());
        let c = snapshot.cluster();
        Ok(
            column(&c, &index, &table, &name, &[ColumnType::Text]).map(|col| match col {
                Column::Text(v) => v,
                Column::U32(_) | Column::S64(_) => unreachable!("kind checked"),
            }),
        )
    }

    fn pod_labels(&mut self, pods: Vec<u32>) -> Answer<Vec<wit::KeyValue>> {
        self.per_row(Table::Pods, &pods, details::pod_labels)
    }
    fn pod_annotations(&mut self, pods: Vec<u32>) -> Answer<Vec<wit::KeyValue>> {
        self.per_row(Table::Pods, &pods, details::pod_annotations)
    }
    fn pod_owner_refs(&mut self, pods: Vec<u32>) -> Answer<Vec<wit::OwnerRef>> {
        self.per_row(Table::Pods, &pods, details::pod_owner_refs)
    }
    fn pod_node_selector(&mut self, pods: Vec<u32>) -> Answer<Vec<wit::KeyValue>> {
        self.per_row(Table::Pods, &pods, details::pod_node_selector)
    }
    fn pod_affinity(&mut self, pods: Vec<u32>) -> Answer<wit::Affinity> {
        self.per_row(Table::Pods, &pods, details::pod_affinity)
    }
    fn pod_tolerations(&mut self, pods: Vec<u32>) -> Answer<Vec<wit::Toleration>> {
        self.per_row(Table::Pods, &pods, details::pod_tolerations)
    }
    fn pod_topology_spread(
        &mut self,
        pods: Vec<u32>,
    ) -> Answer<Vec<wit::TopologySpreadConstraint>> {
        self.per_row(Table::Pods, &pods, details::pod_topology_spread)
    }
    fn pod_containers(&mut self, pods: Vec<u32>) -> Answer<Vec<wit::Container>> {
        self.per_row(Table::Pods, &pods, details::pod_containers)
    }
    fn pod_conditions(&mut self, pods: Vec<u32>) -> Answer<Vec<wit::PodCondition>> {
        self.per_row(Table::Pods, &pods, details::pod_conditions)
    }
    fn pod_volumes(&mut self, pods: Vec<u32>) -> Answer<Vec<wit::Volume>> {
        self.per_row(Table::Pods, &pods, details::pod_volumes)
    }
    fn pod_requests(&mut self, pods: Vec<u32>) -> Answer<Vec<wit::Quantity>> {
        self.per_row(Table::Pods, &pods, details::pod_requests)
    }
    fn pod_usage(&mut self, pods: Vec<u32>) -> Answer<wit::PodUsageInfo> {
        self.per_row(Table::Pods, &pods, details::pod_usage)
    }
    fn pod_pdbs(&mut self, pods: Vec<u32>) -> Answer<Vec<u32>> {
        self.per_row(Table::Pods, &pods, details::pod_pdbs)
    }
    fn node_labels(&mut self, nodes: Vec<u32>) -> Answer<Vec<wit::KeyValue>> {
        self.per_row(Table::Nodes, &nodes, details::node_labels)
    }
    fn node_annotations(&mut self, nodes: Vec<u32>) -> Answer<Vec<wit::KeyValue>> {
        self.per_row(Table::Nodes, &nodes, details::node_annotations)
    }
    fn node_taints(&mut self, nodes: Vec<u32>) -> Answer<Vec<wit::Taint>> {
        self.per_row(Table::Nodes, &nodes, details::node_taints)
    }
    fn node_allocatable(&mut self, nodes: Vec<u32>) -> Answer<Vec<wit::Quantity>> {
        self.per_row(Table::Nodes, &nodes, details::node_allocatable)
    }
    fn node_requested(&mut self, nodes: Vec<u32>) -> Answer<Vec<wit::Quantity>> {
        self.per_row(Table::Nodes, &nodes, details::node_requested)
    }
    fn node_usage(&mut self, nodes: Vec<u32>) -> Answer<wit::NodeUsageInfo> {
        self.per_row(Table::Nodes, &nodes, details::node_usage)
    }
    fn node_cpu_topology(&mut self, nodes: Vec<u32>) -> Answer<wit::CpuTopology> {
        self.per_row(Table::Nodes, &nodes, details::node_cpu_topology)
    }
    fn node_pods(&mut self, nodes: Vec<u32>) -> Answer<Vec<u32>> {
        self.per_row(Table::Nodes, &nodes, details::node_pods)
    }
    fn namespace_labels(&mut self, namespaces: Vec<u32>) -> Answer<Vec<wit::KeyValue>> {
        self.per_row(Table::Namespaces, &namespaces, details::namespace_labels)
    }
    fn pdbs(&mut self, pdbs: Vec<u32>) -> Answer<wit::Pdb> {
        self.per_row(Table::Pdbs, &pdbs, details::pdbs)
    }
    fn pdb_pods(&mut self, pdbs: Vec<u32>) -> Answer<Vec<u32>> {
        self.per_row(Table::Pdbs, &pdbs, details::pdb_pods)
    }
}
