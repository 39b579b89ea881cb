//! Building a [`Snapshot`]: string interning and the derived indexes.
//!
//! Used by the host (from Kubernetes objects) and by [`crate::testing`] (from hand-built
//! clusters). Owns the invariants the archive promises: `strings[0] == ""`, `strings_sorted`
//! sorted by text, `Pod::owner` pointing at a deduplicated [`Owner`], `Pod::node` resolved from
//! `node_name`.

use std::collections::HashMap;

use crate::model::{NONE, Owner, Snapshot, StrId};

/// Accumulates objects and interns their strings.
#[derive(Debug, Default)]
pub struct SnapshotBuilder {
    snapshot: Snapshot,
    interned: HashMap<String, StrId>,
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
        if let Some(&id) = self.interned.get(s) {
            return id;
        }
        let id = self.snapshot.strings.len() as StrId;
        self.snapshot.strings.push(s.to_owned());
        self.interned.insert(s.to_owned(), id);
        id
    }

    /// The id of `s` if it was interned.
    pub fn lookup(&self, s: &str) -> Option<StrId> {
        self.interned.get(s).copied()
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
        };
        SnapshotBuilder {
            snapshot: tables,
            interned: HashMap::new(),
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
