//! Tests of the approval queue's store side: a run's proposals superseding earlier open ones,
//! the sorted and filtered decision list with its keyset cursor, bulk approve/reject (and their
//! preview), and migration 0011 on a database that already holds duplicates.

use std::collections::HashMap;

use super::*;
use crate::transitions::EXPIRY_ACTOR;

async fn open() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("test.db")).await.unwrap();
    (dir, store)
}

/// A pod as a run proposes it: `(uid, namespace, name, node, plugin)`.
type Pod<'a> = (&'a str, &'a str, &'a str, &'a str, &'a str);

/// Run `profile` on `cluster` (a dry run when `dry`), proposing `pods`. Returns the run id and
/// what finishing it superseded.
async fn run(
    store: &Store,
    cluster: &str,
    profile: &str,
    dry: bool,
    pods: &[Pod<'_>],
) -> (i64, Vec<i64>) {
    let record = store
        .insert_run(&NewRun {
            dry_run: dry,
            ..NewRun::manual(cluster, 1, profile)
        })
        .await
        .unwrap();
    let decisions: Vec<NewDecision> = pods
        .iter()
        .map(|&(uid, namespace, name, node, plugin)| NewDecision {
            plugin_set: "default",
            plugin,
            pod_uid: uid,
            pod_namespace: namespace,
            pod_name: name,
            node,
            reason: "test",
        })
        .collect();
    let finished = store
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
    (record.id, finished.superseded)
}

/// The decisions of a run, by pod uid.
async fn of_run(store: &Store, run: i64) -> HashMap<String, DecisionRecord> {
    let (items, _) = store
        .list_decisions(
            &DecisionFilter {
                run: Some(run),
                ..DecisionFilter::default()
            },
            DecisionSort::Newest,
            None,
            1000,
        )
        .await
        .unwrap();
    items.into_iter().map(|d| (d.pod_uid.clone(), d)).collect()
}

const WEB: Pod = ("uid-web", "shop", "web-1", "n1", "LowNodeUtilization");
const DB: Pod = ("uid-db", "shop", "db-0", "n2", "RemoveDuplicates");

#[tokio::test]
async fn a_runs_proposal_supersedes_the_open_ones_of_its_pod_and_profile() {
    let (_dir, store) = open().await;
    let (first, none) = run(&store, "east", "demo", false, &[WEB, DB]).await;
    assert!(none.is_empty());
    let first = of_run(&store, first).await;
    // Another profile, another cluster, a decided proposal: none of them is touched.
    let (other_profile, _) = run(&store, "east", "other", false, &[WEB]).await;
    let (other_cluster, _) = run(&store, "west", "demo", false, &[WEB]).await;
    let (second, superseded) = run(&store, "east", "demo", false, &[WEB]).await;
    let second = of_run(&store, second).await;
    let old = &first["uid-web"];
    let new = &second["uid-web"];
    assert_eq!(superseded, [old.id]);
    let old = store.get_decision(old.id).await.unwrap();
    assert_eq!(old.status, DecisionStatus::Superseded);
    assert_eq!(old.superseded_by, Some(new.id));
    let reason = old.status_reason.unwrap();
    assert!(
        reason.contains(&format!("decision {}", new.id)) && reason.contains("shop/web-1"),
        "{reason}"
    );
    let history = store.decision_events(old.id).await.unwrap();
    let last = history.last().unwrap();
    assert_eq!(
        (last.from, last.to, last.actor.as_str()),
        (
            DecisionStatus::Proposed,
            DecisionStatus::Superseded,
            SUPERSEDE_ACTOR
        )
    );
    assert!(
        last.comment
            .as_deref()
            .unwrap()
            .contains(&format!("decision {}", new.id)),
        "{last:?}"
    );
    // The db pod was not proposed again; the other profile's and cluster's stay open.
    assert_eq!(
        store.get_decision(first["uid-db"].id).await.unwrap().status,
        DecisionStatus::Proposed
    );
    for run in [other_profile, other_cluster] {
        let d = &of_run(&store, run).await["uid-web"];
        assert_eq!(d.status, DecisionStatus::Proposed, "{d:?}");
    }
    assert_eq!(new.superseded_by, None);
}

#[tokio::test]
async fn a_dry_run_supersedes_only_dry_run_proposals() {
    let (_dir, store) = open().await;
    let (real, _) = run(&store, "east", "demo", false, &[WEB]).await;
    let (dry, superseded) = run(&store, "east", "demo", true, &[WEB]).await;
    assert!(superseded.is_empty(), "a dry run superseded {superseded:?}");
    let real = of_run(&store, real).await["uid-web"].clone();
    let dry = of_run(&store, dry).await["uid-web"].clone();
    assert!(dry.dry_run && !real.dry_run);
    let (_, superseded) = run(&store, "east", "demo", true, &[WEB]).await;
    assert_eq!(superseded, [dry.id]);
    let (_, superseded) = run(&store, "east", "demo", false, &[WEB]).await;
    assert_eq!(
        superseded.len(),
        2,
        "real and the second dry: {superseded:?}"
    );
    assert!(superseded.contains(&real.id));
}

#[tokio::test]
async fn an_approved_or_expired_decision_is_never_superseded() {
    let (_dir, store) = open().await;
    let (first, _) = run(&store, "east", "demo", false, &[WEB, DB]).await;
    let first = of_run(&store, first).await;
    let templates = templates();
    let approval = store
        .approve_decision(first["uid-web"].id, "alice", None, 0, &templates)
        .await
        .unwrap();
    assert!(matches!(approval, Approval::Approved { .. }));
    assert_eq!(store.expire_proposals(now_ms() + 1).await.unwrap(), 1);
    let (_, superseded) = run(&store, "east", "demo", false, &[WEB, DB]).await;
    assert!(superseded.is_empty(), "{superseded:?}");
    let events = store.decision_events(first["uid-db"].id).await.unwrap();
    assert_eq!(events.last().unwrap().actor, EXPIRY_ACTOR);
}

fn templates() -> MigrationTemplates {
    MigrationTemplates {
        default: MigrationTemplate {
            mode: "EvictDirectly".into(),
            ttl_ms: 0,
        },
        clusters: Default::default(),
    }
}

/// Pods `0..n` in namespaces `ns-{i % 7}`, on nodes `node-{i % 5}`, of plugins `p-{i % 3}`.
fn many(n: usize) -> Vec<(String, String, String, String, String)> {
    (0..n)
        .map(|i| {
            (
                format!("uid-{i}"),
                format!("ns-{}", i % 7),
                format!("pod-{i:05}"),
                format!("node-{}", i % 5),
                format!("p-{}", i % 3),
            )
        })
        .collect()
}

async fn run_many(store: &Store, cluster: &str, pods: &[(String, String, String, String, String)]) {
    let pods: Vec<Pod> = pods
        .iter()
        .map(|(a, b, c, d, e)| (a.as_str(), b.as_str(), c.as_str(), d.as_str(), e.as_str()))
        .collect();
    run(store, cluster, "demo", false, &pods).await;
}

/// Every page of a sorted list, following the cursors.
async fn walk(
    store: &Store,
    filter: &DecisionFilter,
    sort: DecisionSort,
    limit: u32,
) -> Vec<DecisionRecord> {
    let mut all = Vec::new();
    let mut after: Option<DecisionCursor> = None;
    loop {
        let (page, next) = store
            .list_decisions(filter, sort, after.as_ref(), limit)
            .await
            .unwrap();
        assert!(page.len() <= limit as usize);
        all.extend(page);
        match next {
            Some(cursor) => {
                cursor.check(sort).unwrap();
                after = Some(cursor);
            }
            None => return all,
        }
    }
}

#[tokio::test]
async fn every_sort_pages_through_exactly_the_sorted_list() {
    let (_dir, store) = open().await;
    run_many(&store, "east", &many(60)).await;
    // Some decided ones, so the status sort has more than one group.
    let (items, _) = store
        .list_decisions(&DecisionFilter::default(), DecisionSort::Oldest, None, 10)
        .await
        .unwrap();
    store
        .reject_decision(items[3].id, "bob", None, 0)
        .await
        .unwrap()
        .unwrap();
    store
        .approve_decision(items[4].id, "bob", None, 0, &templates())
        .await
        .unwrap();
    let everything = walk(
        &store,
        &DecisionFilter::default(),
        DecisionSort::Oldest,
        1000,
    )
    .await;
    assert_eq!(everything.len(), 60);
    for sort in DecisionSort::ALL {
        let mut expected = everything.clone();
        let key = |d: &DecisionRecord| match sort {
            DecisionSort::Newest | DecisionSort::Oldest => (String::new(), String::new()),
            DecisionSort::Namespace => (d.pod_namespace.clone(), d.pod_name.clone()),
            DecisionSort::Pod => (d.pod_name.clone(), d.pod_namespace.clone()),
            DecisionSort::Node => (d.node.clone(), String::new()),
            DecisionSort::Plugin => (d.plugin.clone(), String::new()),
            DecisionSort::Status => (status_rank(d.status).to_string(), String::new()),
        };
        expected.sort_by(|a, b| {
            key(a).cmp(&key(b)).then(if sort == DecisionSort::Oldest {
                a.id.cmp(&b.id)
            } else {
                b.id.cmp(&a.id)
            })
        });
        let expected: Vec<i64> = expected.iter().map(|d| d.id).collect();
        for limit in [1, 7, 60, 100] {
            let got: Vec<i64> = walk(&store, &DecisionFilter::default(), sort, limit)
                .await
                .iter()
                .map(|d| d.id)
                .collect();
            assert_eq!(got, expected, "sort {} by pages of {limit}", sort.as_str());
        }
    }
    // A cursor of one sort does not continue another.
    let (_, next) = store
        .list_decisions(&DecisionFilter::default(), DecisionSort::Node, None, 5)
        .await
        .unwrap();
    assert!(next.unwrap().check(DecisionSort::Pod).is_err());
}

fn status_rank(status: DecisionStatus) -> u8 {
    [
        DecisionStatus::Proposed,
        DecisionStatus::Approved,
        DecisionStatus::Executing,
        DecisionStatus::Succeeded,
        DecisionStatus::Failed,
        DecisionStatus::Rejected,
        DecisionStatus::Expired,
        DecisionStatus::Superseded,
    ]
    .iter()
    .position(|s| *s == status)
    .unwrap() as u8
}

#[tokio::test]
async fn the_pod_filter_is_a_case_insensitive_substring_of_namespace_and_name() {
    let (_dir, store) = open().await;
    run(
        &store,
        "east",
        "demo",
        false,
        &[WEB, DB, ("uid-x", "batch", "web_50%", "n1", "p")],
    )
    .await;
    for (search, expected) in [
        ("WEB", vec!["web-1", "web_50%"]),
        ("shop/", vec!["db-0", "web-1"]),
        ("p/db", vec!["db-0"]),
        ("_50%", vec!["web_50%"]),
        ("%", vec!["web_50%"]),
        ("nothing", vec![]),
    ] {
        let filter = DecisionFilter {
            pod: Some(search.to_string()),
            ..DecisionFilter::default()
        };
        let mut names: Vec<String> = walk(&store, &filter, DecisionSort::Pod, 10)
            .await
            .into_iter()
            .map(|d| d.pod_name)
            .collect();
        names.sort();
        assert_eq!(names, expected, "{search}");
        assert_eq!(
            store.count_decisions(&filter).await.unwrap(),
            expected.len() as u64
        );
    }
}

#[tokio::test]
async fn bulk_preview_changes_nothing_and_says_what_the_action_does() {
    let (_dir, store) = open().await;
    run_many(&store, "east", &many(120)).await;
    let (dry, _) = run(&store, "east", "dry-profile", true, &[WEB]).await;
    let filter = DecisionFilter {
        node: Some("node-1".into()),
        ..DecisionFilter::default()
    };
    let preview = store
        .act_on_matching(&filter, BulkAction::Reject, "bob", Some("no"), 0, true)
        .await
        .unwrap();
    assert_eq!(preview.matched, 24);
    assert_eq!(preview.acted.len(), 24);
    assert_eq!(preview.sample.len(), 24);
    assert!(
        preview
            .sample
            .iter()
            .all(|d| d.status == DecisionStatus::Proposed)
    );
    assert_eq!(
        store
            .count_decisions(&DecisionFilter {
                status: Some(DecisionStatus::Proposed),
                ..DecisionFilter::default()
            })
            .await
            .unwrap(),
        121,
        "a preview changed something"
    );
    let done = store
        .act_on_matching(&filter, BulkAction::Reject, "bob", Some("no"), 0, false)
        .await
        .unwrap();
    assert_eq!(done.acted, preview.acted);
    assert!(
        done.sample
            .iter()
            .all(|d| d.status == DecisionStatus::Rejected)
    );
    let history = store.decision_events(done.acted[0]).await.unwrap();
    assert_eq!(
        (history[0].actor.as_str(), history[0].comment.as_deref()),
        ("bob", Some("no"))
    );
    // Again: nothing left to reject.
    let again = store
        .act_on_matching(&filter, BulkAction::Reject, "bob", None, 0, false)
        .await
        .unwrap();
    assert_eq!(
        (again.matched, again.not_proposed, again.acted.len()),
        (24, 24, 0)
    );

    // Approving everything of the cluster: the sample is capped, dry runs and the TTL are
    // respected, each approval has its pod migration.
    let everything = DecisionFilter {
        cluster: Some("east".into()),
        ..DecisionFilter::default()
    };
    let templates = templates();
    let preview = store
        .act_on_matching(
            &everything,
            BulkAction::Approve(&templates),
            "al",
            None,
            0,
            true,
        )
        .await
        .unwrap();
    assert_eq!(
        (
            preview.matched,
            preview.acted.len(),
            preview.dry_run,
            preview.not_proposed
        ),
        (121, 96, 1, 24)
    );
    assert_eq!(preview.sample.len(), BULK_SAMPLE);
    assert_eq!(preview.sample[0].id, preview.acted[0], "newest first");
    let done = store
        .act_on_matching(
            &everything,
            BulkAction::Approve(&templates),
            "al",
            None,
            0,
            false,
        )
        .await
        .unwrap();
    assert_eq!(done.acted, preview.acted);
    let (migrations, _) = store
        .list_pod_migrations(&MigrationFilter::default(), 1000)
        .await
        .unwrap();
    assert_eq!(migrations.len(), 96);
    let m = migrations
        .iter()
        .find(|m| m.decision_id == done.acted[0])
        .unwrap();
    let d = store.get_decision(done.acted[0]).await.unwrap();
    assert_eq!(d.status, DecisionStatus::Approved);
    assert_eq!(
        (m.pod_uid.as_str(), m.mode.as_str()),
        (d.pod_uid.as_str(), "EvictDirectly")
    );
    let dry = &of_run(&store, dry).await["uid-web"];
    assert_eq!(dry.status, DecisionStatus::Proposed);

    // Past the TTL: expired instead, in the preview too.
    run_many(&store, "west", &many(3)).await;
    let west = DecisionFilter {
        cluster: Some("west".into()),
        ..DecisionFilter::default()
    };
    let future = now_ms() + 1_000;
    let preview = store
        .act_on_matching(
            &west,
            BulkAction::Approve(&templates),
            "al",
            None,
            future,
            true,
        )
        .await
        .unwrap();
    assert_eq!((preview.expired, preview.acted.len()), (3, 0));
    let done = store
        .act_on_matching(
            &west,
            BulkAction::Approve(&templates),
            "al",
            None,
            future,
            false,
        )
        .await
        .unwrap();
    assert_eq!(done.expired, 3);
    assert!(
        walk(&store, &west, DecisionSort::Newest, 10)
            .await
            .iter()
            .all(|d| d.status == DecisionStatus::Expired)
    );
}

/// 10,000 decisions (and as many superseded): a page and the total are quick. Timings are
/// printed, not asserted (machines differ); the query plans are what keep them quick.
#[tokio::test]
async fn a_page_and_the_total_of_ten_thousand_decisions() {
    let (_dir, store) = open().await;
    let pods = many(10_000);
    let started = std::time::Instant::now();
    run_many(&store, "east", &pods).await;
    let first = started.elapsed();
    let started = std::time::Instant::now();
    run_many(&store, "east", &pods).await;
    let superseding = started.elapsed();
    let proposed = DecisionFilter {
        status: Some(DecisionStatus::Proposed),
        ..DecisionFilter::default()
    };
    let started = std::time::Instant::now();
    let (page, next) = store
        .list_decisions(&proposed, DecisionSort::Newest, None, 100)
        .await
        .unwrap();
    let total = store.count_decisions(&proposed).await.unwrap();
    let newest = started.elapsed();
    assert_eq!((page.len(), total), (100, 10_000));
    let started = std::time::Instant::now();
    let (_, _) = store
        .list_decisions(&proposed, DecisionSort::Newest, next.as_ref(), 100)
        .await
        .unwrap();
    let second_page = started.elapsed();
    let started = std::time::Instant::now();
    let search = DecisionFilter {
        pod: Some("POD-099".into()),
        ..proposed.clone()
    };
    let (found, _) = store
        .list_decisions(&search, DecisionSort::Namespace, None, 100)
        .await
        .unwrap();
    let total_found = store.count_decisions(&search).await.unwrap();
    let searched = started.elapsed();
    assert_eq!((found.len(), total_found), (100, 100));
    assert_eq!(
        store
            .count_decisions(&DecisionFilter {
                status: Some(DecisionStatus::Superseded),
                ..DecisionFilter::default()
            })
            .await
            .unwrap(),
        10_000
    );
    eprintln!(
        "10,000 decisions: recorded in {first:?}, superseded by the next run in \
         {superseding:?}; first page + total {newest:?}, second page {second_page:?}, pod \
         search sorted by namespace + total {searched:?}"
    );
}

/// Migration 0011 on a database at 0010 that holds open duplicates: the newest open proposal
/// of each pod, profile and cluster stays; the others are superseded by it, with history.
#[tokio::test]
async fn migration_0011_supersedes_existing_open_duplicates() {
    let dir = tempfile::tempdir().unwrap();
    let file = {
        let (file, pool) = crate::tests::database_before(dir.path(), "0011").await;
        // Runs 1, 2, 4 real, 3 dry; decision id = run * 10 + n.
        sqlx::query(
            "INSERT INTO runs (id, cluster, cluster_revision, profile, status, started_at, \
             finished_at, dry_run) VALUES \
             (1, 'east', 1, 'demo', 'succeeded', 1, 1, 0), \
             (2, 'east', 1, 'demo', 'succeeded', 2, 2, 0), \
             (3, 'east', 1, 'demo', 'succeeded', 3, 3, 1), \
             (4, 'east', 1, 'other', 'succeeded', 4, 4, 0)",
        )
        .execute(&pool)
        .await
        .unwrap();
        let rows = [
            (11, 1, "demo", "uid-a", "proposed"),
            (12, 1, "demo", "uid-b", "proposed"),
            (13, 1, "demo", "uid-c", "approved"),
            (21, 2, "demo", "uid-a", "proposed"),
            (22, 2, "demo", "uid-c", "proposed"),
            (23, 2, "demo", "uid-d", "proposed"),
            (31, 3, "demo", "uid-a", "proposed"),
            (32, 3, "demo", "uid-b", "proposed"),
            (33, 3, "demo", "uid-b", "proposed"),
            (41, 4, "other", "uid-a", "proposed"),
        ];
        for (id, run, profile, uid, status) in rows {
            sqlx::query(
                "INSERT INTO decisions (id, run_id, cluster, profile, plugin_set, plugin, \
                 pod_uid, pod_namespace, pod_name, node, reason, status, created_at, updated_at) \
                 VALUES (?, ?, 'east', ?, 'default', 'P', ?, 'shop', ?, 'n1', 'r', ?, 1, 1)",
            )
            .bind(id)
            .bind(run)
            .bind(profile)
            .bind(uid)
            .bind(uid.trim_start_matches("uid-"))
            .bind(status)
            .execute(&pool)
            .await
            .unwrap();
        }
        // Rows that reference decisions survive the table's rebuild.
        sqlx::query(
            "INSERT INTO decision_events (decision_id, from_status, to_status, actor, time) \
             VALUES (13, 'proposed', 'approved', 'alice', 1)",
        )
        .execute(&pool)
        .await
        .unwrap();
        pool.close().await;
        file
    };
    let store = Store::open(&file).await.unwrap();
    let expected = [
        (11, DecisionStatus::Superseded, Some(21)),
        // b: the dry run's 32 and 33 do not supersede the real run's 12; 33 supersedes 32.
        (12, DecisionStatus::Proposed, None),
        (13, DecisionStatus::Approved, None),
        (21, DecisionStatus::Proposed, None),
        (22, DecisionStatus::Proposed, None),
        (23, DecisionStatus::Proposed, None),
        // a: the dry run's 31 is newer than the real 21 but cannot supersede it; itself it is
        // superseded by nothing (no newer open one).
        (31, DecisionStatus::Proposed, None),
        (32, DecisionStatus::Superseded, Some(33)),
        (33, DecisionStatus::Proposed, None),
        (41, DecisionStatus::Proposed, None),
    ];
    for (id, status, by) in expected {
        let d = store.get_decision(id).await.unwrap();
        assert_eq!((d.status, d.superseded_by), (status, by), "decision {id}");
    }
    let history = store.decision_events(11).await.unwrap();
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].actor, SUPERSEDE_ACTOR);
    assert_eq!(
        history[0].comment.as_deref(),
        Some("superseded by decision 21 (run 2)")
    );
    assert_eq!(store.decision_events(13).await.unwrap().len(), 1);
    // The schema takes the new status and foreign keys are on again.
    let fk: i64 = sqlx::query_scalar("PRAGMA foreign_keys")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(fk, 1);
    let violations: Vec<(String,)> =
        sqlx::query_as("SELECT \"table\" FROM pragma_foreign_key_check")
            .fetch_all(store.pool())
            .await
            .unwrap();
    assert!(violations.is_empty(), "{violations:?}");
    let (_, superseded) = run(
        &store,
        "east",
        "demo",
        false,
        &[("uid-a", "shop", "a", "n1", "P")],
    )
    .await;
    assert_eq!(superseded, [21, 31]);
}

/// Retention prunes superseded proposals as it does expired ones: with their history, once
/// their run is past the cutoff; the newer open proposal stays.
#[tokio::test]
async fn superseded_proposals_are_pruned_like_expired_ones() {
    let (_dir, store) = open().await;
    let (first, _) = run(&store, "east", "demo", false, &[WEB]).await;
    let old = of_run(&store, first).await["uid-web"].clone();
    let (second, superseded) = run(&store, "east", "demo", false, &[WEB]).await;
    assert_eq!(superseded, [old.id]);
    let cutoffs = PruneCutoffs {
        proposals: Some(now_ms() + 1_000),
        dry_run_proposals: Some(now_ms() + 1_000),
        ..PruneCutoffs::default()
    };
    let batch = store
        .prune(PruneRule::Proposals, &cutoffs, 100)
        .await
        .unwrap();
    assert_eq!(batch.pruned.decisions, 1, "{batch:?}");
    assert!(matches!(
        store.get_decision(old.id).await,
        Err(StoreError::NotFound { .. })
    ));
    assert!(store.decision_events(old.id).await.unwrap().is_empty());
    let open = &of_run(&store, second).await["uid-web"];
    assert_eq!(open.status, DecisionStatus::Proposed);
    assert_eq!(store.get_run(first).await.unwrap().decisions_pruned, 1);
}
