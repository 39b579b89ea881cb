//! DefaultEvictor's `Filter` and `PreEvictionFilter` on an [`Evictor`]: the protection rules,
//! label/namespace selectors, priority threshold, `minReplicas`, `minPodAge`, no-eviction
//! policy and nodeFit, reporting failures in descheduler's order and words.
//!
//! Owns the yes/no (and why) for a pod; must not change run state (that is [`super::propose`]).

use super::host::Evictor;
use super::index::PodTraits;
use super::node_fit::{NodeFitError, node_fit_error};
use super::{PREFER_NO_EVICTION_ANNOTATION, SYSTEM_CRITICAL_PRIORITY};

use crate::model::{ArchivedVolumeKind, StrId};
use crate::view::PodRef;

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

pub(super) const ALREADY_PROPOSED: &str =
    "pod is terminating: it was proposed for eviction earlier in this run";

impl Evictor<'_> {
    pub(super) fn valid_pod(&self, pod: u32) -> bool {
        (pod as usize) < self.cluster.pod_count()
    }

    pub(super) fn valid_node(&self, node: u32) -> bool {
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
        // Also before the evict annotation: the cooldown exists to stop evict-and-return loops.
        if let Some((window, text)) = &config.cooldown {
            let owner = pod.raw.owner.to_native();
            if let Some(&at) = self.state.recent_owners.get(&owner) {
                let age = self.cluster.time_ms() - at;
                if age < *window {
                    if let Some(v) = out.as_deref_mut() {
                        v.push(format!(
                            "a pod of its owner was proposed {} ago, within the evictor's cooldown \
                             of {text}",
                            crate::k8s::duration::format_go_duration(i128::from(age) * 1_000_000)
                        ));
                    }
                    return false;
                }
            }
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
}
