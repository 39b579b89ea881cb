//! [`TestNode`]: a hand-built node (labels, taints, allocatable, readiness, schedulability).
//!
//! Owns the node builder only; turning it into snapshot rows is [`super::cluster`].

use super::selectors::set_pair;
use super::*;

/// A node: 4 cpu, 16Gi memory, 110 pods, Ready and schedulable unless told otherwise, labelled
/// `kubernetes.io/hostname=<name>`.
#[derive(Debug, Clone)]
pub struct TestNode {
    pub(super) name: String,
    pub(super) labels: Vec<(String, String)>,
    pub(super) taints: Vec<(String, String, TaintEffect)>,
    pub(super) allocatable: Vec<(String, String)>,
    pub(super) unschedulable: bool,
    pub(super) ready: bool,
    pub(super) annotations: Vec<(String, String)>,
    /// Measured usage: the node's, the system's, raw allocatable, where from, how old.
    pub(super) usage: Vec<(String, String)>,
    pub(super) system_usage: Vec<(String, String)>,
    pub(super) gone_pods_usage: Vec<(String, String)>,
    pub(super) raw_allocatable: Vec<(String, String)>,
    pub(super) usage_source: UsageSource,
    pub(super) usage_age_ms: Option<i64>,
    pub(super) usage_window_ms: Option<i64>,
}

impl TestNode {
    pub fn new(name: &str) -> Self {
        TestNode {
            name: name.to_owned(),
            labels: vec![("kubernetes.io/hostname".into(), name.to_owned())],
            taints: Vec::new(),
            allocatable: vec![
                ("cpu".into(), "4".into()),
                ("memory".into(), "16Gi".into()),
                ("pods".into(), "110".into()),
            ],
            unschedulable: false,
            ready: true,
            annotations: Vec::new(),
            usage: Vec::new(),
            system_usage: Vec::new(),
            gone_pods_usage: Vec::new(),
            raw_allocatable: Vec::new(),
            usage_source: UsageSource::None,
            usage_age_ms: Some(0),
            usage_window_ms: None,
        }
    }

    /// Allocatable cpu (a quantity: `"4"`, `"3500m"`).
    pub fn cpu(self, quantity: &str) -> Self {
        self.allocatable("cpu", quantity)
    }

    /// Allocatable memory (`"16Gi"`).
    pub fn memory(self, quantity: &str) -> Self {
        self.allocatable("memory", quantity)
    }

    /// Allocatable pod slots.
    pub fn pods(self, count: u32) -> Self {
        self.allocatable("pods", &count.to_string())
    }

    /// Allocatable amount of any resource (`"nvidia.com/gpu"`, `"2"`).
    pub fn allocatable(mut self, resource: &str, quantity: &str) -> Self {
        set_pair(&mut self.allocatable, resource, quantity);
        self
    }

    pub fn label(mut self, key: &str, value: &str) -> Self {
        set_pair(&mut self.labels, key, value);
        self
    }

    pub fn taint(mut self, key: &str, value: &str, effect: TaintEffect) -> Self {
        self.taints.push((key.to_owned(), value.to_owned(), effect));
        self
    }

    /// Cordoned (`spec.unschedulable`).
    pub fn unschedulable(mut self) -> Self {
        self.unschedulable = true;
        self
    }

    /// The Ready condition is not True.
    pub fn not_ready(mut self) -> Self {
        self.ready = false;
        self
    }

    pub fn annotation(mut self, key: &str, value: &str) -> Self {
        set_pair(&mut self.annotations, key, value);
        self
    }

    /// The node's measured usage of `resource` (`"cpu"`, `"3"`), as a NodeMetric reports it
    /// (measured at the snapshot time unless [`TestNode::usage_age_ms`] says otherwise).
    pub fn usage(mut self, resource: &str, quantity: &str) -> Self {
        set_pair(&mut self.usage, resource, quantity);
        if self.usage_source == UsageSource::None {
            self.usage_source = UsageSource::NodeMetric;
        }
        self
    }

    /// Usage outside pods (NodeMetric `systemUsage`).
    pub fn system_usage(mut self, resource: &str, quantity: &str) -> Self {
        set_pair(&mut self.system_usage, resource, quantity);
        self
    }

    /// Usage reported for pods no longer in the cluster.
    pub fn gone_pods_usage(mut self, resource: &str, quantity: &str) -> Self {
        set_pair(&mut self.gone_pods_usage, resource, quantity);
        self
    }

    /// The `node.koordinator.sh/raw-allocatable` amount of `resource`.
    pub fn raw_allocatable(mut self, resource: &str, quantity: &str) -> Self {
        set_pair(&mut self.raw_allocatable, resource, quantity);
        self
    }

    /// Where the usage comes from (NodeMetric by default once usage is set).
    pub fn usage_source(mut self, source: UsageSource) -> Self {
        self.usage_source = source;
        self
    }

    /// How long before the snapshot time the usage was measured (`None`: not said).
    pub fn usage_age_ms(mut self, age: Option<i64>) -> Self {
        self.usage_age_ms = age;
        self
    }

    /// The window the usage averages over.
    pub fn usage_window_ms(mut self, window: Option<i64>) -> Self {
        self.usage_window_ms = window;
        self
    }
}
