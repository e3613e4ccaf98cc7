//! MIG symbols of the fake NVML (absent from the `no_mig` build): the mode, MIG device handles
//! and their ids, attributes, GPU-instance profiles, and the privileged GPU-instance queries.
//!
//! Behaviour follows `nvml.h` where it documents it and `nvml-depth.md` §6.3 where it does not
//! (marked there as unverified on hardware): a GPU without MIG answers NOT_SUPPORTED to the
//! mode; a slot without a live MIG device answers NOT_FOUND, one beyond the maximum
//! INVALID_ARGUMENT; the GPU-instance queries need a privileged caller (NO_PERMISSION).

use super::*;

/// `NVML_STRUCT_VERSION(GpuInstanceProfileInfo, 2)` and `(…, 3)`: size 152.
#[cfg(not(no_profile_v))]
const PROFILE_V2: u32 = 0x0200_0098;
#[cfg(not(no_profile_v))]
const PROFILE_V3: u32 = 0x0300_0098;
/// `NVML_GPU_INSTANCE_PROFILE_COUNT` in API 13: enums at or above it are INVALID_ARGUMENT.
const PROFILE_COUNT: u32 = 0x12;

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMigMode(
    device: nvmlDevice_t,
    current: *mut c_uint,
    pending: *mut c_uint,
) -> nvmlReturn_t {
    with_device("nvmlDeviceGetMigMode", device, |st, i| {
        let Some(d) = st.cfg.devices.get(i) else {
            return INVALID_ARGUMENT;
        };
        let Some(cur) = d.extras.mig_mode else {
            return NOT_SUPPORTED;
        };
        let (cur, pend) = (c_uint::from(cur), c_uint::from(d.extras.mig_pending.unwrap_or(cur)));
        // SAFETY: NVML contract: both are null or point to writable uints.
        match unsafe { out(current, cur) } {
            SUCCESS => unsafe { out(pending, pend) },
            code => code,
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMaxMigDeviceCount(
    device: nvmlDevice_t,
    count: *mut c_uint,
) -> nvmlReturn_t {
    with_device("nvmlDeviceGetMaxMigDeviceCount", device, |st, i| {
        let n = match st.cfg.devices.get(i) {
            Some(d) if st.mig_on(i) => d.extras.mig_max_devices,
            Some(_) => 0,
            None => return INVALID_ARGUMENT,
        };
        // SAFETY: NVML contract: `count` is null or points to a writable uint.
        unsafe { out(count, n) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMigDeviceHandleByIndex(
    device: nvmlDevice_t,
    index: c_uint,
    mig: *mut nvmlDevice_t,
) -> nvmlReturn_t {
    let sym = "nvmlDeviceGetMigDeviceHandleByIndex";
    with_device(sym, device, |st, i| {
        let Some(d) = st.cfg.devices.get(i) else {
            return INVALID_ARGUMENT;
        };
        if !st.mig_on(i) {
            return NOT_SUPPORTED;
        }
        if index >= d.extras.mig_max_devices || mig.is_null() {
            return INVALID_ARGUMENT;
        }
        let Some(k) = st
            .slots
            .iter()
            .position(|m| m.device == i && m.slot == index)
        else {
            return NOT_FOUND;
        };
        let fetch = st.ci_fetches.get(k).copied().unwrap_or(0);
        if let Some(f) = st.ci_fetches.get_mut(k) {
            *f = f.saturating_add(1);
        }
        let Some((_, c)) = st.ci(k) else {
            return NOT_FOUND;
        };
        if let Some(code) = find_error(&c.errors, sym) {
            return code;
        }
        if c.gone_from_enum.is_some_and(|from| fetch >= from) || st.ci_gone(k) {
            return NOT_FOUND;
        }
        // SAFETY: `mig` is non-null and, per NVML, points to a writable handle.
        unsafe { out(mig, mig_handle(i, index)) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceIsMigDeviceHandle(
    device: nvmlDevice_t,
    is_mig: *mut c_uint,
) -> nvmlReturn_t {
    with_handle("nvmlDeviceIsMigDeviceHandle", device, |_, t| {
        let v = c_uint::from(matches!(t, Target::Mig { .. }));
        // SAFETY: NVML contract: `is_mig` is null or points to a writable uint.
        unsafe { out(is_mig, v) }
    })
}

fn instance_id(sym: &str, device: nvmlDevice_t, id: *mut c_uint, gpu: bool) -> nvmlReturn_t {
    with_handle(sym, device, |st, t| {
        let Target::Mig { ci, .. } = t else {
            return NOT_SUPPORTED;
        };
        let Some((g, c)) = st.ci(ci) else {
            return INVALID_ARGUMENT;
        };
        // SAFETY: NVML contract: `id` is null or points to a writable uint.
        unsafe { out(id, if gpu { g.id } else { c.id }) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetGpuInstanceId(
    device: nvmlDevice_t,
    id: *mut c_uint,
) -> nvmlReturn_t {
    instance_id("nvmlDeviceGetGpuInstanceId", device, id, true)
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetComputeInstanceId(
    device: nvmlDevice_t,
    id: *mut c_uint,
) -> nvmlReturn_t {
    instance_id("nvmlDeviceGetComputeInstanceId", device, id, false)
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetDeviceHandleFromMigDeviceHandle(
    device: nvmlDevice_t,
    parent: *mut nvmlDevice_t,
) -> nvmlReturn_t {
    with_handle("nvmlDeviceGetDeviceHandleFromMigDeviceHandle", device, |_, t| {
        let Target::Mig { parent: p, .. } = t else {
            return INVALID_ARGUMENT;
        };
        // SAFETY: NVML contract: `parent` is null or points to a writable handle.
        unsafe { out(parent, p.wrapping_add(1) as nvmlDevice_t) }
    })
}

/// `nvmlDeviceAttributes_t` (40 bytes) of a MIG device, from its GPU instance's profile.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetAttributes_v2(
    device: nvmlDevice_t,
    attributes: *mut c_void,
) -> nvmlReturn_t {
    with_handle("nvmlDeviceGetAttributes_v2", device, |st, t| {
        let Target::Mig { parent, ci } = t else {
            return NOT_SUPPORTED;
        };
        if attributes.is_null() {
            return INVALID_ARGUMENT;
        }
        let (Some((g, c)), Some(_)) = (st.ci(ci), st.cfg.devices.get(parent)) else {
            return NOT_FOUND;
        };
        let profile = st.profiles(parent).iter().find(|p| p.id == g.profile_id);
        let e = profile.map_or([0; 5], |p| p.engines);
        let sm = c.sm.or(profile.map(|p| p.sm)).unwrap_or(0);
        let gi_slices = profile.map_or(0, |p| p.slices);
        let mib = g
            .memory_total
            .map(|b| b >> 20)
            .or(profile.map(|p| p.memory_mib))
            .unwrap_or(0);
        // SAFETY: NVML contract: `attributes` points to a writable 40-byte
        // nvmlDeviceAttributes_t; every write is inside it.
        unsafe {
            put(attributes, 0, sm);
            for (k, v) in e.iter().enumerate() {
                put(attributes, 4 + 4 * k, *v);
            }
            put(attributes, 24, gi_slices);
            put(attributes, 28, c.slices);
            put(attributes, 32, mib);
        }
        SUCCESS
    })
}

/// The profile with enum `profile` of device `i`, or the code to answer.
fn profile_of(st: &State, i: usize, profile: c_uint) -> Result<MigProfile, nvmlReturn_t> {
    let d = st.cfg.devices.get(i).ok_or(INVALID_ARGUMENT)?;
    if d.extras.mig_mode.is_none() || st.profiles(i).is_empty() {
        return Err(NOT_SUPPORTED);
    }
    if profile >= PROFILE_COUNT {
        return Err(INVALID_ARGUMENT);
    }
    st.profiles(i)
        .iter()
        .find(|p| p.profile_enum == profile)
        .copied()
        .ok_or(NOT_SUPPORTED)
}

/// `nvmlGpuInstanceProfileInfo_t` (v1, 48 bytes, no name).
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetGpuInstanceProfileInfo(
    device: nvmlDevice_t,
    profile: c_uint,
    info: *mut c_void,
) -> nvmlReturn_t {
    with_device("nvmlDeviceGetGpuInstanceProfileInfo", device, |st, i| {
        let p = match profile_of(st, i, profile) {
            Ok(p) => p,
            Err(code) => return code,
        };
        if info.is_null() {
            return INVALID_ARGUMENT;
        }
        // SAFETY: NVML contract: `info` points to a writable 48-byte struct.
        unsafe {
            for (k, v) in [p.id, 0, p.slices, p.instances, p.sm].iter().enumerate() {
                put(info, 4 * k, *v);
            }
            for (k, v) in p.engines.iter().enumerate() {
                put(info, 20 + 4 * k, *v);
            }
            put(info, 40, p.memory_mib);
        }
        SUCCESS
    })
}

/// `nvmlGpuInstanceProfileInfo_v2_t` / `_v3_t` (152 bytes, with the name).
#[cfg(not(no_profile_v))]
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetGpuInstanceProfileInfoV(
    device: nvmlDevice_t,
    profile: c_uint,
    info: *mut c_void,
) -> nvmlReturn_t {
    with_device("nvmlDeviceGetGpuInstanceProfileInfoV", device, |st, i| {
        if info.is_null() {
            return INVALID_ARGUMENT;
        }
        // SAFETY: NVML contract: `info` points to a struct whose first field is the u32
        // version the caller filled in.
        let version = unsafe { info.cast::<u32>().read_unaligned() };
        if version != PROFILE_V2 && version != PROFILE_V3 {
            return INVALID_ARGUMENT;
        }
        let p = match profile_of(st, i, profile) {
            Ok(p) => p,
            Err(code) => return code,
        };
        let name: [u8; 96] = fixed_cstr(p.name);
        // SAFETY: the version check proves a 152-byte struct; every write is inside it. v2:
        // version, id, isP2pSupported, sliceCount, … at 4-byte steps, memorySizeMB at 48, name
        // at 56. v3 drops isP2pSupported: memorySizeMB at 40, name at 48, capabilities at 144.
        unsafe {
            let fields: Vec<u32> = if version == PROFILE_V2 {
                let mut f = vec![p.id, 0, p.slices, p.instances, p.sm];
                f.extend_from_slice(&p.engines);
                f
            } else {
                let mut f = vec![p.id, p.slices, p.instances, p.sm];
                f.extend_from_slice(&p.engines);
                f
            };
            for (k, v) in fields.iter().enumerate() {
                put(info, 4 + 4 * k, *v);
            }
            if version == PROFILE_V2 {
                put(info, 48, p.memory_mib);
                put(info, 56, name);
            } else {
                put(info, 40, p.memory_mib);
                put(info, 48, name);
                put(info, 144, 0u32);
            }
        }
        SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetGpuInstanceById(
    device: nvmlDevice_t,
    id: c_uint,
    gpu_instance: *mut *mut c_void,
) -> nvmlReturn_t {
    with_device("nvmlDeviceGetGpuInstanceById", device, |st, i| {
        let Some(d) = st.cfg.devices.get(i) else {
            return INVALID_ARGUMENT;
        };
        if !st.mig_on(i) {
            return NOT_SUPPORTED;
        }
        if !d.extras.privileged {
            return NO_PERMISSION;
        }
        if !st
            .cfg
            .gpu_instances
            .iter()
            .any(|g| g.device as usize == i && g.id == id)
        {
            return NOT_FOUND;
        }
        let h = (GI_TAG | (i & 0xffff) << 8 | (id as usize & 0xff)) as *mut c_void;
        // SAFETY: NVML contract: `gpu_instance` is null or points to a writable handle.
        unsafe { out(gpu_instance, h) }
    })
}

/// `nvmlGpuInstanceInfo_t`: device handle, id, profileId, placement {start, size} — 24 bytes.
#[no_mangle]
pub unsafe extern "C" fn nvmlGpuInstanceGetInfo(
    gpu_instance: *mut c_void,
    info: *mut c_void,
) -> nvmlReturn_t {
    with_state("nvmlGpuInstanceGetInfo", |st| {
        let raw = gpu_instance as usize;
        if raw >> 24 != GI_TAG >> 24 || info.is_null() {
            return INVALID_ARGUMENT;
        }
        let (parent, id) = ((raw >> 8) & 0xffff, (raw & 0xff) as u32);
        let Some(g) = st
            .cfg
            .gpu_instances
            .iter()
            .find(|g| g.device as usize == parent && g.id == id)
        else {
            return INVALID_ARGUMENT;
        };
        // SAFETY: NVML contract: `info` points to a writable 24-byte nvmlGpuInstanceInfo_t.
        unsafe {
            put(info, 0, parent.wrapping_add(1));
            put(info, 8, g.id);
            put(info, 12, g.profile_id);
            put(info, 16, g.placement.0);
            put(info, 20, g.placement.1);
        }
        SUCCESS
    })
}
