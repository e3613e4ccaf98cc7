//! Every check's verdicts over hand-built facts and the parsers over real lines; `gather` over
//! fixture trees is in `tests/gather.rs`.

use std::path::PathBuf;

use super::*;
use crate::system::pidns::{self, NamespaceFacts};
use crate::system::roots::Roots;
use crate::types::QueryError;

const HOST_NS: u64 = pidns::INIT_PID_NS_INODE;

fn host_view() -> crate::system::pidns::PidView {
    pidns::view(&NamespaceFacts::new(
        Some(HOST_NS),
        Some(HOST_NS),
        vec![10],
        None,
        vec![],
    ))
}

fn facts() -> Facts {
    Facts::empty(Roots::system(), host_view())
}

fn check<'a>(all: &'a [Check], id: &str) -> &'a Check {
    all.iter().find(|c| c.id == id).unwrap()
}

fn one(f: &Facts, id: &str) -> Check {
    check(&checks(f), id).clone()
}

fn loaded(devices: Vec<NvmlDeviceFacts>) -> NvmlFacts {
    let mut n = NvmlFacts::new("libnvidia-ml.so.1", NvmlState::Loaded);
    n.library_version = Some("12.550.54.15".into());
    n.driver_version = Some("550.54.15".into());
    n.cuda_version = Some(12040);
    n.loaded_from = Some(PathBuf::from(
        "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54.15",
    ));
    n.devices = devices;
    n
}

/// The platform picks the checks: Windows and macOS get their own, Linux keeps its own.
#[test]
fn windows_and_macos_get_their_own_checks_and_linux_keeps_its_own() {
    let on = |platform| {
        let mut f = facts();
        f.platform = platform;
        checks(&f)
    };
    let ids = |checks: &[Check]| checks.iter().map(|c| c.id).collect::<Vec<_>>();
    let win = on(Platform::Windows);
    assert_eq!(
        ids(&win),
        [
            "nvml",
            "nvidia-smi",
            "accounting",
            "gpu-backends",
            "memory-health",
            "unattributed",
            "compute-mode"
        ]
    );
    assert_eq!(
        ids(&on(Platform::MacOs)),
        [
            "nvml",
            "nvidia-smi",
            "accounting",
            "gpu-backends",
            "memory-pool",
            "memory-health",
            "unattributed",
            "compute-mode"
        ]
    );
    let linux = on(Platform::Linux);
    assert!(ids(&linux).contains(&"cgroup"), "{:?}", ids(&linux));
    assert!(!ids(&linux).contains(&"gpu-backends"));
}

#[test]
fn parsers_read_real_lines() {
    assert_eq!(
        parse_nvidia_version(
            "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.135  Fri Jan 10 20:00:00 UTC 2025\nGCC version:  gcc version 12.2.0\n"
        )
        .as_deref(),
        Some("550.135")
    );
    assert_eq!(
        parse_nvidia_version(
            "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  (dvs-builder@U16-I3-B03-4-3)  Tue Sep 23 09:00:00 UTC 2025\n"
        )
        .as_deref(),
        Some("580.95.05")
    );
    assert_eq!(
        parse_nvidia_version("550.54.14\n").as_deref(),
        Some("550.54.14")
    );
    assert_eq!(parse_nvidia_version("garbage\n"), None);
    assert_eq!(
        parse_cap_eff("CapPrm:\t0\nCapEff:\t000001ffffffffff\n"),
        Some(0x1ff_ffff_ffff)
    );
    assert_eq!(parse_cap_eff("CapEff:\tzz\n"), None);
    let mi = "22 27 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw,hidepid=invisible,gid=1001\n\
              40 27 0:33 / /host/proc ro,relatime - proc proc rw\n\
              41 27 0:34 / /sys rw - sysfs sysfs rw\n";
    let m = parse_proc_mount(mi, std::path::Path::new("/proc")).unwrap();
    assert_eq!(
        (m.hidepid.as_deref(), m.gid),
        (Some("invisible"), Some(1001))
    );
    let h = parse_proc_mount(mi, std::path::Path::new("/host/proc")).unwrap();
    assert_eq!((h.hidepid, h.gid), (None, None));
    assert_eq!(parse_proc_mount(mi, std::path::Path::new("/sys")), None);
    assert_eq!(parse_release("6.18.44-fc-v595"), Some((6, 18)));
    assert_eq!(parse_release("5.4"), Some((5, 4)));
    assert_eq!(parse_release("x"), None);
}

#[test]
fn nvml_verdicts() {
    let mut f = facts();
    assert_eq!(one(&f, "nvml").status, Status::Ok, "no NVML, no NVIDIA GPU");
    f.nvidia_pci_devices = 2;
    let c = one(&f, "nvml");
    assert_eq!(c.status, Status::Fail);
    assert!(
        c.saw
            .starts_with("2 NVIDIA GPUs on the PCI bus, but NVML is absent"),
        "{}",
        c.saw
    );
    assert!(c.remedy.unwrap().contains("--gpus all"));
    f.nvml = loaded(vec![]);
    f.kernel_module_version = Some("550.54.15".into());
    let c = one(&f, "nvml");
    assert_eq!(c.status, Status::Ok);
    assert_eq!(
        c.saw,
        "NVML 12.550.54.15 loaded from /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54.15; \
         driver 550.54.15, CUDA 12.4; 0 devices"
    );
    f.kernel_module_version = Some("550.40.07".into());
    assert_eq!(
        one(&f, "nvml").status,
        Status::Fail,
        "driver and module differ"
    );
    let mut n = NvmlFacts::new(
        "libnvidia-ml.so.1",
        NvmlState::Failed {
            code: Some(18),
            reason: "initialisation failed: Driver/library version mismatch".into(),
        },
    );
    n.library_version = Some("12.550.54.15".into());
    f.nvml = n;
    let c = one(&f, "nvml");
    assert_eq!(c.status, Status::Fail);
    assert_eq!(
        c.saw,
        "nvmlInit failed: driver/library version mismatch (18): library 12.550.54.15, kernel \
         module 550.40.07"
    );
    assert!(c.remedy.unwrap().contains("reboot"));
    f.nvml.state = NvmlState::Failed {
        code: Some(4),
        reason: "no permission".into(),
    };
    assert!(one(&f, "nvml").remedy.unwrap().contains("/dev/nvidiactl"));
}

#[test]
fn nvidia_smi_verdicts() {
    let mut f = facts();
    assert_eq!(one(&f, "nvidia-smi").status, Status::Ok, "no NVIDIA GPU");
    f.nvidia_pci_devices = 1;
    f.nvml.state = NvmlState::Absent("not found".into());
    assert_eq!(one(&f, "nvidia-smi").status, Status::Warn);
    f.nvidia_smi = Ok(PathBuf::from("/usr/bin/nvidia-smi"));
    assert_eq!(one(&f, "nvidia-smi").status, Status::Ok);
    // NVML here but broken, no NVIDIA device on the PCI bus (a VM, a container): a GPU is
    // likely, so the missing fallback matters (QA: "not needed: no NVIDIA GPU").
    let mut f = facts();
    f.nvml.state = NvmlState::Failed {
        code: Some(999),
        reason: "unknown error".into(),
    };
    let c = one(&f, "nvidia-smi");
    assert_eq!(c.status, Status::Warn, "{c:?}");
    assert!(c.saw.contains("NVML cannot answer"), "{}", c.saw);
}

#[test]
fn accounting_and_persistence() {
    let mut f = facts();
    assert_eq!(one(&f, "accounting").status, Status::Ok);
    f.nvml = loaded(vec![
        NvmlDeviceFacts::new(0, Ok(true), Ok(true)),
        NvmlDeviceFacts::new(1, Ok(true), Ok(true)),
    ]);
    assert_eq!(one(&f, "accounting").saw, "accounting mode on for GPU 0, 1");
    assert_eq!(one(&f, "persistence").status, Status::Ok);
    f.nvml = loaded(vec![
        NvmlDeviceFacts::new(0, Ok(false), Err(QueryError::NotSupported)),
        NvmlDeviceFacts::new(1, Ok(true), Ok(false)),
    ]);
    let a = one(&f, "accounting");
    assert_eq!(a.status, Status::Warn);
    assert!(
        a.saw
            .starts_with("accounting mode on for GPU 1; off for GPU 0: hmn run samples VRAM"),
        "{}",
        a.saw
    );
    assert!(a.remedy.unwrap().starts_with("sudo nvidia-smi -am 1"));
    let p = one(&f, "persistence");
    assert!(
        p.saw
            .contains("off for GPU 1; unreadable (GPU 0: not supported by this device or driver)"),
        "{}",
        p.saw
    );
    assert!(p.remedy.unwrap().contains("nvidia-persistenced"));
    // Unreadable only: a warning, and how to see why and what hmn run does meanwhile.
    f.nvml = loaded(vec![NvmlDeviceFacts::new(
        0,
        Err(QueryError::NotSupported),
        Err(QueryError::NoPermission),
    )]);
    let a = one(&f, "accounting");
    assert_eq!(a.status, Status::Warn);
    let fix = a.remedy.unwrap();
    assert!(fix.contains("nvidia-smi -q -d ACCOUNTING"), "{fix}");
    assert!(fix.contains("sudo nvidia-smi -am 1"), "{fix}");
    let p = one(&f, "persistence");
    assert!(p.remedy.unwrap().contains("nvidia-smi -q -d PERFORMANCE"));
}

fn node(path: &str, gid: u32, group: &str, mode: u32, accessible: bool) -> DevNode {
    DevNode {
        path: PathBuf::from(path),
        gid,
        group: Some(group.into()),
        mode,
        accessible,
    }
}

#[test]
fn device_node_access_and_groups() {
    let mut f = facts();
    assert_eq!(
        one(&f, "device-nodes").status,
        Status::Ok,
        "no nodes, no GPU"
    );
    // NVML lists a device, and no node is here: not "no GPU" (QA).
    let mut g = facts();
    g.nvml = loaded(vec![NvmlDeviceFacts::new(0, Ok(false), Ok(true))]);
    assert_eq!(one(&g, "device-nodes").status, Status::Warn);
    f.drm = vec![DrmFacts::new("amdgpu", "0000:03:00.0", false)];
    let c = one(&f, "device-nodes");
    assert_eq!(c.status, Status::Warn, "a GPU without nodes: not passed in");
    assert!(c.remedy.unwrap().contains("--device /dev/dri"));
    f.user = UserFacts::new(1000, 1000, vec![44], Some(0));
    f.dev_nodes = vec![
        node("/dev/dri/card1", 44, "video", 0o660, true),
        node("/dev/dri/renderD128", 109, "render", 0o660, false),
    ];
    let c = one(&f, "device-nodes");
    assert_eq!(c.status, Status::Warn);
    assert!(
        c.saw.contains("/dev/dri/renderD128 (render 660)"),
        "{}",
        c.saw
    );
    assert!(
        c.remedy
            .unwrap()
            .starts_with("sudo usermod -aG render $USER")
    );
    f.dev_nodes
        .push(node("/dev/nvidiactl", 27, "video2", 0o660, false));
    let c = one(&f, "device-nodes");
    assert_eq!(c.status, Status::Fail);
    assert!(
        c.remedy
            .unwrap()
            .starts_with("sudo usermod -aG video2 $USER")
    );
    f.user.groups = vec![44, 109, 27];
    for n in &mut f.dev_nodes {
        n.accessible = true;
    }
    assert_eq!(one(&f, "device-nodes").saw, "read/write access to 3 nodes");
}

#[test]
fn hidepid_verdicts() {
    let mut f = facts();
    f.user = UserFacts::new(1000, 1000, vec![], None);
    assert_eq!(one(&f, "hidepid").status, Status::Ok, "no mount found");
    f.proc_mount = Some(ProcMount {
        hidepid: Some("2".into()),
        gid: None,
    });
    let c = one(&f, "hidepid");
    assert_eq!(c.status, Status::Warn);
    assert!(c.remedy.unwrap().contains("remount,hidepid=2,gid=GROUP"));
    f.proc_mount = Some(ProcMount {
        hidepid: Some("invisible".into()),
        gid: Some(1001),
    });
    assert!(one(&f, "hidepid").remedy.unwrap().contains("group 1001"));
    f.user.groups = vec![1001];
    assert_eq!(one(&f, "hidepid").status, Status::Ok, "exempt group");
    f.user = UserFacts::new(0, 0, vec![], None);
    assert_eq!(one(&f, "hidepid").status, Status::Ok, "root");
    f.proc_mount = Some(ProcMount {
        hidepid: None,
        gid: None,
    });
    assert!(one(&f, "hidepid").saw.ends_with("(hidepid=0)"));
}

#[test]
fn ptrace_and_capabilities() {
    let full = Some(0x1ff_ffff_ffff_u64);
    let docker_root = Some(0xa80_425f_u64); // Docker's default set: no CAP_SYS_PTRACE
    let mut f = facts();
    f.ptrace_scope = Some(1);
    f.user = UserFacts::new(1000, 1000, vec![], Some(0));
    assert_eq!(one(&f, "ptrace").status, Status::Ok, "no DRM GPU");
    f.drm = vec![DrmFacts::new("i915", "0000:00:02.0", false)];
    let c = one(&f, "ptrace");
    assert_eq!(c.status, Status::Warn);
    assert!(c.saw.starts_with("euid 1000; CAP_SYS_PTRACE no, CAP_DAC_READ_SEARCH no, CAP_PERFMON no; Yama ptrace_scope 1"), "{}", c.saw);
    assert!(
        c.remedy
            .unwrap()
            .contains("setcap cap_sys_ptrace,cap_dac_read_search+ep")
    );
    f.user = UserFacts::new(0, 0, vec![], docker_root);
    let c = one(&f, "ptrace");
    assert_eq!(c.status, Status::Warn);
    assert!(c.remedy.unwrap().contains("--cap-add SYS_PTRACE"));
    f.user = UserFacts::new(0, 0, vec![], full);
    assert_eq!(one(&f, "ptrace").status, Status::Ok);
    // The initial user namespace's identity map: root is root.
    f.user.uid_map = Some("         0          0 4294967295\n".into());
    assert_eq!(one(&f, "ptrace").status, Status::Ok);
    // A user namespace (rootless Podman, unshare -r): uid 0 and every capability are its own.
    f.user.uid_map = Some("         0       1000          1\n".into());
    let c = one(&f, "ptrace");
    assert_eq!(c.status, Status::Warn, "{}", c.saw);
    assert!(
        c.saw.starts_with(
            "euid 0 (uid 1000 outside this user namespace); CAP_SYS_PTRACE yes (namespaced)"
        ),
        "{}",
        c.saw
    );
    assert!(
        c.saw
            .contains("do not reach other users' processes of the parent namespace"),
        "{}",
        c.saw
    );
    assert!(c.remedy.unwrap().contains("outside the user namespace"));
    f.drm.clear();
    let c = one(&f, "ptrace");
    assert_eq!(c.status, Status::Ok, "no DRM GPU: nothing to read");
    assert!(c.saw.contains("(namespaced)"), "{}", c.saw);
}

#[test]
fn uid_maps() {
    assert!(is_initial_uid_map("         0          0 4294967295\n"));
    assert!(!is_initial_uid_map("         0       1000          1\n"));
    assert!(!is_initial_uid_map("0 0 4294967295\n1 1 1\n"));
    assert!(
        !is_initial_uid_map("0 0 65536\n"),
        "a namespace mapping a range to itself"
    );
    assert!(!is_initial_uid_map(""), "an unmapped namespace");
    let map = "0 1000 1\n1 100000 65536\n";
    assert_eq!(uid_outside(map, 0), Some(1000));
    assert_eq!(uid_outside(map, 5), Some(100_004));
    assert_eq!(uid_outside(map, 70_000), None);
}

#[test]
fn kernel_against_the_drivers_present() {
    let mut f = facts();
    assert_eq!(one(&f, "kernel").status, Status::Ok, "unreadable release");
    f.kernel_release = Some("5.15.0-91-generic".into());
    f.drm = vec![
        DrmFacts::new("amdgpu", "0000:03:00.0", false),
        DrmFacts::new("xe", "0000:04:00.0", false),
    ];
    let c = one(&f, "kernel");
    assert_eq!(c.status, Status::Warn);
    assert_eq!(
        c.saw,
        "kernel 5.15.0-91-generic, but xe prints per-process memory from 6.8; xe prints \
         per-process engine time from 6.13: those figures are unknown"
    );
    f.kernel_release = Some("6.18.44".into());
    let c = one(&f, "kernel");
    assert_eq!(c.status, Status::Ok);
    assert!(
        c.saw.starts_with("kernel 6.18.44; amdgpu: 5.14–5.18"),
        "{}",
        c.saw
    );
}

#[test]
fn suspended_and_cgroup_and_container() {
    let mut f = facts();
    f.drm = vec![
        DrmFacts::new("amdgpu", "0000:03:00.0", true),
        DrmFacts::new("i915", "0000:00:02.0", false),
    ];
    let c = one(&f, "suspended");
    assert_eq!(c.status, Status::Warn);
    assert!(
        c.saw
            .starts_with("runtime-suspended: 0000:03:00.0 (amdgpu)")
    );
    assert!(
        c.remedy
            .unwrap()
            .contains("/sys/bus/pci/devices/0000:03:00.0/power/control")
    );

    f.cgroup = CgroupFacts::new(
        "v2",
        Err(CgroupUnusable::NotCreated(
            "cgroup v2: cannot create …".into(),
        )),
        false,
    );
    let c = one(&f, "cgroup");
    assert_eq!(c.status, Status::Warn);
    assert!(c.saw.contains("sampled"));
    assert!(c.saw.contains("(cgroup v2: cannot create …)"), "{}", c.saw);
    f.cgroup = CgroupFacts::new(
        "v2",
        Ok(PathBuf::from("/sys/fs/cgroup/x/hmn-doctor-1")),
        false,
    );
    assert!(
        one(&f, "cgroup")
            .saw
            .contains("tried under /sys/fs/cgroup/x")
    );
    f.cgroup.disabled_by_env = true;
    assert!(one(&f, "cgroup").saw.contains("HMN_NO_CGROUP"));

    assert_eq!(
        one(&f, "container").saw,
        "not in a container (hmn's PID namespace is the initial namespace; the proc root's pid 1 is in the initial namespace)"
    );
    f.pid = pidns::view(&NamespaceFacts::new(
        Some(7),
        Some(7),
        vec![1],
        None,
        vec!["/.dockerenv".into()],
    ));
    let c = one(&f, "container");
    assert_eq!(c.status, Status::Warn);
    assert!(c.remedy.unwrap().contains("--proc-root /host/proc"));
    f.pid = pidns::view(&NamespaceFacts::new(
        Some(7),
        Some(HOST_NS),
        vec![4242, 1],
        None,
        vec![],
    ));
    let c = one(&f, "container");
    assert_eq!(c.status, Status::Ok);
    assert!(
        c.saw
            .starts_with("in a container, reading the host's PID namespace"),
        "{}",
        c.saw
    );
}

#[test]
fn exit_codes() {
    let r = |s: &[Status]| Report {
        checks: s
            .iter()
            .map(|st| Check {
                id: "x",
                status: *st,
                saw: String::new(),
                remedy: None,
            })
            .collect(),
    };
    assert_eq!(r(&[]).exit_code(), 0);
    assert_eq!(r(&[Status::Ok, Status::Ok]).exit_code(), 0);
    assert_eq!(r(&[Status::Ok, Status::Warn]).exit_code(), 1);
    assert_eq!(r(&[Status::Fail, Status::Warn]).exit_code(), 2);
}

// `gather` over fixture trees with the fake NVML.
mod gather;
