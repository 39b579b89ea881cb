//! Authentication by bearer token and authorization by Kubernetes RBAC, for the service
//! accounts a test registers from an RBAC manifest (`FakeApiServer::add_service_account`).
//!
//! Owns: parsing a manifest's ClusterRoles, Roles, ClusterRoleBindings and RoleBindings into
//! the grants of one service account; the request attributes the real server authorizes
//! (verb, API group, resource, subresource, namespace, name); the rule matching of the real
//! RBAC authorizer (`*` in verbs, groups and resources, `*/subresource`, resourceNames; a
//! Role's or RoleBinding's rules only in its namespace); and the real 401 and 403 answers.
//! Non-resource URLs of discovery (`/api`, `/apis`, `/version`, `/openapi`, health) are allowed
//! for every authenticated user, as the built-in `system:discovery` and
//! `system:public-info-viewer` roles grant.
//!
//! Must not: know any role the manifest does not define (no built-in roles but discovery, no
//! aggregated ClusterRoles), nor authorize requests without a token or with `fake-token`
//! (cluster-admin, see [`Caller`]).

use std::collections::HashMap;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;

use crate::status::ApiError;

/// The token of the unrestricted user of `FakeApiServer::kubeconfig`.
pub(crate) const ADMIN_TOKEN: &str = "fake-token";

/// One rule of a role.
#[derive(Debug, Clone, PartialEq)]
struct Rule {
    verbs: Vec<String>,
    groups: Vec<String>,
    resources: Vec<String>,
    names: Vec<String>,
}

/// Rules bound to the service account: cluster-wide (a ClusterRoleBinding) or in one namespace
/// (a RoleBinding).
#[derive(Debug, Clone, PartialEq)]
struct Grant {
    namespace: Option<String>,
    rules: Vec<Rule>,
}

/// A service account known by its token.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Principal {
    /// `system:serviceaccount:<namespace>:<name>`.
    pub user: String,
    grants: Vec<Grant>,
}

/// Who makes a request.
#[derive(Debug, Clone)]
pub(crate) enum Caller {
    /// No token, or `fake-token`: everything is allowed (the fake's historic behaviour; a real
    /// server would treat a request without a token as `system:anonymous`).
    Admin,
    /// A registered service account, authorized by its RBAC grants.
    Account(Arc<Principal>),
    /// A token nobody registered: 401 for every request.
    Unknown,
}

/// What RBAC authorizes in a resource request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Attributes<'a> {
    pub verb: &'a str,
    pub group: &'a str,
    pub resource: &'a str,
    pub subresource: &'a str,
    /// `""` for a cluster-scoped request.
    pub namespace: &'a str,
    /// `""` when the request names no object.
    pub name: &'a str,
}

fn matches_any(list: &[String], value: &str) -> bool {
    list.iter().any(|item| item == "*" || item == value)
}

impl Rule {
    /// The real `RuleAllows` for a resource request.
    fn allows(&self, a: &Attributes) -> bool {
        let combined = if a.subresource.is_empty() {
            a.resource.to_string()
        } else {
            format!("{}/{}", a.resource, a.subresource)
        };
        let resource = self.resources.iter().any(|r| {
            r == "*"
                || *r == combined
                || (!a.subresource.is_empty() && r.strip_prefix("*/") == Some(a.subresource))
        });
        matches_any(&self.verbs, a.verb)
            && matches_any(&self.groups, a.group)
            && resource
            && (self.names.is_empty() || self.names.iter().any(|n| n == a.name))
    }
}

impl Principal {
    pub(crate) fn allows(&self, a: &Attributes) -> bool {
        self.grants.iter().any(|grant| {
            grant
                .namespace
                .as_deref()
                .is_none_or(|ns| !a.namespace.is_empty() && ns == a.namespace)
                && grant.rules.iter().any(|rule| rule.allows(a))
        })
    }
}

/// The real server's 403 for a resource request RBAC denies.
pub(crate) fn forbidden(user: &str, a: &Attributes) -> ApiError {
    let resource = if a.subresource.is_empty() {
        a.resource.to_string()
    } else {
        format!("{}/{}", a.resource, a.subresource)
    };
    let scope = if a.namespace.is_empty() {
        "at the cluster scope".to_string()
    } else {
        format!("in the namespace \"{}\"", a.namespace)
    };
    let why = format!(
        "User \"{user}\" cannot {} resource \"{resource}\" in API group \"{}\" {scope}",
        a.verb, a.group
    );
    let qualified = if a.group.is_empty() {
        a.resource.to_string()
    } else {
        format!("{}.{}", a.resource, a.group)
    };
    let message = if a.name.is_empty() {
        format!("{qualified} is forbidden: {why}")
    } else {
        format!("{qualified} \"{}\" is forbidden: {why}", a.name)
    };
    ApiError::forbidden(a.group, a.resource, a.name, message)
}

/// The real server's 403 for a non-resource URL no role grants.
pub(crate) fn forbidden_path(user: &str, verb: &str, path: &str) -> ApiError {
    ApiError::forbidden(
        "",
        "",
        "",
        format!("forbidden: User \"{user}\" cannot {verb} path \"{path}\""),
    )
}

/// Whether `system:discovery` / `system:public-info-viewer` allow a `get` of this path.
pub(crate) fn discovery_path(path: &str) -> bool {
    let path = path.trim_end_matches('/');
    ["/api", "/apis", "/openapi"]
        .iter()
        .any(|p| path == *p || path.starts_with(&format!("{p}/")))
        || matches!(path, "/version" | "/healthz" | "/livez" | "/readyz")
}

/// The name a list or watch requires through `fieldSelector=metadata.name=x`, which the real
/// server's request info takes as the request's name (so `resourceNames` can allow it).
pub(crate) fn selector_name(field_selector: &str) -> Option<&str> {
    field_selector.split(',').find_map(|part| {
        let part = part.trim();
        part.strip_prefix("metadata.name==")
            .or_else(|| part.strip_prefix("metadata.name="))
            .map(str::trim)
            .filter(|n| !n.is_empty())
    })
}

#[derive(Debug, Deserialize)]
struct RawRule {
    #[serde(default)]
    verbs: Vec<String>,
    #[serde(rename = "apiGroups", default)]
    groups: Vec<String>,
    #[serde(default)]
    resources: Vec<String>,
    #[serde(rename = "resourceNames", default)]
    names: Vec<String>,
    #[serde(rename = "nonResourceURLs", default)]
    non_resource_urls: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct RoleRef {
    kind: String,
    name: String,
}

#[derive(Debug, Deserialize)]
struct Subject {
    kind: String,
    name: String,
    #[serde(default)]
    namespace: Option<String>,
}

fn meta(doc: &Value, key: &str) -> String {
    doc.pointer(&format!("/metadata/{key}"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

/// Where a document is, for error messages: `ClusterRole rebalancer` or
/// `RoleBinding rebalancer/leases`.
fn label(doc: &Value) -> String {
    let kind = doc.get("kind").and_then(Value::as_str).unwrap_or("?");
    match meta(doc, "namespace").as_str() {
        "" => format!("{kind} {}", meta(doc, "name")),
        ns => format!("{kind} {ns}/{}", meta(doc, "name")),
    }
}

fn rules_of(doc: &Value) -> Result<Vec<Rule>, String> {
    let raw: Vec<RawRule> = match doc.get("rules") {
        None | Some(Value::Null) => Vec::new(),
        Some(rules) => serde_json::from_value(rules.clone())
            .map_err(|e| format!("{}: rules: {e}", label(doc)))?,
    };
    let mut rules = Vec::new();
    for (i, rule) in raw.into_iter().enumerate() {
        if rule.verbs.is_empty() {
            return Err(format!(
                "{}: rules[{i}].verbs: Required value: verbs must contain at least one value",
                label(doc)
            ));
        }
        if !rule.non_resource_urls.is_empty() {
            // Non-resource URLs beyond discovery are not served; such rules grant nothing here.
            continue;
        }
        if rule.resources.is_empty() || rule.groups.is_empty() {
            return Err(format!(
                "{}: rules[{i}]: resource rules need apiGroups and resources",
                label(doc)
            ));
        }
        rules.push(Rule {
            verbs: rule.verbs,
            groups: rule.groups,
            resources: rule.resources,
            names: rule.names,
        });
    }
    Ok(rules)
}

/// The documents of a YAML stream, `List`s flattened, empty documents skipped.
fn documents(yaml: &str) -> Result<Vec<Value>, String> {
    let mut out = Vec::new();
    for (i, doc) in serde_yaml::Deserializer::from_str(yaml).enumerate() {
        let value = Value::deserialize(doc)
            .map_err(|e| format!("document {}: not valid YAML: {e}", i + 1))?;
        match value {
            Value::Null => {}
            Value::Object(_) if value.get("kind").and_then(Value::as_str) == Some("List") => {
                out.extend(value["items"].as_array().cloned().unwrap_or_default());
            }
            Value::Object(_) => out.push(value),
            _ => return Err(format!("document {}: not a YAML mapping", i + 1)),
        }
    }
    Ok(out)
}

/// The grants of service account `namespace/name` in an RBAC manifest: every binding whose
/// subjects include it, with the rules of the role it refers to. A binding of the account to a
/// role the manifest does not define is an error (the fake knows no other roles).
pub(crate) fn principal(namespace: &str, name: &str, yaml: &str) -> Result<Principal, String> {
    let user = format!("system:serviceaccount:{namespace}:{name}");
    let docs = documents(yaml)?;
    let mut cluster_roles: HashMap<String, Vec<Rule>> = HashMap::new();
    let mut roles: HashMap<(String, String), Vec<Rule>> = HashMap::new();
    for doc in &docs {
        match doc.get("kind").and_then(Value::as_str) {
            Some("ClusterRole") => {
                cluster_roles.insert(meta(doc, "name"), rules_of(doc)?);
            }
            Some("Role") => {
                let ns = meta(doc, "namespace");
                if ns.is_empty() {
                    return Err(format!("{}: metadata.namespace is required", label(doc)));
                }
                roles.insert((ns, meta(doc, "name")), rules_of(doc)?);
            }
            _ => {}
        }
    }
    let mut grants = Vec::new();
    for doc in &docs {
        let kind = doc.get("kind").and_then(Value::as_str).unwrap_or("");
        let binding_ns = match kind {
            "ClusterRoleBinding" => None,
            "RoleBinding" => match meta(doc, "namespace") {
                ns if ns.is_empty() => {
                    return Err(format!("{}: metadata.namespace is required", label(doc)));
                }
                ns => Some(ns),
            },
            _ => continue,
        };
        let subjects: Vec<Subject> = serde_json::from_value(
            doc.get("subjects").cloned().unwrap_or(Value::Null),
        )
        .or_else(|e| match doc.get("subjects") {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(_) => Err(format!("{}: subjects: {e}", label(doc))),
        })?;
        let applies = subjects.iter().any(|s| match s.kind.as_str() {
            "ServiceAccount" => {
                let sa_ns = s
                    .namespace
                    .as_deref()
                    .filter(|n| !n.is_empty())
                    .or(binding_ns.as_deref());
                s.name == name && sa_ns == Some(namespace)
            }
            "User" => s.name == user,
            "Group" => {
                s.name == "system:authenticated"
                    || s.name == "system:serviceaccounts"
                    || s.name == format!("system:serviceaccounts:{namespace}")
            }
            _ => false,
        });
        if !applies {
            continue;
        }
        let role_ref: RoleRef =
            serde_json::from_value(doc.get("roleRef").cloned().unwrap_or(Value::Null))
                .map_err(|e| format!("{}: roleRef: {e}", label(doc)))?;
        let rules = match (role_ref.kind.as_str(), &binding_ns) {
            ("ClusterRole", _) => cluster_roles.get(&role_ref.name),
            ("Role", Some(ns)) => roles.get(&(ns.clone(), role_ref.name.clone())),
            (other, _) => {
                return Err(format!(
                    "{}: roleRef.kind {other:?} is not allowed here",
                    label(doc)
                ));
            }
        }
        .ok_or_else(|| {
            format!(
                "{}: roleRef {} {:?} is not defined in the manifest (kube-fake knows only the manifest's roles)",
                label(doc),
                role_ref.kind,
                role_ref.name
            )
        })?;
        grants.push(Grant {
            namespace: binding_ns,
            rules: rules.clone(),
        });
    }
    Ok(Principal { user, grants })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MANIFEST: &str = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: reader}
rules:
  - apiGroups: [""]
    resources: ["pods", "pods/eviction"]
    verbs: ["get", "list"]
  - apiGroups: ["*"]
    resources: ["*/status"]
    verbs: ["patch"]
  - apiGroups: ["coordination.k8s.io"]
    resources: ["leases"]
    resourceNames: ["mine"]
    verbs: ["*"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: all, namespace: team}
rules:
  - apiGroups: ["*"]
    resources: ["*"]
    verbs: ["*"]
---
kind: ClusterRoleBinding
metadata: {name: reader}
roleRef: {kind: ClusterRole, name: reader}
subjects: [{kind: ServiceAccount, name: sa, namespace: ops}]
---
kind: RoleBinding
metadata: {name: all, namespace: team}
roleRef: {kind: Role, name: all}
subjects: [{kind: ServiceAccount, name: sa, namespace: ops}]
---
kind: RoleBinding
metadata: {name: other, namespace: team}
roleRef: {kind: ClusterRole, name: missing}
subjects: [{kind: ServiceAccount, name: someone-else, namespace: ops}]
"#;

    fn attrs<'a>(verb: &'a str, group: &'a str, resource: &'a str, ns: &'a str) -> Attributes<'a> {
        Attributes {
            verb,
            group,
            resource,
            subresource: "",
            namespace: ns,
            name: "",
        }
    }

    #[test]
    fn rules_match_like_the_rbac_authorizer() {
        let p = principal("ops", "sa", MANIFEST).unwrap();
        assert_eq!(p.user, "system:serviceaccount:ops:sa");
        assert!(p.allows(&attrs("list", "", "pods", "")));
        assert!(p.allows(&attrs("get", "", "pods", "shop")));
        assert!(!p.allows(&attrs("watch", "", "pods", "shop")));
        let eviction = Attributes {
            subresource: "eviction",
            ..attrs("get", "", "pods", "shop")
        };
        assert!(p.allows(&eviction));
        let status = Attributes {
            subresource: "status",
            ..attrs("patch", "apps", "deployments", "shop")
        };
        assert!(p.allows(&status));
        assert!(!p.allows(&attrs("patch", "apps", "deployments", "shop")));
        // resourceNames: only the named lease, never a list or create without a name.
        let lease = |name| Attributes {
            name,
            ..attrs("update", "coordination.k8s.io", "leases", "x")
        };
        assert!(p.allows(&lease("mine")));
        assert!(!p.allows(&lease("theirs")));
        assert!(!p.allows(&lease("")));
        // The Role applies in its namespace only, and never cluster-wide.
        assert!(p.allows(&attrs("delete", "apps", "deployments", "team")));
        assert!(!p.allows(&attrs("delete", "apps", "deployments", "other")));
        assert!(!p.allows(&attrs("list", "apps", "deployments", "")));
        // Not bound to another account.
        let other = principal("ops", "nobody", MANIFEST).unwrap();
        assert!(!other.allows(&attrs("list", "", "pods", "")));
    }

    #[test]
    fn manifest_errors_are_located() {
        let err = principal("ops", "someone-else", MANIFEST).unwrap_err();
        assert!(
            err.starts_with("RoleBinding team/other: roleRef ClusterRole \"missing\""),
            "{err}"
        );
        let err = principal(
            "ops",
            "sa",
            "kind: ClusterRole\nmetadata: {name: r}\nrules: [{apiGroups: [''], resources: [pods]}]\n",
        )
        .unwrap_err();
        assert_eq!(
            err,
            "ClusterRole r: rules[0].verbs: Required value: verbs must contain at least one value"
        );
        assert!(principal("ops", "sa", "- not a mapping").is_err());
    }

    #[test]
    fn forbidden_messages_are_the_real_ones() {
        let user = "system:serviceaccount:rebalancer:rebalancer";
        let get = Attributes {
            name: "web-1",
            ..attrs("get", "", "pods", "shop")
        };
        assert_eq!(
            forbidden(user, &get).message,
            r#"pods "web-1" is forbidden: User "system:serviceaccount:rebalancer:rebalancer" cannot get resource "pods" in API group "" in the namespace "shop""#
        );
        let evict = Attributes {
            subresource: "eviction",
            name: "web-1",
            ..attrs("create", "", "pods", "shop")
        };
        let denied = forbidden(user, &evict);
        assert_eq!(
            denied.message,
            r#"pods "web-1" is forbidden: User "system:serviceaccount:rebalancer:rebalancer" cannot create resource "pods/eviction" in API group "" in the namespace "shop""#
        );
        assert_eq!(
            denied.details,
            Some(serde_json::json!({"kind": "pods", "name": "web-1"}))
        );
        let list = attrs("list", "coordination.k8s.io", "leases", "");
        assert_eq!(
            forbidden(user, &list).message,
            r#"leases.coordination.k8s.io is forbidden: User "system:serviceaccount:rebalancer:rebalancer" cannot list resource "leases" in API group "coordination.k8s.io" at the cluster scope"#
        );
        assert_eq!(selector_name("spec.nodeName=a,metadata.name=x"), Some("x"));
        assert_eq!(selector_name("metadata.name!=x"), None);
        assert!(discovery_path("/apis/policy/v1"));
        assert!(discovery_path("/version"));
        assert!(!discovery_path("/metrics"));
    }
}
