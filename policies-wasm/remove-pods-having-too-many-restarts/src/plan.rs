//! The Deschedule pass of RemovePodsHavingTooManyRestarts (descheduler v0.36
//! `removepodshavingtoomanyrestarts/toomanyrestarts.go`).
//!
//! For each node in scope, in scope order:
//! 1. Candidates: its pods, in any phase, that the `namespaces` and `labelSelector` args admit,
//!    whose containers restarted at least `podRestartThreshold` times in total (init containers
//!    included with `includingInitContainers`), that are in one of `states` when it is set, and
//!    that pass the evictor's Filter and PreEvictionFilter.
//! 2. Most restarts first (ties keep snapshot order; descheduler's sort is unstable there).
//! 3. Proposals, one by one: a per-node limit moves on to the next node, a total limit ends the
//!    pass, any other refusal (PDB, namespace limit, …) moves on to the next pod.

use rebalancer_policy_sdk::model::{ArchivedContainer, ArchivedContainerKind, PodPhase, StrId};
use rebalancer_policy_sdk::{Cluster, Context, PodRef};

use crate::args::RemovePodsHavingTooManyRestartsArgs;
use descheduler_common::scope::PodScope;
use descheduler_common::tally::{Details, Next, Tally, propose};

/// The pass, with its summary.
pub fn deschedule(
    ctx: &mut Context<'_>,
    args: &RemovePodsHavingTooManyRestartsArgs,
) -> Result<Tally, String> {
    let mut details = Details::default();
    let tally = run(ctx, args, &mut details);
    details.finish(ctx);
    tally
}

fn run(
    ctx: &mut Context<'_>,
    args: &RemovePodsHavingTooManyRestartsArgs,
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
    let criteria = Criteria::new(cluster, args);
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
                scope.admits(pod) && criteria.matches(pod)
            })
            .collect();
        if pods.is_empty() {
            continue;
        }
        let mut pods = ctx.filter_for_eviction(&pods);
        tally.candidates += pods.len();
        pods.sort_by_cached_key(|&p| std::cmp::Reverse(criteria.restarts(cluster.pod(p))));
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

/// The plugin's own checks, resolved against one snapshot.
#[derive(Debug)]
pub struct Criteria {
    threshold: i64,
    init: bool,
    /// `states` contains `Running`.
    running: bool,
    /// `states` is set.
    has_states: bool,
    /// The waiting reasons of `states` present in the snapshot.
    waiting: Vec<StrId>,
}

impl Criteria {
    pub fn new(cluster: Cluster<'_>, args: &RemovePodsHavingTooManyRestartsArgs) -> Self {
        Criteria {
            threshold: i64::from(args.pod_restart_threshold),
            init: args.including_init_containers,
            running: args.states.iter().any(|s| s == "Running"),
            has_states: !args.states.is_empty(),
            waiting: args
                .states
                .iter()
                .filter_map(|s| cluster.lookup(s))
                .collect(),
        }
    }

    fn containers<'a>(&self, pod: PodRef<'a>) -> impl Iterator<Item = &'a ArchivedContainer> + 'a {
        let init = self.init;
        pod.all_containers().iter().filter(move |c| match c.kind {
            ArchivedContainerKind::App => true,
            ArchivedContainerKind::Init => init,
            ArchivedContainerKind::Ephemeral => false,
        })
    }

    /// Restarts of the app containers, plus the init containers' when flagged.
    pub fn restarts(&self, pod: PodRef<'_>) -> i64 {
        self.containers(pod)
            .map(|c| i64::from(c.restart_count.to_native()))
            .sum()
    }

    pub fn matches(&self, pod: PodRef<'_>) -> bool {
        self.restarts(pod) >= self.threshold && (!self.has_states || self.in_state(pod).is_some())
    }

    /// `states`: the pod is `Running`, or a counted container waits with a listed reason.
    fn in_state<'a>(&self, pod: PodRef<'a>) -> Option<Option<&'a ArchivedContainer>> {
        if self.running && pod.phase() == PodPhase::Running {
            return Some(None);
        }
        self.containers(pod)
            .find(|c| {
                let reason = c.waiting_reason.to_native();
                reason != 0 && self.waiting.contains(&reason)
            })
            .map(Some)
    }

    /// Why the pod is proposed, for the person approving the move.
    pub fn describe(&self, pod: PodRef<'_>) -> String {
        let cluster = pod.cluster();
        let mut text = format!(
            "restarted {} times (threshold {}{})",
            self.restarts(pod),
            self.threshold,
            if self.init {
                ", init containers included"
            } else {
                ""
            }
        );
        if self.has_states {
            match self.in_state(pod) {
                Some(None) => text.push_str("; pod is Running"),
                Some(Some(c)) => text.push_str(&format!(
                    "; {} {} is waiting: {}",
                    if matches!(c.kind, ArchivedContainerKind::Init) {
                        "init container"
                    } else {
                        "container"
                    },
                    cluster.str(c.name.to_native()),
                    cluster.str(c.waiting_reason.to_native())
                )),
                None => {}
            }
        }
        text
    }
}
