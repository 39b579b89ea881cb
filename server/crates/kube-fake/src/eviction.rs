//! The `pods/eviction` subresource: the real server's checks (pod exists, UID precondition,
//! PodDisruptionBudgets of the pod's namespace that select it), the PDB bookkeeping
//! (`status.disruptionsAllowed` decremented, `status.disruptedPods` noted) and the deletion;
//! outcomes a test scripts per pod; and the record of every eviction request.
//!
//! As on a real server, the body is a `policy/v1` (or `v1beta1`) Eviction whose options are in
//! `deleteOptions`; other top-level fields are dropped with a `Warning` header (kube-rs 5's
//! `Api::evict` sends its options as `delete_options`, which a real server drops the same way).
//! Pods that are Pending, Succeeded or Failed, or already terminating, are deleted without
//! looking at PDBs, like the real server's `canIgnorePDB`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use serde_json::{Value, json};

use crate::object::now_timestamp;
use crate::resources::{PDBS, PODS, RESOURCES};
use crate::selector::selector_object_matches;
use crate::status::{self, ApiError};
use crate::store::Store;

/// What the next evictions of a pod answer (see `FakeApiServer::script_eviction`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EvictionOutcome {
    /// The real behaviour.
    #[default]
    Default,
    /// 429 TooManyRequests with a `DisruptionBudget` cause, as when a PDB refuses.
    TooManyRequests,
    /// 500 InternalError.
    ServerError,
    /// 404 NotFound, as if the pod were gone.
    NotFound,
}

/// One eviction request as the server saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvictionRecord {
    pub namespace: String,
    pub name: String,
    /// `deleteOptions.preconditions.uid` of the Eviction.
    pub uid_precondition: Option<String>,
    /// `deleteOptions.gracePeriodSeconds` of the Eviction.
    pub grace_period_seconds: Option<i64>,
    /// `metadata.annotations` of the Eviction object.
    pub annotations: BTreeMap<String, String>,
    /// The HTTP status answered.
    pub status: u16,
}

/// Scripted outcomes and the record of evictions.
#[derive(Default)]
pub(crate) struct Evictions {
    scripted: Mutex<HashMap<(String, String), EvictionOutcome>>,
    records: Mutex<Vec<EvictionRecord>>,
}

/// The answer to an eviction request.
pub(crate) struct EvictionAnswer {
    pub result: Result<Value, ApiError>,
    /// `Warning` header values.
    pub warnings: Vec<String>,
}

const EVICTION_FIELDS: &[&str] = &["apiVersion", "kind", "metadata", "deleteOptions"];

/// The parts of an Eviction body the server uses.
#[derive(Default)]
struct Parsed {
    uid: Option<String>,
    grace: Option<i64>,
    annotations: BTreeMap<String, String>,
    dry_run: bool,
    warnings: Vec<String>,
}

/// The parts of the body (as far as it parses) and whether it is a valid Eviction for this pod.
fn parse_body(name: &str, namespace: &str, body: &[u8]) -> (Parsed, Result<(), ApiError>) {
    let mut parsed = Parsed::default();
    let value: Value = match serde_json::from_slice(body) {
        Ok(Value::Object(map)) => Value::Object(map),
        Ok(_) => {
            return (
                parsed,
                Err(ApiError::bad_request("the Eviction is not a JSON object")),
            );
        }
        Err(e) => {
            return (
                parsed,
                Err(ApiError::bad_request(format!("invalid Eviction: {e}"))),
            );
        }
    };
    let meta = value.get("metadata");
    parsed.annotations = meta
        .and_then(|m| m.get("annotations"))
        .and_then(Value::as_object)
        .map(|a| {
            a.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                .collect()
        })
        .unwrap_or_default();
    let options = value.get("deleteOptions");
    parsed.uid = options
        .and_then(|o| o.pointer("/preconditions/uid"))
        .and_then(Value::as_str)
        .map(str::to_string);
    parsed.grace = options
        .and_then(|o| o.get("gracePeriodSeconds"))
        .and_then(Value::as_i64);
    parsed.dry_run = options
        .and_then(|o| o.get("dryRun"))
        .and_then(Value::as_array)
        .is_some_and(|d| d.iter().any(|v| v == "All"));
    if let Some(map) = value.as_object() {
        for key in map
            .keys()
            .filter(|k| !EVICTION_FIELDS.contains(&k.as_str()))
        {
            parsed
                .warnings
                .push(format!("299 - \"unknown field \\\"{key}\\\"\""));
        }
    }
    if let Some(api_version) = value.get("apiVersion").and_then(Value::as_str)
        && !matches!(api_version, "policy/v1" | "policy/v1beta1")
    {
        return (
            parsed,
            Err(ApiError::bad_request(format!(
                "unsupported apiVersion {api_version:?} for an Eviction"
            ))),
        );
    }
    let body_name = meta
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("");
    if body_name != name {
        return (
            parsed,
            Err(ApiError::bad_request(
                "name in URL does not match name in Eviction object",
            )),
        );
    }
    let body_ns = meta
        .and_then(|m| m.get("namespace"))
        .and_then(Value::as_str)
        .unwrap_or("");
    if !body_ns.is_empty() && body_ns != namespace {
        return (
            parsed,
            Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            )),
        );
    }
    (parsed, Ok(()))
}

fn scripted_error(outcome: EvictionOutcome, name: &str) -> Option<ApiError> {
    match outcome {
        EvictionOutcome::Default => None,
        EvictionOutcome::TooManyRequests => Some(ApiError::too_many_requests(
            "Cannot evict pod as it would violate the pod's disruption budget.",
            json!([{"reason": "DisruptionBudget", "message": "The disruption budget (scripted) refuses this eviction"}]),
        )),
        EvictionOutcome::ServerError => Some(ApiError::internal("scripted eviction failure")),
        EvictionOutcome::NotFound => Some(ApiError::not_found(&RESOURCES[PODS], name)),
    }
}

impl Evictions {
    pub(crate) fn script(&self, namespace: &str, name: &str, outcome: EvictionOutcome) {
        let mut scripted = self
            .scripted
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let key = (namespace.to_string(), name.to_string());
        if outcome == EvictionOutcome::Default {
            scripted.remove(&key);
        } else {
            scripted.insert(key, outcome);
        }
    }

    pub(crate) fn records(&self) -> Vec<EvictionRecord> {
        self.records
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Handles `POST .../namespaces/{namespace}/pods/{name}/eviction`.
    pub(crate) fn evict(
        &self,
        store: &Store,
        namespace: &str,
        name: &str,
        body: &[u8],
        dry_run: bool,
    ) -> EvictionAnswer {
        let (parsed, valid) = parse_body(name, namespace, body);
        let result = match valid {
            Ok(()) => {
                let outcome = self
                    .scripted
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .get(&(namespace.to_string(), name.to_string()))
                    .copied()
                    .unwrap_or_default();
                match scripted_error(outcome, name) {
                    Some(err) => Err(err),
                    None => evict_pod(store, namespace, name, &parsed, dry_run || parsed.dry_run),
                }
            }
            Err(err) => Err(err),
        };
        let status = match &result {
            Ok(_) => 201,
            Err(e) => e.code,
        };
        self.records
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(EvictionRecord {
                namespace: namespace.to_string(),
                name: name.to_string(),
                uid_precondition: parsed.uid,
                grace_period_seconds: parsed.grace,
                annotations: parsed.annotations,
                status,
            });
        EvictionAnswer {
            result,
            warnings: parsed.warnings,
        }
    }
}

/// The real behaviour, atomically under the store's lock.
fn evict_pod(
    store: &Store,
    namespace: &str,
    name: &str,
    parsed: &Parsed,
    dry_run: bool,
) -> Result<Value, ApiError> {
    let pods = &RESOURCES[PODS];
    let mut inner = store.lock();
    let pod = inner
        .object(PODS, namespace, name)
        .cloned()
        .ok_or_else(|| ApiError::not_found(pods, name))?;
    if let Some(uid) = parsed.uid.as_deref().filter(|u| *u != &*pod.uid) {
        return Err(ApiError::conflict_named(
            "Pod",
            pods,
            name,
            &format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                pod.uid
            ),
        ));
    }
    let terminating = pod
        .value()
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null());
    let ignore_pdb = terminating
        || matches!(
            pod.phase.as_deref(),
            Some("Pending" | "Succeeded" | "Failed")
        );
    if !ignore_pdb {
        let budgets: Vec<_> = inner
            .in_namespace(PDBS, namespace)
            .filter(|pdb| {
                selector_object_matches(pdb.value().pointer("/spec/selector"), &pod.labels)
            })
            .cloned()
            .collect();
        if budgets.len() > 1 {
            return Err(ApiError::internal(
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            ));
        }
        if let Some(pdb) = budgets.first() {
            let mut value = pdb.value();
            let number = |key: &str| {
                value
                    .pointer(&format!("/status/{key}"))
                    .and_then(Value::as_i64)
                    .unwrap_or(0)
            };
            let allowed = number("disruptionsAllowed");
            if allowed < 1 {
                return Err(ApiError::too_many_requests(
                    "Cannot evict pod as it would violate the pod's disruption budget.",
                    json!([{
                        "reason": "DisruptionBudget",
                        "message": format!(
                            "The disruption budget {} needs {} healthy pods and has {} currently",
                            pdb.name,
                            number("desiredHealthy"),
                            number("currentHealthy")
                        ),
                    }]),
                ));
            }
            if !dry_run {
                if !value.get("status").is_some_and(Value::is_object) {
                    value["status"] = json!({});
                }
                value["status"]["disruptionsAllowed"] = json!(allowed - 1);
                if !value["status"]
                    .get("disruptedPods")
                    .is_some_and(Value::is_object)
                {
                    value["status"]["disruptedPods"] = json!({});
                }
                value["status"]["disruptedPods"][name] = json!(now_timestamp());
                inner.replace(PDBS, pdb, value);
            }
        }
    }
    if !dry_run {
        inner.remove(PODS, &pod);
    }
    Ok(status::success(201, None))
}
