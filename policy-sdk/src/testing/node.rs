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
}
