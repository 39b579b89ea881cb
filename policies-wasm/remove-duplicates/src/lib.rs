//! # RemoveDuplicates
//!
//! descheduler v0.36's `RemoveDuplicates` Balance plugin as a Rebalancer policy: when several pods
//! of the same owner (same namespace, owner kind and name, same container images) run on one node,
//! propose evicting the ones beyond an even spread over the nodes they could run on.
//!
//! # Layout
//! - [`args`]: `RemoveDuplicatesArgs` (serde shape, validation, JSON Schema).
//! - [`plan`]: the Balance pass — candidates, duplicate keys, per-owner limits, proposals.
//! - [`feasible`]: the feasible target nodes of a group of duplicates (taints, nodeSelector,
//!   required node affinity), cached on interned signatures.
//! - [`fit`]: `targetResourceFit` (Rebalancer extension, off by default): room on the target.
//! - [`intern`]: dense ids for short integer sequences.
//! - `descheduler-common`: the `namespaces` arg and its matcher (`scope`), shared with the other
//!   plugins.
//! - Performance on the reference cluster: `policies-wasm/perf` (package `policies-perf`).
//!
//! Deliberate differences from descheduler: owners and nodes are visited in a fixed order (first
//! appearance, scope order) instead of Go map order, and on each node the pods kept are the first
//! ones in snapshot order; descheduler keeps arbitrary replicas, so its choice of *which* pods go
//! varies from run to run while *how many per owner and node* does not. A pod owned twice over
//! is evicted once here (the evictor refuses the second proposal), where descheduler's unit
//! tests count it once per owner. A node selector requirement that cannot be evaluated (invalid
//! `Gt`/`Lt` values) matches no node here, as the SDK's matcher decides; descheduler treats the
//! matching error as a match.
//!
//! Rebalancer extension, off by default: `targetResourceFit` (descheduler #1237) keeps a duplicate
//! that no other feasible node has room for ([`fit`]).

pub mod args;
pub mod feasible;
pub mod fit;
pub mod intern;
pub mod plan;

use rebalancer_policy_sdk::{ArgError, Context, ExtensionPoint, LogLevel, Policy, PolicyInfo};

pub use args::{Namespaces, RemoveDuplicatesArgs};

/// The plugin name, as in a DeschedulerPolicy.
pub const NAME: &str = "RemoveDuplicates";
/// descheduler release whose semantics this implements, plus our own revision.
pub const VERSION: &str = "0.36.0-rb.1";

/// The RemoveDuplicates policy.
#[derive(Debug, Clone, Copy, Default)]
pub struct RemoveDuplicates;

impl Policy for RemoveDuplicates {
    type Args = RemoveDuplicatesArgs;

    fn info() -> PolicyInfo {
        PolicyInfo {
            name: NAME.into(),
            version: VERSION.into(),
            description: "Evicts duplicate pods — pods of the same owner with the same images on \
                          one node — beyond an even spread over the nodes they tolerate and \
                          select (descheduler v0.36 RemoveDuplicates)."
                .into(),
            extension_points: vec![ExtensionPoint::Balance],
            args_schema: args::schema(),
            default_args: serde_json::to_value(RemoveDuplicatesArgs::default())
                .expect("default args serialize"),
        }
    }

    fn validate(args: &Self::Args) -> Vec<ArgError> {
        args::validate(args)
    }

    fn balance(ctx: &mut Context<'_>, args: &Self::Args) -> Result<(), String> {
        let outcome = plan::balance(ctx, args)?;
        ctx.log(
            LogLevel::Info,
            &format!(
                "{NAME}: {} candidate pods, {} owners with duplicates, {} proposals, {} refused, \
                 {} kept for lack of room elsewhere",
                outcome.candidates,
                outcome.owners_with_duplicates,
                outcome.proposed,
                outcome.refused,
                outcome.no_room
            ),
        );
        Ok(())
    }
}

rebalancer_policy_sdk::export_policy!(RemoveDuplicates);

#[cfg(test)]
mod tests;
