//! The Kubernetes JSON we read, as minimal serde structs borrowing from the input.
//!
//! Only the fields the snapshot models are declared; serde skips everything else without
//! building it. Strings borrow from the JSON text whenever they carry no escapes ([`Str`]), maps
//! become ordered pair lists ([`StrMap`], [`QtyMap`]; a repeated key replaces the earlier value,
//! as Go's decoder does), and every field is optional (`null` included) so that validation —
//! with field paths — happens in `convert`, not in serde. k8s-openapi is not used here: its
//! owned, fully typed objects are several times slower to decode.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};

/// A JSON string, borrowed from the input when it has no escape sequences.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Str<'a>(pub Cow<'a, str>);

impl<'a> Str<'a> {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Str<'_> {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::ops::Deref for Str<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Str<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Str<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Str<'a>, E> {
                Ok(Str(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Str<'a>, E> {
                Ok(Str(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Str<'a>, E> {
                Ok(Str(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V(PhantomData))
    }
}

/// A quantity as written: a JSON string or number (Kubernetes accepts both and trims spaces).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Qty<'a>(pub Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Qty<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Qty<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a quantity (a string such as \"250m\" or a number)")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Qty<'a>, E> {
                Ok(Qty(Cow::Borrowed(v.trim())))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Qty<'a>, E> {
                Ok(Qty(Cow::Owned(v.trim().to_owned())))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Qty<'a>, E> {
                Ok(Qty(Cow::Owned(v.to_string())))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Qty<'a>, E> {
                Ok(Qty(Cow::Owned(v.to_string())))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Qty<'a>, E> {
                Ok(Qty(Cow::Owned(v.to_string())))
            }
        }
        d.deserialize_any(V(PhantomData))
    }
}

/// `map<string, string>` (labels, annotations, nodeSelector).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StrMap<'a>(pub Vec<(Str<'a>, Str<'a>)>);

/// `map<string, Quantity>` (requests, limits, allocatable, overhead).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct QtyMap<'a>(pub Vec<(Str<'a>, Qty<'a>)>);

macro_rules! pair_map {
    ($ty:ident, $value:ident, $expecting:literal) => {
        impl<'de: 'a, 'a> Deserialize<'de> for $ty<'a> {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V<'a>(PhantomData<&'a ()>);
                impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
                    type Value = $ty<'a>;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str($expecting)
                    }
                    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<$ty<'a>, A::Error> {
                        let mut out: Vec<(Str<'a>, $value<'a>)> =
                            Vec::with_capacity(map.size_hint().unwrap_or(4));
                        while let Some((k, v)) = map.next_entry::<Str<'a>, $value<'a>>()? {
                            match out.iter().position(|(old, _)| old.0 == k.0) {
                                Some(i) => out[i].1 = v,
                                None => out.push((k, v)),
                            }
                        }
                        Ok($ty(out))
                    }
                }
                d.deserialize_map(V(PhantomData))
            }
        }
    };
}

pair_map!(StrMap, Str, "a map of strings");
pair_map!(QtyMap, Qty, "a map of resource quantities");

/// Present and not `null` (`emptyDir: {}`), without looking inside.
pub type Present = Option<IgnoredAny>;

// ------------------------------------------------------------------------------------ metadata

#[derive(Deserialize, Debug, Default)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta<'a> {
    #[serde(borrow)]
    pub name: Option<Str<'a>>,
    #[serde(borrow)]
    pub uid: Option<Str<'a>>,
    #[serde(borrow)]
    pub labels: Option<StrMap<'a>>,
    #[serde(borrow)]
    pub annotations: Option<StrMap<'a>>,
    #[serde(borrow)]
    pub creation_timestamp: Option<Str<'a>>,
    #[serde(borrow)]
    pub deletion_timestamp: Option<Str<'a>>,
    #[serde(borrow)]
    pub owner_references: Option<Vec<OwnerReference<'a>>>,
}

#[derive(Deserialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct OwnerReference<'a> {
    #[serde(borrow)]
    pub kind: Option<Str<'a>>,
    #[serde(borrow)]
    pub name: Option<Str<'a>>,
    #[serde(borrow)]
    pub uid: Option<Str<'a>>,
    pub controller: Option<bool>,
}

// ---------------------------------------------------------------------------------- selectors

#[derive(Deserialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelector<'a> {
    #[serde(borrow)]
    pub match_labels: Option<StrMap<'a>>,
    #[serde(borrow)]
    pub match_expressions: Option<Vec<Requirement<'a>>>,
}

/// A label-selector requirement or a node-selector requirement (same shape).
#[derive(Deserialize, Debug)]
pub struct Requirement<'a> {
    #[serde(borrow)]
    pub key: Option<Str<'a>>,
    #[serde(borrow)]
    pub operator: Option<Str<'a>>,
    #[serde(borrow)]
    pub values: Option<Vec<Str<'a>>>,
}

#[derive(Deserialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct NodeSelectorTerm<'a> {
    #[serde(borrow)]
    pub match_expressions: Option<Vec<Requirement<'a>>>,
    #[serde(borrow)]
    pub match_fields: Option<Vec<Requirement<'a>>>,
}

// ----------------------------------------------------------------------------------- affinity

#[derive(Deserialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct Affinity<'a> {
    #[serde(borrow)]
    pub node_affinity: Option<NodeAffinity<'a>>,
    #[serde(borrow)]
    pub pod_affinity: Option<PodAffinity<'a>>,
    #[serde(borrow)]
    pub pod_anti_affinity: Option<PodAffinity<'a>>,
}

#[derive(Deserialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct NodeAffinity<'a> {
    #[serde(borrow, rename = "requiredDuringSchedulingIgnoredDuringExecution")]
    pub required: Option<NodeSelector<'a>>,
    #[serde(borrow, rename = "preferredDuringSchedulingIgnoredDuringExecution")]
    pub preferred: Option<Vec<PreferredSchedulingTerm<'a>>>,
}

#[derive(Deserialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct NodeSelector<'a> {
    #[serde(borrow)]
    pub node_selector_terms: Option<Vec<NodeSelectorTerm<'a>>>,
}

#[derive(Deserialize, Debug)]
pub struct PreferredSchedulingTerm<'a> {
    pub weight: Option<i32>,
    #[serde(borrow)]
    pub preference: Option<NodeSelectorTerm<'a>>,
}

#[derive(Deserialize, Debug)]
pub struct PodAffinity<'a> {
    #[serde(borrow, rename = "requiredDuringSchedulingIgnoredDuringExecution")]
    pub required: Option<Vec<PodAffinityTerm<'a>>>,
    #[serde(borrow, rename = "preferredDuringSchedulingIgnoredDuringExecution")]
    pub preferred: Option<Vec<WeightedPodAffinityTerm<'a>>>,
}

#[derive(Deserialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct PodAffinityTerm<'a> {
    #[serde(borrow)]
    pub label_selector: Option<LabelSelector<'a>>,
    #[serde(borrow)]
    pub namespaces: Option<Vec<Str<'a>>>,
    #[serde(borrow)]
    pub namespace_selector: Option<LabelSelector<'a>>,
    #[serde(borrow)]
    pub topology_key: Option<Str<'a>>,
    #[serde(borrow)]
    pub match_label_keys: Option<Vec<Str<'a>>>,
    #[serde(borrow)]
    pub mismatch_label_keys: Option<Vec<Str<'a>>>,
}

#[derive(Deserialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct WeightedPodAffinityTerm<'a> {
    pub weight: Option<i32>,
    #[serde(borrow)]
    pub pod_affinity_term: Option<PodAffinityTerm<'a>>,
}

// ------------------------------------------------------------------------------------- taints

#[derive(Deserialize, Debug)]
pub struct Taint<'a> {
    #[serde(borrow)]
    pub key: Option<Str<'a>>,
    #[serde(borrow)]
    pub value: Option<Str<'a>>,
    #[serde(borrow)]
    pub effect: Option<Str<'a>>,
}

#[derive(Deserialize, Debug)]
pub struct Toleration<'a> {
    #[serde(borrow)]
    pub key: Option<Str<'a>>,
    #[serde(borrow)]
    pub operator: Option<Str<'a>>,
    #[serde(borrow)]
    pub value: Option<Str<'a>>,
    #[serde(borrow)]
    pub effect: Option<Str<'a>>,
}

// ----------------------------------------------------------------------------------------- pod

#[derive(Deserialize, Debug)]
pub struct Pod<'a> {
    #[serde(borrow)]
    pub metadata: Option<ObjectMeta<'a>>,
    #[serde(borrow)]
    pub spec: Option<PodSpec<'a>>,
    #[serde(borrow)]
    pub status: Option<PodStatus<'a>>,
}

#[derive(Deserialize, Debug, Default)]
#[serde(rename_all = "camelCase")]
pub struct PodSpec<'a> {
    #[serde(borrow)]
    pub node_name: Option<Str<'a>>,
    pub priority: Option<i32>,
    #[serde(borrow)]
    pub priority_class_name: Option<Str<'a>>,
    #[serde(borrow)]
    pub containers: Option<Vec<Container<'a>>>,
    #[serde(borrow)]
    pub init_containers: Option<Vec<Container<'a>>>,
    #[serde(borrow)]
    pub ephemeral_containers: Option<Vec<Container<'a>>>,
    #[serde(borrow)]
    pub overhead: Option<QtyMap<'a>>,
    #[serde(borrow)]
    pub resources: Option<ResourceRequirements<'a>>,
    #[serde(borrow)]
    pub node_selector: Option<StrMap<'a>>,
    #[serde(borrow)]
    pub affinity: Option<Affinity<'a>>,
    #[serde(borrow)]
    pub tolerations: Option<Vec<Toleration<'a>>>,
    #[serde(borrow)]
    pub topology_spread_constraints: Option<Vec<TopologySpreadConstraint<'a>>>,
    #[serde(borrow)]
    pub volumes: Option<Vec<Volume<'a>>>,
    pub resource_claims: Option<Vec<IgnoredAny>>,
}

#[derive(Deserialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct Container<'a> {
    #[serde(borrow)]
    pub name: Option<Str<'a>>,
    #[serde(borrow)]
    pub image: Option<Str<'a>>,
    #[serde(borrow)]
    pub resources: Option<ResourceRequirements<'a>>,
    #[serde(borrow)]
    pub restart_policy: Option<Str<'a>>,
}

#[derive(Deserialize, Debug, Default)]
pub struct ResourceRequirements<'a> {
    #[serde(borrow)]
    pub requests: Option<QtyMap<'a>>,
    #[serde(borrow)]
    pub limits: Option<QtyMap<'a>>,
}

#[derive(Deserialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct TopologySpreadConstraint<'a> {
    pub max_skew: Option<i32>,
    #[serde(borrow)]
    pub topology_key: Option<Str<'a>>,
    #[serde(borrow)]
    pub when_unsatisfiable: Option<Str<'a>>,
    #[serde(borrow)]
    pub label_selector: Option<LabelSelector<'a>>,
    pub min_domains: Option<i32>,
    #[serde(borrow)]
    pub node_affinity_policy: Option<Str<'a>>,
    #[serde(borrow)]
    pub node_taints_policy: Option<Str<'a>>,
    #[serde(borrow)]
    pub match_label_keys: Option<Vec<Str<'a>>>,
}

#[derive(Deserialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct Volume<'a> {
    #[serde(borrow)]
    pub name: Option<Str<'a>>,
    pub empty_dir: Present,
    pub host_path: Present,
    #[serde(borrow)]
    pub persistent_volume_claim: Option<PvcSource<'a>>,
    pub ephemeral: Present,
}

#[derive(Deserialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct PvcSource<'a> {
    #[serde(borrow)]
    pub claim_name: Option<Str<'a>>,
}

#[derive(Deserialize, Debug, Default)]
#[serde(rename_all = "camelCase")]
pub struct PodStatus<'a> {
    #[serde(borrow)]
    pub phase: Option<Str<'a>>,
    #[serde(borrow)]
    pub reason: Option<Str<'a>>,
    #[serde(borrow)]
    pub start_time: Option<Str<'a>>,
    #[serde(borrow)]
    pub qos_class: Option<Str<'a>>,
    #[serde(borrow)]
    pub conditions: Option<Vec<Condition<'a>>>,
    #[serde(borrow)]
    pub container_statuses: Option<Vec<ContainerStatus<'a>>>,
    #[serde(borrow)]
    pub init_container_statuses: Option<Vec<ContainerStatus<'a>>>,
    #[serde(borrow)]
    pub ephemeral_container_statuses: Option<Vec<ContainerStatus<'a>>>,
}

/// A pod or node condition.
#[derive(Deserialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct Condition<'a> {
    #[serde(borrow, rename = "type")]
    pub type_: Option<Str<'a>>,
    #[serde(borrow)]
    pub status: Option<Str<'a>>,
    #[serde(borrow)]
    pub reason: Option<Str<'a>>,
    #[serde(borrow)]
    pub last_transition_time: Option<Str<'a>>,
}

#[derive(Deserialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct ContainerStatus<'a> {
    #[serde(borrow)]
    pub name: Option<Str<'a>>,
    pub restart_count: Option<i32>,
    pub ready: Option<bool>,
    #[serde(borrow)]
    pub state: Option<ContainerState<'a>>,
}

#[derive(Deserialize, Debug)]
pub struct ContainerState<'a> {
    #[serde(borrow)]
    pub waiting: Option<StateDetail<'a>>,
    #[serde(borrow)]
    pub terminated: Option<StateDetail<'a>>,
}

#[derive(Deserialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct StateDetail<'a> {
    #[serde(borrow)]
    pub reason: Option<Str<'a>>,
    pub exit_code: Option<i32>,
}

// ---------------------------------------------------------------------------------------- node

#[derive(Deserialize, Debug)]
pub struct Node<'a> {
    #[serde(borrow)]
    pub metadata: Option<ObjectMeta<'a>>,
    #[serde(borrow)]
    pub spec: Option<NodeSpec<'a>>,
    #[serde(borrow)]
    pub status: Option<NodeStatus<'a>>,
}

#[derive(Deserialize, Debug, Default)]
pub struct NodeSpec<'a> {
    pub unschedulable: Option<bool>,
    #[serde(borrow)]
    pub taints: Option<Vec<Taint<'a>>>,
}

#[derive(Deserialize, Debug, Default)]
pub struct NodeStatus<'a> {
    #[serde(borrow)]
    pub allocatable: Option<QtyMap<'a>>,
    #[serde(borrow)]
    pub capacity: Option<QtyMap<'a>>,
    #[serde(borrow)]
    pub conditions: Option<Vec<Condition<'a>>>,
}

// ------------------------------------------------------------------------------ other objects

/// Namespaces (and anything else where only metadata matters).
#[derive(Deserialize, Debug)]
pub struct MetaOnly<'a> {
    #[serde(borrow)]
    pub metadata: Option<ObjectMeta<'a>>,
}

#[derive(Deserialize, Debug)]
pub struct Pdb<'a> {
    #[serde(borrow)]
    pub metadata: Option<ObjectMeta<'a>>,
    #[serde(borrow)]
    pub spec: Option<PdbSpec<'a>>,
    pub status: Option<PdbStatus>,
}

#[derive(Deserialize, Debug, Default)]
#[serde(rename_all = "camelCase")]
pub struct PdbSpec<'a> {
    #[serde(borrow)]
    pub selector: Option<LabelSelector<'a>>,
    #[serde(borrow)]
    pub unhealthy_pod_eviction_policy: Option<Str<'a>>,
    /// Validated, not modelled: the budget's status says what it allows.
    #[serde(borrow)]
    pub min_available: Option<IntOrStr<'a>>,
    #[serde(borrow)]
    pub max_unavailable: Option<IntOrStr<'a>>,
}

/// An int-or-string value (`minAvailable: 2`, `"10%"`). Any other JSON value decodes as
/// [`IntOrStr::Other`], so that only the validation of pushed documents refuses it (a stored
/// object decodes as it always did).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IntOrStr<'a> {
    Int(i64),
    Str(Str<'a>),
    Other,
}

impl<'de: 'a, 'a> Deserialize<'de> for IntOrStr<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = IntOrStr<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an integer or a string")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<IntOrStr<'a>, E> {
                Ok(IntOrStr::Int(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<IntOrStr<'a>, E> {
                Ok(IntOrStr::Int(i64::try_from(v).unwrap_or(i64::MAX)))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<IntOrStr<'a>, E> {
                Ok(IntOrStr::Other)
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<IntOrStr<'a>, E> {
                Ok(IntOrStr::Other)
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<IntOrStr<'a>, E> {
                Ok(IntOrStr::Str(Str(Cow::Borrowed(v))))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<IntOrStr<'a>, E> {
                Ok(IntOrStr::Str(Str(Cow::Owned(v.to_owned()))))
            }
            fn visit_seq<A: de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<IntOrStr<'a>, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(IntOrStr::Other)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<IntOrStr<'a>, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(IntOrStr::Other)
            }
        }
        d.deserialize_any(V(PhantomData))
    }
}

#[derive(Deserialize, Debug, Default)]
#[serde(rename_all = "camelCase")]
pub struct PdbStatus {
    pub disruptions_allowed: Option<i32>,
    pub current_healthy: Option<i32>,
    pub desired_healthy: Option<i32>,
    pub expected_pods: Option<i32>,
}

#[derive(Deserialize, Debug)]
pub struct PriorityClass<'a> {
    #[serde(borrow)]
    pub metadata: Option<ObjectMeta<'a>>,
    pub value: Option<i32>,
}

#[derive(Deserialize, Debug)]
pub struct Pvc<'a> {
    #[serde(borrow)]
    pub metadata: Option<ObjectMeta<'a>>,
    #[serde(borrow)]
    pub spec: Option<PvcSpec<'a>>,
}

#[derive(Deserialize, Debug, Default)]
#[serde(rename_all = "camelCase")]
pub struct PvcSpec<'a> {
    #[serde(borrow)]
    pub storage_class_name: Option<Str<'a>>,
}
