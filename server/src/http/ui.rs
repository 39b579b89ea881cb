//! The web UI: the static files under `web/` (plain HTML, JavaScript modules and CSS, no build
//! step), embedded into the binary and served at `/` (the page) and `/ui/*` (its assets).
//!
//! Owns: the table of embedded files, their content types and caching headers (a strong ETag
//! per file and `Cache-Control: no-cache`, so a browser revalidates with a cheap 304 and never
//! runs a stale module after an upgrade), and the page's Content-Security-Policy (same-origin
//! only: the UI loads nothing from elsewhere and runs no inline script).
//! Must not: talk to the store or hold any API logic; the UI only calls `/api/v1` like any
//! other client, with the user's bearer token. These routes are outside `/api/v1` and need no
//! token: they are the same public files for everyone.

use std::sync::LazyLock;

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use sha2::{Digest, Sha256};

use super::error::ApiError;

/// Where the UI's assets are served.
pub const ASSET_PREFIX: &str = "/ui/";

/// One embedded file: its path under `web/ui/` (or `index.html` for the page itself).
struct Embedded {
    path: &'static str,
    content_type: &'static str,
    bytes: &'static [u8],
}

/// `asset!("views/runs.js")` embeds `web/ui/views/runs.js` with the content type its extension
/// implies.
macro_rules! asset {
    ($path:literal) => {
        Embedded {
            path: $path,
            content_type: content_type($path),
            bytes: include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../web/ui/", $path)),
        }
    };
}

/// The page served at `/`.
const INDEX: Embedded = Embedded {
    path: "index.html",
    content_type: "text/html; charset=utf-8",
    bytes: include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../web/index.html")),
};

/// Every file under `web/ui/` (the `every_web_file_is_embedded` test keeps this complete).
const ASSETS: &[Embedded] = &[
    asset!("app.js"),
    asset!("api.js"),
    asset!("dom.js"),
    asset!("live.js"),
    asset!("session.js"),
    asset!("whatif.js"),
    asset!("style.css"),
    asset!("icon.svg"),
    asset!("heatmap.js"),
    asset!("views/admin.js"),
    asset!("views/admin-arbitration.js"),
    asset!("views/admin-audit.js"),
    asset!("views/admin-kit.js"),
    asset!("views/admin-retention.js"),
    asset!("views/admin-webhooks.js"),
    asset!("views/admin-schedules.js"),
    asset!("views/admin-tokens.js"),
    asset!("views/clusters.js"),
    asset!("views/decision.js"),
    asset!("views/decisions.js"),
    asset!("views/migrations.js"),
    asset!("views/policies.js"),
    asset!("views/profiles.js"),
    asset!("views/runs.js"),
];

const fn content_type(path: &str) -> &'static str {
    let bytes = path.as_bytes();
    if ends_with(bytes, b".js") {
        "text/javascript; charset=utf-8"
    } else if ends_with(bytes, b".css") {
        "text/css; charset=utf-8"
    } else if ends_with(bytes, b".svg") {
        "image/svg+xml"
    } else if ends_with(bytes, b".html") {
        "text/html; charset=utf-8"
    } else {
        panic!("web/ui holds a file type the UI table does not know; add it to content_type")
    }
}

const fn ends_with(bytes: &[u8], suffix: &[u8]) -> bool {
    if bytes.len() < suffix.len() {
        return false;
    }
    let start = bytes.len() - suffix.len();
    let mut i = 0;
    while i < suffix.len() {
        if bytes[start + i] != suffix[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Same-origin only; no inline script or style attributes in markup (the UI sets styles
/// through the DOM, which CSP permits).
const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
     img-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; \
     frame-ancestors 'none'";

/// ETags, computed once from the embedded bytes.
static ETAGS: LazyLock<Vec<HeaderValue>> = LazyLock::new(|| {
    std::iter::once(&INDEX)
        .chain(ASSETS)
        .map(|file| {
            let digest = Sha256::digest(file.bytes);
            HeaderValue::from_str(&format!("\"{}\"", hex::encode(&digest[..16])))
                .expect("a hex ETag is a valid header value")
        })
        .collect()
});

/// The UI's routes: `GET /` and `GET /ui/{*path}` (HEAD is answered by axum from GET).
pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/", get(index))
        .route("/ui/{*path}", get(asset))
}

async fn index(headers: HeaderMap) -> Response {
    serve(0, &INDEX, &headers)
}

async fn asset(Path(path): Path<String>, headers: HeaderMap) -> Response {
    match ASSETS.iter().position(|file| file.path == path) {
        Some(i) => serve(i + 1, &ASSETS[i], &headers),
        None => ApiError::not_found(format!(
            "no such UI file: {ASSET_PREFIX}{path}; the UI is served at /"
        ))
        .into_response(),
    }
}

fn serve(index: usize, file: &Embedded, request: &HeaderMap) -> Response {
    let etag = ETAGS[index].clone();
    let fresh = request
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|list| {
            list.split(',')
                .map(|tag| tag.trim().trim_start_matches("W/"))
                .any(|tag| tag == "*" || tag.as_bytes() == etag.as_bytes())
        });
    let mut response = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static(file.content_type),
            )],
            file.bytes,
        )
            .into_response()
    };
    let headers = response.headers_mut();
    headers.insert(header::ETAG, etag);
    // Revalidate every time: file names carry no version, and a 304 costs one round trip.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    if file.path == INDEX.path {
        headers.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CONTENT_SECURITY_POLICY),
        );
        headers.insert(
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        );
        headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn web_dir() -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../web/ui")
    }

    fn files_under(dir: &std::path::Path, prefix: &str, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).expect("web/ui is readable") {
            let entry = entry.expect("directory entry");
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = format!("{prefix}{name}");
            if entry.file_type().expect("file type").is_dir() {
                files_under(&entry.path(), &format!("{path}/"), out);
            } else {
                out.push(path);
            }
        }
    }

    #[test]
    fn every_web_file_is_embedded() {
        let mut on_disk = Vec::new();
        files_under(&web_dir(), "", &mut on_disk);
        on_disk.sort();
        let mut embedded: Vec<String> = ASSETS.iter().map(|a| a.path.to_string()).collect();
        embedded.sort();
        assert_eq!(
            on_disk, embedded,
            "web/ui and the ASSETS table of server/src/http/ui.rs differ"
        );
    }

    /// What the router's two handlers answer for `uri` (routing itself is covered by the
    /// browser test in tests/ui.rs, which talks to a real server).
    async fn get(uri: &str, if_none_match: Option<&HeaderValue>) -> Response {
        let mut headers = HeaderMap::new();
        if let Some(tag) = if_none_match {
            headers.insert(header::IF_NONE_MATCH, tag.clone());
        }
        match uri.strip_prefix(ASSET_PREFIX) {
            Some(path) => asset(Path(path.to_string()), headers).await,
            None => index(headers).await,
        }
    }

    #[tokio::test]
    async fn serves_the_page_and_assets_with_types_and_caching() {
        let page = get("/", None).await;
        assert_eq!(page.status(), StatusCode::OK);
        assert_eq!(
            page.headers()[header::CONTENT_TYPE],
            "text/html; charset=utf-8"
        );
        assert_eq!(page.headers()[header::CACHE_CONTROL], "no-cache");
        assert!(page.headers().contains_key(header::CONTENT_SECURITY_POLICY));

        for (uri, expected) in [
            ("/ui/app.js", "text/javascript; charset=utf-8"),
            ("/ui/views/decisions.js", "text/javascript; charset=utf-8"),
            ("/ui/style.css", "text/css; charset=utf-8"),
            ("/ui/icon.svg", "image/svg+xml"),
        ] {
            let response = get(uri, None).await;
            assert_eq!(response.status(), StatusCode::OK, "{uri}");
            assert_eq!(response.headers()[header::CONTENT_TYPE], expected, "{uri}");
            assert_eq!(
                response.headers()[header::X_CONTENT_TYPE_OPTIONS],
                "nosniff"
            );
            let etag = response.headers()[header::ETAG].clone();
            let again = get(uri, Some(&etag)).await;
            assert_eq!(again.status(), StatusCode::NOT_MODIFIED, "{uri}");
            assert_eq!(again.headers()[header::ETAG], etag);
        }
    }

    #[tokio::test]
    async fn unknown_files_are_404_in_the_api_error_shape() {
        for uri in ["/ui/nope.js", "/ui/../Cargo.toml", "/ui/views"] {
            let response = get(uri, None).await;
            assert_eq!(response.status(), StatusCode::NOT_FOUND, "{uri}");
            let body = axum::body::to_bytes(response.into_body(), 1 << 16)
                .await
                .unwrap();
            let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(json["code"], "not_found");
        }
    }
}
