//! [`Probe`]: the long-lived entry point that owns the backends.
//!
//! A `Probe` loads NVML once, on first use, and keeps it initialised until it is dropped; every
//! query after that costs only the driver calls it makes. When NVML cannot be loaded or
//! initialised, the `nvidia-smi` fallback answers instead (one subprocess per query, with a time
//! limit). Host memory is read from the proc root in [`ProbeOptions::roots`].
//!
//! A `Probe` is `Send + Sync`: share it behind an `Arc`, or use the crate-level functions
//! (the upstream-compatible API at the crate root), which share one lazily created `Probe`
//! ([`shared_probe`]).

// Layer 3 (ARCHITECTURE.md "Layers"): the truthful entry point and the device selectors. May
// import `types`, `system`, `backends`.

use std::sync::OnceLock;

use crate::backends::drm::{DrmBackend, DrmDevices};
use crate::backends::error::BackendError;
// Without NVML, `Error` is named only in the docs.
use crate::system::host::{self, HostMemory, MemoryDetail, ProcessMemory};
use crate::system::process::IdentityCache;
use crate::system::roots::Roots;
#[cfg_attr(not(feature = "nvml"), allow(unused_imports))]
use crate::types::error::Error;
use crate::types::{
    Backend, BackendCause, BackendState, BackendStatus, Device, DeviceList, Field, GpuProcess,
    ProcessList, Source, Unknown, UnknownReason, Warning,
};

// The DRM backend's part of a query: why it found nothing, its devices' memory health.
mod drm;
// XID events (`Probe::xid_events`); public at `hypomnesis::probe::events`.
pub mod events;
mod options;
// The last guard on device figures: what no device can have is unknown.
pub(crate) mod plausible;
// Completes each device's memory pool (host RAM, sums of processes and clients).
pub(crate) mod pool;
// Public at the crate root (`hypomnesis::select`), documented there.
#[doc(hidden)]
pub mod select;
pub use options::{ENV_NVIDIA_SMI, ENV_NVIDIA_SMI_TIMEOUT_MS, ENV_NVML_LIB, ProbeOptions};

#[cfg(feature = "nvml")]
pub(crate) type NvmlSlot = std::result::Result<crate::backends::nvml::NvmlBackend, BackendError>;
#[cfg(not(feature = "nvml"))]
pub(crate) type NvmlSlot = std::result::Result<std::convert::Infallible, BackendError>;

/// Which NVIDIA source answers this probe: NVML, or `nvidia-smi` with NVML's absence reason.
enum Nvidia<'a> {
    #[cfg(feature = "nvml")]
    Nvml(&'a crate::backends::nvml::NvmlBackend),
    Smi {
        nvml_reason: &'a BackendError,
        smi: Option<&'a crate::backends::smi::Smi>,
    },
}

/// The probe shared by the crate-level functions (the upstream-compatible API and
/// [`crate::own::OwnSnapshot::now`]), created on first use and configured from the environment
/// ([`ProbeOptions::from_env`]): NVML is loaded once per process.
pub fn shared_probe() -> &'static Probe {
    static SHARED: OnceLock<Probe> = OnceLock::new();
    SHARED.get_or_init(Probe::new)
}

/// The long-lived measurement entry point. See the [module docs](self).
pub struct Probe {
    options: ProbeOptions,
    self_statm: host::SelfStatm,
    /// `/proc/meminfo`, kept open ([`Probe::host_memory`]).
    meminfo: host::KeptMeminfo,
    nvml: OnceLock<NvmlSlot>,
    smi: crate::backends::smi::Smi,
    drm: DrmBackend,
    pid_view: OnceLock<crate::system::pidns::PidView>,
    names: crate::system::workload::names::NameCache,
    /// Why the DRM backend found nothing, worded once (it names the probe's sys root).
    drm_absent: OnceLock<(BackendCause, String)>,
}

impl std::fmt::Debug for Probe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Probe")
            .field("options", &self.options)
            .field(
                "nvml_loaded",
                &self.nvml.get().map(std::result::Result::is_ok),
            )
            .finish_non_exhaustive()
    }
}

impl Default for Probe {
    fn default() -> Self {
        Probe::new()
    }
}

impl Probe {
    /// A probe configured from the environment ([`ProbeOptions::from_env`]).
    pub fn new() -> Probe {
        Probe::with_options(ProbeOptions::from_env())
    }

    /// A probe with explicit options.
    pub fn with_options(options: ProbeOptions) -> Probe {
        Probe {
            self_statm: host::SelfStatm::new(&options.roots),
            meminfo: host::KeptMeminfo::new(&options.roots),
            smi: crate::backends::smi::Smi::new(
                options.nvidia_smi.clone(),
                options.nvidia_smi_timeout,
            ),
            drm: DrmBackend::new(options.roots.clone(), options.drm_index_max_age)
                .telemetry(options.telemetry),
            options,
            nvml: OnceLock::new(),
            pid_view: OnceLock::new(),
            names: crate::system::workload::names::NameCache::new(),
            drm_absent: OnceLock::new(),
        }
    }

    /// Which PID namespace the proc root shows, and whether `hmn` runs in a container (read
    /// once per probe; see [`crate::pidns`]).
    pub fn pid_view(&self) -> &crate::system::pidns::PidView {
        self.pid_view.get_or_init(|| {
            crate::system::pidns::view(&crate::system::pidns::gather(&self.options.roots))
        })
    }

    /// The options this probe was made with.
    pub fn options(&self) -> &ProbeOptions {
        &self.options
    }

    /// The roots this probe reads.
    pub fn roots(&self) -> &Roots {
        &self.options.roots
    }

    /// The NVML session, loaded on first use, or why there is none.
    pub(crate) fn nvml_slot(&self) -> &NvmlSlot {
        self.nvml.get_or_init(|| {
            if !self.options.use_nvml {
                return Err(BackendError::Disabled);
            }
            #[cfg(feature = "nvml")]
            {
                crate::backends::nvml::NvmlBackend::load(self.options.nvml_library.as_deref())
            }
            #[cfg(not(feature = "nvml"))]
            {
                Err(BackendError::NotBuilt { feature: "nvml" })
            }
        })
    }

    fn nvidia(&self) -> Nvidia<'_> {
        let smi = self.smi_fallback();
        match self.nvml_slot() {
            #[cfg(feature = "nvml")]
            Ok(backend) => Nvidia::Nvml(backend),
            #[cfg(not(feature = "nvml"))]
            Ok(never) => match *never {},
            Err(nvml_reason) => Nvidia::Smi { nvml_reason, smi },
        }
    }

    /// NVIDIA devices: NVML, or nvidia-smi when NVML is absent. Returns NVML's absence reason.
    fn nvidia_devices(&self, list: &mut DeviceList) -> Option<String> {
        match self.nvidia() {
            #[cfg(feature = "nvml")]
            Nvidia::Nvml(nvml) => {
                match nvml.device_count() {
                    Ok(count) => {
                        for index in 0..count {
                            let dev = nvml.device_with(index, self.options.reads());
                            if let Some(e) = &dev.error {
                                list.warnings.push(Warning::device(index, e.clone()));
                            }
                            // A MIG device that vanished or a slot that failed: one warning.
                            for u in dev.mig.iter().flat_map(|m| &m.unknown) {
                                if u.field == Field::MigInstances {
                                    list.warnings.push(Warning::device(index, u.detail.clone()));
                                }
                            }
                            list.devices.push(dev);
                        }
                        list.backends.push(BackendStatus::new(
                            Backend::Nvml,
                            BackendState::Active { devices: count },
                        ));
                        list.backends.push(BackendStatus::new(
                            Backend::NvidiaSmi,
                            BackendState::NotTried,
                        ));
                    }
                    Err(reason) => list.backends.push(BackendStatus::new(
                        Backend::Nvml,
                        BackendState::failed(
                            reason.cause(),
                            format!("cannot count devices: {reason}"),
                        ),
                    )),
                }
                None
            }
            Nvidia::Smi { nvml_reason, smi } => {
                let state = nvml_state(nvml_reason);
                let nvml_reason = nvml_reason.to_string();
                list.backends.push(BackendStatus::new(Backend::Nvml, state));
                list.backends.push(BackendStatus::new(
                    Backend::NvidiaSmi,
                    smi_devices(smi, &mut list.devices),
                ));
                Some(nvml_reason)
            }
        }
    }

    /// Every device, and how the DRM devices were numbered; a figure no device can have is
    /// unknown ([`plausible`]), whichever backend read it.
    pub(crate) fn collect(&self) -> (DeviceList, DrmDevices) {
        let (mut list, map) = self.collect_read();
        for d in &mut list.devices {
            if let Some(w) = plausible::check(d) {
                list.warnings.push(w);
            }
        }
        (list, map)
    }

    /// [`Probe::collect`] as the backends read it.
    fn collect_read(&self) -> (DeviceList, DrmDevices) {
        let mut list = DeviceList::default();
        let nvml_reason = self.nvidia_devices(&mut list);
        // Platform seam: Windows adapters NVML does not cover (DXGI, with PDH's usage).
        #[cfg(all(windows, feature = "dxgi"))]
        crate::backends::wddm::windows::append_devices(&mut list);
        // Platform seam: the Metal device (macOS).
        #[cfg(all(target_os = "macos", feature = "metal"))]
        crate::backends::metal::append_devices(&mut list);
        if !self.options.use_drm {
            list.backends.push(BackendStatus::new(
                Backend::Drm,
                BackendState::absent(BackendCause::Disabled, "disabled"),
            ));
            return (list, DrmDevices::default());
        }
        let first = list
            .devices
            .iter()
            .map(|d| d.index.saturating_add(1))
            .max()
            .unwrap_or(0);
        let (found, map) = self
            .drm
            .devices(first, &list.devices, nvml_reason.as_deref());
        for (f, index) in &map.merged {
            if let Some(d) = list.devices.iter_mut().find(|d| d.index == *index) {
                d.runtime_status.clone_from(&f.runtime_status);
            }
        }
        let state = if found.is_empty() {
            let (cause, reason) = self
                .drm_absent
                .get_or_init(|| drm::absent_reason(&self.options.roots.sys));
            BackendState::absent(*cause, reason.clone())
        } else {
            BackendState::Active {
                devices: u32::try_from(found.len()).unwrap_or(u32::MAX),
            }
        };
        list.backends.push(BackendStatus::new(Backend::Drm, state));
        list.devices.extend(found);
        if self.options.health {
            drm::health(&mut list.devices, &map);
        }
        (list, map)
    }

    /// The `nvidia-smi` fallback when this probe may use it (the option and the feature).
    pub(crate) fn smi_fallback(&self) -> Option<&crate::backends::smi::Smi> {
        (self.options.use_nvidia_smi && cfg!(feature = "nvidia-smi")).then_some(&self.smi)
    }

    /// Every device, and the process rows of the DRM devices alone (without names): what the
    /// upstream-compatible layer ([`crate::gpu`]) reads for a DRM device.
    pub(crate) fn drm_usage(&self) -> (DeviceList, Vec<GpuProcess>) {
        let (devices, drm) = self.collect();
        let mut warnings = Vec::new();
        let found = self.drm.processes(&drm, &mut warnings);
        (devices, found.rows)
    }

    /// Every GPU the backends can see, with a status line per backend: NVIDIA devices (NVML
    /// order) first, then DRM devices in PCI bus order.
    ///
    /// A device whose memory pool is not (only) its own figures ([`Device::pool`]: unified
    /// memory, an AMD APU's carve-out plus GTT) has it completed with the host's RAM and, where
    /// its use is a sum of processes or clients, with this query's process lists.
    pub fn devices(&self) -> DeviceList {
        let (mut list, drm) = self.collect();
        let sums = list
            .devices
            .iter()
            .any(|d| d.pool.as_ref().is_some_and(|p| p.used_source.is_sum()));
        if sums {
            let usage = self.usage_of(list.clone(), drm, false);
            list.devices = usage.devices;
        } else {
            self.complete_pools(&mut list.devices, &[], &[]);
        }
        list
    }

    /// Completes the devices' pools ([`pool::complete`]) from `rows`, reading the host's RAM
    /// only when a pool needs it.
    fn complete_pools(&self, devices: &mut [Device], rows: &[GpuProcess], failed: &[u32]) {
        let pools: Vec<&crate::types::MemoryPool> =
            devices.iter().filter_map(|d| d.pool.as_ref()).collect();
        if pools.is_empty() {
            return;
        }
        let host = pools
            .iter()
            .any(|p| p.needs_host())
            .then(|| self.host_memory().map_err(|e| e.to_string()));
        let host = match &host {
            Some(Ok(h)) => Ok(h),
            Some(Err(e)) => Err(e.as_str()),
            None => Err("not read"),
        };
        pool::complete(devices, host, pool::Rows { rows, failed });
    }

    /// One device by index.
    ///
    /// # Errors
    /// [`Error::DeviceIndexOutOfRange`] when there is no such device, [`Error::NoGpu`] when no
    /// backend can see any GPU, [`Error::DeviceUnreadable`] when the device exists but refused
    /// every query.
    pub fn device(&self, index: u32) -> Result<Device, Error> {
        #[cfg(feature = "nvml")]
        if let Nvidia::Nvml(nvml) = self.nvidia() {
            // The common case, without enumerating every device.
            if nvml.device_count().is_ok_and(|count| index < count) {
                let mut dev = nvml.device_with(index, self.options.reads());
                // Its unknowns say what was refused (a list's warning has no place here).
                let _ = plausible::check(&mut dev);
                // A pool is completed with the host's RAM and the process lists: the whole query.
                if dev.pool.is_none() {
                    return unreadable_is_error(dev);
                }
            }
        }
        self.devices().device(index).cloned()
    }

    /// Every GPU process on every device, one row per (pid, device), with names and owners from
    /// the proc root. DRM engine utilization covers the interval since the previous call on
    /// this probe (none on the first call).
    pub fn gpu_processes(&self) -> ProcessList {
        let mut out = self.gpu_usage();
        self.identify(&mut out.processes);
        out
    }

    /// [`Probe::gpu_processes`] without names and owners (no `comm`/`status` reads per row):
    /// the cheaper call for samplers that already know their processes.
    pub fn gpu_usage(&self) -> ProcessList {
        let (devices, drm) = self.collect();
        self.usage_of(devices, drm, true)
    }

    /// The process rows of `devices` (as [`Probe::collect`] numbered them), the devices' pools
    /// completed with them; NVIDIA per-process utilization only with `utilization`.
    fn usage_of(&self, devices: DeviceList, drm: DrmDevices, utilization: bool) -> ProcessList {
        // Only NVML has per-process utilization.
        #[cfg(not(feature = "nvml"))]
        let _ = utilization;
        let mut out = ProcessList {
            warnings: devices.warnings.clone(),
            backends: devices.backends.clone(),
            ..ProcessList::default()
        };
        let nvidia: Vec<&Device> = devices
            .devices
            .iter()
            .filter(|d| matches!(d.source, Source::Nvml | Source::NvidiaSmi))
            .collect();
        match self.nvidia() {
            #[cfg(feature = "nvml")]
            Nvidia::Nvml(nvml) => {
                for dev in &nvidia {
                    if dev.error.is_some() {
                        out.failed_devices.push(dev.index);
                        continue;
                    }
                    let mut got = nvml.processes(dev, &mut out.warnings, utilization);
                    if got.failed {
                        out.failed_devices.push(dev.index);
                    }
                    if crate::backends::nvml::mps::has_clients(&got.rows) {
                        // MPS clients listed: name the server among the compute rows.
                        crate::backends::nvml::mps::classify(&mut got.rows, |r| {
                            crate::system::process::process_name(&self.options.roots, r.pid)
                                .ok()
                                .flatten()
                                .is_some_and(|n| {
                                    crate::backends::nvml::mps::is_server_name(n.as_bytes())
                                })
                        });
                    }
                    out.processes.extend(got.rows);
                }
            }
            Nvidia::Smi { smi: Some(smi), .. } if !nvidia.is_empty() => {
                let owned: Vec<Device> = nvidia.iter().map(|d| (*d).clone()).collect();
                match smi.processes(&owned, &mut out.warnings) {
                    Ok(rows) => out.processes.extend(rows),
                    Err(reason) => {
                        out.warnings.push(Warning::general(format!(
                            "process list unavailable: {reason}"
                        )));
                        out.failed_devices.extend(nvidia.iter().map(|d| d.index));
                    }
                }
            }
            Nvidia::Smi { .. } => {}
        }
        let found = self.drm.processes(&drm, &mut out.warnings);
        out.hidden_processes = found.hidden;
        out.processes.extend(found.rows);
        // Platform seam: PDH's per-process rows on the DXGI devices (Windows).
        #[cfg(all(windows, feature = "pdh"))]
        out.processes
            .extend(crate::backends::wddm::windows::processes(&devices));
        out.devices = devices.devices;
        out.processes.sort_by_key(|p| (p.device_index, p.pid));
        out.failed_devices.sort_unstable();
        out.failed_devices.dedup();
        self.complete_pools(&mut out.devices, &out.processes, &out.failed_devices);
        out
    }

    /// The driver's own per-process peak of device memory for `pids` on every NVML device
    /// (NVIDIA accounting mode; see [`crate::accounting`]). A device with accounting off has
    /// `enabled: Some(false)` and no records. Devices that keep no such record (nvidia-smi,
    /// DRM) are not listed, and without NVML the list is empty. One driver call per device
    /// and pid: meant for the end of a run, not for every sample.
    pub fn vram_accounting(&self, pids: &[u32]) -> Vec<crate::types::accounting::DeviceAccounting> {
        match self.nvidia() {
            #[cfg(feature = "nvml")]
            Nvidia::Nvml(nvml) => match nvml.device_count() {
                Ok(count) => (0..count).map(|i| nvml.accounting(i, pids)).collect(),
                Err(_) => Vec::new(),
            },
            Nvidia::Smi { .. } => {
                let _ = pids;
                Vec::new()
            }
        }
    }

    /// The processes on one device.
    ///
    /// # Errors
    /// As [`Probe::device`]; also [`Error::DeviceUnreadable`] when the device's process list
    /// could not be read.
    pub fn gpu_processes_on(&self, index: u32) -> Result<Vec<GpuProcess>, Error> {
        let list = self.gpu_processes();
        list.device(index)?;
        Ok(list
            .processes
            .into_iter()
            .filter(|p| p.device_index == index)
            .collect())
    }

    /// Fills name, uid, user, workload and innermost pid from the proc root; an NVIDIA row
    /// whose host pid the proc root cannot show is left unnamed, with the reason (and, with
    /// the names known, marks an MPS server even where no client is listed, as before Volta).
    fn identify(&self, rows: &mut [GpuProcess]) {
        let roots = &self.options.roots;
        let view = self.pid_view();
        let mut cache = IdentityCache::new();
        for row in rows.iter_mut() {
            if !crate::system::pidns::visible(view, row) {
                row.unknown.push(Unknown::new(
                    Field::Name,
                    UnknownReason::OtherPidNamespace,
                    crate::system::pidns::not_visible_detail(row.pid, &roots.proc),
                ));
                continue;
            }
            let id = cache.identify(roots, row.pid);
            if id.name.is_some() {
                row.name = id.name;
            }
            row.uid = id.uid;
            row.user = id.user;
            row.ns_pid = id.ns_pid;
            row.workload = crate::system::workload::of_process_named(roots, row.pid, &self.names);
        }
        #[cfg(feature = "nvml")]
        crate::backends::nvml::mps::classify(rows, |r| {
            r.name
                .as_ref()
                .is_some_and(|n| crate::backends::nvml::mps::is_server_name(n.as_bytes()))
        });
    }

    /// The machine's RAM, from `<proc>/meminfo` kept open between calls (one `pread` each on
    /// procfs).
    ///
    /// # Errors
    /// When `<proc>/meminfo` cannot be read or parsed.
    pub fn host_memory(&self) -> Result<HostMemory, Error> {
        self.meminfo.read()
    }

    /// One process's host memory.
    ///
    /// # Errors
    /// [`Error::NotFound`] for a pid that does not exist, [`Error::PermissionDenied`] for one
    /// hidden from this user.
    pub fn process_memory(&self, pid: u32, detail: MemoryDetail) -> Result<ProcessMemory, Error> {
        host::process_memory(&self.options.roots, pid, detail)
    }

    /// This process's resident set size, from `<proc>/self/statm` (the cheapest source).
    ///
    /// # Errors
    /// When `statm` cannot be read (a proc root without `self`).
    pub fn own_rss(&self) -> Result<u64, Error> {
        self.self_statm.rss_bytes(self.options.system)
    }
}

#[cfg(feature = "nvml")]
fn unreadable_is_error(dev: Device) -> Result<Device, Error> {
    match &dev.error {
        Some(reason) => Err(Error::DeviceUnreadable {
            index: dev.index,
            reason: reason.clone(),
        }),
        None => Ok(dev),
    }
}

/// NVML's state when it could not be used: absent (no library, driver not loaded, no GPU),
/// or failed (present but broken: GPUs may exist that it cannot show).
fn nvml_state(reason: &BackendError) -> BackendState {
    if reason.means_absent() {
        BackendState::absent(reason.cause(), reason.to_string())
    } else {
        BackendState::failed(reason.cause(), reason.to_string())
    }
}

fn smi_devices(smi: Option<&crate::backends::smi::Smi>, devices: &mut Vec<Device>) -> BackendState {
    let Some(smi) = smi else {
        return BackendState::absent(BackendCause::Disabled, "disabled");
    };
    match smi.devices() {
        Ok(found) => {
            let n = u32::try_from(found.len()).unwrap_or(u32::MAX);
            devices.extend(found);
            BackendState::Active { devices: n }
        }
        Err(reason) => BackendState::absent(reason.cause(), reason.to_string()),
    }
}
