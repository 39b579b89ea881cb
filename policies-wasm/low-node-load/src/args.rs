//! LowNodeLoad args: the serde shape of Koordinator's `LowNodeLoadArgs` (descheduler/v1alpha2),
//! Koordinator's defaulting and conversion ([`resolve`]: `SetDefaults_LowNodeLoadArgs`, pool
//! inheritance, the implicit `__default_node_pool__`), its validation
//! (`ValidateLowLoadUtilizationArgs`, run on the resolved pools as Koordinator does, with errors
//! located at the field the user wrote) and the hand-written JSON Schema. Owns no plugin logic.

use std::collections::BTreeMap;

use descheduler_common::args::is_false;
use descheduler_common::scope::{described, label_selector_schema};
use rebalancer_policy_sdk::ArgError;
pub use rebalancer_policy_sdk::args::Namespaces;
use rebalancer_policy_sdk::args::null_as_default;
use rebalancer_policy_sdk::k8s::duration::parse_go_duration;
use rebalancer_policy_sdk::k8s::selector::LabelSelectorSpec;
use serde::{Deserialize, Serialize};

/// Resource name → percentage (`ResourceThresholds`).
pub type Thresholds = BTreeMap<String, f64>;
/// Resource name → weight.
pub type Weights = BTreeMap<String, i64>;

/// The name Koordinator gives the pool made of the top-level fields.
pub const DEFAULT_POOL: &str = "__default_node_pool__";
pub const DEFAULT_NODE_METRIC_EXPIRATION_SECONDS: i64 = 180;
pub const DEFAULT_DETECTOR_CACHE_TIMEOUT: &str = "5m";
pub const DEFAULT_ANOMALY_TIMEOUT: &str = "1m";
pub const DEFAULT_CONSECUTIVE_ABNORMALITIES: u32 = 5;
pub const DEFAULT_CONSECUTIVE_NORMALITIES: u32 = 3;
/// The anomaly detector's own timeout when the condition's is missing or not positive.
pub const DETECTOR_FALLBACK_TIMEOUT_MS: i64 = 60_000;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LowNodeLoadArgs {
    /// Do nothing.
    #[serde(default, deserialize_with = "null_as_default")]
    pub paused: bool,
    /// Log what would be evicted instead of proposing it.
    #[serde(default, deserialize_with = "null_as_default")]
    pub dry_run: bool,
    /// Act only when more nodes than this are under their low thresholds (low + prodLow + both).
    #[serde(default, deserialize_with = "null_as_default")]
    pub number_of_nodes: i32,
    /// A node whose metric is this old or older is skipped (default 180).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_metric_expiration_seconds: Option<i64>,
    /// Pods outside these namespaces are never evicted (their usage still counts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evictable_namespaces: Option<Namespaces>,
    /// Node selector of the implicit default pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<LabelSelectorSpec>,
    /// A candidate pod must match one of these (none: every pod).
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub pod_selectors: Vec<PodSelector>,
    /// Predicates plus the usage check against a target's high thresholds (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_fit: Option<bool>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub use_deviation_thresholds: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub high_thresholds: Option<Thresholds>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub low_thresholds: Option<Thresholds>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prod_high_thresholds: Option<Thresholds>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prod_low_thresholds: Option<Thresholds>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_weights: Option<Weights>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anomaly_condition: Option<AnomalyCondition>,
    /// Go duration (default `5m`): a node's detector is forgotten this long after the node was
    /// last a source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detector_cache_timeout: Option<String>,
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub node_pools: Vec<NodePool>,

    /// Fix (a), off by default: a source is counted by its anomaly detector only when its
    /// metric's update time changed since the last count (Koordinator counts rounds).
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "is_false"
    )]
    pub count_metric_updates: bool,
    /// Fix (b), off by default: nodeFit's usage check adds a candidate's usage to its target
    /// only when the pod is actually evicted (Koordinator adds it to the first fitting target
    /// for every candidate, evicted or not).
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "is_false"
    )]
    pub reserve_only_evicted: bool,
    /// Fix (c), off by default: each missing field of `anomalyCondition` gets its default
    /// (Koordinator's else-if chain fills at most one, and never the timeout).
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "is_false"
    )]
    pub default_each_anomaly_field: bool,
    /// Fix (d), off by default: a resource with a high threshold but no low threshold keeps its
    /// high threshold and gets low = high (Koordinator sets both to 100%).
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "is_false"
    )]
    pub keep_high_without_low: bool,
}

/// `LowNodeLoadPodSelector`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodSelector {
    #[serde(default, deserialize_with = "null_as_default")]
    pub name: String,
    #[serde(default)]
    pub selector: Option<LabelSelectorSpec>,
}

/// `LoadAnomalyCondition`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AnomalyCondition {
    /// Go duration: how long a node stays anomalous once it became so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// A source becomes anomalous when counted more than this many consecutive rounds.
    #[serde(default, deserialize_with = "null_as_default")]
    pub consecutive_abnormalities: u32,
    /// An anomalous node is normal again after more than this many consecutive normal marks.
    #[serde(default, deserialize_with = "null_as_default")]
    pub consecutive_normalities: u32,
}

/// `LowNodeLoadNodePool`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodePool {
    #[serde(default, deserialize_with = "null_as_default")]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<LabelSelectorSpec>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub use_deviation_thresholds: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub high_thresholds: Option<Thresholds>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub low_thresholds: Option<Thresholds>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prod_high_thresholds: Option<Thresholds>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prod_low_thresholds: Option<Thresholds>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_weights: Option<Weights>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anomaly_condition: Option<AnomalyCondition>,
}

impl LowNodeLoadArgs {
    /// The args as Koordinator's defaulting leaves `{}` (what `info` shows as the defaults).
    pub fn with_defaults() -> Self {
        LowNodeLoadArgs {
            node_metric_expiration_seconds: Some(DEFAULT_NODE_METRIC_EXPIRATION_SECONDS),
            node_fit: Some(true),
            resource_weights: Some(default_weights(None, None)),
            anomaly_condition: Some(AnomalyCondition {
                timeout: Some(DEFAULT_ANOMALY_TIMEOUT.into()),
                consecutive_abnormalities: DEFAULT_CONSECUTIVE_ABNORMALITIES,
                consecutive_normalities: DEFAULT_CONSECUTIVE_NORMALITIES,
            }),
            detector_cache_timeout: Some(DEFAULT_DETECTOR_CACHE_TIMEOUT.into()),
            ..LowNodeLoadArgs::default()
        }
    }
}

/// An anomaly condition after defaulting, durations in ms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Condition {
    /// `None`: not set (the detector then uses [`DETECTOR_FALLBACK_TIMEOUT_MS`]).
    pub timeout_ms: Option<i64>,
    pub consecutive_abnormalities: u32,
    pub consecutive_normalities: u32,
}

impl Condition {
    /// The detector's timeout: the condition's when positive, else 60 s.
    pub fn detector_timeout_ms(&self) -> i64 {
        self.timeout_ms
            .filter(|&t| t > 0)
            .unwrap_or(DETECTOR_FALLBACK_TIMEOUT_MS)
    }
}

/// One pool after Koordinator's defaulting and conversion.
#[derive(Debug, Clone, PartialEq)]
pub struct Pool {
    pub name: String,
    /// `None`: every node in scope, already processed ones included (Koordinator's `filterNodes`).
    pub node_selector: Option<LabelSelectorSpec>,
    pub use_deviation_thresholds: bool,
    pub high: Thresholds,
    pub low: Thresholds,
    pub prod_high: Thresholds,
    pub prod_low: Thresholds,
    pub weights: Weights,
    pub condition: Condition,
    /// Where the pool's fields are written in the args (`""` for the default pool, else
    /// `nodePools[i].`), and which of them the pool wrote itself (the rest are inherited).
    pub path: String,
    pub own: Own,
}

/// Which inheritable fields a pool wrote itself.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Own {
    pub high: bool,
    pub low: bool,
    pub prod_high: bool,
    pub prod_low: bool,
    pub anomaly: bool,
}

/// The args after Koordinator's defaulting and conversion.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    pub node_fit: bool,
    pub node_metric_expiration_seconds: i64,
    /// `None`: detectors never expire (a timeout of 0, as go-cache treats it).
    pub detector_cache_timeout_ms: Option<i64>,
    /// The implicit default pool first, then `nodePools` in order.
    pub pools: Vec<Pool>,
}

fn duration_ms(field: &str, text: &str, errors: &mut Vec<ArgError>) -> Option<i64> {
    match parse_go_duration(text) {
        Ok(nanos) => Some((nanos / 1_000_000) as i64),
        Err(e) => {
            errors.push(ArgError::new(field, e));
            None
        }
    }
}

/// `{cpu: 1, memory: 1}` plus 1 for every resource of the top-level low and high thresholds.
fn default_weights(low: Option<&Thresholds>, high: Option<&Thresholds>) -> Weights {
    let mut weights: Weights = [("cpu".to_string(), 1), ("memory".to_string(), 1)].into();
    for name in low.into_iter().chain(high).flat_map(|t| t.keys()) {
        weights.insert(name.clone(), 1);
    }
    weights
}

/// Koordinator's defaulting (`SetDefaults_LowNodeLoadArgs`, `SetDefaults_LowNodeLoadNodePools`)
/// and conversion (the top-level fields become the first pool, `__default_node_pool__`), with
/// the `defaultEachAnomalyField` fix when asked for. Errors: durations that do not parse.
pub fn resolve(args: &LowNodeLoadArgs) -> Result<Resolved, Vec<ArgError>> {
    let mut errors = Vec::new();
    let condition_of = |c: &AnomalyCondition, field: &str, errors: &mut Vec<ArgError>| Condition {
        timeout_ms: c
            .timeout
            .as_deref()
            .and_then(|t| duration_ms(&format!("{field}.timeout"), t, errors)),
        consecutive_abnormalities: c.consecutive_abnormalities,
        consecutive_normalities: c.consecutive_normalities,
    };
    let default_condition = Condition {
        timeout_ms: Some(60_000),
        consecutive_abnormalities: DEFAULT_CONSECUTIVE_ABNORMALITIES,
        consecutive_normalities: DEFAULT_CONSECUTIVE_NORMALITIES,
    };
    let top_condition = match &args.anomaly_condition {
        None => default_condition,
        Some(c) => {
            let mut c = condition_of(c, "anomalyCondition", &mut errors);
            if args.default_each_anomaly_field {
                c.timeout_ms = c.timeout_ms.or(default_condition.timeout_ms);
                if c.consecutive_abnormalities == 0 {
                    c.consecutive_abnormalities = DEFAULT_CONSECUTIVE_ABNORMALITIES;
                }
                if c.consecutive_normalities == 0 {
                    c.consecutive_normalities = DEFAULT_CONSECUTIVE_NORMALITIES;
                }
            } else if c.consecutive_abnormalities == 0 {
                // Koordinator's else-if chain: at most one field is filled, never the timeout.
                c.consecutive_abnormalities = DEFAULT_CONSECUTIVE_ABNORMALITIES;
            } else if c.consecutive_normalities == 0 {
                c.consecutive_normalities = DEFAULT_CONSECUTIVE_NORMALITIES;
            }
            c
        }
    };
    let detector_cache_timeout_ms = match &args.detector_cache_timeout {
        None => Some(5 * 60_000),
        Some(text) => duration_ms("detectorCacheTimeout", text, &mut errors).filter(|&ms| ms > 0),
    };
    let mut weights = default_weights(args.low_thresholds.as_ref(), args.high_thresholds.as_ref());
    if let Some(configured) = &args.resource_weights {
        let defaults = weights;
        weights = configured.clone();
        for (name, weight) in defaults {
            let slot = weights.entry(name).or_insert(0);
            if *slot <= 0 {
                *slot = weight;
            }
        }
    }
    let thresholds = |t: &Option<Thresholds>| t.clone().unwrap_or_default();
    let mut pools = vec![Pool {
        name: DEFAULT_POOL.into(),
        node_selector: args.node_selector.clone(),
        use_deviation_thresholds: args.use_deviation_thresholds,
        high: thresholds(&args.high_thresholds),
        low: thresholds(&args.low_thresholds),
        prod_high: thresholds(&args.prod_high_thresholds),
        prod_low: thresholds(&args.prod_low_thresholds),
        weights: weights.clone(),
        condition: top_condition,
        path: String::new(),
        own: Own {
            high: true,
            low: true,
            prod_high: true,
            prod_low: true,
            anomaly: true,
        },
    }];
    for (i, pool) in args.node_pools.iter().enumerate() {
        let path = format!("nodePools[{i}].");
        let inherit = |own: &Option<Thresholds>, top: &Option<Thresholds>| {
            own.clone().or_else(|| top.clone()).unwrap_or_default()
        };
        let condition = match &pool.anomaly_condition {
            None => top_condition,
            Some(c) => {
                let mut c = condition_of(c, &format!("{path}anomalyCondition"), &mut errors);
                if c.consecutive_abnormalities == 0 {
                    c.consecutive_abnormalities = top_condition.consecutive_abnormalities;
                }
                if c.consecutive_normalities == 0 {
                    c.consecutive_normalities = top_condition.consecutive_normalities;
                }
                if args.default_each_anomaly_field {
                    c.timeout_ms = c.timeout_ms.or(top_condition.timeout_ms);
                }
                c
            }
        };
        pools.push(Pool {
            name: pool.name.clone(),
            node_selector: pool.node_selector.clone(),
            use_deviation_thresholds: pool.use_deviation_thresholds,
            high: inherit(&pool.high_thresholds, &args.high_thresholds),
            low: inherit(&pool.low_thresholds, &args.low_thresholds),
            prod_high: inherit(&pool.prod_high_thresholds, &args.prod_high_thresholds),
            prod_low: inherit(&pool.prod_low_thresholds, &args.prod_low_thresholds),
            weights: pool
                .resource_weights
                .clone()
                .unwrap_or_else(|| weights.clone()),
            condition,
            path,
            own: Own {
                high: pool.high_thresholds.is_some(),
                low: pool.low_thresholds.is_some(),
                prod_high: pool.prod_high_thresholds.is_some(),
                prod_low: pool.prod_low_thresholds.is_some(),
                anomaly: pool.anomaly_condition.is_some(),
            },
        });
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(Resolved {
        node_fit: args.node_fit.unwrap_or(true),
        node_metric_expiration_seconds: args
            .node_metric_expiration_seconds
            .unwrap_or(DEFAULT_NODE_METRIC_EXPIRATION_SECONDS),
        detector_cache_timeout_ms,
        pools,
    })
}

/// Every problem with the args (Koordinator stops at none of them either: it aggregates).
pub fn validate(args: &LowNodeLoadArgs) -> Vec<ArgError> {
    let mut errors = Vec::new();
    if args.number_of_nodes < 0 {
        errors.push(ArgError::new(
            "numberOfNodes",
            format!(
                "must be greater than or equal to 0 (got {})",
                args.number_of_nodes
            ),
        ));
    }
    if let Some(seconds) = args.node_metric_expiration_seconds
        && seconds <= 0
    {
        errors.push(ArgError::new(
            "nodeMetricExpirationSeconds",
            format!("should be a positive value (got {seconds})"),
        ));
    }
    if let Some(ns) = &args.evictable_namespaces
        && !ns.include.is_empty()
        && !ns.exclude.is_empty()
    {
        errors.push(ArgError::new(
            "evictableNamespaces",
            "only one of Include/Exclude namespaces can be set",
        ));
    }
    for (i, selector) in args.pod_selectors.iter().enumerate() {
        if let Some(s) = &selector.selector {
            errors.extend(s.validate(&format!("podSelectors[{i}].selector")));
        }
    }
    if let Some(seconds) = &args.detector_cache_timeout
        && let Ok(nanos) = parse_go_duration(seconds)
        && nanos < 0
    {
        errors.push(ArgError::new(
            "detectorCacheTimeout",
            format!("must not be negative (got {seconds})"),
        ));
    }
    let resolved = match resolve(args) {
        Ok(r) => r,
        Err(e) => {
            errors.extend(e);
            return errors;
        }
    };
    for pool in &resolved.pools {
        validate_pool(pool, args, &mut errors);
    }
    errors
}

fn validate_pool(pool: &Pool, args: &LowNodeLoadArgs, errors: &mut Vec<ArgError>) {
    let p = &pool.path;
    let is_default = p.is_empty();
    if !is_default && let Some(selector) = &pool.node_selector {
        errors.extend(selector.validate(&format!("{p}nodeSelector")));
    }
    if is_default && let Some(selector) = &pool.node_selector {
        errors.extend(selector.validate("nodeSelector"));
    }
    let own = pool.own;
    for (field, map, written) in [
        ("highThresholds", &pool.high, own.high),
        ("lowThresholds", &pool.low, own.low),
        ("prodHighThresholds", &pool.prod_high, own.prod_high),
        ("prodLowThresholds", &pool.prod_low, own.prod_low),
    ] {
        if !written {
            continue;
        }
        for (name, percent) in map {
            if *percent < 0.0 {
                errors.push(ArgError::new(
                    format!("{p}{field}.{name}"),
                    format!("percentage must be greater than or equal to 0 (got {percent})"),
                ));
            }
        }
    }
    // Pairs: (checked map, its field, the bound map, its field, what the bound is, written).
    let pairs = [
        (
            &pool.low,
            "lowThresholds",
            &pool.high,
            "highThresholds",
            own.low || own.high,
        ),
        (
            &pool.prod_high,
            "prodHighThresholds",
            &pool.high,
            "highThresholds",
            own.prod_high || own.high,
        ),
        (
            &pool.prod_low,
            "prodLowThresholds",
            &pool.prod_high,
            "prodHighThresholds",
            own.prod_low || own.prod_high,
        ),
    ];
    for (map, field, bound, bound_field, written) in pairs {
        if !written {
            continue;
        }
        for (name, percent) in map {
            if let Some(limit) = bound.get(name)
                && percent > limit
            {
                errors.push(ArgError::new(
                    format!("{p}{field}.{name}"),
                    format!(
                        "{field} {name} ({percent}) must be less than or equal to {bound_field} \
                         {name} ({limit})"
                    ),
                ));
            }
        }
    }
    if !own.anomaly {
        return;
    }
    let c = pool.condition;
    let hint = if args.default_each_anomaly_field {
        ""
    } else {
        " (Koordinator's defaulting fills only one missing field of anomalyCondition, \
         consecutiveAbnormalities first: set both, or set defaultEachAnomalyField)"
    };
    if c.consecutive_abnormalities == 0 {
        errors.push(ArgError::new(
            format!("{p}anomalyCondition.consecutiveAbnormalities"),
            "consecutiveAbnormalities must be greater than 0",
        ));
    }
    if c.consecutive_normalities == 0 {
        errors.push(ArgError::new(
            format!("{p}anomalyCondition.consecutiveNormalities"),
            format!("consecutiveNormalities must be greater than 0{hint}"),
        ));
    }
}

/// JSON Schema (draft 2020-12) of [`LowNodeLoadArgs`].
pub fn schema() -> serde_json::Value {
    let thresholds = |description: &str| {
        serde_json::json!({
            "description": description,
            "type": ["object", "null"],
            "additionalProperties": { "type": "number", "minimum": 0 },
            "examples": [{ "cpu": 70, "memory": 80 }]
        })
    };
    let weights = serde_json::json!({
        "description": "Resource → weight for the node and pod scores. Default: cpu 1, memory 1, \
                        and 1 for every resource of the top-level lowThresholds/highThresholds; a \
                        configured weight ≤ 0 of one of those gets the default.",
        "type": ["object", "null"],
        "additionalProperties": { "type": "integer" }
    });
    let anomaly = serde_json::json!({
        "description": "When a node above its high thresholds becomes a source: after more than \
                        consecutiveAbnormalities rounds (1 disables the detector). Default \
                        {timeout: 1m, consecutiveAbnormalities: 5, consecutiveNormalities: 3}; \
                        Koordinator fills only one missing field (see defaultEachAnomalyField), \
                        and a pool's condition inherits the counts but not the timeout.",
        "type": ["object", "null"],
        "additionalProperties": false,
        "properties": {
            "timeout": {
                "description": "Go duration a node stays anomalous (not extended); missing or 0: 60s.",
                "type": ["string", "null"]
            },
            "consecutiveAbnormalities": { "type": ["integer", "null"], "minimum": 0 },
            "consecutiveNormalities": { "type": ["integer", "null"], "minimum": 0 }
        }
    });
    let selector = |description: &str| described(label_selector_schema(), description);
    let fix = |description: &str| {
        serde_json::json!({
            "description": description,
            "type": ["boolean", "null"],
            "default": false
        })
    };
    let pool_properties = serde_json::json!({
        "name": { "type": ["string", "null"] },
        "nodeSelector": selector("Nodes of this pool. Missing: every node in scope, including \
                                  nodes earlier pools already processed."),
        "useDeviationThresholds": { "type": ["boolean", "null"], "default": false },
        "highThresholds": thresholds("Inherited from the top level when missing."),
        "lowThresholds": thresholds("Inherited from the top level when missing."),
        "prodHighThresholds": thresholds("Inherited from the top level when missing."),
        "prodLowThresholds": thresholds("Inherited from the top level when missing."),
        "resourceWeights": weights.clone(),
        "anomalyCondition": anomaly.clone()
    });
    serde_json::json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "LowNodeLoadArgs",
        "description": "Args of Koordinator's LowNodeLoad plugin (descheduler/v1alpha2). Usage is \
                        measured (NodeMetric, else metrics.k8s.io); percentages are of raw \
                        allocatable.",
        "type": "object",
        "additionalProperties": false,
        "properties": {
            "paused": { "description": "Do nothing.", "type": ["boolean", "null"], "default": false },
            "dryRun": {
                "description": "Log the evictions instead of proposing them.",
                "type": ["boolean", "null"],
                "default": false
            },
            "numberOfNodes": {
                "description": "Act only when more than this many nodes are low (low + prodLow + \
                                both).",
                "type": ["integer", "null"],
                "minimum": 0,
                "default": 0
            },
            "nodeMetricExpirationSeconds": {
                "description": "Skip a node whose metric is at least this old.",
                "type": ["integer", "null"],
                "exclusiveMinimum": 0,
                "default": DEFAULT_NODE_METRIC_EXPIRATION_SECONDS
            },
            "evictableNamespaces": {
                "description": "Only pods of included (or not excluded) namespaces are evicted; \
                                usage still counts every pod. One of include/exclude.",
                "type": ["object", "null"],
                "additionalProperties": false,
                "properties": {
                    "include": { "type": ["array", "null"], "items": { "type": "string" } },
                    "exclude": { "type": ["array", "null"], "items": { "type": "string" } }
                }
            },
            "nodeSelector": selector("Nodes of the implicit default pool."),
            "podSelectors": {
                "description": "A candidate must match one of these selectors.",
                "type": ["array", "null"],
                "items": {
                    "type": "object",
                    "additionalProperties": false,
                    "properties": {
                        "name": { "type": ["string", "null"] },
                        "selector": selector("Pods to consider.")
                    }
                }
            },
            "nodeFit": {
                "description": "A candidate must fit some target (predicates) without pushing \
                                its usage above the target's high thresholds.",
                "type": ["boolean", "null"],
                "default": true
            },
            "useDeviationThresholds": {
                "description": "Thresholds are deviations from the pool's mean usage.",
                "type": ["boolean", "null"],
                "default": false
            },
            "highThresholds": thresholds("Resource → percent of raw allocatable; above it on \
                                          any resource, a node is a source."),
            "lowThresholds": thresholds("At or below it on every resource, a schedulable node is \
                                         low. A resource missing here gets low = high = 100 (0 \
                                         with deviations), overriding a high threshold (see \
                                         keepHighWithoutLow)."),
            "prodHighThresholds": thresholds("The same for the usage of koord-prod pods."),
            "prodLowThresholds": thresholds("The same for the usage of koord-prod pods."),
            "resourceWeights": weights,
            "anomalyCondition": anomaly,
            "detectorCacheTimeout": {
                "description": "Go duration: a node's detector is forgotten this long after it \
                                was last a source (0: never).",
                "type": ["string", "null"],
                "default": DEFAULT_DETECTOR_CACHE_TIMEOUT
            },
            "nodePools": {
                "description": "Further pools, processed after the implicit default pool; \
                                missing fields inherit from the top level.",
                "type": ["array", "null"],
                "items": {
                    "type": "object",
                    "additionalProperties": false,
                    "properties": pool_properties
                }
            },
            "countMetricUpdates": fix(
                "Rebalancer fix, off by default: the anomaly detector counts a source only when \
                 its metric's update time changed since it last counted it. Koordinator counts \
                 rounds, so with a 10s interval and 60s reports six rounds can see one metric."
            ),
            "reserveOnlyEvicted": fix(
                "Rebalancer fix, off by default: nodeFit's usage check adds a pod's usage to its \
                 target only when the pod is evicted, checked when it is. Koordinator adds it to \
                 the first fitting target for every candidate, evicted or not (phantom usage)."
            ),
            "defaultEachAnomalyField": fix(
                "Rebalancer fix, off by default: every missing field of anomalyCondition gets its \
                 default (a pool's missing timeout inherits the top-level one). Koordinator's \
                 else-if chain fills at most one field and never the timeout, so {timeout: 2m} \
                 is rejected for consecutiveNormalities 0."
            ),
            "keepHighWithoutLow": fix(
                "Rebalancer fix, off by default: a resource with a high threshold but no low \
                 threshold keeps its high threshold and its low threshold equals it. Koordinator \
                 sets both to 100% (memory silently, since memory is always a threshold resource)."
            )
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_names_every_field_of_the_args() {
        let schema = schema();
        let json = serde_json::to_value(LowNodeLoadArgs {
            paused: true,
            dry_run: true,
            number_of_nodes: 1,
            evictable_namespaces: Some(Namespaces::default()),
            node_selector: Some(LabelSelectorSpec::default()),
            pod_selectors: vec![PodSelector::default()],
            use_deviation_thresholds: true,
            high_thresholds: Some(Thresholds::new()),
            low_thresholds: Some(Thresholds::new()),
            prod_high_thresholds: Some(Thresholds::new()),
            prod_low_thresholds: Some(Thresholds::new()),
            node_pools: vec![NodePool::default()],
            count_metric_updates: true,
            reserve_only_evicted: true,
            default_each_anomaly_field: true,
            keep_high_without_low: true,
            ..LowNodeLoadArgs::with_defaults()
        })
        .unwrap();
        for key in json.as_object().unwrap().keys() {
            assert!(
                schema["properties"].get(key).is_some(),
                "{key} missing from the schema"
            );
        }
        assert_eq!(json.as_object().unwrap().len(), 21);
    }
}
