//! Effective pod requests and the QoS class, computed the way Kubernetes computes them.
//!
//! Owns two pieces of API semantics: `resourcehelper.PodRequests` (component-helpers, default
//! options: spec requests, sidecar-aware init containers, pod-level `spec.resources`, overhead)
//! and `GetPodQOS` / `ComputePodQOS` (`pkg/apis/core/v1/helper/qos`, with the PodLevelResources
//! gate on, as it is by default since 1.34). Inputs are small owned structs so that this compiles
//! for wasm guests without Kubernetes types; amounts are nano-units from
//! [`crate::k8s::quantity::parse_nano`], so sums are exact as `Quantity.Add` is, and only the
//! final result is rounded to milli-units ([`to_milli`]).
//!
//! Resource names are generic (`N: AsRef<str>`): `String` for authors, borrowed strings for the
//! host's ingestion hot path. Lists keep first-seen order so results are deterministic.

use crate::k8s::quantity::{self, QuantityError};
use crate::model::QosClass;

/// Amounts per resource name, in nano-units. Names are unique within a list.
pub type ResourceList<N = String> = Vec<(N, i128)>;

/// `resources.requests` / `resources.limits` of a container or of the pod (`spec.resources`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceRequirements<N = String> {
    pub requests: ResourceList<N>,
    pub limits: ResourceList<N>,
}

impl<N> Default for ResourceRequirements<N> {
    fn default() -> Self {
        ResourceRequirements {
            requests: Vec::new(),
            limits: Vec::new(),
        }
    }
}

/// One container's resources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerResources<N = String> {
    pub requests: ResourceList<N>,
    pub limits: ResourceList<N>,
    /// `restartPolicy: Always`: on an init container this makes it a sidecar (a restartable init
    /// container) that keeps running next to the app containers. Ignored on app containers.
    pub restart_always: bool,
}

impl<N> Default for ContainerResources<N> {
    fn default() -> Self {
        ContainerResources {
            requests: Vec::new(),
            limits: Vec::new(),
            restart_always: false,
        }
    }
}

/// What of a pod spec matters for requests and QoS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodResources<N = String> {
    /// `spec.containers`.
    pub containers: Vec<ContainerResources<N>>,
    /// `spec.initContainers`, in order (order matters for sidecars).
    pub init_containers: Vec<ContainerResources<N>>,
    /// `spec.overhead` (RuntimeClass overhead).
    pub overhead: ResourceList<N>,
    /// `spec.resources` (pod-level resources); `None` when the field is absent. Note that for
    /// QoS, Kubernetes looks only at pod-level resources whenever the field is present, even
    /// when it is an empty object.
    pub pod_level: Option<ResourceRequirements<N>>,
}

impl<N> Default for PodResources<N> {
    fn default() -> Self {
        PodResources {
            containers: Vec::new(),
            init_containers: Vec::new(),
            overhead: Vec::new(),
            pod_level: None,
        }
    }
}

/// Parse `(name, quantity)` pairs into a [`ResourceList`] (later duplicates replace earlier ones,
/// as a JSON object's would). The error names the offending resource.
pub fn parse_list<'a>(
    pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Result<ResourceList<String>, (String, QuantityError)> {
    let mut list: ResourceList<String> = Vec::new();
    for (name, value) in pairs {
        let nano = quantity::parse_nano(value).map_err(|e| (name.to_owned(), e))?;
        set(&mut list, &name.to_owned(), nano);
    }
    Ok(list)
}

/// The amount of `name` in `list`, if present.
pub fn get<N: AsRef<str>>(list: &[(N, i128)], name: &str) -> Option<i128> {
    list.iter()
        .find(|(n, _)| n.as_ref() == name)
        .map(|&(_, q)| q)
}

fn position<N: AsRef<str>>(list: &[(N, i128)], name: &str) -> Option<usize> {
    list.iter().position(|(n, _)| n.as_ref() == name)
}

fn set<N: AsRef<str> + Clone>(list: &mut ResourceList<N>, name: &N, amount: i128) {
    match position(list, name.as_ref()) {
        Some(i) => list[i].1 = amount,
        None => list.push((name.clone(), amount)),
    }
}

/// `addResourceList`: `list += new`, per resource.
fn add_into<N: AsRef<str> + Clone>(list: &mut ResourceList<N>, new: &[(N, i128)]) {
    for (name, amount) in new {
        match position(list, name.as_ref()) {
            Some(i) => list[i].1 = list[i].1.saturating_add(*amount),
            None => list.push((name.clone(), *amount)),
        }
    }
}

/// `maxResourceList`: `list = max(list, new)`, per resource in `new`.
fn max_into<N: AsRef<str> + Clone>(list: &mut ResourceList<N>, new: &[(N, i128)]) {
    for (name, amount) in new {
        match position(list, name.as_ref()) {
            Some(i) => {
                if *amount > list[i].1 {
                    list[i].1 = *amount;
                }
            }
            None => list.push((name.clone(), *amount)),
        }
    }
}

/// Resources that pod-level `spec.resources` may set: cpu, memory and hugepages.
pub fn is_supported_pod_level_resource(name: &str) -> bool {
    name == "cpu" || name == "memory" || name.starts_with("hugepages-")
}

/// The effective requests of a pod, as `resourcehelper.PodRequests(pod, PodResourcesOptions{})`:
///
/// - app containers are summed;
/// - init containers run one after another, so each resource takes the maximum over them, where
///   a regular init container also needs the sidecars started before it (`restart_always` init
///   containers, which keep running and are therefore added to the app containers' sum as well);
/// - per resource, the pod needs `max(app sum, init maximum)`;
/// - pod-level `spec.requests` replace the result for cpu, memory and hugepages when set;
/// - `spec.overhead` is added last.
pub fn pod_requests<N: AsRef<str> + Clone>(pod: &PodResources<N>) -> ResourceList<N> {
    let mut result: ResourceList<N> = Vec::new();
    for c in &pod.containers {
        add_into(&mut result, &c.requests);
    }
    let mut sidecars: ResourceList<N> = Vec::new();
    let mut init_max: ResourceList<N> = Vec::new();
    for c in &pod.init_containers {
        if c.restart_always {
            add_into(&mut result, &c.requests);
            add_into(&mut sidecars, &c.requests);
            max_into(&mut init_max, &sidecars);
        } else {
            let mut combined = c.requests.clone();
            add_into(&mut combined, &sidecars);
            max_into(&mut init_max, &combined);
        }
    }
    max_into(&mut result, &init_max);
    if let Some(pod_level) = &pod.pod_level
        && pod_level
            .requests
            .iter()
            .any(|(n, _)| is_supported_pod_level_resource(n.as_ref()))
    {
        for (name, amount) in &pod_level.requests {
            if is_supported_pod_level_resource(name.as_ref()) {
                set(&mut result, name, *amount);
            }
        }
    }
    add_into(&mut result, &pod.overhead);
    result
}

/// Round a list to milli-units (away from zero, saturating), keeping its order.
pub fn to_milli<N: Clone>(list: &[(N, i128)]) -> Vec<(N, i64)> {
    list.iter()
        .map(|(n, q)| (n.clone(), quantity::nano_to_milli_saturating(*q)))
        .collect()
}

/// `resourceQOS`: the class of one set of requests and limits, looking at cpu and memory.
fn resource_qos<N: AsRef<str>>(requests: &[(N, i128)], limits: &[(N, i128)]) -> QosClass {
    if requests.is_empty() && limits.is_empty() {
        return QosClass::BestEffort;
    }
    let mut qos: Option<QosClass> = None;
    for resource in ["cpu", "memory"] {
        let req = get(requests, resource).unwrap_or(0);
        let lim = get(limits, resource).unwrap_or(0);
        if req != lim {
            return QosClass::Burstable;
        }
        let best_effort = req == 0;
        match qos {
            None => {
                qos = Some(if best_effort {
                    QosClass::BestEffort
                } else {
                    QosClass::Guaranteed
                })
            }
            Some(q) => {
                if best_effort != (q == QosClass::BestEffort) {
                    return QosClass::Burstable;
                }
            }
        }
    }
    qos.unwrap_or(QosClass::BestEffort)
}

/// `ComputePodQOS`: BestEffort when no container (app or init) sets cpu or memory requests or
/// limits; Guaranteed when every container sets cpu and memory limits equal to its requests;
/// Burstable otherwise. Pod-level `spec.resources`, when present, decide alone. Ephemeral
/// containers cannot set resources and are not considered.
pub fn compute_pod_qos<N: AsRef<str>>(pod: &PodResources<N>) -> QosClass {
    if let Some(pod_level) = &pod.pod_level {
        return resource_qos(&pod_level.requests, &pod_level.limits);
    }
    let mut pod_qos: Option<QosClass> = None;
    for c in pod.init_containers.iter().chain(&pod.containers) {
        let qos = resource_qos(&c.requests, &c.limits);
        if qos == QosClass::Burstable {
            return qos;
        }
        match pod_qos {
            None => pod_qos = Some(qos),
            Some(p) if p != qos => return QosClass::Burstable,
            Some(_) => {}
        }
    }
    pod_qos.unwrap_or(QosClass::BestEffort)
}

/// `GetPodQOS`: the class recorded in `status.qosClass` when there is one, else
/// [`compute_pod_qos`].
pub fn pod_qos<N: AsRef<str>>(status_qos: Option<QosClass>, pod: &PodResources<N>) -> QosClass {
    status_qos.unwrap_or_else(|| compute_pod_qos(pod))
}

/// Parse a `status.qosClass` value.
pub fn parse_qos_class(s: &str) -> Option<QosClass> {
    match s {
        "BestEffort" => Some(QosClass::BestEffort),
        "Burstable" => Some(QosClass::Burstable),
        "Guaranteed" => Some(QosClass::Guaranteed),
        _ => None,
    }
}

/// The Kubernetes spelling of a QoS class.
pub fn qos_class_name(qos: QosClass) -> &'static str {
    match qos {
        QosClass::BestEffort => "BestEffort",
        QosClass::Burstable => "Burstable",
        QosClass::Guaranteed => "Guaranteed",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k8s::quantity::parse_milli;

    fn list(pairs: &[(&str, &str)]) -> ResourceList {
        parse_list(pairs.iter().copied()).expect("valid quantities")
    }

    fn container(requests: &[(&str, &str)], limits: &[(&str, &str)]) -> ContainerResources {
        ContainerResources {
            requests: list(requests),
            limits: list(limits),
            restart_always: false,
        }
    }

    fn sidecar(requests: &[(&str, &str)]) -> ContainerResources {
        ContainerResources {
            restart_always: true,
            ..container(requests, &[])
        }
    }

    fn milli(pod: &PodResources) -> Vec<(String, i64)> {
        to_milli(&pod_requests(pod))
    }

    fn m(s: &str) -> i64 {
        parse_milli(s).unwrap()
    }

    #[test]
    fn app_containers_are_summed() {
        let pod = PodResources {
            containers: vec![
                container(&[("cpu", "100m"), ("memory", "128Mi")], &[]),
                container(&[("cpu", "250m"), ("nvidia.com/gpu", "1")], &[]),
                container(&[], &[("cpu", "2")]),
            ],
            ..Default::default()
        };
        assert_eq!(
            milli(&pod),
            vec![
                ("cpu".to_string(), 350),
                ("memory".to_string(), m("128Mi")),
                ("nvidia.com/gpu".to_string(), 1000),
            ]
        );
    }

    #[test]
    fn init_containers_take_the_maximum() {
        let pod = PodResources {
            containers: vec![container(&[("cpu", "100m"), ("memory", "1Gi")], &[])],
            init_containers: vec![
                container(&[("cpu", "500m")], &[]),
                container(&[("cpu", "200m"), ("memory", "2Gi")], &[]),
                container(&[("ephemeral-storage", "1Gi")], &[]),
            ],
            ..Default::default()
        };
        assert_eq!(
            milli(&pod),
            vec![
                ("cpu".to_string(), 500),
                ("memory".to_string(), m("2Gi")),
                ("ephemeral-storage".to_string(), m("1Gi")),
            ]
        );
    }

    #[test]
    fn sidecars_follow_the_kep_753_formula() {
        // app 1 cpu; sidecar A 1; init B 5 (runs while A runs: needs 6); sidecar C 2.
        // app sum with sidecars = 1 + 1 + 2 = 4; init peak = max(1, 5 + 1, 1 + 2) = 6.
        let pod = PodResources {
            containers: vec![container(&[("cpu", "1")], &[])],
            init_containers: vec![
                sidecar(&[("cpu", "1")]),
                container(&[("cpu", "5")], &[]),
                sidecar(&[("cpu", "2")]),
            ],
            ..Default::default()
        };
        assert_eq!(milli(&pod), vec![("cpu".to_string(), 6000)]);

        // A regular init container before any sidecar does not see it.
        let pod = PodResources {
            containers: vec![container(&[("cpu", "1"), ("memory", "1Gi")], &[])],
            init_containers: vec![
                container(&[("cpu", "3")], &[]),
                sidecar(&[("cpu", "1"), ("memory", "512Mi")]),
                container(&[("memory", "1Gi")], &[]),
            ],
            ..Default::default()
        };
        // app + sidecar = 2 cpu, 1.5Gi; init peaks: cpu 3 (first), memory 1Gi + 512Mi = 1.5Gi.
        assert_eq!(
            milli(&pod),
            vec![
                ("cpu".to_string(), 3000),
                ("memory".to_string(), m("1.5Gi"))
            ]
        );
    }

    #[test]
    fn overhead_is_added_after_the_maximum() {
        let pod = PodResources {
            containers: vec![container(&[("cpu", "100m")], &[])],
            init_containers: vec![container(&[("cpu", "1")], &[])],
            overhead: list(&[("cpu", "250m"), ("memory", "120Mi")]),
            ..Default::default()
        };
        assert_eq!(
            milli(&pod),
            vec![
                ("cpu".to_string(), 1250),
                ("memory".to_string(), m("120Mi"))
            ]
        );
    }

    #[test]
    fn pod_level_requests_replace_supported_resources_only() {
        let pod = PodResources {
            containers: vec![container(
                &[
                    ("cpu", "100m"),
                    ("memory", "64Mi"),
                    ("ephemeral-storage", "1Gi"),
                ],
                &[],
            )],
            overhead: list(&[("cpu", "10m")]),
            pod_level: Some(ResourceRequirements {
                requests: list(&[("cpu", "2"), ("ephemeral-storage", "5Gi")]),
                limits: vec![],
            }),
            ..Default::default()
        };
        assert_eq!(
            milli(&pod),
            vec![
                ("cpu".to_string(), 2010),
                ("memory".to_string(), m("64Mi")),
                ("ephemeral-storage".to_string(), m("1Gi")),
            ]
        );
        // Pod-level requests with no supported resource are ignored entirely.
        let pod = PodResources {
            containers: vec![container(&[("cpu", "100m")], &[])],
            pod_level: Some(ResourceRequirements {
                requests: list(&[("ephemeral-storage", "5Gi")]),
                limits: vec![],
            }),
            ..Default::default()
        };
        assert_eq!(milli(&pod), vec![("cpu".to_string(), 100)]);
    }

    #[test]
    fn sums_are_exact_below_a_milli_unit() {
        // 0.4m + 0.4m = 0.8m → 1m (MilliValue of the exact sum), not 2m.
        let pod = PodResources {
            containers: vec![
                container(&[("cpu", "400u")], &[]),
                container(&[("cpu", "400u")], &[]),
            ],
            ..Default::default()
        };
        assert_eq!(milli(&pod), vec![("cpu".to_string(), 1)]);
    }

    #[test]
    fn empty_pod_has_no_requests() {
        assert!(pod_requests(&PodResources::<String>::default()).is_empty());
    }

    #[test]
    fn works_with_borrowed_names() {
        let pod: PodResources<&str> = PodResources {
            containers: vec![ContainerResources {
                requests: vec![("cpu", 5 * quantity::NANO_PER_MILLI)],
                ..Default::default()
            }],
            ..Default::default()
        };
        assert_eq!(to_milli(&pod_requests(&pod)), vec![("cpu", 5)]);
    }

    #[test]
    fn parse_list_names_the_bad_resource() {
        let err = parse_list([("cpu", "1"), ("memory", "lots")]).unwrap_err();
        assert_eq!(err.0, "memory");
        assert!(err.1.to_string().contains("\"lots\""));
        // Later duplicates win.
        assert_eq!(
            parse_list([("cpu", "1"), ("cpu", "2")]).unwrap(),
            vec![("cpu".to_string(), 2 * quantity::NANO_PER_UNIT)]
        );
    }

    #[test]
    fn qos_best_effort() {
        let pod = PodResources {
            containers: vec![container(&[], &[]), container(&[], &[])],
            ..Default::default()
        };
        assert_eq!(compute_pod_qos(&pod), QosClass::BestEffort);
        // Only non-cpu/memory resources: still BestEffort.
        let pod = PodResources {
            containers: vec![container(
                &[("ephemeral-storage", "1Gi")],
                &[("nvidia.com/gpu", "1")],
            )],
            ..Default::default()
        };
        assert_eq!(compute_pod_qos(&pod), QosClass::BestEffort);
        // Zero requests count as unset.
        let pod = PodResources {
            containers: vec![container(&[("cpu", "0")], &[])],
            ..Default::default()
        };
        assert_eq!(compute_pod_qos(&pod), QosClass::BestEffort);
        assert_eq!(
            compute_pod_qos(&PodResources::<String>::default()),
            QosClass::BestEffort
        );
    }

    #[test]
    fn qos_guaranteed() {
        let g = || {
            container(
                &[("cpu", "1"), ("memory", "1Gi")],
                &[("cpu", "1000m"), ("memory", "1024Mi")],
            )
        };
        let pod = PodResources {
            containers: vec![g(), g()],
            init_containers: vec![g()],
            ..Default::default()
        };
        assert_eq!(compute_pod_qos(&pod), QosClass::Guaranteed);
        // Extra non-qos resources do not matter.
        let pod = PodResources {
            containers: vec![container(
                &[
                    ("cpu", "1"),
                    ("memory", "1Gi"),
                    ("ephemeral-storage", "1Gi"),
                ],
                &[("cpu", "1"), ("memory", "1Gi")],
            )],
            ..Default::default()
        };
        assert_eq!(compute_pod_qos(&pod), QosClass::Guaranteed);
    }

    #[test]
    fn qos_burstable() {
        let cases = [
            // requests below limits
            vec![container(
                &[("cpu", "500m"), ("memory", "1Gi")],
                &[("cpu", "1"), ("memory", "1Gi")],
            )],
            // only requests
            vec![container(&[("cpu", "100m")], &[])],
            // limits only (no API-server defaulting here)
            vec![container(&[], &[("cpu", "1"), ("memory", "1Gi")])],
            // cpu guaranteed, memory unset
            vec![container(&[("cpu", "1")], &[("cpu", "1")])],
            // one guaranteed container, one best-effort
            vec![
                container(
                    &[("cpu", "1"), ("memory", "1Gi")],
                    &[("cpu", "1"), ("memory", "1Gi")],
                ),
                container(&[], &[]),
            ],
        ];
        for containers in cases {
            let pod = PodResources {
                containers: containers.clone(),
                ..Default::default()
            };
            assert_eq!(compute_pod_qos(&pod), QosClass::Burstable, "{containers:?}");
        }
        // A best-effort init container next to a guaranteed app container.
        let pod = PodResources {
            containers: vec![container(
                &[("cpu", "1"), ("memory", "1Gi")],
                &[("cpu", "1"), ("memory", "1Gi")],
            )],
            init_containers: vec![container(&[], &[])],
            ..Default::default()
        };
        assert_eq!(compute_pod_qos(&pod), QosClass::Burstable);
    }

    #[test]
    fn qos_pod_level_resources_decide_alone() {
        let pod = PodResources {
            containers: vec![container(&[("cpu", "100m")], &[])],
            pod_level: Some(ResourceRequirements {
                requests: list(&[("cpu", "1"), ("memory", "1Gi")]),
                limits: list(&[("cpu", "1"), ("memory", "1Gi")]),
            }),
            ..Default::default()
        };
        assert_eq!(compute_pod_qos(&pod), QosClass::Guaranteed);
        let pod = PodResources {
            containers: vec![container(&[("cpu", "1"), ("memory", "1Gi")], &[])],
            pod_level: Some(ResourceRequirements::default()),
            ..Default::default()
        };
        assert_eq!(compute_pod_qos(&pod), QosClass::BestEffort);
    }

    #[test]
    fn get_pod_qos_prefers_the_status() {
        let pod = PodResources {
            containers: vec![container(&[("cpu", "100m")], &[])],
            ..Default::default()
        };
        assert_eq!(pod_qos(None, &pod), QosClass::Burstable);
        assert_eq!(
            pod_qos(Some(QosClass::Guaranteed), &pod),
            QosClass::Guaranteed
        );
        assert_eq!(parse_qos_class("Guaranteed"), Some(QosClass::Guaranteed));
        assert_eq!(parse_qos_class("guaranteed"), None);
        for q in [
            QosClass::BestEffort,
            QosClass::Burstable,
            QosClass::Guaranteed,
        ] {
            assert_eq!(parse_qos_class(qos_class_name(q)), Some(q));
        }
    }
}
