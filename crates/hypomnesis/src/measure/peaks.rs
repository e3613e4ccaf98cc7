//! The headline figures of a measured process tree — what `hmn run` prints — from a
//! [`SamplerReport`] and what the caller learnt outside the sampler (the `ru_maxrss` of the
//! children it waited for, the kernel's peak of a transient cgroup or a Windows Job object
//! that held the tree).
//!
//! Each printed figure has one rule here, and only here, on every platform:
//!
//! | Figure | Rule |
//! |---|---|
//! | peak RAM (the headline) and where it comes from: a cgroup's or a Job's peak, else sampled | [`peak_ram`] (the kernel's figure: [`KernelPeak`]) |
//! | whether a transient cgroup's peak counts (the command joined the group) | [`cgroup_join`] |
//! | the largest single-process peak RSS (a floor for every headline) | [`largest_process_peak_rss`] |
//! | which sources the floor applies to | [`PeakRamSource::floored`] |
//! | per device: peak VRAM, floored by the driver's per-process peak | [`device_peaks`] |
//! | per device: whether the driver's accounting could give that floor | [`accounting_state`] |
//!
//! [`TreePeaks::from_report`] applies all of them at once. Nothing here reads a file.

use std::collections::BTreeSet;

use crate::measure::sampler::SamplerReport;
use crate::system::cgroup::CgroupVersion;
use crate::types::PoolKind;
use crate::types::accounting::DeviceAccounting;
use crate::types::spelling::spelled;

#[cfg(feature = "serde")]
use serde::Serialize;

spelled! {
    /// How a headline peak RAM was obtained.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    #[non_exhaustive]
    pub enum PeakMethod {
        /// The kernel's peak for a transient cgroup holding the whole tree.
        Cgroup = "cgroup",
        /// The kernel's peak for a Job object holding the whole tree (Windows).
        Job = "job",
        /// The largest per-sample sum of the tree (PSS, else RSS), floored by the largest
        /// single-process peak.
        Sampled = "sampled",
    }
}

spelled! {
    /// Where a headline peak RAM comes from.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    #[non_exhaustive]
    pub enum PeakRamSource {
        /// cgroup v2 `memory.peak` of a transient cgroup holding the tree.
        CgroupV2MemoryPeak = "cgroup_v2_memory.peak",
        /// cgroup v1 `memory.max_usage_in_bytes` of a transient cgroup holding the tree.
        CgroupV1MaxUsage = "cgroup_v1_memory.max_usage_in_bytes",
        /// The largest sum of the tree's PSS (read about once a second): a page shared by
        /// forked processes counts once.
        SamplesPss = "samples_pss",
        /// The largest per-sample sum of the tree's RSS: a page shared between processes
        /// counts in each.
        SamplesRss = "samples_rss",
        /// Windows: `JOBOBJECT_EXTENDED_LIMIT_INFORMATION.PeakJobMemoryUsed` of a Job object
        /// holding the tree — the peak of the tree's committed private memory together (not its
        /// working sets), kept by the kernel continuously.
        JobPeakMemoryUsed = "windows_job_peak_memory_used",
    }
}

impl PeakRamSource {
    /// The method: the kernel's cgroup peak, or sampled.
    pub const fn method(self) -> PeakMethod {
        match self {
            PeakRamSource::CgroupV2MemoryPeak | PeakRamSource::CgroupV1MaxUsage => {
                PeakMethod::Cgroup
            }
            PeakRamSource::SamplesPss | PeakRamSource::SamplesRss => PeakMethod::Sampled,
            PeakRamSource::JobPeakMemoryUsed => PeakMethod::Job,
        }
    }

    /// Whether a figure from this source is floored by the largest single-process peak
    /// ([`largest_process_peak_rss`]): every source is.
    ///
    /// The sampled sums miss a spike between two samples (or between two PSS reads, about a
    /// second apart), but each process's `VmHWM`, and `ru_maxrss` of the children the caller
    /// waited for, still hold it. The kernel's cgroup peak is continuous, but counts only what
    /// was charged to the group: a page the command mapped that another group had already
    /// brought in (a shared library, a model file in the page cache) is in its RSS and not in
    /// the group's peak, and so is what the command touched before it joined the group. A
    /// Windows Job's peak is committed private memory, which leaves out the mapped files a
    /// working set holds. The tree used at least what its largest process had resident.
    pub const fn floored(self) -> bool {
        match self {
            PeakRamSource::CgroupV2MemoryPeak
            | PeakRamSource::CgroupV1MaxUsage
            | PeakRamSource::JobPeakMemoryUsed
            | PeakRamSource::SamplesPss
            | PeakRamSource::SamplesRss => true,
        }
    }
}

impl From<CgroupVersion> for PeakRamSource {
    fn from(v: CgroupVersion) -> Self {
        match v {
            CgroupVersion::V2 => PeakRamSource::CgroupV2MemoryPeak,
            CgroupVersion::V1 => PeakRamSource::CgroupV1MaxUsage,
        }
    }
}

/// A tree's headline peak RAM. Serialised as `{"bytes", "method", "source"}` (the method
/// follows from the source: [`PeakRamSource::method`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct PeakRam {
    /// The figure; `None` when nothing measured the tree: no kernel peak, no sample that
    /// found a live process of it, no per-process peak (a command that ended before its first
    /// sample, too small for its `ru_maxrss` to be its own).
    pub bytes: Option<u64>,
    /// Where it comes from.
    pub source: PeakRamSource,
}

impl PeakRam {
    /// A peak of `bytes` from `source`.
    pub const fn new(bytes: u64, source: PeakRamSource) -> Self {
        PeakRam {
            bytes: Some(bytes),
            source,
        }
    }

    /// No figure: nothing measured the tree (see [`PeakRam::bytes`]).
    pub const fn unknown(source: PeakRamSource) -> Self {
        PeakRam {
            bytes: None,
            source,
        }
    }

    /// The method: the kernel's cgroup peak, or sampled.
    pub const fn method(&self) -> PeakMethod {
        self.source.method()
    }
}

#[cfg(feature = "serde")]
impl Serialize for PeakRam {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut s = serializer.serialize_struct("PeakRam", 3)?;
        s.serialize_field("bytes", &self.bytes)?;
        s.serialize_field("method", &self.method())?;
        s.serialize_field("source", &self.source)?;
        s.end()
    }
}

spelled! {
    /// Whether a device's driver accounting gave a per-process peak (NVIDIA accounting mode).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    #[non_exhaustive]
    pub enum AccountingState {
        /// Accounting mode is on and every record could be read.
        Enabled = "enabled",
        /// Accounting mode is off (the driver's default; root turns it on with
        /// `nvidia-smi -am 1`).
        Disabled = "disabled",
        /// Unknown, unsupported, or the records could not all be read; a detail says why.
        Unavailable = "unavailable",
    }
}

/// One device's peaks for the tree.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize))]
#[non_exhaustive]
pub struct DevicePeak {
    /// Device index.
    pub index: u32,
    /// Device memory held by the tree: the highest sampled sum, floored by the largest
    /// single-process peak of the driver's accounting; `None` when no sample could count it
    /// (or the samples that could found none of it while others could not) and the driver kept
    /// no record (`vram_unknown_detail` says why).
    pub peak_vram_bytes: Option<u64>,
    /// The highest sum of the tree's device memory in one sample (`None`: no sample could
    /// count it).
    pub sampled_peak_vram_bytes: Option<u64>,
    /// Whether `peak_vram_bytes` may be short: in some sample a process of the tree had no
    /// figure on the device, or its process list could not be read.
    pub peak_vram_is_lower_bound: bool,
    /// Why, and in how many samples ([`SamplerReport::vram_unknown`]).
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub vram_unknown_detail: Option<String>,
    /// The largest peak of one of the tree's processes in the driver's own records; `None`
    /// unless `vram_accounting` is [`AccountingState::Enabled`].
    pub largest_process_peak_vram_bytes: Option<u64>,
    /// Whether the driver's accounting gave that peak.
    pub vram_accounting: AccountingState,
    /// Why it is [`AccountingState::Unavailable`], or, when it is
    /// [`AccountingState::Enabled`], why `largest_process_peak_vram_bytes` is still unknown
    /// (no record of the command's processes: [`NO_RECORD`]).
    pub vram_accounting_detail: Option<String>,
    /// Device-wide used memory (every process), highest sample.
    pub peak_device_used_bytes: Option<u64>,
    /// The MIG devices (`MIG-…` UUIDs) the tree ran in, on a GPU in MIG mode.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Vec::is_empty"))]
    pub mig_devices: Vec<String>,
    /// The device's memory pool, where it is host RAM (unified memory, an AMD APU's GTT): the
    /// figures above are host RAM the tree took, not a memory beside its RAM
    /// ([`SamplerReport::device_pools`]).
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub pool: Option<PoolKind>,
}

/// The kernel's own continuous peak for a container that held the command's whole tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum KernelPeak {
    /// A transient cgroup's peak (v2 `memory.peak`, v1 `memory.max_usage_in_bytes`), when the
    /// command joined it ([`cgroup_join`]).
    Cgroup {
        /// The peak.
        bytes: u64,
        /// Which file it was read from.
        version: CgroupVersion,
    },
    /// A Windows Job object's `PeakJobMemoryUsed`: the tree's committed private memory.
    Job {
        /// The peak.
        bytes: u64,
    },
}

impl KernelPeak {
    /// A transient cgroup's peak of `bytes`.
    pub const fn cgroup(bytes: u64, version: CgroupVersion) -> KernelPeak {
        KernelPeak::Cgroup { bytes, version }
    }

    /// A Windows Job object's peak of `bytes`.
    pub const fn job(bytes: u64) -> KernelPeak {
        KernelPeak::Job { bytes }
    }

    /// The figure.
    pub const fn bytes(self) -> u64 {
        match self {
            KernelPeak::Cgroup { bytes, .. } | KernelPeak::Job { bytes } => bytes,
        }
    }

    /// Where it comes from, as a headline source.
    pub fn source(self) -> PeakRamSource {
        match self {
            KernelPeak::Cgroup { version, .. } => PeakRamSource::from(version),
            KernelPeak::Job { .. } => PeakRamSource::JobPeakMemoryUsed,
        }
    }
}

/// How long a caller waits for a command to show up in its transient cgroup ([`cgroup_join`])
/// before it samples instead.
pub const CGROUP_JOIN_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

/// Whether a command joined its transient cgroup — whether the group's peak counts for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CgroupJoin {
    /// It joined: the group's peak is the command's ([`KernelPeak::Cgroup`]).
    Joined,
    /// Not seen in the group yet: look again.
    Waiting,
    /// It did not join (or cannot be shown to have): the group's peak says nothing about the
    /// command; remove the group and sample instead.
    NotJoined,
}

/// Whether the command's transient cgroup counts, from one look: the command (its first pid)
/// is `in_group`; it has `ended`; the bytes `charged` to the group so far (read once it has
/// ended); and whether the wait ([`CGROUP_JOIN_WAIT`]) is `over`.
///
/// - in the group: joined;
/// - ended before it was seen there, with something charged to the group: joined (only the
///   command could have joined it);
/// - ended with nothing charged, or the wait is over: not joined;
/// - otherwise: waiting.
pub fn cgroup_join(in_group: bool, ended: bool, charged: Option<u64>, over: bool) -> CgroupJoin {
    if in_group || (ended && charged.is_some_and(|b| b > 0)) {
        CgroupJoin::Joined
    } else if ended || over {
        CgroupJoin::NotJoined
    } else {
        CgroupJoin::Waiting
    }
}

/// The headline figures of a tree: [`peak_ram`], [`largest_process_peak_rss`] and
/// [`device_peaks`] applied to one report.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize))]
#[non_exhaustive]
pub struct TreePeaks {
    /// The headline peak RAM.
    pub peak_ram: PeakRam,
    /// The largest peak RSS of one process ([`largest_process_peak_rss`]).
    pub largest_process_peak_rss_bytes: Option<u64>,
    /// Per device the tree was sampled on, by index.
    pub devices: Vec<DevicePeak>,
}

impl TreePeaks {
    /// The figures of `report`, with `rusage_max_rss` (the largest `ru_maxrss` of the children
    /// the caller waited for, in bytes) and the kernel's peak of a transient cgroup or a Job
    /// object that held the whole tree, when one did.
    pub fn from_report(
        report: &SamplerReport,
        rusage_max_rss: Option<u64>,
        kernel: Option<KernelPeak>,
    ) -> TreePeaks {
        TreePeaks {
            peak_ram: peak_ram(report, rusage_max_rss, kernel),
            largest_process_peak_rss_bytes: largest_process_peak_rss(report, rusage_max_rss),
            devices: device_peaks(report),
        }
    }
}

/// The largest peak RSS of one process: the highest `VmHWM` the sampler read
/// ([`SamplerReport::max_process_peak_rss_bytes`]) or `rusage_max_rss` (what GNU `time -v`
/// calls maximum resident set size), whichever is larger; `None` when neither is known.
pub fn largest_process_peak_rss(
    report: &SamplerReport,
    rusage_max_rss: Option<u64>,
) -> Option<u64> {
    [report.max_process_peak_rss_bytes, rusage_max_rss]
        .into_iter()
        .flatten()
        .max()
}

/// The headline peak RAM of a tree, on every platform.
///
/// - With a container that held the whole tree, the kernel's peak for it ([`KernelPeak`]): a
///   transient cgroup's (v2 `memory.peak`, v1 `memory.max_usage_in_bytes`; Linux), a Job
///   object's `PeakJobMemoryUsed` (Windows).
/// - Otherwise the largest PSS sum when the sampler read one
///   ([`SamplerReport::peak_pss_sum_bytes`]): a page shared by forked processes counts once;
///   else the largest RSS sum ([`SamplerReport::peak_rss_bytes`]), which counts it in each.
///
/// Each is floored by [`largest_process_peak_rss`], which catches spikes between samples,
/// pages resident in a process but charged to another cgroup, and a Job's mapped files.
///
/// Which sources are floored is [`PeakRamSource::floored`].
pub fn peak_ram(
    report: &SamplerReport,
    rusage_max_rss: Option<u64>,
    kernel: Option<KernelPeak>,
) -> PeakRam {
    let (bytes, source) = match (kernel, report.peak_pss_sum_bytes) {
        (Some(k), _) => (Some(k.bytes()), k.source()),
        (None, Some(pss)) => (Some(pss), PeakRamSource::SamplesPss),
        // No sample found a live process: the sum is unknown, not 0.
        (None, None) => (
            (report.measured_samples > 0).then_some(report.peak_rss_bytes),
            PeakRamSource::SamplesRss,
        ),
    };
    let floor = largest_process_peak_rss(report, rusage_max_rss).filter(|_| source.floored());
    match bytes.into_iter().chain(floor).max() {
        Some(b) => PeakRam::new(b, source),
        None => PeakRam::unknown(source),
    }
}

/// Why a device's sampled peak is unknown when no sample found the tree running.
pub const NEVER_SAMPLED: &str = "no sample found the command running";

/// Per device the sampler saw the tree's device memory on (every device it sampled), in index
/// order: the highest sampled sum, floored by the largest single-process peak in the driver's
/// records ([`SamplerReport::max_process_peak_vram_bytes`], present only where
/// [`accounting_state`] is [`AccountingState::Enabled`]); the accounting state; the
/// device-wide peak.
pub fn device_peaks(report: &SamplerReport) -> Vec<DevicePeak> {
    let indices: BTreeSet<u32> = report
        .peak_vram_bytes
        .keys()
        .chain(report.vram_unknown.keys())
        .copied()
        .collect();
    indices
        .into_iter()
        .map(|index| {
            let unknown = report.vram_unknown.get(&index);
            // A lower bound of 0 says nothing: unknown.
            let informative = |b: &u64| *b > 0 || unknown.is_none();
            // No sample found the tree alive: its sampled sum (0 of no process) is no
            // measurement — unknown, as the RAM sum is; the driver's records may still know.
            let measured = report.measured_samples > 0;
            let sampled = report
                .peak_vram_bytes
                .get(&index)
                .copied()
                .filter(|_| measured);
            let largest = report.max_process_peak_vram_bytes.get(&index).copied();
            let (state, mut detail) = accounting_state(report, index);
            if state == AccountingState::Enabled && largest.is_none() {
                detail = Some(NO_RECORD.to_string());
            }
            DevicePeak {
                index,
                peak_vram_bytes: sampled.into_iter().chain(largest).max().filter(informative),
                sampled_peak_vram_bytes: sampled.filter(informative),
                // The driver's record of a process is its whole peak, but not the tree's sum.
                peak_vram_is_lower_bound: unknown.is_some(),
                vram_unknown_detail: match unknown {
                    Some(u) => Some(format!(
                        "{} (in {} of {} samples)",
                        u.detail, u.samples, report.samples
                    )),
                    None if !measured => Some(NEVER_SAMPLED.to_string()),
                    None => None,
                },
                largest_process_peak_vram_bytes: largest,
                vram_accounting: state,
                vram_accounting_detail: detail,
                peak_device_used_bytes: report.peak_device_used_bytes.get(&index).copied(),
                mig_devices: report
                    .mig_devices
                    .get(&index)
                    .map(|s| s.iter().cloned().collect())
                    .unwrap_or_default(),
                pool: report.device_pools.get(&index).copied(),
            }
        })
        .collect()
}

/// Device `index`'s accounting state, and why it is [`AccountingState::Unavailable`]:
///
/// - no accounting entry for the device (a DRM device, or no NVML): unavailable, the driver
///   keeps no per-process peak;
/// - mode on and every record read ([`DeviceAccounting::complete`]): enabled;
/// - mode known to be off: disabled;
/// - otherwise (mode unknown, or a record could not be read): unavailable, with the
///   [`Unknown`](crate::Unknown) the sampler recorded.
pub fn accounting_state(report: &SamplerReport, index: u32) -> (AccountingState, Option<String>) {
    let entry: Option<&DeviceAccounting> = report.vram_accounting.iter().find(|a| a.index == index);
    match entry {
        None => (
            AccountingState::Unavailable,
            Some("this device's driver keeps no per-process peak".to_string()),
        ),
        Some(a) if a.complete() => (AccountingState::Enabled, None),
        Some(a) if a.enabled == Some(false) => (AccountingState::Disabled, None),
        Some(a) => (
            AccountingState::Unavailable,
            Some(a.unknown.as_ref().map_or_else(
                || "the accounting records could not be read".to_string(),
                ToString::to_string,
            )),
        ),
    }
}

/// Why the largest single-process peak is unknown although accounting is on.
pub const NO_RECORD: &str = "accounting is on, but the driver kept no record with a peak for \
     the command's processes on this device (none of them used it, or each record belonged to \
     another process with the same pid)";

#[cfg(test)]
mod tests;
