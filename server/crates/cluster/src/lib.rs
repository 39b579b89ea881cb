//! # Cluster state
//!
//! The domain model of what a cluster holds, ingestion of Kubernetes objects, and the live
//! snapshot of every loaded cluster.
//!
//! # Layout
//! In pipeline order:
//! - [`document`]: structural checks of a request body before anything decodes it (nesting
//!   depth, repeated keys, YAML documents); used for every JSON and YAML body the server reads.
//! - `objects`, `wire`, `jsonpath`: a Kubernetes document split into objects and decoded into
//!   lean wire types, with located errors.
//! - [`validation`]: Kubernetes' rules for names, labels, annotations and int-or-percent
//!   values, applied to pushed documents.
//! - `convert`, `snapshot`: objects → `rebalancer_policy_sdk::model` rows → a [`ClusterSnapshot`].
//! - [`archive`]: the snapshot's archive, sealed in a memory file policies map read-only.
//! - [`live`]: [`Clusters`], the current snapshot of every loaded cluster, and revisions.
//! - [`utilization`](node_utilization), [`pdb`], [`scheduling`]: what the API, the executor
//!   and the simulated backend ask of a snapshot (requests per node, PDB headroom, node fit and
//!   reservation placement).
//! - [`whatif`]: per-node load, the cluster's balance against thresholds, and where a series of
//!   moves would land (the same scheduling as reservations).
//! - `fixtures` (tests, or the `fixtures` feature): builders of small objects and snapshots.
//!
//! Owns the path from a Kubernetes document to the archive policies read:
//! 1. [`parse_list`] splits a kubectl `List` (one JSON or YAML document: `kind: List` or any
//!    `XList`, with an `items` array) into an [`ObjectSet`]: every object with its kind, name
//!    and trimmed JSON (no `metadata.managedFields`, no kubectl last-applied annotation),
//!    duplicates resolved, unknown kinds kept raw, names, namespaces and uids validated as
//!    Kubernetes does. The JSON is stored once: objects point into the input buffer.
//! 2. [`build_snapshot`] parses the modelled kinds (Node, Pod, PodDisruptionBudget, Namespace,
//!    PriorityClass, PersistentVolumeClaim) into `rebalancer_policy_sdk::model` rows, interning
//!    strings as it goes, and archives them: a [`ClusterSnapshot`]. Objects of a pushed
//!    document are validated too (labels, annotations, non-negative quantities, PDB budgets);
//!    stored and live objects are not validated again.
//! 3. [`node_utilization`] summarises a snapshot per node for the REST API.
//!
//! Kubernetes semantics (quantities, pod requests, QoS) come from `rebalancer_policy_sdk::k8s`, so
//! host and policies agree. This crate does no I/O, knows nothing of SQL or HTTP, and is
//! CPU-bound: call it from `spawn_blocking`.
//!
//! Errors ([`IngestError`]) name the object and the field path; oddities a live cluster really has
//! (a pod on a node missing from the snapshot, unknown kinds, duplicates, a PDB without status)
//! are [`IngestWarning`]s.

pub mod archive;
mod convert;
pub mod document;
#[cfg(any(test, feature = "fixtures"))]
pub mod fixtures;
mod jsonpath;
pub mod live;
mod objects;
pub mod pdb;
pub mod scheduling;
mod snapshot;
mod topology;
mod usage;
mod utilization;
pub mod validation;
pub mod whatif;
mod wire;

#[cfg(test)]
mod push_tests;
#[cfg(test)]
mod tests;

use std::fmt;

use serde::{Deserialize, Serialize};

pub use convert::parse_time_ms;
pub use live::Clusters;
pub use objects::{
    Input, JsonPacker, LAST_APPLIED, ObjectSet, PackedJson, SharedObject, StoredObject,
    StoredObjectBuf, parse_list,
};
pub use snapshot::{ClusterSnapshot, LiveRows, build_snapshot};
pub use usage::RAW_ALLOCATABLE;
pub use utilization::{
    NodeUsageSummary, NodeUtilization, ResourceAmounts, ResourcePercentages, UsageSourceName,
    node_utilization,
};

/// The document format of an ingested snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    Json,
    Yaml,
}

impl Format {
    /// Guess the format from the first non-blank byte: `{` or `[` is JSON, anything else YAML.
    pub fn sniff(bytes: &[u8]) -> Format {
        match bytes
            .iter()
            .find(|b| !b.is_ascii_whitespace() && **b != 0xEF && **b != 0xBB && **b != 0xBF)
        {
            Some(b'{') | Some(b'[') => Format::Json,
            _ => Format::Yaml,
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Format::Json => "JSON",
            Format::Yaml => "YAML",
        })
    }
}

/// The kinds the snapshot models; every other kind is kept raw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ObjectKind {
    Node,
    Pod,
    PodDisruptionBudget,
    Namespace,
    PriorityClass,
    PersistentVolumeClaim,
}

impl ObjectKind {
    pub const ALL: [ObjectKind; 6] = [
        ObjectKind::Node,
        ObjectKind::Pod,
        ObjectKind::PodDisruptionBudget,
        ObjectKind::Namespace,
        ObjectKind::PriorityClass,
        ObjectKind::PersistentVolumeClaim,
    ];

    /// The Kubernetes `kind`.
    pub fn as_str(self) -> &'static str {
        match self {
            ObjectKind::Node => "Node",
            ObjectKind::Pod => "Pod",
            ObjectKind::PodDisruptionBudget => "PodDisruptionBudget",
            ObjectKind::Namespace => "Namespace",
            ObjectKind::PriorityClass => "PriorityClass",
            ObjectKind::PersistentVolumeClaim => "PersistentVolumeClaim",
        }
    }

    /// The modelled kind named `kind`.
    pub fn from_kind(kind: &str) -> Option<ObjectKind> {
        ObjectKind::ALL.into_iter().find(|k| k.as_str() == kind)
    }

    /// Whether objects of this kind live in a namespace.
    pub fn is_namespaced(self) -> bool {
        matches!(
            self,
            ObjectKind::Pod | ObjectKind::PodDisruptionBudget | ObjectKind::PersistentVolumeClaim
        )
    }

    /// Whether `api_version` (`""` when absent) is the API this module models for the kind:
    /// core `v1`, `policy/v1` for PDBs, `scheduling.k8s.io/*` for priority classes.
    pub fn accepts_api_version(self, api_version: &str) -> bool {
        if api_version.is_empty() {
            return true;
        }
        match self {
            ObjectKind::PodDisruptionBudget => api_version == "policy/v1",
            ObjectKind::PriorityClass => api_version.starts_with("scheduling.k8s.io/"),
            _ => api_version == "v1",
        }
    }

    fn table(self) -> usize {
        self as usize
    }
}

impl fmt::Display for ObjectKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a document could not be ingested.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IngestError {
    /// Not well-formed JSON/YAML, or more than one YAML document (HTTP 400). `line` and
    /// `column` are 1-based positions in the document.
    #[error("malformed document at line {line}, column {column}: {message}")]
    Malformed {
        line: usize,
        column: usize,
        message: String,
    },
    /// Values nested deeper than [`document::MAX_DEPTH`], or an object that repeats a key
    /// (HTTP 400).
    #[error("{0}")]
    Structure(document::StructureError),
    /// Well-formed, but not a List of objects: empty, `null`, a single object, a List without
    /// `items` or with `items: null` (HTTP 400). An empty cluster is a List with `items: []`.
    #[error("not a List at line {line}, column {column}: {message}")]
    NotAList {
        line: usize,
        column: usize,
        message: String,
    },
    /// A well-formed object with an invalid or missing field (HTTP 422). `index` is the
    /// object's position in the document (0-based, counting every item), `field` a path such
    /// as `spec.containers[0].resources.requests.cpu` (`""` for the object as a whole).
    /// (`Box<str>` keeps the error small enough to return by value everywhere.)
    #[error("{}: {}", describe(*.index, kind, namespace, name), with_field(field, message))]
    InvalidObject {
        index: usize,
        kind: Box<str>,
        namespace: Box<str>,
        name: Box<str>,
        field: Box<str>,
        message: Box<str>,
    },
    /// The archive could not be written (internal; HTTP 500).
    #[error("building the snapshot archive failed: {0}")]
    Archive(String),
}

impl IngestError {
    /// A machine-readable code for API errors.
    pub fn code(&self) -> &'static str {
        match self {
            IngestError::Malformed { .. } => "malformed_document",
            IngestError::Structure(e) => e.code(),
            IngestError::NotAList { .. } => "not_a_list",
            IngestError::InvalidObject { .. } => "invalid_object",
            IngestError::Archive(_) => "internal",
        }
    }
}

fn describe(index: usize, kind: &str, namespace: &str, name: &str) -> String {
    let kind = if kind.is_empty() { "object" } else { kind };
    match (namespace.is_empty(), name.is_empty()) {
        (_, true) => format!("item {index} ({kind})"),
        (true, false) => format!("{kind} {name}"),
        (false, false) => format!("{kind} {namespace}/{name}"),
    }
}

fn with_field(field: &str, message: &str) -> String {
    if field.is_empty() {
        message.to_owned()
    } else {
        format!("{field}: {message}")
    }
}

/// What kind of oddity a warning reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum WarningCode {
    /// A kind the snapshot does not model; the objects are stored raw.
    UnknownKind,
    /// The same (kind, namespace, name) appeared more than once; the last one is kept.
    DuplicateObject,
    /// Namespaced objects without `metadata.namespace`; placed in `default`.
    MissingNamespace,
    /// Pods without `metadata.creationTimestamp`; their age counts from the snapshot time.
    MissingCreationTimestamp,
    /// Pods bound (`spec.nodeName`) to a node that is not in the snapshot.
    NodeNotFound,
    /// A PodDisruptionBudget without `status`: treated as allowing no disruption.
    PdbWithoutStatus,
    /// A live object the snapshot cannot model (a field of the wrong type or out of range);
    /// it is left out of the snapshot until it changes. A pushed document with such an object
    /// is refused instead.
    InvalidObject,
    /// A NodeMetric, a metrics.k8s.io object or a Koordinator annotation (such as
    /// `node.koordinator.sh/raw-allocatable`) that cannot be read; it is ignored, as
    /// Koordinator ignores it.
    InvalidUsage,
    /// A metric for a node or pod the snapshot does not hold; it is ignored.
    UsageWithoutObject,
    /// A NodeResourceTopology, or one of koordlet's CPU annotations on it, that cannot be read
    /// (or an NRT of a node the snapshot does not hold); that part is ignored.
    InvalidTopology,
}

/// Something odd but legitimate in an ingested document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct IngestWarning {
    pub code: WarningCode,
    /// How many objects it concerns (warnings about many objects are reported once).
    pub count: usize,
    /// The full sentence, naming the objects.
    pub message: String,
}

impl IngestWarning {
    fn new(code: WarningCode, count: usize, message: String) -> Self {
        IngestWarning {
            code,
            count,
            message,
        }
    }
}

impl fmt::Display for IngestWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// `"a", "b", "c" and 7 more` — for messages about many objects.
fn sample_list<'a>(names: impl IntoIterator<Item = &'a str>, total: usize) -> String {
    const SHOWN: usize = 5;
    let mut out = String::new();
    let mut shown = 0;
    for name in names.into_iter().take(SHOWN) {
        if shown > 0 {
            out.push_str(", ");
        }
        out.push_str(&format!("{name:?}"));
        shown += 1;
    }
    if total > shown {
        out.push_str(&format!(" and {} more", total - shown));
    }
    out
}

#[cfg(test)]
mod error_tests {
    use super::*;

    #[test]
    fn invalid_object_names_the_object_and_field() {
        let e = IngestError::InvalidObject {
            index: 3,
            kind: "Pod".into(),
            namespace: "shop".into(),
            name: "web-1".into(),
            field: "spec.containers[0].resources.requests.cpu".into(),
            message: "invalid quantity \"abc\"".into(),
        };
        assert_eq!(
            e.to_string(),
            "Pod shop/web-1: spec.containers[0].resources.requests.cpu: invalid quantity \"abc\""
        );
        let e = IngestError::InvalidObject {
            index: 7,
            kind: "".into(),
            namespace: "".into(),
            name: "".into(),
            field: "kind".into(),
            message: "required field is missing".into(),
        };
        assert_eq!(
            e.to_string(),
            "item 7 (object): kind: required field is missing"
        );
        let e = IngestError::InvalidObject {
            index: 0,
            kind: "Node".into(),
            namespace: "".into(),
            name: "n1".into(),
            field: "".into(),
            message: "bad".into(),
        };
        assert_eq!(e.to_string(), "Node n1: bad");
        assert_eq!(e.code(), "invalid_object");
    }

    #[test]
    fn format_sniffing() {
        assert_eq!(Format::sniff(b"  \n{\"kind\":1}"), Format::Json);
        assert_eq!(Format::sniff(b"[]"), Format::Json);
        assert_eq!(Format::sniff(b"apiVersion: v1\n"), Format::Yaml);
        assert_eq!(Format::sniff(b"---\nkind: List"), Format::Yaml);
        assert_eq!(Format::sniff(b"\xEF\xBB\xBF{}"), Format::Json);
    }

    #[test]
    fn kinds_and_api_versions() {
        for k in ObjectKind::ALL {
            assert_eq!(ObjectKind::from_kind(k.as_str()), Some(k));
        }
        assert_eq!(ObjectKind::from_kind("Service"), None);
        assert!(ObjectKind::PodDisruptionBudget.accepts_api_version("policy/v1"));
        assert!(!ObjectKind::PodDisruptionBudget.accepts_api_version("policy/v1beta1"));
        assert!(ObjectKind::PriorityClass.accepts_api_version("scheduling.k8s.io/v1"));
        assert!(ObjectKind::Pod.accepts_api_version(""));
        assert!(!ObjectKind::Node.accepts_api_version("example.com/v1"));
    }

    #[test]
    fn sample_lists_are_capped() {
        assert_eq!(sample_list(["a", "b"], 2), "\"a\", \"b\"");
        assert_eq!(
            sample_list(["a", "b", "c", "d", "e", "f"], 9),
            "\"a\", \"b\", \"c\", \"d\", \"e\" and 4 more"
        );
    }
}
