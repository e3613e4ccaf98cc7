//! A device's memory health: [`MemoryHealth`] — ECC mode and error counts, remapped rows or
//! retired pages (NVIDIA), RAS error counts and bad pages (amdgpu) — and the rule that turns it
//! into findings ([`MemoryHealth::findings`]: what needs a GPU reset or a reboot, what is a
//! failure). The XID events counted while a program watches are [`XidTally`]; what an XID
//! means for memory is [`xid_meaning`].
//!
//! | Rule | Where |
//! |---|---|
//! | which readings need attention, at what severity, with which remedy | [`MemoryHealth::findings`] |
//! | whether a device's health is clean (the device view prints it only when not) | [`MemoryHealth::is_clean`] |
//! | whether zeros from the driver say anything (a GPU without ECC answers zeros for remapped rows) | [`MemoryHealth::counters_meaningful`] |
//! | what an XID means (memory, application, device lost) | [`xid_meaning`] |
//!
//! How they are read: `docs/memory-model.md` ("Memory health").

use std::collections::BTreeMap;

use super::source::Unknown;
use super::spelling::spelled;

#[cfg(feature = "serde")]
use serde::{Deserialize, Serialize};

/// ECC mode (`nvmlDeviceGetEccMode`): now, and after the next reboot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
#[non_exhaustive]
pub struct EccMode {
    /// ECC is on.
    pub current: bool,
    /// ECC will be on after the next reboot.
    pub pending: bool,
}

impl EccMode {
    /// A mode.
    pub const fn new(current: bool, pending: bool) -> EccMode {
        EccMode { current, pending }
    }
}

/// ECC error counts (`nvmlDeviceGetTotalEccErrors`): volatile since the driver loaded,
/// aggregate over the GPU's life. `None` where the driver gives none (ECC off, unsupported),
/// with an `unknown` entry on the [`MemoryHealth`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
#[non_exhaustive]
pub struct EccErrors {
    /// Corrected (single-bit) errors since the driver loaded.
    pub corrected_volatile: Option<u64>,
    /// Uncorrected (double-bit) errors since the driver loaded.
    pub uncorrected_volatile: Option<u64>,
    /// Corrected errors over the GPU's life.
    pub corrected_aggregate: Option<u64>,
    /// Uncorrected errors over the GPU's life.
    pub uncorrected_aggregate: Option<u64>,
}

impl EccErrors {
    /// Whether any count is known.
    pub fn any_known(&self) -> bool {
        [
            self.corrected_volatile,
            self.uncorrected_volatile,
            self.corrected_aggregate,
            self.uncorrected_aggregate,
        ]
        .iter()
        .any(Option::is_some)
    }
}

/// Row remapping (Ampere and later, `nvmlDeviceGetRemappedRows`): rows of device memory
/// replaced by spare rows after errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
#[non_exhaustive]
pub struct RemappedRows {
    /// Rows remapped after correctable errors.
    pub correctable: u32,
    /// Rows remapped after uncorrectable errors.
    pub uncorrectable: u32,
    /// A remapping waits for a GPU reset to take effect.
    pub pending: bool,
    /// A remapping failed at some point (no spare row left).
    pub failure: bool,
}

impl RemappedRows {
    /// The driver's four figures.
    pub const fn new(correctable: u32, uncorrectable: u32, pending: bool, failure: bool) -> Self {
        RemappedRows {
            correctable,
            uncorrectable,
            pending,
            failure,
        }
    }
}

/// Dynamic page retirement (Kepler to Turing, `nvmlDeviceGetRetiredPages*`): pages of device
/// memory taken out of use after errors.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
#[non_exhaustive]
pub struct RetiredPages {
    /// Pages retired after multiple single-bit errors.
    pub single_bit: Option<u32>,
    /// Pages retired after a double-bit error.
    pub double_bit: Option<u32>,
    /// Pages wait for a reboot (or driver reload) to be retired.
    pub pending: Option<bool>,
}

/// One amdgpu RAS block's error counts (`ras/<block>_err_count`): since the driver loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
#[non_exhaustive]
pub struct RasCount {
    /// The block (`umc` is device memory; `gfx`, `sdma`, `mmhub`, …).
    pub block: String,
    /// Uncorrectable errors (`ue:`).
    pub uncorrectable: u64,
    /// Correctable errors (`ce:`).
    pub correctable: u64,
    /// Deferred errors (`de:`, UMC on newer kernels); `None` where the file has no such line.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub deferred: Option<u64>,
}

impl RasCount {
    /// A block's counts.
    pub fn new(block: impl Into<String>, uncorrectable: u64, correctable: u64) -> RasCount {
        RasCount {
            block: block.into(),
            uncorrectable,
            correctable,
            deferred: None,
        }
    }
}

/// amdgpu's bad VRAM pages (`ras/gpu_vram_bad_pages`), by state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
#[non_exhaustive]
pub struct BadPages {
    /// Reserved (taken out of use): `R`.
    pub reserved: u32,
    /// Waiting to be reserved: `P`.
    pub pending: u32,
    /// Could not be reserved: `F`.
    pub failed: u32,
}

/// A device's memory health. Every reading is `None` (or empty) with an entry in `unknown`
/// where the driver does not give it; a zero the driver gives is a zero.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
#[non_exhaustive]
pub struct MemoryHealth {
    /// ECC mode (NVIDIA).
    pub ecc: Option<EccMode>,
    /// ECC error counts (NVIDIA).
    pub ecc_errors: EccErrors,
    /// Row remapping (NVIDIA Ampere and later).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub remapped_rows: Option<RemappedRows>,
    /// Page retirement (NVIDIA before Ampere).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub retired_pages: Option<RetiredPages>,
    /// RAS error counts per block (amdgpu).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Vec::is_empty")
    )]
    pub ras: Vec<RasCount>,
    /// Bad VRAM pages (amdgpu).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub bad_pages: Option<BadPages>,
    /// Readings that are unknown, with the reason (`health.ecc`, `health.remapped_rows`, …).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Vec::is_empty")
    )]
    pub unknown: Vec<Unknown>,
}

spelled! {
    /// How serious a finding is.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
    #[non_exhaustive]
    pub enum Severity {
        /// Needs attention (a reset or reboot pending, errors corrected or contained).
        Warn = "warn",
        /// The memory failed (uncorrectable errors, a remapping or retirement that failed).
        Fail = "fail",
    }
}

/// One reading that needs attention.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize))]
#[non_exhaustive]
pub struct HealthFinding {
    /// How serious.
    pub severity: Severity,
    /// What was read, in words (`2 uncorrectable ECC errors since the driver loaded`).
    pub what: String,
    /// What to do.
    pub remedy: &'static str,
}

impl HealthFinding {
    /// How much it weighs against another finding: its severity, then how urgent its remedy
    /// is — service, then a reset or reboot that applies something pending, then watching. The
    /// heaviest decides a device's (and `hmn doctor`'s) remedy.
    pub fn weight(&self) -> (Severity, u8) {
        let remedy = match self.remedy {
            REMEDY_SERVICE => 3,
            REMEDY_RESET | REMEDY_REBOOT_AMD => 2,
            _ => 1,
        };
        (self.severity, remedy)
    }
}

/// Remedy for a pending remap, retirement or bad page.
pub const REMEDY_RESET: &str =
    "reset the GPU (nvidia-smi -r, with nothing running on it) or reboot to apply it";
/// Remedy for amdgpu's pending bad pages.
pub const REMEDY_REBOOT_AMD: &str = "reboot (or reload amdgpu) to retire the pending pages";
/// Remedy for uncorrectable errors and failed remaps.
pub const REMEDY_SERVICE: &str =
    "drain the GPU; if it recurs after a reset, have the GPU serviced or replaced";
/// Remedy for corrected errors worth watching.
pub const REMEDY_WATCH: &str =
    "watch the counts; schedule a GPU reset at the next maintenance window";

impl MemoryHealth {
    /// Whether any reading was made at all (for a device with no health support, every field
    /// is empty and `unknown` says why).
    pub fn any_reading(&self) -> bool {
        self.ecc.is_some()
            || self.ecc_errors.any_known()
            || self.remapped_rows.is_some()
            || self.retired_pages.is_some()
            || !self.ras.is_empty()
            || self.bad_pages.is_some()
    }

    /// Whether the driver's error counters mean something on this device: ECC is supported
    /// (its mode could be read), or amdgpu RAS files exist. A GPU without ECC (GeForce) may
    /// still answer zeros for remapped rows; those zeros are reported, but say nothing about
    /// the memory's health.
    pub fn counters_meaningful(&self) -> bool {
        self.ecc.is_some() || !self.ras.is_empty() || self.bad_pages.is_some()
    }

    /// The readings that need attention, heaviest first ([`HealthFinding::weight`]: severity,
    /// then the remedy's urgency; the rule in `types::health`):
    ///
    /// | Reading | Severity | Remedy |
    /// |---|---|---|
    /// | uncorrectable ECC errors since the driver loaded | fail | service |
    /// | a row remapping that failed; pages that could not be retired (amdgpu `F`) | fail | service |
    /// | amdgpu uncorrectable RAS errors | fail | service |
    /// | a remapping or retirement pending; amdgpu pages pending (`P`) | warn | reset / reboot |
    /// | uncorrectable errors over the GPU's life only; rows remapped or pages retired after uncorrectable errors | warn | watch |
    pub fn findings(&self) -> Vec<HealthFinding> {
        let mut out = Vec::new();
        let mut push = |severity, what: String, remedy| {
            out.push(HealthFinding {
                severity,
                what,
                remedy,
            });
        };
        let e = &self.ecc_errors;
        match (e.uncorrected_volatile, e.uncorrected_aggregate) {
            (Some(v), _) if v > 0 => push(
                Severity::Fail,
                format!(
                    "{v} uncorrectable ECC error{} since the driver loaded",
                    s(v)
                ),
                REMEDY_SERVICE,
            ),
            (_, Some(a)) if a > 0 => push(
                Severity::Warn,
                format!("{a} uncorrectable ECC error{} over the GPU's life", s(a)),
                REMEDY_WATCH,
            ),
            _ => {}
        }
        if let Some(r) = self.remapped_rows {
            if r.failure {
                push(
                    Severity::Fail,
                    "a row remapping failed (no spare row left)".to_string(),
                    REMEDY_SERVICE,
                );
            }
            if r.pending {
                push(
                    Severity::Warn,
                    "a row remapping is pending".to_string(),
                    REMEDY_RESET,
                );
            }
            if r.uncorrectable > 0 {
                push(
                    Severity::Warn,
                    format!(
                        "{} row{} remapped after uncorrectable errors",
                        r.uncorrectable,
                        s(u64::from(r.uncorrectable))
                    ),
                    REMEDY_WATCH,
                );
            }
        }
        if let Some(p) = self.retired_pages {
            if p.pending == Some(true) {
                push(
                    Severity::Warn,
                    "pages are pending retirement".to_string(),
                    REMEDY_RESET,
                );
            }
            if let Some(d) = p.double_bit.filter(|d| *d > 0) {
                push(
                    Severity::Warn,
                    format!(
                        "{d} page{} retired after double-bit errors",
                        s(u64::from(d))
                    ),
                    REMEDY_WATCH,
                );
            }
        }
        for r in &self.ras {
            if r.uncorrectable > 0 {
                push(
                    Severity::Fail,
                    format!(
                        "{} uncorrectable RAS error{} in block {}",
                        r.uncorrectable,
                        s(r.uncorrectable),
                        r.block
                    ),
                    REMEDY_SERVICE,
                );
            }
        }
        if let Some(b) = self.bad_pages {
            if b.failed > 0 {
                push(
                    Severity::Fail,
                    format!(
                        "{} bad VRAM page{} could not be retired",
                        b.failed,
                        s(u64::from(b.failed))
                    ),
                    REMEDY_SERVICE,
                );
            }
            if b.pending > 0 {
                push(
                    Severity::Warn,
                    format!(
                        "{} bad VRAM page{} pending retirement",
                        b.pending,
                        s(u64::from(b.pending))
                    ),
                    REMEDY_REBOOT_AMD,
                );
            }
        }
        out.sort_by_key(|f| std::cmp::Reverse(f.weight()));
        out
    }

    /// Whether nothing needs attention ([`MemoryHealth::findings`] is empty).
    pub fn is_clean(&self) -> bool {
        self.findings().is_empty()
    }
}

fn s(n: u64) -> &'static str {
    if n == 1 { "" } else { "s" }
}

spelled! {
    /// What an XID means, for a person deciding what to do.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    #[non_exhaustive]
    pub enum XidClass {
        /// Device memory (ECC, row remapping, page retirement).
        Memory = "memory",
        /// Usually the application (an illegal address, a stopped kernel).
        Application = "application",
        /// The GPU is gone from the bus.
        DeviceLost = "device_lost",
        /// Firmware (GSP).
        Firmware = "firmware",
        /// Not in hmn's table.
        Other = "other",
    }
}

/// The short name and class of an XID (NVIDIA's XID catalog; names as dcgm-exporter ships
/// them), for the XIDs that matter to memory and a few common others.
pub fn xid_meaning(xid: u64) -> (&'static str, XidClass) {
    match xid {
        48 => ("double bit ECC error", XidClass::Memory),
        63 => (
            "row remapping or page retirement recorded",
            XidClass::Memory,
        ),
        64 => ("row remapping or page retirement failed", XidClass::Memory),
        92 => ("high single-bit ECC error rate", XidClass::Memory),
        94 => ("contained ECC error", XidClass::Memory),
        95 => ("uncontained ECC error", XidClass::Memory),
        140 => ("unrecovered ECC error", XidClass::Memory),
        160 => ("memory marked for repair", XidClass::Memory),
        171 => ("uncorrectable DRAM error", XidClass::Memory),
        172 => ("uncorrectable SRAM error", XidClass::Memory),
        13 => ("graphics engine exception", XidClass::Application),
        31 => ("GPU memory page fault", XidClass::Application),
        43 => ("GPU stopped processing", XidClass::Application),
        79 => ("GPU has fallen off the bus", XidClass::DeviceLost),
        119 => ("GSP RPC timeout", XidClass::Firmware),
        120 => ("GSP error", XidClass::Firmware),
        _ => ("", XidClass::Other),
    }
}

/// One XID event as NVML delivered it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize))]
#[non_exhaustive]
pub struct XidEvent {
    /// The device's index.
    pub device_index: u32,
    /// The XID (999: the driver did not know it).
    pub xid: u64,
    /// When it was received, ms since the Unix epoch.
    pub unix_ms: u64,
    /// The MIG GPU instance it concerns, when NVML says.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub gpu_instance_id: Option<u32>,
    /// The MIG compute instance it concerns, when NVML says.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub compute_instance_id: Option<u32>,
}

impl XidEvent {
    /// An event.
    pub const fn new(device_index: u32, xid: u64, unix_ms: u64) -> XidEvent {
        XidEvent {
            device_index,
            xid,
            unix_ms,
            gpu_instance_id: None,
            compute_instance_id: None,
        }
    }
}

/// Why XID events cannot be counted, on one device or on every one ([`XidTally::count_on`]),
/// as a value callers can match; `Display` is the text `hmn` shows, and JSON carries it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum XidUncounted {
    /// The counter has not registered its event set yet: nothing is known, not 0.
    #[error("the XID counter is starting")]
    Starting,
    /// NVML is absent or failed to start.
    #[error("no NVML: {reason}")]
    NoNvml {
        /// Why, as a value.
        cause: super::backend::BackendCause,
        /// Why, in words.
        reason: String,
    },
    /// NVML delivers events on Linux only.
    #[error("NVML events are Linux-only")]
    NotLinux,
    /// The device's supported event types do not include XID errors.
    #[error("this device reports no XID events")]
    NoXidEvents,
    /// An NVML call that events need failed: which, and why.
    #[error("{call}: {error}")]
    Refused {
        /// The NVML function.
        call: &'static str,
        /// Its error.
        error: super::backend::QueryError,
    },
}

#[cfg(feature = "serde")]
impl Serialize for XidUncounted {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// XID events counted since a watcher started (never "since boot": NVML does not record
/// events that happened before a set was registered).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize))]
#[non_exhaustive]
pub struct XidTally {
    /// When counting started, ms since the Unix epoch.
    pub since_unix_ms: u64,
    /// Events per device, per XID.
    pub counts: BTreeMap<u32, BTreeMap<u64, u64>>,
    /// The latest event per device.
    pub last: BTreeMap<u32, XidEvent>,
    /// Devices whose events cannot be counted, with the reason (a device that reports no XID
    /// events, an NVML call that refused). In JSON, the reason's text.
    pub unknown: BTreeMap<u32, XidUncounted>,
    /// Why no device's events can be counted (no NVML, not Linux, the counter still starting).
    /// In JSON, the reason's text.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub unavailable: Option<XidUncounted>,
    /// The latest error a wait returned (a GPU lost): counting goes on after a pause.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub last_error: Option<String>,
}

impl XidTally {
    /// An empty tally starting now (`since_unix_ms`).
    pub fn new(since_unix_ms: u64) -> XidTally {
        XidTally {
            since_unix_ms,
            ..XidTally::default()
        }
    }

    /// Counts one event.
    pub fn add(&mut self, e: XidEvent) {
        let n = self
            .counts
            .entry(e.device_index)
            .or_default()
            .entry(e.xid)
            .or_default();
        *n = n.saturating_add(1);
        self.last.insert(e.device_index, e);
    }

    /// Events on device `index` (`None` when they cannot be counted there).
    pub fn total_on(&self, index: u32) -> Option<u64> {
        self.count_on(index).ok()
    }

    /// Events on device `index`, or why they cannot be counted there (the whole tally's
    /// reason, else the device's).
    ///
    /// # Errors
    /// The reason, when the events on `index` cannot be counted.
    pub fn count_on(&self, index: u32) -> Result<u64, &XidUncounted> {
        if let Some(why) = self
            .unavailable
            .as_ref()
            .or_else(|| self.unknown.get(&index))
        {
            return Err(why);
        }
        Ok(self
            .counts
            .get(&index)
            .map_or(0, |m| m.values().fold(0u64, |a, b| a.saturating_add(*b))))
    }

    /// Events of class [`XidClass::Memory`] on device `index`.
    pub fn memory_events_on(&self, index: u32) -> u64 {
        self.counts.get(&index).map_or(0, |m| {
            m.iter()
                .filter(|(x, _)| xid_meaning(**x).1 == XidClass::Memory)
                .fold(0u64, |a, (_, n)| a.saturating_add(*n))
        })
    }
}

#[cfg(test)]
mod tests;
