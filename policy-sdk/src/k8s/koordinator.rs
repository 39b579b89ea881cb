//! Koordinator's pod classes (`apis/extension/qos_utils.go`, `priority.go`, `priority_utils.go`),
//! shared by the Koordinator-style policies: the QoS class (`koordinator.sh/qosClass`) and the
//! priority class (`koordinator.sh/priority-class`, else `spec.priority`'s band, else derived from
//! the QoS class).

use crate::model::QosClass;
use crate::view::PodRef;

/// The pod label naming the Koordinator QoS class.
pub const LABEL_QOS: &str = "koordinator.sh/qosClass";
/// The pod label naming the Koordinator priority class.
pub const LABEL_PRIORITY_CLASS: &str = "koordinator.sh/priority-class";

/// A Koordinator QoS class (`LSE`, `LSR`, `LS`, `BE`, `SYSTEM`; [`KoordQos::None`] when absent or
/// unrecognised).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KoordQos {
    Lse,
    Lsr,
    Ls,
    Be,
    System,
    None,
}

impl KoordQos {
    /// `GetPodQoSClassByName`: an unknown name is [`KoordQos::None`].
    pub fn from_name(name: &str) -> Self {
        match name {
            "LSE" => Self::Lse,
            "LSR" => Self::Lsr,
            "LS" => Self::Ls,
            "BE" => Self::Be,
            "SYSTEM" => Self::System,
            _ => Self::None,
        }
    }

    /// The label value (empty for [`KoordQos::None`]).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Lse => "LSE",
            Self::Lsr => "LSR",
            Self::Ls => "LS",
            Self::Be => "BE",
            Self::System => "SYSTEM",
            Self::None => "",
        }
    }

    /// `GetPodQoSClassRaw`: the label only (the scheduler's cpuset gate reads this).
    pub fn raw(pod: &PodRef<'_>) -> Self {
        pod.label(LABEL_QOS).map_or(Self::None, Self::from_name)
    }

    /// `GetPodQoSClassWithDefault`: the label, else Guaranteed → LSR, Burstable → LS,
    /// BestEffort → BE.
    pub fn of(pod: &PodRef<'_>) -> Self {
        match Self::raw(pod) {
            Self::None => match pod.qos() {
                QosClass::Guaranteed => Self::Lsr,
                QosClass::Burstable => Self::Ls,
                QosClass::BestEffort => Self::Be,
            },
            q => q,
        }
    }
}

/// A Koordinator priority class; the derived order is the eviction order of Koordinator's
/// `PodSorter` (free < batch < mid < prod < none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PriorityClass {
    Free,
    Batch,
    Mid,
    Prod,
    None,
}

impl PriorityClass {
    /// `GetPodPriorityClassByName`: an unknown name is [`PriorityClass::None`].
    pub fn from_name(name: &str) -> Self {
        match name {
            "koord-prod" => Self::Prod,
            "koord-mid" => Self::Mid,
            "koord-batch" => Self::Batch,
            "koord-free" => Self::Free,
            _ => Self::None,
        }
    }

    /// The label value (`"none"` for [`PriorityClass::None`], as Koordinator's logs print it).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Prod => "koord-prod",
            Self::Mid => "koord-mid",
            Self::Batch => "koord-batch",
            Self::Free => "koord-free",
            Self::None => "none",
        }
    }

    /// The band a `spec.priority` value falls in (prod 9000–9999, mid 7000–7999, batch
    /// 5000–5999, free 3000–3999), else [`PriorityClass::None`].
    pub fn from_priority(priority: i32) -> Self {
        match priority {
            9000..=9999 => Self::Prod,
            7000..=7999 => Self::Mid,
            5000..=5999 => Self::Batch,
            3000..=3999 => Self::Free,
            _ => Self::None,
        }
    }

    /// `GetPodPriorityClassRaw`: the label if present (an unknown value is none, without falling
    /// back), else `spec.priority`'s band.
    pub fn raw(pod: &PodRef<'_>) -> Self {
        match pod.label(LABEL_PRIORITY_CLASS) {
            Some(name) => Self::from_name(name),
            None => pod.priority().map_or(Self::None, Self::from_priority),
        }
    }

    /// `GetPodPriorityClassWithDefault`: the raw class, else derived from the QoS class with
    /// defaults (SYSTEM, LSE, LSR, LS → prod; BE → batch). In a cluster without Koordinator's
    /// labels every pod that is not BestEffort is therefore prod.
    pub fn of(pod: &PodRef<'_>) -> Self {
        match Self::raw(pod) {
            Self::None => match KoordQos::of(pod) {
                KoordQos::System | KoordQos::Lse | KoordQos::Lsr | KoordQos::Ls => Self::Prod,
                KoordQos::Be => Self::Batch,
                KoordQos::None => Self::None,
            },
            class => class,
        }
    }
}

#[cfg(all(test, feature = "host"))]
mod tests {
    use super::*;
    use crate::testing::{TestCluster, TestNode, TestPod};

    #[test]
    fn classes_follow_labels_then_priority_bands_then_kubernetes_qos() {
        let mut cluster = TestCluster::new().node(TestNode::new("n1"));
        let pods = [
            // (pod, raw qos, qos, raw class, class)
            TestPod::new("default", "guaranteed")
                .on_node("n1")
                .cpu("1")
                .memory("1Gi")
                .guaranteed(),
            TestPod::new("default", "burstable")
                .on_node("n1")
                .cpu("100m"),
            TestPod::new("default", "besteffort").on_node("n1"),
            TestPod::new("default", "lse")
                .on_node("n1")
                .label(LABEL_QOS, "LSE"),
            TestPod::new("default", "bogus-qos")
                .on_node("n1")
                .label(LABEL_QOS, "gold"),
            TestPod::new("default", "mid-band")
                .on_node("n1")
                .priority(7100),
            TestPod::new("default", "label-wins")
                .on_node("n1")
                .priority(9500)
                .label(LABEL_PRIORITY_CLASS, "koord-free"),
            TestPod::new("default", "bad-label")
                .on_node("n1")
                .priority(9500)
                .label(LABEL_PRIORITY_CLASS, "platinum"),
        ];
        for pod in pods {
            cluster = cluster.pod(pod);
        }
        let bytes = crate::model::to_bytes(&cluster.snapshot()).unwrap();
        let view = crate::view::Cluster::from_bytes(&bytes).unwrap();
        let got: Vec<_> = view
            .pods()
            .map(|p| {
                (
                    p.name().to_string(),
                    KoordQos::raw(&p),
                    KoordQos::of(&p),
                    PriorityClass::raw(&p),
                    PriorityClass::of(&p),
                )
            })
            .collect();
        use KoordQos as Q;
        use PriorityClass as C;
        let want = [
            ("guaranteed", Q::None, Q::Lsr, C::None, C::Prod),
            ("burstable", Q::None, Q::Ls, C::None, C::Prod),
            ("besteffort", Q::None, Q::Be, C::None, C::Batch),
            ("lse", Q::Lse, Q::Lse, C::None, C::Prod),
            ("bogus-qos", Q::None, Q::Be, C::None, C::Batch),
            ("mid-band", Q::None, Q::Be, C::Mid, C::Mid),
            ("label-wins", Q::None, Q::Be, C::Free, C::Free),
            ("bad-label", Q::None, Q::Be, C::None, C::Batch),
        ];
        for (got, want) in got.iter().zip(want) {
            assert_eq!(
                (got.0.as_str(), got.1, got.2, got.3, got.4),
                want,
                "classes of {}",
                got.0
            );
        }
        assert!(C::Free < C::Batch && C::Batch < C::Mid && C::Mid < C::Prod && C::Prod < C::None);
    }
}
