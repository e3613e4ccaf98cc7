//! `gather` over fixture trees with the fake NVML (loaded, and failing with a version
//! mismatch): the facts it reads and the checks over them.

use super::*;

/// A fixture: `/proc` with `self` (host namespace, a hidepid mount, capabilities), `/sys`
/// with an NVIDIA PCI device and a v1 memory hierarchy, an empty `/dev`, and the fake NVML.
fn fixture(fake: &hmn_testbed::FakeNvml) -> (tempfile::TempDir, ProbeOptions) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let proc = root.join("proc");
    let me = proc.join("4242");
    std::fs::create_dir_all(me.join("ns")).unwrap();
    std::os::unix::fs::symlink("4242", proc.join("self")).unwrap();
    std::os::unix::fs::symlink(format!("pid:[{HOST_NS}]"), me.join("ns/pid")).unwrap();
    std::fs::write(
        me.join("status"),
        "Name:\thmn\nNSpid:\t4242\nCapEff:\t0000000000000000\n",
    )
    .unwrap();
    std::fs::write(me.join("cgroup"), "4:memory:/job\n0::/\n").unwrap();
    std::fs::write(
        me.join("mountinfo"),
        format!(
            "22 27 0:21 / {} rw - proc proc rw,hidepid=2\n",
            proc.display()
        ),
    )
    .unwrap();
    std::fs::create_dir_all(proc.join("driver/nvidia")).unwrap();
    std::fs::write(
        proc.join("driver/nvidia/version"),
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.40.07  Thu Jan 11 00:00:00 UTC 2024\n",
    )
    .unwrap();
    std::fs::create_dir_all(proc.join("sys/kernel")).unwrap();
    std::fs::write(proc.join("sys/kernel/osrelease"), "6.18.44\n").unwrap();
    let sys = root.join("sys");
    let gpu = sys.join("bus/pci/devices/0000:1a:00.0");
    std::fs::create_dir_all(&gpu).unwrap();
    std::fs::write(gpu.join("vendor"), "0x10de\n").unwrap();
    std::fs::write(gpu.join("class"), "0x030200\n").unwrap();
    std::fs::create_dir_all(sys.join("fs/cgroup/memory/job")).unwrap();
    std::fs::create_dir_all(root.join("dev")).unwrap();
    let lib = fake.install(&root.join("nvml")).unwrap();
    let roots = Roots::system()
        .with_proc(&proc)
        .with_sys(&sys)
        .with_dev(root.join("dev"));
    let opts = ProbeOptions::default()
        .roots(roots)
        .nvml_library(lib)
        .nvidia_smi(root.join("no-smi"));
    (dir, opts)
}

#[test]
fn gathered_with_a_version_mismatch() {
    let fake = hmn_testbed::FakeNvml::h100s(1).version_mismatch();
    let (dir, opts) = fixture(&fake);
    // Probe groups of doctors: one killed (no pid 77), one alive (4242, the fixture's own).
    let job = dir.path().join("sys/fs/cgroup/memory/job");
    for name in ["hmn-doctor-77", "hmn-doctor-4242"] {
        std::fs::create_dir(job.join(name)).unwrap();
    }
    std::fs::write(dir.path().join("proc/4242/uid_map"), "0 1000 1\n").unwrap();
    let f = gather(&opts);
    assert!(
        !job.join("hmn-doctor-77").exists(),
        "a killed doctor's group"
    );
    assert!(job.join("hmn-doctor-4242").exists(), "a live one's");
    assert_eq!(f.user.uid_map.as_deref(), Some("0 1000 1\n"));
    assert_eq!(f.nvidia_pci_devices, 1);
    assert_eq!(f.kernel_module_version.as_deref(), Some("550.40.07"));
    assert_eq!(
        f.nvml.library_version.as_deref(),
        Some("12.550.54.15"),
        "read without init"
    );
    assert_eq!(
        f.proc_mount.as_ref().and_then(|m| m.hidepid.as_deref()),
        Some("2")
    );
    assert_eq!(f.user.cap_eff, Some(0));
    assert_eq!(f.cgroup.version, "v1");
    assert!(
        matches!(f.cgroup.creatable, Err(CgroupUnusable::NotCreated(_))),
        "{:?}",
        f.cgroup.creatable
    );
    assert!(
        matches!(&f.nvidia_smi, Err(SmiMissing::NotExecutable { path }) if path.ends_with("no-smi")),
        "{:?}",
        f.nvidia_smi
    );
    assert!(
        !dir.path()
            .join(format!(
                "sys/fs/cgroup/memory/job/hmn-doctor-{}",
                std::process::id()
            ))
            .exists(),
        "nothing left behind"
    );
    let r = Report { checks: checks(&f) };
    let c = check(&r.checks, "nvml");
    assert_eq!(c.status, Status::Fail);
    assert_eq!(
        c.saw,
        "nvmlInit failed: driver/library version mismatch (18): library 12.550.54.15, kernel \
         module 550.40.07"
    );
    assert_eq!(r.exit_code(), 2);
    assert_eq!(check(&r.checks, "nvidia-smi").status, Status::Warn);
}

#[test]
fn gathered_with_nvml_loaded() {
    use hmn_testbed::FakeDevice;
    let fake = hmn_testbed::FakeNvml::new()
        .device(FakeDevice::h100(0).accounting().persistence(Some(true)))
        .device(FakeDevice::h100(1).persistence(None));
    let (_dir, opts) = fixture(&fake);
    let f = gather(&opts);
    assert_eq!(f.nvml.state, NvmlState::Loaded);
    assert_eq!(f.nvml.library_version.as_deref(), Some("12.550.54.15"));
    assert_eq!(f.nvml.devices.len(), 2);
    assert_eq!(f.nvml.devices[0].accounting, Ok(true));
    assert_eq!(f.nvml.devices[0].persistence, Ok(true));
    assert_eq!(f.nvml.devices[1].accounting, Ok(false));
    assert_eq!(
        f.nvml.devices[1].persistence,
        Err(QueryError::NotSupported),
        "not supported"
    );
    let r = Report { checks: checks(&f) };
    // The fixture's kernel module (550.40.07) is not the library's driver (550.54.15).
    assert_eq!(check(&r.checks, "nvml").status, Status::Fail);
    assert_eq!(check(&r.checks, "accounting").status, Status::Warn);
    assert_eq!(check(&r.checks, "container").status, Status::Ok);
    assert!(
        check(&r.checks, "nvml").saw.contains("loaded from"),
        "{:?}",
        check(&r.checks, "nvml")
    );
}
