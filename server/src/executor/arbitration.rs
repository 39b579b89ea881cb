//! Arbitration: which approved pod migrations may start now (Koordinator's arbitrator,
//! `koordinator.md` §2), as pure functions over plain data.
//!
//! Owns: the knobs ([`ArbitrationConfig`], Koordinator's `MigrationControllerArgs` names and
//! defaults; [`ArbitrationConfigs`]: the global ones and those of clusters that have their own),
//! the dynamic per-workload limits (§2.5), the eviction-cost annotation (§2.7), the sort (§2.2),
//! the non-retryable and retryable filters (§2.3) and the token buckets of the object limiters
//! and eviction QPS (§2.6).
//! Must not: read the database or a backend; the executor gathers [`PodFacts`], the active
//! migrations and the workloads, and applies the [`Verdict`]s.
//!
//! Clusters are kept apart: Koordinator runs one descheduler per cluster, this server arbitrates
//! many. Every count (globally, per node, per namespace, per workload, the Jobs in flight), every
//! token bucket and the knobs themselves are per cluster, so two clusters that share node,
//! namespace or controller names (or uids) never hold each other's pod migrations back.
//!
//! Differences from Koordinator, on purpose:
//! - a candidate whose pod cannot be found is never admitted (Koordinator bug #3039): the
//!   executor fails it as stale before it gets here;
//! - the object limiters are checked at admission (and a token is taken at eviction), so a
//!   migration waiting for a token says so instead of requeueing silently.

use std::cmp::Ordering;
use std::collections::{BTreeSet, HashMap};
use std::fmt;

use serde::{Deserialize, Serialize};

/// `scheduling.koordinator.sh/eviction-cost`.
pub const EVICTION_COST_ANNOTATION: &str = "scheduling.koordinator.sh/eviction-cost";
/// `controller.kubernetes.io/pod-deletion-cost`.
pub const DELETION_COST_ANNOTATION: &str = "controller.kubernetes.io/pod-deletion-cost";
/// The upstream descheduler escape hatch: bypasses the filters and the limits.
pub const EVICT_ANNOTATION: &str = "descheduler.alpha.kubernetes.io/evict";
/// Koordinator's priority-class label.
pub const KOORD_PRIORITY_LABEL: &str = "koordinator.sh/priority-class";
/// Koordinator's QoS label.
pub const KOORD_QOS_LABEL: &str = "koordinator.sh/qosClass";

// =============================================================================================
// Knobs
// =============================================================================================

/// How a pod migration moves its pod.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema,
)]
pub enum MigrationMode {
    /// Reserve room on another node, evict, confirm the replacement landed in the reservation.
    #[default]
    ReservationFirst,
    /// Evict and consider the job done once the pod is gone.
    EvictDirectly,
}

impl MigrationMode {
    pub fn as_str(self) -> &'static str {
        match self {
            MigrationMode::ReservationFirst => "ReservationFirst",
            MigrationMode::EvictDirectly => "EvictDirectly",
        }
    }

    pub fn parse(s: &str) -> Option<MigrationMode> {
        match s {
            "ReservationFirst" => Some(MigrationMode::ReservationFirst),
            "EvictDirectly" => Some(MigrationMode::EvictDirectly),
            _ => None,
        }
    }
}

/// An absolute count or a percentage of the workload's replicas (`3` or `"10%"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntOrPercent {
    Int(u32),
    Percent(u32),
}

impl Serialize for IntOrPercent {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            IntOrPercent::Int(n) => s.serialize_u32(*n),
            IntOrPercent::Percent(p) => s.serialize_str(&format!("{p}%")),
        }
    }
}

impl<'de> Deserialize<'de> for IntOrPercent {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Int(u32),
            Str(String),
        }
        match Raw::deserialize(d)? {
            Raw::Int(n) => Ok(IntOrPercent::Int(n)),
            Raw::Str(s) => {
                let digits = s.strip_suffix('%').ok_or_else(|| {
                    serde::de::Error::custom(format!(
                        "{s:?} is neither a non-negative integer nor a percentage like \"10%\""
                    ))
                })?;
                // Digits only (no sign, no blank), as the document's pattern says.
                digits
                    .bytes()
                    .all(|b| b.is_ascii_digit())
                    .then(|| digits.parse::<u32>().ok())
                    .flatten()
                    .map(IntOrPercent::Percent)
                    .ok_or_else(|| {
                        serde::de::Error::custom(format!("{s:?} is not a percentage like \"10%\""))
                    })
            }
        }
    }
}

/// The OpenAPI schema of an optional [`IntOrPercent`] whose percentage matches `percent` (a
/// pattern): a count (a JSON integer that fits a `u32`), a percentage string, or null.
fn int_or_percent_schema(
    percent: &str,
    minimum: u32,
    description: &str,
) -> utoipa::openapi::Schema {
    use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Type};
    OneOfBuilder::new()
        .description(Some(description))
        .item(count_schema(minimum))
        .item(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .pattern(Some(percent)),
        )
        .item(ObjectBuilder::new().schema_type(Type::Null))
        .build()
        .into()
}

/// A count from `minimum` to `u32::MAX`.
fn count_schema(minimum: u32) -> utoipa::openapi::schema::ObjectBuilder {
    use utoipa::openapi::schema::{ObjectBuilder, Type};
    ObjectBuilder::new()
        .schema_type(Type::Integer)
        .format(Some(utoipa::openapi::SchemaFormat::KnownFormat(
            utoipa::openapi::KnownFormat::Int64,
        )))
        .minimum(Some(minimum))
        .maximum(Some(u32::MAX))
}

/// Per-workload limits: a count, or a percentage of the workload's replicas up to 100%.
fn workload_limit_schema() -> utoipa::openapi::Schema {
    int_or_percent_schema(
        PERCENT_UP_TO_100,
        0,
        "A count, or a percentage of the workload's replicas from \"0%\" to \"100%\"; null \
         for the dynamic rule (1 below 4 replicas, 2 for 4–10, 10% above 10).",
    )
}

/// A limiter's tokens per duration: a positive count or any percentage of the workload's
/// replicas (`validate` refuses a count of 0: null turns the limiter off).
fn limiter_tokens_schema() -> utoipa::openapi::Schema {
    int_or_percent_schema(
        "^[0-9]+%$",
        1,
        "Tokens per `duration`: a positive count, or (workload limiter only) a percentage of \
         the workload's replicas. For the workload limiter, null means \"computed from \
         maxMigratingPerWorkload against the workload's replicas\"; the namespace limiter \
         needs a count.",
    )
}

/// `objectLimiters.namespace`: a [`LimiterConfig`] whose `maxMigrating` is a required positive
/// count (a namespace has no replicas to take a percentage of), or null (off). Written out
/// whole rather than as an `allOf` of `LimiterConfig`, which client generators cannot take
/// inside a union.
fn namespace_limiter_schema() -> utoipa::openapi::Schema {
    use utoipa::PartialSchema as _;
    use utoipa::openapi::RefOr;
    use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Schema, Type};
    let RefOr::T(Schema::Object(mut limiter)) = LimiterConfig::schema() else {
        unreachable!("LimiterConfig derives an object schema");
    };
    limiter.required.push("maxMigrating".into());
    limiter
        .properties
        .insert("maxMigrating".into(), count_schema(1).into());
    limiter.description = Some("Per namespace, with a positive count as `maxMigrating`.".into());
    OneOfBuilder::new()
        .description(Some("Per namespace. Off (null) by default."))
        .item(limiter)
        .item(ObjectBuilder::new().schema_type(Type::Null))
        .build()
        .into()
}

/// A percentage from 0% to 100% (leading zeros allowed, as the parser allows them).
const PERCENT_UP_TO_100: &str = "^0*(100|[1-9]?[0-9])%$";

impl fmt::Display for IntOrPercent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IntOrPercent::Int(n) => write!(f, "{n}"),
            IntOrPercent::Percent(p) => write!(f, "{p}%"),
        }
    }
}

/// One object limiter: a token bucket per key refilled with `maxMigrating` tokens per
/// `duration`, holding at most `burst` (0 means 1).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LimiterConfig {
    /// Go duration greater than 0, e.g. `5m`. The pattern is the Go duration grammar
    /// `parse_go_duration` reads, without a sign (a negative duration is refused).
    #[schema(
        example = "5m",
        pattern = "^(0|(([0-9]+(\\.[0-9]*)?|\\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$"
    )]
    pub duration: String,
    /// Tokens per `duration`. For the workload limiter, unset means "computed from
    /// maxMigratingPerWorkload against the workload's replicas"; a percentage is allowed there.
    /// The namespace limiter needs an integer.
    #[serde(default)]
    #[schema(schema_with = limiter_tokens_schema)]
    pub max_migrating: Option<IntOrPercent>,
    /// Most tokens the bucket holds; 0 means 1.
    #[serde(default)]
    #[schema(format = Int64, maximum = 4294967295_u32)]
    pub burst: u32,
}

/// Koordinator's `objectLimiters`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ObjectLimitersConfig {
    /// Per workload (controller uid). Default `{duration: 5m}`; null turns it off.
    #[serde(default, deserialize_with = "crate::strict_json::optional_object")]
    pub workload: Option<LimiterConfig>,
    /// Per namespace, with a positive count as `maxMigrating`. Off by default.
    #[serde(default, deserialize_with = "crate::strict_json::optional_object")]
    #[schema(schema_with = namespace_limiter_schema)]
    pub namespace: Option<LimiterConfig>,
}

impl Default for ObjectLimitersConfig {
    fn default() -> Self {
        ObjectLimitersConfig {
            workload: Some(LimiterConfig {
                duration: "5m".into(),
                max_migrating: None,
                burst: 0,
            }),
            namespace: None,
        }
    }
}

fn default_per_node() -> u32 {
    2
}
fn default_qps() -> f64 {
    10.0
}
fn default_burst() -> u32 {
    1
}
fn default_ttl() -> String {
    "5m".into()
}

/// The arbitration and pod-migration knobs, with Koordinator's `MigrationControllerArgs` names
/// and defaults. Limits set to 0 (or null) are off.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ArbitrationConfig {
    /// Cluster-wide cap on running pod migrations. Off by default.
    #[serde(default)]
    #[schema(format = Int64, maximum = 4294967295_u32)]
    pub max_migrating_globally: Option<u32>,
    /// Running pod migrations per source node. Default 2; 0 means unlimited.
    #[serde(default = "default_per_node")]
    #[schema(format = Int64, maximum = 4294967295_u32)]
    pub max_migrating_per_node: u32,
    /// Running pod migrations per namespace. Off by default.
    #[serde(default)]
    #[schema(format = Int64, maximum = 4294967295_u32)]
    pub max_migrating_per_namespace: Option<u32>,
    /// Running pod migrations per workload: an integer or a percentage of its replicas. Unset:
    /// 1 below 4 replicas, 2 for 4–10, 10% above 10.
    #[serde(default)]
    #[schema(schema_with = workload_limit_schema)]
    pub max_migrating_per_workload: Option<IntOrPercent>,
    /// Unavailable (not Ready, or migrating) pods allowed per workload; same dynamic rule.
    #[serde(default)]
    #[schema(schema_with = workload_limit_schema)]
    pub max_unavailable_per_workload: Option<IntOrPercent>,
    /// Do not refuse pods of workloads whose replicas equal 1, maxMigrating or maxUnavailable.
    #[serde(default)]
    pub skip_check_expected_replicas: bool,
    #[serde(default, deserialize_with = "crate::strict_json::object")]
    pub object_limiters: ObjectLimitersConfig,
    /// Evictions per second over all pod migrations (token bucket), above 0. Default 10.
    #[serde(default = "default_qps", rename = "evictQPS")]
    #[schema(exclusive_minimum = 0)]
    pub evict_qps: f64,
    /// At least 1. Default 1.
    #[serde(default = "default_burst")]
    #[schema(format = Int64, minimum = 1, maximum = 4294967295_u32)]
    pub evict_burst: u32,
    /// Mode of new pod migrations. Default ReservationFirst.
    #[serde(default)]
    pub default_job_mode: MigrationMode,
    /// TTL of new pod migrations (Go duration), counted from admission. Default 5m; "0" turns it
    /// off.
    #[serde(default = "default_ttl", rename = "defaultJobTTL")]
    #[schema(
        example = "5m",
        pattern = "^(0|(([0-9]+(\\.[0-9]*)?|\\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$"
    )]
    pub default_job_ttl: String,
}

impl Default for ArbitrationConfig {
    fn default() -> Self {
        ArbitrationConfig {
            max_migrating_globally: None,
            max_migrating_per_node: default_per_node(),
            max_migrating_per_namespace: None,
            max_migrating_per_workload: None,
            max_unavailable_per_workload: None,
            skip_check_expected_replicas: false,
            object_limiters: ObjectLimitersConfig::default(),
            evict_qps: default_qps(),
            evict_burst: default_burst(),
            default_job_mode: MigrationMode::ReservationFirst,
            default_job_ttl: default_ttl(),
        }
    }
}

/// The knobs of every cluster: the global ones (`GET /api/v1/arbitration`) and those of the
/// clusters that have their own (`/api/v1/clusters/{name}/arbitration`), each a whole document.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ArbitrationConfigs {
    pub global: ArbitrationConfig,
    pub clusters: HashMap<String, ArbitrationConfig>,
}

impl ArbitrationConfigs {
    /// The knobs in force for `cluster`.
    pub fn for_cluster(&self, cluster: &str) -> &ArbitrationConfig {
        self.clusters.get(cluster).unwrap_or(&self.global)
    }
}

/// A knob with a value that cannot work.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct KnobError {
    pub field: String,
    pub message: String,
}

fn duration_ms(s: &str) -> Result<i64, String> {
    let nanos = rebalancer_policy_sdk::evictor::parse_go_duration(s)?;
    // `-0s` is 0 but written as a negative duration: refused like any other.
    if nanos < 0 || s.starts_with('-') {
        return Err(format!("{s:?} is negative"));
    }
    Ok(i64::try_from(nanos / 1_000_000).unwrap_or(i64::MAX))
}

impl ArbitrationConfig {
    /// Every problem, or nothing.
    pub fn validate(&self) -> Vec<KnobError> {
        let mut errors = Vec::new();
        let mut err = |field: &str, message: String| {
            errors.push(KnobError {
                field: field.to_string(),
                message,
            })
        };
        if !(self.evict_qps.is_finite() && self.evict_qps > 0.0) {
            err(
                "evictQPS",
                format!("must be greater than 0, got {}", self.evict_qps),
            );
        }
        if self.evict_burst == 0 {
            err("evictBurst", "must be greater than 0".into());
        }
        if let Err(e) = duration_ms(&self.default_job_ttl) {
            err("defaultJobTTL", e);
        }
        for (field, value) in [
            ("maxMigratingPerWorkload", self.max_migrating_per_workload),
            (
                "maxUnavailablePerWorkload",
                self.max_unavailable_per_workload,
            ),
        ] {
            if let Some(IntOrPercent::Percent(p)) = value
                && p > 100
            {
                err(field, format!("{p}% is more than 100%"));
            }
        }
        for (field, limiter) in [
            ("objectLimiters.workload", &self.object_limiters.workload),
            ("objectLimiters.namespace", &self.object_limiters.namespace),
        ] {
            let Some(limiter) = limiter else { continue };
            match duration_ms(&limiter.duration) {
                Ok(0) => err(
                    &format!("{field}.duration"),
                    "must be greater than 0".into(),
                ),
                Ok(_) => {}
                Err(e) => err(&format!("{field}.duration"), e),
            }
            if field.ends_with("namespace") {
                match limiter.max_migrating {
                    Some(IntOrPercent::Int(n)) if n > 0 => {}
                    _ => err(
                        &format!("{field}.maxMigrating"),
                        "the namespace limiter needs a positive integer".into(),
                    ),
                }
            } else if let Some(IntOrPercent::Int(0)) = limiter.max_migrating {
                err(
                    &format!("{field}.maxMigrating"),
                    "must be greater than 0 (set the limiter to null to turn it off)".into(),
                );
            }
        }
        errors
    }

    /// TTL of new pod migrations in ms (0: none). Call on a validated config.
    pub fn ttl_ms(&self) -> i64 {
        duration_ms(&self.default_job_ttl).unwrap_or(5 * 60 * 1000)
    }
}

// =============================================================================================
// Dynamic limits (§2.5) and annotations (§2.7)
// =============================================================================================

/// maxMigrating / maxUnavailable for a workload with `replicas` desired pods.
pub fn workload_limit(value: Option<IntOrPercent>, replicas: u32) -> u32 {
    let limit = match value {
        Some(IntOrPercent::Int(n)) => n.max(1),
        Some(IntOrPercent::Percent(p)) => {
            ((u64::from(replicas) * u64::from(p) / 100) as u32).max(1)
        }
        None if replicas > 10 => (replicas / 10).max(1),
        None if replicas >= 4 => 2,
        None => 1,
    };
    limit.min(replicas)
}

/// An int32 cost annotation the way Koordinator reads it: a decimal without `+` or leading
/// zeros; anything else (or missing) is 0. Negative values are allowed.
pub fn parse_cost(value: Option<&str>) -> i32 {
    let Some(s) = value else { return 0 };
    let digits = s.strip_prefix('-').unwrap_or(s);
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'))
        && !(s.starts_with('-') && digits == "0");
    if !canonical {
        return 0;
    }
    s.parse::<i32>().unwrap_or(0)
}

// =============================================================================================
// Inputs
// =============================================================================================

/// Koordinator priority class: koord-free < koord-batch < koord-mid < koord-prod < none.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum KoordPriority {
    Free,
    Batch,
    Mid,
    Prod,
    None,
}

impl KoordPriority {
    /// From the `koordinator.sh/priority-class` label, else from the priority value's band
    /// (prod 9000–9999, mid 7000–7999, batch 5000–5999, free 3000–3999).
    pub fn of(label: Option<&str>, priority: Option<i32>) -> KoordPriority {
        match label {
            Some("koord-free") => return KoordPriority::Free,
            Some("koord-batch") => return KoordPriority::Batch,
            Some("koord-mid") => return KoordPriority::Mid,
            Some("koord-prod") => return KoordPriority::Prod,
            _ => {}
        }
        match priority {
            Some(9000..=9999) => KoordPriority::Prod,
            Some(7000..=7999) => KoordPriority::Mid,
            Some(5000..=5999) => KoordPriority::Batch,
            Some(3000..=3999) => KoordPriority::Free,
            _ => KoordPriority::None,
        }
    }
}

/// Kubernetes QoS, cheapest to evict first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum KubeQos {
    BestEffort,
    Burstable,
    Guaranteed,
}

/// Koordinator QoS: BE < LS < LSR < LSE = SYSTEM < none.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum KoordQos {
    Be,
    Ls,
    Lsr,
    LseOrSystem,
    None,
}

impl KoordQos {
    pub fn of(label: Option<&str>) -> KoordQos {
        match label {
            Some("BE") => KoordQos::Be,
            Some("LS") => KoordQos::Ls,
            Some("LSR") => KoordQos::Lsr,
            Some("LSE") | Some("SYSTEM") => KoordQos::LseOrSystem,
            _ => KoordQos::None,
        }
    }
}

/// What arbitration needs to know about a pod.
#[derive(Clone, Debug, PartialEq)]
pub struct PodFacts {
    /// The cluster it runs in: every count and bucket is this cluster's.
    pub cluster: String,
    pub uid: String,
    pub namespace: String,
    pub name: String,
    /// The node it runs on (the pod migration's source node).
    pub node: String,
    pub koord_priority: KoordPriority,
    /// `spec.priority` (0 when unset).
    pub priority: i32,
    pub qos: KubeQos,
    pub koord_qos: KoordQos,
    pub deletion_cost: i32,
    pub eviction_cost: i32,
    pub creation_ms: i64,
    /// Key of the controller in its cluster (see [`Workload::key`]), `None` for pods without
    /// one.
    pub workload: Option<String>,
    /// Uid of the batch `Job` owning it, if any (sort groups these).
    pub job: Option<String>,
    /// Carries `descheduler.alpha.kubernetes.io/evict`.
    pub evict_annotation: bool,
    /// Terminating, DaemonSet, mirror or static: such pods are never migrated.
    pub never_migrate: Option<&'static str>,
}

/// A workload (controller) and the state of its pods.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Workload {
    /// The controller uid (unique within its cluster only).
    pub key: String,
    /// `Kind namespace/name`, for messages.
    pub display: String,
    /// Desired replicas.
    pub replicas: u32,
    /// Uids of its pods that are not Ready (or not running).
    pub unavailable: BTreeSet<String>,
}

/// The workloads arbitration looks at: cluster name → controller uid → workload.
pub type Workloads = HashMap<String, HashMap<String, Workload>>;

/// The workload of `pod`, if it has one that `workloads` knows, in the pod's cluster.
pub fn workload_of<'a>(workloads: &'a Workloads, pod: &PodFacts) -> Option<&'a Workload> {
    let key = pod.workload.as_ref()?;
    workloads.get(&pod.cluster)?.get(key)
}

/// An approved pod migration waiting for admission.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    pub migration: i64,
    /// When the pod migration was created (approved).
    pub created_ms: i64,
    pub pod: PodFacts,
}

/// A pod migration already admitted and not finished.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Active {
    pub migration: i64,
    pub cluster: String,
    pub pod_uid: String,
    pub node: String,
    pub namespace: String,
    pub workload: Option<String>,
    pub job: Option<String>,
}

impl Active {
    pub fn of(migration: i64, pod: &PodFacts) -> Active {
        Active {
            migration,
            cluster: pod.cluster.clone(),
            pod_uid: pod.uid.clone(),
            node: pod.node.clone(),
            namespace: pod.namespace.clone(),
            workload: pod.workload.clone(),
            job: pod.job.clone(),
        }
    }
}

/// Arbitration's answer for one candidate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Start it now.
    Admit,
    /// Keep it pending; the message says what it waits for.
    Wait(String),
    /// It may never run (Koordinator's non-retryable filters): fail it with this message.
    Reject(String),
}

// =============================================================================================
// Sort (§2.2)
// =============================================================================================

/// Koordinator's `PodSorter`: cheapest to evict first.
pub fn compare_pods(a: &PodFacts, b: &PodFacts) -> Ordering {
    a.koord_priority
        .cmp(&b.koord_priority)
        .then(a.priority.cmp(&b.priority))
        .then(a.qos.cmp(&b.qos))
        .then(a.koord_qos.cmp(&b.koord_qos))
        .then(a.deletion_cost.cmp(&b.deletion_cost))
        .then(a.eviction_cost.cmp(&b.eviction_cost))
        // Newer pods first.
        .then(b.creation_ms.cmp(&a.creation_ms))
}

/// The order candidates are considered in: four stable sorts, the last one the primary key —
/// (1) newest pod migration first, (2) [`compare_pods`], (3) pods of the same batch Job grouped
/// at the position of the first, (4) Jobs with more pod migrations in flight first. A Job is
/// one of its cluster's: the candidates of one cluster end in the order sorting them alone
/// would give.
pub fn sort_candidates(candidates: &mut Vec<Candidate>, active: &[Active]) {
    candidates.sort_by_key(|c| std::cmp::Reverse(c.created_ms));
    candidates.sort_by(|a, b| compare_pods(&a.pod, &b.pod));

    // Group by Job at the first member's position.
    let mut grouped = Vec::with_capacity(candidates.len());
    let mut taken = vec![false; candidates.len()];
    for i in 0..candidates.len() {
        if taken[i] {
            continue;
        }
        taken[i] = true;
        grouped.push(i);
        if let Some(job) = &candidates[i].pod.job {
            let cluster = &candidates[i].pod.cluster;
            for j in i + 1..candidates.len() {
                if !taken[j]
                    && candidates[j].pod.job.as_ref() == Some(job)
                    && candidates[j].pod.cluster == *cluster
                {
                    taken[j] = true;
                    grouped.push(j);
                }
            }
        }
    }
    let mut slots: Vec<Option<Candidate>> = candidates.drain(..).map(Some).collect();
    candidates.extend(grouped.into_iter().filter_map(|i| slots[i].take()));

    let mut in_flight: HashMap<(&str, &str), usize> = HashMap::new();
    for a in active {
        if let Some(job) = &a.job {
            *in_flight
                .entry((a.cluster.as_str(), job.as_str()))
                .or_default() += 1;
        }
    }
    let count = |c: &Candidate| {
        c.pod
            .job
            .as_deref()
            .and_then(|j| in_flight.get(&(c.pod.cluster.as_str(), j)).copied())
            .unwrap_or(0)
    };
    candidates.sort_by_key(|c| std::cmp::Reverse(count(c)));
}

// =============================================================================================
// Filters (§2.3)
// =============================================================================================

/// Answers whether the object limiters have a token for a pod (checked at admission).
pub trait LimiterCheck {
    /// `None` when the pod may go; otherwise what it waits for.
    fn blocked(&self, pod: &PodFacts, workload: Option<&Workload>) -> Option<String>;
}

/// No object limiters (tests, or both limiters off).
pub struct NoLimits;

impl LimiterCheck for NoLimits {
    fn blocked(&self, _: &PodFacts, _: Option<&Workload>) -> Option<String> {
        None
    }
}

/// Sort the candidates and decide each, in order, with the knobs of its cluster; admitted ones
/// count against the limits of the ones after them in the same cluster. Returns the verdicts in
/// the order considered.
pub fn arbitrate(
    configs: &ArbitrationConfigs,
    mut candidates: Vec<Candidate>,
    active: &[Active],
    workloads: &Workloads,
    limiters: &dyn LimiterCheck,
) -> Vec<(Candidate, Verdict)> {
    sort_candidates(&mut candidates, active);
    let mut active: Vec<Active> = active.to_vec();
    let mut out = Vec::with_capacity(candidates.len());
    for candidate in candidates {
        let config = configs.for_cluster(&candidate.pod.cluster);
        let verdict = judge(config, &candidate.pod, &active, workloads, limiters);
        if verdict == Verdict::Admit {
            active.push(Active::of(candidate.migration, &candidate.pod));
        }
        out.push((candidate, verdict));
    }
    out
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The filters for one pod against the migrations admitted so far in its cluster (`config` is
/// that cluster's; `active` may hold other clusters' migrations, which do not count).
pub fn judge(
    config: &ArbitrationConfig,
    pod: &PodFacts,
    active: &[Active],
    workloads: &Workloads,
    limiters: &dyn LimiterCheck,
) -> Verdict {
    // The escape hatch bypasses every filter and limit (as in Koordinator).
    if pod.evict_annotation {
        return Verdict::Admit;
    }
    let workload = workload_of(workloads, pod);
    let active: Vec<&Active> = active.iter().filter(|a| a.cluster == pod.cluster).collect();

    // Non-retryable.
    if pod.eviction_cost == i32::MAX {
        return Verdict::Reject(format!(
            "pod {}/{} has {EVICTION_COST_ANNOTATION}={} (never evict)",
            pod.namespace,
            pod.name,
            i32::MAX
        ));
    }
    if let Some(why) = pod.never_migrate {
        return Verdict::Reject(format!("pod {}/{} is {why}", pod.namespace, pod.name));
    }
    if let Some(w) = workload
        && !config.skip_check_expected_replicas
    {
        let max_migrating = workload_limit(config.max_migrating_per_workload, w.replicas);
        let max_unavailable = workload_limit(config.max_unavailable_per_workload, w.replicas);
        if w.replicas == 1 || w.replicas == max_migrating || w.replicas == max_unavailable {
            return Verdict::Reject(format!(
                "{} has {} (maxMigrating {max_migrating}, maxUnavailable {max_unavailable}): \
                 migrating one of its pods would leave it without a serving replica \
                 (skipCheckExpectedReplicas turns this check off)",
                w.display,
                plural(w.replicas as usize, "replica", "replicas"),
            ));
        }
    }

    // Retryable.
    if let Some(cap) = config.max_migrating_globally.filter(|c| *c > 0)
        && active.len() >= cap as usize
    {
        return Verdict::Wait(format!(
            "waiting: {} running in cluster {} (maxMigratingGlobally={cap})",
            plural(active.len(), "pod migration is", "pod migrations are"),
            pod.cluster
        ));
    }
    let cap = config.max_migrating_per_node;
    if cap > 0 {
        let n = active.iter().filter(|a| a.node == pod.node).count();
        if n >= cap as usize {
            return Verdict::Wait(format!(
                "waiting: node {} already has {} (maxMigratingPerNode={cap})",
                pod.node,
                plural(n, "migrating pod", "migrating pods")
            ));
        }
    }
    if let Some(cap) = config.max_migrating_per_namespace.filter(|c| *c > 0) {
        let n = active
            .iter()
            .filter(|a| a.namespace == pod.namespace)
            .count();
        if n >= cap as usize {
            return Verdict::Wait(format!(
                "waiting: namespace {} already has {} (maxMigratingPerNamespace={cap})",
                pod.namespace,
                plural(n, "migrating pod", "migrating pods")
            ));
        }
    }
    if let Some(w) = workload {
        let migrating: BTreeSet<&str> = active
            .iter()
            .filter(|a| a.workload.as_deref() == Some(w.key.as_str()) && a.pod_uid != pod.uid)
            .map(|a| a.pod_uid.as_str())
            .collect();
        let max_migrating = workload_limit(config.max_migrating_per_workload, w.replicas);
        if !migrating.is_empty() && migrating.len() >= max_migrating as usize {
            return Verdict::Wait(format!(
                "waiting: {} already has {} (maxMigratingPerWorkload={max_migrating} for {})",
                w.display,
                plural(migrating.len(), "migrating pod", "migrating pods"),
                plural(w.replicas as usize, "replica", "replicas"),
            ));
        }
        let mut unavailable: BTreeSet<&str> = w
            .unavailable
            .iter()
            .map(String::as_str)
            .filter(|u| *u != pod.uid)
            .collect();
        unavailable.extend(migrating);
        let max_unavailable = workload_limit(config.max_unavailable_per_workload, w.replicas);
        if unavailable.len() >= max_unavailable as usize {
            return Verdict::Wait(format!(
                "waiting: {} has {} unavailable or migrating (maxUnavailablePerWorkload=\
                 {max_unavailable} for {})",
                w.display,
                plural(unavailable.len(), "pod", "pods"),
                plural(w.replicas as usize, "replica", "replicas"),
            ));
        }
    }
    if let Some(why) = limiters.blocked(pod, workload) {
        return Verdict::Wait(why);
    }
    Verdict::Admit
}

// =============================================================================================
// Token buckets (§2.6, evictQPS)
// =============================================================================================

/// A token bucket (golang.org/x/time/rate semantics): starts full, refills continuously.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TokenBucket {
    tokens: f64,
    last_ms: i64,
}

impl TokenBucket {
    /// A full bucket.
    pub fn full(burst: u32, now_ms: i64) -> TokenBucket {
        TokenBucket {
            tokens: f64::from(burst.max(1)),
            last_ms: now_ms,
        }
    }

    fn refill(&mut self, now_ms: i64, per_ms: f64, burst: u32) {
        let elapsed = (now_ms - self.last_ms).max(0) as f64;
        self.tokens = (self.tokens + elapsed * per_ms).min(f64::from(burst.max(1)));
        self.last_ms = now_ms.max(self.last_ms);
    }

    /// Milliseconds until a token is available (0: now).
    pub fn wait_ms(&mut self, now_ms: i64, per_ms: f64, burst: u32) -> i64 {
        self.refill(now_ms, per_ms, burst);
        if self.tokens >= 1.0 {
            0
        } else if per_ms <= 0.0 {
            i64::MAX
        } else {
            ((1.0 - self.tokens) / per_ms).ceil() as i64
        }
    }

    /// Take one token (the count may go below zero: the debt is repaid by later refills).
    pub fn take(&mut self, now_ms: i64, per_ms: f64, burst: u32) {
        self.refill(now_ms, per_ms, burst);
        self.tokens -= 1.0;
    }

    /// Last time the bucket was used.
    pub fn last_ms(&self) -> i64 {
        self.last_ms
    }
}

/// An instant for messages, to the second (RFC 3339, UTC). Waiting messages name when rather
/// than how long, so they stay the same from one look to the next.
pub fn instant(ms: i64) -> String {
    use time::format_description::well_known::Rfc3339;
    time::OffsetDateTime::from_unix_timestamp(ms.div_euclid(1000))
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_else(|| ms.to_string())
}

/// Human duration for messages: `4m12s`, `800ms`.
pub fn human_ms(ms: i64) -> String {
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let s = (ms + 999) / 1000;
    match (s / 3600, (s % 3600) / 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m{s}s"),
        (h, m, s) => format!("{h}h{m}m{s}s"),
    }
}

/// The object limiters' buckets (per workload and per namespace, in each cluster), kept in
/// memory and rebuilt from the recorded evictions after a restart.
#[derive(Debug, Default)]
pub struct ObjectLimiters {
    clusters: HashMap<String, ClusterLimiters>,
}

/// One cluster's object limiter buckets.
#[derive(Debug, Default)]
struct ClusterLimiters {
    /// By controller uid.
    workload: HashMap<String, TokenBucket>,
    /// By namespace name.
    namespace: HashMap<String, TokenBucket>,
}

impl ClusterLimiters {
    fn is_empty(&self) -> bool {
        self.workload.is_empty() && self.namespace.is_empty()
    }
}

/// (tokens per ms, burst) of a limiter for a pod; `None` when it does not apply.
fn limiter_rate(
    config: &ArbitrationConfig,
    limiter: &LimiterConfig,
    workload: Option<&Workload>,
) -> Option<(f64, u32, String)> {
    let duration = duration_ms(&limiter.duration).ok().filter(|d| *d > 0)?;
    let per_duration = match (limiter.max_migrating, workload) {
        (Some(IntOrPercent::Int(n)), _) => n,
        (value, Some(w)) => workload_limit(value.or(config.max_migrating_per_workload), w.replicas),
        (Some(IntOrPercent::Percent(_)) | None, None) => return None,
    };
    if per_duration == 0 {
        return None;
    }
    let describe = format!("{per_duration} per {}", limiter.duration);
    Some((
        f64::from(per_duration) / duration as f64,
        limiter.burst,
        describe,
    ))
}

/// What a limiter's bucket allows and how much of it is used, for waiting messages: `1 of 1
/// eviction at once, one more every 2m30s`. The bucket holds `burst` evictions (0 means 1) and
/// refills at the limiter's rate, so "2 per 5m" with burst 1 means one, then one every 2m30s.
fn budget_use(bucket: &TokenBucket, per_ms: f64, burst: u32) -> String {
    let capacity = burst.max(1);
    let used = (f64::from(capacity) - bucket.tokens).ceil().max(0.0) as u32;
    let every = if per_ms > 0.0 {
        human_ms((1.0 / per_ms).round() as i64)
    } else {
        "never".to_owned()
    };
    format!(
        "{used} of {capacity} eviction{} at once, one more every {every}",
        if capacity == 1 { "" } else { "s" }
    )
}

impl ObjectLimiters {
    /// Record an eviction at `now_ms` (takes a token from the pod's buckets in its cluster, with
    /// that cluster's knobs).
    pub fn record_eviction(
        &mut self,
        configs: &ArbitrationConfigs,
        pod: &PodFacts,
        workload: Option<&Workload>,
        now_ms: i64,
    ) {
        let config = configs.for_cluster(&pod.cluster);
        let buckets = self.clusters.entry(pod.cluster.clone()).or_default();
        if let (Some(limiter), Some(w)) = (&config.object_limiters.workload, workload)
            && let Some((rate, burst, _)) = limiter_rate(config, limiter, Some(w))
        {
            buckets
                .workload
                .entry(w.key.clone())
                .or_insert_with(|| TokenBucket::full(burst, now_ms))
                .take(now_ms, rate, burst);
        }
        if let Some(limiter) = &config.object_limiters.namespace
            && let Some((rate, burst, _)) = limiter_rate(config, limiter, None)
        {
            buckets
                .namespace
                .entry(pod.namespace.clone())
                .or_insert_with(|| TokenBucket::full(burst, now_ms))
                .take(now_ms, rate, burst);
        }
        if buckets.is_empty() {
            self.clusters.remove(&pod.cluster);
        }
    }

    /// Forget buckets idle for 1.5 × their cluster's duration (they would be full again anyway).
    pub fn expire_idle(&mut self, configs: &ArbitrationConfigs, now_ms: i64) {
        for (cluster, buckets) in self.clusters.iter_mut() {
            let config = configs.for_cluster(cluster);
            for (map, limiter) in [
                (&mut buckets.workload, &config.object_limiters.workload),
                (&mut buckets.namespace, &config.object_limiters.namespace),
            ] {
                match limiter.as_ref().and_then(|l| duration_ms(&l.duration).ok()) {
                    Some(d) => map.retain(|_, b| now_ms - b.last_ms() < d.saturating_mul(3) / 2),
                    None => map.clear(),
                }
            }
        }
        self.clusters.retain(|_, buckets| !buckets.is_empty());
    }

    /// A [`LimiterCheck`] at `now_ms`.
    pub fn at<'a>(&'a self, configs: &'a ArbitrationConfigs, now_ms: i64) -> LimitersAt<'a> {
        LimitersAt {
            limiters: self,
            configs,
            now_ms,
        }
    }
}

/// [`ObjectLimiters`] seen at one instant.
pub struct LimitersAt<'a> {
    limiters: &'a ObjectLimiters,
    configs: &'a ArbitrationConfigs,
    now_ms: i64,
}

impl LimiterCheck for LimitersAt<'_> {
    fn blocked(&self, pod: &PodFacts, workload: Option<&Workload>) -> Option<String> {
        let buckets = self.limiters.clusters.get(&pod.cluster)?;
        let config = self.configs.for_cluster(&pod.cluster);
        if let (Some(limiter), Some(w)) = (&config.object_limiters.workload, workload)
            && let Some((rate, burst, describe)) = limiter_rate(config, limiter, Some(w))
            && let Some(mut bucket) = buckets.workload.get(&w.key).copied()
        {
            let wait = bucket.wait_ms(self.now_ms, rate, burst);
            if wait > 0 {
                return Some(format!(
                    "waiting: {} used its eviction budget: {} (objectLimiters.workload: \
                     {describe}); next token at {}",
                    w.display,
                    budget_use(&bucket, rate, burst),
                    instant(self.now_ms + wait)
                ));
            }
        }
        if let Some(limiter) = &config.object_limiters.namespace
            && let Some((rate, burst, describe)) = limiter_rate(config, limiter, None)
            && let Some(mut bucket) = buckets.namespace.get(&pod.namespace).copied()
        {
            let wait = bucket.wait_ms(self.now_ms, rate, burst);
            if wait > 0 {
                return Some(format!(
                    "waiting: namespace {} used its eviction budget: {} \
                     (objectLimiters.namespace: {describe}); next token at {}",
                    pod.namespace,
                    budget_use(&bucket, rate, burst),
                    instant(self.now_ms + wait)
                ));
            }
        }
        None
    }
}

/// The eviction QPS buckets (`evictQPS`/`evictBurst`), one per cluster with that cluster's
/// knobs. In memory only: after a restart every cluster starts with a full bucket.
#[derive(Debug, Default)]
pub struct EvictionLimiter {
    buckets: HashMap<String, TokenBucket>,
}

impl EvictionLimiter {
    /// Take a token for an eviction in `cluster` now and return 0, or return how many ms until
    /// one is available (nothing taken).
    pub fn try_take(&mut self, config: &ArbitrationConfig, cluster: &str, now_ms: i64) -> i64 {
        let per_ms = config.evict_qps / 1000.0;
        let burst = config.evict_burst;
        let bucket = self
            .buckets
            .entry(cluster.to_string())
            .or_insert_with(|| TokenBucket::full(burst, now_ms));
        let wait_ms = bucket.wait_ms(now_ms, per_ms, burst);
        if wait_ms == 0 {
            bucket.take(now_ms, per_ms, burst);
        }
        wait_ms
    }
}

#[cfg(test)]
mod tests;
