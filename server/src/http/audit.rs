//! The audit log, read-only: who did what to which object, when. Newest first. Retention
//! deletes its oldest entries after `--retain-audit`.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::error::{ApiError, ErrorBody};
use super::extract::ApiQuery;
use super::page::Page;
use super::timestamp;
use rebalancer_store::{AuditFilter, AuditRecord, Store};

/// One audit entry.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditEntry {
    pub id: i64,
    pub time: String,
    pub actor: AuditActor,
    /// `<object kind>.<verb>`: `policy.upload`, `policy.delete`, `profile.put`,
    /// `profile.delete`, `cluster.snapshot`, `cluster.delete`, `run.create`, `token.create`,
    /// `token.delete`, `schedule.create`, `schedule.update`, `schedule.delete`,
    /// `decision.approve`, `decision.reject`, `pod-migration.abort`.
    #[schema(example = "decision.approve")]
    pub action: String,
    pub object: AuditObject,
    /// Extra facts (a comment, counts…), or null.
    #[schema(value_type = Option<Object>)]
    pub detail: Option<Value>,
}

/// The token that acted (by value: it may have been deleted since).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct AuditActor {
    /// Null for the server itself.
    pub id: Option<i64>,
    pub name: String,
    pub role: String,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct AuditObject {
    #[schema(example = "decision")]
    pub kind: String,
    /// The object's id or name.
    #[schema(example = "42")]
    pub id: Option<String>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct AuditList {
    pub items: Vec<AuditEntry>,
    /// Pass as `cursor` to get the next (older) page; null on the last page.
    pub next: Option<String>,
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AuditQuery {
    /// Only entries of this token name.
    pub actor: Option<String>,
    /// Only this action, e.g. `decision.approve`.
    pub action: Option<String>,
    /// Only objects of this kind, e.g. `decision`.
    pub kind: Option<String>,
    /// Only this object id or name (with `kind`).
    pub object: Option<String>,
    /// Only entries at or after this time (RFC 3339, e.g. `2026-01-31T12:00:00Z`).
    #[param(format = DateTime)]
    pub since: Option<String>,
    /// Page size (default 100, at most 1000).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
    /// The `next` value of the previous page.
    #[param(pattern = "^[0-9]{1,18}$")]
    pub cursor: Option<String>,
}

fn entry(record: AuditRecord) -> AuditEntry {
    AuditEntry {
        id: record.id,
        time: timestamp(record.at),
        actor: AuditActor {
            id: record.actor_id,
            name: record.actor_name,
            role: record.actor_role,
        },
        action: record.action,
        object: AuditObject {
            kind: record.object_kind,
            id: record.object_id,
        },
        detail: record.detail,
    }
}

/// The audit log, newest first, filtered by actor, action, object and time.
#[utoipa::path(get, path = "/api/v1/audit", tag = "audit",
    params(AuditQuery),
    responses(
        (status = 200, description = "One page of entries, newest first", body = AuditList),
        (status = 400, description = "A query parameter is not valid (`invalid_query`: an \
            unknown parameter, a `since` that is not RFC 3339, a `limit` outside 1–1000), or the \
            cursor is not one this API returned (`invalid_cursor`)", body = ErrorBody),
    ))]
pub async fn list_audit(
    State(store): State<Store>,
    ApiQuery(query): ApiQuery<AuditQuery>,
    page: Page,
) -> Result<Json<AuditList>, ApiError> {
    let since = query
        .since
        .as_deref()
        .map(|text| {
            OffsetDateTime::parse(text, &Rfc3339)
                .map(|t| (t.unix_timestamp_nanos() / 1_000_000) as i64)
                .map_err(|e| {
                    ApiError::bad_request(
                        "invalid_query",
                        format!("since {text:?} is not an RFC 3339 time ({e}), e.g. 2026-01-31T12:00:00Z"),
                    )
                })
        })
        .transpose()?;
    let before = page.id_cursor()?;
    let filter = AuditFilter {
        actor: query.actor,
        action: query.action,
        object_kind: query.kind,
        object_id: query.object,
        since,
        before,
    };
    let (items, next) = store.list_audit(&filter, page.limit).await?;
    Ok(Json(AuditList {
        items: items.into_iter().map(entry).collect(),
        next: next.map(|id| id.to_string()),
    }))
}
