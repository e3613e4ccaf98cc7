//! The upstream hypomnesis API: free functions and [`Snapshot`], served by one shared [`Probe`].
//!
//! Upstream hypomnesis loaded, initialised and shut down NVML inside every call. Here the first
//! call creates one [`Probe`] (configured from the environment, see
//! [`ProbeOptions::from_env`](crate::ProbeOptions::from_env)) and every later call reuses it, so
//! NVML is loaded once per process. Programs that want their own configuration, or to drop NVML
//! when done, hold a [`Probe`] themselves.

use std::sync::OnceLock;

use crate::error::{Error, Result};
use crate::probe::Probe;
use crate::types::{Device, GpuProcess, Source, Unknown};

#[cfg(feature = "serde")]
use serde::Serialize;

/// The probe shared by the free functions, created on first use.
pub fn shared_probe() -> &'static Probe {
    static SHARED: OnceLock<Probe> = OnceLock::new();
    SHARED.get_or_init(Probe::new)
}

/// The calling process's own use of one GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize))]
#[non_exhaustive]
pub struct ProcessGpuInfo {
    /// Device memory this process holds on the device: `Some(0)` when the device's process
    /// list was read and this process is not in it; `None` when the driver reported the
    /// process without a usable figure (see `unknown`).
    pub used_bytes: Option<u64>,
    /// Whether `used_bytes` is this process's own figure. Always `true` here: unlike upstream,
    /// hypomnesis never substitutes the device-wide figure (kept for API parity).
    pub is_per_process: bool,
    /// Which backend answered.
    pub source: Source,
    /// Why `used_bytes` is `None`, when it is.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Vec::is_empty"))]
    pub unknown: Vec<Unknown>,
}

impl ProcessGpuInfo {
    /// Picks the caller's row out of a device's process list.
    pub(crate) fn from_rows(rows: &[GpuProcess], pid: u32, source: Source) -> ProcessGpuInfo {
        match rows.iter().find(|r| r.pid == pid) {
            Some(row) => ProcessGpuInfo {
                used_bytes: row.used_bytes,
                is_per_process: true,
                source: row.source,
                unknown: row.unknown.clone(),
            },
            None => ProcessGpuInfo {
                used_bytes: Some(0),
                is_per_process: true,
                source,
                unknown: Vec::new(),
            },
        }
    }
}

/// RAM and VRAM of the calling process at one instant, with the device's state.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(Serialize))]
#[non_exhaustive]
pub struct Snapshot {
    /// The process's resident set size.
    pub ram_bytes: u64,
    /// The process's own use of the device, when it could be read.
    pub gpu: Option<ProcessGpuInfo>,
    /// The device, when it could be read.
    pub gpu_device: Option<Device>,
}

impl Snapshot {
    /// RAM of this process plus, best effort, its VRAM on device `index` and that device's
    /// state.
    ///
    /// # Errors
    /// Only when the process's own RSS cannot be read; GPU problems leave `gpu` and
    /// `gpu_device` `None`.
    pub fn now(index: u32) -> Result<Snapshot> {
        Snapshot::with_probe(shared_probe(), index)
    }

    /// [`Snapshot::now`] with an explicit probe.
    ///
    /// # Errors
    /// As [`Snapshot::now`].
    pub fn with_probe(probe: &Probe, index: u32) -> Result<Snapshot> {
        let ram_bytes = probe.own_rss()?;
        let gpu_device = probe.device(index).ok();
        let gpu = gpu_device.as_ref().and_then(|d| {
            probe
                .gpu_processes_on(index)
                .ok()
                .map(|rows| ProcessGpuInfo::from_rows(&rows, std::process::id(), d.source))
        });
        Ok(Snapshot {
            ram_bytes,
            gpu,
            gpu_device,
        })
    }

    /// One snapshot per device (one RSS reading shared by all); an empty list when there is no
    /// GPU.
    ///
    /// # Errors
    /// Only when the process's own RSS cannot be read.
    pub fn all() -> Result<Vec<Snapshot>> {
        Snapshot::all_with_probe(shared_probe())
    }

    /// [`Snapshot::all`] with an explicit probe.
    ///
    /// # Errors
    /// As [`Snapshot::all`].
    pub fn all_with_probe(probe: &Probe) -> Result<Vec<Snapshot>> {
        let ram_bytes = probe.own_rss()?;
        let list = probe.gpu_processes();
        let devices = probe.devices().devices;
        let me = std::process::id();
        Ok(devices
            .into_iter()
            .map(|d| {
                let rows: Vec<GpuProcess> = list
                    .processes
                    .iter()
                    .filter(|p| p.device_index == d.index)
                    .cloned()
                    .collect();
                let gpu = (d.error.is_none() && !list.failed_devices.contains(&d.index))
                    .then(|| ProcessGpuInfo::from_rows(&rows, me, d.source));
                Snapshot {
                    ram_bytes,
                    gpu,
                    gpu_device: Some(d),
                }
            })
            .collect())
    }
}

/// The number of GPUs.
///
/// # Errors
/// [`Error::NoGpu`] when no backend is available (with each backend's reason).
pub fn device_count() -> Result<u32> {
    let list = shared_probe().devices();
    if list.devices.is_empty()
        && list
            .backends
            .iter()
            .all(|b| !matches!(b.state, crate::types::BackendState::Active { .. }))
    {
        return Err(Error::NoGpu {
            reasons: list.absent_reasons(),
        });
    }
    Ok(u32::try_from(list.devices.len()).unwrap_or(u32::MAX))
}

/// One device's name, memory and driver.
///
/// # Errors
/// See [`Probe::device`].
pub fn device_info(index: u32) -> Result<Device> {
    shared_probe().device(index)
}

/// The calling process's own VRAM on device `index`.
///
/// # Errors
/// See [`Probe::gpu_processes_on`].
pub fn process_gpu_info(index: u32) -> Result<ProcessGpuInfo> {
    let probe = shared_probe();
    let source = probe.device(index)?.source;
    let rows = probe.gpu_processes_on(index)?;
    Ok(ProcessGpuInfo::from_rows(&rows, std::process::id(), source))
}

/// Every process holding memory on device `index`, sorted by pid.
///
/// # Errors
/// See [`Probe::gpu_processes_on`].
pub fn gpu_processes(index: u32) -> Result<Vec<GpuProcess>> {
    shared_probe().gpu_processes_on(index)
}

/// The calling process's resident set size, from `/proc/self/statm`.
///
/// # Errors
/// When `statm` cannot be read.
pub fn process_rss() -> Result<u64> {
    shared_probe().own_rss()
}
