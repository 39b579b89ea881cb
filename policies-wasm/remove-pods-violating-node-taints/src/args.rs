//! RemovePodsViolatingNodeTaints args: the serde shape of descheduler v0.36's
//! `RemovePodsViolatingNodeTaintsArgs`, `ValidateRemovePodsViolatingNodeTaintsArgs` and the
//! hand-written JSON Schema. Owns no plugin logic.

use rebalancer_policy_sdk::ArgError;
use rebalancer_policy_sdk::k8s::selector::LabelSelectorSpec;
use serde::{Deserialize, Serialize};

use descheduler_common::scope::{
    Namespaces, label_selector_schema, namespaces_schema, null_as_default,
};

/// `RemovePodsViolatingNodeTaintsArgs`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RemovePodsViolatingNodeTaintsArgs {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<Namespaces>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelectorSpec>,
    /// Also evict pods that do not tolerate `PreferNoSchedule` taints.
    #[serde(default, deserialize_with = "null_as_default")]
    pub include_prefer_no_schedule: bool,
    /// Taints to ignore, by `key` or `key=value`.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub excluded_taints: Vec<String>,
    /// The only taints to consider, by `key` or `key=value`. Absent (or `null`): every taint.
    /// As in descheduler, an empty list is not absent: it considers no taint at all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub included_taints: Option<Vec<String>>,
}

/// `ValidateRemovePodsViolatingNodeTaintsArgs`: every problem, in descheduler's words.
pub fn validate(args: &RemovePodsViolatingNodeTaintsArgs) -> Vec<ArgError> {
    let mut errors = descheduler_common::scope::validate_scope(
        args.namespaces.as_ref(),
        args.label_selector.as_ref(),
    );
    if !args.excluded_taints.is_empty()
        && args.included_taints.as_ref().is_some_and(|t| !t.is_empty())
    {
        errors.push(ArgError::new(
            "",
            "either includedTaints or excludedTaints can be set, but not both",
        ));
    }
    errors
}

/// JSON Schema (draft 2020-12) of [`RemovePodsViolatingNodeTaintsArgs`].
pub fn schema() -> serde_json::Value {
    let taints = |what: &str| {
        serde_json::json!({
            "description": what,
            "type": ["array", "null"],
            "items": { "type": "string", "examples": ["dedicated", "dedicated=gpu"] }
        })
    };
    serde_json::json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "RemovePodsViolatingNodeTaintsArgs",
        "description": "Args of descheduler's RemovePodsViolatingNodeTaints plugin (v0.36): \
                        evict pods that do not tolerate a NoSchedule taint of their node.",
        "type": "object",
        "additionalProperties": false,
        "not": {
            "type": "object",
            "properties": {
                "excludedTaints": { "type": "array", "minItems": 1 },
                "includedTaints": { "type": "array", "minItems": 1 }
            },
            "required": ["excludedTaints", "includedTaints"]
        },
        "properties": {
            "namespaces": namespaces_schema(),
            "labelSelector": label_selector_schema(),
            "includePreferNoSchedule": {
                "description": "Also consider PreferNoSchedule taints.",
                "type": ["boolean", "null"],
                "default": false
            },
            "excludedTaints": taints(
                "Taints to ignore, by key or key=value (not with includedTaints)."
            ),
            "includedTaints": taints(
                "The only taints to consider, by key or key=value (not with excludedTaints). \
                 Leave it out to consider every taint; an empty list considers none."
            )
        }
    })
}

#[cfg(test)]
mod tests {
    use rebalancer_policy_sdk::testing::check_args;

    use super::*;

    fn check(json: &str) -> Result<RemovePodsViolatingNodeTaintsArgs, String> {
        check_args::<crate::RemovePodsViolatingNodeTaints>(json).map_err(|errors| errors.join("; "))
    }

    #[test]
    fn table() {
        let ok = [
            "{}",
            r#"{"includePreferNoSchedule":true}"#,
            r#"{"excludedTaints":["dedicated","gpu=true"]}"#,
            r#"{"includedTaints":["dedicated=gpu"]}"#,
            r#"{"includedTaints":[],"excludedTaints":["a"]}"#,
            r#"{"excludedTaints":null,"includedTaints":null,"includePreferNoSchedule":null}"#,
            r#"{"namespaces":{"exclude":["kube-system"]},"labelSelector":{"matchLabels":{"a":"b"}}}"#,
        ];
        for json in ok {
            if let Err(e) = check(json) {
                panic!("{json}: {e}");
            }
        }
        let bad = [
            (
                r#"{"includedTaints":["a"],"excludedTaints":["b"]}"#,
                "either includedTaints or excludedTaints can be set, but not both",
            ),
            (
                r#"{"namespaces":{"include":["a"],"exclude":["b"]}}"#,
                "namespaces: only one of Include/Exclude namespaces can be set",
            ),
            (
                r#"{"labelSelector":{"matchExpressions":[{"key":"a","operator":"Has"}]}}"#,
                "failed to get label selectors from strategy's params",
            ),
            (
                r#"{"excludeTaints":["a"]}"#,
                "unknown field `excludeTaints`",
            ),
            (
                r#"{"includePreferNoSchedule":"yes"}"#,
                "invalid type: string",
            ),
        ];
        for (json, want) in bad {
            match check(json) {
                Ok(_) => panic!("{json}: accepted"),
                Err(e) => assert!(e.contains(want), "{json}: {e:?} lacks {want:?}"),
            }
        }
    }

    #[test]
    fn null_and_empty_included_taints_differ() {
        assert_eq!(
            check(r#"{"includedTaints":null}"#).unwrap().included_taints,
            None
        );
        assert_eq!(
            check(r#"{"includedTaints":[]}"#).unwrap().included_taints,
            Some(Vec::new())
        );
    }
}
