//! The Deschedule pass of CpuOrchestration.
//!
//! 1. One sweep over the pods: a pod is looked at further only if it is bound to a node in
//!    scope, not terminal, and has one of Koordinator's scheduling annotations, the QoS label
//!    `LSE`/`LSR`, or a cpu request on a node whose effective bind policy is not `None`
//!    (so annotations are parsed only for pods that have them).
//! 2. Per node in scope order: the node's records (those pods plus its `pod-cpu-allocs`
//!    entries) are checked by [`crate::node`]. A malformed `resource-spec` or
//!    `numa-topology-spec` is logged (bounded) and that pod's spec-based checks are skipped.
//! 3. Proposals: the pods with a hard violation (any violation with `includeSoft`) that the
//!    `evictableNamespaces`/`labelSelector` args admit and that pass the evictor's filters,
//!    most important invariant first, one reason each. A node limit moves on to the next
//!    node, a total limit ends the pass.

use rebalancer_policy_sdk::k8s::koordinator::{KoordQos, LABEL_QOS};
use rebalancer_policy_sdk::model::StrId;
use rebalancer_policy_sdk::view::kv_get;
use rebalancer_policy_sdk::{Cluster, Context, LogLevel, NONE, NodeRef};

use crate::annotations::{
    self, BindPolicy, LABEL_CPU_BIND_POLICY, LABEL_NUMA_ALLOCATE_STRATEGY,
    LABEL_NUMA_TOPOLOGY_POLICY, NumaPolicy,
};
use crate::args::CpuOrchestrationArgs;
use crate::invariant::Invariant;
use crate::node::{NodeBind, NodeCheck, NodeFacts, Rec, Settings};
use descheduler_common::scope::PodScope;
use descheduler_common::tally::{Details, Next, Tally, propose};

/// What a pass did, for the summary line and tests.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Summary {
    pub nodes: usize,
    /// Violations found per invariant (in [`Invariant::ALL`] order), selected ones only.
    pub violations: [usize; 18],
    /// Pods with at least one violation.
    pub violating_pods: usize,
    /// Pods whose `resource-spec` or `numa-topology-spec` could not be read.
    pub malformed: usize,
    /// Violating pods that could be proposed but the evictor's filters keep.
    pub unevictable: usize,
    pub tally: Tally,
}

impl Summary {
    /// `"{n} nodes checked; violations: H8=2 S1=1; …"`.
    pub fn line(&self) -> String {
        let mut counts: Vec<String> = Invariant::ALL
            .iter()
            .filter(|&&i| self.violations[i as usize] > 0)
            .map(|&i| format!("{}={}", i.id(), self.violations[i as usize]))
            .collect();
        if counts.is_empty() {
            counts.push("none".into());
        }
        format!(
            "{} nodes checked; violations: {} ({} pods); {} malformed annotations; \
             {} not evictable; {}",
            self.nodes,
            counts.join(" "),
            self.violating_pods,
            self.malformed,
            self.unevictable,
            self.tally.summary()
        )
    }
}

/// Interned ids of the keys the pass reads (`None`: no object uses the string).
struct Keys {
    spec: Option<StrId>,
    status: Option<StrId>,
    numa: Option<StrId>,
    qos: Option<StrId>,
    cpu: Option<StrId>,
}

/// The pass.
pub fn deschedule(ctx: &mut Context<'_>, args: &CpuOrchestrationArgs) -> Result<Summary, String> {
    let mut details = Details::default();
    let summary = run(ctx, args, &mut details);
    details.finish(ctx);
    summary
}

fn node_bind(node: NodeRef<'_>, cluster: Cluster<'_>) -> NodeBind {
    let label = node.label(LABEL_CPU_BIND_POLICY).unwrap_or("");
    let row = node.cpu_topology();
    let kubelet_full = row.kubelet_policy.to_native() != 0
        && cluster.str(row.kubelet_policy.to_native()) == "static"
        && cluster.lookup("full-pcpus-only").is_some_and(|k| {
            kv_get(&row.kubelet_options, k).is_some_and(|v| cluster.str(v) == "true")
        });
    if label == "FullPCPUsOnly" {
        NodeBind::FullPCPUsOnly(true)
    } else if kubelet_full {
        NodeBind::FullPCPUsOnly(false)
    } else if label == "SpreadByPCPUs" {
        NodeBind::SpreadByPCPUs
    } else {
        NodeBind::None
    }
}

fn run(
    ctx: &mut Context<'_>,
    args: &CpuOrchestrationArgs,
    details: &mut Details,
) -> Result<Summary, String> {
    let cluster = ctx.cluster;
    let nodes = ctx.nodes();
    let keys = Keys {
        spec: cluster.lookup(annotations::RESOURCE_SPEC),
        status: cluster.lookup(annotations::RESOURCE_STATUS),
        numa: cluster.lookup(annotations::NUMA_TOPOLOGY_SPEC),
        qos: cluster.lookup(LABEL_QOS),
        cpu: cluster.lookup("cpu"),
    };
    let cluster_reports_nrt = cluster.nodes().any(|n| n.cpu_topology().has_nrt);
    let settings = Settings {
        cluster_reports_nrt,
        selected: args.selected(),
        default_bind: if args.default_cpu_bind_policy == "SpreadByPCPUs" {
            BindPolicy::SpreadByPCPUs
        } else {
            BindPolicy::FullPCPUs
        },
    };
    let scope = PodScope::new(
        cluster,
        args.evictable_namespaces.as_ref(),
        args.label_selector.as_ref(),
    );

    // 1. The pods worth a look, per node in scope.
    let mut bind = vec![None; cluster.node_count()];
    for &n in &nodes {
        let slot = bind
            .get_mut(n as usize)
            .ok_or_else(|| format!("host listed node {n}, which is not in the snapshot"))?;
        *slot = Some(node_bind(cluster.node(n), cluster));
    }
    let mut per_node: Vec<Vec<u32>> = vec![Vec::new(); cluster.node_count()];
    for pod in cluster.pods() {
        let Some(n) = pod.node() else { continue };
        let Some(node_bind) = bind[n as usize] else {
            continue;
        };
        if pod.is_terminal() {
            continue;
        }
        let annotated = pod.annotations().iter().any(|kv| {
            let k = Some(kv.key.to_native());
            k == keys.spec || k == keys.status || k == keys.numa
        });
        let relevant = annotated
            || keys
                .qos
                .and_then(|k| pod.label_id(k))
                .is_some_and(|v| matches!(cluster.str(v), "LSE" | "LSR"))
            || (node_bind != NodeBind::None && keys.cpu.is_some_and(|c| pod.request(c) > 0));
        if relevant {
            per_node[n as usize].push(pod.id);
        }
    }

    if !settings.cluster_reports_nrt
        && settings.selected.contains(Invariant::H13)
        && per_node.iter().any(|pods| !pods.is_empty())
    {
        ctx.log(
            LogLevel::Warn,
            "CpuOrchestration: no node has a NodeResourceTopology (koordlet not running, its CRD \
             not installed, or not readable by Rebalancer): a missing CPU topology is not held \
             against pinned pods (H13), and the checks against the topology are skipped",
        );
    }

    // 2. The checks.
    let mut check = NodeCheck::default();
    let mut summary = Summary {
        nodes: nodes.len(),
        ..Summary::default()
    };
    let mut candidates: Vec<(u32, u32)> = Vec::new();
    let mut reasons: Vec<String> = Vec::new();
    for &n in &nodes {
        let node = cluster.node(n);
        let row = node.cpu_topology();
        let pods = &per_node[n as usize];
        if pods.is_empty() && row.pod_allocs.is_empty() {
            continue;
        }
        check.clear();
        for &p in pods {
            load_pod(ctx, &mut check, &keys, p, details, &mut summary);
        }
        for alloc in row.pod_allocs.iter() {
            let pod = alloc.pod.to_native();
            let cpus = alloc.cpus.as_slice();
            if cpus.is_empty() {
                continue;
            }
            // A pod with its own record: the kubelet's CPUs count only if it has no
            // resource-status cpuset.
            if pod != NONE
                && let Ok(i) = check.recs.binary_search_by_key(&pod, |r| r.pod)
            {
                if check.recs[i].cpus.1 == 0 {
                    let start = check.arena.len() as u32;
                    check.arena.extend(cpus.iter().map(|c| c.to_native()));
                    check.recs[i].cpus = (start, cpus.len() as u32);
                    check.recs[i].kubelet = true;
                }
                continue;
            }
            let start = check.arena.len() as u32;
            check.arena.extend(cpus.iter().map(|c| c.to_native()));
            let (created, request) = if pod == NONE {
                (i64::MIN, 0)
            } else {
                let p = cluster.pod(pod);
                if p.is_terminal() {
                    continue;
                }
                (p.creation_ms(), keys.cpu.map_or(0, |c| p.request(c)))
            };
            let qos = if pod == NONE {
                KoordQos::None
            } else {
                KoordQos::raw(&cluster.pod(pod))
            };
            check.recs.push(Rec {
                pod,
                created,
                stale_name: (alloc.namespace.to_native(), alloc.name.to_native()),
                kubelet: true,
                cpus: (start, cpus.len() as u32),
                spec: Some(Default::default()),
                numa_spec: Some(Default::default()),
                request,
                qos,
                ..Rec::default()
            });
        }
        let bind = bind[n as usize].unwrap_or(NodeBind::None);
        let label_policy = node
            .label(LABEL_NUMA_TOPOLOGY_POLICY)
            .map(NumaPolicy::parse)
            .unwrap_or_default();
        let numa_policy_from_label = label_policy != NumaPolicy::None;
        let numa_policy = if numa_policy_from_label {
            label_policy
        } else {
            row.topology_policies
                .iter()
                .map(|p| NumaPolicy::from_nrt(cluster.str(p.to_native())))
                .find(|p| *p != NumaPolicy::None)
                .unwrap_or_default()
        };
        let most_allocated = match node.label(LABEL_NUMA_ALLOCATE_STRATEGY) {
            Some("MostAllocated") => true,
            Some("LeastAllocated" | "DistributeEvenly") => false,
            _ => args.numa_scoring_strategy == "MostAllocated",
        };
        let facts = NodeFacts {
            name: node.name(),
            bind,
            numa_policy,
            numa_policy_from_label,
            most_allocated,
            row,
        };
        check.run(cluster, &facts, &settings);
        if check.topo.valid && !check.topo.numa_ok {
            details.log(ctx, || {
                format!(
                    "node {}: more than 64 NUMA nodes or sockets; NUMA checks skipped",
                    node.name()
                )
            });
        }

        // 3. This node's candidates, most important first, then newest first.
        candidates.clear();
        for (i, rec) in check.recs.iter().enumerate() {
            if rec.found.is_empty() {
                continue;
            }
            summary.violating_pods += 1;
            let proposable = if args.include_soft {
                !rec.found.is_empty()
            } else {
                rec.found.has_hard()
            };
            if proposable && rec.pod != NONE && scope.admits(cluster.pod(rec.pod)) {
                candidates.push((rec.best.as_ref().map_or(0, |b| b.0 as u32), i as u32));
            }
        }
        if candidates.is_empty() {
            continue;
        }
        candidates.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        let ids: Vec<u32> = candidates
            .iter()
            .map(|&(_, i)| check.recs[i as usize].pod)
            .collect();
        let passed = ctx.filter_for_eviction(&ids);
        summary.unevictable += ids.len() - passed.len();
        summary.tally.candidates += passed.len();
        reasons.clear();
        let mut next = Next::Pod;
        for &(_, i) in &candidates {
            let rec = &check.recs[i as usize];
            if !passed.contains(&rec.pod) {
                continue;
            }
            let reason = reason_of(rec);
            next = propose(ctx, rec.pod, &reason, &mut summary.tally, details);
            if next != Next::Pod {
                break;
            }
        }
        if next == Next::Stop {
            break;
        }
    }
    summary.violations = check.counts;
    Ok(summary)
}

/// The most important violation's reason, with the others named.
fn reason_of(rec: &Rec) -> String {
    let (best, reason) = rec
        .best
        .as_ref()
        .map_or((Invariant::H1, ""), |(i, r)| (*i, r.as_str()));
    let others: Vec<&str> = rec
        .found
        .iter()
        .filter(|&i| i != best)
        .map(Invariant::id)
        .collect();
    match others.len() {
        0 => reason.to_owned(),
        n => format!(
            "{reason} (and {n} more violation{}: {})",
            if n == 1 { "" } else { "s" },
            others.join(", ")
        ),
    }
}

/// Fill `pod`'s record from its annotations and labels.
fn load_pod(
    ctx: &mut Context<'_>,
    check: &mut NodeCheck,
    keys: &Keys,
    id: u32,
    details: &mut Details,
    summary: &mut Summary,
) {
    let cluster = ctx.cluster;
    let pod = cluster.pod(id);
    let anns = pod.annotations();
    let text = |key: Option<StrId>| key.and_then(|k| kv_get(anns, k)).map(|v| cluster.str(v));
    let mut rec = Rec {
        pod: id,
        created: pod.creation_ms(),
        request: keys.cpu.map_or(0, |c| pod.request(c)),
        qos: keys
            .qos
            .and_then(|k| pod.label_id(k))
            .map_or(KoordQos::None, |v| KoordQos::from_name(cluster.str(v))),
        spec: Some(Default::default()),
        numa_spec: Some(Default::default()),
        ..Rec::default()
    };
    let mut malformed = |what: &str, e: String, ctx: &mut Context<'_>| {
        summary.malformed += 1;
        details.log(ctx, || {
            format!(
                "pod {}/{}: {what} is malformed ({e}); its spec-based checks are skipped",
                pod.namespace(),
                pod.name()
            )
        });
    };
    if let Some(t) = text(keys.spec) {
        match annotations::parse_resource_spec(t) {
            Ok(spec) => rec.spec = Some(spec),
            Err(e) => {
                rec.spec = None;
                malformed(annotations::RESOURCE_SPEC, e, ctx);
            }
        }
    }
    if let Some(t) = text(keys.numa) {
        match annotations::parse_numa_spec(t) {
            Ok(spec) => rec.numa_spec = Some(spec),
            Err(e) => {
                rec.numa_spec = None;
                malformed(annotations::NUMA_TOPOLOGY_SPEC, e, ctx);
            }
        }
    }
    if let Some(t) = text(keys.status) {
        match annotations::parse_resource_status(t) {
            Ok(status) => {
                rec.has_status = true;
                let start = check.arena.len() as u32;
                check.arena.extend_from_slice(&status.cpus);
                rec.cpus = (start, status.cpus.len() as u32);
                let start = check.numa_arena.len() as u32;
                check.numa_arena.extend_from_slice(&status.numa);
                rec.numa = (start, status.numa.len() as u32);
            }
            Err(e) => rec.status_error = Some(e),
        }
    }
    check.recs.push(rec);
}
