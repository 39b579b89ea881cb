//! `rebalancer-bench soak`: the database's size over weeks of a periodic schedule, with the clock
//! compressed.
//!
//! Owns the soak command. It starts the real server in-process (with the demo cluster) on a
//! temporary database, pushes a reference cluster as `bench` with its scenario's profile, then
//! plays `--days` of a schedule firing every `--every`, one tick per firing, as fast as the
//! machine goes: each tick runs the profile on `bench` and the `default` profile on `demo`
//! through the API, approves `--approve` of the demo run's proposals over the API (real pod
//! migrations on the simulated backend), expires the proposals older than `--proposal-ttl` and,
//! every `--prune-interval`, prunes with the server's own pass
//! ([`rebalancer_server::retention::prune_pass`]) under the `--retain-*` keep times (the
//! server's flags and defaults). At the end of every simulated day it prints the database and WAL
//! sizes and the row counts.
//!
//! The compressed clock: tick `k` stands for simulated time `k × every`, and every row carries
//! the real time it was written. Rows are written in tick order, so "older than the keep time"
//! at tick `k` is "written before the real time at which tick `k − keep/every` started": the soak
//! turns each keep time into that real-time cutoff. The server's own expiry sweep and pruning
//! task run on the real clock, so they are off (a TTL and keep times of forever); the soak
//! calls the same store functions with the translated cutoffs instead.
//!
//! A soak of the reference cluster takes hours. `--keep` leaves its database behind, and
//! `--resume <DATABASE>` continues a soak whose process stopped (or a kept one) from that file
//! up to `--days`: the compressed clock is rebuilt from the start times of the `bench` runs
//! (one per tick, so it needs `--retain-runs` to cover the ticks played), and play goes on at
//! the tick after the last one with a run. A tick the stop cut short is not played again.
//! Must not: change the rules it measures or insert rows itself: everything it stores goes
//! through the API or the server's own functions.

use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use serde::Serialize;
use serde_json::json;

use rebalancer_server::app;
use rebalancer_server::config::{self, LogFormat, RetentionSettings, Secret, Settings};
use rebalancer_server::retention::{self, Pace};
use rebalancer_sim::reference::{self, Size};
use rebalancer_store::{HistoryCounts, PruneCutoffs, Store, now_ms};

use crate::bench::client::{self, Body, request};
use crate::bench::{Source, TempDir, file_source, ms, restrict_to, write_report};

/// Name of the pushed cluster and of its profile.
const BENCH_NAME: &str = "bench";
const DAY_MS: i64 = 86_400_000;

#[derive(Debug, Clone, clap::Args)]
pub struct SoakArgs {
    /// The cluster: a scenario file (`generate` writes them) or a kubectl `List`.
    #[arg(
        long,
        value_name = "PATH",
        conflicts_with = "size",
        required_unless_present_any = ["size", "resume"]
    )]
    pub file: Option<PathBuf>,

    /// Generate this reference cluster into the work directory instead: `small` (15,000 pods),
    /// `medium` (60,000) or `large` (150,000).
    #[arg(long)]
    pub size: Option<Size>,

    /// Continue the soak whose database this is (a `soak.db` a stopped or `--keep` soak left)
    /// up to `--days`, with the cluster and profile it holds. Give the same `--every` and
    /// retention flags as the first part.
    #[arg(long, value_name = "DATABASE", conflicts_with_all = ["file", "size", "dir"])]
    pub resume: Option<PathBuf>,

    /// Keep the work directory and its database afterwards (for `--resume` or a look inside).
    #[arg(long)]
    pub keep: bool,

    /// Simulated days.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u32).range(1..))]
    pub days: u32,

    /// The schedule's interval (simulated; a Go duration).
    #[arg(long, default_value = "10m")]
    pub every: String,

    /// Proposals of each demo run to approve (pod migrations on the simulated backend).
    #[arg(long, default_value_t = 2)]
    pub approve: usize,

    /// Make every Nth run of the pushed cluster a dry run (0: none).
    #[arg(long, default_value_t = 0)]
    pub dry_run_every: u32,

    /// Proposals expire this long after they were made (the server's `--proposal-ttl`).
    #[arg(long, default_value = config::DEFAULT_PROPOSAL_TTL)]
    pub proposal_ttl: String,

    /// The server's `--retain-proposals`.
    #[arg(long, default_value = config::DEFAULT_RETAIN_PROPOSALS)]
    pub retain_proposals: String,

    /// The server's `--retain-dry-runs`.
    #[arg(long, default_value = config::DEFAULT_RETAIN_DRY_RUNS)]
    pub retain_dry_runs: String,

    /// The server's `--retain-history`.
    #[arg(long, default_value = config::DEFAULT_RETAIN_HISTORY)]
    pub retain_history: String,

    /// The server's `--retain-runs`.
    #[arg(long, default_value = config::DEFAULT_RETAIN_RUNS)]
    pub retain_runs: String,

    /// The server's `--retain-audit`.
    #[arg(long, default_value = config::DEFAULT_RETAIN_AUDIT)]
    pub retain_audit: String,

    /// The server's `--prune-interval` (simulated; rounded to whole ticks, at least one).
    #[arg(long, default_value = config::DEFAULT_PRUNE_INTERVAL)]
    pub prune_interval: String,

    /// Pause between two pruning batches (real time). The server pauses 100 ms so that API
    /// writes get in between; the sizes do not depend on it.
    #[arg(long, default_value = "100ms")]
    pub prune_pause: String,

    /// Directory for the database (and a generated cluster); removed afterwards unless
    /// `--keep`. Default: the system's temporary directory.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,

    /// Print the results as JSON instead of a table.
    #[arg(long)]
    pub json: bool,

    /// Show the server's log (stderr; `RUST_LOG` filters it).
    #[arg(long)]
    pub log: bool,
}

/// One simulated day's end.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DaySample {
    pub day: u32,
    /// Rows of the history tables.
    pub rows: HistoryCounts,
    /// The database file (`<db>`), of which free pages.
    pub db_bytes: u64,
    pub free_bytes: u64,
    /// The WAL now (after the day's last prune pass and its checkpoint) and its largest size
    /// seen after any tick of the day.
    pub wal_bytes: u64,
    pub wal_peak_bytes: u64,
    /// Rows the day's prune passes deleted, and the longest batch (the longest an API write
    /// could have waited for pruning).
    pub pruned_rows: u64,
    pub longest_batch_ms: f64,
    /// Real time the day's ticks took: median tick, and the prune passes in all.
    pub tick_median_ms: f64,
    pub prune_ms: f64,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SoakReport {
    pub cluster: String,
    pub build: &'static str,
    pub every: String,
    pub ticks: usize,
    pub retention: String,
    pub proposals_per_run: u64,
    pub approved: u64,
    /// Ticks an earlier process played (`--resume`); the first day's sample counts only the
    /// ticks after them.
    pub resumed_after: Option<usize>,
    /// The database, when it is kept (`--keep`, `--resume`).
    pub database: Option<PathBuf>,
    pub days: Vec<DaySample>,
    pub elapsed_s: f64,
}

pub fn run(args: SoakArgs) -> anyhow::Result<()> {
    if args.log {
        rebalancer_server::telemetry::init(LogFormat::Text);
    }
    let report = soak(&args)?;
    write_report(args.json, &report, print_report)
}

/// Play the soak `args` describe; the report.
fn soak(args: &SoakArgs) -> anyhow::Result<SoakReport> {
    let go = |flag: &str, text: &str| -> anyhow::Result<i64> {
        let nanos = rebalancer_policy_sdk::evictor::parse_go_duration(text)
            .map_err(|m| anyhow::anyhow!("--{flag}: {m}"))?;
        anyhow::ensure!(nanos > 0, "--{flag}: must be greater than 0");
        Ok(i64::try_from(nanos / 1_000_000)?)
    };
    let every_ms = go("every", &args.every)?;
    let ttl_ms = go("proposal-ttl", &args.proposal_ttl)?;
    let prune_every = (go("prune-interval", &args.prune_interval)? / every_ms).max(1) as usize;
    let pause = Duration::from_millis(u64::try_from(
        rebalancer_policy_sdk::evictor::parse_go_duration(&args.prune_pause)
            .map_err(|m| anyhow::anyhow!("--prune-pause: {m}"))?
            / 1_000_000,
    )?);
    let keep = |flag, text: &str| config::keep_time(flag, text).map_err(anyhow::Error::from);
    let rules = RetentionSettings {
        proposals: keep("retain-proposals", &args.retain_proposals)?,
        dry_runs: keep("retain-dry-runs", &args.retain_dry_runs)?,
        history: keep("retain-history", &args.retain_history)?,
        runs: keep("retain-runs", &args.retain_runs)?,
        audit: keep("retain-audit", &args.retain_audit)?,
        interval: Duration::from_millis(every_ms as u64 * prune_every as u64),
    };
    let ticks = usize::try_from(i64::from(args.days) * DAY_MS / every_ms)?;

    let (work, database, source) = match &args.resume {
        Some(database) => {
            anyhow::ensure!(
                database.is_file(),
                "--resume {}: no such database file",
                database.display()
            );
            (None, database.clone(), None)
        }
        None => {
            let work = match &args.dir {
                Some(dir) => TempDir::new_in(dir)?,
                None => TempDir::new()?,
            };
            let source = match (&args.file, args.size) {
                (Some(path), _) => file_source(path)?,
                (None, Some(size)) => generated(size, &work.path)?,
                (None, None) => bail!("give --file, --size or --resume"),
            };
            let database = work.path.join("soak.db");
            (Some(work), database, Some(source))
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("soak-server")
        .build()
        .context("starting the async runtime")?;
    let mut settings = Settings::new(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), database.clone());
    settings.admin_token = Some(Secret::new(client::TOKEN));
    if let Some(source) = &source {
        settings.snapshot_body_limit = settings
            .snapshot_body_limit
            .max(usize::try_from(source.body.end - source.body.start)? + 1);
    }
    // The soak expires and prunes on its own clock (see the module's header).
    settings.proposal_ttl_ms = i64::MAX / 2;
    settings.retention = RetentionSettings {
        proposals: None,
        dry_runs: None,
        history: None,
        runs: None,
        audit: None,
        interval: Duration::from_secs(365 * 86_400),
    };
    let mut server = runtime.block_on(app::spawn(settings))?;
    runtime.block_on(server.wait_ready())?;
    let store = server.state.store.clone();
    let soak = Soak {
        args,
        addr: server.addr,
        store: &store,
        runtime: &runtime,
        database: &database,
        every_ms,
        ttl_ms,
        prune_every,
        pace: Pace {
            batch: retention::BATCH,
            pause,
        },
        rules,
        ticks,
    };
    let result = soak.play(source.as_ref());
    let stopped = runtime.block_on(server.stop());
    let mut report = result?;
    stopped?;
    match work {
        Some(work) if !args.keep => drop(work),
        Some(work) => {
            work.keep();
            report.database = Some(database);
        }
        None => report.database = Some(database),
    }
    Ok(report)
}

fn generated(size: Size, dir: &Path) -> anyhow::Result<Source> {
    let path = dir.join(format!("{}.json", size.name()));
    let mut file = std::io::BufWriter::new(
        std::fs::File::create(&path).with_context(|| format!("creating {}", path.display()))?,
    );
    reference::write_scenario(size, &mut file)?;
    std::io::Write::flush(&mut file)?;
    drop(file);
    file_source(&path)
}

struct Soak<'a> {
    args: &'a SoakArgs,
    addr: SocketAddr,
    store: &'a Store,
    runtime: &'a tokio::runtime::Runtime,
    database: &'a Path,
    every_ms: i64,
    ttl_ms: i64,
    prune_every: usize,
    pace: Pace,
    rules: RetentionSettings,
    ticks: usize,
}

impl Soak<'_> {
    fn play(&self, source: Option<&Source>) -> anyhow::Result<SoakReport> {
        let started = Instant::now();
        let (cluster, mut starts) = match source {
            Some(source) => {
                self.set_up(source)?;
                (source.description.clone(), Vec::with_capacity(self.ticks))
            }
            None => self.played_so_far()?,
        };
        let resumed_after = (!starts.is_empty()).then_some(starts.len());
        if let Some(played) = resumed_after {
            anyhow::ensure!(
                played < self.ticks,
                "the database holds {played} ticks already: --days {} is {} ticks",
                self.args.days,
                self.ticks
            );
            if !self.args.json {
                eprintln!(
                    "resuming after tick {played} of {}: day {} (its line counts only the ticks \
                     played from here)",
                    self.ticks,
                    played / self.ticks_per_day() + 1
                );
            }
        }

        let (mut days, mut day) = (Vec::new(), DayTotals::default());
        let (mut proposals_per_run, mut approved) = (0, 0);
        let ticks_per_day = self.ticks_per_day();
        let (_stop, never) = tokio::sync::watch::channel(false);
        for tick in starts.len()..self.ticks {
            let tick_started = Instant::now();
            starts.push(now_ms());
            let dry_run =
                self.args.dry_run_every > 0 && tick % self.args.dry_run_every as usize == 0;
            let run = self.send(
                "POST",
                "/api/v1/runs",
                &json!({"cluster": BENCH_NAME, "profile": BENCH_NAME, "dryRun": dry_run}),
            )?;
            if !dry_run {
                proposals_per_run = run["proposals"].as_u64().unwrap_or(0);
            }
            let demo = self.send(
                "POST",
                "/api/v1/runs",
                &json!({"cluster": app::DEMO_CLUSTER, "profile": "default"}),
            )?;
            if self.args.approve > 0 {
                approved += self.approve(demo["id"].as_i64().unwrap_or(0))?;
            }
            if let Some(before) = cutoff(&starts, tick, self.every_ms, Some(self.ttl_ms)) {
                self.runtime
                    .block_on(self.store.expire_proposals(before - 1))?;
            }
            day.wal_peak = day.wal_peak.max(file_size(&wal_path(self.database)));
            if (tick + 1) % self.prune_every == 0 {
                let pass_started = Instant::now();
                let report = self.runtime.block_on(retention::prune_pass(
                    self.store,
                    &self.cutoffs(&starts, tick),
                    None,
                    self.pace,
                    &never,
                ))?;
                day.prune_ms += ms(pass_started);
                day.pruned += report.pruned.rows();
                day.longest_batch = day.longest_batch.max(report.longest_batch);
            }
            day.ticks_ms.push(ms(tick_started));
            if (tick + 1) % ticks_per_day == 0 || tick + 1 == self.ticks {
                let sample = self.sample(u32::try_from(tick / ticks_per_day)? + 1, &mut day)?;
                if !self.args.json {
                    eprintln!("{}", day_line(&sample));
                }
                days.push(sample);
            }
        }
        Ok(SoakReport {
            cluster,
            build: if cfg!(debug_assertions) {
                "debug"
            } else {
                "release"
            },
            every: self.args.every.clone(),
            ticks: self.ticks,
            retention: format!(
                "proposals {}, dry runs {}, history {}, runs {}, audit {}; pruned every {} tick(s), \
                 batches of {} with {:?} pauses; proposal TTL {}",
                self.args.retain_proposals,
                self.args.retain_dry_runs,
                self.args.retain_history,
                self.args.retain_runs,
                self.args.retain_audit,
                self.prune_every,
                self.pace.batch,
                self.pace.pause,
                self.args.proposal_ttl,
            ),
            proposals_per_run,
            approved,
            resumed_after,
            database: None,
            days,
            elapsed_s: started.elapsed().as_secs_f64(),
        })
    }

    /// A fresh soak: push the cluster and put its profile.
    fn set_up(&self, source: &Source) -> anyhow::Result<()> {
        let path = match &source.observed_at {
            Some(at) => format!(
                "/api/v1/clusters/{BENCH_NAME}/snapshot?observedAt={}",
                at.replace('+', "%2B")
            ),
            None => format!("/api/v1/clusters/{BENCH_NAME}/snapshot"),
        };
        request(
            self.addr,
            "PUT",
            &path,
            "application/json",
            Body::File(&source.path, source.body.clone()),
        )?
        .ok_json("pushing the snapshot")?;
        let registered: Vec<String> = self.get("/api/v1/policies")?["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p["name"].as_str().map(str::to_owned))
            .collect();
        let document = source
            .policy
            .clone()
            .unwrap_or_else(rebalancer_engine::profile::default_profile_document);
        let (document, _) = restrict_to(&document, &registered);
        self.send("PUT", &format!("/api/v1/profiles/{BENCH_NAME}"), &document)?;
        Ok(())
    }

    /// Resuming: the cluster's description, and the real start of each tick played so far
    /// (its `bench` run's start; every row of the tick before was written earlier).
    fn played_so_far(&self) -> anyhow::Result<(String, Vec<i64>)> {
        let cluster = self.get(&format!("/api/v1/clusters/{BENCH_NAME}"))?;
        let description = format!(
            "`{BENCH_NAME}` from {}: {} nodes, {} pods",
            self.database.display(),
            cluster["nodes"],
            cluster["pods"]
        );
        let starts = self.runtime.block_on(self.store.run_starts(BENCH_NAME))?;
        anyhow::ensure!(
            !starts.is_empty(),
            "{}: no run of `{BENCH_NAME}` to resume after",
            self.database.display()
        );
        // Runs older than --retain-runs may be gone, and with them the clock's first ticks.
        if let Some(keep) = self.rules.runs {
            let played_ms = i64::try_from(starts.len())? * self.every_ms;
            anyhow::ensure!(
                i64::try_from(keep.as_millis()).unwrap_or(i64::MAX) >= played_ms,
                "{} ticks of {} were played, more than --retain-runs {} keeps runs: the clock \
                 cannot be rebuilt from them",
                starts.len(),
                self.args.every,
                self.args.retain_runs
            );
        }
        Ok((description, starts))
    }

    fn ticks_per_day(&self) -> usize {
        usize::try_from(DAY_MS / self.every_ms).unwrap_or(1).max(1)
    }

    /// The keep times as real-time cutoffs at `tick`.
    fn cutoffs(&self, starts: &[i64], tick: usize) -> PruneCutoffs {
        let millis =
            |keep: Option<Duration>| keep.map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        let at = |keep| cutoff(starts, tick, self.every_ms, millis(keep));
        PruneCutoffs {
            proposals: at(self.rules.proposals),
            dry_run_proposals: at(self.rules.dry_runs),
            history: at(self.rules.history),
            runs: at(self.rules.runs),
            audit: at(self.rules.audit),
        }
    }

    /// Approve up to `--approve` proposals of demo run `run`; how many were approved.
    fn approve(&self, run: i64) -> anyhow::Result<u64> {
        let open = self.get(&format!(
            "/api/v1/decisions?run={run}&status=proposed&limit={}",
            self.args.approve
        ))?;
        let ids: Vec<i64> = open["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|d| d["id"].as_i64())
            .collect();
        if ids.is_empty() {
            return Ok(0);
        }
        let answer = self.send("POST", "/api/v1/decisions/approve", &json!({"ids": ids}))?;
        Ok(answer["approved"].as_u64().unwrap_or(0))
    }

    fn sample(&self, day_number: u32, day: &mut DayTotals) -> anyhow::Result<DaySample> {
        let counts = self.runtime.block_on(self.store.history_counts())?;
        let file = self.runtime.block_on(self.store.file_stats())?;
        let mut ticks = std::mem::take(&mut day.ticks_ms);
        ticks.sort_by(f64::total_cmp);
        let sample = DaySample {
            day: day_number,
            rows: counts,
            db_bytes: file_size(self.database),
            free_bytes: u64::try_from(file.free_pages * file.page_size).unwrap_or(0),
            wal_bytes: file_size(&wal_path(self.database)),
            wal_peak_bytes: day.wal_peak,
            pruned_rows: day.pruned,
            longest_batch_ms: day.longest_batch.as_secs_f64() * 1000.0,
            tick_median_ms: ticks.get(ticks.len() / 2).copied().unwrap_or(0.0),
            prune_ms: day.prune_ms,
        };
        *day = DayTotals::default();
        Ok(sample)
    }

    fn get(&self, path: &str) -> anyhow::Result<serde_json::Value> {
        request(self.addr, "GET", path, "application/json", Body::Empty)?.ok_json(path)
    }

    fn send(
        &self,
        method: &str,
        path: &str,
        body: &serde_json::Value,
    ) -> anyhow::Result<serde_json::Value> {
        let bytes = serde_json::to_vec(body)?;
        request(
            self.addr,
            method,
            path,
            "application/json",
            Body::Bytes(&bytes),
        )?
        .ok_json(&format!("{method} {path}"))
    }
}

#[derive(Default)]
struct DayTotals {
    ticks_ms: Vec<f64>,
    wal_peak: u64,
    pruned: u64,
    longest_batch: Duration,
    prune_ms: f64,
}

/// The real-time cutoff at `tick` for rows older than `keep_ms` of simulated time: the real
/// start of the tick `keep_ms / every_ms` ticks back (rows of earlier ticks were written before
/// it). `None` keeps forever; a tick before the first gives a cutoff nothing is older than.
fn cutoff(starts: &[i64], tick: usize, every_ms: i64, keep_ms: Option<i64>) -> Option<i64> {
    let back = usize::try_from(keep_ms? / every_ms).unwrap_or(usize::MAX);
    Some(match tick.checked_sub(back) {
        Some(i) => starts[i],
        None => i64::MIN,
    })
}

fn wal_path(database: &Path) -> PathBuf {
    let mut wal = database.as_os_str().to_owned();
    wal.push("-wal");
    PathBuf::from(wal)
}

fn file_size(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1e6
}

fn day_line(d: &DaySample) -> String {
    format!(
        "day {:>3}: db {:>8.1} MB (free {:>7.1}) wal {:>6.1} MB (peak {:>6.1}) | runs {:>6} \
         decisions {:>9} events {:>9} pod migrations {:>5} audit {:>6} | pruned {:>9} rows, \
         longest batch {:>5.0} ms | tick median {:>6.0} ms, pruning {:>5.1} s",
        d.day,
        mb(d.db_bytes),
        mb(d.free_bytes),
        mb(d.wal_bytes),
        mb(d.wal_peak_bytes),
        d.rows.runs,
        d.rows.decisions,
        d.rows.decision_events,
        d.rows.pod_migrations,
        d.rows.audit_log,
        d.pruned_rows,
        d.longest_batch_ms,
        d.tick_median_ms,
        d.prune_ms / 1000.0
    )
}

fn print_report(out: &mut impl Write, r: &SoakReport) -> std::io::Result<()> {
    writeln!(out, "cluster: {}", r.cluster)?;
    writeln!(
        out,
        "{} build; a run every {} (simulated), {} ticks; {} proposals per run; {} demo proposals \
         approved",
        r.build, r.every, r.ticks, r.proposals_per_run, r.approved
    )?;
    writeln!(out, "retention: {}", r.retention)?;
    if let Some(played) = r.resumed_after {
        writeln!(
            out,
            "resumed after tick {played}: the first day's line counts only the ticks from there"
        )?;
    }
    for d in &r.days {
        writeln!(out, "{}", day_line(d))?;
    }
    writeln!(out, "real time: {:.0} s", r.elapsed_s)?;
    if let Some(database) = &r.database {
        writeln!(out, "database: {}", database.display())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        soak: SoakArgs,
    }

    /// A node and three pods of one ReplicaSet on it, as a kubectl List in `dir`.
    fn small_list(dir: &Path) -> PathBuf {
        let node = |name: &str| {
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                   "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}})
        };
        let pod = |name: &str| {
            json!({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": name, "namespace": "shop", "uid": format!("uid-{name}"),
                                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                                     "name": "web", "uid": "rs-web", "controller": true}]},
                   "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "web:1"}]},
                   "status": {"phase": "Running"}})
        };
        let list = json!({"apiVersion": "v1", "kind": "List",
                          "items": [node("n1"), node("n2"), pod("a"), pod("b"), pod("c")]});
        let file = dir.join("list.json");
        std::fs::write(&file, list.to_string()).unwrap();
        file
    }

    /// Two-hour ticks, pruned every tick, proposals kept six hours, and `more` flags.
    fn args(more: &[&str]) -> SoakArgs {
        let base = [
            "soak",
            "--every",
            "2h",
            "--prune-interval",
            "2h",
            "--retain-proposals",
            "6h",
            "--prune-pause",
            "1ms",
        ];
        Cli::try_parse_from(base.iter().chain(more)).unwrap().soak
    }

    /// A day of the small List in `dir`, the work directory kept or not.
    fn one_day(dir: &Path, keep: bool) -> SoakReport {
        let file = small_list(dir);
        let (file, work) = (file.to_str().unwrap(), dir.to_str().unwrap());
        let mut more = vec!["--file", file, "--days", "1", "--dir", work];
        if keep {
            more.push("--keep");
        }
        soak(&args(&more)).unwrap()
    }

    /// A day of two-hour ticks on a small List (and the demo cluster): the whole loop runs, pod
    /// migrations happen, and pruning deletes what is due.
    #[test]
    fn a_short_soak_runs_approves_expires_and_prunes() {
        let dir = TempDir::new().unwrap();
        let report = one_day(&dir.path, false);
        assert_eq!(report.ticks, 12);
        assert_eq!(report.days.len(), 1);
        assert_eq!(report.resumed_after, None);
        let day = &report.days[0];
        // Two runs per tick, none old enough to go.
        assert_eq!(day.rows.runs, 24, "{day:?}");
        assert!(report.approved > 0, "{report:?}");
        assert!(day.rows.pod_migrations > 0, "{day:?}");
        // Proposals older than six hours went, with their events.
        assert!(day.pruned_rows > 0, "{day:?}");
        assert!(day.db_bytes > 0 && day.tick_median_ms > 0.0, "{day:?}");
        // Not kept: the work directory is gone.
        assert_eq!(report.database, None);
        assert_eq!(
            std::fs::read_dir(&dir.path).unwrap().count(),
            1,
            "only the List is left"
        );
    }

    /// A kept soak of one day goes on to two from its database: play goes on at the next tick,
    /// and pruning goes on by the rebuilt clock.
    #[test]
    fn a_kept_soak_resumes_after_its_last_tick() {
        let dir = TempDir::new().unwrap();
        let first = one_day(&dir.path, true);
        let database = first.database.clone().expect("kept");
        assert!(database.is_file(), "{}", database.display());
        assert_eq!(first.days[0].rows.runs, 24);

        let resumed = soak(&args(&[
            "--resume",
            database.to_str().unwrap(),
            "--days",
            "2",
        ]))
        .unwrap();
        assert_eq!(resumed.resumed_after, Some(12), "{resumed:?}");
        assert_eq!(resumed.ticks, 24);
        // One line: day 2, twelve more ticks of two runs each.
        assert_eq!(resumed.days.len(), 1, "{resumed:?}");
        let day = &resumed.days[0];
        assert_eq!(day.day, 2);
        assert_eq!(day.rows.runs, 48, "{day:?}");
        assert!(day.pruned_rows > 0, "{day:?}");
        assert!(
            resumed.cluster.contains("2 nodes, 3 pods"),
            "{}",
            resumed.cluster
        );
        assert_eq!(resumed.database.as_deref(), Some(database.as_path()));

        // Nothing left to play.
        let error = soak(&args(&[
            "--resume",
            database.to_str().unwrap(),
            "--days",
            "2",
        ]))
        .unwrap_err();
        assert!(
            error.to_string().contains("holds 24 ticks already"),
            "{error:#}"
        );
        // Runs kept shorter than the ticks played: their start times may be gone.
        let error = soak(&args(&[
            "--resume",
            database.to_str().unwrap(),
            "--days",
            "3",
            "--retain-runs",
            "1d",
        ]))
        .unwrap_err();
        assert!(
            error.to_string().contains("more than --retain-runs 1d"),
            "{error:#}"
        );
        // Without a database.
        let missing = dir.path.join("nothing.db");
        let error = soak(&args(&["--resume", missing.to_str().unwrap()])).unwrap_err();
        assert!(
            error.to_string().contains("no such database file"),
            "{error:#}"
        );
    }

    #[test]
    fn cutoffs_are_the_real_start_of_the_tick_a_keep_time_back() {
        let starts = [100, 250, 400, 900];
        // Ten-minute ticks: one hour back is six ticks.
        assert_eq!(cutoff(&starts, 3, 600_000, Some(3_600_000)), Some(i64::MIN));
        // Twenty minutes back from tick 3 is tick 1: rows of tick 0 are older.
        assert_eq!(cutoff(&starts, 3, 600_000, Some(1_200_000)), Some(250));
        // Shorter than a tick: everything before this tick.
        assert_eq!(cutoff(&starts, 3, 600_000, Some(1)), Some(900));
        assert_eq!(cutoff(&starts, 3, 600_000, None), None);
    }
}
