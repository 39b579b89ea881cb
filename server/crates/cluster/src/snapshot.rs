//! Building the archive policies read, and the snapshot handle the rest of the server holds.
//!
//! Owns [`build_snapshot`] (decode the modelled kinds of an [`ObjectSet`], intern, resolve
//! references, archive with rkyv) and [`ClusterSnapshot`] (the archive plus the JSON of every
//! object behind a table row, shared with the object set, not copied).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, OnceLock};

use rebalancer_policy_sdk::build::SnapshotBuilder;
use rebalancer_policy_sdk::evictor::ClusterIndex;
use rebalancer_policy_sdk::model::{self, NONE, Section};
use rebalancer_policy_sdk::view::Cluster;
use serde::Deserialize;

use super::archive::SharedArchive;
use super::convert::{self, Ctx, FieldError};
use super::objects::{Entry, JsonStore, Kind, ObjectSet, PackedJson, Span, qualified};
use super::{
    IngestError, IngestWarning, ObjectKind, WarningCode, jsonpath, sample_list, topology, usage,
    wire,
};

/// One cluster at one revision: the archive guests read, plus per-row access to full objects.
pub struct ClusterSnapshot {
    /// Cluster revision the archive was built for.
    pub revision: u64,
    /// Snapshot time (ms since the Unix epoch), the runs' clock.
    pub time_ms: i64,
    /// Objects per kind (every kind in the set, modelled or not).
    pub counts: BTreeMap<String, u64>,
    /// What was odd about the objects (parse and build warnings together).
    pub warnings: Vec<IngestWarning>,
    /// The `model::to_bytes_aligned` output, sections on [`model::MAP_ALIGN`] boundaries, in a
    /// sealed memory file guests map (or on the heap); private so that
    /// [`ClusterSnapshot::cluster`] can trust it.
    archive: Arc<SharedArchive>,
    /// The JSON of every table row: shared with the object set while it is being persisted,
    /// then compressed ([`ClusterSnapshot::compact_json`]).
    json: RowJson,
    /// The evictor's indexes over this snapshot, built on first use.
    index: OnceLock<Arc<ClusterIndex>>,
}

impl fmt::Debug for ClusterSnapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClusterSnapshot")
            .field("revision", &self.revision)
            .field("time_ms", &self.time_ms)
            .field("counts", &self.counts)
            .field("warnings", &self.warnings.len())
            .field("archive_bytes", &self.archive.bytes().len())
            .finish()
    }
}

/// Lets a `bytes::Bytes` share the archive (for sections handed over as copies).
struct ArchiveOwner(Arc<SharedArchive>);

impl AsRef<[u8]> for ArchiveOwner {
    fn as_ref(&self) -> &[u8] {
        self.0.bytes()
    }
}

impl ClusterSnapshot {
    /// Read the archive in place.
    pub fn cluster(&self) -> Cluster<'_> {
        // SAFETY: `archive` is private and written only by `build_snapshot`, from
        // `model::to_bytes_aligned` of a `Snapshot`, in an aligned buffer or a page-aligned map.
        unsafe { Cluster::from_bytes_unchecked(self.archive.bytes()) }
    }

    /// The evictor's indexes (pods per node, PDB coverage, …), built once on first use and
    /// shared by every run on this snapshot.
    pub fn index(&self) -> Arc<ClusterIndex> {
        self.index
            .get_or_init(|| Arc::new(ClusterIndex::new(self.cluster())))
            .clone()
    }

    /// The whole archive: header and every section.
    pub fn archive_bytes(&self) -> &[u8] {
        self.archive.bytes()
    }

    /// The archive's storage, for handing sections to guests (mapped where possible).
    pub fn archive(&self) -> &SharedArchive {
        &self.archive
    }

    /// One section of the archive as a shared buffer (a guest receives the core as
    /// `cluster.snapshot` and the others as `cluster.snapshot-section`): a reference-count
    /// increment, no copy.
    pub fn section(&self, section: Section) -> bytes::Bytes {
        let range = self.archive.range(section);
        bytes::Bytes::from_owner(ArchiveOwner(self.archive.clone())).slice(range)
    }

    /// The full (trimmed) object behind row `index` of the `kind` table, as JSON; `kind` is the
    /// Kubernetes kind (`"Pod"`, `"Node"`, `"PodDisruptionBudget"`, `"Namespace"`,
    /// `"PriorityClass"`, `"PersistentVolumeClaim"`).
    pub fn object_json(&self, kind: &str, index: u32) -> Option<String> {
        self.object_json_of(ObjectKind::from_kind(kind)?, index)
            .map(Cow::into_owned)
    }

    /// Like [`ClusterSnapshot::object_json`], borrowed while the text is uncompressed.
    pub fn object_json_of(&self, kind: ObjectKind, index: u32) -> Option<Cow<'_, str>> {
        match &self.json {
            RowJson::Shared { store, spans } => {
                let span = *spans[kind.table()].get(index as usize)?;
                Some(store.get(span))
            }
            RowJson::Compressed(c) => c.get(kind.table(), index as usize).map(Cow::Owned),
        }
    }

    /// Replace the shared document text by one lz4 block per table row. The object set keeps
    /// the whole pushed document (420 MB for the reference cluster) alive for as long as the
    /// snapshot shares it; compressed, the rows policies may ask for take about a fifth of
    /// that. Call once the object set is no longer needed (it has been persisted).
    pub fn compact_json(&mut self) {
        if let RowJson::Shared { store, spans } = &self.json {
            let compressed = CompressedRows::new(store, spans);
            self.json = RowJson::Compressed(Box::new(compressed));
        }
    }

    /// Bytes held for the rows' JSON (compressed or, while shared, the rows' text).
    pub fn json_bytes(&self) -> usize {
        match &self.json {
            RowJson::Shared { store, spans } => spans
                .iter()
                .flatten()
                .map(|&span| store.text_len(span))
                .sum(),
            RowJson::Compressed(c) => c.data.len(),
        }
    }
}

/// Where the JSON of each table row is.
enum RowJson {
    /// In the object set's store (the pushed document), shared.
    Shared {
        store: Arc<JsonStore>,
        /// Per [`ObjectKind`] table: where each row's JSON lives.
        spans: [Vec<Span>; 6],
    },
    Compressed(Box<CompressedRows>),
}

/// The rows' JSON, lz4-compressed in groups of [`CompressedRows::GROUP`] consecutive rows of a
/// table: neighbouring objects share most of their keys and many values, so a group compresses
/// several times better than one object alone, and reading a row decompresses one group
/// (~100 KB, tens of microseconds).
struct CompressedRows {
    data: Vec<u8>,
    /// Per table, per group: where its block starts in `data` (a block ends where the next
    /// begins; the last one at `ends[table]`).
    groups: [Vec<u64>; 6],
    ends: [u64; 6],
    /// Per table, per row: where the row starts in its group's text (it ends where the next row
    /// of the group starts, or at the end of the group).
    offsets: [Vec<u32>; 6],
}

impl CompressedRows {
    const GROUP: usize = 32;

    fn new(store: &JsonStore, spans: &[Vec<Span>; 6]) -> Self {
        // Compressed in groups, Kubernetes JSON shrinks 5–10×: reserve for 4× so the buffer is
        // not grown (and copied) while the uncompressed document is still alive.
        let total: usize = spans.iter().flatten().map(|&s| store.text_len(s)).sum();
        let mut data: Vec<u8> = Vec::with_capacity(total / 4 + 4096);
        let (mut text, mut scratch) = (Vec::new(), Vec::new());
        let mut groups: [Vec<u64>; 6] = Default::default();
        let mut offsets: [Vec<u32>; 6] = Default::default();
        let mut ends = [0u64; 6];
        for (table, rows) in spans.iter().enumerate() {
            offsets[table].reserve_exact(rows.len());
            groups[table].reserve_exact(rows.len().div_ceil(Self::GROUP));
            for group in rows.chunks(Self::GROUP) {
                text.clear();
                for &span in group {
                    offsets[table].push(text.len() as u32);
                    text.extend_from_slice(store.get(span).as_bytes());
                }
                groups[table].push(data.len() as u64);
                scratch.resize(lz4_flex::block::get_maximum_output_size(text.len()), 0);
                let written = lz4_flex::block::compress_into(&text, &mut scratch)
                    .expect("the scratch buffer has the maximum output size");
                data.extend_from_slice(&(text.len() as u32).to_le_bytes());
                data.extend_from_slice(&scratch[..written]);
            }
            ends[table] = data.len() as u64;
        }
        data.shrink_to_fit();
        CompressedRows {
            data,
            groups,
            ends,
            offsets,
        }
    }

    fn get(&self, table: usize, row: usize) -> Option<String> {
        let offsets = &self.offsets[table];
        let start_in_group = *offsets.get(row)? as usize;
        let group = row / Self::GROUP;
        let groups = &self.groups[table];
        let start = groups[group] as usize;
        let end = groups.get(group + 1).copied().unwrap_or(self.ends[table]) as usize;
        let text = lz4_flex::block::decompress_size_prepended(&self.data[start..end]).ok()?;
        let last_of_group = (group + 1) * Self::GROUP - 1;
        let end_in_group = if row < last_of_group && row + 1 < offsets.len() {
            offsets[row + 1] as usize
        } else {
            text.len()
        };
        // Compressed from `str`s: valid UTF-8 unless memory was corrupted.
        String::from_utf8(text.get(start_in_group..end_in_group)?.to_vec()).ok()
    }
}

fn decode<'s, T: Deserialize<'s>>(json: &'s str) -> Result<T, FieldError> {
    serde_json::from_str(json).map_err(|e| {
        let (field, message) = jsonpath::locate(json, &e);
        FieldError { field, message }
    })
}

fn invalid(entry: &Entry, e: FieldError) -> IngestError {
    IngestError::InvalidObject {
        index: entry.index,
        kind: entry.kind.as_str().into(),
        namespace: entry.namespace.clone(),
        name: super::document::shorten(&entry.name).into(),
        field: e.field.into(),
        message: e.message.into(),
    }
}

/// One modelled object, decoded (borrowing its JSON) but not yet converted.
// Nearly every object is a pod: boxing the large variant would add an allocation per pod.
#[allow(clippy::large_enum_variant)]
enum Decoded<'s> {
    Pod(wire::Pod<'s>),
    Node(wire::Node<'s>),
    Pdb(wire::Pdb<'s>),
    Namespace(wire::MetaOnly<'s>),
    PriorityClass(wire::PriorityClass<'s>),
    Pvc(wire::Pvc<'s>),
}

fn decode_entry(kind: ObjectKind, json: &str) -> Result<Decoded<'_>, FieldError> {
    Ok(match kind {
        ObjectKind::Pod => Decoded::Pod(decode(json)?),
        ObjectKind::Node => Decoded::Node(decode(json)?),
        ObjectKind::PodDisruptionBudget => Decoded::Pdb(decode(json)?),
        ObjectKind::Namespace => Decoded::Namespace(decode(json)?),
        ObjectKind::PriorityClass => Decoded::PriorityClass(decode(json)?),
        ObjectKind::PersistentVolumeClaim => Decoded::Pvc(decode(json)?),
    })
}

/// Convert one decoded object and append its row to the right table.
fn convert_entry<'s>(
    ctx: &mut Ctx,
    decoded: &Decoded<'s>,
    namespace: &str,
) -> Result<(), FieldError> {
    match decoded {
        Decoded::Pod(w) => {
            let row = convert::pod(ctx, w, namespace)?;
            ctx.builder.snapshot_mut().pods.push(row);
        }
        Decoded::Node(w) => {
            let (row, annotations) = convert::node(ctx, w)?;
            let tables = ctx.builder.snapshot_mut();
            tables.nodes.push(row);
            tables.node_annotations.push(annotations);
        }
        Decoded::Pdb(w) => {
            let row = convert::pdb(ctx, w, namespace)?;
            ctx.builder.snapshot_mut().pdbs.push(row);
        }
        Decoded::Namespace(w) => {
            let row = convert::namespace(ctx, w)?;
            ctx.builder.snapshot_mut().namespaces.push(row);
        }
        Decoded::PriorityClass(w) => {
            let row = convert::priority_class(ctx, w)?;
            ctx.builder.snapshot_mut().priority_classes.push(row);
        }
        Decoded::Pvc(w) => {
            let row = convert::pvc(ctx, w, namespace)?;
            ctx.builder.snapshot_mut().pvcs.push(row);
        }
    }
    Ok(())
}

/// Models with at least this many pods are freed on a helper thread.
const FREE_ASIDE_MIN_PODS: usize = 4096;

/// Decode the modelled objects of `objects` and archive them. Tables keep document order.
/// Each object is decoded into borrowed wire structs and converted (interning as it goes)
/// right away, so only one object's intermediate form is alive at a time. Blocking and
/// CPU-bound (≈ 2.5 s for 150,000 pods): call from `spawn_blocking`.
///
/// Decoding on a second thread was measured and dropped: on this 2-core machine it cost
/// ~40 % more CPU (cross-core cache traffic) for no reliable wall-clock gain.
pub fn build_snapshot(
    objects: &ObjectSet,
    revision: u64,
    time_ms: i64,
) -> Result<ClusterSnapshot, IngestError> {
    let mut ctx = Ctx::new(revision, time_ms);
    ctx.strict = objects.pushed;
    let modelled = modelled(objects);
    reserve_tables(&mut ctx, &modelled);
    let store = &*objects.store;
    let mut spans = spans_for(&modelled);
    for &(entry, kind) in &modelled {
        decode_entry(kind, &store.get(entry.span))
            .and_then(|d| convert_entry(&mut ctx, &d, &entry.namespace))
            .map_err(|e| invalid(entry, e))?;
        spans[kind.table()].push(entry.span);
    }
    let mut joins = usage::Joins::default();
    let mut usage_warnings = usage::attach(&mut ctx, objects, &mut joins, None);
    usage_warnings.extend(topology::attach(&mut ctx, objects, &mut joins, None));
    let Ctx {
        builder,
        missing_creation,
        pdb_without_status,
        ..
    } = ctx;
    let model = builder.finish();
    let snapshot = assemble(
        objects,
        &modelled,
        &model,
        spans,
        &missing_creation,
        &pdb_without_status,
        usage_warnings,
    );
    free_aside(model);
    snapshot
}

/// Freeing millions of small allocations takes a few hundred ms on large clusters: do it off
/// the caller's path when there is much to free.
fn free_aside(model: model::Snapshot) {
    if model.pods.len() >= FREE_ASIDE_MIN_PODS {
        let _ = std::thread::Builder::new()
            .name("snapshot-free".into())
            .spawn(move || drop(model));
    }
}

/// The modelled objects of a set, in its order.
fn modelled(objects: &ObjectSet) -> Vec<(&Entry, ObjectKind)> {
    objects
        .entries
        .iter()
        .filter_map(|e| match e.kind {
            Kind::Known(k) => Some((e, k)),
            Kind::Other(_) => None,
        })
        .collect()
}

fn per_kind(modelled: &[(&Entry, ObjectKind)]) -> [usize; 6] {
    let mut per_kind = [0usize; 6];
    for &(_, kind) in modelled {
        per_kind[kind.table()] += 1;
    }
    per_kind
}

fn spans_for(modelled: &[(&Entry, ObjectKind)]) -> [Vec<Span>; 6] {
    let mut spans: [Vec<Span>; 6] = Default::default();
    for (spans, n) in spans.iter_mut().zip(per_kind(modelled)) {
        spans.reserve_exact(n);
    }
    spans
}

/// Size the tables up front: no reallocation (and no transient double copy) of 100 MB+ tables.
fn reserve_tables(ctx: &mut Ctx, modelled: &[(&Entry, ObjectKind)]) {
    let per_kind = per_kind(modelled);
    let tables = ctx.builder.snapshot_mut();
    tables
        .nodes
        .reserve_exact(per_kind[ObjectKind::Node.table()]);
    tables.pods.reserve_exact(per_kind[ObjectKind::Pod.table()]);
    tables
        .pdbs
        .reserve_exact(per_kind[ObjectKind::PodDisruptionBudget.table()]);
    tables
        .namespaces
        .reserve_exact(per_kind[ObjectKind::Namespace.table()]);
    tables
        .priority_classes
        .reserve_exact(per_kind[ObjectKind::PriorityClass.table()]);
    tables
        .pvcs
        .reserve_exact(per_kind[ObjectKind::PersistentVolumeClaim.table()]);
}

/// Warnings, the archive and the snapshot handle, from the finished model.
fn assemble(
    objects: &ObjectSet,
    modelled: &[(&Entry, ObjectKind)],
    snapshot: &model::Snapshot,
    spans: [Vec<Span>; 6],
    missing_creation: &[String],
    pdb_without_status: &[String],
    more_warnings: Vec<IngestWarning>,
) -> Result<ClusterSnapshot, IngestError> {
    let store = &*objects.store;
    let (revision, time_ms) = (snapshot.revision, snapshot.time_ms);
    let mut warnings = objects.warnings().to_vec();
    warnings.extend(more_warnings);
    if !missing_creation.is_empty() {
        let n = missing_creation.len();
        warnings.push(IngestWarning::new(
            WarningCode::MissingCreationTimestamp,
            n,
            format!(
                "{n} pod(s) have no metadata.creationTimestamp; their age counts from the \
                 snapshot time: {}",
                sample_list(missing_creation.iter().map(String::as_str), n)
            ),
        ));
    }
    for pdb in pdb_without_status {
        warnings.push(IngestWarning::new(
            WarningCode::PdbWithoutStatus,
            1,
            format!(
                "PodDisruptionBudget {pdb} has no status (not yet reconciled); it is treated as \
                 allowing no disruption"
            ),
        ));
    }

    warnings.extend(missing_node_warnings(snapshot));
    // `model::to_bytes` with every section on a page boundary (so that guests can map it),
    // written into a buffer sized up front (the archive
    // is about a quarter of the JSON): no growth by copying a 100 MB buffer.
    let json_len: usize = modelled.iter().map(|(e, _)| store.text_len(e.span)).sum();
    let buffer = model::ArchiveBuffer::with_capacity(json_len / 4 + 4096);
    let archive = model::to_bytes_aligned(snapshot, buffer, model::MAP_ALIGN)
        .map_err(|e| IngestError::Archive(e.to_string()))?;
    Ok(ClusterSnapshot {
        revision,
        time_ms,
        counts: objects.counts(),
        warnings,
        archive: Arc::new(SharedArchive::new(archive)),
        json: RowJson::Shared {
            store: objects.store.clone(),
            spans,
        },
        index: OnceLock::new(),
    })
}

/// Snapshot builds of a live cluster that convert only what changed.
///
/// Each build keeps its model tables and the JSON they were converted from. The next build of
/// [`ObjectSet::from_shared`] objects moves the row of every object whose JSON is the very same
/// shared text (same pointer, kept alive by the previous set) into the new tables instead of
/// decoding it again, and decodes the others; strings are interned into one table kept across
/// builds, so moved rows stay valid. The result holds the same rows in the same order as
/// [`build_snapshot`] of the same set; only string ids may differ (interning order). Strings of
/// objects gone stay in the table until as many rows were converted *again* (after the first
/// build) as the cluster holds objects; then the next build starts a new table. (Counting the
/// first build's rows too, as this once did, restarted the table at the first change after the
/// initial sync, and every second revision after that was a full build.) Pods without a creation timestamp (their
/// age counts from the snapshot time) are always converted again. Unlike [`build_snapshot`],
/// which refuses a document with an object it cannot model, a live build leaves such an object
/// out and names it in a [`WarningCode::InvalidObject`] warning: one odd object must not stop
/// the cluster's revisions.
#[derive(Default)]
pub struct LiveRows {
    builder: SnapshotBuilder,
    previous: Option<Previous>,
    /// Rows converted since the string table was started.
    converted: usize,
}

/// The last build's tables, and where each reusable row is in them.
struct Previous {
    tables: model::Snapshot,
    /// JSON pointer → (kind, row in its table, PDB without status).
    rows: std::collections::HashMap<usize, (ObjectKind, u32, Option<String>), convert::FxBuild>,
    /// The usage objects and NRTs as read, by JSON pointer (see `usage::Reuse`); their
    /// resource ids are the builder's, which a reset of the string table drops with them.
    usage: usage::ParseCache<usage::Parsed>,
    topology: usage::ParseCache<topology::ParsedNrt>,
    /// Keeps every pointer above alive (so none can be reused by another object's JSON).
    _store: Arc<JsonStore>,
}

impl Previous {
    fn empty_caches() -> (
        usage::ParseCache<usage::Parsed>,
        usage::ParseCache<topology::ParsedNrt>,
    ) {
        Default::default()
    }
}

fn json_key(json: &PackedJson) -> usize {
    json.key()
}

impl LiveRows {
    /// Rows decoded and converted since the string table was started (the rest were reused).
    pub fn rows_converted(&self) -> usize {
        self.converted
    }

    /// Build the snapshot of `objects` (a set of shared objects), reusing unchanged rows.
    pub fn build(
        &mut self,
        objects: &ObjectSet,
        revision: u64,
        time_ms: i64,
    ) -> Result<ClusterSnapshot, IngestError> {
        let modelled = modelled(objects);
        if self.converted > 2 * modelled.len().max(1024) {
            // Enough churn (the first build converts every row once) that the table may hold
            // as many dead strings as live ones.
            *self = LiveRows::default();
        }
        let mut previous = self.previous.take();
        let builder = std::mem::take(&mut self.builder);
        let builder = if builder.string_count() == 0 {
            SnapshotBuilder::new(revision, time_ms)
        } else {
            builder
        };
        let mut ctx = Ctx::with_builder(builder, revision, time_ms);
        reserve_tables(&mut ctx, &modelled);
        let store = &*objects.store;
        let mut spans = spans_for(&modelled);
        let mut pdb_without_status = Vec::new();
        let mut left_out = Vec::new();
        let mut left_out_warnings = Vec::new();
        let mut rows = std::collections::HashMap::with_capacity_and_hasher(
            modelled.len(),
            convert::FxBuild::default(),
        );
        for &(entry, kind) in &modelled {
            let shared = store.shared(entry.span);
            let key = shared.map(json_key);
            let reused = match (&mut previous, key) {
                (Some(prev), Some(key)) => match prev.rows.get(&key) {
                    Some((k, row, no_status)) if *k == kind => {
                        let index = move_row(&mut prev.tables, &mut ctx, kind, *row as usize);
                        if let Some(p) = no_status {
                            pdb_without_status.push(p.clone());
                        }
                        rows.insert(key, (kind, index, no_status.clone()));
                        true
                    }
                    _ => false,
                },
                _ => false,
            };
            if !reused {
                let missing_before = ctx.missing_creation.len();
                let pdbs_before = ctx.pdb_without_status.len();
                let converted = decode_entry(kind, &store.get(entry.span))
                    .and_then(|d| convert_entry(&mut ctx, &d, &entry.namespace));
                if let Err(e) = converted {
                    // One bad object must not stop the cluster's revisions: it is left
                    // out (no row was added) and named in a warning.
                    ctx.missing_creation.truncate(missing_before);
                    ctx.pdb_without_status.truncate(pdbs_before);
                    left_out.push(invalid(entry, e).to_string());
                    continue;
                }
                self.converted += 1;
                let no_status = ctx.pdb_without_status.get(pdbs_before).cloned();
                if let Some(p) = &no_status {
                    pdb_without_status.push(p.clone());
                }
                let time_dependent = ctx.missing_creation.len() > missing_before;
                if let (Some(key), false) = (key, time_dependent) {
                    let index = table_len(&mut ctx, kind) - 1;
                    rows.insert(key, (kind, index, no_status));
                }
            }
            spans[kind.table()].push(entry.span);
        }
        let no_cache = Previous::empty_caches();
        let (previous_usage, previous_topology) = previous
            .as_ref()
            .map_or((&no_cache.0, &no_cache.1), |p| (&p.usage, &p.topology));
        let mut joins = usage::Joins::default();
        let mut next_usage = usage::ParseCache::default();
        let usage_warnings = usage::attach(
            &mut ctx,
            objects,
            &mut joins,
            Some(usage::Reuse {
                previous: previous_usage,
                next: &mut next_usage,
            }),
        );
        for problem in left_out {
            left_out_warnings.push(IngestWarning::new(
                WarningCode::InvalidObject,
                1,
                format!("{problem}; it is left out of the snapshot until it changes"),
            ));
        }
        left_out_warnings.extend(usage_warnings);
        let mut next_topology = usage::ParseCache::default();
        left_out_warnings.extend(topology::attach(
            &mut ctx,
            objects,
            &mut joins,
            Some(usage::Reuse {
                previous: previous_topology,
                next: &mut next_topology,
            }),
        ));
        let missing_creation = std::mem::take(&mut ctx.missing_creation);
        self.builder = ctx.builder;
        // The previous tables are spent (their reused rows were moved out).
        if let Some(prev) = previous {
            free_aside(prev.tables);
        }
        let model = self.builder.finish_keeping();
        let snapshot = assemble(
            objects,
            &modelled,
            &model,
            spans,
            &missing_creation,
            &pdb_without_status,
            left_out_warnings,
        )?;
        // Only the rows are reused: their strings are the builder's, kept there.
        let mut model = model;
        let strings = std::mem::take(&mut model.strings);
        let strings_sorted = std::mem::take(&mut model.strings_sorted);
        let owners = std::mem::take(&mut model.owners);
        // Usage is read afresh by every build.
        model.node_usage = Vec::new();
        model.pod_usage = Vec::new();
        model.node_cpu = Vec::new();
        if model.pods.len() >= FREE_ASIDE_MIN_PODS {
            let _ = std::thread::Builder::new()
                .name("snapshot-free".into())
                .spawn(move || drop((strings, strings_sorted, owners)));
        }
        self.previous = Some(Previous {
            tables: model,
            rows,
            usage: next_usage,
            topology: next_topology,
            _store: objects.store.clone(),
        });
        Ok(snapshot)
    }
}

/// Move row `index` of `kind` from `from` to the end of the tables being built; its new index.
fn move_row(from: &mut model::Snapshot, ctx: &mut Ctx, kind: ObjectKind, index: usize) -> u32 {
    let to = ctx.builder.snapshot_mut();
    fn take<T: Default>(from: &mut [T], index: usize, to: &mut Vec<T>) -> u32 {
        to.push(std::mem::take(&mut from[index]));
        (to.len() - 1) as u32
    }
    match kind {
        ObjectKind::Node => {
            take(&mut from.node_annotations, index, &mut to.node_annotations);
            take(&mut from.nodes, index, &mut to.nodes)
        }
        ObjectKind::Pod => take(&mut from.pods, index, &mut to.pods),
        ObjectKind::PodDisruptionBudget => take(&mut from.pdbs, index, &mut to.pdbs),
        ObjectKind::Namespace => take(&mut from.namespaces, index, &mut to.namespaces),
        ObjectKind::PriorityClass => {
            take(&mut from.priority_classes, index, &mut to.priority_classes)
        }
        ObjectKind::PersistentVolumeClaim => take(&mut from.pvcs, index, &mut to.pvcs),
    }
}

fn table_len(ctx: &mut Ctx, kind: ObjectKind) -> u32 {
    let t = ctx.builder.snapshot_mut();
    (match kind {
        ObjectKind::Node => t.nodes.len(),
        ObjectKind::Pod => t.pods.len(),
        ObjectKind::PodDisruptionBudget => t.pdbs.len(),
        ObjectKind::Namespace => t.namespaces.len(),
        ObjectKind::PriorityClass => t.priority_classes.len(),
        ObjectKind::PersistentVolumeClaim => t.pvcs.len(),
    }) as u32
}

/// One warning per missing node, naming a few of the pods bound to it.
fn missing_node_warnings(snapshot: &model::Snapshot) -> Vec<IngestWarning> {
    let mut missing: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for pod in &snapshot.pods {
        if pod.node == NONE && pod.node_name != 0 {
            missing
                .entry(&snapshot.strings[pod.node_name as usize])
                .or_default()
                .push(qualified(
                    &snapshot.strings[pod.namespace as usize],
                    &pod.name,
                ));
        }
    }
    missing
        .into_iter()
        .map(|(node, pods)| {
            IngestWarning::new(
                WarningCode::NodeNotFound,
                pods.len(),
                format!(
                    "{} pod(s) are bound to node {node:?}, which is not in the snapshot (they \
                     count on no node): {}",
                    pods.len(),
                    sample_list(pods.iter().map(String::as_str), pods.len())
                ),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use rebalancer_policy_sdk::build::SnapshotBuilder;
    use rebalancer_policy_sdk::model::{self, Pod};

    #[test]
    fn presized_archive_matches_model_to_bytes() {
        let mut b = SnapshotBuilder::new(9, 123);
        let ns = b.intern("default");
        for i in 0..50 {
            b.snapshot_mut().pods.push(Pod {
                name: format!("p{i}"),
                namespace: ns,
                ..Pod::default()
            });
        }
        let snapshot = b.finish();
        let expected = model::to_bytes(&snapshot).unwrap();
        for capacity in [0, 16, 1 << 20] {
            let buffer = model::ArchiveBuffer::with_capacity(capacity);
            let got = model::to_bytes_in(&snapshot, buffer).unwrap();
            assert_eq!(got.as_slice(), expected.as_slice());
        }

        // Page-aligned for mapping: the same sections, each on a boundary, the file padded.
        let aligned =
            model::to_bytes_aligned(&snapshot, model::ArchiveBuffer::new(), model::MAP_ALIGN)
                .unwrap();
        assert!(aligned.len().is_multiple_of(model::MAP_ALIGN));
        for section in model::Section::ALL {
            let a = model::header::range(&aligned, section.id()).unwrap();
            let e = model::header::range(&expected, section.id()).unwrap();
            assert!(a.start.is_multiple_of(model::MAP_ALIGN), "{section:?}");
            assert_eq!(aligned[a], expected[e], "{section:?}");
        }
    }
}
