//! Predicate and score tests over small snapshots.

use serde_json::{Value, json};

use super::*;
use crate::fixtures::{node, pod, snapshot};

fn place(
    items: &[Value],
    pod_name: &str,
    held: &[Held],
    c: Constraints<'_>,
) -> Result<String, String> {
    let snap = snapshot(items);
    let cluster = snap.cluster();
    let index = snap.index();
    let s = Scheduler::new(cluster, &index, held);
    let p = cluster
        .pods()
        .find(|p| p.name() == pod_name)
        .expect("pod in fixture");
    s.place(p, c)
        .map(|n| cluster.node(n).name().to_owned())
        .map_err(|u| u.to_string())
}

fn with(mut v: Value, path: &[&str], value: Value) -> Value {
    let mut at = &mut v;
    for k in path {
        at = &mut at[*k];
    }
    *at = value;
    v
}

#[test]
fn filters_and_least_allocated_score() {
    let base = || {
        vec![
            node("a", "4", "8Gi"),
            node("b", "4", "8Gi"),
            node("c", "4", "8Gi"),
            // a is busy, b lightly used, c empty.
            pod("ns", "fill-a", Some("a"), "3", "4Gi", None),
            pod("ns", "fill-b", Some("b"), "1", "1Gi", None),
            pod(
                "ns",
                "web-1",
                Some("a"),
                "500m",
                "512Mi",
                Some(("ReplicaSet", "web")),
            ),
        ]
    };
    let exclude_a = ["a".to_string()];
    let ex = Constraints {
        target: None,
        exclude: &exclude_a,
    };
    // (case, fixture, expected)
    let cases: Vec<(&str, Vec<Value>, Result<&str, &str>)> = vec![
        ("least allocated wins", base(), Ok("c")),
        (
            "unready node skipped",
            {
                let mut f = base();
                f[2] = with(
                    f[2].clone(),
                    &["status", "conditions"],
                    json!([{"type": "Ready", "status": "False"}]),
                );
                f
            },
            Ok("b"),
        ),
        (
            "cordoned node skipped",
            {
                let mut f = base();
                f[2] = with(f[2].clone(), &["spec", "unschedulable"], json!(true));
                f
            },
            Ok("b"),
        ),
        (
            "NoSchedule taint not tolerated",
            {
                let mut f = base();
                f[2] = with(
                    f[2].clone(),
                    &["spec", "taints"],
                    json!([{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]),
                );
                f
            },
            Ok("b"),
        ),
        (
            "taint tolerated",
            {
                let mut f = base();
                f[2] = with(
                    f[2].clone(),
                    &["spec", "taints"],
                    json!([{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]),
                );
                f[5] = with(
                    f[5].clone(),
                    &["spec", "tolerations"],
                    json!([{"key": "gpu", "operator": "Exists"}]),
                );
                f
            },
            Ok("c"),
        ),
        (
            "PreferNoSchedule does not filter",
            {
                let mut f = base();
                f[2] = with(
                    f[2].clone(),
                    &["spec", "taints"],
                    json!([{"key": "x", "effect": "PreferNoSchedule"}]),
                );
                f
            },
            Ok("c"),
        ),
        (
            "node selector",
            {
                let mut f = base();
                f[5] = with(
                    f[5].clone(),
                    &["spec", "nodeSelector"],
                    json!({"kubernetes.io/hostname": "b"}),
                );
                f
            },
            Ok("b"),
        ),
        (
            "required node affinity",
            {
                let mut f = base();
                f[5] = with(
                    f[5].clone(),
                    &["spec", "affinity"],
                    json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "NotIn", "values": ["c"]}]}]}}}),
                );
                f
            },
            Ok("b"),
        ),
        (
            "anti-affinity against a pod on the node",
            {
                let mut f = base();
                f.push(pod(
                    "ns",
                    "web-2",
                    Some("c"),
                    "100m",
                    "64Mi",
                    Some(("ReplicaSet", "web")),
                ));
                f[5] = with(
                    f[5].clone(),
                    &["spec", "affinity"],
                    json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}]}}),
                );
                f
            },
            Ok("b"),
        ),
        (
            "no resources anywhere",
            {
                let mut f = base();
                f[5]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!("5");
                f
            },
            Err(
                "0/3 nodes are available: 1 node(s) excluded (the pod's current node), 2 Insufficient cpu.",
            ),
        ),
    ];
    for (name, fixture, want) in cases {
        let got = place(&fixture, "web-1", &[], ex);
        assert_eq!(got.as_deref().map_err(String::as_str), want, "{name}");
    }
}

#[test]
fn target_and_exclusions() {
    let f = vec![
        node("a", "4", "8Gi"),
        node("b", "4", "8Gi"),
        pod(
            "ns",
            "web-1",
            Some("a"),
            "1",
            "1Gi",
            Some(("ReplicaSet", "web")),
        ),
    ];
    let none: [String; 0] = [];
    let t = |target| Constraints {
        target,
        exclude: &none,
    };
    assert_eq!(place(&f, "web-1", &[], t(Some("a"))), Ok("a".into()));
    assert_eq!(
        place(&f, "web-1", &[], t(Some("zz"))),
        Err("0/2 nodes are available: 2 node(s) were not the requested target node.".into())
    );
}

#[test]
fn reservations_hold_capacity_pod_slots_and_labels() {
    let f = vec![
        node("a", "4", "8Gi"),
        node("b", "4", "8Gi"),
        node("c", "2", "8Gi"),
        pod(
            "ns",
            "web-1",
            Some("a"),
            "2",
            "1Gi",
            Some(("ReplicaSet", "web")),
        ),
        pod(
            "ns",
            "web-2",
            Some("a"),
            "2",
            "1Gi",
            Some(("ReplicaSet", "web")),
        ),
    ];
    let snap = snapshot(&f);
    let cluster = snap.cluster();
    let node_id = |n: &str| cluster.nodes().find(|x| x.name() == n).unwrap().id;
    let pod_id = |n: &str| cluster.pods().find(|x| x.name() == n).unwrap().id;
    let exclude = ["a".to_string()];
    let c = Constraints {
        target: None,
        exclude: &exclude,
    };
    // Without reservations: b (4 free cpu) beats c (2 free).
    assert_eq!(place(&f, "web-1", &[], c), Ok("b".into()));
    // A reservation of 3 cpu on b: web-1 (2 cpu) no longer fits b; c has exactly 2.
    let held = [Held {
        node: node_id("b"),
        requests: vec![("cpu".into(), 3000), ("memory".into(), 1 << 30)],
        template_pod: Some(pod_id("web-2")),
    }];
    assert_eq!(place(&f, "web-1", &held, c), Ok("c".into()));
    let index = snap.index();
    let s = Scheduler::new(cluster, &index, &held);
    assert_eq!(s.held_on(node_id("b"), "cpu"), 3000);
    assert_eq!(s.held_count(node_id("b")), 1);
    assert_eq!(
        s.unfit(cluster.pod(pod_id("web-1")), cluster.node(node_id("b"))),
        Some(Unfit::Reserved("cpu".into()))
    );
    // Anti-affinity counts the reserved pod's labels: web-1 refuses a node holding a web
    // reservation even when resources fit.
    let mut f2 = f.clone();
    f2[3]["spec"]["affinity"] = json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}]}});
    let small = [Held {
        node: node_id("b"),
        requests: vec![("cpu".into(), 100)],
        template_pod: Some(pod_id("web-2")),
    }];
    assert_eq!(place(&f2, "web-1", &small, c), Ok("c".into()));
    let only_b = ["a".to_string(), "c".to_string()];
    let err = place(
        &f2,
        "web-1",
        &small,
        Constraints {
            target: None,
            exclude: &only_b,
        },
    )
    .unwrap_err();
    assert!(
        err.contains("1 node(s) didn't match pod anti-affinity rules"),
        "{err}"
    );
}

#[test]
fn own_node_capacity_is_freed_for_a_replacement() {
    // The evicted pod's own node counts its requests as freed: a full node can take the
    // replacement back when nothing else fits.
    let f = vec![
        node("a", "2", "4Gi"),
        node("b", "1", "4Gi"),
        pod(
            "ns",
            "web-1",
            Some("a"),
            "2",
            "1Gi",
            Some(("ReplicaSet", "web")),
        ),
    ];
    let none: [String; 0] = [];
    assert_eq!(
        place(
            &f,
            "web-1",
            &[],
            Constraints {
                target: None,
                exclude: &none
            }
        ),
        Ok("a".into())
    );
    // … but only when it really fits there once the original is gone: with another 1-cpu pod
    // on a, the 2-cpu copy fits nowhere (NodeFit alone would let it back onto a).
    let mut over = f.clone();
    over.push(pod("ns", "other", Some("a"), "1", "1Gi", None));
    assert_eq!(
        place(
            &over,
            "web-1",
            &[],
            Constraints {
                target: None,
                exclude: &none
            }
        ),
        Err("0/2 nodes are available: 2 Insufficient cpu.".into())
    );
}
