//! Decisions: every proposal of every run (filtered, sorted, paginated with a keyset cursor,
//! counted), approving and rejecting them one by one or by filter (with a preview), and the
//! auto-approve rules of a profile.
//!
//! Owns: the decision list's opaque cursor ([`encode_cursor`]/[`decode_cursor`]: base64url of
//! the store's [`DecisionCursor`]) and the JSON shapes of this resource.
//! Must not: hold SQL (`store::decisions`, `store::transitions`) or approval rules
//! (`approval`).

use axum::Json;
use axum::extract::State;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::AppState;
use super::auth::Actor;
use super::error::{ApiError, ErrorBody, PayloadTooLarge, UnsupportedMediaType};
use super::extract::{ApiJson, ApiPath, ApiQuery, RawBody, decode_json};
use super::page::{Page, invalid_cursor};
use super::timestamp;
use crate::approval::{self, AutoApproveRule, AutoApproveRules, BulkVerb, RuleError};
use crate::audit::{self, kind};
use crate::in_flight::InFlight;
use crate::strict_json::Object;
use rebalancer_store::{
    BulkOutcome, CursorKey, DecisionCursor, DecisionEvent, DecisionFilter, DecisionRecord,
    DecisionSort, DecisionStatus, MigrationFilter, Store,
};

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct PodIdentity {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

/// A proposed pod move and what has become of it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DecisionView {
    pub id: i64,
    /// `proposed → approved | rejected | expired | superseded`, then `approved → executing →
    /// succeeded | failed`. `superseded`: a later run proposed the same pod again for the same
    /// profile and cluster (`supersededBy`); only that newer decision can be acted on.
    pub status: DecisionStatus,
    /// Why it ended where it did (e.g. `stale: pod shop/web-1 (uid …) no longer exists`), for
    /// expired, rejected, superseded and failed decisions.
    pub status_reason: Option<String>,
    /// The newer decision for the same pod (same profile and cluster) that superseded this
    /// one; null unless `superseded`. It may have been deleted by retention since.
    pub superseded_by: Option<i64>,
    /// Proposed by a dry run: never approvable.
    pub dry_run: bool,
    pub pod: PodIdentity,
    /// The node the pod was on when proposed.
    pub node: String,
    /// The policy (plugin) that proposed it.
    pub plugin: String,
    /// The DeschedulerPolicy `profiles[]` entry it came from.
    pub plugin_set: String,
    /// Our profile's name.
    pub profile: String,
    pub cluster: String,
    /// Why, in words.
    pub reason: String,
    /// The run that proposed it.
    pub run: i64,
    pub created_at: String,
    pub updated_at: String,
}

/// One status change: who moved the decision, when, with what comment.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DecisionTransition {
    pub time: String,
    pub from: DecisionStatus,
    pub to: DecisionStatus,
    /// A token name, `auto-approve:<rule>`, `system:expiry`, `system:supersede` or
    /// `system:executor`.
    pub actor: String,
    pub comment: Option<String>,
}

/// A decision with its history and its pod migration.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DecisionDetail {
    #[serde(flatten)]
    pub decision: DecisionView,
    /// Every status change, oldest first.
    pub history: Vec<DecisionTransition>,
    /// The pod migration executing it, once approved (`GET /api/v1/pod-migrations/{id}`).
    pub pod_migration: Option<i64>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DecisionList {
    pub items: Vec<DecisionView>,
    /// Pass as `cursor` (with the same `sort` and filters) to get the next page; null on the
    /// last page.
    pub next: Option<String>,
    /// How many decisions match the filters (whatever `cursor` and `limit`).
    pub total: u64,
}

/// Longest cursor the list hands out or takes (the sort keys are names of at most 253
/// characters each, base64-encoded).
pub const DECISION_CURSOR_MAX: usize = 2048;

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DecisionQuery {
    /// Only the decisions of this run.
    pub run: Option<i64>,
    /// Only decisions in this status.
    pub status: Option<DecisionStatus>,
    /// Only proposals of this plugin.
    pub plugin: Option<String>,
    /// Only pods in this namespace.
    pub namespace: Option<String>,
    /// Only pods proposed on this node.
    pub node: Option<String>,
    /// Only this cluster.
    pub cluster: Option<String>,
    /// Only this profile.
    pub profile: Option<String>,
    /// Only pods whose `namespace/name` contains this (case-insensitive).
    #[param(example = "shop/web")]
    pub pod: Option<String>,
    /// The order: `newest` (default) or `oldest` first; or by `namespace` (then pod name),
    /// `pod` (name, then namespace), `node`, `plugin` or `status` (proposed, approved,
    /// executing, succeeded, failed, rejected, expired, superseded), newest first among equals.
    #[param(inline)]
    pub sort: Option<DecisionSort>,
    /// Page size (default 100, at most 1000).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
    /// The `next` value of the previous page, asked with the same `sort` (opaque).
    #[param(pattern = "^[A-Za-z0-9_-]{1,2048}$", max_length = 2048)]
    pub cursor: Option<String>,
}

/// The wire form of a cursor: `[sort, id, keys…]`.
#[derive(Serialize, Deserialize)]
struct WireCursor(DecisionSort, i64, Vec<CursorKey>);

/// The opaque `next` of a page.
pub fn encode_cursor(cursor: &DecisionCursor) -> String {
    let wire = WireCursor(cursor.sort, cursor.id, cursor.keys.clone());
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(&wire).unwrap_or_default())
}

/// A `cursor` read back: one [`encode_cursor`] made for a list in `sort` order, or a 400
/// (`invalid_cursor`) saying what is wrong with it.
pub fn decode_cursor(text: &str, sort: DecisionSort) -> Result<DecisionCursor, ApiError> {
    let refuse = |why: String| {
        let mut err = invalid_cursor(text);
        err.message = format!("{}: {why}", err.message);
        err
    };
    if text.is_empty() || text.len() > DECISION_CURSOR_MAX {
        return Err(refuse(format!(
            "a decision cursor has 1 to {DECISION_CURSOR_MAX} characters"
        )));
    }
    let bytes = URL_SAFE_NO_PAD
        .decode(text)
        .map_err(|_| refuse("pass the `next` of the previous page as it is".into()))?;
    let WireCursor(cursor_sort, id, keys) = serde_json::from_slice(&bytes)
        .map_err(|_| refuse("pass the `next` of the previous page as it is".into()))?;
    let cursor = DecisionCursor {
        sort: cursor_sort,
        keys,
        id,
    };
    cursor.check(sort).map_err(|e| {
        refuse(format!(
            "{e}; ask the next page with the sort of the page that gave it"
        ))
    })?;
    Ok(cursor)
}

pub(crate) fn view(d: DecisionRecord) -> DecisionView {
    DecisionView {
        id: d.id,
        status: d.status,
        status_reason: d.status_reason,
        superseded_by: d.superseded_by,
        dry_run: d.dry_run,
        pod: PodIdentity {
            namespace: d.pod_namespace,
            name: d.pod_name,
            uid: d.pod_uid,
        },
        node: d.node,
        plugin: d.plugin,
        plugin_set: d.plugin_set,
        profile: d.profile,
        cluster: d.cluster,
        reason: d.reason,
        run: d.run_id,
        created_at: timestamp(d.created_at),
        updated_at: timestamp(d.updated_at),
    }
}

fn transition(e: DecisionEvent) -> DecisionTransition {
    DecisionTransition {
        time: timestamp(e.time),
        from: e.from,
        to: e.to,
        actor: e.actor,
        comment: e.comment,
    }
}

async fn detail(store: &Store, d: DecisionRecord) -> Result<DecisionDetail, ApiError> {
    let history = store.decision_events(d.id).await?;
    let (migrations, _) = store
        .list_pod_migrations(
            &MigrationFilter {
                decision: Some(d.id),
                ..MigrationFilter::default()
            },
            1,
        )
        .await?;
    Ok(DecisionDetail {
        decision: view(d),
        history: history.into_iter().map(transition).collect(),
        pod_migration: migrations.first().map(|m| m.id),
    })
}

/// Decisions matching the filters, newest first unless `sort` says otherwise, with how many
/// match in all.
#[utoipa::path(get, path = "/api/v1/decisions", tag = "decisions",
    params(DecisionQuery),
    responses(
        (status = 200, description = "One page of decisions and the total matching", body = DecisionList),
        (status = 400, description = "A query parameter is not valid (`invalid_query`: e.g. an \
            unknown `status` or `sort`, a `limit` outside 1–1000), or the cursor is not one this \
            API returned for this `sort` (`invalid_cursor`)", body = ErrorBody),
    ))]
pub async fn list_decisions(
    State(store): State<Store>,
    ApiQuery(query): ApiQuery<DecisionQuery>,
    page: Page,
) -> Result<Json<DecisionList>, ApiError> {
    let sort = query.sort.unwrap_or_default();
    let after = page.cursor().map(|c| decode_cursor(c, sort)).transpose()?;
    let filter = DecisionFilter {
        run: query.run,
        status: query.status,
        plugin: query.plugin,
        namespace: query.namespace,
        node: query.node,
        cluster: query.cluster,
        profile: query.profile,
        pod: query.pod,
        ids: None,
    };
    let (items, next) = store
        .list_decisions(&filter, sort, after.as_ref(), page.limit)
        .await?;
    let total = store.count_decisions(&filter).await?;
    Ok(Json(DecisionList {
        items: items.into_iter().map(view).collect(),
        next: next.as_ref().map(encode_cursor),
        total,
    }))
}

/// One decision, with every status change (who, when, comment) and its pod migration.
#[utoipa::path(get, path = "/api/v1/decisions/{id}", tag = "decisions",
    params(("id" = i64, Path, description = "Decision id")),
    responses(
        (status = 200, description = "The decision with its history", body = DecisionDetail),
        (status = 400, description = "`id` is not an integer (`invalid_path`)", body = ErrorBody),
        (status = 404, description = "No such decision (`not_found`)", body = ErrorBody),
    ))]
pub async fn get_decision(
    State(store): State<Store>,
    ApiPath(id): ApiPath<i64>,
) -> Result<Json<DecisionDetail>, ApiError> {
    let d = store.get_decision(id).await?;
    Ok(Json(detail(&store, d).await?))
}

/// Optional body of approve and reject.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DecisionComment {
    /// Recorded with the status change and in the audit log.
    #[schema(example = "moving off the hot node before the sale")]
    pub comment: Option<String>,
}

/// The comment of an optional JSON body: an empty body, `null` and `{}` mean none. Any
/// Content-Type is read as JSON (so `curl -d` works as it is).
pub(super) fn comment_body(body: &[u8]) -> Result<Option<String>, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let parsed: Option<Object<DecisionComment>> = decode_json(body, |e| {
        let code = if e.is_data() {
            "invalid_request"
        } else {
            "invalid_json"
        };
        ApiError::bad_request(
            code,
            format!("the body must be empty, null or {{\"comment\": \"...\"}}: {e}"),
        )
    })?;
    Ok(parsed.and_then(|Object(p)| p.comment))
}

/// A decision's comment: a blank one is none.
fn comment_of(body: &[u8]) -> Result<Option<String>, ApiError> {
    Ok(comment_body(body)?.filter(|c| !c.trim().is_empty()))
}

/// Approve a proposed decision: its pod migration is created at once (exactly one, however
/// many approvals race) and the executor starts it when arbitration allows. A proposal past
/// the proposal TTL is marked `expired` instead (409).
#[utoipa::path(post, path = "/api/v1/decisions/{id}/approve", tag = "decisions",
    params(("id" = i64, Path, description = "Decision id")),
    request_body(content = Option<DecisionComment>, description = "Optional comment (any \
        Content-Type; an empty body or null means none)"),
    responses(
        (status = 200, description = "Approved: the decision, now `approved`", body = DecisionDetail),
        (status = 400, description = "`id` is not an integer (`invalid_path`), or the body is \
            not JSON (`invalid_json`) or not a comment object (`invalid_request`)", body = ErrorBody),
        (status = 404, description = "No such decision (`not_found`)", body = ErrorBody),
        (status = 409, description = "Superseded by a newer proposal for the same pod \
            (`superseded`: the message names it, `details.supersededBy` is its id), not \
            `proposed` (`not_proposed`: details.status says what it is, e.g. `expired` past the \
            proposal TTL), or proposed by a dry run (`dry_run`)", body = ErrorBody),
        (status = 413, response = PayloadTooLarge),
    ))]
pub async fn approve_decision(
    State(deps): State<approval::Deps>,
    State(in_flight): State<InFlight>,
    actor: Actor,
    ApiPath(id): ApiPath<i64>,
    RawBody(body): RawBody,
) -> Result<Json<DecisionDetail>, ApiError> {
    let comment = comment_of(&body)?;
    let approved = in_flight
        .detached({
            let deps = deps.clone();
            async move { approval::approve(&deps, id, &actor, comment).await }
        })
        .await
        .map_err(|e| ApiError::internal("approval task failed", e))??;
    Ok(Json(detail(&deps.store, approved.decision).await?))
}

/// Reject a proposed decision.
#[utoipa::path(post, path = "/api/v1/decisions/{id}/reject", tag = "decisions",
    params(("id" = i64, Path, description = "Decision id")),
    request_body(content = Option<DecisionComment>, description = "Optional comment (any \
        Content-Type; an empty body or null means none)"),
    responses(
        (status = 200, description = "Rejected: the decision, now `rejected`", body = DecisionDetail),
        (status = 400, description = "`id` is not an integer (`invalid_path`), or the body is \
            not JSON (`invalid_json`) or not a comment object (`invalid_request`)", body = ErrorBody),
        (status = 404, description = "No such decision (`not_found`)", body = ErrorBody),
        (status = 409, description = "Superseded by a newer proposal for the same pod \
            (`superseded`: the message names it, `details.supersededBy` is its id), or not \
            `proposed` (`not_proposed`: details.status says what it is)", body = ErrorBody),
        (status = 413, response = PayloadTooLarge),
    ))]
pub async fn reject_decision(
    State(deps): State<approval::Deps>,
    State(in_flight): State<InFlight>,
    actor: Actor,
    ApiPath(id): ApiPath<i64>,
    RawBody(body): RawBody,
) -> Result<Json<DecisionDetail>, ApiError> {
    let comment = comment_of(&body)?;
    let decision = in_flight
        .detached({
            let deps = deps.clone();
            async move { approval::reject(&deps, id, &actor, comment).await }
        })
        .await
        .map_err(|e| ApiError::internal("rejection task failed", e))??;
    Ok(Json(detail(&deps.store, decision).await?))
}

/// Which decisions a bulk approval or rejection takes: every filter field given narrows; at
/// least one is needed.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BulkDecisionRequest {
    pub run: Option<i64>,
    pub plugin: Option<String>,
    pub namespace: Option<String>,
    pub node: Option<String>,
    pub cluster: Option<String>,
    pub profile: Option<String>,
    /// Pods whose `namespace/name` contains this (case-insensitive).
    pub pod: Option<String>,
    /// Explicit decision ids.
    pub ids: Option<Vec<i64>>,
    /// Recorded with every status change and in the audit log.
    pub comment: Option<String>,
    /// Change nothing: answer what would happen, with a sample of what would be acted on.
    pub preview: Option<bool>,
}

/// What a bulk approval did (or, with `preview`, would do).
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BulkApproveResult {
    /// Decisions matching the filter, whatever their status.
    pub matched: u64,
    /// Approved by this call, each with its pod migration (would be, in a preview).
    pub approved: u64,
    /// Proposals past the proposal TTL, marked expired instead (would be, in a preview).
    pub expired: u64,
    /// Proposals of dry runs (never approvable), left alone.
    pub dry_run: u64,
    /// Matched but not `proposed` (approved, rejected, superseded… before), left alone.
    pub not_proposed: u64,
    /// Ids of the decisions approved (would be, in a preview), newest first.
    pub ids: Vec<i64>,
    /// Whether this was a preview (nothing changed).
    pub preview: bool,
    /// Up to 50 of the decisions approved (would be, in a preview), newest first, as they are
    /// now.
    pub sample: Vec<DecisionView>,
}

/// What a bulk rejection did (or, with `preview`, would do).
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BulkRejectResult {
    /// Decisions matching the filter, whatever their status.
    pub matched: u64,
    /// Rejected by this call (would be, in a preview).
    pub rejected: u64,
    /// Proposals past the proposal TTL, marked expired instead (would be, in a preview).
    pub expired: u64,
    /// Proposals of dry runs, left alone.
    pub dry_run: u64,
    /// Matched but not `proposed` (approved, rejected, superseded… before), left alone.
    pub not_proposed: u64,
    /// Ids of the decisions rejected (would be, in a preview), newest first.
    pub ids: Vec<i64>,
    /// Whether this was a preview (nothing changed).
    pub preview: bool,
    /// Up to 50 of the decisions rejected (would be, in a preview), newest first, as they are
    /// now.
    pub sample: Vec<DecisionView>,
}

/// Check a bulk request and act on it (or preview).
async fn bulk(
    deps: approval::Deps,
    in_flight: InFlight,
    actor: Actor,
    request: BulkDecisionRequest,
    verb: BulkVerb,
) -> Result<(BulkOutcome, bool), ApiError> {
    let filter = DecisionFilter {
        run: request.run,
        status: None,
        plugin: request.plugin,
        namespace: request.namespace,
        node: request.node,
        cluster: request.cluster,
        profile: request.profile,
        pod: request.pod,
        ids: request.ids,
    };
    if filter.run.is_none()
        && filter.plugin.is_none()
        && filter.namespace.is_none()
        && filter.node.is_none()
        && filter.cluster.is_none()
        && filter.profile.is_none()
        && filter.pod.is_none()
        && filter.ids.is_none()
    {
        let what = match verb {
            BulkVerb::Approve => "approving",
            BulkVerb::Reject => "rejecting",
        };
        return Err(ApiError::bad_request(
            "invalid_request",
            format!(
                "give at least one of run, plugin, namespace, node, cluster, profile, pod or \
                 ids: {what} every proposal at once needs an explicit filter"
            ),
        ));
    }
    let comment = request.comment.filter(|c| !c.trim().is_empty());
    let preview = request.preview.unwrap_or(false);
    let outcome = in_flight
        .detached(async move {
            approval::act_on_matching(&deps, &filter, verb, &actor, comment, preview).await
        })
        .await
        .map_err(|e| ApiError::internal("bulk decision task failed", e))??;
    Ok((outcome, preview))
}

/// Approve every proposed decision matching a filter (`run`, `plugin`, `namespace`, `node`,
/// `cluster`, `profile`, `pod`, `ids`), in one transaction; each gets its pod migration. Only
/// proposals of non-dry runs within the proposal TTL are approved (older ones are marked
/// expired). With `preview: true` nothing changes and the answer says what would.
#[utoipa::path(post, path = "/api/v1/decisions/approve", tag = "decisions",
    request_body = BulkDecisionRequest,
    responses(
        (status = 200, description = "What was (or would be) approved, expired or left", body = BulkApproveResult),
        (status = 400, description = "The body is not JSON (`invalid_json`), or gives no \
            filter field (`invalid_request`)", body = ErrorBody),
        (status = 413, response = PayloadTooLarge),
        (status = 415, response = UnsupportedMediaType),
        (status = 422, description = "The body does not match the schema (`invalid_request`: \
            a field of the wrong type, an unknown field)", body = ErrorBody),
    ))]
pub async fn approve_decisions(
    State(deps): State<approval::Deps>,
    State(in_flight): State<InFlight>,
    actor: Actor,
    ApiJson(request): ApiJson<BulkDecisionRequest>,
) -> Result<Json<BulkApproveResult>, ApiError> {
    let (outcome, preview) = bulk(deps, in_flight, actor, request, BulkVerb::Approve).await?;
    Ok(Json(BulkApproveResult {
        matched: outcome.matched,
        approved: outcome.acted.len() as u64,
        expired: outcome.expired,
        dry_run: outcome.dry_run,
        not_proposed: outcome.not_proposed,
        ids: outcome.acted,
        preview,
        sample: outcome.sample.into_iter().map(view).collect(),
    }))
}

/// Reject every proposed decision matching a filter (`run`, `plugin`, `namespace`, `node`,
/// `cluster`, `profile`, `pod`, `ids`), in one transaction, with an optional comment. Only
/// proposals of non-dry runs within the proposal TTL are rejected (older ones are marked
/// expired). With `preview: true` nothing changes and the answer says what would.
#[utoipa::path(post, path = "/api/v1/decisions/reject", tag = "decisions",
    request_body = BulkDecisionRequest,
    responses(
        (status = 200, description = "What was (or would be) rejected, expired or left", body = BulkRejectResult),
        (status = 400, description = "The body is not JSON (`invalid_json`), or gives no \
            filter field (`invalid_request`)", body = ErrorBody),
        (status = 413, response = PayloadTooLarge),
        (status = 415, response = UnsupportedMediaType),
        (status = 422, description = "The body does not match the schema (`invalid_request`: \
            a field of the wrong type, an unknown field)", body = ErrorBody),
    ))]
pub async fn reject_decisions(
    State(deps): State<approval::Deps>,
    State(in_flight): State<InFlight>,
    actor: Actor,
    ApiJson(request): ApiJson<BulkDecisionRequest>,
) -> Result<Json<BulkRejectResult>, ApiError> {
    let (outcome, preview) = bulk(deps, in_flight, actor, request, BulkVerb::Reject).await?;
    Ok(Json(BulkRejectResult {
        matched: outcome.matched,
        rejected: outcome.acted.len() as u64,
        expired: outcome.expired,
        dry_run: outcome.dry_run,
        not_proposed: outcome.not_proposed,
        ids: outcome.acted,
        preview,
        sample: outcome.sample.into_iter().map(view).collect(),
    }))
}

/// A profile's auto-approve rules.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AutoApproveView {
    pub profile: String,
    /// Checked in order; the first match approves.
    pub rules: Vec<AutoApproveRule>,
    /// When the rules were last replaced; null when never set.
    pub updated_at: Option<String>,
}

/// The auto-approve rules of a profile (empty when none were set).
#[utoipa::path(get, path = "/api/v1/profiles/{name}/auto-approve", tag = "decisions",
    params(("name" = String, Path, description = "Profile name")),
    responses(
        (status = 200, description = "The profile's rules", body = AutoApproveView),
        (status = 400, description = "`name` is not valid UTF-8 (`invalid_path`)", body = ErrorBody),
        (status = 404, description = "No such profile (`not_found`)", body = ErrorBody),
    ))]
pub async fn get_auto_approve(
    State(store): State<Store>,
    ApiPath(name): ApiPath<String>,
) -> Result<Json<AutoApproveView>, ApiError> {
    store.get_profile(&name).await?;
    let stored = store.auto_approve_rules(&name).await?;
    let rules = approval::rules_of(&store, &name).await?;
    Ok(Json(AutoApproveView {
        profile: name,
        rules: rules.rules,
        updated_at: stored.map(|(_, at)| timestamp(at)),
    }))
}

/// Replace the auto-approve rules of a profile. After every run of the profile, each of its
/// proposals that matches a rule (plugin, namespace, pod label selector; first match wins) is
/// approved by `auto-approve:<rule>`. Dry runs are never auto-approved. `{"rules": []}` turns
/// auto-approval off.
#[utoipa::path(put, path = "/api/v1/profiles/{name}/auto-approve", tag = "decisions",
    params(("name" = String, Path, description = "Profile name")),
    request_body = AutoApproveRules,
    responses(
        (status = 200, description = "The rules, replaced", body = AutoApproveView),
        (status = 400, description = "`name` is not valid UTF-8 (`invalid_path`), or the body \
            is not JSON (`invalid_json`)", body = ErrorBody),
        (status = 404, description = "No such profile (`not_found`)", body = ErrorBody),
        (status = 413, response = PayloadTooLarge),
        (status = 415, response = UnsupportedMediaType),
        (status = 422, description = "A rule cannot work (`invalid_rules`: a duplicate name, a \
            label selector that is not valid; `details.errors` lists every problem), or the \
            body does not match the schema (`invalid_request`)", body = ErrorBody),
    ))]
pub async fn put_auto_approve(
    State(state): State<AppState>,
    actor: Actor,
    ApiPath(name): ApiPath<String>,
    ApiJson(rules): ApiJson<AutoApproveRules>,
) -> Result<Json<AutoApproveView>, ApiError> {
    let errors: Vec<RuleError> = rules.validate();
    if !errors.is_empty() {
        return Err(ApiError::field_problems(
            "invalid_rules",
            "the auto-approve rules",
            &errors,
        ));
    }
    let json = serde_json::to_value(&rules)
        .map_err(|e| ApiError::internal("serialising auto-approve rules", e))?;
    let work = {
        let state = state.clone();
        async move {
            let at = state.store.put_auto_approve_rules(&name, &json).await?;
            audit::record(
                &state.store,
                &actor,
                crate::audit::action::PROFILE_AUTO_APPROVE,
                kind::PROFILE,
                &name,
                Some(json!({"autoApprove": json})),
            )
            .await;
            Ok::<_, ApiError>(Json(AutoApproveView {
                profile: name,
                rules: rules.rules,
                updated_at: Some(timestamp(at)),
            }))
        }
    };
    state
        .in_flight
        .detached(work)
        .await
        .map_err(|e| ApiError::internal("auto-approve storage task failed", e))?
}
