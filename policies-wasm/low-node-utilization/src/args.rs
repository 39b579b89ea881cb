//! LowNodeUtilization args: the serde shape of descheduler's `LowNodeUtilizationArgs` (v0.36),
//! validation (descheduler's `ValidateLowNodeUtilizationArgs` plus the checks descheduler only
//! makes when it builds the plugin) and the hand-written JSON Schema. Owns no plugin logic.

use descheduler_common::utilization::{evictable_namespaces_schema, validate_evictable_namespaces};
use std::collections::BTreeMap;

use rebalancer_policy_sdk::ArgError;
pub use rebalancer_policy_sdk::args::Namespaces;
use rebalancer_policy_sdk::args::null_as_default;
use serde::{Deserialize, Serialize};

/// descheduler's pseudo-resource for a Prometheus query result.
pub const METRIC_RESOURCE: &str = "MetricResource";
pub const SOURCE_KUBERNETES_METRICS: &str = "KubernetesMetrics";
pub const SOURCE_PROMETHEUS: &str = "Prometheus";

/// Resource name → percentage (`api.ResourceThresholds`).
pub type Thresholds = BTreeMap<String, f64>;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LowNodeUtilizationArgs {
    /// Thresholds are deviations from the mean usage instead of absolute percentages.
    #[serde(default, deserialize_with = "null_as_default")]
    pub use_deviation_thresholds: bool,
    /// A node is underutilized when every listed resource is at or below its threshold.
    #[serde(default, deserialize_with = "null_as_default")]
    pub thresholds: Thresholds,
    /// A node is overutilized when some listed resource is above its target threshold.
    #[serde(default, deserialize_with = "null_as_default")]
    pub target_thresholds: Thresholds,
    /// Do nothing unless more than this many nodes are underutilized.
    #[serde(default, deserialize_with = "null_as_default")]
    pub number_of_nodes: i64,
    /// Actual-usage sources (metrics-server, Prometheus). Parsed and validated; not available in
    /// this backend, so setting it is a validation error.
    #[serde(default)]
    pub metrics_utilization: Option<MetricsUtilization>,
    /// Namespaces whose pods still count towards usage but are never evicted.
    #[serde(default)]
    pub evictable_namespaces: Option<Namespaces>,
    /// Per-plugin eviction limits.
    #[serde(default)]
    pub eviction_limits: Option<EvictionLimits>,
    /// Rebalancer extension fixing descheduler #1237, off by default: a pod moves only when one
    /// underutilized node alone has room for it below its target threshold (descheduler only
    /// checks the pooled room of all of them). Not serialized while off, so the args stay a
    /// valid descheduler document.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "descheduler_common::args::is_false"
    )]
    pub target_resource_fit: bool,
    /// Rebalancer extension, off by default: a pod may go to an underutilized node when it
    /// tolerates each of its NoSchedule/NoExecute taints (descheduler compares counts and
    /// requires PreferNoSchedule taints to be tolerated too). Not serialized while off.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "descheduler_common::args::is_false"
    )]
    pub per_taint_tolerations: bool,
}

/// descheduler's `api.EvictionLimits`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EvictionLimits {
    /// At most this many evictions per node by this plugin in one run.
    #[serde(default)]
    pub node: Option<u64>,
}

/// descheduler's `MetricsUtilization`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MetricsUtilization {
    /// Deprecated form of `source: KubernetesMetrics`.
    #[serde(default, deserialize_with = "null_as_default")]
    pub metrics_server: bool,
    /// `KubernetesMetrics` or `Prometheus`.
    #[serde(default, deserialize_with = "null_as_default")]
    pub source: String,
    #[serde(default)]
    pub prometheus: Option<Prometheus>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Prometheus {
    #[serde(default, deserialize_with = "null_as_default")]
    pub query: String,
}

/// Every problem with the args; descheduler stops at its first error, we list them all.
pub fn validate(args: &LowNodeUtilizationArgs) -> Vec<ArgError> {
    let mut errors = Vec::new();
    errors.extend(validate_evictable_namespaces(
        args.evictable_namespaces.as_ref(),
    ));
    validate_thresholds("thresholds", &args.thresholds, &mut errors);
    validate_thresholds("targetThresholds", &args.target_thresholds, &mut errors);
    if !args.thresholds.is_empty() && !args.target_thresholds.is_empty() {
        let same_resources = args.thresholds.len() == args.target_thresholds.len()
            && args
                .thresholds
                .keys()
                .all(|k| args.target_thresholds.contains_key(k));
        if !same_resources {
            errors.push(ArgError::new(
                "targetThresholds",
                format!(
                    "thresholds and targetThresholds configured different resources \
                     (thresholds: {}; targetThresholds: {})",
                    names(&args.thresholds),
                    names(&args.target_thresholds)
                ),
            ));
        } else if !args.use_deviation_thresholds {
            for (name, value) in &args.thresholds {
                if *value > args.target_thresholds[name] {
                    errors.push(ArgError::new(
                        format!("thresholds.{name}"),
                        format!(
                            "thresholds' {name} percentage is greater than targetThresholds' \
                             ({value} > {})",
                            args.target_thresholds[name]
                        ),
                    ));
                }
            }
        }
    }
    if let Some(metrics) = &args.metrics_utilization {
        validate_metrics(metrics, args, &mut errors);
        if args.target_resource_fit && metrics.source == SOURCE_PROMETHEUS {
            errors.push(ArgError::new(
                "targetResourceFit",
                "targetResourceFit needs per-pod usage, which a Prometheus source does not \
                 provide; remove one of targetResourceFit and metricsUtilization",
            ));
        }
    }
    errors
}

fn names(thresholds: &Thresholds) -> String {
    thresholds.keys().cloned().collect::<Vec<_>>().join(", ")
}

fn validate_thresholds(field: &str, thresholds: &Thresholds, errors: &mut Vec<ArgError>) {
    if thresholds.is_empty() {
        errors.push(ArgError::new(
            field,
            format!("{field} config is not valid: no resource threshold is configured"),
        ));
        return;
    }
    for (name, percent) in thresholds {
        if !(0.0..=100.0).contains(percent) {
            errors.push(ArgError::new(
                format!("{field}.{name}"),
                format!("{field} config is not valid: {name} threshold not in [0, 100] range"),
            ));
        }
    }
}

fn validate_metrics(
    metrics: &MetricsUtilization,
    args: &LowNodeUtilizationArgs,
    errors: &mut Vec<ArgError>,
) {
    let source = metrics.source.as_str();
    // ValidateLowNodeUtilizationArgs.
    if source == SOURCE_KUBERNETES_METRICS && metrics.metrics_server {
        errors.push(ArgError::new(
            "metricsUtilization.metricsServer",
            format!("it is not allowed to set both {SOURCE_KUBERNETES_METRICS:?} source and metricsServer"),
        ));
    }
    if source == SOURCE_KUBERNETES_METRICS && metrics.prometheus.is_some() {
        errors.push(ArgError::new(
            "metricsUtilization.prometheus",
            format!(
                "prometheus configuration is not allowed to set when source is set to \
                 {SOURCE_KUBERNETES_METRICS:?}"
            ),
        ));
    }
    if source == SOURCE_PROMETHEUS
        && metrics
            .prometheus
            .as_ref()
            .is_none_or(|p| p.query.is_empty())
    {
        errors.push(ArgError::new(
            "metricsUtilization.prometheus.query",
            format!(
                "prometheus query is required when metrics source is set to {SOURCE_PROMETHEUS:?}"
            ),
        ));
    }
    // What NewLowNodeUtilization checks when it builds the plugin.
    match source {
        SOURCE_PROMETHEUS => {
            for (field, thresholds) in [
                ("thresholds", &args.thresholds),
                ("targetThresholds", &args.target_thresholds),
            ] {
                if thresholds.len() != 1 || !thresholds.contains_key(METRIC_RESOURCE) {
                    errors.push(ArgError::new(
                        field,
                        format!(
                            "{field} are expected to specify a single instance of \
                             {METRIC_RESOURCE:?} resource, got [{}] instead",
                            names(thresholds)
                        ),
                    ));
                }
            }
        }
        SOURCE_KUBERNETES_METRICS => {}
        "" if metrics.metrics_server => {}
        "" => errors.push(ArgError::new(
            "metricsUtilization.source",
            format!(
                "metrics source is empty (set {SOURCE_KUBERNETES_METRICS:?} or \
                 {SOURCE_PROMETHEUS:?}, or remove metricsUtilization)"
            ),
        )),
        other => errors.push(ArgError::new(
            "metricsUtilization.source",
            format!(
                "unrecognized metrics source {other:?} (expected {SOURCE_KUBERNETES_METRICS:?} or \
                 {SOURCE_PROMETHEUS:?})"
            ),
        )),
    }
    // What this backend can do.
    if metrics.metrics_server || source == SOURCE_KUBERNETES_METRICS {
        let field = if source == SOURCE_KUBERNETES_METRICS {
            "metricsUtilization.source"
        } else {
            "metricsUtilization.metricsServer"
        };
        errors.push(ArgError::new(
            field,
            "actual usage from metrics-server (KubernetesMetrics) is not available: this backend \
             has no live metrics; remove metricsUtilization to balance on pod requests",
        ));
    }
    if source == SOURCE_PROMETHEUS {
        errors.push(ArgError::new(
            "metricsUtilization.source",
            "actual usage from Prometheus is not available: this backend does not query \
             Prometheus; remove metricsUtilization to balance on pod requests",
        ));
    }
}

/// JSON Schema (draft 2020-12) of [`LowNodeUtilizationArgs`].
pub fn schema() -> serde_json::Value {
    let thresholds = |description: &str| {
        serde_json::json!({
            "description": description,
            "type": "object",
            "minProperties": 1,
            "additionalProperties": { "type": "number", "minimum": 0, "maximum": 100 },
            "examples": [{ "cpu": 20, "memory": 20, "pods": 20 }]
        })
    };
    serde_json::json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "LowNodeUtilizationArgs",
        "description": "Args of descheduler's LowNodeUtilization plugin (v0.36). Usage is the sum \
                        of pod requests; percentages are of node allocatable.",
        "type": "object",
        "additionalProperties": false,
        "required": ["thresholds", "targetThresholds"],
        "properties": {
            "useDeviationThresholds": {
                "description": "Treat thresholds as deviations below (thresholds) and above \
                                (targetThresholds) the mean usage of all nodes.",
                "type": ["boolean", "null"],
                "default": false
            },
            "thresholds": thresholds(
                "Resource name (cpu, memory, pods, extended resources) → percent. A schedulable \
                 node with every listed resource at or below its threshold is underutilized."
            ),
            "targetThresholds": thresholds(
                "Same resources as thresholds, each ≥ its threshold unless useDeviationThresholds. \
                 A node with some listed resource above its target is overutilized."
            ),
            "numberOfNodes": {
                "description": "Act only when more than this many nodes are underutilized.",
                "type": ["integer", "null"],
                "default": 0
            },
            "evictableNamespaces": evictable_namespaces_schema(),
            "evictionLimits": {
                "description": "Limits of this plugin alone (the profile's limits apply as well).",
                "type": ["object", "null"],
                "additionalProperties": false,
                "properties": {
                    "node": {
                        "description": "At most this many evictions per node.",
                        "type": ["integer", "null"],
                        "minimum": 0
                    }
                },
                "default": null
            },
            "metricsUtilization": {
                "description": "Actual-usage sources of descheduler (metrics-server, Prometheus). \
                                Accepted by the schema for compatibility, but rejected at \
                                validation: this backend has no live metrics.",
                "type": ["object", "null"],
                "additionalProperties": false,
                "properties": {
                    "metricsServer": { "type": ["boolean", "null"], "deprecated": true },
                    "source": { "enum": ["", SOURCE_KUBERNETES_METRICS, SOURCE_PROMETHEUS, null] },
                    "prometheus": {
                        "type": ["object", "null"],
                        "additionalProperties": false,
                        "properties": { "query": { "type": ["string", "null"] } }
                    }
                },
                "default": null
            },
            "targetResourceFit": {
                "description": "Rebalancer extension fixing descheduler #1237, off by default \
                                (descheduler only checks that the summed room of all \
                                underutilized nodes is positive). When true, a pod is moved only \
                                if one underutilized node, whose taints it tolerates, has room for \
                                it below that node's target: capacity capped at the target \
                                threshold minus usage, for every resource the pod requests (the \
                                plugin's resources — listed, cpu, memory, pods — and any other \
                                requested resource against allocatable minus requests). The node \
                                with the most free share is picked and its room shrinks by the \
                                pod's requests for the rest of the run.",
                "type": ["boolean", "null"],
                "default": false
            },
            "perTaintTolerations": {
                "description": "Rebalancer extension, off by default. descheduler lets a pod go \
                                only to an underutilized node whose taints (every effect, \
                                PreferNoSchedule included) it tolerates AND that has no more \
                                taints than the pod has tolerations — so one wildcard toleration \
                                fails on a node with two taints. When true, the pod must tolerate \
                                each NoSchedule and NoExecute taint of some underutilized node by \
                                proper toleration matching; PreferNoSchedule does not repel.",
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

    fn check(json: &str) -> Result<LowNodeUtilizationArgs, Vec<String>> {
        check_args::<crate::LowNodeUtilization>(json)
    }

    #[test]
    fn validation_table() {
        let ok = |name: &str, json: &str| {
            if let Err(e) = check(json) {
                panic!("{name}: unexpected errors {e:?}");
            }
        };
        let bad = |name: &str, json: &str, want: &[&str]| match check(json) {
            Ok(_) => panic!("{name}: accepted"),
            Err(errors) => {
                for w in want {
                    assert!(
                        errors.iter().any(|e| e.contains(w)),
                        "{name}: no error containing {w:?} in {errors:?}"
                    );
                }
            }
        };

        ok(
            "plain",
            r#"{"thresholds":{"cpu":20,"memory":20,"pods":20},"targetThresholds":{"cpu":50,"memory":50,"pods":50}}"#,
        );
        ok(
            "all fields",
            r#"{"thresholds":{"cpu":20},"targetThresholds":{"cpu":50},"useDeviationThresholds":false,
                "numberOfNodes":2,"evictableNamespaces":{"exclude":["kube-system"]},
                "evictionLimits":{"node":3}}"#,
        );
        ok(
            "deviation allows threshold above target",
            r#"{"thresholds":{"cpu":30},"targetThresholds":{"cpu":10},"useDeviationThresholds":true}"#,
        );
        ok(
            "equal thresholds",
            r#"{"thresholds":{"cpu":50},"targetThresholds":{"cpu":50}}"#,
        );
        ok(
            "boundaries",
            r#"{"thresholds":{"cpu":0},"targetThresholds":{"cpu":100}}"#,
        );
        ok(
            "Rebalancer extensions",
            r#"{"thresholds":{"cpu":20},"targetThresholds":{"cpu":50},"targetResourceFit":true,
                "perTaintTolerations":true}"#,
        );
        ok(
            "Rebalancer extensions null",
            r#"{"thresholds":{"cpu":20},"targetThresholds":{"cpu":50},"targetResourceFit":null,
                "perTaintTolerations":null}"#,
        );
        bad(
            "extension not a boolean",
            r#"{"thresholds":{"cpu":20},"targetThresholds":{"cpu":50},"perTaintTolerations":1}"#,
            &["invalid type: integer `1`, expected a boolean"],
        );
        bad(
            "targetResourceFit with Prometheus",
            r#"{"thresholds":{"MetricResource":20},"targetThresholds":{"MetricResource":50},
                "targetResourceFit":true,
                "metricsUtilization":{"source":"Prometheus","prometheus":{"query":"q"}}}"#,
            &["targetResourceFit: targetResourceFit needs per-pod usage"],
        );
        bad(
            "missing thresholds",
            r#"{"targetThresholds":{"cpu":50}}"#,
            &["thresholds: thresholds config is not valid: no resource threshold is configured"],
        );
        bad(
            "empty both",
            "{}",
            &[
                "thresholds config is not valid: no resource threshold is configured",
                "targetThresholds config is not valid: no resource threshold is configured",
            ],
        );
        bad(
            "out of range",
            r#"{"thresholds":{"cpu":-1},"targetThresholds":{"cpu":101}}"#,
            &[
                "thresholds.cpu: thresholds config is not valid: cpu threshold not in [0, 100] range",
                "targetThresholds.cpu: targetThresholds config is not valid: cpu threshold not in [0, 100] range",
            ],
        );
        bad(
            "different resources",
            r#"{"thresholds":{"cpu":20},"targetThresholds":{"memory":50}}"#,
            &["thresholds and targetThresholds configured different resources"],
        );
        bad(
            "different count",
            r#"{"thresholds":{"cpu":20},"targetThresholds":{"cpu":50,"memory":50}}"#,
            &["thresholds and targetThresholds configured different resources"],
        );
        bad(
            "threshold above target",
            r#"{"thresholds":{"cpu":60},"targetThresholds":{"cpu":50}}"#,
            &["thresholds.cpu: thresholds' cpu percentage is greater than targetThresholds'"],
        );
        bad(
            "include rejected",
            r#"{"thresholds":{"cpu":20},"targetThresholds":{"cpu":50},"evictableNamespaces":{"include":["a"]}}"#,
            &["evictableNamespaces.include: only Exclude namespaces can be set"],
        );
        bad(
            "unknown field",
            r#"{"thresholds":{"cpu":20},"targetThresholds":{"cpu":50},"evictionLimit":{"node":1}}"#,
            &["unknown field `evictionLimit`"],
        );
        bad(
            "unknown limit",
            r#"{"thresholds":{"cpu":20},"targetThresholds":{"cpu":50},"evictionLimits":{"total":1}}"#,
            &["unknown field `total`"],
        );
        bad(
            "negative limit",
            r#"{"thresholds":{"cpu":20},"targetThresholds":{"cpu":50},"evictionLimits":{"node":-1}}"#,
            &["invalid value"],
        );
        bad(
            "metrics server unsupported",
            r#"{"thresholds":{"cpu":20},"targetThresholds":{"cpu":50},"metricsUtilization":{"metricsServer":true}}"#,
            &["metricsUtilization.metricsServer: actual usage from metrics-server"],
        );
        bad(
            "kubernetes metrics unsupported",
            r#"{"thresholds":{"cpu":20},"targetThresholds":{"cpu":50},"metricsUtilization":{"source":"KubernetesMetrics"}}"#,
            &[
                "metricsUtilization.source: actual usage from metrics-server (KubernetesMetrics) is not available",
            ],
        );
        bad(
            "kubernetes metrics with metricsServer",
            r#"{"thresholds":{"cpu":20},"targetThresholds":{"cpu":50},"metricsUtilization":{"source":"KubernetesMetrics","metricsServer":true}}"#,
            &["it is not allowed to set both \"KubernetesMetrics\" source and metricsServer"],
        );
        bad(
            "kubernetes metrics with prometheus",
            r#"{"thresholds":{"cpu":20},"targetThresholds":{"cpu":50},"metricsUtilization":{"source":"KubernetesMetrics","prometheus":{"query":"x"}}}"#,
            &[
                "prometheus configuration is not allowed to set when source is set to \"KubernetesMetrics\"",
            ],
        );
        bad(
            "prometheus without query",
            r#"{"thresholds":{"MetricResource":20},"targetThresholds":{"MetricResource":50},"metricsUtilization":{"source":"Prometheus"}}"#,
            &["metricsUtilization.prometheus.query: prometheus query is required"],
        );
        bad(
            "prometheus wrong resources",
            r#"{"thresholds":{"cpu":20},"targetThresholds":{"cpu":50},"metricsUtilization":{"source":"Prometheus","prometheus":{"query":"q"}}}"#,
            &["thresholds are expected to specify a single instance of \"MetricResource\""],
        );
        bad(
            "prometheus unsupported",
            r#"{"thresholds":{"MetricResource":20},"targetThresholds":{"MetricResource":50},"metricsUtilization":{"source":"Prometheus","prometheus":{"query":"q"}}}"#,
            &["metricsUtilization.source: actual usage from Prometheus is not available"],
        );
        bad(
            "empty source",
            r#"{"thresholds":{"cpu":20},"targetThresholds":{"cpu":50},"metricsUtilization":{}}"#,
            &["metricsUtilization.source: metrics source is empty"],
        );
        bad(
            "unrecognized source",
            r#"{"thresholds":{"cpu":20},"targetThresholds":{"cpu":50},"metricsUtilization":{"source":"Datadog"}}"#,
            &["unrecognized metrics source \"Datadog\""],
        );
    }

    #[test]
    fn nulls_decode_like_go() {
        let args = check(
            r#"{"thresholds":{"cpu":20},"targetThresholds":{"cpu":50},"useDeviationThresholds":null,
                "numberOfNodes":null,"evictableNamespaces":{"exclude":null},"evictionLimits":null}"#,
        )
        .expect("valid");
        assert!(!args.use_deviation_thresholds);
        assert_eq!(args.number_of_nodes, 0);
        assert_eq!(args.eviction_limits, None);
    }

    #[test]
    fn extensions_are_off_and_left_out_by_default() {
        let args =
            check(r#"{"thresholds":{"cpu":20},"targetThresholds":{"cpu":50}}"#).expect("valid");
        assert!(!args.target_resource_fit && !args.per_taint_tolerations);
        let json = serde_json::to_value(&args).expect("serializes");
        assert!(json.get("targetResourceFit").is_none(), "{json}");
        assert!(json.get("perTaintTolerations").is_none(), "{json}");
        let on = LowNodeUtilizationArgs {
            target_resource_fit: true,
            per_taint_tolerations: true,
            ..args
        };
        let json = serde_json::to_value(&on).expect("serializes");
        assert_eq!(json["targetResourceFit"], true);
        assert_eq!(json["perTaintTolerations"], true);
        let schema = schema();
        for (field, issue) in [
            ("targetResourceFit", "#1237"),
            ("perTaintTolerations", "PreferNoSchedule"),
        ] {
            let option = &schema["properties"][field];
            assert_eq!(option["default"], false, "{field}");
            let description = option["description"].as_str().unwrap_or_default();
            assert!(
                description.contains("Rebalancer extension") && description.contains(issue),
                "{field}: {description}"
            );
        }
    }
}
