//! The spill fold: upstream's state machine over device readings (dedicated bytes, shared bytes,
//! dedicated limit), pure — no I/O and no clock; the caller passes each reading's instant.
//!
//! One reading counts as **spilling** when both hold:
//! - dedicated ≥ the threshold: the override when one is set, else
//!   `limit / 100 * DEFAULT_DEDICATED_THRESHOLD_PCT` (integer maths, divide first) — and with
//!   no override a limit below 100 bytes gives no threshold, so the reading never spills;
//! - shared ≥ the first reading's shared bytes (the baseline) + the growth threshold
//!   (default [`DEFAULT_SHARED_GROWTH_BYTES`], saturating).
//!
//! A run of spilling readings is one [`SpillEpisode`]: it opens on the rising edge (start label,
//! peak shared = that reading's, one observation), grows while the readings spill, and is sealed
//! on the falling edge with that reading's label as `end_label`; one still open when the report
//! is taken is sealed with `end_label: None`. Its duration is the last spilling instant minus
//! the first, so an episode of one reading lasts zero.

use std::time::Instant;

use super::report::{
    DEFAULT_DEDICATED_THRESHOLD_PCT, DEFAULT_SHARED_GROWTH_BYTES, SpillEpisode, SpillReport,
};
use crate::backends::spill::Reading;

/// The default dedicated threshold for a limit: `limit / 100 * 85`, or `None` below 100 bytes
/// (an unknown or absurd capacity, where 85 % would round to 0 and every reading would pass).
pub(crate) const fn default_threshold(limit_bytes: u64) -> Option<u64> {
    if limit_bytes < 100 {
        None
    } else {
        Some(limit_bytes / 100 * DEFAULT_DEDICATED_THRESHOLD_PCT)
    }
}

/// The one-shot verdict of `snapshot_is_spilling`: the default threshold and an absolute floor
/// of [`DEFAULT_SHARED_GROWTH_BYTES`] shared bytes (there is no baseline to grow from); `None`
/// when the limit gives no threshold.
pub(crate) const fn snapshot_verdict(r: Reading) -> Option<bool> {
    match default_threshold(r.limit_bytes) {
        Some(t) => Some(r.dedicated_bytes >= t && r.shared_bytes >= DEFAULT_SHARED_GROWTH_BYTES),
        None => None,
    }
}

/// The episode being recorded.
#[derive(Debug, Clone)]
struct Open {
    start_label: String,
    first: Instant,
    last: Instant,
    peak_shared_bytes: u64,
    observations: usize,
}

impl Open {
    fn seal(self, end_label: Option<String>) -> SpillEpisode {
        SpillEpisode {
            start_label: self.start_label,
            end_label,
            peak_shared_bytes: self.peak_shared_bytes,
            observations: self.observations,
            duration: self.last.saturating_duration_since(self.first),
        }
    }
}

/// The fold's state. See the [module docs](self).
#[derive(Debug, Clone)]
pub(crate) struct Fold {
    threshold_override: Option<u64>,
    growth_bytes: u64,
    baseline_shared: Option<u64>,
    open: Option<Open>,
    episodes: Vec<SpillEpisode>,
    spilling: bool,
    spilled: bool,
    peak_dedicated: u64,
    peak_shared: u64,
    last_limit: u64,
    observations: usize,
}

impl Fold {
    /// No reading yet, default thresholds.
    pub(crate) const fn new() -> Fold {
        Fold {
            threshold_override: None,
            growth_bytes: DEFAULT_SHARED_GROWTH_BYTES,
            baseline_shared: None,
            open: None,
            episodes: Vec::new(),
            spilling: false,
            spilled: false,
            peak_dedicated: 0,
            peak_shared: 0,
            last_limit: 0,
            observations: 0,
        }
    }

    /// An absolute dedicated threshold, used instead of the percentage of the limit.
    pub(crate) const fn set_dedicated_threshold(&mut self, bytes: u64) {
        self.threshold_override = Some(bytes);
    }

    /// How far shared bytes must rise above the baseline.
    pub(crate) const fn set_shared_growth(&mut self, bytes: u64) {
        self.growth_bytes = bytes;
    }

    /// Folds one reading taken at `at`, labelled `label`.
    pub(crate) fn observe(&mut self, r: Reading, label: String, at: Instant) {
        self.observations = self.observations.saturating_add(1);
        self.peak_dedicated = self.peak_dedicated.max(r.dedicated_bytes);
        self.peak_shared = self.peak_shared.max(r.shared_bytes);
        self.last_limit = r.limit_bytes;
        let baseline = *self.baseline_shared.get_or_insert(r.shared_bytes);
        let threshold = self
            .threshold_override
            .or_else(|| default_threshold(r.limit_bytes));
        let spilling = threshold.is_some_and(|t| {
            r.dedicated_bytes >= t && r.shared_bytes >= baseline.saturating_add(self.growth_bytes)
        });
        self.spilling = spilling;
        if spilling {
            self.spilled = true;
            match &mut self.open {
                Some(ep) => {
                    ep.last = at;
                    ep.peak_shared_bytes = ep.peak_shared_bytes.max(r.shared_bytes);
                    ep.observations = ep.observations.saturating_add(1);
                }
                None => {
                    self.open = Some(Open {
                        start_label: label,
                        first: at,
                        last: at,
                        peak_shared_bytes: r.shared_bytes,
                        observations: 1,
                    });
                }
            }
        } else if let Some(ep) = self.open.take() {
            self.episodes.push(ep.seal(Some(label)));
        }
    }

    /// Whether the latest reading spilled.
    pub(crate) const fn is_spilling(&self) -> bool {
        self.spilling
    }

    /// Whether any reading spilled (latched).
    pub(crate) const fn has_spilled(&self) -> bool {
        self.spilled
    }

    /// The report; an open episode is sealed with no end label.
    pub(crate) fn into_report(mut self, measurable: bool) -> SpillReport {
        if let Some(ep) = self.open.take() {
            self.episodes.push(ep.seal(None));
        }
        SpillReport {
            episodes: self.episodes,
            peak_dedicated_bytes: self.peak_dedicated,
            dedicated_limit_bytes: self.last_limit,
            peak_shared_bytes: self.peak_shared,
            baseline_shared_bytes: self.baseline_shared.unwrap_or(0),
            observations: self.observations,
            measurable,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;
    const LIMIT: u64 = 16 * GIB;

    fn r(dedicated: u64, shared: u64) -> Reading {
        Reading {
            dedicated_bytes: dedicated,
            shared_bytes: shared,
            limit_bytes: LIMIT,
        }
    }

    /// Folds `readings`, one per 100 ms, labelled `t0`, `t1`, ….
    fn run(fold: &mut Fold, readings: &[Reading]) -> Instant {
        let t0 = Instant::now();
        for (i, reading) in readings.iter().enumerate() {
            let at = t0 + Duration::from_millis(100 * i as u64);
            fold.observe(*reading, format!("t{i}"), at);
        }
        t0
    }

    fn report(readings: &[Reading]) -> SpillReport {
        let mut f = Fold::new();
        run(&mut f, readings);
        f.into_report(true)
    }

    const FULL: u64 = 15 * GIB; // above 85 % of 16 GiB
    const LOW: u64 = 8 * GIB;
    const BASE: u64 = 100 * MIB;
    const GROWN: u64 = BASE + 300 * MIB;

    #[test]
    fn default_threshold_divides_first() {
        assert_eq!(default_threshold(0), None);
        assert_eq!(default_threshold(99), None);
        assert_eq!(default_threshold(100), Some(85));
        assert_eq!(default_threshold(199), Some(85), "199 / 100 = 1");
        assert_eq!(default_threshold(16 * GIB), Some(16 * GIB / 100 * 85));
        assert_eq!(default_threshold(u64::MAX), Some(u64::MAX / 100 * 85));
    }

    #[test]
    fn rising_and_falling_edges_make_one_episode() {
        let rep = report(&[
            r(LOW, BASE),
            r(FULL, GROWN),
            r(FULL, GROWN + GIB),
            r(FULL, GROWN),
            r(LOW, BASE),
        ]);
        assert_eq!(rep.episodes.len(), 1);
        let ep = &rep.episodes[0];
        assert_eq!(ep.start_label, "t1");
        assert_eq!(ep.end_label.as_deref(), Some("t4"));
        assert_eq!(ep.observations, 3);
        assert_eq!(ep.peak_shared_bytes, GROWN + GIB);
        assert_eq!(ep.duration, Duration::from_millis(200));
        assert_eq!(rep.observations, 5);
        assert_eq!(rep.baseline_shared_bytes, BASE);
        assert_eq!(rep.peak_shared_bytes, GROWN + GIB);
        assert_eq!(rep.peak_dedicated_bytes, FULL);
        assert_eq!(rep.dedicated_limit_bytes, LIMIT);
        assert!(rep.measurable);
    }

    #[test]
    fn flicker_gives_one_episode_per_stretch() {
        let rep = report(&[
            r(LOW, BASE),
            r(FULL, GROWN),
            r(LOW, GROWN),
            r(FULL, GROWN),
            r(FULL, BASE),
            r(FULL, GROWN),
        ]);
        let labels: Vec<(&str, Option<&str>)> = rep
            .episodes
            .iter()
            .map(|e| (e.start_label.as_str(), e.end_label.as_deref()))
            .collect();
        assert_eq!(
            labels,
            [("t1", Some("t2")), ("t3", Some("t4")), ("t5", None)]
        );
    }

    #[test]
    fn one_spilling_reading_lasts_zero() {
        let rep = report(&[r(LOW, BASE), r(FULL, GROWN), r(LOW, BASE)]);
        assert_eq!(rep.episodes[0].observations, 1);
        assert_eq!(rep.episodes[0].duration, Duration::ZERO);
        assert_eq!(rep.total_spill_duration(), Duration::ZERO);
        assert!(rep.spilled(), "a zero-length episode is still a spill");
    }

    #[test]
    fn still_spilling_at_the_end_has_no_end_label() {
        let mut f = Fold::new();
        run(&mut f, &[r(LOW, BASE), r(FULL, GROWN), r(FULL, GROWN)]);
        assert!(f.is_spilling() && f.has_spilled());
        let rep = f.into_report(true);
        assert_eq!(rep.episodes[0].end_label, None);
        assert_eq!(rep.episodes[0].duration, Duration::from_millis(100));
    }

    #[test]
    fn the_latch_survives_recovery() {
        let mut f = Fold::new();
        run(&mut f, &[r(LOW, BASE), r(FULL, GROWN), r(LOW, BASE)]);
        assert!(!f.is_spilling());
        assert!(f.has_spilled());
    }

    #[test]
    fn the_baseline_is_the_first_reading() {
        // Started mid-spill: the inflated baseline hides the spill (upstream's stated limit).
        let rep = report(&[r(FULL, GROWN), r(FULL, GROWN + 100 * MIB), r(LOW, BASE)]);
        assert_eq!(rep.baseline_shared_bytes, GROWN);
        assert!(!rep.spilled());
    }

    #[test]
    fn growth_and_threshold_boundaries_are_inclusive() {
        let growth = BASE + DEFAULT_SHARED_GROWTH_BYTES;
        let threshold = LIMIT / 100 * 85;
        assert!(report(&[r(LOW, BASE), r(threshold, growth)]).spilled());
        assert!(!report(&[r(LOW, BASE), r(threshold, growth - 1)]).spilled());
        assert!(!report(&[r(LOW, BASE), r(threshold - 1, growth)]).spilled());
    }

    #[test]
    fn shared_growth_alone_is_benign() {
        // Staging-heap churn with VRAM far from full, and a full VRAM with flat shared bytes.
        assert!(!report(&[r(LOW, BASE), r(LOW, BASE + 4 * GIB)]).spilled());
        assert!(!report(&[r(LOW, BASE), r(LIMIT, BASE)]).spilled());
    }

    #[test]
    fn a_limit_below_100_never_spills() {
        for limit in [0, 1, 99] {
            let tiny = |d, s| Reading {
                dedicated_bytes: d,
                shared_bytes: s,
                limit_bytes: limit,
            };
            let rep = report(&[tiny(0, 0), tiny(LIMIT, 10 * GIB)]);
            assert!(!rep.spilled(), "limit {limit}");
            assert_eq!(rep.observations, 2);
            assert_eq!(rep.dedicated_limit_bytes, limit);
            assert_eq!(rep.peak_dedicated_bytes, LIMIT, "peaks still update");
        }
    }

    #[test]
    fn overrides_replace_the_defaults() {
        let mut f = Fold::new();
        f.set_dedicated_threshold(4 * GIB);
        f.set_shared_growth(10 * MIB);
        run(&mut f, &[r(LOW, BASE), r(4 * GIB, BASE + 10 * MIB)]);
        assert!(
            f.has_spilled(),
            "4 GiB is below 85 % but meets the override"
        );

        // An override applies even where the limit gives no threshold.
        let mut f = Fold::new();
        f.set_dedicated_threshold(GIB);
        let unknown = |d, s| Reading {
            dedicated_bytes: d,
            shared_bytes: s,
            limit_bytes: 0,
        };
        run(&mut f, &[unknown(0, BASE), unknown(2 * GIB, GROWN)]);
        assert!(f.has_spilled());
    }

    #[test]
    fn the_last_limit_is_reported() {
        let mut f = Fold::new();
        let t0 = Instant::now();
        f.observe(r(LOW, BASE), "a".into(), t0);
        f.observe(
            Reading {
                limit_bytes: 8 * GIB,
                ..r(LOW, BASE)
            },
            "b".into(),
            t0,
        );
        assert_eq!(f.into_report(true).dedicated_limit_bytes, 8 * GIB);
    }

    #[test]
    fn no_reading_reports_zeros() {
        let rep = Fold::new().into_report(false);
        assert_eq!(rep.observations, 0);
        assert_eq!(rep.baseline_shared_bytes, 0);
        assert!(rep.episodes.is_empty() && !rep.measurable);
    }

    #[test]
    fn the_snapshot_uses_an_absolute_floor() {
        let floor = DEFAULT_SHARED_GROWTH_BYTES;
        let snap = |d, s, l| {
            snapshot_verdict(Reading {
                dedicated_bytes: d,
                shared_bytes: s,
                limit_bytes: l,
            })
        };
        assert_eq!(snap(FULL, floor, LIMIT), Some(true));
        assert_eq!(snap(FULL, floor - 1, LIMIT), Some(false));
        assert_eq!(snap(LOW, 4 * GIB, LIMIT), Some(false));
        assert_eq!(snap(FULL, 4 * GIB, 99), None, "no threshold: can't tell");
        // Shaped like upstream's published field campaign on a 16 GiB card: dedicated near 89 %
        // with a 134 MiB idle shared baseline (no spill), and a spill at 3.1 GiB shared.
        assert_eq!(snap(14_500 * MIB, 134 * MIB, 16_311 * MIB), Some(false));
        assert_eq!(snap(15_100 * MIB, 3_174 * MIB, 16_311 * MIB), Some(true));
    }

    // PDH's readings (Windows, tested everywhere) through the same fold.
    #[test]
    fn pdh_spill_feeds_the_shared_fold_and_skips_failed_samples() {
        use crate::backends::wddm::PdhSpill;
        use crate::backends::wddm::parse::Luid;
        use crate::backends::wddm::tests::{FakePdh, sample};
        let luid = Luid { high: 0, low: 0xA };
        let at = |ded: u64, shared: u64| {
            Ok(vec![sample(
                "luid_0x00000000_0x0000000A_phys_0",
                Some(ded),
                Some(shared),
            )])
        };
        let mut spill = PdhSpill {
            counters: FakePdh {
                process: Vec::new(),
                adapter: vec![
                    at(4 * GIB, 134 * MIB),
                    at(15 * GIB, 200 * MIB),
                    Ok(vec![sample(
                        "luid_0x00000000_0x0000000A_phys_0",
                        Some(15 * GIB),
                        None,
                    )]),
                    at(15 * GIB, 3 * GIB),
                    at(6 * GIB, 150 * MIB),
                ],
            },
            luid,
            limit_bytes: 16 * GIB,
        };
        let mut fold = Fold::new();
        let mut skipped = 0;
        let t0 = std::time::Instant::now();
        for i in 0..6u64 {
            match spill.sample() {
                Some(r) => fold.observe(r, format!("t{i}"), t0 + std::time::Duration::from_secs(i)),
                None => skipped += 1,
            }
        }
        assert_eq!(skipped, 2, "one unreadable counter, one failed collection");
        let report = fold.into_report(true);
        assert_eq!(report.baseline_shared_bytes, 134 * MIB);
        assert_eq!(report.dedicated_limit_bytes, 16 * GIB);
        assert_eq!(report.episodes.len(), 1, "{report:?}");
        assert_eq!(report.episodes[0].start_label, "t3");
        assert_eq!(report.episodes[0].end_label.as_deref(), Some("t4"));
        assert_eq!(report.episodes[0].peak_shared_bytes, 3 * GIB);
    }
}
