//! One node's CPU topology, indexed for the checks: per logical CPU its dense core, NUMA and
//! socket index, CPU-id bitsets (`Vec<u64>` words) for existence and per NUMA node / socket,
//! and the derived counts the scheduler uses (threads per core = CPUs / cores, …).
//!
//! Built from the node's `cpu-topology` row into buffers reused from node to node, so a run
//! allocates only when a node is larger than every node before it. Must not look at pods.

use rebalancer_policy_sdk::NONE;
use rebalancer_policy_sdk::model::ArchivedNodeCpuTopology;

/// NUMA nodes and sockets are tracked as `u64` masks of their dense index; a topology with
/// more than this many of either is reported and its NUMA-level checks are skipped.
pub const MAX_NUMA: usize = 64;

/// Bitset helpers over `u64` words.
pub mod bits {
    #[inline]
    pub fn words(width: usize) -> usize {
        width.div_ceil(64)
    }
    #[inline]
    pub fn set(b: &mut [u64], i: u32) {
        b[(i / 64) as usize] |= 1 << (i % 64);
    }
    #[inline]
    pub fn get(b: &[u64], i: u32) -> bool {
        b.get((i / 64) as usize)
            .is_some_and(|w| w & (1 << (i % 64)) != 0)
    }
    /// Zero `b` and make it `words` long (keeps its allocation).
    pub fn reset(b: &mut Vec<u64>, words: usize) {
        b.clear();
        b.resize(words, 0);
    }
    /// |a ∩ b|.
    pub fn count_and(a: &[u64], b: &[u64]) -> u32 {
        a.iter().zip(b).map(|(x, y)| (x & y).count_ones()).sum()
    }
    /// The members, ascending.
    pub fn iter(b: &[u64]) -> impl Iterator<Item = u32> + '_ {
        b.iter().enumerate().flat_map(|(w, &word)| {
            let mut rest = word;
            std::iter::from_fn(move || {
                if rest == 0 {
                    return None;
                }
                let bit = rest.trailing_zeros();
                rest &= rest - 1;
                Some(w as u32 * 64 + bit)
            })
        })
    }
}

/// The indexed topology of one node. [`Topology::load`] refills it.
#[derive(Debug, Default)]
pub struct Topology {
    /// The node has a valid `cpu-topology` (sockets, NUMA nodes, cores and CPUs all > 0).
    pub valid: bool,
    /// NUMA-level checks are possible (at most [`MAX_NUMA`] NUMA nodes and sockets).
    pub numa_ok: bool,
    pub n_cpus: u32,
    pub n_cores: u32,
    /// Threads per core, as the scheduler derives it: CPUs / cores.
    pub tpc: u32,
    pub cpus_per_numa: u32,
    pub cpus_per_socket: u32,
    /// One past the largest CPU id of the topology.
    pub width: u32,
    /// By CPU id: dense core index, [`NONE`] for ids not in the topology.
    pub core_of: Vec<u32>,
    /// By CPU id: dense NUMA index (valid where `core_of` is).
    pub numa_of: Vec<u32>,
    pub socket_of: Vec<u32>,
    /// Raw ids by dense index, ascending.
    pub core_ids: Vec<u32>,
    pub numa_ids: Vec<u32>,
    pub socket_ids: Vec<u32>,
    /// CPUs of the topology, as a bitset.
    pub exists: Vec<u64>,
    /// `numa_ids.len()` bitsets of `words` words each.
    pub numa_masks: Vec<u64>,
    pub socket_masks: Vec<u64>,
    pub words: usize,
}

impl Topology {
    /// Index `row`'s `cpu-topology`, with CPU-id arrays at least `min_width` long (so that ids
    /// of pods' cpusets outside the topology can be looked up too).
    pub fn load(&mut self, row: &ArchivedNodeCpuTopology, min_width: u32) {
        let cpus = row.cpus.as_slice();
        self.valid = !cpus.is_empty();
        self.n_cpus = cpus.len() as u32;
        let top = cpus.iter().map(|c| c.id.to_native() + 1).max().unwrap_or(0);
        self.width = top;
        let width = top.max(min_width) as usize;
        self.words = bits::words(width);
        for (ids, field) in [
            (&mut self.core_ids, 0),
            (&mut self.numa_ids, 1),
            (&mut self.socket_ids, 2),
        ] {
            ids.clear();
            ids.extend(cpus.iter().map(|c| match field {
                0 => c.core.to_native(),
                1 => c.numa.to_native(),
                _ => c.socket.to_native(),
            }));
            ids.sort_unstable();
            ids.dedup();
        }
        self.n_cores = self.core_ids.len() as u32;
        let n_numa = self.numa_ids.len();
        let n_sockets = self.socket_ids.len();
        self.tpc = self.n_cpus.checked_div(self.n_cores).unwrap_or(0);
        self.cpus_per_numa = self.n_cpus.checked_div(n_numa as u32).unwrap_or(0);
        self.cpus_per_socket = self.n_cpus.checked_div(n_sockets as u32).unwrap_or(0);
        self.numa_ok = self.valid && n_numa <= MAX_NUMA && n_sockets <= MAX_NUMA;
        for v in [&mut self.core_of, &mut self.numa_of, &mut self.socket_of] {
            v.clear();
            v.resize(width, NONE);
        }
        bits::reset(&mut self.exists, self.words);
        bits::reset(&mut self.numa_masks, self.words * n_numa);
        bits::reset(&mut self.socket_masks, self.words * n_sockets);
        let index = |ids: &[u32], id: u32| ids.binary_search(&id).map_or(NONE, |i| i as u32);
        for c in cpus {
            let id = c.id.to_native();
            let numa = index(&self.numa_ids, c.numa.to_native());
            let socket = index(&self.socket_ids, c.socket.to_native());
            self.core_of[id as usize] = index(&self.core_ids, c.core.to_native());
            self.numa_of[id as usize] = numa;
            self.socket_of[id as usize] = socket;
            bits::set(&mut self.exists, id);
            let w = self.words;
            bits::set(
                &mut self.numa_masks[numa as usize * w..(numa as usize + 1) * w],
                id,
            );
            bits::set(
                &mut self.socket_masks[socket as usize * w..(socket as usize + 1) * w],
                id,
            );
        }
    }

    pub fn n_numa(&self) -> usize {
        self.numa_ids.len()
    }

    pub fn n_sockets(&self) -> usize {
        self.socket_ids.len()
    }

    pub fn numa_mask(&self, numa: usize) -> &[u64] {
        &self.numa_masks[numa * self.words..(numa + 1) * self.words]
    }

    pub fn socket_mask(&self, socket: usize) -> &[u64] {
        &self.socket_masks[socket * self.words..(socket + 1) * self.words]
    }

    /// Whether CPU `id` is in the topology.
    #[inline]
    pub fn has(&self, id: u32) -> bool {
        self.core_of.get(id as usize).is_some_and(|&c| c != NONE)
    }

    /// The dense NUMA index of a raw NUMA id, if the node has it.
    pub fn numa_index(&self, raw: i32) -> Option<usize> {
        u32::try_from(raw)
            .ok()
            .and_then(|r| self.numa_ids.binary_search(&r).ok())
    }

    /// Dense NUMA indexes of `cpus` (all in the topology), as a mask.
    pub fn numa_span(&self, cpus: &[u32]) -> u64 {
        cpus.iter()
            .fold(0, |m, &c| m | 1u64 << (self.numa_of[c as usize] % 64))
    }

    pub fn socket_span(&self, cpus: &[u32]) -> u64 {
        cpus.iter()
            .fold(0, |m, &c| m | 1u64 << (self.socket_of[c as usize] % 64))
    }

    /// Raw NUMA ids of a dense mask, as text (`0,1`).
    pub fn numa_list(&self, mask: u64) -> String {
        mask_list(mask, &self.numa_ids)
    }

    pub fn socket_list(&self, mask: u64) -> String {
        mask_list(mask, &self.socket_ids)
    }
}

fn mask_list(mask: u64, ids: &[u32]) -> String {
    let mut out = String::new();
    for (i, id) in ids.iter().enumerate().take(64) {
        if mask & (1 << i) != 0 {
            if !out.is_empty() {
                out.push(',');
            }
            out.push_str(&id.to_string());
        }
    }
    out
}
