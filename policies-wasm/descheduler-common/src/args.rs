//! Serde helpers the plugins' args share (the SDK's `args` module holds the ones any policy
//! would want, such as `null_as_default` and `Namespaces`).
//!
//! Owns only helpers that keep an args document descheduler's: Rebalancer extensions are left
//! out while off. Must not validate anything.

/// `skip_serializing_if` for Rebalancer's opt-in booleans: not serialized while off, so the args
/// stay a valid descheduler document.
pub fn is_false(b: &bool) -> bool {
    !*b
}
