//! The Kubernetes backend: pod migrations acting on a real cluster.
//!
//! Owns [`KubeBackend`], the [`Backend`] of one connected cluster:
//! - reads (pods, PDB headroom, replacements) come from the watch cache and the current
//!   snapshot, never from a fresh list;
//! - evictions go through `policy/v1` Eviction with the pod's uid as a precondition, the
//!   profile's grace period, and `koordinator.sh/evict-reason`/`evict-trigger` on the Eviction
//!   object (where admission webhooks see them), at most once per pod: the pod is read fresh
//!   from the API server first, and one that is gone, has another uid or already carries a
//!   `deletionTimestamp` is not evicted again (a real API server accepts a second eviction of a
//!   terminating pod). Each eviction writes one `events.k8s.io` Event `Descheduled` on the pod,
//!   as descheduler does, under a name derived from the pod's uid, so writing it again after a
//!   crash finds it there. kube's client retries nothing (see `connect`): a 429 goes back to
//!   the executor as "blocked by a PDB";
//! - reservations are Koordinator Reservations where the API server serves them, placeholder
//!   pods otherwise ([`ReservationMode`], `reserve`).
//!
//! - replacements: the candidates are the controller's pods created since the eviction (minus
//!   a clock slack), not terminating, the one bound into the pod migration's Reservation first;
//!   the executor picks among them and records its claim (`docs/operations.md`).
//!
//! Every call is idempotent or read-only, like the contract asks: reservations and placeholders
//! are keyed by the reservation name, a release of something gone is a no-op, and an eviction
//! can only ever hit the uid it names, once. Errors name the call and read as the API server's
//! `reason: message (code)`; a 401/403 or another refusal retrying cannot fix is permanent
//! (`crate::error`), so the executor fails the step instead of retrying it until the TTL.

use std::time::Duration;

use async_trait::async_trait;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::core::{ApiResource, DynamicObject, ObjectList};
use serde_json::{Value, json};

use crate::error::{api_status, backend_error, describe};
use rebalancer_backend::{
    Backend, BackendError, EvictedPod, EvictionCheck, EvictionRequest, EvictionResult, PodState,
    ReservationKind, ReservationRequest, ReservationState, controller_of,
};
use rebalancer_cluster::Clusters;
use rebalancer_policy_sdk::evictor::PodPdbs;

use crate::sync::LiveCluster;

/// Label on every object Rebalancer creates in a cluster.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "rebalancer");
/// Label naming the reservation a placeholder pod stands for.
pub const PLACEHOLDER_LABEL: &str = "rebalancer.io/reservation";
/// Annotation: the uid of the pod a reservation or placeholder was made for.
pub const RESERVED_FOR_POD: &str = "rebalancer.io/reserved-for-pod";
/// Annotation: the controller uid whose next pod replaces the evicted one.
pub const RESERVED_FOR_OWNER: &str = "rebalancer.io/reserved-for-owner";
/// Koordinator's annotations of why and by whom a pod is evicted.
pub const EVICT_REASON: &str = "koordinator.sh/evict-reason";
pub const EVICT_TRIGGER: &str = "koordinator.sh/evict-trigger";
/// Koordinator's reservation order label (oldest migration wins).
pub const RESERVATION_ORDER: &str = "scheduling.koordinator.sh/reservation-order";

/// How capacity is reserved before an eviction (`--reservation-mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReservationMode {
    /// Koordinator Reservations where the API server serves them, placeholder pods otherwise.
    #[default]
    Auto,
    /// Always Koordinator Reservations (a cluster without the API fails every reservation).
    Reservation,
    /// Always placeholder pods.
    Placeholder,
}

impl std::str::FromStr for ReservationMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(ReservationMode::Auto),
            "reservation" => Ok(ReservationMode::Reservation),
            "placeholder" => Ok(ReservationMode::Placeholder),
            other => Err(format!(
                "unknown reservation mode {other:?}: expected auto, reservation or placeholder"
            )),
        }
    }
}

/// How the backend acts in clusters.
#[derive(Clone, Debug)]
pub struct ActOptions {
    pub reservation_mode: ReservationMode,
    /// Image of placeholder pods (does nothing; holds the requests).
    pub placeholder_image: String,
    /// PriorityClass of placeholder pods: below every workload's, so the scheduler preempts a
    /// placeholder for the replacement.
    pub placeholder_priority_class: String,
    /// `spec.ttl` of Koordinator Reservations (a safety net: migrations release theirs).
    pub reservation_ttl: Duration,
    /// Schedulers that honour Koordinator Reservations (Koordinator's `schedulerNames`): in
    /// `auto` mode, pods scheduled by another scheduler get a placeholder instead.
    pub koord_scheduler_names: Vec<String>,
    /// Who writes the Events (`reportingController`) and this instance (`reportingInstance`).
    pub reporter: String,
    pub instance: String,
}

impl Default for ActOptions {
    fn default() -> Self {
        ActOptions {
            reservation_mode: ReservationMode::Auto,
            placeholder_image: "registry.k8s.io/pause:3.10".into(),
            placeholder_priority_class: "rebalancer-placeholder".into(),
            reservation_ttl: Duration::from_secs(3600),
            koord_scheduler_names: vec!["koord-scheduler".into()],
            reporter: "rebalancer".into(),
            instance: "rebalancer".into(),
        }
    }
}

/// The backend of one connected cluster.
pub struct KubeBackend {
    live: LiveCluster,
    clusters: Clusters,
    options: ActOptions,
}

/// How far back of the eviction request a replacement may have been created (clocks of the
/// server and the API server differ a little).
const CLOCK_SLACK_MS: i64 = 5_000;

fn reservation_resource() -> ApiResource {
    ApiResource {
        group: "scheduling.koordinator.sh".into(),
        version: "v1alpha1".into(),
        api_version: "scheduling.koordinator.sh/v1alpha1".into(),
        kind: "Reservation".into(),
        plural: "reservations".into(),
    }
}

fn pod_resource() -> ApiResource {
    ApiResource {
        group: String::new(),
        version: "v1".into(),
        api_version: "v1".into(),
        kind: "Pod".into(),
        plural: "pods".into(),
    }
}

/// The name of the `Descheduled` Event of an eviction of pod `uid`: one per pod, so that
/// writing it again (a resumed pod migration) answers AlreadyExists instead of a second Event.
fn descheduled_event_name(pod_name: &str, uid: &str) -> String {
    let mut end = pod_name
        .len()
        .min(253 - 1 - uid.len() - ".descheduled.".len());
    while !pod_name.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}.descheduled.{uid}", &pod_name[..end])
}

impl KubeBackend {
    pub fn new(live: LiveCluster, clusters: Clusters, options: ActOptions) -> KubeBackend {
        KubeBackend {
            live,
            clusters,
            options,
        }
    }

    /// Reads from the cache only once every kind was listed: before that, "not in the cache"
    /// does not mean "gone".
    fn synced(&self) -> Result<(), BackendError> {
        if self.live.is_synced() {
            Ok(())
        } else {
            Err(BackendError::Unavailable(format!(
                "cluster {} is not synced yet ({})",
                self.live.name(),
                self.live.status().message.unwrap_or_default()
            )))
        }
    }

    fn cached_pod(&self, uid: &str) -> Option<Value> {
        self.live
            .pod_json(uid)
            .and_then(|j| serde_json::from_str(&j).ok())
    }

    /// Whether Koordinator Reservations are looked at: `None` while discovery has not answered
    /// (in `auto` mode), when nothing can be said about either kind yet.
    fn reservations_apply(&self) -> Option<bool> {
        match self.options.reservation_mode {
            ReservationMode::Auto => self.live.reservations_served(),
            ReservationMode::Reservation => Some(true),
            ReservationMode::Placeholder => Some(false),
        }
    }

    fn discovered(&self) -> Result<bool, BackendError> {
        self.reservations_apply().ok_or_else(|| {
            BackendError::Unavailable(format!(
                "cluster {}: discovery has not answered yet",
                self.live.name()
            ))
        })
    }

    /// Reserve for `pod` with a Koordinator Reservation (else a placeholder pod)? In `auto`
    /// mode only where the API is served and the pod's scheduler honours Reservations.
    fn reserve_with_reservation(&self, pod: &Value) -> Result<bool, BackendError> {
        let served = self.discovered()?;
        Ok(match self.options.reservation_mode {
            ReservationMode::Auto => {
                let scheduler = pod["spec"]["schedulerName"]
                    .as_str()
                    .unwrap_or("default-scheduler");
                served
                    && self
                        .options
                        .koord_scheduler_names
                        .iter()
                        .any(|n| n == scheduler)
            }
            _ => served,
        })
    }

    fn reservations(&self) -> kube::Api<DynamicObject> {
        kube::Api::all_with(self.live.client(), &reservation_resource())
    }

    fn pods_in(&self, namespace: &str) -> kube::Api<DynamicObject> {
        kube::Api::namespaced_with(self.live.client(), namespace, &pod_resource())
    }

    /// The pod spec a reservation or placeholder copies: the pod's scheduling constraints,
    /// kept away from `exclude` and, when given, pinned to `target` (by node affinity).
    fn constrained_affinity(pod: &Value, exclude: &[String], target: Option<&str>) -> Value {
        let mut affinity = pod["spec"]["affinity"].clone();
        if !affinity.is_object() {
            affinity = json!({});
        }
        let mut fields = Vec::new();
        if !exclude.is_empty() {
            fields.push(json!({"key": "metadata.name", "operator": "NotIn", "values": exclude}));
        }
        if let Some(t) = target {
            fields.push(json!({"key": "metadata.name", "operator": "In", "values": [t]}));
        }
        if fields.is_empty() {
            return affinity;
        }
        let required =
            &mut affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"];
        let mut terms = required["nodeSelectorTerms"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if terms.is_empty() {
            terms.push(json!({}));
        }
        // Terms are ORed: every term gets the constraint.
        for term in &mut terms {
            let mut own = term["matchFields"].as_array().cloned().unwrap_or_default();
            own.extend(fields.iter().cloned());
            term["matchFields"] = Value::Array(own);
        }
        *required = json!({"nodeSelectorTerms": terms});
        affinity
    }

    fn reservation_body(
        &self,
        req: &ReservationRequest,
        pod: &Value,
    ) -> Result<Value, BackendError> {
        let owner = controller_of(pod).ok_or_else(|| {
            BackendError::Invalid(format!(
                "pod {} has no controller: nothing would recreate it into a reservation",
                req.pod_uid
            ))
        })?;
        let namespace = pod["metadata"]["namespace"].as_str().unwrap_or("default");
        let mut spec = pod["spec"].clone();
        if let Some(spec) = spec.as_object_mut() {
            spec.remove("nodeName");
            spec.insert(
                "affinity".into(),
                Self::constrained_affinity(pod, &req.exclude_nodes, req.target_node.as_deref()),
            );
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        Ok(json!({
            "apiVersion": "scheduling.koordinator.sh/v1alpha1",
            "kind": "Reservation",
            "metadata": {
                "name": req.name,
                "labels": {
                    MANAGED_BY.0: MANAGED_BY.1,
                    "app.kubernetes.io/created-by": "rebalancer",
                    RESERVATION_ORDER: now.to_string(),
                },
                "annotations": {
                    RESERVED_FOR_POD: req.pod_uid,
                    RESERVED_FOR_OWNER: owner.uid,
                },
            },
            "spec": {
                "template": {
                    "metadata": {
                        "namespace": namespace,
                        "labels": pod["metadata"]["labels"],
                        "annotations": pod["metadata"]["annotations"],
                    },
                    "spec": spec,
                },
                "owners": [{"controller": {
                    "apiVersion": owner.api_version,
                    "kind": owner.kind,
                    "name": owner.name,
                    "uid": owner.uid,
                    "controller": true,
                    "namespace": namespace,
                }}],
                "allocateOnce": true,
                "ttl": format!("{}s", self.options.reservation_ttl.as_secs()),
            },
        }))
    }

    fn placeholder_body(&self, req: &ReservationRequest, pod: &Value) -> Value {
        let namespace = pod["metadata"]["namespace"].as_str().unwrap_or("default");
        let requests = effective_requests(pod);
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": req.name,
                "namespace": namespace,
                "labels": {MANAGED_BY.0: MANAGED_BY.1, PLACEHOLDER_LABEL: req.name},
                "annotations": {
                    RESERVED_FOR_POD: req.pod_uid,
                    RESERVED_FOR_OWNER: controller_of(pod).map(|o| o.uid).unwrap_or_default(),
                },
            },
            "spec": {
                "priorityClassName": self.options.placeholder_priority_class,
                "terminationGracePeriodSeconds": 0,
                "automountServiceAccountToken": false,
                "enableServiceLinks": false,
                "nodeSelector": pod["spec"]["nodeSelector"],
                "tolerations": pod["spec"]["tolerations"],
                "affinity": Self::constrained_affinity(pod, &req.exclude_nodes, req.target_node.as_deref()),
                "securityContext": {
                    "runAsNonRoot": true,
                    "runAsUser": 65535,
                    "seccompProfile": {"type": "RuntimeDefault"},
                },
                "containers": [{
                    "name": "reserve",
                    "image": self.options.placeholder_image,
                    // Limits = requests: admitted by quotas on limits, and never more.
                    "resources": {"requests": requests, "limits": requests},
                    "securityContext": {
                        "allowPrivilegeEscalation": false,
                        "readOnlyRootFilesystem": true,
                        "capabilities": {"drop": ["ALL"]},
                    },
                }],
            },
        })
    }

    /// The placeholder pod of reservation `name`: cache first, then the API server (a
    /// placeholder created a moment ago may not have reached the cache yet).
    async fn placeholder(&self, name: &str) -> Result<Option<Value>, BackendError> {
        if let Some(p) = self
            .live
            .placeholder_json(name)
            .and_then(|j| serde_json::from_str(&j).ok())
        {
            return Ok(Some(p));
        }
        let lp = ListParams::default().labels(&format!("{PLACEHOLDER_LABEL}={name}"));
        let api: kube::Api<DynamicObject> =
            kube::Api::all_with(self.live.client(), &pod_resource());
        let list: ObjectList<DynamicObject> = api.list(&lp).await.map_err(|e| {
            backend_error(
                "list",
                &format!("pods with label {PLACEHOLDER_LABEL}={name}"),
                &e,
            )
        })?;
        Ok(list
            .items
            .into_iter()
            .next()
            .and_then(|o| serde_json::to_value(o).ok()))
    }

    /// The pods of controller `owner_uid` in `namespace`, other than `not_uid`, created at or
    /// after `since_ms` (from the current snapshot), as the watch cache has them now.
    fn pods_of_since(
        &self,
        namespace: &str,
        owner_uid: &str,
        not_uid: &str,
        since_ms: i64,
    ) -> Vec<(i64, PodState)> {
        let Some(snapshot) = self.clusters.get(self.live.name()) else {
            return Vec::new();
        };
        let cluster = snapshot.cluster();
        cluster
            .pods()
            .filter(|p| p.namespace() == namespace && p.uid() != not_uid)
            .filter(|p| p.creation_ms() >= since_ms)
            .filter(|p| {
                p.raw
                    .owner_refs
                    .iter()
                    .any(|r| r.controller && cluster.str(r.uid.to_native()) == owner_uid)
            })
            .filter_map(|p| {
                let json = self.cached_pod(p.uid())?;
                Some((p.creation_ms(), PodState::from_json(&json)))
            })
            .collect()
    }

    /// The pod `namespace/name` read from the API server now (not the cache, which may not have
    /// seen an eviction this server made just before a crash).
    async fn fresh_pod(&self, namespace: &str, name: &str) -> Result<Option<Value>, BackendError> {
        match self.pods_in(namespace).get_opt(name).await {
            Ok(pod) => Ok(pod.and_then(|p| serde_json::to_value(p).ok())),
            Err(e) => Err(backend_error("get", &format!("pod {namespace}/{name}"), &e)),
        }
    }

    /// Write the `Descheduled` Event of an eviction, once per pod (see
    /// [`descheduled_event_name`]); an Event already there is success.
    async fn write_descheduled_event(
        &self,
        req: &EvictionRequest,
        node: &str,
    ) -> Result<(), BackendError> {
        let note = if req.reason.is_empty() {
            format!(
                "pod evicted from {node} node by rebalancer ({})",
                req.trigger
            )
        } else {
            req.reason.clone()
        };
        let now = k8s_openapi::jiff::Timestamp::now();
        let event = json!({
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {
                "name": descheduled_event_name(&req.name, &req.uid),
                "namespace": req.namespace,
                "labels": {MANAGED_BY.0: MANAGED_BY.1},
            },
            "eventTime": now.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string(),
            "reportingController": self.options.reporter,
            "reportingInstance": self.options.instance,
            "action": "Descheduled",
            "reason": "Descheduled",
            "type": "Normal",
            "note": truncate(&note, 1024),
            "regarding": {
                "apiVersion": "v1",
                "kind": "Pod",
                "namespace": req.namespace,
                "name": req.name,
                "uid": req.uid,
            },
        });
        let object: DynamicObject = serde_json::from_value(event)
            .map_err(|e| BackendError::Internal(format!("event body: {e}")))?;
        let events = kube::Api::<DynamicObject>::namespaced_with(
            self.live.client(),
            &req.namespace,
            &ApiResource {
                group: "events.k8s.io".into(),
                version: "v1".into(),
                api_version: "events.k8s.io/v1".into(),
                kind: "Event".into(),
                plural: "events".into(),
            },
        );
        match events.create(&PostParams::default(), &object).await {
            Ok(_) => Ok(()),
            Err(e) if api_status(&e).is_some_and(|s| s.is_already_exists()) => Ok(()),
            Err(e) => Err(backend_error(
                "create",
                &format!("events.k8s.io Event in namespace {}", req.namespace),
                &e,
            )),
        }
    }
}

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// A pod's effective requests (Kubernetes' rule: the larger of the app containers' sum and any
/// init container, plus overhead), as quantity strings.
fn effective_requests(pod: &Value) -> Value {
    use rebalancer_policy_sdk::k8s::quantity::parse_milli;
    let mut totals: std::collections::BTreeMap<String, i64> = Default::default();
    let requests_of = |c: &Value| -> Vec<(String, i64)> {
        c["resources"]["requests"]
            .as_object()
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| Some((k.clone(), parse_milli(v.as_str()?).ok()?)))
                    .collect()
            })
            .unwrap_or_default()
    };
    for c in pod["spec"]["containers"].as_array().into_iter().flatten() {
        for (k, v) in requests_of(c) {
            *totals.entry(k).or_default() += v;
        }
    }
    for c in pod["spec"]["initContainers"]
        .as_array()
        .into_iter()
        .flatten()
    {
        for (k, v) in requests_of(c) {
            let t = totals.entry(k).or_default();
            *t = (*t).max(v);
        }
    }
    if let Some(overhead) = pod["spec"]["overhead"].as_object() {
        for (k, v) in overhead {
            if let Some(v) = v.as_str().and_then(|v| parse_milli(v).ok()) {
                *totals.entry(k.clone()).or_default() += v;
            }
        }
    }
    let map: serde_json::Map<String, Value> = totals
        .into_iter()
        .map(|(k, milli)| {
            let text = if milli % 1000 == 0 {
                (milli / 1000).to_string()
            } else {
                format!("{milli}m")
            };
            (k, Value::String(text))
        })
        .collect();
    Value::Object(map)
}

/// A Reservation's state, from its status (Koordinator's phases and conditions).
fn reservation_state(r: &Value) -> ReservationState {
    let status = &r["status"];
    let node = status["nodeName"].as_str().unwrap_or("").to_owned();
    let owner = status["currentOwners"]
        .as_array()
        .and_then(|o| o.first())
        .and_then(|o| o["uid"].as_str())
        .map(str::to_owned);
    let unschedulable = status["conditions"].as_array().and_then(|cs| {
        cs.iter().find(|c| {
            c["type"] == "Scheduled" && c["status"] == "False" && c["reason"] == "Unschedulable"
        })
    });
    match (status["phase"].as_str().unwrap_or(""), owner) {
        (_, Some(pod_uid)) if !node.is_empty() => ReservationState::Bound { node, pod_uid },
        ("Failed", _) => ReservationState::Released,
        ("Available" | "Waiting" | "Succeeded", _) if !node.is_empty() => {
            ReservationState::Scheduled { node }
        }
        _ => match unschedulable {
            Some(c) => ReservationState::Unschedulable {
                reason: c["message"].as_str().unwrap_or("unschedulable").to_owned(),
            },
            None => ReservationState::Pending,
        },
    }
}

/// A placeholder pod's state.
fn placeholder_state(p: &Value) -> ReservationState {
    if p["metadata"]["deletionTimestamp"].is_string() {
        return ReservationState::Released;
    }
    if let Some(node) = p["spec"]["nodeName"].as_str().filter(|n| !n.is_empty()) {
        return ReservationState::Scheduled {
            node: node.to_owned(),
        };
    }
    let unschedulable = p["status"]["conditions"].as_array().and_then(|cs| {
        cs.iter().find(|c| {
            c["type"] == "PodScheduled" && c["status"] == "False" && c["reason"] == "Unschedulable"
        })
    });
    match unschedulable {
        Some(c) => ReservationState::Unschedulable {
            reason: c["message"].as_str().unwrap_or("unschedulable").to_owned(),
        },
        None => ReservationState::Pending,
    }
}

#[async_trait]
impl Backend for KubeBackend {
    async fn pod(&self, _cluster: &str, uid: &str) -> Result<Option<PodState>, BackendError> {
        self.synced()?;
        Ok(self.cached_pod(uid).map(|p| PodState::from_json(&p)))
    }

    async fn eviction_check(
        &self,
        _cluster: &str,
        uid: &str,
    ) -> Result<EvictionCheck, BackendError> {
        self.synced()?;
        if self.live.pod_json(uid).is_none() {
            return Ok(EvictionCheck::PodNotFound);
        }
        let snapshot = self.clusters.get(self.live.name()).ok_or_else(|| {
            BackendError::Unavailable(format!("cluster {} has no snapshot yet", self.live.name()))
        })?;
        let cluster = snapshot.cluster();
        let Some(row) = cluster.pods().find(|p| p.uid() == uid).map(|p| p.id) else {
            return Err(BackendError::Unavailable(format!(
                "pod {uid} is not in the current revision yet"
            )));
        };
        let index = snapshot.index();
        let pdb_name = |p: u32| {
            let raw = &cluster.archive().pdbs[p as usize];
            (
                cluster.str(raw.namespace.to_native()).to_owned(),
                cluster.str(raw.name.to_native()).to_owned(),
            )
        };
        let p = match index.pdbs_of_pod(row) {
            PodPdbs::None => return Ok(EvictionCheck::Allowed { pdb: None }),
            PodPdbs::Many(_) => {
                let pdbs = (0..cluster.archive().pdbs.len() as u32)
                    .filter(|&p| index.pdb_pods(p).contains(&row))
                    .map(|p| {
                        let (ns, name) = pdb_name(p);
                        format!("{ns}/{name}")
                    })
                    .collect();
                return Ok(EvictionCheck::MultiplePdbs { pdbs });
            }
            PodPdbs::One(p) => p,
        };
        let (ns, name) = pdb_name(p);
        let display = format!("{ns}/{name}");
        // The disruption controller's current verdict (fresher than the snapshot's).
        let pdb: Value = self
            .live
            .object_json("PodDisruptionBudget", &ns, &name)
            .and_then(|j| serde_json::from_str(&j).ok())
            .unwrap_or(Value::Null);
        let allowed = pdb["status"]["disruptionsAllowed"].as_i64().unwrap_or(0);
        Ok(if allowed >= 1 {
            EvictionCheck::Allowed { pdb: Some(display) }
        } else {
            EvictionCheck::Blocked {
                reason: format!(
                    "status.disruptionsAllowed is {allowed} (currentHealthy {}, desiredHealthy {})",
                    pdb["status"]["currentHealthy"].as_i64().unwrap_or(0),
                    pdb["status"]["desiredHealthy"].as_i64().unwrap_or(0)
                ),
                pdb: display,
            }
        })
    }

    async fn reservation_kind(
        &self,
        _cluster: &str,
        pod_uid: &str,
    ) -> Result<ReservationKind, BackendError> {
        self.synced()?;
        let pod = self
            .cached_pod(pod_uid)
            .ok_or_else(|| BackendError::Invalid(format!("pod {pod_uid} no longer exists")))?;
        Ok(if self.reserve_with_reservation(&pod)? {
            ReservationKind::Reservation
        } else {
            ReservationKind::PlaceholderPod
        })
    }

    async fn reserve(
        &self,
        cluster: &str,
        req: &ReservationRequest,
    ) -> Result<ReservationState, BackendError> {
        self.synced()?;
        let pod = self.cached_pod(&req.pod_uid).ok_or_else(|| {
            BackendError::Invalid(format!("pod {} no longer exists", req.pod_uid))
        })?;
        let namespace = pod["metadata"]["namespace"]
            .as_str()
            .unwrap_or("default")
            .to_owned();
        let (api, body, kind, what) = if self.reserve_with_reservation(&pod)? {
            (
                self.reservations(),
                self.reservation_body(req, &pod)?,
                ReservationKind::Reservation,
                format!("scheduling.koordinator.sh Reservation {}", req.name),
            )
        } else {
            (
                self.pods_in(&namespace),
                self.placeholder_body(req, &pod),
                ReservationKind::PlaceholderPod,
                format!("placeholder pod {namespace}/{}", req.name),
            )
        };
        let object: DynamicObject = serde_json::from_value(body)
            .map_err(|e| BackendError::Internal(format!("{kind} body: {e}")))?;
        match api.create(&PostParams::default(), &object).await {
            Ok(_) => {}
            Err(e) if api_status(&e).is_some_and(|s| s.is_already_exists()) => {
                // Ours from before a crash, or someone else's object of the same name.
                let existing = api
                    .get_opt(&req.name)
                    .await
                    .map_err(|e| backend_error("get", &what, &e))?;
                let owner = existing
                    .as_ref()
                    .and_then(|o| o.metadata.annotations.as_ref())
                    .and_then(|a| a.get(RESERVED_FOR_POD))
                    .cloned();
                if existing.is_some() && owner.as_deref() != Some(req.pod_uid.as_str()) {
                    return Err(BackendError::Invalid(format!(
                        "{what} already exists and was not made for pod {} (another Rebalancer \
                         with its own database uses the same names?)",
                        req.pod_uid
                    )));
                }
            }
            Err(e) => return Err(backend_error("create", &what, &e)),
        }
        Ok(self
            .reservation(cluster, &req.name)
            .await?
            .unwrap_or(ReservationState::Pending))
    }

    async fn reservation(
        &self,
        _cluster: &str,
        name: &str,
    ) -> Result<Option<ReservationState>, BackendError> {
        self.synced()?;
        if self.discovered()? {
            match self.reservations().get_opt(name).await {
                Ok(Some(r)) => {
                    return Ok(serde_json::to_value(r).ok().map(|r| reservation_state(&r)));
                }
                Ok(None) => {}
                Err(e) => {
                    return Err(backend_error(
                        "get",
                        &format!("scheduling.koordinator.sh Reservation {name}"),
                        &e,
                    ));
                }
            }
            if self.options.reservation_mode == ReservationMode::Reservation {
                return Ok(None);
            }
        }
        // A placeholder pod is what it is: the executor finds the replacement itself and keeps
        // the placeholder until that replacement is Ready on the placeholder's node.
        Ok(self.placeholder(name).await?.map(|p| placeholder_state(&p)))
    }

    async fn release(&self, _cluster: &str, name: &str) -> Result<(), BackendError> {
        self.synced()?;
        let gone =
            |e: &kube::Error| api_status(e).is_some_and(|s| s.is_not_found() || s.is_conflict());
        if self.discovered()? {
            match self
                .reservations()
                .delete(name, &DeleteParams::default())
                .await
            {
                Ok(_) => {}
                Err(e) if gone(&e) => {}
                Err(e) => {
                    return Err(backend_error(
                        "delete",
                        &format!("scheduling.koordinator.sh Reservation {name}"),
                        &e,
                    ));
                }
            }
        }
        if self.options.reservation_mode == ReservationMode::Reservation {
            return Ok(());
        }
        let Some(p) = self.placeholder(name).await? else {
            return Ok(());
        };
        let namespace = p["metadata"]["namespace"].as_str().unwrap_or("default");
        let dp = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: p["metadata"]["uid"]
                .as_str()
                .map(|uid| kube::api::Preconditions {
                    uid: Some(uid.to_owned()),
                    resource_version: None,
                }),
            ..DeleteParams::default()
        };
        match self.pods_in(namespace).delete(name, &dp).await {
            Ok(_) => Ok(()),
            Err(e) if gone(&e) => Ok(()),
            Err(e) => Err(backend_error(
                "delete",
                &format!("placeholder pod {namespace}/{name}"),
                &e,
            )),
        }
    }

    async fn evict(
        &self,
        _cluster: &str,
        req: &EvictionRequest,
    ) -> Result<EvictionResult, BackendError> {
        // At most once: an eviction of a terminating pod would be accepted again.
        match self.fresh_pod(&req.namespace, &req.name).await? {
            None => return Ok(EvictionResult::NotFound),
            Some(p) if p["metadata"]["uid"].as_str() != Some(req.uid.as_str()) => {
                return Ok(EvictionResult::NotFound);
            }
            Some(p) if p["metadata"]["deletionTimestamp"].is_string() => {
                return Ok(EvictionResult::AlreadyTerminating);
            }
            Some(_) => {}
        }
        let mut delete_options = json!({"preconditions": {"uid": req.uid}});
        if let Some(grace) = req.grace_period_seconds {
            delete_options["gracePeriodSeconds"] = json!(grace);
        }
        let reason = if req.reason.is_empty() {
            if req.trigger.is_empty() {
                "NotSet"
            } else {
                &req.trigger
            }
        } else {
            &req.reason
        };
        let body = json!({
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {
                "name": req.name,
                "namespace": req.namespace,
                "annotations": {
                    EVICT_REASON: truncate(reason, 1024),
                    EVICT_TRIGGER: if req.trigger.is_empty() { "NotSet" } else { &req.trigger },
                },
            },
            "deleteOptions": delete_options,
        });
        let data = serde_json::to_vec(&body)
            .map_err(|e| BackendError::Internal(format!("eviction body: {e}")))?;
        let request =
            kube::core::Request::new(format!("/api/v1/namespaces/{}/pods", req.namespace))
                .create_subresource("eviction", &req.name, &PostParams::default(), data)
                .map_err(|e| BackendError::Invalid(format!("eviction request: {e}")))?;
        let what = format!("pods/eviction of pod {}/{}", req.namespace, req.name);
        match self.live.client().request::<Value>(request).await {
            Ok(_) => Ok(EvictionResult::Evicted),
            Err(e) => {
                let Some(status) = api_status(&e) else {
                    return Err(backend_error("create", &what, &e));
                };
                Ok(match status.code {
                    429 => EvictionResult::BlockedByPdb {
                        pdb: status
                            .details
                            .as_ref()
                            .and_then(|d| d.causes.iter().find(|c| c.reason == "DisruptionBudget"))
                            .map(|c| c.message.clone())
                            .unwrap_or_else(|| "(the Eviction API did not say)".into()),
                        message: status.message.clone(),
                    },
                    // Gone, or a same-named pod with another uid: ours is gone.
                    404 | 409 => EvictionResult::NotFound,
                    500 if status.message.contains("more than one PodDisruptionBudget") => {
                        EvictionResult::Refused {
                            message: describe(&e),
                        }
                    }
                    401 | 403 => return Err(backend_error("create", &what, &e)),
                    400..=499 => EvictionResult::Refused {
                        message: describe(&e),
                    },
                    _ => return Err(backend_error("create", &what, &e)),
                })
            }
        }
    }

    async fn record_eviction(
        &self,
        _cluster: &str,
        req: &EvictionRequest,
    ) -> Result<(), BackendError> {
        let node = self
            .cached_pod(&req.uid)
            .and_then(|p| p["spec"]["nodeName"].as_str().map(str::to_owned))
            .unwrap_or_default();
        self.write_descheduled_event(req, &node).await
    }

    async fn replacements_of(
        &self,
        _cluster: &str,
        evicted: &EvictedPod,
    ) -> Result<Vec<PodState>, BackendError> {
        self.synced()?;
        let Some(owner) = evicted.owner_uid.as_deref() else {
            return Ok(Vec::new());
        };
        let since = evicted.evicted_at_ms.unwrap_or(0) - CLOCK_SLACK_MS;
        let mut candidates: Vec<(i64, PodState)> = self
            .pods_of_since(&evicted.namespace, owner, &evicted.uid, since)
            .into_iter()
            .filter(|(_, p)| !p.terminating)
            .collect();
        // Bound into this pod migration's Reservation first, then by creation (then uid).
        candidates.sort_by(|(a_created, a), (b_created, b)| {
            let bound = |p: &PodState| {
                evicted.reservation.is_some() && p.reservation == evicted.reservation
            };
            bound(b)
                .cmp(&bound(a))
                .then(a_created.cmp(b_created))
                .then_with(|| a.uid.cmp(&b.uid))
        });
        Ok(candidates.into_iter().map(|(_, p)| p).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservation_states_follow_koordinator_status() {
        let r = |status: Value| reservation_state(&json!({"status": status}));
        assert_eq!(r(json!({})), ReservationState::Pending);
        assert_eq!(
            r(json!({"phase": "Pending", "conditions": [
                {"type": "Scheduled", "status": "False", "reason": "Unschedulable", "message": "0/3 nodes"}
            ]})),
            ReservationState::Unschedulable {
                reason: "0/3 nodes".into()
            }
        );
        assert_eq!(
            r(json!({"phase": "Available", "nodeName": "n2"})),
            ReservationState::Scheduled { node: "n2".into() }
        );
        assert_eq!(
            r(json!({"phase": "Succeeded", "nodeName": "n2", "currentOwners": [{"uid": "new"}]})),
            ReservationState::Bound {
                node: "n2".into(),
                pod_uid: "new".into()
            }
        );
        assert_eq!(r(json!({"phase": "Failed"})), ReservationState::Released);
    }

    #[test]
    fn placeholder_states() {
        assert_eq!(
            placeholder_state(&json!({"spec": {}})),
            ReservationState::Pending
        );
        assert_eq!(
            placeholder_state(&json!({"spec": {"nodeName": "n3"}})),
            ReservationState::Scheduled { node: "n3".into() }
        );
        assert_eq!(
            placeholder_state(&json!({"spec": {}, "status": {"conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "no room"}
            ]}})),
            ReservationState::Unschedulable {
                reason: "no room".into()
            }
        );
        assert_eq!(
            placeholder_state(
                &json!({"metadata": {"deletionTimestamp": "x"}, "spec": {"nodeName": "n"}})
            ),
            ReservationState::Released
        );
    }

    #[test]
    fn effective_requests_follow_kubernetes() {
        let pod = json!({"spec": {
            "containers": [
                {"resources": {"requests": {"cpu": "250m", "memory": "1Gi"}}},
                {"resources": {"requests": {"cpu": "750m"}}}
            ],
            "initContainers": [{"resources": {"requests": {"cpu": "2", "memory": "64Mi"}}}],
            "overhead": {"cpu": "100m"}
        }});
        assert_eq!(
            effective_requests(&pod),
            json!({"cpu": "2100m", "memory": "1073741824"})
        );
    }

    #[test]
    fn affinity_excludes_the_source_in_every_term() {
        let pod = json!({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}
            ]
        }}, "podAntiAffinity": {"x": 1}}}});
        let a = KubeBackend::constrained_affinity(&pod, &["n1".into()], None);
        let terms = a["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
            .as_array()
            .unwrap();
        assert_eq!(terms.len(), 2);
        for t in terms {
            assert_eq!(
                t["matchFields"],
                json!([{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}])
            );
        }
        assert_eq!(a["podAntiAffinity"], json!({"x": 1}));
        let none = KubeBackend::constrained_affinity(&json!({"spec": {}}), &[], Some("n9"));
        assert_eq!(
            none["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"],
            json!([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n9"]}]}])
        );
    }
}
