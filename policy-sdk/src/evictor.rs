//! The host's evictor: descheduler's DefaultEvictor (Filter, PreEvictionFilter, nodeFit), the
//! run's eviction limits and the Eviction API's PodDisruptionBudget admission.
//!
//! Owns the pieces the wasm host, native runs and [`crate::testing`] share:
//! - [`DefaultEvictorArgs`]: every DefaultEvictor argument of descheduler v0.36, with its
//!   validation rules, and [`EvictorConfig`], the args resolved once against a snapshot;
//! - [`ClusterIndex`]: per-snapshot indexes (pods by node, requested resources, ready nodes,
//!   PDB coverage, owner replica counts), built once and shared read-only by every run;
//! - [`RunState`]: what one run has decided so far (proposed pods, limit counters, PDB budget
//!   consumed, accepted and refused proposals), shared by all plugins of the run;
//! - [`Evictor`]: a cheap per-call view over the above that implements [`Host`].
//!
//! A pod proposed in a run is terminating for the rest of that run: Filter rejects it and it is
//! never proposed twice, while its requests still count towards node usage (the API server keeps a
//! terminating pod visible). Nothing here talks to Kubernetes: admission is decided from the
//! snapshot's PDB status, the way the conformance harness's emulated Eviction API does.

use std::collections::HashMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::k8s::affinity::{
    anti_affinity_conflicts_on_node, pod_matches_node_selector_and_required_affinity,
};
use crate::k8s::selector::{LabelSelectorSpec, ResolvedSelector, Selector, label_selector_matches};
use crate::k8s::taints::tolerates_all;
use crate::model::{
    ArchivedKeyValue, ArchivedPodPhase, ArchivedUnhealthyPodEvictionPolicy, ArchivedVolumeKind,
    NONE, StrId, TaintEffect,
};
use crate::policy::{ArgError, Host, LogLevel, Refusal};
use crate::view::{Cluster, NodeRef, PodRef, kv_get};

/// `SystemCriticalPriority`: pods at or above it are system critical.
pub const SYSTEM_CRITICAL_PRIORITY: i32 = 2_000_000_000;
/// Present (with any value): every Filter check is bypassed.
pub const EVICT_ANNOTATION: &str = "descheduler.alpha.kubernetes.io/evict";
/// With `noEvictionPolicy: Mandatory`, pods carrying it are not evictable.
pub const PREFER_NO_EVICTION_ANNOTATION: &str =
    "descheduler.alpha.kubernetes.io/prefer-no-eviction";
/// Mirror pods (the API copy of a static pod) carry it.
pub const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";
/// Where the kubelet got the pod from; anything but `api` is a static pod.
pub const SOURCE_ANNOTATION: &str = "kubernetes.io/config.source";

// =============================================================================================
// Arguments
// =============================================================================================

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

// =============================================================================================
// Go durations
// =============================================================================================

/// `time.ParseDuration`: a signed sequence of decimal numbers with units (`ns`, `us`/`µs`, `ms`,
/// `s`, `m`, `h`), e.g. `"300ms"`, `"-1.5h"`, `"2h45m"`; `"0"` needs no unit. Returns nanoseconds.
pub fn parse_go_duration(s: &str) -> Result<i128, String> {
    let invalid = || format!("invalid duration {s:?}");
    let (neg, mut rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total: i128 = 0;
    while !rest.is_empty() {
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let int_part = &rest[..int_len];
        rest = &rest[int_len..];
        let mut frac_part = "";
        if let Some(after) = rest.strip_prefix('.') {
            let frac_len = after.bytes().take_while(u8::is_ascii_digit).count();
            frac_part = &after[..frac_len];
            rest = &after[frac_len..];
        }
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(invalid());
        }
        let unit_len = rest
            .find(|c: char| c == '.' || c.is_ascii_digit())
            .unwrap_or(rest.len());
        if unit_len == 0 {
            return Err(format!("missing unit in duration {s:?}"));
        }
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let scale: i128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60 * 1_000_000_000,
            "h" => 3_600 * 1_000_000_000,
            _ => return Err(format!("unknown unit {unit:?} in duration {s:?}")),
        };
        let int: i128 = if int_part.is_empty() {
            0
        } else {
            int_part.parse().map_err(|_| invalid())?
        };
        let mut value = int.checked_mul(scale).ok_or_else(invalid)?;
        if !frac_part.is_empty() {
            let (mut f, mut div): (i128, i128) = (0, 1);
            for d in frac_part.bytes().take(18) {
                f = f * 10 + i128::from(d - b'0');
                div *= 10;
            }
            value += f * scale / div;
        }
        total = total.checked_add(value).ok_or_else(invalid)?;
        if total > i128::from(i64::MAX) {
            return Err(invalid());
        }
    }
    Ok(if neg { -total } else { total })
}

/// `time.Duration.String()` (`"1h0m0s"`, `"1.5s"`, `"300ms"`).
pub fn format_go_duration(nanos: i128) -> String {
    fn frac(v: u128, prec: u32) -> (u128, String) {
        let pow = 10u128.pow(prec);
        let (int, f) = (v / pow, v % pow);
        if f == 0 {
            (int, String::new())
        } else {
            let digits = format!("{f:0width$}", width = prec as usize);
            (int, format!(".{}", digits.trim_end_matches('0')))
        }
    }
    let sign = if nanos < 0 { "-" } else { "" };
    let u = nanos.unsigned_abs();
    if u == 0 {
        return "0s".into();
    }
    if u < 1_000_000_000 {
        let (prec, unit) = if u < 1_000 {
            (0, "ns")
        } else if u < 1_000_000 {
            (3, "µs")
        } else {
            (6, "ms")
        };
        let (int, f) = frac(u, prec);
        return format!("{sign}{int}{f}{unit}");
    }
    let (secs, f) = frac(u, 9);
    let (h, m, s) = (secs / 3600, (secs / 60) % 60, secs % 60);
    if h > 0 {
        format!("{sign}{h}h{m}m{s}{f}s")
    } else if m > 0 {
        format!("{sign}{m}m{s}{f}s")
    } else {
        format!("{sign}{s}{f}s")
    }
}

// =============================================================================================
// Resolved configuration
// =============================================================================================

/// [`DefaultEvictorArgs`] resolved against one snapshot: priority class looked up, selectors
/// parsed and resolved to ids, the nodeFit candidate nodes listed. Plain data, shareable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvictorConfig {
    args: DefaultEvictorArgs,
    protections: Protections,
    /// Pods at or above it are not evictable (SystemCriticalPods on and a threshold given).
    priority_threshold: Option<i32>,
    /// `Some`: only PVCs of these classes protect (ids present in the snapshot).
    protected_storage_classes: Option<Vec<StrId>>,
    /// `None`: no constraint (absent or empty selector).
    label_selector: Option<ResolvedSelector>,
    /// `None`: no constraint; else the namespaces (ids) whose labels match, sorted.
    allowed_namespaces: Option<Vec<StrId>>,
    node_fit: bool,
    /// Ready nodes matching the evictor's nodeSelector, ascending.
    fit_nodes: Vec<u32>,
    min_replicas: u32,
    /// Nanoseconds and the duration as Go prints it.
    min_pod_age: Option<(i128, String)>,
    mandatory_no_eviction: bool,
}

impl EvictorConfig {
    /// Validate `args` and resolve them against `cluster`. Fails when the args are invalid, when
    /// `priorityThreshold.name` names no PriorityClass in the snapshot, or when the threshold is
    /// above 2,000,000,000 (the threshold is only resolved while SystemCriticalPods is on, as in
    /// descheduler).
    pub fn resolve(args: &DefaultEvictorArgs, cluster: Cluster<'_>) -> Result<Self, Vec<ArgError>> {
        let errors = args.validate();
        if !errors.is_empty() {
            return Err(errors);
        }
        let protections = args.effective_protections();
        let mut priority_threshold = None;
        if protections.system_critical
            && let Some(t) = &args.priority_threshold
            && (t.value.is_some() || !t.name.is_empty())
        {
            let value = match t.value {
                Some(v) => v,
                None => cluster.priority_class_value(&t.name).ok_or_else(|| {
                    vec![ArgError::new(
                        "priorityThreshold.name",
                        format!(
                            "unable to get priority value from the priority class: priorityclass {:?} not found in the snapshot",
                            t.name
                        ),
                    )]
                })?,
            };
            if value > SYSTEM_CRITICAL_PRIORITY {
                return Err(vec![ArgError::new(
                    "priorityThreshold",
                    format!(
                        "priority threshold can't be greater than {SYSTEM_CRITICAL_PRIORITY} (got {value})"
                    ),
                )]);
            }
            priority_threshold = Some(value);
        }
        let classes = args.protected_storage_classes();
        let protected_storage_classes = (!classes.is_empty())
            .then(|| classes.iter().filter_map(|c| cluster.lookup(c)).collect());
        let to_selector = |spec: &LabelSelectorSpec, field: &str| {
            spec.to_selector()
                .map_err(|e| vec![ArgError::new(field, e)])
        };
        let label_selector = match &args.label_selector {
            Some(spec) if !spec.is_empty() => {
                Some(to_selector(spec, "labelSelector")?.resolve(cluster))
            }
            _ => None,
        };
        let allowed_namespaces = match &args.namespace_label_selector {
            Some(spec) if !spec.is_empty() => {
                let selector = to_selector(spec, "namespaceLabelSelector")?.resolve(cluster);
                let mut ids: Vec<StrId> = cluster
                    .archive()
                    .namespaces
                    .iter()
                    .filter(|ns| selector.matches(cluster, &ns.labels))
                    .map(|ns| ns.name.to_native())
                    .collect();
                ids.sort_unstable();
                ids.dedup();
                Some(ids)
            }
            _ => None,
        };
        let node_selector = Selector::parse(&args.node_selector)
            .map_err(|e| vec![ArgError::new("nodeSelector", e.to_string())])?
            .resolve(cluster);
        let fit_nodes = cluster
            .nodes()
            .filter(|n| n.is_ready() && node_selector.matches(cluster, &n.raw.labels))
            .map(|n| n.id)
            .collect();
        let min_pod_age = match &args.min_pod_age {
            Some(s) => {
                let ns = parse_go_duration(s).map_err(|e| vec![ArgError::new("minPodAge", e)])?;
                Some((ns, format_go_duration(ns)))
            }
            None => None,
        };
        Ok(EvictorConfig {
            args: args.clone(),
            protections,
            priority_threshold,
            protected_storage_classes,
            label_selector,
            allowed_namespaces,
            node_fit: args.node_fit,
            fit_nodes,
            min_replicas: args.min_replicas,
            min_pod_age,
            mandatory_no_eviction: args.no_eviction_policy == "Mandatory",
        })
    }

    /// The configuration of a DefaultEvictor with default args (what descheduler injects).
    pub fn defaults(cluster: Cluster<'_>) -> Self {
        let args = DefaultEvictorArgs::default();
        EvictorConfig {
            protections: args.effective_protections(),
            priority_threshold: None,
            protected_storage_classes: None,
            label_selector: None,
            allowed_namespaces: None,
            node_fit: false,
            fit_nodes: cluster
                .nodes()
                .filter(|n| n.is_ready())
                .map(|n| n.id)
                .collect(),
            min_replicas: 0,
            min_pod_age: None,
            mandatory_no_eviction: false,
            args,
        }
    }

    pub fn args(&self) -> &DefaultEvictorArgs {
        &self.args
    }

    pub fn protections(&self) -> Protections {
        self.protections
    }

    /// The resolved priority threshold, when one applies.
    pub fn priority_threshold(&self) -> Option<i32> {
        self.priority_threshold
    }

    pub fn node_fit(&self) -> bool {
        self.node_fit
    }

    /// Candidate nodes of nodeFit: ready nodes matching the evictor's `nodeSelector`.
    pub fn fit_nodes(&self) -> &[u32] {
        &self.fit_nodes
    }
}

// =============================================================================================
// Per-snapshot index
// =============================================================================================

/// Ids of strings the evictor looks for; `None` when no object in the snapshot uses the string.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WellKnownIds {
    pub cpu: Option<StrId>,
    pub memory: Option<StrId>,
    pub pods: Option<StrId>,
    pub ready_condition: Option<StrId>,
    pub condition_true: Option<StrId>,
    pub daemon_set: Option<StrId>,
    pub evict_annotation: Option<StrId>,
    pub prefer_no_eviction_annotation: Option<StrId>,
    pub mirror_annotation: Option<StrId>,
    pub source_annotation: Option<StrId>,
    pub source_api: Option<StrId>,
}

/// How many PDBs select a pod (the Eviction API refuses pods with more than one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodPdbs {
    None,
    One(u32),
    Many(u32),
}

/// Facts about a pod that DefaultEvictor's Filter needs and that do not depend on its args,
/// computed once per snapshot so that Filter reads a few flat arrays instead of the archive.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PodTraits(u16);

impl PodTraits {
    const EVICT_ANNOTATION: u16 = 1;
    const PREFER_NO_EVICTION: u16 = 1 << 1;
    const MIRROR: u16 = 1 << 2;
    const STATIC: u16 = 1 << 3;
    const TERMINATING: u16 = 1 << 4;
    const LOCAL_STORAGE: u16 = 1 << 5;
    const DAEMON_SET: u16 = 1 << 6;
    const PVC: u16 = 1 << 7;
    const RESOURCE_CLAIMS: u16 = 1 << 8;
    const BARE: u16 = 1 << 9;
    const FAILED: u16 = 1 << 10;
    const SINGLE_OWNER: u16 = 1 << 11;
    const READY: u16 = 1 << 12;
    const HAS_PRIORITY: u16 = 1 << 13;
    const STARTED: u16 = 1 << 14;

    fn has(self, bit: u16) -> bool {
        self.0 & bit != 0
    }
    /// `descheduler.alpha.kubernetes.io/evict` is present.
    pub fn evict_annotation(self) -> bool {
        self.has(Self::EVICT_ANNOTATION)
    }
    /// `descheduler.alpha.kubernetes.io/prefer-no-eviction` is present.
    pub fn prefer_no_eviction(self) -> bool {
        self.has(Self::PREFER_NO_EVICTION)
    }
    pub fn mirror(self) -> bool {
        self.has(Self::MIRROR)
    }
    /// `kubernetes.io/config.source` is present and not `api`.
    pub fn static_pod(self) -> bool {
        self.has(Self::STATIC)
    }
    /// `metadata.deletionTimestamp` is set in the snapshot.
    pub fn terminating(self) -> bool {
        self.has(Self::TERMINATING)
    }
    /// An emptyDir or hostPath volume.
    pub fn local_storage(self) -> bool {
        self.has(Self::LOCAL_STORAGE)
    }
    /// Some ownerReference is a DaemonSet.
    pub fn daemon_set(self) -> bool {
        self.has(Self::DAEMON_SET)
    }
    /// A persistentVolumeClaim volume.
    pub fn pvc(self) -> bool {
        self.has(Self::PVC)
    }
    pub fn resource_claims(self) -> bool {
        self.has(Self::RESOURCE_CLAIMS)
    }
    /// No ownerReferences.
    pub fn bare(self) -> bool {
        self.has(Self::BARE)
    }
    /// Phase Failed.
    pub fn failed(self) -> bool {
        self.has(Self::FAILED)
    }
    /// Exactly one ownerReference.
    pub fn single_owner(self) -> bool {
        self.has(Self::SINGLE_OWNER)
    }
    /// The Ready condition is True.
    pub fn ready(self) -> bool {
        self.has(Self::READY)
    }
}

/// Indexes over one snapshot, built once and shared read-only by every run on it (plain data:
/// `Send + Sync`, no borrows).
#[derive(Debug, Clone)]
pub struct ClusterIndex {
    revision: u64,
    pod_count: usize,
    /// Pods bound to node `n` are `node_pods[node_pod_start[n]..node_pod_start[n + 1]]`.
    node_pod_start: Vec<u32>,
    node_pods: Vec<u32>,
    /// Non-terminal (not Succeeded/Failed) pods per node, terminating ones included.
    node_active_pods: Vec<u32>,
    /// Summed requests of the non-terminal pods per node: `(resource, milli)`.
    node_requested: Vec<Vec<(StrId, i64)>>,
    ready_nodes: Vec<u32>,
    pdb_pods: Vec<Vec<u32>>,
    /// First PDB selecting each pod, or `NONE`.
    pod_first_pdb: Vec<u32>,
    pod_pdb_count: Vec<u32>,
    /// Pods listing each owner uid among their ownerReferences.
    owner_uid_pods: HashMap<StrId, u32>,
    pod_traits: Vec<PodTraits>,
    /// `spec.priority` (meaningful with `HAS_PRIORITY`).
    pod_priority: Vec<i32>,
    /// `status.startTime` (meaningful with `STARTED`).
    pod_start_ms: Vec<i64>,
    /// Pods sharing the uid of the pod's first ownerReference (0 for bare pods).
    pod_owner_replicas: Vec<u32>,
    /// `(namespace, name)` → PVC index.
    pvcs: HashMap<(StrId, StrId), u32>,
    ids: WellKnownIds,
}

impl ClusterIndex {
    pub fn new(cluster: Cluster<'_>) -> Self {
        let archive = cluster.archive();
        let node_count = cluster.node_count();
        let pod_count = cluster.pod_count();

        // Pods by node (CSR), in snapshot order.
        let mut node_pod_start = vec![0u32; node_count + 1];
        for pod in archive.pods.iter() {
            let n = pod.node.to_native();
            if n != NONE && (n as usize) < node_count {
                node_pod_start[n as usize + 1] += 1;
            }
        }
        for i in 0..node_count {
            node_pod_start[i + 1] += node_pod_start[i];
        }
        let mut cursor = node_pod_start.clone();
        let mut node_pods = vec![0u32; node_pod_start[node_count] as usize];
        for (i, pod) in archive.pods.iter().enumerate() {
            let n = pod.node.to_native();
            if n != NONE && (n as usize) < node_count {
                node_pods[cursor[n as usize] as usize] = i as u32;
                cursor[n as usize] += 1;
            }
        }

        // Node usage of non-terminal pods (nodeFit's `NodeUtilization`).
        let mut node_active_pods = vec![0u32; node_count];
        let mut node_requested: Vec<Vec<(StrId, i64)>> = vec![Vec::new(); node_count];
        for n in 0..node_count {
            let pods = &node_pods[node_pod_start[n] as usize..node_pod_start[n + 1] as usize];
            for &p in pods {
                let pod = &archive.pods[p as usize];
                if matches!(
                    pod.phase,
                    ArchivedPodPhase::Succeeded | ArchivedPodPhase::Failed
                ) {
                    continue;
                }
                node_active_pods[n] += 1;
                let sums = &mut node_requested[n];
                for q in pod.requests.iter() {
                    let (res, milli) = (q.resource.to_native(), q.milli.to_native());
                    match sums.iter_mut().find(|(r, _)| *r == res) {
                        Some((_, total)) => *total = total.saturating_add(milli),
                        None => sums.push((res, milli)),
                    }
                }
            }
        }

        let ready_nodes = cluster
            .nodes()
            .filter(|n| n.is_ready())
            .map(|n| n.id)
            .collect();

        // Owner uids (every ownerRef of a pod counts once, like the ownerRef UID indexer).
        let mut owner_uid_pods: HashMap<StrId, u32> = HashMap::new();
        for pod in archive.pods.iter() {
            for (i, r) in pod.owner_refs.iter().enumerate() {
                let uid = r.uid.to_native();
                if pod.owner_refs[..i].iter().any(|o| o.uid.to_native() == uid) {
                    continue;
                }
                *owner_uid_pods.entry(uid).or_insert(0) += 1;
            }
        }

        let pvcs = archive
            .pvcs
            .iter()
            .enumerate()
            .map(|(i, pvc)| ((pvc.namespace.to_native(), pvc.name.to_native()), i as u32))
            .collect();

        // PDB coverage: nil selector selects nothing, empty selects the whole namespace, an
        // invalid one nothing.
        let mut pods_by_namespace: HashMap<StrId, Vec<u32>> = HashMap::new();
        if !archive.pdbs.is_empty() {
            for (i, pod) in archive.pods.iter().enumerate() {
                pods_by_namespace
                    .entry(pod.namespace.to_native())
                    .or_default()
                    .push(i as u32);
            }
        }
        let mut pdb_pods = vec![Vec::new(); archive.pdbs.len()];
        let mut pod_first_pdb = vec![NONE; pod_count];
        let mut pod_pdb_count = vec![0u32; pod_count];
        for (p, pdb) in archive.pdbs.iter().enumerate() {
            let Some(selector) = pdb.selector.as_ref() else {
                continue;
            };
            let Some(candidates) = pods_by_namespace.get(&pdb.namespace.to_native()) else {
                continue;
            };
            for &pod in candidates {
                if label_selector_matches(selector, &archive.pods[pod as usize].labels) {
                    pdb_pods[p].push(pod);
                    pod_pdb_count[pod as usize] += 1;
                    if pod_first_pdb[pod as usize] == NONE {
                        pod_first_pdb[pod as usize] = p as u32;
                    }
                }
            }
        }

        let ids = WellKnownIds {
            cpu: cluster.lookup("cpu"),
            memory: cluster.lookup("memory"),
            pods: cluster.lookup("pods"),
            ready_condition: cluster.lookup("Ready"),
            condition_true: cluster.lookup("True"),
            daemon_set: cluster.lookup("DaemonSet"),
            evict_annotation: cluster.lookup(EVICT_ANNOTATION),
            prefer_no_eviction_annotation: cluster.lookup(PREFER_NO_EVICTION_ANNOTATION),
            mirror_annotation: cluster.lookup(MIRROR_ANNOTATION),
            source_annotation: cluster.lookup(SOURCE_ANNOTATION),
            source_api: cluster.lookup("api"),
        };

        let mut pod_traits = Vec::with_capacity(pod_count);
        let mut pod_priority = Vec::with_capacity(pod_count);
        let mut pod_start_ms = Vec::with_capacity(pod_count);
        let mut pod_owner_replicas = Vec::with_capacity(pod_count);
        let has_key = |pairs: &[ArchivedKeyValue], key: Option<StrId>| {
            key.is_some_and(|k| kv_get(pairs, k).is_some())
        };
        for pod_ref in cluster.pods() {
            let pod = pod_ref.raw;
            let mut t = 0u16;
            let ann = pod_ref.annotations();
            let mut set = |cond: bool, bit: u16| {
                if cond {
                    t |= bit;
                }
            };
            set(
                has_key(ann, ids.evict_annotation),
                PodTraits::EVICT_ANNOTATION,
            );
            set(
                has_key(ann, ids.prefer_no_eviction_annotation),
                PodTraits::PREFER_NO_EVICTION,
            );
            set(has_key(ann, ids.mirror_annotation), PodTraits::MIRROR);
            set(
                ids.source_annotation
                    .and_then(|k| kv_get(ann, k))
                    .is_some_and(|v| Some(v) != ids.source_api),
                PodTraits::STATIC,
            );
            set(pod.deletion_ms.is_some(), PodTraits::TERMINATING);
            set(
                pod_ref.volumes().iter().any(|v| {
                    matches!(
                        v.kind,
                        ArchivedVolumeKind::EmptyDir | ArchivedVolumeKind::HostPath
                    )
                }),
                PodTraits::LOCAL_STORAGE,
            );
            set(
                ids.daemon_set
                    .is_some_and(|ds| pod.owner_refs.iter().any(|r| r.kind.to_native() == ds)),
                PodTraits::DAEMON_SET,
            );
            set(
                pod_ref
                    .volumes()
                    .iter()
                    .any(|v| matches!(v.kind, ArchivedVolumeKind::PersistentVolumeClaim)),
                PodTraits::PVC,
            );
            set(pod.has_resource_claims, PodTraits::RESOURCE_CLAIMS);
            set(pod.owner_refs.is_empty(), PodTraits::BARE);
            set(
                matches!(pod.phase, ArchivedPodPhase::Failed),
                PodTraits::FAILED,
            );
            set(pod.owner_refs.len() == 1, PodTraits::SINGLE_OWNER);
            set(
                match (ids.ready_condition, ids.condition_true) {
                    (Some(ready), Some(t)) => pod_ref
                        .conditions()
                        .iter()
                        .any(|c| c.type_.to_native() == ready && c.status.to_native() == t),
                    _ => false,
                },
                PodTraits::READY,
            );
            let priority = pod.priority.as_ref().map(|p| p.to_native());
            set(priority.is_some(), PodTraits::HAS_PRIORITY);
            let start = pod.start_ms.as_ref().map(|s| s.to_native());
            set(start.is_some(), PodTraits::STARTED);
            pod_traits.push(PodTraits(t));
            pod_priority.push(priority.unwrap_or(0));
            pod_start_ms.push(start.unwrap_or(0));
            pod_owner_replicas.push(pod.owner_refs.first().map_or(0, |r| {
                owner_uid_pods.get(&r.uid.to_native()).copied().unwrap_or(0)
            }));
        }

        ClusterIndex {
            revision: cluster.revision(),
            pod_count,
            node_pod_start,
            node_pods,
            node_active_pods,
            node_requested,
            ready_nodes,
            pdb_pods,
            pod_first_pdb,
            pod_pdb_count,
            owner_uid_pods,
            pod_traits,
            pod_priority,
            pod_start_ms,
            pod_owner_replicas,
            pvcs,
            ids,
        }
    }

    /// The revision of the snapshot this index was built from.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// The index was built from this snapshot (same revision and pod count).
    pub fn is_for(&self, cluster: Cluster<'_>) -> bool {
        self.revision == cluster.revision() && self.pod_count == cluster.pod_count()
    }

    pub fn ids(&self) -> &WellKnownIds {
        &self.ids
    }

    /// Ids of the pods bound to `node`, in snapshot order (every phase).
    pub fn pods_on_node(&self, node: u32) -> &[u32] {
        let n = node as usize;
        if n + 1 >= self.node_pod_start.len() {
            return &[];
        }
        &self.node_pods[self.node_pod_start[n] as usize..self.node_pod_start[n + 1] as usize]
    }

    /// Non-terminal pods on the node (terminating ones included).
    pub fn active_pod_count(&self, node: u32) -> u32 {
        self.node_active_pods
            .get(node as usize)
            .copied()
            .unwrap_or(0)
    }

    /// Summed requests (milli-units) of a resource over the node's non-terminal pods.
    pub fn requested(&self, node: u32, resource: StrId) -> i64 {
        self.node_requested
            .get(node as usize)
            .and_then(|sums| sums.iter().find(|(r, _)| *r == resource))
            .map_or(0, |&(_, m)| m)
    }

    /// Ready nodes, ascending.
    pub fn ready_nodes(&self) -> &[u32] {
        &self.ready_nodes
    }

    /// Ready nodes matching a (policy-level) node selector: the nodes a run's plugins are given.
    pub fn nodes_in_scope(&self, cluster: Cluster<'_>, node_selector: &Selector) -> Vec<u32> {
        let selector = node_selector.resolve(cluster);
        self.ready_nodes
            .iter()
            .copied()
            .filter(|&n| selector.matches(cluster, &cluster.node(n).raw.labels))
            .collect()
    }

    /// Pods selected by a PDB (same namespace, selector matches).
    pub fn pdb_pods(&self, pdb: u32) -> &[u32] {
        self.pdb_pods.get(pdb as usize).map_or(&[], Vec::as_slice)
    }

    /// The PDBs selecting a pod.
    pub fn pdbs_of_pod(&self, pod: u32) -> PodPdbs {
        match self.pod_pdb_count.get(pod as usize).copied().unwrap_or(0) {
            0 => PodPdbs::None,
            1 => PodPdbs::One(self.pod_first_pdb[pod as usize]),
            n => PodPdbs::Many(n),
        }
    }

    /// Pods (any phase) with `uid` among their ownerReferences.
    pub fn pods_with_owner_uid(&self, uid: StrId) -> u32 {
        self.owner_uid_pods.get(&uid).copied().unwrap_or(0)
    }

    /// The PVC `namespace/name`, if the snapshot has it.
    pub fn pvc(&self, namespace: StrId, name: StrId) -> Option<u32> {
        self.pvcs.get(&(namespace, name)).copied()
    }

    /// Filter-relevant facts about a pod.
    pub fn pod_traits(&self, pod: u32) -> PodTraits {
        self.pod_traits
            .get(pod as usize)
            .copied()
            .unwrap_or_default()
    }

    /// The pod's Ready condition is `True` (`podutil.IsPodReady`).
    pub fn pod_is_ready(&self, pod: u32) -> bool {
        self.pod_traits(pod).ready()
    }

    /// Pods (any phase) sharing the uid of the pod's first ownerReference; 0 for bare pods.
    pub fn owner_replicas(&self, pod: u32) -> u32 {
        self.pod_owner_replicas
            .get(pod as usize)
            .copied()
            .unwrap_or(0)
    }
}

// =============================================================================================
// Run state
// =============================================================================================

/// Policy-wide eviction limits (`maxNoOfPodsToEvictPerNode`, `…PerNamespace`, `…Total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Limits {
    pub per_node: Option<u32>,
    pub per_namespace: Option<u32>,
    pub total: Option<u32>,
}

/// An accepted proposal, in the order proposals were made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcceptedProposal {
    pub pod: u32,
    pub reason: String,
    pub plugin: String,
    pub plugin_set: String,
}

/// A refused proposal and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefusedProposal {
    pub pod: u32,
    pub reason: String,
    pub plugin: String,
    pub plugin_set: String,
    pub refusal: Refusal,
}

/// Refusals by kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RefusalCounts {
    pub unknown_pod: u32,
    pub not_evictable: u32,
    pub node_limit: u32,
    pub namespace_limit: u32,
    pub total_limit: u32,
    pub disruption_budget: u32,
}

impl RefusalCounts {
    pub fn total(&self) -> u32 {
        self.unknown_pod
            + self.not_evictable
            + self.node_limit
            + self.namespace_limit
            + self.total_limit
            + self.disruption_budget
    }
}

/// A log line a policy wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogEntry {
    pub level: LogLevel,
    pub plugin: String,
    pub plugin_set: String,
    pub message: String,
}

/// What one run has decided so far; shared by all plugins and plugin sets of the run.
#[derive(Debug, Clone)]
pub struct RunState {
    limits: Limits,
    proposed: Vec<bool>,
    per_node: HashMap<StrId, u32>,
    per_namespace: HashMap<StrId, u32>,
    total: u32,
    pdb_consumed: Vec<i32>,
    proposals: Vec<AcceptedProposal>,
    refusals: Vec<RefusedProposal>,
    refusal_counts: RefusalCounts,
}

impl RunState {
    pub fn new(cluster: Cluster<'_>, limits: Limits) -> Self {
        RunState {
            limits,
            proposed: vec![false; cluster.pod_count()],
            per_node: HashMap::new(),
            per_namespace: HashMap::new(),
            total: 0,
            pdb_consumed: vec![0; cluster.archive().pdbs.len()],
            proposals: Vec::new(),
            refusals: Vec::new(),
            refusal_counts: RefusalCounts::default(),
        }
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// The pod was proposed (and accepted) earlier in this run.
    pub fn is_proposed(&self, pod: u32) -> bool {
        self.proposed.get(pod as usize).copied().unwrap_or(false)
    }

    /// Accepted proposals, in order.
    pub fn proposals(&self) -> &[AcceptedProposal] {
        &self.proposals
    }

    pub fn refusals(&self) -> &[RefusedProposal] {
        &self.refusals
    }

    pub fn refusal_counts(&self) -> RefusalCounts {
        self.refusal_counts
    }

    /// Accepted proposals so far.
    pub fn total(&self) -> u32 {
        self.total
    }

    /// Accepted proposals of pods whose `spec.nodeName` is `node_name`.
    pub fn node_count(&self, node_name: StrId) -> u32 {
        self.per_node.get(&node_name).copied().unwrap_or(0)
    }

    pub fn namespace_count(&self, namespace: StrId) -> u32 {
        self.per_namespace.get(&namespace).copied().unwrap_or(0)
    }

    /// Disruptions of a PDB used up by this run's accepted proposals.
    pub fn pdb_consumed(&self, pdb: u32) -> i32 {
        self.pdb_consumed.get(pdb as usize).copied().unwrap_or(0)
    }
}

// =============================================================================================
// nodeFit
// =============================================================================================

/// Why a pod does not fit a node (descheduler's `NodeFit` errors, in its order of checks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeFitError {
    NodeSelectorMismatch,
    UntoleratedTaints,
    /// Not enough of this resource is left (`pods`: no free pod slot).
    Insufficient(String),
    Unschedulable,
    AntiAffinity,
}

impl fmt::Display for NodeFitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeFitError::NodeSelectorMismatch => {
                f.write_str("pod node selector does not match the node label")
            }
            NodeFitError::UntoleratedTaints => {
                f.write_str("pod does not tolerate taints on the node")
            }
            NodeFitError::Insufficient(r) => write!(f, "insufficient {r}"),
            NodeFitError::Unschedulable => f.write_str("node is not schedulable"),
            NodeFitError::AntiAffinity => {
                f.write_str("pod matches inter-pod anti-affinity rule of other pod on node")
            }
        }
    }
}

/// descheduler's `NodeFit(pod, node)`, in its order: nodeSelector and required node affinity;
/// NoSchedule/NoExecute taints tolerated; requests fit what the node's non-terminal pods leave of
/// its allocatable, plus one free pod slot (skipped for the node the pod is bound to); the node is
/// not cordoned; no required anti-affinity term of the pod selects a pod on the node.
pub fn node_fit_error(
    index: &ClusterIndex,
    pod: PodRef<'_>,
    node: NodeRef<'_>,
) -> Option<NodeFitError> {
    if !pod_matches_node_selector_and_required_affinity(pod, node) {
        return Some(NodeFitError::NodeSelectorMismatch);
    }
    if !tolerates_all(
        pod,
        node,
        &[TaintEffect::NoSchedule, TaintEffect::NoExecute],
    ) {
        return Some(NodeFitError::UntoleratedTaints);
    }
    let node_name = pod.raw.node_name.to_native();
    if node_name == 0 || node_name != node.name_id() {
        let cluster = pod.cluster();
        let slots_used = i64::from(index.active_pod_count(node.id)) * 1000;
        for q in pod.raw.requests.iter() {
            let (res, want) = (q.resource.to_native(), q.milli.to_native());
            let used = if Some(res) == index.ids.pods {
                slots_used
            } else {
                index.requested(node.id, res)
            };
            if want > node.allocatable(res).saturating_sub(used) {
                return Some(NodeFitError::Insufficient(cluster.str(res).to_owned()));
            }
        }
        let pod_slots = index.ids.pods.map_or(0, |p| node.allocatable(p));
        if pod_slots - slots_used <= 0 {
            return Some(NodeFitError::Insufficient("pods".into()));
        }
    }
    if node.is_unschedulable() {
        return Some(NodeFitError::Unschedulable);
    }
    if anti_affinity_conflicts_on_node(pod, node, index.pods_on_node(node.id)) {
        return Some(NodeFitError::AntiAffinity);
    }
    None
}

// =============================================================================================
// The evictor
// =============================================================================================

/// Serves [`Host::object_json`]: the full object of a `kind` (`Pod`, `Node`, …) by table index.
pub type ObjectJsonFn<'a> = dyn FnMut(&str, u32) -> Option<String> + 'a;

/// The evictor for one plugin call: cheap to build ([`Evictor::new`]), borrows the shared
/// pieces, owns only the log lines the policy writes. Implements [`Host`]. `index` and `state`
/// must have been built from `cluster`.
pub struct Evictor<'a> {
    pub cluster: Cluster<'a>,
    pub index: &'a ClusterIndex,
    pub config: &'a EvictorConfig,
    pub state: &'a mut RunState,
    /// What [`Host::nodes`] returns: ready nodes matching the policy's nodeSelector, ascending.
    pub nodes_in_scope: &'a [u32],
    pub plugin: &'a str,
    pub plugin_set: &'a str,
    /// What [`Host::log`] collected, in order.
    pub logs: Vec<LogEntry>,
    /// Serves [`Host::object_json`]; `None` answers `None`.
    pub object_json: Option<&'a mut ObjectJsonFn<'a>>,
}

impl<'a> Evictor<'a> {
    pub fn new(
        cluster: Cluster<'a>,
        index: &'a ClusterIndex,
        config: &'a EvictorConfig,
        state: &'a mut RunState,
        nodes_in_scope: &'a [u32],
        plugin: &'a str,
        plugin_set: &'a str,
    ) -> Self {
        Evictor {
            cluster,
            index,
            config,
            state,
            nodes_in_scope,
            plugin,
            plugin_set,
            logs: Vec::new(),
            object_json: None,
        }
    }

    /// Answer [`Host::object_json`] with `f`.
    pub fn with_object_json(mut self, f: &'a mut ObjectJsonFn<'a>) -> Self {
        self.object_json = Some(f);
        self
    }
}

impl fmt::Debug for Evictor<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Evictor")
            .field("plugin", &self.plugin)
            .field("plugin_set", &self.plugin_set)
            .field("proposals", &self.state.proposals.len())
            .finish()
    }
}

/// Collects failure messages, or stops at the first failure when there is nowhere to put them.
macro_rules! fail {
    ($out:expr, $failed:ident, $($msg:tt)*) => {{
        $failed = true;
        match $out.as_deref_mut() {
            Some(v) => v.push(format!($($msg)*)),
            None => return false,
        }
    }};
}

const ALREADY_PROPOSED: &str =
    "pod is terminating: it was proposed for eviction earlier in this run";

impl Evictor<'_> {
    fn valid_pod(&self, pod: u32) -> bool {
        (pod as usize) < self.cluster.pod_count()
    }

    fn valid_node(&self, node: u32) -> bool {
        (node as usize) < self.cluster.node_count()
    }

    /// DefaultEvictor `Filter`.
    pub fn passes_filter(&self, pod: u32) -> bool {
        self.valid_pod(pod) && self.filter_check(self.cluster.pod(pod), None)
    }

    /// Why the pod does not pass Filter (empty when it does), in descheduler's order and words.
    pub fn filter_failures(&self, pod: u32) -> Vec<String> {
        if !self.valid_pod(pod) {
            return vec![format!("no pod with id {pod} in the snapshot")];
        }
        let mut out = Vec::new();
        self.filter_check(self.cluster.pod(pod), Some(&mut out));
        out
    }

    /// DefaultEvictor `PreEvictionFilter`: nodeFit (when on) and `namespaceLabelSelector`.
    pub fn passes_pre_eviction_filter(&self, pod: u32) -> bool {
        self.valid_pod(pod) && self.pre_eviction_check(self.cluster.pod(pod), None)
    }

    /// Why the pod does not pass PreEvictionFilter (empty when it does).
    pub fn pre_eviction_failures(&self, pod: u32) -> Vec<String> {
        if !self.valid_pod(pod) {
            return vec![format!("no pod with id {pod} in the snapshot")];
        }
        let mut out = Vec::new();
        self.pre_eviction_check(self.cluster.pod(pod), Some(&mut out));
        out
    }

    /// Why `pod` does not fit `node` (`None`: it fits).
    pub fn node_fit_error(&self, pod: u32, node: u32) -> Option<NodeFitError> {
        node_fit_error(self.index, self.cluster.pod(pod), self.cluster.node(node))
    }

    /// `PodFitsAnyOtherNode` over the evictor's candidate nodes.
    pub fn fits_any_other_node(&self, pod: PodRef<'_>) -> bool {
        let node_name = pod.raw.node_name.to_native();
        self.config.fit_nodes.iter().any(|&n| {
            let node = self.cluster.node(n);
            node.name_id() != node_name && node_fit_error(self.index, pod, node).is_none()
        })
    }

    fn filter_check(&self, pod: PodRef<'_>, mut out: Option<&mut Vec<String>>) -> bool {
        let id = pod.id;
        let i = id as usize;
        let index = self.index;
        let config = self.config;
        let t = index.pod_traits[i];
        let mut failed = false;

        // Deliberately before the evict annotation: a pod is proposed at most once per run.
        if self.state.proposed[i] {
            if let Some(v) = out.as_deref_mut() {
                v.push(ALREADY_PROPOSED.into());
            }
            return false;
        }
        if t.evict_annotation() {
            return true;
        }
        if config.mandatory_no_eviction && t.prefer_no_eviction() {
            if let Some(v) = out.as_deref_mut() {
                v.push(format!(
                    "pod has the {PREFER_NO_EVICTION_ANNOTATION} annotation and noEvictionPolicy is Mandatory"
                ));
            }
            return false;
        }
        if t.mirror() {
            fail!(out, failed, "pod is a mirror pod");
        }
        if t.static_pod() {
            fail!(out, failed, "pod is a static pod");
        }
        if t.terminating() {
            fail!(out, failed, "pod is terminating");
        }

        let p = config.protections;
        if p.system_critical && t.has(PodTraits::HAS_PRIORITY) {
            let priority = index.pod_priority[i];
            if priority >= SYSTEM_CRITICAL_PRIORITY {
                fail!(
                    out,
                    failed,
                    "pod has system critical priority and is protected against eviction"
                );
            }
            if config
                .priority_threshold
                .is_some_and(|threshold| priority >= threshold)
            {
                fail!(
                    out,
                    failed,
                    "pod has higher priority than specified priority class threshold"
                );
            }
        }
        if p.failed_bare {
            if t.bare() {
                fail!(out, failed, "pod does not have any ownerRefs");
            }
        } else if t.bare() && !t.failed() {
            fail!(
                out,
                failed,
                "pod does not have any ownerRefs and is not in failed phase"
            );
        }
        if p.local_storage && t.local_storage() {
            fail!(
                out,
                failed,
                "pod has local storage and is protected against eviction"
            );
        }
        if p.daemon_set && t.daemon_set() {
            fail!(out, failed, "daemonset pods are protected against eviction");
        }
        if p.pvc && t.pvc() {
            match &config.protected_storage_classes {
                None => fail!(out, failed, "pod with PVC is protected against eviction"),
                Some(protected) => {
                    if let Some(message) = self.pvc_storage_class_failure(pod, protected) {
                        fail!(out, failed, "{message}");
                    }
                }
            }
        }
        if p.without_pdb && index.pod_pdb_count[i] == 0 {
            fail!(
                out,
                failed,
                "pod does not have a PodDisruptionBudget and is protected against eviction"
            );
        }
        if p.resource_claims && t.resource_claims() {
            fail!(
                out,
                failed,
                "pod has ResourceClaims and descheduler is configured to protect ResourceClaims pods"
            );
        }
        if let Some(selector) = &config.label_selector
            && !selector.matches(self.cluster, &pod.raw.labels)
        {
            fail!(
                out,
                failed,
                "pod labels do not match the labelSelector filter in the policy parameter"
            );
        }
        if config.min_replicas > 1 && t.single_owner() {
            let replicas = index.pod_owner_replicas[i];
            if replicas < config.min_replicas {
                fail!(
                    out,
                    failed,
                    "owner has {replicas} replicas which is less than minReplicas of {}",
                    config.min_replicas
                );
            }
        }
        if let Some((min_age, shown)) = &config.min_pod_age {
            let young = !t.has(PodTraits::STARTED)
                || i128::from(self.cluster.time_ms() - index.pod_start_ms[i]) * 1_000_000
                    < *min_age;
            if young {
                fail!(
                    out,
                    failed,
                    "pod age is not older than MinPodAge: {shown} seconds"
                );
            }
        }
        !failed
    }

    /// `podStorageClasses` + the protected-class check: a missing PVC or one without a class
    /// protects the pod; so does a PVC of a protected class.
    fn pvc_storage_class_failure(&self, pod: PodRef<'_>, protected: &[StrId]) -> Option<String> {
        let archive = self.cluster.archive();
        let ns = pod.namespace_id();
        let mut classes = Vec::new();
        let claims = pod
            .volumes()
            .iter()
            .filter(|v| matches!(v.kind, ArchivedVolumeKind::PersistentVolumeClaim))
            .map(|v| v.claim.to_native());
        for claim in claims {
            let Some(i) = self.index.pvc(ns, claim) else {
                return Some(format!(
                    "failed to get persistent volume claim {:?}/{:?}: not found in the snapshot",
                    pod.namespace(),
                    self.cluster.str(claim)
                ));
            };
            match archive.pvcs[i as usize]
                .storage_class
                .as_ref()
                .map(|c| c.to_native())
            {
                Some(class) if class != 0 => classes.push(class),
                _ => {
                    return Some(format!(
                        "failed to resolve storage class for pod {:?}/{:?}",
                        pod.namespace(),
                        self.cluster.str(claim)
                    ));
                }
            }
        }
        classes
            .into_iter()
            .find(|c| protected.contains(c))
            .map(|c| {
                format!(
                    "pod using protected storage class {:?}",
                    self.cluster.str(c)
                )
            })
    }

    fn pre_eviction_check(&self, pod: PodRef<'_>, mut out: Option<&mut Vec<String>>) -> bool {
        let mut failed = false;
        let namespace_ok = self
            .config
            .allowed_namespaces
            .as_ref()
            .is_none_or(|allowed| allowed.binary_search(&pod.namespace_id()).is_ok());
        // Without a sink the cheap namespace check goes first; the answer is the same.
        if out.is_none() && !namespace_ok {
            return false;
        }
        if self.config.node_fit && !self.fits_any_other_node(pod) {
            fail!(
                out,
                failed,
                "pod does not fit on any other node because of nodeSelector(s), Taint(s), or nodes marked as unschedulable"
            );
        }
        if !namespace_ok {
            fail!(
                out,
                failed,
                "pod namespace do not match the namespaceLabelSelector filter in the policy parameter"
            );
        }
        !failed
    }

    /// The Eviction API's PDB check. `Ok(Some(pdb))`: admitted, consuming one disruption of `pdb`.
    fn pdb_admission(&self, pod: PodRef<'_>) -> Result<Option<u32>, String> {
        if matches!(
            pod.raw.phase,
            ArchivedPodPhase::Pending | ArchivedPodPhase::Succeeded | ArchivedPodPhase::Failed
        ) || pod.raw.deletion_ms.is_some()
        {
            return Ok(None);
        }
        let p = match self.index.pdbs_of_pod(pod.id) {
            PodPdbs::None => return Ok(None),
            PodPdbs::Many(_) => {
                return Err("This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.".into());
            }
            PodPdbs::One(p) => p,
        };
        let pdb = &self.cluster.archive().pdbs[p as usize];
        let (desired, current) = (
            pdb.desired_healthy.to_native(),
            pdb.current_healthy.to_native(),
        );
        if !self.index.pod_is_ready(pod.id) {
            if matches!(
                pdb.unhealthy_pod_eviction_policy,
                ArchivedUnhealthyPodEvictionPolicy::AlwaysAllow
            ) {
                return Ok(None);
            }
            if current >= desired && desired > 0 {
                return Ok(None);
            }
        }
        let name = self.cluster.str(pdb.name.to_native());
        let allowed = pdb.disruptions_allowed.to_native();
        if allowed < 0 {
            return Err(format!(
                "poddisruptionbudget {name:?} is forbidden: pdb disruptions allowed is negative"
            ));
        }
        if allowed - self.state.pdb_consumed(p) <= 0 {
            return Err(format!(
                "Cannot evict pod as it would violate the pod's disruption budget. The disruption budget {name} needs {desired} healthy pods and has {current} currently"
            ));
        }
        Ok(Some(p))
    }

    fn refuse(&mut self, pod: u32, reason: &str, refusal: Refusal) -> Result<(), Refusal> {
        let counts = &mut self.state.refusal_counts;
        match &refusal {
            Refusal::UnknownPod => counts.unknown_pod += 1,
            Refusal::NotEvictable(_) => counts.not_evictable += 1,
            Refusal::NodeLimit => counts.node_limit += 1,
            Refusal::NamespaceLimit => counts.namespace_limit += 1,
            Refusal::TotalLimit => counts.total_limit += 1,
            Refusal::DisruptionBudget(_) => counts.disruption_budget += 1,
        }
        self.state.refusals.push(RefusedProposal {
            pod,
            reason: reason.to_owned(),
            plugin: self.plugin.to_owned(),
            plugin_set: self.plugin_set.to_owned(),
            refusal: refusal.clone(),
        });
        Err(refusal)
    }

    /// Propose evicting a pod. Refused when the pod is unknown, already proposed, fails Filter or
    /// PreEvictionFilter, when a limit is reached (checked as descheduler does: total, then node,
    /// then namespace), or when the Eviction API would refuse it because of a PDB. Refusals do
    /// not count towards limits; an accepted proposal of a pod guarded by a PDB uses one of its
    /// disruptions.
    pub fn propose(&mut self, pod: u32, reason: &str) -> Result<(), Refusal> {
        if !self.valid_pod(pod) {
            return self.refuse(pod, reason, Refusal::UnknownPod);
        }
        if self.state.is_proposed(pod) {
            return self.refuse(pod, reason, Refusal::NotEvictable(ALREADY_PROPOSED.into()));
        }
        let failures = self.filter_failures(pod);
        if !failures.is_empty() {
            return self.refuse(pod, reason, Refusal::NotEvictable(failures.join("; ")));
        }
        let failures = self.pre_eviction_failures(pod);
        if !failures.is_empty() {
            return self.refuse(pod, reason, Refusal::NotEvictable(failures.join("; ")));
        }
        let p = self.cluster.pod(pod);
        let (node_name, namespace) = (p.raw.node_name.to_native(), p.namespace_id());
        let limits = self.state.limits;
        if limits.total.is_some_and(|max| self.state.total + 1 > max) {
            return self.refuse(pod, reason, Refusal::TotalLimit);
        }
        if node_name != 0
            && limits
                .per_node
                .is_some_and(|max| self.state.node_count(node_name) + 1 > max)
        {
            return self.refuse(pod, reason, Refusal::NodeLimit);
        }
        if limits
            .per_namespace
            .is_some_and(|max| self.state.namespace_count(namespace) + 1 > max)
        {
            return self.refuse(pod, reason, Refusal::NamespaceLimit);
        }
        let consumed = match self.pdb_admission(p) {
            Ok(c) => c,
            Err(message) => return self.refuse(pod, reason, Refusal::DisruptionBudget(message)),
        };
        let state = &mut *self.state;
        if let Some(pdb) = consumed {
            state.pdb_consumed[pdb as usize] += 1;
        }
        state.proposed[pod as usize] = true;
        state.total += 1;
        if node_name != 0 {
            *state.per_node.entry(node_name).or_insert(0) += 1;
        }
        *state.per_namespace.entry(namespace).or_insert(0) += 1;
        state.proposals.push(AcceptedProposal {
            pod,
            reason: reason.to_owned(),
            plugin: self.plugin.to_owned(),
            plugin_set: self.plugin_set.to_owned(),
        });
        Ok(())
    }
}

impl Host for Evictor<'_> {
    fn nodes(&mut self) -> Vec<u32> {
        self.nodes_in_scope.to_vec()
    }

    fn filter(&mut self, pods: &[u32]) -> Vec<u32> {
        pods.iter()
            .copied()
            .filter(|&p| self.passes_filter(p))
            .collect()
    }

    fn pre_eviction_filter(&mut self, pods: &[u32]) -> Vec<u32> {
        pods.iter()
            .copied()
            .filter(|&p| self.passes_pre_eviction_filter(p))
            .collect()
    }

    fn propose_eviction(&mut self, pod: u32, reason: &str) -> Result<(), Refusal> {
        self.propose(pod, reason)
    }

    fn node_fit(&mut self, pod: u32, candidates: &[u32]) -> Vec<u32> {
        if !self.valid_pod(pod) {
            return Vec::new();
        }
        let pod_ref = self.cluster.pod(pod);
        candidates
            .iter()
            .copied()
            .filter(|&n| {
                self.valid_node(n)
                    && node_fit_error(self.index, pod_ref, self.cluster.node(n)).is_none()
            })
            .collect()
    }

    fn object_json(&mut self, kind: &str, index: u32) -> Option<String> {
        self.object_json.as_mut().and_then(|f| f(kind, index))
    }

    fn log(&mut self, level: LogLevel, message: &str) {
        self.logs.push(LogEntry {
            level,
            plugin: self.plugin.to_owned(),
            plugin_set: self.plugin_set.to_owned(),
            message: message.to_owned(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::*;

    fn filter_of(cluster: &TestCluster, ns: &str, name: &str) -> (bool, Vec<String>) {
        let mut s = cluster.session();
        let id = s.pod_id(ns, name);
        let ev = s.evictor("test");
        (ev.passes_filter(id), ev.filter_failures(id))
    }

    /// Asserts, for every pod of the cluster, whether it passes Filter; `want` maps pod name to
    /// `None` (passes) or `Some(substring of the failure)`.
    #[track_caller]
    fn assert_filter(cluster: &TestCluster, want: &[(&str, Option<&str>)]) {
        let mut s = cluster.session();
        let ids: Vec<(u32, String, String)> = s
            .cluster()
            .pods()
            .map(|p| (p.id, p.namespace().to_owned(), p.name().to_owned()))
            .collect();
        let ev = s.evictor("test");
        for (name, expected) in want {
            let (id, _, _) = ids
                .iter()
                .find(|(_, _, n)| n == name)
                .unwrap_or_else(|| panic!("no pod {name}"));
            let passes = ev.passes_filter(*id);
            let failures = ev.filter_failures(*id);
            match expected {
                None => assert!(
                    passes && failures.is_empty(),
                    "{name} should pass, got {failures:?}"
                ),
                Some(msg) => {
                    assert!(!passes, "{name} should fail with {msg:?}");
                    assert!(
                        failures.iter().any(|f| f.contains(msg)),
                        "{name}: expected {msg:?} in {failures:?}"
                    );
                }
            }
        }
    }

    fn owned_pod(ns: &str, name: &str) -> TestPod {
        TestPod::new(ns, name)
            .on_node("n1")
            .owned_by("ReplicaSet", "rs")
    }

    fn two_nodes() -> TestCluster {
        TestCluster::new()
            .node(TestNode::new("n1"))
            .node(TestNode::new("n2"))
    }

    // ---------------------------------------------------------------- args

    #[test]
    fn args_json_names_match_descheduler() {
        let json = r#"{
            "nodeSelector": "pool=a",
            "labelSelector": {"matchLabels": {"app": "web"}},
            "namespaceLabelSelector": {"matchExpressions": [{"key": "team", "operator": "Exists"}]},
            "priorityThreshold": {"value": 100},
            "nodeFit": true,
            "minReplicas": 2,
            "minPodAge": "5m",
            "noEvictionPolicy": "Mandatory",
            "podProtections": {
                "extraEnabled": ["PodsWithPVC", "PodsWithoutPDB", "PodsWithResourceClaims"],
                "defaultDisabled": ["PodsWithLocalStorage", "DaemonSetPods", "SystemCriticalPods", "FailedBarePods"],
                "config": {"PodsWithPVC": {"protectedStorageClasses": [{"name": "local-path"}]}}
            }
        }"#;
        let args = DefaultEvictorArgs::from_json(json).unwrap();
        assert!(args.validate().is_empty(), "{:?}", args.validate());
        assert_eq!(args.protected_storage_classes(), vec!["local-path"]);
        let p = args.effective_protections();
        assert_eq!(
            p,
            Protections {
                local_storage: false,
                daemon_set: false,
                system_critical: false,
                failed_bare: false,
                pvc: true,
                without_pdb: true,
                resource_claims: true,
            }
        );
        let legacy = DefaultEvictorArgs::from_json(
            r#"{"evictLocalStoragePods": true, "evictDaemonSetPods": true, "evictSystemCriticalPods": true,
                "evictFailedBarePods": true, "ignorePvcPods": true, "ignorePodsWithoutPDB": true,
                "apiVersion": "descheduler/v1alpha2", "kind": "DefaultEvictorArgs"}"#,
        )
        .unwrap();
        assert_eq!(
            legacy.effective_protections(),
            Protections {
                resource_claims: false,
                ..p
            },
            "there is no deprecated flag for ResourceClaims"
        );
        assert_eq!(
            DefaultEvictorArgs::default().effective_protections(),
            Protections {
                local_storage: true,
                daemon_set: true,
                system_critical: true,
                failed_bare: true,
                ..Protections::default()
            }
        );
        for bad in [
            r#"{"nodefit": true}"#,
            r#"{"ignorePodsWithoutPdb": true}"#,
            r#"{"minReplicas": -1}"#,
            r#"{"podProtections": {"config": {"PodsWithPvc": {}}}}"#,
        ] {
            assert!(DefaultEvictorArgs::from_json(bad).is_err(), "{bad}");
        }
        assert_eq!(
            DefaultEvictorArgs::from_json(" null ").unwrap(),
            DefaultEvictorArgs::default()
        );
    }

    #[test]
    fn validation_rules() {
        let cases: &[(&str, &str, &str)] = &[
            (
                r#"{"priorityThreshold": {"value": 1, "name": "x"}}"#,
                "priorityThreshold",
                "only one of priorityThreshold fields can be set",
            ),
            (
                r#"{"noEvictionPolicy": "Always"}"#,
                "noEvictionPolicy",
                "accepts only",
            ),
            (
                r#"{"evictLocalStoragePods": true, "podProtections": {"defaultDisabled": ["DaemonSetPods"]}}"#,
                "podProtections",
                "cannot use Deprecated fields",
            ),
            (
                r#"{"ignorePodsWithoutPDB": true, "podProtections": {"extraEnabled": ["PodsWithPVC"]}}"#,
                "podProtections",
                "cannot use Deprecated fields",
            ),
            (
                r#"{"podProtections": {"extraEnabled": ["PodsWithPVCC"]}}"#,
                "podProtections.extraEnabled[0]",
                "invalid pod protection policy in ExtraEnabled: \"PodsWithPVCC\". Valid options are: [PodsWithPVC PodsWithoutPDB PodsWithResourceClaims]",
            ),
            (
                r#"{"podProtections": {"extraEnabled": ["DaemonSetPods"]}}"#,
                "podProtections.extraEnabled[0]",
                "ExtraEnabled",
            ),
            (
                r#"{"podProtections": {"defaultDisabled": ["PodsWithPVC"]}}"#,
                "podProtections.defaultDisabled[0]",
                "Valid options are: [PodsWithLocalStorage SystemCriticalPods FailedBarePods DaemonSetPods]",
            ),
            (
                r#"{"podProtections": {"defaultDisabled": ["DaemonSetPods", "DaemonSetPods"]}}"#,
                "podProtections.defaultDisabled",
                "PodProtections.DefaultDisabled contains duplicate entries",
            ),
            (
                r#"{"podProtections": {"extraEnabled": ["PodsWithPVC", "PodsWithPVC"]}}"#,
                "podProtections.extraEnabled",
                "PodProtections.ExtraEnabled contains duplicate entries",
            ),
            (
                r#"{"nodeSelector": "a in b"}"#,
                "nodeSelector",
                "expected: '('",
            ),
            (
                r#"{"minPodAge": "5 minutes"}"#,
                "minPodAge",
                "\"5 minutes\"",
            ),
            (
                r#"{"labelSelector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}"#,
                "labelSelector.matchExpressions[0].values",
                "must be specified",
            ),
            (
                r#"{"namespaceLabelSelector": {"matchLabels": {"a": "not ok"}}}"#,
                "namespaceLabelSelector.matchLabels.a",
                "invalid label value",
            ),
        ];
        for (json, field, msg) in cases {
            let errors = DefaultEvictorArgs::from_json(json).unwrap().validate();
            assert!(
                errors
                    .iter()
                    .any(|e| e.field == *field && e.message.contains(msg)),
                "{json}: want {field}: {msg}, got {errors:?}"
            );
        }
        // minReplicas 1 only warns in descheduler.
        assert!(
            DefaultEvictorArgs::from_json(r#"{"minReplicas": 1}"#)
                .unwrap()
                .validate()
                .is_empty()
        );
        // Several problems are all reported.
        let many = DefaultEvictorArgs::from_json(
            r#"{"noEvictionPolicy": "x", "nodeSelector": "!", "minPodAge": "1"}"#,
        )
        .unwrap();
        assert_eq!(many.validate().len(), 3, "{:?}", many.validate());
    }

    #[test]
    fn go_durations() {
        let ok: &[(&str, i128, &str)] = &[
            ("0", 0, "0s"),
            ("5m", 300_000_000_000, "5m0s"),
            ("1h30m", 5_400_000_000_000, "1h30m0s"),
            ("1.5h", 5_400_000_000_000, "1h30m0s"),
            ("300ms", 300_000_000, "300ms"),
            ("-2s", -2_000_000_000, "-2s"),
            ("+1s", 1_000_000_000, "1s"),
            ("1h2m3.5s", 3_723_500_000_000, "1h2m3.5s"),
            ("10us", 10_000, "10µs"),
            ("7µs", 7_000, "7µs"),
            ("42ns", 42, "42ns"),
            (".5s", 500_000_000, "500ms"),
            ("1.25ms", 1_250_000, "1.25ms"),
        ];
        for (s, nanos, shown) in ok {
            assert_eq!(parse_go_duration(s), Ok(*nanos), "{s}");
            assert_eq!(format_go_duration(*nanos), *shown, "{s}");
        }
        for bad in ["", "5", "m", "1d", "1.s.", "-", ".s", "5m3", "9999999999h"] {
            assert!(parse_go_duration(bad).is_err(), "{bad:?}");
        }
    }

    // ---------------------------------------------------------------- resolve

    #[test]
    fn priority_threshold_resolution() {
        let base = two_nodes()
            .priority_class("standard", 1000)
            .priority_class("huge", 2_000_000_001);
        let s = base
            .clone()
            .evictor_args(r#"{"priorityThreshold": {"name": "standard"}}"#)
            .session();
        assert_eq!(s.config().unwrap().priority_threshold(), Some(1000));
        let s = base
            .clone()
            .evictor_args(r#"{"priorityThreshold": {"value": 5}}"#)
            .session();
        assert_eq!(s.config().unwrap().priority_threshold(), Some(5));
        let s = base
            .clone()
            .evictor_args(r#"{"priorityThreshold": {"name": "missing"}}"#)
            .session();
        let e = s.config().unwrap_err();
        assert!(
            e[0].field == "priorityThreshold.name" && e[0].message.contains("\"missing\""),
            "{e:?}"
        );
        let s = base
            .clone()
            .evictor_args(r#"{"priorityThreshold": {"name": "huge"}}"#)
            .session();
        assert!(
            s.config().unwrap_err()[0]
                .message
                .contains("can't be greater than 2000000000")
        );
        let s = base
            .clone()
            .evictor_args(r#"{"priorityThreshold": {"value": 2000000001}}"#)
            .session();
        assert!(s.config().is_err());
        // Without SystemCriticalPods the threshold is not even looked up.
        let s = base
            .clone()
            .evictor_args(
                r#"{"evictSystemCriticalPods": true, "priorityThreshold": {"name": "missing"}}"#,
            )
            .session();
        assert_eq!(s.config().unwrap().priority_threshold(), None);
        let s = base.session();
        assert_eq!(s.config().unwrap(), &EvictorConfig::defaults(s.cluster()));
    }

    // ---------------------------------------------------------------- Filter

    #[test]
    fn filter_basic_rules() {
        let c = two_nodes()
            .pod(owned_pod("a", "plain"))
            .pod(owned_pod("a", "mirror").mirror())
            .pod(owned_pod("a", "static").static_pod())
            .pod(owned_pod("a", "from-api").annotation(SOURCE_ANNOTATION, "api"))
            .pod(owned_pod("a", "terminating").terminating())
            .pod(
                owned_pod("a", "evict-mirror")
                    .mirror()
                    .empty_dir("x")
                    .evict_annotation(),
            )
            .pod(
                owned_pod("a", "evict-false")
                    .terminating()
                    .annotation(EVICT_ANNOTATION, "false"),
            )
            .pod(owned_pod("a", "prefer").prefer_no_eviction())
            .pod(owned_pod("a", "critical").priority(2_000_000_000))
            .pod(owned_pod("a", "almost-critical").priority(1_999_999_999))
            .pod(TestPod::new("a", "bare").on_node("n1"))
            .pod(
                TestPod::new("a", "bare-failed")
                    .on_node("n1")
                    .phase(PodPhase::Failed),
            )
            .pod(owned_pod("a", "empty-dir").empty_dir("cache"))
            .pod(owned_pod("a", "host-path").host_path("logs"))
            .pod(owned_pod("a", "ephemeral").ephemeral_volume("scratch"))
            .pod(
                TestPod::new("a", "ds")
                    .on_node("n1")
                    .owned_by("DaemonSet", "agent"),
            )
            .pod(owned_pod("a", "pvc").pvc("data", "data-0"))
            .pod(owned_pod("a", "claims").resource_claims());
        assert_filter(
            &c,
            &[
                ("plain", None),
                ("mirror", Some("pod is a mirror pod")),
                ("static", Some("pod is a static pod")),
                ("from-api", None),
                ("terminating", Some("pod is terminating")),
                ("evict-mirror", None),
                ("evict-false", None),
                ("prefer", None),
                ("critical", Some("system critical priority")),
                ("almost-critical", None),
                ("bare", Some("pod does not have any ownerRefs")),
                ("bare-failed", Some("pod does not have any ownerRefs")),
                ("empty-dir", Some("local storage")),
                ("host-path", Some("local storage")),
                ("ephemeral", None),
                ("ds", Some("daemonset pods are protected")),
                ("pvc", None),
                ("claims", None),
            ],
        );
        // Every failure is listed, in descheduler's order.
        let (_, failures) = filter_of(
            &two_nodes().pod(TestPod::new("a", "p").on_node("n1").mirror().host_path("h")),
            "a",
            "p",
        );
        assert_eq!(
            failures,
            [
                "pod is a mirror pod",
                "pod is a static pod",
                "pod does not have any ownerRefs",
                "pod has local storage and is protected against eviction",
            ]
        );
    }

    #[test]
    fn filter_protection_switches() {
        let pods = || {
            two_nodes()
                .priority_class("standard", 1000)
                .pod(owned_pod("a", "critical").priority(2_000_000_000))
                .pod(owned_pod("a", "p1000").priority(1000))
                .pod(owned_pod("a", "p999").priority(999))
                .pod(owned_pod("a", "no-priority"))
                .pod(TestPod::new("a", "bare").on_node("n1"))
                .pod(
                    TestPod::new("a", "bare-failed")
                        .on_node("n1")
                        .phase(PodPhase::Failed),
                )
                .pod(owned_pod("a", "empty-dir").empty_dir("cache"))
                .pod(
                    TestPod::new("a", "ds")
                        .on_node("n1")
                        .owned_by("DaemonSet", "agent"),
                )
                .pod(owned_pod("a", "claims").resource_claims())
        };
        assert_filter(
            &pods().evictor_args(r#"{"priorityThreshold": {"name": "standard"}}"#),
            &[
                ("critical", Some("system critical priority")),
                (
                    "p1000",
                    Some("higher priority than specified priority class threshold"),
                ),
                ("p999", None),
                ("no-priority", None),
            ],
        );
        // evictSystemCriticalPods turns the threshold off too.
        assert_filter(
            &pods().evictor_args(
                r#"{"evictSystemCriticalPods": true, "priorityThreshold": {"value": 1}}"#,
            ),
            &[("critical", None), ("p1000", None)],
        );
        assert_filter(
            &pods().evictor_args(r#"{"evictFailedBarePods": true}"#),
            &[
                (
                    "bare",
                    Some("pod does not have any ownerRefs and is not in failed phase"),
                ),
                ("bare-failed", None),
            ],
        );
        assert_filter(
            &pods().evictor_args(
                r#"{"podProtections": {"defaultDisabled": ["PodsWithLocalStorage", "DaemonSetPods", "SystemCriticalPods", "FailedBarePods"]}}"#,
            ),
            &[
                ("critical", None),
                ("empty-dir", None),
                ("ds", None),
                ("bare", Some("not in failed phase")),
                ("bare-failed", None),
                ("claims", None),
            ],
        );
        assert_filter(
            &pods().evictor_args(
                r#"{"podProtections": {"extraEnabled": ["PodsWithResourceClaims"]}}"#,
            ),
            &[
                ("claims", Some("ResourceClaims")),
                ("empty-dir", Some("local storage")),
            ],
        );
    }

    #[test]
    fn filter_pvc_protection() {
        let c = || {
            two_nodes()
                .pvc("a", "fast-0", Some("gp3"))
                .pvc("a", "local-0", Some("local-path"))
                .pvc("a", "classless-0", None)
                .pvc("a", "blank-0", Some(""))
                .pod(owned_pod("a", "fast").pvc("data", "fast-0"))
                .pod(owned_pod("a", "local").pvc("data", "local-0"))
                .pod(
                    owned_pod("a", "both")
                        .pvc("d1", "fast-0")
                        .pvc("d2", "local-0"),
                )
                .pod(owned_pod("a", "missing").pvc("data", "nope"))
                .pod(owned_pod("a", "classless").pvc("data", "classless-0"))
                .pod(owned_pod("a", "blank").pvc("data", "blank-0"))
                .pod(owned_pod("a", "ephemeral").ephemeral_volume("scratch"))
                .pod(owned_pod("a", "none"))
        };
        assert_filter(
            &c().evictor_args(r#"{"ignorePvcPods": true}"#),
            &[
                ("fast", Some("pod with PVC is protected against eviction")),
                ("missing", Some("pod with PVC")),
                ("ephemeral", None),
                ("none", None),
            ],
        );
        assert_filter(
            &c().evictor_args(
                r#"{"podProtections": {"extraEnabled": ["PodsWithPVC"],
                    "config": {"PodsWithPVC": {"protectedStorageClasses": [{"name": "local-path"}, {"name": "unused"}]}}}}"#,
            ),
            &[
                ("fast", None),
                ("local", Some("pod using protected storage class \"local-path\"")),
                ("both", Some("local-path")),
                ("missing", Some("failed to get persistent volume claim \"a\"/\"nope\"")),
                ("classless", Some("failed to resolve storage class")),
                ("blank", Some("failed to resolve storage class")),
                ("ephemeral", None),
                ("none", None),
            ],
        );
        // The config alone does not enable the protection.
        assert_filter(
            &c().evictor_args(
                r#"{"podProtections": {"config": {"PodsWithPVC": {"protectedStorageClasses": [{"name": "local-path"}]}}}}"#,
            ),
            &[("local", None)],
        );
    }

    #[test]
    fn filter_pods_without_pdb() {
        let c = two_nodes()
            .evictor_args(r#"{"podProtections": {"extraEnabled": ["PodsWithoutPDB"]}}"#)
            .pod(owned_pod("a", "covered").label("app", "web"))
            .pod(owned_pod("a", "uncovered").label("app", "db"))
            .pod(owned_pod("b", "all-of-b"))
            .pod(owned_pod("c", "nil-selector"))
            .pod(owned_pod("d", "other-namespace").label("app", "web"))
            .pdb(TestPdb::new("a", "web").match_label("app", "web"))
            .pdb(TestPdb::new("b", "everything").select_all())
            .pdb(TestPdb::new("c", "nothing"));
        assert_filter(
            &c,
            &[
                ("covered", None),
                ("uncovered", Some("does not have a PodDisruptionBudget")),
                ("all-of-b", None),
                ("nil-selector", Some("PodDisruptionBudget")),
                ("other-namespace", Some("PodDisruptionBudget")),
            ],
        );
    }

    #[test]
    fn filter_selector_replicas_age_and_no_eviction_policy() {
        let c = || {
            two_nodes()
                .pod(owned_pod("a", "web").label("tier", "web"))
                .pod(owned_pod("a", "db").label("tier", "db"))
                .pod(
                    TestPod::new("a", "pair-1")
                        .on_node("n1")
                        .owned_by("ReplicaSet", "pair"),
                )
                .pod(
                    TestPod::new("a", "pair-2")
                        .on_node("n2")
                        .owned_by("ReplicaSet", "pair")
                        .phase(PodPhase::Succeeded),
                )
                .pod(
                    TestPod::new("a", "trio-1")
                        .on_node("n1")
                        .owned_by("ReplicaSet", "trio"),
                )
                .pod(
                    TestPod::new("a", "trio-2")
                        .on_node("n1")
                        .owned_by("ReplicaSet", "trio"),
                )
                .pod(
                    TestPod::new("a", "trio-3")
                        .on_node("n1")
                        .owned_by("ReplicaSet", "trio"),
                )
                .pod(
                    TestPod::new("a", "two-owners")
                        .on_node("n1")
                        .owned_by("ReplicaSet", "x")
                        .owned_by("Other", "y"),
                )
                .pod(owned_pod("a", "young").started_ago_secs(600))
                .pod(
                    owned_pod("a", "old")
                        .started_ago_secs(7200)
                        .created_ago_secs(60),
                )
                .pod(owned_pod("a", "exactly").started_ago_secs(3600))
                .pod(owned_pod("a", "unstarted").not_started())
                .pod(owned_pod("a", "prefer").prefer_no_eviction())
                .pod(
                    owned_pod("a", "prefer-evict")
                        .prefer_no_eviction()
                        .evict_annotation(),
                )
        };
        assert_filter(
            &c().evictor_args(r#"{"labelSelector": {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["web"]}]}}"#),
            &[("web", None), ("db", Some("labelSelector")), ("pair-1", Some("labelSelector"))],
        );
        assert_filter(
            &c().evictor_args(r#"{"labelSelector": {}}"#),
            &[("web", None), ("db", None)],
        );
        assert_filter(
            &c().evictor_args(r#"{"minReplicas": 3}"#),
            &[
                (
                    "pair-1",
                    Some("owner has 2 replicas which is less than minReplicas of 3"),
                ),
                ("trio-1", None),
                ("two-owners", None),
            ],
        );
        assert_filter(
            &c().evictor_args(r#"{"minReplicas": 1}"#),
            &[("pair-1", None)],
        );
        assert_filter(
            &c().evictor_args(r#"{"minPodAge": "1h"}"#),
            &[
                (
                    "young",
                    Some("pod age is not older than MinPodAge: 1h0m0s seconds"),
                ),
                ("old", None),
                ("exactly", None),
                ("unstarted", Some("MinPodAge")),
            ],
        );
        assert_filter(
            &c().evictor_args(r#"{"noEvictionPolicy": "Mandatory"}"#),
            &[
                ("prefer", Some("noEvictionPolicy is Mandatory")),
                ("prefer-evict", None),
                ("web", None),
            ],
        );
        assert_filter(
            &c().evictor_args(r#"{"noEvictionPolicy": "Preferred"}"#),
            &[("prefer", None)],
        );
    }

    // ---------------------------------------------------------------- PreEvictionFilter, nodeFit

    #[test]
    fn pre_eviction_namespace_selector() {
        let c = two_nodes()
            .evictor_args(r#"{"namespaceLabelSelector": {"matchLabels": {"team": "shop"}}}"#)
            .namespace(TestNamespace::new("shop").label("team", "shop"))
            .namespace(TestNamespace::new("pay").label("team", "pay"))
            .pod(owned_pod("shop", "a"))
            .pod(owned_pod("pay", "b").evict_annotation())
            .pod(owned_pod("undeclared", "c"));
        let mut s = c.session();
        let ids = [
            s.pod_id("shop", "a"),
            s.pod_id("pay", "b"),
            s.pod_id("undeclared", "c"),
        ];
        let ev = s.evictor("test");
        assert!(ev.passes_pre_eviction_filter(ids[0]));
        assert!(
            ev.passes_filter(ids[1]),
            "the evict annotation bypasses Filter ..."
        );
        assert!(
            !ev.passes_pre_eviction_filter(ids[1]),
            "... but not PreEvictionFilter"
        );
        assert!(ev.pre_eviction_failures(ids[1])[0].contains("namespaceLabelSelector"));
        assert!(!ev.passes_pre_eviction_filter(ids[2]));

        let exprs = two_nodes()
            .evictor_args(r#"{"namespaceLabelSelector": {"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["pay"]}]}}"#)
            .namespace(TestNamespace::new("pay").label("team", "pay"))
            .pod(owned_pod("pay", "b"))
            .pod(owned_pod("other", "c"));
        let mut s = exprs.session();
        let (b, c) = (s.pod_id("pay", "b"), s.pod_id("other", "c"));
        let ev = s.evictor("test");
        assert!(!ev.passes_pre_eviction_filter(b));
        assert!(ev.passes_pre_eviction_filter(c));
    }

    #[test]
    fn node_fit_checks() {
        let c = TestCluster::new()
            .node(TestNode::new("src").cpu("8").label("pool", "a"))
            .node(
                TestNode::new("small")
                    .cpu("1")
                    .memory("1Gi")
                    .label("pool", "a"),
            )
            .node(
                TestNode::new("tainted")
                    .taint("dedicated", "gpu", NoSchedule)
                    .label("pool", "a"),
            )
            .node(
                TestNode::new("soft-tainted")
                    .taint("x", "y", PreferNoSchedule)
                    .label("pool", "b"),
            )
            .node(TestNode::new("cordoned").unschedulable().label("pool", "a"))
            .node(TestNode::new("full").pods(2).label("pool", "a"))
            .node(
                TestNode::new("zone-a")
                    .label("zone", "a")
                    .label("pool", "a"),
            )
            .node(TestNode::new("down").not_ready().label("pool", "a"))
            .node(
                TestNode::new("gpu")
                    .allocatable("nvidia.com/gpu", "1")
                    .label("pool", "a"),
            )
            // Usage: "small" is half used by a running pod; a finished pod does not count, a
            // terminating one does.
            .pod(owned_pod("a", "small-user").on_node("small").cpu("500m"))
            .pod(
                owned_pod("a", "small-done")
                    .on_node("small")
                    .cpu("500m")
                    .phase(PodPhase::Succeeded),
            )
            .pod(owned_pod("a", "full-1").on_node("full"))
            .pod(owned_pod("a", "full-2").on_node("full").terminating())
            .pod(
                owned_pod("a", "full-3")
                    .on_node("full")
                    .phase(PodPhase::Failed),
            )
            .pod(
                owned_pod("a", "web-zone-a")
                    .on_node("zone-a")
                    .label("app", "web"),
            )
            .pod(
                owned_pod("a", "mover")
                    .on_node("src")
                    .cpu("400m")
                    .memory("100Mi")
                    .label("app", "web"),
            )
            .pod(owned_pod("a", "big").on_node("src").cpu("600m"))
            .pod(
                owned_pod("a", "gpu-user")
                    .on_node("src")
                    .request("nvidia.com/gpu", "1"),
            )
            .pod(
                owned_pod("a", "picky")
                    .on_node("src")
                    .node_selector("pool", "b"),
            )
            .pod(
                owned_pod("a", "lonely")
                    .on_node("src")
                    .label("app", "web")
                    .anti_affinity(TestAffinityTerm::new("zone").match_label("app", "web")),
            )
            .pod(owned_pod("a", "unbound").cpu("6"));
        let mut s = c.session();
        let node = |s: &TestSession, n: &str| s.node_id(n);
        let names = [
            "src",
            "small",
            "tainted",
            "soft-tainted",
            "cordoned",
            "full",
            "zone-a",
            "down",
            "gpu",
        ];
        let ids: Vec<u32> = names.iter().map(|n| node(&s, n)).collect();
        let pod = |s: &TestSession, n: &str| s.pod_id("a", n);
        let (mover, big, gpu_user, picky, lonely, unbound) = (
            pod(&s, "mover"),
            pod(&s, "big"),
            pod(&s, "gpu-user"),
            pod(&s, "picky"),
            pod(&s, "lonely"),
            pod(&s, "unbound"),
        );
        let ev = s.evictor("test");
        let err = |p: u32, n: usize| ev.node_fit_error(p, ids[n]).map(|e| e.to_string());
        assert_eq!(err(mover, 0), None, "own node: requests are not checked");
        assert_eq!(err(mover, 1), None, "400m fits the 500m left");
        assert_eq!(err(big, 1).as_deref(), Some("insufficient cpu"));
        assert_eq!(
            err(mover, 2).as_deref(),
            Some("pod does not tolerate taints on the node")
        );
        assert_eq!(err(mover, 3), None, "PreferNoSchedule taints are ignored");
        assert_eq!(err(mover, 4).as_deref(), Some("node is not schedulable"));
        assert_eq!(
            err(mover, 5).as_deref(),
            Some("insufficient pods"),
            "1 running + 1 terminating = 2 slots used"
        );
        assert_eq!(err(mover, 6), None, "mover has no anti-affinity");
        assert_eq!(
            err(lonely, 6).as_deref(),
            Some("pod matches inter-pod anti-affinity rule of other pod on node")
        );
        assert_eq!(err(lonely, 1), None, "no zone label on small");
        assert_eq!(
            err(gpu_user, 1).as_deref(),
            Some("insufficient nvidia.com/gpu")
        );
        assert_eq!(err(gpu_user, 8), None);
        assert_eq!(
            err(picky, 1).as_deref(),
            Some("pod node selector does not match the node label")
        );
        assert_eq!(err(picky, 3), None);
        assert_eq!(
            err(unbound, 0),
            None,
            "unbound pods are checked against every node's room"
        );
        assert_eq!(err(unbound, 1).as_deref(), Some("insufficient cpu"));
        assert_eq!(
            ev.config.fit_nodes().len(),
            8,
            "the not-ready node is no candidate"
        );
        assert!(!ev.config.fit_nodes().contains(&ids[7]));

        let mut ev = ev;
        let all: Vec<u32> = ids.clone();
        // Readiness is the caller's business: node_fit checks what it is given.
        assert_eq!(
            ev.node_fit(big, &all),
            vec![ids[0], ids[3], ids[6], ids[7], ids[8]]
        );
        assert_eq!(ev.node_fit(9999, &all), Vec::<u32>::new());
        assert_eq!(ev.node_fit(big, &[9999, ids[0]]), vec![ids[0]]);
    }

    #[test]
    fn pre_eviction_node_fit() {
        let c = TestCluster::new()
            .evictor_args(r#"{"nodeFit": true, "nodeSelector": "pool=a"}"#)
            .node(TestNode::new("n1").label("pool", "a"))
            .node(TestNode::new("n2").label("pool", "a").cpu("1"))
            .node(TestNode::new("n3").label("pool", "b").cpu("64"))
            .pod(owned_pod("a", "fits").on_node("n1").cpu("500m"))
            .pod(owned_pod("a", "too-big").on_node("n1").cpu("2"))
            .pod(
                owned_pod("a", "pinned")
                    .on_node("n1")
                    .node_selector("kubernetes.io/hostname", "n1"),
            );
        let mut s = c.session();
        let (fits, too_big, pinned) = (
            s.pod_id("a", "fits"),
            s.pod_id("a", "too-big"),
            s.pod_id("a", "pinned"),
        );
        let ev = s.evictor("test");
        assert!(ev.passes_pre_eviction_filter(fits));
        assert!(
            !ev.passes_pre_eviction_filter(too_big),
            "n3 has room but is outside the evictor's nodeSelector"
        );
        assert!(
            !ev.passes_pre_eviction_filter(pinned),
            "its own node does not count"
        );
        assert!(ev.pre_eviction_failures(pinned)[0].contains("does not fit on any other node"));
        assert!(ev.passes_filter(too_big), "nodeFit is not part of Filter");
    }

    // ---------------------------------------------------------------- propose: limits, PDBs

    #[test]
    fn limits_are_checked_total_then_node_then_namespace() {
        let c = two_nodes()
            .pod(owned_pod("a", "a1"))
            .pod(owned_pod("a", "a2"))
            .pod(owned_pod("b", "b1").on_node("n2"))
            .pod(owned_pod("b", "b2").on_node("n2"))
            .pod(owned_pod("c", "c1").on_node("n2"))
            .pod(
                TestPod::new("d", "unbound")
                    .owned_by("ReplicaSet", "x")
                    .phase(PodPhase::Pending),
            );
        let mut s = c
            .clone()
            .max_per_node(1)
            .max_per_namespace(1)
            .max_total(3)
            .session();
        let id = |s: &TestSession, ns: &str, n: &str| s.pod_id(ns, n);
        let (a1, a2, b1, b2, c1, unbound) = (
            id(&s, "a", "a1"),
            id(&s, "a", "a2"),
            id(&s, "b", "b1"),
            id(&s, "b", "b2"),
            id(&s, "c", "c1"),
            id(&s, "d", "unbound"),
        );
        let mut ev = s.evictor("test");
        assert_eq!(ev.propose(a1, "r"), Ok(()));
        assert_eq!(
            ev.propose(a2, "r"),
            Err(Refusal::NodeLimit),
            "node before namespace"
        );
        assert_eq!(ev.propose(b1, "r"), Ok(()));
        assert_eq!(ev.propose(c1, "r"), Err(Refusal::NodeLimit));
        assert_eq!(
            ev.propose(unbound, "r"),
            Ok(()),
            "no node limit without a node"
        );
        assert_eq!(ev.propose(b2, "r"), Err(Refusal::TotalLimit), "total first");
        let state = s.state();
        assert_eq!(state.total(), 3);
        assert_eq!(
            state.proposals().iter().map(|p| p.pod).collect::<Vec<_>>(),
            vec![a1, b1, unbound]
        );
        assert_eq!(
            state.refusal_counts(),
            RefusalCounts {
                node_limit: 2,
                total_limit: 1,
                ..RefusalCounts::default()
            }
        );

        let mut s = c.max_per_namespace(1).session();
        let mut ev = s.evictor("test");
        assert_eq!(ev.propose(a1, "r"), Ok(()));
        assert_eq!(ev.propose(a2, "r"), Err(Refusal::NamespaceLimit));
        assert_eq!(ev.propose(b1, "r"), Ok(()));
        assert_eq!(
            s.state().namespace_count(s.cluster().lookup("a").unwrap()),
            1
        );
    }

    #[test]
    fn refusals_do_not_count_towards_limits() {
        let c = two_nodes()
            .max_total(1)
            .pod(owned_pod("a", "guarded").label("app", "db"))
            .pod(owned_pod("a", "free"))
            .pdb(
                TestPdb::new("a", "db")
                    .match_label("app", "db")
                    .disruptions_allowed(0),
            );
        let mut s = c.session();
        let (guarded, free) = (s.pod_id("a", "guarded"), s.pod_id("a", "free"));
        let mut ev = s.evictor("test");
        assert!(matches!(
            ev.propose(guarded, "r"),
            Err(Refusal::DisruptionBudget(_))
        ));
        assert_eq!(ev.propose(free, "r"), Ok(()));
        assert_eq!(
            ev.propose(guarded, "r"),
            Err(Refusal::TotalLimit),
            "limits come before the API"
        );
    }

    #[test]
    fn propose_rejects_unknown_proposed_and_unevictable() {
        let c = two_nodes()
            .pod(owned_pod("a", "ok"))
            .pod(owned_pod("a", "mirror").mirror());
        let mut s = c.session();
        let (ok, mirror) = (s.pod_id("a", "ok"), s.pod_id("a", "mirror"));
        let mut ev = s.evictor("test");
        assert_eq!(ev.propose(77, "r"), Err(Refusal::UnknownPod));
        assert!(
            matches!(ev.propose(mirror, "r"), Err(Refusal::NotEvictable(m)) if m.contains("mirror pod"))
        );
        assert_eq!(ev.propose(ok, "r"), Ok(()));
        assert!(
            !ev.passes_filter(ok),
            "proposed pods are terminating for the rest of the run"
        );
        assert!(ev.filter_failures(ok)[0].contains("proposed for eviction earlier"));
        assert!(
            matches!(ev.propose(ok, "again"), Err(Refusal::NotEvictable(m)) if m.contains("earlier in this run"))
        );
        let counts = s.state().refusal_counts();
        assert_eq!(
            (counts.unknown_pod, counts.not_evictable, counts.total()),
            (1, 2, 3)
        );
        assert_eq!(s.state().refusals().len(), 3);
        assert_eq!(s.state().refusals()[0].reason, "r");
    }

    #[test]
    fn pdb_admission() {
        let c = two_nodes()
            // Budget 0.
            .pod(owned_pod("a", "zero-1").label("app", "zero"))
            .pdb(
                TestPdb::new("a", "zero")
                    .match_label("app", "zero")
                    .disruptions_allowed(0)
                    .healthy(2, 2),
            )
            // Budget 1, two pods: the second is refused once the first used it.
            .pod(owned_pod("a", "one-1").label("app", "one"))
            .pod(owned_pod("a", "one-2").label("app", "one"))
            .pdb(
                TestPdb::new("a", "one")
                    .match_label("app", "one")
                    .disruptions_allowed(1)
                    .healthy(3, 2),
            )
            // Two PDBs.
            .pod(
                owned_pod("a", "double")
                    .label("app", "double")
                    .label("tier", "x"),
            )
            .pdb(
                TestPdb::new("a", "d1")
                    .match_label("app", "double")
                    .disruptions_allowed(5),
            )
            .pdb(
                TestPdb::new("a", "d2")
                    .match_label("tier", "x")
                    .disruptions_allowed(5),
            )
            // Unhealthy pods.
            .pod(
                owned_pod("a", "sick-always")
                    .label("app", "always")
                    .not_ready(),
            )
            .pdb(
                TestPdb::new("a", "always")
                    .match_label("app", "always")
                    .always_allow_unhealthy()
                    .healthy(0, 3),
            )
            .pod(
                owned_pod("a", "sick-budget-ok")
                    .label("app", "ok")
                    .not_ready(),
            )
            .pdb(
                TestPdb::new("a", "ok")
                    .match_label("app", "ok")
                    .healthy(3, 3),
            )
            .pod(
                owned_pod("a", "sick-budget-short")
                    .label("app", "short")
                    .not_ready(),
            )
            .pdb(
                TestPdb::new("a", "short")
                    .match_label("app", "short")
                    .healthy(1, 3),
            )
            .pod(
                owned_pod("a", "sick-desired-zero")
                    .label("app", "dz")
                    .not_ready(),
            )
            .pdb(
                TestPdb::new("a", "dz")
                    .match_label("app", "dz")
                    .healthy(0, 0),
            )
            .pod(owned_pod("a", "healthy-always").label("app", "always2"))
            .pdb(
                TestPdb::new("a", "always2")
                    .match_label("app", "always2")
                    .always_allow_unhealthy(),
            )
            // Pods that bypass PDBs.
            .pod(
                owned_pod("a", "failed")
                    .label("app", "zero")
                    .phase(PodPhase::Failed),
            )
            .pod(
                owned_pod("a", "succeeded")
                    .label("app", "zero")
                    .phase(PodPhase::Succeeded),
            )
            .pod(
                owned_pod("a", "pending")
                    .label("app", "zero")
                    .phase(PodPhase::Pending),
            )
            .pod(
                owned_pod("a", "terminating")
                    .label("app", "zero")
                    .terminating()
                    .evict_annotation(),
            )
            .pod(
                owned_pod("a", "unknown-phase")
                    .label("app", "zero")
                    .phase(PodPhase::Unknown)
                    .ready(true),
            )
            // Negative budget.
            .pod(owned_pod("a", "negative").label("app", "neg"))
            .pdb(
                TestPdb::new("a", "neg")
                    .match_label("app", "neg")
                    .disruptions_allowed(-1),
            )
            // Other namespace, nil selector: not guarded.
            .pod(owned_pod("b", "elsewhere").label("app", "zero"))
            .pdb(TestPdb::new("b", "nil"));
        let mut s = c.session();
        let id = |s: &TestSession, n: &str| s.pod_id(if n == "elsewhere" { "b" } else { "a" }, n);
        let cases: &[(&str, Result<(), &str>)] = &[
            (
                "zero-1",
                Err("The disruption budget zero needs 2 healthy pods and has 2 currently"),
            ),
            ("one-1", Ok(())),
            (
                "one-2",
                Err("Cannot evict pod as it would violate the pod's disruption budget"),
            ),
            ("double", Err("more than one PodDisruptionBudget")),
            ("sick-always", Ok(())),
            ("sick-budget-ok", Ok(())),
            ("sick-budget-short", Err("needs 3 healthy pods and has 1")),
            ("sick-desired-zero", Err("disruption budget dz")),
            ("healthy-always", Err("disruption budget always2")),
            ("failed", Ok(())),
            ("succeeded", Ok(())),
            ("pending", Ok(())),
            ("terminating", Ok(())),
            ("unknown-phase", Err("disruption budget zero")),
            ("negative", Err("pdb disruptions allowed is negative")),
            ("elsewhere", Ok(())),
        ];
        let ids: Vec<u32> = cases.iter().map(|(n, _)| id(&s, n)).collect();
        let mut ev = s.evictor("test");
        for ((name, want), &pod) in cases.iter().zip(&ids) {
            match (ev.propose(pod, "r"), want) {
                (Ok(()), Ok(())) => {}
                (Err(Refusal::DisruptionBudget(m)), Err(w)) => {
                    assert!(m.contains(w), "{name}: {m}")
                }
                (got, _) => panic!("{name}: got {got:?}, want {want:?}"),
            }
        }
        // Only healthy evictions used a disruption: one-1 from "one"; the unhealthy ones none.
        let pdb_index = |name: &str| {
            let cluster = s.cluster();
            let id = cluster.lookup(name).unwrap();
            cluster
                .archive()
                .pdbs
                .iter()
                .position(|p| p.name.to_native() == id)
                .unwrap() as u32
        };
        assert_eq!(s.state().pdb_consumed(pdb_index("one")), 1);
        assert_eq!(s.state().pdb_consumed(pdb_index("always")), 0);
        assert_eq!(s.state().pdb_consumed(pdb_index("ok")), 0);
        assert_eq!(s.state().pdb_consumed(pdb_index("zero")), 0);
        assert_eq!(s.index().pdb_pods(pdb_index("one")).len(), 2);
        assert_eq!(
            s.index().pdbs_of_pod(s.pod_id("a", "double")),
            PodPdbs::Many(2)
        );
    }

    #[test]
    fn budget_is_shared_by_plugins_and_plugin_sets_of_a_run() {
        let c = two_nodes()
            .pod(owned_pod("a", "w1").label("app", "w"))
            .pod(owned_pod("a", "w2").label("app", "w"))
            .pod(owned_pod("a", "w3").label("app", "w"))
            .pdb(
                TestPdb::new("a", "w")
                    .match_label("app", "w")
                    .disruptions_allowed(2)
                    .healthy(3, 1),
            );
        let mut s = c.session();
        let ids = [
            s.pod_id("a", "w1"),
            s.pod_id("a", "w2"),
            s.pod_id("a", "w3"),
        ];
        assert_eq!(s.evictor("first").propose(ids[0], "r"), Ok(()));
        let mut second = s.evictor("second");
        second.plugin_set = "other";
        assert_eq!(second.propose(ids[1], "r"), Ok(()));
        assert!(matches!(
            second.propose(ids[2], "r"),
            Err(Refusal::DisruptionBudget(_))
        ));
        let plugins: Vec<(&str, &str)> = s
            .state()
            .proposals()
            .iter()
            .map(|p| (p.plugin.as_str(), p.plugin_set.as_str()))
            .collect();
        assert_eq!(plugins, vec![("first", "default"), ("second", "other")]);
    }

    // ---------------------------------------------------------------- Host

    #[test]
    fn host_interface() {
        let c = TestCluster::new()
            .node(TestNode::new("n1").label("pool", "a"))
            .node(TestNode::new("n2").label("pool", "b"))
            .node(TestNode::new("n3").label("pool", "a").not_ready())
            .node_selector("pool=a")
            .pod(owned_pod("a", "p0"))
            .pod(owned_pod("a", "p1").mirror())
            .pod(owned_pod("a", "p2"));
        let mut s = c.session();
        let n1 = s.node_id("n1");
        let mut ev = s.evictor("test");
        assert_eq!(
            Host::nodes(&mut ev),
            vec![n1],
            "ready nodes matching the policy nodeSelector"
        );
        assert_eq!(
            Host::filter(&mut ev, &[2, 1, 0, 99]),
            vec![2, 0],
            "order kept, unknown dropped"
        );
        assert_eq!(Host::pre_eviction_filter(&mut ev, &[2, 1, 99]), vec![2, 1]);
        assert_eq!(Host::object_json(&mut ev, "Pod", 0), None);
        Host::log(&mut ev, LogLevel::Info, "hello");
        let mut calls = 0;
        let mut json = |kind: &str, i: u32| {
            calls += 1;
            Some(format!("{kind}#{i}"))
        };
        ev.object_json = Some(&mut json);
        assert_eq!(
            Host::object_json(&mut ev, "Node", 1).as_deref(),
            Some("Node#1")
        );
        assert_eq!(Host::propose_eviction(&mut ev, 0, "because"), Ok(()));
        let log = LogEntry {
            level: LogLevel::Info,
            plugin: "test".into(),
            plugin_set: "default".into(),
            message: "hello".into(),
        };
        assert_eq!(ev.logs, vec![log]);
        assert_eq!(calls, 1);
        let mut ev = s.evictor("test");
        assert!(
            ev.logs.is_empty(),
            "every evictor collects its own log lines"
        );
        assert_eq!(Host::filter(&mut ev, &[0]), Vec::<u32>::new());
    }

    #[test]
    fn index_basics() {
        let c = two_nodes()
            .pod(owned_pod("a", "p0").cpu("100m").memory("1Gi"))
            .pod(owned_pod("a", "p1").on_node("n2").cpu("200m"))
            .pod(owned_pod("a", "p2").cpu("300m").phase(PodPhase::Failed))
            .pod(owned_pod("a", "p3").cpu("400m").terminating())
            .pod(owned_pod("a", "p4").on_node("gone"))
            .pod(
                TestPod::new("a", "p5")
                    .owned_by_uid("ReplicaSet", "rs", "uid-replicaset-a-rs")
                    .owned_by_uid("X", "x", "uid-replicaset-a-rs"),
            );
        let s = c.session();
        let cluster = s.cluster();
        let idx = s.index();
        let (n1, n2) = (s.node_id("n1"), s.node_id("n2"));
        assert!(idx.is_for(cluster));
        assert_eq!(idx.pods_on_node(n1), &[0, 2, 3]);
        assert_eq!(idx.pods_on_node(n2), &[1]);
        assert_eq!(idx.pods_on_node(99), &[] as &[u32]);
        assert_eq!(idx.active_pod_count(n1), 2);
        let cpu = idx.ids().cpu.unwrap();
        assert_eq!(idx.requested(n1, cpu), 500);
        assert_eq!(
            idx.requested(n1, idx.ids().memory.unwrap()),
            1024 * 1024 * 1024 * 1000
        );
        assert_eq!(idx.ready_nodes(), &[n1, n2]);
        let uid = cluster.lookup("uid-replicaset-a-rs").unwrap();
        assert_eq!(
            idx.pods_with_owner_uid(uid),
            6,
            "a pod listing the uid twice counts once"
        );
        assert_eq!(
            idx.nodes_in_scope(
                cluster,
                &Selector::parse("kubernetes.io/hostname=n2").unwrap()
            ),
            vec![n2]
        );
    }

    /// Performance check at production scale (150k pods, 5k nodes). Run it with
    /// `cargo test --release -p rebalancer-policy-sdk --features host -- --ignored filter_at_scale --nocapture`.
    #[test]
    #[ignore = "slow in debug builds; run in release"]
    fn filter_at_scale() {
        let mut c = TestCluster::new()
            .evictor_args(r#"{"minReplicas": 2, "minPodAge": "1h", "labelSelector": {"matchLabels": {"tier": "app"}}}"#);
        for n in 0..5_000 {
            c = c.node(TestNode::new(&format!("node-{n}")).label("zone", &format!("z{}", n % 3)));
        }
        for i in 0..150_000 {
            let mut p = TestPod::new(&format!("ns-{}", (i / 3) % 50), &format!("pod-{i}"))
                .on_node(&format!("node-{}", i % 5_000))
                .owned_by("ReplicaSet", &format!("rs-{}", i / 3))
                .label("tier", if i % 7 == 0 { "db" } else { "app" })
                .cpu("100m")
                .memory("128Mi");
            if i % 11 == 0 {
                p = p.empty_dir("cache");
            }
            c = c.pod(p);
        }
        for ns in 0..50 {
            c = c.pdb(
                TestPdb::new(&format!("ns-{ns}"), "pdb")
                    .match_label("tier", "db")
                    .disruptions_allowed(3),
            );
        }
        let started = std::time::Instant::now();
        let mut s = c.session();
        let setup = started.elapsed();
        let cluster = s.cluster();
        let started = std::time::Instant::now();
        let index = ClusterIndex::new(cluster);
        let index_time = started.elapsed();
        drop(index);
        let all: Vec<u32> = (0..150_000).collect();
        let mut ev = s.evictor("bench");
        let started = std::time::Instant::now();
        let passed = Host::filter(&mut ev, &all);
        let filter_time = started.elapsed();
        let started = std::time::Instant::now();
        let pre = Host::pre_eviction_filter(&mut ev, &passed);
        let pre_time = started.elapsed();
        eprintln!(
            "session {setup:?}, index {index_time:?}, filter {filter_time:?} ({} pass), pre-eviction {pre_time:?} ({})",
            passed.len(),
            pre.len()
        );
        assert!(!passed.is_empty());

        // Default args, and nodeFit on.
        let cluster = s.cluster();
        let index = ClusterIndex::new(cluster);
        for args in ["{}", r#"{"nodeFit": true}"#] {
            let config =
                EvictorConfig::resolve(&DefaultEvictorArgs::from_json(args).unwrap(), cluster)
                    .unwrap();
            let mut state = RunState::new(cluster, Limits::default());
            let nodes = index.ready_nodes().to_vec();
            let mut ev = Evictor::new(
                cluster, &index, &config, &mut state, &nodes, "bench", "default",
            );
            let started = std::time::Instant::now();
            let passed = Host::filter(&mut ev, &all);
            let filter_time = started.elapsed();
            let started = std::time::Instant::now();
            let pre = Host::pre_eviction_filter(&mut ev, &passed);
            let pre_time = started.elapsed();
            eprintln!(
                "{args}: filter {filter_time:?} ({} pass), pre-eviction {pre_time:?} ({} pass)",
                passed.len(),
                pre.len()
            );
        }
    }
}
