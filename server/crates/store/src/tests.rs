//! Every query of the store, against a real SQLite file.

use std::collections::BTreeMap;

use serde_json::json;

use super::*;

async fn open() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("test.db")).await.unwrap();
    (dir, store)
}

fn object(kind: &str, namespace: Option<&str>, name: &str) -> StoredObject {
    StoredObject {
        kind: kind.to_string(),
        api_version: "v1".to_string(),
        namespace: namespace.map(str::to_string),
        name: name.to_string(),
        uid: Some(format!("uid-{name}")),
        body: json!({"kind": kind, "metadata": {"name": name}}).to_string(),
    }
}

fn rows(objects: &[StoredObject]) -> impl ExactSizeIterator<Item = ObjectRow<'_>> + Send {
    objects.iter().map(|o| ObjectRow {
        kind: &o.kind,
        api_version: &o.api_version,
        namespace: o.namespace.as_deref(),
        name: &o.name,
        uid: o.uid.as_deref(),
        body: o.body.as_str().into(),
    })
}

fn state<'a>(
    name: &'a str,
    revision: i64,
    counts: &'a BTreeMap<String, u64>,
    warnings: &'a serde_json::Value,
) -> NewClusterState<'a> {
    NewClusterState {
        name,
        backend: "simulated",
        revision,
        snapshot_time_ms: 1_700_000_000_000 + revision,
        node_count: counts.get("Node").copied().unwrap_or(0) as i64,
        pod_count: counts.get("Pod").copied().unwrap_or(0) as i64,
        counts,
        warnings,
    }
}

#[tokio::test]
async fn open_creates_and_migrates_and_reopens() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested.db");
    let store = Store::open(&path).await.unwrap();
    store.ping().await.unwrap();
    let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(mode, "wal");
    let page_size: i64 = sqlx::query_scalar("PRAGMA page_size")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(page_size, 16384);
    store.close().await;
    assert!(path.exists());
    // Applying the migrations again is a no-op.
    let again = Store::open(&path).await.unwrap();
    assert!(again.list_clusters().await.unwrap().is_empty());
}

#[tokio::test]
async fn open_reports_the_path_when_it_cannot() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("missing-dir").join("x.db");
    let err = Store::open(&path).await.unwrap_err();
    assert!(matches!(err, StoreError::Open { .. }), "{err:?}");
    assert!(err.to_string().contains("missing-dir"), "{err}");
}

#[tokio::test]
async fn cluster_state_is_created_then_replaced_whole() {
    let (_dir, store) = open().await;
    assert_eq!(store.max_cluster_revision().await.unwrap(), 0);

    // More objects than one INSERT batch, so batching and the partial last batch both run.
    let mut objects = vec![object("Node", None, "n-0"), object("Node", None, "n-1")];
    objects.extend((0..2500).map(|i| object("Pod", Some("default"), &format!("p-{i}"))));
    let counts = BTreeMap::from([("Node".to_string(), 2), ("Pod".to_string(), 2500)]);
    let warnings = json!([{"code": "node-not-found", "count": 1, "message": "pod default/p-7"}]);
    let (record, created) = store
        .replace_cluster_state(&state("east", 1, &counts, &warnings), rows(&objects))
        .await
        .unwrap();
    assert!(created);
    assert_eq!(record.name, "east");
    assert_eq!(
        (
            record.revision,
            record.node_count,
            record.pod_count,
            record.object_count
        ),
        (1, 2, 2500, 2502)
    );
    assert_eq!(record.counts, counts);
    assert_eq!(record.warnings, warnings);
    assert_eq!(store.cluster_objects(record.id).await.unwrap(), objects);

    let fewer = vec![object("Node", None, "n-9")];
    let counts2 = BTreeMap::from([("Node".to_string(), 1)]);
    let (replaced, created) = store
        .replace_cluster_state(&state("east", 2, &counts2, &json!([])), rows(&fewer))
        .await
        .unwrap();
    assert!(!created);
    assert_eq!(replaced.id, record.id);
    assert_eq!(replaced.created_at, record.created_at);
    assert_eq!((replaced.revision, replaced.object_count), (2, 1));
    assert_eq!(replaced.warnings, json!([]));
    assert_eq!(store.cluster_objects(record.id).await.unwrap(), fewer);

    let (_, created) = store
        .replace_cluster_state(&state("a-west", 3, &counts2, &json!([])), rows(&fewer))
        .await
        .unwrap();
    assert!(created);
    let names: Vec<String> = store
        .list_clusters()
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(names, ["a-west", "east"]);
    assert_eq!(store.get_cluster("east").await.unwrap(), replaced);
    assert_eq!(store.max_cluster_revision().await.unwrap(), 3);
    let missing = store.get_cluster("nope").await.unwrap_err();
    assert!(matches!(missing, StoreError::NotFound { .. }));
    assert_eq!(missing.to_string(), "cluster \"nope\" not found");
}

fn policy<'a>(
    name: &'a str,
    digest: &'a str,
    wasm: &'a [u8],
    metadata: &'a serde_json::Value,
) -> NewPolicy<'a> {
    NewPolicy {
        name,
        version: "1.0.0",
        digest,
        abi_version: "1.0.0",
        wasm,
        metadata,
    }
}

#[tokio::test]
async fn policies_builtin_and_uploaded() {
    let (_dir, store) = open().await;
    let meta = json!({"name": "X", "extensionPoints": ["balance"]});
    store
        .upsert_builtin_policy(&policy("RemoveDuplicates", "d1", b"wasm-1", &meta))
        .await
        .unwrap();
    store
        .upsert_builtin_policy(&policy("Old", "d0", b"wasm-0", &meta))
        .await
        .unwrap();
    let first = store.get_policy("RemoveDuplicates").await.unwrap();
    assert!(first.builtin);
    assert_eq!(first.metadata, meta);
    // Same digest again: nothing changes.
    store
        .upsert_builtin_policy(&policy("RemoveDuplicates", "d1", b"wasm-1", &meta))
        .await
        .unwrap();
    assert_eq!(store.get_policy("RemoveDuplicates").await.unwrap(), first);

    let removed = store
        .remove_builtins_except(&["RemoveDuplicates"])
        .await
        .unwrap();
    assert_eq!(removed, ["Old"]);

    // An upload may not take a built-in's name.
    let clash = store
        .put_user_policy(&policy("RemoveDuplicates", "d9", b"x", &meta))
        .await
        .unwrap_err();
    assert!(matches!(clash, PutPolicyError::Builtin(ref n) if n == "RemoveDuplicates"));

    let (uploaded, created) = store
        .put_user_policy(&policy("Mine", "d2", b"mine-1", &meta))
        .await
        .unwrap();
    assert!(created && !uploaded.builtin);
    let (replaced, created) = store
        .put_user_policy(&policy("Mine", "d3", b"mine-2", &meta))
        .await
        .unwrap();
    assert!(!created);
    assert_eq!(replaced.digest, "d3");
    assert_eq!(replaced.created_at, uploaded.created_at);

    let names: Vec<(String, bool)> = store
        .list_policies()
        .await
        .unwrap()
        .into_iter()
        .map(|p| (p.name, p.builtin))
        .collect();
    assert_eq!(
        names,
        [
            ("Mine".to_string(), false),
            ("RemoveDuplicates".to_string(), true)
        ]
    );
    assert_eq!(
        store.user_policy_modules().await.unwrap(),
        [("Mine".to_string(), b"mine-2".to_vec())]
    );

    assert!(!store.delete_user_policy("RemoveDuplicates").await.unwrap());
    assert!(store.delete_user_policy("Mine").await.unwrap());
    assert!(!store.delete_user_policy("Mine").await.unwrap());
    assert!(matches!(
        store.get_policy("Mine").await,
        Err(StoreError::NotFound { .. })
    ));
}

#[tokio::test]
async fn profiles_put_get_list() {
    let (_dir, store) = open().await;
    let doc = json!({"kind": "DeschedulerPolicy", "profiles": []});
    let spec = json!({"pluginSets": []});
    assert!(
        store
            .create_profile_if_missing("default", &doc, &spec)
            .await
            .unwrap()
    );
    assert!(
        !store
            .create_profile_if_missing("default", &json!({}), &spec)
            .await
            .unwrap()
    );
    assert_eq!(store.get_profile("default").await.unwrap().document, doc);

    let (created, is_new) = store.put_profile("b", &doc, &spec).await.unwrap();
    assert!(is_new);
    let doc2 = json!({"kind": "DeschedulerPolicy", "profiles": [{"name": "x"}]});
    let (replaced, is_new) = store.put_profile("b", &doc2, &spec).await.unwrap();
    assert!(!is_new);
    assert_eq!(replaced.document, doc2);
    assert_eq!(replaced.created_at, created.created_at);
    let names: Vec<String> = store
        .list_profiles()
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.name)
        .collect();
    assert_eq!(names, ["b", "default"]);
    assert!(matches!(
        store.get_profile("zzz").await,
        Err(StoreError::NotFound { .. })
    ));
}

/// (uid, name) of decision `i`.
fn pod_names(i: usize) -> (String, String) {
    (format!("uid-{i}"), format!("pod-{i}"))
}

fn decision((uid, name): &(String, String)) -> NewDecision<'_> {
    NewDecision {
        plugin_set: "default",
        plugin: if uid.len().is_multiple_of(2) {
            "RemoveDuplicates"
        } else {
            "LowNodeUtilization"
        },
        pod_uid: uid,
        pod_namespace: "ns",
        pod_name: name,
        node: "n-1",
        reason: "duplicate",
    }
}

#[tokio::test]
async fn runs_finish_with_their_decisions_in_one_go() {
    let (_dir, store) = open().await;
    let run = store
        .insert_run(&NewRun::manual("east", 4, "default"))
        .await
        .unwrap();
    assert_eq!(run.status, RunStatus::Running);
    assert_eq!((run.cluster_revision, run.finished_at), (4, None));

    let pods: Vec<(String, String)> = (0..1203).map(pod_names).collect();
    let decisions: Vec<NewDecision> = pods.iter().map(decision).collect();
    let report = json!({"proposals": 1203});
    let finished_at = store
        .finish_run(
            run.id,
            RunEnd::Succeeded {
                report: &|_: &[usize]| report.to_string(),
                decisions: &decisions,
                state: &[],
            },
        )
        .await
        .unwrap()
        .finished_at;
    let done = store.get_run(run.id).await.unwrap();
    assert_eq!(done.status, RunStatus::Succeeded);
    assert_eq!(done.report, Some(report.clone()));
    assert_eq!(done.finished_at, Some(finished_at));
    assert_eq!(store.count_run_decisions(run.id).await.unwrap(), 1203);
    // A finished run cannot finish again.
    let again = store
        .finish_run(run.id, RunEnd::Failed { error: "x" })
        .await
        .unwrap_err();
    assert!(again.to_string().contains("already succeeded"), "{again}");
    assert!(matches!(
        store.finish_run(999, RunEnd::Failed { error: "x" }).await,
        Err(StoreError::NotFound { .. })
    ));

    let failed_run = store
        .insert_run(&NewRun::manual("east", 4, "broken"))
        .await
        .unwrap();
    store
        .finish_run(
            failed_run.id,
            RunEnd::Failed {
                error: "unknown plugin",
            },
        )
        .await
        .unwrap();
    let failed = store.get_run(failed_run.id).await.unwrap();
    assert_eq!(failed.status, RunStatus::Failed);
    assert_eq!(failed.error.as_deref(), Some("unknown plugin"));
    assert!(failed.report.is_none());

    let interrupted = store
        .insert_run(&NewRun::manual("east", 5, "default"))
        .await
        .unwrap();
    assert_eq!(store.fail_interrupted_runs("restarted").await.unwrap(), 1);
    let interrupted = store.get_run(interrupted.id).await.unwrap();
    assert_eq!(interrupted.status, RunStatus::Failed);
    assert_eq!(interrupted.error.as_deref(), Some("restarted"));

    let newest_first: Vec<i64> = store
        .list_runs(2, None)
        .await
        .unwrap()
        .iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(newest_first, [interrupted.id, failed.id]);
    let older: Vec<i64> = store
        .list_runs(2, Some(failed.id))
        .await
        .unwrap()
        .iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(older, [run.id]);
    assert!(matches!(
        store.get_run(12345).await,
        Err(StoreError::NotFound { .. })
    ));

    // Decisions: filter by run and status, page through with the cursor (oldest first: the
    // order they were proposed in).
    let other = store
        .insert_run(&NewRun::manual("west", 6, "default"))
        .await
        .unwrap();
    store
        .finish_run(
            other.id,
            RunEnd::Succeeded {
                report: &|_: &[usize]| "{}".to_string(),
                decisions: &[decision(&pod_names(0))],
                state: &[],
            },
        )
        .await
        .unwrap();
    let filter = DecisionFilter {
        run: Some(run.id),
        ..DecisionFilter::default()
    };
    let mut seen = Vec::new();
    let mut after = None;
    loop {
        let (page, next) = store
            .list_decisions(&filter, DecisionSort::Oldest, after.as_ref(), 500)
            .await
            .unwrap();
        assert!(page.iter().all(|d| d.run_id == run.id));
        seen.extend(page.iter().map(|d| d.pod_name.clone()));
        match next {
            Some(cursor) => after = Some(cursor),
            None => break,
        }
    }
    let expected: Vec<String> = (0..1203).map(|i| format!("pod-{i}")).collect();
    assert_eq!(seen, expected);

    let (all_proposed, next) = store
        .list_decisions(
            &DecisionFilter {
                status: Some(DecisionStatus::Proposed),
                ..DecisionFilter::default()
            },
            DecisionSort::Newest,
            None,
            1000,
        )
        .await
        .unwrap();
    assert_eq!(all_proposed.len(), 1000);
    assert!(next.is_some());
    assert_eq!(
        store
            .count_decisions(&DecisionFilter {
                status: Some(DecisionStatus::Proposed),
                ..DecisionFilter::default()
            })
            .await
            .unwrap(),
        1204
    );
    // Newest first: west's decision (recorded last) leads.
    assert_eq!(all_proposed[0].run_id, other.id);
    let (none, _) = store
        .list_decisions(
            &DecisionFilter {
                status: Some(DecisionStatus::Approved),
                ..DecisionFilter::default()
            },
            DecisionSort::Newest,
            None,
            10,
        )
        .await
        .unwrap();
    assert!(none.is_empty());

    let first = &all_proposed[0];
    let got = store.get_decision(first.id).await.unwrap();
    assert_eq!(&got, first);
    assert_eq!(
        (got.cluster.as_str(), got.profile.as_str(), got.status),
        ("west", "default", DecisionStatus::Proposed)
    );
    assert!(matches!(
        store.get_decision(-1).await,
        Err(StoreError::NotFound { .. })
    ));
}

#[test]
fn decision_status_names_round_trip() {
    for status in DecisionStatus::ALL {
        assert_eq!(status.as_str().parse::<DecisionStatus>().unwrap(), status);
    }
    let err = "done".parse::<DecisionStatus>().unwrap_err();
    assert!(err.to_string().contains("unknown decision status `done`"));
}

/// Scale check (not a timed assertion): the benchmark cluster's 155,000 objects, ~420 MB of
/// JSON, replaced in one transaction. `cargo test --release -p rebalancer-store --lib
/// tests::bulk_replace -- --ignored --nocapture`
#[tokio::test]
#[ignore]
async fn bulk_replace_of_a_large_cluster() {
    let (_dir, store) = open().await;
    let padding = "x".repeat(2600);
    let objects: Vec<StoredObject> = (0..155_000)
        .map(|i| {
            let mut o = object("Pod", Some("ns"), &format!("pod-{i}"));
            o.body = format!("{{\"metadata\":{{\"name\":\"pod-{i}\"}},\"pad\":\"{padding}\"}}");
            o
        })
        .collect();
    let bytes: usize = objects.iter().map(|o| o.body.len()).sum();
    let counts = BTreeMap::from([("Pod".to_string(), objects.len() as u64)]);
    for revision in 1..=2 {
        let started = std::time::Instant::now();
        store
            .replace_cluster_state(&state("big", revision, &counts, &json!([])), rows(&objects))
            .await
            .unwrap();
        eprintln!(
            "revision {revision}: {} objects, {} MB in {:.2} s",
            objects.len(),
            bytes >> 20,
            started.elapsed().as_secs_f64()
        );
    }
    let started = std::time::Instant::now();
    let id = store.get_cluster("big").await.unwrap().id;
    let loaded = store.cluster_objects(id).await.unwrap();
    assert_eq!(loaded.len(), objects.len());
    eprintln!("loaded back in {:.2} s", started.elapsed().as_secs_f64());
}

#[tokio::test]
async fn policy_state_commits_with_its_run_and_a_concurrent_commit_is_a_conflict() {
    use std::sync::Mutex;

    use crate::StateWrite;

    let (_dir, store) = open().await;
    let counts = BTreeMap::from([("Node".to_string(), 1u64)]);
    let warnings = json!([]);
    let state = NewClusterState {
        name: "east",
        backend: "simulated",
        revision: 1,
        snapshot_time_ms: 1,
        node_count: 1,
        pod_count: 0,
        counts: &counts,
        warnings: &warnings,
    };
    store
        .replace_cluster_state(&state, rows(&[object("Node", None, "n1")]))
        .await
        .unwrap();
    assert!(
        store
            .load_policy_state("east", "default")
            .await
            .unwrap()
            .is_empty()
    );

    // Two runs load the empty scope; the first commits, the second conflicts.
    let finish = |data: &'static [u8], base_version: i64| {
        let store = store.clone();
        async move {
            let run = store
                .insert_run(&NewRun::manual("east", 1, "default"))
                .await
                .unwrap();
            let seen = Mutex::new(Vec::new());
            let report = |c: &[usize]| {
                *seen.lock().unwrap() = c.to_vec();
                json!({"conflicts": c}).to_string()
            };
            let writes = [StateWrite {
                plugin_set: "default",
                policy: "LowNodeLoad",
                base_version,
                data,
            }];
            store
                .finish_run(
                    run.id,
                    RunEnd::Succeeded {
                        report: &report,
                        decisions: &[],
                        state: &writes,
                    },
                )
                .await
                .unwrap();
            let conflicts = seen.into_inner().unwrap();
            (run.id, conflicts)
        }
    };
    let (first, conflicts) = finish(b"one", 0).await;
    assert!(conflicts.is_empty());
    let (second, conflicts) = finish(b"two", 0).await;
    assert_eq!(conflicts, [0]);
    assert_eq!(
        store.get_run(second).await.unwrap().report,
        Some(json!({"conflicts": [0]}))
    );
    let loaded = store.load_policy_state("east", "default").await.unwrap();
    assert_eq!(loaded.len(), 1);
    assert_eq!((loaded[0].version, &loaded[0].data[..]), (1, &b"one"[..]));
    assert_eq!(
        (loaded[0].plugin_set.as_str(), loaded[0].policy.as_str()),
        ("default", "LowNodeLoad")
    );
    let _ = first;
    // From version 1: the next commit moves it to 2; a stale one (from 1 again) conflicts.
    assert!(finish(b"three", 1).await.1.is_empty());
    assert_eq!(finish(b"four", 1).await.1, [0]);
    let loaded = store.load_policy_state("east", "default").await.unwrap();
    assert_eq!((loaded[0].version, &loaded[0].data[..]), (2, &b"three"[..]));
    // Other profiles and clusters have their own scopes.
    assert!(
        store
            .load_policy_state("east", "other")
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .load_policy_state("west", "default")
            .await
            .unwrap()
            .is_empty()
    );

    // Deleting the cluster's row deletes its state.
    sqlx::query("DELETE FROM clusters WHERE name = 'east'")
        .execute(&store.pool)
        .await
        .unwrap();
    let left: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM policy_state")
        .fetch_one(&store.pool)
        .await
        .unwrap();
    assert_eq!(left, 0);
}

#[tokio::test]
async fn arbitration_knobs_global_and_per_cluster_go_with_the_cluster() {
    let (_dir, store) = open().await;
    let counts = BTreeMap::from([("Node".to_string(), 1u64)]);
    let warnings = json!([]);
    for name in ["east", "west"] {
        store
            .replace_cluster_state(
                &state(name, 1, &counts, &warnings),
                rows(&[object("Node", None, "n1")]),
            )
            .await
            .unwrap();
    }
    assert_eq!(store.arbitration_config().await.unwrap(), None);
    store
        .put_arbitration_config(&json!({"maxMigratingPerNode": 3}))
        .await
        .unwrap();
    assert_eq!(
        store.arbitration_config().await.unwrap(),
        Some(json!({"maxMigratingPerNode": 3}))
    );

    // A cluster follows the global knobs until it has its own; unknown clusters are NotFound.
    assert_eq!(
        store.cluster_arbitration_config("east").await.unwrap(),
        None
    );
    for missing in [
        store.cluster_arbitration_config("north").await.err(),
        store
            .put_cluster_arbitration_config("north", &json!({}))
            .await
            .err(),
        store.delete_cluster_arbitration_config("north").await.err(),
    ] {
        assert!(
            matches!(missing, Some(StoreError::NotFound { ref what }) if what == "cluster \"north\""),
            "{missing:?}"
        );
    }
    store
        .put_cluster_arbitration_config("east", &json!({"maxMigratingPerNode": 1}))
        .await
        .unwrap();
    store
        .put_cluster_arbitration_config("east", &json!({"maxMigratingPerNode": 5}))
        .await
        .unwrap();
    store
        .put_cluster_arbitration_config("west", &json!({"evictQPS": 1.0}))
        .await
        .unwrap();
    assert_eq!(
        store.cluster_arbitration_config("east").await.unwrap(),
        Some(json!({"maxMigratingPerNode": 5}))
    );
    assert_eq!(
        store.cluster_arbitration_configs().await.unwrap(),
        [
            ("east".to_string(), json!({"maxMigratingPerNode": 5})),
            ("west".to_string(), json!({"evictQPS": 1.0})),
        ]
    );
    assert!(
        store
            .delete_cluster_arbitration_config("west")
            .await
            .unwrap()
    );
    assert!(
        !store
            .delete_cluster_arbitration_config("west")
            .await
            .unwrap()
    );

    // Deleting the cluster deletes its knobs, and says so; a new cluster of the same name
    // starts with the global ones.
    let ClusterDeletion::Deleted(deleted) = store.delete_cluster("east", "test").await.unwrap()
    else {
        panic!("east has no pod migrations");
    };
    assert!(deleted.arbitration_config);
    let ClusterDeletion::Deleted(deleted) = store.delete_cluster("west", "test").await.unwrap()
    else {
        panic!("west has no pod migrations");
    };
    assert!(!deleted.arbitration_config);
    assert!(
        store
            .cluster_arbitration_configs()
            .await
            .unwrap()
            .is_empty()
    );
    store
        .replace_cluster_state(
            &state("east", 2, &counts, &warnings),
            rows(&[object("Node", None, "n1")]),
        )
        .await
        .unwrap();
    assert_eq!(
        store.cluster_arbitration_config("east").await.unwrap(),
        None
    );
}

/// Migration 0007 rebuilds `api_tokens` (the `operator` role in its CHECK, `expires_at`): a
/// database migrated before it keeps its tokens, ids and all, and they never expire.
/// A database file in `dir` migrated up to, not including, migration `version` (e.g. "0007"),
/// with a pool on it (foreign keys on, as the store has them): the state an older server left,
/// for a migration's test to fill and then open with [`Store::open`].
pub(crate) async fn database_before(
    dir: &std::path::Path,
    version: &str,
) -> (std::path::PathBuf, SqlitePool) {
    let before = dir.join(format!("before-{version}"));
    std::fs::create_dir(&before).unwrap();
    let all = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../migrations");
    for entry in std::fs::read_dir(&all).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        if name.as_str() < version {
            std::fs::copy(&path, before.join(&name)).unwrap();
        }
    }
    let file = dir.join("old.db");
    let options = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(&file)
        .create_if_missing(true)
        .foreign_keys(true);
    let pool = SqlitePool::connect_with(options).await.unwrap();
    sqlx::migrate::Migrator::new(before.as_path())
        .await
        .unwrap()
        .run(&pool)
        .await
        .unwrap();
    (file, pool)
}

#[tokio::test]
async fn tokens_survive_the_api_tokens_rebuild() {
    let dir = tempfile::tempdir().unwrap();
    let file = {
        let (file, pool) = database_before(dir.path(), "0007").await;
        sqlx::query(
            "INSERT INTO api_tokens (id, name, role, token_hash, origin, created_by, created_at) \
             VALUES (7, 'on-call', 'approver', 'h-on-call', 'api', 'admin', 1000)",
        )
        .execute(&pool)
        .await
        .unwrap();
        pool.close().await;
        file
    };
    let store = Store::open(&file).await.unwrap();
    let token = store.token_by_hash("h-on-call").await.unwrap().unwrap();
    assert_eq!(
        (token.id, token.name.as_str(), token.role, token.expires_at),
        (7, "on-call", Role::Approver, None)
    );
    assert_eq!(token.created_by.as_deref(), Some("admin"));
    store
        .insert_token(&NewToken {
            name: "ci",
            role: Role::Operator,
            hash: "h-ci",
            origin: TokenOrigin::Api,
            created_by: None,
            expires_at: Some(2_000),
        })
        .await
        .unwrap();
    let roles: Vec<Role> = store
        .list_tokens()
        .await
        .unwrap()
        .iter()
        .map(|t| t.role)
        .collect();
    assert_eq!(roles, [Role::Approver, Role::Operator]);
}

#[tokio::test]
async fn a_run_whose_cluster_was_deleted_meanwhile_fails_and_leaves_nothing_to_a_new_one() {
    use crate::StateWrite;

    let (_dir, store) = open().await;
    let counts = BTreeMap::from([("Node".to_string(), 1u64)]);
    let warnings = json!([]);
    let push = || async {
        store
            .replace_cluster_state(
                &state("east", 1, &counts, &warnings),
                rows(&[object("Node", None, "n1")]),
            )
            .await
            .unwrap()
    };
    let decisions = [NewDecision {
        plugin_set: "default",
        plugin: "RemoveDuplicates",
        pod_uid: "uid-a",
        pod_namespace: "shop",
        pod_name: "a",
        node: "n1",
        reason: "duplicate",
    }];
    let writes = [StateWrite {
        plugin_set: "default",
        policy: "DefaultEvictor",
        base_version: 0,
        data: b"cooldown",
    }];
    let finish = |run: i64| {
        let store = store.clone();
        async move {
            store
                .finish_run(
                    run,
                    RunEnd::Succeeded {
                        report: &|_: &[usize]| "{}".to_string(),
                        decisions: &decisions,
                        state: &writes,
                    },
                )
                .await
        }
    };
    let first = push().await.0;

    // Deleted and pushed again while the run was in progress: a new cluster, not the run's.
    let run = store
        .insert_run(&NewRun::manual("east", 1, "default"))
        .await
        .unwrap();
    assert!(matches!(
        store.delete_cluster("east", "alice").await.unwrap(),
        ClusterDeletion::Deleted(_)
    ));
    let second = push().await.0;
    // SQLite gave the new cluster the old one's id back; its incarnation is new.
    assert_eq!(first.id, second.id);
    assert_ne!(first.incarnation, second.incarnation);
    match finish(run.id).await {
        Err(StoreError::ClusterGone { run: id, cluster }) => {
            assert_eq!((id, cluster.as_str()), (run.id, "east"));
        }
        other => panic!("{other:?}"),
    }
    let failed = store.get_run(run.id).await.unwrap();
    assert_eq!(failed.status, RunStatus::Failed);
    assert!(
        failed
            .error
            .as_deref()
            .unwrap_or_default()
            .contains("was deleted while the run was in progress"),
        "{failed:?}"
    );
    assert!(
        store
            .load_policy_state("east", "default")
            .await
            .unwrap()
            .is_empty()
    );
    let count: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM decisions WHERE run_id = ?")
        .bind(run.id)
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(count, 0);

    // Deleted and not pushed again: the same.
    let run = store
        .insert_run(&NewRun::manual("east", 1, "default"))
        .await
        .unwrap();
    store.delete_cluster("east", "alice").await.unwrap();
    assert!(matches!(
        finish(run.id).await,
        Err(StoreError::ClusterGone { .. })
    ));

    // A run on the cluster as it still is keeps its proposals and state.
    push().await;
    let run = store
        .insert_run(&NewRun::manual("east", 1, "default"))
        .await
        .unwrap();
    finish(run.id).await.unwrap();
    assert_eq!(
        store.get_run(run.id).await.unwrap().status,
        RunStatus::Succeeded
    );
    assert_eq!(
        store
            .load_policy_state("east", "default")
            .await
            .unwrap()
            .len(),
        1
    );
}
