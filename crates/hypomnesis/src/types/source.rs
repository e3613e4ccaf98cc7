//! Where a figure comes from and why one is missing: [`Source`] (the backend that produced it),
//! [`Vendor`], and [`Unknown`] with its [`UnknownReason`] — the entry that stands beside every
//! value that could not be read (a number is never used to mean "unknown").

use std::borrow::Cow;
use std::fmt;

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
