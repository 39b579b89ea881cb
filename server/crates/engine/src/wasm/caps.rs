//! The fixed caps on what a guest hands the host, beyond the configurable [`super::SandboxLimits`].
//!
//! Owns the cap values and the two ways text over a cap is handled here: kept but cut
//! ([`rebalancer_policy_sdk::caps::truncate`]: error messages, arg errors) or refused and quoted
//! by a short prefix only ([`rebalancer_policy_sdk::caps::quote_prefix`]: `info` at upload).
//! Must not: hold state; the host imports (`host.rs`) and the upload checks (`inspect.rs`) apply
//! them. `docs/abi.md` ("Sandbox limits") lists every cap with its default and flag.
//!
//! Values a guest passes are copied into the host for the duration of the call (bounded by the
//! guest's own memory cap); what the host *keeps* or *echoes* — in run reports, the database,
//! API responses — is what these caps bound.

use rebalancer_policy_sdk::ArgError;
use rebalancer_policy_sdk::caps::truncate;

pub use rebalancer_policy_sdk::caps::MAX_REASON_BYTES;
pub use rebalancer_policy_sdk::evictor::MAX_RECORDED_REFUSALS;
pub use rebalancer_policy_sdk::state::MAX_KEY_BYTES as MAX_STATE_KEY_BYTES;

/// Log lines allowed per evaluation by default (`SandboxLimits::max_log_lines`): the byte cap
/// alone let a policy write ten million empty lines.
pub const DEFAULT_MAX_LOG_LINES: usize = 10_000;

/// The longest failure message kept (a policy's `err(…)`, a panic message, a trap), in bytes;
/// longer ones are cut with a marker.
pub const MAX_MESSAGE_BYTES: usize = 4 << 10;

/// Arg errors kept from one `validate-args` call; the rest are counted in one extra entry.
pub const MAX_ARG_ERRORS: usize = 100;
/// The longest `field` of an arg error kept, in bytes (cut with a marker).
pub const MAX_ARG_ERROR_FIELD_BYTES: usize = 256;
/// The longest `message` of an arg error kept, in bytes (cut with a marker).
pub const MAX_ARG_ERROR_MESSAGE_BYTES: usize = 1 << 10;

/// `info`: the longest plugin name, in bytes (also limited to letters, digits, `-`, `_`, `.`).
pub const MAX_NAME_BYTES: usize = 128;
/// `info`: the longest policy version, in bytes.
pub const MAX_VERSION_BYTES: usize = 64;
/// `info`: the longest description, in bytes.
pub const MAX_DESCRIPTION_BYTES: usize = 4 << 10;
/// `info`: the largest args schema, in bytes of JSON (as sent and as stored).
pub const MAX_ARGS_SCHEMA_BYTES: usize = 256 << 10;
/// `info`: the largest default args, in bytes of JSON (as sent and as stored).
pub const MAX_DEFAULT_ARGS_BYTES: usize = 64 << 10;

/// `cluster.object-json`: the longest `kind` looked up (the kinds are short names; a longer one
/// is answered `none` without a lookup).
pub const MAX_OBJECT_KIND_BYTES: usize = 64;

/// How much of an oversized or invalid guest value an error message quotes, in bytes.
pub const QUOTED_PREFIX_BYTES: usize = 64;

/// A failure message as it is kept: at most [`MAX_MESSAGE_BYTES`].
pub(super) fn message(text: String) -> String {
    cap_owned(text, MAX_MESSAGE_BYTES)
}

/// `text`, cut to `max` bytes with a marker when longer (no copy when it fits).
pub(super) fn cap_owned(text: String, max: usize) -> String {
    if text.len() <= max {
        text
    } else {
        truncate(&text, max).into_owned()
    }
}

/// The arg errors a `validate-args` call returned, as they are kept and served: the first
/// [`MAX_ARG_ERRORS`], each field and message cut to its cap, then — when there were more — one
/// entry saying how many more (`… and 399,900 more errors (400,000 in all)`).
pub(super) fn arg_errors(errors: impl ExactSizeIterator<Item = (String, String)>) -> Vec<ArgError> {
    let total = errors.len();
    let mut kept: Vec<ArgError> = errors
        .take(MAX_ARG_ERRORS)
        .map(|(field, message)| {
            ArgError::new(
                cap_owned(field, MAX_ARG_ERROR_FIELD_BYTES),
                cap_owned(message, MAX_ARG_ERROR_MESSAGE_BYTES),
            )
        })
        .collect();
    if total > MAX_ARG_ERRORS {
        kept.push(ArgError::new(
            "",
            format!(
                "… and {} more errors ({} in all; the policy's first {MAX_ARG_ERRORS} are listed)",
                thousands(total - MAX_ARG_ERRORS),
                thousands(total)
            ),
        ));
    }
    kept
}

/// `399900` → `399,900`.
pub(super) fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(d);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000), "1,000");
        assert_eq!(thousands(399_900), "399,900");
        assert_eq!(thousands(10_000_000), "10,000,000");
    }

    #[test]
    fn arg_errors_keep_the_first_hundred_cut_and_count_the_rest() {
        let errors = (0..400_000).map(|i| (format!("items[{i}]"), "bad".to_string()));
        let kept = arg_errors(errors.collect::<Vec<_>>().into_iter());
        assert_eq!(kept.len(), MAX_ARG_ERRORS + 1);
        assert_eq!(kept[99].field, "items[99]");
        assert_eq!(kept[100].field, "");
        assert!(
            kept[100]
                .message
                .starts_with("… and 399,900 more errors (400,000 in all"),
            "{}",
            kept[100].message
        );

        let huge = vec![("f".repeat(1 << 20), "m".repeat(1 << 20))];
        let kept = arg_errors(huge.into_iter());
        assert_eq!(kept.len(), 1);
        assert!(kept[0].field.len() <= MAX_ARG_ERROR_FIELD_BYTES);
        assert!(kept[0].message.len() <= MAX_ARG_ERROR_MESSAGE_BYTES);
        assert!(
            kept[0]
                .message
                .contains("[truncated, 1048576 bytes in all]")
        );

        let few = vec![("a".to_string(), "b".to_string())];
        assert_eq!(arg_errors(few.into_iter()), [ArgError::new("a", "b")]);
    }

    #[test]
    fn failure_messages_are_cut_to_the_cap() {
        assert_eq!(message("short".into()), "short");
        let long = message("x".repeat(10 << 20));
        assert!(long.len() <= MAX_MESSAGE_BYTES);
        assert!(
            long.ends_with("[truncated, 10485760 bytes in all]"),
            "{long}"
        );
    }
}
