//! Unit tests of the evictor, one file per concept of `evictor/`; this file holds the shared
//! helpers (hand-built clusters from [`crate::testing`], Filter assertions).

mod args;
mod config;
mod filter;
mod host;
mod propose;

use super::*;
use crate::k8s::selector::Selector;
use crate::policy::{Host, LogLevel, Refusal};
use crate::testing::*;

fn filter_of(cluster: &TestCluster, ns: &str, name: &str) -> (bool, Vec<String>) {
    let mut s = cluster.session();
    let id = s.pod_id(ns, name);
    let ev = s.evictor("test");
    (ev.passes_filter(id), ev.filter_failures(id))
}

/// Asserts, for every pod of the cluster, whether it passes Filter; `want` maps pod name to
/// `None` (passes) or `Some(substring of the failure)`.
#[track_caller]
fn assert_filter(cluster: &TestCluster, want: &[(&str, Option<&str>)]) {
    let mut s = cluster.session();
    let ids: Vec<(u32, String, String)> = s
        .cluster()
        .pods()
        .map(|p| (p.id, p.namespace().to_owned(), p.name().to_owned()))
        .collect();
    let ev = s.evictor("test");
    for (name, expected) in want {
        let (id, _, _) = ids
            .iter()
            .find(|(_, _, n)| n == name)
            .unwrap_or_else(|| panic!("no pod {name}"));
        let passes = ev.passes_filter(*id);
        let failures = ev.filter_failures(*id);
        match expected {
            None => assert!(
                passes && failures.is_empty(),
                "{name} should pass, got {failures:?}"
            ),
            Some(msg) => {
                assert!(!passes, "{name} should fail with {msg:?}");
                assert!(
                    failures.iter().any(|f| f.contains(msg)),
                    "{name}: expected {msg:?} in {failures:?}"
                );
            }
        }
    }
}

fn owned_pod(ns: &str, name: &str) -> TestPod {
    TestPod::new(ns, name)
        .on_node("n1")
        .owned_by("ReplicaSet", "rs")
}

fn two_nodes() -> TestCluster {
    TestCluster::new()
        .node(TestNode::new("n1"))
        .node(TestNode::new("n2"))
}
