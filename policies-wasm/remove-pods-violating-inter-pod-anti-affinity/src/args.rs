//! RemovePodsViolatingInterPodAntiAffinity args: the serde shape of descheduler's
//! `RemovePodsViolatingInterPodAntiAffinityArgs` (v0.36) plus Rebalancer's opt-in
//! `includePreferredAntiAffinity`, their validation and the hand-written JSON Schema. Owns no
//! plugin logic.

use descheduler_common::scope::{
    described, label_selector_schema, namespaces_schema, validate_scope,
};
use rebalancer_policy_sdk::ArgError;
pub use rebalancer_policy_sdk::args::Namespaces;
use rebalancer_policy_sdk::args::null_as_default;
use rebalancer_policy_sdk::k8s::selector::LabelSelectorSpec;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RemovePodsViolatingInterPodAntiAffinityArgs {
    /// Namespaces whose pods are considered, as candidates and as the pods that cause a
    /// violation: `include` or `exclude`, not both.
    #[serde(default)]
    pub namespaces: Option<Namespaces>,
    /// Only pods matching it are considered, as candidates and as the pods that cause a violation.
    #[serde(default)]
    pub label_selector: Option<LabelSelectorSpec>,
    /// Rebalancer extension (descheduler #250/#1125), off by default: also evict pods whose
    /// *preferred* anti-affinity is violated, when some other node in scope would satisfy all of
    /// their preferred anti-affinity terms and passes nodeFit. Not serialized while off, so the
    /// args stay a valid descheduler document.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "descheduler_common::args::is_false"
    )]
    pub include_preferred_anti_affinity: bool,
}

/// `ValidateRemovePodsViolatingInterPodAntiAffinityArgs`; descheduler stops at its first error,
/// we list them all.
pub fn validate(args: &RemovePodsViolatingInterPodAntiAffinityArgs) -> Vec<ArgError> {
    validate_scope(args.namespaces.as_ref(), args.label_selector.as_ref())
}

/// JSON Schema (draft 2020-12) of [`RemovePodsViolatingInterPodAntiAffinityArgs`].
pub fn schema() -> serde_json::Value {
    serde_json::json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "RemovePodsViolatingInterPodAntiAffinityArgs",
        "description": "Args of descheduler's RemovePodsViolatingInterPodAntiAffinity plugin \
                        (v0.36), plus the opt-in includePreferredAntiAffinity.",
        "type": "object",
        "additionalProperties": false,
        "properties": {
            "namespaces": described(
                namespaces_schema(),
                "Restrict the pods considered by namespace: either include or \
                                exclude, not both. Applies to the pods that can cause a violation \
                                as well as to the candidates, as in descheduler.",
            ),
            "labelSelector": described(
                label_selector_schema(),
                "metav1.LabelSelector. Only matching pods are considered, both as \
                                candidates and as the pods that can cause a violation (a pod \
                                outside the selector never makes another pod a violator).",
            ),
            "includePreferredAntiAffinity": {
                "description": "Rebalancer extension, off by default (descheduler ignores \
                                preferred anti-affinity, #250/#1125). When true, a pod whose \
                                preferredDuringSchedulingIgnoredDuringExecution anti-affinity \
                                terms select another considered pod in the same topology domain \
                                is evicted too — but only if some other node in scope passes \
                                nodeFit (selector, taints, resources, required anti-affinity) \
                                and would satisfy every one of its preferred terms; that node is \
                                then counted as taken by the pod for later decisions of the run, \
                                so replicas are not all sent to the same spot. Required \
                                anti-affinity keeps descheduler's semantics exactly.",
                "type": ["boolean", "null"],
                "default": false
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use rebalancer_policy_sdk::testing::check_args;

    use super::*;

    fn parse(json: &str) -> Result<RemovePodsViolatingInterPodAntiAffinityArgs, String> {
        check_args::<crate::RemovePodsViolatingInterPodAntiAffinity>(json)
            .map_err(|errors| errors.join("; "))
    }

    #[test]
    fn table() {
        // (name, args, expected error substring; None: valid)
        let cases: &[(&str, &str, Option<&str>)] = &[
            ("empty", "{}", None),
            ("nulls", r#"{"namespaces":null,"labelSelector":null}"#, None),
            (
                "include",
                r#"{"namespaces":{"include":["a"],"exclude":[]}}"#,
                None,
            ),
            (
                "selector",
                r#"{"labelSelector":{"matchLabels":{"tier":"frontend"},
                    "matchExpressions":[{"key":"app","operator":"In","values":["a","b"]}]}}"#,
                None,
            ),
            (
                "preferred on",
                r#"{"includePreferredAntiAffinity":true}"#,
                None,
            ),
            (
                "both namespaces",
                r#"{"namespaces":{"include":["a"],"exclude":["b"]}}"#,
                Some("namespaces: only one of Include/Exclude namespaces can be set"),
            ),
            (
                "bad operator",
                r#"{"labelSelector":{"matchExpressions":[{"key":"app","operator":"Equals","values":["a"]}]}}"#,
                Some(
                    "labelSelector.matchExpressions[0].operator: failed to get label selectors \
                     from strategy's params: unsupported value \"Equals\"",
                ),
            ),
            (
                "In without values",
                r#"{"labelSelector":{"matchExpressions":[{"key":"app","operator":"In"}]}}"#,
                Some("labelSelector.matchExpressions[0].values: failed to get label selectors"),
            ),
            (
                "bad label value",
                r#"{"labelSelector":{"matchLabels":{"app":"not ok"}}}"#,
                Some("invalid label value \"not ok\""),
            ),
            (
                "unknown field",
                r#"{"labelSelectors":{}}"#,
                Some("unknown field `labelSelectors`"),
            ),
            (
                "unknown selector field",
                r#"{"labelSelector":{"matchLabel":{"a":"b"}}}"#,
                Some("unknown field `matchLabel`"),
            ),
        ];
        for (name, json, want) in cases {
            match (parse(json), want) {
                (Ok(_), None) => {}
                (Err(e), Some(want)) => {
                    assert!(e.contains(want), "{name}: error {e:?} lacks {want:?}")
                }
                (got, want) => panic!("{name}: got {got:?}, want error {want:?}"),
            }
        }
    }

    #[test]
    fn preferred_option_is_left_out_while_off() {
        let off = serde_json::to_value(RemovePodsViolatingInterPodAntiAffinityArgs::default())
            .expect("serializes");
        assert_eq!(
            off,
            serde_json::json!({ "namespaces": null, "labelSelector": null })
        );
        let on = parse(r#"{"includePreferredAntiAffinity":true}"#).expect("valid");
        assert!(on.include_preferred_anti_affinity);
        assert_eq!(
            serde_json::to_value(&on).expect("serializes")["includePreferredAntiAffinity"],
            true
        );
        let schema = schema();
        let option = &schema["properties"]["includePreferredAntiAffinity"];
        assert_eq!(option["default"], false);
        assert!(
            option["description"]
                .as_str()
                .is_some_and(|d| d.contains("Rebalancer extension") && d.contains("#250/#1125"))
        );
    }
}
