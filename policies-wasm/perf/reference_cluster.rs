//! A synthetic cluster the size of Rebalancer's reference cluster (150,000 pods on 5,000 nodes),
//! built straight into the snapshot model, and a pass-through host, for the policies' native
//! performance tests.
//!
//! Included by path (`#[path = "../../perf/reference_cluster.rs"]`) from the `perf` test modules of
//! the policy crates, so it is compiled only with their tests. The shape follows the bench
//! generator's clusters: ~10% of the nodes tainted `dedicated=batch:NoSchedule` (and pooled
//! `pool=batch`), ReplicaSets of 2–50 replicas spread at random (so many land twice on a node),
//! some pinned to a pool by required node affinity, two DaemonSet pods per node pinned by
//! `matchFields metadata.name`, cpu/memory requests on every container, and every 20th node freshly
//! added (DaemonSet pods only).

#![allow(dead_code)]

use rebalancer_policy_sdk::build::SnapshotBuilder;
use rebalancer_policy_sdk::model::{
    self, Affinity, Container, ContainerKind, KeyValue, Node, NodeSelectorTerm, OwnerRef, Pod,
    PodPhase, QosClass, Quantity, Requirement, SelectorOperator, Snapshot, Taint, TaintEffect,
    Toleration, TolerationOperator,
};
use rebalancer_policy_sdk::{Host, LogLevel, Refusal};

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
pub fn archive() -> impl std::ops::Deref<Target = [u8]> {
    model::to_bytes(&snapshot(NODES, PODS)).expect("snapshot archives")
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

/// A host that admits everything: Ready nodes, every pod passes both filters, every proposal is
/// accepted. Measures the policy alone.
#[derive(Debug, Default)]
pub struct PassThroughHost {
    pub ready_nodes: Vec<u32>,
    pub proposals: usize,
    pub host_calls: usize,
}

impl Host for PassThroughHost {
    fn nodes(&mut self) -> Vec<u32> {
        self.ready_nodes.clone()
    }
    fn filter(&mut self, pods: &[u32]) -> Vec<u32> {
        self.host_calls += 1;
        pods.to_vec()
    }
    fn pre_eviction_filter(&mut self, pods: &[u32]) -> Vec<u32> {
        self.host_calls += 1;
        pods.to_vec()
    }
    fn propose_eviction(&mut self, _pod: u32, _reason: &str) -> Result<(), Refusal> {
        self.proposals += 1;
        Ok(())
    }
    fn node_fit(&mut self, _pod: u32, candidates: &[u32]) -> Vec<u32> {
        candidates.to_vec()
    }
    fn object_json(&mut self, _kind: &str, _index: u32) -> Option<String> {
        None
    }
    fn log(&mut self, _level: LogLevel, _message: &str) {}
}
