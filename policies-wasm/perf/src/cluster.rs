//! A synthetic cluster the size of Rebalancer's reference cluster (150,000 pods on 5,000 nodes),
//! built straight into the snapshot model, plus the variants some policies need (required self
//! anti-affinity, zone spread constraints).
//!
//! Owns the cluster's shape only; must not run policies. The shape follows the bench
//! generator's clusters: ~10% of the nodes tainted `dedicated=batch:NoSchedule` (and pooled
//! `pool=batch`), ReplicaSets of 2–50 replicas spread at random (so many land twice on a node),
//! some pinned to a pool by required node affinity, two DaemonSet pods per node pinned by
//! `matchFields metadata.name`, cpu/memory requests on every container, and every 20th node freshly
//! added (DaemonSet pods only).

use rebalancer_policy_sdk::build::SnapshotBuilder;
use rebalancer_policy_sdk::model::{
    self, Affinity, ArchiveBuffer, Container, ContainerKind, KeyValue, LabelSelector, Node,
    NodeSelectorTerm, OwnerRef, Pod, PodAffinityTerm, PodPhase, QosClass, Quantity, Requirement,
    SelectorOperator, Snapshot, StrId, Taint, TaintEffect, Toleration, TolerationOperator,
    TopologySpreadConstraint,
};

pub const NODES: usize = 5_000;
pub const PODS: usize = 150_000;

const MI: i64 = 1024 * 1024 * 1000; // one MiB in milli-bytes

/// Deterministic xorshift64* generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The reference-sized cluster as an archive (8-byte aligned bytes).
pub fn archive() -> ArchiveBuffer {
    to_archive(&snapshot(NODES, PODS))
}

/// A (possibly modified) snapshot as an archive.
pub fn to_archive(snapshot: &Snapshot) -> ArchiveBuffer {
    model::to_bytes(snapshot).expect("snapshot archives")
}

pub fn snapshot(node_count: usize, pod_count: usize) -> Snapshot {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut b = SnapshotBuilder::new(1, 1_700_000_000_000);
    let cpu = b.intern("cpu");
    let memory = b.intern("memory");
    let pods_res = b.intern("pods");
    let hostname = b.intern("kubernetes.io/hostname");
    let pool = b.intern("pool");
    let general = b.intern("general");
    let batch = b.intern("batch");
    let dedicated = b.intern("dedicated");
    let not_ready = b.intern("node.kubernetes.io/not-ready");
    let unreachable = b.intern("node.kubernetes.io/unreachable");
    let metadata_name = b.intern("metadata.name");
    let replica_set = b.intern("ReplicaSet");
    let daemon_set = b.intern("DaemonSet");
    let app = b.intern("app");

    let mut node_names = Vec::with_capacity(node_count);
    let mut batch_nodes = Vec::new();
    let mut general_nodes = Vec::new();
    for i in 0..node_count {
        let name = b.intern(&format!("node-{i:05}"));
        node_names.push(name);
        let is_batch = i.is_multiple_of(10);
        if is_batch {
            batch_nodes.push(i);
        } else if i % 20 != 5 {
            // Every 20th node is freshly added: no workload pods yet, so underutilized.
            general_nodes.push(i);
        }
        let node = Node {
            name,
            uid: format!("node-uid-{i}"),
            labels: vec![
                KeyValue {
                    key: hostname,
                    value: name,
                },
                KeyValue {
                    key: pool,
                    value: if is_batch { batch } else { general },
                },
            ],
            taints: if is_batch {
                vec![Taint {
                    key: dedicated,
                    value: batch,
                    effect: TaintEffect::NoSchedule,
                }]
            } else {
                Vec::new()
            },
            allocatable: vec![
                Quantity {
                    resource: cpu,
                    milli: 15_800,
                },
                Quantity {
                    resource: memory,
                    milli: 64_512 * MI,
                },
                Quantity {
                    resource: pods_res,
                    milli: 110_000,
                },
            ],
            unschedulable: i % 100 == 7,
            ready: i % 250 != 3,
            creation_ms: 1_600_000_000_000,
        };
        b.snapshot_mut().nodes.push(node);
    }

    let standard_tolerations = vec![
        Toleration {
            key: not_ready,
            operator: TolerationOperator::Exists,
            value: 0,
            effect: Some(TaintEffect::NoExecute),
        },
        Toleration {
            key: unreachable,
            operator: TolerationOperator::Exists,
            value: 0,
            effect: Some(TaintEffect::NoExecute),
        },
    ];
    let mut pods: Vec<Pod> = Vec::with_capacity(pod_count);

    // Two DaemonSet pods per node.
    for (ds, ds_name) in ["kube-proxy", "node-exporter"].iter().enumerate() {
        let owner_name = b.intern(ds_name);
        let owner_uid = b.intern(&format!("ds-uid-{ds}"));
        let image = b.intern(&format!("registry.example.com/{ds_name}:1.0"));
        for (i, &node_name) in node_names.iter().enumerate() {
            if pods.len() >= pod_count {
                break;
            }
            pods.push(Pod {
                name: format!("{ds_name}-{i}"),
                uid: format!("{ds_name}-uid-{i}"),
                namespace: b.intern("kube-system"),
                node_name,
                owner_refs: vec![OwnerRef {
                    kind: daemon_set,
                    name: owner_name,
                    uid: owner_uid,
                    controller: true,
                }],
                labels: vec![KeyValue {
                    key: app,
                    value: owner_name,
                }],
                priority: Some(2_000_001_000),
                qos: QosClass::Burstable,
                phase: PodPhase::Running,
                requests: vec![
                    Quantity {
                        resource: cpu,
                        milli: 100,
                    },
                    Quantity {
                        resource: memory,
                        milli: 128 * MI,
                    },
                ],
                tolerations: vec![Toleration {
                    key: 0,
                    operator: TolerationOperator::Exists,
                    value: 0,
                    effect: None,
                }],
                affinity: Affinity {
                    node_required: Some(vec![NodeSelectorTerm {
                        match_expressions: Vec::new(),
                        match_fields: vec![Requirement {
                            key: metadata_name,
                            operator: SelectorOperator::In,
                            values: vec![node_name],
                        }],
                    }]),
                    ..Affinity::default()
                },
                containers: vec![Container {
                    kind: ContainerKind::App,
                    name: owner_name,
                    image,
                    ready: true,
                    ..Container::default()
                }],
                start_ms: Some(1_600_000_000_000),
                creation_ms: 1_600_000_000_000,
                ..Pod::default()
            });
        }
    }

    // ReplicaSets until the pod budget is spent.
    let namespaces: Vec<u32> = (0..40).map(|i| b.intern(&format!("team-{i:02}"))).collect();
    let mut rs = 0usize;
    while pods.len() < pod_count {
        let replicas = 2 + rng.below(49) as usize;
        let namespace = namespaces[rs % namespaces.len()];
        let owner_name = b.intern(&format!("app-{rs:05}-7d9c5b8f4"));
        let owner_uid = b.intern(&format!("rs-uid-{rs}"));
        let image = b.intern(&format!("registry.example.com/app-{rs:05}:1.{}", rs % 7));
        let sidecar = rs
            .is_multiple_of(3)
            .then(|| b.intern("registry.example.com/envoy:1.30"));
        let on_batch = rs.is_multiple_of(10);
        let pinned = rs % 10 == 1;
        let cpu_req = 50 + 50 * rng.below(8) as i64;
        let mem_req = (128 * (1 + rng.below(8)) as i64) * MI;
        let mut tolerations = standard_tolerations.clone();
        if on_batch {
            tolerations.insert(
                0,
                Toleration {
                    key: dedicated,
                    operator: TolerationOperator::Equal,
                    value: batch,
                    effect: Some(TaintEffect::NoSchedule),
                },
            );
        }
        let affinity = if pinned {
            Affinity {
                node_required: Some(vec![NodeSelectorTerm {
                    match_expressions: vec![Requirement {
                        key: pool,
                        operator: SelectorOperator::In,
                        values: vec![general],
                    }],
                    match_fields: Vec::new(),
                }]),
                ..Affinity::default()
            }
        } else {
            Affinity::default()
        };
        for r in 0..replicas {
            if pods.len() >= pod_count {
                break;
            }
            let node = if on_batch {
                batch_nodes[rng.below(batch_nodes.len() as u64) as usize]
            } else {
                general_nodes[rng.below(general_nodes.len() as u64) as usize]
            };
            let mut containers = vec![Container {
                kind: ContainerKind::App,
                name: app,
                image,
                ready: true,
                ..Container::default()
            }];
            if let Some(sidecar) = sidecar {
                containers.push(Container {
                    kind: ContainerKind::App,
                    name: b.intern("envoy"),
                    image: sidecar,
                    ready: true,
                    ..Container::default()
                });
            }
            pods.push(Pod {
                name: format!("app-{rs:05}-7d9c5b8f4-{r:03}"),
                uid: format!("pod-uid-{rs}-{r}"),
                namespace,
                node_name: node_names[node],
                owner_refs: vec![OwnerRef {
                    kind: replica_set,
                    name: owner_name,
                    uid: owner_uid,
                    controller: true,
                }],
                labels: vec![KeyValue {
                    key: app,
                    value: owner_name,
                }],
                priority: if rs.is_multiple_of(5) {
                    None
                } else {
                    Some((rs % 3) as i32 * 100)
                },
                qos: match rs % 3 {
                    0 => QosClass::BestEffort,
                    1 => QosClass::Burstable,
                    _ => QosClass::Guaranteed,
                },
                phase: if rng.below(100) == 0 {
                    PodPhase::Succeeded
                } else {
                    PodPhase::Running
                },
                requests: vec![
                    Quantity {
                        resource: cpu,
                        milli: cpu_req,
                    },
                    Quantity {
                        resource: memory,
                        milli: mem_req,
                    },
                ],
                tolerations: tolerations.clone(),
                affinity: affinity.clone(),
                containers,
                start_ms: Some(1_600_000_000_000),
                creation_ms: 1_600_000_000_000,
                ..Pod::default()
            });
        }
        rs += 1;
    }
    b.snapshot_mut().pods = pods;
    b.finish()
}

/// The ReplicaSet number of a workload pod (`app-NNNNN-…`); `None` for DaemonSet pods.
fn replica_set(pod: &Pod) -> Option<usize> {
    pod.name
        .strip_prefix("app-")
        .and_then(|rest| rest.get(..5))
        .and_then(|n| n.parse::<usize>().ok())
}

/// A selector on the pod's own `app` label (its ReplicaSet).
fn own_app_selector(pod: &Pod, app: StrId) -> LabelSelector {
    let owner = pod
        .labels
        .iter()
        .find(|kv| kv.key == app)
        .expect("app label")
        .value;
    LabelSelector {
        match_labels: vec![KeyValue {
            key: app,
            value: owner,
        }],
        match_expressions: Vec::new(),
    }
}

/// Intern `s` into a finished snapshot (appended when new; call [`resort_strings`] after).
fn intern(snapshot: &mut Snapshot, s: &str) -> StrId {
    match snapshot.strings.iter().position(|x| x == s) {
        Some(i) => i as StrId,
        None => {
            snapshot.strings.push(s.to_owned());
            (snapshot.strings.len() - 1) as StrId
        }
    }
}

/// Rebuild the sorted string index after [`intern`] added strings (a no-op when it added none).
fn resort_strings(snapshot: &mut Snapshot) {
    if snapshot.strings_sorted.len() == snapshot.strings.len() {
        return;
    }
    let strings = &snapshot.strings;
    let mut sorted: Vec<StrId> = (0..strings.len() as StrId).collect();
    sorted.sort_unstable_by(|&a, &b| strings[a as usize].cmp(&strings[b as usize]));
    snapshot.strings_sorted = sorted;
}

/// Required self anti-affinity per host (`kubernetes.io/hostname`, on the app label) on every
/// `every`-th ReplicaSet, as the bench generator gives 5% of its deployments (`every` = 20).
/// Returns how many pods got the term.
pub fn with_self_anti_affinity(snapshot: &mut Snapshot, every: usize) -> usize {
    let app = intern(snapshot, "app");
    let hostname = intern(snapshot, "kubernetes.io/hostname");
    resort_strings(snapshot);
    let mut with_terms = 0;
    for pod in &mut snapshot.pods {
        if replica_set(pod).is_none_or(|rs| rs % every != 0) {
            continue;
        }
        pod.affinity.pod_anti_affinity_required = vec![PodAffinityTerm {
            label_selector: Some(own_app_selector(pod, app)),
            topology_key: hostname,
            ..PodAffinityTerm::default()
        }];
        with_terms += 1;
    }
    with_terms
}

/// Three zones (`topology.kubernetes.io/zone`, nodes round-robin) and a zone spread constraint
/// (maxSkew 1, on the app label) on every `every`-th ReplicaSet, placed without regard to zones
/// (`every` = 7: about the 15% of deployments the bench generator gives one). Returns how many
/// pods got the constraint.
pub fn with_zone_spread(snapshot: &mut Snapshot, every: usize) -> usize {
    let zone = intern(snapshot, "topology.kubernetes.io/zone");
    let zones = ["eu-west-1a", "eu-west-1b", "eu-west-1c"].map(|z| intern(snapshot, z));
    let app = intern(snapshot, "app");
    resort_strings(snapshot);
    for (i, node) in snapshot.nodes.iter_mut().enumerate() {
        node.labels.push(KeyValue {
            key: zone,
            value: zones[i % 3],
        });
    }
    let mut with_spread = 0;
    for pod in &mut snapshot.pods {
        if replica_set(pod).is_none_or(|rs| rs % every != 0) {
            continue;
        }
        pod.topology_spread = vec![TopologySpreadConstraint {
            max_skew: 1,
            topology_key: zone,
            label_selector: Some(own_app_selector(pod, app)),
            ..TopologySpreadConstraint::default()
        }];
        with_spread += 1;
    }
    with_spread
}
