//! Request extractors whose rejections use the API's error shape, and body helpers.
//!
//! Every JSON and YAML body is checked for its structure before it is decoded
//! ([`rebalancer_cluster::document`]: nesting at most `MAX_DEPTH` deep, no repeated key):
//! [`ApiJson`] does it for typed JSON bodies, [`decode_json`] and [`decode_yaml`] for the
//! handlers that read raw bodies.

use axum::body::Body;
use axum::body::Bytes;
use axum::extract::FromRequest;
use axum::extract::rejection::JsonRejection;
use axum::http::{HeaderMap, StatusCode, header};
use futures::StreamExt;
use serde::de::DeserializeOwned;

use super::error::ApiError;
use super::serve::BodyIdleTimeout;
use crate::strict_json::{self, Object};
use rebalancer_cluster::document;

/// `axum::Json` of a JSON object (the request bodies are structs: an array in their place is
/// refused, and an integer may be written `192.0`: see [`crate::strict_json`]), its structure
/// (nesting depth, repeated keys) checked first, with rejections as [`ApiError`].
#[derive(Debug)]
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self, ApiError> {
        if !is_json(req.headers()) {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "Expected request with `Content-Type: application/json`",
            ));
        }
        let bytes = Bytes::from_request(req, state).await?;
        document::check_json(&bytes)?;
        match axum::Json::<Object<T>>::from_bytes(&bytes) {
            Ok(axum::Json(Object(value))) => Ok(ApiJson(value)),
            // `192.0` where the document says integer, read as `192`.
            Err(rejection @ JsonRejection::JsonDataError(_)) => {
                match strict_json::from_slice_with_integers::<Object<T>>(&bytes) {
                    Some(Object(value)) => Ok(ApiJson(value)),
                    None => Err(rejection.into()),
                }
            }
            Err(rejection) => Err(rejection.into()),
        }
    }
}

/// `Content-Type: application/json` or `application/*+json`, as `axum::Json` requires.
fn is_json(headers: &HeaderMap) -> bool {
    let essence = media_type(headers);
    essence == "application/json"
        || essence
            .strip_prefix("application/")
            .is_some_and(|sub| sub.ends_with("+json"))
}

/// The media type of the Content-Type header, lower-cased, without parameters (`""` if none).
fn media_type(headers: &HeaderMap) -> String {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

/// A raw JSON body decoded after its structure was checked (an integer may be written `192.0`,
/// as in [`ApiJson`]); `invalid` words a decoding error.
pub fn decode_json<T: DeserializeOwned>(
    body: &[u8],
    invalid: impl FnOnce(serde_json::Error) -> ApiError,
) -> Result<T, ApiError> {
    document::check_json(body)?;
    serde_json::from_slice(body)
        .or_else(|e| strict_json::from_slice_with_integers(body).ok_or(e))
        .map_err(invalid)
}

/// A raw YAML body (one document) as a JSON value, its structure checked first; `invalid`
/// words a YAML error.
pub fn decode_yaml(
    body: &[u8],
    invalid: impl FnOnce(serde_yaml::Error) -> ApiError,
) -> Result<serde_json::Value, ApiError> {
    document::check_yaml(body)?;
    document::yaml_value(serde_yaml::Deserializer::from_slice(body)).map_err(|e| match e {
        document::YamlFailure::Structure(e) => e.into(),
        document::YamlFailure::Syntax(e) => invalid(e),
    })
}

/// `axum::extract::Path` with rejections as [`ApiError`].
#[derive(Debug, axum::extract::FromRequestParts)]
#[from_request(via(axum::extract::Path), rejection(ApiError))]
pub struct ApiPath<T>(pub T);

/// `axum::extract::Query` with rejections as [`ApiError`].
#[derive(Debug, axum::extract::FromRequestParts)]
#[from_request(via(axum::extract::Query), rejection(ApiError))]
pub struct ApiQuery<T>(pub T);

/// The whole body as bytes, within the route's `DefaultBodyLimit`.
#[derive(Debug)]
pub struct RawBody(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for RawBody {
    type Rejection = ApiError;

    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self, ApiError> {
        Ok(RawBody(Bytes::from_request(req, state).await?))
    }
}

/// The formats a document body may come in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocumentFormat {
    Json,
    Yaml,
}

/// The Content-Types a document body (a snapshot, a profile) may have.
pub const DOCUMENT_TYPES: &str =
    "application/json, application/yaml (also application/x-yaml or text/yaml)";

/// What the Content-Type says the document is: `application/json`, or YAML as
/// `application/yaml`, `application/x-yaml` or `text/yaml` (parameters such as `charset` are
/// ignored). Anything else, a missing Content-Type included, is refused with 415: a body is
/// never guessed at (`application/octet-stream` was once read as JSON).
pub fn document_format(headers: &HeaderMap) -> Result<DocumentFormat, ApiError> {
    let unsupported = |what: String| {
        ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            format!("{what}; send one of {DOCUMENT_TYPES}"),
        )
        .with_details(serde_json::json!({
            "accepted": ["application/json", "application/yaml", "application/x-yaml", "text/yaml"],
        }))
    };
    let Some(value) = headers.get(header::CONTENT_TYPE) else {
        return Err(unsupported("the request has no Content-Type".into()));
    };
    match media_type(headers).as_str() {
        "application/json" => Ok(DocumentFormat::Json),
        "application/yaml" | "application/x-yaml" | "text/yaml" => Ok(DocumentFormat::Yaml),
        _ => Err(unsupported(format!(
            "Content-Type `{}` is not supported",
            String::from_utf8_lossy(value.as_bytes())
        ))),
    }
}

/// 413 before a byte is read when the declared Content-Length is over `limit`.
pub fn check_declared_length(
    headers: &HeaderMap,
    limit: usize,
    what: &str,
) -> Result<(), ApiError> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(ApiError::too_large(what, limit));
    }
    Ok(())
}

/// Read a body of up to `limit` bytes into one buffer, sized up front from Content-Length so a
/// large body is held once (not once in chunks and again when joined).
pub async fn read_body_limited(
    headers: &HeaderMap,
    body: Body,
    limit: usize,
    what: &str,
) -> Result<Vec<u8>, ApiError> {
    check_declared_length(headers, limit, what)?;
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let mut buffer = Vec::with_capacity(declared.map_or(0, |n| n as usize));
    let mut stream = body.into_data_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| {
            if BodyIdleTimeout::is_cause_of(&e) {
                return ApiError::body_timeout(&e);
            }
            ApiError::bad_request(
                "invalid_body",
                format!("the request body could not be read: {e}"),
            )
        })?;
        if buffer.len() + chunk.len() > limit {
            return Err(ApiError::too_large(what, limit));
        }
        buffer.extend_from_slice(&chunk);
    }
    Ok(buffer)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_type(content_type: Option<&str>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        if let Some(t) = content_type {
            headers.insert(header::CONTENT_TYPE, t.parse().unwrap());
        }
        headers
    }

    #[test]
    fn documents_are_json_or_yaml_by_their_content_type_only() {
        for (content_type, format) in [
            ("application/json", DocumentFormat::Json),
            ("Application/JSON; charset=utf-8", DocumentFormat::Json),
            ("application/yaml", DocumentFormat::Yaml),
            ("application/x-yaml", DocumentFormat::Yaml),
            ("text/yaml; charset=utf-8", DocumentFormat::Yaml),
        ] {
            assert_eq!(
                document_format(&with_type(Some(content_type))).unwrap(),
                format,
                "{content_type}"
            );
        }
        for refused in [
            None,
            Some("application/octet-stream"),
            Some("text/plain"),
            Some("text/json"),
            Some("application/merge-patch+json"),
            Some(""),
        ] {
            let e = document_format(&with_type(refused)).unwrap_err();
            assert_eq!(e.status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{refused:?}");
            assert!(e.message.contains(DOCUMENT_TYPES), "{}", e.message);
        }
    }

    #[test]
    fn typed_json_bodies_take_json_and_its_suffix_types() {
        assert!(is_json(&with_type(Some("application/json"))));
        assert!(is_json(&with_type(Some("application/merge-patch+json"))));
        assert!(!is_json(&with_type(Some("text/json"))));
        assert!(!is_json(&with_type(None)));
    }

    #[test]
    fn declared_lengths_over_the_limit_are_refused_before_reading() {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_LENGTH, "2048".parse().unwrap());
        assert_eq!(
            check_declared_length(&headers, 1024, "snapshot")
                .unwrap_err()
                .status,
            StatusCode::PAYLOAD_TOO_LARGE
        );
        assert!(check_declared_length(&headers, 2048, "snapshot").is_ok());
        assert!(check_declared_length(&HeaderMap::new(), 1, "snapshot").is_ok());
    }
}
