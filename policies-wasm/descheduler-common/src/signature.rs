//! Integer encodings of selector pieces, for the cache keys plugins intern (equal selectors, equal
//! keys): [`push_requirements`] and [`push_node_selector_term`].
//!
//! The encoding only has to be injective within one snapshot; it is never stored or compared
//! across runs. Must not interpret what it encodes (matching is the SDK's `k8s` module).

use rebalancer_policy_sdk::model::{
    ArchivedNodeSelectorTerm, ArchivedRequirement, ArchivedSelectorOperator,
};

/// `reqs` as: their count, then per requirement its key, operator, value count and values.
pub fn push_requirements(out: &mut Vec<u32>, reqs: &[ArchivedRequirement]) {
    out.push(reqs.len() as u32);
    for r in reqs {
        let operator = match r.operator {
            ArchivedSelectorOperator::In => 0,
            ArchivedSelectorOperator::NotIn => 1,
            ArchivedSelectorOperator::Exists => 2,
            ArchivedSelectorOperator::DoesNotExist => 3,
            ArchivedSelectorOperator::Gt => 4,
            ArchivedSelectorOperator::Lt => 5,
        };
        out.extend([r.key.to_native(), operator, r.values.len() as u32]);
        out.extend(r.values.iter().map(|v| v.to_native()));
    }
}

/// A node selector term: its `matchExpressions`, then its `matchFields`.
pub fn push_node_selector_term(out: &mut Vec<u32>, term: &ArchivedNodeSelectorTerm) {
    push_requirements(out, &term.match_expressions);
    push_requirements(out, &term.match_fields);
}
