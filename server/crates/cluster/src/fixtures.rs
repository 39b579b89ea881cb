//! Test builders: small Kubernetes objects (`node`, `pod`, …) and snapshots built from them, for
//! the tests of the scheduling predicates here and of the simulated backend and executor in the
//! server. Compiled for this crate's tests and, for other crates, with the `fixtures` feature.
//! Must not: be used outside tests.

use serde_json::{Value, json};

use crate::{ClusterSnapshot, Format, build_snapshot, parse_list};

pub const TS: &str = "2026-01-01T00:00:00Z";

/// A Ready node with `cpu` (cores or millicores), `memory` and 110 pod slots.
pub fn node(name: &str, cpu: &str, memory: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "uid": format!("uid-node-{name}"), "creationTimestamp": TS,
                     "labels": {"kubernetes.io/hostname": name}},
        "spec": {},
        "status": {
            "allocatable": {"cpu": cpu, "memory": memory, "pods": "110"},
            "capacity": {"cpu": cpu, "memory": memory, "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    })
}

/// A Running, Ready pod with one container requesting `cpu` and `memory`, owned by
/// `owner = (kind, name)` when given (controller reference, uid `uid-<kind>-<name>`).
pub fn pod(
    namespace: &str,
    name: &str,
    node: Option<&str>,
    cpu: &str,
    memory: &str,
    owner: Option<(&str, &str)>,
) -> Value {
    let mut p = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": format!("uid-{namespace}-{name}"),
                     "creationTimestamp": TS, "labels": {"app": name.split('-').next().unwrap_or(name)}},
        "spec": {"containers": [{"name": "main", "image": "example/app:1",
                                 "resources": {"requests": {"cpu": cpu, "memory": memory}}}]},
        "status": {"phase": "Running", "startTime": TS,
                   "conditions": [{"type": "Ready", "status": "True"}],
                   "containerStatuses": [{"name": "main", "ready": true, "restartCount": 0}]},
    });
    if let Some(n) = node {
        p["spec"]["nodeName"] = json!(n);
    }
    if let Some((kind, owner_name)) = owner {
        let api = match kind {
            "Job" => "batch/v1",
            "ReplicaSet" | "StatefulSet" | "DaemonSet" => "apps/v1",
            _ => "v1",
        };
        p["metadata"]["ownerReferences"] = json!([{
            "apiVersion": api, "kind": kind, "name": owner_name,
            "uid": format!("uid-{kind}-{owner_name}"), "controller": true,
        }]);
    }
    p
}

/// A PDB over pods labelled `app=<app>`; `budget` is e.g. `{"minAvailable": 2}`.
pub fn pdb(namespace: &str, name: &str, app: &str, budget: Value) -> Value {
    let mut spec = budget;
    spec["selector"] = json!({"matchLabels": {"app": app}});
    json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace, "uid": format!("uid-pdb-{name}"),
                     "creationTimestamp": TS},
        "spec": spec,
        "status": {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0,
                   "expectedPods": 0, "observedGeneration": 1},
    })
}

/// A kubectl `v1 List` of `items`.
pub fn list(items: &[Value]) -> String {
    json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string()
}

/// The snapshot of `items`.
pub fn snapshot(items: &[Value]) -> ClusterSnapshot {
    let set = parse_list(list(items), Format::Json).expect("fixture parses");
    build_snapshot(&set, 1, 1_767_225_600_000).expect("fixture builds")
}
