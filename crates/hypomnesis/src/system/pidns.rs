//! PID namespaces: which namespace the proc root shows, whether the host PIDs NVML reports
//! name processes in it, whether `hmn` itself runs in a container, and each process's pid in
//! its own (innermost) namespace (`NSpid`).
//!
//! NVML (and so `nvidia-smi`) reports every process by its pid in the host's, initial, PID
//! namespace. A `/proc` mounted in another namespace (a container's own) numbers processes
//! differently: a host pid there names no process, or an unrelated one. So NVML rows are named
//! only when the proc root is the host's — `hmn` on the host, a container run with
//! `--pid=host`, or the host's `/proc` mounted read-only and passed as `--proc-root`.
//!
//! # The heuristic ([`view`], over [`NamespaceFacts`] that [`gather`] reads)
//! 1. `<proc>/1/ns/pid` readable (root, or `hidepid` off with ptrace access to pid 1): the
//!    proc root's namespace is the host's exactly when its inode is the initial namespace's
//!    fixed one, [`INIT_PID_NS_INODE`] (`PROC_PID_INIT_INO`, 0xEFFFFFFC). Definitive.
//! 2. Else, by `hmn` itself in that proc root (`<proc>/self/status`): `NSpid` with more than
//!    one entry means the proc root is an outer namespace of `hmn`'s ([`ProcRootNamespace::Ancestor`]:
//!    the host's `/proc` mounted in a container, as a rule); one entry means it is `hmn`'s own,
//!    the host's when `<proc>/self/ns/pid` is the initial namespace, a container's otherwise.
//! 3. Else (no `self` under the proc root, nothing readable): on kernels older than 4.14 the
//!    first line of `<proc>/1/sched` shows pid 1's host pid (`bash (48213, #threads: 1)`), so
//!    a number other than 1 means a container; otherwise the namespace is unknown, and NVML
//!    rows are named as on a host.
//!
//! Whether `hmn` runs in a container is decided the same way: `<proc>/self/ns/pid` other than
//! the initial namespace is definitive. Without it, container markers count: `/.dockerenv`
//! and `/run/.containerenv` (under `<proc>/self/root`), a `container=` or
//! `KUBERNETES_SERVICE_HOST=` variable in `<proc>/self/environ`, an own cgroup that names a
//! container or pod. Markers alone are weak: a VM image built from a container image keeps
//! `/.dockerenv` while running in the initial namespace, which rule 1 catches.

use std::path::Path;

use crate::system::fsread::{self, Cap};
use crate::system::roots::Roots;
use crate::system::workload::{self, WorkloadKind};
use crate::types::spelling::spelled;

#[cfg(feature = "serde")]
use serde::Serialize;

/// The inode of the initial PID namespace (`PROC_PID_INIT_INO` in `include/linux/proc_ns.h`,
/// fixed since Linux 3.8): `readlink /proc/<pid>/ns/pid` on the host gives `pid:[4026531836]`.
pub const INIT_PID_NS_INODE: u64 = 0xEFFF_FFFC;

spelled! {
    /// Which PID namespace the proc root shows.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    #[non_exhaustive]
    pub enum ProcRootNamespace {
        /// The host's (initial) namespace: NVML's pids are its pids.
        Host = "host",
        /// An outer namespace of `hmn`'s own (the host's `/proc` mounted in a container, as a
        /// rule): NVML's pids are taken to be its pids.
        Ancestor = "ancestor",
        /// A container's own namespace: NVML's host pids name no process in it (or a wrong
        /// one).
        Container = "container",
        /// Nothing told; NVML rows are named as on a host.
        Unknown = "unknown",
    }
}

/// What [`gather`] read; each `None` or empty field could not be read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct NamespaceFacts {
    /// The inode of `<proc>/self/ns/pid` (`hmn`'s own namespace).
    pub self_ns: Option<u64>,
    /// The inode of `<proc>/1/ns/pid` (the proc root's namespace).
    pub init_ns: Option<u64>,
    /// `NSpid` of `<proc>/self/status`: `hmn`'s pid in the proc root's namespace first.
    pub self_nspid: Vec<u32>,
    /// The pid on the first line of `<proc>/1/sched`.
    pub sched_pid1: Option<u32>,
    /// Container markers seen (see the [module docs](self)), as short texts.
    pub markers: Vec<String>,
}

impl NamespaceFacts {
    /// Facts for a fixture or a test.
    pub fn new(
        self_ns: Option<u64>,
        init_ns: Option<u64>,
        self_nspid: Vec<u32>,
        sched_pid1: Option<u32>,
        markers: Vec<String>,
    ) -> NamespaceFacts {
        NamespaceFacts {
            self_ns,
            init_ns,
            self_nspid,
            sched_pid1,
            markers,
        }
    }
}

/// The verdict over [`NamespaceFacts`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize))]
#[non_exhaustive]
pub struct PidView {
    /// Which namespace the proc root shows.
    pub proc_root: ProcRootNamespace,
    /// Whether `hmn` runs in a container (`None`: nothing told).
    pub in_container: Option<bool>,
    /// Why: the facts that decided, in words.
    pub evidence: Vec<String>,
}

impl PidView {
    /// Whether NVML's host pids name processes under the proc root.
    pub fn host_pids_visible(&self) -> bool {
        self.proc_root != ProcRootNamespace::Container
    }
}

/// Decides from the facts (pure; the rules are in the [module docs](self)).
pub fn view(f: &NamespaceFacts) -> PidView {
    let mut evidence = Vec::new();
    let ns = |ino: u64| {
        if ino == INIT_PID_NS_INODE {
            "the initial namespace".to_string()
        } else {
            format!("pid:[{ino}]")
        }
    };
    let in_container = match f.self_ns {
        Some(ino) => {
            evidence.push(format!("hmn's PID namespace is {}", ns(ino)));
            Some(ino != INIT_PID_NS_INODE)
        }
        None if !f.markers.is_empty() => {
            evidence.push(format!("container markers: {}", f.markers.join(", ")));
            Some(true)
        }
        None => None,
    };
    let proc_root = if let Some(ino) = f.init_ns {
        evidence.push(format!("the proc root's pid 1 is in {}", ns(ino)));
        if ino == INIT_PID_NS_INODE {
            ProcRootNamespace::Host
        } else {
            ProcRootNamespace::Container
        }
    } else if f.self_nspid.len() > 1 {
        evidence.push(format!(
            "hmn is pid {} in the proc root, {} namespace levels above its own",
            f.self_nspid[0],
            f.self_nspid.len() - 1
        ));
        ProcRootNamespace::Ancestor
    } else if !f.self_nspid.is_empty() {
        match in_container {
            Some(false) => ProcRootNamespace::Host,
            Some(true) => {
                evidence.push("the proc root is hmn's own namespace".to_string());
                ProcRootNamespace::Container
            }
            None => ProcRootNamespace::Unknown,
        }
    } else {
        match f.sched_pid1 {
            Some(p) if p != 1 => {
                evidence.push(format!("<proc>/1/sched shows pid 1 as host pid {p}"));
                ProcRootNamespace::Container
            }
            _ => ProcRootNamespace::Unknown,
        }
    };
    PidView {
        proc_root,
        in_container,
        evidence,
    }
}

/// Reads the facts under `roots` (see the [module docs](self)).
pub fn gather(roots: &Roots) -> NamespaceFacts {
    let proc = &roots.proc;
    let link = |p: &Path| {
        std::fs::read_link(p)
            .ok()
            .and_then(|l| parse_ns_link(&l.to_string_lossy()))
    };
    let self_nspid = fsread::read_string(&proc.join("self/status"), Cap::STATUS)
        .map(|t| parse_nspid(&t))
        .unwrap_or_default();
    let sched_pid1 = fsread::read_string(&proc.join("1/sched"), Cap::PROC_OTHER)
        .ok()
        .and_then(|t| parse_sched_pid(&t));
    let mut markers = Vec::new();
    for (file, name) in [
        ("self/root/.dockerenv", "/.dockerenv"),
        ("self/root/run/.containerenv", "/run/.containerenv"),
    ] {
        if proc.join(file).exists() {
            markers.push(name.to_string());
        }
    }
    if let Ok(env) = fsread::read_bytes(&proc.join("self/environ"), Cap::PROC_OTHER) {
        for var in env.split(|b| *b == 0) {
            let var = String::from_utf8_lossy(var);
            if let Some(v) = var.strip_prefix("container=") {
                markers.push(format!("container={v}"));
            } else if var.starts_with("KUBERNETES_SERVICE_HOST=") {
                markers.push("KUBERNETES_SERVICE_HOST".to_string());
            }
        }
    }
    let own = fsread::read_string(&proc.join("self/cgroup"), Cap::PROC_CGROUP)
        .ok()
        .and_then(|t| {
            let lines = crate::system::cgroup::parse_proc_cgroup(&t);
            workload::path_of(&lines).and_then(workload::classify)
        });
    if let Some(w) = own.filter(|w| matches!(w.kind, WorkloadKind::Pod | WorkloadKind::Container)) {
        markers.push(format!("own cgroup {}", w.label()));
    }
    NamespaceFacts {
        self_ns: link(&proc.join("self/ns/pid")),
        init_ns: link(&proc.join("1/ns/pid")),
        self_nspid,
        sched_pid1,
        markers,
    }
}

/// `NSpid` of a `status` text (pure): the pid in each namespace, the proc root's first.
pub fn parse_nspid(status: &str) -> Vec<u32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))
        .map(|v| {
            v.split_ascii_whitespace()
                .map_while(|p| p.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The inode of a namespace link's text, `pid:[4026531836]` (pure).
pub fn parse_ns_link(text: &str) -> Option<u64> {
    text.strip_prefix("pid:[")?.strip_suffix(']')?.parse().ok()
}

/// The pid on the first line of `/proc/<pid>/sched`, `systemd (1, #threads: 1)` (pure).
pub fn parse_sched_pid(text: &str) -> Option<u32> {
    let first = text.lines().next()?;
    let open = first.rfind(" (")?;
    first[open + 2..].split(',').next()?.trim().parse().ok()
}

/// Process `pid`'s pid in its own, innermost namespace, when that differs from `pid`.
pub fn innermost_pid(roots: &Roots, pid: u32) -> Option<u32> {
    fsread::read_pid_file(roots, pid, "status", |t| Ok(innermost_of(t, pid)))
        .ok()
        .flatten()
}

/// [`innermost_pid`] from `pid`'s `status` text (pure).
pub fn innermost_of(status: &str, pid: u32) -> Option<u32> {
    parse_nspid(status).last().copied().filter(|p| *p != pid)
}

/// The one-line reason and remedy for an NVML row whose host pid this proc root cannot show.
pub fn not_visible_detail(pid: u32, proc_root: &Path) -> String {
    format!(
        "NVML reports host PID {pid}, which {} (a container's own PID namespace) does not \
         show: run the container with --pid=host, or mount the host's /proc read-only and \
         pass --proc-root",
        proc_root.display()
    )
}

/// Whether a row's pid may be looked up under the proc root: a DRM row always (its pid comes
/// from that very proc root), an NVIDIA row only when the proc root shows host pids.
pub(crate) fn visible(view: &PidView, row: &crate::types::GpuProcess) -> bool {
    use crate::types::Source;
    view.host_pids_visible() || !matches!(row.source, Source::Nvml | Source::NvidiaSmi)
}

#[cfg(test)]
mod tests;
