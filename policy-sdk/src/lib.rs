//! # Rebalancer policy SDK
//!
//! The contract between Rebalancer and its descheduling policies, and the toolkit to write them.
//!
//! # Layout
//! - [`model`]: the snapshot archive layout (what the host hands to a guest).
//! - [`build`]: building a snapshot (string interning, indexes) — host and tests.
//! - [`view`]: zero-copy typed views over the archive ([`Cluster`], [`PodRef`], [`NodeRef`]).
//! - [`k8s`]: Kubernetes semantics written once for host and guest (quantities, label selectors,
//!   taints/tolerations, node affinity, QoS, owner references, pod requests).
//! - [`policy`]: the [`Policy`] trait, [`Context`] and the [`Host`] trait behind it.
//! - [`caps`]: caps on the text a policy hands its host (a proposal's reason) and how longer
//!   text is cut.
//! - [`evictor`] (feature `host`): DefaultEvictor, run limits and PDB admission, as the host runs them.
//! - [`testing`] (feature `host`): hand-built clusters and a native host to unit-test policies.
//! - `guest` (wasm32 only): the generated WIT bindings and [`export_policy!`].
//! - `columns` (wasm32 only): the language-neutral `columns` import (ABI 1.4), as generated
//!   bindings. Rust policies read the archive through [`Cluster`], the faster path; `columns`
//!   is what guests in other languages use, exposed here for completeness and for tests.
//!
//! The WIT package lives in `wit/policy.wit`; `docs/abi.md` is the prose contract.

pub mod args;
pub mod build;
pub mod caps;
pub mod k8s;
pub mod model;
pub mod policy;
pub mod state;
pub mod view;

#[cfg(feature = "host")]
pub mod evictor;
#[cfg(feature = "host")]
pub mod testing;

#[cfg(target_arch = "wasm32")]
#[doc(hidden)]
pub mod guest;

/// The `columns` import (ABI 1.4): typed columns pulled by name, the string table and typed
/// detail accessors, as `wit_bindgen` generates them (see `docs/abi.md`).
#[cfg(target_arch = "wasm32")]
pub use guest::bindings::rebalancer::policy::columns;

pub use model::{NONE, StrId};
pub use policy::{
    ArgError, BatchOutcome, Context, Details, ExtensionPoint, Host, LogLevel, Next, Policy,
    PolicyInfo, Refusal, evaluate, parse_args,
};
pub use view::{Cluster, NodeRef, PodRef};

/// The ABI version this SDK implements (the WIT package version).
pub const ABI_VERSION: &str = "1.4.0";

/// The WIT source, for hosts that generate bindings or inspect components.
pub const WIT: &str = include_str!("../wit/policy.wit");

/// Export a [`Policy`] as the component's `policy` world. Use once, in the policy crate's
/// `lib.rs`: `rebalancer_policy_sdk::export_policy!(MyPolicy);`. It expands to nothing on
/// non-wasm targets, so the crate also builds (and unit-tests) natively.
#[macro_export]
macro_rules! export_policy {
    ($policy:ty) => {
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            use $crate::guest::bindings;
            struct Exported;
            impl bindings::Guest for Exported {
                fn info() -> bindings::PolicyInfo {
                    $crate::guest::info::<$policy>()
                }
                fn validate_args(args: String) -> Result<(), Vec<bindings::ArgError>> {
                    $crate::guest::validate_args::<$policy>(args)
                }
                fn deschedule(args: String) -> Result<(), String> {
                    $crate::guest::run::<$policy>($crate::ExtensionPoint::Deschedule, args)
                }
                fn balance(args: String) -> Result<(), String> {
                    $crate::guest::run::<$policy>($crate::ExtensionPoint::Balance, args)
                }
            }
    bindings::export_bindings!(Exported with_types_in bindings);
        };
    };
}
