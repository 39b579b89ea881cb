//! Turning a serde error inside one object into a field path.
//!
//! serde reports type errors ("invalid type: integer `1`, expected a string") with a line and
//! column, not with the field. Rather than slowing every decode down with path tracking, the
//! (rare) failing object is scanned once more here to find which value sits at the error
//! position: `metadata.labels.tier`, `spec.containers[0].resources`. Only called on the error
//! path; the input is known to be well-formed JSON. The scan keeps its own stack rather than
//! recursing: it once recursed per nesting level, and a value nested 10,000 deep where a
//! string was expected overflowed the stack of the thread decoding it.

/// Append one key to a rendered path: `.key` for plain identifiers, `["a.b/c"]` otherwise.
pub fn push_key(out: &mut String, key: &str) {
    let plain = !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if plain {
        if !out.is_empty() {
            out.push('.');
        }
        out.push_str(key);
    } else {
        out.push_str(&format!("[{key:?}]"));
    }
}

/// An open container while scanning: its current key (objects) or element index (arrays).
struct Open {
    object: bool,
    index: usize,
    key: Option<String>,
    /// Objects: the next string is a key.
    expect_key: bool,
}

/// The path of the value the open containers are at (`frames`' current keys and indices).
fn path_of(frames: &[Open]) -> String {
    let mut out = String::new();
    for f in frames {
        if f.object {
            if let Some(k) = &f.key {
                push_key(&mut out, k);
            }
        } else {
            out.push_str(&format!("[{}]", f.index));
        }
    }
    out
}

/// The path of the deepest value of `json` that contains byte `offset`.
///
/// One forward pass with an explicit stack (no recursion: the object may nest as deep as
/// serde_json let it, and this runs on a worker's stack), stopping at the first token that
/// contains or follows `offset`.
pub fn path_at(json: &str, offset: usize) -> String {
    let b = json.as_bytes();
    let mut frames: Vec<Open> = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() || c == b':' {
            i += 1;
            continue;
        }
        if c == b',' {
            if let Some(f) = frames.last_mut() {
                if f.object {
                    f.expect_key = true;
                } else {
                    f.index += 1;
                }
            }
            i += 1;
            continue;
        }
        let at_target = i >= offset;
        match c {
            b'{' | b'[' => {
                if at_target {
                    return path_of(&frames);
                }
                frames.push(Open {
                    object: c == b'{',
                    index: 0,
                    key: None,
                    expect_key: c == b'{',
                });
                i += 1;
            }
            b'}' | b']' => {
                if at_target {
                    // The closing container itself.
                    let n = frames.len().saturating_sub(1);
                    return path_of(&frames[..n]);
                }
                frames.pop();
                i += 1;
            }
            b'"' => {
                let start = i;
                i += 1;
                while i < b.len() {
                    match b[i] {
                        b'\\' => i += 2,
                        b'"' => {
                            i += 1;
                            break;
                        }
                        _ => i += 1,
                    }
                }
                let end = i.min(b.len());
                if let Some(f) = frames.last_mut()
                    && f.object
                    && f.expect_key
                {
                    f.expect_key = false;
                    f.key = Some(serde_json::from_slice(&b[start..end]).unwrap_or_else(|_| {
                        let inner = &b[start + 1..end.max(start + 1)];
                        String::from_utf8_lossy(inner.strip_suffix(b"\"").unwrap_or(inner))
                            .into_owned()
                    }));
                }
                if at_target || offset < end {
                    return path_of(&frames);
                }
                i = end;
            }
            _ => {
                while i < b.len()
                    && !matches!(b[i], b',' | b'}' | b']')
                    && !b[i].is_ascii_whitespace()
                {
                    i += 1;
                }
                if at_target || offset < i {
                    return path_of(&frames);
                }
            }
        }
    }
    String::new()
}

/// Byte offset of a 1-based (line, column) position; serde_json's column counts bytes and
/// points at the last byte it consumed.
pub fn offset_of(text: &str, line: usize, column: usize) -> usize {
    let mut line_start = 0;
    if line > 1 {
        let mut seen = 1;
        for (i, b) in text.bytes().enumerate() {
            if b == b'\n' {
                seen += 1;
                if seen == line {
                    line_start = i + 1;
                    break;
                }
            }
        }
    }
    (line_start + column.saturating_sub(1)).min(text.len())
}

/// serde_json's message without its " at line L column C" suffix.
pub fn bare_message(err: &serde_json::Error) -> String {
    let text = err.to_string();
    match text.rfind(" at line ") {
        Some(i) if err.line() > 0 => text[..i].to_owned(),
        _ => text,
    }
}

/// `(field path, message)` for a serde error raised while decoding `json`.
pub fn locate(json: &str, err: &serde_json::Error) -> (String, String) {
    let b = json.as_bytes();
    let mut offset = offset_of(json, err.line(), err.column());
    // A value rejected on sight (`{` where a list was expected) is reported at the byte before
    // it (`:`, `,` or `[`): step onto the value itself.
    if offset < b.len() && matches!(b[offset], b':' | b',' | b'[') {
        offset += 1;
    }
    while offset < b.len() && b[offset].is_ascii_whitespace() {
        offset += 1;
    }
    (path_at(json, offset), bare_message(err))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Debug)]
    #[allow(dead_code)]
    struct Doc {
        metadata: Meta,
        spec: Spec,
    }
    #[derive(serde::Deserialize, Debug)]
    #[allow(dead_code)]
    struct Meta {
        labels: std::collections::BTreeMap<String, String>,
    }
    #[derive(serde::Deserialize, Debug)]
    #[allow(dead_code)]
    struct Spec {
        containers: Vec<Container>,
    }
    #[derive(serde::Deserialize, Debug)]
    #[allow(dead_code)]
    struct Container {
        name: String,
        #[serde(rename = "restartCount")]
        restart_count: Option<i32>,
    }

    fn path_of_error(json: &str) -> (String, String) {
        let err = serde_json::from_str::<Doc>(json).unwrap_err();
        locate(json, &err)
    }

    #[test]
    fn finds_scalar_type_errors() {
        let json = r#"{"metadata":{"labels":{"app.kubernetes.io/name":"x","tier":1}},"spec":{"containers":[]}}"#;
        let (path, msg) = path_of_error(json);
        assert_eq!(path, "metadata.labels.tier");
        assert_eq!(msg, "invalid type: integer `1`, expected a string");

        let json = r#"{"metadata":{"labels":{}},"spec":{"containers":[{"name":"a"},{"name":"b","restartCount":"x"}]}}"#;
        assert_eq!(path_of_error(json).0, "spec.containers[1].restartCount");

        let json = "{\n  \"metadata\": {\"labels\": {}},\n  \"spec\": {\n    \"containers\": [\n      {\"name\": 5}\n    ]\n  }\n}";
        assert_eq!(path_of_error(json).0, "spec.containers[0].name");
    }

    #[test]
    fn finds_container_type_errors_and_odd_keys() {
        let json = r#"{"metadata":{"labels":{}},"spec":{"containers":{"name":"a"}}}"#;
        assert_eq!(path_of_error(json).0, "spec.containers");
        let json = r#"{"metadata":{"labels":{"a.b/c":{}}},"spec":{"containers":[]}}"#;
        assert_eq!(path_of_error(json).0, "metadata.labels[\"a.b/c\"]");
        let json = r#"{"metadata":{"labels":{"we\"ird":[1]}},"spec":{"containers":[]}}"#;
        assert_eq!(path_of_error(json).0, "metadata.labels[\"we\\\"ird\"]");
    }

    #[test]
    fn out_of_range_numbers() {
        let json = r#"{"metadata":{"labels":{}},"spec":{"containers":[{"name":"a","restartCount":5000000000}]}}"#;
        let (path, msg) = path_of_error(json);
        assert_eq!(path, "spec.containers[0].restartCount");
        assert!(msg.contains("5000000000"), "{msg}");
    }

    #[test]
    fn deep_values_are_located_without_recursion() {
        // Deeper than any stack would take one frame per level; serde_json itself gives up
        // at 128, so the error is reported where the nesting passes its limit.
        for n in [10_000, 100_000] {
            let json = format!(
                r#"{{"metadata":{{"labels":{{}}}},"spec":{{"containers":[{{"name":{}{}}}]}}}}"#,
                "[".repeat(n),
                "]".repeat(n)
            );
            let (path, _) = path_of_error(&json);
            assert!(path.starts_with("spec.containers[0].name"), "{path}");
        }
    }

    #[test]
    fn closing_brackets_locate_their_container() {
        let json = r#"{"a":{"b":1,"c":[1,2]}}"#;
        assert_eq!(path_at(json, json.find(']').unwrap()), "a.c");
        assert_eq!(path_at(json, json.rfind('}').unwrap() - 1), "a");
        assert_eq!(path_at(json, json.find('2').unwrap()), "a.c[1]");
        assert_eq!(path_at(json, 0), "");
    }

    #[test]
    fn offsets_from_line_and_column() {
        assert_eq!(offset_of("abc", 1, 1), 0);
        assert_eq!(offset_of("ab\ncd", 2, 2), 4);
        assert_eq!(offset_of("ab", 9, 9), 2);
    }
}
