//! descheduler's eviction order (`SortPodsBasedOnPriorityLowToHigh`) as a sort key, and the
//! `prefer-no-eviction` annotation it reads.
//!
//! Used by LowNodeUtilization, HighNodeUtilization and RemovePodsViolatingInterPodAntiAffinity,
//! which all sort the pods they may evict this way. Must not filter pods, only order them.

use rebalancer_policy_sdk::PodRef;
use rebalancer_policy_sdk::model::{QosClass, StrId};
use rebalancer_policy_sdk::view::kv_get;

/// descheduler's `descheduler.alpha.kubernetes.io/prefer-no-eviction` annotation.
pub const PREFER_NO_EVICTION: &str = "descheduler.alpha.kubernetes.io/prefer-no-eviction";

/// Sort key: priority ascending with unset first, then QoS BestEffort < Burstable < Guaranteed,
/// then pods without prefer-no-eviction first (descheduler's `SortPodsBasedOnPriorityLowToHigh`).
/// `prefer_no_eviction` is the interned [`PREFER_NO_EVICTION`] (`None`: no object carries it).
/// Use with a stable sort (`sort_by_cached_key`), as descheduler's sort is stable too.
pub fn eviction_order(pod: PodRef<'_>, prefer_no_eviction: Option<StrId>) -> (bool, i32, u8, bool) {
    let priority = pod.priority();
    let qos = match pod.qos() {
        QosClass::BestEffort => 0,
        QosClass::Burstable => 1,
        QosClass::Guaranteed => 2,
    };
    let prefers_staying =
        prefer_no_eviction.is_some_and(|key| kv_get(pod.annotations(), key).is_some());
    (
        priority.is_some(),
        priority.unwrap_or(0),
        qos,
        prefers_staying,
    )
}

#[cfg(test)]
mod tests {
    use rebalancer_policy_sdk::testing::*;

    use super::*;

    #[test]
    fn low_priority_best_effort_and_willing_pods_go_first() {
        let pod = |name: &str| TestPod::new("default", name).on_node("n1");
        let cluster = TestCluster::new().node(TestNode::new("n1")).pods([
            pod("guaranteed").cpu("1").memory("1Gi").guaranteed(),
            pod("prio-10").priority(10),
            pod("prefers-staying").prefer_no_eviction(),
            pod("burstable").cpu("100m"),
            pod("prio-minus-5").priority(-5),
            pod("best-effort"),
        ]);
        let session = cluster.session();
        let c = session.cluster();
        let key = c.lookup(PREFER_NO_EVICTION);
        let mut ids: Vec<u32> = c.pods().map(|p| p.id).collect();
        ids.sort_by_cached_key(|&p| eviction_order(c.pod(p), key));
        let names: Vec<&str> = ids.iter().map(|&p| c.pod(p).name()).collect();
        assert_eq!(
            names,
            [
                "best-effort",
                "prefers-staying",
                "burstable",
                "guaranteed",
                "prio-minus-5",
                "prio-10"
            ]
        );
    }
}
