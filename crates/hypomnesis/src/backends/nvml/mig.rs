//! MIG: a GPU's MIG state and MIG devices (their processes: `mig_processes.rs`).
//!
//! Enumeration needs no privilege (`nvml-depth.md` §1.6): the mode; if it is on, every slot up
//! to `nvmlDeviceGetMaxMigDeviceCount` through `nvmlDeviceGetMigDeviceHandleByIndex` (an empty
//! slot — NOT_FOUND, INVALID_ARGUMENT, NOT_SUPPORTED — is skipped: instances are not dense);
//! per MIG device its UUID, name (whose text after ` MIG ` is the profile), GPU- and
//! compute-instance ids, memory and attributes. A MIG device destroyed while it is read (any
//! call answering INVALID_ARGUMENT, NOT_FOUND or GPU_IS_LOST) is left out and named in the
//! state's `unknown` (the probe turns that into one warning). When the caller is privileged,
//! the GPU-instance queries add the GPU instance's profile (dcgm-exporter's `GPU_I_PROFILE`),
//! profile id and placement; NO_PERMISSION keeps the unprivileged view, with the reason.
//!
//! The mode is only read, never set: `hmn` does not change a GPU's mode or reset it.

use nvml_wrapper::error::NvmlError;

use super::convert::{describe, reason_of};
use super::ffi::{self, memory};
use super::ffi_mig::{self, ProfileEntry};
use crate::types::{
    Device, Field, MigDevice, MigMode, MigPlacement, MigState, Unknown, UnknownReason,
};

/// The most MIG device slots looked at (an H100 has 7; the driver's maximum is clamped).
const MAX_SLOTS: u32 = 64;

/// Each GPU's GPU-instance profile table (fixed for a GPU: read once, up to 18 driver calls),
/// kept by the [`NvmlBackend`] for its life.
#[derive(Debug, Default)]
pub(crate) struct ProfileCache(
    std::sync::Mutex<std::collections::BTreeMap<u32, Vec<ProfileEntry>>>,
);

impl ProfileCache {
    /// GPU `index`'s table: the cached one, or read now (and cached when the read succeeds).
    fn get_or_read(
        &self,
        index: u32,
        lib: &nvml_wrapper_sys::bindings::NvmlLib,
        gpu: &nvml_wrapper::Device<'_>,
    ) -> Result<Vec<ProfileEntry>, NvmlError> {
        let mut map = match self.0.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        if let Some(t) = map.get(&index) {
            return Ok(t.clone());
        }
        let t = ffi_mig::gpu_instance_profiles(lib, gpu)?;
        map.insert(index, t.clone());
        Ok(t)
    }
}

/// The device-level profile in NVML's name of a MIG device: the text after the last ` MIG `
/// (`NVIDIA H100 80GB HBM3 MIG 1g.10gb` → `1g.10gb`).
pub(crate) fn profile_from_name(name: &str) -> Option<String> {
    let (_, p) = name.rsplit_once(" MIG ")?;
    let p = p.trim();
    (!p.is_empty()).then(|| p.to_string())
}

/// A profile name as `nvidia-smi -L` and dcgm-exporter print it: NVML's without `MIG `.
pub(crate) fn strip_mig_prefix(name: &str) -> &str {
    name.trim().strip_prefix("MIG ").unwrap_or(name.trim())
}

/// `<slices>g.<GiB>gb` from a GPU instance's compute slices and memory: only an approximation
/// (an H200 `1g.18gb` holds 16 GiB), used when the name does not carry the profile.
pub(crate) fn approximate_profile(gi_slices: u32, memory_mib: u64) -> Option<String> {
    (gi_slices > 0 && memory_mib > 0)
        .then(|| format!("{gi_slices}g.{}gb", (memory_mib + 512) / 1024))
}

/// Whether an error means the MIG device is gone (destroyed, or its GPU lost).
pub(super) fn gone(e: &NvmlError) -> bool {
    matches!(
        e,
        NvmlError::InvalidArg | NvmlError::NotFound | NvmlError::GpuLost
    )
}

/// The MIG state of a GPU: `Ok(None)` when the GPU has no MIG (NOT_SUPPORTED), `Err` (an
/// unknown for the device) when the driver cannot say.
pub(crate) fn state(
    lib: &nvml_wrapper_sys::bindings::NvmlLib,
    gpu: &nvml_wrapper::Device<'_>,
    parent: &Device,
    profiles: &ProfileCache,
) -> Result<Option<MigState>, Unknown> {
    let mode = match gpu.mig_mode() {
        Ok(m) => m,
        Err(NvmlError::NotSupported) => return Ok(None),
        Err(e @ (NvmlError::FailedToLoadSymbol(_) | NvmlError::FunctionNotFound)) => {
            return Err(Unknown::new(
                Field::Mig,
                UnknownReason::Unsupported,
                format!(
                    "MIG: not supported by this driver's NVML (nvmlDeviceGetMigMode: {})",
                    describe(&e)
                ),
            ));
        }
        Err(e) => return Err(Unknown::new(Field::Mig, reason_of(&e), describe(&e))),
    };
    let mut st = MigState::new(
        MigMode::from_nvml(mode.current),
        MigMode::from_nvml(mode.pending),
    );
    if !st.enabled() {
        return Ok(Some(st));
    }
    let max = match gpu.mig_device_count() {
        Ok(n) => n.min(MAX_SLOTS),
        Err(e) => {
            st.unknown.push(Unknown::new(
                Field::MigInstances,
                reason_of(&e),
                format!("nvmlDeviceGetMaxMigDeviceCount: {}", describe(&e)),
            ));
            return Ok(Some(st));
        }
    };
    for slot in 0..max {
        match gpu.mig_device_by_index(slot) {
            Ok(h) => match instance(lib, &h, slot, parent) {
                Ok(m) => st.instances.push(m),
                Err(why) => st.unknown.push(Unknown::new(
                    Field::MigInstances,
                    UnknownReason::DeviceError,
                    why,
                )),
            },
            Err(NvmlError::NotFound | NvmlError::InvalidArg | NvmlError::NotSupported) => {}
            Err(e) => st.unknown.push(Unknown::new(
                Field::MigInstances,
                reason_of(&e),
                format!("MIG device {slot}: {}", describe(&e)),
            )),
        }
    }
    if !st.instances.is_empty() {
        enrich(lib, gpu, &mut st, profiles, parent.index);
    }
    Ok(Some(st))
}

/// Reads one MIG device; `Err` names it when it vanished while being read.
fn instance(
    lib: &nvml_wrapper_sys::bindings::NvmlLib,
    h: &nvml_wrapper::Device<'_>,
    slot: u32,
    parent: &Device,
) -> Result<MigDevice, String> {
    let mut m = MigDevice::new(slot, parent.index);
    m.parent_uuid.clone_from(&parent.uuid);
    let vanished = |m: &MigDevice, call: &str, e: &NvmlError| {
        format!(
            "MIG device {slot}{}: destroyed while being read ({call}: {}); left out",
            m.uuid
                .as_deref()
                .map(|u| format!(" ({u})"))
                .unwrap_or_default(),
            describe(e)
        )
    };
    match h.uuid() {
        Ok(u) => m.uuid = Some(u),
        Err(e) if gone(&e) => return Err(vanished(&m, "nvmlDeviceGetUUID", &e)),
        Err(e) => m
            .unknown
            .push(Unknown::new(Field::Uuid, reason_of(&e), describe(&e))),
    }
    match ffi::device_name(lib, h) {
        Ok(n) => {
            m.profile = profile_from_name(&n);
            m.name = Some(n);
        }
        Err(e) if gone(&e) => return Err(vanished(&m, "nvmlDeviceGetName", &e)),
        Err(e) => m
            .unknown
            .push(Unknown::new(Field::Name, reason_of(&e), describe(&e))),
    }
    for (gpu, field, call) in [
        (true, Field::GpuInstanceId, "nvmlDeviceGetGpuInstanceId"),
        (
            false,
            Field::ComputeInstanceId,
            "nvmlDeviceGetComputeInstanceId",
        ),
    ] {
        match ffi_mig::instance_id(lib, h, gpu) {
            Ok(id) if gpu => m.gpu_instance_id = Some(id),
            Ok(id) => m.compute_instance_id = Some(id),
            Err(e) if gone(&e) => return Err(vanished(&m, call, &e)),
            Err(e) => m
                .unknown
                .push(Unknown::new(field, reason_of(&e), describe(&e))),
        }
    }
    match memory(lib, h) {
        Ok((mem, _)) => m.memory = mem,
        Err(e) if gone(&e) => return Err(vanished(&m, "nvmlDeviceGetMemoryInfo", &e)),
        Err(e) => {
            for field in [
                Field::MemoryTotalBytes,
                Field::MemoryUsedBytes,
                Field::MemoryFreeBytes,
            ] {
                m.unknown
                    .push(Unknown::new(field, reason_of(&e), describe(&e)));
            }
        }
    }
    match h.attributes() {
        Ok(a) => {
            m.multiprocessor_count = Some(a.multiprocessor_count);
            if m.profile.is_none() {
                m.profile = approximate_profile(a.gpu_instance_slice_count, a.memory_size_mb);
                m.profile_approximate = m.profile.is_some();
            }
        }
        Err(e) if gone(&e) => return Err(vanished(&m, "nvmlDeviceGetAttributes_v2", &e)),
        Err(e) => m.unknown.push(Unknown::new(
            Field::MultiprocessorCount,
            reason_of(&e),
            describe(&e),
        )),
    }
    if m.profile.is_none() {
        m.unknown.push(Unknown::new(
            Field::Profile,
            UnknownReason::Unsupported,
            "neither the MIG device's name nor its attributes give its profile",
        ));
    }
    Ok(m)
}

/// The privileged detail: each GPU instance's profile (name and id) and placement.
fn enrich(
    lib: &nvml_wrapper_sys::bindings::NvmlLib,
    gpu: &nvml_wrapper::Device<'_>,
    st: &mut MigState,
    cache: &ProfileCache,
    index: u32,
) {
    let mut profiles: Option<Result<Vec<ProfileEntry>, NvmlError>> = None;
    let mut refused: Option<Unknown> = None;
    for m in &mut st.instances {
        let Some(gi) = m.gpu_instance_id else {
            continue;
        };
        let info = match ffi_mig::gpu_instance_info(lib, gpu, gi) {
            Ok(i) => i,
            Err(e) => {
                let why = match e {
                    NvmlError::NoPermission => "the GPU-instance queries need a privileged \
                        caller (root, or the nvidia-capabilities MIG monitor capability): the \
                        device-level profile is shown"
                        .to_string(),
                    ref other => format!("nvmlDeviceGetGpuInstanceById: {}", describe(other)),
                };
                refused.get_or_insert_with(|| {
                    Unknown::new(Field::MigInstancesGpuInstanceProfile, reason_of(&e), why)
                });
                continue;
            }
        };
        m.gpu_instance_profile_id = Some(info.profile_id);
        m.placement = Some(MigPlacement::new(info.placement.0, info.placement.1));
        let table = profiles.get_or_insert_with(|| cache.get_or_read(index, lib, gpu));
        match table {
            Ok(t) => match t.iter().find(|p| p.id == info.profile_id) {
                Some(ProfileEntry {
                    name: Some(name), ..
                }) => m.gpu_instance_profile = Some(strip_mig_prefix(name).to_string()),
                Some(_) => m.unknown.push(Unknown::new(
                    Field::GpuInstanceProfile,
                    UnknownReason::Unsupported,
                    "this driver's profile table has no names (no \
                     nvmlDeviceGetGpuInstanceProfileInfoV, before R470)",
                )),
                None => m.unknown.push(Unknown::new(
                    Field::GpuInstanceProfile,
                    UnknownReason::Unsupported,
                    format!(
                        "profile id {} is not in the GPU's profile table",
                        info.profile_id
                    ),
                )),
            },
            Err(e) => m.unknown.push(Unknown::new(
                Field::GpuInstanceProfile,
                reason_of(e),
                format!("GPU-instance profiles: {}", describe(e)),
            )),
        }
    }
    st.unknown.extend(refused);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_profile_is_the_text_after_mig() {
        assert_eq!(
            profile_from_name("NVIDIA H100 80GB HBM3 MIG 1g.10gb").as_deref(),
            Some("1g.10gb")
        );
        assert_eq!(
            profile_from_name("NVIDIA H100 80GB HBM3 MIG 1c.3g.40gb").as_deref(),
            Some("1c.3g.40gb")
        );
        assert_eq!(profile_from_name("NVIDIA H100 80GB HBM3"), None);
        assert_eq!(profile_from_name("NVIDIA X MIG "), None);
        assert_eq!(strip_mig_prefix("MIG 1g.10gb+me"), "1g.10gb+me");
        assert_eq!(strip_mig_prefix("3g.40gb"), "3g.40gb");
    }

    #[test]
    fn an_approximate_profile_rounds_the_memory() {
        assert_eq!(approximate_profile(1, 9984).as_deref(), Some("1g.10gb"));
        assert_eq!(approximate_profile(3, 40448).as_deref(), Some("3g.40gb"));
        // The H200 case the name would get right and the memory does not: 16 GiB, not 18.
        assert_eq!(approximate_profile(1, 16384).as_deref(), Some("1g.16gb"));
        assert_eq!(approximate_profile(0, 9984), None);
        assert_eq!(approximate_profile(1, 0), None);
    }
}
