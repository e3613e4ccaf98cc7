//! The walk over `/proc` that finds DRM clients: one readdir of the proc root, one readdir and
//! one `readlinkat` per fd of each process, and an fdinfo read only for fds whose link names a
//! DRM or accel node (`/dev/dri/…`, `/dev/accel/…`). Classifying by link text, not by `stat`,
//! keeps the walk to the minimum syscalls and lets fixture trees stand in for `/proc`.
//!
//! A process whose `fd/` cannot be listed is *hidden* (counted, not reported one by one) when it
//! could hold a DRM client at all ([`could_hold_a_client`]): a kernel thread has no file
//! descriptors of its own and a zombie has closed them, so an unprivileged user's count is not
//! inflated by every kernel thread on the machine. A process or fd that vanishes during the walk
//! is skipped silently.

use crate::system::fsread;
use crate::system::kept::KeptFiles;
use crate::system::roots::Roots;
use crate::types::UnknownReason;
use crate::types::error::Error;

/// One fd that refers to a DRM or accel node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NodeFd {
    pub pid: u32,
    pub fd: u32,
    /// The node's name (`renderD128`, `card1`, `accel0`).
    pub node: String,
}

/// The result of a walk.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FdIndex {
    pub fds: Vec<NodeFd>,
    /// Processes whose `fd/` could not be listed (permission).
    pub hidden: u32,
    /// Processes walked.
    pub processes: u32,
}

/// The node name of a DRM/accel device path, if it is one.
pub(crate) fn node_of(link: &[u8]) -> Option<&str> {
    let rest = link
        .strip_prefix(b"/dev/dri/")
        .or_else(|| link.strip_prefix(b"/dev/accel/"))?;
    let name = std::str::from_utf8(rest).ok()?;
    super::sysfs::is_node_name(name).then_some(name)
}

/// Walks every process under the proc root.
pub(crate) fn build_index(roots: &Roots) -> FdIndex {
    let mut index = FdIndex::default();
    let Ok(mut proc_dir) = fsread::open_dir(&roots.proc) else {
        return index;
    };
    for pid in fsread::numeric_entries(&mut proc_dir) {
        index.processes += 1;
        let path = format!("{pid}/fd");
        let mut fd_dir = match fsread::open_dir_at(&proc_dir, &roots.proc, &path) {
            Ok(d) => d,
            Err(Error::PermissionDenied { .. }) => {
                if could_hold_a_client(roots, pid) {
                    index.hidden += 1;
                }
                continue;
            }
            Err(_) => continue, // vanished (ENOENT/ESRCH) or not a process directory
        };
        for fd in fsread::numeric_entries(&mut fd_dir) {
            let Ok(link) = fsread::read_link_at(&fd_dir, fd.to_string().as_str()) else {
                continue; // closed meanwhile
            };
            if let Some(node) = node_of(&link) {
                index.fds.push(NodeFd {
                    pid,
                    fd,
                    node: node.to_string(),
                });
            }
        }
    }
    index
}

/// Whether a process whose `fd/` this user may not list could hold a DRM client, from its
/// `stat` (readable by every user): not a kernel thread (`PF_KTHREAD`: no file descriptors of
/// its own) and not exited (a zombie's files are closed). When `stat` cannot be read either,
/// it could.
pub(crate) fn could_hold_a_client(roots: &Roots, pid: u32) -> bool {
    crate::system::process::tree::read_stat(roots, pid)
        .map_or(true, |st| !st.is_kernel_thread() && !st.has_exited())
}

/// What reading one fdinfo gave.
#[derive(Debug)]
pub(crate) enum FdinfoRead {
    Text(String),
    /// The process or fd is gone.
    Gone,
    /// Not readable by this user.
    Denied,
    /// Refused unread, or unreadable: larger than [`fsread::Cap::FDINFO`]
    /// ([`UnknownReason::TooLarge`]), not a regular file or an I/O error
    /// ([`UnknownReason::Unreadable`]); the detail names the file.
    Refused(UnknownReason, String),
}

/// Reads `<proc>/<pid>/fdinfo/<fd>` (at most `kept`'s cap, [`fsread::Cap::FDINFO`]) through
/// `kept`, which keeps it open for the next query.
pub(crate) fn read_fdinfo(
    roots: &Roots,
    pid: u32,
    fd: u32,
    kept: &mut KeptFiles<(u32, u32)>,
) -> FdinfoRead {
    // Bytes, decoded lossily: a client name set by userspace need not be UTF-8.
    match kept.read(&(pid, fd), || roots.proc.join(format!("{pid}/fdinfo/{fd}"))) {
        Ok(b) => FdinfoRead::Text(String::from_utf8_lossy(&b).into_owned()),
        Err(Error::PermissionDenied { .. }) => FdinfoRead::Denied,
        Err(Error::NotFound { .. }) => FdinfoRead::Gone,
        Err(e @ Error::TooLarge { .. }) => {
            FdinfoRead::Refused(UnknownReason::TooLarge, e.to_string())
        }
        Err(e) => FdinfoRead::Refused(UnknownReason::Unreadable, e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_links() {
        assert_eq!(node_of(b"/dev/dri/renderD128"), Some("renderD128"));
        assert_eq!(node_of(b"/dev/dri/card1"), Some("card1"));
        assert_eq!(node_of(b"/dev/accel/accel0"), Some("accel0"));
        assert_eq!(node_of(b"/dev/dri/by-path/pci-0000:03:00.0-render"), None);
        assert_eq!(node_of(b"/dev/null"), None);
        assert_eq!(node_of(b"socket:[12345]"), None);
        assert_eq!(node_of(b"/dev/nvidia0"), None);
    }

    #[test]
    fn kernel_threads_and_zombies_hold_no_client() {
        let dir = tempfile::tempdir().unwrap();
        let stat = |pid: u32, state: char, flags: u64| {
            let d = dir.path().join(pid.to_string());
            std::fs::create_dir_all(&d).unwrap();
            let text =
                format!("{pid} (p) {state} 2 0 0 0 -1 {flags} 0 0 0 0 0 0 0 0 20 0 1 0 100 0 0\n");
            std::fs::write(d.join("stat"), text).unwrap();
        };
        stat(2, 'S', 0x0020_8040); // kthreadd
        stat(3, 'Z', 0x0040_4044); // a zombie
        stat(4, 'S', 0x0040_0100); // a user process
        let roots = Roots::system().with_proc(dir.path());
        assert!(!could_hold_a_client(&roots, 2));
        assert!(!could_hold_a_client(&roots, 3));
        assert!(could_hold_a_client(&roots, 4));
        assert!(could_hold_a_client(&roots, 5), "no stat: it could");
    }

    #[test]
    fn the_live_proc_is_walked() {
        let index = build_index(&Roots::system());
        assert!(index.processes > 0);
    }
}
