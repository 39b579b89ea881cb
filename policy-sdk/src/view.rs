//! Zero-copy views over the archived snapshot.
//!
//! Owns the read API policies (and the host's evictor) use: [`Cluster`], [`PodRef`], [`NodeRef`].
//! Everything borrows from the archive bytes; nothing is decoded into owned structs. Group and
//! join on ids ([`StrId`], pod/node/owner indexes); resolve strings only for output.
//!
//! The pods' bulky fields live in per-field columns ([`Section`]). On the host every column is
//! resident; in a guest a column is pulled from the host the first time any pod's value is read
//! (one `cluster.snapshot-section` call), so a policy only ever receives what it reads.

use rkyv::rancor;
use rkyv::vec::ArchivedVec;

use crate::model::{
    ArchivedAffinity, ArchivedContainer, ArchivedKeyValue, ArchivedNamespace, ArchivedNode,
    ArchivedNodeCpuTopology, ArchivedNodeUsage, ArchivedOwner, ArchivedPod, ArchivedPodCondition,
    ArchivedPodNames, ArchivedPodPhase, ArchivedPodUsage, ArchivedQosClass, ArchivedSnapshot,
    ArchivedTaintEffect, ArchivedToleration, ArchivedTopologySpreadConstraint, ArchivedVolume,
    ContainerKind, NONE, PodPhase, QosClass, Section, StrId, TaintEffect, header,
};

/// Where a [`Cluster`]'s columns come from.
#[derive(Clone, Copy)]
enum Columns<'a> {
    /// The whole archive is in memory (the host, native tests).
    Resident(&'a [u8]),
    /// A guest: a column's bytes are fetched from the host on first use and kept.
    Fetched(fn(Section) -> &'static [u8]),
}

/// Why snapshot bytes could not be read.
#[derive(Debug)]
pub struct SnapshotError(pub String);

impl std::fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid snapshot archive: {}", self.0)
    }
}

impl std::error::Error for SnapshotError {}

/// The cluster at one revision, read in place.
#[derive(Clone, Copy)]
pub struct Cluster<'a> {
    archive: &'a ArchivedSnapshot,
    columns: Columns<'a>,
}

impl std::fmt::Debug for Cluster<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("revision", &self.revision())
            .field("nodes", &self.node_count())
            .field("pods", &self.pod_count())
            .finish()
    }
}

impl<'a> Cluster<'a> {
    /// Validate and open archive bytes ([`crate::model::to_bytes`] output; the bytes must be
    /// 8-byte aligned). Every section is checked.
    pub fn from_bytes(bytes: &'a [u8]) -> Result<Self, SnapshotError> {
        if !(bytes.as_ptr() as usize).is_multiple_of(8) {
            return Err(SnapshotError("buffer is not 8-byte aligned".into()));
        }
        let (version, count) = header::read(bytes).map_err(SnapshotError)?;
        if version != crate::model::LAYOUT_VERSION {
            return Err(SnapshotError(format!(
                "layout version {version} (this SDK reads {})",
                crate::model::LAYOUT_VERSION
            )));
        }
        if (count as usize) < Section::ALL.len() {
            return Err(SnapshotError(format!(
                "{count} sections, layout {version} has {}",
                Section::ALL.len()
            )));
        }
        let section = |s: Section| {
            header::range(bytes, s.id())
                .map(|r| &bytes[r])
                .ok_or_else(|| SnapshotError(format!("section {} is out of bounds", s.name())))
        };
        /// Validate a column (an archived vector of `T`) and count its rows.
        fn rows<T>(bytes: &[u8], s: Section) -> Result<usize, SnapshotError>
        where
            ArchivedVec<T>: rkyv::Portable
                + for<'b> rkyv::bytecheck::CheckBytes<
                    rkyv::api::high::HighValidator<'b, rancor::Error>,
                >,
        {
            rkyv::access::<ArchivedVec<T>, rancor::Error>(bytes)
                .map(|rows| rows.len())
                .map_err(|e| SnapshotError(format!("section {}: {e}", s.name())))
        }
        type List<T> = ArchivedVec<T>;
        let archive = rkyv::access::<ArchivedSnapshot, rancor::Error>(section(Section::Core)?)
            .map_err(|e| SnapshotError(format!("section core: {e}")))?;
        let pods = archive.pods.len();
        let nodes = archive.nodes.len();
        for s in &Section::ALL[1..] {
            let bytes = section(*s)?;
            let count = match s {
                Section::Core => pods,
                Section::PodNames => rows::<ArchivedPodNames>(bytes, *s)?,
                Section::PodAffinity => rows::<ArchivedAffinity>(bytes, *s)?,
                Section::PodAnnotations | Section::PodNodeSelector => {
                    rows::<List<ArchivedKeyValue>>(bytes, *s)?
                }
                Section::PodTolerations => rows::<List<ArchivedToleration>>(bytes, *s)?,
                Section::PodTopologySpread => {
                    rows::<List<ArchivedTopologySpreadConstraint>>(bytes, *s)?
                }
                Section::PodContainers => rows::<List<ArchivedContainer>>(bytes, *s)?,
                Section::PodConditions => rows::<List<ArchivedPodCondition>>(bytes, *s)?,
                Section::PodVolumes => rows::<List<ArchivedVolume>>(bytes, *s)?,
                Section::NodeAnnotations => rows::<List<ArchivedKeyValue>>(bytes, *s)?,
                Section::NodeUsage => rows::<ArchivedNodeUsage>(bytes, *s)?,
                Section::PodUsage => rows::<ArchivedPodUsage>(bytes, *s)?,
                Section::NodeCpuTopology => rows::<ArchivedNodeCpuTopology>(bytes, *s)?,
            };
            // The view indexes every column by pod (or node) id.
            let (expected, what) = if s.per_node() {
                (nodes, "nodes")
            } else {
                (pods, "pods")
            };
            if count != expected {
                return Err(SnapshotError(format!(
                    "section {} has {count} rows for {expected} {what}",
                    s.name()
                )));
            }
        }
        Ok(Cluster {
            archive,
            columns: Columns::Resident(bytes),
        })
    }

    /// Open archive bytes without validation.
    ///
    /// # Safety
    /// `bytes` must be the output of [`crate::model::to_bytes`] (the host's own bytes), aligned.
    pub unsafe fn from_bytes_unchecked(bytes: &'a [u8]) -> Self {
        let core = header::range(bytes, Section::Core.id()).expect("archive has a core section");
        // SAFETY: the caller guarantees the bytes are a well-formed archive of this layout.
        let archive = unsafe { rkyv::access_unchecked::<ArchivedSnapshot>(&bytes[core]) };
        Cluster {
            archive,
            columns: Columns::Resident(bytes),
        }
    }

    /// Open the core section alone; `fetch` returns any other section's bytes (8-byte aligned),
    /// pulling it on first use. This is how a guest reads the snapshot.
    ///
    /// # Safety
    /// `core` and every slice `fetch` returns must be the sections of one archive written by
    /// [`crate::model::to_bytes`] for this layout version.
    pub unsafe fn from_sections_unchecked(
        core: &'a [u8],
        fetch: fn(Section) -> &'static [u8],
    ) -> Self {
        // SAFETY: the caller guarantees `core` is the core section of a well-formed archive.
        let archive = unsafe { rkyv::access_unchecked::<ArchivedSnapshot>(core) };
        Cluster {
            archive,
            columns: Columns::Fetched(fetch),
        }
    }

    /// The bytes of a section.
    #[inline]
    fn section(&self, section: Section) -> &'a [u8] {
        match self.columns {
            Columns::Resident(bytes) => {
                let range = header::range(bytes, section.id())
                    .unwrap_or_else(|| panic!("archive has no section {}", section.name()));
                &bytes[range]
            }
            Columns::Fetched(fetch) => fetch(section),
        }
    }

    /// A pod column.
    #[inline]
    fn column<T: rkyv::Portable>(&self, section: Section) -> &'a ArchivedVec<T> {
        // SAFETY: the constructors establish that every section is the archive of its layout
        // type (validated by `from_bytes`, guaranteed by the callers of the unchecked ones), and
        // `Section`'s documentation fixes each column's row type, which the accessors below use.
        unsafe { rkyv::access_unchecked::<ArchivedVec<T>>(self.section(section)) }
    }

    #[inline]
    fn names(&self, pod: u32) -> &'a ArchivedPodNames {
        &self.column::<ArchivedPodNames>(Section::PodNames)[pod as usize]
    }

    #[inline]
    fn rows<T: rkyv::Portable>(&self, section: Section, pod: u32) -> &'a [T] {
        self.column::<ArchivedVec<T>>(section)[pod as usize].as_slice()
    }

    #[inline]
    pub fn archive(&self) -> &'a ArchivedSnapshot {
        self.archive
    }

    #[inline]
    pub fn revision(&self) -> u64 {
        self.archive.revision.to_native()
    }

    /// The snapshot time (ms since the Unix epoch): "now" for every age computation.
    #[inline]
    pub fn time_ms(&self) -> i64 {
        self.archive.time_ms.to_native()
    }

    /// The interned string `id`.
    #[inline]
    pub fn str(&self, id: StrId) -> &'a str {
        self.archive.strings[id as usize].as_str()
    }

    /// The id of `s` if some object uses it; `None` means no object in the cluster has it.
    pub fn lookup(&self, s: &str) -> Option<StrId> {
        let sorted = &self.archive.strings_sorted;
        let strings = &self.archive.strings;
        sorted
            .binary_search_by(|id| strings[id.to_native() as usize].as_str().cmp(s))
            .ok()
            .map(|i| sorted[i].to_native())
    }

    #[inline]
    pub fn node_count(&self) -> usize {
        self.archive.nodes.len()
    }

    #[inline]
    pub fn pod_count(&self) -> usize {
        self.archive.pods.len()
    }

    #[inline]
    pub fn node(&self, id: u32) -> NodeRef<'a> {
        NodeRef {
            id,
            raw: &self.archive.nodes[id as usize],
            cluster: *self,
        }
    }

    #[inline]
    pub fn pod(&self, id: u32) -> PodRef<'a> {
        PodRef {
            id,
            raw: &self.archive.pods[id as usize],
            cluster: *self,
        }
    }

    #[inline]
    pub fn nodes(&self) -> impl ExactSizeIterator<Item = NodeRef<'a>> + 'a {
        let cluster = *self;
        (0..self.archive.nodes.len() as u32).map(move |id| cluster.node(id))
    }

    #[inline]
    pub fn pods(&self) -> impl ExactSizeIterator<Item = PodRef<'a>> + 'a {
        let cluster = *self;
        (0..self.archive.pods.len() as u32).map(move |id| cluster.pod(id))
    }

    #[inline]
    pub fn owner(&self, id: u32) -> &'a ArchivedOwner {
        &self.archive.owners[id as usize]
    }

    #[inline]
    pub fn owner_count(&self) -> usize {
        self.archive.owners.len()
    }

    /// The Namespace object named by `name` (id), if the snapshot has it.
    #[inline]
    pub fn namespace(&self, name: StrId) -> Option<&'a ArchivedNamespace> {
        self.archive
            .namespaces
            .iter()
            .find(|ns| ns.name.to_native() == name)
    }

    /// Pod ids per node index (pods not bound to a known node are left out), in snapshot order.
    pub fn pods_by_node(&self) -> Vec<Vec<u32>> {
        let mut by_node = vec![Vec::new(); self.node_count()];
        for (i, pod) in self.archive.pods.iter().enumerate() {
            let node = pod.node.to_native();
            if node != NONE {
                by_node[node as usize].push(i as u32);
            }
        }
        by_node
    }

    /// The value of a priority class, if it exists.
    pub fn priority_class_value(&self, name: &str) -> Option<i32> {
        let id = self.lookup(name)?;
        self.archive
            .priority_classes
            .iter()
            .find(|pc| pc.name.to_native() == id)
            .map(|pc| pc.value.to_native())
    }
}

/// Find `key` among interned key/value pairs.
pub fn kv_get(pairs: &[ArchivedKeyValue], key: StrId) -> Option<StrId> {
    pairs
        .iter()
        .find(|kv| kv.key.to_native() == key)
        .map(|kv| kv.value.to_native())
}

/// One node of the snapshot.
#[derive(Clone, Copy)]
pub struct NodeRef<'a> {
    pub id: u32,
    pub raw: &'a ArchivedNode,
    cluster: Cluster<'a>,
}

impl std::fmt::Debug for NodeRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Node({} {})", self.id, self.name())
    }
}

impl<'a> NodeRef<'a> {
    #[inline]
    pub fn name(&self) -> &'a str {
        self.cluster.str(self.raw.name.to_native())
    }
    /// Annotations (interned), without `kubectl.kubernetes.io/last-applied-configuration`
    /// (layout 3: section `node-annotations`).
    #[inline]
    pub fn annotations(&self) -> &'a [ArchivedKeyValue] {
        self.cluster.rows(Section::NodeAnnotations, self.id)
    }
    /// Annotation value by key text.
    pub fn annotation(&self, key: &str) -> Option<&'a str> {
        let key = self.cluster.lookup(key)?;
        kv_get(self.annotations(), key).map(|v| self.cluster.str(v))
    }
    /// Measured usage (layout 3: section `node-usage`); its `source` is
    /// [`UsageSource::None`](crate::model::UsageSource::None) when nothing was reported.
    #[inline]
    pub fn usage(&self) -> &'a ArchivedNodeUsage {
        &self.cluster.column::<ArchivedNodeUsage>(Section::NodeUsage)[self.id as usize]
    }
    /// CPU topology and orchestration state (layout 3: section `node-cpu-topology`).
    #[inline]
    pub fn cpu_topology(&self) -> &'a ArchivedNodeCpuTopology {
        &self
            .cluster
            .column::<ArchivedNodeCpuTopology>(Section::NodeCpuTopology)[self.id as usize]
    }
    #[inline]
    pub fn name_id(&self) -> StrId {
        self.raw.name.to_native()
    }
    #[inline]
    pub fn is_ready(&self) -> bool {
        self.raw.ready
    }
    #[inline]
    pub fn is_unschedulable(&self) -> bool {
        self.raw.unschedulable
    }
    /// Label value by key id.
    #[inline]
    pub fn label_id(&self, key: StrId) -> Option<StrId> {
        kv_get(&self.raw.labels, key)
    }
    /// Label value by key text.
    #[inline]
    pub fn label(&self, key: &str) -> Option<&'a str> {
        let key = self.cluster.lookup(key)?;
        self.label_id(key).map(|v| self.cluster.str(v))
    }
    #[inline]
    pub fn labels(&self) -> impl Iterator<Item = (&'a str, &'a str)> + 'a {
        let c = self.cluster;
        self.raw
            .labels
            .iter()
            .map(move |kv| (c.str(kv.key.to_native()), c.str(kv.value.to_native())))
    }
    /// Allocatable amount (milli-units) of a resource id; 0 when absent.
    #[inline]
    pub fn allocatable(&self, resource: StrId) -> i64 {
        self.raw
            .allocatable
            .iter()
            .find(|q| q.resource.to_native() == resource)
            .map_or(0, |q| q.milli.to_native())
    }
    #[inline]
    pub fn taints(&self) -> impl Iterator<Item = (StrId, StrId, TaintEffect)> + 'a {
        self.raw.taints.iter().map(|t| {
            (
                t.key.to_native(),
                t.value.to_native(),
                taint_effect(&t.effect),
            )
        })
    }
}

/// One pod of the snapshot.
#[derive(Clone, Copy)]
pub struct PodRef<'a> {
    pub id: u32,
    pub raw: &'a ArchivedPod,
    cluster: Cluster<'a>,
}

impl std::fmt::Debug for PodRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Pod({} {}/{})", self.id, self.namespace(), self.name())
    }
}

impl<'a> PodRef<'a> {
    #[inline]
    pub fn cluster(&self) -> Cluster<'a> {
        self.cluster
    }
    #[inline]
    pub fn name(&self) -> &'a str {
        self.cluster.names(self.id).name.as_str()
    }
    #[inline]
    pub fn uid(&self) -> &'a str {
        self.cluster.names(self.id).uid.as_str()
    }
    #[inline]
    pub fn namespace(&self) -> &'a str {
        self.cluster.str(self.raw.namespace.to_native())
    }
    /// Annotations (interned), without `kubectl.kubernetes.io/last-applied-configuration`.
    #[inline]
    pub fn annotations(&self) -> &'a [ArchivedKeyValue] {
        self.cluster.rows(Section::PodAnnotations, self.id)
    }
    /// Measured usage (layout 3: section `pod-usage`); its `source` is
    /// [`UsageSource::None`](crate::model::UsageSource::None) when nothing was reported.
    #[inline]
    pub fn usage(&self) -> &'a ArchivedPodUsage {
        &self.cluster.column::<ArchivedPodUsage>(Section::PodUsage)[self.id as usize]
    }
    /// `spec.nodeSelector` (interned).
    #[inline]
    pub fn node_selector(&self) -> &'a [ArchivedKeyValue] {
        self.cluster.rows(Section::PodNodeSelector, self.id)
    }
    /// `spec.affinity`.
    #[inline]
    pub fn affinity(&self) -> &'a ArchivedAffinity {
        &self
            .cluster
            .column::<ArchivedAffinity>(Section::PodAffinity)[self.id as usize]
    }
    /// `spec.tolerations`.
    #[inline]
    pub fn tolerations(&self) -> &'a [ArchivedToleration] {
        self.cluster.rows(Section::PodTolerations, self.id)
    }
    /// `spec.topologySpreadConstraints`.
    #[inline]
    pub fn topology_spread(&self) -> &'a [ArchivedTopologySpreadConstraint] {
        self.cluster.rows(Section::PodTopologySpread, self.id)
    }
    /// Every container (app, init and ephemeral) with its status.
    #[inline]
    pub fn all_containers(&self) -> &'a [ArchivedContainer] {
        self.cluster.rows(Section::PodContainers, self.id)
    }
    /// `status.conditions`.
    #[inline]
    pub fn conditions(&self) -> &'a [ArchivedPodCondition] {
        self.cluster.rows(Section::PodConditions, self.id)
    }
    /// `spec.volumes`.
    #[inline]
    pub fn volumes(&self) -> &'a [ArchivedVolume] {
        self.cluster.rows(Section::PodVolumes, self.id)
    }
    #[inline]
    pub fn namespace_id(&self) -> StrId {
        self.raw.namespace.to_native()
    }
    /// Node index, when bound to a node in the snapshot.
    #[inline]
    pub fn node(&self) -> Option<u32> {
        let n = self.raw.node.to_native();
        (n != NONE).then_some(n)
    }
    /// `spec.nodeName` as written ("" when unbound).
    #[inline]
    pub fn node_name(&self) -> &'a str {
        self.cluster.str(self.raw.node_name.to_native())
    }
    /// Owner index (first ownerRef), `None` for bare pods.
    #[inline]
    pub fn owner(&self) -> Option<u32> {
        let o = self.raw.owner.to_native();
        (o != NONE).then_some(o)
    }
    /// Kind of the first ownerRef ("" for bare pods).
    #[inline]
    pub fn owner_kind(&self) -> &'a str {
        self.raw
            .owner_refs
            .first()
            .map_or("", |r| self.cluster.str(r.kind.to_native()))
    }
    #[inline]
    pub fn phase(&self) -> PodPhase {
        match self.raw.phase {
            ArchivedPodPhase::Pending => PodPhase::Pending,
            ArchivedPodPhase::Running => PodPhase::Running,
            ArchivedPodPhase::Succeeded => PodPhase::Succeeded,
            ArchivedPodPhase::Failed => PodPhase::Failed,
            ArchivedPodPhase::Unknown => PodPhase::Unknown,
        }
    }
    #[inline]
    pub fn qos(&self) -> QosClass {
        match self.raw.qos {
            ArchivedQosClass::BestEffort => QosClass::BestEffort,
            ArchivedQosClass::Burstable => QosClass::Burstable,
            ArchivedQosClass::Guaranteed => QosClass::Guaranteed,
        }
    }
    #[inline]
    pub fn priority(&self) -> Option<i32> {
        self.raw.priority.as_ref().map(|p| p.to_native())
    }
    /// `metadata.deletionTimestamp` is set in the snapshot.
    #[inline]
    pub fn has_deletion_timestamp(&self) -> bool {
        self.raw.deletion_ms.is_some()
    }
    /// Succeeded or Failed.
    #[inline]
    pub fn is_terminal(&self) -> bool {
        matches!(self.phase(), PodPhase::Succeeded | PodPhase::Failed)
    }
    #[inline]
    pub fn creation_ms(&self) -> i64 {
        self.raw.creation_ms.to_native()
    }
    #[inline]
    pub fn start_ms(&self) -> Option<i64> {
        self.raw.start_ms.as_ref().map(|t| t.to_native())
    }
    /// Requested amount (milli-units) of a resource id; 0 when not requested.
    #[inline]
    pub fn request(&self, resource: StrId) -> i64 {
        self.raw
            .requests
            .iter()
            .find(|q| q.resource.to_native() == resource)
            .map_or(0, |q| q.milli.to_native())
    }
    #[inline]
    pub fn label_id(&self, key: StrId) -> Option<StrId> {
        kv_get(&self.raw.labels, key)
    }
    #[inline]
    pub fn label(&self, key: &str) -> Option<&'a str> {
        let key = self.cluster.lookup(key)?;
        self.label_id(key).map(|v| self.cluster.str(v))
    }
    #[inline]
    pub fn labels(&self) -> impl Iterator<Item = (&'a str, &'a str)> + 'a {
        let c = self.cluster;
        self.raw
            .labels
            .iter()
            .map(move |kv| (c.str(kv.key.to_native()), c.str(kv.value.to_native())))
    }
    #[inline]
    pub fn annotation(&self, key: &str) -> Option<&'a str> {
        let key = self.cluster.lookup(key)?;
        kv_get(self.annotations(), key).map(|v| self.cluster.str(v))
    }
    #[inline]
    pub fn has_annotation(&self, key: &str) -> bool {
        self.annotation(key).is_some()
    }
    /// Containers of the given kind.
    #[inline]
    pub fn containers(&self, kind: ContainerKind) -> impl Iterator<Item = &'a ArchivedContainer> {
        self.all_containers().iter().filter(move |c| {
            matches!(
                (&c.kind, kind),
                (crate::model::ArchivedContainerKind::App, ContainerKind::App)
                    | (
                        crate::model::ArchivedContainerKind::Init,
                        ContainerKind::Init
                    )
                    | (
                        crate::model::ArchivedContainerKind::Ephemeral,
                        ContainerKind::Ephemeral
                    )
            )
        })
    }
    /// Owner record of the first ownerRef.
    #[inline]
    pub fn owner_record(&self) -> Option<&'a ArchivedOwner> {
        self.owner().map(|o| self.cluster.owner(o))
    }
}

/// Convert an archived taint effect.
pub fn taint_effect(e: &ArchivedTaintEffect) -> TaintEffect {
    match e {
        ArchivedTaintEffect::NoSchedule => TaintEffect::NoSchedule,
        ArchivedTaintEffect::PreferNoSchedule => TaintEffect::PreferNoSchedule,
        ArchivedTaintEffect::NoExecute => TaintEffect::NoExecute,
    }
}
