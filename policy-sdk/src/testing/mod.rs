//! Hand-built clusters and a native host, so policy authors can unit-test with `cargo test`.
//!
//! Owns the test builders ([`TestCluster`], [`TestNode`], [`TestPod`], [`TestPdb`], …) and the
//! native runner ([`run`], [`TestSession`]) that evaluates a [`Policy`](crate::Policy) against the same
//! [`Evictor`](crate::evictor::Evictor) the server uses (DefaultEvictor, limits, PDB admission), so a policy behaves the
//! same here, natively in the server and as a wasm component.
//!
//! ```
//! use rebalancer_policy_sdk::testing::*;
//!
//! let cluster = TestCluster::new()
//!     .node(TestNode::new("n1").cpu("4").memory("16Gi").pods(110).label("zone", "a"))
//!     .node(TestNode::new("n2").taint("dedicated", "gpu", NoSchedule))
//!     .pod(TestPod::new("shop", "web-1").on_node("n1").owned_by("ReplicaSet", "web").cpu("500m"))
//!     .pdb(TestPdb::new("shop", "web").match_label("app", "web").disruptions_allowed(1));
//! let session = cluster.session();
//! assert_eq!(session.cluster().pod_count(), 1);
//! ```
//!
//! Requests and QoS are computed from the containers with [`crate::k8s::resources`], exactly as
//! the host computes them from real pods. Must not be used by the server outside tests.
//!
//! # Files
//! - `node`, `pod`, `scheduling`, `objects`: the builders ([`TestNode`], [`TestPod`] and
//!   [`TestContainer`], [`TestTerm`]/[`TestAffinityTerm`]/[`TestSpread`], [`TestPdb`] and
//!   [`TestNamespace`]); `selectors`: the private pieces they share;
//! - `cluster`: [`TestCluster`] and its snapshot; `session`: [`TestSession`] and [`run`];
//! - `outcome`: [`TestRun`], [`Proposal`], [`Refused`]; `args`: [`check_args`].

mod args;
mod cluster;
mod node;
mod objects;
mod outcome;
mod pod;
mod scheduling;
mod selectors;
mod session;

#[cfg(test)]
mod tests;

pub use args::check_args;
pub use cluster::TestCluster;
pub use node::TestNode;
pub use objects::{TestNamespace, TestPdb};
pub use outcome::{Proposal, Refused, TestRun};
pub use pod::{TestContainer, TestPod};
pub use scheduling::{TestAffinityTerm, TestSpread, TestTerm};
pub use session::{TestSession, run};

pub use crate::evictor::{Limits, LogEntry};
pub use crate::model::TaintEffect::{self, NoExecute, NoSchedule, PreferNoSchedule};
pub use crate::model::{
    InclusionPolicy, PodPhase, QosClass, SelectorOperator, TolerationOperator,
    UnhealthyPodEvictionPolicy, UsageSource, WhenUnsatisfiable,
};
pub use crate::policy::ExtensionPoint::{Balance, Deschedule};

/// Default snapshot time: 2023-11-14T22:13:20Z.
pub const DEFAULT_NOW_MS: i64 = 1_700_000_000_000;
const DAY_MS: i64 = 86_400_000;

fn owned(pairs: &[&str]) -> Vec<String> {
    pairs.iter().map(|s| (*s).to_owned()).collect()
}
