//! The object set: every object of a pushed document, identified and trimmed, JSON kept once.
//!
//! Owns splitting a document into objects ([`parse_list`]), trimming what nobody reads
//! (`metadata.managedFields`, the kubectl last-applied annotation), resolving duplicates (the
//! last one wins) and the persisted form ([`ObjectSet::stored_objects`],
//! [`ObjectSet::from_stored`]). It reads only `kind`, `apiVersion` and `metadata` here; the
//! modelled fields are decoded by `build_snapshot`.
//!
//! Memory: a JSON document is validated as UTF-8 in place and kept as the backing store;
//! objects point into it. Only trimmed objects, YAML objects and stored objects own their text.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

use super::convert::FxBuild;
use super::document::{self, line_col, shorten};
use super::wire::{Present, Str};
use super::{
    Format, IngestError, IngestWarning, ObjectKind, WarningCode, jsonpath, sample_list, validation,
};

/// The annotation `kubectl apply` writes; dropped from stored objects and from the snapshot.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Document bytes handed to [`parse_list`]. Owned buffers (`Vec<u8>`, `String`,
/// `bytes::Bytes` when unique) are used in place; borrowed ones are copied once.
#[derive(Debug)]
pub struct Input(Vec<u8>);

impl From<Vec<u8>> for Input {
    fn from(v: Vec<u8>) -> Self {
        Input(v)
    }
}
impl From<&Vec<u8>> for Input {
    fn from(v: &Vec<u8>) -> Self {
        Input(v.clone())
    }
}
impl From<&[u8]> for Input {
    fn from(v: &[u8]) -> Self {
        Input(v.to_vec())
    }
}
impl<const N: usize> From<&[u8; N]> for Input {
    fn from(v: &[u8; N]) -> Self {
        Input(v.to_vec())
    }
}
impl From<String> for Input {
    fn from(v: String) -> Self {
        Input(v.into_bytes())
    }
}
impl From<&str> for Input {
    fn from(v: &str) -> Self {
        Input(v.as_bytes().to_vec())
    }
}
impl From<&String> for Input {
    fn from(v: &String) -> Self {
        Input(v.as_bytes().to_vec())
    }
}
impl From<bytes::Bytes> for Input {
    fn from(v: bytes::Bytes) -> Self {
        Input(Vec::from(v))
    }
}

/// The kind of an object: modelled, or any other kind kept raw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Kind {
    Known(ObjectKind),
    Other(Box<str>),
}

impl Kind {
    pub(crate) fn as_str(&self) -> &str {
        match self {
            Kind::Known(k) => k.as_str(),
            Kind::Other(s) => s,
        }
    }
}

/// Where an object's JSON lives in a [`JsonStore`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Span {
    /// A byte range of the input document.
    Input(usize, usize),
    /// An index into the owned texts.
    Owned(usize),
    /// An index into the shared texts (held by a live cluster's watch cache too).
    Shared(usize),
}

/// The text of every object; shared (read-only) by the object set and its snapshots.
#[derive(Debug, Default)]
pub(crate) struct JsonStore {
    input: String,
    owned: Vec<String>,
    shared: Vec<PackedJson>,
}

impl JsonStore {
    /// The text behind `span` (unpacked if it is a live object's).
    pub(crate) fn get(&self, span: Span) -> Cow<'_, str> {
        match span {
            Span::Input(start, end) => Cow::Borrowed(&self.input[start..end]),
            Span::Owned(i) => Cow::Borrowed(&self.owned[i]),
            Span::Shared(i) => Cow::Owned(self.shared[i].text()),
        }
    }

    /// The length of the text behind `span`, without unpacking it.
    pub(crate) fn text_len(&self, span: Span) -> usize {
        match span {
            Span::Input(start, end) => end - start,
            Span::Owned(i) => self.owned[i].len(),
            Span::Shared(i) => self.shared[i].text_len(),
        }
    }

    /// The shared text behind `span`, if it is shared.
    pub(crate) fn shared(&self, span: Span) -> Option<&PackedJson> {
        match span {
            Span::Shared(i) => self.shared.get(i),
            _ => None,
        }
    }
}

/// One live object's JSON, lz4-compressed against a dictionary shared by its kind, and shared
/// (by reference count) between the watch cache and every snapshot built from it.
///
/// Memory: a live cluster keeps every object's JSON for as long as it exists (the next
/// revision rebuilds changed rows from it, the executor reads pods and the API serves them).
/// Objects of one kind repeat each other's keys and most values, so against an example of
/// their kind they pack about 4× (385 MB of reference-cluster pods take 94 MB); alone, an
/// object packs only 1.6×. Unpacking one takes microseconds.
#[derive(Clone)]
pub struct PackedJson(Arc<Packed>);

struct Packed {
    dictionary: Arc<[u8]>,
    text_len: usize,
    data: Box<[u8]>,
}

impl PackedJson {
    /// The text (unpacked: a copy).
    pub fn text(&self) -> String {
        let p = &*self.0;
        let mut out = vec![0u8; p.text_len];
        let written = lz4_flex::block::decompress_into_with_dict(&p.data, &mut out, &p.dictionary)
            .expect("packed by JsonPacker::pack from valid text");
        out.truncate(written);
        String::from_utf8(out).expect("packed from a str")
    }

    /// The text's length in bytes.
    pub fn text_len(&self) -> usize {
        self.0.text_len
    }

    /// Bytes held for this object (its share of the dictionary not counted).
    pub fn packed_len(&self) -> usize {
        self.0.data.len()
    }

    /// Identifies this text (equal for clones, distinct while both are alive otherwise).
    pub fn key(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }
}

impl PartialEq for PackedJson {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.text() == other.text()
    }
}

impl Eq for PackedJson {}

impl fmt::Debug for PackedJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PackedJson")
            .field("text_len", &self.0.text_len)
            .field("packed_len", &self.0.data.len())
            .finish()
    }
}

/// Packs the JSON of one kind's live objects ([`PackedJson`]). Its dictionary is the first
/// object it packs (up to [`JsonPacker::MAX_DICTIONARY`] bytes): the first pod of a cluster
/// is as good an example of its pods as any.
#[derive(Clone, Default)]
pub struct JsonPacker {
    dictionary: Option<Arc<[u8]>>,
}

impl JsonPacker {
    /// lz4 looks back at most 64 KiB.
    pub const MAX_DICTIONARY: usize = 64 * 1024;

    pub fn pack(&mut self, text: &str) -> PackedJson {
        let dictionary = self
            .dictionary
            .get_or_insert_with(|| {
                let bytes = text.as_bytes();
                Arc::from(&bytes[bytes.len().saturating_sub(Self::MAX_DICTIONARY)..])
            })
            .clone();
        let data = lz4_flex::block::compress_with_dict(text.as_bytes(), &dictionary);
        PackedJson(Arc::new(Packed {
            dictionary,
            text_len: text.len(),
            data: data.into_boxed_slice(),
        }))
    }
}

/// One object of the set.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub kind: Kind,
    pub api_version: Box<str>,
    /// `""` for cluster-scoped objects.
    pub namespace: Box<str>,
    pub name: Box<str>,
    pub uid: Box<str>,
    /// Position in the pushed document (or the stored order).
    pub index: usize,
    pub span: Span,
}

/// The parsed objects of one document, each with its trimmed JSON.
#[derive(Debug, Clone)]
pub struct ObjectSet {
    pub(crate) store: Arc<JsonStore>,
    pub(crate) entries: Vec<Entry>,
    warnings: Vec<IngestWarning>,
    /// The objects of a pushed document ([`parse_list`]): [`super::build_snapshot`] validates
    /// what it decodes as Kubernetes would. Stored objects were validated when they were
    /// pushed, and a live cluster's by its API server.
    pub(crate) pushed: bool,
}

/// One object in the form the store persists (borrowed from the set).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredObject<'a> {
    pub kind: &'a str,
    pub api_version: &'a str,
    /// `None` for cluster-scoped objects.
    pub namespace: Option<&'a str>,
    pub name: &'a str,
    pub uid: Option<&'a str>,
    /// The trimmed object as JSON (unpacked if it is a live object's).
    pub json: Cow<'a, str>,
}

/// One object as read back from the store (owned; its JSON is moved into the set, not copied).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredObjectBuf {
    pub kind: String,
    pub api_version: String,
    pub namespace: Option<String>,
    pub name: String,
    pub uid: Option<String>,
    pub json: String,
}

impl StoredObject<'_> {
    pub fn to_owned_object(&self) -> StoredObjectBuf {
        StoredObjectBuf {
            kind: self.kind.to_owned(),
            api_version: self.api_version.to_owned(),
            namespace: self.namespace.map(str::to_owned),
            name: self.name.to_owned(),
            uid: self.uid.map(str::to_owned),
            json: self.json.clone().into_owned(),
        }
    }
}

/// One object of a live cluster (a watch cache): its JSON is packed once and shared, not
/// copied, with every snapshot built from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedObject {
    pub kind: &'static str,
    pub api_version: Arc<str>,
    pub namespace: Option<Box<str>>,
    pub name: Box<str>,
    pub uid: Option<Box<str>>,
    pub json: PackedJson,
}

impl SharedObject {
    /// One object as the Kubernetes API serves it, identified by its head, trimmed (managed
    /// fields, the last-applied annotation) and packed by `packer` (its kind's).
    pub fn from_api_json(
        kind: &'static str,
        api_version: Arc<str>,
        json: &str,
        packer: &mut JsonPacker,
    ) -> Result<SharedObject, IngestError> {
        let (head, trimmed) = read_head(0, json)?;
        let meta = head.metadata.as_ref();
        let name = meta.and_then(|m| m.name.as_deref()).unwrap_or("");
        let namespace = meta
            .and_then(|m| m.namespace.as_deref())
            .filter(|n| !n.is_empty());
        if name.is_empty() {
            return Err(IngestError::InvalidObject {
                index: 0,
                kind: kind.into(),
                namespace: namespace.unwrap_or("").into(),
                name: "".into(),
                field: "metadata.name".into(),
                message: "required field is missing".into(),
            });
        }
        let object = SharedObject {
            kind,
            api_version,
            namespace: namespace.map(Into::into),
            name: name.into(),
            uid: meta
                .and_then(|m| m.uid.as_deref())
                .filter(|u| !u.is_empty())
                .map(Into::into),
            json: packer.pack(trimmed.as_deref().unwrap_or(json)),
        };
        Ok(object)
    }
}

impl StoredObjectBuf {
    /// One object as the Kubernetes API serves it (a list item or a watch event's object),
    /// trimmed like a pushed one (no `metadata.managedFields`, no last-applied annotation).
    /// `kind` and `api_version` come from the caller: list items carry neither.
    pub fn from_api_json(
        kind: &str,
        api_version: &str,
        json: &str,
    ) -> Result<StoredObjectBuf, IngestError> {
        let (head, trimmed) = read_head(0, json)?;
        let meta = head.metadata.as_ref();
        let name = meta.and_then(|m| m.name.as_deref()).unwrap_or("");
        if name.is_empty() {
            return Err(IngestError::InvalidObject {
                index: 0,
                kind: kind.into(),
                namespace: meta
                    .and_then(|m| m.namespace.as_deref())
                    .unwrap_or("")
                    .into(),
                name: "".into(),
                field: "metadata.name".into(),
                message: "required field is missing".into(),
            });
        }
        Ok(StoredObjectBuf {
            kind: kind.to_owned(),
            api_version: api_version.to_owned(),
            namespace: meta
                .and_then(|m| m.namespace.as_deref())
                .filter(|n| !n.is_empty())
                .map(str::to_owned),
            name: name.to_owned(),
            uid: meta
                .and_then(|m| m.uid.as_deref())
                .filter(|u| !u.is_empty())
                .map(str::to_owned),
            json: trimmed.unwrap_or_else(|| json.to_owned()),
        })
    }
}

impl ObjectSet {
    /// Number of objects (after duplicates were resolved).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// What was odd about the document (unknown kinds, duplicates, defaulted namespaces).
    pub fn warnings(&self) -> &[IngestWarning] {
        &self.warnings
    }

    /// Objects of one modelled kind (after duplicates were resolved).
    pub fn count_of(&self, kind: ObjectKind) -> usize {
        self.entries
            .iter()
            .filter(|e| e.kind == Kind::Known(kind))
            .count()
    }

    /// Objects per kind (every kind, modelled or not).
    pub fn counts(&self) -> BTreeMap<String, u64> {
        let mut counts = BTreeMap::new();
        for e in &self.entries {
            *counts.entry(e.kind.as_str().to_owned()).or_insert(0) += 1;
        }
        counts
    }

    /// Every object, in document order, in the form the store persists.
    pub fn stored_objects(&self) -> impl ExactSizeIterator<Item = StoredObject<'_>> + '_ {
        self.entries.iter().map(|e| StoredObject {
            kind: e.kind.as_str(),
            api_version: &e.api_version,
            namespace: (!e.namespace.is_empty()).then_some(&*e.namespace),
            name: &e.name,
            uid: (!e.uid.is_empty()).then_some(&*e.uid),
            json: self.store.get(e.span),
        })
    }

    /// The object `kind` `namespace/name` (namespace `""` for cluster-scoped kinds), as JSON.
    pub fn find(&self, kind: &str, namespace: &str, name: &str) -> Option<StoredObject<'_>> {
        self.stored_objects()
            .find(|o| o.kind == kind && o.namespace.unwrap_or("") == namespace && o.name == name)
    }

    /// A set over a live cluster's objects: their JSON is shared, not copied (in the order
    /// given).
    pub fn from_shared(
        objects: impl IntoIterator<Item = SharedObject>,
    ) -> Result<ObjectSet, IngestError> {
        let mut b = SetBuilder::default();
        for (index, o) in objects.into_iter().enumerate() {
            let slot = b.shared.len();
            b.shared.push(o.json);
            b.add(
                index,
                Identity {
                    kind: o.kind,
                    api_version: &o.api_version,
                    namespace: o.namespace.as_deref(),
                    name: &o.name,
                    uid: o.uid.as_deref(),
                },
                Span::Shared(slot),
            )?;
        }
        Ok(b.finish(String::new()))
    }

    /// Rebuild a set from what [`ObjectSet::stored_objects`] persisted (at start-up). The JSON
    /// is not re-validated here; [`super::build_snapshot`] decodes it and reports problems.
    pub fn from_stored<I>(objects: I) -> Result<ObjectSet, IngestError>
    where
        I: IntoIterator,
        I::Item: Into<StoredObjectBuf>,
    {
        let mut b = SetBuilder::default();
        for (index, object) in objects.into_iter().enumerate() {
            let o: StoredObjectBuf = object.into();
            let slot = b.owned.len();
            b.owned.push(o.json);
            b.add(
                index,
                Identity {
                    kind: &o.kind,
                    api_version: &o.api_version,
                    namespace: o.namespace.as_deref(),
                    name: &o.name,
                    uid: o.uid.as_deref(),
                },
                Span::Owned(slot),
            )?;
        }
        Ok(b.finish(String::new()))
    }
}

/// Split a pushed Kubernetes document into objects. The document is exactly one List: an
/// object whose `kind` is `List` or any `XList` (or that has no `kind`), holding its objects
/// in an `items` array (`[]` for none). Anything else is [`IngestError::NotAList`]: an empty
/// body, `null`, a single object, a List without `items` or with `items: null`, a second YAML
/// document. Values nested deeper than [`super::document::MAX_DEPTH`] and repeated keys are
/// [`IngestError::Structure`]; names, namespaces and uids are validated as Kubernetes does
/// ([`IngestError::InvalidObject`]). Blocking and CPU-bound.
pub fn parse_list(input: impl Into<Input>, format: Format) -> Result<ObjectSet, IngestError> {
    let Input(bytes) = input.into();
    match format {
        Format::Json => parse_json(bytes),
        Format::Yaml => parse_yaml(&bytes),
    }
}

fn parse_json(bytes: Vec<u8>) -> Result<ObjectSet, IngestError> {
    let text = String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let (line, column) = line_col(e.as_bytes(), at);
        IngestError::Malformed {
            line,
            column,
            message: "invalid UTF-8 (JSON must be UTF-8 encoded)".into(),
        }
    })?;
    let mut b = SetBuilder::pushed();
    {
        // A UTF-8 byte-order mark (Windows editors write one) is not JSON: skip it.
        let doc = text.strip_prefix('\u{feff}').unwrap_or(&text);
        match doc.bytes().position(|b| !b.is_ascii_whitespace()) {
            None => return Err(not_a_list(1, 1, EMPTY_BODY.into())),
            Some(at) if doc.as_bytes()[at] != b'{' => {
                document::check_json(doc.as_bytes()).map_err(IngestError::Structure)?;
                // Syntax errors first; then say what was sent instead of a List.
                let value: serde_json::Value =
                    serde_json::from_str(doc).map_err(|e| malformed_json(&e))?;
                let (line, column) = line_col(doc.as_bytes(), at);
                return Err(not_a_list(
                    line,
                    column,
                    format!("expected a List object, found {}", json_type(&value)),
                ));
            }
            Some(_) => {}
        }
        let top = split_top(doc)?;
        let kind = top.kind.as_deref().map(str::to_owned);
        let items = list_items(top.has_kind, kind.as_deref(), top.items)?;
        add_items(&mut b, &text, &items)?;
    }
    Ok(b.finish(text))
}

/// Above this size the structural check runs beside the top-level split.
const PARALLEL_CHECK_MIN_BYTES: usize = 1 << 20;

/// The top level of a JSON document, its items left raw, once [`document::check_json`] has
/// passed: nothing after this meets a value nested deeper than the limit or a repeated key.
/// The split only skips over values (serde_json does that without recursion), so on large
/// documents it runs on this thread while the check runs on another: the check then costs
/// no wall time on a machine with a core to spare (it reads ~1 GB/s).
fn split_top(doc: &str) -> Result<Top<'_>, IngestError> {
    let (checked, top) = if doc.len() < PARALLEL_CHECK_MIN_BYTES {
        let checked = document::check_json(doc.as_bytes());
        (checked, serde_json::from_str::<Top<'_>>(doc))
    } else {
        std::thread::scope(|scope| {
            let check = scope.spawn(|| document::check_json(doc.as_bytes()));
            let top = serde_json::from_str::<Top<'_>>(doc);
            let checked = check
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            (checked, top)
        })
    };
    checked.map_err(IngestError::Structure)?;
    top.map_err(|e| malformed_json(&e))
}

const EMPTY_BODY: &str = "the body is empty; push one List of the cluster's objects (what \
                          `kubectl get nodes,pods,... -A -o json` prints)";

fn not_a_list(line: usize, column: usize, message: String) -> IngestError {
    IngestError::NotAList {
        line,
        column,
        message,
    }
}

/// The items of the top-level object, or why it is not a List. `kind` is the top level's
/// `kind` when it is a string; `has_kind` whether it has one at all.
fn list_items<T>(
    has_kind: bool,
    kind: Option<&str>,
    items: ItemsField<T>,
) -> Result<Vec<T>, IngestError> {
    let list_kind = kind.filter(|k| k.ends_with("List"));
    if has_kind && list_kind.is_none() {
        let what = match kind {
            Some(k) => format!("a single {} object", shorten(k)),
            None => "an object whose kind is not a string".to_owned(),
        };
        return Err(not_a_list(
            1,
            1,
            format!(
                "the document is {what}, not a List: push every object of the cluster in one \
                 List (`kind: List`, the objects in `items`)"
            ),
        ));
    }
    let list = list_kind.unwrap_or("List");
    let problem = match items {
        ItemsField::Array(items) => return Ok(items),
        ItemsField::Missing if !has_kind => {
            "the document has neither `kind` nor `items`: expected a List (`kind: List`, the \
             objects in `items`)"
                .to_owned()
        }
        ItemsField::Missing => format!(
            "the {list} has no `items`; a List holds the cluster's objects in an `items` array \
             (a cluster without objects is `items: []`)"
        ),
        ItemsField::Null => format!(
            "the {list}'s `items` is null; a List holds the cluster's objects in an `items` \
             array (a cluster without objects is `items: []`)"
        ),
        ItemsField::Other(found) => format!(
            "the {list}'s `items` is {found}; a List holds the cluster's objects in an `items` \
             array"
        ),
    };
    Err(not_a_list(1, 1, problem))
}

/// Below this many items, heads are read on the calling thread only.
const PARALLEL_MIN_ITEMS: usize = 4096;

/// Add the items of a JSON list. Large lists read the second half's heads on a scoped thread
/// while the calling thread handles the first half; objects are added in document order, so
/// duplicates and the first error are resolved exactly as sequentially.
fn add_items(b: &mut SetBuilder, text: &str, items: &[&RawValue]) -> Result<(), IngestError> {
    let base = text.as_ptr() as usize;
    let span_of = |json: &str| {
        let start = json.as_ptr() as usize - base;
        Some(Span::Input(start, start + json.len()))
    };
    if items.len() < PARALLEL_MIN_ITEMS {
        for (index, raw) in items.iter().enumerate() {
            b.add_json(index, raw.get(), span_of(raw.get()))?;
        }
        return Ok(());
    }
    let mid = items.len() / 2;
    let (first, second) = items.split_at(mid);
    std::thread::scope(|scope| {
        let heads = scope.spawn(|| {
            let mut out = Vec::with_capacity(second.len());
            for (k, raw) in second.iter().enumerate() {
                let head = read_head(mid + k, raw.get());
                let failed = head.is_err();
                out.push(head);
                if failed {
                    break;
                }
            }
            out
        });
        for (index, raw) in first.iter().enumerate() {
            b.add_json(index, raw.get(), span_of(raw.get()))?;
        }
        let heads = heads
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        for (k, head) in heads.into_iter().enumerate() {
            let (head, trimmed) = head?;
            let json = second[k].get();
            b.add_head(mid + k, json, &head, trimmed, span_of(json))?;
        }
        Ok(())
    })
}

fn parse_yaml(bytes: &[u8]) -> Result<ObjectSet, IngestError> {
    // First, so that libyaml never scans a deep flow collection in full (see `check_yaml`).
    let outline = document::check_yaml(bytes).map_err(IngestError::Structure)?;
    if let Some((line, column)) = outline.second_document {
        return Err(IngestError::Malformed {
            line,
            column,
            message: "a second YAML document starts here; push one document (one List) per \
                      request"
                .into(),
        });
    }
    let value = match serde_yaml::Deserializer::from_slice(bytes).next() {
        None => serde_json::Value::Null,
        Some(document) => document::yaml_value(document).map_err(|e| match e {
            document::YamlFailure::Structure(e) => IngestError::Structure(e),
            document::YamlFailure::Syntax(e) => malformed_yaml(&e),
        })?,
    };
    let items = match value {
        // Nothing but blanks and comments (serde_yaml reads that as one null document).
        serde_json::Value::Null if outline.documents == 0 => {
            return Err(not_a_list(1, 1, EMPTY_BODY.into()));
        }
        serde_json::Value::Null => {
            return Err(not_a_list(
                1,
                1,
                "the document is null (an empty document, `~` or `null`); push one List of the \
                 cluster's objects"
                    .into(),
            ));
        }
        serde_json::Value::Object(mut map) => {
            let kind = match map.get("kind") {
                Some(serde_json::Value::String(k)) => Some(k.clone()),
                _ => None,
            };
            let items = match map.remove("items") {
                None => ItemsField::Missing,
                Some(serde_json::Value::Null) => ItemsField::Null,
                Some(serde_json::Value::Array(items)) => ItemsField::Array(items),
                Some(other) => ItemsField::Other(json_type(&other)),
            };
            list_items(map.contains_key("kind"), kind.as_deref(), items)?
        }
        other => {
            return Err(not_a_list(
                1,
                1,
                format!("expected a List object, found {}", json_type(&other)),
            ));
        }
    };
    let mut b = SetBuilder::pushed();
    for (index, item) in items.into_iter().enumerate() {
        let json = serde_json::to_string(&item)
            .map_err(|e| IngestError::Archive(format!("re-encoding a YAML item: {e}")))?;
        b.add_json(index, &json, None)?;
    }
    Ok(b.finish(String::new()))
}

pub(crate) fn json_type(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

fn malformed_json(e: &serde_json::Error) -> IngestError {
    IngestError::Malformed {
        line: e.line().max(1),
        column: e.column().max(1),
        message: format!("invalid JSON: {}", jsonpath::bare_message(e)),
    }
}

fn malformed_yaml(e: &serde_yaml::Error) -> IngestError {
    let (line, column) = e
        .location()
        .map_or((1, 1), |l| (l.line().max(1), l.column().max(1)));
    let text = e.to_string();
    // serde_yaml appends " at line L column C"; the position has fields of its own.
    let message = match text.rfind(" at line ") {
        Some(i) => text[..i].to_owned(),
        None => text,
    };
    IngestError::Malformed {
        line,
        column,
        message: format!("invalid YAML: {message}"),
    }
}

// -------------------------------------------------------------------------- top-level document

/// The top level of a JSON document: `kind` and, for lists, the raw items.
struct Top<'a> {
    kind: Option<Str<'a>>,
    has_kind: bool,
    /// `items`: the raw elements when it is an array.
    items: ItemsField<&'a RawValue>,
}

impl<'de: 'a, 'a> Deserialize<'de> for Top<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Top<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a Kubernetes object or List (a JSON object)")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Top<'a>, A::Error> {
                let mut top = Top {
                    kind: None,
                    has_kind: false,
                    items: ItemsField::Missing,
                };
                while let Some(key) = map.next_key::<Str<'de>>()? {
                    match key.as_str() {
                        "kind" => {
                            top.has_kind = true;
                            top.kind = map.next_value::<Option<KindField<'a>>>()?.and_then(|k| k.0);
                        }
                        "items" => {
                            top.items = map.next_value::<RawItems<'a>>()?.0;
                        }
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(top)
            }
        }
        d.deserialize_map(V(PhantomData))
    }
}

/// `kind` at the top level: a string, or anything else (then this is not a list).
struct KindField<'a>(Option<Str<'a>>);

impl<'de: 'a, 'a> Deserialize<'de> for KindField<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = KindField<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any value")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(KindField(Some(Str(Cow::Borrowed(v)))))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(KindField(Some(Str(Cow::Owned(v.to_owned())))))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
                Ok(KindField(None))
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
                Ok(KindField(None))
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
                Ok(KindField(None))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
                Ok(KindField(None))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(KindField(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(KindField(None))
            }
        }
        d.deserialize_any(V(PhantomData))
    }
}

/// `items` at the top level of a document.
pub(crate) enum ItemsField<T> {
    Missing,
    Null,
    Array(Vec<T>),
    /// Another type (named, for the message).
    Other(&'static str),
}

/// `items` of a JSON document, its elements left raw.
struct RawItems<'a>(ItemsField<&'a RawValue>);

impl<'de: 'a, 'a> Deserialize<'de> for RawItems<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = RawItems<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any value")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
                while let Some(raw) = seq.next_element::<&'de RawValue>()? {
                    items.push(raw);
                }
                Ok(RawItems(ItemsField::Array(items)))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(RawItems(ItemsField::Other("an object")))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(RawItems(ItemsField::Null))
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
                Ok(RawItems(ItemsField::Other("a string")))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
                Ok(RawItems(ItemsField::Other("a boolean")))
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
                Ok(RawItems(ItemsField::Other("a number")))
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
                Ok(RawItems(ItemsField::Other("a number")))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
                Ok(RawItems(ItemsField::Other("a number")))
            }
        }
        d.deserialize_any(V(PhantomData))
    }
}

// ---------------------------------------------------------------------------------- one object

/// What the set reads of each object.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Head<'a> {
    #[serde(borrow)]
    kind: Option<Str<'a>>,
    #[serde(borrow)]
    api_version: Option<Str<'a>>,
    #[serde(borrow)]
    metadata: Option<MetaHead<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct MetaHead<'a> {
    #[serde(borrow)]
    name: Option<Str<'a>>,
    #[serde(borrow)]
    namespace: Option<Str<'a>>,
    #[serde(borrow)]
    uid: Option<Str<'a>>,
    managed_fields: Present,
    annotations: Option<AnnotationKeys>,
}

/// Whether the annotations hold the last-applied configuration (values are skipped).
struct AnnotationKeys {
    last_applied: bool,
}

impl<'de> Deserialize<'de> for AnnotationKeys {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = AnnotationKeys;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of strings")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<AnnotationKeys, A::Error> {
                let mut last_applied = false;
                while let Some(key) = map.next_key::<Str<'de>>()? {
                    last_applied |= key.as_str() == LAST_APPLIED;
                    map.next_value::<IgnoredAny>()?;
                }
                Ok(AnnotationKeys { last_applied })
            }
        }
        d.deserialize_map(V)
    }
}

/// A JSON object as ordered `(key, raw value)` pairs, for trimming without re-encoding.
struct RawMap<'a>(Vec<(Str<'a>, &'a RawValue)>);

impl<'de: 'a, 'a> Deserialize<'de> for RawMap<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = RawMap<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawMap<'a>, A::Error> {
                let mut out = Vec::new();
                while let Some(pair) = map.next_entry::<Str<'a>, &'a RawValue>()? {
                    out.push(pair);
                }
                Ok(RawMap(out))
            }
        }
        d.deserialize_map(V(PhantomData))
    }
}

fn push_pair(out: &mut String, first: &mut bool, key: &str, raw: &str) {
    if !*first {
        out.push(',');
    }
    *first = false;
    // A key re-encoded by serde_json is always valid JSON.
    out.push_str(&serde_json::to_string(key).unwrap_or_else(|_| format!("{key:?}")));
    out.push(':');
    out.push_str(raw);
}

/// The object without `metadata.managedFields` and the last-applied annotation (an
/// `annotations` object left empty is dropped). Everything else is kept byte for byte.
pub(crate) fn trim(json: &str) -> Result<String, serde_json::Error> {
    let top: RawMap<'_> = serde_json::from_str(json)?;
    let mut out = String::with_capacity(json.len());
    out.push('{');
    let mut first = true;
    for (key, raw) in &top.0 {
        if key.as_str() != "metadata" || raw.get() == "null" {
            push_pair(&mut out, &mut first, key, raw.get());
            continue;
        }
        let meta: RawMap<'_> = serde_json::from_str(raw.get())?;
        let mut m = String::with_capacity(raw.get().len());
        m.push('{');
        let mut m_first = true;
        for (mkey, mraw) in &meta.0 {
            match mkey.as_str() {
                "managedFields" => {}
                "annotations" if mraw.get() != "null" => {
                    let annotations: RawMap<'_> = serde_json::from_str(mraw.get())?;
                    let mut a = String::with_capacity(mraw.get().len());
                    a.push('{');
                    let mut a_first = true;
                    for (akey, araw) in &annotations.0 {
                        if akey.as_str() != LAST_APPLIED {
                            push_pair(&mut a, &mut a_first, akey, araw.get());
                        }
                    }
                    a.push('}');
                    if !a_first {
                        push_pair(&mut m, &mut m_first, mkey, &a);
                    }
                }
                _ => push_pair(&mut m, &mut m_first, mkey, mraw.get()),
            }
        }
        m.push('}');
        push_pair(&mut out, &mut first, key, &m);
    }
    out.push('}');
    Ok(out)
}

/// Read what the set needs of one object (kind, apiVersion, metadata) and, when it carries
/// managed fields or the last-applied annotation, its trimmed JSON. Pure: runs on any thread.
fn read_head(index: usize, json: &str) -> Result<(Head<'_>, Option<String>), IngestError> {
    let head: Head<'_> = serde_json::from_str(json).map_err(|e| {
        let (field, message) = if json.trim_start().starts_with('{') {
            jsonpath::locate(json, &e)
        } else {
            (
                String::new(),
                format!(
                    "expected a Kubernetes object (a JSON object), found {}",
                    json.chars().take(40).collect::<String>()
                ),
            )
        };
        IngestError::InvalidObject {
            index,
            kind: "".into(),
            namespace: "".into(),
            name: "".into(),
            field: field.into(),
            message: message.into(),
        }
    })?;
    let meta = head.metadata.as_ref();
    let needs_trim = meta.is_some_and(|m| {
        m.managed_fields.is_some() || m.annotations.as_ref().is_some_and(|a| a.last_applied)
    });
    let trimmed = if needs_trim {
        Some(trim(json).map_err(|e| {
            IngestError::InvalidObject {
                index,
                kind: head.kind.as_deref().unwrap_or("").into(),
                namespace: meta
                    .and_then(|m| m.namespace.as_deref())
                    .unwrap_or("")
                    .into(),
                name: meta.and_then(|m| m.name.as_deref()).unwrap_or("").into(),
                field: "".into(),
                message: jsonpath::bare_message(&e).into(),
            }
        })?)
    } else {
        None
    };
    Ok((head, trimmed))
}

/// Who an object is, as read from its head or from the store.
struct Identity<'a> {
    kind: &'a str,
    api_version: &'a str,
    namespace: Option<&'a str>,
    name: &'a str,
    uid: Option<&'a str>,
}

/// Unknown kinds seen, per (kind, apiVersion): count and a few names.
#[derive(Default)]
struct Seen {
    count: usize,
    sample: Vec<String>,
}

impl Seen {
    fn add(&mut self, name: impl FnOnce() -> String) {
        self.count += 1;
        if self.sample.len() < 5 {
            self.sample.push(name());
        }
    }
}

#[derive(Default)]
struct SetBuilder {
    entries: Vec<Option<Entry>>,
    owned: Vec<String>,
    shared: Vec<PackedJson>,
    by_key: HashMap<String, usize, FxBuild>,
    unknown: BTreeMap<(String, String), Seen>,
    no_namespace: Seen,
    warnings: Vec<IngestWarning>,
    /// Objects of a pushed document: identities are validated ([`SetBuilder::validate`]).
    pushed: bool,
    /// Pushed objects of a modelled kind by uid: the slot of the object holding it.
    uids: HashMap<(ObjectKind, Box<str>), usize, FxBuild>,
}

impl SetBuilder {
    fn pushed() -> Self {
        SetBuilder {
            pushed: true,
            ..SetBuilder::default()
        }
    }

    /// Kubernetes' rules for who an object of a pushed document is: `kind` and `apiVersion`
    /// well-formed, the name a DNS-1123 subdomain (a label for namespaces; a path segment for
    /// kinds this server does not model, such as RBAC's `system:…` names), the namespace a
    /// DNS-1123 label.
    fn validate(
        index: usize,
        id: &Identity<'_>,
        known: Option<ObjectKind>,
        namespace: &str,
    ) -> Result<(), IngestError> {
        let invalid = |field: &str, message: String| IngestError::InvalidObject {
            index,
            kind: shorten(id.kind).into(),
            namespace: shorten(namespace).into(),
            name: shorten(id.name).into(),
            field: field.into(),
            message: message.into(),
        };
        validation::kind(id.kind).map_err(|m| invalid("kind", m))?;
        validation::api_version(id.api_version).map_err(|m| invalid("apiVersion", m))?;
        let name = match known {
            Some(ObjectKind::Namespace) => validation::dns1123_label(id.name),
            Some(_) => validation::dns1123_subdomain(id.name),
            None => validation::path_segment_name(id.name),
        };
        name.map_err(|m| invalid("metadata.name", format!("invalid name: {m}")))?;
        if !namespace.is_empty() {
            validation::dns1123_label(namespace)
                .map_err(|m| invalid("metadata.namespace", format!("invalid namespace: {m}")))?;
        }
        Ok(())
    }

    /// Read the head of one object's JSON and add it. `span` is where the JSON already lives
    /// (in the input); `None` means the builder must own a copy.
    fn add_json(
        &mut self,
        index: usize,
        json: &str,
        span: Option<Span>,
    ) -> Result<(), IngestError> {
        let (head, trimmed) = read_head(index, json)?;
        self.add_head(index, json, &head, trimmed, span)
    }

    /// Add an object whose head was read by [`read_head`].
    fn add_head(
        &mut self,
        index: usize,
        json: &str,
        head: &Head<'_>,
        trimmed: Option<String>,
        span: Option<Span>,
    ) -> Result<(), IngestError> {
        let meta = head.metadata.as_ref();
        let identity = Identity {
            kind: head.kind.as_deref().unwrap_or(""),
            api_version: head.api_version.as_deref().unwrap_or(""),
            namespace: meta.and_then(|m| m.namespace.as_deref()),
            name: meta.and_then(|m| m.name.as_deref()).unwrap_or(""),
            uid: meta.and_then(|m| m.uid.as_deref()),
        };
        let span = match (trimmed, span) {
            (Some(trimmed), _) => {
                self.owned.push(trimmed);
                Span::Owned(self.owned.len() - 1)
            }
            (None, Some(span)) => span,
            (None, None) => {
                self.owned.push(json.to_owned());
                Span::Owned(self.owned.len() - 1)
            }
        };
        self.add(index, identity, span)
    }

    fn add(&mut self, index: usize, id: Identity<'_>, span: Span) -> Result<(), IngestError> {
        let missing = |field: &str| IngestError::InvalidObject {
            index,
            kind: shorten(id.kind).into(),
            namespace: shorten(id.namespace.unwrap_or("")).into(),
            name: "".into(),
            field: field.into(),
            message: "required field is missing".into(),
        };
        if id.kind.is_empty() {
            return Err(missing("kind"));
        }
        if id.name.is_empty() {
            return Err(missing("metadata.name"));
        }
        let known =
            ObjectKind::from_kind(id.kind).filter(|k| k.accepts_api_version(id.api_version));
        let namespace = match known {
            Some(k) if !k.is_namespaced() => "",
            Some(_) => match id.namespace {
                Some(ns) if !ns.is_empty() => ns,
                _ => {
                    self.no_namespace.add(|| format!("{} {}", id.kind, id.name));
                    "default"
                }
            },
            None => id.namespace.unwrap_or(""),
        };
        if self.pushed {
            Self::validate(index, &id, known, namespace)?;
        }
        let kind = match known {
            Some(k) => Kind::Known(k),
            // Read by the usage pass, not kept as rows.
            None if super::usage::is_usage_kind(id.kind, id.api_version) => {
                Kind::Other(id.kind.into())
            }
            None => {
                self.unknown
                    .entry((id.kind.to_owned(), id.api_version.to_owned()))
                    .or_default()
                    .add(|| qualified(namespace, id.name));
                Kind::Other(id.kind.into())
            }
        };
        let key = format!("{}\0{}\0{}", id.kind, namespace, id.name);
        let slot = self.entries.len();
        if let Some(previous) = self.by_key.insert(key, slot)
            && let Some(old) = self.entries[previous].take()
        {
            self.warnings.push(IngestWarning::new(
                WarningCode::DuplicateObject,
                1,
                format!(
                    "{} {} appears more than once (items {} and {}); the last one is kept",
                    id.kind,
                    qualified(namespace, id.name),
                    old.index,
                    index
                ),
            ));
        }
        if let (true, Kind::Known(k), Some(uid)) =
            (self.pushed, &kind, id.uid.filter(|u| !u.is_empty()))
        {
            // Kubernetes gives every object its own uid; pods are told apart by theirs (pod
            // migrations follow a pod by uid). A repeated object replaced above frees its uid.
            if let Some(&other) = self.uids.get(&(*k, uid.into()))
                && let Some(holder) = &self.entries[other]
            {
                return Err(IngestError::InvalidObject {
                    index,
                    kind: id.kind.into(),
                    namespace: namespace.into(),
                    name: id.name.into(),
                    field: "metadata.uid".into(),
                    message: format!(
                        "uid {:?} is already the uid of {} {} (item {}); two objects cannot \
                         share a uid",
                        shorten(uid),
                        id.kind,
                        qualified(&holder.namespace, &holder.name),
                        holder.index
                    )
                    .into(),
                });
            }
            self.uids.insert((*k, uid.into()), slot);
        }
        self.entries.push(Some(Entry {
            kind,
            api_version: id.api_version.into(),
            namespace: namespace.into(),
            name: id.name.into(),
            uid: id.uid.unwrap_or("").into(),
            index,
            span,
        }));
        Ok(())
    }

    fn finish(mut self, input: String) -> ObjectSet {
        for ((kind, api_version), seen) in &self.unknown {
            let names = sample_list(seen.sample.iter().map(String::as_str), seen.count);
            let what = if api_version.is_empty() {
                kind.clone()
            } else {
                format!("{kind} ({api_version})")
            };
            let message = match ObjectKind::from_kind(kind) {
                Some(known) => format!(
                    "{} object(s) of kind {what} are kept as raw JSON but not modelled: only {} \
                     is read{}: {names}",
                    seen.count,
                    match known {
                        ObjectKind::PodDisruptionBudget => "policy/v1",
                        ObjectKind::PriorityClass => "scheduling.k8s.io/*",
                        _ => "v1",
                    },
                    if known == ObjectKind::PodDisruptionBudget {
                        " (policy/v1beta1 was removed in Kubernetes 1.25), so these budgets \
                         protect no pod"
                    } else {
                        ""
                    }
                ),
                None => format!(
                    "{} object(s) of kind {what} are kept as raw JSON but not modelled by the \
                     snapshot: {names}",
                    seen.count
                ),
            };
            self.warnings.push(IngestWarning::new(
                WarningCode::UnknownKind,
                seen.count,
                message,
            ));
        }
        if self.no_namespace.count > 0 {
            self.warnings.push(IngestWarning::new(
                WarningCode::MissingNamespace,
                self.no_namespace.count,
                format!(
                    "{} namespaced object(s) have no metadata.namespace and were placed in \
                     \"default\": {}",
                    self.no_namespace.count,
                    sample_list(
                        self.no_namespace.sample.iter().map(String::as_str),
                        self.no_namespace.count
                    )
                ),
            ));
        }
        ObjectSet {
            store: Arc::new(JsonStore {
                input,
                owned: self.owned,
                shared: self.shared,
            }),
            entries: self.entries.into_iter().flatten().collect(),
            warnings: self.warnings,
            pushed: self.pushed,
        }
    }
}

/// `namespace/name`, or `name` for cluster-scoped objects.
pub(crate) fn qualified(namespace: &str, name: &str) -> String {
    if namespace.is_empty() {
        name.to_owned()
    } else {
        format!("{namespace}/{name}")
    }
}
