//! Decoded Kubernetes objects → snapshot rows, with validation and field paths.
//!
//! Owns the meaning of each modelled field (defaults, enum spellings, timestamps, quantities,
//! effective requests and QoS through `rebalancer_policy_sdk::k8s::resources`). Strings are
//! interned as they are converted; borrowed strings go through a fast cache keyed by the
//! borrowed text, so the builder's own map is only consulted once per distinct string.

use rebalancer_policy_sdk::build::SnapshotBuilder;
use rebalancer_policy_sdk::k8s::quantity::{self, QuantityError};
use rebalancer_policy_sdk::k8s::resources::{
    self, ContainerResources, PodResources, ResourceList, ResourceRequirements,
};
use rebalancer_policy_sdk::model::{
    self, Affinity, Container, ContainerKind, InclusionPolicy, KeyValue, LabelSelector, NONE,
    NodeSelectorTerm, OwnerRef, PodAffinityTerm, PodCondition, PodPhase, PreferredSchedulingTerm,
    Quantity, Requirement, SelectorOperator, StrId, Taint, TaintEffect, Toleration,
    TolerationOperator, TopologySpreadConstraint, UnhealthyPodEvictionPolicy, Volume, VolumeKind,
    WeightedPodAffinityTerm, WhenUnsatisfiable,
};

use super::document::shorten;
use super::jsonpath::push_key;
use super::objects::LAST_APPLIED;
use super::validation;
use super::wire::{self, QtyMap, Str, StrMap};

/// A problem with one field of one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            message: message.into(),
        }
    }
}

type Result<T> = std::result::Result<T, FieldError>;

/// `base.key` (or `base["odd/key"]`).
fn at(base: &str, key: &str) -> String {
    let mut s = base.to_owned();
    push_key(&mut s, key);
    s
}

pub(crate) use rebalancer_policy_sdk::build::FxBuild;

/// Per-build state: the snapshot builder, the intern cache and the oddities seen.
pub(crate) struct Ctx {
    pub builder: SnapshotBuilder,
    time_ms: i64,
    /// Validate as Kubernetes would (objects of a pushed document): labels, annotations,
    /// non-negative quantities, PDB budgets.
    pub strict: bool,
    /// Pods without `metadata.creationTimestamp` (namespace/name).
    pub missing_creation: Vec<String>,
    /// PDBs without `status` (namespace/name).
    pub pdb_without_status: Vec<String>,
}

impl Ctx {
    /// A context that interns into `builder` (kept across live revisions) instead of a new one.
    pub fn with_builder(mut builder: SnapshotBuilder, revision: u64, time_ms: i64) -> Self {
        let tables = builder.snapshot_mut();
        tables.revision = revision;
        tables.time_ms = time_ms;
        Ctx {
            builder,
            time_ms,
            strict: false,
            missing_creation: Vec::new(),
            pdb_without_status: Vec::new(),
        }
    }

    pub fn new(revision: u64, time_ms: i64) -> Self {
        Ctx {
            builder: SnapshotBuilder::new(revision, time_ms),
            time_ms,
            strict: false,
            missing_creation: Vec::new(),
            pdb_without_status: Vec::new(),
        }
    }

    /// Intern a decoded string.
    pub fn intern(&mut self, s: &Str<'_>) -> StrId {
        self.builder.intern(&s.0)
    }

    fn intern_opt(&mut self, s: &Option<Str<'_>>) -> StrId {
        match s {
            Some(s) => self.intern(s),
            None => 0,
        }
    }

    fn intern_all(&mut self, list: &Option<Vec<Str<'_>>>) -> Vec<StrId> {
        list.iter().flatten().map(|s| self.intern(s)).collect()
    }

    fn pairs(&mut self, map: &Option<StrMap<'_>>) -> Vec<KeyValue> {
        let Some(map) = map else { return Vec::new() };
        let mut out = Vec::with_capacity(map.0.len());
        for (k, v) in &map.0 {
            out.push(KeyValue {
                key: self.intern(k),
                value: self.intern(v),
            });
        }
        out
    }

    fn annotations(&mut self, map: &Option<StrMap<'_>>) -> Vec<KeyValue> {
        let Some(map) = map else { return Vec::new() };
        let mut out = Vec::with_capacity(map.0.len());
        for (k, v) in &map.0 {
            if k.as_str() != LAST_APPLIED {
                out.push(KeyValue {
                    key: self.intern(k),
                    value: self.intern(v),
                });
            }
        }
        out
    }
}

// --------------------------------------------------------------------------------- primitives

/// An RFC 3339 timestamp as ms since the Unix epoch (sub-millisecond digits are dropped,
/// rounding towards the past).
pub fn parse_time_ms(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    // Fast path: what the API server writes, `2024-05-01T12:00:00Z`.
    if b.len() == 20
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':'
        && b[16] == b':'
        && b[19] == b'Z'
    {
        let num = |from: usize, to: usize| -> Option<i64> {
            b[from..to].iter().try_fold(0i64, |acc, &d| {
                d.is_ascii_digit().then(|| acc * 10 + i64::from(d - b'0'))
            })
        };
        if let (Some(y), Some(mo), Some(d), Some(h), Some(mi), Some(sec)) = (
            num(0, 4),
            num(5, 7),
            num(8, 10),
            num(11, 13),
            num(14, 16),
            num(17, 19),
        ) && (1..=12).contains(&mo)
            && d >= 1
            && d <= days_in_month(y, mo)
            && h < 24
            && mi < 60
            && sec < 60
        {
            let days = days_from_civil(y, mo, d);
            return Some(((days * 24 + h) * 60 + mi) * 60_000 + sec * 1000);
        }
    }
    let t = time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).ok()?;
    i64::try_from(t.unix_timestamp_nanos().div_euclid(1_000_000)).ok()
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        _ => 28,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn time_field(s: &Option<Str<'_>>, field: impl FnOnce() -> String) -> Result<Option<i64>> {
    match s {
        None => Ok(None),
        Some(s) => parse_time_ms(s).map(Some).ok_or_else(|| {
            FieldError::new(
                field(),
                format!(
                    "invalid timestamp {:?}: expected RFC 3339, e.g. \"2024-05-01T12:00:00Z\"",
                    s.as_str()
                ),
            )
        }),
    }
}

/// Parse a quantity map (validating that every milli-value fits in an `i64`, which is what
/// the archive stores, and, when `nonnegative`, that none is below zero, as Kubernetes
/// requires of requests, limits, overhead, capacity and allocatable); `base` renders the
/// map's path, only on error.
fn quantity_list<'m, 's>(
    map: &'m Option<QtyMap<'s>>,
    base: &dyn Fn() -> String,
    nonnegative: bool,
) -> Result<ResourceList<&'m Str<'s>>> {
    let Some(map) = map else {
        return Ok(Vec::new());
    };
    let mut out = Vec::with_capacity(map.0.len());
    for (name, value) in &map.0 {
        match quantity::parse_nano(&value.0) {
            Ok(nano) if nonnegative && nano < 0 => {
                return Err(FieldError::new(
                    at(&base(), &shorten(name)),
                    format!(
                        "invalid quantity {:?}: must be greater than or equal to 0",
                        shorten(&value.0)
                    ),
                ));
            }
            Ok(nano) if quantity::nano_to_milli(nano).is_some() => out.push((name, nano)),
            Ok(_) => {
                return Err(FieldError::new(
                    at(&base(), name),
                    QuantityError::Overflow {
                        input: value.0.to_string(),
                    }
                    .to_string(),
                ));
            }
            Err(e) => return Err(FieldError::new(at(&base(), name), e.to_string())),
        }
    }
    Ok(out)
}

/// Allocatable-style lists straight to milli-units (`nonnegative`: see [`quantity_list`]).
pub(crate) fn milli_list<'s>(
    ctx: &mut Ctx,
    map: &Option<QtyMap<'s>>,
    base: &str,
    nonnegative: bool,
) -> Result<Vec<Quantity>> {
    let list = quantity_list(map, &|| base.to_owned(), nonnegative)?;
    Ok(list
        .into_iter()
        .map(|(name, nano)| Quantity {
            resource: ctx.intern(name),
            milli: quantity::nano_to_milli_saturating(nano),
        })
        .collect())
}

// ------------------------------------------------------------------- Kubernetes validation

/// Labels (or a label-shaped map: `nodeSelector`, `matchLabels`): every key a qualified name,
/// every value a label value.
fn check_labels(map: &Option<StrMap<'_>>, base: &dyn Fn() -> String) -> Result<()> {
    for (key, value) in map.iter().flat_map(|m| &m.0) {
        validation::qualified_name(key).map_err(|m| {
            FieldError::new(
                at(&base(), &shorten(key)),
                format!("invalid label key: {m}"),
            )
        })?;
        validation::label_value(value).map_err(|m| {
            FieldError::new(
                at(&base(), &shorten(key)),
                format!("invalid label value {:?}: {m}", shorten(value)),
            )
        })?;
    }
    Ok(())
}

/// An object's labels and annotations, as Kubernetes' `ValidateObjectMeta` checks them
/// (pushed documents only).
fn check_meta(ctx: &Ctx, meta: &wire::ObjectMeta<'_>) -> Result<()> {
    if !ctx.strict {
        return Ok(());
    }
    check_labels(&meta.labels, &|| "metadata.labels".to_owned())?;
    let mut total = 0;
    for (key, value) in meta.annotations.iter().flat_map(|m| &m.0) {
        validation::annotation_key(key).map_err(|m| {
            FieldError::new(
                at("metadata.annotations", &shorten(key)),
                format!("invalid annotation key: {m}"),
            )
        })?;
        total += key.len() + value.len();
    }
    validation::annotations_size(total).map_err(|m| FieldError::new("metadata.annotations", m))
}

// ---------------------------------------------------------------------------------- selectors

fn selector_operator(op: &Option<Str<'_>>, field: &str, node: bool) -> Result<SelectorOperator> {
    let op = op.as_deref().unwrap_or("");
    let parsed = match op {
        "In" => Some(SelectorOperator::In),
        "NotIn" => Some(SelectorOperator::NotIn),
        "Exists" => Some(SelectorOperator::Exists),
        "DoesNotExist" => Some(SelectorOperator::DoesNotExist),
        "Gt" if node => Some(SelectorOperator::Gt),
        "Lt" if node => Some(SelectorOperator::Lt),
        _ => None,
    };
    parsed.ok_or_else(|| {
        let expected = if node {
            "In, NotIn, Exists, DoesNotExist, Gt or Lt"
        } else {
            "In, NotIn, Exists or DoesNotExist"
        };
        let what = if op.is_empty() {
            "required field is missing".to_owned()
        } else {
            format!("unknown operator {op:?}")
        };
        FieldError::new(field, format!("{what} (expected {expected})"))
    })
}

fn requirements<'s>(
    ctx: &mut Ctx,
    list: &Option<Vec<wire::Requirement<'s>>>,
    base: &str,
    node: bool,
) -> Result<Vec<Requirement>> {
    let Some(list) = list else {
        return Ok(Vec::new());
    };
    let mut out = Vec::with_capacity(list.len());
    for (i, r) in list.iter().enumerate() {
        let operator = selector_operator(&r.operator, &format!("{base}[{i}].operator"), node)?;
        out.push(Requirement {
            key: ctx.intern_opt(&r.key),
            operator,
            values: ctx.intern_all(&r.values),
        });
    }
    Ok(out)
}

fn label_selector<'s>(
    ctx: &mut Ctx,
    sel: &wire::LabelSelector<'s>,
    base: &str,
) -> Result<LabelSelector> {
    if ctx.strict {
        check_labels(&sel.match_labels, &|| format!("{base}.matchLabels"))?;
    }
    Ok(LabelSelector {
        match_labels: ctx.pairs(&sel.match_labels),
        match_expressions: requirements(
            ctx,
            &sel.match_expressions,
            &format!("{base}.matchExpressions"),
            false,
        )?,
    })
}

fn opt_label_selector<'s>(
    ctx: &mut Ctx,
    sel: &Option<wire::LabelSelector<'s>>,
    base: &str,
) -> Result<Option<LabelSelector>> {
    sel.as_ref()
        .map(|s| label_selector(ctx, s, base))
        .transpose()
}

fn node_selector_term<'s>(
    ctx: &mut Ctx,
    term: &wire::NodeSelectorTerm<'s>,
    base: &str,
) -> Result<NodeSelectorTerm> {
    Ok(NodeSelectorTerm {
        match_expressions: requirements(
            ctx,
            &term.match_expressions,
            &format!("{base}.matchExpressions"),
            true,
        )?,
        match_fields: requirements(
            ctx,
            &term.match_fields,
            &format!("{base}.matchFields"),
            true,
        )?,
    })
}

fn pod_affinity_term<'s>(
    ctx: &mut Ctx,
    term: &wire::PodAffinityTerm<'s>,
    base: &str,
) -> Result<PodAffinityTerm> {
    Ok(PodAffinityTerm {
        label_selector: opt_label_selector(
            ctx,
            &term.label_selector,
            &format!("{base}.labelSelector"),
        )?,
        namespaces: ctx.intern_all(&term.namespaces),
        namespace_selector: opt_label_selector(
            ctx,
            &term.namespace_selector,
            &format!("{base}.namespaceSelector"),
        )?,
        topology_key: ctx.intern_opt(&term.topology_key),
        match_label_keys: ctx.intern_all(&term.match_label_keys),
        mismatch_label_keys: ctx.intern_all(&term.mismatch_label_keys),
    })
}

type PodTerms = (Vec<PodAffinityTerm>, Vec<WeightedPodAffinityTerm>);

fn pod_affinity<'s>(
    ctx: &mut Ctx,
    a: &Option<wire::PodAffinity<'s>>,
    base: &str,
) -> Result<PodTerms> {
    let Some(a) = a else {
        return Ok((Vec::new(), Vec::new()));
    };
    let mut required = Vec::new();
    for (i, t) in a.required.iter().flatten().enumerate() {
        required.push(pod_affinity_term(
            ctx,
            t,
            &format!("{base}.requiredDuringSchedulingIgnoredDuringExecution[{i}]"),
        )?);
    }
    let mut preferred = Vec::new();
    for (i, w) in a.preferred.iter().flatten().enumerate() {
        let path = format!("{base}.preferredDuringSchedulingIgnoredDuringExecution[{i}]");
        let term = match &w.pod_affinity_term {
            Some(t) => pod_affinity_term(ctx, t, &format!("{path}.podAffinityTerm"))?,
            None => {
                return Err(FieldError::new(
                    format!("{path}.podAffinityTerm"),
                    "required field is missing",
                ));
            }
        };
        preferred.push(WeightedPodAffinityTerm {
            weight: w.weight.unwrap_or(0),
            term,
        });
    }
    Ok((required, preferred))
}

fn affinity<'s>(ctx: &mut Ctx, a: &Option<wire::Affinity<'s>>) -> Result<Affinity> {
    let Some(a) = a else {
        return Ok(Affinity::default());
    };
    let mut out = Affinity::default();
    if let Some(node) = &a.node_affinity {
        if let Some(required) = &node.required {
            let mut terms = Vec::new();
            for (i, t) in required.node_selector_terms.iter().flatten().enumerate() {
                terms.push(node_selector_term(
                    ctx,
                    t,
                    &format!(
                        "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution\
                         .nodeSelectorTerms[{i}]"
                    ),
                )?);
            }
            out.node_required = Some(terms);
        }
        for (i, p) in node.preferred.iter().flatten().enumerate() {
            let path = format!(
                "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
            );
            let term = match &p.preference {
                Some(t) => node_selector_term(ctx, t, &format!("{path}.preference"))?,
                None => NodeSelectorTerm::default(),
            };
            out.node_preferred.push(PreferredSchedulingTerm {
                weight: p.weight.unwrap_or(0),
                term,
            });
        }
    }
    (out.pod_affinity_required, out.pod_affinity_preferred) =
        pod_affinity(ctx, &a.pod_affinity, "spec.affinity.podAffinity")?;
    (
        out.pod_anti_affinity_required,
        out.pod_anti_affinity_preferred,
    ) = pod_affinity(ctx, &a.pod_anti_affinity, "spec.affinity.podAntiAffinity")?;
    Ok(out)
}

// ------------------------------------------------------------------------------------- taints

fn taint_effect(effect: &str, field: impl FnOnce() -> String) -> Result<TaintEffect> {
    match effect {
        "NoSchedule" => Ok(TaintEffect::NoSchedule),
        "PreferNoSchedule" => Ok(TaintEffect::PreferNoSchedule),
        "NoExecute" => Ok(TaintEffect::NoExecute),
        other => Err(FieldError::new(
            field(),
            format!(
                "unknown taint effect {other:?} (expected NoSchedule, PreferNoSchedule or \
                 NoExecute)"
            ),
        )),
    }
}

fn taints<'s>(ctx: &mut Ctx, list: &Option<Vec<wire::Taint<'s>>>) -> Result<Vec<Taint>> {
    let mut out = Vec::new();
    for (i, t) in list.iter().flatten().enumerate() {
        let effect = taint_effect(t.effect.as_deref().unwrap_or(""), || {
            format!("spec.taints[{i}].effect")
        })?;
        out.push(Taint {
            key: ctx.intern_opt(&t.key),
            value: ctx.intern_opt(&t.value),
            effect,
        });
    }
    Ok(out)
}

fn tolerations<'s>(
    ctx: &mut Ctx,
    list: &Option<Vec<wire::Toleration<'s>>>,
) -> Result<Vec<Toleration>> {
    let mut out = Vec::new();
    for (i, t) in list.iter().flatten().enumerate() {
        let operator = match t.operator.as_deref().unwrap_or("") {
            "" | "Equal" => TolerationOperator::Equal,
            "Exists" => TolerationOperator::Exists,
            other => {
                return Err(FieldError::new(
                    format!("spec.tolerations[{i}].operator"),
                    format!("unknown operator {other:?} (expected Equal or Exists)"),
                ));
            }
        };
        let effect = match t.effect.as_deref().unwrap_or("") {
            "" => None,
            e => Some(taint_effect(e, || format!("spec.tolerations[{i}].effect"))?),
        };
        out.push(Toleration {
            key: ctx.intern_opt(&t.key),
            operator,
            value: ctx.intern_opt(&t.value),
            effect,
        });
    }
    Ok(out)
}

fn inclusion_policy(p: &Option<Str<'_>>, field: &str) -> Result<Option<InclusionPolicy>> {
    match p.as_deref() {
        None => Ok(None),
        Some("Honor") => Ok(Some(InclusionPolicy::Honor)),
        Some("Ignore") => Ok(Some(InclusionPolicy::Ignore)),
        Some(other) => Err(FieldError::new(
            field,
            format!("unknown policy {other:?} (expected Honor or Ignore)"),
        )),
    }
}

fn topology_spread<'s>(
    ctx: &mut Ctx,
    list: &Option<Vec<wire::TopologySpreadConstraint<'s>>>,
) -> Result<Vec<TopologySpreadConstraint>> {
    let mut out = Vec::new();
    for (i, c) in list.iter().flatten().enumerate() {
        let base = format!("spec.topologySpreadConstraints[{i}]");
        let max_skew = c.max_skew.ok_or_else(|| {
            FieldError::new(format!("{base}.maxSkew"), "required field is missing")
        })?;
        let when_unsatisfiable = match c.when_unsatisfiable.as_deref().unwrap_or("DoNotSchedule") {
            "DoNotSchedule" => WhenUnsatisfiable::DoNotSchedule,
            "ScheduleAnyway" => WhenUnsatisfiable::ScheduleAnyway,
            other => {
                return Err(FieldError::new(
                    format!("{base}.whenUnsatisfiable"),
                    format!("unknown value {other:?} (expected DoNotSchedule or ScheduleAnyway)"),
                ));
            }
        };
        out.push(TopologySpreadConstraint {
            max_skew,
            topology_key: ctx.intern_opt(&c.topology_key),
            when_unsatisfiable,
            label_selector: opt_label_selector(
                ctx,
                &c.label_selector,
                &format!("{base}.labelSelector"),
            )?,
            min_domains: c.min_domains,
            node_affinity_policy: inclusion_policy(
                &c.node_affinity_policy,
                &format!("{base}.nodeAffinityPolicy"),
            )?,
            node_taints_policy: inclusion_policy(
                &c.node_taints_policy,
                &format!("{base}.nodeTaintsPolicy"),
            )?,
            match_label_keys: ctx.intern_all(&c.match_label_keys),
        });
    }
    Ok(out)
}

// ----------------------------------------------------------------------------------------- pod

fn container_resources<'m, 's>(
    c: &'m wire::Container<'s>,
    list: &str,
    i: usize,
    strict: bool,
) -> Result<ContainerResources<&'m Str<'s>>> {
    let (requests, limits) = match &c.resources {
        None => (Vec::new(), Vec::new()),
        Some(r) => (
            quantity_list(
                &r.requests,
                &|| format!("spec.{list}[{i}].resources.requests"),
                strict,
            )?,
            quantity_list(
                &r.limits,
                &|| format!("spec.{list}[{i}].resources.limits"),
                strict,
            )?,
        ),
    };
    Ok(ContainerResources {
        requests,
        limits,
        restart_always: c.restart_policy.as_deref() == Some("Always"),
    })
}

fn containers<'s>(
    ctx: &mut Ctx,
    out: &mut Vec<Container>,
    kind: ContainerKind,
    specs: &Option<Vec<wire::Container<'s>>>,
    statuses: &Option<Vec<wire::ContainerStatus<'s>>>,
) {
    let statuses = statuses.as_deref().unwrap_or(&[]);
    for c in specs.iter().flatten() {
        let status = statuses
            .iter()
            .find(|s| s.name.as_deref() == c.name.as_deref());
        let mut row = Container {
            kind,
            name: ctx.intern_opt(&c.name),
            image: ctx.intern_opt(&c.image),
            ..Container::default()
        };
        if let Some(s) = status {
            row.restart_count = s.restart_count.unwrap_or(0);
            row.ready = s.ready.unwrap_or(false);
            if let Some(state) = &s.state {
                if let Some(w) = &state.waiting {
                    row.waiting_reason = ctx.intern_opt(&w.reason);
                }
                if let Some(t) = &state.terminated {
                    row.terminated_reason = ctx.intern_opt(&t.reason);
                    row.exit_code = Some(t.exit_code.unwrap_or(0));
                }
            }
        }
        out.push(row);
    }
}

fn owner_refs<'s>(ctx: &mut Ctx, meta: &wire::ObjectMeta<'s>) -> Vec<OwnerRef> {
    meta.owner_references
        .iter()
        .flatten()
        .map(|r| OwnerRef {
            kind: ctx.intern_opt(&r.kind),
            name: ctx.intern_opt(&r.name),
            uid: ctx.intern_opt(&r.uid),
            controller: r.controller.unwrap_or(false),
        })
        .collect()
}

fn owned(s: &Option<Str<'_>>) -> String {
    s.as_deref().unwrap_or("").to_owned()
}

pub(crate) fn pod<'s>(ctx: &mut Ctx, w: &wire::Pod<'s>, namespace: &str) -> Result<model::Pod> {
    let empty_meta = wire::ObjectMeta::default();
    let meta = w.metadata.as_ref().unwrap_or(&empty_meta);
    let empty_spec = wire::PodSpec::default();
    let spec = w.spec.as_ref().unwrap_or(&empty_spec);
    let empty_status = wire::PodStatus::default();
    let status = w.status.as_ref().unwrap_or(&empty_status);
    let name = owned(&meta.name);
    check_meta(ctx, meta)?;
    if ctx.strict {
        check_labels(&spec.node_selector, &|| "spec.nodeSelector".to_owned())?;
    }

    let creation_ms = match time_field(&meta.creation_timestamp, || {
        "metadata.creationTimestamp".into()
    })? {
        Some(ms) => ms,
        None => {
            ctx.missing_creation
                .push(super::objects::qualified(namespace, &name));
            ctx.time_ms
        }
    };
    let phase = match status.phase.as_deref() {
        None | Some("") | Some("Pending") => PodPhase::Pending,
        Some("Running") => PodPhase::Running,
        Some("Succeeded") => PodPhase::Succeeded,
        Some("Failed") => PodPhase::Failed,
        Some("Unknown") => PodPhase::Unknown,
        Some(other) => {
            return Err(FieldError::new(
                "status.phase",
                format!(
                    "unknown phase {other:?} (expected Pending, Running, Succeeded, Failed or \
                     Unknown)"
                ),
            ));
        }
    };

    // Resources: effective requests and QoS, as Kubernetes computes them.
    let strict = ctx.strict;
    let mut res: PodResources<&Str<'s>> = PodResources::default();
    for (i, c) in spec.containers.iter().flatten().enumerate() {
        res.containers
            .push(container_resources(c, "containers", i, strict)?);
    }
    for (i, c) in spec.init_containers.iter().flatten().enumerate() {
        res.init_containers
            .push(container_resources(c, "initContainers", i, strict)?);
    }
    res.overhead = quantity_list(&spec.overhead, &|| "spec.overhead".to_owned(), strict)?;
    if let Some(r) = &spec.resources {
        res.pod_level = Some(ResourceRequirements {
            requests: quantity_list(
                &r.requests,
                &|| "spec.resources.requests".to_owned(),
                strict,
            )?,
            limits: quantity_list(&r.limits, &|| "spec.resources.limits".to_owned(), strict)?,
        });
    }
    let status_qos = match status.qos_class.as_deref() {
        None | Some("") => None,
        Some(q) => Some(resources::parse_qos_class(q).ok_or_else(|| {
            FieldError::new(
                "status.qosClass",
                format!("unknown QoS class {q:?} (expected BestEffort, Burstable or Guaranteed)"),
            )
        })?),
    };
    let qos = resources::pod_qos(status_qos, &res);
    let requests: Vec<Quantity> = resources::pod_requests(&res)
        .into_iter()
        .map(|(name, nano)| Quantity {
            resource: ctx.intern(name),
            milli: quantity::nano_to_milli_saturating(nano),
        })
        .collect();

    let mut container_rows = Vec::new();
    containers(
        ctx,
        &mut container_rows,
        ContainerKind::App,
        &spec.containers,
        &status.container_statuses,
    );
    containers(
        ctx,
        &mut container_rows,
        ContainerKind::Init,
        &spec.init_containers,
        &status.init_container_statuses,
    );
    containers(
        ctx,
        &mut container_rows,
        ContainerKind::Ephemeral,
        &spec.ephemeral_containers,
        &status.ephemeral_container_statuses,
    );

    let mut conditions = Vec::new();
    for (i, c) in status.conditions.iter().flatten().enumerate() {
        conditions.push(PodCondition {
            type_: ctx.intern_opt(&c.type_),
            status: ctx.intern_opt(&c.status),
            reason: ctx.intern_opt(&c.reason),
            last_transition_ms: time_field(&c.last_transition_time, || {
                format!("status.conditions[{i}].lastTransitionTime")
            })?,
        });
    }

    let mut volumes = Vec::new();
    for v in spec.volumes.iter().flatten() {
        let (kind, claim) = if let Some(pvc) = &v.persistent_volume_claim {
            (
                VolumeKind::PersistentVolumeClaim,
                ctx.intern_opt(&pvc.claim_name),
            )
        } else if v.empty_dir.is_some() {
            (VolumeKind::EmptyDir, 0)
        } else if v.host_path.is_some() {
            (VolumeKind::HostPath, 0)
        } else if v.ephemeral.is_some() {
            (VolumeKind::Ephemeral, 0)
        } else {
            (VolumeKind::Other, 0)
        };
        volumes.push(Volume {
            name: ctx.intern_opt(&v.name),
            kind,
            claim,
        });
    }

    Ok(model::Pod {
        name,
        uid: owned(&meta.uid),
        namespace: ctx.builder.intern(namespace),
        node: NONE,
        node_name: ctx.intern_opt(&spec.node_name),
        owner_refs: owner_refs(ctx, meta),
        owner: NONE,
        labels: ctx.pairs(&meta.labels),
        annotations: ctx.annotations(&meta.annotations),
        priority: spec.priority,
        priority_class_name: ctx.intern_opt(&spec.priority_class_name),
        qos,
        phase,
        reason: ctx.intern_opt(&status.reason),
        creation_ms,
        start_ms: time_field(&status.start_time, || "status.startTime".into())?,
        deletion_ms: time_field(&meta.deletion_timestamp, || {
            "metadata.deletionTimestamp".into()
        })?,
        requests,
        node_selector: ctx.pairs(&spec.node_selector),
        affinity: affinity(ctx, &spec.affinity)?,
        tolerations: tolerations(ctx, &spec.tolerations)?,
        topology_spread: topology_spread(ctx, &spec.topology_spread_constraints)?,
        containers: container_rows,
        conditions,
        volumes,
        has_resource_claims: spec.resource_claims.as_ref().is_some_and(|c| !c.is_empty()),
    })
}

// ---------------------------------------------------------------------------- other objects

/// A node's row and its annotations (a table of their own: layout 3).
pub(crate) fn node<'s>(ctx: &mut Ctx, w: &wire::Node<'s>) -> Result<(model::Node, Vec<KeyValue>)> {
    let empty_meta = wire::ObjectMeta::default();
    let meta = w.metadata.as_ref().unwrap_or(&empty_meta);
    let empty_spec = wire::NodeSpec::default();
    let spec = w.spec.as_ref().unwrap_or(&empty_spec);
    let empty_status = wire::NodeStatus::default();
    let status = w.status.as_ref().unwrap_or(&empty_status);
    check_meta(ctx, meta)?;
    let strict = ctx.strict;
    let allocatable_set = status.allocatable.as_ref().is_some_and(|a| !a.0.is_empty());
    let allocatable = if allocatable_set {
        if strict {
            // Not used when allocatable is set, but Kubernetes validates it all the same.
            quantity_list(&status.capacity, &|| "status.capacity".to_owned(), true)?;
        }
        milli_list(ctx, &status.allocatable, "status.allocatable", strict)?
    } else {
        milli_list(ctx, &status.capacity, "status.capacity", strict)?
    };
    let ready = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_.as_deref() == Some("Ready"))
        .is_some_and(|c| c.status.as_deref() == Some("True"));
    let node = model::Node {
        name: ctx.intern_opt(&meta.name),
        uid: owned(&meta.uid),
        labels: ctx.pairs(&meta.labels),
        taints: taints(ctx, &spec.taints)?,
        allocatable,
        unschedulable: spec.unschedulable.unwrap_or(false),
        ready,
        creation_ms: time_field(&meta.creation_timestamp, || {
            "metadata.creationTimestamp".into()
        })?
        .unwrap_or(0),
    };
    Ok((node, ctx.annotations(&meta.annotations)))
}

pub(crate) fn namespace<'s>(ctx: &mut Ctx, w: &wire::MetaOnly<'s>) -> Result<model::Namespace> {
    let empty_meta = wire::ObjectMeta::default();
    let meta = w.metadata.as_ref().unwrap_or(&empty_meta);
    check_meta(ctx, meta)?;
    Ok(model::Namespace {
        name: ctx.intern_opt(&meta.name),
        labels: ctx.pairs(&meta.labels),
    })
}

pub(crate) fn pdb<'s>(ctx: &mut Ctx, w: &wire::Pdb<'s>, namespace: &str) -> Result<model::Pdb> {
    let empty_meta = wire::ObjectMeta::default();
    let meta = w.metadata.as_ref().unwrap_or(&empty_meta);
    let empty_spec = wire::PdbSpec::default();
    let spec = w.spec.as_ref().unwrap_or(&empty_spec);
    check_meta(ctx, meta)?;
    if ctx.strict {
        check_budget(spec)?;
    }
    let unhealthy_pod_eviction_policy = match spec.unhealthy_pod_eviction_policy.as_deref() {
        None | Some("") | Some("IfHealthyBudget") => UnhealthyPodEvictionPolicy::IfHealthyBudget,
        Some("AlwaysAllow") => UnhealthyPodEvictionPolicy::AlwaysAllow,
        Some(other) => {
            return Err(FieldError::new(
                "spec.unhealthyPodEvictionPolicy",
                format!("unknown policy {other:?} (expected IfHealthyBudget or AlwaysAllow)"),
            ));
        }
    };
    let status = match &w.status {
        Some(s) => s,
        None => {
            ctx.pdb_without_status.push(super::objects::qualified(
                namespace,
                meta.name.as_deref().unwrap_or(""),
            ));
            &wire::PdbStatus::default()
        }
    };
    Ok(model::Pdb {
        namespace: ctx.builder.intern(namespace),
        name: ctx.intern_opt(&meta.name),
        selector: opt_label_selector(ctx, &spec.selector, "spec.selector")?,
        disruptions_allowed: status.disruptions_allowed.unwrap_or(0),
        current_healthy: status.current_healthy.unwrap_or(0),
        desired_healthy: status.desired_healthy.unwrap_or(0),
        expected_pods: status.expected_pods.unwrap_or(0),
        unhealthy_pod_eviction_policy,
    })
}

/// `minAvailable` and `maxUnavailable`: at most one, each a non-negative integer or a
/// percentage (`ValidatePodDisruptionBudgetSpec`).
fn check_budget(spec: &wire::PdbSpec<'_>) -> Result<()> {
    if spec.min_available.is_some() && spec.max_unavailable.is_some() {
        return Err(FieldError::new(
            "spec",
            "minAvailable and maxUnavailable cannot be both set",
        ));
    }
    for (field, value) in [
        ("spec.minAvailable", &spec.min_available),
        ("spec.maxUnavailable", &spec.max_unavailable),
    ] {
        let value = match value {
            None => continue,
            Some(wire::IntOrStr::Int(n)) => validation::IntOrPercent::Int(*n),
            Some(wire::IntOrStr::Str(s)) => validation::IntOrPercent::Str(s),
            Some(wire::IntOrStr::Other) => validation::IntOrPercent::Other,
        };
        validation::non_negative_int_or_percent(value).map_err(|m| FieldError::new(field, m))?;
    }
    Ok(())
}

pub(crate) fn priority_class<'s>(
    ctx: &mut Ctx,
    w: &wire::PriorityClass<'s>,
) -> Result<model::PriorityClass> {
    let empty_meta = wire::ObjectMeta::default();
    let meta = w.metadata.as_ref().unwrap_or(&empty_meta);
    check_meta(ctx, meta)?;
    Ok(model::PriorityClass {
        name: ctx.intern_opt(&meta.name),
        value: w
            .value
            .ok_or_else(|| FieldError::new("value", "required field is missing"))?,
    })
}

pub(crate) fn pvc<'s>(ctx: &mut Ctx, w: &wire::Pvc<'s>, namespace: &str) -> Result<model::Pvc> {
    let empty_meta = wire::ObjectMeta::default();
    let meta = w.metadata.as_ref().unwrap_or(&empty_meta);
    check_meta(ctx, meta)?;
    Ok(model::Pvc {
        namespace: ctx.builder.intern(namespace),
        name: ctx.intern_opt(&meta.name),
        storage_class: w
            .spec
            .as_ref()
            .and_then(|s| s.storage_class_name.as_ref())
            .map(|s| ctx.intern(s)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps() {
        assert_eq!(parse_time_ms("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            parse_time_ms("2020-03-02T08:00:00Z"),
            Some(1_583_136_000_000)
        );
        assert_eq!(
            parse_time_ms("2099-06-01T12:00:00Z"),
            Some(4_083_998_400_000)
        );
        assert_eq!(parse_time_ms("1975-01-01T00:00:00Z"), Some(157_766_400_000));
        assert_eq!(
            parse_time_ms("2024-02-29T23:59:59Z"),
            Some(1_709_251_199_000)
        );
        // Fractions, offsets and leap days go through the full parser.
        assert_eq!(
            parse_time_ms("2020-03-02T08:00:00.5Z"),
            Some(1_583_136_000_500)
        );
        assert_eq!(
            parse_time_ms("2020-03-02T10:00:00+02:00"),
            Some(1_583_136_000_000)
        );
        assert_eq!(parse_time_ms("1969-12-31T23:59:59.9999Z"), Some(-1));
        for bad in [
            "",
            "yesterday",
            "2023-02-29T00:00:00Z",
            "2020-13-01T00:00:00Z",
            "2020-03-02 08:00:00",
            "2020-03-02T25:00:00Z",
            "2020-03-02",
        ] {
            assert_eq!(parse_time_ms(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn fast_path_agrees_with_the_full_parser() {
        for s in [
            "2000-02-29T12:34:56Z",
            "1999-12-31T23:59:59Z",
            "2100-03-01T00:00:00Z",
            "1600-01-01T00:00:00Z",
        ] {
            let full =
                time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339)
                    .unwrap();
            assert_eq!(
                parse_time_ms(s),
                Some((full.unix_timestamp_nanos() / 1_000_000) as i64),
                "{s}"
            );
        }
    }

    #[test]
    fn fx_hasher_spreads_short_keys() {
        use std::hash::BuildHasher;
        let b = FxBuild::default();
        let h = |s: &str| b.hash_one(s);
        assert_ne!(h("a"), h("b"));
        assert_ne!(h("abcdefgh"), h("abcdefgh\0"));
        assert_ne!(h(""), h("\0"));
    }
}
