//! PodDisruptionBudget arithmetic, as the disruption controller and the Eviction API do it.
//!
//! Owns: parsing a PDB's budget (`minAvailable` / `maxUnavailable`, ints or percentages,
//! `unhealthyPodEvictionPolicy`), the controller's status computation (expected pods, desired
//! healthy, disruptions allowed) and the Eviction API's verdict for one pod. Plain functions over
//! plain numbers: the simulated backend feeds them the live pods of a snapshot.
//!
//! References: `pkg/controller/disruption` (`getExpectedPodCount`, `updatePdbStatus`) and
//! `pkg/registry/core/pod/storage/eviction.go` (`canIgnorePDB`, `checkAndDecrement`).

use std::fmt;

use serde_json::Value;

/// An `IntOrString` budget value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntOrPercent {
    Int(i32),
    /// `"25%"` → `Percent(25)`.
    Percent(i32),
}

impl IntOrPercent {
    /// Parse a JSON `IntOrString`: a number, a numeric string or `"N%"`.
    pub fn parse(value: &Value) -> Result<IntOrPercent, String> {
        match value {
            Value::Number(n) => n
                .as_i64()
                .and_then(|v| i32::try_from(v).ok())
                .map(IntOrPercent::Int)
                .ok_or_else(|| format!("{n} is not a 32-bit integer")),
            Value::String(s) => {
                if let Some(p) = s.strip_suffix('%') {
                    p.parse::<i32>()
                        .map(IntOrPercent::Percent)
                        .map_err(|_| format!("invalid percentage {s:?}"))
                } else {
                    s.parse::<i32>()
                        .map(IntOrPercent::Int)
                        .map_err(|_| format!("invalid value {s:?}: want an integer or \"N%\""))
                }
            }
            other => Err(format!("invalid value {other}: want an integer or \"N%\"")),
        }
    }

    /// `intstr.GetScaledValueFromIntOrPercent`: an int as is; a percentage of `total`, rounded
    /// up or down.
    pub fn scaled(self, total: i32, round_up: bool) -> i32 {
        match self {
            IntOrPercent::Int(v) => v,
            IntOrPercent::Percent(p) => {
                let product = i64::from(p) * i64::from(total);
                let v = if round_up {
                    (product + 99).div_euclid(100)
                } else {
                    product.div_euclid(100)
                };
                i32::try_from(v).unwrap_or(i32::MAX)
            }
        }
    }

    fn is_percent(self) -> bool {
        matches!(self, IntOrPercent::Percent(_))
    }
}

impl fmt::Display for IntOrPercent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IntOrPercent::Int(v) => write!(f, "{v}"),
            IntOrPercent::Percent(p) => write!(f, "{p}%"),
        }
    }
}

/// `spec.unhealthyPodEvictionPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UnhealthyPolicy {
    #[default]
    IfHealthyBudget,
    AlwaysAllow,
}

/// The budget part of a PDB's spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Budget {
    pub min_available: Option<IntOrPercent>,
    pub max_unavailable: Option<IntOrPercent>,
    pub unhealthy_policy: UnhealthyPolicy,
}

impl Budget {
    /// Read the budget from a PDB object (JSON). Unknown policies fall back to the default,
    /// like the API server's defaulting.
    pub fn from_pdb(pdb: &Value) -> Result<Budget, String> {
        let spec = &pdb["spec"];
        let field = |name: &str| -> Result<Option<IntOrPercent>, String> {
            match &spec[name] {
                Value::Null => Ok(None),
                v => IntOrPercent::parse(v)
                    .map(Some)
                    .map_err(|e| format!("spec.{name}: {e}")),
            }
        };
        Ok(Budget {
            min_available: field("minAvailable")?,
            max_unavailable: field("maxUnavailable")?,
            unhealthy_policy: match spec["unhealthyPodEvictionPolicy"].as_str() {
                Some("AlwaysAllow") => UnhealthyPolicy::AlwaysAllow,
                _ => UnhealthyPolicy::IfHealthyBudget,
            },
        })
    }

    /// Whether the expected count comes from the controllers' scale (percentages and
    /// maxUnavailable) rather than the number of selected pods (an integer minAvailable).
    pub fn uses_scale(&self) -> bool {
        self.max_unavailable.is_some() || self.min_available.is_some_and(IntOrPercent::is_percent)
    }
}

/// What the disruption controller writes into `status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PdbStatus {
    pub expected_pods: i32,
    pub desired_healthy: i32,
    pub current_healthy: i32,
    pub disruptions_allowed: i32,
}

/// `getExpectedPodCount` + `updatePdbStatus`: `selected` is the number of pods the selector
/// picks, `scale` the summed desired replicas of their controllers, `healthy` the selected pods
/// that are Ready and not terminating.
pub fn compute_status(budget: &Budget, selected: i32, scale: i32, healthy: i32) -> PdbStatus {
    let (expected, desired) = if let Some(max) = budget.max_unavailable {
        let expected = scale;
        (expected, (expected - max.scaled(expected, true)).max(0))
    } else if let Some(min) = budget.min_available {
        match min {
            IntOrPercent::Int(v) => (selected, v),
            IntOrPercent::Percent(_) => (scale, min.scaled(scale, true)),
        }
    } else {
        (0, 0)
    };
    let mut allowed = healthy - desired;
    if expected <= 0 || allowed <= 0 {
        allowed = 0;
    }
    PdbStatus {
        expected_pods: expected,
        desired_healthy: desired,
        current_healthy: healthy,
        disruptions_allowed: allowed,
    }
}

/// The pod being evicted, as the Eviction API looks at it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EvictedPod {
    /// `Pending`, `Succeeded` or `Failed` (the PDB is not consulted for such pods).
    pub not_running: bool,
    /// Has a deletion timestamp (already terminating: the PDB is not consulted either).
    pub terminating: bool,
    pub ready: bool,
}

/// The Eviction API's answer for one pod under one PDB.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Evict; `consumes` says whether it uses one of the budget's disruptions.
    Allowed { consumes: bool },
    /// HTTP 429: the budget has no disruption left.
    Blocked { message: String },
}

/// `canIgnorePDB`, the unhealthy-pod policies and `checkAndDecrement`.
pub fn eviction_verdict(
    pdb_name: &str,
    budget: &Budget,
    status: &PdbStatus,
    pod: EvictedPod,
) -> Verdict {
    if pod.not_running || pod.terminating {
        return Verdict::Allowed { consumes: false };
    }
    if !pod.ready {
        match budget.unhealthy_policy {
            UnhealthyPolicy::AlwaysAllow => return Verdict::Allowed { consumes: false },
            UnhealthyPolicy::IfHealthyBudget
                if status.current_healthy >= status.desired_healthy
                    && status.desired_healthy > 0 =>
            {
                return Verdict::Allowed { consumes: false };
            }
            UnhealthyPolicy::IfHealthyBudget => {}
        }
    }
    if status.disruptions_allowed <= 0 {
        return Verdict::Blocked {
            message: format!(
                "Cannot evict pod as it would violate the pod's disruption budget. \
                 The disruption budget {pdb_name} needs {} healthy pods and has {} currently",
                status.desired_healthy, status.current_healthy
            ),
        };
    }
    Verdict::Allowed { consumes: true }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn budget(min: Option<Value>, max: Option<Value>) -> Budget {
        let mut spec = serde_json::Map::new();
        if let Some(v) = min {
            spec.insert("minAvailable".into(), v);
        }
        if let Some(v) = max {
            spec.insert("maxUnavailable".into(), v);
        }
        Budget::from_pdb(&json!({ "spec": spec })).expect("valid budget")
    }

    #[test]
    fn scaled_values_round_like_intstr() {
        let cases = [
            (IntOrPercent::Int(3), 10, true, 3),
            (IntOrPercent::Percent(25), 10, true, 3),
            (IntOrPercent::Percent(25), 10, false, 2),
            (IntOrPercent::Percent(50), 3, true, 2),
            (IntOrPercent::Percent(50), 3, false, 1),
            (IntOrPercent::Percent(100), 7, true, 7),
            (IntOrPercent::Percent(0), 7, true, 0),
            (IntOrPercent::Percent(10), 0, true, 0),
        ];
        for (value, total, up, want) in cases {
            assert_eq!(value.scaled(total, up), want, "{value} of {total}, up={up}");
        }
    }

    #[test]
    fn parse_int_or_string() {
        assert_eq!(IntOrPercent::parse(&json!(2)), Ok(IntOrPercent::Int(2)));
        assert_eq!(IntOrPercent::parse(&json!("2")), Ok(IntOrPercent::Int(2)));
        assert_eq!(
            IntOrPercent::parse(&json!("30%")),
            Ok(IntOrPercent::Percent(30))
        );
        assert!(IntOrPercent::parse(&json!("x%")).is_err());
        assert!(IntOrPercent::parse(&json!(true)).is_err());
        assert!(Budget::from_pdb(&json!({"spec": {"minAvailable": "lots"}})).is_err());
    }

    #[test]
    fn status_table() {
        // (budget, selected, scale, healthy) → (expected, desired, allowed)
        let cases = [
            // minAvailable int: expected = selected pods.
            (budget(Some(json!(2)), None), 3, 3, 3, (3, 2, 1)),
            (budget(Some(json!(3)), None), 3, 3, 3, (3, 3, 0)),
            (budget(Some(json!(2)), None), 3, 3, 2, (3, 2, 0)),
            (budget(Some(json!(2)), None), 3, 3, 1, (3, 2, 0)),
            // minAvailable percent: of the scale, rounded up.
            (budget(Some(json!("50%")), None), 3, 3, 3, (3, 2, 1)),
            (budget(Some(json!("50%")), None), 4, 4, 4, (4, 2, 2)),
            (budget(Some(json!("100%")), None), 4, 4, 4, (4, 4, 0)),
            // maxUnavailable: desired = scale − ceil(max).
            (budget(None, Some(json!(1))), 5, 5, 5, (5, 4, 1)),
            (budget(None, Some(json!(1))), 5, 5, 4, (5, 4, 0)),
            (budget(None, Some(json!("25%"))), 6, 6, 6, (6, 4, 2)),
            (budget(None, Some(json!("10%"))), 3, 3, 3, (3, 2, 1)),
            (budget(None, Some(json!(0))), 3, 3, 3, (3, 3, 0)),
            (budget(None, Some(json!(10))), 3, 3, 3, (3, 0, 3)),
            // No pods expected: nothing may be disrupted.
            (budget(None, Some(json!(1))), 0, 0, 0, (0, 0, 0)),
            // Neither field: every healthy pod may go.
            (budget(None, None), 2, 2, 2, (0, 0, 0)),
        ];
        for (b, selected, scale, healthy, (expected, desired, allowed)) in cases {
            let s = compute_status(&b, selected, scale, healthy);
            assert_eq!(
                (s.expected_pods, s.desired_healthy, s.disruptions_allowed),
                (expected, desired, allowed),
                "{b:?} selected={selected} scale={scale} healthy={healthy}"
            );
            assert_eq!(s.current_healthy, healthy);
        }
    }

    #[test]
    fn verdict_table() {
        let running = EvictedPod {
            not_running: false,
            terminating: false,
            ready: true,
        };
        let unready = EvictedPod {
            ready: false,
            ..running
        };
        let pending = EvictedPod {
            not_running: true,
            ready: false,
            ..running
        };
        let min2 = budget(Some(json!(2)), None);
        let mut always = min2;
        always.unhealthy_policy = UnhealthyPolicy::AlwaysAllow;
        let has_room = compute_status(&min2, 3, 3, 3);
        let at_limit = compute_status(&min2, 3, 3, 2);
        let breached = compute_status(&min2, 3, 3, 1);
        let blocked = |v: &Verdict| matches!(v, Verdict::Blocked { .. });
        let cases: [(&Budget, PdbStatus, EvictedPod, bool, bool); 9] = [
            // (budget, status, pod, blocked?, consumes?)
            (&min2, has_room, running, false, true),
            (&min2, at_limit, running, true, false),
            (&min2, at_limit, pending, false, false),
            (
                &min2,
                at_limit,
                EvictedPod {
                    terminating: true,
                    ..running
                },
                false,
                false,
            ),
            // IfHealthyBudget: an unready pod goes while the budget is met …
            (&min2, at_limit, unready, false, false),
            // … but not once it is breached.
            (&min2, breached, unready, true, false),
            // AlwaysAllow: unready pods always go.
            (&always, breached, unready, false, false),
            (&always, breached, running, true, false),
            (&always, has_room, running, false, true),
        ];
        for (i, (b, status, pod, want_blocked, want_consumes)) in cases.into_iter().enumerate() {
            let v = eviction_verdict("shop/web", b, &status, pod);
            assert_eq!(blocked(&v), want_blocked, "case {i}: {v:?}");
            if let Verdict::Allowed { consumes } = v {
                assert_eq!(consumes, want_consumes, "case {i}");
            } else {
                assert!(
                    matches!(&v, Verdict::Blocked { message } if message.contains("shop/web needs 2 healthy pods")),
                    "case {i}: {v:?}"
                );
            }
        }
    }
}
