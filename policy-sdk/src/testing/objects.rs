//! The other objects of a test cluster: [`TestPdb`] (PodDisruptionBudgets with status) and
//! [`TestNamespace`] (labels for namespace selectors).
//!
//! Owns their builders only; snapshot rows are made in [`super::cluster`].

use super::selectors::{SelectorSpec, set_pair};
use super::*;

/// A PodDisruptionBudget with its status. Its selector is nil (selects nothing) until
/// `match_label`, `match_expression` or `select_all` is used; the status starts at zero.
#[derive(Debug, Clone)]
pub struct TestPdb {
    pub(super) namespace: String,
    pub(super) name: String,
    pub(super) selector: Option<SelectorSpec>,
    pub(super) disruptions_allowed: i32,
    pub(super) current_healthy: i32,
    pub(super) desired_healthy: i32,
    pub(super) expected_pods: i32,
    pub(super) unhealthy_policy: UnhealthyPodEvictionPolicy,
}

impl TestPdb {
    pub fn new(namespace: &str, name: &str) -> Self {
        TestPdb {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            selector: None,
            disruptions_allowed: 0,
            current_healthy: 0,
            desired_healthy: 0,
            expected_pods: 0,
            unhealthy_policy: UnhealthyPodEvictionPolicy::IfHealthyBudget,
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

    /// An empty selector: every pod of the namespace.
    pub fn select_all(mut self) -> Self {
        self.selector.get_or_insert_with(SelectorSpec::default);
        self
    }

    /// `status.disruptionsAllowed`.
    pub fn disruptions_allowed(mut self, n: i32) -> Self {
        self.disruptions_allowed = n;
        self
    }

    /// `status.currentHealthy` and `status.desiredHealthy`.
    pub fn healthy(mut self, current: i32, desired: i32) -> Self {
        self.current_healthy = current;
        self.desired_healthy = desired;
        self
    }

    /// `status.expectedPods`.
    pub fn expected_pods(mut self, n: i32) -> Self {
        self.expected_pods = n;
        self
    }

    /// `spec.unhealthyPodEvictionPolicy: AlwaysAllow`.
    pub fn always_allow_unhealthy(mut self) -> Self {
        self.unhealthy_policy = UnhealthyPodEvictionPolicy::AlwaysAllow;
        self
    }
}

/// A Namespace object with labels. Namespaces used by pods exist without labels unless declared.
#[derive(Debug, Clone)]
pub struct TestNamespace {
    pub(super) name: String,
    pub(super) labels: Vec<(String, String)>,
}

impl TestNamespace {
    pub fn new(name: &str) -> Self {
        TestNamespace {
            name: name.to_owned(),
            labels: Vec::new(),
        }
    }

    pub fn label(mut self, key: &str, value: &str) -> Self {
        set_pair(&mut self.labels, key, value);
        self
    }
}
