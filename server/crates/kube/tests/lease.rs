//! One actor per cluster: two Lease loops against the fake API server (optimistic concurrency
//! on resourceVersion, expiry measured by the observer, take-over when the holder stops).

mod common;

use std::time::Duration;

use common::*;
use rebalancer_kube::{Leadership, LeaseOptions};
use rebalancer_kube_fake::FakeApiServer;

fn quick(identity: &str) -> LeaseOptions {
    LeaseOptions {
        duration: Duration::from_secs(1),
        renew_deadline: Duration::from_millis(800),
        retry: Duration::from_millis(100),
        ..LeaseOptions::new("rebalancer", identity)
    }
}

#[tokio::test]
async fn exactly_one_server_holds_a_cluster_and_the_other_takes_over() {
    let fake = FakeApiServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let a = Leadership::start(connection(&fake, &dir).await.client, CLUSTER, quick("a"));
    let b = Leadership::start(connection(&fake, &dir).await.client, CLUSTER, quick("b"));
    eventually("one holder", || a.is_leader() || b.is_leader()).await;
    // Stay a while: never both.
    for _ in 0..30 {
        assert!(!(a.is_leader() && b.is_leader()), "two holders");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (holder, other) = if a.is_leader() { (a, b) } else { (b, a) };
    let holder_id = holder.status().identity.clone();
    eventually("the other sees the holder", || {
        other.status().holder.as_deref() == Some(holder_id.as_str()) && !other.status().held
    })
    .await;
    let lease = fake
        .get(
            "coordination.k8s.io/v1",
            "Lease",
            "rebalancer",
            "rebalancer-east",
        )
        .expect("the Lease exists");
    assert_eq!(lease["spec"]["holderIdentity"], holder_id.as_str());

    // The holder stops renewing (a crash): the other takes over once the Lease expired.
    holder.stop();
    assert!(!holder.is_leader());
    eventually("take-over", || other.is_leader()).await;
    let lease = fake
        .get(
            "coordination.k8s.io/v1",
            "Lease",
            "rebalancer",
            "rebalancer-east",
        )
        .unwrap();
    assert_eq!(
        lease["spec"]["holderIdentity"],
        other.status().identity.as_str()
    );
    assert_eq!(lease["spec"]["leaseTransitions"], 1);
}

#[tokio::test]
async fn a_holder_that_cannot_renew_stops_acting() {
    let fake = FakeApiServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let a = Leadership::start(connection(&fake, &dir).await.client, CLUSTER, quick("a"));
    eventually("held", || a.is_leader()).await;
    fake.set_down(true);
    eventually("stops acting without renewals", || !a.is_leader()).await;
    assert!(a.status().error.is_some());
    fake.set_down(false);
    eventually("holds again", || a.is_leader()).await;
}
