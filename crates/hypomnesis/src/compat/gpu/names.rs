//! Process existence and names as upstream hypomnesis 0.2 defines them, read from the proc root
//! of the probe ([`crate::Probe::roots`]).
//!
//! - Existence: `<proc>/<pid>/status` is missing → no; readable → its `Tgid` is the pid (a
//!   thread id, whose directory the kernel also serves, reads as no); any other failure →
//!   unknown.
//! - Name: `<proc>/<pid>/comm`; a comm of exactly 15 bytes (the kernel's cut) is extended to
//!   the executable's file name, or else `argv[0]`'s base name, when that name continues it.

use crate::system::fsread::{self, Cap};
use crate::system::roots::Roots;

/// The kernel's cut of `comm` (16 bytes with the NUL).
const COMM_MAX: usize = 15;

/// Whether `pid` is a running process (not a thread of one); `None` when `/proc` cannot tell.
pub(crate) fn exists(roots: &Roots, pid: u32) -> Option<bool> {
    // Platform seam: the system's own process list on Windows and macOS.
    #[cfg(any(windows, target_os = "macos"))]
    if roots.is_system() {
        return crate::system::process::native::exists(pid);
    }
    // Lossily: the `Name:` line is whatever the process named itself.
    match fsread::read_bytes(&roots.pid_file(pid, "status"), Cap::STATUS) {
        Ok(b) => Some(tgid_of(&String::from_utf8_lossy(&b)).is_none_or(|tgid| tgid == pid)),
        Err(e) if e.is_not_found() => Some(false),
        Err(_) => None,
    }
}

/// The `Tgid:` of a `/proc/<pid>/status` text, when it has a readable one.
pub(crate) fn tgid_of(status: &str) -> Option<u32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
}

/// `pid`'s name (see the module docs), lossy UTF-8 as upstream's `String`; `None` when its
/// `comm` cannot be read or is empty.
pub(crate) fn name_of(roots: &Roots, pid: u32) -> Option<String> {
    #[cfg(any(windows, target_os = "macos"))]
    if roots.is_system() {
        return crate::system::process::native::process_name(pid)
            .ok()
            .flatten();
    }
    let comm = fsread::read_bytes(&roots.pid_file(pid, "comm"), Cap::COMM).ok()?;
    let comm = comm.strip_suffix(b"\n").unwrap_or(&comm);
    if comm.is_empty() {
        return None;
    }
    if comm.len() < COMM_MAX {
        return Some(String::from_utf8_lossy(comm).into_owned());
    }
    let exe = std::fs::read_link(roots.pid_file(pid, "exe"))
        .ok()
        .and_then(|p| Some(p.file_name()?.as_encoded_bytes().to_vec()));
    let cmdline = fsread::read_prefix(&roots.pid_file(pid, "cmdline"), Cap::CMDLINE_PREFIX)
        .unwrap_or_default();
    Some(extended(comm, exe.as_deref(), &cmdline))
}

/// A cut `comm` extended by the executable's file name (without the kernel's ` (deleted)`
/// mark) or, failing that, by `argv[0]`'s base name, whichever first continues it (pure; bytes
/// in, lossy UTF-8 out).
pub(crate) fn extended(comm: &[u8], exe: Option<&[u8]>, cmdline: &[u8]) -> String {
    let exe = exe.map(|e| e.strip_suffix(b" (deleted)").unwrap_or(e));
    match exe {
        Some(e) if e.len() > comm.len() && e.starts_with(comm) => {
            String::from_utf8_lossy(e).into_owned()
        }
        _ => crate::system::process::display_name(comm, cmdline)
            .to_string_lossy()
            .into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tgid_decides_between_process_and_thread() {
        let status = "Name:\tpython3\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t4242\nNgid:\t0\nPid:\t4243\n";
        assert_eq!(tgid_of(status), Some(4242));
        assert_eq!(tgid_of("Name:\tx\n"), None);
        assert_eq!(tgid_of("Tgid:\tnot-a-number\n"), None);
    }

    #[test]
    fn a_cut_comm_is_extended_by_the_executable_first() {
        let comm = b"integration-0a1";
        assert_eq!(
            extended(comm, Some(b"integration-0a1b2c3d4e5f6789"), b"/x/other\0"),
            "integration-0a1b2c3d4e5f6789"
        );
        assert_eq!(
            extended(comm, Some(b"integration-0a1b2c (deleted)"), b""),
            "integration-0a1b2c"
        );
        // The executable does not continue the comm: argv[0] may.
        assert_eq!(
            extended(
                b"python3.11-conf",
                Some(b"python3.11"),
                b"/usr/bin/python3.11-config\0--libs\0"
            ),
            "python3.11-config"
        );
        // Neither continues it (a thread-renamed process): the comm stands.
        assert_eq!(
            extended(b"pt_main_thread1", Some(b"python3"), b"python3\0"),
            "pt_main_thread1"
        );
        assert_eq!(extended(b"abcdefghijklmno", None, b""), "abcdefghijklmno");
    }

    #[test]
    fn the_calling_process_exists_and_has_its_executables_name() {
        let roots = Roots::system();
        let me = std::process::id();
        assert_eq!(exists(&roots, me), Some(true));
        let exe = std::env::current_exe().unwrap();
        let file = exe.file_name().unwrap().to_string_lossy().into_owned();
        assert_eq!(name_of(&roots, me), Some(file));
    }

    #[test]
    fn a_missing_process_does_not_exist_and_has_no_name() {
        let dir = tempfile::tempdir().unwrap();
        let roots = Roots::system().with_proc(dir.path());
        assert_eq!(exists(&roots, 123), Some(false));
        assert_eq!(name_of(&roots, 123), None);
    }
}
