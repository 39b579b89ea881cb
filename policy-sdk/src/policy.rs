//! The policy author's API: the [`Policy`] trait, the [`Context`] a policy runs in, and the
//! [`Host`] trait that connects a context to whoever runs it (the wasm host through the WIT
//! imports, the server natively, or [`crate::testing`]).
//!
//! The same policy code runs in all three: that is what makes native unit tests and the
//! native-vs-wasm benchmark honest.

use serde::{Deserialize, Serialize};

use crate::view::Cluster;

/// Extension points, as in descheduler.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExtensionPoint {
    Deschedule,
    Balance,
}

impl ExtensionPoint {
    pub fn as_str(self) -> &'static str {
        match self {
            ExtensionPoint::Deschedule => "deschedule",
            ExtensionPoint::Balance => "balance",
        }
    }
}

/// What a policy says about itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyInfo {
    pub name: String,
    pub version: String,
    pub description: String,
    pub extension_points: Vec<ExtensionPoint>,
    /// JSON Schema of the args object.
    pub args_schema: serde_json::Value,
    /// The args with every default applied.
    pub default_args: serde_json::Value,
}

/// One problem with a policy's args.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArgError {
    /// Dotted path of the offending field (`thresholds.cpu`), or "" for the whole object.
    pub field: String,
    pub message: String,
}

impl ArgError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        ArgError {
            field: field.into(),
            message: message.into(),
        }
    }
}

impl std::fmt::Display for ArgError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.field.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.field, self.message)
        }
    }
}

/// Why the host refused a proposal (mirrors the WIT `refusal`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "message", rename_all = "kebab-case")]
pub enum Refusal {
    NodeLimit,
    NamespaceLimit,
    TotalLimit,
    DisruptionBudget(String),
    NotEvictable(String),
    UnknownPod,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::NodeLimit => f.write_str("maximum number of evicted pods per node reached"),
            Refusal::NamespaceLimit => {
                f.write_str("maximum number of evicted pods per namespace reached")
            }
            Refusal::TotalLimit => {
                f.write_str("maximum number of evicted pods per a descheduling cycle reached")
            }
            Refusal::DisruptionBudget(m) => write!(f, "disruption budget: {m}"),
            Refusal::NotEvictable(m) => write!(f, "not evictable: {m}"),
            Refusal::UnknownPod => f.write_str("unknown pod"),
        }
    }
}

/// What became of a batch of proposals ([`Context::propose_evictions`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BatchOutcome {
    /// How many pods, from the start of the batch, were admitted.
    pub admitted: usize,
    /// Why the pod at index `admitted` was refused; the pods after it were not proposed. `None`
    /// when the whole batch was admitted.
    pub refusal: Option<Refusal>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

/// What a policy needs from whoever runs it. Implemented by the wasm glue (WIT imports), by the
/// server for native runs and by [`crate::testing`].
pub trait Host {
    /// The nodes in scope: Ready and matching the profile's nodeSelector.
    fn nodes(&mut self) -> Vec<u32>;
    fn filter(&mut self, pods: &[u32]) -> Vec<u32>;
    fn pre_eviction_filter(&mut self, pods: &[u32]) -> Vec<u32>;
    fn propose_eviction(&mut self, pod: u32, reason: &str) -> Result<(), Refusal>;
    /// `propose_eviction` for each pod in order, stopping at the first refusal. Hosts across a
    /// call boundary override it to make one call for the batch.
    fn propose_evictions(&mut self, pods: &[u32], reason: &str) -> BatchOutcome {
        for (admitted, &pod) in pods.iter().enumerate() {
            if let Err(refusal) = self.propose_eviction(pod, reason) {
                return BatchOutcome {
                    admitted,
                    refusal: Some(refusal),
                };
            }
        }
        BatchOutcome {
            admitted: pods.len(),
            refusal: None,
        }
    }
    fn node_fit(&mut self, pod: u32, candidates: &[u32]) -> Vec<u32>;
    fn object_json(&mut self, kind: &str, index: u32) -> Option<String>;
    fn log(&mut self, level: LogLevel, message: &str);
    /// The policy's state ([`crate::state`]): the value of `key`.
    fn state_get(&mut self, key: &str) -> Option<Vec<u8>>;
    /// Set `key`; refused when the scope would exceed its size cap.
    fn state_put(&mut self, key: &str, value: &[u8]) -> Result<(), String>;
    /// Remove `key`; whether it was there.
    fn state_remove(&mut self, key: &str) -> bool;
    /// Every key, in order.
    fn state_keys(&mut self) -> Vec<String>;
}

/// Where a plugin goes on after a proposal, as descheduler reacts to the error `Evict` returns
/// ([`Details::refused`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Accepted, or refused for a reason that concerns only this pod: go on with the next pod.
    Pod,
    /// The per-node limit is reached: go on with the next node.
    Node,
    /// The total limit is reached: the pass ends.
    Stop,
}

/// Detail lines a [`Details`] writes before it only counts them.
pub const MAX_DETAIL_LINES: usize = 50;

/// Bounded debug logging of per-pod or per-owner details ("eviction of shop/web-1 refused: …").
/// The host ends an evaluation that logs more than its byte cap, so detail must stay bounded on
/// any cluster size: the first [`MAX_DETAIL_LINES`] lines are written, the rest counted, and
/// [`Details::finish`] says how many were left out. The message is only built when written.
#[derive(Debug, Default)]
pub struct Details {
    written: usize,
    suppressed: usize,
}

impl Details {
    pub fn log(&mut self, ctx: &mut Context<'_>, message: impl FnOnce() -> String) {
        if self.written < MAX_DETAIL_LINES {
            self.written += 1;
            ctx.debug(&message());
        } else {
            self.suppressed += 1;
        }
    }

    /// descheduler's reaction to a refused eviction of `pod`: the node limit moves on to the
    /// next node, the total limit ends the pass, and any other refusal (PDB, not evictable,
    /// namespace limit) concerns only this pod: it is logged as a detail and the next pod is
    /// tried.
    pub fn refused(&mut self, ctx: &mut Context<'_>, pod: u32, refusal: &Refusal) -> Next {
        match refusal {
            Refusal::NodeLimit => Next::Node,
            Refusal::TotalLimit => Next::Stop,
            other => {
                let p = ctx.cluster.pod(pod);
                self.log(ctx, || {
                    format!(
                        "eviction of {}/{} refused: {other}",
                        p.namespace(),
                        p.name()
                    )
                });
                Next::Pod
            }
        }
    }

    /// Log how many lines were left out, if any.
    pub fn finish(self, ctx: &mut Context<'_>) {
        if self.suppressed > 0 {
            ctx.debug(&format!("{} more detail lines not logged", self.suppressed));
        }
    }
}

/// Everything a policy evaluation can see and do.
pub struct Context<'a> {
    pub cluster: Cluster<'a>,
    host: &'a mut dyn Host,
}

impl std::fmt::Debug for Context<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("cluster", &self.cluster)
            .finish()
    }
}

impl<'a> Context<'a> {
    pub fn new(cluster: Cluster<'a>, host: &'a mut dyn Host) -> Self {
        Context { cluster, host }
    }

    /// The snapshot time, ms since the Unix epoch.
    pub fn now_ms(&self) -> i64 {
        self.cluster.time_ms()
    }

    /// The nodes this evaluation covers (Ready, matching the profile's nodeSelector), ascending.
    pub fn nodes(&mut self) -> Vec<u32> {
        self.host.nodes()
    }

    /// The pods of `pods` that pass the evictor's Filter.
    pub fn filter(&mut self, pods: &[u32]) -> Vec<u32> {
        self.host.filter(pods)
    }

    /// Whether one pod passes the evictor's Filter.
    pub fn is_evictable(&mut self, pod: u32) -> bool {
        !self.host.filter(&[pod]).is_empty()
    }

    pub fn pre_eviction_filter(&mut self, pods: &[u32]) -> Vec<u32> {
        self.host.pre_eviction_filter(pods)
    }

    /// The pods of `pods` that pass Filter and then PreEvictionFilter (PreEvictionFilter is not
    /// asked when none passes Filter). Both are pure predicates over the pod, so applying them
    /// after a plugin's own cheap checks selects the same pods as descheduler's combined filter.
    pub fn filter_for_eviction(&mut self, pods: &[u32]) -> Vec<u32> {
        let passed = self.filter(pods);
        if passed.is_empty() {
            return passed;
        }
        self.pre_eviction_filter(&passed)
    }

    pub fn passes_pre_eviction_filter(&mut self, pod: u32) -> bool {
        !self.host.pre_eviction_filter(&[pod]).is_empty()
    }

    /// Propose evicting `pod`. `reason` is shown to the person who approves the move and
    /// stored with the decision: say why in words. Reasons over
    /// [`MAX_REASON_BYTES`](crate::caps::MAX_REASON_BYTES) (1 KiB) are truncated — cut on a
    /// character boundary and marked ` … [truncated, N bytes in all]` — wherever they are kept.
    pub fn propose_eviction(&mut self, pod: u32, reason: &str) -> Result<(), Refusal> {
        self.host.propose_eviction(pod, reason)
    }

    /// Propose evicting `pods` in order, all for `reason`: the same as calling
    /// [`Context::propose_eviction`] for each, stopping at the first refusal, but one host call
    /// for the batch (a host call costs about a microsecond in wasm; a large cluster's plugin makes
    /// tens of thousands of proposals). The pods after a refused one are not proposed: handle the
    /// refusal as you would a single one, then propose the rest of the batch again if you still
    /// want them. `reason` is truncated as [`Context::propose_eviction`]'s is.
    pub fn propose_evictions(&mut self, pods: &[u32], reason: &str) -> BatchOutcome {
        if pods.is_empty() {
            return BatchOutcome::default();
        }
        self.host.propose_evictions(pods, reason)
    }

    pub fn node_fit(&mut self, pod: u32, candidates: &[u32]) -> Vec<u32> {
        self.host.node_fit(pod, candidates)
    }

    pub fn object_json(&mut self, kind: &str, index: u32) -> Option<String> {
        self.host.object_json(kind, index)
    }

    /// Write a line to the run's report. The host caps the log bytes and lines of an evaluation
    /// (1 MiB and 10,000 by default); past either, the evaluation ends with `log-cap`.
    pub fn log(&mut self, level: LogLevel, message: &str) {
        self.host.log(level, message)
    }

    pub fn info(&mut self, message: &str) {
        self.host.log(LogLevel::Info, message)
    }

    pub fn debug(&mut self, message: &str) {
        self.host.log(LogLevel::Debug, message)
    }

    /// The value of `key` in this policy's state: bytes it put in an earlier run of the same
    /// profile, plugin set and cluster (or earlier in this evaluation). What an evaluation puts
    /// is kept only if it succeeds.
    pub fn state_get(&mut self, key: &str) -> Option<Vec<u8>> {
        self.host.state_get(key)
    }

    /// Set `key` in this policy's state. Refused when the key is longer than
    /// [`MAX_KEY_BYTES`](crate::state::MAX_KEY_BYTES) (1 KiB) or the scope (keys plus values)
    /// would exceed the server's cap (`--policy-state-max-size`, 1 MiB by default).
    pub fn state_put(&mut self, key: &str, value: &[u8]) -> Result<(), String> {
        self.host.state_put(key, value)
    }

    /// Remove `key` from this policy's state; whether it was there.
    pub fn state_remove(&mut self, key: &str) -> bool {
        self.host.state_remove(key)
    }

    /// Every key of this policy's state, in order.
    pub fn state_keys(&mut self) -> Vec<String> {
        self.host.state_keys()
    }

    /// [`Context::state_get`] of a JSON value; `None` when absent or not a `T`.
    pub fn state_get_json<T: serde::de::DeserializeOwned>(&mut self, key: &str) -> Option<T> {
        self.state_get(key)
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
    }

    /// [`Context::state_put`] of a value as JSON.
    pub fn state_put_json<T: Serialize>(&mut self, key: &str, value: &T) -> Result<(), String> {
        let bytes = serde_json::to_vec(value).map_err(|e| e.to_string())?;
        self.state_put(key, &bytes)
    }
}

/// A descheduling policy. Implement it on a unit struct and export it with
/// [`crate::export_policy!`].
pub trait Policy {
    /// The plugin's args; unknown fields should be rejected (`#[serde(deny_unknown_fields)]`).
    type Args: serde::de::DeserializeOwned + Serialize + Default;

    fn info() -> PolicyInfo;

    /// Checks beyond what deserializing `Args` already checks.
    fn validate(args: &Self::Args) -> Vec<ArgError> {
        let _ = args;
        Vec::new()
    }

    fn deschedule(ctx: &mut Context<'_>, args: &Self::Args) -> Result<(), String> {
        let _ = (ctx, args);
        Err(format!(
            "{} does not implement the deschedule extension point",
            Self::info().name
        ))
    }

    fn balance(ctx: &mut Context<'_>, args: &Self::Args) -> Result<(), String> {
        let _ = (ctx, args);
        Err(format!(
            "{} does not implement the balance extension point",
            Self::info().name
        ))
    }
}

/// Parse args JSON (empty string or `null` means "all defaults") and validate them.
pub fn parse_args<P: Policy>(args: &str) -> Result<P::Args, Vec<ArgError>> {
    let trimmed = args.trim();
    let parsed: P::Args = if trimmed.is_empty() || trimmed == "null" {
        P::Args::default()
    } else {
        let mut de = serde_json::Deserializer::from_str(trimmed);
        let parsed = serde_path_to_error::deserialize(&mut de)
            .map_err(|e| vec![serde_arg_error(&e.path().to_string(), e.inner())])?;
        de.end().map_err(|e| vec![serde_arg_error("", &e)])?;
        parsed
    };
    let errors = P::validate(&parsed);
    if errors.is_empty() {
        Ok(parsed)
    } else {
        Err(errors)
    }
}

/// An args error at the field it is about (`thresholds.cpu`, `namespaces.include[2]`; empty for
/// the args as a whole), so the host can place it in the document that was sent. serde's message
/// is kept ("invalid type: string \"x\", expected u32", "unknown field `foo`, expected one of …")
/// without its "at line 1 column 27": a position in the compact args text the host serialised,
/// which the person who wrote the document never saw.
fn serde_arg_error(path: &str, e: &serde_json::Error) -> ArgError {
    let message = e.to_string();
    let message = match message.rfind(" at line ") {
        Some(at) => message[..at].to_string(),
        None => message,
    };
    // serde_path_to_error writes the empty path as ".".
    let path = if path == "." { "" } else { path };
    ArgError::new(path, message)
}

/// Run one extension point of `P` against a context: parse + validate args, then dispatch.
pub fn evaluate<P: Policy>(
    ctx: &mut Context<'_>,
    point: ExtensionPoint,
    args: &str,
) -> Result<(), String> {
    let args = parse_args::<P>(args).map_err(|errors| {
        let list: Vec<String> = errors.iter().map(ToString::to_string).collect();
        format!("invalid args: {}", list.join("; "))
    })?;
    match point {
        ExtensionPoint::Deschedule => P::deschedule(ctx, &args),
        ExtensionPoint::Balance => P::balance(ctx, &args),
    }
}
