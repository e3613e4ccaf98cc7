//! The NVIDIA backend through NVML (`libnvidia-ml.so.1`), loaded at run time with nvml-wrapper.
//!
//! Owns [`NvmlBackend`]: one initialised NVML session that lives as long as the
//! [`Probe`](crate::Probe) holding it (upstream hypomnesis loaded and initialised NVML on every
//! call; a long-lived session makes a device query hundreds of times cheaper).
//!
//! A library that is missing, or a driver that is not loaded, makes the backend *absent* — a
//! reason, not an error. A symbol missing from an old driver degrades the one field it feeds:
//! memory falls back from `nvmlDeviceGetMemoryInfo_v2` to the v1 call, process lists from `_v3`
//! to `_v2` to the unversioned call, PCI info from `_v3` to `_v2`.
//!
//! MIG devices ([`mig`]), MPS clients and the server ([`mps`]) and per-process utilization
//! ([`util`]) are read here too; a GPU in MIG mode lists its processes per MIG device.
//!
//! Submodules: [`convert`] (pure decoding and guards), [`ffi`], [`ffi_mig`] and [`ffi_health`]
//! (the raw calls, the crate's only `unsafe`, with [`facts`]: what `hmn doctor` asks, including
//! the version of a library that failed to initialise), [`mig`], [`mps`], [`util`],
//! [`telemetry`] (with what never changes for a device, read once per session), and [`health`]
//! (memory health and XID events).

pub(crate) mod convert;
pub(crate) mod facts;
mod ffi;
mod ffi_health;
mod ffi_mig;
pub(crate) mod health;
mod locate;
mod mig;
mod mig_processes;
pub(crate) mod mps;
mod telemetry;
mod util;

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::Path;
use std::sync::Mutex;

use nvml_wrapper::Nvml;
use nvml_wrapper::error::NvmlError;

use crate::backends::error::BackendError;
use crate::types::Source;
use crate::types::accounting::{AccountedProcess, DeviceAccounting};
use crate::types::pci::PciBusId;
use crate::types::{
    Device, Field, GpuProcess, MemoryPool, PoolSource, ProcessKind, Unknown, UnknownReason, Vendor,
    Warning,
};

pub(crate) use convert::{call_failure, describe, reason_of};
use ffi::{ProcessListKind, memory};
use telemetry::{kept, telemetry};

pub use locate::DEFAULT_LIBRARY;

/// What a device query reads beyond memory, identity, compute mode and MIG state (the
/// probe's options; each costs driver calls: docs/validation.md, runs 2 and 7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reads {
    /// Memory health ([`health::read`]).
    pub health: bool,
    /// Utilization, temperature, power and clocks.
    pub telemetry: bool,
    /// The cumulative energy counter (`nvmlDeviceGetTotalEnergyConsumption`: 2.9 ms a call on
    /// an H200), with the telemetry.
    pub energy: bool,
}

impl Reads {
    /// Memory and identity only (upstream's device info).
    pub(crate) const MEMORY: Reads = Reads {
        health: false,
        telemetry: false,
        energy: false,
    };
}

/// An initialised NVML session.
pub(crate) struct NvmlBackend {
    nvml: Nvml,
    driver_version: Result<String, NvmlError>,
    /// Per device index: the newest utilization sample taken (µs since the epoch), where the
    /// next `nvmlDeviceGetProcessUtilization` query starts.
    util_since: Mutex<BTreeMap<u32, u64>>,
    /// Per device index: its GPU-instance profile table (MIG), read once.
    mig_profiles: mig::ProfileCache,
    /// Per device index: its name, UUID, PCI address and maximum clocks, read once.
    fixed: telemetry::FixedCache,
    /// Per device index and list: how many records it held at the last query (the room the
    /// next query asks for at once, [`ffi::running_processes`]).
    list_sizes: Mutex<BTreeMap<(u32, ProcessListKind), u32>>,
    /// The device count, once NVML has given it: NVML counts the devices it attached at
    /// initialisation, and the count stays until it is shut down (a device that falls off the
    /// bus stays counted and answers `GPU_IS_LOST`; a device added is not seen without a new
    /// initialisation) — as the fixed facts above, it is asked once per session.
    count: std::sync::OnceLock<u32>,
    /// The devices' handles, each asked for once ([`ffi::Handles`]).
    handles: ffi::Handles,
}

impl std::fmt::Debug for NvmlBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NvmlBackend")
            .field("driver_version", &self.driver_version)
            .finish_non_exhaustive()
    }
}

/// The outcome of one device's process-list query.
pub(crate) struct DeviceProcesses {
    pub rows: Vec<GpuProcess>,
    pub failed: bool,
}

impl NvmlBackend {
    /// Loads and initialises NVML from `library` (or the default soname). `Err` is the reason
    /// the backend is absent.
    pub(crate) fn load(library: Option<&Path>) -> Result<NvmlBackend, BackendError> {
        // Platform seam: Windows tries the driver's full paths first (`locate`).
        #[cfg(windows)]
        if library.is_none() {
            let env = |k| std::env::var_os(k);
            for p in locate::windows_candidates(
                env("SystemRoot").as_deref(),
                env("ProgramFiles").as_deref(),
            ) {
                if p.is_file() {
                    match Self::load(Some(&p)) {
                        Err(BackendError::LibraryUnloadable { .. }) => continue,
                        done => return done,
                    }
                }
            }
        }
        let path: &OsStr = library.map_or(OsStr::new(DEFAULT_LIBRARY), Path::as_os_str);
        let shown = || path.to_string_lossy().into_owned();
        let nvml = Nvml::builder().lib_path(path).init().map_err(|e| match e {
            NvmlError::LibloadingError(err) if library.is_some() => {
                BackendError::LibraryUnloadable {
                    library: shown(),
                    message: err.to_string(),
                    missing: library.is_some_and(|p| !p.exists()),
                }
            }
            NvmlError::LibloadingError(_) => BackendError::LibraryNotFound { library: shown() },
            NvmlError::DriverNotLoaded => BackendError::DriverNotLoaded,
            // NVML_ERROR_GPU_NOT_FOUND, which nvml-wrapper does not name.
            NvmlError::UnexpectedVariant(28) => BackendError::GpuNotFound,
            NvmlError::NoPermission => BackendError::NoPermission,
            NvmlError::FailedToLoadSymbol(symbol) => BackendError::NotNvml {
                library: shown(),
                symbol,
            },
            other => BackendError::InitFailed(other),
        })?;
        let driver_version = nvml.sys_driver_version();
        Ok(NvmlBackend {
            nvml,
            driver_version,
            util_since: Mutex::new(BTreeMap::new()),
            mig_profiles: mig::ProfileCache::default(),
            fixed: telemetry::FixedCache::default(),
            list_sizes: Mutex::new(BTreeMap::new()),
            count: std::sync::OnceLock::new(),
            handles: ffi::Handles::default(),
        })
    }

    /// The number of devices NVML counts (including ones it will refuse a handle for).
    pub(crate) fn device_count(&self) -> Result<u32, BackendError> {
        if let Some(n) = self.count.get() {
            return Ok(*n);
        }
        let n = self.nvml.device_count()?;
        Ok(*self.count.get_or_init(|| n))
    }

    /// The handle of device `index` (kept for the session, [`ffi::Handles`]).
    pub(super) fn handle(&self, index: u32) -> Result<nvml_wrapper::Device<'_>, NvmlError> {
        self.handles.get(&self.nvml, index)
    }

    /// Reads one device, with what `reads` asks beyond its memory and identity.
    pub(crate) fn device_with(&self, index: u32, reads: Reads) -> Device {
        let mut dev = self.read_device(index, reads);
        if reads.health && dev.error.is_none() {
            if let Ok(handle) = self.handle(index) {
                dev.health = Some(health::read(self.nvml.lib(), &handle, dev.mig_enabled()));
            }
        }
        dev
    }

    /// The XID event set over every device ([`health::Events`]), or why there is none.
    pub(crate) fn events(&self) -> Result<health::Events<'_>, crate::types::XidUncounted> {
        let count = self.device_count().map_err(|e| e.xid_uncounted())?;
        health::Events::new(&self.nvml, count)
    }

    /// Reads one device. Never fails: what cannot be read is `None` with a reason, and a device
    /// whose handle is refused is returned with `error` set. Telemetry only when
    /// `reads.telemetry`, its cumulative energy counter only when `reads.energy` too.
    fn read_device(&self, index: u32, reads: Reads) -> Device {
        let mut dev = Device::new(index, Vendor::Nvidia, Source::Nvml);
        dev.driver = Some("nvidia".to_string());
        match &self.driver_version {
            Ok(v) => dev.driver_version = Some(v.clone()),
            Err(e) => dev.unknown.push(Unknown::new(
                Field::DriverVersion,
                reason_of(e),
                describe(e),
            )),
        }
        let handle = match self.handle(index) {
            Ok(h) => h,
            Err(e) => {
                dev.error = Some(format!("NVML refused the device handle: {}", describe(&e)));
                let reason = reason_of(&e);
                for field in [Field::Name, Field::Uuid, Field::PciBusId, Field::Memory] {
                    dev.unknown.push(Unknown::new(field, reason, describe(&e)));
                }
                return dev;
            }
        };
        let lib = self.nvml.lib();
        let mut fixed = self.fixed.get(index);
        match kept(&mut fixed.name, || ffi::device_name(lib, &handle)) {
            Ok(n) => dev.name = Some(n),
            Err(e) => dev
                .unknown
                .push(Unknown::new(Field::Name, reason_of(&e), describe(&e))),
        }
        match kept(&mut fixed.uuid, || handle.uuid()) {
            Ok(u) => dev.uuid = Some(u),
            Err(e) => dev
                .unknown
                .push(Unknown::new(Field::Uuid, reason_of(&e), describe(&e))),
        }
        match kept(&mut fixed.pci_bus_id, || pci_bus_id(lib, &handle)) {
            Ok(p) => dev.pci_bus_id = Some(p),
            Err(e) => dev.unknown.push(Unknown::new(
                Field::PciBusId,
                e.unknown_reason(),
                e.to_string(),
            )),
        }
        match memory(lib, &handle) {
            Ok((m, v2_unsupported)) => {
                if m.reserved_bytes.is_none() {
                    dev.unknown.push(Unknown::new(
                        Field::MemoryReservedBytes,
                        UnknownReason::Unsupported,
                        if v2_unsupported {
                            "nvmlDeviceGetMemoryInfo_v2 answered NOT_SUPPORTED: v1 figures, used includes the reservation"
                        } else {
                            "driver older than R510: no nvmlDeviceGetMemoryInfo_v2, used includes the reservation"
                        },
                    ));
                }
                dev.memory = m;
            }
            Err(e) => {
                let unified = matches!(e, NvmlError::NotSupported);
                for field in [
                    Field::MemoryTotalBytes,
                    Field::MemoryUsedBytes,
                    Field::MemoryFreeBytes,
                    Field::MemoryReservedBytes,
                ] {
                    let detail = if unified {
                        UNIFIED_DETAIL.to_string()
                    } else {
                        describe(&e)
                    };
                    dev.unknown.push(Unknown::new(field, reason_of(&e), detail));
                }
                if unified {
                    dev.integrated = Some(true);
                    dev.pool = Some(MemoryPool::host_ram(
                        PoolSource::ProcessSum,
                        "NVML's memory calls (nvmlDeviceGetMemoryInfo_v2 and v1) both answered \
                         NOT_SUPPORTED, which nvml.h documents for an integrated GPU sharing \
                         memory with the system (CUDA 13.1 header; NVIDIA DGX Spark known issues)",
                    ));
                }
            }
        }
        if reads.telemetry {
            dev.telemetry = telemetry(&handle, &mut fixed, &mut dev.unknown, reads.energy);
        } else {
            dev.unknown.push(Unknown::new(
                Field::Telemetry,
                UnknownReason::NotRequested,
                "not read: ProbeOptions::telemetry is off",
            ));
        }
        self.fixed.keep(index, fixed);
        match convert::compute_mode(handle.compute_mode()) {
            Ok(m) => dev.compute_mode = Some(m),
            Err(u) => dev.unknown.push(u),
        }
        match mig::state(lib, &handle, &dev, &self.mig_profiles) {
            Ok(state) => dev.mig = state,
            Err(u) => dev.unknown.push(u),
        }
        if dev.mig_enabled() {
            // The whole-GPU figures need privileges under MIG: say where the rest is.
            for u in &mut dev.unknown {
                if u.field.is_memory() && u.reason == UnknownReason::PermissionDenied {
                    u.detail = "MIG enabled: the whole-GPU figure needs privileges; each MIG \
                        device's memory is under mig.instances"
                        .to_string();
                }
            }
        }
        dev
    }

    /// The compute and graphics processes on `device`, merged to one row per pid; with
    /// `utilization`, each row's utilization since the previous such query (without it, the
    /// driver's samples are left for the next query that asks: the device view sums a unified
    /// device's processes without taking them).
    pub(crate) fn processes(
        &self,
        device: &Device,
        warnings: &mut Vec<Warning>,
        utilization: bool,
    ) -> DeviceProcesses {
        let index = device.index;
        let handle = match self.handle(index) {
            Ok(h) => h,
            Err(e) => {
                warnings.push(Warning::device(
                    index,
                    format!("process list unavailable: {}", describe(&e)),
                ));
                return DeviceProcesses {
                    rows: Vec::new(),
                    failed: true,
                };
            }
        };
        if let Some(st) = device.mig.as_ref().filter(|m| m.enabled()) {
            let enumerated = st.unknown.iter().all(|u| u.field != Field::MigInstances)
                || !st.instances.is_empty();
            if enumerated {
                let mut got = self.mig_processes(&handle, device, st, warnings);
                util::attach(&mut got.rows, &util::Outcome::Unknown(util::mig_unknown()));
                return got;
            }
            // The MIG devices could not be listed: the whole GPU's lists (privileged) instead.
        }
        let lib = self.nvml.lib();
        let mut rows = Vec::new();
        let mut failed = false;
        for (list, kind) in [
            (ProcessListKind::Compute, ProcessKind::Compute),
            (ProcessListKind::Graphics, ProcessKind::Graphics),
            (ProcessListKind::Mps, ProcessKind::Mps),
        ] {
            let sizes = || {
                self.list_sizes
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
            };
            let hint = sizes().get(&(index, list)).copied();
            match ffi::running_processes(lib, &handle, list, hint) {
                Ok((records, _layout, _retries)) => {
                    sizes().insert(
                        (index, list),
                        u32::try_from(records.len()).unwrap_or(u32::MAX),
                    );
                    rows.extend(records.into_iter().map(|r| {
                        convert::to_row(r, index, device.memory.total_bytes, kind, warnings)
                    }))
                }
                Err(BackendError::Nvml(NvmlError::NotSupported))
                    if kind == ProcessKind::Graphics =>
                {
                    // Compute-only devices (and MIG) do not list graphics contexts.
                }
                Err(BackendError::Nvml(
                    e @ (NvmlError::FunctionNotFound | NvmlError::FailedToLoadSymbol(_)),
                )) if kind == ProcessKind::Graphics => {
                    // An NVML without the graphics call (minimal or very old builds) lists
                    // compute contexts only: the device answered, so it has not failed, but
                    // graphics-only processes cannot be seen, and the user is told.
                    warnings.push(Warning::device(
                        index,
                        format!(
                            "graphics processes not listed: this NVML has no graphics process call ({})",
                            describe(&e)
                        ),
                    ));
                }
                Err(BackendError::Nvml(
                    NvmlError::NotSupported
                    | NvmlError::FailedToLoadSymbol(_)
                    | NvmlError::FunctionNotFound,
                )) if kind == ProcessKind::Mps => {
                    // No MPS list before Volta, or in drivers before R470.
                }
                Err(BackendError::UnrecognisedLayout) => {
                    failed = true;
                    warnings.push(Warning::device(
                        index,
                        format!(
                            "{} process list: the driver wrote records of an unrecognised layout; not shown",
                            kind.as_str()
                        ),
                    ));
                }
                Err(e) => {
                    failed = true;
                    warnings.push(Warning::device(
                        index,
                        format!("{} process list unavailable: {e}", kind.as_str()),
                    ));
                }
            }
        }
        let mut rows = convert::merge_rows(rows);
        for row in &mut rows {
            row.device_uuid.clone_from(&device.uuid);
        }
        if !rows.is_empty() && utilization {
            let outcome = if device.mig_enabled() {
                util::Outcome::Unknown(util::mig_unknown())
            } else {
                self.utilization(&handle, index)
            };
            util::attach(&mut rows, &outcome);
        }
        DeviceProcesses { rows, failed }
    }

    /// Device `index`'s per-process utilization since its previous query.
    fn utilization(&self, handle: &nvml_wrapper::Device<'_>, index: u32) -> util::Outcome {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
        let mut since = match self.util_since.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        let previous = since.get(&index).copied();
        let start = util::window_start(previous, now);
        match ffi_mig::process_utilization(self.nvml.lib(), handle, start) {
            Ok(samples) => {
                if let Some(next) = util::next_since(previous, start, &samples) {
                    since.insert(index, next);
                }
                util::Outcome::Samples {
                    since_us: start,
                    samples,
                }
            }
            Err(e) => util::Outcome::Unknown(Unknown::new(
                Field::Utilization,
                reason_of(&e),
                format!("nvmlDeviceGetProcessUtilization: {}", describe(&e)),
            )),
        }
    }
}

impl NvmlBackend {
    /// Upstream hypomnesis 0.2's per-process view of device `index` (the compatible API in
    /// [`crate::gpu`]): the compute list only, one row per record as the driver wrote it (no
    /// merging, no graphics list), each guarded as [`convert::to_row`] guards it against the
    /// device's total. Upstream's NVML step needs the device's memory to be readable, so a
    /// memory failure fails the whole query.
    ///
    /// # Errors
    /// The driver's error for the handle, the memory query or the list.
    pub(crate) fn compute_processes(&self, index: u32) -> Result<Vec<GpuProcess>, BackendError> {
        let handle = self.handle(index)?;
        let lib = self.nvml.lib();
        let total = memory(lib, &handle)?.0.total_bytes;
        let (records, _layout, _retries) =
            ffi::running_processes(lib, &handle, ProcessListKind::Compute, None)?;
        let mut warnings = Vec::new();
        Ok(records
            .into_iter()
            .map(|r| convert::to_row(r, index, total, ProcessKind::Compute, &mut warnings))
            .collect())
    }
}

impl NvmlBackend {
    /// Device `index`'s accounting mode and the records of `pids` (one call per pid; a pid
    /// without a record is skipped). A failing call stops the queries and is kept as the reason.
    pub(crate) fn accounting(&self, index: u32, pids: &[u32]) -> DeviceAccounting {
        let mut out = DeviceAccounting::new(index);
        let unknown =
            |e: &NvmlError| Some(Unknown::new(Field::Accounting, reason_of(e), describe(e)));
        let handle = match self.handle(index) {
            Ok(h) => h,
            Err(e) => {
                out.unknown = unknown(&e);
                return out;
            }
        };
        if handle.mig_mode().is_ok_and(|m| m.current == 1) {
            out.unknown = Some(Unknown::new(
                Field::Accounting,
                UnknownReason::Unsupported,
                "accounting is not supported on MIG-enabled GPUs (the driver keeps it off)",
            ));
            return out;
        }
        match handle.is_accounting_enabled() {
            Ok(on) => out.enabled = Some(on),
            Err(e) => {
                out.unknown = unknown(&e);
                return out;
            }
        }
        if out.enabled != Some(true) {
            return out;
        }
        for &pid in pids {
            match handle.accounting_stats_for(pid) {
                Ok(st) => out.processes.push(AccountedProcess {
                    device_index: index,
                    pid,
                    max_memory_bytes: st.max_memory_usage,
                    start_unix_us: st.start_time,
                    running: st.is_running,
                    gpu_utilization_percent: st.gpu_utilization,
                    memory_utilization_percent: st.memory_utilization,
                }),
                Err(NvmlError::NotFound) => {}
                Err(e) => {
                    out.unknown = unknown(&e);
                    break;
                }
            }
        }
        out
    }
}

/// Why an NVIDIA device whose memory calls both answer NOT_SUPPORTED has no memory figures.
const UNIFIED_DETAIL: &str = "NVML's memory calls (nvmlDeviceGetMemoryInfo_v2 and v1) answered \
    NOT_SUPPORTED: an integrated GPU sharing the host's RAM (nvml.h: \"the integrated GPU (iGPU) \
    does not use a dedicated framebuffer but instead shares memory with the system\"); see pool";

/// PCI bus id from `_v3` (through nvml-wrapper), else from the older calls.
fn pci_bus_id(
    lib: &nvml_wrapper_sys::bindings::NvmlLib,
    handle: &nvml_wrapper::Device<'_>,
) -> Result<PciBusId, BackendError> {
    match handle.pci_info() {
        Ok(info) => info
            .bus_id
            .parse()
            .map_err(|_| BackendError::MalformedBusId(info.bus_id)),
        Err(NvmlError::FailedToLoadSymbol(_) | NvmlError::FunctionNotFound) => {
            let (domain, bus, device) = ffi::pci_info_legacy(lib, handle)?;
            let to_u8 = |what, value: u32| {
                u8::try_from(value).map_err(|_| BackendError::OutOfRange { what, value })
            };
            Ok(PciBusId::new(
                domain,
                to_u8("PCI bus", bus)?,
                to_u8("PCI device", device)?,
                0,
            ))
        }
        Err(e) => Err(e.into()),
    }
}
