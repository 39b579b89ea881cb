//! RemoveFailedPods args: the serde shape of descheduler v0.36's `RemoveFailedPodsArgs`
//! (`removefailedpods/types.go`), its defaulting (`minPodLifetimeSeconds: 3600`),
//! `ValidateRemoveFailedPodsArgs` and the hand-written JSON Schema. Owns no plugin logic.

use rebalancer_policy_sdk::ArgError;
use rebalancer_policy_sdk::k8s::selector::LabelSelectorSpec;
use serde::{Deserialize, Deserializer, Serialize};

use descheduler_common::scope::{
    Namespaces, label_selector_schema, namespaces_schema, null_as_default,
};

/// `minPodLifetimeSeconds` when it is not set (or `null`): one hour.
pub const DEFAULT_MIN_POD_LIFETIME_SECONDS: u64 = 3600;

/// `RemoveFailedPodsArgs`. The criteria are ANDed; the entries of `reasons` and of `exitCodes`
/// are ORed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RemoveFailedPodsArgs {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<Namespaces>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelectorSpec>,
    /// Pods with an ownerRef of one of these kinds are left alone.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub exclude_owner_kinds: Vec<String>,
    /// Only pods at least this old (since `metadata.creationTimestamp`).
    #[serde(
        default = "default_min_pod_lifetime",
        deserialize_with = "null_as_default_min_pod_lifetime"
    )]
    pub min_pod_lifetime_seconds: u64,
    /// A container's waiting or terminated reason, or the pod's status reason.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub reasons: Vec<String>,
    /// Exit codes of terminated containers.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub exit_codes: Vec<i32>,
    /// `reasons` and `exitCodes` also look at init containers.
    #[serde(default, deserialize_with = "null_as_default")]
    pub including_init_containers: bool,
}

impl Default for RemoveFailedPodsArgs {
    fn default() -> Self {
        RemoveFailedPodsArgs {
            namespaces: None,
            label_selector: None,
            exclude_owner_kinds: Vec::new(),
            min_pod_lifetime_seconds: DEFAULT_MIN_POD_LIFETIME_SECONDS,
            reasons: Vec::new(),
            exit_codes: Vec::new(),
            including_init_containers: false,
        }
    }
}

fn default_min_pod_lifetime() -> u64 {
    DEFAULT_MIN_POD_LIFETIME_SECONDS
}

/// `null` is a nil pointer in Go, which the defaulter turns into 3600 like an absent field.
fn null_as_default_min_pod_lifetime<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    Ok(Option::<u64>::deserialize(d)?.unwrap_or(DEFAULT_MIN_POD_LIFETIME_SECONDS))
}

/// `ValidateRemoveFailedPodsArgs`.
pub fn validate(args: &RemoveFailedPodsArgs) -> Vec<ArgError> {
    descheduler_common::scope::validate_scope(
        args.namespaces.as_ref(),
        args.label_selector.as_ref(),
    )
}

/// JSON Schema (draft 2020-12) of [`RemoveFailedPodsArgs`].
pub fn schema() -> serde_json::Value {
    serde_json::json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "RemoveFailedPodsArgs",
        "description": "Args of descheduler's RemoveFailedPods plugin (v0.36): evict pods in \
                        phase Failed.",
        "type": "object",
        "additionalProperties": false,
        "properties": {
            "namespaces": namespaces_schema(),
            "labelSelector": label_selector_schema(),
            "excludeOwnerKinds": {
                "description": "Pods with an ownerRef of one of these kinds are never evicted.",
                "type": ["array", "null"],
                "items": { "type": "string" },
                "default": []
            },
            "minPodLifetimeSeconds": {
                "description": "Only pods at least this many seconds old (creationTimestamp).",
                "type": ["integer", "null"],
                "minimum": 0,
                "default": DEFAULT_MIN_POD_LIFETIME_SECONDS
            },
            "reasons": {
                "description": "Evict only pods with one of these reasons: a container's \
                                waiting or terminated reason, or the pod's status reason.",
                "type": ["array", "null"],
                "items": { "type": "string" },
                "default": []
            },
            "exitCodes": {
                "description": "Evict only pods with a container that terminated with one of \
                                these exit codes.",
                "type": ["array", "null"],
                "items": { "type": "integer" },
                "default": []
            },
            "includingInitContainers": {
                "description": "reasons and exitCodes also look at init containers.",
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

    fn check(json: &str) -> Result<RemoveFailedPodsArgs, String> {
        check_args::<crate::RemoveFailedPods>(json).map_err(|errors| errors.join("; "))
    }

    #[test]
    fn defaults() {
        for json in ["{}", r#"{"minPodLifetimeSeconds":null}"#] {
            let args = check(json).expect("valid");
            assert_eq!(args, RemoveFailedPodsArgs::default(), "{json}");
            assert_eq!(args.min_pod_lifetime_seconds, 3600, "{json}");
        }
        assert_eq!(
            check(r#"{"minPodLifetimeSeconds":0}"#)
                .unwrap()
                .min_pod_lifetime_seconds,
            0,
            "0 is kept: no minimum age"
        );
        assert_eq!(
            serde_json::to_value(RemoveFailedPodsArgs::default()).unwrap(),
            serde_json::json!({"minPodLifetimeSeconds": 3600, "includingInitContainers": false})
        );
    }

    #[test]
    fn table() {
        let ok = [
            r#"{"reasons":["OOMKilled","NodeAffinity"]}"#,
            r#"{"exitCodes":[1,137],"includingInitContainers":true}"#,
            r#"{"excludeOwnerKinds":["Job"],"minPodLifetimeSeconds":1500000000}"#,
            r#"{"namespaces":{"include":["default"]},"labelSelector":{"matchLabels":{"a":"b"}}}"#,
            r#"{"reasons":null,"exitCodes":null,"excludeOwnerKinds":null,"namespaces":null}"#,
        ];
        for json in ok {
            if let Err(e) = check(json) {
                panic!("{json}: {e}");
            }
        }
        let bad = [
            (
                r#"{"namespaces":{"include":["a"],"exclude":["b"]}}"#,
                "namespaces: only one of Include/Exclude namespaces can be set",
            ),
            (
                r#"{"labelSelector":{"matchExpressions":[{"key":"a","operator":"Exists","values":["x"]}]}}"#,
                "failed to get label selectors from strategy's params",
            ),
            (
                r#"{"minPodLifetimeSeconds":-5}"#,
                "invalid value: integer `-5`",
            ),
            (
                r#"{"minPodLifetimeSeconds":1.5}"#,
                "invalid type: floating point",
            ),
            (r#"{"reason":["OOMKilled"]}"#, "unknown field `reason`"),
            (r#"{"exitCodes":["1"]}"#, "invalid type: string"),
        ];
        for (json, want) in bad {
            match check(json) {
                Ok(_) => panic!("{json}: accepted"),
                Err(e) => assert!(e.contains(want), "{json}: {e:?} lacks {want:?}"),
            }
        }
    }
}
