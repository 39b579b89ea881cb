//! What koordlet and koord-scheduler add to a simulated cluster: a NodeMetric and a
//! NodeResourceTopology per node, and the cpusets of pinned pods. Used by the demo generator
//! (what the cluster looks like when loaded) and by the simulated backend, which plays koordlet
//! afterwards ([`report`]: evicted pods leave their node's metric, replacements join theirs
//! with the same usage, and every metric is reported fresh).
//!
//! Owns the JSON shapes of those objects and how the simulation measures usage; must not know
//! about the store, the engine or HTTP.

use serde_json::{Value, json};

/// The pod label naming the Koordinator QoS class.
pub const QOS_LABEL: &str = "koordinator.sh/qosClass";
/// The pod label naming the Koordinator priority class.
pub const PRIORITY_CLASS_LABEL: &str = "koordinator.sh/priority-class";
/// The pod annotation koord-scheduler records a cpuset in.
pub const RESOURCE_STATUS: &str = "scheduling.koordinator.sh/resource-status";
/// koordlet's default reporting window and interval, in seconds.
pub const AGGREGATE_SECONDS: i64 = 300;
pub const REPORT_INTERVAL_SECONDS: i64 = 60;

/// One running pod's measured usage.
#[derive(Clone, Debug, PartialEq)]
pub struct PodUsage {
    pub namespace: String,
    pub name: String,
    pub cpu_m: i64,
    pub mem_mi: i64,
}

/// A NodeMetric (`slo.koordinator.sh/v1alpha1`) of node `node`, reported at `update_time`
/// (RFC 3339): `systemUsage` plus the pods' usage is the node's usage.
pub fn node_metric(node: &str, update_time: &str, system: (i64, i64), pods: &[PodUsage]) -> Value {
    let (cpu, mem) = pods
        .iter()
        .fold(system, |(c, m), p| (c + p.cpu_m, m + p.mem_mi));
    json!({
        "apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric",
        "metadata": {"name": node},
        "spec": {"metricCollectPolicy": {
            "aggregateDurationSeconds": AGGREGATE_SECONDS,
            "reportIntervalSeconds": REPORT_INTERVAL_SECONDS,
        }},
        "status": {
            "updateTime": update_time,
            "nodeMetric": {
                "nodeUsage": resources(cpu, mem),
                "systemUsage": resources(system.0, system.1),
            },
            "podsMetric": pods.iter().map(|p| json!({
                "namespace": p.namespace, "name": p.name,
                "podUsage": resources(p.cpu_m, p.mem_mi),
            })).collect::<Vec<_>>(),
        },
    })
}

fn resources(cpu_m: i64, mem_mi: i64) -> Value {
    json!({"resources": {"cpu": format!("{cpu_m}m"), "memory": format!("{mem_mi}Mi")}})
}

/// The NodeResourceTopology of a one-socket machine with `cpus` logical CPUs (SMT 2, one NUMA
/// node, numbered as Linux does on x86: thread t of core c is CPU c + t × cores), with
/// koordlet's annotations. The LS shared pool leaves out the pinned CPUs, as koordlet does.
pub fn topology(node: &str, cpus: u32, pinned: &[u32]) -> Value {
    let cores = (cpus / 2).max(1);
    let detail: Vec<Value> = (0..cpus)
        .map(|id| json!({"id": id, "core": id % cores, "socket": 0, "node": 0}))
        .collect();
    let all: Vec<u32> = (0..cpus).collect();
    let shared: Vec<u32> = all
        .iter()
        .copied()
        .filter(|c| !pinned.contains(c))
        .collect();
    let pool = |cpus: &[u32]| {
        json!([{"socket": 0, "node": 0, "cpuset": rebalancer_policy_sdk::k8s::cpuset::format_cpu_list(cpus)}])
            .to_string()
    };
    json!({
        "apiVersion": "topology.node.k8s.io/v1alpha1", "kind": "NodeResourceTopology",
        "metadata": {
            "name": node,
            "annotations": {
                "node.koordinator.sh/cpu-topology": json!({"detail": detail}).to_string(),
                "kubelet.koordinator.sh/cpu-manager-policy": r#"{"policy":"none"}"#,
                "node.koordinator.sh/pod-cpu-allocs": "null",
                "node.koordinator.sh/cpu-shared-pools": pool(&shared),
                "node.koordinator.sh/be-cpu-shared-pools": pool(&all),
            },
        },
        "topologyPolicies": ["None"],
        "zones": [{
            "name": "node-0", "type": "Node",
            "resources": [{"name": "cpu", "capacity": cpus.to_string(),
                           "allocatable": cpus.to_string(), "available": cpus.to_string()}],
        }],
    })
}

/// Make `pod` (a Pod object) a koord-prod LSR pod pinned to `cpus`.
pub fn pin(pod: &mut Value, cpus: &[u32]) {
    let meta = &mut pod["metadata"];
    meta["labels"][QOS_LABEL] = json!("LSR");
    meta["labels"][PRIORITY_CLASS_LABEL] = json!("koord-prod");
    let cpuset = rebalancer_policy_sdk::k8s::cpuset::format_cpu_list(cpus);
    meta["annotations"][RESOURCE_STATUS] = json!(json!({ "cpuset": cpuset }).to_string());
}

/// A pod that left the cluster (evicted) or joined it.
#[derive(Clone, Copy, Debug)]
pub struct PodRef<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    pub node: &'a str,
}

/// koordlet's report after a change: each `gone` pod's entry leaves its node's NodeMetric, each
/// `(replacement, replaced)` pair puts the replaced pod's measured usage under the replacement's
/// name on the replacement's node (the workload is the same, so is its load), and every
/// NodeMetric in `metrics` is stamped `update_time` (koordlet reports each minute, so a live
/// metric is never older than that). Node usage follows its pods. Returns the metrics that
/// changed, by index. A metric whose JSON is not the shape this module writes is left alone.
pub fn report(
    metrics: &mut [Value],
    gone: &[PodRef<'_>],
    moved: &[(PodRef<'_>, PodRef<'_>)],
    update_time: &str,
) -> Vec<usize> {
    let node_of = |m: &Value| m["metadata"]["name"].as_str().map(str::to_owned);
    let mut taken: Vec<(String, String, Value)> = Vec::new();
    for m in metrics.iter_mut() {
        let Some(node) = node_of(m) else { continue };
        let Some(pods) = m
            .pointer_mut("/status/podsMetric")
            .and_then(Value::as_array_mut)
        else {
            continue;
        };
        pods.retain(|entry| {
            let leaving = gone
                .iter()
                .chain(moved.iter().map(|(_, old)| old))
                .any(|p| {
                    p.node == node && entry["namespace"] == p.namespace && entry["name"] == p.name
                });
            if leaving {
                taken.push((
                    entry["namespace"].as_str().unwrap_or_default().to_owned(),
                    entry["name"].as_str().unwrap_or_default().to_owned(),
                    entry["podUsage"].clone(),
                ));
            }
            !leaving
        });
    }
    for (new, old) in moved {
        let Some(usage) = taken
            .iter()
            .find(|(ns, name, _)| ns == old.namespace && name == old.name)
            .map(|(_, _, u)| u.clone())
        else {
            continue;
        };
        if let Some(m) = metrics
            .iter_mut()
            .find(|m| m["metadata"]["name"] == new.node)
            && let Some(pods) = m
                .pointer_mut("/status/podsMetric")
                .and_then(Value::as_array_mut)
        {
            pods.push(json!({"namespace": new.namespace, "name": new.name, "podUsage": usage}));
        }
    }
    let mut changed = Vec::new();
    for (i, m) in metrics.iter_mut().enumerate() {
        if !m.get("status").is_some_and(Value::is_object) {
            continue;
        }
        m["status"]["updateTime"] = json!(update_time);
        let system = &m["status"]["nodeMetric"]["systemUsage"]["resources"];
        let (Some(mut cpu), Some(mut mem)) = (
            quantity(&system["cpu"], false),
            quantity(&system["memory"], true),
        ) else {
            changed.push(i);
            continue;
        };
        for p in m["status"]["podsMetric"].as_array().into_iter().flatten() {
            let r = &p["podUsage"]["resources"];
            cpu += quantity(&r["cpu"], false).unwrap_or(0);
            mem += quantity(&r["memory"], true).unwrap_or(0);
        }
        m["status"]["nodeMetric"]["nodeUsage"] = resources(cpu, mem);
        changed.push(i);
    }
    changed
}

/// cpu in millicores or memory in MiB of a quantity.
fn quantity(v: &Value, memory: bool) -> Option<i64> {
    let milli = rebalancer_policy_sdk::k8s::quantity::parse_milli(v.as_str()?).ok()?;
    Some(if memory {
        milli / 1000 / (1 << 20)
    } else {
        milli
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(ns: &str, name: &str, cpu_m: i64) -> PodUsage {
        PodUsage {
            namespace: ns.into(),
            name: name.into(),
            cpu_m,
            mem_mi: 256,
        }
    }

    #[test]
    fn node_usage_is_system_plus_pods() {
        let m = node_metric(
            "n1",
            "2026-11-25T12:00:00Z",
            (300, 1024),
            &[usage("a", "p", 700), usage("a", "q", 1000)],
        );
        assert_eq!(
            m["status"]["nodeMetric"]["nodeUsage"]["resources"],
            json!({"cpu": "2000m", "memory": "1536Mi"})
        );
        assert_eq!(m["status"]["podsMetric"][1]["name"], "q");
    }

    #[test]
    fn a_report_moves_the_replaced_pods_usage_and_stamps_every_metric() {
        let mut metrics = vec![
            node_metric(
                "hot",
                "2026-11-25T12:00:00Z",
                (300, 1024),
                &[
                    usage("a", "p", 700),
                    usage("a", "gone", 50),
                    usage("a", "q", 900),
                ],
            ),
            node_metric("cold", "2026-11-25T12:00:00Z", (100, 512), &[]),
            json!({"kind": "NodeMetric", "metadata": {"name": "odd"}}),
        ];
        let changed = report(
            &mut metrics,
            &[PodRef {
                namespace: "a",
                name: "gone",
                node: "hot",
            }],
            &[(
                PodRef {
                    namespace: "a",
                    name: "p-2",
                    node: "cold",
                },
                PodRef {
                    namespace: "a",
                    name: "p",
                    node: "hot",
                },
            )],
            "2026-11-25T12:05:00Z",
        );
        assert_eq!(changed, [0, 1]);
        let names = |m: &Value| -> Vec<String> {
            m["status"]["podsMetric"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p["name"].as_str().unwrap().to_owned())
                .collect()
        };
        assert_eq!(names(&metrics[0]), ["q"]);
        assert_eq!(names(&metrics[1]), ["p-2"]);
        assert_eq!(
            metrics[0]["status"]["nodeMetric"]["nodeUsage"]["resources"]["cpu"],
            "1200m"
        );
        assert_eq!(
            metrics[1]["status"]["nodeMetric"]["nodeUsage"]["resources"]["cpu"],
            "800m"
        );
        assert_eq!(metrics[1]["status"]["updateTime"], "2026-11-25T12:05:00Z");
        assert!(
            metrics[2].get("status").is_none(),
            "a foreign shape is left alone"
        );
    }

    #[test]
    fn topologies_number_threads_like_linux_and_leave_pinned_cpus_out_of_the_ls_pool() {
        let t = topology("n1", 8, &[2, 3]);
        let ann = &t["metadata"]["annotations"];
        let detail: Value =
            serde_json::from_str(ann["node.koordinator.sh/cpu-topology"].as_str().unwrap())
                .unwrap();
        assert_eq!(
            detail["detail"][5],
            json!({"id": 5, "core": 1, "socket": 0, "node": 0})
        );
        assert_eq!(
            ann["node.koordinator.sh/cpu-shared-pools"],
            r#"[{"cpuset":"0-1,4-7","node":0,"socket":0}]"#
        );
    }
}
