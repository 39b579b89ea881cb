//! [`ClusterIndex`]: the per-snapshot indexes every run shares read-only — pods by node,
//! requested resources per node, ready nodes, PDB coverage ([`PodPdbs`]), owner replica counts,
//! PVCs, well-known string ids ([`WellKnownIds`]) and each pod's precomputed [`PodTraits`].
//!
//! Built once per snapshot ([`ClusterIndex::new`]); must not hold anything a run changes (that is
//! [`super::state::RunState`]).

use super::{
    EVICT_ANNOTATION, MIRROR_ANNOTATION, PREFER_NO_EVICTION_ANNOTATION, SOURCE_ANNOTATION,
};
use std::collections::HashMap;

use crate::k8s::selector::{Selector, label_selector_matches};
use crate::model::{ArchivedKeyValue, ArchivedPodPhase, ArchivedVolumeKind, NONE, StrId};
use crate::view::{Cluster, kv_get};

/// Ids of strings the evictor looks for; `None` when no object in the snapshot uses the string.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WellKnownIds {
    pub cpu: Option<StrId>,
    pub memory: Option<StrId>,
    pub pods: Option<StrId>,
    pub ready_condition: Option<StrId>,
    pub condition_true: Option<StrId>,
    pub daemon_set: Option<StrId>,
    pub evict_annotation: Option<StrId>,
    pub prefer_no_eviction_annotation: Option<StrId>,
    pub mirror_annotation: Option<StrId>,
    pub source_annotation: Option<StrId>,
    pub source_api: Option<StrId>,
}

/// How many PDBs select a pod (the Eviction API refuses pods with more than one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodPdbs {
    None,
    One(u32),
    Many(u32),
}

/// Facts about a pod that DefaultEvictor's Filter needs and that do not depend on its args,
/// computed once per snapshot so that Filter reads a few flat arrays instead of the archive.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PodTraits(u16);

impl PodTraits {
    pub(super) const EVICT_ANNOTATION: u16 = 1;
    pub(super) const PREFER_NO_EVICTION: u16 = 1 << 1;
    pub(super) const MIRROR: u16 = 1 << 2;
    pub(super) const STATIC: u16 = 1 << 3;
    pub(super) const TERMINATING: u16 = 1 << 4;
    pub(super) const LOCAL_STORAGE: u16 = 1 << 5;
    pub(super) const DAEMON_SET: u16 = 1 << 6;
    pub(super) const PVC: u16 = 1 << 7;
    pub(super) const RESOURCE_CLAIMS: u16 = 1 << 8;
    pub(super) const BARE: u16 = 1 << 9;
    pub(super) const FAILED: u16 = 1 << 10;
    pub(super) const SINGLE_OWNER: u16 = 1 << 11;
    pub(super) const READY: u16 = 1 << 12;
    pub(super) const HAS_PRIORITY: u16 = 1 << 13;
    pub(super) const STARTED: u16 = 1 << 14;

    pub(super) fn has(self, bit: u16) -> bool {
        self.0 & bit != 0
    }
    /// `descheduler.alpha.kubernetes.io/evict` is present.
    pub fn evict_annotation(self) -> bool {
        self.has(Self::EVICT_ANNOTATION)
    }
    /// `descheduler.alpha.kubernetes.io/prefer-no-eviction` is present.
    pub fn prefer_no_eviction(self) -> bool {
        self.has(Self::PREFER_NO_EVICTION)
    }
    pub fn mirror(self) -> bool {
        self.has(Self::MIRROR)
    }
    /// `kubernetes.io/config.source` is present and not `api`.
    pub fn static_pod(self) -> bool {
        self.has(Self::STATIC)
    }
    /// `metadata.deletionTimestamp` is set in the snapshot.
    pub fn terminating(self) -> bool {
        self.has(Self::TERMINATING)
    }
    /// An emptyDir or hostPath volume.
    pub fn local_storage(self) -> bool {
        self.has(Self::LOCAL_STORAGE)
    }
    /// Some ownerReference is a DaemonSet.
    pub fn daemon_set(self) -> bool {
        self.has(Self::DAEMON_SET)
    }
    /// A persistentVolumeClaim volume.
    pub fn pvc(self) -> bool {
        self.has(Self::PVC)
    }
    pub fn resource_claims(self) -> bool {
        self.has(Self::RESOURCE_CLAIMS)
    }
    /// No ownerReferences.
    pub fn bare(self) -> bool {
        self.has(Self::BARE)
    }
    /// Phase Failed.
    pub fn failed(self) -> bool {
        self.has(Self::FAILED)
    }
    /// Exactly one ownerReference.
    pub fn single_owner(self) -> bool {
        self.has(Self::SINGLE_OWNER)
    }
    /// The Ready condition is True.
    pub fn ready(self) -> bool {
        self.has(Self::READY)
    }
}

/// Indexes over one snapshot, built once and shared read-only by every run on it (plain data:
/// `Send + Sync`, no borrows).
#[derive(Debug, Clone)]
pub struct ClusterIndex {
    pub(super) revision: u64,
    pub(super) pod_count: usize,
    /// Pods bound to node `n` are `node_pods[node_pod_start[n]..node_pod_start[n + 1]]`.
    pub(super) node_pod_start: Vec<u32>,
    pub(super) node_pods: Vec<u32>,
    /// Non-terminal (not Succeeded/Failed) pods per node, terminating ones included.
    pub(super) node_active_pods: Vec<u32>,
    /// Summed requests of the non-terminal pods per node: `(resource, milli)`.
    pub(super) node_requested: Vec<Vec<(StrId, i64)>>,
    pub(super) ready_nodes: Vec<u32>,
    pub(super) pdb_pods: Vec<Vec<u32>>,
    /// First PDB selecting each pod, or `NONE`.
    pub(super) pod_first_pdb: Vec<u32>,
    pub(super) pod_pdb_count: Vec<u32>,
    /// Pods listing each owner uid among their ownerReferences.
    pub(super) owner_uid_pods: HashMap<StrId, u32>,
    pub(super) pod_traits: Vec<PodTraits>,
    /// `spec.priority` (meaningful with `HAS_PRIORITY`).
    pub(super) pod_priority: Vec<i32>,
    /// `status.startTime` (meaningful with `STARTED`).
    pub(super) pod_start_ms: Vec<i64>,
    /// Pods sharing the uid of the pod's first ownerReference (0 for bare pods).
    pub(super) pod_owner_replicas: Vec<u32>,
    /// `(namespace, name)` → PVC index.
    pub(super) pvcs: HashMap<(StrId, StrId), u32>,
    pub(super) ids: WellKnownIds,
}

impl ClusterIndex {
    pub fn new(cluster: Cluster<'_>) -> Self {
        let archive = cluster.archive();
        let node_count = cluster.node_count();
        let pod_count = cluster.pod_count();

        // Pods by node (CSR), in snapshot order.
        let mut node_pod_start = vec![0u32; node_count + 1];
        for pod in archive.pods.iter() {
            let n = pod.node.to_native();
            if n != NONE && (n as usize) < node_count {
                node_pod_start[n as usize + 1] += 1;
            }
        }
        for i in 0..node_count {
            node_pod_start[i + 1] += node_pod_start[i];
        }
        let mut cursor = node_pod_start.clone();
        let mut node_pods = vec![0u32; node_pod_start[node_count] as usize];
        for (i, pod) in archive.pods.iter().enumerate() {
            let n = pod.node.to_native();
            if n != NONE && (n as usize) < node_count {
                node_pods[cursor[n as usize] as usize] = i as u32;
                cursor[n as usize] += 1;
            }
        }

        // Node usage of non-terminal pods (nodeFit's `NodeUtilization`).
        let mut node_active_pods = vec![0u32; node_count];
        let mut node_requested: Vec<Vec<(StrId, i64)>> = vec![Vec::new(); node_count];
        for n in 0..node_count {
            let pods = &node_pods[node_pod_start[n] as usize..node_pod_start[n + 1] as usize];
            for &p in pods {
                let pod = &archive.pods[p as usize];
                if matches!(
                    pod.phase,
                    ArchivedPodPhase::Succeeded | ArchivedPodPhase::Failed
                ) {
                    continue;
                }
                node_active_pods[n] += 1;
                let sums = &mut node_requested[n];
                for q in pod.requests.iter() {
                    let (res, milli) = (q.resource.to_native(), q.milli.to_native());
                    match sums.iter_mut().find(|(r, _)| *r == res) {
                        Some((_, total)) => *total = total.saturating_add(milli),
                        None => sums.push((res, milli)),
                    }
                }
            }
        }

        let ready_nodes = cluster
            .nodes()
            .filter(|n| n.is_ready())
            .map(|n| n.id)
            .collect();

        // Owner uids (every ownerRef of a pod counts once, like the ownerRef UID indexer).
        let mut owner_uid_pods: HashMap<StrId, u32> = HashMap::new();
        for pod in archive.pods.iter() {
            for (i, r) in pod.owner_refs.iter().enumerate() {
                let uid = r.uid.to_native();
                if pod.owner_refs[..i].iter().any(|o| o.uid.to_native() == uid) {
                    continue;
                }
                *owner_uid_pods.entry(uid).or_insert(0) += 1;
            }
        }

        let pvcs = archive
            .pvcs
            .iter()
            .enumerate()
            .map(|(i, pvc)| ((pvc.namespace.to_native(), pvc.name.to_native()), i as u32))
            .collect();

        // PDB coverage: nil selector selects nothing, empty selects the whole namespace, an
        // invalid one nothing.
        let mut pods_by_namespace: HashMap<StrId, Vec<u32>> = HashMap::new();
        if !archive.pdbs.is_empty() {
            for (i, pod) in archive.pods.iter().enumerate() {
                pods_by_namespace
                    .entry(pod.namespace.to_native())
                    .or_default()
                    .push(i as u32);
            }
        }
        let mut pdb_pods = vec![Vec::new(); archive.pdbs.len()];
        let mut pod_first_pdb = vec![NONE; pod_count];
        let mut pod_pdb_count = vec![0u32; pod_count];
        for (p, pdb) in archive.pdbs.iter().enumerate() {
            let Some(selector) = pdb.selector.as_ref() else {
                continue;
            };
            let Some(candidates) = pods_by_namespace.get(&pdb.namespace.to_native()) else {
                continue;
            };
            for &pod in candidates {
                if label_selector_matches(selector, &archive.pods[pod as usize].labels) {
                    pdb_pods[p].push(pod);
                    pod_pdb_count[pod as usize] += 1;
                    if pod_first_pdb[pod as usize] == NONE {
                        pod_first_pdb[pod as usize] = p as u32;
                    }
                }
            }
        }

        let ids = WellKnownIds {
            cpu: cluster.lookup("cpu"),
            memory: cluster.lookup("memory"),
            pods: cluster.lookup("pods"),
            ready_condition: cluster.lookup("Ready"),
            condition_true: cluster.lookup("True"),
            daemon_set: cluster.lookup("DaemonSet"),
            evict_annotation: cluster.lookup(EVICT_ANNOTATION),
            prefer_no_eviction_annotation: cluster.lookup(PREFER_NO_EVICTION_ANNOTATION),
            mirror_annotation: cluster.lookup(MIRROR_ANNOTATION),
            source_annotation: cluster.lookup(SOURCE_ANNOTATION),
            source_api: cluster.lookup("api"),
        };

        let mut pod_traits = Vec::with_capacity(pod_count);
        let mut pod_priority = Vec::with_capacity(pod_count);
        let mut pod_start_ms = Vec::with_capacity(pod_count);
        let mut pod_owner_replicas = Vec::with_capacity(pod_count);
        let has_key = |pairs: &[ArchivedKeyValue], key: Option<StrId>| {
            key.is_some_and(|k| kv_get(pairs, k).is_some())
        };
        for pod_ref in cluster.pods() {
            let pod = pod_ref.raw;
            let mut t = 0u16;
            let ann = pod_ref.annotations();
            let mut set = |cond: bool, bit: u16| {
                if cond {
                    t |= bit;
                }
            };
            set(
                has_key(ann, ids.evict_annotation),
                PodTraits::EVICT_ANNOTATION,
            );
            set(
                has_key(ann, ids.prefer_no_eviction_annotation),
                PodTraits::PREFER_NO_EVICTION,
            );
            set(has_key(ann, ids.mirror_annotation), PodTraits::MIRROR);
            set(
                ids.source_annotation
                    .and_then(|k| kv_get(ann, k))
                    .is_some_and(|v| Some(v) != ids.source_api),
                PodTraits::STATIC,
            );
            set(pod.deletion_ms.is_some(), PodTraits::TERMINATING);
            set(
                pod_ref.volumes().iter().any(|v| {
                    matches!(
                        v.kind,
                        ArchivedVolumeKind::EmptyDir | ArchivedVolumeKind::HostPath
                    )
                }),
                PodTraits::LOCAL_STORAGE,
            );
            set(
                ids.daemon_set
                    .is_some_and(|ds| pod.owner_refs.iter().any(|r| r.kind.to_native() == ds)),
                PodTraits::DAEMON_SET,
            );
            set(
                pod_ref
                    .volumes()
                    .iter()
                    .any(|v| matches!(v.kind, ArchivedVolumeKind::PersistentVolumeClaim)),
                PodTraits::PVC,
            );
            set(pod.has_resource_claims, PodTraits::RESOURCE_CLAIMS);
            set(pod.owner_refs.is_empty(), PodTraits::BARE);
            set(
                matches!(pod.phase, ArchivedPodPhase::Failed),
                PodTraits::FAILED,
            );
            set(pod.owner_refs.len() == 1, PodTraits::SINGLE_OWNER);
            set(
                match (ids.ready_condition, ids.condition_true) {
                    (Some(ready), Some(t)) => pod_ref
                        .conditions()
                        .iter()
                        .any(|c| c.type_.to_native() == ready && c.status.to_native() == t),
                    _ => false,
                },
                PodTraits::READY,
            );
            let priority = pod.priority.as_ref().map(|p| p.to_native());
            set(priority.is_some(), PodTraits::HAS_PRIORITY);
            let start = pod.start_ms.as_ref().map(|s| s.to_native());
            set(start.is_some(), PodTraits::STARTED);
            pod_traits.push(PodTraits(t));
            pod_priority.push(priority.unwrap_or(0));
            pod_start_ms.push(start.unwrap_or(0));
            pod_owner_replicas.push(pod.owner_refs.first().map_or(0, |r| {
                owner_uid_pods.get(&r.uid.to_native()).copied().unwrap_or(0)
            }));
        }

        ClusterIndex {
            revision: cluster.revision(),
            pod_count,
            node_pod_start,
            node_pods,
            node_active_pods,
            node_requested,
            ready_nodes,
            pdb_pods,
            pod_first_pdb,
            pod_pdb_count,
            owner_uid_pods,
            pod_traits,
            pod_priority,
            pod_start_ms,
            pod_owner_replicas,
            pvcs,
            ids,
        }
    }

    /// The revision of the snapshot this index was built from.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// The index was built from this snapshot (same revision and pod count).
    pub fn is_for(&self, cluster: Cluster<'_>) -> bool {
        self.revision == cluster.revision() && self.pod_count == cluster.pod_count()
    }

    pub fn ids(&self) -> &WellKnownIds {
        &self.ids
    }

    /// Ids of the pods bound to `node`, in snapshot order (every phase).
    pub fn pods_on_node(&self, node: u32) -> &[u32] {
        let n = node as usize;
        if n + 1 >= self.node_pod_start.len() {
            return &[];
        }
        &self.node_pods[self.node_pod_start[n] as usize..self.node_pod_start[n + 1] as usize]
    }

    /// Non-terminal pods on the node (terminating ones included).
    pub fn active_pod_count(&self, node: u32) -> u32 {
        self.node_active_pods
            .get(node as usize)
            .copied()
            .unwrap_or(0)
    }

    /// Summed requests (milli-units) of a resource over the node's non-terminal pods.
    pub fn requested(&self, node: u32, resource: StrId) -> i64 {
        self.node_requested
            .get(node as usize)
            .and_then(|sums| sums.iter().find(|(r, _)| *r == resource))
            .map_or(0, |&(_, m)| m)
    }

    /// Summed requests (milli-units) over the node's non-terminal pods, per resource (string
    /// id), each resource any of them requests.
    pub fn requested_all(&self, node: u32) -> &[(StrId, i64)] {
        self.node_requested
            .get(node as usize)
            .map_or(&[], Vec::as_slice)
    }

    /// Ready nodes, ascending.
    pub fn ready_nodes(&self) -> &[u32] {
        &self.ready_nodes
    }

    /// Ready nodes matching a (policy-level) node selector: the nodes a run's plugins are given.
    pub fn nodes_in_scope(&self, cluster: Cluster<'_>, node_selector: &Selector) -> Vec<u32> {
        let selector = node_selector.resolve(cluster);
        self.ready_nodes
            .iter()
            .copied()
            .filter(|&n| selector.matches(cluster, &cluster.node(n).raw.labels))
            .collect()
    }

    /// Pods selected by a PDB (same namespace, selector matches).
    pub fn pdb_pods(&self, pdb: u32) -> &[u32] {
        self.pdb_pods.get(pdb as usize).map_or(&[], Vec::as_slice)
    }

    /// The PDBs selecting a pod.
    pub fn pdbs_of_pod(&self, pod: u32) -> PodPdbs {
        match self.pod_pdb_count.get(pod as usize).copied().unwrap_or(0) {
            0 => PodPdbs::None,
            1 => PodPdbs::One(self.pod_first_pdb[pod as usize]),
            n => PodPdbs::Many(n),
        }
    }

    /// Pods (any phase) with `uid` among their ownerReferences.
    pub fn pods_with_owner_uid(&self, uid: StrId) -> u32 {
        self.owner_uid_pods.get(&uid).copied().unwrap_or(0)
    }

    /// The PVC `namespace/name`, if the snapshot has it.
    pub fn pvc(&self, namespace: StrId, name: StrId) -> Option<u32> {
        self.pvcs.get(&(namespace, name)).copied()
    }

    /// Filter-relevant facts about a pod.
    pub fn pod_traits(&self, pod: u32) -> PodTraits {
        self.pod_traits
            .get(pod as usize)
            .copied()
            .unwrap_or_default()
    }

    /// The pod's Ready condition is `True` (`podutil.IsPodReady`).
    pub fn pod_is_ready(&self, pod: u32) -> bool {
        self.pod_traits(pod).ready()
    }

    /// Pods (any phase) sharing the uid of the pod's first ownerReference; 0 for bare pods.
    pub fn owner_replicas(&self, pod: u32) -> u32 {
        self.pod_owner_replicas
            .get(pod as usize)
            .copied()
            .unwrap_or(0)
    }
}
