//! Small text helpers for proposal reasons and logs, shared so every plugin writes them alike:
//! pod phases, human durations, taints as kubectl prints them, percentages.
//!
//! Pure functions of their arguments; must not look at a cluster.

use rebalancer_policy_sdk::model::PodPhase;

/// The pod phase as Kubernetes writes it (`Running`, …).
pub fn phase_name(phase: PodPhase) -> &'static str {
    match phase {
        PodPhase::Pending => "Pending",
        PodPhase::Running => "Running",
        PodPhase::Succeeded => "Succeeded",
        PodPhase::Failed => "Failed",
        PodPhase::Unknown => "Unknown",
    }
}

/// A duration in whole seconds for people: the two largest units, `3d4h`, `5m20s`, `45s`.
pub fn human_duration(secs: u64) -> String {
    const UNITS: [(u64, &str); 4] = [(86_400, "d"), (3_600, "h"), (60, "m"), (1, "s")];
    let Some(first) = UNITS.iter().position(|&(size, _)| secs >= size) else {
        return "0s".into();
    };
    let (size, unit) = UNITS[first];
    let mut out = format!("{}{unit}", secs / size);
    if let Some(&(next, next_unit)) = UNITS.get(first + 1) {
        let rest = (secs % size) / next;
        if rest > 0 {
            out.push_str(&format!("{rest}{next_unit}"));
        }
    }
    out
}

/// `{key}={value}:{effect}` (or `{key}:{effect}` for an empty value), as kubectl prints a taint.
pub fn taint_text(key: &str, value: &str, effect: &str) -> String {
    if value.is_empty() {
        format!("{key}:{effect}")
    } else {
        format!("{key}={value}:{effect}")
    }
}

/// A percentage without a trailing `.0` (`20`, `12.5`), as the node-utilization plugins print
/// thresholds.
pub fn percentage(p: f64) -> String {
    if p.fract() == 0.0 {
        format!("{p:.0}")
    } else {
        format!("{p:.1}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_naturally() {
        let cases = [
            (0, "0s"),
            (45, "45s"),
            (60, "1m"),
            (320, "5m20s"),
            (3_600, "1h"),
            (3_660, "1h1m"),
            (3_601, "1h"),
            (86_400 * 3 + 3_600 * 4 + 59, "3d4h"),
            (u64::MAX, "213503982334601d7h"),
        ];
        for (secs, want) in cases {
            assert_eq!(human_duration(secs), want, "{secs}s");
        }
    }

    #[test]
    fn taints_print_like_kubectl() {
        assert_eq!(
            taint_text("dedicated", "gpu", "NoSchedule"),
            "dedicated=gpu:NoSchedule"
        );
        assert_eq!(
            taint_text("spot", "", "PreferNoSchedule"),
            "spot:PreferNoSchedule"
        );
    }

    #[test]
    fn percentages_drop_a_trailing_zero() {
        assert_eq!(percentage(20.0), "20");
        assert_eq!(percentage(12.5), "12.5");
        assert_eq!(percentage(33.333), "33.3");
    }
}
