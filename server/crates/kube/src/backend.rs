//! The Kubernetes backend: pod migrations acting on a real cluster.
//!
//! Owns [`KubeBackend`], the [`Backend`] of one connected cluster:
//! - reads (pods, PDB headroom, replacements) come from the watch cache and the current
//!   snapshot, never from a fresh list;
//! - evictions go through `policy/v1` Eviction with the pod's uid as a precondition, the
//!   profile's grace period, and `koordinator.sh/evict-reason`/`evict-trigger` on the Eviction
//!   object (where admission webhooks see them); each eviction writes an `events.k8s.io`
//!   Event `Descheduled` on the pod, as descheduler does. kube's client retries nothing (see
//!   `connect`): a 429 goes back to the executor as "blocked by a PDB";
//! - reservations are Koordinator Reservations where the API server serves them, placeholder
//!   pods otherwise ([`ReservationMode`], `reserve`).
//!
//! Every call is idempotent or read-only, like the contract asks: reservations and placeholders
//! are keyed by the reservation name, a release of something gone is a no-op, and an eviction
//! can only ever hit the uid it names.

use std::time::Duration;

use async_trait::async_trait;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::core::{ApiResource, DynamicObject, ObjectList};
use kube::runtime::events::{Event as KubeEvent, EventType, Recorder, Reporter};
use serde_json::{Value, json};

use k8s_openapi::api::core::v1::ObjectReference;
use rebalancer_backend::{
    Backend, BackendError, EvictedPod, EvictionCheck, EvictionRequest, EvictionResult, PodState,
    ReservationRequest, ReservationState, controller_of,
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

/// How capacity is reserved before an eviction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
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
    recorder: Recorder,
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

/// A transport or server failure: worth retrying.
fn unavailable(what: &str, e: kube::Error) -> BackendError {
    BackendError::Unavailable(format!("{what}: {e}"))
}

fn api_status(e: &kube::Error) -> Option<&kube::core::Status> {
    match e {
        kube::Error::Api(s) => Some(s),
        _ => None,
    }
}

fn parse_time_ms(text: &str) -> Option<i64> {
    text.parse::<k8s_openapi::jiff::Timestamp>()
        .ok()
        .map(|t| t.as_millisecond())
}

impl KubeBackend {
    pub fn new(live: LiveCluster, clusters: Clusters, options: ActOptions) -> KubeBackend {
        let recorder = Recorder::new(
            live.client(),
            Reporter {
                controller: options.reporter.clone(),
                instance: Some(options.instance.clone()),
            },
        );
        KubeBackend {
            live,
            clusters,
            options,
            recorder,
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
        let list: ObjectList<DynamicObject> = api
            .list(&lp)
            .await
            .map_err(|e| unavailable("listing placeholder pods", e))?;
        Ok(list
            .items
            .into_iter()
            .next()
            .and_then(|o| serde_json::to_value(o).ok()))
    }

    /// A pod of controller `owner_uid` in `namespace`, other than `not_uid`, created at or
    /// after `since_ms`: the earliest such (from the current snapshot).
    fn newer_pod_of(
        &self,
        namespace: &str,
        owner_uid: &str,
        not_uid: &str,
        since_ms: i64,
    ) -> Option<String> {
        let snapshot = self.clusters.get(self.live.name())?;
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
            .min_by_key(|p| (p.creation_ms(), p.uid().to_owned()))
            .map(|p| p.uid().to_owned())
    }

    async fn publish_descheduled(&self, req: &EvictionRequest, pod: Option<&Value>) {
        let reference = ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            namespace: Some(req.namespace.clone()),
            name: Some(req.name.clone()),
            uid: Some(req.uid.clone()),
            ..ObjectReference::default()
        };
        let node = pod
            .and_then(|p| p["spec"]["nodeName"].as_str())
            .unwrap_or("");
        let note = if req.reason.is_empty() {
            format!(
                "pod evicted from {node} node by rebalancer ({})",
                req.trigger
            )
        } else {
            req.reason.clone()
        };
        let event = KubeEvent {
            type_: EventType::Normal,
            reason: "Descheduled".into(),
            note: Some(truncate(&note, 1024)),
            action: "Descheduled".into(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&event, &reference).await {
            tracing::warn!(
                cluster = %self.live.name(), pod = %format!("{}/{}", req.namespace, req.name),
                error = %e, "writing the Descheduled event failed (the eviction stands)"
            );
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

    async fn reserve(
        &self,
        cluster: &str,
        req: &ReservationRequest,
    ) -> Result<ReservationState, BackendError> {
        self.synced()?;
        let pod = self.cached_pod(&req.pod_uid).ok_or_else(|| {
            BackendError::Invalid(format!("pod {} no longer exists", req.pod_uid))
        })?;
        let (api, body) = if self.reserve_with_reservation(&pod)? {
            (self.reservations(), self.reservation_body(req, &pod)?)
        } else {
            let namespace = pod["metadata"]["namespace"].as_str().unwrap_or("default");
            (self.pods_in(namespace), self.placeholder_body(req, &pod))
        };
        let object: DynamicObject = serde_json::from_value(body)
            .map_err(|e| BackendError::Internal(format!("reservation body: {e}")))?;
        match api.create(&PostParams::default(), &object).await {
            Ok(_) => {}
            Err(e) if api_status(&e).is_some_and(|s| s.is_already_exists()) => {
                // Ours from before a crash, or someone else's object of the same name.
                let existing = api
                    .get_opt(&req.name)
                    .await
                    .map_err(|e| unavailable("reading a reservation", e))?;
                let owner = existing
                    .as_ref()
                    .and_then(|o| o.metadata.annotations.as_ref())
                    .and_then(|a| a.get(RESERVED_FOR_POD))
                    .cloned();
                if existing.is_some() && owner.as_deref() != Some(req.pod_uid.as_str()) {
                    return Err(BackendError::Invalid(format!(
                        "{} {} already exists and was not made for pod {} (another Rebalancer \
                         with its own database uses the same names?)",
                        if object.types.as_ref().is_some_and(|t| t.kind == "Pod") {
                            "placeholder pod"
                        } else {
                            "Reservation"
                        },
                        req.name,
                        req.pod_uid
                    )));
                }
            }
            Err(e) if api_status(&e).is_some_and(|s| s.code < 500 && s.code != 429) => {
                return Err(BackendError::Invalid(format!(
                    "creating reservation {}: {e}",
                    req.name
                )));
            }
            Err(e) => return Err(unavailable("creating a reservation", e)),
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
                Err(e) => return Err(unavailable("reading a reservation", e)),
            }
            if self.options.reservation_mode == ReservationMode::Reservation {
                return Ok(None);
            }
        }
        let Some(p) = self.placeholder(name).await? else {
            return Ok(None);
        };
        let state = placeholder_state(&p);
        // Once the replacement is seen, the placeholder has done its job.
        if let ReservationState::Scheduled { node } = &state {
            let namespace = p["metadata"]["namespace"].as_str().unwrap_or("");
            let owner = p["metadata"]["annotations"][RESERVED_FOR_OWNER]
                .as_str()
                .unwrap_or("");
            let evicted = p["metadata"]["annotations"][RESERVED_FOR_POD]
                .as_str()
                .unwrap_or("");
            let created = p["metadata"]["creationTimestamp"]
                .as_str()
                .and_then(parse_time_ms)
                .unwrap_or(0);
            if !owner.is_empty()
                && self.cached_pod(evicted).is_none()
                && let Some(uid) = self.newer_pod_of(namespace, owner, evicted, created)
                && let Some(new) = self.cached_pod(&uid)
                && new["spec"]["nodeName"].as_str() == Some(node.as_str())
            {
                return Ok(Some(ReservationState::Bound {
                    node: node.clone(),
                    pod_uid: uid,
                }));
            }
        }
        Ok(Some(state))
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
                Err(e) => return Err(unavailable("deleting a Reservation", e)),
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
            Err(e) => Err(unavailable("deleting a placeholder pod", e)),
        }
    }

    async fn evict(
        &self,
        _cluster: &str,
        req: &EvictionRequest,
    ) -> Result<EvictionResult, BackendError> {
        let pod = self.cached_pod(&req.uid);
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
        match self.live.client().request::<Value>(request).await {
            Ok(_) => {
                self.publish_descheduled(req, pod.as_ref()).await;
                Ok(EvictionResult::Evicted)
            }
            Err(e) => {
                let Some(status) = api_status(&e) else {
                    return Err(unavailable("evicting", e));
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
                            message: status.message.clone(),
                        }
                    }
                    400..=499 => EvictionResult::Refused {
                        message: format!("{} ({})", status.message, status.code),
                    },
                    _ => return Err(unavailable("evicting", e)),
                })
            }
        }
    }

    async fn replacement_of(
        &self,
        _cluster: &str,
        evicted: &EvictedPod,
    ) -> Result<Option<PodState>, BackendError> {
        self.synced()?;
        let Some(owner) = evicted.owner_uid.as_deref() else {
            return Ok(None);
        };
        let since = evicted.evicted_at_ms.unwrap_or(0) - CLOCK_SLACK_MS;
        Ok(self
            .newer_pod_of(&evicted.namespace, owner, &evicted.uid, since)
            .and_then(|uid| self.cached_pod(&uid))
            .map(|p| PodState::from_json(&p)))
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
