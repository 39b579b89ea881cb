//! The replacement rule on its own: which candidate a pod migration claims.

use std::collections::HashMap;

use super::{Choice, Others, Rival, choose_replacement};
use crate::backend::PodState;

fn replica(uid: &str, node: Option<&str>) -> PodState {
    PodState {
        uid: uid.into(),
        namespace: "shop".into(),
        name: uid.trim_start_matches("uid-").into(),
        node: node.map(str::to_owned),
        phase: if node.is_some() { "Running" } else { "Pending" }.into(),
        ready: false,
        owner: None,
        reservation: None,
        terminating: false,
        created_ms: Some(1_000),
    }
}

fn taken(choice: Choice) -> String {
    match choice {
        Choice::Take(p) => p.uid,
        Choice::Wait(p) => panic!("expected a replacement, waits for {p:?}"),
    }
}

#[test]
fn a_replacement_on_the_reserved_node_wins_over_an_older_one_elsewhere() {
    let candidates = [replica("uid-r1", Some("n4")), replica("uid-r2", Some("n2"))];
    let choice = choose_replacement(
        1,
        Some("n2"),
        "rebalancer-pm-1",
        &candidates,
        &HashMap::new(),
        &Others::default(),
    );
    assert_eq!(taken(choice), "uid-r2");
}

#[test]
fn a_pod_another_pod_migration_claimed_is_never_taken_and_a_claim_is_kept() {
    let candidates = [replica("uid-r1", Some("n2")), replica("uid-r2", Some("n3"))];
    let claims = HashMap::from([("uid-r1".to_owned(), 7)]);
    let none = Others::default();
    // r1 is on this pod migration's reserved node, but pod migration 7 claimed it.
    assert_eq!(
        taken(choose_replacement(
            1,
            Some("n2"),
            "pm-1",
            &candidates,
            &claims,
            &none
        )),
        "uid-r2"
    );
    // Pod migration 7 itself keeps its claim, even with a better-placed candidate.
    let candidates = [replica("uid-r2", Some("n9")), replica("uid-r1", Some("n2"))];
    assert_eq!(
        taken(choose_replacement(
            7,
            Some("n9"),
            "pm-7",
            &candidates,
            &claims,
            &none
        )),
        "uid-r1"
    );
}

#[test]
fn pods_on_another_pod_migrations_reserved_node_are_left_to_it() {
    // r1 landed on n5, which pod migration 2 reserved; r2 on n6, nobody's. Both were created
    // (at 1 s) after pod migration 2's eviction (at 3 s) minus the slack: r1 may be its.
    let candidates = [replica("uid-r1", Some("n5")), replica("uid-r2", Some("n6"))];
    let others = Others {
        rivals: vec![Rival {
            target: "n5".into(),
            evicted_at: 3_000,
        }],
        reservations: Vec::new(),
    };
    assert_eq!(
        taken(choose_replacement(
            1,
            Some("n2"),
            "pm-1",
            &candidates,
            &HashMap::new(),
            &others
        )),
        "uid-r2"
    );
    // Only r1 is there: this pod migration waits rather than take pod migration 2's pod.
    assert_eq!(
        choose_replacement(
            1,
            Some("n2"),
            "pm-1",
            &candidates[..1],
            &HashMap::new(),
            &others
        ),
        Choice::Wait(None)
    );
    // A rival that evicted well after r1 was created cannot be replaced by it: r1 is free.
    let later = Others {
        rivals: vec![Rival {
            target: "n5".into(),
            evicted_at: 60_000,
        }],
        reservations: Vec::new(),
    };
    assert_eq!(
        taken(choose_replacement(
            1,
            Some("n2"),
            "pm-1",
            &candidates[..1],
            &HashMap::new(),
            &later
        )),
        "uid-r1"
    );
}

#[test]
fn unscheduled_terminating_and_otherwise_bound_candidates_wait() {
    let mut gone = replica("uid-r0", Some("n2"));
    gone.terminating = true;
    let mut bound_elsewhere = replica("uid-r1", Some("n2"));
    bound_elsewhere.reservation = Some("rebalancer-pm-9".into());
    let pending = replica("uid-r2", None);
    let candidates = [gone, bound_elsewhere.clone(), pending.clone()];
    let pm_9_unfinished = Others {
        rivals: Vec::new(),
        reservations: vec!["rebalancer-pm-9".into()],
    };
    assert_eq!(
        choose_replacement(
            1,
            Some("n2"),
            "rebalancer-pm-1",
            &candidates,
            &HashMap::new(),
            &pm_9_unfinished
        ),
        Choice::Wait(Some(pending))
    );
    // Once pod migration 9 is over (it failed: its Reservation was taken before it evicted),
    // the pod bound into its Reservation is free to be this one's.
    assert_eq!(
        taken(choose_replacement(
            1,
            Some("n2"),
            "rebalancer-pm-1",
            &candidates,
            &HashMap::new(),
            &Others::default()
        )),
        bound_elsewhere.uid
    );
}
