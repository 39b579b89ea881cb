//! What-if placement, per-node load and balance over small snapshots.

use serde_json::{Value, json};

use super::*;
use crate::fixtures::{node, pod, snapshot};

fn run(items: &[Value], held: &[Held], moves: &[(&str, &str)]) -> WhatIf {
    let snap = snapshot(items);
    let index = snap.index();
    let requests: Vec<MoveRequest<'_>> = moves
        .iter()
        .map(|&(pod_uid, from)| MoveRequest { pod_uid, from })
        .collect();
    what_if(snap.cluster(), &index, held, &requests)
}

fn to(landing: &Landing) -> &str {
    match landing {
        Landing::Node(n) => n,
        Landing::Nowhere(why) => why,
    }
}

fn stat<'n>(nodes: &'n [NodeStat], name: &str) -> &'n NodeStat {
    nodes
        .iter()
        .find(|n| n.name == name)
        .unwrap_or_else(|| panic!("node {name} in {nodes:?}"))
}

/// a is full of 3-cpu pods; b has 3 cpu free, c 4.
fn crowded() -> Vec<Value> {
    vec![
        node("a", "16", "32Gi"),
        node("b", "4", "8Gi"),
        node("c", "4", "8Gi"),
        pod("ns", "fill-b", Some("b"), "1", "1Gi", None),
        pod(
            "ns",
            "big-1",
            Some("a"),
            "3",
            "1Gi",
            Some(("ReplicaSet", "big")),
        ),
        pod(
            "ns",
            "big-2",
            Some("a"),
            "3",
            "1Gi",
            Some(("ReplicaSet", "big")),
        ),
        pod(
            "ns",
            "big-3",
            Some("a"),
            "3",
            "1Gi",
            Some(("ReplicaSet", "big")),
        ),
    ]
}

#[test]
fn each_move_lands_where_a_reservation_would_and_holds_its_room_for_the_next() {
    let items = crowded();
    // The first move alone goes where the backend's reservation (exclude the source) goes.
    let snap = snapshot(&items);
    let index = snap.index();
    let cluster = snap.cluster();
    let big1 = cluster.pods().find(|p| p.name() == "big-1").unwrap();
    let exclude = ["a".to_string()];
    let reserved = Scheduler::new(cluster, &index, &[])
        .place(
            big1,
            Constraints {
                target: None,
                exclude: &exclude,
            },
        )
        .map(|n| cluster.node(n).name().to_owned());
    assert_eq!(reserved.as_deref(), Ok("c"));

    let result = run(
        &items,
        &[],
        &[
            ("uid-ns-big-1", "a"),
            ("uid-ns-big-2", "a"),
            ("uid-ns-big-3", "a"),
        ],
    );
    let landed: Vec<&str> = result.landings.iter().map(to).collect();
    assert_eq!(landed[0], "c", "{landed:?}");
    // c now holds 3 of its 4 cpu for big-1: big-2 goes to b (3 free), big-3 fits nowhere.
    assert_eq!(landed[1], "b", "{landed:?}");
    assert!(
        landed[2].starts_with("no node fits: 0/3 nodes are available: ")
            && landed[2].contains("1 node(s) excluded (the pod's current node)")
            && landed[2].contains("2 Insufficient cpu (held by reservations)"),
        "{}",
        landed[2]
    );
}

#[test]
fn reservations_already_held_count_against_the_targets() {
    let items = crowded();
    // A reservation holds 2 cpu on c: big-1 (3 cpu) no longer fits there, but does on b.
    let held = [Held {
        node: 2,
        requests: vec![("cpu".into(), 2000)],
        template_pod: None,
    }];
    let result = run(&items, &held, &[("uid-ns-big-1", "a")]);
    assert_eq!(result.landings, [Landing::Node("b".into())]);
}

#[test]
fn pods_that_cannot_move_say_why_and_move_nothing() {
    let mut items = crowded();
    items[6]["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    let result = run(
        &items,
        &[],
        &[
            ("uid-ns-gone", "a"),
            ("uid-ns-big-1", "b"),
            ("uid-ns-big-3", "a"),
            ("uid-ns-big-2", "a"),
            ("uid-ns-big-2", "a"),
        ],
    );
    let landed: Vec<&str> = result.landings.iter().map(to).collect();
    assert_eq!(
        landed,
        [
            "pod no longer exists",
            "pod is now on node a, not on node b where it was proposed",
            "pod is already terminating (being deleted)",
            "c",
            "pod is already moved by an earlier move of this what-if (#4)",
        ]
    );
    // Only big-2 moved: a → c.
    assert_eq!(stat(&result.after, "a").cpu.requested, 6000);
    assert_eq!(stat(&result.after, "c").cpu.requested, 3000);
    assert_eq!(stat(&result.after, "b"), stat(&result.before, "b"));
}

#[test]
fn requests_pods_and_measured_usage_move_from_source_to_target() {
    let mut items = vec![
        node("n1", "8", "16Gi"),
        node("n2", "8", "16Gi"),
        node("n3", "8", "16Gi"),
        // n3 is busier than n2, so moves from n1 go to n2.
        pod("shop", "filler", Some("n3"), "4", "4Gi", None),
        pod("shop", "web-1", Some("n1"), "1", "1Gi", None),
        pod("shop", "web-2", Some("n1"), "500m", "512Mi", None),
    ];
    let metric = |node: &str, cpu: &str, pods: Value| {
        json!({
            "apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric",
            "metadata": {"name": node},
            "status": {
                "updateTime": "2026-01-01T00:00:00Z",
                "nodeMetric": {"nodeUsage": {"resources": {"cpu": cpu, "memory": "2Gi"}}},
                "podsMetric": pods,
            }
        })
    };
    items.push(metric(
        "n1",
        "3",
        json!([{"namespace": "shop", "name": "web-1",
                "podUsage": {"resources": {"cpu": "1200m", "memory": "1Gi"}}}]),
    ));
    items.push(metric("n2", "1", json!([])));
    // n3 is not measured.
    let result = run(&items, &[], &[("uid-shop-web-1", "n1")]);
    assert_eq!(result.landings, [Landing::Node("n2".into())]);
    let (b1, a1) = (stat(&result.before, "n1"), stat(&result.after, "n1"));
    let (b2, a2) = (stat(&result.before, "n2"), stat(&result.after, "n2"));
    assert_eq!((b1.cpu.requested, a1.cpu.requested), (1500, 500));
    assert_eq!((b2.cpu.requested, a2.cpu.requested), (0, 1000));
    assert_eq!(
        (b1.memory.requested, a1.memory.requested),
        (1536 << 20, 512 << 20)
    );
    assert_eq!((b1.pods.count, a1.pods.count), (2, 1));
    assert_eq!((b2.pods.count, a2.pods.count), (0, 1));
    assert_eq!((b1.cpu.used, a1.cpu.used), (Some(3000), Some(1800)));
    assert_eq!((b2.cpu.used, a2.cpu.used), (Some(1000), Some(2200)));
    assert_eq!(
        (b2.memory.used, a2.memory.used),
        (Some(2 << 30), Some(3 << 30))
    );
    assert_eq!(stat(&result.after, "n3").cpu.used, None);
    assert_eq!(b1.cpu.allocatable, 8000);
    assert_eq!(b1.memory.allocatable, 16 << 30);
    assert_eq!(b1.pods.capacity, 110);

    // web-2 has no measurement: requests move, the measured usage stays where it is.
    let result = run(&items, &[], &[("uid-shop-web-2", "n1")]);
    assert_eq!(result.landings, [Landing::Node("n2".into())]);
    assert_eq!(stat(&result.after, "n1").cpu.requested, 1000);
    assert_eq!(stat(&result.after, "n1").cpu.used, Some(3000));
    assert_eq!(stat(&result.after, "n2").cpu.used, Some(1000));
}

fn stat_of(name: &str, cpu: (i64, i64, Option<i64>), pods: (i64, i64)) -> NodeStat {
    NodeStat {
        name: name.into(),
        ready: true,
        unschedulable: false,
        cpu: ResourceStat {
            requested: cpu.0,
            allocatable: cpu.1,
            used: cpu.2,
        },
        memory: ResourceStat {
            requested: 0,
            allocatable: 0,
            used: None,
        },
        pods: PodStat {
            count: pods.0,
            capacity: pods.1,
        },
    }
}

fn threshold(basis: Basis, deviation: bool, low: f64, high: f64) -> Threshold {
    Threshold {
        plugin: "LowNodeUtilization".into(),
        basis,
        deviation,
        low: Levels {
            cpu: Some(low),
            memory: None,
            pods: Some(low),
        },
        high: Levels {
            cpu: Some(high),
            memory: None,
            pods: None,
        },
    }
}

#[test]
fn balance_spreads_percentages_and_counts_nodes_beyond_the_first_threshold() {
    let mut down = stat_of("down", (1000, 1000, Some(1000)), (10, 10));
    down.ready = false;
    let nodes = [
        stat_of("a", (100, 1000, Some(900)), (1, 10)),
        stat_of("b", (500, 1000, None), (5, 10)),
        stat_of("c", (900, 1000, Some(300)), (9, 10)),
        down,
    ];
    let b = balance(&nodes, &[]);
    // Ready nodes only: 10 %, 50 %, 90 %.
    assert!((b.cpu.mean - 50.0).abs() < 1e-9, "{b:?}");
    assert!(
        (b.cpu.stddev - (3200.0f64 / 3.0).sqrt()).abs() < 1e-9,
        "{b:?}"
    );
    assert_eq!((b.cpu.min, b.cpu.max), (10.0, 90.0));
    assert_eq!((b.cpu.above, b.cpu.below), (0, 0), "no thresholds");
    // No memory anywhere: nothing to spread.
    assert_eq!(b.memory, Spread::default());

    let b = balance(&nodes, &[threshold(Basis::Requested, false, 20.0, 80.0)]);
    assert_eq!((b.cpu.above, b.cpu.below), (1, 1));
    assert_eq!((b.pods.above, b.pods.below), (0, 1), "pods: low only");
    // High is strict, low is not (descheduler's "at or below").
    let b = balance(&nodes, &[threshold(Basis::Requested, false, 10.0, 90.0)]);
    assert_eq!((b.cpu.above, b.cpu.below), (0, 1));

    // Deviation: low = mean − 30 = 20, high = mean + 30 = 80.
    let b = balance(&nodes, &[threshold(Basis::Requested, true, 30.0, 30.0)]);
    assert_eq!((b.cpu.above, b.cpu.below), (1, 1));
    let b = balance(&nodes, &[threshold(Basis::Requested, true, 45.0, 45.0)]);
    assert_eq!((b.cpu.above, b.cpu.below), (0, 0));

    // Usage basis: measured nodes only (a at 90 %, c at 30 %).
    let b = balance(&nodes, &[threshold(Basis::Usage, false, 40.0, 80.0)]);
    assert!((b.cpu.mean - 60.0).abs() < 1e-9, "{b:?}");
    assert_eq!((b.cpu.above, b.cpu.below), (1, 1));
    assert!(
        (b.pods.mean - 50.0).abs() < 1e-9,
        "pods are counted, not measured"
    );
}

#[test]
fn node_stats_match_the_snapshot() {
    let items = crowded();
    let snap = snapshot(&items);
    let nodes = node_stats(snap.cluster());
    assert_eq!(
        nodes.iter().map(|n| n.name.as_str()).collect::<Vec<_>>(),
        ["a", "b", "c"]
    );
    let a = stat(&nodes, "a");
    assert_eq!(
        (a.cpu.requested, a.cpu.allocatable, a.cpu.used),
        (9000, 16000, None)
    );
    assert_eq!((a.pods.count, a.pods.capacity), (3, 110));
    assert!(a.ready && !a.unschedulable);
}

/// The figure asked of what-if: 1,000 moves on the bench's large reference cluster (5,000
/// nodes, 150,000 pods, with the Koordinator layer so usage moves too). Reports, never asserts:
/// `cargo test --release -p rebalancer-cluster --lib whatif -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement: builds the 5,000-node reference cluster"]
fn measure_a_thousand_moves_on_the_large_reference_cluster() {
    use rebalancer_sim::reference::{Size, write_koordinator_scenario};
    use std::time::Instant;

    let mut document = Vec::new();
    write_koordinator_scenario(Size::Large, &mut document).expect("generated");
    #[derive(serde::Deserialize)]
    struct Scenario<'a> {
        #[serde(borrow)]
        objects: &'a serde_json::value::RawValue,
    }
    let objects = serde_json::from_slice::<Scenario<'_>>(&document)
        .expect("a scenario")
        .objects
        .get()
        .as_bytes()
        .to_vec();
    drop(document);
    let set = crate::parse_list(objects, crate::Format::Json).expect("parses");
    let snap = crate::build_snapshot(&set, 1, 1_767_225_600_000).expect("builds");
    let cluster = snap.cluster();
    let index = snap.index();
    let candidates: Vec<_> = cluster
        .pods()
        .filter(|p| p.node().is_some() && !p.is_terminal())
        .collect();
    let step = (candidates.len() / 1000).max(1);
    let chosen: Vec<_> = candidates.iter().step_by(step).take(1000).collect();
    let requests: Vec<MoveRequest<'_>> = chosen
        .iter()
        .map(|p| MoveRequest {
            pod_uid: p.uid(),
            from: p.node_name(),
        })
        .collect();
    // The machine may be busy: the thread's own CPU time is the steadier figure.
    let thread_cpu = || {
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: getrusage writes into the struct it is given.
        unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
        let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        tv(usage.ru_utime) + tv(usage.ru_stime)
    };
    let (started, cpu) = (Instant::now(), thread_cpu());
    let result = what_if(cluster, &index, &[], &requests);
    let (elapsed, cpu) = (started.elapsed(), thread_cpu() - cpu);
    let placed = result
        .landings
        .iter()
        .filter(|l| matches!(l, Landing::Node(_)))
        .count();
    let started = Instant::now();
    let _ = balance(&result.after, &[]);
    let summary = started.elapsed();
    eprintln!(
        "what-if: {} moves ({placed} placed) on {} nodes / {} pods in {:.1} ms wall, {:.1} ms \
         CPU (balance {:.2} ms)",
        requests.len(),
        cluster.node_count(),
        cluster.pod_count(),
        elapsed.as_secs_f64() * 1000.0,
        cpu * 1000.0,
        summary.as_secs_f64() * 1000.0,
    );
    assert_eq!(result.landings.len(), requests.len());
}
