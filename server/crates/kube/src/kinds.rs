//! The kinds a Kubernetes cluster is watched for, and how.
//!
//! Owns the table of watched resources: the six kinds the snapshot models (always watched) and
//! the optional ones, watched only where discovery shows the API server serves them
//! (metrics.k8s.io, Koordinator's NodeMetric and Reservation, NodeResourceTopology).

use kube::core::ApiResource;

/// How a kind's objects are followed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Follow {
    /// kube-rs watcher: list, then watch from the list's resourceVersion.
    Watch,
    /// Listed periodically: the API serves no watch (metrics.k8s.io, like metrics-server).
    Poll,
}

/// One watched resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WatchedKind {
    pub kind: &'static str,
    pub group: &'static str,
    pub version: &'static str,
    pub plural: &'static str,
    pub namespaced: bool,
    /// Watched only when discovery shows the API server serves it.
    pub optional: bool,
    pub follow: Follow,
}

impl WatchedKind {
    const fn required(
        kind: &'static str,
        group: &'static str,
        version: &'static str,
        plural: &'static str,
        namespaced: bool,
    ) -> WatchedKind {
        WatchedKind {
            kind,
            group,
            version,
            plural,
            namespaced,
            optional: false,
            follow: Follow::Watch,
        }
    }

    const fn optional(
        kind: &'static str,
        group: &'static str,
        version: &'static str,
        plural: &'static str,
        follow: Follow,
    ) -> WatchedKind {
        WatchedKind {
            kind,
            group,
            version,
            plural,
            namespaced: false,
            optional: true,
            follow,
        }
    }

    /// `v1` for the core group, `group/version` otherwise.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_owned()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    pub fn api_resource(&self) -> ApiResource {
        ApiResource {
            group: self.group.to_owned(),
            version: self.version.to_owned(),
            api_version: self.api_version(),
            kind: self.kind.to_owned(),
            plural: self.plural.to_owned(),
        }
    }
}

/// Every kind Rebalancer follows in a cluster.
pub const WATCHED: [WatchedKind; 11] = [
    WatchedKind::required("Node", "", "v1", "nodes", false),
    WatchedKind::required("Pod", "", "v1", "pods", true),
    WatchedKind::required(
        "PodDisruptionBudget",
        "policy",
        "v1",
        "poddisruptionbudgets",
        true,
    ),
    WatchedKind::required("Namespace", "", "v1", "namespaces", false),
    WatchedKind::required(
        "PriorityClass",
        "scheduling.k8s.io",
        "v1",
        "priorityclasses",
        false,
    ),
    WatchedKind::required(
        "PersistentVolumeClaim",
        "",
        "v1",
        "persistentvolumeclaims",
        true,
    ),
    WatchedKind::optional(
        "NodeMetrics",
        "metrics.k8s.io",
        "v1beta1",
        "nodes",
        Follow::Poll,
    ),
    WatchedKind {
        namespaced: true,
        ..WatchedKind::optional(
            "PodMetrics",
            "metrics.k8s.io",
            "v1beta1",
            "pods",
            Follow::Poll,
        )
    },
    WatchedKind::optional(
        "NodeMetric",
        "slo.koordinator.sh",
        "v1alpha1",
        "nodemetrics",
        Follow::Watch,
    ),
    WatchedKind::optional(
        "NodeResourceTopology",
        "topology.node.k8s.io",
        "v1alpha1",
        "noderesourcetopologies",
        Follow::Watch,
    ),
    WatchedKind::optional(
        "Reservation",
        "scheduling.koordinator.sh",
        "v1alpha1",
        "reservations",
        Follow::Watch,
    ),
];

/// The optional groups discovery is asked about.
pub fn optional_groups() -> Vec<&'static str> {
    let mut groups: Vec<&'static str> = WATCHED
        .iter()
        .filter(|k| k.optional)
        .map(|k| k.group)
        .collect();
    groups.dedup();
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_consistent() {
        let required: Vec<&str> = WATCHED
            .iter()
            .filter(|k| !k.optional)
            .map(|k| k.kind)
            .collect();
        let modelled: Vec<&str> = rebalancer_cluster::ObjectKind::ALL
            .iter()
            .map(|k| k.as_str())
            .collect();
        assert_eq!(required, modelled, "every modelled kind is watched");
        for k in WATCHED.iter().filter(|k| !k.optional) {
            let modelled = rebalancer_cluster::ObjectKind::from_kind(k.kind).unwrap();
            assert!(modelled.accepts_api_version(&k.api_version()), "{}", k.kind);
            assert_eq!(modelled.is_namespaced(), k.namespaced, "{}", k.kind);
        }
        assert_eq!(
            optional_groups(),
            [
                "metrics.k8s.io",
                "slo.koordinator.sh",
                "topology.node.k8s.io",
                "scheduling.koordinator.sh"
            ]
        );
        assert_eq!(WATCHED[2].api_version(), "policy/v1");
        assert_eq!(WATCHED[0].api_version(), "v1");
    }
}
