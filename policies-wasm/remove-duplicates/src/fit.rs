//! `targetResourceFit` — a Rebalancer extension fixing descheduler #1237 (RemoveDuplicates
//! evicts duplicates that have nowhere to go): a duplicate is proposed only when some other node
//! of its feasible target set has room for its requests right now.
//!
//! "Room" is the resource part of descheduler's nodeFit, computed in the guest: for every
//! resource the pod requests, allocatable − the summed requests of the node's non-terminal pods
//! (pods proposed earlier in the run still count: they are terminating, not gone), and at least
//! one free pod slot. Nothing is reserved on the target, as nodeFit reserves nothing either.
//!
//! Cost (only when the option is on): one pass over the pods to sum requests per node in scope,
//! for the few resources the duplicates request; then per duplicate a cache lookup on
//! (constraint, requests). A cache miss scans the constraint's nodes until two fit, so replicas
//! of one owner — same constraint, same requests — share one scan.

use rebalancer_policy_sdk::model::{NONE, StrId};
use rebalancer_policy_sdk::{Cluster, PodRef};

use crate::feasible::{Constraint, Feasibility};
use crate::intern::{FxHashMap, SliceInterner};

/// Requests per node in scope and the cached answers.
#[derive(Debug)]
pub struct TargetFit<'a> {
    cluster: Cluster<'a>,
    /// The nodes in scope, by scope position.
    nodes: &'a [u32],
    /// Resources some duplicate requests (`pods` excluded), in first-seen order.
    resources: Vec<StrId>,
    /// Interned id of `pods`, if any object mentions it.
    pods: Option<StrId>,
    /// Per scope position × resource: summed requests (milli-units) of the non-terminal pods.
    requested: Vec<i64>,
    /// Per scope position: non-terminal pods on the node.
    pod_count: Vec<u32>,
    request_sets: SliceInterner,
    /// Per (constraint, request set): the first two scope positions with room (`NONE`: none).
    with_room: FxHashMap<(Constraint, u32), [u32; 2]>,
    scratch: Vec<u32>,
}

impl<'a> TargetFit<'a> {
    /// Sums the requests per node in scope of the resources the `duplicates` request. `position`
    /// maps a node id to its scope position (`NONE` outside the scope).
    pub fn new(
        cluster: Cluster<'a>,
        nodes: &'a [u32],
        position: &[u32],
        duplicates: impl IntoIterator<Item = u32>,
    ) -> Self {
        let pods = cluster.lookup("pods");
        let mut resources: Vec<StrId> = Vec::new();
        for pod in duplicates {
            for q in cluster.pod(pod).raw.requests.iter() {
                let r = q.resource.to_native();
                if Some(r) != pods && !resources.contains(&r) {
                    resources.push(r);
                }
            }
        }
        let width = resources.len();
        let mut requested = vec![0i64; nodes.len() * width];
        let mut pod_count = vec![0u32; nodes.len()];
        for pod in cluster.pods() {
            let Some(node) = pod.node() else { continue };
            let pos = position[node as usize];
            if pos == NONE || pod.is_terminal() {
                continue;
            }
            let pos = pos as usize;
            pod_count[pos] += 1;
            for q in pod.raw.requests.iter() {
                let r = q.resource.to_native();
                if let Some(k) = resources.iter().position(|&x| x == r) {
                    requested[pos * width + k] += q.milli.to_native();
                }
            }
        }
        TargetFit {
            cluster,
            nodes,
            resources,
            pods,
            requested,
            pod_count,
            request_sets: SliceInterner::default(),
            with_room: FxHashMap::default(),
            scratch: Vec::new(),
        }
    }

    /// A node of the pod's feasible target set other than `own` (its node's scope position) with
    /// room for its requests, as a scope position; `None` when there is none.
    pub fn target(&mut self, feasibility: &mut Feasibility<'_>, pod: u32, own: u32) -> Option<u32> {
        let pod_ref = self.cluster.pod(pod);
        let key = &mut self.scratch;
        key.clear();
        for q in pod_ref.raw.requests.iter() {
            let milli = q.milli.to_native() as u64;
            key.extend([q.resource.to_native(), milli as u32, (milli >> 32) as u32]);
        }
        let (requests, _) = self.request_sets.intern(key);
        let (constraint, bits, count) = feasibility.pod_nodes(pod);
        if count < 2 {
            // The pod's constraint contributes no node to the target set.
            return None;
        }
        let found = match self.with_room.get(&(constraint, requests)) {
            Some(&found) => found,
            None => {
                let mut found = [NONE; 2];
                let mut n = 0;
                for pos in bits.iter() {
                    if self.has_room(pos, pod_ref) {
                        found[n] = pos as u32;
                        n += 1;
                        if n == found.len() {
                            break;
                        }
                    }
                }
                self.with_room.insert((constraint, requests), found);
                found
            }
        };
        found.into_iter().find(|&pos| pos != NONE && pos != own)
    }

    /// The node name at a scope position.
    pub fn node_name(&self, pos: u32) -> &'a str {
        self.cluster.node(self.nodes[pos as usize]).name()
    }

    /// nodeFit's resource check for a node the pod is not bound to: every requested resource
    /// fits in allocatable − requested, and a pod slot is free.
    fn has_room(&self, pos: usize, pod: PodRef<'_>) -> bool {
        let node = self.cluster.node(self.nodes[pos]);
        let width = self.resources.len();
        let slots_used = i64::from(self.pod_count[pos]) * 1000;
        for q in pod.raw.requests.iter() {
            let (r, want) = (q.resource.to_native(), q.milli.to_native());
            let used = if Some(r) == self.pods {
                slots_used
            } else {
                self.resources
                    .iter()
                    .position(|&x| x == r)
                    .map_or(0, |k| self.requested[pos * width + k])
            };
            if want > node.allocatable(r).saturating_sub(used) {
                return false;
            }
        }
        let slots = self.pods.map_or(0, |p| node.allocatable(p));
        slots - slots_used > 0
    }
}
