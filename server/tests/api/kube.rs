//! The Kubernetes backend end to end: the real server (and, for crashes, the real binary)
//! managing a cluster served by the in-process fake API server, through kube-rs's real client.
//! A small "control plane" task in the test plays koord-scheduler (places Reservations), the
//! default scheduler (binds placeholder pods) and the ReplicaSet controller (replaces evicted
//! pods, binding them into a Reservation when one waits for them).
//!
//! Covered: sync, pushes refused, connection loss in `/readyz`; ReservationFirst through
//! Koordinator Reservations and through placeholder pods; two servers and one Lease; a crash at
//! every pod-migration step; and the RBAC in `deploy/rbac.yaml` is exactly what was used.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use rebalancer_kube_fake::{Access, FakeApiServer, OptionalGroup};
use rebalancer_server::config::{KubeCluster, Settings};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{TestServer, node, pod};

pub const EAST: &str = "east";
const RESERVATION: &str = "scheduling.koordinator.sh/v1alpha1";
const NODES: [&str; 3] = ["n1", "n2", "n3"];
const OWNER_UID: &str = "uid-ReplicaSet-web";

/// A fake cluster with its control plane running.
pub struct Cluster {
    pub fake: FakeApiServer,
    pub kubeconfig: PathBuf,
    reservations: bool,
    control: tokio::task::JoinHandle<()>,
    _dir: tempfile::TempDir,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.control.abort();
        if std::thread::panicking() {
            return;
        }
        // Sufficient: nothing the backend did in any test needs more than deploy/ grants.
        let granted = granted();
        for a in self.fake.accesses() {
            let key = (a.verb, a.group, a.resource, a.subresource);
            assert!(
                granted.contains(&key),
                "deploy/rbac.yaml does not grant {key:?}, which the backend used"
            );
        }
    }
}

/// `shop/web-1` and `shop/web-2` (ReplicaSet `web`, 2 replicas) on n1, n2 and n3 empty.
pub async fn cluster(groups: &[OptionalGroup]) -> Cluster {
    let fake = FakeApiServer::start_with(groups).await;
    fake.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}));
    fake.apply(
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "rebalancer"}}),
    );
    for n in NODES {
        fake.apply(node(n).build());
    }
    for name in ["web-1", "web-2"] {
        fake.apply(web_pod(name, "n1"));
    }
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, fake.kubeconfig(EAST)).unwrap();
    let reservations = groups.contains(&OptionalGroup::Reservation);
    let control = {
        let fake = fake.clone();
        tokio::spawn(async move {
            let mut replacements = 0;
            loop {
                control_plane(&fake, reservations, &mut replacements);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };
    Cluster {
        fake,
        kubeconfig,
        reservations,
        control,
        _dir: dir,
    }
}

/// A replica of ReplicaSet `web`, scheduled by koord-scheduler (so that Reservations apply
/// where the API serves them).
fn web_pod(name: &str, node: &str) -> Value {
    let mut p = pod("shop", name)
        .on(node)
        .owned_by("ReplicaSet", "web")
        .requests("500m", "512Mi")
        .build();
    p["spec"]["schedulerName"] = json!("koord-scheduler");
    p
}

/// Nodes named in `NotIn` match fields of a pod spec's required node affinity.
fn excluded(spec: &Value) -> Vec<String> {
    spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        ["nodeSelectorTerms"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|t| t["matchFields"].as_array().cloned().unwrap_or_default())
        .filter(|f| f["operator"] == "NotIn")
        .flat_map(|f| f["values"].as_array().cloned().unwrap_or_default())
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect()
}

fn first_node_but(excluded: &[String]) -> &'static str {
    NODES
        .into_iter()
        .rev()
        .find(|n| !excluded.iter().any(|e| e == n))
        .unwrap_or("n3")
}

fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap()
}

/// One pass of the simulated control plane.
fn control_plane(fake: &FakeApiServer, reservations: bool, replacements: &mut u32) {
    // koord-scheduler: place new Reservations.
    if reservations {
        for r in fake.list(RESERVATION, "Reservation") {
            if r["status"]["nodeName"].is_string() {
                continue;
            }
            let node = first_node_but(&excluded(&r["spec"]["template"]["spec"]));
            fake.set_status(
                RESERVATION,
                "Reservation",
                "",
                r["metadata"]["name"].as_str().unwrap(),
                json!({"phase": "Available", "nodeName": node, "conditions": [
                    {"type": "Scheduled", "status": "True", "reason": "Scheduled"},
                    {"type": "Ready", "status": "True", "reason": "Available"}
                ]}),
            );
        }
    }
    let pods = fake.list("v1", "Pod");
    // The default scheduler: bind placeholder pods.
    for p in &pods {
        if p["metadata"]["labels"]["rebalancer.io/reservation"].is_string()
            && !p["spec"]["nodeName"].is_string()
        {
            let mut bound = p.clone();
            bound["spec"]["nodeName"] = json!(first_node_but(&excluded(&p["spec"])));
            bound["status"] = json!({"phase": "Running"});
            fake.apply(bound);
        }
    }
    // The ReplicaSet controller: two replicas of `web`.
    let owned = pods
        .iter()
        .filter(|p| p["metadata"]["ownerReferences"][0]["uid"] == OWNER_UID)
        .count();
    if owned >= 2 {
        return;
    }
    *replacements += 1;
    let name = format!("web-r{replacements}");
    let uid = format!("uid-shop-{name}");
    // The scheduler prefers a Reservation waiting for this controller, then a placeholder's
    // node (preempting it), else any node.
    let waiting = if reservations {
        fake.list(RESERVATION, "Reservation").into_iter().find(|r| {
            r["status"]["phase"] == "Available"
                && r["spec"]["owners"][0]["controller"]["uid"] == OWNER_UID
        })
    } else {
        None
    };
    let placeholder_node = pods
        .iter()
        .find(|p| {
            p["metadata"]["labels"]["rebalancer.io/reservation"].is_string()
                && p["spec"]["nodeName"].is_string()
        })
        .and_then(|p| p["spec"]["nodeName"].as_str().map(str::to_owned));
    let node = match (&waiting, &placeholder_node) {
        (Some(r), _) => r["status"]["nodeName"].as_str().unwrap().to_owned(),
        (None, Some(n)) => n.clone(),
        (None, None) => "n3".to_owned(),
    };
    let mut replacement = web_pod(&name, &node);
    replacement["metadata"]["creationTimestamp"] = json!(now_rfc3339());
    replacement["metadata"]["uid"] = json!(uid);
    if let Some(r) = &waiting {
        let rname = r["metadata"]["name"].as_str().unwrap();
        replacement["metadata"]["annotations"] = json!({
            "scheduling.koordinator.sh/reservation-allocated":
                json!({"name": rname, "uid": r["metadata"]["uid"]}).to_string()
        });
        fake.apply(replacement);
        fake.set_status(
            RESERVATION,
            "Reservation",
            "",
            rname,
            json!({"phase": "Succeeded", "nodeName": node,
                   "currentOwners": [{"namespace": "shop", "name": name, "uid": uid}]}),
        );
    } else {
        fake.apply(replacement);
    }
}

/// The server settings for managing `cluster` as `east`.
pub fn managing(
    cluster: &Cluster,
    identity: &str,
) -> impl Fn(&mut Settings) + Send + Sync + 'static {
    let kubeconfig = cluster.kubeconfig.clone();
    let identity = identity.to_owned();
    move |s: &mut Settings| {
        s.demo = false;
        s.kube.clusters = vec![KubeCluster {
            name: EAST.into(),
            source: rebalancer_kube::Source::Kubeconfig {
                path: Some(kubeconfig.clone()),
                context: Some(EAST.into()),
            },
        }];
        s.kube.sync = rebalancer_kube::SyncOptions {
            debounce: Duration::from_millis(50),
            max_delay: Duration::from_millis(300),
            poll_interval: Duration::from_millis(500),
            probe_interval: Duration::from_millis(200),
            ..rebalancer_kube::SyncOptions::default()
        };
        s.kube.lease = rebalancer_kube::LeaseOptions {
            duration: Duration::from_secs(1),
            renew_deadline: Duration::from_millis(800),
            retry: Duration::from_millis(100),
            ..rebalancer_kube::LeaseOptions::new("rebalancer", &identity)
        };
        s.kube.act.instance = identity.clone();
    }
}

/// Poll `path` until `check` holds (20 s).
pub async fn until(
    server: &TestServer,
    path: &str,
    what: &str,
    check: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, body) = server.get(path).await;
        if status == StatusCode::OK && check(&body) {
            return body;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {status} {body:#}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub fn lifetime_profile() -> Value {
    json!({
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "gracePeriodSeconds": 5,
        "profiles": [{
            "name": "old",
            "pluginConfig": [{"name": "PodLifeTime", "args": {"maxPodLifeTimeSeconds": 60}}],
            "plugins": {"deschedule": {"enabled": ["PodLifeTime"]}}
        }]
    })
}

/// Run the lifetime profile on east and approve web-1's decision; returns the decision id.
pub async fn propose_and_approve_web_1(server: &TestServer) -> i64 {
    server.put_profile("lifetime", &lifetime_profile()).await;
    let (status, run) = server.run(EAST, "lifetime").await;
    assert_eq!(status, StatusCode::CREATED, "{run:#}");
    let (_, decisions) = server
        .get(&format!("/api/v1/decisions?run={}", run["id"]))
        .await;
    let id = decisions["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["pod"]["uid"] == "uid-shop-web-1")
        .expect("web-1 proposed")["id"]
        .as_i64()
        .unwrap();
    let (status, body) = server
        .post_json(&format!("/api/v1/decisions/{id}/approve"), &json!({}))
        .await;
    assert!(status.is_success(), "{body:#}");
    id
}

pub async fn wait_synced(server: &TestServer) -> Value {
    until(
        server,
        &format!("/api/v1/clusters/{EAST}"),
        "the first sync",
        |c| c["kubernetes"]["connection"]["state"] == "synced" && c["pods"] == 2,
    )
    .await
}

async fn finished_migration(server: &TestServer, decision: i64) -> Value {
    until(
        server,
        &format!("/api/v1/pod-migrations?decision={decision}"),
        "the pod migration to finish",
        |l| {
            l["items"][0]["phase"]
                .as_str()
                .is_some_and(|p| matches!(p, "Succeeded" | "Failed" | "Aborted"))
        },
    )
    .await["items"][0]
        .clone()
}

fn successful_evictions(fake: &FakeApiServer) -> Vec<String> {
    fake.evictions()
        .into_iter()
        .filter(|e| e.status == 201)
        .map(|e| format!("{}/{}", e.namespace, e.name))
        .collect()
}

fn leftovers(cluster: &Cluster) -> Vec<String> {
    let mut left: Vec<String> = cluster
        .fake
        .list("v1", "Pod")
        .into_iter()
        .filter(|p| p["metadata"]["labels"]["rebalancer.io/reservation"].is_string())
        .map(|p| format!("placeholder {}", p["metadata"]["name"]))
        .collect();
    if cluster.reservations {
        left.extend(
            cluster
                .fake
                .list(RESERVATION, "Reservation")
                .into_iter()
                .map(|r| format!("reservation {}", r["metadata"]["name"])),
        );
    }
    left
}

#[tokio::test]
async fn a_kubernetes_cluster_is_synced_shown_and_refuses_pushes() {
    let cluster = cluster(&[]).await;
    let server = TestServer::start_with(managing(&cluster, "server-a")).await;
    let view = wait_synced(&server).await;
    assert_eq!(view["backend"], "kubernetes");
    assert_eq!(
        view["kubernetes"]["apiServer"]
            .as_str()
            .unwrap()
            .trim_end_matches('/'),
        cluster.fake.url().trim_end_matches('/')
    );
    assert!(
        view["kubernetes"]["connection"]["lastSyncMs"].is_i64(),
        "{view:#}"
    );
    assert!(
        !view.to_string().contains("fake-token"),
        "credentials never leave"
    );

    let (status, body) = server
        .put_json(
            &format!("/api/v1/clusters/{EAST}/snapshot"),
            &json!({"kind": "List", "items": []}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body:#}");
    assert_eq!(body["code"], "cluster_is_live", "{body:#}");

    // A change in the cluster reaches the API (and runs).
    cluster.fake.apply(pod("shop", "solo").on("n2").build());
    until(
        &server,
        &format!("/api/v1/clusters/{EAST}"),
        "the new pod",
        |c| c["pods"] == 3,
    )
    .await;
    let (status, nodes) = server.get(&format!("/api/v1/clusters/{EAST}/nodes")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(nodes["items"].as_array().unwrap().len(), 3);

    let (_, ready) = server.get("/readyz").await;
    assert_eq!(ready["status"], "ready", "{ready:#}");
    cluster.fake.set_down(true);
    let degraded = until(&server, "/readyz", "the loss in /readyz", |r| {
        r["status"] == "degraded"
    })
    .await;
    assert_eq!(degraded["unsynced"][0]["cluster"], EAST);
    assert!(
        degraded["unsynced"][0]["reason"]
            .as_str()
            .unwrap()
            .starts_with("disconnected"),
        "{degraded:#}"
    );
    cluster.fake.set_down(false);
    until(&server, "/readyz", "recovery", |r| r["status"] == "ready").await;
}

#[tokio::test]
async fn an_approved_decision_migrates_through_a_koordinator_reservation() {
    let cluster = cluster(&[OptionalGroup::Reservation]).await;
    let server = TestServer::start_with(managing(&cluster, "server-a")).await;
    wait_synced(&server).await;
    let decision = propose_and_approve_web_1(&server).await;
    let m = finished_migration(&server, decision).await;
    assert_eq!(m["phase"], "Succeeded", "{m:#}");
    assert_eq!(m["status"], "Complete", "{m:#}");
    assert_eq!(m["targetNode"], "n3", "{m:#}");
    assert_eq!(m["newPod"]["name"], "web-r1", "{m:#}");
    assert_eq!(successful_evictions(&cluster.fake), ["shop/web-1"]);
    let e = cluster.fake.evictions().pop().unwrap();
    assert_eq!(
        e.grace_period_seconds,
        Some(5),
        "the profile's gracePeriodSeconds"
    );
    assert_eq!(e.uid_precondition.as_deref(), Some("uid-shop-web-1"));
    assert!(
        cluster
            .fake
            .list("events.k8s.io/v1", "Event")
            .iter()
            .any(|ev| ev["reason"] == "Descheduled" && ev["regarding"]["name"] == "web-1")
    );
    // The consumed Reservation is cleaned up, nothing is left behind.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !leftovers(&cluster).is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(leftovers(&cluster), Vec::<String>::new());
    let (_, decision) = server.get(&format!("/api/v1/decisions/{decision}")).await;
    assert_eq!(decision["status"], "succeeded");
}

#[tokio::test]
async fn an_approved_decision_migrates_through_a_placeholder_pod() {
    let cluster = cluster(&[]).await;
    let server = TestServer::start_with(managing(&cluster, "server-a")).await;
    wait_synced(&server).await;
    let decision = propose_and_approve_web_1(&server).await;
    let m = finished_migration(&server, decision).await;
    assert_eq!(m["phase"], "Succeeded", "{m:#}");
    assert_eq!(m["status"], "Complete", "{m:#}");
    assert_eq!(m["targetNode"], "n3", "{m:#}");
    assert_eq!(m["newPod"]["node"], "n3", "{m:#}");
    assert_eq!(successful_evictions(&cluster.fake), ["shop/web-1"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !leftovers(&cluster).is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(leftovers(&cluster), Vec::<String>::new());
}

#[tokio::test]
async fn two_servers_one_lease_only_the_holder_acts() {
    let cluster = cluster(&[]).await;
    let mut a = TestServer::start_with(managing(&cluster, "server-a")).await;
    until(
        &a,
        &format!("/api/v1/clusters/{EAST}"),
        "a holds the lease",
        |c| c["kubernetes"]["lease"]["held"] == true,
    )
    .await;
    let b = TestServer::start_with(managing(&cluster, "server-b")).await;
    let view = wait_synced(&b).await;
    let view = if view["kubernetes"]["lease"]["holder"] == "server-a" {
        view
    } else {
        until(&b, &format!("/api/v1/clusters/{EAST}"), "b sees a", |c| {
            c["kubernetes"]["lease"]["holder"] == "server-a"
        })
        .await
    };
    assert_eq!(view["kubernetes"]["lease"]["held"], false, "{view:#}");

    // b serves reads and runs, but does not execute what is approved on it...
    let decision = propose_and_approve_web_1(&b).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(successful_evictions(&cluster.fake), Vec::<String>::new());
    let (_, list) = b
        .get(&format!("/api/v1/pod-migrations?decision={decision}"))
        .await;
    assert_eq!(list["items"][0]["phase"], "Pending", "{list:#}");

    // ...until a stops: b takes the Lease over and executes.
    a.stop().await;
    let m = finished_migration(&b, decision).await;
    assert_eq!(m["phase"], "Succeeded", "{m:#}");
    assert_eq!(successful_evictions(&cluster.fake), ["shop/web-1"]);
    let (_, view) = b.get(&format!("/api/v1/clusters/{EAST}")).await;
    assert_eq!(view["kubernetes"]["lease"]["holder"], "server-b");
}

/// `(verb, group, resource, subresource)` granted by deploy/rbac.yaml.
fn granted() -> BTreeSet<(String, String, String, String)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/rbac.yaml");
    let text = std::fs::read_to_string(path).expect("deploy/rbac.yaml");
    let mut out = BTreeSet::new();
    for doc in serde_yaml::Deserializer::from_str(&text) {
        let doc: Value =
            serde_yaml::with::singleton_map_recursive::deserialize(doc).unwrap_or(Value::Null);
        if !matches!(doc["kind"].as_str(), Some("ClusterRole" | "Role")) {
            continue;
        }
        for rule in doc["rules"].as_array().into_iter().flatten() {
            let list = |k: &str| -> Vec<String> {
                rule[k]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            };
            for group in list("apiGroups") {
                for resource in list("resources") {
                    let (resource, sub) = match resource.split_once('/') {
                        Some((r, s)) => (r.to_owned(), s.to_owned()),
                        None => (resource.clone(), String::new()),
                    };
                    for verb in list("verbs") {
                        out.insert((verb, group.clone(), resource.clone(), sub.clone()));
                    }
                }
            }
        }
    }
    out
}

/// Least: every rule deploy/ grants is used by some feature. Runs both reservation flows, the
/// optional kinds and a Lease, then compares what the fakes saw with the rules exactly.
#[tokio::test]
async fn the_rbac_in_deploy_is_exactly_what_the_backend_uses() {
    let mut seen: BTreeSet<(String, String, String, String)> = BTreeSet::new();
    for groups in [
        vec![
            OptionalGroup::Reservation,
            OptionalGroup::Metrics,
            OptionalGroup::NodeMetric,
            OptionalGroup::NodeResourceTopology,
        ],
        vec![],
    ] {
        let cluster = cluster(&groups).await;
        let server = TestServer::start_with(managing(&cluster, "tour")).await;
        wait_synced(&server).await;
        let decision = propose_and_approve_web_1(&server).await;
        let m = finished_migration(&server, decision).await;
        assert_eq!(m["phase"], "Succeeded", "{m:#}");
        // Metrics are polled: wait for one poll.
        if groups.contains(&OptionalGroup::Metrics) {
            let deadline = Instant::now() + Duration::from_secs(10);
            while !cluster
                .fake
                .accesses()
                .iter()
                .any(|a: &Access| a.group == "metrics.k8s.io" && a.resource == "pods")
            {
                assert!(Instant::now() < deadline, "metrics were never listed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        // Placeholders and reservations are released before the server stops.
        let deadline = Instant::now() + Duration::from_secs(10);
        while !leftovers(&cluster).is_empty() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        seen.extend(
            cluster
                .fake
                .accesses()
                .into_iter()
                .map(|a| (a.verb, a.group, a.resource, a.subresource)),
        );
    }
    let granted = granted();
    let unused: Vec<_> = granted.difference(&seen).collect();
    let missing: Vec<_> = seen.difference(&granted).collect();
    assert!(
        unused.is_empty() && missing.is_empty(),
        "deploy/rbac.yaml grants unused {unused:?}; lacks {missing:?}"
    );
}

/// Approve web-1's decision on the binary under `fault`, let it abort, check the step it
/// stopped at, restart it (same identity, so it holds the Lease at once) and check the pod
/// migration completes with exactly one eviction in the cluster and nothing left behind.
async fn crash_and_resume(groups: &[OptionalGroup], point: &str, expect_step: &str) {
    use crate::crash::{finished, propose_and_approve, query_one, start_env};
    let cluster = cluster(groups).await;
    let dir = tempfile::tempdir().unwrap();
    let database = dir.path().join("crash.db");
    let env = [
        ("REBALANCER_KUBE_CLUSTERS", format!("{EAST}={EAST}")),
        (
            "REBALANCER_KUBECONFIG",
            cluster.kubeconfig.display().to_string(),
        ),
        ("REBALANCER_IDENTITY", "crash-test".to_owned()),
        ("REBALANCER_LEASE_NAMESPACE", "rebalancer".to_owned()),
    ];
    let mut first = start_env(&database, Some(point), &env);
    let base = first.base.clone();
    let deadline = Instant::now() + Duration::from_secs(30);
    let client = crate::support::client_with_token(crate::support::ADMIN_TOKEN);
    loop {
        // Listed from the start; pods 0 until the first revision is installed.
        let view: Value = client
            .get(format!("{base}/api/v1/clusters/{EAST}"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap_or(Value::Null);
        if view["pods"] == 2 && view["kubernetes"]["lease"]["held"] == true {
            break;
        }
        assert!(Instant::now() < deadline, "{point}: never synced: {view:#}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    propose_and_approve(&base, EAST, lifetime_profile(), "uid-shop-web-1").await;
    let status = first.wait_exit();
    assert!(
        !status.success(),
        "{point}: the process should have aborted"
    );
    let (migration, step) = query_one(
        &database,
        "SELECT id, step FROM pod_migrations WHERE pod_uid = ?",
        "uid-shop-web-1",
    )
    .await;
    assert_eq!(step, expect_step, "{point}: where the crash left it");

    let second = start_env(&database, None, &env);
    let last = finished(&second.base, migration).await;
    assert_eq!(last["phase"], "Succeeded", "{point}: {last:#}");
    assert_eq!(last["status"], "Complete", "{point}: {last:#}");
    assert_eq!(
        successful_evictions(&cluster.fake),
        ["shop/web-1"],
        "{point}: evicted exactly once"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while !leftovers(&cluster).is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        leftovers(&cluster),
        Vec::<String>::new(),
        "{point}: orphans"
    );
    second.terminate();
}

const KOORD: &[OptionalGroup] = &[OptionalGroup::Reservation];

// The fake API server lives in this process while the test blocks waiting for the binary:
// it needs a worker of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_after_reserving_was_persisted() {
    crash_and_resume(KOORD, "Reserving", "Reserving").await;
}

// The fake API server lives in this process while the test blocks waiting for the binary:
// it needs a worker of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_after_the_reservation_was_created() {
    crash_and_resume(KOORD, "ReservationCreated", "ReservationCreated").await;
}

// The fake API server lives in this process while the test blocks waiting for the binary:
// it needs a worker of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_after_the_reservation_was_scheduled() {
    crash_and_resume(KOORD, "ReservationScheduled", "ReservationScheduled").await;
}

// The fake API server lives in this process while the test blocks waiting for the binary:
// it needs a worker of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_after_evicting_was_persisted() {
    crash_and_resume(KOORD, "Evicting", "Evicting").await;
}

// The fake API server lives in this process while the test blocks waiting for the binary:
// it needs a worker of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_after_the_eviction_call_before_it_was_recorded() {
    crash_and_resume(KOORD, "EvictCalled", "Evicting").await;
}

// The fake API server lives in this process while the test blocks waiting for the binary:
// it needs a worker of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_after_the_eviction_was_recorded() {
    crash_and_resume(KOORD, "Evicted", "Evicted").await;
}

// The fake API server lives in this process while the test blocks waiting for the binary:
// it needs a worker of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_after_the_replacement_bound() {
    crash_and_resume(KOORD, "PodBoundReservation", "PodBoundReservation").await;
}

// The fake API server lives in this process while the test blocks waiting for the binary:
// it needs a worker of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_before_complete() {
    crash_and_resume(KOORD, "BoundPodReady", "BoundPodReady").await;
}

// The fake API server lives in this process while the test blocks waiting for the binary:
// it needs a worker of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_with_a_placeholder_after_reserving() {
    crash_and_resume(&[], "Reserving", "Reserving").await;
}

// The fake API server lives in this process while the test blocks waiting for the binary:
// it needs a worker of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_with_a_placeholder_after_the_eviction_call() {
    crash_and_resume(&[], "EvictCalled", "Evicting").await;
}

// The fake API server lives in this process while the test blocks waiting for the binary:
// it needs a worker of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_with_a_placeholder_after_the_eviction_was_recorded() {
    crash_and_resume(&[], "Evicted", "Evicted").await;
}
