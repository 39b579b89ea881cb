//! # TestColumnsPodLifeTime
//!
//! PodLifeTime's `maxPodLifeTimeSeconds` criterion (with `namespaces.include`/`exclude`) written
//! against the language-neutral read path only: the `columns` import (ABI 1.4) plus `cluster`
//! and `evictor`, never the rkyv archive — what a policy in Python or Go does. The engine's tests
//! run it beside the built-in PodLifeTime on the same snapshots and expect the same proposals, in
//! the same order; they also check that it was handed no snapshot section.
//!
//! It is **not** a built-in: the server never embeds it; tests load the component the builtins
//! crate builds (`test_columns.wasm`). Owns nothing but this one check of the ABI.
//!
//! The pass, as PodLifeTime's: the pods bound to the nodes in scope (node by node, in scope
//! order, snapshot order within a node) older than the limit and in the namespaces admitted,
//! through the evictor's Filter and PreEvictionFilter, oldest first (a stable sort), proposed
//! one by one: a total limit ends the pass, any other refusal moves on to the next pod.

use serde::Deserialize;

/// The plugin name this module reports.
pub const NAME: &str = "TestColumnsPodLifeTime";

/// The args: PodLifeTime's, reduced to the criterion this check needs.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Args {
    pub max_pod_life_time_seconds: u64,
    #[serde(default)]
    pub namespaces: Namespaces,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Namespaces {
    #[serde(default)]
    pub include: Vec<String>,
    #[serde(default)]
    pub exclude: Vec<String>,
}

impl Args {
    pub fn parse(text: &str) -> Result<Args, String> {
        let args: Args = serde_json::from_str(text).map_err(|e| format!("invalid args: {e}"))?;
        if !args.namespaces.include.is_empty() && !args.namespaces.exclude.is_empty() {
            return Err("only one of Include/Exclude namespaces can be set".into());
        }
        Ok(args)
    }
}

/// Whether a pod's namespace (a string id) is admitted by the args, with the args' names
/// resolved to string ids (`None`: no object uses that name, so no pod is in it).
pub fn namespace_admitted(
    namespace: u32,
    include: &[Option<u32>],
    exclude: &[Option<u32>],
) -> bool {
    if !include.is_empty() {
        return include.contains(&Some(namespace));
    }
    !exclude.contains(&Some(namespace))
}

/// Seconds from `since_ms` to `now_ms`; `None` for a time after `now_ms`.
pub fn age_secs(now_ms: i64, since_ms: i64) -> Option<u64> {
    let ms = now_ms.checked_sub(since_ms)?;
    (ms >= 0).then_some(ms as u64 / 1000)
}

#[cfg(target_arch = "wasm32")]
mod component {
    use super::*;
    use bindings::rebalancer::policy::types::{ExtensionPoint, LogLevel, Refusal};
    use bindings::rebalancer::policy::{cluster, columns, evictor};

    /// The absent `u32` of a column (`u32::MAX`).
    const ABSENT: u32 = u32::MAX;
    use rebalancer_policy_sdk::guest::bindings;

    struct Exported;

    impl bindings::Guest for Exported {
        fn info() -> bindings::PolicyInfo {
            bindings::PolicyInfo {
                name: NAME.into(),
                version: "0.1.0".into(),
                description: "PodLifeTime's maxPodLifeTimeSeconds through the columns import \
                              only (a test of ABI 1.4)"
                    .into(),
                extension_points: vec![ExtensionPoint::Deschedule],
                args_schema: serde_json::json!({
                    "type": "object",
                    "properties": {
                        "maxPodLifeTimeSeconds": {"type": "integer", "minimum": 0},
                        "namespaces": {"type": "object"}
                    },
                    "required": ["maxPodLifeTimeSeconds"]
                })
                .to_string(),
                default_args: r#"{"maxPodLifeTimeSeconds":86400}"#.into(),
            }
        }

        fn validate_args(args: String) -> Result<(), Vec<bindings::ArgError>> {
            Args::parse(&args).map(|_| ()).map_err(|message| {
                vec![bindings::ArgError {
                    field: String::new(),
                    message,
                }]
            })
        }

        fn deschedule(args: String) -> Result<(), String> {
            let args = Args::parse(&args)?;
            deschedule(&args)
        }

        fn balance(_: String) -> Result<(), String> {
            Err(format!("{NAME} implements deschedule only"))
        }
    }

    fn deschedule(args: &Args) -> Result<(), String> {
        let now = cluster::now_ms();
        let node = columns::column_u32("pods", "node")?;
        let namespace = columns::column_u32("pods", "namespace")?;
        let created = columns::column_s64("pods", "creation-ms")?;
        let node_count = columns::row_count("nodes")? as usize;
        let resolve = |names: &[String]| -> Vec<Option<u32>> {
            names.iter().map(|n| columns::string_id(n)).collect()
        };
        let (include, exclude) = (
            resolve(&args.namespaces.include),
            resolve(&args.namespaces.exclude),
        );

        let mut by_node: Vec<Vec<u32>> = vec![Vec::new(); node_count];
        for (pod, &n) in node.iter().enumerate() {
            if n != ABSENT {
                by_node[n as usize].push(pod as u32);
            }
        }
        let mut candidates = Vec::new();
        for n in cluster::nodes() {
            candidates.extend(by_node[n as usize].iter().copied().filter(|&p| {
                let p = p as usize;
                namespace_admitted(namespace[p], &include, &exclude)
                    && age_secs(now, created[p])
                        .is_some_and(|age| age > args.max_pod_life_time_seconds)
            }));
        }
        let passed = evictor::filter(&candidates);
        let mut pods = if passed.is_empty() {
            passed
        } else {
            evictor::pre_eviction_filter(&passed)
        };
        pods.sort_by_key(|&p| created[p as usize]);

        let names = columns::column_text("pods", "name")?;
        let (mut proposed, mut refused) = (0, 0);
        for pod in pods {
            let age = age_secs(now, created[pod as usize]).unwrap_or(0);
            let reason = format!(
                "pod {} is {age}s old, more than maxPodLifeTimeSeconds {}",
                names[pod as usize], args.max_pod_life_time_seconds
            );
            match evictor::propose_eviction(pod, &reason) {
                Ok(()) => proposed += 1,
                Err(Refusal::TotalLimit) => {
                    refused += 1;
                    break;
                }
                Err(_) => refused += 1,
            }
        }
        cluster::log(
            LogLevel::Info,
            &format!("{NAME}: {proposed} proposed, {refused} refused"),
        );
        Ok(())
    }

    bindings::export_bindings!(Exported with_types_in bindings);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_include_or_exclude_by_string_id() {
        assert!(namespace_admitted(3, &[], &[]));
        assert!(namespace_admitted(3, &[Some(3)], &[]));
        assert!(!namespace_admitted(3, &[Some(4), None], &[]));
        assert!(!namespace_admitted(3, &[], &[Some(3)]));
        assert!(namespace_admitted(3, &[], &[None]));
    }

    #[test]
    fn ages_are_whole_seconds_and_never_negative() {
        assert_eq!(age_secs(10_999, 1_000), Some(9));
        assert_eq!(age_secs(1_000, 2_000), None);
        assert_eq!(age_secs(i64::MAX, i64::MIN), None);
    }

    #[test]
    fn args_refuse_both_include_and_exclude() {
        assert!(Args::parse(r#"{"maxPodLifeTimeSeconds":5}"#).is_ok());
        let both = r#"{"maxPodLifeTimeSeconds":5,"namespaces":{"include":["a"],"exclude":["b"]}}"#;
        assert!(Args::parse(both).unwrap_err().contains("only one of"));
        assert!(
            Args::parse("{}")
                .unwrap_err()
                .contains("maxPodLifeTimeSeconds")
        );
    }
}
