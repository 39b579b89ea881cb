//! Proposing an eviction on an [`Evictor`]: the already-proposed and evictability checks, the
//! run's limits (total, then per node, then per namespace) and the Eviction API's
//! PodDisruptionBudget admission, recording accepted and refused proposals in [`RunState`].
//!
//! Owns every change to [`RunState`] a proposal makes; must not re-implement Filter rules (it
//! calls [`super::filter`]).

use super::filter::ALREADY_PROPOSED;
use super::host::Evictor;
use super::index::PodPdbs;
use super::state::{AcceptedProposal, MAX_RECORDED_REFUSALS, RefusedProposal};

use crate::caps::{MAX_REASON_BYTES, truncate};

use crate::model::{ArchivedPodPhase, ArchivedUnhealthyPodEvictionPolicy};
use crate::policy::Refusal;
use crate::view::PodRef;

impl Evictor<'_> {
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
        // Counted always, recorded up to a cap: a policy may be refused a million times.
        if self.state.refusals.len() < MAX_RECORDED_REFUSALS {
            self.state.refusals.push(RefusedProposal {
                pod,
                reason: truncate(reason, MAX_REASON_BYTES).into_owned(),
                plugin: self.plugin.to_owned(),
                plugin_set: self.plugin_set.to_owned(),
                refusal: refusal.clone(),
            });
        }
        Err(refusal)
    }

    /// Propose evicting a pod. Refused when the pod is unknown, already proposed, fails Filter or
    /// PreEvictionFilter, when a limit is reached (checked as descheduler does: total, then node,
    /// then namespace), or when the Eviction API would refuse it because of a PDB. Refusals do
    /// not count towards limits; an accepted proposal of a pod guarded by a PDB uses one of its
    /// disruptions. The reason is kept up to [`MAX_REASON_BYTES`] (a longer one is cut, with a
    /// marker saying so: see [`truncate`]).
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
            reason: truncate(reason, MAX_REASON_BYTES).into_owned(),
            plugin: self.plugin.to_owned(),
            plugin_set: self.plugin_set.to_owned(),
        });
        Ok(())
    }
}
