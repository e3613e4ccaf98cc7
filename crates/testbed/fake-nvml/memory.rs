//! Memory symbols of the fake NVML: `nvmlDeviceGetMemoryInfo` (v1) and `_v2`, for GPUs and MIG
//! devices. A GPU with `unified_memory = 1` (GB10-class) answers NOT_SUPPORTED to both, its
//! struct zeroed. A MIG device answers its GPU instance's figures (the instance's compute instances
//! share them); a GPU in MIG mode answers the whole card — total, and used as the sum of its
//! instances' — only to a privileged caller, NO_PERMISSION otherwise.

use super::*;

/// Whether `t` is a GPU without a framebuffer of its own (`unified_memory = 1`).
fn unified(st: &State, t: Target) -> bool {
    matches!(t, Target::Physical(i) if st.cfg.devices.get(i).is_some_and(|d| d.extras.unified_memory))
}

/// (total, reserved, used) for the current memory-info call; advances the call counter.
fn memory_numbers(st: &mut State, t: Target) -> Result<(u64, u64, u64), nvmlReturn_t> {
    match t {
        Target::Physical(i) => {
            let d = st.cfg.devices.get(i).ok_or(INVALID_ARGUMENT)?;
            if st.mig_on(i) {
                if !d.extras.privileged {
                    return Err(NO_PERMISSION);
                }
                let used: u64 = st
                    .cfg
                    .gpu_instances
                    .iter()
                    .enumerate()
                    .filter(|(_, g)| g.device as usize == i)
                    .map(|(k, g)| {
                        let at = st.gi_mem_calls.get(k).copied().unwrap_or(0);
                        let at = usize::try_from(at.saturating_sub(1)).unwrap_or(usize::MAX);
                        g.memory_used
                            .get(at)
                            .or_else(|| g.memory_used.last())
                            .copied()
                            .unwrap_or(0)
                    })
                    .sum();
                return Ok((d.memory_total, d.memory_reserved, used));
            }
            let calls = st.mem_calls.get_mut(i).ok_or(INVALID_ARGUMENT)?;
            let at = usize::try_from(*calls).unwrap_or(usize::MAX);
            let used = d
                .memory_used
                .get(at)
                .or_else(|| d.memory_used.last())
                .copied()
                .unwrap_or(0);
            *calls = calls.saturating_add(1);
            Ok((d.memory_total, d.memory_reserved, used))
        }
        Target::Mig { ci, .. } => {
            let k = st.gi_of(ci).ok_or(NOT_FOUND)?;
            let gi = st.cfg.gpu_instances.get(k).ok_or(NOT_FOUND)?;
            let total = gi.memory_total.unwrap_or_else(|| {
                st.profiles(gi.device as usize)
                    .iter()
                    .find(|p| p.id == gi.profile_id)
                    .map_or(0, |p| p.memory_mib << 20)
            });
            let calls = st.gi_mem_calls.get_mut(k).ok_or(NOT_FOUND)?;
            let at = usize::try_from(*calls).unwrap_or(usize::MAX);
            let used = gi
                .memory_used
                .get(at)
                .or_else(|| gi.memory_used.last())
                .copied()
                .unwrap_or(0);
            *calls = calls.saturating_add(1);
            Ok((total, gi.memory_reserved, used))
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMemoryInfo(
    device: nvmlDevice_t,
    memory: *mut c_void,
) -> nvmlReturn_t {
    with_handle("nvmlDeviceGetMemoryInfo", device, |st, t| {
        if memory.is_null() {
            return INVALID_ARGUMENT;
        }
        if unified(st, t) {
            // SAFETY: NVML contract: `memory` points to a writable 24-byte nvmlMemory_t.
            unsafe {
                put(memory, 0, 0u64);
                put(memory, 8, 0u64);
                put(memory, 16, 0u64);
            }
            return NOT_SUPPORTED;
        }
        let (total, reserved, used) = match memory_numbers(st, t) {
            Ok(n) => n,
            Err(code) => return code,
        };
        let free = total.saturating_sub(reserved).saturating_sub(used);
        // SAFETY: NVML contract: `memory` points to a writable 24-byte nvmlMemory_t.
        unsafe {
            put(memory, 0, total);
            put(memory, 8, free);
            put(memory, 16, used.saturating_add(reserved));
        }
        SUCCESS
    })
}

#[cfg(not(legacy_driver))]
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMemoryInfo_v2(
    device: nvmlDevice_t,
    memory: *mut c_void,
) -> nvmlReturn_t {
    with_handle("nvmlDeviceGetMemoryInfo_v2", device, |st, t| {
        if memory.is_null() {
            return INVALID_ARGUMENT;
        }
        // SAFETY: NVML contract: `memory` points to an nvmlMemory_v2_t whose first field is
        // the u32 version the caller filled in.
        let version = unsafe { memory.cast::<u32>().read_unaligned() };
        if version != MEMORY_V2_VERSION {
            return ARGUMENT_VERSION_MISMATCH;
        }
        if unified(st, t) {
            // SAFETY: the version check proves a 40-byte nvmlMemory_v2_t; the figures after
            // the version are zeroed.
            unsafe {
                for offset in [8, 16, 24, 32] {
                    put(memory, offset, 0u64);
                }
            }
            return NOT_SUPPORTED;
        }
        let (total, reserved, used) = match memory_numbers(st, t) {
            Ok(n) => n,
            Err(code) => return code,
        };
        let free = total.saturating_sub(reserved).saturating_sub(used);
        // SAFETY: the version check proves the caller passed a 40-byte nvmlMemory_v2_t
        // ({u32 version; u64 total, reserved, free, used}); all writes are inside it.
        unsafe {
            put(memory, 8, total);
            put(memory, 16, reserved);
            put(memory, 24, free);
            put(memory, 32, used);
        }
        SUCCESS
    })
}
