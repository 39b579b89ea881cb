//! The `pods/eviction` subresource, as the real `EvictionREST.Create`: the pod must exist;
//! pods that are Pending, Succeeded or Failed, or already terminating, are deleted without
//! looking at PDBs (`canIgnorePDB`: so evicting a terminating pod succeeds again, 201); else the
//! one PodDisruptionBudget of the pod's namespace whose non-empty selector matches the pod is
//! checked and decremented (`status.disruptionsAllowed`, `status.disruptedPods`) unless the pod
//! is not Ready and the budget is healthy anyway, and the pod is deleted through the store's
//! delete (graceful: a running pod on a node stays, terminating). Also here: outcomes a test
//! scripts per pod, and the record of every eviction request.
//!
//! As on a real server, the body is a `policy/v1` (or `v1beta1`) Eviction whose options are in
//! `deleteOptions`; other top-level fields are dropped with a `Warning` header (kube-rs 5's
//! `Api::evict` sends its options as `delete_options`, which a real server drops the same way).
//! The UID precondition is checked by the delete, after the PDB bookkeeping, as on a real
//! server: an eviction refused for a wrong uid has still used up one of the budget's
//! disruptions.
//!
//! Must not: decide when a terminating pod goes (the kubelet stand-in does).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::object::{Stored, now_timestamp};
use crate::resources::{PDBS, PODS, RESOURCES};
use crate::selector::selector_object_matches;
use crate::status::{self, ApiError};
use crate::store::{DeleteOptions, Inner, Store};

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
    /// The uid of the pod of that name when the request came (`None` if there was none).
    pub uid: Option<String>,
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
    resource_version: Option<String>,
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
    parsed.resource_version = options
        .and_then(|o| o.pointer("/preconditions/resourceVersion"))
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
        let uid = store
            .get(PODS, namespace, name)
            .map(|pod| pod.uid.to_string());
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
                    None => evict_pod(
                        &mut store.lock(),
                        namespace,
                        name,
                        &parsed,
                        dry_run || parsed.dry_run,
                    ),
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
                uid,
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

/// The message of every refusal by a budget.
const VIOLATES_BUDGET: &str = "Cannot evict pod as it would violate the pod's disruption budget.";
/// More `status.disruptedPods` than this and the real server refuses evictions.
const MAX_DISRUPTED_PODS: usize = 2000;

fn budget_refusal(cause: String, retry_after: u64) -> ApiError {
    let mut err = ApiError::too_many_requests(
        VIOLATES_BUDGET,
        json!([{"reason": "DisruptionBudget", "message": cause}]),
    );
    if retry_after > 0
        && let Some(details) = err.details.as_mut()
    {
        details["retryAfterSeconds"] = json!(retry_after);
    }
    err
}

fn pdb_forbidden(name: &str, why: &str) -> ApiError {
    ApiError::forbidden(
        "policy",
        "poddisruptionbudget",
        name,
        format!("poddisruptionbudget.policy \"{name}\" is forbidden: {why}"),
    )
}

fn is_ready(pod: &Value) -> bool {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

/// `checkAndDecrement` of the real server: the budget's status must be current and allow a
/// disruption; the new status (one disruption fewer, the pod noted in `disruptedPods`).
fn decremented(pdb: &Stored, pod_name: &str) -> Result<Value, ApiError> {
    let mut value = pdb.value();
    let number = |key: &str| {
        value
            .pointer(&format!("/status/{key}"))
            .and_then(Value::as_i64)
            .unwrap_or(0)
    };
    let generation = value
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if number("observedGeneration") < generation {
        return Err(budget_refusal(
            format!(
                "The disruption budget {} is still being processed by the server.",
                pdb.name
            ),
            10,
        ));
    }
    let allowed = number("disruptionsAllowed");
    if allowed < 0 {
        return Err(pdb_forbidden(
            &pdb.name,
            "pdb disruptions allowed is negative",
        ));
    }
    let disrupted = value
        .pointer("/status/disruptedPods")
        .and_then(Value::as_object)
        .map_or(0, serde_json::Map::len);
    if disrupted > MAX_DISRUPTED_PODS {
        return Err(pdb_forbidden(
            &pdb.name,
            "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
        ));
    }
    if allowed == 0 {
        return Err(budget_refusal(
            format!(
                "The disruption budget {} needs {} healthy pods and has {} currently",
                pdb.name,
                number("desiredHealthy"),
                number("currentHealthy")
            ),
            0,
        ));
    }
    let observed = number("observedGeneration");
    if !value.get("status").is_some_and(Value::is_object) {
        value["status"] = json!({});
    }
    let status = &mut value["status"];
    status["disruptionsAllowed"] = json!(allowed - 1);
    if allowed == 1 {
        set_disruption_allowed_false(status, observed);
    }
    if !status.get("disruptedPods").is_some_and(Value::is_object) {
        status["disruptedPods"] = json!({});
    }
    status["disruptedPods"][pod_name] = json!(now_timestamp());
    Ok(value)
}

/// The `DisruptionAllowed` condition set to False, as the eviction handler does when it takes
/// the last allowed disruption.
fn set_disruption_allowed_false(status: &mut Value, observed_generation: i64) {
    if !status.get("conditions").is_some_and(Value::is_array) {
        status["conditions"] = json!([]);
    }
    let Some(conditions) = status["conditions"].as_array_mut() else {
        return;
    };
    let condition = json!({
        "type": "DisruptionAllowed",
        "status": "False",
        "reason": "InsufficientPods",
        "message": "",
        "observedGeneration": observed_generation,
        "lastTransitionTime": now_timestamp(),
    });
    match conditions
        .iter_mut()
        .find(|c| c["type"] == "DisruptionAllowed")
    {
        Some(existing) => {
            let transition = if existing["status"] == "False" {
                existing["lastTransitionTime"].clone()
            } else {
                condition["lastTransitionTime"].clone()
            };
            *existing = condition;
            existing["lastTransitionTime"] = transition;
        }
        None => conditions.push(condition),
    }
}

/// The real behaviour, atomically under the store's lock.
fn evict_pod(
    inner: &mut Inner,
    namespace: &str,
    name: &str,
    parsed: &Parsed,
    dry_run: bool,
) -> Result<Value, ApiError> {
    let pods = &RESOURCES[PODS];
    let pod = inner
        .object(PODS, namespace, name)
        .cloned()
        .ok_or_else(|| ApiError::not_found(pods, name))?;
    let opts = DeleteOptions {
        uid: parsed.uid.clone(),
        resource_version: parsed.resource_version.clone(),
        grace_period_seconds: parsed.grace,
        dry_run,
    };
    let pod_value = pod.value();
    let terminating = pod_value
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null());
    let ignore_pdb = terminating
        || matches!(
            pod.phase.as_deref(),
            Some("Pending" | "Succeeded" | "Failed")
        );
    if !ignore_pdb {
        // A budget with a missing or empty selector matches nothing here (unlike in the
        // disruption controller), as in the real eviction handler.
        let budgets: Vec<Arc<Stored>> = inner
            .in_namespace(PDBS, namespace)
            .filter(|pdb| {
                let selector = pdb.value().pointer("/spec/selector").cloned();
                let empty = selector
                    .as_ref()
                    .and_then(Value::as_object)
                    .is_none_or(|s| {
                        ["matchLabels", "matchExpressions"].iter().all(|k| {
                            s.get(*k).is_none_or(|v| {
                                v.as_object().is_some_and(serde_json::Map::is_empty)
                                    || v.as_array().is_some_and(Vec::is_empty)
                                    || v.is_null()
                            })
                        })
                    });
                !empty && selector_object_matches(selector.as_ref(), &pod.labels)
            })
            .cloned()
            .collect();
        if budgets.len() > 1 {
            return Err(ApiError::plain(
                500,
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            ));
        }
        if let Some(pdb) = budgets.first() {
            let pdb_value = pdb.value();
            let number = |key: &str| {
                pdb_value
                    .pointer(&format!("/status/{key}"))
                    .and_then(Value::as_i64)
                    .unwrap_or(0)
            };
            let (current, desired) = (number("currentHealthy"), number("desiredHealthy"));
            let unready_and_healthy = !is_ready(&pod_value) && current >= desired && desired > 0;
            if !unready_and_healthy {
                let status = decremented(pdb, name)?;
                if !dry_run {
                    inner.replace(PDBS, pdb, status);
                }
            }
        }
    }
    inner.delete(PODS, &pod, &opts)?;
    Ok(status::success(201, None))
}
