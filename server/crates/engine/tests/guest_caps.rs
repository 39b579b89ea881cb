//! Every string or list a guest hands the host is capped: the hostile test policies
//! (`test-misbehaving`, `test-oversized-info`) hand over 10 MiB reasons, ten million empty log
//! lines, 400,000 arg errors, hundreds of thousands of `map-section` calls, oversized `info`
//! fields… and each test asserts the refusal or truncation *and* that the process's resident
//! memory stays bounded while it happens.
//!
//! A test binary of its own, so that no other engine test (the memory bomb, say) runs in the
//! process while these measure it; within it the tests take [`MEASURED`] one at a time. The
//! guests get a small memory cap so the bound means something: a guest's own memory counts in
//! the process's resident set, and values it passes are copied into the host for the duration
//! of a call. Growth is the peak resident set (`VmHWM`, reset through `/proc/self/clear_refs`;
//! where it cannot be reset, the largest `VmRSS` a sampling thread saw) over the resident set
//! before, on Linux; elsewhere only the caps are asserted. Nothing here asserts on time.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use rebalancer_cluster::{self as cluster, ClusterSnapshot};
use rebalancer_engine::caps::{
    DEFAULT_MAX_LOG_LINES, MAX_ARG_ERROR_FIELD_BYTES, MAX_ARG_ERROR_MESSAGE_BYTES, MAX_ARG_ERRORS,
    MAX_ARGS_SCHEMA_BYTES, MAX_DEFAULT_ARGS_BYTES, MAX_DESCRIPTION_BYTES, MAX_MESSAGE_BYTES,
    MAX_NAME_BYTES, MAX_REASON_BYTES, MAX_STATE_KEY_BYTES,
};
use rebalancer_engine::profile::{PluginSetSpec, PluginSpec, ProfileSpec};
use rebalancer_engine::run::{self, SectionPull};
use rebalancer_engine::{
    CompiledPolicy, Engine, EngineConfig, EvalSession, Evaluation, PolicyRegistry, SandboxLimits,
};
use rebalancer_policy_sdk::ExtensionPoint;
use rebalancer_policy_sdk::evictor::{DefaultEvictorArgs, EvictorConfig, Limits, RunState};
use rebalancer_policy_sdk::model::Section;
use serde_json::{Value, json};

const MIB: u64 = 1 << 20;

/// What a hostile evaluation may add to the process's resident set: the guest's memory cap
/// (32 MiB) plus a value being copied in, with room to spare. Without the caps these tests hold
/// gigabytes (a 10 MiB reason kept a thousand times).
const RSS_BOUND: u64 = 64 * MIB;

/// One measured test at a time.
static MEASURED: Mutex<()> = Mutex::new(());

fn measured() -> MutexGuard<'static, ()> {
    MEASURED.lock().unwrap_or_else(|poison| poison.into_inner())
}

fn engine() -> &'static Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE.get_or_init(|| {
        Engine::new(EngineConfig {
            limits: SandboxLimits {
                memory_bytes: 32 << 20,
                // A deadline no test reaches; nothing here is about time.
                timeout_ms: 120_000,
                ..SandboxLimits::default()
            },
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

fn behave(args: Value) -> Evaluation {
    let policy = misbehaving();
    engine().evaluate(
        &policy,
        ExtensionPoint::Deschedule,
        &args,
        session(&small_cluster()),
    )
}

fn failure(evaluation: &Evaluation) -> (String, String) {
    match &evaluation.outcome {
        Ok(()) => ("ok".into(), String::new()),
        Err(f) => (f.kind.clone(), f.message.clone()),
    }
}

/// Run `f`, asserting that the process's resident set grows by at most `bound` bytes meanwhile.
#[track_caller]
fn within_rss<T>(what: &str, bound: u64, f: impl FnOnce() -> T) -> T {
    let (value, growth) = rss::growth(f);
    if let Some(growth) = growth {
        assert!(
            growth <= bound,
            "{what}: the resident set grew by {} MiB, over the {} MiB bound",
            growth / MIB,
            bound / MIB
        );
    }
    value
}

#[cfg(target_os = "linux")]
mod rss {
    use super::*;

    fn status_kib(field: &str) -> Option<u64> {
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        let line = status.lines().find(|l| l.starts_with(field))?;
        line[field.len()..]
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()
    }

    fn rss_bytes() -> Option<u64> {
        status_kib("VmRSS:").map(|k| k * 1024)
    }

    /// `f`'s value and how far the resident set rose above where it was before, at its peak.
    pub fn growth<T>(f: impl FnOnce() -> T) -> (T, Option<u64>) {
        let Some(before) = rss_bytes() else {
            return (f(), None);
        };
        // "5" resets the peak resident set to the current one (Linux ≥ 4.0).
        let exact = std::fs::write("/proc/self/clear_refs", "5").is_ok();
        let done = Arc::new(AtomicBool::new(false));
        let sampler = {
            let done = done.clone();
            std::thread::spawn(move || {
                let mut peak = 0;
                while !done.load(Ordering::Relaxed) {
                    peak = peak.max(rss_bytes().unwrap_or(0));
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                peak
            })
        };
        let value = f();
        done.store(true, Ordering::Relaxed);
        let sampled = sampler.join().unwrap_or(0);
        let hwm = if exact {
            status_kib("VmHWM:").map_or(0, |k| k * 1024)
        } else {
            0
        };
        let peak = sampled.max(hwm).max(rss_bytes().unwrap_or(0));
        (value, Some(peak.saturating_sub(before)))
    }
}

#[cfg(not(target_os = "linux"))]
mod rss {
    pub fn growth<T>(f: impl FnOnce() -> T) -> (T, Option<u64>) {
        (f(), None)
    }
}

/// A reason as the host keeps it: at most the cap, the start of what the guest sent, a marker
/// with the original length.
#[track_caller]
fn assert_cut_reason(reason: &str, original: u64) {
    assert!(reason.len() <= MAX_REASON_BYTES, "{} bytes", reason.len());
    assert!(reason.starts_with("TestMisbehaving: €€€"), "{reason}");
    assert!(
        reason.ends_with(&format!(" … [truncated, {original} bytes in all]")),
        "{reason}"
    );
}

#[test]
fn ten_mib_reasons_a_thousand_times_are_kept_as_1_kib_in_proposals_and_refusals() {
    let _one = measured();
    misbehaving();
    let evaluation = within_rss("10 MiB reasons × 1,000", RSS_BOUND, || {
        behave(json!({"behaviour": "huge-reason", "count": 1_000, "bytes": 10 * MIB}))
    });
    assert_eq!(failure(&evaluation).0, "ok", "{:?}", evaluation.outcome);
    // Six pods: each accepted once, every other proposal refused (already proposed).
    let state = &evaluation.state;
    assert_eq!(state.proposals().len(), 6);
    assert_eq!(state.refusals().len(), 994);
    for reason in state
        .proposals()
        .iter()
        .map(|p| &p.reason)
        .chain(state.refusals().iter().map(|r| &r.reason))
    {
        assert_cut_reason(reason, 10 * MIB);
    }
}

#[test]
fn huge_reasons_in_proposal_batches_are_cut_too() {
    let _one = measured();
    misbehaving();
    let evaluation = within_rss("4 MiB batch reasons × 1,000", RSS_BOUND, || {
        behave(json!({"behaviour": "huge-reason-batch", "count": 1_000, "bytes": 4 * MIB}))
    });
    assert_eq!(failure(&evaluation).0, "ok", "{:?}", evaluation.outcome);
    let state = &evaluation.state;
    assert_eq!(state.proposals().len(), 6, "the first batch is admitted");
    assert_eq!(
        state.refusals().len(),
        999,
        "each later batch is refused at once"
    );
    for p in state.proposals() {
        assert_cut_reason(&p.reason, 4 * MIB);
    }
    assert_cut_reason(&state.refusals()[998].reason, 4 * MIB);
}

#[test]
fn ten_million_empty_log_lines_end_the_evaluation_at_the_line_cap() {
    let _one = measured();
    misbehaving();
    let evaluation = within_rss("10,000,000 empty log lines", RSS_BOUND, || {
        behave(json!({"behaviour": "flood-empty-logs", "count": 10_000_000}))
    });
    // As at the byte cap: the evaluation ends with `log-cap`, keeping the lines before.
    let (kind, message) = failure(&evaluation);
    assert_eq!(kind, "log-cap");
    assert_eq!(
        message,
        format!("the policy logged more than {DEFAULT_MAX_LOG_LINES} lines in one evaluation")
    );
    assert_eq!(evaluation.logs.len(), DEFAULT_MAX_LOG_LINES);
}

#[test]
fn map_section_calls_are_recorded_once_per_section_in_the_evaluation_and_the_report() {
    let _one = measured();
    let policy = misbehaving();
    let calls = 200_000;
    let evaluation = within_rss("200,000 map-section calls", RSS_BOUND, || {
        behave(json!({"behaviour": "flood-map-section", "count": calls}))
    });
    assert_eq!(failure(&evaluation).0, "ok", "{:?}", evaluation.outcome);
    let core: Vec<_> = evaluation
        .sections
        .iter()
        .filter(|u| u.section == Section::Core)
        .collect();
    assert_eq!(core.len(), 1, "{:?}", evaluation.sections);
    // The guest's calls, plus the SDK's own placement of the core when the call starts.
    assert_eq!(core[0].calls, calls + 1);
    let core_len = small_cluster().section(Section::Core).len() as u64;
    assert_eq!(core[0].bytes, core_len * u64::from(calls + 1));

    // In a run report: one entry per section, with its count, and a report that stays small.
    let registry = PolicyRegistry::default();
    registry.insert(policy, false);
    let profile = ProfileSpec {
        node_selector: None,
        max_per_node: None,
        max_per_namespace: None,
        max_total: None,
        plugin_sets: vec![PluginSetSpec {
            name: "default".into(),
            evictor_args: json!({}),
            deschedule: vec![PluginSpec {
                name: "TestMisbehaving".into(),
                args: json!({"behaviour": "flood-map-section", "count": calls}),
            }],
            balance: Vec::new(),
        }],
    };
    let report = within_rss("a run of 200,000 map-section calls", RSS_BOUND, || {
        run::execute(
            engine(),
            &registry,
            &profile,
            &small_cluster(),
            run::PolicyStates::default(),
        )
        .expect("the run")
    });
    let outcome = &report.policies[0];
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    assert_eq!(
        outcome.snapshot_sections,
        [SectionPull {
            section: "core".into(),
            calls: calls + 1
        }]
    );
    let serialized = serde_json::to_string(&report).unwrap();
    assert!(serialized.len() < 4096, "{} bytes", serialized.len());
}

#[test]
fn four_hundred_thousand_arg_errors_are_cut_to_a_hundred_and_counted() {
    let _one = measured();
    let policy = misbehaving();
    let errors = within_rss("400,000 arg errors", RSS_BOUND, || {
        engine()
            .validate_args(
                &policy,
                &json!({"behaviour": "flood-arg-errors", "count": 400_000}),
            )
            .unwrap_err()
    });
    assert_eq!(errors.len(), MAX_ARG_ERRORS + 1);
    let last = &errors[MAX_ARG_ERRORS];
    assert_eq!(last.field, "");
    assert!(
        last.message
            .starts_with("… and 399,900 more errors (400,000 in all"),
        "{}",
        last.message
    );
}

#[test]
fn a_huge_arg_error_is_cut_field_and_message() {
    let _one = measured();
    let policy = misbehaving();
    let errors = within_rss("a 1 MiB arg error", RSS_BOUND, || {
        engine()
            .validate_args(
                &policy,
                &json!({"behaviour": "huge-arg-error", "bytes": MIB}),
            )
            .unwrap_err()
    });
    assert_eq!(errors.len(), 1);
    let error = &errors[0];
    assert!(error.field.len() <= MAX_ARG_ERROR_FIELD_BYTES);
    assert!(error.message.len() <= MAX_ARG_ERROR_MESSAGE_BYTES);
    for text in [&error.field, &error.message] {
        assert!(text.starts_with("TestMisbehaving: €"), "{text}");
        assert!(
            text.ends_with("[truncated, 1048576 bytes in all]"),
            "{text}"
        );
    }
}

#[test]
fn a_huge_policy_error_and_a_huge_panic_message_are_cut() {
    let _one = measured();
    misbehaving();
    let evaluation = within_rss("a 10 MiB policy error", RSS_BOUND, || {
        behave(json!({"behaviour": "huge-error", "bytes": 10 * MIB}))
    });
    let (kind, message) = failure(&evaluation);
    assert_eq!(kind, "policy-error");
    assert!(
        message.len() <= MAX_MESSAGE_BYTES,
        "{} bytes",
        message.len()
    );
    assert!(message.starts_with("TestMisbehaving: €"), "{message}");
    assert!(message.ends_with("[truncated, 10485760 bytes in all]"));

    // 512 KiB: under the log byte cap, so the panic hook's line gets through and is recorded.
    let evaluation = within_rss("a 512 KiB panic", RSS_BOUND, || {
        behave(json!({"behaviour": "huge-panic", "bytes": 512 << 10}))
    });
    let (kind, message) = failure(&evaluation);
    assert_eq!(kind, "panic");
    assert!(
        message.len() <= MAX_MESSAGE_BYTES,
        "{} bytes",
        message.len()
    );
    assert!(message.contains("TestMisbehaving: €"), "{message}");
    assert!(message.contains("[truncated, "), "{message}");
}

#[test]
fn a_huge_state_key_is_refused_without_being_echoed() {
    let _one = measured();
    misbehaving();
    let evaluation = within_rss("a 1 MiB state key", RSS_BOUND, || {
        behave(json!({"behaviour": "huge-state-key", "bytes": MIB}))
    });
    // The policy returns the host's refusal as its error.
    let (kind, message) = failure(&evaluation);
    assert_eq!(kind, "policy-error");
    assert!(
        message.contains(&format!(
            "over the {MAX_STATE_KEY_BYTES}-byte limit for keys"
        )),
        "{message}"
    );
    assert!(message.len() < 300, "the key is not echoed: {message}");
    assert!(!evaluation.scope.changed());
}

#[test]
fn a_huge_object_json_kind_is_answered_none() {
    let _one = measured();
    misbehaving();
    let evaluation = within_rss("a 1 MiB object-json kind", RSS_BOUND, || {
        behave(json!({"behaviour": "huge-object-kind", "bytes": MIB}))
    });
    assert_eq!(failure(&evaluation).0, "ok", "{:?}", evaluation.outcome);
}

/// `test_oversized_info.wasm` with its selector patched to return `field` at `size`.
fn oversized_info(field: &str, size: u64) -> Vec<u8> {
    const BUILT: &[u8; 48] = b"rebalancer-oversize:none:0                      ";
    let mut wasm = module("test_oversized_info.wasm");
    let at = wasm
        .windows(BUILT.len())
        .position(|w| w == BUILT)
        .expect("the selector is in the module's data");
    let selector = format!("rebalancer-oversize:{field}:{size}");
    assert!(selector.len() <= BUILT.len(), "{selector}");
    let patch = &mut wasm[at..at + BUILT.len()];
    patch.fill(b' ');
    patch[..selector.len()].copy_from_slice(selector.as_bytes());
    wasm
}

#[test]
fn oversized_info_fields_are_refused_at_upload_by_name_size_and_limit() {
    let _one = measured();
    let as_built = engine()
        .compile(&module("test_oversized_info.wasm"))
        .expect("as built, the fixture is a fine policy");
    assert_eq!(as_built.meta.name, "TestOversizedInfo");

    // Sizes the guest builds (and serializes) within its 32 MiB memory: each far over its cap.
    let cases = [
        (
            "description",
            8 * MIB,
            "description is 8388608 bytes".to_string(),
            MAX_DESCRIPTION_BYTES,
        ),
        (
            "args-schema",
            4 * MIB,
            format!("args-schema is {} bytes", 4 * MIB + 34),
            MAX_ARGS_SCHEMA_BYTES,
        ),
        (
            "default-args",
            2 * MIB,
            format!("default-args is {} bytes", 2 * MIB + 10),
            MAX_DEFAULT_ARGS_BYTES,
        ),
    ];
    for (field, size, starts, limit) in cases {
        let wasm = oversized_info(field, size);
        let error = within_rss(field, RSS_BOUND, || engine().compile(&wasm)).unwrap_err();
        assert_eq!(error.code(), "invalid_metadata", "{field}: {error}");
        let message = error.to_string();
        assert_eq!(
            message,
            format!("the policy's metadata is invalid: {starts}, over the limit of {limit} bytes"),
            "{field}"
        );
    }

    // A bad name is quoted by a short prefix, not echoed.
    let wasm = oversized_info("name", 8 * MIB);
    let error = within_rss("name", RSS_BOUND, || engine().compile(&wasm)).unwrap_err();
    assert_eq!(error.code(), "invalid_metadata");
    let message = error.to_string();
    assert!(message.len() < 300, "{message}");
    assert!(
        message.contains("(8388608 bytes)") && message.contains(&format!("1–{MAX_NAME_BYTES}")),
        "{message}"
    );

    // A million extension points are kept as the two there are.
    let wasm = oversized_info("extension-points", 1_000_000);
    let policy = within_rss("extension-points", RSS_BOUND, || engine().compile(&wasm))
        .expect("a long list of valid points is accepted");
    assert_eq!(policy.meta.extension_points, ["deschedule", "balance"]);
}
