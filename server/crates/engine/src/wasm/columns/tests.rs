//! The `columns` import as a guest sees it, called on a store set up as an evaluation's: the
//! catalog, sentinels, enum codes, errors and the detail accessors on a small cluster whose every
//! value is known. (A whole guest reading only `columns` runs in `wasm::tests`.)

use std::sync::{Arc, OnceLock};

use rebalancer_cluster::{self as cluster, ClusterSnapshot};
use rebalancer_policy_sdk::evictor::{DefaultEvictorArgs, EvictorConfig, Limits, RunState};
use serde_json::json;
use wasmtime::Store;

use super::super::host::{HostState, test_store};
use super::super::{Engine, EngineConfig, EvalSession};
use super::wit::{self, Host as _};
use super::{ABSENT_S64, ABSENT_U32, CATALOG, MIN_IDS_PER_CALL};

fn engine() -> &'static Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE.get_or_init(|| Engine::new(EngineConfig::default()).expect("engine"))
}

const NOW_MS: i64 = 1_700_000_000_000;

/// Two nodes (one tainted, labelled and measured), a namespace with labels, a PDB, a priority
/// class, and three pods: `web-0` (everything set), `web-1` (bound, few fields), `pending`
/// (unscheduled, no owner, nothing measured).
fn snapshot() -> Arc<ClusterSnapshot> {
    let items = vec![
        json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "node-a", "uid": "uid-a", "creationTimestamp": "2023-01-01T00:00:00Z",
                         "labels": {"zone": "z1", "disk": "ssd"},
                         "annotations": {"note": "hello"}},
            "spec": {"taints": [{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}),
        json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "node-b", "uid": "uid-b", "labels": {"zone": "z2"}},
            "spec": {"unschedulable": true},
            "status": {"allocatable": {"cpu": "2"},
                       "conditions": [{"type": "Ready", "status": "False"}]}}),
        json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "shop", "labels": {"team": "payments"}}}),
        json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "web-pdb", "namespace": "shop"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "minAvailable": 1},
            "status": {"disruptionsAllowed": 1, "currentHealthy": 2, "desiredHealthy": 1,
                       "expectedPods": 2}}),
        json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": "high"}, "value": 1000}),
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web-0", "namespace": "shop", "uid": "uid-web-0",
                "creationTimestamp": "2023-11-14T00:00:00Z",
                "labels": {"app": "web", "tier": "front"},
                "annotations": {"owner": "me"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web",
                                     "uid": "rs-web", "controller": true}]},
            "spec": {"nodeName": "node-a", "priority": 1000, "priorityClassName": "high",
                "nodeSelector": {"disk": "ssd"},
                "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "db",
                                 "effect": "NoSchedule"}, {"operator": "Exists"}],
                "affinity": {
                    "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [
                            {"key": "zone", "operator": "In", "values": ["z1", "z2"]}]}]}},
                    "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": {"matchLabels": {"app": "web"}},
                         "topologyKey": "kubernetes.io/hostname"}]}},
                "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone",
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]}}],
                "volumes": [{"name": "scratch", "emptyDir": {}},
                            {"name": "data", "persistentVolumeClaim": {"claimName": "web-data"}}],
                "initContainers": [{"name": "init", "image": "busybox"}],
                "containers": [{"name": "app", "image": "nginx",
                    "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}}}]},
            "status": {"phase": "Running", "startTime": "2023-11-14T00:01:00Z",
                "conditions": [{"type": "Ready", "status": "True",
                                "lastTransitionTime": "2023-11-14T00:02:00Z"}],
                "initContainerStatuses": [{"name": "init", "restartCount": 1, "ready": true,
                    "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}],
                "containerStatuses": [{"name": "app", "restartCount": 3, "ready": true,
                    "state": {"running": {}}}]}}),
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web-1", "namespace": "shop", "uid": "uid-web-1",
                "creationTimestamp": "2023-11-13T00:00:00Z", "labels": {"app": "web"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web",
                                     "uid": "rs-web", "controller": true}]},
            "spec": {"nodeName": "node-a", "containers": [{"name": "app", "image": "nginx",
                     "resources": {"requests": {"cpu": "1"}}}]},
            "status": {"phase": "Running"}}),
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "pending", "namespace": "batch", "uid": "uid-pending",
                "creationTimestamp": "2023-11-14T12:00:00Z"},
            "spec": {"containers": [{"name": "job", "image": "busybox"}]},
            "status": {"phase": "Pending"}}),
        json!({"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric",
            "metadata": {"name": "node-a"},
            "spec": {"metricCollectPolicy": {"aggregateDurationSeconds": 300}},
            "status": {"updateTime": "2023-11-14T22:00:00Z",
                "nodeMetric": {"nodeUsage": {"resources": {"cpu": "1500m", "memory": "2Gi"}},
                               "systemUsage": {"resources": {"cpu": "100m"}}},
                "podsMetric": [{"namespace": "shop", "name": "web-0",
                                "podUsage": {"resources": {"cpu": "200m"}}}]}}),
    ];
    let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
    let objects = cluster::parse_list(list.to_string().as_bytes(), cluster::Format::Json)
        .expect("the test cluster parses");
    Arc::new(cluster::build_snapshot(&objects, 1, NOW_MS).expect("snapshot"))
}

fn store(snapshot: &Arc<ClusterSnapshot>) -> Store<HostState> {
    let cluster = snapshot.cluster();
    let config =
        EvictorConfig::resolve(&DefaultEvictorArgs::default(), cluster).expect("default evictor");
    let session = EvalSession {
        snapshot: snapshot.clone(),
        index: snapshot.index(),
        config: Arc::new(config),
        nodes: Arc::new(cluster.nodes().map(|n| n.id).collect()),
        state: RunState::new(cluster, Limits::default()),
        plugin: "TestColumns".into(),
        plugin_set: "default".into(),
        scope: Default::default(),
    };
    test_store(engine(), Some(session), 3)
}

/// Row ids by name, and string ids by text, of the test snapshot.
struct Ids {
    snapshot: Arc<ClusterSnapshot>,
}

impl Ids {
    fn pod(&self, name: &str) -> u32 {
        self.snapshot
            .cluster()
            .pods()
            .find(|p| p.name() == name)
            .unwrap()
            .id
    }
    fn node(&self, name: &str) -> u32 {
        self.snapshot
            .cluster()
            .nodes()
            .find(|n| n.name() == name)
            .unwrap()
            .id
    }
    fn s(&self, text: &str) -> u32 {
        self.snapshot.cluster().lookup(text).expect(text)
    }
}

fn u32s(state: &mut HostState, table: &str, name: &str) -> Vec<u32> {
    state
        .column_u32(table.into(), name.into())
        .unwrap()
        .unwrap()
}

fn s64s(state: &mut HostState, table: &str, name: &str) -> Vec<i64> {
    state
        .column_s64(table.into(), name.into())
        .unwrap()
        .unwrap()
}

#[test]
fn every_catalog_column_is_served_with_one_value_per_row_and_its_kind() {
    let snapshot = snapshot();
    let mut store = store(&snapshot);
    let state = store.data_mut();
    let listed = state.columns().unwrap();
    assert_eq!(listed.len(), CATALOG.len());
    for info in listed {
        let rows = state.row_count(info.table.clone()).unwrap().unwrap() as usize;
        // A family is asked for with a key some object uses and one none uses.
        let names = match info.name.split_once(":<") {
            Some((family, _)) => vec![format!("{family}:cpu"), format!("{family}:no-such-key")],
            None => vec![info.name.clone()],
        };
        for name in names {
            let (t, n) = (info.table.clone(), name.clone());
            let len = match info.kind {
                wit::ColumnType::U32 | wit::ColumnType::StringId => state
                    .column_u32(t.clone(), n.clone())
                    .unwrap()
                    .map(|v| v.len()),
                wit::ColumnType::S64 => state
                    .column_s64(t.clone(), n.clone())
                    .unwrap()
                    .map(|v| v.len()),
                wit::ColumnType::Text => state
                    .column_text(t.clone(), n.clone())
                    .unwrap()
                    .map(|v| v.len()),
            };
            assert_eq!(len, Ok(rows), "{t}/{n}");
            // Asked for with a function of another kind: refused, naming the one to use.
            let wrong = match info.kind {
                wit::ColumnType::S64 => {
                    state.column_text(t.clone(), n.clone()).unwrap().map(|_| ())
                }
                _ => state.column_s64(t.clone(), n.clone()).unwrap().map(|_| ()),
            };
            assert!(wrong.unwrap_err().contains("use column-"), "{t}/{n}");
        }
        assert!(!info.description.is_empty());
    }
    for (table, rows) in [
        ("nodes", 2),
        ("pods", 3),
        ("namespaces", 1),
        ("owners", 1),
        ("pdbs", 1),
        ("priority-classes", 1),
        ("pvcs", 0),
    ] {
        assert_eq!(state.row_count(table.into()).unwrap(), Ok(rows), "{table}");
    }
}

#[test]
fn the_contract_columns_hold_the_values_with_their_sentinels_and_codes() {
    let snapshot = snapshot();
    let ids = Ids {
        snapshot: snapshot.clone(),
    };
    let mut store = store(&snapshot);
    let state = store.data_mut();
    let (web0, web1, pending) = (ids.pod("web-0"), ids.pod("web-1"), ids.pod("pending"));
    let (a, b) = (ids.node("node-a"), ids.node("node-b"));
    let at = |v: &[u32], row: u32| v[row as usize];
    let at64 = |v: &[i64], row: u32| v[row as usize];

    let names = u32s(state, "nodes", "name");
    assert_eq!(
        (at(&names, a), at(&names, b)),
        (ids.s("node-a"), ids.s("node-b"))
    );
    assert_eq!(u32s(state, "nodes", "ready")[a as usize], 1);
    assert_eq!(u32s(state, "nodes", "ready")[b as usize], 0);
    assert_eq!(u32s(state, "nodes", "unschedulable")[b as usize], 1);
    let cpu = s64s(state, "nodes", "allocatable:cpu");
    assert_eq!((at64(&cpu, a), at64(&cpu, b)), (4000, 2000));
    let memory = s64s(state, "nodes", "allocatable:memory");
    assert_eq!(at64(&memory, b), ABSENT_S64, "node-b does not list memory");
    let usage = s64s(state, "nodes", "usage:cpu");
    assert_eq!((at64(&usage, a), at64(&usage, b)), (1500, ABSENT_S64));
    assert_eq!(s64s(state, "nodes", "system-usage:cpu")[a as usize], 100);
    assert_eq!(u32s(state, "nodes", "usage-source")[a as usize], 1);
    assert_eq!(s64s(state, "nodes", "usage-window-ms")[a as usize], 300_000);
    let requested = s64s(state, "nodes", "requested:cpu");
    assert_eq!((at64(&requested, a), at64(&requested, b)), (1250, 0));
    assert_eq!(u32s(state, "nodes", "active-pods")[a as usize], 2);
    let zone = u32s(state, "nodes", "label:zone");
    assert_eq!((at(&zone, a), at(&zone, b)), (ids.s("z1"), ids.s("z2")));
    let disk = u32s(state, "nodes", "label:disk");
    assert_eq!(at(&disk, b), ABSENT_U32);
    assert_eq!(
        u32s(state, "nodes", "label:never-used-key"),
        [ABSENT_U32; 2]
    );
    assert_eq!(
        u32s(state, "nodes", "annotation:note")[a as usize],
        ids.s("hello")
    );

    let text = |state: &mut HostState, name: &str| {
        state
            .column_text("pods".into(), name.into())
            .unwrap()
            .unwrap()
    };
    assert_eq!(text(state, "name")[web0 as usize], "web-0");
    assert_eq!(text(state, "uid")[pending as usize], "uid-pending");
    let namespace = u32s(state, "pods", "namespace");
    assert_eq!(
        (at(&namespace, web0), at(&namespace, pending)),
        (ids.s("shop"), ids.s("batch"))
    );
    let ns_row = u32s(state, "pods", "namespace-row");
    assert_eq!((at(&ns_row, web0), at(&ns_row, pending)), (0, ABSENT_U32));
    let node = u32s(state, "pods", "node");
    assert_eq!((at(&node, web0), at(&node, pending)), (a, ABSENT_U32));
    let owner = u32s(state, "pods", "owner");
    assert_eq!(
        (at(&owner, web0), at(&owner, web1), at(&owner, pending)),
        (0, 0, ABSENT_U32)
    );
    assert_eq!(u32s(state, "owners", "kind"), [ids.s("ReplicaSet")]);
    assert_eq!(u32s(state, "owners", "name"), [ids.s("web")]);
    let phase = u32s(state, "pods", "phase");
    assert_eq!((at(&phase, web0), at(&phase, pending)), (1, 0));
    let qos = u32s(state, "pods", "qos");
    assert_eq!(
        (at(&qos, web0), at(&qos, pending)),
        (1, 0),
        "Burstable, BestEffort"
    );
    let created = s64s(state, "pods", "creation-ms");
    assert_eq!(at64(&created, web0), 1_699_920_000_000);
    let start = s64s(state, "pods", "start-ms");
    assert_eq!(
        (at64(&start, web0), at64(&start, web1)),
        (1_699_920_060_000, ABSENT_S64)
    );
    assert_eq!(s64s(state, "pods", "deletion-ms"), [ABSENT_S64; 3]);
    let priority = s64s(state, "pods", "priority");
    assert_eq!(
        (at64(&priority, web0), at64(&priority, pending)),
        (1000, ABSENT_S64)
    );
    assert_eq!(
        u32s(state, "pods", "priority-class")[web0 as usize],
        ids.s("high")
    );
    assert_eq!(
        s64s(state, "pods", "restarts")[web0 as usize],
        4,
        "init 1 + app 3"
    );
    let request = s64s(state, "pods", "request:cpu");
    assert_eq!(
        (
            at64(&request, web0),
            at64(&request, web1),
            at64(&request, pending)
        ),
        (250, 1000, 0)
    );
    assert_eq!(s64s(state, "pods", "request:no-such-resource"), [0; 3]);
    let usage = s64s(state, "pods", "usage:cpu");
    assert_eq!((at64(&usage, web0), at64(&usage, web1)), (200, ABSENT_S64));
    let app = u32s(state, "pods", "label:app");
    assert_eq!(
        (at(&app, web0), at(&app, pending)),
        (ids.s("web"), ABSENT_U32)
    );
    assert_eq!(
        u32s(state, "pods", "annotation:owner")[web0 as usize],
        ids.s("me")
    );
    assert_eq!(u32s(state, "namespaces", "label:team"), [ids.s("payments")]);
    assert_eq!(s64s(state, "pdbs", "disruptions-allowed"), [1]);
    assert_eq!(s64s(state, "priority-classes", "value"), [1000]);

    // The string table: id 0 is "", ids and strings agree both ways.
    let strings = state.strings().unwrap();
    assert_eq!(strings[0], "");
    assert_eq!(strings[ids.s("payments") as usize], "payments");
    assert_eq!(
        state.string_id("payments".into()).unwrap(),
        Some(ids.s("payments"))
    );
    assert_eq!(state.string_id("nothing uses this".into()).unwrap(), None);
    assert_eq!(
        state.strings_of(vec![ids.s("z1"), 0]).unwrap(),
        Ok(vec!["z1".to_string(), String::new()])
    );
}

#[test]
fn bad_names_and_ids_are_errors_that_say_what_is_wrong() {
    let snapshot = snapshot();
    let mut store = store(&snapshot);
    let state = store.data_mut();
    let err = state.row_count("pod".into()).unwrap().unwrap_err();
    assert!(
        err.contains("unknown table \"pod\"") && err.contains("pods"),
        "{err}"
    );
    let err = state
        .column_u32("pods".into(), "nodes".into())
        .unwrap()
        .unwrap_err();
    assert!(err.contains("no column \"nodes\""), "{err}");
    let err = state
        .column_u32("pods".into(), "creation-ms".into())
        .unwrap()
        .unwrap_err();
    assert!(
        err.contains("is s64") && err.contains("use column-s64"),
        "{err}"
    );
    let long = "x".repeat(10_000);
    let err = state.column_u32("pods".into(), long).unwrap().unwrap_err();
    assert!(
        err.len() < 400,
        "a long name is not echoed whole: {} bytes",
        err.len()
    );

    let strings = state.strings().unwrap().len() as u32;
    let err = state.strings_of(vec![0, strings]).unwrap().unwrap_err();
    assert!(
        err.contains(&format!("string id {strings} (at index 1)")),
        "{err}"
    );
    let err = state.pod_labels(vec![0, 1, 3]).unwrap().unwrap_err();
    assert!(
        err.contains("pod id 3 (at index 2) is not in the snapshot, which has 3"),
        "{err}"
    );
    let err = state.pdbs(vec![1]).unwrap().unwrap_err();
    assert!(err.contains("PDB id 1"), "{err}");
    // More ids than the table has rows, and than the minimum allowed: refused before any work.
    let err = state
        .pod_labels(vec![0; MIN_IDS_PER_CALL + 1])
        .unwrap()
        .unwrap_err();
    assert!(
        err.contains(&format!("{} pod ids in one call", MIN_IDS_PER_CALL + 1)),
        "{err}"
    );
    assert_eq!(
        state
            .pod_labels(vec![0; MIN_IDS_PER_CALL])
            .unwrap()
            .unwrap()
            .len(),
        MIN_IDS_PER_CALL
    );
}

#[test]
fn the_detail_accessors_answer_one_typed_entry_per_row() {
    let snapshot = snapshot();
    let ids = Ids {
        snapshot: snapshot.clone(),
    };
    let mut store = store(&snapshot);
    let state = store.data_mut();
    let (web0, web1, pending) = (ids.pod("web-0"), ids.pod("web-1"), ids.pod("pending"));
    let (a, b) = (ids.node("node-a"), ids.node("node-b"));
    let kv = |k: &str, v: &str| wit::KeyValue {
        key: ids.s(k),
        value: ids.s(v),
    };

    let labels = state
        .pod_labels(vec![web0, pending, web0])
        .unwrap()
        .unwrap();
    assert_eq!(labels.len(), 3);
    assert!(labels[0].contains(&kv("app", "web")) && labels[0].contains(&kv("tier", "front")));
    assert!(labels[1].is_empty());
    assert_eq!(labels[0], labels[2]);
    assert_eq!(
        state.pod_annotations(vec![web0]).unwrap().unwrap(),
        [vec![kv("owner", "me")]]
    );
    let refs = state.pod_owner_refs(vec![web1]).unwrap().unwrap();
    assert_eq!(
        refs,
        [vec![wit::OwnerRef {
            kind: ids.s("ReplicaSet"),
            name: ids.s("web"),
            uid: ids.s("rs-web"),
            controller: true
        }]]
    );
    assert_eq!(
        state.pod_node_selector(vec![web0]).unwrap().unwrap(),
        [vec![kv("disk", "ssd")]]
    );
    let tolerations = &state.pod_tolerations(vec![web0]).unwrap().unwrap()[0];
    assert_eq!(tolerations.len(), 2);
    assert_eq!(tolerations[0].key, ids.s("dedicated"));
    assert_eq!(tolerations[0].effect, Some(wit::TaintEffect::NoSchedule));
    assert_eq!(
        (
            tolerations[1].key,
            tolerations[1].operator,
            tolerations[1].effect
        ),
        (0, wit::TolerationOperator::Exists, None)
    );

    let affinity = &state.pod_affinity(vec![web0, web1]).unwrap().unwrap();
    let required = affinity[0]
        .node_required
        .as_ref()
        .expect("required node affinity");
    assert_eq!(required.len(), 1);
    let expr = &required[0].match_expressions[0];
    assert_eq!(
        (expr.key, expr.operator, expr.values.clone()),
        (
            ids.s("zone"),
            wit::SelectorOperator::In,
            vec![ids.s("z1"), ids.s("z2")]
        )
    );
    let anti = &affinity[0].pod_anti_affinity_required[0];
    assert_eq!(anti.topology_key, ids.s("kubernetes.io/hostname"));
    assert_eq!(
        anti.label_selector.as_ref().unwrap().match_labels,
        [kv("app", "web")]
    );
    assert!(
        affinity[1].node_required.is_none() && affinity[1].pod_anti_affinity_required.is_empty()
    );

    let spread = &state.pod_topology_spread(vec![web0]).unwrap().unwrap()[0];
    assert_eq!(
        (
            spread[0].max_skew,
            spread[0].topology_key,
            spread[0].when_unsatisfiable
        ),
        (1, ids.s("zone"), wit::WhenUnsatisfiable::DoNotSchedule)
    );
    assert_eq!(
        spread[0].label_selector.as_ref().unwrap().match_expressions[0].operator,
        wit::SelectorOperator::Exists
    );

    let containers = &state.pod_containers(vec![web0]).unwrap().unwrap()[0];
    let init = containers
        .iter()
        .find(|k| k.kind == wit::ContainerKind::Init)
        .unwrap();
    assert_eq!(
        (
            init.name,
            init.restart_count,
            init.terminated_reason,
            init.exit_code
        ),
        (ids.s("init"), 1, ids.s("Completed"), Some(0))
    );
    let app = containers
        .iter()
        .find(|k| k.kind == wit::ContainerKind::App)
        .unwrap();
    assert_eq!(
        (app.image, app.restart_count, app.ready),
        (ids.s("nginx"), 3, true)
    );
    let conditions = &state.pod_conditions(vec![web0]).unwrap().unwrap()[0];
    assert_eq!(
        (
            conditions[0].condition_type,
            conditions[0].status,
            conditions[0].last_transition_ms
        ),
        (ids.s("Ready"), ids.s("True"), Some(1_699_920_120_000))
    );
    let volumes = &state.pod_volumes(vec![web0]).unwrap().unwrap()[0];
    assert_eq!(
        volumes
            .iter()
            .map(|v| (v.kind, v.claim))
            .collect::<Vec<_>>(),
        [
            (wit::VolumeKind::EmptyDir, 0),
            (wit::VolumeKind::PersistentVolumeClaim, ids.s("web-data"))
        ]
    );
    let requests = &state.pod_requests(vec![web0]).unwrap().unwrap()[0];
    assert!(requests.contains(&wit::Quantity {
        resource: ids.s("cpu"),
        milli: 250
    }));
    let usage = state.pod_usage(vec![web0, pending]).unwrap().unwrap();
    assert_eq!(usage[0].source, wit::UsageSource::NodeMetric);
    assert_eq!(
        usage[0].usage,
        [wit::Quantity {
            resource: ids.s("cpu"),
            milli: 200
        }]
    );
    assert_eq!(
        (usage[1].source, usage[1].usage.len()),
        (wit::UsageSource::None, 0)
    );
    assert_eq!(
        state.pod_pdbs(vec![web0, web1, pending]).unwrap().unwrap(),
        [vec![0], vec![0], vec![]]
    );

    assert!(state.node_labels(vec![a]).unwrap().unwrap()[0].contains(&kv("zone", "z1")));
    assert_eq!(
        state.node_annotations(vec![a]).unwrap().unwrap(),
        [vec![kv("note", "hello")]]
    );
    assert_eq!(
        state.node_taints(vec![a, b]).unwrap().unwrap(),
        [
            vec![wit::Taint {
                key: ids.s("dedicated"),
                value: ids.s("db"),
                effect: wit::TaintEffect::NoSchedule
            }],
            vec![]
        ]
    );
    assert!(
        state.node_allocatable(vec![b]).unwrap().unwrap()[0].contains(&wit::Quantity {
            resource: ids.s("cpu"),
            milli: 2000
        })
    );
    assert!(
        state.node_requested(vec![a]).unwrap().unwrap()[0].contains(&wit::Quantity {
            resource: ids.s("cpu"),
            milli: 1250
        })
    );
    let node_usage = &state.node_usage(vec![a]).unwrap().unwrap()[0];
    assert_eq!(
        (
            node_usage.source,
            node_usage.window_ms,
            node_usage.update_ms
        ),
        (
            wit::UsageSource::NodeMetric,
            Some(300_000),
            Some(1_699_999_200_000)
        )
    );
    assert!(node_usage.node.contains(&wit::Quantity {
        resource: ids.s("cpu"),
        milli: 1500
    }));
    let topology = &state.node_cpu_topology(vec![a]).unwrap().unwrap()[0];
    assert!(!topology.has_nrt && topology.cpus.is_empty());
    let mut on_a = vec![web0, web1];
    on_a.sort();
    assert_eq!(
        state.node_pods(vec![a, b]).unwrap().unwrap(),
        [on_a.clone(), vec![]]
    );
    assert_eq!(
        state.namespace_labels(vec![0]).unwrap().unwrap(),
        [vec![kv("team", "payments")]]
    );
    let pdb = &state.pdbs(vec![0]).unwrap().unwrap()[0];
    assert_eq!(
        (pdb.name, pdb.disruptions_allowed, pdb.expected_pods),
        (ids.s("web-pdb"), 1, 2)
    );
    assert_eq!(
        pdb.selector.as_ref().unwrap().match_labels,
        [kv("app", "web")]
    );
    assert_eq!(state.pdb_pods(vec![0]).unwrap().unwrap(), [on_a]);
}

#[test]
fn columns_are_not_available_during_info_and_validate_args() {
    let mut store = test_store(engine(), None, 3);
    let err = store
        .data_mut()
        .column_u32("pods".into(), "node".into())
        .unwrap_err();
    assert!(
        format!("{err:#}").contains("not available during info/validate-args"),
        "{err:#}"
    );
    assert!(store.data_mut().pod_labels(vec![0]).is_err());
}
