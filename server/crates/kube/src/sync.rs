//! Live state: watchers → object cache → debounced snapshot revisions.
//!
//! Owns [`LiveCluster`]: for one connected cluster, discovery of the optional groups, one
//! kube-rs watcher per watched kind (the reflector pattern: list, watch from the list's
//! resourceVersion with bookmarks, re-list on 410 Gone, back off on errors), a poller for
//! metrics.k8s.io (which serves no watch), the object cache they fill, and the builder that
//! turns a burst of changes into one new snapshot revision (after [`SyncOptions::debounce`] of
//! quiet, at most [`SyncOptions::max_delay`] after the first change) and hands it to a
//! [`SnapshotSink`]. It also keeps the cluster's [`SyncStatus`] (connection state, why, last
//! sync) and answers the backend's questions about current objects from the cache.
//!
//! Consistency: a snapshot is built from one copy of the cache taken under its lock, so a run
//! sees one revision; a kind that is re-listing (after 410 Gone or a reconnect) keeps serving
//! its previous objects until the new list is complete.
//!
//! Quiet: a node heartbeat (only `lastHeartbeatTime`-style fields and `resourceVersion`
//! changed, see [`crate::lean::only_heartbeat_differs`]) updates the cache but makes no
//! revision; revisions are logged at DEBUG; errors are described as `reason: message (code)`
//! and retried with backoff, a failing discovery logged once and then counted. Each revision
//! also checks what acting needs from the cluster (the placeholder PriorityClass) and keeps
//! it in [`SyncStatus::warnings`], logged when it appears and when it is resolved.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::StreamExt;
use kube::api::{Api, ListParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde::Serialize;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use rebalancer_cluster::{self as cluster, ClusterSnapshot, JsonPacker, SharedObject};

use crate::connect::Connection;
use crate::error::describe;
use crate::kinds::{Follow, WATCHED, WatchedKind, optional_groups};
use crate::lean::LeanObject;
use rebalancer_backend::Repeated;

/// Timing of the sync.
#[derive(Clone, Debug)]
pub struct SyncOptions {
    /// A new revision is built once no change arrived for this long...
    pub debounce: Duration,
    /// ...or this long after the first unbuilt change, whichever comes first.
    pub max_delay: Duration,
    /// How often metrics.k8s.io is listed.
    pub poll_interval: Duration,
    /// How often the API server is probed (`GET /version`) to notice a silent loss of
    /// connection and its recovery.
    pub probe_interval: Duration,
    /// The PriorityClass placeholder pods need, when they may be used (reservation mode `auto`
    /// or `placeholder`): each revision checks it exists, and a warning says so while it does
    /// not ([`SyncStatus::warnings`]).
    pub placeholder_priority_class: Option<String>,
}

impl Default for SyncOptions {
    fn default() -> Self {
        SyncOptions {
            debounce: Duration::from_millis(200),
            max_delay: Duration::from_secs(1),
            poll_interval: Duration::from_secs(30),
            probe_interval: Duration::from_secs(10),
            placeholder_priority_class: None,
        }
    }
}

/// Where built snapshots go (the server persists the cluster's summary and makes the snapshot
/// current; revisions are numbered by the server so they never go backwards).
#[async_trait]
pub trait SnapshotSink: Send + Sync + 'static {
    /// The number of the next revision.
    fn next_revision(&self) -> u64;
    /// Make `snapshot` the current state of `cluster`.
    async fn install(&self, cluster: &str, snapshot: ClusterSnapshot) -> Result<(), String>;
}

/// How the connection to a cluster is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub enum ConnectionState {
    /// Discovering or listing for the first time: no snapshot yet.
    Connecting,
    /// Every watched kind is listed and its watch is open.
    Synced,
    /// A request or watch failed; retrying with backoff. The last snapshot stays current.
    Disconnected,
}

/// A connected cluster's sync state, for the API and `/readyz`.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SyncStatus {
    pub state: ConnectionState,
    /// Why the state is what it is (the last error while not synced).
    pub message: Option<String>,
    /// When the state last changed (ms since the epoch).
    pub since_ms: i64,
    /// When the last revision was installed (ms since the epoch).
    pub last_sync_ms: Option<i64>,
    /// The last installed revision.
    pub revision: Option<u64>,
    /// The optional kinds discovery found and that are followed (`NodeMetrics`, `Reservation`…).
    pub optional_kinds: Vec<String>,
    /// What in the cluster keeps this server from acting as configured, checked at every
    /// revision (a missing placeholder PriorityClass); empty when nothing does. The server
    /// shows them beside the connection, not in it.
    #[serde(skip)]
    pub warnings: Vec<String>,
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// One watched kind's objects.
#[derive(Default)]
struct KindCache {
    /// (namespace, name) → object, in the API server's list order.
    objects: BTreeMap<(String, String), SharedObject>,
    /// A re-list in progress: replaces `objects` when complete.
    relisting: Option<BTreeMap<(String, String), SharedObject>>,
    /// The first list completed.
    synced: bool,
    /// The last error of its watcher, cleared by its next event.
    error: Option<String>,
    /// The error is the connection's (no answer), not the API server's: the probe clears it
    /// when the API server answers again (a recovered watch has no event to say so).
    transport: bool,
}

#[derive(Default)]
struct Cache {
    /// By index into [`WATCHED`]; `None` for kinds not followed.
    kinds: Vec<Option<KindCache>>,
    /// Pod uid → (namespace, name).
    pod_uids: HashMap<String, (String, String)>,
    /// Placeholder pods: reservation name (their `PLACEHOLDER_LABEL`) → (namespace, name).
    placeholders: HashMap<String, (String, String)>,
    /// The placeholders of a pod re-list in progress: replace `placeholders` when complete.
    relisting_placeholders: HashMap<String, (String, String)>,
    /// First change not yet built into a revision, and the latest change.
    dirty_since: Option<Instant>,
    last_change: Option<Instant>,
    /// The API server stopped answering the probe (cleared when it answers again).
    probe_error: Option<String>,
}

impl Cache {
    fn required_synced(&self) -> bool {
        WATCHED
            .iter()
            .zip(&self.kinds)
            .all(|(k, c)| k.optional || c.as_ref().is_some_and(|c| c.synced))
    }

    fn touch(&mut self) {
        let now = Instant::now();
        self.dirty_since.get_or_insert(now);
        self.last_change = Some(now);
    }

    fn index_pod(&mut self, o: &SharedObject, placeholder: Option<String>) {
        if let Some(uid) = &o.uid {
            self.pod_uids.insert(uid.to_string(), key_of(o));
        }
        if let Some(reservation) = placeholder {
            self.placeholders.insert(reservation, key_of(o));
        }
    }

    fn unindex_pod(&mut self, uid: Option<&str>, json: Option<&str>) {
        if let Some(uid) = uid {
            self.pod_uids.remove(uid);
        }
        if let Some(reservation) = json.and_then(placeholder_of) {
            self.placeholders.remove(&reservation);
        }
    }

    /// After a pod re-list: index the listed pods (placeholders were noted while listing).
    fn reindex_pods(&mut self, pods: usize) {
        let mut uids = HashMap::new();
        if let Some(Some(c)) = self.kinds.get(pods) {
            uids.reserve(c.objects.len());
            for (key, o) in &c.objects {
                if let Some(uid) = &o.uid {
                    uids.insert(uid.to_string(), key.clone());
                }
            }
        }
        self.pod_uids = uids;
        self.placeholders = std::mem::take(&mut self.relisting_placeholders);
    }
}

/// Index of the Pod kind in [`WATCHED`].
fn pods_index() -> usize {
    WATCHED.iter().position(|k| k.kind == "Pod").unwrap_or(1)
}

struct Shared {
    name: String,
    connection: Connection,
    options: SyncOptions,
    cache: Mutex<Cache>,
    status: RwLock<SyncStatus>,
    changed: Notify,
    /// Discovery found Koordinator's Reservation API (`None` until discovery answered).
    reservations_served: RwLock<Option<bool>>,
}

/// One connected cluster's live state. Cheap to clone; the tasks stop when [`LiveCluster::stop`]
/// is called or the last handle is dropped.
#[derive(Clone)]
pub struct LiveCluster {
    shared: Arc<Shared>,
    tasks: Arc<Tasks>,
}

struct Tasks(Mutex<Vec<JoinHandle<()>>>);

impl Drop for Tasks {
    fn drop(&mut self) {
        for t in self.0.get_mut().map(std::mem::take).unwrap_or_default() {
            t.abort();
        }
    }
}

impl LiveCluster {
    /// Start following cluster `name` over `connection`; snapshots go to `sink`.
    pub fn start(
        name: &str,
        connection: Connection,
        options: SyncOptions,
        sink: Arc<dyn SnapshotSink>,
    ) -> LiveCluster {
        let shared = Arc::new(Shared {
            name: name.to_owned(),
            connection,
            options,
            cache: Mutex::new(Cache {
                kinds: WATCHED.iter().map(|_| None).collect(),
                ..Cache::default()
            }),
            status: RwLock::new(SyncStatus {
                state: ConnectionState::Connecting,
                message: Some("discovering the API server's groups".into()),
                since_ms: now_ms(),
                last_sync_ms: None,
                revision: None,
                optional_kinds: Vec::new(),
                warnings: Vec::new(),
            }),
            changed: Notify::new(),
            reservations_served: RwLock::new(None),
        });
        let live = LiveCluster {
            shared: shared.clone(),
            tasks: Arc::new(Tasks(Mutex::new(Vec::new()))),
        };
        let starter = {
            let live = live.clone();
            tokio::spawn(async move { live.run(sink).await })
        };
        live.push_task(starter);
        live
    }

    fn push_task(&self, task: JoinHandle<()>) {
        if let Ok(mut tasks) = self.tasks.0.lock() {
            tasks.push(task);
        }
    }

    /// Stop every task of this cluster.
    pub fn stop(&self) {
        if let Ok(mut tasks) = self.tasks.0.lock() {
            for t in tasks.drain(..) {
                t.abort();
            }
        }
    }

    pub fn name(&self) -> &str {
        &self.shared.name
    }

    pub fn api_server(&self) -> &str {
        &self.shared.connection.api_server
    }

    pub fn client(&self) -> kube::Client {
        self.shared.connection.client.clone()
    }

    pub fn status(&self) -> SyncStatus {
        self.shared
            .status
            .read()
            .map(|s| s.clone())
            .unwrap_or_else(|p| p.into_inner().clone())
    }

    /// Whether the API server serves Koordinator's Reservation; `None` until discovery has
    /// answered.
    pub fn reservations_served(&self) -> Option<bool> {
        *self
            .shared
            .reservations_served
            .read()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Every required kind has been listed at least once.
    pub fn is_synced(&self) -> bool {
        self.lock_cache().required_synced()
    }

    fn lock_cache(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.shared.cache.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The pod with this uid as the cache holds it now (JSON), `None` if it is not there.
    pub fn pod_json(&self, uid: &str) -> Option<String> {
        let cache = self.lock_cache();
        let (ns, name) = cache.pod_uids.get(uid)?;
        let pods = cache.kinds.get(pods_index())?.as_ref()?;
        pods.objects
            .get(&(ns.clone(), name.clone()))
            .filter(|o| o.uid.as_deref() == Some(uid))
            .map(|o| o.json.text())
    }

    /// The placeholder pod of reservation `name` as the cache holds it (JSON).
    pub fn placeholder_json(&self, name: &str) -> Option<String> {
        let cache = self.lock_cache();
        let (ns, pod) = cache.placeholders.get(name)?;
        let pods = cache.kinds.get(pods_index())?.as_ref()?;
        pods.objects
            .get(&(ns.clone(), pod.clone()))
            .map(|o| o.json.text())
    }

    /// The object `kind` `namespace/name` as the cache holds it (JSON).
    pub fn object_json(&self, kind: &str, namespace: &str, name: &str) -> Option<String> {
        let index = WATCHED.iter().position(|k| k.kind == kind)?;
        let cache = self.lock_cache();
        let objects = &cache.kinds.get(index)?.as_ref()?.objects;
        objects
            .get(&(namespace.to_owned(), name.to_owned()))
            .map(|o| o.json.text())
    }

    fn set_state(&self, state: ConnectionState, message: Option<String>) {
        let mut status = self
            .shared
            .status
            .write()
            .unwrap_or_else(|p| p.into_inner());
        if status.state != state {
            status.since_ms = now_ms();
            match state {
                ConnectionState::Disconnected => tracing::warn!(
                    cluster = %self.shared.name,
                    reason = message.as_deref().unwrap_or(""),
                    "cluster connection lost; retrying with backoff"
                ),
                ConnectionState::Synced => {
                    tracing::info!(cluster = %self.shared.name, "cluster connection synced")
                }
                ConnectionState::Connecting => {}
            }
        }
        status.state = state;
        status.message = message;
    }

    /// Derive the connection state from the kinds' errors and sync. The state is written while
    /// the cache is still locked: two watchers refreshing at once must not let the older view
    /// (say, "listing namespaces" from before its list completed) overwrite the newer one, which
    /// nothing would refresh again.
    fn refresh_state(&self) {
        let cache = self.lock_cache();
        let (state, message) = {
            let mut errors: Vec<String> = WATCHED
                .iter()
                .zip(&cache.kinds)
                .filter_map(|(k, c)| {
                    let e = c.as_ref()?.error.as_ref()?;
                    Some(format!("{}: {e}", k.plural))
                })
                .collect();
            if let Some(e) = &cache.probe_error {
                errors.insert(0, format!("API server: {e}"));
            }
            if !errors.is_empty() {
                (ConnectionState::Disconnected, Some(errors.join("; ")))
            } else if !cache.required_synced() {
                let pending: Vec<&str> = WATCHED
                    .iter()
                    .zip(&cache.kinds)
                    .filter(|(k, c)| !k.optional && !c.as_ref().is_some_and(|c| c.synced))
                    .map(|(k, _)| k.plural)
                    .collect();
                (
                    ConnectionState::Connecting,
                    Some(format!("listing {}", pending.join(", "))),
                )
            } else {
                (ConnectionState::Synced, None)
            }
        };
        self.set_state(state, message);
        drop(cache);
    }

    async fn run(self, sink: Arc<dyn SnapshotSink>) {
        let followed = self.discover().await;
        {
            let mut cache = self.lock_cache();
            for &i in &followed {
                cache.kinds[i] = Some(KindCache::default());
            }
        }
        self.refresh_state();
        for i in followed {
            let kind = WATCHED[i];
            let live = self.clone();
            let task = match kind.follow {
                Follow::Watch => tokio::spawn(async move { live.watch(i, kind).await }),
                Follow::Poll => tokio::spawn(async move { live.poll(i, kind).await }),
            };
            self.push_task(task);
        }
        let probe = {
            let live = self.clone();
            tokio::spawn(async move { live.probe().await })
        };
        self.push_task(probe);
        self.build_loop(sink).await;
    }

    /// Which kinds to follow: the required ones, and the optional ones discovery shows.
    /// Retries with backoff until the API server answers.
    async fn discover(&self) -> Vec<usize> {
        let mut delay = Duration::from_millis(500);
        let mut failures = Repeated::new(&self.shared.name, "cluster discovery");
        loop {
            let discovery = kube::Discovery::new(self.client())
                .filter(&optional_groups())
                .run()
                .await;
            match discovery {
                Ok(discovery) => {
                    let mut followed = Vec::new();
                    let mut optional = Vec::new();
                    for (i, k) in WATCHED.iter().enumerate() {
                        let served = !k.optional
                            || discovery.get(k.group).is_some_and(|g| {
                                g.versioned_resources(k.version)
                                    .iter()
                                    .any(|(ar, _)| ar.plural == k.plural)
                            });
                        if served {
                            followed.push(i);
                            if k.optional {
                                optional.push(k.kind.to_owned());
                            }
                        }
                    }
                    failures.succeeded();
                    if let Ok(mut served) = self.shared.reservations_served.write() {
                        *served = Some(optional.iter().any(|k| k == "Reservation"));
                    }
                    tracing::info!(
                        cluster = %self.shared.name,
                        api_server = %self.shared.connection.api_server,
                        optional = ?optional,
                        "cluster discovered"
                    );
                    if let Ok(mut status) = self.shared.status.write() {
                        status.optional_kinds = optional;
                    }
                    return followed;
                }
                Err(e) => {
                    let error = format!("discovery failed: {}", describe(&e));
                    failures.failed(&error);
                    self.set_state(ConnectionState::Disconnected, Some(error));
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(30));
                }
            }
        }
    }

    fn kind_error(&self, i: usize, error: Option<String>, transport: bool) {
        let changed = {
            let mut cache = self.lock_cache();
            match cache.kinds.get_mut(i).and_then(Option::as_mut) {
                Some(c) if c.error != error => {
                    c.error = error;
                    c.transport = transport;
                    true
                }
                _ => false,
            }
        };
        if changed {
            self.refresh_state();
        }
    }

    /// The cache's form of an object (trimmed and packed), and the reservation it is a
    /// placeholder of.
    fn object_of(
        kind: &WatchedKind,
        api_version: &Arc<str>,
        o: &LeanObject,
        packer: &mut JsonPacker,
    ) -> Option<(SharedObject, Option<String>)> {
        let object = SharedObject::from_api_json(kind.kind, api_version.clone(), &o.json, packer)
            .map_err(|e| tracing::warn!(kind = kind.kind, error = %e, "object skipped"))
            .ok()?;
        let placeholder = (kind.kind == "Pod")
            .then(|| placeholder_of(&o.json))
            .flatten();
        Some((object, placeholder))
    }

    async fn watch(self, i: usize, kind: WatchedKind) {
        let api_version: Arc<str> = kind.api_version().into();
        let api: Api<LeanObject> = Api::all_with(self.client(), &kind.api_resource());
        let config = watcher::Config::default().page_size(500);
        let mut events = watcher(api, config).default_backoff().boxed();
        let pods = pods_index();
        // Objects of a kind are packed against the first one seen.
        let mut packer = JsonPacker::default();
        while let Some(event) = events.next().await {
            let event = match event {
                Ok(e) => e,
                Err(e) => {
                    let (transport, error) = match &e {
                        watcher::Error::InitialListFailed(k) => (
                            !matches!(k, kube::Error::Api(_)),
                            format!("list: {}", describe(k)),
                        ),
                        watcher::Error::WatchStartFailed(k) | watcher::Error::WatchFailed(k) => (
                            !matches!(k, kube::Error::Api(_)),
                            format!("watch: {}", describe(k)),
                        ),
                        watcher::Error::WatchError(_) | watcher::Error::NoResourceVersion => {
                            (false, e.to_string())
                        }
                    };
                    self.kind_error(i, Some(error), transport);
                    continue;
                }
            };
            self.kind_error(i, None, false);
            // A kubelet's heartbeat (every ~10 s per node) changes nothing a policy reads: the
            // cache takes the object, but it makes no revision.
            let heartbeat = match &event {
                watcher::Event::Apply(o) if kind.kind == "Node" => {
                    let ns = o.metadata.namespace.as_deref().unwrap_or_default();
                    let name = o.metadata.name.as_deref().unwrap_or_default();
                    self.object_json(kind.kind, ns, name)
                        .is_some_and(|old| crate::lean::only_heartbeat_differs(&old, &o.json))
                }
                _ => false,
            };
            // Packed before the cache is locked: readers never wait for it.
            let object = match &event {
                watcher::Event::InitApply(o) | watcher::Event::Apply(o) => {
                    Self::object_of(&kind, &api_version, o, &mut packer)
                }
                _ => None,
            };
            let mut cache = self.lock_cache();
            if cache.kinds.get(i).is_none_or(Option::is_none) {
                return;
            }
            let mut synced_now = false;
            match event {
                watcher::Event::Init => {
                    if let Some(c) = cache.kinds[i].as_mut() {
                        c.relisting = Some(BTreeMap::new());
                    }
                    if i == pods {
                        cache.relisting_placeholders.clear();
                    }
                }
                watcher::Event::InitApply(_) => {
                    if let Some((o, placeholder)) = object {
                        let key = key_of(&o);
                        if let Some(reservation) = placeholder {
                            cache
                                .relisting_placeholders
                                .insert(reservation, key.clone());
                        }
                        if let Some(buf) =
                            cache.kinds[i].as_mut().and_then(|c| c.relisting.as_mut())
                        {
                            buf.insert(key, o);
                        }
                    }
                }
                watcher::Event::InitDone => {
                    if let Some(c) = cache.kinds[i].as_mut() {
                        if let Some(objects) = c.relisting.take() {
                            c.objects = objects;
                        }
                        synced_now = !c.synced;
                        c.synced = true;
                    }
                    if i == pods {
                        cache.reindex_pods(pods);
                    }
                    cache.touch();
                }
                watcher::Event::Apply(_) => {
                    if let Some((o, placeholder)) = object {
                        if i == pods {
                            cache.index_pod(&o, placeholder);
                        }
                        if let Some(c) = cache.kinds[i].as_mut() {
                            c.objects.insert(key_of(&o), o);
                        }
                        if !heartbeat {
                            cache.touch();
                        }
                    }
                }
                watcher::Event::Delete(o) => {
                    let key = (
                        o.metadata.namespace.clone().unwrap_or_default(),
                        o.metadata.name.clone().unwrap_or_default(),
                    );
                    if let Some(c) = cache.kinds[i].as_mut() {
                        c.objects.remove(&key);
                    }
                    if i == pods {
                        cache.unindex_pod(o.metadata.uid.as_deref(), Some(&o.json));
                    }
                    cache.touch();
                }
            }
            drop(cache);
            if synced_now {
                self.refresh_state();
            }
            if !heartbeat {
                self.shared.changed.notify_one();
            }
        }
    }

    async fn poll(self, i: usize, kind: WatchedKind) {
        let api_version: Arc<str> = kind.api_version().into();
        let api: Api<LeanObject> = Api::all_with(self.client(), &kind.api_resource());
        let mut packer = JsonPacker::default();
        loop {
            match api.list(&ListParams::default()).await {
                Ok(list) => {
                    let objects: BTreeMap<_, _> = list
                        .items
                        .iter()
                        .filter_map(|o| Self::object_of(&kind, &api_version, o, &mut packer))
                        .map(|(o, _)| (key_of(&o), o))
                        .collect();
                    self.kind_error(i, None, false);
                    let mut cache = self.lock_cache();
                    if let Some(c) = cache.kinds.get_mut(i).and_then(Option::as_mut) {
                        c.objects = objects;
                        c.synced = true;
                    }
                    cache.touch();
                    drop(cache);
                    self.shared.changed.notify_one();
                }
                Err(e) => {
                    let transport = !matches!(e, kube::Error::Api(_));
                    self.kind_error(i, Some(format!("list: {}", describe(&e))), transport)
                }
            }
            tokio::time::sleep(self.shared.options.poll_interval).await;
        }
    }

    /// Notice a silent loss of connection (and its end) even when no watch event comes.
    async fn probe(self) {
        loop {
            tokio::time::sleep(self.shared.options.probe_interval).await;
            let result = tokio::time::timeout(
                self.shared.options.probe_interval,
                self.client().apiserver_version(),
            )
            .await;
            let error = match result {
                Ok(Ok(_)) => None,
                Ok(Err(e)) => Some(describe(&e)),
                Err(_) => Some("no answer to GET /version".to_owned()),
            };
            let changed = {
                let mut cache = self.lock_cache();
                let mut changed = cache.probe_error != error;
                if error.is_none() {
                    // The API server answers: connection errors of watches are over (a watch
                    // that still fails reports again on its next attempt).
                    for c in cache.kinds.iter_mut().flatten() {
                        if c.transport && c.error.take().is_some() {
                            c.transport = false;
                            changed = true;
                        }
                    }
                }
                cache.probe_error = error;
                changed
            };
            if changed {
                self.refresh_state();
            }
        }
    }

    async fn build_loop(self, sink: Arc<dyn SnapshotSink>) {
        let options = self.shared.options.clone();
        // Rows of unchanged objects are reused from one revision to the next.
        let mut rows = Some(cluster::LiveRows::default());
        loop {
            // Wait for a change, then for quiet (or the longest delay).
            let wait = {
                let cache = self.lock_cache();
                match (
                    cache.required_synced(),
                    cache.dirty_since,
                    cache.last_change,
                ) {
                    (true, Some(first), Some(last)) => {
                        let quiet = options.debounce.saturating_sub(last.elapsed());
                        let cap = options.max_delay.saturating_sub(first.elapsed());
                        Some(quiet.min(cap))
                    }
                    _ => None,
                }
            };
            match wait {
                None => {
                    self.shared.changed.notified().await;
                    continue;
                }
                Some(d) if !d.is_zero() => {
                    tokio::time::sleep(d).await;
                    continue;
                }
                Some(_) => {}
            }
            let objects: Vec<SharedObject> = {
                let mut cache = self.lock_cache();
                cache.dirty_since = None;
                cache.last_change = None;
                cache
                    .kinds
                    .iter()
                    .flatten()
                    .flat_map(|c| c.objects.values().cloned())
                    .collect()
            };
            let revision = sink.next_revision();
            let time_ms = now_ms();
            let started = Instant::now();
            // The snapshot shares the cache's packed JSON (not copied).
            let mut live_rows = rows.take().unwrap_or_default();
            let built = tokio::task::spawn_blocking(move || {
                let converted = live_rows.rows_converted();
                let snapshot = cluster::ObjectSet::from_shared(objects)
                    .and_then(|set| live_rows.build(&set, revision, time_ms));
                let converted = live_rows.rows_converted().saturating_sub(converted);
                (live_rows, snapshot, converted)
            })
            .await;
            let (snapshot, converted) = match built {
                Ok((live_rows, snapshot, converted)) => {
                    rows = Some(live_rows);
                    (snapshot, converted)
                }
                Err(e) => (Err(cluster::IngestError::Archive(e.to_string())), 0),
            };
            let snapshot = match snapshot {
                Ok(s) => s,
                Err(e) => {
                    tracing::error!(cluster = %self.shared.name, error = %e, "snapshot build failed");
                    self.set_state(
                        ConnectionState::Disconnected,
                        Some(format!(
                            "the cluster's objects do not build a snapshot: {e}"
                        )),
                    );
                    continue;
                }
            };
            let build_ms = started.elapsed().as_secs_f64() * 1000.0;
            let (nodes, pods) = (
                snapshot.counts.get("Node").copied().unwrap_or(0),
                snapshot.counts.get("Pod").copied().unwrap_or(0),
            );
            match sink.install(&self.shared.name, snapshot).await {
                Ok(()) => {
                    // Every burst of changes makes one: DEBUG (the first sync and losses of
                    // connection are INFO and WARN in `set_state`).
                    tracing::debug!(
                        cluster = %self.shared.name, revision, nodes, pods, build_ms,
                        rows_converted = converted, "cluster revision installed"
                    );
                    let warnings = self.cluster_warnings();
                    if let Ok(mut status) = self.shared.status.write() {
                        status.last_sync_ms = Some(now_ms());
                        status.revision = Some(revision);
                        for w in warnings.iter().filter(|w| !status.warnings.contains(w)) {
                            tracing::warn!(cluster = %self.shared.name, warning = %w, "cluster warning");
                        }
                        for w in status.warnings.iter().filter(|w| !warnings.contains(w)) {
                            tracing::info!(cluster = %self.shared.name, warning = %w, "cluster warning resolved");
                        }
                        status.warnings = warnings;
                    }
                    // A revision frees the previous one's tables (hundreds of MB on a large
                    // cluster): hand the freed pages back to the system.
                    let _ = tokio::task::spawn_blocking(release_free_memory).await;
                }
                Err(e) => {
                    tracing::error!(cluster = %self.shared.name, error = %e, "installing a revision failed");
                    // Try again with the next change (or after the debounce).
                    self.lock_cache().touch();
                    tokio::time::sleep(options.max_delay).await;
                }
            }
        }
    }
}

impl LiveCluster {
    /// What in the cluster keeps this server from acting as configured, from the cache now.
    fn cluster_warnings(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        if let Some(class) = &self.shared.options.placeholder_priority_class
            && self.object_json("PriorityClass", "", class).is_none()
        {
            warnings.push(format!(
                "PriorityClass {class} does not exist: placeholder pods \
                 (--placeholder-priority-class) cannot be created, so pod migrations that need \
                 one fail; create it (deploy/priorityclass.yaml)"
            ));
        }
        warnings
    }
}

/// Return freed heap memory to the system (glibc keeps it in its arenas otherwise).
fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory of the allocator's own arenas.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The reservation a placeholder pod stands for (its label), from the pod's JSON. Only pods
/// that mention the label are parsed.
fn placeholder_of(json: &str) -> Option<String> {
    if !json.contains(crate::backend::PLACEHOLDER_LABEL) {
        return None;
    }
    let pod: serde_json::Value = serde_json::from_str(json).ok()?;
    pod["metadata"]["labels"][crate::backend::PLACEHOLDER_LABEL]
        .as_str()
        .map(str::to_owned)
}

fn key_of(o: &SharedObject) -> (String, String) {
    (
        o.namespace.as_deref().unwrap_or_default().to_owned(),
        o.name.to_string(),
    )
}
