//! Field ownership for server-side apply, simplified: for each object written over HTTP, which
//! field managers own each leaf field (objects merge by key, lists and scalars are atomic
//! leaves). As on a real server, an apply (not forced) that would change a leaf another manager
//! owns fails with 409 Conflict; applying the value a leaf already has makes the applier a
//! co-owner; a write that changes a leaf makes its manager the only owner. Not modelled:
//! `metadata.managedFields`, and removing fields a manager stops applying. In-process writes
//! (`FakeApiServer::apply`, bulk loads) take no ownership.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use crate::resources::ResourceType;
use crate::status::ApiError;

/// Leaf path (`.spec.holderIdentity`) → its managers.
pub(crate) type Owners = BTreeMap<String, BTreeSet<String>>;

/// Fields the server owns; never in conflict.
const SERVER_FIELDS: &[&str] = &[
    ".apiVersion",
    ".kind",
    ".metadata.name",
    ".metadata.namespace",
    ".metadata.resourceVersion",
    ".metadata.uid",
    ".metadata.creationTimestamp",
    ".metadata.generation",
    ".metadata.managedFields",
];

fn collect<'a>(value: &'a Value, path: &mut String, out: &mut BTreeMap<String, &'a Value>) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (key, child) in map {
                let len = path.len();
                path.push('.');
                path.push_str(key);
                if !SERVER_FIELDS.contains(&path.as_str()) {
                    collect(child, path, out);
                }
                path.truncate(len);
            }
        }
        _ if !path.is_empty() => {
            out.insert(path.clone(), value);
        }
        _ => {}
    }
}

/// The leaf fields of an object, by path.
pub(crate) fn leaves(value: &Value) -> BTreeMap<String, &Value> {
    let mut out = BTreeMap::new();
    collect(value, &mut String::new(), &mut out);
    out
}

/// The leaves `config` would change that other managers own: (path, owner).
pub(crate) fn conflicts(
    owners: &Owners,
    current: &Value,
    config: &Value,
    manager: &str,
) -> Vec<(String, String)> {
    let current = leaves(current);
    let mut found = Vec::new();
    for (path, wanted) in leaves(config) {
        if current.get(&path).is_none_or(|have| *have == wanted) {
            continue;
        }
        for owner in owners.get(&path).into_iter().flatten() {
            if owner != manager {
                found.push((path.clone(), owner.clone()));
            }
        }
    }
    found
}

/// The 409 a conflicting apply gets.
pub(crate) fn conflict_error(
    rt: &ResourceType,
    name: &str,
    conflicts: &[(String, String)],
) -> ApiError {
    let api_version = rt.api_version();
    let entries: Vec<String> = conflicts
        .iter()
        .map(|(path, owner)| format!("conflict with \"{owner}\" using {api_version}: {path}"))
        .collect();
    let count = if conflicts.len() == 1 {
        "1 conflict".to_string()
    } else {
        format!("{} conflicts", conflicts.len())
    };
    let causes: Vec<Value> = conflicts
        .iter()
        .map(|(path, owner)| {
            json!({
                "reason": "FieldManagerConflict",
                "message": format!("conflict with \"{owner}\" using {api_version}"),
                "field": path,
            })
        })
        .collect();
    ApiError::apply_conflict(
        rt,
        name,
        format!("Apply failed with {count}: {}", entries.join("; ")),
        causes,
    )
}

/// Records a write by `manager` that turned `old` into `new`: a leaf it changed is owned by
/// it alone; a leaf an apply (`applied` is its configuration) set to the value it had gains
/// the applier as co-owner. Leaves that no longer exist lose their owners.
pub(crate) fn record(
    owners: &mut Owners,
    old: Option<&Value>,
    new: &Value,
    manager: &str,
    applied: Option<&Value>,
) {
    let now = leaves(new);
    let before = old.map(leaves).unwrap_or_default();
    owners.retain(|path, _| now.contains_key(path));
    for (path, value) in &now {
        if before.get(path) != Some(value) {
            owners.insert(path.clone(), BTreeSet::from([manager.to_string()]));
        }
    }
    if let Some(config) = applied {
        for path in leaves(config).into_keys().filter(|p| now.contains_key(p)) {
            owners.entry(path).or_default().insert(manager.to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaves_skip_server_fields_and_keep_lists_atomic() {
        let object = json!({"apiVersion": "v1", "kind": "X", "metadata": {"name": "n", "labels": {"a": "1"}},
                            "spec": {"list": [1, 2], "empty": {}}});
        let paths: Vec<String> = leaves(&object).into_keys().collect();
        assert_eq!(paths, [".metadata.labels.a", ".spec.empty", ".spec.list"]);
    }

    #[test]
    fn applies_conflict_only_on_changed_fields_owned_by_others() {
        let mut owners = Owners::new();
        let lease = json!({"spec": {"holderIdentity": "a", "renewTime": "t1"}});
        record(&mut owners, None, &lease, "mgr-a", Some(&lease));
        let same = json!({"spec": {"holderIdentity": "a"}});
        assert!(conflicts(&owners, &lease, &same, "mgr-b").is_empty());
        let steal = json!({"spec": {"holderIdentity": "b", "renewTime": "t2"}});
        assert_eq!(conflicts(&owners, &lease, &steal, "mgr-b").len(), 2);
        assert!(conflicts(&owners, &lease, &steal, "mgr-a").is_empty());

        // Applying the same value shares ownership: both owners then block a change.
        record(&mut owners, Some(&lease), &lease, "mgr-b", Some(&same));
        assert_eq!(owners[".spec.holderIdentity"].len(), 2);
        let other = json!({"spec": {"holderIdentity": "c"}});
        assert_eq!(
            conflicts(&owners, &lease, &other, "mgr-a"),
            [(".spec.holderIdentity".to_string(), "mgr-b".to_string())]
        );

        // A plain update takes over what it changes; a removed field has no owner.
        let renewed = json!({"spec": {"holderIdentity": "a", "renewTime": "t3"}});
        record(&mut owners, Some(&lease), &renewed, "mgr-c", None);
        assert_eq!(
            owners[".spec.renewTime"],
            BTreeSet::from(["mgr-c".to_string()])
        );
        assert_eq!(owners[".spec.holderIdentity"].len(), 2);
        let released = json!({"spec": {"renewTime": "t3"}});
        record(&mut owners, Some(&renewed), &released, "mgr-a", None);
        assert!(!owners.contains_key(".spec.holderIdentity"));
        assert_eq!(
            conflicts(&owners, &released, &steal, "mgr-b"),
            [(".spec.renewTime".to_string(), "mgr-c".to_string())]
        );
    }
}
