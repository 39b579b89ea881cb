//! # PodAgeExample
//!
//! The worked example of `docs/writing-a-policy.md`: propose evicting pods that are older than
//! `maxAgeSeconds`, oldest first, optionally only in the namespaces of `includeNamespaces`. The
//! host's evictor decides what may go (DefaultEvictor filters, PDBs, the run's limits).
//!
//! It is not a built-in: build it with
//! `cargo build -p example-pod-age --target wasm32-wasip2 --profile policy` and upload
//! `target/wasm32-wasip2/policy/example_pod_age.wasm` to `POST /api/v1/policies`.

use rebalancer_policy_sdk::{
    ArgError, Context, ExtensionPoint, Policy, PolicyInfo, Refusal, StrId,
};
use serde::{Deserialize, Serialize};

/// The plugin's args, as they appear under `pluginConfig[].args` in a DeschedulerPolicy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct PodAgeArgs {
    /// Pods created longer ago than this are proposed for eviction.
    pub max_age_seconds: u64,
    /// Only pods in these namespaces; empty means every namespace.
    pub include_namespaces: Vec<String>,
}

impl Default for PodAgeArgs {
    fn default() -> Self {
        PodAgeArgs {
            max_age_seconds: 7 * 24 * 3600,
            include_namespaces: Vec::new(),
        }
    }
}

/// The policy. A unit struct: everything it needs arrives in the [`Context`] and the args.
#[derive(Debug, Clone, Copy, Default)]
pub struct PodAgeExample;

impl Policy for PodAgeExample {
    type Args = PodAgeArgs;

    fn info() -> PolicyInfo {
        PolicyInfo {
            name: "PodAgeExample".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "Example policy: evicts pods older than maxAgeSeconds, oldest first, \
                          optionally only in includeNamespaces."
                .into(),
            extension_points: vec![ExtensionPoint::Deschedule],
            args_schema: serde_json::json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "additionalProperties": false,
                "properties": {
                    "maxAgeSeconds": {"type": "integer", "minimum": 1},
                    "includeNamespaces": {"type": "array", "items": {"type": "string"}},
                },
            }),
            default_args: serde_json::to_value(PodAgeArgs::default())
                .expect("default args serialize"),
        }
    }

    fn validate(args: &PodAgeArgs) -> Vec<ArgError> {
        let mut errors = Vec::new();
        if args.max_age_seconds == 0 {
            errors.push(ArgError::new("maxAgeSeconds", "must be at least 1"));
        }
        for (i, ns) in args.include_namespaces.iter().enumerate() {
            if ns.is_empty() {
                errors.push(ArgError::new(
                    format!("includeNamespaces[{i}]"),
                    "must not be empty",
                ));
            }
        }
        errors
    }

    fn deschedule(ctx: &mut Context<'_>, args: &PodAgeArgs) -> Result<(), String> {
        let cluster = ctx.cluster;
        let now_ms = ctx.now_ms();
        let max_age_ms = i64::try_from(args.max_age_seconds)
            .ok()
            .and_then(|s| s.checked_mul(1000))
            .unwrap_or(i64::MAX);

        // Work on ids: a namespace no object uses has no id, so it cannot match any pod.
        let namespaces: Vec<StrId> = args
            .include_namespaces
            .iter()
            .filter_map(|name| cluster.lookup(name))
            .collect();
        if !args.include_namespaces.is_empty() && namespaces.is_empty() {
            ctx.debug("none of includeNamespaces exists in the cluster");
            return Ok(());
        }

        // Only pods on the nodes this evaluation covers (Ready, matching the nodeSelector).
        let mut in_scope = vec![false; cluster.node_count()];
        for node in ctx.nodes() {
            in_scope[node as usize] = true;
        }
        let mut old: Vec<u32> = cluster
            .pods()
            .filter(|pod| pod.node().is_some_and(|n| in_scope[n as usize]))
            .filter(|pod| namespaces.is_empty() || namespaces.contains(&pod.namespace_id()))
            .filter(|pod| now_ms - pod.creation_ms() > max_age_ms)
            .map(|pod| pod.id)
            .collect();
        // Oldest first, like descheduler's PodLifeTime; the pod id breaks ties.
        old.sort_by_key(|&id| (cluster.pod(id).creation_ms(), id));

        // The evictor's filters (DefaultEvictor: mirror/static/DaemonSet pods, local storage,
        // priority threshold, …) decide which of them may be evicted at all.
        let evictable = ctx.filter(&old);
        let evictable = ctx.pre_eviction_filter(&evictable);

        let mut proposed = 0;
        for id in evictable {
            let pod = cluster.pod(id);
            let age_s = (now_ms - pod.creation_ms()) / 1000;
            let reason = format!(
                "pod is {} old, over maxAgeSeconds {}",
                human_duration(age_s),
                args.max_age_seconds
            );
            match ctx.propose_eviction(id, &reason) {
                Ok(()) => proposed += 1,
                // The run's total limit is reached: nothing more will be admitted.
                Err(Refusal::TotalLimit) => break,
                // A node or namespace limit, a PDB, or another plugin got there first: next pod.
                Err(refusal) => ctx.debug(&format!(
                    "{}/{} not proposed: {refusal}",
                    pod.namespace(),
                    pod.name()
                )),
            }
        }
        ctx.info(&format!(
            "{proposed} of {} pods older than {}s proposed",
            old.len(),
            args.max_age_seconds
        ));
        Ok(())
    }
}

/// `93784` → `1d2h3m`: short, for reasons a person reads.
pub fn human_duration(seconds: i64) -> String {
    let (d, h, m) = (
        seconds / 86_400,
        seconds % 86_400 / 3600,
        seconds % 3600 / 60,
    );
    match (d, h) {
        (0, 0) => format!("{m}m"),
        (0, _) => format!("{h}h{m}m"),
        _ => format!("{d}d{h}h{m}m"),
    }
}

rebalancer_policy_sdk::export_policy!(PodAgeExample);
