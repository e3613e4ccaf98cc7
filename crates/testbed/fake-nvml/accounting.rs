//! Accounting-mode symbols of the fake NVML: the device's mode and per-process records
//! (`nvmlAccountingStats_t`) for processes that have been listed; persistence and compute
//! modes. On a
//! GPU in MIG mode the driver forces accounting off (`nvml.h`, `nvmlDeviceSetAccountingMode`):
//! the mode reads 0 and the records NOT_SUPPORTED.

use super::*;

/// Wall-clock time in µs since the epoch (0 if the clock is before the epoch).
pub(crate) fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetAccountingMode(
    device: nvmlDevice_t,
    mode: *mut c_uint,
) -> nvmlReturn_t {
    with_device("nvmlDeviceGetAccountingMode", device, |st, i| {
        let Some(d) = st.cfg.devices.get(i) else {
            return INVALID_ARGUMENT;
        };
        let on = d.accounting && !st.mig_on(i);
        // SAFETY: NVML contract: `mode` is null or points to a writable nvmlEnableState_t.
        unsafe { out(mode, c_uint::from(on)) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetPersistenceMode(
    device: nvmlDevice_t,
    mode: *mut c_uint,
) -> nvmlReturn_t {
    with_device("nvmlDeviceGetPersistenceMode", device, |st, i| {
        match st.cfg.devices.get(i).map(|d| d.persistence) {
            // SAFETY: NVML contract: `mode` is null or points to a writable nvmlEnableState_t.
            Some(Some(on)) => unsafe { out(mode, c_uint::from(on)) },
            Some(None) => NOT_SUPPORTED,
            None => INVALID_ARGUMENT,
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetComputeMode(
    device: nvmlDevice_t,
    mode: *mut c_uint,
) -> nvmlReturn_t {
    with_device("nvmlDeviceGetComputeMode", device, |st, i| {
        match st.cfg.devices.get(i).map(|d| d.compute_mode) {
            // SAFETY: NVML contract: `mode` is null or points to a writable nvmlComputeMode_t
            // (a C enum: 4 bytes).
            Some(Some(m)) => unsafe { out(mode, m) },
            Some(None) => NOT_SUPPORTED,
            None => INVALID_ARGUMENT,
        }
    })
}

/// `nvmlAccountingStats_t`: u32 gpuUtilization, u32 memoryUtilization, u64 maxMemoryUsage,
/// u64 time, u64 startTime, u32 isRunning, u32 reserved[5] — 56 bytes.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetAccountingStats(
    device: nvmlDevice_t,
    pid: c_uint,
    stats: *mut c_void,
) -> nvmlReturn_t {
    with_device("nvmlDeviceGetAccountingStats", device, |st, i| {
        let Some(d) = st.cfg.devices.get(i) else {
            return INVALID_ARGUMENT;
        };
        if !d.accounting || st.mig_on(i) {
            // What a driver answers while accounting is off.
            return NOT_SUPPORTED;
        }
        if stats.is_null() {
            return INVALID_ARGUMENT;
        }
        // A process has a record once it has been listed, or from the start when the scenario
        // gives its start time (a record left by an earlier process with that pid). NVML keeps
        // one record per pid: the most recent.
        let record = st
            .cfg
            .processes
            .iter()
            .zip(st.listed.iter())
            .filter(|(p, _)| p.device as usize == i)
            .filter_map(|(p, listed)| match (*listed, p.accounting_start_us) {
                (Some((listed_pid, first_us)), _) => (listed_pid == pid).then_some((p, first_us)),
                (None, Some(start)) => (!p.child_of_caller && !p.caller && p.pid == pid).then_some((p, start)),
                (None, None) => None,
            })
            .max_by_key(|(p, first_us)| p.accounting_start_us.unwrap_or(*first_us));
        let Some((p, first_us)) = record else {
            return NOT_FOUND;
        };
        let max = p.accounting_max.map_or_else(
            || {
                p.used
                    .iter()
                    .map(|u| u.raw())
                    .filter(|u| *u != u64::MAX)
                    .max()
                    .unwrap_or(0)
            },
            |u| u.raw(),
        );
        let (gpu_util, mem_util) = p.accounting_util.unwrap_or((0, 0));
        // SAFETY: NVML contract: `stats` points to a writable nvmlAccountingStats_t (56 bytes);
        // every write is inside it.
        unsafe {
            put(stats, 0, gpu_util);
            put(stats, 4, mem_util);
            put(stats, 8, max);
            put(stats, 16, 0u64);
            put(stats, 24, p.accounting_start_us.unwrap_or(first_us));
            put(stats, 32, 1u32);
            for k in 0..5 {
                put(stats, 36 + 4 * k, 0u32);
            }
        }
        SUCCESS
    })
}
