//! Proposals: limits, refusals and PDB admission.

use super::*;

#[test]
fn limits_are_checked_total_then_node_then_namespace() {
    let c = two_nodes()
        .pod(owned_pod("a", "a1"))
        .pod(owned_pod("a", "a2"))
        .pod(owned_pod("b", "b1").on_node("n2"))
        .pod(owned_pod("b", "b2").on_node("n2"))
        .pod(owned_pod("c", "c1").on_node("n2"))
        .pod(
            TestPod::new("d", "unbound")
                .owned_by("ReplicaSet", "x")
                .phase(PodPhase::Pending),
        );
    let mut s = c
        .clone()
        .max_per_node(1)
        .max_per_namespace(1)
        .max_total(3)
        .session();
    let id = |s: &TestSession, ns: &str, n: &str| s.pod_id(ns, n);
    let (a1, a2, b1, b2, c1, unbound) = (
        id(&s, "a", "a1"),
        id(&s, "a", "a2"),
        id(&s, "b", "b1"),
        id(&s, "b", "b2"),
        id(&s, "c", "c1"),
        id(&s, "d", "unbound"),
    );
    let mut ev = s.evictor("test");
    assert_eq!(ev.propose(a1, "r"), Ok(()));
    assert_eq!(
        ev.propose(a2, "r"),
        Err(Refusal::NodeLimit),
        "node before namespace"
    );
    assert_eq!(ev.propose(b1, "r"), Ok(()));
    assert_eq!(ev.propose(c1, "r"), Err(Refusal::NodeLimit));
    assert_eq!(
        ev.propose(unbound, "r"),
        Ok(()),
        "no node limit without a node"
    );
    assert_eq!(ev.propose(b2, "r"), Err(Refusal::TotalLimit), "total first");
    let state = s.state();
    assert_eq!(state.total(), 3);
    assert_eq!(
        state.proposals().iter().map(|p| p.pod).collect::<Vec<_>>(),
        vec![a1, b1, unbound]
    );
    assert_eq!(
        state.refusal_counts(),
        RefusalCounts {
            node_limit: 2,
            total_limit: 1,
            ..RefusalCounts::default()
        }
    );

    let mut s = c.max_per_namespace(1).session();
    let mut ev = s.evictor("test");
    assert_eq!(ev.propose(a1, "r"), Ok(()));
    assert_eq!(ev.propose(a2, "r"), Err(Refusal::NamespaceLimit));
    assert_eq!(ev.propose(b1, "r"), Ok(()));
    assert_eq!(
        s.state().namespace_count(s.cluster().lookup("a").unwrap()),
        1
    );
}

#[test]
fn refusals_do_not_count_towards_limits() {
    let c = two_nodes()
        .max_total(1)
        .pod(owned_pod("a", "guarded").label("app", "db"))
        .pod(owned_pod("a", "free"))
        .pdb(
            TestPdb::new("a", "db")
                .match_label("app", "db")
                .disruptions_allowed(0),
        );
    let mut s = c.session();
    let (guarded, free) = (s.pod_id("a", "guarded"), s.pod_id("a", "free"));
    let mut ev = s.evictor("test");
    assert!(matches!(
        ev.propose(guarded, "r"),
        Err(Refusal::DisruptionBudget(_))
    ));
    assert_eq!(ev.propose(free, "r"), Ok(()));
    assert_eq!(
        ev.propose(guarded, "r"),
        Err(Refusal::TotalLimit),
        "limits come before the API"
    );
}

#[test]
fn propose_rejects_unknown_proposed_and_unevictable() {
    let c = two_nodes()
        .pod(owned_pod("a", "ok"))
        .pod(owned_pod("a", "mirror").mirror());
    let mut s = c.session();
    let (ok, mirror) = (s.pod_id("a", "ok"), s.pod_id("a", "mirror"));
    let mut ev = s.evictor("test");
    assert_eq!(ev.propose(77, "r"), Err(Refusal::UnknownPod));
    assert!(
        matches!(ev.propose(mirror, "r"), Err(Refusal::NotEvictable(m)) if m.contains("mirror pod"))
    );
    assert_eq!(ev.propose(ok, "r"), Ok(()));
    assert!(
        !ev.passes_filter(ok),
        "proposed pods are terminating for the rest of the run"
    );
    assert!(ev.filter_failures(ok)[0].contains("proposed for eviction earlier"));
    assert!(
        matches!(ev.propose(ok, "again"), Err(Refusal::NotEvictable(m)) if m.contains("earlier in this run"))
    );
    let counts = s.state().refusal_counts();
    assert_eq!(
        (counts.unknown_pod, counts.not_evictable, counts.total()),
        (1, 2, 3)
    );
    assert_eq!(s.state().refusals().len(), 3);
    assert_eq!(s.state().refusals()[0].reason, "r");
}

#[test]
fn reasons_are_cut_to_the_cap_and_refusals_recorded_up_to_theirs() {
    use crate::caps::MAX_REASON_BYTES;
    use crate::evictor::MAX_RECORDED_REFUSALS;

    let c = two_nodes().pod(owned_pod("a", "ok"));
    let mut s = c.session();
    let ok = s.pod_id("a", "ok");
    let long = format!("why: {}", "€".repeat(1 << 20));
    let mut ev = s.evictor("test");
    assert_eq!(ev.propose(ok, &long), Ok(()));
    for _ in 0..MAX_RECORDED_REFUSALS + 5 {
        assert!(ev.propose(ok, &long).is_err());
    }
    let state = s.state();
    let kept = &state.proposals()[0].reason;
    assert!(kept.len() <= MAX_REASON_BYTES, "{} bytes", kept.len());
    assert!(kept.starts_with("why: €"), "{kept}");
    assert!(
        kept.ends_with(&format!("[truncated, {} bytes in all]", long.len())),
        "{kept}"
    );
    // Every refusal is counted; the first MAX_RECORDED_REFUSALS are kept, with cut reasons.
    assert_eq!(
        state.refusal_counts().total() as usize,
        MAX_RECORDED_REFUSALS + 5
    );
    assert_eq!(state.refusals().len(), MAX_RECORDED_REFUSALS);
    assert!(state.refusals().iter().all(|r| r.reason == *kept));
}

#[test]
fn pdb_admission() {
    let c = two_nodes()
        // Budget 0.
        .pod(owned_pod("a", "zero-1").label("app", "zero"))
        .pdb(
            TestPdb::new("a", "zero")
                .match_label("app", "zero")
                .disruptions_allowed(0)
                .healthy(2, 2),
        )
        // Budget 1, two pods: the second is refused once the first used it.
        .pod(owned_pod("a", "one-1").label("app", "one"))
        .pod(owned_pod("a", "one-2").label("app", "one"))
        .pdb(
            TestPdb::new("a", "one")
                .match_label("app", "one")
                .disruptions_allowed(1)
                .healthy(3, 2),
        )
        // Two PDBs.
        .pod(
            owned_pod("a", "double")
                .label("app", "double")
                .label("tier", "x"),
        )
        .pdb(
            TestPdb::new("a", "d1")
                .match_label("app", "double")
                .disruptions_allowed(5),
        )
        .pdb(
            TestPdb::new("a", "d2")
                .match_label("tier", "x")
                .disruptions_allowed(5),
        )
        // Unhealthy pods.
        .pod(
            owned_pod("a", "sick-always")
                .label("app", "always")
                .not_ready(),
        )
        .pdb(
            TestPdb::new("a", "always")
                .match_label("app", "always")
                .always_allow_unhealthy()
                .healthy(0, 3),
        )
        .pod(
            owned_pod("a", "sick-budget-ok")
                .label("app", "ok")
                .not_ready(),
        )
        .pdb(
            TestPdb::new("a", "ok")
                .match_label("app", "ok")
                .healthy(3, 3),
        )
        .pod(
            owned_pod("a", "sick-budget-short")
                .label("app", "short")
                .not_ready(),
        )
        .pdb(
            TestPdb::new("a", "short")
                .match_label("app", "short")
                .healthy(1, 3),
        )
        .pod(
            owned_pod("a", "sick-desired-zero")
                .label("app", "dz")
                .not_ready(),
        )
        .pdb(
            TestPdb::new("a", "dz")
                .match_label("app", "dz")
                .healthy(0, 0),
        )
        .pod(owned_pod("a", "healthy-always").label("app", "always2"))
        .pdb(
            TestPdb::new("a", "always2")
                .match_label("app", "always2")
                .always_allow_unhealthy(),
        )
        // Pods that bypass PDBs.
        .pod(
            owned_pod("a", "failed")
                .label("app", "zero")
                .phase(PodPhase::Failed),
        )
        .pod(
            owned_pod("a", "succeeded")
                .label("app", "zero")
                .phase(PodPhase::Succeeded),
        )
        .pod(
            owned_pod("a", "pending")
                .label("app", "zero")
                .phase(PodPhase::Pending),
        )
        .pod(
            owned_pod("a", "terminating")
                .label("app", "zero")
                .terminating()
                .evict_annotation(),
        )
        .pod(
            owned_pod("a", "unknown-phase")
                .label("app", "zero")
                .phase(PodPhase::Unknown)
                .ready(true),
        )
        // Negative budget.
        .pod(owned_pod("a", "negative").label("app", "neg"))
        .pdb(
            TestPdb::new("a", "neg")
                .match_label("app", "neg")
                .disruptions_allowed(-1),
        )
        // Other namespace, nil selector: not guarded.
        .pod(owned_pod("b", "elsewhere").label("app", "zero"))
        .pdb(TestPdb::new("b", "nil"));
    let mut s = c.session();
    let id = |s: &TestSession, n: &str| s.pod_id(if n == "elsewhere" { "b" } else { "a" }, n);
    let cases: &[(&str, Result<(), &str>)] = &[
        (
            "zero-1",
            Err("The disruption budget zero needs 2 healthy pods and has 2 currently"),
        ),
        ("one-1", Ok(())),
        (
            "one-2",
            Err("Cannot evict pod as it would violate the pod's disruption budget"),
        ),
        ("double", Err("more than one PodDisruptionBudget")),
        ("sick-always", Ok(())),
        ("sick-budget-ok", Ok(())),
        ("sick-budget-short", Err("needs 3 healthy pods and has 1")),
        ("sick-desired-zero", Err("disruption budget dz")),
        ("healthy-always", Err("disruption budget always2")),
        ("failed", Ok(())),
        ("succeeded", Ok(())),
        ("pending", Ok(())),
        ("terminating", Ok(())),
        ("unknown-phase", Err("disruption budget zero")),
        ("negative", Err("pdb disruptions allowed is negative")),
        ("elsewhere", Ok(())),
    ];
    let ids: Vec<u32> = cases.iter().map(|(n, _)| id(&s, n)).collect();
    let mut ev = s.evictor("test");
    for ((name, want), &pod) in cases.iter().zip(&ids) {
        match (ev.propose(pod, "r"), want) {
            (Ok(()), Ok(())) => {}
            (Err(Refusal::DisruptionBudget(m)), Err(w)) => {
                assert!(m.contains(w), "{name}: {m}")
            }
            (got, _) => panic!("{name}: got {got:?}, want {want:?}"),
        }
    }
    // Only healthy evictions used a disruption: one-1 from "one"; the unhealthy ones none.
    let pdb_index = |name: &str| {
        let cluster = s.cluster();
        let id = cluster.lookup(name).unwrap();
        cluster
            .archive()
            .pdbs
            .iter()
            .position(|p| p.name.to_native() == id)
            .unwrap() as u32
    };
    assert_eq!(s.state().pdb_consumed(pdb_index("one")), 1);
    assert_eq!(s.state().pdb_consumed(pdb_index("always")), 0);
    assert_eq!(s.state().pdb_consumed(pdb_index("ok")), 0);
    assert_eq!(s.state().pdb_consumed(pdb_index("zero")), 0);
    assert_eq!(s.index().pdb_pods(pdb_index("one")).len(), 2);
    assert_eq!(
        s.index().pdbs_of_pod(s.pod_id("a", "double")),
        PodPdbs::Many(2)
    );
}

#[test]
fn budget_is_shared_by_plugins_and_plugin_sets_of_a_run() {
    let c = two_nodes()
        .pod(owned_pod("a", "w1").label("app", "w"))
        .pod(owned_pod("a", "w2").label("app", "w"))
        .pod(owned_pod("a", "w3").label("app", "w"))
        .pdb(
            TestPdb::new("a", "w")
                .match_label("app", "w")
                .disruptions_allowed(2)
                .healthy(3, 1),
        );
    let mut s = c.session();
    let ids = [
        s.pod_id("a", "w1"),
        s.pod_id("a", "w2"),
        s.pod_id("a", "w3"),
    ];
    assert_eq!(s.evictor("first").propose(ids[0], "r"), Ok(()));
    let mut second = s.evictor("second");
    second.plugin_set = "other";
    assert_eq!(second.propose(ids[1], "r"), Ok(()));
    assert!(matches!(
        second.propose(ids[2], "r"),
        Err(Refusal::DisruptionBudget(_))
    ));
    let plugins: Vec<(&str, &str)> = s
        .state()
        .proposals()
        .iter()
        .map(|p| (p.plugin.as_str(), p.plugin_set.as_str()))
        .collect();
    assert_eq!(plugins, vec![("first", "default"), ("second", "other")]);
}
