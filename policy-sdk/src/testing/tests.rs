//! Tests of the test builders and the native runner.

use super::*;
use crate::model::ContainerKind;
use crate::policy::{Context, ExtensionPoint, Policy, PolicyInfo, Refusal};
use serde::{Deserialize, Serialize};

/// Proposes every pod on the nodes in scope that passes both filters, node by node.
struct EvictEverything;

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Args {
    #[serde(default)]
    namespace: Option<String>,
}

impl Policy for EvictEverything {
    type Args = Args;

    fn info() -> PolicyInfo {
        PolicyInfo {
            name: "EvictEverything".into(),
            version: "0.1.0".into(),
            description: "test policy".into(),
            extension_points: vec![ExtensionPoint::Deschedule],
            args_schema: serde_json::json!({}),
            default_args: serde_json::json!({}),
        }
    }

    fn deschedule(ctx: &mut Context<'_>, args: &Args) -> Result<(), String> {
        let cluster = ctx.cluster;
        let by_node = cluster.pods_by_node();
        for node in ctx.nodes() {
            let pods: Vec<u32> = by_node[node as usize]
                .iter()
                .copied()
                .filter(|&p| {
                    args.namespace
                        .as_deref()
                        .is_none_or(|ns| cluster.pod(p).namespace() == ns)
                })
                .collect();
            let pods = ctx.filter(&pods);
            let pods = ctx.pre_eviction_filter(&pods);
            for pod in pods {
                match ctx.propose_eviction(pod, "everything must go") {
                    Ok(()) => ctx.info(&format!("proposed {}", cluster.pod(pod).name())),
                    Err(Refusal::NodeLimit) => break,
                    Err(Refusal::TotalLimit) => return Ok(()),
                    Err(_) => {}
                }
            }
        }
        Ok(())
    }
}

fn cluster() -> TestCluster {
    TestCluster::new()
        .node(TestNode::new("n1").label("pool", "a"))
        .node(TestNode::new("n2").label("pool", "b"))
        .pod(
            TestPod::new("shop", "web-1")
                .on_node("n1")
                .owned_by("ReplicaSet", "web"),
        )
        .pod(
            TestPod::new("shop", "web-2")
                .on_node("n1")
                .owned_by("ReplicaSet", "web"),
        )
        .pod(
            TestPod::new("pay", "api-1")
                .on_node("n2")
                .owned_by("ReplicaSet", "api"),
        )
        .pod(
            TestPod::new("kube-system", "agent")
                .on_node("n2")
                .owned_by("DaemonSet", "agent"),
        )
        .pod(TestPod::new("shop", "bare").on_node("n2"))
}

#[test]
fn run_reports_proposals_and_logs() {
    let run = run::<EvictEverything>(&cluster(), Deschedule, "");
    run.assert_ok();
    assert_eq!(run.evicted_names(), vec!["web-1", "web-2", "api-1"]);
    assert_eq!(run.evicted_from("n2"), vec!["api-1"]);
    assert_eq!(run.evicted()[2], ("pay", "api-1"));
    assert!(run.was_evicted("shop", "web-2"));
    assert!(!run.was_evicted("shop", "bare"));
    let p = &run.proposals[0];
    assert_eq!(
        (
            p.node.as_str(),
            p.reason.as_str(),
            p.plugin.as_str(),
            p.plugin_set.as_str()
        ),
        ("n1", "everything must go", "EvictEverything", "default")
    );
    assert_eq!(
        run.log_messages(),
        vec!["proposed web-1", "proposed web-2", "proposed api-1"]
    );
    assert!(run.refusals.is_empty());

    let run = cluster().run::<EvictEverything>(Deschedule, r#"{"namespace": "pay"}"#);
    assert_eq!(run.evicted_names(), vec!["api-1"]);
}

#[test]
fn run_applies_limits_selector_and_evictor_args() {
    let run = cluster()
        .max_per_node(1)
        .run::<EvictEverything>(Deschedule, "{}");
    assert_eq!(run.evicted_names(), vec!["web-1", "api-1"]);
    assert_eq!(run.refused_names(), vec!["web-2"]);
    assert_eq!(run.refusals[0].refusal, Refusal::NodeLimit);

    let run = cluster()
        .node_selector("pool=b")
        .run::<EvictEverything>(Deschedule, "{}");
    assert_eq!(run.evicted_names(), vec!["api-1"]);

    let run = cluster()
        .evictor_args(r#"{"podProtections": {"defaultDisabled": ["DaemonSetPods"]}}"#)
        .run::<EvictEverything>(Deschedule, "{}");
    assert_eq!(
        run.evicted_names(),
        vec!["web-1", "web-2", "api-1", "agent"]
    );
}

#[test]
fn run_reports_setup_and_policy_errors() {
    let run = cluster().run::<EvictEverything>(Deschedule, r#"{"bogus": 1}"#);
    assert!(
        run.result.as_ref().unwrap_err().contains("invalid args"),
        "{:?}",
        run.result
    );
    let run = cluster()
        .evictor_args(r#"{"noEvictionPolicy": "Never"}"#)
        .run::<EvictEverything>(Deschedule, "");
    assert!(
        run.result
            .unwrap_err()
            .contains("invalid evictor args: noEvictionPolicy")
    );
    let run = cluster()
        .evictor_args("{")
        .run::<EvictEverything>(Deschedule, "");
    assert!(run.result.unwrap_err().contains("invalid evictor args"));
    let run = cluster()
        .node_selector("pool in a")
        .run::<EvictEverything>(Deschedule, "");
    assert!(run.result.unwrap_err().contains("invalid node selector"));
    let run = cluster().run::<EvictEverything>(Balance, "");
    assert!(
        run.result
            .unwrap_err()
            .contains("does not implement the balance")
    );
}

#[test]
#[should_panic(expected = "policy failed")]
fn assert_ok_panics_on_errors() {
    cluster().run::<EvictEverything>(Balance, "").assert_ok();
}

#[test]
fn session_runs_share_the_run_state() {
    let mut session = cluster().max_total(2).session();
    let first = session.run_in::<EvictEverything>("hygiene", Deschedule, r#"{"namespace": "pay"}"#);
    assert_eq!(first.evicted_names(), vec!["api-1"]);
    assert_eq!(first.proposals[0].plugin_set, "hygiene");
    let second = session.run::<EvictEverything>(Deschedule, "{}");
    assert_eq!(
        second.evicted_names(),
        vec!["web-1"],
        "one left of the total limit"
    );
    assert_eq!(second.refused_names(), vec!["web-2"]);
    assert_eq!(session.state().total(), 2);
    let third = session.run::<EvictEverything>(Deschedule, "{}");
    assert!(third.proposals.is_empty());
    assert_eq!(
        third.refused_names(),
        vec!["web-2"],
        "web-1 and api-1 are terminating now"
    );
}

#[test]
fn snapshot_contents() {
    let c = TestCluster::new()
        .now_ms(10 * DAY_MS)
        .priority_class("high", 5000)
        .namespace(TestNamespace::new("shop").label("team", "a"))
        .node(
            TestNode::new("n1")
                .cpu("8")
                .allocatable("nvidia.com/gpu", "2")
                .taint("k", "v", NoExecute)
                .unschedulable(),
        )
        .pvc("shop", "data", Some("gp3"))
        .pod(
            TestPod::new("shop", "app")
                .on_node("n1")
                .owned_by("ReplicaSet", "app")
                .priority_class("high")
                .cpu("250m")
                .memory("64Mi")
                .guaranteed()
                .image("nginx:1")
                .container(
                    TestContainer::new("side", "envoy")
                        .cpu("100m")
                        .limit("cpu", "100m")
                        .memory("1Mi")
                        .limit("memory", "1Mi"),
                )
                .init_container(TestContainer::new("init", "busybox").cpu("2"))
                .restarts(3)
                .toleration("k", "v", Some(NoExecute))
                .pvc("data", "data")
                .created_ago_secs(60)
                .started_ago_secs(30),
        )
        .pod(
            TestPod::new("other", "pending")
                .phase(PodPhase::Pending)
                .not_started(),
        )
        .pod(
            TestPod::new("other", "sidecars")
                .cpu("1")
                .init_container(TestContainer::new("s", "x").cpu("500m").sidecar()),
        )
        .pdb(
            TestPdb::new("shop", "app")
                .match_label("app", "x")
                .disruptions_allowed(1)
                .healthy(2, 1)
                .expected_pods(2),
        );
    let s = c.session();
    let cluster = s.cluster();
    assert_eq!(cluster.time_ms(), 10 * DAY_MS);
    let app = cluster.pod(0);
    let cpu = cluster.lookup("cpu").unwrap();
    assert_eq!(app.request(cpu), 2000, "max(app sum 350m, init 2)");
    assert_eq!(
        app.qos(),
        QosClass::Burstable,
        "the init container has no limits"
    );
    assert_eq!(app.priority(), Some(5000));
    assert_eq!(app.owner_kind(), "ReplicaSet");
    assert_eq!(app.start_ms(), Some(10 * DAY_MS - 30_000));
    assert_eq!(app.creation_ms(), 10 * DAY_MS - 60_000);
    assert!(s.index().pod_is_ready(0));
    let images: Vec<&str> = app
        .containers(ContainerKind::App)
        .map(|c| cluster.str(c.image.to_native()))
        .collect();
    assert_eq!(images, vec!["nginx:1", "envoy"]);
    assert_eq!(
        app.containers(ContainerKind::App)
            .next()
            .unwrap()
            .restart_count
            .to_native(),
        3
    );
    let pending = cluster.pod(1);
    assert_eq!(pending.node(), None);
    assert_eq!(pending.start_ms(), None);
    assert!(!s.index().pod_is_ready(1));
    assert_eq!(
        cluster.pod(2).request(cpu),
        1500,
        "sidecars add to the app containers"
    );
    assert_eq!(cluster.pod(2).qos(), QosClass::Burstable);
    let node = cluster.node(0);
    assert_eq!(node.label("kubernetes.io/hostname"), Some("n1"));
    assert_eq!(node.allocatable(cpu), 8000);
    assert_eq!(
        node.allocatable(cluster.lookup("nvidia.com/gpu").unwrap()),
        2000
    );
    assert!(node.is_unschedulable() && node.is_ready());
    let namespaces: Vec<&str> = cluster
        .archive()
        .namespaces
        .iter()
        .map(|n| cluster.str(n.name.to_native()))
        .collect();
    assert_eq!(namespaces, vec!["shop", "other"]);
    let archive = cluster.archive();
    assert_eq!(archive.pvcs.len(), 1);
    assert_eq!(archive.pdbs[0].expected_pods.to_native(), 2);
    assert_eq!(s.pod_id("other", "sidecars"), 2);

    let guaranteed = TestCluster::new()
        .pod(TestPod::new("a", "g").cpu("1").memory("1Gi").guaranteed())
        .pod(TestPod::new("a", "b"))
        .session();
    assert_eq!(guaranteed.cluster().pod(0).qos(), QosClass::Guaranteed);
    assert_eq!(guaranteed.cluster().pod(1).qos(), QosClass::BestEffort);
}

#[test]
#[should_panic(expected = "pod a/p: container main request cpu")]
fn bad_quantities_name_the_object() {
    TestCluster::new()
        .pod(TestPod::new("a", "p").cpu("lots"))
        .snapshot();
}

#[test]
fn test_clusters_carry_annotations_and_usage() {
    use crate::model::ArchivedUsageSource;
    let session = TestCluster::new()
        .now_ms(1_000_000)
        .node(
            TestNode::new("hot")
                .annotation("team", "a")
                .usage("cpu", "3500m")
                .system_usage("cpu", "200m")
                .raw_allocatable("cpu", "8")
                .usage_age_ms(Some(60_000))
                .usage_window_ms(Some(300_000)),
        )
        .node(TestNode::new("quiet"))
        .pod(
            TestPod::new("shop", "web-1")
                .on_node("hot")
                .usage("cpu", "1"),
        )
        .pod(
            TestPod::new("shop", "web-2")
                .on_node("quiet")
                .usage("memory", "1Gi")
                .usage_source(UsageSource::MetricsApi),
        )
        .session();
    let c = session.cluster();
    let hot = c.node(0).usage();
    assert_eq!(hot.source, ArchivedUsageSource::NodeMetric);
    assert_eq!(hot.node[0].milli.to_native(), 3_500);
    assert_eq!(hot.system[0].milli.to_native(), 200);
    assert_eq!(hot.raw_allocatable[0].milli.to_native(), 8_000);
    assert_eq!(hot.update_ms.as_ref().map(|t| t.to_native()), Some(940_000));
    assert_eq!(hot.window_ms.as_ref().map(|t| t.to_native()), Some(300_000));
    assert_eq!(c.node(0).annotation("team"), Some("a"));
    assert_eq!(c.node(1).usage().source, ArchivedUsageSource::None);
    assert_eq!(c.node(1).annotation("team"), None);
    assert_eq!(c.pod(0).usage().usage[0].milli.to_native(), 1_000);
    assert_eq!(c.pod(1).usage().source, ArchivedUsageSource::MetricsApi);
}

/// Counts its runs in its state; fails (after counting) when told to.
struct Counter;

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CounterArgs {
    #[serde(default)]
    fail: bool,
}

impl Policy for Counter {
    type Args = CounterArgs;

    fn info() -> PolicyInfo {
        PolicyInfo {
            name: "Counter".into(),
            version: "0.1.0".into(),
            description: "test policy".into(),
            extension_points: vec![ExtensionPoint::Balance],
            args_schema: serde_json::json!({}),
            default_args: serde_json::json!({}),
        }
    }

    fn balance(ctx: &mut Context<'_>, args: &CounterArgs) -> Result<(), String> {
        let runs: u32 = ctx.state_get_json("runs").unwrap_or(0);
        ctx.state_put_json("runs", &(runs + 1))?;
        ctx.info(&format!("run {}", runs + 1));
        if args.fail {
            return Err("told to fail".into());
        }
        if runs + 1 == 2 {
            ctx.state_put("big", &[0; 64])?;
        }
        Ok(())
    }
}

#[test]
fn state_is_kept_across_simulated_runs_and_only_a_successful_run_commits_it() {
    use crate::state::StateScope;
    let mut state = StateScope::default();
    let c = cluster();
    let first = c.run_with_state::<Counter>(Balance, "{}", &mut state);
    first.assert_ok();
    assert!(first.state_changed);
    assert_eq!(first.log_messages(), ["run 1"]);
    // A failed run counted too, but commits nothing.
    let failed = c.run_with_state::<Counter>(Balance, r#"{"fail": true}"#, &mut state);
    assert!(failed.result.is_err());
    assert!(!failed.state_changed);
    assert_eq!(failed.log_messages(), ["run 2"]);
    let second = c.run_with_state::<Counter>(Balance, "{}", &mut state);
    assert_eq!(second.log_messages(), ["run 2"]);
    assert_eq!(state.get("runs"), Some(&b"2"[..]));
    assert_eq!(state.keys(), ["big", "runs"]);
    // Without a state each run starts empty.
    assert_eq!(c.run::<Counter>(Balance, "{}").log_messages(), ["run 1"]);
    // The cap: a put over it is an error the policy sees.
    let mut small = StateScope::new(Default::default(), 16);
    let run = c.run_with_state::<Counter>(Balance, "{}", &mut small);
    run.assert_ok();
    let run = c.run_with_state::<Counter>(Balance, "{}", &mut small);
    assert!(
        run.result
            .as_ref()
            .unwrap_err()
            .contains("capped at 16 bytes"),
        "{:?}",
        run.result
    );
    assert_eq!(small.get("runs"), Some(&b"1"[..]));
}

#[test]
fn test_nodes_carry_a_cpu_topology_and_koordlets_cpu_annotations() {
    let session = TestCluster::new()
        .node(
            TestNode::new("big")
                .cpus(2, 1, 4, 2)
                .kubelet_cpu_policy("static", "0,8")
                .kubelet_cpu_option("full-pcpus-only", "true")
                .kubelet_pinned("db", "pg-0", "1-2,9-10")
                .shared_pool(0, 0, "3,11")
                .be_shared_pool(1, 1, "4-7,12-15")
                .reserved_cpus("0", "ReservedCPUsOnly")
                .system_qos_cpus("8", false)
                .topology_policy("SingleNUMANodePodLevel"),
        )
        .node(TestNode::new("plain"))
        .pod(TestPod::new("db", "pg-0").on_node("big"))
        .session();
    let c = session.cluster();
    let t = c.node(0).cpu_topology();
    assert!(t.has_nrt);
    // 2 sockets × 4 cores × SMT 2: CPU 9 is core 1's second thread, on socket 0.
    assert_eq!(t.cpus.len(), 16);
    let cpu = &t.cpus[9];
    assert_eq!(
        (
            cpu.core.to_native(),
            cpu.socket.to_native(),
            cpu.numa.to_native()
        ),
        (1, 0, 0)
    );
    assert_eq!(t.cpus[12].socket.to_native(), 1);
    assert_eq!(c.str(t.kubelet_policy.to_native()), "static");
    assert_eq!(t.kubelet_reserved.len(), 2);
    let pinned = &t.pod_allocs[0];
    assert_eq!(c.pod(pinned.pod.to_native()).name(), "pg-0");
    assert_eq!(c.str(pinned.uid.to_native()), c.pod(0).uid());
    assert_eq!(pinned.cpus.len(), 4);
    assert_eq!(t.be_shared_pools[0].cpus.len(), 8);
    assert!(!t.system_qos_exclusive);
    assert_eq!(
        c.str(t.node_reservation_policy.to_native()),
        "ReservedCPUsOnly"
    );
    assert!(!c.node(1).cpu_topology().has_nrt);
}
