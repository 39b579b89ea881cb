//! Clusters: snapshot push (a Kubernetes `List`, JSON or YAML), list, get, nodes with
//! utilization, pods.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::AppState;
use super::auth::Actor;
use super::error::{ApiError, ErrorBody};
use super::extract::{
    ApiPath, ApiQuery, DocumentFormat, check_declared_length, document_format, read_body_limited,
};
use super::page::{Page, cursor_number, invalid_cursor};
use super::timestamp;
use crate::audit::{self, action, kind};
use crate::ingest::{IngestFailure, check_name};
use rebalancer_cluster::{self as cluster, ClusterSnapshot, IngestWarning, NodeUtilization};
use rebalancer_store::{ClusterDeletion, ClusterRecord};

/// The body of a snapshot push, as the OpenAPI document describes it (the server reads the
/// List itself, item by item; this type only documents it). Other top-level fields
/// (`apiVersion`, `metadata`) are ignored, whatever they hold.
#[derive(serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
pub struct SnapshotList {
    /// `List`, or any kind ending in `List` (`PodList`…); a single object is refused.
    #[schema(pattern = "List$", nullable = false)]
    kind: Option<String>,
    /// Every object of the cluster: Nodes, Pods, Namespaces, PodDisruptionBudgets,
    /// PriorityClasses, PersistentVolumeClaims, controllers and Koordinator's objects. Kinds
    /// the server does not model are counted and ignored.
    #[schema(schema_with = snapshot_items_schema)]
    items: Vec<serde_json::Value>,
}

/// `items` of a [`SnapshotList`]: objects, each with its `kind` and `metadata.name` (the rest
/// of an object is Kubernetes' own schema, checked at ingest: names by kind, quantities,
/// references between objects).
fn snapshot_items_schema() -> utoipa::openapi::schema::Array {
    use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, Type};
    let metadata = ObjectBuilder::new()
        .schema_type(Type::Object)
        .required("name")
        .property(
            "name",
            ObjectBuilder::new()
                .schema_type(Type::String)
                .min_length(Some(1))
                .description(Some(
                    "The object's name, as Kubernetes' rules for its kind allow",
                )),
        );
    let item = ObjectBuilder::new()
        .schema_type(Type::Object)
        .required("kind")
        .property(
            "kind",
            ObjectBuilder::new()
                .schema_type(Type::String)
                .pattern(Some("^[A-Za-z][A-Za-z0-9]{0,62}$"))
                .description(Some(
                    "`Node`, `Pod`…: up to 63 ASCII letters and digits, from a letter",
                )),
        )
        .required("metadata")
        .property("metadata", metadata);
    ArrayBuilder::new().items(item).build()
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterView {
    pub name: String,
    /// `simulated`: the cluster lives in Rebalancer's database (pushed snapshots);
    /// `kubernetes`: a Kubernetes API server this server watches and acts on.
    pub backend: String,
    /// For clusters connected with `--kube-cluster`/`--in-cluster`: the API server, the
    /// connection's state and last sync, and who holds the cluster's Lease.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kubernetes: Option<crate::managed::KubeView>,
    /// Changes every time the state is replaced; 0 for a managed Kubernetes cluster this
    /// server has not synced yet (it is listed from the start, with `kubernetes` saying why).
    pub revision: i64,
    /// When the current state was taken (the clock policies see); null while a managed
    /// cluster has no revision.
    pub snapshot_time: Option<String>,
    pub nodes: i64,
    pub pods: i64,
    pub objects: i64,
    /// Objects by kind.
    pub counts: BTreeMap<String, u64>,
    /// Oddities kept from the last snapshot (a pod bound to a missing node, an unknown kind…).
    pub warnings: Vec<IngestWarning>,
    /// False when the stored state could not be rebuilt at start-up.
    pub loaded: bool,
    pub created_at: String,
    pub updated_at: String,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ClusterList {
    pub items: Vec<ClusterView>,
}

/// Milliseconds spent per ingest step.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct IngestTimings {
    /// Reading the request body.
    pub receive_ms: f64,
    /// Decoding the document into objects.
    pub parse_ms: f64,
    /// Building the compact snapshot policies read.
    pub build_ms: f64,
    /// Writing the objects to the database (one transaction).
    pub persist_ms: f64,
    pub total_ms: f64,
}

/// The outcome of a snapshot push.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotResult {
    #[serde(flatten)]
    pub cluster: ClusterView,
    /// True when this push created the cluster.
    pub created: bool,
    pub timings: IngestTimings,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct NodeList {
    pub items: Vec<NodeUtilization>,
}

/// A pod of a cluster's current snapshot.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodView {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// `spec.nodeName` ("" when unscheduled).
    pub node: String,
    pub phase: String,
    pub qos_class: String,
    /// Kind of the first ownerReference ("" for bare pods).
    pub owner_kind: String,
    pub priority: Option<i32>,
    /// Requested CPU, in millicores.
    pub cpu_request_millis: i64,
    /// Requested memory, in bytes.
    pub memory_request_bytes: i64,
    pub terminating: bool,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct PodList {
    pub items: Vec<PodView>,
    /// Pass as `cursor` to get the next page; null on the last page.
    pub next: Option<String>,
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotQuery {
    /// When the document was taken (RFC 3339), e.g. `2026-11-20T12:00:00Z`; default: now. The
    /// snapshot's time is what policies measure ages against (pod lifetimes, metric expiry), so
    /// a dump evaluates as of the moment it was recorded.
    #[param(format = DateTime)]
    pub observed_at: Option<String>,
    /// Accept a List without nodes and pods (it replaces the cluster's state with nothing).
    /// Without it, such a push is refused with 409 `empty_snapshot`: it is most often a
    /// failed `kubectl get` piped into the push.
    pub allow_empty: Option<bool>,
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PodQuery {
    /// Only pods bound to this node.
    pub node: Option<String>,
    /// Only pods of this namespace.
    pub namespace: Option<String>,
    /// Page size (default 100, at most 1000).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
    /// The `next` value of the previous page (`<revision>.<position>`).
    #[param(pattern = "^[0-9]{1,18}\\.[0-9]{1,18}$")]
    pub cursor: Option<String>,
}

fn view(state: &AppState, record: ClusterRecord) -> Result<ClusterView, ApiError> {
    let warnings: Vec<IngestWarning> = serde_json::from_value(record.warnings).map_err(|e| {
        ApiError::internal(&format!("stored warnings of cluster {}", record.name), e)
    })?;
    Ok(ClusterView {
        kubernetes: state.managed.view(&record.name),
        loaded: state.clusters.get(&record.name).is_some(),
        name: record.name,
        backend: record.backend,
        revision: record.revision,
        snapshot_time: Some(timestamp(record.snapshot_time_ms)),
        nodes: record.node_count,
        pods: record.pod_count,
        objects: record.object_count,
        counts: record.counts,
        warnings,
        created_at: timestamp(record.created_at),
        updated_at: timestamp(record.updated_at),
    })
}

/// A managed Kubernetes cluster that has no stored record yet (never synced by any run of this
/// server: first sync under way, or its API server unreachable): listed and readable from the
/// start, with no state (counts 0, revision 0, no snapshot time) and `kubernetes` saying why.
fn unsynced_view(state: &AppState, name: &str) -> Option<ClusterView> {
    let kubernetes = state.managed.view(name)?;
    let since = timestamp(state.managed.get(name)?.started_ms);
    Some(ClusterView {
        name: name.to_owned(),
        backend: crate::ingest::BACKEND_KUBERNETES.to_owned(),
        kubernetes: Some(kubernetes),
        revision: 0,
        snapshot_time: None,
        nodes: 0,
        pods: 0,
        objects: 0,
        counts: BTreeMap::new(),
        warnings: Vec::new(),
        loaded: false,
        created_at: since.clone(),
        updated_at: since,
    })
}

/// Replace a cluster's state with a Kubernetes `List` — exactly what
/// `kubectl get nodes,pods,pdb,namespaces,priorityclasses -A -o json` prints — sent as JSON or
/// YAML (`Content-Type: application/yaml`). Creates the cluster (backend `simulated`) when new.
/// The body is one List (`items` an array); its objects are validated as Kubernetes' API
/// server validates them (names, labels, annotations, quantities, budgets, uids). A List
/// without nodes and pods needs `allowEmpty=true`. At most --max-concurrent-snapshot-pushes
/// pushes are read and ingested at once; the others wait up to --snapshot-push-max-wait. The
/// replacement is atomic: when the document is refused, the previous state is untouched.
#[utoipa::path(put, path = "/api/v1/clusters/{name}/snapshot", tag = "clusters",
    params(("name" = String, Path, description = "Cluster name (1–63 of a-z 0-9 - . _, starting \
            and ending with a letter or digit)", min_length = 1, max_length = 63,
            pattern = "^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$"),
        SnapshotQuery),
    request_body(description = "One v1 List of the cluster's Kubernetes objects (what \
        `kubectl get nodes,pods,… -A -o json` prints), as JSON or as one YAML document",
        content((SnapshotList = "application/json"), (SnapshotList = "application/yaml"))),
    responses(
        (status = 201, description = "Cluster created", body = SnapshotResult),
        (status = 200, description = "State replaced", body = SnapshotResult),
        (status = 400, description = "Not JSON/YAML (`malformed_document`), not one List \
            (`not_a_list`), nested too deep (`document_too_deep`), a repeated key \
            (`duplicate_key`), a bad name (`invalid_name`, `invalid_path`) or a bad `observedAt` \
            (`invalid_observed_at`)", body = ErrorBody),
        (status = 409, description = "A Kubernetes cluster this server watches \
            (`cluster_is_live`), or a List without nodes and pods (`empty_snapshot`) without \
            `allowEmpty=true`", body = ErrorBody),
        (status = 413, description = "Over --snapshot-body-limit", body = ErrorBody),
        (status = 415, description = "Not application/json, application/yaml, \
            application/x-yaml or text/yaml", body = ErrorBody),
        (status = 422, description = "An object is invalid; the message names it and the field",
            body = ErrorBody),
        (status = 503, description = "No push slot came free within --snapshot-push-max-wait \
            (`snapshot_pushes_busy`); retry after `Retry-After` seconds", body = ErrorBody),
    ))]
pub async fn put_snapshot(
    State(state): State<AppState>,
    actor: Actor,
    ApiPath(name): ApiPath<String>,
    ApiQuery(query): ApiQuery<SnapshotQuery>,
    headers: HeaderMap,
    body: Body,
) -> Result<(StatusCode, Json<SnapshotResult>), ApiError> {
    let observed_at_ms = query
        .observed_at
        .as_deref()
        .map(|text| {
            cluster::parse_time_ms(text).ok_or_else(|| {
                ApiError::bad_request(
                    "invalid_observed_at",
                    format!(
                        "observedAt {text:?} is not an RFC 3339 time (e.g. 2026-11-20T12:00:00Z)"
                    ),
                )
            })
        })
        .transpose()?;
    if let Some(view) = state.managed.view(&name) {
        return Err(ApiError::conflict(
            "cluster_is_live",
            format!(
                "cluster \"{name}\" is a Kubernetes cluster this server watches ({}); its state \
                 comes from the API server, so snapshots cannot be pushed to it",
                view.api_server
            ),
        ));
    }
    check_name(&name).map_err(|reason| IngestFailure::InvalidName {
        name: name.clone(),
        reason,
    })?;
    let format = match document_format(&headers)? {
        DocumentFormat::Json => cluster::Format::Json,
        DocumentFormat::Yaml => cluster::Format::Yaml,
    };
    let limit = state.settings.snapshot_body_limit;
    // Everything that can be refused without the body is, before the push takes a slot.
    check_declared_length(&headers, limit, "snapshot")?;
    let slot = state.snapshot_pushes.admit().await?;
    let started = std::time::Instant::now();
    let bytes = read_body_limited(&headers, body, limit, "snapshot").await?;
    let receive_ms = started.elapsed().as_secs_f64() * 1000.0;
    let allow_empty = query.allow_empty.unwrap_or(false);
    let ingest = {
        let state = state.clone();
        async move {
            // Held until the ingest is over, even when the client goes away.
            let _slot = slot;
            state
                .ingest
                .snapshot_allowing_empty(&name, bytes, format, observed_at_ms, allow_empty)
                .await
        }
    };
    let outcome = state
        .in_flight
        .detached(ingest)
        .await
        .map_err(|e| ApiError::internal("snapshot ingest task failed", e))??;
    let status = if outcome.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let record = &outcome.record;
    audit::record(
        &state.store,
        &actor,
        action::SNAPSHOT_PUSH,
        kind::CLUSTER,
        &record.name,
        Some(json!({
            "created": outcome.created,
            "revision": record.revision,
            "nodes": record.node_count,
            "pods": record.pod_count,
            "objects": record.object_count,
        })),
    )
    .await;
    Ok((
        status,
        Json(SnapshotResult {
            created: outcome.created,
            timings: IngestTimings {
                receive_ms,
                parse_ms: outcome.parse_ms,
                build_ms: outcome.build_ms,
                persist_ms: outcome.persist_ms,
                total_ms: receive_ms + outcome.total_ms,
            },
            cluster: view(&state, outcome.record)?,
        }),
    ))
}

/// What deleting a cluster removed.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterDeleted {
    pub name: String,
    /// Stored objects of its state.
    pub objects: i64,
    /// Policy state scopes that went with it (cooldowns, LowNodeLoad's detectors…).
    pub policy_state_scopes: i64,
    /// Ids of the schedules that ran profiles on it, deleted.
    pub schedules_deleted: Vec<i64>,
    /// Its open proposals, marked expired.
    pub decisions_expired: u64,
    /// Whether it had arbitration knobs of its own (they went with it).
    pub arbitration_config_deleted: bool,
}

/// Delete a pushed cluster: its state, its policy state (cooldowns, detectors), its own
/// arbitration knobs and the schedules that run on it; its open proposals are marked expired. Runs, decisions and pod
/// migrations stay, as history under the cluster's name. Refused for a Kubernetes cluster this
/// server watches (remove it from `--kube-cluster` instead) and while one of its pod
/// migrations is unfinished.
#[utoipa::path(delete, path = "/api/v1/clusters/{name}", tag = "clusters",
    params(("name" = String, Path, description = "Cluster name")),
    responses(
        (status = 200, description = "Deleted", body = ClusterDeleted),
        (status = 400, description = "`name` is not valid UTF-8 (`invalid_path`)", body = ErrorBody),
        (status = 404, description = "No such cluster (`not_found`)", body = ErrorBody),
        (status = 409, description = "A watched Kubernetes cluster (`cluster_is_live`), or pod \
            migrations in flight (`pod_migrations_in_flight`, their ids in `details`)",
            body = ErrorBody),
    ))]
pub async fn delete_cluster(
    State(state): State<AppState>,
    actor: Actor,
    ApiPath(name): ApiPath<String>,
) -> Result<Json<ClusterDeleted>, ApiError> {
    if let Some(view) = state.managed.view(&name) {
        return Err(ApiError::conflict(
            "cluster_is_live",
            format!(
                "cluster \"{name}\" is a Kubernetes cluster this server watches ({}); remove it \
                 from the server's --kube-cluster settings instead",
                view.api_server
            ),
        ));
    }
    let delete = {
        let (state, name, actor) = (state.clone(), name.clone(), actor.name.clone());
        async move {
            let executor = &state.pod_migrations.executor;
            let _knobs = executor.knobs_lock().await;
            let outcome = state.ingest.delete_cluster(&name, &actor).await?;
            if let ClusterDeletion::Deleted(d) = &outcome
                && d.arbitration_config
            {
                executor.set_cluster_config(&name, None);
            }
            Ok::<_, rebalancer_store::StoreError>(outcome)
        }
    };
    let outcome = state
        .in_flight
        .detached(delete)
        .await
        .map_err(|e| ApiError::internal("cluster deletion task failed", e))??;
    let deleted = match outcome {
        ClusterDeletion::Deleted(d) => d,
        ClusterDeletion::MigrationsInFlight(ids) => {
            return Err(ApiError::conflict(
                "pod_migrations_in_flight",
                format!(
                    "cluster \"{name}\" has {} unfinished pod migration(s) ({}); wait for them \
                     or abort them first",
                    ids.len(),
                    ids.iter()
                        .map(i64::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )
            .with_details(json!({ "podMigrations": ids })));
        }
    };
    let body = ClusterDeleted {
        name: name.clone(),
        objects: deleted.objects,
        policy_state_scopes: deleted.policy_state_scopes,
        schedules_deleted: deleted.schedules,
        decisions_expired: deleted.expired_decisions,
        arbitration_config_deleted: deleted.arbitration_config,
    };
    audit::record(
        &state.store,
        &actor,
        action::CLUSTER_DELETE,
        kind::CLUSTER,
        &name,
        Some(serde_json::to_value(&body).unwrap_or_default()),
    )
    .await;
    Ok(Json(body))
}

/// List clusters: every stored one, and every managed Kubernetes cluster from the start (with
/// revision 0 and no counts until its first sync), ordered by name.
#[utoipa::path(get, path = "/api/v1/clusters", tag = "clusters",
    responses((status = 200, description = "Every cluster", body = ClusterList)))]
pub async fn list_clusters(State(state): State<AppState>) -> Result<Json<ClusterList>, ApiError> {
    let mut items = state
        .store
        .list_clusters()
        .await?
        .into_iter()
        .map(|r| view(&state, r))
        .collect::<Result<Vec<_>, _>>()?;
    // Managed clusters are listed from the start, synced or not.
    for name in state.managed.names() {
        if !items.iter().any(|c| c.name == name)
            && let Some(v) = unsynced_view(&state, &name)
        {
            items.push(v);
        }
    }
    items.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(Json(ClusterList { items }))
}

/// One cluster. A managed Kubernetes cluster is found from the start, synced or not.
#[utoipa::path(get, path = "/api/v1/clusters/{name}", tag = "clusters",
    params(("name" = String, Path, description = "Cluster name")),
    responses(
        (status = 200, description = "The cluster", body = ClusterView),
        (status = 400, description = "`name` is not valid UTF-8 (`invalid_path`)", body = ErrorBody),
        (status = 404, description = "No such cluster (`not_found`)", body = ErrorBody),
    ))]
pub async fn get_cluster(
    State(state): State<AppState>,
    ApiPath(name): ApiPath<String>,
) -> Result<Json<ClusterView>, ApiError> {
    match state.store.get_cluster(&name).await {
        Ok(record) => Ok(Json(view(&state, record)?)),
        Err(e @ rebalancer_store::StoreError::NotFound { .. }) => unsynced_view(&state, &name)
            .map(Json)
            .ok_or_else(|| e.into()),
        Err(e) => Err(e.into()),
    }
}

/// The loaded snapshot of a cluster: 404 when the cluster does not exist, 503 for a managed
/// cluster with no revision yet, 409 when its stored state could not be loaded.
pub(super) async fn snapshot_of(
    state: &AppState,
    name: &str,
) -> Result<Arc<ClusterSnapshot>, ApiError> {
    if let Some(snapshot) = state.clusters.get(name) {
        return Ok(snapshot);
    }
    if let Some(why) = state.managed.syncing(name) {
        return Err(crate::trigger::RunFailure::ClusterSyncing {
            cluster: name.to_owned(),
            state: why,
        }
        .into());
    }
    state.store.get_cluster(name).await?;
    Err(ApiError::conflict(
        "cluster_not_loaded",
        format!(
            "the stored state of cluster \"{name}\" could not be loaded at start-up (see the \
             server log); push a new snapshot"
        ),
    ))
}

/// Nodes with their requested cpu, memory and pods, absolute and as a percentage of
/// allocatable (what LowNodeUtilization thresholds compare against), and, where the cluster
/// reports it (NodeMetric, else metrics.k8s.io), their measured usage as a percentage of raw
/// allocatable (what LowNodeLoad thresholds compare against).
#[utoipa::path(get, path = "/api/v1/clusters/{name}/nodes", tag = "clusters",
    params(("name" = String, Path, description = "Cluster name")),
    responses(
        (status = 200, description = "Every node of the current snapshot", body = NodeList),
        (status = 400, description = "`name` is not valid UTF-8 (`invalid_path`)", body = ErrorBody),
        (status = 404, description = "No such cluster (`not_found`)", body = ErrorBody),
        (status = 409, description = "The cluster's stored state is not loaded \
            (`cluster_not_loaded`)", body = ErrorBody),
        (status = 503, description = "The server is starting (`not_ready`), or a managed \
            Kubernetes cluster has no state yet (`cluster_syncing`); retry after `Retry-After` \
            seconds",
            headers(("Retry-After" = u32, description = "Seconds to wait before retrying")),
            body = ErrorBody),
    ))]
pub async fn list_nodes(
    State(state): State<AppState>,
    ApiPath(name): ApiPath<String>,
) -> Result<Json<NodeList>, ApiError> {
    let snapshot = snapshot_of(&state, &name).await?;
    let mut items =
        tokio::task::spawn_blocking(move || cluster::node_utilization(snapshot.cluster()))
            .await
            .map_err(|e| ApiError::internal("node utilization task failed", e))?;
    let mut reserved = state
        .backend
        .reserved(&name)
        .await
        .map_err(|e| ApiError::internal("reading the cluster's reservations failed", e))?;
    for node in &mut items {
        if let Some(amounts) = reserved.remove(&node.name) {
            node.reserved = amounts;
        }
    }
    Ok(Json(NodeList { items }))
}

/// Pods of the current snapshot, in snapshot order, optionally of one node and/or namespace.
#[utoipa::path(get, path = "/api/v1/clusters/{name}/pods", tag = "clusters",
    params(("name" = String, Path, description = "Cluster name"), PodQuery),
    responses(
        (status = 200, description = "One page of pods", body = PodList),
        (status = 400, description = "`name` is not valid UTF-8 (`invalid_path`), a query \
            parameter is not valid (`invalid_query`: e.g. a `limit` outside 1–1000), or the \
            cursor is not one this API returned (`invalid_cursor`)", body = ErrorBody),
        (status = 404, description = "No such cluster (`not_found`)", body = ErrorBody),
        (status = 409, description = "The cursor belongs to an older snapshot (`stale_cursor`), \
            or the cluster's stored state is not loaded (`cluster_not_loaded`)", body = ErrorBody),
        (status = 503, description = "The server is starting (`not_ready`), or a managed \
            Kubernetes cluster has no state yet (`cluster_syncing`); retry after `Retry-After` \
            seconds",
            headers(("Retry-After" = u32, description = "Seconds to wait before retrying")),
            body = ErrorBody),
    ))]
pub async fn list_pods(
    State(state): State<AppState>,
    ApiPath(name): ApiPath<String>,
    ApiQuery(query): ApiQuery<PodQuery>,
    page: Page,
) -> Result<Json<PodList>, ApiError> {
    let limit = page.limit as usize;
    let snapshot = snapshot_of(&state, &name).await?;
    let start = match page.cursor() {
        None => 0,
        Some(cursor) => {
            let (revision, index) = cursor
                .split_once('.')
                .and_then(|(r, i)| {
                    Some((cursor_number(r)?, usize::try_from(cursor_number(i)?).ok()?))
                })
                .ok_or_else(|| invalid_cursor(cursor))?;
            if revision != snapshot.revision {
                return Err(ApiError::conflict(
                    "stale_cursor",
                    format!(
                        "the cluster's state changed since this listing began (revision \
                         {revision} → {}); start again without a cursor",
                        snapshot.revision
                    ),
                ));
            }
            index
        }
    };
    let list = tokio::task::spawn_blocking(move || {
        pod_page(
            &snapshot,
            query.node.as_deref(),
            query.namespace.as_deref(),
            start,
            limit,
        )
    })
    .await
    .map_err(|e| ApiError::internal("pod listing task failed", e))?;
    Ok(Json(list))
}

fn pod_page(
    snapshot: &ClusterSnapshot,
    node: Option<&str>,
    namespace: Option<&str>,
    start: usize,
    limit: usize,
) -> PodList {
    let cluster = snapshot.cluster();
    let cpu = cluster.lookup("cpu");
    let memory = cluster.lookup("memory");
    let mut items = Vec::new();
    let mut next = None;
    for pod in cluster.pods().skip(start) {
        if node.is_some_and(|n| pod.node_name() != n)
            || namespace.is_some_and(|ns| pod.namespace() != ns)
        {
            continue;
        }
        if items.len() == limit {
            next = Some(format!("{}.{}", snapshot.revision, pod.id));
            break;
        }
        items.push(PodView {
            namespace: pod.namespace().to_string(),
            name: pod.name().to_string(),
            uid: pod.uid().to_string(),
            node: pod.node_name().to_string(),
            phase: format!("{:?}", pod.phase()),
            qos_class: format!("{:?}", pod.qos()),
            owner_kind: pod.owner_kind().to_string(),
            priority: pod.priority(),
            cpu_request_millis: cpu.map_or(0, |id| pod.request(id)),
            memory_request_bytes: memory.map_or(0, |id| pod.request(id) / 1000),
            terminating: pod.has_deletion_timestamp(),
        });
    }
    PodList { items, next }
}
