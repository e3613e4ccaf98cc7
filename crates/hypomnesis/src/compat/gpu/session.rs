//! [`Session`]: one upstream-compatible query over a [`Probe`] — the backend chains of
//! upstream hypomnesis 0.2.15 for NVIDIA devices, and this crate's DRM devices after them.
//!
//! A session reads what it needs once (NVML's state and count on creation; the device list and
//! the DRM process rows when first asked) and answers any number of indices from it, so
//! `Snapshot::all` costs one enumeration. The chains, per index `i`:
//!
//! | Query | NVIDIA (`i` < NVML's count) | DRM device `i` | then | finally |
//! |---|---|---|---|---|
//! | device | NVML device, v1 figures | sysfs, when total and free are known | `nvidia-smi --id=i` | bounds |
//! | own use | Windows: own DXGI `CurrentUsage` on the adapter joined by PCI location; then own NVML compute row | own DRM row, else the device's used memory | `nvidia-smi --id=i` memory.used, device-wide | bounds |
//! | listing | NVML compute rows (never smi once NVML answered) | DRM rows with a known figure | `nvidia-smi --id=i` compute apps | bounds |
//!
//! "Bounds" is upstream's end of every chain: `DeviceIndexOutOfRange` when a count answered
//! and `i` is beyond it, `Nvml` when NVML is broken, else `NoGpuSource`.

use std::cell::OnceCell;

use crate::backends::error::NvmlStart;
use crate::compat::error::{HypomnesisError, Result};
use crate::compat::snapshot::convert;
use crate::compat::snapshot::values::{
    GpuDeviceInfo, GpuProcessEntry, GpuProcessListing, ProcessGpuInfo,
};
use crate::probe::Probe;
use crate::types::{Device, DeviceList, GpuProcess, Source, Vendor};

use super::names;

/// NVML as upstream sees it.
enum NvmlState<'p> {
    /// Loaded and counted.
    #[cfg(feature = "nvml")]
    Ready {
        backend: &'p crate::backends::nvml::NvmlBackend,
        count: u32,
    },
    /// `nvmlInit_v2` said there is no GPU: a count of zero.
    NoGpu,
    /// Not installed, not loadable, driver not loaded, or turned off.
    Absent,
    /// Installed but unable to start or count: upstream's `Nvml(detail)`.
    Broken(String),
    /// Keeps the lifetime used without the `nvml` feature.
    #[cfg(not(feature = "nvml"))]
    #[allow(dead_code)]
    Never(std::marker::PhantomData<&'p ()>),
}

/// One upstream-compatible query (see the module docs).
pub(crate) struct Session<'p> {
    probe: &'p Probe,
    nvml: NvmlState<'p>,
    devices: OnceCell<DeviceList>,
    drm_rows: OnceCell<Vec<GpuProcess>>,
}

impl Session<'static> {
    /// A session over the shared probe ([`crate::shared_probe`]), as the crate-level functions
    /// use.
    pub(crate) fn shared() -> Session<'static> {
        Session::new(crate::probe::shared_probe())
    }
}

impl<'p> Session<'p> {
    /// Reads NVML's state (loading it on the probe's first use) and its count.
    pub(crate) fn new(probe: &'p Probe) -> Session<'p> {
        let nvml = match probe.nvml_slot() {
            #[cfg(feature = "nvml")]
            Ok(backend) => match backend.device_count() {
                Ok(count) => NvmlState::Ready { backend, count },
                Err(e) => NvmlState::Broken(match e {
                    crate::backends::error::BackendError::Nvml(e) => {
                        crate::backends::nvml::call_failure("nvmlDeviceGetCount_v2", &e)
                    }
                    other => other.to_string(),
                }),
            },
            #[cfg(not(feature = "nvml"))]
            Ok(never) => match *never {},
            Err(reason) => match reason.nvml_start() {
                NvmlStart::Absent => {
                    trace!("[NVML debug]", "absent: {reason}");
                    NvmlState::Absent
                }
                NvmlStart::NoGpu => NvmlState::NoGpu,
                NvmlStart::Broken(detail) => NvmlState::Broken(detail),
            },
        };
        match &nvml {
            NvmlState::Broken(detail) => trace!("[NVML debug]", "broken: {detail}"),
            NvmlState::NoGpu => trace!("[NVML debug]", "no GPU found: a count of 0"),
            _ => {}
        }
        Session {
            probe,
            nvml,
            devices: OnceCell::new(),
            drm_rows: OnceCell::new(),
        }
    }

    /// NVML's backend when `index` is one of the devices it counted.
    #[cfg(feature = "nvml")]
    fn nvml_device(&self, index: u32) -> Option<&'p crate::backends::nvml::NvmlBackend> {
        match self.nvml {
            NvmlState::Ready { backend, count } if index < count => Some(backend),
            _ => None,
        }
    }

    /// No NVML device without the `nvml` feature.
    #[cfg(not(feature = "nvml"))]
    fn nvml_device(&self, _index: u32) -> Option<std::convert::Infallible> {
        None
    }

    fn devices(&self) -> &DeviceList {
        self.devices.get_or_init(|| self.probe.devices())
    }

    fn drm_rows(&self) -> &[GpuProcess] {
        self.drm_rows.get_or_init(|| {
            let (devices, rows) = self.probe.drm_usage();
            let _ = self.devices.set(devices);
            rows
        })
    }

    /// The DRM devices this layer answers for: every device the probe found through sysfs
    /// except NVIDIA's (whose DRM nodes carry no memory figures; NVML and `nvidia-smi` speak for
    /// them).
    fn drm_devices(&self) -> impl Iterator<Item = &Device> {
        self.devices()
            .devices
            .iter()
            .filter(|d| d.source == Source::Sysfs && d.vendor != Vendor::Nvidia)
    }

    fn drm_device(&self, index: u32) -> Option<&Device> {
        self.drm_devices().find(|d| d.index == index)
    }

    /// The number of devices: upstream's count (NVML's; `nvidia-smi` never counts), or, when
    /// DRM devices exist, the size of the index space that ends with them.
    pub(crate) fn count(&self) -> Result<u32> {
        if let Some(end) = self.drm_devices().map(|d| d.index.saturating_add(1)).max() {
            return Ok(end);
        }
        match &self.nvml {
            #[cfg(feature = "nvml")]
            NvmlState::Ready { count, .. } => Ok(*count),
            NvmlState::NoGpu => Ok(0),
            NvmlState::Broken(detail) => Err(HypomnesisError::Nvml(detail.clone())),
            _ => Err(HypomnesisError::NoGpuSource),
        }
    }

    /// Upstream's end of every chain, once every backend failed for `index`.
    fn unanswered(&self, index: u32) -> HypomnesisError {
        match self.count() {
            Ok(count) if index >= count => HypomnesisError::DeviceIndexOutOfRange { index, count },
            Ok(_) => HypomnesisError::NoGpuSource,
            Err(e) => e,
        }
    }

    /// Device `index`'s memory and identity.
    pub(crate) fn device_info(&self, index: u32) -> Result<GpuDeviceInfo> {
        if let Some(nvml) = self.nvml_device(index) {
            // Upstream's device info has no telemetry: none of it is read. A figure no device
            // can have (NVML's sentinel) is unknown, so the info is unanswered, not 16 EiB.
            #[cfg(feature = "nvml")]
            {
                let mut dev = nvml.device_with(index, crate::backends::nvml::Reads::MEMORY);
                let _ = crate::probe::plausible::check(&mut dev);
                match convert::device_info(&dev) {
                    Ok(info) => return Ok(info),
                    Err(why) => trace!("[NVML debug]", "device {index}: {why}; trying nvidia-smi"),
                }
            }
            #[cfg(not(feature = "nvml"))]
            match nvml {}
        } else if let Some(dev) = self.drm_device(index) {
            return convert::device_info(dev).map_err(|why| {
                trace!("[DRM debug]", "device {index}: {why}");
                self.unanswered(index)
            });
        }
        if let Some(smi) = self.probe.smi_fallback() {
            match smi.memory_of(index) {
                Ok(m) => match convert::device_info_from_smi(index, &m) {
                    Ok(info) => return Ok(info),
                    Err(why) => trace!("[nvidia-smi debug]", "--id={index}: {why}"),
                },
                Err(e) => trace!("[nvidia-smi debug]", "--id={index}: {e}"),
            }
        }
        Err(self.unanswered(index))
    }

    /// The caller's own `CurrentUsage` on NVIDIA device `index`, through the DXGI adapter at
    /// its PCI address. The address comes from the session's device list when it was read
    /// already, else from this one device (not a walk of every backend, PDH's included).
    #[cfg(all(windows, feature = "dxgi"))]
    fn dxgi_own_usage(&self, index: u32) -> Option<ProcessGpuInfo> {
        self.nvml_device(index)?;
        let id = match self.devices.get() {
            Some(list) => list.device(index).ok()?.pci_bus_id?,
            None => self.probe.device(index).ok()?.pci_bus_id?,
        };
        match crate::backends::wddm::windows::own_local_usage(&id) {
            Ok(used_bytes) => Some(ProcessGpuInfo {
                used_bytes,
                is_per_process: true,
                source: crate::compat::snapshot::values::GpuQuerySource::Dxgi,
            }),
            Err(e) => {
                trace!("[DXGI debug]", "device {index}: {e}");
                None
            }
        }
    }

    /// The calling process's use of device `index` (its own figure, else the device's).
    pub(crate) fn process_gpu_info(&self, index: u32) -> Result<ProcessGpuInfo> {
        let me = std::process::id();
        // Platform seam (upstream's order on Windows): DXGI's own figure before NVML, whose
        // per-process rows are NVML_VALUE_NOT_AVAILABLE under WDDM.
        #[cfg(all(windows, feature = "dxgi"))]
        if let Some(own) = self.dxgi_own_usage(index) {
            return Ok(own);
        }
        if let Some(nvml) = self.nvml_device(index) {
            #[cfg(feature = "nvml")]
            match nvml.compute_processes(index) {
                Ok(rows) => match rows
                    .iter()
                    .filter(|r| r.pid == me)
                    .find_map(convert::own_usage)
                {
                    Some(own) => return Ok(own),
                    None => trace!(
                        "[NVML debug]",
                        "device {index}: pid {me} has no compute row with a figure; trying nvidia-smi (device-wide)"
                    ),
                },
                Err(e) => trace!("[NVML debug]", "device {index}: process list: {e}"),
            }
            #[cfg(not(feature = "nvml"))]
            match nvml {}
        } else if let Some(dev) = self.drm_device(index) {
            let own = self
                .drm_rows()
                .iter()
                .filter(|r| r.device_index == index && r.pid == me)
                .find_map(convert::own_usage);
            return own
                .or_else(|| convert::device_wide_usage(dev))
                .ok_or_else(|| self.unanswered(index));
        }
        if let Some(smi) = self.probe.smi_fallback() {
            match smi.memory_of(index) {
                Ok(m) => {
                    return Ok(ProcessGpuInfo {
                        used_bytes: m.used,
                        is_per_process: false,
                        source: crate::compat::snapshot::values::GpuQuerySource::NvidiaSmi,
                    });
                }
                Err(e) => trace!("[nvidia-smi debug]", "--id={index}: {e}"),
            }
        }
        Err(self.unanswered(index))
    }

    /// The processes on device `index`, by pid.
    pub(crate) fn listing(&self, index: u32) -> Result<GpuProcessListing> {
        let roots = self.probe.roots();
        let mut entries: Vec<GpuProcessEntry> = 'found: {
            if let Some(nvml) = self.nvml_device(index) {
                #[cfg(feature = "nvml")]
                match nvml.compute_processes(index) {
                    Ok(rows) => {
                        break 'found rows
                            .iter()
                            .filter_map(|r| convert::process_entry(r, names::name_of(roots, r.pid)))
                            .collect();
                    }
                    Err(e) => trace!("[NVML debug]", "device {index}: process list: {e}"),
                }
                #[cfg(not(feature = "nvml"))]
                match nvml {}
            } else if let Some(dev) = self.drm_device(index) {
                if dev.is_suspended() {
                    trace!(
                        "[DRM debug]",
                        "device {index} is runtime-suspended; not woken"
                    );
                    return Err(self.unanswered(index));
                }
                break 'found self
                    .drm_rows()
                    .iter()
                    .filter(|r| r.device_index == index)
                    .filter_map(|r| convert::process_entry(r, names::name_of(roots, r.pid)))
                    .collect();
            }
            if let Some(smi) = self.probe.smi_fallback() {
                match smi.compute_apps_of(index) {
                    Ok(apps) => {
                        break 'found apps.iter().map(convert::process_entry_from_smi).collect();
                    }
                    Err(e) => trace!("[nvidia-smi debug]", "--id={index}: {e}"),
                }
            }
            return Err(self.unanswered(index));
        };
        entries.sort_by_key(|e| e.pid);
        Ok(GpuProcessListing {
            entries,
            denied_pids: Vec::new(),
        })
    }
}
