//! Request extractors whose rejections use the API's error shape, and body helpers.

use axum::body::Body;
use axum::body::Bytes;
use axum::extract::FromRequest;
use axum::http::{HeaderMap, header};
use futures::StreamExt;
use serde::de::DeserializeOwned;

use super::error::ApiError;
use super::serve::BodyIdleTimeout;
use crate::strict_json::Object;

/// `axum::Json` of a JSON object (the request bodies are structs: an array in their place is
/// refused, see [`crate::strict_json`]), with rejections as [`ApiError`].
#[derive(Debug)]
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self, ApiError> {
        let axum::Json(Object(value)) = axum::Json::<Object<T>>::from_request(req, state).await?;
        Ok(ApiJson(value))
    }
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

/// JSON unless the Content-Type says YAML (`application/yaml`, `application/x-yaml`,
/// `text/yaml`, …); anything else that is not JSON is refused with 415.
pub fn document_format(headers: &HeaderMap) -> Result<DocumentFormat, ApiError> {
    let Some(value) = headers.get(header::CONTENT_TYPE) else {
        return Ok(DocumentFormat::Json);
    };
    let text = value.to_str().unwrap_or_default();
    let essence = text
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    match essence.as_str() {
        "" | "application/json" | "text/json" | "application/octet-stream" => {
            Ok(DocumentFormat::Json)
        }
        e if e.ends_with("+json") => Ok(DocumentFormat::Json),
        "application/yaml" | "application/x-yaml" | "text/yaml" | "text/x-yaml" => {
            Ok(DocumentFormat::Yaml)
        }
        e if e.ends_with("+yaml") => Ok(DocumentFormat::Yaml),
        _ => Err(ApiError::new(
            axum::http::StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            format!(
                "Content-Type `{text}` is not supported: send application/json or \
                 application/yaml"
            ),
        )),
    }
}

/// Read a body of up to `limit` bytes into one buffer, sized up front from Content-Length so a
/// large body is held once (not once in chunks and again when joined).
pub async fn read_body_limited(
    headers: &HeaderMap,
    body: Body,
    limit: usize,
    what: &str,
) -> Result<Vec<u8>, ApiError> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(ApiError::too_large(what, limit));
    }
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
