//! One actor per cluster: a `coordination.k8s.io/v1` Lease per managed cluster.
//!
//! Owns [`Leadership`], the loop that acquires and renews the Lease `rebalancer-<cluster>` in
//! the managed cluster, and the answer to "may this server act on the cluster now, and who
//! holds it". The algorithm is client-go's leader election: read the Lease; take it when it is
//! free or its holder stopped renewing for `leaseDurationSeconds` (measured on this server's
//! clock, from when the record last changed, so clock skew between servers does not matter);
//! renew every `retry` while holding; every write is a replace with the read resourceVersion,
//! so of two servers racing exactly one wins (the other gets 409 Conflict). A holder that could
//! not renew within `renew_deadline` stops acting before its Lease can expire for others.
//!
//! A Lease that cannot be read or taken (403 in a namespace the RBAC does not grant, 404, a
//! record that does not decode) is retried at the same pace, logged once as a WARN and then
//! counted ([`crate::repeated`]), and shown in [`LeaseStatus::error`] as the verb and the API
//! server's `reason: message (code)`.
//!
//! Why not a crate: kube-lease-manager (the maintained one for kube 5) takes the Lease with
//! server-side apply and relies on field-manager conflicts; optimistic concurrency on
//! resourceVersion is the protocol every API server (and our fake one) implements exactly.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Api;
use kube::api::PostParams;
use serde::Serialize;
use tokio::task::JoinHandle;

use crate::error::describe;
use rebalancer_backend::Repeated;

/// Timing of leader election (client-go's defaults).
#[derive(Clone, Debug)]
pub struct LeaseOptions {
    /// Namespace of the Lease in the managed cluster.
    pub namespace: String,
    /// This server's identity (holderIdentity).
    pub identity: String,
    /// How long a Lease holds without renewal.
    pub duration: Duration,
    /// A holder that could not renew for this long stops acting.
    pub renew_deadline: Duration,
    /// How often to try to acquire or renew.
    pub retry: Duration,
}

impl LeaseOptions {
    pub fn new(namespace: &str, identity: &str) -> LeaseOptions {
        LeaseOptions {
            namespace: namespace.to_owned(),
            identity: identity.to_owned(),
            duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry: Duration::from_secs(2),
        }
    }
}

/// Who holds a cluster's Lease, as this server sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LeaseStatus {
    /// `namespace/name` of the Lease.
    pub lease: String,
    /// This server holds it and may act.
    pub held: bool,
    /// The holder's identity (`None`: free or unknown).
    pub holder: Option<String>,
    /// This server's identity.
    pub identity: String,
    /// Why the last attempt to read, create or renew the Lease failed, as the verb and the API
    /// server's `reason: message (code)` (`create: Forbidden: leases.coordination.k8s.io is
    /// forbidden: … (403)`); `None` when it succeeded. While set, this server cannot act on
    /// the cluster unless it still holds the Lease.
    pub error: Option<String>,
}

struct State {
    status: LeaseStatus,
    /// When we last renewed successfully (while holding).
    renewed: Option<Instant>,
    /// The last record seen, and when it was first seen (for expiry on our clock).
    observed: Option<(String, Instant)>,
}

/// A cluster's Lease loop. Cheap to clone; the loop stops with [`Leadership::stop`] or when
/// the last handle is dropped.
#[derive(Clone)]
pub struct Leadership {
    state: Arc<RwLock<State>>,
    options: Arc<LeaseOptions>,
    task: Arc<TaskGuard>,
    /// The Lease's API and name (for the release at shutdown).
    api: (Api<Lease>, String),
}

struct TaskGuard(std::sync::Mutex<Option<JoinHandle<()>>>);

impl Drop for TaskGuard {
    fn drop(&mut self) {
        if let Ok(Some(t)) = self.0.get_mut().map(Option::take) {
            t.abort();
        }
    }
}

fn record_key(lease: &Lease) -> String {
    let spec = lease.spec.as_ref();
    format!(
        "{:?}|{:?}|{:?}",
        spec.and_then(|s| s.holder_identity.clone()),
        spec.and_then(|s| s.renew_time.as_ref().map(|t| t.0.to_string())),
        lease.metadata.resource_version
    )
}

impl Leadership {
    /// Start competing for the Lease of `cluster`.
    pub fn start(client: kube::Client, cluster: &str, options: LeaseOptions) -> Leadership {
        let name = format!("rebalancer-{cluster}");
        let state = Arc::new(RwLock::new(State {
            status: LeaseStatus {
                lease: format!("{}/{name}", options.namespace),
                held: false,
                holder: None,
                identity: options.identity.clone(),
                error: None,
            },
            renewed: None,
            observed: None,
        }));
        let options = Arc::new(options);
        let lease_api: Api<Lease> = Api::namespaced(client, &options.namespace);
        let handle = (lease_api.clone(), name.clone());
        let task = {
            let state = state.clone();
            let options = options.clone();
            let api = lease_api;
            let cluster = cluster.to_owned();
            tokio::spawn(async move {
                // A Lease that cannot be read or taken is retried every `retry` (the protocol's
                // pace) but logged once, then counted.
                let mut failures = Repeated::new(&cluster, "cluster lease");
                loop {
                    let result = try_acquire_or_renew(&api, &name, &options, &state).await;
                    match &result {
                        Ok(()) => failures.succeeded(),
                        Err(e) => {
                            failures.failed(&format!("Lease {}/{name}: {e}", options.namespace))
                        }
                    }
                    if let Ok(mut s) = state.write() {
                        let was = s.status.held;
                        s.status.error = result.err();
                        // Stop acting when renewals failed for renew_deadline.
                        if s.status.held
                            && s.renewed
                                .is_none_or(|r| r.elapsed() > options.renew_deadline)
                        {
                            s.status.held = false;
                        }
                        if was != s.status.held {
                            tracing::info!(
                                cluster = %cluster, lease = %s.status.lease,
                                held = s.status.held, holder = ?s.status.holder,
                                "cluster lease changed hands"
                            );
                        }
                    }
                    tokio::time::sleep(options.retry).await;
                }
            })
        };
        Leadership {
            state,
            options,
            task: Arc::new(TaskGuard(std::sync::Mutex::new(Some(task)))),
            api: handle,
        }
    }

    /// This server holds the Lease and renewed it within the renew deadline.
    pub fn is_leader(&self) -> bool {
        self.state.read().is_ok_and(|s| {
            s.status.held
                && s.renewed
                    .is_some_and(|r| r.elapsed() <= self.options.renew_deadline)
        })
    }

    pub fn status(&self) -> LeaseStatus {
        let mut status = self
            .state
            .read()
            .map(|s| s.status.clone())
            .unwrap_or_else(|p| p.into_inner().status.clone());
        status.held = self.is_leader();
        status
    }

    /// Stop competing and, if this server holds the Lease, give it up (clear the holder) so
    /// another server takes over at once. Best effort: on failure the Lease expires anyway.
    pub async fn release(&self) {
        let held = self.is_leader();
        self.stop();
        if !held {
            return;
        }
        let (api, name) = &self.api;
        let result = async {
            let mut lease = api.get(name).await?;
            if let Some(spec) = lease.spec.as_mut()
                && spec.holder_identity.as_deref() == Some(self.options.identity.as_str())
            {
                spec.holder_identity = None;
                spec.acquire_time = None;
                spec.renew_time = None;
                api.replace(name, &PostParams::default(), &lease).await?;
            }
            Ok::<_, kube::Error>(())
        };
        match tokio::time::timeout(Duration::from_secs(5), result).await {
            Ok(Ok(())) => tracing::info!(lease = %name, "cluster lease released"),
            Ok(Err(e)) => {
                tracing::warn!(lease = %name, error = %describe(&e), "releasing the lease failed; it expires by itself")
            }
            Err(_) => {
                tracing::warn!(lease = %name, "releasing the lease timed out; it expires by itself")
            }
        }
    }

    /// Stop competing (the Lease then expires for others after its duration).
    pub fn stop(&self) {
        if let Ok(mut t) = self.task.0.lock()
            && let Some(t) = t.take()
        {
            t.abort();
        }
        if let Ok(mut s) = self.state.write() {
            s.status.held = false;
        }
    }
}

fn now_micro() -> MicroTime {
    MicroTime(k8s_openapi::jiff::Timestamp::now())
}

async fn try_acquire_or_renew(
    api: &Api<Lease>,
    name: &str,
    options: &LeaseOptions,
    state: &RwLock<State>,
) -> Result<(), String> {
    let duration_s = options.duration.as_secs().max(1) as i32;
    let current = api
        .get_opt(name)
        .await
        .map_err(|e| format!("get: {}", describe(&e)))?;
    let Some(mut lease) = current else {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some(options.namespace.clone()),
                labels: Some(
                    [(
                        "app.kubernetes.io/managed-by".to_owned(),
                        "rebalancer".to_owned(),
                    )]
                    .into(),
                ),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(options.identity.clone()),
                lease_duration_seconds: Some(duration_s),
                acquire_time: Some(now_micro()),
                renew_time: Some(now_micro()),
                lease_transitions: Some(0),
                ..LeaseSpec::default()
            }),
        };
        return match api.create(&PostParams::default(), &lease).await {
            Ok(created) => {
                mark(state, &created, true);
                Ok(())
            }
            Err(kube::Error::Api(s)) if s.is_already_exists() => Ok(()),
            Err(e) => Err(format!("create: {}", describe(&e))),
        };
    };

    let key = record_key(&lease);
    let now = Instant::now();
    let spec = lease.spec.clone().unwrap_or_default();
    let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
    let ours = holder.as_deref() == Some(options.identity.as_str());
    let expired = {
        let mut s = state
            .write()
            .map_err(|_| "lease state poisoned".to_owned())?;
        let first_seen = match &s.observed {
            Some((k, at)) if *k == key => *at,
            _ => {
                s.observed = Some((key.clone(), now));
                now
            }
        };
        let held_for =
            Duration::from_secs(spec.lease_duration_seconds.unwrap_or(duration_s).max(1) as u64);
        s.status.holder = holder.clone();
        holder.is_none() || now.duration_since(first_seen) > held_for
    };
    if !ours && !expired {
        if let Ok(mut s) = state.write() {
            s.status.held = false;
        }
        return Ok(());
    }
    let mut new_spec = spec.clone();
    new_spec.renew_time = Some(now_micro());
    new_spec.lease_duration_seconds = Some(duration_s);
    if !ours {
        new_spec.holder_identity = Some(options.identity.clone());
        new_spec.acquire_time = Some(now_micro());
        new_spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
    }
    lease.spec = Some(new_spec);
    match api.replace(name, &PostParams::default(), &lease).await {
        Ok(updated) => {
            mark(state, &updated, true);
            Ok(())
        }
        Err(kube::Error::Api(s)) if s.is_conflict() => {
            // Someone else wrote first: they hold it now (or renewed).
            if let Ok(mut st) = state.write() {
                st.status.held = false;
            }
            Ok(())
        }
        Err(e) => Err(format!("update: {}", describe(&e))),
    }
}

fn mark(state: &RwLock<State>, lease: &Lease, held: bool) {
    if let Ok(mut s) = state.write() {
        s.status.held = held;
        s.status.holder = lease
            .spec
            .as_ref()
            .and_then(|sp| sp.holder_identity.clone());
        s.renewed = Some(Instant::now());
        s.observed = Some((record_key(lease), Instant::now()));
    }
}
