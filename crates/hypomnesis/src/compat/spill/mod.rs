//! Upstream's `hypomnesis::spill`: GPU memory overflowing out of VRAM into system memory, as
//! episodes over a run.
//!
//! Owns upstream's items ([`SpillTracker`], [`SpillReport`], [`SpillEpisode`],
//! [`is_spill_measurable`], [`snapshot_is_spilling`], the `DEFAULT_*` thresholds and, with
//! `test-helpers`, `SpillReportBuilder`) and two additions: [`SpillTracker::with_probe`]
//! (a tracker reading through your own [`Probe`]) and [`SpillTracker::unmeasurable_reason`].
//!
//! # What counts as spill
//! Residency, not commitment: a reading spills when the device's **dedicated** memory in use
//! is at least 85 % of its capacity (or an absolute threshold you set) **and** the GPU's
//! buffers resident in **shared** system memory have grown by at least 256 MiB (or a growth you
//! set) over the first reading. Shared memory in use alone is normal (upload heaps, small driver
//! buffers); a full VRAM alone is normal too. Both together mean buffers are being pushed out.
//! Start the tracker before the workload: a first reading taken mid-spill makes the baseline
//! too high and hides the spill.
//!
//! Each contiguous run of spilling readings is a [`SpillEpisode`]. [`SpillTracker::is_spilling`]
//! is the latest reading's verdict; [`SpillTracker::has_spilled`] latches. The tracker reads
//! only when you call [`SpillTracker::observe`]: a spill shorter than the gap between two calls
//! is invisible. A reading that fails is skipped — never folded as zeros.
//!
//! # Platforms
//! | Platform | Dedicated / shared | Measurable |
//! |---|---|---|
//! | Windows (upstream: WDDM, PDH adapter counters) | dedicated usage / shared usage | not in this crate yet (issue 11): not measurable, with the reason |
//! | Linux, amdgpu | sysfs `mem_info_vram_used` / `mem_info_gtt_used`, limit `mem_info_vram_total` | yes |
//! | Linux, xe / i915 discrete | sums over the device's fdinfo clients: resident VRAM / resident GTT + system; limit from sysfs when it has one | when sysfs gives the VRAM size |
//! | Linux, NVIDIA | — (no system-memory fallback for VRAM; no figure) | no, with the reason |
//! | Linux, integrated GPUs; macOS | — (one pool of system memory: nothing to spill into) | no, with the reason |
//!
//! Upstream is never measurable on Linux; this crate is, on AMD and discrete Intel GPUs. Code
//! that asserts `!is_spill_measurable()` on Linux (upstream's smoke test does) fails on such a
//! machine. Device indices are the [`Probe`]'s: NVIDIA devices first, then DRM devices.
//!
//! ```no_run
//! use hypomnesis::SpillTracker;
//! let mut tracker = SpillTracker::new(0)?;
//! for step in 0..100 {
//!     tracker.observe(format!("step {step}"));
//!     if tracker.has_spilled() {
//!         break; // shrink the batch, free a cache, …
//!     }
//! }
//! if let Some(why) = tracker.unmeasurable_reason() {
//!     eprintln!("spill not measurable: {why}");
//! }
//! let report = tracker.into_report();
//! println!("{} episode(s)", report.episodes.len());
//! # Ok::<(), hypomnesis::HypomnesisError>(())
//! ```

pub(crate) mod fold;
mod report;
mod resolve;

use std::time::Instant;

use crate::backends::spill::SpillSource;
use crate::compat::error::Result;
use crate::probe::{Probe, shared_probe};
use fold::{Fold, snapshot_verdict};
#[cfg(feature = "test-helpers")]
pub use report::SpillReportBuilder;
pub use report::{
    DEFAULT_DEDICATED_THRESHOLD_PCT, DEFAULT_SHARED_GROWTH_BYTES, SpillEpisode, SpillReport,
};
use resolve::any_measurable;

/// One reading of device `device_index`, judged on its own: dedicated memory at the default
/// threshold and at least [`DEFAULT_SHARED_GROWTH_BYTES`] shared (an absolute floor, as there
/// is no baseline). `None` when it cannot tell: the device is not measurable, the reading
/// failed (a suspended device is not woken), or its capacity is below 100 bytes — never
/// `Some(false)` for "could not measure".
#[must_use]
pub fn snapshot_is_spilling(device_index: u32) -> Option<bool> {
    snapshot(shared_probe(), device_index)
}

/// [`snapshot_is_spilling`] through `probe`.
fn snapshot(probe: &Probe, device_index: u32) -> Option<bool> {
    let mut source = resolve::resolve(probe, device_index).ok()?;
    snapshot_verdict(source.read()?)
}

/// Whether any device here has a spill figure (see the [module docs](self)): on Linux, an
/// amdgpu device, or a discrete xe/i915 device whose VRAM size sysfs gives. Decided from which
/// files exist, so no suspended device is woken; NVIDIA devices never count.
#[must_use]
pub fn is_spill_measurable() -> bool {
    any_measurable(shared_probe().roots())
}

/// Follows one device's spill over a run (see the [module docs](self)). Drive it with
/// [`SpillTracker::observe`]; it has no thread of its own.
pub struct SpillTracker {
    fold: Fold,
    /// The readings, or why this device's spill is not measurable.
    source: std::result::Result<Box<dyn SpillSource>, String>,
}

impl SpillTracker {
    /// A tracker of device `device_index`, read through the crate's shared probe (configured
    /// from the environment, as every upstream-compatible function).
    ///
    /// Always `Ok` on Linux: a device that cannot be measured (NVIDIA, an integrated GPU, an
    /// index with no device) gives a tracker that records nothing, with
    /// [`SpillTracker::unmeasurable_reason`] saying why.
    ///
    /// # Errors
    /// None on Linux; the `Result` is upstream's signature (its Windows backend fails when the
    /// performance-counter query cannot be opened).
    pub fn new(device_index: u32) -> Result<Self> {
        Ok(SpillTracker::with_probe(shared_probe(), device_index))
    }

    /// A tracker of device `device_index` in `probe`'s index space, reading with `probe`'s
    /// roots (this crate's addition: for a [`Probe`] with its own options).
    #[must_use]
    pub fn with_probe(probe: &Probe, device_index: u32) -> SpillTracker {
        SpillTracker {
            fold: Fold::new(),
            source: resolve::resolve(probe, device_index),
        }
    }

    /// Counts a reading as spilling at `bytes` of dedicated memory or more, instead of
    /// [`DEFAULT_DEDICATED_THRESHOLD_PCT`] of the capacity.
    #[must_use]
    pub const fn with_dedicated_threshold(mut self, bytes: u64) -> Self {
        self.fold.set_dedicated_threshold(bytes);
        self
    }

    /// Requires shared memory to grow by `bytes` over the first reading, instead of
    /// [`DEFAULT_SHARED_GROWTH_BYTES`].
    #[must_use]
    pub const fn with_shared_growth_threshold(mut self, bytes: u64) -> Self {
        self.fold.set_shared_growth(bytes);
        self
    }

    /// Takes one reading labelled `label` and folds it. Never fails: a failed reading is
    /// skipped, and on a device that is not measurable nothing happens.
    pub fn observe<S: Into<String>>(&mut self, label: S) {
        let Ok(source) = &mut self.source else {
            return;
        };
        if let Some(reading) = source.read() {
            self.fold.observe(reading, label.into(), Instant::now());
        }
    }

    /// Whether the latest reading spilled.
    #[must_use]
    pub const fn is_spilling(&self) -> bool {
        self.fold.is_spilling()
    }

    /// Whether any reading spilled (stays true once set).
    #[must_use]
    pub const fn has_spilled(&self) -> bool {
        self.fold.has_spilled()
    }

    /// Whether this device's spill can be measured.
    #[must_use]
    pub fn is_measurable(&self) -> bool {
        self.source.is_ok()
    }

    /// Why this device's spill cannot be measured; `None` when it can (this crate's addition).
    #[must_use]
    pub fn unmeasurable_reason(&self) -> Option<&str> {
        self.source.as_ref().err().map(String::as_str)
    }

    /// The report; an episode still open is sealed with no end label.
    #[must_use]
    pub fn into_report(self) -> SpillReport {
        let measurable = self.is_measurable();
        self.fold.into_report(measurable)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::time::Duration;

    use super::*;
    use crate::backends::spill::{Reading, Scripted};

    const GIB: u64 = 1 << 30;

    fn tracker(readings: Vec<Option<Reading>>) -> SpillTracker {
        SpillTracker {
            fold: Fold::new(),
            source: Ok(Box::new(Scripted(VecDeque::from(readings)))),
        }
    }

    fn reading(dedicated: u64, shared: u64) -> Option<Reading> {
        Some(Reading {
            dedicated_bytes: dedicated,
            shared_bytes: shared,
            limit_bytes: 16 * GIB,
        })
    }

    #[test]
    fn the_tracker_has_upstreams_auto_traits() {
        fn traits<T: Send + Sync + Unpin + std::panic::UnwindSafe + std::panic::RefUnwindSafe>() {}
        traits::<SpillTracker>();
        traits::<SpillReport>();
        traits::<SpillEpisode>();
    }

    #[test]
    fn a_failed_reading_is_skipped_not_folded() {
        let mut t = tracker(vec![reading(GIB, 0), None, reading(15 * GIB, GIB)]);
        for label in ["a", "b", "c"] {
            t.observe(label);
        }
        assert!(t.is_spilling());
        let rep = t.into_report();
        assert_eq!(rep.observations, 2, "the failed reading is not counted");
        assert_eq!(rep.baseline_shared_bytes, 0);
        assert_eq!(rep.episodes[0].start_label, "c");
    }

    #[test]
    fn an_unmeasurable_tracker_records_nothing() {
        let mut t = SpillTracker {
            fold: Fold::new(),
            source: Err("no VRAM here".to_string()),
        }
        .with_dedicated_threshold(1)
        .with_shared_growth_threshold(0);
        t.observe("a");
        t.observe(String::from("b"));
        assert!(!t.is_measurable() && !t.is_spilling() && !t.has_spilled());
        assert_eq!(t.unmeasurable_reason(), Some("no VRAM here"));
        let rep = t.into_report();
        assert_eq!((rep.observations, rep.measurable), (0, false));
    }

    #[test]
    fn builders_reach_the_fold() {
        let mut t = tracker(vec![reading(GIB, 0), reading(2 * GIB, GIB)])
            .with_dedicated_threshold(2 * GIB)
            .with_shared_growth_threshold(GIB);
        t.observe("a");
        t.observe("b");
        assert!(t.has_spilled() && t.is_measurable());
        assert_eq!(t.unmeasurable_reason(), None);
    }

    #[test]
    fn report_helpers() {
        // Episodes of 200, 300, 100 and 300 ms after a calm first reading.
        let mut fold = Fold::new();
        let t0 = Instant::now();
        fold.observe(reading(GIB, 0).unwrap_or(ZERO), "calm".into(), t0);
        let mut at = t0;
        for (i, d) in [200u64, 300, 100, 300].iter().enumerate() {
            at += Duration::from_millis(1000);
            fold.observe(
                reading(15 * GIB, 2 * GIB).unwrap_or(ZERO),
                format!("s{i}"),
                at,
            );
            let end = at + Duration::from_millis(*d);
            fold.observe(
                reading(15 * GIB, 2 * GIB).unwrap_or(ZERO),
                format!("m{i}"),
                end,
            );
            fold.observe(reading(GIB, 0).unwrap_or(ZERO), format!("x{i}"), end);
        }
        let rep = fold.into_report(true);
        assert!(rep.spilled());
        assert_eq!(rep.episodes.len(), 4);
        assert_eq!(rep.first_spill_label(), Some("s0"));
        assert_eq!(rep.total_spill_duration(), Duration::from_millis(900));
        let longest = rep.longest_episode().unwrap();
        assert_eq!(longest.start_label, "s1", "a tie goes to the earliest");
        assert_eq!(longest.duration, Duration::from_millis(300));

        let empty = Fold::new().into_report(true);
        assert!(!empty.spilled());
        assert_eq!(empty.first_spill_label(), None);
        assert_eq!(empty.longest_episode(), None);
        assert_eq!(empty.total_spill_duration(), Duration::ZERO);
    }

    const ZERO: Reading = Reading {
        dedicated_bytes: 0,
        shared_bytes: 0,
        limit_bytes: 0,
    };

    /// A probe of a fixture `/sys` holding `gpus`, with no NVIDIA backend.
    fn fixture_probe(dir: &std::path::Path, gpus: &[hmn_testbed::FakeGpu]) -> Probe {
        let world = hmn_testbed::World::new(dir).unwrap();
        for g in gpus {
            world.gpu(g.clone()).unwrap();
        }
        let roots = crate::system::roots::Roots::system()
            .with_proc(world.proc.root())
            .with_sys(world.sys.root());
        Probe::with_options(
            crate::probe::ProbeOptions::default()
                .roots(roots)
                .use_nvml(false)
                .use_nvidia_smi(false),
        )
    }

    #[test]
    fn the_snapshot_and_the_measurable_check_over_fixtures() {
        use hmn_testbed::FakeGpu;
        let dir = tempfile::tempdir().unwrap();
        let amd = FakeGpu::amdgpu("0000:03:00.0", 1, 128);
        // 6.3 GiB of 8 GiB used (79 %), 58 MiB GTT.
        let p = fixture_probe(dir.path(), std::slice::from_ref(&amd));
        assert!(any_measurable(p.roots()));
        assert_eq!(snapshot(&p, 0), Some(false));
        assert_eq!(snapshot(&p, 1), None, "no such device: can't tell");

        let dir = tempfile::tempdir().unwrap();
        let spilling = amd
            .clone()
            .file("mem_info_vram_used", "8000000000")
            .file("mem_info_gtt_used", &(300u64 << 20).to_string());
        assert_eq!(
            snapshot(&fixture_probe(dir.path(), &[spilling]), 0),
            Some(true)
        );

        let dir = tempfile::tempdir().unwrap();
        let p = fixture_probe(dir.path(), &[amd.clone().suspended()]);
        assert!(any_measurable(p.roots()), "existence only, not woken");
        assert_eq!(snapshot(&p, 0), None, "a suspended device is not read");

        let dir = tempfile::tempdir().unwrap();
        let tiny = amd.file("mem_info_vram_total", "99");
        assert_eq!(snapshot(&fixture_probe(dir.path(), &[tiny]), 0), None);

        let dir = tempfile::tempdir().unwrap();
        let p = fixture_probe(
            dir.path(),
            &[
                FakeGpu::i915_igpu(0, 128),
                FakeGpu::nvidia("0000:01:00.0", 1, 129),
                FakeGpu::xe_dgpu("0000:04:00.0", 2, 130),
            ],
        );
        assert!(!any_measurable(p.roots()));
        assert_eq!(snapshot(&p, 0), None);
        let dir = tempfile::tempdir().unwrap();
        assert!(!any_measurable(fixture_probe(dir.path(), &[]).roots()));
    }

    #[cfg(feature = "test-helpers")]
    #[test]
    fn the_builder_appends_episodes() {
        let rep = SpillReport::builder()
            .peak_dedicated_bytes(1)
            .dedicated_limit_bytes(2)
            .peak_shared_bytes(3)
            .baseline_shared_bytes(4)
            .observations(5)
            .measurable(true)
            .episode("a", Some("b"), 6, 2, Duration::from_millis(7))
            .episode("c", None, 8, 1, Duration::ZERO)
            .build();
        assert_eq!(
            (
                rep.peak_dedicated_bytes,
                rep.dedicated_limit_bytes,
                rep.peak_shared_bytes,
                rep.baseline_shared_bytes,
                rep.observations,
                rep.measurable
            ),
            (1, 2, 3, 4, 5, true)
        );
        assert_eq!(rep.episodes.len(), 2);
        assert_eq!(rep.episodes[1].end_label, None);
        let empty = SpillReport::builder().build();
        assert!(!empty.measurable && empty.episodes.is_empty() && empty.observations == 0);
    }
}
