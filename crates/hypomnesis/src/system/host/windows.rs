//! Host and process memory on Windows (FFI): the machine's RAM from `GlobalMemoryStatusEx`,
//! any process's working set, peak working set and private bytes from `GetProcessMemoryInfo`
//! with `PROCESS_MEMORY_COUNTERS_EX`, and this process's working set (the own-RSS fast path).
//!
//! Figures, and how they map onto the Linux names of [`super::ProcessMemory`]:
//! - `rss_bytes` = `WorkingSetSize` (resident pages, shared ones included; Task Manager's
//!   "Working set"), `peak_rss_bytes` = `PeakWorkingSetSize`;
//! - `private_bytes` = `PrivateUsage` (commit charge: private bytes, resident or paged out),
//!   reported in place of swap, which Windows does not give per process (`swap_bytes` is `None`
//!   with an `Unsupported` reason); PSS does not exist on Windows.
//!
//! A process this user may not open (a protected or another session's process) is
//! [`Error::PermissionDenied`]; a pid that does not exist is [`Error::NotFound`]. Errors name
//! the call and the pid in place of a path.

use std::path::PathBuf;

use windows::Win32::Foundation::{CloseHandle, HANDLE};
use windows::Win32::System::ProcessStatus::{
    GetProcessMemoryInfo, PROCESS_MEMORY_COUNTERS, PROCESS_MEMORY_COUNTERS_EX,
};
use windows::Win32::System::SystemInformation::{GlobalMemoryStatusEx, MEMORYSTATUSEX};
use windows::Win32::System::Threading::{
    GetCurrentProcess, OpenProcess, PROCESS_QUERY_LIMITED_INFORMATION,
};

use super::memory::{HostMemory, MemoryDetail, ProcessMemory};
use crate::types::error::Error;
use crate::types::{Field, Unknown, UnknownReason};

/// Win32 `ERROR_INVALID_PARAMETER`: what `OpenProcess` answers for a pid that does not exist.
const ERROR_INVALID_PARAMETER: i32 = 87;

/// A Windows API error as this crate's error, naming `what` (the call and its argument).
pub(crate) fn win_error(what: String, err: &windows::core::Error) -> Error {
    let hr = err.code().0 as u32;
    // HRESULT_FROM_WIN32: facility 7 carries the Win32 error code in the low word.
    let code = if hr & 0xFFFF_0000 == 0x8007_0000 {
        (hr & 0xFFFF) as i32
    } else {
        hr as i32
    };
    let io = std::io::Error::from_raw_os_error(code);
    if code == ERROR_INVALID_PARAMETER {
        return Error::NotFound {
            path: PathBuf::from(what),
        };
    }
    Error::from_io(what, io)
}

/// An open process handle, closed on drop.
pub(crate) struct ProcessHandle(HANDLE);

impl ProcessHandle {
    /// `OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, pid)`: the least access any query here
    /// needs (granted for most processes of other users too, unlike `PROCESS_QUERY_INFORMATION`).
    pub(crate) fn open(pid: u32) -> Result<ProcessHandle, Error> {
        // SAFETY: OpenProcess takes plain values and returns an owned handle or an error; the
        // handle is closed exactly once, by Drop.
        let h = unsafe { OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, false, pid) }
            .map_err(|e| win_error(format!("OpenProcess(pid {pid})"), &e))?;
        Ok(ProcessHandle(h))
    }

    pub(crate) fn raw(&self) -> HANDLE {
        self.0
    }
}

impl Drop for ProcessHandle {
    fn drop(&mut self) {
        // SAFETY: the handle was returned by OpenProcess and is closed only here.
        let _ = unsafe { CloseHandle(self.0) };
    }
}

/// `GetProcessMemoryInfo` with the `_EX` counters.
fn counters(h: HANDLE, pid: u32) -> Result<PROCESS_MEMORY_COUNTERS_EX, Error> {
    let mut c = PROCESS_MEMORY_COUNTERS_EX {
        cb: std::mem::size_of::<PROCESS_MEMORY_COUNTERS_EX>() as u32,
        ..Default::default()
    };
    // SAFETY: `c` is a live, writable PROCESS_MEMORY_COUNTERS_EX whose `cb` states its size; the
    // API writes at most `cb` bytes, and the _EX struct starts with the plain counters.
    unsafe { GetProcessMemoryInfo(h, (&raw mut c).cast::<PROCESS_MEMORY_COUNTERS>(), c.cb) }
        .map_err(|e| win_error(format!("GetProcessMemoryInfo(pid {pid})"), &e))?;
    Ok(c)
}

/// The machine's RAM (`GlobalMemoryStatusEx`). `memory_free_bytes` is `ullAvailPhys` too:
/// Windows has no separate "free" figure (standby pages count as available); the page file is
/// reported as swap (`ullTotalPageFile` − `ullTotalPhys`, the part of the commit limit beyond RAM).
pub(crate) fn host_memory() -> Result<HostMemory, Error> {
    let mut m = MEMORYSTATUSEX {
        dwLength: std::mem::size_of::<MEMORYSTATUSEX>() as u32,
        ..Default::default()
    };
    // SAFETY: `m` is a live MEMORYSTATUSEX with dwLength set, as the API requires.
    unsafe { GlobalMemoryStatusEx(&raw mut m) }
        .map_err(|e| win_error("GlobalMemoryStatusEx".to_string(), &e))?;
    let swap_total = m.ullTotalPageFile.saturating_sub(m.ullTotalPhys);
    let swap_free = m
        .ullAvailPageFile
        .saturating_sub(m.ullAvailPhys)
        .min(swap_total);
    Ok(HostMemory {
        memory_total_bytes: m.ullTotalPhys,
        memory_available_bytes: m.ullAvailPhys,
        memory_free_bytes: m.ullAvailPhys,
        swap_total_bytes: Some(swap_total),
        swap_free_bytes: Some(swap_free),
    })
}

/// One process's memory (working set, peak working set, private bytes).
pub(crate) fn process_memory(pid: u32, detail: MemoryDetail) -> Result<ProcessMemory, Error> {
    let h = ProcessHandle::open(pid)?;
    let c = counters(h.raw(), pid)?;
    let mut unknown = vec![Unknown::new(
        Field::SwapBytes,
        UnknownReason::Unsupported,
        "Windows gives no per-process swap figure (private_bytes is the commit charge)",
    )];
    // A live process always has private bytes; 0 means the system does not keep the counter
    // (Wine), so it is unknown, not zero.
    let private = Some(c.PrivateUsage as u64).filter(|b| *b > 0);
    if private.is_none() {
        unknown.push(Unknown::new(
            Field::PrivateBytes,
            UnknownReason::Unsupported,
            "the system reported 0 private bytes (counter not kept, as under Wine)",
        ));
    }
    if detail == MemoryDetail::WithPss {
        unknown.push(Unknown::new(
            Field::PssBytes,
            UnknownReason::Unsupported,
            "Windows has no proportional set size",
        ));
    }
    Ok(ProcessMemory {
        pid,
        rss_bytes: Some(c.WorkingSetSize as u64),
        peak_rss_bytes: Some(c.PeakWorkingSetSize as u64),
        swap_bytes: None,
        pss_bytes: None,
        private_bytes: private,
        unknown,
    })
}

/// This process's working set (`GetProcessMemoryInfo(GetCurrentProcess())`; no handle to open).
pub(crate) fn own_rss() -> Result<u64, Error> {
    // SAFETY: GetCurrentProcess returns a pseudo-handle that needs no closing.
    let me = unsafe { GetCurrentProcess() };
    Ok(counters(me, std::process::id())?.WorkingSetSize as u64)
}
