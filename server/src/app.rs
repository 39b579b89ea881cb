//! The application: start-up, wiring and the supervised server.
//!
//! Owns: the start-up sequence (database → engine → built-in and uploaded policies → stored
//! clusters → demo cluster → `default` profile → ready), building the handles every stage gets
//! (their deps structs) and the HTTP layer's [`AppState`] from the same handles, and running the
//! HTTP server, the scheduler, the pod-migration executor, retention (pruning history) and
//! webhook deliveries until
//! SIGINT/SIGTERM with every task supervised.
//! Must not: hold SQL (that is `store`), stage logic (snapshot ingest is `ingest`) or build
//! HTTP responses (that is `http`).
//!
//! With `--tls-cert`/`--tls-key` the listener speaks TLS only; the files are read before the
//! database is opened, so a bad certificate stops the start at once.
//!
//! The HTTP listener is up from the start so `/healthz` and `/readyz` answer during start-up;
//! `/api/v1` answers 503 until the server is ready.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use anyhow::Context as _;
use tokio::sync::{Mutex, Notify, Semaphore, watch};
use tokio::task::JoinHandle;

use crate::config::Settings;
use crate::executor::{self, Executor};
use crate::http::AppState;
use crate::in_flight::InFlight;
use crate::ingest::{Ingest, ms};
use crate::{approval, retention, trigger, webhooks};
use rebalancer_cluster::{self as cluster, Clusters};
use rebalancer_engine::profile;
use rebalancer_engine::{Engine, EngineConfig, PolicyRegistry};
use rebalancer_store::{self as store, Store};

/// Name of the demo cluster loaded into an empty database.
pub const DEMO_CLUSTER: &str = "demo";

/// What start-up and supervision use.
#[derive(Clone)]
struct Core {
    settings: Arc<Settings>,
    store: Store,
    engine: Engine,
    registry: PolicyRegistry,
    clusters: Clusters,
    ingest: Ingest,
    executor: Executor,
    ready: Arc<AtomicBool>,
    in_flight: InFlight,
    managed: crate::managed::Managed,
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
    // Before anything else: a certificate that cannot be served stops the start at once.
    let tls = match &settings.tls {
        Some(files) => Some(tokio_rustls::TlsAcceptor::from(
            crate::http::tls::server_config(files)?,
        )),
        None => None,
    };
    let store = Store::open(&settings.database)
        .await
        .with_context(|| format!("opening the database {}", settings.database.display()))?;
    let engine = Engine::new(EngineConfig {
        limits: settings.sandbox.clone(),
        compile: settings.compile.clone(),
    })
    .context("starting the policy engine")?;
    let clusters = Clusters::default();
    let ingest = Ingest::new(store.clone(), clusters.clone());
    // Live revisions must number after every stored one: raise the counter before the first
    // managed cluster can install a revision.
    clusters.raise_revision(
        store
            .max_cluster_revision()
            .await
            .context("reading the latest cluster revision")? as u64,
    );
    let managed = crate::managed::Managed::connect(&settings.kube, &ingest).await?;
    let fallback =
        backend.unwrap_or_else(|| Arc::new(crate::backend::SimulatedBackend::new(ingest.clone())));
    let mut backends = crate::backend::Backends::new(fallback);
    for (name, b) in managed.backends() {
        backends = backends.with(name, b);
    }
    let backend: Arc<dyn crate::backend::Backend> = Arc::new(backends);
    let core = Core {
        settings: settings.clone(),
        store: store.clone(),
        engine,
        registry: PolicyRegistry::default(),
        clusters: clusters.clone(),
        ingest,
        executor: Executor::default(),
        ready: Arc::new(AtomicBool::new(false)),
        in_flight: InFlight::default(),
        managed: managed.clone(),
    };
    let metrics = Arc::new(crate::metrics::Metrics::new());
    let evaluations = Arc::new(Semaphore::new(settings.max_concurrent_evaluations.max(1)));
    let schedules_changed = Arc::new(Notify::new());
    let approval = approval::Deps {
        store: store.clone(),
        clusters: clusters.clone(),
        executor: core.executor.clone(),
        proposal_ttl_ms: settings.proposal_ttl_ms,
    };
    let runs = trigger::Deps {
        store: store.clone(),
        clusters: clusters.clone(),
        engine: core.engine.clone(),
        registry: core.registry.clone(),
        evaluations: evaluations.clone(),
        metrics: metrics.clone(),
        approval: approval.clone(),
        in_flight: core.in_flight.clone(),
        schedules_changed: schedules_changed.clone(),
        managed: managed.clone(),
    };
    let pod_migrations = executor::Deps {
        store: store.clone(),
        clusters: clusters.clone(),
        backend: backend.clone(),
        executor: core.executor.clone(),
        metrics: metrics.clone(),
        proposal_ttl_ms: settings.proposal_ttl_ms,
        managed: managed.clone(),
    };
    let pruning = retention::Deps {
        store: store.clone(),
        metrics: metrics.clone(),
        settings: settings.retention,
        webhook_deliveries: settings.webhooks.retain_deliveries,
    };
    let delivering = webhooks::Deps {
        store: store.clone(),
        settings: settings.webhooks,
        wake: Arc::new(Notify::new()),
        client: webhooks::client(&settings.webhooks)
            .context("building the HTTP client of webhook deliveries")?,
    };
    // Set when serving stops: connections finish their request, and the event streams (which
    // never finish by themselves) end.
    let (stop_serving, serving_stopped) = watch::channel(false);
    let state = AppState {
        closing: serving_stopped.clone(),
        managed,
        settings: settings.clone(),
        ready: core.ready.clone(),
        store,
        engine: core.engine.clone(),
        registry: core.registry.clone(),
        clusters,
        evaluations,
        catalog_lock: Arc::new(Mutex::new(())),
        in_flight: core.in_flight.clone(),
        metrics,
        schedules_changed,
        backend,
        ingest: core.ingest.clone(),
        snapshot_pushes: Arc::new(crate::http::pushes::SnapshotPushes::new(
            settings.max_concurrent_snapshot_pushes,
            std::time::Duration::from_millis(settings.snapshot_push_max_wait_ms),
        )),
        runs: runs.clone(),
        approval,
        pod_migrations: pod_migrations.clone(),
        webhooks_wake: delivering.wake.clone(),
    };
    let listener = tokio::net::TcpListener::bind(settings.listen)
        .await
        .with_context(|| format!("listening on {}", settings.listen))?;
    let addr = listener.local_addr()?;
    tracing::info!(%addr, tls = tls.is_some(), database = %settings.database.display(), "listening");

    let (shutdown, shutdown_rx) = watch::channel(false);
    let router = crate::http::router(state.clone());
    let task = tokio::spawn(supervise(
        core,
        router,
        Tasks {
            runs,
            pod_migrations,
            pruning,
            delivering,
        },
        (listener, tls),
        (stop_serving, serving_stopped),
        shutdown_rx,
    ));
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

/// The background tasks that start once the server is ready, with what each needs.
struct Tasks {
    runs: trigger::Deps,
    pod_migrations: executor::Deps,
    pruning: retention::Deps,
    delivering: webhooks::Deps,
}

/// The executor, retention and webhooks: their dependencies until start-up is done, then their
/// tasks.
struct Background {
    pod_migrations: Option<executor::Deps>,
    pruning: Option<retention::Deps>,
    delivering: Option<webhooks::Deps>,
    executor: Option<JoinHandle<()>>,
    retention: Option<JoinHandle<()>>,
    webhooks: Option<JoinHandle<()>>,
}

impl Background {
    /// Spawn them; each stops when `stop` becomes true.
    fn start(&mut self, stop: &watch::Sender<bool>) {
        if let Some(deps) = self.pod_migrations.take() {
            self.executor = Some(tokio::spawn(executor::run(deps, stop.subscribe())));
        }
        if let Some(deps) = self.pruning.take() {
            self.retention = Some(tokio::spawn(retention::run(deps, stop.subscribe())));
        }
        if let Some(deps) = self.delivering.take() {
            self.webhooks = Some(tokio::spawn(webhooks::run(deps, stop.subscribe())));
        }
    }
}

/// A background task `what` ended: the failure to report unless it ended because serving
/// stopped (then stop serving, if it has not stopped yet).
fn ended_early(
    what: &str,
    ended: Result<(), tokio::task::JoinError>,
    stop_serving: &watch::Sender<bool>,
) -> Option<anyhow::Error> {
    let failure = match ended {
        Err(e) => Some(anyhow::anyhow!("{what} failed: {e}")),
        Ok(()) if !*stop_serving.borrow() => Some(anyhow::anyhow!("{what} stopped unexpectedly")),
        Ok(()) => None,
    };
    if failure.is_some() {
        let _ = stop_serving.send(true);
    }
    failure
}

/// Run the HTTP server and the start-up sequence side by side, then the background tasks; the
/// first failure of any stops them all and is returned.
async fn supervise(
    core: Core,
    router: axum::Router,
    tasks: Tasks,
    (listener, tls): (tokio::net::TcpListener, Option<tokio_rustls::TlsAcceptor>),
    (stop_serving, stop_rx): (watch::Sender<bool>, watch::Receiver<bool>),
    mut shutdown: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let Tasks {
        runs,
        pod_migrations,
        pruning,
        delivering,
    } = tasks;
    let timeouts = crate::http::serve::ReadTimeouts {
        head: core.settings.header_read_timeout,
        body_idle: core.settings.body_idle_timeout,
    };
    let serve = crate::http::serve::serve(listener, router, timeouts, tls, wait_true(stop_rx));
    let mut serve = std::pin::pin!(serve);
    // Start-up and the scheduler are boxed so that they can be dropped as soon as serving
    // stops: a future that is no longer polled but still alive keeps whatever it holds at its
    // last await — a checked-out database connection above all, and the pool's `close()` below
    // waits for every checked-out connection to come back, forever. Worse, sqlx hands a
    // `BEGIN`'s result to the awaiting future in a rendezvous: until that future is polled
    // again (or dropped), its connection's worker waits, holding SQLite's write lock, and every
    // other writer waits behind it.
    let mut startup = Some(Box::pin(start_up(core.clone())));
    // Periodic and change-triggered runs, once start-up is done.
    let mut scheduler = Some(Box::pin(trigger::run_scheduler(runs)));
    let mut scheduling = false;
    // The pod-migration executor and retention, once start-up is done; both stop when serving
    // stops (the executor after the step it is in, retention after its batch). Each is a task
    // of its own, so that it is always polled, whatever this loop is waiting for: polled from
    // here, one of them stalled in a `BEGIN` while this function awaited the other held the
    // write lock the other needed (the rare shutdown hang of issue #14).
    let mut background = Background {
        pod_migrations: Some(pod_migrations),
        pruning: Some(pruning),
        delivering: Some(delivering),
        executor: None,
        retention: None,
        webhooks: None,
    };
    let mut failure: Option<anyhow::Error> = None;

    loop {
        tokio::select! {
            () = &mut serve => break,
            started = async { startup.as_mut().expect("polled only while running").await }, if startup.is_some() => {
                startup = None;
                match started {
                    Ok(()) => {
                        core.ready.store(true, Ordering::Release);
                        scheduling = true;
                        background.start(&stop_serving);
                        tracing::info!(
                            policies = core.registry.list().len(),
                            clusters = core.clusters.len(),
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
            () = async { scheduler.as_mut().expect("polled only while scheduling").await }, if scheduling => {
                scheduling = false;
                failure.get_or_insert(anyhow::anyhow!("the scheduler stopped unexpectedly"));
                let _ = stop_serving.send(true);
            }
            ended = async { background.executor.as_mut().expect("polled only while running").await }, if background.executor.is_some() => {
                background.executor = None;
                if let Some(e) = ended_early("the pod-migration executor", ended, &stop_serving) {
                    failure.get_or_insert(e);
                }
            }
            ended = async { background.retention.as_mut().expect("polled only while running").await }, if background.retention.is_some() => {
                background.retention = None;
                if let Some(e) = ended_early("the retention task", ended, &stop_serving) {
                    failure.get_or_insert(e);
                }
            }
            ended = async { background.webhooks.as_mut().expect("polled only while running").await }, if background.webhooks.is_some() => {
                background.webhooks = None;
                if let Some(e) = ended_early("the webhook task", ended, &stop_serving) {
                    failure.get_or_insert(e);
                }
            }
            changed = shutdown.changed() => {
                if changed.is_err() || *shutdown.borrow() {
                    tracing::debug!("shutdown: requested; serving stops");
                    let _ = stop_serving.send(true);
                }
            }
        }
    }
    tracing::debug!("shutdown: serving has stopped");
    // Cancel what only runs alongside serving (see above); runs the scheduler started are
    // detached tasks and finish under `in_flight`.
    drop(startup);
    drop(scheduler);
    // The executor finishes the step it is in, retention the batch it is in.
    let _ = stop_serving.send(true);
    for (what, task) in [
        ("the pod-migration executor", background.executor.take()),
        ("the retention task", background.retention.take()),
        ("the webhook task", background.webhooks.take()),
    ] {
        if let Some(task) = task
            && let Err(e) = task.await
        {
            failure.get_or_insert(anyhow::anyhow!("{what} failed: {e}"));
        }
    }
    core.ready.store(false, Ordering::Release);
    tracing::debug!("shutdown: serving and the executor have stopped");
    // Hand the Leases back so another server can act at once instead of after their duration.
    core.managed.stop().await;
    // Let detached writes finish before the database closes.
    core.in_flight.drain().await;
    tracing::debug!("shutdown: detached work has finished");
    // Every task that used the database has ended, so the pool gets every connection back at
    // once. Should one still be held (a bug: a future kept alive without being polled), say
    // so and stop anyway instead of waiting forever: each write was committed on its own.
    if tokio::time::timeout(STORE_CLOSE_BOUND, core.store.close())
        .await
        .is_err()
    {
        tracing::error!(
            waited = ?STORE_CLOSE_BOUND,
            "shutdown: a database connection was not given back; stopping without it"
        );
    }
    tracing::info!("stopped");
    match failure {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// How long shutdown waits for the database pool to get its connections back.
const STORE_CLOSE_BOUND: std::time::Duration = std::time::Duration::from_secs(10);

async fn wait_true(mut rx: watch::Receiver<bool>) {
    // A dropped sender also means stop.
    let _ = rx.wait_for(|stop| *stop).await;
}

/// Everything between an open database and a ready server.
async fn start_up(core: Core) -> anyhow::Result<()> {
    crate::auth::bootstrap(
        &core.store,
        core.settings.admin_token.as_ref(),
        &mut std::io::stdout(),
    )
    .await
    .context("setting up the admin API token")?;
    let interrupted = core
        .store
        .fail_interrupted_runs("interrupted: the server stopped before the run finished")
        .await?;
    if interrupted > 0 {
        tracing::warn!(
            runs = interrupted,
            "marked runs interrupted by a restart as failed"
        );
    }
    executor::load_config(&core.store, &core.executor).await?;
    register_builtins(&core).await?;
    load_user_policies(&core).await?;
    let registered: Vec<String> = core
        .registry
        .list()
        .iter()
        .map(|p| p.policy.meta.digest.clone())
        .collect();
    let keep: Vec<&str> = registered.iter().map(String::as_str).collect();
    let removed = core.engine.retain_compiled(&keep);
    if removed > 0 {
        tracing::info!(
            files = removed,
            "removed compiled code of modules no longer registered"
        );
    }
    core.ingest.load_stored(&core.managed.names()).await?;
    // The demo cluster is for trying the server out: not next to real clusters.
    if core.settings.demo && core.managed.is_empty() && core.store.list_clusters().await?.is_empty()
    {
        // Its NodeMetrics are reported now, as a running koordlet's would be.
        let demo = rebalancer_sim::demo::demo_cluster_json_measured_at(store::now_ms() / 1000);
        core.ingest
            .snapshot(DEMO_CLUSTER, demo, cluster::Format::Json, None)
            .await
            .context("loading the demo cluster")?;
    }
    ensure_default_profile(&core).await?;
    Ok(())
}

/// Compile every built-in module, store it, register it. A built-in that does not compile is a
/// broken build: start-up fails.
async fn register_builtins(core: &Core) -> anyhow::Result<()> {
    let mut names = Vec::new();
    for &(stem, wasm) in rebalancer_builtins::modules() {
        let started = Instant::now();
        let engine = core.engine.clone();
        let policy = tokio::task::spawn_blocking(move || engine.compile_builtin(wasm))
            .await?
            .with_context(|| format!("compiling the built-in policy module {stem}"))?;
        let meta = &policy.meta;
        let metadata = serde_json::to_value(meta)?;
        core.store
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
        core.registry.insert(policy, true);
    }
    let keep: Vec<&str> = names.iter().map(String::as_str).collect();
    for removed in core.store.remove_builtins_except(&keep).await? {
        tracing::info!(policy = %removed, "built-in policy no longer shipped; removed");
    }
    Ok(())
}

/// Compile the uploaded modules kept in the database. One that no longer compiles (e.g. an ABI
/// this build does not serve) stays stored but unregistered, with an error in the log.
async fn load_user_policies(core: &Core) -> anyhow::Result<()> {
    for (name, wasm) in core.store.user_policy_modules().await? {
        let engine = core.engine.clone();
        match tokio::task::spawn_blocking(move || engine.compile(&wasm)).await? {
            Ok(policy) if policy.meta.name == name => {
                tracing::info!(policy = %name, "uploaded policy loaded");
                core.registry.insert(policy, false);
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

/// Create the `default` profile when missing (an existing one is the user's and is kept).
async fn ensure_default_profile(core: &Core) -> anyhow::Result<()> {
    let document = profile::default_profile_document();
    let spec = profile::parse_deschedule_policy(&document).map_err(|errors| {
        anyhow::anyhow!(
            "the built-in default profile does not parse: {}",
            profile::ProfileError::summary(&errors)
        )
    })?;
    let (engine, registry, doc, checked) = (
        core.engine.clone(),
        core.registry.clone(),
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
            profile::ProfileError::summary(&problems)
        );
    }
    let created = core
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
