//! RemovePodsViolatingTopologySpreadConstraint args: the serde shape of descheduler's
//! `RemovePodsViolatingTopologySpreadConstraintArgs` (v0.36), its defaults, its validation and the
//! hand-written JSON Schema. Owns no plugin logic.

use descheduler_common::scope::{
    described, label_selector_schema, namespaces_schema, validate_scope,
};
use rebalancer_policy_sdk::ArgError;
pub use rebalancer_policy_sdk::args::Namespaces;
use rebalancer_policy_sdk::k8s::selector::LabelSelectorSpec;
use serde::{Deserialize, Deserializer, Serialize};

pub const DO_NOT_SCHEDULE: &str = "DoNotSchedule";
pub const SCHEDULE_ANYWAY: &str = "ScheduleAnyway";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RemovePodsViolatingTopologySpreadConstraintArgs {
    /// Namespaces whose pods are considered: `include` or `exclude`, not both.
    #[serde(default)]
    pub namespaces: Option<Namespaces>,
    /// Only pods matching it are counted and evicted.
    #[serde(default)]
    pub label_selector: Option<LabelSelectorSpec>,
    /// The `whenUnsatisfiable` values of the constraints to balance. Absent (or null):
    /// `[DoNotSchedule]`. Kept as written so validation can name an unknown value.
    #[serde(
        default = "default_constraints",
        deserialize_with = "null_as_default_constraints"
    )]
    pub constraints: Vec<String>,
    /// A pod chosen to move is evicted only if it fits some node of a below-average domain.
    #[serde(default = "default_true", deserialize_with = "null_as_true")]
    pub topology_balance_node_fit: bool,
    /// Rebalancer extension, off by default. Inside a domain, descheduler v0.36 sorts the pods
    /// by ascending priority and takes them from the back, so it moves the *highest*-priority
    /// pods first, against its own comment ("lowest priority pods are considered first for
    /// eviction"). When true, the lowest-priority pods (unset priority lowest of all) move first.
    #[serde(default, skip_serializing_if = "descheduler_common::args::is_false")]
    pub evict_lowest_priority_first: bool,
}

impl Default for RemovePodsViolatingTopologySpreadConstraintArgs {
    fn default() -> Self {
        RemovePodsViolatingTopologySpreadConstraintArgs {
            namespaces: None,
            label_selector: None,
            constraints: default_constraints(),
            topology_balance_node_fit: true,
            evict_lowest_priority_first: false,
        }
    }
}

fn default_constraints() -> Vec<String> {
    vec![DO_NOT_SCHEDULE.to_owned()]
}

fn default_true() -> bool {
    true
}

/// descheduler's defaulting: a nil `constraints` becomes `[DoNotSchedule]` (an explicit empty
/// list stays empty and balances nothing).
fn null_as_default_constraints<'de, D>(deserializer: D) -> Result<Vec<String>, D::Error>
where
    D: Deserializer<'de>,
{
    Ok(Option::<Vec<String>>::deserialize(deserializer)?.unwrap_or_else(default_constraints))
}

/// `topologyBalanceNodeFit` is a `*bool` defaulted to true: `null` means true.
fn null_as_true<'de, D>(deserializer: D) -> Result<bool, D::Error>
where
    D: Deserializer<'de>,
{
    Ok(Option::<bool>::deserialize(deserializer)?.unwrap_or(true))
}

impl RemovePodsViolatingTopologySpreadConstraintArgs {
    /// `DoNotSchedule` constraints are balanced.
    pub fn hard(&self) -> bool {
        self.constraints.iter().any(|c| c == DO_NOT_SCHEDULE)
    }

    /// `ScheduleAnyway` constraints are balanced.
    pub fn soft(&self) -> bool {
        self.constraints.iter().any(|c| c == SCHEDULE_ANYWAY)
    }
}

/// `ValidateRemovePodsViolatingTopologySpreadConstraintArgs`; descheduler stops at its first
/// error, we list them all.
pub fn validate(args: &RemovePodsViolatingTopologySpreadConstraintArgs) -> Vec<ArgError> {
    let mut errors = validate_scope(args.namespaces.as_ref(), args.label_selector.as_ref());
    for (i, c) in args.constraints.iter().enumerate() {
        if c != DO_NOT_SCHEDULE && c != SCHEDULE_ANYWAY {
            errors.push(ArgError::new(
                format!("constraints[{i}]"),
                format!("constraint {c} is not one of [{DO_NOT_SCHEDULE} {SCHEDULE_ANYWAY}]"),
            ));
        }
    }
    errors
}

/// JSON Schema (draft 2020-12) of [`RemovePodsViolatingTopologySpreadConstraintArgs`].
pub fn schema() -> serde_json::Value {
    serde_json::json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "RemovePodsViolatingTopologySpreadConstraintArgs",
        "description": "Args of descheduler's RemovePodsViolatingTopologySpreadConstraint plugin \
                        (v0.36).",
        "type": "object",
        "additionalProperties": false,
        "properties": {
            "constraints": {
                "description": "whenUnsatisfiable values of the pods' constraints to balance. \
                                Absent or null: [DoNotSchedule]; an explicit empty list balances \
                                nothing.",
                "type": ["array", "null"],
                "items": { "enum": [DO_NOT_SCHEDULE, SCHEDULE_ANYWAY] },
                "default": [DO_NOT_SCHEDULE]
            },
            "evictLowestPriorityFirst": {
                "description": "Rebalancer extension, off by default. descheduler v0.36 moves the \
                                highest-priority pods of a domain first (it sorts by ascending \
                                priority and takes from the back, although its comment says the \
                                lowest go first). When true, the lowest-priority pods (unset \
                                priority lowest of all) move first. Pods with a nodeSelector or \
                                node affinity still go last.",
                "type": "boolean",
                "default": false
            },
            "topologyBalanceNodeFit": {
                "description": "Evict a pod chosen to move only if it passes nodeFit on some node \
                                of a below-average domain (it still counts as moved otherwise).",
                "type": ["boolean", "null"],
                "default": true
            },
            "namespaces": namespaces_schema(),
            "labelSelector": described(
                label_selector_schema(),
                "metav1.LabelSelector. Only matching pods are counted in the \
                                domains and evicted (the selector restricts counting too, as in \
                                descheduler's code).",
            )
        }
    })
}

#[cfg(test)]
mod tests {
    use rebalancer_policy_sdk::testing::check_args;

    use super::*;

    fn parse(json: &str) -> Result<RemovePodsViolatingTopologySpreadConstraintArgs, String> {
        check_args::<crate::RemovePodsViolatingTopologySpreadConstraint>(json)
            .map_err(|errors| errors.join("; "))
    }

    #[test]
    fn table() {
        // (name, args, expected error substring; None: valid)
        let cases: &[(&str, &str, Option<&str>)] = &[
            ("empty", "{}", None),
            (
                "nulls",
                r#"{"namespaces":null,"labelSelector":null,"constraints":null,"topologyBalanceNodeFit":null}"#,
                None,
            ),
            (
                "both constraints",
                r#"{"constraints":["DoNotSchedule","ScheduleAnyway"],"topologyBalanceNodeFit":false}"#,
                None,
            ),
            (
                "exclude",
                r#"{"namespaces":{"exclude":["kube-system"]},"labelSelector":{"matchLabels":{"a":"b"}}}"#,
                None,
            ),
            (
                "unknown constraint",
                r#"{"constraints":["DoNotSchedule","Never"]}"#,
                Some(
                    "constraints[1]: constraint Never is not one of [DoNotSchedule ScheduleAnyway]",
                ),
            ),
            (
                "both namespaces",
                r#"{"namespaces":{"include":["a"],"exclude":["b"]}}"#,
                Some("namespaces: only one of Include/Exclude namespaces can be set"),
            ),
            (
                "bad selector",
                r#"{"labelSelector":{"matchExpressions":[{"key":"a","operator":"Gt","values":["1"]}]}}"#,
                Some(
                    "failed to get label selectors from strategy's params: unsupported value \"Gt\"",
                ),
            ),
            (
                "old includeSoftConstraints",
                r#"{"includeSoftConstraints":true}"#,
                Some("unknown field `includeSoftConstraints`"),
            ),
            (
                "wrong type",
                r#"{"topologyBalanceNodeFit":"yes"}"#,
                Some("invalid type"),
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
    fn defaults() {
        let args = parse("{}").expect("valid");
        assert_eq!(
            args,
            RemovePodsViolatingTopologySpreadConstraintArgs::default()
        );
        assert_eq!(args.constraints, [DO_NOT_SCHEDULE]);
        assert!(args.topology_balance_node_fit);
        assert!(args.hard() && !args.soft());
        let args = parse(r#"{"constraints":null,"topologyBalanceNodeFit":null}"#).expect("valid");
        assert_eq!(args.constraints, [DO_NOT_SCHEDULE]);
        assert!(args.topology_balance_node_fit);
        let args = parse(r#"{"constraints":[]}"#).expect("valid");
        assert!(!args.hard() && !args.soft());
        let args = parse(r#"{"constraints":["ScheduleAnyway"]}"#).expect("valid");
        assert!(!args.hard() && args.soft());
        assert_eq!(
            serde_json::to_value(RemovePodsViolatingTopologySpreadConstraintArgs::default())
                .expect("serializes"),
            serde_json::json!({
                "namespaces": null,
                "labelSelector": null,
                "constraints": ["DoNotSchedule"],
                "topologyBalanceNodeFit": true
            }),
            "the extension is left out while off: a valid descheduler document"
        );
        let on = parse(r#"{"evictLowestPriorityFirst":true}"#).expect("valid");
        assert!(on.evict_lowest_priority_first);
        assert_eq!(
            serde_json::to_value(&on).expect("serializes")["evictLowestPriorityFirst"],
            true
        );
        assert_eq!(
            schema()["properties"]["evictLowestPriorityFirst"]["default"],
            false
        );
    }
}
