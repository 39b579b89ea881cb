//! The Deschedule pass of RemovePodsViolatingNodeTaints (descheduler v0.36
//! `removepodsviolatingnodetaints/node_taint.go`).
//!
//! For each node in scope, in scope order:
//! 1. The node's considered taints ([`TaintFilter`]): effect `NoSchedule` (and
//!    `PreferNoSchedule` with `includePreferNoSchedule`), not excluded, and included when
//!    `includedTaints` is set. `NoExecute` is the kubelet's business. A node without any is
//!    skipped.
//! 2. Candidates: its non-terminal pods that the `namespaces` and `labelSelector` args admit,
//!    that do not tolerate every considered taint, and that pass the evictor's Filter and
//!    PreEvictionFilter, in snapshot order. Whether the pod fits elsewhere is left to
//!    DefaultEvictor's nodeFit, as in descheduler.
//! 3. Proposals, one by one: a per-node limit moves on to the next node, a total limit ends the
//!    pass, any other refusal (PDB, namespace limit, …) moves on to the next pod.

use rebalancer_policy_sdk::k8s::taints::{pod_tolerates_taint, tolerates_taints_where};
use rebalancer_policy_sdk::model::{StrId, TaintEffect};
use rebalancer_policy_sdk::{Cluster, Context, NodeRef, PodRef};

use crate::args::RemovePodsViolatingNodeTaintsArgs;
use descheduler_common::format::taint_text;
use descheduler_common::scope::PodScope;
use descheduler_common::tally::{Details, Next, Tally, propose};

/// The pass, with its summary.
pub fn deschedule(
    ctx: &mut Context<'_>,
    args: &RemovePodsViolatingNodeTaintsArgs,
) -> Result<Tally, String> {
    let mut details = Details::default();
    let tally = run(ctx, args, &mut details);
    details.finish(ctx);
    tally
}

fn run(
    ctx: &mut Context<'_>,
    args: &RemovePodsViolatingNodeTaintsArgs,
    details: &mut Details,
) -> Result<Tally, String> {
    let cluster = ctx.cluster;
    let nodes = ctx.nodes();
    let by_node = cluster.pods_by_node();
    let scope = PodScope::new(
        cluster,
        args.namespaces.as_ref(),
        args.label_selector.as_ref(),
    );
    let filter = TaintFilter::new(args);
    let mut tally = Tally::default();

    for &node_id in &nodes {
        let on_node = by_node
            .get(node_id as usize)
            .ok_or_else(|| format!("host listed node {node_id}, which is not in the snapshot"))?;
        let node = cluster.node(node_id);
        let considered = filter.considered(cluster, node);
        if considered.is_empty() {
            continue;
        }
        let violates = |pod: PodRef<'_>| {
            !tolerates_taints_where(pod, node, |k, v, e| considered.contains(&(k, v, e)))
        };
        let pods: Vec<u32> = on_node
            .iter()
            .copied()
            .filter(|&p| {
                let pod = cluster.pod(p);
                !pod.is_terminal() && scope.admits(pod) && violates(pod)
            })
            .collect();
        if pods.is_empty() {
            continue;
        }
        let pods = ctx.filter_for_eviction(&pods);
        tally.candidates += pods.len();
        for pod in pods {
            let reason = describe(cluster.pod(pod), node, &considered);
            match propose(ctx, pod, &reason, &mut tally, details) {
                Next::Pod => {}
                Next::Node => break,
                Next::Stop => return Ok(tally),
            }
        }
    }
    Ok(tally)
}

/// One `excludedTaints`/`includedTaints` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
enum TaintRef {
    /// `key`: every taint with this key.
    Key(String),
    /// `key=value`: taints with this key and this (non-empty) value.
    KeyValue(String, String),
}

impl TaintRef {
    fn parse(entry: &str) -> Self {
        match entry.split_once('=') {
            Some((key, value)) => TaintRef::KeyValue(key.to_owned(), value.to_owned()),
            None => TaintRef::Key(entry.to_owned()),
        }
    }

    /// descheduler's `set.Has(taint.Key) || (taint.Value != "" && set.Has(key + "=" + value))`
    /// for this entry (a taint key cannot contain `=`).
    fn matches(&self, key: &str, value: &str) -> bool {
        match self {
            TaintRef::Key(k) => k == key,
            TaintRef::KeyValue(k, v) => !value.is_empty() && k == key && v == value,
        }
    }
}

/// Which node taints the plugin considers (descheduler's `taintFilterFnc`).
#[derive(Debug)]
pub struct TaintFilter {
    prefer_no_schedule: bool,
    excluded: Vec<TaintRef>,
    /// `None`: every taint is included.
    included: Option<Vec<TaintRef>>,
}

impl TaintFilter {
    pub fn new(args: &RemovePodsViolatingNodeTaintsArgs) -> Self {
        let parse = |entries: &[String]| entries.iter().map(|e| TaintRef::parse(e)).collect();
        TaintFilter {
            prefer_no_schedule: args.include_prefer_no_schedule,
            excluded: parse(&args.excluded_taints),
            included: args.included_taints.as_deref().map(parse),
        }
    }

    fn considers(&self, key: &str, value: &str, effect: TaintEffect) -> bool {
        let effect_ok = match effect {
            TaintEffect::NoSchedule => true,
            TaintEffect::PreferNoSchedule => self.prefer_no_schedule,
            TaintEffect::NoExecute => false,
        };
        effect_ok
            && !self.excluded.iter().any(|t| t.matches(key, value))
            && self
                .included
                .as_ref()
                .is_none_or(|inc| inc.iter().any(|t| t.matches(key, value)))
    }

    /// The node's taints this plugin considers, as `(key, value, effect)` ids.
    pub fn considered(
        &self,
        cluster: Cluster<'_>,
        node: NodeRef<'_>,
    ) -> Vec<(StrId, StrId, TaintEffect)> {
        node.taints()
            .filter(|&(k, v, e)| self.considers(cluster.str(k), cluster.str(v), e))
            .collect()
    }
}

fn effect_name(effect: TaintEffect) -> &'static str {
    match effect {
        TaintEffect::NoSchedule => "NoSchedule",
        TaintEffect::PreferNoSchedule => "PreferNoSchedule",
        TaintEffect::NoExecute => "NoExecute",
    }
}

/// `does not tolerate taint k=v:NoSchedule of node n`, naming every considered taint the pod
/// does not tolerate.
fn describe(
    pod: PodRef<'_>,
    node: NodeRef<'_>,
    considered: &[(StrId, StrId, TaintEffect)],
) -> String {
    let cluster = pod.cluster();
    let missing: Vec<String> = considered
        .iter()
        .filter(|&&(k, v, e)| !pod_tolerates_taint(pod, k, v, e))
        .map(|&(k, v, e)| taint_text(cluster.str(k), cluster.str(v), effect_name(e)))
        .collect();
    format!(
        "does not tolerate {} {} of node {}",
        if missing.len() == 1 {
            "taint"
        } else {
            "taints"
        },
        missing.join(", "),
        node.name()
    )
}
