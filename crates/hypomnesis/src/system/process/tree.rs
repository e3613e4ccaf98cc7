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

use crate::system::fsread::{self, Cap};
use crate::system::roots::Roots;

pub use super::read::{StatReader, read_stat};
pub use super::stat::{
    ProcessId, Stat, Target, parse_btime, parse_stat, parse_stat_bytes, start_unix_us,
};
#[doc(no_inline)]
pub use super::table::{ProcessTable, descendants};

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

#[cfg(test)]
mod tests {
    use super::*;

    /// Without `children` files the tree is a scan of a table (the table's fixtures: `stat`
    /// files only), with the table's rules: the fixtures of `table.rs`'s tests
    /// `a_table_follows_a_tree_and_reads_only_new_pids` and
    /// `a_ppid_naming_a_newer_process_links_nothing`.
    #[test]
    fn without_children_files_the_tree_is_a_scan() {
        use crate::system::process::table::tests::{fixture, id};
        let (_dir, roots) = fixture(&[
            (1, 0, 1),
            (10, 1, 100),
            (11, 10, 110),
            (12, 11, 120),
            (20, 1, 200),
        ]);
        let root = id(10, 100);
        let ids = |v: Vec<ProcessId>| v.iter().map(|p| p.pid).collect::<Vec<_>>();
        assert_eq!(
            ids(tree(&roots, root)),
            vec![10, 11, 12],
            "no children files: a scan"
        );
        // 21's parent (pid 20) exited long ago; a newer process took pid 20 and is the root.
        let (_dir, roots) = fixture(&[(1, 0, 1), (20, 1, 400), (21, 20, 150)]);
        let root = id(20, 400);
        assert_eq!(tree(&roots, root), vec![root], "the scan too");
    }

    #[test]
    fn stat_with_a_hostile_comm() {
        let text = "4242 (a) b (c) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000000 250 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n";
        let st = parse_stat(text).unwrap();
        assert_eq!(st.pid, 4242);
        assert_eq!(st.comm, "a) b (c");
        assert_eq!(st.state, 'S');
        assert!(!st.is_kernel_thread(), "flags 0x400100");
        assert!(!st.is_exiting());
        // The same process as it exits: PF_EXITING (0x4) set, its address space going.
        let exiting = text
            .replace(" 4194560 ", " 4194564 ")
            .replace(" 250 ", " 0 ");
        assert!(parse_stat(&exiting).unwrap().is_exiting());
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
        // Fields 3 to 23, then to 24: the rss (field 24) is the last one read.
        let upto = |n: u64| {
            let numbers: Vec<String> = (4..=n).map(|f| f.to_string()).collect();
            format!("12 (x) S {}\n", numbers.join(" "))
        };
        let e = parse_stat(&upto(23)).unwrap_err().to_string();
        assert!(e.contains("no field 24"), "{e}");
        let st = parse_stat(&upto(24)).unwrap();
        assert_eq!((st.ppid, st.start_time, st.rss_pages), (4, 22, 24));
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
