//! Turning a serde error inside one object into a field path.
//!
//! serde reports type errors ("invalid type: integer `1`, expected a string") with a line and
//! column, not with the field. Rather than slowing every decode down with path tracking, the
//! (rare) failing object is scanned once more here to find which value sits at the error
//! position: `metadata.labels.tier`, `spec.containers[0].resources`. Only called on the error
//! path; the input is known to be well-formed JSON.

/// One step of a path.
enum Seg {
    Key(String),
    Index(usize),
}

/// Render a path the way Kubernetes field errors read: `spec.containers[0].name`,
/// `metadata.labels["app.kubernetes.io/name"]`.
fn render(path: &[Seg]) -> String {
    let mut out = String::new();
    for seg in path {
        match seg {
            Seg::Key(k) => push_key(&mut out, k),
            Seg::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

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

struct Scanner<'a> {
    b: &'a [u8],
    pos: usize,
    target: usize,
    path: Vec<Seg>,
    found: Option<String>,
}

impl Scanner<'_> {
    fn ws(&mut self) {
        while self.pos < self.b.len() && self.b[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
    }

    /// Skip a string starting at `self.pos` (on the opening quote); returns its text range.
    fn string(&mut self) -> (usize, usize) {
        let start = self.pos;
        self.pos += 1;
        while self.pos < self.b.len() {
            match self.b[self.pos] {
                b'\\' => self.pos += 2,
                b'"' => {
                    self.pos += 1;
                    return (start, self.pos);
                }
                _ => self.pos += 1,
            }
        }
        (start, self.pos)
    }

    fn value(&mut self) {
        self.ws();
        let start = self.pos;
        if start >= self.b.len() || self.found.is_some() {
            return;
        }
        match self.b[start] {
            b'{' => {
                self.pos += 1;
                loop {
                    self.ws();
                    if self.pos >= self.b.len() || self.found.is_some() {
                        break;
                    }
                    match self.b[self.pos] {
                        b'}' => {
                            self.pos += 1;
                            break;
                        }
                        b',' => self.pos += 1,
                        b'"' => {
                            let (ks, ke) = self.string();
                            let key: String = serde_json::from_slice(&self.b[ks..ke])
                                .unwrap_or_else(|_| {
                                    String::from_utf8_lossy(&self.b[ks + 1..ke - 1]).into_owned()
                                });
                            self.ws();
                            if self.pos < self.b.len() && self.b[self.pos] == b':' {
                                self.pos += 1;
                            }
                            self.path.push(Seg::Key(key));
                            self.value();
                            self.path.pop();
                        }
                        _ => break,
                    }
                }
            }
            b'[' => {
                self.pos += 1;
                let mut i = 0;
                loop {
                    self.ws();
                    if self.pos >= self.b.len() || self.found.is_some() {
                        break;
                    }
                    match self.b[self.pos] {
                        b']' => {
                            self.pos += 1;
                            break;
                        }
                        b',' => self.pos += 1,
                        _ => {
                            self.path.push(Seg::Index(i));
                            self.value();
                            self.path.pop();
                            i += 1;
                        }
                    }
                }
            }
            b'"' => {
                self.string();
            }
            _ => {
                while self.pos < self.b.len()
                    && !matches!(self.b[self.pos], b',' | b'}' | b']')
                    && !self.b[self.pos].is_ascii_whitespace()
                {
                    self.pos += 1;
                }
            }
        }
        // Children finish first, so the first value containing the target is the deepest.
        if self.found.is_none() && start <= self.target && self.target < self.pos.max(start + 1) {
            self.found = Some(render(&self.path));
        }
    }
}

/// The path of the deepest value of `json` that contains byte `offset`.
pub fn path_at(json: &str, offset: usize) -> String {
    let mut s = Scanner {
        b: json.as_bytes(),
        pos: 0,
        target: offset,
        path: Vec::new(),
        found: None,
    };
    s.value();
    s.found.unwrap_or_default()
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
    fn offsets_from_line_and_column() {
        assert_eq!(offset_of("abc", 1, 1), 0);
        assert_eq!(offset_of("ab\ncd", 2, 2), 4);
        assert_eq!(offset_of("ab", 9, 9), 2);
    }
}
