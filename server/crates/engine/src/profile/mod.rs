//! Profiles: one DeschedulerPolicy (`descheduler/v1alpha2`) document each.
//!
//! Owns: turning a DeschedulerPolicy document into the [`ProfileSpec`] a run evaluates (plugin
//! sets, their plugins per extension point with args, evictor args, policy-wide limits), the
//! checks of that spec against the registered policies ([`check_plugins`]), and the built-in
//! `default` profile ([`default_profile_document`]).
//! Must not: touch SQL or HTTP. [`parse_deschedule_policy`] is pure; [`check_plugins`] calls into
//! policies and is blocking.
//!
//! Differences from descheduler, on purpose: descheduler's top-level decoder is lenient, so a
//! field at the wrong level is silently ignored (descheduler issue #1627); here every unknown or
//! misplaced field is an error naming it. Fields descheduler accepts but that have no effect here
//! yet are accepted and reported as warnings.

mod policy_doc;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::wasm::{Engine, PolicyRegistry};
use rebalancer_policy_sdk::ExtensionPoint;

pub use policy_doc::{
    ParseOutcome, ParsedPolicy, extension_point_key, parse_all, parse_with_warnings,
};

/// The profile every server has (created at start-up when missing).
pub const DEFAULT_PROFILE: &str = "default";
/// The evictor plugin, whose rules the host runs (not a module).
pub const DEFAULT_EVICTOR: &str = "DefaultEvictor";
/// The only DeschedulerPolicy version accepted.
pub const API_VERSION: &str = "descheduler/v1alpha2";
pub const KIND: &str = "DeschedulerPolicy";

/// A profile = one DeschedulerPolicy (descheduler/v1alpha2) document, parsed and normalised.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProfileSpec {
    /// `nodeSelector`: label selector limiting the nodes every plugin sees.
    pub node_selector: Option<String>,
    /// `maxNoOfPodsToEvictPerNode`.
    pub max_per_node: Option<u32>,
    /// `maxNoOfPodsToEvictPerNamespace`.
    pub max_per_namespace: Option<u32>,
    /// `maxNoOfPodsToEvictTotal`.
    pub max_total: Option<u32>,
    /// descheduler's `profiles[]`, in document order.
    pub plugin_sets: Vec<PluginSetSpec>,
}

/// One entry of the document's `profiles[]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PluginSetSpec {
    pub name: String,
    /// DefaultEvictor args, `{}` when the document has none (all defaults).
    #[schema(value_type = Object)]
    pub evictor_args: Value,
    /// `plugins.deschedule.enabled`, in order.
    pub deschedule: Vec<PluginSpec>,
    /// `plugins.balance.enabled`, in order.
    pub balance: Vec<PluginSpec>,
}

/// An enabled plugin with its args.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PluginSpec {
    pub name: String,
    /// From `pluginConfig`; `{}` when the entry has no args (the plugin's defaults).
    #[schema(value_type = Object)]
    pub args: Value,
}

/// A problem with a document, located by a path into it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ProfileError {
    /// Where, e.g. `profiles[0].pluginConfig[1].args.thresholds`; empty for the whole document.
    pub field: String,
    pub message: String,
}

impl ProfileError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        ProfileError {
            field: field.into(),
            message: message.into(),
        }
    }
}

impl std::fmt::Display for ProfileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.field.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.field, self.message)
        }
    }
}

impl ProfileError {
    /// Every problem of `errors` on one line, `; `-separated, for log lines and messages.
    pub fn summary(errors: &[ProfileError]) -> String {
        errors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// Parse a DeschedulerPolicy document (as JSON) into the spec a run evaluates.
///
/// Every problem found is reported, not only the first. Warnings are dropped; use
/// [`parse_with_warnings`] to get them.
pub fn parse_deschedule_policy(doc: &Value) -> Result<ProfileSpec, Vec<ProfileError>> {
    parse_with_warnings(doc).map(|parsed| parsed.spec)
}

/// Check a parsed profile against the registered policies: every enabled plugin must be
/// registered, implement the extension point it is enabled at, and accept its args.
///
/// Blocking: asks each policy to validate its args.
pub fn check_plugins(
    spec: &ProfileSpec,
    doc: &Value,
    engine: &Engine,
    registry: &PolicyRegistry,
) -> Vec<ProfileError> {
    let mut errors = Vec::new();
    for (set_index, set) in spec.plugin_sets.iter().enumerate() {
        let mut validated: Vec<&str> = Vec::new();
        for (point, plugins) in [
            (ExtensionPoint::Deschedule, &set.deschedule),
            (ExtensionPoint::Balance, &set.balance),
        ] {
            for (index, plugin) in plugins.iter().enumerate() {
                let at = format!(
                    "profiles[{set_index}].plugins.{}.enabled[{index}]",
                    policy_doc::extension_point_key(doc, set_index, point.as_str())
                );
                let Some(registered) = registry.get(&plugin.name) else {
                    errors.push(ProfileError::new(
                        at,
                        format!(
                            "unknown plugin \"{}\": no policy with this name is registered \
                             (registered: {}); upload it with POST /api/v1/policies",
                            plugin.name,
                            registered_names(registry)
                        ),
                    ));
                    continue;
                };
                let meta = &registered.policy.meta;
                if !meta.implements(point) {
                    errors.push(ProfileError::new(
                        at,
                        format!(
                            "plugin \"{}\" does not implement the {} extension point (it \
                             implements: {})",
                            plugin.name,
                            point.as_str(),
                            meta.extension_points.join(", ")
                        ),
                    ));
                    continue;
                }
                if validated.contains(&plugin.name.as_str()) {
                    continue;
                }
                validated.push(&plugin.name);
                if let Err(arg_errors) = engine.validate_args(&registered.policy, &plugin.args) {
                    let base = policy_doc::plugin_args_path(doc, set_index, &plugin.name);
                    errors.extend(arg_errors.into_iter().map(|e| {
                        let field = if e.field.is_empty() {
                            base.clone()
                        } else {
                            format!("{base}.{}", e.field)
                        };
                        ProfileError::new(field, e.message)
                    }));
                }
            }
        }
    }
    errors
}

/// The errors of a document in one list: what reading it found, then what checking its plugins
/// found — leaving out plugin problems at a field reading already reported (or inside it), which
/// would only restate them.
pub fn merge_errors(reading: Vec<ProfileError>, checking: Vec<ProfileError>) -> Vec<ProfileError> {
    let mut all = reading;
    let reported: Vec<String> = all.iter().map(|e| e.field.clone()).collect();
    let restates = |field: &str| {
        reported.iter().any(|r| {
            !r.is_empty()
                && (field == r
                    || field
                        .strip_prefix(r.as_str())
                        .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('[')))
        })
    };
    all.extend(checking.into_iter().filter(|e| !restates(&e.field)));
    all
}

fn registered_names(registry: &PolicyRegistry) -> String {
    let names: Vec<String> = registry
        .list()
        .into_iter()
        .map(|p| p.policy.meta.name.clone())
        .collect();
    if names.is_empty() {
        "none".to_string()
    } else {
        names.join(", ")
    }
}

/// The descheduler Helm chart's (0.36) default policy: deschedule RemovePodsHavingTooManyRestarts
/// (100, init containers), RemovePodsViolatingNodeTaints, RemovePodsViolatingNodeAffinity
/// (required) and RemovePodsViolatingInterPodAntiAffinity; balance RemoveDuplicates,
/// RemovePodsViolatingTopologySpreadConstraint and LowNodeUtilization (20/50 on cpu, memory and
/// pods); the chart's DefaultEvictor protections (local-storage pods evictable, PVC pods
/// protected).
pub fn default_profile_document() -> Value {
    json!({
        "apiVersion": API_VERSION,
        "kind": KIND,
        "profiles": [{
            "name": "default",
            "pluginConfig": [
                {
                    "name": DEFAULT_EVICTOR,
                    "args": {
                        "podProtections": {
                            "defaultDisabled": ["PodsWithLocalStorage"],
                            "extraEnabled": ["PodsWithPVC"]
                        }
                    }
                },
                { "name": "RemoveDuplicates" },
                {
                    "name": "RemovePodsHavingTooManyRestarts",
                    "args": { "podRestartThreshold": 100, "includingInitContainers": true }
                },
                {
                    "name": "RemovePodsViolatingNodeAffinity",
                    "args": { "nodeAffinityType": ["requiredDuringSchedulingIgnoredDuringExecution"] }
                },
                { "name": "RemovePodsViolatingNodeTaints" },
                { "name": "RemovePodsViolatingInterPodAntiAffinity" },
                { "name": "RemovePodsViolatingTopologySpreadConstraint" },
                {
                    "name": "LowNodeUtilization",
                    "args": {
                        "thresholds": { "cpu": 20, "memory": 20, "pods": 20 },
                        "targetThresholds": { "cpu": 50, "memory": 50, "pods": 50 }
                    }
                }
            ],
            "plugins": {
                "balance": {
                    "enabled": [
                        "RemoveDuplicates",
                        "RemovePodsViolatingTopologySpreadConstraint",
                        "LowNodeUtilization"
                    ]
                },
                "deschedule": {
                    "enabled": [
                        "RemovePodsHavingTooManyRestarts",
                        "RemovePodsViolatingNodeTaints",
                        "RemovePodsViolatingNodeAffinity",
                        "RemovePodsViolatingInterPodAntiAffinity"
                    ]
                }
            }
        }]
    })
}

#[cfg(test)]
mod tests;
