//! Control groups: where a process's cgroup is (`/proc/<pid>/cgroup`), and a transient memory
//! cgroup whose kernel-kept peak gives the exact peak memory of everything run inside it.
//!
//! cgroup v2 keeps `memory.peak` (Linux 5.19+); cgroup v1's memory controller keeps
//! `memory.max_usage_in_bytes`. Both count what the kernel charges to the group — anonymous
//! memory, page cache, kernel memory — so the figure is at least the processes' summed RSS and
//! includes the file cache they caused. The v2 hierarchy is looked for at `<sys>/fs/cgroup`
//! (unified) or `<sys>/fs/cgroup/unified` (hybrid), the v1 memory hierarchy at
//! `<sys>/fs/cgroup/memory`.
//!
//! Creating a group needs write access to the caller's own group (root, or a delegated
//! subtree); on cgroup v2 the memory controller must be enabled for children of that group
//! (it cannot be enabled from a group that holds processes, the "no internal processes" rule).
//! Why a group could not be made or removed is a [`CgroupError`]. A group never outlives its
//! run: [`PeakCgroup::remove_moving_leftovers`] and [`remove_stale`] (in `leftovers`).

mod leftovers;
pub(crate) mod lines;
mod peak;

pub use leftovers::{StaleCgroup, remove_stale, transient_name};
pub use lines::{CgroupLine, parse_proc_cgroup, v1_memory_path, v2_path};
pub use peak::{CgroupError, CgroupVersion, PeakCgroup, Refusal};

// serve's coarse key, at the path it has always had; its model is `types::workload`.
pub use crate::types::workload::Workload;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::system::roots::Roots;

    #[test]
    fn hybrid_hierarchy_lines() {
        let text = "9:name=systemd:/\n4:memory:/process_api/34aedba3\n1:cpu,cpuacct:/\n0::/\n";
        let lines = parse_proc_cgroup(text);
        assert_eq!(lines.len(), 4);
        assert_eq!(v1_memory_path(&lines), Some("/process_api/34aedba3"));
        assert_eq!(v2_path(&lines), Some("/"));
        assert_eq!(lines[2].controllers, vec!["cpu", "cpuacct"]);
    }

    #[test]
    fn unified_hierarchy_line() {
        let lines = parse_proc_cgroup("0::/system.slice/ollama.service\n");
        assert_eq!(v2_path(&lines), Some("/system.slice/ollama.service"));
        assert_eq!(v1_memory_path(&lines), None);
        assert!(parse_proc_cgroup("garbage\n:x\n").is_empty());
    }

    /// A fixture with `proc/self/cgroup` holding `own` and an empty `sys`.
    fn own_cgroup(own: &str) -> (tempfile::TempDir, Roots) {
        let dir = tempfile::tempdir().unwrap();
        let proc = dir.path().join("proc/self");
        std::fs::create_dir_all(&proc).unwrap();
        std::fs::write(proc.join("cgroup"), own).unwrap();
        let roots = Roots::system()
            .with_proc(dir.path().join("proc"))
            .with_sys(dir.path().join("sys"));
        (dir, roots)
    }

    #[test]
    fn create_falls_back_with_reasons() {
        let (dir, roots) = own_cgroup("0::/user.slice\n");
        let err = PeakCgroup::create(&roots, "hmn-test")
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "cgroup v2: no unified hierarchy; cgroup v1: no memory controller"
        );
        let gone = roots.clone().with_proc(dir.path().join("nope"));
        let err = PeakCgroup::create(&gone, "hmn-test").unwrap_err();
        assert!(
            matches!(err, CgroupError::OwnCgroup(ref e) if e.is_not_found()),
            "{err}"
        );
    }

    #[test]
    fn a_v1_fixture_hierarchy_is_used() {
        let (dir, roots) = own_cgroup("4:memory:/job\n0::/\n");
        let parent = dir.path().join("sys/fs/cgroup/memory/job");
        std::fs::create_dir_all(&parent).unwrap();
        // A plain directory does not grow kernel files: creation must fail and clean up.
        let err = PeakCgroup::create(&roots, "hmn-test")
            .unwrap_err()
            .to_string();
        assert!(err.contains("memory.max_usage_in_bytes"), "{err}");
        assert!(
            !parent.join("hmn-test").exists(),
            "the failed group is removed"
        );
    }
}
