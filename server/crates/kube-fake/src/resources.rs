//! The resource types the fake serves: one static table saying, for each resource, its group,
//! version, plural, kind, scope, verbs and subresources, and the discovery documents
//! (`/version`, `/api`, `/apis`, `/apis/{group}`, `/api[s]/{group}/{version}`, both the classic
//! form and aggregated discovery `apidiscovery.k8s.io/v2`) built from it.

use serde_json::{Value, json};

use crate::OptionalGroup;

/// Every verb a full read-write resource supports, as discovery lists them.
const ALL_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];
/// Namespaces have no `deletecollection`, as on a real server.
const NAMESPACE_VERBS: &[&str] = &[
    "create", "delete", "get", "list", "patch", "update", "watch",
];
/// metrics-server serves only reads, and no watch.
const METRICS_VERBS: &[&str] = &["get", "list"];
/// Verbs of a `status` subresource.
pub(crate) const STATUS_VERBS: &[&str] = &["get", "patch", "update"];

/// Field selector keys every resource supports.
const META_FIELDS: &[&str] = &["metadata.name", "metadata.namespace"];
/// Field selector keys of pods (the real field label conversion; `spec.host` is accepted as
/// `spec.nodeName`).
const POD_FIELDS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.podIPs",
    "status.nominatedNodeName",
];
/// Field selector keys of nodes: no `metadata.namespace`, as on a real server.
const NODE_FIELDS: &[&str] = &["metadata.name", "spec.unschedulable"];
/// Field selector keys of namespaces.
const NAMESPACE_FIELDS: &[&str] = &["metadata.name", "status.phase"];
/// Field selector keys of core v1 events (events.k8s.io/v1 has only [`META_FIELDS`]).
const EVENT_FIELDS: &[&str] = &[
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
    "metadata.namespace",
    "metadata.name",
];

/// One served resource type.
#[derive(Debug)]
pub(crate) struct ResourceType {
    pub group: &'static str,
    pub version: &'static str,
    /// The plural, as in URLs and RBAC rules.
    pub plural: &'static str,
    pub singular: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
    pub verbs: &'static [&'static str],
    pub short_names: &'static [&'static str],
    /// Has a `status` subresource: writes to the main resource keep the old `.status`, writes to
    /// `/status` change only `.status`.
    pub status: bool,
    /// Has the `eviction` subresource (pods).
    pub eviction: bool,
    /// A built-in type (strategic merge patch accepted); `false` for custom resources, which
    /// answer such patches with 415 like the real server.
    pub builtin: bool,
    /// PUT to a missing object creates it (events do this on a real server).
    pub create_on_update: bool,
    /// Served only when this optional group is enabled.
    pub optional: Option<OptionalGroup>,
    /// Field selector keys accepted.
    pub fields: &'static [&'static str],
    /// `metadata.generation` is kept: 1 on creation, bumped when anything but `metadata` and
    /// `status` changes (PodDisruptionBudgets and custom resources, as on a real server).
    pub generation: bool,
}

impl ResourceType {
    pub(crate) fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `pods`, or `poddisruptionbudgets.policy`: how the real server names a resource in
    /// error messages.
    pub(crate) fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_string()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    pub(crate) fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    pub(crate) fn supports(&self, verb: &str) -> bool {
        self.verbs.contains(&verb)
    }
}

const fn core(
    plural: &'static str,
    singular: &'static str,
    kind: &'static str,
    namespaced: bool,
) -> ResourceType {
    ResourceType {
        group: "",
        version: "v1",
        plural,
        singular,
        kind,
        namespaced,
        verbs: ALL_VERBS,
        short_names: &[],
        status: false,
        eviction: false,
        builtin: true,
        create_on_update: false,
        optional: None,
        fields: META_FIELDS,
        generation: false,
    }
}

const fn grouped(
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    singular: &'static str,
    kind: &'static str,
    namespaced: bool,
) -> ResourceType {
    ResourceType {
        group,
        version,
        ..core(plural, singular, kind, namespaced)
    }
}

/// The table. Index into it is the resource type's id everywhere in the crate.
pub(crate) static RESOURCES: &[ResourceType] = &[
    ResourceType {
        short_names: &["no"],
        status: true,
        fields: NODE_FIELDS,
        ..core("nodes", "node", "Node", false)
    },
    ResourceType {
        short_names: &["po"],
        status: true,
        eviction: true,
        fields: POD_FIELDS,
        ..core("pods", "pod", "Pod", true)
    },
    ResourceType {
        short_names: &["ns"],
        status: true,
        verbs: NAMESPACE_VERBS,
        fields: NAMESPACE_FIELDS,
        ..core("namespaces", "namespace", "Namespace", false)
    },
    ResourceType {
        short_names: &["pvc"],
        status: true,
        ..core(
            "persistentvolumeclaims",
            "persistentvolumeclaim",
            "PersistentVolumeClaim",
            true,
        )
    },
    ResourceType {
        short_names: &["ev"],
        create_on_update: true,
        fields: EVENT_FIELDS,
        ..core("events", "event", "Event", true)
    },
    ResourceType {
        short_names: &["pdb"],
        status: true,
        generation: true,
        ..grouped(
            "policy",
            "v1",
            "poddisruptionbudgets",
            "poddisruptionbudget",
            "PodDisruptionBudget",
            true,
        )
    },
    ResourceType {
        short_names: &["pc"],
        ..grouped(
            "scheduling.k8s.io",
            "v1",
            "priorityclasses",
            "priorityclass",
            "PriorityClass",
            false,
        )
    },
    grouped(
        "coordination.k8s.io",
        "v1",
        "leases",
        "lease",
        "Lease",
        true,
    ),
    ResourceType {
        short_names: &["ev"],
        create_on_update: true,
        ..grouped("events.k8s.io", "v1", "events", "event", "Event", true)
    },
    ResourceType {
        verbs: METRICS_VERBS,
        optional: Some(OptionalGroup::Metrics),
        ..grouped(
            "metrics.k8s.io",
            "v1beta1",
            "nodes",
            "",
            "NodeMetrics",
            false,
        )
    },
    ResourceType {
        verbs: METRICS_VERBS,
        optional: Some(OptionalGroup::Metrics),
        ..grouped("metrics.k8s.io", "v1beta1", "pods", "", "PodMetrics", true)
    },
    ResourceType {
        short_names: &["nm"],
        status: true,
        builtin: false,
        generation: true,
        optional: Some(OptionalGroup::NodeMetric),
        ..grouped(
            "slo.koordinator.sh",
            "v1alpha1",
            "nodemetrics",
            "nodemetric",
            "NodeMetric",
            false,
        )
    },
    ResourceType {
        short_names: &["node-res-topo"],
        builtin: false,
        generation: true,
        optional: Some(OptionalGroup::NodeResourceTopology),
        ..grouped(
            "topology.node.k8s.io",
            "v1alpha1",
            "noderesourcetopologies",
            "noderesourcetopology",
            "NodeResourceTopology",
            false,
        )
    },
    ResourceType {
        short_names: &["reserv"],
        status: true,
        builtin: false,
        generation: true,
        optional: Some(OptionalGroup::Reservation),
        ..grouped(
            "scheduling.koordinator.sh",
            "v1alpha1",
            "reservations",
            "reservation",
            "Reservation",
            false,
        )
    },
];

/// Index of a resource type in [`RESOURCES`].
pub(crate) type TypeId = usize;

/// Core v1 nodes in [`RESOURCES`].
pub(crate) const NODES: TypeId = 0;
/// Core v1 pods in [`RESOURCES`].
pub(crate) const PODS: TypeId = 1;
/// policy/v1 poddisruptionbudgets in [`RESOURCES`].
pub(crate) const PDBS: TypeId = 5;

pub(crate) fn by_kind(api_version: &str, kind: &str) -> Option<TypeId> {
    RESOURCES
        .iter()
        .position(|r| r.kind == kind && r.api_version() == api_version)
}

pub(crate) fn by_plural(group: &str, version: &str, plural: &str) -> Option<TypeId> {
    RESOURCES
        .iter()
        .position(|r| r.group == group && r.version == version && r.plural == plural)
}

/// Whether a resource type is served given the enabled optional groups.
pub(crate) fn served(rt: &ResourceType, enabled: &[OptionalGroup]) -> bool {
    rt.optional.is_none_or(|g| enabled.contains(&g))
}

/// The (group, version) pairs served, in discovery order, core (`""`) first.
fn group_versions(enabled: &[OptionalGroup]) -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    for rt in RESOURCES.iter().filter(|r| served(r, enabled)) {
        if !out.contains(&(rt.group, rt.version)) {
            out.push((rt.group, rt.version));
        }
    }
    out
}

pub(crate) fn version_info() -> Value {
    json!({
        "major": "1",
        "minor": "33",
        "emulationMajor": "1",
        "emulationMinor": "33",
        "minCompatibilityMajor": "1",
        "minCompatibilityMinor": "32",
        "gitVersion": "v1.33.0-rebalancer-kube-fake",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-04-23T00:00:00Z",
        "goVersion": "go1.24.2",
        "compiler": "gc",
        "platform": "linux/amd64"
    })
}

/// `GET /api`.
pub(crate) fn core_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]
    })
}

fn api_group(group: &str, version: &str) -> Value {
    let gv = format!("{group}/{version}");
    json!({
        "name": group,
        "versions": [{"groupVersion": gv, "version": version}],
        "preferredVersion": {"groupVersion": gv, "version": version}
    })
}

/// `GET /apis`.
pub(crate) fn group_list(enabled: &[OptionalGroup]) -> Value {
    let groups: Vec<Value> = group_versions(enabled)
        .into_iter()
        .filter(|(g, _)| !g.is_empty())
        .map(|(g, v)| api_group(g, v))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `GET /apis/{group}`, if served.
pub(crate) fn group(enabled: &[OptionalGroup], group: &str) -> Option<Value> {
    group_versions(enabled)
        .into_iter()
        .find(|(g, _)| *g == group && !g.is_empty())
        .map(|(g, v)| {
            let mut doc = api_group(g, v);
            doc["kind"] = json!("APIGroup");
            doc["apiVersion"] = json!("v1");
            doc
        })
}

/// `GET /api/v1` or `GET /apis/{group}/{version}`, if served.
pub(crate) fn resource_list(
    enabled: &[OptionalGroup],
    group: &str,
    version: &str,
) -> Option<Value> {
    let types: Vec<&ResourceType> = RESOURCES
        .iter()
        .filter(|r| served(r, enabled) && r.group == group && r.version == version)
        .collect();
    if types.is_empty() {
        return None;
    }
    let mut resources = Vec::new();
    for rt in types {
        let mut entry = json!({
            "name": rt.plural,
            "singularName": rt.singular,
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": rt.verbs,
        });
        if !rt.short_names.is_empty() {
            entry["shortNames"] = json!(rt.short_names);
        }
        resources.push(entry);
        if rt.eviction {
            resources.push(json!({
                "name": format!("{}/eviction", rt.plural),
                "singularName": "",
                "namespaced": rt.namespaced,
                "group": "policy",
                "version": "v1",
                "kind": "Eviction",
                "verbs": ["create"],
            }));
        }
        if rt.status {
            resources.push(json!({
                "name": format!("{}/status", rt.plural),
                "singularName": "",
                "namespaced": rt.namespaced,
                "kind": rt.kind,
                "verbs": STATUS_VERBS,
            }));
        }
    }
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }))
}

/// The media type of aggregated discovery answers.
pub(crate) const AGGREGATED_MEDIA_TYPE: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// Whether an `Accept` header asks for aggregated discovery (v2).
pub(crate) fn wants_aggregated(accept: &str) -> bool {
    accept.split(',').any(|media| {
        let params: Vec<&str> = media.split(';').map(str::trim).collect();
        params.contains(&"g=apidiscovery.k8s.io")
            && params.contains(&"v=v2")
            && params.contains(&"as=APIGroupDiscoveryList")
    })
}

/// Aggregated discovery: `GET /api` (`core == true`) or `GET /apis` with the v2 media type.
pub(crate) fn aggregated(enabled: &[OptionalGroup], core: bool) -> Value {
    let mut items = Vec::new();
    for (group, version) in group_versions(enabled) {
        if group.is_empty() != core {
            continue;
        }
        let resources: Vec<Value> = RESOURCES
            .iter()
            .filter(|r| served(r, enabled) && r.group == group && r.version == version)
            .map(|rt| {
                let mut subresources = Vec::new();
                if rt.eviction {
                    subresources.push(json!({
                        "subresource": "eviction",
                        "responseKind": {"group": "policy", "version": "v1", "kind": "Eviction"},
                        "verbs": ["create"],
                    }));
                }
                if rt.status {
                    subresources.push(json!({
                        "subresource": "status",
                        "responseKind": {"group": group, "version": version, "kind": rt.kind},
                        "verbs": STATUS_VERBS,
                    }));
                }
                let mut entry = json!({
                    "resource": rt.plural,
                    "responseKind": {"group": group, "version": version, "kind": rt.kind},
                    "scope": if rt.namespaced { "Namespaced" } else { "Cluster" },
                    "singularResource": rt.singular,
                    "verbs": rt.verbs,
                });
                if !rt.short_names.is_empty() {
                    entry["shortNames"] = json!(rt.short_names);
                }
                if !subresources.is_empty() {
                    entry["subresources"] = json!(subresources);
                }
                entry
            })
            .collect();
        let mut metadata = json!({"creationTimestamp": null});
        if !group.is_empty() {
            metadata["name"] = json!(group);
        }
        items.push(json!({
            "metadata": metadata,
            "versions": [{"version": version, "resources": resources, "freshness": "Current"}],
        }));
    }
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": items,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_and_plurals_resolve_to_the_same_type() {
        for (i, rt) in RESOURCES.iter().enumerate() {
            assert_eq!(by_kind(&rt.api_version(), rt.kind), Some(i), "{}", rt.kind);
            assert_eq!(by_plural(rt.group, rt.version, rt.plural), Some(i));
        }
        assert_eq!(by_kind("v1", "Nope"), None);
        assert_eq!(by_kind("v1", "Pod"), Some(PODS));
        assert_eq!(by_kind("v1", "Node"), Some(NODES));
        assert_eq!(by_kind("policy/v1", "PodDisruptionBudget"), Some(PDBS));
    }

    #[test]
    fn optional_groups_are_hidden_until_enabled() {
        let plain = group_list(&[]).to_string();
        assert!(!plain.contains("metrics.k8s.io"));
        let with = group_list(&[OptionalGroup::Metrics]).to_string();
        assert!(with.contains("metrics.k8s.io/v1beta1"));
        assert!(resource_list(&[], "metrics.k8s.io", "v1beta1").is_none());
    }

    #[test]
    fn aggregated_accept_header_is_recognised() {
        assert!(wants_aggregated(
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
        ));
        assert!(!wants_aggregated("application/json"));
    }
}
