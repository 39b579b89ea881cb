//! CpuOrchestration args: the serde shape, [`validate`] (every problem, located) and the JSON
//! Schema. Owns no check logic.

use rebalancer_policy_sdk::ArgError;
use rebalancer_policy_sdk::args::{Namespaces, null_as_default};
use rebalancer_policy_sdk::k8s::selector::LabelSelectorSpec;
use serde::{Deserialize, Serialize};

use crate::invariant::{Invariant, InvariantSet};
use descheduler_common::scope::{described, label_selector_schema, namespaces_schema};

/// `FullPCPUs`: koord-scheduler's `NodeNUMAResourceArgs.defaultCPUBindPolicy` default.
pub const DEFAULT_CPU_BIND_POLICY: &str = "FullPCPUs";
/// koord-scheduler's default NUMA scoring strategy.
pub const DEFAULT_NUMA_SCORING_STRATEGY: &str = "LeastAllocated";

/// Args of the CpuOrchestration plugin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CpuOrchestrationArgs {
    /// The invariants to check, by id (`H1`…`H13`, `S1`…`S5`). Absent or `null`: all of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invariants: Option<Vec<String>>,
    /// Also propose pods that violate only soft invariants (S1–S5). Soft violations are always
    /// counted in the summary.
    #[serde(default, deserialize_with = "null_as_default")]
    pub include_soft: bool,
    /// Only pods of these namespaces (include) or of all but these (exclude) are proposed. Pods
    /// outside still count as evidence (an overlap with a kube-system pod is still an overlap).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evictable_namespaces: Option<Namespaces>,
    /// Only pods matching this selector are proposed (all pods count as evidence).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelectorSpec>,
    /// The scheduler's `defaultCPUBindPolicy`: what an empty or `Default` bind policy resolves
    /// to (`FullPCPUs` or `SpreadByPCPUs`).
    #[serde(rename = "defaultCPUBindPolicy", default = "default_bind_policy")]
    pub default_cpu_bind_policy: String,
    /// The scheduler's NUMA scoring strategy, for nodes without the
    /// `node.koordinator.sh/numa-allocate-strategy` label (`LeastAllocated`, `MostAllocated`).
    #[serde(rename = "numaScoringStrategy", default = "default_numa_strategy")]
    pub numa_scoring_strategy: String,
}

fn default_bind_policy() -> String {
    DEFAULT_CPU_BIND_POLICY.into()
}

fn default_numa_strategy() -> String {
    DEFAULT_NUMA_SCORING_STRATEGY.into()
}

impl Default for CpuOrchestrationArgs {
    fn default() -> Self {
        CpuOrchestrationArgs {
            invariants: None,
            include_soft: false,
            evictable_namespaces: None,
            label_selector: None,
            default_cpu_bind_policy: default_bind_policy(),
            numa_scoring_strategy: default_numa_strategy(),
        }
    }
}

impl CpuOrchestrationArgs {
    /// The selected invariants (unknown ids, refused by [`validate`], are ignored).
    pub fn selected(&self) -> InvariantSet {
        match &self.invariants {
            None => InvariantSet::all(),
            Some(ids) => {
                let mut set = InvariantSet::EMPTY;
                for id in ids {
                    if let Some(i) = Invariant::from_id(id) {
                        set.insert(i);
                    }
                }
                set
            }
        }
    }
}

/// Every problem with the args, each with its field path.
pub fn validate(args: &CpuOrchestrationArgs) -> Vec<ArgError> {
    let mut errors = Vec::new();
    if let Some(ids) = &args.invariants {
        if ids.is_empty() {
            errors.push(ArgError::new(
                "invariants",
                "an empty list checks nothing; leave it out to check every invariant",
            ));
        }
        for (n, id) in ids.iter().enumerate() {
            if Invariant::from_id(id).is_none() {
                errors.push(ArgError::new(
                    format!("invariants[{n}]"),
                    format!("unknown invariant {id:?}; expected one of H1 to H13 or S1 to S5"),
                ));
            } else if ids[..n].contains(id) {
                errors.push(ArgError::new(
                    format!("invariants[{n}]"),
                    format!("{id} is listed twice"),
                ));
            }
        }
    }
    if let Some(ns) = &args.evictable_namespaces
        && !ns.include.is_empty()
        && !ns.exclude.is_empty()
    {
        errors.push(ArgError::new(
            "evictableNamespaces",
            "only one of include/exclude can be set",
        ));
    }
    errors.extend(descheduler_common::scope::validate_scope(
        None,
        args.label_selector.as_ref(),
    ));
    if !matches!(
        args.default_cpu_bind_policy.as_str(),
        "FullPCPUs" | "SpreadByPCPUs"
    ) {
        errors.push(ArgError::new(
            "defaultCPUBindPolicy",
            format!(
                "{:?} is not FullPCPUs or SpreadByPCPUs",
                args.default_cpu_bind_policy
            ),
        ));
    }
    if !matches!(
        args.numa_scoring_strategy.as_str(),
        "LeastAllocated" | "MostAllocated"
    ) {
        errors.push(ArgError::new(
            "numaScoringStrategy",
            format!(
                "{:?} is not LeastAllocated or MostAllocated",
                args.numa_scoring_strategy
            ),
        ));
    }
    errors
}

/// JSON Schema (draft 2020-12) of [`CpuOrchestrationArgs`].
pub fn schema() -> serde_json::Value {
    let ids: Vec<&str> = Invariant::ALL.iter().map(|i| i.id()).collect();
    serde_json::json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "CpuOrchestrationArgs",
        "description": "Args of the CpuOrchestration plugin: check Koordinator's fine-grained \
                        CPU orchestration invariants and propose moving the pods that violate them.",
        "type": "object",
        "additionalProperties": false,
        "properties": {
            "invariants": {
                "description": "Invariants to check, by id. Leave it out to check all.",
                "type": ["array", "null"],
                "minItems": 1,
                "uniqueItems": true,
                "items": { "enum": ids }
            },
            "includeSoft": {
                "description": "Also propose pods that violate only soft invariants (S1-S5).",
                "type": ["boolean", "null"],
                "default": false
            },
            "evictableNamespaces": described(
                namespaces_schema(),
                "Only pods of these namespaces (include) or of all but these (exclude) are \
                 proposed; every pod counts as evidence."
            ),
            "labelSelector": described(
                label_selector_schema(),
                "Only pods matching this selector are proposed; every pod counts as evidence."
            ),
            "defaultCPUBindPolicy": {
                "description": "The scheduler's defaultCPUBindPolicy: what an empty or Default \
                                bind policy resolves to.",
                "enum": ["FullPCPUs", "SpreadByPCPUs"],
                "default": DEFAULT_CPU_BIND_POLICY
            },
            "numaScoringStrategy": {
                "description": "The scheduler's NUMA scoring strategy for nodes without the \
                                node.koordinator.sh/numa-allocate-strategy label (S5).",
                "enum": ["LeastAllocated", "MostAllocated"],
                "default": DEFAULT_NUMA_SCORING_STRATEGY
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use rebalancer_policy_sdk::testing::check_args;

    use super::*;

    fn check(json: &str) -> Result<CpuOrchestrationArgs, String> {
        check_args::<crate::CpuOrchestration>(json).map_err(|errors| errors.join("; "))
    }

    #[test]
    fn table() {
        for json in [
            "{}",
            r#"{"invariants":["H1","H8","S3"],"includeSoft":true}"#,
            r#"{"invariants":null,"includeSoft":null}"#,
            r#"{"evictableNamespaces":{"exclude":["kube-system"]}}"#,
            r#"{"labelSelector":{"matchLabels":{"app":"db"}}}"#,
            r#"{"defaultCPUBindPolicy":"SpreadByPCPUs","numaScoringStrategy":"MostAllocated"}"#,
        ] {
            if let Err(e) = check(json) {
                panic!("{json}: {e}");
            }
        }
        let bad = [
            (
                r#"{"invariants":["H1","H14"]}"#,
                r#"invariants[1]: unknown invariant "H14""#,
            ),
            (
                r#"{"invariants":["h1"]}"#,
                "invariants[0]: unknown invariant",
            ),
            (
                r#"{"invariants":["H8","H8"]}"#,
                "invariants[1]: H8 is listed twice",
            ),
            (
                r#"{"invariants":[]}"#,
                "invariants: an empty list checks nothing",
            ),
            (
                r#"{"evictableNamespaces":{"include":["a"],"exclude":["b"]}}"#,
                "evictableNamespaces: only one of include/exclude can be set",
            ),
            (
                r#"{"labelSelector":{"matchExpressions":[{"key":"a","operator":"Has"}]}}"#,
                "labelSelector",
            ),
            (
                r#"{"defaultCPUBindPolicy":"Default"}"#,
                "defaultCPUBindPolicy: \"Default\" is not FullPCPUs or SpreadByPCPUs",
            ),
            (
                r#"{"numaScoringStrategy":"DistributeEvenly"}"#,
                "numaScoringStrategy: \"DistributeEvenly\" is not",
            ),
            (r#"{"includeSoft":"yes"}"#, "invalid type: string"),
            (r#"{"namespaces":{}}"#, "unknown field `namespaces`"),
        ];
        for (json, want) in bad {
            match check(json) {
                Ok(_) => panic!("{json}: accepted"),
                Err(e) => assert!(e.contains(want), "{json}: {e:?} lacks {want:?}"),
            }
        }
    }

    #[test]
    fn defaults_and_selection() {
        let args = check("{}").unwrap();
        assert_eq!(args, CpuOrchestrationArgs::default());
        assert_eq!(args.selected(), InvariantSet::all());
        let args = check(r#"{"invariants":["S3","H2"]}"#).unwrap();
        let picked: Vec<_> = args.selected().iter().collect();
        assert_eq!(picked, [Invariant::H2, Invariant::S3]);
        let defaults = serde_json::to_value(CpuOrchestrationArgs::default()).unwrap();
        assert_eq!(
            defaults,
            serde_json::json!({
                "includeSoft": false,
                "defaultCPUBindPolicy": "FullPCPUs",
                "numaScoringStrategy": "LeastAllocated"
            })
        );
    }
}
