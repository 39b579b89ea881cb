//! Conformance against descheduler v0.36: every scenario in `tests/conformance/` (descheduler's
//! own recorded evictions, kept in the repository as test data; `REBALANCER_CONFORMANCE_DIR`
//! points the test at another folder of such files) is ingested
//! as a cluster snapshot, its DeschedulerPolicy imported as a profile, run once with the built-in
//! wasm policies, and the proposed evictions judged by the rules of that folder's README
//! (exact set where the reference is deterministic, else the per-node/per-owner signatures, and
//! always the count range). Nothing here looks at a scenario's name or shape.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rebalancer_cluster::{self as cluster, Format};
use rebalancer_engine::profile::parse_deschedule_policy;
use rebalancer_engine::run::{self, Proposal};
use rebalancer_engine::{Engine, EngineConfig, PolicyRegistry};
use serde_json::Value;

fn scenario_dir() -> PathBuf {
    let dir = std::env::var_os("REBALANCER_CONFORMANCE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance"));
    assert!(
        dir.is_dir(),
        "conformance scenarios not found at {} (set REBALANCER_CONFORMANCE_DIR)",
        dir.display()
    );
    dir
}

fn registry(engine: &Engine) -> PolicyRegistry {
    let registry = PolicyRegistry::default();
    for (file, bytes) in rebalancer_builtins::modules() {
        let policy = engine
            .compile(bytes)
            .unwrap_or_else(|e| panic!("built-in {file}: {e}"));
        registry.insert(policy, true);
    }
    registry
}

/// `(profile, plugin, node, namespace, owner)` of one eviction, as the README's signatures use.
type SignatureKey = (String, String, String, String, String);

struct Outcome {
    proposals: Vec<Proposal>,
    /// `Kind/name` of each proposed pod's first ownerRef (or `<none>`), by `namespace/name`.
    owners: BTreeMap<String, String>,
}

fn run_scenario(
    engine: &Engine,
    registry: &PolicyRegistry,
    scenario: &Value,
) -> Result<Outcome, String> {
    let objects = serde_json::to_vec(&scenario["objects"]).map_err(|e| e.to_string())?;
    let set = cluster::parse_list(objects, Format::Json).map_err(|e| format!("ingest: {e}"))?;
    let now_ms = time::OffsetDateTime::now_utc().unix_timestamp() * 1000;
    let snapshot =
        Arc::new(cluster::build_snapshot(&set, 1, now_ms).map_err(|e| format!("snapshot: {e}"))?);
    let profile = parse_deschedule_policy(&scenario["policy"]).map_err(|errors| {
        let list: Vec<String> = errors
            .iter()
            .map(|e| format!("{}: {}", e.field, e.message))
            .collect();
        format!("policy: {}", list.join("; "))
    })?;
    let report = run::execute(
        engine,
        registry,
        &profile,
        &snapshot,
        run::PolicyStates::default(),
    )
    .map_err(|e| format!("run: {e}: {e:?}"))?;
    let failures: Vec<String> = report
        .policies
        .iter()
        .filter_map(|p| {
            p.error
                .as_ref()
                .map(|e| format!("{} ({}): {} {}", p.plugin, p.plugin_set, e.kind, e.message))
        })
        .collect();
    if !failures.is_empty() {
        return Err(format!("policy failures: {}", failures.join("; ")));
    }
    let cluster = snapshot.cluster();
    let owners = cluster
        .pods()
        .map(|pod| {
            let owner = pod
                .raw
                .owner_refs
                .first()
                .map(|r| {
                    format!(
                        "{}/{}",
                        cluster.str(r.kind.to_native()),
                        cluster.str(r.name.to_native())
                    )
                })
                .unwrap_or_else(|| "<none>".to_string());
            (format!("{}/{}", pod.namespace(), pod.name()), owner)
        })
        .collect();
    Ok(Outcome {
        proposals: report.proposals,
        owners,
    })
}

fn str_of(v: &Value, key: &str) -> String {
    v[key].as_str().unwrap_or_default().to_string()
}

fn signature_of(expected: &Value, with_node: bool) -> BTreeMap<SignatureKey, u64> {
    let key = if with_node {
        "signature"
    } else {
        "ownerSignature"
    };
    let mut out = BTreeMap::new();
    for entry in expected[key].as_array().into_iter().flatten() {
        let k = (
            str_of(entry, "profile"),
            str_of(entry, "plugin"),
            if with_node {
                str_of(entry, "node")
            } else {
                String::new()
            },
            str_of(entry, "namespace"),
            str_of(entry, "owner"),
        );
        *out.entry(k).or_insert(0) += entry["count"].as_u64().unwrap_or(1);
    }
    out
}

/// Judge one scenario; `Err` explains the mismatch.
fn judge(scenario: &Value, outcome: &Outcome) -> Result<(), String> {
    // Where the reference has a documented bug, the documented behaviour is the expectation.
    let expected = scenario["alternativeSemantics"]
        .get("pdbInformerRegistered")
        .filter(|alt| alt.get("evictions").is_some())
        .unwrap_or(&scenario["expected"]);
    let ours: Vec<(String, String, String, String)> = outcome
        .proposals
        .iter()
        .map(|p| {
            (
                p.namespace.clone(),
                p.name.clone(),
                p.plugin_set.clone(),
                p.plugin.clone(),
            )
        })
        .collect();
    let count = ours.len() as u64;
    if let Some(range) = expected["countRange"].as_array() {
        let (lo, hi) = (
            range[0].as_u64().unwrap_or(0),
            range[1].as_u64().unwrap_or(u64::MAX),
        );
        if count < lo || count > hi {
            return Err(format!(
                "{count} evictions, expected {lo}..={hi}; ours: {ours:?}"
            ));
        }
    }
    if expected["deterministic"].as_bool() == Some(true) {
        let mut want: Vec<(String, String, String, String)> = expected["evictions"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| {
                (
                    str_of(e, "namespace"),
                    str_of(e, "name"),
                    str_of(e, "profile"),
                    str_of(e, "plugin"),
                )
            })
            .collect();
        let mut got = ours.clone();
        want.sort();
        got.sort();
        return if want == got {
            Ok(())
        } else {
            Err(format!(
                "evictions differ\n  expected: {want:?}\n  ours:     {got:?}"
            ))
        };
    }
    let with_node = expected["signatureDeterministic"].as_bool() == Some(true);
    if !with_node && expected["ownerSignatureDeterministic"].as_bool() != Some(true) {
        return Ok(()); // only the count range is deterministic
    }
    let mut got: BTreeMap<SignatureKey, u64> = BTreeMap::new();
    for p in &outcome.proposals {
        let owner = outcome
            .owners
            .get(&format!("{}/{}", p.namespace, p.name))
            .cloned()
            .unwrap_or_else(|| "<none>".into());
        let node = if with_node {
            p.node.clone()
        } else {
            String::new()
        };
        *got.entry((
            p.plugin_set.clone(),
            p.plugin.clone(),
            node,
            p.namespace.clone(),
            owner,
        ))
        .or_insert(0) += 1;
    }
    let want = signature_of(expected, with_node);
    if want != got {
        return Err(format!(
            "signature differs\n  expected: {want:?}\n  ours:     {got:?}"
        ));
    }
    for must in expected["mustEvict"].as_array().into_iter().flatten() {
        let (ns, name) = (str_of(must, "namespace"), str_of(must, "name"));
        if !ours.iter().any(|o| o.0 == ns && o.1 == name) {
            return Err(format!(
                "{ns}/{name} must be evicted (mustEvict) but was not"
            ));
        }
    }
    Ok(())
}

#[test]
fn every_conformance_scenario_matches_descheduler() {
    let engine = Engine::new(EngineConfig::default()).expect("engine");
    let registry = registry(&engine);
    let mut files: Vec<PathBuf> = std::fs::read_dir(scenario_dir())
        .expect("read the conformance folder")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no scenario files found");

    let mut failures = Vec::new();
    for file in &files {
        let name = file.file_name().unwrap().to_string_lossy().to_string();
        let scenario: Value = serde_json::from_slice(&std::fs::read(file).expect("read scenario"))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let verdict =
            run_scenario(&engine, &registry, &scenario).and_then(|o| judge(&scenario, &o));
        match verdict {
            Ok(()) => eprintln!("conformance: {name} ... ok"),
            Err(why) => {
                eprintln!("conformance: {name} ... FAILED: {why}");
                failures.push(format!("{name}: {why}"));
            }
        }
    }
    eprintln!(
        "conformance: {} passed, {} failed",
        files.len() - failures.len(),
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} scenario(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
