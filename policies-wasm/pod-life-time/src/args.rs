//! PodLifeTime args: the serde shape of descheduler v0.36's `PodLifeTimeArgs`
//! (`podlifetime/types.go`), `ValidatePodLifeTimeArgs` and the hand-written JSON Schema. Owns no
//! plugin logic.

use rebalancer_policy_sdk::ArgError;
use rebalancer_policy_sdk::k8s::selector::LabelSelectorSpec;
use serde::{Deserialize, Serialize};

use descheduler_common::scope::{
    Namespaces, label_selector_schema, namespaces_schema, null_as_default,
};

/// The values `states` accepts (`podLifeTimeAllowedStates`), by category. Error messages list
/// them sorted, as descheduler does.
pub const ALLOWED_STATES: [&str; 24] = [
    // Pod phases.
    "Running",
    "Pending",
    "Succeeded",
    "Failed",
    "Unknown",
    // Pod status reasons.
    "NodeAffinity",
    "NodeLost",
    "Shutdown",
    "UnexpectedAdmissionError",
    // Container waiting reasons.
    "PodInitializing",
    "ContainerCreating",
    "ImagePullBackOff",
    "CrashLoopBackOff",
    "CreateContainerConfigError",
    "ErrImagePull",
    "CreateContainerError",
    "InvalidImageName",
    // Container terminated reasons.
    "OOMKilled",
    "Error",
    "Completed",
    "DeadlineExceeded",
    "Evicted",
    "ContainerCannotRun",
    "StartError",
];

/// `PodLifeTimeArgs`. Filter categories (age, states, conditions, exit codes, owner kinds) are
/// ANDed; the entries of one category are ORed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodLifeTimeArgs {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<Namespaces>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelectorSpec>,
    /// Keep only pods with an ownerRef of an included kind, or drop pods with one of an excluded
    /// kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_kinds: Option<OwnerKinds>,
    /// Pods older than this (since `metadata.creationTimestamp`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_pod_life_time_seconds: Option<u64>,
    /// Pod phase, pod `status.reason`, or a container's waiting or terminated reason.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub states: Vec<String>,
    /// `status.conditions` filters.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub conditions: Vec<PodConditionFilter>,
    /// Exit codes of terminated containers.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub exit_codes: Vec<i32>,
    /// `states` and `exitCodes` also look at init containers.
    #[serde(default, deserialize_with = "null_as_default")]
    pub including_init_containers: bool,
    /// `states` also looks at ephemeral containers.
    #[serde(default, deserialize_with = "null_as_default")]
    pub including_ephemeral_containers: bool,
}

/// `OwnerKinds`: at most one of include/exclude.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OwnerKinds {
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub include: Vec<String>,
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub exclude: Vec<String>,
}

/// `PodConditionFilter`: the set fields must all match one condition of the pod.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodConditionFilter {
    #[serde(
        rename = "type",
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub type_: String,
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub status: String,
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub reason: String,
    /// The matching condition last changed at least this long ago.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_time_since_last_transition_seconds: Option<u64>,
}

/// `ValidatePodLifeTimeArgs`: every problem, in descheduler's order and words.
pub fn validate(args: &PodLifeTimeArgs) -> Vec<ArgError> {
    let mut errors = descheduler_common::scope::validate_scope(
        args.namespaces.as_ref(),
        args.label_selector.as_ref(),
    );
    if let Some(kinds) = &args.owner_kinds
        && !kinds.include.is_empty()
        && !kinds.exclude.is_empty()
    {
        errors.push(ArgError::new(
            "ownerKinds",
            "only one of Include/Exclude ownerKinds can be set",
        ));
    }
    let unknown: Vec<&str> = args
        .states
        .iter()
        .map(String::as_str)
        .filter(|s| !ALLOWED_STATES.contains(s))
        .collect();
    if !unknown.is_empty() {
        let mut allowed = ALLOWED_STATES;
        allowed.sort_unstable();
        errors.push(ArgError::new(
            "states",
            format!(
                "states must be one of [{}] (got {})",
                allowed.join(" "),
                unknown
                    .iter()
                    .map(|s| format!("{s:?}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
    for (i, c) in args.conditions.iter().enumerate() {
        if c.type_.is_empty()
            && c.status.is_empty()
            && c.reason.is_empty()
            && c.min_time_since_last_transition_seconds.is_none()
        {
            errors.push(ArgError::new(
                format!("conditions[{i}]"),
                format!(
                    "conditions[{i}]: at least one of type, status, reason, or \
                     minTimeSinceLastTransitionSeconds must be set"
                ),
            ));
        }
    }
    let has_filter = args.max_pod_life_time_seconds.is_some()
        || !args.states.is_empty()
        || !args.conditions.is_empty()
        || !args.exit_codes.is_empty();
    if !has_filter {
        errors.push(ArgError::new(
            "",
            "at least one filtering criterion must be specified (maxPodLifeTimeSeconds, states, \
             conditions, or exitCodes)",
        ));
    }
    errors
}

/// JSON Schema (draft 2020-12) of [`PodLifeTimeArgs`].
pub fn schema() -> serde_json::Value {
    let kinds = serde_json::json!({ "type": ["array", "null"], "items": { "type": "string" } });
    let mut states = ALLOWED_STATES;
    states.sort_unstable();
    serde_json::json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "PodLifeTimeArgs",
        "description": "Args of descheduler's PodLifeTime plugin (v0.36). At least one of \
                        maxPodLifeTimeSeconds, states, conditions or exitCodes is required; \
                        categories are ANDed, entries of a category ORed.",
        "type": "object",
        "additionalProperties": false,
        "anyOf": [
            { "required": ["maxPodLifeTimeSeconds"] },
            { "required": ["states"] },
            { "required": ["conditions"] },
            { "required": ["exitCodes"] }
        ],
        "properties": {
            "namespaces": namespaces_schema(),
            "labelSelector": label_selector_schema(),
            "ownerKinds": {
                "description": "Keep only pods owned by one of the include kinds, or drop pods \
                                owned by one of the exclude kinds (not both).",
                "type": ["object", "null"],
                "additionalProperties": false,
                "properties": { "include": kinds, "exclude": kinds }
            },
            "maxPodLifeTimeSeconds": {
                "description": "Evict pods older than this many seconds (creationTimestamp).",
                "type": ["integer", "null"],
                "minimum": 0
            },
            "states": {
                "description": "Pod phase, pod status reason, or container waiting/terminated \
                                reason.",
                "type": ["array", "null"],
                "items": { "enum": states }
            },
            "conditions": {
                "description": "Pod conditions; a filter matches a condition when all its set \
                                fields match.",
                "type": ["array", "null"],
                "items": {
                    "type": "object",
                    "additionalProperties": false,
                    "minProperties": 1,
                    "properties": {
                        "type": { "type": "string" },
                        "status": { "type": "string" },
                        "reason": { "type": "string" },
                        "minTimeSinceLastTransitionSeconds": { "type": "integer", "minimum": 0 }
                    }
                }
            },
            "exitCodes": {
                "description": "Exit codes of terminated containers.",
                "type": ["array", "null"],
                "items": { "type": "integer" }
            },
            "includingInitContainers": {
                "description": "states and exitCodes also look at init containers.",
                "type": ["boolean", "null"],
                "default": false
            },
            "includingEphemeralContainers": {
                "description": "states also looks at ephemeral containers.",
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

    fn check(json: &str) -> Result<PodLifeTimeArgs, String> {
        check_args::<crate::PodLifeTime>(json).map_err(|errors| errors.join("; "))
    }

    #[test]
    fn table() {
        let ok = [
            ("max lifetime", r#"{"maxPodLifeTimeSeconds":600}"#),
            ("zero lifetime", r#"{"maxPodLifeTimeSeconds":0}"#),
            (
                "states only",
                r#"{"states":["Pending","CrashLoopBackOff","OOMKilled"]}"#,
            ),
            (
                "conditions only",
                r#"{"conditions":[{"type":"Ready","status":"False"}]}"#,
            ),
            (
                "condition with only a transition age",
                r#"{"conditions":[{"minTimeSinceLastTransitionSeconds":60}]}"#,
            ),
            ("exit codes only", r#"{"exitCodes":[1,137]}"#),
            (
                "owner kinds include",
                r#"{"maxPodLifeTimeSeconds":1,"ownerKinds":{"include":["Job"]}}"#,
            ),
            (
                "everything",
                r#"{"maxPodLifeTimeSeconds":1,"states":["Running"],"exitCodes":[1],
                    "conditions":[{"reason":"x"}],"namespaces":{"exclude":["kube-system"]},
                    "labelSelector":{"matchLabels":{"app":"a"}},"ownerKinds":{"exclude":["Job"]},
                    "includingInitContainers":true,"includingEphemeralContainers":true}"#,
            ),
            (
                "nulls decode like Go",
                r#"{"maxPodLifeTimeSeconds":5,"states":null,"conditions":null,"exitCodes":null,
                    "includingInitContainers":null,"namespaces":null,"labelSelector":null}"#,
            ),
        ];
        for (name, json) in ok {
            if let Err(e) = check(json) {
                panic!("{name}: {e}");
            }
        }
        let bad = [
            (
                "no criterion",
                "{}",
                "at least one filtering criterion must be specified",
            ),
            (
                "empty lists are no criterion",
                r#"{"states":[],"conditions":[],"exitCodes":[]}"#,
                "at least one filtering criterion must be specified",
            ),
            (
                "namespaces both",
                r#"{"maxPodLifeTimeSeconds":1,"namespaces":{"include":["a"],"exclude":["b"]}}"#,
                "namespaces: only one of Include/Exclude namespaces can be set",
            ),
            (
                "owner kinds both",
                r#"{"maxPodLifeTimeSeconds":1,"ownerKinds":{"include":["a"],"exclude":["b"]}}"#,
                "ownerKinds: only one of Include/Exclude ownerKinds can be set",
            ),
            (
                "unknown state",
                r#"{"states":["Running","Sleeping"]}"#,
                "states: states must be one of [Completed ContainerCannotRun",
            ),
            (
                "empty condition",
                r#"{"conditions":[{"type":"Ready"},{}]}"#,
                "conditions[1]: at least one of type, status, reason, or \
                 minTimeSinceLastTransitionSeconds must be set",
            ),
            (
                "bad label selector",
                r#"{"maxPodLifeTimeSeconds":1,"labelSelector":{"matchExpressions":[{"key":"a","operator":"Gt","values":["1"]}]}}"#,
                "failed to get label selectors from strategy's params",
            ),
            (
                "negative lifetime",
                r#"{"maxPodLifeTimeSeconds":-1}"#,
                "invalid value: integer `-1`",
            ),
            (
                "unknown field",
                r#"{"maxPodLifeTimeSecond":1}"#,
                "unknown field `maxPodLifeTimeSecond`",
            ),
            (
                "unknown condition field",
                r#"{"conditions":[{"type":"Ready","since":1}]}"#,
                "unknown field `since`",
            ),
            (
                "podStatusPhases is gone (v1alpha1)",
                r#"{"podStatusPhases":["Pending"]}"#,
                "unknown field `podStatusPhases`",
            ),
        ];
        for (name, json, want) in bad {
            match check(json) {
                Ok(_) => panic!("{name}: accepted"),
                Err(e) => assert!(e.contains(want), "{name}: {e:?} lacks {want:?}"),
            }
        }
    }

    #[test]
    fn allowed_states_are_descheduler_s() {
        let mut sorted = ALLOWED_STATES;
        sorted.sort_unstable();
        let mut dedup = sorted.to_vec();
        dedup.dedup();
        assert_eq!(dedup.len(), 24, "no duplicates");
        for s in [
            "Running",
            "NodeLost",
            "ImagePullBackOff",
            "OOMKilled",
            "StartError",
        ] {
            assert!(ALLOWED_STATES.contains(&s), "{s}");
        }
    }

    #[test]
    fn defaults_serialize_minimal() {
        assert_eq!(
            serde_json::to_value(PodLifeTimeArgs::default()).unwrap(),
            serde_json::json!({"includingInitContainers": false, "includingEphemeralContainers": false})
        );
    }
}
