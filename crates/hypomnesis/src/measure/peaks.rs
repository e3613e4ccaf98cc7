//! The headline figures of a measured process tree — what `hmn run` prints — from a
//! [`SamplerReport`] and what the caller learnt outside the sampler (the `ru_maxrss` of the
//! children it waited for, the peak of a transient cgroup).
//!
//! Each printed figure has one rule here, and only here:
//!
//! | Figure | Rule |
//! |---|---|
//! | peak RAM (the headline) and where it comes from | [`peak_ram`] |
//! | the largest single-process peak RSS (a floor for sampled sums) | [`largest_process_peak_rss`] |
//! | which sources the floor applies to | [`PeakRamSource::floored`] |
//! | per device: peak VRAM, floored by the driver's per-process peak | [`device_peaks`] |
//! | per device: whether the driver's accounting could give that floor | [`accounting_state`] |
//!
//! [`TreePeaks::from_report`] applies all of them at once. Nothing here reads a file.

use crate::measure::sampler::SamplerReport;
use crate::system::cgroup::CgroupVersion;
use crate::types::PoolKind;
use crate::types::accounting::DeviceAccounting;

#[cfg(feature = "serde")]
use serde::Serialize;

/// How a headline peak RAM was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize), serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum PeakMethod {
    /// The kernel's peak for a transient cgroup holding the whole tree.
    Cgroup,
    /// The kernel's peak for a Job object holding the whole tree (Windows).
    Job,
    /// The largest per-sample sum of the tree (PSS, else RSS), floored by the largest
    /// single-process peak.
    Sampled,
}

/// Where a headline peak RAM comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize))]
#[non_exhaustive]
pub enum PeakRamSource {
    /// cgroup v2 `memory.peak` of a transient cgroup holding the tree.
    #[cfg_attr(feature = "serde", serde(rename = "cgroup_v2_memory.peak"))]
    CgroupV2MemoryPeak,
    /// cgroup v1 `memory.max_usage_in_bytes` of a transient cgroup holding the tree.
    #[cfg_attr(
        feature = "serde",
        serde(rename = "cgroup_v1_memory.max_usage_in_bytes")
    )]
    CgroupV1MaxUsage,
    /// The largest sum of the tree's PSS (read about once a second): a page shared by forked
    /// processes counts once.
    #[cfg_attr(feature = "serde", serde(rename = "samples_pss"))]
    SamplesPss,
    /// The largest per-sample sum of the tree's RSS: a page shared between processes counts in
    /// each.
    #[cfg_attr(feature = "serde", serde(rename = "samples_rss"))]
    SamplesRss,
    /// Windows: `JOBOBJECT_EXTENDED_LIMIT_INFORMATION.PeakJobMemoryUsed` of a Job object holding
    /// the tree — the peak of the tree's committed private memory together (not its working
    /// sets), kept by the kernel continuously.
    #[cfg_attr(feature = "serde", serde(rename = "windows_job_peak_memory_used"))]
    JobPeakMemoryUsed,
}

impl PeakRamSource {
    /// The canonical name, as serialised (`cgroup_v2_memory.peak`,
    /// `cgroup_v1_memory.max_usage_in_bytes`, `samples_pss`, `samples_rss`).
    pub const fn as_str(self) -> &'static str {
        match self {
            PeakRamSource::CgroupV2MemoryPeak => "cgroup_v2_memory.peak",
            PeakRamSource::CgroupV1MaxUsage => "cgroup_v1_memory.max_usage_in_bytes",
            PeakRamSource::SamplesPss => "samples_pss",
            PeakRamSource::SamplesRss => "samples_rss",
            PeakRamSource::JobPeakMemoryUsed => "windows_job_peak_memory_used",
        }
    }

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
    /// The figure.
    pub bytes: u64,
    /// Where it comes from.
    pub source: PeakRamSource,
}

impl PeakRam {
    /// A peak of `bytes` from `source`.
    pub const fn new(bytes: u64, source: PeakRamSource) -> Self {
        PeakRam { bytes, source }
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

/// Whether a device's driver accounting gave a per-process peak (NVIDIA accounting mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize), serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum AccountingState {
    /// Accounting mode is on and every record could be read.
    Enabled,
    /// Accounting mode is off (the driver's default; root turns it on with `nvidia-smi -am 1`).
    Disabled,
    /// Unknown, unsupported, or the records could not all be read; a detail says why.
    Unavailable,
}

impl AccountingState {
    /// The canonical name, as serialised (`enabled`, `disabled`, `unavailable`).
    pub const fn as_str(self) -> &'static str {
        match self {
            AccountingState::Enabled => "enabled",
            AccountingState::Disabled => "disabled",
            AccountingState::Unavailable => "unavailable",
        }
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
    /// single-process peak of the driver's accounting.
    pub peak_vram_bytes: u64,
    /// The highest sum of the tree's device memory in one sample.
    pub sampled_peak_vram_bytes: u64,
    /// The largest peak of one of the tree's processes in the driver's own records; `None`
    /// unless `vram_accounting` is [`AccountingState::Enabled`].
    pub largest_process_peak_vram_bytes: Option<u64>,
    /// Whether the driver's accounting gave that peak.
    pub vram_accounting: AccountingState,
    /// Why it is [`AccountingState::Unavailable`].
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
    /// the caller waited for, in bytes) and the peak and version of a transient cgroup that
    /// held the whole tree, when one did.
    pub fn from_report(
        report: &SamplerReport,
        rusage_max_rss: Option<u64>,
        cgroup: Option<(u64, CgroupVersion)>,
    ) -> TreePeaks {
        TreePeaks {
            peak_ram: peak_ram(report, rusage_max_rss, cgroup),
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

/// The headline peak RAM of a tree.
///
/// - With a transient cgroup that held the whole tree: the kernel's peak for it (cgroup v2
///   `memory.peak`, v1 `memory.max_usage_in_bytes`).
/// - Otherwise the largest PSS sum when the sampler read one
///   ([`SamplerReport::peak_pss_sum_bytes`]): a page shared by forked processes counts once;
///   else the largest RSS sum ([`SamplerReport::peak_rss_bytes`]), which counts it in each.
///
/// Each is floored by [`largest_process_peak_rss`], which catches spikes between samples and
/// pages resident in a process but charged to another cgroup.
///
/// Which sources are floored is [`PeakRamSource::floored`].
pub fn peak_ram(
    report: &SamplerReport,
    rusage_max_rss: Option<u64>,
    cgroup: Option<(u64, CgroupVersion)>,
) -> PeakRam {
    let (bytes, source) = match (cgroup, report.peak_pss_sum_bytes) {
        (Some((peak, version)), _) => (peak, PeakRamSource::from(version)),
        (None, Some(pss)) => (pss, PeakRamSource::SamplesPss),
        (None, None) => (report.peak_rss_bytes, PeakRamSource::SamplesRss),
    };
    let floor = largest_process_peak_rss(report, rusage_max_rss).filter(|_| source.floored());
    PeakRam::new(floored(bytes, floor), source)
}

/// Per device the sampler saw the tree's device memory on (every device it sampled), in index
/// order: the highest sampled sum, floored by the largest single-process peak in the driver's
/// records ([`SamplerReport::max_process_peak_vram_bytes`], present only where
/// [`accounting_state`] is [`AccountingState::Enabled`]); the accounting state; the
/// device-wide peak.
pub fn device_peaks(report: &SamplerReport) -> Vec<DevicePeak> {
    report
        .peak_vram_bytes
        .iter()
        .map(|(&index, &sampled)| {
            let largest = report.max_process_peak_vram_bytes.get(&index).copied();
            let (state, detail) = accounting_state(report, index);
            DevicePeak {
                index,
                peak_vram_bytes: floored(sampled, largest),
                sampled_peak_vram_bytes: sampled,
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

/// `bytes`, raised to `floor` when that is larger.
fn floored(bytes: u64, floor: Option<u64>) -> u64 {
    bytes.max(floor.unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Unknown, UnknownReason};

    const MIB: u64 = 1 << 20;

    /// A report with an RSS sum of 100 MiB, no PSS, and no per-process peak.
    fn rss_only() -> SamplerReport {
        SamplerReport {
            samples: 3,
            peak_rss_bytes: 100 * MIB,
            ..SamplerReport::default()
        }
    }

    fn accounting(index: u32, enabled: Option<bool>, unknown: Option<Unknown>) -> DeviceAccounting {
        let mut a = DeviceAccounting::new(index);
        a.enabled = enabled;
        a.unknown = unknown;
        a
    }

    #[test]
    fn the_cgroup_peak_is_the_headline_floored_by_the_largest_process() {
        let mut r = rss_only();
        r.peak_pss_sum_bytes = Some(90 * MIB);
        r.max_process_peak_rss_bytes = Some(30 * MIB);
        let v2 = peak_ram(&r, Some(40 * MIB), Some((250 * MIB, CgroupVersion::V2)));
        assert_eq!(
            v2,
            PeakRam::new(250 * MIB, PeakRamSource::CgroupV2MemoryPeak),
            "above the floor: as it is"
        );
        assert_eq!(v2.method(), PeakMethod::Cgroup);
        // The command mapped 300 MiB another group had brought into the page cache: in its
        // RSS (ru_maxrss), not in the group's peak.
        let v1 = peak_ram(&r, Some(300 * MIB), Some((50 * MIB, CgroupVersion::V1)));
        assert_eq!(v1, PeakRam::new(300 * MIB, PeakRamSource::CgroupV1MaxUsage));
        assert_eq!(v1.method(), PeakMethod::Cgroup);
        r.max_process_peak_rss_bytes = Some(400 * MIB);
        let hwm = peak_ram(&r, None, Some((50 * MIB, CgroupVersion::V2)));
        assert_eq!(hwm.bytes, 400 * MIB, "VmHWM floors it too");
    }

    #[test]
    fn without_a_cgroup_the_pss_sum_comes_before_the_rss_sum() {
        let mut r = rss_only();
        let rss = peak_ram(&r, None, None);
        assert_eq!(rss, PeakRam::new(100 * MIB, PeakRamSource::SamplesRss));
        assert_eq!(rss.method(), PeakMethod::Sampled);
        r.peak_pss_sum_bytes = Some(60 * MIB);
        let pss = peak_ram(&r, None, None);
        assert_eq!(pss, PeakRam::new(60 * MIB, PeakRamSource::SamplesPss));
        assert_eq!(pss.method(), PeakMethod::Sampled);
    }

    #[test]
    fn sampled_sums_are_floored_by_the_largest_process_peak() {
        let mut r = rss_only();
        r.peak_pss_sum_bytes = Some(60 * MIB);
        // VmHWM above the PSS sum: a spike between reads.
        r.max_process_peak_rss_bytes = Some(80 * MIB);
        assert_eq!(peak_ram(&r, None, None).bytes, 80 * MIB);
        // ru_maxrss above both.
        assert_eq!(peak_ram(&r, Some(120 * MIB), None).bytes, 120 * MIB);
        // A floor below the sum changes nothing.
        assert_eq!(peak_ram(&r, Some(10 * MIB), None).bytes, 80 * MIB);
        // The RSS sum is floored too.
        r.peak_pss_sum_bytes = None;
        r.max_process_peak_rss_bytes = None;
        let p = peak_ram(&r, Some(130 * MIB), None);
        assert_eq!(p, PeakRam::new(130 * MIB, PeakRamSource::SamplesRss));
    }

    #[test]
    fn the_largest_process_peak_is_vmhwm_or_ru_maxrss() {
        let mut r = rss_only();
        assert_eq!(largest_process_peak_rss(&r, None), None);
        assert_eq!(largest_process_peak_rss(&r, Some(7)), Some(7));
        r.max_process_peak_rss_bytes = Some(9);
        assert_eq!(largest_process_peak_rss(&r, None), Some(9));
        assert_eq!(largest_process_peak_rss(&r, Some(7)), Some(9));
        assert_eq!(largest_process_peak_rss(&r, Some(11)), Some(11));
    }

    #[test]
    fn every_source_is_floored() {
        assert!(PeakRamSource::CgroupV2MemoryPeak.floored());
        assert!(PeakRamSource::CgroupV1MaxUsage.floored());
        assert!(PeakRamSource::SamplesPss.floored());
        assert!(PeakRamSource::SamplesRss.floored());
    }

    #[test]
    fn device_peaks_are_floored_by_the_drivers_per_process_peak() {
        let mut r = rss_only();
        r.peak_vram_bytes.insert(1, 2 * MIB);
        r.peak_vram_bytes.insert(0, 6 * MIB);
        r.peak_device_used_bytes.insert(0, 20 * MIB);
        r.max_process_peak_vram_bytes.insert(1, 5 * MIB);
        r.vram_accounting.push(accounting(0, Some(false), None));
        r.vram_accounting.push(accounting(1, Some(true), None));
        let d = device_peaks(&r);
        assert_eq!(d.len(), 2);
        assert_eq!(d[0].index, 0, "in index order");
        assert_eq!(d[0].peak_vram_bytes, 6 * MIB);
        assert_eq!(d[0].sampled_peak_vram_bytes, 6 * MIB);
        assert_eq!(d[0].largest_process_peak_vram_bytes, None);
        assert_eq!(d[0].vram_accounting, AccountingState::Disabled);
        assert_eq!(d[0].peak_device_used_bytes, Some(20 * MIB));
        assert_eq!(d[1].peak_vram_bytes, 5 * MIB, "floored");
        assert_eq!(d[1].sampled_peak_vram_bytes, 2 * MIB);
        assert_eq!(d[1].largest_process_peak_vram_bytes, Some(5 * MIB));
        assert_eq!(d[1].vram_accounting, AccountingState::Enabled);
        assert_eq!(d[1].vram_accounting_detail, None);
        assert_eq!(d[1].peak_device_used_bytes, None, "unknown is not 0");
        // A per-process peak below the sampled sum changes nothing.
        r.max_process_peak_vram_bytes.insert(0, MIB);
        assert_eq!(device_peaks(&r)[0].peak_vram_bytes, 6 * MIB);
        // A device whose memory is host RAM says so; the others say nothing.
        assert_eq!(d[0].pool, None);
        r.device_pools.insert(1, PoolKind::UnifiedHost);
        let d = device_peaks(&r);
        assert_eq!((d[0].pool, d[1].pool), (None, Some(PoolKind::UnifiedHost)));
    }

    #[test]
    fn accounting_states() {
        let mut r = rss_only();
        let denied = Unknown::new(
            "accounting",
            UnknownReason::PermissionDenied,
            "nvmlDeviceGetAccountingMode: insufficient permissions",
        );
        r.vram_accounting.push(accounting(0, Some(true), None));
        r.vram_accounting.push(accounting(1, Some(false), None));
        r.vram_accounting
            .push(accounting(2, None, Some(denied.clone())));
        // On, but a record could not be read: incomplete.
        r.vram_accounting
            .push(accounting(3, Some(true), Some(denied.clone())));
        r.vram_accounting.push(accounting(4, None, None));
        assert_eq!(accounting_state(&r, 0), (AccountingState::Enabled, None));
        assert_eq!(accounting_state(&r, 1), (AccountingState::Disabled, None));
        for i in [2, 3] {
            assert_eq!(
                accounting_state(&r, i),
                (AccountingState::Unavailable, Some(denied.to_string())),
                "device {i}"
            );
        }
        assert_eq!(
            accounting_state(&r, 4),
            (
                AccountingState::Unavailable,
                Some("the accounting records could not be read".to_string())
            )
        );
        // A device without an entry (DRM): no such record.
        assert_eq!(
            accounting_state(&r, 9),
            (
                AccountingState::Unavailable,
                Some("this device's driver keeps no per-process peak".to_string())
            )
        );
    }

    #[test]
    fn tree_peaks_apply_every_rule() {
        let mut r = rss_only();
        r.max_process_peak_rss_bytes = Some(150 * MIB);
        r.peak_vram_bytes.insert(0, 3 * MIB);
        let t = TreePeaks::from_report(&r, Some(120 * MIB), None);
        assert_eq!(
            t.peak_ram,
            PeakRam::new(150 * MIB, PeakRamSource::SamplesRss)
        );
        assert_eq!(t.largest_process_peak_rss_bytes, Some(150 * MIB));
        assert_eq!(t.devices.len(), 1);
        assert_eq!(t.devices[0].vram_accounting, AccountingState::Unavailable);
        // A cgroup's peak is floored too: a page resident in a process but charged to another
        // cgroup (a shared library first read elsewhere) is in its RSS, not in the group's.
        let t = TreePeaks::from_report(&r, None, Some((70 * MIB, CgroupVersion::V2)));
        assert_eq!(
            t.peak_ram,
            PeakRam::new(150 * MIB, PeakRamSource::CgroupV2MemoryPeak)
        );
        let t = TreePeaks::from_report(&r, Some(160 * MIB), Some((200 * MIB, CgroupVersion::V1)));
        assert_eq!(
            t.peak_ram,
            PeakRam::new(200 * MIB, PeakRamSource::CgroupV1MaxUsage)
        );
        assert_eq!(t.largest_process_peak_rss_bytes, Some(160 * MIB));
        let t = TreePeaks::from_report(&r, None, Some((70 * MIB, CgroupVersion::V2)));
        assert_eq!(
            t.largest_process_peak_rss_bytes,
            Some(150 * MIB),
            "still reported"
        );
    }

    #[test]
    fn names_are_the_json_contract() {
        for (s, name) in [
            (PeakRamSource::CgroupV2MemoryPeak, "cgroup_v2_memory.peak"),
            (
                PeakRamSource::CgroupV1MaxUsage,
                "cgroup_v1_memory.max_usage_in_bytes",
            ),
            (PeakRamSource::SamplesPss, "samples_pss"),
            (PeakRamSource::SamplesRss, "samples_rss"),
        ] {
            assert_eq!(s.as_str(), name);
        }
        for (s, name) in [
            (AccountingState::Enabled, "enabled"),
            (AccountingState::Disabled, "disabled"),
            (AccountingState::Unavailable, "unavailable"),
        ] {
            assert_eq!(s.as_str(), name);
        }
    }

    #[cfg(feature = "serde")]
    #[test]
    fn serialised_as_the_json_contract() {
        fn json<T: Serialize>(v: &T) -> String {
            serde_json::to_string(v).unwrap()
        }
        for s in [
            PeakRamSource::CgroupV2MemoryPeak,
            PeakRamSource::CgroupV1MaxUsage,
            PeakRamSource::SamplesPss,
            PeakRamSource::SamplesRss,
        ] {
            assert_eq!(json(&s), format!("\"{}\"", s.as_str()));
        }
        for s in [
            AccountingState::Enabled,
            AccountingState::Disabled,
            AccountingState::Unavailable,
        ] {
            assert_eq!(json(&s), format!("\"{}\"", s.as_str()));
        }
        assert_eq!(
            json(&PeakRam::new(5, PeakRamSource::SamplesPss)),
            r#"{"bytes":5,"method":"sampled","source":"samples_pss"}"#
        );
        assert_eq!(
            json(&PeakRam::new(7, PeakRamSource::CgroupV1MaxUsage)),
            r#"{"bytes":7,"method":"cgroup","source":"cgroup_v1_memory.max_usage_in_bytes"}"#
        );
    }
}
