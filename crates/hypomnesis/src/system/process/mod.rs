//! Who a process is: its name and its owner, read from `/proc/<pid>/comm`, `cmdline` and
//! `status` under the proc root.
//!
//! `comm` is cut by the kernel at 15 bytes (`TASK_COMM_LEN` − 1). When a name is exactly that
//! long, the basename of `argv[0]` is used instead if it extends the cut name (so
//! `pt_main_thread` stays itself, but `python3.11-confi` becomes `python3.11-config`). The owner
//! is the effective UID from `status` (what `ps -o user` shows), resolved to a user name through
//! the C library (so LDAP/SSSD users resolve too); a UID without a name stays numeric.
//!
//! A name is bytes ([`ProcessName`]): `comm` and `argv[0]` need not be UTF-8, and a process is
//! never left out — nor its owner unknown — because of its name.

mod read;
mod stat;
pub mod table;
pub mod tree;
// Platform seam (ARCHITECTURE.md "Platforms"): native process lists where there is no procfs.
#[cfg(windows)]
#[allow(unsafe_code)]
pub mod job;
#[cfg(target_os = "macos")]
#[allow(unsafe_code)]
pub(crate) mod macos;
#[cfg(windows)]
#[allow(unsafe_code)]
pub(crate) mod windows;
#[cfg(target_os = "macos")]
pub(crate) use macos as native;
#[cfg(windows)]
pub(crate) use windows as native;

use std::collections::HashMap;

use crate::system::fsread::{self, Cap};
use crate::system::host::parse;
use crate::system::roots::Roots;
pub use crate::types::ProcessName;
use crate::types::error::Error;

/// The kernel's limit on `comm` (16 bytes including the terminating NUL).
const COMM_MAX: usize = 15;

/// A process's name and owner, as far as they could be read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProcessIdentity {
    /// The process name (see the module docs).
    pub name: Option<ProcessName>,
    /// The effective UID.
    pub uid: Option<u32>,
    /// The user name of `uid`, when it resolves.
    pub user: Option<String>,
    /// The pid in its innermost PID namespace, when it differs from `pid`
    /// ([`crate::pidns::innermost_pid`]; read from the same `status`).
    pub ns_pid: Option<u32>,
}

/// Picks the display name from `comm` and the raw `cmdline` bytes (pure; bytes in, bytes out).
pub fn display_name(comm: &[u8], cmdline: &[u8]) -> ProcessName {
    if comm.len() < COMM_MAX {
        return ProcessName::from(comm);
    }
    let argv0 = cmdline.split(|b| *b == 0).next().unwrap_or_default();
    let base = argv0.rsplit(|b| *b == b'/').next().unwrap_or_default();
    if base.len() > comm.len() && base.starts_with(comm) {
        ProcessName::from(base)
    } else {
        ProcessName::from(comm)
    }
}

/// Reads a process's name. `Ok(None)` when `comm` exists but is empty.
///
/// # Errors
/// [`Error::NotFound`] when the process does not exist, [`Error::PermissionDenied`] when its
/// files are hidden from this user.
pub fn process_name(roots: &Roots, pid: u32) -> Result<Option<ProcessName>, Error> {
    #[cfg(any(windows, target_os = "macos"))]
    if roots.is_system() {
        return native::process_name(pid).map(|n| n.map(ProcessName::from_bytes));
    }
    let comm = fsread::read_bytes(&roots.pid_file(pid, "comm"), Cap::COMM)?;
    let comm = comm.strip_suffix(b"\n").unwrap_or(&comm);
    if comm.is_empty() {
        return Ok(None);
    }
    if comm.len() < COMM_MAX {
        return Ok(Some(ProcessName::from(comm)));
    }
    // Only the start of the command line is read (it can be hundreds of MB); an argv[0] cut
    // by that limit is not used, as its basename would be wrong.
    let mut cmdline = fsread::read_prefix(&roots.pid_file(pid, "cmdline"), Cap::CMDLINE_PREFIX)
        .unwrap_or_default();
    if cmdline.len() as u64 >= Cap::CMDLINE_PREFIX.limit() && !cmdline.contains(&0) {
        cmdline.clear();
    }
    Ok(Some(display_name(comm, &cmdline)))
}

/// Resolves pids to [`ProcessIdentity`], caching UID → user name lookups for one listing.
#[derive(Debug, Default)]
pub struct IdentityCache {
    users: HashMap<u32, Option<String>>,
}

impl IdentityCache {
    /// An empty cache.
    pub fn new() -> Self {
        IdentityCache::default()
    }

    /// Reads what can be read of `pid`; a vanished or hidden process gives an empty identity.
    pub fn identify(&mut self, roots: &Roots, pid: u32) -> ProcessIdentity {
        let name = process_name(roots, pid).ok().flatten();
        // One read of `status` for the owner and the innermost pid.
        let (uid, ns_pid) = fsread::read_pid_file(roots, pid, "status", |t| {
            Ok((
                parse::parse_status(t).ok().and_then(|st| st.uid_effective),
                crate::system::pidns::innermost_of(t, pid),
            ))
        })
        .unwrap_or_default();
        let user = uid.and_then(|u| self.user_name(u));
        ProcessIdentity {
            name,
            uid,
            user,
            ns_pid,
        }
    }

    /// The user name of `uid` (cached), or `None` when the system knows no such user.
    pub fn user_name(&mut self, uid: u32) -> Option<String> {
        self.users
            .entry(uid)
            .or_insert_with(|| user_name_of(uid))
            .clone()
    }
}

/// The user name of `uid` from the system's user database (POSIX); `None` where there is
/// none (Windows: owners are SIDs, not uids).
fn user_name_of(uid: u32) -> Option<String> {
    #[cfg(unix)]
    return nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
        .map(|u| u.name);
    #[cfg(not(unix))]
    return {
        let _ = uid;
        None
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_comm_is_the_name() {
        assert_eq!(
            display_name(b"python3", b"/usr/bin/python3\0train.py\0"),
            "python3"
        );
    }

    #[test]
    fn cut_comm_is_extended_from_argv0() {
        assert_eq!(
            display_name(b"python3.11-conf", b"/usr/bin/python3.11-config\0--libs\0"),
            "python3.11-config"
        );
        // setproctitle-style names without a slash.
        assert_eq!(
            display_name(b"postgres: check", b"postgres: checkpointer\0\0"),
            "postgres: checkpointer"
        );
    }

    #[test]
    fn unrelated_argv0_does_not_replace_comm() {
        // A thread-renamed process: comm is not a prefix of argv[0].
        assert_eq!(
            display_name(b"pt_main_thread1", b"/usr/bin/python3\0"),
            "pt_main_thread1"
        );
        assert_eq!(display_name(b"abcdefghijklmno", b""), "abcdefghijklmno");
    }

    #[test]
    fn a_huge_cmdline_is_read_only_for_its_argv0() {
        let dir = tempfile::tempdir().unwrap();
        let write = |pid: u32, comm: &str, cmdline: &[u8], len: u64| {
            let d = dir.path().join(pid.to_string());
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("comm"), format!("{comm}\n")).unwrap();
            let f = std::fs::File::create(d.join("cmdline")).unwrap();
            std::io::Write::write_all(&mut &f, cmdline).unwrap();
            f.set_len(len).unwrap(); // sparse: NUL-separated empty arguments
        };
        write(
            7,
            "python3.11-conf",
            b"/usr/bin/python3.11-config\0",
            200 << 20,
        );
        // An argv[0] longer than what is read: its cut basename is not used.
        let long = format!("/x/python3.11-conf{}", "g".repeat(20_000));
        write(8, "python3.11-conf", long.as_bytes(), long.len() as u64);
        let roots = Roots::system().with_proc(dir.path());
        assert_eq!(
            process_name(&roots, 7).unwrap().unwrap(),
            "python3.11-config"
        );
        assert_eq!(process_name(&roots, 8).unwrap().unwrap(), "python3.11-conf");
    }

    #[test]
    fn a_name_that_is_not_utf8_keeps_its_bytes_and_its_owner() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("9");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("comm"), b"gpu\xff\xfejob\n").unwrap();
        // `status` shows the name's bytes as they are (only whitespace and `\\` are escaped).
        std::fs::write(
            d.join("status"),
            b"Name:\tgpu\xff\xfejob\nUmask:\t0022\nState:\tS (sleeping)\nUid:\t0\t0\t0\t0\nVmRSS:\t 1024 kB\n",
        )
        .unwrap();
        // A 15-byte comm cut mid-character, extended by argv[0].
        let e = dir.path().join("10");
        std::fs::create_dir_all(&e).unwrap();
        std::fs::write(e.join("comm"), b"worker-abcdef-\xc3\n").unwrap();
        std::fs::write(e.join("cmdline"), b"/srv/worker-abcdef-\xc3\xa9\xff\0-x\0").unwrap();
        let roots = Roots::system().with_proc(dir.path());
        let id = IdentityCache::new().identify(&roots, 9);
        assert_eq!(id.name.unwrap().as_bytes(), b"gpu\xff\xfejob");
        assert_eq!(id.uid, Some(0), "the owner is read despite the name");
        assert_eq!(id.user.as_deref(), Some("root"));
        let name = process_name(&roots, 10).unwrap().unwrap();
        assert_eq!(name.as_bytes(), b"worker-abcdef-\xc3\xa9\xff");
        assert_eq!(name.escaped(), "worker-abcdef-é\\xff");
    }

    #[test]
    fn own_process_identity() {
        let mut cache = IdentityCache::new();
        let id = cache.identify(&Roots::system(), std::process::id());
        assert!(id.name.is_some());
        assert_eq!(id.uid, Some(nix::unistd::geteuid().as_raw()));
        assert_eq!(cache.user_name(0).as_deref(), Some("root"));
    }

    #[test]
    fn vanished_process_has_an_empty_identity() {
        let dir = tempfile::tempdir().unwrap();
        let mut cache = IdentityCache::new();
        let id = cache.identify(&Roots::system().with_proc(dir.path()), 123);
        assert_eq!(id, ProcessIdentity::default());
        assert!(
            process_name(&Roots::system().with_proc(dir.path()), 123)
                .unwrap_err()
                .is_not_found()
        );
    }
}
