//! The data model shared by every backend: devices, GPU processes, unknown values and warnings.
//!
//! Field names are the `hmn --json` contract (schema 1): they may gain siblings but are never
//! renamed. A value that could not be read is `None` (JSON `null`) and an [`Unknown`] entry says
//! why; a number is never used to mean "unknown".

/// `Display` as the value's `as_str` (and, for types listed after `serialize:`, `Serialize`
/// too): one spelling for text and JSON.
macro_rules! spelled_as_str {
    ($($t:ty),* $(; serialize: $($s:ty),*)?) => {
        $(impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        })*
        $($(
            spelled_as_str!($s);
            #[cfg(feature = "serde")]
            impl serde::Serialize for $s {
                fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                    s.serialize_str(self.as_str())
                }
            }
        )*)?
    };
}

pub mod accounting;
// The truthful API's errors (public through the crate root's `error` module).
pub(crate) mod error;
mod kind;
mod lists;
mod name;
mod nvidia;
pub mod pci;
mod runtime;
mod usage;
pub(crate) mod workload;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

pub use kind::{EngineClass, EngineClasses, ProcessKind};
pub use lists::{
    Backend, BackendState, BackendStatus, DeviceList, ProcessList, Warning, absent_reasons,
    failed_reasons,
};
pub use name::ProcessName;
#[cfg(feature = "serde")]
pub(crate) use name::serde_fields as name_serde;
pub use nvidia::{MigDevice, MigMode, MigPlacement, MigState, ProcessUtilization};
pub use runtime::RuntimeStatus;
pub use usage::{DeviceRegion, EngineUsage, Engines, ProcessRegions, RegionUsage};

use crate::types::pci::PciBusId;

#[cfg(feature = "serde")]
use serde::Serialize;

/// Which backend produced a figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(Serialize))]
#[non_exhaustive]
pub enum Source {
    /// NVIDIA Management Library.
    #[cfg_attr(feature = "serde", serde(rename = "nvml"))]
    Nvml,
    /// The `nvidia-smi` command (fallback when NVML cannot be used).
    #[cfg_attr(feature = "serde", serde(rename = "nvidia-smi"))]
    NvidiaSmi,
    /// Linux sysfs (`/sys/class/drm/…`).
    #[cfg_attr(feature = "serde", serde(rename = "sysfs"))]
    Sysfs,
    /// DRM client usage stats in `/proc/<pid>/fdinfo`.
    #[cfg_attr(feature = "serde", serde(rename = "fdinfo"))]
    Fdinfo,
    /// The AMD KFD (ROCm compute) per-process sysfs files.
    #[cfg_attr(feature = "serde", serde(rename = "kfd"))]
    Kfd,
    /// Windows DXGI (adapters; the caller's own `QueryVideoMemoryInfo`).
    #[cfg_attr(feature = "serde", serde(rename = "dxgi"))]
    Dxgi,
    /// Windows performance counters (`GPU Process Memory`, `GPU Adapter Memory`).
    #[cfg_attr(feature = "serde", serde(rename = "pdh"))]
    Pdh,
    /// macOS Metal (`MTLDevice`).
    #[cfg_attr(feature = "serde", serde(rename = "metal"))]
    Metal,
}

impl Source {
    /// The JSON spelling (`"nvml"`, `"nvidia-smi"`, …).
    pub const fn as_str(self) -> &'static str {
        match self {
            Source::Nvml => "nvml",
            Source::NvidiaSmi => "nvidia-smi",
            Source::Sysfs => "sysfs",
            Source::Fdinfo => "fdinfo",
            Source::Kfd => "kfd",
            Source::Dxgi => "dxgi",
            Source::Pdh => "pdh",
            Source::Metal => "metal",
        }
    }
}

/// Who made a GPU.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Vendor {
    /// NVIDIA (PCI vendor 0x10de).
    Nvidia,
    /// AMD (PCI vendor 0x1002).
    Amd,
    /// Intel (PCI vendor 0x8086).
    Intel,
    /// Anything else, named by its kernel driver (`msm`, `panfrost`, `v3d`, …).
    Other(String),
}

impl Vendor {
    /// The JSON spelling: `nvidia`, `amd`, `intel`, or the driver name.
    pub fn as_str(&self) -> &str {
        match self {
            Vendor::Nvidia => "nvidia",
            Vendor::Amd => "amd",
            Vendor::Intel => "intel",
            Vendor::Other(s) => s,
        }
    }
}

spelled_as_str!(Source; serialize: Vendor, RuntimeStatus, ProcessKind);

/// Why a value is unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(Serialize), serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum UnknownReason {
    /// The driver, device or kernel does not provide it.
    Unsupported,
    /// Reading it needs more privileges.
    PermissionDenied,
    /// The driver returned its "not available" sentinel (NVML `ULLONG_MAX`, nvidia-smi `[N/A]`).
    DriverSentinel,
    /// The driver returned a value that cannot be true (a process using more than the device
    /// holds).
    Implausible,
    /// The device is runtime-suspended; reading it would wake it.
    Suspended,
    /// The device failed while it was being read (GPU lost, driver error).
    DeviceError,
    /// The file that holds it is larger than the limit set for its kind, or has more keys
    /// than that limit (a hostile or corrupt `/proc`): it was not read past the limit.
    TooLarge,
    /// The file that holds it could not be read as a file: not a regular file (a FIFO, a
    /// device node, a socket), or an I/O error.
    Unreadable,
    /// The process is not visible under the proc root: NVML reported a host pid, and the
    /// proc root shows a container's own PID namespace.
    OtherPidNamespace,
}

impl UnknownReason {
    /// The JSON spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            UnknownReason::Unsupported => "unsupported",
            UnknownReason::PermissionDenied => "permission_denied",
            UnknownReason::DriverSentinel => "driver_sentinel",
            UnknownReason::Implausible => "implausible",
            UnknownReason::Suspended => "suspended",
            UnknownReason::DeviceError => "device_error",
            UnknownReason::TooLarge => "too_large",
            UnknownReason::Unreadable => "unreadable",
            UnknownReason::OtherPidNamespace => "other_pid_namespace",
        }
    }
}

/// One field that could not be read, and why. Lives beside the `None` it explains.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize))]
#[non_exhaustive]
pub struct Unknown {
    /// The field, as its JSON path (`"memory.reserved_bytes"`, `"used_bytes"`).
    pub field: Cow<'static, str>,
    /// The kind of reason.
    pub reason: UnknownReason,
    /// A human-readable detail (which call failed, what the driver said).
    pub detail: String,
}

impl Unknown {
    /// An unknown-field record.
    pub fn new(
        field: impl Into<Cow<'static, str>>,
        reason: UnknownReason,
        detail: impl Into<String>,
    ) -> Self {
        Unknown {
            field: field.into(),
            reason,
            detail: detail.into(),
        }
    }
}

impl fmt::Display for Unknown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} unknown ({}: {})",
            self.field,
            self.reason.as_str(),
            self.detail
        )
    }
}

/// Device-wide memory, in bytes.
///
/// NVIDIA figures follow the R510+ (`nvmlMemory_v2_t`) semantics that `nvidia-smi` shows:
/// `used` excludes `reserved`, so `used + free + reserved = total`. On drivers older than R510
/// only the v1 figures exist: `used` then includes the reservation and `reserved_bytes` is
/// `None`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize))]
#[non_exhaustive]
pub struct DeviceMemory {
    /// Installed memory the driver reports.
    pub total_bytes: Option<u64>,
    /// Memory allocated by processes and the driver (excluding `reserved_bytes`).
    pub used_bytes: Option<u64>,
    /// Memory available for allocation.
    pub free_bytes: Option<u64>,
    /// Memory reserved by the driver and firmware, never available to processes.
    pub reserved_bytes: Option<u64>,
}

impl DeviceMemory {
    /// Device memory from its four figures.
    pub const fn new(
        total_bytes: Option<u64>,
        used_bytes: Option<u64>,
        free_bytes: Option<u64>,
        reserved_bytes: Option<u64>,
    ) -> Self {
        DeviceMemory {
            total_bytes,
            used_bytes,
            free_bytes,
            reserved_bytes,
        }
    }
}

/// Device telemetry: how busy, how hot, how much power. Each reading is `None` (with an
/// [`Unknown`] entry on the device) where the driver does not provide it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(Serialize))]
#[non_exhaustive]
pub struct Telemetry {
    /// Percent of the last sample period the GPU was busy (NVML utilization, amdgpu
    /// `gpu_busy_percent`).
    pub utilization_percent: Option<f64>,
    /// Percent of the last sample period device memory was being read or written.
    pub memory_utilization_percent: Option<f64>,
    /// GPU temperature, degrees Celsius.
    pub temperature_celsius: Option<f64>,
    /// Power draw, watts.
    pub power_watts: Option<f64>,
    /// Energy since the driver loaded, joules.
    pub energy_joules: Option<f64>,
    /// Graphics clock, MHz.
    pub clock_graphics_mhz: Option<u32>,
    /// SM (streaming multiprocessor) clock, MHz.
    pub clock_sm_mhz: Option<u32>,
    /// Memory clock, MHz.
    pub clock_memory_mhz: Option<u32>,
    /// Maximum graphics clock, MHz.
    pub clock_graphics_max_mhz: Option<u32>,
    /// Maximum memory clock, MHz.
    pub clock_memory_max_mhz: Option<u32>,
}

/// One GPU (or accelerator).
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(Serialize))]
#[non_exhaustive]
pub struct Device {
    /// The device's index in `hmn`'s numbering: NVML devices first, in NVML order.
    pub index: u32,
    /// The vendor.
    pub vendor: Vendor,
    /// Marketing name, when the driver reports one.
    pub name: Option<String>,
    /// Stable identifier (`GPU-…` for NVIDIA).
    pub uuid: Option<String>,
    /// PCI address, normalised to `0000:1a:00.0`.
    pub pci_bus_id: Option<PciBusId>,
    /// The kernel driver (`nvidia`, `amdgpu`, `i915`, `xe`, …).
    pub driver: Option<String>,
    /// The driver's version string.
    pub driver_version: Option<String>,
    /// PCI vendor and device id, `1002:73bf`.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub pci_id: Option<String>,
    /// Runtime power state from sysfs `power/runtime_status` (`active`, `suspended`, …). A
    /// suspended device is not read (reading would wake it), so its memory is unknown.
    pub runtime_status: Option<RuntimeStatus>,
    /// Whether the GPU is integrated (its memory is shared system memory), when known.
    pub integrated: Option<bool>,
    /// Device-wide memory.
    pub memory: DeviceMemory,
    /// Per-region totals where the driver exposes them (amdgpu: `vram`, `visible_vram`, `gtt`).
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "BTreeMap::is_empty"))]
    pub regions: BTreeMap<String, DeviceRegion>,
    /// Utilization, temperature, power, clocks.
    pub telemetry: Telemetry,
    /// The backend that produced this record.
    pub source: Source,
    /// Fields that are `None`, with the reason.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Vec::is_empty"))]
    pub unknown: Vec<Unknown>,
    /// Set when the device exists but could not be read at all.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub error: Option<String>,
    /// MIG mode and MIG devices (NVIDIA GPUs that support MIG; absent elsewhere).
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub mig: Option<MigState>,
}

impl Device {
    /// A device with only an index, vendor and source known; backends fill in the rest.
    pub fn new(index: u32, vendor: Vendor, source: Source) -> Self {
        Device {
            index,
            vendor,
            name: None,
            uuid: None,
            pci_bus_id: None,
            driver: None,
            driver_version: None,
            pci_id: None,
            runtime_status: None,
            integrated: None,
            memory: DeviceMemory::default(),
            regions: BTreeMap::new(),
            telemetry: Telemetry::default(),
            source,
            unknown: Vec::new(),
            error: None,
            mig: None,
        }
    }

    /// The name, or `"unknown GPU"`.
    pub fn name_or_unknown(&self) -> &str {
        self.name.as_deref().unwrap_or("unknown GPU")
    }

    /// Whether the device is runtime-suspended (and so was not read).
    pub fn is_suspended(&self) -> bool {
        self.runtime_status == Some(RuntimeStatus::Suspended)
    }

    /// Whether MIG is in effect on this GPU.
    pub fn mig_enabled(&self) -> bool {
        self.mig.as_ref().is_some_and(MigState::enabled)
    }

    /// Its MIG device with this index.
    pub fn mig_instance(&self, index: u32) -> Option<&MigDevice> {
        self.mig.as_ref().and_then(|m| m.instance(index))
    }
}

/// One process's use of one device: a row of `hmn ps`.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(Serialize))]
#[non_exhaustive]
pub struct GpuProcess {
    /// Process id (in the namespace of the proc root; NVML reports host PIDs).
    pub pid: u32,
    /// Process name: `comm`, or the basename of `argv[0]` when `comm` was cut at 15 bytes; kept
    /// as bytes (JSON: `name`, lossy UTF-8, and `name_bytes_hex` when it is not UTF-8; see
    /// [`ProcessName`]).
    #[cfg_attr(
        feature = "serde",
        serde(flatten, serialize_with = "name_serde::optional")
    )]
    pub name: Option<ProcessName>,
    /// Owner's user name (effective UID), when it resolves.
    pub user: Option<String>,
    /// Owner's effective UID.
    pub uid: Option<u32>,
    /// The device's index (see [`Device::index`]).
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
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub gpu_instance_id: Option<u32>,
    /// MIG compute instance, when the device is partitioned.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub compute_instance_id: Option<u32>,
    /// Memory per region (DRM devices): `{"vram":{…},"gtt":{…},"system":{…}}`.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub regions: Option<ProcessRegions>,
    /// Engine use per class over the last sampling interval (DRM devices; needs two samples).
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "BTreeMap::is_empty"))]
    pub engines: Engines,
    /// MIG device index on the GPU, when the row is inside a MIG instance.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub mig_index: Option<u32>,
    /// The MIG device's `MIG-…` UUID, when the row is inside a MIG instance.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub mig_uuid: Option<String>,
    /// Engine use over the last sampling period (NVIDIA, `nvmlDeviceGetProcessUtilization`);
    /// `None` with an `unknown` entry where the driver does not give it (MIG, old GPUs).
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub utilization: Option<ProcessUtilization>,
    /// An MPS server whose figure is at least its clients' sum: it may include their memory,
    /// so sums over rows leave it out (its clients are counted on their own rows).
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "std::ops::Not::not"))]
    pub may_include_clients: bool,
    /// DRM client ids this process holds on the device.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Vec::is_empty"))]
    pub drm_clients: Vec<u64>,
    /// Lower pids that share some of this process's DRM clients (fork, fd passing): those
    /// clients are counted on the owner's row only, so a sum over rows counts each client once.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Vec::is_empty"))]
    pub shared_with: Vec<u32>,
    /// Fields that are `None`, with the reason.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Vec::is_empty"))]
    pub unknown: Vec<Unknown>,
    /// The workload holding the process (container, pod, Slurm job, unit), from its cgroup.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub workload: Option<crate::types::workload::WorkloadInfo>,
    /// The process's pid in its own, innermost PID namespace (`NSpid`'s last entry), when
    /// that differs from `pid` (a process in a container, seen from outside).
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
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
}

#[cfg(test)]
mod tests;
