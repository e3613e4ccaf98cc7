//! Who a process is: its name and its owner, read from `/proc/<pid>/comm`, `cmdline` and
//! `status` under the proc root.
//!
//! `comm` is cut by the kernel at 15 bytes (`TASK_COMM_LEN` − 1). When a name is exactly that
//! long, the basename of `argv[0]` is used instead if it extends the cut name (so
//! `pt_main_thread` stays itself, but `python3.11-confi` becomes `python3.11-config`); the
//! upstream-compatible API asks the executable's file name first (`NameSource`), one rule
//! (`name_from`) either way. The owner is the effective UID from `status` (what `ps -o user`
//! shows), resolved to a user name through the C library (so LDAP/SSSD users resolve too); a UID
//! without a name stays numeric.
//!
//! A name is bytes ([`ProcessName`]): `comm` and `argv[0]` need not be UTF-8, and a process is
//! never left out — nor its owner unknown — because of its name.

mod cmdline;
mod read;
pub(crate) mod stat;
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
pub use cmdline::{cmdline_args, read_cmdline};

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
    name_from(comm, None, cmdline)
}

/// The name rule (pure): `comm`, unless it is cut (15 bytes or more) and a longer name
/// continues it — the executable's file name when given (without the kernel's ` (deleted)`
/// mark), else `argv[0]`'s basename.
pub(crate) fn name_from(comm: &[u8], exe: Option<&[u8]>, cmdline: &[u8]) -> ProcessName {
    if comm.len() < COMM_MAX {
        return ProcessName::from(comm);
    }
    let exe = exe.map(|e| e.strip_suffix(b" (deleted)").unwrap_or(e));
    let argv0 = cmdline::argv0(cmdline);
    let base = argv0.rsplit(|b| *b == b'/').next().unwrap_or_default();
    let continues = |n: &&[u8]| n.len() > comm.len() && n.starts_with(comm);
    ProcessName::from(
        exe.filter(continues)
            .or(Some(base).filter(continues))
            .unwrap_or(comm),
    )
}

/// Where a cut `comm` may find the rest of a name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NameSource {
    /// `argv[0]`'s basename (this crate's rule).
    Argv0,
    /// The executable's file name first, then `argv[0]`'s basename (upstream hypomnesis 0.2's
    /// documented rule, `compat::gpu::names`).
    ExecutableThenArgv0,
}

/// Reads a process's name. `Ok(None)` when `comm` exists but is empty.
///
/// # Errors
/// [`Error::NotFound`] when the process does not exist, [`Error::PermissionDenied`] when its
/// files are hidden from this user.
pub fn process_name(roots: &Roots, pid: u32) -> Result<Option<ProcessName>, Error> {
    process_name_from(roots, pid, NameSource::Argv0)
}

/// Reads a process's name by [`name_from`], a cut `comm` extended from `source`.
///
/// # Errors
/// As [`process_name`].
pub(crate) fn process_name_from(
    roots: &Roots,
    pid: u32,
    source: NameSource,
) -> Result<Option<ProcessName>, Error> {
    #[cfg(any(windows, target_os = "macos"))]
    if roots.is_system() {
        return native::process_name(pid).map(|n| n.map(ProcessName::from_bytes));
    }
    let comm = fsread::read_bytes(&roots.pid_file(pid, "comm"), Cap::COMM)?;
    let comm = comm.strip_suffix(b"\n").unwrap_or(&comm);
    Ok(name_of_comm(roots, pid, comm, source))
}

/// The name of `pid` whose `comm` is `comm` (read from its `comm` file or its `stat`): `comm`
/// itself, or, when the kernel cut it, extended from `source` ([`name_from`]).
fn name_of_comm(roots: &Roots, pid: u32, comm: &[u8], source: NameSource) -> Option<ProcessName> {
    if comm.is_empty() {
        return None;
    }
    if comm.len() < COMM_MAX {
        return Some(ProcessName::from(comm));
    }
    // Asking for a link's text, not reading a file: `fsread` leaves it to the caller.
    let exe = match source {
        NameSource::Argv0 => None,
        NameSource::ExecutableThenArgv0 => std::fs::read_link(roots.pid_file(pid, "exe"))
            .ok()
            .and_then(|p| Some(p.file_name()?.as_encoded_bytes().to_vec())),
    };
    let cmdline = cmdline::read_for_argv0(roots, pid);
    Some(name_from(comm, exe.as_deref(), &cmdline))
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
        self.identify_named(roots, pid, name)
    }

    /// [`IdentityCache::identify`] for a process whose `comm` was just read (from its `stat`,
    /// where it is the same text): its `comm` file is not read again.
    pub fn identify_with_comm(
        &mut self,
        roots: &Roots,
        pid: u32,
        comm: &ProcessName,
    ) -> ProcessIdentity {
        let name = name_of_comm(roots, pid, comm.as_bytes(), NameSource::Argv0);
        self.identify_named(roots, pid, name)
    }

    fn identify_named(
        &mut self,
        roots: &Roots,
        pid: u32,
        name: Option<ProcessName>,
    ) -> ProcessIdentity {
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
    fn a_cut_comm_is_extended_by_the_executable_first() {
        let comm = b"integration-0a1";
        assert_eq!(
            name_from(comm, Some(b"integration-0a1b2c3d4e5f6789"), b"/x/other\0"),
            "integration-0a1b2c3d4e5f6789"
        );
        assert_eq!(
            name_from(comm, Some(b"integration-0a1b2c (deleted)"), b""),
            "integration-0a1b2c"
        );
        // The executable does not continue the comm: argv[0] may.
        assert_eq!(
            name_from(
                b"python3.11-conf",
                Some(b"python3.11"),
                b"/usr/bin/python3.11-config\0--libs\0"
            ),
            "python3.11-config"
        );
        // Neither continues it (a thread-renamed process): the comm stands.
        assert_eq!(
            name_from(b"pt_main_thread1", Some(b"python3"), b"python3\0"),
            "pt_main_thread1"
        );
        assert_eq!(name_from(b"abcdefghijklmno", None, b""), "abcdefghijklmno");
    }

    #[test]
    fn the_upstream_rule_asks_the_executable_and_ours_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("11");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("comm"), "integration-0a1\n").unwrap();
        std::fs::write(d.join("cmdline"), b"/x/other\0").unwrap();
        hmn_testbed::symlink("/t/integration-0a1b2c3d", d.join("exe")).unwrap();
        let roots = Roots::system().with_proc(dir.path());
        let name = |source| process_name_from(&roots, 11, source).unwrap().unwrap();
        assert_eq!(
            name(NameSource::ExecutableThenArgv0),
            "integration-0a1b2c3d"
        );
        assert_eq!(name(NameSource::Argv0), "integration-0a1");
        assert_eq!(
            process_name(&roots, 11).unwrap().unwrap(),
            "integration-0a1"
        );
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
    fn a_comm_read_from_stat_gives_the_identity_the_comm_file_gives() {
        let dir = tempfile::tempdir().unwrap();
        let status = b"Name:\tx\nUid:\t1000\t1000\t1000\t1000\nNSpid:\t7\t3\n";
        for (pid, comm, cmdline) in [
            (7u32, &b"python3"[..], &b"python3\0train.py\0"[..]),
            (8, b"pt_data_worker0", b"/opt/pt_data_worker0_long\0"),
        ] {
            let d = dir.path().join(pid.to_string());
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("comm"), [comm, b"\n"].concat()).unwrap();
            std::fs::write(d.join("cmdline"), cmdline).unwrap();
            std::fs::write(d.join("status"), status).unwrap();
            let roots = Roots::system().with_proc(dir.path());
            let mut cache = IdentityCache::new();
            let from_file = cache.identify(&roots, pid);
            // The comm file gone: the name can only come from the `comm` handed in.
            std::fs::remove_file(d.join("comm")).unwrap();
            let from_stat = cache.identify_with_comm(&roots, pid, &ProcessName::from(comm));
            assert_eq!(from_stat, from_file, "pid {pid}");
            assert!(from_stat.name.is_some() && from_stat.uid == Some(1000));
        }
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
