//! Processes on Windows (FFI): the list (one Toolhelp snapshot: pid, parent pid, executable
//! name), each process's start time (`GetProcessTimes` creation time) and working set, and its
//! name (`QueryFullProcessImageNameW`, then the snapshot's `szExeFile`).
//!
//! A process's [`Stat`] here: `comm` = the executable's file name (`python.exe`), `state` =
//! `'R'` (Windows has no such letter; a listed process is alive), `ppid` = the snapshot's
//! parent pid (which Windows does not clear when the parent exits: a reused parent pid is
//! told apart by start time, as on Linux), `start_time` = the creation time in 100 ns units
//! since 1601 (the identity key; not clock ticks after boot), `rss_pages` = the working set in
//! 4 KiB pages. A process this user may not open (`System`, `csrss.exe`) has no start time
//! and is skipped from the tables, as a vanished one is.

use std::path::PathBuf;

use windows::Win32::Foundation::{CloseHandle, FILETIME, HANDLE};
use windows::Win32::System::Diagnostics::ToolHelp::{
    CreateToolhelp32Snapshot, PROCESSENTRY32W, Process32FirstW, Process32NextW, TH32CS_SNAPPROCESS,
};
use windows::Win32::System::ProcessStatus::{GetProcessMemoryInfo, PROCESS_MEMORY_COUNTERS};
use windows::Win32::System::Threading::{
    GetProcessTimes, PROCESS_NAME_WIN32, QueryFullProcessImageNameW,
};
use windows::core::PWSTR;

use super::stat::Stat;
use crate::system::host::windows::{ProcessHandle, win_error};
use crate::types::ProcessName;
use crate::types::error::Error;

/// One Toolhelp row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub pid: u32,
    pub ppid: u32,
    pub exe: String,
}

/// UTF-16 up to the first NUL, lossily (pure).
pub(crate) fn from_wide(w: &[u16]) -> String {
    let end = w.iter().position(|c| *c == 0).unwrap_or(w.len());
    String::from_utf16_lossy(w.get(..end).unwrap_or_default())
}

/// The last path component of a Windows or POSIX path (pure).
pub(crate) fn basename(path: &str) -> &str {
    path.rsplit(['\\', '/']).next().unwrap_or(path)
}

/// A Toolhelp snapshot handle, closed on drop.
struct Snapshot(HANDLE);

impl Drop for Snapshot {
    fn drop(&mut self) {
        // SAFETY: the handle came from CreateToolhelp32Snapshot and is closed only here.
        let _ = unsafe { CloseHandle(self.0) };
    }
}

/// Every process, from one Toolhelp snapshot.
///
/// # Errors
/// The `CreateToolhelp32Snapshot` failure.
pub(crate) fn list() -> Result<Vec<Entry>, Error> {
    // SAFETY: plain flags; the handle is owned by `snap` and closed once.
    let snap = Snapshot(
        unsafe { CreateToolhelp32Snapshot(TH32CS_SNAPPROCESS, 0) }
            .map_err(|e| win_error("CreateToolhelp32Snapshot".to_string(), &e))?,
    );
    let mut e = PROCESSENTRY32W {
        dwSize: std::mem::size_of::<PROCESSENTRY32W>() as u32,
        ..Default::default()
    };
    let mut out = Vec::new();
    // SAFETY: `e` is a live PROCESSENTRY32W with dwSize set; the snapshot handle is live.
    let mut ok = unsafe { Process32FirstW(snap.0, &raw mut e) }.is_ok();
    while ok {
        out.push(Entry {
            pid: e.th32ProcessID,
            ppid: e.th32ParentProcessID,
            exe: from_wide(&e.szExeFile),
        });
        // SAFETY: as above.
        ok = unsafe { Process32NextW(snap.0, &raw mut e) }.is_ok();
    }
    Ok(out)
}

/// The creation time of an open process (100 ns units since 1601).
fn start_time(h: &ProcessHandle, pid: u32) -> Result<u64, Error> {
    let (mut created, mut exited, mut kernel, mut user) = (
        FILETIME::default(),
        FILETIME::default(),
        FILETIME::default(),
        FILETIME::default(),
    );
    // SAFETY: four live, writable FILETIMEs; the handle is live (owned by `h`).
    unsafe {
        GetProcessTimes(
            h.raw(),
            &raw mut created,
            &raw mut exited,
            &raw mut kernel,
            &raw mut user,
        )
    }
    .map_err(|e| win_error(format!("GetProcessTimes(pid {pid})"), &e))?;
    Ok((u64::from(created.dwHighDateTime) << 32) | u64::from(created.dwLowDateTime))
}

/// The working set of an open process, in bytes.
fn working_set(h: &ProcessHandle, pid: u32) -> Result<u64, Error> {
    let mut c = PROCESS_MEMORY_COUNTERS {
        cb: std::mem::size_of::<PROCESS_MEMORY_COUNTERS>() as u32,
        ..Default::default()
    };
    // SAFETY: `c` is a live PROCESS_MEMORY_COUNTERS whose `cb` states its size.
    unsafe { GetProcessMemoryInfo(h.raw(), &raw mut c, c.cb) }
        .map_err(|e| win_error(format!("GetProcessMemoryInfo(pid {pid})"), &e))?;
    Ok(c.WorkingSetSize as u64)
}

/// The [`Stat`] of a listed process (see the module docs for the meaning of each field).
pub(crate) fn stat_of(e: &Entry) -> Result<Stat, Error> {
    let h = ProcessHandle::open(e.pid)?;
    Ok(Stat {
        pid: e.pid,
        comm: ProcessName::from_bytes(e.exe.as_bytes()),
        state: 'R',
        ppid: e.ppid,
        flags: 0,
        start_time: start_time(&h, e.pid)?,
        rss_pages: working_set(&h, e.pid)? / 4096,
    })
}

/// The [`Stat`] of one pid (a snapshot, then its handle).
///
/// # Errors
/// [`Error::NotFound`] when no such process is listed; the handle's errors.
pub(crate) fn read_stat(pid: u32) -> Result<Stat, Error> {
    let all = list()?;
    let e = all
        .iter()
        .find(|e| e.pid == pid)
        .ok_or_else(|| Error::NotFound {
            path: PathBuf::from(format!("process {pid}")),
        })?;
    stat_of(e)
}

/// The [`Stat`] of every process that can be opened (one snapshot).
///
/// # Errors
/// The snapshot's failure.
pub(crate) fn all_stats() -> Result<Vec<Stat>, Error> {
    Ok(list()?.iter().filter_map(|e| stat_of(e).ok()).collect())
}

/// A process's image name: the basename of `QueryFullProcessImageNameW`, else the snapshot's
/// `szExeFile` (a process this user may not open); PID 4 is `[kernel]` (it has no image).
///
/// # Errors
/// [`Error::NotFound`] when the pid is not listed.
pub(crate) fn process_name(pid: u32) -> Result<Option<String>, Error> {
    if pid == 4 {
        return Ok(Some("[kernel]".to_string()));
    }
    if let Ok(h) = ProcessHandle::open(pid) {
        let mut buf = [0u16; 1024];
        let mut len = buf.len() as u32;
        // SAFETY: `buf` is a live buffer of `len` UTF-16 units; the API writes at most `len`
        // and stores the written length back.
        let ok = unsafe {
            QueryFullProcessImageNameW(
                h.raw(),
                PROCESS_NAME_WIN32,
                PWSTR(buf.as_mut_ptr()),
                &raw mut len,
            )
        }
        .is_ok();
        if ok {
            let full = from_wide(buf.get(..len as usize).unwrap_or_default());
            let name = basename(&full);
            if !name.is_empty() {
                return Ok(Some(name.to_string()));
            }
        }
    }
    match list()?.into_iter().find(|e| e.pid == pid) {
        Some(e) if e.exe.is_empty() => Ok(None),
        Some(e) => Ok(Some(e.exe)),
        None => Err(Error::NotFound {
            path: PathBuf::from(format!("process {pid}")),
        }),
    }
}

/// Whether `pid` is listed (upstream's rule on Windows: the Toolhelp snapshot contains it);
/// `None` when the snapshot fails.
pub(crate) fn exists(pid: u32) -> Option<bool> {
    list().ok().map(|all| all.iter().any(|e| e.pid == pid))
}
