//! The application: start-up, shared state and the supervised server.
//!
//! Owns: the start-up sequence (database → engine → built-in and uploaded policies → stored
//! clusters → demo cluster → `default` profile → ready), [`AppState`], the in-memory cluster
//! snapshots ([`Clusters`]), the operations start-up and the API share (snapshot ingest), and
//! running the HTTP server until SIGINT/SIGTERM with every task supervised.
//! Must not: hold SQL (that is `store`) or build HTTP responses (that is `http`).
//!
//! The HTTP listener is up from the start so `/healthz` and `/readyz` answer during start-up;
//! `/api/v1` answers 503 until the server is ready.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use anyhow::Context as _;
use tokio::sync::{Mutex, Semaphore, watch};
use tokio::task::JoinHandle;

use crate::config::Settings;
use rebalancer_cluster::{self as cluster, Clusters};
use rebalancer_engine::profile;
use rebalancer_engine::{Engine, EngineConfig, PolicyRegistry};
use rebalancer_store::{self as store, ClusterRecord, NewClusterState, Store};

/// Name of the demo cluster loaded into an empty database.
pub const DEMO_CLUSTER: &str = "demo";
/// The only backend so far: the cluster lives in the database.
pub const BACKEND_SIMULATED: &str = "simulated";

/// Everything a request handler needs. Cheap to clone.
#[derive(Clone)]
pub struct AppState {
    pub store: Store,
    pub engine: Engine,
    pub registry: PolicyRegistry,
    pub clusters: Clusters,
    /// Set once start-up has finished; `/readyz` and `/api/v1` depend on it.
    pub ready: Arc<AtomicBool>,
    pub settings: Arc<Settings>,
    /// Bounds CPU-heavy blocking work running at once (compilations, runs).
    pub evaluations: Arc<Semaphore>,
    /// One snapshot ingest at a time: each may hold several hundred MB while it runs.
    pub ingest_lock: Arc<Mutex<()>>,
    /// Serialises changes to policies and profiles, so a profile is never stored against a
    /// policy that is being deleted.
    pub catalog_lock: Arc<Mutex<()>>,
    /// Held (shared) by every [`AppState::detached`] task; shutdown takes it exclusively before
    /// closing the database, so no committed change is cut off half-way.
    in_flight: Arc<tokio::sync::RwLock<()>>,
    /// Prometheus metrics (`/metrics`).
    pub metrics: Arc<crate::metrics::Metrics>,
    /// Wakes the scheduler ([`crate::trigger::run_scheduler`]) after a schedule changed.
    pub schedules_changed: Arc<tokio::sync::Notify>,
    /// Where pod migrations act: the simulated backend (the cluster lives in the database).
    pub backend: Arc<dyn crate::backend::Backend>,
    /// The pod-migration executor's handle: wake it, read its knobs, abort through it.
    pub executor: crate::executor::Executor,
}

impl AppState {
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// Run `work` to completion even when the caller goes away: a client disconnecting in the
    /// middle of a write must not leave the database and the in-memory state out of step (or a
    /// run stuck `running`). Shutdown waits for these tasks.
    pub async fn detached<T: Send + 'static>(
        &self,
        work: impl Future<Output = T> + Send + 'static,
    ) -> Result<T, tokio::task::JoinError> {
        let guard = self.in_flight.clone().read_owned().await;
        tokio::spawn(async move {
            let _guard = guard;
            work.await
        })
        .await
    }
}

/// Why a snapshot was not ingested.
#[derive(Debug, thiserror::Error)]
pub enum IngestFailure {
    #[error("invalid cluster name {name:?}: {reason}")]
    InvalidName { name: String, reason: &'static str },
    #[error(transparent)]
    Document(#[from] cluster::IngestError),
    #[error(transparent)]
    Store(#[from] store::StoreError),
    #[error("ingest task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
}

/// What an ingest did.
#[derive(Debug)]
pub struct IngestOutcome {
    pub record: ClusterRecord,
    pub created: bool,
    pub parse_ms: f64,
    pub build_ms: f64,
    pub persist_ms: f64,
    pub total_ms: f64,
}

/// Names of clusters and profiles (they appear in URLs): 1–63 of `a-z 0-9 - . _`, starting and
/// ending with a letter or digit.
pub fn check_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() || name.len() > 63 {
        return Err("must be 1 to 63 characters long");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'.' | b'_'))
    {
        return Err("may only contain lower-case letters, digits, '-', '.' and '_'");
    }
    let edge = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    if !edge(name.as_bytes()[0]) || !edge(name.as_bytes()[name.len() - 1]) {
        return Err("must start and end with a lower-case letter or a digit");
    }
    Ok(())
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1000.0
}

impl AppState {
    /// Replace (or create) a cluster's state from a Kubernetes `List` document: parse, build
    /// the snapshot, persist in one transaction, and only then swap the in-memory snapshot.
    /// On any error the previous state is untouched.
    pub async fn ingest_snapshot(
        &self,
        name: &str,
        body: Vec<u8>,
        format: cluster::Format,
    ) -> Result<IngestOutcome, IngestFailure> {
        check_name(name).map_err(|reason| IngestFailure::InvalidName {
            name: name.to_string(),
            reason,
        })?;
        let _one_at_a_time = self.ingest_lock.lock().await;
        let started = Instant::now();

        let objects =
            tokio::task::spawn_blocking(move || cluster::parse_list(body, format)).await??;
        let parse_ms = ms(started);

        let revision = self.clusters.next_revision();
        let time_ms = store::now_ms();
        let build_started = Instant::now();
        let (objects, snapshot) = tokio::task::spawn_blocking(move || {
            let snapshot = cluster::build_snapshot(&objects, revision, time_ms)?;
            Ok::<_, cluster::IngestError>((objects, snapshot))
        })
        .await??;
        let build_ms = ms(build_started);

        let counts = &snapshot.counts;
        let warnings = serde_json::to_value(&snapshot.warnings)
            .map_err(|e| store::StoreError::corrupt("ingest warnings", e))?;
        let rows = objects.stored_objects().map(|o| store::ObjectRow {
            kind: o.kind,
            api_version: o.api_version,
            namespace: o.namespace,
            name: o.name,
            uid: o.uid,
            body: o.json,
        });
        let persist_started = Instant::now();
        let (record, created) = self
            .store
            .replace_cluster_state(
                &NewClusterState {
                    name,
                    backend: BACKEND_SIMULATED,
                    revision: revision as i64,
                    snapshot_time_ms: time_ms,
                    node_count: counts.get("Node").copied().unwrap_or(0) as i64,
                    pod_count: counts.get("Pod").copied().unwrap_or(0) as i64,
                    counts,
                    warnings: &warnings,
                },
                rows,
            )
            .await?;
        let persist_ms = ms(persist_started);
        // The object set holds the whole pushed document; once persisted, keep only the
        // compressed rows.
        drop(objects);
        let snapshot = tokio::task::spawn_blocking(move || {
            let mut snapshot = snapshot;
            snapshot.compact_json();
            snapshot
        })
        .await?;
        let warning_count = snapshot.warnings.len();
        self.clusters.insert(name, Arc::new(snapshot));
        let outcome = IngestOutcome {
            record,
            created,
            parse_ms,
            build_ms,
            persist_ms,
            total_ms: ms(started),
        };
        tracing::info!(
            cluster = name,
            revision,
            objects = outcome.record.object_count,
            warnings = warning_count,
            parse_ms = outcome.parse_ms,
            build_ms = outcome.build_ms,
            persist_ms = outcome.persist_ms,
            "cluster snapshot ingested"
        );
        Ok(outcome)
    }
}

/// A running server.
pub struct Server {
    /// The address the listener is bound to (the real port when started on port 0).
    pub addr: SocketAddr,
    pub state: AppState,
    shutdown: watch::Sender<bool>,
    task: JoinHandle<anyhow::Result<()>>,
}

impl Server {
    /// Stop accepting connections, let in-flight requests finish, close the database.
    pub async fn stop(self) -> anyhow::Result<()> {
        let _ = self.shutdown.send(true);
        self.task.await.context("the server task panicked")?
    }

    /// Wait until the server ends by itself (a start-up or serving failure).
    pub async fn finished(&mut self) -> anyhow::Result<()> {
        (&mut self.task).await.context("the server task panicked")?
    }

    /// Wait until start-up has finished (or failed).
    pub async fn wait_ready(&mut self) -> anyhow::Result<()> {
        loop {
            if self.state.is_ready() {
                return Ok(());
            }
            if self.task.is_finished() {
                return self
                    .finished()
                    .await
                    .and_then(|()| Err(anyhow::anyhow!("the server stopped before it was ready")));
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
}

/// Open the database, build the state, bind the listener and start serving; start-up continues
/// in the background and flips the ready flag when done.
pub async fn spawn(settings: Settings) -> anyhow::Result<Server> {
    spawn_with_backend(settings, None).await
}

/// [`spawn`] with another backend than the simulated one (tests of the executor).
pub async fn spawn_with_backend(
    settings: Settings,
    backend: Option<Arc<dyn crate::backend::Backend>>,
) -> anyhow::Result<Server> {
    let settings = Arc::new(settings);
    let store = Store::open(&settings.database)
        .await
        .with_context(|| format!("opening the database {}", settings.database.display()))?;
    let engine = Engine::new(EngineConfig {
        limits: settings.sandbox.clone(),
    })
    .context("starting the policy engine")?;
    let clusters = Clusters::default();
    let ingest_lock = Arc::new(Mutex::new(()));
    let backend = backend.unwrap_or_else(|| {
        Arc::new(crate::backend::SimulatedBackend::new(
            store.clone(),
            clusters.clone(),
            ingest_lock.clone(),
        ))
    });
    let state = AppState {
        store,
        engine,
        registry: PolicyRegistry::default(),
        clusters,
        backend,
        executor: crate::executor::Executor::default(),
        ready: Arc::new(AtomicBool::new(false)),
        evaluations: Arc::new(Semaphore::new(settings.max_concurrent_evaluations.max(1))),
        ingest_lock,
        catalog_lock: Arc::new(Mutex::new(())),
        in_flight: Arc::new(tokio::sync::RwLock::new(())),
        metrics: Arc::new(crate::metrics::Metrics::new()),
        schedules_changed: Arc::new(tokio::sync::Notify::new()),
        settings: settings.clone(),
    };
    let listener = tokio::net::TcpListener::bind(settings.listen)
        .await
        .with_context(|| format!("listening on {}", settings.listen))?;
    let addr = listener.local_addr()?;
    tracing::info!(%addr, database = %settings.database.display(), "listening");

    let (shutdown, shutdown_rx) = watch::channel(false);
    let task = tokio::spawn(supervise(state.clone(), listener, shutdown_rx));
    Ok(Server {
        addr,
        state,
        shutdown,
        task,
    })
}

/// Serve until SIGINT/SIGTERM or the first failure.
pub async fn run(settings: Settings) -> anyhow::Result<()> {
    let mut server = spawn(settings).await?;
    enum Ended {
        Signal(std::io::Result<&'static str>),
        Server(anyhow::Result<()>),
    }
    let ended = tokio::select! {
        signal = shutdown_signal() => Ended::Signal(signal),
        result = server.finished() => Ended::Server(result),
    };
    match ended {
        Ended::Signal(signal) => {
            let signal = signal.context("listening for shutdown signals")?;
            tracing::info!(signal, "shutting down");
            server.stop().await
        }
        Ended::Server(result) => result,
    }
}

async fn shutdown_signal() -> std::io::Result<&'static str> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate())?;
        tokio::select! {
            r = tokio::signal::ctrl_c() => r.map(|()| "SIGINT"),
            _ = term.recv() => Ok("SIGTERM"),
        }
    }
    #[cfg(not(unix))]
    {
        tokio::signal::ctrl_c().await.map(|()| "ctrl-c")
    }
}

/// Run the HTTP server and the start-up sequence side by side; the first failure of either
/// stops both and is returned.
async fn supervise(
    state: AppState,
    listener: tokio::net::TcpListener,
    mut shutdown: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let (stop_serving, stop_rx) = watch::channel(false);
    let router = crate::http::router(state.clone());
    let serve = axum::serve(listener, router).with_graceful_shutdown(wait_true(stop_rx));
    let mut serve = std::pin::pin!(serve.into_future());
    let mut startup = std::pin::pin!(start_up(state.clone()));
    let mut startup_done = false;
    // Periodic and change-triggered runs, once start-up is done.
    let mut scheduler = std::pin::pin!(crate::trigger::run_scheduler(state.clone()));
    let mut scheduling = false;
    // The pod-migration executor, once start-up is done; stops when serving stops.
    let mut executor = std::pin::pin!(crate::executor::run(
        state.clone(),
        stop_serving.subscribe()
    ));
    let mut executing = false;
    let mut failure: Option<anyhow::Error> = None;

    loop {
        tokio::select! {
            served = &mut serve => {
                if let Err(e) = served {
                    failure.get_or_insert(anyhow::Error::new(e).context("the HTTP server failed"));
                }
                break;
            }
            started = &mut startup, if !startup_done => {
                startup_done = true;
                match started {
                    Ok(()) => {
                        state.ready.store(true, Ordering::Release);
                        scheduling = true;
                        executing = true;
                        tracing::info!(
                            policies = state.registry.list().len(),
                            clusters = state.clusters.len(),
                            "ready"
                        );
                    }
                    Err(e) => {
                        tracing::error!(error = %format!("{e:#}"), "start-up failed");
                        failure = Some(e.context("start-up failed"));
                        let _ = stop_serving.send(true);
                    }
                }
            }
            () = &mut scheduler, if scheduling => {
                scheduling = false;
                failure.get_or_insert(anyhow::anyhow!("the scheduler stopped unexpectedly"));
                let _ = stop_serving.send(true);
            }
            () = &mut executor, if executing => {
                executing = false;
                if !*stop_serving.borrow() {
                    failure.get_or_insert(anyhow::anyhow!("the pod-migration executor stopped unexpectedly"));
                    let _ = stop_serving.send(true);
                }
            }
            changed = shutdown.changed() => {
                if changed.is_err() || *shutdown.borrow() {
                    let _ = stop_serving.send(true);
                }
            }
        }
    }
    if executing {
        // It was told to stop with the server: let it finish the step it is in.
        let _ = stop_serving.send(true);
        executor.await;
    }
    state.ready.store(false, Ordering::Release);
    // Let detached writes finish before the database closes.
    drop(state.in_flight.write().await);
    state.store.close().await;
    tracing::info!("stopped");
    match failure {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

async fn wait_true(mut rx: watch::Receiver<bool>) {
    // A dropped sender also means stop.
    let _ = rx.wait_for(|stop| *stop).await;
}

/// Everything between an open database and a ready server.
async fn start_up(state: AppState) -> anyhow::Result<()> {
    crate::auth::bootstrap(
        &state.store,
        state.settings.admin_token.as_ref(),
        &mut std::io::stdout(),
    )
    .await
    .context("setting up the admin API token")?;
    let interrupted = state
        .store
        .fail_interrupted_runs("interrupted: the server stopped before the run finished")
        .await?;
    if interrupted > 0 {
        tracing::warn!(
            runs = interrupted,
            "marked runs interrupted by a restart as failed"
        );
    }
    crate::executor::load_config(&state).await?;
    register_builtins(&state).await?;
    load_user_policies(&state).await?;
    load_clusters(&state).await?;
    if state.settings.demo && state.store.list_clusters().await?.is_empty() {
        let demo = rebalancer_sim::demo::demo_cluster_json();
        state
            .ingest_snapshot(DEMO_CLUSTER, demo, cluster::Format::Json)
            .await
            .context("loading the demo cluster")?;
    }
    ensure_default_profile(&state).await?;
    Ok(())
}

/// Compile every built-in module, store it, register it. A built-in that does not compile is a
/// broken build: start-up fails.
async fn register_builtins(state: &AppState) -> anyhow::Result<()> {
    let mut names = Vec::new();
    for &(stem, wasm) in rebalancer_builtins::modules() {
        let started = Instant::now();
        let engine = state.engine.clone();
        let policy = tokio::task::spawn_blocking(move || engine.compile(wasm))
            .await?
            .with_context(|| format!("compiling the built-in policy module {stem}"))?;
        let meta = &policy.meta;
        let metadata = serde_json::to_value(meta)?;
        state
            .store
            .upsert_builtin_policy(&store::NewPolicy {
                name: &meta.name,
                version: &meta.version,
                digest: &meta.digest,
                abi_version: &meta.abi_version,
                wasm,
                metadata: &metadata,
            })
            .await?;
        tracing::info!(policy = %meta.name, version = %meta.version, compile_ms = ms(started), "built-in policy registered");
        names.push(meta.name.clone());
        state.registry.insert(policy, true);
    }
    let keep: Vec<&str> = names.iter().map(String::as_str).collect();
    for removed in state.store.remove_builtins_except(&keep).await? {
        tracing::info!(policy = %removed, "built-in policy no longer shipped; removed");
    }
    Ok(())
}

/// Compile the uploaded modules kept in the database. One that no longer compiles (e.g. an ABI
/// this build does not serve) stays stored but unregistered, with an error in the log.
async fn load_user_policies(state: &AppState) -> anyhow::Result<()> {
    for (name, wasm) in state.store.user_policy_modules().await? {
        let engine = state.engine.clone();
        match tokio::task::spawn_blocking(move || engine.compile(&wasm)).await? {
            Ok(policy) if policy.meta.name == name => {
                tracing::info!(policy = %name, "uploaded policy loaded");
                state.registry.insert(policy, false);
            }
            Ok(policy) => tracing::error!(
                policy = %name,
                reports = %policy.meta.name,
                "stored policy now reports a different name; not loaded"
            ),
            Err(e) => {
                tracing::error!(policy = %name, error = %e, "stored policy does not compile; not loaded")
            }
        }
    }
    Ok(())
}

/// Rebuild the snapshot of every stored cluster. A cluster whose stored objects no longer
/// build stays in the database, unloaded, with an error in the log.
async fn load_clusters(state: &AppState) -> anyhow::Result<()> {
    for record in state.store.list_clusters().await? {
        state.clusters.raise_revision(record.revision as u64);
        let started = Instant::now();
        let objects = state.store.cluster_objects(record.id).await?;
        let (revision, time_ms) = (record.revision as u64, record.snapshot_time_ms);
        let built = tokio::task::spawn_blocking(move || {
            let set = cluster::ObjectSet::from_stored(objects.into_iter().map(|o| {
                cluster::StoredObjectBuf {
                    kind: o.kind,
                    api_version: o.api_version,
                    namespace: o.namespace,
                    name: o.name,
                    uid: o.uid,
                    json: o.body,
                }
            }))?;
            let mut snapshot = cluster::build_snapshot(&set, revision, time_ms)?;
            drop(set);
            snapshot.compact_json();
            Ok::<_, cluster::IngestError>(snapshot)
        })
        .await?;
        match built {
            Ok(snapshot) => {
                tracing::info!(cluster = %record.name, revision, objects = record.object_count, load_ms = ms(started), "cluster loaded");
                state.clusters.insert(&record.name, Arc::new(snapshot));
            }
            Err(e) => tracing::error!(
                cluster = %record.name,
                error = %e,
                "the stored state of this cluster does not build; push a new snapshot"
            ),
        }
    }
    Ok(())
}

/// Create the `default` profile when missing (an existing one is the user's and is kept).
async fn ensure_default_profile(state: &AppState) -> anyhow::Result<()> {
    let document = profile::default_profile_document();
    let spec = profile::parse_deschedule_policy(&document).map_err(|errors| {
        anyhow::anyhow!(
            "the built-in default profile does not parse: {}",
            errors
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        )
    })?;
    let (engine, registry, doc, checked) = (
        state.engine.clone(),
        state.registry.clone(),
        document.clone(),
        spec.clone(),
    );
    let problems = tokio::task::spawn_blocking(move || {
        profile::check_plugins(&checked, &doc, &engine, &registry)
    })
    .await?;
    if !problems.is_empty() {
        anyhow::bail!(
            "the built-in default profile does not fit the built-in policies: {}",
            problems
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
    let created = state
        .store
        .create_profile_if_missing(
            profile::DEFAULT_PROFILE,
            &document,
            &serde_json::to_value(&spec)?,
        )
        .await?;
    if created {
        tracing::info!(
            profile = profile::DEFAULT_PROFILE,
            "default profile created"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for ok in ["demo", "prod-eu-1", "a", "x.y_z", "0"] {
            assert!(check_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "Prod", "-a", "a-", "a b", "é", &"x".repeat(64)] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }
}
