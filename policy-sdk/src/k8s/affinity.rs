//! Node selectors, node affinity and the inter-pod anti-affinity checks descheduler uses.
//!
//! Owns:
//! - `spec.nodeSelector` plus required node affinity, as `GetRequiredNodeAffinity(pod).Match(node)`
//!   (component-helpers): terms are ORed, the expressions and fields of a term ANDed; a term with
//!   neither matches nothing; a term with an invalid requirement matches nothing; operators
//!   `In`, `NotIn`, `Exists`, `DoesNotExist`, `Gt`, `Lt` on labels and `In`/`NotIn` with exactly
//!   one value on the field `metadata.name`;
//! - the preferred node-affinity weight of a node (descheduler's
//!   `GetNodeWeightGivenPodPreferredAffinity`);
//! - the pod-affinity-term helpers (term namespaces, selector, topology domains) and the one-way
//!   required anti-affinity check of descheduler's nodeFit.
//!
//! Plain functions over snapshot views; no I/O. Invalid requirements cannot be reported from
//! here, they only fail to match (the API server's validation makes them rare in practice).

use crate::k8s::selector::{
    label_requirement_matches, label_selector_is_valid, label_selector_matches,
};
use crate::model::{
    ArchivedNodeSelectorTerm, ArchivedPodAffinityTerm, ArchivedRequirement,
    ArchivedSelectorOperator, PodPhase, StrId,
};
use crate::view::{Cluster, NodeRef, PodRef, kv_get};

/// One `matchExpressions` requirement of a node selector term against the node's labels.
pub fn node_label_requirement_matches(
    cluster: Cluster<'_>,
    req: &ArchivedRequirement,
    node: NodeRef<'_>,
) -> bool {
    match req.operator {
        ArchivedSelectorOperator::Gt | ArchivedSelectorOperator::Lt => {
            let value = node.label_id(req.key.to_native());
            let [bound] = &req.values[..] else {
                return false;
            };
            let Ok(bound) = cluster.str(bound.to_native()).parse::<i64>() else {
                return false;
            };
            let Some(Ok(v)) = value.map(|v| cluster.str(v).parse::<i64>()) else {
                return false;
            };
            if matches!(req.operator, ArchivedSelectorOperator::Gt) {
                v > bound
            } else {
                v < bound
            }
        }
        // In, NotIn, Exists, DoesNotExist: as in a label selector.
        _ => label_requirement_matches(req, &node.raw.labels),
    }
}

/// One `matchFields` requirement. Nodes have a single field, `metadata.name`; any other field
/// reads as `""`. Only `In`/`NotIn` with exactly one value are valid.
pub fn node_field_requirement_matches(
    cluster: Cluster<'_>,
    req: &ArchivedRequirement,
    node: NodeRef<'_>,
) -> bool {
    let [wanted] = &req.values[..] else {
        return false;
    };
    let wanted = wanted.to_native();
    let field = if cluster.str(req.key.to_native()) == "metadata.name" {
        node.name_id()
    } else {
        0
    };
    match req.operator {
        ArchivedSelectorOperator::In => field == wanted,
        ArchivedSelectorOperator::NotIn => field != wanted,
        _ => false,
    }
}

/// A node selector term: all its expressions and all its fields match. An empty term matches
/// nothing.
pub fn node_selector_term_matches(
    cluster: Cluster<'_>,
    term: &ArchivedNodeSelectorTerm,
    node: NodeRef<'_>,
) -> bool {
    if term.match_expressions.is_empty() && term.match_fields.is_empty() {
        return false;
    }
    term.match_expressions
        .iter()
        .all(|r| node_label_requirement_matches(cluster, r, node))
        && term
            .match_fields
            .iter()
            .all(|r| node_field_requirement_matches(cluster, r, node))
}

/// Some term matches (terms are ORed). No terms: nothing matches.
pub fn node_selector_terms_match(
    cluster: Cluster<'_>,
    terms: &[ArchivedNodeSelectorTerm],
    node: NodeRef<'_>,
) -> bool {
    terms
        .iter()
        .any(|t| node_selector_term_matches(cluster, t, node))
}

/// Every `spec.nodeSelector` pair is a label of the node.
pub fn pod_matches_node_selector(pod: PodRef<'_>, node: NodeRef<'_>) -> bool {
    pod.node_selector()
        .iter()
        .all(|kv| node.label_id(kv.key.to_native()) == Some(kv.value.to_native()))
}

/// The pod has `requiredDuringSchedulingIgnoredDuringExecution` node affinity.
pub fn pod_has_required_node_affinity(pod: PodRef<'_>) -> bool {
    pod.affinity().node_required.is_some()
}

/// The pod has `preferredDuringSchedulingIgnoredDuringExecution` node affinity terms.
pub fn pod_has_preferred_node_affinity(pod: PodRef<'_>) -> bool {
    !pod.affinity().node_preferred.is_empty()
}

/// The required node affinity admits the node (no required affinity admits every node; a
/// required affinity with no terms admits none).
pub fn pod_matches_required_node_affinity(pod: PodRef<'_>, node: NodeRef<'_>) -> bool {
    match pod.affinity().node_required.as_ref() {
        None => true,
        Some(terms) => node_selector_terms_match(pod.cluster(), terms, node),
    }
}

/// `spec.nodeSelector` and required node affinity both admit the node: the scheduler's
/// NodeAffinity filter and descheduler's `PodMatchNodeSelector`.
pub fn pod_matches_node_selector_and_required_affinity(pod: PodRef<'_>, node: NodeRef<'_>) -> bool {
    pod_matches_node_selector(pod, node) && pod_matches_required_node_affinity(pod, node)
}

/// Sum of the weights of the pod's preferred node-affinity terms that the node matches (0 when
/// the pod has none). A term with an invalid requirement does not match.
pub fn preferred_node_affinity_score(pod: PodRef<'_>, node: NodeRef<'_>) -> i64 {
    let cluster = pod.cluster();
    pod.affinity()
        .node_preferred
        .iter()
        .filter(|p| node_selector_term_matches(cluster, &p.term, node))
        .map(|p| i64::from(p.weight.to_native()))
        .sum()
}

/// The namespaces a pod-affinity term of `owner` applies to: `term.namespaces`, or the owner's own
/// namespace when the list is empty (`namespaceSelector` is not supported, as in descheduler).
pub fn term_applies_to_namespace(
    owner: PodRef<'_>,
    term: &ArchivedPodAffinityTerm,
    ns: StrId,
) -> bool {
    if term.namespaces.is_empty() {
        owner.namespace_id() == ns
    } else {
        term.namespaces.iter().any(|n| n.to_native() == ns)
    }
}

/// `PodMatchesTermsNamespaceAndSelector`: `other` is in one of the term's namespaces and its
/// labels match the term's selector (a nil or invalid selector matches nothing).
pub fn pod_affinity_term_selects(
    owner: PodRef<'_>,
    term: &ArchivedPodAffinityTerm,
    other: PodRef<'_>,
) -> bool {
    term_applies_to_namespace(owner, term, other.namespace_id())
        && term
            .label_selector
            .as_ref()
            .is_some_and(|s| label_selector_matches(s, &other.raw.labels))
}

/// `hasSameLabelValue`: the two nodes are in the same topology domain for `key` (the same node,
/// or both carry the label `key` with the same value).
pub fn same_topology_domain(a: NodeRef<'_>, b: NodeRef<'_>, key: StrId) -> bool {
    if a.id == b.id {
        return true;
    }
    match (a.label_id(key), b.label_id(key)) {
        (Some(x), Some(y)) => x == y,
        _ => false,
    }
}

/// The value (id) of a pod label by key id, for policies that join pods on label ids.
pub fn pod_label(pod: PodRef<'_>, key: StrId) -> Option<StrId> {
    kv_get(&pod.raw.labels, key)
}

/// nodeFit check 4 (`podMatchesInterPodAntiAffinity` in descheduler's `node.go`): some required
/// anti-affinity term of `pod` selects a pod already on `node` (`pods_on_node`: ids of the pods
/// bound to the node; Succeeded and Failed pods are skipped, terminating ones count), and the
/// node carries the term's `topologyKey` label. One direction only: the anti-affinity of the
/// pods already there is not checked. Pods with the same name as `pod` are skipped.
///
/// A term whose label selector is invalid makes descheduler's check fail with an error, so the
/// pod does not fit: it counts as a conflict here too.
pub fn anti_affinity_conflicts_on_node(
    pod: PodRef<'_>,
    node: NodeRef<'_>,
    pods_on_node: &[u32],
) -> bool {
    let terms = &pod.affinity().pod_anti_affinity_required;
    if terms.is_empty() {
        return false;
    }
    let cluster = pod.cluster();
    terms.iter().any(|term| {
        if term
            .label_selector
            .as_ref()
            .is_some_and(|s| !label_selector_is_valid(s))
        {
            return true;
        }
        if node.label_id(term.topology_key.to_native()).is_none() {
            return false;
        }
        pods_on_node.iter().any(|&id| {
            let other = cluster.pod(id);
            !matches!(other.phase(), PodPhase::Succeeded | PodPhase::Failed)
                && other.name() != pod.name()
                && pod_affinity_term_selects(pod, term, other)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::SnapshotBuilder;
    use crate::model::{
        Affinity, KeyValue, LabelSelector, Node, NodeSelectorTerm, Pod, PodAffinityTerm,
        PreferredSchedulingTerm, Requirement, SelectorOperator, Snapshot, to_bytes,
    };
    use SelectorOperator::*;

    /// Small helper to build snapshots with interned strings.
    struct B(SnapshotBuilder);

    impl B {
        fn new() -> Self {
            B(SnapshotBuilder::new(1, 0))
        }
        fn s(&mut self, s: &str) -> StrId {
            self.0.intern(s)
        }
        fn kvs(&mut self, pairs: &[(&str, &str)]) -> Vec<KeyValue> {
            pairs
                .iter()
                .map(|(k, v)| KeyValue {
                    key: self.s(k),
                    value: self.s(v),
                })
                .collect()
        }
        fn req(&mut self, key: &str, operator: SelectorOperator, values: &[&str]) -> Requirement {
            Requirement {
                key: self.s(key),
                operator,
                values: values.iter().map(|v| self.s(v)).collect(),
            }
        }
        fn node(&mut self, name: &str, labels: &[(&str, &str)]) {
            let name = self.s(name);
            let labels = self.kvs(labels);
            self.0.snapshot_mut().nodes.push(Node {
                name,
                labels,
                ..Node::default()
            });
        }
        fn pod(&mut self, ns: &str, name: &str, node: &str, labels: &[(&str, &str)]) -> Pod {
            Pod {
                name: name.into(),
                namespace: self.s(ns),
                node_name: self.s(node),
                labels: self.kvs(labels),
                phase: PodPhase::Running,
                ..Pod::default()
            }
        }
        fn push(&mut self, pod: Pod) {
            self.0.snapshot_mut().pods.push(pod);
        }
        fn finish(self) -> Snapshot {
            self.0.finish()
        }
    }

    #[test]
    fn node_requirement_operators() {
        let mut b = B::new();
        b.node("n0", &[("zone", "a"), ("cores", "16"), ("disk", "ssd")]);
        // (requirement, matches)
        let cases: Vec<(Requirement, bool)> = vec![
            (b.req("zone", In, &["a", "b"]), true),
            (b.req("zone", In, &["b"]), false),
            (b.req("zone", In, &[]), false),
            (b.req("zone", NotIn, &["b"]), true),
            (b.req("zone", NotIn, &["a"]), false),
            (b.req("gpu", NotIn, &["x"]), true),
            (b.req("zone", NotIn, &[]), false),
            (b.req("disk", Exists, &[]), true),
            (b.req("gpu", Exists, &[]), false),
            (b.req("disk", Exists, &["ssd"]), false),
            (b.req("gpu", DoesNotExist, &[]), true),
            (b.req("disk", DoesNotExist, &[]), false),
            (b.req("cores", Gt, &["8"]), true),
            (b.req("cores", Gt, &["16"]), false),
            (b.req("cores", Lt, &["32"]), true),
            (b.req("cores", Lt, &["-1"]), false),
            (b.req("cores", Gt, &["8", "9"]), false),
            (b.req("cores", Gt, &["eight"]), false),
            (b.req("zone", Gt, &["1"]), false),
            (b.req("gpu", Lt, &["1"]), false),
        ];
        // One pod per case, each with one required term holding the requirement.
        for (i, (r, _)) in cases.iter().enumerate() {
            let mut pod = b.pod("ns", &format!("p{i}"), "n0", &[]);
            pod.affinity.node_required = Some(vec![NodeSelectorTerm {
                match_expressions: vec![r.clone()],
                match_fields: vec![],
            }]);
            b.push(pod);
        }
        let bytes = to_bytes(&b.finish()).unwrap();
        let cluster = Cluster::from_bytes(&bytes).unwrap();
        let node = cluster.node(0);
        for (i, (r, want)) in cases.iter().enumerate() {
            let pod = cluster.pod(i as u32);
            assert_eq!(
                pod_matches_node_selector_and_required_affinity(pod, node),
                *want,
                "case {i}: {} {:?} {:?}",
                cluster.str(r.key),
                r.operator,
                r.values.iter().map(|v| cluster.str(*v)).collect::<Vec<_>>()
            );
        }
    }

    #[test]
    fn terms_fields_selector_and_preferred() {
        let mut b = B::new();
        b.node("n0", &[("zone", "a")]);
        b.node("n1", &[("zone", "b")]);
        let zone_a = b.req("zone", In, &["a"]);
        let zone_b = b.req("zone", In, &["b"]);
        let name_n1 = b.req("metadata.name", In, &["n1"]);
        let not_n1 = b.req("metadata.name", NotIn, &["n1"]);
        let name_two = b.req("metadata.name", In, &["n0", "n1"]);
        let name_exists = b.req("metadata.name", Exists, &[]);
        let term = |e: Vec<Requirement>, f: Vec<Requirement>| NodeSelectorTerm {
            match_expressions: e,
            match_fields: f,
        };
        // (nodeSelector, required terms, [matches n0, matches n1])
        type Case<'a> = (
            Vec<(&'a str, &'a str)>,
            Option<Vec<NodeSelectorTerm>>,
            [bool; 2],
        );
        let cases: Vec<Case<'_>> = vec![
            (vec![], None, [true, true]),
            (vec![("zone", "a")], None, [true, false]),
            (vec![("zone", "c")], None, [false, false]),
            (vec![], Some(vec![]), [false, false]),
            (vec![], Some(vec![term(vec![], vec![])]), [false, false]),
            (
                vec![],
                Some(vec![term(vec![zone_a.clone()], vec![])]),
                [true, false],
            ),
            (
                vec![],
                Some(vec![
                    term(vec![zone_a.clone()], vec![]),
                    term(vec![zone_b.clone()], vec![]),
                ]),
                [true, true],
            ),
            (
                vec![],
                Some(vec![term(vec![zone_a.clone(), zone_b.clone()], vec![])]),
                [false, false],
            ),
            (
                vec![],
                Some(vec![term(vec![], vec![name_n1.clone()])]),
                [false, true],
            ),
            (
                vec![],
                Some(vec![term(vec![], vec![not_n1])]),
                [true, false],
            ),
            (
                vec![],
                Some(vec![term(vec![], vec![name_two])]),
                [false, false],
            ),
            (
                vec![],
                Some(vec![term(vec![], vec![name_exists])]),
                [false, false],
            ),
            (
                vec![],
                Some(vec![term(vec![zone_b.clone()], vec![name_n1.clone()])]),
                [false, true],
            ),
            (
                vec![("zone", "a")],
                Some(vec![term(vec![zone_b.clone()], vec![])]),
                [false, false],
            ),
        ];
        for (i, (sel, required, _)) in cases.iter().enumerate() {
            let mut pod = b.pod("ns", &format!("p{i}"), "", &[]);
            pod.node_selector = b.kvs(sel);
            pod.affinity.node_required = required.clone();
            b.push(pod);
        }
        // Preferred: weights 10 (zone a), 5 (zone b), 7 (n1 by name), 3 (empty term).
        let mut pref = b.pod("ns", "pref", "", &[]);
        pref.affinity = Affinity {
            node_preferred: vec![
                PreferredSchedulingTerm {
                    weight: 10,
                    term: term(vec![zone_a], vec![]),
                },
                PreferredSchedulingTerm {
                    weight: 5,
                    term: term(vec![zone_b], vec![]),
                },
                PreferredSchedulingTerm {
                    weight: 7,
                    term: term(vec![], vec![name_n1]),
                },
                PreferredSchedulingTerm {
                    weight: 3,
                    term: term(vec![], vec![]),
                },
            ],
            ..Affinity::default()
        };
        b.push(pref);
        let bytes = to_bytes(&b.finish()).unwrap();
        let cluster = Cluster::from_bytes(&bytes).unwrap();
        for (i, (_, _, want)) in cases.iter().enumerate() {
            let pod = cluster.pod(i as u32);
            let got = [0, 1]
                .map(|n| pod_matches_node_selector_and_required_affinity(pod, cluster.node(n)));
            assert_eq!(&got, want, "case {i}");
        }
        let pref = cluster.pod(cases.len() as u32);
        assert!(pod_has_preferred_node_affinity(pref));
        assert!(!pod_has_required_node_affinity(pref));
        assert_eq!(preferred_node_affinity_score(pref, cluster.node(0)), 10);
        assert_eq!(preferred_node_affinity_score(pref, cluster.node(1)), 12);
        assert_eq!(
            preferred_node_affinity_score(cluster.pod(0), cluster.node(1)),
            0
        );
    }

    #[test]
    fn anti_affinity_for_node_fit() {
        let mut b = B::new();
        b.node("n0", &[("zone", "a"), ("kubernetes.io/hostname", "n0")]);
        b.node("n1", &[("kubernetes.io/hostname", "n1")]);
        let app = b.s("app");
        let web = b.s("web");
        let zone = b.s("zone");
        let hostname = b.s("kubernetes.io/hostname");
        let other_ns = b.s("other");
        let selector = LabelSelector {
            match_labels: vec![KeyValue {
                key: app,
                value: web,
            }],
            match_expressions: vec![],
        };
        let term = |topology_key, namespaces: Vec<StrId>, label_selector| PodAffinityTerm {
            label_selector,
            namespaces,
            topology_key,
            ..PodAffinityTerm::default()
        };
        // Existing pods: web on n0 (ns "ns"), web on n1 (ns "other"), a finished web on n1 (ns "ns").
        let existing = [
            b.pod("ns", "web-0", "n0", &[("app", "web")]),
            b.pod("other", "web-1", "n1", &[("app", "web")]),
            {
                let mut p = b.pod("ns", "web-2", "n1", &[("app", "web")]);
                p.phase = PodPhase::Succeeded;
                p
            },
        ];
        for p in existing {
            b.push(p);
        }
        // Candidates (ns "ns"): (terms, [conflicts on n0, conflicts on n1])
        let cases: Vec<(Vec<PodAffinityTerm>, [bool; 2])> = vec![
            (vec![], [false, false]),
            (
                vec![term(hostname, vec![], Some(selector.clone()))],
                [true, false],
            ),
            // The topology key must be on the candidate node.
            (
                vec![term(zone, vec![], Some(selector.clone()))],
                [true, false],
            ),
            (
                vec![term(zone, vec![other_ns], Some(selector.clone()))],
                [false, false],
            ),
            (
                vec![term(hostname, vec![other_ns], Some(selector.clone()))],
                [false, true],
            ),
            // Nil selector matches nothing; empty selector matches everything in the namespace.
            (vec![term(hostname, vec![], None)], [false, false]),
            (
                vec![term(hostname, vec![], Some(LabelSelector::default()))],
                [true, false],
            ),
            // Invalid selector: descheduler errors, so the pod fits nowhere.
            (
                vec![term(
                    hostname,
                    vec![],
                    Some(LabelSelector {
                        match_labels: vec![],
                        match_expressions: vec![Requirement {
                            key: app,
                            operator: Gt,
                            values: vec![web],
                        }],
                    }),
                )],
                [true, true],
            ),
        ];
        for (i, (terms, _)) in cases.iter().enumerate() {
            let mut pod = b.pod("ns", &format!("cand-{i}"), "", &[("app", "web")]);
            pod.affinity.pod_anti_affinity_required = terms.clone();
            b.push(pod);
        }
        // Same name as an existing pod is skipped.
        let mut same_name = b.pod("ns", "web-0", "", &[]);
        same_name.affinity.pod_anti_affinity_required =
            vec![term(hostname, vec![], Some(selector))];
        b.push(same_name);
        let bytes = to_bytes(&b.finish()).unwrap();
        let cluster = Cluster::from_bytes(&bytes).unwrap();
        let by_node = cluster.pods_by_node();
        for (i, (_, want)) in cases.iter().enumerate() {
            let pod = cluster.pod(3 + i as u32);
            let got = [0usize, 1]
                .map(|n| anti_affinity_conflicts_on_node(pod, cluster.node(n as u32), &by_node[n]));
            assert_eq!(&got, want, "case {i}");
        }
        let same = cluster.pod(3 + cases.len() as u32);
        assert!(!anti_affinity_conflicts_on_node(
            same,
            cluster.node(0),
            &by_node[0]
        ));

        // Topology domains.
        assert!(same_topology_domain(cluster.node(0), cluster.node(0), zone));
        assert!(!same_topology_domain(
            cluster.node(0),
            cluster.node(1),
            zone
        ));
        assert!(!same_topology_domain(
            cluster.node(0),
            cluster.node(1),
            hostname
        ));
        let web0 = cluster.pod(0);
        assert_eq!(pod_label(web0, app), Some(web));
    }
}
