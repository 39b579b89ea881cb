//! One proposal at a time, with descheduler's reaction to a refusal, counted in a [`Tally`]:
//! [`propose`] asks the host, and on a refusal uses the SDK's [`Details::refused`] (node limit →
//! next node, total limit → stop, anything else → logged, next pod).
//!
//! Used by the deschedule plugins that propose pod by pod. Must not decide which pods to propose.

use rebalancer_policy_sdk::Context;
pub use rebalancer_policy_sdk::{Details, Next};

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
