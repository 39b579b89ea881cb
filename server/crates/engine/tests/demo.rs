//! The server's first impression: the built-in `default` profile, run with the built-in wasm
//! policies over the demo cluster, proposes the moves the demo was built to show.

use std::sync::Arc;

use rebalancer_cluster::{Format, build_snapshot, parse_list};
use rebalancer_engine::profile::{default_profile_document, parse_deschedule_policy};
use rebalancer_engine::{Engine, EngineConfig, PolicyRegistry, run};
use rebalancer_sim::demo::demo_cluster_json;

#[test]
fn the_default_profile_proposes_moves_on_the_demo_cluster() {
    let objects = parse_list(demo_cluster_json(), Format::Json).expect("the demo cluster parses");
    let snapshot = Arc::new(build_snapshot(&objects, 1, 1_795_000_000_000).expect("builds"));
    let spec =
        parse_deschedule_policy(&default_profile_document()).expect("the default profile parses");
    let engine = Engine::new(EngineConfig::default()).expect("engine");
    let registry = PolicyRegistry::default();
    for (file, bytes) in rebalancer_builtins::modules() {
        let policy = engine
            .compile(bytes)
            .unwrap_or_else(|e| panic!("built-in {file}: {e}"));
        registry.insert(policy, true);
    }
    let report = run::execute(
        &engine,
        &registry,
        &spec,
        &snapshot,
        run::PolicyStates::default(),
    )
    .expect("the default profile runs");
    assert!(report.skipped.is_none(), "{report:?}");
    for outcome in &report.policies {
        assert!(outcome.error.is_none(), "{outcome:?}");
    }
    let by = |plugin: &str| {
        report
            .proposals
            .iter()
            .filter(|p| p.plugin == plugin)
            .count()
    };
    // Three of the four stacked checkout replicas are duplicates; its PDB admits two.
    let checkout = report
        .proposals
        .iter()
        .filter(|p| p.plugin == "RemoveDuplicates" && p.name.starts_with("checkout-"))
        .count();
    assert_eq!(checkout, 2, "{:#?}", report.proposals);
    assert!(by("LowNodeUtilization") >= 3, "{:#?}", report.policies);
}
