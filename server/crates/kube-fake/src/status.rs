//! Failure answers: [`ApiError`] and its rendering as a `meta/v1` `Status` object, with the
//! reasons, codes and messages the real API server uses, so that kube-rs decodes them into
//! `kube::Error::Api`.

use serde_json::{Value, json};

use crate::resources::ResourceType;

/// A request that failed; rendered as a `Status` with `status: Failure`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Value>,
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    fn resource_details(rt: &ResourceType, name: &str) -> Value {
        let mut d = json!({"name": name, "kind": rt.plural});
        if !rt.group.is_empty() {
            d["group"] = json!(rt.group);
        }
        d
    }

    pub(crate) fn not_found(rt: &ResourceType, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", rt.qualified()),
        )
        .with_details(Self::resource_details(rt, name))
    }

    /// What the server answers for a path it does not serve.
    pub(crate) fn no_route() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
        .with_details(json!({}))
    }

    pub(crate) fn already_exists(rt: &ResourceType, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", rt.qualified()),
        )
        .with_details(Self::resource_details(rt, name))
    }

    /// 409 Conflict; `cause` is what follows "Operation cannot be fulfilled on ...: ".
    pub(crate) fn conflict(rt: &ResourceType, name: &str, cause: &str) -> Self {
        Self::conflict_named(&rt.qualified(), rt, name, cause)
    }

    /// 409 Conflict naming the resource as `resource` in the message (the eviction subresource
    /// says `Pod`, not `pods`).
    pub(crate) fn conflict_named(
        resource: &str,
        rt: &ResourceType,
        name: &str,
        cause: &str,
    ) -> Self {
        Self::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {resource} \"{name}\": {cause}"),
        )
        .with_details(Self::resource_details(rt, name))
    }

    /// 409 for a server-side apply that would change fields other managers own.
    pub(crate) fn apply_conflict(
        rt: &ResourceType,
        name: &str,
        message: String,
        causes: Vec<Value>,
    ) -> Self {
        let mut details = Self::resource_details(rt, name);
        details["causes"] = Value::Array(causes);
        Self::new(409, "Conflict", message).with_details(details)
    }

    /// The optimistic-concurrency conflict of an update with a stale resourceVersion.
    pub(crate) fn stale(rt: &ResourceType, name: &str) -> Self {
        Self::conflict(
            rt,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub(crate) fn invalid(rt: &ResourceType, name: &str, message: impl Into<String>) -> Self {
        let message = message.into();
        Self::new(
            422,
            "Invalid",
            format!("{} \"{name}\" is invalid: {message}", rt.kind),
        )
        .with_details(json!({
            "name": name,
            "group": rt.group,
            "kind": rt.kind,
            "causes": [{"reason": "FieldValueInvalid", "message": message}],
        }))
    }

    /// 422 for a patch that cannot be applied (a failed JSON-patch `test`, a missing path).
    pub(crate) fn unprocessable(message: impl Into<String>) -> Self {
        Self::new(422, "Invalid", message)
    }

    pub(crate) fn method_not_allowed() -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )
        .with_details(json!({}))
    }

    pub(crate) fn unsupported_media_type(message: impl Into<String>) -> Self {
        Self::new(415, "UnsupportedMediaType", message)
    }

    pub(crate) fn too_large(message: impl Into<String>) -> Self {
        Self::new(413, "RequestEntityTooLarge", message)
    }

    /// 410 Expired, e.g. `too old resource version: 5 (10)`.
    pub(crate) fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    pub(crate) fn internal(message: impl std::fmt::Display) -> Self {
        let message = message.to_string();
        Self::new(
            500,
            "InternalError",
            format!("Internal error occurred: {message}"),
        )
        .with_details(json!({"causes": [{"message": message}]}))
    }

    /// 403 Forbidden; `message` is the whole message, `group`/`resource`/`name` the details.
    pub(crate) fn forbidden(group: &str, resource: &str, name: &str, message: String) -> Self {
        let mut details = json!({});
        if !resource.is_empty() {
            details["kind"] = json!(resource);
        }
        if !name.is_empty() {
            details["name"] = json!(name);
        }
        if !group.is_empty() {
            details["group"] = json!(group);
        }
        Self::new(403, "Forbidden", message).with_details(details)
    }

    /// 401 Unauthorized, as the real server answers a token it does not know.
    pub(crate) fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    /// A failure `Status` a handler returns as its result (no reason), like the eviction
    /// subresource's refusal of a pod with two budgets.
    pub(crate) fn plain(code: u16, message: impl Into<String>) -> Self {
        Self::new(code, "", message)
    }

    pub(crate) fn too_many_requests(message: impl Into<String>, causes: Value) -> Self {
        Self::new(429, "TooManyRequests", message).with_details(json!({"causes": causes}))
    }

    /// 504 for a resourceVersion newer than the server's.
    pub(crate) fn too_large_resource_version(requested: u64, current: u64) -> Self {
        Self::new(
            504,
            "Timeout",
            format!("Timeout: Too large resource version: {requested}, current: {current}"),
        )
        .with_details(json!({
            "causes": [{
                "reason": "ResourceVersionTooLarge",
                "message": "Too large resource version"
            }],
            "retryAfterSeconds": 1
        }))
    }

    /// The `Status` object.
    pub(crate) fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if self.reason.is_empty()
            && let Some(map) = status.as_object_mut()
        {
            map.remove("reason");
        }
        if let Some(details) = &self.details {
            status["details"] = details.clone();
        }
        status
    }
}

/// A `Status` with `status: Success`, as answered by a successful eviction or a delete of a
/// resource that does not return the deleted object.
pub(crate) fn success(code: u16, details: Option<Value>) -> Value {
    let mut status = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "code": code,
    });
    if let Some(details) = details {
        status["details"] = details;
    }
    status
}
