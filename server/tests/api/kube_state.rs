//! What the server says about a managed Kubernetes cluster, end to end against the fake API
//! server: a Lease it cannot read or take (cluster view, `/readyz`, waiting pod migrations),
//! a cluster unreachable from the start (listed, readable, runs answered 503), readiness
//! across the first sync after a restart, heartbeats that make no revision, the placeholder
//! PriorityClass warning, and one JSON type for pod-migration numbers in every answer.

use std::time::{Duration, Instant};

use rebalancer_kube_fake::FakeApiServer;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::kube::{
    EAST, cluster, lifetime_profile, managing, migration_until, propose_and_approve_web_1, until,
    wait_synced,
};
use crate::support::{TestServer, client_with_token};

const LEASE: &str = "rebalancer/rebalancer-east";

fn lease(spec: Value) -> Value {
    json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "rebalancer-east", "namespace": "rebalancer"},
        "spec": spec
    })
}

/// The revision of `east` as the cluster view shows it now.
async fn revision(server: &TestServer) -> i64 {
    server.get(&format!("/api/v1/clusters/{EAST}")).await.1["revision"]
        .as_i64()
        .unwrap()
}

/// The pod migration of `decision`, once its reason is `reason`.
async fn migration_with_reason(server: &TestServer, decision: i64, reason: &str) -> Value {
    let what = format!("the pod migration's reason {reason}");
    migration_until(server, decision, &what, |m| m["reason"] == reason).await
}

#[tokio::test]
async fn a_lease_that_cannot_be_read_is_shown_and_named_by_waiting_pod_migrations() {
    let cluster = cluster(&[]).await;
    // A Lease record the server cannot decode: every read of it fails.
    cluster.fake.apply(lease(
        json!({"holderIdentity": 7, "leaseDurationSeconds": "fifteen"}),
    ));
    let server = TestServer::start_with(managing(&cluster, "server-a")).await;
    wait_synced(&server).await;

    let view = until(
        &server,
        &format!("/api/v1/clusters/{EAST}"),
        "the lease error",
        |c| c["kubernetes"]["lease"]["error"].is_string(),
    )
    .await;
    let error = view["kubernetes"]["lease"]["error"].as_str().unwrap();
    assert!(error.starts_with("get: "), "{view:#}");
    assert!(!error.contains("Error {"), "no debug structs: {error}");
    assert_eq!(view["kubernetes"]["lease"]["held"], false, "{view:#}");

    let (status, ready) = server.get("/readyz").await;
    assert_eq!(status, StatusCode::OK, "{ready:#}");
    assert_eq!(ready["status"], "degraded", "{ready:#}");
    assert_eq!(ready["cannotAct"][0]["cluster"], EAST, "{ready:#}");
    let reason = ready["cannotAct"][0]["reason"].as_str().unwrap();
    assert!(
        reason.starts_with(&format!("cannot take the lease {LEASE}: get: ")),
        "{ready:#}"
    );

    let decision = propose_and_approve_web_1(&server).await;
    let m = migration_with_reason(&server, decision, "WaitingForLease").await;
    assert_eq!(m["phase"], "Pending", "{m:#}");
    let message = m["message"].as_str().unwrap();
    assert!(
        message.starts_with(&format!(
            "waiting for the lease {LEASE}, which this server cannot take: get: "
        )),
        "{m:#}"
    );
    assert!(cluster.fake.evictions().is_empty(), "nothing acted");

    // A Lease that can be taken again: the error goes, readiness recovers, the move runs.
    cluster.fake.delete(
        "coordination.k8s.io/v1",
        "Lease",
        "rebalancer",
        "rebalancer-east",
    );
    until(&server, "/readyz", "readiness back", |r| {
        r["status"] == "ready" && r["cannotAct"].as_array().is_some_and(Vec::is_empty)
    })
    .await;
    let (_, view) = server.get(&format!("/api/v1/clusters/{EAST}")).await;
    assert_eq!(
        view["kubernetes"]["lease"]["error"],
        Value::Null,
        "{view:#}"
    );
    migration_until(
        &server,
        decision,
        "the pod migration to leave Pending",
        |m| m["phase"] != "Pending",
    )
    .await;
}

/// The Lease in a namespace `deploy/rbac.yaml` does not grant (the old out-of-cluster default,
/// `default`): the API server's 403 is shown as it reads, in the cluster's view, `/readyz` and
/// the waiting pod migration; nothing acts.
#[tokio::test]
async fn a_lease_the_rbac_refuses_is_a_readable_403_everywhere() {
    let mut cluster = cluster(&[]).await;
    cluster.expect_denied = true;
    let settings = managing(&cluster, "server-a");
    let server = TestServer::start_with(move |s| {
        settings(s);
        s.kube.lease.namespace = "default".into();
    })
    .await;
    wait_synced(&server).await;
    let view = until(
        &server,
        &format!("/api/v1/clusters/{EAST}"),
        "the lease error",
        |c| c["kubernetes"]["lease"]["error"].is_string(),
    )
    .await;
    let error = view["kubernetes"]["lease"]["error"].as_str().unwrap();
    for part in [
        "Forbidden: ",
        "cannot get resource \"leases\" in API group \"coordination.k8s.io\" in the namespace \"default\"",
        "(403)",
    ] {
        assert!(error.contains(part), "{part:?} in {error:?}");
    }
    let (_, ready) = server.get("/readyz").await;
    assert_eq!(ready["status"], "degraded", "{ready:#}");
    assert!(
        ready["cannotAct"][0]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("(403)")),
        "{ready:#}"
    );
    let decision = propose_and_approve_web_1(&server).await;
    let m = migration_with_reason(&server, decision, "WaitingForLease").await;
    let message = m["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "waiting for the lease default/rebalancer-east, which this server cannot take: "
        ) && message.contains("(403)"),
        "{m:#}"
    );
    assert!(cluster.fake.evictions().is_empty(), "nothing acted");
    let denied = cluster.fake.denied();
    assert!(
        !denied.is_empty()
            && denied
                .iter()
                .all(|(a, ns)| a.resource == "leases" && ns == "default"),
        "only the Lease was refused: {denied:?}"
    );
}

#[tokio::test]
async fn a_non_holder_names_the_lease_and_its_holder_and_numbers_keep_one_type() {
    let cluster = cluster(&[]).await;
    let renewed = time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap();
    cluster.fake.apply(lease(json!({
        "holderIdentity": "server-b",
        "leaseDurationSeconds": 3600,
        "acquireTime": renewed,
        "renewTime": renewed
    })));
    let server = TestServer::start_with(managing(&cluster, "server-a")).await;
    wait_synced(&server).await;
    until(
        &server,
        &format!("/api/v1/clusters/{EAST}"),
        "the holder",
        |c| c["kubernetes"]["lease"]["holder"] == "server-b",
    )
    .await;

    let decision = propose_and_approve_web_1(&server).await;
    let m = migration_with_reason(&server, decision, "WaitingForLease").await;
    assert_eq!(
        m["message"],
        format!("waiting for the lease {LEASE}, held by server-b"),
        "{m:#}"
    );
    assert!(!m.to_string().contains("waiting for arbitration"), "{m:#}");

    // ttlSeconds is an integer in the list, in GET and in the abort's answer.
    let id = m["id"].as_i64().unwrap();
    assert!(m["ttlSeconds"].is_i64(), "list: {m:#}");
    let (_, one) = server.get(&format!("/api/v1/pod-migrations/{id}")).await;
    assert!(one["ttlSeconds"].is_i64(), "GET: {one:#}");
    let (status, aborted) = server
        .post_json(&format!("/api/v1/pod-migrations/{id}/abort"), &json!({}))
        .await;
    assert!(status.is_success(), "{aborted:#}");
    assert!(aborted["ttlSeconds"].is_i64(), "abort: {aborted:#}");
    assert_eq!(aborted["ttlSeconds"], one["ttlSeconds"]);
}

#[tokio::test]
async fn an_unreachable_cluster_is_listed_and_readable_and_runs_are_told_it_is_syncing() {
    let cluster = cluster(&[]).await;
    cluster.fake.set_down(true);
    let server = TestServer::start_with(managing(&cluster, "server-a")).await;
    server.put_profile("lifetime", &lifetime_profile()).await;

    let view = until(
        &server,
        &format!("/api/v1/clusters/{EAST}"),
        "the cluster, disconnected",
        |c| c["kubernetes"]["connection"]["state"] == "disconnected",
    )
    .await;
    assert_eq!(view["backend"], "kubernetes", "{view:#}");
    assert!(view["kubernetes"]["apiServer"].is_string(), "{view:#}");
    assert!(
        view["kubernetes"]["connection"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("discovery failed: ")),
        "{view:#}"
    );
    assert_eq!(view["kubernetes"]["connection"]["lastSyncMs"], Value::Null);
    assert_eq!(view["kubernetes"]["lease"]["lease"], LEASE, "{view:#}");
    assert_eq!(
        (
            view["revision"].as_i64(),
            view["nodes"].as_i64(),
            view["pods"].as_i64()
        ),
        (Some(0), Some(0), Some(0)),
        "{view:#}"
    );
    assert_eq!(view["snapshotTime"], Value::Null, "{view:#}");
    let (status, list) = server.get("/api/v1/clusters").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["name"] == EAST && c["backend"] == "kubernetes"),
        "{list:#}"
    );

    let (status, ready) = server.get("/readyz").await;
    assert_eq!(
        status,
        StatusCode::OK,
        "unreachable is degraded, not unready: {ready:#}"
    );
    assert_eq!(ready["status"], "degraded", "{ready:#}");
    assert_eq!(ready["unsynced"][0]["cluster"], EAST, "{ready:#}");

    let response = client_with_token(crate::support::ADMIN_TOKEN)
        .post(server.url("/api/v1/runs"))
        .json(&json!({"cluster": EAST, "profile": "lifetime"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(response.headers().contains_key("retry-after"));
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["code"], "cluster_syncing", "{body:#}");
    let message = body["message"].as_str().unwrap();
    assert!(message.contains("still syncing"), "{message}");
    assert!(!message.contains("push"), "{message}");
    let (status, nodes) = server.get(&format!("/api/v1/clusters/{EAST}/nodes")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{nodes:#}");
    assert_eq!(nodes["code"], "cluster_syncing", "{nodes:#}");

    cluster.fake.set_down(false);
    let view = wait_synced(&server).await;
    assert_eq!(view["nodes"], 3, "{view:#}");
    let (status, run) = server.run(EAST, "lifetime").await;
    assert_eq!(status, StatusCode::CREATED, "{run:#}");
}

#[tokio::test]
async fn after_a_restart_readyz_waits_for_the_first_sync_and_runs_never_hear_push() {
    let cluster = cluster(&[]).await;
    let server = TestServer::start_with(managing(&cluster, "server-a")).await;
    server.put_profile("lifetime", &lifetime_profile()).await;
    wait_synced(&server).await;
    let server = server.restart().await;

    // The database knows the cluster; the new process has no revision of it yet.
    let response = client_with_token(crate::support::ADMIN_TOKEN)
        .post(server.url("/api/v1/runs"))
        .json(&json!({"cluster": EAST, "profile": "lifetime"}))
        .send()
        .await
        .unwrap();
    let status = response.status();
    let retry_after = response.headers().contains_key("retry-after");
    let body: Value = response.json().await.unwrap();
    match status {
        StatusCode::CREATED => {}
        StatusCode::SERVICE_UNAVAILABLE => {
            assert_eq!(body["code"], "cluster_syncing", "{body:#}");
            assert!(retry_after, "{body:#}");
        }
        other => panic!("a run during the first sync: {other} {body:#}"),
    }

    // Ready means synced: a run right after the first 200 finds a revision.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, ready) = server.get("/readyz").await;
        if status == StatusCode::OK {
            assert_eq!(ready["status"], "ready", "{ready:#}");
            break;
        }
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{ready:#}");
        assert!(
            matches!(
                ready["code"].as_str(),
                Some("not_ready" | "cluster_syncing")
            ),
            "{ready:#}"
        );
        assert!(Instant::now() < deadline, "never ready: {ready:#}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let (status, run) = server.run(EAST, "lifetime").await;
    assert_eq!(status, StatusCode::CREATED, "{run:#}");
}

/// Every node's Ready condition with a new `lastHeartbeatTime`, as kubelets write it.
fn heartbeat(fake: &FakeApiServer, at: &str) {
    for n in ["n1", "n2", "n3"] {
        let mut node = fake.get("v1", "Node", "", n).unwrap();
        node["status"]["conditions"][0]["lastHeartbeatTime"] = json!(at);
        fake.apply(node);
    }
}

#[tokio::test]
async fn heartbeats_make_no_revision_a_taint_does() {
    let cluster = cluster(&[]).await;
    heartbeat(&cluster.fake, "2026-01-01T00:00:00Z");
    let server = TestServer::start_with(managing(&cluster, "server-a")).await;
    wait_synced(&server).await;
    // Let the first burst settle into its revision.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let before = revision(&server).await;

    for at in ["2026-01-01T00:00:10Z", "2026-01-01T00:00:20Z"] {
        heartbeat(&cluster.fake, at);
        // Longer than --kube-max-delay (300 ms here): a change would be built by now.
        tokio::time::sleep(Duration::from_millis(700)).await;
    }
    assert_eq!(
        revision(&server).await,
        before,
        "a heartbeat made a revision"
    );

    let mut n1 = cluster.fake.get("v1", "Node", "", "n1").unwrap();
    n1["spec"]["taints"] = json!([{"key": "maintenance", "effect": "NoSchedule"}]);
    cluster.fake.apply(n1);
    until(
        &server,
        &format!("/api/v1/clusters/{EAST}"),
        "a revision for the taint",
        |c| c["revision"].as_i64().is_some_and(|r| r > before),
    )
    .await;
}

#[tokio::test]
async fn a_missing_placeholder_priority_class_is_a_warning_until_it_exists() {
    let cluster = cluster(&[]).await;
    // deploy/priorityclass.yaml not applied.
    cluster.fake.delete(
        "scheduling.k8s.io/v1",
        "PriorityClass",
        "",
        "rebalancer-placeholder",
    );
    let server = TestServer::start_with(managing(&cluster, "server-a")).await;
    let view = until(
        &server,
        &format!("/api/v1/clusters/{EAST}"),
        "the warning",
        |c| {
            c["kubernetes"]["warnings"]
                .as_array()
                .is_some_and(|w| !w.is_empty())
        },
    )
    .await;
    let warning = view["kubernetes"]["warnings"][0].as_str().unwrap();
    assert!(
        warning.starts_with("PriorityClass rebalancer-placeholder does not exist"),
        "{view:#}"
    );

    cluster.fake.apply(json!({
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "rebalancer-placeholder"},
        "value": -100,
        "preemptionPolicy": "Never"
    }));
    until(
        &server,
        &format!("/api/v1/clusters/{EAST}"),
        "the warning gone",
        |c| {
            c["kubernetes"]["warnings"]
                .as_array()
                .is_some_and(Vec::is_empty)
        },
    )
    .await;
}

#[tokio::test]
async fn without_placeholders_the_priority_class_is_not_needed() {
    let cluster = cluster(&[]).await;
    let configure = managing(&cluster, "server-a");
    let server = TestServer::start_with(move |s| {
        configure(s);
        s.kube.act.reservation_mode = rebalancer_kube::ReservationMode::Reservation;
    })
    .await;
    let view = wait_synced(&server).await;
    assert_eq!(view["kubernetes"]["warnings"], json!([]), "{view:#}");
}
