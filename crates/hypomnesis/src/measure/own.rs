//! This process's own memory, truthfully: [`OwnSnapshot`] (RSS, and for each device this
//! process's own VRAM as an `Option` with the reason it is unknown) and [`OwnGpuUsage`].
//!
//! The upstream-compatible equivalents (`Snapshot`, `ProcessGpuInfo` at the crate root) keep
//! upstream's shapes (plain `u64`, a device-wide figure where the process has none of its own);
//! these are what new code should use.

use crate::probe::{Probe, shared_probe};
use crate::types::error::Error;
use crate::types::{Device, GpuProcess, Source, Unknown};

#[cfg(feature = "serde")]
use serde::Serialize;

/// The calling process's own use of one GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize))]
#[non_exhaustive]
pub struct OwnGpuUsage {
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

impl OwnGpuUsage {
    /// Picks the caller's row out of a device's process list.
    pub(crate) fn from_rows(rows: &[GpuProcess], pid: u32, source: Source) -> OwnGpuUsage {
        match rows.iter().find(|r| r.pid == pid) {
            Some(row) => OwnGpuUsage {
                used_bytes: row.used_bytes,
                is_per_process: true,
                source: row.source,
                unknown: row.unknown.clone(),
            },
            None => OwnGpuUsage {
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
pub struct OwnSnapshot {
    /// The process's resident set size.
    pub ram_bytes: u64,
    /// The process's own use of the device, when it could be read.
    pub gpu: Option<OwnGpuUsage>,
    /// The device, when it could be read.
    pub gpu_device: Option<Device>,
}

impl OwnSnapshot {
    /// RAM of this process plus, best effort, its VRAM on device `index` and that device's
    /// state.
    ///
    /// # Errors
    /// Only when the process's own RSS cannot be read; GPU problems leave `gpu` and
    /// `gpu_device` `None`.
    pub fn now(index: u32) -> Result<OwnSnapshot, Error> {
        OwnSnapshot::with_probe(shared_probe(), index)
    }

    /// [`OwnSnapshot::now`] with an explicit probe.
    ///
    /// # Errors
    /// As [`OwnSnapshot::now`].
    pub fn with_probe(probe: &Probe, index: u32) -> Result<OwnSnapshot, Error> {
        let ram_bytes = probe.own_rss()?;
        let gpu_device = probe.device(index).ok();
        let gpu = gpu_device.as_ref().and_then(|d| {
            probe
                .gpu_processes_on(index)
                .ok()
                .map(|rows| OwnGpuUsage::from_rows(&rows, std::process::id(), d.source))
        });
        Ok(OwnSnapshot {
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
    pub fn all() -> Result<Vec<OwnSnapshot>, Error> {
        OwnSnapshot::all_with_probe(shared_probe())
    }

    /// [`OwnSnapshot::all`] with an explicit probe.
    ///
    /// # Errors
    /// As [`OwnSnapshot::all`].
    pub fn all_with_probe(probe: &Probe) -> Result<Vec<OwnSnapshot>, Error> {
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
                    .then(|| OwnGpuUsage::from_rows(&rows, me, d.source));
                OwnSnapshot {
                    ram_bytes,
                    gpu,
                    gpu_device: Some(d),
                }
            })
            .collect())
    }
}
