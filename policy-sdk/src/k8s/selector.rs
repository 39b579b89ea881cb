//! Label selectors, with the semantics of `k8s.io/apimachinery/pkg/labels` and
//! `metav1.LabelSelectorAsSelector`.
//!
//! Owns three things:
//! - matching an archived `metav1.LabelSelector` of the snapshot (PDB selectors, affinity and
//!   topology-spread terms) against archived labels, by interned ids ([`label_selector_matches`]);
//! - [`LabelSelectorSpec`], the owned, deserializable `metav1.LabelSelector` that policy and
//!   evictor args use, with apimachinery's validation;
//! - [`Selector`], the parsed form of a string selector (`labels.Parse`: `"k=v,k2!=x,k3 in (a,b),!k4"`),
//!   used by the policy-level and DefaultEvictor `nodeSelector`.
//!
//! Owned selectors are matched against the snapshot through [`ResolvedSelector`]: resolve once per
//! snapshot ([`Selector::resolve`]), then match by ids. A string that is not in the snapshot's
//! string table cannot be the key or value of any label in it.
//!
//! An invalid selector (one `LabelSelectorAsSelector` or `labels.NewRequirement` would reject)
//! matches nothing, which is what every Kubernetes caller does with the error. Must not do I/O.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::args::null_as_default;

use crate::model::{
    ArchivedKeyValue, ArchivedLabelSelector, ArchivedRequirement, ArchivedSelectorOperator,
    SelectorOperator, StrId,
};
use crate::policy::ArgError;
use crate::view::{Cluster, kv_get};

// ---------------------------------------------------------------------------------------------
// Archived selectors (snapshot objects)
// ---------------------------------------------------------------------------------------------

/// Whether an archived `metav1.LabelSelector` selects an object with `labels`.
///
/// An empty selector matches everything. `Gt`/`Lt`, `In`/`NotIn` without values and
/// `Exists`/`DoesNotExist` with values are invalid in a label selector: the selector then matches
/// nothing. A nil selector (`None` in the snapshot) is the caller's business: Kubernetes treats it
/// as matching nothing.
pub fn label_selector_matches(
    selector: &ArchivedLabelSelector,
    labels: &[ArchivedKeyValue],
) -> bool {
    selector
        .match_labels
        .iter()
        .all(|kv| kv_get(labels, kv.key.to_native()) == Some(kv.value.to_native()))
        && selector
            .match_expressions
            .iter()
            .all(|r| label_requirement_matches(r, labels))
}

/// [`label_selector_matches`] for an optional selector: `None` (nil) matches nothing.
pub fn optional_label_selector_matches(
    selector: Option<&ArchivedLabelSelector>,
    labels: &[ArchivedKeyValue],
) -> bool {
    selector.is_some_and(|s| label_selector_matches(s, labels))
}

/// The selector has neither matchLabels nor matchExpressions (it matches everything).
pub fn label_selector_is_empty(selector: &ArchivedLabelSelector) -> bool {
    selector.match_labels.is_empty() && selector.match_expressions.is_empty()
}

/// `LabelSelectorAsSelector` accepts the selector: every expression uses a label-selector operator
/// with the right number of values. An invalid selector matches nothing, but some callers (the
/// nodeFit anti-affinity check) treat it as an error instead.
pub fn label_selector_is_valid(selector: &ArchivedLabelSelector) -> bool {
    selector.match_expressions.iter().all(|r| match r.operator {
        ArchivedSelectorOperator::In | ArchivedSelectorOperator::NotIn => !r.values.is_empty(),
        ArchivedSelectorOperator::Exists | ArchivedSelectorOperator::DoesNotExist => {
            r.values.is_empty()
        }
        ArchivedSelectorOperator::Gt | ArchivedSelectorOperator::Lt => false,
    })
}

/// One `matchExpressions` entry of a label selector. `Gt`/`Lt` are not label-selector operators
/// and never match here (node-affinity requirements, which allow them, live in
/// [`crate::k8s::affinity`]).
pub fn label_requirement_matches(req: &ArchivedRequirement, labels: &[ArchivedKeyValue]) -> bool {
    let value = kv_get(labels, req.key.to_native());
    let values = &req.values;
    let contains = |v: StrId| values.iter().any(|x| x.to_native() == v);
    match req.operator {
        ArchivedSelectorOperator::In => !values.is_empty() && value.is_some_and(contains),
        ArchivedSelectorOperator::NotIn => !values.is_empty() && value.is_none_or(|v| !contains(v)),
        ArchivedSelectorOperator::Exists => values.is_empty() && value.is_some(),
        ArchivedSelectorOperator::DoesNotExist => values.is_empty() && value.is_none(),
        ArchivedSelectorOperator::Gt | ArchivedSelectorOperator::Lt => false,
    }
}

// ---------------------------------------------------------------------------------------------
// Owned label selector (args)
// ---------------------------------------------------------------------------------------------

/// `metav1.LabelSelector` as it appears in policy and evictor args.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LabelSelectorSpec {
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub match_labels: BTreeMap<String, String>,
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub match_expressions: Vec<LabelSelectorRequirementSpec>,
}

/// One `matchExpressions` entry: `{key, operator, values}`. The operator is kept as written so
/// that [`LabelSelectorSpec::validate`] can say what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LabelSelectorRequirementSpec {
    pub key: String,
    pub operator: String,
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub values: Vec<String>,
}

impl LabelSelectorSpec {
    /// A selector with only `matchLabels`.
    pub fn from_labels<'a>(labels: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        LabelSelectorSpec {
            match_labels: labels
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
            match_expressions: Vec::new(),
        }
    }

    /// No matchLabels and no matchExpressions: selects everything.
    pub fn is_empty(&self) -> bool {
        self.match_labels.is_empty() && self.match_expressions.is_empty()
    }

    /// apimachinery's `ValidateLabelSelector` plus what `LabelSelectorAsSelector` rejects: label
    /// keys and values, known operators, values required for `In`/`NotIn` and forbidden for
    /// `Exists`/`DoesNotExist`. `field` is the dotted path of the selector in the args.
    pub fn validate(&self, field: &str) -> Vec<ArgError> {
        let mut errors = Vec::new();
        for (key, value) in &self.match_labels {
            let path = format!("{field}.matchLabels");
            if let Err(e) = validate_label_key(key) {
                errors.push(ArgError::new(
                    &path,
                    format!("invalid label key {key:?}: {e}"),
                ));
            }
            if let Err(e) = validate_label_value(value) {
                errors.push(ArgError::new(
                    format!("{path}.{key}"),
                    format!("invalid label value {value:?}: {e}"),
                ));
            }
        }
        for (i, expr) in self.match_expressions.iter().enumerate() {
            let path = format!("{field}.matchExpressions[{i}]");
            if let Err(e) = validate_label_key(&expr.key) {
                errors.push(ArgError::new(
                    format!("{path}.key"),
                    format!("invalid label key {:?}: {e}", expr.key),
                ));
            }
            match parse_label_selector_operator(&expr.operator) {
                Some(SelectorOperator::In | SelectorOperator::NotIn) if expr.values.is_empty() => {
                    errors.push(ArgError::new(
                        format!("{path}.values"),
                        "must be specified when `operator` is 'In' or 'NotIn'",
                    ))
                }
                Some(SelectorOperator::Exists | SelectorOperator::DoesNotExist)
                    if !expr.values.is_empty() =>
                {
                    errors.push(ArgError::new(
                        format!("{path}.values"),
                        "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                    ))
                }
                Some(_) => {}
                None => errors.push(ArgError::new(
                    format!("{path}.operator"),
                    format!(
                        "unsupported value {:?}: supported values: \"In\", \"NotIn\", \"Exists\", \"DoesNotExist\"",
                        expr.operator
                    ),
                )),
            }
            for (j, value) in expr.values.iter().enumerate() {
                if let Err(e) = validate_label_value(value) {
                    errors.push(ArgError::new(
                        format!("{path}.values[{j}]"),
                        format!("invalid label value {value:?}: {e}"),
                    ));
                }
            }
        }
        errors
    }

    /// The selector as requirements (`LabelSelectorAsSelector`). Fails with the first problem
    /// [`LabelSelectorSpec::validate`] would report.
    pub fn to_selector(&self) -> Result<Selector, String> {
        if let Some(e) = self.validate("").into_iter().next() {
            let field = e.field.trim_start_matches('.');
            return Err(if field.is_empty() {
                e.message
            } else {
                format!("{field}: {}", e.message)
            });
        }
        let mut requirements =
            Vec::with_capacity(self.match_labels.len() + self.match_expressions.len());
        for (k, v) in &self.match_labels {
            requirements.push(LabelRequirement {
                key: k.clone(),
                operator: SelectorOperator::In,
                values: vec![v.clone()],
            });
        }
        for expr in &self.match_expressions {
            let operator = parse_label_selector_operator(&expr.operator).ok_or_else(|| {
                format!("{:?} is not a valid label selector operator", expr.operator)
            })?;
            let mut values = expr.values.clone();
            values.sort();
            values.dedup();
            requirements.push(LabelRequirement {
                key: expr.key.clone(),
                operator,
                values,
            });
        }
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(Selector { requirements })
    }

    /// Resolve against a snapshot; an invalid selector resolves to one that matches nothing.
    pub fn resolve(&self, cluster: Cluster<'_>) -> ResolvedSelector {
        match self.to_selector() {
            Ok(s) => s.resolve(cluster),
            Err(_) => ResolvedSelector::nothing(),
        }
    }

    /// Whether the selector matches `labels` (labels of an object in `cluster`). Resolves the
    /// selector on every call: for many objects, [`LabelSelectorSpec::resolve`] once instead.
    pub fn matches(&self, cluster: Cluster<'_>, labels: &[ArchivedKeyValue]) -> bool {
        self.resolve(cluster).matches(cluster, labels)
    }
}

fn parse_label_selector_operator(op: &str) -> Option<SelectorOperator> {
    match op {
        "In" => Some(SelectorOperator::In),
        "NotIn" => Some(SelectorOperator::NotIn),
        "Exists" => Some(SelectorOperator::Exists),
        "DoesNotExist" => Some(SelectorOperator::DoesNotExist),
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------------
// Label key / value syntax
// ---------------------------------------------------------------------------------------------

const QUALIFIED_NAME_MAX: usize = 63;
const DNS1123_SUBDOMAIN_MAX: usize = 253;

fn is_alnum(b: u8) -> bool {
    b.is_ascii_alphanumeric()
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
fn is_qualified_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && is_alnum(b[0])
        && is_alnum(b[b.len() - 1])
        && b.iter()
            .all(|&c| is_alnum(c) || c == b'-' || c == b'_' || c == b'.')
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*`
fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= DNS1123_SUBDOMAIN_MAX
        && s.split('.').all(|label| {
            let b = label.as_bytes();
            let ok = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
            !b.is_empty() && ok(b[0]) && ok(b[b.len() - 1]) && b.iter().all(|&c| ok(c) || c == b'-')
        })
}

/// A label key: an optional DNS-subdomain prefix and `/`, then a name of at most 63 characters
/// made of alphanumerics, `-`, `_` and `.`, starting and ending with an alphanumeric.
pub fn validate_label_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.split_once('/') {
        None => (None, key),
        Some((prefix, name)) => (Some(prefix), name),
    };
    if let Some(prefix) = prefix {
        if prefix.is_empty() {
            return Err("prefix part must be non-empty".into());
        }
        if !is_dns1123_subdomain(prefix) {
            return Err(format!(
                "prefix part {prefix:?} must be a lowercase DNS subdomain of at most {DNS1123_SUBDOMAIN_MAX} characters"
            ));
        }
        if name.contains('/') {
            return Err("a qualified name may contain at most one '/'".into());
        }
    }
    if name.is_empty() {
        return Err("name part must be non-empty".into());
    }
    if name.len() > QUALIFIED_NAME_MAX {
        return Err(format!(
            "name part must be no more than {QUALIFIED_NAME_MAX} characters"
        ));
    }
    if !is_qualified_name_part(name) {
        return Err("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character".into());
    }
    Ok(())
}

/// A label value: empty, or at most 63 alphanumerics, `-`, `_` and `.`, starting and ending with
/// an alphanumeric.
pub fn validate_label_value(value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Ok(());
    }
    if value.len() > QUALIFIED_NAME_MAX {
        return Err(format!(
            "must be no more than {QUALIFIED_NAME_MAX} characters"
        ));
    }
    if !is_qualified_name_part(value) {
        return Err("a valid label value must be empty or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character".into());
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Selector (parsed string selectors and converted label selectors)
// ---------------------------------------------------------------------------------------------

/// One requirement of a [`Selector`]. `k=v` / `k==v` are `In [v]`, `k!=v` is `NotIn [v]`; values
/// are sorted and deduplicated (a set, as in apimachinery). `Gt`/`Lt` hold one integer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelRequirement {
    pub key: String,
    pub operator: SelectorOperator,
    pub values: Vec<String>,
}

/// A label selector as requirements that are ANDed (`labels.Selector`). The empty selector
/// matches everything.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Selector {
    requirements: Vec<LabelRequirement>,
}

/// Why a string selector could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelectorParseError {
    /// The selector as given.
    pub input: String,
    /// What is wrong, in the words of `labels.Parse` where it has them.
    pub message: String,
}

impl fmt::Display for SelectorParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid label selector {:?}: {}",
            self.input, self.message
        )
    }
}

impl std::error::Error for SelectorParseError {}

impl Selector {
    /// The selector that matches everything.
    pub fn everything() -> Self {
        Selector::default()
    }

    /// Parse a selector string the way `labels.Parse` does:
    /// comma-separated requirements `key`, `!key`, `key=value`, `key==value`, `key!=value`,
    /// `key in (v1,v2)`, `key notin (v1,v2)`, `key>N`, `key<N`; whitespace between tokens is
    /// ignored; the empty string selects everything.
    pub fn parse(input: &str) -> Result<Self, SelectorParseError> {
        let err = |message: String| SelectorParseError {
            input: input.to_owned(),
            message,
        };
        let mut parser = Parser {
            items: lex(input),
            pos: 0,
        };
        let mut requirements = parser.parse().map_err(err)?;
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(Selector { requirements })
    }

    pub fn requirements(&self) -> &[LabelRequirement] {
        &self.requirements
    }

    /// No requirements: matches everything.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Match against labels given as a lookup function (`key → value`).
    pub fn matches_with<'s>(&self, get: impl Fn(&str) -> Option<&'s str>) -> bool {
        self.requirements.iter().all(|r| {
            let value = get(&r.key);
            let contains = |v: &str| r.values.iter().any(|x| x == v);
            match r.operator {
                SelectorOperator::In => value.is_some_and(contains),
                SelectorOperator::NotIn => value.is_none_or(|v| !contains(v)),
                SelectorOperator::Exists => value.is_some(),
                SelectorOperator::DoesNotExist => value.is_none(),
                SelectorOperator::Gt | SelectorOperator::Lt => {
                    let bound = r.values.first().and_then(|b| b.parse::<i64>().ok());
                    match (value.and_then(|v| v.parse::<i64>().ok()), bound) {
                        (Some(v), Some(b)) => compare(r.operator, v, b),
                        _ => false,
                    }
                }
            }
        })
    }

    /// Match against a label map.
    pub fn matches_map(&self, labels: &BTreeMap<String, String>) -> bool {
        self.matches_with(|k| labels.get(k).map(String::as_str))
    }

    /// Resolve the keys and values to the snapshot's string ids, once per snapshot.
    pub fn resolve(&self, cluster: Cluster<'_>) -> ResolvedSelector {
        let requirements = self
            .requirements
            .iter()
            .map(|r| ResolvedRequirement {
                key: cluster.lookup(&r.key),
                operator: r.operator,
                values: match r.operator {
                    SelectorOperator::In | SelectorOperator::NotIn => {
                        r.values.iter().filter_map(|v| cluster.lookup(v)).collect()
                    }
                    _ => Vec::new(),
                },
                bound: match r.operator {
                    SelectorOperator::Gt | SelectorOperator::Lt => r
                        .values
                        .first()
                        .and_then(|b| b.parse::<i64>().ok())
                        .unwrap_or(0),
                    _ => 0,
                },
            })
            .collect();
        ResolvedSelector {
            nothing: false,
            requirements,
        }
    }
}

fn compare(op: SelectorOperator, value: i64, bound: i64) -> bool {
    match op {
        SelectorOperator::Gt => value > bound,
        SelectorOperator::Lt => value < bound,
        _ => false,
    }
}

impl fmt::Display for Selector {
    /// The canonical string form (`labels.Selector.String()`), which [`Selector::parse`] reads back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            match r.operator {
                SelectorOperator::Exists => write!(f, "{}", r.key)?,
                SelectorOperator::DoesNotExist => write!(f, "!{}", r.key)?,
                SelectorOperator::In if r.values.len() == 1 => {
                    write!(f, "{}={}", r.key, r.values[0])?
                }
                SelectorOperator::NotIn if r.values.len() == 1 => {
                    write!(f, "{}!={}", r.key, r.values[0])?
                }
                SelectorOperator::In => write!(f, "{} in ({})", r.key, r.values.join(","))?,
                SelectorOperator::NotIn => write!(f, "{} notin ({})", r.key, r.values.join(","))?,
                SelectorOperator::Gt => write!(f, "{}>{}", r.key, r.values.join(""))?,
                SelectorOperator::Lt => write!(f, "{}<{}", r.key, r.values.join(""))?,
            }
        }
        Ok(())
    }
}

/// A [`Selector`] with keys and values replaced by the ids of one snapshot. Plain data: build it
/// once per snapshot and share it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResolvedSelector {
    /// Matches nothing at all (an invalid selector).
    nothing: bool,
    requirements: Vec<ResolvedRequirement>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct ResolvedRequirement {
    /// `None`: the key is in no label of the snapshot.
    key: Option<StrId>,
    operator: SelectorOperator,
    /// `In`/`NotIn` values present in the snapshot (absent ones cannot match).
    values: Vec<StrId>,
    /// `Gt`/`Lt` bound.
    bound: i64,
}

impl ResolvedSelector {
    pub fn everything() -> Self {
        ResolvedSelector::default()
    }

    pub fn nothing() -> Self {
        ResolvedSelector {
            nothing: true,
            requirements: Vec::new(),
        }
    }

    /// Matches every set of labels.
    pub fn is_everything(&self) -> bool {
        !self.nothing && self.requirements.is_empty()
    }

    /// Whether labels of an object in `cluster` match. `cluster` is only read for `Gt`/`Lt`,
    /// whose label values are compared as integers.
    pub fn matches(&self, cluster: Cluster<'_>, labels: &[ArchivedKeyValue]) -> bool {
        if self.nothing {
            return false;
        }
        self.requirements.iter().all(|r| {
            let value = r.key.and_then(|k| kv_get(labels, k));
            match r.operator {
                SelectorOperator::In => value.is_some_and(|v| r.values.contains(&v)),
                SelectorOperator::NotIn => value.is_none_or(|v| !r.values.contains(&v)),
                SelectorOperator::Exists => value.is_some(),
                SelectorOperator::DoesNotExist => value.is_none(),
                SelectorOperator::Gt | SelectorOperator::Lt => value
                    .and_then(|v| cluster.str(v).parse::<i64>().ok())
                    .is_some_and(|v| compare(r.operator, v, r.bound)),
            }
        })
    }
}

// ---------------------------------------------------------------------------------------------
// labels.Parse: lexer and parser
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    Identifier,
    In,
    NotIn,
    Comma,
    OpenPar,
    ClosedPar,
    Equals,
    DoubleEquals,
    NotEquals,
    DoesNotExist,
    GreaterThan,
    LessThan,
    EndOfString,
    Error,
}

fn is_whitespace(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\r' | '\n')
}

fn is_special_symbol(c: char) -> bool {
    matches!(c, '=' | '!' | '(' | ')' | ',' | '>' | '<')
}

fn special_token(s: &str) -> Option<Token> {
    Some(match s {
        "!" => Token::DoesNotExist,
        "!=" => Token::NotEquals,
        "(" => Token::OpenPar,
        ")" => Token::ClosedPar,
        "," => Token::Comma,
        "=" => Token::Equals,
        "==" => Token::DoubleEquals,
        ">" => Token::GreaterThan,
        "<" => Token::LessThan,
        _ => return None,
    })
}

/// All tokens up to and including `EndOfString` (or the first error).
fn lex(input: &str) -> Vec<(Token, String)> {
    let chars: Vec<char> = input.chars().collect();
    let mut items = Vec::new();
    let mut i = 0;
    loop {
        while i < chars.len() && is_whitespace(chars[i]) {
            i += 1;
        }
        if i >= chars.len() || chars[i] == '\0' {
            items.push((Token::EndOfString, String::new()));
            return items;
        }
        if is_special_symbol(chars[i]) {
            // Longest special symbol that is a token ("!=" rather than "!").
            let mut buffer = String::new();
            let mut last: Option<(Token, String)> = None;
            while i < chars.len() && is_special_symbol(chars[i]) {
                buffer.push(chars[i]);
                if let Some(tok) = special_token(&buffer) {
                    last = Some((tok, buffer.clone()));
                    i += 1;
                } else if last.is_some() {
                    break;
                } else {
                    i += 1;
                }
            }
            match last {
                Some(item) => items.push(item),
                None => {
                    items.push((
                        Token::Error,
                        format!("error expected: keyword found '{buffer}'"),
                    ));
                    return items;
                }
            }
        } else {
            let start = i;
            while i < chars.len()
                && !is_whitespace(chars[i])
                && !is_special_symbol(chars[i])
                && chars[i] != '\0'
            {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let tok = match word.as_str() {
                "in" => Token::In,
                "notin" => Token::NotIn,
                _ => Token::Identifier,
            };
            items.push((tok, word));
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    KeyAndOperator,
    Values,
}

struct Parser {
    items: Vec<(Token, String)>,
    pos: usize,
}

impl Parser {
    fn lookahead(&self, context: Context) -> (Token, String) {
        let (tok, lit) = self.items[self.pos.min(self.items.len() - 1)].clone();
        let tok = match (context, tok) {
            (Context::Values, Token::In | Token::NotIn) => Token::Identifier,
            _ => tok,
        };
        (tok, lit)
    }

    fn consume(&mut self, context: Context) -> (Token, String) {
        let item = self.lookahead(context);
        if self.pos < self.items.len() - 1 {
            self.pos += 1;
        }
        item
    }

    fn parse(&mut self) -> Result<Vec<LabelRequirement>, String> {
        let mut requirements = Vec::new();
        loop {
            let (tok, lit) = self.lookahead(Context::Values);
            match tok {
                Token::Identifier | Token::DoesNotExist => {
                    let r = self
                        .parse_requirement()
                        .map_err(|e| format!("unable to parse requirement: {e}"))?;
                    requirements.push(r);
                    let (t, l) = self.consume(Context::Values);
                    match t {
                        Token::EndOfString => return Ok(requirements),
                        Token::Comma => {
                            let (t2, l2) = self.lookahead(Context::Values);
                            if t2 != Token::Identifier && t2 != Token::DoesNotExist {
                                return Err(format!(
                                    "found '{l2}', expected: identifier after ','"
                                ));
                            }
                        }
                        _ => return Err(format!("found '{l}', expected: ',' or 'end of string'")),
                    }
                }
                Token::EndOfString => return Ok(requirements),
                Token::Error => return Err(lit),
                _ => {
                    return Err(format!(
                        "found '{lit}', expected: !, identifier, or 'end of string'"
                    ));
                }
            }
        }
    }

    fn parse_requirement(&mut self) -> Result<LabelRequirement, String> {
        let (key, unary) = self.parse_key_and_infer_operator()?;
        if let Some(op) = unary {
            return new_requirement(key, op, Vec::new());
        }
        let (tok, lit) = self.consume(Context::KeyAndOperator);
        let (operator, single) = match tok {
            Token::In => (SelectorOperator::In, false),
            Token::NotIn => (SelectorOperator::NotIn, false),
            Token::Equals | Token::DoubleEquals => (SelectorOperator::In, true),
            Token::NotEquals => (SelectorOperator::NotIn, true),
            Token::GreaterThan => (SelectorOperator::Gt, true),
            Token::LessThan => (SelectorOperator::Lt, true),
            Token::Error => return Err(lit),
            _ => {
                return Err(format!(
                    "found '{lit}', expected: in, notin, =, ==, !=, gt, lt"
                ));
            }
        };
        let values = if single {
            self.parse_exact_value()?
        } else {
            self.parse_values()?
        };
        new_requirement(key, operator, values)
    }

    fn parse_key_and_infer_operator(
        &mut self,
    ) -> Result<(String, Option<SelectorOperator>), String> {
        let mut operator = None;
        let (mut tok, mut lit) = self.consume(Context::Values);
        if tok == Token::DoesNotExist {
            operator = Some(SelectorOperator::DoesNotExist);
            (tok, lit) = self.consume(Context::Values);
        }
        if tok == Token::Error {
            return Err(lit);
        }
        if tok != Token::Identifier {
            return Err(format!("found '{lit}', expected: identifier"));
        }
        validate_label_key(&lit).map_err(|e| format!("key: invalid value {lit:?}: {e}"))?;
        let (next, _) = self.lookahead(Context::Values);
        if (next == Token::EndOfString || next == Token::Comma) && operator.is_none() {
            operator = Some(SelectorOperator::Exists);
        }
        Ok((lit, operator))
    }

    fn parse_exact_value(&mut self) -> Result<Vec<String>, String> {
        let (tok, _) = self.lookahead(Context::Values);
        if tok == Token::EndOfString || tok == Token::Comma {
            return Ok(vec![String::new()]);
        }
        let (tok, lit) = self.consume(Context::Values);
        match tok {
            Token::Identifier => Ok(vec![lit]),
            Token::Error => Err(lit),
            _ => Err(format!("found '{lit}', expected: identifier")),
        }
    }

    fn parse_values(&mut self) -> Result<Vec<String>, String> {
        let (tok, lit) = self.consume(Context::Values);
        if tok != Token::OpenPar {
            return Err(format!("found '{lit}' expected: '('"));
        }
        let (tok, lit) = self.lookahead(Context::Values);
        match tok {
            Token::Identifier | Token::Comma => {
                let values = self.parse_identifiers_list()?;
                let (tok, lit) = self.consume(Context::Values);
                if tok != Token::ClosedPar {
                    return Err(format!("found '{lit}', expected: ')'"));
                }
                Ok(values)
            }
            Token::ClosedPar => {
                self.consume(Context::Values);
                Ok(vec![String::new()])
            }
            Token::Error => Err(lit),
            _ => Err(format!("found '{lit}', expected: ',', ')' or identifier")),
        }
    }

    fn parse_identifiers_list(&mut self) -> Result<Vec<String>, String> {
        let mut values: Vec<String> = Vec::new();
        loop {
            let (tok, lit) = self.consume(Context::Values);
            match tok {
                Token::Identifier => {
                    values.push(lit);
                    let (tok2, lit2) = self.lookahead(Context::Values);
                    match tok2 {
                        Token::Comma => continue,
                        Token::ClosedPar => return Ok(values),
                        _ => return Err(format!("found '{lit2}', expected: ',' or ')'")),
                    }
                }
                Token::Comma => {
                    if values.is_empty() {
                        values.push(String::new()); // "(,"
                    }
                    let (tok2, _) = self.lookahead(Context::Values);
                    if tok2 == Token::ClosedPar {
                        values.push(String::new()); // ",)"
                        return Ok(values);
                    }
                    if tok2 == Token::Comma {
                        self.consume(Context::Values);
                        values.push(String::new()); // ",,"
                    }
                }
                Token::Error => return Err(lit),
                _ => return Err(format!("found '{lit}', expected: ',', or identifier")),
            }
        }
    }
}

/// `labels.NewRequirement`: values as a set, and the per-operator rules.
fn new_requirement(
    key: String,
    operator: SelectorOperator,
    mut values: Vec<String>,
) -> Result<LabelRequirement, String> {
    values.sort();
    values.dedup();
    match operator {
        SelectorOperator::In | SelectorOperator::NotIn => {
            if values.is_empty() {
                return Err(
                    "values: for 'in', 'notin' operators, values set can't be empty".into(),
                );
            }
        }
        SelectorOperator::Exists | SelectorOperator::DoesNotExist => {
            if !values.is_empty() {
                return Err(
                    "values: values set must be empty for exists and does not exist".into(),
                );
            }
        }
        SelectorOperator::Gt | SelectorOperator::Lt => {
            if values.len() != 1 {
                return Err(
                    "values: for 'Gt', 'Lt' operators, exactly one value is required".into(),
                );
            }
            if values[0].parse::<i64>().is_err() {
                return Err(format!(
                    "values[0]: invalid value {:?}: for 'Gt', 'Lt' operators, the value must be an integer",
                    values[0]
                ));
            }
        }
    }
    if !matches!(operator, SelectorOperator::Gt | SelectorOperator::Lt) {
        for (i, v) in values.iter().enumerate() {
            validate_label_value(v)
                .map_err(|e| format!("values[{i}]: invalid value {v:?}: {e}"))?;
        }
    }
    Ok(LabelRequirement {
        key,
        operator,
        values,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::SnapshotBuilder;
    use crate::model::{KeyValue, LabelSelector, Node, Requirement, to_bytes};

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn parse_and_match_table() {
        let web_a = labels(&[("app", "web"), ("zone", "a"), ("gen", "5")]);
        let db_b = labels(&[("app", "db"), ("zone", "b")]);
        let none = labels(&[]);
        // (selector, matches web_a, matches db_b, matches none)
        let cases: &[(&str, bool, bool, bool)] = &[
            ("", true, true, true),
            ("app=web", true, false, false),
            ("app==web", true, false, false),
            ("app = web", true, false, false),
            ("app!=web", false, true, true),
            ("app in (web,db)", true, true, false),
            ("app in (web, cache)", true, false, false),
            ("app notin (web)", false, true, true),
            ("zone", true, true, false),
            ("!zone", false, false, true),
            ("app=web,zone=a", true, false, false),
            ("app=web,zone=b", false, false, false),
            ("gen>4", true, false, false),
            ("gen<5", false, false, false),
            ("gen<6", true, false, false),
            ("app>1", false, false, false),
            ("app=", false, false, false),
            ("app in ()", false, false, false),
            ("  app  in  ( web )  ,  !missing ", true, false, false),
            ("k8s.io/role!=x", true, true, true),
            ("in=web", false, false, false),
        ];
        for &(s, a, b, n) in cases {
            let sel = Selector::parse(s).unwrap_or_else(|e| panic!("{s:?}: {e}"));
            assert_eq!(sel.matches_map(&web_a), a, "{s:?} on web_a");
            assert_eq!(sel.matches_map(&db_b), b, "{s:?} on db_b");
            assert_eq!(sel.matches_map(&none), n, "{s:?} on none");
        }
    }

    #[test]
    fn parse_empty_values_forms() {
        let sel = Selector::parse("k in (,a)").unwrap();
        assert_eq!(
            sel.requirements()[0].values,
            vec!["".to_string(), "a".to_string()]
        );
        let sel = Selector::parse("k in (a,,b)").unwrap();
        assert_eq!(sel.requirements()[0].values, vec!["", "a", "b"]);
        assert!(sel.matches_map(&labels(&[("k", "")])));
        let sel = Selector::parse("k=").unwrap();
        assert!(sel.matches_map(&labels(&[("k", "")])));
        assert!(!sel.matches_map(&labels(&[("k", "x")])));
    }

    #[test]
    fn parse_errors_are_clear() {
        let cases: &[(&str, &str)] = &[
            ("x=a y=b", "found 'y', expected: ',' or 'end of string'"),
            ("x=a||y=b", "invalid value \"a||y\""),
            ("x=a,", "identifier after ','"),
            (",x", "expected: !, identifier"),
            ("k in a", "expected: '('"),
            ("k in (a", "expected: ',' or ')'"),
            ("k notin ()x", "expected: ',' or 'end of string'"),
            ("k>a", "must be an integer"),
            ("k>", "must be an integer"),
            ("!k=v", "expected: ',' or 'end of string'"),
            ("k=v=w", "expected: ',' or 'end of string'"),
            ("-bad=1", "name part must"),
            ("a/b/c=1", "at most one '/'"),
            ("k=-v", "label value"),
            ("k & v", "expected: in, notin"),
        ];
        for &(s, want) in cases {
            let e = Selector::parse(s).expect_err(s);
            assert!(e.to_string().contains(want), "{s:?}: {e}");
            assert!(e.to_string().contains(&format!("{s:?}")), "{e}");
        }
    }

    #[test]
    fn display_round_trips() {
        for s in ["a=b,c!=d,e in (f,g),h notin (i,j),k,!l,m>3,n<4", ""] {
            let sel = Selector::parse(s).unwrap();
            let again = Selector::parse(&sel.to_string()).unwrap();
            assert_eq!(sel, again, "{s}");
        }
    }

    #[test]
    fn spec_validation() {
        let spec: LabelSelectorSpec = serde_json::from_str(
            r#"{"matchLabels":{"app":"web","bad key":"x"},
                "matchExpressions":[
                  {"key":"a","operator":"In"},
                  {"key":"b","operator":"Exists","values":["x"]},
                  {"key":"c","operator":"Gt","values":["1"]},
                  {"key":"d","operator":"NotIn","values":["ok","not ok"]}]}"#,
        )
        .unwrap();
        let errors = spec.validate("labelSelector");
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            vec![
                "labelSelector.matchLabels",
                "labelSelector.matchExpressions[0].values",
                "labelSelector.matchExpressions[1].values",
                "labelSelector.matchExpressions[2].operator",
                "labelSelector.matchExpressions[3].values[1]",
            ],
            "{errors:?}"
        );
        assert!(spec.to_selector().is_err());

        let unknown = serde_json::from_str::<LabelSelectorSpec>(r#"{"matchLabel":{}}"#);
        assert!(unknown.unwrap_err().to_string().contains("unknown field"));
        let nulls: LabelSelectorSpec =
            serde_json::from_str(r#"{"matchLabels":null,"matchExpressions":null}"#).unwrap();
        assert!(nulls.is_empty());
    }

    /// A cluster with one node per label set, for matching archived labels.
    fn cluster_bytes(label_sets: &[&[(&str, &str)]], extra: &[&str]) -> rkyv::util::AlignedVec {
        let mut b = SnapshotBuilder::new(1, 0);
        for s in extra {
            b.intern(s);
        }
        for (i, set) in label_sets.iter().enumerate() {
            let name = b.intern(&format!("n{i}"));
            let labels = set
                .iter()
                .map(|(k, v)| KeyValue {
                    key: b.intern(k),
                    value: b.intern(v),
                })
                .collect();
            b.snapshot_mut().nodes.push(Node {
                name,
                labels,
                ..Node::default()
            });
        }
        to_bytes(&b.finish()).unwrap()
    }

    #[test]
    fn resolved_selector_matches_archived_labels() {
        let bytes = cluster_bytes(
            &[
                &[("app", "web"), ("zone", "a"), ("gen", "7")],
                &[("app", "db")],
                &[],
            ],
            &[],
        );
        let cluster = Cluster::from_bytes(&bytes).unwrap();
        let l = |i: u32| &cluster.node(i).raw.labels[..];
        let cases: &[(&str, [bool; 3])] = &[
            ("", [true, true, true]),
            ("app=web", [true, false, false]),
            ("app!=web", [false, true, true]),
            ("app in (web,db)", [true, true, false]),
            ("app in (nowhere)", [false, false, false]),
            ("app notin (nowhere)", [true, true, true]),
            ("missing", [false, false, false]),
            ("!missing", [true, true, true]),
            ("missing!=x", [true, true, true]),
            ("gen>6", [true, false, false]),
            ("gen<7", [false, false, false]),
            ("zone,app=web", [true, false, false]),
        ];
        for (s, want) in cases {
            let resolved = Selector::parse(s).unwrap().resolve(cluster);
            let got = [0, 1, 2].map(|i| resolved.matches(cluster, l(i)));
            assert_eq!(&got, want, "{s:?}");
        }
        assert!(!ResolvedSelector::nothing().matches(cluster, l(2)));
        assert!(ResolvedSelector::everything().is_everything());

        let spec = LabelSelectorSpec {
            match_labels: labels(&[("app", "web")]),
            match_expressions: vec![LabelSelectorRequirementSpec {
                key: "zone".into(),
                operator: "NotIn".into(),
                values: vec!["b".into()],
            }],
        };
        assert!(spec.matches(cluster, l(0)));
        assert!(!spec.matches(cluster, l(1)));
        let invalid = LabelSelectorSpec {
            match_expressions: vec![LabelSelectorRequirementSpec {
                key: "zone".into(),
                operator: "Bogus".into(),
                values: vec![],
            }],
            ..LabelSelectorSpec::default()
        };
        assert!(
            !invalid.matches(cluster, l(2)),
            "invalid selectors match nothing"
        );
    }

    #[test]
    fn archived_label_selector_operators() {
        // Selectors are stored on a PDB; labels on nodes.
        let mut b = SnapshotBuilder::new(1, 0);
        let (app, web, db, zone, a) = (
            b.intern("app"),
            b.intern("web"),
            b.intern("db"),
            b.intern("zone"),
            b.intern("a"),
        );
        let name = b.intern("n0");
        b.snapshot_mut().nodes.push(Node {
            name,
            labels: vec![
                KeyValue {
                    key: app,
                    value: web,
                },
                KeyValue {
                    key: zone,
                    value: a,
                },
            ],
            ..Node::default()
        });
        let req = |key, operator, values: Vec<StrId>| Requirement {
            key,
            operator,
            values,
        };
        use SelectorOperator::*;
        let selectors: Vec<(LabelSelector, bool)> = vec![
            (LabelSelector::default(), true),
            (
                LabelSelector {
                    match_labels: vec![KeyValue {
                        key: app,
                        value: web,
                    }],
                    ..Default::default()
                },
                true,
            ),
            (
                LabelSelector {
                    match_labels: vec![KeyValue {
                        key: app,
                        value: db,
                    }],
                    ..Default::default()
                },
                false,
            ),
            (sel(vec![req(app, In, vec![db, web])]), true),
            (sel(vec![req(app, In, vec![])]), false),
            (sel(vec![req(app, NotIn, vec![db])]), true),
            (sel(vec![req(app, NotIn, vec![web])]), false),
            (sel(vec![req(db, NotIn, vec![web])]), true),
            (sel(vec![req(zone, Exists, vec![])]), true),
            (sel(vec![req(zone, Exists, vec![a])]), false),
            (sel(vec![req(db, DoesNotExist, vec![])]), true),
            (sel(vec![req(zone, DoesNotExist, vec![])]), false),
            (sel(vec![req(zone, Gt, vec![a])]), false),
            (
                sel(vec![req(zone, Exists, vec![]), req(app, In, vec![db])]),
                false,
            ),
        ];
        fn sel(match_expressions: Vec<Requirement>) -> LabelSelector {
            LabelSelector {
                match_labels: vec![],
                match_expressions,
            }
        }
        let mut snapshot = b.finish();
        snapshot.pdbs = selectors
            .iter()
            .map(|(s, _)| crate::model::Pdb {
                selector: Some(s.clone()),
                ..Default::default()
            })
            .collect();
        snapshot.pdbs.push(crate::model::Pdb::default());
        let bytes = to_bytes(&snapshot).unwrap();
        let cluster = Cluster::from_bytes(&bytes).unwrap();
        let node_labels = &cluster.node(0).raw.labels;
        for (i, (_, want)) in selectors.iter().enumerate() {
            let archived = cluster.archive().pdbs[i].selector.as_ref().unwrap();
            assert_eq!(
                label_selector_matches(archived, node_labels),
                *want,
                "selector {i}"
            );
        }
        let nil = cluster.archive().pdbs[selectors.len()].selector.as_ref();
        assert!(!optional_label_selector_matches(nil, node_labels));
        assert!(label_selector_is_empty(
            cluster.archive().pdbs[0].selector.as_ref().unwrap()
        ));
    }

    #[test]
    fn label_key_and_value_syntax() {
        for ok in ["a", "app.kubernetes.io/name", "x_y-z.1", "example.com/A"] {
            assert!(validate_label_key(ok).is_ok(), "{ok}");
        }
        for bad in ["", "/a", "a/", "-a", "a-", "Example.com/a", &"x".repeat(64)] {
            assert!(validate_label_key(bad).is_err(), "{bad}");
        }
        for ok in ["", "v", "v-1.2_3"] {
            assert!(validate_label_value(ok).is_ok(), "{ok}");
        }
        for bad in ["-v", "v ", &"x".repeat(64)] {
            assert!(validate_label_value(bad).is_err(), "{bad}");
        }
    }
}
