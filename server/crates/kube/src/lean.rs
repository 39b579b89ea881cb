//! Lean objects: what a watcher keeps of each Kubernetes object.
//!
//! Owns [`LeanObject`], the type kube-rs's watcher decodes list items and watch events into
//! instead of full `k8s-openapi` structs: the object's JSON, re-encoded while it is decoded,
//! without `metadata.managedFields` and the kubectl last-applied annotation, plus the four
//! metadata fields the watcher itself reads. 150,000 pods then cost their trimmed JSON and
//! nothing else, and the snapshot builder reads that JSON exactly as it reads a pushed one.
//!
//! The re-encoding is a serde visitor, not `RawValue`: kube-rs decodes lists through a
//! flattened struct, so items arrive from serde's buffered content, not from the JSON text.
//! Nesting deeper than [`MAX_DEPTH`] is refused (a hostile object cannot overflow the stack).

use std::borrow::Cow;
use std::fmt::{self, Write as _};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::{ApiResource, DynamicResourceScope, Resource};
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use rebalancer_cluster::LAST_APPLIED;

/// The deepest nesting of JSON values kept (Kubernetes objects nest a few dozen levels).
pub const MAX_DEPTH: usize = 100;

/// One object as a watcher keeps it: identity and trimmed JSON. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct LeanObject {
    /// Only `name`, `namespace`, `uid` and `resourceVersion` are set.
    pub metadata: ObjectMeta,
    /// The object as JSON, without managed fields and the last-applied annotation.
    pub json: String,
}

impl Resource for LeanObject {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        dt.kind.as_str().into()
    }
    fn group(dt: &ApiResource) -> Cow<'_, str> {
        dt.group.as_str().into()
    }
    fn version(dt: &ApiResource) -> Cow<'_, str> {
        dt.version.as_str().into()
    }
    fn api_version(dt: &ApiResource) -> Cow<'_, str> {
        dt.api_version.as_str().into()
    }
    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        dt.plural.as_str().into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl<'de> serde::Deserialize<'de> for LeanObject {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut out = String::new();
        let mut ids = Identity::default();
        Json {
            out: &mut out,
            ids: &mut ids,
            depth: 0,
            at: At::Top,
        }
        .deserialize(d)?;
        Ok(LeanObject {
            metadata: ObjectMeta {
                name: ids.name,
                namespace: ids.namespace,
                uid: ids.uid,
                resource_version: ids.resource_version,
                ..ObjectMeta::default()
            },
            json: out,
        })
    }
}

/// The metadata fields captured while re-encoding.
#[derive(Default)]
struct Identity {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
}

/// Where in the object a value sits (only the places that are trimmed or captured matter).
#[derive(Clone, Copy, PartialEq, Eq)]
enum At {
    Top,
    Metadata,
    Annotations,
    Captured(Field),
    Elsewhere,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Field {
    Name,
    Namespace,
    Uid,
    ResourceVersion,
}

/// Writes the value it deserializes as JSON into `out`.
struct Json<'a> {
    out: &'a mut String,
    ids: &'a mut Identity,
    depth: usize,
    at: At,
}

impl Json<'_> {
    fn child(&mut self, at: At) -> Json<'_> {
        Json {
            out: self.out,
            ids: self.ids,
            depth: self.depth + 1,
            at,
        }
    }

    fn enter<E: de::Error>(&self) -> Result<(), E> {
        if self.depth >= MAX_DEPTH {
            return Err(E::custom(format_args!(
                "object nests deeper than {MAX_DEPTH} levels"
            )));
        }
        Ok(())
    }
}

impl<'de> DeserializeSeed<'de> for Json<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Json<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<(), E> {
        self.out.push_str(if v { "true" } else { "false" });
        Ok(())
    }
    fn visit_i64<E>(self, v: i64) -> Result<(), E> {
        let _ = write!(self.out, "{v}");
        Ok(())
    }
    fn visit_u64<E>(self, v: u64) -> Result<(), E> {
        let _ = write!(self.out, "{v}");
        Ok(())
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<(), E> {
        if !v.is_finite() {
            return Err(E::custom("a number is not finite"));
        }
        let _ = write!(self.out, "{v}");
        Ok(())
    }
    fn visit_str<E>(self, v: &str) -> Result<(), E> {
        if let At::Captured(field) = self.at {
            let slot = match field {
                Field::Name => &mut self.ids.name,
                Field::Namespace => &mut self.ids.namespace,
                Field::Uid => &mut self.ids.uid,
                Field::ResourceVersion => &mut self.ids.resource_version,
            };
            *slot = Some(v.to_owned());
        }
        push_string(self.out, v);
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        self.out.push_str("null");
        Ok(())
    }
    fn visit_none<E>(self) -> Result<(), E> {
        self.out.push_str("null");
        Ok(())
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        self.enter()?;
        self.out.push('[');
        let mut first = true;
        loop {
            let mark = self.out.len();
            if !first {
                self.out.push(',');
            }
            if seq.next_element_seed(self.child(At::Elsewhere))?.is_none() {
                self.out.truncate(mark);
                break;
            }
            first = false;
        }
        self.out.push(']');
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
        self.enter()?;
        self.out.push('{');
        let mut first = true;
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            let at = match (self.at, &*key) {
                (At::Top, "metadata") => At::Metadata,
                (At::Metadata, "managedFields") => {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
                (At::Metadata, "annotations") => At::Annotations,
                (At::Metadata, "name") => At::Captured(Field::Name),
                (At::Metadata, "namespace") => At::Captured(Field::Namespace),
                (At::Metadata, "uid") => At::Captured(Field::Uid),
                (At::Metadata, "resourceVersion") => At::Captured(Field::ResourceVersion),
                (At::Annotations, LAST_APPLIED) => {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
                _ => At::Elsewhere,
            };
            if !first {
                self.out.push(',');
            }
            first = false;
            push_string(self.out, &key);
            self.out.push(':');
            map.next_value_seed(self.child(at))?;
        }
        self.out.push('}');
        Ok(())
    }
}

/// Append `s` as a JSON string.
fn push_string(out: &mut String, s: &str) {
    out.push('"');
    let mut start = 0;
    for (i, b) in s.bytes().enumerate() {
        let escaped = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0..=0x1f => "",
            _ => continue,
        };
        out.push_str(&s[start..i]);
        if escaped.is_empty() {
            let _ = write!(out, "\\u{b:04x}");
        } else {
            out.push_str(escaped);
        }
        start = i + 1;
    }
    out.push_str(&s[start..]);
    out.push('"');
}

/// Whether two versions of an object differ only where a heartbeat writes: `resourceVersion`,
/// `managedFields`, and the `lastHeartbeatTime`/`lastProbeTime` of its status conditions (a
/// kubelet renews its node's conditions every ~10 s). Nothing a policy reads changed, so no
/// new revision is needed. Either text not being JSON counts as a change.
pub fn only_heartbeat_differs(old: &str, new: &str) -> bool {
    fn strip(text: &str) -> Option<serde_json::Value> {
        let mut v: serde_json::Value = serde_json::from_str(text).ok()?;
        if let Some(meta) = v.get_mut("metadata").and_then(|m| m.as_object_mut()) {
            meta.remove("resourceVersion");
            meta.remove("managedFields");
        }
        if let Some(conditions) = v
            .pointer_mut("/status/conditions")
            .and_then(|c| c.as_array_mut())
        {
            for c in conditions.iter_mut().filter_map(|c| c.as_object_mut()) {
                c.remove("lastHeartbeatTime");
                c.remove("lastProbeTime");
            }
        }
        Some(v)
    }
    match (strip(old), strip(new)) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn lean(v: &Value) -> LeanObject {
        serde_json::from_str(&v.to_string()).unwrap()
    }

    #[test]
    fn trims_and_captures_identity() {
        let pod = json!({
            "kind": "Pod",
            "metadata": {
                "name": "web-1", "namespace": "shop", "uid": "u1", "resourceVersion": "42",
                "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}],
                "annotations": {LAST_APPLIED: "{\"huge\":true}", "keep": "a\"b\\c\n\u{1}é"},
                "labels": {"name": "not-captured"}
            },
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "ports": [80, 443]}]},
            "status": {"ready": true, "n": -3, "f": 0.5, "none": null}
        });
        let o = lean(&pod);
        assert_eq!(o.metadata.name.as_deref(), Some("web-1"));
        assert_eq!(o.metadata.namespace.as_deref(), Some("shop"));
        assert_eq!(o.metadata.uid.as_deref(), Some("u1"));
        assert_eq!(o.metadata.resource_version.as_deref(), Some("42"));
        let back: Value = serde_json::from_str(&o.json).unwrap();
        let mut expected = pod.clone();
        let meta = expected["metadata"].as_object_mut().unwrap();
        meta.remove("managedFields");
        meta["annotations"]
            .as_object_mut()
            .unwrap()
            .remove(LAST_APPLIED);
        assert_eq!(back, expected);
    }

    #[test]
    fn a_heartbeat_is_not_a_change_a_taint_is() {
        let node = |rv: &str, beat: &str, taints: Value| {
            json!({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": "n1", "resourceVersion": rv},
                "spec": {"taints": taints},
                "status": {"conditions": [{
                    "type": "Ready", "status": "True",
                    "lastHeartbeatTime": beat, "lastTransitionTime": "2026-01-01T00:00:00Z"
                }]}
            })
            .to_string()
        };
        let before = node("1", "2026-01-01T00:00:00Z", json!([]));
        let beat = node("2", "2026-01-01T00:00:10Z", json!([]));
        assert!(only_heartbeat_differs(&before, &beat));
        let tainted = node(
            "3",
            "2026-01-01T00:00:10Z",
            json!([{"key": "k", "effect": "NoSchedule"}]),
        );
        assert!(!only_heartbeat_differs(&beat, &tainted));
        let not_ready = beat.replace("\"status\":\"True\"", "\"status\":\"False\"");
        assert!(!only_heartbeat_differs(&beat, &not_ready), "{not_ready}");
        assert!(!only_heartbeat_differs("not json", &beat));
    }

    #[test]
    fn decodes_through_buffered_content_as_kube_lists_do() {
        // kube's ObjectList flattens its type meta, so items reach us from serde's buffer.
        let list: kube::core::ObjectList<LeanObject> = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "PodList", "metadata": {"resourceVersion": "7"},
            "items": [{"metadata": {"name": "a", "managedFields": []}, "spec": {"x": [1, {"y": "z"}]}}]
        }))
        .unwrap();
        assert_eq!(list.items.len(), 1);
        assert_eq!(
            &*list.items[0].json,
            r#"{"metadata":{"name":"a"},"spec":{"x":[1,{"y":"z"}]}}"#
        );
    }

    #[test]
    fn hostile_nesting_is_refused_not_overflowed() {
        let deep = format!("{}1{}", "[".repeat(5_000), "]".repeat(5_000));
        let text = format!(r#"{{"metadata":{{"name":"a"}},"spec":{{"x":{deep}}}}}"#);
        let err = serde_json::from_str::<LeanObject>(&text).unwrap_err();
        assert!(err.to_string().contains("deeper than"), "{err}");
    }
}
