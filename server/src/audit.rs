//! The audit log's vocabulary and the one call every mutating handler makes: [`record`].
//!
//! Owns: action names (`<object kind>.<verb>`) and object kinds, and how an entry is written —
//! after the change it describes has been committed, in a task that completes even when the
//! client goes away, with a failure logged (the change itself already happened). Safe to call
//! from inside [`InFlight::detached`](crate::in_flight::InFlight::detached) work.
//! Must not: decide who may do what (that is `http::auth`); the log is append-only (no update
//! or delete exists in `store::audit`, and the schema refuses them).

use serde_json::Value;

use crate::auth::Principal;
use rebalancer_store::{NewAuditEntry, Store};

/// Action names: `<object kind>.<verb>`.
pub mod action {
    pub const POLICY_UPLOAD: &str = "policy.upload";
    pub const POLICY_DELETE: &str = "policy.delete";
    pub const PROFILE_PUT: &str = "profile.put";
    pub const PROFILE_DELETE: &str = "profile.delete";
    pub const SNAPSHOT_PUSH: &str = "cluster.snapshot";
    pub const CLUSTER_DELETE: &str = "cluster.delete";
    pub const RUN_CREATE: &str = "run.create";
    pub const TOKEN_CREATE: &str = "token.create";
    pub const TOKEN_DELETE: &str = "token.delete";
    pub const SCHEDULE_CREATE: &str = "schedule.create";
    pub const SCHEDULE_UPDATE: &str = "schedule.update";
    pub const SCHEDULE_DELETE: &str = "schedule.delete";
    pub const DECISION_APPROVE: &str = "decision.approve";
    pub const DECISION_REJECT: &str = "decision.reject";
    /// A run's proposals superseded earlier open ones (one entry per run, on the run).
    pub const DECISION_SUPERSEDE: &str = "decision.supersede";
    pub const POD_MIGRATION_ABORT: &str = "pod-migration.abort";
    pub const PROFILE_AUTO_APPROVE: &str = "profile.auto-approve";
    pub const ARBITRATION_PUT: &str = "arbitration.put";
    pub const ARBITRATION_DELETE: &str = "arbitration.delete";
    pub const RETENTION_PUT: &str = "retention.put";
    pub const WEBHOOK_CREATE: &str = "webhook.create";
    pub const WEBHOOK_DELETE: &str = "webhook.delete";
    pub const WEBHOOK_ENABLE: &str = "webhook.enable";

    /// Every action the API records (docs/api.md lists them; a test compares).
    pub const ALL: &[&str] = &[
        SNAPSHOT_PUSH,
        CLUSTER_DELETE,
        POLICY_UPLOAD,
        POLICY_DELETE,
        PROFILE_PUT,
        PROFILE_DELETE,
        PROFILE_AUTO_APPROVE,
        RUN_CREATE,
        SCHEDULE_CREATE,
        SCHEDULE_UPDATE,
        SCHEDULE_DELETE,
        TOKEN_CREATE,
        TOKEN_DELETE,
        DECISION_APPROVE,
        DECISION_REJECT,
        DECISION_SUPERSEDE,
        POD_MIGRATION_ABORT,
        ARBITRATION_PUT,
        ARBITRATION_DELETE,
        RETENTION_PUT,
        WEBHOOK_CREATE,
        WEBHOOK_DELETE,
        WEBHOOK_ENABLE,
    ];
}

/// Object kinds.
pub mod kind {
    pub const POLICY: &str = "policy";
    pub const PROFILE: &str = "profile";
    pub const CLUSTER: &str = "cluster";
    pub const RUN: &str = "run";
    pub const TOKEN: &str = "token";
    pub const SCHEDULE: &str = "schedule";
    pub const DECISION: &str = "decision";
    pub const POD_MIGRATION: &str = "pod-migration";
    pub const RETENTION: &str = "retention";
    pub const WEBHOOK: &str = "webhook";
}

/// Append one audit entry per object (`(object id, detail)`), all by `actor` doing `action`,
/// in one transaction: what [`record`] does for each, without a write per entry (a bulk
/// approval of thousands of decisions).
pub async fn record_many(
    store: &Store,
    actor: &Principal,
    action: &'static str,
    object_kind: &'static str,
    objects: Vec<(String, Option<Value>)>,
) {
    if objects.is_empty() {
        return;
    }
    let store = store.clone();
    let actor = actor.clone();
    let write = async move {
        let entries: Vec<NewAuditEntry<'_>> = objects
            .iter()
            .map(|(id, detail)| NewAuditEntry {
                actor_id: actor.id,
                actor_name: &actor.name,
                actor_role: actor.role.as_str(),
                action,
                object_kind,
                object_id: Some(id),
                detail: detail.as_ref(),
            })
            .collect();
        if let Err(e) = store.insert_audit_batch(&entries).await {
            tracing::error!(
                error = %e,
                actor = %actor.name,
                action,
                object_kind,
                entries = entries.len(),
                "could not write audit log entries"
            );
        }
    };
    // A task of its own, as in `record`.
    if let Err(e) = tokio::spawn(write).await {
        tracing::error!(error = %e, action, "the audit log task failed");
    }
}

/// Append an audit entry: `actor` did `action` to the object `object_kind`/`object_id`, with
/// optional `detail` (a JSON object: a comment, counts…). Call it after the change has been
/// committed. Never fails the request: a failure to write is logged as an error.
///
/// ```ignore
/// audit::record(&store, &actor, action::DECISION_APPROVE, kind::DECISION, &id.to_string(),
///               Some(json!({"comment": comment}))).await;
/// ```
pub async fn record(
    store: &Store,
    actor: &Principal,
    action: &'static str,
    object_kind: &'static str,
    object_id: &str,
    detail: Option<Value>,
) {
    let store = store.clone();
    let actor = actor.clone();
    let object_id = object_id.to_string();
    let write = async move {
        let written = store
            .insert_audit(&NewAuditEntry {
                actor_id: actor.id,
                actor_name: &actor.name,
                actor_role: actor.role.as_str(),
                action,
                object_kind,
                object_id: Some(&object_id),
                detail: detail.as_ref(),
            })
            .await;
        if let Err(e) = written {
            tracing::error!(
                error = %e,
                actor = %actor.name,
                action,
                object_kind,
                object_id,
                "could not write an audit log entry"
            );
        }
    };
    // A task of its own, so a client that disconnects now does not cut the entry off. Not
    // `InFlight::detached`: callers are often inside a detached task already, and taking the
    // shutdown guard twice could wait forever behind a shutdown that waits for the caller.
    if let Err(e) = tokio::spawn(write).await {
        tracing::error!(error = %e, action, "the audit log task failed");
    }
}
