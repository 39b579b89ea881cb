//! Kubernetes errors as people read them, and which of them retrying can fix.
//!
//! Owns [`describe`] (an API error as `reason: message (HTTP code)`, never kube-rs's debug
//! struct) and [`Failure`], the one classification every caller uses: the backend's calls,
//! the watchers and the Lease loop. A permanent failure (401/403, a kind or object the API
//! server does not serve, 422) fails what it was for at once, naming the verb and resource; a
//! transient one (transport, 429 outside evictions, 5xx, 409 Conflict) is retried with backoff.

use rebalancer_backend::BackendError;

/// The API server's `Status` of an error, if it answered with one.
pub fn api_status(e: &kube::Error) -> Option<&kube::core::Status> {
    match e {
        kube::Error::Api(s) => Some(s),
        _ => None,
    }
}

/// `reason: message (HTTP code)` for an API error (`Forbidden: pods "x" is forbidden: … (403)`),
/// kube-rs's own message for a transport or client error.
pub fn describe(e: &kube::Error) -> String {
    match api_status(e) {
        Some(s) => {
            let reason = if s.reason.is_empty() {
                "Failure"
            } else {
                s.reason.as_str()
            };
            let message = if s.message.is_empty() {
                "(no message)"
            } else {
                s.message.as_str()
            };
            format!("{reason}: {message} ({})", s.code)
        }
        None => e.to_string(),
    }
}

/// How a failed Kubernetes call should be handled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// Retrying the same call will not help: 400, 401, 403, 404 (a kind that is not served,
    /// or an object that must exist), 405, 410 on a non-watch call, 422.
    Permanent,
    /// Worth retrying with backoff: no answer, 408, 409 Conflict, 429, 5xx.
    Transient,
}

/// Classify a failure. 404 and 409 are permanent or transient depending on what was asked:
/// callers that expect them (a get of something that may be gone, an optimistic-concurrency
/// write) handle them before classifying.
pub fn classify(e: &kube::Error) -> Failure {
    match api_status(e).map(|s| s.code) {
        None => Failure::Transient,
        Some(408 | 409 | 429) => Failure::Transient,
        Some(code) if code >= 500 => Failure::Transient,
        Some(_) => Failure::Permanent,
    }
}

/// A failed call of `verb` on `resource` (`create pods/eviction in namespace shop`) as the
/// backend reports it: [`BackendError::Forbidden`] or [`BackendError::Invalid`] when retrying
/// cannot help, [`BackendError::Unavailable`] otherwise. The message names the call and the
/// API server's `reason: message (code)`.
pub fn backend_error(verb: &str, resource: &str, e: &kube::Error) -> BackendError {
    let text = format!("{verb} {resource}: {}", describe(e));
    match (classify(e), api_status(e).map(|s| s.code)) {
        (Failure::Permanent, Some(401 | 403)) => BackendError::Forbidden(text),
        (Failure::Permanent, _) => BackendError::Invalid(text),
        (Failure::Transient, _) => BackendError::Unavailable(text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16, reason: &str, message: &str) -> kube::Error {
        let mut status = kube::core::Status::failure(message, reason);
        status.code = code;
        kube::Error::Api(status.into())
    }

    #[test]
    fn api_errors_read_as_reason_message_and_code() {
        let e = api(
            403,
            "Forbidden",
            "pods \"web-1\" is forbidden: User \"system:serviceaccount:rebalancer:rebalancer\" \
             cannot get resource \"pods\" in API group \"\" in the namespace \"shop\"",
        );
        let text = describe(&e);
        assert!(
            text.starts_with("Forbidden: pods \"web-1\" is forbidden"),
            "{text}"
        );
        assert!(text.ends_with("(403)"), "{text}");
        assert!(!text.contains("Status {"), "{text}");
    }

    #[test]
    fn permanent_and_transient_failures() {
        for code in [400, 401, 403, 404, 405, 422] {
            assert_eq!(classify(&api(code, "X", "m")), Failure::Permanent, "{code}");
        }
        for code in [408, 409, 429, 500, 503, 504] {
            assert_eq!(classify(&api(code, "X", "m")), Failure::Transient, "{code}");
        }
        let forbidden = backend_error(
            "get",
            "pods in namespace shop",
            &api(403, "Forbidden", "no"),
        );
        assert!(
            matches!(forbidden, BackendError::Forbidden(_)),
            "{forbidden:?}"
        );
        assert_eq!(
            forbidden.to_string(),
            "forbidden: get pods in namespace shop: Forbidden: no (403)"
        );
        assert!(matches!(
            backend_error("create", "reservations", &api(422, "Invalid", "bad")),
            BackendError::Invalid(_)
        ));
        assert!(backend_error("list", "pods", &api(503, "ServiceUnavailable", "x")).is_transient());
    }
}
