//! The Kubernetes backend end to end: the real server (and, for crashes, the real binary)
//! managing a cluster served by the in-process fake API server, through kube-rs's real client,
//! **as the ServiceAccount of `deploy/`**: the fake enforces `deploy/rbac.yaml`, so a request
//! the manifests do not grant is answered 403 there as on a real API server, and every test
//! fails if one was (the crash and resume paths included).
//!
//! A small "control plane" task in the test plays what a real cluster runs: koord-scheduler
//! (places Reservations on the least loaded node they allow, and binds each new replica into the
//! oldest Reservation waiting for its controller, by `reservation-order` as Koordinator does),
//! the default scheduler (binds placeholder pods the same way, and a new replica onto a
//! placeholder's node — the newest placeholder first, since nothing steers it, so replacements
//! land in another order than the evictions), the ReplicaSet controller (keeps `replicas`
//! pods that are not terminating: an evicted pod still terminating is already replaced) and
//! readiness (a new replica turns Ready a moment after it is bound, unless the test holds it).
//! The fake's kubelet stand-in ends terminating pods (graceful deletion).
//!
//! Covered: sync, pushes refused, connection loss in `/readyz`; ReservationFirst through
//! Koordinator Reservations and through placeholder pods; the placeholder held until the
//! replacement is Ready while the evicted pod terminates; five moves of one ReplicaSet at once,
//! each with a replacement of its own; the Eviction API's 429; a call the RBAC refuses failing
//! the pod migration at once; two servers and one Lease; a crash at every pod-migration step
//! with exactly one eviction and one Event per pod; and the RBAC in `deploy/rbac.yaml` is
//! exactly what was used.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rebalancer_kube_fake::{Access, FakeApiServer, Kubelet, OptionalGroup};
use rebalancer_server::config::{KubeCluster, Settings};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{TestServer, node, pod};

pub const EAST: &str = "east";
const RESERVATION: &str = "scheduling.koordinator.sh/v1alpha1";
const OWNER_UID: &str = "uid-ReplicaSet-web";
/// The ServiceAccount the server runs as in the fake cluster, and its token.
pub const SERVICE_ACCOUNT: (&str, &str) = ("rebalancer", "rebalancer");
const SA_TOKEN: &str = "rebalancer-sa-token";

/// What a fake cluster starts with.
#[derive(Clone, Debug)]
pub struct Spec {
    /// Optional API groups served.
    pub groups: Vec<OptionalGroup>,
    /// Nodes `n1`…`nN`.
    pub nodes: usize,
    /// Replicas of ReplicaSet `web`, all on `n1` at first (`web-1`…).
    pub replicas: usize,
    /// The RBAC the ServiceAccount gets (default: `deploy/rbac.yaml` as it is).
    pub rbac: String,
    /// How the fake's kubelet ends terminating pods.
    pub kubelet: Kubelet,
}

impl Spec {
    pub fn new(groups: &[OptionalGroup]) -> Spec {
        Spec {
            groups: groups.to_vec(),
            nodes: 3,
            replicas: 2,
            rbac: deploy_rbac(),
            kubelet: Kubelet::After(Duration::from_millis(300)),
        }
    }
}

/// `deploy/rbac.yaml`.
pub fn deploy_rbac() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/rbac.yaml");
    std::fs::read_to_string(path).expect("deploy/rbac.yaml")
}

/// The simulated control plane's state, shared with the test.
#[derive(Default)]
pub struct Plane {
    reservations: bool,
    nodes: Vec<String>,
    replicas: usize,
    created: u32,
    /// New replicas bound by the plane, and when (they turn Ready `ready_after` later).
    bound: HashMap<String, Instant>,
    ready_after: Duration,
    /// Keep new replicas unready until the test lets them go.
    pub hold_ready: bool,
    /// Placeholder pods a replica was already scheduled onto.
    used_placeholders: HashSet<String>,
}

/// A fake cluster with its control plane running.
pub struct Cluster {
    pub fake: FakeApiServer,
    /// The ServiceAccount's kubeconfig (what the server uses).
    pub kubeconfig: PathBuf,
    pub plane: Arc<Mutex<Plane>>,
    reservations: bool,
    /// Requests the RBAC is expected to refuse (a test about refusals).
    pub expect_denied: bool,
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
        if !self.expect_denied {
            let denied = self.fake.denied();
            assert!(
                denied.is_empty(),
                "the fake API server refused requests deploy/rbac.yaml does not grant: {denied:?}"
            );
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
}

/// `shop/web-1` and `shop/web-2` (ReplicaSet `web`, 2 replicas) on n1, n2 and n3 empty.
pub async fn cluster(groups: &[OptionalGroup]) -> Cluster {
    cluster_with(Spec::new(groups)).await
}

pub async fn cluster_with(spec: Spec) -> Cluster {
    let fake = FakeApiServer::start_with(&spec.groups).await;
    fake.set_kubelet(spec.kubelet);
    fake.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}));
    fake.apply(
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "rebalancer"}}),
    );
    fake.apply(json!({
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": "rebalancer-placeholder"},
        "value": -100, "preemptionPolicy": "Never", "globalDefault": false
    }));
    let nodes: Vec<String> = (1..=spec.nodes).map(|i| format!("n{i}")).collect();
    for n in &nodes {
        fake.apply(node(n).build());
    }
    for i in 1..=spec.replicas {
        fake.apply(web_pod(&format!("web-{i}"), "n1"));
    }
    fake.add_service_account(SERVICE_ACCOUNT.0, SERVICE_ACCOUNT.1, SA_TOKEN, &spec.rbac)
        .expect("the RBAC manifest loads");
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, fake.kubeconfig_with_token(EAST, SA_TOKEN)).unwrap();
    let reservations = spec.groups.contains(&OptionalGroup::Reservation);
    let plane = Arc::new(Mutex::new(Plane {
        reservations,
        nodes,
        replicas: spec.replicas,
        ready_after: Duration::from_millis(200),
        ..Plane::default()
    }));
    let control = {
        let fake = fake.clone();
        let plane = plane.clone();
        tokio::spawn(async move {
            loop {
                control_plane(&fake, &plane);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };
    Cluster {
        fake,
        kubeconfig,
        plane,
        reservations,
        expect_denied: false,
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

fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap()
}

fn terminating(p: &Value) -> bool {
    p["metadata"]["deletionTimestamp"].is_string()
}

/// The node with the fewest pods and Reservations (then the highest-numbered), of those not
/// excluded.
fn least_loaded(
    fake: &FakeApiServer,
    nodes: &[String],
    excluded: &[String],
    reservations: bool,
) -> String {
    let mut load: HashMap<String, usize> = nodes.iter().map(|n| (n.clone(), 0)).collect();
    for p in fake.list("v1", "Pod") {
        if let Some(n) = p["spec"]["nodeName"].as_str()
            && !terminating(&p)
        {
            *load.entry(n.to_owned()).or_default() += 1;
        }
    }
    if reservations {
        for r in fake.list(RESERVATION, "Reservation") {
            if let Some(n) = r["status"]["nodeName"].as_str() {
                *load.entry(n.to_owned()).or_default() += 1;
            }
        }
    }
    nodes
        .iter()
        .rev()
        .filter(|n| !excluded.contains(n))
        .min_by_key(|n| load.get(*n).copied().unwrap_or(0))
        .cloned()
        .unwrap_or_else(|| nodes[0].clone())
}

/// One pass of the simulated control plane.
fn control_plane(fake: &FakeApiServer, plane: &Mutex<Plane>) {
    let mut plane = plane.lock().unwrap();
    let plane = &mut *plane;
    // koord-scheduler: place new Reservations.
    if plane.reservations {
        for r in fake.list(RESERVATION, "Reservation") {
            if r["status"]["nodeName"].is_string() {
                continue;
            }
            let node = least_loaded(
                fake,
                &plane.nodes,
                &excluded(&r["spec"]["template"]["spec"]),
                true,
            );
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
    // The default scheduler: bind placeholder pods.
    for p in fake.list("v1", "Pod") {
        if p["metadata"]["labels"]["rebalancer.io/reservation"].is_string()
            && !p["spec"]["nodeName"].is_string()
            && !terminating(&p)
        {
            let mut bound = p.clone();
            bound["spec"]["nodeName"] = json!(least_loaded(
                fake,
                &plane.nodes,
                &excluded(&p["spec"]),
                plane.reservations
            ));
            bound["status"] = json!({"phase": "Running"});
            fake.apply(bound);
        }
    }
    let pods = fake.list("v1", "Pod");
    // The ReplicaSet controller: `replicas` pods of `web` that are not terminating.
    let active = pods
        .iter()
        .filter(|p| p["metadata"]["ownerReferences"][0]["uid"] == OWNER_UID && !terminating(p))
        .count();
    for _ in active..plane.replicas {
        plane.created += 1;
        let name = format!("web-r{}", plane.created);
        let mut replica = pod("shop", &name)
            .owned_by("ReplicaSet", "web")
            .requests("500m", "512Mi")
            .build();
        replica["spec"]["schedulerName"] = json!("koord-scheduler");
        replica["metadata"]["creationTimestamp"] = json!(now_rfc3339());
        replica["status"] = json!({"phase": "Pending"});
        fake.apply(replica);
    }
    // The scheduler, for new replicas: into a Reservation waiting for their controller, else
    // onto a placeholder's node (the newest placeholder first), else the least loaded node.
    for p in fake.list("v1", "Pod") {
        if p["metadata"]["ownerReferences"][0]["uid"] != OWNER_UID
            || p["spec"]["nodeName"].is_string()
            || terminating(&p)
        {
            continue;
        }
        let name = p["metadata"]["name"].as_str().unwrap().to_owned();
        let mut bound = p.clone();
        let waiting = if plane.reservations {
            let mut waiting: Vec<Value> = fake
                .list(RESERVATION, "Reservation")
                .into_iter()
                .filter(|r| {
                    r["status"]["phase"] == "Available"
                        && r["spec"]["owners"][0]["controller"]["uid"] == OWNER_UID
                })
                .collect();
            // koord-scheduler prefers the oldest migration's Reservation (the lowest
            // `reservation-order`), as Koordinator does.
            waiting.sort_by_key(|r| {
                r["metadata"]["labels"]["scheduling.koordinator.sh/reservation-order"]
                    .as_str()
                    .and_then(|o| o.parse::<u128>().ok())
                    .unwrap_or(u128::MAX)
            });
            waiting.into_iter().next()
        } else {
            None
        };
        let node = if let Some(r) = &waiting {
            let rname = r["metadata"]["name"].as_str().unwrap();
            let node = r["status"]["nodeName"].as_str().unwrap().to_owned();
            bound["metadata"]["annotations"] = json!({
                "scheduling.koordinator.sh/reservation-allocated":
                    json!({"name": rname, "uid": r["metadata"]["uid"]}).to_string()
            });
            fake.set_status(
                RESERVATION,
                "Reservation",
                "",
                rname,
                json!({"phase": "Succeeded", "nodeName": node,
                       "currentOwners": [{"namespace": "shop", "name": name,
                                          "uid": p["metadata"]["uid"]}]}),
            );
            node
        } else {
            let mut placeholders: Vec<Value> = fake
                .list("v1", "Pod")
                .into_iter()
                .filter(|ph| {
                    ph["metadata"]["labels"]["rebalancer.io/reservation"].is_string()
                        && ph["spec"]["nodeName"].is_string()
                        && !terminating(ph)
                        && !plane
                            .used_placeholders
                            .contains(ph["metadata"]["name"].as_str().unwrap_or(""))
                })
                .collect();
            placeholders.sort_by_key(|ph| ph["metadata"]["name"].as_str().unwrap_or("").to_owned());
            match placeholders.pop() {
                Some(ph) => {
                    plane
                        .used_placeholders
                        .insert(ph["metadata"]["name"].as_str().unwrap().to_owned());
                    ph["spec"]["nodeName"].as_str().unwrap().to_owned()
                }
                None => least_loaded(fake, &plane.nodes, &[], plane.reservations),
            }
        };
        bound["spec"]["nodeName"] = json!(node);
        bound["status"] =
            json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}]});
        fake.apply(bound);
        plane.bound.insert(name, Instant::now());
    }
    // Readiness of the new replicas.
    if !plane.hold_ready {
        let due: Vec<String> = plane
            .bound
            .iter()
            .filter(|(_, at)| at.elapsed() >= plane.ready_after)
            .map(|(n, _)| n.clone())
            .collect();
        for name in due {
            plane.bound.remove(&name);
            if let Some(mut p) = fake.get("v1", "Pod", "shop", &name)
                && !terminating(&p)
            {
                p["status"]["conditions"] = json!([{"type": "Ready", "status": "True"}]);
                fake.apply(p);
            }
        }
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

/// The pod migration of `decision`, once `check` holds for it (20 s).
pub async fn migration_until(
    server: &TestServer,
    decision: i64,
    what: &str,
    check: impl Fn(&Value) -> bool,
) -> Value {
    until(
        server,
        &format!("/api/v1/pod-migrations?decision={decision}"),
        what,
        |l| check(&l["items"][0]),
    )
    .await["items"][0]
        .clone()
}

async fn finished_migration(server: &TestServer, decision: i64) -> Value {
    migration_until(server, decision, "the pod migration to finish", |m| {
        m["phase"]
            .as_str()
            .is_some_and(|p| matches!(p, "Succeeded" | "Failed" | "Aborted"))
    })
    .await
}

/// `Descheduled` Events about pod `uid`.
fn descheduled_events(fake: &FakeApiServer, uid: &str) -> usize {
    fake.events_about(uid)
        .iter()
        .filter(|e| e["reason"] == "Descheduled")
        .count()
}

fn successful_evictions(fake: &FakeApiServer) -> Vec<String> {
    fake.evictions()
        .into_iter()
        .filter(|e| e.status == 201)
        .map(|e| format!("{}/{}", e.namespace, e.name))
        .collect()
}

/// Placeholders and Reservations are all released (within 10 s).
async fn nothing_left(cluster: &Cluster) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !leftovers(cluster).is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(leftovers(cluster), Vec::<String>::new(), "left behind");
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
    // How room is reserved before an eviction (--reservation-mode, `auto` by default).
    assert_eq!(view["kubernetes"]["reservationMode"], "auto", "{view:#}");
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
    nothing_left(&cluster).await;
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
    nothing_left(&cluster).await;
}

/// The pod migration of `decision` now.
async fn migration_of(server: &TestServer, decision: i64) -> Value {
    let (_, list) = server
        .get(&format!("/api/v1/pod-migrations?decision={decision}"))
        .await;
    list["items"][0].clone()
}

/// Placeholder mode keeps the placeholder until the replacement is Ready on its node, while
/// the evicted pod is still terminating (a real grace period): the room stays held.
#[tokio::test]
async fn the_placeholder_is_held_until_the_replacement_is_ready_while_the_pod_terminates() {
    let cluster = cluster_with(Spec {
        kubelet: Kubelet::Manual,
        ..Spec::new(&[])
    })
    .await;
    cluster.plane.lock().unwrap().hold_ready = true;
    let server = TestServer::start_with(managing(&cluster, "server-a")).await;
    wait_synced(&server).await;
    let decision = propose_and_approve_web_1(&server).await;
    let m = migration_until(
        &server,
        decision,
        "the replacement on the placeholder's node",
        |m| m["status"] == "PodBoundReservation",
    )
    .await;
    assert_eq!(m["reservationKind"], "placeholder pod", "{m:#}");
    let placeholder = m["reservation"].as_str().unwrap().to_owned();
    let (_, detail) = server
        .get(&format!("/api/v1/pod-migrations/{}", m["id"]))
        .await;
    let messages: Vec<&str> = detail["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["message"].as_str())
        .collect();
    assert!(
        messages
            .iter()
            .any(|m| m.contains("placeholder pod rebalancer-pm-"))
            && !messages
                .iter()
                .any(|m| m.contains("Reservation rebalancer-pm-")),
        "placeholder mode says so: {messages:#?}"
    );
    // Held: the evicted pod terminating, the replacement not Ready, the placeholder there.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let web_1 = cluster.fake.get("v1", "Pod", "shop", "web-1").unwrap();
    assert!(terminating(&web_1), "web-1 is still terminating");
    assert!(
        cluster
            .fake
            .get("v1", "Pod", "shop", &placeholder)
            .is_some(),
        "the placeholder is held while the replacement is not Ready"
    );
    let m = migration_of(&server, decision).await;
    assert_eq!(m["phase"], "Running", "{m:#}");
    assert_eq!(m["status"], "PodBoundReservation", "{m:#}");
    // Ready: the pod migration completes and only then lets the placeholder go.
    cluster.plane.lock().unwrap().hold_ready = false;
    let m = finished_migration(&server, decision).await;
    assert_eq!(m["phase"], "Succeeded", "{m:#}");
    assert_eq!(m["status"], "Complete", "{m:#}");
    assert_eq!(m["newPod"]["node"], m["targetNode"], "{m:#}");
    nothing_left(&cluster).await;
    assert!(cluster.fake.finish_termination("shop", "web-1"));
    assert_eq!(cluster.fake.evictions_of("uid-shop-web-1"), 1);
}

/// Five moves of one ReplicaSet approved at once: each pod migration ends with a replacement
/// of its own, although the replicas are created and scheduled in another order than the
/// evictions (the newest reservation or placeholder gets the first new replica): in a
/// Reservation, exactly the one bound into it; with placeholders, by the documented rule.
async fn five_moves_of_one_replicaset(groups: &[OptionalGroup]) {
    let cluster = cluster_with(Spec {
        nodes: 6,
        replicas: 5,
        ..Spec::new(groups)
    })
    .await;
    let server = TestServer::start_with(managing(&cluster, "server-a")).await;
    until(
        &server,
        &format!("/api/v1/clusters/{EAST}"),
        "the first sync",
        |c| c["kubernetes"]["connection"]["state"] == "synced" && c["pods"] == 5,
    )
    .await;
    // All five at once: no per-node, per-workload or token-bucket limit in the way.
    let (status, body) = server
        .put_json(
            "/api/v1/arbitration",
            &json!({"maxMigratingPerNode": 0, "maxMigratingPerWorkload": 5,
                    "maxUnavailablePerWorkload": 5, "skipCheckExpectedReplicas": true,
                    "objectLimiters": {"workload": null}}),
        )
        .await;
    assert!(status.is_success(), "{body:#}");
    server.put_profile("lifetime", &lifetime_profile()).await;
    let (status, run) = server.run(EAST, "lifetime").await;
    assert_eq!(status, StatusCode::CREATED, "{run:#}");
    assert_eq!(run["proposals"], 5, "{run:#}");
    let (status, bulk) = server
        .post_json("/api/v1/decisions/approve", &json!({"run": run["id"]}))
        .await;
    assert!(status.is_success(), "{bulk:#}");
    assert_eq!(bulk["approved"], 5, "{bulk:#}");
    // All five finish; on a timeout, everything that explains why.
    let deadline = Instant::now() + Duration::from_secs(30);
    let all = loop {
        let (_, list) = server.get("/api/v1/pod-migrations").await;
        let items = list["items"].as_array().cloned().unwrap_or_default();
        if items.len() == 5
            && items.iter().all(|m| {
                matches!(
                    m["phase"].as_str(),
                    Some("Succeeded" | "Failed" | "Aborted")
                )
            })
        {
            break items;
        }
        if Instant::now() > deadline {
            let pods: Vec<String> = cluster
                .fake
                .list("v1", "Pod")
                .iter()
                .map(|p| {
                    format!(
                        "{} on {} {}{}",
                        p["metadata"]["name"],
                        p["spec"]["nodeName"],
                        p["metadata"]["annotations"]
                            ["scheduling.koordinator.sh/reservation-allocated"],
                        if terminating(p) { " terminating" } else { "" }
                    )
                })
                .collect();
            let reservations: Vec<String> = if cluster.reservations {
                cluster
                    .fake
                    .list(RESERVATION, "Reservation")
                    .iter()
                    .map(|r| format!("{} {}", r["metadata"]["name"], r["status"]))
                    .collect()
            } else {
                Vec::new()
            };
            panic!(
                "the five pod migrations did not finish: {items:#?}\npods: {pods:#?}\n\
                 reservations: {reservations:#?}"
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let mut replacements = BTreeSet::new();
    let mut targets = BTreeSet::new();
    for m in all {
        assert_eq!(m["phase"], "Succeeded", "{m:#}");
        assert_eq!(m["status"], "Complete", "{m:#}");
        assert_ne!(
            m["newPod"]["node"], "n1",
            "moved off the source node: {m:#}"
        );
        if m["newPod"]["node"] != m["targetNode"] {
            // The evictions are spread by evictQPS: a replica may land on the reserved node of
            // a pod migration that has not evicted yet (with placeholders nothing steers it;
            // koord-scheduler binds it into the oldest Reservation of the controller, which
            // that pod migration then makes again). It cannot be that one's replacement, so
            // it is this one's, landed elsewhere.
            assert_eq!(m["reason"], "ReplacementElsewhere", "{m:#}");
        }
        let uid = m["newPod"]["uid"].as_str().unwrap().to_owned();
        assert!(uid.starts_with("uid-shop-web-r"), "{m:#}");
        assert!(
            replacements.insert(uid),
            "a replacement claimed twice: {m:#}"
        );
        targets.insert(m["targetNode"].as_str().unwrap().to_owned());
    }
    assert_eq!(replacements.len(), 5);
    assert!(
        !targets.contains("n1"),
        "never reserved on the source: {targets:?}"
    );
    let mut evicted = successful_evictions(&cluster.fake);
    evicted.sort();
    assert_eq!(
        evicted,
        [
            "shop/web-1",
            "shop/web-2",
            "shop/web-3",
            "shop/web-4",
            "shop/web-5"
        ]
    );
    nothing_left(&cluster).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_moves_of_one_replicaset_through_placeholders_each_find_their_own_replacement() {
    five_moves_of_one_replicaset(&[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_moves_of_one_replicaset_through_reservations_each_find_their_own_replacement() {
    five_moves_of_one_replicaset(&[OptionalGroup::Reservation]).await;
}

/// The cached PDB check lets the eviction through, the Eviction API answers 429 (the PDB's
/// status is behind its spec, as right after an edit): the pod migration waits, retries, and
/// evicts once the disruption controller caught up.
#[tokio::test]
async fn the_eviction_apis_429_waits_and_evicts_once_the_pdb_allows() {
    let cluster = cluster(&[]).await;
    let pdb = |observed: i64| {
        json!({
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": "shop", "generation": 2},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}},
            "status": {"observedGeneration": observed, "disruptionsAllowed": 1,
                       "currentHealthy": 2, "desiredHealthy": 1, "expectedPods": 2}
        })
    };
    cluster.fake.apply(pdb(1));
    let server = TestServer::start_with(managing(&cluster, "server-a")).await;
    wait_synced(&server).await;
    let decision = propose_and_approve_web_1(&server).await;
    let m = migration_until(&server, decision, "the Eviction API's refusal", |m| {
        m["reason"] == "BlockedByPdb"
    })
    .await;
    assert!(
        cluster.fake.evictions().iter().any(|e| e.status == 429),
        "the Eviction API answered 429: {:?}",
        cluster.fake.evictions()
    );
    assert_eq!(
        successful_evictions(&cluster.fake),
        Vec::<String>::new(),
        "{m:#}"
    );
    assert_eq!(m["phase"], "Running", "{m:#}");
    // The disruption controller catches up: the next try evicts, once.
    cluster.fake.set_status(
        "policy/v1",
        "PodDisruptionBudget",
        "shop",
        "web",
        pdb(2)["status"].clone(),
    );
    let m = finished_migration(&server, decision).await;
    assert_eq!(m["phase"], "Succeeded", "{m:#}");
    assert_eq!(successful_evictions(&cluster.fake), ["shop/web-1"]);
    assert_eq!(descheduled_events(&cluster.fake, "uid-shop-web-1"), 1);
}

/// A call the cluster's RBAC refuses is not retried until the TTL: the pod migration fails at
/// once, naming the call and the API server's answer, and its placeholder is released.
#[tokio::test]
async fn a_call_the_rbac_refuses_fails_the_pod_migration_at_once() {
    let rbac = deploy_rbac();
    let without_evictions = rbac.replace(
        "  - apiGroups: [\"\"]\n    resources: [\"pods/eviction\"]\n    verbs: [\"create\"]\n",
        "",
    );
    assert_ne!(
        rbac, without_evictions,
        "the eviction rule is in deploy/rbac.yaml"
    );
    let mut cluster = cluster_with(Spec {
        rbac: without_evictions,
        ..Spec::new(&[])
    })
    .await;
    cluster.expect_denied = true;
    let server = TestServer::start_with(managing(&cluster, "server-a")).await;
    wait_synced(&server).await;
    let started = Instant::now();
    let decision = propose_and_approve_web_1(&server).await;
    let m = finished_migration(&server, decision).await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "failed at once, not after the TTL"
    );
    assert_eq!(m["phase"], "Failed", "{m:#}");
    assert_eq!(m["reason"], "Forbidden", "{m:#}");
    let message = m["message"].as_str().unwrap();
    for part in [
        "create pods/eviction of pod shop/web-1",
        "Forbidden: ",
        "(403)",
    ] {
        assert!(message.contains(part), "{part:?} in {message:?}");
    }
    assert!(!message.contains("Status {"), "no debug structs: {message}");
    assert_eq!(successful_evictions(&cluster.fake), Vec::<String>::new());
    let denied = cluster.fake.denied();
    assert!(
        denied
            .iter()
            .all(|(a, _)| a.resource == "pods" && a.subresource == "eviction"),
        "only the eviction was refused: {denied:?}"
    );
    nothing_left(&cluster).await;
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
    // The evicted pod stays terminating (as with a real grace period) until the end: a resumed
    // pod migration sees it so, and must not evict it again.
    let cluster = cluster_with(Spec {
        kubelet: Kubelet::Manual,
        ..Spec::new(groups)
    })
    .await;
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
    assert_eq!(
        cluster.fake.evictions_of("uid-shop-web-1"),
        1,
        "{point}: one Eviction call for the pod's uid"
    );
    assert_eq!(
        descheduled_events(&cluster.fake, "uid-shop-web-1"),
        1,
        "{point}: one Descheduled Event for the pod's uid"
    );
    let replacement = last["newPod"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        replacement.starts_with("uid-shop-web-r"),
        "{point}: the replacement is a new replica: {last:#}"
    );
    assert!(
        cluster.fake.finish_termination("shop", "web-1"),
        "{point}: the evicted pod was still terminating"
    );
    nothing_left(&cluster).await;
    second.terminate();
}

const KOORD: &[OptionalGroup] = &[OptionalGroup::Reservation];

/// One test per crash point: `name: groups, fault point, step the crash leaves`. The fake API
/// server lives in this process while the test blocks waiting for the binary: each test needs
/// a worker of its own. `ReserveCalled` and `EvictCalled` come between a call and its record
/// (with a placeholder, the first finds it already there on restart: AlreadyExists, then a read
/// the RBAC must grant).
macro_rules! crash_tests {
    ($($name:ident: $groups:expr, $point:literal, $step:literal;)*) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            crash_and_resume($groups, $point, $step).await;
        }
    )*};
}

crash_tests! {
    crash_after_admission: KOORD, "Admitted", "Admitted";
    crash_after_the_reservation_was_made_before_it_was_recorded: KOORD, "ReserveCalled", "Reserving";
    crash_after_reserving_was_persisted: KOORD, "Reserving", "Reserving";
    crash_after_the_reservation_was_created: KOORD, "ReservationCreated", "ReservationCreated";
    crash_after_the_reservation_was_scheduled: KOORD, "ReservationScheduled", "ReservationScheduled";
    crash_after_evicting_was_persisted: KOORD, "Evicting", "Evicting";
    crash_after_the_eviction_call_before_it_was_recorded: KOORD, "EvictCalled", "Evicting";
    crash_after_the_eviction_was_recorded: KOORD, "Evicted", "Evicted";
    crash_after_the_replacement_bound: KOORD, "PodBoundReservation", "PodBoundReservation";
    crash_before_complete: KOORD, "BoundPodReady", "BoundPodReady";
    crash_with_a_placeholder_after_reserving: &[], "Reserving", "Reserving";
    crash_with_a_placeholder_after_the_eviction_call: &[], "EvictCalled", "Evicting";
    crash_with_a_placeholder_after_the_eviction_was_recorded: &[], "Evicted", "Evicted";
    crash_with_a_placeholder_after_it_was_made_before_it_was_recorded: &[], "ReserveCalled", "Reserving";
    crash_with_a_placeholder_after_it_was_scheduled: &[], "ReservationScheduled", "ReservationScheduled";
    crash_with_a_placeholder_after_evicting_was_persisted: &[], "Evicting", "Evicting";
    crash_with_a_placeholder_after_the_replacement_landed: &[], "PodBoundReservation", "PodBoundReservation";
    crash_with_a_placeholder_after_admission: &[], "Admitted", "Admitted";
    crash_with_a_placeholder_after_it_was_created: &[], "ReservationCreated", "ReservationCreated";
    crash_with_a_placeholder_before_complete: &[], "BoundPodReady", "BoundPodReady";
}
