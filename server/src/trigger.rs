//! Triggers: what starts a run, and the run itself as the server executes it.
//!
//! Owns: [`execute_run`] — the one way a run happens (by hand over REST, by a schedule's
//! interval, or after a cluster change): record it, evaluate it under the evaluation semaphore,
//! record its outcome and decisions, count it in the metrics, log it in a span carrying run id,
//! cluster and profile. And [`run_scheduler`], the background task that starts the runs
//! schedules ask for. The scheduler keeps no state of its own that matters: what is due is
//! derived from the `schedules` rows (when each last started a run, which cluster revision it
//! evaluated) and the clusters' current revisions, so a restart resumes where it left off.
//! Must not: build HTTP responses (`http::runs` maps [`RunFailure`] to them) or hold SQL.
//!
//! Change triggers are debounced on the trailing edge: a run starts once the cluster has been
//! quiet for `debounceSeconds` after its latest change, so a burst of pushes gives one run.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::Instrument as _;

use tokio::sync::{Notify, Semaphore};

use crate::approval;
use crate::in_flight::InFlight;
use crate::metrics::{Metrics, PolicyEvaluation};
use rebalancer_cluster::Clusters;
use rebalancer_engine::profile::{ProfileError, ProfileSpec};
use rebalancer_engine::run::{self, RunError, RunReport};
use rebalancer_engine::{Engine, PolicyRegistry};
use rebalancer_policy_sdk::state;
use rebalancer_store::{
    NewDecision, NewRun, RunEnd, RunRecord, RunStatus, RunTrigger, ScheduleRecord, StateWrite,
    Store, StoreError, now_ms,
};

/// What running (and scheduling) needs. Cheap to clone.
#[derive(Clone)]
pub struct Deps {
    pub store: Store,
    pub clusters: Clusters,
    pub engine: Engine,
    pub registry: PolicyRegistry,
    /// Bounds CPU-heavy blocking work running at once (compilations, runs).
    pub evaluations: Arc<Semaphore>,
    pub metrics: Arc<Metrics>,
    /// Applies the profile's auto-approve rules after a run.
    pub approval: approval::Deps,
    /// Scheduled runs complete even when the server is stopping.
    pub in_flight: InFlight,
    /// Wakes the scheduler after a schedule changed.
    pub schedules_changed: Arc<Notify>,
    /// Scheduled runs of a managed cluster start only on the server holding its Lease.
    pub managed: crate::managed::Managed,
}

/// A run to start.
#[derive(Clone, Debug)]
pub struct RunRequest {
    pub cluster: String,
    pub profile: String,
    /// Its decisions can never be approved or executed.
    pub dry_run: bool,
    pub trigger: RunTrigger,
    pub schedule_id: Option<i64>,
}

impl RunRequest {
    /// A run asked for over REST.
    pub fn manual(cluster: &str, profile: &str, dry_run: bool) -> RunRequest {
        RunRequest {
            cluster: cluster.to_string(),
            profile: profile.to_string(),
            dry_run,
            trigger: RunTrigger::Manual,
            schedule_id: None,
        }
    }
}

/// A run that finished successfully.
#[derive(Debug)]
pub struct FinishedRun {
    /// The stored run, as it now is (`succeeded`, finished).
    pub record: RunRecord,
    pub report: RunReport,
}

/// Why a run did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum RunFailure {
    /// No such cluster or profile (`StoreError::NotFound`), or the database failed.
    #[error(transparent)]
    Store(StoreError),
    #[error(
        "the stored state of cluster \"{0}\" could not be loaded at start-up (see the server \
         log); push a new snapshot"
    )]
    ClusterNotLoaded(String),
    /// A managed Kubernetes cluster with no revision yet (first sync under way, or its API
    /// server unreachable since start-up): nothing to run on, and nothing to push either.
    #[error(
        "cluster \"{cluster}\" is a Kubernetes cluster this server is still syncing ({state}); \
         it has no state until its first list completes: retry shortly"
    )]
    ClusterSyncing { cluster: String, state: String },
    /// The profile cannot run on this cluster; the run is recorded as failed.
    #[error("{message}")]
    InvalidProfile {
        run: i64,
        message: String,
        errors: Vec<ProfileError>,
    },
    /// The evaluation task panicked; the run is recorded as failed.
    #[error("run {run} crashed: {cause}")]
    Crashed { run: i64, cause: String },
    /// The cluster was deleted (and perhaps created again) while the run was in progress; the
    /// run is recorded as failed, without its proposals and policy state.
    #[error(
        "cluster \"{cluster}\" was deleted while run {run} was in progress; the run's proposals \
         and policy state were not kept"
    )]
    ClusterDeleted { run: i64, cluster: String },
}

impl From<StoreError> for RunFailure {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::ClusterGone { run, cluster } => RunFailure::ClusterDeleted { run, cluster },
            other => RunFailure::Store(other),
        }
    }
}

impl RunFailure {
    /// The run recorded, if one was.
    pub fn run_id(&self) -> Option<i64> {
        match self {
            RunFailure::InvalidProfile { run, .. }
            | RunFailure::Crashed { run, .. }
            | RunFailure::ClusterDeleted { run, .. } => Some(*run),
            _ => None,
        }
    }
}

/// Evaluate a profile over a cluster's current snapshot and record everything. Call it through
/// [`InFlight::detached`] so a caller that goes away does not leave the run `running`.
pub async fn execute_run(deps: Deps, request: RunRequest) -> Result<FinishedRun, RunFailure> {
    // Before the store: a managed cluster that never synced may have no record yet.
    if deps.clusters.get(&request.cluster).is_none()
        && let Some(state) = deps.managed.syncing(&request.cluster)
    {
        tracing::info!(
            cluster = %request.cluster, profile = %request.profile, state = %state,
            "run refused: the cluster has no revision yet"
        );
        return Err(RunFailure::ClusterSyncing {
            cluster: request.cluster.clone(),
            state,
        });
    }
    let record = deps.store.get_cluster(&request.cluster).await?;
    let snapshot = deps
        .clusters
        .get(&record.name)
        .ok_or_else(|| RunFailure::ClusterNotLoaded(record.name.clone()))?;
    let profile = deps.store.get_profile(&request.profile).await?;
    let spec: ProfileSpec = serde_json::from_value(profile.spec)
        .map_err(|e| StoreError::corrupt(format!("spec of profile {}", profile.name), e))?;
    let run = deps
        .store
        .insert_run(&NewRun {
            cluster: &record.name,
            cluster_revision: snapshot.revision as i64,
            profile: &profile.name,
            dry_run: request.dry_run,
            trigger: request.trigger,
            schedule_id: request.schedule_id,
            cluster_incarnation: Some(record.incarnation),
        })
        .await?;
    let span = tracing::info_span!(
        "run",
        run_id = run.id,
        cluster = %run.cluster,
        profile = %run.profile,
        trigger = run.trigger.as_str(),
        dry_run = run.dry_run,
    );
    let result = evaluate_and_record(&deps, run, spec, snapshot)
        .instrument(span)
        .await;
    let (profile, trigger) = (&profile.name, request.trigger.as_str());
    match &result {
        Ok(_) => deps.metrics.run_finished(profile, "succeeded", trigger),
        Err(failure) if failure.run_id().is_some() => {
            deps.metrics.run_finished(profile, "failed", trigger)
        }
        Err(_) => {}
    }
    result
}

async fn evaluate_and_record(
    deps: &Deps,
    run: RunRecord,
    spec: ProfileSpec,
    snapshot: Arc<rebalancer_cluster::ClusterSnapshot>,
) -> Result<FinishedRun, RunFailure> {
    tracing::info!(revision = run.cluster_revision, "run started");
    let states = match load_policy_states(deps, &run).await {
        Ok(states) => states,
        Err(e) => {
            // The run is recorded as failed rather than left running.
            let message = format!("loading the profile's policy state failed: {e}");
            deps.store
                .finish_run(run.id, RunEnd::Failed { error: &message })
                .await?;
            tracing::warn!("run failed: {message}");
            return Err(e);
        }
    };
    let permit = deps
        .evaluations
        .clone()
        .acquire_owned()
        .await
        .expect("the evaluation semaphore is never closed");
    let (engine, registry) = (deps.engine.clone(), deps.registry.clone());
    let span = tracing::Span::current();
    let metrics = deps.metrics.clone();
    let outcome = tokio::task::spawn_blocking(move || {
        let _permit = permit;
        // One descheduling cycle, as descheduler's loop duration measures it: every plugin of
        // the profile over the snapshot, whatever the outcome (not the wait for a slot before
        // it, nor recording its proposals after).
        let cycle = Instant::now();
        let result = span.in_scope(|| run::execute(&engine, &registry, &spec, &snapshot, states));
        metrics.cycle_finished(cycle.elapsed().as_secs_f64());
        result
    })
    .await;

    match outcome {
        Ok(Ok(mut report)) => {
            let recording = Instant::now();
            // A dry run's proposals can never be executed: they start no cooldown.
            if run.dry_run {
                report
                    .state_updates
                    .retain(|u| (u.plugin_set.as_str(), u.plugin.as_str()) != run::COOLDOWN_SCOPE);
            }
            let decisions: Vec<NewDecision<'_>> = report
                .proposals
                .iter()
                .map(|p| NewDecision {
                    plugin_set: &p.plugin_set,
                    plugin: &p.plugin,
                    pod_uid: &p.pod_uid,
                    pod_namespace: &p.namespace,
                    pod_name: &p.name,
                    node: &p.node,
                    reason: &p.reason,
                })
                .collect();
            let encoded: Vec<Vec<u8>> = report
                .state_updates
                .iter()
                .map(|u| state::encode(u.scope.entries()))
                .collect();
            let writes: Vec<StateWrite<'_>> = report
                .state_updates
                .iter()
                .zip(&encoded)
                .map(|(u, data)| StateWrite {
                    plugin_set: &u.plugin_set,
                    policy: &u.plugin,
                    base_version: u.base_version,
                    data,
                })
                .collect();
            // The report says which state commits lost to a concurrent run; it is written in
            // the same transaction as the state.
            let conflicted = std::sync::Mutex::new(Vec::new());
            let render = |conflicts: &[usize]| {
                *conflicted.lock().unwrap_or_else(|p| p.into_inner()) = conflicts.to_vec();
                let json = if conflicts.is_empty() {
                    serde_json::to_string(&report)
                } else {
                    let mut marked = report.clone();
                    mark_state_conflicts(&mut marked, conflicts, &run);
                    serde_json::to_string(&marked)
                };
                json.unwrap_or_else(|e| {
                    tracing::error!(error = %e, "serialising a run report failed");
                    "{}".into()
                })
            };
            let finished = deps
                .store
                .finish_run(
                    run.id,
                    RunEnd::Succeeded {
                        report: &render,
                        decisions: &decisions,
                        state: &writes,
                    },
                )
                .await
                .inspect_err(|e| {
                    if matches!(e, StoreError::ClusterGone { .. }) {
                        tracing::warn!("run failed: {e}");
                    }
                })?;
            drop((decisions, writes));
            let conflicts = conflicted.into_inner().unwrap_or_else(|p| p.into_inner());
            mark_state_conflicts(&mut report, &conflicts, &run);
            for &i in &conflicts {
                let update = &report.state_updates[i];
                tracing::warn!(plugin = %update.plugin, plugin_set = %update.plugin_set, "policy state conflict: another run committed first; this run's change was dropped");
            }
            for policy in &report.policies {
                deps.metrics.policy_evaluated(PolicyEvaluation {
                    policy: &policy.plugin,
                    plugin_set: &policy.plugin_set,
                    profile: &run.profile,
                    outcome: policy.error.as_ref().map_or("ok", |e| e.kind.as_str()),
                    seconds: policy.duration_ms / 1000.0,
                    proposals: u64::from(policy.proposals),
                });
            }
            tracing::info!(
                proposals = report.proposals.len(),
                duration_ms = report.duration_ms,
                record_ms = recording.elapsed().as_secs_f64() * 1000.0,
                "run succeeded"
            );
            // The stored row holds exactly this; no need to read it back.
            let record = RunRecord {
                status: RunStatus::Succeeded,
                finished_at: Some(finished.finished_at),
                report: None,
                ..run
            };
            // Its proposals superseded earlier open ones of the same pods: say so in the audit
            // log (each decision's history already does).
            approval::after_run(&deps.store, &record, &finished.superseded).await;
            // Auto-approve rules of the profile (never for dry runs); on failure the proposals
            // simply stay proposed.
            if let Err(e) = approval::auto_approve_run(&deps.approval, &record).await {
                tracing::error!(run_id = record.id, error = %e, "applying auto-approve rules failed");
            }
            Ok(FinishedRun { record, report })
        }
        Ok(Err(RunError::InvalidProfile(errors))) => {
            let summary = ProfileError::summary(&errors);
            let message = format!(
                "profile \"{}\" cannot run on cluster \"{}\": {summary}",
                run.profile, run.cluster
            );
            deps.store
                .finish_run(run.id, RunEnd::Failed { error: &message })
                .await?;
            tracing::warn!("run failed: {message}");
            Err(RunFailure::InvalidProfile {
                run: run.id,
                message,
                errors,
            })
        }
        Err(join) => {
            let message = "internal error: the run crashed; the cause is in the server log";
            if let Err(e) = deps
                .store
                .finish_run(run.id, RunEnd::Failed { error: message })
                .await
            {
                tracing::error!(error = %e, "could not record a crashed run");
            }
            Err(RunFailure::Crashed {
                run: run.id,
                cause: join.to_string(),
            })
        }
    }
}

// ---- The scheduler ---------------------------------------------------------------------------

/// How long the scheduler waits before retrying after the database failed.
const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(5);
/// Longest sleep with nothing due (wake-ups come earlier on any change anyway).
const IDLE_SLEEP: Duration = Duration::from_secs(3600);

/// When each loaded cluster's current revision was first seen by the scheduler.
#[derive(Debug, Default)]
struct ChangeTracker {
    clusters: HashMap<String, (u64, i64)>,
}

impl ChangeTracker {
    fn observe(&mut self, revisions: Vec<(String, u64)>, now: i64) {
        for (name, revision) in revisions {
            match self.clusters.get(&name) {
                Some((seen, _)) if *seen == revision => {}
                _ => {
                    self.clusters.insert(name, (revision, now));
                }
            }
        }
    }

    fn get(&self, cluster: &str) -> Option<(u64, i64)> {
        self.clusters.get(cluster).copied()
    }
}

/// When a schedule is due next, and for which trigger.
fn due(schedule: &ScheduleRecord, changes: &ChangeTracker, now: i64) -> Option<(i64, RunTrigger)> {
    if !schedule.spec.enabled {
        return None;
    }
    let periodic = schedule.spec.interval_seconds.map(|interval| {
        let at = schedule.last_triggered_at.map_or(now, |last| {
            last.saturating_add(interval.saturating_mul(1000))
        });
        (at, RunTrigger::Schedule)
    });
    let on_change = changes
        .get(&schedule.spec.cluster)
        .filter(|_| schedule.spec.on_change)
        .filter(|(revision, _)| schedule.last_revision != Some(*revision as i64))
        .map(|(_, changed_at)| {
            (
                changed_at.saturating_add(schedule.spec.debounce_seconds.saturating_mul(1000)),
                RunTrigger::Change,
            )
        });
    match (periodic, on_change) {
        (Some(p), Some(c)) => Some(if c.0 <= p.0 { c } else { p }),
        (p, c) => p.or(c),
    }
}

/// How soon a due schedule of a cluster whose Lease another server holds is looked at again.
const LEASE_RECHECK_MS: i64 = 2_000;

/// The background task that starts scheduled and change-triggered runs; runs until dropped.
/// Wakes at the next due time, on any cluster change and on any schedule change
/// ([`Deps::schedules_changed`]). Runs of all schedules are started one after another.
pub async fn run_scheduler(deps: Deps) {
    let mut changes = deps.clusters.subscribe();
    let mut tracker = ChangeTracker::default();
    tracing::info!("scheduler started");
    loop {
        changes.borrow_and_update();
        tracker.observe(deps.clusters.revisions(), now_ms());
        let wait = match tick(&deps, &tracker).await {
            Ok(Some(next)) => Duration::from_millis(next.saturating_sub(now_ms()).max(0) as u64),
            Ok(None) => IDLE_SLEEP,
            Err(e) => {
                tracing::error!(error = %e, "the scheduler could not read its schedules; retrying");
                RETRY_AFTER_FAILURE
            }
        };
        if wait.is_zero() {
            continue;
        }
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            changed = changes.changed() => {
                if changed.is_err() {
                    // The cluster registry is gone: the server is shutting down.
                    return;
                }
            }
            () = deps.schedules_changed.notified() => {}
        }
    }
}

/// Start every run that is due now. Returns the next time something is due (now again when a
/// run was started, as time has passed and the cluster may have changed meanwhile).
async fn tick(deps: &Deps, tracker: &ChangeTracker) -> Result<Option<i64>, StoreError> {
    let schedules = deps.store.list_schedules().await?;
    let now = now_ms();
    let mut next: Option<i64> = None;
    for schedule in &schedules {
        let Some((at, trigger)) = due(schedule, tracker, now) else {
            continue;
        };
        if at > now {
            next = Some(next.map_or(at, |n| n.min(at)));
            continue;
        }
        if !deps.managed.may_act(&schedule.spec.cluster) {
            // Another server holds the cluster's Lease; look again soon (it may expire).
            let again = now + LEASE_RECHECK_MS;
            next = Some(next.map_or(again, |n| n.min(again)));
            continue;
        }
        start(deps, schedule, trigger, tracker).await?;
        next = Some(now_ms());
    }
    Ok(next)
}

async fn start(
    deps: &Deps,
    schedule: &ScheduleRecord,
    trigger: RunTrigger,
    tracker: &ChangeTracker,
) -> Result<(), StoreError> {
    let spec = &schedule.spec;
    let revision = tracker.get(&spec.cluster).map(|(r, _)| r as i64);
    // Recorded before the run: a crash during it does not start it again after the restart.
    deps.store
        .schedule_started(schedule.id, now_ms(), revision)
        .await?;
    tracing::info!(
        schedule = schedule.id,
        cluster = %spec.cluster,
        profile = %spec.profile,
        trigger = trigger.as_str(),
        "scheduled run starting"
    );
    let request = RunRequest {
        cluster: spec.cluster.clone(),
        profile: spec.profile.clone(),
        dry_run: spec.dry_run,
        trigger,
        schedule_id: Some(schedule.id),
    };
    let (run_id, error) = match deps
        .in_flight
        .detached(execute_run(deps.clone(), request))
        .await
    {
        Ok(Ok(run)) => (Some(run.record.id), None),
        Ok(Err(failure)) => {
            tracing::warn!(schedule = schedule.id, error = %failure, "scheduled run failed");
            (failure.run_id(), Some(failure.to_string()))
        }
        Err(join) => {
            tracing::error!(schedule = schedule.id, error = %join, "scheduled run task failed");
            (
                None,
                Some("internal error: the run task failed".to_string()),
            )
        }
    };
    deps.store
        .schedule_finished(schedule.id, run_id, error.as_deref())
        .await
}

/// The policy state scopes of the run's profile on its cluster, as stored. A scope that cannot
/// be decoded (a database edited by hand) is a store error: the run fails rather than starting
/// its policies from an empty state.
async fn load_policy_states(deps: &Deps, run: &RunRecord) -> Result<run::PolicyStates, RunFailure> {
    let max_bytes = deps.engine.limits().max_state_bytes;
    let mut states = run::PolicyStates::new(max_bytes);
    for stored in deps
        .store
        .load_policy_state(&run.cluster, &run.profile)
        .await?
    {
        let entries = state::decode(&stored.data).map_err(|e| {
            StoreError::corrupt(
                format!(
                    "policy state of {} in plugin set {} (profile {}, cluster {})",
                    stored.policy, stored.plugin_set, run.profile, run.cluster
                ),
                e,
            )
        })?;
        states.scopes.insert(
            (stored.plugin_set, stored.policy),
            (state::StateScope::new(entries, max_bytes), stored.version),
        );
    }
    Ok(states)
}

/// Note in `report` that the state commits at `conflicts` (indexes into its `state_updates`)
/// lost to another run.
fn mark_state_conflicts(report: &mut RunReport, conflicts: &[usize], run: &RunRecord) {
    for &i in conflicts {
        let (plugin, plugin_set) = {
            let update = &report.state_updates[i];
            (update.plugin.clone(), update.plugin_set.clone())
        };
        if let Some(outcome) = report
            .policies
            .iter_mut()
            .find(|p| p.plugin == plugin && p.plugin_set == plugin_set)
        {
            outcome.state_conflict = Some(format!(
                "another run of profile {:?} on cluster {:?} committed this policy's state \
                 first; this run's change to it was dropped",
                run.profile, run.cluster
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rebalancer_store::ScheduleSpec;

    fn schedule(interval: Option<i64>, on_change: bool) -> ScheduleRecord {
        ScheduleRecord {
            id: 1,
            spec: ScheduleSpec {
                cluster: "c".into(),
                profile: "p".into(),
                interval_seconds: interval,
                on_change,
                debounce_seconds: 10,
                dry_run: false,
                enabled: true,
            },
            created_at: 0,
            updated_at: 0,
            last_triggered_at: None,
            last_revision: Some(5),
            last_run_id: None,
            last_error: None,
        }
    }

    #[test]
    fn periodic_schedules_are_due_an_interval_after_the_last_run() {
        let tracker = ChangeTracker::default();
        let mut s = schedule(Some(60), false);
        assert_eq!(
            due(&s, &tracker, 1_000),
            Some((1_000, RunTrigger::Schedule))
        );
        s.last_triggered_at = Some(1_000);
        assert_eq!(
            due(&s, &tracker, 2_000),
            Some((61_000, RunTrigger::Schedule))
        );
        s.spec.enabled = false;
        assert_eq!(due(&s, &tracker, 2_000), None);
    }

    #[test]
    fn change_triggers_wait_for_quiet_and_skip_evaluated_revisions() {
        let mut tracker = ChangeTracker::default();
        let s = schedule(None, true);
        assert_eq!(due(&s, &tracker, 0), None, "cluster not loaded");
        tracker.observe(vec![("c".into(), 5)], 1_000);
        assert_eq!(due(&s, &tracker, 2_000), None, "revision already evaluated");
        tracker.observe(vec![("c".into(), 6)], 3_000);
        assert_eq!(due(&s, &tracker, 3_500), Some((13_000, RunTrigger::Change)));
        // Another change moves the due time (debounce), the same revision does not.
        tracker.observe(vec![("c".into(), 7)], 8_000);
        tracker.observe(vec![("c".into(), 7)], 9_000);
        assert_eq!(due(&s, &tracker, 9_000), Some((18_000, RunTrigger::Change)));
        // The earlier of the periodic and the change trigger wins.
        let mut both = schedule(Some(5), true);
        both.last_triggered_at = Some(0);
        assert_eq!(
            due(&both, &tracker, 9_000),
            Some((5_000, RunTrigger::Schedule))
        );
    }
}
