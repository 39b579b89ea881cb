//! How objects are held: [`Stored`] is an object's serialized JSON plus the handful of parsed
//! keys that routing, selectors and evictions need (namespace, name, uid, resourceVersion,
//! labels, `spec.nodeName`, `status.phase`). No `serde_json::Value` tree is kept; writes parse
//! the bytes, change the tree and serialize it again.
//!
//! Also here: the fast path of bulk loading, which splices a new `metadata` into each list item's
//! bytes without re-serializing the rest of the item, and identifiers and timestamps the server
//! assigns.

use std::borrow::Cow;
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::resources::{self, RESOURCES, TypeId};
use crate::selector;

/// One stored object (or one version of it, in watch history).
#[derive(Debug)]
pub(crate) struct Stored {
    /// `""` for cluster-scoped objects.
    pub namespace: Box<str>,
    pub name: Box<str>,
    pub uid: Box<str>,
    pub rv: u64,
    pub labels: Box<[(Box<str>, Box<str>)]>,
    pub node_name: Option<Box<str>>,
    pub phase: Option<Box<str>>,
    /// The whole object as JSON, `metadata.resourceVersion` equal to `rv`.
    pub raw: Bytes,
}

fn labels_of(metadata: Option<&Value>) -> Box<[(Box<str>, Box<str>)]> {
    metadata
        .and_then(|m| m.get("labels"))
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.as_str().into(), v.into())))
                .collect()
        })
        .unwrap_or_default()
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer).and_then(Value::as_str)
}

impl Stored {
    /// Serializes a complete object (its metadata already has name, uid and resourceVersion).
    pub(crate) fn from_value(object: &Value, rv: u64) -> Stored {
        let metadata = object.get("metadata");
        Stored {
            namespace: str_at(object, "/metadata/namespace").unwrap_or("").into(),
            name: str_at(object, "/metadata/name").unwrap_or("").into(),
            uid: str_at(object, "/metadata/uid").unwrap_or("").into(),
            rv,
            labels: labels_of(metadata),
            node_name: str_at(object, "/spec/nodeName").map(Into::into),
            phase: str_at(object, "/status/phase").map(Into::into),
            raw: Bytes::from(serde_json::to_vec(object).unwrap_or_default()),
        }
    }

    /// The object as a tree. The bytes were written by this crate from valid JSON.
    pub(crate) fn value(&self) -> Value {
        serde_json::from_slice(&self.raw).unwrap_or(Value::Null)
    }

    /// The object's value of a field-selector key (see [`selector::field_value`]); the keys
    /// kept parsed are answered without parsing the object.
    pub(crate) fn field(&self, key: &str) -> Cow<'_, str> {
        Cow::Borrowed(match key {
            "metadata.name" => &self.name,
            "metadata.namespace" => &self.namespace,
            "spec.nodeName" => self.node_name.as_deref().unwrap_or(""),
            "status.phase" => self.phase.as_deref().unwrap_or(""),
            other => return Cow::Owned(selector::field_value(&self.value(), other)),
        })
    }

    /// The same object at another resourceVersion (a DELETED event carries the deletion's).
    pub(crate) fn at_resource_version(&self, rv: u64) -> Stored {
        let mut value = self.value();
        if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
        }
        Stored::from_value(&value, rv)
    }

    /// `{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{..}}`.
    pub(crate) fn partial_metadata(&self) -> Vec<u8> {
        #[derive(Deserialize)]
        struct Meta<'a> {
            #[serde(borrow)]
            metadata: Option<&'a RawValue>,
        }
        let meta = serde_json::from_slice::<Meta>(&self.raw)
            .ok()
            .and_then(|m| m.metadata)
            .map_or("{}", RawValue::get);
        let mut out = Vec::with_capacity(meta.len() + 80);
        out.extend_from_slice(
            br#"{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":"#,
        );
        out.extend_from_slice(meta.as_bytes());
        out.push(b'}');
        out
    }
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// 64 pseudo-random bits: a per-process random key hashed with a counter.
fn random_u64() -> u64 {
    static KEY: std::sync::OnceLock<RandomState> = std::sync::OnceLock::new();
    let mut hasher = KEY.get_or_init(RandomState::new).build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.finish()
}

/// A fresh version-4 style UUID.
pub(crate) fn new_uid() -> String {
    let (a, b) = (random_u64(), random_u64());
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0x0fff,
        0x8000 | ((b >> 48) & 0x3fff),
        b & 0xffff_ffff_ffff
    )
}

/// The 5-character suffix of `generateName`, from the real server's alphabet (no vowels).
pub(crate) fn name_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut bits = random_u64();
    (0..5)
        .map(|_| {
            let c = ALPHABET[(bits % ALPHABET.len() as u64) as usize];
            bits /= ALPHABET.len() as u64;
            char::from(c)
        })
        .collect()
}

/// Now, as the API server writes `creationTimestamp` (RFC 3339, seconds, UTC).
pub(crate) fn now_timestamp() -> String {
    format_timestamp(time::OffsetDateTime::now_utc())
}

/// Parses an RFC 3339 timestamp as the server writes them.
pub(crate) fn parse_timestamp(text: &str) -> Option<time::OffsetDateTime> {
    time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339).ok()
}

/// Formats a time as the server writes timestamps (RFC 3339, seconds, UTC).
pub(crate) fn format_timestamp(at: time::OffsetDateTime) -> String {
    let format =
        time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]Z");
    at.to_offset(time::UtcOffset::UTC)
        .format(&format)
        .unwrap_or_default()
}

/// Fills what the server assigns on creation into `metadata`: name from `generateName`, uid and
/// creationTimestamp when missing; drops a namespace from cluster-scoped objects and defaults it
/// for namespaced ones. Returns `false` when the object has neither name nor generateName.
pub(crate) fn fill_create_metadata(
    meta: &mut Map<String, Value>,
    namespaced: bool,
    namespace: &str,
) -> bool {
    let has_name = meta
        .get("name")
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty());
    if !has_name {
        let Some(prefix) = meta.get("generateName").and_then(Value::as_str) else {
            return false;
        };
        if prefix.is_empty() {
            return false;
        }
        let name = format!("{prefix}{}", name_suffix());
        meta.insert("name".into(), Value::String(name));
    }
    if namespaced {
        meta.insert("namespace".into(), Value::String(namespace.to_string()));
    } else {
        meta.remove("namespace");
    }
    if meta
        .get("uid")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        meta.insert("uid".into(), Value::String(new_uid()));
    }
    if meta
        .get("creationTimestamp")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        meta.insert("creationTimestamp".into(), Value::String(now_timestamp()));
    }
    true
}

/// The top of a list document: a kubectl `List` (`items`), or a scenario file wrapping one
/// (`{"objects": List}`).
#[derive(Deserialize)]
struct ListTop<'a> {
    #[serde(borrow, default)]
    items: Option<Vec<&'a RawValue>>,
    #[serde(borrow, default)]
    objects: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct ItemHead<'a> {
    #[serde(rename = "apiVersion", borrow, default)]
    api_version: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    metadata: Option<&'a RawValue>,
    #[serde(default)]
    spec: Option<SpecHead>,
    #[serde(default)]
    status: Option<StatusHead>,
}

#[derive(Deserialize)]
struct SpecHead {
    #[serde(rename = "nodeName", default)]
    node_name: Option<String>,
}

#[derive(Deserialize)]
struct StatusHead {
    #[serde(default)]
    phase: Option<String>,
}

/// The raw items of a list document.
pub(crate) fn list_items(list: &[u8]) -> Result<Vec<&RawValue>, String> {
    let top: ListTop = serde_json::from_slice(list).map_err(|e| format!("not a JSON list: {e}"))?;
    match (top.items, top.objects) {
        (Some(items), _) => Ok(items),
        (None, Some(objects)) => list_items(objects.get().as_bytes()),
        (None, None) => Err("the document has no \"items\"".to_string()),
    }
}

/// Turns one list item into a stored object at resourceVersion `rv`: its bytes are kept as
/// they are except `metadata`, which is parsed, completed (see [`fill_create_metadata`]) and
/// spliced back in. `Err` says why the item is skipped.
pub(crate) fn prepare_item(item: &RawValue, rv: u64) -> Result<(TypeId, Stored), String> {
    let text = item.get();
    let head: ItemHead = serde_json::from_str(text).map_err(|e| format!("not an object: {e}"))?;
    let api_version = head.api_version.as_deref().unwrap_or("");
    let kind = head.kind.as_deref().unwrap_or("");
    let type_id = resources::by_kind(api_version, kind)
        .ok_or_else(|| format!("kind {kind:?} of apiVersion {api_version:?} is not served"))?;
    let rt = &RESOURCES[type_id];
    let meta_raw = head.metadata.ok_or_else(|| "no metadata".to_string())?;
    let mut meta: Map<String, Value> =
        serde_json::from_str(meta_raw.get()).map_err(|e| format!("bad metadata: {e}"))?;
    let namespace = meta
        .get("namespace")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .unwrap_or("default")
        .to_string();
    if !fill_create_metadata(&mut meta, rt.namespaced, &namespace) {
        return Err("neither metadata.name nor metadata.generateName".to_string());
    }
    if rt.generation && !meta.contains_key("generation") {
        meta.insert("generation".into(), 1.into());
    }
    meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
    let meta_value = Value::Object(meta);
    let meta_json = serde_json::to_vec(&meta_value).map_err(|e| e.to_string())?;

    // `metadata` borrows from `text`, so its position inside the item is a pointer difference.
    let start = meta_raw.get().as_ptr() as usize - text.as_ptr() as usize;
    let end = start + meta_raw.get().len();
    let mut raw = Vec::with_capacity(text.len() - (end - start) + meta_json.len());
    raw.extend_from_slice(&text.as_bytes()[..start]);
    raw.extend_from_slice(&meta_json);
    raw.extend_from_slice(&text.as_bytes()[end..]);

    let str_of = |key: &str| {
        meta_value
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or("")
            .into()
    };
    let stored = Stored {
        namespace: if rt.namespaced {
            str_of("namespace")
        } else {
            "".into()
        },
        name: str_of("name"),
        uid: str_of("uid"),
        rv,
        labels: labels_of(Some(&meta_value)),
        node_name: head.spec.and_then(|s| s.node_name).map(Into::into),
        phase: head.status.and_then(|s| s.phase).map(Into::into),
        raw: Bytes::from(raw),
    };
    Ok((type_id, stored))
}

/// [`prepare_item`] for every item, item `i` at resourceVersion `first_rv + i`, spread over the
/// machine's cores.
pub(crate) fn prepare_all(
    items: &[&RawValue],
    first_rv: u64,
) -> Vec<Result<(TypeId, Stored), String>> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 8);
    let chunk = items.len().div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        let workers: Vec<_> = items
            .chunks(chunk)
            .enumerate()
            .map(|(c, part)| {
                let base = first_rv + (c * chunk) as u64;
                scope.spawn(move || {
                    part.iter()
                        .zip(base..)
                        .map(|(item, rv)| prepare_item(item, rv))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| {
                w.join()
                    .unwrap_or_else(|_| vec![Err("a loader thread panicked".to_string())])
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn prepared_items_keep_their_bytes_and_gain_metadata() {
        let list = json!({"kind": "List", "apiVersion": "v1", "items": [
            {"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": "p", "namespace": "ns", "labels": {"app": "a"}, "resourceVersion": "77"},
             "spec": {"nodeName": "n1", "containers": [{"name": "c"}]},
             "status": {"phase": "Running"}},
            {"apiVersion": "v1", "kind": "Node", "metadata": {"generateName": "node-", "namespace": "x"}},
            {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}},
        ]});
        let bytes = serde_json::to_vec(&json!({"objects": list})).unwrap();
        let items = list_items(&bytes).unwrap();
        assert_eq!(items.len(), 3);
        let (tid, pod) = prepare_item(items[0], 5).unwrap();
        assert_eq!(tid, crate::resources::PODS);
        let value = pod.value();
        assert_eq!(value["metadata"]["resourceVersion"], "5");
        assert_eq!(value["spec"]["containers"][0]["name"], "c");
        assert_eq!(value["status"]["phase"], "Running");
        assert_eq!(&*pod.namespace, "ns");
        assert_eq!(pod.node_name.as_deref(), Some("n1"));
        assert_eq!(pod.phase.as_deref(), Some("Running"));
        assert_eq!(&*pod.labels, &[("app".into(), "a".into())]);
        assert_eq!(value["metadata"]["uid"].as_str().map(str::len), Some(36));
        let (_, node) = prepare_item(items[1], 6).unwrap();
        assert!(
            node.name.starts_with("node-") && node.name.len() == 10,
            "{}",
            node.name
        );
        assert_eq!(&*node.namespace, "");
        assert!(node.value()["metadata"].get("namespace").is_none());
        assert!(prepare_item(items[2], 7).is_err());
        let all = prepare_all(&items, 10);
        let rvs: Vec<Option<u64>> = all
            .iter()
            .map(|r| r.as_ref().ok().map(|(_, s)| s.rv))
            .collect();
        assert_eq!(rvs, [Some(10), Some(11), None]);
    }

    #[test]
    fn uids_are_distinct_and_shaped_like_uuids() {
        let a = new_uid();
        let b = new_uid();
        assert_ne!(a, b);
        let parts: Vec<usize> = a.split('-').map(str::len).collect();
        assert_eq!(parts, [8, 4, 4, 4, 12]);
    }

    #[test]
    fn partial_metadata_wraps_the_metadata() {
        let s = Stored::from_value(
            &json!({"kind": "Pod", "metadata": {"name": "x"}, "spec": {}}),
            1,
        );
        let v: Value = serde_json::from_slice(&s.partial_metadata()).unwrap();
        assert_eq!(
            v,
            json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": {"name": "x"}})
        );
    }
}
