//! The Deschedule pass of PodLifeTime (descheduler v0.36 `podlifetime/pod_lifetime.go`).
//!
//! 1. Candidates: the pods, in any phase, bound to the nodes in scope (node by node, in scope
//!    order) that the `namespaces` and `labelSelector` args admit, that meet every configured
//!    criterion ([`Criteria`]) and that pass the evictor's Filter and PreEvictionFilter.
//! 2. Order: oldest first by `creationTimestamp`, over all nodes (ties keep the order of step 1;
//!    descheduler's sort is unstable there).
//! 3. Proposals, one by one. A per-node limit skips the pod only (the list is not per node, so
//!    descheduler goes on with the next pod), a total limit ends the pass, any other refusal
//!    (PDB, namespace limit, …) moves on to the next pod.
//!
//! Every age is measured against the snapshot time; a creation or transition time after it is a
//! negative age, which no age criterion accepts.

use rebalancer_policy_sdk::model::{ArchivedContainer, ArchivedContainerKind, StrId};
use rebalancer_policy_sdk::{Cluster, Context, PodRef};

use crate::args::PodLifeTimeArgs;
use descheduler_common::format::{human_duration, phase_name};
use descheduler_common::scope::PodScope;
use descheduler_common::tally::{Details, Next, Tally, propose};

/// The pass, with its summary.
pub fn deschedule(ctx: &mut Context<'_>, args: &PodLifeTimeArgs) -> Result<Tally, String> {
    let mut details = Details::default();
    let tally = run(ctx, args, &mut details);
    details.finish(ctx);
    tally
}

fn run(
    ctx: &mut Context<'_>,
    args: &PodLifeTimeArgs,
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

    let mut pods = Vec::new();
    for &node in &nodes {
        let on_node = by_node
            .get(node as usize)
            .ok_or_else(|| format!("host listed node {node}, which is not in the snapshot"))?;
        pods.extend(on_node.iter().copied().filter(|&p| {
            let pod = cluster.pod(p);
            scope.admits(pod) && criteria.matches(pod)
        }));
    }
    let mut pods = ctx.filter_for_eviction(&pods);
    pods.sort_by_cached_key(|&p| cluster.pod(p).creation_ms());

    let mut tally = Tally {
        candidates: pods.len(),
        ..Tally::default()
    };
    for pod in pods {
        let reason = criteria.describe(cluster.pod(pod));
        match propose(ctx, pod, &reason, &mut tally, details) {
            Next::Pod | Next::Node => {}
            Next::Stop => break,
        }
    }
    Ok(tally)
}

/// One string field of a condition filter, resolved against the snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    /// Not set: not checked.
    Any,
    Is(StrId),
    /// Set to a string no object uses: matches no condition.
    Never,
}

impl Field {
    fn new(cluster: Cluster<'_>, value: &str) -> Self {
        if value.is_empty() {
            Field::Any
        } else {
            cluster.lookup(value).map_or(Field::Never, Field::Is)
        }
    }

    fn matches(self, id: StrId) -> bool {
        match self {
            Field::Any => true,
            Field::Is(want) => id == want,
            Field::Never => false,
        }
    }
}

#[derive(Debug, Clone)]
struct ConditionFilter {
    type_: Field,
    status: Field,
    reason: Field,
    min_secs: Option<u64>,
}

#[derive(Debug, Clone)]
enum OwnerKinds {
    Any,
    /// Some ownerRef has one of these kinds (unresolvable kinds dropped: no pod has them).
    Include(Vec<StrId>),
    /// No ownerRef has one of these kinds.
    Exclude(Vec<StrId>),
}

/// PodLifeTime's own criteria, resolved against one snapshot. Categories are ANDed; the entries
/// of a category are ORed.
#[derive(Debug)]
pub struct Criteria {
    now_ms: i64,
    max_age_secs: Option<u64>,
    /// The `states` as written (compared with the phase name).
    states: Vec<String>,
    /// The `states` present in the snapshot (compared with reasons by id).
    state_ids: Vec<StrId>,
    conditions: Vec<ConditionFilter>,
    exit_codes: Vec<i32>,
    owner_kinds: OwnerKinds,
    init: bool,
    ephemeral: bool,
}

impl Criteria {
    pub fn new(cluster: Cluster<'_>, args: &PodLifeTimeArgs, now_ms: i64) -> Self {
        let resolve = |names: &[String]| -> Vec<StrId> {
            names.iter().filter_map(|n| cluster.lookup(n)).collect()
        };
        let owner_kinds = match &args.owner_kinds {
            Some(k) if !k.include.is_empty() => OwnerKinds::Include(resolve(&k.include)),
            Some(k) if !k.exclude.is_empty() => OwnerKinds::Exclude(resolve(&k.exclude)),
            _ => OwnerKinds::Any,
        };
        Criteria {
            now_ms,
            max_age_secs: args.max_pod_life_time_seconds,
            states: args.states.clone(),
            state_ids: resolve(&args.states),
            conditions: args
                .conditions
                .iter()
                .map(|c| ConditionFilter {
                    type_: Field::new(cluster, &c.type_),
                    status: Field::new(cluster, &c.status),
                    reason: Field::new(cluster, &c.reason),
                    min_secs: c.min_time_since_last_transition_seconds,
                })
                .collect(),
            exit_codes: args.exit_codes.clone(),
            owner_kinds,
            init: args.including_init_containers,
            ephemeral: args.including_ephemeral_containers,
        }
    }

    /// Whether the pod meets every configured criterion.
    pub fn matches(&self, pod: PodRef<'_>) -> bool {
        let old_enough = self.max_age_secs.is_none_or(|max| {
            self.age_secs(pod.creation_ms())
                .is_some_and(|age| age > max)
        });
        old_enough
            && (self.states.is_empty() || self.matched_state(pod).is_some())
            && self.owner_kinds_allow(pod)
            && (self.conditions.is_empty() || self.matched_condition(pod).is_some())
            && (self.exit_codes.is_empty() || self.matched_exit_code(pod).is_some())
    }

    /// Why the pod is proposed: the criteria it meets, for the person approving the move.
    pub fn describe(&self, pod: PodRef<'_>) -> String {
        let cluster = pod.cluster();
        let mut parts = Vec::new();
        if let Some(max) = self.max_age_secs {
            let age = self.age_secs(pod.creation_ms()).unwrap_or(0);
            parts.push(format!(
                "pod is {} old, more than maxPodLifeTimeSeconds {max} ({})",
                human_duration(age),
                human_duration(max)
            ));
        }
        if !self.states.is_empty()
            && let Some(state) = self.matched_state(pod)
        {
            parts.push(match state {
                StateMatch::Phase => format!("pod phase is {}", phase_name(pod.phase())),
                StateMatch::PodReason => {
                    format!(
                        "pod status reason is {}",
                        cluster.str(pod.raw.reason.to_native())
                    )
                }
                StateMatch::Waiting(c) => format!(
                    "{} {} is waiting: {}",
                    container_kind_name(c),
                    cluster.str(c.name.to_native()),
                    cluster.str(c.waiting_reason.to_native())
                ),
                StateMatch::Terminated(c) => format!(
                    "{} {} terminated: {}",
                    container_kind_name(c),
                    cluster.str(c.name.to_native()),
                    cluster.str(c.terminated_reason.to_native())
                ),
            });
        }
        if !self.conditions.is_empty()
            && let Some(m) = self.matched_condition(pod)
        {
            let c = &pod.conditions()[m.index];
            let mut text = format!(
                "condition {}={}",
                cluster.str(c.type_.to_native()),
                cluster.str(c.status.to_native())
            );
            let reason = c.reason.to_native();
            if reason != 0 {
                text.push_str(&format!(" (reason {})", cluster.str(reason)));
            }
            if let Some((idle, min)) = m.idle {
                text.push_str(&format!(
                    " for {}, at least {}",
                    human_duration(idle),
                    human_duration(min)
                ));
            }
            parts.push(text);
        }
        if !self.exit_codes.is_empty()
            && let Some((c, code)) = self.matched_exit_code(pod)
        {
            parts.push(format!(
                "{} {} exited with code {code}",
                container_kind_name(c),
                cluster.str(c.name.to_native())
            ));
        }
        if let OwnerKinds::Include(kinds) = &self.owner_kinds
            && let Some(kind) = pod
                .raw
                .owner_refs
                .iter()
                .map(|r| r.kind.to_native())
                .find(|k| kinds.contains(k))
        {
            parts.push(format!("owned by a {}", cluster.str(kind)));
        }
        parts.join("; ")
    }

    /// Whole seconds since `since_ms`, truncated as Go's `uint(d.Seconds())` does; `None` when
    /// `since_ms` is after the snapshot time.
    fn age_secs(&self, since_ms: i64) -> Option<u64> {
        let ms = self.now_ms.checked_sub(since_ms)?;
        (ms >= 0).then_some(ms as u64 / 1000)
    }

    fn containers_for_states<'a>(
        &self,
        pod: PodRef<'a>,
    ) -> impl Iterator<Item = &'a ArchivedContainer> + 'a {
        let (init, ephemeral) = (self.init, self.ephemeral);
        pod.all_containers().iter().filter(move |c| match c.kind {
            ArchivedContainerKind::App => true,
            ArchivedContainerKind::Init => init,
            ArchivedContainerKind::Ephemeral => ephemeral,
        })
    }

    /// `states`: the phase, the pod's status reason, or a waiting or terminated reason of an
    /// app container (init and ephemeral containers when their flags are set).
    fn matched_state<'a>(&self, pod: PodRef<'a>) -> Option<StateMatch<'a>> {
        if self.states.iter().any(|s| s == phase_name(pod.phase())) {
            return Some(StateMatch::Phase);
        }
        let has = |id: StrId| id != 0 && self.state_ids.contains(&id);
        if has(pod.raw.reason.to_native()) {
            return Some(StateMatch::PodReason);
        }
        self.containers_for_states(pod).find_map(|c| {
            if has(c.waiting_reason.to_native()) {
                Some(StateMatch::Waiting(c))
            } else if has(c.terminated_reason.to_native()) {
                Some(StateMatch::Terminated(c))
            } else {
                None
            }
        })
    }

    fn owner_kinds_allow(&self, pod: PodRef<'_>) -> bool {
        let kinds = || pod.raw.owner_refs.iter().map(|r| r.kind.to_native());
        match &self.owner_kinds {
            OwnerKinds::Any => true,
            OwnerKinds::Include(ids) => kinds().any(|k| ids.contains(&k)),
            OwnerKinds::Exclude(ids) => !kinds().any(|k| ids.contains(&k)),
        }
    }

    /// `conditions`: the first pod condition some filter matches.
    fn matched_condition(&self, pod: PodRef<'_>) -> Option<ConditionMatch> {
        for f in &self.conditions {
            for (i, c) in pod.conditions().iter().enumerate() {
                if !(f.type_.matches(c.type_.to_native())
                    && f.status.matches(c.status.to_native())
                    && f.reason.matches(c.reason.to_native()))
                {
                    continue;
                }
                let Some(min) = f.min_secs else {
                    return Some(ConditionMatch {
                        index: i,
                        idle: None,
                    });
                };
                let Some(since) = c.last_transition_ms.as_ref().map(|t| t.to_native()) else {
                    continue;
                };
                match self.age_secs(since) {
                    Some(idle) if idle >= min => {
                        return Some(ConditionMatch {
                            index: i,
                            idle: Some((idle, min)),
                        });
                    }
                    _ => continue,
                }
            }
        }
        None
    }

    /// `exitCodes`: a terminated app container (init containers when flagged; never ephemeral
    /// ones) exited with one of the codes.
    fn matched_exit_code<'a>(&self, pod: PodRef<'a>) -> Option<(&'a ArchivedContainer, i32)> {
        let init = self.init;
        pod.all_containers()
            .iter()
            .filter(move |c| match c.kind {
                ArchivedContainerKind::App => true,
                ArchivedContainerKind::Init => init,
                ArchivedContainerKind::Ephemeral => false,
            })
            .find_map(|c| {
                let code = c.exit_code.as_ref()?.to_native();
                self.exit_codes.contains(&code).then_some((c, code))
            })
    }
}

/// A pod condition a `conditions` filter matches.
#[derive(Debug, Clone, Copy)]
struct ConditionMatch {
    /// Index in `status.conditions`.
    index: usize,
    /// (seconds since its last transition, the filter's minimum), when the filter has a minimum.
    idle: Option<(u64, u64)>,
}

/// Which `states` entry a pod meets.
#[derive(Clone, Copy)]
enum StateMatch<'a> {
    Phase,
    PodReason,
    Waiting(&'a ArchivedContainer),
    Terminated(&'a ArchivedContainer),
}

fn container_kind_name(c: &ArchivedContainer) -> &'static str {
    match c.kind {
        ArchivedContainerKind::App => "container",
        ArchivedContainerKind::Init => "init container",
        ArchivedContainerKind::Ephemeral => "ephemeral container",
    }
}
