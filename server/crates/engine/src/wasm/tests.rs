//! Engine tests with real modules: the built-ins, the misbehaving test policy, and hand-written
//! components (WAT) that break the upload rules.

use std::sync::{Arc, OnceLock};

use rebalancer_policy_sdk::ExtensionPoint;
use rebalancer_policy_sdk::evictor::{DefaultEvictorArgs, EvictorConfig, Limits, RunState};
use serde_json::json;

use super::*;
use rebalancer_cluster::{self as cluster, ClusterSnapshot};

fn test_limits() -> SandboxLimits {
    SandboxLimits {
        timeout_ms: 1_000,
        // Enough for the test clusters; small, so that the memory bomb reaches it well within
        // the deadline even on a loaded 2-core machine (every page it touches is a fresh one).
        memory_bytes: 64 << 20,
        max_proposals: 10_000,
        max_log_bytes: 64 << 10,
        ..SandboxLimits::default()
    }
}

/// One engine per test binary: compiling a module takes a while in debug builds.
fn engine() -> &'static Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE.get_or_init(|| {
        Engine::new(EngineConfig {
            limits: test_limits(),
            ..EngineConfig::default()
        })
        .expect("engine")
    })
}

fn module(file: &str) -> Vec<u8> {
    let path = std::path::Path::new(rebalancer_builtins::WASM_DIR).join(file);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn misbehaving() -> Arc<CompiledPolicy> {
    engine()
        .compile(&module("test_misbehaving.wasm"))
        .expect("the test policy compiles")
}

fn wat(text: &str) -> Vec<u8> {
    wat::parse_str(text).expect("valid WAT")
}

fn small_cluster() -> Arc<ClusterSnapshot> {
    let mut items = vec![];
    for n in 0..3 {
        items.push(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": format!("node-{n}"), "uid": format!("uid-node-{n}")},
            "status": {
                "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}]
            }
        }));
    }
    for p in 0..6 {
        items.push(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": format!("web-{p}"), "namespace": "shop", "uid": format!("uid-web-{p}"),
                "creationTimestamp": "2020-01-01T00:00:00Z",
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web",
                                     "uid": "rs-web", "controller": true}]
            },
            "spec": {"nodeName": "node-0", "containers": [{"name": "c", "image": "nginx",
                     "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]},
            "status": {"phase": "Running", "startTime": "2020-01-01T00:00:00Z",
                       "conditions": [{"type": "Ready", "status": "True"}]}
        }));
    }
    let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
    let objects = cluster::parse_list(list.to_string().as_bytes(), cluster::Format::Json)
        .expect("test cluster parses");
    Arc::new(cluster::build_snapshot(&objects, 1, 1_700_000_000_000).expect("snapshot"))
}

fn session(snapshot: &Arc<ClusterSnapshot>) -> EvalSession {
    let cluster = snapshot.cluster();
    let config =
        EvictorConfig::resolve(&DefaultEvictorArgs::default(), cluster).expect("default evictor");
    EvalSession {
        snapshot: snapshot.clone(),
        index: snapshot.index(),
        config: Arc::new(config),
        nodes: Arc::new(cluster.nodes().map(|n| n.id).collect()),
        state: RunState::new(cluster, Limits::default()),
        plugin: "TestMisbehaving".into(),
        plugin_set: "default".into(),
        scope: Default::default(),
    }
}

/// Run a behaviour of the test policy; `count: None` uses the behaviour's own default.
fn run_behaviour(behaviour: &str, count: Option<u32>) -> Evaluation {
    let policy = misbehaving();
    let snapshot = small_cluster();
    engine().evaluate(
        &policy,
        ExtensionPoint::Deschedule,
        &json!({"behaviour": behaviour, "count": count}),
        session(&snapshot),
    )
}

fn failure_kind(evaluation: &Evaluation) -> String {
    match &evaluation.outcome {
        Ok(()) => "ok".into(),
        Err(f) => f.kind.clone(),
    }
}

#[test]
fn built_ins_compile_with_their_metadata() {
    let mut names = vec![];
    for (file, bytes) in rebalancer_builtins::modules() {
        let policy = engine()
            .compile(bytes)
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(policy.meta.abi_version, ABI_VERSION);
        assert_eq!(policy.meta.digest.len(), 64);
        assert!(policy.meta.args_schema.is_object());
        assert!(
            policy.meta.implements(ExtensionPoint::Balance)
                || policy.meta.implements(ExtensionPoint::Deschedule),
            "{file}"
        );
        names.push(policy.meta.name.clone());
    }
    names.sort();
    assert_eq!(
        names,
        [
            "CpuOrchestration",
            "HighNodeUtilization",
            "LowNodeLoad",
            "LowNodeUtilization",
            "PodLifeTime",
            "RemoveDuplicates",
            "RemoveFailedPods",
            "RemovePodsHavingTooManyRestarts",
            "RemovePodsViolatingInterPodAntiAffinity",
            "RemovePodsViolatingNodeAffinity",
            "RemovePodsViolatingNodeTaints",
            "RemovePodsViolatingTopologySpreadConstraint",
        ]
    );
}

#[test]
fn a_module_is_compiled_once_per_digest() {
    let a = misbehaving();
    let b = misbehaving();
    assert!(Arc::ptr_eq(&a, &b));
}

/// An engine of its own that compiles in process, keeping artifacts in `dir`.
fn caching_engine(dir: &std::path::Path, memory_cache_bytes: usize) -> Engine {
    Engine::new(EngineConfig {
        limits: test_limits(),
        compile: CompileSettings {
            cache_dir: Some(dir.to_path_buf()),
            memory_cache_bytes,
            ..CompileSettings::default()
        },
    })
    .expect("engine")
}

fn artifacts(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn compiled_code_is_kept_on_disk_and_a_new_engine_loads_it_instead_of_compiling() {
    let dir = tempfile::tempdir().unwrap();
    let wasm = module("remove_failed_pods.wasm");
    let first = caching_engine(dir.path(), 64 << 20);
    let compiled = first.compile(&wasm).expect("compiles");
    assert_eq!(first.compile_stats().compiled, 1);
    let files = artifacts(dir.path());
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(files[0].starts_with(&compiled.meta.digest), "{files:?}");
    assert!(files[0].ends_with(".cwasm"), "{files:?}");

    // A restart: a new engine finds the artifact and does not compile.
    let second = caching_engine(dir.path(), 64 << 20);
    let loaded = second.compile(&wasm).expect("loads");
    assert_eq!(
        second.compile_stats(),
        CompileStats {
            compiled: 0,
            loaded: 1
        }
    );
    assert_eq!(loaded.meta.name, compiled.meta.name);
    assert_eq!(loaded.meta.digest, compiled.meta.digest);

    // A damaged artifact is not trusted: it is compiled again and replaced.
    std::fs::write(dir.path().join(&files[0]), b"not an artifact").unwrap();
    let third = caching_engine(dir.path(), 64 << 20);
    third.compile(&wasm).expect("compiles again");
    assert_eq!(third.compile_stats().compiled, 1);
    assert!(std::fs::read(dir.path().join(&files[0])).unwrap().len() > 1000);

    // Forgetting the module removes its artifact; retain removes everything not named.
    third.forget(&compiled.meta.digest);
    assert!(artifacts(dir.path()).is_empty());
    third.compile(&wasm).unwrap();
    std::fs::write(dir.path().join("stale.0.cwasm"), b"x").unwrap();
    // A temporary file another compile may be writing stays; one left by a killed compile long
    // ago goes.
    std::fs::write(dir.path().join(".being.written.now.tmp"), b"x").unwrap();
    let stale = dir.path().join(".left.by.a.killed.compile.tmp");
    std::fs::write(&stale, b"x").unwrap();
    std::fs::File::options()
        .write(true)
        .open(&stale)
        .unwrap()
        .set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(3600))
        .unwrap();
    assert_eq!(third.retain_compiled(&[&compiled.meta.digest]), 2);
    std::fs::remove_file(dir.path().join(".being.written.now.tmp")).unwrap();
    assert_eq!(artifacts(dir.path()), files);
    assert_eq!(third.retain_compiled(&[]), 1);
    assert!(artifacts(dir.path()).is_empty());
}

#[test]
fn the_in_memory_cache_keeps_the_most_recently_used_code_within_its_budget() {
    let dir = tempfile::tempdir().unwrap();
    let files = [
        "remove_failed_pods.wasm",
        "pod_life_time.wasm",
        "remove_duplicates.wasm",
    ];
    // Measure one module's compiled code, then allow a little more than two of the largest.
    let sizes: Vec<usize> = files
        .iter()
        .map(|f| {
            let e = caching_engine(dir.path(), usize::MAX);
            e.compile(&module(f)).unwrap();
            compile::lru_tests::lru_bytes(&e.inner.compiler)
        })
        .collect();
    let budget = sizes.iter().max().unwrap() * 2 + sizes.iter().min().unwrap() / 2;
    let engine = caching_engine(dir.path(), budget);
    let digests: Vec<String> = files
        .iter()
        .map(|f| engine.compile(&module(f)).unwrap().meta.digest.clone())
        .collect();
    let kept = compile::lru_tests::lru_digests(&engine.inner.compiler);
    assert!(compile::lru_tests::lru_bytes(&engine.inner.compiler) <= budget);
    assert_eq!(kept.len(), 2, "{kept:?}");
    assert!(
        !kept.contains(&digests[0]),
        "the least recently used went first"
    );

    // Using the oldest survivor makes the other one the next to go.
    engine.compile(&module(files[1])).unwrap();
    engine.compile(&module(files[0])).unwrap();
    let kept = compile::lru_tests::lru_digests(&engine.inner.compiler);
    assert!(
        kept.contains(&digests[0]) && kept.contains(&digests[1]),
        "{kept:?}"
    );
    assert!(!kept.contains(&digests[2]));

    // A forgotten (deleted, replaced) module leaves memory too.
    engine.forget(&digests[0]);
    assert_eq!(
        compile::lru_tests::lru_digests(&engine.inner.compiler),
        vec![digests[1].clone()]
    );
}

#[test]
fn uploads_outside_the_abi_are_refused_with_actionable_errors() {
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("text", b"definitely not wasm".to_vec(), "not_wasm"),
        ("core module", wat("(module)"), "not_a_component"),
        ("no exports", wat("(component)"), "missing_export"),
        (
            "filesystem",
            wat(r#"(component (import "wasi:filesystem/types@0.2.6" (instance)))"#),
            "forbidden_import",
        ),
        (
            "sockets",
            wat(r#"(component (import "wasi:sockets/tcp@0.2.6" (instance)))"#),
            "forbidden_import",
        ),
        (
            "random",
            wat(r#"(component (import "wasi:random/random@0.2.6" (instance)))"#),
            "forbidden_import",
        ),
        (
            "clocks",
            wat(r#"(component (import "wasi:clocks/wall-clock@0.2.6" (instance)))"#),
            "forbidden_import",
        ),
        (
            "http",
            wat(r#"(component (import "wasi:http/outgoing-handler@0.2.6" (instance)))"#),
            "forbidden_import",
        ),
        (
            "abi major 2",
            wat(r#"(component (import "rebalancer:policy/cluster@2.0.0" (instance)))"#),
            "abi_mismatch",
        ),
        (
            "newer abi minor",
            wat(r#"(component (import "rebalancer:policy/cluster@1.9.0" (instance)))"#),
            "abi_mismatch",
        ),
        (
            "abi 1.0 (snapshot layout 1)",
            wat(r#"(component (import "rebalancer:policy/cluster@1.0.0" (instance)))"#),
            "abi_mismatch",
        ),
    ];
    for (what, bytes, code) in cases {
        let error = engine().compile(&bytes).expect_err(what);
        assert_eq!(error.code(), code, "{what}: {error}");
        assert!(!error.to_string().is_empty());
    }
}

#[test]
fn a_module_over_the_size_cap_is_refused() {
    let small = Engine::new(EngineConfig {
        limits: SandboxLimits {
            max_module_bytes: 1024,
            ..test_limits()
        },
        ..EngineConfig::default()
    })
    .unwrap();
    let error = small.compile(&module("test_misbehaving.wasm")).unwrap_err();
    assert_eq!(error.code(), "module_too_large");
}

#[test]
fn args_are_validated_by_the_policy() {
    let policy = misbehaving();
    assert!(
        engine()
            .validate_args(&policy, &json!({"behaviour": "none"}))
            .is_ok()
    );
    let errors = engine()
        .validate_args(&policy, &json!({"behaviour": "none", "bogus": 1}))
        .unwrap_err();
    assert!(errors[0].message.contains("bogus"), "{errors:?}");
}

#[test]
fn a_well_behaved_evaluation_proposes_through_the_evictor() {
    let evaluation = run_behaviour("propose", Some(2));
    assert_eq!(failure_kind(&evaluation), "ok");
    assert_eq!(evaluation.state.proposals().len(), 2);
    assert!(evaluation.peak_memory > 0);
}

#[test]
fn an_infinite_loop_times_out() {
    let evaluation = run_behaviour("infinite-loop", None);
    assert_eq!(failure_kind(&evaluation), "timeout");
    assert!(
        evaluation.duration.as_millis() >= 900,
        "{:?}",
        evaluation.duration
    );
}

#[test]
fn a_memory_bomb_hits_the_memory_cap() {
    let evaluation = run_behaviour("memory-bomb", None);
    assert_eq!(
        failure_kind(&evaluation),
        "memory",
        "{:?}",
        evaluation.outcome
    );
}

#[test]
fn deep_recursion_overflows_the_stack() {
    // Rust guests keep their frames on a shadow stack in linear memory, which runs out before
    // the wasm stack does: either way the evaluation ends with a recorded error naming it.
    let evaluation = run_behaviour("deep-recursion", None);
    let failure = evaluation.outcome.as_ref().unwrap_err();
    assert!(
        failure.kind == "stack-overflow"
            || (failure.kind == "trap" && failure.message.contains("recursion")),
        "{failure:?}"
    );
}

#[test]
fn a_panic_is_recorded_with_its_message() {
    let evaluation = run_behaviour("panic", None);
    assert_eq!(failure_kind(&evaluation), "panic");
    let message = &evaluation.outcome.as_ref().unwrap_err().message;
    assert!(message.contains("TestMisbehaving"), "{message}");
}

#[test]
fn a_trap_is_recorded() {
    assert_eq!(failure_kind(&run_behaviour("trap", None)), "trap");
}

#[test]
fn a_proposal_flood_hits_the_cap_and_keeps_what_was_admitted() {
    let evaluation = run_behaviour("flood-proposals", None);
    assert_eq!(failure_kind(&evaluation), "proposal-cap");
    assert!(evaluation.proposal_calls > test_limits().max_proposals);
}

#[test]
fn a_batched_proposal_flood_hits_the_cap() {
    let evaluation = run_behaviour("flood-proposal-batches", None);
    assert_eq!(failure_kind(&evaluation), "proposal-cap");
    assert!(evaluation.proposal_calls > test_limits().max_proposals);
    // The pods within the cap were proposed: every pod of the cluster once, the rest refused.
    assert_eq!(evaluation.state.proposals().len(), 6);
}

#[test]
fn batched_proposals_decide_exactly_as_single_ones() {
    let policy = misbehaving();
    let snapshot = small_cluster();
    let limited = |snapshot: &Arc<ClusterSnapshot>| {
        let mut session = session(snapshot);
        // All six pods are on node-0: the last two are refused by the node limit.
        session.state = RunState::new(
            snapshot.cluster(),
            Limits {
                per_node: Some(4),
                ..Limits::default()
            },
        );
        session
    };
    let run = |behaviour: &str| {
        let evaluation = engine().evaluate(
            &policy,
            ExtensionPoint::Deschedule,
            &json!({"behaviour": behaviour, "count": 6}),
            limited(&snapshot),
        );
        assert_eq!(failure_kind(&evaluation), "ok", "{behaviour}");
        evaluation
    };
    let single = run("propose");
    let batched = run("propose-batch");
    let pods = |e: &Evaluation| {
        (
            e.state
                .proposals()
                .iter()
                .map(|p| p.pod)
                .collect::<Vec<_>>(),
            e.state
                .refusals()
                .iter()
                .map(|r| (r.pod, r.refusal.clone()))
                .collect::<Vec<_>>(),
        )
    };
    assert_eq!(pods(&single).0.len(), 4);
    assert_eq!(pods(&single).1.len(), 2);
    assert_eq!(pods(&batched), pods(&single));
    assert_eq!(batched.proposal_calls, single.proposal_calls);
    assert_eq!(batched.logs, single.logs);
}

#[test]
fn a_log_flood_hits_the_cap() {
    assert_eq!(failure_kind(&run_behaviour("flood-logs", None)), "log-cap");
}

#[test]
fn the_engine_keeps_working_after_failures() {
    for behaviour in ["infinite-loop", "trap", "panic"] {
        assert_ne!(failure_kind(&run_behaviour(behaviour, None)), "ok");
        assert_eq!(failure_kind(&run_behaviour("propose", Some(1))), "ok");
    }
}

#[test]
fn sections_are_mapped_into_the_guest_and_its_writes_stay_in_its_sandbox() {
    let snapshot = small_cluster();
    #[cfg(target_os = "linux")]
    assert!(
        snapshot.archive().is_mappable(),
        "the archive lives in a sealed file"
    );
    let before = snapshot.archive_bytes().to_vec();

    // The guest overwrites its placed copy of the core, checks that the writes took, and then
    // proposes: it still reads the real snapshot through the SDK's own placement.
    let evaluation = engine().evaluate(
        &misbehaving(),
        ExtensionPoint::Deschedule,
        &json!({"behaviour": "scribble-snapshot", "count": 2}),
        session(&snapshot),
    );
    assert_eq!(failure_kind(&evaluation), "ok", "{:?}", evaluation.outcome);
    assert_eq!(evaluation.state.proposals().len(), 2);
    // The guest's own placement and the SDK's: one record, two calls.
    let core: Vec<&SectionUse> = evaluation
        .sections
        .iter()
        .filter(|u| u.section == Section::Core)
        .collect();
    assert!(
        core.len() == 1 && core[0].calls >= 2,
        "{:?}",
        evaluation.sections
    );
    assert_eq!(
        snapshot.archive_bytes(),
        &before[..],
        "the archive is untouched"
    );

    // A later evaluation on the same snapshot sees the original bytes.
    let again = engine().evaluate(
        &misbehaving(),
        ExtensionPoint::Deschedule,
        &json!({"behaviour": "propose", "count": 2}),
        session(&snapshot),
    );
    assert_eq!(failure_kind(&again), "ok");
    assert_eq!(again.state.proposals(), evaluation.state.proposals());
}

#[test]
fn map_section_at_an_unaligned_offset_ends_the_evaluation_with_the_rule_it_broke() {
    let evaluation = run_behaviour("map-section-unaligned", None);
    let failure = evaluation.outcome.as_ref().unwrap_err();
    assert_eq!(failure.kind, "trap", "{failure:?}");
    assert!(
        failure.message.contains("map-section") && failure.message.contains("65536"),
        "{failure:?}"
    );
}

/// `remove_failed_pods.wasm` as built against ABI 1.1 (commit 4048ca9, `policy` profile): it
/// pulls sections with `cluster.snapshot-section` copies, not `map-section`.
const ABI_1_1_REMOVE_FAILED_PODS: &[u8] =
    include_bytes!("../../tests/fixtures/abi-1.1/remove_failed_pods.wasm");

/// `remove_failed_pods.wasm` and `remove_duplicates.wasm` as built against ABI 1.2 (commit
/// 06710b4, `policy` profile): they read snapshot layout 2 and map sections in place.
const ABI_1_2_REMOVE_FAILED_PODS: &[u8] =
    include_bytes!("../../tests/fixtures/abi-1.2/remove_failed_pods.wasm");
const ABI_1_2_REMOVE_DUPLICATES: &[u8] =
    include_bytes!("../../tests/fixtures/abi-1.2/remove_duplicates.wasm");

/// A built-in by its module name (`remove-duplicates`).
fn built_in(name: &str) -> Arc<CompiledPolicy> {
    let (_, module) = rebalancer_builtins::modules()
        .iter()
        .find(|(n, _)| n.replace('_', "-") == name)
        .expect("a built-in");
    engine().compile(module).unwrap()
}

#[test]
fn guests_built_against_abi_1_2_read_layout_2_and_decide_as_the_current_built_ins() {
    // Five replicas of one ReplicaSet on one node of two, one failed pod: both policies
    // propose something, and the layout-3 sections (node usage among them) are present.
    let mut items = vec![];
    for n in 0..2 {
        items.push(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": format!("node-{n}"), "uid": format!("uid-node-{n}"),
                         "annotations": {"node.koordinator.sh/raw-allocatable": "{\"cpu\":\"8\"}"}},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}
        }));
    }
    for p in 0..5 {
        items.push(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": format!("web-{p}"), "namespace": "shop", "uid": format!("uid-web-{p}"),
                "creationTimestamp": "2020-01-01T00:00:00Z",
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web",
                                     "uid": "rs-web", "controller": true}]
            },
            "spec": {"nodeName": "node-0", "containers": [{"name": "c", "image": "nginx",
                     "resources": {"requests": {"cpu": "100m"}}}]},
            "status": {"phase": if p == 4 { "Failed" } else { "Running" },
                       "startTime": "2020-01-01T00:00:00Z"}
        }));
    }
    let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
    let objects = cluster::parse_list(list.to_string().as_bytes(), cluster::Format::Json).unwrap();
    let snapshot = Arc::new(cluster::build_snapshot(&objects, 1, 1_700_000_000_000).unwrap());
    assert_eq!(
        snapshot
            .cluster()
            .node(0)
            .annotation("node.koordinator.sh/raw-allocatable"),
        Some("{\"cpu\":\"8\"}")
    );
    for (old, name, point) in [
        (
            ABI_1_2_REMOVE_FAILED_PODS,
            "remove-failed-pods",
            ExtensionPoint::Deschedule,
        ),
        (
            ABI_1_2_REMOVE_DUPLICATES,
            "remove-duplicates",
            ExtensionPoint::Balance,
        ),
    ] {
        let old = engine().compile(old).expect("a 1.2 guest is accepted");
        assert_eq!(old.meta.abi_version, "1.2.0");
        assert_eq!(old.layout, 2);
        let current = built_in(name);
        assert_eq!(current.meta.abi_version, ABI_VERSION);
        assert_eq!(current.layout, 3);
        let run = |policy: &CompiledPolicy| {
            let evaluation = engine().evaluate(policy, point, &json!({}), session(&snapshot));
            assert_eq!(
                failure_kind(&evaluation),
                "ok",
                "{name}: {:?}",
                evaluation.outcome
            );
            let cluster = snapshot.cluster();
            let mut names: Vec<String> = evaluation
                .state
                .proposals()
                .iter()
                .map(|p| cluster.pod(p.pod).name().to_string())
                .collect();
            names.sort();
            (names, evaluation.sections)
        };
        let ((old_names, old_sections), (names, _)) = (run(&old), run(&current));
        assert!(!names.is_empty(), "{name} proposes something here");
        assert_eq!(old_names, names, "{name}");
        // The old guest was served layout-2 sections only.
        assert!(
            !old_sections.is_empty() && old_sections.iter().all(|u| u.section.id() < 10),
            "{name}: {old_sections:?}"
        );
    }
}

#[test]
fn a_layout_2_guest_is_refused_the_sections_of_layout_3() {
    let old = engine().compile(ABI_1_2_REMOVE_FAILED_PODS).unwrap();
    let snapshot = small_cluster();
    let mut store = host::test_store(engine(), Some(session(&snapshot)), old.layout);
    let state = store.data_mut();
    for id in 0..10 {
        assert!(state.section_of(id).is_some(), "section {id}");
    }
    for id in 10..14 {
        assert!(state.section_of(id).is_none(), "section {id}");
    }
    let mut store = host::test_store(engine(), Some(session(&snapshot)), 3);
    assert!(store.data_mut().section_of(12).is_some());
}

#[test]
fn a_guest_built_against_abi_1_1_still_runs_and_decides_as_the_current_built_in() {
    let mut items = vec![json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "node-0", "uid": "uid-node-0"},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True"}]}
    })];
    for (p, phase) in ["Failed", "Running", "Failed"].iter().enumerate() {
        items.push(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": format!("job-{p}"), "namespace": "batch", "uid": format!("uid-job-{p}"),
                "creationTimestamp": "2020-01-01T00:00:00Z",
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "job",
                                     "uid": "rs-job", "controller": true}]
            },
            "spec": {"nodeName": "node-0", "containers": [{"name": "c", "image": "busybox"}]},
            "status": {"phase": phase, "startTime": "2020-01-01T00:00:00Z",
                       "containerStatuses": [{"name": "c", "restartCount": 0,
                           "state": {"terminated": {"exitCode": 1, "reason": "Error"}}}]}
        }));
    }
    let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
    let objects = cluster::parse_list(list.to_string().as_bytes(), cluster::Format::Json).unwrap();
    let snapshot = Arc::new(cluster::build_snapshot(&objects, 1, 1_700_000_000_000).unwrap());

    let old = engine()
        .compile(ABI_1_1_REMOVE_FAILED_PODS)
        .expect("a 1.1 guest is accepted");
    assert_eq!(old.meta.abi_version, "1.1.0");
    let current = built_in("remove-failed-pods");
    assert_eq!(current.meta.abi_version, ABI_VERSION);

    let run = |policy: &CompiledPolicy| {
        let evaluation = engine().evaluate(
            policy,
            ExtensionPoint::Deschedule,
            &json!({}),
            session(&snapshot),
        );
        assert_eq!(failure_kind(&evaluation), "ok", "{:?}", evaluation.outcome);
        evaluation
    };
    let (old, current) = (run(&old), run(&current));
    let proposed = |e: &Evaluation| {
        let cluster = snapshot.cluster();
        let mut names: Vec<String> = e
            .state
            .proposals()
            .iter()
            .map(|p| cluster.pod(p.pod).name().to_string())
            .collect();
        names.sort();
        names
    };
    assert_eq!(proposed(&current), ["job-0", "job-2"]);
    assert_eq!(proposed(&old), proposed(&current));
}

/// `remove_failed_pods.wasm` and `pod_life_time.wasm` as built against ABI 1.3 (commit 672f055,
/// `policy` profile): they read snapshot layout 3 and do not import `columns`.
const ABI_1_3_REMOVE_FAILED_PODS: &[u8] =
    include_bytes!("../../tests/fixtures/abi-1.3/remove_failed_pods.wasm");
const ABI_1_3_POD_LIFE_TIME: &[u8] =
    include_bytes!("../../tests/fixtures/abi-1.3/pod_life_time.wasm");

/// Three Ready nodes and pods of many ages, namespaces and places, all owned by ReplicaSets:
/// `(name, namespace, node, creationTimestamp)`, node `None` for an unscheduled pod. The snapshot
/// time is 2023-11-14T22:13:20Z.
fn aged_cluster(pods: &[(&str, &str, Option<&str>, &str)]) -> Arc<ClusterSnapshot> {
    let mut items = vec![];
    for n in 0..3 {
        items.push(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": format!("node-{n}"), "uid": format!("uid-node-{n}")},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}
        }));
    }
    for (name, namespace, node, created) in pods {
        items.push(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": name, "namespace": namespace, "uid": format!("uid-{name}"),
                "creationTimestamp": created,
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
                                     "uid": format!("rs-{namespace}"), "controller": true}]
            },
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "nginx",
                     "resources": {"requests": {"cpu": "100m"}}}]},
            "status": {"phase": if name.starts_with("failed") { "Failed" } else { "Running" },
                       "startTime": created,
                       "containerStatuses": [{"name": "c", "restartCount": 0,
                           "state": {"terminated": {"exitCode": 1, "reason": "Error"}}}]}
        }));
    }
    let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
    let objects = cluster::parse_list(list.to_string().as_bytes(), cluster::Format::Json).unwrap();
    Arc::new(cluster::build_snapshot(&objects, 1, 1_700_000_000_000).unwrap())
}

/// The names of the pods an evaluation proposed, in the order it proposed them.
fn proposed_names(snapshot: &ClusterSnapshot, evaluation: &Evaluation) -> Vec<String> {
    let cluster = snapshot.cluster();
    evaluation
        .state
        .proposals()
        .iter()
        .map(|p| cluster.pod(p.pod).name().to_string())
        .collect()
}

#[test]
fn a_guest_reading_only_columns_decides_as_the_built_in_pod_life_time() {
    let snapshot = aged_cluster(&[
        ("a-0", "shop", Some("node-1"), "2023-11-01T00:00:00Z"),
        ("a-1", "shop", Some("node-0"), "2023-10-01T00:00:00Z"),
        ("a-2", "shop", Some("node-0"), "2023-11-14T22:00:00Z"), // 13 minutes old
        ("a-3", "shop", Some("node-0"), "2024-01-01T00:00:00Z"), // after the snapshot time
        ("b-0", "batch", Some("node-1"), "2023-09-01T00:00:00Z"),
        ("b-1", "batch", Some("node-2"), "2023-01-01T00:00:00Z"), // node out of scope
        ("b-2", "batch", None, "2023-01-01T00:00:00Z"),           // unscheduled
        ("t-0", "shop", Some("node-1"), "2023-10-15T00:00:00Z"),  // as old as t-1: scope order
        ("t-1", "shop", Some("node-0"), "2023-10-15T00:00:00Z"),
    ]);
    let columns_guest = engine()
        .compile(&module("test_columns.wasm"))
        .expect("the columns-only guest compiles");
    assert_eq!(columns_guest.meta.abi_version, "1.4.0");
    let built_in = built_in("pod-life-time");
    let run = |policy: &CompiledPolicy, args: &serde_json::Value, total: Option<u32>| {
        let mut session = session(&snapshot);
        session.nodes = Arc::new(vec![0, 1]);
        session.state = RunState::new(
            snapshot.cluster(),
            Limits {
                total,
                ..Limits::default()
            },
        );
        let evaluation = engine().evaluate(policy, ExtensionPoint::Deschedule, args, session);
        assert_eq!(
            failure_kind(&evaluation),
            "ok",
            "{args}: {:?}",
            evaluation.outcome
        );
        evaluation
    };
    let hour = json!({"maxPodLifeTimeSeconds": 3600});
    let (by_columns, by_archive) = (
        run(&columns_guest, &hour, None),
        run(&built_in, &hour, None),
    );
    assert_eq!(
        proposed_names(&snapshot, &by_archive),
        ["b-0", "a-1", "t-1", "t-0", "a-0"],
        "oldest first; equal ages in scope order"
    );
    assert_eq!(
        proposed_names(&snapshot, &by_columns),
        proposed_names(&snapshot, &by_archive)
    );
    assert!(
        by_columns.sections.is_empty(),
        "the columns-only guest was handed no archive section: {:?}",
        by_columns.sections
    );
    assert!(!by_archive.sections.is_empty());

    for (args, total) in [
        (
            json!({"maxPodLifeTimeSeconds": 3600, "namespaces": {"include": ["shop"]}}),
            None,
        ),
        (
            json!({"maxPodLifeTimeSeconds": 3600, "namespaces": {"exclude": ["shop"]}}),
            None,
        ),
        (
            json!({"maxPodLifeTimeSeconds": 3600, "namespaces": {"include": ["ghost"]}}),
            None,
        ),
        (json!({"maxPodLifeTimeSeconds": 40 * 86_400}), None),
        (hour.clone(), Some(2)),
    ] {
        let (by_columns, by_archive) = (
            run(&columns_guest, &args, total),
            run(&built_in, &args, total),
        );
        assert_eq!(
            proposed_names(&snapshot, &by_columns),
            proposed_names(&snapshot, &by_archive),
            "{args}, total limit {total:?}"
        );
    }
}

#[test]
fn guests_built_against_abi_1_3_still_run_and_decide_as_the_current_built_ins() {
    let snapshot = aged_cluster(&[
        ("a-0", "shop", Some("node-1"), "2023-11-01T00:00:00Z"),
        ("a-1", "shop", Some("node-0"), "2023-11-14T22:00:00Z"),
        ("failed-0", "shop", Some("node-0"), "2023-10-01T00:00:00Z"),
        ("failed-1", "batch", Some("node-2"), "2023-11-14T22:10:00Z"),
    ]);
    for (old, name, args) in [
        (
            ABI_1_3_POD_LIFE_TIME,
            "pod-life-time",
            json!({"maxPodLifeTimeSeconds": 3600}),
        ),
        (ABI_1_3_REMOVE_FAILED_PODS, "remove-failed-pods", json!({})),
    ] {
        let old = engine().compile(old).expect("a 1.3 guest is accepted");
        assert_eq!(old.meta.abi_version, "1.3.0");
        assert_eq!(old.layout, 3, "1.3 reads layout 3, as 1.4 does");
        let current = built_in(name);
        assert_eq!(current.meta.abi_version, ABI_VERSION);
        let run = |policy: &CompiledPolicy| {
            let evaluation = engine().evaluate(
                policy,
                ExtensionPoint::Deschedule,
                &args,
                session(&snapshot),
            );
            assert_eq!(
                failure_kind(&evaluation),
                "ok",
                "{name}: {:?}",
                evaluation.outcome
            );
            proposed_names(&snapshot, &evaluation)
        };
        let (old, current) = (run(&old), run(&current));
        assert!(!current.is_empty(), "{name} proposes something here");
        assert_eq!(old, current, "{name}");
    }
}

/// Hostile components that try to take memory through instantiation itself: several linear
/// memories, many full tables, many instances. Each is instantiated in a store configured as an
/// evaluation's (`host::test_store`), and the process's resident set is watched: without the
/// per-instance totals, each would touch hundreds of MiB.
mod instance_limits {
    use super::*;
    use std::sync::Mutex;

    /// One at a time: they measure the process's resident set.
    static SERIAL: Mutex<()> = Mutex::new(());

    fn rss_bytes() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
        line.split_whitespace()
            .nth(1)
            .unwrap()
            .parse::<u64>()
            .unwrap()
            << 10
    }

    /// Instantiate `text` (a component) with nothing linked; the error, and how much the
    /// resident set grew.
    fn instantiate(text: &str) -> (String, u64) {
        let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
        let engine = engine();
        let component = Component::new(&engine.inner.wasmtime, wat(text)).expect("compiles");
        let before = rss_bytes();
        let mut store = host::test_store(engine, None, 3);
        let linker: Linker<host::HostState> = Linker::new(&engine.inner.wasmtime);
        let error = linker
            .instantiate(&mut store, &component)
            .map(|_| ())
            .expect_err("the limits refuse this component");
        let grown = rss_bytes().saturating_sub(before);
        drop(store);
        (format!("{error:#}"), grown)
    }

    /// Unbounded, each case below would touch at least this much.
    const UNBOUNDED_AT_LEAST: u64 = 400 << 20;
    /// What the refused instantiation may cost (other tests run alongside and allocate too).
    const BOUND: u64 = 128 << 20;

    #[test]
    fn eight_memories_share_one_cap() {
        // 8 memories of 62.5 MiB each, every byte written by the start function: 500 MiB
        // touched if each memory had the (64 MiB) cap to itself.
        let pages = (test_limits().memory_bytes as u64 / 65536) - 24;
        assert!(8 * pages * 65536 >= UNBOUNDED_AT_LEAST);
        let memories: String = (0..8).map(|i| format!("(memory $m{i} {pages})")).collect();
        let fills: String = (0..8)
            .map(|i| {
                format!(
                    "(memory.fill $m{i} (i32.const 0) (i32.const 1) (i32.const {}))",
                    pages * 65536
                )
            })
            .collect();
        let text = format!(
            "(component (core module $hog {memories} (func $touch {fills}) (start $touch))
                        (core instance (instantiate $hog)))"
        );
        let (error, grown) = instantiate(&text);
        assert!(error.contains("memory"), "{error}");
        assert!(grown < BOUND, "grew by {} MiB: {error}", grown >> 20);
    }

    #[test]
    fn tables_share_one_element_budget() {
        // 32 tables of 1,000,000 funcrefs, each filled by the start function.
        let tables: String = (0..32)
            .map(|i| format!("(table $t{i} 1000000 funcref)"))
            .collect();
        let fills: String = (0..32)
            .map(|i| format!("(table.fill $t{i} (i32.const 0) (ref.func $f) (i32.const 1000000))"))
            .collect();
        let text = format!(
            "(component (core module $hog {tables} (func $f) (elem declare func $f)
                                     (func $touch {fills}) (start $touch))
                        (core instance (instantiate $hog)))"
        );
        let (error, grown) = instantiate(&text);
        assert!(error.contains("table"), "{error}");
        assert!(grown < BOUND, "grew by {} MiB: {error}", grown >> 20);
    }

    #[test]
    fn instances_memories_and_tables_are_counted() {
        let instances: String = (0..=host::MAX_INSTANCES)
            .map(|_| "(core instance (instantiate $empty))".to_string())
            .collect();
        let (error, _) = instantiate(&format!("(component (core module $empty) {instances})"));
        assert!(error.contains("instance"), "{error}");

        let memories: String = (0..=host::MAX_MEMORIES)
            .map(|i| format!("(memory $m{i} 1)"))
            .collect();
        let (error, _) = instantiate(&format!(
            "(component (core module $many {memories}) (core instance (instantiate $many)))"
        ));
        assert!(error.contains("memor"), "{error}");

        let tables: String = (0..=host::MAX_TABLES)
            .map(|i| format!("(table $t{i} 1 funcref)"))
            .collect();
        let (error, _) = instantiate(&format!(
            "(component (core module $many {tables}) (core instance (instantiate $many)))"
        ));
        assert!(error.contains("table"), "{error}");
    }
}
