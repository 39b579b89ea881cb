//! The thresholds a profile balances against, for the balance and what-if views
//! (`rebalancer_cluster::whatif` does the computing).
//!
//! Owns reading, from a profile's normalised spec, the thresholds of its balance plugins, in
//! document order (plugin sets, then plugins), as the plugins read their args:
//! - `LowNodeUtilization`: `thresholds` (low), `targetThresholds` (high),
//!   `useDeviationThresholds`; basis `requested` (this server balances on requests only:
//!   `metricsUtilization` is refused when the profile is stored).
//! - `HighNodeUtilization`: `thresholds` (low); no high; basis `requested`.
//! - `LowNodeLoad` (Koordinator): `lowThresholds`, `highThresholds`, `useDeviationThresholds`
//!   of the default node pool (the top-level fields), else of the first `nodePools` entry
//!   (its missing fields inherited from the top level); basis `usage`. As Koordinator defaults
//!   them, a resource with a high threshold but no low one gets low = high = 100 (0 with
//!   deviation thresholds), unless `keepHighWithoutLow` (then low = high).
//!
//! Only `cpu`, `memory` and `pods` are reported (the three resources the views show); args that
//! do not read as the plugin's (a profile stored by an older server) give no threshold rather
//! than an error.
//! Must not: do I/O; validate args (profiles are validated when stored).

use rebalancer_cluster::whatif::{Basis, Levels, Threshold};
use rebalancer_engine::profile::ProfileSpec;
use serde_json::{Map, Value};

/// Plugins whose thresholds the views show.
pub const LOW_NODE_UTILIZATION: &str = "LowNodeUtilization";
pub const HIGH_NODE_UTILIZATION: &str = "HighNodeUtilization";
pub const LOW_NODE_LOAD: &str = "LowNodeLoad";

/// The thresholds of every balance plugin `spec` enables, in document order.
pub fn thresholds(spec: &ProfileSpec) -> Vec<Threshold> {
    spec.plugin_sets
        .iter()
        .flat_map(|set| set.balance.iter().chain(&set.deschedule))
        .filter_map(|plugin| {
            let args = plugin.args.as_object()?;
            match plugin.name.as_str() {
                LOW_NODE_UTILIZATION => Some(Threshold {
                    plugin: plugin.name.clone(),
                    basis: Basis::Requested,
                    deviation: flag(args, "useDeviationThresholds"),
                    low: levels(args.get("thresholds")),
                    high: levels(args.get("targetThresholds")),
                }),
                HIGH_NODE_UTILIZATION => Some(Threshold {
                    plugin: plugin.name.clone(),
                    basis: Basis::Requested,
                    deviation: false,
                    low: levels(args.get("thresholds")),
                    high: Levels::default(),
                }),
                LOW_NODE_LOAD => Some(low_node_load(&plugin.name, args)),
                _ => None,
            }
        })
        .collect()
}

fn flag(args: &Map<String, Value>, name: &str) -> bool {
    args.get(name).and_then(Value::as_bool).unwrap_or(false)
}

/// `{cpu, memory, pods}` of a `map[resource]percent`.
fn levels(map: Option<&Value>) -> Levels {
    let get = |resource: &str| map?.get(resource)?.as_f64();
    Levels {
        cpu: get("cpu"),
        memory: get("memory"),
        pods: get("pods"),
    }
}

fn low_node_load(name: &str, args: &Map<String, Value>) -> Threshold {
    let top_has_thresholds = ["lowThresholds", "highThresholds"]
        .iter()
        .any(|k| args.get(*k).is_some_and(|v| !v.is_null()));
    let pool = args
        .get("nodePools")
        .and_then(Value::as_array)
        .and_then(|pools| pools.first())
        .and_then(Value::as_object)
        .filter(|_| !top_has_thresholds);
    // A pool's field, else the top level's.
    let field = |key: &str| {
        pool.and_then(|p| p.get(key))
            .filter(|v| !v.is_null())
            .or_else(|| args.get(key))
    };
    let deviation = field("useDeviationThresholds")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let keep_high = flag(args, "keepHighWithoutLow");
    let mut low = levels(field("lowThresholds"));
    let mut high = levels(field("highThresholds"));
    let unset = if deviation { 0.0 } else { 100.0 };
    for (l, h) in [
        (&mut low.cpu, &mut high.cpu),
        (&mut low.memory, &mut high.memory),
        (&mut low.pods, &mut high.pods),
    ] {
        if let (None, Some(hv)) = (*l, *h) {
            if keep_high {
                *l = Some(hv);
            } else {
                *l = Some(unset);
                *h = Some(unset);
            }
        }
    }
    Threshold {
        plugin: name.to_owned(),
        basis: Basis::Usage,
        deviation,
        low,
        high,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rebalancer_engine::profile::{PluginSetSpec, PluginSpec};
    use serde_json::json;

    fn spec(plugins: &[(&str, Value)]) -> ProfileSpec {
        ProfileSpec {
            node_selector: None,
            max_per_node: None,
            max_per_namespace: None,
            max_total: None,
            plugin_sets: vec![PluginSetSpec {
                name: "default".into(),
                evictor_args: json!({}),
                deschedule: vec![PluginSpec {
                    name: "PodLifeTime".into(),
                    args: json!({"maxPodLifeTimeSeconds": 60}),
                }],
                balance: plugins
                    .iter()
                    .map(|(name, args)| PluginSpec {
                        name: (*name).into(),
                        args: args.clone(),
                    })
                    .collect(),
            }],
        }
    }

    fn pct(cpu: Option<f64>, memory: Option<f64>, pods: Option<f64>) -> Levels {
        Levels { cpu, memory, pods }
    }

    #[test]
    fn each_balance_plugin_gives_its_thresholds_in_document_order() {
        let got = thresholds(&spec(&[
            (
                "HighNodeUtilization",
                json!({"thresholds": {"cpu": 20, "memory": 25.5}}),
            ),
            (
                "LowNodeUtilization",
                json!({"useDeviationThresholds": true,
                       "thresholds": {"cpu": 10, "pods": 5, "nvidia.com/gpu": 1},
                       "targetThresholds": {"cpu": 15, "pods": 5, "nvidia.com/gpu": 1}}),
            ),
            ("RemoveDuplicates", json!({})),
        ]));
        assert_eq!(
            got,
            [
                Threshold {
                    plugin: "HighNodeUtilization".into(),
                    basis: Basis::Requested,
                    deviation: false,
                    low: pct(Some(20.0), Some(25.5), None),
                    high: Levels::default(),
                },
                Threshold {
                    plugin: "LowNodeUtilization".into(),
                    basis: Basis::Requested,
                    deviation: true,
                    low: pct(Some(10.0), None, Some(5.0)),
                    high: pct(Some(15.0), None, Some(5.0)),
                },
            ]
        );
        assert!(thresholds(&spec(&[])).is_empty());
    }

    #[test]
    fn low_node_load_reads_the_default_pool_as_koordinator_defaults_it() {
        let got = thresholds(&spec(&[(
            "LowNodeLoad",
            json!({"lowThresholds": {"cpu": 35}, "highThresholds": {"cpu": 65, "memory": 80}}),
        )]));
        assert_eq!(got[0].basis, Basis::Usage);
        // memory has a high threshold but no low one: Koordinator makes both 100.
        assert_eq!(got[0].low, pct(Some(35.0), Some(100.0), None));
        assert_eq!(got[0].high, pct(Some(65.0), Some(100.0), None));

        let got = thresholds(&spec(&[(
            "LowNodeLoad",
            json!({"keepHighWithoutLow": true, "lowThresholds": {"cpu": 35},
                   "highThresholds": {"cpu": 65, "memory": 80}}),
        )]));
        assert_eq!(got[0].low, pct(Some(35.0), Some(80.0), None));
        assert_eq!(got[0].high, pct(Some(65.0), Some(80.0), None));

        // No top-level thresholds: the first pool's, its deviation flag its own.
        let got = thresholds(&spec(&[(
            "LowNodeLoad",
            json!({"nodePools": [
                {"name": "a", "useDeviationThresholds": true,
                 "lowThresholds": {"cpu": 10, "memory": 10},
                 "highThresholds": {"cpu": 20, "memory": 20}},
                {"name": "b", "lowThresholds": {"cpu": 50}, "highThresholds": {"cpu": 90}}
            ]}),
        )]));
        assert!(got[0].deviation);
        assert_eq!(got[0].low, pct(Some(10.0), Some(10.0), None));
        assert_eq!(got[0].high, pct(Some(20.0), Some(20.0), None));
    }
}
