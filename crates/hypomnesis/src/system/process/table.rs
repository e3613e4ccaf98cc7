//! [`ProcessTable`]: the `stat` of every process on the machine, kept between refreshes — the
//! incremental parent map behind [`tree`](super::tree::tree)'s scan and the
//! [sampler](crate::sampler).
//!
//! Each refresh is one readdir of the proc root; a `stat` is read only for a pid not seen
//! before, and [`ProcessTable::members`] re-reads the `stat` of the [`Target`]'s processes
//! only. It stays exact when pids are reused between two refreshes (at 500 forks a second the
//! default `pid_max` of 32,768 wraps in about a minute):
//!
//! - **An entry is checked against its directory entry.** The table keeps, with each `stat`,
//!   the inode number readdir gave for `/proc/<pid>`. The kernel makes a new directory — a new
//!   inode — for every new process, so a pid whose process exited and was taken by another
//!   between two refreshes (never seen absent) has a new inode, and its `stat` is read again:
//!   a child that took a pid the table held for an unrelated process is followed. (The inode
//!   of a process's directory may also change when the kernel drops it from its cache; that
//!   costs one extra read, never a wrong answer.)
//! - **Parents are keyed by [`ProcessId`].** A process hangs under the process the table holds
//!   for its `ppid` only if that one started no later than it did
//!   ([`ProcessId::may_parent`]): a `ppid` that now names a newer process links nothing.
//! - **A tree is walked from its root with fresh reads.** Each member's `stat` is re-read (for
//!   its RSS) *before* its children are followed: a member whose pid was taken by another
//!   process (another start time) is left out with everything below it, so the new process's
//!   children are never pulled in; a child whose fresh `ppid` no longer names its parent
//!   (re-parented when its parent exited) is left out too. A root that has exited gives an
//!   empty tree at once.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::read::read_stat;
use super::stat::{ProcessId, Stat, Target};
use crate::system::fsread;
use crate::system::roots::Roots;
use crate::types::error::Error;

/// An inode number no directory entry has: "read again at the next refresh".
const UNKNOWN_INODE: u64 = 0;

/// One process: its `stat` and the inode of the `/proc/<pid>` it was read from.
#[derive(Debug, Clone)]
struct Entry {
    inode: u64,
    stat: Stat,
}

/// The `stat` of every process on the machine, kept between refreshes. See the
/// [module docs](self).
#[derive(Debug, Clone, Default)]
pub struct ProcessTable {
    /// By pid: the `stat` read when the pid's directory entry was first seen, or at its last
    /// re-read as a member.
    entries: HashMap<u32, Entry>,
}

impl ProcessTable {
    /// An empty table.
    pub fn new() -> ProcessTable {
        ProcessTable::default()
    }

    /// One readdir of the proc root: forgets the processes that are gone, and reads the `stat`
    /// of each pid not seen before or whose directory entry changed (a new process with a
    /// reused pid). A process that vanishes meanwhile is skipped.
    ///
    /// # Errors
    /// When the proc root cannot be listed; the table is then left as it was.
    pub fn refresh(&mut self, roots: &Roots) -> Result<(), Error> {
        // Platform seam: no proc root on Windows and macOS; the native listing gives each
        // process's start time, which stands for the inode (a reused pid has a new one).
        #[cfg(any(windows, target_os = "macos"))]
        if roots.is_system() {
            self.entries = super::native::all_stats()?
                .into_iter()
                .map(|stat| {
                    let inode = stat.start_time;
                    (stat.pid, Entry { inode, stat })
                })
                .collect();
            return Ok(());
        }
        let live: HashMap<u32, u64> = fsread::list_pid_inodes(&roots.proc)?.into_iter().collect();
        self.entries
            .retain(|pid, e| e.inode != UNKNOWN_INODE && live.get(pid) == Some(&e.inode));
        for (pid, inode) in live {
            if self.entries.contains_key(&pid) {
                continue;
            }
            if let Ok(stat) = read_stat(roots, pid) {
                self.entries.insert(pid, Entry { inode, stat });
            }
        }
        Ok(())
    }

    /// The `stat` the table holds for `pid`.
    pub fn get(&self, pid: u32) -> Option<&Stat> {
        self.entries.get(&pid).map(|e| &e.stat)
    }

    /// How many processes the table holds.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the table holds no process.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Parent → children, each link checked by start time ([`ProcessId::may_parent`]).
    fn children_map(&self) -> BTreeMap<ProcessId, Vec<ProcessId>> {
        let mut map: BTreeMap<ProcessId, Vec<ProcessId>> = BTreeMap::new();
        for e in self.entries.values() {
            let child = e.stat.id();
            let Some(parent) = self.entries.get(&e.stat.ppid).map(|p| p.stat.id()) else {
                continue;
            };
            if parent != child && parent.may_parent(&child) {
                map.entry(parent).or_default().push(child);
            }
        }
        map
    }

    /// Every descendant of `root`, by the parents the table holds.
    pub fn descendants(&self, root: ProcessId) -> Vec<ProcessId> {
        descendants(&self.children_map(), root)
    }

    /// The target's processes now, each with a fresh `stat` (re-read, so its RSS is current and
    /// a reused pid shows its new start time): a tree's root and its descendants, walked from
    /// the root (see the [module docs](self)), the descendants alone, or the listed processes. A process whose start
    /// time differs from its identity's, or that is gone, is left out. Call
    /// [`ProcessTable::refresh`] first.
    pub fn members(&mut self, roots: &Roots, target: &Target) -> Vec<Stat> {
        let mut out = Vec::new();
        match target {
            Target::Processes(ids) => {
                out.extend(ids.iter().filter_map(|id| self.reread(roots, *id)));
            }
            Target::Tree(root) | Target::Descendants(root) => {
                let with_root = matches!(target, Target::Tree(_));
                let map = self.children_map();
                let mut seen: BTreeSet<ProcessId> = BTreeSet::new();
                let mut queue: Vec<(ProcessId, Option<u32>)> = vec![(*root, None)];
                while let Some((id, parent)) = queue.pop() {
                    if !seen.insert(id) {
                        continue;
                    }
                    let Some(st) = self.reread(roots, id) else {
                        continue; // gone, or its pid now names another process
                    };
                    if parent.is_some_and(|p| st.ppid != p) {
                        continue; // re-parented away from the tree
                    }
                    let here = Some(id.pid);
                    queue.extend(map.get(&id).into_iter().flatten().map(|c| (*c, here)));
                    if with_root || id != *root {
                        out.push(st);
                    }
                }
            }
        }
        out.sort_by_key(|s| s.pid);
        out
    }

    /// Re-reads `id`'s `stat`: the fresh one when it is still that process (kept in the table),
    /// `None` when it is gone (forgotten) or its pid names another process (kept as that one,
    /// read again at the next refresh).
    fn reread(&mut self, roots: &Roots, id: ProcessId) -> Option<Stat> {
        match read_stat(roots, id.pid) {
            Ok(stat) if stat.start_time == id.start_time => {
                let inode = self
                    .entries
                    .get(&id.pid)
                    .filter(|e| e.stat.start_time == id.start_time)
                    .map_or(UNKNOWN_INODE, |e| e.inode);
                self.entries.insert(
                    id.pid,
                    Entry {
                        inode,
                        stat: stat.clone(),
                    },
                );
                Some(stat)
            }
            Ok(stat) => {
                let inode = UNKNOWN_INODE;
                self.entries.insert(id.pid, Entry { inode, stat });
                None
            }
            Err(_) => {
                self.entries.remove(&id.pid);
                None
            }
        }
    }
}

/// Every descendant of `root` in a parent → children map keyed by identity (pure).
pub fn descendants(
    by_parent: &BTreeMap<ProcessId, Vec<ProcessId>>,
    root: ProcessId,
) -> Vec<ProcessId> {
    let mut out = Vec::new();
    let mut seen = BTreeSet::from([root]);
    let mut queue = vec![root];
    while let Some(p) = queue.pop() {
        for child in by_parent.get(&p).into_iter().flatten() {
            if seen.insert(*child) {
                out.push(*child);
                queue.push(*child);
            }
        }
    }
    out
}

// Its fixtures are shared with the tree's tests (`tree.rs`: the scan over a table).
#[cfg(test)]
pub(super) mod tests {
    use std::path::Path;

    use super::*;

    /// A fixture `stat` (the fields this crate reads: pid, comm, state, ppid, flags, start,
    /// rss), written in place: the pid's directory (its inode) is kept when it exists.
    fn write_stat(proc: &Path, pid: u32, ppid: u32, start: u64) {
        let dir = proc.join(pid.to_string());
        std::fs::create_dir_all(&dir).unwrap();
        let middle = ["0"; 17].join(" ");
        let text = format!("{pid} (p{pid}) S {ppid} {middle} {start} 1000 {pid}\n");
        std::fs::write(dir.join("stat"), text).unwrap();
    }

    /// A new process with a reused pid, as the kernel shows it: a new `/proc/<pid>` directory
    /// (made beside the old one first, so its inode differs) replaces the old one.
    fn reuse(proc: &Path, pid: u32, ppid: u32, start: u64) {
        let staging = proc.join(format!(".new-{pid}"));
        std::fs::create_dir(&staging).unwrap();
        write_stat(&staging, pid, ppid, start);
        std::fs::remove_dir_all(proc.join(pid.to_string())).unwrap();
        std::fs::rename(staging.join(pid.to_string()), proc.join(pid.to_string())).unwrap();
        std::fs::remove_dir(&staging).unwrap();
    }

    pub(in crate::system::process) fn id(pid: u32, start_time: u64) -> ProcessId {
        ProcessId { pid, start_time }
    }

    fn pids(stats: &[Stat]) -> Vec<u32> {
        stats.iter().map(|s| s.pid).collect()
    }

    pub(in crate::system::process) fn fixture(
        procs: &[(u32, u32, u64)],
    ) -> (tempfile::TempDir, Roots) {
        let dir = tempfile::tempdir().unwrap();
        for (pid, ppid, start) in procs {
            write_stat(dir.path(), *pid, *ppid, *start);
        }
        std::fs::write(dir.path().join("meminfo"), "").unwrap();
        std::fs::create_dir(dir.path().join("self")).unwrap();
        let roots = Roots::system().with_proc(dir.path());
        (dir, roots)
    }

    #[test]
    fn a_table_follows_a_tree_and_reads_only_new_pids() {
        let (dir, roots) = fixture(&[
            (1, 0, 1),
            (10, 1, 100),
            (11, 10, 110),
            (12, 11, 120),
            (20, 1, 200),
        ]);
        let proc = dir.path();
        let root = id(10, 100);
        let mut t = ProcessTable::new();
        t.refresh(&roots).unwrap();
        assert_eq!(t.len(), 5);
        assert_eq!(
            pids(&t.members(&roots, &Target::Tree(root))),
            vec![10, 11, 12]
        );
        assert_eq!(
            pids(&t.members(&roots, &Target::Descendants(root))),
            vec![11, 12],
            "the tree without its root"
        );

        // 12 exits, 13 starts under 11, and 20 (not a member) changes in place.
        std::fs::remove_dir_all(proc.join("12")).unwrap();
        write_stat(proc, 13, 11, 130);
        write_stat(proc, 20, 10, 201);
        t.refresh(&roots).unwrap();
        assert!(t.get(12).is_none(), "a vanished pid is forgotten");
        assert_eq!(t.get(13).map(|s| s.ppid), Some(11), "a new pid is read");
        assert_eq!(
            t.get(20).map(|s| s.start_time),
            Some(200),
            "a known pid's stat is not read again while its directory stays"
        );
        assert_eq!(
            pids(&t.members(&roots, &Target::Tree(root))),
            vec![10, 11, 13]
        );

        // 11's pid is reused in place: the member is left out, with what hangs below it.
        write_stat(proc, 11, 10, 999);
        let members = t.members(&roots, &Target::Tree(root));
        assert_eq!(pids(&members), vec![10], "{members:?}");
        assert_eq!(t.get(11).map(|s| s.start_time), Some(999));
        let listed = Target::Processes(vec![id(20, 201), id(11, 110), id(77, 1)]);
        assert_eq!(pids(&t.members(&roots, &listed)), vec![20]);

        let unlistable = roots.clone().with_proc(proc.join("nope"));
        assert!(t.refresh(&unlistable).unwrap_err().is_not_found());
        assert!(!t.is_empty(), "a failed refresh keeps the table");
    }

    #[test]
    fn a_child_that_takes_a_pid_cached_as_another_process_is_followed() {
        // 30 is an unrelated process the table has read; the root is 10.
        let (dir, roots) = fixture(&[(1, 0, 1), (10, 1, 100), (30, 1, 50)]);
        let root = id(10, 100);
        let mut t = ProcessTable::new();
        t.refresh(&roots).unwrap();
        assert_eq!(pids(&t.members(&roots, &Target::Tree(root))), vec![10]);
        // Before the next refresh 30 exits and the root's new child gets pid 30.
        reuse(dir.path(), 30, 10, 300);
        t.refresh(&roots).unwrap();
        assert_eq!(t.get(30).map(|s| s.ppid), Some(10), "read again");
        assert_eq!(pids(&t.members(&roots, &Target::Tree(root))), vec![10, 30]);
    }

    #[test]
    fn a_members_reused_pid_does_not_pull_in_the_new_process_s_children() {
        // The root 10 has a child 11; 11 exits, an unrelated process takes pid 11 and forks 12.
        let (dir, roots) = fixture(&[(1, 0, 1), (10, 1, 100), (11, 10, 110)]);
        let root = id(10, 100);
        let mut t = ProcessTable::new();
        t.refresh(&roots).unwrap();
        assert_eq!(pids(&t.members(&roots, &Target::Tree(root))), vec![10, 11]);
        reuse(dir.path(), 11, 1, 500);
        write_stat(dir.path(), 12, 11, 510);
        t.refresh(&roots).unwrap();
        assert_eq!(pids(&t.members(&roots, &Target::Tree(root))), vec![10]);

        // Even with the old entry kept (a proc root whose inodes never change, here an
        // in-place rewrite), the walk re-reads 11 before following it.
        let (dir, roots) = fixture(&[(1, 0, 1), (10, 1, 100), (11, 10, 110)]);
        let mut t = ProcessTable::new();
        t.refresh(&roots).unwrap();
        write_stat(dir.path(), 11, 1, 500);
        write_stat(dir.path(), 12, 11, 510);
        t.refresh(&roots).unwrap();
        assert_eq!(t.get(11).map(|s| s.start_time), Some(110), "kept");
        assert_eq!(pids(&t.members(&roots, &Target::Tree(root))), vec![10]);
    }

    #[test]
    fn a_ppid_naming_a_newer_process_links_nothing() {
        // 21's parent (pid 20) exited long ago; a newer process took pid 20 and is the root.
        // 21's stat still names 20 (read before it was re-parented): not a child.
        let (_dir, roots) = fixture(&[(1, 0, 1), (20, 1, 400), (21, 20, 150)]);
        let root = id(20, 400);
        let mut t = ProcessTable::new();
        t.refresh(&roots).unwrap();
        assert!(t.descendants(root).is_empty());
        assert_eq!(pids(&t.members(&roots, &Target::Tree(root))), vec![20]);
    }

    #[test]
    fn an_exited_root_has_no_members() {
        let (dir, roots) = fixture(&[(1, 0, 1), (10, 1, 100), (11, 10, 110)]);
        let mut t = ProcessTable::new();
        t.refresh(&roots).unwrap();
        std::fs::remove_dir_all(dir.path().join("10")).unwrap();
        // The child still names 10 (not yet seen re-parented): not counted once the root left.
        assert!(t.members(&roots, &Target::Tree(id(10, 100))).is_empty());
    }

    #[test]
    fn descendants_follow_the_parent_map() {
        let map = BTreeMap::from([
            (id(1, 1), vec![id(2, 2), id(3, 3)]),
            (id(3, 3), vec![id(4, 4)]),
            (id(9, 9), vec![id(10, 10)]),
            // Another process once had pid 1: its children are not 1's.
            (id(1, 0), vec![id(5, 5)]),
        ]);
        let mut d: Vec<u32> = descendants(&map, id(1, 1)).iter().map(|p| p.pid).collect();
        d.sort_unstable();
        assert_eq!(d, vec![2, 3, 4]);
    }
}
