//! Each retention rule against a real SQLite file: what is due goes with what belongs to it,
//! everything else stays.

use std::collections::BTreeMap;

use serde_json::json;

use crate::backend::{BackendChange, NewSimEvent};
use crate::pod_migrations::{DONE_STEP, FIRST_STEP};
use crate::*;

async fn open() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("test.db")).await.unwrap();
    (dir, store)
}

fn templates() -> MigrationTemplates {
    MigrationTemplates {
        default: MigrationTemplate {
            mode: "ReservationFirst".into(),
            ttl_ms: 300_000,
        },
        clusters: Default::default(),
    }
}

/// A finished run of `n` proposals (pods `{prefix}-0`…); its id and its decisions' ids.
async fn run(store: &Store, prefix: &str, n: usize, dry_run: bool) -> (i64, Vec<i64>) {
    let record = store
        .insert_run(&NewRun {
            dry_run,
            ..NewRun::manual("east", 1, "default")
        })
        .await
        .unwrap();
    let pods: Vec<(String, String)> = (0..n)
        .map(|i| (format!("uid-{prefix}-{i}"), format!("{prefix}-{i}")))
        .collect();
    let decisions: Vec<NewDecision<'_>> = pods
        .iter()
        .map(|(uid, name)| NewDecision {
            plugin_set: "default",
            plugin: "RemoveDuplicates",
            pod_uid: uid,
            pod_namespace: "shop",
            pod_name: name,
            node: "n1",
            reason: "duplicate",
        })
        .collect();
    store
        .finish_run(
            record.id,
            RunEnd::Succeeded {
                report: &|_: &[usize]| "{}".to_string(),
                decisions: &decisions,
                state: &[],
            },
        )
        .await
        .unwrap();
    // Distinct finish times, so a cutoff can fall between two runs.
    tokio::time::sleep(std::time::Duration::from_millis(3)).await;
    let (mut ids, mut after) = (Vec::new(), None);
    loop {
        let (page, next) = store
            .list_decisions(
                &DecisionFilter {
                    run: Some(record.id),
                    ..DecisionFilter::default()
                },
                DecisionSort::Oldest,
                after.as_ref(),
                1000,
            )
            .await
            .unwrap();
        ids.extend(page.iter().map(|d| d.id));
        match next {
            Some(next) => after = Some(next),
            None => return (record.id, ids),
        }
    }
}

/// Apply `rule` batch by batch (batches of `limit`) until none is due; the sum and the batches.
async fn prune_all(
    store: &Store,
    rule: PruneRule,
    cutoffs: &PruneCutoffs,
    limit: u32,
) -> (Pruned, u32) {
    let (mut total, mut batches) = (Pruned::default(), 0);
    loop {
        let batch = store.prune(rule, cutoffs, limit).await.unwrap();
        total.add(&batch.pruned);
        batches += 1;
        if !batch.more {
            return (total, batches);
        }
        assert!(batches < 1000, "{rule:?} never ends");
    }
}

async fn exists(store: &Store, id: i64) -> bool {
    match store.get_decision(id).await {
        Ok(_) => true,
        Err(StoreError::NotFound { .. }) => false,
        Err(e) => panic!("{e}"),
    }
}

async fn count(store: &Store, table: &str) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT COUNT(*) FROM {table}")))
        .fetch_one(store.pool())
        .await
        .unwrap()
}

/// Finish pod migration `id` in `phase`, holding reservation `reservation` (released or not).
async fn finish(store: &Store, id: i64, phase: MigrationPhase, reservation: Option<(&str, bool)>) {
    let change = MigrationChange {
        step: Some(DONE_STEP.into()),
        phase: Some(phase),
        reservation: reservation.map(|(name, _)| name.to_string()),
        reservation_released: reservation.is_some_and(|(_, released)| released),
        finished_at: Some(now_ms()),
        events: vec![NewEvent::normal("Done", "finished")],
        decision: Some(DecisionChange {
            from: vec![DecisionStatus::Approved],
            to: if phase == MigrationPhase::Succeeded {
                DecisionStatus::Succeeded
            } else {
                DecisionStatus::Failed
            },
            actor: "system:executor".into(),
            comment: None,
            reason: None,
        }),
        ..MigrationChange::default()
    };
    assert!(
        store
            .change_pod_migration(id, FIRST_STEP, &change)
            .await
            .unwrap()
    );
}

async fn approve(store: &Store, decision: i64) -> i64 {
    match store
        .approve_decision(decision, "alice", None, i64::MIN, &templates())
        .await
        .unwrap()
    {
        Approval::Approved { pod_migration, .. } => pod_migration,
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn proposals_nobody_acted_on_go_once_their_run_is_old_enough_and_the_rest_stays() {
    let (_dir, store) = open().await;
    let (old, d) = run(&store, "old", 6, false).await;
    let (dry, dry_decisions) = run(&store, "dry", 3, true).await;
    let (recent, recent_decisions) = run(&store, "recent", 2, false).await;
    let approved = approve(&store, d[0]).await;
    store
        .reject_decision(d[1], "alice", Some("not now"), i64::MIN)
        .await
        .unwrap()
        .unwrap();
    // d[2] is still open when the others expire (a TTL longer than the retention).
    sqlx::query("UPDATE decisions SET created_at = ? WHERE id = ?")
        .bind(now_ms() + 3_600_000)
        .bind(d[2])
        .execute(store.pool())
        .await
        .unwrap();
    assert_eq!(store.expire_proposals(now_ms()).await.unwrap(), 3 + 3 + 2);
    let logs = json!({"policies": [
        {"plugin": "RemoveDuplicates", "logs": [{"level": "info", "message": "a"},
                                                {"level": "info", "message": "b"}],
         "logsDropped": 3},
        {"plugin": "PodLifeTime", "logs": [], "logsDropped": 0}
    ]});
    sqlx::query("UPDATE runs SET report = ? WHERE id = ?")
        .bind(logs.to_string())
        .bind(old)
        .execute(store.pool())
        .await
        .unwrap();

    // Runs finished before `recent` are due; dry runs are kept (no cutoff of their own yet).
    let cutoffs = PruneCutoffs {
        proposals: store.get_run(recent).await.unwrap().finished_at,
        ..PruneCutoffs::default()
    };
    let (pruned, batches) = prune_all(&store, PruneRule::Proposals, &cutoffs, 2).await;
    assert_eq!(
        pruned,
        Pruned {
            decisions: 3,
            decision_events: 3,
            ..Pruned::default()
        }
    );
    assert_eq!(batches, 2, "batches of two");
    for (id, kept) in [
        (d[0], true),
        (d[1], true),
        (d[2], true),
        (d[3], false),
        (d[4], false),
        (d[5], false),
    ] {
        assert_eq!(exists(&store, id).await, kept, "decision {id}");
    }
    let old_run = store.get_run(old).await.unwrap();
    assert_eq!(old_run.decisions_pruned, 3);
    assert_eq!(old_run.decisions_pruned_at, None, "d[2] is still open");
    assert_eq!(old_run.report, Some(logs.clone()), "its logs stay with it");
    for id in dry_decisions.iter().chain(&recent_decisions) {
        assert!(exists(&store, *id).await, "decision {id}");
    }
    assert_eq!(
        store.get_pod_migration(approved).await.unwrap().decision_id,
        d[0]
    );

    // Dry runs have their own (shorter) keep time.
    let cutoffs = PruneCutoffs {
        dry_run_proposals: Some(now_ms() + 1),
        ..cutoffs
    };
    let (pruned, _) = prune_all(&store, PruneRule::Proposals, &cutoffs, 100).await;
    assert_eq!(
        (pruned.decisions, pruned.run_logs),
        (3, 0),
        "the dry run logged nothing"
    );
    let dry_run = store.get_run(dry).await.unwrap();
    assert_eq!(dry_run.decisions_pruned, 3);
    assert!(dry_run.decisions_pruned_at.is_some());
    assert!(exists(&store, recent_decisions[0]).await);

    // Once the open proposal expires, it goes too and its run is done.
    store.expire_proposals(i64::MAX).await.unwrap();
    let (pruned, _) = prune_all(&store, PruneRule::Proposals, &cutoffs, 100).await;
    assert_eq!((pruned.decisions, pruned.run_logs), (1, 1));
    let old_run = store.get_run(old).await.unwrap();
    assert_eq!(old_run.decisions_pruned, 4);
    assert!(old_run.decisions_pruned_at.is_some());
    // Its policies' logs went with its proposals, counted as dropped.
    assert_eq!(
        old_run.report,
        Some(json!({"policies": [
            {"plugin": "RemoveDuplicates", "logs": [], "logsDropped": 5},
            {"plugin": "PodLifeTime", "logs": [], "logsDropped": 0}
        ]}))
    );
    assert!(exists(&store, d[0]).await && exists(&store, d[1]).await);
    assert_eq!(
        store.decision_events(d[1]).await.unwrap().len(),
        1,
        "the rejection's history stays"
    );

    // Runs go once no decision is left: the dry run; `old` still has its approved and
    // rejected decisions, `recent` its proposals.
    let cutoffs = PruneCutoffs {
        runs: Some(now_ms() + 1),
        ..PruneCutoffs::default()
    };
    let (pruned, _) = prune_all(&store, PruneRule::Runs, &cutoffs, 100).await;
    assert_eq!(pruned.runs, 1);
    assert!(matches!(
        store.get_run(dry).await,
        Err(StoreError::NotFound { .. })
    ));
    store.get_run(old).await.unwrap();
    store.get_run(recent).await.unwrap();

    // No cutoff, nothing due.
    for rule in PruneRule::ALL {
        let batch = store
            .prune(rule, &PruneCutoffs::default(), 100)
            .await
            .unwrap();
        assert_eq!(batch, PruneBatch::default(), "{rule:?}");
    }
}

#[tokio::test]
async fn a_runs_logs_are_kept_apart_read_back_whole_and_go_with_its_proposals() {
    let (_dir, store) = open().await;
    let report = json!({"proposalCount": 1, "policies": [
        {"plugin": "RemoveDuplicates", "logs": [{"level": "info", "message": "a"},
                                                {"level": "warn", "message": "b"}],
         "logsDropped": 3},
        {"plugin": "PodLifeTime", "logs": [], "logsDropped": 0}
    ]});
    let finish = async |logs: bool, decisions: &[NewDecision<'_>]| {
        let run = store
            .insert_run(&NewRun::manual("east", 1, "default"))
            .await
            .unwrap();
        let text = if logs {
            report.to_string()
        } else {
            json!({"policies": [{"plugin": "X", "logs": [], "logsDropped": 0}]}).to_string()
        };
        store
            .finish_run(
                run.id,
                RunEnd::Succeeded {
                    report: &|_: &[usize]| text.clone(),
                    decisions,
                    state: &[],
                },
            )
            .await
            .unwrap();
        run.id
    };
    let decision = NewDecision {
        plugin_set: "default",
        plugin: "RemoveDuplicates",
        pod_uid: "uid-a",
        pod_namespace: "shop",
        pod_name: "a",
        node: "n1",
        reason: "duplicate",
    };
    let logged = finish(true, &[decision]).await;
    let quiet = finish(false, &[]).await;
    let unmarked = finish(true, &[]).await;

    // Stored apart, read back whole.
    assert_eq!(
        store.get_run(logged).await.unwrap().report,
        Some(report.clone())
    );
    assert_eq!(
        count(&store, "run_logs").await,
        2,
        "only runs that logged something"
    );
    let stored: String = sqlx::query_scalar("SELECT report FROM runs WHERE id = ?")
        .bind(logged)
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert!(!stored.contains("\"message\""), "{stored}");

    // Its proposal gone, its logs go too, counted as dropped.
    store.expire_proposals(i64::MAX).await.unwrap();
    let cutoffs = PruneCutoffs {
        proposals: Some(now_ms() + 1),
        ..PruneCutoffs::default()
    };
    let (pruned, _) = prune_all(&store, PruneRule::Proposals, &cutoffs, 100).await;
    assert_eq!(
        (pruned.decisions, pruned.run_logs),
        (1, 2),
        "logged and unmarked"
    );
    let run = store.get_run(logged).await.unwrap();
    assert_eq!(
        run.report.unwrap()["policies"],
        json!([
            {"plugin": "RemoveDuplicates", "logs": [], "logsDropped": 5},
            {"plugin": "PodLifeTime", "logs": [], "logsDropped": 0}
        ])
    );
    assert_eq!(count(&store, "run_logs").await, 0);
    // A run without proposals is done at once; one that logged nothing keeps its report as is.
    assert!(
        store
            .get_run(unmarked)
            .await
            .unwrap()
            .decisions_pruned_at
            .is_some()
    );
    let quiet = store.get_run(quiet).await.unwrap();
    assert!(quiet.decisions_pruned_at.is_some());
    assert_eq!(quiet.report.unwrap()["policies"][0]["logsDropped"], 0);

    // A run deleted before its proposals were pruned takes its logs along.
    let kept = finish(true, &[]).await;
    let runs = PruneCutoffs {
        runs: Some(now_ms() + 1),
        ..PruneCutoffs::default()
    };
    let (pruned, _) = prune_all(&store, PruneRule::Runs, &runs, 100).await;
    assert_eq!((pruned.runs, pruned.run_logs), (4, 1));
    assert!(matches!(
        store.get_run(kept).await,
        Err(StoreError::NotFound { .. })
    ));
}

#[tokio::test]
async fn finished_pod_migrations_go_with_their_decisions_unfinished_and_unreleased_ones_stay() {
    let (_dir, store) = open().await;
    let (run_id, d) = run(&store, "m", 5, false).await;
    let m: Vec<i64> = {
        let mut ids = Vec::new();
        for &decision in &d[..4] {
            ids.push(approve(&store, decision).await);
        }
        ids
    };
    finish(&store, m[0], MigrationPhase::Succeeded, None).await;
    finish(&store, m[1], MigrationPhase::Failed, Some(("r-1", false))).await;
    finish(&store, m[2], MigrationPhase::Aborted, Some(("r-2", true))).await;
    // m[3] is still pending.
    store
        .reject_decision(d[4], "bob", None, i64::MIN)
        .await
        .unwrap()
        .unwrap();

    // Finished before the cutoff: nothing yet.
    let before = PruneCutoffs {
        history: Some(now_ms() - 60_000),
        ..PruneCutoffs::default()
    };
    for rule in [PruneRule::PodMigrations, PruneRule::RejectedDecisions] {
        assert_eq!(
            prune_all(&store, rule, &before, 10).await.0,
            Pruned::default()
        );
    }

    let cutoffs = PruneCutoffs {
        history: Some(now_ms() + 1),
        ..PruneCutoffs::default()
    };
    let (pruned, _) = prune_all(&store, PruneRule::PodMigrations, &cutoffs, 1).await;
    // Each: one event at creation, one when it finished; the decision: approved, then final.
    assert_eq!(
        pruned,
        Pruned {
            pod_migrations: 2,
            pod_migration_events: 4,
            decisions: 2,
            decision_events: 4,
            ..Pruned::default()
        }
    );
    for (id, kept) in [(m[0], false), (m[1], true), (m[2], false), (m[3], true)] {
        assert_eq!(
            store.get_pod_migration(id).await.is_ok(),
            kept,
            "pod migration {id}"
        );
    }
    assert!(!exists(&store, d[0]).await && !exists(&store, d[2]).await);
    assert_eq!(store.pod_migration_events(m[0]).await.unwrap(), []);

    let (pruned, _) = prune_all(&store, PruneRule::RejectedDecisions, &cutoffs, 10).await;
    assert_eq!((pruned.decisions, pruned.decision_events), (1, 1));
    assert!(!exists(&store, d[4]).await);

    // Its reservation released, the failed one goes too.
    store.mark_reservation_released(m[1]).await.unwrap();
    let (pruned, _) = prune_all(&store, PruneRule::PodMigrations, &cutoffs, 10).await;
    assert_eq!(pruned.pod_migrations, 1);
    assert_eq!(store.get_run(run_id).await.unwrap().decisions_pruned, 4);

    // The run keeps the pending one's decision, so it stays.
    let runs = PruneCutoffs {
        runs: Some(now_ms() + 1),
        ..PruneCutoffs::default()
    };
    assert_eq!(
        prune_all(&store, PruneRule::Runs, &runs, 10).await.0.runs,
        0
    );
    store.get_run(run_id).await.unwrap();
}

#[tokio::test]
async fn simulated_events_go_but_those_of_a_pod_still_moving() {
    let (_dir, store) = open().await;
    let counts = BTreeMap::new();
    let warnings = json!([]);
    let (cluster, _) = store
        .replace_cluster_state(
            &NewClusterState {
                name: "east",
                backend: "simulated",
                revision: 1,
                snapshot_time_ms: 0,
                node_count: 0,
                pod_count: 0,
                counts: &counts,
                warnings: &warnings,
            },
            std::iter::empty(),
        )
        .await
        .unwrap();
    // uid-s-0 is being moved (its pod migration is pending); uid-gone was moved long ago.
    let (_, d) = run(&store, "s", 1, false).await;
    approve(&store, d[0]).await;
    let event = |uid: &str| NewSimEvent {
        reason: "ReservationScheduled",
        pod_uid: Some(uid.to_string()),
        message: format!("reservation for {uid}"),
        ..NewSimEvent::default()
    };
    store
        .apply_backend_change(&BackendChange {
            cluster_id: cluster.id,
            cluster: "east",
            base_revision: 1,
            revision: 2,
            snapshot_time_ms: 0,
            node_count: 0,
            pod_count: 0,
            object_count: 0,
            counts: &counts,
            warnings: &warnings,
            delete_pods: vec![],
            upserts: vec![],
            events: vec![event("uid-s-0"), event("uid-gone"), event("uid-gone-2")],
        })
        .await
        .unwrap();
    let cutoffs = PruneCutoffs {
        history: Some(now_ms() + 1),
        ..PruneCutoffs::default()
    };
    let (pruned, batches) = prune_all(&store, PruneRule::SimulatedEvents, &cutoffs, 1).await;
    assert_eq!((pruned.simulated_events, batches), (2, 3));
    let left: Vec<Option<String>> = store
        .simulated_events("east")
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.pod_uid)
        .collect();
    assert_eq!(left, [Some("uid-s-0".to_string())]);
}

#[tokio::test]
async fn the_audit_log_is_cut_from_its_start_only_and_never_within_a_day() {
    let (_dir, store) = open().await;
    let now = now_ms();
    let day = 24 * 3_600_000;
    // Ids in order; the clock went back once (the last entry is old but follows a recent one).
    for (at, action) in [
        (now - 3 * day, "token.create"),
        (now - 2 * day, "profile.put"),
        (now - 3_600_000, "run.create"),
        (now - 3 * day, "token.delete"),
    ] {
        sqlx::query(
            "INSERT INTO audit_log (at, actor_name, actor_role, action, object_kind) \
             VALUES (?, 'alice', 'admin', ?, 'x')",
        )
        .bind(at)
        .bind(action)
        .execute(store.pool())
        .await
        .unwrap();
    }
    // By hand, nothing but the oldest entry can go, and nothing recent.
    for sql in [
        "DELETE FROM audit_log",
        "DELETE FROM audit_log WHERE action = 'token.delete'",
        "DELETE FROM audit_log WHERE action = 'run.create'",
        "UPDATE audit_log SET actor_name = 'nobody'",
    ] {
        let err = sqlx::query(sql).execute(store.pool()).await.unwrap_err();
        assert!(err.to_string().contains("append-only"), "{sql}: {err}");
    }
    assert_eq!(count(&store, "audit_log").await, 4);

    // A cutoff in the future is held a day back: the recent entry and all after it stay.
    let cutoffs = PruneCutoffs {
        audit: Some(now + day),
        ..PruneCutoffs::default()
    };
    let (pruned, batches) = prune_all(&store, PruneRule::Audit, &cutoffs, 1).await;
    assert_eq!((pruned.audit_log, batches), (2, 3));
    let (left, _) = store.list_audit(&AuditFilter::default(), 10).await.unwrap();
    let actions: Vec<&str> = left.iter().map(|e| e.action.as_str()).collect();
    assert_eq!(actions, ["token.delete", "run.create"]);
}

#[tokio::test]
async fn a_checkpoint_truncates_the_wal_and_pruned_pages_are_free_for_reuse() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("test.db");
    let store = Store::open(&path).await.unwrap();
    let wal = dir.path().join("test.db-wal");
    let (_, d) = run(&store, "w", 3000, false).await;
    store.expire_proposals(i64::MAX).await.unwrap();
    assert!(std::fs::metadata(&wal).unwrap().len() > 0);
    let before = store.file_stats().await.unwrap();
    assert_eq!(before.page_size, 16384);

    let cutoffs = PruneCutoffs {
        proposals: Some(now_ms() + 1),
        ..PruneCutoffs::default()
    };
    let (pruned, _) = prune_all(&store, PruneRule::Proposals, &cutoffs, 1000).await;
    assert_eq!((pruned.decisions, d.len()), (3000, 3000));
    let checkpoint = store.checkpoint_wal().await.unwrap();
    assert!(checkpoint.truncated, "{checkpoint:?}");
    assert_eq!(std::fs::metadata(&wal).unwrap().len(), 0);
    let after = store.file_stats().await.unwrap();
    assert!(after.free_pages > 0, "{before:?} → {after:?}");
    assert!(after.pages >= before.pages, "the file does not shrink");

    // The connection that checkpointed went back to the pool with the usual busy timeout.
    for _ in 0..8 {
        let mut conn = store.pool().acquire().await.unwrap();
        let timeout: i64 = sqlx::query_scalar("PRAGMA busy_timeout")
            .fetch_one(&mut *conn)
            .await
            .unwrap();
        assert_eq!(timeout, 30_000);
    }
}

#[tokio::test]
async fn deleting_a_profile_takes_its_rules_state_schedules_and_open_proposals() {
    let (_dir, store) = open().await;
    store
        .put_profile("default", &json!({}), &json!({}))
        .await
        .unwrap();
    store
        .put_auto_approve_rules("default", &json!([]))
        .await
        .unwrap();
    let schedule = store
        .insert_schedule(
            &ScheduleSpec {
                cluster: "east".into(),
                profile: "default".into(),
                interval_seconds: Some(600),
                on_change: false,
                debounce_seconds: 30,
                dry_run: false,
                enabled: true,
            },
            None,
        )
        .await
        .unwrap();
    let (_, d) = run(&store, "p", 3, false).await;
    let moving = approve(&store, d[0]).await;
    assert_eq!(
        store.delete_profile("default", "alice").await.unwrap(),
        ProfileDeletion::MigrationsInFlight(vec![moving])
    );
    store.get_profile("default").await.unwrap();

    finish(&store, moving, MigrationPhase::Succeeded, None).await;
    let ProfileDeletion::Deleted(deleted) = store.delete_profile("default", "alice").await.unwrap()
    else {
        panic!("refused");
    };
    assert_eq!(
        deleted,
        DeletedProfile {
            schedules: vec![schedule.id],
            policy_state_scopes: 0,
            auto_approve_rules: true,
            expired_decisions: 2,
        }
    );
    assert!(matches!(
        store.get_profile("default").await,
        Err(StoreError::NotFound { .. })
    ));
    assert_eq!(store.auto_approve_rules("default").await.unwrap(), None);
    let expired = store.get_decision(d[1]).await.unwrap();
    assert_eq!(expired.status, DecisionStatus::Expired);
    assert_eq!(
        expired.status_reason.as_deref(),
        Some("expired: profile \"default\" was deleted")
    );
    assert_eq!(
        store.get_decision(d[0]).await.unwrap().status,
        DecisionStatus::Succeeded,
        "history stays"
    );
    assert!(matches!(
        store.delete_profile("default", "alice").await,
        Err(StoreError::NotFound { .. })
    ));
}

#[tokio::test]
async fn the_expiry_sweep_marks_every_old_proposal_once_with_one_event_each_in_batches() {
    let (_dir, store) = open().await;
    // More than two batches' worth, one of them approved before the sweep.
    let n = 2 * crate::transitions::EXPIRY_BATCH as usize + 1;
    let (_, old) = run(&store, "old", n, false).await;
    approve(&store, old[0]).await;
    let cutoff = now_ms();
    tokio::time::sleep(std::time::Duration::from_millis(3)).await;
    let (_, young) = run(&store, "young", 3, false).await;

    assert_eq!(store.expire_proposals(cutoff).await.unwrap(), n as u64 - 1);
    // Nothing is left to expire, and nothing is expired twice.
    assert_eq!(store.expire_proposals(cutoff).await.unwrap(), 0);

    let by_status: Vec<(String, i64)> =
        sqlx::query_as("SELECT status, COUNT(*) FROM decisions GROUP BY status ORDER BY status")
            .fetch_all(store.pool())
            .await
            .unwrap();
    assert_eq!(
        by_status,
        [
            ("approved".to_string(), 1),
            ("expired".to_string(), n as i64 - 1),
            ("proposed".to_string(), 3)
        ]
    );
    let events: Vec<(String, String, i64)> = sqlx::query_as(
        "SELECT from_status, actor, COUNT(DISTINCT decision_id) FROM decision_events \
         WHERE to_status = 'expired' GROUP BY from_status, actor",
    )
    .fetch_all(store.pool())
    .await
    .unwrap();
    assert_eq!(
        events,
        [(
            "proposed".to_string(),
            crate::transitions::EXPIRY_ACTOR.to_string(),
            n as i64 - 1
        )]
    );
    assert_eq!(
        count(&store, "decision_events WHERE to_status = 'expired'").await,
        n as i64 - 1
    );
    let expired = store.get_decision(old[1]).await.unwrap();
    assert_eq!(expired.status, DecisionStatus::Expired);
    let reason = expired.status_reason.unwrap_or_default();
    assert!(
        reason.starts_with("expired: not approved within the proposal TTL (")
            && reason.ends_with(" s since it was proposed)"),
        "{reason}"
    );
    for id in young {
        assert_eq!(
            store.get_decision(id).await.unwrap().status,
            DecisionStatus::Proposed
        );
    }
}

/// A replacement pod is claimed by one pod migration only: a change naming a pod another pod
/// migration of the cluster took applies nothing; the claim goes when its pod migration is
/// pruned.
#[tokio::test]
async fn a_replacement_is_claimed_once_and_its_claim_goes_with_its_pod_migration() {
    let (_dir, store) = open().await;
    let (_, d) = run(&store, "c", 2, false).await;
    let (a, b) = (approve(&store, d[0]).await, approve(&store, d[1]).await);
    let claim = |pod: &str| MigrationChange {
        reason: Some("PodBoundReservation".into()),
        new_pod_uid: Some(pod.into()),
        new_pod_name: Some(pod.trim_start_matches("uid-").into()),
        new_pod_node: Some("n2".into()),
        events: vec![NewEvent::normal("PodBoundReservation", pod)],
        ..MigrationChange::default()
    };
    assert!(
        store
            .change_pod_migration(a, FIRST_STEP, &claim("uid-web-r1"))
            .await
            .unwrap()
    );
    // Claiming its own again (a resumed pod migration) is fine.
    assert!(
        store
            .change_pod_migration(a, FIRST_STEP, &claim("uid-web-r1"))
            .await
            .unwrap()
    );
    match store
        .change_pod_migration(b, FIRST_STEP, &claim("uid-web-r1"))
        .await
    {
        Err(StoreError::ReplacementClaimed { pod_uid, by }) => {
            assert_eq!((pod_uid.as_str(), by), ("uid-web-r1", a));
        }
        other => panic!("expected ReplacementClaimed, got {other:?}"),
    }
    let unchanged = store.get_pod_migration(b).await.unwrap();
    assert_eq!(unchanged.new_pod_uid, None);
    assert_eq!(store.pod_migration_events(b).await.unwrap().len(), 1);
    assert_eq!(
        store
            .replacement_claims("east", &["uid-web-r1".into(), "uid-web-r2".into()])
            .await
            .unwrap(),
        std::collections::HashMap::from([("uid-web-r1".to_owned(), a)])
    );
    // Another cluster's pod of the same uid is another pod.
    assert!(
        store
            .replacement_claims("west", &["uid-web-r1".into()])
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .change_pod_migration(b, FIRST_STEP, &claim("uid-web-r2"))
            .await
            .unwrap()
    );

    finish(&store, a, MigrationPhase::Succeeded, None).await;
    let cutoffs = PruneCutoffs {
        history: Some(now_ms() + 1),
        ..PruneCutoffs::default()
    };
    prune_all(&store, PruneRule::PodMigrations, &cutoffs, 10).await;
    assert_eq!(
        count(&store, "replacement_claims").await,
        1,
        "b's claim stays"
    );
}
