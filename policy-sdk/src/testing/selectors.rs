//! Small pieces the builders share: label selectors under construction (`SelectorSpec`), selector
//! requirements and key/value lists interned into a [`SnapshotBuilder`].
//!
//! Private to `testing`; must not grow public API (the public builders are in the sibling files).

use super::*;
use crate::build::SnapshotBuilder;
use crate::model::{KeyValue, LabelSelector, Requirement};

/// A `metav1.LabelSelector` under construction.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct SelectorSpec {
    pub(super) labels: Vec<(String, String)>,
    pub(super) exprs: Vec<(String, SelectorOperator, Vec<String>)>,
}

impl SelectorSpec {
    /// `matchLabels[key] = value` on `selector`, which is created (empty) first if needed; what
    /// every builder's `match_label` does.
    pub(super) fn add_label(selector: &mut Option<SelectorSpec>, key: &str, value: &str) {
        selector
            .get_or_insert_with(SelectorSpec::default)
            .labels
            .push((key.to_owned(), value.to_owned()));
    }

    /// One `matchExpressions` entry on `selector`, created first if needed.
    pub(super) fn add_expression(
        selector: &mut Option<SelectorSpec>,
        key: &str,
        operator: SelectorOperator,
        values: &[&str],
    ) {
        selector
            .get_or_insert_with(SelectorSpec::default)
            .exprs
            .push((key.to_owned(), operator, owned(values)));
    }

    pub(super) fn build(&self, b: &mut SnapshotBuilder) -> LabelSelector {
        LabelSelector {
            match_labels: self
                .labels
                .iter()
                .map(|(k, v)| KeyValue {
                    key: b.intern(k),
                    value: b.intern(v),
                })
                .collect(),
            match_expressions: self
                .exprs
                .iter()
                .map(|(k, op, vs)| requirement(b, k, *op, vs))
                .collect(),
        }
    }
}

pub(super) fn requirement(
    b: &mut SnapshotBuilder,
    key: &str,
    operator: SelectorOperator,
    values: &[String],
) -> Requirement {
    Requirement {
        key: b.intern(key),
        operator,
        values: values.iter().map(|v| b.intern(v)).collect(),
    }
}

pub(super) fn kvs(b: &mut SnapshotBuilder, pairs: &[(String, String)]) -> Vec<KeyValue> {
    pairs
        .iter()
        .map(|(k, v)| KeyValue {
            key: b.intern(k),
            value: b.intern(v),
        })
        .collect()
}

/// Set `key` in a key/value list, replacing an earlier value.
pub(super) fn set_pair(list: &mut Vec<(String, String)>, key: &str, value: &str) {
    match list.iter_mut().find(|(k, _)| k == key) {
        Some((_, v)) => *v = value.to_owned(),
        None => list.push((key.to_owned(), value.to_owned())),
    }
}
