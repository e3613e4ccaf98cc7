//! Memory-health and event symbols of the fake NVML: ECC mode and totals, remapped rows,
//! retired pages, and event sets (XIDs). Every reading is NOT_SUPPORTED unless the scenario
//! names it. An event set is a handle `0x0300_0000 | n`; a wait that finds nothing to deliver
//! releases the state lock before it sleeps (at most 20 ms), so other calls — and a caller
//! stopping — never wait behind it. Pre-MIG drivers (R440-like) lack `nvmlDeviceGetRemappedRows`
//! and `nvmlEventSetWait_v2` (assumed to have arrived with R450).

use super::*;

/// Tag of an event-set handle (bits 24..32).
const SET_TAG: usize = 0x0300_0000;
/// `NVML_ERROR_TIMEOUT`.
const TIMEOUT: nvmlReturn_t = 10;

/// One event set's state.
#[derive(Default)]
pub(crate) struct EventSet {
    /// (device index, registered event mask).
    registered: Vec<(usize, u64)>,
    /// Waits made on this set.
    waits: u64,
    /// Per scenario event: delivered to this set.
    delivered: Vec<bool>,
    freed: bool,
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetEccMode(
    device: nvmlDevice_t,
    current: *mut c_uint,
    pending: *mut c_uint,
) -> nvmlReturn_t {
    with_device("nvmlDeviceGetEccMode", device, |st, i| {
        let Some(h) = st.cfg.devices.get(i).map(|d| &d.health) else {
            return INVALID_ARGUMENT;
        };
        let Some(on) = h.ecc_mode else {
            return NOT_SUPPORTED;
        };
        if current.is_null() || pending.is_null() {
            return INVALID_ARGUMENT;
        }
        let next = h.ecc_pending.unwrap_or(on);
        // SAFETY: NVML contract: both point to writable nvmlEnableState_t (checked non-null).
        unsafe {
            current.write_unaligned(c_uint::from(on));
            pending.write_unaligned(c_uint::from(next));
        }
        SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetTotalEccErrors(
    device: nvmlDevice_t,
    error_type: c_uint,
    counter_type: c_uint,
    count: *mut c_ulonglong,
) -> nvmlReturn_t {
    with_device("nvmlDeviceGetTotalEccErrors", device, |st, i| {
        if error_type > 1 || counter_type > 1 {
            return INVALID_ARGUMENT;
        }
        let k = (counter_type * 2 + error_type) as usize;
        let Some(h) = st.cfg.devices.get(i).map(|d| &d.health) else {
            return INVALID_ARGUMENT;
        };
        if h.ecc_mode != Some(true) {
            return NOT_SUPPORTED;
        }
        let Some(seq) = h.ecc_counts.get(k) else {
            return INVALID_ARGUMENT;
        };
        if seq.is_empty() {
            return NOT_SUPPORTED;
        }
        let calls = st
            .ecc_calls
            .get_mut(i)
            .and_then(|c| c.get_mut(k))
            .map_or(0, |c| {
                let n = *c;
                *c = c.saturating_add(1);
                n
            });
        let v = seq
            .get(calls as usize)
            .or(seq.last())
            .copied()
            .unwrap_or(0);
        // SAFETY: NVML contract: `count` is null or points to a writable u64.
        unsafe { out(count, v) }
    })
}

#[cfg(not(no_mig))]
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetRemappedRows(
    device: nvmlDevice_t,
    corr: *mut c_uint,
    unc: *mut c_uint,
    pending: *mut c_uint,
    failure: *mut c_uint,
) -> nvmlReturn_t {
    with_device("nvmlDeviceGetRemappedRows", device, |st, i| {
        let Some(r) = st.cfg.devices.get(i).and_then(|d| d.health.remapped_rows) else {
            return NOT_SUPPORTED;
        };
        if st.mig_on(i) {
            return NOT_SUPPORTED;
        }
        if corr.is_null() || unc.is_null() || pending.is_null() || failure.is_null() {
            return INVALID_ARGUMENT;
        }
        // SAFETY: NVML contract: four writable uints (checked non-null).
        unsafe {
            corr.write_unaligned(r[0]);
            unc.write_unaligned(r[1]);
            pending.write_unaligned(r[2]);
            failure.write_unaligned(r[3]);
        }
        SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetRetiredPages(
    device: nvmlDevice_t,
    cause: c_uint,
    page_count: *mut c_uint,
    addresses: *mut c_ulonglong,
) -> nvmlReturn_t {
    with_device("nvmlDeviceGetRetiredPages", device, |st, i| {
        let Some(n) = st
            .cfg
            .devices
            .get(i)
            .and_then(|d| d.health.retired.get(cause as usize).copied().flatten())
        else {
            return if cause > 1 {
                INVALID_ARGUMENT
            } else {
                NOT_SUPPORTED
            };
        };
        if page_count.is_null() || addresses.is_null() {
            return INVALID_ARGUMENT;
        }
        // SAFETY: NVML contract: `page_count` is a writable uint (checked non-null).
        let room = unsafe { page_count.read_unaligned() };
        // SAFETY: as above.
        unsafe { page_count.write_unaligned(n) };
        if room < n {
            return INSUFFICIENT_SIZE;
        }
        for k in 0..n as usize {
            // SAFETY: the caller said `addresses` has room for `room >= n` entries.
            unsafe { addresses.add(k).write_unaligned(0x1000 * (k as u64 + 1)) };
        }
        SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetRetiredPagesPendingStatus(
    device: nvmlDevice_t,
    pending: *mut c_uint,
) -> nvmlReturn_t {
    with_device("nvmlDeviceGetRetiredPagesPendingStatus", device, |st, i| {
        match st.cfg.devices.get(i).and_then(|d| d.health.retired_pending) {
            // SAFETY: NVML contract: `pending` is null or a writable nvmlEnableState_t.
            Some(p) => unsafe { out(pending, c_uint::from(p)) },
            None => NOT_SUPPORTED,
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetSupportedEventTypes(
    device: nvmlDevice_t,
    types: *mut c_ulonglong,
) -> nvmlReturn_t {
    with_device("nvmlDeviceGetSupportedEventTypes", device, |st, i| {
        match st.cfg.devices.get(i).and_then(|d| d.health.events_supported) {
            // SAFETY: NVML contract: `types` is null or a writable u64.
            Some(mask) => unsafe { out(types, mask) },
            None => NOT_SUPPORTED,
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlEventSetCreate(set: *mut *mut c_void) -> nvmlReturn_t {
    with_state("nvmlEventSetCreate", |st| {
        if set.is_null() {
            return INVALID_ARGUMENT;
        }
        let n = st.event_sets.len();
        st.event_sets.push(EventSet {
            delivered: vec![false; st.cfg.events.len()],
            ..EventSet::default()
        });
        // SAFETY: `set` is non-null and, per NVML, a writable handle slot.
        unsafe { out(set, (SET_TAG | n) as *mut c_void) }
    })
}

/// The set a handle names (`None`: not a live set).
fn set_index(st: &State, set: *mut c_void) -> Option<usize> {
    let raw = set as usize;
    if raw >> 24 != SET_TAG >> 24 {
        return None;
    }
    let n = raw & 0x00ff_ffff;
    st.event_sets.get(n).filter(|s| !s.freed).map(|_| n)
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceRegisterEvents(
    device: nvmlDevice_t,
    types: c_ulonglong,
    set: *mut c_void,
) -> nvmlReturn_t {
    with_device("nvmlDeviceRegisterEvents", device, |st, i| {
        let Some(n) = set_index(st, set) else {
            return INVALID_ARGUMENT;
        };
        let Some(mask) = st.cfg.devices.get(i).and_then(|d| d.health.events_supported) else {
            return NOT_SUPPORTED;
        };
        if let Some(s) = st.event_sets.get_mut(n) {
            s.registered.push((i, types & mask));
        }
        SUCCESS
    })
}

/// `nvmlEventData_t`: device handle, u64 type, u64 data, u32 GI, u32 CI — 32 bytes.
fn wait(sym: &str, set: *mut c_void, data: *mut c_void, timeout_ms: c_uint) -> nvmlReturn_t {
    hang_while_flagged();
    {
        let mut g = lock();
        let Some(st) = g.as_mut() else {
            return UNINITIALIZED;
        };
        if let Some(code) = find_error(&st.cfg.errors, sym) {
            return code;
        }
        let Some(n) = set_index(st, set) else {
            return INVALID_ARGUMENT;
        };
        if data.is_null() {
            return INVALID_ARGUMENT;
        }
        let events = st.cfg.events.clone();
        let Some(s) = st.event_sets.get_mut(n) else {
            return INVALID_ARGUMENT;
        };
        let waits = s.waits;
        s.waits = s.waits.saturating_add(1);
        let due = events.iter().enumerate().find(|(k, e)| {
            e.after_waits <= waits
                && !s.delivered.get(*k).copied().unwrap_or(true)
                && s.registered
                    .iter()
                    .any(|(d, m)| *d == e.device as usize && m & e.event_type != 0)
        });
        if let Some((k, e)) = due {
            if let Some(flag) = s.delivered.get_mut(k) {
                *flag = true;
            }
            let handle = (e.device as usize).wrapping_add(1);
            // SAFETY: NVML contract: `data` points to a writable 32-byte nvmlEventData_t
            // (checked non-null); every write stays inside it.
            unsafe {
                put(data, 0, handle);
                put(data, 8, e.event_type);
                put(data, 16, e.xid);
                put(data, 24, e.gpu_instance_id.unwrap_or(u32::MAX));
                put(data, 28, e.compute_instance_id.unwrap_or(u32::MAX));
            }
            return SUCCESS;
        }
    }
    // Nothing due: sleep without the lock.
    std::thread::sleep(std::time::Duration::from_millis(u64::from(timeout_ms.min(20))));
    TIMEOUT
}

#[cfg(not(no_mig))]
#[no_mangle]
pub unsafe extern "C" fn nvmlEventSetWait_v2(
    set: *mut c_void,
    data: *mut c_void,
    timeout_ms: c_uint,
) -> nvmlReturn_t {
    wait("nvmlEventSetWait_v2", set, data, timeout_ms)
}

#[no_mangle]
pub unsafe extern "C" fn nvmlEventSetWait(
    set: *mut c_void,
    data: *mut c_void,
    timeout_ms: c_uint,
) -> nvmlReturn_t {
    wait("nvmlEventSetWait", set, data, timeout_ms)
}

#[no_mangle]
pub unsafe extern "C" fn nvmlEventSetFree(set: *mut c_void) -> nvmlReturn_t {
    with_state("nvmlEventSetFree", |st| match set_index(st, set) {
        Some(n) => {
            if let Some(s) = st.event_sets.get_mut(n) {
                s.freed = true;
            }
            SUCCESS
        }
        None => INVALID_ARGUMENT,
    })
}
