//! Upstream's `hypomnesis::gpu`: the free functions over GPU devices and processes, with
//! upstream hypomnesis 0.2.15's signatures and documented behaviour, served by the shared
//! [`Probe`](crate::Probe) ([`crate::shared_probe`], configured from `HMN_*`).
//!
//! # Devices and indices
//! Indices are the probe's: NVIDIA devices first, in NVML's order, then AMD, Intel and other
//! DRM devices in PCI order (this crate's addition; their values say
//! [`GpuQuerySource::Drm`](crate::GpuQuerySource::Drm)). On a machine with only NVIDIA GPUs
//! every function behaves as upstream's does:
//! - [`device_count`] counts what NVML counts; `nvidia-smi` is never used to count, so with
//!   `nvidia-smi` alone it is `Err(NoGpuSource)`;
//! - an NVML that is installed but cannot start (other than "driver not loaded" and "no GPU
//!   found") or cannot count is `Err(HypomnesisError::Nvml("<call> returned <NAME> (<code>)"))`;
//! - each query tries NVML, then `nvidia-smi --id=N`, and only when both fail says why:
//!   `DeviceIndexOutOfRange` (a count answered and the index is beyond it), `Nvml` (NVML is
//!   broken) or `NoGpuSource`.
//!
//! # Which figures
//! - [`device_info`]: `used_bytes` = `total − free`, the driver's reserved carve-out included;
//!   `reserved_bytes` = the carve-out when the driver reports it.
//! - [`process_gpu_info`]: the caller's own NVML compute row; without one (no CUDA context),
//!   `nvidia-smi`'s device-wide `memory.used`, marked `is_per_process: false`.
//! - [`gpu_processes`]: NVML's compute processes only (a process with only a graphics context
//!   is not listed); rows whose figure is NVML's "not available" sentinel or above the device's
//!   total are left out; never `nvidia-smi` once NVML answered.
//!
//! These functions answer with plain numbers and cannot say "unknown": what could not be read
//! is left out or returned as an error. [`crate::Probe`] gives every figure with its reason.
//!
//! Submodules: `session` (the backend chains), `names` (process existence and names).

/// A backend trace on stderr with upstream's prefix (`[NVML debug] …`), compiled in only with
/// the `debug-output` feature.
macro_rules! trace {
    ($prefix:literal, $($arg:tt)+) => {{
        #[cfg(feature = "debug-output")]
        $crate::compat::gpu::emit($prefix, format_args!($($arg)+));
        #[cfg(not(feature = "debug-output"))]
        let _ = format_args!($($arg)+);
    }};
}

mod names;
pub(crate) mod session;

use session::Session;

use crate::compat::error::Result;
use crate::compat::snapshot::{GpuDeviceInfo, GpuProcessEntry, GpuProcessListing, ProcessGpuInfo};
use crate::probe::shared_probe;

/// Writes one `debug-output` trace line.
#[cfg(feature = "debug-output")]
#[expect(
    clippy::print_stderr,
    reason = "the debug-output feature's purpose is to trace on stderr, as upstream's does"
)]
pub(crate) fn emit(prefix: &str, args: std::fmt::Arguments<'_>) {
    eprintln!("{prefix} {args}");
}

/// The number of GPUs (see the [module docs](self) for what counts).
///
/// # Errors
/// [`HypomnesisError::NoGpuSource`](crate::HypomnesisError::NoGpuSource) when nothing can
/// count (no NVML, driver not loaded, `nvidia-smi` only);
/// [`HypomnesisError::Nvml`](crate::HypomnesisError::Nvml) when NVML is installed but cannot
/// start or count.
pub fn device_count() -> Result<u32> {
    Session::shared().count()
}

/// Device `index`'s memory, name and driver version.
///
/// # Errors
/// When no backend can read the device:
/// [`DeviceIndexOutOfRange`](crate::HypomnesisError::DeviceIndexOutOfRange),
/// [`Nvml`](crate::HypomnesisError::Nvml) or
/// [`NoGpuSource`](crate::HypomnesisError::NoGpuSource) (a device within the count that
/// cannot be read, for example one NVML lost).
pub fn device_info(index: u32) -> Result<GpuDeviceInfo> {
    Session::shared().device_info(index)
}

/// The calling process's use of device `device_index`: its own figure, or the device-wide
/// used memory with `is_per_process: false` when it has none (see the [module docs](self)).
///
/// # Errors
/// As [`device_info`], when neither figure can be read.
pub fn process_gpu_info(device_index: u32) -> Result<ProcessGpuInfo> {
    Session::shared().process_gpu_info(device_index)
}

/// The processes holding memory on device `device_index`, by pid ascending; the entries of
/// [`gpu_process_listing`].
///
/// # Errors
/// As [`gpu_process_listing`].
pub fn gpu_processes(device_index: u32) -> Result<Vec<GpuProcessEntry>> {
    gpu_process_listing(device_index).map(|l| l.entries)
}

/// The processes holding memory on device `device_index`, by pid ascending, and the processes
/// that could not be read (always none on Linux). An empty listing means the device was read
/// and nothing holds memory on it.
///
/// # Errors
/// As [`device_info`] when no backend can list the device (a device NVML counts but whose
/// process list fails, without `nvidia-smi`, is `NoGpuSource`; a runtime-suspended DRM device
/// is not woken to be listed).
pub fn gpu_process_listing(device_index: u32) -> Result<GpuProcessListing> {
    Session::shared().listing(device_index)
}

/// Whether `pid` is a running process: `Some(false)` when it is not (a thread id included),
/// `None` when `/proc` cannot tell (for example a permission error). Read from the shared
/// probe's proc root.
#[must_use]
pub fn process_exists(pid: u32) -> Option<bool> {
    names::exists(shared_probe().roots(), pid)
}

/// `pid`'s name: its `comm`, extended past the kernel's 15-byte cut to the executable's name
/// (or `argv[0]`'s) when that continues it. `None` when the process does not exist (a thread
/// id included) or its name cannot be read.
#[must_use]
pub fn process_name(pid: u32) -> Option<String> {
    let roots = shared_probe().roots();
    if names::exists(roots, pid) == Some(false) {
        return None;
    }
    names::name_of(roots, pid)
}
