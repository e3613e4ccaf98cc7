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

pub use leftovers::{StaleCgroup, remove_stale};
pub use lines::{CgroupLine, parse_proc_cgroup, v1_memory_path, v2_path};
pub use peak::{CgroupError, CgroupVersion, PeakCgroup, Refusal};

use crate::system::roots::Roots;
use crate::system::workload::classify;
use crate::types::workload::{WorkloadInfo, WorkloadKind};

/// What a cgroup path says about the workload it holds: the coarse key `hmn serve` groups
/// device memory by. [`crate::workload::WorkloadInfo`] has everything the path names.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Workload {
    /// A Kubernetes pod, by UID (`kubepods…pod<uid>…`).
    Pod(String),
    /// A container (Docker, containerd, CRI-O, Podman), by the first 12 hex digits of its id.
    Container(String),
    /// A systemd unit (`*.service`, `*.scope`).
    Unit(String),
    /// Anything else, by path.
    Other(String),
    /// A Slurm job, by id (`job_<n>` under Slurm's cgroup hierarchy).
    SlurmJob(String),
}

impl Workload {
    /// `pod`, `container`, `unit`, `slurm` or `other`.
    pub fn kind(&self) -> &'static str {
        match self {
            Workload::Pod(_) => "pod",
            Workload::Container(_) => "container",
            Workload::Unit(_) => "unit",
            Workload::SlurmJob(_) => "slurm",
            Workload::Other(_) => "other",
        }
    }

    /// The pod UID, container id, unit name, job id or path.
    pub fn name(&self) -> &str {
        match self {
            Workload::Pod(n)
            | Workload::Container(n)
            | Workload::Unit(n)
            | Workload::SlurmJob(n)
            | Workload::Other(n) => n,
        }
    }
}

impl From<&WorkloadInfo> for Workload {
    fn from(w: &WorkloadInfo) -> Workload {
        let or_path = |v: Option<String>| v.unwrap_or_else(|| w.cgroup.clone());
        match w.kind {
            WorkloadKind::Pod => Workload::Pod(or_path(w.pod_uid.clone())),
            WorkloadKind::Container => Workload::Container(or_path(
                w.container_id
                    .as_deref()
                    .map(|id| id.get(..12).unwrap_or(id).to_string()),
            )),
            WorkloadKind::Slurm => Workload::SlurmJob(or_path(w.slurm_job.map(|j| j.to_string()))),
            WorkloadKind::Unit => Workload::Unit(or_path(w.unit.clone())),
            _ => Workload::Other(w.cgroup.clone()),
        }
    }
}

/// Classifies a cgroup path (pure; the rule is [`crate::workload::classify`]). A pod wins over
/// the container inside it; a container over the unit (scope) that holds it.
///
/// ```
/// use hypomnesis::cgroup::{workload, Workload};
/// let p = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1f2e3d4c_5b6a_7980_a1b2_c3d4e5f60718.slice/cri-containerd-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.scope";
/// assert_eq!(workload(p), Workload::Pod("1f2e3d4c-5b6a-7980-a1b2-c3d4e5f60718".into()));
/// assert_eq!(workload("/system.slice/ollama.service"), Workload::Unit("ollama.service".into()));
/// ```
pub fn workload(path: &str) -> Workload {
    classify(path).map_or_else(|| Workload::Other("/".to_string()), |w| Workload::from(&w))
}

/// The workload process `pid` belongs to, from `<proc>/<pid>/cgroup` (the path
/// [`crate::workload::path_of`] picks). `None` when the file cannot be read or names no group
/// below the root.
pub fn process_workload(roots: &Roots, pid: u32) -> Option<Workload> {
    crate::system::workload::of_process(roots, pid).map(|w| Workload::from(&w))
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn a_process_workload_from_its_cgroup_file() {
        let dir = tempfile::tempdir().unwrap();
        let roots = Roots::system().with_proc(dir.path());
        let write = |pid: u32, text: &str| {
            std::fs::create_dir_all(dir.path().join(pid.to_string())).unwrap();
            std::fs::write(dir.path().join(format!("{pid}/cgroup")), text).unwrap();
        };
        write(10, "0::/system.slice/ollama.service\n");
        // Hybrid host: the v2 line is the root, the v1 memory controller names the group.
        write(11, "12:memory:/system.slice/vllm.service\n0::/\n");
        write(12, "0::/\n");
        assert_eq!(
            process_workload(&roots, 10),
            Some(Workload::Unit("ollama.service".into()))
        );
        assert_eq!(
            process_workload(&roots, 11),
            Some(Workload::Unit("vllm.service".into()))
        );
        assert_eq!(process_workload(&roots, 12), None);
        assert_eq!(process_workload(&roots, 13), None, "no such process");
    }

    #[test]
    fn workloads_from_paths() {
        let id = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        assert_eq!(
            workload(&format!("/docker/{id}")),
            Workload::Container("0123456789ab".into())
        );
        assert_eq!(
            workload(&format!("/system.slice/docker-{id}.scope")),
            Workload::Container("0123456789ab".into())
        );
        assert_eq!(
            workload(&format!("/machine.slice/libpod-{id}.scope/container")),
            Workload::Container("0123456789ab".into())
        );
        assert_eq!(
            workload("/kubepods/besteffort/pod1f2e3d4c-5b6a-7980-a1b2-c3d4e5f60718/abc"),
            Workload::Pod("1f2e3d4c-5b6a-7980-a1b2-c3d4e5f60718".into())
        );
        assert_eq!(
            workload("/user.slice/user-1000.slice/session-2.scope"),
            Workload::Unit("session-2.scope".into())
        );
        assert_eq!(workload("/"), Workload::Other("/".into()));
        assert_eq!(
            workload("/podcast/x"),
            Workload::Other("/podcast/x".into()),
            "not a pod uid"
        );
        assert_eq!(workload(""), Workload::Other("/".into()));
        let job = workload("/system.slice/slurmstepd.scope/job_4242/step_0/user/task_0");
        assert_eq!(job, Workload::SlurmJob("4242".into()));
        assert_eq!((job.kind(), job.name()), ("slurm", "4242"));
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
