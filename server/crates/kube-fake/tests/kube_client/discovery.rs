//! Discovery: `kube::Discovery` (classic and aggregated) shows exactly the enabled groups, with
//! scopes, verbs and subresources; `/version`; a client built from the fake's kubeconfig.

use std::collections::BTreeSet;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::GroupVersionKind;
use kube::discovery::{Discovery, Scope, verbs};
use rebalancer_kube_fake::{FakeApiServer, OptionalGroup};

use crate::common::client;

const CORE_GROUPS: [&str; 5] = [
    "",
    "coordination.k8s.io",
    "events.k8s.io",
    "policy",
    "scheduling.k8s.io",
];

fn group_names(discovery: &Discovery) -> BTreeSet<String> {
    discovery.groups().map(|g| g.name().to_string()).collect()
}

fn names(extra: &[&str]) -> BTreeSet<String> {
    CORE_GROUPS
        .iter()
        .chain(extra)
        .map(ToString::to_string)
        .collect()
}

#[tokio::test]
async fn discovery_without_optional_groups() {
    let server = FakeApiServer::start().await;
    let client = client(&server);
    let discovery = Discovery::new(client.clone()).run().await.unwrap();
    assert_eq!(group_names(&discovery), names(&[]));

    let (pods, caps) = discovery
        .resolve_gvk(&GroupVersionKind::gvk("", "v1", "Pod"))
        .unwrap();
    assert_eq!(pods.plural, "pods");
    assert_eq!(caps.scope, Scope::Namespaced);
    assert!(caps.supports_operation(verbs::WATCH));
    let subresources: BTreeSet<&str> = caps
        .subresources
        .iter()
        .map(|(ar, _)| ar.plural.as_str())
        .collect();
    assert_eq!(subresources, BTreeSet::from(["eviction", "status"]));
    let (eviction, eviction_caps) = caps
        .subresources
        .iter()
        .find(|(ar, _)| ar.plural == "eviction")
        .unwrap();
    assert_eq!(
        (eviction.group.as_str(), eviction.kind.as_str()),
        ("policy", "Eviction")
    );
    assert_eq!(eviction_caps.operations, ["create"]);

    let (_, node_caps) = discovery
        .resolve_gvk(&GroupVersionKind::gvk("", "v1", "Node"))
        .unwrap();
    assert_eq!(node_caps.scope, Scope::Cluster);
    let (_, ns_caps) = discovery
        .resolve_gvk(&GroupVersionKind::gvk("", "v1", "Namespace"))
        .unwrap();
    assert!(!ns_caps.supports_operation(verbs::DELETE_COLLECTION));
    for gvk in [
        GroupVersionKind::gvk("policy", "v1", "PodDisruptionBudget"),
        GroupVersionKind::gvk("scheduling.k8s.io", "v1", "PriorityClass"),
        GroupVersionKind::gvk("coordination.k8s.io", "v1", "Lease"),
        GroupVersionKind::gvk("events.k8s.io", "v1", "Event"),
        GroupVersionKind::gvk("", "v1", "PersistentVolumeClaim"),
        GroupVersionKind::gvk("", "v1", "Event"),
    ] {
        assert!(discovery.resolve_gvk(&gvk).is_some(), "{gvk:?}");
    }
    assert!(
        discovery
            .resolve_gvk(&GroupVersionKind::gvk(
                "metrics.k8s.io",
                "v1beta1",
                "NodeMetrics"
            ))
            .is_none()
    );

    let aggregated = Discovery::new(client.clone())
        .run_aggregated()
        .await
        .unwrap();
    assert_eq!(group_names(&aggregated), names(&[]));
    let (_, caps) = aggregated
        .resolve_gvk(&GroupVersionKind::gvk("", "v1", "Pod"))
        .unwrap();
    assert_eq!(caps.subresources.len(), 2);

    let version = client.apiserver_version().await.unwrap();
    assert_eq!(
        (version.major.as_str(), version.minor.as_str()),
        ("1", "33")
    );
}

#[tokio::test]
async fn discovery_with_optional_groups_and_enabling_later() {
    let server =
        FakeApiServer::start_with(&[OptionalGroup::Metrics, OptionalGroup::Reservation]).await;
    let client = client(&server);
    let discovery = Discovery::new(client.clone()).run().await.unwrap();
    assert_eq!(
        group_names(&discovery),
        names(&["metrics.k8s.io", "scheduling.koordinator.sh"])
    );
    let (_, metrics) = discovery
        .resolve_gvk(&GroupVersionKind::gvk(
            "metrics.k8s.io",
            "v1beta1",
            "PodMetrics",
        ))
        .unwrap();
    assert_eq!(metrics.operations, ["get", "list"]);
    let (_, reservations) = discovery
        .resolve_gvk(&GroupVersionKind::gvk(
            "scheduling.koordinator.sh",
            "v1alpha1",
            "Reservation",
        ))
        .unwrap();
    assert_eq!(reservations.scope, Scope::Cluster);
    assert_eq!(reservations.subresources.len(), 1);
    assert_eq!(reservations.subresources[0].0.plural, "status");

    server.enable_group(OptionalGroup::NodeMetric);
    server.enable_group(OptionalGroup::NodeResourceTopology);
    let all = names(&[
        "metrics.k8s.io",
        "scheduling.koordinator.sh",
        "slo.koordinator.sh",
        "topology.node.k8s.io",
    ]);
    let discovery = Discovery::new(client.clone()).run().await.unwrap();
    assert_eq!(group_names(&discovery), all);
    let aggregated = Discovery::new(client.clone())
        .run_aggregated()
        .await
        .unwrap();
    assert_eq!(group_names(&aggregated), all);
    let (_, nrt) = aggregated
        .resolve_gvk(&GroupVersionKind::gvk(
            "topology.node.k8s.io",
            "v1alpha1",
            "NodeResourceTopology",
        ))
        .unwrap();
    assert_eq!(nrt.scope, Scope::Cluster);
}

#[tokio::test]
async fn kubeconfig_builds_a_working_client() {
    let server = FakeApiServer::start().await;
    let kubeconfig = Kubeconfig::from_yaml(&server.kubeconfig("fake-ctx")).unwrap();
    assert_eq!(kubeconfig.current_context.as_deref(), Some("fake-ctx"));
    let options = KubeConfigOptions {
        context: Some("fake-ctx".into()),
        ..KubeConfigOptions::default()
    };
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .unwrap();
    assert_eq!(
        config.cluster_url.to_string().trim_end_matches('/'),
        server.url()
    );
    let client = kube::Client::try_from(config).unwrap();
    let before = server.request_count();
    client.apiserver_version().await.unwrap();
    assert_eq!(server.request_count(), before + 1);
}
