//! Koordinator's pod annotations (`scheduling.koordinator.sh/resource-spec`, `resource-status`,
//! `numa-topology-spec`) and node labels, parsed into small values. Owns the wire shapes and
//! their meaning; must not decide what is a violation.
//!
//! Unknown JSON fields are ignored, as Go's decoder does. Unknown enum values are kept as
//! [`BindPolicy::Other`] / [`NumaPolicy::Other`]: the scheduler compares them as strings and
//! treats them as "no cpuset" / a policy that matches nothing else.

use rebalancer_policy_sdk::k8s::cpuset::parse_cpu_list;
use rebalancer_policy_sdk::k8s::quantity::parse_milli;
use serde::Deserialize;

pub const RESOURCE_SPEC: &str = "scheduling.koordinator.sh/resource-spec";
pub const RESOURCE_STATUS: &str = "scheduling.koordinator.sh/resource-status";
pub const NUMA_TOPOLOGY_SPEC: &str = "scheduling.koordinator.sh/numa-topology-spec";
pub const LABEL_CPU_BIND_POLICY: &str = "node.koordinator.sh/cpu-bind-policy";
pub const LABEL_NUMA_ALLOCATE_STRATEGY: &str = "node.koordinator.sh/numa-allocate-strategy";
pub const LABEL_NUMA_TOPOLOGY_POLICY: &str = "node.koordinator.sh/numa-topology-policy";

/// A pod's CPU bind policy value (`requiredCPUBindPolicy`, `preferredCPUBindPolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BindPolicy {
    /// Empty or absent.
    #[default]
    Unset,
    Default,
    FullPCPUs,
    SpreadByPCPUs,
    ConstrainedBurst,
    Other,
}

impl BindPolicy {
    fn parse(s: &str) -> Self {
        match s {
            "" => Self::Unset,
            "Default" => Self::Default,
            "FullPCPUs" => Self::FullPCPUs,
            "SpreadByPCPUs" => Self::SpreadByPCPUs,
            "ConstrainedBurst" => Self::ConstrainedBurst,
            _ => Self::Other,
        }
    }

    /// `Default` resolves to the scheduler's default (`FullPCPUs` or `SpreadByPCPUs`).
    pub fn resolve_default(self, default: BindPolicy) -> Self {
        if self == Self::Default { default } else { self }
    }

    /// Whether the policy makes the scheduler allocate a cpuset.
    pub fn binds(self) -> bool {
        matches!(self, Self::FullPCPUs | Self::SpreadByPCPUs)
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Unset => "",
            Self::Default => "Default",
            Self::FullPCPUs => "FullPCPUs",
            Self::SpreadByPCPUs => "SpreadByPCPUs",
            Self::ConstrainedBurst => "ConstrainedBurst",
            Self::Other => "an unknown policy",
        }
    }
}

/// `preferredCPUExclusivePolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExclusivePolicy {
    /// Empty, `None`, `Default` or unknown: no anti-affinity.
    #[default]
    None,
    PcpuLevel,
    NumaNodeLevel,
}

/// The pod's `resource-spec`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ResourceSpec {
    pub required: BindPolicy,
    pub preferred: BindPolicy,
    pub exclusive: ExclusivePolicy,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ResourceSpecJson<'a> {
    #[serde(default, borrow, rename = "requiredCPUBindPolicy")]
    required: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, borrow, rename = "preferredCPUBindPolicy")]
    preferred: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, borrow, rename = "preferredCPUExclusivePolicy")]
    exclusive: Option<std::borrow::Cow<'a, str>>,
}

/// Parse a `resource-spec` annotation (an empty value is the empty spec, as in Koordinator).
pub fn parse_resource_spec(text: &str) -> Result<ResourceSpec, String> {
    if text.is_empty() {
        return Ok(ResourceSpec::default());
    }
    let json: ResourceSpecJson<'_> = serde_json::from_str(text).map_err(|e| e.to_string())?;
    Ok(ResourceSpec {
        required: BindPolicy::parse(json.required.as_deref().unwrap_or("")),
        preferred: BindPolicy::parse(json.preferred.as_deref().unwrap_or("")),
        exclusive: match json.exclusive.as_deref().unwrap_or("") {
            "PCPULevel" => ExclusivePolicy::PcpuLevel,
            "NUMANodeLevel" => ExclusivePolicy::NumaNodeLevel,
            _ => ExclusivePolicy::None,
        },
    })
}

/// A NUMA topology policy (pod `numaTopologyPolicy`, node label or NRT).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NumaPolicy {
    #[default]
    None,
    BestEffort,
    Restricted,
    SingleNumaNode,
    Other,
}

impl NumaPolicy {
    /// A pod's `numaTopologyPolicy` or the node label (`None` and empty mean no policy).
    pub fn parse(s: &str) -> Self {
        match s {
            "" | "None" => Self::None,
            "BestEffort" => Self::BestEffort,
            "Restricted" => Self::Restricted,
            "SingleNUMANode" => Self::SingleNumaNode,
            _ => Self::Other,
        }
    }

    /// The scheduler's `convertToNUMATopologyPolicy` of one NRT `topologyPolicies` entry; the
    /// container-level names are not recognised.
    pub fn from_nrt(s: &str) -> Self {
        match s {
            "BestEffort" => Self::BestEffort,
            "Restricted" => Self::Restricted,
            "SingleNUMANodePodLevel" => Self::SingleNumaNode,
            _ => Self::None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::None => "None",
            Self::BestEffort => "BestEffort",
            Self::Restricted => "Restricted",
            Self::SingleNumaNode => "SingleNUMANode",
            Self::Other => "an unknown policy",
        }
    }

    /// The policies whose NUMA hint must fit (Filter runs `FilterByNUMANode`).
    pub fn constrains(self) -> bool {
        matches!(self, Self::Restricted | Self::SingleNumaNode)
    }
}

/// The pod's `numa-topology-spec`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NumaSpec {
    pub policy: NumaPolicy,
    /// `singleNUMANodeExclusive` is `Required`, or unset while the pod sets a policy.
    pub exclusive_required: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct NumaSpecJson<'a> {
    #[serde(default, borrow, rename = "numaTopologyPolicy")]
    policy: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, borrow, rename = "singleNUMANodeExclusive")]
    exclusive: Option<std::borrow::Cow<'a, str>>,
}

pub fn parse_numa_spec(text: &str) -> Result<NumaSpec, String> {
    if text.is_empty() {
        return Ok(NumaSpec::default());
    }
    let json: NumaSpecJson<'_> = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let raw_policy = json.policy.as_deref().unwrap_or("");
    let exclusive = json.exclusive.as_deref().unwrap_or("");
    Ok(NumaSpec {
        policy: NumaPolicy::parse(raw_policy),
        exclusive_required: exclusive == "Required"
            || (exclusive.is_empty() && !raw_policy.is_empty()),
    })
}

/// One `numaNodeResources` entry: the NUMA id and its cpu amount (milli), if listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NumaNodeCpu {
    pub numa: i32,
    pub cpu_milli: Option<i64>,
}

/// The pod's `resource-status`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceStatus {
    /// The cpuset text as written ("" when none).
    pub cpuset_text: String,
    /// The parsed cpuset, ascending.
    pub cpus: Vec<u32>,
    pub numa: Vec<NumaNodeCpu>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ResourceStatusJson {
    #[serde(default)]
    cpuset: Option<String>,
    #[serde(default, rename = "numaNodeResources")]
    numa_node_resources: Option<Vec<NumaNodeResourceJson>>,
}

#[derive(Deserialize)]
struct NumaNodeResourceJson {
    node: i32,
    #[serde(default)]
    resources: Option<std::collections::BTreeMap<String, serde_json::Value>>,
}

/// Parse a `resource-status` annotation. The error says what is wrong: the JSON, the cpuset
/// (`k8s.io/utils/cpuset` rules) or a cpu quantity.
pub fn parse_resource_status(text: &str) -> Result<ResourceStatus, String> {
    if text.is_empty() {
        return Ok(ResourceStatus::default());
    }
    let json: ResourceStatusJson =
        serde_json::from_str(text).map_err(|e| format!("resource-status is not valid: {e}"))?;
    let cpuset_text = json.cpuset.unwrap_or_default();
    let cpus = parse_cpu_list(&cpuset_text)
        .map_err(|e| format!("resource-status cpuset {cpuset_text:?} does not parse: {e}"))?;
    let mut numa = Vec::new();
    for entry in json.numa_node_resources.unwrap_or_default() {
        let cpu_milli = match entry.resources.as_ref().and_then(|r| r.get("cpu")) {
            None | Some(serde_json::Value::Null) => None,
            Some(serde_json::Value::String(q)) => Some(parse_milli(q).map_err(|e| {
                format!(
                    "resource-status numaNodeResources cpu {q:?} of NUMA node {}: {e}",
                    entry.node
                )
            })?),
            Some(other) => Some(parse_milli(&other.to_string()).map_err(|e| {
                format!(
                    "resource-status numaNodeResources cpu {other} of NUMA node {}: {e}",
                    entry.node
                )
            })?),
        };
        numa.push(NumaNodeCpu {
            numa: entry.node,
            cpu_milli,
        });
    }
    Ok(ResourceStatus {
        cpuset_text,
        cpus,
        numa,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_like_koordinator() {
        let spec = parse_resource_spec(
            r#"{"requiredCPUBindPolicy":"SpreadByPCPUs","preferredCPUExclusivePolicy":"PCPULevel","x":1}"#,
        )
        .unwrap();
        assert_eq!(spec.required, BindPolicy::SpreadByPCPUs);
        assert_eq!(spec.preferred, BindPolicy::Unset);
        assert_eq!(spec.exclusive, ExclusivePolicy::PcpuLevel);
        assert_eq!(parse_resource_spec("").unwrap(), ResourceSpec::default());
        assert!(parse_resource_spec("{").is_err());
        assert!(parse_resource_spec(r#"{"requiredCPUBindPolicy":3}"#).is_err());

        let numa = parse_numa_spec(r#"{"numaTopologyPolicy":"SingleNUMANode"}"#).unwrap();
        assert_eq!(numa.policy, NumaPolicy::SingleNumaNode);
        assert!(
            numa.exclusive_required,
            "Required is the default with a policy"
        );
        let numa = parse_numa_spec(
            r#"{"numaTopologyPolicy":"Restricted","singleNUMANodeExclusive":"Preferred"}"#,
        )
        .unwrap();
        assert!(!numa.exclusive_required);
        assert!(!parse_numa_spec("{}").unwrap().exclusive_required);
    }

    #[test]
    fn status_parses_cpuset_and_numa_cpu() {
        let s = parse_resource_status(
            r#"{"cpuset":"0-1,4","numaNodeResources":[{"node":0,"resources":{"cpu":"3","memory":"1Gi"}},{"node":1}]}"#,
        )
        .unwrap();
        assert_eq!(s.cpus, [0, 1, 4]);
        assert_eq!(
            s.numa,
            [
                NumaNodeCpu {
                    numa: 0,
                    cpu_milli: Some(3000)
                },
                NumaNodeCpu {
                    numa: 1,
                    cpu_milli: None
                }
            ]
        );
        let e = parse_resource_status(r#"{"cpuset":"3-1"}"#).unwrap_err();
        assert!(e.contains("cpuset \"3-1\" does not parse"), "{e}");
        assert!(
            parse_resource_status("not json")
                .unwrap_err()
                .contains("not valid")
        );
        assert!(
            parse_resource_status(r#"{"numaNodeResources":[{"node":0,"resources":{"cpu":"x"}}]}"#)
                .is_err()
        );
    }
}
