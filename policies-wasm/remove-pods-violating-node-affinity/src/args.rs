//! RemovePodsViolatingNodeAffinity args: the serde shape of descheduler v0.36's
//! `RemovePodsViolatingNodeAffinityArgs`, `ValidateRemovePodsViolatingNodeAffinityArgs` (plus a
//! check descheduler leaves to run time) and the hand-written JSON Schema. Owns no plugin logic.

use rebalancer_policy_sdk::ArgError;
use rebalancer_policy_sdk::k8s::selector::LabelSelectorSpec;
use serde::{Deserialize, Serialize};

use descheduler_common::scope::{
    Namespaces, label_selector_schema, namespaces_schema, null_as_default,
};

pub const REQUIRED: &str = "requiredDuringSchedulingIgnoredDuringExecution";
pub const PREFERRED: &str = "preferredDuringSchedulingIgnoredDuringExecution";

/// `RemovePodsViolatingNodeAffinityArgs`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RemovePodsViolatingNodeAffinityArgs {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<Namespaces>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelectorSpec>,
    /// Which node affinity to enforce, in order: [`REQUIRED`] and/or [`PREFERRED`].
    #[serde(default, deserialize_with = "null_as_default")]
    pub node_affinity_type: Vec<String>,
}

/// `ValidateRemovePodsViolatingNodeAffinityArgs`, plus: every `nodeAffinityType` entry must be
/// one of the two types (descheduler only logs "Invalid nodeAffinityType" at run time and does
/// nothing for it, which hides typos).
pub fn validate(args: &RemovePodsViolatingNodeAffinityArgs) -> Vec<ArgError> {
    let mut errors = Vec::new();
    if args.node_affinity_type.is_empty() {
        errors.push(ArgError::new(
            "nodeAffinityType",
            "nodeAffinityType needs to be set",
        ));
    }
    for (i, t) in args.node_affinity_type.iter().enumerate() {
        if t != REQUIRED && t != PREFERRED {
            errors.push(ArgError::new(
                format!("nodeAffinityType[{i}]"),
                format!(
                    "invalid nodeAffinityType {t:?}: supported values: \"{REQUIRED}\", \
                     \"{PREFERRED}\""
                ),
            ));
        }
    }
    errors.extend(descheduler_common::scope::validate_scope(
        args.namespaces.as_ref(),
        args.label_selector.as_ref(),
    ));
    errors
}

/// JSON Schema (draft 2020-12) of [`RemovePodsViolatingNodeAffinityArgs`].
pub fn schema() -> serde_json::Value {
    serde_json::json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "RemovePodsViolatingNodeAffinityArgs",
        "description": "Args of descheduler's RemovePodsViolatingNodeAffinity plugin (v0.36).",
        "type": "object",
        "additionalProperties": false,
        "required": ["nodeAffinityType"],
        "properties": {
            "namespaces": namespaces_schema(),
            "labelSelector": label_selector_schema(),
            "nodeAffinityType": {
                "description": "requiredDuringSchedulingIgnoredDuringExecution: evict pods whose \
                                node no longer matches their required node affinity, if they \
                                fit another node. preferredDuringSchedulingIgnoredDuringExecution: \
                                evict pods when some node scores higher on their preferred node \
                                affinity than their own, if they fit a node.",
                "type": "array",
                "minItems": 1,
                "items": { "enum": [REQUIRED, PREFERRED] }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use rebalancer_policy_sdk::testing::check_args;

    use super::*;

    fn check(json: &str) -> Result<RemovePodsViolatingNodeAffinityArgs, String> {
        check_args::<crate::RemovePodsViolatingNodeAffinity>(json)
            .map_err(|errors| errors.join("; "))
    }

    #[test]
    fn table() {
        let ok = [
            r#"{"nodeAffinityType":["requiredDuringSchedulingIgnoredDuringExecution"]}"#,
            r#"{"nodeAffinityType":["preferredDuringSchedulingIgnoredDuringExecution"]}"#,
            r#"{"nodeAffinityType":["requiredDuringSchedulingIgnoredDuringExecution",
                "preferredDuringSchedulingIgnoredDuringExecution"],
                "namespaces":{"include":["a"]},"labelSelector":{"matchLabels":{"x":"y"}}}"#,
        ];
        for json in ok {
            if let Err(e) = check(json) {
                panic!("{json}: {e}");
            }
        }
        let bad = [
            ("{}", "nodeAffinityType: nodeAffinityType needs to be set"),
            (
                r#"{"nodeAffinityType":null}"#,
                "nodeAffinityType: nodeAffinityType needs to be set",
            ),
            (
                r#"{"nodeAffinityType":[]}"#,
                "nodeAffinityType: nodeAffinityType needs to be set",
            ),
            (
                r#"{"nodeAffinityType":["requiredDuringScheduling"]}"#,
                "nodeAffinityType[0]: invalid nodeAffinityType \"requiredDuringScheduling\"",
            ),
            (
                r#"{"nodeAffinityType":["requiredDuringSchedulingIgnoredDuringExecution"],
                    "namespaces":{"include":["a"],"exclude":["b"]}}"#,
                "only one of Include/Exclude namespaces can be set",
            ),
            (
                r#"{"nodeAffinityType":["requiredDuringSchedulingIgnoredDuringExecution"],
                    "labelSelector":{"matchExpressions":[{"key":"a","operator":"NotIn"}]}}"#,
                "failed to get label selectors from strategy's params",
            ),
            (
                r#"{"nodeAffinityTypes":["requiredDuringSchedulingIgnoredDuringExecution"]}"#,
                "unknown field `nodeAffinityTypes`",
            ),
        ];
        for (json, want) in bad {
            match check(json) {
                Ok(_) => panic!("{json}: accepted"),
                Err(e) => assert!(e.contains(want), "{json}: {e:?} lacks {want:?}"),
            }
        }
    }
}
