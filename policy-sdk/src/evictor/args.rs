//! DefaultEvictor's arguments: [`DefaultEvictorArgs`] (every argument of descheduler v0.36, with
//! its JSON names and defaults), the pod protections they switch on or off ([`PodProtection`],
//! [`Protections`]) and their validation rules, in descheduler's words.
//!
//! Owns parsing and validating the args only: resolving them against a snapshot is
//! [`super::config`], applying them to pods is [`super::filter`]. Must not look at a cluster.

use crate::k8s::duration::parse_go_duration;

use serde::{Deserialize, Serialize};

use crate::k8s::selector::{LabelSelectorSpec, Selector};
use crate::policy::ArgError;

/// DefaultEvictor's args (`DefaultEvictorArgs`, descheduler v0.36), as written in a policy.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DefaultEvictorArgs {
    /// Accepted and ignored, as the inline `TypeMeta` of the Go type is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Accepted and ignored, as the inline `TypeMeta` of the Go type is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// String label selector of the candidate nodes for nodeFit (`""`: all nodes).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub node_selector: String,
    /// Pods must match it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelectorSpec>,
    /// The pod's Namespace labels must match it (checked in PreEvictionFilter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_label_selector: Option<LabelSelectorSpec>,
    /// Pods with priority at or above it are not evictable (only while SystemCriticalPods is on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_threshold: Option<PriorityThreshold>,
    /// Check in PreEvictionFilter that the pod fits some other ready node.
    #[serde(default)]
    pub node_fit: bool,
    /// Above 1: pods whose single owner has fewer pods are not evictable.
    #[serde(default)]
    pub min_replicas: u32,
    /// Go duration (`"5m"`, `"1h30m"`): pods started more recently are not evictable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_pod_age: Option<String>,
    /// `""` (= `Preferred`), `Preferred` or `Mandatory`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub no_eviction_policy: String,
    #[serde(default)]
    pub pod_protections: PodProtections,
    /// Deprecated: `podProtections.defaultDisabled: [PodsWithLocalStorage]`.
    #[serde(default)]
    pub evict_local_storage_pods: bool,
    /// Deprecated: `podProtections.defaultDisabled: [DaemonSetPods]`.
    #[serde(default)]
    pub evict_daemon_set_pods: bool,
    /// Deprecated: `podProtections.defaultDisabled: [SystemCriticalPods]`.
    #[serde(default)]
    pub evict_system_critical_pods: bool,
    /// Deprecated: `podProtections.extraEnabled: [PodsWithPVC]`.
    #[serde(default)]
    pub ignore_pvc_pods: bool,
    /// Deprecated: `podProtections.extraEnabled: [PodsWithoutPDB]`.
    #[serde(default, rename = "ignorePodsWithoutPDB")]
    pub ignore_pods_without_pdb: bool,
    /// Deprecated: `podProtections.defaultDisabled: [FailedBarePods]`.
    #[serde(default)]
    pub evict_failed_bare_pods: bool,
    /// Rebalancer's own, opt-in (not in descheduler): a Go duration (`"30m"`). A pod whose
    /// owner (first ownerRef) had a pod proposed by an earlier run of this profile on this
    /// cluster less than this long ago does not pass Filter, so evict-and-return loops stop.
    /// Remembered in the profile's policy state; dry runs do not count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cooldown: Option<String>,
}

/// `priorityThreshold`: a value or the name of a PriorityClass (only one of them).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PriorityThreshold {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<i32>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
}

/// `podProtections`. Protection names are kept as written so validation can name bad ones.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodProtections {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_enabled: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub default_disabled: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<PodProtectionsConfig>,
}

/// `podProtections.config`; field names are protection names.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PodProtectionsConfig {
    #[serde(
        rename = "PodsWithPVC",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub pods_with_pvc: Option<PodsWithPvcConfig>,
}

/// `podProtections.config.PodsWithPVC`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodsWithPvcConfig {
    /// Protect only pods whose PVCs use one of these classes (empty: every PVC pod).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub protected_storage_classes: Vec<ProtectedStorageClass>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProtectedStorageClass {
    pub name: String,
}

/// One pod protection of DefaultEvictor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PodProtection {
    PodsWithLocalStorage,
    DaemonSetPods,
    SystemCriticalPods,
    FailedBarePods,
    PodsWithPvc,
    PodsWithoutPdb,
    PodsWithResourceClaims,
}

impl PodProtection {
    /// On unless listed in `defaultDisabled`, in descheduler's order.
    pub const DEFAULT: [PodProtection; 4] = [
        PodProtection::PodsWithLocalStorage,
        PodProtection::SystemCriticalPods,
        PodProtection::FailedBarePods,
        PodProtection::DaemonSetPods,
    ];
    /// Off unless listed in `extraEnabled`.
    pub const EXTRA: [PodProtection; 3] = [
        PodProtection::PodsWithPvc,
        PodProtection::PodsWithoutPdb,
        PodProtection::PodsWithResourceClaims,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            PodProtection::PodsWithLocalStorage => "PodsWithLocalStorage",
            PodProtection::DaemonSetPods => "DaemonSetPods",
            PodProtection::SystemCriticalPods => "SystemCriticalPods",
            PodProtection::FailedBarePods => "FailedBarePods",
            PodProtection::PodsWithPvc => "PodsWithPVC",
            PodProtection::PodsWithoutPdb => "PodsWithoutPDB",
            PodProtection::PodsWithResourceClaims => "PodsWithResourceClaims",
        }
    }

    pub fn parse(s: &str) -> Option<PodProtection> {
        PodProtection::DEFAULT
            .into_iter()
            .chain(PodProtection::EXTRA)
            .find(|p| p.as_str() == s)
    }
}

/// The protections in force.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Protections {
    pub local_storage: bool,
    pub daemon_set: bool,
    pub system_critical: bool,
    pub failed_bare: bool,
    pub pvc: bool,
    pub without_pdb: bool,
    pub resource_claims: bool,
}

impl Protections {
    fn set(&mut self, p: PodProtection, on: bool) {
        match p {
            PodProtection::PodsWithLocalStorage => self.local_storage = on,
            PodProtection::DaemonSetPods => self.daemon_set = on,
            PodProtection::SystemCriticalPods => self.system_critical = on,
            PodProtection::FailedBarePods => self.failed_bare = on,
            PodProtection::PodsWithPvc => self.pvc = on,
            PodProtection::PodsWithoutPdb => self.without_pdb = on,
            PodProtection::PodsWithResourceClaims => self.resource_claims = on,
        }
    }
}

fn list_names(list: &[PodProtection]) -> String {
    let names: Vec<&str> = list.iter().map(|p| p.as_str()).collect();
    format!("[{}]", names.join(" "))
}

impl DefaultEvictorArgs {
    /// Parse args JSON; `""` and `null` mean all defaults. Unknown fields are rejected.
    pub fn from_json(json: &str) -> Result<Self, ArgError> {
        let t = json.trim();
        if t.is_empty() || t == "null" {
            return Ok(DefaultEvictorArgs::default());
        }
        serde_json::from_str(t).map_err(|e| ArgError::new("", format!("DefaultEvictor args: {e}")))
    }

    fn has_deprecated_fields(&self) -> bool {
        self.evict_local_storage_pods
            || self.evict_daemon_set_pods
            || self.evict_system_critical_pods
            || self.ignore_pvc_pods
            || self.evict_failed_bare_pods
            || self.ignore_pods_without_pdb
    }

    fn uses_pod_protections(&self) -> bool {
        !self.pod_protections.extra_enabled.is_empty()
            || !self.pod_protections.default_disabled.is_empty()
    }

    /// descheduler's `ValidateDefaultEvictorArgs`, plus what descheduler only finds out when it
    /// builds the plugin (selectors that do not parse, a `minPodAge` that is not a duration).
    /// Every problem is reported, not only the first.
    pub fn validate(&self) -> Vec<ArgError> {
        let mut errors = Vec::new();
        if let Some(t) = &self.priority_threshold
            && t.value.is_some()
            && !t.name.is_empty()
        {
            errors.push(ArgError::new(
                "priorityThreshold",
                "priority threshold misconfigured, only one of priorityThreshold fields can be set",
            ));
        }
        if !self.no_eviction_policy.is_empty()
            && self.no_eviction_policy != "Preferred"
            && self.no_eviction_policy != "Mandatory"
        {
            errors.push(ArgError::new(
                "noEvictionPolicy",
                format!(
                    "noEvictionPolicy accepts only [\"Preferred\" \"Mandatory\"] values, got {:?}",
                    self.no_eviction_policy
                ),
            ));
        }
        if let Some(c) = &self.cooldown {
            match crate::k8s::duration::parse_go_duration(c) {
                Ok(ns) if ns > 0 => {}
                Ok(_) => errors.push(ArgError::new(
                    "cooldown",
                    format!("must be a positive duration, got {c:?}"),
                )),
                Err(e) => errors.push(ArgError::new("cooldown", e)),
            }
        }
        if self.has_deprecated_fields() && self.uses_pod_protections() {
            errors.push(ArgError::new(
                "podProtections",
                "cannot use Deprecated fields alongside PodProtections.ExtraEnabled or PodProtections.DefaultDisabled",
            ));
        }
        let pp = &self.pod_protections;
        for (i, name) in pp.extra_enabled.iter().enumerate() {
            if !PodProtection::parse(name).is_some_and(|p| PodProtection::EXTRA.contains(&p)) {
                errors.push(ArgError::new(
                    format!("podProtections.extraEnabled[{i}]"),
                    format!(
                        "invalid pod protection policy in ExtraEnabled: {name:?}. Valid options are: {}",
                        list_names(&PodProtection::EXTRA)
                    ),
                ));
            }
        }
        for (i, name) in pp.default_disabled.iter().enumerate() {
            if !PodProtection::parse(name).is_some_and(|p| PodProtection::DEFAULT.contains(&p)) {
                errors.push(ArgError::new(
                    format!("podProtections.defaultDisabled[{i}]"),
                    format!(
                        "invalid pod protection policy in DefaultDisabled: {name:?}. Valid options are: {}",
                        list_names(&PodProtection::DEFAULT)
                    ),
                ));
            }
        }
        if has_duplicates(&pp.default_disabled) {
            errors.push(ArgError::new(
                "podProtections.defaultDisabled",
                "PodProtections.DefaultDisabled contains duplicate entries",
            ));
        }
        if has_duplicates(&pp.extra_enabled) {
            errors.push(ArgError::new(
                "podProtections.extraEnabled",
                "PodProtections.ExtraEnabled contains duplicate entries",
            ));
        }
        if let Some(s) = &self.label_selector {
            errors.extend(s.validate("labelSelector"));
        }
        if let Some(s) = &self.namespace_label_selector {
            errors.extend(s.validate("namespaceLabelSelector"));
        }
        if let Err(e) = Selector::parse(&self.node_selector) {
            errors.push(ArgError::new("nodeSelector", e.to_string()));
        }
        if let Some(age) = &self.min_pod_age
            && let Err(e) = parse_go_duration(age)
        {
            errors.push(ArgError::new("minPodAge", e));
        }
        errors
    }

    /// The protections in force: `podProtections` when it lists anything (the deprecated booleans
    /// are then ignored), otherwise the deprecated booleans.
    pub fn effective_protections(&self) -> Protections {
        let mut p = Protections::default();
        if self.uses_pod_protections() {
            for d in PodProtection::DEFAULT {
                p.set(d, true);
            }
            for name in &self.pod_protections.default_disabled {
                if let Some(d) = PodProtection::parse(name)
                    && PodProtection::DEFAULT.contains(&d)
                {
                    p.set(d, false);
                }
            }
            for name in &self.pod_protections.extra_enabled {
                if let Some(e) = PodProtection::parse(name)
                    && PodProtection::EXTRA.contains(&e)
                {
                    p.set(e, true);
                }
            }
        } else {
            p.local_storage = !self.evict_local_storage_pods;
            p.daemon_set = !self.evict_daemon_set_pods;
            p.system_critical = !self.evict_system_critical_pods;
            p.failed_bare = !self.evict_failed_bare_pods;
            p.pvc = self.ignore_pvc_pods;
            p.without_pdb = self.ignore_pods_without_pdb;
        }
        p
    }

    /// `podProtections.config.PodsWithPVC.protectedStorageClasses[].name`.
    pub fn protected_storage_classes(&self) -> Vec<&str> {
        self.pod_protections
            .config
            .as_ref()
            .and_then(|c| c.pods_with_pvc.as_ref())
            .map(|c| {
                c.protected_storage_classes
                    .iter()
                    .map(|s| s.name.as_str())
                    .collect()
            })
            .unwrap_or_default()
    }
}

fn has_duplicates(list: &[String]) -> bool {
    list.iter().enumerate().any(|(i, a)| list[..i].contains(a))
}
