//! Which workload a process belongs to, read from its cgroup path: a container (runtime and
//! id: Docker, containerd, CRI-O, Podman), a Kubernetes pod (UID, and the container inside
//! it), a Slurm job (and step), a systemd unit — one rule for `hmn ps`, `hmn watch` and
//! `hmn serve` (whose coarse key, [`Workload`], is [`WorkloadInfo::key`]).
//!
//! The classification ([`classify`]) is a pure function of the path, component by component:
//!
//! | component | means |
//! |---|---|
//! | `pod<uid>`, `kubepods-<qos>-pod<uid>.slice` (UID with `_` for `-`) | a Kubernetes pod |
//! | `docker-<id>.scope`, `/docker/<id>` | a Docker container |
//! | `cri-containerd-<id>.scope` | a containerd container (Kubernetes, systemd driver) |
//! | `crio-<id>.scope`, `crio-conmon-<id>.scope` | a CRI-O container (or its monitor) |
//! | `libpod-<id>.scope`, `libpod-conmon-<id>.scope`, `/libpod_parent/libpod-<id>` | a Podman container |
//! | a bare 64-hex-digit id (`/kubepods/<qos>/pod<uid>/<id>`, cgroupfs driver) | a container, runtime unknown |
//! | `job_<n>` (and `step_<s>`) under `slurm` (v1) or `…slurmstepd.scope` (v2) | a Slurm job |
//! | `*.service`, `*.scope` | a systemd unit (the innermost) |
//!
//! Nested containers (Kubernetes in Docker, as kind runs it) give the innermost container.
//! The kind is the most specific thing found: pod, then container, then Slurm job, then unit;
//! a path with none of them is `other`, and the root (`/`, what a process in a private cgroup
//! namespace sees of itself) is no workload at all.
//!
//! The names of a pod or container (namespace, pod, container) come from the node's own files
//! where they are readable ([`names`]: the kubelet's log layout, Docker's and the OCI
//! bundles' configs), filled in by the probe and by [`of_process_named`] (a [`names::NameCache`]
//! kept by the caller).

// Names from the node's own files (the kubelet's log layout, Docker's and the OCI bundles'
// configs).
pub mod names;

use crate::system::cgroup::lines::{CgroupLine, parse_proc_cgroup, v2_path};
use crate::system::fsread;
use crate::system::roots::Roots;
// The vocabulary (the data model's `GpuProcess::workload`), at this module's public path too.
pub use crate::types::workload::{
    ContainerRuntime, NameSource, Workload, WorkloadInfo, WorkloadKind,
};

/// Classifies a cgroup path (pure; see the [module docs](self)). `None` for the root.
///
/// ```
/// use hypomnesis::workload::{classify, ContainerRuntime, WorkloadKind};
/// let w = classify("/system.slice/docker-4e9a6f0b6d7c1f1a0e8c8f5a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c.scope").unwrap();
/// assert_eq!(w.kind, WorkloadKind::Container);
/// assert_eq!(w.runtime, Some(ContainerRuntime::Docker));
/// assert_eq!(w.label(), "docker:4e9a6f0b6d7c");
/// assert!(classify("/").is_none());
/// ```
pub fn classify(path: &str) -> Option<WorkloadInfo> {
    let comps: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
    if comps.is_empty() {
        return None;
    }
    let mut w = WorkloadInfo::new(WorkloadKind::Other, path);
    let mut in_slurm = false;
    for (i, c) in comps.iter().enumerate() {
        let parent = i.checked_sub(1).and_then(|p| comps.get(p)).copied();
        if let Some(uid) = pod_uid(c) {
            w.pod_uid = Some(uid);
        }
        if let Some((runtime, id)) = container(c, parent) {
            w.runtime = runtime;
            w.container_id = Some(id.to_string());
        }
        if *c == "slurm" || c.ends_with("slurmstepd.scope") {
            in_slurm = true;
        }
        if in_slurm {
            if let Some(job) = c.strip_prefix("job_").and_then(|j| j.parse().ok()) {
                w.slurm_job = Some(job);
            }
            if let Some(step) = c.strip_prefix("step_").filter(|s| !s.is_empty()) {
                w.slurm_step = Some(step.to_string());
            }
        }
        if c.ends_with(".service") || c.ends_with(".scope") {
            w.unit = Some((*c).to_string());
        }
    }
    w.kind = if w.pod_uid.is_some() {
        WorkloadKind::Pod
    } else if w.container_id.is_some() {
        WorkloadKind::Container
    } else if w.slurm_job.is_some() {
        WorkloadKind::Slurm
    } else if w.unit.is_some() {
        WorkloadKind::Unit
    } else {
        WorkloadKind::Other
    };
    Some(w)
}

/// The path to classify from `/proc/<pid>/cgroup`'s lines: the v2 path unless it is the root
/// (a hybrid host, or a private cgroup namespace), else the first non-root v1 path of the
/// `memory`, then `name=systemd`, then any other controller.
pub fn path_of(lines: &[CgroupLine]) -> Option<&str> {
    let not_root = |p: &&str| *p != "/";
    v2_path(lines).filter(not_root).or_else(|| {
        let with = |name: &str| {
            lines
                .iter()
                .filter(|l| l.controllers.iter().any(|c| c == name))
                .map(|l| l.path.as_str())
                .find(not_root)
        };
        with("memory").or_else(|| with("name=systemd")).or_else(|| {
            lines
                .iter()
                .filter(|l| l.hierarchy != 0)
                .map(|l| l.path.as_str())
                .find(not_root)
        })
    })
}

/// The workload of process `pid`, from `<proc>/<pid>/cgroup`. `None` when the file cannot
/// be read, or the process sits in the root cgroup as far as this proc root can tell.
pub fn of_process(roots: &Roots, pid: u32) -> Option<WorkloadInfo> {
    let lines = fsread::read_pid_file(roots, pid, "cgroup", |t| Ok(parse_proc_cgroup(t))).ok()?;
    path_of(&lines).and_then(classify)
}

/// [`of_process`] with the names of its pod or container (namespace, pod, container; Docker's
/// name) filled from the node's files where they name it, through `names` (kept between
/// calls: the kubelet index and each container's names are read once, not per process). The
/// one rule for every caller that reads a process's workload itself (`hmn top`, `hmn watch
/// PID`) and for the probe's own rows.
pub fn of_process_named(roots: &Roots, pid: u32, names: &names::NameCache) -> Option<WorkloadInfo> {
    let mut w = of_process(roots, pid)?;
    names.fill(roots, &mut w);
    Some(w)
}

/// `pod<uid>` in a component (`pod<uid>`, `kubepods-besteffort-pod<uid>.slice`): a 36-character
/// UUID with dashes, or with underscores in systemd slice names.
fn pod_uid(component: &str) -> Option<String> {
    let c = component.strip_suffix(".slice").unwrap_or(component);
    let at = c.rfind("pod")?;
    if at != 0 && !c[..at].ends_with('-') {
        return None;
    }
    let uid = &c[at + 3..];
    let shaped = uid.len() == 36
        && uid.char_indices().all(|(i, ch)| match i {
            8 | 13 | 18 | 23 => ch == '-' || ch == '_',
            _ => ch.is_ascii_hexdigit(),
        });
    shaped.then(|| uid.replace('_', "-").to_ascii_lowercase())
}

/// A container id in a component: a runtime's marker and 64 hex digits, or a bare id whose
/// runtime the parent tells (`/docker/<id>`), or not (a pod's container under the cgroupfs
/// driver).
fn container<'a>(
    component: &'a str,
    parent: Option<&str>,
) -> Option<(Option<ContainerRuntime>, &'a str)> {
    const MARKERS: [(&str, ContainerRuntime); 7] = [
        ("docker-", ContainerRuntime::Docker),
        ("cri-containerd-", ContainerRuntime::Containerd),
        ("crio-conmon-", ContainerRuntime::CriO),
        ("crio-", ContainerRuntime::CriO),
        ("libpod-conmon-", ContainerRuntime::Podman),
        ("libpod-", ContainerRuntime::Podman),
        ("containerd-", ContainerRuntime::Containerd),
    ];
    let is_id = |s: &str| s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit());
    let c = component.strip_suffix(".scope").unwrap_or(component);
    if let Some((runtime, id)) = MARKERS
        .iter()
        .find_map(|(m, r)| c.strip_prefix(m).map(|id| (*r, id)))
    {
        return is_id(id).then_some((Some(runtime), id));
    }
    if !is_id(c) {
        return None;
    }
    let runtime = match parent {
        Some("docker") => Some(ContainerRuntime::Docker),
        Some("libpod_parent") => Some(ContainerRuntime::Podman),
        _ => None,
    };
    Some((runtime, c))
}

#[cfg(test)]
mod tests;
