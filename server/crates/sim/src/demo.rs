//! The simulated cluster: a deterministic, kubectl-style `v1 List` of Nodes, Pods,
//! PodDisruptionBudgets, Namespaces and PriorityClasses.
//!
//! Owns the demo cluster the server loads at start-up ([`demo_cluster_json`]) and the scaled-up
//! clusters `rebalancer-bench` generates ([`SimulatedCluster`]). Both come out of one generator
//! with its own tiny PRNG (SplitMix64) and a fixed time base, so a spec always yields the same
//! bytes. The output is plain Kubernetes JSON and goes through the same ingest as a pushed
//! snapshot; this module knows nothing about the store, the engine or HTTP.
//!
//! The demo is deliberately out of balance, the way real clusters drift: a few "hot" nodes hold
//! 60–80 % of their allocatable cpu in requests, a few "cold" ones under 15 %, and one Deployment
//! (`shop/checkout`) has four of its six replicas piled on one node. The default profile
//! (RemoveDuplicates + LowNodeUtilization 20/50) therefore proposes pod moves on the first run.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::io::{self, Write};

use serde_json::{Value, json};

/// Seed of the demo cluster.
pub const DEMO_SEED: u64 = 0x5eed_2026;

/// The demo cluster loaded at start-up: 20 nodes, 320 pods, as `v1 List` JSON bytes.
pub fn demo_cluster_json() -> Vec<u8> {
    demo_cluster_json_measured_at(METRICS_AT)
}

/// [`demo_cluster_json`] with its NodeMetrics reported at `metrics_at` (Unix seconds).
pub fn demo_cluster_json_measured_at(metrics_at: i64) -> Vec<u8> {
    let mut out = Vec::with_capacity(1 << 20);
    SimulatedCluster::DEMO
        .write_json_measured_at(&mut out, metrics_at)
        .expect("the demo spec is valid and writing to a Vec cannot fail");
    out
}

/// Why a simulated cluster could not be generated.
#[derive(Debug, thiserror::Error)]
pub enum SimulationError {
    #[error("a simulated cluster needs at least {min} nodes (asked for {nodes})")]
    TooFewNodes { nodes: usize, min: usize },
    #[error(
        "a simulated cluster of {nodes} nodes needs at least {min} pods \
         (two DaemonSet pods per node; asked for {pods})"
    )]
    TooFewPods {
        nodes: usize,
        pods: usize,
        min: usize,
    },
    #[error(
        "a simulated cluster can have at most {max} pods per node on average (asked for {pods} pods on {nodes} nodes)"
    )]
    TooManyPods {
        nodes: usize,
        pods: usize,
        max: usize,
    },
    #[error("writing the simulated cluster failed: {0}")]
    Io(#[from] io::Error),
}

/// Size and seed of a simulated cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimulatedCluster {
    pub nodes: usize,
    /// Total pods, DaemonSet pods included (two per node).
    pub pods: usize,
    pub seed: u64,
}

/// What [`SimulatedCluster::write_json`] wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    pub nodes: usize,
    pub pods: usize,
    pub pdbs: usize,
    pub namespaces: usize,
    pub priority_classes: usize,
    /// NodeMetrics and NodeResourceTopologies (one of each per node).
    pub node_metrics: usize,
    pub topologies: usize,
    /// Pods pinned to a cpuset by koord-scheduler.
    pub cpuset_pods: usize,
}

impl SimulatedCluster {
    pub const DEMO: SimulatedCluster = SimulatedCluster {
        nodes: 20,
        pods: 320,
        seed: DEMO_SEED,
    };
    pub const MIN_NODES: usize = 4;
    /// Pods per node on average; above this nodes run out of pod slots (110 each).
    pub const MAX_PODS_PER_NODE: usize = 90;

    pub fn validate(&self) -> Result<(), SimulationError> {
        if self.nodes < Self::MIN_NODES {
            return Err(SimulationError::TooFewNodes {
                nodes: self.nodes,
                min: Self::MIN_NODES,
            });
        }
        let min = self.nodes * DAEMONSETS.len();
        if self.pods < min {
            return Err(SimulationError::TooFewPods {
                nodes: self.nodes,
                pods: self.pods,
                min,
            });
        }
        if self.pods > self.nodes * Self::MAX_PODS_PER_NODE {
            return Err(SimulationError::TooManyPods {
                nodes: self.nodes,
                pods: self.pods,
                max: Self::MAX_PODS_PER_NODE,
            });
        }
        Ok(())
    }

    /// Write the cluster as one `v1 List` (compact JSON) to `out`, its NodeMetrics reported at
    /// [`METRICS_AT`]. Objects are generated and written one at a time, so memory stays small
    /// even for 150,000 pods.
    pub fn write_json<W: Write>(&self, out: W) -> Result<Summary, SimulationError> {
        self.write_json_measured_at(out, METRICS_AT)
    }

    /// [`Self::write_json`] with the NodeMetrics reported at `metrics_at` (Unix seconds): the
    /// server loads the demo with the time it starts, as a live koordlet would have reported.
    pub fn write_json_measured_at<W: Write>(
        &self,
        out: W,
        metrics_at: i64,
    ) -> Result<Summary, SimulationError> {
        self.validate()?;
        let mut plan = Plan::new(self);
        plan.metrics_at = metrics_at;
        let mut out = io::BufWriter::with_capacity(1 << 16, out);
        let mut writer = ListWriter {
            out: &mut out,
            first: true,
        };
        writer.begin()?;
        let summary = plan.write(&mut writer)?;
        writer.end()?;
        out.flush()?;
        Ok(summary)
    }
}

// ------------------------------------------------------------------------------------------
// PRNG and small formatting helpers
// ------------------------------------------------------------------------------------------

/// SplitMix64: tiny, fast, good enough for test data, and the same on every platform (also the
/// reference generator's Koordinator layer's).
#[derive(Clone, Debug)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Rng(seed)
    }
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (`n > 0`).
    fn below(&mut self, n: usize) -> usize {
        ((self.next_u64() >> 11) % n as u64) as usize
    }
    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next_u64() % (hi - lo + 1) as u64) as i64
    }
    /// Uniform in `[0, 1)`.
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }
    /// A random (version 4) UUID, as the API server assigns to every object.
    fn uid(&mut self) -> String {
        let a = self.next_u64();
        let b = self.next_u64();
        format!(
            "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xfff,
            0x8000 | ((b >> 48) & 0x3fff),
            b & 0xffff_ffff_ffff
        )
    }
    /// Random characters as the ReplicaSet / pod name generators use them.
    fn suffix(&mut self, len: usize) -> String {
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        (0..len)
            .map(|_| ALPHABET[self.below(ALPHABET.len())] as char)
            .collect()
    }
    fn hex(&mut self, len: usize) -> String {
        let mut s = String::with_capacity(len);
        while s.len() < len {
            let _ = write!(s, "{:016x}", self.next_u64());
        }
        s.truncate(len);
        s
    }
}

/// 2026-06-01T08:00:00Z: the nodes were created from here on.
const NODES_CREATED: i64 = 1_780_300_800;
/// 2026-08-03T09:00:00Z: workloads were rolled out from here on.
const WORKLOADS_CREATED: i64 = 1_785_747_600;
/// Workloads were rolled out over this many seconds (100 days).
const ROLLOUT_SPAN: i64 = 100 * 86_400;
/// 2026-11-14T02:00:00Z: the jobs ran from here on.
const JOBS_CREATED: i64 = 1_794_621_600;
/// 2026-11-25T12:00:00Z: when koordlet reported the NodeMetrics of [`SimulatedCluster::write_json`].
pub const METRICS_AT: i64 = 1_795_608_000;
/// Seed of the Koordinator layer's draws, mixed into the cluster's seed: the layer never draws
/// from the cluster's own PRNG, so the rest of the cluster is what it was without the layer.
const KOORDLET_SEED: u64 = 0x6b6f_6f72_646c_6574;

/// RFC 3339 UTC timestamp of a Unix time, as the API server prints it.
fn timestamp(unix: i64) -> String {
    let days = unix.div_euclid(86_400);
    let secs = unix.rem_euclid(86_400);
    // Howard Hinnant's civil-from-days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        (secs / 60) % 60,
        secs % 60
    )
}

fn cpu_string(milli: i64) -> String {
    if milli % 1000 == 0 {
        (milli / 1000).to_string()
    } else {
        format!("{milli}m")
    }
}

fn mem_string(mib: i64) -> String {
    if mib % 1024 == 0 {
        format!("{}Gi", mib / 1024)
    } else {
        format!("{mib}Mi")
    }
}

// ------------------------------------------------------------------------------------------
// The catalog: what runs in the cluster
// ------------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pool {
    General,
    Batch,
    Gpu,
}

impl Pool {
    fn label(self) -> &'static str {
        match self {
            Pool::General => "general",
            Pool::Batch => "batch",
            Pool::Gpu => "gpu",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Deployment,
    StatefulSet,
    /// A CronJob's Job: one pod that already finished.
    CompletedJob,
    /// A Job with several pods running in parallel.
    Job,
    Bare,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Limits {
    None,
    /// limits == requests (Guaranteed QoS).
    Equal,
    /// memory limit = 2 × request, no cpu limit (Burstable).
    MemoryDouble,
}

#[derive(Clone, Copy, Debug)]
enum Budget {
    MaxUnavailable(i64),
    MinAvailable(i64),
    /// `minAvailable: 100%`: no voluntary disruption allowed.
    MinAvailableAll,
}

#[derive(Clone, Copy, Debug)]
enum Volume {
    None,
    EmptyDir,
    /// One PVC per StatefulSet pod (`data-<pod>`).
    Pvc,
}

#[derive(Clone, Debug)]
struct Workload {
    namespace: String,
    name: String,
    kind: Kind,
    replicas: usize,
    cpu_m: i64,
    mem_mi: i64,
    limits: Limits,
    image: String,
    port: Option<u16>,
    priority_class: Option<&'static str>,
    pool: Pool,
    volume: Volume,
    budget: Option<Budget>,
    /// Pile this many replicas onto one (hot) node.
    stack: usize,
    /// Generated to fill the cluster up to its pod count (not from the demo catalog).
    generated: bool,
}

/// One line of the demo catalog.
struct Entry {
    namespace: &'static str,
    name: &'static str,
    kind: Kind,
    replicas: usize,
    cpu_m: i64,
    mem_mi: i64,
    limits: Limits,
    image: &'static str,
    port: Option<u16>,
    priority_class: Option<&'static str>,
    pool: Pool,
    volume: Volume,
    budget: Option<Budget>,
    stack: usize,
}

const fn entry(
    namespace: &'static str,
    name: &'static str,
    kind: Kind,
    replicas: usize,
    cpu_m: i64,
    mem_mi: i64,
    image: &'static str,
) -> Entry {
    Entry {
        namespace,
        name,
        kind,
        replicas,
        cpu_m,
        mem_mi,
        limits: Limits::MemoryDouble,
        image,
        port: Some(8080),
        priority_class: None,
        pool: Pool::General,
        volume: Volume::None,
        budget: None,
        stack: 0,
    }
}

impl Entry {
    const fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }
    const fn port(mut self, port: Option<u16>) -> Self {
        self.port = port;
        self
    }
    const fn priority(mut self, class: &'static str) -> Self {
        self.priority_class = Some(class);
        self
    }
    const fn pool(mut self, pool: Pool) -> Self {
        self.pool = pool;
        self
    }
    const fn volume(mut self, volume: Volume) -> Self {
        self.volume = volume;
        self
    }
    const fn budget(mut self, budget: Budget) -> Self {
        self.budget = Some(budget);
        self
    }
    const fn stack(mut self, stack: usize) -> Self {
        self.stack = stack;
        self
    }
}

struct DaemonSet {
    namespace: &'static str,
    name: &'static str,
    cpu_m: i64,
    mem_mi: i64,
    image: &'static str,
    priority_class: Option<&'static str>,
}

const DAEMONSETS: [DaemonSet; 2] = [
    DaemonSet {
        namespace: "kube-system",
        name: "kube-proxy",
        cpu_m: 100,
        mem_mi: 128,
        image: "registry.k8s.io/kube-proxy:v1.33.2",
        priority_class: Some("system-node-critical"),
    },
    DaemonSet {
        namespace: "monitoring",
        name: "node-exporter",
        cpu_m: 50,
        mem_mi: 64,
        image: "quay.io/prometheus/node-exporter:v1.9.1",
        priority_class: None,
    },
];

use Kind::{Bare, CompletedJob, Deployment, Job, StatefulSet};

#[rustfmt::skip]
const CATALOG: &[Entry] = &[
    entry("kube-system", "coredns", Deployment, 2, 100, 70, "registry.k8s.io/coredns/coredns:v1.11.3")
        .port(Some(53)).priority("system-cluster-critical").budget(Budget::MaxUnavailable(1)),
    entry("kube-system", "metrics-server", Deployment, 1, 100, 200, "registry.k8s.io/metrics-server/metrics-server:v0.7.2")
        .port(Some(10250)).priority("system-cluster-critical"),
    entry("monitoring", "prometheus", StatefulSet, 2, 1000, 4096, "quay.io/prometheus/prometheus:v3.4.1")
        .port(Some(9090)).volume(Volume::Pvc).budget(Budget::MinAvailable(1)),
    entry("monitoring", "alertmanager", StatefulSet, 2, 100, 256, "quay.io/prometheus/alertmanager:v0.28.1")
        .port(Some(9093)).volume(Volume::Pvc),
    entry("monitoring", "grafana", Deployment, 1, 250, 512, "docker.io/grafana/grafana:12.0.2")
        .port(Some(3000)).volume(Volume::EmptyDir),
    entry("shop", "frontend", Deployment, 12, 250, 256, "registry.example.com/shop/frontend:2.14.1")
        .priority("business-critical").budget(Budget::MaxUnavailable(2)),
    // Four of six replicas piled on one node: what RemoveDuplicates is for.
    entry("shop", "checkout", Deployment, 6, 500, 512, "registry.example.com/shop/checkout:3.2.0")
        .priority("business-critical").budget(Budget::MinAvailable(4)).stack(4),
    entry("shop", "cart", Deployment, 8, 200, 256, "registry.example.com/shop/cart:1.9.4"),
    entry("shop", "catalog", Deployment, 10, 250, 384, "registry.example.com/shop/catalog:4.0.2"),
    entry("shop", "search", Deployment, 6, 500, 1024, "registry.example.com/shop/search:2.3.7")
        .volume(Volume::EmptyDir),
    entry("shop", "recommendations", Deployment, 5, 750, 1024, "registry.example.com/shop/recommendations:0.18.0"),
    entry("shop", "redis", StatefulSet, 3, 250, 1024, "docker.io/library/redis:7.4.2")
        .port(Some(6379)).volume(Volume::Pvc).budget(Budget::MaxUnavailable(1)),
    entry("payments", "api", Deployment, 8, 500, 512, "registry.example.com/payments/api:5.1.3")
        .limits(Limits::Equal).priority("business-critical").budget(Budget::MinAvailableAll),
    entry("payments", "worker", Deployment, 6, 1000, 1024, "registry.example.com/payments/worker:5.1.3")
        .port(None).priority("standard"),
    entry("payments", "ledger-postgres", StatefulSet, 3, 1000, 2048, "docker.io/library/postgres:16.9")
        .port(Some(5432)).limits(Limits::Equal).volume(Volume::Pvc).budget(Budget::MaxUnavailable(1)),
    entry("payments", "fraud-detector", Deployment, 4, 750, 1536, "registry.example.com/payments/fraud-detector:1.4.0")
        .priority("standard"),
    entry("analytics", "ingest", Deployment, 6, 500, 1024, "registry.example.com/analytics/ingest:0.31.2")
        .volume(Volume::EmptyDir),
    entry("analytics", "nightly-report", CompletedJob, 3, 500, 1024, "registry.example.com/analytics/report:3.1.0")
        .port(None).limits(Limits::None).priority("batch-low").pool(Pool::Batch),
    entry("analytics", "spark-etl", Job, 4, 500, 2048, "docker.io/apache/spark:3.5.5")
        .port(None).priority("batch-low").pool(Pool::Batch).volume(Volume::EmptyDir),
    entry("analytics", "ml-inference", Deployment, 1, 2000, 8192, "registry.example.com/analytics/ml-inference:0.9.1")
        .limits(Limits::Equal).pool(Pool::Gpu),
    entry("platform", "ingress-nginx-controller", Deployment, 3, 500, 512, "registry.k8s.io/ingress-nginx/controller:v1.12.3")
        .port(Some(443)).priority("business-critical").budget(Budget::MaxUnavailable(1)),
    entry("platform", "cert-manager", Deployment, 1, 50, 128, "quay.io/jetstack/cert-manager-controller:v1.17.2")
        .port(Some(9402)),
    entry("platform", "external-dns", Deployment, 1, 50, 128, "registry.k8s.io/external-dns/external-dns:v0.17.0")
        .port(Some(7979)),
    entry("platform", "argocd-server", Deployment, 2, 100, 256, "quay.io/argoproj/argocd:v3.0.6"),
    entry("platform", "argocd-repo-server", Deployment, 2, 250, 512, "quay.io/argoproj/argocd:v3.0.6")
        .volume(Volume::EmptyDir),
    entry("platform", "debug-shell", Bare, 1, 0, 0, "docker.io/nicolaka/netshoot:v0.13")
        .port(None).limits(Limits::None),
    entry("payments", "pgbench-manual", Bare, 1, 250, 256, "docker.io/library/postgres:16.9")
        .port(None).limits(Limits::None),
];

/// Names of the generated ("filler") Deployments; suffixed with a number once they run out.
const FILLER_NAMES: &[&str] = &[
    "inventory",
    "pricing",
    "shipping",
    "notifications",
    "user-profile",
    "sessions",
    "reviews",
    "email-sender",
    "image-resizer",
    "audit-log",
    "feature-flags",
    "rate-limiter",
    "webhooks",
    "billing",
    "invoices",
    "tax-service",
    "currency",
    "loyalty",
    "coupons",
    "gateway",
    "wishlist",
    "returns",
    "warehouse-sync",
    "sms-sender",
    "geo-lookup",
];
const FILLER_NAMESPACES: &[&str] = &["shop", "payments", "analytics", "platform"];
/// Requests of filler Deployments: (cpu millicores, memory MiB, weight).
const FILLER_SIZES: &[(i64, i64, f64)] = &[
    (50, 64, 0.15),
    (100, 128, 0.20),
    (100, 256, 0.15),
    (200, 256, 0.15),
    (250, 512, 0.15),
    (500, 512, 0.10),
    (500, 1024, 0.06),
    (1000, 2048, 0.04),
];
/// Generated clusters aim at this mean cpu request level over schedulable general nodes.
const MEAN_CPU_TARGET: f64 = 0.40;

struct PriorityClass {
    name: &'static str,
    value: i64,
    preemption: &'static str,
    description: &'static str,
}

const PRIORITY_CLASSES: &[PriorityClass] = &[
    PriorityClass {
        name: "system-node-critical",
        value: 2_000_001_000,
        preemption: "PreemptLowerPriority",
        description: "Used for system critical pods that must not be moved from their current node.",
    },
    PriorityClass {
        name: "system-cluster-critical",
        value: 2_000_000_000,
        preemption: "PreemptLowerPriority",
        description: "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.",
    },
    PriorityClass {
        name: "business-critical",
        value: 100_000,
        preemption: "PreemptLowerPriority",
        description: "Customer-facing services.",
    },
    PriorityClass {
        name: "standard",
        value: 1_000,
        preemption: "PreemptLowerPriority",
        description: "Internal services.",
    },
    PriorityClass {
        name: "batch-low",
        value: 100,
        preemption: "Never",
        description: "Batch jobs; never preempt other pods.",
    },
];

fn priority_value(class: Option<&str>) -> i64 {
    class
        .and_then(|c| PRIORITY_CLASSES.iter().find(|pc| pc.name == c))
        .map_or(0, |pc| pc.value)
}

/// Namespaces `kubectl get namespaces` shows on any cluster, plus the demo's own.
const BASE_NAMESPACES: &[&str] = &[
    "default",
    "kube-node-lease",
    "kube-public",
    "kube-system",
    "monitoring",
    "shop",
    "payments",
    "analytics",
    "platform",
];

// ------------------------------------------------------------------------------------------
// Nodes and placement
// ------------------------------------------------------------------------------------------

struct InstanceType {
    name: &'static str,
    cores: i64,
    mem_gib: i64,
    gpus: i64,
}

const M5_2XL: InstanceType = InstanceType {
    name: "m5.2xlarge",
    cores: 8,
    mem_gib: 32,
    gpus: 0,
};
const M5_4XL: InstanceType = InstanceType {
    name: "m5.4xlarge",
    cores: 16,
    mem_gib: 64,
    gpus: 0,
};
const C5_4XL: InstanceType = InstanceType {
    name: "c5.4xlarge",
    cores: 16,
    mem_gib: 32,
    gpus: 0,
};
const G5_4XL: InstanceType = InstanceType {
    name: "g5.4xlarge",
    cores: 16,
    mem_gib: 64,
    gpus: 1,
};

const ZONES: [&str; 3] = ["eu-west-1a", "eu-west-1b", "eu-west-1c"];
const POD_SLOTS: i64 = 110;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Heat {
    Hot,
    Warm,
    Cold,
}

struct NodePlan {
    name: String,
    uid: String,
    ip: String,
    zone: usize,
    instance: &'static InstanceType,
    pool: Pool,
    cordoned: bool,
    heat: Heat,
    created: i64,
    alloc_cpu_m: i64,
    alloc_mem_mi: i64,
    /// Requests the placement aims at (cpu millicores).
    target_cpu_m: i64,
    used_cpu_m: i64,
    used_mem_mi: i64,
    pods: i64,
}

impl NodePlan {
    fn mem_cap_mi(&self) -> i64 {
        match self.heat {
            Heat::Cold => self.alloc_mem_mi * 15 / 100,
            _ => self.alloc_mem_mi * 90 / 100,
        }
    }
    fn pod_cap(&self) -> i64 {
        match self.heat {
            Heat::Cold => 18,
            _ => POD_SLOTS - 5,
        }
    }
    fn fits_budget(&self, cpu: i64, mem: i64) -> bool {
        self.used_cpu_m + cpu <= self.target_cpu_m
            && self.used_mem_mi + mem <= self.mem_cap_mi()
            && self.pods < self.pod_cap()
    }
    fn fits_hard(&self, cpu: i64, mem: i64) -> bool {
        self.used_cpu_m + cpu <= self.alloc_cpu_m * 95 / 100
            && self.used_mem_mi + mem <= self.alloc_mem_mi * 95 / 100
            && self.pods < POD_SLOTS
    }
    fn place(&mut self, cpu: i64, mem: i64) {
        self.used_cpu_m += cpu;
        self.used_mem_mi += mem;
        self.pods += 1;
    }
}

/// One pod to write: which workload, which replica, which node.
struct PodPlan {
    workload: usize,
    ordinal: usize,
    node: usize,
}

struct Plan {
    rng: Rng,
    /// When the NodeMetrics were reported (Unix seconds).
    metrics_at: i64,
    nodes: Vec<NodePlan>,
    workloads: Vec<Workload>,
    pods: Vec<PodPlan>,
    namespaces: Vec<String>,
}

impl Plan {
    fn new(spec: &SimulatedCluster) -> Plan {
        let mut rng = Rng::new(spec.seed);
        let nodes = plan_nodes(spec.nodes, &mut rng);
        let mut namespaces: Vec<String> = BASE_NAMESPACES.iter().map(|s| s.to_string()).collect();
        let team_namespaces = spec.pods / 5000;
        for i in 0..team_namespaces {
            namespaces.push(format!("team-{i:02}"));
        }
        let mut plan = Plan {
            rng,
            metrics_at: METRICS_AT,
            nodes,
            workloads: Vec::new(),
            pods: Vec::new(),
            namespaces,
        };
        let large = spec.nodes >= 100;
        plan.plan_workloads(
            spec.pods - spec.nodes * DAEMONSETS.len(),
            team_namespaces,
            large,
        );
        plan.set_targets();
        plan.place_all();
        plan
    }

    /// The demo catalog (cut short when the budget is small), then generated Deployments.
    fn plan_workloads(&mut self, mut budget: usize, team_namespaces: usize, large: bool) {
        for e in CATALOG {
            if budget == 0 {
                break;
            }
            let replicas = e.replicas.min(budget);
            budget -= replicas;
            self.workloads.push(Workload {
                namespace: e.namespace.to_string(),
                name: e.name.to_string(),
                kind: e.kind,
                replicas,
                cpu_m: e.cpu_m,
                mem_mi: e.mem_mi,
                limits: e.limits,
                image: e.image.to_string(),
                port: e.port,
                priority_class: e.priority_class,
                pool: e.pool,
                volume: e.volume,
                budget: e.budget,
                stack: e.stack.min(replicas),
                generated: false,
            });
        }
        let mut filler_namespaces: Vec<String> =
            FILLER_NAMESPACES.iter().map(|s| s.to_string()).collect();
        filler_namespaces.extend((0..team_namespaces).map(|i| format!("team-{i:02}")));
        let mut k = 0;
        while budget > 0 {
            let rng = &mut self.rng;
            let r = rng.unit();
            let replicas = if r < 0.55 {
                rng.range(2, 5)
            } else if r < 0.90 {
                rng.range(6, 12)
            } else {
                rng.range(13, 30)
            } as usize;
            let replicas = replicas.min(budget);
            budget -= replicas;
            let mut acc = 0.0;
            let pick = rng.unit();
            let &(cpu_m, mem_mi, _) = FILLER_SIZES
                .iter()
                .find(|(_, _, w)| {
                    acc += w;
                    pick < acc
                })
                .unwrap_or(&FILLER_SIZES[FILLER_SIZES.len() - 1]);
            let base = FILLER_NAMES[k % FILLER_NAMES.len()];
            let name = if k < FILLER_NAMES.len() {
                base.to_string()
            } else {
                format!("{base}-{}", k / FILLER_NAMES.len())
            };
            let namespace = filler_namespaces[k % filler_namespaces.len()].clone();
            let priority_class = match rng.below(4) {
                0 => Some("business-critical"),
                1 | 2 => Some("standard"),
                _ => None,
            };
            let budget_spec =
                (replicas >= 3 && rng.chance(0.3)).then_some(Budget::MaxUnavailable(1));
            // In large clusters a share of Deployments ends up stacked, like `checkout` in the
            // demo (which keeps that story to one Deployment).
            let stack = if large && replicas >= 4 && rng.chance(0.08) {
                (replicas / 2).min(4)
            } else {
                0
            };
            // A few generated Deployments run on the tainted batch pool, tolerating its taint.
            let pool = if rng.chance(0.03) {
                Pool::Batch
            } else {
                Pool::General
            };
            let volume = if rng.chance(0.15) {
                Volume::EmptyDir
            } else {
                Volume::None
            };
            self.workloads.push(Workload {
                image: format!(
                    "registry.example.com/{namespace}/{base}:{}.{}.{}",
                    rng.range(1, 4),
                    rng.range(0, 30),
                    rng.range(0, 9)
                ),
                namespace,
                name,
                kind: Kind::Deployment,
                replicas,
                cpu_m,
                mem_mi,
                limits: Limits::MemoryDouble,
                port: Some(8080),
                priority_class,
                pool,
                volume,
                budget: budget_spec,
                stack,
                generated: true,
            });
            k += 1;
        }
    }

    /// Cpu targets per node: hot 62–80 %, cold 4–12 %, warm nodes share the rest of the demand.
    /// Filler requests are scaled so that large generated clusters keep the same shape.
    fn set_targets(&mut self) {
        let general: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| self.nodes[i].pool == Pool::General)
            .collect();
        let capacity: i64 = general.iter().map(|&i| self.nodes[i].alloc_cpu_m).sum();
        let ds_cpu: i64 = DAEMONSETS.iter().map(|d| d.cpu_m).sum::<i64>() * general.len() as i64;
        let catalog_cpu: i64 = self
            .workloads
            .iter()
            .filter(|w| w.pool == Pool::General && !w.generated)
            .map(|w| w.cpu_m * w.replicas as i64)
            .sum();
        let filler_cpu: i64 = self
            .workloads
            .iter()
            .filter(|w| w.generated)
            .map(|w| w.cpu_m * w.replicas as i64)
            .sum();
        let wanted = (capacity as f64 * MEAN_CPU_TARGET) as i64 - ds_cpu - catalog_cpu;
        if filler_cpu > 0 {
            let scale = (wanted as f64 / filler_cpu as f64).clamp(0.1, 1.0);
            for w in &mut self.workloads {
                if w.generated {
                    w.cpu_m = ((w.cpu_m as f64 * scale / 10.0).round() as i64 * 10).max(10);
                    w.mem_mi = ((w.mem_mi as f64 * scale / 16.0).round() as i64 * 16).max(16);
                }
            }
        }
        let demand = (capacity as f64 * MEAN_CPU_TARGET) as i64;
        let mut fixed = 0;
        let mut warm_capacity = 0;
        for &i in &general {
            let n = &mut self.nodes[i];
            let jitter = self.rng.unit();
            match n.heat {
                Heat::Hot => {
                    n.target_cpu_m = (n.alloc_cpu_m as f64 * (0.62 + 0.18 * jitter)) as i64;
                    fixed += n.target_cpu_m;
                }
                Heat::Cold => {
                    n.target_cpu_m = (n.alloc_cpu_m as f64 * (0.04 + 0.08 * jitter)) as i64;
                    fixed += n.target_cpu_m;
                }
                Heat::Warm => warm_capacity += n.alloc_cpu_m,
            }
        }
        let warm_share = if warm_capacity > 0 {
            ((demand - fixed) as f64 / warm_capacity as f64).clamp(0.22, 0.40)
        } else {
            0.0
        };
        for &i in &general {
            let jitter = self.rng.unit();
            let n = &mut self.nodes[i];
            if n.heat == Heat::Warm {
                n.target_cpu_m =
                    (n.alloc_cpu_m as f64 * (warm_share + 0.06 * (jitter - 0.5))) as i64;
            }
        }
        for n in &mut self.nodes {
            if n.pool != Pool::General {
                n.target_cpu_m = n.alloc_cpu_m * 60 / 100;
            }
        }
    }

    fn place_all(&mut self) {
        // DaemonSets first: one pod per node.
        for ds in &DAEMONSETS {
            for n in &mut self.nodes {
                n.place(ds.cpu_m, ds.mem_mi);
            }
        }
        let by_pool = |pool: Pool, nodes: &[NodePlan]| -> Vec<usize> {
            (0..nodes.len())
                .filter(|&i| nodes[i].pool == pool)
                .collect()
        };
        let general = by_pool(Pool::General, &self.nodes);
        let batch = by_pool(Pool::Batch, &self.nodes);
        let gpu = by_pool(Pool::Gpu, &self.nodes);
        let hot: Vec<usize> = general
            .iter()
            .copied()
            .filter(|&i| self.nodes[i].heat == Heat::Hot && !self.nodes[i].cordoned)
            .collect();
        for w in 0..self.workloads.len() {
            let (cpu, mem, replicas, stack, pool, spread) = {
                let wl = &self.workloads[w];
                let spread = matches!(wl.kind, Kind::Deployment | Kind::StatefulSet);
                (wl.cpu_m, wl.mem_mi, wl.replicas, wl.stack, wl.pool, spread)
            };
            let terminal = self.workloads[w].kind == Kind::CompletedJob;
            let candidates = match pool {
                Pool::General => &general,
                Pool::Batch if !batch.is_empty() => &batch,
                Pool::Gpu if !gpu.is_empty() => &gpu,
                _ => &general,
            };
            let mut first: Option<usize> = None;
            let mut per_node: HashMap<usize, usize> = HashMap::new();
            for ordinal in 0..replicas {
                let spread = Spread {
                    enabled: spread,
                    per_node: &per_node,
                    placed: ordinal,
                };
                let node = if stack > 1 && ordinal < stack {
                    match first {
                        Some(first) if self.nodes[first].fits_hard(cpu, mem) => first,
                        Some(_) => self.pick(candidates, cpu, mem, &spread),
                        None => self.pick(&hot, cpu, mem, &spread),
                    }
                } else {
                    self.pick(candidates, cpu, mem, &spread)
                };
                if !terminal {
                    self.nodes[node].place(cpu, mem);
                }
                first.get_or_insert(node);
                *per_node.entry(node).or_default() += 1;
                self.pods.push(PodPlan {
                    workload: w,
                    ordinal,
                    node,
                });
            }
        }
    }

    /// A node for one pod: random nodes within their target first, else the least loaded
    /// non-cold node. Replicas spread the way the scheduler spreads them: a node gets a workload's
    /// (k+1)-th replica only once there are k replicas per candidate node on average.
    fn pick(&mut self, candidates: &[usize], cpu: i64, mem: i64, spread: &Spread<'_>) -> usize {
        if candidates.is_empty() {
            // Only possible for stacked workloads when no node is hot (tiny clusters).
            return self.rng.below(self.nodes.len());
        }
        let level = spread.placed / candidates.len() + 1;
        let crowded = |n: usize| spread.enabled && spread.count(n) >= level;
        for attempt in 0..32 {
            let n = candidates[self.rng.below(candidates.len())];
            if attempt < 24 && crowded(n) {
                continue;
            }
            if self.nodes[n].fits_budget(cpu, mem) {
                return n;
            }
        }
        let nodes = &self.nodes;
        let key = |n: usize| {
            (
                crowded(n),
                nodes[n].used_cpu_m as f64 / nodes[n].alloc_cpu_m as f64,
            )
        };
        let by_key = |a: &usize, b: &usize| {
            let (ka, kb) = (key(*a), key(*b));
            ka.0.cmp(&kb.0).then(ka.1.total_cmp(&kb.1))
        };
        candidates
            .iter()
            .copied()
            .filter(|&i| nodes[i].heat != Heat::Cold && nodes[i].fits_hard(cpu, mem))
            .min_by(by_key)
            .or_else(|| candidates.iter().copied().min_by(by_key))
            .unwrap_or(candidates[0])
    }
}

/// Where a workload's replicas went so far.
struct Spread<'a> {
    enabled: bool,
    per_node: &'a HashMap<usize, usize>,
    /// Replicas placed so far.
    placed: usize,
}

impl Spread<'_> {
    fn count(&self, node: usize) -> usize {
        self.per_node.get(&node).copied().unwrap_or(0)
    }
}

fn plan_nodes(count: usize, rng: &mut Rng) -> Vec<NodePlan> {
    // Node roles over a shuffled order, so hot/cold/tainted nodes are spread over zones.
    let mut order: Vec<usize> = (0..count).collect();
    for i in (1..count).rev() {
        order.swap(i, rng.below(i + 1));
    }
    let batch = (count / 40).max(1);
    let gpu = (count / 100).max(1);
    let cordoned = (count / 50).max(1);
    let hot = (count * 3 / 10).max(1);
    let cold = (count / 4).max(1);
    let mut roles = vec![(Pool::General, Heat::Warm, false); count];
    let mut k = 0;
    for _ in 0..batch {
        roles[order[k]] = (Pool::Batch, Heat::Warm, false);
        k += 1;
    }
    for _ in 0..gpu {
        roles[order[k]] = (Pool::Gpu, Heat::Warm, false);
        k += 1;
    }
    for _ in 0..cordoned {
        roles[order[k]] = (Pool::General, Heat::Warm, true);
        k += 1;
    }
    for _ in 0..hot {
        roles[order[k]] = (Pool::General, Heat::Hot, false);
        k += 1;
    }
    for _ in 0..cold {
        roles[order[k]] = (Pool::General, Heat::Cold, false);
        k += 1;
    }
    (0..count)
        .map(|i| {
            let (pool, heat, cordoned) = roles[i];
            let instance: &'static InstanceType = match pool {
                Pool::Batch => &C5_4XL,
                Pool::Gpu => &G5_4XL,
                Pool::General => match rng.below(10) {
                    0..=5 => &M5_2XL,
                    6..=8 => &M5_4XL,
                    _ => &C5_4XL,
                },
            };
            let zone = i % ZONES.len();
            let (b, c, d) = (zone + 1, (i / 250) % 256, i % 250 + 4);
            let ip = format!("10.{b}.{c}.{d}");
            NodePlan {
                name: format!("ip-10-{b}-{c}-{d}.eu-west-1.compute.internal"),
                uid: rng.uid(),
                ip,
                zone,
                instance,
                pool,
                cordoned,
                heat,
                created: NODES_CREATED + i as i64 * 97 + rng.range(0, 3600),
                alloc_cpu_m: allocatable_cpu_m(instance.cores),
                alloc_mem_mi: allocatable_mem_ki(instance.mem_gib) / 1024,
                target_cpu_m: 0,
                used_cpu_m: 0,
                used_mem_mi: 0,
                pods: 0,
            }
        })
        .collect()
}

/// Allocatable cpu after kube-reserved, with the EKS formula (6 % of the first core, 1 % of the
/// second, 0.5 % of the next two, 0.25 % of the rest).
fn allocatable_cpu_m(cores: i64) -> i64 {
    let reserved = 60 + 10 + 10 + 10 + (cores - 4).max(0) * 2 + (cores - 4).max(0) / 2;
    cores * 1000 - reserved
}

fn capacity_mem_ki(gib: i64) -> i64 {
    // Firmware and kernel keep a little: capacity is slightly below the nominal size.
    gib * 1024 * 1024 - 170_000 - gib * 420
}

fn allocatable_mem_ki(gib: i64) -> i64 {
    // kube-reserved (255 MiB + 11 MiB per possible pod) and the eviction threshold (100 MiB).
    capacity_mem_ki(gib) - (255 + 11 * POD_SLOTS + 100) * 1024
}

// ------------------------------------------------------------------------------------------
// Writing objects
// ------------------------------------------------------------------------------------------

struct ListWriter<'a, W: Write> {
    out: &'a mut W,
    first: bool,
}

impl<W: Write> ListWriter<'_, W> {
    fn begin(&mut self) -> io::Result<()> {
        self.out.write_all(br#"{"apiVersion":"v1","items":["#)
    }
    fn item(&mut self, value: &Value) -> io::Result<()> {
        if !self.first {
            self.out.write_all(b",\n")?;
        } else {
            self.out.write_all(b"\n")?;
        }
        self.first = false;
        serde_json::to_writer(&mut *self.out, value).map_err(io::Error::other)
    }
    fn end(&mut self) -> io::Result<()> {
        self.out
            .write_all(b"\n],\"kind\":\"List\",\"metadata\":{\"resourceVersion\":\"\"}}\n")
    }
}

/// Per-workload facts shared by its pods.
struct Owner {
    kind: &'static str,
    api_version: &'static str,
    name: String,
    uid: String,
    /// Label set on every pod (the workload's selector labels).
    labels: Vec<(String, String)>,
    created: i64,
}

impl Plan {
    fn write<W: Write>(mut self, w: &mut ListWriter<'_, W>) -> Result<Summary, SimulationError> {
        let mut summary = Summary::default();
        // Names handed out so far, per namespace: `generateName` retries on a clash, so do we.
        let mut taken: HashSet<(String, String)> = HashSet::new();
        let mut resource_version: u64 = 1_048_576;
        let mut rv = || {
            resource_version += 1 + (resource_version % 7);
            resource_version.to_string()
        };

        for n in &self.nodes {
            w.item(&node_json(n, &rv()))?;
            summary.nodes += 1;
        }
        let mut koord = Koordinator::new(self.rng.0 ^ KOORDLET_SEED, &self.nodes);

        // DaemonSet pods.
        for ds in &DAEMONSETS {
            let owner = Owner {
                kind: "DaemonSet",
                api_version: "apps/v1",
                name: ds.name.to_string(),
                uid: self.rng.uid(),
                labels: vec![
                    ("app.kubernetes.io/name".into(), ds.name.into()),
                    ("controller-revision-hash".into(), self.rng.hex(10)),
                    ("pod-template-generation".into(), "1".into()),
                ],
                created: NODES_CREATED,
            };
            for (i, n) in self.nodes.iter().enumerate() {
                let name = generated_name(&mut self.rng, &mut taken, ds.namespace, ds.name);
                let pod = PodSpec {
                    namespace: ds.namespace,
                    name: &name,
                    uid: self.rng.uid(),
                    node: n,
                    owner: Some((&owner, 0)),
                    container: ds.name,
                    image: ds.image,
                    cpu_m: ds.cpu_m,
                    mem_mi: ds.mem_mi,
                    limits: Limits::MemoryDouble,
                    port: Some(9100),
                    priority_class: ds.priority_class,
                    tolerations: Tolerations::Everything,
                    node_selector: None,
                    node_affinity_name: true,
                    volume: Volume::None,
                    completed: false,
                    created: n.created + 40 + i as i64 % 17,
                    restarts: 0,
                    pod_ip: pod_ip(n, &mut self.rng),
                    host_network: ds.name == "kube-proxy",
                    extra_resource: None,
                };
                koord.measure(i, ds.namespace, &name, ds.cpu_m, ds.mem_mi);
                w.item(&pod.to_json(&rv()))?;
                summary.pods += 1;
            }
        }

        // Workload pods, grouped by workload (the plan's order).
        let mut owners: Vec<Owner> = Vec::with_capacity(self.workloads.len());
        for (i, wl) in self.workloads.iter().enumerate() {
            let created = match wl.kind {
                Kind::CompletedJob | Kind::Job => JOBS_CREATED + i as i64 * 600,
                _ => WORKLOADS_CREATED + self.rng.range(0, ROLLOUT_SPAN),
            };
            owners.push(owner_for(wl, created, &mut self.rng));
        }
        let pods = std::mem::take(&mut self.pods);
        for p in &pods {
            let wl = &self.workloads[p.workload];
            let owner = &owners[p.workload];
            let node = &self.nodes[p.node];
            let (name, owner_ref, created) = match wl.kind {
                Kind::Deployment => {
                    let name =
                        generated_name(&mut self.rng, &mut taken, &wl.namespace, &owner.name);
                    (name, Some((owner, 0)), owner.created + p.ordinal as i64 * 3)
                }
                Kind::StatefulSet => (
                    format!("{}-{}", wl.name, p.ordinal),
                    Some((owner, p.ordinal)),
                    owner.created + p.ordinal as i64 * 45,
                ),
                Kind::Job => {
                    let name =
                        generated_name(&mut self.rng, &mut taken, &wl.namespace, &owner.name);
                    (name, Some((owner, 0)), owner.created)
                }
                Kind::CompletedJob => {
                    // One Job per CronJob run, a day apart: name-<scheduled minute>.
                    let created = owner.created - p.ordinal as i64 * 86_400;
                    let job = format!("{}-{}", wl.name, created / 60);
                    let name = generated_name(&mut self.rng, &mut taken, &wl.namespace, &job);
                    (name, Some((owner, p.ordinal)), created)
                }
                Kind::Bare => (wl.name.clone(), Some((owner, 0)), owner.created),
            };
            let job_owner;
            let owner_ref = match (wl.kind, owner_ref) {
                (Kind::CompletedJob, Some(_)) => {
                    let job = format!("{}-{}", wl.name, created / 60);
                    job_owner = Owner {
                        kind: "Job",
                        api_version: "batch/v1",
                        uid: self.rng.uid(),
                        labels: vec![
                            ("batch.kubernetes.io/job-name".into(), job.clone()),
                            ("job-name".into(), job.clone()),
                        ],
                        name: job,
                        created,
                    };
                    Some((&job_owner, 0))
                }
                (_, o) => o,
            };
            let restarts = if self.rng.chance(0.05) {
                self.rng.range(1, 4)
            } else {
                0
            };
            let pod = PodSpec {
                namespace: &wl.namespace,
                name: &name,
                uid: self.rng.uid(),
                node,
                owner: owner_ref,
                container: &wl.name,
                image: &wl.image,
                cpu_m: wl.cpu_m,
                mem_mi: wl.mem_mi,
                limits: wl.limits,
                port: wl.port,
                priority_class: wl.priority_class,
                tolerations: match wl.pool {
                    Pool::General => Tolerations::Default,
                    Pool::Batch => Tolerations::Batch,
                    Pool::Gpu => Tolerations::Gpu,
                },
                node_selector: (wl.pool != Pool::General).then(|| wl.pool.label()),
                node_affinity_name: false,
                volume: wl.volume,
                completed: wl.kind == Kind::CompletedJob,
                created,
                restarts,
                pod_ip: pod_ip(node, &mut self.rng),
                host_network: false,
                extra_resource: (wl.pool == Pool::Gpu).then_some(("nvidia.com/gpu", 1)),
            };
            let mut json = pod.to_json(&rv());
            if wl.kind != Kind::CompletedJob {
                koord.measure(p.node, &wl.namespace, &name, wl.cpu_m, wl.mem_mi);
            }
            if let Some(cpus) = koord.cpuset(wl, p.ordinal, p.node) {
                crate::koordlet::pin(&mut json, &cpus);
                summary.cpuset_pods += 1;
            }
            w.item(&json)?;
            summary.pods += 1;
        }

        for (wl, owner) in self.workloads.iter().zip(&owners) {
            let Some(budget) = wl.budget else { continue };
            w.item(&pdb_json(wl, owner, budget, &mut self.rng, &rv()))?;
            summary.pdbs += 1;
        }

        for ns in &self.namespaces {
            w.item(&namespace_json(ns, &mut self.rng, &rv()))?;
            summary.namespaces += 1;
        }

        for pc in PRIORITY_CLASSES {
            w.item(&priority_class_json(pc, &mut self.rng, &rv()))?;
            summary.priority_classes += 1;
        }

        let reported = timestamp(self.metrics_at);
        for (i, n) in self.nodes.iter().enumerate() {
            let node = &koord.nodes[i];
            // koordlet's own share: 3 % of the machine and 600 MiB.
            let system = (n.instance.cores * 30, 600);
            let metric = crate::koordlet::node_metric(&n.name, &reported, system, &node.pods);
            let topology = crate::koordlet::topology(&n.name, node.cpus, &node.pinned);
            for mut object in [metric, topology] {
                let meta = &mut object["metadata"];
                meta["uid"] = json!(koord.rng.uid());
                meta["creationTimestamp"] = json!(timestamp(n.created + 120));
                meta["resourceVersion"] = json!(rv());
                w.item(&object)?;
            }
            summary.node_metrics += 1;
            summary.topologies += 1;
        }
        Ok(summary)
    }
}

/// The demo's Koordinator layer: what the pods use and which are pinned to CPUs.
///
/// - **Usage.** Pods use a share of what they request that depends on their node: 35–55 % on
///   nodes hot by requests (their pods are over-requested), 50–80 % on warm ones, 30–50 % on cold
///   ones, ±15 % per pod; memory 55–95 %. Every fourth warm general-purpose node is **hot on
///   usage**: its pods burst to 2.3–2.6 × their cpu requests (no cpu limit), so LowNodeLoad sees
///   a node that LowNodeUtilization, which counts requests, does not.
/// - **cpusets.** `payments/ledger-postgres` and `payments/worker` (one cpu each) are koord-prod
///   LSR pods pinned to a CPU of their node, handed out from CPU 2 up. Two workers are wrong on
///   purpose, as drift leaves them: the fourth holds a CPU its node does not have (the machine
///   was replaced by a smaller one: H1), and the second shares the CPU of the first cpuset pod
///   on its node, or holds two CPUs when it has no neighbour (H8 or H2).
struct Koordinator {
    rng: Rng,
    nodes: Vec<KoordNode>,
}

struct KoordNode {
    factor: f64,
    cpus: u32,
    pinned: Vec<u32>,
    pods: Vec<crate::koordlet::PodUsage>,
}

impl Koordinator {
    fn new(seed: u64, nodes: &[NodePlan]) -> Self {
        let mut rng = Rng::new(seed);
        let mut warm_general = 0;
        let nodes = nodes
            .iter()
            .map(|n| {
                let factor = match n.heat {
                    Heat::Hot => 0.35 + 0.2 * rng.unit(),
                    Heat::Cold => 0.3 + 0.2 * rng.unit(),
                    Heat::Warm if n.pool == Pool::General && !n.cordoned => {
                        warm_general += 1;
                        if warm_general % 4 == 1 {
                            2.3 + 0.3 * rng.unit()
                        } else {
                            0.5 + 0.3 * rng.unit()
                        }
                    }
                    Heat::Warm => 0.5 + 0.3 * rng.unit(),
                };
                KoordNode {
                    factor,
                    cpus: n.instance.cores as u32,
                    pinned: Vec::new(),
                    pods: Vec::new(),
                }
            })
            .collect();
        Koordinator { rng, nodes }
    }

    /// A running pod of these requests on node `node`.
    fn measure(&mut self, node: usize, namespace: &str, name: &str, cpu_m: i64, mem_mi: i64) {
        let cpu = self.nodes[node].factor * (0.85 + 0.3 * self.rng.unit());
        let mem = 0.55 + 0.4 * self.rng.unit();
        self.nodes[node].pods.push(crate::koordlet::PodUsage {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            cpu_m: (cpu_m as f64 * cpu).round() as i64,
            mem_mi: (mem_mi as f64 * mem).round() as i64,
        });
    }

    /// The cpuset of replica `ordinal` of `wl` on `node`, if it is a pinned pod.
    fn cpuset(&mut self, wl: &Workload, ordinal: usize, node: usize) -> Option<Vec<u32>> {
        let pinned = wl.namespace == "payments"
            && !wl.generated
            && matches!(wl.name.as_str(), "ledger-postgres" | "worker");
        if !pinned {
            return None;
        }
        let n = &mut self.nodes[node];
        let next = (2..n.cpus).find(|c| !n.pinned.contains(c));
        let cpus = match (wl.name.as_str(), ordinal) {
            ("worker", 3) => vec![n.cpus + 4],
            ("worker", 1) => match n.pinned.first() {
                Some(&neighbour) => vec![neighbour],
                None => next.into_iter().chain(next.map(|c| c + 1)).collect(),
            },
            _ => next.into_iter().collect(),
        };
        n.pinned
            .extend(cpus.iter().copied().filter(|&c| c < n.cpus));
        Some(cpus)
    }
}

/// `<prefix>-<5 random characters>`, unique in its namespace (as `metadata.generateName` does).
fn generated_name(
    rng: &mut Rng,
    taken: &mut HashSet<(String, String)>,
    namespace: &str,
    prefix: &str,
) -> String {
    loop {
        let name = format!("{prefix}-{}", rng.suffix(5));
        if taken.insert((namespace.to_string(), name.clone())) {
            return name;
        }
    }
}

fn owner_for(wl: &Workload, created: i64, rng: &mut Rng) -> Owner {
    let app = vec![
        ("app.kubernetes.io/name".to_string(), wl.name.clone()),
        (
            "app.kubernetes.io/part-of".to_string(),
            wl.namespace.clone(),
        ),
    ];
    match wl.kind {
        Kind::Deployment => {
            let hash = rng.suffix(10);
            let mut labels = app;
            labels.push(("pod-template-hash".into(), hash.clone()));
            Owner {
                kind: "ReplicaSet",
                api_version: "apps/v1",
                name: format!("{}-{hash}", wl.name),
                uid: rng.uid(),
                labels,
                created,
            }
        }
        Kind::StatefulSet => {
            let mut labels = app;
            labels.push((
                "controller-revision-hash".into(),
                format!("{}-{}", wl.name, rng.hex(10)),
            ));
            Owner {
                kind: "StatefulSet",
                api_version: "apps/v1",
                name: wl.name.clone(),
                uid: rng.uid(),
                labels,
                created,
            }
        }
        Kind::Job | Kind::CompletedJob => {
            let job = if wl.kind == Kind::Job {
                format!("{}-{}", wl.name, created / 60)
            } else {
                wl.name.clone()
            };
            let mut labels = app;
            labels.push(("batch.kubernetes.io/job-name".into(), job.clone()));
            labels.push(("job-name".into(), job.clone()));
            Owner {
                kind: "Job",
                api_version: "batch/v1",
                name: job,
                uid: rng.uid(),
                labels,
                created,
            }
        }
        Kind::Bare => Owner {
            kind: "",
            api_version: "",
            name: String::new(),
            uid: String::new(),
            labels: vec![("run".to_string(), wl.name.clone())],
            created,
        },
    }
}

fn pod_ip(node: &NodePlan, rng: &mut Rng) -> String {
    format!(
        "10.{}.{}.{}",
        100 + node.zone,
        rng.below(256),
        rng.range(1, 254)
    )
}

fn node_json(n: &NodePlan, resource_version: &str) -> Value {
    let t = timestamp(n.created);
    let cpu = n.instance.cores.to_string();
    let mut capacity = json!({
        "cpu": cpu,
        "ephemeral-storage": "104845292Ki",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": format!("{}Ki", capacity_mem_ki(n.instance.mem_gib)),
        "pods": POD_SLOTS.to_string(),
    });
    let mut allocatable = json!({
        "cpu": format!("{}m", n.alloc_cpu_m),
        "ephemeral-storage": "95551679124",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": format!("{}Ki", allocatable_mem_ki(n.instance.mem_gib)),
        "pods": POD_SLOTS.to_string(),
    });
    if n.instance.gpus > 0 {
        capacity["nvidia.com/gpu"] = json!(n.instance.gpus.to_string());
        allocatable["nvidia.com/gpu"] = json!(n.instance.gpus.to_string());
    }
    let mut labels = json!({
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/instance-type": n.instance.name,
        "beta.kubernetes.io/os": "linux",
        "failure-domain.beta.kubernetes.io/region": "eu-west-1",
        "failure-domain.beta.kubernetes.io/zone": ZONES[n.zone],
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": n.name,
        "kubernetes.io/os": "linux",
        "node-pool": n.pool.label(),
        "node.kubernetes.io/instance-type": n.instance.name,
        "topology.kubernetes.io/region": "eu-west-1",
        "topology.kubernetes.io/zone": ZONES[n.zone],
    });
    let mut taints = Vec::new();
    match n.pool {
        Pool::General => {}
        Pool::Batch => {
            taints.push(json!({"key": "dedicated", "value": "batch", "effect": "NoSchedule"}))
        }
        Pool::Gpu => {
            labels["nvidia.com/gpu.present"] = json!("true");
            taints
                .push(json!({"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}));
        }
    }
    let mut spec = json!({
        "podCIDR": format!("10.{}.{}.0/24", 100 + n.zone, n.ip.rsplit('.').next().unwrap_or("0")),
        "providerID": format!("aws:///{}/i-0{}", ZONES[n.zone], &n.uid.replace('-', "")[..16]),
    });
    if n.cordoned {
        spec["unschedulable"] = json!(true);
        taints.push(json!({
            "key": "node.kubernetes.io/unschedulable",
            "effect": "NoSchedule",
            "timeAdded": timestamp(JOBS_CREATED + 3 * 3600),
        }));
    }
    if !taints.is_empty() {
        spec["taints"] = Value::Array(taints);
    }
    let heartbeat = timestamp(JOBS_CREATED + 86_400);
    let condition = |type_: &str, status: &str, reason: &str, message: &str| {
        json!({
            "type": type_, "status": status, "reason": reason, "message": message,
            "lastHeartbeatTime": heartbeat, "lastTransitionTime": t,
        })
    };
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "annotations": {
                "alpha.kubernetes.io/provided-node-ip": n.ip,
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
            "creationTimestamp": t,
            "labels": labels,
            "name": n.name,
            "resourceVersion": resource_version,
            "uid": n.uid,
        },
        "spec": spec,
        "status": {
            "addresses": [
                {"type": "InternalIP", "address": n.ip},
                {"type": "InternalDNS", "address": n.name},
                {"type": "Hostname", "address": n.name},
            ],
            "allocatable": allocatable,
            "capacity": capacity,
            "conditions": [
                condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                condition("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "architecture": "amd64",
                "bootID": n.uid,
                "containerRuntimeVersion": "containerd://1.7.27",
                "kernelVersion": "6.1.134-152.225.amzn2023.x86_64",
                "kubeProxyVersion": "v1.33.2",
                "kubeletVersion": "v1.33.2-eks-1c6b5ea",
                "machineID": n.uid.replace('-', ""),
                "operatingSystem": "linux",
                "osImage": "Amazon Linux 2023.7.20250623",
                "systemUUID": n.uid,
            },
        },
    })
}

#[derive(Clone, Copy)]
enum Tolerations {
    /// What the DefaultTolerationSeconds admission plugin adds to every pod.
    Default,
    Batch,
    Gpu,
    /// DaemonSet pods tolerate every NoSchedule/NoExecute taint.
    Everything,
}

struct PodSpec<'a> {
    namespace: &'a str,
    name: &'a str,
    uid: String,
    node: &'a NodePlan,
    /// The controlling owner and the pod's ordinal within it.
    owner: Option<(&'a Owner, usize)>,
    container: &'a str,
    image: &'a str,
    cpu_m: i64,
    mem_mi: i64,
    limits: Limits,
    port: Option<u16>,
    priority_class: Option<&'static str>,
    tolerations: Tolerations,
    node_selector: Option<&'static str>,
    /// DaemonSet pods are pinned with a `metadata.name` node affinity.
    node_affinity_name: bool,
    volume: Volume,
    /// A finished Job pod (phase Succeeded).
    completed: bool,
    created: i64,
    restarts: i64,
    pod_ip: String,
    host_network: bool,
    extra_resource: Option<(&'static str, i64)>,
}

impl PodSpec<'_> {
    fn to_json(&self, resource_version: &str) -> Value {
        let started = self.created + 2;
        let running_since = started + 6;
        let mut labels = serde_json::Map::new();
        let mut owner_refs = Vec::new();
        let mut volumes = Vec::new();
        let mut mounts = Vec::new();
        if let Some((owner, ordinal)) = self.owner {
            for (k, v) in &owner.labels {
                labels.insert(k.clone(), json!(v));
            }
            if owner.kind == "StatefulSet" {
                labels.insert(
                    "statefulset.kubernetes.io/pod-name".into(),
                    json!(self.name),
                );
                labels.insert(
                    "apps.kubernetes.io/pod-index".into(),
                    json!(ordinal.to_string()),
                );
            }
            if !owner.kind.is_empty() {
                owner_refs.push(json!({
                    "apiVersion": owner.api_version,
                    "blockOwnerDeletion": true,
                    "controller": true,
                    "kind": owner.kind,
                    "name": owner.name,
                    "uid": owner.uid,
                }));
            }
        }
        match self.volume {
            Volume::None => {}
            Volume::EmptyDir => {
                volumes.push(json!({"name": "scratch", "emptyDir": {"sizeLimit": "2Gi"}}));
                mounts.push(json!({"name": "scratch", "mountPath": "/tmp"}));
            }
            Volume::Pvc => {
                volumes.push(json!({
                    "name": "data",
                    "persistentVolumeClaim": {"claimName": format!("data-{}", self.name)},
                }));
                mounts.push(json!({"name": "data", "mountPath": "/data"}));
            }
        }
        let token = format!("kube-api-access-{}", &self.uid[..5]);
        volumes.push(json!({
            "name": token,
            "projected": {
                "defaultMode": 420,
                "sources": [
                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    {"configMap": {"items": [{"key": "ca.crt", "path": "ca.crt"}], "name": "kube-root-ca.crt"}},
                    {"downwardAPI": {"items": [{"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}, "path": "namespace"}]}},
                ],
            },
        }));
        mounts.push(json!({
            "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
            "name": token,
            "readOnly": true,
        }));

        let mut resources = json!({});
        if self.cpu_m > 0 || self.mem_mi > 0 {
            let mut requests =
                json!({"cpu": cpu_string(self.cpu_m), "memory": mem_string(self.mem_mi)});
            let mut limits = match self.limits {
                Limits::None => None,
                Limits::Equal => {
                    Some(json!({"cpu": cpu_string(self.cpu_m), "memory": mem_string(self.mem_mi)}))
                }
                Limits::MemoryDouble => Some(json!({"memory": mem_string(self.mem_mi * 2)})),
            };
            if let Some((name, count)) = self.extra_resource {
                requests[name] = json!(count.to_string());
                limits.get_or_insert_with(|| json!({}))[name] = json!(count.to_string());
            }
            resources["requests"] = requests;
            if let Some(limits) = limits {
                resources["limits"] = limits;
            }
        }
        let qos = if self.cpu_m == 0 && self.mem_mi == 0 {
            "BestEffort"
        } else if self.limits == Limits::Equal {
            "Guaranteed"
        } else {
            "Burstable"
        };
        let mut container = json!({
            "image": self.image,
            "imagePullPolicy": "IfNotPresent",
            "name": self.container,
            "resources": resources,
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File",
            "volumeMounts": mounts,
        });
        if let Some(port) = self.port {
            container["ports"] =
                json!([{"containerPort": port, "name": "http", "protocol": "TCP"}]);
        }
        let tolerations = match self.tolerations {
            Tolerations::Everything => json!([
                {"effect": "NoSchedule", "operator": "Exists"},
                {"effect": "NoExecute", "operator": "Exists"},
            ]),
            other => {
                let mut list = Vec::new();
                match other {
                    Tolerations::Batch => list.push(json!({"effect": "NoSchedule", "key": "dedicated", "operator": "Equal", "value": "batch"})),
                    Tolerations::Gpu => list.push(json!({"effect": "NoSchedule", "key": "nvidia.com/gpu", "operator": "Exists"})),
                    _ => {}
                }
                list.push(json!({"effect": "NoExecute", "key": "node.kubernetes.io/not-ready", "operator": "Exists", "tolerationSeconds": 300}));
                list.push(json!({"effect": "NoExecute", "key": "node.kubernetes.io/unreachable", "operator": "Exists", "tolerationSeconds": 300}));
                Value::Array(list)
            }
        };
        let priority = priority_value(self.priority_class);
        let restart_policy = if self.owner.is_some_and(|(o, _)| o.kind == "Job") {
            "Never"
        } else {
            "Always"
        };
        let preemption = if self.priority_class == Some("batch-low") {
            "Never"
        } else {
            "PreemptLowerPriority"
        };
        let mut spec = json!({
            "containers": [container],
            "dnsPolicy": "ClusterFirst",
            "enableServiceLinks": true,
            "nodeName": self.node.name,
            "preemptionPolicy": preemption,
            "priority": priority,
            "restartPolicy": restart_policy,
            "schedulerName": "default-scheduler",
            "securityContext": {},
            "serviceAccount": "default",
            "serviceAccountName": "default",
            "terminationGracePeriodSeconds": 30,
            "tolerations": tolerations,
            "volumes": volumes,
        });
        if let Some(class) = self.priority_class {
            spec["priorityClassName"] = json!(class);
        }
        if let Some(pool) = self.node_selector {
            spec["nodeSelector"] = json!({"node-pool": pool});
        }
        if self.node_affinity_name {
            spec["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [self.node.name]}]}],
            }}});
        }
        if self.host_network {
            spec["hostNetwork"] = json!(true);
            spec["dnsPolicy"] = json!("ClusterFirstWithHostNet");
        }

        let (phase, ready, state) = if self.completed {
            let finished = started + 14 * 60 + (self.uid.as_bytes()[0] as i64 % 60);
            (
                "Succeeded",
                false,
                json!({"terminated": {
                    "containerID": format!("containerd://{}", container_id(&self.uid)),
                    "exitCode": 0, "reason": "Completed",
                    "startedAt": timestamp(started + 1), "finishedAt": timestamp(finished),
                }}),
            )
        } else {
            (
                "Running",
                true,
                json!({"running": {"startedAt": timestamp(running_since)}}),
            )
        };
        let mut container_status = json!({
            "containerID": format!("containerd://{}", container_id(&self.uid)),
            "image": self.image,
            "imageID": format!("{}@sha256:{}", self.image.split(':').next().unwrap_or(self.image), container_id(self.image)),
            "lastState": {},
            "name": self.container,
            "ready": ready,
            "restartCount": self.restarts,
            "started": ready,
            "state": state,
        });
        if self.restarts > 0 {
            container_status["lastState"] = json!({"terminated": {
                "exitCode": 137, "reason": "OOMKilled",
                "startedAt": timestamp(started + 1), "finishedAt": timestamp(running_since - 1),
            }});
        }
        let t_start = timestamp(started);
        let t_ready = timestamp(running_since);
        let condition = |type_: &str, status: bool, at: &str| {
            let status_text = if status { "True" } else { "False" };
            let mut c = json!({"lastProbeTime": null, "lastTransitionTime": at, "status": status_text, "type": type_});
            if !status && self.completed && type_ != "PodScheduled" && type_ != "Initialized" {
                c["reason"] = json!("PodCompleted");
            }
            c
        };
        let conditions = json!([
            condition("PodReadyToStartContainers", ready, &t_ready),
            condition("Initialized", true, &t_start),
            condition("Ready", ready, &t_ready),
            condition("ContainersReady", ready, &t_ready),
            condition("PodScheduled", true, &timestamp(self.created)),
        ]);
        let pod_ip = if self.host_network {
            self.node.ip.clone()
        } else {
            self.pod_ip.clone()
        };
        let mut metadata = json!({
            "creationTimestamp": timestamp(self.created),
            "labels": labels,
            "name": self.name,
            "namespace": self.namespace,
            "resourceVersion": resource_version,
            "uid": self.uid,
        });
        if let Some((owner, _)) = self.owner
            && !owner.kind.is_empty()
        {
            metadata["ownerReferences"] = Value::Array(owner_refs);
            if owner.kind == "ReplicaSet" || owner.kind == "DaemonSet" || owner.kind == "Job" {
                metadata["generateName"] = json!(format!("{}-", owner.name));
            }
        }
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": metadata,
            "spec": spec,
            "status": {
                "conditions": conditions,
                "containerStatuses": [container_status],
                "hostIP": self.node.ip,
                "hostIPs": [{"ip": self.node.ip}],
                "phase": phase,
                "podIP": pod_ip,
                "podIPs": [{"ip": pod_ip}],
                "qosClass": qos,
                "startTime": t_start,
            },
        })
    }
}

/// A stable 64-hex-digit id derived from `seed` (container ids, image digests).
fn container_id(seed: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in seed.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    let mut rng = Rng::new(h);
    rng.hex(64)
}

fn pdb_json(
    wl: &Workload,
    owner: &Owner,
    budget: Budget,
    rng: &mut Rng,
    resource_version: &str,
) -> Value {
    let replicas = wl.replicas as i64;
    let (spec_field, desired) = match budget {
        Budget::MaxUnavailable(n) => (json!({"maxUnavailable": n}), (replicas - n).max(0)),
        Budget::MinAvailable(n) => (json!({"minAvailable": n}), n.min(replicas)),
        Budget::MinAvailableAll => (json!({"minAvailable": "100%"}), replicas),
    };
    let allowed = (replicas - desired).max(0);
    let (reason, status) = if allowed > 0 {
        ("SufficientPods", "True")
    } else {
        ("InsufficientPods", "False")
    };
    let mut spec = spec_field;
    let selector_labels: serde_json::Map<String, Value> = owner
        .labels
        .iter()
        .filter(|(k, _)| k == "app.kubernetes.io/name" || k == "app.kubernetes.io/part-of")
        .map(|(k, v)| (k.clone(), json!(v)))
        .collect();
    spec["selector"] = json!({"matchLabels": selector_labels});
    let t = timestamp(owner.created);
    json!({
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {
            "creationTimestamp": t,
            "generation": 1,
            "name": wl.name,
            "namespace": wl.namespace,
            "resourceVersion": resource_version,
            "uid": rng.uid(),
        },
        "spec": spec,
        "status": {
            "conditions": [{
                "lastTransitionTime": timestamp(owner.created + 120),
                "message": "",
                "observedGeneration": 1,
                "reason": reason,
                "status": status,
                "type": "DisruptionAllowed",
            }],
            "currentHealthy": replicas,
            "desiredHealthy": desired,
            "disruptionsAllowed": allowed,
            "expectedPods": replicas,
            "observedGeneration": 1,
        },
    })
}

fn namespace_json(name: &str, rng: &mut Rng, resource_version: &str) -> Value {
    let created = if name.starts_with("kube-") || name == "default" {
        NODES_CREATED - 3600
    } else {
        NODES_CREATED + 86_400 + (name.len() as i64) * 331
    };
    let mut labels = json!({"kubernetes.io/metadata.name": name});
    if matches!(name, "shop" | "payments") {
        labels["tier"] = json!("production");
        labels["pod-security.kubernetes.io/enforce"] = json!("restricted");
    }
    json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "creationTimestamp": timestamp(created),
            "labels": labels,
            "name": name,
            "resourceVersion": resource_version,
            "uid": rng.uid(),
        },
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    })
}

fn priority_class_json(pc: &PriorityClass, rng: &mut Rng, resource_version: &str) -> Value {
    let created = if pc.name.starts_with("system-") {
        NODES_CREATED - 3600
    } else {
        NODES_CREATED + 86_400
    };
    json!({
        "apiVersion": "scheduling.k8s.io/v1",
        "description": pc.description,
        "kind": "PriorityClass",
        "metadata": {
            "creationTimestamp": timestamp(created),
            "generation": 1,
            "name": pc.name,
            "resourceVersion": resource_version,
            "uid": rng.uid(),
        },
        "preemptionPolicy": pc.preemption,
        "value": pc.value,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn demo() -> Value {
        serde_json::from_slice(&demo_cluster_json()).expect("the demo cluster is valid JSON")
    }

    fn items_of<'a>(list: &'a Value, kind: &str) -> Vec<&'a Value> {
        list["items"]
            .as_array()
            .expect("items is an array")
            .iter()
            .filter(|i| i["kind"] == kind)
            .collect()
    }

    fn cpu_milli(s: &str) -> i64 {
        match s.strip_suffix('m') {
            Some(m) => m.parse().expect("millicores"),
            None => s.parse::<i64>().expect("cores") * 1000,
        }
    }

    fn mem_bytes(s: &str) -> i64 {
        for (suffix, mult) in [("Ki", 1 << 10), ("Mi", 1 << 20), ("Gi", 1 << 30)] {
            if let Some(n) = s.strip_suffix(suffix) {
                return n.parse::<i64>().expect("memory amount") * mult;
            }
        }
        s.parse().expect("memory in bytes")
    }

    /// Requested cpu %, memory % and pod count per node name, over non-terminal pods.
    fn utilization(list: &Value) -> HashMap<String, (f64, f64, i64, bool)> {
        let mut used: HashMap<String, (i64, i64, i64)> = HashMap::new();
        for pod in items_of(list, "Pod") {
            if pod["status"]["phase"] == "Succeeded" || pod["status"]["phase"] == "Failed" {
                continue;
            }
            let node = pod["spec"]["nodeName"].as_str().expect("bound").to_string();
            let e = used.entry(node).or_default();
            for c in pod["spec"]["containers"].as_array().expect("containers") {
                let req = &c["resources"]["requests"];
                e.0 += req["cpu"].as_str().map_or(0, cpu_milli);
                e.1 += req["memory"].as_str().map_or(0, mem_bytes);
            }
            e.2 += 1;
        }
        items_of(list, "Node")
            .into_iter()
            .map(|n| {
                let name = n["metadata"]["name"].as_str().expect("name").to_string();
                let alloc = &n["status"]["allocatable"];
                let cpu = cpu_milli(alloc["cpu"].as_str().expect("cpu"));
                let mem = mem_bytes(alloc["memory"].as_str().expect("memory"));
                let (c, m, p) = used.get(&name).copied().unwrap_or_default();
                let schedulable =
                    n["spec"]["unschedulable"] != true && n["spec"]["taints"].is_null();
                (
                    name,
                    (
                        c as f64 * 100.0 / cpu as f64,
                        m as f64 * 100.0 / mem as f64,
                        p,
                        schedulable,
                    ),
                )
            })
            .collect()
    }

    #[test]
    fn demo_is_a_kubectl_list_with_the_expected_counts() {
        let list = demo();
        assert_eq!(list["apiVersion"], "v1");
        assert_eq!(list["kind"], "List");
        assert_eq!(items_of(&list, "Node").len(), 20);
        assert_eq!(items_of(&list, "Pod").len(), 320);
        let pdbs = items_of(&list, "PodDisruptionBudget").len();
        assert!((5..=20).contains(&pdbs), "{pdbs} PDBs");
        let namespaces: std::collections::BTreeSet<&str> = items_of(&list, "Pod")
            .iter()
            .map(|p| p["metadata"]["namespace"].as_str().expect("namespace"))
            .collect();
        assert!((4..=6).contains(&namespaces.len()), "{namespaces:?}");
        assert_eq!(items_of(&list, "Namespace").len(), BASE_NAMESPACES.len());
        assert_eq!(
            items_of(&list, "PriorityClass").len(),
            PRIORITY_CLASSES.len()
        );
    }

    #[test]
    fn demo_has_koordinator_metrics_with_nodes_hot_on_usage_and_pinned_pods_with_drift() {
        let list = demo();
        let nodes = items_of(&list, "Node");
        let metrics = items_of(&list, "NodeMetric");
        assert_eq!(metrics.len(), nodes.len());
        assert_eq!(items_of(&list, "NodeResourceTopology").len(), nodes.len());
        let requested = utilization(&list);
        let mut hot_on_usage_only = Vec::new();
        for m in &metrics {
            let name = m["metadata"]["name"].as_str().unwrap();
            assert_eq!(m["status"]["updateTime"], timestamp(METRICS_AT));
            let node = nodes
                .iter()
                .find(|n| n["metadata"]["name"] == name)
                .expect("a metric per node");
            let alloc = cpu_milli(node["status"]["allocatable"]["cpu"].as_str().unwrap());
            let used = cpu_milli(
                m["status"]["nodeMetric"]["nodeUsage"]["resources"]["cpu"]
                    .as_str()
                    .unwrap(),
            );
            let usage_pct = used as f64 * 100.0 / alloc as f64;
            if usage_pct > 65.0 && requested[name].0 < 50.0 {
                hot_on_usage_only.push((name, usage_pct, requested[name].0));
            }
        }
        assert!(
            !hot_on_usage_only.is_empty() && hot_on_usage_only.len() <= 4,
            "a few nodes hot on usage, not on requests: {hot_on_usage_only:?}"
        );

        let pinned: Vec<(&str, &str, String)> = items_of(&list, "Pod")
            .into_iter()
            .filter_map(|p| {
                let status =
                    p["metadata"]["annotations"][crate::koordlet::RESOURCE_STATUS].as_str()?;
                let cpuset: Value = serde_json::from_str(status).unwrap();
                Some((
                    p["metadata"]["name"].as_str().unwrap(),
                    p["spec"]["nodeName"].as_str().unwrap(),
                    cpuset["cpuset"].as_str().unwrap().to_owned(),
                ))
            })
            .collect();
        assert_eq!(
            pinned.len(),
            9,
            "3 ledger-postgres + 6 worker pods: {pinned:?}"
        );
        let workers: Vec<_> = pinned
            .iter()
            .filter(|(name, _, _)| name.starts_with("worker-"))
            .collect();
        let (_, node, cpuset) = workers[3];
        let cpus = nodes
            .iter()
            .find(|n| n["metadata"]["name"] == *node)
            .map(|n| cpu_milli(n["status"]["capacity"]["cpu"].as_str().unwrap()) / 1000)
            .unwrap();
        assert!(
            cpuset.parse::<i64>().unwrap() >= cpus,
            "the fourth worker holds a CPU its {cpus}-CPU node does not have: {cpuset}"
        );
        let mut seen = HashSet::new();
        let doubled = pinned
            .iter()
            .filter(|(_, node, cpuset)| !seen.insert((*node, cpuset.as_str())))
            .count();
        let wide = pinned.iter().filter(|(_, _, c)| c.contains('-')).count();
        assert_eq!(
            doubled + wide,
            1,
            "one worker is pinned wrongly: {pinned:?}"
        );
    }

    #[test]
    fn demo_is_deterministic() {
        assert_eq!(demo_cluster_json(), demo_cluster_json());
    }

    #[test]
    fn demo_objects_look_like_api_output() {
        let list = demo();
        let mut uids = std::collections::HashSet::new();
        for item in list["items"].as_array().expect("items") {
            let uid = item["metadata"]["uid"]
                .as_str()
                .expect("every object has a uid");
            assert_eq!(uid.len(), 36, "{uid}");
            assert!(uids.insert(uid.to_string()), "duplicate uid {uid}");
            let created = item["metadata"]["creationTimestamp"]
                .as_str()
                .expect("creationTimestamp");
            assert!(
                created.starts_with("2026-") && created.ends_with('Z'),
                "{created}"
            );
        }
        let mut kinds: HashMap<String, usize> = HashMap::new();
        for pod in items_of(&list, "Pod") {
            let status = &pod["status"];
            assert!(status["phase"] == "Running" || status["phase"] == "Succeeded");
            assert!(status["startTime"].is_string());
            let ready = status["conditions"]
                .as_array()
                .expect("conditions")
                .iter()
                .find(|c| c["type"] == "Ready")
                .expect("Ready condition");
            assert_eq!(ready["status"] == "True", status["phase"] == "Running");
            assert!(pod["spec"]["containers"][0]["name"].is_string());
            match pod["metadata"]["ownerReferences"].as_array() {
                Some(refs) => {
                    assert_eq!(refs.len(), 1);
                    assert_eq!(refs[0]["controller"], true);
                    assert_eq!(refs[0]["uid"].as_str().map(str::len), Some(36));
                    *kinds
                        .entry(refs[0]["kind"].as_str().expect("kind").to_string())
                        .or_default() += 1;
                }
                None => *kinds.entry("bare".into()).or_default() += 1,
            }
        }
        assert_eq!(kinds.get("DaemonSet"), Some(&40));
        for kind in ["ReplicaSet", "StatefulSet", "Job", "bare"] {
            assert!(
                kinds.get(kind).is_some_and(|&n| n > 0),
                "no {kind} pods: {kinds:?}"
            );
        }
        let nodes = items_of(&list, "Node");
        let cordoned = nodes
            .iter()
            .filter(|n| n["spec"]["unschedulable"] == true)
            .count();
        let tainted = nodes
            .iter()
            .filter(|n| n["spec"]["unschedulable"] != true && n["spec"]["taints"].is_array())
            .count();
        assert_eq!(cordoned, 1);
        assert_eq!(tainted, 2);
        let zones: std::collections::BTreeSet<&str> = nodes
            .iter()
            .map(|n| {
                n["metadata"]["labels"]["topology.kubernetes.io/zone"]
                    .as_str()
                    .expect("zone")
            })
            .collect();
        assert_eq!(zones.len(), 3);
    }

    #[test]
    fn demo_is_visibly_unbalanced() {
        let list = demo();
        let util = utilization(&list);
        let over: Vec<_> = util.values().filter(|u| u.0 > 50.0 || u.1 > 50.0).collect();
        let under: Vec<_> = util
            .values()
            .filter(|u| u.3 && u.0 <= 20.0 && u.1 <= 20.0 && (u.2 as f64) <= 0.2 * POD_SLOTS as f64)
            .collect();
        assert!(
            over.len() >= 3,
            "over-utilized nodes: {over:?}; all: {util:?}"
        );
        assert!(over.iter().all(|u| u.0 <= 95.0 && u.1 <= 95.0), "{util:?}");
        assert!(
            under.len() >= 3,
            "under-utilized nodes: {under:?}; all: {util:?}"
        );

        // Four of the six checkout replicas share a node.
        let mut per_node: HashMap<&str, usize> = HashMap::new();
        for pod in items_of(&list, "Pod") {
            if pod["metadata"]["labels"]["app.kubernetes.io/name"] == "checkout" {
                *per_node
                    .entry(pod["spec"]["nodeName"].as_str().expect("node"))
                    .or_default() += 1;
            }
        }
        assert_eq!(per_node.values().sum::<usize>(), 6);
        assert_eq!(per_node.values().max(), Some(&4), "{per_node:?}");
    }

    #[test]
    fn scaled_clusters_keep_the_shape_and_validate_their_size() {
        let spec = SimulatedCluster {
            nodes: 200,
            pods: 6000,
            seed: 7,
        };
        let mut out = Vec::new();
        let summary = spec.write_json(&mut out).expect("valid spec");
        assert_eq!(summary.nodes, 200);
        assert_eq!(summary.pods, 6000);
        let list: Value = serde_json::from_slice(&out).expect("valid JSON");
        assert_eq!(items_of(&list, "Pod").len(), 6000);
        let util = utilization(&list);
        assert!(
            util.values().filter(|u| u.0 > 50.0).count() >= 20,
            "{util:?}"
        );
        assert!(
            util.values()
                .filter(|u| u.3 && u.0 <= 20.0 && u.1 <= 20.0)
                .count()
                >= 20
        );
        assert!(util.values().all(|u| u.2 <= POD_SLOTS), "{util:?}");
        // Names are unique per kind and namespace, uids everywhere (ingest would drop clashes).
        let mut names = std::collections::HashSet::new();
        let mut uids = std::collections::HashSet::new();
        for item in list["items"].as_array().expect("items") {
            let meta = &item["metadata"];
            let key = (
                item["kind"].clone(),
                meta["namespace"].clone(),
                meta["name"].clone(),
            );
            assert!(names.insert(key), "duplicate name {meta}");
            assert!(uids.insert(meta["uid"].clone()), "duplicate uid {meta}");
        }

        let too_small = SimulatedCluster {
            nodes: 10,
            pods: 5,
            seed: 1,
        };
        assert!(matches!(
            too_small.write_json(Vec::new()),
            Err(SimulationError::TooFewPods { min: 20, .. })
        ));
        let too_few_nodes = SimulatedCluster {
            nodes: 2,
            pods: 50,
            seed: 1,
        };
        assert!(matches!(
            too_few_nodes.validate(),
            Err(SimulationError::TooFewNodes { .. })
        ));
    }

    #[test]
    fn demo_ingests_without_errors_or_warnings() {
        let objects =
            rebalancer_cluster::parse_list(demo_cluster_json(), rebalancer_cluster::Format::Json)
                .expect("the demo cluster parses");
        assert!(objects.warnings().is_empty(), "{:?}", objects.warnings());
        let snapshot = rebalancer_cluster::build_snapshot(&objects, 1, 1_795_000_000_000)
            .expect("the demo cluster builds a snapshot");
        let cluster = snapshot.cluster();
        assert_eq!(cluster.node_count(), 20);
        assert_eq!(cluster.pod_count(), 320);
        assert!(
            cluster.pods().all(|p| p.node().is_some()),
            "every pod is bound to a known node"
        );
    }

    #[test]
    fn timestamps_are_rfc3339() {
        assert_eq!(timestamp(0), "1970-01-01T00:00:00Z");
        assert_eq!(timestamp(NODES_CREATED), "2026-06-01T08:00:00Z");
        assert_eq!(timestamp(WORKLOADS_CREATED), "2026-08-03T09:00:00Z");
        assert_eq!(timestamp(JOBS_CREATED), "2026-11-14T02:00:00Z");
        assert_eq!(timestamp(951_782_400), "2000-02-29T00:00:00Z");
    }
}
