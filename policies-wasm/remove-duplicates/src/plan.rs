//! The Balance pass of RemoveDuplicates (descheduler v0.36 `removeduplicates.go`), over the
//! zero-copy snapshot.
//!
//! 1. Candidates: non-terminal pods on the nodes in scope that have an ownerRef, none of whose
//!    kinds is excluded, in an allowed namespace, and that pass the evictor's Filter and
//!    PreEvictionFilter.
//! 2. Per node, a pod whose duplicate key (the sorted `ns/kind/name/image` list over ownerRefs ×
//!    containers) was already seen on that node is a duplicate; it is recorded under each of its
//!    owner keys (ns, kind, name, image set). Every candidate counts one occurrence per owner key.
//! 3. Per owner key with duplicates: the feasible target nodes ([`crate::feasible`]); fewer than two
//!    means nothing to do; else `upperAvg = ceil(occurrences / feasible)` and on each node the pods
//!    beyond `upperAvg` are proposed, reacting to refusals like descheduler reacts to eviction
//!    errors (node limit → next node, total limit → stop, anything else → next pod).
//! 4. With `targetResourceFit` (Rebalancer extension, off by default; descheduler #1237), a
//!    duplicate is proposed only when another node of its feasible set has room for its requests
//!    now ([`crate::fit`]); otherwise it is kept and the next one is tried.
//!
//! Everything is keyed on integers (interned strings, pod/node indexes); strings are resolved
//! only to write reasons. Owner keys are visited in order of first appearance and nodes in scope
//! order, so runs are reproducible (descheduler iterates Go maps, so its order is random).

use descheduler_common::scope::NamespaceFilter;
use rebalancer_policy_sdk::model::{ContainerKind, NONE, StrId};
use rebalancer_policy_sdk::{Cluster, Context, Details, Next, Refusal};

use crate::args::RemoveDuplicatesArgs;
use crate::feasible::Feasibility;
use crate::fit::TargetFit;
use crate::intern::{FxHashMap, SliceInterner};

/// One owner key: descheduler's `podOwner{namespace, kind, name, imagesHash}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct OwnerKey {
    namespace: StrId,
    kind: StrId,
    name: StrId,
    /// Interned sorted image list.
    images: u32,
}

#[derive(Debug)]
struct Group {
    key: OwnerKey,
    /// Candidates with this owner key, on all nodes in scope.
    occurrences: u32,
    /// Duplicates (every candidate but the first per node), as (scope position, pod), in scope
    /// order then snapshot order.
    duplicates: Vec<(u32, u32)>,
}

/// Summary of one pass, for logs and tests.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub candidates: usize,
    pub owners_with_duplicates: usize,
    pub proposed: usize,
    pub refused: usize,
    /// Duplicates kept because no other feasible node has room for them (`targetResourceFit`).
    pub no_room: usize,
}

pub fn balance(ctx: &mut Context<'_>, args: &RemoveDuplicatesArgs) -> Result<Outcome, String> {
    let mut details = Details::default();
    let outcome = propose(ctx, args, &mut details);
    details.finish(ctx);
    outcome
}

fn propose(
    ctx: &mut Context<'_>,
    args: &RemoveDuplicatesArgs,
    details: &mut Details,
) -> Result<Outcome, String> {
    let cluster = ctx.cluster;
    let nodes = ctx.nodes();
    let mut outcome = Outcome::default();

    // Scope position of each node id (NONE outside the scope).
    let mut position = vec![NONE; cluster.node_count()];
    for (pos, &node) in nodes.iter().enumerate() {
        let slot = position
            .get_mut(node as usize)
            .ok_or_else(|| format!("host listed node {node}, which is not in the snapshot"))?;
        *slot = pos as u32;
    }

    let candidates = candidates(ctx, args, &position);
    outcome.candidates = candidates.len();
    if candidates.is_empty() {
        return Ok(outcome);
    }
    let groups = find_duplicates(cluster, &candidates, &position, nodes.len());
    outcome.owners_with_duplicates = groups.len();

    let mut feasibility = Feasibility::new(cluster, &nodes);
    // `targetResourceFit` (off by default): built only when asked for, so the default pass does
    // no per-node resource accounting at all.
    let mut fit = args.target_resource_fit.then(|| {
        TargetFit::new(
            cluster,
            &nodes,
            &position,
            groups
                .iter()
                .flat_map(|g| g.duplicates.iter().map(|&(_, pod)| pod)),
        )
    });
    for group in &groups {
        let feasible = feasibility.target_node_count(group.duplicates.iter().map(|&(_, pod)| pod));
        if feasible < 2 {
            details.log(ctx, || {
                format!(
                    "{}: fewer than two feasible nodes for the duplicates to land on, skipping",
                    describe_owner(cluster, &group.key)
                )
            });
            continue;
        }
        let upper_avg = group.occurrences.div_ceil(feasible as u32) as usize;
        for on_node in group.duplicates.chunk_by(|a, b| a.0 == b.0) {
            // `on_node` holds the duplicates only; the first pod seen on the node is kept.
            let on_node_total = on_node.len() + 1;
            if on_node_total <= upper_avg {
                continue;
            }
            let node = cluster.node(nodes[on_node[0].0 as usize]);
            let reason = format!(
                "{on_node_total} pods of {} on node {}; at most {upper_avg} per node across \
                 {feasible} feasible nodes",
                describe_owner(cluster, &group.key),
                node.name()
            );
            let excess = &on_node[upper_avg - 1..];
            let Some(fit) = fit.as_mut() else {
                // One reason for all of them: propose them as one batch.
                let pods: Vec<u32> = excess.iter().map(|&(_, pod)| pod).collect();
                let mut rest = &pods[..];
                while !rest.is_empty() {
                    let batch = ctx.propose_evictions(rest, &reason);
                    outcome.proposed += batch.admitted;
                    let Some(refusal) = batch.refusal else {
                        break;
                    };
                    let pod = rest[batch.admitted];
                    match refused(ctx, details, &mut outcome, pod, refusal) {
                        Next::Pod => rest = &rest[batch.admitted + 1..],
                        Next::Node => break,
                        Next::Stop => return Ok(outcome),
                    }
                }
                continue;
            };
            for &(pos, pod) in excess {
                // With targetResourceFit each duplicate names its own destination.
                let Some(target) = fit.target(&mut feasibility, pod, pos) else {
                    outcome.no_room += 1;
                    let p = cluster.pod(pod);
                    details.log(ctx, || {
                        format!(
                            "{}/{} kept (targetResourceFit): no other feasible node has room \
                             for its requests",
                            p.namespace(),
                            p.name()
                        )
                    });
                    continue;
                };
                let reason = format!("{reason}; node {} has room for it", fit.node_name(target));
                match ctx.propose_eviction(pod, &reason) {
                    Ok(()) => outcome.proposed += 1,
                    Err(refusal) => match refused(ctx, details, &mut outcome, pod, refusal) {
                        Next::Pod => {}
                        Next::Node => break,
                        Next::Stop => return Ok(outcome),
                    },
                }
            }
        }
    }
    Ok(outcome)
}

/// Step 1: the candidate pods, in snapshot order.
fn candidates(ctx: &mut Context<'_>, args: &RemoveDuplicatesArgs, position: &[u32]) -> Vec<u32> {
    let cluster = ctx.cluster;
    let namespaces = NamespaceFilter::new(cluster, args.namespaces.as_ref());
    // A kind no object uses cannot exclude anything, so unresolved names are dropped.
    let excluded_kinds: Vec<StrId> = args
        .exclude_owner_kinds
        .iter()
        .filter_map(|k| cluster.lookup(k))
        .collect();
    let mut pods = Vec::new();
    for pod in cluster.pods() {
        let Some(node) = pod.node() else { continue };
        if position[node as usize] == NONE || pod.is_terminal() {
            continue;
        }
        let refs = &pod.raw.owner_refs;
        if refs.is_empty()
            || refs
                .iter()
                .any(|r| excluded_kinds.contains(&r.kind.to_native()))
            || !namespaces.allows(pod.namespace_id())
        {
            continue;
        }
        pods.push(pod.id);
    }
    ctx.filter_for_eviction(&pods)
}

/// What step 2 needs of one candidate: its duplicate key and its owner groups.
#[derive(Debug, Clone, Copy)]
struct Keyed {
    pod: u32,
    /// Scope position of the pod's node.
    position: u32,
    /// Interned duplicate key.
    key: u32,
    /// Range of the pod's owner groups in the shared group-id list.
    groups: (u32, u32),
}

/// Per snapshot owner (first ownerRef): the last image set seen and what it resolved to, so the
/// common case (one ownerRef, replicas with the same images) needs no hashing at all.
#[derive(Debug, Clone)]
struct OwnerCache {
    images: Vec<u32>,
    group: u32,
    key: u32,
}

/// Interning state of step 2.
#[derive(Debug, Default)]
struct Keys {
    image_sets: SliceInterner,
    duplicate_keys: SliceInterner,
    group_ids: FxHashMap<OwnerKey, u32>,
    groups: Vec<Group>,
}

impl Keys {
    fn group(&mut self, owner: OwnerKey) -> u32 {
        let next = self.groups.len() as u32;
        let gid = *self.group_ids.entry(owner).or_insert(next);
        if gid == next {
            self.groups.push(Group {
                key: owner,
                occurrences: 0,
                duplicates: Vec::new(),
            });
        }
        gid
    }
}

/// Step 2: owner keys with at least one duplicate, in order of first appearance.
///
/// Keys are computed in snapshot order (sequential reads of the archive), then duplicates are
/// found per node on the integers alone.
fn find_duplicates(
    cluster: Cluster<'_>,
    candidates: &[u32],
    position: &[u32],
    scope_len: usize,
) -> Vec<Group> {
    let mut keys = Keys::default();
    let mut owner_cache: Vec<Option<OwnerCache>> = vec![None; cluster.owner_count()];
    let mut keyed: Vec<Keyed> = Vec::with_capacity(candidates.len());
    let mut group_list: Vec<u32> = Vec::with_capacity(candidates.len());

    let mut images: Vec<u32> = Vec::new();
    let mut entries: Vec<[u32; 3]> = Vec::new();
    let mut flat: Vec<u32> = Vec::new();

    for &pod_id in candidates {
        let pod = cluster.pod(pod_id);
        // The host returns only pods we passed in: bound to a node in scope.
        let Some(node) = pod.node() else { continue };
        let pos = position[node as usize];
        if pos == NONE {
            continue;
        }
        images.clear();
        images.extend(
            pod.containers(ContainerKind::App)
                .map(|c| c.image.to_native()),
        );
        if images.is_empty() {
            // The API server rejects pods without containers; such a pod has no key.
            continue;
        }
        images.sort_unstable();
        let namespace = pod.namespace_id();
        let refs = &pod.raw.owner_refs;
        let first_group = group_list.len() as u32;

        let cached = match (refs.len(), pod.owner()) {
            (1, Some(owner)) => owner_cache[owner as usize]
                .as_ref()
                .filter(|c| c.images == images)
                .map(|c| (c.group, c.key)),
            _ => None,
        };
        let key = if let Some((group, key)) = cached {
            keys.groups[group as usize].occurrences += 1;
            group_list.push(group);
            key
        } else {
            let (image_set, _) = keys.image_sets.intern(&images);
            entries.clear();
            for r in refs.iter() {
                let (kind, name) = (r.kind.to_native(), r.name.to_native());
                entries.extend(images.iter().map(|&image| [kind, name, image]));
                let group = keys.group(OwnerKey {
                    namespace,
                    kind,
                    name,
                    images: image_set,
                });
                keys.groups[group as usize].occurrences += 1;
                group_list.push(group);
            }
            // Equal sorted `ns/kind/name/image` string lists ⇔ equal sorted id tuples: none of
            // namespace, kind and name may contain '/', so the strings split unambiguously.
            entries.sort_unstable();
            flat.clear();
            flat.push(namespace);
            flat.extend(entries.iter().flatten());
            let (key, _) = keys.duplicate_keys.intern(&flat);
            if let (1, Some(owner)) = (refs.len(), pod.owner()) {
                owner_cache[owner as usize] = Some(OwnerCache {
                    images: images.clone(),
                    group: group_list[first_group as usize],
                    key,
                });
            }
            key
        };
        keyed.push(Keyed {
            pod: pod_id,
            position: pos,
            key,
            groups: (first_group, group_list.len() as u32),
        });
    }

    // Per node, in scope order: a stable counting sort of the candidates by position.
    let mut starts = vec![0u32; scope_len + 1];
    for k in &keyed {
        starts[k.position as usize + 1] += 1;
    }
    for i in 0..scope_len {
        starts[i + 1] += starts[i];
    }
    let mut order = vec![0u32; keyed.len()];
    let mut next = starts.clone();
    for (i, k) in keyed.iter().enumerate() {
        let slot = &mut next[k.position as usize];
        order[*slot as usize] = i as u32;
        *slot += 1;
    }

    // Per duplicate key: 1 + the scope position it was last seen on (0 = never).
    let mut seen_on = vec![0u32; keys.duplicate_keys.len()];
    for &i in &order {
        let k = keyed[i as usize];
        let stamp = k.position + 1;
        let seen = &mut seen_on[k.key as usize];
        if *seen == stamp {
            for &group in &group_list[k.groups.0 as usize..k.groups.1 as usize] {
                keys.groups[group as usize]
                    .duplicates
                    .push((k.position, k.pod));
            }
        } else {
            *seen = stamp;
        }
    }
    let mut groups = keys.groups;
    groups.retain(|g| !g.duplicates.is_empty());
    groups
}

/// Count a refused proposal and say where to go on (descheduler moves to the next node when
/// the node limit is reached and stops at the total limit).
fn refused(
    ctx: &mut Context<'_>,
    details: &mut Details,
    outcome: &mut Outcome,
    pod: u32,
    refusal: Refusal,
) -> Next {
    outcome.refused += 1;
    details.refused(ctx, pod, &refusal)
}

fn describe_owner(cluster: Cluster<'_>, key: &OwnerKey) -> String {
    format!(
        "{} {}/{}",
        cluster.str(key.kind),
        cluster.str(key.namespace),
        cluster.str(key.name)
    )
}
