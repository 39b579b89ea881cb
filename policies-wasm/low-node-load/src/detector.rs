//! The per-node anomaly detectors (Koordinator's `anomaly.BasicDetector` in a go-cache keyed by
//! node name), kept in the policy state between runs instead of in memory: one state key per
//! cache ([`NODE_KEY`] for the node pass, [`PROD_KEY`] for the prod pass), a JSON object of node
//! name → [`Detector`].
//!
//! Owns the state machine and its persistence; must not classify nodes (the plan says which
//! nodes are marked, reset or counted normal). Times are the snapshot's (`ctx.now_ms()`).

use std::collections::BTreeMap;

use rebalancer_policy_sdk::Context;
use serde::{Deserialize, Serialize};

use crate::args::Condition;

/// State key of the node-usage detectors.
pub const NODE_KEY: &str = "detectors/node";
/// State key of the prod-usage detectors.
pub const PROD_KEY: &str = "detectors/prod";

/// One node's detector. Field names are short: the state is capped (1 MiB by default) and a
/// cluster can hold a detector per node.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Detector {
    /// In the anomaly state.
    #[serde(rename = "a", default, skip_serializing_if = "std::ops::Not::not")]
    pub anomalous: bool,
    /// Consecutive abnormal marks.
    #[serde(rename = "ab", default)]
    pub abnormalities: u32,
    /// Consecutive normal marks.
    #[serde(rename = "no", default)]
    pub normalities: u32,
    /// While anomalous: when the anomaly state ends (ms), set on entering it, never extended.
    #[serde(rename = "x", default)]
    pub expires_ms: i64,
    /// When the cache forgets this detector (ms); `None`: never (`detectorCacheTimeout` 0).
    #[serde(rename = "c", default, skip_serializing_if = "Option::is_none")]
    pub forget_ms: Option<i64>,
    /// `countMetricUpdates`: the metric update time last counted.
    #[serde(rename = "u", default, skip_serializing_if = "Option::is_none")]
    pub counted_update_ms: Option<i64>,
}

impl Detector {
    fn become_ok(&mut self) {
        self.anomalous = false;
        self.abnormalities = 0;
        self.normalities = 0;
        self.expires_ms = 0;
    }

    /// `currentState`: an anomaly ends when it expired (strictly before now) or the normal
    /// condition holds.
    fn current(&mut self, now: i64, condition: &Condition) -> bool {
        if self.anomalous
            && (self.expires_ms < now || self.normalities > condition.consecutive_normalities)
        {
            self.become_ok();
        }
        self.anomalous
    }

    /// `Mark(false)`: count an abnormal round; more than `consecutiveAbnormalities` of them make
    /// the node anomalous for `timeout` (counters cleared). Returns whether it is anomalous.
    pub fn mark_abnormal(&mut self, now: i64, condition: &Condition) -> bool {
        let anomalous = self.current(now, condition);
        self.abnormalities += 1;
        self.normalities = 0;
        if !anomalous && self.abnormalities > condition.consecutive_abnormalities {
            self.anomalous = true;
            self.abnormalities = 0;
            self.normalities = 0;
            self.expires_ms = now + condition.detector_timeout_ms();
        }
        self.current(now, condition)
    }

    /// `Mark(true)`: count a normal round; an anomalous node with more than
    /// `consecutiveNormalities` of them is normal again.
    pub fn mark_normal(&mut self, now: i64, condition: &Condition) {
        let anomalous = self.current(now, condition);
        self.normalities += 1;
        self.abnormalities = 0;
        if anomalous && self.normalities > condition.consecutive_normalities {
            self.become_ok();
        }
    }

    /// `Reset()`: back to the normal state. A detector already normal keeps its counters
    /// (Koordinator's `setState` does nothing when the state does not change).
    pub fn reset(&mut self) {
        if self.anomalous {
            self.become_ok();
        }
    }
}

/// One cache of detectors, loaded from the policy state and written back when changed.
#[derive(Debug, Default)]
pub struct Detectors {
    key: &'static str,
    pub map: BTreeMap<String, Detector>,
    changed: bool,
}

impl Detectors {
    /// The detectors under `key`, without those the cache has forgotten by `now`. Unreadable
    /// state (an older layout) starts afresh, as Koordinator does after a restart.
    pub fn load(ctx: &mut Context<'_>, key: &'static str, now: i64) -> Self {
        let mut map: BTreeMap<String, Detector> = ctx.state_get_json(key).unwrap_or_default();
        let before = map.len();
        map.retain(|_, d| d.forget_ms.is_none_or(|t| now <= t));
        Detectors {
            key,
            changed: map.len() != before,
            map,
        }
    }

    /// The detector of `node` if the cache holds it (go-cache `Get`, which does not refresh it).
    pub fn get(&mut self, node: &str) -> Option<&mut Detector> {
        let d = self.map.get_mut(node)?;
        self.changed = true;
        Some(d)
    }

    /// `filterRealAbnormalNodes` for one source: get or create its detector, count the round
    /// (with `countMetricUpdates`, only when the metric's update time changed), and keep it for
    /// `cache_ms` more (go-cache `Set`). Whether the node is anomalous.
    pub fn mark_source(
        &mut self,
        node: &str,
        now: i64,
        condition: &Condition,
        cache_ms: Option<i64>,
        metric_update: Option<(i64, bool)>,
    ) -> bool {
        self.changed = true;
        let d = self.map.entry(node.to_owned()).or_default();
        let anomalous = match metric_update {
            Some((update, true)) if d.counted_update_ms == Some(update) => {
                d.current(now, condition)
            }
            Some((update, count_updates)) => {
                if count_updates {
                    d.counted_update_ms = Some(update);
                }
                d.mark_abnormal(now, condition)
            }
            None => d.mark_abnormal(now, condition),
        };
        d.forget_ms = cache_ms.map(|ms| now + ms);
        anomalous
    }

    /// Write the cache back if anything changed (an empty cache removes the key).
    pub fn save(self, ctx: &mut Context<'_>) -> Result<(), String> {
        if !self.changed {
            return Ok(());
        }
        if self.map.is_empty() {
            ctx.state_remove(self.key);
            return Ok(());
        }
        ctx.state_put_json(self.key, &self.map)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const C: Condition = Condition {
        timeout_ms: Some(60_000),
        consecutive_abnormalities: 2,
        consecutive_normalities: 1,
    };

    #[test]
    fn anomalous_on_the_round_after_n_then_for_the_timeout() {
        let mut d = Detector::default();
        assert!(!d.mark_abnormal(0, &C));
        assert!(!d.mark_abnormal(10_000, &C));
        assert!(d.mark_abnormal(20_000, &C), "third round: more than 2");
        assert_eq!((d.abnormalities, d.expires_ms), (0, 80_000));
        assert!(
            d.mark_abnormal(80_000, &C),
            "not yet expired (strictly before)"
        );
        assert!(!d.mark_abnormal(80_001, &C), "expired: counting restarts");
        assert_eq!(d.abnormalities, 1);
    }

    #[test]
    fn normal_marks_and_resets() {
        let mut d = Detector::default();
        for t in 0..3 {
            d.mark_abnormal(t, &C);
        }
        assert!(d.anomalous);
        d.mark_normal(3, &C);
        assert!(d.anomalous, "one normal mark is not more than 1");
        d.mark_normal(4, &C);
        assert!(!d.anomalous, "two are");
        d.mark_abnormal(5, &C);
        d.reset();
        assert_eq!(
            d.abnormalities, 1,
            "a reset in the normal state keeps the count"
        );
        d.mark_abnormal(6, &C);
        d.mark_abnormal(7, &C);
        assert!(d.anomalous);
        d.reset();
        assert_eq!(d, Detector::default());
    }
}
