//! The raw MIG and utilization calls nvml-wrapper 0.13 does not wrap, or wraps in a way we
//! cannot use (`unsafe`, as [`super::ffi`]):
//!
//! - `nvmlDeviceGetGpuInstanceId`, `nvmlDeviceGetComputeInstanceId` on a MIG device;
//! - the privileged GPU-instance queries (`nvmlDeviceGetGpuInstanceById`,
//!   `nvmlGpuInstanceGetInfo`) and the profile table (`nvmlDeviceGetGpuInstanceProfileInfoV`,
//!   with names; the v1 call without them on drivers that lack it);
//! - `nvmlDeviceGetProcessUtilization` with the sizing/fill protocol, headroom and retry
//!   (nvml-wrapper's sizes its second buffer exactly and reports "no samples" as an error).
//!
//! Every struct passed is the bindgen type of `nvml-wrapper-sys` (layouts match `nvml.h`,
//! checked in `nvml-depth.md` §1.3 and §3.1), zero-initialised; every handle comes from the
//! `Nvml` that owns `lib`, alive for the call.

#![allow(unsafe_code)]

use std::ffi::{CStr, c_uint};

use nvml_wrapper::Device;
use nvml_wrapper::error::{NvmlError, nvml_sym};
use nvml_wrapper_sys::bindings::{
    NvmlLib, nvmlGpuInstance_t, nvmlGpuInstanceInfo_t, nvmlGpuInstanceProfileInfo_t,
    nvmlGpuInstanceProfileInfo_v2_t, nvmlProcessUtilizationSample_t, nvmlReturn_t,
};

use super::ffi::{INSUFFICIENT_SIZE, SUCCESS, check};
use super::util::RawSample;

/// `NVML_ERROR_INVALID_ARGUMENT`: the end of the profile enumeration.
const INVALID_ARGUMENT: nvmlReturn_t = 2;
/// `NVML_ERROR_NOT_SUPPORTED`.
const NOT_SUPPORTED: nvmlReturn_t = 3;
/// `NVML_ERROR_NOT_FOUND`: no utilization sample newer than the timestamp.
const NOT_FOUND: nvmlReturn_t = 6;
/// `NVML_STRUCT_VERSION(GpuInstanceProfileInfo, 2)`: `sizeof(…_v2_t) | 2 << 24`.
const PROFILE_INFO_V2: c_uint = 0x0200_0098;
/// The profile enumeration stops here even without INVALID_ARGUMENT (API 13 has 0x12).
const MAX_PROFILE_ENUM: c_uint = 64;
/// Attempts at the utilization list before giving up on one that keeps growing.
const MAX_ATTEMPTS: usize = 8;
/// Extra samples allocated beyond the count NVML reported.
const SLACK: c_uint = 4;
/// No device holds more processes than this.
const MAX_SAMPLES: c_uint = 65_536;

/// `nvmlDeviceGetGpuInstanceId` (`gpu = true`) or `nvmlDeviceGetComputeInstanceId` of a MIG
/// device.
pub(crate) fn instance_id(lib: &NvmlLib, mig: &Device<'_>, gpu: bool) -> Result<u32, NvmlError> {
    let f = if gpu {
        nvml_sym(lib.nvmlDeviceGetGpuInstanceId.as_ref())?
    } else {
        nvml_sym(lib.nvmlDeviceGetComputeInstanceId.as_ref())?
    };
    let mut id: c_uint = 0;
    // SAFETY: the handle belongs to the live `Nvml` that owns `lib`.
    let handle = unsafe { mig.handle() };
    // SAFETY: `id` is a valid, writable uint for the call.
    check(unsafe { f(handle, &mut id) })?;
    Ok(id)
}

/// What the privileged GPU-instance query says about one GPU instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct GpuInstanceInfo {
    pub profile_id: u32,
    pub placement: (u32, u32),
}

/// `nvmlDeviceGetGpuInstanceById` then `nvmlGpuInstanceGetInfo` ("Requires privileged user":
/// NO_PERMISSION otherwise).
pub(crate) fn gpu_instance_info(
    lib: &NvmlLib,
    parent: &Device<'_>,
    gi_id: u32,
) -> Result<GpuInstanceInfo, NvmlError> {
    let by_id = nvml_sym(lib.nvmlDeviceGetGpuInstanceById.as_ref())?;
    let get_info = nvml_sym(lib.nvmlGpuInstanceGetInfo.as_ref())?;
    // SAFETY: the handle belongs to the live `Nvml` that owns `lib`.
    let handle = unsafe { parent.handle() };
    let mut gi: nvmlGpuInstance_t = std::ptr::null_mut();
    // SAFETY: `gi` is a writable handle slot; NVML writes an opaque handle into it.
    check(unsafe { by_id(handle, gi_id, &mut gi) })?;
    // SAFETY: `nvmlGpuInstanceInfo_t` is a plain C struct (a handle and integers) for which all
    // zero bytes is valid.
    let mut info: nvmlGpuInstanceInfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: `gi` came from NVML for this call sequence; `info` is a writable struct of the
    // callee's type.
    check(unsafe { get_info(gi, &mut info) })?;
    Ok(GpuInstanceInfo {
        profile_id: info.profileId,
        placement: (info.placement.start, info.placement.size),
    })
}

/// One GPU-instance profile of a GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProfileEntry {
    /// The profile id (matches `nvmlGpuInstanceInfo_t.profileId`).
    pub id: u32,
    /// `MIG 1g.10gb` as NVML writes it; `None` from the v1 call (drivers before R470).
    pub name: Option<String>,
}

/// Every GPU-instance profile of `parent`: `…ProfileInfoV` (v2, with names) for the enum values
/// from 0 until INVALID_ARGUMENT (as `nvml.h` advises; an unsupported value is skipped), or
/// the v1 call without names when the driver lacks the V call.
pub(crate) fn gpu_instance_profiles(
    lib: &NvmlLib,
    parent: &Device<'_>,
) -> Result<Vec<ProfileEntry>, NvmlError> {
    // SAFETY: the handle belongs to the live `Nvml` that owns `lib`.
    let handle = unsafe { parent.handle() };
    let mut out = Vec::new();
    let v2 = lib.nvmlDeviceGetGpuInstanceProfileInfoV.as_ref().ok();
    for profile in 0..MAX_PROFILE_ENUM {
        let (code, entry) = if let Some(f) = v2 {
            // SAFETY: the struct is integers and a char array: all zero bytes is valid.
            let mut info: nvmlGpuInstanceProfileInfo_v2_t = unsafe { std::mem::zeroed() };
            info.version = PROFILE_INFO_V2;
            // SAFETY: `info` is a writable v2 struct whose version says so.
            let code = unsafe { f(handle, profile, &mut info) };
            // The name is a fixed array the driver NUL-terminates; force it.
            let mut name = info.name;
            if let Some(last) = name.last_mut() {
                *last = 0;
            }
            // SAFETY: `name` is NUL-terminated (forced above) and lives for this statement.
            let text = unsafe { CStr::from_ptr(name.as_ptr()) }
                .to_string_lossy()
                .into_owned();
            let entry = ProfileEntry {
                id: info.id,
                name: (!text.is_empty()).then_some(text),
            };
            (code, entry)
        } else {
            let f = nvml_sym(lib.nvmlDeviceGetGpuInstanceProfileInfo.as_ref())?;
            // SAFETY: the v1 struct is integers: all zero bytes is valid.
            let mut info: nvmlGpuInstanceProfileInfo_t = unsafe { std::mem::zeroed() };
            // SAFETY: `info` is a writable v1 struct.
            let code = unsafe { f(handle, profile, &mut info) };
            (
                code,
                ProfileEntry {
                    id: info.id,
                    name: None,
                },
            )
        };
        match code {
            SUCCESS => out.push(entry),
            INVALID_ARGUMENT => break,
            NOT_SUPPORTED => continue,
            other => return Err(NvmlError::from(other)),
        }
    }
    Ok(out)
}

/// `nvmlDeviceGetProcessUtilization` since `last_seen_us`: the samples, empty when the driver
/// has none newer (NOT_FOUND, which is not an error).
pub(crate) fn process_utilization(
    lib: &NvmlLib,
    device: &Device<'_>,
    last_seen_us: u64,
) -> Result<Vec<RawSample>, NvmlError> {
    let f = nvml_sym(lib.nvmlDeviceGetProcessUtilization.as_ref())?;
    // SAFETY: the handle belongs to the live `Nvml` that owns `lib`.
    let handle = unsafe { device.handle() };
    let mut count: c_uint = 0;
    // SAFETY: a sizing call: a null buffer asks for the number of samples; NVML writes only
    // `count`.
    let code = unsafe { f(handle, std::ptr::null_mut(), &mut count, last_seen_us) };
    match code {
        SUCCESS | NOT_FOUND => return Ok(Vec::new()),
        INSUFFICIENT_SIZE => {}
        other => return Err(NvmlError::from(other)),
    }
    for _ in 0..MAX_ATTEMPTS {
        if count > MAX_SAMPLES {
            return Err(NvmlError::InsufficientSize(Some(count as usize)));
        }
        let capacity = count + SLACK;
        // SAFETY: the sample struct is integers: all zero bytes is valid.
        let zero: nvmlProcessUtilizationSample_t = unsafe { std::mem::zeroed() };
        let mut buf = vec![zero; capacity as usize];
        let mut filled = capacity;
        // SAFETY: `buf` holds `capacity` samples and `filled` says so.
        let code = unsafe { f(handle, buf.as_mut_ptr(), &mut filled, last_seen_us) };
        match code {
            SUCCESS => {
                let n = (filled as usize).min(buf.len());
                return Ok(buf
                    .iter()
                    .take(n)
                    .map(|s| RawSample {
                        pid: s.pid,
                        timestamp_us: s.timeStamp,
                        sm: s.smUtil,
                        memory: s.memUtil,
                        encoder: s.encUtil,
                        decoder: s.decUtil,
                    })
                    .collect());
            }
            NOT_FOUND => return Ok(Vec::new()),
            INSUFFICIENT_SIZE => count = filled.max(capacity),
            other => return Err(NvmlError::from(other)),
        }
    }
    Err(NvmlError::InsufficientSize(Some(count as usize)))
}
