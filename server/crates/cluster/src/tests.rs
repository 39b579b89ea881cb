//! Ingestion tests: a realistic kubectl List end to end, every error path, warnings, trimming.

use std::collections::{BTreeMap, HashMap};

use rebalancer_policy_sdk::k8s::quantity::parse_milli;
use rebalancer_policy_sdk::model::{
    ArchivedContainerKind, ArchivedInclusionPolicy, ArchivedSelectorOperator, ArchivedTaintEffect,
    ArchivedTolerationOperator, ArchivedUnhealthyPodEvictionPolicy, ArchivedVolumeKind,
    ArchivedWhenUnsatisfiable, ContainerKind, PodPhase, QosClass,
};
use rebalancer_policy_sdk::view::{Cluster, PodRef};

use super::*;

const LIST_JSON: &str = include_str!("testdata/list.json");

fn ingest(doc: &str, format: Format) -> Result<ClusterSnapshot, IngestError> {
    let set = parse_list(doc, format)?;
    build_snapshot(&set, 7, 1_700_000_000_000)
}

fn fixture() -> ClusterSnapshot {
    ingest(LIST_JSON, Format::Json).expect("the fixture ingests")
}

fn pod<'a>(c: Cluster<'a>, name: &str) -> PodRef<'a> {
    c.pods()
        .find(|p| p.name() == name)
        .unwrap_or_else(|| panic!("pod {name} in the snapshot"))
}

fn m(q: &str) -> i64 {
    parse_milli(q).unwrap()
}

fn id(c: Cluster<'_>, s: &str) -> u32 {
    c.lookup(s).unwrap_or_else(|| panic!("{s:?} interned"))
}

fn invalid(err: IngestError) -> (usize, String, String, String, String, String) {
    match err {
        IngestError::InvalidObject {
            index,
            kind,
            namespace,
            name,
            field,
            message,
        } => (
            index,
            kind.into(),
            namespace.into(),
            name.into(),
            field.into(),
            message.into(),
        ),
        other => panic!("expected InvalidObject, got {other:?}"),
    }
}

fn malformed(err: IngestError) -> (usize, usize, String) {
    match err {
        IngestError::Malformed {
            line,
            column,
            message,
        } => (line, column, message),
        other => panic!("expected Malformed, got {other:?}"),
    }
}

/// A list of `items` (JSON texts).
fn list(items: &[&str]) -> String {
    format!(
        r#"{{"apiVersion":"v1","kind":"List","items":[{}]}}"#,
        items.join(",")
    )
}

const POD: &str = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-1","namespace":"shop","uid":"u1","creationTimestamp":"2020-01-01T00:00:00Z"},
 "spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"CPU"}}}]},"status":{"phase":"Running"}}"#;

// --------------------------------------------------------------------------- the whole fixture

#[test]
fn realistic_list_counts_and_warnings() {
    let snap = fixture();
    assert_eq!(snap.revision, 7);
    assert_eq!(snap.time_ms, 1_700_000_000_000);
    let expect = [
        ("Namespace", 2),
        ("Node", 3),
        ("Pod", 4),
        ("PodDisruptionBudget", 3),
        ("PriorityClass", 1),
        ("PersistentVolumeClaim", 2),
        ("Service", 1),
    ];
    assert_eq!(
        snap.counts,
        expect
            .iter()
            .map(|(k, n)| (k.to_string(), *n as u64))
            .collect::<BTreeMap<_, _>>()
    );
    let codes: Vec<WarningCode> = snap.warnings.iter().map(|w| w.code).collect();
    assert_eq!(
        codes,
        vec![
            WarningCode::DuplicateObject,
            WarningCode::UnknownKind,
            WarningCode::UnknownKind,
            WarningCode::PdbWithoutStatus,
            WarningCode::NodeNotFound,
        ],
        "{:#?}",
        snap.warnings
    );
    let text: Vec<String> = snap.warnings.iter().map(|w| w.to_string()).collect();
    assert!(
        text[0].contains("Namespace shop appears more than once (items 0 and 16)"),
        "{}",
        text[0]
    );
    assert!(
        text[1].contains("PodDisruptionBudget (policy/v1beta1)"),
        "{}",
        text[1]
    );
    assert!(text[1].contains("protect no pod"), "{}", text[1]);
    assert!(
        text[2].contains("Service (v1)") && text[2].contains("\"shop/web\""),
        "{}",
        text[2]
    );
    assert!(text[3].contains("shop/fresh"), "{}", text[3]);
    assert!(
        text[4].contains("\"node-gone\"") && text[4].contains("\"kube-system/static-web\""),
        "{}",
        text[4]
    );
    let c = snap.cluster();
    assert_eq!((c.node_count(), c.pod_count()), (3, 4));
    // Only the policy/v1 PDBs are modelled; duplicates keep the last namespace.
    assert_eq!(c.archive().pdbs.len(), 2);
    let shop = c.namespace(id(c, "shop")).expect("namespace shop");
    assert_eq!(shop.labels.len(), 3);
    assert!(
        shop.labels
            .iter()
            .any(|kv| kv.key.to_native() == id(c, "tier") && c.str(kv.value.to_native()) == "prod")
    );
    assert_eq!(c.priority_class_value("business-critical"), Some(100_000));
}

#[test]
fn nodes_land_in_the_archive() {
    let snap = fixture();
    let c = snap.cluster();
    let names: Vec<&str> = c.nodes().map(|n| n.name()).collect();
    assert_eq!(names, ["node-a", "node-b", "node-c"]);
    let (a, b, cc) = (c.node(0), c.node(1), c.node(2));
    assert!(a.is_ready() && !a.is_unschedulable());
    assert_eq!(a.allocatable(id(c, "cpu")), 3800);
    assert_eq!(a.allocatable(id(c, "memory")), m("15Gi"));
    assert_eq!(a.allocatable(id(c, "pods")), 110_000);
    assert_eq!(a.allocatable(id(c, "ephemeral-storage")), m("100Gi"));
    assert_eq!(a.label("topology.kubernetes.io/zone"), Some("eu-west-1a"));
    assert_eq!(a.raw.uid.as_str(), "node-node-a");
    assert_eq!(a.raw.creation_ms.to_native(), 1_583_136_000_000);
    let taints: Vec<_> = b.taints().collect();
    assert_eq!(taints.len(), 2);
    assert_eq!(
        (c.str(taints[0].0), c.str(taints[0].1)),
        ("dedicated", "batch")
    );
    assert!(matches!(
        b.raw.taints[1].effect,
        ArchivedTaintEffect::PreferNoSchedule
    ));
    assert_eq!(b.raw.taints[1].value.to_native(), 0);
    // node-c: NotReady, cordoned, no allocatable → capacity.
    assert!(!cc.is_ready() && cc.is_unschedulable());
    assert_eq!(cc.allocatable(id(c, "cpu")), 2000);
    assert_eq!(cc.allocatable(id(c, "memory")), m("8Gi"));
}

#[test]
fn pod_scalars_requests_and_qos() {
    let snap = fixture();
    let c = snap.cluster();
    let web = pod(c, "web-7d4b9c8f6d-x2x7q");
    assert_eq!(web.namespace(), "shop");
    assert_eq!(web.uid(), "pod-web-1");
    assert_eq!(web.node(), Some(0));
    assert_eq!(web.node_name(), "node-a");
    assert_eq!(web.phase(), PodPhase::Running);
    assert_eq!(web.qos(), QosClass::Burstable);
    assert_eq!(web.priority(), Some(100_000));
    assert_eq!(
        c.str(web.raw.priority_class_name.to_native()),
        "business-critical"
    );
    assert_eq!(web.creation_ms(), 1_583_136_420_000);
    assert_eq!(web.start_ms(), Some(1_583_136_450_000));
    assert!(!web.has_deletion_timestamp());
    // max(app 300m + sidecar 100m, init 1) + overhead 10m; memory max(512+64, 256) + 20 Mi.
    assert_eq!(web.request(id(c, "cpu")), 1010);
    assert_eq!(web.request(id(c, "memory")), m("596Mi"));
    assert_eq!(web.label("app.kubernetes.io/name"), Some("web"));
    assert_eq!(web.annotation("prometheus.io/scrape"), Some("true"));
    assert!(!web.has_annotation("kubectl.kubernetes.io/last-applied-configuration"));
    assert_eq!(web.owner_kind(), "ReplicaSet");
    let owner = web.owner_record().expect("owner");
    assert_eq!(c.str(owner.name.to_native()), "web-7d4b9c8f6d");
    assert_eq!(c.str(owner.uid.to_native()), "rs-web");
    assert!(web.raw.owner_refs[0].controller);
    assert!(web.raw.has_resource_claims);
    assert_eq!(web.node_selector().len(), 1);

    let job = pod(c, "report-28000000-abcde");
    assert_eq!(job.phase(), PodPhase::Failed);
    assert!(job.is_terminal());
    assert_eq!(c.str(job.raw.reason.to_native()), "DeadlineExceeded");
    assert_eq!(job.qos(), QosClass::Guaranteed); // computed: no status.qosClass
    assert_eq!(
        job.raw.deletion_ms.as_ref().map(|t| t.to_native()),
        Some(4_083_998_400_000)
    );
    assert_eq!(job.priority(), None);

    let stray = pod(c, "static-web");
    assert_eq!(stray.node(), None);
    assert_eq!(stray.node_name(), "node-gone");
    assert_eq!(stray.owner(), None);

    let pending = pod(c, "pending-1");
    assert_eq!(pending.node(), None);
    assert_eq!(pending.node_name(), "");
    assert_eq!(pending.qos(), QosClass::BestEffort);
    assert!(pending.raw.requests.is_empty());
    assert_eq!(
        pending.conditions()[0]
            .last_transition_ms
            .as_ref()
            .map(|t| t.to_native()),
        Some(1_583_136_001_000)
    );
}

#[test]
fn pod_containers_conditions_and_volumes() {
    let snap = fixture();
    let c = snap.cluster();
    let web = pod(c, "web-7d4b9c8f6d-x2x7q");
    let app: Vec<_> = web.containers(ContainerKind::App).collect();
    let init: Vec<_> = web.containers(ContainerKind::Init).collect();
    assert_eq!((app.len(), init.len()), (2, 2));
    assert_eq!(c.str(app[0].name.to_native()), "web");
    assert_eq!(
        c.str(app[0].image.to_native()),
        "registry.example.com/shop/web:1.4.2"
    );
    assert_eq!(app[0].restart_count.to_native(), 12);
    assert!(!app[0].ready);
    assert_eq!(c.str(app[0].waiting_reason.to_native()), "CrashLoopBackOff");
    assert!(app[0].exit_code.is_none());
    assert!(app[1].ready);
    assert_eq!(c.str(init[0].terminated_reason.to_native()), "Completed");
    assert_eq!(init[0].exit_code.as_ref().map(|e| e.to_native()), Some(0));
    assert_eq!(init[0].restart_count.to_native(), 1);
    assert!(matches!(init[1].kind, ArchivedContainerKind::Init));

    let job = pod(c, "report-28000000-abcde");
    let main = job.containers(ContainerKind::App).next().unwrap();
    assert_eq!(c.str(main.terminated_reason.to_native()), "OOMKilled");
    assert_eq!(main.exit_code.as_ref().map(|e| e.to_native()), Some(137));

    let conds = web.conditions();
    assert_eq!(conds.len(), 3);
    assert_eq!(c.str(conds[1].type_.to_native()), "Ready");
    assert_eq!(c.str(conds[1].status.to_native()), "True");
    assert_eq!(
        conds[1].last_transition_ms.as_ref().map(|t| t.to_native()),
        Some(1_583_136_480_000)
    );

    let kinds: Vec<_> = web.volumes().iter().map(|v| &v.kind).collect();
    assert!(matches!(
        kinds[..],
        [
            ArchivedVolumeKind::EmptyDir,
            ArchivedVolumeKind::HostPath,
            ArchivedVolumeKind::PersistentVolumeClaim,
            ArchivedVolumeKind::Ephemeral,
            ArchivedVolumeKind::Other
        ]
    ));
    assert_eq!(c.str(web.volumes()[2].claim.to_native()), "data-web");
    assert_eq!(web.volumes()[0].claim.to_native(), 0);

    let pvcs = &c.archive().pvcs;
    assert_eq!(pvcs.len(), 2);
    assert_eq!(
        pvcs[0].storage_class.as_ref().map(|s| c.str(s.to_native())),
        Some("gp3")
    );
    assert!(pvcs[1].storage_class.is_none());
}

#[test]
fn pod_affinity_tolerations_and_spread() {
    let snap = fixture();
    let c = snap.cluster();
    let web = pod(c, "web-7d4b9c8f6d-x2x7q");
    let aff = web.affinity();
    let required = aff.node_required.as_ref().expect("required node affinity");
    assert_eq!(required.len(), 1);
    let expr = &required[0].match_expressions[0];
    assert_eq!(c.str(expr.key.to_native()), "topology.kubernetes.io/zone");
    assert!(matches!(expr.operator, ArchivedSelectorOperator::In));
    let values: Vec<&str> = expr.values.iter().map(|v| c.str(v.to_native())).collect();
    assert_eq!(values, ["eu-west-1a", "eu-west-1b"]);
    assert!(matches!(
        required[0].match_fields[0].operator,
        ArchivedSelectorOperator::NotIn
    ));
    assert_eq!(aff.node_preferred[0].weight.to_native(), 20);
    assert!(matches!(
        aff.node_preferred[0].term.match_expressions[0].operator,
        ArchivedSelectorOperator::Exists
    ));
    assert!(aff.pod_affinity_required.is_empty());
    let anti = &aff.pod_anti_affinity_required[0];
    assert_eq!(
        c.str(anti.topology_key.to_native()),
        "kubernetes.io/hostname"
    );
    let sel = anti.label_selector.as_ref().unwrap();
    assert_eq!(c.str(sel.match_labels[0].value.to_native()), "web");
    assert_eq!(
        c.str(anti.match_label_keys[0].to_native()),
        "pod-template-hash"
    );
    let pref = &aff.pod_anti_affinity_preferred[0];
    assert_eq!(pref.weight.to_native(), 50);
    assert_eq!(c.str(pref.term.namespaces[0].to_native()), "shop");
    assert!(pref.term.namespace_selector.is_none());

    let tol = web.tolerations();
    assert_eq!(tol.len(), 3);
    assert!(matches!(tol[0].operator, ArchivedTolerationOperator::Equal));
    assert_eq!(c.str(tol[0].value.to_native()), "batch");
    assert!(matches!(
        tol[1].operator,
        ArchivedTolerationOperator::Exists
    ));
    assert!(tol[1].effect.is_some());
    assert_eq!(tol[2].key.to_native(), 0);
    assert!(tol[2].effect.is_none());

    let tsc = &web.topology_spread()[0];
    assert_eq!(tsc.max_skew.to_native(), 1);
    assert!(matches!(
        tsc.when_unsatisfiable,
        ArchivedWhenUnsatisfiable::DoNotSchedule
    ));
    assert_eq!(tsc.min_domains.as_ref().map(|d| d.to_native()), Some(2));
    assert!(tsc.node_affinity_policy.is_none());
    assert!(matches!(
        tsc.node_taints_policy.as_ref(),
        Some(ArchivedInclusionPolicy::Honor)
    ));
    assert_eq!(
        c.str(tsc.match_label_keys[0].to_native()),
        "pod-template-hash"
    );

    // A pod without affinity has `node_required: None`.
    assert!(pod(c, "pending-1").affinity().node_required.is_none());
}

#[test]
fn pdbs_land_in_the_archive() {
    let snap = fixture();
    let c = snap.cluster();
    let pdbs = &c.archive().pdbs;
    let web = &pdbs[0];
    assert_eq!(c.str(web.name.to_native()), "web");
    assert_eq!(c.str(web.namespace.to_native()), "shop");
    let sel = web.selector.as_ref().unwrap();
    assert_eq!(sel.match_labels.len(), 1);
    assert!(matches!(
        sel.match_expressions[0].operator,
        ArchivedSelectorOperator::NotIn
    ));
    assert_eq!(
        (
            web.disruptions_allowed.to_native(),
            web.current_healthy.to_native(),
            web.desired_healthy.to_native(),
            web.expected_pods.to_native()
        ),
        (1, 3, 2, 3)
    );
    assert!(matches!(
        web.unhealthy_pod_eviction_policy,
        ArchivedUnhealthyPodEvictionPolicy::AlwaysAllow
    ));
    let fresh = &pdbs[1];
    assert!(fresh.selector.is_none());
    assert_eq!(fresh.disruptions_allowed.to_native(), 0);
    assert!(matches!(
        fresh.unhealthy_pod_eviction_policy,
        ArchivedUnhealthyPodEvictionPolicy::IfHealthyBudget
    ));
}

#[test]
fn node_utilization_sums_non_terminal_pods() {
    let snap = fixture();
    let nodes = node_utilization(snap.cluster());
    assert_eq!(nodes.len(), 3);
    let a = &nodes[0];
    assert_eq!(a.name, "node-a");
    assert_eq!(
        a.allocatable,
        ResourceAmounts {
            cpu_milli: 3800,
            memory_bytes: 15 << 30,
            pods: 110
        }
    );
    assert_eq!(
        a.requested,
        ResourceAmounts {
            cpu_milli: 1010,
            memory_bytes: 596 << 20,
            pods: 1
        }
    );
    assert_eq!(a.pod_count, 1);
    let cpu = a.percent.cpu.unwrap();
    assert!((cpu - 1010.0 * 100.0 / 3800.0).abs() < 1e-9);
    let b = &nodes[1];
    assert_eq!(
        (b.pod_count, b.requested.pods, b.requested.cpu_milli),
        (1, 0, 0)
    );
    assert_eq!(b.percent.cpu, Some(0.0));
    let cc = &nodes[2];
    assert!(!cc.ready && cc.unschedulable);
    assert_eq!(cc.allocatable.cpu_milli, 2000);
    let json = serde_json::to_value(a).unwrap();
    assert_eq!(json["requested"]["cpuMilli"], 1010);
    assert_eq!(json["podCount"], 1);
    assert!(json["percent"]["memory"].is_number());
}

#[test]
fn the_evictor_index_is_built_once() {
    let snap = fixture();
    let a = snap.index();
    let b = snap.index();
    assert!(std::sync::Arc::ptr_eq(&a, &b));
}

#[test]
fn node_utilization_of_nodes_without_resources() {
    let doc = list(&[r#"{"kind":"Node","apiVersion":"v1","metadata":{"name":"bare"}}"#]);
    let snap = ingest(&doc, Format::Json).unwrap();
    let nodes = node_utilization(snap.cluster());
    assert_eq!(nodes[0].allocatable, ResourceAmounts::default());
    assert_eq!(nodes[0].percent, ResourcePercentages::default());
    assert!(!nodes[0].ready);
}

// --------------------------------------------------------------------------- JSON and storage

#[test]
fn managed_fields_and_last_applied_are_trimmed() {
    let set = parse_list(LIST_JSON, Format::Json).unwrap();
    let web = set
        .find("Pod", "shop", "web-7d4b9c8f6d-x2x7q")
        .expect("web pod");
    assert!(!web.json.contains("managedFields"), "{}", web.json);
    assert!(!web.json.contains("last-applied-configuration"));
    let v: serde_json::Value = serde_json::from_str(&web.json).unwrap();
    assert_eq!(v["metadata"]["annotations"]["prometheus.io/scrape"], "true");
    assert_eq!(
        v["metadata"]["ownerReferences"][0]["name"],
        "web-7d4b9c8f6d"
    );
    assert_eq!(v["spec"]["containers"][0]["name"], "web");
    // Untouched objects are stored as they came (pointing into the input).
    let node = set.find("Node", "", "node-a").unwrap();
    assert!(
        node.json
            .starts_with("{\n            \"apiVersion\": \"v1\","),
        "{}",
        node.json
    );
    assert_eq!(web.namespace, Some("shop"));
    assert_eq!(node.namespace, None);
    assert_eq!(node.uid, Some("node-node-a"));

    // Annotations left empty disappear; a null metadata survives.
    let trimmed = objects::trim(
        r#"{"kind":"Pod","metadata":{"name":"p","annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{}"},"managedFields":[]},"spec":{}}"#,
    )
    .unwrap();
    assert_eq!(
        trimmed,
        r#"{"kind":"Pod","metadata":{"name":"p"},"spec":{}}"#
    );
    let kept = objects::trim(r#"{"kind":"X","metadata":null,"a":[1, 2]}"#).unwrap();
    assert_eq!(kept, r#"{"kind":"X","metadata":null,"a":[1, 2]}"#);
}

#[test]
fn compacted_rows_answer_the_same_json() {
    let mut snap = fixture();
    let kinds = [
        "Node",
        "Pod",
        "PodDisruptionBudget",
        "Namespace",
        "PriorityClass",
        "PersistentVolumeClaim",
    ];
    let before: Vec<Vec<Option<String>>> = kinds
        .iter()
        .map(|k| (0..8).map(|i| snap.object_json(k, i)).collect())
        .collect();
    let shared = snap.json_bytes();
    snap.compact_json();
    let after: Vec<Vec<Option<String>>> = kinds
        .iter()
        .map(|k| (0..8).map(|i| snap.object_json(k, i)).collect())
        .collect();
    assert_eq!(before, after);
    assert!(before.iter().flatten().filter(|j| j.is_some()).count() > 8);
    assert!(
        snap.json_bytes() > 0 && snap.json_bytes() < shared,
        "{shared}"
    );
    // Compacting twice is a no-op.
    snap.compact_json();
    assert_eq!(before[1][0], snap.object_json("Pod", 0));
}

#[test]
fn compacted_rows_span_many_groups() {
    // 100 pods on 3 nodes: several compression groups per table, and a last, partial one.
    let mut items = vec![];
    for n in 0..3 {
        items.push(serde_json::json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": format!("n{n}"), "uid": format!("node-{n}")},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}
        }));
    }
    for p in 0..100 {
        items.push(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("p{p}"), "namespace": "ns", "uid": format!("pod-{p}"),
                         "labels": {"i": p.to_string()},
                         "annotations": {"text": "é ✓ ".repeat(p % 7)}},
            "spec": {"nodeName": format!("n{}", p % 3), "containers": [{"name": "c"}]},
            "status": {"phase": "Running"}
        }));
    }
    let doc = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string();
    let set = parse_list(doc.as_str(), Format::Json).unwrap();
    let mut snap = build_snapshot(&set, 1, 0).unwrap();
    drop(set);
    let before: Vec<Option<String>> = (0..101).map(|i| snap.object_json("Pod", i)).collect();
    snap.compact_json();
    let after: Vec<Option<String>> = (0..101).map(|i| snap.object_json("Pod", i)).collect();
    assert_eq!(before, after);
    assert_eq!(after[100], None);
    for (i, json) in after.iter().take(100).enumerate() {
        let v: serde_json::Value = serde_json::from_str(json.as_ref().unwrap()).unwrap();
        assert_eq!(v["metadata"]["name"], format!("p{i}"));
    }
    assert!(snap.object_json("Node", 2).unwrap().contains("\"n2\""));
}

#[test]
fn object_json_follows_table_indexes() {
    let snap = fixture();
    let c = snap.cluster();
    for p in c.pods() {
        let json = snap.object_json("Pod", p.id).expect("pod json");
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["metadata"]["name"], p.name());
    }
    for n in c.nodes() {
        let v: serde_json::Value =
            serde_json::from_str(&snap.object_json("Node", n.id).unwrap()).unwrap();
        assert_eq!(v["metadata"]["name"], n.name());
    }
    let pdb: serde_json::Value =
        serde_json::from_str(&snap.object_json("PodDisruptionBudget", 1).unwrap()).unwrap();
    assert_eq!(pdb["metadata"]["name"], "fresh");
    let ns: serde_json::Value =
        serde_json::from_str(&snap.object_json("Namespace", 1).unwrap()).unwrap();
    assert_eq!(ns["metadata"]["labels"]["tier"], "prod");
    assert!(
        snap.object_json("PriorityClass", 0)
            .unwrap()
            .contains("business-critical")
    );
    assert!(
        snap.object_json("PersistentVolumeClaim", 1)
            .unwrap()
            .contains("legacy")
    );
    assert_eq!(snap.object_json("Pod", 4), None);
    assert_eq!(snap.object_json("Service", 0), None);
    assert!(
        snap.object_json("Pod", 0)
            .unwrap()
            .find("managedFields")
            .is_none()
    );
}

#[test]
fn stored_objects_rebuild_the_same_snapshot() {
    let set = parse_list(LIST_JSON, Format::Json).unwrap();
    let stored: Vec<StoredObjectBuf> = set.stored_objects().map(|o| o.to_owned_object()).collect();
    assert_eq!(stored.len(), set.len());
    assert_eq!(stored.len(), 16);
    assert!(
        stored
            .iter()
            .any(|o| o.kind == "Service" && o.namespace.as_deref() == Some("shop"))
    );
    let again = ObjectSet::from_stored(stored).unwrap();
    let a = build_snapshot(&set, 3, 42).unwrap();
    let b = build_snapshot(&again, 3, 42).unwrap();
    assert_eq!(a.archive_bytes(), b.archive_bytes());
    assert_eq!(a.counts, b.counts);
    assert_eq!(a.object_json("Pod", 0), b.object_json("Pod", 0));
    // Unknown kinds are reported again after a restart; duplicates are gone for good.
    assert!(
        b.warnings
            .iter()
            .any(|w| w.code == WarningCode::UnknownKind)
    );
    assert!(
        !b.warnings
            .iter()
            .any(|w| w.code == WarningCode::DuplicateObject)
    );

    let err = ObjectSet::from_stored([StoredObjectBuf {
        kind: "Pod".into(),
        api_version: "v1".into(),
        namespace: Some("a".into()),
        name: String::new(),
        uid: None,
        json: "{}".into(),
    }])
    .unwrap_err();
    assert_eq!(invalid(err).4, "metadata.name");
}

#[test]
fn yaml_lists_are_read_and_second_documents_refused() {
    let yaml = r#"
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata:
    name: n1
    labels: {zone: a}
  status:
    allocatable: {cpu: 4, memory: 16Gi, pods: "110"}
    conditions:
    - {type: Ready, status: "True"}
- apiVersion: v1
  kind: Pod
  metadata:
    name: p1
    namespace: default
    creationTimestamp: "2020-01-01T00:00:00Z"
    managedFields:
    - manager: kubectl
  spec:
    nodeName: n1
    containers:
    - name: c
      resources:
        requests: {cpu: 0.5, memory: 128Mi}
        limits: {cpu: 0.5, memory: 128Mi}
  status: {phase: Running}
- apiVersion: v1
  kind: Namespace
  metadata: {name: default}
"#;
    let set = parse_list(yaml, Format::Yaml).unwrap();
    assert_eq!(set.len(), 3);
    assert!(
        !set.find("Pod", "default", "p1")
            .unwrap()
            .json
            .contains("managedFields")
    );
    let snap = build_snapshot(&set, 1, 0).unwrap();
    let c = snap.cluster();
    assert_eq!(c.node(0).allocatable(id(c, "cpu")), 4000);
    let p = c.pod(0);
    assert_eq!(p.request(id(c, "cpu")), 500);
    assert_eq!(p.qos(), QosClass::Guaranteed);
    assert_eq!(p.node(), Some(0));
    assert!(snap.warnings.is_empty(), "{:?}", snap.warnings);

    // One document per push: a second one (even an empty one after a final `---`) is
    // refused where it starts, rather than silently ignored or merged.
    for (extra, line) in [
        (
            "---\napiVersion: v1\nkind: Namespace\nmetadata: {name: other}\n",
            33,
        ),
        ("---\n", 33),
        ("--- {kind: List, items: []}\n", 33),
    ] {
        let doc = format!("---\n{}{extra}", yaml.trim_start());
        let (at, column, message) = malformed(parse_list(doc.as_str(), Format::Yaml).unwrap_err());
        assert_eq!((at, column), (line, 1), "{doc}");
        assert!(message.contains("a second YAML document"), "{message}");
    }
}

fn not_a_list(err: IngestError) -> (usize, usize, String) {
    assert_eq!(err.code(), "not_a_list", "{err}");
    match err {
        IngestError::NotAList {
            line,
            column,
            message,
        } => (line, column, message),
        other => panic!("expected NotAList, got {other:?}"),
    }
}

#[test]
fn typed_lists_and_kind_less_lists_are_lists() {
    let pods = r#"{"apiVersion":"v1","kind":"PodList","metadata":{},"items":[
        {"metadata":{"name":"a","namespace":"x"},"kind":"Pod"},
        {"metadata":{"name":"b","namespace":"x"},"kind":"Pod","apiVersion":"v1"}]}"#;
    let snap = ingest(pods, Format::Json).unwrap();
    assert_eq!(snap.cluster().pod_count(), 2);
    // kubectl omits kind inside typed lists only for `get -o json` of old servers; here it
    // is required and missing-kind items fail (see `missing_kind_names_the_index`).
    let kind_less = r#"{"items":[{"kind":"Namespace","metadata":{"name":"a"}}]}"#;
    assert_eq!(
        ingest(kind_less, Format::Json).unwrap().counts["Namespace"],
        1
    );

    // A List of no objects is a List (the server decides whether to accept it).
    for (doc, format) in [
        (
            r#"{"apiVersion":"v1","kind":"List","items":[]}"#,
            Format::Json,
        ),
        ("kind: List\napiVersion: v1\nitems: []\n", Format::Yaml),
    ] {
        let set = parse_list(doc, format).unwrap();
        assert!(set.is_empty());
        assert_eq!(set.count_of(ObjectKind::Pod), 0);
    }
}

#[test]
fn what_is_not_one_list_is_refused_as_such() {
    for (doc, format, says) in [
        ("", Format::Json, "the body is empty"),
        ("  \n ", Format::Json, "the body is empty"),
        ("", Format::Yaml, "the body is empty"),
        ("# nothing\n", Format::Yaml, "the body is empty"),
        ("null", Format::Json, "found null"),
        ("~\n", Format::Yaml, "the document is null"),
        ("null\n", Format::Yaml, "the document is null"),
        ("---\n", Format::Yaml, "the document is null"),
        ("[1, 2]", Format::Json, "found an array"),
        ("- 1\n- 2\n", Format::Yaml, "found an array"),
        ("\"text\"", Format::Json, "found a string"),
        (
            r#"{"kind":"List"}"#,
            Format::Json,
            "the List has no `items`",
        ),
        (
            r#"{"kind":"PodList","apiVersion":"v1"}"#,
            Format::Json,
            "the PodList has no `items`",
        ),
        (
            "kind: List\napiVersion: v1\n",
            Format::Yaml,
            "the List has no `items`",
        ),
        (
            r#"{"kind":"List","items":null}"#,
            Format::Json,
            "`items` is null",
        ),
        ("kind: List\nitems: ~\n", Format::Yaml, "`items` is null"),
        ("kind: List\nitems:\n", Format::Yaml, "`items` is null"),
        (
            r#"{"kind":"List","items":{}}"#,
            Format::Json,
            "`items` is an object",
        ),
        (
            "kind: List\nitems: 3\n",
            Format::Yaml,
            "`items` is a number",
        ),
        (
            r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"solo"}}"#,
            Format::Json,
            "a single Node object, not a List",
        ),
        (
            "kind: Namespace\napiVersion: v1\nmetadata:\n  name: solo\n",
            Format::Yaml,
            "a single Namespace object",
        ),
        // An object that merely has an `items` field is an object, not a List.
        (
            r#"{"kind":"Widget","apiVersion":"x/v1","metadata":{"name":"w"},"items":[]}"#,
            Format::Json,
            "a single Widget object",
        ),
        (
            r#"{"metadata":{}}"#,
            Format::Json,
            "neither `kind` nor `items`",
        ),
        (
            r#"{"kind":7,"items":[]}"#,
            Format::Json,
            "kind is not a string",
        ),
    ] {
        let (_, _, message) = not_a_list(parse_list(doc, format).unwrap_err());
        assert!(message.contains(says), "{doc:?}: {message}");
    }
    let (line, column, _) = not_a_list(parse_list("\n\n  [1]", Format::Json).unwrap_err());
    assert_eq!((line, column), (3, 3));
    let err = parse_list(r#"{"kind":"List","items":null}"#, Format::Json).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("not a List at line 1, column 1: "),
        "{err}"
    );
}

#[test]
fn namespace_defaults_and_numbers_as_quantities() {
    let doc = list(&[
        r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":2,"memory":" 1Gi "}}}]}}"#,
    ]);
    let snap = ingest(&doc, Format::Json).unwrap();
    let c = snap.cluster();
    let p = c.pod(0);
    assert_eq!(p.namespace(), "default");
    assert_eq!(p.request(id(c, "cpu")), 2000);
    assert_eq!(p.request(id(c, "memory")), m("1Gi"));
    assert_eq!(p.creation_ms(), 1_700_000_000_000); // the snapshot time
    let codes: Vec<_> = snap.warnings.iter().map(|w| w.code).collect();
    assert_eq!(
        codes,
        [
            WarningCode::MissingNamespace,
            WarningCode::MissingCreationTimestamp
        ]
    );
}

#[test]
fn duplicates_keep_the_last_object() {
    let doc = list(&[
        r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"n","labels":{"v":"1"}}}"#,
        r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"m"}}"#,
        r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"n","labels":{"v":"2"}}}"#,
    ]);
    let snap = ingest(&doc, Format::Json).unwrap();
    let c = snap.cluster();
    assert_eq!(c.node_count(), 2);
    assert_eq!(c.node(0).name(), "m");
    assert_eq!(c.node(1).label("v"), Some("2"));
    assert_eq!(snap.warnings.len(), 1);
    assert_eq!(snap.warnings[0].code, WarningCode::DuplicateObject);
}

// ------------------------------------------------------------------------------- error paths

#[test]
fn malformed_json_reports_line_and_column() {
    let (line, column, message) = malformed(
        parse_list(
            "{\n  \"kind\": \"List\",\n  \"items\": [\n    {\"a\": 1,}\n  ]\n}",
            Format::Json,
        )
        .unwrap_err(),
    );
    assert_eq!((line, column), (4, 13));
    assert!(message.starts_with("invalid JSON: "), "{message}");
    assert!(!message.contains(" at line "), "{message}");

    let (line, _, message) = malformed(parse_list("[1, 2", Format::Json).unwrap_err());
    assert_eq!(line, 1);
    assert!(message.contains("EOF"), "{message}");

    let (line, column, message) =
        malformed(parse_list(b"{\"kind\": \"Li\xffst\"}".as_slice(), Format::Json).unwrap_err());
    assert_eq!((line, column), (1, 13));
    assert!(message.contains("UTF-8"));
    let err = parse_list("{} x", Format::Json).unwrap_err();
    assert_eq!(err.code(), "malformed_document");
    assert!(
        err.to_string()
            .starts_with("malformed document at line 1, column 4: invalid JSON"),
        "{err}"
    );
}

#[test]
fn malformed_yaml_reports_line_and_column() {
    let yaml = "apiVersion: v1\nkind: List\nitems:\n- kind: Pod\n  metadata: {name: [}\n";
    let (line, column, message) = malformed(parse_list(yaml, Format::Yaml).unwrap_err());
    assert_eq!(line, 5);
    assert!(column > 1);
    assert!(message.starts_with("invalid YAML: "), "{message}");
    let (line, _, _) =
        malformed(parse_list("kind: List\nitems:\n  - a: 1\n b: 2\n", Format::Yaml).unwrap_err());
    assert_eq!(line, 4);
}

#[test]
fn missing_name_names_the_index() {
    let doc = list(&[
        r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"a"}}"#,
        r#"{"apiVersion":"v1","kind":"Pod","metadata":{"namespace":"shop"}}"#,
    ]);
    let err = parse_list(doc.as_str(), Format::Json).unwrap_err();
    assert_eq!(
        err.to_string(),
        "item 1 (Pod): metadata.name: required field is missing"
    );
    let (index, kind, namespace, name, field, _) = invalid(err);
    assert_eq!(
        (
            index,
            kind.as_str(),
            namespace.as_str(),
            name.as_str(),
            field.as_str()
        ),
        (1, "Pod", "shop", "", "metadata.name")
    );
    let err = parse_list(list(&[r#"{"kind":"Pod"}"#]), Format::Json).unwrap_err();
    assert_eq!(invalid(err).4, "metadata.name");
}

#[test]
fn missing_kind_names_the_index() {
    let doc = list(&[r#"{"apiVersion":"v1","metadata":{"name":"x"}}"#]);
    let err = parse_list(doc, Format::Json).unwrap_err();
    assert_eq!(
        err.to_string(),
        "item 0 (object): kind: required field is missing"
    );
    let err = parse_list(list(&["42"]), Format::Json).unwrap_err();
    let (index, _, _, _, field, message) = invalid(err);
    assert_eq!((index, field.as_str()), (0, ""));
    assert!(
        message.contains("expected a Kubernetes object"),
        "{message}"
    );
    let err = parse_list(
        list(&[r#"{"kind":7,"metadata":{"name":"x"}}"#]),
        Format::Json,
    )
    .unwrap_err();
    let (_, _, _, _, field, message) = invalid(err);
    assert_eq!(field, "kind");
    assert!(message.contains("expected a string"), "{message}");
}

#[test]
fn bad_quantity_names_the_field() {
    let doc = list(&[&POD.replace("CPU", "abc")]);
    let set = parse_list(doc, Format::Json).unwrap();
    let err = build_snapshot(&set, 1, 0).unwrap_err();
    assert_eq!(
        err.to_string()
            .split(':')
            .take(3)
            .collect::<Vec<_>>()
            .join(":"),
        "Pod shop/web-1: spec.containers[0].resources.requests.cpu: invalid quantity \"abc\""
    );
    let (index, kind, namespace, name, field, _) = invalid(err);
    assert_eq!(index, 0);
    assert_eq!(
        (kind.as_str(), namespace.as_str(), name.as_str()),
        ("Pod", "shop", "web-1")
    );
    assert_eq!(field, "spec.containers[0].resources.requests.cpu");

    let err = ingest(&list(&[&POD.replace("CPU", "10E")]), Format::Json).unwrap_err();
    assert!(err.to_string().contains("too large"), "{err}");

    let node = r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"n"},"status":{"allocatable":{"nvidia.com/gpu":"1x"}}}"#;
    let (_, _, _, _, field, _) = invalid(ingest(&list(&[node]), Format::Json).unwrap_err());
    assert_eq!(field, "status.allocatable[\"nvidia.com/gpu\"]");
    let (_, _, _, _, field, _) = invalid(
        ingest(
            &list(&[&POD.replace(
                r#"{"cpu":"CPU"}"#,
                r#"{"cpu":"1"}}},{"name":"d","resources":{"limits":{"memory":"lots"}"#,
            )]),
            Format::Json,
        )
        .unwrap_err(),
    );
    assert_eq!(field, "spec.containers[1].resources.limits.memory");
}

#[test]
fn bad_timestamp_names_the_field() {
    let doc = list(&[&POD
        .replace("CPU", "1")
        .replace("2020-01-01T00:00:00Z", "yesterday")]);
    let err = ingest(&doc, Format::Json).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Pod shop/web-1: metadata.creationTimestamp: invalid timestamp \"yesterday\": expected \
         RFC 3339, e.g. \"2024-05-01T12:00:00Z\""
    );
    let doc = list(&[&POD.replace("CPU", "1").replace(
        r#""phase":"Running""#,
        r#""phase":"Running","conditions":[{"type":"Ready","lastTransitionTime":"2020-02-30T00:00:00Z"}]"#,
    )]);
    assert_eq!(
        invalid(ingest(&doc, Format::Json).unwrap_err()).4,
        "status.conditions[0].lastTransitionTime"
    );
}

#[test]
fn wrong_types_and_enum_values_name_the_field() {
    let cases = [
        (
            POD.replace(r#""uid":"u1""#, r#""uid":"u1","labels":{"tier":1}"#),
            "metadata.labels.tier",
            "invalid type: integer `1`, expected a string",
        ),
        (
            POD.replace(r#""phase":"Running""#, r#""phase":"Sleeping""#),
            "status.phase",
            "unknown phase \"Sleeping\"",
        ),
        (
            POD.replace(r#""containers""#, r#""tolerations":[{"operator":"Maybe"}],"containers""#),
            "spec.tolerations[0].operator",
            "unknown operator \"Maybe\"",
        ),
        (
            POD.replace(r#""containers""#, r#""tolerations":[{"effect":"NoScheduel"}],"containers""#),
            "spec.tolerations[0].effect",
            "unknown taint effect \"NoScheduel\"",
        ),
        (
            POD.replace(
                r#""containers""#,
                r#""affinity":{"podAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":[{"labelSelector":{"matchExpressions":[{"key":"a","operator":"Gt"}]}}]}},"containers""#,
            ),
            "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchExpressions[0].operator",
            "unknown operator \"Gt\" (expected In, NotIn, Exists or DoesNotExist)",
        ),
        (
            POD.replace(r#""containers""#, r#""topologySpreadConstraints":[{"topologyKey":"z"}],"containers""#),
            "spec.topologySpreadConstraints[0].maxSkew",
            "required field is missing",
        ),
        (
            POD.replace(r#""containers""#, r#""priority":"high","containers""#),
            "spec.priority",
            "invalid type: string \"high\", expected i32",
        ),
        (
            POD.replace(r#""phase":"Running""#, r#""phase":"Running","qosClass":"Gold""#),
            "status.qosClass",
            "unknown QoS class \"Gold\"",
        ),
    ];
    for (doc, field, message) in cases {
        let doc = list(&[&doc.replace("CPU", "1")]);
        let (_, kind, _, name, f, msg) = invalid(ingest(&doc, Format::Json).unwrap_err());
        assert_eq!((kind.as_str(), name.as_str()), ("Pod", "web-1"));
        assert_eq!(f, field);
        assert!(
            msg.starts_with(message),
            "{msg:?} should start with {message:?}"
        );
    }
    let pc =
        r#"{"apiVersion":"scheduling.k8s.io/v1","kind":"PriorityClass","metadata":{"name":"p"}}"#;
    assert_eq!(
        ingest(&list(&[pc]), Format::Json).unwrap_err().to_string(),
        "PriorityClass p: value: required field is missing"
    );
    let node = r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"n"},"spec":{"taints":[{"key":"k","effect":"Never"}]}}"#;
    assert_eq!(
        invalid(ingest(&list(&[node]), Format::Json).unwrap_err()).4,
        "spec.taints[0].effect"
    );
    let pdb = r#"{"apiVersion":"policy/v1","kind":"PodDisruptionBudget","metadata":{"name":"b","namespace":"x"},"spec":{"unhealthyPodEvictionPolicy":"Sometimes"},"status":{}}"#;
    assert_eq!(
        invalid(ingest(&list(&[pdb]), Format::Json).unwrap_err()).4,
        "spec.unhealthyPodEvictionPolicy"
    );
}

#[test]
fn yaml_type_errors_name_the_field() {
    let yaml = "kind: List\nitems:\n- kind: Pod\n  apiVersion: v1\n  metadata:\n    name: p\n    namespace: x\n    labels:\n      version: 1.2\n";
    let (_, _, _, _, field, message) = invalid(ingest(yaml, Format::Yaml).unwrap_err());
    assert_eq!(field, "metadata.labels.version");
    assert!(message.contains("expected a string"), "{message}");
}

#[test]
fn large_sets_keep_order_and_report_late_errors() {
    let n = 5500;
    let pod = |i: usize, cpu: &str| {
        format!(
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"p{i}","namespace":"ns{}","creationTimestamp":"2020-01-01T00:00:00Z"}},"spec":{{"nodeName":"n","containers":[{{"name":"c","resources":{{"requests":{{"cpu":"{cpu}"}}}}}}]}}}}"#,
            i % 7
        )
    };
    let node = r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"n"}}"#.to_owned();
    let mut items: Vec<String> = (0..n).map(|i| pod(i, "10m")).collect();
    items.push(node);
    let refs: Vec<&str> = items.iter().map(String::as_str).collect();
    let snap = ingest(&list(&refs), Format::Json).unwrap();
    let c = snap.cluster();
    assert_eq!(c.pod_count(), n);
    for (i, p) in c.pods().enumerate() {
        assert_eq!(p.name(), format!("p{i}"));
        assert_eq!(p.node(), Some(0));
    }
    assert!(
        snap.object_json("Pod", (n - 1) as u32)
            .unwrap()
            .contains(&format!("\"p{}\"", n - 1))
    );

    // An error late in the set stops the pipeline and names the right object.
    items[n - 10] = pod(n - 10, "ten");
    let refs: Vec<&str> = items.iter().map(String::as_str).collect();
    let (index, _, namespace, name, field, _) =
        invalid(ingest(&list(&refs), Format::Json).unwrap_err());
    assert_eq!(index, n - 10);
    assert_eq!(name, format!("p{}", n - 10));
    assert_eq!(namespace, format!("ns{}", (n - 10) % 7));
    assert_eq!(field, "spec.containers[0].resources.requests.cpu");
    // A decoding (type) error late in the set too.
    items[n - 3] = items[n - 3].replace("\"nodeName\":\"n\"", "\"nodeName\":7");
    items[n - 10] = pod(n - 10, "1");
    let refs: Vec<&str> = items.iter().map(String::as_str).collect();
    let (index, _, _, _, field, _) = invalid(ingest(&list(&refs), Format::Json).unwrap_err());
    assert_eq!((index, field.as_str()), (n - 3, "spec.nodeName"));
}

#[test]
fn large_lists_read_heads_in_parallel_and_in_order() {
    let n = 6000;
    let mut items: Vec<String> = (0..n)
        .map(|i| {
            format!(
                r#"{{"apiVersion":"v1","kind":"Namespace","metadata":{{"name":"ns{}","managedFields":[{{"manager":"x"}}]}}}}"#,
                i % 5000
            )
        })
        .collect();
    let refs: Vec<&str> = items.iter().map(String::as_str).collect();
    let set = parse_list(list(&refs), Format::Json).unwrap();
    // 1000 duplicates across both halves: the later one wins, in document order.
    assert_eq!(set.len(), 5000);
    assert_eq!(
        set.warnings()
            .iter()
            .filter(|w| w.code == WarningCode::DuplicateObject)
            .count(),
        1000
    );
    assert!(
        set.stored_objects()
            .all(|o| !o.json.contains("managedFields"))
    );
    let names: Vec<&str> = set.stored_objects().map(|o| o.name).collect();
    assert_eq!(names[0], "ns1000");
    assert_eq!(names[4999], "ns999");

    // The first error wins, wherever it is.
    items[5500] = r#"{"kind":"Namespace","metadata":{}}"#.to_owned();
    items[4000] = r#"{"kind":"Namespace","metadata":{"name":1}}"#.to_owned();
    let refs: Vec<&str> = items.iter().map(String::as_str).collect();
    let (index, _, _, _, field, _) = invalid(parse_list(list(&refs), Format::Json).unwrap_err());
    assert_eq!((index, field.as_str()), (4000, "metadata.name"));
    items[4000] = items[1].clone();
    let refs: Vec<&str> = items.iter().map(String::as_str).collect();
    let (index, _, _, _, field, message) =
        invalid(parse_list(list(&refs), Format::Json).unwrap_err());
    assert_eq!((index, field.as_str()), (5500, "metadata.name"));
    assert_eq!(message, "required field is missing");
    items[1] = "7".to_owned();
    let refs: Vec<&str> = items.iter().map(String::as_str).collect();
    assert_eq!(
        invalid(parse_list(list(&refs), Format::Json).unwrap_err()).0,
        1
    );
}

#[test]
fn api_objects_are_trimmed_and_identified_without_kind() {
    let item = r#"{"metadata":{"name":"web-1","namespace":"shop","uid":"u1","managedFields":[{"manager":"kubectl"}],"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{}","keep":"yes"}},"spec":{"nodeName":"n1"}}"#;
    let o = StoredObjectBuf::from_api_json("Pod", "v1", item).unwrap();
    assert_eq!(
        (
            o.kind.as_str(),
            o.api_version.as_str(),
            o.namespace.as_deref(),
            o.name.as_str(),
            o.uid.as_deref()
        ),
        ("Pod", "v1", Some("shop"), "web-1", Some("u1"))
    );
    assert!(
        !o.json.contains("managedFields") && !o.json.contains("last-applied"),
        "{}",
        o.json
    );
    assert!(o.json.contains("\"keep\":\"yes\""), "{}", o.json);
    // Cluster-scoped objects have no namespace; an untouched object is kept as sent.
    let node = r#"{"metadata":{"name":"n1","uid":"nu"},"status":{}}"#;
    let o = StoredObjectBuf::from_api_json("Node", "v1", node).unwrap();
    assert_eq!((o.namespace, o.json.as_str()), (None, node));
    let err = StoredObjectBuf::from_api_json("Pod", "v1", r#"{"metadata":{"namespace":"a"}}"#)
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("metadata.name: required field is missing"),
        "{err}"
    );
}

/// Everything a policy can read of a snapshot, as text (string ids differ between a full build
/// and a live one; what they name must not).
fn readable(s: &ClusterSnapshot) -> Vec<String> {
    let c = s.cluster();
    let mut out = Vec::new();
    for n in c.nodes() {
        let mut labels: Vec<_> = n.labels().collect();
        labels.sort();
        let cpu = c.lookup("cpu").map_or(0, |id| n.allocatable(id));
        out.push(format!("node {} {labels:?} cpu={cpu}", n.name()));
    }
    for p in c.pods() {
        let mut labels: Vec<_> = p.labels().collect();
        labels.sort();
        out.push(format!(
            "pod {}/{} {} node={} phase={:?} {labels:?} owner={} created={} prio={:?}",
            p.namespace(),
            p.name(),
            p.uid(),
            p.node_name(),
            p.phase(),
            p.owner_kind(),
            p.creation_ms(),
            p.priority()
        ));
    }
    for (i, pdb) in c.archive().pdbs.iter().enumerate() {
        out.push(format!(
            "pdb {i} {}/{}",
            c.str(pdb.namespace.to_native()),
            c.str(pdb.name.to_native())
        ));
    }
    out.push(format!("{:?} {:?}", s.counts, s.warnings));
    out
}

fn shared_set(items: &[serde_json::Value]) -> (Vec<SharedObject>, ObjectSet) {
    // One packer per kind, as a watch cache keeps them.
    let mut packers: HashMap<&str, JsonPacker> = HashMap::new();
    let objects: Vec<SharedObject> = items
        .iter()
        .map(|v| {
            let kind = v["kind"].as_str().unwrap();
            let kind = ObjectKind::from_kind(kind).map_or_else(
                || {
                    [
                        "NodeMetric",
                        "NodeMetrics",
                        "PodMetrics",
                        "NodeResourceTopology",
                    ]
                    .into_iter()
                    .find(|k| *k == kind)
                    .unwrap()
                },
                ObjectKind::as_str,
            );
            SharedObject::from_api_json(
                kind,
                v["apiVersion"].as_str().unwrap().into(),
                &v.to_string(),
                packers.entry(kind).or_default(),
            )
            .unwrap()
        })
        .collect();
    let set = ObjectSet::from_shared(objects.clone()).unwrap();
    (objects, set)
}

#[test]
fn the_live_string_table_restarts_only_after_as_many_conversions_again_as_rows() {
    use crate::fixtures::{node, pod};
    let mut items = vec![
        node("n1", "4", "8Gi"),
        pod("shop", "web-1", Some("n1"), "100m", "64Mi", None),
        pod("shop", "web-2", Some("n1"), "100m", "64Mi", None),
    ];
    let mut live = LiveRows::default();
    let mut previous: Option<Vec<SharedObject>> = None;
    let mut counts = Vec::new();
    for round in 0..2100 {
        items[1]["metadata"]["labels"]["round"] = serde_json::json!(round.to_string());
        let (mut objects, _) = shared_set(&items);
        if let Some(prev) = &previous {
            for o in &mut objects {
                if let Some(p) = prev.iter().find(|p| p.name == o.name && p.json == o.json) {
                    o.json = p.json.clone();
                }
            }
        }
        let set = ObjectSet::from_shared(objects.clone()).unwrap();
        live.build(&set, round + 1, 0).unwrap();
        counts.push(live.rows_converted());
        previous = Some(objects);
    }
    // The first build converts the three rows, each later one the changed pod only, without a
    // restart at the first change (as there once was) ...
    assert_eq!(&counts[..3], [3, 4, 5]);
    let restart = counts.windows(2).position(|w| w[1] < w[0]);
    // ... until 2 × 1024 rows were converted (the minimum table size), then the table restarts.
    assert_eq!(restart, Some(2046), "{:?}", &counts[2040..2050]);
    assert_eq!(
        counts[2047], 3,
        "the restarted table converts every row once"
    );
}

#[test]
fn live_rows_build_what_a_full_build_builds_and_reuse_unchanged_rows() {
    use crate::fixtures::{node, pdb, pod};
    let mut items = vec![
        node("n1", "4", "8Gi"),
        node("n2", "4", "8Gi"),
        pod(
            "shop",
            "web-1",
            Some("n1"),
            "100m",
            "64Mi",
            Some(("ReplicaSet", "web")),
        ),
        pod(
            "shop",
            "web-2",
            Some("n2"),
            "100m",
            "64Mi",
            Some(("ReplicaSet", "web")),
        ),
        pod("batch", "job-1", None, "1", "1Gi", Some(("Job", "job"))),
        pdb("shop", "web", "web", serde_json::json!({"minAvailable": 1})),
    ];
    let mut live = LiveRows::default();
    let mut previous: Option<Vec<SharedObject>> = None;
    for round in 0..4 {
        match round {
            1 => items[2]["metadata"]["labels"]["tier"] = serde_json::json!("gold"),
            2 => {
                items.remove(3);
                items.push(pod("shop", "web-3", Some("n2"), "200m", "64Mi", None));
            }
            3 => {
                // No creation timestamp: its age counts from the snapshot time, never cached.
                let mut p = pod("tmp", "odd", Some("n1"), "1m", "1Mi", None);
                p["metadata"]
                    .as_object_mut()
                    .unwrap()
                    .remove("creationTimestamp");
                items.push(p);
            }
            _ => {}
        }
        let (mut objects, _) = shared_set(&items);
        // Unchanged objects keep their very JSON text (as a watch cache does).
        if let Some(prev) = &previous {
            for o in &mut objects {
                if let Some(p) = prev.iter().find(|p| p.name == o.name && p.json == o.json) {
                    o.json = p.json.clone();
                }
            }
        }
        let set = ObjectSet::from_shared(objects.clone()).unwrap();
        let full = build_snapshot(&set, 10 + round, 1_000 * (round as i64 + 1)).unwrap();
        let before = live.rows_converted();
        let incremental = live
            .build(&set, 10 + round, 1_000 * (round as i64 + 1))
            .unwrap();
        assert_eq!(readable(&incremental), readable(&full), "round {round}");
        // Only what changed is converted again (and the pod without a creation timestamp).
        let expected = [6, 1, 1, 1][round as usize];
        assert_eq!(live.rows_converted() - before, expected, "round {round}");
        assert_eq!(incremental.revision, full.revision);
        previous = Some(objects);
    }
    // A broken object is left out with a warning naming it and its field (a pushed
    // document with it is refused); the others still make a revision.
    let mut broken = items.clone();
    broken[0]["status"]["allocatable"]["cpu"] = serde_json::json!("lots");
    let (_, set) = shared_set(&broken);
    assert!(build_snapshot(&set, 20, 0).is_err());
    let snapshot = live.build(&set, 20, 0).unwrap();
    let warning = snapshot
        .warnings
        .iter()
        .find(|w| w.code == WarningCode::InvalidObject)
        .expect("a warning for the broken node");
    assert!(
        warning.message.contains("Node n1")
            && warning.message.contains("status.allocatable.cpu")
            && warning.message.contains("left out"),
        "{}",
        warning.message
    );
    let names: Vec<String> = snapshot
        .cluster()
        .nodes()
        .map(|n| n.name().to_owned())
        .collect();
    assert_eq!(names, ["n2"]);
    // Once it is fixed, the next build is the full build again.
    let (_, set) = shared_set(&items);
    let full = build_snapshot(&set, 21, 5).unwrap();
    assert_eq!(readable(&live.build(&set, 21, 5).unwrap()), readable(&full));
}

#[test]
fn packed_json_gives_back_its_text_and_packs_objects_of_a_kind_against_the_first() {
    use crate::fixtures::pod;
    let mut packer = JsonPacker::default();
    let texts: Vec<String> = (0..50)
        .map(|i| {
            let node = format!("node-{}", i % 7);
            pod(
                "shop",
                &format!("web-{i}"),
                Some(node.as_str()),
                "100m",
                "64Mi",
                Some(("ReplicaSet", "web")),
            )
            .to_string()
        })
        .collect();
    let packed: Vec<PackedJson> = texts.iter().map(|t| packer.pack(t)).collect();
    for (text, p) in texts.iter().zip(&packed) {
        assert_eq!(&p.text(), text);
        assert_eq!(p.text_len(), text.len());
    }
    // Against the first pod, the others shrink far more than alone.
    let alone = lz4_flex::block::compress(texts[1].as_bytes()).len();
    assert!(
        packed[1].packed_len() * 2 < alone,
        "{} vs {alone}",
        packed[1].packed_len()
    );
    // Clones are the same text; equal texts packed twice are equal too.
    assert_eq!(packed[3].key(), packed[3].clone().key());
    assert_ne!(packed[3].key(), packer.pack(&texts[3]).key());
    assert_eq!(packed[3], packer.pack(&texts[3]));
    assert_ne!(packed[3], packed[4]);
}

fn usage_cluster() -> Vec<serde_json::Value> {
    use crate::fixtures::{node, pod};
    use serde_json::json;
    let mut n1 = node("n1", "8", "16Gi");
    n1["metadata"]["annotations"] =
        json!({RAW_ALLOCATABLE: "{\"cpu\":\"16\",\"memory\":\"32Gi\"}"});
    let mut n2 = node("n2", "8", "16Gi");
    n2["metadata"]["annotations"] = json!({RAW_ALLOCATABLE: "not json"});
    vec![
        n1,
        n2,
        node("n3", "8", "16Gi"),
        pod("shop", "web-1", Some("n1"), "1", "1Gi", None),
        pod("shop", "web-2", Some("n2"), "1", "1Gi", None),
        pod("shop", "web-3", Some("n3"), "1", "1Gi", None),
        json!({
            "apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric",
            "metadata": {"name": "n1"},
            "spec": {"metricCollectPolicy": {"aggregateDurationSeconds": 300}},
            "status": {
                "updateTime": "2026-01-01T00:00:00Z",
                "nodeMetric": {"nodeUsage": {"resources": {"cpu": "6", "memory": "8Gi"}},
                               "systemUsage": {"resources": {"cpu": "500m"}}},
                "podsMetric": [
                    {"namespace": "shop", "name": "web-1",
                     "podUsage": {"resources": {"cpu": "2500m", "memory": "3Gi"}}},
                    {"namespace": "shop", "name": "gone-1",
                     "podUsage": {"resources": {"cpu": "1", "memory": "1Gi"}}},
                    {"namespace": "shop", "name": "gone-2",
                     "podUsage": {"resources": {"cpu": "250m"}}}
                ]
            }
        }),
        json!({
            "apiVersion": "metrics.k8s.io/v1beta1", "kind": "NodeMetrics",
            "metadata": {"name": "n2"}, "timestamp": "2026-01-01T00:00:30Z", "window": "1m0s",
            "usage": {"cpu": "2", "memory": "4Gi"}
        }),
        // Outranked by n1's NodeMetric.
        json!({
            "apiVersion": "metrics.k8s.io/v1beta1", "kind": "NodeMetrics",
            "metadata": {"name": "n1"}, "timestamp": "2026-01-01T00:00:30Z", "window": "30s",
            "usage": {"cpu": "1"}
        }),
        json!({
            "apiVersion": "metrics.k8s.io/v1beta1", "kind": "PodMetrics",
            "metadata": {"name": "web-2", "namespace": "shop"}, "timestamp": "2026-01-01T00:00:30Z",
            "window": "30s",
            "containers": [{"name": "a", "usage": {"cpu": "300m", "memory": "100Mi"}},
                           {"name": "b", "usage": {"cpu": "200m"}}]
        }),
        // Outranked by web-1's NodeMetric entry.
        json!({
            "apiVersion": "metrics.k8s.io/v1beta1", "kind": "PodMetrics",
            "metadata": {"name": "web-1", "namespace": "shop"}, "containers": []
        }),
        json!({
            "apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric",
            "metadata": {"name": "n9"}, "status": {}
        }),
        json!({
            "apiVersion": "metrics.k8s.io/v1beta1", "kind": "PodMetrics",
            "metadata": {"name": "ghost", "namespace": "shop"}, "containers": []
        }),
        json!({
            "apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric",
            "metadata": {"name": "n3"},
            "status": {"nodeMetric": {"nodeUsage": {"resources": {"cpu": "lots"}}}}
        }),
    ]
}

#[test]
fn usage_comes_from_node_metrics_then_metrics_api_and_bad_usage_is_a_located_warning() {
    use rebalancer_policy_sdk::model::ArchivedUsageSource;
    let items = usage_cluster();
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
    let set = parse_list(list.to_string().as_bytes(), Format::Json).unwrap();
    let snap = build_snapshot(&set, 1, 0).unwrap();
    let c = snap.cluster();
    let milli = |list: &[rebalancer_policy_sdk::model::ArchivedQuantity], r: &str| {
        let id = c.lookup(r).unwrap();
        list.iter()
            .find(|q| q.resource.to_native() == id)
            .map(|q| q.milli.to_native())
    };
    let node = |name: &str| c.nodes().find(|n| n.name() == name).unwrap();
    let pod = |name: &str| c.pods().find(|p| p.name() == name).unwrap();

    let n1 = node("n1").usage();
    assert_eq!(n1.source, ArchivedUsageSource::NodeMetric);
    assert_eq!(
        n1.update_ms.as_ref().map(|t| t.to_native()),
        Some(1_767_225_600_000)
    );
    assert_eq!(n1.window_ms.as_ref().map(|t| t.to_native()), Some(300_000));
    assert_eq!(milli(&n1.node, "cpu"), Some(6_000));
    assert_eq!(milli(&n1.system, "cpu"), Some(500));
    // The two pods no longer in the cluster still count, summed.
    assert_eq!(milli(&n1.gone_pods, "cpu"), Some(1_250));
    assert_eq!(
        milli(&n1.gone_pods, "memory"),
        Some(1024 * 1024 * 1024 * 1000)
    );
    assert_eq!(milli(&n1.raw_allocatable, "cpu"), Some(16_000));

    let n2 = node("n2").usage();
    assert_eq!(n2.source, ArchivedUsageSource::MetricsApi);
    assert_eq!(n2.window_ms.as_ref().map(|t| t.to_native()), Some(60_000));
    assert_eq!(milli(&n2.node, "cpu"), Some(2_000));
    assert!(
        n2.raw_allocatable.is_empty(),
        "unreadable annotation: allocatable is used"
    );
    // n3's NodeMetric does not parse: no usage.
    assert_eq!(node("n3").usage().source, ArchivedUsageSource::None);

    let web1 = pod("web-1").usage();
    assert_eq!(web1.source, ArchivedUsageSource::NodeMetric);
    assert_eq!(milli(&web1.usage, "cpu"), Some(2_500));
    let web2 = pod("web-2").usage();
    assert_eq!(web2.source, ArchivedUsageSource::MetricsApi);
    assert_eq!(milli(&web2.usage, "cpu"), Some(500));
    assert_eq!(pod("web-3").usage().source, ArchivedUsageSource::None);
    assert_eq!(
        node("n1").annotation(RAW_ALLOCATABLE),
        Some("{\"cpu\":\"16\",\"memory\":\"32Gi\"}")
    );

    let warning = |code: WarningCode| {
        snap.warnings
            .iter()
            .find(|w| w.code == code)
            .unwrap_or_else(|| panic!("{code:?} in {:?}", snap.warnings))
    };
    let invalid = warning(WarningCode::InvalidUsage);
    assert_eq!(invalid.count, 2, "{}", invalid.message);
    assert!(
        invalid
            .message
            .contains("Node n2: annotation node.koordinator.sh/raw-allocatable")
            && invalid
                .message
                .contains("NodeMetric n3: status.nodeMetric.nodeUsage.resources.cpu"),
        "{}",
        invalid.message
    );
    let orphans = warning(WarningCode::UsageWithoutObject);
    assert_eq!(orphans.count, 2, "{}", orphans.message);
    assert!(
        orphans.message.contains("NodeMetric n9 (no such node)")
            && orphans
                .message
                .contains("PodMetrics shop/ghost (no such pod)"),
        "{}",
        orphans.message
    );
    // Usage kinds are read, not reported as unknown.
    assert!(
        !snap
            .warnings
            .iter()
            .any(|w| w.code == WarningCode::UnknownKind),
        "{:?}",
        snap.warnings
    );

    // The nodes API's summary: usage against the raw allocatable where annotated.
    let summary = node_utilization(c);
    let n1 = summary.iter().find(|n| n.name == "n1").unwrap();
    let usage = n1.usage.as_ref().unwrap();
    assert_eq!(usage.source, UsageSourceName::NodeMetric);
    assert!(usage.raw_allocatable);
    assert_eq!(usage.used.cpu_milli, 6_000);
    assert_eq!(usage.percent.cpu, Some(37.5));
    assert_eq!(
        n1.percent.cpu,
        Some(12.5),
        "requests stay against allocatable"
    );
    let n2 = summary.iter().find(|n| n.name == "n2").unwrap();
    assert_eq!(n2.usage.as_ref().unwrap().percent.cpu, Some(25.0));
    assert!(
        summary
            .iter()
            .find(|n| n.name == "n3")
            .unwrap()
            .usage
            .is_none()
    );

    // A live build reads the same usage.
    let (objects, live_set) = shared_set(&items);
    let mut live = LiveRows::default();
    let full = build_snapshot(&live_set, 2, 0).unwrap();
    let incremental = live.build(&live_set, 2, 0).unwrap();
    assert_eq!(
        node_utilization(full.cluster()),
        node_utilization(incremental.cluster())
    );
    assert_eq!(full.warnings, incremental.warnings);

    // koordlet reports n1 again: the next live build reads the new NodeMetric and keeps the
    // metrics it had read of the unchanged objects (same JSON), and still equals a full build.
    let mut items = items;
    let m = items
        .iter_mut()
        .find(|o| o["kind"] == "NodeMetric" && o["metadata"]["name"] == "n1")
        .unwrap();
    m["status"]["nodeMetric"]["nodeUsage"]["resources"]["cpu"] = serde_json::json!("8");
    let (mut next, _) = shared_set(&items);
    for o in &mut next {
        if let Some(p) = objects
            .iter()
            .find(|p| p.name == o.name && p.kind == o.kind && p.json == o.json)
        {
            o.json = p.json.clone();
        }
    }
    let set = ObjectSet::from_shared(next).unwrap();
    let full = build_snapshot(&set, 3, 0).unwrap();
    let incremental = live.build(&set, 3, 0).unwrap();
    assert_eq!(
        node_utilization(full.cluster()),
        node_utilization(incremental.cluster())
    );
    assert_eq!(full.warnings, incremental.warnings);
    let n1 = node_utilization(incremental.cluster())
        .into_iter()
        .find(|n| n.name == "n1")
        .unwrap();
    assert_eq!(n1.usage.unwrap().used.cpu_milli, 8_000);
}

#[test]
fn layout_3_sections_leave_sections_0_to_9_as_layout_2_wrote_them() {
    use rebalancer_policy_sdk::build::SnapshotBuilder;
    use rebalancer_policy_sdk::model::{
        self, CORE_LAYOUT_VERSION, KeyValue, NodeUsage, PodUsage, Quantity, Section, UsageSource,
        header,
    };
    let mut b = SnapshotBuilder::new(7, 1_000);
    let (name, ns, cpu) = (b.intern("n1"), b.intern("shop"), b.intern("cpu"));
    let (key, value) = (b.intern("a"), b.intern("b"));
    let t = b.snapshot_mut();
    t.nodes.push(model::Node {
        name,
        ..Default::default()
    });
    t.pods.push(model::Pod {
        name: "web-1".into(),
        namespace: ns,
        node_name: name,
        ..Default::default()
    });
    let without = b.finish();
    let mut with = without.clone();
    with.node_annotations = vec![vec![KeyValue { key, value }]];
    with.node_usage = vec![NodeUsage {
        source: UsageSource::NodeMetric,
        update_ms: Some(5),
        node: vec![Quantity {
            resource: cpu,
            milli: 1_500,
        }],
        ..Default::default()
    }];
    with.pod_usage = vec![PodUsage {
        source: UsageSource::MetricsApi,
        usage: vec![Quantity {
            resource: cpu,
            milli: 700,
        }],
    }];
    let (a, b) = (
        model::to_bytes(&without).unwrap(),
        model::to_bytes(&with).unwrap(),
    );
    for id in 0..10 {
        let (ra, rb) = (
            header::range(&a, id).unwrap(),
            header::range(&b, id).unwrap(),
        );
        assert_eq!(&a[ra], &b[rb], "section {id}");
    }
    for id in 10..13 {
        let (ra, rb) = (
            header::range(&a, id).unwrap(),
            header::range(&b, id).unwrap(),
        );
        assert_ne!(&a[ra], &b[rb], "section {id}");
    }
    let (version, count) = header::read(&b).unwrap();
    assert_eq!((version, count as usize), (3, Section::ALL.len()));
    // And the view reads the new sections back.
    let view = Cluster::from_bytes(&b).unwrap();
    assert_eq!(
        view.archive().layout_version.to_native(),
        CORE_LAYOUT_VERSION
    );
    assert_eq!(view.node(0).annotation("a"), Some("b"));
    assert_eq!(view.node(0).usage().node[0].milli.to_native(), 1_500);
    assert_eq!(view.pod(0).usage().usage[0].milli.to_native(), 700);
    let view = Cluster::from_bytes(&a).unwrap();
    assert_eq!(
        view.node(0).usage().source,
        model::ArchivedUsageSource::None
    );
}

#[test]
fn cpu_topology_comes_from_the_nrt_and_its_annotations_and_bad_parts_are_located_warnings() {
    use crate::fixtures::{node, pod};
    use serde_json::json;
    // 2 sockets, one NUMA node each, 4 cores per socket, SMT 2: CPU i is on core i % 8.
    let detail: Vec<serde_json::Value> = (0..16)
        .map(|i| json!({"id": i, "core": i % 8, "socket": (i % 8) / 4, "node": (i % 8) / 4}))
        .collect();
    let mut n2 = node("n2", "16", "64Gi");
    n2["metadata"]["annotations"] = json!({
        "node.koordinator.sh/reservation": "{\"reservedCPUs\":\"0\",\"applyPolicy\":\"ReservedCPUsOnly\"}"
    });
    let items = vec![
        node("n1", "16", "64Gi"),
        n2,
        pod("db", "pg-0", Some("n1"), "4", "8Gi", None),
        json!({
            "apiVersion": "topology.node.k8s.io/v1alpha1", "kind": "NodeResourceTopology",
            "metadata": {"name": "n1", "annotations": {
                "node.koordinator.sh/cpu-topology": json!({"detail": detail}).to_string(),
                "kubelet.koordinator.sh/cpu-manager-policy":
                    "{\"policy\":\"static\",\"options\":{\"full-pcpus-only\":\"true\"},\"reservedCPUs\":\"0-1\"}",
                "node.koordinator.sh/pod-cpu-allocs":
                    "[{\"namespace\":\"db\",\"name\":\"pg-0\",\"uid\":\"u1\",\"cpuset\":\"2-3,10-11\",\"managedByKubelet\":true},{\"namespace\":\"db\",\"name\":\"gone\",\"uid\":\"u2\",\"cpuset\":\"4\",\"managedByKubelet\":true}]",
                "node.koordinator.sh/cpu-shared-pools":
                    "[{\"socket\":0,\"node\":0,\"cpuset\":\"4-7\"},{\"socket\":1,\"node\":1,\"cpuset\":\"12-15\"}]",
                "node.koordinator.sh/be-cpu-shared-pools": "[{\"socket\":0,\"node\":0,\"cpuset\":\"2-7\"}]",
                "node.koordinator.sh/system-qos-resource": "{\"cpuset\":\"8\"}"
            }},
            "topologyPolicies": ["SingleNUMANodePodLevel"],
            "zones": [
                {"name": "node-0", "type": "Node",
                 "resources": [{"name": "cpu", "capacity": "8", "allocatable": "7", "available": "3"}]},
                {"name": "node-1", "type": "Node",
                 "resources": [{"name": "cpu", "capacity": "8", "allocatable": "8", "available": "8"}]}
            ]
        }),
        json!({
            "apiVersion": "topology.node.k8s.io/v1alpha1", "kind": "NodeResourceTopology",
            "metadata": {"name": "n2", "annotations": {
                "node.koordinator.sh/cpu-topology": "{\"detail\": \"all of them\"}",
                "node.koordinator.sh/cpu-shared-pools": "[{\"socket\":0,\"node\":0,\"cpuset\":\"3-1\"}]"
            }}
        }),
        json!({
            "apiVersion": "topology.node.k8s.io/v1alpha1", "kind": "NodeResourceTopology",
            "metadata": {"name": "n9"}
        }),
    ];
    let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
    let set = parse_list(list.to_string().as_bytes(), Format::Json).unwrap();
    let snap = build_snapshot(&set, 1, 0).unwrap();
    let c = snap.cluster();
    let n1 = c.node(0).cpu_topology();
    assert!(n1.has_nrt);
    assert_eq!(n1.cpus.len(), 16);
    let cpu9 = &n1.cpus[9];
    assert_eq!(
        (
            cpu9.id.to_native(),
            cpu9.core.to_native(),
            cpu9.socket.to_native(),
            cpu9.numa.to_native()
        ),
        (9, 1, 0, 0)
    );
    assert_eq!(c.str(n1.kubelet_policy.to_native()), "static");
    let reserved: Vec<u32> = n1.kubelet_reserved.iter().map(|c| c.to_native()).collect();
    assert_eq!(reserved, [0, 1]);
    let option = &n1.kubelet_options[0];
    assert_eq!(
        (
            c.str(option.key.to_native()),
            c.str(option.value.to_native())
        ),
        ("full-pcpus-only", "true")
    );
    assert_eq!(n1.pod_allocs.len(), 2);
    let pg = &n1.pod_allocs[0];
    let cpus: Vec<u32> = pg.cpus.iter().map(|c| c.to_native()).collect();
    assert_eq!(cpus, [2, 3, 10, 11]);
    assert_eq!(c.pod(pg.pod.to_native()).name(), "pg-0");
    assert!(pg.managed_by_kubelet);
    assert_eq!(
        n1.pod_allocs[1].pod.to_native(),
        rebalancer_policy_sdk::model::NONE,
        "a pod not in the snapshot"
    );
    assert_eq!(n1.shared_pools.len(), 2);
    assert_eq!(n1.shared_pools[1].numa.to_native(), 1);
    assert_eq!(n1.be_shared_pools[0].cpus.len(), 6);
    let qos: Vec<u32> = n1.system_qos_cpus.iter().map(|c| c.to_native()).collect();
    assert_eq!(qos, [8]);
    assert!(n1.system_qos_exclusive, "exclusive unless said otherwise");
    assert_eq!(
        c.str(n1.topology_policies[0].to_native()),
        "SingleNUMANodePodLevel"
    );
    assert_eq!(n1.zones.len(), 2);
    assert_eq!(n1.zones[1].numa.as_ref().map(|n| n.to_native()), Some(1));
    assert_eq!(n1.zones[0].resources[0].available.to_native(), 3_000);

    // n2: its NRT's annotations are unreadable; its Node's reservation is used.
    let n2 = c.node(1).cpu_topology();
    assert!(n2.has_nrt && n2.cpus.is_empty() && n2.shared_pools.is_empty());
    let reserved: Vec<u32> = n2.node_reserved.iter().map(|c| c.to_native()).collect();
    assert_eq!(reserved, [0]);
    assert_eq!(
        c.str(n2.node_reservation_policy.to_native()),
        "ReservedCPUsOnly"
    );

    let warning = snap
        .warnings
        .iter()
        .find(|w| w.code == WarningCode::InvalidTopology)
        .unwrap_or_else(|| panic!("{:?}", snap.warnings));
    assert_eq!(warning.count, 3, "{}", warning.message);
    for part in [
        "NodeResourceTopology n2: annotation node.koordinator.sh/cpu-topology",
        "NodeResourceTopology n2: annotation node.koordinator.sh/cpu-shared-pools: [0].cpuset: invalid range",
        "(3 > 1)",
        "NodeResourceTopology n9: no such node",
    ] {
        assert!(
            warning.message.contains(part),
            "{part} in {}",
            warning.message
        );
    }
    assert!(
        !snap
            .warnings
            .iter()
            .any(|w| w.code == WarningCode::UnknownKind)
    );

    // A live build reads the same topology.
    let (_, live_set) = shared_set(&items);
    let full = build_snapshot(&live_set, 2, 0).unwrap();
    let incremental = LiveRows::default().build(&live_set, 2, 0).unwrap();
    for n in 0..2 {
        assert_eq!(
            full.cluster().node(n).cpu_topology().cpus.len(),
            incremental.cluster().node(n).cpu_topology().cpus.len()
        );
    }
    assert_eq!(full.warnings, incremental.warnings);
}
