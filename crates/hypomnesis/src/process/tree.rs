//! Process identity and process trees, from `/proc/<pid>/stat`.
//!
//! A pid is reused by the kernel after its process exits, so a process is identified by
//! [`ProcessId`] = (pid, start time in clock ticks since boot): two records with the same pid
//! and different start times are different processes and are never merged.
//!
//! A tree is re-discovered on every call from its root: through `/proc/<pid>/task/<tid>/children`
//! where the kernel provides it (`CONFIG_PROC_CHILDREN`; cost proportional to the tree), else
//! by one readdir of the proc root and a read of every process's `stat` (cost proportional to
//! the machine). Processes that re-parent away from the tree (daemons that double-fork) leave
//! it; a cgroup is the only way to keep them (see `hmn run`).

use std::collections::{BTreeMap, BTreeSet};

use crate::error::{Error, ParseError};
use crate::roots::Roots;

/// A process, identified across pid reuse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProcessId {
    /// The process id.
    pub pid: u32,
    /// Start time, clock ticks after boot (`stat` field 22).
    pub start_time: u64,
}

/// The fields of `/proc/<pid>/stat` this crate uses.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stat {
    /// Field 1.
    pub pid: u32,
    /// Field 2, the `comm` between the parentheses (it may itself contain spaces and `)`).
    pub comm: String,
    /// Field 3 (`R`, `S`, `Z`, …).
    pub state: char,
    /// Field 4.
    pub ppid: u32,
    /// Field 22, clock ticks after boot.
    pub start_time: u64,
    /// Field 24, resident set size in pages (the same counter as `statm`'s second field).
    pub rss_pages: u64,
}

impl Stat {
    /// This process's identity.
    pub fn id(&self) -> ProcessId {
        ProcessId {
            pid: self.pid,
            start_time: self.start_time,
        }
    }
}

/// Parses `/proc/<pid>/stat`. The command name is everything between the first `(` and the
/// *last* `)`, since a process may name itself `a) b (c`.
pub fn parse_stat(text: &str) -> Result<Stat, ParseError> {
    let bad = |what: &str| ParseError::new(format!("stat: {what}"));
    let open = text.find('(').ok_or_else(|| bad("no '('"))?;
    let close = text.rfind(')').ok_or_else(|| bad("no ')'"))?;
    if close < open {
        return Err(bad("')' before '('"));
    }
    let pid = text
        .get(..open)
        .map(str::trim)
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| bad("malformed pid"))?;
    let comm = text.get(open + 1..close).unwrap_or_default().to_string();
    let rest: Vec<&str> = text
        .get(close + 1..)
        .unwrap_or_default()
        .split_ascii_whitespace()
        .collect();
    // `rest[0]` is field 3 (state); field N is `rest[N - 3]`.
    let field = |n: usize| {
        rest.get(n - 3)
            .copied()
            .ok_or_else(|| bad(&format!("no field {n}")))
    };
    let state = field(3)?.chars().next().ok_or_else(|| bad("empty state"))?;
    let ppid = field(4)?.parse().map_err(|_| bad("malformed ppid"))?;
    let start_time = field(22)?
        .parse()
        .map_err(|_| bad("malformed start time"))?;
    let rss_pages = field(24)?.parse().map_err(|_| bad("malformed rss"))?;
    Ok(Stat {
        pid,
        comm,
        state,
        ppid,
        start_time,
        rss_pages,
    })
}

/// Reads and parses `<proc>/<pid>/stat`.
///
/// # Errors
/// [`Error::NotFound`] when the process is gone; [`Error::Parse`] on a malformed file.
pub fn read_stat(roots: &Roots, pid: u32) -> Result<Stat, Error> {
    let path = roots.pid_file(pid, "stat");
    let text = std::fs::read_to_string(&path).map_err(|e| Error::from_io(&path, e))?;
    parse_stat(&text).map_err(|e| e.at(&path))
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
    let tasks = std::fs::read_dir(roots.pid_file(pid, "task")).ok()?;
    let mut out = Vec::new();
    let mut any = false;
    for t in tasks.flatten() {
        if let Ok(text) = std::fs::read_to_string(t.path().join("children")) {
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
    let mut queue = direct;
    while let Some(pid) = queue.pop() {
        if !seen.insert(pid) {
            continue;
        }
        let Ok(st) = read_stat(roots, pid) else {
            continue; // exited meanwhile
        };
        out.push(st.id());
        queue.extend(children(roots, pid).unwrap_or_default());
    }
    out.sort();
    out
}

/// The tree from one pass over every process's `stat` (no `children` files).
fn scan_tree(roots: &Roots, root: ProcessId) -> Vec<ProcessId> {
    let Ok(entries) = std::fs::read_dir(&roots.proc) else {
        return vec![root];
    };
    let mut by_parent: BTreeMap<u32, Vec<ProcessId>> = BTreeMap::new();
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if let Ok(st) = read_stat(roots, pid) {
            by_parent.entry(st.ppid).or_default().push(st.id());
        }
    }
    Some(root)
        .into_iter()
        .chain(descendants(&by_parent, root.pid))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// Every descendant of `pid` in a parent → children map (pure).
pub fn descendants(by_parent: &BTreeMap<u32, Vec<ProcessId>>, pid: u32) -> Vec<ProcessId> {
    let mut out = Vec::new();
    let mut seen = BTreeSet::from([pid]);
    let mut queue = vec![pid];
    while let Some(p) = queue.pop() {
        for child in by_parent.get(&p).into_iter().flatten() {
            if seen.insert(child.pid) {
                out.push(*child);
                queue.push(child.pid);
            }
        }
    }
    out
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
        assert_eq!(st.ppid, 1);
        assert_eq!(st.start_time, 987_654);
        assert_eq!(st.rss_pages, 250);
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

    #[test]
    fn descendants_follow_the_parent_map() {
        let id = |pid| ProcessId { pid, start_time: 1 };
        let map = BTreeMap::from([(1, vec![id(2), id(3)]), (3, vec![id(4)]), (9, vec![id(10)])]);
        let mut d: Vec<u32> = descendants(&map, 1).iter().map(|p| p.pid).collect();
        d.sort();
        assert_eq!(d, vec![2, 3, 4]);
    }
}
