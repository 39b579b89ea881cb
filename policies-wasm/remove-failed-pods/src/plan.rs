//! The Deschedule pass of RemoveFailedPods (descheduler v0.36 `removefailedpods/failedpods.go`).
//!
//! For each node in scope, in scope order:
//! 1. Candidates: its pods in phase `Failed` that the `namespaces` and `labelSelector` args
//!    admit, that meet the plugin's criteria ([`Criteria`]: old enough, no excluded owner kind,
//!    a listed reason, a listed exit code) and that pass the evictor's Filter and
//!    PreEvictionFilter, in snapshot order.
//! 2. Proposals, one by one: a per-node limit moves on to the next node, a total limit ends the
//!    pass, any other refusal (PDB, namespace limit, …) moves on to the next pod.
//!
//! Age is measured against the snapshot time. A pod created after it is young (age 0): we do not
//! copy descheduler's amd64 conversion of a negative age into a huge one.

use rebalancer_policy_sdk::model::{ArchivedContainer, ArchivedContainerKind, PodPhase, StrId};
use rebalancer_policy_sdk::{Cluster, Context, PodRef};

use crate::args::RemoveFailedPodsArgs;
use descheduler_common::format::human_duration;
use descheduler_common::scope::PodScope;
use descheduler_common::tally::{Details, Next, Tally, propose};

/// The pass, with its summary.
pub fn deschedule(ctx: &mut Context<'_>, args: &RemoveFailedPodsArgs) -> Result<Tally, String> {
    let mut details = Details::default();
    let tally = run(ctx, args, &mut details);
    details.finish(ctx);
    tally
}

fn run(
    ctx: &mut Context<'_>,
    args: &RemoveFailedPodsArgs,
    details: &mut Details,
) -> Result<Tally, String> {
    let cluster = ctx.cluster;
    let nodes = ctx.nodes();
    let by_node = cluster.pods_by_node();
    let scope = PodScope::new(
        cluster,
        args.namespaces.as_ref(),
        args.label_selector.as_ref(),
    );
    let criteria = Criteria::new(cluster, args, ctx.now_ms());
    let mut tally = Tally::default();

    for &node in &nodes {
        let on_node = by_node
            .get(node as usize)
            .ok_or_else(|| format!("host listed node {node}, which is not in the snapshot"))?;
        let pods: Vec<u32> = on_node
            .iter()
            .copied()
            .filter(|&p| {
                let pod = cluster.pod(p);
                pod.phase() == PodPhase::Failed && scope.admits(pod) && criteria.matches(pod)
            })
            .collect();
        if pods.is_empty() {
            continue;
        }
        let pods = ctx.filter_for_eviction(&pods);
        tally.candidates += pods.len();
        for pod in pods {
            let reason = criteria.describe(cluster.pod(pod));
            match propose(ctx, pod, &reason, &mut tally, details) {
                Next::Pod => {}
                Next::Node => break,
                Next::Stop => return Ok(tally),
            }
        }
    }
    Ok(tally)
}

/// RemoveFailedPods' own checks (`validateCanEvict`), resolved against one snapshot.
#[derive(Debug)]
pub struct Criteria {
    now_ms: i64,
    min_age_secs: u64,
    /// Excluded owner kinds present in the snapshot (others cannot match any pod).
    excluded_kinds: Vec<StrId>,
    /// `reasons` is set (even if none of them is in the snapshot).
    has_reasons: bool,
    reason_ids: Vec<StrId>,
    exit_codes: Vec<i32>,
    init: bool,
}

/// Which listed reason a pod has.
#[derive(Clone, Copy)]
enum ReasonMatch<'a> {
    Pod,
    Waiting(&'a ArchivedContainer),
    Terminated(&'a ArchivedContainer),
}

impl Criteria {
    pub fn new(cluster: Cluster<'_>, args: &RemoveFailedPodsArgs, now_ms: i64) -> Self {
        let resolve = |names: &[String]| -> Vec<StrId> {
            names.iter().filter_map(|n| cluster.lookup(n)).collect()
        };
        Criteria {
            now_ms,
            min_age_secs: args.min_pod_lifetime_seconds,
            excluded_kinds: resolve(&args.exclude_owner_kinds),
            has_reasons: !args.reasons.is_empty(),
            reason_ids: resolve(&args.reasons),
            exit_codes: args.exit_codes.clone(),
            init: args.including_init_containers,
        }
    }

    /// Whether a failed pod meets every criterion.
    pub fn matches(&self, pod: PodRef<'_>) -> bool {
        self.age_secs(pod) >= self.min_age_secs
            && !pod
                .raw
                .owner_refs
                .iter()
                .any(|r| self.excluded_kinds.contains(&r.kind.to_native()))
            && (!self.has_reasons || self.matched_reason(pod).is_some())
            && (self.exit_codes.is_empty() || self.matched_exit_code(pod).is_some())
    }

    /// Why the pod is proposed, for the person approving the move.
    pub fn describe(&self, pod: PodRef<'_>) -> String {
        let cluster = pod.cluster();
        let mut text = format!(
            "pod failed and was created {} ago (minPodLifetimeSeconds {})",
            human_duration(self.age_secs(pod)),
            self.min_age_secs
        );
        let status_reason = pod.raw.reason.to_native();
        if self.has_reasons
            && let Some(m) = self.matched_reason(pod)
        {
            text.push_str(&match m {
                ReasonMatch::Pod => format!("; pod status reason {}", cluster.str(status_reason)),
                ReasonMatch::Waiting(c) => format!(
                    "; {} {} is waiting: {}",
                    kind_name(c),
                    cluster.str(c.name.to_native()),
                    cluster.str(c.waiting_reason.to_native())
                ),
                ReasonMatch::Terminated(c) => format!(
                    "; {} {} terminated: {}",
                    kind_name(c),
                    cluster.str(c.name.to_native()),
                    cluster.str(c.terminated_reason.to_native())
                ),
            });
        } else if status_reason != 0 {
            text.push_str(&format!(
                "; pod status reason {}",
                cluster.str(status_reason)
            ));
        }
        if let Some((c, code)) = self.matched_exit_code(pod) {
            text.push_str(&format!(
                "; {} {} exited with code {code}",
                kind_name(c),
                cluster.str(c.name.to_native())
            ));
        }
        text
    }

    /// Whole seconds since creation, truncated as Go's `uint(d.Seconds())` does; a creation time
    /// after the snapshot time counts as 0.
    fn age_secs(&self, pod: PodRef<'_>) -> u64 {
        let ms = self.now_ms.saturating_sub(pod.creation_ms());
        ms.max(0) as u64 / 1000
    }

    fn containers<'a>(&self, pod: PodRef<'a>) -> impl Iterator<Item = &'a ArchivedContainer> + 'a {
        let init = self.init;
        pod.all_containers().iter().filter(move |c| match c.kind {
            ArchivedContainerKind::App => true,
            ArchivedContainerKind::Init => init,
            ArchivedContainerKind::Ephemeral => false,
        })
    }

    /// `reasons`: a waiting or terminated reason of an app container (init containers when
    /// flagged), or the pod's status reason.
    fn matched_reason<'a>(&self, pod: PodRef<'a>) -> Option<ReasonMatch<'a>> {
        let listed = |id: StrId| id != 0 && self.reason_ids.contains(&id);
        if listed(pod.raw.reason.to_native()) {
            return Some(ReasonMatch::Pod);
        }
        self.containers(pod).find_map(|c| {
            if listed(c.waiting_reason.to_native()) {
                Some(ReasonMatch::Waiting(c))
            } else if listed(c.terminated_reason.to_native()) {
                Some(ReasonMatch::Terminated(c))
            } else {
                None
            }
        })
    }

    /// `exitCodes`: a terminated app container (init containers when flagged) exited with a
    /// listed code.
    fn matched_exit_code<'a>(&self, pod: PodRef<'a>) -> Option<(&'a ArchivedContainer, i32)> {
        if self.exit_codes.is_empty() {
            return None;
        }
        self.containers(pod).find_map(|c| {
            let code = c.exit_code.as_ref()?.to_native();
            self.exit_codes.contains(&code).then_some((c, code))
        })
    }
}

fn kind_name(c: &ArchivedContainer) -> &'static str {
    match c.kind {
        ArchivedContainerKind::App => "container",
        ArchivedContainerKind::Init => "init container",
        ArchivedContainerKind::Ephemeral => "ephemeral container",
    }
}
