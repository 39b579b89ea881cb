//! Structural checks of a request document before anything decodes it: how deep its values
//! nest, and whether an object repeats a key.
//!
//! Owns [`MAX_DEPTH`] (the nesting limit of every JSON and YAML body the server reads), the
//! JSON pre-scan [`check_json`], the YAML event walk [`check_yaml`] (which also counts the
//! documents of a stream), the bounded YAML reader [`yaml_value`] (the same limits once
//! aliases are expanded), and their error, [`StructureError`] (located by line, column and
//! field path).
//! Must not: know Kubernetes kinds or what a List is (that is `objects`), or decode values
//! into typed structs.
//!
//! Why a pre-scan: serde_json bounds the recursion of typed decoding (127 levels), but not of
//! values it skips (`IgnoredAny`, `RawValue`), and the code that turns a decode error into a
//! field path walks the object again. A value nested 10,000 deep where a string was expected
//! once overflowed a worker's stack and aborted the server. After [`check_json`], nothing
//! below it meets a value deeper than [`MAX_DEPTH`]. The scan is one pass over the bytes
//! (strings are skipped with `memchr`), without allocation for the usual small objects: about
//! 0.3 s of CPU for the 420 MB reference cluster. YAML needs its own walk for a reason of its
//! own, given at [`check_yaml`].
//!
//! Repeated keys are refused rather than resolved: `{"cpu": "1", "cpu": "64"}` means whatever
//! the last decoder to read it decides, and Kubernetes' API server refuses them under strict
//! field validation (kubectl's default).

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashSet;
use std::fmt;
use std::marker::PhantomData;
use std::mem::MaybeUninit;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use unsafe_libyaml as unsafe_yaml;

use super::jsonpath::push_key;

/// How many containers (objects and arrays, the outermost included) a value of a request body
/// may be nested in. A kubectl List of pods is about 12 deep (List → items → pod → spec →
/// affinity → … → values), managed fields about 20; the deepest object in the test data, the
/// conformance scenarios and the benchmark's generated clusters is 14. Below serde_json's own
/// limit (127) and serde_yaml's (128), so this check is the one that answers.
pub const MAX_DEPTH: usize = 100;

/// Path segments rendered in an error before it is cut short (a value nested too deep has a
/// path as long as its nesting).
const MAX_PATH_SEGMENTS: usize = 12;

/// A document refused for its structure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StructureError {
    /// 1-based position of the offending key or container.
    pub line: usize,
    pub column: usize,
    /// Where it is, e.g. `items[0].metadata.name[0][0]…` (`""` at the top level).
    pub path: String,
    pub problem: Problem,
}

/// What is wrong with a document's structure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// A container opens deeper than `limit` levels.
    TooDeep { limit: usize },
    /// An object holds `key` twice.
    DuplicateKey { key: String },
}

impl StructureError {
    /// A machine-readable code for API errors.
    pub fn code(&self) -> &'static str {
        match self.problem {
            Problem::TooDeep { .. } => "document_too_deep",
            Problem::DuplicateKey { .. } => "duplicate_key",
        }
    }
}

impl fmt::Display for StructureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (line, column) = (self.line, self.column);
        let at = if self.path.is_empty() {
            "the top level".to_owned()
        } else {
            self.path.clone()
        };
        match &self.problem {
            Problem::TooDeep { limit } => write!(
                f,
                "values nested more than {limit} levels deep at line {line}, column {column} \
                 ({at}); no Kubernetes object nests that deep"
            ),
            Problem::DuplicateKey { key } => write!(
                f,
                "duplicate key {:?} at line {line}, column {column} (in {at}); a key may \
                 appear only once per object",
                shorten(key)
            ),
        }
    }
}

impl std::error::Error for StructureError {}

/// `s`, cut to 64 characters (with the full length) when longer: names and keys from a
/// hostile document can be a megabyte long, and errors quote them.
pub(crate) fn shorten(s: &str) -> Cow<'_, str> {
    const KEEP: usize = 64;
    match s.char_indices().nth(KEEP) {
        None => Cow::Borrowed(s),
        Some((cut, _)) => Cow::Owned(format!("{}… ({} bytes)", &s[..cut], s.len())),
    }
}

/// One step of a path, while scanning.
enum Seg {
    Key(String),
    Index(usize),
}

fn render(segments: impl IntoIterator<Item = Seg>) -> String {
    let mut out = String::new();
    for (i, seg) in segments.into_iter().enumerate() {
        if i == MAX_PATH_SEGMENTS {
            out.push('…');
            break;
        }
        match seg {
            Seg::Key(k) => push_key(&mut out, &shorten(&k)),
            Seg::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// 1-based line and column (in characters) of byte `at`.
pub(crate) fn line_col(bytes: &[u8], at: usize) -> (usize, usize) {
    let before = &bytes[..at.min(bytes.len())];
    let line_start = memchr::memrchr(b'\n', before).map_or(0, |i| i + 1);
    let line = memchr::memchr_iter(b'\n', before).count() + 1;
    // Characters, not bytes: count every byte that does not continue a UTF-8 sequence.
    let column = before[line_start..]
        .iter()
        .filter(|&&b| (b & 0xC0) != 0x80)
        .count()
        + 1;
    (line, column)
}

// ------------------------------------------------------------------------------------- JSON

/// An open object or array.
struct Frame<'a> {
    object: bool,
    /// Arrays: the index of the current element.
    index: usize,
    /// Objects: the next string is a key (after `{` or `,`).
    expect_key: bool,
    /// Objects: where the current key's opening quote is (for paths).
    key_at: usize,
    /// Objects: where this object's keys start in the scanner's key stack.
    keys_from: usize,
    /// Objects with many keys: every key, hashed (a linear search would be quadratic).
    many: Option<HashSet<Cow<'a, [u8]>>>,
}

/// Keys kept in the shared stack per object before switching to a hash set.
const LINEAR_KEYS: usize = 24;

/// Check that no value of a JSON document nests deeper than [`MAX_DEPTH`] and that no object
/// repeats a key. Syntax is not checked here (the decoder reports syntax errors with their
/// position); whatever the input, the scan is linear and bounded in memory by the nesting.
pub fn check_json(text: &[u8]) -> Result<(), StructureError> {
    let mut frames: Vec<Frame<'_>> = Vec::new();
    let mut keys: Vec<Cow<'_, [u8]>> = Vec::new();
    let mut i = 0;
    while i < text.len() {
        match text[i] {
            b'"' => {
                let (end, escaped) = skip_string(text, i);
                if let Some(frame) = frames.last_mut()
                    && frame.object
                    && frame.expect_key
                {
                    frame.expect_key = false;
                    frame.key_at = i;
                    let key = key_bytes(text, i, end, escaped);
                    let duplicate = match &mut frame.many {
                        Some(set) => !set.insert(key),
                        None => {
                            let own = &keys[frame.keys_from..];
                            if own.contains(&key) {
                                true
                            } else if own.len() < LINEAR_KEYS {
                                keys.push(key);
                                false
                            } else {
                                let mut set: HashSet<Cow<'_, [u8]>> =
                                    keys.drain(frame.keys_from..).collect();
                                set.insert(key);
                                frame.many = Some(set);
                                false
                            }
                        }
                    };
                    if duplicate {
                        let key = decode_key(text, i, end);
                        frames.pop();
                        let (line, column) = line_col(text, i);
                        return Err(StructureError {
                            line,
                            column,
                            path: render(path_of(text, &frames)),
                            problem: Problem::DuplicateKey { key },
                        });
                    }
                }
                i = end;
            }
            open @ (b'{' | b'[') => {
                if frames.len() >= MAX_DEPTH {
                    let (line, column) = line_col(text, i);
                    return Err(StructureError {
                        line,
                        column,
                        path: render(path_of(text, &frames)),
                        problem: Problem::TooDeep { limit: MAX_DEPTH },
                    });
                }
                frames.push(Frame {
                    object: open == b'{',
                    index: 0,
                    expect_key: open == b'{',
                    key_at: 0,
                    keys_from: keys.len(),
                    many: None,
                });
                i += 1;
            }
            b'}' | b']' => {
                if let Some(frame) = frames.pop() {
                    keys.truncate(frame.keys_from);
                }
                i += 1;
            }
            b',' => {
                if let Some(frame) = frames.last_mut() {
                    if frame.object {
                        frame.expect_key = true;
                    } else {
                        frame.index += 1;
                    }
                }
                i += 1;
            }
            _ => i += 1,
        }
    }
    Ok(())
}

/// The end (one past the closing quote, or the end of the input) of the string opening at
/// `start`, and whether it holds escapes.
fn skip_string(text: &[u8], start: usize) -> (usize, bool) {
    let mut pos = start + 1;
    let mut escaped = false;
    while let Some(found) = memchr::memchr2(b'"', b'\\', &text[pos.min(text.len())..]) {
        let at = pos + found;
        if text[at] == b'\\' {
            escaped = true;
            pos = at + 2;
        } else {
            return (at + 1, escaped);
        }
    }
    (text.len(), escaped)
}

/// A key as compared: its raw bytes, or (with escapes) its decoded text.
fn key_bytes(text: &[u8], start: usize, end: usize, escaped: bool) -> Cow<'_, [u8]> {
    let inner = &text[(start + 1).min(end)..end.saturating_sub(1).max(start + 1).min(end)];
    if escaped {
        Cow::Owned(decode_key(text, start, end).into_bytes())
    } else {
        Cow::Borrowed(inner)
    }
}

/// The text of the key whose string spans `start..end`.
fn decode_key(text: &[u8], start: usize, end: usize) -> String {
    let quoted = &text[start..end];
    serde_json::from_slice::<String>(quoted).unwrap_or_else(|_| {
        let inner = &quoted[1.min(quoted.len())..quoted.len().saturating_sub(1).max(1)];
        String::from_utf8_lossy(inner).into_owned()
    })
}

/// The path of the current position: each open container's key or index.
fn path_of(text: &[u8], frames: &[Frame<'_>]) -> Vec<Seg> {
    frames
        .iter()
        .take(MAX_PATH_SEGMENTS + 1)
        .map(|f| {
            if f.object {
                let (end, _) = skip_string(text, f.key_at);
                Seg::Key(decode_key(text, f.key_at, end))
            } else {
                Seg::Index(f.index)
            }
        })
        .collect()
}

// ------------------------------------------------------------------------------------- YAML

/// What [`check_yaml`] found in a YAML stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct YamlOutline {
    /// Documents in the stream, up to the first syntax error (an empty stream has none).
    pub documents: usize,
    /// Where the second document starts (1-based line and column), if there is one.
    pub second_document: Option<(usize, usize)>,
}

/// An open mapping or sequence while walking YAML events.
struct YamlFrame {
    mapping: bool,
    /// Sequences: the index of the current element.
    index: usize,
    /// Mappings: the next node is a key.
    expect_key: bool,
    /// Mappings: the current key (`?` for a key that is not a scalar).
    key: String,
    /// Mappings: the scalar keys seen (linear while few, then hashed).
    keys: Vec<Vec<u8>>,
    many: Option<HashSet<Vec<u8>>>,
}

impl YamlFrame {
    fn new(mapping: bool) -> Self {
        YamlFrame {
            mapping,
            index: 0,
            expect_key: mapping,
            key: String::new(),
            keys: Vec::new(),
            many: None,
        }
    }

    /// Record `key`; false when the mapping already holds it.
    fn insert_key(&mut self, key: &[u8]) -> bool {
        if let Some(set) = &mut self.many {
            return set.insert(key.to_vec());
        }
        if self.keys.iter().any(|k| k == key) {
            return false;
        }
        self.keys.push(key.to_vec());
        if self.keys.len() > LINEAR_KEYS {
            self.many = Some(std::mem::take(&mut self.keys).into_iter().collect());
        }
        true
    }
}

fn yaml_path(frames: &[YamlFrame]) -> String {
    render(frames.iter().map(|f| {
        if f.mapping {
            Seg::Key(f.key.clone())
        } else {
            Seg::Index(f.index)
        }
    }))
}

/// A node begins in the innermost open collection: a key of a mapping (recorded, refused if
/// repeated) or an element of a sequence.
fn begin_yaml_node(
    frames: &mut [YamlFrame],
    scalar_key: Option<&[u8]>,
    at: (usize, usize),
) -> Result<(), StructureError> {
    let n = frames.len();
    let Some(top) = frames.last_mut() else {
        return Ok(());
    };
    if !(top.mapping && top.expect_key) {
        return Ok(());
    }
    match scalar_key {
        Some(key) => {
            if !top.insert_key(key) {
                let key = String::from_utf8_lossy(key).into_owned();
                return Err(StructureError {
                    line: at.0,
                    column: at.1,
                    path: yaml_path(&frames[..n - 1]),
                    problem: Problem::DuplicateKey { key },
                });
            }
            top.key = String::from_utf8_lossy(key).into_owned();
        }
        None => top.key = "?".to_owned(),
    }
    Ok(())
}

/// A node ended in the innermost open collection.
fn end_yaml_node(frames: &mut [YamlFrame]) {
    if let Some(top) = frames.last_mut() {
        if top.mapping {
            top.expect_key = !top.expect_key;
        } else {
            top.index += 1;
        }
    }
}

/// Walk the events of a YAML stream, as libyaml parses it, refusing a collection nested
/// deeper than [`MAX_DEPTH`] and a mapping that repeats a scalar key, and count the
/// documents. Syntax errors end the walk quietly: the decoder that runs next reports them.
///
/// Why before serde_yaml: it loads a whole document into events before anything can look at
/// them, and libyaml's scanner checks every open flow level (`[`, `{`) at every token, so a
/// flow collection nested n deep costs n² (100,000 levels, 200 KB: 37 s of CPU). Here the walk
/// stops at the first level too many; libyaml looks at most 1,024 characters ahead of it.
pub fn check_yaml(text: &[u8]) -> Result<YamlOutline, StructureError> {
    let mut events = YamlEvents::new(text);
    let mut frames: Vec<YamlFrame> = Vec::new();
    let mut outline = YamlOutline::default();
    loop {
        // Only keys are looked at: a scalar is copied out of libyaml only where one is due.
        let key_due = frames.last().is_some_and(|f| f.mapping && f.expect_key);
        let Some((event, at)) = events.next(key_due) else {
            break;
        };
        match event {
            YamlEvent::DocumentStart => {
                outline.documents += 1;
                if outline.documents == 2 {
                    outline.second_document = Some(at);
                }
            }
            YamlEvent::Scalar(value) => {
                begin_yaml_node(&mut frames, value.as_deref(), at)?;
                end_yaml_node(&mut frames);
            }
            YamlEvent::Alias => {
                begin_yaml_node(&mut frames, None, at)?;
                end_yaml_node(&mut frames);
            }
            YamlEvent::Start { mapping } => {
                begin_yaml_node(&mut frames, None, at)?;
                if frames.len() >= MAX_DEPTH {
                    return Err(StructureError {
                        line: at.0,
                        column: at.1,
                        path: yaml_path(&frames),
                        problem: Problem::TooDeep { limit: MAX_DEPTH },
                    });
                }
                frames.push(YamlFrame::new(mapping));
            }
            YamlEvent::End => {
                frames.pop();
                end_yaml_node(&mut frames);
            }
            YamlEvent::Other => {}
        }
    }
    Ok(outline)
}

/// The events [`check_yaml`] looks at.
enum YamlEvent {
    DocumentStart,
    /// The scalar's text when it was asked for (a mapping key).
    Scalar(Option<Vec<u8>>),
    Alias,
    Start {
        mapping: bool,
    },
    End,
    Other,
}

/// libyaml's event parser over a byte slice (the same parser serde_yaml drives).
struct YamlEvents<'a> {
    /// Boxed: libyaml keeps a pointer to the parser in the parser (its read handler's data),
    /// so it must not move once the input is set.
    parser: Box<MaybeUninit<unsafe_yaml::yaml_parser_t>>,
    done: bool,
    _input: PhantomData<&'a [u8]>,
}

impl<'a> YamlEvents<'a> {
    fn new(input: &'a [u8]) -> Self {
        let mut parser = Box::new(MaybeUninit::<unsafe_yaml::yaml_parser_t>::uninit());
        let ptr = parser.as_mut_ptr();
        // SAFETY: `ptr` points to memory sized and aligned for a parser, which
        // `yaml_parser_initialize` initialises; the input outlives the parser (`'a`), and the
        // parser stays where the box put it until `Drop` deletes it.
        let done = unsafe {
            if unsafe_yaml::yaml_parser_initialize(ptr).ok {
                unsafe_yaml::yaml_parser_set_encoding(ptr, unsafe_yaml::YAML_UTF8_ENCODING);
                unsafe_yaml::yaml_parser_set_input_string(ptr, input.as_ptr(), input.len() as _);
                false
            } else {
                true
            }
        };
        YamlEvents {
            parser,
            done,
            _input: PhantomData,
        }
    }

    /// The next event and where it starts (1-based line and column), with the text of a
    /// scalar if `scalar_text`; `None` at the end of the stream or at the first error.
    fn next(&mut self, scalar_text: bool) -> Option<(YamlEvent, (usize, usize))> {
        if self.done {
            return None;
        }
        let mut event = MaybeUninit::<unsafe_yaml::yaml_event_t>::uninit();
        let parser = self.parser.as_mut_ptr();
        // SAFETY: the parser was initialised in `new` (`done` is set otherwise); a successful
        // `yaml_parser_parse` initialises `event`, whose union field is read according to its
        // type, and which is deleted before returning.
        unsafe {
            if !unsafe_yaml::yaml_parser_parse(parser, event.as_mut_ptr()).ok {
                self.done = true;
                return None;
            }
            let e = event.as_mut_ptr();
            let mark = (*e).start_mark;
            let at = (mark.line as usize + 1, mark.column as usize + 1);
            let converted = match (*e).type_ {
                unsafe_yaml::YAML_DOCUMENT_START_EVENT => YamlEvent::DocumentStart,
                unsafe_yaml::YAML_SCALAR_EVENT => YamlEvent::Scalar(scalar_text.then(|| {
                    let scalar = (*e).data.scalar;
                    std::slice::from_raw_parts(scalar.value, scalar.length as usize).to_vec()
                })),
                unsafe_yaml::YAML_ALIAS_EVENT => YamlEvent::Alias,
                unsafe_yaml::YAML_SEQUENCE_START_EVENT => YamlEvent::Start { mapping: false },
                unsafe_yaml::YAML_MAPPING_START_EVENT => YamlEvent::Start { mapping: true },
                unsafe_yaml::YAML_SEQUENCE_END_EVENT | unsafe_yaml::YAML_MAPPING_END_EVENT => {
                    YamlEvent::End
                }
                unsafe_yaml::YAML_STREAM_END_EVENT => {
                    self.done = true;
                    YamlEvent::Other
                }
                _ => YamlEvent::Other,
            };
            unsafe_yaml::yaml_event_delete(e);
            Some((converted, at))
        }
    }
}

impl Drop for YamlEvents<'_> {
    fn drop(&mut self) {
        // SAFETY: initialised in `new` unless initialisation failed (then `done` is set with
        // nothing to free… but `yaml_parser_initialize` zeroes the parser first, so deleting
        // it is still sound).
        unsafe { unsafe_yaml::yaml_parser_delete(self.parser.as_mut_ptr()) }
    }
}

/// Why a YAML document could not be read.
#[derive(Debug)]
pub enum YamlFailure {
    /// Nested too deep or a repeated key.
    Structure(StructureError),
    /// Not YAML, or not representable as JSON (a non-string key, a tagged value…).
    Syntax(serde_yaml::Error),
}

/// Read one YAML document into a JSON value, refusing values nested deeper than
/// [`MAX_DEPTH`] and mappings that repeat a key. `document` is one document of a
/// `serde_yaml::Deserializer` stream (or a whole single-document input).
pub fn yaml_value<'de>(
    document: impl Deserializer<'de, Error = serde_yaml::Error>,
) -> Result<Value, YamlFailure> {
    let tracker = Tracker::default();
    let seed = Bounded {
        depth: 0,
        tracker: &tracker,
    };
    match seed.deserialize(document) {
        Ok(value) => Ok(value),
        Err(e) => match tracker.problem.into_inner() {
            Some((problem, path)) => {
                let (line, column) = e
                    .location()
                    .map_or((1, 1), |l| (l.line().max(1), l.column().max(1)));
                Err(YamlFailure::Structure(StructureError {
                    line,
                    column,
                    path,
                    problem,
                }))
            }
            None => Err(YamlFailure::Syntax(e)),
        },
    }
}

/// The path being read, and the structural problem met (serde_yaml adds the position to the
/// error; the problem itself travels here).
#[derive(Default)]
struct Tracker {
    path: RefCell<Vec<Seg>>,
    problem: RefCell<Option<(Problem, String)>>,
}

impl Tracker {
    fn fail<E: de::Error>(&self, problem: Problem) -> E {
        let path = render(self.path.borrow_mut().drain(..));
        let message = match &problem {
            Problem::TooDeep { limit } => format!("values nested more than {limit} levels deep"),
            Problem::DuplicateKey { key } => format!("duplicate key {:?}", shorten(key)),
        };
        *self.problem.borrow_mut() = Some((problem, path));
        E::custom(message)
    }
}

/// Reads a value at `depth` (the number of containers around it).
#[derive(Clone, Copy)]
struct Bounded<'t> {
    depth: usize,
    tracker: &'t Tracker,
}

impl Bounded<'_> {
    fn inner<E: de::Error>(self) -> Result<Self, E> {
        if self.depth >= MAX_DEPTH {
            return Err(self.tracker.fail(Problem::TooDeep { limit: MAX_DEPTH }));
        }
        Ok(Bounded {
            depth: self.depth + 1,
            tracker: self.tracker,
        })
    }
}

impl<'de> DeserializeSeed<'de> for Bounded<'_> {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

/// A JSON number for `f`; `null` for what JSON cannot hold (NaN, infinities).
fn float(f: f64) -> Value {
    serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)
}

impl<'de> Visitor<'de> for Bounded<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON-compatible value")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    /// YAML integers beyond 64 bits (serde_yaml hands them out as `i128`/`u128`, which
    /// `serde_json::Value` refuses) become floats, as they do when the same document is sent
    /// as JSON.
    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Value, E> {
        Ok(i64::try_from(v).map_or_else(|_| float(v as f64), Value::from))
    }
    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Value, E> {
        Ok(u64::try_from(v).map_or_else(|_| float(v as f64), Value::from))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Ok(float(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        self.deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let inner = self.inner()?;
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
        loop {
            self.tracker.path.borrow_mut().push(Seg::Index(out.len()));
            let Some(value) = seq.next_element_seed(inner)? else {
                self.tracker.path.borrow_mut().pop();
                break;
            };
            self.tracker.path.borrow_mut().pop();
            out.push(value);
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let inner = self.inner()?;
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                return Err(self.tracker.fail(Problem::DuplicateKey { key }));
            }
            self.tracker.path.borrow_mut().push(Seg::Key(key.clone()));
            let value = map.next_value_seed(inner)?;
            self.tracker.path.borrow_mut().pop();
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deep(open: &str, close: &str, n: usize) -> String {
        format!("{}{}", open.repeat(n), close.repeat(n))
    }

    fn json_err(text: &str) -> StructureError {
        check_json(text.as_bytes()).expect_err("refused")
    }

    #[test]
    fn depth_up_to_the_limit_passes_and_one_more_is_refused() {
        assert!(check_json(deep("[", "]", MAX_DEPTH).as_bytes()).is_ok());
        let e = json_err(&deep("[", "]", MAX_DEPTH + 1));
        assert_eq!(e.problem, Problem::TooDeep { limit: MAX_DEPTH });
        assert_eq!((e.line, e.column), (1, MAX_DEPTH + 1));
        assert_eq!(e.code(), "document_too_deep");
        // Objects count as arrays do.
        let objects = format!(
            "{}1{}",
            "{\"a\":".repeat(MAX_DEPTH + 1),
            "}".repeat(MAX_DEPTH + 1)
        );
        assert!(matches!(
            json_err(&objects).problem,
            Problem::TooDeep { .. }
        ));
        let objects = format!("{}1{}", "{\"a\":".repeat(MAX_DEPTH), "}".repeat(MAX_DEPTH));
        assert!(check_json(objects.as_bytes()).is_ok());
    }

    #[test]
    fn deep_values_are_located_by_path_and_line() {
        for n in [10_000, 100_000] {
            let doc = format!(
                "{{\"kind\": \"List\",\n \"items\": [{{\"kind\": \"Node\", \"metadata\": {{\"name\": {}}}}}]}}",
                deep("[", "]", n)
            );
            let e = json_err(&doc);
            assert_eq!(e.line, 2);
            assert!(
                e.path.starts_with("items[0].metadata.name[0][0]"),
                "{}",
                e.path
            );
            assert!(e.path.ends_with('…'), "{}", e.path);
            let message = e.to_string();
            assert!(message.contains("more than 100 levels"), "{message}");
            assert!(message.len() < 300, "{message}");
        }
    }

    #[test]
    fn brackets_inside_strings_do_not_count() {
        let doc = format!(
            "{{\"a\": \"{}\", \"b\": \"\\\"[{{\", \"c\": [1, \"]\"]}}",
            "[".repeat(1000)
        );
        assert!(check_json(doc.as_bytes()).is_ok());
    }

    #[test]
    fn repeated_keys_are_refused_wherever_they_are() {
        let e =
            json_err(r#"{"kind":"List","items":[{"metadata":{"name":"a","uid":"u","name":"b"}}]}"#);
        assert_eq!(e.problem, Problem::DuplicateKey { key: "name".into() });
        assert_eq!(e.path, "items[0].metadata");
        assert_eq!(e.code(), "duplicate_key");
        assert_eq!((e.line, e.column), (1, 59));
        // At the top level, and spelled with an escape.
        let e = json_err(r#"{"items": [], "it\u0065ms": []}"#);
        assert_eq!(
            e.problem,
            Problem::DuplicateKey {
                key: "items".into()
            }
        );
        assert_eq!(e.path, "");
        assert!(e.to_string().contains("the top level"), "{e}");
        // Inside a value nobody decodes.
        let e = json_err(r#"{"items":[{"data":{"x":[{"k":1},{"k":2,"k":3}]}}]}"#);
        assert_eq!(e.path, "items[0].data.x[1]");
    }

    #[test]
    fn same_keys_in_different_objects_are_fine() {
        let doc = r#"{"a":{"name":1},"b":{"name":2},"c":[{"name":3},{"name":4}],"name":5}"#;
        assert!(check_json(doc.as_bytes()).is_ok());
    }

    #[test]
    fn objects_with_many_keys_are_checked_with_a_set() {
        let keys: Vec<String> = (0..5000).map(|i| format!("\"k{i}\":{i}")).collect();
        let doc = format!("{{\"m\":{{{}}}}}", keys.join(","));
        assert!(check_json(doc.as_bytes()).is_ok());
        let doc = format!("{{\"m\":{{{},\"k17\":0}}}}", keys.join(","));
        let e = json_err(&doc);
        assert_eq!(e.problem, Problem::DuplicateKey { key: "k17".into() });
        assert_eq!(e.path, "m");
        // A nested object after a large one starts afresh.
        let doc = format!("{{\"m\":{{{}}},\"n\":{{\"k17\":1}}}}", keys.join(","));
        assert!(check_json(doc.as_bytes()).is_ok());
    }

    #[test]
    fn garbage_is_left_to_the_decoder() {
        for text in [
            "",
            "]]]}}}",
            "{\"a",
            "\"\\",
            "{\"a\":\"b\\",
            "{,,,\"a\"",
            "\u{feff}{}",
        ] {
            assert!(check_json(text.as_bytes()).is_ok(), "{text:?}");
        }
    }

    #[test]
    fn long_keys_are_shortened_in_messages() {
        let key = "k".repeat(1 << 20);
        let doc = format!("{{\"{key}\":1,\"{key}\":2}}");
        let e = json_err(&doc);
        let message = e.to_string();
        assert!(message.len() < 400, "{}", message.len());
        assert!(message.contains("(1048576 bytes)"), "{message}");
    }

    #[test]
    fn line_and_column_count_characters() {
        assert_eq!(line_col(b"ab\ncd", 4), (2, 2));
        assert_eq!(line_col("é[".as_bytes(), 2), (1, 2));
    }

    fn yaml(text: &str) -> Result<Value, YamlFailure> {
        yaml_value(serde_yaml::Deserializer::from_str(text))
    }

    fn yaml_structure(text: &str) -> StructureError {
        match yaml(text) {
            Err(YamlFailure::Structure(e)) => e,
            other => panic!("expected a structure error, got {other:?}"),
        }
    }

    #[test]
    fn yaml_reads_like_serde_json_value() {
        let text = "kind: List\nitems:\n- a: 1\n  b: [true, null, 1.5, -2, x]\n  c: {}\n";
        let expected: Value = serde_yaml::from_str(text).unwrap();
        assert_eq!(yaml(text).unwrap(), expected);
    }

    #[test]
    fn yaml_values_are_bounded_too() {
        // What `check_yaml` lets through can still nest deeper once aliases are expanded;
        // the decoder applies the same limit.
        let half = MAX_DEPTH / 2 + 1;
        let text = format!(
            "a: &x {}\nb: {}*x{}\n",
            deep("[", "]", half),
            "[".repeat(half),
            "]".repeat(half)
        );
        assert!(check_yaml(text.as_bytes()).is_ok());
        assert!(matches!(
            yaml_structure(&text).problem,
            Problem::TooDeep { .. }
        ));
        let e = yaml_structure("kind: List\nitems:\n- metadata:\n    name: a\n    name: b\n");
        assert_eq!(e.problem, Problem::DuplicateKey { key: "name".into() });
        assert_eq!(e.path, "items[0].metadata");
        let fits = format!("x: {}\n", deep("[", "]", MAX_DEPTH - 1));
        assert!(yaml(&fits).is_ok());
    }

    fn yaml_check_err(text: &str) -> StructureError {
        check_yaml(text.as_bytes()).expect_err("refused")
    }

    #[test]
    fn yaml_depth_is_bounded_in_flow_and_block_style() {
        for n in [MAX_DEPTH + 1, 10_000, 100_000] {
            let text = format!(
                "kind: List\nitems:\n- metadata:\n    name: {}\n",
                deep("[", "]", n)
            );
            let e = yaml_check_err(&text);
            assert_eq!(e.problem, Problem::TooDeep { limit: MAX_DEPTH });
            assert_eq!(e.line, 4);
            assert!(
                e.path.starts_with("items[0].metadata.name[0]"),
                "{}",
                e.path
            );
            let e = yaml_check_err(&format!(
                "{{kind: List, items: [{{metadata: {{labels: {}}}}}]}}",
                deep("{a: ", "}", n)
            ));
            assert!(
                e.path.starts_with("items[0].metadata.labels.a.a"),
                "{}",
                e.path
            );
        }
        let mut block = String::new();
        for level in 0..=MAX_DEPTH {
            block.push_str(&" ".repeat(level * 2));
            block.push_str("a:\n");
        }
        let e = yaml_check_err(&block);
        assert!(matches!(e.problem, Problem::TooDeep { .. }));
        assert_eq!(e.line, MAX_DEPTH + 1);
        let fits = format!("x: {}\n", deep("[", "]", MAX_DEPTH - 1));
        assert_eq!(check_yaml(fits.as_bytes()).unwrap().documents, 1);
    }

    #[test]
    fn yaml_repeated_keys_are_refused_where_they_are() {
        let e = yaml_check_err("kind: List\nitems:\n- metadata:\n    name: a\n    name: b\n");
        assert_eq!(e.problem, Problem::DuplicateKey { key: "name".into() });
        assert_eq!(e.path, "items[0].metadata");
        assert_eq!((e.line, e.column), (5, 5));
        // Quoted or not, it is the same key; in a large mapping too.
        let e = yaml_check_err("a: 1\n'a': 2\n");
        assert_eq!((e.line, e.path.as_str()), (2, ""));
        let mut many: String = (0..500).map(|i| format!("k{i}: {i}\n")).collect();
        assert!(check_yaml(many.as_bytes()).is_ok());
        many.push_str("k7: again\n");
        assert_eq!(yaml_check_err(&many).line, 501);
        // The same key in sibling mappings is fine.
        assert!(check_yaml(b"a: {x: 1}\nb: {x: 2}\nc: [{x: 1}, {x: 2}]\n").is_ok());
    }

    #[test]
    fn yaml_documents_are_counted() {
        let outline = |text: &str| check_yaml(text.as_bytes()).unwrap();
        assert_eq!(outline("").documents, 0);
        assert_eq!(outline("# only a comment\n").documents, 0);
        assert_eq!(outline("~\n").documents, 1);
        assert_eq!(outline("---\nkind: List\n").documents, 1);
        let two = outline("kind: List\nitems: []\n---\nkind: Node\n");
        assert_eq!(two.documents, 2);
        assert_eq!(two.second_document, Some((3, 1)));
        // A syntax error ends the count (the decoder reports it).
        assert_eq!(outline("a: [b\n---\nc: 1\n").documents, 1);
    }

    #[test]
    fn yaml_syntax_errors_stay_syntax_errors() {
        assert!(matches!(yaml("a: [b"), Err(YamlFailure::Syntax(_))));
        // What is not JSON stays refused: a key that is not a string.
        assert!(matches!(yaml("? [1]\n: x"), Err(YamlFailure::Syntax(_))));
    }

    #[test]
    fn big_yaml_integers_become_floats_like_json() {
        use serde::Deserialize as _;
        let big = "1180591620717411303424";
        // serde_json::Value alone refuses it.
        assert!(Value::deserialize(serde_yaml::Deserializer::from_str(big)).is_err());
        let json: Value = serde_json::from_str(big).unwrap();
        assert_eq!(yaml(big).unwrap(), json);
        assert_eq!(
            yaml(&format!("-{big}")).unwrap(),
            serde_json::json!(-1.1805916207174113e21)
        );
        assert_eq!(
            yaml("a: [1, -2, 1.5, x, true, null, {b: .inf}]").unwrap(),
            serde_json::json!({"a": [1, -2, 1.5, "x", true, null, {"b": null}]})
        );
    }
}
