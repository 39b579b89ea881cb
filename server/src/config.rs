//! Configuration: the `rebalancer` command line (every flag also an environment variable) and the
//! validated, typed [`Settings`] the server runs with.
//!
//! Owns: flag names, defaults and validation. Must not: open files, sockets or databases — that
//! is `app`'s job once [`Settings`] exist.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;

use clap::{Args, Parser, Subcommand, ValueEnum};

use rebalancer_engine::{CompileSettings, Isolation, SandboxLimits};

pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";
pub const DEFAULT_DATABASE: &str = "./rebalancer.db";
/// Admits the benchmark's reference cluster (150,000 pods, ~420 MB of kubectl JSON).
pub const DEFAULT_SNAPSHOT_BODY_LIMIT: ByteSize = ByteSize(1 << 30);
/// Policy uploads are the largest other bodies.
pub const DEFAULT_BODY_LIMIT: ByteSize = ByteSize(64 << 20);
/// One push at a time: see `--max-concurrent-snapshot-pushes`.
pub const DEFAULT_MAX_CONCURRENT_SNAPSHOT_PUSHES: usize = 1;
/// Long enough for a push of the reference cluster (~6 s) to wait for several before it.
pub const DEFAULT_SNAPSHOT_PUSH_MAX_WAIT: &str = "60s";

/// Rebalancer: keeps Kubernetes clusters balanced with WebAssembly descheduling policies.
#[derive(Debug, Parser)]
#[command(name = "rebalancer", version, args_conflicts_with_subcommands = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// `serve` flags, accepted without the subcommand too.
    #[command(flatten)]
    pub serve: ServeArgs,
}

// Parsed once at start-up: the size of `ServeArgs` costs nothing worth a box.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the server (the default when no subcommand is given).
    Serve(ServeArgs),
    /// Run one policy, or a whole profile, offline on a snapshot file: no server, no database.
    #[command(after_help = crate::eval::EXIT_CODES_HELP)]
    Eval(EvalArgs),
    /// Create a policy crate of your own in DIR (Cargo.toml, src/lib.rs, tests/), from the
    /// worked example of docs/writing-a-policy.md, with the SDK as a path dependency: ready for
    /// `cargo test` and `cargo build --target wasm32-wasip2 --profile policy`.
    NewPolicy(NewPolicyArgs),
}

/// Flags of `rebalancer new-policy`.
#[derive(Debug, Clone, Args)]
pub struct NewPolicyArgs {
    /// The directory to create (absent or empty). Its name names the crate (`old-pods`) and,
    /// in CamelCase, the plugin (`OldPods`).
    pub dir: PathBuf,
    /// The plugin's name (what profiles enable, and the Rust type): ASCII letters and digits,
    /// starting with an uppercase letter. Default: DIR's name in CamelCase.
    #[arg(long)]
    pub name: Option<String>,
    /// The SDK to depend on: the policy-sdk directory of a Rebalancer checkout. Default: the
    /// one this binary was built from, if it is still there.
    #[arg(long)]
    pub sdk: Option<PathBuf>,
}

impl Cli {
    /// The command to run (`serve` with the top-level flags when none was named).
    pub fn into_command(self) -> Command {
        self.command.unwrap_or(Command::Serve(self.serve))
    }
}

/// Flags of `rebalancer eval`. The sandbox is the server's, with its default limits; see
/// [`crate::eval`].
#[derive(Debug, Clone, Args)]
#[command(group(
    clap::ArgGroup::new("what").required(true).multiple(true).args(["policy", "builtin", "profile"])
))]
pub struct EvalArgs {
    /// The policy module to run (a `wasm32-wasip2` component), checked and compiled as an
    /// upload is. With --profile, the profile may enable it next to the built-ins.
    #[arg(value_name = "POLICY.wasm", conflicts_with = "builtin")]
    pub policy: Option<PathBuf>,

    /// Run a built-in policy by its plugin name (e.g. PodLifeTime, LowNodeUtilization).
    #[arg(long, value_name = "NAME", conflicts_with = "profile")]
    pub builtin: Option<String>,

    /// The cluster: a `kubectl get … -o json` (or `-o yaml`) List, read as
    /// `PUT /api/v1/clusters/{name}/snapshot` reads it. `-` reads standard input.
    #[arg(long, value_name = "CLUSTER.json|.yaml")]
    pub snapshot: PathBuf,

    /// The policy's args (JSON or YAML object), checked by the policy's validate-args. Default:
    /// the policy's own defaults.
    #[arg(long, value_name = "FILE", conflicts_with = "profile")]
    pub args: Option<PathBuf>,

    /// Run a DeschedulerPolicy document (JSON or YAML, as `PUT /api/v1/profiles/{name}`
    /// accepts) with its DefaultEvictor: its plugins are built-ins or POLICY.wasm.
    #[arg(long, value_name = "DESCHEDULERPOLICY.yaml")]
    pub profile: Option<PathBuf>,

    /// Where the single policy is enabled (default: every extension point it implements).
    #[arg(long, value_enum, conflicts_with = "profile")]
    pub extension_point: Option<EvalExtensionPoint>,

    /// Policy state: read from DIR/state.json before the run (none if missing), so that
    /// consecutive evals see each other's state as consecutive runs do.
    #[arg(long, value_name = "DIR")]
    pub state: Option<PathBuf>,

    /// Write the state the run commits to DIR/state.json (as the server commits it: the scopes
    /// of policies that succeeded). Without it --state is only read.
    #[arg(long, requires = "state")]
    pub write_state: bool,

    /// The snapshot's time (RFC 3339), which policies see as now [default: the current time].
    #[arg(long, value_name = "TIME")]
    pub observed_at: Option<String>,

    /// What to print on standard output.
    #[arg(long, value_enum, default_value_t = EvalOutput::Table)]
    pub output: EvalOutput,

    /// Keep compiled policy code in DIR (created when missing) and load it from there on the next
    /// eval instead of compiling again: the same cache the server keeps (`--policy-cache-dir`),
    /// keyed by module digest and engine build, so a server's cache directory can be shared.
    /// A Python component takes tens of seconds to compile and well under one to load
    /// [default: no cache, every eval compiles].
    #[arg(long, value_name = "DIR", env = "REBALANCER_POLICY_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
}

/// `rebalancer eval --output`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EvalOutput {
    /// Sections for people: policies and timings, proposals, refusals, logs, state.
    Table,
    /// One JSON object (its shape is documented in docs/writing-a-policy.md).
    Json,
}

/// `rebalancer eval --extension-point`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EvalExtensionPoint {
    Deschedule,
    Balance,
}

/// Flags of `rebalancer serve`.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, env = "REBALANCER_LISTEN", default_value = DEFAULT_LISTEN)]
    pub listen: SocketAddr,

    /// SQLite database file; created and migrated when missing.
    #[arg(long, env = "REBALANCER_DATABASE", default_value = DEFAULT_DATABASE)]
    pub database: PathBuf,

    /// Do not load the demo cluster at start-up (it is only loaded when no cluster exists).
    #[arg(long, env = "REBALANCER_NO_DEMO")]
    pub no_demo: bool,

    /// Largest body of `PUT /api/v1/clusters/{name}/snapshot` (bytes, or with KiB/MiB/GiB).
    #[arg(long, env = "REBALANCER_SNAPSHOT_BODY_LIMIT", default_value_t = DEFAULT_SNAPSHOT_BODY_LIMIT)]
    pub snapshot_body_limit: ByteSize,

    /// Snapshot pushes that may read and ingest their body at once. Each holds its body and,
    /// while it is parsed and built, about as much again (the 420 MB reference cluster peaks
    /// at ~900 MiB): the default of one keeps the server within 1 GiB for pushes of that size.
    /// Raise it only with the memory for that many pushes of --snapshot-body-limit.
    #[arg(
        long,
        env = "REBALANCER_MAX_CONCURRENT_SNAPSHOT_PUSHES",
        default_value_t = DEFAULT_MAX_CONCURRENT_SNAPSHOT_PUSHES
    )]
    pub max_concurrent_snapshot_pushes: usize,

    /// How long a snapshot push waits for its turn (Go duration, e.g. `60s`; `0s`: not at
    /// all) before it is answered 503 with Retry-After. A waiting push has not read its body.
    #[arg(long, env = "REBALANCER_SNAPSHOT_PUSH_MAX_WAIT", default_value = DEFAULT_SNAPSHOT_PUSH_MAX_WAIT)]
    pub snapshot_push_max_wait: String,

    /// Largest body of every other endpoint, policy uploads included (bytes, or KiB/MiB/GiB).
    #[arg(long, env = "REBALANCER_BODY_LIMIT", default_value_t = DEFAULT_BODY_LIMIT)]
    pub body_limit: ByteSize,

    /// How long a client has to send a request's head (request line and headers), from
    /// connecting or from the previous answer on a kept-alive connection (Go duration); then
    /// the connection is closed.
    #[arg(long, env = "REBALANCER_HEADER_READ_TIMEOUT", default_value = DEFAULT_HEADER_READ_TIMEOUT)]
    pub header_read_timeout: String,

    /// Longest pause in a request body while the server waits for it (Go duration); then the
    /// request is answered 408 and the connection closed.
    #[arg(long, env = "REBALANCER_BODY_IDLE_TIMEOUT", default_value = DEFAULT_BODY_IDLE_TIMEOUT)]
    pub body_idle_timeout: String,

    /// Serve HTTPS with this certificate chain (PEM, the server's certificate first); needs
    /// --tls-key. The listener then speaks TLS only.
    #[arg(long, env = "REBALANCER_TLS_CERT")]
    pub tls_cert: Option<PathBuf>,

    /// The private key of --tls-cert's certificate (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(long, env = "REBALANCER_TLS_KEY")]
    pub tls_key: Option<PathBuf>,

    /// Let web pages from this origin (`https://portal.example.com`, scheme, host and port
    /// only) call the API from a browser (CORS). Repeatable; none: CORS off.
    #[arg(
        long = "cors-allow-origin",
        env = "REBALANCER_CORS_ALLOW_ORIGINS",
        value_delimiter = ','
    )]
    pub cors_allow_origins: Vec<String>,

    /// Largest policy module accepted at upload.
    #[arg(long, env = "REBALANCER_POLICY_MAX_MODULE_SIZE",
          default_value_t = ByteSize(SandboxLimits::default().max_module_bytes as u64))]
    pub policy_max_module_size: ByteSize,

    /// Linear-memory cap of each policy instance.
    #[arg(long, env = "REBALANCER_POLICY_MEMORY",
          default_value_t = ByteSize(SandboxLimits::default().memory_bytes as u64))]
    pub policy_memory: ByteSize,

    /// Deadline of each policy call, in milliseconds.
    #[arg(long, env = "REBALANCER_POLICY_TIMEOUT_MS",
          default_value_t = SandboxLimits::default().timeout_ms)]
    pub policy_timeout_ms: u64,

    /// WebAssembly stack cap of each policy call.
    #[arg(long, env = "REBALANCER_POLICY_STACK",
          default_value_t = ByteSize(SandboxLimits::default().stack_bytes as u64))]
    pub policy_stack: ByteSize,

    /// `propose-eviction` calls allowed per policy evaluation.
    #[arg(long, env = "REBALANCER_POLICY_MAX_PROPOSALS",
          default_value_t = SandboxLimits::default().max_proposals)]
    pub policy_max_proposals: u32,

    /// Log bytes a policy may write per evaluation.
    #[arg(long, env = "REBALANCER_POLICY_MAX_LOG",
          default_value_t = ByteSize(SandboxLimits::default().max_log_bytes as u64))]
    pub policy_max_log: ByteSize,

    /// Log lines a policy may write per evaluation (empty lines count too).
    #[arg(long, env = "REBALANCER_POLICY_MAX_LOG_LINES",
          default_value_t = SandboxLimits::default().max_log_lines)]
    pub policy_max_log_lines: usize,

    /// Size cap of one policy state scope (keys plus values: what one policy keeps per
    /// cluster, profile and plugin set from one run to the next).
    #[arg(long, env = "REBALANCER_POLICY_STATE_MAX_SIZE",
          default_value_t = ByteSize(SandboxLimits::default().max_state_bytes as u64))]
    pub policy_state_max_size: ByteSize,

    /// Policy evaluations allowed at once (0: one per CPU). Compiles have slots of their own.
    #[arg(
        long,
        env = "REBALANCER_MAX_CONCURRENT_EVALUATIONS",
        default_value_t = 0
    )]
    pub max_concurrent_evaluations: usize,

    /// Address-space limit of the process that compiles an uploaded module; a module that needs
    /// more is refused (422 compile_memory).
    #[arg(long, env = "REBALANCER_POLICY_COMPILE_MEMORY",
          default_value_t = ByteSize(rebalancer_engine::DEFAULT_COMPILE_MEMORY_BYTES))]
    pub policy_compile_memory: ByteSize,

    /// Deadline of one module compile in milliseconds; a module that takes longer is refused
    /// (422 compile_timeout).
    #[arg(long, env = "REBALANCER_POLICY_COMPILE_TIMEOUT_MS",
          default_value_t = rebalancer_engine::DEFAULT_COMPILE_TIMEOUT_MS)]
    pub policy_compile_timeout_ms: u64,

    /// Module compiles at once (each in a process of its own); more wait.
    #[arg(
        long,
        env = "REBALANCER_POLICY_COMPILE_CONCURRENCY",
        default_value_t = 1
    )]
    pub policy_compile_concurrency: usize,

    /// Directory of compiled policy code, so that a restart does not compile again
    /// [default: `<database file name without extension>-compiled` beside the database].
    #[arg(long, env = "REBALANCER_POLICY_CACHE_DIR")]
    pub policy_cache_dir: Option<PathBuf>,

    /// Compiled code kept in memory for modules no registered policy holds (re-uploads of a
    /// module, `validate` calls); least recently used first out.
    #[arg(long, env = "REBALANCER_POLICY_CACHE_MEMORY",
          default_value_t = ByteSize(rebalancer_engine::DEFAULT_MEMORY_CACHE_BYTES as u64))]
    pub policy_cache_memory: ByteSize,

    /// Log format.
    #[arg(long, env = "REBALANCER_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// An admin API token that is valid for as long as it is set (kept hashed; a new value
    /// replaces the previous one at start-up). Without it, the first start creates an admin
    /// token and prints it once to standard output.
    #[arg(long, env = "REBALANCER_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<Secret>,

    /// How long a proposed decision can be approved (Go duration: `1h`, `30m`, `90s`); older
    /// proposals expire.
    #[arg(long, env = "REBALANCER_PROPOSAL_TTL", default_value = DEFAULT_PROPOSAL_TTL)]
    pub proposal_ttl: String,

    /// Manage a Kubernetes cluster with this server's own credentials: `NAME` (the
    /// kubeconfig's current context) or `NAME=CONTEXT`. Repeatable. The kubeconfig is
    /// `--kubeconfig`, else `$KUBECONFIG`, else `~/.kube/config`.
    #[arg(
        long = "kube-cluster",
        env = "REBALANCER_KUBE_CLUSTERS",
        value_delimiter = ','
    )]
    pub kube_clusters: Vec<String>,

    /// The kubeconfig file of `--kube-cluster` clusters.
    #[arg(long, env = "REBALANCER_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,

    /// Manage the cluster this server runs in, under this name, with its service account.
    #[arg(long, env = "REBALANCER_IN_CLUSTER")]
    pub in_cluster: Option<String>,

    /// How room is reserved before an eviction in Kubernetes clusters: `auto` (Koordinator
    /// Reservations where the API server serves them, placeholder pods otherwise),
    /// `reservation` or `placeholder`.
    #[arg(long, env = "REBALANCER_RESERVATION_MODE", default_value = "auto")]
    pub reservation_mode: String,

    /// Image of placeholder pods.
    #[arg(long, env = "REBALANCER_PLACEHOLDER_IMAGE", default_value = DEFAULT_PLACEHOLDER_IMAGE)]
    pub placeholder_image: String,

    /// PriorityClass of placeholder pods (negative value, so the scheduler preempts them for
    /// the replacement; `deploy/` creates it).
    #[arg(long, env = "REBALANCER_PLACEHOLDER_PRIORITY_CLASS", default_value = DEFAULT_PLACEHOLDER_PRIORITY_CLASS)]
    pub placeholder_priority_class: String,

    /// Namespace of the per-cluster Leases, in each managed cluster (default: the namespace
    /// this pod runs in; outside a pod it must be given with managed clusters).
    #[arg(long, env = "REBALANCER_LEASE_NAMESPACE")]
    pub lease_namespace: Option<String>,

    /// This server's identity in Leases and Events (default: host name and process id).
    #[arg(long, env = "REBALANCER_IDENTITY")]
    pub identity: Option<String>,

    /// Schedulers that honour Koordinator Reservations; in `auto` reservation mode, pods of
    /// other schedulers get a placeholder pod instead (Koordinator's `schedulerNames`).
    #[arg(
        long,
        env = "REBALANCER_KOORD_SCHEDULER_NAMES",
        value_delimiter = ',',
        default_value = "koord-scheduler"
    )]
    pub koord_scheduler_names: Vec<String>,

    /// A Kubernetes cluster's changes become a new revision once none arrived for this long
    /// (Go duration)...
    #[arg(long, env = "REBALANCER_KUBE_DEBOUNCE", default_value = "200ms")]
    pub kube_debounce: String,

    /// ...or this long after the first change not in a revision yet, whichever comes first
    /// (Go duration).
    #[arg(long, env = "REBALANCER_KUBE_MAX_DELAY", default_value = "1s")]
    pub kube_max_delay: String,

    /// Keep proposals nobody acted on (expired or superseded: never approved or rejected) this long after
    /// their run finished (`7d`, `12h`, `30m`; `0`: forever). Their run stays and counts them.
    #[arg(long, env = "REBALANCER_RETAIN_PROPOSALS", default_value = DEFAULT_RETAIN_PROPOSALS)]
    pub retain_proposals: String,

    /// Keep the proposals of dry runs this long after their run finished (`0`: forever).
    #[arg(long, env = "REBALANCER_RETAIN_DRY_RUNS", default_value = DEFAULT_RETAIN_DRY_RUNS)]
    pub retain_dry_runs: String,

    /// Keep finished pod migrations (with their events and their decision), rejected
    /// decisions and the simulated backend's events this long (`0`: forever).
    #[arg(long, env = "REBALANCER_RETAIN_HISTORY", default_value = DEFAULT_RETAIN_HISTORY)]
    pub retain_history: String,

    /// Keep runs this long after they finished, and longer while one of their decisions is
    /// still kept (`0`: forever).
    #[arg(long, env = "REBALANCER_RETAIN_RUNS", default_value = DEFAULT_RETAIN_RUNS)]
    pub retain_runs: String,

    /// Keep audit entries this long: at least `1d`, or `0` (forever).
    #[arg(long, env = "REBALANCER_RETAIN_AUDIT", default_value = DEFAULT_RETAIN_AUDIT)]
    pub retain_audit: String,

    /// How often history past its keep time is deleted (Go duration); the first pass runs
    /// when the server is ready.
    #[arg(long, env = "REBALANCER_PRUNE_INTERVAL", default_value = DEFAULT_PRUNE_INTERVAL)]
    pub prune_interval: String,

    /// Let webhooks deliver to loopback, link-local, private (RFC 1918, fc00::/7), CGNAT
    /// (100.64.0.0/10), unspecified and multicast addresses. Off: such destinations are refused
    /// when a hook is created and again at each delivery (after DNS resolution).
    #[arg(long, env = "REBALANCER_WEBHOOK_ALLOW_PRIVATE_DESTINATIONS")]
    pub webhook_allow_private_destinations: bool,

    /// How long one delivery attempt may take, connecting included (Go duration).
    #[arg(long, env = "REBALANCER_WEBHOOK_TIMEOUT", default_value = DEFAULT_WEBHOOK_TIMEOUT)]
    pub webhook_timeout: String,

    /// Attempts per delivery before it fails for good.
    #[arg(long, env = "REBALANCER_WEBHOOK_MAX_ATTEMPTS", default_value_t = DEFAULT_WEBHOOK_MAX_ATTEMPTS)]
    pub webhook_max_attempts: u32,

    /// Wait before the second attempt of a delivery; it doubles after each failed attempt
    /// (up to --webhook-retry-max), less a random part of up to half (Go duration).
    #[arg(long, env = "REBALANCER_WEBHOOK_RETRY_BASE", default_value = DEFAULT_WEBHOOK_RETRY_BASE)]
    pub webhook_retry_base: String,

    /// The longest wait between two attempts of a delivery (Go duration).
    #[arg(long, env = "REBALANCER_WEBHOOK_RETRY_MAX", default_value = DEFAULT_WEBHOOK_RETRY_MAX)]
    pub webhook_retry_max: String,

    /// Disable a hook after this many of its deliveries in a row failed for good (an admin
    /// enables it again with POST /api/v1/webhooks/{id}/enable).
    #[arg(long, env = "REBALANCER_WEBHOOK_DISABLE_AFTER", default_value_t = DEFAULT_WEBHOOK_DISABLE_AFTER)]
    pub webhook_disable_after: u32,

    /// Keep delivered and failed webhook deliveries this long after they finished (`7d`,
    /// `12h`; `0`: forever). Pending deliveries are always kept.
    #[arg(long, env = "REBALANCER_RETAIN_WEBHOOK_DELIVERIES", default_value = DEFAULT_RETAIN_WEBHOOK_DELIVERIES)]
    pub retain_webhook_deliveries: String,
}

/// Default of `--webhook-timeout`.
pub const DEFAULT_WEBHOOK_TIMEOUT: &str = "10s";
/// Default of `--webhook-max-attempts`: with the default backoff (1 s doubling up to 1 h, less
/// up to half at random), the last attempt comes 1.6 to 3.1 hours after the first.
pub const DEFAULT_WEBHOOK_MAX_ATTEMPTS: u32 = 15;
/// Default of `--webhook-retry-base`.
pub const DEFAULT_WEBHOOK_RETRY_BASE: &str = "1s";
/// Default of `--webhook-retry-max`.
pub const DEFAULT_WEBHOOK_RETRY_MAX: &str = "1h";
/// Default of `--webhook-disable-after`.
pub const DEFAULT_WEBHOOK_DISABLE_AFTER: u32 = 5;
/// Default of `--retain-webhook-deliveries`.
pub const DEFAULT_RETAIN_WEBHOOK_DELIVERIES: &str = "7d";

/// How webhooks are delivered: the `--webhook-*` flags and `--retain-webhook-deliveries`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WebhookSettings {
    /// Deliver to private, loopback, link-local… addresses too.
    pub allow_private_destinations: bool,
    /// Per attempt.
    pub timeout: std::time::Duration,
    /// Attempts per delivery (at least 1).
    pub max_attempts: u32,
    /// The wait before the second attempt; doubled after each failed one, up to `retry_max`.
    pub retry_base: std::time::Duration,
    pub retry_max: std::time::Duration,
    /// Failed deliveries in a row that disable a hook (at least 1).
    pub disable_after: u32,
    /// How long finished deliveries are kept (`None`: forever).
    pub retain_deliveries: Option<std::time::Duration>,
}

impl Default for WebhookSettings {
    /// The flags' defaults.
    fn default() -> Self {
        let duration = |flag, text| positive_duration(flag, text).expect("a valid default");
        WebhookSettings {
            allow_private_destinations: false,
            timeout: duration("webhook-timeout", DEFAULT_WEBHOOK_TIMEOUT),
            max_attempts: DEFAULT_WEBHOOK_MAX_ATTEMPTS,
            retry_base: duration("webhook-retry-base", DEFAULT_WEBHOOK_RETRY_BASE),
            retry_max: duration("webhook-retry-max", DEFAULT_WEBHOOK_RETRY_MAX),
            disable_after: DEFAULT_WEBHOOK_DISABLE_AFTER,
            retain_deliveries: keep_time(
                "retain-webhook-deliveries",
                DEFAULT_RETAIN_WEBHOOK_DELIVERIES,
            )
            .expect("a valid default keep time"),
        }
    }
}

impl WebhookSettings {
    fn from_args(args: &ServeArgs) -> Result<WebhookSettings, ConfigError> {
        let at_least_one = |flag: &'static str, value: u32| {
            if value == 0 {
                Err(ConfigError {
                    flag,
                    message: "must be at least 1".into(),
                })
            } else {
                Ok(value)
            }
        };
        let retry_base = positive_duration("webhook-retry-base", &args.webhook_retry_base)?;
        let retry_max = positive_duration("webhook-retry-max", &args.webhook_retry_max)?;
        if retry_max < retry_base {
            return Err(ConfigError {
                flag: "webhook-retry-max",
                message: format!(
                    "{} is shorter than --webhook-retry-base {}",
                    args.webhook_retry_max, args.webhook_retry_base
                ),
            });
        }
        Ok(WebhookSettings {
            allow_private_destinations: args.webhook_allow_private_destinations,
            timeout: positive_duration("webhook-timeout", &args.webhook_timeout)?,
            max_attempts: at_least_one("webhook-max-attempts", args.webhook_max_attempts)?,
            retry_base,
            retry_max,
            disable_after: at_least_one("webhook-disable-after", args.webhook_disable_after)?,
            retain_deliveries: keep_time(
                "retain-webhook-deliveries",
                &args.retain_webhook_deliveries,
            )?,
        })
    }
}

/// Default of `--placeholder-image`.
pub const DEFAULT_PLACEHOLDER_IMAGE: &str = "registry.k8s.io/pause:3.10";
/// Default of `--placeholder-priority-class`.
pub const DEFAULT_PLACEHOLDER_PRIORITY_CLASS: &str = "rebalancer-placeholder";
/// Where a pod finds its own namespace.
const SERVICE_ACCOUNT_NAMESPACE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// A Kubernetes cluster the server manages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeCluster {
    pub name: String,
    pub source: rebalancer_kube::Source,
}

/// How the server works with Kubernetes clusters.
#[derive(Debug, Clone)]
pub struct KubeSettings {
    pub clusters: Vec<KubeCluster>,
    pub act: rebalancer_kube::ActOptions,
    pub sync: rebalancer_kube::SyncOptions,
    /// Lease namespace, identity and timing.
    pub lease: rebalancer_kube::LeaseOptions,
}

impl Default for KubeSettings {
    fn default() -> Self {
        let identity = default_identity();
        KubeSettings {
            clusters: Vec::new(),
            act: rebalancer_kube::ActOptions {
                instance: identity.clone(),
                ..rebalancer_kube::ActOptions::default()
            },
            sync: rebalancer_kube::SyncOptions::default(),
            // Set by `from_args` (the flag or the pod's namespace); empty without clusters.
            lease: rebalancer_kube::LeaseOptions::new("", &identity),
        }
    }
}

fn default_identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "rebalancer".to_owned());
    format!("{host}-{}", std::process::id())
}

impl KubeSettings {
    fn from_args(args: &ServeArgs) -> Result<KubeSettings, ConfigError> {
        let mut settings = KubeSettings::default();
        let bad = |flag: &'static str, message: String| ConfigError { flag, message };
        for spec in &args.kube_clusters {
            let (name, context) = match spec.split_once('=') {
                Some((name, context)) if !context.is_empty() => (name, Some(context.to_owned())),
                Some((_, _)) => {
                    return Err(bad(
                        "kube-cluster",
                        format!(
                            "{spec:?}: the context after '=' is empty (write NAME or NAME=CONTEXT)"
                        ),
                    ));
                }
                None => (spec.as_str(), None),
            };
            settings.clusters.push(KubeCluster {
                name: name.to_owned(),
                source: rebalancer_kube::Source::Kubeconfig {
                    path: args.kubeconfig.clone(),
                    context,
                },
            });
        }
        if let Some(name) = &args.in_cluster {
            settings.clusters.push(KubeCluster {
                name: name.clone(),
                source: rebalancer_kube::Source::InCluster,
            });
        }
        let mut seen = std::collections::BTreeSet::new();
        for c in &settings.clusters {
            let flag = if c.source == rebalancer_kube::Source::InCluster {
                "in-cluster"
            } else {
                "kube-cluster"
            };
            crate::ingest::check_name(&c.name).map_err(|reason| {
                bad(flag, format!("invalid cluster name {:?}: {reason}", c.name))
            })?;
            // The cluster's Lease is named after it: a Kubernetes name has no '_'.
            if c.name.contains('_') {
                return Err(bad(
                    flag,
                    format!(
                        "invalid cluster name {:?}: a Kubernetes cluster's name may not contain '_' \
                         (its Lease, rebalancer-<name>, must be a valid Kubernetes name)",
                        c.name
                    ),
                ));
            }
            if !seen.insert(c.name.clone()) {
                return Err(bad(flag, format!("cluster {:?} is named twice", c.name)));
            }
        }
        settings.act.reservation_mode = args
            .reservation_mode
            .parse()
            .map_err(|e| bad("reservation-mode", e))?;
        if args.placeholder_image.trim().is_empty() {
            return Err(bad("placeholder-image", "must not be empty".into()));
        }
        settings.act.placeholder_image = args.placeholder_image.clone();
        settings.act.placeholder_priority_class = args.placeholder_priority_class.clone();
        settings.act.koord_scheduler_names = args
            .koord_scheduler_names
            .iter()
            .map(|n| n.trim().to_owned())
            .filter(|n| !n.is_empty())
            .collect();
        if let Some(identity) = &args.identity {
            if identity.trim().is_empty() {
                return Err(bad("identity", "must not be empty".into()));
            }
            settings.act.instance = identity.clone();
            settings.lease.identity = identity.clone();
        }
        let duration =
            |flag: &'static str, text: &str| -> Result<std::time::Duration, ConfigError> {
                let nanos = rebalancer_policy_sdk::evictor::parse_go_duration(text)
                    .map_err(|m| bad(flag, format!("{m}: expected e.g. 200ms, 1s or 1m")))?;
                if nanos <= 0 {
                    return Err(bad(flag, "must be greater than 0".into()));
                }
                Ok(std::time::Duration::from_nanos(nanos as u64))
            };
        settings.sync.debounce = duration("kube-debounce", &args.kube_debounce)?;
        settings.sync.max_delay = duration("kube-max-delay", &args.kube_max_delay)?;
        if settings.sync.max_delay < settings.sync.debounce {
            return Err(bad(
                "kube-max-delay",
                format!(
                    "{} is shorter than --kube-debounce {}",
                    args.kube_max_delay, args.kube_debounce
                ),
            ));
        }
        settings.lease.namespace = lease_namespace(
            args.lease_namespace.as_deref(),
            std::fs::read_to_string(SERVICE_ACCOUNT_NAMESPACE).ok(),
            &settings.clusters,
        )?;
        Ok(settings)
    }
}

/// The namespace of the per-cluster Leases: `--lease-namespace`, else the namespace of the pod
/// the server runs in (`pod_namespace`, read from the service-account mount). Outside a pod
/// there is no sensible default (`default` is not what deploy/rbac.yaml grants, and a Lease
/// that cannot be taken leaves every approved pod migration waiting), so managed clusters
/// without the flag are refused.
fn lease_namespace(
    flag: Option<&str>,
    pod_namespace: Option<String>,
    clusters: &[KubeCluster],
) -> Result<String, ConfigError> {
    let bad = |message: String| ConfigError {
        flag: "lease-namespace",
        message,
    };
    if let Some(ns) = flag {
        let ns = ns.trim();
        if ns.is_empty() {
            return Err(bad("must not be empty".into()));
        }
        crate::ingest::check_name(ns)
            .ok()
            .filter(|_| !ns.contains(['.', '_']))
            .ok_or_else(|| {
                bad(format!(
                    "{ns:?} is not a Kubernetes namespace name (a-z, 0-9 and '-', at most 63)"
                ))
            })?;
        return Ok(ns.to_owned());
    }
    if let Some(ns) = pod_namespace
        .map(|n| n.trim().to_owned())
        .filter(|n| !n.is_empty())
    {
        return Ok(ns);
    }
    match clusters.first() {
        None => Ok(String::new()),
        Some(c) => Err(bad(format!(
            "is needed with managed clusters outside a pod (cluster {:?}): each managed \
             cluster's Lease rebalancer-<cluster> lives in this namespace, which the server's \
             RBAC must grant (deploy/rbac.yaml: `rebalancer`); set --lease-namespace or \
             REBALANCER_LEASE_NAMESPACE",
            c.name
        ))),
    }
}

/// Default of `--proposal-ttl`.
pub const DEFAULT_PROPOSAL_TTL: &str = "1h";
/// Default of `--retain-proposals`.
pub const DEFAULT_RETAIN_PROPOSALS: &str = "1d";
/// Default of `--retain-dry-runs`.
pub const DEFAULT_RETAIN_DRY_RUNS: &str = "6h";
/// Default of `--retain-history`.
pub const DEFAULT_RETAIN_HISTORY: &str = "90d";
/// Default of `--retain-runs`.
pub const DEFAULT_RETAIN_RUNS: &str = "30d";
/// Default of `--retain-audit`.
pub const DEFAULT_RETAIN_AUDIT: &str = "365d";
/// Default of `--prune-interval`.
pub const DEFAULT_PRUNE_INTERVAL: &str = "10m";
/// The shortest `--retain-audit`: the schema keeps audit entries younger than a day.
pub const MIN_RETAIN_AUDIT: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// How long history is kept (`None`: forever), and how often it is pruned: the `--retain-*`
/// flags and `--prune-interval`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetentionSettings {
    /// Expired proposals of runs (not dry runs), from when their run finished.
    pub proposals: Option<std::time::Duration>,
    /// Proposals of dry runs, from when their run finished.
    pub dry_runs: Option<std::time::Duration>,
    /// Finished pod migrations, rejected decisions, the simulated backend's events.
    pub history: Option<std::time::Duration>,
    /// Runs, once none of their decisions is left.
    pub runs: Option<std::time::Duration>,
    pub audit: Option<std::time::Duration>,
    pub interval: std::time::Duration,
}

impl Default for RetentionSettings {
    /// The flags' defaults.
    fn default() -> Self {
        let keep = |text| keep_time("retain", text).expect("a valid default keep time");
        RetentionSettings {
            proposals: keep(DEFAULT_RETAIN_PROPOSALS),
            dry_runs: keep(DEFAULT_RETAIN_DRY_RUNS),
            history: keep(DEFAULT_RETAIN_HISTORY),
            runs: keep(DEFAULT_RETAIN_RUNS),
            audit: keep(DEFAULT_RETAIN_AUDIT),
            interval: positive_duration("prune-interval", DEFAULT_PRUNE_INTERVAL)
                .expect("a valid default prune interval"),
        }
    }
}

impl RetentionSettings {
    fn from_args(args: &ServeArgs) -> Result<RetentionSettings, ConfigError> {
        let audit = keep_time("retain-audit", &args.retain_audit)?;
        if audit.is_some_and(|d| d < MIN_RETAIN_AUDIT) {
            return Err(ConfigError {
                flag: "retain-audit",
                message: format!(
                    "{} is shorter than a day: the database keeps audit entries for at least \
                     1d (or use 0 to keep them forever)",
                    args.retain_audit
                ),
            });
        }
        Ok(RetentionSettings {
            proposals: keep_time("retain-proposals", &args.retain_proposals)?,
            dry_runs: keep_time("retain-dry-runs", &args.retain_dry_runs)?,
            history: keep_time("retain-history", &args.retain_history)?,
            runs: keep_time("retain-runs", &args.retain_runs)?,
            audit,
            interval: positive_duration("prune-interval", &args.prune_interval)?,
        })
    }
}

/// A keep time: days (`90d`) or a Go duration (`12h`, `30m`); `0` (or any zero duration)
/// keeps forever (`None`). `flag` names it in the error.
pub fn keep_time(
    flag: &'static str,
    text: &str,
) -> Result<Option<std::time::Duration>, ConfigError> {
    let bad = |message: String| ConfigError { flag, message };
    let text = text.trim();
    let nanos: i128 = match text.strip_suffix('d') {
        Some(days) if !days.is_empty() && days.bytes().all(|b| b.is_ascii_digit()) => days
            .parse::<i128>()
            .ok()
            .and_then(|d| d.checked_mul(86_400_000_000_000))
            .ok_or_else(|| bad(format!("{text} is too long")))?,
        _ => rebalancer_policy_sdk::evictor::parse_go_duration(text).map_err(|m| {
            bad(format!(
                "{m}: expected days (7d) or a Go duration (12h, 30m), or 0 to keep forever"
            ))
        })?,
    };
    match nanos {
        n if n < 0 => Err(bad("must not be negative".into())),
        0 => Ok(None),
        n => u64::try_from(n)
            .map(|n| Some(std::time::Duration::from_nanos(n)))
            .map_err(|_| bad(format!("{text} is too long"))),
    }
}
/// Default of `--header-read-timeout`.
pub const DEFAULT_HEADER_READ_TIMEOUT: &str = "10s";
/// Default of `--body-idle-timeout`.
pub const DEFAULT_BODY_IDLE_TIMEOUT: &str = "30s";

/// A positive Go duration (`10s`, `500ms`) of a flag.
pub fn positive_duration(
    flag: &'static str,
    text: &str,
) -> Result<std::time::Duration, ConfigError> {
    let nanos =
        rebalancer_policy_sdk::evictor::parse_go_duration(text).map_err(|m| ConfigError {
            flag,
            message: format!("{m}: expected e.g. 500ms, 10s or 1m"),
        })?;
    if nanos <= 0 {
        return Err(ConfigError {
            flag,
            message: "must be greater than 0".into(),
        });
    }
    Ok(std::time::Duration::from_nanos(nanos as u64))
}

/// A secret from the command line or environment: never shown by `Debug` or `Display`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// The secret itself; call only where it is used (hashing), never to log it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

impl FromStr for Secret {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.is_empty() {
            return Err("the token is empty".into());
        }
        if !s.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(
                "a token may only contain visible ASCII characters (no spaces), as it \
                        travels in an `Authorization: Bearer` header"
                    .into(),
            );
        }
        Ok(Secret(s.to_string()))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// What the server runs with: every value validated.
#[derive(Debug, Clone)]
pub struct Settings {
    pub listen: SocketAddr,
    pub database: PathBuf,
    /// Load the demo cluster when the database has no cluster.
    pub demo: bool,
    pub snapshot_body_limit: usize,
    /// `--max-concurrent-snapshot-pushes` (at least 1).
    pub max_concurrent_snapshot_pushes: usize,
    /// `--snapshot-push-max-wait` in milliseconds (0: a push never waits).
    pub snapshot_push_max_wait_ms: u64,
    pub body_limit: usize,
    /// `--header-read-timeout`: time to send a request's head.
    pub header_read_timeout: std::time::Duration,
    /// `--body-idle-timeout`: longest pause in a request body.
    pub body_idle_timeout: std::time::Duration,
    /// `--tls-cert` and `--tls-key`: serve HTTPS (files read at start-up by `app`).
    pub tls: Option<TlsFiles>,
    /// `--cors-allow-origin`, each as a browser sends it in `Origin` (empty: CORS off).
    pub cors_allow_origins: Vec<String>,
    pub sandbox: SandboxLimits,
    /// How modules are compiled: [`Settings::new`] compiles in process without a disk cache
    /// (tests, tools); the command line in a child process, cached beside the database.
    pub compile: CompileSettings,
    pub max_concurrent_evaluations: usize,
    pub log_format: LogFormat,
    /// `--admin-token` / `REBALANCER_ADMIN_TOKEN`.
    pub admin_token: Option<Secret>,
    /// `--proposal-ttl` in milliseconds.
    pub proposal_ttl_ms: i64,
    /// Kubernetes clusters managed with the server's own credentials.
    pub kube: KubeSettings,
    /// How long history is kept and how often it is pruned.
    pub retention: RetentionSettings,
    /// How webhooks are delivered.
    pub webhooks: WebhookSettings,
}

/// The PEM files of `--tls-cert` and `--tls-key`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl TlsFiles {
    /// Both flags or neither.
    fn from_args(
        cert: Option<PathBuf>,
        key: Option<PathBuf>,
    ) -> Result<Option<TlsFiles>, ConfigError> {
        let missing = |flag: &'static str, other: &str| ConfigError {
            flag,
            message: format!(
                "is needed with --{other}: give both the certificate chain (--tls-cert) and its \
                 private key (--tls-key), or neither for plain HTTP"
            ),
        };
        match (cert, key) {
            (Some(cert), Some(key)) => Ok(Some(TlsFiles { cert, key })),
            (None, None) => Ok(None),
            (Some(_), None) => Err(missing("tls-key", "tls-cert")),
            (None, Some(_)) => Err(missing("tls-cert", "tls-key")),
        }
    }
}

/// An origin as browsers send it in `Origin`: `scheme://host[:port]`, scheme and host in lower
/// case, without the scheme's default port. Anything else is refused with the reason, so that
/// a typo does not silently leave a portal without access.
pub fn parse_origin(text: &str) -> Result<String, String> {
    let text = text.trim();
    let example = "write it as scheme://host[:port], e.g. https://portal.example.com";
    if text.is_empty() {
        return Err(format!("an origin is empty: {example}"));
    }
    if text == "*" {
        return Err(format!(
            "`*` is not accepted: list the origin of each portal that may call the API ({example})"
        ));
    }
    let Some((scheme, rest)) = text.split_once("://") else {
        return Err(format!("{text:?} has no scheme: {example}"));
    };
    let scheme = scheme.to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "https" => "443",
        "http" => "80",
        _ => return Err(format!("{text:?}: the scheme must be http or https")),
    };
    if let Some(at) = rest.find(['/', '?', '#']) {
        return Err(format!(
            "{text:?} has a path ({:?}), which an origin never has: {example}",
            &rest[at..]
        ));
    }
    if rest.contains('@') || !rest.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(format!(
            "{text:?}: an origin's host is plain ASCII, without user or spaces (write an \
             international name in its xn-- form)"
        ));
    }
    // `[::1]:8080` or `host:8080`: the port is after the last ':' outside brackets.
    let (host, port) = match rest.rfind(':') {
        Some(i) if !rest[i..].contains(']') => (&rest[..i], Some(&rest[i + 1..])),
        _ => (rest, None),
    };
    if host.is_empty() || host == "[]" {
        return Err(format!("{text:?} has no host: {example}"));
    }
    let mut origin = format!("{scheme}://{}", host.to_ascii_lowercase());
    if let Some(port) = port {
        match port.parse::<u16>() {
            Ok(n) if n > 0 => {
                if n.to_string() != default_port {
                    origin.push(':');
                    origin.push_str(&n.to_string());
                }
            }
            _ => return Err(format!("{text:?}: the port {port:?} is not a port number")),
        }
    }
    Ok(origin)
}

/// The least `--policy-compile-memory`: the compiler process maps the server binary and the
/// stacks of its threads before it compiles anything.
const MIN_COMPILE_MEMORY: u64 = 256 << 20;

/// `./rebalancer.db` → `./rebalancer-compiled`.
fn default_cache_dir(database: &std::path::Path) -> PathBuf {
    let stem = database
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "rebalancer".into());
    database.with_file_name(format!("{stem}-compiled"))
}

/// A flag value that cannot work.
#[derive(Debug, thiserror::Error)]
#[error("--{flag}: {message}")]
pub struct ConfigError {
    pub flag: &'static str,
    pub message: String,
}

impl Settings {
    /// Defaults for everything but where to listen and which database to use (tests, tools).
    pub fn new(listen: SocketAddr, database: PathBuf) -> Settings {
        Settings {
            listen,
            database,
            demo: true,
            snapshot_body_limit: DEFAULT_SNAPSHOT_BODY_LIMIT.0 as usize,
            max_concurrent_snapshot_pushes: DEFAULT_MAX_CONCURRENT_SNAPSHOT_PUSHES,
            snapshot_push_max_wait_ms: 60_000,
            body_limit: DEFAULT_BODY_LIMIT.0 as usize,
            header_read_timeout: std::time::Duration::from_secs(10),
            body_idle_timeout: std::time::Duration::from_secs(30),
            tls: None,
            cors_allow_origins: Vec::new(),
            sandbox: SandboxLimits::default(),
            compile: CompileSettings::default(),
            max_concurrent_evaluations: default_parallelism(),
            log_format: LogFormat::Text,
            admin_token: None,
            proposal_ttl_ms: 60 * 60 * 1000,
            kube: KubeSettings::default(),
            retention: RetentionSettings::default(),
            webhooks: WebhookSettings::default(),
        }
    }
}

impl TryFrom<ServeArgs> for Settings {
    type Error = ConfigError;

    fn try_from(args: ServeArgs) -> Result<Settings, ConfigError> {
        let size = |flag: &'static str, value: ByteSize, min: u64| -> Result<usize, ConfigError> {
            if value.0 < min {
                return Err(ConfigError {
                    flag,
                    message: format!("{value} is too small (at least {})", ByteSize(min)),
                });
            }
            usize::try_from(value.0).map_err(|_| ConfigError {
                flag,
                message: format!("{value} does not fit in this machine's address space"),
            })
        };
        let positive = |flag: &'static str, value: u64| -> Result<(), ConfigError> {
            if value == 0 {
                Err(ConfigError {
                    flag,
                    message: "must be greater than 0".into(),
                })
            } else {
                Ok(())
            }
        };
        positive("policy-timeout-ms", args.policy_timeout_ms)?;
        positive(
            "max-concurrent-snapshot-pushes",
            args.max_concurrent_snapshot_pushes as u64,
        )?;
        let snapshot_push_max_wait_ms = {
            let nanos =
                rebalancer_policy_sdk::evictor::parse_go_duration(&args.snapshot_push_max_wait)
                    .map_err(|message| ConfigError {
                        flag: "snapshot-push-max-wait",
                        message: format!("{message}: expected e.g. 60s, 2m or 0s"),
                    })?;
            u64::try_from(nanos / 1_000_000).map_err(|_| ConfigError {
                flag: "snapshot-push-max-wait",
                message: "must not be negative".into(),
            })?
        };
        positive("policy-max-proposals", u64::from(args.policy_max_proposals))?;
        let sandbox = SandboxLimits {
            max_module_bytes: size("policy-max-module-size", args.policy_max_module_size, 8)?,
            memory_bytes: size("policy-memory", args.policy_memory, 1 << 20)?,
            timeout_ms: args.policy_timeout_ms,
            stack_bytes: size("policy-stack", args.policy_stack, 64 << 10)?,
            max_proposals: args.policy_max_proposals,
            max_log_bytes: size("policy-max-log", args.policy_max_log, 0)?,
            max_log_lines: args.policy_max_log_lines,
            max_state_bytes: size("policy-state-max-size", args.policy_state_max_size, 0)?,
        };
        if let Some((name, wasm)) = rebalancer_builtins::modules()
            .iter()
            .max_by_key(|(_, wasm)| wasm.len())
            .filter(|(_, wasm)| wasm.len() > sandbox.max_module_bytes)
        {
            return Err(ConfigError {
                flag: "policy-max-module-size",
                message: format!(
                    "{} is smaller than the built-in policy module {name} ({} bytes)",
                    args.policy_max_module_size,
                    wasm.len()
                ),
            });
        }
        let body_limit = size("body-limit", args.body_limit, 1 << 10)?;
        if sandbox.max_module_bytes > body_limit {
            return Err(ConfigError {
                flag: "policy-max-module-size",
                message: format!(
                    "{} is larger than --body-limit {}: such uploads could never arrive",
                    args.policy_max_module_size, args.body_limit
                ),
            });
        }
        let kube = KubeSettings::from_args(&args)?;
        let tls = TlsFiles::from_args(args.tls_cert.clone(), args.tls_key.clone())?;
        let mut cors_allow_origins: Vec<String> = Vec::new();
        for text in &args.cors_allow_origins {
            let origin = parse_origin(text).map_err(|message| ConfigError {
                flag: "cors-allow-origin",
                message,
            })?;
            if !cors_allow_origins.contains(&origin) {
                cors_allow_origins.push(origin);
            }
        }
        let retention = RetentionSettings::from_args(&args)?;
        let webhooks = WebhookSettings::from_args(&args)?;
        positive("policy-compile-timeout-ms", args.policy_compile_timeout_ms)?;
        positive(
            "policy-compile-concurrency",
            args.policy_compile_concurrency as u64,
        )?;
        if args.policy_compile_memory.0 < MIN_COMPILE_MEMORY {
            return Err(ConfigError {
                flag: "policy-compile-memory",
                message: format!(
                    "{} is too small (at least {}: the compiler process itself needs that much \
                     address space)",
                    args.policy_compile_memory,
                    ByteSize(MIN_COMPILE_MEMORY)
                ),
            });
        }
        let compile = CompileSettings {
            isolation: Isolation::Subprocess {
                program: std::env::current_exe().map_err(|e| ConfigError {
                    flag: "policy-compile-memory",
                    message: format!(
                        "compiles run in a child process of this binary, whose path is \
                         unknown: {e}"
                    ),
                })?,
            },
            cache_dir: Some(
                args.policy_cache_dir
                    .clone()
                    .unwrap_or_else(|| default_cache_dir(&args.database)),
            ),
            memory_bytes: args.policy_compile_memory.0,
            timeout_ms: args.policy_compile_timeout_ms,
            max_concurrent: args.policy_compile_concurrency,
            memory_cache_bytes: size("policy-cache-memory", args.policy_cache_memory, 0)?,
        };
        Ok(Settings {
            kube,
            retention,
            webhooks,
            compile,
            listen: args.listen,
            database: args.database,
            demo: !args.no_demo,
            snapshot_body_limit: size("snapshot-body-limit", args.snapshot_body_limit, 1 << 10)?,
            max_concurrent_snapshot_pushes: args.max_concurrent_snapshot_pushes,
            snapshot_push_max_wait_ms,
            body_limit,
            header_read_timeout: positive_duration(
                "header-read-timeout",
                &args.header_read_timeout,
            )?,
            body_idle_timeout: positive_duration("body-idle-timeout", &args.body_idle_timeout)?,
            tls,
            cors_allow_origins,
            sandbox,
            max_concurrent_evaluations: match args.max_concurrent_evaluations {
                0 => default_parallelism(),
                n => n,
            },
            log_format: args.log_format,
            admin_token: args.admin_token,
            proposal_ttl_ms: {
                let nanos = rebalancer_policy_sdk::evictor::parse_go_duration(&args.proposal_ttl)
                    .map_err(|message| ConfigError {
                    flag: "proposal-ttl",
                    message: format!("{message}: expected e.g. 1h, 30m or 90s"),
                })?;
                if nanos <= 0 {
                    return Err(ConfigError {
                        flag: "proposal-ttl",
                        message: "must be greater than 0".into(),
                    });
                }
                i64::try_from(nanos / 1_000_000).unwrap_or(i64::MAX)
            },
        })
    }
}

fn default_parallelism() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

/// A size in bytes, written as a number of bytes or with a unit: `64MiB`, `1GiB`, `512KiB`,
/// `10MB` (decimal units are accepted too).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteSize(pub u64);

impl FromStr for ByteSize {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        let (digits, unit) = s.split_at(split);
        let number: u64 = digits
            .parse()
            .map_err(|_| format!("`{s}` is not a size: expected e.g. 1048576, 64MiB or 1GiB"))?;
        let factor: u64 = match unit.trim().to_ascii_lowercase().as_str() {
            "" | "b" => 1,
            "k" | "kib" => 1 << 10,
            "m" | "mib" => 1 << 20,
            "g" | "gib" => 1 << 30,
            "kb" => 1_000,
            "mb" => 1_000_000,
            "gb" => 1_000_000_000,
            other => {
                return Err(format!(
                    "unknown size unit `{other}` in `{s}`: use B, KiB, MiB, GiB, KB, MB or GB"
                ));
            }
        };
        number
            .checked_mul(factor)
            .map(ByteSize)
            .ok_or_else(|| format!("`{s}` is too large"))
    }
}

impl std::fmt::Display for ByteSize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (unit, factor) in [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] {
            if self.0 >= factor && self.0.is_multiple_of(factor) {
                return write!(f, "{}{unit}", self.0 / factor);
            }
        }
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Settings, String> {
        let cli = Cli::try_parse_from(args).map_err(|e| e.to_string())?;
        match cli.into_command() {
            Command::Serve(serve) => Settings::try_from(serve).map_err(|e| e.to_string()),
            Command::Eval(_) => Err("not serve".into()),
            Command::NewPolicy(args) => Err(format!("not serve: {args:?}")),
        }
    }

    #[test]
    fn sizes_parse_and_print() {
        assert_eq!("1GiB".parse::<ByteSize>().unwrap(), ByteSize(1 << 30));
        assert_eq!("64 MiB".parse::<ByteSize>().unwrap(), ByteSize(64 << 20));
        assert_eq!("10MB".parse::<ByteSize>().unwrap(), ByteSize(10_000_000));
        assert_eq!("4096".parse::<ByteSize>().unwrap(), ByteSize(4096));
        assert!("lots".parse::<ByteSize>().is_err());
        assert!(
            "3 parsecs"
                .parse::<ByteSize>()
                .unwrap_err()
                .contains("unit")
        );
        assert!("99999999999GiB".parse::<ByteSize>().is_err());
        assert_eq!(ByteSize(1 << 30).to_string(), "1GiB");
        assert_eq!(ByteSize(1500).to_string(), "1500");
    }

    // Environment variables are covered by the integration test that starts the binary
    // (setting them here would race with other tests reading the environment).
    #[test]
    fn flags_defaults_and_validation() {
        let defaults = parse(&["rebalancer"]).unwrap();
        assert_eq!(
            defaults.listen,
            DEFAULT_LISTEN.parse::<SocketAddr>().unwrap()
        );
        assert_eq!(defaults.database, PathBuf::from(DEFAULT_DATABASE));
        assert!(defaults.demo);
        assert_eq!(defaults.snapshot_body_limit, 1 << 30);
        assert_eq!(defaults.body_limit, 64 << 20);
        assert_eq!(
            defaults.sandbox.timeout_ms,
            SandboxLimits::default().timeout_ms
        );
        assert!(defaults.max_concurrent_evaluations >= 1);
        assert_eq!(defaults.max_concurrent_snapshot_pushes, 1);
        assert_eq!(defaults.snapshot_push_max_wait_ms, 60_000);
        let pushes = parse(&[
            "rebalancer",
            "--max-concurrent-snapshot-pushes",
            "3",
            "--snapshot-push-max-wait",
            "0s",
        ])
        .unwrap();
        assert_eq!(
            (
                pushes.max_concurrent_snapshot_pushes,
                pushes.snapshot_push_max_wait_ms
            ),
            (3, 0)
        );
        let err = parse(&["rebalancer", "--max-concurrent-snapshot-pushes", "0"]).unwrap_err();
        assert!(err.contains("must be greater than 0"), "{err}");
        let err = parse(&["rebalancer", "--snapshot-push-max-wait=-5s"]).unwrap_err();
        assert!(err.contains("--snapshot-push-max-wait"), "{err}");
        let err = parse(&["rebalancer", "--snapshot-push-max-wait", "soon"]).unwrap_err();
        assert!(err.contains("--snapshot-push-max-wait"), "{err}");

        let serve = parse(&[
            "rebalancer",
            "serve",
            "--listen",
            "0.0.0.0:9000",
            "--database",
            "/tmp/x.db",
            "--no-demo",
            "--snapshot-body-limit",
            "2GiB",
            "--policy-timeout-ms",
            "250",
            "--policy-memory",
            "64MiB",
            "--policy-max-log-lines",
            "500",
        ])
        .unwrap();
        assert_eq!(serve.listen.port(), 9000);
        assert!(!serve.demo);
        assert_eq!(serve.snapshot_body_limit, 2 << 30);
        assert_eq!(serve.sandbox.timeout_ms, 250);
        assert_eq!(serve.sandbox.memory_bytes, 64 << 20);
        assert_eq!(serve.sandbox.max_log_lines, 500);
        assert_eq!(defaults.sandbox.max_log_lines, 10_000);

        // Flags work without the subcommand too.
        assert!(!parse(&["rebalancer", "--no-demo"]).unwrap().demo);

        let err = parse(&["rebalancer", "--policy-timeout-ms", "0"]).unwrap_err();
        assert!(
            err.contains("--policy-timeout-ms: must be greater than 0"),
            "{err}"
        );
        let err = parse(&["rebalancer", "--policy-max-module-size", "1KiB"]).unwrap_err();
        assert!(
            err.contains("smaller than the built-in policy module"),
            "{err}"
        );
        let err = parse(&["rebalancer", "--policy-memory", "12"]).unwrap_err();
        assert!(err.contains("--policy-memory"), "{err}");
        let err = parse(&[
            "rebalancer",
            "--body-limit",
            "1MiB",
            "--policy-max-module-size",
            "2MiB",
        ])
        .unwrap_err();
        assert!(err.contains("larger than --body-limit"), "{err}");
        let with_token = parse(&["rebalancer", "--admin-token", "rb_secret"]).unwrap();
        assert_eq!(
            with_token.admin_token.as_ref().map(Secret::expose),
            Some("rb_secret")
        );
        assert!(!format!("{with_token:?}").contains("rb_secret"));
        assert!(defaults.admin_token.is_none());
        let err = parse(&["rebalancer", "--admin-token", "two words"]).unwrap_err();
        assert!(err.contains("visible ASCII"), "{err}");
        let err = parse(&["rebalancer", "--listen", "nowhere"]).unwrap_err();
        assert!(err.contains("--listen"), "{err}");
    }

    #[test]
    fn compile_flags() {
        let defaults = parse(&["rebalancer", "--database", "/data/prod.db"]).unwrap();
        let compile = &defaults.compile;
        assert_eq!(
            compile.cache_dir.as_deref(),
            Some(std::path::Path::new("/data/prod-compiled"))
        );
        assert!(
            matches!(&compile.isolation, Isolation::Subprocess { program } if program.exists()),
            "{compile:?}"
        );
        assert_eq!(compile.memory_bytes, 1 << 30);
        assert_eq!(compile.timeout_ms, 60_000);
        assert_eq!(compile.max_concurrent, 1);

        let set = parse(&[
            "rebalancer",
            "--policy-compile-memory",
            "2GiB",
            "--policy-compile-timeout-ms",
            "5000",
            "--policy-compile-concurrency",
            "2",
            "--policy-cache-dir",
            "/var/cache/rb",
            "--policy-cache-memory",
            "32MiB",
        ])
        .unwrap();
        assert_eq!(set.compile.memory_bytes, 2 << 30);
        assert_eq!(set.compile.timeout_ms, 5000);
        assert_eq!(set.compile.max_concurrent, 2);
        assert_eq!(set.compile.cache_dir, Some(PathBuf::from("/var/cache/rb")));
        assert_eq!(set.compile.memory_cache_bytes, 32 << 20);

        let err = parse(&["rebalancer", "--policy-compile-memory", "64MiB"]).unwrap_err();
        assert!(
            err.contains("--policy-compile-memory: 64MiB is too small"),
            "{err}"
        );
        let err = parse(&["rebalancer", "--policy-compile-timeout-ms", "0"]).unwrap_err();
        assert!(err.contains("--policy-compile-timeout-ms"), "{err}");
        let err = parse(&["rebalancer", "--policy-compile-concurrency", "0"]).unwrap_err();
        assert!(err.contains("--policy-compile-concurrency"), "{err}");
    }

    #[test]
    fn read_timeouts() {
        let defaults = parse(&["rebalancer"]).unwrap();
        let new = Settings::new(DEFAULT_LISTEN.parse().unwrap(), DEFAULT_DATABASE.into());
        assert_eq!(
            (defaults.header_read_timeout, defaults.body_idle_timeout),
            (
                std::time::Duration::from_secs(10),
                std::time::Duration::from_secs(30)
            )
        );
        assert_eq!(
            (new.header_read_timeout, new.body_idle_timeout),
            (defaults.header_read_timeout, defaults.body_idle_timeout),
            "Settings::new has the flags' defaults"
        );
        let s = parse(&[
            "rebalancer",
            "--header-read-timeout",
            "500ms",
            "--body-idle-timeout",
            "1m",
        ])
        .unwrap();
        assert_eq!(s.header_read_timeout, std::time::Duration::from_millis(500));
        assert_eq!(s.body_idle_timeout, std::time::Duration::from_secs(60));
        let err = parse(&["rebalancer", "--header-read-timeout", "0s"]).unwrap_err();
        assert!(
            err.contains("--header-read-timeout: must be greater than 0"),
            "{err}"
        );
        let err = parse(&["rebalancer", "--body-idle-timeout", "forever"]).unwrap_err();
        assert!(err.contains("--body-idle-timeout"), "{err}");
    }

    #[test]
    fn proposal_ttl() {
        assert_eq!(parse(&["rebalancer"]).unwrap().proposal_ttl_ms, 3_600_000);
        let s = parse(&["rebalancer", "--proposal-ttl", "90s"]).unwrap();
        assert_eq!(s.proposal_ttl_ms, 90_000);
        let err = parse(&["rebalancer", "--proposal-ttl", "soon"]).unwrap_err();
        assert!(err.contains("--proposal-ttl"), "{err}");
        let err = parse(&["rebalancer", "--proposal-ttl", "0"]).unwrap_err();
        assert!(err.contains("greater than 0"), "{err}");
    }

    #[test]
    fn retention_flags() {
        let defaults = parse(&["rebalancer"]).unwrap();
        let hour = std::time::Duration::from_secs(3600);
        assert_eq!(
            defaults.retention,
            RetentionSettings {
                proposals: Some(24 * hour),
                dry_runs: Some(6 * hour),
                history: Some(90 * 24 * hour),
                runs: Some(30 * 24 * hour),
                audit: Some(365 * 24 * hour),
                interval: std::time::Duration::from_secs(600),
            }
        );
        assert_eq!(
            Settings::new(DEFAULT_LISTEN.parse().unwrap(), DEFAULT_DATABASE.into()).retention,
            defaults.retention,
            "Settings::new has the flags' defaults"
        );
        let set = parse(&[
            "rebalancer",
            "--retain-proposals",
            "2h",
            "--retain-dry-runs",
            "0",
            "--retain-history",
            "14d",
            "--retain-runs",
            "0s",
            "--retain-audit",
            "0",
            "--prune-interval",
            "1m",
        ])
        .unwrap();
        assert_eq!(
            set.retention,
            RetentionSettings {
                proposals: Some(2 * hour),
                dry_runs: None,
                history: Some(14 * 24 * hour),
                runs: None,
                audit: None,
                interval: std::time::Duration::from_secs(60),
            }
        );
        for (args, expected) in [
            (vec!["--retain-proposals", "soon"], "--retain-proposals"),
            (vec!["--retain-history=-1h"], "must not be negative"),
            (vec!["--retain-runs", "d"], "--retain-runs"),
            (vec!["--retain-audit", "12h"], "shorter than a day"),
            (vec!["--prune-interval", "0s"], "must be greater than 0"),
        ] {
            let mut argv = vec!["rebalancer"];
            argv.extend(args.iter().copied());
            let err = parse(&argv).unwrap_err();
            assert!(err.contains(expected), "{args:?}: {err}");
        }
    }

    #[test]
    fn kubernetes_clusters_and_their_flags() {
        let s = parse(&[
            "rebalancer",
            "--kube-cluster",
            "east=ctx-east",
            "--kube-cluster",
            "west",
            "--kubeconfig",
            "/etc/kc",
            "--in-cluster",
            "local",
            "--reservation-mode",
            "placeholder",
            "--koord-scheduler-names",
            "koord-scheduler,other",
            "--kube-debounce",
            "50ms",
            "--kube-max-delay",
            "5s",
            "--lease-namespace",
            "ops",
            "--identity",
            "me",
        ])
        .unwrap();
        let names: Vec<&str> = s.kube.clusters.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["east", "west", "local"]);
        assert_eq!(
            s.kube.clusters[0].source,
            rebalancer_kube::Source::Kubeconfig {
                path: Some("/etc/kc".into()),
                context: Some("ctx-east".into())
            }
        );
        assert_eq!(
            s.kube.clusters[1].source,
            rebalancer_kube::Source::Kubeconfig {
                path: Some("/etc/kc".into()),
                context: None
            }
        );
        assert_eq!(
            s.kube.clusters[2].source,
            rebalancer_kube::Source::InCluster
        );
        assert_eq!(
            s.kube.act.reservation_mode,
            rebalancer_kube::ReservationMode::Placeholder
        );
        assert_eq!(
            s.kube.act.koord_scheduler_names,
            ["koord-scheduler", "other"]
        );
        assert_eq!(s.kube.sync.debounce, std::time::Duration::from_millis(50));
        assert_eq!(s.kube.sync.max_delay, std::time::Duration::from_secs(5));
        assert_eq!(s.kube.lease.namespace, "ops");
        assert_eq!(s.kube.lease.identity, "me");
        assert_eq!(s.kube.act.instance, "me");

        for (args, expected) in [
            (
                vec!["--kube-cluster", "a", "--kube-cluster", "a"],
                "named twice",
            ),
            (vec!["--kube-cluster", "A"], "invalid cluster name"),
            (vec!["--kube-cluster", "a_b"], "may not contain '_'"),
            (
                vec!["--kube-cluster", "a="],
                "the context after '=' is empty",
            ),
            (
                vec!["--reservation-mode", "magic"],
                "unknown reservation mode",
            ),
            (
                vec!["--kube-debounce", "2s", "--kube-max-delay", "1s"],
                "shorter than",
            ),
            (vec!["--kube-debounce", "soon"], "--kube-debounce"),
        ] {
            let mut argv = vec!["rebalancer"];
            argv.extend(args.iter().copied());
            let err = parse(&argv).unwrap_err();
            assert!(err.contains(expected), "{args:?}: {err}");
        }
    }

    #[test]
    fn the_lease_namespace_is_the_flag_else_the_pods_else_refused() {
        let east = [KubeCluster {
            name: "east".into(),
            source: rebalancer_kube::Source::InCluster,
        }];
        let pod = || Some("rebalancer\n".to_owned());
        assert_eq!(lease_namespace(Some("ops"), pod(), &east).unwrap(), "ops");
        assert_eq!(lease_namespace(None, pod(), &east).unwrap(), "rebalancer");
        // No managed cluster: no Lease, nothing to refuse.
        assert_eq!(lease_namespace(None, None, &[]).unwrap(), "");
        let err = lease_namespace(None, None, &east).unwrap_err().to_string();
        assert!(
            err.starts_with("--lease-namespace: is needed with managed clusters outside a pod"),
            "{err}"
        );
        assert!(err.contains("REBALANCER_LEASE_NAMESPACE"), "{err}");
        for bad in ["", "Ops", "a.b", "a_b"] {
            let err = lease_namespace(Some(bad), pod(), &east)
                .unwrap_err()
                .to_string();
            assert!(err.starts_with("--lease-namespace: "), "{bad:?}: {err}");
        }
    }

    #[test]
    fn tls_files_come_in_pairs() {
        assert_eq!(parse(&["rebalancer"]).unwrap().tls, None);
        let s = parse(&[
            "rebalancer",
            "--tls-cert",
            "/etc/tls/crt.pem",
            "--tls-key",
            "/etc/tls/key.pem",
        ])
        .unwrap();
        assert_eq!(
            s.tls,
            Some(TlsFiles {
                cert: "/etc/tls/crt.pem".into(),
                key: "/etc/tls/key.pem".into()
            })
        );
        let err = parse(&["rebalancer", "--tls-cert", "/etc/tls/crt.pem"]).unwrap_err();
        assert!(
            err.starts_with("--tls-key: is needed with --tls-cert"),
            "{err}"
        );
        let err = parse(&["rebalancer", "--tls-key", "/etc/tls/key.pem"]).unwrap_err();
        assert!(
            err.starts_with("--tls-cert: is needed with --tls-key"),
            "{err}"
        );
    }

    #[test]
    fn cors_origins_are_checked_and_written_as_browsers_send_them() {
        assert!(
            parse(&["rebalancer"])
                .unwrap()
                .cors_allow_origins
                .is_empty()
        );
        let s = parse(&[
            "rebalancer",
            "--cors-allow-origin",
            "https://Portal.Example.com",
            "--cors-allow-origin",
            "http://localhost:3000,https://portal.example.com:443",
            "--cors-allow-origin",
            "http://[::1]:8081",
        ])
        .unwrap();
        assert_eq!(
            s.cors_allow_origins,
            [
                "https://portal.example.com",
                "http://localhost:3000",
                "http://[::1]:8081"
            ]
        );
        for (origin, expected) in [
            ("http://a.example:80", Ok("http://a.example")),
            ("https://a.example:8443", Ok("https://a.example:8443")),
            ("http://[::1]", Ok("http://[::1]")),
            ("*", Err("`*` is not accepted")),
            ("portal.example.com", Err("has no scheme")),
            ("ftp://portal.example.com", Err("must be http or https")),
            ("https://portal.example.com/", Err("has a path")),
            ("https://portal.example.com/ui?x", Err("has a path")),
            ("https://user@portal.example.com", Err("without user")),
            (
                "https://portal.example.com:http",
                Err("is not a port number"),
            ),
            ("https://portal.example.com:0", Err("is not a port number")),
            ("https://", Err("has no host")),
            ("https://bücher.example", Err("xn-- form")),
            ("", Err("is empty")),
        ] {
            match (parse_origin(origin), expected) {
                (Ok(got), Ok(want)) => assert_eq!(got, want, "{origin}"),
                (Err(got), Err(want)) => assert!(got.contains(want), "{origin}: {got}"),
                (got, want) => panic!("{origin}: {got:?}, expected {want:?}"),
            }
        }
        let err = parse(&["rebalancer", "--cors-allow-origin", "https://a.example/"]).unwrap_err();
        assert!(err.starts_with("--cors-allow-origin: "), "{err}");
    }
}
