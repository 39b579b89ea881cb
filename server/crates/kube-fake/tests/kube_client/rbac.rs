//! RBAC from the repository's own `deploy/rbac.yaml`, enforced through kube-rs for the
//! service account `rebalancer/rebalancer`: what the manifest grants is allowed (cluster-wide
//! lists and watches, evictions, its Lease in its namespace only), the rest answers the real
//! 403, an unknown token 401, and discovery is open to every authenticated user.

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{Api, EvictParams, ListParams, PostParams, WatchEvent, WatchParams};
use kube::discovery::Discovery;
use rebalancer_kube_fake::{Access, FakeApiServer};
use serde_json::json;

use crate::common::{api_error, client, client_with_token, next, pod};

const TOKEN: &str = "rebalancer-sa-token";

fn manifest() -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../deploy/rbac.yaml");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

fn lease(namespace: &str) -> Lease {
    serde_json::from_value(
        json!({"metadata": {"name": "rebalancer-east", "namespace": namespace},
        "spec": {"holderIdentity": "me"}}),
    )
    .unwrap()
}

fn access(verb: &str, group: &str, resource: &str, subresource: &str) -> Access {
    Access {
        verb: verb.into(),
        group: group.into(),
        resource: resource.into(),
        subresource: subresource.into(),
    }
}

#[tokio::test]
async fn the_deployed_manifest_is_enforced() {
    let server = FakeApiServer::start().await;
    server
        .add_service_account("rebalancer", "rebalancer", TOKEN, &manifest())
        .unwrap();
    server.apply(pod("shop", "web-1", json!({"app": "web"}), "n1"));
    let sa = client_with_token(&server, TOKEN).await;

    // Discovery and the version probe: non-resource URLs every authenticated user may get.
    sa.apiserver_version().await.unwrap();
    let discovery = Discovery::new(sa.clone()).run().await.unwrap();
    assert!(discovery.has_group("policy"));

    // Cluster-wide list and watch of pods.
    let pods: Api<Pod> = Api::all(sa.clone());
    let list = pods.list(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), 1);
    let rv = list.metadata.resource_version.unwrap();
    let mut watch = pods
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();

    // An eviction (create of pods/eviction) in any namespace.
    let shop: Api<Pod> = Api::namespaced(sa.clone(), "shop");
    assert_eq!(
        shop.evict("web-1", &EvictParams::default())
            .await
            .unwrap()
            .code,
        201
    );
    assert!(matches!(
        next(&mut watch).await.unwrap(),
        WatchEvent::Modified(_)
    ));

    // Granted: a get of a pod (the backend reads a pod fresh before evicting it).
    shop.get("web-1").await.unwrap();
    // Not granted: an update of a pod, a get of a node (only list/watch), a Secret.
    let mut web_1 = shop.get("web-1").await.unwrap();
    web_1.metadata.labels = Some([("app".to_owned(), "other".to_owned())].into());
    let status = api_error(shop.replace("web-1", &PostParams::default(), &web_1).await);
    assert_eq!((status.code, status.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        status.message,
        r#"pods "web-1" is forbidden: User "system:serviceaccount:rebalancer:rebalancer" cannot update resource "pods" in API group "" in the namespace "shop""#
    );
    let details = status.details.unwrap();
    assert_eq!(
        (details.name.as_str(), details.kind.as_str()),
        ("web-1", "pods")
    );
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(sa.clone());
    let status = api_error(nodes.get("n1").await);
    assert_eq!(status.code, 403);
    assert_eq!(
        status.message,
        r#"nodes "n1" is forbidden: User "system:serviceaccount:rebalancer:rebalancer" cannot get resource "nodes" in API group "" at the cluster scope"#
    );
    let secrets: Api<Secret> = Api::namespaced(sa.clone(), "rebalancer");
    let status = api_error(secrets.get("token").await);
    assert_eq!(status.code, 403);
    assert_eq!(
        status.message,
        r#"secrets "token" is forbidden: User "system:serviceaccount:rebalancer:rebalancer" cannot get resource "secrets" in API group "" in the namespace "rebalancer""#
    );

    // The Lease Role holds in its namespace only.
    let default_leases: Api<Lease> = Api::namespaced(sa.clone(), "default");
    let status = api_error(
        default_leases
            .create(&PostParams::default(), &lease("default"))
            .await,
    );
    assert_eq!(status.code, 403);
    assert_eq!(
        status.message,
        r#"leases.coordination.k8s.io is forbidden: User "system:serviceaccount:rebalancer:rebalancer" cannot create resource "leases" in API group "coordination.k8s.io" in the namespace "default""#
    );
    let own_leases: Api<Lease> = Api::namespaced(sa.clone(), "rebalancer");
    own_leases
        .create(&PostParams::default(), &lease("rebalancer"))
        .await
        .unwrap();
    own_leases.get("rebalancer-east").await.unwrap();
    let all_leases: Api<Lease> = Api::all(sa.clone());
    let status = api_error(all_leases.list(&ListParams::default()).await);
    assert!(
        status.message.ends_with(
            r#"cannot list resource "leases" in API group "coordination.k8s.io" at the cluster scope"#
        ),
        "{}",
        status.message
    );

    assert_eq!(
        server.denied(),
        [
            (access("update", "", "pods", ""), "shop".to_string()),
            (access("get", "", "nodes", ""), String::new()),
            (access("get", "", "secrets", ""), "rebalancer".to_string()),
            (
                access("create", "coordination.k8s.io", "leases", ""),
                "default".to_string()
            ),
            (
                access("list", "coordination.k8s.io", "leases", ""),
                String::new()
            ),
        ]
    );
    let by_sa = server.accesses_by(TOKEN);
    assert!(by_sa.contains(&access("create", "", "pods", "eviction")));
    assert!(by_sa.contains(&access("watch", "", "pods", "")));
    assert!(server.accesses_by("fake-token").is_empty());
}

#[tokio::test]
async fn unknown_tokens_are_unauthorized_and_the_admin_token_is_not_restricted() {
    let server = FakeApiServer::start().await;
    server
        .add_service_account("rebalancer", "rebalancer", TOKEN, &manifest())
        .unwrap();
    server.apply(pod("shop", "web-1", json!({}), "n1"));
    let stranger = client_with_token(&server, "not-a-token").await;
    let pods: Api<Pod> = Api::namespaced(stranger.clone(), "shop");
    let status = api_error(pods.get("web-1").await);
    assert_eq!((status.code, status.reason.as_str()), (401, "Unauthorized"));
    assert_eq!(status.message, "Unauthorized");
    assert!(stranger.apiserver_version().await.is_err());

    let admin = client_with_token(&server, "fake-token").await;
    let secrets: Api<Secret> = Api::namespaced(admin, "rebalancer");
    // Not served by the fake: 404, not 403.
    assert_eq!(api_error(secrets.get("token").await).code, 404);
    let anonymous: Api<Pod> = Api::namespaced(client(&server), "shop");
    anonymous.get("web-1").await.unwrap();
    assert!(server.denied().is_empty());
}

#[tokio::test]
async fn manifests_that_do_not_hold_are_refused_with_the_document_at_fault() {
    let server = FakeApiServer::start().await;
    let err = server
        .add_service_account(
            "ops",
            "sa",
            "ops-token",
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: b}\n\
             roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}\n\
             subjects: [{kind: ServiceAccount, name: sa, namespace: ops}]\n",
        )
        .unwrap_err();
    assert_eq!(
        err,
        "service account ops/sa: ClusterRoleBinding b: roleRef ClusterRole \"view\" is not defined in the manifest (kube-fake knows only the manifest's roles)"
    );
    assert!(
        server
            .add_service_account("ops", "sa", "fake-token", &manifest())
            .is_err()
    );
}
