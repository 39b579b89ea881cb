//! RemovePodsHavingTooManyRestarts args: the serde shape of descheduler v0.36's
//! `RemovePodsHavingTooManyRestartsArgs`, `ValidateRemovePodsHavingTooManyRestartsArgs` and the
//! hand-written JSON Schema. Owns no plugin logic.

use rebalancer_policy_sdk::ArgError;
use rebalancer_policy_sdk::k8s::selector::LabelSelectorSpec;
use serde::{Deserialize, Serialize};

use descheduler_common::scope::{
    Namespaces, label_selector_schema, namespaces_schema, null_as_default,
};

/// The values `states` accepts: the pod phase `Running` and the container waiting reason
/// `CrashLoopBackOff`.
pub const ALLOWED_STATES: [&str; 2] = ["Running", "CrashLoopBackOff"];

/// `RemovePodsHavingTooManyRestartsArgs`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RemovePodsHavingTooManyRestartsArgs {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<Namespaces>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelectorSpec>,
    /// Pods whose containers restarted at least this many times in total (at least 1).
    #[serde(default, deserialize_with = "null_as_default")]
    pub pod_restart_threshold: i32,
    /// Count the restarts of init containers too (and look at them for `states`).
    #[serde(default, deserialize_with = "null_as_default")]
    pub including_init_containers: bool,
    /// Only pods in one of these states: phase `Running`, or a container waiting in
    /// `CrashLoopBackOff`.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub states: Vec<String>,
}

/// `ValidateRemovePodsHavingTooManyRestartsArgs`: every problem, in descheduler's words.
pub fn validate(args: &RemovePodsHavingTooManyRestartsArgs) -> Vec<ArgError> {
    let mut errors = descheduler_common::scope::validate_scope(
        args.namespaces.as_ref(),
        args.label_selector.as_ref(),
    );
    if args.pod_restart_threshold < 1 {
        errors.push(ArgError::new(
            "podRestartThreshold",
            format!(
                "invalid PodsHavingTooManyRestarts threshold: {} (must be at least 1)",
                args.pod_restart_threshold
            ),
        ));
    }
    let unknown: Vec<String> = args
        .states
        .iter()
        .filter(|s| !ALLOWED_STATES.contains(&s.as_str()))
        .map(|s| format!("{s:?}"))
        .collect();
    if !unknown.is_empty() {
        errors.push(ArgError::new(
            "states",
            format!(
                "states must be one of [{}] (got {})",
                ALLOWED_STATES.join(" "),
                unknown.join(", ")
            ),
        ));
    }
    errors
}

/// JSON Schema (draft 2020-12) of [`RemovePodsHavingTooManyRestartsArgs`].
pub fn schema() -> serde_json::Value {
    serde_json::json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "RemovePodsHavingTooManyRestartsArgs",
        "description": "Args of descheduler's RemovePodsHavingTooManyRestarts plugin (v0.36).",
        "type": "object",
        "additionalProperties": false,
        "required": ["podRestartThreshold"],
        "properties": {
            "namespaces": namespaces_schema(),
            "labelSelector": label_selector_schema(),
            "podRestartThreshold": {
                "description": "Evict pods whose containers restarted at least this many times \
                                in total.",
                "type": "integer",
                "minimum": 1,
                "maximum": i32::MAX
            },
            "includingInitContainers": {
                "description": "Count init container restarts too.",
                "type": ["boolean", "null"],
                "default": false
            },
            "states": {
                "description": "Only pods that are Running, or have a container waiting in \
                                CrashLoopBackOff.",
                "type": ["array", "null"],
                "items": { "enum": ALLOWED_STATES }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use rebalancer_policy_sdk::testing::check_args;

    use super::*;

    fn check(json: &str) -> Result<RemovePodsHavingTooManyRestartsArgs, String> {
        check_args::<crate::RemovePodsHavingTooManyRestarts>(json)
            .map_err(|errors| errors.join("; "))
    }

    #[test]
    fn table() {
        let ok = [
            r#"{"podRestartThreshold":1}"#,
            r#"{"podRestartThreshold":100,"includingInitContainers":true}"#,
            r#"{"podRestartThreshold":5,"states":["Running","CrashLoopBackOff"]}"#,
            r#"{"podRestartThreshold":5,"states":null,"namespaces":{"exclude":["kube-system"]}}"#,
            r#"{"podRestartThreshold":5,"labelSelector":{"matchLabels":{"app":"x"}}}"#,
        ];
        for json in ok {
            if let Err(e) = check(json) {
                panic!("{json}: {e}");
            }
        }
        let bad = [
            (
                "{}",
                "podRestartThreshold: invalid PodsHavingTooManyRestarts threshold: 0",
            ),
            (
                r#"{"podRestartThreshold":-3}"#,
                "invalid PodsHavingTooManyRestarts threshold: -3",
            ),
            (
                r#"{"podRestartThreshold":1,"states":["Pending"]}"#,
                "states: states must be one of [Running CrashLoopBackOff] (got \"Pending\")",
            ),
            (
                r#"{"podRestartThreshold":1,"namespaces":{"include":["a"],"exclude":["b"]}}"#,
                "only one of Include/Exclude namespaces can be set",
            ),
            (
                r#"{"podRestartThreshold":1,"labelSelector":{"matchLabels":{"bad key!":"x"}}}"#,
                "failed to get label selectors from strategy's params",
            ),
            (
                r#"{"podRestartThreshold":3000000000}"#,
                "invalid value: integer `3000000000`",
            ),
            (
                r#"{"podRestartThreshold":1,"includeInitContainers":true}"#,
                "unknown field `includeInitContainers`",
            ),
        ];
        for (json, want) in bad {
            match check(json) {
                Ok(_) => panic!("{json}: accepted"),
                Err(e) => assert!(e.contains(want), "{json}: {e:?} lacks {want:?}"),
            }
        }
        // Every problem is reported, not only the first.
        let all = check(r#"{"podRestartThreshold":0,"states":["x"]}"#).unwrap_err();
        assert!(all.contains("threshold") && all.contains("states"), "{all}");
    }
}
