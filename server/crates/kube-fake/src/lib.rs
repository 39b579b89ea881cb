//! An in-process fake Kubernetes API server, faithful enough on the wire that kube-rs's real
//! client (`kube::Client`, `kube::Api`, `kube::runtime::watcher`, `Recorder`, `Discovery`) works
//! against it over plain HTTP on 127.0.0.1. Rebalancer's Kubernetes backend is tested against
//! it, and the `rebalancer-kube-fake` binary serves a bulk-loaded cluster for benchmarks.
//!
//! [`FakeApiServer`] is the handle: it starts the server, and lets a test read and write objects
//! directly (each write emitting watch events), forget watch history, send bookmarks, simulate
//! connection loss, script evictions, drive the kubelet stand-in and node heartbeats, register
//! RBAC-restricted service accounts, and inspect what the client did.
//!
//! Served always: core v1 `nodes`, `pods` (+ `pods/eviction`, `pods/status`), `namespaces`,
//! `persistentvolumeclaims`, `events`; `policy/v1 poddisruptionbudgets`;
//! `scheduling.k8s.io/v1 priorityclasses`; `coordination.k8s.io/v1 leases`;
//! `events.k8s.io/v1 events`; plus the [`OptionalGroup`]s enabled. Core and `events.k8s.io`
//! events are two separate stores (no conversion between them).
//!
//! As strict as a real server where a client can trip: graceful deletion of pods bound to a node
//! (`deletionTimestamp`, a second delete only shortens the grace; the [`Kubelet`] stand-in
//! removes them, 300 ms after the delete by default) and finalizers holding any kind;
//! the eviction subresource's rules (`canIgnorePDB`, so a terminating pod is evicted again with
//! 201; budgets not yet processed, negative, or with an empty selector; unready pods);
//! AlreadyExists; each registry's field selector keys (400 for others); update rules that keep
//! `deletionTimestamp`, `generation` (kept for PodDisruptionBudgets and custom kinds) and
//! forbid new finalizers on an object being deleted; bearer tokens and RBAC from a manifest
//! ([`FakeApiServer::add_service_account`]).
//!
//! Where it knowingly differs from a real server:
//! - the in-process [`FakeApiServer::delete`] removes at once (a force delete), whatever the
//!   grace period or finalizers; in-process [`FakeApiServer::apply`] and
//!   [`FakeApiServer::set_status`] write what they are given (no update rules) and a pod
//!   given a `deletionTimestamp` that way is not finished by the kubelet stand-in;
//! - deleting a namespace does not delete its contents, and namespaces have no
//!   `spec.finalizers`; no garbage collection of dependents (`ownerReferences`,
//!   `propagationPolicy` are ignored);
//! - a pod without `spec.terminationGracePeriodSeconds` gets 30 s (the real server defaults the
//!   field on creation; the fake does not write it into the pod);
//! - the kubelet stand-in only deletes: no container status or phase changes while a pod
//!   terminates;
//! - requests without a token, and with `fake-token`, are allowed everything (a real server
//!   would treat the first as `system:anonymous`); RBAC knows only the roles of the manifests
//!   given (no built-in roles but discovery, no aggregated ClusterRoles, no Users or Groups
//!   beyond the service account's own);
//! - strategic merge patch is applied as a JSON merge patch (lists replaced, no `$patch`
//!   directives); server-side apply merges the configuration like a merge patch, with a
//!   simplified per-leaf field ownership that yields 409 conflicts between managers but no
//!   `metadata.managedFields`;
//! - paged lists are not a consistent snapshot: later pages show current objects, every page
//!   reports the first page's resourceVersion so a watch from it replays what changed meanwhile;
//! - watch history keeps 200,000 events per resource type; bookmarks are sent only on
//!   [`FakeApiServer::bookmark`], not periodically;
//! - `metadata.generation` is kept only for PodDisruptionBudgets and custom kinds; admission
//!   and validation are not modelled (beyond the update rules above); namespaces need not
//!   exist;
//! - node heartbeats happen only on [`FakeApiServer::heartbeat_nodes`] or after
//!   [`FakeApiServer::start_heartbeats`], and do not renew node Leases;
//! - while [`FakeApiServer::set_down`] is on, connections are accepted and closed at once.
//!
//! Two things of kube-rs 5 that tests meet here as against a real server: its default retry
//! layer (`Config::default_retry`) retries 429, 503 and 504 up to 15 times with exponential
//! backoff, so an eviction refused by a PDB takes a long time to fail unless it is turned off;
//! and `Api::evict` sends its options as `delete_options`, which the server drops with a
//! `Warning` (a UID precondition must go in a hand-built `policy/v1` Eviction sent with
//! `Api::create_subresource("eviction", ..)`).
//!
//! Modules: `resources` (the resource table and discovery), `http` (accept loop, routing,
//! authentication, handlers, rendering), `rbac` (tokens, manifests, authorization), `store`
//! (objects, history, watches, deletion), `object` (stored-object layout and bulk loading),
//! `ownership` (server-side apply field managers), `eviction`, `kubelet` (the kubelet
//! stand-in and heartbeats), `patch`, `selector`, `status` (error `Status` objects).

mod eviction;
mod http;
mod kubelet;
mod object;
mod ownership;
mod patch;
mod rbac;
mod resources;
mod selector;
mod status;
mod store;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use eviction::{EvictionOutcome, EvictionRecord};
pub use kubelet::Kubelet;

use crate::http::Shared;

/// API groups served only when enabled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OptionalGroup {
    /// `metrics.k8s.io/v1beta1` `nodes` and `pods` (NodeMetrics, PodMetrics): get and list only,
    /// no watch, like metrics-server.
    Metrics,
    /// `slo.koordinator.sh/v1alpha1` `nodemetrics`, cluster-scoped, with a status subresource.
    NodeMetric,
    /// `topology.node.k8s.io/v1alpha1` `noderesourcetopologies`, cluster-scoped.
    NodeResourceTopology,
    /// `scheduling.koordinator.sh/v1alpha1` `reservations`, cluster-scoped, with a status
    /// subresource.
    Reservation,
}

impl FromStr for OptionalGroup {
    type Err = String;

    /// `metrics`, `nodemetric`, `noderesourcetopology` (or `nrt`), `reservation`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s.trim().to_ascii_lowercase().as_str() {
            "metrics" => OptionalGroup::Metrics,
            "nodemetric" | "nodemetrics" => OptionalGroup::NodeMetric,
            "noderesourcetopology" | "noderesourcetopologies" | "nrt" => {
                OptionalGroup::NodeResourceTopology
            }
            "reservation" | "reservations" => OptionalGroup::Reservation,
            other => {
                return Err(format!(
                    "unknown group {other:?} (expected metrics, nodemetric, noderesourcetopology or reservation)"
                ));
            }
        })
    }
}

/// One kind of request served, in RBAC terms: verb (`get`, `list`, `watch`, `create`, `update`,
/// `patch`, `delete`, `deletecollection`), API group (`""` for core), resource and subresource
/// (`""` if none).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Access {
    pub verb: String,
    pub group: String,
    pub resource: String,
    pub subresource: String,
}

struct Handle {
    shared: Arc<Shared>,
    /// Dropping it (with the last handle) stops the server task and the background tasks.
    stop: watch::Sender<()>,
    task: Mutex<Option<JoinHandle<()>>>,
    /// The kubelet stand-in and heartbeats.
    background: Mutex<Vec<JoinHandle<()>>>,
}

/// A running fake API server. Clones share the server; it stops when the last clone is dropped
/// or on [`FakeApiServer::shutdown`].
#[derive(Clone)]
pub struct FakeApiServer {
    handle: Arc<Handle>,
}

impl std::fmt::Debug for FakeApiServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeApiServer")
            .field("url", &self.url())
            .finish()
    }
}

fn type_id(api_version: &str, kind: &str) -> resources::TypeId {
    resources::by_kind(api_version, kind).unwrap_or_else(|| {
        panic!("kube-fake does not serve kind {kind:?} of apiVersion {api_version:?}")
    })
}

impl FakeApiServer {
    /// Starts a server on `127.0.0.1` on a free port, serving the core groups only.
    ///
    /// # Panics
    /// If no port can be bound.
    pub async fn start() -> FakeApiServer {
        FakeApiServer::start_with(&[]).await
    }

    /// Starts a server on `127.0.0.1` on a free port, serving the core groups and `groups`.
    ///
    /// # Panics
    /// If no port can be bound.
    pub async fn start_with(groups: &[OptionalGroup]) -> FakeApiServer {
        FakeApiServer::bind(SocketAddr::from(([127, 0, 0, 1], 0)), groups)
            .await
            .unwrap_or_else(|e| panic!("kube-fake cannot bind 127.0.0.1: {e}"))
    }

    /// Starts a server on `addr` (the binary's `--port`).
    pub async fn bind(
        addr: SocketAddr,
        groups: &[OptionalGroup],
    ) -> std::io::Result<FakeApiServer> {
        let listener = TcpListener::bind(addr).await?;
        let shared = Arc::new(Shared::new(listener.local_addr()?, groups));
        let (stop, stopped) = watch::channel(());
        let kubelet = tokio::spawn(kubelet::run(shared.clone(), stop.subscribe()));
        let task = tokio::spawn(http::serve(listener, shared.clone(), stopped));
        Ok(FakeApiServer {
            handle: Arc::new(Handle {
                shared,
                stop,
                task: Mutex::new(Some(task)),
                background: Mutex::new(vec![kubelet]),
            }),
        })
    }

    fn shared(&self) -> &Shared {
        &self.handle.shared
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.shared().addr)
    }

    /// A kubeconfig whose cluster, user and context are all named `context` (the current
    /// context), pointing at [`url`](Self::url) with the bearer token `fake-token`, which is
    /// allowed everything.
    pub fn kubeconfig(&self, context: &str) -> String {
        self.kubeconfig_with_token(context, rbac::ADMIN_TOKEN)
    }

    /// [`kubeconfig`](Self::kubeconfig) with another bearer token, e.g. one registered with
    /// [`add_service_account`](Self::add_service_account).
    pub fn kubeconfig_with_token(&self, context: &str, token: &str) -> String {
        let config = json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": context, "cluster": {"server": self.url()}}],
            "users": [{"name": context, "user": {"token": token}}],
            "contexts": [{"name": context, "context": {"cluster": context, "user": context, "namespace": "default"}}],
            "current-context": context,
        });
        serde_yaml::to_string(&config).unwrap_or_default()
    }

    /// Serves an optional group from now on (discovery shows it).
    pub fn enable_group(&self, group: OptionalGroup) {
        let mut enabled = self
            .shared()
            .enabled
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !enabled.contains(&group) {
            enabled.push(group);
        }
    }

    /// Creates or replaces an object (by `apiVersion`, `kind`, namespace and name; a missing
    /// namespace of a namespaced kind is `default`), emitting ADDED or MODIFIED. The server
    /// assigns `resourceVersion`, and `uid`, `creationTimestamp` and a `generateName` name when
    /// missing (a replaced object keeps its uid). Returns the stored object.
    ///
    /// # Panics
    /// If the kind is not one the fake knows, or the object has no name nor generateName.
    pub fn apply(&self, object: Value) -> Value {
        let api_version = object
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
        let tid = type_id(api_version, kind);
        match self.shared().store.put(tid, object) {
            Ok(stored) => stored.value(),
            Err(e) => panic!("kube-fake cannot apply the object: {e}"),
        }
    }

    /// Bulk-loads the objects of a kubectl `List` (JSON; a scenario file `{"objects": List}` is
    /// accepted too), each stored as bytes and emitting a watch event. Items of kinds the fake
    /// does not serve are skipped (logged). Returns how many objects were loaded.
    ///
    /// # Panics
    /// If the document is not a JSON list.
    pub fn load_list(&self, list: &[u8]) -> usize {
        self.try_load_list(list)
            .unwrap_or_else(|e| panic!("kube-fake cannot load the list: {e}"))
    }

    /// [`load_list`](Self::load_list), with an error instead of a panic.
    pub fn try_load_list(&self, list: &[u8]) -> Result<usize, String> {
        let items = object::list_items(list)?;
        let (loaded, skipped) = self.shared().store.load(&items);
        if let Some(first) = skipped.first() {
            tracing::warn!(
                "kube-fake skipped {} list items it cannot serve, the first because: {first}",
                skipped.len()
            );
        }
        Ok(loaded)
    }

    /// The stored object, if any (`namespace` is ignored for cluster-scoped kinds).
    ///
    /// # Panics
    /// If the kind is not one the fake knows.
    pub fn get(&self, api_version: &str, kind: &str, namespace: &str, name: &str) -> Option<Value> {
        let tid = type_id(api_version, kind);
        let ns = store::namespace_of(&resources::RESOURCES[tid], namespace);
        self.shared().store.get(tid, ns, name).map(|o| o.value())
    }

    /// All stored objects of a kind, ordered by namespace and name.
    ///
    /// # Panics
    /// If the kind is not one the fake knows.
    pub fn list(&self, api_version: &str, kind: &str) -> Vec<Value> {
        let tid = type_id(api_version, kind);
        self.shared()
            .store
            .all(tid)
            .iter()
            .map(|o| o.value())
            .collect()
    }

    /// Removes an object at once (emitting DELETED), whatever its finalizers or grace period:
    /// tests use it for "the object is gone" (a force delete). Returns its final state.
    ///
    /// # Panics
    /// If the kind is not one the fake knows.
    pub fn delete(
        &self,
        api_version: &str,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> Option<Value> {
        let tid = type_id(api_version, kind);
        self.shared()
            .store
            .take(tid, namespace, name)
            .map(|o| o.value())
    }

    /// Replaces `.status` of an object (emitting MODIFIED if it changed). Returns `false` if
    /// there is no such object.
    ///
    /// # Panics
    /// If the kind is not one the fake knows.
    pub fn set_status(
        &self,
        api_version: &str,
        kind: &str,
        namespace: &str,
        name: &str,
        status: Value,
    ) -> bool {
        let tid = type_id(api_version, kind);
        self.shared().store.set_status(tid, namespace, name, status)
    }

    /// Forgets watch history, like an etcd compaction: a watch resuming from an older
    /// resourceVersion gets one ERROR event with a 410 Expired Status and ends; a list with an
    /// older `resourceVersion` and `resourceVersionMatch=Exact`, or an older continue token,
    /// gets HTTP 410. Open watches are not affected.
    pub fn compact(&self) {
        self.shared().store.compact();
    }

    /// Sends a BOOKMARK at the current resourceVersion to every open watch that asked for
    /// bookmarks (`allowWatchBookmarks=true`).
    pub fn bookmark(&self) {
        self.shared().store.bookmark();
    }

    /// Connection loss: while down, open connections (watch streams included) are cut and
    /// new connections are closed without an answer. In-process calls keep working.
    pub fn set_down(&self, down: bool) {
        self.shared().down.send_replace(down);
    }

    /// Makes every eviction of this pod answer `outcome` until scripted again;
    /// [`EvictionOutcome::Default`] restores the real behaviour.
    pub fn script_eviction(&self, namespace: &str, name: &str, outcome: EvictionOutcome) {
        self.shared().evictions.script(namespace, name, outcome);
    }

    /// Every eviction request so far, in order.
    pub fn evictions(&self) -> Vec<EvictionRecord> {
        self.shared().evictions.records()
    }

    /// How many evictions succeeded (201) whose target pod had this uid when they were made.
    /// More than one is a double eviction (an eviction of a pod already terminating succeeds
    /// again on a real server).
    pub fn evictions_of(&self, uid: &str) -> usize {
        self.evictions()
            .iter()
            .filter(|r| r.status == 201 && r.uid.as_deref() == Some(uid))
            .count()
    }

    /// Every stored `events.k8s.io/v1` Event whose `regarding.uid`, and every core v1 Event
    /// whose `involvedObject.uid`, is `uid`.
    pub fn events_about(&self, uid: &str) -> Vec<Value> {
        let mut out = Vec::new();
        for (api_version, pointer) in [
            ("events.k8s.io/v1", "/regarding/uid"),
            ("v1", "/involvedObject/uid"),
        ] {
            out.extend(
                self.list(api_version, "Event")
                    .into_iter()
                    .filter(|e| e.pointer(pointer).and_then(Value::as_str) == Some(uid)),
            );
        }
        out
    }

    /// How the kubelet stand-in finishes pods in graceful termination from now on (default
    /// [`Kubelet::After`] 300 ms). Pods already terminating follow the new mode.
    pub fn set_kubelet(&self, kubelet: Kubelet) {
        *self
            .shared()
            .kubelet
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = kubelet;
        self.shared().store.lock().kubelet_wake.notify_one();
    }

    /// Finishes the graceful termination of a pod now, as its kubelet would (a delete with
    /// grace 0): emits DELETED and returns `true`, unless there is no such pod, it is not
    /// terminating, or finalizers still hold it (then it stays with
    /// `deletionGracePeriodSeconds` 0 until an update empties them).
    pub fn finish_termination(&self, namespace: &str, name: &str) -> bool {
        self.shared()
            .store
            .finish_termination(namespace, name, None)
    }

    /// A node status heartbeat, as every kubelet sends: each node's
    /// `status.conditions[*].lastHeartbeatTime` becomes now (nothing else changes), emitting
    /// MODIFIED at a new resourceVersion. Nodes without conditions are left alone. Returns how
    /// many nodes were updated.
    pub fn heartbeat_nodes(&self) -> usize {
        self.shared().store.heartbeat_nodes()
    }

    /// [`heartbeat_nodes`](Self::heartbeat_nodes) every `interval`, until the server stops.
    pub fn start_heartbeats(&self, interval: Duration) {
        let task = tokio::spawn(kubelet::heartbeats(
            self.handle.shared.clone(),
            interval,
            self.handle.stop.subscribe(),
        ));
        self.handle
            .background
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(task);
    }

    /// Every (verb, group, resource, subresource) requested so far, failures included.
    /// Discovery and other non-resource paths are not recorded.
    pub fn accesses(&self) -> BTreeSet<Access> {
        self.shared()
            .accesses
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Registers service account `namespace/name` with bearer `token`, authorized from now on
    /// by the RBAC rules an RBAC manifest (a YAML stream of ClusterRoles, Roles,
    /// ClusterRoleBindings and RoleBindings) binds to it, like Kubernetes RBAC; denied requests
    /// answer the real 403. Registering the token again replaces its grants. Tokens nobody
    /// registered answer 401; no token and `fake-token` are allowed everything.
    ///
    /// # Errors
    /// A manifest that does not parse, or that binds the account to a role it does not define,
    /// with the document at fault.
    pub fn add_service_account(
        &self,
        namespace: &str,
        name: &str,
        token: &str,
        rbac_yaml: &str,
    ) -> Result<(), String> {
        if token == rbac::ADMIN_TOKEN || token.is_empty() {
            return Err(format!(
                "service account {namespace}/{name}: the token {token:?} is reserved (it is the unrestricted user's)"
            ));
        }
        let principal = rbac::principal(namespace, name, rbac_yaml)
            .map_err(|e| format!("service account {namespace}/{name}: {e}"))?;
        self.shared()
            .accounts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(token.to_string(), Arc::new(principal));
        Ok(())
    }

    /// Every request RBAC denied so far (403), in order, with its namespace (`""` when
    /// cluster-scoped).
    pub fn denied(&self) -> Vec<(Access, String)> {
        self.shared()
            .denied
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// [`accesses`](Self::accesses) of the requests bearing this token (`""`: those without
    /// a token).
    pub fn accesses_by(&self, token: &str) -> BTreeSet<Access> {
        self.shared()
            .accesses_by
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(token)
            .cloned()
            .unwrap_or_default()
    }

    /// HTTP requests received so far (discovery included; not connections refused while down).
    pub fn request_count(&self) -> u64 {
        self.shared().requests.load(Ordering::Relaxed)
    }

    /// Stops the server (for every clone) and waits for it to finish.
    pub async fn shutdown(self) {
        self.handle.stop.send_replace(());
        let task = self
            .handle
            .task
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        let background = std::mem::take(
            &mut *self
                .handle
                .background
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        for task in task.into_iter().chain(background) {
            if let Err(e) = task.await {
                tracing::warn!("kube-fake server task failed: {e}");
            }
        }
    }
}
