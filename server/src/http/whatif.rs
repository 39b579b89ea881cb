//! Cluster balance and what-if: `GET /clusters/{name}/balance` (per-node load and its spread
//! against a profile's thresholds) and `POST /clusters/{name}/what-if` (where the pods of a set
//! of decisions would land, and every node before and after).
//!
//! Owns selecting the decisions (ids, a filter or a run, at most [`MAX_MOVES`]), the profile
//! whose thresholds apply, and the reservations the backend holds now; the placement and the
//! figures are `rebalancer_cluster::whatif`'s, with the scheduler the simulated backend
//! reserves with. Both are reads: nothing is stored, reserved or audited.
//! Must not: hold SQL (the store does) or placement rules (the cluster crate does).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::AppState;
use super::clusters::snapshot_of;
use super::decisions::PodIdentity;
use super::error::{ApiError, ErrorBody, PayloadTooLarge, UnsupportedMediaType};
use super::extract::{ApiJson, ApiPath, ApiQuery};
use super::timestamp;
use crate::whatif::thresholds;
use rebalancer_cluster::ClusterSnapshot;
use rebalancer_cluster::scheduling::Held;
use rebalancer_cluster::whatif::{
    self, Balance, Landing, MoveRequest, NodeStat, Threshold, balance, node_stats,
};
use rebalancer_engine::profile::ProfileSpec;
use rebalancer_store::{DecisionFilter, DecisionRecord, DecisionStatus, StoreError};

/// At most this many decisions in one what-if.
pub const MAX_MOVES: usize = 10_000;

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct BalanceQuery {
    /// The profile whose balance thresholds (LowNodeUtilization, HighNodeUtilization,
    /// LowNodeLoad) apply; without it, `thresholds` is empty.
    #[param(
        pattern = "^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$",
        min_length = 1,
        max_length = 63
    )]
    pub profile: Option<String>,
}

/// A cluster's nodes and how evenly they are loaded.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BalanceView {
    pub cluster: String,
    /// The snapshot revision the figures are of.
    pub revision: u64,
    /// When that snapshot was taken.
    pub snapshot_time: String,
    /// Every node, in snapshot order.
    pub nodes: Vec<NodeStat>,
    /// The profile's thresholds, in document order; empty without `profile`.
    pub thresholds: Vec<Threshold>,
    /// Spread of the nodes' percentages, counted against the first threshold.
    pub summary: Balance,
}

/// Which decisions a what-if moves: a filter narrows the cluster's decisions by every field
/// given (none: all of them).
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WhatIfFilter {
    pub run: Option<i64>,
    pub plugin: Option<String>,
    pub namespace: Option<String>,
    /// The node the decisions were proposed on.
    pub node: Option<String>,
    pub profile: Option<String>,
    /// Case-insensitive substring of `namespace/name`.
    pub pod: Option<String>,
    pub status: Option<DecisionStatus>,
}

/// Exactly one of `decisions`, `filter` or `run`.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WhatIfRequest {
    /// Decision ids, placed in this order (a repeated id counts once).
    #[schema(max_items = 10000)]
    pub decisions: Option<Vec<i64>>,
    /// The cluster's decisions matching a filter, placed oldest first.
    pub filter: Option<WhatIfFilter>,
    /// Every decision of a run of this cluster, placed oldest first.
    pub run: Option<i64>,
    /// The profile whose thresholds apply; default: the profile of the first decision.
    #[schema(
        pattern = "^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$",
        min_length = 1,
        max_length = 63
    )]
    pub profile: Option<String>,
}

/// Where one decision's pod would go.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MoveView {
    /// The decision's id.
    pub decision: i64,
    pub pod: PodIdentity,
    /// The node the decision was proposed on.
    pub from: String,
    /// The node it would land on; null when it would not move.
    pub to: Option<String>,
    /// Why it would not move: `pod no longer exists`, the pod is now elsewhere or terminating,
    /// or `no node fits: 0/5 nodes are available: 1 node(s) excluded …, 4 Insufficient cpu.`;
    /// null when it moves.
    pub reason: Option<String>,
}

/// Every node, and their balance, on one side of the moves.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSide {
    pub nodes: Vec<NodeStat>,
    pub summary: Balance,
}

/// What the cluster would look like after the moves.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WhatIfView {
    pub cluster: String,
    /// The snapshot revision simulated.
    pub revision: u64,
    /// One per selected decision, in placement order.
    pub moves: Vec<MoveView>,
    pub before: ClusterSide,
    pub after: ClusterSide,
    /// The profile's thresholds the summaries count against.
    pub thresholds: Vec<Threshold>,
    /// Moves with no target (`to` null).
    pub unplaced: u64,
}

/// The thresholds of profile `name`; `None` when it does not exist.
async fn profile_thresholds(
    state: &AppState,
    name: &str,
) -> Result<Option<Vec<Threshold>>, ApiError> {
    let record = match state.store.get_profile(name).await {
        Ok(record) => record,
        Err(StoreError::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let spec: ProfileSpec = serde_json::from_value(record.spec)
        .map_err(|e| ApiError::internal(&format!("stored spec of profile {name}"), e))?;
    Ok(Some(thresholds(&spec)))
}

/// The thresholds of the profile a caller named: 404 when it does not exist.
async fn named_profile_thresholds(
    state: &AppState,
    name: &str,
) -> Result<Vec<Threshold>, ApiError> {
    profile_thresholds(state, name)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("profile \"{name}\" does not exist")))
}

/// Per-node load and balance of a cluster's current snapshot: requested cpu, memory and pods
/// against allocatable, measured usage where the cluster reports it (Koordinator's NodeMetric,
/// else metrics.k8s.io), and their spread (mean, standard deviation, extremes, nodes beyond the
/// profile's first threshold). Percentages are of allocatable; not-ready nodes are left out of
/// the summary.
#[utoipa::path(get, path = "/api/v1/clusters/{name}/balance", tag = "clusters",
    params(("name" = String, Path, description = "Cluster name"), BalanceQuery),
    responses(
        (status = 200, description = "Every node and the balance summary", body = BalanceView),
        (status = 400, description = "`name` is not valid UTF-8 (`invalid_path`) or a query \
            parameter is not valid (`invalid_query`)", body = ErrorBody),
        (status = 404, description = "No such cluster or profile (`not_found`)", body = ErrorBody),
        (status = 409, description = "The cluster's stored state is not loaded \
            (`cluster_not_loaded`)", body = ErrorBody),
        (status = 503, description = "The server is starting (`not_ready`), or a managed \
            Kubernetes cluster has no state yet (`cluster_syncing`); retry after `Retry-After` \
            seconds",
            headers(("Retry-After" = u32, description = "Seconds to wait before retrying")),
            body = ErrorBody),
    ))]
pub async fn get_balance(
    State(state): State<AppState>,
    ApiPath(name): ApiPath<String>,
    ApiQuery(query): ApiQuery<BalanceQuery>,
) -> Result<Json<BalanceView>, ApiError> {
    let snapshot = snapshot_of(&state, &name).await?;
    let thresholds = match &query.profile {
        Some(profile) => named_profile_thresholds(&state, profile).await?,
        None => Vec::new(),
    };
    let (nodes, summary, thresholds) = tokio::task::spawn_blocking({
        let snapshot = snapshot.clone();
        move || {
            let nodes = node_stats(snapshot.cluster());
            let summary = balance(&nodes, &thresholds);
            (nodes, summary, thresholds)
        }
    })
    .await
    .map_err(|e| ApiError::internal("balance task failed", e))?;
    Ok(Json(BalanceView {
        cluster: name,
        revision: snapshot.revision,
        snapshot_time: timestamp(snapshot.time_ms),
        nodes,
        thresholds,
        summary,
    }))
}

fn ids_text(ids: &[i64]) -> String {
    const SHOWN: usize = 20;
    let mut text = ids
        .iter()
        .take(SHOWN)
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    if ids.len() > SHOWN {
        text.push_str(&format!(" and {} more", ids.len() - SHOWN));
    }
    text
}

fn too_many(selected: &str) -> ApiError {
    ApiError::bad_request(
        "too_many_decisions",
        format!(
            "{selected} selects more than {MAX_MOVES} decisions; a what-if takes at most \
             {MAX_MOVES}: narrow the selection"
        ),
    )
    .with_details(json!({ "limit": MAX_MOVES }))
}

/// The decisions `request` selects on cluster `cluster`, in placement order.
async fn select(
    state: &AppState,
    cluster: &str,
    request: WhatIfRequest,
) -> Result<Vec<DecisionRecord>, ApiError> {
    let WhatIfRequest {
        decisions,
        filter,
        run,
        ..
    } = request;
    let given = [decisions.is_some(), filter.is_some(), run.is_some()]
        .iter()
        .filter(|&&g| g)
        .count();
    if given != 1 {
        return Err(ApiError::bad_request(
            "invalid_request",
            format!(
                "give exactly one of `decisions` (ids), `filter` or `run`; the body has {}",
                if given == 0 {
                    "none".to_owned()
                } else {
                    given.to_string()
                }
            ),
        ));
    }
    let store = &state.store;
    if let Some(ids) = decisions {
        let mut seen = HashSet::new();
        let ids: Vec<i64> = ids.into_iter().filter(|id| seen.insert(*id)).collect();
        if ids.len() > MAX_MOVES {
            return Err(too_many(&format!("`decisions` ({} ids)", ids.len())));
        }
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let filter = DecisionFilter {
            ids: Some(ids.clone()),
            ..DecisionFilter::default()
        };
        let (found, _) = store.list_decisions(&filter, MAX_MOVES as u32).await?;
        let mut by_id: HashMap<i64, DecisionRecord> =
            found.into_iter().map(|d| (d.id, d)).collect();
        let missing: Vec<i64> = ids
            .iter()
            .copied()
            .filter(|id| !by_id.contains_key(id))
            .collect();
        if !missing.is_empty() {
            return Err(ApiError::not_found(format!(
                "decision(s) {} do not exist",
                ids_text(&missing)
            ))
            .with_details(json!({ "missing": missing })));
        }
        let elsewhere: Vec<i64> = ids
            .iter()
            .copied()
            .filter(|id| by_id[id].cluster != cluster)
            .collect();
        if !elsewhere.is_empty() {
            let clusters: std::collections::BTreeSet<&str> = elsewhere
                .iter()
                .map(|id| by_id[id].cluster.as_str())
                .collect();
            return Err(ApiError::bad_request(
                "wrong_cluster",
                format!(
                    "decision(s) {} are of cluster(s) {}, not of cluster \"{cluster}\"",
                    ids_text(&elsewhere),
                    clusters.into_iter().collect::<Vec<_>>().join(", ")
                ),
            )
            .with_details(json!({ "otherCluster": elsewhere })));
        }
        return Ok(ids.iter().filter_map(|id| by_id.remove(id)).collect());
    }
    let (filter, pod, what) = match (run, filter) {
        (Some(run), _) => {
            let record = store.get_run(run).await?;
            if record.cluster != cluster {
                return Err(ApiError::bad_request(
                    "wrong_cluster",
                    format!(
                        "run {run} is of cluster \"{}\", not of cluster \"{cluster}\"",
                        record.cluster
                    ),
                ));
            }
            let filter = DecisionFilter {
                run: Some(run),
                cluster: Some(cluster.to_owned()),
                ..DecisionFilter::default()
            };
            (filter, None, format!("run {run}"))
        }
        (None, Some(f)) => {
            let filter = DecisionFilter {
                run: f.run,
                status: f.status,
                plugin: f.plugin,
                namespace: f.namespace,
                node: f.node,
                cluster: Some(cluster.to_owned()),
                profile: f.profile,
                ..DecisionFilter::default()
            };
            (filter, f.pod.map(|p| p.to_lowercase()), "the filter".into())
        }
        (None, None) => unreachable!("exactly one selector was checked above"),
    };
    // The pod search is a substring of `namespace/name`, matched here page by page.
    let mut selected = Vec::new();
    let mut filter = filter;
    loop {
        let (page, next) = store
            .list_decisions(&filter, (MAX_MOVES + 1) as u32)
            .await?;
        selected.extend(page.into_iter().filter(|d| {
            pod.as_deref().is_none_or(|p| {
                format!("{}/{}", d.pod_namespace, d.pod_name)
                    .to_lowercase()
                    .contains(p)
            })
        }));
        if selected.len() > MAX_MOVES {
            return Err(too_many(&what));
        }
        match next {
            Some(after) if pod.is_some() => filter.after = Some(after),
            Some(_) => return Err(too_many(&what)),
            None => return Ok(selected),
        }
    }
}

/// The reservations the backend holds now, as the scheduler counts them: per node, their
/// resources and one pod slot each (the backend reports sums, so no template pods).
async fn held(state: &AppState, cluster: &str, snapshot: &ClusterSnapshot) -> Vec<Held> {
    let reserved = match state.backend.reserved(cluster).await {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(cluster, error = %e, "what-if: reading the reservations failed; \
                placing without them");
            return Vec::new();
        }
    };
    let nodes: HashMap<&str, u32> = snapshot
        .cluster()
        .nodes()
        .map(|n| (n.name(), n.id))
        .collect();
    let mut held = Vec::new();
    for (name, amounts) in reserved {
        let Some(&node) = nodes.get(name.as_str()) else {
            continue;
        };
        for i in 0..amounts.pods.max(1) {
            held.push(Held {
                node,
                requests: if i == 0 {
                    vec![
                        ("cpu".into(), amounts.cpu_milli),
                        ("memory".into(), amounts.memory_bytes.saturating_mul(1000)),
                    ]
                } else {
                    Vec::new()
                },
                template_pod: None,
            });
        }
    }
    held
}

/// Where the pods of a set of decisions would land, placed in order by the scheduler the
/// simulated backend reserves with (node fit, taints, affinity, anti-affinity, readiness,
/// reservations held now; never the pod's own node), each placement holding its room for the
/// next as its reservation would; and every node's requested cpu, memory and pods — and
/// measured usage, where the cluster reports it and the pod's own usage is known — before and
/// after. A pod no longer in the snapshot, now on another node or terminating is listed with
/// `to: null` and why, as is a pod no node fits. A read: nothing is reserved or changed.
#[utoipa::path(post, path = "/api/v1/clusters/{name}/what-if", tag = "clusters",
    params(("name" = String, Path, description = "Cluster name")),
    request_body = WhatIfRequest,
    responses(
        (status = 200, description = "The moves and the cluster before and after",
            body = WhatIfView),
        (status = 400, description = "`name` is not valid UTF-8 (`invalid_path`), the body is \
            not JSON (`invalid_json`) or gives not exactly one of `decisions`, `filter`, `run` \
            (`invalid_request`), a decision or the run is of another cluster (`wrong_cluster`), \
            or more than 10,000 decisions are selected (`too_many_decisions`)",
            body = ErrorBody),
        (status = 404, description = "No such cluster, profile or run, or decision ids that do \
            not exist (`not_found`, `details.missing`)", body = ErrorBody),
        (status = 409, description = "The cluster's stored state is not loaded \
            (`cluster_not_loaded`)", body = ErrorBody),
        (status = 413, response = PayloadTooLarge),
        (status = 415, response = UnsupportedMediaType),
        (status = 422, description = "The body does not match the schema (`invalid_request`: \
            a field of the wrong type, an unknown field)", body = ErrorBody),
        (status = 503, description = "The server is starting (`not_ready`), or a managed \
            Kubernetes cluster has no state yet (`cluster_syncing`); retry after `Retry-After` \
            seconds",
            headers(("Retry-After" = u32, description = "Seconds to wait before retrying")),
            body = ErrorBody),
    ))]
pub async fn what_if(
    State(state): State<AppState>,
    ApiPath(name): ApiPath<String>,
    ApiJson(request): ApiJson<WhatIfRequest>,
) -> Result<Json<WhatIfView>, ApiError> {
    let snapshot = snapshot_of(&state, &name).await?;
    let profile = request.profile.clone();
    let decisions = select(&state, &name, request).await?;
    let thresholds = match profile {
        Some(profile) => named_profile_thresholds(&state, &profile).await?,
        // The decisions' profile, unless it has been deleted since.
        None => match decisions.first() {
            Some(d) => profile_thresholds(&state, &d.profile)
                .await?
                .unwrap_or_default(),
            None => Vec::new(),
        },
    };
    let held = held(&state, &name, &snapshot).await;
    let computed = tokio::task::spawn_blocking({
        let snapshot: Arc<ClusterSnapshot> = snapshot.clone();
        move || {
            let requests: Vec<MoveRequest<'_>> = decisions
                .iter()
                .map(|d| MoveRequest {
                    pod_uid: &d.pod_uid,
                    from: &d.node,
                })
                .collect();
            let index = snapshot.index();
            let result = whatif::what_if(snapshot.cluster(), &index, &held, &requests);
            let before = balance(&result.before, &thresholds);
            let after = balance(&result.after, &thresholds);
            let moves: Vec<MoveView> = decisions
                .into_iter()
                .zip(result.landings)
                .map(|(d, landing)| {
                    let (to, reason) = match landing {
                        Landing::Node(node) => (Some(node), None),
                        Landing::Nowhere(why) => (None, Some(why)),
                    };
                    MoveView {
                        decision: d.id,
                        pod: PodIdentity {
                            namespace: d.pod_namespace,
                            name: d.pod_name,
                            uid: d.pod_uid,
                        },
                        from: d.node,
                        to,
                        reason,
                    }
                })
                .collect();
            let unplaced = moves.iter().filter(|m| m.to.is_none()).count() as u64;
            WhatIfView {
                cluster: String::new(),
                revision: snapshot.revision,
                moves,
                before: ClusterSide {
                    nodes: result.before,
                    summary: before,
                },
                after: ClusterSide {
                    nodes: result.after,
                    summary: after,
                },
                thresholds,
                unplaced,
            }
        }
    })
    .await
    .map_err(|e| ApiError::internal("what-if task failed", e))?;
    Ok(Json(WhatIfView {
        cluster: name,
        ..computed
    }))
}
