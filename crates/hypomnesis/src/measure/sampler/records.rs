//! What a sampler records: each sample (its members, its devices) and the report over all of
//! them (peaks per process and per device, what could not be counted).

use std::collections::{BTreeMap, BTreeSet};

use super::vram::PartialVram;
use crate::types::accounting::DeviceAccounting;
use crate::types::{PoolKind, ProcessName, ProcessUtilization, Telemetry, Unattributed};

#[cfg(feature = "serde")]
use serde::Serialize;

/// One member of the target at one sample.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize))]
#[non_exhaustive]
pub struct ProcessSample {
    /// Process id.
    pub pid: u32,
    /// Start time (clock ticks after boot): with `pid`, the process's identity.
    pub start_time: u64,
    /// Its `comm`, as bytes (JSON: `name` and, when not UTF-8, `name_bytes_hex`).
    #[cfg_attr(
        feature = "serde",
        serde(flatten, serialize_with = "crate::types::name_serde::required")
    )]
    pub name: ProcessName,
    /// Resident set size.
    pub rss_bytes: u64,
    /// Device memory per device index (only devices where it holds memory and the figure is
    /// known).
    pub vram_bytes: BTreeMap<u32, u64>,
    /// Per device index where it has a row without a figure (NVML's `VALUE_NOT_AVAILABLE`, a
    /// driver sentinel): why. Its memory there is unknown, not 0 ([`ProcessSample::vram`]).
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "BTreeMap::is_empty"))]
    pub vram_unknown: BTreeMap<u32, String>,
    /// Per device index: its utilization since the previous sample (NVIDIA, where NVML gives
    /// one; see [`ProcessUtilization`]).
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "BTreeMap::is_empty"))]
    pub utilization: BTreeMap<u32, ProcessUtilization>,
}

impl ProcessSample {
    /// Its device memory over every device: `None` when it has rows and none has a figure
    /// (unknown, not 0); else the known sum, a lower bound where some row has none
    /// ([`ProcessSample::vram_is_lower_bound`]).
    pub fn vram(&self) -> Option<u64> {
        if self.vram_bytes.is_empty() && !self.vram_unknown.is_empty() {
            return None;
        }
        Some(
            self.vram_bytes
                .values()
                .fold(0u64, |a, b| a.saturating_add(*b)),
        )
    }

    /// Whether [`ProcessSample::vram`] leaves out a device whose figure is unknown.
    pub fn vram_is_lower_bound(&self) -> bool {
        !self.vram_unknown.is_empty()
    }
}

/// One device at one sample.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(Serialize))]
#[non_exhaustive]
pub struct DeviceSample {
    /// Device index.
    pub index: u32,
    /// Device memory used by the target's processes: their [`VramSum`](crate::types::VramSum)'s known bytes (an MPS
    /// server counted once); `None` when the device's process list could not be read, or when
    /// the target has rows on it and none has a figure — unknown, not 0.
    pub tree_vram_bytes: Option<u64>,
    /// Whether `tree_vram_bytes` leaves out a process of the target whose figure is unknown
    /// (NVML's `VALUE_NOT_AVAILABLE` under MIG or WDDM): a lower bound.
    pub tree_vram_is_lower_bound: bool,
    /// Device-wide used memory (all processes), when known.
    pub used_bytes: Option<u64>,
    /// Utilization, temperature, power, clocks.
    pub telemetry: Telemetry,
    /// Memory no process of the same listing accounts for (device-wide, whatever the target:
    /// its used memory less every process this view can see), with its bound and causes.
    pub unattributed: Unattributed,
}

/// One sample.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(Serialize))]
#[non_exhaustive]
pub struct Sample {
    /// Time since the sampler started, milliseconds.
    pub t_ms: u64,
    /// Wall-clock time, milliseconds since the Unix epoch.
    pub unix_ms: u64,
    /// Sum of the members' RSS.
    pub rss_bytes: u64,
    /// The members.
    pub processes: Vec<ProcessSample>,
    /// Every device.
    pub devices: Vec<DeviceSample>,
}

/// Peaks of one process (for `watch`-style reports).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize))]
#[non_exhaustive]
pub struct ProcessPeaks {
    /// Process id.
    pub pid: u32,
    /// Its `comm`, as bytes (JSON: `name` and, when not UTF-8, `name_bytes_hex`).
    #[cfg_attr(
        feature = "serde",
        serde(flatten, serialize_with = "crate::types::name_serde::required")
    )]
    pub name: ProcessName,
    /// RSS at its first sample.
    pub baseline_rss_bytes: u64,
    /// Highest RSS seen.
    pub peak_rss_bytes: u64,
    /// Device memory (all devices) at its first sample ([`ProcessSample::vram`]): `None` when
    /// it was unknown then.
    pub baseline_vram_bytes: Option<u64>,
    /// Highest device memory (all devices) seen: `None` when no sample knew it.
    pub peak_vram_bytes: Option<u64>,
    /// Whether some sample left out a device whose figure was unknown: the peak (and the
    /// baseline) may be higher.
    pub vram_is_lower_bound: bool,
    /// Samples it appeared in.
    pub samples: u64,
}

/// What a sampler saw.
#[derive(Debug, Clone, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(Serialize))]
#[non_exhaustive]
pub struct SamplerReport {
    /// Samples taken.
    pub samples: u64,
    /// Time from the first sample to the last.
    pub elapsed_ms: u64,
    /// Samples that found a live member with resident memory: with none, the target was never
    /// measured and the sampled sums (`peak_rss_bytes`) say nothing — unknown, not 0 (a command
    /// that ended before its first sample, or was seen only mid-`exec` or exiting).
    pub measured_samples: u64,
    /// Highest sum of the members' RSS in one sample (meaningful only with
    /// `measured_samples` > 0).
    pub peak_rss_bytes: u64,
    /// When it was seen (ms since start).
    pub peak_rss_t_ms: u64,
    /// Highest `VmHWM` (the kernel's per-process peak RSS) of any member; a floor for the
    /// tree's peak that catches spikes between samples.
    pub max_process_peak_rss_bytes: Option<u64>,
    /// Highest sum of the members' PSS (`smaps_rollup`, read about once a second): unlike an
    /// RSS sum it counts a page shared by several members (after `fork`) once.
    pub peak_pss_sum_bytes: Option<u64>,
    /// Per device: highest device memory held by the members in one sample (devices where no
    /// sample knew it are absent: see `vram_unknown`).
    pub peak_vram_bytes: BTreeMap<u32, u64>,
    /// Per device where some sample could not count all of the members' device memory: in how
    /// many, and why (the first reason). The device's peak is then a lower bound, or unknown.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "BTreeMap::is_empty"))]
    pub vram_unknown: BTreeMap<u32, PartialVram>,
    /// Per device: highest device-wide used memory.
    pub peak_device_used_bytes: BTreeMap<u32, u64>,
    /// Per device with NVIDIA accounting mode on: the largest peak of one of the target's
    /// processes in the driver's own records — a floor for the tree's peak on that device that
    /// catches spikes between samples (exact for one GPU process). Set by
    /// [`super::Sampler::finish`]; absent for devices without complete records.
    pub max_process_peak_vram_bytes: BTreeMap<u32, u64>,
    /// Per NVML device: the accounting state and the records matched to the target's processes
    /// (empty before [`super::Sampler::finish`] and without NVML).
    pub vram_accounting: Vec<DeviceAccounting>,
    /// Per GPU in MIG mode: the MIG devices (`MIG-…` UUIDs) the target's processes ran in.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "BTreeMap::is_empty"))]
    pub mig_devices: BTreeMap<u32, BTreeSet<String>>,
    /// Per device with a memory pool that is host RAM (unified memory, an AMD APU's GTT): its
    /// kind, as last sampled. Its figures are host RAM the target took, not a memory beside it.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "BTreeMap::is_empty"))]
    pub device_pools: BTreeMap<u32, PoolKind>,
    /// Per process.
    pub processes: Vec<ProcessPeaks>,
    /// Every sample, in order (when kept).
    #[cfg_attr(feature = "serde", serde(skip))]
    pub timeline: Vec<Sample>,
    /// CPU time the sampling thread used, when it ran on its own thread.
    pub sampler_cpu_ms: Option<f64>,
}
