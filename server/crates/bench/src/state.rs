//! `rebalancer-bench state`: loading and committing a policy state scope through the real store
//! (SQLite on disk, the server's own SQL), the path every run with a stateful policy takes:
//! load and decode before the run; encode and commit with the run's end.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use rebalancer_policy_sdk::state;
use rebalancer_store::{NewClusterState, NewRun, RunEnd, StateWrite, Store};

use crate::bench::{Stats, TempDir, ms};

#[derive(Debug, clap::Args)]
pub struct StateArgs {
    /// Size of the scope (keys plus values), in bytes.
    #[arg(long, default_value_t = 1 << 20)]
    pub bytes: usize,
    /// Size of one value (a detector's memory of one node is about this).
    #[arg(long, default_value_t = 100)]
    pub value_bytes: usize,
    /// Rounds (medians are reported).
    #[arg(long, default_value_t = 25)]
    pub rounds: usize,
}

pub fn run(args: StateArgs) -> anyhow::Result<()> {
    let work = TempDir::new()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let store = Store::open(&work.path.join("bench.db")).await?;
        let counts = BTreeMap::new();
        let warnings = serde_json::json!([]);
        store
            .replace_cluster_state(
                &NewClusterState {
                    name: "bench",
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
            .await?;
        let (mut load, mut commit) = (Vec::new(), Vec::new());
        for round in 0..args.rounds {
            // Each round commits the next version of the one scope.
            let version = round as i64;
            // A scope of `bytes`: keys `node-00001`…, values of `value_bytes`.
            let mut scope = state::StateScope::new(BTreeMap::new(), usize::MAX);
            let mut i = 0;
            while scope.bytes() < args.bytes {
                let value = vec![(round + i) as u8; args.value_bytes];
                scope
                    .put(&format!("node-{i:06}"), &value)
                    .map_err(anyhow::Error::msg)?;
                i += 1;
            }

            let run = store
                .insert_run(&NewRun::manual("bench", 1, "default"))
                .await?;
            let started = Instant::now();
            let data = state::encode(scope.entries());
            let writes = [StateWrite {
                plugin_set: "default",
                policy: "LowNodeLoad",
                base_version: version,
                data: &data,
            }];
            store
                .finish_run(
                    run.id,
                    RunEnd::Succeeded {
                        report: &|_: &[usize]| "{}".to_string(),
                        decisions: &[],
                        state: &writes,
                    },
                )
                .await?;
            commit.push(ms(started));

            let started = Instant::now();
            let stored = store.load_policy_state("bench", "default").await?;
            let scopes: HashMap<(String, String), state::StateScope> = stored
                .into_iter()
                .map(|s| {
                    let entries = state::decode(&s.data).map_err(anyhow::Error::msg)?;
                    Ok((
                        (s.plugin_set, s.policy),
                        state::StateScope::new(entries, usize::MAX),
                    ))
                })
                .collect::<anyhow::Result<_>>()?;
            load.push(ms(started));
            let loaded = &scopes[&("default".to_string(), "LowNodeLoad".to_string())];
            anyhow::ensure!(
                loaded.entries() == scope.entries(),
                "the scope did not round-trip"
            );
        }
        let (load, commit) = (Stats::of(&load), Stats::of(&commit));
        eprintln!(
            "policy state scope of {} bytes ({} rounds): load+decode median {:.2} ms (min {:.2}, \
             max {:.2}); encode+commit with the run median {:.2} ms (min {:.2}, max {:.2})",
            args.bytes,
            args.rounds,
            load.median,
            load.min,
            load.max,
            commit.median,
            commit.min,
            commit.max
        );
        store.close().await;
        anyhow::Ok(())
    })
}
