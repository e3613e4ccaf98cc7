//! Process identity and process trees, from `/proc/<pid>/stat`.
//!
//! A pid is reused by the kernel after its process exits, so a process is identified by
//! [`ProcessId`] = (pid, start time in clock ticks since boot): two records with the same pid
//! and different start times are different processes and are never merged. A parent link is
//! the same: a process is the child of the process holding its `ppid` only if that process
//! started no later than it did ([`ProcessId::may_parent`]) — an older process cannot be the
//! child of a newer one, so a cached `ppid` that now names another process links nothing.
//!
//! [`tree`] re-discovers a tree on every call from its root: through
//! `/proc/<pid>/task/<tid>/children` where the kernel provides it (`CONFIG_PROC_CHILDREN`; cost
//! proportional to the tree), else from a [`ProcessTable`] filled by one readdir of the proc
//! root and a read of every process's `stat` (cost proportional to the machine).
//!
//! A caller that asks again and again (the [sampler](crate::sampler)) keeps a
//! [`ProcessTable`] (see its module, [`super::table`], for how it stays exact under pid
//! reuse). Processes that re-parent away from the tree (daemons that double-fork) leave it; a
//! cgroup is the only way to keep them (see `hmn run`).

use std::collections::BTreeSet;

use crate::error::{Error, ParseError};
use crate::fsread::{self, Cap};
use crate::roots::Roots;
use crate::types::ProcessName;

pub use super::table::{ProcessTable, descendants};

/// A process, identified across pid reuse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProcessId {
    /// The process id.
    pub pid: u32,
    /// Start time, clock ticks after boot (`stat` field 22).
    pub start_time: u64,
}

impl ProcessId {
    /// Whether this process can be the parent of `child`, whose `ppid` is this pid: a parent
    /// starts no later than its child (same clock tick allowed). A process that took the pid
    /// after the child started cannot be its parent.
    pub fn may_parent(&self, child: &ProcessId) -> bool {
        self.start_time <= child.start_time
    }
}

/// The fields of `/proc/<pid>/stat` this crate uses.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stat {
    /// Field 1.
    pub pid: u32,
    /// Field 2, the `comm` between the parentheses (it may itself contain spaces and `)`),
    /// as bytes: a process may name itself anything.
    pub comm: ProcessName,
    /// Field 3 (`R`, `S`, `Z`, …).
    pub state: char,
    /// Field 4.
    pub ppid: u32,
    /// Field 9, the kernel's `PF_*` flags.
    pub flags: u64,
    /// Field 22, clock ticks after boot.
    pub start_time: u64,
    /// Field 24, resident set size in pages (the same counter as `statm`'s second field).
    pub rss_pages: u64,
}

/// `PF_KTHREAD`: the process is a kernel thread.
const PF_KTHREAD: u64 = 0x0020_0000;

impl Stat {
    /// This process's identity.
    pub fn id(&self) -> ProcessId {
        ProcessId {
            pid: self.pid,
            start_time: self.start_time,
        }
    }

    /// Whether it is a kernel thread (`PF_KTHREAD`): it has no file descriptors of its own.
    pub fn is_kernel_thread(&self) -> bool {
        self.flags & PF_KTHREAD != 0
    }

    /// Whether it is a zombie (`Z`) or dead (`X`): exited, its files closed.
    pub fn has_exited(&self) -> bool {
        matches!(self.state, 'Z' | 'X')
    }
}

/// Parses `/proc/<pid>/stat` text. See [`parse_stat_bytes`].
pub fn parse_stat(text: &str) -> Result<Stat, ParseError> {
    parse_stat_bytes(text.as_bytes())
}

/// Parses `/proc/<pid>/stat` as the kernel writes it: bytes, since the command name is whatever
/// the process set (not necessarily UTF-8). The command name is everything between the first
/// `(` and the *last* `)`, since a process may name itself `a) b (c`; every other field is
/// ASCII.
pub fn parse_stat_bytes(bytes: &[u8]) -> Result<Stat, ParseError> {
    let bad = |what: &str| ParseError::new(format!("stat: {what}"));
    let open = bytes
        .iter()
        .position(|b| *b == b'(')
        .ok_or_else(|| bad("no '('"))?;
    let close = bytes
        .iter()
        .rposition(|b| *b == b')')
        .ok_or_else(|| bad("no ')'"))?;
    if close < open {
        return Err(bad("')' before '('"));
    }
    let pid = bytes
        .get(..open)
        .and_then(|p| std::str::from_utf8(p).ok())
        .map(str::trim)
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| bad("malformed pid"))?;
    let comm = ProcessName::from(bytes.get(open + 1..close).unwrap_or_default());
    let rest = std::str::from_utf8(bytes.get(close + 1..).unwrap_or_default())
        .map_err(|_| bad("not ASCII after the name"))?;
    let rest: Vec<&str> = rest.split_ascii_whitespace().collect();
    // `rest[0]` is field 3 (state); field N is `rest[N - 3]`.
    let field = |n: usize| {
        rest.get(n - 3)
            .copied()
            .ok_or_else(|| bad(&format!("no field {n}")))
    };
    let state = field(3)?.chars().next().ok_or_else(|| bad("empty state"))?;
    let ppid = field(4)?.parse().map_err(|_| bad("malformed ppid"))?;
    let flags = field(9)?.parse().map_err(|_| bad("malformed flags"))?;
    let start_time = field(22)?
        .parse()
        .map_err(|_| bad("malformed start time"))?;
    let rss_pages = field(24)?.parse().map_err(|_| bad("malformed rss"))?;
    Ok(Stat {
        pid,
        comm,
        state,
        ppid,
        flags,
        start_time,
        rss_pages,
    })
}

/// Reads and parses `<proc>/<pid>/stat`.
///
/// # Errors
/// [`Error::NotFound`] when the process is gone; [`Error::Parse`] on a malformed file.
pub fn read_stat(roots: &Roots, pid: u32) -> Result<Stat, Error> {
    #[cfg(any(windows, target_os = "macos"))]
    if roots.is_system() {
        return super::native::read_stat(pid);
    }
    fsread::read_pid_bytes(roots, pid, "stat", parse_stat_bytes)
}

/// The boot time, seconds since the Unix epoch: the `btime` line of `/proc/stat` (pure).
pub fn parse_btime(proc_stat: &str) -> Option<u64> {
    proc_stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

/// A start time in clock ticks after boot (`stat` field 22) as µs since the Unix epoch, given
/// the boot time in seconds and the clock-tick rate (pure; one-second resolution from `btime`).
pub fn start_unix_us(start_ticks: u64, btime_s: u64, clock_ticks: u64) -> u64 {
    let tick_us = 1_000_000 / clock_ticks.max(1);
    btime_s
        .saturating_mul(1_000_000)
        .saturating_add(start_ticks.saturating_mul(tick_us))
}

/// The pids of the children of every thread of `pid`, from the `task/<tid>/children` files.
/// `None` when the kernel does not provide them.
fn children(roots: &Roots, pid: u32) -> Option<Vec<u32>> {
    let task = roots.pid_file(pid, "task");
    let tasks = fsread::list_pids(&task).ok()?;
    let mut out = Vec::new();
    let mut any = false;
    for tid in tasks {
        let path = task.join(tid.to_string()).join("children");
        if let Ok(text) = fsread::read_string(&path, Cap::CHILDREN) {
            any = true;
            out.extend(
                text.split_ascii_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok()),
            );
        }
    }
    any.then_some(out)
}

/// The live processes of the tree rooted at `root` (the root included), each with its
/// identity. A root that has exited gives an empty list; a root whose start time differs from
/// `root.start_time` (the pid was reused) too.
pub fn tree(roots: &Roots, root: ProcessId) -> Vec<ProcessId> {
    match read_stat(roots, root.pid) {
        Ok(st) if st.start_time == root.start_time => {}
        _ => return Vec::new(),
    }
    if let Some(direct) = children(roots, root.pid) {
        return walk_children(roots, root, direct);
    }
    scan_tree(roots, root)
}

fn walk_children(roots: &Roots, root: ProcessId, direct: Vec<u32>) -> Vec<ProcessId> {
    let mut out = vec![root];
    let mut seen: BTreeSet<u32> = BTreeSet::from([root.pid]);
    // (child pid, its parent as listed): a pid read after its process exited and the pid was
    // taken by an unrelated process is refused by its parent and start time.
    let mut queue: Vec<(u32, ProcessId)> = direct.into_iter().map(|c| (c, root)).collect();
    while let Some((pid, parent)) = queue.pop() {
        if !seen.insert(pid) {
            continue;
        }
        let Ok(st) = read_stat(roots, pid) else {
            continue; // exited meanwhile
        };
        if st.ppid != parent.pid || !parent.may_parent(&st.id()) {
            continue; // not the child that was listed: the pid was reused
        }
        out.push(st.id());
        let id = st.id();
        queue.extend(
            children(roots, pid)
                .unwrap_or_default()
                .into_iter()
                .map(|c| (c, id)),
        );
    }
    out.sort();
    out
}

/// The tree from one pass over every process's `stat` (no `children` files).
fn scan_tree(roots: &Roots, root: ProcessId) -> Vec<ProcessId> {
    let mut table = ProcessTable::new();
    if table.refresh(roots).is_err() {
        return vec![root];
    }
    Some(root)
        .into_iter()
        .chain(table.descendants(root))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// A set of processes to follow over time.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Target {
    /// A process and all its descendants, re-discovered at every refresh.
    Tree(ProcessId),
    /// These processes, each on its own (no descendants).
    Processes(Vec<ProcessId>),
    /// A process's descendants, re-discovered at every refresh, without the process itself: the
    /// tree under a supervisor that is not part of what is measured (`hmn run`'s guard, the
    /// subreaper parent that stays between hmn and the command).
    Descendants(ProcessId),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_with_a_hostile_comm() {
        let text = "4242 (a) b (c) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000000 250 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n";
        let st = parse_stat(text).unwrap();
        assert_eq!(st.pid, 4242);
        assert_eq!(st.comm, "a) b (c");
        assert_eq!(st.state, 'S');
        assert!(!st.is_kernel_thread(), "flags 0x400100");
        assert_eq!(st.ppid, 1);
        assert_eq!(st.start_time, 987_654);
        assert_eq!(st.rss_pages, 250);
    }

    #[test]
    fn stat_with_a_name_that_is_not_utf8() {
        // A process renamed with prctl(PR_SET_NAME) to bytes that are not UTF-8; kthreadd's
        // flags (PF_KTHREAD set).
        let mut text =
            b"77 (gpu\xff\xfe) job) S 2 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 20 0 1 0 ".to_vec();
        text.extend_from_slice(
            b"5 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 0 0 0 17 3\n",
        );
        let st = parse_stat_bytes(&text).unwrap();
        assert_eq!(st.pid, 77);
        assert_eq!(st.comm.as_bytes(), b"gpu\xff\xfe) job");
        assert_eq!(st.comm.escaped(), "gpu\\xff\\xfe) job");
        assert_eq!((st.state, st.ppid, st.start_time), ('S', 2, 5));
        assert!(st.is_kernel_thread());
        assert!(!st.has_exited());
        let mut bad = b"77 (x) S 2 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 \xff".to_vec();
        bad.push(b'\n');
        assert!(
            parse_stat_bytes(&bad).is_err(),
            "only the name may be other than ASCII"
        );
    }

    #[test]
    fn malformed_stat_is_an_error() {
        for bad in [
            "",
            "12 foo S 1",
            "12 (x) S",
            "x (y) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20",
            "12 (x) S one",
        ] {
            assert!(parse_stat(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn own_stat_and_tree() {
        let roots = Roots::system();
        let me = read_stat(&roots, std::process::id()).unwrap();
        assert_eq!(me.pid, std::process::id());
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let t = tree(&roots, me.id());
        assert!(t.iter().any(|p| p.pid == child.id()), "{t:?}");
        let scanned = scan_tree(&roots, me.id());
        assert!(scanned.iter().any(|p| p.pid == child.id()));
        child.kill().unwrap();
        child.wait().unwrap();
        let reused = ProcessId {
            pid: me.pid,
            start_time: me.start_time + 1,
        };
        assert!(
            tree(&roots, reused).is_empty(),
            "a reused pid is not the same process"
        );
    }

    #[test]
    fn boot_time_and_start_times() {
        let stat = "cpu  1 2 3 4\nintr 5\nctxt 99\nbtime 1700000000\nprocesses 12\n";
        assert_eq!(parse_btime(stat), Some(1_700_000_000));
        assert_eq!(parse_btime("cpu 1\n"), None);
        assert_eq!(parse_btime("btime soon\n"), None);
        assert_eq!(
            start_unix_us(250, 1_700_000_000, 100),
            1_700_000_002_500_000
        );
        assert_eq!(start_unix_us(250, 1_700_000_000, 0), 1_700_000_250_000_000);
    }
}
