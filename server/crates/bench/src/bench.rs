//! `rebalancer-bench run`: measure ingest and runs on a large cluster, end to end through the API.
//!
//! Owns the benchmark command. It starts the real server in-process on `127.0.0.1:0` with a
//! temporary database, pushes a cluster snapshot over HTTP (a generated cluster from
//! [`rebalancer_sim::demo`], a kubectl `List`, or a scenario file `{"policy": …, "objects": List}` as
//! `shared/bench/gen_large.py` writes), stores a profile, posts runs, and reports ingest time,
//! snapshot build time, per-policy evaluation time (median over runs), run totals, proposals and
//! peak RSS. Each built-in policy of the profile is also run natively, on the same snapshot, for
//! the wasm/native ratio.
//! Must not: reach into the store or bypass the API for what it measures (the native runs are
//! the only in-process calls, and they are labelled as such).
//!
//! Bodies are streamed from disk by a minimal HTTP/1.1 client, so the 420 MB reference cluster
//! is never held by the client side of this process and the peak RSS is the server's.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context as _, bail};
use serde::Serialize;
use serde_json::{Value, json};

use rebalancer_policy_sdk::model::Section;

use rebalancer_engine::{profile, run};
use rebalancer_server::app;
use rebalancer_server::config::{LogFormat, Secret, Settings};
use rebalancer_sim::demo::{DEMO_SEED, SimulatedCluster};

use crate::native;

/// Name of the cluster and profile the benchmark creates in its temporary database.
const BENCH_NAME: &str = "bench";

/// Measure snapshot ingest and runs through the API, and the built-in policies natively.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// Nodes of the generated cluster.
    #[arg(long, default_value_t = 5000)]
    pub nodes: usize,

    /// Pods of the generated cluster (DaemonSet pods included).
    #[arg(long, default_value_t = 150_000)]
    pub pods: usize,

    /// Seed of the generated cluster.
    #[arg(long, default_value_t = DEMO_SEED)]
    pub seed: u64,

    /// Read the cluster from a JSON file instead of generating one: a kubectl `List`, or a
    /// scenario file `{"policy": DeschedulerPolicy, "objects": List}` (gen_large.py's format).
    #[arg(long, value_name = "PATH", conflicts_with_all = ["nodes", "pods", "seed"])]
    pub file: Option<PathBuf>,

    /// DeschedulerPolicy (JSON) to run. Default: the scenario file's own policy, else the
    /// server's `default` profile. Plugins that are not registered policies are left out (and
    /// listed).
    #[arg(long, value_name = "PATH")]
    pub profile: Option<PathBuf>,

    /// Upload this policy module before storing the profile (repeatable), e.g. the Python
    /// example policy's component; each upload's time (compile and `info` included) is reported.
    #[arg(long, value_name = "WASM")]
    pub upload: Vec<PathBuf>,

    /// Keep only these plugins of the profile (comma-separated, e.g.
    /// `RemoveDuplicates,LowNodeUtilization`); DefaultEvictor always stays.
    #[arg(long, value_name = "PLUGINS", value_delimiter = ',')]
    pub only: Vec<String>,

    /// Runs to make (medians are reported).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    pub runs: u32,

    /// Rounds run first and left out of the figures: the first evaluation of a policy pays for
    /// cold pool slots (page faults), which a server running periodic runs does not.
    #[arg(long, default_value_t = 1)]
    pub warmup: u32,

    /// Skip the native runs of the built-in policies.
    #[arg(long)]
    pub no_native: bool,

    /// Print the results as JSON instead of a table.
    #[arg(long)]
    pub json: bool,

    /// Show the server's log (stderr; `RUST_LOG` filters it).
    #[arg(long)]
    pub log: bool,
}

/// Run the benchmark. Blocking: builds its own async runtime for the in-process server.
pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    if args.log {
        rebalancer_server::telemetry::init(LogFormat::Text);
    }
    let work = TempDir::new()?;
    let source = prepare_source(&args, &work.path)?;

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("bench-server")
        .build()
        .context("starting the async runtime")?;
    let mut settings = Settings::new(
        SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
        work.path.join("bench.db"),
    );
    settings.demo = false;
    settings.admin_token = Some(Secret::new(client::TOKEN));
    settings.snapshot_body_limit = settings
        .snapshot_body_limit
        .max(usize::try_from(source.body.end - source.body.start)? + 1);
    let startup = Instant::now();
    let mut server = runtime.block_on(app::spawn(settings))?;
    runtime.block_on(server.wait_ready())?;
    let startup_ms = ms(startup);
    let addr = server.addr;

    let result = measure(&args, &source, addr, &server.state, startup_ms);
    let stopped = runtime.block_on(server.stop());
    let report = result?;
    stopped?;

    write_report(args.json, &report, print_report)
}

/// Print `report` to stdout: as JSON with `json`, else with `table`.
pub(crate) fn write_report<R: Serialize>(
    json: bool,
    report: &R,
    table: impl FnOnce(&mut io::StdoutLock<'static>, &R) -> io::Result<()>,
) -> anyhow::Result<()> {
    let mut out = io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut out, report)?;
        writeln!(out)?;
    } else {
        table(&mut out, report)?;
    }
    Ok(())
}

/// Where the snapshot body and the profile come from.
pub(crate) struct Source {
    pub(crate) description: String,
    pub(crate) path: PathBuf,
    /// Byte range of the `List` inside `path`.
    pub(crate) body: std::ops::Range<u64>,
    /// The scenario file's DeschedulerPolicy, if any.
    pub(crate) policy: Option<Value>,
    /// The scenario file's `observedAt` (RFC 3339), passed with the snapshot.
    pub(crate) observed_at: Option<String>,
    generate_ms: Option<f64>,
}

fn prepare_source(args: &BenchArgs, work: &Path) -> anyhow::Result<Source> {
    if let Some(path) = &args.file {
        file_source(path)
    } else {
        let spec = SimulatedCluster {
            nodes: args.nodes,
            pods: args.pods,
            seed: args.seed,
        };
        spec.validate()?;
        let path = work.join("cluster.json");
        let started = Instant::now();
        let file = File::create(&path).with_context(|| format!("creating {}", path.display()))?;
        let summary = spec.write_json(file)?;
        let generate_ms = ms(started);
        let size = std::fs::metadata(&path)?.len();
        Ok(Source {
            description: format!(
                "generated: {} nodes, {} pods, {} PDBs (seed {:#x}), {:.1} MB of JSON",
                summary.nodes,
                summary.pods,
                summary.pdbs,
                args.seed,
                size as f64 / 1e6
            ),
            path,
            body: 0..size,
            policy: None,
            observed_at: None,
            generate_ms: Some(generate_ms),
        })
    }
}

/// A scenario file `{"policy": …, "objects": List}` or a kubectl `List`, found without parsing it.
pub(crate) fn file_source(path: &Path) -> anyhow::Result<Source> {
    let scan_started = Instant::now();
    let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let size = file.metadata()?.len();
    let values = scan::top_level_values(file).with_context(|| {
        format!(
            "{} is not a JSON object (the bench reads JSON kubectl Lists and scenario files)",
            path.display()
        )
    })?;
    let find = |key: &str| {
        values
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, r)| r.clone())
    };
    let read = |range: std::ops::Range<u64>| -> anyhow::Result<Vec<u8>> {
        use std::io::{Read, Seek, SeekFrom};
        let mut f = File::open(path)?;
        f.seek(SeekFrom::Start(range.start))?;
        let mut buf = Vec::with_capacity((range.end - range.start) as usize);
        f.take(range.end - range.start).read_to_end(&mut buf)?;
        Ok(buf)
    };
    let (body, policy, observed_at, what) = if let Some(objects) = find("objects") {
        let policy = match find("policy") {
            Some(range) => Some(
                serde_json::from_slice(&read(range)?)
                    .with_context(|| format!("the `policy` of {} is not JSON", path.display()))?,
            ),
            None => None,
        };
        let observed_at = match find("observedAt") {
            Some(range) => Some(
                serde_json::from_slice::<String>(&read(range)?).with_context(|| {
                    format!("the `observedAt` of {} is not a string", path.display())
                })?,
            ),
            None => None,
        };
        (objects, policy, observed_at, "scenario file")
    } else if find("items").is_some() {
        (0..size, None, None, "kubectl List")
    } else {
        bail!(
            "{} has neither `objects` (a scenario file) nor `items` (a kubectl List)",
            path.display()
        );
    };
    let mb = (body.end - body.start) as f64 / 1e6;
    Ok(Source {
        description: format!(
            "{} ({what}, {mb:.1} MB of JSON; scanned in {:.1} s)",
            path.display(),
            scan_started.elapsed().as_secs_f64()
        ),
        path: path.to_path_buf(),
        body,
        policy,
        observed_at,
        generate_ms: None,
    })
}

// ------------------------------------------------------------------------------------------
// Measuring
// ------------------------------------------------------------------------------------------

/// Everything the benchmark measured.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BenchReport {
    pub cluster: String,
    pub build: &'static str,
    pub generate_ms: Option<f64>,
    pub startup_ms: f64,
    pub uploads: Vec<UploadReport>,
    pub ingest: IngestReport,
    pub profile: ProfileReport,
    /// Rounds run before `runs` and left out of the figures.
    pub warmup: u32,
    pub runs: Vec<RunSample>,
    pub policies: Vec<PolicyReport>,
    pub run_total: Stats,
    pub run_round_trip: Stats,
    pub proposals: usize,
    pub native_run_total: Option<Stats>,
    /// Peak RSS of the whole process right after the ingest (`VmHWM`).
    pub peak_rss_after_ingest_bytes: Option<u64>,
    /// Peak RSS of the whole process at the end (`VmHWM`).
    pub peak_rss_bytes: Option<u64>,
}

/// A module uploaded with `--upload`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UploadReport {
    pub file: String,
    pub policy: String,
    pub bytes: u64,
    /// The whole `POST /api/v1/policies` request: validation, compile, `info`, persisting.
    pub request_ms: f64,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IngestReport {
    /// Client-side: the whole `PUT /api/v1/clusters/{name}/snapshot` request.
    pub request_ms: f64,
    pub body_bytes: u64,
    /// The server's own timings from the response.
    pub receive_ms: f64,
    pub parse_ms: f64,
    pub build_ms: f64,
    pub persist_ms: f64,
    pub total_ms: f64,
    pub nodes: i64,
    pub pods: i64,
    pub objects: i64,
    pub warnings: usize,
    /// Size of the snapshot archive every policy evaluation receives.
    pub archive_bytes: u64,
    /// Size of each section of the archive.
    pub sections: Vec<(String, u64)>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProfileReport {
    pub source: String,
    pub plugins: Vec<String>,
    /// Plugins of the document that are not registered policies, left out.
    pub skipped: Vec<String>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunSample {
    pub id: i64,
    pub round_trip_ms: f64,
    pub duration_ms: f64,
    pub proposals: usize,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyReport {
    pub plugin_set: String,
    pub plugin: String,
    pub extension_point: String,
    pub wasm: Stats,
    pub native: Option<Stats>,
    /// Median wasm time over median native time.
    pub ratio: Option<f64>,
    /// wasm time over native time of each round (the two run back to back).
    pub paired_ratio: Option<Stats>,
    /// The evaluating thread's CPU time, wasm and native, and their ratio per round: the same
    /// comparison without the time a busy or shared machine makes a thread wait.
    pub wasm_cpu: Option<Stats>,
    pub native_cpu: Option<Stats>,
    pub paired_cpu_ratio: Option<Stats>,
    pub proposals: u32,
    pub refusals: u32,
    pub peak_memory_bytes: u64,
    /// Snapshot sections the policy pulled, and their total size.
    pub snapshot_sections: Vec<String>,
    pub snapshot_bytes: u64,
    pub error: Option<String>,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct Stats {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Stats {
    pub(crate) fn of(samples: &[f64]) -> Stats {
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let median = if n == 0 {
            0.0
        } else if n % 2 == 1 {
            sorted[n / 2]
        } else {
            (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
        };
        Stats {
            median,
            min: sorted.first().copied().unwrap_or(0.0),
            max: sorted.last().copied().unwrap_or(0.0),
        }
    }
}

fn measure(
    args: &BenchArgs,
    source: &Source,
    addr: SocketAddr,
    state: &rebalancer_server::http::AppState,
    startup_ms: f64,
) -> anyhow::Result<BenchReport> {
    use client::{Body, request};

    // Ingest.
    let started = Instant::now();
    let response = request(
        addr,
        "PUT",
        &match &source.observed_at {
            // RFC 3339 needs no escaping in a query but `+`; a zone offset is written `%2B`.
            Some(at) => format!(
                "/api/v1/clusters/{BENCH_NAME}/snapshot?observedAt={}",
                at.replace('+', "%2B")
            ),
            None => format!("/api/v1/clusters/{BENCH_NAME}/snapshot"),
        },
        "application/json",
        Body::File(&source.path, source.body.clone()),
    )?;
    let request_ms = ms(started);
    let peak_rss_after_ingest_bytes = peak_rss_bytes();
    let ingested = response.ok_json("pushing the snapshot")?;
    let timing = |key: &str| ingested["timings"][key].as_f64().unwrap_or(f64::NAN);
    let ingest = IngestReport {
        request_ms,
        body_bytes: source.body.end - source.body.start,
        receive_ms: timing("receiveMs"),
        parse_ms: timing("parseMs"),
        build_ms: timing("buildMs"),
        persist_ms: timing("persistMs"),
        total_ms: timing("totalMs"),
        nodes: ingested["nodes"].as_i64().unwrap_or(0),
        pods: ingested["pods"].as_i64().unwrap_or(0),
        objects: ingested["objects"].as_i64().unwrap_or(0),
        warnings: ingested["warnings"].as_array().map_or(0, Vec::len),
        archive_bytes: state
            .clusters
            .get(BENCH_NAME)
            .map_or(0, |s| s.archive_bytes().len() as u64),
        sections: state
            .clusters
            .get(BENCH_NAME)
            .map(|s| {
                Section::ALL
                    .iter()
                    .map(|&section| (section.name().to_string(), s.section(section).len() as u64))
                    .collect()
            })
            .unwrap_or_default(),
    };

    // Uploads, before the profile that may name them.
    let mut uploads = Vec::new();
    for path in &args.upload {
        let wasm = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        let started = Instant::now();
        let uploaded = request(
            addr,
            "POST",
            "/api/v1/policies",
            "application/wasm",
            Body::Bytes(&wasm),
        )?
        .ok_json(&format!("uploading {}", path.display()))?;
        uploads.push(UploadReport {
            file: path.display().to_string(),
            policy: uploaded["name"].as_str().unwrap_or_default().to_string(),
            bytes: wasm.len() as u64,
            request_ms: ms(started),
        });
    }

    // Profile: the chosen document, restricted to registered policies.
    let registered: Vec<String> = request(
        addr,
        "GET",
        "/api/v1/policies",
        "application/json",
        Body::Empty,
    )?
    .ok_json("listing policies")?["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|p| p["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let (document, profile_source) = match (&args.profile, &source.policy) {
        (Some(path), _) => {
            let text =
                std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
            let doc: Value = serde_json::from_slice(&text)
                .with_context(|| format!("{} is not a JSON DeschedulerPolicy", path.display()))?;
            (doc, path.display().to_string())
        }
        (None, Some(policy)) => (policy.clone(), "the scenario file's policy".to_string()),
        (None, None) => (
            profile::default_profile_document(),
            "the default profile".to_string(),
        ),
    };
    let document = if args.only.is_empty() {
        document
    } else {
        let (kept, _) = restrict_to(&document, &args.only);
        let missing: Vec<&String> = args
            .only
            .iter()
            .filter(|name| !mentions(&kept, name))
            .collect();
        anyhow::ensure!(
            missing.is_empty(),
            "--only names plugins that {profile_source} does not enable: {missing:?}"
        );
        kept
    };
    let (document, skipped) = restrict_to(&document, &registered);
    let body = serde_json::to_vec(&document)?;
    request(
        addr,
        "PUT",
        &format!("/api/v1/profiles/{BENCH_NAME}"),
        "application/json",
        Body::Bytes(&body),
    )?
    .ok_json("storing the profile")?;
    let spec = profile::parse_deschedule_policy(&document).map_err(|errors| {
        anyhow::anyhow!(
            "the profile does not parse: {}",
            profile::ProfileError::summary(&errors)
        )
    })?;
    let plugins: Vec<String> = spec
        .plugin_sets
        .iter()
        .flat_map(|set| set.deschedule.iter().chain(&set.balance))
        .map(|p| p.name.clone())
        .collect();

    // Rounds: a run through the API, then (unless --no-native) the same cycle with the built-ins
    // linked natively on the server's own snapshot. Interleaving the two keeps a slow phase of a
    // shared machine from landing on one side only; each round gives a paired wasm/native ratio.
    let native_snapshot = if args.no_native {
        None
    } else {
        Some(
            state
                .clusters
                .get(BENCH_NAME)
                .context("the benchmark cluster is not loaded in the server")?,
        )
    };
    let run_body = serde_json::to_vec(&json!({"cluster": BENCH_NAME, "profile": BENCH_NAME}))?;
    let mut runs = Vec::new();
    // Outcomes per (plugin set, plugin, extension point), in the order the run evaluated them.
    let mut wasm: Vec<(PolicyKey, Vec<Value>)> = Vec::new();
    // Wall and CPU milliseconds of each native evaluation.
    let mut native: HashMap<PolicyKey, Vec<(f64, Option<f64>)>> = HashMap::new();
    let mut native_totals = Vec::new();
    let mut proposals = 0;
    for round in 0..args.warmup + args.runs {
        let measured = round >= args.warmup;
        let label = if measured {
            format!("run {}", round - args.warmup + 1)
        } else {
            format!("warm-up run {}", round + 1)
        };
        let started = Instant::now();
        let run = request(
            addr,
            "POST",
            "/api/v1/runs",
            "application/json",
            Body::Bytes(&run_body),
        )?
        .ok_json(&label)?;
        let round_trip_ms = ms(started);
        if run["status"] != "succeeded" {
            bail!("{label} ended {}: {}", run["status"], run["error"]);
        }
        let native_report = native_snapshot
            .as_ref()
            .map(|snapshot| native_run(&spec, snapshot))
            .transpose()?;
        if !measured {
            continue;
        }
        let report = &run["report"];
        proposals = report["proposalCount"].as_u64().map_or(0, |n| n as usize);
        for outcome in report["policies"].as_array().into_iter().flatten() {
            let key = (
                outcome["pluginSet"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                outcome["plugin"].as_str().unwrap_or_default().to_string(),
                outcome["extensionPoint"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            );
            match wasm.iter_mut().find(|(k, _)| *k == key) {
                Some((_, outcomes)) => outcomes.push(outcome.clone()),
                None => wasm.push((key, vec![outcome.clone()])),
            }
        }
        runs.push(RunSample {
            id: run["id"].as_i64().unwrap_or(0),
            round_trip_ms,
            duration_ms: report["durationMs"].as_f64().unwrap_or(f64::NAN),
            proposals,
        });
        if let Some(report) = native_report {
            native_totals.push(report.duration_ms);
            for outcome in &report.policies {
                if outcome
                    .error
                    .as_ref()
                    .is_some_and(|e| e.kind == "missing-policy")
                {
                    continue;
                }
                let key = (
                    outcome.plugin_set.clone(),
                    outcome.plugin.clone(),
                    outcome.extension_point.clone(),
                );
                native
                    .entry(key)
                    .or_default()
                    .push((outcome.duration_ms, outcome.cpu_ms));
            }
        }
    }

    let policies = wasm
        .into_iter()
        .map(|(key, outcomes)| {
            let times: Vec<f64> = outcomes
                .iter()
                .filter_map(|o| o["durationMs"].as_f64())
                .collect();
            let wasm = Stats::of(&times);
            let native_rounds = native.get(&key);
            let native_times: Option<Vec<f64>> =
                native_rounds.map(|t| t.iter().map(|(wall, _)| *wall).collect());
            let native = native_times.as_deref().map(Stats::of);
            // Round by round: both sides ran back to back on the same machine state.
            let paired_ratio = native_times.as_deref().and_then(|t| paired(&times, t));
            let wasm_cpu_times: Option<Vec<f64>> =
                outcomes.iter().map(|o| o["cpuMs"].as_f64()).collect();
            let native_cpu_times: Option<Vec<f64>> =
                native_rounds.and_then(|t| t.iter().map(|(_, cpu)| *cpu).collect());
            let paired_cpu_ratio = wasm_cpu_times
                .as_deref()
                .zip(native_cpu_times.as_deref())
                .and_then(|(w, n)| paired(w, n));
            let last = outcomes.last().cloned().unwrap_or(Value::Null);
            PolicyReport {
                ratio: native
                    .filter(|n| n.median > 0.0)
                    .map(|n| wasm.median / n.median),
                paired_ratio,
                wasm_cpu: wasm_cpu_times.as_deref().map(Stats::of),
                native_cpu: native_cpu_times.as_deref().map(Stats::of),
                paired_cpu_ratio,
                plugin_set: key.0,
                plugin: key.1,
                extension_point: key.2,
                wasm,
                native,
                proposals: last["proposals"].as_u64().unwrap_or(0) as u32,
                refusals: last["refusals"].as_u64().unwrap_or(0) as u32,
                peak_memory_bytes: last["peakMemoryBytes"].as_u64().unwrap_or(0),
                snapshot_sections: last["snapshotSections"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|s| s["section"].as_str().map(str::to_owned))
                    .collect(),
                snapshot_bytes: last["snapshotBytes"].as_u64().unwrap_or(0),
                error: last["error"]
                    .as_object()
                    .map(|e| format!("{}: {}", e["kind"], e["message"])),
            }
        })
        .collect();

    Ok(BenchReport {
        cluster: source.description.clone(),
        build: if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        },
        generate_ms: source.generate_ms,
        startup_ms,
        uploads,
        ingest,
        profile: ProfileReport {
            source: profile_source,
            plugins,
            skipped,
        },
        warmup: args.warmup,
        run_total: Stats::of(&runs.iter().map(|r| r.duration_ms).collect::<Vec<_>>()),
        run_round_trip: Stats::of(&runs.iter().map(|r| r.round_trip_ms).collect::<Vec<_>>()),
        runs,
        policies,
        proposals,
        native_run_total: (!native_totals.is_empty()).then(|| Stats::of(&native_totals)),
        peak_rss_after_ingest_bytes,
        peak_rss_bytes: peak_rss_bytes(),
    })
}

fn native_run(
    spec: &profile::ProfileSpec,
    snapshot: &Arc<rebalancer_cluster::ClusterSnapshot>,
) -> anyhow::Result<run::RunReport> {
    native::execute(spec, snapshot).map_err(|e| match e {
        run::RunError::InvalidProfile(errors) => anyhow::anyhow!(
            "the profile cannot run natively: {}",
            profile::ProfileError::summary(&errors)
        ),
    })
}

/// Whether any plugin set of `document` enables `plugin` at some extension point.
fn mentions(document: &Value, plugin: &str) -> bool {
    document["profiles"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|set| set["plugins"].as_object())
        .flat_map(|points| points.values())
        .filter_map(|point| point["enabled"].as_array())
        .flatten()
        .any(|name| name.as_str() == Some(plugin))
}

/// The document with every plugin that is not a registered policy left out (DefaultEvictor is
/// the host's and always stays); returns the names left out.
pub(crate) fn restrict_to(document: &Value, registered: &[String]) -> (Value, Vec<String>) {
    let mut doc = document.clone();
    let mut skipped: Vec<String> = Vec::new();
    let keep =
        |name: &str| name == profile::DEFAULT_EVICTOR || registered.iter().any(|r| r == name);
    for set in doc["profiles"].as_array_mut().into_iter().flatten() {
        if let Some(config) = set["pluginConfig"].as_array_mut() {
            config.retain(|entry| {
                let name = entry["name"].as_str().unwrap_or_default();
                let kept = keep(name);
                if !kept && !skipped.iter().any(|s| s == name) {
                    skipped.push(name.to_string());
                }
                kept
            });
        }
        if let Some(points) = set["plugins"].as_object_mut() {
            for point in points.values_mut() {
                if let Some(enabled) = point["enabled"].as_array_mut() {
                    enabled.retain(|name| {
                        let name = name.as_str().unwrap_or_default();
                        let kept = keep(name);
                        if !kept && !skipped.iter().any(|s| s == name) {
                            skipped.push(name.to_string());
                        }
                        kept
                    });
                }
            }
            points.retain(|_, point| {
                point["enabled"]
                    .as_array()
                    .is_none_or(|enabled| !enabled.is_empty())
            });
        }
    }
    (doc, skipped)
}

/// (plugin set, plugin, extension point).
type PolicyKey = (String, String, String);

/// The ratio of each round's `wasm` time to its `native` time, when every round has both.
fn paired(wasm: &[f64], native: &[f64]) -> Option<Stats> {
    (wasm.len() == native.len() && !wasm.is_empty() && native.iter().all(|&n| n > 0.0)).then(|| {
        Stats::of(
            &wasm
                .iter()
                .zip(native)
                .map(|(w, n)| w / n)
                .collect::<Vec<_>>(),
        )
    })
}

/// Peak resident set size of this process (`VmHWM`), Linux only.
pub(crate) fn peak_rss_bytes() -> Option<u64> {
    status_bytes("VmHWM:")
}

/// A `/proc/self/status` size (`VmRSS:`, `VmHWM:`…) in bytes, Linux only.
pub(crate) fn status_bytes(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

pub(crate) fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1000.0
}

// ------------------------------------------------------------------------------------------
// Output
// ------------------------------------------------------------------------------------------

fn fmt_ms(v: f64) -> String {
    if v.is_nan() {
        "–".into()
    } else if v >= 10_000.0 {
        format!("{:.1} s", v / 1000.0)
    } else if v >= 100.0 {
        format!("{v:.0} ms")
    } else {
        format!("{v:.1} ms")
    }
}

fn print_report(out: &mut impl Write, r: &BenchReport) -> io::Result<()> {
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    writeln!(out, "rebalancer bench ({} build)", r.build)?;
    if r.build == "debug" {
        writeln!(
            out,
            "  note: a debug build; measure with `cargo run --release -- bench`"
        )?;
    }
    writeln!(out, "cluster:  {}", r.cluster)?;
    if let Some(g) = r.generate_ms {
        writeln!(
            out,
            "          generated in {} (not part of ingest)",
            fmt_ms(g)
        )?;
    }
    writeln!(
        out,
        "profile:  {} — {} ({} runs after {} warm-up; wasm and native interleaved)",
        r.profile.source,
        r.profile.plugins.join(", "),
        r.runs.len(),
        r.warmup
    )?;
    if !r.profile.skipped.is_empty() {
        writeln!(
            out,
            "          left out (not registered policies): {}",
            r.profile.skipped.join(", ")
        )?;
    }
    writeln!(
        out,
        "server start-up (built-ins compiled): {}",
        fmt_ms(r.startup_ms)
    )?;
    for u in &r.uploads {
        writeln!(
            out,
            "upload {} ({}, {:.1} MB): {} (compile and info included)",
            u.policy,
            u.file,
            u.bytes as f64 / 1e6,
            fmt_ms(u.request_ms)
        )?;
    }
    writeln!(out)?;
    let i = &r.ingest;
    writeln!(
        out,
        "ingest   PUT snapshot {:>10}   ({} nodes, {} pods, {} objects, {} warnings)",
        fmt_ms(i.request_ms),
        i.nodes,
        i.pods,
        i.objects,
        i.warnings
    )?;
    writeln!(
        out,
        "         receive {} · parse {} · snapshot build {} · persist {} (server total {})",
        fmt_ms(i.receive_ms),
        fmt_ms(i.parse_ms),
        fmt_ms(i.build_ms),
        fmt_ms(i.persist_ms),
        fmt_ms(i.total_ms)
    )?;
    writeln!(
        out,
        "         snapshot archive: {:.1} MiB; each policy pulls the core and the columns it reads",
        mib(i.archive_bytes)
    )?;
    writeln!(
        out,
        "         sections: {}",
        i.sections
            .iter()
            .map(|(name, bytes)| format!("{name} {:.1}", mib(*bytes)))
            .collect::<Vec<_>>()
            .join(" · ")
    )?;
    writeln!(out)?;
    writeln!(
        out,
        "{:<44} {:>10} {:>10} {:>11} {:>11} {:>13} {:>9} {:>8}",
        "policy (plugin set/extension point)",
        "wasm p50",
        "wasm max",
        "native p50",
        "wasm/native",
        "paired range",
        "proposals",
        "refused"
    )?;
    for p in &r.policies {
        let name = format!("{} ({}/{})", p.plugin, p.plugin_set, p.extension_point);
        writeln!(
            out,
            "{:<44} {:>10} {:>10} {:>11} {:>11} {:>13} {:>9} {:>8}",
            name,
            fmt_ms(p.wasm.median),
            fmt_ms(p.wasm.max),
            p.native.map_or("–".into(), |n| fmt_ms(n.median)),
            p.paired_ratio
                .map(|r| r.median)
                .or(p.ratio)
                .map_or("–".into(), |x| format!("{x:.2}×")),
            p.paired_ratio
                .map_or("–".into(), |r| format!("{:.2}–{:.2}×", r.min, r.max)),
            p.proposals,
            p.refusals
        )?;
        if let (Some(w), Some(n), Some(ratio)) = (p.wasm_cpu, p.native_cpu, p.paired_cpu_ratio) {
            writeln!(
                out,
                "    thread CPU time: wasm p50 {}, native p50 {}, wasm/native {:.2}× (paired range {:.2}–{:.2}×)",
                fmt_ms(w.median),
                fmt_ms(n.median),
                ratio.median,
                ratio.min,
                ratio.max
            )?;
        }
        if p.peak_memory_bytes > 0 {
            writeln!(
                out,
                "    guest linear memory peak {:.0} MiB; pulled {:.1} MiB of the snapshot ({})",
                mib(p.peak_memory_bytes),
                mib(p.snapshot_bytes),
                p.snapshot_sections.join(", ")
            )?;
        }
        if let Some(error) = &p.error {
            writeln!(out, "    failed: {error}")?;
        }
    }
    writeln!(out)?;
    writeln!(
        out,
        "run      total (server) median {} (min {}, max {}); HTTP round trip median {}",
        fmt_ms(r.run_total.median),
        fmt_ms(r.run_total.min),
        fmt_ms(r.run_total.max),
        fmt_ms(r.run_round_trip.median)
    )?;
    if let Some(n) = r.native_run_total {
        writeln!(out, "         native cycle median {}", fmt_ms(n.median))?;
    }
    writeln!(out, "         proposals per run: {}", r.proposals)?;
    match (r.peak_rss_after_ingest_bytes, r.peak_rss_bytes) {
        (Some(ingest), Some(end)) => writeln!(
            out,
            "peak RSS (VmHWM, whole process): {:.0} MiB (after the ingest: {:.0} MiB)",
            mib(end),
            mib(ingest)
        )?,
        _ => writeln!(out, "peak RSS: not available on this platform")?,
    }
    Ok(())
}

/// A directory removed when dropped.
pub(crate) struct TempDir {
    pub(crate) path: PathBuf,
}

impl TempDir {
    pub(crate) fn new() -> anyhow::Result<TempDir> {
        TempDir::new_in(&std::env::temp_dir())
    }

    /// A new directory inside `dir`.
    pub(crate) fn new_in(dir: &Path) -> anyhow::Result<TempDir> {
        let path = dir.join(format!(
            "rebalancer-bench-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        ));
        std::fs::create_dir_all(&path)
            .with_context(|| format!("creating the work directory {}", path.display()))?;
        Ok(TempDir { path })
    }

    /// Keep the directory: it is not removed; its path.
    pub(crate) fn keep(self) -> PathBuf {
        let mut this = std::mem::ManuallyDrop::new(self);
        std::mem::take(&mut this.path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

// ------------------------------------------------------------------------------------------
// Finding the parts of a big JSON file without parsing it
// ------------------------------------------------------------------------------------------

/// Byte ranges of the values of a JSON document's top-level keys, found in one streaming pass
/// (a 420 MB scenario file is never held in memory or parsed here).
pub(crate) mod scan {
    use std::io::{self, Read};
    use std::ops::Range;

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum State {
        /// Before the top-level `{`.
        Start,
        ExpectKey,
        InKey,
        ExpectColon,
        ExpectValue,
        /// Inside a string value at depth 1.
        InStringValue,
        /// Inside an object/array value (depth > 1).
        InContainerValue,
        /// Inside a number/literal value at depth 1.
        InScalarValue,
        AfterValue,
        Done,
    }

    /// The top-level keys of the JSON object in `reader` and the byte range of each value.
    pub fn top_level_values(reader: impl Read) -> io::Result<Vec<(String, Range<u64>)>> {
        let invalid = |offset: u64, what: &str| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("not a JSON object at byte {offset}: {what}"),
            )
        };
        let mut reader = io::BufReader::with_capacity(1 << 20, reader);
        let mut out = Vec::new();
        let mut state = State::Start;
        let mut depth = 0usize;
        let mut in_string = false;
        let mut escaped = false;
        let mut key = Vec::new();
        let mut value_start = 0u64;
        let mut last_significant = 0u64;
        let mut offset = 0u64;
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = reader.read(&mut buf)?;
            if n == 0 {
                break;
            }
            for &b in &buf[..n] {
                let at = offset;
                offset += 1;
                if state == State::Done {
                    if !b.is_ascii_whitespace() {
                        return Err(invalid(at, "trailing characters after the object"));
                    }
                    continue;
                }
                if in_string {
                    if escaped {
                        escaped = false;
                    } else if b == b'\\' {
                        escaped = true;
                    } else if b == b'"' {
                        in_string = false;
                    }
                    match state {
                        State::InKey if !in_string => state = State::ExpectColon,
                        State::InKey => key.push(b),
                        State::InStringValue if !in_string => {
                            out.push((
                                String::from_utf8_lossy(&key).into_owned(),
                                value_start..at + 1,
                            ));
                            state = State::AfterValue;
                        }
                        _ => {}
                    }
                    continue;
                }
                if b.is_ascii_whitespace() {
                    continue;
                }
                match state {
                    State::Start => {
                        if b != b'{' {
                            return Err(invalid(at, "expected `{`"));
                        }
                        depth = 1;
                        state = State::ExpectKey;
                    }
                    State::ExpectKey => match b {
                        b'"' => {
                            in_string = true;
                            key.clear();
                            state = State::InKey;
                        }
                        b'}' => state = State::Done,
                        _ => return Err(invalid(at, "expected a key")),
                    },
                    State::ExpectColon => {
                        if b != b':' {
                            return Err(invalid(at, "expected `:`"));
                        }
                        state = State::ExpectValue;
                    }
                    State::ExpectValue => {
                        value_start = at;
                        match b {
                            b'"' => {
                                in_string = true;
                                state = State::InStringValue;
                            }
                            b'{' | b'[' => {
                                depth += 1;
                                state = State::InContainerValue;
                            }
                            _ => {
                                last_significant = at;
                                state = State::InScalarValue;
                            }
                        }
                    }
                    State::InContainerValue => match b {
                        b'"' => in_string = true,
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => {
                            depth -= 1;
                            if depth == 1 {
                                out.push((
                                    String::from_utf8_lossy(&key).into_owned(),
                                    value_start..at + 1,
                                ));
                                state = State::AfterValue;
                            }
                        }
                        _ => {}
                    },
                    State::InScalarValue => match b {
                        b',' | b'}' => {
                            out.push((
                                String::from_utf8_lossy(&key).into_owned(),
                                value_start..last_significant + 1,
                            ));
                            state = if b == b',' {
                                State::ExpectKey
                            } else {
                                State::Done
                            };
                        }
                        _ => last_significant = at,
                    },
                    State::AfterValue => match b {
                        b',' => state = State::ExpectKey,
                        b'}' => state = State::Done,
                        _ => return Err(invalid(at, "expected `,` or `}`")),
                    },
                    State::InKey | State::InStringValue | State::Done => {
                        unreachable!("handled above")
                    }
                }
            }
        }
        if state != State::Done {
            return Err(invalid(
                offset,
                "the document ends before the top-level object does",
            ));
        }
        Ok(out)
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        fn ranges(doc: &str) -> Vec<(String, String)> {
            top_level_values(doc.as_bytes())
                .unwrap()
                .into_iter()
                .map(|(k, r)| (k, doc[r.start as usize..r.end as usize].to_string()))
                .collect()
        }

        #[test]
        fn finds_every_top_level_value() {
            let doc = r#" {"name":"perf-\"x\"", "policy" : {"a":[1,{"b":"}"}]},
                "n": 12 , "t":true,"objects":{"kind":"List","items":[]} } "#;
            assert_eq!(
                ranges(doc),
                vec![
                    ("name".into(), r#""perf-\"x\"""#.into()),
                    ("policy".into(), r#"{"a":[1,{"b":"}"}]}"#.into()),
                    ("n".into(), "12".into()),
                    ("t".into(), "true".into()),
                    ("objects".into(), r#"{"kind":"List","items":[]}"#.into()),
                ]
            );
            assert_eq!(ranges("{}"), vec![]);
            assert_eq!(ranges(r#"{"k":null}"#), vec![("k".into(), "null".into())]);
        }

        #[test]
        fn rejects_what_is_not_one_object() {
            for bad in ["[1]", "{\"a\":1", "{\"a\" 1}", "{\"a\":1} x", "{1:2}"] {
                assert!(top_level_values(bad.as_bytes()).is_err(), "{bad}");
            }
        }
    }
}

// ------------------------------------------------------------------------------------------
// A minimal HTTP/1.1 client
// ------------------------------------------------------------------------------------------

/// Just enough HTTP/1.1 to drive the server from the bench: one request per connection
/// (`Connection: close`), bodies streamed from memory or from a range of a file, so a 420 MB
/// snapshot is sent without holding it in this process.
pub(crate) mod client {
    use std::fs::File;
    use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom, Write};
    use std::net::{SocketAddr, TcpStream};
    use std::ops::Range;
    use std::path::Path;

    use anyhow::{Context as _, bail};

    /// The admin token the bench starts its server with and sends with every request.
    pub const TOKEN: &str = "rb_bench-admin-token";

    pub enum Body<'a> {
        Empty,
        Bytes(&'a [u8]),
        /// `range` of the file at `path`.
        File(&'a Path, Range<u64>),
    }

    #[derive(Debug)]
    pub struct Response {
        pub status: u16,
        pub body: Vec<u8>,
    }

    impl Response {
        pub fn json(&self) -> anyhow::Result<serde_json::Value> {
            serde_json::from_slice(&self.body).with_context(|| {
                format!(
                    "response (HTTP {}) is not JSON: {}",
                    self.status,
                    String::from_utf8_lossy(&self.body[..self.body.len().min(500)])
                )
            })
        }

        /// The JSON body if the status is 2xx, else an error quoting the body.
        pub fn ok_json(&self, what: &str) -> anyhow::Result<serde_json::Value> {
            if !(200..300).contains(&self.status) {
                bail!(
                    "{what} failed with HTTP {}: {}",
                    self.status,
                    String::from_utf8_lossy(&self.body[..self.body.len().min(2000)])
                );
            }
            self.json()
        }
    }

    pub fn request(
        addr: SocketAddr,
        method: &str,
        path: &str,
        content_type: &str,
        body: Body<'_>,
    ) -> anyhow::Result<Response> {
        let mut stream =
            TcpStream::connect(addr).with_context(|| format!("connecting to {addr}"))?;
        stream.set_nodelay(true)?;
        let length = match &body {
            Body::Empty => 0,
            Body::Bytes(b) => b.len() as u64,
            Body::File(_, range) => range.end - range.start,
        };
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nUser-Agent: rebalancer-bench\r\n\
             Accept: application/json\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: {content_type}\r\n\
             Content-Length: {length}\r\nConnection: close\r\n\r\n"
        );
        stream.write_all(head.as_bytes())?;
        match body {
            Body::Empty => {}
            Body::Bytes(b) => stream.write_all(b)?,
            Body::File(file, range) => {
                let mut f =
                    File::open(file).with_context(|| format!("opening {}", file.display()))?;
                f.seek(SeekFrom::Start(range.start))?;
                let copied = io::copy(&mut f.take(range.end - range.start), &mut stream)
                    .with_context(|| format!("sending {} to {method} {path}", file.display()))?;
                if copied != length {
                    bail!("{} ended after {copied} of {length} bytes", file.display());
                }
            }
        }
        stream.flush()?;
        read_response(BufReader::new(stream))
            .with_context(|| format!("reading the response to {method} {path}"))
    }

    fn read_response(mut reader: impl BufRead) -> anyhow::Result<Response> {
        let mut line = String::new();
        reader.read_line(&mut line)?;
        let status: u16 = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .with_context(|| format!("bad status line {line:?}"))?;
        let mut content_length = None;
        let mut chunked = false;
        loop {
            line.clear();
            if reader.read_line(&mut line)? == 0 {
                bail!("connection closed inside the response headers");
            }
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                let value = value.trim();
                if name.eq_ignore_ascii_case("content-length") {
                    content_length = Some(value.parse::<usize>().context("bad Content-Length")?);
                } else if name.eq_ignore_ascii_case("transfer-encoding") {
                    chunked = value.eq_ignore_ascii_case("chunked");
                }
            }
        }
        let mut body = Vec::new();
        if chunked {
            loop {
                line.clear();
                reader.read_line(&mut line)?;
                let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
                    .with_context(|| format!("bad chunk size {line:?}"))?;
                if size == 0 {
                    break;
                }
                let start = body.len();
                body.resize(start + size, 0);
                reader.read_exact(&mut body[start..])?;
                line.clear();
                reader.read_line(&mut line)?;
            }
        } else if let Some(n) = content_length {
            body.resize(n, 0);
            reader.read_exact(&mut body)?;
        } else {
            reader.read_to_end(&mut body)?;
        }
        Ok(Response { status, body })
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn reads_plain_and_chunked_responses() {
            let plain = b"HTTP/1.1 201 Created\r\ncontent-length: 7\r\n\r\n{\"a\":1}";
            let r = read_response(&plain[..]).unwrap();
            assert_eq!((r.status, r.body.as_slice()), (201, &b"{\"a\":1}"[..]));
            let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{\"a\r\n4\r\n\":1}\r\n0\r\n\r\n";
            let r = read_response(&chunked[..]).unwrap();
            assert_eq!((r.status, r.body.as_slice()), (200, &b"{\"a\":1}"[..]));
            assert!(read_response(&b"garbage\r\n\r\n"[..]).is_err());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_are_medians() {
        let s = Stats::of(&[5.0, 1.0, 3.0]);
        assert_eq!((s.median, s.min, s.max), (3.0, 1.0, 5.0));
        assert_eq!(Stats::of(&[4.0, 1.0, 3.0, 2.0]).median, 2.5);
        assert_eq!(Stats::of(&[]).median, 0.0);
    }

    #[test]
    fn profiles_are_restricted_to_registered_policies() {
        let doc = json!({
            "apiVersion": "descheduler/v1alpha2",
            "kind": "DeschedulerPolicy",
            "profiles": [{
                "name": "default",
                "pluginConfig": [
                    {"name": "DefaultEvictor", "args": {}},
                    {"name": "PodLifeTime", "args": {"maxPodLifeTimeSeconds": 60}},
                    {"name": "RemoveDuplicates", "args": {}},
                ],
                "plugins": {
                    "filter": {"enabled": ["DefaultEvictor"]},
                    "deschedule": {"enabled": ["PodLifeTime"]},
                    "balance": {"enabled": ["RemoveDuplicates"]},
                },
            }],
        });
        let (restricted, skipped) = restrict_to(&doc, &["RemoveDuplicates".to_string()]);
        assert_eq!(skipped, vec!["PodLifeTime".to_string()]);
        let set = &restricted["profiles"][0];
        assert_eq!(set["pluginConfig"].as_array().map(Vec::len), Some(2));
        assert!(set["plugins"].get("deschedule").is_none());
        assert_eq!(
            set["plugins"]["balance"]["enabled"],
            json!(["RemoveDuplicates"])
        );
        assert_eq!(
            set["plugins"]["filter"]["enabled"],
            json!(["DefaultEvictor"])
        );
    }

    #[test]
    fn only_keeps_the_named_plugins_and_knows_what_a_profile_enables() {
        let doc = json!({
            "profiles": [{
                "name": "default",
                "pluginConfig": [
                    {"name": "DefaultEvictor", "args": {}},
                    {"name": "PodLifeTime", "args": {}},
                    {"name": "RemoveDuplicates", "args": {}},
                    {"name": "LowNodeUtilization", "args": {}},
                ],
                "plugins": {
                    "deschedule": {"enabled": ["PodLifeTime"]},
                    "balance": {"enabled": ["RemoveDuplicates", "LowNodeUtilization"]},
                },
            }],
        });
        let only = ["LowNodeUtilization".to_string()];
        let (kept, _) = restrict_to(&doc, &only);
        assert!(mentions(&kept, "LowNodeUtilization"));
        assert!(!mentions(&kept, "RemoveDuplicates"));
        assert!(!mentions(&kept, "PodLifeTime"));
        assert!(!mentions(&doc, "HighNodeUtilization"));
        let names: Vec<&str> = kept["profiles"][0]["pluginConfig"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|c| c["name"].as_str())
            .collect();
        assert_eq!(names, ["DefaultEvictor", "LowNodeUtilization"]);
    }

    #[test]
    fn the_report_prints() {
        let stats = Stats::of(&[10.0, 12.0]);
        let report = BenchReport {
            cluster: "generated".into(),
            build: "release",
            generate_ms: Some(1.0),
            startup_ms: 2.0,
            uploads: vec![UploadReport {
                file: "example_python.wasm".into(),
                policy: "PodAgeOnHotNodes".into(),
                bytes: 18_584_434,
                request_ms: 3.0,
            }],
            ingest: IngestReport {
                request_ms: 1.0,
                body_bytes: 10,
                receive_ms: 1.0,
                parse_ms: 1.0,
                build_ms: 1.0,
                persist_ms: 1.0,
                total_ms: 4.0,
                nodes: 2,
                pods: 3,
                objects: 5,
                warnings: 0,
                archive_bytes: 3 << 20,
                sections: vec![("core".into(), 1 << 20), ("pod-names".into(), 1 << 19)],
            },
            profile: ProfileReport {
                source: "the default profile".into(),
                plugins: vec!["RemoveDuplicates".into()],
                skipped: vec![],
            },
            warmup: 1,
            runs: vec![],
            policies: vec![PolicyReport {
                plugin_set: "default".into(),
                plugin: "RemoveDuplicates".into(),
                extension_point: "balance".into(),
                wasm: stats,
                native: Some(stats),
                ratio: Some(1.0),
                paired_ratio: Some(Stats::of(&[0.9, 1.0, 1.2])),
                wasm_cpu: Some(Stats::of(&[9.0])),
                native_cpu: Some(Stats::of(&[6.0])),
                paired_cpu_ratio: Some(Stats::of(&[1.4, 1.5, 1.7])),
                proposals: 3,
                refusals: 1,
                peak_memory_bytes: 0,
                snapshot_sections: vec![],
                snapshot_bytes: 0,
                error: None,
            }],
            run_total: stats,
            run_round_trip: stats,
            proposals: 3,
            native_run_total: Some(stats),
            peak_rss_after_ingest_bytes: Some(1 << 29),
            peak_rss_bytes: Some(1 << 30),
        };
        let mut out = Vec::new();
        print_report(&mut out, &report).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains("RemoveDuplicates (default/balance)"),
            "{text}"
        );
        assert!(text.contains(" 1.00× "), "{text}");
        assert!(text.contains("0.90–1.20×"), "{text}");
        assert!(
            text.contains("wasm/native 1.50× (paired range 1.40–1.70×)"),
            "{text}"
        );
        assert!(
            text.contains("1 warm-up; wasm and native interleaved"),
            "{text}"
        );
        assert!(text.contains("snapshot archive: 3.0 MiB"), "{text}");
        assert!(
            text.contains("sections: core 1.0 · pod-names 0.5"),
            "{text}"
        );
        assert!(
            text.contains("1024 MiB (after the ingest: 512 MiB)"),
            "{text}"
        );
    }
}
