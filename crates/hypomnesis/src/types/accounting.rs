//! The driver's own record of each process's peak device memory: NVIDIA *accounting mode*.
//!
//! With accounting on (root runs `nvidia-smi -am 1`; it stays on until reboot or `-am 0`), the
//! driver keeps, per device, a record for every process that had a context — running or
//! exited — with the most device memory it ever held (`maxMemoryUsage`) and when its context
//! started. A sampler misses a spike shorter than its interval; this record does not, so it is
//! a floor for the peak of a process tree (exact for a tree with one GPU process).
//!
//! Owns [`DeviceAccounting`] / [`AccountedProcess`] (what
//! [`Probe::vram_accounting`](crate::Probe::vram_accounting) returns) and the pure rule that
//! attributes a record to a process across pid reuse ([`record_belongs`]). DRM drivers keep no
//! such record; their devices are not listed.

use crate::types::Unknown;

#[cfg(feature = "serde")]
use serde::Serialize;

/// One process's accounting record on one device.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize))]
#[non_exhaustive]
pub struct AccountedProcess {
    /// Device index.
    pub device_index: u32,
    /// Process id.
    pub pid: u32,
    /// The most device memory the process ever held; `None` when the driver answered "not
    /// available".
    pub max_memory_bytes: Option<u64>,
    /// When the process's GPU context started, µs since the Unix epoch (the driver's clock).
    pub start_unix_us: u64,
    /// Whether the process was still running when asked.
    pub running: bool,
    /// Percent of the process's life a kernel of it ran on the GPU; `None` when the driver
    /// answered "not available".
    pub gpu_utilization_percent: Option<u32>,
    /// Percent of its life device memory was read or written for it; `None` when not
    /// available.
    pub memory_utilization_percent: Option<u32>,
}

/// The accounting state and records of one device.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize))]
#[non_exhaustive]
pub struct DeviceAccounting {
    /// Device index.
    pub index: u32,
    /// Whether accounting mode is on; `None` when it could not be read (see `unknown`).
    pub enabled: Option<bool>,
    /// Why the mode or the records are unknown (unsupported device, no permission, a failed
    /// call): when set, `processes` may be incomplete.
    pub unknown: Option<Unknown>,
    /// The records found for the pids asked about (a pid without a record is absent).
    pub processes: Vec<AccountedProcess>,
}

impl DeviceAccounting {
    /// A device with no records yet.
    #[cfg_attr(not(feature = "nvml"), allow(dead_code))]
    pub(crate) fn new(index: u32) -> Self {
        DeviceAccounting {
            index,
            enabled: None,
            unknown: None,
            processes: Vec::new(),
        }
    }

    /// The records could all be read: the mode is on and no call failed.
    pub fn complete(&self) -> bool {
        self.enabled == Some(true) && self.unknown.is_none()
    }
}

/// Tolerance for comparing the driver's context start time with a process's start time from
/// `/proc` (the boot time there has one-second resolution, and the clock may have been stepped).
pub const CLOCK_SLACK_US: u64 = 2_000_000;

/// Whether a record whose context started at `record_start_us` belongs to a process that
/// started at `process_start_us` and was last seen alive at `last_seen_us` (all µs since the
/// epoch).
///
/// NVML keeps one record per pid, the latest: after the kernel reuses a pid, the record may
/// belong to an earlier process (its context started before this process did) or a later one
/// (started after this process was last seen). Both are refused, with [`CLOCK_SLACK_US`] of
/// tolerance on each side. `next_sample_us` bounds "last seen": the process may have started
/// its context after the last sample it appeared in, but before the next one.
pub fn record_belongs(record_start_us: u64, process_start_us: u64, next_sample_us: u64) -> bool {
    record_start_us.saturating_add(CLOCK_SLACK_US) >= process_start_us
        && record_start_us <= next_sample_us.saturating_add(CLOCK_SLACK_US)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Field;

    #[test]
    fn a_record_belongs_to_the_process_whose_lifetime_holds_it() {
        let start = 1_700_000_000_000_000;
        let seen = start + 60_000_000;
        // Context created during the process's life.
        assert!(record_belongs(start + 5_000_000, start, seen));
        // At the very start, and a little before it (btime's one-second resolution).
        assert!(record_belongs(start, start, seen));
        assert!(record_belongs(start - 1_500_000, start, seen));
        // An earlier process with the same pid.
        assert!(!record_belongs(start - 30_000_000, start, seen));
        // A later process with the same pid.
        assert!(!record_belongs(seen + 30_000_000, start, seen));
        assert!(record_belongs(seen + 1_000_000, start, seen));
    }

    #[test]
    fn completeness() {
        let mut d = DeviceAccounting::new(0);
        assert!(!d.complete());
        d.enabled = Some(true);
        assert!(d.complete());
        d.unknown = Some(Unknown::new(
            Field::Accounting,
            crate::types::UnknownReason::DeviceError,
            "x",
        ));
        assert!(!d.complete());
    }
}
