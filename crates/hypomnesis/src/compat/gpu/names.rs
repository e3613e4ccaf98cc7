//! Process existence and names as upstream hypomnesis 0.2 defines them, read from the proc root
//! of the probe ([`crate::Probe::roots`]).
//!
//! - Existence: `<proc>/<pid>/status` is missing → no; readable → its `Tgid` is the pid (a
//!   thread id, whose directory the kernel also serves, reads as no); any other failure →
//!   unknown.
//! - Name: `<proc>/<pid>/comm`; a comm of exactly 15 bytes (the kernel's cut) is extended to
//!   the executable's file name, or else `argv[0]`'s base name, when that name continues it:
//!   the crate's one name rule (`system::process::name_from`), asked to try the executable
//!   first.

use crate::system::fsread::{self, Cap};
use crate::system::process::{NameSource, process_name_from};
use crate::system::roots::Roots;

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
    process_name_from(roots, pid, NameSource::ExecutableThenArgv0)
        .ok()
        .flatten()
        .map(|n| n.to_string_lossy().into_owned())
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
