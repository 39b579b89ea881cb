//! `rebalancer-bench kube`: the Kubernetes backend on a large cluster served by the fake API
//! server.
//!
//! Owns the benchmark of live state. It starts `rebalancer-kube-fake` (built beside this
//! binary) as a child process serving the cluster file, then the real server in-process
//! managing that cluster through kube-rs (so the peak RSS is the server's, not the fake's),
//! and measures:
//! - initial sync (server start → first revision with every pod) and the first run after it;
//! - the process's RSS after the sync and its peak;
//! - `--updates` pod updates (merge patches of a label, then one marker pod created last) →
//!   the revision holding all of them, timed from the last write;
//! - runs on the live cluster against runs on the same file pushed as a snapshot.
//!
//! Must not: reach into the server for what it measures (all through HTTP).

use std::io::{BufRead, BufReader, Write as _};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use serde::Serialize;
use serde_json::{Value, json};

use rebalancer_server::app;
use rebalancer_server::config::{KubeCluster, Secret, Settings};

use crate::bench::client::{self, Body, request};
use crate::bench::{Stats, TempDir, ms, peak_rss_bytes, restrict_to, scan, status_bytes};

const LIVE: &str = "live";
const PUSHED: &str = "pushed";
const PROFILE: &str = "bench";

/// Measure the Kubernetes backend against the fake API server.
#[derive(Debug, Clone, clap::Args)]
pub struct KubeArgs {
    /// The cluster: a kubectl `List` or a scenario file `{"policy": …, "objects": List}`.
    pub file: PathBuf,
    /// Pods to update after the initial sync.
    #[arg(long, default_value_t = 1000)]
    pub updates: usize,
    /// Runs on each of the live and the pushed cluster (medians are reported).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub runs: u32,
    /// Keep only these plugins of the scenario's policy (comma-separated).
    #[arg(long, value_name = "PLUGINS", value_delimiter = ',')]
    pub only: Vec<String>,
    /// Print the results as JSON.
    #[arg(long)]
    pub json: bool,
}

/// What the benchmark measured.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KubeReport {
    pub pods: i64,
    pub nodes: i64,
    pub fake_load_ms: f64,
    /// Server start (before the first request to the API server) → first revision with every pod.
    pub initial_sync_ms: f64,
    /// Server start → the first run finished.
    pub sync_to_first_run_ms: f64,
    pub rss_after_sync_mib: f64,
    pub peak_rss_after_sync_mib: f64,
    pub updates: usize,
    /// Time to send the updates (merge patches, one connection each) and the marker.
    pub updates_write_ms: f64,
    /// Last write → the revision holding every update is current.
    pub updates_to_revision_ms: f64,
    pub revisions_during_updates: i64,
    /// NodeMetrics reported again (koordlet's round: every `status.updateTime` set to now),
    /// when the cluster has them; then a second marker pod.
    pub metric_updates: usize,
    pub metric_updates_write_ms: f64,
    /// Last write → the revision holding the second marker (and so, the watches being in
    /// order per connection, very nearly every metric) is current.
    pub metric_updates_to_revision_ms: f64,
    pub live_run_ms: Vec<f64>,
    pub pushed_run_ms: Vec<f64>,
    pub live_run_median_ms: f64,
    pub pushed_run_median_ms: f64,
    pub proposals_live: i64,
    pub proposals_pushed: i64,
    pub peak_rss_mib: f64,
}

fn mib(bytes: Option<u64>) -> f64 {
    bytes.map_or(f64::NAN, |b| b as f64 / 1048576.0)
}

/// The fake API server, killed when dropped.
struct Fake {
    child: Child,
    url: String,
}

impl Drop for Fake {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_fake(file: &std::path::Path) -> anyhow::Result<Fake> {
    let exe = std::env::current_exe()?;
    let fake = exe.with_file_name("rebalancer-kube-fake");
    if !fake.exists() {
        bail!(
            "{} is missing: build it with `cargo build --release -p rebalancer-kube-fake`",
            fake.display()
        );
    }
    // The Koordinator kinds are served, so a cluster with NodeMetrics and NRTs (`generate
    // --koordinator`) is watched whole; a List without them leaves them empty.
    let mut child = Command::new(&fake)
        .arg("--list")
        .arg(file)
        .arg("--groups")
        .arg("nodemetric,noderesourcetopology")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("starting {}", fake.display()))?;
    let stdout = child.stdout.take().context("the fake's stdout")?;
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line)?;
    let url = line.trim().to_owned();
    if !url.starts_with("http://") {
        bail!("the fake API server printed {line:?} instead of its URL");
    }
    Ok(Fake { child, url })
}

fn kubeconfig(url: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: bench\n  cluster:\n    server: {url}\n\
         users:\n- name: bench\n  user:\n    token: fake-token\ncontexts:\n- name: bench\n  context:\n    \
         cluster: bench\n    user: bench\ncurrent-context: bench\n"
    )
}

fn addr_of(url: &str) -> anyhow::Result<SocketAddr> {
    url.trim_start_matches("http://")
        .trim_end_matches('/')
        .parse()
        .with_context(|| format!("the fake's address in {url}"))
}

fn get(addr: SocketAddr, path: &str) -> anyhow::Result<Value> {
    request(addr, "GET", path, "application/json", Body::Empty)?.ok_json(path)
}

/// Poll the cluster view until `check` holds; returns it.
fn wait_cluster(
    addr: SocketAddr,
    name: &str,
    timeout: Duration,
    check: impl Fn(&Value) -> bool,
) -> anyhow::Result<Value> {
    let deadline = Instant::now() + timeout;
    loop {
        let response = request(
            addr,
            "GET",
            &format!("/api/v1/clusters/{name}"),
            "application/json",
            Body::Empty,
        )?;
        if response.status == 200 {
            let view = response.json()?;
            if check(&view) {
                return Ok(view);
            }
        }
        if Instant::now() > deadline {
            bail!("cluster {name} did not get there within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Create pod `name` in `namespace` on the fake: written after a batch of changes, its arrival in
/// a revision marks the batch as seen (watches deliver in order).
fn create_marker(fake: SocketAddr, namespace: &str, name: &str) -> anyhow::Result<()> {
    let marker = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"containers": [{"name": "c", "image": "pause"}]}
    })
    .to_string();
    request(
        fake,
        "POST",
        &format!("/api/v1/namespaces/{namespace}/pods"),
        "application/json",
        Body::Bytes(marker.as_bytes()),
    )?
    .ok_json(&format!("creating the marker pod {name}"))?;
    Ok(())
}

/// Run the profile on `cluster`: (duration reported by the server, proposals).
fn run_once(addr: SocketAddr, cluster: &str) -> anyhow::Result<(f64, i64)> {
    let body = json!({"cluster": cluster, "profile": PROFILE}).to_string();
    let run = request(
        addr,
        "POST",
        "/api/v1/runs",
        "application/json",
        Body::Bytes(body.as_bytes()),
    )?
    .ok_json("a run")?;
    if run["status"] != "succeeded" {
        bail!("the run on {cluster} did not succeed: {run:#}");
    }
    Ok((
        run["report"]["durationMs"].as_f64().unwrap_or(f64::NAN),
        run["proposals"].as_i64().unwrap_or(-1),
    ))
}

pub fn run(args: KubeArgs) -> anyhow::Result<()> {
    let work = TempDir::new()?;
    let file = std::fs::File::open(&args.file)
        .with_context(|| format!("opening {}", args.file.display()))?;
    let values = scan::top_level_values(file)?;
    let find = |key: &str| {
        values
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, r)| r.clone())
    };
    let observed_at = match find("observedAt") {
        Some(r) => {
            use std::io::{Read, Seek, SeekFrom};
            let mut file = std::fs::File::open(&args.file)?;
            file.seek(SeekFrom::Start(r.start))?;
            let mut bytes = Vec::new();
            file.take(r.end - r.start).read_to_end(&mut bytes)?;
            Some(serde_json::from_slice::<String>(&bytes).context("observedAt is not a string")?)
        }
        None => None,
    };
    let (body, policy) = match find("objects") {
        Some(objects) => {
            let policy = find("policy")
                .map(|r| -> anyhow::Result<Value> {
                    // Only the policy's bytes: the whole file would count in the peak RSS.
                    use std::io::{Read, Seek, SeekFrom};
                    let mut file = std::fs::File::open(&args.file)?;
                    file.seek(SeekFrom::Start(r.start))?;
                    let mut bytes = Vec::new();
                    file.take(r.end - r.start).read_to_end(&mut bytes)?;
                    Ok(serde_json::from_slice(&bytes)?)
                })
                .transpose()?;
            (objects, policy)
        }
        None => (0..std::fs::metadata(&args.file)?.len(), None),
    };

    let started = Instant::now();
    let fake = start_fake(&args.file)?;
    let fake_load_ms = ms(started);
    let fake_addr = addr_of(&fake.url)?;
    eprintln!("fake API server at {} ({fake_load_ms:.0} ms)", fake.url);
    let kubeconfig_path = work.path.join("kubeconfig");
    std::fs::write(&kubeconfig_path, kubeconfig(&fake.url))?;

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let mut settings = Settings::new(
        SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
        work.path.join("bench.db"),
    );
    settings.demo = false;
    settings.admin_token = Some(Secret::new(client::TOKEN));
    settings.snapshot_body_limit = settings
        .snapshot_body_limit
        .max(usize::try_from(body.end - body.start)? + 1);
    settings.kube.clusters = vec![KubeCluster {
        name: LIVE.into(),
        source: rebalancer_kube::Source::Kubeconfig {
            path: Some(kubeconfig_path),
            context: Some("bench".into()),
        },
    }];
    settings.kube.lease.namespace = "default".into();

    let started = Instant::now();
    let mut server = runtime.block_on(app::spawn(settings))?;
    runtime.block_on(server.wait_ready())?;
    let addr = server.addr;
    let result = (|| -> anyhow::Result<KubeReport> {
        // The expected pod count, from the fake itself.
        let pods_list = get(fake_addr, "/api/v1/pods?limit=1")?;
        let total_pods = pods_list["metadata"]["remainingItemCount"]
            .as_i64()
            .map(|n| n + 1);
        let synced = wait_cluster(addr, LIVE, Duration::from_secs(600), |v| {
            // Listed from the start: synced and with a revision installed.
            v["kubernetes"]["connection"]["state"] == "synced"
                && !v["kubernetes"]["connection"]["revision"].is_null()
                && total_pods.is_none_or(|n| v["pods"] == n)
        })?;
        let initial_sync_ms = ms(started);
        let pods = synced["pods"].as_i64().unwrap_or(0);
        let nodes = synced["nodes"].as_i64().unwrap_or(0);
        eprintln!("synced {nodes} nodes, {pods} pods in {initial_sync_ms:.0} ms");

        // The profile: the scenario's policy restricted to registered policies.
        let registered: Vec<String> = get(addr, "/api/v1/policies")?["items"]
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .filter_map(|p| p["name"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        let document = match &policy {
            Some(p) => restrict_to(p, &registered).0,
            None => get(addr, "/api/v1/profiles/default")?["document"].clone(),
        };
        let document = if args.only.is_empty() {
            document
        } else {
            let keep: Vec<String> = registered
                .iter()
                .filter(|r| args.only.contains(r) || r.as_str() == "DefaultEvictor")
                .cloned()
                .collect();
            restrict_to(&document, &keep).0
        };
        request(
            addr,
            "PUT",
            &format!("/api/v1/profiles/{PROFILE}"),
            "application/json",
            Body::Bytes(document.to_string().as_bytes()),
        )?
        .ok_json("storing the profile")?;
        let (first_run_ms, _) = run_once(addr, LIVE)?;
        let sync_to_first_run_ms = ms(started);
        eprintln!("first run {first_run_ms:.0} ms; start → first run {sync_to_first_run_ms:.0} ms");
        let rss_after_sync_mib = mib(status_bytes("VmRSS:"));
        let peak_rss_after_sync_mib = mib(peak_rss_bytes());

        // Updates: label patches, then a marker pod created last.
        let names = get(fake_addr, &format!("/api/v1/pods?limit={}", args.updates))?;
        let targets: Vec<(String, String)> = names["items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| {
                (
                    p["metadata"]["namespace"].as_str().unwrap_or("").to_owned(),
                    p["metadata"]["name"].as_str().unwrap_or("").to_owned(),
                )
            })
            .collect();
        let revision_before = get(addr, &format!("/api/v1/clusters/{LIVE}"))?["revision"]
            .as_i64()
            .unwrap_or(0);
        let patch = json!({"metadata": {"labels": {"rebalancer.io/bench": "updated"}}}).to_string();
        let write_started = Instant::now();
        for (ns, name) in &targets {
            request(
                fake_addr,
                "PATCH",
                &format!("/api/v1/namespaces/{ns}/pods/{name}"),
                "application/merge-patch+json",
                Body::Bytes(patch.as_bytes()),
            )?
            .ok_json("patching a pod")?;
        }
        let (marker_ns, _) = targets.first().cloned().unwrap_or_default();
        create_marker(fake_addr, &marker_ns, "rebalancer-bench-marker")?;
        let updates_write_ms = ms(write_started);
        let last_write = Instant::now();
        let updated = wait_cluster(addr, LIVE, Duration::from_secs(120), |v| {
            v["pods"] == pods + 1
        })?;
        let updates_to_revision_ms = ms(last_write);
        let revisions_during_updates = updated["revision"].as_i64().unwrap_or(0) - revision_before;
        eprintln!(
            "{} updates written in {updates_write_ms:.0} ms; revision ready {updates_to_revision_ms:.0} ms after the last",
            targets.len()
        );

        // koordlet's round: every NodeMetric reported now (so the live runs see fresh usage).
        let metric_names: Vec<String> =
            get(fake_addr, "/apis/slo.koordinator.sh/v1alpha1/nodemetrics")
                .ok()
                .and_then(|list| {
                    list["items"].as_array().map(|items| {
                        items
                            .iter()
                            .filter_map(|m| m["metadata"]["name"].as_str().map(str::to_owned))
                            .collect()
                    })
                })
                .unwrap_or_default();
        let (mut metric_updates_write_ms, mut metric_updates_to_revision_ms) = (0.0, 0.0);
        if !metric_names.is_empty() {
            let now = time::OffsetDateTime::now_utc()
                .replace_nanosecond(0)?
                .format(&time::format_description::well_known::Rfc3339)?;
            let patch = json!({"status": {"updateTime": now}}).to_string();
            let write_started = Instant::now();
            for name in &metric_names {
                request(
                    fake_addr,
                    "PATCH",
                    &format!("/apis/slo.koordinator.sh/v1alpha1/nodemetrics/{name}/status"),
                    "application/merge-patch+json",
                    Body::Bytes(patch.as_bytes()),
                )?
                .ok_json("reporting a NodeMetric")?;
            }
            create_marker(fake_addr, &marker_ns, "rebalancer-bench-marker-2")?;
            metric_updates_write_ms = ms(write_started);
            let last_write = Instant::now();
            wait_cluster(addr, LIVE, Duration::from_secs(120), |v| {
                v["pods"] == pods + 2
            })?;
            metric_updates_to_revision_ms = ms(last_write);
            eprintln!(
                "{} NodeMetrics reported in {metric_updates_write_ms:.0} ms; revision ready \
                 {metric_updates_to_revision_ms:.0} ms after the last",
                metric_names.len()
            );
        }

        // Runs: live, then the same file pushed.
        let mut live_run_ms = Vec::new();
        let mut proposals_live = 0;
        for _ in 0..args.runs {
            let (d, p) = run_once(addr, LIVE)?;
            live_run_ms.push(d);
            proposals_live = p;
        }
        request(
            addr,
            "PUT",
            &match &observed_at {
                Some(at) => format!(
                    "/api/v1/clusters/{PUSHED}/snapshot?observedAt={}",
                    at.replace('+', "%2B")
                ),
                None => format!("/api/v1/clusters/{PUSHED}/snapshot"),
            },
            "application/json",
            Body::File(&args.file, body.clone()),
        )?
        .ok_json("pushing the snapshot")?;
        let mut pushed_run_ms = Vec::new();
        let mut proposals_pushed = 0;
        for _ in 0..args.runs {
            let (d, p) = run_once(addr, PUSHED)?;
            pushed_run_ms.push(d);
            proposals_pushed = p;
        }
        Ok(KubeReport {
            pods,
            nodes,
            fake_load_ms,
            initial_sync_ms,
            sync_to_first_run_ms,
            rss_after_sync_mib,
            peak_rss_after_sync_mib,
            updates: targets.len(),
            updates_write_ms,
            updates_to_revision_ms,
            revisions_during_updates,
            metric_updates: metric_names.len(),
            metric_updates_write_ms,
            metric_updates_to_revision_ms,
            live_run_median_ms: Stats::of(&live_run_ms).median,
            pushed_run_median_ms: Stats::of(&pushed_run_ms).median,
            live_run_ms,
            pushed_run_ms,
            proposals_live,
            proposals_pushed,
            peak_rss_mib: mib(peak_rss_bytes()),
        })
    })();
    let stopped = runtime.block_on(server.stop());
    let report = result?;
    stopped?;
    crate::bench::write_report(args.json, &report, |out, report| {
        writeln!(out, "{report:#?}")?;
        writeln!(out)
    })
}
