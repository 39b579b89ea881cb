//! Cursor pagination: the `limit` and `cursor` query parameters every list shares.
//!
//! Owns: [`Page`] — the page size (default [`DEFAULT_PAGE`], at most [`MAX_PAGE`], never 0)
//! and the cursor, with the API's error for a cursor it did not hand out.
//! Must not: know how a list is ordered or stored; handlers turn the cursor into their key.
//!
//! Each list's query struct still names `limit` and `cursor`, so they are documented with its
//! other parameters and accepted by its `deny_unknown_fields`; `Page` is what reads them.

use axum::extract::{FromRequestParts, Query};
use axum::http::request::Parts;
use serde::Deserialize;

use super::error::ApiError;

/// Page sizes: `limit` query parameters are clamped to this.
pub const MAX_PAGE: u32 = 1000;
/// Page size when `limit` is not given.
pub const DEFAULT_PAGE: u32 = 100;

/// The page a list request asks for.
#[derive(Debug)]
pub struct Page {
    /// How many items, at most.
    pub limit: u32,
    cursor: Option<String>,
}

/// The two parameters, whatever else the query holds; a list with no other parameter
/// documents them with `params(PageParams)`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PageParams {
    /// Page size (default 100, at most 1000).
    pub limit: Option<u32>,
    /// The `next` value of the previous page.
    pub cursor: Option<String>,
}

impl<S: Send + Sync> FromRequestParts<S> for Page {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        let Query(params) = Query::<PageParams>::try_from_uri(&parts.uri)?;
        Page::new(params.limit, params.cursor)
    }
}

impl Page {
    fn new(limit: Option<u32>, cursor: Option<String>) -> Result<Page, ApiError> {
        let limit = match limit {
            None => DEFAULT_PAGE,
            Some(0) => {
                return Err(ApiError::bad_request(
                    "invalid_query",
                    "limit must be at least 1",
                ));
            }
            Some(n) => n.min(MAX_PAGE),
        };
        Ok(Page { limit, cursor })
    }

    /// The cursor as given, for lists whose cursor has a shape of its own.
    pub fn cursor(&self) -> Option<&str> {
        self.cursor.as_deref()
    }

    /// The cursor of a list keyed by row id (the `next` it returned).
    pub fn id_cursor(&self) -> Result<Option<i64>, ApiError> {
        self.cursor()
            .map(|c| c.parse::<i64>().map_err(|_| invalid_cursor(c)))
            .transpose()
    }
}

/// The answer to a cursor this API did not hand out.
pub fn invalid_cursor(cursor: &str) -> ApiError {
    ApiError::bad_request(
        "invalid_cursor",
        format!("cursor {cursor:?} is not one this API returned"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_default_clamp_and_refuse_zero() {
        assert_eq!(Page::new(None, None).unwrap().limit, DEFAULT_PAGE);
        assert_eq!(Page::new(Some(5), None).unwrap().limit, 5);
        assert_eq!(Page::new(Some(5000), None).unwrap().limit, MAX_PAGE);
        assert_eq!(Page::new(Some(0), None).unwrap_err().code, "invalid_query");
    }

    #[test]
    fn id_cursors() {
        assert_eq!(Page::new(None, None).unwrap().id_cursor().unwrap(), None);
        let page = Page::new(None, Some("42".into())).unwrap();
        assert_eq!(page.id_cursor().unwrap(), Some(42));
        let page = Page::new(None, Some("abc".into())).unwrap();
        assert_eq!(page.id_cursor().unwrap_err().code, "invalid_cursor");
    }
}
