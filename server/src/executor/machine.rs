//! The pod-migration state machine (Koordinator's PodMigrationJob, `koordinator.md` §1), one
//! persisted step at a time.
//!
//! Steps (`pod_migrations.step`) and what leads out of each:
//!
//! | step | phase | next, and the side effect it leads to |
//! |---|---|---|
//! | `Arbitration` | Pending | admitted → `Admitted` (see `executor::arbitrate`) |
//! | `Admitted` | Running | stale check, PDB headroom (wait while blocked); ReservationFirst → `Reserving` (name persisted), EvictDirectly → `Evicting` |
//! | `Reserving` | Running | `reserve` (idempotent by name) → `ReservationCreated` |
//! | `ReservationCreated` | Running | reservation Scheduled → `ReservationScheduled`; Unschedulable → Failed at once, nothing evicted |
//! | `ReservationScheduled` | Running | PDB headroom and eviction QPS, then `Evicting` (write-ahead) |
//! | `Evicting` | Running | pod gone → `Evicted` without calling; else `evict` → `Evicted` (EvictDirectly: Succeeded) |
//! | `Evicted` | Running | replacement bound → `PodBoundReservation`; landed elsewhere → Succeeded with a note |
//! | `PodBoundReservation` | Running | replacement Ready (or gone) → `BoundPodReady` |
//! | `BoundPodReady` | Running | → Succeeded (`Complete`) |
//! | `Done` | Succeeded/Failed/Aborted | — |
//!
//! Each change is a conditional update on the step it was computed from, so an abort that wins
//! the race leaves the executor's change unapplied (and its side effect unperformed).

use super::Deps;
use std::collections::HashMap;

use crate::backend::{
    BackendError, EvictedPod, EvictionCheck, EvictionRequest, EvictionResult, PodState, Repeated,
    ReservationKind, ReservationRequest, ReservationState,
};
use crate::metrics::{Eviction, EvictionOutcome};
use rebalancer_store::pod_migrations::DONE_STEP;
use rebalancer_store::{
    DecisionChange, DecisionStatus, MigrationChange, MigrationPhase, NewEvent, PodMigrationRecord,
    StoreError, now_ms,
};

use super::arbitration::{MigrationMode, PodFacts, human_ms};

#[cfg(test)]
mod tests;

/// Actor of the executor's own decision changes.
pub const EXECUTOR_ACTOR: &str = "system:executor";

/// The most steps one pod migration takes in one pass (each is persisted; a pod migration that
/// needs to wait stops earlier).
const MAX_STEPS_PER_PASS: usize = 12;

/// Why an abort was refused.
#[derive(Debug, thiserror::Error)]
pub enum AbortError {
    #[error("pod migration {id} is already {phase} and cannot be aborted")]
    Finished { id: i64, phase: &'static str },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What one step did.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    /// Moved to another step: take the next one now.
    Progressed,
    /// Waiting for something outside (persisted as its reason/message).
    Waiting,
    /// Finished, or moved by someone else (abort): stop.
    Stopped,
}

fn reservation_name(m: &PodMigrationRecord) -> String {
    format!("rebalancer-pm-{}", m.id)
}

/// How many reservations a pod migration may make when others' replacements keep taking them.
const MAX_RESERVATION_ATTEMPTS: u32 = 3;

/// Which attempt reservation `name` of `m` is: `rebalancer-pm-<id>` is the 1st,
/// `rebalancer-pm-<id>-<n>` the n-th.
fn reservation_attempt(m: &PodMigrationRecord, name: &str) -> u32 {
    name.strip_prefix(&reservation_name(m))
        .and_then(|rest| rest.strip_prefix('-'))
        .and_then(|n| n.parse().ok())
        .unwrap_or(1)
}

/// How messages name `m`'s reservation: `Reservation` or `placeholder pod`.
fn reservation_kind(m: &PodMigrationRecord) -> &str {
    m.reservation_kind
        .as_deref()
        .unwrap_or(ReservationKind::Reservation.as_str())
}

fn pod_ref(m: &PodMigrationRecord) -> String {
    format!("{}/{}", m.pod_namespace, m.pod_name)
}

fn mode(m: &PodMigrationRecord) -> MigrationMode {
    MigrationMode::parse(&m.mode).unwrap_or_default()
}

/// Persist `change` (expecting `m`'s step); fire the fault point of the new step after it.
async fn apply(
    deps: &Deps,
    m: &PodMigrationRecord,
    change: MigrationChange,
) -> Result<bool, StoreError> {
    let step = change.step.clone();
    let applied = deps
        .store
        .change_pod_migration(m.id, &m.step, &change)
        .await?;
    if applied {
        if let Some(step) = step {
            tracing::info!(pod_migration = m.id, pod = %pod_ref(m), step = %step, "pod migration step");
            deps.executor.fault(&step);
        }
    } else {
        tracing::info!(
            pod_migration = m.id,
            "pod migration changed meanwhile (abort?); step dropped"
        );
    }
    Ok(applied)
}

/// Is the decision behind `m` stale? The pod must exist with the same uid on the node it was
/// proposed on. Returns why not.
pub async fn staleness(
    deps: &Deps,
    m: &PodMigrationRecord,
) -> Result<Option<String>, crate::backend::BackendError> {
    Ok(match deps.backend.pod(&m.cluster, &m.pod_uid).await? {
        None => Some(format!(
            "stale: pod {} (uid {}) no longer exists",
            pod_ref(m),
            m.pod_uid
        )),
        Some(p) if p.terminating => Some(format!(
            "stale: pod {} is already terminating (being deleted)",
            pod_ref(m)
        )),
        Some(p) if p.node.as_deref() != Some(m.source_node.as_str()) => Some(format!(
            "stale: pod {} is now {}, not on node {} where it was proposed",
            pod_ref(m),
            p.node
                .map_or_else(|| "unscheduled".to_string(), |n| format!("on node {n}")),
            m.source_node
        )),
        Some(_) => None,
    })
}

fn finished(
    phase: MigrationPhase,
    reason: &str,
    message: &str,
    to: DecisionStatus,
    actor: &str,
    comment: Option<String>,
) -> MigrationChange {
    let now = now_ms();
    MigrationChange {
        step: Some(DONE_STEP.into()),
        phase: Some(phase),
        reason: Some(reason.into()),
        message: Some(message.into()),
        finished_at: Some(now),
        events: vec![if phase == MigrationPhase::Succeeded {
            NewEvent::normal(
                if reason.is_empty() {
                    "Complete"
                } else {
                    reason
                },
                message,
            )
        } else {
            NewEvent::warning(reason, message)
        }],
        decision: Some(DecisionChange {
            from: vec![DecisionStatus::Approved, DecisionStatus::Executing],
            to,
            actor: actor.into(),
            comment,
            reason: (to != DecisionStatus::Succeeded).then(|| message.to_string()),
        }),
        ..MigrationChange::default()
    }
}

/// Fail a pod migration (and its decision), then release its reservation.
pub async fn fail(
    deps: &Deps,
    m: &PodMigrationRecord,
    reason: &str,
    message: &str,
) -> Result<(), StoreError> {
    let change = finished(
        MigrationPhase::Failed,
        reason,
        message,
        DecisionStatus::Failed,
        EXECUTOR_ACTOR,
        None,
    );
    if apply(deps, m, change).await? {
        tracing::warn!(
            pod_migration = m.id,
            reason,
            message,
            "pod migration failed"
        );
        deps.metrics.pod_migration_finished("Failed", reason);
        release(deps, m).await;
    }
    Ok(())
}

/// Fail as stale (the decision fails with the reason).
pub async fn fail_stale(deps: &Deps, m: &PodMigrationRecord, why: &str) -> Result<(), StoreError> {
    fail(deps, m, "Stale", why).await
}

/// Persist what a pod migration waits for (only when it changed, with an event).
pub async fn wait(
    deps: &Deps,
    m: &PodMigrationRecord,
    reason: &str,
    message: &str,
    warning: bool,
) -> Result<(), StoreError> {
    if m.reason == reason && m.message == message {
        return Ok(());
    }
    let event = if warning {
        NewEvent::warning(reason, message)
    } else {
        NewEvent::normal(reason, message)
    };
    deps.store
        .change_pod_migration(
            m.id,
            &m.step,
            &MigrationChange {
                reason: Some(reason.into()),
                message: Some(message.into()),
                events: vec![event],
                ..MigrationChange::default()
            },
        )
        .await?;
    Ok(())
}

/// Start a pod migration that passed arbitration.
pub async fn admit(
    deps: &Deps,
    m: &PodMigrationRecord,
    pod: &PodFacts,
) -> Result<bool, StoreError> {
    let _step = deps.executor.inner.step_lock.lock().await;
    apply(
        deps,
        m,
        MigrationChange {
            step: Some("Admitted".into()),
            phase: Some(MigrationPhase::Running),
            reason: Some("PassedArbitration".into()),
            message: Some("passed arbitration".into()),
            workload: pod.workload.clone(),
            started_at: Some(now_ms()),
            events: vec![NewEvent::normal(
                "PassedArbitration",
                format!(
                    "pod migration of pod {} passed arbitration and starts ({})",
                    pod_ref(m),
                    m.mode
                ),
            )],
            decision: Some(DecisionChange {
                from: vec![DecisionStatus::Approved],
                to: DecisionStatus::Executing,
                actor: EXECUTOR_ACTOR.into(),
                comment: None,
                reason: None,
            }),
            ..MigrationChange::default()
        },
    )
    .await
}

/// Release the reservation of a finished pod migration (idempotent), then record it.
pub async fn release(deps: &Deps, m: &PodMigrationRecord) {
    let Some(name) = m.reservation.clone() else {
        return;
    };
    if m.reservation_released {
        return;
    }
    let failures = &deps.executor.inner.release_failures;
    let outcome = deps.backend.release(&m.cluster, &name).await;
    {
        let mut failures = failures.lock().unwrap_or_else(|p| p.into_inner());
        match &outcome {
            Ok(()) => {
                if let Some(mut run) = failures.remove(&m.id) {
                    run.succeeded();
                }
            }
            Err(e) => failures
                .entry(m.id)
                .or_insert_with(|| {
                    Repeated::new(
                        &m.cluster,
                        format!("release of {} {name}", reservation_kind(m)),
                    )
                })
                .failed(&e.to_string()),
        }
    }
    if outcome.is_ok() {
        if let Err(e) = deps.store.mark_reservation_released(m.id).await {
            tracing::error!(pod_migration = m.id, error = %e, "could not record a released reservation; retrying");
        } else {
            tracing::info!(
                pod_migration = m.id, reservation = %name, kind = reservation_kind(m),
                "reservation released"
            );
        }
    }
}

/// A pod migration whose step keeps failing with a transient backend error: when to try again,
/// and the run of failures (logged once, then counted).
#[derive(Debug)]
pub struct Retry {
    run: Repeated,
    /// Not before (ms since the epoch).
    next_at: i64,
}

/// The first retry waits this long; each further failure doubles it, up to [`RETRY_MAX_MS`].
const RETRY_FIRST_MS: i64 = 500;
const RETRY_MAX_MS: i64 = 30_000;

impl Retry {
    fn new(m: &PodMigrationRecord) -> Retry {
        Retry {
            run: Repeated::new(&m.cluster, format!("pod migration {}", m.id)),
            next_at: 0,
        }
    }

    /// One more failure at `now`: the next try waits 0.5 s doubling per failure, up to 30 s.
    fn failed(&mut self, error: &str, now: i64) {
        self.run.failed(error);
        let doublings = (self.run.failures() - 1).min(16) as u32;
        self.next_at = now
            + RETRY_FIRST_MS
                .saturating_mul(1 << doublings)
                .min(RETRY_MAX_MS);
    }
}

/// Drive one running pod migration as far as it goes now. A transient backend failure is
/// retried with backoff (0.5 s doubling to 30 s; the first failure is a WARN, the rest are
/// counted); a permanent one (forbidden, invalid) fails the pod migration at once, naming the
/// call that failed.
pub async fn drive(deps: &Deps, id: i64) -> Result<(), StoreError> {
    let retries = &deps.executor.inner.retries;
    let retries = || retries.lock().unwrap_or_else(|p| p.into_inner());
    if retries().get(&id).is_some_and(|r| now_ms() < r.next_at) {
        return Ok(());
    }
    for _ in 0..MAX_STEPS_PER_PASS {
        let _step = deps.executor.inner.step_lock.lock().await;
        let m = deps.store.get_pod_migration(id).await?;
        if m.phase != MigrationPhase::Running {
            retries().remove(&id);
            return Ok(());
        }
        let outcome = match step(deps, &m).await {
            Ok(outcome) => {
                if let Some(mut r) = retries().remove(&id) {
                    r.run.succeeded();
                }
                outcome
            }
            Err(StepError::Store(e)) => return Err(e),
            Err(StepError::Backend(e)) if !e.is_transient() => {
                retries().remove(&id);
                let reason = match e {
                    BackendError::Forbidden(_) => "Forbidden",
                    _ => "BackendRefused",
                };
                let message = format!(
                    "{} at step {}: {e}{}",
                    if reason == "Forbidden" {
                        "the cluster refused a call"
                    } else {
                        "a backend call failed for good"
                    },
                    m.step,
                    if m.evicted_at.is_some() {
                        "; the pod had been evicted"
                    } else if m.step == "Evicting" {
                        "; the pod may have been evicted"
                    } else {
                        "; the pod was not evicted"
                    }
                );
                fail(deps, &m, reason, &message).await?;
                Outcome::Stopped
            }
            Err(StepError::Backend(e)) => {
                retries()
                    .entry(id)
                    .or_insert_with(|| Retry::new(&m))
                    .failed(&format!("step {}: {e}", m.step), now_ms());
                wait(
                    deps,
                    &m,
                    "BackendError",
                    &format!("waiting: the backend failed ({e}); retrying with backoff"),
                    true,
                )
                .await?;
                Outcome::Waiting
            }
        };
        if outcome != Outcome::Progressed {
            return Ok(());
        }
    }
    Ok(())
}

#[derive(Debug, thiserror::Error)]
enum StepError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Backend(#[from] crate::backend::BackendError),
}

fn progressed(applied: bool) -> Outcome {
    if applied {
        Outcome::Progressed
    } else {
        Outcome::Stopped
    }
}

/// One step of a running pod migration.
async fn step(deps: &Deps, m: &PodMigrationRecord) -> Result<Outcome, StepError> {
    let now = now_ms();
    let backend = &deps.backend;
    let cluster = m.cluster.as_str();
    let kind = reservation_kind(m);

    // TTL, counted from admission.
    if m.ttl_ms > 0
        && let Some(started) = m.started_at
        && now - started >= m.ttl_ms
    {
        let evicted = m.evicted_at.is_some();
        let message = format!(
            "timed out after {} (TTL) at step {}{}",
            human_ms(m.ttl_ms),
            m.step,
            if evicted {
                "; the pod had been evicted but no replacement was confirmed"
            } else {
                "; the pod was not evicted"
            }
        );
        fail(deps, m, "Timeout", &message).await?;
        return Ok(Outcome::Stopped);
    }

    match m.step.as_str() {
        "Admitted" => {
            if let Some(stale) = staleness(deps, m).await? {
                fail_stale(deps, m, &stale).await?;
                return Ok(Outcome::Stopped);
            }
            // Better than Koordinator: no reservation while a PDB would refuse the eviction.
            if let Some(outcome) = pdb_gate(deps, m).await? {
                return Ok(outcome);
            }
            match mode(m) {
                MigrationMode::ReservationFirst => {
                    let name = reservation_name(m);
                    let kind = backend.reservation_kind(cluster, &m.pod_uid).await?;
                    let kind = kind.as_str();
                    let applied = apply(
                        deps,
                        m,
                        MigrationChange {
                            step: Some("Reserving".into()),
                            reason: Some("CreatingReservation".into()),
                            message: Some(format!("creating {kind} {name}")),
                            reservation: Some(name.clone()),
                            reservation_kind: Some(kind.to_owned()),
                            events: vec![NewEvent::normal(
                                "CreatingReservation",
                                format!(
                                    "creating {kind} {name} for a replacement of pod {} away \
                                     from node {}",
                                    pod_ref(m),
                                    m.source_node
                                ),
                            )],
                            ..MigrationChange::default()
                        },
                    )
                    .await?;
                    Ok(progressed(applied))
                }
                MigrationMode::EvictDirectly => start_eviction(deps, m).await,
            }
        }
        "Reserving" => {
            let name = m.reservation.clone().unwrap_or_else(|| reservation_name(m));
            let request = ReservationRequest {
                name: name.clone(),
                pod_uid: m.pod_uid.clone(),
                target_node: None,
                exclude_nodes: vec![m.source_node.clone()],
            };
            match backend.reserve(cluster, &request).await {
                Ok(_) => deps.executor.fault("ReserveCalled"),
                // Refused for good (admission, a name taken by another pod's reservation):
                // better than Koordinator's retry until the TTL, fail now, nothing evicted.
                Err(e) if !e.is_transient() => {
                    let why = e.to_string();
                    fail(
                        deps,
                        m,
                        "FailedCreateReservation",
                        &format!(
                            "could not create {kind} {name}: {why}; pod {} was not evicted",
                            pod_ref(m)
                        ),
                    )
                    .await?;
                    // Anything half-created is released by the executor's sweep.
                    return Ok(Outcome::Stopped);
                }
                Err(e) => return Err(e.into()),
            }
            let applied = apply(
                deps,
                m,
                MigrationChange {
                    step: Some("ReservationCreated".into()),
                    status: Some("ReservationCreated".into()),
                    reason: Some("ReservationCreated".into()),
                    message: Some(format!("created {kind} {name}")),
                    events: vec![NewEvent::normal(
                        "ReservationCreated",
                        format!("Successfully created {kind} {name}"),
                    )],
                    ..MigrationChange::default()
                },
            )
            .await?;
            Ok(progressed(applied))
        }
        "ReservationCreated" => {
            let name = m.reservation.clone().unwrap_or_else(|| reservation_name(m));
            match backend.reservation(cluster, &name).await? {
                None | Some(ReservationState::Released) => {
                    fail(
                        deps,
                        m,
                        "MissingReservation",
                        &format!("{kind} {name} is missing or was released before the eviction"),
                    )
                    .await?;
                    Ok(Outcome::Stopped)
                }
                Some(ReservationState::Pending) => {
                    wait(
                        deps,
                        m,
                        "WaitForReservationScheduled",
                        &format!("waiting: {kind} {name} is not scheduled yet"),
                        false,
                    )
                    .await?;
                    Ok(Outcome::Waiting)
                }
                Some(ReservationState::Unschedulable { reason }) => {
                    // Better than Koordinator: fail now instead of waiting for the TTL.
                    fail(
                        deps,
                        m,
                        "Unschedulable",
                        &format!(
                            "{kind} {name} is unschedulable: {reason}; pod {} was not evicted",
                            pod_ref(m)
                        ),
                    )
                    .await?;
                    Ok(Outcome::Stopped)
                }
                Some(ReservationState::Bound { pod_uid, .. }) => {
                    // A Reservation serves any pod of its controller: the replacement of another
                    // pod migration of the workload took it before this one evicted. Reserve
                    // again (a few times), nothing evicted meanwhile.
                    let attempt = reservation_attempt(m, &name);
                    if attempt >= MAX_RESERVATION_ATTEMPTS {
                        fail(
                            deps,
                            m,
                            "ForbiddenMigratePod",
                            &format!(
                                "{kind} {name} is already bound by another pod ({pod_uid}), the \
                                 {attempt}th reservation taken so; pod {} was not evicted",
                                pod_ref(m)
                            ),
                        )
                        .await?;
                        return Ok(Outcome::Stopped);
                    }
                    // The consumed object holds nothing; delete it before forgetting its name.
                    backend.release(cluster, &name).await?;
                    let next = format!("{}-{}", reservation_name(m), attempt + 1);
                    let message = format!(
                        "{kind} {name} was taken by pod {pod_uid} (a replacement of another pod \
                         of the workload) before pod {} was evicted; reserving again as {next}",
                        pod_ref(m)
                    );
                    let applied = apply(
                        deps,
                        m,
                        MigrationChange {
                            step: Some("Reserving".into()),
                            reason: Some("ReservationTaken".into()),
                            message: Some(message.clone()),
                            reservation: Some(next),
                            events: vec![NewEvent::warning("ReservationTaken", message)],
                            ..MigrationChange::default()
                        },
                    )
                    .await?;
                    Ok(progressed(applied))
                }
                Some(ReservationState::Scheduled { node }) if node == m.source_node => {
                    fail(
                        deps,
                        m,
                        "ForbiddenMigratePod",
                        &format!(
                            "the scheduler assigned {kind} {name} to node {node}, the same \
                             node as pod {}",
                            pod_ref(m)
                        ),
                    )
                    .await?;
                    Ok(Outcome::Stopped)
                }
                Some(ReservationState::Scheduled { node }) => {
                    let applied = apply(
                        deps,
                        m,
                        MigrationChange {
                            step: Some("ReservationScheduled".into()),
                            status: Some("ReservationScheduled".into()),
                            reason: Some("ReservationScheduled".into()),
                            message: Some(format!("Assigned {kind} {name} to node {node}")),
                            target_node: Some(node.clone()),
                            events: vec![NewEvent::normal(
                                "ReservationScheduled",
                                format!("Assigned {kind} {name} to node {node}"),
                            )],
                            ..MigrationChange::default()
                        },
                    )
                    .await?;
                    Ok(progressed(applied))
                }
            }
        }
        "ReservationScheduled" => {
            if let Some(outcome) = pdb_gate(deps, m).await? {
                return Ok(outcome);
            }
            start_eviction(deps, m).await
        }
        "Evicting" => finish_eviction(deps, m).await,
        "Evicted" => settle_replacement(deps, m).await,
        "PodBoundReservation" => {
            let uid = m.new_pod_uid.clone().unwrap_or_default();
            let pod = backend.pod(cluster, &uid).await?;
            let name = m.new_pod_name.clone().unwrap_or_else(|| uid.clone());
            match pod {
                Some(p) if !p.ready => {
                    wait(
                        deps,
                        m,
                        "WaitForBoundPodReady",
                        &format!("waiting for pod {}/{} to become Ready", p.namespace, p.name),
                        false,
                    )
                    .await?;
                    Ok(Outcome::Waiting)
                }
                _ => {
                    // A bound pod that no longer exists counts as Ready (as in Koordinator).
                    let message = if pod.is_some() {
                        format!("Pod {}/{name} is Ready", m.pod_namespace)
                    } else {
                        format!(
                            "Pod {}/{name} no longer exists; treated as Ready",
                            m.pod_namespace
                        )
                    };
                    let applied = apply(
                        deps,
                        m,
                        MigrationChange {
                            step: Some("BoundPodReady".into()),
                            status: Some("BoundPodReady".into()),
                            reason: Some("BoundPodReady".into()),
                            message: Some(message.clone()),
                            events: vec![NewEvent::normal("BoundPodReady", message)],
                            ..MigrationChange::default()
                        },
                    )
                    .await?;
                    Ok(progressed(applied))
                }
            }
        }
        "BoundPodReady" => {
            let name = m.reservation.clone().unwrap_or_else(|| reservation_name(m));
            let message = format!(
                "Bind Pod {}/{} in {kind} {name} on node {}",
                m.pod_namespace,
                m.new_pod_name.clone().unwrap_or_default(),
                m.new_pod_node.clone().unwrap_or_default()
            );
            let mut change = finished(
                MigrationPhase::Succeeded,
                "",
                &message,
                DecisionStatus::Succeeded,
                EXECUTOR_ACTOR,
                None,
            );
            change.status = Some("Complete".into());
            if apply(deps, m, change).await? {
                deps.metrics.pod_migration_finished("Succeeded", "Complete");
                // The replacement consumed it; the object itself is cleaned up (a consumed
                // Koordinator Reservation would otherwise wait 24 h for the scheduler's GC). A
                // crash before this is covered by the executor's sweep of unreleased ones.
                release(deps, m).await;
            }
            Ok(Outcome::Stopped)
        }
        other => {
            tracing::error!(
                pod_migration = m.id,
                step = other,
                "unknown step; failing the pod migration"
            );
            fail(deps, m, "InternalError", &format!("unknown step {other:?}")).await?;
            Ok(Outcome::Stopped)
        }
    }
}

/// Wait while the pod's PDB has no headroom; fail when the Eviction API would refuse it for
/// good or the pod is gone. `None`: go on.
async fn pdb_gate(deps: &Deps, m: &PodMigrationRecord) -> Result<Option<Outcome>, StepError> {
    match deps.backend.eviction_check(&m.cluster, &m.pod_uid).await? {
        EvictionCheck::Allowed { .. } => Ok(None),
        EvictionCheck::Blocked { pdb, reason } => {
            let message = if m.reservation.is_some() {
                format!("waiting: PodDisruptionBudget {pdb} allows no disruption now ({reason})")
            } else {
                format!(
                    "waiting: PodDisruptionBudget {pdb} allows no disruption now ({reason}); no \
                     reservation is made until it does"
                )
            };
            wait(deps, m, "BlockedByPdb", &message, true).await?;
            Ok(Some(Outcome::Waiting))
        }
        EvictionCheck::MultiplePdbs { pdbs } => {
            fail(
                deps,
                m,
                "ForbiddenMigratePod",
                &format!(
                    "pod {} is selected by several PodDisruptionBudgets ({}); the Eviction API \
                     refuses such pods",
                    pod_ref(m),
                    pdbs.join(", ")
                ),
            )
            .await?;
            Ok(Some(Outcome::Stopped))
        }
        EvictionCheck::PodNotFound => {
            fail_stale(
                deps,
                m,
                &format!(
                    "stale: pod {} (uid {}) no longer exists",
                    pod_ref(m),
                    m.pod_uid
                ),
            )
            .await?;
            Ok(Some(Outcome::Stopped))
        }
    }
}

/// Eviction QPS (the cluster's bucket), then persist `Evicting` (write-ahead). The eviction
/// itself is the next step.
async fn start_eviction(deps: &Deps, m: &PodMigrationRecord) -> Result<Outcome, StepError> {
    let (config, _) = deps.executor.config_for(&m.cluster);
    let wait_ms = deps
        .executor
        .inner
        .evictions
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .try_take(&config, &m.cluster, now_ms());
    if wait_ms > 0 {
        // Short waits are not worth a database write: the next pass comes soon.
        if wait_ms > super::TICK.as_millis() as i64 {
            wait(
                deps,
                m,
                "RateLimited",
                &format!(
                    "waiting: eviction rate limit (evictQPS={}, evictBurst={})",
                    config.evict_qps, config.evict_burst
                ),
                false,
            )
            .await?;
        }
        return Ok(Outcome::Waiting);
    }
    let message = format!(
        "evicting pod {} from node {}{}",
        pod_ref(m),
        m.source_node,
        m.target_node
            .as_ref()
            .map_or(String::new(), |t| format!(" (reserved on node {t})"))
    );
    let applied = apply(
        deps,
        m,
        MigrationChange {
            step: Some("Evicting".into()),
            status: Some("Eviction".into()),
            reason: Some("Evicting".into()),
            message: Some(message.clone()),
            eviction_requested_at: Some(now_ms()),
            events: vec![NewEvent::normal("Evicting", message)],
            ..MigrationChange::default()
        },
    )
    .await?;
    Ok(progressed(applied))
}

/// At `Evicting`: the eviction may already have happened (a restart between the call and its
/// record). The backend evicts at most once: a pod that is gone, has another uid or is already
/// terminating is not evicted again. Either way the cluster is told once (`record_eviction`
/// is idempotent per pod), also when the crash came between the eviction and that record.
async fn finish_eviction(deps: &Deps, m: &PodMigrationRecord) -> Result<Outcome, StepError> {
    let backend = &deps.backend;
    let request = EvictionRequest {
        uid: m.pod_uid.clone(),
        namespace: m.pod_namespace.clone(),
        name: m.pod_name.clone(),
        grace_period_seconds: m.grace_period_seconds,
        reason: m.decision_reason.clone(),
        trigger: m.plugin.clone(),
    };
    let result = backend.evict(&m.cluster, &request).await?;
    if result == EvictionResult::Evicted {
        deps.metrics
            .pod_evicted(eviction(m, EvictionOutcome::Success));
        record_limiters(deps, m);
        deps.executor.fault("EvictCalled");
    }
    match result {
        EvictionResult::Evicted | EvictionResult::AlreadyTerminating | EvictionResult::NotFound => {
            backend.record_eviction(&m.cluster, &request).await?;
            let message = match result {
                EvictionResult::Evicted => {
                    format!("Pod {} evicted from node {}", pod_ref(m), m.source_node)
                }
                EvictionResult::AlreadyTerminating => format!(
                    "Pod {} is already terminating on node {} (the eviction was requested \
                     before); it is not evicted again",
                    pod_ref(m),
                    m.source_node
                ),
                _ => format!(
                    "Pod {} is gone from node {} (the eviction was requested before)",
                    pod_ref(m),
                    m.source_node
                ),
            };
            let now = now_ms();
            let change = match mode(m) {
                MigrationMode::EvictDirectly => {
                    let done = format!("Pod {} has been evicted", pod_ref(m));
                    let mut change = finished(
                        MigrationPhase::Succeeded,
                        "",
                        &done,
                        DecisionStatus::Succeeded,
                        EXECUTOR_ACTOR,
                        None,
                    );
                    change.status = Some("Complete".into());
                    change.evicted_at = Some(now);
                    change
                        .events
                        .insert(0, NewEvent::normal("EvictComplete", message));
                    change
                }
                MigrationMode::ReservationFirst => MigrationChange {
                    step: Some("Evicted".into()),
                    status: Some("Eviction".into()),
                    reason: Some("EvictComplete".into()),
                    message: Some(message.clone()),
                    evicted_at: Some(now),
                    events: vec![NewEvent::normal("EvictComplete", message)],
                    ..MigrationChange::default()
                },
            };
            let applied = apply(deps, m, change).await?;
            if applied && mode(m) == MigrationMode::EvictDirectly {
                deps.metrics.pod_migration_finished("Succeeded", "Complete");
                return Ok(Outcome::Stopped);
            }
            Ok(progressed(applied))
        }
        EvictionResult::BlockedByPdb { pdb, message } => {
            deps.metrics
                .pod_evicted(eviction(m, EvictionOutcome::Blocked));
            // Back to the step before: retried (after the PDB check) until the TTL.
            let text = format!(
                "failed to evict pod {}: blocked by PodDisruptionBudget {pdb} ({message}); retrying",
                pod_ref(m)
            );
            let back = match mode(m) {
                MigrationMode::ReservationFirst => "ReservationScheduled",
                MigrationMode::EvictDirectly => "Admitted",
            };
            let applied = deps
                .store
                .change_pod_migration(
                    m.id,
                    &m.step,
                    &MigrationChange {
                        step: Some(back.into()),
                        reason: Some("BlockedByPdb".into()),
                        message: Some(text.clone()),
                        events: vec![NewEvent::warning("Evicting", text)],
                        ..MigrationChange::default()
                    },
                )
                .await?;
            Ok(if applied {
                Outcome::Waiting
            } else {
                Outcome::Stopped
            })
        }
        EvictionResult::Refused { message } => {
            deps.metrics
                .pod_evicted(eviction(m, EvictionOutcome::Error));
            fail(
                deps,
                m,
                "FailedEvict",
                &format!("the eviction of pod {} was refused: {message}", pod_ref(m)),
            )
            .await?;
            Ok(Outcome::Stopped)
        }
    }
}

/// What [`choose_replacement`] decided.
#[derive(Debug, PartialEq)]
enum Choice {
    /// This pod is the replacement: claim it.
    Take(PodState),
    /// None yet; the pod named (if any) is a candidate that is not scheduled yet.
    Wait(Option<PodState>),
}

/// How much older than an eviction a pod may be and still be its replacement (the clocks of
/// this server and the API server differ a little; the Kubernetes backend uses the same).
const REPLACEMENT_SLACK_MS: i64 = 5_000;

/// The other unfinished pod migrations of the cluster, as [`choose_replacement`] sees them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Others {
    /// The workload's pod migrations that evicted and have no replacement yet.
    rivals: Vec<Rival>,
    /// Their reservations' names: a pod bound into one is theirs (a pod bound into the
    /// reservation of a finished pod migration is free).
    reservations: Vec<String>,
}

/// Another pod migration of the same workload that evicted and has no replacement yet.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Rival {
    /// Its reserved node.
    target: String,
    /// When it requested its eviction (ms).
    evicted_at: i64,
}

/// Which candidate replaces the evicted pod of pod migration `id` (the rule documented in
/// docs/operations.md, "Which pod is the replacement"). `candidates` come best first from the
/// backend; `claims` says which of them other pod migrations took; `others` are the other
/// unfinished pod migrations.
/// 1. a candidate this pod migration claimed before (a restart) is kept;
/// 2. candidates another pod migration claimed, or bound into another unfinished one's
///    reservation, are out;
/// 3. of the scheduled ones, the first on this pod migration's reserved node;
/// 4. else the first that is not on the reserved node of a rival it could replace (created
///    after that rival's eviction, minus the slack): that pod is most likely the rival's;
/// 5. else none yet (wait).
fn choose_replacement(
    id: i64,
    target: Option<&str>,
    reservation: &str,
    candidates: &[PodState],
    claims: &HashMap<String, i64>,
    others: &Others,
) -> Choice {
    if let Some(mine) = candidates.iter().find(|p| claims.get(&p.uid) == Some(&id)) {
        return Choice::Take(mine.clone());
    }
    let free: Vec<&PodState> = candidates
        .iter()
        .filter(|p| !p.terminating)
        .filter(|p| claims.get(&p.uid).is_none_or(|by| *by == id))
        .filter(|p| {
            p.reservation
                .as_deref()
                .is_none_or(|r| r == reservation || !others.reservations.iter().any(|o| o == r))
        })
        .collect();
    let scheduled = || free.iter().filter(|p| p.node.is_some());
    if let Some(p) = scheduled().find(|p| target.is_some() && p.node.as_deref() == target) {
        return Choice::Take((*p).clone());
    }
    let a_rivals = |p: &PodState| {
        others.rivals.iter().any(|r| {
            p.node.as_deref() == Some(r.target.as_str())
                && p.created_ms
                    .is_none_or(|c| c >= r.evicted_at - REPLACEMENT_SLACK_MS)
        })
    };
    if let Some(p) = scheduled().find(|p| !a_rivals(p)) {
        return Choice::Take((*p).clone());
    }
    Choice::Wait(free.iter().find(|p| p.node.is_none()).map(|p| (*p).clone()))
}

/// Apply a change that names a replacement; `None` when another pod migration claimed that pod
/// first (this one looks again on its next pass).
async fn apply_claim(
    deps: &Deps,
    m: &PodMigrationRecord,
    change: MigrationChange,
) -> Result<Option<bool>, StoreError> {
    match apply(deps, m, change).await {
        Ok(applied) => Ok(Some(applied)),
        Err(StoreError::ReplacementClaimed { pod_uid, by }) => {
            tracing::info!(
                pod_migration = m.id, pod_uid = %pod_uid, by,
                "the replacement was claimed by another pod migration first; looking again"
            );
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// At `Evicted`: find this pod migration's replacement, claim it, and go on by where it
/// landed: on the reserved node → `PodBoundReservation` (the reservation is held until the
/// replacement is Ready); on the source node → failed, nothing moved; elsewhere → succeeded,
/// the reservation released.
async fn settle_replacement(deps: &Deps, m: &PodMigrationRecord) -> Result<Outcome, StepError> {
    let backend = &deps.backend;
    let cluster = m.cluster.as_str();
    let name = m.reservation.clone().unwrap_or_else(|| reservation_name(m));
    let kind = reservation_kind(m);
    let evicted = EvictedPod {
        uid: m.pod_uid.clone(),
        namespace: m.pod_namespace.clone(),
        owner_uid: m.workload.clone(),
        evicted_at_ms: m.eviction_requested_at.or(m.evicted_at),
        reservation: Some(name.clone()),
    };
    // A Koordinator Reservation bound by a pod names the replacement exactly.
    let bound = match backend.reservation(cluster, &name).await? {
        Some(ReservationState::Bound { node, pod_uid }) => Some((node, pod_uid)),
        _ => None,
    };
    let choice = match bound {
        Some((node, pod_uid)) => {
            let mut pod = backend.pod(cluster, &pod_uid).await?.unwrap_or(PodState {
                uid: pod_uid.clone(),
                namespace: m.pod_namespace.clone(),
                name: pod_uid.clone(),
                node: None,
                phase: "Unknown".into(),
                ready: false,
                owner: None,
                reservation: Some(name.clone()),
                terminating: false,
                created_ms: None,
            });
            pod.node = Some(node);
            Choice::Take(pod)
        }
        None => {
            let candidates = backend.replacements_of(cluster, &evicted).await?;
            let uids: Vec<String> = candidates.iter().map(|p| p.uid.clone()).collect();
            let claims = deps.store.replacement_claims(cluster, &uids).await?;
            let mut others = Others::default();
            for o in deps.store.active_pod_migrations().await? {
                if o.id == m.id || o.cluster != m.cluster {
                    continue;
                }
                if let Some(r) = &o.reservation {
                    others.reservations.push(r.clone());
                }
                if o.workload.is_some()
                    && o.workload == m.workload
                    && o.new_pod_uid.is_none()
                    && let (Some(target), Some(evicted_at)) =
                        (o.target_node, o.eviction_requested_at)
                {
                    others.rivals.push(Rival { target, evicted_at });
                }
            }
            choose_replacement(
                m.id,
                m.target_node.as_deref(),
                &name,
                &candidates,
                &claims,
                &others,
            )
        }
    };
    let p = match choice {
        Choice::Take(p) => p,
        Choice::Wait(pending) => {
            let message = match pending {
                Some(p) => format!(
                    "waiting: replacement pod {}/{} is not scheduled yet",
                    p.namespace, p.name
                ),
                None => format!("waiting for a replacement pod to land on {kind} {name}"),
            };
            wait(deps, m, "WaitForPodBindReservation", &message, false).await?;
            return Ok(Outcome::Waiting);
        }
    };
    let node = p.node.clone().unwrap_or_default();
    let pod_name = format!("{}/{}", p.namespace, p.name);
    if m.target_node.as_deref() == Some(node.as_str()) {
        let message = format!("Pod {pod_name} bound {kind} {name} on node {node}");
        let change = MigrationChange {
            step: Some("PodBoundReservation".into()),
            status: Some("PodBoundReservation".into()),
            reason: Some("PodBoundReservation".into()),
            message: Some(message.clone()),
            new_pod_uid: Some(p.uid.clone()),
            new_pod_name: Some(p.name.clone()),
            new_pod_node: Some(node.clone()),
            events: vec![NewEvent::normal("PodBoundReservation", message)],
            ..MigrationChange::default()
        };
        return Ok(match apply_claim(deps, m, change).await? {
            Some(applied) => progressed(applied),
            None => Outcome::Waiting,
        });
    }
    let (phase, reason, message, status) = if node == m.source_node {
        // The room freed by the eviction went to the replacement: nothing moved.
        (
            MigrationPhase::Failed,
            "ReplacementOnSourceNode",
            format!(
                "replacement pod {pod_name} landed back on node {node} (the node it was evicted \
                 from) instead of {kind} {name}; the pod did not move"
            ),
            DecisionStatus::Failed,
        )
    } else {
        // Better than Koordinator: the workload recovered, just elsewhere.
        (
            MigrationPhase::Succeeded,
            "ReplacementElsewhere",
            format!(
                "replacement pod {pod_name} landed on node {node} instead of {kind} {name}{}; \
                 the {kind} is released",
                m.target_node
                    .as_ref()
                    .map_or(String::new(), |t| format!(" on node {t}"))
            ),
            DecisionStatus::Succeeded,
        )
    };
    let mut change = finished(phase, reason, &message, status, EXECUTOR_ACTOR, None);
    if phase == MigrationPhase::Succeeded {
        change.status = Some("Complete".into());
    }
    change.new_pod_uid = Some(p.uid.clone());
    change.new_pod_name = Some(p.name.clone());
    change.new_pod_node = Some(node);
    match apply_claim(deps, m, change).await? {
        Some(true) => {
            deps.metrics.pod_migration_finished(phase.as_str(), reason);
            release(deps, m).await;
            Ok(Outcome::Stopped)
        }
        Some(false) => Ok(Outcome::Stopped),
        None => Ok(Outcome::Waiting),
    }
}

/// The metrics' view of an eviction of `m`'s pod.
fn eviction(m: &PodMigrationRecord, outcome: EvictionOutcome) -> Eviction<'_> {
    Eviction {
        outcome,
        strategy: &m.plugin,
        profile: &m.profile,
        plugin_set: &m.plugin_set,
        namespace: &m.pod_namespace,
        node: &m.source_node,
    }
}

/// Take the object limiters' tokens for an eviction that just happened (in its cluster).
fn record_limiters(deps: &Deps, m: &PodMigrationRecord) {
    let configs = deps.executor.configs();
    let facts = super::facts_of(deps, m);
    let workloads = super::workloads_for(deps, &m.cluster, facts.workload.iter().cloned());
    let mut limiters = deps
        .executor
        .inner
        .limiters
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    limiters.record_eviction(
        &configs,
        &facts,
        facts.workload.as_ref().and_then(|w| workloads.get(w)),
        now_ms(),
    );
}

/// Abort a pod migration on behalf of `actor`: it ends `Aborted`, its decision `failed`, and
/// its reservation is released. An eviction already done cannot be undone.
pub async fn abort(
    deps: &Deps,
    id: i64,
    actor: &str,
    comment: Option<&str>,
) -> Result<PodMigrationRecord, AbortError> {
    let _step = deps.executor.inner.step_lock.lock().await;
    let m = deps.store.get_pod_migration(id).await?;
    if m.phase.is_terminal() {
        return Err(AbortError::Finished {
            id,
            phase: m.phase.as_str(),
        });
    }
    let mut message = format!("aborted by {actor}");
    if let Some(c) = comment.filter(|c| !c.is_empty()) {
        message.push_str(&format!(": {c}"));
    }
    if m.evicted_at.is_some() || m.step == "Evicting" {
        message.push_str(" (the pod had already been evicted; an eviction cannot be undone)");
    }
    let change = finished(
        MigrationPhase::Aborted,
        "Aborted",
        &message,
        DecisionStatus::Failed,
        actor,
        comment.map(str::to_string),
    );
    if !deps
        .store
        .change_pod_migration(m.id, &m.step, &change)
        .await?
    {
        // Cannot happen under the step lock unless the row vanished; report what it is now.
        let now = deps.store.get_pod_migration(id).await?;
        return Err(AbortError::Finished {
            id,
            phase: now.phase.as_str(),
        });
    }
    deps.metrics.pod_migration_finished("Aborted", "Aborted");
    deps.executor
        .inner
        .retries
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(&id);
    let m = deps.store.get_pod_migration(id).await?;
    release(deps, &m).await;
    deps.executor.wake();
    Ok(deps.store.get_pod_migration(id).await?)
}
