//! What a workload is: [`WorkloadInfo`] (the kind, container runtime and id, pod UID, Slurm job
//! and step, systemd unit of the cgroup a process sits in), [`WorkloadKind`] and
//! [`ContainerRuntime`], and the coarse key derived from it ([`Workload`], by
//! [`WorkloadInfo::key`]). The data model's `GpuProcess::workload`; the rule that reads one from
//! a cgroup path is `system::workload` (public as `hypomnesis::workload`).

#[cfg(feature = "serde")]
use serde::{Deserialize, Serialize};

use super::spelling::spelled;

spelled! {
    /// The container runtime named by a cgroup path.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
    #[non_exhaustive]
    pub enum ContainerRuntime {
        /// Docker (`docker-<id>.scope`, `/docker/<id>`).
        Docker = "docker",
        /// containerd's CRI plugin (`cri-containerd-<id>.scope`).
        Containerd = "containerd",
        /// CRI-O (`crio-<id>.scope`).
        CriO = "cri-o",
        /// Podman (`libpod-<id>.scope`).
        Podman = "podman",
    }
}

spelled! {
    /// The most specific kind of workload a path names.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
    #[non_exhaustive]
    pub enum WorkloadKind {
        /// A Kubernetes pod.
        Pod = "pod",
        /// A container outside Kubernetes.
        Container = "container",
        /// A Slurm job.
        Slurm = "slurm",
        /// A systemd unit.
        Unit = "unit",
        /// A cgroup with none of the above.
        Other = "other",
    }
}

spelled! {
    /// Where a workload's names were read (never from an API call: files the node keeps).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
    #[non_exhaustive]
    pub enum NameSource {
        /// The kubelet's log layout (`/var/log/pods`, `/var/log/containers`).
        KubeletLogs = "kubelet_logs",
        /// Docker's container config (`config.v2.json`).
        Docker = "docker",
        /// The OCI runtime bundle's annotations (containerd, CRI-O).
        OciBundle = "oci_bundle",
    }
}

/// Everything a cgroup path says about the workload holding a process. Fields that the path
/// does not name are `None` (and omitted from JSON); the names (`namespace`, `pod_name`,
/// `container_name`) come from the node's own files where readable
/// (`hypomnesis::workload::names`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
#[non_exhaustive]
pub struct WorkloadInfo {
    /// The most specific kind found.
    pub kind: WorkloadKind,
    /// The container runtime, when the path names it.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub runtime: Option<ContainerRuntime>,
    /// The full container id (64 hex digits), innermost when containers nest.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub container_id: Option<String>,
    /// The Kubernetes pod UID, with dashes (`1f2e3d4c-5b6a-…`).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub pod_uid: Option<String>,
    /// The Slurm job id.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub slurm_job: Option<u64>,
    /// The Slurm step (`0`, `batch`, `extern`, `interactive`).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub slurm_step: Option<String>,
    /// The innermost systemd unit (`ollama.service`, `docker-<id>.scope`).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub unit: Option<String>,
    /// The cgroup path this was read from.
    pub cgroup: String,
    /// The Kubernetes namespace.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub namespace: Option<String>,
    /// The Kubernetes pod's name.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub pod_name: Option<String>,
    /// The container's name (Kubernetes' container name, or Docker's without its `/`).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub container_name: Option<String>,
    /// Where the names were read.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub names_from: Option<NameSource>,
}

impl WorkloadInfo {
    /// A workload with only its kind and cgroup path; the rest `None`.
    pub fn new(kind: WorkloadKind, cgroup: impl Into<String>) -> WorkloadInfo {
        WorkloadInfo {
            kind,
            runtime: None,
            container_id: None,
            pod_uid: None,
            slurm_job: None,
            slurm_step: None,
            unit: None,
            cgroup: cgroup.into(),
            namespace: None,
            pod_name: None,
            container_name: None,
            names_from: None,
        }
    }

    /// A short label for a table: `<namespace>/<pod>/<container>` (or `<namespace>/<pod>`)
    /// where the names are known, else `pod:<uid>/<runtime>:<12 hex>`; `docker:<name>` or
    /// `docker:<12 hex>`; `slurm:<job>.<step>`, `unit:<name>`, or the path.
    pub fn label(&self) -> String {
        if let (WorkloadKind::Pod, Some(ns), Some(pod)) =
            (self.kind, &self.namespace, &self.pod_name)
        {
            return match &self.container_name {
                Some(c) => format!("{ns}/{pod}/{c}"),
                None => format!("{ns}/{pod}"),
            };
        }
        if let (WorkloadKind::Container, Some(name)) = (self.kind, &self.container_name) {
            let runtime = self.runtime.map_or("container", ContainerRuntime::as_str);
            return format!("{runtime}:{name}");
        }
        self.id_label()
    }

    /// The label without names (ids only).
    fn id_label(&self) -> String {
        let container = || {
            self.container_id.as_deref().map(|id| {
                let short = id.get(..12).unwrap_or(id);
                match self.runtime {
                    Some(r) => format!("{}:{short}", r.as_str()),
                    None => format!("container:{short}"),
                }
            })
        };
        match self.kind {
            WorkloadKind::Pod => {
                let uid = self.pod_uid.as_deref().unwrap_or("?");
                match container() {
                    Some(c) => format!("pod:{uid}/{c}"),
                    None => format!("pod:{uid}"),
                }
            }
            WorkloadKind::Container => container().unwrap_or_else(|| self.cgroup.clone()),
            WorkloadKind::Slurm => match (self.slurm_job, &self.slurm_step) {
                (Some(j), Some(s)) => format!("slurm:{j}.{s}"),
                (Some(j), None) => format!("slurm:{j}"),
                _ => self.cgroup.clone(),
            },
            WorkloadKind::Unit => format!("unit:{}", self.unit.as_deref().unwrap_or("?")),
            WorkloadKind::Other => self.cgroup.clone(),
        }
    }

    /// Whether `pattern` occurs, case-insensitively, in the label, the id label or the cgroup
    /// path (so a full container id, a pod UID or name, a namespace, `slurm`, `docker` or a
    /// unit name all match).
    pub fn matches(&self, pattern: &str) -> bool {
        let p = pattern.to_lowercase();
        self.label().to_lowercase().contains(&p)
            || self.id_label().to_lowercase().contains(&p)
            || self.cgroup.to_lowercase().contains(&p)
    }

    /// The coarse key `hmn serve` groups device memory by: the kind and one name — the pod
    /// UID, the container id's first 12 hex digits, the Slurm job id, the unit — or the path
    /// where the kind has none.
    pub fn key(&self) -> Workload {
        let or_path = |v: Option<String>| v.unwrap_or_else(|| self.cgroup.clone());
        match self.kind {
            WorkloadKind::Pod => Workload::Pod(or_path(self.pod_uid.clone())),
            WorkloadKind::Container => Workload::Container(or_path(
                self.container_id
                    .as_deref()
                    .map(|id| id.get(..12).unwrap_or(id).to_string()),
            )),
            WorkloadKind::Slurm => {
                Workload::SlurmJob(or_path(self.slurm_job.map(|j| j.to_string())))
            }
            WorkloadKind::Unit => Workload::Unit(or_path(self.unit.clone())),
            WorkloadKind::Other => Workload::Other(self.cgroup.clone()),
        }
    }
}

/// A workload as one name of its kind: [`WorkloadInfo::key`], the coarse key `hmn serve`
/// groups device memory by (its order ranks equal sums).
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
    /// Its kind, spelled (`Display`, [`WorkloadKind::as_str`]) `pod`, `container`, `unit`,
    /// `slurm` or `other`.
    pub const fn kind(&self) -> WorkloadKind {
        match self {
            Workload::Pod(_) => WorkloadKind::Pod,
            Workload::Container(_) => WorkloadKind::Container,
            Workload::Unit(_) => WorkloadKind::Unit,
            Workload::SlurmJob(_) => WorkloadKind::Slurm,
            Workload::Other(_) => WorkloadKind::Other,
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
    /// [`WorkloadInfo::key`].
    fn from(w: &WorkloadInfo) -> Workload {
        w.key()
    }
}
