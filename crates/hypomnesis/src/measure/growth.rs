//! Growth trends: whether a figure (a process's RAM, or its VRAM on one device) grew
//! **steadily** over a window — a leak — as opposed to a load that jumps once and stays, a
//! warm-up that finished, or a garbage collector's sawtooth. What `hmn watch` flags
//! (`↑ 1.2 GiB/h for 35 min`).
//!
//! The rule ([`assess`], pure; [`GrowthTracker`] keeps the window and the flag over time):
//!
//! | Test | Default ([`GrowthRule::default`]) | Rejects |
//! |---|---|---|
//! | enough data: the window's span and samples | span ≥ 10 min, ≥ 20 samples (window 30 min) | a verdict on a few samples |
//! | least-squares slope `b` > 0, rise `R = b × span` | `R` ≥ 256 MiB | slow drift, noise |
//! | R² of the fit | ≥ 0.8 | sawtooth, noise |
//! | the rise is spread: of 4 equal-time quarters, how many rise by more than 5 % of `R` (a quarter's rise: the median of its last ⅛ of samples less the median of its first ⅛) | ≥ 3 | one jump, two jumps |
//! | no quarter carries too much of the total positive rise | ≤ 60 % | one jump |
//! | the last quarter still rises | > 5 % of `R` | a warm-up that finished |
//!
//! The points are downsampled to at most 256 (equal-time buckets, the median of each) before
//! the fit. A flag, once raised, is cleared after 3 consecutive evaluations that fail.
//! Validated against simulated windows (docs/run-and-watch.md, "Growth"): a linear leak and a
//! staircase leak are flagged; a single load, a finished warm-up and a GC sawtooth are not.

use std::collections::VecDeque;
use std::time::Duration;

use crate::types::spelling::spelled;

#[cfg(feature = "serde")]
use serde::Serialize;

/// The thresholds of the rule (see the [module docs](self)).
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct GrowthRule {
    /// How far back the window reaches.
    pub window: Duration,
    /// The least span of samples a verdict needs.
    pub min_span: Duration,
    /// The fewest samples a verdict needs.
    pub min_samples: usize,
    /// The least rise over the window (`slope × span`), bytes.
    pub min_rise_bytes: u64,
    /// The least R² of the least-squares fit.
    pub min_r_squared: f64,
    /// Consecutive failing evaluations that clear a flag.
    pub clear_after: u32,
}

impl Default for GrowthRule {
    fn default() -> Self {
        GrowthRule {
            window: Duration::from_secs(30 * 60),
            min_span: Duration::from_secs(10 * 60),
            min_samples: 20,
            min_rise_bytes: 256 << 20,
            min_r_squared: 0.8,
            clear_after: 3,
        }
    }
}

impl GrowthRule {
    /// The window (the least span is a third of it, at most 10 min).
    #[must_use]
    pub fn window(mut self, window: Duration) -> Self {
        self.window = window;
        self.min_span = (window / 3).min(Duration::from_secs(600));
        self
    }

    /// The least rise over the window.
    #[must_use]
    pub fn min_rise_bytes(mut self, bytes: u64) -> Self {
        self.min_rise_bytes = bytes;
        self
    }

    /// The fewest samples.
    #[must_use]
    pub fn min_samples(mut self, n: usize) -> Self {
        self.min_samples = n.max(3);
        self
    }
}

/// Points kept for the fit.
const MAX_POINTS: usize = 256;
/// Raw points kept per figure before older ones are thinned.
const MAX_RAW: usize = 2048;
/// A quarter "rises" by more than this fraction of the window's rise.
const QUARTER_RISE: f64 = 0.05;
/// No quarter may carry more than this fraction of the total positive rise.
const MAX_QUARTER_SHARE: f64 = 0.6;
/// Quarters that must rise.
const QUARTERS_RISING: usize = 3;

/// A fitted trend over a window.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(Serialize))]
#[non_exhaustive]
pub struct Growth {
    /// The least-squares slope, bytes per second.
    pub bytes_per_second: f64,
    /// The span of the samples fitted, seconds.
    pub window_seconds: f64,
    /// R² of the fit.
    pub r_squared: f64,
    /// Samples in the window (before downsampling).
    pub samples: usize,
}

impl Growth {
    /// The slope per hour, bytes.
    pub fn bytes_per_hour(&self) -> f64 {
        self.bytes_per_second * 3600.0
    }
}

spelled! {
    /// Why a window is not a steady rise.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    #[non_exhaustive]
    pub enum Rejection {
        /// Too short a span or too few samples.
        TooFew = "too_few",
        /// Flat or falling.
        NotRising = "not_rising",
        /// Risen by less than the least rise.
        TooSmall = "too_small",
        /// The fit is poor (a sawtooth, noise).
        NotLinear = "not_linear",
        /// The rise is in one or two places (a jump, a load).
        NotSpread = "not_spread",
        /// The last quarter does not rise (a warm-up that finished).
        Stopped = "stopped",
    }
}

/// [`assess`]'s answer: the fit (when there were enough points), and whether it is a steady
/// rise.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct Assessment {
    /// The fit, when the window had enough data.
    pub fit: Option<Growth>,
    /// `None`: a steady rise; else why not.
    pub rejected: Option<Rejection>,
}

impl Assessment {
    /// Whether the window is a steady rise.
    pub fn is_growth(&self) -> bool {
        self.rejected.is_none() && self.fit.is_some()
    }
}

/// Least squares over `points` (`t` seconds, value): slope, intercept, R².
fn fit(points: &[(f64, f64)]) -> Option<(f64, f64)> {
    let n = points.len() as f64;
    if points.len() < 3 {
        return None;
    }
    let (mt, mv) = points
        .iter()
        .fold((0.0, 0.0), |(a, b), (t, v)| (a + t / n, b + v / n));
    let (mut stt, mut stv, mut svv) = (0.0, 0.0, 0.0);
    for (t, v) in points {
        let (dt, dv) = (t - mt, v - mv);
        stt += dt * dt;
        stv += dt * dv;
        svv += dv * dv;
    }
    if stt <= 0.0 {
        return None;
    }
    let slope = stv / stt;
    let r2 = if svv <= 0.0 {
        0.0
    } else {
        (stv * stv) / (stt * svv)
    };
    Some((slope, r2))
}

/// The median (the mean of the middle two for an even count), by selection rather than a
/// full sort; `values` is reordered.
fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let (m, odd) = (values.len() / 2, values.len() % 2 == 1);
    let (below, mid, _) = values.select_nth_unstable_by(m, f64::total_cmp);
    let mid = *mid;
    if odd {
        return Some(mid);
    }
    let lower = below.iter().copied().max_by(f64::total_cmp).unwrap_or(mid);
    Some((lower + mid) / 2.0)
}

/// The equal-time bucket of a point `t` seconds into a window of `span` seconds.
fn bucket(t: f64, first: f64, span: f64) -> usize {
    ((((t - first) / span) * MAX_POINTS as f64) as usize).min(MAX_POINTS - 1)
}

/// At most [`MAX_POINTS`] points: equal-time buckets, the mean time and median value of each.
///
/// Points in time order (as [`GrowthTracker`] keeps them) fill the buckets in runs, each
/// reduced as it ends with one scratch buffer: no allocation per bucket. Points out of order
/// are bucketed one by one.
fn downsample(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    if points.len() <= MAX_POINTS {
        return points.to_vec();
    }
    let (Some(first), Some(last)) = (points.first(), points.last()) else {
        return Vec::new();
    };
    let span = (last.0 - first.0).max(f64::MIN_POSITIVE);
    let index: Vec<usize> = points.iter().map(|p| bucket(p.0, first.0, span)).collect();
    if index.windows(2).any(|w| w[1] < w[0]) {
        return downsample_unordered(points, &index);
    }
    let mut out = Vec::with_capacity(MAX_POINTS);
    let mut scratch: Vec<f64> = Vec::new();
    let mut start = 0;
    while start < points.len() {
        let end = start + index[start..].partition_point(|i| *i == index[start]);
        out.extend(reduce(&points[start..end], &mut scratch));
        start = end;
    }
    out
}

/// One bucket's point: the mean time and the median value of `bucket` (`None` when empty),
/// the values copied into `scratch` for the median.
fn reduce(bucket: &[(f64, f64)], scratch: &mut Vec<f64>) -> Option<(f64, f64)> {
    let t = bucket.iter().map(|p| p.0).sum::<f64>() / bucket.len() as f64;
    scratch.clear();
    scratch.extend(bucket.iter().map(|p| p.1));
    median(scratch).map(|m| (t, m))
}

/// [`downsample`] of points out of time order: a bucket per index, in index order.
fn downsample_unordered(points: &[(f64, f64)], index: &[usize]) -> Vec<(f64, f64)> {
    let mut buckets: Vec<Vec<(f64, f64)>> = vec![Vec::new(); MAX_POINTS];
    for (p, i) in points.iter().zip(index) {
        if let Some(b) = buckets.get_mut(*i) {
            b.push(*p);
        }
    }
    let mut scratch = Vec::new();
    buckets
        .iter()
        .filter_map(|b| reduce(b, &mut scratch))
        .collect()
}

/// The rise of each of 4 equal-time quarters of `points` (the median of its last ⅛ of samples
/// less the median of its first ⅛; `None` for a quarter without samples).
fn quarter_rises(points: &[(f64, f64)]) -> [Option<f64>; 4] {
    let mut out = [None; 4];
    let (Some(first), Some(last)) = (points.first(), points.last()) else {
        return out;
    };
    let span = last.0 - first.0;
    for (q, slot) in out.iter_mut().enumerate() {
        let (lo, hi) = (
            first.0 + span * q as f64 / 4.0,
            first.0 + span * (q + 1) as f64 / 4.0,
        );
        let inside: Vec<f64> = points
            .iter()
            .filter(|p| p.0 >= lo && (p.0 < hi || (q == 3 && p.0 <= hi)))
            .map(|p| p.1)
            .collect();
        if inside.len() < 2 {
            continue;
        }
        let k = (inside.len() / 8).max(1);
        let mut head: Vec<f64> = inside.iter().take(k).copied().collect();
        let mut tail: Vec<f64> = inside.iter().rev().take(k).copied().collect();
        if let (Some(a), Some(b)) = (median(&mut head), median(&mut tail)) {
            *slot = Some(b - a);
        }
    }
    out
}

/// Whether `points` (`(seconds, bytes)`, in time order, all inside the window) rise steadily
/// under `rule` (see the [module docs](self)).
pub fn assess(points: &[(f64, f64)], rule: &GrowthRule) -> Assessment {
    let reject = |fit, why| Assessment {
        fit,
        rejected: Some(why),
    };
    let span = span_of(points);
    if too_few(points, rule) {
        return reject(None, Rejection::TooFew);
    }
    let fitted = downsample(points);
    let Some((slope, r2)) = fit(&fitted) else {
        return reject(None, Rejection::TooFew);
    };
    let g = Growth {
        bytes_per_second: slope,
        window_seconds: span,
        r_squared: r2,
        samples: points.len(),
    };
    if slope.is_nan() || slope <= 0.0 {
        return reject(Some(g), Rejection::NotRising);
    }
    let rise = slope * span;
    if rise < rule.min_rise_bytes as f64 {
        return reject(Some(g), Rejection::TooSmall);
    }
    if r2 < rule.min_r_squared {
        return reject(Some(g), Rejection::NotLinear);
    }
    let quarters = quarter_rises(&fitted);
    let rising = quarters
        .iter()
        .filter(|q| q.is_some_and(|r| r > QUARTER_RISE * rise))
        .count();
    let positive: f64 = quarters.iter().flatten().map(|r| r.max(0.0)).sum();
    let largest = quarters
        .iter()
        .flatten()
        .fold(0.0f64, |a, r| a.max(r.max(0.0)));
    if rising < QUARTERS_RISING || positive <= 0.0 || largest > MAX_QUARTER_SHARE * positive {
        return reject(Some(g), Rejection::NotSpread);
    }
    if !quarters[3].is_some_and(|r| r > QUARTER_RISE * rise) {
        return reject(Some(g), Rejection::Stopped);
    }
    Assessment {
        fit: Some(g),
        rejected: None,
    }
}

/// The time from the first of `points` to the last (0 for none).
fn span_of(points: &[(f64, f64)]) -> f64 {
    match (points.first(), points.last()) {
        (Some(a), Some(b)) => b.0 - a.0,
        _ => 0.0,
    }
}

/// Whether `points` are too few (or span too little) for [`assess`] to judge under `rule`.
fn too_few(points: &[(f64, f64)], rule: &GrowthRule) -> bool {
    let span = span_of(points);
    points.len() < rule.min_samples || span < rule.min_span.as_secs_f64() || span <= 0.0
}

/// Whether `points` (in time order) are sure to fail [`assess`] for another reason than too few
/// samples, because their values vary too little for the fitted rise to reach the rule's
/// least.
///
/// The fit is made over at most [`MAX_POINTS`] points (the samples, or bucket medians) whose
/// values lie in the samples' range `[lo, hi]` and whose first and last lie at least
/// `span × (1 − 2/MAX_POINTS)` apart; for such points the least-squares rise over `span` is at
/// most `(hi − lo)/2 × √(2n) / (1 − 2/MAX_POINTS)`, under `12 × (hi − lo)` for n ≤ 256. A fit
/// exists when there are at least 3 points and the span is positive (a downsampled window: a
/// point outside the first and last buckets).
fn cannot_rise(points: &[(f64, f64)], rule: &GrowthRule) -> bool {
    if too_few(points, rule) || points.len() < 3 {
        return false;
    }
    let (first, span) = (points.first().map_or(0.0, |p| p.0), span_of(points));
    let (lo, hi) = points
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), p| {
            (lo.min(p.1), hi.max(p.1))
        });
    if (hi - lo) * 12.0 >= rule.min_rise_bytes as f64 {
        return false;
    }
    points.len() <= MAX_POINTS
        || points.iter().any(|p| {
            let b = bucket(p.0, first, span);
            b != 0 && b != MAX_POINTS - 1
        })
}

/// A raised flag: the trend, and for how long the figure has grown.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(Serialize))]
#[non_exhaustive]
pub struct GrowthFlag {
    /// The latest fit that held.
    pub growth: Growth,
    /// How long the figure has grown, seconds: from the start of the window in which the flag
    /// was first raised to the latest sample.
    pub for_seconds: f64,
}

/// One figure over time, with the rule's flag (see the [module docs](self)): feed it every
/// sample with [`GrowthTracker::observe`].
#[derive(Debug, Clone)]
pub struct GrowthTracker {
    rule: GrowthRule,
    points: VecDeque<(f64, f64)>,
    /// When the window of the first holding evaluation started (seconds).
    growing_from: Option<f64>,
    flag: Option<GrowthFlag>,
    failing: u32,
    /// Tests: evaluate every window with [`assess`], without the [`cannot_rise`] shortcut.
    #[cfg(test)]
    exact: bool,
}

impl GrowthTracker {
    /// A tracker under `rule`.
    pub fn new(rule: GrowthRule) -> GrowthTracker {
        GrowthTracker {
            rule,
            points: VecDeque::new(),
            growing_from: None,
            flag: None,
            failing: 0,
            #[cfg(test)]
            exact: false,
        }
    }

    /// Adds a sample (`t` seconds on a monotonic clock, the figure in bytes) and evaluates the
    /// window. Returns the flag as it now stands. A sample earlier than the previous one is
    /// ignored.
    pub fn observe(&mut self, t: f64, bytes: u64) -> Option<GrowthFlag> {
        if self.points.back().is_some_and(|p| t < p.0) || !t.is_finite() {
            return self.flag;
        }
        self.points.push_back((t, bytes as f64));
        let start = t - self.rule.window.as_secs_f64();
        while self.points.front().is_some_and(|p| p.0 < start) {
            self.points.pop_front();
        }
        if self.points.len() > MAX_RAW {
            // Thin evenly: every other point.
            let kept: VecDeque<(f64, f64)> = self
                .points
                .iter()
                .enumerate()
                .filter(|(i, _)| i % 2 == 0 || *i + 1 == self.points.len())
                .map(|(_, p)| *p)
                .collect();
            self.points = kept;
        }
        // In place: no copy of the window per sample.
        let window: &[(f64, f64)] = self.points.make_contiguous();
        #[cfg(test)]
        let shortcut = !self.exact;
        #[cfg(not(test))]
        let shortcut = true;
        let a = if shortcut && cannot_rise(window, &self.rule) {
            // What `assess` would reject (not a steady rise, not for too few samples), known
            // without the fit: a figure that stays flat costs a scan, not a downsampling.
            Assessment {
                fit: None,
                rejected: Some(Rejection::TooSmall),
            }
        } else {
            assess(window, &self.rule)
        };
        match (a.is_growth(), a.fit) {
            (true, Some(g)) => {
                let from = *self
                    .growing_from
                    .get_or_insert_with(|| window.first().map_or(t, |p| p.0));
                self.failing = 0;
                self.flag = Some(GrowthFlag {
                    growth: g,
                    for_seconds: t - from,
                });
            }
            _ if a.rejected == Some(Rejection::TooFew) => {}
            _ => {
                self.failing = self.failing.saturating_add(1);
                if self.failing >= self.rule.clear_after {
                    self.flag = None;
                    self.growing_from = None;
                } else if let Some(f) = &mut self.flag {
                    f.for_seconds = t - self.growing_from.unwrap_or(t);
                }
            }
        }
        self.flag
    }

    /// The flag as it stands.
    pub fn flag(&self) -> Option<GrowthFlag> {
        self.flag
    }
}

#[cfg(test)]
mod tests;
