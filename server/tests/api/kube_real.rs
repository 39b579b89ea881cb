//! The whole loop against a REAL cluster: ignored unless asked for, as no cluster can run on
//! the machines CI uses. With `KUBECONFIG` pointing at a disposable cluster (kind, minikube…):
//!
//! ```text
//! KUBECONFIG=~/.kube/config cargo test -p rebalancer-server --test api -- --ignored real_cluster
//! ```
//!
//! It creates a namespace `rebalancer-e2e-<pid>` with a two-replica Deployment of the pause
//! image (and the placeholder PriorityClass when missing), starts the server managing the
//! current context as cluster `real`, proposes moving one replica with PodLifeTime restricted
//! to that namespace, approves it, and checks the pod migration: a reservation (Koordinator's
//! where served, else a placeholder pod) placed on another node, the pod evicted through the
//! Eviction API, its replacement running, nothing left behind. It deletes what it created.
//! A single-node cluster has nowhere to move the pod: the pod migration then fails as
//! unschedulable without evicting anything, which the test also accepts and reports.

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};
use rebalancer_server::config::KubeCluster;
use serde_json::json;

use crate::support::TestServer;

const CLUSTER: &str = "real";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real cluster: set KUBECONFIG and pass --ignored (see the module doc)"]
async fn real_cluster_whole_loop() {
    assert!(
        std::env::var_os("KUBECONFIG").is_some(),
        "set KUBECONFIG to a disposable cluster"
    );
    let client = kube::Client::try_default()
        .await
        .expect("a client from KUBECONFIG");
    let namespace = format!("rebalancer-e2e-{}", std::process::id());
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": namespace}})).unwrap(),
        )
        .await
        .expect("creating the test namespace");
    let classes: Api<PriorityClass> = Api::all(client.clone());
    let created_class = classes
        .get_opt("rebalancer-placeholder")
        .await
        .unwrap()
        .is_none();
    if created_class {
        classes
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({
                    "metadata": {"name": "rebalancer-placeholder"},
                    "value": -100, "preemptionPolicy": "Never", "globalDefault": false
                }))
                .unwrap(),
            )
            .await
            .expect("creating the placeholder PriorityClass");
    }
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &namespace);
    deployments
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "web"},
                "spec": {
                    "replicas": 2,
                    "selector": {"matchLabels": {"app": "web"}},
                    "template": {
                        "metadata": {"labels": {"app": "web"}},
                        "spec": {"containers": [{
                            "name": "pause", "image": "registry.k8s.io/pause:3.10",
                            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}
                        }]}
                    }
                }
            }))
            .unwrap(),
        )
        .await
        .expect("creating the test Deployment");

    let outcome = whole_loop(&namespace).await;

    let _ = namespaces
        .delete(&namespace, &DeleteParams::default())
        .await;
    if created_class {
        let _ = classes
            .delete("rebalancer-placeholder", &DeleteParams::default())
            .await;
    }
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::all(client);
    let left = pods
        .list(&ListParams::default().labels("rebalancer.io/reservation"))
        .await
        .map(|l| l.items.len())
        .unwrap_or(0);
    outcome.unwrap();
    assert_eq!(left, 0, "placeholder pods left behind");
}

async fn whole_loop(namespace: &str) -> Result<(), String> {
    let kubeconfig = std::env::var("KUBECONFIG").unwrap_or_default();
    let first = std::env::split_paths(&kubeconfig).next();
    let server = TestServer::start_with(move |s| {
        s.demo = false;
        s.kube.clusters = vec![KubeCluster {
            name: CLUSTER.into(),
            source: rebalancer_kube::Source::Kubeconfig {
                path: first.clone(),
                context: None,
            },
        }];
        s.kube.lease.namespace = "default".into();
    })
    .await;
    let deadline = Instant::now() + Duration::from_secs(120);
    // Synced, with both replicas Running.
    loop {
        let (status, view) = server.get(&format!("/api/v1/clusters/{CLUSTER}")).await;
        if status.is_success() && view["kubernetes"]["connection"]["state"] == "synced" {
            let (_, pods) = server
                .get(&format!(
                    "/api/v1/clusters/{CLUSTER}/pods?namespace={namespace}"
                ))
                .await;
            let running = pods["items"]
                .as_array()
                .map_or(0, |p| p.iter().filter(|p| p["phase"] == "Running").count());
            if running == 2 {
                break;
            }
        }
        if Instant::now() > deadline {
            return Err(format!("not synced with 2 running replicas: {view:#}"));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    server
        .put_profile(
            "e2e",
            &json!({
                "apiVersion": "descheduler/v1alpha2",
                "kind": "DeschedulerPolicy",
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
            }),
        )
        .await;
    let (status, run) = server.run(CLUSTER, "e2e").await;
    if !status.is_success() {
        return Err(format!("run: {status} {run:#}"));
    }
    let (_, decisions) = server
        .get(&format!("/api/v1/decisions?run={}", run["id"]))
        .await;
    let Some(decision) = decisions["items"]
        .as_array()
        .and_then(|d| d.first())
        .cloned()
    else {
        return Err(format!("nothing proposed: {run:#}"));
    };
    let id = decision["id"].as_i64().unwrap_or(0);
    let (status, body) = server
        .post_json(&format!("/api/v1/decisions/{id}/approve"), &json!({}))
        .await;
    if !status.is_success() {
        return Err(format!("approve: {status} {body:#}"));
    }
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let (_, list) = server
            .get(&format!("/api/v1/pod-migrations?decision={id}"))
            .await;
        let m = &list["items"][0];
        match m["phase"].as_str() {
            Some("Succeeded") => {
                eprintln!("pod migration succeeded: {m:#}");
                return Ok(());
            }
            Some("Failed") if m["reason"] == "Unschedulable" => {
                eprintln!("nowhere to move the pod (single node?), nothing evicted: {m:#}");
                return Ok(());
            }
            Some("Failed" | "Aborted") => return Err(format!("pod migration failed: {m:#}")),
            _ => {}
        }
        if Instant::now() > deadline {
            return Err(format!("pod migration did not finish: {m:#}"));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
