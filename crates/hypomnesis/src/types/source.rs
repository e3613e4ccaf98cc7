//! Where a figure comes from and why one is missing: [`Source`] (the backend that produced it),
//! [`Vendor`], and [`Unknown`] with its [`UnknownReason`] — the entry that stands beside every
//! value that could not be read (a number is never used to mean "unknown").

use std::fmt;

#[cfg(feature = "serde")]
use serde::{Deserialize, Serialize};

use super::field::Field;
use super::spelling::spelled;

spelled! {
    /// Which backend produced a figure.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
    #[non_exhaustive]
    pub enum Source {
        /// NVIDIA Management Library.
        Nvml = "nvml",
        /// The `nvidia-smi` command (fallback when NVML cannot be used).
        NvidiaSmi = "nvidia-smi",
        /// Linux sysfs (`/sys/class/drm/…`).
        Sysfs = "sysfs",
        /// DRM client usage stats in `/proc/<pid>/fdinfo`.
        Fdinfo = "fdinfo",
        /// The AMD KFD (ROCm compute) per-process sysfs files.
        Kfd = "kfd",
        /// Windows DXGI (adapters; the caller's own `QueryVideoMemoryInfo`).
        Dxgi = "dxgi",
        /// Windows performance counters (`GPU Process Memory`, `GPU Adapter Memory`).
        Pdh = "pdh",
        /// macOS Metal (`MTLDevice`).
        Metal = "metal",
    }
}

spelled! {
    /// Who made a GPU.
    #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
    #[non_exhaustive]
    pub enum Vendor {
        /// NVIDIA (PCI vendor 0x10de).
        Nvidia = "nvidia",
        /// AMD (PCI vendor 0x1002).
        Amd = "amd",
        /// Intel (PCI vendor 0x8086).
        Intel = "intel",
    } else {
        /// Anything else, named by its kernel driver (`msm`, `panfrost`, `v3d`, …).
        Other(String),
    }
}

spelled! {
    /// Why a value is unknown.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    #[non_exhaustive]
    pub enum UnknownReason {
        /// The driver, device or kernel does not provide it.
        Unsupported = "unsupported",
        /// Reading it needs more privileges.
        PermissionDenied = "permission_denied",
        /// The driver returned its "not available" sentinel (NVML `ULLONG_MAX`, nvidia-smi
        /// `[N/A]`).
        DriverSentinel = "driver_sentinel",
        /// The driver returned a value that cannot be true (a process using more than the
        /// device holds).
        Implausible = "implausible",
        /// The device is runtime-suspended; reading it would wake it.
        Suspended = "suspended",
        /// The device failed while it was being read (GPU lost, driver error).
        DeviceError = "device_error",
        /// The file that holds it is larger than the limit set for its kind, or has more keys
        /// than that limit (a hostile or corrupt `/proc`): it was not read past the limit.
        TooLarge = "too_large",
        /// The file that holds it could not be read as a file: not a regular file (a FIFO, a
        /// device node, a socket), or an I/O error.
        Unreadable = "unreadable",
        /// The process is not visible under the proc root: NVML reported a host pid, and the
        /// proc root shows a container's own PID namespace.
        OtherPidNamespace = "other_pid_namespace",
        /// The caller's options asked not to read it (a dear driver call the caller does not
        /// show: [`ProbeOptions::energy`](crate::ProbeOptions::energy)).
        NotRequested = "not_requested",
    }
}

/// One field that could not be read, and why. Lives beside the `None` it explains.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
#[non_exhaustive]
pub struct Unknown {
    /// The field, spelled in JSON as its path (`"memory.reserved_bytes"`, `"used_bytes"`).
    pub field: Field,
    /// The kind of reason.
    pub reason: UnknownReason,
    /// A human-readable detail (which call failed, what the driver said).
    pub detail: String,
}

impl Unknown {
    /// An unknown-field record.
    pub fn new(field: Field, reason: UnknownReason, detail: impl Into<String>) -> Self {
        Unknown {
            field,
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
