//! What the deschedule plugins PodLifeTime, RemoveFailedPods, RemovePodsHavingTooManyRestarts,
//! RemovePodsViolatingNodeTaints and RemovePodsViolatingNodeAffinity share, none of it plugin
//! logic:
//! - descheduler's `namespaces` (include or exclude) and `labelSelector` plugin args, their
//!   validation (`only one of Include/Exclude namespaces can be set`, `LabelSelectorAsSelector`)
//!   and JSON Schema fragments;
//! - [`PodScope`]: those two args resolved once against the snapshot and matched by ids;
//! - [`propose`]: one proposal and descheduler's reaction to a refused eviction (the SDK's
//!   `Details::refused`: node limit → next node, total limit → stop, anything else → next pod),
//!   counted in a [`Tally`];
//! - [`Details`] (the SDK's bounded per-pod debug logging, re-exported) and small formatting
//!   helpers for reasons.
//!
//! The file lives in `pod-life-time` and is compiled into each of the five crates with
//! `#[path]` (one copy, no drift), until the SDK offers these pieces (docs/internal/REQUESTS.md).
//! It must not do I/O or hold any plugin's semantics.

pub use rebalancer_policy_sdk::args::{Namespaces, null_as_default};
use rebalancer_policy_sdk::k8s::selector::{LabelSelectorSpec, ResolvedSelector};
use rebalancer_policy_sdk::model::{PodPhase, StrId};
use rebalancer_policy_sdk::{ArgError, Cluster, Context, PodRef};
pub use rebalancer_policy_sdk::{Details, Next};

// =============================================================================================
// Args
// =============================================================================================

/// The checks every descheduler validator of these plugins starts with: `namespaces` sets at most
/// one of include/exclude, and `labelSelector` converts to a selector.
pub fn validate_scope(
    namespaces: Option<&Namespaces>,
    label_selector: Option<&LabelSelectorSpec>,
) -> Vec<ArgError> {
    let mut errors = Vec::new();
    if let Some(ns) = namespaces
        && !ns.include.is_empty()
        && !ns.exclude.is_empty()
    {
        errors.push(ArgError::new(
            "namespaces",
            "only one of Include/Exclude namespaces can be set",
        ));
    }
    if let Some(selector) = label_selector {
        errors.extend(selector.validate("labelSelector").into_iter().map(|e| {
            ArgError::new(
                e.field,
                format!(
                    "failed to get label selectors from strategy's params: {}",
                    e.message
                ),
            )
        }));
    }
    errors
}

/// JSON Schema of `namespaces`.
pub fn namespaces_schema() -> serde_json::Value {
    serde_json::json!({
        "description": "Restrict the pods considered by namespace: either include or exclude, \
                        not both.",
        "type": ["object", "null"],
        "additionalProperties": false,
        "properties": {
            "include": { "type": ["array", "null"], "items": { "type": "string" } },
            "exclude": { "type": ["array", "null"], "items": { "type": "string" } }
        },
        "not": {
            "type": "object",
            "properties": {
                "include": { "type": "array", "minItems": 1 },
                "exclude": { "type": "array", "minItems": 1 }
            },
            "required": ["include", "exclude"]
        },
        "default": null
    })
}

/// JSON Schema of `labelSelector` (a `metav1.LabelSelector`).
pub fn label_selector_schema() -> serde_json::Value {
    serde_json::json!({
        "description": "Only pods whose labels match this selector are considered.",
        "type": ["object", "null"],
        "additionalProperties": false,
        "properties": {
            "matchLabels": {
                "type": ["object", "null"],
                "additionalProperties": { "type": "string" }
            },
            "matchExpressions": {
                "type": ["array", "null"],
                "items": {
                    "type": "object",
                    "additionalProperties": false,
                    "required": ["key", "operator"],
                    "properties": {
                        "key": { "type": "string" },
                        "operator": { "enum": ["In", "NotIn", "Exists", "DoesNotExist"] },
                        "values": { "type": ["array", "null"], "items": { "type": "string" } }
                    }
                }
            }
        },
        "default": null
    })
}

// =============================================================================================
// Matching
// =============================================================================================

/// Which namespaces pass, resolved to string ids. A name no object uses cannot be any pod's
/// namespace, so it is dropped when resolving (an include list of only such names admits nothing).
#[derive(Debug)]
enum NamespaceFilter {
    All,
    Include(Vec<StrId>),
    Exclude(Vec<StrId>),
}

/// The `namespaces` and `labelSelector` args of a plugin, resolved against one snapshot.
#[derive(Debug)]
pub struct PodScope {
    namespaces: NamespaceFilter,
    /// `None`: no selector (every pod).
    selector: Option<ResolvedSelector>,
}

impl PodScope {
    pub fn new(
        cluster: Cluster<'_>,
        namespaces: Option<&Namespaces>,
        label_selector: Option<&LabelSelectorSpec>,
    ) -> Self {
        let resolve = |names: &[String]| names.iter().filter_map(|n| cluster.lookup(n)).collect();
        let namespaces = match namespaces {
            Some(ns) if !ns.include.is_empty() => NamespaceFilter::Include(resolve(&ns.include)),
            Some(ns) if !ns.exclude.is_empty() => NamespaceFilter::Exclude(resolve(&ns.exclude)),
            _ => NamespaceFilter::All,
        };
        let selector = label_selector
            .map(|s| s.resolve(cluster))
            .filter(|s| !s.is_everything());
        PodScope {
            namespaces,
            selector,
        }
    }

    /// The pod is in an allowed namespace and matches the label selector.
    pub fn admits(&self, pod: PodRef<'_>) -> bool {
        let ns = pod.namespace_id();
        let namespace_ok = match &self.namespaces {
            NamespaceFilter::All => true,
            NamespaceFilter::Include(ids) => ids.contains(&ns),
            NamespaceFilter::Exclude(ids) => !ids.contains(&ns),
        };
        namespace_ok
            && self
                .selector
                .as_ref()
                .is_none_or(|s| s.matches(pod.cluster(), &pod.raw.labels))
    }
}

// =============================================================================================
// Proposals
// =============================================================================================

/// What one plugin pass did, for the summary log line and tests.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Tally {
    /// Pods that met the plugin's criteria and passed the evictor's filters.
    pub candidates: usize,
    pub proposed: usize,
    pub refused: usize,
    /// Set when a total limit ended the pass.
    pub stopped: Option<String>,
}

impl Tally {
    /// `"{n} candidate pods, {p} proposals, {r} refused[; stopped: …]"`.
    pub fn summary(&self) -> String {
        let stopped = self
            .stopped
            .as_deref()
            .map(|why| format!("; stopped: {why}"))
            .unwrap_or_default();
        format!(
            "{} candidate pods, {} proposals, {} refused{stopped}",
            self.candidates, self.proposed, self.refused
        )
    }
}

/// Propose evicting `pod` and say how to go on. Every refusal is counted; those that concern
/// only this pod (PDB, not evictable, namespace limit) are logged as details.
pub fn propose(
    ctx: &mut Context<'_>,
    pod: u32,
    reason: &str,
    tally: &mut Tally,
    details: &mut Details,
) -> Next {
    let refusal = match ctx.propose_eviction(pod, reason) {
        Ok(()) => {
            tally.proposed += 1;
            return Next::Pod;
        }
        Err(refusal) => refusal,
    };
    tally.refused += 1;
    let next = details.refused(ctx, pod, &refusal);
    if next == Next::Stop {
        tally.stopped = Some(refusal.to_string());
    }
    next
}

// =============================================================================================
// Formatting
// =============================================================================================

/// The pod phase as Kubernetes writes it (`Running`, …).
pub fn phase_name(phase: PodPhase) -> &'static str {
    match phase {
        PodPhase::Pending => "Pending",
        PodPhase::Running => "Running",
        PodPhase::Succeeded => "Succeeded",
        PodPhase::Failed => "Failed",
        PodPhase::Unknown => "Unknown",
    }
}

/// A duration in whole seconds for people: the two largest units, `3d4h`, `5m20s`, `45s`.
pub fn human_duration(secs: u64) -> String {
    const UNITS: [(u64, &str); 4] = [(86_400, "d"), (3_600, "h"), (60, "m"), (1, "s")];
    let Some(first) = UNITS.iter().position(|&(size, _)| secs >= size) else {
        return "0s".into();
    };
    let (size, unit) = UNITS[first];
    let mut out = format!("{}{unit}", secs / size);
    if let Some(&(next, next_unit)) = UNITS.get(first + 1) {
        let rest = (secs % size) / next;
        if rest > 0 {
            out.push_str(&format!("{rest}{next_unit}"));
        }
    }
    out
}

/// `{key}={value}:{effect}` (or `{key}:{effect}` for an empty value), as kubectl prints a taint.
pub fn taint_text(key: &str, value: &str, effect: &str) -> String {
    if value.is_empty() {
        format!("{key}:{effect}")
    } else {
        format!("{key}={value}:{effect}")
    }
}

#[cfg(test)]
mod scope_tests {
    use super::*;

    #[test]
    fn durations_read_naturally() {
        let cases = [
            (0, "0s"),
            (45, "45s"),
            (60, "1m"),
            (320, "5m20s"),
            (3_600, "1h"),
            (3_660, "1h1m"),
            (3_601, "1h"),
            (86_400 * 3 + 3_600 * 4 + 59, "3d4h"),
            (u64::MAX, "213503982334601d7h"),
        ];
        for (secs, want) in cases {
            assert_eq!(human_duration(secs), want, "{secs}s");
        }
    }

    #[test]
    fn scope_validation() {
        let both = Namespaces {
            include: vec!["a".into()],
            exclude: vec!["b".into()],
        };
        let errors = validate_scope(Some(&both), None);
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].field, "namespaces");
        let one = Namespaces {
            include: vec!["a".into()],
            exclude: Vec::new(),
        };
        assert!(validate_scope(Some(&one), None).is_empty());
        let bad: LabelSelectorSpec =
            serde_json::from_str(r#"{"matchExpressions":[{"key":"a","operator":"In"}]}"#).unwrap();
        let errors = validate_scope(None, Some(&bad));
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].field.starts_with("labelSelector"), "{errors:?}");
        assert!(
            errors[0]
                .message
                .starts_with("failed to get label selectors from strategy's params"),
            "{errors:?}"
        );
    }

    #[test]
    fn taints_print_like_kubectl() {
        assert_eq!(
            taint_text("dedicated", "gpu", "NoSchedule"),
            "dedicated=gpu:NoSchedule"
        );
        assert_eq!(
            taint_text("spot", "", "PreferNoSchedule"),
            "spot:PreferNoSchedule"
        );
    }
}
