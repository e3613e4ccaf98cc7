//! Host memory: the machine's RAM ([`HostMemory`]) and any process's RSS, peak RSS, swap and,
//! on request, PSS ([`ProcessMemory`]).
//!
//! The parsers live in [`parse`]; this module is the I/O edge. Costs differ by orders of
//! magnitude, so the cheap sources are the defaults:
//!
//! | Figure | File | Cost |
//! |---|---|---|
//! | own RSS | `/proc/self/statm` | one small read (O(1) counters) |
//! | RSS, peak RSS, swap of a pid | `/proc/<pid>/status` | one read (~55 lines of text) |
//! | PSS | `/proc/<pid>/smaps_rollup` | walks every mapping under the target's mmap lock: only when asked ([`MemoryDetail::WithPss`]) |
//! | RAM total / available | `/proc/meminfo` | one read |
//!
//! A pid that has exited is [`Error::NotFound`]; one this user may not read is
//! [`Error::PermissionDenied`].
//!
//! Platform seam: on Windows and macOS, the system [`Roots`] ([`Roots::is_system`]) are read
//! through the platform's own calls (`windows.rs`: `GlobalMemoryStatusEx`,
//! `GetProcessMemoryInfo`; `macos.rs`: `host_statistics64`, `proc_pid_rusage`); a proc root
//! named explicitly (a fixture, a mounted Linux `/proc`) is read as procfs on every platform.

#[cfg(target_os = "macos")]
#[allow(unsafe_code)]
pub(crate) mod macos;
mod memory;
pub mod parse;
#[cfg(windows)]
#[allow(unsafe_code)]
pub(crate) mod windows;
#[cfg(target_os = "macos")]
use macos as native;
#[cfg(windows)]
use windows as native;

use std::fs::File;
use std::path::PathBuf;

use crate::system::fsread::{self, Cap};
use crate::system::kept::Kept;
use crate::system::roots::{Roots, SystemInfo};
use crate::types::error::Error;
use crate::types::{Field, Unknown, UnknownReason};

pub use memory::{HostMemory, MemoryDetail, ProcessMemory};

/// Reads `/proc/meminfo` under `roots`.
///
/// # Errors
/// [`Error::NotFound`] / [`Error::PermissionDenied`] / [`Error::Io`] when the file cannot be
/// read, [`Error::Parse`] when `MemTotal` or `MemFree` is missing or malformed.
pub fn host_memory(roots: &Roots) -> Result<HostMemory, Error> {
    #[cfg(any(windows, target_os = "macos"))]
    if roots.is_system() {
        return native::host_memory();
    }
    let m = fsread::read_parsed(
        &roots.proc.join("meminfo"),
        Cap::MEMINFO,
        parse::parse_meminfo,
    )?;
    Ok(from_meminfo(&m))
}

/// `/proc/meminfo` kept open for a caller that reads it again and again (a [`crate::Probe`]):
/// one `pread` per reading ([`Kept`]).
#[derive(Debug)]
pub(crate) struct KeptMeminfo {
    file: Kept,
    /// The system roots on Windows/macOS: the platform's own call, not procfs.
    #[cfg(any(windows, target_os = "macos"))]
    native: bool,
}

impl KeptMeminfo {
    pub(crate) fn new(roots: &Roots) -> KeptMeminfo {
        KeptMeminfo {
            file: Kept::new(roots.proc.join("meminfo"), Cap::MEMINFO),
            #[cfg(any(windows, target_os = "macos"))]
            native: roots.is_system(),
        }
    }

    /// As [`host_memory`].
    ///
    /// # Errors
    /// As [`host_memory`].
    pub(crate) fn read(&self) -> Result<HostMemory, Error> {
        #[cfg(any(windows, target_os = "macos"))]
        if self.native {
            return native::host_memory();
        }
        let path = self.file.path();
        let text = String::from_utf8(self.file.read()?).map_err(|_| {
            Error::from_io(
                path,
                std::io::Error::new(std::io::ErrorKind::InvalidData, "meminfo is not UTF-8"),
            )
        })?;
        let m = parse::parse_meminfo(&text).map_err(|e| e.at(path))?;
        Ok(from_meminfo(&m))
    }
}

fn from_meminfo(m: &parse::Meminfo) -> HostMemory {
    HostMemory {
        memory_total_bytes: m.total_bytes,
        memory_available_bytes: m.available_bytes.unwrap_or(m.free_bytes),
        memory_free_bytes: m.free_bytes,
        swap_total_bytes: m.swap_total_bytes,
        swap_free_bytes: m.swap_free_bytes,
    }
}

/// Reads one process's memory.
///
/// # Errors
/// [`Error::NotFound`] when the process does not exist (or exited), [`Error::PermissionDenied`]
/// when its `status` may not be read (a `hidepid` mount), [`Error::Parse`] on a malformed file.
/// A PSS read refused for permission is not an error: `pss_bytes` is `None` and `unknown` says
/// why.
pub fn process_memory(
    roots: &Roots,
    pid: u32,
    detail: MemoryDetail,
) -> Result<ProcessMemory, Error> {
    #[cfg(any(windows, target_os = "macos"))]
    if roots.is_system() {
        return native::process_memory(pid, detail);
    }
    let st = fsread::read_pid_file(roots, pid, "status", parse::parse_status)?;
    let mut mem = ProcessMemory {
        pid,
        rss_bytes: st.vm_rss_bytes,
        peak_rss_bytes: st.vm_hwm_bytes,
        swap_bytes: st.vm_swap_bytes,
        pss_bytes: None,
        private_bytes: None,
        unknown: Vec::new(),
    };
    if mem.rss_bytes.is_none() {
        mem.unknown.push(Unknown::new(
            Field::RssBytes,
            UnknownReason::Unsupported,
            "no VmRSS line (kernel thread, or the process is exiting)",
        ));
    }
    if detail == MemoryDetail::WithPss {
        match fsread::read_pid_file(roots, pid, "smaps_rollup", parse::parse_smaps_rollup) {
            Ok(r) => {
                mem.pss_bytes = r.pss_bytes;
                if r.pss_bytes.is_none() {
                    mem.unknown.push(Unknown::new(
                        Field::PssBytes,
                        UnknownReason::Unsupported,
                        "smaps_rollup has no Pss line",
                    ));
                }
            }
            Err(Error::PermissionDenied { path }) => mem.unknown.push(Unknown::new(
                Field::PssBytes,
                UnknownReason::PermissionDenied,
                format!("{} needs ptrace access to the process", path.display()),
            )),
            Err(e @ Error::NotFound { .. }) if !roots.pid_dir(pid).exists() => return Err(e),
            Err(Error::NotFound { .. }) => mem.unknown.push(Unknown::new(
                Field::PssBytes,
                UnknownReason::Unsupported,
                "no smaps_rollup (Linux older than 4.14)",
            )),
            Err(e) => return Err(e),
        }
    }
    Ok(mem)
}

/// The own process's `statm`, kept open: each reading is one `pread` at offset 0 (procfs
/// regenerates a seq_file when it is read from the start), instead of open + read + close.
///
/// The open file belongs to the process that opened it; after a `fork` the child's pid differs
/// and it falls back to opening the file per call, so it never reads its parent's figure.
#[derive(Debug)]
pub(crate) struct SelfStatm {
    path: PathBuf,
    open: std::sync::OnceLock<Option<(u32, File)>>,
    /// The system roots on Windows/macOS: the platform's own call, not procfs.
    #[cfg(any(windows, target_os = "macos"))]
    native: bool,
}

impl SelfStatm {
    pub(crate) fn new(roots: &Roots) -> SelfStatm {
        SelfStatm {
            path: roots.proc.join("self").join("statm"),
            open: std::sync::OnceLock::new(),
            #[cfg(any(windows, target_os = "macos"))]
            native: roots.is_system(),
        }
    }

    /// This process's resident set size in bytes.
    pub(crate) fn rss_bytes(&self, sys: SystemInfo) -> Result<u64, Error> {
        #[cfg(any(windows, target_os = "macos"))]
        if self.native {
            return native::own_rss();
        }
        let me = std::process::id();
        let cached = self
            .open
            .get_or_init(|| fsread::open(&self.path).ok().map(|f| (me, f)));
        let mut buf = [0u8; 256];
        let len = match cached {
            Some((pid, file)) if *pid == me => fsread::read_at_start(file, &mut buf, &self.path)?,
            _ => fsread::read_at_start(&fsread::open(&self.path)?, &mut buf, &self.path)?,
        };
        let text = buf.get(..len).unwrap_or_default();
        let pages = parse::statm_resident_pages(text).map_err(|e| e.at(&self.path))?;
        Ok(pages.saturating_mul(sys.page_size))
    }
}

/// Serialises the unit tests that measure this process's RSS (which every thread shares) with
/// those that move it by megabytes.
#[cfg(test)]
pub(crate) static RSS_TEST_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cached_statm_is_read_fresh_each_time() {
        // A fixture root: the file is rewritten in place between two readings through the one
        // cached descriptor, which must see the new content (deterministic, whatever else the
        // test binary's threads do to its RSS).
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("self")).unwrap();
        let file = dir.path().join("self/statm");
        std::fs::write(&file, "1000 50 10 1 0 100 0\n").unwrap();
        let roots = Roots::system().with_proc(dir.path());
        let statm = SelfStatm::new(&roots);
        let sys = SystemInfo::current();
        assert_eq!(statm.rss_bytes(sys).unwrap(), 50 * sys.page_size);
        let mut f = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
        std::io::Write::write_all(&mut f, b"1000 70 10 1 0 100 0\n").unwrap();
        drop(f);
        assert_eq!(statm.rss_bytes(sys).unwrap(), 70 * sys.page_size);
    }

    #[test]
    fn own_rss_from_the_live_proc() {
        let roots = Roots::system();
        let statm = SelfStatm::new(&roots);
        let sys = SystemInfo::current();
        let rss = statm.rss_bytes(sys).unwrap();
        assert!(rss > 0);
        let mem = process_memory(&roots, std::process::id(), MemoryDetail::WithPss).unwrap();
        let status_rss = mem.rss_bytes.unwrap();
        assert!(
            mem.peak_rss_bytes.unwrap() >= status_rss,
            "one reading of status"
        );
        assert!(mem.pss_bytes.unwrap() > 0);
        // statm and status count the same pages. Other test threads move this process's RSS
        // at any time, so the two are compared only between two equal statm readings (no
        // change seen around the status read); a machine too busy for that in 1000 tries
        // leaves the comparison out rather than guess.
        for _ in 0..1000 {
            let before = statm.rss_bytes(sys).unwrap();
            let status = process_memory(&roots, std::process::id(), MemoryDetail::Basic)
                .unwrap()
                .rss_bytes
                .unwrap();
            if statm.rss_bytes(sys).unwrap() == before {
                // The kernel's per-thread counter caches may lag by a few pages each.
                assert!(status.abs_diff(before) < 8 << 20, "{status} vs {before}");
                return;
            }
        }
    }

    #[test]
    fn a_vanished_pid_is_not_found() {
        let dir = tempfile::tempdir().unwrap();
        let roots = Roots::system().with_proc(dir.path());
        let err = process_memory(&roots, 4_000_000, MemoryDetail::Basic).unwrap_err();
        assert!(err.is_not_found(), "{err}");
    }

    #[test]
    fn host_memory_from_a_fixture() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("meminfo"),
            include_str!("../../../tests/fixtures/proc/meminfo-6.18.txt"),
        )
        .unwrap();
        let h = host_memory(&Roots::system().with_proc(dir.path())).unwrap();
        assert_eq!(h.memory_total_bytes, 24_684_084 * 1024);
        assert_eq!(h.memory_available_bytes, 24_444_784 * 1024);
    }

    #[test]
    fn malformed_meminfo_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("meminfo"), "MemTotal: lots\n").unwrap();
        let err = host_memory(&Roots::system().with_proc(dir.path())).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("meminfo:1"), "{msg}");
    }
}
