//! Patch application: JSON merge patch (RFC 7386), which also stands in for strategic merge
//! patch and server-side apply, and JSON patch (RFC 6902).

use serde_json::{Map, Value};

/// The patch formats a PATCH request can carry, by `Content-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PatchKind {
    /// `application/merge-patch+json`.
    Merge,
    /// `application/strategic-merge-patch+json`: applied as a JSON merge patch (lists are
    /// replaced, not merged by key; `$patch` directives are not interpreted).
    Strategic,
    /// `application/json-patch+json`.
    Json,
    /// `application/apply-patch+yaml` (server-side apply): the configuration is merged into the
    /// object like a merge patch; field ownership and conflicts are not modelled.
    Apply,
}

impl PatchKind {
    pub(crate) fn from_content_type(content_type: &str) -> Option<PatchKind> {
        let media = content_type.split(';').next().unwrap_or("").trim();
        Some(match media {
            "application/merge-patch+json" => PatchKind::Merge,
            "application/strategic-merge-patch+json" => PatchKind::Strategic,
            "application/json-patch+json" => PatchKind::Json,
            "application/apply-patch+yaml" | "application/apply-patch+cbor" => PatchKind::Apply,
            _ => return None,
        })
    }
}

/// RFC 7386: objects merge recursively, `null` removes a key, anything else replaces.
pub(crate) fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    if let Value::Object(map) = target {
        for (key, value) in patch {
            if value.is_null() {
                map.remove(key);
            } else {
                merge(map.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
    }
}

/// Splits a JSON pointer into unescaped reference tokens.
fn pointer_tokens(pointer: &str) -> Result<Vec<String>, String> {
    if pointer.is_empty() {
        return Ok(Vec::new());
    }
    let rest = pointer
        .strip_prefix('/')
        .ok_or_else(|| format!("invalid JSON pointer {pointer:?}"))?;
    Ok(rest
        .split('/')
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect())
}

fn array_index(token: &str, len: usize, allow_end: bool) -> Result<usize, String> {
    if allow_end && token == "-" {
        return Ok(len);
    }
    let index: usize = token
        .parse()
        .map_err(|_| format!("invalid array index {token:?}"))?;
    let limit = if allow_end {
        len
    } else {
        len.saturating_sub(1)
    };
    if index > limit || (!allow_end && len == 0) {
        return Err(format!("array index {index} out of bounds"));
    }
    Ok(index)
}

/// The parent container of the location `tokens` points at, and the last token.
fn parent_mut<'a>(
    doc: &'a mut Value,
    tokens: &'a [String],
) -> Result<(&'a mut Value, &'a str), String> {
    let (last, parents) = tokens
        .split_last()
        .ok_or_else(|| "the root of the document cannot be the target".to_string())?;
    let mut cur = doc;
    for token in parents {
        cur = match cur {
            Value::Object(map) => map
                .get_mut(token)
                .ok_or_else(|| format!("missing path element {token:?}"))?,
            Value::Array(items) => {
                let i = array_index(token, items.len(), false)?;
                &mut items[i]
            }
            _ => return Err(format!("cannot descend into a scalar at {token:?}")),
        };
    }
    Ok((cur, last))
}

fn get<'a>(doc: &'a Value, pointer: &str) -> Result<&'a Value, String> {
    doc.pointer(pointer)
        .ok_or_else(|| format!("path {pointer:?} does not exist"))
}

fn add(doc: &mut Value, pointer: &str, value: Value) -> Result<(), String> {
    let tokens = pointer_tokens(pointer)?;
    if tokens.is_empty() {
        *doc = value;
        return Ok(());
    }
    let (parent, last) = parent_mut(doc, &tokens)?;
    match parent {
        Value::Object(map) => {
            map.insert(last.to_string(), value);
        }
        Value::Array(items) => {
            let i = array_index(last, items.len(), true)?;
            items.insert(i, value);
        }
        _ => return Err(format!("cannot add to a scalar at {pointer:?}")),
    }
    Ok(())
}

fn remove(doc: &mut Value, pointer: &str) -> Result<Value, String> {
    let tokens = pointer_tokens(pointer)?;
    let (parent, last) = parent_mut(doc, &tokens)?;
    match parent {
        Value::Object(map) => map
            .remove(last)
            .ok_or_else(|| format!("path {pointer:?} does not exist")),
        Value::Array(items) => {
            let i = array_index(last, items.len(), false)?;
            Ok(items.remove(i))
        }
        _ => Err(format!("cannot remove from a scalar at {pointer:?}")),
    }
}

/// RFC 6902. The message of an error says which operation failed.
pub(crate) fn json_patch(doc: &mut Value, ops: &Value) -> Result<(), String> {
    let ops = ops
        .as_array()
        .ok_or_else(|| "a JSON patch must be an array of operations".to_string())?;
    for (n, op) in ops.iter().enumerate() {
        let field = |name: &str| {
            op.get(name)
                .ok_or_else(|| format!("operation {n} has no {name:?}"))
        };
        let path = field("path")?
            .as_str()
            .ok_or_else(|| format!("operation {n}: \"path\" is not a string"))?;
        let from = || {
            field("from")?
                .as_str()
                .ok_or_else(|| format!("operation {n}: \"from\" is not a string"))
        };
        let result = match field("op")?.as_str() {
            Some("add") => add(doc, path, field("value")?.clone()),
            Some("remove") => remove(doc, path).map(drop),
            Some("replace") => {
                let value = field("value")?.clone();
                get(doc, path)?;
                remove(doc, path).and_then(|_| add(doc, path, value))
            }
            Some("move") => {
                let from = from()?;
                remove(doc, from).and_then(|v| add(doc, path, v))
            }
            Some("copy") => {
                let value = get(doc, from()?)?.clone();
                add(doc, path, value)
            }
            Some("test") => {
                if get(doc, path)? == field("value")? {
                    Ok(())
                } else {
                    Err(format!("testing value {path:?} failed"))
                }
            }
            other => Err(format!("unknown operation {other:?}")),
        };
        result.map_err(|e| format!("operation {n}: {e}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_follows_rfc_7386() {
        let mut doc = json!({"a": "b", "c": {"d": "e", "f": "g"}, "l": [1, 2]});
        merge(
            &mut doc,
            &json!({"a": "z", "c": {"f": null}, "l": [3], "n": {"x": 1}}),
        );
        assert_eq!(
            doc,
            json!({"a": "z", "c": {"d": "e"}, "l": [3], "n": {"x": 1}})
        );
    }

    #[test]
    fn json_patch_operations() {
        let mut doc = json!({"metadata": {"labels": {"a/b": "1"}}, "list": [1, 2, 3]});
        let ops = json!([
            {"op": "test", "path": "/metadata/labels/a~1b", "value": "1"},
            {"op": "add", "path": "/metadata/labels/new", "value": "x"},
            {"op": "replace", "path": "/list/0", "value": 10},
            {"op": "add", "path": "/list/-", "value": 4},
            {"op": "remove", "path": "/list/1"},
            {"op": "copy", "from": "/metadata/labels/new", "path": "/copied"},
            {"op": "move", "from": "/copied", "path": "/moved"}
        ]);
        json_patch(&mut doc, &ops).unwrap();
        assert_eq!(
            doc,
            json!({"metadata": {"labels": {"a/b": "1", "new": "x"}}, "list": [10, 3, 4], "moved": "x"})
        );
        let failing = [
            json!([{"op": "test", "path": "/list/0", "value": 99}]),
            json!([{"op": "remove", "path": "/missing"}]),
            json!([{"op": "replace", "path": "/missing", "value": 1}]),
            json!([{"op": "add", "path": "/list/9", "value": 1}]),
            json!([{"op": "frobnicate", "path": "/list"}]),
            json!({"op": "add"}),
        ];
        for ops in failing {
            let mut copy = doc.clone();
            assert!(json_patch(&mut copy, &ops).is_err(), "{ops}");
        }
    }
}
