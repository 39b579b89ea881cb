//! The whole loop against a REAL cluster: ignored unless asked for, as no cluster can run on
//! the machines CI uses. What the in-process fake API server (`kube`) cannot show is shown
//! here: graceful deletion (an evicted pod stays Terminating for its grace period), the
//! ReplicaSet controller and the default scheduler placing replacements, the disruption
//! controller, Koordinator, and `deploy/`'s RBAC as a real API server enforces it.
//!
//! # Running
//!
//! Any disposable cluster with at least two schedulable nodes (Ready, not cordoned, no
//! NoSchedule/NoExecute taint) with room for a few small pods (10m CPU, 16Mi each):
//!
//! ```text
//! kind create cluster --name rebalancer-e2e --config - <<EOF
//! kind: Cluster
//! apiVersion: kind.x-k8s.io/v1alpha4
//! nodes: [{role: control-plane}, {role: worker}, {role: worker}]
//! EOF
//! #   or: minikube start --nodes 3 -p rebalancer-e2e
//! #   or: k3d cluster create rebalancer-e2e --agents 2
//! export KUBECONFIG=$(mktemp); kind get kubeconfig --name rebalancer-e2e > $KUBECONFIG
//!
//! # every test, one after the other (they take a process-wide lock anyway):
//! cargo test -p rebalancer-server --test api -- --ignored --test-threads=1 kube_real
//! # one of them:
//! cargo test -p rebalancer-server --test api -- --ignored kube_real::a_pdb_blocks_the_move
//! # acting as deploy/'s ServiceAccount instead of KUBECONFIG's own credentials:
//! REBALANCER_E2E_AS_SERVICE_ACCOUNT=1 cargo test -p rebalancer-server --test api -- --ignored --test-threads=1 kube_real
//!
//! kind delete cluster --name rebalancer-e2e
//! ```
//!
//! Variables: `KUBECONFIG` (required; its current context is the cluster, its credentials
//! create and delete the test objects); `REBALANCER_E2E_AS_SERVICE_ACCOUNT=1` (see below);
//! `REBALANCER_E2E_IMAGE` (the test pods' image, default
//! `registry.k8s.io/e2e-test-images/busybox:1.36.1-1`: a mirror for air-gapped clusters; it
//! must have `sh` and `sleep`).
//!
//! | test | needs | takes about |
//! |---|---|---|
//! | `real_cluster_whole_loop` | one node (one alone: the move fails as unschedulable, evicting nothing, which passes) | 1 min |
//! | `a_pdb_blocks_the_move_until_it_is_relaxed` | 2 nodes | 1.5 min |
//! | `two_moves_of_one_replicaset_get_two_replacements` | 2 nodes (3 when no node holds two of the 4 replicas) | 1.5 min |
//! | `a_crash_after_the_eviction_evicts_once` | 2 nodes | 1.5 min |
//! | `a_move_through_a_koordinator_reservation` | 2 nodes, Koordinator (the Reservation CRD served and koord-scheduler running); skipped, saying why, without it | 1.5 min |
//!
//! Add a minute or two the first time, for the image pull and the built-in policies' compile.
//! Every wait is bounded (at most 5 minutes a test) and fails with the pod migration's JSON.
//!
//! # What they create and delete
//!
//! Each test creates a namespace `rebalancer-e2e-<pid>-<n>` with a Deployment `web` (pods
//! whose only container ignores SIGTERM, with a 30 s grace period: an evicted pod stays
//! Terminating for 30 s, as slow real workloads do) and, for the PDB test, a
//! PodDisruptionBudget; the PriorityClass `rebalancer-placeholder` of `deploy/` when missing;
//! and it cordons the node of each pod it moves (so that the replacement cannot land back on
//! it, which the default scheduler may otherwise do in a cluster with room everywhere). The
//! server under test creates placeholder pods (`rebalancer-pm-<id>`, in the test namespace) or
//! Koordinator Reservations, the Lease `rebalancer-real` (in the test namespace) and
//! `Descheduled` Events. At the end, passed or failed, the test deletes its namespace (and
//! everything in it), the Reservations made for it, the PriorityClass if it created it, and
//! uncordons the nodes it cordoned. A test killed outright (SIGKILL, Ctrl-C) cleans nothing:
//! `kubectl delete ns -l app.kubernetes.io/created-by=rebalancer-e2e` and `kubectl uncordon`.
//!
//! With `REBALANCER_E2E_AS_SERVICE_ACCOUNT=1`, the set-up also applies `deploy/namespace.yaml`,
//! `serviceaccount.yaml`, `rbac.yaml` and `priorityclass.yaml` (create, or replace what
//! exists), requests a one-hour token for ServiceAccount `rebalancer/rebalancer` (TokenRequest
//! API) and writes a kubeconfig with it and the current cluster's server and CA into a temporary
//! directory; every server, and the crashed binary, then manages the cluster with that
//! kubeconfig and keeps its Lease in namespace `rebalancer`. The `deploy/` objects the set-up
//! created, and the Lease, are deleted at the end; those that existed before are kept (as
//! `deploy/` has them now).

mod setup;

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::core::DynamicObject;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::support::{ADMIN_TOKEN, TestServer, client_with_token};
use setup::{CLUSTER, E2e, GRACE_SECONDS, live_web_pods, node_of, uid, web};

// ---- the tests ----------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real cluster: set KUBECONFIG and pass --ignored (see the module doc)"]
async fn real_cluster_whole_loop() {
    setup::run(|e2e| async move {
        web(2).create(&e2e).await;
        let mut server = TestServer::start_with(e2e.settings()).await;
        let api = Rest::new(&server.base);
        api.wait_synced(&e2e, 2).await;
        let decisions = api.propose(&e2e).await;
        let decision = &decisions[0];
        let id = decision["id"].as_i64().unwrap();
        let evicted = decision["pod"]["uid"].as_str().unwrap().to_owned();
        e2e.cordon(decision["node"].as_str().unwrap()).await;
        api.approve(id).await;
        let m = api.finished(id).await;
        if m["phase"] == "Failed" && m["reason"] == "Unschedulable" {
            // One node: nowhere to reserve room, so nothing may have been evicted.
            assert!(
                e2e.descheduled_events(&evicted).await.is_empty(),
                "evicted although unschedulable: {m:#}"
            );
            eprintln!("nowhere to move the pod (single node?), nothing evicted: {m:#}");
        } else {
            assert_moved(&e2e, &m, &evicted).await;
            let target = m["targetNode"].as_str();
            assert!(
                target.is_some_and(|t| t != m["sourceNode"]),
                "reserved on another node: {m:#}"
            );
            eprintln!("pod migration succeeded: {m:#}");
        }
        e2e.assert_nothing_left().await;
        server.stop().await;
    })
    .await;
}

/// A PDB allowing no disruption holds an approved pod migration before anything is evicted
/// (and before any room is reserved); relaxed, the same pod migration completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real cluster: set KUBECONFIG and pass --ignored (see the module doc)"]
async fn a_pdb_blocks_the_move_until_it_is_relaxed() {
    setup::run(|e2e| async move {
        e2e.require_nodes(2).await;
        web(2).create(&e2e).await;
        // maxUnavailable 1 while proposing: a run refuses to propose what the PDB would refuse
        // at that moment (the Eviction API's admission, judged on the snapshot).
        let pdbs: Api<PodDisruptionBudget> = Api::namespaced(e2e.client.clone(), &e2e.namespace);
        pdbs.create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "web"},
                "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}}
            }))
            .unwrap(),
        )
        .await
        .expect("creating PodDisruptionBudget web");
        disruptions_allowed(&pdbs, 1).await;

        let mut server = TestServer::start_with(e2e.settings()).await;
        let api = Rest::new(&server.base);
        api.wait_synced(&e2e, 2).await;
        let decisions = api.propose(&e2e).await;
        let id = decisions[0]["id"].as_i64().unwrap();
        let pod = decisions[0]["pod"]["name"].as_str().unwrap().to_owned();
        let evicted = decisions[0]["pod"]["uid"].as_str().unwrap().to_owned();
        e2e.cordon(decisions[0]["node"].as_str().unwrap()).await;

        set_max_unavailable(&pdbs, 0).await;
        disruptions_allowed(&pdbs, 0).await;
        api.approve(id).await;
        let m = api
            .migration_until(id, "reason BlockedByPdb", Duration::from_secs(60), |m| {
                m["reason"] == "BlockedByPdb"
            })
            .await;
        // Held, not failed: for a while nothing happens to the pod.
        let hold = Instant::now() + Duration::from_secs(15);
        while Instant::now() < hold {
            let m = api.migration(id).await;
            assert!(
                m["phase"] == "Running" && m["reason"] == "BlockedByPdb",
                "the pod migration should wait on the PDB: {m:#}"
            );
            let current = e2e
                .pods()
                .get_opt(&pod)
                .await
                .expect("reading the pod")
                .unwrap_or_else(|| panic!("pod {pod} is gone while its PDB blocks: {m:#}"));
            assert_eq!(uid(&current), evicted, "pod {pod} was replaced: {m:#}");
            assert!(
                current.metadata.deletion_timestamp.is_none(),
                "pod {pod} is terminating while its PDB blocks: {m:#}"
            );
            let events = e2e.descheduled_events(&evicted).await;
            assert!(
                events.is_empty(),
                "Descheduled while blocked: {events:#?}; {m:#}"
            );
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        eprintln!("blocked as expected: {m:#}");

        set_max_unavailable(&pdbs, 1).await;
        let m = api.finished(id).await;
        assert_moved(&e2e, &m, &evicted).await;
        e2e.assert_nothing_left().await;
        server.stop().await;
    })
    .await;
}

/// Two pod migrations of one ReplicaSet at once (bulk approval): each gets a replacement of
/// its own, both live pods of the Deployment (each claims its pod in the store, by the rule in
/// docs/operations.md, "Which pod is the replacement").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real cluster: set KUBECONFIG and pass --ignored (see the module doc)"]
async fn two_moves_of_one_replicaset_get_two_replacements() {
    setup::run(|e2e| async move {
        let nodes = e2e.require_nodes(2).await;
        let pods = web(4).create(&e2e).await;
        // Two pods of one node where there is such a node: only that node is cordoned.
        let pair = pair_to_move(&pods);
        let sources: std::collections::BTreeSet<String> = pair.iter().map(node_of).collect();
        assert!(
            nodes.iter().any(|n| !sources.contains(n)),
            "moving pods off {sources:?} needs another schedulable node; the cluster has \
             {nodes:?}"
        );

        let mut server = TestServer::start_with(e2e.settings()).await;
        let api = Rest::new(&server.base);
        api.wait_synced(&e2e, 4).await;
        let decisions = api.propose(&e2e).await;
        let ids: Vec<i64> = pair
            .iter()
            .map(|p| decision_for(&decisions, &uid(p)))
            .collect();
        for node in &sources {
            e2e.cordon(node).await;
        }
        let approved = api
            .post(
                "/api/v1/decisions/approve",
                &json!({"ids": ids, "comment": "e2e: two moves of one ReplicaSet"}),
            )
            .await;
        assert_eq!(approved["approved"], 2, "{approved:#}");

        let mut replacements = Vec::new();
        for (id, pod) in ids.iter().zip(&pair) {
            let m = api.finished(*id).await;
            replacements.push((assert_moved(&e2e, &m, &uid(pod)).await, m));
        }
        assert_ne!(
            replacements[0].0, replacements[1].0,
            "both pod migrations claim the same replacement:\n{:#}\n{:#}",
            replacements[0].1, replacements[1].1
        );
        e2e.assert_nothing_left().await;
        server.stop().await;
    })
    .await;
}

/// The binary aborts right after the Eviction API accepted the eviction, before recording it;
/// restarted on the same database while the evicted pod is still Terminating, it finishes the
/// pod migration without evicting the pod a second time: one `Descheduled` Event for its uid.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real cluster: set KUBECONFIG and pass --ignored (see the module doc)"]
async fn a_crash_after_the_eviction_evicts_once() {
    use crate::crash::{query_one, start_env};
    setup::run(|e2e| async move {
        e2e.require_nodes(2).await;
        web(2).create(&e2e).await;
        let dir = tempfile::tempdir().unwrap();
        let database = dir.path().join("crash.db");
        let env = e2e.binary_env(&format!("rebalancer-e2e-crash-{}", std::process::id()));

        let mut first = start_env(&database, Some("EvictCalled"), &env);
        let api = Rest::new(&first.base);
        api.wait_synced(&e2e, 2).await;
        let decisions = api.propose(&e2e).await;
        let id = decisions[0]["id"].as_i64().unwrap();
        let pod = decisions[0]["pod"]["name"].as_str().unwrap().to_owned();
        let evicted = decisions[0]["pod"]["uid"].as_str().unwrap().to_owned();
        e2e.cordon(decisions[0]["node"].as_str().unwrap()).await;
        // The approval is committed before the executor is woken: the process may abort
        // before answering, but an answer that comes must be a success.
        let approval = api
            .call(
                Method::POST,
                &format!("/api/v1/decisions/{id}/approve"),
                Some(&json!({"comment": "e2e: crash after the eviction"})),
            )
            .await;
        if let Ok((status, body)) = approval {
            assert!(
                status.is_success() || body.is_null(),
                "approve: {status} {body:#}"
            );
        }
        let exit = first.wait_exit();
        assert!(!exit.success(), "the process should have aborted: {exit}");
        let (migration, step) = query_one(
            &database,
            "SELECT id, step FROM pod_migrations WHERE pod_uid = ?",
            &evicted,
        )
        .await;
        assert_eq!(step, "Evicting", "where the crash left the pod migration");

        // The eviction happened: the pod is Terminating, its Event written.
        let current = e2e
            .pods()
            .get_opt(&pod)
            .await
            .expect("reading the evicted pod")
            .filter(|p| uid(p) == evicted)
            .unwrap_or_else(|| {
                panic!(
                    "pod {pod} ({evicted}) is gone already: the restart must happen within its \
                     {GRACE_SECONDS} s grace period"
                )
            });
        assert!(
            current.metadata.deletion_timestamp.is_some(),
            "pod {pod} was not evicted before the crash"
        );
        assert_eq!(e2e.descheduled_events(&evicted).await.len(), 1);

        let second = start_env(&database, None, &env);
        let api = Rest::new(&second.base);
        let m = api
            .migration_by_id_until(migration, "the pod migration to finish", |m| {
                matches!(
                    m["phase"].as_str(),
                    Some("Succeeded" | "Failed" | "Aborted")
                )
            })
            .await;
        // Exactly one Descheduled Event: on a real cluster, the evidence of one eviction.
        assert_moved(&e2e, &m, &evicted).await;
        e2e.assert_nothing_left().await;
        second.terminate();
    })
    .await;
}

/// With Koordinator, the pod migration of a koord-scheduler pod reserves room with a
/// Reservation, which the replacement consumes; the Reservation is deleted afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real cluster with Koordinator: set KUBECONFIG and pass --ignored (see the module doc)"]
async fn a_move_through_a_koordinator_reservation() {
    setup::run(|e2e| async move {
        if let Err(why) = koordinator_ready(&e2e).await {
            eprintln!("skipped: {why}");
            return;
        }
        e2e.require_nodes(2).await;
        web(2).scheduled_by("koord-scheduler").create(&e2e).await;
        let mut server = TestServer::start_with(e2e.settings()).await;
        let api = Rest::new(&server.base);
        api.wait_synced(&e2e, 2).await;
        let decisions = api.propose(&e2e).await;
        let id = decisions[0]["id"].as_i64().unwrap();
        let evicted = decisions[0]["pod"]["uid"].as_str().unwrap().to_owned();
        e2e.cordon(decisions[0]["node"].as_str().unwrap()).await;
        api.approve(id).await;

        // Watch what reserves the room while the pod migration runs.
        let reservations: Api<DynamicObject> = Api::all_with(
            e2e.client.clone(),
            &setup::reservation_resource(&e2e.client)
                .await
                .expect("the Reservation API, served a moment ago"),
        );
        let (mut saw_reservation, mut saw_placeholder) = (false, false);
        let deadline = Instant::now() + WAIT;
        let m = loop {
            let m = api.migration(id).await;
            if let Some(name) = m["reservation"].as_str() {
                saw_reservation |= reservations
                    .get_opt(name)
                    .await
                    .expect("reading the Reservation")
                    .is_some();
                saw_placeholder |= e2e
                    .pods()
                    .get_opt(name)
                    .await
                    .expect("reading pods")
                    .is_some();
            }
            if matches!(
                m["phase"].as_str(),
                Some("Succeeded" | "Failed" | "Aborted")
            ) {
                break m;
            }
            assert!(
                Instant::now() < deadline,
                "the pod migration did not finish: {m:#}"
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        };
        assert_moved(&e2e, &m, &evicted).await;
        assert_eq!(
            m["reservation"],
            format!("rebalancer-pm-{}", m["id"]),
            "{m:#}"
        );
        assert!(saw_reservation, "no Reservation was seen: {m:#}");
        assert!(
            !saw_placeholder,
            "a placeholder pod was made instead: {m:#}"
        );
        // Bound into the Reservation, not landed beside it (one move: no sibling's replacement
        // can take the Reservation first).
        assert_ne!(m["reason"], "ReplacementElsewhere", "{m:#}");
        assert_eq!(m["newPod"]["node"], m["targetNode"], "{m:#}");
        e2e.assert_nothing_left().await;
        server.stop().await;
    })
    .await;
}

// ---- the server's API ---------------------------------------------------------------------

/// How long a pod migration may take: placing the reservation, the eviction, the 30 s grace
/// period, the replacement starting (its image is on the nodes by then).
const WAIT: Duration = Duration::from_secs(180);

/// The REST API of a server under test (in process or the binary), as admin.
struct Rest {
    base: String,
    client: reqwest::Client,
}

impl Rest {
    fn new(base: &str) -> Rest {
        Rest {
            base: base.to_owned(),
            client: client_with_token(ADMIN_TOKEN),
        }
    }

    /// The answer, as (status, JSON), or why there was none.
    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(StatusCode, Value), reqwest::Error> {
        let mut request = self.client.request(method, format!("{}{path}", self.base));
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await?;
        let status = response.status();
        Ok((status, response.json().await.unwrap_or(Value::Null)))
    }

    /// A successful answer's JSON.
    async fn expect(&self, method: Method, path: &str, body: Option<&Value>) -> Value {
        let (status, body) = self
            .call(method, path, body)
            .await
            .unwrap_or_else(|e| panic!("{path}: {e}"));
        assert!(status.is_success(), "{path}: {status} {body:#}");
        body
    }

    async fn get(&self, path: &str) -> Value {
        self.expect(Method::GET, path, None).await
    }

    async fn post(&self, path: &str, body: &Value) -> Value {
        self.expect(Method::POST, path, Some(body)).await
    }

    /// Wait (90 s) until the cluster is synced, this server holds its Lease (so it acts),
    /// and it sees `replicas` Running pods of the test namespace, none terminating.
    async fn wait_synced(&self, e2e: &E2e, replicas: usize) {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            // 404 until the first revision is installed.
            let read = |path: String| async move {
                self.call(Method::GET, &path, None)
                    .await
                    .map_or(Value::Null, |(_, body)| body)
            };
            let view = read(format!("/api/v1/clusters/{CLUSTER}")).await;
            let pods = read(format!(
                "/api/v1/clusters/{CLUSTER}/pods?namespace={}",
                e2e.namespace
            ))
            .await;
            let items = pods["items"].as_array().cloned().unwrap_or_default();
            let running = items
                .iter()
                .filter(|p| p["phase"] == "Running" && p["terminating"] == false)
                .count();
            if view["kubernetes"]["connection"]["state"] == "synced"
                && view["kubernetes"]["lease"]["held"] == true
                && running == replicas
                && items.len() == replicas
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "not synced with {replicas} running pods and the Lease held: {view:#}\n{pods:#}"
            );
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    /// Store the test profile and run it: the decisions, at least one.
    async fn propose(&self, e2e: &E2e) -> Vec<Value> {
        self.expect(
            Method::PUT,
            "/api/v1/profiles/e2e",
            Some(&profile(&e2e.namespace)),
        )
        .await;
        let run = self
            .post(
                "/api/v1/runs",
                &json!({"cluster": CLUSTER, "profile": "e2e"}),
            )
            .await;
        let decisions = self
            .get(&format!("/api/v1/decisions?run={}", run["id"]))
            .await;
        let items = decisions["items"].as_array().cloned().unwrap_or_default();
        assert!(!items.is_empty(), "nothing proposed: {run:#}");
        items
    }

    async fn approve(&self, decision: i64) {
        self.post(
            &format!("/api/v1/decisions/{decision}/approve"),
            &json!({"comment": "e2e"}),
        )
        .await;
    }

    /// The pod migration of `decision`.
    async fn migration(&self, decision: i64) -> Value {
        let list = self
            .get(&format!("/api/v1/pod-migrations?decision={decision}"))
            .await;
        list["items"][0].clone()
    }

    /// Poll the pod migration of `decision` until `check` holds (`limit`).
    async fn migration_until(
        &self,
        decision: i64,
        what: &str,
        limit: Duration,
        check: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = Instant::now() + limit;
        loop {
            let m = self.migration(decision).await;
            if check(&m) {
                return m;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}: {m:#}"
            );
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    /// The pod migration of `decision`, once it has finished.
    async fn finished(&self, decision: i64) -> Value {
        self.migration_until(decision, "the pod migration to finish", WAIT, |m| {
            matches!(
                m["phase"].as_str(),
                Some("Succeeded" | "Failed" | "Aborted")
            )
        })
        .await
    }

    /// Poll pod migration `id` until `check` holds ([`WAIT`]).
    async fn migration_by_id_until(
        &self,
        id: i64,
        what: &str,
        check: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = Instant::now() + WAIT;
        loop {
            let m = self.get(&format!("/api/v1/pod-migrations/{id}")).await;
            if check(&m) {
                return m;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}: {m:#}"
            );
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
}

/// PodLifeTime over the test namespace (every pod older than a second), evicting with
/// [`GRACE_SECONDS`].
fn profile(namespace: &str) -> Value {
    json!({
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "gracePeriodSeconds": GRACE_SECONDS,
        "profiles": [{
            "name": "e2e",
            "pluginConfig": [
                {"name": "DefaultEvictor", "args": {}},
                {"name": "PodLifeTime", "args": {
                    "maxPodLifeTimeSeconds": 1,
                    "namespaces": {"include": [namespace]}
                }}
            ],
            "plugins": {"deschedule": {"enabled": ["PodLifeTime"]}}
        }]
    })
}

fn decision_for(decisions: &[Value], uid: &str) -> i64 {
    decisions
        .iter()
        .find(|d| d["pod"]["uid"] == uid)
        .and_then(|d| d["id"].as_i64())
        .unwrap_or_else(|| panic!("pod {uid} was not proposed: {decisions:#?}"))
}

// ---- checks -------------------------------------------------------------------------------

/// `m` moved the pod `evicted`: Succeeded and Complete; its replacement (`newPod`) is a live
/// pod of Deployment `web` on another node; the evicted pod no longer runs; exactly one
/// `Descheduled` Event was written for it (one eviction). Returns the replacement's uid.
async fn assert_moved(e2e: &E2e, m: &Value, evicted: &str) -> String {
    assert_eq!(m["phase"], "Succeeded", "{m:#}");
    assert_eq!(m["status"], "Complete", "{m:#}");
    let replacement = m["newPod"]["uid"]
        .as_str()
        .unwrap_or_else(|| panic!("no replacement recorded: {m:#}"))
        .to_owned();
    assert_ne!(replacement, evicted, "{m:#}");
    let live = live_web_pods(e2e).await;
    assert!(
        !live.iter().any(|p| uid(p) == evicted),
        "the evicted pod is still live: {m:#}"
    );
    let new: &Pod = live
        .iter()
        .find(|p| uid(p) == replacement)
        .unwrap_or_else(|| panic!("the replacement is not a live pod of Deployment web: {m:#}"));
    assert_ne!(
        node_of(new),
        m["sourceNode"].as_str().unwrap_or_default(),
        "the replacement runs on the node its pod was evicted from: {m:#}"
    );
    let events = e2e.descheduled_events(evicted).await;
    let names: Vec<_> = events.iter().map(|e| &e.metadata.name).collect();
    assert_eq!(
        events.len(),
        1,
        "Descheduled Events for pod {evicted}: {names:?}; {m:#}"
    );
    replacement
}

/// Two pods to move: two of one node where a node holds two, else two of different nodes.
fn pair_to_move(pods: &[Pod]) -> [Pod; 2] {
    for (i, a) in pods.iter().enumerate() {
        if let Some(b) = pods[i + 1..].iter().find(|b| node_of(b) == node_of(a)) {
            return [a.clone(), b.clone()];
        }
    }
    [pods[0].clone(), pods[1].clone()]
}

async fn set_max_unavailable(pdbs: &Api<PodDisruptionBudget>, value: i32) {
    pdbs.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"maxUnavailable": value}})),
    )
    .await
    .unwrap_or_else(|e| panic!("setting the PDB's maxUnavailable to {value}: {e}"));
}

/// Wait (60 s) until the disruption controller has judged the PDB's current spec.
async fn disruptions_allowed(pdbs: &Api<PodDisruptionBudget>, allowed: i32) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let pdb = pdbs.get("web").await.expect("reading the PDB");
        let status = pdb.status.clone().unwrap_or_default();
        if status.observed_generation == pdb.metadata.generation
            && status.disruptions_allowed == allowed
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the PDB does not allow {allowed} disruption(s): {:#?}",
            pdb.status
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// `Ok` when the cluster serves Koordinator's Reservation API and a koord-scheduler pod is
/// Ready (the Helm chart labels it `koord-app=koord-scheduler`; other installs name it
/// `koord-scheduler-…` or label it `app.kubernetes.io/name=koord-scheduler`); else why not.
async fn koordinator_ready(e2e: &E2e) -> Result<(), String> {
    if setup::reservation_resource(&e2e.client).await.is_none() {
        let (group, version, kind) = setup::RESERVATION;
        return Err(format!(
            "the cluster does not serve {group}/{version} {kind}"
        ));
    }
    let pods: Api<Pod> = Api::all(e2e.client.clone());
    let all = pods
        .list(&ListParams::default())
        .await
        .map_err(|e| format!("listing pods: {e}"))?;
    let scheduler = all.items.iter().find(|p| {
        let labels = p.metadata.labels.clone().unwrap_or_default();
        let named = p
            .metadata
            .name
            .as_deref()
            .is_some_and(|n| n.starts_with("koord-scheduler"));
        let labelled = labels.get("koord-app").map(String::as_str) == Some("koord-scheduler")
            || labels.get("app.kubernetes.io/name").map(String::as_str) == Some("koord-scheduler");
        (named || labelled) && setup::is_ready(p)
    });
    match scheduler {
        Some(_) => Ok(()),
        None => Err("no Ready koord-scheduler pod in any namespace".into()),
    }
}
