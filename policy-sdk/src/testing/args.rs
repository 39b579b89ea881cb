//! [`check_args`]: a policy's args parsed and validated the way every run does it
//! ([`crate::parse_args`]), with the errors as text, for table tests of args.
//!
//! Owns nothing but the conversion to text; must not add rules of its own.

use crate::policy::{Policy, parse_args};

/// `json` parsed and validated as `P`'s args; on failure, every error as `field: message`
/// (serde's own message for a document that does not parse). An empty string or `null` is the
/// default args, as in a run.
pub fn check_args<P: Policy>(json: &str) -> Result<P::Args, Vec<String>> {
    parse_args::<P>(json).map_err(|errors| errors.iter().map(ToString::to_string).collect())
}
