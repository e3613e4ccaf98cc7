//! An NVIDIA GPU's memory health ([`read`]: ECC mode and counts, remapped rows or retired
//! pages) and its XID events ([`Events`]: one NVML event set over every device, waited on by
//! a thread the caller owns).
//!
//! Order of the health reads: ECC mode first; with ECC off or unsupported the counts are
//! unknown with that reason, without asking. Remapped rows (Ampere and later) next — under MIG
//! NVML answers only with MIG off, so they are unknown then; when the driver does not support
//! them, retired pages (before Ampere). Both unsupported is said once. A consumer GPU may answer
//! zeros for remapped rows without remapping anything: the zeros are kept, and
//! [`MemoryHealth::counters_meaningful`] says whether they mean anything.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nvml_wrapper::Nvml;
use nvml_wrapper::enum_wrappers::device::{EccCounter, MemoryError};
use nvml_wrapper::error::NvmlError;

use super::convert::{describe, query_error, reason_of};
use super::ffi_health::{self, RawDevice, RawSet};
use crate::types::{
    EccMode, Field, MemoryHealth, QueryError, RemappedRows, RetiredPages, Unknown, UnknownReason,
    XidEvent, XidTally, XidUncounted,
};

/// An NVML call for events that failed.
fn refused(call: &'static str, e: &NvmlError) -> XidUncounted {
    XidUncounted::Refused {
        call,
        error: query_error(e),
    }
}

/// `nvmlEventTypeXidCriticalError`.
const XID_CRITICAL_ERROR: u64 = 0x8;
/// A wait's longest sleep: a stop is noticed within this.
pub(crate) const WAIT: Duration = Duration::from_millis(250);

/// Whether an error means "this driver or device has no such reading".
fn unsupported(e: &NvmlError) -> bool {
    matches!(
        e,
        NvmlError::NotSupported | NvmlError::FunctionNotFound | NvmlError::FailedToLoadSymbol(_)
    )
}

/// The memory health of `handle` (MIG on: `mig`).
pub(crate) fn read(
    lib: &nvml_wrapper_sys::bindings::NvmlLib,
    handle: &nvml_wrapper::Device<'_>,
    mig: bool,
) -> MemoryHealth {
    let mut h = MemoryHealth::default();
    let unknown = |field: Field, e: &NvmlError| Unknown::new(field, reason_of(e), describe(e));
    match handle.is_ecc_enabled() {
        Ok(m) => h.ecc = Some(EccMode::new(m.currently_enabled, m.pending_enabled)),
        Err(e) => h.unknown.push(unknown(Field::HealthEcc, &e)),
    }
    let fields = [
        (
            Field::HealthEccErrorsCorrectedVolatile,
            MemoryError::Corrected,
            EccCounter::Volatile,
        ),
        (
            Field::HealthEccErrorsUncorrectedVolatile,
            MemoryError::Uncorrected,
            EccCounter::Volatile,
        ),
        (
            Field::HealthEccErrorsCorrectedAggregate,
            MemoryError::Corrected,
            EccCounter::Aggregate,
        ),
        (
            Field::HealthEccErrorsUncorrectedAggregate,
            MemoryError::Uncorrected,
            EccCounter::Aggregate,
        ),
    ];
    let ecc_on = h.ecc.is_some_and(|m| m.current);
    for (field, error, counter) in fields {
        if !ecc_on {
            let why = if h.ecc.is_some() {
                "ECC is off"
            } else {
                "ECC is not supported here"
            };
            h.unknown
                .push(Unknown::new(field, UnknownReason::Unsupported, why));
            continue;
        }
        let slot = match (error, counter) {
            (MemoryError::Corrected, EccCounter::Volatile) => &mut h.ecc_errors.corrected_volatile,
            (MemoryError::Uncorrected, EccCounter::Volatile) => {
                &mut h.ecc_errors.uncorrected_volatile
            }
            (MemoryError::Corrected, _) => &mut h.ecc_errors.corrected_aggregate,
            _ => &mut h.ecc_errors.uncorrected_aggregate,
        };
        match handle.total_ecc_errors(error, counter) {
            Ok(n) => *slot = Some(n),
            Err(e) => h.unknown.push(unknown(field, &e)),
        }
    }
    if mig {
        h.unknown.push(Unknown::new(
            Field::HealthRemappedRows,
            UnknownReason::Unsupported,
            "MIG enabled: NVML answers only with MIG off",
        ));
        return h;
    }
    match ffi_health::remapped_rows(lib, handle) {
        Ok([c, u, p, f]) => {
            h.remapped_rows = Some(RemappedRows::new(c, u, p != 0, f != 0));
            return h;
        }
        Err(e) if !unsupported(&e) => {
            h.unknown.push(unknown(Field::HealthRemappedRows, &e));
            return h;
        }
        Err(_) => {}
    }
    let mut pages = RetiredPages::default();
    let mut errors = Vec::new();
    for (cause, slot, field) in [
        (0, &mut pages.single_bit, Field::HealthRetiredPagesSingleBit),
        (1, &mut pages.double_bit, Field::HealthRetiredPagesDoubleBit),
    ] {
        match ffi_health::retired_page_count(lib, handle, cause) {
            Ok(n) => *slot = Some(n),
            Err(e) => errors.push((field, e)),
        }
    }
    match handle.are_pages_pending_retired() {
        Ok(p) => pages.pending = Some(p),
        Err(e) => errors.push((Field::HealthRetiredPagesPending, e)),
    }
    if errors.len() == 3 && errors.iter().all(|(_, e)| unsupported(e)) {
        h.unknown.push(Unknown::new(
            Field::HealthRemappedRows,
            UnknownReason::Unsupported,
            "neither row remapping (Ampere and later) nor page retirement is supported here",
        ));
        return h;
    }
    h.unknown
        .extend(errors.iter().map(|(field, e)| unknown(*field, e)));
    h.retired_pages = Some(pages);
    h
}

/// XID events of every NVML device: one event set, registered per device for the critical
/// XID event where the device supports it. Waited on by the caller's thread ([`Events::wait`],
/// [`Events::count_until`]); freed on drop.
pub(crate) struct Events<'n> {
    nvml: &'n Nvml,
    set: Option<RawSet>,
    devices: Vec<(u32, RawDevice)>,
    /// Devices whose events cannot be counted, and why.
    pub(crate) unsupported: BTreeMap<u32, XidUncounted>,
}

impl std::fmt::Debug for Events<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Events")
            .field("devices", &self.devices.len())
            .field("unsupported", &self.unsupported)
            .finish_non_exhaustive()
    }
}

impl<'n> Events<'n> {
    /// Creates the set and registers every device that supports XID events. `Err`: no set
    /// could be made (the reason).
    pub(crate) fn new(nvml: &'n Nvml, count: u32) -> Result<Events<'n>, XidUncounted> {
        if cfg!(not(target_os = "linux")) {
            return Err(XidUncounted::NotLinux);
        }
        let lib = nvml.lib();
        let set =
            ffi_health::event_set_create(lib).map_err(|e| refused("nvmlEventSetCreate", &e))?;
        let mut ev = Events {
            nvml,
            set: Some(set),
            devices: Vec::new(),
            unsupported: BTreeMap::new(),
        };
        for index in 0..count {
            let handle = match nvml.device_by_index(index) {
                Ok(h) => RawDevice::of(&h),
                Err(e) => {
                    ev.unsupported
                        .insert(index, refused("nvmlDeviceGetHandleByIndex", &e));
                    continue;
                }
            };
            let supported = ffi_health::supported_event_types(lib, handle);
            match supported {
                Ok(mask) if mask & XID_CRITICAL_ERROR == 0 => {
                    ev.unsupported.insert(index, XidUncounted::NoXidEvents);
                    continue;
                }
                Err(e) => {
                    ev.unsupported
                        .insert(index, refused("nvmlDeviceGetSupportedEventTypes", &e));
                    continue;
                }
                Ok(_) => {}
            }
            let Some(set) = ev.set.as_ref() else {
                break;
            };
            match ffi_health::register_events(lib, handle, XID_CRITICAL_ERROR, set) {
                Ok(()) => ev.devices.push((index, handle)),
                Err(NvmlError::Unknown) => {
                    // "The event set is in undefined state and should be freed": no set, no
                    // events for anyone.
                    if let Some(set) = ev.set.take() {
                        ffi_health::event_set_free(lib, set);
                    }
                    return Err(refused("nvmlDeviceRegisterEvents", &NvmlError::Unknown));
                }
                Err(e) => {
                    ev.unsupported
                        .insert(index, refused("nvmlDeviceRegisterEvents", &e));
                }
            }
        }
        Ok(ev)
    }

    /// Waits up to `timeout` (at most [`WAIT`]) for one event. `Ok(None)`: none arrived.
    ///
    /// # Errors
    /// NVML's error (GPU lost, …).
    pub(crate) fn wait(&mut self, timeout: Duration) -> Result<Option<XidEvent>, QueryError> {
        self.wait_up_to(timeout.min(WAIT))
    }

    /// Waits up to `timeout`, uncapped (a counter whose stop may be noticed late).
    fn wait_up_to(&mut self, timeout: Duration) -> Result<Option<XidEvent>, QueryError> {
        let Some(set) = self.set.as_ref() else {
            return Ok(None);
        };
        if self.devices.is_empty() {
            std::thread::sleep(timeout);
            return Ok(None);
        }
        let ms = u32::try_from(timeout.as_millis()).unwrap_or(u32::MAX);
        match ffi_health::event_wait(self.nvml.lib(), set, ms) {
            Ok(Some(raw)) if raw.event_type & XID_CRITICAL_ERROR != 0 => {
                let Some((index, _)) = self.devices.iter().find(|(_, d)| *d == raw.device) else {
                    return Ok(None);
                };
                let id = |v: u32| (v != u32::MAX).then_some(v);
                let mut e = XidEvent::new(*index, raw.data, now_ms());
                e.gpu_instance_id = id(raw.gpu_instance_id);
                e.compute_instance_id = id(raw.compute_instance_id);
                Ok(Some(e))
            }
            Ok(_) => Ok(None),
            Err(e) => Err(query_error(&e)),
        }
    }

    /// Counts events into `tally` until `stop` is set (noticed within `wait`, or four `wait`s
    /// after an error: a lost GPU makes every wait fail at once, so the loop backs off rather
    /// than spin).
    pub(crate) fn count_until(
        &mut self,
        stop: &AtomicBool,
        tally: &Mutex<XidTally>,
        wait: Duration,
    ) {
        {
            let mut t = lock(tally);
            for (i, why) in &self.unsupported {
                t.unknown.insert(*i, why.clone());
            }
        }
        while !stop.load(Ordering::Relaxed) {
            match self.wait_up_to(wait) {
                Ok(Some(e)) => lock(tally).add(e),
                Ok(None) => {}
                Err(why) => {
                    lock(tally).last_error = Some(why.to_string());
                    for _ in 0..4 {
                        if stop.load(Ordering::Relaxed) {
                            return;
                        }
                        std::thread::sleep(wait);
                    }
                }
            }
        }
    }
}

impl Drop for Events<'_> {
    fn drop(&mut self) {
        if let Some(set) = self.set.take() {
            ffi_health::event_set_free(self.nvml.lib(), set);
        }
    }
}

fn lock(t: &Mutex<XidTally>) -> std::sync::MutexGuard<'_, XidTally> {
    match t.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
