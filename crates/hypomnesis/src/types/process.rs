//! One process's use of one GPU: [`GpuProcess`].

#[cfg(feature = "serde")]
use std::collections::BTreeMap;

use super::kind::ProcessKind;
use super::name::ProcessName;
use super::nvidia::ProcessUtilization;
use super::pool::PoolKind;
use super::source::{Source, Unknown};
use super::usage::{Engines, ProcessRegions};

#[cfg(feature = "serde")]
use serde::{Deserialize, Serialize};

/// One process's use of one device: a row of `hmn ps`.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
#[non_exhaustive]
pub struct GpuProcess {
    /// Process id (in the namespace of the proc root; NVML reports host PIDs).
    pub pid: u32,
    /// Process name: `comm`, or the basename of `argv[0]` when `comm` was cut at 15 bytes; kept
    /// as bytes (JSON: `name`, lossy UTF-8, and `name_bytes_hex` when it is not UTF-8; see
    /// [`ProcessName`]).
    #[cfg_attr(
        feature = "serde",
        serde(
            flatten,
            serialize_with = "crate::types::name::serde_fields::optional",
            deserialize_with = "crate::types::name::serde_fields::optional_from"
        )
    )]
    pub name: Option<ProcessName>,
    /// Owner's user name (effective UID), when it resolves.
    pub user: Option<String>,
    /// Owner's effective UID.
    pub uid: Option<u32>,
    /// The device's index (see [`Device::index`](crate::Device::index)).
    pub device_index: u32,
    /// The device's UUID.
    pub device_uuid: Option<String>,
    /// Compute, graphics or both.
    pub kind: ProcessKind,
    /// Device memory used by this process on this device.
    pub used_bytes: Option<u64>,
    /// The backend that produced this row.
    pub source: Source,
    /// MIG GPU instance, when the device is partitioned.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub gpu_instance_id: Option<u32>,
    /// MIG compute instance, when the device is partitioned.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub compute_instance_id: Option<u32>,
    /// Memory per region (DRM devices): `{"vram":{…},"gtt":{…},"system":{…}}`.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub regions: Option<ProcessRegions>,
    /// Engine use per class over the last sampling interval (DRM devices; needs two samples).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "BTreeMap::is_empty")
    )]
    pub engines: Engines,
    /// MIG device index on the GPU, when the row is inside a MIG instance.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub mig_index: Option<u32>,
    /// The MIG device's `MIG-…` UUID, when the row is inside a MIG instance.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub mig_uuid: Option<String>,
    /// Engine use over the last sampling period (NVIDIA, `nvmlDeviceGetProcessUtilization`);
    /// `None` with an `unknown` entry where the driver does not give it (MIG, old GPUs).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub utilization: Option<ProcessUtilization>,
    /// An MPS server whose figure is at least its clients' sum: it may include their memory,
    /// so sums over rows leave it out (its clients are counted on their own rows).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "std::ops::Not::not")
    )]
    pub may_include_clients: bool,
    /// DRM client ids this process holds on the device.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Vec::is_empty")
    )]
    pub drm_clients: Vec<u64>,
    /// Lower pids that share some of this process's DRM clients (fork, fd passing): those
    /// clients are counted on the owner's row only, so a sum over rows counts each client once.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Vec::is_empty")
    )]
    pub shared_with: Vec<u32>,
    /// Fields that are `None`, with the reason.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Vec::is_empty")
    )]
    pub unknown: Vec<Unknown>,
    /// The workload holding the process (container, pod, Slurm job, unit), from its cgroup.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub workload: Option<crate::types::workload::WorkloadInfo>,
    /// The process's pid in its own, innermost PID namespace (`NSpid`'s last entry), when
    /// that differs from `pid` (a process in a container, seen from outside).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub ns_pid: Option<u32>,
}

impl GpuProcess {
    /// A row with the identity fields set; backends fill in the rest.
    pub fn new(pid: u32, device_index: u32, kind: ProcessKind, source: Source) -> Self {
        GpuProcess {
            pid,
            name: None,
            user: None,
            uid: None,
            device_index,
            device_uuid: None,
            kind,
            used_bytes: None,
            source,
            gpu_instance_id: None,
            compute_instance_id: None,
            mig_index: None,
            mig_uuid: None,
            utilization: None,
            may_include_clients: false,
            regions: None,
            engines: Engines::new(),
            drm_clients: Vec::new(),
            shared_with: Vec::new(),
            unknown: Vec::new(),
            workload: None,
            ns_pid: None,
        }
    }

    /// The name for a terminal (escaped, see [`ProcessName::escaped`]), or `"?"`.
    pub fn name_or_unknown(&self) -> String {
        self.name
            .as_ref()
            .map_or_else(|| "?".to_string(), ProcessName::escaped)
    }

    /// Bytes of this row's buffers resident in GTT — system memory mapped for the GPU, where the
    /// kernel puts what does not fit in VRAM (the Linux counterpart of WDDM's shared usage).
    /// `Some(0)` for a DRM row whose driver has no GTT region, or whose clients another row
    /// counts; `None` where there is no such figure (NVIDIA rows, DRM rows without memory stats).
    pub fn gtt_bytes(&self) -> Option<u64> {
        match self.regions {
            Some(r) => r.gtt.map_or(Some(0), |g| g.resident_or_total()),
            None if self.used_bytes == Some(0) && !self.shared_with.is_empty() => Some(0),
            None => None,
        }
    }

    /// What the row holds of device memory and GPU-mapped system memory together: `used_bytes`
    /// plus its [GTT-resident bytes](GpuProcess::gtt_bytes) (`hmn ps --sort total`, `--min`;
    /// `hmn watch --min`). Where the row has no GTT figure it is `used_bytes` alone: exact for
    /// an NVIDIA row (the driver maps no GTT), a lower bound for a row whose source gives none
    /// (a KFD row without fdinfo, PDH's) — which is what a floor such as `--min` needs: a row
    /// whose known part reaches it qualifies. `None` when `used_bytes` is unknown.
    pub fn footprint_bytes(&self) -> Option<u64> {
        self.used_bytes
            .map(|u| u.saturating_add(self.gtt_bytes().unwrap_or(0)))
    }
}

impl GpuProcess {
    /// What this row holds of its device's pool, where the device's pool is of `kind`: on a
    /// carve-out + GTT device (an AMD APU) its VRAM plus GTT
    /// ([`ProcessRegions::vram_plus_gtt_bytes`]) — for a ROCm (KFD) row the larger of that and
    /// the KFD figure, never their sum (KFD's buffers are in the process's render-node VM,
    /// which its fdinfo counts: on an APU that prefers GTT they are its GTT); elsewhere
    /// `used_bytes`.
    pub fn pool_bytes(&self, kind: Option<PoolKind>) -> Option<u64> {
        if kind != Some(PoolKind::CarveOutPlusGtt) {
            return self.used_bytes;
        }
        let fdinfo = self.regions.and_then(|r| r.vram_plus_gtt_bytes());
        match (self.source, self.used_bytes, fdinfo) {
            (Source::Kfd, Some(kfd), Some(f)) => Some(kfd.max(f)),
            (_, used, None) => used,
            (_, _, f) => f,
        }
    }
}
