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
use crate::backend::{
    BackendError, EvictedPod, EvictionCheck, EvictionRequest, EvictionResult, ReservationRequest,
    ReservationState,
};
use crate::metrics::{Eviction, EvictionOutcome};
use rebalancer_store::pod_migrations::DONE_STEP;
use rebalancer_store::{
    DecisionChange, DecisionStatus, MigrationChange, MigrationPhase, NewEvent, PodMigrationRecord,
    StoreError, now_ms,
};

use super::arbitration::{MigrationMode, PodFacts, human_ms};

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
    match deps.backend.release(&m.cluster, &name).await {
        Ok(()) => {
            if let Err(e) = deps.store.mark_reservation_released(m.id).await {
                tracing::error!(pod_migration = m.id, error = %e, "could not record a released reservation; retrying");
            } else {
                tracing::info!(pod_migration = m.id, reservation = %name, "reservation released");
            }
        }
        Err(e) => {
            tracing::warn!(pod_migration = m.id, reservation = %name, error = %e, "releasing the reservation failed; retrying on the next pass")
        }
    }
}

/// Drive one running pod migration as far as it goes now.
pub async fn drive(deps: &Deps, id: i64) -> Result<(), StoreError> {
    for _ in 0..MAX_STEPS_PER_PASS {
        let _step = deps.executor.inner.step_lock.lock().await;
        let m = deps.store.get_pod_migration(id).await?;
        if m.phase != MigrationPhase::Running {
            return Ok(());
        }
        let outcome = match step(deps, &m).await {
            Ok(outcome) => outcome,
            Err(StepError::Store(e)) => return Err(e),
            Err(StepError::Backend(e)) => {
                // Transient or not, the step is retried on the next pass (and the TTL bounds it).
                tracing::warn!(pod_migration = id, step = %m.step, error = %e, "backend call failed; retrying");
                wait(
                    deps,
                    &m,
                    "BackendError",
                    &format!("waiting: the backend failed ({e}); retrying"),
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
                    let applied = apply(
                        deps,
                        m,
                        MigrationChange {
                            step: Some("Reserving".into()),
                            reason: Some("CreatingReservation".into()),
                            message: Some(format!("creating reservation {name}")),
                            reservation: Some(name.clone()),
                            events: vec![NewEvent::normal(
                                "CreatingReservation",
                                format!(
                                    "creating Reservation {name} for a replacement of pod {} \
                                     away from node {}",
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
                Ok(_) => {}
                // Refused for good (admission, a name taken by another pod's reservation):
                // better than Koordinator's retry until the TTL, fail now, nothing evicted.
                Err(BackendError::Invalid(why)) => {
                    fail(
                        deps,
                        m,
                        "FailedCreateReservation",
                        &format!(
                            "could not create Reservation {name}: {why}; pod {} was not evicted",
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
                    message: Some(format!("created Reservation {name}")),
                    events: vec![NewEvent::normal(
                        "ReservationCreated",
                        format!("Successfully created Reservation {name}"),
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
                        &format!(
                            "Reservation {name} is missing or was released before the eviction"
                        ),
                    )
                    .await?;
                    Ok(Outcome::Stopped)
                }
                Some(ReservationState::Pending) => {
                    wait(
                        deps,
                        m,
                        "WaitForReservationScheduled",
                        &format!("waiting: Reservation {name} is not scheduled yet"),
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
                            "Reservation {name} is unschedulable: {reason}; pod {} was not evicted",
                            pod_ref(m)
                        ),
                    )
                    .await?;
                    Ok(Outcome::Stopped)
                }
                Some(ReservationState::Bound { pod_uid, .. }) => {
                    fail(
                        deps,
                        m,
                        "ForbiddenMigratePod",
                        &format!(
                            "Reservation {name} is already bound by another pod ({pod_uid}); \
                             pod {} was not evicted",
                            pod_ref(m)
                        ),
                    )
                    .await?;
                    Ok(Outcome::Stopped)
                }
                Some(ReservationState::Scheduled { node }) if node == m.source_node => {
                    fail(
                        deps,
                        m,
                        "ForbiddenMigratePod",
                        &format!(
                            "the scheduler assigned Reservation {name} to node {node}, the same \
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
                            message: Some(format!("Assigned Reservation {name} to node {node}")),
                            target_node: Some(node.clone()),
                            events: vec![NewEvent::normal(
                                "ReservationScheduled",
                                format!("Assigned Reservation {name} to node {node}"),
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
        "Evicted" => {
            let name = m.reservation.clone().unwrap_or_else(|| reservation_name(m));
            if let Some(ReservationState::Bound { node, pod_uid }) =
                backend.reservation(cluster, &name).await?
            {
                let pod = backend.pod(cluster, &pod_uid).await?;
                let pod_name = pod.as_ref().map_or_else(
                    || pod_uid.clone(),
                    |p| format!("{}/{}", p.namespace, p.name),
                );
                let applied = apply(
                    deps,
                    m,
                    MigrationChange {
                        step: Some("PodBoundReservation".into()),
                        status: Some("PodBoundReservation".into()),
                        reason: Some("PodBoundReservation".into()),
                        message: Some(format!(
                            "Pod {pod_name} bound Reservation {name} on node {node}"
                        )),
                        new_pod_uid: Some(pod_uid.clone()),
                        new_pod_name: pod.as_ref().map(|p| p.name.clone()),
                        new_pod_node: Some(node.clone()),
                        events: vec![NewEvent::normal(
                            "PodBoundReservation",
                            format!("Pod {pod_name} bound Reservation {name} on node {node}"),
                        )],
                        ..MigrationChange::default()
                    },
                )
                .await?;
                return Ok(progressed(applied));
            }
            let evicted = EvictedPod {
                uid: m.pod_uid.clone(),
                namespace: m.pod_namespace.clone(),
                owner_uid: m.workload.clone(),
                evicted_at_ms: m.eviction_requested_at.or(m.evicted_at),
            };
            match backend.replacement_of(cluster, &evicted).await? {
                Some(p) if p.node.as_deref() == Some(m.source_node.as_str()) => {
                    // The room freed by the eviction went to the replacement: nothing moved.
                    let message = format!(
                        "replacement pod {}/{} landed back on node {} (the node it was evicted \
                         from) instead of Reservation {name}; the pod did not move",
                        p.namespace, p.name, m.source_node
                    );
                    let mut change = finished(
                        MigrationPhase::Failed,
                        "ReplacementOnSourceNode",
                        &message,
                        DecisionStatus::Failed,
                        EXECUTOR_ACTOR,
                        None,
                    );
                    change.new_pod_uid = Some(p.uid.clone());
                    change.new_pod_name = Some(p.name.clone());
                    change.new_pod_node = p.node.clone();
                    if apply(deps, m, change).await? {
                        deps.metrics
                            .pod_migration_finished("Failed", "ReplacementOnSourceNode");
                        release(deps, m).await;
                    }
                    Ok(Outcome::Stopped)
                }
                Some(p) if p.node.is_some() && p.reservation.as_deref() != Some(name.as_str()) => {
                    // Better than Koordinator: the workload recovered, just elsewhere.
                    let node = p.node.clone().unwrap_or_default();
                    let message = format!(
                        "replacement pod {}/{} landed on node {node} instead of Reservation \
                         {name}{}; the reservation is released",
                        p.namespace,
                        p.name,
                        m.target_node
                            .as_ref()
                            .map_or(String::new(), |t| format!(" on node {t}"))
                    );
                    let mut change = finished(
                        MigrationPhase::Succeeded,
                        "ReplacementElsewhere",
                        &message,
                        DecisionStatus::Succeeded,
                        EXECUTOR_ACTOR,
                        None,
                    );
                    change.status = Some("Complete".into());
                    change.new_pod_uid = Some(p.uid.clone());
                    change.new_pod_name = Some(p.name.clone());
                    change.new_pod_node = Some(node);
                    if apply(deps, m, change).await? {
                        deps.metrics
                            .pod_migration_finished("Succeeded", "ReplacementElsewhere");
                        release(deps, m).await;
                    }
                    Ok(Outcome::Stopped)
                }
                Some(p) => {
                    wait(
                        deps,
                        m,
                        "WaitForPodBindReservation",
                        &format!(
                            "waiting: replacement pod {}/{} is not scheduled yet",
                            p.namespace, p.name
                        ),
                        false,
                    )
                    .await?;
                    Ok(Outcome::Waiting)
                }
                None => {
                    wait(
                        deps,
                        m,
                        "WaitForPodBindReservation",
                        &format!("waiting for a replacement pod to bind Reservation {name}"),
                        false,
                    )
                    .await?;
                    Ok(Outcome::Waiting)
                }
            }
        }
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
                "Bind Pod {}/{} in Reservation {name} on node {}",
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
/// record). Evict only if the pod with that uid still exists; the backend's evict is idempotent
/// on top of that.
async fn finish_eviction(deps: &Deps, m: &PodMigrationRecord) -> Result<Outcome, StepError> {
    let backend = &deps.backend;
    let exists = backend.pod(&m.cluster, &m.pod_uid).await?.is_some();
    let (evicted_now, result) = if exists {
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
            deps.executor.fault("EvictCalled");
        }
        (true, result)
    } else {
        (false, EvictionResult::NotFound)
    };
    match result {
        EvictionResult::Evicted | EvictionResult::NotFound => {
            if evicted_now && result == EvictionResult::Evicted {
                deps.metrics
                    .pod_evicted(eviction(m, EvictionOutcome::Success));
                record_limiters(deps, m);
            }
            let message = if result == EvictionResult::Evicted {
                format!("Pod {} evicted from node {}", pod_ref(m), m.source_node)
            } else {
                format!(
                    "Pod {} is gone from node {} (the eviction was requested before)",
                    pod_ref(m),
                    m.source_node
                )
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
    let m = deps.store.get_pod_migration(id).await?;
    release(deps, &m).await;
    deps.executor.wake();
    Ok(deps.store.get_pod_migration(id).await?)
}
