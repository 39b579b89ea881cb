//! Building a [`Snapshot`]: string interning and the derived indexes.
//!
//! Used by the host (from Kubernetes objects) and by [`crate::testing`] (from hand-built
//! clusters). Owns the invariants the archive promises: `strings[0] == ""`, `strings_sorted`
//! sorted by text, `Pod::owner` pointing at a deduplicated [`Owner`], `Pod::node` resolved from
//! `node_name`.

use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};

use hashbrown::HashTable;

use crate::model::{NONE, Owner, Snapshot, StrId};

/// Accumulates objects and interns their strings.
#[derive(Default)]
pub struct SnapshotBuilder {
    snapshot: Snapshot,
    /// The ids of `snapshot.strings`, by their text (the text itself is stored only there).
    interned: HashTable<StrId>,
}

impl std::fmt::Debug for SnapshotBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SnapshotBuilder")
            .field("snapshot", &self.snapshot)
            .field("interned", &self.interned.len())
            .finish()
    }
}

/// FxHash (rustc's hasher): fast for the short strings interned here, and stable across runs.
#[derive(Default, Clone, Copy)]
pub struct FxHasher(u64);

/// Builds [`FxHasher`]s (for `HashMap`s keyed by short strings or ids).
pub type FxBuild = BuildHasherDefault<FxHasher>;

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(word) ^ ((rest.len() as u64) << 56));
        }
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

fn hash_str(s: &str) -> u64 {
    FxBuild::default().hash_one(s)
}

impl SnapshotBuilder {
    pub fn new(revision: u64, time_ms: i64) -> Self {
        let mut builder = SnapshotBuilder::default();
        builder.snapshot.layout_version = crate::model::LAYOUT_VERSION;
        builder.snapshot.revision = revision;
        builder.snapshot.time_ms = time_ms;
        builder.intern("");
        builder
    }

    /// The id of `s`, adding it to the table on first use.
    pub fn intern(&mut self, s: &str) -> StrId {
        let strings = &mut self.snapshot.strings;
        let hash = hash_str(s);
        match self.interned.entry(
            hash,
            |&id| strings[id as usize] == s,
            |&id| hash_str(&strings[id as usize]),
        ) {
            hashbrown::hash_table::Entry::Occupied(e) => *e.get(),
            hashbrown::hash_table::Entry::Vacant(e) => {
                let id = strings.len() as StrId;
                strings.push(s.to_owned());
                e.insert(id);
                id
            }
        }
    }

    /// The id of `s` if it was interned.
    pub fn lookup(&self, s: &str) -> Option<StrId> {
        let strings = &self.snapshot.strings;
        self.interned
            .find(hash_str(s), |&id| strings[id as usize] == s)
            .copied()
    }

    pub fn str(&self, id: StrId) -> &str {
        &self.snapshot.strings[id as usize]
    }

    /// Direct access to the tables being built (push nodes, pods, PDBs… here).
    pub fn snapshot_mut(&mut self) -> &mut Snapshot {
        &mut self.snapshot
    }

    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    /// [`SnapshotBuilder::finish`] that keeps the string table for the next snapshot: the
    /// tables are moved out, the strings copied. A builder reused this way hands out the same
    /// id for a string in every snapshot, so rows converted once can be reused (live clusters);
    /// strings of objects gone stay in the table until the builder is replaced.
    pub fn finish_keeping(&mut self) -> Snapshot {
        let snapshot = &mut self.snapshot;
        let tables = Snapshot {
            layout_version: snapshot.layout_version,
            revision: snapshot.revision,
            time_ms: snapshot.time_ms,
            strings: snapshot.strings.clone(),
            strings_sorted: Vec::new(),
            nodes: std::mem::take(&mut snapshot.nodes),
            pods: std::mem::take(&mut snapshot.pods),
            owners: Vec::new(),
            namespaces: std::mem::take(&mut snapshot.namespaces),
            pdbs: std::mem::take(&mut snapshot.pdbs),
            priority_classes: std::mem::take(&mut snapshot.priority_classes),
            pvcs: std::mem::take(&mut snapshot.pvcs),
            node_annotations: std::mem::take(&mut snapshot.node_annotations),
            node_usage: std::mem::take(&mut snapshot.node_usage),
            pod_usage: std::mem::take(&mut snapshot.pod_usage),
            node_cpu: std::mem::take(&mut snapshot.node_cpu),
        };
        SnapshotBuilder {
            snapshot: tables,
            interned: HashTable::new(),
        }
        .finish()
    }

    /// How many strings the table holds.
    pub fn string_count(&self) -> usize {
        self.snapshot.strings.len()
    }

    /// Resolve references and sort the string index. Pods' `node` is looked up from `node_name`
    /// (first node with that name wins) and `owner` from their first ownerRef.
    pub fn finish(mut self) -> Snapshot {
        let mut node_index: HashMap<StrId, u32> = HashMap::with_capacity(self.snapshot.nodes.len());
        for (i, node) in self.snapshot.nodes.iter().enumerate() {
            node_index.entry(node.name).or_insert(i as u32);
        }
        let mut owner_index: HashMap<(StrId, StrId, StrId, StrId), u32> = HashMap::new();
        let mut owners: Vec<Owner> = Vec::new();
        for pod in &mut self.snapshot.pods {
            pod.node = if pod.node_name == 0 {
                NONE
            } else {
                node_index.get(&pod.node_name).copied().unwrap_or(NONE)
            };
            pod.owner = match pod.owner_refs.first() {
                None => NONE,
                Some(r) => {
                    let key = (pod.namespace, r.kind, r.name, r.uid);
                    *owner_index.entry(key).or_insert_with(|| {
                        owners.push(Owner {
                            namespace: key.0,
                            kind: key.1,
                            name: key.2,
                            uid: key.3,
                        });
                        (owners.len() - 1) as u32
                    })
                }
            };
        }
        self.snapshot.owners = owners;
        let strings = &self.snapshot.strings;
        let mut sorted: Vec<StrId> = (0..strings.len() as StrId).collect();
        sorted.sort_unstable_by(|&a, &b| strings[a as usize].cmp(&strings[b as usize]));
        self.snapshot.strings_sorted = sorted;
        self.snapshot
    }
}
