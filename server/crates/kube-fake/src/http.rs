//! The HTTP side: the accept loop (HTTP/1.1 over plain TCP), connection loss while the server
//! is "down", routing of Kubernetes API paths, authentication and authorization of each request
//! before anything else (see [`crate::rbac`]), query parameters, content negotiation, the
//! request handlers of each verb, and the rendering of objects, lists and watch streams.
//!
//! While down, every open connection (watch streams included) is cut and every new connection
//! is accepted and closed at once without an answer: kube-rs sees a connection failure (which
//! its retry layer does not retry, unlike a 503), and watch streams end mid-body.

use std::collections::{BTreeSet, HashMap};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::eviction::Evictions;
use crate::object::Stored;
use crate::patch::PatchKind;
use crate::rbac::{self, Attributes, Caller, Principal};
use crate::resources::{self, RESOURCES, ResourceType, TypeId};
use crate::selector::{FieldSelector, LabelSelector};
use crate::status::{self, ApiError};
use crate::store::{DeleteOptions, Filter, ListOptions, Store, WatchItem, WatchOptions, Writer};
use crate::{Access, Kubelet, OptionalGroup};

/// Largest request body accepted.
const MAX_BODY: usize = 64 << 20;
/// A watch without `timeoutSeconds` ends after this long (the real server picks 30-60 min).
const DEFAULT_WATCH_TIMEOUT: u64 = 1800;

type Body = BoxBody<Bytes, Infallible>;

/// State shared by the handle and the server task.
pub(crate) struct Shared {
    pub store: Store,
    pub evictions: Evictions,
    pub kubelet: Mutex<Kubelet>,
    pub enabled: Mutex<Vec<OptionalGroup>>,
    pub accesses: Mutex<BTreeSet<Access>>,
    /// The accesses of each bearer token (`""`: requests without one).
    pub accesses_by: Mutex<HashMap<String, BTreeSet<Access>>>,
    /// Requests RBAC denied, with their namespace (`""` when cluster-scoped).
    pub denied: Mutex<Vec<(Access, String)>>,
    /// Service accounts by bearer token.
    pub accounts: Mutex<HashMap<String, Arc<Principal>>>,
    pub requests: AtomicU64,
    /// `true` while the server plays connection loss.
    pub down: watch::Sender<bool>,
    pub addr: SocketAddr,
}

impl Shared {
    pub(crate) fn new(addr: SocketAddr, groups: &[OptionalGroup]) -> Shared {
        Shared {
            store: Store::default(),
            evictions: Evictions::default(),
            kubelet: Mutex::new(Kubelet::default()),
            enabled: Mutex::new(groups.to_vec()),
            accesses: Mutex::new(BTreeSet::new()),
            accesses_by: Mutex::new(HashMap::new()),
            denied: Mutex::new(Vec::new()),
            accounts: Mutex::new(HashMap::new()),
            requests: AtomicU64::new(0),
            down: watch::channel(false).0,
            addr,
        }
    }

    pub(crate) fn kubelet(&self) -> Kubelet {
        *self
            .kubelet
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn enabled(&self) -> Vec<OptionalGroup> {
        self.enabled
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    fn record(&self, token: &str, access: &Access) {
        self.accesses
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(access.clone());
        self.accesses_by
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(token.to_string())
            .or_default()
            .insert(access.clone());
    }

    /// The bearer token of a request (`""` if none) and who it is.
    fn caller(&self, headers: &http::HeaderMap) -> (String, Caller) {
        let Some(value) = headers.get(header::AUTHORIZATION) else {
            return (String::new(), Caller::Admin);
        };
        let Some(token) = value
            .to_str()
            .ok()
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim)
        else {
            return (String::new(), Caller::Unknown);
        };
        let caller = if token == rbac::ADMIN_TOKEN {
            Caller::Admin
        } else {
            match self
                .accounts
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .get(token)
            {
                Some(principal) => Caller::Account(principal.clone()),
                None => Caller::Unknown,
            }
        };
        (token.to_string(), caller)
    }
}

/// Accepts connections until `stop` changes or its sender is dropped.
pub(crate) async fn serve(
    listener: TcpListener,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<()>,
) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    if *shared.down.borrow() {
                        drop(stream);
                        continue;
                    }
                    let _ = stream.set_nodelay(true);
                    let shared = shared.clone();
                    connections.spawn(async move {
                        let mut down = shared.down.subscribe();
                        let service_state = shared.clone();
                        let service = service_fn(move |req| {
                            let shared = service_state.clone();
                            async move { Ok::<_, Infallible>(handle(&shared, req).await) }
                        });
                        let connection = hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), service);
                        tokio::select! {
                            result = connection => {
                                if let Err(e) = result {
                                    tracing::debug!("kube-fake connection ended: {e}");
                                }
                            }
                            _ = down.wait_for(|d| *d) => {}
                        }
                    });
                }
                Err(e) => {
                    tracing::warn!("kube-fake accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            _ = stop.changed() => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

fn full(status: StatusCode, content_type: &str, body: Vec<u8>) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(body)).boxed());
    *response.status_mut() = status;
    if let Ok(v) = HeaderValue::from_str(content_type) {
        response.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    response
}

fn json_response(status: u16, value: &Value) -> Response<Body> {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    full(
        status,
        "application/json",
        serde_json::to_vec(value).unwrap_or_default(),
    )
}

fn raw_response(status: u16, body: Vec<u8>) -> Response<Body> {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    full(status, "application/json", body)
}

fn error_response(err: &ApiError) -> Response<Body> {
    let mut response = json_response(err.code, &err.to_status());
    // The real server's response writer sends a Retry-After with a status that suggests one.
    if let Some(seconds) = err
        .details
        .as_ref()
        .and_then(|d| d.get("retryAfterSeconds"))
        .and_then(Value::as_u64)
        .filter(|s| *s > 0)
        && let Ok(v) = HeaderValue::from_str(&seconds.to_string())
    {
        response.headers_mut().insert(header::RETRY_AFTER, v);
    }
    response
}

/// Query parameters, decoded.
struct Query(Vec<(String, String)>);

impl Query {
    fn parse(query: Option<&str>) -> Query {
        Query(
            form_urlencoded::parse(query.unwrap_or("").as_bytes())
                .filter(|(k, _)| !k.is_empty())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        )
    }

    fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Go's `strconv.ParseBool`, as the server parses boolean parameters.
    fn flag(&self, key: &str) -> Result<bool, ApiError> {
        match self.get(key) {
            None | Some("") => Ok(false),
            Some("1" | "t" | "T" | "true" | "TRUE" | "True") => Ok(true),
            Some("0" | "f" | "F" | "false" | "FALSE" | "False") => Ok(false),
            Some(other) => Err(ApiError::bad_request(format!(
                "invalid value {other:?} for the boolean parameter {key}"
            ))),
        }
    }

    fn number(&self, key: &str) -> Result<Option<u64>, ApiError> {
        self.get(key)
            .filter(|v| !v.is_empty())
            .map(|v| {
                v.parse()
                    .map_err(|_| ApiError::bad_request(format!("invalid value {v:?} for {key}")))
            })
            .transpose()
    }

    fn dry_run(&self) -> Result<bool, ApiError> {
        match self.get("dryRun") {
            None | Some("") => Ok(false),
            Some("All") => Ok(true),
            Some(other) => Err(ApiError::bad_request(format!(
                "unsupported dry run directive {other:?}"
            ))),
        }
    }
}

/// Where a resource request goes.
#[derive(Debug, PartialEq)]
struct Target {
    group: String,
    version: String,
    resource: String,
    namespace: Option<String>,
    name: Option<String>,
    subresource: Option<String>,
}

#[derive(Debug, PartialEq)]
enum Route {
    Version,
    Health,
    CoreVersions,
    CoreResources(String),
    Groups,
    Group(String),
    GroupResources(String, String),
    Resource(Target),
    Unknown,
}

fn resource_target(group: &str, version: &str, rest: &[&str]) -> Route {
    let namespaced =
        rest.len() >= 3 && rest[0] == "namespaces" && !matches!(rest[2], "status" | "finalize");
    let (namespace, rest) = if namespaced {
        (Some(rest[1].to_string()), &rest[2..])
    } else {
        (None, rest)
    };
    if rest.is_empty() || rest.len() > 3 {
        return Route::Unknown;
    }
    Route::Resource(Target {
        group: group.to_string(),
        version: version.to_string(),
        resource: rest[0].to_string(),
        namespace,
        name: rest.get(1).map(|s| (*s).to_string()),
        subresource: rest.get(2).map(|s| (*s).to_string()),
    })
}

fn route(path: &str) -> Route {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    match segments.as_slice() {
        ["version"] => Route::Version,
        ["healthz" | "livez" | "readyz"] => Route::Health,
        ["api"] => Route::CoreVersions,
        ["api", version] => Route::CoreResources((*version).to_string()),
        ["api", version, rest @ ..] => resource_target("", version, rest),
        ["apis"] => Route::Groups,
        ["apis", group] => Route::Group((*group).to_string()),
        ["apis", group, version] => {
            Route::GroupResources((*group).to_string(), (*version).to_string())
        }
        ["apis", group, version, rest @ ..] => resource_target(group, version, rest),
        _ => Route::Unknown,
    }
}

fn verb_of(method: &Method, target: &Target, watch: bool) -> Option<&'static str> {
    Some(match *method {
        Method::GET if watch => "watch",
        Method::GET if target.name.is_some() => "get",
        Method::GET => "list",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE if target.name.is_some() => "delete",
        Method::DELETE => "deletecollection",
        _ => return None,
    })
}

async fn handle(shared: &Shared, req: Request<Incoming>) -> Response<Body> {
    shared.requests.fetch_add(1, Ordering::Relaxed);
    let accept = req
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let enabled = shared.enabled();
    let (token, caller) = shared.caller(req.headers());
    let path = req.uri().path().to_string();
    let route = route(&path);
    if !matches!(route, Route::Resource(_)) {
        match &caller {
            Caller::Unknown => return error_response(&ApiError::unauthorized()),
            Caller::Account(principal)
                if !(req.method() == Method::GET && rbac::discovery_path(&path)) =>
            {
                let verb = req.method().as_str().to_ascii_lowercase();
                return error_response(&rbac::forbidden_path(&principal.user, &verb, &path));
            }
            Caller::Account(_) | Caller::Admin => {}
        }
    }
    match route {
        Route::Version => json_response(200, &resources::version_info()),
        Route::Health => full(StatusCode::OK, "text/plain", b"ok".to_vec()),
        Route::CoreVersions if resources::wants_aggregated(&accept) => aggregated(&enabled, true),
        Route::CoreVersions => {
            json_response(200, &resources::core_versions(&shared.addr.to_string()))
        }
        Route::Groups if resources::wants_aggregated(&accept) => aggregated(&enabled, false),
        Route::Groups => json_response(200, &resources::group_list(&enabled)),
        Route::Group(group) => match resources::group(&enabled, &group) {
            Some(doc) => json_response(200, &doc),
            None => error_response(&ApiError::no_route()),
        },
        Route::CoreResources(version) => discovery_resources(&enabled, "", &version),
        Route::GroupResources(group, version) => discovery_resources(&enabled, &group, &version),
        Route::Resource(target) => {
            let query = Query::parse(req.uri().query());
            let (parts, body) = req.into_parts();
            let meta_only = accept.contains("as=PartialObjectMetadata");
            let request = ResourceRequest {
                shared,
                method: parts.method,
                content_type: parts
                    .headers
                    .get(header::CONTENT_TYPE)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_string(),
                target,
                query,
                meta_only,
                user_agent: parts
                    .headers
                    .get(header::USER_AGENT)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_string(),
                token,
                caller,
            };
            request.serve(body, &enabled).await
        }
        Route::Unknown => error_response(&ApiError::no_route()),
    }
}

fn aggregated(enabled: &[OptionalGroup], core: bool) -> Response<Body> {
    let body = serde_json::to_vec(&resources::aggregated(enabled, core)).unwrap_or_default();
    full(StatusCode::OK, resources::AGGREGATED_MEDIA_TYPE, body)
}

fn discovery_resources(enabled: &[OptionalGroup], group: &str, version: &str) -> Response<Body> {
    match resources::resource_list(enabled, group, version) {
        Some(doc) => json_response(200, &doc),
        None => error_response(&ApiError::no_route()),
    }
}

struct ResourceRequest<'a> {
    shared: &'a Shared,
    method: Method,
    content_type: String,
    target: Target,
    query: Query,
    meta_only: bool,
    user_agent: String,
    token: String,
    caller: Caller,
}

/// What a resource handler answers.
enum Answer {
    Object(u16, Arc<Stored>),
    Json(u16, Value),
    Raw(Vec<u8>),
    Stream(Body),
    Warned(Result<Value, ApiError>, Vec<String>),
}

impl ResourceRequest<'_> {
    async fn serve(self, body: Incoming, enabled: &[OptionalGroup]) -> Response<Body> {
        let watch = match self.query.flag("watch") {
            Ok(w) => w,
            Err(e) => return error_response(&e),
        };
        let target = &self.target;
        let Some(verb) = verb_of(&self.method, target, watch) else {
            return error_response(&ApiError::method_not_allowed());
        };
        let access = Access {
            verb: verb.to_string(),
            group: target.group.clone(),
            resource: target.resource.clone(),
            subresource: target.subresource.clone().unwrap_or_default(),
        };
        self.shared.record(&self.token, &access);
        if let Err(e) = self.authorize(verb, access) {
            return error_response(&e);
        }
        let body = match Limited::new(body, MAX_BODY).collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(_) => return error_response(&ApiError::too_large("the request body is too large")),
        };
        let answer = self.answer(verb, &body, enabled);
        match answer {
            Ok(Answer::Object(code, object)) => raw_response(code, self.render(&object)),
            Ok(Answer::Json(code, value)) => json_response(code, &value),
            Ok(Answer::Raw(bytes)) => raw_response(200, bytes),
            Ok(Answer::Stream(body)) => {
                let mut response = Response::new(body);
                response.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                );
                response
            }
            Ok(Answer::Warned(result, warnings)) => {
                let mut response = match result {
                    Ok(value) => json_response(201, &value),
                    Err(e) => error_response(&e),
                };
                for warning in warnings {
                    if let Ok(v) = HeaderValue::from_str(&warning) {
                        response.headers_mut().append(header::WARNING, v);
                    }
                }
                response
            }
            Err(e) => error_response(&e),
        }
    }

    /// Authentication and RBAC, before anything else (as on a real server, a denied request
    /// learns nothing, not even whether the resource exists).
    fn authorize(&self, verb: &str, access: Access) -> Result<(), ApiError> {
        let principal = match &self.caller {
            Caller::Admin => return Ok(()),
            Caller::Unknown => return Err(ApiError::unauthorized()),
            Caller::Account(principal) => principal,
        };
        let t = &self.target;
        let name = match t.name.as_deref() {
            Some(name) => name,
            None if matches!(verb, "list" | "watch") => self
                .query
                .get("fieldSelector")
                .and_then(rbac::selector_name)
                .unwrap_or(""),
            None => "",
        };
        // A namespace's own URL is in that namespace, as the real request info has it.
        let namespace = match (&t.namespace, t.group.as_str(), t.resource.as_str()) {
            (Some(ns), _, _) => ns.as_str(),
            (None, "", "namespaces") => name,
            (None, _, _) => "",
        };
        let attributes = Attributes {
            verb,
            group: &t.group,
            resource: &t.resource,
            subresource: t.subresource.as_deref().unwrap_or(""),
            namespace,
            name,
        };
        if principal.allows(&attributes) {
            return Ok(());
        }
        self.shared
            .denied
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push((access, namespace.to_string()));
        Err(rbac::forbidden(&principal.user, &attributes))
    }

    fn render(&self, object: &Stored) -> Vec<u8> {
        if self.meta_only {
            object.partial_metadata()
        } else {
            object.raw.to_vec()
        }
    }

    fn resource_type(
        &self,
        enabled: &[OptionalGroup],
    ) -> Result<(TypeId, &'static ResourceType), ApiError> {
        let t = &self.target;
        let tid = resources::by_plural(&t.group, &t.version, &t.resource)
            .filter(|tid| resources::served(&RESOURCES[*tid], enabled))
            .ok_or_else(ApiError::no_route)?;
        let rt = &RESOURCES[tid];
        // A namespace on a cluster-scoped resource, or a named namespaced object without one,
        // is no route on a real server either.
        if (t.namespace.is_some() && !rt.namespaced)
            || (rt.namespaced && t.namespace.is_none() && t.name.is_some())
        {
            return Err(ApiError::no_route());
        }
        Ok((tid, rt))
    }

    fn filter(&self, rt: &ResourceType) -> Result<Filter, ApiError> {
        let labels = LabelSelector::parse(self.query.get("labelSelector").unwrap_or(""))
            .map_err(ApiError::bad_request)?;
        let fields = FieldSelector::parse(self.query.get("fieldSelector").unwrap_or(""), rt.fields)
            .map_err(ApiError::bad_request)?;
        Ok(Filter {
            namespace: self.target.namespace.clone(),
            labels,
            fields,
        })
    }

    fn body_object(&self, body: &[u8]) -> Result<Value, ApiError> {
        let media = self.content_type.split(';').next().unwrap_or("").trim();
        match media {
            "" | "application/json" | "*/*" => serde_json::from_slice(body).map_err(|e| {
                ApiError::bad_request(format!("the request body is not valid JSON: {e}"))
            }),
            "application/yaml" => serde_yaml::from_slice(body).map_err(|e| {
                ApiError::bad_request(format!("the request body is not valid YAML: {e}"))
            }),
            other => Err(ApiError::unsupported_media_type(format!(
                "the body of the request was in an unknown format ({other}) - accepted media types include: application/json, application/yaml"
            ))),
        }
    }

    fn answer(
        &self,
        verb: &str,
        body: &[u8],
        enabled: &[OptionalGroup],
    ) -> Result<Answer, ApiError> {
        let (tid, rt) = self.resource_type(enabled)?;
        let t = &self.target;
        let namespace = t.namespace.as_deref().unwrap_or("");
        let status_only = match t.subresource.as_deref() {
            None => {
                if !rt.supports(verb) || (verb == "create" && t.name.is_some()) {
                    return Err(ApiError::method_not_allowed());
                }
                false
            }
            Some("status") if rt.status => {
                if !resources::STATUS_VERBS.contains(&verb) {
                    return Err(ApiError::method_not_allowed());
                }
                true
            }
            Some("eviction") if rt.eviction => {
                if verb != "create" {
                    return Err(ApiError::method_not_allowed());
                }
                let name = t.name.as_deref().unwrap_or("");
                let answer = self.shared.evictions.evict(
                    &self.shared.store,
                    namespace,
                    name,
                    body,
                    self.query.dry_run()?,
                );
                return Ok(Answer::Warned(answer.result, answer.warnings));
            }
            Some(_) => return Err(ApiError::no_route()),
        };
        if matches!(verb, "update" | "patch") && t.name.is_none() {
            return Err(ApiError::method_not_allowed());
        }
        let store = &self.shared.store;
        let name = t.name.as_deref().unwrap_or("");
        let writer = self.writer()?;
        match verb {
            "get" => store
                .get(tid, crate::store::namespace_of(rt, namespace), name)
                .map(|o| Answer::Object(200, o))
                .ok_or_else(|| ApiError::not_found(rt, name)),
            "list" => self.list(tid, rt),
            "watch" => self.watch(tid, rt),
            "create" => {
                let object = self.body_object(body)?;
                store
                    .create(tid, namespace, object, &writer)
                    .map(|o| Answer::Object(201, o))
            }
            "update" => {
                let object = self.body_object(body)?;
                store
                    .update(tid, namespace, name, object, status_only, &writer)
                    .map(|(o, created)| Answer::Object(if created { 201 } else { 200 }, o))
            }
            "patch" => {
                let kind = PatchKind::from_content_type(&self.content_type).ok_or_else(|| {
                    ApiError::unsupported_media_type(format!(
                        "the body of the request was in an unknown format - accepted media types include: \
                         application/json-patch+json, application/merge-patch+json, \
                         application/apply-patch+yaml (got {:?})",
                        self.content_type
                    ))
                })?;
                let patch = self.patch_body(kind, body)?;
                store
                    .patch(tid, namespace, name, kind, &patch, status_only, &writer)
                    .map(|(o, created)| Answer::Object(if created { 201 } else { 200 }, o))
            }
            "delete" => {
                let opts = self.delete_options(body)?;
                let deletion = store.delete(tid, namespace, name, &opts)?;
                let gone = deletion.object;
                // Pods and namespaces answer with the object; other kinds with a Status once
                // removed, and with the object while finalizers hold it (the real store's
                // update path).
                let returns_object =
                    matches!(rt.plural, "pods" | "namespaces") && rt.group.is_empty();
                if returns_object || !deletion.removed {
                    Ok(Answer::Object(200, gone))
                } else {
                    let mut details =
                        serde_json::json!({"name": name, "kind": rt.plural, "uid": &*gone.uid});
                    if !rt.group.is_empty() {
                        details["group"] = Value::String(rt.group.to_string());
                    }
                    Ok(Answer::Json(200, status::success(200, Some(details))))
                }
            }
            "deletecollection" => {
                let filter = self.filter(rt)?;
                let opts = self.delete_options(body)?;
                let gone = store.delete_collection(tid, &filter, &opts)?;
                Ok(Answer::Raw(self.render_list(
                    rt,
                    &gone,
                    store.current_rv(),
                    None,
                )))
            }
            _ => Err(ApiError::method_not_allowed()),
        }
    }

    /// The field manager is `fieldManager`, else the product in the User-Agent (as the real
    /// server derives it), else `unknown`.
    fn writer(&self) -> Result<Writer, ApiError> {
        let from_agent = self.user_agent.split('/').next().unwrap_or("").trim();
        let manager = match self.query.get("fieldManager") {
            Some(m) if !m.is_empty() => m,
            _ if !from_agent.is_empty() => from_agent,
            _ => "unknown",
        };
        Ok(Writer {
            manager: manager.to_string(),
            force: self.query.flag("force")?,
            dry_run: self.query.dry_run()?,
        })
    }

    fn patch_body(&self, kind: PatchKind, body: &[u8]) -> Result<Value, ApiError> {
        if kind == PatchKind::Apply {
            if self.query.get("fieldManager").is_none_or(str::is_empty) {
                return Err(ApiError::unprocessable(
                    "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
                ));
            }
            // JSON is YAML, but parse it as JSON first: it is what kube-rs sends, and faster.
            return serde_json::from_slice(body).or_else(|_| {
                serde_yaml::from_slice(body).map_err(|e| {
                    ApiError::bad_request(format!("the apply configuration is not valid YAML: {e}"))
                })
            });
        }
        serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("the patch is not valid JSON: {e}")))
    }

    fn delete_options(&self, body: &[u8]) -> Result<DeleteOptions, ApiError> {
        let grace = self
            .query
            .get("gracePeriodSeconds")
            .filter(|g| !g.is_empty())
            .map(|g| {
                g.parse::<i64>().map_err(|_| {
                    ApiError::bad_request(format!("invalid value {g:?} for gracePeriodSeconds"))
                })
            })
            .transpose()?;
        let mut opts = DeleteOptions {
            dry_run: self.query.dry_run()?,
            grace_period_seconds: grace,
            ..DeleteOptions::default()
        };
        if body.iter().all(u8::is_ascii_whitespace) {
            return Ok(opts);
        }
        let value: Value = serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("invalid DeleteOptions: {e}")))?;
        let text = |pointer: &str| {
            value
                .pointer(pointer)
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        opts.uid = text("/preconditions/uid");
        opts.resource_version = text("/preconditions/resourceVersion");
        if let Some(grace) = value.get("gracePeriodSeconds").and_then(Value::as_i64) {
            opts.grace_period_seconds = Some(grace);
        }
        if value
            .get("dryRun")
            .and_then(Value::as_array)
            .is_some_and(|d| d.iter().any(|v| v == "All"))
        {
            opts.dry_run = true;
        }
        Ok(opts)
    }

    fn list(&self, tid: TypeId, rt: &ResourceType) -> Result<Answer, ApiError> {
        let opts = ListOptions {
            filter: self.filter(rt)?,
            limit: self.query.number("limit")?.map(|l| l as usize),
            continue_token: self
                .query
                .get("continue")
                .filter(|c| !c.is_empty())
                .map(str::to_string),
            resource_version: self.query.get("resourceVersion").map(str::to_string),
            version_match: self
                .query
                .get("resourceVersionMatch")
                .filter(|m| !m.is_empty())
                .map(str::to_string),
        };
        let page = self.shared.store.list(tid, &opts)?;
        Ok(Answer::Raw(self.render_list(
            rt,
            &page.items,
            page.resource_version,
            page.continue_token.as_deref(),
        )))
    }

    fn render_list(
        &self,
        rt: &ResourceType,
        items: &[Arc<Stored>],
        rv: u64,
        continue_token: Option<&str>,
    ) -> Vec<u8> {
        let size: usize = items.iter().map(|o| o.raw.len() + 1).sum();
        let mut out = Vec::with_capacity(size + 200);
        let (kind, api_version) = if self.meta_only {
            (
                "PartialObjectMetadataList".to_string(),
                "meta.k8s.io/v1".to_string(),
            )
        } else {
            (rt.list_kind(), rt.api_version())
        };
        out.extend_from_slice(
            format!(r#"{{"kind":"{kind}","apiVersion":"{api_version}","metadata":{{"resourceVersion":"{rv}""#).as_bytes(),
        );
        if let Some(token) = continue_token {
            out.extend_from_slice(format!(r#","continue":"{token}""#).as_bytes());
        }
        out.extend_from_slice(br#"},"items":["#);
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            if self.meta_only {
                out.extend_from_slice(&item.partial_metadata());
            } else {
                out.extend_from_slice(&item.raw);
            }
        }
        out.extend_from_slice(b"]}");
        out
    }

    fn watch(&self, tid: TypeId, rt: &'static ResourceType) -> Result<Answer, ApiError> {
        let opts = WatchOptions {
            filter: self.filter(rt)?,
            resource_version: self.query.get("resourceVersion").map(str::to_string),
            bookmarks: self.query.flag("allowWatchBookmarks")?,
            send_initial_events: self.query.flag("sendInitialEvents")?,
        };
        let timeout = self
            .query
            .number("timeoutSeconds")?
            .unwrap_or(DEFAULT_WATCH_TIMEOUT);
        let start = self.shared.store.watch(tid, opts)?;
        let meta_only = self.meta_only;
        let initial = futures::stream::iter(start.initial);
        let live = futures::stream::unfold(start.rx, |rx| async move {
            let mut rx = rx?;
            let item = rx.recv().await?;
            Some((item, Some(rx)))
        });
        let deadline = tokio::time::sleep(Duration::from_secs(timeout));
        let lines = initial
            .chain(live)
            .map(move |item| {
                Ok::<_, Infallible>(Frame::data(Bytes::from(watch_line(rt, &item, meta_only))))
            })
            .take_until(deadline);
        Ok(Answer::Stream(BodyExt::boxed(StreamBody::new(lines))))
    }
}

/// One line of a watch stream.
fn watch_line(rt: &ResourceType, item: &WatchItem, meta_only: bool) -> Vec<u8> {
    fn event(kind: &str, object: &[u8]) -> Vec<u8> {
        let mut line = Vec::with_capacity(object.len() + 32);
        line.extend_from_slice(br#"{"type":""#);
        line.extend_from_slice(kind.as_bytes());
        line.extend_from_slice(br#"","object":"#);
        line.extend_from_slice(object);
        line.extend_from_slice(b"}\n");
        line
    }
    let body = |object: &Stored| {
        if meta_only {
            object.partial_metadata()
        } else {
            object.raw.to_vec()
        }
    };
    match item {
        WatchItem::Event(kind, object) => event(kind.as_str(), &body(object)),
        WatchItem::Left(prev, rv) => event("DELETED", &body(&prev.at_resource_version(*rv))),
        WatchItem::Bookmark(rv, initial_end) => {
            let (kind, api_version) = if meta_only {
                (
                    "PartialObjectMetadata".to_string(),
                    "meta.k8s.io/v1".to_string(),
                )
            } else {
                (rt.kind.to_string(), rt.api_version())
            };
            let mut metadata =
                serde_json::json!({"resourceVersion": rv.to_string(), "creationTimestamp": null});
            if *initial_end {
                metadata["annotations"] = serde_json::json!({"k8s.io/initial-events-end": "true"});
            }
            let object =
                serde_json::json!({"kind": kind, "apiVersion": api_version, "metadata": metadata});
            event("BOOKMARK", &serde_json::to_vec(&object).unwrap_or_default())
        }
        WatchItem::Expired(requested, oldest) => {
            let status =
                ApiError::expired(format!("too old resource version: {requested} ({oldest})"))
                    .to_status();
            event("ERROR", &serde_json::to_vec(&status).unwrap_or_default())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(
        group: &str,
        resource: &str,
        ns: Option<&str>,
        name: Option<&str>,
        sub: Option<&str>,
    ) -> Route {
        Route::Resource(Target {
            group: group.into(),
            version: "v1".into(),
            resource: resource.into(),
            namespace: ns.map(Into::into),
            name: name.map(Into::into),
            subresource: sub.map(Into::into),
        })
    }

    #[test]
    fn routes() {
        assert_eq!(route("/api/v1/pods"), target("", "pods", None, None, None));
        assert_eq!(
            route("/api/v1/namespaces/a/pods"),
            target("", "pods", Some("a"), None, None)
        );
        assert_eq!(
            route("/api/v1/namespaces/a/pods/p/eviction"),
            target("", "pods", Some("a"), Some("p"), Some("eviction"))
        );
        assert_eq!(
            route("/api/v1/namespaces"),
            target("", "namespaces", None, None, None)
        );
        assert_eq!(
            route("/api/v1/namespaces/a"),
            target("", "namespaces", None, Some("a"), None)
        );
        assert_eq!(
            route("/api/v1/namespaces/a/status"),
            target("", "namespaces", None, Some("a"), Some("status"))
        );
        assert_eq!(
            route("/apis/policy/v1/namespaces/a/poddisruptionbudgets/b"),
            target("policy", "poddisruptionbudgets", Some("a"), Some("b"), None)
        );
        assert_eq!(
            route("/apis/policy/v1"),
            Route::GroupResources("policy".into(), "v1".into())
        );
        assert_eq!(
            route("/api/v1/namespaces/a/pods/p/status/extra"),
            Route::Unknown
        );
        assert_eq!(route("/nope"), Route::Unknown);
    }

    #[test]
    fn query_flags_parse_like_go() {
        let q = Query::parse(Some("&watch=1&allowWatchBookmarks=true&x=maybe&limit=5"));
        assert!(q.flag("watch").unwrap());
        assert!(q.flag("allowWatchBookmarks").unwrap());
        assert!(!q.flag("absent").unwrap());
        assert!(q.flag("x").is_err());
        assert_eq!(q.number("limit").unwrap(), Some(5));
        assert!(Query::parse(Some("limit=x")).number("limit").is_err());
    }
}
