//! Transient cgroups never outlive their run: what is left in one is moved out, and one whose
//! run was killed is removed by the next.
//!
//! - [`PeakCgroup::remove_moving_leftovers`]: at the end of a run, the processes still in the
//!   group (a daemon the command started, which left the tree but not the group) are moved to
//!   the group's parent — the group the caller itself is in, where they would have been without
//!   it — and the group is removed. Nothing is killed.
//! - [`remove_stale`]: a group `<prefix><pid>` beside where [`PeakCgroup::create`] makes one,
//!   whose pid names no live process in the proc root (or one that started at another time than
//!   the name records: [`transient_name`]), belonged to a run whose owner was killed
//!   (`SIGKILL`, a crash) before it could remove it: its processes are moved out the same way
//!   and it is removed. Only groups in the caller's own cgroup are looked at, and only names
//!   made of the prefix and a pid; a group whose owner is alive is never touched.

use std::path::{Path, PathBuf};

use super::lines::{parse_proc_cgroup, v1_memory_path, v2_path};
use super::peak::{CgroupError, PeakCgroup, v2_root};
use crate::system::fsread::{self, Cap};
use crate::system::process::stat::parse_stat_bytes;
use crate::system::roots::Roots;

/// Rounds of moving a group's processes out: a process that forks while it is moved may leave
/// a child behind, moved by the next round.
const ROUNDS: usize = 4;

/// A stale group that was removed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StaleCgroup {
    /// The group's directory (gone now).
    pub dir: PathBuf,
    /// The pid in its name: its owner, no longer running.
    pub owner: u32,
    /// Processes moved out of it to its parent.
    pub moved: usize,
}

impl PeakCgroup {
    /// Removes the group after moving the processes still in it to its parent — the group the
    /// caller itself is in, where they would have been without it (a daemon the command
    /// started leaves the tree but not the group); nothing is killed. Returns how many were
    /// moved.
    ///
    /// # Errors
    /// [`CgroupError::Remove`] when the group cannot be removed (a process could not be moved:
    /// no permission, or it kept forking).
    pub fn remove_moving_leftovers(self) -> Result<usize, CgroupError> {
        evacuate_and_remove(&self.dir)
    }
}

/// Moves every process in `dir` to its parent group and removes `dir`.
fn evacuate_and_remove(dir: &Path) -> Result<usize, CgroupError> {
    let remove_error = |source| CgroupError::Remove {
        dir: dir.to_path_buf(),
        source,
    };
    let parent_procs = dir
        .parent()
        .map(|p| p.join("cgroup.procs"))
        .ok_or_else(|| remove_error(std::io::Error::other("a group without a parent")))?;
    let mut moved = 0;
    for _ in 0..ROUNDS {
        let pids = procs(dir);
        if pids.is_empty() {
            break;
        }
        for pid in pids {
            if write_in_place(&parent_procs, pid.to_string().as_bytes()).is_ok() {
                moved += 1;
            }
        }
    }
    std::fs::remove_dir(dir).map_err(remove_error)?;
    Ok(moved)
}

/// The pids in a group's `cgroup.procs` (none when it cannot be read).
fn procs(dir: &Path) -> Vec<u32> {
    fsread::read_string(&dir.join("cgroup.procs"), Cap::CGROUP_PROCS)
        .map(|t| {
            t.split_ascii_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Writes a kernel file in place: never created, truncated or reached through a link.
#[cfg(not(unix))]
fn write_in_place(_path: &Path, _bytes: &[u8]) -> std::io::Result<()> {
    // Platform seam: cgroups are Linux-only; nothing creates one elsewhere.
    Err(std::io::ErrorKind::Unsupported.into())
}

/// Writes a kernel file in place: never created, truncated or reached through a link.
#[cfg(unix)]
fn write_in_place(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)
        .and_then(|mut f| f.write_all(bytes))
}

/// The groups the caller is in, where [`PeakCgroup::create`] makes its groups: the cgroup v2
/// one and the cgroup v1 memory one, those that exist.
fn own_groups(roots: &Roots) -> Vec<PathBuf> {
    let Ok(own) = fsread::read_string(&roots.proc.join("self/cgroup"), Cap::PROC_CGROUP) else {
        return Vec::new();
    };
    let lines = parse_proc_cgroup(&own);
    let mut out = Vec::new();
    if let (Some(root), Some(path)) = (v2_root(roots), v2_path(&lines)) {
        out.push(root.join(path.trim_start_matches('/')));
    }
    if let Some(path) = v1_memory_path(&lines) {
        out.push(
            roots
                .sys
                .join("fs/cgroup/memory")
                .join(path.trim_start_matches('/')),
        );
    }
    out.retain(|p| p.is_dir());
    out
}

/// The name of a transient group this process makes: `<prefix><pid>-<start>`, its pid and its
/// start time (clock ticks after boot, `stat`'s field 22), so a later run can tell this
/// process from one that reuses its pid; `<prefix><pid>` where the start time cannot be read.
pub fn transient_name(roots: &Roots, prefix: &str) -> String {
    let me = std::process::id();
    match start_of(roots, me) {
        Some(start) => format!("{prefix}{me}-{start}"),
        None => format!("{prefix}{me}"),
    }
}

/// A process's start time (`stat`'s field 22), when its `stat` can be read. (Read here, not
/// through `process::tree::read_stat`, which would close a circle of files through `pidns`.)
fn start_of(roots: &Roots, pid: u32) -> Option<u64> {
    fsread::read_pid_bytes(roots, pid, "stat", parse_stat_bytes)
        .ok()
        .map(|s| s.start_time)
}

/// The owner in a group name `<prefix><pid>` or `<prefix><pid>-<start ticks>` (pure): its pid
/// and, in the second form, its start time.
fn owner_of(name: &str, prefix: &str) -> Option<(u32, Option<u64>)> {
    let rest = name.strip_prefix(prefix)?;
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    match rest.split_once('-') {
        None if digits(rest) => Some((rest.parse().ok()?, None)),
        Some((pid, start)) if digits(pid) && digits(start) => {
            Some((pid.parse().ok()?, Some(start.parse().ok()?)))
        }
        _ => None,
    }
}

/// Whether the owner a group's name records may still be running: its pid names a process
/// and, where the name records a start time, that process started then (a pid reused by
/// another process is not the owner). A `stat` that cannot be read keeps the group.
fn owner_alive(roots: &Roots, pid: u32, start: Option<u64>) -> bool {
    if !roots.proc.join(pid.to_string()).exists() {
        return false;
    }
    match start {
        Some(t) => start_of(roots, pid).is_none_or(|s| s == t),
        None => true,
    }
}

/// Removes the stale `<prefix><pid>[-<start>]` groups ([`transient_name`]) in the caller's own
/// cgroups — left by a run whose owner was killed (`SIGKILL`, a crash) before it could remove
/// its group: each group whose pid names no process in the proc root, or a process that started
/// at another time than the name records (the pid reused), and is not the caller, after moving
/// its processes to the caller's group. Only names made of the prefix, a pid and optionally a
/// start time are looked at. Best effort: a group that cannot
/// be removed is an error in the list, the others are still removed.
pub fn remove_stale(roots: &Roots, prefix: &str) -> Vec<Result<StaleCgroup, CgroupError>> {
    let me = std::process::id();
    let mut out = Vec::new();
    for parent in own_groups(roots) {
        let Ok(entries) = std::fs::read_dir(&parent) else {
            continue;
        };
        for entry in entries.flatten() {
            let Some((owner, start)) = entry.file_name().to_str().and_then(|n| owner_of(n, prefix))
            else {
                continue;
            };
            let dir = entry.path();
            if owner == me || !dir.is_dir() || owner_alive(roots, owner, start) {
                continue;
            }
            out.push(evacuate_and_remove(&dir).map(|moved| StaleCgroup { dir, owner, moved }));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_are_named_by_a_pid() {
        assert_eq!(owner_of("hmn-run-4242", "hmn-run-"), Some((4242, None)));
        assert_eq!(
            owner_of("hmn-run-4242-123456", "hmn-run-"),
            Some((4242, Some(123_456)))
        );
        for other in [
            "hmn-run-",
            "hmn-run-12a",
            "hmn-run--1",
            "hmn-run-99999999999",
            "session.scope",
            "hmn-run-4242/x",
            "hmn-run-12-",
            "hmn-run-12-3a",
            "hmn-run-1-2-3",
            "hmn-run--12",
        ] {
            assert_eq!(owner_of(other, "hmn-run-"), None, "{other}");
        }
    }

    /// A fixture cgroup tree: the caller is in `<sys>/fs/cgroup/memory/job` (cgroup v1), with
    /// a group per owner pid beside it.
    #[test]
    fn stale_groups_of_dead_owners_are_removed_and_live_ones_kept() {
        let dir = tempfile::tempdir().unwrap();
        let proc = dir.path().join("proc");
        let sys = dir.path().join("sys");
        std::fs::create_dir_all(proc.join("self")).unwrap();
        std::fs::write(proc.join("self/cgroup"), "4:memory:/job\n").unwrap();
        std::fs::create_dir(proc.join("77")).unwrap(); // a live owner
        // A live process that started at tick 5000 (stat's field 22).
        std::fs::create_dir(proc.join("66")).unwrap();
        std::fs::write(
            proc.join("66/stat"),
            "66 (hmn) S 1 66 66 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 5000 1000 100 0 0 0\n",
        )
        .unwrap();
        let job = sys.join("fs/cgroup/memory/job");
        for name in [
            "hmn-run-77",
            "hmn-run-88",
            "other-99",
            "hmn-run-x",
            "hmn-run-66-5000",
            "hmn-run-66-4000",
            "hmn-run-77-1",
        ] {
            std::fs::create_dir_all(job.join(name)).unwrap();
        }
        std::fs::write(job.join("cgroup.procs"), "").unwrap();
        // A plain directory cannot be removed while it holds a file; a cgroup's `cgroup.procs`
        // is the kernel's. Here the stale group is empty, so `rmdir` succeeds.
        let roots = Roots::system().with_proc(&proc).with_sys(&sys);
        let removed = remove_stale(&roots, "hmn-run-");
        let mut owners: Vec<(u32, usize)> = removed
            .iter()
            .map(|r| r.as_ref().map(|s| (s.owner, s.moved)).unwrap())
            .collect();
        owners.sort_unstable();
        // 88 is gone; 66 is alive but started at tick 5000, not 4000: its pid was reused.
        assert_eq!(owners, [(66, 0), (88, 0)], "{removed:?}");
        assert!(!job.join("hmn-run-88").exists());
        assert!(!job.join("hmn-run-66-4000").exists());
        // 77's stat cannot be read: a group that may be a live run's is kept.
        for kept in [
            "hmn-run-77",
            "other-99",
            "hmn-run-x",
            "hmn-run-66-5000",
            "hmn-run-77-1",
        ] {
            assert!(job.join(kept).exists(), "{kept}");
        }
    }
}
