//! The pod-migration executor: a background task that drives every approved decision's pod
//! migration step by step from database state.
//!
//! Owns: the loop (woken by [`Executor::wake`] on approval and every [`TICK`]), the proposal
//! expiry sweep, arbitration of pending pod migrations ([`arbitration`]), the state machine of
//! running ones ([`machine`]), abort, recovery after a restart, the cached arbitration knobs
//! (global and per cluster) and the in-memory rate limiters (per cluster), and fault injection
//! for crash tests (`REBALANCER_FAULT`).
//! Must not: hold SQL (that is `store`) or know how a backend acts on a cluster.
//!
//! Crash safety: every step is persisted (with its event) before the side effect it leads to,
//! and every backend call is idempotent or guarded by a check, so a restart resumes each
//! unfinished pod migration where its last committed step left it and never evicts a pod twice.

pub mod arbitration;
pub mod machine;

#[cfg(test)]
mod tests;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex as StdMutex, RwLock};
use std::time::Duration;

use rebalancer_policy_sdk::view::Cluster;
use tokio::sync::{Mutex, Notify, watch};

use crate::backend::Backend;
use crate::metrics::Metrics;
use arbitration::{
    Active, ArbitrationConfig, ArbitrationConfigs, Candidate, EvictionLimiter, KoordPriority,
    KoordQos, KubeQos, ObjectLimiters, PodFacts, Verdict, Workload, Workloads,
};
pub use machine::AbortError;
use rebalancer_cluster::{ClusterSnapshot, Clusters};
use rebalancer_store::{
    MigrationPhase, MigrationTemplate, MigrationTemplates, PodMigrationRecord, Store, StoreError,
    now_ms,
};

/// How often the executor looks at unfinished pod migrations without being woken
/// (Koordinator's arbitration interval).
pub const TICK: Duration = Duration::from_millis(500);

/// Environment variable of the crash-test fault injection: `abort-after:<point>` makes the
/// process abort right after that point (a step name such as `Evicting`, or `EvictCalled`).
pub const FAULT_ENV: &str = "REBALANCER_FAULT";

/// Pod uid → row in one snapshot.
type PodIndex = Arc<HashMap<String, u32>>;
/// Controller uid → workload in one snapshot.
type WorkloadIndex = Arc<HashMap<String, Workload>>;

/// How often proposals are swept for expiry (approval checks the TTL itself, exactly).
const SWEEP_EVERY_MS: i64 = 5_000;

/// What the executor task (and abort) needs. Cheap to clone.
#[derive(Clone)]
pub struct Deps {
    pub store: Store,
    pub clusters: Clusters,
    /// Where pod migrations act.
    pub backend: Arc<dyn Backend>,
    /// The executor's own handle: wake-ups, knobs, limiters, the step lock.
    pub executor: Executor,
    pub metrics: Arc<Metrics>,
    /// Proposals older than this are swept to `expired`.
    pub proposal_ttl_ms: i64,
    /// Pod migrations of a managed cluster run only on the server holding its Lease.
    pub managed: crate::managed::Managed,
}

/// Handle to the executor's shared state. Cheap to clone.
#[derive(Clone)]
pub struct Executor {
    inner: Arc<Inner>,
}

struct Inner {
    notify: Notify,
    /// Held while one step of a pod migration runs (persist + side effect + persist); abort
    /// takes it too, so an abort never lands between "evicting" and the eviction.
    step_lock: Mutex<()>,
    /// The knobs in force: global, and of the clusters that have their own.
    configs: RwLock<ArbitrationConfigs>,
    /// Held while a cluster's knobs change in the store and here together (and while a cluster
    /// is deleted), so the two never disagree.
    knobs: Mutex<()>,
    limiters: StdMutex<ObjectLimiters>,
    evictions: StdMutex<EvictionLimiter>,
    /// The armed fault point (`REBALANCER_FAULT`); only in builds with fault injection.
    #[cfg(feature = "fault-injection")]
    fault: Option<String>,
    /// uid → pod row, per cluster, for the snapshot revision it was built from.
    pod_index: StdMutex<HashMap<String, (u64, PodIndex)>>,
    /// Controller uid → workload, per cluster and snapshot revision.
    workload_index: StdMutex<HashMap<String, (u64, WorkloadIndex)>>,
    /// When proposals were last swept for expiry.
    last_sweep: StdMutex<i64>,
    /// Pod migrations whose last step failed with a transient backend error: when to try
    /// again, and how many failures in a row (backoff and log throttling).
    retries: StdMutex<HashMap<i64, machine::Retry>>,
    /// Failed releases in a row, per pod migration (the first is a WARN, the rest counted).
    release_failures: StdMutex<HashMap<i64, crate::backend::Repeated>>,
}

impl Default for Executor {
    fn default() -> Self {
        Executor::new()
    }
}

/// The armed fault point, in builds with the `fault-injection` feature (the crash tests').
#[cfg(feature = "fault-injection")]
fn fault_from_env() -> Option<String> {
    let value = std::env::var(FAULT_ENV).ok()?;
    match value.strip_prefix("abort-after:") {
        Some(point) if !point.is_empty() => {
            tracing::warn!(
                point,
                "fault injection armed: the process aborts after this point"
            );
            Some(point.to_string())
        }
        _ => {
            tracing::error!(value = %value, "{FAULT_ENV} must be abort-after:<point>; ignored");
            None
        }
    }
}

/// Release and ordinary builds cannot be made to abort: the variable is only reported.
#[cfg(not(feature = "fault-injection"))]
fn warn_if_fault_requested() {
    if std::env::var_os(FAULT_ENV).is_some() {
        tracing::warn!(
            "{FAULT_ENV} is set, but this build has no fault injection (a test-only cargo \
             feature); ignored"
        );
    }
}

impl Executor {
    pub fn new() -> Executor {
        #[cfg(not(feature = "fault-injection"))]
        warn_if_fault_requested();
        Executor {
            inner: Arc::new(Inner {
                notify: Notify::new(),
                step_lock: Mutex::new(()),
                evictions: StdMutex::new(EvictionLimiter::default()),
                configs: RwLock::new(ArbitrationConfigs::default()),
                knobs: Mutex::new(()),
                limiters: StdMutex::new(ObjectLimiters::default()),
                #[cfg(feature = "fault-injection")]
                fault: fault_from_env(),
                pod_index: StdMutex::new(HashMap::new()),
                workload_index: StdMutex::new(HashMap::new()),
                last_sweep: StdMutex::new(0),
                retries: StdMutex::new(HashMap::new()),
                release_failures: StdMutex::new(HashMap::new()),
            }),
        }
    }

    /// Wake the loop (after an approval, an abort, a knob change).
    pub fn wake(&self) {
        self.inner.notify.notify_one();
    }

    /// The global knobs in force (clusters without their own follow them).
    pub fn config(&self) -> ArbitrationConfig {
        self.read_configs().global.clone()
    }

    /// The knobs in force for `cluster`, and whether they are its own (else the global ones).
    pub fn config_for(&self, cluster: &str) -> (ArbitrationConfig, bool) {
        let configs = self.read_configs();
        match configs.clusters.get(cluster) {
            Some(own) => (own.clone(), true),
            None => (configs.global.clone(), false),
        }
    }

    /// Every cluster's knobs in force.
    pub fn configs(&self) -> ArbitrationConfigs {
        self.read_configs().clone()
    }

    fn read_configs(&self) -> std::sync::RwLockReadGuard<'_, ArbitrationConfigs> {
        self.inner.configs.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Replace the global knobs in force (the caller has validated and stored them).
    pub fn set_config(&self, config: ArbitrationConfig) {
        self.inner
            .configs
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .global = config;
        self.wake();
    }

    /// Hold while changing a cluster's knobs in the store and with [`Executor::set_cluster_config`],
    /// or while deleting a cluster (whose stored knobs go with it).
    pub async fn knobs_lock(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.inner.knobs.lock().await
    }

    /// Give `cluster` its own knobs, or (`None`) make it follow the global ones again (the
    /// caller has validated and stored the change).
    pub fn set_cluster_config(&self, cluster: &str, config: Option<ArbitrationConfig>) {
        {
            let mut configs = self
                .inner
                .configs
                .write()
                .unwrap_or_else(|p| p.into_inner());
            match config {
                Some(config) => configs.clusters.insert(cluster.to_string(), config),
                None => configs.clusters.remove(cluster),
            };
        }
        self.wake();
    }

    /// How the pod migrations approvals create now start, per cluster (mode and TTL from the
    /// knobs in force).
    pub fn templates(&self) -> MigrationTemplates {
        let template = |c: &ArbitrationConfig| MigrationTemplate {
            mode: c.default_job_mode.as_str().to_string(),
            ttl_ms: c.ttl_ms(),
        };
        let configs = self.read_configs();
        MigrationTemplates {
            default: template(&configs.global),
            clusters: configs
                .clusters
                .iter()
                .map(|(name, c)| (name.clone(), template(c)))
                .collect(),
        }
    }

    /// Abort the process if fault injection is armed for `point` (crash tests only: without
    /// the `fault-injection` feature this is nothing).
    fn fault(&self, point: &str) {
        #[cfg(feature = "fault-injection")]
        if self.inner.fault.as_deref() == Some(point) {
            tracing::error!(point, "fault injection: aborting the process");
            std::process::abort();
        }
        #[cfg(not(feature = "fault-injection"))]
        let _ = point;
    }
}

/// Load the stored knobs into the executor (start-up): the global ones and every cluster's own.
pub async fn load_config(store: &Store, executor: &Executor) -> anyhow::Result<()> {
    if let Some(json) = store.arbitration_config().await? {
        let config: ArbitrationConfig = serde_json::from_value(json)
            .map_err(|e| anyhow::anyhow!("the stored arbitration config is not valid: {e}"))?;
        executor.set_config(config);
    }
    for (cluster, json) in store.cluster_arbitration_configs().await? {
        let config: ArbitrationConfig = serde_json::from_value(json).map_err(|e| {
            anyhow::anyhow!(
                "the stored arbitration config of cluster \"{cluster}\" is not valid: {e}"
            )
        })?;
        executor.set_cluster_config(&cluster, Some(config));
    }
    Ok(())
}

/// Run until `stop` turns true.
pub async fn run(deps: Deps, mut stop: watch::Receiver<bool>) {
    if let Err(e) = recover(&deps).await {
        tracing::error!(error = %e, "executor recovery failed; retrying on the next pass");
    }
    loop {
        if *stop.borrow() {
            break;
        }
        if let Err(e) = pass(&deps).await {
            tracing::error!(error = %e, "executor pass failed; retrying");
        }
        tokio::select! {
            _ = deps.executor.inner.notify.notified() => {}
            _ = tokio::time::sleep(TICK) => {}
            changed = stop.changed() => if changed.is_err() { break },
        }
    }
    tracing::info!("executor stopped");
}

/// After a restart: rebuild the object limiters from the recorded evictions.
async fn recover(deps: &Deps) -> Result<(), StoreError> {
    let configs = deps.executor.configs();
    let longest = std::iter::once(&configs.global)
        .chain(configs.clusters.values())
        .flat_map(|c| [&c.object_limiters.workload, &c.object_limiters.namespace])
        .flatten()
        .filter_map(|l| rebalancer_policy_sdk::evictor::parse_go_duration(&l.duration).ok())
        .max()
        .unwrap_or(0);
    let since = now_ms() - i64::try_from(longest / 1_000_000 * 3 / 2).unwrap_or(0);
    let evicted = deps.store.evictions_since(since).await?;
    let active = deps.store.active_pod_migrations().await?;
    tracing::info!(
        unfinished = active.len(),
        recent_evictions = evicted.len(),
        "executor resuming"
    );
    let mut limiters = deps
        .executor
        .inner
        .limiters
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    for m in evicted {
        let facts = facts_of(deps, &m);
        let workloads = workloads_for(deps, &m.cluster, facts.workload.iter().cloned());
        limiters.record_eviction(
            &configs,
            &facts,
            facts.workload.as_ref().and_then(|w| workloads.get(w)),
            m.evicted_at.unwrap_or(since),
        );
    }
    Ok(())
}

/// One look at everything unfinished.
async fn pass(deps: &Deps) -> anyhow::Result<()> {
    let now = now_ms();
    let sweep = {
        let mut last = deps
            .executor
            .inner
            .last_sweep
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let due = now - *last >= SWEEP_EVERY_MS.min(deps.proposal_ttl_ms);
        if due {
            *last = now;
        }
        due
    };
    if sweep {
        let expired = deps
            .store
            .expire_proposals(now - deps.proposal_ttl_ms)
            .await?;
        if expired > 0 {
            tracing::info!(decisions = expired, "proposals expired");
        }
    }
    for m in deps.store.unreleased_reservations().await? {
        if deps.managed.may_act(&m.cluster) {
            machine::release(deps, &m).await;
        }
    }
    let configs = deps.executor.configs();
    // Another server holds these clusters' Leases (it acts there), or this one cannot take
    // them: their pending pod migrations say which Lease they wait for and why.
    let mut all = Vec::new();
    for m in deps.store.active_pod_migrations().await? {
        match deps.managed.waiting_for_lease(&m.cluster) {
            None => all.push(m),
            Some(why) if m.phase == MigrationPhase::Pending => {
                machine::wait(deps, &m, "WaitingForLease", &why, false).await?;
            }
            Some(_) => {}
        }
    }
    if all.is_empty() {
        return Ok(());
    }
    let (pending, running): (Vec<_>, Vec<_>) = all
        .into_iter()
        .partition(|m| m.phase == MigrationPhase::Pending);
    let mut running_ids: Vec<i64> = running.iter().map(|m| m.id).collect();
    if !pending.is_empty() {
        running_ids.extend(arbitrate(deps, &configs, pending, &running).await?);
    }
    for id in running_ids {
        machine::drive(deps, id).await?;
    }
    let mut limiters = deps
        .executor
        .inner
        .limiters
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    limiters.expire_idle(&configs, now_ms());
    Ok(())
}

/// Decide the pending pod migrations, each with its cluster's knobs and against its cluster's
/// running ones; returns the ids admitted.
async fn arbitrate(
    deps: &Deps,
    configs: &ArbitrationConfigs,
    pending: Vec<PodMigrationRecord>,
    running: &[PodMigrationRecord],
) -> anyhow::Result<Vec<i64>> {
    let mut candidates = Vec::new();
    let mut records = HashMap::new();
    for m in pending {
        // The decision goes stale when the pod is gone or moved.
        match machine::staleness(deps, &m).await {
            Ok(None) => {}
            Ok(Some(stale)) => {
                machine::fail_stale(deps, &m, &stale).await?;
                continue;
            }
            Err(e) => {
                // One cluster's backend failing must not hold up the others.
                let message = format!("waiting: the backend failed ({e}); retrying");
                machine::wait(deps, &m, "BackendError", &message, true).await?;
                continue;
            }
        }
        let pod = facts_of(deps, &m);
        candidates.push(Candidate {
            migration: m.id,
            created_ms: m.created_at,
            pod,
        });
        records.insert(m.id, m);
    }
    let mut active = Vec::new();
    for m in running {
        active.push(Active::of(m.id, &facts_of(deps, m)));
    }
    let mut by_cluster: HashMap<&str, BTreeSet<String>> = HashMap::new();
    for c in &candidates {
        if let Some(w) = &c.pod.workload {
            by_cluster
                .entry(c.pod.cluster.as_str())
                .or_default()
                .insert(w.clone());
        }
    }
    let workloads: Workloads = by_cluster
        .into_iter()
        .map(|(cluster, keys)| {
            (
                cluster.to_string(),
                workloads_for(deps, cluster, keys.into_iter()),
            )
        })
        .collect();
    let verdicts = {
        let limiters = deps
            .executor
            .inner
            .limiters
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        arbitration::arbitrate(
            configs,
            candidates,
            &active,
            &workloads,
            &limiters.at(configs, now_ms()),
        )
    };
    let mut admitted = Vec::new();
    for (candidate, verdict) in verdicts {
        let Some(m) = records.get(&candidate.migration) else {
            continue;
        };
        match verdict {
            Verdict::Admit => {
                if machine::admit(deps, m, &candidate.pod).await? {
                    admitted.push(m.id);
                }
            }
            Verdict::Wait(message) => machine::wait(deps, m, "Waiting", &message, false).await?,
            Verdict::Reject(message) => {
                machine::fail(deps, m, "ForbiddenMigratePod", &message).await?
            }
        }
    }
    Ok(admitted)
}

// =============================================================================================
// Facts from the cluster snapshot
// =============================================================================================

/// Row of pod `uid` in the snapshot of `cluster`.
fn pod_row(deps: &Deps, cluster: &str, snapshot: &ClusterSnapshot, uid: &str) -> Option<u32> {
    let mut cache = deps
        .executor
        .inner
        .pod_index
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let fresh = cache
        .get(cluster)
        .filter(|(revision, _)| *revision == snapshot.revision)
        .map(|(_, index)| index.clone());
    let index = match fresh {
        Some(index) => index,
        None => {
            let view = snapshot.cluster();
            let index: HashMap<String, u32> = view
                .pods()
                .enumerate()
                .map(|(i, p)| (p.uid().to_string(), i as u32))
                .collect();
            let index = Arc::new(index);
            cache.insert(cluster.to_string(), (snapshot.revision, index.clone()));
            index
        }
    };
    index.get(uid).copied()
}

fn controller_of(view: Cluster<'_>, row: u32) -> Option<(String, String, String)> {
    let pod = view.pod(row);
    let raw = view.archive().pods.get(row as usize)?;
    let owner = raw
        .owner_refs
        .iter()
        .find(|r| r.controller)
        .or_else(|| raw.owner_refs.first())?;
    let kind = view.str(owner.kind.to_native()).to_string();
    let name = view.str(owner.name.to_native());
    let uid = view.str(owner.uid.to_native()).to_string();
    Some((uid, format!("{kind} {}/{name}", pod.namespace()), kind))
}

/// What arbitration needs about the pod of `m`, from the cluster's current snapshot (a pod the
/// snapshot does not hold gets neutral facts).
fn facts_of(deps: &Deps, m: &PodMigrationRecord) -> PodFacts {
    let mut facts = PodFacts {
        cluster: m.cluster.clone(),
        uid: m.pod_uid.clone(),
        namespace: m.pod_namespace.clone(),
        name: m.pod_name.clone(),
        node: m.source_node.clone(),
        koord_priority: KoordPriority::None,
        priority: 0,
        qos: KubeQos::BestEffort,
        koord_qos: KoordQos::None,
        deletion_cost: 0,
        eviction_cost: 0,
        creation_ms: 0,
        workload: m.workload.clone(),
        job: None,
        evict_annotation: false,
        never_migrate: None,
    };
    let Some(snapshot) = deps.clusters.get(&m.cluster) else {
        return facts;
    };
    let Some(row) = pod_row(deps, &m.cluster, &snapshot, &m.pod_uid) else {
        return facts;
    };
    let view = snapshot.cluster();
    let pod = view.pod(row);
    let index = snapshot.index();
    let traits = index.pod_traits(row);
    facts.koord_priority =
        KoordPriority::of(pod.label(arbitration::KOORD_PRIORITY_LABEL), pod.priority());
    facts.priority = pod.priority().unwrap_or(0);
    facts.qos = match pod.qos() {
        rebalancer_policy_sdk::model::QosClass::BestEffort => KubeQos::BestEffort,
        rebalancer_policy_sdk::model::QosClass::Burstable => KubeQos::Burstable,
        rebalancer_policy_sdk::model::QosClass::Guaranteed => KubeQos::Guaranteed,
    };
    facts.koord_qos = KoordQos::of(pod.label(arbitration::KOORD_QOS_LABEL));
    facts.deletion_cost =
        arbitration::parse_cost(pod.annotation(arbitration::DELETION_COST_ANNOTATION));
    facts.eviction_cost =
        arbitration::parse_cost(pod.annotation(arbitration::EVICTION_COST_ANNOTATION));
    facts.creation_ms = pod.creation_ms();
    facts.evict_annotation = traits.evict_annotation();
    facts.never_migrate = if traits.terminating() {
        Some("terminating")
    } else if traits.daemon_set() {
        Some("owned by a DaemonSet")
    } else if traits.mirror() {
        Some("a mirror pod")
    } else if traits.static_pod() {
        Some("a static pod")
    } else {
        None
    };
    if let Some((uid, _, kind)) = controller_of(view, row) {
        if kind == "Job" {
            facts.job = Some(uid.clone());
        }
        facts.workload.get_or_insert(uid);
    }
    facts
}

/// The workloads (by controller uid) of `cluster` among `keys`: desired replicas = the pods
/// the snapshot holds for that controller (the snapshot does not model ReplicaSets or
/// StatefulSets), and which of them are not Ready. Built once per snapshot revision.
fn workloads_for(
    deps: &Deps,
    cluster: &str,
    keys: impl Iterator<Item = String>,
) -> HashMap<String, Workload> {
    let keys: BTreeSet<String> = keys.collect();
    if keys.is_empty() {
        return HashMap::new();
    }
    let Some(snapshot) = deps.clusters.get(cluster) else {
        return HashMap::new();
    };
    let index = {
        let mut cache = deps
            .executor
            .inner
            .workload_index
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        match cache.get(cluster) {
            Some((revision, index)) if *revision == snapshot.revision => index.clone(),
            _ => {
                let index = Arc::new(all_workloads(&snapshot));
                cache.insert(cluster.to_string(), (snapshot.revision, index.clone()));
                index
            }
        }
    };
    keys.into_iter()
        .filter_map(|k| index.get(&k).map(|w| (k, w.clone())))
        .collect()
}

/// Every controller's [`Workload`] in one snapshot.
fn all_workloads(snapshot: &ClusterSnapshot) -> HashMap<String, Workload> {
    let view = snapshot.cluster();
    let index = snapshot.index();
    let mut out: HashMap<String, Workload> = HashMap::new();
    for (row, pod) in view.pods().enumerate() {
        let row = row as u32;
        if pod.is_terminal() {
            continue;
        }
        let Some((uid, display, _)) = controller_of(view, row) else {
            continue;
        };
        let w = out.entry(uid.clone()).or_insert_with(|| Workload {
            key: uid,
            display,
            replicas: 0,
            unavailable: BTreeSet::new(),
        });
        w.replicas += 1;
        if !index.pod_is_ready(row) || pod.has_deletion_timestamp() {
            w.unavailable.insert(pod.uid().to_string());
        }
    }
    out
}
