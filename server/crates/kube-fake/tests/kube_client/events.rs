//! Events published with `kube::runtime::events::Recorder`: the first is created, a repeat
//! becomes a series via a merge patch; both land in `events.k8s.io/v1`. Core v1 events are a
//! separate, equally plain resource.

use k8s_openapi::api::core::v1::{Event as CoreEvent, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::events::{Event as RecorderEvent, EventType, Recorder, Reporter};
use kube::{Resource, ResourceExt};
use rebalancer_kube_fake::{Access, FakeApiServer};
use serde_json::json;

use crate::common::{client, pod};

#[tokio::test]
async fn recorder_creates_then_patches_a_series() {
    let server = FakeApiServer::start().await;
    server.apply(pod("ns", "victim", json!({}), "n1"));
    let client = client(&server);
    let target: Pod = Api::namespaced(client.clone(), "ns")
        .get("victim")
        .await
        .unwrap();
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "rebalancer".into(),
            instance: None,
        },
    );
    let event = RecorderEvent {
        type_: EventType::Normal,
        reason: "Evicted".into(),
        note: Some("evicted by policy".into()),
        action: "Evict".into(),
        secondary: None,
    };
    let reference = target.object_ref(&());
    recorder.publish(&event, &reference).await.unwrap();
    recorder.publish(&event, &reference).await.unwrap();

    let events: Api<Event> = Api::namespaced(client.clone(), "ns");
    let list = events.list(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), 1);
    let stored = &list.items[0];
    assert_eq!(stored.reason.as_deref(), Some("Evicted"));
    assert_eq!(stored.reporting_controller.as_deref(), Some("rebalancer"));
    assert_eq!(
        stored.regarding.as_ref().unwrap().name.as_deref(),
        Some("victim")
    );
    assert_eq!(stored.series.as_ref().map(|s| s.count), Some(2));
    let access = |verb: &str| Access {
        verb: verb.into(),
        group: "events.k8s.io".into(),
        resource: "events".into(),
        subresource: String::new(),
    };
    let accesses = server.accesses();
    assert!(
        accesses.contains(&access("create")) && accesses.contains(&access("patch")),
        "{accesses:?}"
    );

    let core: Api<CoreEvent> = Api::namespaced(client, "ns");
    let core_event: CoreEvent = serde_json::from_value(json!({
        "metadata": {"name": "legacy"},
        "involvedObject": {"kind": "Pod", "name": "victim", "namespace": "ns"},
        "reason": "Evicted", "message": "m", "type": "Normal"
    }))
    .unwrap();
    core.create(&PostParams::default(), &core_event)
        .await
        .unwrap();
    let listed = core.list(&ListParams::default()).await.unwrap();
    assert_eq!(
        listed
            .items
            .iter()
            .map(ResourceExt::name_any)
            .collect::<Vec<_>>(),
        ["legacy"]
    );
}
