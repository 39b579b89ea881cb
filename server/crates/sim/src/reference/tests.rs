//! Tests of the reference generator as a whole: the `small` cluster against the recorded hash of
//! gen_large.py's output, and its structure. The generator's parts (MT19937, JSON formatting,
//! timestamps, uids) are tested next to their code. Must stay fast: `small` only, generated once.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::OnceLock;

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::{Size, write_koordinator_scenario, write_scenario};

/// SHA-256 of gen_large.py's `small.json`, recorded once with CPython 3.11.7:
///
/// ```text
/// python3 gen_large.py OUT small && sha256sum OUT/small.json   (gen_large.py: the descheduler benchmark's generator)
/// ```
///
/// `medium` and `large` are too big for a unit test; they were compared by hand (the Rust output
/// streamed to a file, then `sha256sum` of both), and matched:
/// medium `193999009cb9915b94ad0ab1db97c63fe6ef289190f662607dc8015bed0a6cc0` (166,523,246 bytes),
/// large `89690d4c70f0190df9b2c0c50f23fd8fd9e8abd33bd1e5827892c159b7a3217c` (416,652,521 bytes).
const SMALL_SHA256: &str = "a68038e66cc0d96257c527177bd2e6624ea84c66f6aff6475142414f119b46c0";

fn small() -> &'static [u8] {
    static SMALL: OnceLock<Vec<u8>> = OnceLock::new();
    SMALL.get_or_init(|| {
        let mut out = Vec::with_capacity(48 << 20);
        write_scenario(Size::Small, &mut out).expect("writing to a Vec cannot fail");
        out
    })
}

#[test]
fn small_is_byte_identical_to_gen_large_py() {
    let bytes = small();
    let digest: String = Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(
        digest,
        SMALL_SHA256,
        "small.json differs from gen_large.py's ({} bytes)",
        bytes.len()
    );
}

#[test]
fn small_has_the_sizes_nodes_and_pods() {
    let doc: Value = serde_json::from_slice(small()).expect("the scenario is JSON");
    assert_eq!(doc["name"], "perf-small");
    let profile = &doc["policy"]["profiles"][0];
    assert_eq!(
        profile["pluginConfig"].as_array().map(Vec::len),
        Some(10),
        "DefaultEvictor + 9 plugins"
    );

    let items = doc["objects"]["items"].as_array().expect("a v1 List");
    let of_kind = |kind: &'static str| items.iter().filter(move |o| o["kind"] == kind);
    let nodes: HashSet<&str> = of_kind("Node")
        .filter_map(|n| n["metadata"]["name"].as_str())
        .collect();
    assert_eq!(nodes.len(), Size::Small.nodes());
    assert_eq!(
        of_kind("Node").count(),
        Size::Small.nodes(),
        "node names are unique"
    );
    assert_eq!(of_kind("PriorityClass").count(), 3);

    let pods: Vec<&Value> = of_kind("Pod").collect();
    assert_eq!(pods.len(), Size::Small.pods());
    let mut names = HashSet::new();
    let mut owners: HashMap<&str, usize> = HashMap::new();
    let mut pod_namespaces = BTreeSet::new();
    let mut apps = HashSet::new();
    for p in &pods {
        let (ns, name) = (
            p["metadata"]["namespace"].as_str().unwrap(),
            p["metadata"]["name"].as_str().unwrap(),
        );
        assert!(names.insert((ns, name)), "pod {ns}/{name} is unique");
        assert!(
            nodes.contains(p["spec"]["nodeName"].as_str().unwrap()),
            "{name} sits on a node"
        );
        *owners
            .entry(
                p["metadata"]["ownerReferences"][0]["kind"]
                    .as_str()
                    .unwrap(),
            )
            .or_default() += 1;
        pod_namespaces.insert(ns);
        if let Some(app) = p["metadata"]["labels"]["app"].as_str() {
            apps.insert((ns, app));
        }
    }
    assert_eq!(
        owners["DaemonSet"],
        2 * Size::Small.nodes(),
        "kube-proxy and node-exporter on every node"
    );
    assert_eq!(
        owners["Job"],
        Size::Small.pods() / 100,
        "1 % failed job pods"
    );
    assert_eq!(
        owners["ReplicaSet"],
        Size::Small.pods() - 2 * Size::Small.nodes() - Size::Small.pods() / 100
    );
    assert!(
        pods.iter()
            .filter(|p| p["status"]["phase"] == "Failed")
            .count()
            == owners["Job"]
    );

    // The namespaces come last, sorted, exactly those the pods use.
    let namespaces: Vec<&str> = items
        .iter()
        .rev()
        .take_while(|o| o["kind"] == "Namespace")
        .filter_map(|o| o["metadata"]["name"].as_str())
        .collect();
    assert_eq!(namespaces.len(), of_kind("Namespace").count());
    assert!(namespaces.windows(2).all(|w| w[0] > w[1]), "sorted");
    assert_eq!(
        namespaces.into_iter().collect::<BTreeSet<_>>(),
        pod_namespaces
    );

    // Every PDB selects an existing deployment of its namespace.
    for pdb in of_kind("PodDisruptionBudget") {
        let ns = pdb["metadata"]["namespace"].as_str().unwrap();
        let app = pdb["spec"]["selector"]["matchLabels"]["app"]
            .as_str()
            .unwrap();
        assert!(apps.contains(&(ns, app)), "PDB {ns}/{app} selects pods");
    }
}

#[test]
fn sizes_parse_and_print_their_names() {
    for size in Size::ALL {
        assert_eq!(size.name().parse::<Size>(), Ok(size));
        assert_eq!(size.to_string(), size.name());
    }
    assert!("huge".parse::<Size>().is_err());
    assert!(
        Size::ALL
            .windows(2)
            .all(|w| w[0].nodes() < w[1].nodes() && w[0].pods() < w[1].pods())
    );
}

/// The Koordinator layer adds its objects and labels without touching what gen_large.py draws:
/// with the layer's additions taken out again, the document is the base one.
#[test]
fn the_koordinator_layer_adds_metrics_topologies_and_cpusets_and_changes_nothing_else() {
    let mut out = Vec::with_capacity(64 << 20);
    write_koordinator_scenario(Size::Small, &mut out).expect("writing to a Vec cannot fail");
    let mut layered: Value = serde_json::from_slice(&out).expect("the scenario is JSON");
    let base: Value = serde_json::from_slice(small()).expect("the scenario is JSON");
    assert_eq!(layered["name"], "perf-small-koordinator");
    assert_eq!(layered["observedAt"], super::koordinator::OBSERVED_AT);
    let profiles = layered["policy"]["profiles"].as_array().unwrap();
    assert_eq!(profiles[0], base["policy"]["profiles"][0]);
    let plugins: Vec<&str> = profiles[1]["pluginConfig"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert!(
        plugins.contains(&"LowNodeLoad") && plugins.contains(&"CpuOrchestration"),
        "{plugins:?}"
    );
    assert_eq!(
        profiles[1]["plugins"]["deschedule"]["enabled"],
        serde_json::json!(["CpuOrchestration"])
    );
    assert_eq!(
        profiles[1]["plugins"]["balance"]["enabled"],
        serde_json::json!(["LowNodeLoad"])
    );

    let items = layered["objects"]["items"].as_array_mut().unwrap();
    let metrics: Vec<Value> = items
        .iter()
        .filter(|o| o["kind"] == "NodeMetric")
        .cloned()
        .collect();
    let topologies = items
        .iter()
        .filter(|o| o["kind"] == "NodeResourceTopology")
        .count();
    assert_eq!(
        (metrics.len(), topologies),
        (Size::Small.nodes(), Size::Small.nodes())
    );

    // Every running non-DaemonSet pod is measured once, on its own node.
    let mut measured = HashMap::new();
    for m in &metrics {
        for p in m["status"]["podsMetric"].as_array().unwrap() {
            let key = format!(
                "{}/{}",
                p["namespace"].as_str().unwrap(),
                p["name"].as_str().unwrap()
            );
            assert!(
                measured
                    .insert(key.clone(), m["metadata"]["name"].clone())
                    .is_none(),
                "{key} measured twice"
            );
        }
    }
    let mut cpusets: HashMap<String, Vec<String>> = HashMap::new();
    for p in items.iter().filter(|o| o["kind"] == "Pod") {
        let key = format!(
            "{}/{}",
            p["metadata"]["namespace"].as_str().unwrap(),
            p["metadata"]["name"].as_str().unwrap()
        );
        let daemon = p["metadata"]["ownerReferences"][0]["kind"] == "DaemonSet";
        let running = p["status"]["phase"] == "Running";
        assert_eq!(
            measured.get(&key),
            (running && !daemon).then_some(&p["spec"]["nodeName"]),
            "{key}"
        );
        if let Some(status) =
            p["metadata"]["annotations"]["scheduling.koordinator.sh/resource-status"].as_str()
        {
            assert_eq!(p["metadata"]["labels"]["koordinator.sh/qosClass"], "LSR");
            assert_eq!(
                p["spec"]["containers"][0]["resources"]["requests"]["cpu"],
                "1000m"
            );
            let cpuset: Value = serde_json::from_str(status).unwrap();
            cpusets
                .entry(format!(
                    "{}@{}",
                    p["spec"]["nodeName"].as_str().unwrap(),
                    cpuset["cpuset"].as_str().unwrap()
                ))
                .or_default()
                .push(key);
        }
    }
    let pinned: usize = cpusets.values().map(Vec::len).sum();
    let shared = cpusets.values().filter(|pods| pods.len() > 1).count();
    assert!(pinned > 200, "{pinned} cpuset pods");
    assert!(
        (1..pinned / 20).contains(&shared),
        "a few deliberate double pinnings, not many: {shared} of {pinned}"
    );

    // Take the layer out again: the base document.
    items.retain(|o| o["kind"] != "NodeMetric" && o["kind"] != "NodeResourceTopology");
    for p in items.iter_mut().filter(|o| o["kind"] == "Pod") {
        let meta = p["metadata"].as_object_mut().unwrap();
        meta.remove("annotations");
        let labels = meta["labels"].as_object_mut().unwrap();
        labels.remove("koordinator.sh/qosClass");
        labels.remove("koordinator.sh/priority-class");
    }
    assert_eq!(layered["objects"], base["objects"]);
}
