//! Taints and tolerations: `v1.Toleration.ToleratesTaint` and the descheduler helpers built on it.
//!
//! Owns the meaning of "tolerates" for the host (nodeFit) and for guests (taint, duplicate and
//! utilization policies), so they cannot disagree. Works on archived snapshot data by interned
//! ids; `""` is always id 0, so "empty key/value" is `== 0`. Must not do I/O.

use crate::model::{ArchivedToleration, ArchivedTolerationOperator, StrId, TaintEffect};
use crate::view::{NodeRef, PodRef, taint_effect};

/// `Toleration.ToleratesTaint`, exactly:
/// - a toleration with an effect only matches taints with that effect (no effect: all effects);
/// - a toleration with a key only matches taints with that key (empty key: every key — which
///   the API only allows together with `Exists`);
/// - `Exists` matches any value; `Equal` requires the same value.
pub fn toleration_tolerates(
    toleration: &ArchivedToleration,
    key: StrId,
    value: StrId,
    effect: TaintEffect,
) -> bool {
    if let Some(e) = toleration.effect.as_ref()
        && taint_effect(e) != effect
    {
        return false;
    }
    let t_key = toleration.key.to_native();
    if t_key != 0 && t_key != key {
        return false;
    }
    match toleration.operator {
        ArchivedTolerationOperator::Exists => true,
        ArchivedTolerationOperator::Equal => toleration.value.to_native() == value,
    }
}

/// Some toleration of the list tolerates the taint (`TolerationsTolerateTaint`).
pub fn tolerations_tolerate(
    tolerations: &[ArchivedToleration],
    key: StrId,
    value: StrId,
    effect: TaintEffect,
) -> bool {
    tolerations
        .iter()
        .any(|t| toleration_tolerates(t, key, value, effect))
}

/// The pod tolerates one taint.
pub fn pod_tolerates_taint(pod: PodRef<'_>, key: StrId, value: StrId, effect: TaintEffect) -> bool {
    tolerations_tolerate(pod.tolerations(), key, value, effect)
}

/// The pod tolerates every taint of the node whose effect is in `effects`
/// (`TolerationsTolerateTaintsWithFilter` with an effect filter). nodeFit and RemoveDuplicates
/// use `[NoSchedule, NoExecute]`; RemovePodsViolatingNodeTaints uses `[NoSchedule]` (plus
/// `PreferNoSchedule` on request).
pub fn tolerates_all(pod: PodRef<'_>, node: NodeRef<'_>, effects: &[TaintEffect]) -> bool {
    tolerates_taints_where(pod, node, |_, _, effect| effects.contains(&effect))
}

/// The pod tolerates every taint of the node for which `considered(key, value, effect)` is true;
/// other taints are ignored (`TolerationsTolerateTaintsWithFilter`).
pub fn tolerates_taints_where(
    pod: PodRef<'_>,
    node: NodeRef<'_>,
    mut considered: impl FnMut(StrId, StrId, TaintEffect) -> bool,
) -> bool {
    node.taints()
        .filter(|&(k, v, e)| considered(k, v, e))
        .all(|(k, v, e)| pod_tolerates_taint(pod, k, v, e))
}

/// The node's taints with an effect in `effects` that the pod does not tolerate, in node order.
pub fn untolerated_taints<'a>(
    pod: PodRef<'a>,
    node: NodeRef<'a>,
    effects: &'a [TaintEffect],
) -> impl Iterator<Item = (StrId, StrId, TaintEffect)> + 'a {
    node.raw
        .taints
        .iter()
        .map(|t| {
            (
                t.key.to_native(),
                t.value.to_native(),
                taint_effect(&t.effect),
            )
        })
        .filter(move |&(k, v, e)| effects.contains(&e) && !pod_tolerates_taint(pod, k, v, e))
}

/// Descheduler's crude check used by LowNodeUtilization and HighNodeUtilization before evicting a
/// pod towards a node (`utils.PodToleratesTaints` for one node): the pod must have **at least as
/// many tolerations as the node has taints** (counting taints of every effect, PreferNoSchedule
/// included), **and** every taint of the node, of every effect, must be tolerated. So a single
/// wildcard toleration (`operator: Exists`, no key) does not pass a node with two taints, and a
/// pod with no tolerations passes only untainted nodes.
pub fn tolerates_node_taints_by_count(pod: PodRef<'_>, node: NodeRef<'_>) -> bool {
    pod.tolerations().len() >= node.raw.taints.len()
        && node
            .taints()
            .all(|(k, v, e)| pod_tolerates_taint(pod, k, v, e))
}

/// [`tolerates_node_taints_by_count`] for at least one of `nodes` (the destination check of the
/// node-utilization plugins: the pod must be able to go to some underutilized node).
pub fn tolerates_any_node_by_count<'a>(
    pod: PodRef<'a>,
    nodes: impl IntoIterator<Item = NodeRef<'a>>,
) -> bool {
    nodes
        .into_iter()
        .any(|n| tolerates_node_taints_by_count(pod, n))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::SnapshotBuilder;
    use crate::model::{Node, Pod, Taint, Toleration, TolerationOperator, to_bytes};
    use crate::view::Cluster;
    use TaintEffect::*;

    /// A toleration as `(key, operator, value, effect)`.
    type Tol<'a> = (&'a str, TolerationOperator, &'a str, Option<TaintEffect>);

    struct Fixture {
        bytes: rkyv::util::AlignedVec,
    }

    /// One node per taint list and one pod per toleration list.
    fn fixture(nodes: &[&[(&str, &str, TaintEffect)]], pods: &[&[Tol<'_>]]) -> Fixture {
        let mut b = SnapshotBuilder::new(1, 0);
        for (i, taints) in nodes.iter().enumerate() {
            let name = b.intern(&format!("n{i}"));
            let taints = taints
                .iter()
                .map(|(k, v, e)| Taint {
                    key: b.intern(k),
                    value: b.intern(v),
                    effect: *e,
                })
                .collect();
            b.snapshot_mut().nodes.push(Node {
                name,
                taints,
                ..Node::default()
            });
        }
        for (i, tolerations) in pods.iter().enumerate() {
            let tolerations = tolerations
                .iter()
                .map(|(k, op, v, e)| Toleration {
                    key: b.intern(k),
                    operator: *op,
                    value: b.intern(v),
                    effect: *e,
                })
                .collect();
            b.snapshot_mut().pods.push(Pod {
                name: format!("p{i}"),
                tolerations,
                ..Pod::default()
            });
        }
        Fixture {
            bytes: to_bytes(&b.finish()).unwrap(),
        }
    }

    #[test]
    fn toleration_matrix() {
        use TolerationOperator::*;
        // Taint under test: key=k, value=v, effect NoSchedule.
        let cases: &[(Tol<'_>, bool)] = &[
            (("", Exists, "", None), true),             // tolerates everything
            (("", Exists, "", Some(NoSchedule)), true), // every key, this effect
            (("", Exists, "", Some(NoExecute)), false), // other effect
            (("k", Exists, "", None), true),            // key, any value
            (("k", Exists, "other", None), true),       // Exists ignores the value
            (("k", Equal, "v", None), true),            // same value
            (("k", Equal, "w", None), false),           // other value
            (("k", Equal, "", None), false),            // empty value is a value
            (("k", Equal, "v", Some(NoSchedule)), true),
            (("k", Equal, "v", Some(PreferNoSchedule)), false),
            (("other", Exists, "", None), false), // other key
            (("", Equal, "v", None), true),       // empty key + Equal: any key, same value
            (("", Equal, "w", None), false),
        ];
        let pods: Vec<&[Tol<'_>]> = cases.iter().map(|(t, _)| std::slice::from_ref(t)).collect();
        let f = fixture(&[&[("k", "v", NoSchedule)]], &pods);
        let cluster = Cluster::from_bytes(&f.bytes).unwrap();
        let node = cluster.node(0);
        let (k, v, e) = node.taints().next().unwrap();
        for (i, (t, want)) in cases.iter().enumerate() {
            let pod = cluster.pod(i as u32);
            assert_eq!(pod_tolerates_taint(pod, k, v, e), *want, "toleration {t:?}");
            assert_eq!(tolerates_all(pod, node, &[NoSchedule]), *want, "{t:?}");
            // The taint is not considered at all when its effect is filtered out.
            assert!(tolerates_all(pod, node, &[NoExecute]));
        }
    }

    #[test]
    fn tolerates_all_and_untolerated() {
        use TolerationOperator::*;
        let f = fixture(
            &[
                &[
                    ("a", "1", NoSchedule),
                    ("b", "2", PreferNoSchedule),
                    ("c", "3", NoExecute),
                ],
                &[],
            ],
            &[
                &[("a", Equal, "1", None)],
                &[("a", Exists, "", None), ("c", Exists, "", Some(NoExecute))],
                &[],
            ],
        );
        let cluster = Cluster::from_bytes(&f.bytes).unwrap();
        let (n0, n1) = (cluster.node(0), cluster.node(1));
        let fit = [NoSchedule, NoExecute];
        assert!(!tolerates_all(cluster.pod(0), n0, &fit));
        assert!(tolerates_all(cluster.pod(0), n0, &[NoSchedule]));
        assert!(tolerates_all(cluster.pod(1), n0, &fit));
        assert!(!tolerates_all(cluster.pod(1), n0, &[PreferNoSchedule]));
        assert!(tolerates_all(cluster.pod(2), n1, &fit), "untainted node");
        let missing: Vec<_> = untolerated_taints(cluster.pod(0), n0, &fit)
            .map(|(k, _, e)| (cluster.str(k), e))
            .collect();
        assert_eq!(missing, vec![("c", NoExecute)]);
        let b = cluster.lookup("b").unwrap();
        assert!(tolerates_taints_where(cluster.pod(1), n0, |k, _, _| k != b));
    }

    #[test]
    fn count_check_is_as_crude_as_descheduler() {
        use TolerationOperator::*;
        let f = fixture(
            &[
                &[("a", "1", NoSchedule), ("b", "2", PreferNoSchedule)],
                &[],
                &[("a", "1", NoSchedule)],
            ],
            &[
                &[("", Exists, "", None)], // wildcard, 1 toleration
                &[("", Exists, "", None), ("x", Exists, "", None)], // wildcard + filler
                &[("a", Equal, "1", None), ("x", Exists, "", None)], // b not tolerated
                &[],
            ],
        );
        let cluster = Cluster::from_bytes(&f.bytes).unwrap();
        let (n0, n1, n2) = (cluster.node(0), cluster.node(1), cluster.node(2));
        assert!(
            !tolerates_node_taints_by_count(cluster.pod(0), n0),
            "1 toleration < 2 taints"
        );
        assert!(tolerates_node_taints_by_count(cluster.pod(0), n2));
        assert!(tolerates_node_taints_by_count(cluster.pod(1), n0));
        assert!(
            !tolerates_node_taints_by_count(cluster.pod(2), n0),
            "PreferNoSchedule counts"
        );
        assert!(tolerates_node_taints_by_count(cluster.pod(3), n1));
        assert!(!tolerates_node_taints_by_count(cluster.pod(3), n2));
        assert!(tolerates_any_node_by_count(cluster.pod(3), [n0, n2, n1]));
        assert!(!tolerates_any_node_by_count(cluster.pod(3), [n0, n2]));
    }
}
