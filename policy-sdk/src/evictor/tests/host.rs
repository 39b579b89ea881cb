//! The Host interface, the index and Filter at scale.

use super::*;

#[test]
fn host_interface() {
    let c = TestCluster::new()
        .node(TestNode::new("n1").label("pool", "a"))
        .node(TestNode::new("n2").label("pool", "b"))
        .node(TestNode::new("n3").label("pool", "a").not_ready())
        .node_selector("pool=a")
        .pod(owned_pod("a", "p0"))
        .pod(owned_pod("a", "p1").mirror())
        .pod(owned_pod("a", "p2"));
    let mut s = c.session();
    let n1 = s.node_id("n1");
    let mut ev = s.evictor("test");
    assert_eq!(
        Host::nodes(&mut ev),
        vec![n1],
        "ready nodes matching the policy nodeSelector"
    );
    assert_eq!(
        Host::filter(&mut ev, &[2, 1, 0, 99]),
        vec![2, 0],
        "order kept, unknown dropped"
    );
    assert_eq!(Host::pre_eviction_filter(&mut ev, &[2, 1, 99]), vec![2, 1]);
    assert_eq!(Host::object_json(&mut ev, "Pod", 0), None);
    Host::log(&mut ev, LogLevel::Info, "hello");
    let mut calls = 0;
    let mut json = |kind: &str, i: u32| {
        calls += 1;
        Some(format!("{kind}#{i}"))
    };
    ev.object_json = Some(&mut json);
    assert_eq!(
        Host::object_json(&mut ev, "Node", 1).as_deref(),
        Some("Node#1")
    );
    assert_eq!(Host::propose_eviction(&mut ev, 0, "because"), Ok(()));
    let log = LogEntry {
        level: LogLevel::Info,
        plugin: "test".into(),
        plugin_set: "default".into(),
        message: "hello".into(),
    };
    assert_eq!(ev.logs, vec![log]);
    assert_eq!(calls, 1);
    let mut ev = s.evictor("test");
    assert!(
        ev.logs.is_empty(),
        "every evictor collects its own log lines"
    );
    assert_eq!(Host::filter(&mut ev, &[0]), Vec::<u32>::new());
}

#[test]
fn index_basics() {
    let c = two_nodes()
        .pod(owned_pod("a", "p0").cpu("100m").memory("1Gi"))
        .pod(owned_pod("a", "p1").on_node("n2").cpu("200m"))
        .pod(owned_pod("a", "p2").cpu("300m").phase(PodPhase::Failed))
        .pod(owned_pod("a", "p3").cpu("400m").terminating())
        .pod(owned_pod("a", "p4").on_node("gone"))
        .pod(
            TestPod::new("a", "p5")
                .owned_by_uid("ReplicaSet", "rs", "uid-replicaset-a-rs")
                .owned_by_uid("X", "x", "uid-replicaset-a-rs"),
        );
    let s = c.session();
    let cluster = s.cluster();
    let idx = s.index();
    let (n1, n2) = (s.node_id("n1"), s.node_id("n2"));
    assert!(idx.is_for(cluster));
    assert_eq!(idx.pods_on_node(n1), &[0, 2, 3]);
    assert_eq!(idx.pods_on_node(n2), &[1]);
    assert_eq!(idx.pods_on_node(99), &[] as &[u32]);
    assert_eq!(idx.active_pod_count(n1), 2);
    let cpu = idx.ids().cpu.unwrap();
    assert_eq!(idx.requested(n1, cpu), 500);
    assert_eq!(
        idx.requested(n1, idx.ids().memory.unwrap()),
        1024 * 1024 * 1024 * 1000
    );
    assert_eq!(idx.ready_nodes(), &[n1, n2]);
    let uid = cluster.lookup("uid-replicaset-a-rs").unwrap();
    assert_eq!(
        idx.pods_with_owner_uid(uid),
        6,
        "a pod listing the uid twice counts once"
    );
    assert_eq!(
        idx.nodes_in_scope(
            cluster,
            &Selector::parse("kubernetes.io/hostname=n2").unwrap()
        ),
        vec![n2]
    );
}

/// Performance check at production scale (150k pods, 5k nodes). Run it with
/// `cargo test --release -p rebalancer-policy-sdk --features host -- --ignored filter_at_scale --nocapture`.
#[test]
#[ignore = "slow in debug builds; run in release"]
fn filter_at_scale() {
    let mut c = TestCluster::new()
        .evictor_args(r#"{"minReplicas": 2, "minPodAge": "1h", "labelSelector": {"matchLabels": {"tier": "app"}}}"#);
    for n in 0..5_000 {
        c = c.node(TestNode::new(&format!("node-{n}")).label("zone", &format!("z{}", n % 3)));
    }
    for i in 0..150_000 {
        let mut p = TestPod::new(&format!("ns-{}", (i / 3) % 50), &format!("pod-{i}"))
            .on_node(&format!("node-{}", i % 5_000))
            .owned_by("ReplicaSet", &format!("rs-{}", i / 3))
            .label("tier", if i % 7 == 0 { "db" } else { "app" })
            .cpu("100m")
            .memory("128Mi");
        if i % 11 == 0 {
            p = p.empty_dir("cache");
        }
        c = c.pod(p);
    }
    for ns in 0..50 {
        c = c.pdb(
            TestPdb::new(&format!("ns-{ns}"), "pdb")
                .match_label("tier", "db")
                .disruptions_allowed(3),
        );
    }
    let started = std::time::Instant::now();
    let mut s = c.session();
    let setup = started.elapsed();
    let cluster = s.cluster();
    let started = std::time::Instant::now();
    let index = ClusterIndex::new(cluster);
    let index_time = started.elapsed();
    drop(index);
    let all: Vec<u32> = (0..150_000).collect();
    let mut ev = s.evictor("bench");
    let started = std::time::Instant::now();
    let passed = Host::filter(&mut ev, &all);
    let filter_time = started.elapsed();
    let started = std::time::Instant::now();
    let pre = Host::pre_eviction_filter(&mut ev, &passed);
    let pre_time = started.elapsed();
    eprintln!(
        "session {setup:?}, index {index_time:?}, filter {filter_time:?} ({} pass), pre-eviction {pre_time:?} ({})",
        passed.len(),
        pre.len()
    );
    assert!(!passed.is_empty());

    // Default args, and nodeFit on.
    let cluster = s.cluster();
    let index = ClusterIndex::new(cluster);
    for args in ["{}", r#"{"nodeFit": true}"#] {
        let config =
            EvictorConfig::resolve(&DefaultEvictorArgs::from_json(args).unwrap(), cluster).unwrap();
        let mut state = RunState::new(cluster, Limits::default());
        let nodes = index.ready_nodes().to_vec();
        let mut ev = Evictor::new(
            cluster, &index, &config, &mut state, &nodes, "bench", "default",
        );
        let started = std::time::Instant::now();
        let passed = Host::filter(&mut ev, &all);
        let filter_time = started.elapsed();
        let started = std::time::Instant::now();
        let pre = Host::pre_eviction_filter(&mut ev, &passed);
        let pre_time = started.elapsed();
        eprintln!(
            "{args}: filter {filter_time:?} ({} pass), pre-eviction {pre_time:?} ({} pass)",
            passed.len(),
            pre.len()
        );
    }
}
