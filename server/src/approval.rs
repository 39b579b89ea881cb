//! Approval: moving a decision from `proposed` to `approved` or `rejected` — by hand, in bulk,
//! or by a profile's auto-approve rules — and what follows each approval.
//!
//! Owns: [`approve`], [`act_on_matching`] (approve or reject by filter, or preview it),
//! [`reject`], [`auto_approve_run`] and [`after_run`] (auditing what a run superseded), each written
//! once as: store transaction → wake the executor → audit; what a new pod migration starts
//! with (from the executor's knobs), the proposal TTL cut-off, the auto-approve rule format and
//! matching; [`ApprovalError`], which callers act on.
//! Must not: hold SQL (the conditional updates that make concurrent approvals safe are in
//! `store::decisions`) or build HTTP responses (`http::decisions` parses and maps).
//!
//! Auto-approve rules are stored beside a profile (`PUT /api/v1/profiles/{name}/auto-approve`),
//! not inside its DeschedulerPolicy document, which stays exactly what the user sent.

use std::collections::{HashMap, HashSet};

use rebalancer_policy_sdk::k8s::selector::{LabelSelectorSpec, Selector};
use serde::{Deserialize, Serialize};

use crate::audit::{self, action, kind};
use crate::auth::Principal;
use crate::executor::Executor;
use rebalancer_cluster::Clusters;
use rebalancer_store::{
    Approval, BulkAction, BulkOutcome, DecisionFilter, DecisionRecord, DecisionStatus,
    MigrationTemplates, RunRecord, Store, StoreError, now_ms,
};
use serde_json::{Value, json};

/// Prefix of the actor recorded for an auto-approval: `auto-approve:<rule>`.
pub const AUTO_APPROVE_ACTOR: &str = "auto-approve:";

/// One auto-approve rule: a proposal matching every condition given is approved at once.
/// Empty lists (or no selector) match anything; a rule with no condition approves everything.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AutoApproveRule {
    /// Recorded as the approving actor (`auto-approve:<name>`): 1–63 letters, digits, `-`, `_`
    /// or `.`; unique among the profile's rules.
    #[schema(
        example = "batch-balancing",
        min_length = 1,
        max_length = 63,
        pattern = "^[A-Za-z0-9._-]{1,63}$"
    )]
    pub name: String,
    /// Only proposals of these plugins.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schema(example = json!(["LowNodeUtilization"]))]
    pub plugins: Vec<String>,
    /// Only pods in these namespaces.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schema(example = json!(["batch"]))]
    pub namespaces: Vec<String>,
    /// Only pods whose labels match (a Kubernetes label selector).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "label_selector"
    )]
    #[schema(value_type = Option<LabelSelector>, example = json!({"matchLabels": {"tier": "batch"}}))]
    pub pod_selector: Option<LabelSelectorSpec>,
}

/// `metav1.LabelSelector` as the API document shows `podSelector` (read into the SDK's
/// [`LabelSelectorSpec`]; keys, values and operators are checked by [`AutoApproveRules::validate`]).
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[allow(dead_code)] // only describes the document
pub struct LabelSelector {
    /// Labels a pod must have, with these values (label keys and values).
    #[schema(schema_with = match_labels_schema)]
    match_labels: Option<std::collections::BTreeMap<String, String>>,
    /// Requirements a pod's labels must all meet.
    match_expressions: Option<Vec<LabelSelectorRequirement>>,
}

/// A Kubernetes label key (`validate_label_key` of the SDK): an optional DNS subdomain prefix
/// and `/`, then a name of at most 63 alphanumerics, `-`, `_` and `.`, starting and ending
/// with an alphanumeric. The prefix's limit of 253 characters is not in the pattern.
pub(crate) const LABEL_KEY: &str = "^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$";

/// A Kubernetes label value (`validate_label_value` of the SDK): empty, or at most 63
/// alphanumerics, `-`, `_` and `.`, starting and ending with an alphanumeric.
pub(crate) const LABEL_VALUE: &str = "^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$";

/// A label key ([`LABEL_KEY`]).
fn label_key_schema() -> utoipa::openapi::schema::ObjectBuilder {
    use utoipa::openapi::schema::{ObjectBuilder, Type};
    ObjectBuilder::new()
        .schema_type(Type::String)
        .max_length(Some(317))
        .pattern(Some(LABEL_KEY))
        .examples(["tier"])
}

/// `matchLabels`: label keys to label values, or null.
fn match_labels_schema() -> utoipa::openapi::Schema {
    use utoipa::openapi::schema::{ObjectBuilder, SchemaType, Type};
    ObjectBuilder::new()
        .schema_type(SchemaType::Array(vec![Type::Object, Type::Null]))
        .property_names(Some(label_key_schema()))
        .additional_properties(Some(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .max_length(Some(63))
                .pattern(Some(LABEL_VALUE)),
        ))
        .into()
}

/// One `matchExpressions` entry.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)] // only describes the document
pub struct LabelSelectorRequirement {
    /// A label key: an optional DNS subdomain prefix (at most 253 characters) and `/`, then a
    /// name of at most 63 alphanumerics, `-`, `_` and `.`, starting and ending with an
    /// alphanumeric.
    #[schema(schema_with = label_key_schema)]
    key: String,
    /// `In`, `NotIn`, `Exists` or `DoesNotExist`.
    #[schema(example = "In")]
    operator: String,
    /// Required for `In` and `NotIn`, forbidden for `Exists` and `DoesNotExist`.
    values: Option<Vec<String>>,
}

/// A `podSelector`: null, or an object whose `matchExpressions` entries are objects (the SDK's
/// derived `Deserialize` would also take arrays in their place).
fn label_selector<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<LabelSelectorSpec>, D::Error> {
    let Some(value) = Option::<Value>::deserialize(deserializer)? else {
        return Ok(None);
    };
    let entries_are_objects = match value.get("matchExpressions") {
        Some(Value::Array(entries)) => entries.iter().all(Value::is_object),
        _ => true,
    };
    if !value.is_object() || !entries_are_objects {
        return Err(serde::de::Error::custom(
            "podSelector must be a label selector object: {\"matchLabels\": {…}, \
             \"matchExpressions\": [{\"key\", \"operator\", \"values\"}]}",
        ));
    }
    serde_json::from_value(value)
        .map(Some)
        .map_err(serde::de::Error::custom)
}

/// The rules of one profile.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AutoApproveRules {
    /// Checked in order; the first match approves.
    #[serde(deserialize_with = "crate::strict_json::objects")]
    pub rules: Vec<AutoApproveRule>,
}

/// A rule that cannot work.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct RuleError {
    /// e.g. `rules[1].podSelector`.
    pub field: String,
    pub message: String,
}

impl AutoApproveRules {
    /// Every problem, or nothing.
    pub fn validate(&self) -> Vec<RuleError> {
        let mut errors = Vec::new();
        let mut names = std::collections::BTreeSet::new();
        for (i, rule) in self.rules.iter().enumerate() {
            let field = |f: &str| format!("rules[{i}].{f}");
            // The document's pattern for `name` says the same.
            let valid_name = !rule.name.is_empty()
                && rule.name.len() <= 63
                && rule
                    .name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
            if !valid_name {
                errors.push(RuleError {
                    field: field("name"),
                    message: format!(
                        "{:?} is not a rule name: 1 to 63 letters, digits, '-', '_' or '.'",
                        rule.name
                    ),
                });
            } else if !names.insert(rule.name.as_str()) {
                errors.push(RuleError {
                    field: field("name"),
                    message: format!("{:?} is used by an earlier rule", rule.name),
                });
            }
            if let Some(selector) = &rule.pod_selector
                && let Err(message) = selector.to_selector()
            {
                errors.push(RuleError {
                    field: field("podSelector"),
                    message,
                });
            }
        }
        errors
    }
}

/// A rule ready to match.
struct Compiled<'a> {
    rule: &'a AutoApproveRule,
    selector: Option<Selector>,
}

impl Compiled<'_> {
    fn matches(&self, plugin: &str, namespace: &str, labels: &[(&str, &str)]) -> bool {
        (self.rule.plugins.is_empty() || self.rule.plugins.iter().any(|p| p == plugin))
            && (self.rule.namespaces.is_empty()
                || self.rule.namespaces.iter().any(|n| n == namespace))
            && self.selector.as_ref().is_none_or(|s| {
                s.matches_with(|key| labels.iter().find(|(k, _)| *k == key).map(|(_, v)| *v))
            })
    }
}

/// What approving needs. Cheap to clone.
#[derive(Clone)]
pub struct Deps {
    pub store: Store,
    /// Pod labels, for the rules' pod selectors.
    pub clusters: Clusters,
    /// Woken after every approval; its knobs give a new pod migration's mode and TTL.
    pub executor: Executor,
    /// Proposals older than this are expired instead of approved.
    pub proposal_ttl_ms: i64,
}

impl Deps {
    /// Proposals created at or before this instant are past the proposal TTL.
    pub fn expire_before(&self) -> i64 {
        now_ms() - self.proposal_ttl_ms
    }

    /// How new pod migrations start: mode and TTL from the knobs in force in their cluster.
    fn templates(&self) -> MigrationTemplates {
        self.executor.templates()
    }
}

/// Why a decision was not approved or rejected.
#[derive(Debug, thiserror::Error)]
pub enum ApprovalError {
    /// It is no longer `proposed` (nothing changed, except that a proposal past its TTL was
    /// marked `expired` on the way). `verb` is what was asked: `approved` or `rejected`.
    #[error("{}", not_proposed_message(decision, verb))]
    NotProposed {
        decision: Box<DecisionRecord>,
        verb: &'static str,
    },
    /// A newer proposal for the same pod (same profile and cluster) superseded it: act on
    /// that one instead. Checked before anything else.
    #[error(
        "decision {} was superseded by decision {}: run {} proposed pod {}/{} again; only the \
         newest proposal of a pod can be {verb}",
        .decision.id, .newer, .decision.run_id, .decision.pod_namespace, .decision.pod_name
    )]
    Superseded {
        decision: Box<DecisionRecord>,
        newer: i64,
        verb: &'static str,
    },
    /// Proposed by a dry run: can never be approved.
    #[error(
        "decision {} was proposed by dry run {}: decisions of dry runs can never be approved; \
         start a run without dryRun",
        .0.id,
        .0.run_id
    )]
    DryRun(Box<DecisionRecord>),
    /// No such decision (`StoreError::NotFound`), or the database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The error for a decision that was not `proposed` when asked to be `verb` (`approved` or
/// `rejected`): superseded ones name the newer decision.
fn not_proposed(decision: DecisionRecord, verb: &'static str) -> ApprovalError {
    match (decision.status, decision.superseded_by) {
        (DecisionStatus::Superseded, Some(newer)) => ApprovalError::Superseded {
            decision: Box::new(decision),
            newer,
            verb,
        },
        _ => ApprovalError::NotProposed {
            decision: Box::new(decision),
            verb,
        },
    }
}

/// Refuse a superseded decision before anything is tried on it.
async fn refuse_superseded(deps: &Deps, id: i64, verb: &'static str) -> Result<(), ApprovalError> {
    let decision = deps.store.get_decision(id).await?;
    if decision.status == DecisionStatus::Superseded {
        return Err(not_proposed(decision, verb));
    }
    Ok(())
}

fn not_proposed_message(d: &DecisionRecord, verb: &str) -> String {
    let mut message = format!(
        "decision {} is {}, not proposed: only proposed decisions can be {verb}",
        d.id,
        d.status.as_str()
    );
    if let Some(reason) = &d.status_reason {
        message.push_str(&format!(" ({reason})"));
    }
    message
}

/// A decision just approved.
#[derive(Debug)]
pub struct Approved {
    /// The decision, now `approved`.
    pub decision: DecisionRecord,
    /// The pod migration created with it.
    pub pod_migration: i64,
}

/// Approve one proposed decision: its pod migration is created at once (exactly one, however
/// many approvals race); a proposal past the TTL is marked `expired` instead.
pub async fn approve(
    deps: &Deps,
    id: i64,
    actor: &Principal,
    comment: Option<String>,
) -> Result<Approved, ApprovalError> {
    refuse_superseded(deps, id, "approved").await?;
    let templates = deps.templates();
    let outcome = deps
        .store
        .approve_decision(
            id,
            &actor.name,
            comment.as_deref(),
            deps.expire_before(),
            &templates,
        )
        .await?;
    match outcome {
        Approval::Approved {
            decision,
            pod_migration,
        } => {
            tracing::info!(decision = id, pod_migration, actor = %actor.name, "decision approved");
            after_approval(
                deps,
                actor,
                [(
                    id,
                    json!({"comment": comment, "podMigration": pod_migration}),
                )],
            )
            .await;
            Ok(Approved {
                decision,
                pod_migration,
            })
        }
        Approval::NotProposed(decision) => Err(not_proposed(decision, "approved")),
        Approval::DryRun(decision) => Err(ApprovalError::DryRun(Box::new(decision))),
    }
}

/// What a bulk call does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BulkVerb {
    Approve,
    Reject,
}

/// Approve or reject every proposed decision of a non-dry run matching `filter` (within the
/// proposal TTL; older ones are marked expired), in one transaction; each approval gets its
/// pod migration. With `preview`, nothing changes: the answer says what would happen.
pub async fn act_on_matching(
    deps: &Deps,
    filter: &DecisionFilter,
    verb: BulkVerb,
    actor: &Principal,
    comment: Option<String>,
    preview: bool,
) -> Result<BulkOutcome, ApprovalError> {
    let templates = deps.templates();
    let action = match verb {
        BulkVerb::Approve => BulkAction::Approve(&templates),
        BulkVerb::Reject => BulkAction::Reject,
    };
    let outcome = deps
        .store
        .act_on_matching(
            filter,
            action,
            &actor.name,
            comment.as_deref(),
            deps.expire_before(),
            preview,
        )
        .await?;
    if preview {
        return Ok(outcome);
    }
    match verb {
        BulkVerb::Approve => {
            after_approval(
                deps,
                actor,
                outcome
                    .acted
                    .iter()
                    .map(|&id| (id, json!({"comment": comment, "bulk": true}))),
            )
            .await
        }
        BulkVerb::Reject => {
            audit::record_many(
                &deps.store,
                actor,
                action::DECISION_REJECT,
                kind::DECISION,
                outcome
                    .acted
                    .iter()
                    .map(|id| {
                        (
                            id.to_string(),
                            Some(json!({"comment": comment, "bulk": true})),
                        )
                    })
                    .collect(),
            )
            .await
        }
    }
    Ok(outcome)
}

/// What follows a run that recorded its proposals: one audit entry on the run saying how many
/// earlier open proposals they superseded (each decision's history names its successor).
pub async fn after_run(store: &Store, run: &RunRecord, superseded: &[i64]) {
    if superseded.is_empty() {
        return;
    }
    tracing::info!(
        run_id = run.id,
        superseded = superseded.len(),
        "superseded earlier proposals"
    );
    audit::record(
        store,
        &Principal::system(rebalancer_store::SUPERSEDE_ACTOR),
        action::DECISION_SUPERSEDE,
        kind::RUN,
        &run.id.to_string(),
        Some(json!({
            "superseded": superseded.len(),
            "profile": run.profile,
            "cluster": run.cluster,
            // The first ones, so the entry stays small; every decision's history has its own.
            "decisions": &superseded[..superseded.len().min(100)],
        })),
    )
    .await;
}

/// Reject one proposed decision.
pub async fn reject(
    deps: &Deps,
    id: i64,
    actor: &Principal,
    comment: Option<String>,
) -> Result<DecisionRecord, ApprovalError> {
    refuse_superseded(deps, id, "rejected").await?;
    let decision = deps
        .store
        .reject_decision(id, &actor.name, comment.as_deref(), deps.expire_before())
        .await?
        .map_err(|decision| not_proposed(decision, "rejected"))?;
    audit::record(
        &deps.store,
        actor,
        action::DECISION_REJECT,
        kind::DECISION,
        &id.to_string(),
        Some(json!({"comment": comment})),
    )
    .await;
    Ok(decision)
}

/// What follows every committed approval: wake the executor once, then write one audit entry
/// per approved decision (`(decision id, detail)`). Nothing when nothing was approved.
async fn after_approval(
    deps: &Deps,
    actor: &Principal,
    approved: impl IntoIterator<Item = (i64, Value)>,
) {
    let approved: Vec<(i64, Value)> = approved.into_iter().collect();
    if approved.is_empty() {
        return;
    }
    deps.executor.wake();
    audit::record_many(
        &deps.store,
        actor,
        action::DECISION_APPROVE,
        kind::DECISION,
        approved
            .into_iter()
            .map(|(decision, detail)| (decision.to_string(), Some(detail)))
            .collect(),
    )
    .await;
}

/// The stored rules of a profile (none when never set).
pub async fn rules_of(store: &Store, profile: &str) -> Result<AutoApproveRules, StoreError> {
    match store.auto_approve_rules(profile).await? {
        Some((json, _)) => serde_json::from_value(json)
            .map_err(|e| StoreError::corrupt(format!("auto-approve rules of {profile}"), e)),
        None => Ok(AutoApproveRules::default()),
    }
}

/// Apply the profile's auto-approve rules to the proposals a run just stored. A dry run's
/// decisions are never approved. Returns how many were approved.
pub async fn auto_approve_run(deps: &Deps, run: &RunRecord) -> Result<usize, StoreError> {
    if run.dry_run {
        return Ok(0);
    }
    let rules = rules_of(&deps.store, &run.profile).await?;
    if rules.rules.is_empty() {
        return Ok(0);
    }
    // Rules are validated when stored; one whose selector no longer compiles is skipped
    // (matching nothing), never treated as matching everything.
    let compiled: Vec<Compiled<'_>> = rules
        .rules
        .iter()
        .filter_map(|rule| match &rule.pod_selector {
            None => Some(Compiled {
                rule,
                selector: None,
            }),
            Some(spec) => spec.to_selector().ok().map(|selector| Compiled {
                rule,
                selector: Some(selector),
            }),
        })
        .collect();
    let decisions = deps.store.proposed_decisions_of_run(run.id).await?;
    let mut labels: HashMap<String, Vec<(String, String)>> = HashMap::new();
    if compiled.iter().any(|c| c.selector.is_some())
        && let Some(snapshot) = deps.clusters.get(&run.cluster)
    {
        let wanted: HashSet<&str> = decisions.iter().map(|d| d.pod_uid.as_str()).collect();
        for pod in snapshot.cluster().pods() {
            if wanted.contains(pod.uid()) {
                labels.insert(
                    pod.uid().to_string(),
                    pod.labels()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                );
            }
        }
    }
    let mut approvals = Vec::new();
    for d in &decisions {
        let pod_labels: Vec<(&str, &str)> = labels
            .get(&d.pod_uid)
            .map(|l| l.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect())
            .unwrap_or_default();
        if let Some(c) = compiled
            .iter()
            .find(|c| c.matches(&d.plugin, &d.pod_namespace, &pod_labels))
        {
            approvals.push((d.id, format!("{AUTO_APPROVE_ACTOR}{}", c.rule.name)));
        }
    }
    let templates = deps.templates();
    let approved = deps
        .store
        .approve_each(&approvals, deps.expire_before(), &templates)
        .await?;
    if !approved.is_empty() {
        tracing::info!(
            run_id = run.id,
            approved = approved.len(),
            "auto-approved proposals"
        );
    }
    let actor = Principal::system("auto-approve");
    after_approval(
        deps,
        &actor,
        approved.iter().map(|&(decision, migration)| {
            let rule = approvals
                .iter()
                .find(|(id, _)| *id == decision)
                .map(|(_, a)| a.clone())
                .unwrap_or_default();
            (decision, json!({"rule": rule, "podMigration": migration}))
        }),
    )
    .await;
    Ok(approved.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(json: serde_json::Value) -> AutoApproveRule {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn rules_match_on_every_condition() {
        let r = rule(serde_json::json!({
            "name": "batch",
            "plugins": ["LowNodeUtilization"],
            "namespaces": ["batch", "jobs"],
            "podSelector": {"matchLabels": {"tier": "batch"},
                            "matchExpressions": [{"key": "pinned", "operator": "DoesNotExist"}]}
        }));
        let c = Compiled {
            selector: Some(r.pod_selector.as_ref().unwrap().to_selector().unwrap()),
            rule: &r,
        };
        let batch = [("tier", "batch")];
        // (plugin, namespace, labels, expected)
        type Case<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)], bool);
        let cases: &[Case<'_>] = &[
            ("LowNodeUtilization", "batch", &batch, true),
            ("LowNodeUtilization", "jobs", &batch, true),
            ("PodLifeTime", "batch", &batch, false),
            ("LowNodeUtilization", "shop", &batch, false),
            ("LowNodeUtilization", "batch", &[("tier", "web")], false),
            (
                "LowNodeUtilization",
                "batch",
                &[("tier", "batch"), ("pinned", "yes")],
                false,
            ),
            ("LowNodeUtilization", "batch", &[], false),
        ];
        for (plugin, namespace, labels, expected) in cases {
            assert_eq!(
                c.matches(plugin, namespace, labels),
                *expected,
                "{plugin} {namespace} {labels:?}"
            );
        }
        let any = rule(serde_json::json!({"name": "all"}));
        let c = Compiled {
            rule: &any,
            selector: None,
        };
        assert!(c.matches("X", "y", &[]));
    }

    #[test]
    fn rules_are_validated() {
        let rules: AutoApproveRules = serde_json::from_value(serde_json::json!({"rules": [
            {"name": "ok"},
            {"name": "ok"},
            {"name": "has space"},
            {"name": "bad-selector", "podSelector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}}
        ]}))
        .unwrap();
        let errors = rules.validate();
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            ["rules[1].name", "rules[2].name", "rules[3].podSelector"],
            "{errors:?}"
        );
        assert!(
            serde_json::from_value::<AutoApproveRules>(
                serde_json::json!({"rules": [{"name": "x", "plugin": "typo"}]})
            )
            .is_err()
        );
    }
}
