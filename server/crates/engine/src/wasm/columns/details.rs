//! The detail accessors of the `columns` import: the nested parts of pods, nodes, namespaces and
//! PDBs (selectors, affinity, taints, containers, usage, CPU topology...) as typed WIT records,
//! converted from the archive in place. Strings stay string ids, as in the columns.

use rebalancer_policy_sdk::evictor::ClusterIndex;
use rebalancer_policy_sdk::model::{
    ArchivedAffinity, ArchivedContainer, ArchivedContainerKind, ArchivedCpuPool,
    ArchivedInclusionPolicy, ArchivedKeyValue, ArchivedLabelSelector, ArchivedNodeCpuTopology,
    ArchivedNodeSelectorTerm, ArchivedNodeUsage, ArchivedOwnerRef, ArchivedPdb,
    ArchivedPodAffinityTerm, ArchivedPodCondition, ArchivedPodUsage, ArchivedQuantity,
    ArchivedRequirement, ArchivedSelectorOperator, ArchivedTaint, ArchivedTaintEffect,
    ArchivedToleration, ArchivedTolerationOperator, ArchivedTopologySpreadConstraint,
    ArchivedUnhealthyPodEvictionPolicy, ArchivedUsageSource, ArchivedVolume, ArchivedVolumeKind,
    ArchivedWeightedPodAffinityTerm, ArchivedWhenUnsatisfiable,
};
use rebalancer_policy_sdk::view::Cluster;
use rkyv::rend::u32_le;

use super::super::bindings::rebalancer::policy::columns as w;

fn ids(list: &[u32_le]) -> Vec<u32> {
    list.iter().map(|v| v.to_native()).collect()
}

fn key_values(list: &[ArchivedKeyValue]) -> Vec<w::KeyValue> {
    list.iter()
        .map(|kv| w::KeyValue {
            key: kv.key.to_native(),
            value: kv.value.to_native(),
        })
        .collect()
}

fn quantities(list: &[ArchivedQuantity]) -> Vec<w::Quantity> {
    list.iter()
        .map(|q| w::Quantity {
            resource: q.resource.to_native(),
            milli: q.milli.to_native(),
        })
        .collect()
}

fn owner_ref(r: &ArchivedOwnerRef) -> w::OwnerRef {
    w::OwnerRef {
        kind: r.kind.to_native(),
        name: r.name.to_native(),
        uid: r.uid.to_native(),
        controller: r.controller,
    }
}

fn taint_effect(e: &ArchivedTaintEffect) -> w::TaintEffect {
    match e {
        ArchivedTaintEffect::NoSchedule => w::TaintEffect::NoSchedule,
        ArchivedTaintEffect::PreferNoSchedule => w::TaintEffect::PreferNoSchedule,
        ArchivedTaintEffect::NoExecute => w::TaintEffect::NoExecute,
    }
}

fn taint(t: &ArchivedTaint) -> w::Taint {
    w::Taint {
        key: t.key.to_native(),
        value: t.value.to_native(),
        effect: taint_effect(&t.effect),
    }
}

fn toleration(t: &ArchivedToleration) -> w::Toleration {
    w::Toleration {
        key: t.key.to_native(),
        operator: match t.operator {
            ArchivedTolerationOperator::Equal => w::TolerationOperator::Equal,
            ArchivedTolerationOperator::Exists => w::TolerationOperator::Exists,
        },
        value: t.value.to_native(),
        effect: t.effect.as_ref().map(taint_effect),
    }
}

fn requirement(r: &ArchivedRequirement) -> w::Requirement {
    w::Requirement {
        key: r.key.to_native(),
        operator: match r.operator {
            ArchivedSelectorOperator::In => w::SelectorOperator::In,
            ArchivedSelectorOperator::NotIn => w::SelectorOperator::NotIn,
            ArchivedSelectorOperator::Exists => w::SelectorOperator::Exists,
            ArchivedSelectorOperator::DoesNotExist => w::SelectorOperator::DoesNotExist,
            ArchivedSelectorOperator::Gt => w::SelectorOperator::Gt,
            ArchivedSelectorOperator::Lt => w::SelectorOperator::Lt,
        },
        values: ids(&r.values),
    }
}

fn requirements(list: &[ArchivedRequirement]) -> Vec<w::Requirement> {
    list.iter().map(requirement).collect()
}

fn label_selector(s: &ArchivedLabelSelector) -> w::LabelSelector {
    w::LabelSelector {
        match_labels: key_values(&s.match_labels),
        match_expressions: requirements(&s.match_expressions),
    }
}

fn node_selector_term(t: &ArchivedNodeSelectorTerm) -> w::NodeSelectorTerm {
    w::NodeSelectorTerm {
        match_expressions: requirements(&t.match_expressions),
        match_fields: requirements(&t.match_fields),
    }
}

fn pod_affinity_term(t: &ArchivedPodAffinityTerm) -> w::PodAffinityTerm {
    w::PodAffinityTerm {
        label_selector: t.label_selector.as_ref().map(label_selector),
        namespaces: ids(&t.namespaces),
        namespace_selector: t.namespace_selector.as_ref().map(label_selector),
        topology_key: t.topology_key.to_native(),
        match_label_keys: ids(&t.match_label_keys),
        mismatch_label_keys: ids(&t.mismatch_label_keys),
    }
}

fn weighted(list: &[ArchivedWeightedPodAffinityTerm]) -> Vec<w::WeightedPodAffinityTerm> {
    list.iter()
        .map(|t| w::WeightedPodAffinityTerm {
            weight: t.weight.to_native(),
            term: pod_affinity_term(&t.term),
        })
        .collect()
}

fn affinity(a: &ArchivedAffinity) -> w::Affinity {
    w::Affinity {
        node_required: a
            .node_required
            .as_ref()
            .map(|terms| terms.iter().map(node_selector_term).collect()),
        node_preferred: a
            .node_preferred
            .iter()
            .map(|t| w::PreferredSchedulingTerm {
                weight: t.weight.to_native(),
                term: node_selector_term(&t.term),
            })
            .collect(),
        pod_affinity_required: a
            .pod_affinity_required
            .iter()
            .map(pod_affinity_term)
            .collect(),
        pod_affinity_preferred: weighted(&a.pod_affinity_preferred),
        pod_anti_affinity_required: a
            .pod_anti_affinity_required
            .iter()
            .map(pod_affinity_term)
            .collect(),
        pod_anti_affinity_preferred: weighted(&a.pod_anti_affinity_preferred),
    }
}

fn inclusion(p: &ArchivedInclusionPolicy) -> w::InclusionPolicy {
    match p {
        ArchivedInclusionPolicy::Honor => w::InclusionPolicy::Honor,
        ArchivedInclusionPolicy::Ignore => w::InclusionPolicy::Ignore,
    }
}

fn topology_spread(t: &ArchivedTopologySpreadConstraint) -> w::TopologySpreadConstraint {
    w::TopologySpreadConstraint {
        max_skew: t.max_skew.to_native(),
        topology_key: t.topology_key.to_native(),
        when_unsatisfiable: match t.when_unsatisfiable {
            ArchivedWhenUnsatisfiable::DoNotSchedule => w::WhenUnsatisfiable::DoNotSchedule,
            ArchivedWhenUnsatisfiable::ScheduleAnyway => w::WhenUnsatisfiable::ScheduleAnyway,
        },
        label_selector: t.label_selector.as_ref().map(label_selector),
        min_domains: t.min_domains.as_ref().map(|v| v.to_native()),
        node_affinity_policy: t.node_affinity_policy.as_ref().map(inclusion),
        node_taints_policy: t.node_taints_policy.as_ref().map(inclusion),
        match_label_keys: ids(&t.match_label_keys),
    }
}

fn container(k: &ArchivedContainer) -> w::Container {
    w::Container {
        kind: match k.kind {
            ArchivedContainerKind::App => w::ContainerKind::App,
            ArchivedContainerKind::Init => w::ContainerKind::Init,
            ArchivedContainerKind::Ephemeral => w::ContainerKind::Ephemeral,
        },
        name: k.name.to_native(),
        image: k.image.to_native(),
        restart_count: k.restart_count.to_native(),
        ready: k.ready,
        waiting_reason: k.waiting_reason.to_native(),
        terminated_reason: k.terminated_reason.to_native(),
        exit_code: k.exit_code.as_ref().map(|v| v.to_native()),
    }
}

fn condition(k: &ArchivedPodCondition) -> w::PodCondition {
    w::PodCondition {
        condition_type: k.type_.to_native(),
        status: k.status.to_native(),
        reason: k.reason.to_native(),
        last_transition_ms: k.last_transition_ms.as_ref().map(|v| v.to_native()),
    }
}

fn volume(v: &ArchivedVolume) -> w::Volume {
    w::Volume {
        name: v.name.to_native(),
        kind: match v.kind {
            ArchivedVolumeKind::Other => w::VolumeKind::Other,
            ArchivedVolumeKind::EmptyDir => w::VolumeKind::EmptyDir,
            ArchivedVolumeKind::HostPath => w::VolumeKind::HostPath,
            ArchivedVolumeKind::PersistentVolumeClaim => w::VolumeKind::PersistentVolumeClaim,
            ArchivedVolumeKind::Ephemeral => w::VolumeKind::Ephemeral,
        },
        claim: v.claim.to_native(),
    }
}

fn usage_source(s: &ArchivedUsageSource) -> w::UsageSource {
    match s {
        ArchivedUsageSource::None => w::UsageSource::None,
        ArchivedUsageSource::NodeMetric => w::UsageSource::NodeMetric,
        ArchivedUsageSource::MetricsApi => w::UsageSource::MetricsApi,
    }
}

fn usage_of_node(u: &ArchivedNodeUsage) -> w::NodeUsageInfo {
    w::NodeUsageInfo {
        source: usage_source(&u.source),
        update_ms: u.update_ms.as_ref().map(|v| v.to_native()),
        window_ms: u.window_ms.as_ref().map(|v| v.to_native()),
        node: quantities(&u.node),
        system: quantities(&u.system),
        gone_pods: quantities(&u.gone_pods),
        raw_allocatable: quantities(&u.raw_allocatable),
    }
}

fn usage_of_pod(u: &ArchivedPodUsage) -> w::PodUsageInfo {
    w::PodUsageInfo {
        source: usage_source(&u.source),
        usage: quantities(&u.usage),
    }
}

fn pdb(p: &ArchivedPdb) -> w::Pdb {
    w::Pdb {
        namespace: p.namespace.to_native(),
        name: p.name.to_native(),
        selector: p.selector.as_ref().map(label_selector),
        disruptions_allowed: p.disruptions_allowed.to_native(),
        current_healthy: p.current_healthy.to_native(),
        desired_healthy: p.desired_healthy.to_native(),
        expected_pods: p.expected_pods.to_native(),
        unhealthy_pod_eviction_policy: match p.unhealthy_pod_eviction_policy {
            ArchivedUnhealthyPodEvictionPolicy::IfHealthyBudget => {
                w::UnhealthyPodEvictionPolicy::IfHealthyBudget
            }
            ArchivedUnhealthyPodEvictionPolicy::AlwaysAllow => {
                w::UnhealthyPodEvictionPolicy::AlwaysAllow
            }
        },
    }
}

fn cpu_pools(list: &[ArchivedCpuPool]) -> Vec<w::CpuPool> {
    list.iter()
        .map(|p| w::CpuPool {
            socket: p.socket.to_native(),
            numa: p.numa.to_native(),
            cpus: ids(&p.cpus),
        })
        .collect()
}

fn cpu_topology(t: &ArchivedNodeCpuTopology) -> w::CpuTopology {
    w::CpuTopology {
        has_nrt: t.has_nrt,
        cpus: t
            .cpus
            .iter()
            .map(|c| w::CpuInfo {
                id: c.id.to_native(),
                core: c.core.to_native(),
                socket: c.socket.to_native(),
                numa: c.numa.to_native(),
            })
            .collect(),
        kubelet_policy: t.kubelet_policy.to_native(),
        kubelet_options: key_values(&t.kubelet_options),
        kubelet_reserved: ids(&t.kubelet_reserved),
        pod_allocs: t
            .pod_allocs
            .iter()
            .map(|a| w::PodCpuAlloc {
                namespace: a.namespace.to_native(),
                name: a.name.to_native(),
                uid: a.uid.to_native(),
                pod: a.pod.to_native(),
                cpus: ids(&a.cpus),
                managed_by_kubelet: a.managed_by_kubelet,
            })
            .collect(),
        shared_pools: cpu_pools(&t.shared_pools),
        be_shared_pools: cpu_pools(&t.be_shared_pools),
        node_reserved: ids(&t.node_reserved),
        node_reservation_policy: t.node_reservation_policy.to_native(),
        system_qos_cpus: ids(&t.system_qos_cpus),
        system_qos_exclusive: t.system_qos_exclusive,
        topology_policies: ids(&t.topology_policies),
        zones: t
            .zones
            .iter()
            .map(|z| w::NumaZone {
                name: z.name.to_native(),
                numa: z.numa.as_ref().map(|v| v.to_native()),
                zone_type: z.zone_type.to_native(),
                resources: z
                    .resources
                    .iter()
                    .map(|r| w::ZoneResource {
                        name: r.name.to_native(),
                        capacity: r.capacity.to_native(),
                        allocatable: r.allocatable.to_native(),
                        available: r.available.to_native(),
                    })
                    .collect(),
            })
            .collect(),
    }
}

/// `pod-labels` of one row.
pub(super) fn pod_labels(c: &Cluster<'_>, _: &ClusterIndex, p: u32) -> Vec<w::KeyValue> {
    key_values(&c.pod(p).raw.labels)
}

/// `pod-annotations` of one row.
pub(super) fn pod_annotations(c: &Cluster<'_>, _: &ClusterIndex, p: u32) -> Vec<w::KeyValue> {
    key_values(c.pod(p).annotations())
}

/// `pod-owner-refs` of one row.
pub(super) fn pod_owner_refs(c: &Cluster<'_>, _: &ClusterIndex, p: u32) -> Vec<w::OwnerRef> {
    c.pod(p).raw.owner_refs.iter().map(owner_ref).collect()
}

/// `pod-node-selector` of one row.
pub(super) fn pod_node_selector(c: &Cluster<'_>, _: &ClusterIndex, p: u32) -> Vec<w::KeyValue> {
    key_values(c.pod(p).node_selector())
}

/// `pod-affinity` of one row.
pub(super) fn pod_affinity(c: &Cluster<'_>, _: &ClusterIndex, p: u32) -> w::Affinity {
    affinity(c.pod(p).affinity())
}

/// `pod-tolerations` of one row.
pub(super) fn pod_tolerations(c: &Cluster<'_>, _: &ClusterIndex, p: u32) -> Vec<w::Toleration> {
    c.pod(p).tolerations().iter().map(toleration).collect()
}

/// `pod-topology-spread` of one row.
pub(super) fn pod_topology_spread(
    c: &Cluster<'_>,
    _: &ClusterIndex,
    p: u32,
) -> Vec<w::TopologySpreadConstraint> {
    c.pod(p)
        .topology_spread()
        .iter()
        .map(topology_spread)
        .collect()
}

/// `pod-containers` of one row.
pub(super) fn pod_containers(c: &Cluster<'_>, _: &ClusterIndex, p: u32) -> Vec<w::Container> {
    c.pod(p).all_containers().iter().map(container).collect()
}

/// `pod-conditions` of one row.
pub(super) fn pod_conditions(c: &Cluster<'_>, _: &ClusterIndex, p: u32) -> Vec<w::PodCondition> {
    c.pod(p).conditions().iter().map(condition).collect()
}

/// `pod-volumes` of one row.
pub(super) fn pod_volumes(c: &Cluster<'_>, _: &ClusterIndex, p: u32) -> Vec<w::Volume> {
    c.pod(p).volumes().iter().map(volume).collect()
}

/// `pod-requests` of one row.
pub(super) fn pod_requests(c: &Cluster<'_>, _: &ClusterIndex, p: u32) -> Vec<w::Quantity> {
    quantities(&c.pod(p).raw.requests)
}

/// `pod-usage` of one row.
pub(super) fn pod_usage(c: &Cluster<'_>, _: &ClusterIndex, p: u32) -> w::PodUsageInfo {
    usage_of_pod(c.pod(p).usage())
}

/// `pod-pdbs` of one row.
pub(super) fn pod_pdbs(c: &Cluster<'_>, index: &ClusterIndex, p: u32) -> Vec<u32> {
    let ns = c.pod(p).namespace_id();
    (0..c.archive().pdbs.len() as u32)
        .filter(|&b| c.archive().pdbs[b as usize].namespace.to_native() == ns)
        .filter(|&b| index.pdb_pods(b).contains(&p))
        .collect()
}

/// `node-labels` of one row.
pub(super) fn node_labels(c: &Cluster<'_>, _: &ClusterIndex, n: u32) -> Vec<w::KeyValue> {
    key_values(&c.node(n).raw.labels)
}

/// `node-annotations` of one row.
pub(super) fn node_annotations(c: &Cluster<'_>, _: &ClusterIndex, n: u32) -> Vec<w::KeyValue> {
    key_values(c.node(n).annotations())
}

/// `node-taints` of one row.
pub(super) fn node_taints(c: &Cluster<'_>, _: &ClusterIndex, n: u32) -> Vec<w::Taint> {
    c.node(n).raw.taints.iter().map(taint).collect()
}

/// `node-allocatable` of one row.
pub(super) fn node_allocatable(c: &Cluster<'_>, _: &ClusterIndex, n: u32) -> Vec<w::Quantity> {
    quantities(&c.node(n).raw.allocatable)
}

/// `node-requested` of one row.
pub(super) fn node_requested(_: &Cluster<'_>, index: &ClusterIndex, n: u32) -> Vec<w::Quantity> {
    index
        .requested_all(n)
        .iter()
        .map(|&(resource, milli)| w::Quantity { resource, milli })
        .collect()
}

/// `node-usage` of one row.
pub(super) fn node_usage(c: &Cluster<'_>, _: &ClusterIndex, n: u32) -> w::NodeUsageInfo {
    usage_of_node(c.node(n).usage())
}

/// `node-cpu-topology` of one row.
pub(super) fn node_cpu_topology(c: &Cluster<'_>, _: &ClusterIndex, n: u32) -> w::CpuTopology {
    cpu_topology(c.node(n).cpu_topology())
}

/// `node-pods` of one row.
pub(super) fn node_pods(_: &Cluster<'_>, index: &ClusterIndex, n: u32) -> Vec<u32> {
    index.pods_on_node(n).to_vec()
}

/// `namespace-labels` of one row.
pub(super) fn namespace_labels(c: &Cluster<'_>, _: &ClusterIndex, r: u32) -> Vec<w::KeyValue> {
    key_values(&c.archive().namespaces[r as usize].labels)
}

/// `pdbs` of one row.
pub(super) fn pdbs(c: &Cluster<'_>, _: &ClusterIndex, r: u32) -> w::Pdb {
    pdb(&c.archive().pdbs[r as usize])
}

/// `pdb-pods` of one row.
pub(super) fn pdb_pods(_: &Cluster<'_>, index: &ClusterIndex, r: u32) -> Vec<u32> {
    index.pdb_pods(r).to_vec()
}
