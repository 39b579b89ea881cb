//! The benchmark's reference clusters: an exact port of `gen_large.py` (kept outside the
//! repository, next to `k8sfixtures.py`), so a clone can produce the clusters itself.
//!
//! [`write_scenario`] streams, byte for byte, what `python3 gen_large.py OUTDIR <size>` writes to
//! `OUTDIR/<size>.json`: `{"name": "perf-<size>", "policy": <DeschedulerPolicy>, "objects": <v1
//! List>}`. This module owns the sizes and the generator's decisions (node shapes, workloads and
//! where their replicas land); the object builders live in `fixtures`, CPython's `random.Random`
//! in `pyrandom` and `json.dumps` formatting in `json`. Every random draw, its order and every
//! float operation mirror the Python: reordering anything here changes the reference bytes, so
//! changes must keep the golden hash test passing. It must not read files or the clock.

mod fixtures;
mod json;
mod koordinator;
mod pyrandom;

use std::fmt;
use std::io::{self, BufWriter, Write};
use std::str::FromStr;

use fixtures::{
    Cluster, Container, NodeArgs, Phase, PodArgs, SYSTEM_CLUSTER_CRITICAL, owner, policy, profile,
    suffix,
};
use json::{Json, Obj, Separators, dump, obj};
use koordinator::Layer;
use pyrandom::PyRandom;

/// A reference cluster size (`SIZES` in gen_large.py).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Size {
    /// 500 nodes, 15,000 pods (~42 MB of JSON).
    Small,
    /// 2,000 nodes, 60,000 pods (~167 MB).
    Medium,
    /// 5,000 nodes, 150,000 pods (~417 MB).
    Large,
}

impl Size {
    /// Every size, smallest first.
    pub const ALL: [Size; 3] = [Size::Small, Size::Medium, Size::Large];

    /// The size's name as gen_large.py spells it (`small`, `medium`, `large`).
    pub fn name(self) -> &'static str {
        match self {
            Size::Small => "small",
            Size::Medium => "medium",
            Size::Large => "large",
        }
    }

    /// Number of nodes in the cluster.
    pub fn nodes(self) -> usize {
        match self {
            Size::Small => 500,
            Size::Medium => 2_000,
            Size::Large => 5_000,
        }
    }

    /// Number of pods in the cluster (daemonset, deployment and failed job pods together).
    pub fn pods(self) -> usize {
        match self {
            Size::Small => 15_000,
            Size::Medium => 60_000,
            Size::Large => 150_000,
        }
    }

    /// The fixed `random.Random` seed of the size.
    pub fn seed(self) -> u64 {
        match self {
            Size::Small => 20_240_501,
            Size::Medium => 20_240_502,
            Size::Large => 20_240_503,
        }
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A size name that is not `small`, `medium` or `large`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownSize(pub String);

impl fmt::Display for UnknownSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown cluster size {:?} (expected small, medium or large)",
            self.0
        )
    }
}

impl std::error::Error for UnknownSize {}

impl FromStr for Size {
    type Err = UnknownSize;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Size::ALL
            .into_iter()
            .find(|size| size.name() == s)
            .ok_or_else(|| UnknownSize(s.to_owned()))
    }
}

// ------------------------------------------------------------------ gen_large.py constants

const ZONES: [&str; 3] = ["eu-west-1a", "eu-west-1b", "eu-west-1c"];
/// `NODE_TYPES`: ((instance type, cpu cores, memory GiB), share).
const NODE_TYPES: [((&str, i64, i64), f64); 3] = [
    (("m5.2xlarge", 8, 32), 0.60),
    (("m5.4xlarge", 16, 64), 0.30),
    (("c5.4xlarge", 16, 32), 0.10),
];
/// `CPU_CHOICES`: millicores.
const CPU_CHOICES: [(i64, f64); 6] = [
    (25, 0.20),
    (50, 0.25),
    (100, 0.25),
    (200, 0.15),
    (500, 0.10),
    (1000, 0.05),
];
/// `MEM_CHOICES`: MiB.
const MEM_CHOICES: [(i64, f64); 6] = [
    (64, 0.15),
    (128, 0.25),
    (256, 0.25),
    (512, 0.20),
    (1024, 0.10),
    (4096, 0.05),
];
const PRIORITY_CHOICES: [(i64, f64); 4] = [(0, 0.5), (1000, 0.35), (100, 0.10), (100_000, 0.05)];
const N_NAMESPACES: usize = 40;

const P_REQ_AFFINITY: f64 = 0.10;
const P_MISPLACED_AFFINITY: f64 = 0.05;
const P_ANTI: f64 = 0.05;
const P_ANTI_VIOLATION: f64 = 0.10;
const P_SPREAD: f64 = 0.15;
const P_SPREAD_SKEWED: f64 = 0.25;
const P_BATCH: f64 = 0.10;
const P_STACK: f64 = 0.10;
const P_OLD: f64 = 0.03;
const P_RESTARTS: f64 = 0.02;
const P_FAILED: f64 = 0.01;
const P_PDB: f64 = 0.20;
const P_TAINT_MAINT: f64 = 0.01;
const P_NOTREADY: f64 = 0.005;

/// `weighted(rng, choices)`: one `random()` against the running sum of the weights.
fn weighted<T: Copy>(rng: &mut PyRandom, choices: &[(T, f64)]) -> T {
    let r = rng.random();
    let mut acc = 0.0;
    for &(v, w) in choices {
        acc += w;
        if r < acc {
            return v;
        }
    }
    choices[choices.len() - 1].0
}

/// `replicas(rng)`: mostly small deployments, a long tail up to 50.
fn replicas(rng: &mut PyRandom) -> i64 {
    let r = rng.random();
    if r < 0.55 {
        rng.randint(2, 5)
    } else if r < 0.85 {
        rng.randint(6, 15)
    } else {
        rng.randint(16, 50)
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Pool {
    General,
    Batch,
    Legacy,
}

impl Pool {
    fn name(self) -> &'static str {
        match self {
            Pool::General => "general",
            Pool::Batch => "batch",
            Pool::Legacy => "legacy",
        }
    }
}

/// One entry of gen_large.py's `nodes` list (its unused `names` set is left out).
struct SimNode {
    name: String,
    zone: usize,
    pool: Pool,
    instance_type: &'static str,
    cpu: i64,
    mem: i64,
    used_cpu: i64,
    used_mem: i64,
    pods: i64,
    heat: f64,
    maint: bool,
    ready: bool,
}

/// The `kind` dict of a deployment.
#[derive(Clone, Copy)]
struct Kind {
    req_aff: bool,
    anti: bool,
    spread: bool,
    batch: bool,
    stack: bool,
    old: bool,
    pdb: bool,
}

/// One `pending` tuple: a deployment and the nodes its replicas were placed on.
struct Workload {
    name: String,
    ns: usize,
    reps: i64,
    cpu: i64,
    mem: i64,
    prio: i64,
    kind: Kind,
    placement: Vec<usize>,
}

/// The nodes with their heat distribution, for `hot_pick` and `place`.
struct Nodes {
    nodes: Vec<SimNode>,
    /// Running sums of the heats (`cum`); the total is `acc`.
    cum: Vec<f64>,
    acc: f64,
}

impl Nodes {
    /// `hot_pick(cands, cpu, mem)`: up to twelve heat-weighted tries for a node with room, then
    /// the least cpu-loaded of eight random candidates.
    fn hot_pick(&self, rng: &mut PyRandom, cands: Option<&[usize]>, cpu: i64, mem: i64) -> usize {
        for _ in 0..12 {
            let n = match cands {
                None => {
                    let x = rng.random() * self.acc;
                    self.cum.partition_point(|&c| c < x) // bisect_left
                }
                Some(cands) => {
                    // max(3 choices, key=heat): the first of equal maxima wins
                    let mut best = *rng.choice(cands);
                    for _ in 1..3 {
                        let n = *rng.choice(cands);
                        if self.nodes[n].heat > self.nodes[best].heat {
                            best = n;
                        }
                    }
                    best
                }
            };
            let node = &self.nodes[n];
            if (node.used_cpu + cpu) as f64 <= node.cpu as f64 * 0.95
                && (node.used_mem + mem) as f64 <= node.mem as f64 * 0.95
                && node.pods < 105
            {
                return n;
            }
        }
        // fall back to the least loaded of a sample; `cands or nodes`
        let load = |n: usize| self.nodes[n].used_cpu as f64 / self.nodes[n].cpu as f64;
        let draw = |rng: &mut PyRandom| match cands {
            Some(cands) if !cands.is_empty() => *rng.choice(cands),
            _ => rng.randrange(self.nodes.len() as u64) as usize,
        };
        let mut best = draw(rng);
        for _ in 1..8 {
            let n = draw(rng);
            if load(n) < load(best) {
                best = n;
            }
        }
        best
    }

    fn place(&mut self, n: usize, cpu: i64, mem: i64) {
        let node = &mut self.nodes[n];
        node.used_cpu += cpu;
        node.used_mem += mem;
        node.pods += 1;
    }
}

/// The profile of every reference cluster: descheduler's nine plugins.
fn reference_profile() -> Obj {
    let threshold = |v: i64| obj! { "cpu" => v, "memory" => v, "pods" => v };
    profile(
        "default",
        vec![
            ("RemovePodsViolatingNodeTaints", Obj::new()),
            (
                "RemovePodsViolatingNodeAffinity",
                obj! { "nodeAffinityType" => vec![Json::from("requiredDuringSchedulingIgnoredDuringExecution")] },
            ),
            ("RemovePodsViolatingInterPodAntiAffinity", Obj::new()),
            (
                "RemovePodsHavingTooManyRestarts",
                obj! { "podRestartThreshold" => 100, "includingInitContainers" => true },
            ),
            ("PodLifeTime", obj! { "maxPodLifeTimeSeconds" => 604_800 }),
            ("RemoveFailedPods", obj! { "minPodLifetimeSeconds" => 3600 }),
            ("RemoveDuplicates", Obj::new()),
            ("RemovePodsViolatingTopologySpreadConstraint", Obj::new()),
            (
                "LowNodeUtilization",
                obj! { "thresholds" => threshold(20), "targetThresholds" => threshold(50) },
            ),
        ],
    )
}

/// The Koordinator profile of the layered scenario: LowNodeLoad and CpuOrchestration with
/// Koordinator's defaults, apart from thresholds (LowNodeLoad has none by default) and the
/// anomaly detector, turned off (`consecutiveAbnormalities: 1`) so that every benchmark round
/// does the whole balance pass instead of stopping at the detector's gate.
fn koordinator_profile() -> Obj {
    let pct = |cpu: i64, memory: i64| obj! { "cpu" => cpu, "memory" => memory };
    profile(
        "koordinator",
        vec![
            (
                "LowNodeLoad",
                obj! {
                    "highThresholds" => pct(65, 80), "lowThresholds" => pct(35, 45),
                    "anomalyCondition" => obj! { "consecutiveAbnormalities" => 1 },
                },
            ),
            ("CpuOrchestration", Obj::new()),
        ],
    )
}

/// Writes the reference cluster of `size` to `out`, byte-identical to `gen_large.py`'s
/// `OUTDIR/<size>.json`. Objects are streamed one by one (through a buffer), so memory stays at
/// the generator's bookkeeping (node loads, placements, pod names), not the document.
pub fn write_scenario(size: Size, out: &mut impl Write) -> io::Result<()> {
    write(size, false, out)
}

/// [`write_scenario`] plus the Koordinator layer (see `koordinator`): a NodeMetric and a
/// NodeResourceTopology per node, cpuset pods, an `observedAt` and a second profile with
/// LowNodeLoad and CpuOrchestration. Named `perf-<size>-koordinator`.
pub fn write_koordinator_scenario(size: Size, out: &mut impl Write) -> io::Result<()> {
    write(size, true, out)
}

fn write(size: Size, koordinator: bool, out: &mut impl Write) -> io::Result<()> {
    let mut out = BufWriter::with_capacity(1 << 16, out);
    let n_nodes = size.nodes();
    let n_pods = size.pods() as i64;

    let mut head = if koordinator {
        format!(
            "{{\"name\":\"perf-{}-koordinator\",\"observedAt\":\"{}\",\"policy\":",
            size.name(),
            koordinator::OBSERVED_AT
        )
    } else {
        format!("{{\"name\":\"perf-{}\",\"policy\":", size.name())
    }
    .into_bytes();
    let mut profiles = vec![reference_profile()];
    if koordinator {
        profiles.push(koordinator_profile());
    }
    dump(&Json::Obj(policy(profiles)), Separators::Default, &mut head);
    head.extend_from_slice(
        br#","objects":{"apiVersion":"v1","kind":"List","metadata":{},"items":["#,
    );
    out.write_all(&head)?;

    let mut c = Cluster::new(size.seed(), &mut out);
    c.priority_class("batch-low", 100)?;
    c.priority_class("standard", 1000)?;
    c.priority_class("business-critical", 100_000)?;
    let namespaces: Vec<String> = (0..N_NAMESPACES).map(|i| format!("team-{i:02}")).collect();

    // ------------------------------------------------------------------------ nodes
    let mut nodes = Vec::with_capacity(n_nodes);
    for i in 0..n_nodes {
        let rng = &mut c.rng;
        let (instance_type, cores, gib) = weighted(rng, &NODE_TYPES);
        let r = rng.random();
        let pool = if r < 0.85 {
            Pool::General
        } else if r < 0.95 {
            Pool::Batch
        } else {
            Pool::Legacy
        };
        let heat = rng.lognormvariate(0.0, 0.9);
        let maint = rng.random() < P_TAINT_MAINT;
        let ready = rng.random() >= P_NOTREADY;
        nodes.push(SimNode {
            name: format!(
                "ip-10-{}-{}-{}.eu-west-1.compute.internal",
                (i >> 8) & 255,
                i & 255,
                (i * 37) % 250 + 1
            ),
            zone: i % 3,
            pool,
            instance_type,
            cpu: cores * 1000 - 200,
            mem: gib * 1024 - 1024,
            used_cpu: 0,
            used_mem: 0,
            pods: 0,
            heat,
            maint,
            ready,
        });
    }
    let indices_where = |nodes: &[SimNode], keep: &dyn Fn(&SimNode) -> bool| -> Vec<usize> {
        (0..nodes.len()).filter(|&i| keep(&nodes[i])).collect()
    };
    let by_zone: Vec<Vec<usize>> = (0..ZONES.len())
        .map(|z| indices_where(&nodes, &|n| n.zone == z))
        .collect();
    let general = indices_where(&nodes, &|n| n.pool == Pool::General);
    let batch = indices_where(&nodes, &|n| n.pool == Pool::Batch);
    let batch_or_none = Some(batch.as_slice()).filter(|b| !b.is_empty()); // by_pool["batch"] or None
    let mut cum = Vec::with_capacity(n_nodes);
    let mut acc = 0.0;
    for n in &nodes {
        acc += n.heat;
        cum.push(acc);
    }
    let mut layer =
        koordinator.then(|| Layer::new(size.seed(), nodes.iter().map(|n| (n.cpu + 200) / 1000)));
    let mut sim = Nodes { nodes, cum, acc };

    // ------------------------------------------------------------------- daemonsets
    let mut ds_pods = 0;
    for n in 0..n_nodes {
        sim.place(n, 100, 128);
        sim.place(n, 50, 64);
        ds_pods += 2;
    }
    if let Some(layer) = &mut layer {
        layer.daemon_pod_everywhere(100, 128);
        layer.daemon_pod_everywhere(50, 64);
    }

    // -------------------------------------------------------------------- workloads
    let n_failed = (n_pods as f64 * P_FAILED) as i64; // int(n_pods * P_FAILED)
    let mut budget = n_pods - ds_pods - n_failed;
    let mut d = 0usize;
    let mut pending = Vec::new();
    while budget > 0 {
        let rng = &mut c.rng;
        d += 1;
        let reps = replicas(rng).min(budget);
        let cpu = weighted(rng, &CPU_CHOICES);
        let mem = weighted(rng, &MEM_CHOICES);
        let prio = weighted(rng, &PRIORITY_CHOICES);
        let req_aff = rng.random() < P_REQ_AFFINITY;
        let anti = rng.random() < P_ANTI;
        let spread = rng.random() < P_SPREAD;
        let batch = rng.random() < P_BATCH;
        let stack = rng.random() < P_STACK;
        let old = rng.random() < P_OLD;
        let pdb = rng.random() < P_PDB;
        let kind = Kind {
            req_aff: req_aff && !batch,
            anti,
            spread,
            batch,
            stack,
            old,
            pdb,
        };
        let mut placement: Vec<usize> = Vec::with_capacity(reps as usize);
        let zone_rr = rng.randrange(3) as usize;
        for r_ in 0..reps as usize {
            let n = if kind.stack && r_ > 0 && rng.random() < 0.6 {
                placement[placement.len() - 1]
            } else if kind.batch {
                sim.hot_pick(rng, batch_or_none, cpu, mem)
            } else if kind.spread && rng.random() >= P_SPREAD_SKEWED {
                sim.hot_pick(rng, Some(&by_zone[(zone_rr + r_) % 3]), cpu, mem)
            } else if kind.req_aff && rng.random() >= P_MISPLACED_AFFINITY {
                sim.hot_pick(rng, Some(&general), cpu, mem)
            } else {
                sim.hot_pick(rng, None, cpu, mem)
            };
            let n = if kind.anti && placement.contains(&n) && rng.random() >= P_ANTI_VIOLATION {
                sim.hot_pick(rng, None, cpu, mem)
            } else {
                n
            };
            sim.place(n, cpu, mem);
            placement.push(n);
        }
        pending.push(Workload {
            name: format!("svc-{d:05}"),
            ns: d % N_NAMESPACES,
            reps,
            cpu,
            mem,
            prio,
            kind,
            placement,
        });
        budget -= reps;
    }
    let nodes = sim.nodes;

    // ---------------------------------------------------------------- write nodes
    for n in &nodes {
        let mut taints = Vec::new();
        if n.pool == Pool::Batch {
            taints
                .push(obj! { "key" => "dedicated", "value" => "batch", "effect" => "NoSchedule" });
        }
        if n.maint {
            taints.push(obj! { "key" => "maintenance", "value" => "kernel-upgrade", "effect" => "NoSchedule" });
        }
        let cores = (n.cpu + 200) / 1000;
        let gib = (n.mem + 1024) / 1024;
        c.node(NodeArgs {
            name: &n.name,
            cpu: cores.to_string(),
            memory: format!("{gib}Gi"),
            zone: ZONES[n.zone],
            instance_type: n.instance_type,
            labels: obj! { "pool" => n.pool.name(), "node-role.kubernetes.io/worker" => "" },
            taints,
            ready: n.ready,
            allocatable_cpu: format!("{}m", n.cpu),
            allocatable_memory: format!("{}Mi", n.mem),
        })?;
    }

    // ----------------------------------------------------------------- write pods
    let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
    c.daemonset(
        "kube-proxy",
        "kube-system",
        &names,
        ("100m", "128Mi"),
        Some((SYSTEM_CLUSTER_CRITICAL + 1000, "system-node-critical")),
    )?;
    c.daemonset("node-exporter", "monitoring", &names, ("50m", "64Mi"), None)?;
    for w in &pending {
        let (name, ns) = (w.name.as_str(), namespaces[w.ns].as_str());
        let mut lbl = obj! { "app" => name, "app.kubernetes.io/part-of" => ns };
        let priority_class = match w.prio {
            100 => Some("batch-low"),
            1000 => Some("standard"),
            100_000 => Some("business-critical"),
            _ => None,
        };
        let match_app = || obj! { "matchLabels" => obj! { "app" => name } };
        let mut aff = Obj::new();
        if w.kind.req_aff {
            aff.set(
                "nodeAffinity",
                obj! { "requiredDuringSchedulingIgnoredDuringExecution" => obj! {
                    "nodeSelectorTerms" => vec![obj! { "matchExpressions" => vec![obj! {
                        "key" => "pool", "operator" => "In", "values" => vec![Json::from("general")],
                    }] }],
                } },
            );
        }
        if w.kind.anti {
            aff.set(
                "podAntiAffinity",
                obj! { "requiredDuringSchedulingIgnoredDuringExecution" => vec![obj! {
                    "labelSelector" => match_app(), "topologyKey" => "kubernetes.io/hostname",
                }] },
            );
        }
        let mut tsc = Vec::new();
        if w.kind.spread {
            tsc.push(obj! {
                "maxSkew" => 1, "topologyKey" => "topology.kubernetes.io/zone",
                "whenUnsatisfiable" => "DoNotSchedule", "labelSelector" => match_app(),
            });
        }
        let mut tolerations = Vec::new();
        if w.kind.batch {
            tolerations.push(obj! {
                "key" => "dedicated", "operator" => "Equal", "value" => "batch", "effect" => "NoSchedule",
            });
        }
        let rs_hash = format!("{:09x}", c.rng.getrandbits(36));
        let rs = format!("{name}-{rs_hash}");
        lbl.set("pod-template-hash", rs_hash.as_str());
        let minor = c.rng.randint(0, 30);
        let patch = c.rng.randint(0, 9);
        let image = format!("registry.example.com/{ns}/{name}:1.{minor}.{patch}");
        let owner = owner("ReplicaSet", &rs, ns, "apps/v1");
        for &n in &w.placement {
            let created = if w.kind.old {
                c.next_old()
            } else {
                c.next_young()
            };
            let mut restarts = Vec::new();
            let mut waiting = Vec::new();
            if c.rng.random() < P_RESTARTS {
                restarts.push((name, c.rng.randint(101, 900)));
                if c.rng.random() < 0.5 {
                    waiting.push((name, "CrashLoopBackOff"));
                }
            }
            let pod_name = format!("{rs}-{}", suffix(&mut c.rng, 5)); // c_suffix(rng)
            let requests =
                obj! { "cpu" => format!("{}m", w.cpu), "memory" => format!("{}Mi", w.mem) };
            let mut args = PodArgs::new(
                vec![Container {
                    name,
                    image: &image,
                    requests,
                }],
                &lbl,
            );
            args.owner = Some(&owner);
            args.created = Some(created);
            args.priority = Some(w.prio);
            args.priority_class = priority_class;
            args.affinity = Some(&aff);
            args.tsc = Some(&tsc);
            args.tolerations = &tolerations;
            args.restarts = &restarts;
            args.waiting = &waiting;
            let cpuset = match &mut layer {
                Some(layer) if Layer::is_cpuset_workload(w.cpu) => Some(layer.cpuset_pod(n, &lbl)),
                _ => None,
            };
            if let Some(cpuset) = &cpuset {
                args.labels = &cpuset.labels;
                args.annotations = Some(&cpuset.annotations);
            }
            let pod_name = c.pod(pod_name, ns, &nodes[n].name, args)?;
            if let Some(layer) = &mut layer {
                layer.pod(n, ns, &pod_name, w.cpu, w.mem);
            }
        }
        if w.kind.pdb {
            let max_unavailable = (w.reps / 4).max(1);
            c.pdb(
                &format!("{name}-pdb"),
                ns,
                obj! { "app" => name },
                max_unavailable,
                (w.reps / 4).max(0),
                w.reps,
                w.reps - max_unavailable,
                w.reps,
            )?;
        }
    }
    // failed job pods (their share was taken out of the deployment budget above)
    for i in 0..n_failed as usize {
        let n = c.rng.randrange(nodes.len() as u64) as usize;
        let job = format!("cron-{:02}-{}", i % 97, 28_000_000 + i);
        let code = *c.rng.choice(&[1, 2, 137]);
        let reason = *c.rng.choice(&["Error", "OOMKilled"]);
        c.job_pod(
            &job,
            &namespaces[i % N_NAMESPACES],
            &nodes[n].name,
            Phase::Failed,
            &[("main", (code, reason))],
            ("100m", "128Mi"),
        )?;
    }
    debug_assert_eq!(c.pods, size.pods(), "the budget accounts for every pod");
    if let Some(layer) = &layer {
        for (i, n) in nodes.iter().enumerate() {
            c.object(layer.node_metric(i, &n.name, (n.cpu + 200) / 1000))?;
            c.object(layer.topology(i, &n.name))?;
        }
    }
    c.finish()?;
    drop(c);
    out.flush()
}

#[cfg(test)]
mod tests;
