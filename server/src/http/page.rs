//! Cursor pagination: the `limit` and `cursor` query parameters every list shares.
//!
//! Owns: [`Page`] — the page size (default [`DEFAULT_PAGE`], 1 to [`MAX_PAGE`]; anything else
//! is refused with a 400 that states the range, never clamped) and the cursor, with the API's
//! error for a cursor it did not hand out ([`ID_CURSOR_PATTERN`] is the shape of the ones it
//! does hand out for lists keyed by row id).
//! Must not: know how a list is ordered or stored; handlers turn the cursor into their key.
//!
//! Each list's query struct still names `limit` and `cursor`, so they are documented with its
//! other parameters and accepted by its `deny_unknown_fields`; `Page` is what reads them. Their
//! `#[param(minimum = 1, maximum = 1000, pattern = …)]` must repeat [`MAX_PAGE`] and the cursor
//! pattern (an attribute takes no constant); `server/tests/api/docs.rs` checks they agree.

use axum::extract::{FromRequestParts, Query};
use axum::http::request::Parts;
use serde::Deserialize;

use super::error::ApiError;

/// Largest page: a larger `limit` is refused (400), not clamped.
pub const MAX_PAGE: u32 = 1000;
/// Page size when `limit` is not given.
pub const DEFAULT_PAGE: u32 = 100;
/// The cursors of lists keyed by row id: the decimal id of the last item of the previous page.
/// At most 18 digits, so every cursor of this shape is an `i64`.
pub const ID_CURSOR_PATTERN: &str = "^[0-9]{1,18}$";
/// Most digits in a number of a cursor: every such number fits an `i64`.
const MAX_CURSOR_DIGITS: usize = 18;

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
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
    /// The `next` value of the previous page.
    #[param(pattern = "^[0-9]{1,18}$")]
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
            Some(n @ 1..=MAX_PAGE) => n,
            Some(n) => {
                return Err(ApiError::bad_request(
                    "invalid_query",
                    format!("limit must be between 1 and {MAX_PAGE}, not {n}"),
                ));
            }
        };
        Ok(Page { limit, cursor })
    }

    /// The cursor as given, for lists whose cursor has a shape of its own.
    pub fn cursor(&self) -> Option<&str> {
        self.cursor.as_deref()
    }

    /// The cursor of a list keyed by row id (the `next` it returned): 1 to 18 decimal digits
    /// ([`ID_CURSOR_PATTERN`]), nothing else (no sign, no blank).
    pub fn id_cursor(&self) -> Result<Option<i64>, ApiError> {
        self.cursor()
            .map(|c| {
                cursor_number(c)
                    .and_then(|n| i64::try_from(n).ok())
                    .ok_or_else(|| invalid_cursor(c))
            })
            .transpose()
    }
}

/// A number of a cursor: 1 to 18 decimal digits, no sign, nothing around them (the shape the
/// API hands out, so a cursor is refused when and only when the document's pattern refuses it).
pub fn cursor_number(text: &str) -> Option<u64> {
    let digits = !text.is_empty()
        && text.len() <= MAX_CURSOR_DIGITS
        && text.bytes().all(|b| b.is_ascii_digit());
    digits.then(|| text.parse().ok()).flatten()
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
    fn limits_default_and_refuse_out_of_range() {
        assert_eq!(Page::new(None, None).unwrap().limit, DEFAULT_PAGE);
        assert_eq!(Page::new(Some(5), None).unwrap().limit, 5);
        assert_eq!(Page::new(Some(1), None).unwrap().limit, 1);
        assert_eq!(Page::new(Some(MAX_PAGE), None).unwrap().limit, MAX_PAGE);
        for refused in [0, MAX_PAGE + 1, u32::MAX] {
            let err = Page::new(Some(refused), None).unwrap_err();
            assert_eq!(err.code, "invalid_query");
            assert_eq!(
                err.message,
                format!("limit must be between 1 and 1000, not {refused}")
            );
        }
    }

    #[test]
    fn id_cursors() {
        assert_eq!(Page::new(None, None).unwrap().id_cursor().unwrap(), None);
        let page = Page::new(None, Some("42".into())).unwrap();
        assert_eq!(page.id_cursor().unwrap(), Some(42));
        let page = Page::new(None, Some("999999999999999999".into())).unwrap();
        assert_eq!(page.id_cursor().unwrap(), Some(999_999_999_999_999_999));
        // Only the shape the API hands out: no sign, no blank, no 19th digit.
        for refused in ["abc", "", "-1", "+1", " 1", "1234567890123456789"] {
            let page = Page::new(None, Some(refused.into())).unwrap();
            assert_eq!(
                page.id_cursor().unwrap_err().code,
                "invalid_cursor",
                "{refused:?}"
            );
        }
    }
}
