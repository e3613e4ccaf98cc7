//! Process identity and process trees, from `/proc/<pid>/stat`.
//!
//! A pid is reused by the kernel after its process exits, so a process is identified by
//! [`ProcessId`] = (pid, start time in clock ticks since boot): two records with the same pid
//! and different start times are different processes and are never merged.
//!
//! [`tree`] re-discovers a tree on every call from its root: through
//! `/proc/<pid>/task/<tid>/children` where the kernel provides it (`CONFIG_PROC_CHILDREN`; cost
//! proportional to the tree), else from a [`ProcessTable`] filled by one readdir of the proc
//! root and a read of every process's `stat` (cost proportional to the machine).
//!
//! A caller that asks again and again (the [sampler](crate::sampler)) keeps a
//! [`ProcessTable`]: each refresh is one readdir, with `stat` read only for the pids it has not
//! seen, and [`ProcessTable::members`] re-reads the `stat` of the [`Target`]'s processes only.
//! Processes that re-parent away from the tree (daemons that double-fork) leave it; a cgroup is
//! the only way to keep them (see `hmn run`).

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use crate::error::{Error, ParseError};
use crate::fsread::{self, Cap};
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
    #[cfg(any(windows, target_os = "macos"))]
    if roots.is_system() {
        return super::native::read_stat(pid);
    }
    fsread::read_pid_file(roots, pid, "stat", parse_stat)
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
    let mut table = ProcessTable::new();
    if table.refresh(roots).is_err() {
        return vec![root];
    }
    Some(root)
        .into_iter()
        .chain(table.descendants(root.pid))
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
}

/// The `stat` of every process on the machine, kept between refreshes: the incremental
/// parent map behind [`tree`]'s scan and the [sampler](crate::sampler). See the
/// [module docs](self).
#[derive(Debug, Clone, Default)]
pub struct ProcessTable {
    /// By pid: the `stat` read when the pid was first seen, or at its last re-read as a member.
    stats: HashMap<u32, Stat>,
}

impl ProcessTable {
    /// An empty table.
    pub fn new() -> ProcessTable {
        ProcessTable::default()
    }

    /// One readdir of the proc root: forgets the processes that are gone and reads the `stat`
    /// of each pid not seen before (a process that vanishes meanwhile is skipped).
    ///
    /// # Errors
    /// When the proc root cannot be listed; the table is then left as it was.
    pub fn refresh(&mut self, roots: &Roots) -> Result<(), Error> {
        #[cfg(any(windows, target_os = "macos"))]
        if roots.is_system() {
            self.stats = super::native::all_stats()?
                .into_iter()
                .map(|st| (st.pid, st))
                .collect();
            return Ok(());
        }
        let live: HashSet<u32> = fsread::list_pids(&roots.proc)?.into_iter().collect();
        self.stats.retain(|pid, _| live.contains(pid));
        for pid in live {
            if let Entry::Vacant(slot) = self.stats.entry(pid) {
                if let Ok(st) = read_stat(roots, pid) {
                    slot.insert(st);
                }
            }
        }
        Ok(())
    }

    /// The `stat` the table holds for `pid`.
    pub fn get(&self, pid: u32) -> Option<&Stat> {
        self.stats.get(&pid)
    }

    /// How many processes the table holds.
    pub fn len(&self) -> usize {
        self.stats.len()
    }

    /// Whether the table holds no process.
    pub fn is_empty(&self) -> bool {
        self.stats.is_empty()
    }

    /// Every descendant of `pid`, by the parents the table holds.
    pub fn descendants(&self, pid: u32) -> Vec<ProcessId> {
        let mut by_parent: BTreeMap<u32, Vec<ProcessId>> = BTreeMap::new();
        for st in self.stats.values() {
            by_parent.entry(st.ppid).or_default().push(st.id());
        }
        descendants(&by_parent, pid)
    }

    /// The target's processes now, each with a fresh `stat` (re-read, so its RSS is current and
    /// a reused pid shows its new start time): a tree's root and its descendants by the
    /// table's parents, or the listed processes. A process whose start time differs from its
    /// identity's, or that is gone, is left out. Call [`ProcessTable::refresh`] first.
    pub fn members(&mut self, roots: &Roots, target: &Target) -> Vec<Stat> {
        let wanted: Vec<ProcessId> = match target {
            Target::Processes(ids) => ids.clone(),
            Target::Tree(root) => std::iter::once(*root)
                .chain(self.descendants(root.pid))
                .collect(),
        };
        let mut out = Vec::new();
        for id in wanted {
            match read_stat(roots, id.pid) {
                Ok(st) if st.start_time == id.start_time => {
                    self.stats.insert(id.pid, st.clone());
                    out.push(st);
                }
                Ok(st) => {
                    self.stats.insert(id.pid, st);
                }
                Err(_) => {
                    self.stats.remove(&id.pid);
                }
            }
        }
        out
    }
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

    /// A fixture `stat` (the fields this crate reads: pid, comm, state, ppid, start, rss).
    fn write_stat(proc: &std::path::Path, pid: u32, ppid: u32, start: u64) {
        let dir = proc.join(pid.to_string());
        std::fs::create_dir_all(&dir).unwrap();
        let middle = ["0"; 17].join(" ");
        let text = format!("{pid} (p{pid}) S {ppid} {middle} {start} 1000 {pid}\n");
        std::fs::write(dir.join("stat"), text).unwrap();
    }

    fn pids(stats: &[Stat]) -> Vec<u32> {
        let mut p: Vec<u32> = stats.iter().map(|s| s.pid).collect();
        p.sort_unstable();
        p
    }

    #[test]
    fn a_table_follows_a_tree_and_reads_only_new_pids() {
        let dir = tempfile::tempdir().unwrap();
        let proc = dir.path();
        let roots = Roots::system().with_proc(proc);
        for (pid, ppid, start) in [
            (1, 0, 1),
            (10, 1, 100),
            (11, 10, 110),
            (12, 11, 120),
            (20, 1, 200),
        ] {
            write_stat(proc, pid, ppid, start);
        }
        std::fs::write(proc.join("meminfo"), "").unwrap();
        std::fs::create_dir(proc.join("self")).unwrap();
        let root = ProcessId {
            pid: 10,
            start_time: 100,
        };
        let ids = |v: Vec<ProcessId>| v.iter().map(|p| p.pid).collect::<Vec<_>>();
        assert_eq!(
            ids(tree(&roots, root)),
            vec![10, 11, 12],
            "no children files: a scan"
        );
        let mut t = ProcessTable::new();
        t.refresh(&roots).unwrap();
        assert_eq!(t.len(), 5);
        assert_eq!(
            pids(&t.members(&roots, &Target::Tree(root))),
            vec![10, 11, 12]
        );

        // 12 exits, 13 starts under 11, and 20 (not a member) changes on disk.
        std::fs::remove_dir_all(proc.join("12")).unwrap();
        write_stat(proc, 13, 11, 130);
        write_stat(proc, 20, 10, 201);
        t.refresh(&roots).unwrap();
        assert!(t.get(12).is_none(), "a vanished pid is forgotten");
        assert_eq!(t.get(13).map(|s| s.ppid), Some(11), "a new pid is read");
        assert_eq!(
            t.get(20).map(|s| s.start_time),
            Some(200),
            "a known pid's stat is not read again"
        );
        assert_eq!(
            pids(&t.members(&roots, &Target::Tree(root))),
            vec![10, 11, 13]
        );

        // 11's pid is reused: a member with another start time is left out, its re-read kept.
        write_stat(proc, 11, 10, 999);
        let members = t.members(&roots, &Target::Tree(root));
        assert!(!members.iter().any(|s| s.pid == 11), "{members:?}");
        assert_eq!(t.get(11).map(|s| s.start_time), Some(999));
        let listed = Target::Processes(vec![
            ProcessId {
                pid: 20,
                start_time: 201,
            },
            ProcessId {
                pid: 11,
                start_time: 110,
            },
            ProcessId {
                pid: 77,
                start_time: 1,
            },
        ]);
        assert_eq!(pids(&t.members(&roots, &listed)), vec![20]);

        let unlistable = roots.clone().with_proc(proc.join("nope"));
        assert!(t.refresh(&unlistable).unwrap_err().is_not_found());
        assert!(!t.is_empty(), "a failed refresh keeps the table");
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
