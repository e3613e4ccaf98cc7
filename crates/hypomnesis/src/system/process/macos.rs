//! Processes on macOS (FFI, compile-checked from Linux): the list (`proc_listallpids`), each
//! process's parent, start time and short name (`proc_pidinfo(PROC_PIDTBSDINFO)`), its name
//! (the basename of `proc_pidpath`, else `pbi_comm`), and its footprint for the tables.
//!
//! A process's [`Stat`] here: `comm` = `pbi_comm` (cut at 16 bytes), `state` = `'R'`,
//! `ppid` = `pbi_ppid`, `start_time` = the start in µs since the Unix epoch (the identity key;
//! not clock ticks after boot), `rss_pages` = `ri_phys_footprint` in pages. A process the
//! sandbox refuses is skipped from the tables, as a vanished one is.

use std::path::PathBuf;

use super::stat::Stat;
use crate::types::error::Error;

fn not_found(pid: u32) -> Error {
    Error::NotFound {
        path: PathBuf::from(format!("process {pid}")),
    }
}

/// Every pid (`proc_listallpids`, sized with slack and retried once when it filled up).
///
/// # Errors
/// [`Error::PermissionDenied`] when the sandbox refuses the listing.
pub(crate) fn list() -> Result<Vec<u32>, Error> {
    // SAFETY: a null buffer with size 0 asks only for the count.
    let n = unsafe { libc::proc_listallpids(std::ptr::null_mut(), 0) };
    if n <= 0 {
        return Err(Error::from_io(
            "proc_listallpids",
            std::io::Error::last_os_error(),
        ));
    }
    let mut cap = usize::try_from(n).unwrap_or(0).saturating_add(64);
    for _ in 0..2 {
        let mut pids: Vec<libc::pid_t> = vec![0; cap];
        let bytes = i32::try_from(cap * std::mem::size_of::<libc::pid_t>()).unwrap_or(i32::MAX);
        // SAFETY: `pids` is a live buffer of `bytes` bytes.
        let got = unsafe { libc::proc_listallpids(pids.as_mut_ptr().cast(), bytes) };
        let got = usize::try_from(got).unwrap_or(0);
        if got < cap {
            pids.truncate(got);
            return Ok(pids
                .into_iter()
                .filter_map(|p| u32::try_from(p).ok())
                .collect());
        }
        cap = cap.saturating_mul(2);
    }
    Err(Error::from_io(
        "proc_listallpids",
        std::io::Error::other("the process list kept growing"),
    ))
}

/// `proc_pidinfo(PROC_PIDTBSDINFO)`.
fn bsdinfo(pid: u32) -> Result<libc::proc_bsdinfo, Error> {
    let ipid = i32::try_from(pid).map_err(|_| not_found(pid))?;
    // SAFETY: all-zero is a valid proc_bsdinfo (integers and byte arrays).
    let mut info: libc::proc_bsdinfo = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::proc_bsdinfo>() as i32;
    // SAFETY: `info` is a live proc_bsdinfo of `size` bytes, the struct this flavor writes.
    let got = unsafe {
        libc::proc_pidinfo(
            ipid,
            libc::PROC_PIDTBSDINFO,
            0,
            (&raw mut info).cast(),
            size,
        )
    };
    if got != size {
        let err = std::io::Error::last_os_error();
        return Err(match err.raw_os_error() {
            Some(libc::EPERM) => Error::PermissionDenied {
                path: PathBuf::from(format!("proc_pidinfo(pid {pid})")),
            },
            _ => not_found(pid),
        });
    }
    Ok(info)
}

/// A C char array up to its first NUL, lossily (pure).
fn from_c(chars: &[libc::c_char]) -> String {
    let bytes: Vec<u8> = chars
        .iter()
        .take_while(|c| **c != 0)
        .map(|c| *c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The [`Stat`] of one pid.
///
/// # Errors
/// [`Error::NotFound`] / [`Error::PermissionDenied`].
pub(crate) fn read_stat(pid: u32) -> Result<Stat, Error> {
    let b = bsdinfo(pid)?;
    let footprint = crate::system::host::macos::rusage_v4(pid)?.ri_phys_footprint;
    let page = crate::system::roots::SystemInfo::current().page_size.max(1);
    Ok(Stat {
        pid,
        comm: crate::types::ProcessName::from_bytes(from_c(&b.pbi_comm).into_bytes()),
        state: 'R',
        ppid: b.pbi_ppid,
        flags: 0,
        start_time: b
            .pbi_start_tvsec
            .saturating_mul(1_000_000)
            .saturating_add(b.pbi_start_tvusec),
        rss_pages: footprint / page,
    })
}

/// The [`Stat`] of every process that can be read.
///
/// # Errors
/// As [`list`].
pub(crate) fn all_stats() -> Result<Vec<Stat>, Error> {
    Ok(list()?
        .into_iter()
        .filter_map(|pid| read_stat(pid).ok())
        .collect())
}

/// A process's name: the basename of `proc_pidpath`, else `pbi_comm`.
///
/// # Errors
/// [`Error::NotFound`] when the pid does not exist.
pub(crate) fn process_name(pid: u32) -> Result<Option<String>, Error> {
    let ipid = i32::try_from(pid).map_err(|_| not_found(pid))?;
    let mut buf = [0u8; 4096];
    // SAFETY: `buf` is a live buffer of the stated size.
    let n = unsafe { libc::proc_pidpath(ipid, buf.as_mut_ptr().cast(), buf.len() as u32) };
    if let Some(path) = usize::try_from(n)
        .ok()
        .filter(|n| *n > 0)
        .and_then(|n| buf.get(..n))
    {
        let path = String::from_utf8_lossy(path);
        if let Some(base) = path.rsplit('/').next().filter(|b| !b.is_empty()) {
            return Ok(Some(base.to_string()));
        }
    }
    let comm = from_c(&bsdinfo(pid)?.pbi_comm);
    Ok((!comm.is_empty()).then_some(comm))
}

/// Whether `pid` exists: `proc_pidinfo` answers → yes; no such process → no; refused by the
/// sandbox → unknown (`None`).
pub(crate) fn exists(pid: u32) -> Option<bool> {
    match bsdinfo(pid) {
        Ok(_) => Some(true),
        Err(Error::PermissionDenied { .. }) => None,
        Err(_) => Some(false),
    }
}
