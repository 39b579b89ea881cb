//! Caps on the text a policy hands its host, and how text over a cap is cut.
//!
//! Owns the caps the SDK's own host-side code enforces — a proposal's reason
//! ([`MAX_REASON_BYTES`], applied by the evictor, so the wasm host, the native benchmark and
//! [`crate::testing`] keep the same reasons) — and the two ways longer text is shortened:
//! [`truncate`] (kept, visibly cut) and [`quote_prefix`] (quoted in an error message, never in
//! full). The wasm host's other caps (log lines, error messages, arg errors, `info` fields) are
//! the server's and live in `rebalancer-engine`; `docs/abi.md` lists them all.
//! Must not: refuse anything itself — callers decide whether text over a cap is cut or refused.

use std::borrow::Cow;

/// The longest reason a proposal keeps, in bytes (marker included): a longer one is cut by
/// [`truncate`]. A reason is shown to the person who approves the move; a sentence fits.
pub const MAX_REASON_BYTES: usize = 1024;

/// `text` when it is at most `max` bytes. Otherwise its longest prefix that, followed by the
/// marker ` … [truncated, N bytes in all]`, fits in `max` bytes, cut on a character boundary:
/// the result is valid UTF-8, at most `max` bytes (when `max` can hold the marker), and says
/// that it was cut and how long the original was.
pub fn truncate(text: &str, max: usize) -> Cow<'_, str> {
    if text.len() <= max {
        return Cow::Borrowed(text);
    }
    let marker = format!(" … [truncated, {} bytes in all]", text.len());
    let keep = floor_char_boundary(text, max.saturating_sub(marker.len()));
    let mut out = String::with_capacity(keep + marker.len());
    out.push_str(&text[..keep]);
    out.push_str(&marker);
    Cow::Owned(out)
}

/// `text` quoted for an error message: whole when it is at most `max` bytes, otherwise its first
/// `max` bytes (cut on a character boundary) and how long it is — `"abc"…` `(10485760 bytes)`.
/// An error about an oversized value must say what it was without echoing it.
pub fn quote_prefix(text: &str, max: usize) -> String {
    if text.len() <= max {
        return format!("{text:?}");
    }
    let keep = floor_char_boundary(text, max);
    format!("{:?}… ({} bytes)", &text[..keep], text.len())
}

/// The largest index ≤ `at` that is a character boundary of `text`.
fn floor_char_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_kept_as_is() {
        assert!(matches!(truncate("abc", 3), Cow::Borrowed("abc")));
        assert_eq!(quote_prefix("abc", 3), "\"abc\"");
    }

    #[test]
    fn long_text_is_cut_on_a_char_boundary_with_a_marker_that_fits_the_cap() {
        // "€" is three bytes: no cut may land inside one.
        let text = format!("a{}", "€".repeat(10_000));
        for max in [64, 100, 1024] {
            let cut = truncate(&text, max);
            assert!(cut.len() <= max, "{max}: {} bytes", cut.len());
            assert!(cut.starts_with("a€"), "{cut}");
            assert!(
                cut.ends_with(&format!(" … [truncated, {} bytes in all]", text.len())),
                "{cut}"
            );
            let kept = cut.split(" … [truncated").next().unwrap();
            assert!(kept.chars().skip(1).all(|c| c == '€'), "{kept}");
        }
    }

    #[test]
    fn a_quoted_prefix_never_echoes_the_whole_value() {
        let name = "é".repeat(1 << 20);
        let quoted = quote_prefix(&name, 33);
        assert!(quoted.len() < 80, "{quoted}");
        assert!(
            quoted.ends_with(&format!("… ({} bytes)", name.len())),
            "{quoted}"
        );
        assert!(quoted.starts_with("\"éé"), "{quoted}");
    }
}
