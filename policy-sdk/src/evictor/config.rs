//! [`EvictorConfig`]: [`DefaultEvictorArgs`] resolved once against a snapshot (priority class
//! looked up, selectors parsed and resolved to ids, nodeFit's candidate nodes listed).
//!
//! Owns the resolution only; plain data shared read-only by every run. Must not decide about
//! individual pods (that is [`super::filter`]).

use super::SYSTEM_CRITICAL_PRIORITY;
use super::args::{DefaultEvictorArgs, Protections};
use crate::k8s::duration::{format_go_duration, parse_go_duration};

use crate::k8s::selector::{LabelSelectorSpec, ResolvedSelector, Selector};
use crate::model::StrId;
use crate::policy::ArgError;
use crate::view::Cluster;

/// [`DefaultEvictorArgs`] resolved against one snapshot: priority class looked up, selectors
/// parsed and resolved to ids, the nodeFit candidate nodes listed. Plain data, shareable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvictorConfig {
    pub(super) args: DefaultEvictorArgs,
    pub(super) protections: Protections,
    /// Pods at or above it are not evictable (SystemCriticalPods on and a threshold given).
    pub(super) priority_threshold: Option<i32>,
    /// `Some`: only PVCs of these classes protect (ids present in the snapshot).
    pub(super) protected_storage_classes: Option<Vec<StrId>>,
    /// `None`: no constraint (absent or empty selector).
    pub(super) label_selector: Option<ResolvedSelector>,
    /// `None`: no constraint; else the namespaces (ids) whose labels match, sorted.
    pub(super) allowed_namespaces: Option<Vec<StrId>>,
    pub(super) node_fit: bool,
    /// Ready nodes matching the evictor's nodeSelector, ascending.
    pub(super) fit_nodes: Vec<u32>,
    pub(super) min_replicas: u32,
    /// Nanoseconds and the duration as Go prints it.
    pub(super) min_pod_age: Option<(i128, String)>,
    pub(super) mandatory_no_eviction: bool,
    /// `cooldown` in ms and as Go prints it.
    pub(super) cooldown: Option<(i64, String)>,
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
        let cooldown = match &args.cooldown {
            Some(s) => {
                let ns = parse_go_duration(s).map_err(|e| vec![ArgError::new("cooldown", e)])?;
                if ns <= 0 {
                    return Err(vec![ArgError::new(
                        "cooldown",
                        format!("must be positive, got {s:?}"),
                    )]);
                }
                let ms = i64::try_from(ns / 1_000_000).unwrap_or(i64::MAX).max(1);
                Some((ms, format_go_duration(ns)))
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
            cooldown,
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
            cooldown: None,
            args,
        }
    }

    pub fn args(&self) -> &DefaultEvictorArgs {
        &self.args
    }

    /// The `cooldown` in ms, when set.
    pub fn cooldown_ms(&self) -> Option<i64> {
        self.cooldown.as_ref().map(|(ms, _)| *ms)
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
