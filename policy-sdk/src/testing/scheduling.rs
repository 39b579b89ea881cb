//! The scheduling terms a [`super::TestPod`] can carry: node affinity terms ([`TestTerm`]),
//! pod (anti-)affinity terms ([`TestAffinityTerm`]) and topology spread constraints
//! ([`TestSpread`]), each with the `build` that interns it into a [`SnapshotBuilder`].
//!
//! Must not know about pods themselves (that is [`super::pod`]).

use super::selectors::{SelectorSpec, requirement};
use super::*;
use crate::build::SnapshotBuilder;
use crate::model::{NodeSelectorTerm, PodAffinityTerm, TopologySpreadConstraint};

/// A term of node affinity: expressions on labels and fields, ANDed.
#[derive(Debug, Clone, Default)]
pub struct TestTerm {
    pub(super) exprs: Vec<(String, SelectorOperator, Vec<String>)>,
    pub(super) fields: Vec<(String, SelectorOperator, Vec<String>)>,
}

impl TestTerm {
    pub fn new() -> Self {
        TestTerm::default()
    }

    /// A label requirement (`zone In [a, b]`).
    pub fn expr(mut self, key: &str, operator: SelectorOperator, values: &[&str]) -> Self {
        self.exprs.push((key.to_owned(), operator, owned(values)));
        self
    }

    /// A field requirement (`metadata.name In [n1]`).
    pub fn field(mut self, key: &str, operator: SelectorOperator, values: &[&str]) -> Self {
        self.fields.push((key.to_owned(), operator, owned(values)));
        self
    }

    pub(super) fn build(&self, b: &mut SnapshotBuilder) -> NodeSelectorTerm {
        NodeSelectorTerm {
            match_expressions: self
                .exprs
                .iter()
                .map(|(k, o, v)| requirement(b, k, *o, v))
                .collect(),
            match_fields: self
                .fields
                .iter()
                .map(|(k, o, v)| requirement(b, k, *o, v))
                .collect(),
        }
    }
}

/// A pod (anti-)affinity term. Without `match_label`/`match_expression`/`select_all` its label
/// selector is nil and selects nothing, as in Kubernetes.
#[derive(Debug, Clone)]
pub struct TestAffinityTerm {
    pub(super) topology_key: String,
    pub(super) selector: Option<SelectorSpec>,
    pub(super) namespaces: Vec<String>,
    pub(super) match_label_keys: Vec<String>,
}

impl TestAffinityTerm {
    pub fn new(topology_key: &str) -> Self {
        TestAffinityTerm {
            topology_key: topology_key.to_owned(),
            selector: None,
            namespaces: Vec::new(),
            match_label_keys: Vec::new(),
        }
    }

    pub fn match_label(mut self, key: &str, value: &str) -> Self {
        SelectorSpec::add_label(&mut self.selector, key, value);
        self
    }

    pub fn match_expression(
        mut self,
        key: &str,
        operator: SelectorOperator,
        values: &[&str],
    ) -> Self {
        SelectorSpec::add_expression(&mut self.selector, key, operator, values);
        self
    }

    /// An empty (non-nil) selector: every pod of the term's namespaces.
    pub fn select_all(mut self) -> Self {
        self.selector.get_or_insert_with(SelectorSpec::default);
        self
    }

    /// `namespaces` of the term (default: the pod's own namespace).
    pub fn namespaces(mut self, namespaces: &[&str]) -> Self {
        self.namespaces = owned(namespaces);
        self
    }

    pub fn match_label_keys(mut self, keys: &[&str]) -> Self {
        self.match_label_keys = owned(keys);
        self
    }

    pub(super) fn build(&self, b: &mut SnapshotBuilder) -> PodAffinityTerm {
        PodAffinityTerm {
            label_selector: self.selector.as_ref().map(|s| s.build(b)),
            namespaces: self.namespaces.iter().map(|n| b.intern(n)).collect(),
            namespace_selector: None,
            topology_key: b.intern(&self.topology_key),
            match_label_keys: self.match_label_keys.iter().map(|k| b.intern(k)).collect(),
            mismatch_label_keys: Vec::new(),
        }
    }
}

/// A topology spread constraint (`DoNotSchedule` unless [`TestSpread::schedule_anyway`]).
#[derive(Debug, Clone)]
pub struct TestSpread {
    pub(super) max_skew: i32,
    pub(super) topology_key: String,
    pub(super) when_unsatisfiable: WhenUnsatisfiable,
    pub(super) selector: Option<SelectorSpec>,
    pub(super) min_domains: Option<i32>,
    pub(super) node_affinity_policy: Option<InclusionPolicy>,
    pub(super) node_taints_policy: Option<InclusionPolicy>,
    pub(super) match_label_keys: Vec<String>,
}

impl TestSpread {
    pub fn new(max_skew: i32, topology_key: &str) -> Self {
        TestSpread {
            max_skew,
            topology_key: topology_key.to_owned(),
            when_unsatisfiable: WhenUnsatisfiable::DoNotSchedule,
            selector: None,
            min_domains: None,
            node_affinity_policy: None,
            node_taints_policy: None,
            match_label_keys: Vec::new(),
        }
    }

    pub fn schedule_anyway(mut self) -> Self {
        self.when_unsatisfiable = WhenUnsatisfiable::ScheduleAnyway;
        self
    }

    pub fn match_label(mut self, key: &str, value: &str) -> Self {
        SelectorSpec::add_label(&mut self.selector, key, value);
        self
    }

    pub fn match_expression(
        mut self,
        key: &str,
        operator: SelectorOperator,
        values: &[&str],
    ) -> Self {
        SelectorSpec::add_expression(&mut self.selector, key, operator, values);
        self
    }

    pub fn min_domains(mut self, n: i32) -> Self {
        self.min_domains = Some(n);
        self
    }

    pub fn node_affinity_policy(mut self, policy: InclusionPolicy) -> Self {
        self.node_affinity_policy = Some(policy);
        self
    }

    pub fn node_taints_policy(mut self, policy: InclusionPolicy) -> Self {
        self.node_taints_policy = Some(policy);
        self
    }

    pub fn match_label_keys(mut self, keys: &[&str]) -> Self {
        self.match_label_keys = owned(keys);
        self
    }

    pub(super) fn build(&self, b: &mut SnapshotBuilder) -> TopologySpreadConstraint {
        TopologySpreadConstraint {
            max_skew: self.max_skew,
            topology_key: b.intern(&self.topology_key),
            when_unsatisfiable: self.when_unsatisfiable,
            label_selector: self.selector.as_ref().map(|s| s.build(b)),
            min_domains: self.min_domains,
            node_affinity_policy: self.node_affinity_policy,
            node_taints_policy: self.node_taints_policy,
            match_label_keys: self.match_label_keys.iter().map(|k| b.intern(k)).collect(),
        }
    }
}
