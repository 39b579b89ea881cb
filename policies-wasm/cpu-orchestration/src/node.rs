//! One node's check: its pods' CPU records ([`Rec`]: a `resource-status` cpuset or a kubelet
//! `pod-cpu-allocs` entry, plus what the pod's annotations and labels say), sorted oldest
//! first, and every selected invariant evaluated against the node's [`Topology`].
//!
//! Owns the meaning of each invariant (see `docs/policies.md`, CpuOrchestration). Must not
//! propose anything: it records, per record, the violated invariants and the reason of the
//! most important one; `plan` turns those into proposals. Buffers live in [`NodeCheck`] and are
//! reused from node to node.
//!
//! Conflicts between two pods (H8, H9 against a kubelet-pinned pod, H11, S3) are charged to the
//! newer one: records are visited oldest first and each is compared with the older ones only.

use rebalancer_policy_sdk::k8s::cpuset::format_cpu_list;
use rebalancer_policy_sdk::k8s::koordinator::{KoordQos, PriorityClass};
use rebalancer_policy_sdk::model::{ArchivedNodeCpuTopology, StrId};
use rebalancer_policy_sdk::{Cluster, NONE};

use crate::annotations::{
    BindPolicy, ExclusivePolicy, NumaNodeCpu, NumaPolicy, NumaSpec, ResourceSpec,
};
use crate::invariant::{Invariant, InvariantSet};
use crate::topology::{Topology, bits};

/// The node's effective CPU bind policy (`GetNodeCPUBindPolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeBind {
    None,
    /// `FullPCPUsOnly`; `true` when it comes from the label, `false` from kubelet `static` +
    /// `full-pcpus-only=true`.
    FullPCPUsOnly(bool),
    SpreadByPCPUs,
}

impl NodeBind {
    fn name(self) -> &'static str {
        match self {
            NodeBind::None => "None",
            NodeBind::FullPCPUsOnly(_) => "FullPCPUsOnly",
            NodeBind::SpreadByPCPUs => "SpreadByPCPUs",
        }
    }

    fn source(self) -> &'static str {
        match self {
            NodeBind::FullPCPUsOnly(false) => "kubelet static + full-pcpus-only",
            _ => "label node.koordinator.sh/cpu-bind-policy",
        }
    }

    /// The pod bind policy the node forces.
    fn forced(self) -> BindPolicy {
        match self {
            NodeBind::None => BindPolicy::Unset,
            NodeBind::FullPCPUsOnly(_) => BindPolicy::FullPCPUs,
            NodeBind::SpreadByPCPUs => BindPolicy::SpreadByPCPUs,
        }
    }
}

/// What the node says, besides its topology.
#[derive(Clone, Copy)]
pub struct NodeFacts<'a> {
    pub name: &'a str,
    pub bind: NodeBind,
    /// The node label, else the NRT's `topologyPolicies`.
    pub numa_policy: NumaPolicy,
    pub numa_policy_from_label: bool,
    /// `true`: MostAllocated; `false`: LeastAllocated (DistributeEvenly acts like it).
    pub most_allocated: bool,
    pub row: &'a ArchivedNodeCpuTopology,
}

/// How the run is configured, for every node.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    pub selected: InvariantSet,
    pub default_bind: BindPolicy,
    /// Some node of the cluster has a NodeResourceTopology. When none has, the cluster does
    /// not report NRTs at all (koordlet or its CRD missing, or the backend cannot read them):
    /// a node without one is then no evidence of drift, and H13 is not judged for it.
    pub cluster_reports_nrt: bool,
}

/// One pod's CPU record on the node.
#[derive(Debug)]
pub struct Rec {
    /// The pod's index, [`NONE`] for a `pod-cpu-allocs` entry whose pod is not in the snapshot.
    pub pod: u32,
    pub created: i64,
    /// Namespace and name of a stale `pod-cpu-allocs` entry.
    pub stale_name: (StrId, StrId),
    /// The cpus come from `pod-cpu-allocs` (pinned by the kubelet), not from `resource-status`.
    pub kubelet: bool,
    /// The pod has a readable `resource-status` annotation.
    pub has_status: bool,
    /// Why the `resource-status` is unreadable (H1).
    pub status_error: Option<String>,
    /// Range of the cpus in [`NodeCheck::arena`].
    pub cpus: (u32, u32),
    /// Range of `numaNodeResources` in [`NodeCheck::numa_arena`].
    pub numa: (u32, u32),
    /// `None` when the annotation is malformed (spec-based checks are skipped).
    pub spec: Option<ResourceSpec>,
    pub numa_spec: Option<NumaSpec>,
    /// requests.cpu, milli.
    pub request: i64,
    pub qos: KoordQos,
    /// Violations found.
    pub found: InvariantSet,
    /// The most important one and its reason.
    pub best: Option<(Invariant, String)>,
}

impl Default for Rec {
    fn default() -> Self {
        Rec {
            pod: NONE,
            created: 0,
            stale_name: (0, 0),
            kubelet: false,
            has_status: false,
            status_error: None,
            cpus: (0, 0),
            numa: (0, 0),
            spec: Some(ResourceSpec::default()),
            numa_spec: Some(NumaSpec::default()),
            request: 0,
            qos: KoordQos::None,
            found: InvariantSet::EMPTY,
            best: None,
        }
    }
}

/// Reusable per-node state.
#[derive(Debug, Default)]
pub struct NodeCheck {
    pub topo: Topology,
    pub recs: Vec<Rec>,
    pub arena: Vec<u32>,
    pub numa_arena: Vec<NumaNodeCpu>,
    /// Per CPU id: the first (oldest) record holding it, plus one; 0 when none.
    owner: Vec<u32>,
    /// Per CPU id: [`KUBELET_RESERVED`] | [`NODE_RESERVED`] | [`SYSTEM_QOS`].
    flags: Vec<u8>,
    /// CPUs that are free: in the topology, not reserved, held by no record.
    free: Vec<u64>,
    core_mark: Vec<u64>,
    /// Per core: the first PCPULevel record on it, plus one.
    pcpu_holder: Vec<u32>,
    numa_holder: Vec<u32>,
    single: Vec<(u32, u32)>,
    shared: Vec<(u32, u32)>,
    free_numa: Vec<u32>,
    free_socket: Vec<u32>,
    /// Per NUMA node: free CPUs counting only the records visited so far (the older pods),
    /// i.e. what the scheduler saw when placing the current one (S5).
    placed: Vec<u32>,
    /// Violations per invariant, over the run.
    pub counts: [usize; 18],
    selected: InvariantSet,
}

const KUBELET_RESERVED: u8 = 1;
const NODE_RESERVED: u8 = 2;
const SYSTEM_QOS: u8 = 4;

/// `1500m`, or `2` for whole CPUs.
pub fn cpu_text(milli: i64) -> String {
    if milli % 1000 == 0 {
        (milli / 1000).to_string()
    } else {
        format!("{milli}m")
    }
}

impl NodeCheck {
    /// Forget the previous node.
    pub fn clear(&mut self) {
        self.recs.clear();
        self.arena.clear();
        self.numa_arena.clear();
    }

    pub fn cpus(&self, r: usize) -> &[u32] {
        let (s, n) = self.recs[r].cpus;
        &self.arena[s as usize..(s + n) as usize]
    }

    /// The record's cpus as a CPU list.
    fn list(&self, r: usize) -> String {
        format_cpu_list(self.cpus(r))
    }

    fn numa_entries(&self, r: usize) -> &[NumaNodeCpu] {
        let (s, n) = self.recs[r].numa;
        &self.numa_arena[s as usize..(s + n) as usize]
    }

    /// `namespace/name` of a record's pod.
    pub fn who(&self, cluster: Cluster<'_>, r: usize) -> String {
        let rec = &self.recs[r];
        if rec.pod == NONE {
            format!(
                "{}/{} (not in the cluster)",
                cluster.str(rec.stale_name.0),
                cluster.str(rec.stale_name.1)
            )
        } else {
            let p = cluster.pod(rec.pod);
            format!("{}/{}", p.namespace(), p.name())
        }
    }

    fn flag(&mut self, r: usize, inv: Invariant, reason: String) {
        self.counts[inv as usize] += 1;
        let rec = &mut self.recs[r];
        rec.found.insert(inv);
        if rec.best.as_ref().is_none_or(|(b, _)| inv < *b) {
            rec.best = Some((inv, format!("{}: {reason}", inv.id())));
        }
    }

    /// Check every record of the node. The records and their arenas are filled by the caller.
    pub fn run(&mut self, cluster: Cluster<'_>, node: &NodeFacts<'_>, settings: &Settings) {
        self.selected = settings.selected;
        self.sort_oldest_first(cluster);
        let max_cpu = self.arena.iter().copied().max().map_or(0, |m| m + 1);
        let row = node.row;
        let reserved_top = [
            &row.kubelet_reserved,
            &row.node_reserved,
            &row.system_qos_cpus,
        ]
        .iter()
        .flat_map(|l| l.iter().map(|c| c.to_native() + 1))
        .max()
        .unwrap_or(0);
        let mut topo = std::mem::take(&mut self.topo);
        topo.load(row, max_cpu.max(reserved_top));
        let width = topo.core_of.len();
        self.owner.clear();
        self.owner.resize(width, 0);
        self.flags.clear();
        self.flags.resize(width, 0);
        for c in row.kubelet_reserved.iter() {
            self.flags[c.to_native() as usize] |= KUBELET_RESERVED;
        }
        for c in row.node_reserved.iter() {
            self.flags[c.to_native() as usize] |= NODE_RESERVED;
        }
        if row.system_qos_exclusive {
            for c in row.system_qos_cpus.iter() {
                self.flags[c.to_native() as usize] |= SYSTEM_QOS;
            }
        }
        self.prepare_free(&topo);

        for r in 0..self.recs.len() {
            self.check_pod(cluster, node, settings, r);
            if self.recs[r].cpus.1 > 0 {
                self.check_cpuset(cluster, node, settings, &topo, r);
            }
            // Claim what this record holds, for the newer ones.
            let (s, n) = self.recs[r].cpus;
            for i in s..s + n {
                let c = self.arena[i as usize] as usize;
                if self.owner[c] == 0 {
                    self.owner[c] = r as u32 + 1;
                    if topo.numa_ok && topo.has(c as u32) && self.flags[c] == 0 {
                        self.placed[topo.numa_of[c] as usize] -= 1;
                    }
                }
            }
        }
        self.topo = topo;
    }

    fn sort_oldest_first(&mut self, cluster: Cluster<'_>) {
        let key = |rec: &Rec| -> (i64, &str, &str, &str) {
            if rec.pod == NONE {
                (
                    i64::MIN,
                    cluster.str(rec.stale_name.0),
                    cluster.str(rec.stale_name.1),
                    "",
                )
            } else {
                let p = cluster.pod(rec.pod);
                (rec.created, p.namespace(), p.name(), p.uid())
            }
        };
        self.recs.sort_by(|a, b| key(a).cmp(&key(b)));
    }

    /// Free CPUs overall, per NUMA node and per socket; reset the per-node holders.
    fn prepare_free(&mut self, topo: &Topology) {
        bits::reset(&mut self.free, topo.words);
        self.free.copy_from_slice(&topo.exists);
        for (c, &f) in self.flags.iter().enumerate() {
            if f != 0 {
                self.free[c / 64] &= !(1 << (c % 64));
            }
        }
        self.placed.clear();
        if topo.numa_ok {
            for k in 0..topo.n_numa() {
                self.placed
                    .push(bits::count_and(&self.free, topo.numa_mask(k)));
            }
        }
        for &c in &self.arena {
            self.free[c as usize / 64] &= !(1 << (c % 64));
        }
        self.free_numa.clear();
        self.free_socket.clear();
        self.numa_holder.clear();
        self.single.clear();
        self.shared.clear();
        if topo.numa_ok {
            for k in 0..topo.n_numa() {
                self.free_numa
                    .push(bits::count_and(&self.free, topo.numa_mask(k)));
            }
            for s in 0..topo.n_sockets() {
                self.free_socket
                    .push(bits::count_and(&self.free, topo.socket_mask(s)));
            }
            self.numa_holder.resize(topo.n_numa(), 0);
            self.single.resize(topo.n_numa(), (0, 0));
            self.shared.resize(topo.n_numa(), (0, 0));
        }
        self.pcpu_holder.clear();
        self.pcpu_holder.resize(topo.n_cores as usize, 0);
        bits::reset(&mut self.core_mark, bits::words(topo.n_cores as usize));
    }

    /// Distinct cores of `cpus` (all in the topology) and the first core holding two of them.
    fn core_stats(&mut self, topo: &Topology, r: usize) -> (u32, Option<u32>) {
        let (s, n) = self.recs[r].cpus;
        let mut distinct = 0;
        let mut doubled = None;
        for i in s..s + n {
            let core = topo.core_of[self.arena[i as usize] as usize];
            if bits::get(&self.core_mark, core) {
                doubled.get_or_insert(core);
            } else {
                bits::set(&mut self.core_mark, core);
                distinct += 1;
            }
        }
        for i in s..s + n {
            let core = topo.core_of[self.arena[i as usize] as usize];
            self.core_mark[(core / 64) as usize] = 0;
        }
        (distinct, doubled)
    }

    /// CPUs of `r` on dense core `core`.
    fn on_core(&self, topo: &Topology, r: usize, core: u32) -> String {
        let list: Vec<u32> = self
            .cpus(r)
            .iter()
            .copied()
            .filter(|&c| topo.core_of[c as usize] == core)
            .collect();
        format_cpu_list(&list)
    }

    /// Topology CPUs sharing a core with `r` but not in it.
    fn missing_siblings(&self, topo: &Topology, r: usize) -> Vec<u32> {
        let cpus = self.cpus(r);
        let mut cores: Vec<u32> = cpus.iter().map(|&c| topo.core_of[c as usize]).collect();
        cores.sort_unstable();
        cores.dedup();
        (0..topo.width)
            .filter(|&c| {
                topo.has(c)
                    && cores.binary_search(&topo.core_of[c as usize]).is_ok()
                    && cpus.binary_search(&c).is_err()
            })
            .collect()
    }

    /// Checks that do not need the pod's cpuset: H3, H4/H5 (integer request, presence of a
    /// cpuset), H7 and the policy match of H10.
    fn check_pod(
        &mut self,
        cluster: Cluster<'_>,
        node: &NodeFacts<'_>,
        settings: &Settings,
        r: usize,
    ) {
        let on = |i: Invariant| settings.selected.contains(i);
        let rec = &self.recs[r];
        if rec.pod == NONE {
            return;
        }
        if on(Invariant::H1)
            && let Some(e) = &rec.status_error
        {
            let reason = e.clone();
            self.flag(r, Invariant::H1, reason);
        }
        let rec = &self.recs[r];
        let pod = cluster.pod(rec.pod);
        let request = rec.request;
        let has_cpus = rec.cpus.1 > 0;
        let status_cpus = has_cpus && !rec.kubelet;
        let lse_lsr = matches!(rec.qos, KoordQos::Lse | KoordQos::Lsr);
        // The scheduler's cpuset gate (a), when the spec is readable.
        let prod = lse_lsr && PriorityClass::of(&pod) == PriorityClass::Prod;
        let resolved = rec.spec.map(|spec| {
            let required = spec.required.resolve_default(settings.default_bind);
            let preferred = match spec.preferred {
                BindPolicy::Unset | BindPolicy::Default => settings.default_bind,
                p => p,
            };
            let policy = if required == BindPolicy::Unset {
                preferred
            } else {
                required
            };
            (required, policy)
        });
        let gate = |resolved: Option<(BindPolicy, BindPolicy)>| {
            prod && request > 0 && request % 1000 == 0 && resolved.is_some_and(|(_, p)| p.binds())
        };
        let qos = rec.qos.as_str();

        if on(Invariant::H3) && lse_lsr {
            let reason = if request == 0 {
                Some(format!("{qos} pod requests no CPU"))
            } else if request % 1000 != 0 {
                Some(format!(
                    "{qos} pod requests a fractional cpu ({})",
                    cpu_text(request)
                ))
            } else if !prod {
                Some(format!(
                    "{qos} pod is {}, not koord-prod",
                    PriorityClass::of(&pod).as_str()
                ))
            } else if gate(resolved) && !status_cpus {
                Some(format!(
                    "{qos} pod requests {} CPUs but has no resource-status cpuset{}",
                    request / 1000,
                    if has_cpus {
                        " (only the kubelet pinned it)"
                    } else {
                        ""
                    }
                ))
            } else {
                None
            };
            if let Some(reason) = reason {
                self.flag(r, Invariant::H3, reason);
            }
        }

        let bind_inv = match node.bind {
            NodeBind::None => None,
            NodeBind::FullPCPUsOnly(_) => Some(Invariant::H4),
            NodeBind::SpreadByPCPUs => Some(Invariant::H5),
        };
        if let Some(inv) = bind_inv
            && on(inv)
            && request > 0
        {
            let policy = node.bind.name();
            if request % 1000 != 0 {
                let reason = format!(
                    "requests.cpu {} is not an integer on a {policy} node ({})",
                    cpu_text(request),
                    node.bind.source()
                );
                self.flag(r, inv, reason);
            } else if !has_cpus {
                let reason = format!(
                    "no cpuset although the node is {policy} ({}; requests {} CPUs)",
                    node.bind.source(),
                    request / 1000
                );
                self.flag(r, inv, reason);
            }
        }

        if on(Invariant::H7)
            && gate(resolved)
            && let Some((required, _)) = resolved
            && required != BindPolicy::Unset
            && node.bind != NodeBind::None
            && required != node.bind.forced()
        {
            let reason = format!(
                "requiredCPUBindPolicy {} conflicts with the node's {} ({})",
                required.name(),
                node.bind.name(),
                node.bind.source()
            );
            self.flag(r, Invariant::H7, reason);
        }

        let rec = &self.recs[r];
        if on(Invariant::H10)
            && let Some(numa_spec) = rec.numa_spec
        {
            let pod_policy = numa_spec.policy;
            if pod_policy != NumaPolicy::None
                && node.numa_policy != NumaPolicy::None
                && pod_policy != node.numa_policy
            {
                let reason = format!(
                    "pod NUMA policy {} differs from the node's {} ({})",
                    pod_policy.name(),
                    node.numa_policy.name(),
                    if node.numa_policy_from_label {
                        "label node.koordinator.sh/numa-topology-policy"
                    } else {
                        "NRT topologyPolicies"
                    }
                );
                self.flag(r, Invariant::H10, reason);
            } else if pod_policy.constrains() && !rec.has_status && request > 0 {
                let reason = format!(
                    "pod asks for NUMA policy {} but has no resource-status \
                     (not placed by koord-scheduler)",
                    pod_policy.name()
                );
                self.flag(r, Invariant::H10, reason);
            }
        }
    }

    /// Checks of a record that holds CPUs.
    fn check_cpuset(
        &mut self,
        cluster: Cluster<'_>,
        node: &NodeFacts<'_>,
        settings: &Settings,
        topo: &Topology,
        r: usize,
    ) {
        let on = |i: Invariant| settings.selected.contains(i);
        let rec = &self.recs[r];
        let koord = !rec.kubelet;
        let size = rec.cpus.1;
        let request = rec.request;

        // H13: no valid topology; nothing below can be judged against it.
        if !topo.valid
            && koord
            && on(Invariant::H13)
            && (node.row.has_nrt || settings.cluster_reports_nrt)
        {
            let why = if node.row.has_nrt {
                "has no valid cpu-topology in its NodeResourceTopology"
            } else {
                "has no NodeResourceTopology"
            };
            let reason = format!(
                "node {} {why} but the pod holds cpuset {}",
                node.name,
                self.list(r)
            );
            self.flag(r, Invariant::H13, reason);
        }
        let in_topo = topo.valid && self.cpus(r).iter().all(|&c| topo.has(c));
        if koord && topo.valid && !in_topo && on(Invariant::H1) {
            let missing: Vec<u32> = self
                .cpus(r)
                .iter()
                .copied()
                .filter(|&c| !topo.has(c))
                .collect();
            let known: Vec<u32> = (0..topo.width).filter(|&c| topo.has(c)).collect();
            let reason = format!(
                "cpuset {} names CPUs {} that the node's cpu-topology ({}) does not have",
                self.list(r),
                format_cpu_list(&missing),
                format_cpu_list(&known)
            );
            self.flag(r, Invariant::H1, reason);
        }

        // H2: size == requests.cpu / 1000, integer.
        if koord && on(Invariant::H2) {
            if request % 1000 != 0 {
                let reason = format!(
                    "cpuset {} but requests.cpu {} is not a whole number of CPUs",
                    self.list(r),
                    cpu_text(request)
                );
                self.flag(r, Invariant::H2, reason);
            } else if i64::from(size) != request / 1000 {
                let reason = format!(
                    "cpuset {} has {size} CPUs but requests.cpu is {}",
                    self.list(r),
                    cpu_text(request)
                );
                self.flag(r, Invariant::H2, reason);
            }
        }

        // H8 / H9: overlaps with older records.
        if on(Invariant::H8) || on(Invariant::H9) {
            self.check_overlap(cluster, r);
        }
        // H9: reserved and exclusive system-QoS CPUs.
        if koord && on(Invariant::H9) {
            let mut hit = 0u8;
            for &c in self.cpus(r) {
                hit |= self.flags[c as usize];
            }
            if hit != 0 {
                let (mask, what) = if hit & KUBELET_RESERVED != 0 {
                    (KUBELET_RESERVED, "kubelet reservedCPUs")
                } else if hit & NODE_RESERVED != 0 {
                    (NODE_RESERVED, "node reservation reservedCPUs")
                } else {
                    (SYSTEM_QOS, "the exclusive system-QoS cpuset")
                };
                let cpus: Vec<u32> = self
                    .cpus(r)
                    .iter()
                    .copied()
                    .filter(|&c| self.flags[c as usize] & mask != 0)
                    .collect();
                let reason = format!("CPUs {} are {what}", format_cpu_list(&cpus));
                self.flag(r, Invariant::H9, reason);
            }
        }

        if !in_topo {
            return;
        }
        let tpc = topo.tpc;
        let (distinct, doubled) = self.core_stats(topo, r);
        let whole = distinct * tpc == size;
        let rec = &self.recs[r];
        let gate_spec = rec.spec.filter(|_| koord && rec.pod != NONE);

        // H4 / H5: the node's bind policy.
        match node.bind {
            NodeBind::FullPCPUsOnly(_) if on(Invariant::H4) && rec.pod != NONE => {
                if !size.is_multiple_of(tpc) {
                    let reason = format!(
                        "{size} CPUs are not a multiple of {tpc} threads per core on a \
                         FullPCPUsOnly node ({})",
                        node.bind.source()
                    );
                    self.flag(r, Invariant::H4, reason);
                } else if !whole {
                    let reason = format!(
                        "cpuset {} is not whole cores ({distinct} cores × {tpc} threads ≠ \
                         {size} CPUs) on a FullPCPUsOnly node ({})",
                        self.list(r),
                        node.bind.source()
                    );
                    self.flag(r, Invariant::H4, reason);
                }
            }
            NodeBind::SpreadByPCPUs if on(Invariant::H5) && rec.pod != NONE => {
                if let Some(core) = doubled {
                    let reason = format!(
                        "cpuset {} has CPUs {} on one core on a SpreadByPCPUs node",
                        self.list(r),
                        self.on_core(topo, r, core)
                    );
                    self.flag(r, Invariant::H5, reason);
                }
            }
            _ => {}
        }

        // H6 / S1 / S4: the pod's own bind policy (cpuset-gate pods only).
        let lse_lsr_prod = self.recs[r].pod != NONE
            && matches!(self.recs[r].qos, KoordQos::Lse | KoordQos::Lsr)
            && PriorityClass::of(&cluster.pod(self.recs[r].pod)) == PriorityClass::Prod;
        if let Some(spec) = gate_spec
            && lse_lsr_prod
        {
            let required = spec.required.resolve_default(settings.default_bind);
            let preferred = match spec.preferred {
                BindPolicy::Unset | BindPolicy::Default => settings.default_bind,
                p => p,
            };
            match required {
                BindPolicy::FullPCPUs
                    if on(Invariant::H6) && (!size.is_multiple_of(tpc) || !whole) =>
                {
                    let reason = format!(
                        "requiredCPUBindPolicy FullPCPUs but cpuset {} is not whole cores \
                             ({distinct} cores × {tpc} threads ≠ {size} CPUs)",
                        self.list(r)
                    );
                    self.flag(r, Invariant::H6, reason);
                }
                BindPolicy::SpreadByPCPUs if on(Invariant::H6) => {
                    if let Some(core) = doubled {
                        let reason = format!(
                            "requiredCPUBindPolicy SpreadByPCPUs but cpuset {} has CPUs {} on \
                             one core",
                            self.list(r),
                            self.on_core(topo, r, core)
                        );
                        self.flag(r, Invariant::H6, reason);
                    }
                }
                BindPolicy::Unset if node.bind == NodeBind::None => {
                    if preferred == BindPolicy::FullPCPUs
                        && on(Invariant::S1)
                        && size.is_multiple_of(tpc)
                        && !whole
                    {
                        let reason = format!(
                            "preferred FullPCPUs cpuset {} holds partial cores (siblings {} are \
                             not in it) although {size} CPUs are a multiple of {tpc} threads \
                             per core",
                            self.list(r),
                            format_cpu_list(&self.missing_siblings(topo, r))
                        );
                        self.flag(r, Invariant::S1, reason);
                    }
                    if preferred == BindPolicy::SpreadByPCPUs
                        && on(Invariant::S4)
                        && let Some(core) = doubled
                    {
                        let spare = self.cores_with_free_cpu_outside(topo, r);
                        if spare > 0 {
                            let reason = format!(
                                "preferred SpreadByPCPUs cpuset {} has CPUs {} on one core \
                                 while {spare} other cores have a free CPU",
                                self.list(r),
                                self.on_core(topo, r, core)
                            );
                            self.flag(r, Invariant::S4, reason);
                        }
                    }
                }
                _ => {}
            }
        }

        if !topo.numa_ok || !koord {
            return;
        }
        self.check_numa(cluster, node, settings, topo, r);
        if on(Invariant::S3)
            && let Some(spec) = self.recs[r].spec
        {
            self.check_exclusive(cluster, topo, r, spec.exclusive);
        }
    }

    /// Cores with a free CPU that `r` has no CPU on.
    fn cores_with_free_cpu_outside(&mut self, topo: &Topology, r: usize) -> u32 {
        let (s, n) = self.recs[r].cpus;
        for i in s..s + n {
            let core = topo.core_of[self.arena[i as usize] as usize];
            bits::set(&mut self.core_mark, core);
        }
        let mut seen = 0u32;
        for c in bits::iter(&self.free) {
            let core = topo.core_of[c as usize];
            if !bits::get(&self.core_mark, core) {
                bits::set(&mut self.core_mark, core);
                seen += 1;
            }
        }
        self.core_mark.fill(0);
        seen
    }

    /// H8 (two resource-status cpusets) and H9 (a kubelet-pinned cpuset involved): CPUs `r`
    /// shares with older records.
    fn check_overlap(&mut self, cluster: Cluster<'_>, r: usize) {
        let mut first_owner = 0u32;
        let mut owners = 0u32;
        let mut last = 0u32;
        for &c in self.cpus(r) {
            let o = self.owner[c as usize];
            if o != 0 && o != last {
                if first_owner == 0 {
                    first_owner = o;
                }
                if o != first_owner {
                    owners += 1;
                }
                last = o;
            }
        }
        if first_owner == 0 {
            return;
        }
        let older = first_owner as usize - 1;
        let kubelet = self.recs[older].kubelet || self.recs[r].kubelet;
        let inv = if kubelet {
            Invariant::H9
        } else {
            Invariant::H8
        };
        if !self.selected.contains(inv) {
            return;
        }
        let shared: Vec<u32> = self
            .cpus(r)
            .iter()
            .copied()
            .filter(|&c| self.owner[c as usize] == first_owner)
            .collect();
        let who = self.who(cluster, older);
        let more = if owners > 0 {
            format!(" (and CPUs of {owners} more pods)")
        } else {
            String::new()
        };
        let reason = match (self.recs[r].kubelet, self.recs[older].kubelet) {
            (false, false) => format!(
                "CPUs {} also pinned by {who}{more}",
                format_cpu_list(&shared)
            ),
            (false, true) => format!(
                "CPUs {} also pinned by the kubelet for {who}{more}",
                format_cpu_list(&shared)
            ),
            (true, _) => format!(
                "kubelet pinned CPUs {}, also held by older {who}{more}",
                format_cpu_list(&shared)
            ),
        };
        self.flag(r, inv, reason);
    }

    /// H10 (cpuset within the NUMA nodes the policy allows), H11, H12, S2, S5.
    fn check_numa(
        &mut self,
        cluster: Cluster<'_>,
        node: &NodeFacts<'_>,
        settings: &Settings,
        topo: &Topology,
        r: usize,
    ) {
        let on = |i: Invariant| settings.selected.contains(i);
        let size = self.recs[r].cpus.1;
        let span = topo.numa_span(self.cpus(r));
        // The NUMA nodes resource-status lists, as a dense mask (unknown ids are left out).
        let mut listed = 0u64;
        let mut unknown_listed = None;
        for e in self.numa_entries(r) {
            match topo.numa_index(e.numa) {
                Some(k) => listed |= 1 << k,
                None => {
                    unknown_listed.get_or_insert(e.numa);
                }
            }
        }
        let n_listed = self.numa_entries(r).len();
        let numa_spec = self.recs[r].numa_spec;

        if on(Invariant::H10)
            && let Some(spec) = numa_spec
        {
            let policy = if spec.policy == NumaPolicy::None {
                node.numa_policy
            } else {
                spec.policy
            };
            let outside = |mask: u64| -> Vec<u32> {
                self.cpus(r)
                    .iter()
                    .copied()
                    .filter(|&c| mask & (1 << topo.numa_of[c as usize]) == 0)
                    .collect()
            };
            let reason = match policy {
                NumaPolicy::SingleNumaNode if n_listed != 1 => Some(format!(
                    "SingleNUMANode but numaNodeResources lists {n_listed} NUMA nodes"
                )),
                NumaPolicy::Restricted if n_listed == 0 => {
                    Some("Restricted but resource-status lists no numaNodeResources".to_string())
                }
                NumaPolicy::SingleNumaNode | NumaPolicy::Restricted if span & !listed != 0 => {
                    Some(format!(
                        "{} but cpuset {} has CPUs {} outside the listed NUMA nodes {}",
                        policy.name(),
                        self.list(r),
                        format_cpu_list(&outside(listed)),
                        unknown_listed.map_or_else(
                            || topo.numa_list(listed),
                            |u| format!(
                                "{} (and {u}, which the node does not have)",
                                topo.numa_list(listed)
                            )
                        )
                    ))
                }
                _ => None,
            };
            if let Some(reason) = reason {
                self.flag(r, Invariant::H10, reason);
            }
        }

        if on(Invariant::H11)
            && let Some(spec) = numa_spec
        {
            let policy = if spec.policy == NumaPolicy::None {
                node.numa_policy
            } else {
                spec.policy
            };
            if spec.exclusive_required && policy.constrains() {
                let mine = if listed != 0 { listed } else { span };
                let mut hit = None;
                if mine.count_ones() > 1 {
                    for k in 0..topo.n_numa() {
                        if mine & (1 << k) != 0 && self.single[k].0 > 0 && self.shared[k].0 == 0 {
                            hit = Some((k, self.single[k].1, "multi-NUMA pod uses", "single-NUMA"));
                            break;
                        }
                    }
                } else if mine != 0 {
                    let k = mine.trailing_zeros() as usize;
                    if self.shared[k].0 > 0 {
                        hit = Some((k, self.shared[k].1, "single-NUMA pod sits on", "multi-NUMA"));
                    }
                }
                if let Some((k, older, what, kind)) = hit {
                    let reason = format!(
                        "{what} NUMA node {}, which {kind} {} holds (singleNUMANodeExclusive                          Required)",
                        topo.numa_ids[k],
                        self.who(cluster, older as usize)
                    );
                    self.flag(r, Invariant::H11, reason);
                }
            }
        }
        // Account this cpuset for the newer pods' H11 (the scheduler's single/shared status).
        if span.count_ones() > 1 {
            for k in 0..topo.n_numa() {
                if span & (1 << k) != 0 {
                    if self.shared[k].0 == 0 {
                        self.shared[k].1 = r as u32;
                    }
                    self.shared[k].0 += 1;
                }
            }
        } else if span != 0 {
            let k = span.trailing_zeros() as usize;
            if self.single[k].0 == 0 {
                self.single[k].1 = r as u32;
            }
            self.single[k].0 += 1;
        }

        if on(Invariant::H12) && self.numa_entries(r).iter().any(|e| e.cpu_milli.is_some()) {
            let mut mismatch = None;
            for e in self.numa_entries(r) {
                let have = topo.numa_index(e.numa).map_or(0, |k| {
                    self.cpus(r)
                        .iter()
                        .filter(|&&c| topo.numa_of[c as usize] == k as u32)
                        .count() as i64
                });
                let want = e.cpu_milli.unwrap_or(0);
                if have * 1000 != want {
                    mismatch = Some((e.numa, have, cpu_text(want)));
                    break;
                }
            }
            if mismatch.is_none() && span & !listed != 0 {
                let k = (span & !listed).trailing_zeros() as usize;
                let have = self
                    .cpus(r)
                    .iter()
                    .filter(|&&c| topo.numa_of[c as usize] == k as u32)
                    .count() as i64;
                mismatch = Some((topo.numa_ids[k] as i32, have, "nothing".to_string()));
            }
            if let Some((numa, have, want)) = mismatch {
                let reason = format!(
                    "cpuset {} has {have} CPUs on NUMA node {numa} but numaNodeResources lists \
                     cpu {want} there",
                    self.list(r)
                );
                self.flag(r, Invariant::H12, reason);
            }
        }

        if on(Invariant::S2) && topo.n_numa() > 1 {
            let numa_better = (span.count_ones() > 1 && size <= topo.cpus_per_numa)
                .then(|| (0..topo.n_numa()).find(|&k| self.free_numa[k] >= size))
                .flatten();
            let sockets = topo.socket_span(self.cpus(r));
            let socket_better =
                (numa_better.is_none() && sockets.count_ones() > 1 && size <= topo.cpus_per_socket)
                    .then(|| (0..topo.n_sockets()).find(|&s| self.free_socket[s] >= size))
                    .flatten();
            let reason = if let Some(k) = numa_better {
                Some(format!(
                    "{size} CPUs span NUMA nodes {} though NUMA node {} has {} free CPUs",
                    topo.numa_list(span),
                    topo.numa_ids[k],
                    self.free_numa[k]
                ))
            } else {
                socket_better.map(|s| {
                    format!(
                        "{size} CPUs span sockets {} though socket {} has {} free CPUs",
                        topo.socket_list(sockets),
                        topo.socket_ids[s],
                        self.free_socket[s]
                    )
                })
            };
            if let Some(reason) = reason {
                self.flag(r, Invariant::S2, reason);
            }
        }

        if on(Invariant::S5) && topo.n_numa() > 1 && span.count_ones() == 1 {
            // Replay: the free CPUs per NUMA node when the pod was placed (older pods only).
            // The strategy picks the NUMA node with the most (LeastAllocated) or the fewest
            // (MostAllocated) free CPUs among those that fit, ties to the lowest id.
            let a = span.trailing_zeros() as usize;
            let then = &self.placed;
            let better = (0..topo.n_numa()).find(|&b| {
                let (fa, fb) = (then[a], then[b]);
                b != a
                    && fb >= size
                    && if node.most_allocated {
                        fb < fa || (fb == fa && b < a)
                    } else {
                        fb > fa || (fb == fa && b < a)
                    }
            });
            if let Some(b) = better {
                let reason = format!(
                    "{} node: when the pod was placed (older pods only), NUMA node {} had {} \
                     free CPUs, {} than NUMA node {} ({}) where it sits",
                    if node.most_allocated {
                        "MostAllocated"
                    } else {
                        "LeastAllocated"
                    },
                    topo.numa_ids[b],
                    then[b],
                    if then[b] > then[a] {
                        "more"
                    } else if then[b] < then[a] {
                        "fewer"
                    } else {
                        "as many"
                    },
                    topo.numa_ids[a],
                    then[a]
                );
                self.flag(r, Invariant::S5, reason);
            }
        }
    }

    /// S3: another pod with the same exclusive policy on the same core / NUMA node (the older
    /// one keeps its place).
    fn check_exclusive(
        &mut self,
        cluster: Cluster<'_>,
        topo: &Topology,
        r: usize,
        exclusive: ExclusivePolicy,
    ) {
        let me = r as u32 + 1;
        match exclusive {
            ExclusivePolicy::None => {}
            ExclusivePolicy::PcpuLevel => {
                let mut hit = None;
                let (s, n) = self.recs[r].cpus;
                for i in s..s + n {
                    let core = topo.core_of[self.arena[i as usize] as usize] as usize;
                    let h = self.pcpu_holder[core];
                    if h != 0 && h != me {
                        hit.get_or_insert((core, h - 1));
                    } else if h == 0 {
                        self.pcpu_holder[core] = me;
                    }
                }
                if let Some((core, older)) = hit {
                    let reason = format!(
                        "PCPULevel pod shares core {} (its CPUs {}) with PCPULevel pod {}",
                        topo.core_ids[core],
                        self.on_core(topo, r, core as u32),
                        self.who(cluster, older as usize)
                    );
                    self.flag(r, Invariant::S3, reason);
                }
            }
            ExclusivePolicy::NumaNodeLevel => {
                let span = topo.numa_span(self.cpus(r));
                let mut hit = None;
                for k in 0..topo.n_numa() {
                    if span & (1 << k) == 0 {
                        continue;
                    }
                    let h = self.numa_holder[k];
                    if h != 0 && h != me {
                        hit.get_or_insert((k, h - 1));
                    } else if h == 0 {
                        self.numa_holder[k] = me;
                    }
                }
                if let Some((k, older)) = hit {
                    let reason = format!(
                        "NUMANodeLevel pod shares NUMA node {} with NUMANodeLevel pod {}",
                        topo.numa_ids[k],
                        self.who(cluster, older as usize)
                    );
                    self.flag(r, Invariant::S3, reason);
                }
            }
        }
    }
}
