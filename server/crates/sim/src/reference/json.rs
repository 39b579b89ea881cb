//! Python-dict-shaped JSON values and Python's `json.dumps` formatting, byte for byte.
//!
//! Owns [`Json`]/[`Obj`] (objects keep insertion order and `obj[key] = v` replaces in place, like
//! a Python dict) and [`dump`] with both separator sets the generator uses: `json.dumps(x)`
//! (`", "`, `": "`) and `separators=(",", ":")`, always with `ensure_ascii=True`. There is no
//! float variant: the reference generator emits none (its floats only steer placement), so
//! Python's float repr is not needed. Must not know about Kubernetes objects.

/// A JSON value as the generator builds it from Python dicts, lists, strs, ints and bools.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Json {
    Bool(bool),
    Int(i64),
    Str(String),
    Arr(Vec<Json>),
    Obj(Obj),
}

/// A JSON object in insertion order, with Python dict semantics for assignment.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Obj(Vec<(String, Json)>);

impl Obj {
    pub(crate) fn new() -> Self {
        Obj(Vec::new())
    }

    /// `d[key] = value`: replaces an existing key where it stands, else appends.
    pub(crate) fn set(&mut self, key: impl Into<String>, value: impl Into<Json>) {
        let key = key.into();
        let value = value.into();
        match self.0.iter_mut().find(|(k, _)| *k == key) {
            Some((_, slot)) => *slot = value,
            None => self.0.push((key, value)),
        }
    }

    /// `d.update(other)`.
    pub(crate) fn update(&mut self, other: &Obj) {
        for (k, v) in &other.0 {
            self.set(k.clone(), v.clone());
        }
    }

    /// Python truthiness of a dict: non-empty.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// A dict literal: `obj! { "a" => 1, "b" => "x" }` becomes an [`Obj`] with the keys in that order.
macro_rules! obj {
    ($($k:expr => $v:expr),* $(,)?) => {{
        #[allow(unused_mut)]
        let mut o = $crate::reference::json::Obj::new();
        $( o.set($k, $v); )*
        o
    }};
}
pub(crate) use obj;

impl From<bool> for Json {
    fn from(v: bool) -> Self {
        Json::Bool(v)
    }
}
impl From<i64> for Json {
    fn from(v: i64) -> Self {
        Json::Int(v)
    }
}
impl From<i32> for Json {
    fn from(v: i32) -> Self {
        Json::Int(v.into())
    }
}
impl From<&str> for Json {
    fn from(v: &str) -> Self {
        Json::Str(v.to_owned())
    }
}
impl From<&String> for Json {
    fn from(v: &String) -> Self {
        Json::Str(v.clone())
    }
}
impl From<String> for Json {
    fn from(v: String) -> Self {
        Json::Str(v)
    }
}
impl From<Obj> for Json {
    fn from(v: Obj) -> Self {
        Json::Obj(v)
    }
}
impl From<Vec<Json>> for Json {
    fn from(v: Vec<Json>) -> Self {
        Json::Arr(v)
    }
}
impl From<Vec<Obj>> for Json {
    fn from(v: Vec<Obj>) -> Self {
        Json::Arr(v.into_iter().map(Json::Obj).collect())
    }
}

/// The item and key separators of `json.dumps`.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Separators {
    /// `json.dumps(x)`: `", "` and `": "`.
    Default,
    /// `json.dumps(x, separators=(",", ":"))`.
    Compact,
}

/// Appends `json.dumps(value, separators=...)` (with `ensure_ascii=True`) to `out`.
pub(crate) fn dump(value: &Json, seps: Separators, out: &mut Vec<u8>) {
    let (item, key) = match seps {
        Separators::Default => (&b", "[..], &b": "[..]),
        Separators::Compact => (&b","[..], &b":"[..]),
    };
    dump_with(value, item, key, out);
}

fn dump_with(value: &Json, item: &[u8], key: &[u8], out: &mut Vec<u8>) {
    match value {
        Json::Bool(true) => out.extend_from_slice(b"true"),
        Json::Bool(false) => out.extend_from_slice(b"false"),
        Json::Int(i) => out.extend_from_slice(i.to_string().as_bytes()),
        Json::Str(s) => dump_str(s, out),
        Json::Arr(items) => {
            out.push(b'[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.extend_from_slice(item);
                }
                dump_with(v, item, key, out);
            }
            out.push(b']');
        }
        Json::Obj(Obj(entries)) => {
            out.push(b'{');
            for (i, (k, v)) in entries.iter().enumerate() {
                if i > 0 {
                    out.extend_from_slice(item);
                }
                dump_str(k, out);
                out.extend_from_slice(key);
                dump_with(v, item, key, out);
            }
            out.push(b'}');
        }
    }
}

/// `py_encode_basestring_ascii`: `"` and `\` backslash-escaped, `\b \f \n \r \t` by name, every
/// other character outside `' '..='~'` as `\uXXXX` (UTF-16 surrogate pairs above U+FFFF).
fn dump_str(s: &str, out: &mut Vec<u8>) {
    out.push(b'"');
    for c in s.chars() {
        match c {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            '\n' => out.extend_from_slice(b"\\n"),
            '\r' => out.extend_from_slice(b"\\r"),
            '\t' => out.extend_from_slice(b"\\t"),
            '\u{8}' => out.extend_from_slice(b"\\b"),
            '\u{c}' => out.extend_from_slice(b"\\f"),
            ' '..='~' => out.push(c as u8),
            _ => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.extend_from_slice(format!("\\u{unit:04x}").as_bytes());
                }
            }
        }
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dumps(v: &Json, seps: Separators) -> String {
        let mut out = Vec::new();
        dump(v, seps, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn separators_match_python() {
        // python3 -c 'import json; print(json.dumps({"a": [1, True, {}], "b": {"c": []}}))'
        let v = Json::Obj(obj! {
            "a" => vec![Json::Int(1), Json::Bool(true), Json::Obj(obj! {})],
            "b" => obj! { "c" => Vec::<Json>::new() },
        });
        assert_eq!(
            dumps(&v, Separators::Default),
            r#"{"a": [1, true, {}], "b": {"c": []}}"#
        );
        assert_eq!(
            dumps(&v, Separators::Compact),
            r#"{"a":[1,true,{}],"b":{"c":[]}}"#
        );
    }

    #[test]
    fn strings_are_escaped_like_ensure_ascii() {
        // python3 -c 'import json; print(json.dumps("q\"b\\/\n\x01\x7fé😀"))'
        let v = Json::from("q\"b\\/\n\u{1}\u{7f}é😀");
        assert_eq!(
            dumps(&v, Separators::Compact),
            r#""q\"b\\/\n\u0001\u007f\u00e9\ud83d\ude00""#
        );
    }

    #[test]
    fn assignment_replaces_in_place() {
        let mut o = Obj::new();
        o.set("a", 1);
        o.set("b", 2);
        o.set("a", false);
        assert_eq!(
            dumps(&Json::Obj(o), Separators::Compact),
            r#"{"a":false,"b":2}"#
        );
    }
}
