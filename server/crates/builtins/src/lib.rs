//! # Built-in policies
//!
//! The modules Rebalancer ships: every crate under `policies-wasm/` that is a built-in, compiled
//! for `wasm32-wasip2` by this crate's build script (a nested cargo, see `build.rs`) and embedded
//! here. Depending on this crate is what makes a binary carry the built-ins; the engine itself
//! does not (it compiles whatever bytes it is given).
//!
//! Owns: the list of embedded modules ([`modules`]) and, for tests, the directory of every
//! module the build produced ([`WASM_DIR`]: the built-ins plus the hostile `test-misbehaving`
//! and `test-oversized-info`, the columns-only `test-columns`, the docs' `example-pod-age` and
//! `example-python-twin`, the Rust twin of the Python example policy, which are built but not
//! embedded).
//! Must not: compile or validate modules (that is the engine's job at start-up).

/// `(crate file stem, component bytes)` of every built-in policy module, in build order.
pub fn modules() -> &'static [(&'static str, &'static [u8])] {
    include!(concat!(env!("OUT_DIR"), "/builtin_policies.rs"))
}

/// The directory holding every module the build script produced, as `<crate_name>.wasm`.
pub const WASM_DIR: &str = env!("REBALANCER_POLICY_WASM_DIR");
