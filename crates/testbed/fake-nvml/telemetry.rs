//! Telemetry symbols of the fake NVML: utilization, temperature, power, energy, clocks.

use super::*;

// ---------------------------------------------------------------------------------------
// Telemetry
// ---------------------------------------------------------------------------------------

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetUtilizationRates(
    device: nvmlDevice_t,
    utilization: *mut c_void,
) -> nvmlReturn_t {
    with_device("nvmlDeviceGetUtilizationRates", device, |st, i| {
        let Some(d) = st.cfg.devices.get(i) else {
            return INVALID_ARGUMENT;
        };
        if d.utilization_gpu.is_none() && d.utilization_memory.is_none() {
            return NOT_SUPPORTED;
        }
        if utilization.is_null() {
            return INVALID_ARGUMENT;
        }
        // SAFETY: NVML contract: `utilization` points to a writable
        // nvmlUtilization_t {u32 gpu; u32 memory}.
        unsafe {
            put(utilization, 0, d.utilization_gpu.unwrap_or(0));
            put(utilization, 4, d.utilization_memory.unwrap_or(0));
        }
        SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetTemperature(
    device: nvmlDevice_t,
    sensor_type: c_uint,
    temp: *mut c_uint,
) -> nvmlReturn_t {
    with_device("nvmlDeviceGetTemperature", device, |st, i| {
        let Some(d) = st.cfg.devices.get(i) else {
            return INVALID_ARGUMENT;
        };
        if sensor_type != 0 {
            return INVALID_ARGUMENT;
        }
        match d.temperature_c {
            // SAFETY: NVML contract: `temp` is null or points to a writable uint.
            Some(t) => unsafe { out(temp, t) },
            None => NOT_SUPPORTED,
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetPowerUsage(
    device: nvmlDevice_t,
    power: *mut c_uint,
) -> nvmlReturn_t {
    with_device("nvmlDeviceGetPowerUsage", device, |st, i| {
        match st.cfg.devices.get(i).and_then(|d| d.power_mw) {
            // SAFETY: NVML contract: `power` is null or points to a writable uint.
            Some(p) => unsafe { out(power, p) },
            None => NOT_SUPPORTED,
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetTotalEnergyConsumption(
    device: nvmlDevice_t,
    energy: *mut c_ulonglong,
) -> nvmlReturn_t {
    with_device("nvmlDeviceGetTotalEnergyConsumption", device, |st, i| {
        match st.cfg.devices.get(i).and_then(|d| d.energy_mj) {
            // SAFETY: NVML contract: `energy` is null or points to a writable u64.
            Some(e) => unsafe { out(energy, e) },
            None => NOT_SUPPORTED,
        }
    })
}

fn clock(
    sym: &str,
    device: nvmlDevice_t,
    clock_type: c_uint,
    mhz: *mut c_uint,
    max: bool,
) -> nvmlReturn_t {
    with_device(sym, device, |st, i| {
        let Some(d) = st.cfg.devices.get(i) else {
            return INVALID_ARGUMENT;
        };
        let table = if max { &d.max_clocks_mhz } else { &d.clocks_mhz };
        let Some(slot) = table.get(clock_type as usize) else {
            return INVALID_ARGUMENT;
        };
        match slot {
            // SAFETY: NVML contract: `mhz` is null or points to a writable uint.
            Some(v) => unsafe { out(mhz, *v) },
            None => NOT_SUPPORTED,
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetClockInfo(
    device: nvmlDevice_t,
    clock_type: c_uint,
    clock_mhz: *mut c_uint,
) -> nvmlReturn_t {
    clock("nvmlDeviceGetClockInfo", device, clock_type, clock_mhz, false)
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMaxClockInfo(
    device: nvmlDevice_t,
    clock_type: c_uint,
    clock_mhz: *mut c_uint,
) -> nvmlReturn_t {
    clock("nvmlDeviceGetMaxClockInfo", device, clock_type, clock_mhz, true)
}
