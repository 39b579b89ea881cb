//! RemoveDuplicates args: the serde shape of descheduler's `RemoveDuplicatesArgs`, its validation
//! and the hand-written JSON Schema. Owns no plugin logic.

use descheduler_common::scope::{namespaces_schema, validate_scope};
use rebalancer_policy_sdk::ArgError;
pub use rebalancer_policy_sdk::args::Namespaces;
use rebalancer_policy_sdk::args::null_as_default;
use serde::{Deserialize, Serialize};

/// `RemoveDuplicatesArgs` of descheduler v0.36 (`removeduplicates/types.go`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RemoveDuplicatesArgs {
    /// Pods with an ownerRef of one of these kinds are left alone (e.g. `ReplicaSet`).
    #[serde(default, deserialize_with = "null_as_default")]
    pub exclude_owner_kinds: Vec<String>,
    /// Namespaces whose pods are considered: `include` or `exclude`, not both.
    #[serde(default)]
    pub namespaces: Option<Namespaces>,
    /// Rebalancer extension fixing descheduler #1237, off by default: propose a duplicate only
    /// when another node of its feasible target set has room for its requests now (nodeFit's
    /// resource check). Not serialized while off, so the args stay a valid descheduler document.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "descheduler_common::args::is_false"
    )]
    pub target_resource_fit: bool,
}

/// `ValidateRemoveDuplicatesArgs`: at most one of include/exclude may be set.
/// `targetResourceFit` is a plain boolean and combines with every other arg.
pub fn validate(args: &RemoveDuplicatesArgs) -> Vec<ArgError> {
    validate_scope(args.namespaces.as_ref(), None)
}

/// JSON Schema (draft 2020-12) of [`RemoveDuplicatesArgs`].
pub fn schema() -> serde_json::Value {
    serde_json::json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "RemoveDuplicatesArgs",
        "description": "Args of descheduler's RemoveDuplicates plugin (v0.36).",
        "type": "object",
        "additionalProperties": false,
        "properties": {
            "excludeOwnerKinds": {
                "description": "Pods owned (any ownerRef) by one of these kinds are never evicted, \
                                e.g. [\"ReplicaSet\"] to leave Deployments alone.",
                "type": ["array", "null"],
                "items": { "type": "string" },
                "default": []
            },
            "namespaces": namespaces_schema(),
            "targetResourceFit": {
                "description": "Rebalancer extension fixing descheduler #1237, off by default \
                                (descheduler checks taints, nodeSelector and required node \
                                affinity of the target nodes, not resources). When true, a \
                                duplicate is proposed only if some other node of its feasible \
                                target set has room for it now: for every resource the pod \
                                requests, allocatable minus the requests of the node's \
                                non-terminal pods (pods proposed earlier in the run still count) \
                                must cover the request, and a pod slot must be free — the \
                                resource part of descheduler's nodeFit. Duplicates without such \
                                a node are kept.",
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

    fn parse(json: &str) -> Result<RemoveDuplicatesArgs, String> {
        check_args::<crate::RemoveDuplicates>(json).map_err(|errors| errors.join("; "))
    }

    #[test]
    fn table() {
        struct Case {
            name: &'static str,
            json: &'static str,
            error: Option<&'static str>,
        }
        let cases = [
            Case {
                name: "empty",
                json: "{}",
                error: None,
            },
            Case {
                name: "exclude kinds",
                json: r#"{"excludeOwnerKinds":["ReplicaSet"]}"#,
                error: None,
            },
            Case {
                name: "nulls",
                json: r#"{"excludeOwnerKinds":null,"namespaces":null}"#,
                error: None,
            },
            Case {
                name: "include only",
                json: r#"{"namespaces":{"include":["a"],"exclude":[]}}"#,
                error: None,
            },
            Case {
                name: "targetResourceFit on",
                json: r#"{"targetResourceFit":true,"excludeOwnerKinds":["Job"]}"#,
                error: None,
            },
            Case {
                name: "targetResourceFit null",
                json: r#"{"targetResourceFit":null}"#,
                error: None,
            },
            Case {
                name: "targetResourceFit not a boolean",
                json: r#"{"targetResourceFit":"yes"}"#,
                error: Some("invalid type: string \"yes\", expected a boolean"),
            },
            Case {
                name: "both set",
                json: r#"{"namespaces":{"include":["a"],"exclude":["b"]}}"#,
                error: Some("namespaces: only one of Include/Exclude namespaces can be set"),
            },
            Case {
                name: "unknown field",
                json: r#"{"excludeOwnerKind":["ReplicaSet"]}"#,
                error: Some("unknown field `excludeOwnerKind`"),
            },
            Case {
                name: "unknown namespaces field",
                json: r#"{"namespaces":{"includes":["a"]}}"#,
                error: Some("unknown field `includes`"),
            },
        ];
        for case in cases {
            match (parse(case.json), case.error) {
                (Ok(_), None) => {}
                (Err(e), Some(want)) => {
                    assert!(
                        e.contains(want),
                        "{}: error {e:?} lacks {want:?}",
                        case.name
                    )
                }
                (got, want) => panic!("{}: got {got:?}, want error {want:?}", case.name),
            }
        }
    }

    #[test]
    fn target_resource_fit_is_off_and_left_out_by_default() {
        let off = serde_json::to_value(RemoveDuplicatesArgs::default()).expect("serializes");
        assert_eq!(
            off,
            serde_json::json!({ "excludeOwnerKinds": [], "namespaces": null })
        );
        let on = parse(r#"{"targetResourceFit":true}"#).expect("valid");
        assert!(on.target_resource_fit);
        assert_eq!(
            serde_json::to_value(&on).expect("serializes")["targetResourceFit"],
            true
        );
        let schema = schema();
        let option = &schema["properties"]["targetResourceFit"];
        assert_eq!(option["default"], false);
        assert!(
            option["description"]
                .as_str()
                .is_some_and(|d| d.contains("Rebalancer extension") && d.contains("#1237"))
        );
    }
}
