//! What `hmn doctor` asks of NVML ([`crate::doctor`]): versions, and each device's accounting
//! and persistence modes — and, when `nvmlInit` failed, the library's own version, which NVML
//! gives without a successful init (so a driver/library mismatch can name both sides).

#![allow(unsafe_code)]

use std::ffi::{CStr, OsStr, c_char, c_uint};

use nvml_wrapper::error::NvmlError;
use nvml_wrapper_sys::bindings::NvmlLib;

use super::NvmlBackend;
use super::convert::query_error;
use crate::backends::error::BackendError;
use crate::types::QueryError;

/// What `hmn doctor` reads from a loaded, initialised NVML (the doctor's facts are built from
/// it in `doctor::facts`).
pub(crate) struct DoctorReadings {
    /// `nvmlSystemGetNVMLVersion`.
    pub library_version: Option<String>,
    /// `nvmlSystemGetDriverVersion`.
    pub driver_version: Option<String>,
    /// `nvmlSystemGetCudaDriverVersion`.
    pub cuda_version: Option<i32>,
    /// Per device, its modes.
    pub devices: Vec<DeviceModes>,
}

/// One device's accounting and persistence modes, or why each is unreadable.
pub(crate) struct DeviceModes {
    pub index: u32,
    pub accounting: Result<bool, QueryError>,
    pub persistence: Result<bool, QueryError>,
}

impl NvmlBackend {
    /// Versions, and each device's accounting and persistence modes.
    pub(crate) fn doctor_readings(&self) -> DoctorReadings {
        let mut r = DoctorReadings {
            library_version: self.nvml.sys_nvml_version().ok(),
            driver_version: self.driver_version.as_ref().ok().cloned(),
            cuda_version: self.nvml.sys_cuda_driver_version().ok(),
            devices: Vec::new(),
        };
        let count = self.nvml.device_count().unwrap_or(0);
        for index in 0..count {
            let text = |e: NvmlError| query_error(&e);
            let (accounting, persistence) = match self.handle(index) {
                Ok(h) => {
                    // Platform seam: persistence mode is Linux's (nvml-wrapper has no call
                    // elsewhere; Windows keeps the driver loaded).
                    #[cfg(target_os = "linux")]
                    let persistence = h.is_in_persistent_mode().map_err(text);
                    #[cfg(not(target_os = "linux"))]
                    let persistence = Err(QueryError::NotOnThisPlatform);
                    (h.is_accounting_enabled().map_err(text), persistence)
                }
                Err(e) => (Err(query_error(&e)), Err(query_error(&e))),
            };
            r.devices.push(DeviceModes {
                index,
                accounting,
                persistence,
            });
        }
        r
    }
}

/// `nvmlInit`'s return code inside a backend error, when it has one.
pub(crate) fn init_code(e: &BackendError) -> Option<u32> {
    match e {
        BackendError::InitFailed(err) => Some(match err {
            NvmlError::LibRmVersionMismatch => 18,
            NvmlError::UnexpectedVariant(code) => *code,
            NvmlError::Unknown => 999,
            _ => return None,
        }),
        BackendError::DriverNotLoaded => Some(9),
        BackendError::NoPermission => Some(4),
        BackendError::GpuNotFound => Some(28),
        _ => None,
    }
}

/// `nvmlSystemGetNVMLVersion` from `library` without initialising it (the call needs no init).
/// `None` when the library cannot be loaded or the call fails.
pub(crate) fn version_without_init(library: &OsStr) -> Option<String> {
    // SAFETY: loads the same NVML library nvml-wrapper loaded (and unloaded) moments ago from
    // the same name; its initialisers run again, as on every load.
    let lib = unsafe { NvmlLib::new(library) }.ok()?;
    let call = lib.nvmlSystemGetNVMLVersion.as_ref().ok()?;
    let mut buf = [0 as c_char; 96];
    let len = c_uint::try_from(buf.len()).ok()?;
    // SAFETY: `buf` is writable for `len` bytes; NVML writes a NUL-terminated string of at most
    // `len` bytes into it and keeps no pointer to it.
    let rc = unsafe { call(buf.as_mut_ptr(), len) };
    if rc != 0 {
        return None;
    }
    if let Some(last) = buf.last_mut() {
        *last = 0; // a string that filled the buffer still ends inside it
    }
    // SAFETY: `buf` holds a NUL (set above, or NVML's own) within its bounds and lives until
    // the copy below is made.
    let text = unsafe { CStr::from_ptr(buf.as_ptr()) };
    Some(text.to_string_lossy().into_owned()).filter(|v| !v.is_empty())
}
