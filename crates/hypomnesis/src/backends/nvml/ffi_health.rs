//! The raw memory-health and event calls nvml-wrapper 0.13 does not wrap, or wraps in a way we
//! cannot use (`unsafe`, as [`super::ffi`]):
//!
//! - `nvmlDeviceGetRemappedRows` (not wrapped);
//! - `nvmlDeviceGetRetiredPages` as a count only (the wrapper fills addresses with `_v2` and
//!   gives up when a page retires between its two calls);
//! - event sets: `nvmlEventSetCreate`, `nvmlDeviceGetSupportedEventTypes`,
//!   `nvmlDeviceRegisterEvents`, `nvmlEventSetWait_v2` (the legacy `nvmlEventSetWait` on older
//!   drivers), `nvmlEventSetFree`. The wrapper's `register_events` frees the set on every error,
//!   NOT_SUPPORTED included (NVML says the set stays usable), drops the MIG instance ids, and
//!   `expect`s the free symbol; a set here is a plain handle the caller frees.
//!
//! Every handle passed comes from the `Nvml` that owns `lib`, alive for the call.

#![allow(unsafe_code)]

use std::ffi::{c_uint, c_ulonglong};

use nvml_wrapper::Device;
use nvml_wrapper::error::{NvmlError, nvml_sym};
use nvml_wrapper_sys::bindings::{
    NvmlLib, nvmlDevice_t, nvmlEventData_t, nvmlEventSet_t, nvmlReturn_t,
};

use super::ffi::{INSUFFICIENT_SIZE, SUCCESS, check};

/// `NVML_ERROR_TIMEOUT`: no event within the wait.
const TIMEOUT: nvmlReturn_t = 10;

/// `nvmlDeviceGetRemappedRows`: correctable, uncorrectable, pending, failure.
pub(crate) fn remapped_rows(lib: &NvmlLib, dev: &Device<'_>) -> Result<[u32; 4], NvmlError> {
    let f = nvml_sym(lib.nvmlDeviceGetRemappedRows.as_ref())?;
    let mut v: [c_uint; 4] = [0; 4];
    // SAFETY: the handle belongs to the live `Nvml` that owns `lib`.
    let handle = unsafe { dev.handle() };
    let [a, b, c, d] = &mut v;
    // SAFETY: four distinct, writable uints, as the signature asks.
    check(unsafe { f(handle, a, b, c, d) })?;
    Ok(v)
}

/// The number of pages retired for `cause` (0: multiple single-bit errors, 1: a double-bit
/// error): one `nvmlDeviceGetRetiredPages` call with room for none, whose SUCCESS or
/// INSUFFICIENT_SIZE both set the count.
pub(crate) fn retired_page_count(
    lib: &NvmlLib,
    dev: &Device<'_>,
    cause: c_uint,
) -> Result<u32, NvmlError> {
    let f = nvml_sym(lib.nvmlDeviceGetRetiredPages.as_ref())?;
    let mut count: c_uint = 0;
    // NVML refuses a null address buffer (INVALID_ARGUMENT): pass one it may not write into,
    // since the count says there is room for none.
    let mut dummy: c_ulonglong = 0;
    // SAFETY: the handle belongs to the live `Nvml` that owns `lib`.
    let handle = unsafe { dev.handle() };
    // SAFETY: `count` is writable; with `*count == 0` NVML writes no address, and `dummy` is a
    // valid buffer for one anyway.
    let code = unsafe { f(handle, cause, &mut count, &mut dummy) };
    match code {
        SUCCESS | INSUFFICIENT_SIZE => Ok(count),
        other => Err(NvmlError::from(other)),
    }
}

/// A device handle that may cross to the thread waiting for events: NVML's handles are opaque
/// values valid while the library stays initialised, and NVML is thread-safe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RawDevice(nvmlDevice_t);

// SAFETY: an opaque handle, never dereferenced here; NVML documents its calls as thread-safe.
unsafe impl Send for RawDevice {}

impl RawDevice {
    /// The handle of `dev`.
    pub(crate) fn of(dev: &Device<'_>) -> RawDevice {
        // SAFETY: the handle belongs to the live `Nvml` that `dev` borrows; it is only passed
        // back to NVML while that `Nvml` lives (the event set's owner borrows it too).
        RawDevice(unsafe { dev.handle() })
    }
}

/// An NVML event set. Not `Sync`: operations on one set are not thread-safe.
#[derive(Debug)]
pub(crate) struct RawSet(nvmlEventSet_t);

// SAFETY: the set is an opaque handle; one thread at a time uses it (it is not `Sync`).
unsafe impl Send for RawSet {}

/// `nvmlEventSetCreate`, only when `nvmlEventSetFree` exists too (a set that cannot be freed
/// is never made).
pub(crate) fn event_set_create(lib: &NvmlLib) -> Result<RawSet, NvmlError> {
    let create = nvml_sym(lib.nvmlEventSetCreate.as_ref())?;
    nvml_sym(lib.nvmlEventSetFree.as_ref())?;
    let mut set: nvmlEventSet_t = std::ptr::null_mut();
    // SAFETY: `set` is a writable handle slot.
    check(unsafe { create(&mut set) })?;
    Ok(RawSet(set))
}

/// `nvmlEventSetFree`.
pub(crate) fn event_set_free(lib: &NvmlLib, set: RawSet) {
    if let Ok(free) = lib.nvmlEventSetFree.as_ref() {
        // SAFETY: `set` came from `nvmlEventSetCreate` of this library and is freed once (it is
        // moved in).
        let _ = unsafe { free(set.0) };
    }
}

/// `nvmlDeviceGetSupportedEventTypes`.
pub(crate) fn supported_event_types(lib: &NvmlLib, dev: RawDevice) -> Result<u64, NvmlError> {
    let f = nvml_sym(lib.nvmlDeviceGetSupportedEventTypes.as_ref())?;
    let mut mask: c_ulonglong = 0;
    // SAFETY: a live handle (see `RawDevice`) and a writable u64.
    check(unsafe { f(dev.0, &mut mask) })?;
    Ok(mask)
}

/// `nvmlDeviceRegisterEvents`.
pub(crate) fn register_events(
    lib: &NvmlLib,
    dev: RawDevice,
    types: u64,
    set: &RawSet,
) -> Result<(), NvmlError> {
    let f = nvml_sym(lib.nvmlDeviceRegisterEvents.as_ref())?;
    // SAFETY: a live handle and a live set of this library.
    check(unsafe { f(dev.0, types, set.0) })
}

/// One event as NVML wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RawEvent {
    pub device: RawDevice,
    pub event_type: u64,
    pub data: u64,
    pub gpu_instance_id: u32,
    pub compute_instance_id: u32,
}

/// Waits up to `timeout_ms` for one event: `Ok(None)` when none arrived (NVML's TIMEOUT).
pub(crate) fn event_wait(
    lib: &NvmlLib,
    set: &RawSet,
    timeout_ms: u32,
) -> Result<Option<RawEvent>, NvmlError> {
    let f = match lib.nvmlEventSetWait_v2.as_ref() {
        Ok(f) => *f,
        Err(_) => *nvml_sym(lib.nvmlEventSetWait.as_ref())?,
    };
    // SAFETY: a plain C struct of a handle and integers; all zero bytes is valid.
    let mut data: nvmlEventData_t = unsafe { std::mem::zeroed() };
    // SAFETY: a live set of this library and a writable event record of the callee's type
    // (`_v2` and the legacy call take the same struct).
    let code = unsafe { f(set.0, &mut data, timeout_ms) };
    match code {
        SUCCESS => Ok(Some(RawEvent {
            device: RawDevice(data.device),
            event_type: data.eventType,
            data: data.eventData,
            gpu_instance_id: data.gpuInstanceId,
            compute_instance_id: data.computeInstanceId,
        })),
        TIMEOUT => Ok(None),
        other => Err(NvmlError::from(other)),
    }
}
