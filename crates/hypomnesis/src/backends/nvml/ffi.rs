//! The raw NVML calls nvml-wrapper does not make the way we need (`unsafe`, as are its siblings
//! `ffi_mig` and `facts`; ARCHITECTURE.md "Platforms" lists every file with `unsafe`).
//!
//! - Process lists, with the stride detected instead of assumed (nvml-wrapper reads `_v3` with a
//!   fixed 24-byte struct and does not retry when the list grows), and with the `_v2` and
//!   unversioned calls for older drivers.
//! - Device names decoded lossily (nvml-wrapper fails on a non-UTF-8 name).
//! - `nvmlDeviceGetMemoryInfo` (v1) for drivers older than R510.
//! - `nvmlDeviceGetPciInfo_v2`/unversioned for drivers without `_v3`.
//! - Device handles kept for the session ([`Handles`]): nvml-wrapper asks NVML again each time.
//!
//! The MIG and utilization calls nvml-wrapper does not wrap (or wraps unsafely) are in
//! [`super::ffi_mig`].
//!
//! Every call goes through a symbol nvml-wrapper already resolved (`Nvml::lib()`), with a handle
//! that `Device::handle()` returned for the same, still-initialised `Nvml`.

#![allow(unsafe_code)]

use std::collections::BTreeMap;
use std::ffi::{CStr, c_char, c_uint};
use std::sync::Mutex;

use nvml_wrapper::error::{NvmlError, nvml_sym};
use nvml_wrapper::{Device, Nvml};
use nvml_wrapper_sys::bindings::{
    NvmlLib, nvmlDevice_t, nvmlMemory_t, nvmlPciInfo_t, nvmlProcessInfo_t, nvmlReturn_t,
};

use super::convert::{Layout, RawProcess, SENTINEL, decode, decode_v3};
use crate::backends::error::BackendError;
use crate::types::DeviceMemory;

/// The device handles one NVML session gave, by index. NVML keeps a handle valid until it is
/// shut down (a device that falls off the bus keeps its handle, whose calls answer
/// `GPU_IS_LOST`), so a device is looked up once per session rather than at every sample, as
/// nvtop and nvitop do; a refused handle is not kept, and is asked for again next time.
#[derive(Debug, Default)]
pub(super) struct Handles(Mutex<BTreeMap<u32, usize>>);

impl Handles {
    /// The handle of device `index` of `nvml`, which must be the session these handles came
    /// from (the backend owns both).
    pub(super) fn get<'n>(&self, nvml: &'n Nvml, index: u32) -> Result<Device<'n>, NvmlError> {
        let kept = self.0.lock().ok().and_then(|m| m.get(&index).copied());
        if let Some(raw) = kept {
            let handle: nvmlDevice_t = std::ptr::with_exposed_provenance_mut(raw);
            // SAFETY: `handle` is the one `nvml` returned for `index` below; NVML keeps it valid
            // until `nvmlShutdown`, which only `nvml`'s drop calls, and the device borrows `nvml`.
            return Ok(unsafe { Device::new(handle, nvml) });
        }
        let device = nvml.device_by_index(index)?;
        // SAFETY: the handle of a live device of `nvml`, kept only as a number beside it.
        let raw = unsafe { device.handle() }.expose_provenance();
        if let Ok(mut m) = self.0.lock() {
            m.insert(index, raw);
        }
        Ok(device)
    }
}

/// `NVML_SUCCESS`.
pub(super) const SUCCESS: nvmlReturn_t = 0;
/// `NVML_ERROR_INSUFFICIENT_SIZE`.
pub(super) const INSUFFICIENT_SIZE: nvmlReturn_t = 7;
/// Attempts at a process list before giving up on a list that keeps growing.
const MAX_ATTEMPTS: usize = 8;
/// Extra slots allocated beyond the count NVML reported, for processes starting in between.
const SLACK: u32 = 4;
/// A count above this is not a real process list (the kernel's PID_MAX_LIMIT is 4 M, but no GPU
/// hosts more than a few thousand contexts).
const MAX_PROCESSES: u32 = 65_536;

/// Which process list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum ProcessListKind {
    Compute,
    Graphics,
    /// MPS clients (`nvmlDeviceGetMPSComputeRunningProcesses*`): the same protocol and records
    /// as the compute list, so the same stride detection (nvml-wrapper's own MPS call sizes its
    /// buffer for 24-byte records and would overrun on a 32-byte driver).
    Mps,
}

/// A process-list call: the symbol's name (for messages), its function, and the layout it
/// writes (`None` = detect).
type ListFn =
    unsafe extern "C" fn(nvmlDevice_t, *mut c_uint, *mut nvmlProcessInfo_t) -> nvmlReturn_t;

pub(super) fn check(code: nvmlReturn_t) -> Result<(), NvmlError> {
    if code == SUCCESS {
        Ok(())
    } else {
        Err(NvmlError::from(code))
    }
}

/// The process list of one kind on one device, from the newest call the driver has.
///
/// With a `hint` (how many records the list held last time), the list is asked for at once
/// into room for that many plus [`SLACK`]: one call instead of a sizing call and a fill, and a
/// list that grew past the room is asked again as the sizing protocol does. Without one, the
/// first call sizes the list.
///
/// Returns the records, the layout they were decoded with, and how many calls were retried.
///
/// # Errors
/// The driver's error, or [`BackendError::UnrecognisedLayout`] when the records it wrote fit no
/// known layout.
pub(crate) fn running_processes(
    lib: &NvmlLib,
    device: &Device<'_>,
    kind: ProcessListKind,
    hint: Option<u32>,
) -> Result<(Vec<RawProcess>, Layout, usize), BackendError> {
    let (v3, v2, v1) = match kind {
        ProcessListKind::Compute => (
            lib.nvmlDeviceGetComputeRunningProcesses_v3.as_ref(),
            lib.nvmlDeviceGetComputeRunningProcesses_v2.as_ref(),
            lib.nvmlDeviceGetComputeRunningProcesses.as_ref(),
        ),
        ProcessListKind::Graphics => (
            lib.nvmlDeviceGetGraphicsRunningProcesses_v3.as_ref(),
            lib.nvmlDeviceGetGraphicsRunningProcesses_v2.as_ref(),
            lib.nvmlDeviceGetGraphicsRunningProcesses.as_ref(),
        ),
        ProcessListKind::Mps => (
            lib.nvmlDeviceGetMPSComputeRunningProcesses_v3.as_ref(),
            lib.nvmlDeviceGetMPSComputeRunningProcesses_v2.as_ref(),
            lib.nvmlDeviceGetMPSComputeRunningProcesses.as_ref(),
        ),
    };
    // The v1 symbol takes `nvmlProcessInfo_v1_t*`; every variant takes a pointer the callee
    // writes records into, so one pointer type serves all three here.
    let (f, layout): (ListFn, Option<Layout>) = if let Ok(f) = v3 {
        (*f, None)
    } else if let Ok(f) = v2 {
        (*f, Some(Layout::V2))
    } else {
        let f = nvml_sym(v1)?;
        // SAFETY: the unversioned symbol has the same signature except for the record pointer
        // type (`nvmlProcessInfo_v1_t*`); both are thin pointers passed in the same register,
        // and we size the buffer for the v1 layout.
        let f: ListFn = unsafe { std::mem::transmute(*f) };
        (f, Some(Layout::V1))
    };
    // SAFETY: `device` was produced by the `Nvml` that owns `lib`, which is still alive because
    // `device` borrows it.
    let handle = unsafe { device.handle() };
    list_with(f, handle, layout, hint)
}

/// The sizing/fill protocol with retry on growth, for one list function.
fn list_with(
    f: ListFn,
    handle: nvmlDevice_t,
    layout: Option<Layout>,
    hint: Option<u32>,
) -> Result<(Vec<RawProcess>, Layout, usize), BackendError> {
    let mut count: c_uint = match hint {
        Some(n) => n,
        None => {
            let mut count: c_uint = 0;
            // SAFETY: a sizing call: count 0 and a null buffer is the documented way to ask for
            // the number of records; NVML writes only `count`.
            let code = unsafe { f(handle, &mut count, std::ptr::null_mut()) };
            match code {
                SUCCESS => return Ok((Vec::new(), layout.unwrap_or(Layout::V2), 0)),
                INSUFFICIENT_SIZE => count,
                other => return Err(NvmlError::from(other).into()),
            }
        }
    };
    for attempt in 0..MAX_ATTEMPTS {
        if count > MAX_PROCESSES {
            return Err(NvmlError::InsufficientSize(Some(count as usize)).into());
        }
        let capacity = count + SLACK;
        // Room for the widest layout, 8-byte aligned (the records contain u64s), pre-filled
        // with the sentinel so the written span can be measured.
        let stride = layout.map_or(Layout::V3Wide.stride(), Layout::stride);
        let words = (capacity as usize * stride).div_ceil(8);
        let mut storage: Vec<u64> = vec![u64::from_ne_bytes([SENTINEL; 8]); words];
        let mut filled: c_uint = capacity;
        // SAFETY: `storage` holds `capacity` records of the widest layout the callee may use for
        // this symbol (32 bytes for `_v3`, the exact size for `_v2`/v1), is 8-byte aligned, and
        // `filled` tells NVML that capacity in records.
        let code = unsafe { f(handle, &mut filled, storage.as_mut_ptr().cast()) };
        match code {
            SUCCESS => {
                let n = (filled as usize).min(capacity as usize);
                if n == 0 {
                    // Nothing written: no layout to measure (as a sizing call answering SUCCESS).
                    return Ok((Vec::new(), layout.unwrap_or(Layout::V2), attempt));
                }
                let bytes: Vec<u8> = storage.iter().flat_map(|w| w.to_ne_bytes()).collect();
                let decoded = match layout {
                    Some(l) => decode(&bytes, n, l).map(|r| (r, l)),
                    None => decode_v3(&bytes, n),
                };
                return decoded
                    .map(|(records, l)| (records, l, attempt))
                    .ok_or(BackendError::UnrecognisedLayout);
            }
            INSUFFICIENT_SIZE => count = filled.max(capacity),
            other => return Err(NvmlError::from(other).into()),
        }
    }
    Err(NvmlError::InsufficientSize(Some(count as usize)).into())
}

/// The device name, decoded lossily (a non-UTF-8 byte becomes U+FFFD rather than an error).
pub(crate) fn device_name(lib: &NvmlLib, device: &Device<'_>) -> Result<String, NvmlError> {
    let f = nvml_sym(lib.nvmlDeviceGetName.as_ref())?;
    let mut buf = [0 as c_char; 96];
    // SAFETY: the handle belongs to the live `Nvml` that owns `lib` (see `running_processes`).
    let handle = unsafe { device.handle() };
    // SAFETY: `buf` has the 96 bytes we pass as its length; NVML writes a NUL-terminated
    // string of at most that length or returns INSUFFICIENT_SIZE.
    check(unsafe { f(handle, buf.as_mut_ptr(), buf.len() as c_uint) })?;
    // Guarantee termination even if the driver filled the buffer.
    if let Some(last) = buf.last_mut() {
        *last = 0;
    }
    // SAFETY: `buf` is NUL-terminated (forced above) and lives for this statement.
    let name = unsafe { CStr::from_ptr(buf.as_ptr()) };
    Ok(name.to_string_lossy().into_owned())
}

/// Device memory through the v1 call (`used` includes the driver's reservation).
pub(crate) fn memory_info_v1(
    lib: &NvmlLib,
    device: &Device<'_>,
) -> Result<(u64, u64, u64), NvmlError> {
    let f = nvml_sym(lib.nvmlDeviceGetMemoryInfo.as_ref())?;
    let mut mem = nvmlMemory_t {
        total: 0,
        free: 0,
        used: 0,
    };
    // SAFETY: the handle belongs to the live `Nvml` that owns `lib`.
    let handle = unsafe { device.handle() };
    // SAFETY: `mem` is a properly sized and aligned `nvmlMemory_t` the callee fills.
    check(unsafe { f(handle, &mut mem) })?;
    Ok((mem.total, mem.free, mem.used))
}

/// The PCI bus id through `nvmlDeviceGetPciInfo_v2` or the unversioned call, for drivers without
/// `_v3`. Returns (domain, bus, device); NVML always reports function 0.
pub(crate) fn pci_info_legacy(
    lib: &NvmlLib,
    device: &Device<'_>,
) -> Result<(u32, u32, u32), NvmlError> {
    let f = match lib.nvmlDeviceGetPciInfo_v2.as_ref() {
        Ok(f) => *f,
        Err(_) => *nvml_sym(lib.nvmlDeviceGetPciInfo.as_ref())?,
    };
    // SAFETY: `nvmlPciInfo_t` is a plain C struct of integers and char arrays, for which all
    // zero bytes is a valid value.
    let mut info: nvmlPciInfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: the handle belongs to the live `Nvml` that owns `lib`.
    let handle = unsafe { device.handle() };
    // SAFETY: `info` is large enough for every layout of the struct (the older layouts are
    // prefixes of the current one at the fields we read: domain, bus, device at 16, 20, 24).
    check(unsafe { f(handle, &mut info) })?;
    Ok((info.domain, info.bus, info.device))
}

/// Device memory with the R510+ semantics, else the v1 call (reserved unknown), and whether
/// the v2 call answered NOT_SUPPORTED (rather than being absent). NOT_SUPPORTED from v2 alone is
/// tried on v1 too: a unified-memory part (GB10) answers NOT_SUPPORTED to both, and only both
/// together say so.
pub(super) fn memory(
    lib: &nvml_wrapper_sys::bindings::NvmlLib,
    handle: &nvml_wrapper::Device<'_>,
) -> Result<(DeviceMemory, bool), NvmlError> {
    /// `NVML_ERROR_ARGUMENT_VERSION_MISMATCH`: a driver that knows the symbol but not v2.
    const ARGUMENT_VERSION_MISMATCH: u32 = 25;
    match handle.memory_info() {
        Ok(m) => Ok((
            DeviceMemory::new(Some(m.total), Some(m.used), Some(m.free), Some(m.reserved)),
            false,
        )),
        Err(
            e @ (NvmlError::FailedToLoadSymbol(_)
            | NvmlError::FunctionNotFound
            | NvmlError::NotSupported
            | NvmlError::UnexpectedVariant(ARGUMENT_VERSION_MISMATCH)),
        ) => {
            let (total, free, used) = memory_info_v1(lib, handle)?;
            Ok((
                DeviceMemory::new(Some(total), Some(used), Some(free), None),
                matches!(e, NvmlError::NotSupported),
            ))
        }
        Err(e) => Err(e),
    }
}
