//! The checks: pure functions from [`Facts`] to [`Check`]s, one per concern.

use super::facts::{DevNode, Facts, NvmlState};
use super::kernel::{fdinfo_support, parse_release};
use super::model::Check;
use super::userns::{is_initial_uid_map, uid_outside};
use crate::system::pidns::ProcRootNamespace;

/// `CAP_DAC_READ_SEARCH`.
const CAP_DAC_READ_SEARCH: u32 = 2;
/// `CAP_SYS_PTRACE`.
const CAP_SYS_PTRACE: u32 = 19;
/// `CAP_PERFMON`.
const CAP_PERFMON: u32 = 38;

/// Linux's checks over the facts, in the order of the [module docs](super).
pub(super) fn linux(f: &Facts) -> Vec<Check> {
    vec![
        nvml(f),
        nvidia_smi(f),
        nvml_mode(f, "accounting"),
        nvml_mode(f, "persistence"),
        device_nodes(f),
        hidepid(f),
        ptrace(f),
        kernel(f),
        suspended(f),
        cgroup(f),
        container(f),
        super::pools::memory_pool(&f.pools),
    ]
}

pub(super) fn nvidia_gpus(f: &Facts) -> String {
    format!(
        "{} NVIDIA GPU{} on the PCI bus",
        f.nvidia_pci_devices,
        if f.nvidia_pci_devices == 1 { "" } else { "s" }
    )
}

fn nvml(f: &Facts) -> Check {
    let n = &f.nvml;
    let kmod = f.kernel_module_version.as_deref();
    let versions = || {
        format!(
            "library {}, kernel module {}",
            n.library_version.as_deref().unwrap_or("?"),
            kmod.unwrap_or("?")
        )
    };
    match &n.state {
        NvmlState::Loaded => {
            let from = n
                .loaded_from
                .as_ref()
                .map_or_else(|| n.library.clone(), |p| p.display().to_string());
            let cuda = n
                .cuda_version
                .map(|v| format!(", CUDA {}.{}", v / 1000, (v % 1000) / 10))
                .unwrap_or_default();
            let saw = format!(
                "NVML {} loaded from {from}; driver {}{cuda}; {} device{}",
                n.library_version.as_deref().unwrap_or("?"),
                n.driver_version.as_deref().unwrap_or("?"),
                n.devices.len(),
                if n.devices.len() == 1 { "" } else { "s" },
            );
            match (n.driver_version.as_deref(), kmod) {
                (Some(d), Some(k)) if d != k => Check::fail(
                    "nvml",
                    format!("{saw}; but the kernel module is {k}"),
                    Some(reload_remedy()),
                ),
                _ => Check::ok("nvml", saw),
            }
        }
        NvmlState::Failed { code: Some(18), .. } => Check::fail(
            "nvml",
            format!(
                "nvmlInit failed: driver/library version mismatch (18): {}",
                versions()
            ),
            Some(reload_remedy()),
        ),
        NvmlState::Failed { code, reason } => Check::fail(
            "nvml",
            format!(
                "{} is here but broken: {reason}{}",
                n.library,
                code.map(|c| format!(" (nvmlInit code {c})")).unwrap_or_default()
            ),
            Some(match code {
                Some(4) => "give this user access to /dev/nvidiactl and /dev/nvidia* (see device-nodes), or run as root".to_string(),
                _ => "check the NVIDIA driver installation (dmesg | grep -i nvrm); pass --nvml-lib PATH to use another libnvidia-ml.so.1".to_string(),
            }),
        ),
        NvmlState::Absent(reason) if f.nvidia_pci_devices > 0 => Check::fail(
            "nvml",
            format!("{}, but NVML is absent: {reason}", nvidia_gpus(f)),
            Some(
                "install the NVIDIA driver (libnvidia-ml.so.1) or pass --nvml-lib PATH; in a \
                 container, run it with the NVIDIA Container Toolkit (docker run --gpus all, \
                 Kubernetes runtimeClassName: nvidia)"
                    .to_string(),
            ),
        ),
        NvmlState::Absent(reason) => Check::ok(
            "nvml",
            format!("NVML absent ({reason}), and no NVIDIA GPU on the PCI bus"),
        ),
    }
}

fn reload_remedy() -> String {
    "the installed NVIDIA library does not match the loaded kernel module (a driver upgrade \
     without a reboot): reboot, or reload the modules (sudo rmmod nvidia_uvm nvidia_drm \
     nvidia_modeset nvidia && sudo modprobe nvidia)"
        .to_string()
}

pub(super) fn nvidia_smi(f: &Facts) -> Check {
    let nvml_ok = f.nvml.state == NvmlState::Loaded;
    match &f.nvidia_smi {
        Ok(p) => Check::ok(
            "nvidia-smi",
            format!("{} (the fallback when NVML fails)", p.display()),
        ),
        // Not needed where NVML answers, or where there is no NVIDIA GPU: no library and none
        // on the PCI bus. An NVML that is here but broken says a GPU is (a VM or a container
        // may show no PCI device): then the fallback is needed.
        Err(why)
            if nvml_ok
                || (f.nvidia_pci_devices == 0 && matches!(f.nvml.state, NvmlState::Absent(_))) =>
        {
            Check::ok(
                "nvidia-smi",
                format!(
                    "nvidia-smi {why} (not needed: {})",
                    if nvml_ok {
                        "NVML answers"
                    } else {
                        "no NVIDIA GPU"
                    }
                ),
            )
        }
        Err(why) => Check::warn(
            "nvidia-smi",
            format!("nvidia-smi {why}, and NVML cannot answer: nothing reads the NVIDIA GPUs"),
            Some(
                "install the NVIDIA driver's utilities (nvidia-smi), or pass --nvidia-smi PATH"
                    .to_string(),
            ),
        ),
    }
}

/// `accounting` or `persistence`, over every NVML device.
pub(super) fn nvml_mode(f: &Facts, which: &'static str) -> Check {
    if f.nvml.state != NvmlState::Loaded || f.nvml.devices.is_empty() {
        return Check::ok(which, "no NVIDIA device through NVML: nothing to check");
    }
    let (mut on, mut off, mut unknown) = (Vec::new(), Vec::new(), Vec::new());
    for d in &f.nvml.devices {
        let mode = if which == "accounting" {
            &d.accounting
        } else {
            &d.persistence
        };
        match mode {
            Ok(true) => on.push(d.index.to_string()),
            Ok(false) => off.push(d.index.to_string()),
            Err(e) => unknown.push(format!("GPU {}: {e}", d.index)),
        }
    }
    let mut saw = Vec::new();
    if !on.is_empty() {
        saw.push(format!("on for GPU {}", on.join(", ")));
    }
    if !off.is_empty() {
        saw.push(format!("off for GPU {}", off.join(", ")));
    }
    if !unknown.is_empty() {
        saw.push(format!("unreadable ({})", unknown.join("; ")));
    }
    let saw = format!("{which} mode {}", saw.join("; "));
    if off.is_empty() && unknown.is_empty() {
        return Check::ok(which, saw);
    }
    let (why, remedy) = if which == "accounting" {
        (
            "hmn run samples VRAM, and can miss a spike between samples",
            "sudo nvidia-smi -am 1 (as root; lost when the driver unloads, so keep persistence \
             mode on)",
        )
    } else {
        (
            "the driver tears its state down when the last client exits: the first query after \
             idle is slow, and accounting records are lost",
            "sudo systemctl enable --now nvidia-persistenced (or sudo nvidia-smi -pm 1, lost \
             at reboot)",
        )
    };
    // Unreadable only: how to see the driver's answer, and the same remedy where it applies.
    let remedy = if off.is_empty() {
        if which == "accounting" {
            "nvidia-smi -q -d ACCOUNTING shows the driver's answer: \"Not Supported\" (most \
             GeForce cards) leaves hmn run sampling; otherwise, as root: sudo nvidia-smi -am 1"
        } else {
            "nvidia-smi -q -d PERFORMANCE shows the driver's answer; where persistence mode is \
             supported: sudo systemctl enable --now nvidia-persistenced"
        }
    } else {
        remedy
    };
    Check::warn(which, format!("{saw}: {why}"), Some(remedy.to_string()))
}

fn node_list(nodes: &[&DevNode]) -> String {
    nodes
        .iter()
        .map(|n| {
            format!(
                "{} ({} {:o})",
                n.path.display(),
                n.group.clone().unwrap_or_else(|| n.gid.to_string()),
                n.mode
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn device_nodes(f: &Facts) -> Check {
    let is_nvidia = |n: &&DevNode| {
        n.path
            .file_name()
            .is_some_and(|x| x.to_string_lossy().starts_with("nvidia"))
    };
    let (nvidia, dri): (Vec<&DevNode>, Vec<&DevNode>) = f.dev_nodes.iter().partition(is_nvidia);
    if f.dev_nodes.is_empty() {
        // A GPU is here when the PCI bus, DRM or a working NVML says so.
        if f.nvidia_pci_devices > 0 || !f.drm.is_empty() || !f.nvml.devices.is_empty() {
            return Check::warn(
                "device-nodes",
                format!(
                    "no /dev/nvidia* or /dev/dri/* under {}",
                    f.roots.dev.display()
                ),
                Some(
                    "pass the GPUs into the container (docker run --gpus all for NVIDIA, \
                     --device /dev/dri for others)"
                        .to_string(),
                ),
            );
        }
        return Check::ok("device-nodes", "no GPU device nodes, and no GPU");
    }
    fn denied<'a>(ns: &[&'a DevNode]) -> Vec<&'a DevNode> {
        ns.iter().filter(|n| !n.accessible).copied().collect()
    }
    let groups = |ns: &[&DevNode]| -> Vec<String> {
        let mut g: Vec<String> = ns
            .iter()
            .filter(|n| n.mode & 0o060 == 0o060 && !f.user.in_group(n.gid))
            .map(|n| n.group.clone().unwrap_or_else(|| n.gid.to_string()))
            .collect();
        g.sort();
        g.dedup();
        g
    };
    let join_remedy = |g: Vec<String>, then: &str| {
        if g.is_empty() {
            format!("make the nodes readable and writable for this user; {then}")
        } else {
            format!(
                "sudo usermod -aG {} $USER, then log in again; {then}",
                g.join(",")
            )
        }
    };
    let (nv_denied, dri_denied) = (denied(&nvidia), denied(&dri));
    if !nv_denied.is_empty() {
        return Check::fail(
            "device-nodes",
            format!(
                "no read/write access to {}: NVML cannot talk to the driver",
                node_list(&nv_denied)
            ),
            Some(join_remedy(
                groups(&nv_denied),
                "or set the driver's NVreg_DeviceFileMode/NVreg_DeviceFileGID",
            )),
        );
    }
    if !dri_denied.is_empty() {
        return Check::warn(
            "device-nodes",
            format!(
                "no read/write access to {}: this user's GPU programs cannot open the card (hmn \
                 itself reads /proc and /sys)",
                node_list(&dri_denied)
            ),
            Some(join_remedy(groups(&dri_denied), "or run as root")),
        );
    }
    Check::ok(
        "device-nodes",
        format!(
            "read/write access to {} node{}",
            f.dev_nodes.len(),
            if f.dev_nodes.len() == 1 { "" } else { "s" }
        ),
    )
}

fn hidepid(f: &Facts) -> Check {
    let root = f.roots.proc.display();
    let Some(m) = &f.proc_mount else {
        return Check::ok(
            "hidepid",
            format!("no proc mount at {root} in mountinfo (not checked)"),
        );
    };
    let level = m.hidepid.as_deref().unwrap_or("0");
    if matches!(level, "0" | "off") {
        return Check::ok(
            "hidepid",
            format!("{root} shows every process (hidepid={level})"),
        );
    }
    let exempt = m.gid.is_some_and(|g| f.user.in_group(g));
    if f.user.euid == 0 || exempt {
        return Check::ok(
            "hidepid",
            format!(
                "{root} is mounted hidepid={level}, but this user sees all ({})",
                if f.user.euid == 0 {
                    "root"
                } else {
                    "in the gid= group"
                }
            ),
        );
    }
    Check::warn(
        "hidepid",
        format!(
            "{root} is mounted hidepid={level}: other users' processes are hidden, and their GPU \
             memory is counted as hidden"
        ),
        Some(match m.gid {
            Some(g) => format!("run as root, or add this user to group {g} (the mount's gid=)"),
            None => format!(
                "run as root, or remount with an exempt group: sudo mount -o remount,hidepid={level},gid=GROUP {root}"
            ),
        }),
    )
}

fn ptrace(f: &Facts) -> Check {
    // In a user namespace, uid 0 and the capabilities are the namespace's own.
    let map = f.user.uid_map.as_deref();
    let namespaced = map.is_some_and(|m| !is_initial_uid_map(m));
    let cap = |bit| match (f.user.has_cap(bit), namespaced) {
        (Some(true), true) => "yes (namespaced)",
        (Some(true), false) => "yes",
        (Some(false), _) => "no",
        (None, _) => "?",
    };
    let euid = match map.filter(|_| namespaced) {
        Some(m) => format!(
            "euid {} ({} outside this user namespace)",
            f.user.euid,
            uid_outside(m, f.user.euid)
                .map_or_else(|| "unmapped".to_string(), |u| format!("uid {u}"))
        ),
        None => format!("euid {}", f.user.euid),
    };
    let scope = f.ptrace_scope.map_or_else(
        || "no Yama".to_string(),
        |s| {
            format!("Yama ptrace_scope {s} (it limits attaching, not the read access fdinfo needs)")
        },
    );
    let saw = format!(
        "{euid}; CAP_SYS_PTRACE {}, CAP_DAC_READ_SEARCH {}, CAP_PERFMON {}; {scope}",
        cap(CAP_SYS_PTRACE),
        cap(CAP_DAC_READ_SEARCH),
        cap(CAP_PERFMON)
    );
    if f.drm.is_empty() {
        return Check::ok(
            "ptrace",
            format!("{saw} (no DRM GPU: fdinfo is not needed)"),
        );
    }
    let ptrace = f.user.has_cap(CAP_SYS_PTRACE) == Some(true);
    let dac = f.user.has_cap(CAP_DAC_READ_SEARCH) == Some(true);
    if namespaced && (ptrace || f.user.euid == 0) {
        return Check::warn(
            "ptrace",
            format!(
                "{saw}: this user namespace's uid 0 and capabilities do not reach other users' \
                 processes of the parent namespace, so their DRM fdinfo is refused and they \
                 count as hidden"
            ),
            Some(
                "run hmn outside the user namespace: on the host, or in a container without one \
                 (docker run --userns=host, podman run --userns=host as root; Kubernetes \
                 hostUsers: true) with SYS_PTRACE"
                    .to_string(),
            ),
        );
    }
    if ptrace && (dac || f.user.euid == 0) {
        return Check::ok(
            "ptrace",
            format!("{saw}: every process's DRM fdinfo is readable"),
        );
    }
    let remedy = if f.user.euid == 0 {
        "root without CAP_SYS_PTRACE (a container's default): add it (docker run --cap-add \
         SYS_PTRACE; Kubernetes securityContext.capabilities.add: [SYS_PTRACE])"
    } else {
        "run as root (sudo hmn ps), or give a copy of hmn the capabilities: sudo setcap \
         cap_sys_ptrace,cap_dac_read_search+ep ./hmn (every user who can run that copy then \
         reads every process's fds)"
    };
    Check::warn(
        "ptrace",
        format!("{saw}: other users' DRM fdinfo is refused, so their processes count as hidden"),
        Some(remedy.to_string()),
    )
}

fn kernel(f: &Facts) -> Check {
    let Some(release) = f.kernel_release.as_deref() else {
        return Check::ok("kernel", "kernel release unreadable (not checked)");
    };
    let mut drivers: Vec<&str> = f.drm.iter().map(|d| d.driver.as_str()).collect();
    drivers.sort_unstable();
    drivers.dedup();
    let Some(v) = parse_release(release) else {
        return Check::ok(
            "kernel",
            format!("kernel {release} (version not understood)"),
        );
    };
    let mut old = Vec::new();
    let mut notes = Vec::new();
    for d in &drivers {
        let Some(s) = fdinfo_support(d) else { continue };
        notes.push(format!("{d}: {}", s.note));
        let miss = |since: Option<(u32, u32)>, what: &str| {
            since
                .filter(|m| v < *m)
                .map(|(a, b)| format!("{d} prints per-process {what} from {a}.{b}"))
        };
        old.extend(miss(s.memory_since, "memory"));
        old.extend(miss(s.engines_since, "engine time"));
    }
    if old.is_empty() {
        let tail = if notes.is_empty() {
            String::from("no DRM driver with fdinfo stats present")
        } else {
            notes.join("; ")
        };
        return Check::ok("kernel", format!("kernel {release}; {tail}"));
    }
    Check::warn(
        "kernel",
        format!(
            "kernel {release}, but {}: those figures are unknown",
            old.join("; ")
        ),
        Some("a newer kernel (your distribution's HWE/backports kernel) prints them".to_string()),
    )
}

fn suspended(f: &Facts) -> Check {
    let asleep: Vec<String> = f
        .drm
        .iter()
        .filter(|d| d.suspended)
        .map(|d| format!("{} ({})", d.address, d.driver))
        .collect();
    if asleep.is_empty() {
        return Check::ok(
            "suspended",
            format!("no runtime-suspended DRM device ({} in all)", f.drm.len()),
        );
    }
    let first = f
        .drm
        .iter()
        .find(|d| d.suspended)
        .map_or("ADDRESS", |d| d.address.as_str());
    Check::warn(
        "suspended",
        format!(
            "runtime-suspended: {}; their memory is not read (reading would wake them)",
            asleep.join(", ")
        ),
        Some(format!(
            "nothing is wrong; to read them anyway, keep them awake (costs idle power): echo on | \
             sudo tee /sys/bus/pci/devices/{first}/power/control"
        )),
    )
}

fn cgroup(f: &Facts) -> Check {
    let c = &f.cgroup;
    if c.disabled_by_env {
        return Check::ok(
            "cgroup",
            format!(
                "cgroup {}; HMN_NO_CGROUP is set: hmn run makes no cgroup",
                c.version
            ),
        );
    }
    match &c.creatable {
        Ok(dir) => Check::ok(
            "cgroup",
            format!(
                "cgroup {}: hmn run can create its memory cgroup (tried under {}, removed): \
                 exact peak RAM",
                c.version,
                dir.parent()
                    .map_or_else(String::new, |p| p.display().to_string())
            ),
        ),
        Err(why) => Check::warn(
            "cgroup",
            format!(
                "cgroup {}: hmn run cannot create a memory cgroup ({why}): its peak RAM is \
                 sampled (a floor)",
                c.version
            ),
            Some(
                "run hmn run as root, or inside a delegated cgroup v2 subtree \
                 (systemd-run --user --scope -p Delegate=yes hmn run …); --no-cgroup silences it"
                    .to_string(),
            ),
        ),
    }
}

fn container(f: &Facts) -> Check {
    let p = &f.pid;
    let evidence = if p.evidence.is_empty() {
        "nothing to tell by".to_string()
    } else {
        p.evidence.join("; ")
    };
    let root = f.roots.proc.display();
    match (p.in_container, p.proc_root) {
        (_, ProcRootNamespace::Container) => Check::warn(
            "container",
            format!(
                "in a container with its own PID namespace, reading {root} ({evidence}): NVML \
                 reports host PIDs, which this /proc cannot show, so NVIDIA rows are not named"
            ),
            Some(
                "run the container with --pid=host (Kubernetes hostPID: true), or mount the \
                 host's /proc read-only (-v /proc:/host/proc:ro) and pass --proc-root /host/proc"
                    .to_string(),
            ),
        ),
        (Some(true), ns) => Check::ok(
            "container",
            format!(
                "in a container, reading the {} PID namespace at {root} ({evidence}): NVML's \
                 host PIDs name their processes",
                if ns == ProcRootNamespace::Host {
                    "host's"
                } else {
                    "an outer"
                }
            ),
        ),
        (Some(false), _) => Check::ok("container", format!("not in a container ({evidence})")),
        (None, _) => Check::ok(
            "container",
            format!("could not tell whether in a container ({evidence})"),
        ),
    }
}
