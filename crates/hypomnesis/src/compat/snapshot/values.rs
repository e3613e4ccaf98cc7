//! The value types of upstream's `hypomnesis::snapshot` (re-exported there): [`GpuDeviceInfo`],
//! [`ProcessGpuInfo`], [`GpuQuerySource`], [`GpuProcessEntry`], [`GpuProcessListing`] — plain
//! `u64`s, built only from known measurements (`docs/upstream.md`).

/// One GPU's memory, device-wide, as the upstream API reports it.
///
/// `used_bytes` is everything not free (`total_bytes − free_bytes`), the driver's reserved
/// carve-out included; `reserved_bytes` says how much of it is that carve-out when the driver
/// reports it (NVML R510+). For the truthful figures (used *without* the carve-out, unknowns
/// kept apart), read [`crate::Device::memory`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GpuDeviceInfo {
    /// The device index (NVIDIA devices in NVML order, then DRM devices in PCI order).
    pub index: u32,
    /// The product name, when the source reports one.
    pub name: Option<String>,
    /// Device memory in bytes.
    pub total_bytes: u64,
    /// Memory no allocation holds, in bytes.
    pub free_bytes: u64,
    /// Memory in use in bytes: `total_bytes − free_bytes`, the reserved carve-out included.
    pub used_bytes: u64,
    /// The driver's reserved carve-out (part of `used_bytes`), when reported (NVML R510+, or
    /// `nvidia-smi`'s `memory.reserved`).
    pub reserved_bytes: Option<u64>,
    /// The driver version (NVIDIA's, e.g. `550.54.15`; the kernel's for a DRM device), when
    /// known.
    pub driver_version: Option<String>,
}

impl GpuDeviceInfo {
    /// The name, or `"unknown GPU"` when there is none.
    #[must_use]
    pub fn name_or_unknown(&self) -> &str {
        self.name.as_deref().unwrap_or("unknown GPU")
    }
}

/// The calling process's use of one GPU, as the upstream API reports it.
///
/// When the process has a figure of its own, `is_per_process` is `true`; when it has none
/// (on NVIDIA under Linux: no CUDA context), the upstream API reports the device-wide used
/// memory instead and says so with `is_per_process: false`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProcessGpuInfo {
    /// Bytes: the process's own when `is_per_process`, the device's otherwise.
    pub used_bytes: u64,
    /// Whether `used_bytes` is this process's own figure.
    pub is_per_process: bool,
    /// Which backend answered.
    pub source: GpuQuerySource,
}

/// Which backend produced a value.
///
/// `Dxgi`, `Pdh` and `Metal` are upstream's Windows and macOS backends and are never produced
/// on Linux; `Drm` is this crate's addition for AMD, Intel and other DRM GPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GpuQuerySource {
    /// Windows DXGI (adapters; this crate's DXGI devices).
    Dxgi,
    /// NVIDIA's NVML library.
    Nvml,
    /// Windows performance counters (per-process rows from `GPU Process Memory`).
    Pdh,
    /// The `nvidia-smi` program.
    NvidiaSmi,
    /// macOS Metal (the Metal device).
    Metal,
    /// The Linux DRM interfaces: sysfs for devices, `/proc/<pid>/fdinfo` (and ROCm's KFD) for
    /// processes. Not in upstream.
    Drm,
}

/// One process holding memory on a GPU, as the upstream API lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GpuProcessEntry {
    /// The process id.
    pub pid: u32,
    /// The process name (from `/proc/<pid>/comm`, extended past the kernel's 15-byte cut when
    /// the executable's name continues it), or `nvidia-smi`'s name for it.
    pub name: Option<String>,
    /// Device memory the process holds, in bytes.
    pub used_bytes: u64,
    /// System memory the GPU maps for the process, in bytes. On a DRM device with its own
    /// memory: the process's resident GTT bytes (buffers living in system RAM, the Linux
    /// counterpart of WDDM's shared usage). `0` for NVIDIA rows, whose drivers do not report it
    /// on Linux, and for integrated GPUs, whose `used_bytes` already counts all of it.
    pub shared_used_bytes: u64,
    /// Which backend answered.
    pub source: GpuQuerySource,
}

/// The processes on one GPU, and the ones that could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GpuProcessListing {
    /// The readable processes, by pid ascending.
    pub entries: Vec<GpuProcessEntry>,
    /// Processes the caller may not read, sorted and without duplicates. Always empty on
    /// Linux (upstream fills it on macOS only).
    pub denied_pids: Vec<u32>,
}
