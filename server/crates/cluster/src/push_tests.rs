//! Pushed documents against Kubernetes' rules: values nested too deep in every position that
//! once overflowed the stack, repeated keys, names, namespaces, labels, annotations, negative
//! quantities, PDB budgets, shared uids; and what is not validated again (stored and live
//! objects).

use serde_json::{Value, json};

use super::document::{MAX_DEPTH, Problem, StructureError};
use super::*;

fn deep(n: usize) -> String {
    format!("{}{}", "[".repeat(n), "]".repeat(n))
}

fn push(doc: &str, format: Format) -> Result<ClusterSnapshot, IngestError> {
    let set = parse_list(doc, format)?;
    build_snapshot(&set, 1, 1_700_000_000_000)
}

fn push_items(items: Vec<Value>) -> Result<ClusterSnapshot, IngestError> {
    let doc = json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string();
    push(&doc, Format::Json)
}

fn structure(err: IngestError) -> StructureError {
    match err {
        IngestError::Structure(e) => e,
        other => panic!("expected a structure error, got {other}"),
    }
}

/// `(kind, namespace, name, field, message)` of an invalid object.
fn invalid(err: IngestError) -> (String, String, String, String, String) {
    assert_eq!(err.code(), "invalid_object", "{err}");
    match err {
        IngestError::InvalidObject {
            kind,
            namespace,
            name,
            field,
            message,
            ..
        } => (
            kind.into(),
            namespace.into(),
            name.into(),
            field.into(),
            message.into(),
        ),
        other => panic!("expected InvalidObject, got {other:?}"),
    }
}

fn node(name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "uid": format!("uid-{name}"), "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                   "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"}}
    })
}

fn pod(name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "shop", "uid": format!("uid-{name}"),
                     "creationTimestamp": "2020-01-01T00:00:00Z", "labels": {"app": "web"}},
        "spec": {"nodeName": "n1", "nodeSelector": {"disk": "ssd"},
                 "containers": [{"name": "c", "resources": {
                     "requests": {"cpu": "100m", "memory": "128Mi"},
                     "limits": {"cpu": "200m", "memory": "256Mi"}}}]},
        "status": {"phase": "Running"}
    })
}

fn pdb(spec: Value) -> Value {
    json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": spec,
        "status": {"disruptionsAllowed": 1}
    })
}

// ---------------------------------------------------------------------------------- nesting

/// The positions where a deep value once met the recursive field-path scan (a scalar or a
/// string map expected), as `(document with DEEP where the value goes, path it is reported at)`.
const DEEP_POSITIONS: [(&str, &str); 6] = [
    (
        r#"{"kind":"List","items":[{"apiVersion":"v1","kind":"Node","metadata":{"name":DEEP}}]}"#,
        "items[0].metadata.name[0]",
    ),
    (
        r#"{"kind":"List","items":[{"apiVersion":"v1","kind":"Node","metadata":{"name":"n","labels":DEEP}}]}"#,
        "items[0].metadata.labels[0]",
    ),
    (
        r#"{"kind":"List","items":[{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","annotations":{"a":DEEP}}}]}"#,
        "items[0].metadata.annotations.a[0]",
    ),
    (
        r#"{"kind":"List","items":[{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"nodeSelector":DEEP}}]}"#,
        "items[0].spec.nodeSelector[0]",
    ),
    (
        r#"{"kind":"List","items":[{"apiVersion":"v1","kind":"Node","metadata":{"name":"n"},"status":{"allocatable":{"cpu":DEEP}}}]}"#,
        "items[0].status.allocatable.cpu[0]",
    ),
    // Where nothing decodes it: bounded all the same.
    (
        r#"{"kind":"List","items":[{"apiVersion":"x/v1","kind":"Widget","metadata":{"name":"w"},"spec":DEEP}]}"#,
        "items[0].spec[0]",
    ),
];

#[test]
fn deep_values_in_every_position_are_refused_with_their_path_json_and_yaml() {
    for n in [MAX_DEPTH + 1, 10_000, 100_000] {
        for (template, path) in DEEP_POSITIONS {
            let doc = template.replace("DEEP", &deep(n));
            // YAML's flow style is JSON: the same text, read by libyaml.
            for format in [Format::Json, Format::Yaml] {
                let err = push(&doc, format).unwrap_err();
                assert_eq!(err.code(), "document_too_deep", "{format} {path}: {err}");
                let e = structure(err);
                assert_eq!(e.problem, Problem::TooDeep { limit: MAX_DEPTH });
                assert!(e.path.starts_with(path), "{format}: {} vs {path}", e.path);
                assert_eq!(e.line, 1);
            }
        }
    }
}

#[test]
fn values_as_deep_as_the_limit_still_get_their_own_errors() {
    // 96 levels inside the item (List, items and the object make 3, the name's own array 1).
    let doc = DEEP_POSITIONS[0].0.replace("DEEP", &deep(MAX_DEPTH - 4));
    for format in [Format::Json, Format::Yaml] {
        let err = push(&doc, format).unwrap_err();
        let (kind, _, _, field, message) = invalid(err);
        assert_eq!(kind, "", "{format}");
        assert_eq!(field, "metadata.name", "{format}");
        assert!(message.contains("expected a string"), "{format}: {message}");
    }
    let doc = DEEP_POSITIONS[4].0.replace("DEEP", &deep(MAX_DEPTH - 6));
    let (kind, _, name, field, _) = invalid(push(&doc, Format::Json).unwrap_err());
    assert_eq!((kind.as_str(), name.as_str()), ("Node", "n"));
    // serde_json reports a list where a quantity goes past its opening bracket.
    assert!(field.starts_with("status.allocatable.cpu"), "{field}");
}

// ------------------------------------------------------------------------------ repeated keys

#[test]
fn repeated_keys_are_refused_in_json_and_yaml() {
    let json = r#"{"kind":"List","items":[
        {"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"},
         "status":{"allocatable":{"cpu":"4","cpu":"64"}}}]}"#;
    let e = structure(push(json, Format::Json).unwrap_err());
    assert_eq!(e.problem, Problem::DuplicateKey { key: "cpu".into() });
    assert_eq!(e.path, "items[0].status.allocatable");
    assert_eq!(e.line, 3);
    assert_eq!(
        push(json, Format::Json).unwrap_err().code(),
        "duplicate_key"
    );

    let yaml = "kind: List\nitems:\n- kind: Node\n  apiVersion: v1\n  metadata:\n    name: n1\n    name: n2\n";
    let e = structure(push(yaml, Format::Yaml).unwrap_err());
    assert_eq!(e.problem, Problem::DuplicateKey { key: "name".into() });
    assert_eq!((e.line, e.path.as_str()), (7, "items[0].metadata"));
    // A repeated key anywhere, a top-level one included.
    let e = structure(push(r#"{"kind":"List","items":[],"items":[]}"#, Format::Json).unwrap_err());
    assert_eq!(e.path, "");
}

// -------------------------------------------------------------------------- names and uids

#[test]
fn names_and_namespaces_follow_kubernetes() {
    for (item, field, says) in [
        (node("../../x"), "metadata.name", "RFC 1123 subdomain"),
        (node("Node-1"), "metadata.name", "RFC 1123 subdomain"),
        (
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a.b"}}),
            "metadata.name",
            "RFC 1123 label",
        ),
        (
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "Shop"}}),
            "metadata.namespace",
            "RFC 1123 label",
        ),
        (
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a/b", "namespace": "shop"}}),
            "metadata.name",
            "may not contain '/'",
        ),
        (
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "a_b"}}),
            "metadata.namespace",
            "RFC 1123 label",
        ),
        (
            json!({"apiVersion": "v1", "kind": "Pod-Thing", "metadata": {"name": "p"}}),
            "kind",
            "invalid kind",
        ),
        (
            json!({"apiVersion": "policy/v1/x", "kind": "Thing", "metadata": {"name": "p"}}),
            "apiVersion",
            "invalid apiVersion",
        ),
    ] {
        let (_, _, _, at, message) = invalid(push_items(vec![item.clone()]).unwrap_err());
        assert_eq!(at, field, "{item}");
        assert!(message.contains(says), "{item}: {message}");
    }
    // RBAC-style names of kinds this server does not model are fine.
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                      "metadata": {"name": "system:controller:job-controller"}});
    assert_eq!(
        push_items(vec![node("n1"), role]).unwrap().counts["ClusterRole"],
        1
    );
}

#[test]
fn megabyte_names_keys_and_values_are_refused_in_short_messages() {
    let huge = "a".repeat(1 << 20);
    let mut big_key = node("n1");
    big_key["metadata"]["labels"][&huge] = json!("v");
    let mut big_value = node("n1");
    big_value["metadata"]["labels"]["k"] = json!(huge);
    for (item, field) in [
        (node(&huge), "metadata.name".to_owned()),
        (big_key, format!("metadata.labels[\"{}", &huge[..64])),
        (big_value, "metadata.labels.k".to_owned()),
    ] {
        let err = push_items(vec![item]).unwrap_err();
        let message = err.to_string();
        assert!(
            message.len() < 600,
            "{} bytes: {}",
            message.len(),
            &message[..200]
        );
        assert!(message.contains("(is 1048576)"), "{message}");
        let (_, _, name, at, _) = invalid(err);
        assert!(name.len() < 100, "{}", name.len());
        assert!(at.starts_with(&field), "{at}");
    }
}

#[test]
fn pods_may_not_share_a_uid_but_a_repeated_pod_keeps_its_own() {
    let mut twin = pod("web-2");
    twin["metadata"]["uid"] = json!("uid-web-1");
    let err = push_items(vec![node("n1"), pod("web-1"), twin]).unwrap_err();
    let (kind, namespace, name, field, message) = invalid(err);
    assert_eq!(
        (
            kind.as_str(),
            namespace.as_str(),
            name.as_str(),
            field.as_str()
        ),
        ("Pod", "shop", "web-2", "metadata.uid")
    );
    assert!(
        message.contains("already the uid of Pod shop/web-1 (item 1)"),
        "{message}"
    );
    // The same pod twice is a duplicate (the last one kept, with a warning), not a clash.
    let snap = push_items(vec![node("n1"), pod("web-1"), pod("web-1")]).unwrap();
    assert_eq!(snap.cluster().pod_count(), 1);
    assert!(
        snap.warnings
            .iter()
            .any(|w| w.code == WarningCode::DuplicateObject)
    );
    // Objects of different kinds are counted apart; pods without a uid are fine.
    let mut ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop", "uid": "uid-web-1"}});
    let mut bare = pod("bare");
    bare["metadata"].as_object_mut().unwrap().remove("uid");
    let mut bare2 = pod("bare-2");
    bare2["metadata"].as_object_mut().unwrap().remove("uid");
    ns["metadata"]["labels"] = json!({});
    assert!(push_items(vec![node("n1"), pod("web-1"), ns, bare, bare2]).is_ok());
}

// ------------------------------------------------------------------- labels and annotations

#[test]
fn labels_selectors_and_annotations_follow_kubernetes() {
    let with = |f: &dyn Fn(&mut Value)| {
        let mut item = pod("web-1");
        f(&mut item);
        invalid(push_items(vec![node("n1"), item]).unwrap_err())
    };
    let (_, _, _, field, message) = with(&|p| p["metadata"]["labels"]["bad key"] = json!("v"));
    assert_eq!(field, "metadata.labels[\"bad key\"]");
    assert!(
        message.starts_with("invalid label key: name part"),
        "{message}"
    );
    let (_, _, _, field, message) = with(&|p| p["metadata"]["labels"]["app"] = json!("-web"));
    assert_eq!(field, "metadata.labels.app");
    assert!(
        message.starts_with("invalid label value \"-web\""),
        "{message}"
    );
    let (_, _, _, field, _) = with(&|p| p["spec"]["nodeSelector"]["Disk.io/x"] = json!("y"));
    assert_eq!(field, "spec.nodeSelector[\"Disk.io/x\"]");
    let (_, _, _, field, _) = with(&|p| {
        p["spec"]["affinity"] = json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "a b"}}, "topologyKey": "zone"}]}})
    });
    assert_eq!(
        field,
        "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchLabels.app"
    );
    let (_, _, _, field, message) =
        with(&|p| p["metadata"]["annotations"] = json!({"big": "x".repeat(256 * 1024)}));
    assert_eq!(field, "metadata.annotations");
    assert!(message.contains("262144 bytes"), "{message}");
    let (_, _, _, field, _) = with(&|p| p["metadata"]["annotations"] = json!({"a/b/c": "x"}));
    assert_eq!(field, "metadata.annotations[\"a/b/c\"]");

    // Empty label values, upper-case annotation prefixes and annotations up to the limit are
    // Kubernetes-valid.
    let mut fine = pod("web-1");
    fine["metadata"]["labels"]["empty"] = json!("");
    fine["metadata"]["annotations"] =
        json!({"Example.com/Note": "x".repeat(256 * 1024 - "Example.com/Note".len())});
    push_items(vec![node("n1"), fine]).unwrap();
    // The kubectl last-applied annotation is dropped before it is counted.
    let mut applied = node("n1");
    applied["metadata"]["annotations"] = json!({LAST_APPLIED: "x".repeat(300 * 1024)});
    push_items(vec![applied]).unwrap();
}

// ------------------------------------------------------------------------------- quantities

#[test]
fn negative_quantities_are_refused_where_kubernetes_refuses_them() {
    for (path, field) in [
        ("/status/allocatable/cpu", "status.allocatable.cpu"),
        ("/status/capacity/memory", "status.capacity.memory"),
    ] {
        let mut n = node("n1");
        *n.pointer_mut(path).unwrap() = json!("-4");
        let (kind, _, _, at, message) = invalid(push_items(vec![n]).unwrap_err());
        assert_eq!((kind.as_str(), at.as_str()), ("Node", field));
        assert_eq!(
            message,
            "invalid quantity \"-4\": must be greater than or equal to 0"
        );
    }
    // Capacity alone (no allocatable) is what the node offers: checked the same.
    let mut n = node("n1");
    n["status"].as_object_mut().unwrap().remove("allocatable");
    n["status"]["capacity"]["cpu"] = json!(-1);
    assert_eq!(
        invalid(push_items(vec![n]).unwrap_err()).3,
        "status.capacity.cpu"
    );

    for (path, field) in [
        (
            "/spec/containers/0/resources/requests/cpu",
            "spec.containers[0].resources.requests.cpu",
        ),
        (
            "/spec/containers/0/resources/limits/memory",
            "spec.containers[0].resources.limits.memory",
        ),
    ] {
        let mut p = pod("web-1");
        *p.pointer_mut(path).unwrap() = json!("-100m");
        let (_, _, _, at, _) = invalid(push_items(vec![node("n1"), p]).unwrap_err());
        assert_eq!(at, field);
    }
    let mut p = pod("web-1");
    p["spec"]["overhead"] = json!({"cpu": "-1m"});
    assert_eq!(
        invalid(push_items(vec![node("n1"), p]).unwrap_err()).3,
        "spec.overhead.cpu"
    );
    let mut p = pod("web-1");
    p["spec"]["initContainers"] =
        json!([{"name": "init", "resources": {"requests": {"memory": "-1Gi"}}}]);
    assert_eq!(
        invalid(push_items(vec![node("n1"), p]).unwrap_err()).3,
        "spec.initContainers[0].resources.requests.memory"
    );
    // Zero is a quantity like any other.
    let mut n = node("n1");
    n["status"]["allocatable"]["cpu"] = json!("0");
    push_items(vec![n]).unwrap();
}

// ---------------------------------------------------------------------------- PDB budgets

#[test]
fn pdb_budgets_are_integers_or_percentages() {
    for (spec, field, says) in [
        (
            json!({"minAvailable": "abc%"}),
            "spec.minAvailable",
            "integer or percentage",
        ),
        (
            json!({"maxUnavailable": "5"}),
            "spec.maxUnavailable",
            "integer or percentage",
        ),
        (
            json!({"minAvailable": -1}),
            "spec.minAvailable",
            "greater than or equal to 0",
        ),
        (
            json!({"maxUnavailable": "150%"}),
            "spec.maxUnavailable",
            "greater than 100%",
        ),
        (
            json!({"minAvailable": 1.5}),
            "spec.minAvailable",
            "integer or percentage",
        ),
        (
            json!({"minAvailable": 1, "maxUnavailable": 1}),
            "spec",
            "cannot be both set",
        ),
    ] {
        let (kind, namespace, name, at, message) =
            invalid(push_items(vec![pdb(spec.clone())]).unwrap_err());
        assert_eq!(
            (
                kind.as_str(),
                namespace.as_str(),
                name.as_str(),
                at.as_str()
            ),
            ("PodDisruptionBudget", "shop", "web", field),
            "{spec}"
        );
        assert!(message.contains(says), "{spec}: {message}");
    }
    for spec in [
        json!({"minAvailable": 2}),
        json!({"minAvailable": "50%"}),
        json!({"maxUnavailable": "0%"}),
        json!({"maxUnavailable": 0}),
        json!({}),
    ] {
        assert!(push_items(vec![pdb(spec.clone())]).is_ok(), "{spec}");
    }
}

// ------------------------------------------------------------ what is not validated again

#[test]
fn stored_and_live_objects_are_not_validated_again() {
    // What an older server accepted loads as it did: a negative quantity, an odd label.
    let mut n = node("n1");
    n["status"]["allocatable"]["cpu"] = json!("-4");
    n["metadata"]["labels"]["bad key"] = json!("-v");
    let stored = StoredObjectBuf {
        kind: "Node".into(),
        api_version: "v1".into(),
        namespace: None,
        name: "n1".into(),
        uid: None,
        json: n.to_string(),
    };
    let set = ObjectSet::from_stored([stored.clone(), {
        let mut b = pdb(json!({"minAvailable": "abc%"}));
        b["metadata"]["name"] = json!("Web_PDB");
        StoredObjectBuf {
            kind: "PodDisruptionBudget".into(),
            api_version: "policy/v1".into(),
            namespace: Some("shop".into()),
            name: "Web_PDB".into(),
            uid: None,
            json: b.to_string(),
        }
    }])
    .unwrap();
    let snap = build_snapshot(&set, 1, 0).unwrap();
    assert_eq!(
        snap.cluster()
            .node(0)
            .allocatable(snap.cluster().lookup("cpu").unwrap()),
        -4000
    );
    // Pushed, the same node is refused.
    assert!(push_items(vec![n]).is_err());
}
