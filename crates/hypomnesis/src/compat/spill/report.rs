//! What upstream's spill tracker reports: [`SpillReport`] and its [`SpillEpisode`]s (and, with
//! `test-helpers`, [`SpillReportBuilder`]), and the default thresholds — the vocabulary the fold
//! (`fold.rs`) produces and `hypomnesis::spill` re-exports.

use std::time::Duration;

/// The default dedicated threshold, in percent of the device's dedicated capacity.
pub const DEFAULT_DEDICATED_THRESHOLD_PCT: u64 = 85;

/// The default growth of shared bytes over the first reading that, with dedicated memory at the
/// threshold, counts as spill: 256 MiB.
pub const DEFAULT_SHARED_GROWTH_BYTES: u64 = 256 * 1024 * 1024;

/// One contiguous stretch of spilling readings.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpillEpisode {
    /// The label of the first spilling reading.
    pub start_label: String,
    /// The label of the first reading after the stretch; `None` when the run ended while still
    /// spilling.
    pub end_label: Option<String>,
    /// The largest shared figure during the stretch.
    pub peak_shared_bytes: u64,
    /// How many readings spilled in the stretch.
    pub observations: usize,
    /// From the first spilling reading to the last (zero for a single reading).
    pub duration: Duration,
}

/// What a [`SpillTracker`](crate::SpillTracker) saw, from [`SpillTracker::into_report`](crate::SpillTracker::into_report).
#[non_exhaustive]
#[derive(Debug, Clone)]
pub struct SpillReport {
    /// The episodes, in order.
    pub episodes: Vec<SpillEpisode>,
    /// The largest dedicated figure of any reading.
    pub peak_dedicated_bytes: u64,
    /// The dedicated capacity of the last reading (0 when never read).
    pub dedicated_limit_bytes: u64,
    /// The largest shared figure of any reading.
    pub peak_shared_bytes: u64,
    /// The first reading's shared figure (0 when never read).
    pub baseline_shared_bytes: u64,
    /// Readings folded (failed ones are not counted).
    pub observations: usize,
    /// Whether the device could be measured at all.
    pub measurable: bool,
}

impl SpillReport {
    /// Whether any episode was recorded.
    #[must_use]
    pub const fn spilled(&self) -> bool {
        !self.episodes.is_empty()
    }

    /// The first episode's start label.
    #[must_use]
    pub fn first_spill_label(&self) -> Option<&str> {
        self.episodes.first().map(|e| e.start_label.as_str())
    }

    /// The sum of every episode's duration.
    #[must_use]
    pub fn total_spill_duration(&self) -> Duration {
        self.episodes.iter().map(|e| e.duration).sum()
    }

    /// The longest episode; of several equally long, the earliest.
    #[must_use]
    pub fn longest_episode(&self) -> Option<&SpillEpisode> {
        self.episodes
            .iter()
            .fold(None, |best: Option<&SpillEpisode>, e| match best {
                Some(b) if b.duration >= e.duration => Some(b),
                _ => Some(e),
            })
    }

    /// A builder for tests (feature `test-helpers`).
    #[cfg(feature = "test-helpers")]
    #[must_use]
    pub fn builder() -> SpillReportBuilder {
        SpillReportBuilder::default()
    }
}

/// Builds a [`SpillReport`] in downstream tests (feature `test-helpers`). Every field starts at
/// zero, `false` or empty; [`SpillReportBuilder::episode`] appends one episode.
#[cfg(feature = "test-helpers")]
#[derive(Debug, Clone, Default)]
pub struct SpillReportBuilder {
    episodes: Vec<SpillEpisode>,
    peak_dedicated_bytes: u64,
    dedicated_limit_bytes: u64,
    peak_shared_bytes: u64,
    baseline_shared_bytes: u64,
    observations: usize,
    measurable: bool,
}

#[cfg(feature = "test-helpers")]
impl SpillReportBuilder {
    /// Sets [`SpillReport::peak_dedicated_bytes`].
    #[must_use]
    pub const fn peak_dedicated_bytes(mut self, bytes: u64) -> Self {
        self.peak_dedicated_bytes = bytes;
        self
    }
    /// Sets [`SpillReport::dedicated_limit_bytes`].
    #[must_use]
    pub const fn dedicated_limit_bytes(mut self, bytes: u64) -> Self {
        self.dedicated_limit_bytes = bytes;
        self
    }
    /// Sets [`SpillReport::peak_shared_bytes`].
    #[must_use]
    pub const fn peak_shared_bytes(mut self, bytes: u64) -> Self {
        self.peak_shared_bytes = bytes;
        self
    }
    /// Sets [`SpillReport::baseline_shared_bytes`].
    #[must_use]
    pub const fn baseline_shared_bytes(mut self, bytes: u64) -> Self {
        self.baseline_shared_bytes = bytes;
        self
    }
    /// Sets [`SpillReport::observations`].
    #[must_use]
    pub const fn observations(mut self, n: usize) -> Self {
        self.observations = n;
        self
    }
    /// Sets [`SpillReport::measurable`].
    #[must_use]
    pub const fn measurable(mut self, measurable: bool) -> Self {
        self.measurable = measurable;
        self
    }
    /// Appends one episode.
    #[must_use]
    pub fn episode(
        mut self,
        start_label: &str,
        end_label: Option<&str>,
        peak_shared_bytes: u64,
        observations: usize,
        duration: Duration,
    ) -> Self {
        self.episodes.push(SpillEpisode {
            start_label: start_label.to_string(),
            end_label: end_label.map(str::to_string),
            peak_shared_bytes,
            observations,
            duration,
        });
        self
    }
    /// The report.
    #[must_use]
    pub fn build(self) -> SpillReport {
        SpillReport {
            episodes: self.episodes,
            peak_dedicated_bytes: self.peak_dedicated_bytes,
            dedicated_limit_bytes: self.dedicated_limit_bytes,
            peak_shared_bytes: self.peak_shared_bytes,
            baseline_shared_bytes: self.baseline_shared_bytes,
            observations: self.observations,
            measurable: self.measurable,
        }
    }
}
