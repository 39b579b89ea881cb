//! HighNodeUtilization args: the serde shape of descheduler's `HighNodeUtilizationArgs` (v0.36),
//! its validation (`ValidateHighNodeUtilizationArgs`) and the hand-written JSON Schema. Owns no
//! plugin logic.

use descheduler_common::utilization::{evictable_namespaces_schema, validate_evictable_namespaces};
use std::collections::BTreeMap;

use rebalancer_policy_sdk::ArgError;
pub use rebalancer_policy_sdk::args::Namespaces;
use rebalancer_policy_sdk::args::null_as_default;
use serde::{Deserialize, Serialize};

/// The only eviction mode descheduler knows: evict only pods that request at least one of the
/// resources listed in `thresholds`.
pub const ONLY_THRESHOLDING_RESOURCES: &str = "OnlyThresholdingResources";

/// Resource name → percentage (`api.ResourceThresholds`).
pub type Thresholds = BTreeMap<String, f64>;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HighNodeUtilizationArgs {
    /// A node is underutilized when every listed resource is at or below its threshold.
    #[serde(default, deserialize_with = "null_as_default")]
    pub thresholds: Thresholds,
    /// Do nothing unless more than this many nodes are underutilized.
    #[serde(default, deserialize_with = "null_as_default")]
    pub number_of_nodes: i64,
    /// `OnlyThresholdingResources` restricts the candidates to pods requesting a listed resource.
    /// Kept as written so validation can name an unknown mode.
    #[serde(default, deserialize_with = "null_as_default")]
    pub eviction_modes: Vec<String>,
    /// Namespaces whose pods still count towards usage but are never evicted.
    #[serde(default)]
    pub evictable_namespaces: Option<Namespaces>,
    /// Rebalancer extension, off by default: a pod may go to a destination when it tolerates
    /// each of its NoSchedule/NoExecute taints (descheduler compares counts and requires
    /// PreferNoSchedule taints to be tolerated too). Not serialized while off, so the args stay a
    /// valid descheduler document.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "descheduler_common::args::is_false"
    )]
    pub per_taint_tolerations: bool,
}

impl HighNodeUtilizationArgs {
    /// `evictionModes` contains `OnlyThresholdingResources`.
    pub fn only_thresholding_resources(&self) -> bool {
        self.eviction_modes
            .iter()
            .any(|m| m == ONLY_THRESHOLDING_RESOURCES)
    }
}

/// `ValidateHighNodeUtilizationArgs`; descheduler stops at its first error, we list them all.
/// `perTaintTolerations` is a plain boolean and combines with every other arg.
pub fn validate(args: &HighNodeUtilizationArgs) -> Vec<ArgError> {
    let mut errors = Vec::new();
    errors.extend(validate_evictable_namespaces(
        args.evictable_namespaces.as_ref(),
    ));
    if args.thresholds.is_empty() {
        errors.push(ArgError::new(
            "thresholds",
            "no resource threshold is configured",
        ));
    }
    for (name, percent) in &args.thresholds {
        if !(0.0..=100.0).contains(percent) {
            errors.push(ArgError::new(
                format!("thresholds.{name}"),
                format!("{name} threshold not in [0, 100] range"),
            ));
        }
    }
    for (i, mode) in args.eviction_modes.iter().enumerate() {
        if mode != ONLY_THRESHOLDING_RESOURCES {
            errors.push(ArgError::new(
                format!("evictionModes[{i}]"),
                format!("invalid eviction mode {mode} (supported: {ONLY_THRESHOLDING_RESOURCES})"),
            ));
        }
    }
    errors
}

/// JSON Schema (draft 2020-12) of [`HighNodeUtilizationArgs`].
pub fn schema() -> serde_json::Value {
    serde_json::json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "HighNodeUtilizationArgs",
        "description": "Args of descheduler's HighNodeUtilization plugin (v0.36). Usage is the sum \
                        of pod requests; percentages are of node allocatable. Pair it with the \
                        scheduler's MostAllocated scoring so evicted pods are packed onto the \
                        busier nodes.",
        "type": "object",
        "additionalProperties": false,
        "required": ["thresholds"],
        "properties": {
            "thresholds": {
                "description": "Resource name (cpu, memory, pods, extended resources) → percent. \
                                A node (cordoned or not) with every listed resource at or below \
                                its threshold is underutilized and gets drained.",
                "type": "object",
                "minProperties": 1,
                "additionalProperties": { "type": "number", "minimum": 0, "maximum": 100 },
                "examples": [{ "cpu": 20, "memory": 20 }]
            },
            "numberOfNodes": {
                "description": "Act only when more than this many nodes are underutilized.",
                "type": ["integer", "null"],
                "default": 0
            },
            "evictionModes": {
                "description": "OnlyThresholdingResources: only pods that request at least one \
                                of the threshold resources are evicted.",
                "type": ["array", "null"],
                "items": { "enum": [ONLY_THRESHOLDING_RESOURCES] },
                "default": []
            },
            "evictableNamespaces": evictable_namespaces_schema(),
            "perTaintTolerations": {
                "description": "Rebalancer extension, off by default. descheduler lets a pod go \
                                only to a destination whose taints (every effect, \
                                PreferNoSchedule included) it tolerates AND that has no more \
                                taints than the pod has tolerations — so one wildcard toleration \
                                fails on a node with two taints. When true, the pod must tolerate \
                                each NoSchedule and NoExecute taint of some destination by proper \
                                toleration matching; PreferNoSchedule does not repel.",
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

    fn check(json: &str) -> Result<HighNodeUtilizationArgs, Vec<String>> {
        check_args::<crate::HighNodeUtilization>(json)
    }

    #[test]
    fn validation_table() {
        // (name, args, expected error substrings; empty: valid)
        let cases: &[(&str, &str, &[&str])] = &[
            ("cpu only", r#"{"thresholds":{"cpu":20}}"#, &[]),
            (
                "all fields",
                r#"{"thresholds":{"cpu":20,"memory":30,"pods":10},"numberOfNodes":3,
                    "evictionModes":["OnlyThresholdingResources"],
                    "evictableNamespaces":{"exclude":["kube-system"]}}"#,
                &[],
            ),
            (
                "boundaries",
                r#"{"thresholds":{"cpu":0,"memory":100}}"#,
                &[],
            ),
            (
                "nulls decode like Go",
                r#"{"thresholds":{"cpu":20},"numberOfNodes":null,"evictionModes":null,
                    "evictableNamespaces":{"exclude":null}}"#,
                &[],
            ),
            (
                "perTaintTolerations",
                r#"{"thresholds":{"cpu":20},"perTaintTolerations":true}"#,
                &[],
            ),
            (
                "perTaintTolerations null",
                r#"{"thresholds":{"cpu":20},"perTaintTolerations":null}"#,
                &[],
            ),
            (
                "perTaintTolerations not a boolean",
                r#"{"thresholds":{"cpu":20},"perTaintTolerations":"yes"}"#,
                &["invalid type: string \"yes\", expected a boolean"],
            ),
            (
                "missing thresholds",
                "{}",
                &["thresholds: no resource threshold is configured"],
            ),
            (
                "empty thresholds",
                r#"{"thresholds":{}}"#,
                &["thresholds: no resource threshold is configured"],
            ),
            (
                "out of range",
                r#"{"thresholds":{"cpu":-1,"memory":100.5}}"#,
                &[
                    "thresholds.cpu: cpu threshold not in [0, 100] range",
                    "thresholds.memory: memory threshold not in [0, 100] range",
                ],
            ),
            (
                "include rejected",
                r#"{"thresholds":{"cpu":20},"evictableNamespaces":{"include":["a"]}}"#,
                &[
                    "evictableNamespaces.include: only Exclude namespaces can be set, inclusion is not supported",
                ],
            ),
            (
                "unknown eviction mode",
                r#"{"thresholds":{"cpu":20},"evictionModes":["OnlyThresholdingResources","Everything"]}"#,
                &["evictionModes[1]: invalid eviction mode Everything"],
            ),
            (
                "unknown field",
                r#"{"thresholds":{"cpu":20},"targetThresholds":{"cpu":50}}"#,
                &["unknown field `targetThresholds`"],
            ),
            (
                "unknown namespaces field",
                r#"{"thresholds":{"cpu":20},"evictableNamespaces":{"excludes":["a"]}}"#,
                &["unknown field `excludes`"],
            ),
            (
                "wrong type",
                r#"{"thresholds":{"cpu":"20%"}}"#,
                &["invalid type"],
            ),
        ];
        for (name, json, want) in cases {
            match (check(json), want.is_empty()) {
                (Ok(_), true) => {}
                (Ok(_), false) => panic!("{name}: accepted, want {want:?}"),
                (Err(errors), true) => panic!("{name}: unexpected errors {errors:?}"),
                (Err(errors), false) => {
                    for w in *want {
                        assert!(
                            errors.iter().any(|e| e.contains(w)),
                            "{name}: no error containing {w:?} in {errors:?}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn defaults_and_modes() {
        let args = check(r#"{"thresholds":{"cpu":20}}"#).expect("valid");
        assert_eq!(args.number_of_nodes, 0);
        assert!(!args.only_thresholding_resources());
        let args =
            check(r#"{"thresholds":{"cpu":20},"evictionModes":["OnlyThresholdingResources"]}"#)
                .expect("valid");
        assert!(args.only_thresholding_resources());
    }

    #[test]
    fn per_taint_tolerations_is_off_and_left_out_by_default() {
        let args = check(r#"{"thresholds":{"cpu":20}}"#).expect("valid");
        assert!(!args.per_taint_tolerations);
        let json = serde_json::to_value(&args).expect("serializes");
        assert!(json.get("perTaintTolerations").is_none(), "{json}");
        let on = check(r#"{"thresholds":{"cpu":20},"perTaintTolerations":true}"#).expect("valid");
        assert_eq!(
            serde_json::to_value(&on).expect("serializes")["perTaintTolerations"],
            true
        );
        let schema = schema();
        let option = &schema["properties"]["perTaintTolerations"];
        assert_eq!(option["default"], false);
        assert!(
            option["description"]
                .as_str()
                .is_some_and(|d| d.contains("Rebalancer extension"))
        );
    }
}
