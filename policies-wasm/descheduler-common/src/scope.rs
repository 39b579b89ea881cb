//! descheduler's per-plugin pod scope: the `namespaces` (include or exclude) and `labelSelector`
//! plugin args — their validation in descheduler's words ([`validate_scope`]), their JSON Schema
//! fragments ([`namespaces_schema`], [`label_selector_schema`]) — and [`PodScope`], the two
//! resolved once against a snapshot and matched by string ids.
//!
//! Used by PodLifeTime, RemoveFailedPods, RemovePodsHavingTooManyRestarts,
//! RemovePodsViolatingNodeTaints, RemovePodsViolatingNodeAffinity,
//! RemovePodsViolatingInterPodAntiAffinity, RemovePodsViolatingTopologySpreadConstraint and
//! (namespaces only) RemoveDuplicates. Must not hold any plugin's own criteria, and must not do
//! I/O. It stays out of the SDK because the error texts and schemas are descheduler's.

pub use rebalancer_policy_sdk::args::{Namespaces, null_as_default};
use rebalancer_policy_sdk::k8s::selector::{LabelSelectorSpec, ResolvedSelector};
use rebalancer_policy_sdk::model::StrId;
use rebalancer_policy_sdk::{ArgError, Cluster, PodRef};

/// The checks every descheduler validator of these plugins starts with: `namespaces` sets at most
/// one of include/exclude, and `labelSelector` converts to a selector.
pub fn validate_scope(
    namespaces: Option<&Namespaces>,
    label_selector: Option<&LabelSelectorSpec>,
) -> Vec<ArgError> {
    let mut errors = Vec::new();
    if let Some(ns) = namespaces
        && !ns.include.is_empty()
        && !ns.exclude.is_empty()
    {
        errors.push(ArgError::new(
            "namespaces",
            "only one of Include/Exclude namespaces can be set",
        ));
    }
    if let Some(selector) = label_selector {
        errors.extend(selector.validate("labelSelector").into_iter().map(|e| {
            ArgError::new(
                e.field,
                format!(
                    "failed to get label selectors from strategy's params: {}",
                    e.message
                ),
            )
        }));
    }
    errors
}

/// JSON Schema of `namespaces`.
pub fn namespaces_schema() -> serde_json::Value {
    serde_json::json!({
        "description": "Restrict the pods considered by namespace: either include or exclude, \
                        not both.",
        "type": ["object", "null"],
        "additionalProperties": false,
        "properties": {
            "include": { "type": ["array", "null"], "items": { "type": "string" } },
            "exclude": { "type": ["array", "null"], "items": { "type": "string" } }
        },
        "not": {
            "type": "object",
            "properties": {
                "include": { "type": "array", "minItems": 1 },
                "exclude": { "type": "array", "minItems": 1 }
            },
            "required": ["include", "exclude"]
        },
        "default": null
    })
}

/// JSON Schema of `labelSelector` (a `metav1.LabelSelector`).
pub fn label_selector_schema() -> serde_json::Value {
    serde_json::json!({
        "description": "Only pods whose labels match this selector are considered.",
        "type": ["object", "null"],
        "additionalProperties": false,
        "properties": {
            "matchLabels": {
                "type": ["object", "null"],
                "additionalProperties": { "type": "string" }
            },
            "matchExpressions": {
                "type": ["array", "null"],
                "items": {
                    "type": "object",
                    "additionalProperties": false,
                    "required": ["key", "operator"],
                    "properties": {
                        "key": { "type": "string" },
                        "operator": { "enum": ["In", "NotIn", "Exists", "DoesNotExist"] },
                        "values": { "type": ["array", "null"], "items": { "type": "string" } }
                    }
                }
            }
        },
        "default": null
    })
}

/// `schema` with its `description` replaced, for plugins whose docs say more about a shared
/// field (the key keeps its place, so the document is otherwise unchanged).
pub fn described(mut schema: serde_json::Value, description: &str) -> serde_json::Value {
    schema["description"] = description.into();
    schema
}

/// Which namespaces pass, resolved to string ids. A name no object uses cannot be any pod's
/// namespace, so it is dropped when resolving (an include list of only such names admits nothing).
#[derive(Debug)]
pub enum NamespaceFilter {
    All,
    Include(Vec<StrId>),
    Exclude(Vec<StrId>),
}

impl NamespaceFilter {
    /// The `namespaces` arg resolved against one snapshot (include wins when, unvalidated, both
    /// are set).
    pub fn new(cluster: Cluster<'_>, namespaces: Option<&Namespaces>) -> Self {
        let resolve = |names: &[String]| names.iter().filter_map(|n| cluster.lookup(n)).collect();
        match namespaces {
            Some(ns) if !ns.include.is_empty() => NamespaceFilter::Include(resolve(&ns.include)),
            Some(ns) if !ns.exclude.is_empty() => NamespaceFilter::Exclude(resolve(&ns.exclude)),
            _ => NamespaceFilter::All,
        }
    }

    /// Whether pods of `namespace` pass.
    pub fn allows(&self, namespace: StrId) -> bool {
        match self {
            NamespaceFilter::All => true,
            NamespaceFilter::Include(ids) => ids.contains(&namespace),
            NamespaceFilter::Exclude(ids) => !ids.contains(&namespace),
        }
    }
}

/// The `namespaces` and `labelSelector` args of a plugin, resolved against one snapshot.
#[derive(Debug)]
pub struct PodScope {
    namespaces: NamespaceFilter,
    /// `None`: no selector (every pod).
    selector: Option<ResolvedSelector>,
}

impl PodScope {
    pub fn new(
        cluster: Cluster<'_>,
        namespaces: Option<&Namespaces>,
        label_selector: Option<&LabelSelectorSpec>,
    ) -> Self {
        let namespaces = NamespaceFilter::new(cluster, namespaces);
        let selector = label_selector
            .map(|s| s.resolve(cluster))
            .filter(|s| !s.is_everything());
        PodScope {
            namespaces,
            selector,
        }
    }

    /// [`PodScope::new`] for plugins that refuse to run on an invalid `labelSelector` instead of
    /// matching nothing (args that passed [`validate_scope`] never fail here).
    pub fn try_new(
        cluster: Cluster<'_>,
        namespaces: Option<&Namespaces>,
        label_selector: Option<&LabelSelectorSpec>,
    ) -> Result<Self, String> {
        if let Some(spec) = label_selector {
            spec.to_selector()
                .map_err(|e| format!("invalid labelSelector: {e}"))?;
        }
        Ok(PodScope::new(cluster, namespaces, label_selector))
    }

    /// The pod is in an allowed namespace and matches the label selector.
    pub fn admits(&self, pod: PodRef<'_>) -> bool {
        self.namespaces.allows(pod.namespace_id())
            && self
                .selector
                .as_ref()
                .is_none_or(|s| s.matches(pod.cluster(), &pod.raw.labels))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scope_validation() {
        let both = Namespaces {
            include: vec!["a".into()],
            exclude: vec!["b".into()],
        };
        let errors = validate_scope(Some(&both), None);
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].field, "namespaces");
        let one = Namespaces {
            include: vec!["a".into()],
            exclude: Vec::new(),
        };
        assert!(validate_scope(Some(&one), None).is_empty());
        let bad: LabelSelectorSpec =
            serde_json::from_str(r#"{"matchExpressions":[{"key":"a","operator":"In"}]}"#).unwrap();
        let errors = validate_scope(None, Some(&bad));
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].field.starts_with("labelSelector"), "{errors:?}");
        assert!(
            errors[0]
                .message
                .starts_with("failed to get label selectors from strategy's params"),
            "{errors:?}"
        );
    }

    #[test]
    fn try_new_refuses_an_invalid_selector_that_new_resolves_to_nothing() {
        use rebalancer_policy_sdk::testing::*;
        let cluster = TestCluster::new()
            .node(TestNode::new("n1"))
            .pod(TestPod::new("a", "p").on_node("n1").label("app", "web"))
            .pod(TestPod::new("b", "q").on_node("n1").label("app", "web"));
        let session = cluster.session();
        let c = session.cluster();
        let bad: LabelSelectorSpec =
            serde_json::from_str(r#"{"matchExpressions":[{"key":"app","operator":"In"}]}"#)
                .unwrap();
        let err = PodScope::try_new(c, None, Some(&bad)).unwrap_err();
        assert!(err.starts_with("invalid labelSelector: "), "{err}");
        let nothing = PodScope::new(c, None, Some(&bad));
        assert!(c.pods().all(|p| !nothing.admits(p)));

        let web: LabelSelectorSpec =
            serde_json::from_str(r#"{"matchLabels":{"app":"web"}}"#).unwrap();
        let only_b = Namespaces {
            include: vec!["b".into(), "unknown".into()],
            exclude: Vec::new(),
        };
        let scope = PodScope::try_new(c, Some(&only_b), Some(&web)).unwrap();
        let admitted: Vec<&str> = c
            .pods()
            .filter(|&p| scope.admits(p))
            .map(|p| p.name())
            .collect();
        assert_eq!(admitted, ["q"]);
    }
}
