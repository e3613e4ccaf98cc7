//! Fixture `/proc/<pid>/cgroup` files in the shapes real hosts write (cgroup v2 and v1; Docker,
//! containerd, CRI-O, Podman, Kubernetes with the systemd and cgroupfs drivers, kind, Slurm's
//! v1 and v2 plugins, systemd services and sessions).

use super::*;
use crate::system::cgroup::parse_proc_cgroup;
use crate::types::workload::Workload;

const ID: &str = "4e9a6f0b6d7c1f1a0e8c8f5a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c";
const ID2: &str = "9c0f2ab3d1e4c5b6a7980f1e2d3c4b5a69788796a5b4c3d2e1f0a9b8c7d6e5f4";
const UID: &str = "8a1c5bc0-0cf5-4b4a-9f8b-0c2f6e7a5d11";
const UID_: &str = "8a1c5bc0_0cf5_4b4a_9f8b_0c2f6e7a5d11";

/// Classifies the path `path_of` picks from a whole `/proc/<pid>/cgroup` file.
fn of_file(text: &str) -> Option<WorkloadInfo> {
    let lines = parse_proc_cgroup(text);
    path_of(&lines).and_then(classify)
}

struct Want<'a> {
    kind: WorkloadKind,
    runtime: Option<ContainerRuntime>,
    container: Option<&'a str>,
    pod: Option<&'a str>,
    job: Option<u64>,
    step: Option<&'a str>,
    unit: Option<&'a str>,
    label: &'a str,
}

const NONE: Want<'static> = Want {
    kind: WorkloadKind::Other,
    runtime: None,
    container: None,
    pod: None,
    job: None,
    step: None,
    unit: None,
    label: "",
};

fn check(file: &str, want: &Want<'_>) {
    let w = of_file(file).unwrap_or_else(|| panic!("no workload in {file:?}"));
    assert_eq!(w.kind, want.kind, "{file}");
    assert_eq!(w.runtime, want.runtime, "{file}");
    assert_eq!(w.container_id.as_deref(), want.container, "{file}");
    assert_eq!(w.pod_uid.as_deref(), want.pod, "{file}");
    assert_eq!(w.slurm_job, want.job, "{file}");
    assert_eq!(w.slurm_step.as_deref(), want.step, "{file}");
    assert_eq!(w.unit.as_deref(), want.unit, "{file}");
    assert_eq!(w.label(), want.label, "{file}");
}

#[test]
fn docker() {
    let scope = format!("docker-{ID}.scope");
    // cgroup v2, systemd driver (the default on current distributions).
    check(
        &format!("0::/system.slice/{scope}\n"),
        &Want {
            kind: WorkloadKind::Container,
            runtime: Some(ContainerRuntime::Docker),
            container: Some(ID),
            unit: Some(&scope),
            label: "docker:4e9a6f0b6d7c",
            ..NONE
        },
    );
    // cgroup v2, cgroupfs driver; and cgroup v1 (cgroupfs driver), every controller alike.
    let cgroupfs = Want {
        kind: WorkloadKind::Container,
        runtime: Some(ContainerRuntime::Docker),
        container: Some(ID),
        label: "docker:4e9a6f0b6d7c",
        ..NONE
    };
    check(&format!("0::/docker/{ID}\n"), &cgroupfs);
    check(
        &format!(
            "12:pids:/docker/{ID}\n11:memory:/docker/{ID}\n4:cpu,cpuacct:/docker/{ID}\n\
             1:name=systemd:/docker/{ID}\n0::/\n"
        ),
        &cgroupfs,
    );
}

#[test]
fn kubernetes_systemd_driver() {
    let scope = format!("cri-containerd-{ID}.scope");
    let want = Want {
        kind: WorkloadKind::Pod,
        runtime: Some(ContainerRuntime::Containerd),
        container: Some(ID),
        pod: Some(UID),
        unit: Some(&scope),
        label: "pod:8a1c5bc0-0cf5-4b4a-9f8b-0c2f6e7a5d11/containerd:4e9a6f0b6d7c",
        ..NONE
    };
    check(
        &format!(
            "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/{scope}\n"
        ),
        &want,
    );
    // Guaranteed QoS has no QoS slice.
    check(
        &format!("0::/kubepods.slice/kubepods-pod{UID_}.slice/{scope}\n"),
        &want,
    );
    // CRI-O, and its conmon monitor process.
    for prefix in ["crio-", "crio-conmon-"] {
        let scope = format!("{prefix}{ID}.scope");
        check(
            &format!(
                "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID_}.slice/{scope}\n"
            ),
            &Want {
                runtime: Some(ContainerRuntime::CriO),
                unit: Some(&scope),
                label: "pod:8a1c5bc0-0cf5-4b4a-9f8b-0c2f6e7a5d11/cri-o:4e9a6f0b6d7c",
                ..want
            },
        );
    }
    // cgroup v1 with the systemd driver and dockershim.
    let scope = format!("docker-{ID}.scope");
    check(
        &format!(
            "11:memory:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/{scope}\n\
             1:name=systemd:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/{scope}\n"
        ),
        &Want {
            runtime: Some(ContainerRuntime::Docker),
            unit: Some(&scope),
            label: "pod:8a1c5bc0-0cf5-4b4a-9f8b-0c2f6e7a5d11/docker:4e9a6f0b6d7c",
            ..want
        },
    );
}

#[test]
fn kubernetes_cgroupfs_driver_and_nesting() {
    // k3s / kubelet with the cgroupfs driver: a bare id, runtime unknown; v2 and v1.
    let want = Want {
        kind: WorkloadKind::Pod,
        container: Some(ID),
        pod: Some(UID),
        label: "pod:8a1c5bc0-0cf5-4b4a-9f8b-0c2f6e7a5d11/container:4e9a6f0b6d7c",
        ..NONE
    };
    check(&format!("0::/kubepods/besteffort/pod{UID}/{ID}\n"), &want);
    check(
        &format!("8:memory:/kubepods/burstable/pod{UID}/{ID}\n0::/\n"),
        &want,
    );
    // The pod sandbox itself (no container yet).
    check(
        &format!("0::/kubepods/besteffort/pod{UID}\n"),
        &Want {
            container: None,
            label: "pod:8a1c5bc0-0cf5-4b4a-9f8b-0c2f6e7a5d11",
            ..want
        },
    );
    // kind: a pod's container inside a Docker container, seen from the host.
    let inner = format!("cri-containerd-{ID2}.scope");
    check(
        &format!(
            "0::/system.slice/docker-{ID}.scope/kubelet.slice/kubelet-kubepods.slice/\
             kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod{UID_}.slice/{inner}\n"
        ),
        &Want {
            kind: WorkloadKind::Pod,
            runtime: Some(ContainerRuntime::Containerd),
            container: Some(ID2),
            pod: Some(UID),
            unit: Some(&inner),
            label: "pod:8a1c5bc0-0cf5-4b4a-9f8b-0c2f6e7a5d11/containerd:9c0f2ab3d1e4",
            ..NONE
        },
    );
}

#[test]
fn podman() {
    let scope = format!("libpod-{ID}.scope");
    let want = Want {
        kind: WorkloadKind::Container,
        runtime: Some(ContainerRuntime::Podman),
        container: Some(ID),
        unit: Some(&scope),
        label: "podman:4e9a6f0b6d7c",
        ..NONE
    };
    // Rootful (with the `container` leaf podman ≥ 4 creates), rootless.
    check(&format!("0::/machine.slice/{scope}/container\n"), &want);
    check(
        &format!("0::/user.slice/user-1000.slice/user@1000.service/user.slice/{scope}\n"),
        &want,
    );
    // cgroup v1, cgroupfs manager.
    check(
        &format!("10:memory:/libpod_parent/libpod-{ID}\n"),
        &Want { unit: None, ..want },
    );
    let conmon = format!("libpod-conmon-{ID}.scope");
    check(
        &format!("0::/machine.slice/{conmon}\n"),
        &Want {
            unit: Some(&conmon),
            ..want
        },
    );
}

#[test]
fn slurm() {
    // cgroup/v2 plugin (Slurm 22.05+), and with a node name (several slurmd on one host).
    check(
        "0::/system.slice/slurmstepd.scope/job_4242/step_0/user/task_0\n",
        &Want {
            kind: WorkloadKind::Slurm,
            job: Some(4242),
            step: Some("0"),
            unit: Some("slurmstepd.scope"),
            label: "slurm:4242.0",
            ..NONE
        },
    );
    check(
        "0::/system.slice/node07_slurmstepd.scope/job_91/step_batch/user/task_special\n",
        &Want {
            kind: WorkloadKind::Slurm,
            job: Some(91),
            step: Some("batch"),
            unit: Some("node07_slurmstepd.scope"),
            label: "slurm:91.batch",
            ..NONE
        },
    );
    // cgroup/v1 plugin: the memory controller names the step; systemd the daemon's unit.
    check(
        "11:memory:/slurm/uid_1000/job_4242/step_extern\n1:name=systemd:/system.slice/slurmd.service\n0::/\n",
        &Want {
            kind: WorkloadKind::Slurm,
            job: Some(4242),
            step: Some("extern"),
            label: "slurm:4242.extern",
            ..NONE
        },
    );
    // `job_` outside a Slurm hierarchy is not a job.
    let w = classify("/job_1/step_2").unwrap();
    assert_eq!((w.kind, w.slurm_job), (WorkloadKind::Other, None));
}

#[test]
fn systemd_units_and_others() {
    check(
        "0::/system.slice/ollama.service\n",
        &Want {
            kind: WorkloadKind::Unit,
            unit: Some("ollama.service"),
            label: "unit:ollama.service",
            ..NONE
        },
    );
    check(
        "0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-org.gnome.Terminal.slice/vte-spawn-4b5c.scope\n",
        &Want {
            kind: WorkloadKind::Unit,
            unit: Some("vte-spawn-4b5c.scope"),
            label: "unit:vte-spawn-4b5c.scope",
            ..NONE
        },
    );
    // Hybrid v1 host: the memory controller's path, the v2 line being the root.
    check(
        "12:memory:/system.slice/vllm.service\n1:name=systemd:/system.slice/vllm.service\n0::/\n",
        &Want {
            kind: WorkloadKind::Unit,
            unit: Some("vllm.service"),
            label: "unit:vllm.service",
            ..NONE
        },
    );
    check(
        "0::/lxc.payload.web\n",
        &Want {
            label: "/lxc.payload.web",
            ..NONE
        },
    );
    // A private cgroup namespace (a container seen from inside) shows only the root.
    assert_eq!(of_file("0::/\n"), None);
    assert_eq!(of_file("12:memory:/\n1:name=systemd:/\n0::/\n"), None);
    assert_eq!(of_file(""), None);
}

#[test]
fn look_alikes_are_not_ids() {
    // Not a UUID after `pod`, an id one digit short, a non-hex id, `podman` in a name.
    for path in [
        "/podcast/x",
        "/kubepods/besteffort/podabc/123",
        &format!("/docker/{}", &ID[1..]),
        &format!("/docker/{}g", &ID[1..]),
        "/system.slice/podman.socket",
        &format!("/x/mypod{UID}"),
    ] {
        let w = classify(path).unwrap();
        assert_eq!(w.kind, WorkloadKind::Other, "{path}");
        assert_eq!(w.container_id, None, "{path}");
        assert_eq!(w.pod_uid, None, "{path}");
    }
}

#[test]
fn matching_reaches_ids_and_names() {
    let w = classify(&format!(
        "/kubepods.slice/kubepods-pod{UID_}.slice/cri-containerd-{ID}.scope"
    ))
    .unwrap();
    for p in ["POD", "8a1c5bc0", "containerd", &ID[20..], "kubepods"] {
        assert!(w.matches(p), "{p}");
    }
    assert!(!w.matches("docker"));
}

#[test]
fn a_process_workload_from_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let roots = Roots::system().with_proc(dir.path());
    std::fs::create_dir_all(dir.path().join("7")).unwrap();
    std::fs::write(
        dir.path().join("7/cgroup"),
        format!("0::/system.slice/docker-{ID}.scope\n"),
    )
    .unwrap();
    assert_eq!(
        of_process(&roots, 7).map(|w| w.label()).as_deref(),
        Some("docker:4e9a6f0b6d7c")
    );
    assert_eq!(of_process(&roots, 8), None, "no such process");
}

#[test]
fn a_process_workload_named_from_the_kubelet_layout() {
    let dir = tempfile::tempdir().unwrap();
    let (proc, log) = (dir.path().join("proc"), dir.path().join("log"));
    let roots = Roots::system()
        .with_proc(&proc)
        .with_log(&log)
        .with_runtimes_under(dir.path());
    std::fs::create_dir_all(proc.join("7")).unwrap();
    std::fs::write(
        proc.join("7/cgroup"),
        format!("0::/kubepods.slice/kubepods-pod{UID_}.slice/cri-containerd-{ID}.scope\n"),
    )
    .unwrap();
    hmn_testbed::kubelet_container(&log, "ml", "llama-0", UID, "server", ID).unwrap();
    let cache = names::NameCache::new();
    let w = of_process_named(&roots, 7, &cache).unwrap();
    assert_eq!(w.label(), "ml/llama-0/server");
    assert_eq!(
        w.names_from,
        Some(crate::types::workload::NameSource::KubeletLogs)
    );
    // Without the layout: the ids, as `of_process` gives them.
    let bare = of_process_named(
        &roots.clone().with_log(dir.path().join("none")),
        7,
        &names::NameCache::new(),
    );
    assert_eq!(bare, of_process(&roots, 7));
    assert_eq!(of_process_named(&roots, 8, &cache), None, "no such process");
}

#[test]
fn a_process_workload_key_from_its_cgroup_file() {
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
        of_process(&roots, 10).map(|w| w.key()),
        Some(Workload::Unit("ollama.service".into()))
    );
    assert_eq!(
        of_process(&roots, 11).map(|w| w.key()),
        Some(Workload::Unit("vllm.service".into()))
    );
    assert_eq!(of_process(&roots, 12).map(|w| w.key()), None);
    assert_eq!(
        of_process(&roots, 13).map(|w| w.key()),
        None,
        "no such process"
    );
}

#[test]
fn coarse_keys_from_paths() {
    let key = |path: &str| classify(path).unwrap().key();
    let id = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    assert_eq!(
        key(&format!("/docker/{id}")),
        Workload::Container("0123456789ab".into())
    );
    assert_eq!(
        key(&format!("/system.slice/docker-{id}.scope")),
        Workload::Container("0123456789ab".into())
    );
    assert_eq!(
        key(&format!("/machine.slice/libpod-{id}.scope/container")),
        Workload::Container("0123456789ab".into())
    );
    assert_eq!(
        key("/kubepods/besteffort/pod1f2e3d4c-5b6a-7980-a1b2-c3d4e5f60718/abc"),
        Workload::Pod("1f2e3d4c-5b6a-7980-a1b2-c3d4e5f60718".into())
    );
    assert_eq!(
        key("/user.slice/user-1000.slice/session-2.scope"),
        Workload::Unit("session-2.scope".into())
    );
    assert_eq!(classify("/"), None, "the root is no workload");
    assert_eq!(
        key("/podcast/x"),
        Workload::Other("/podcast/x".into()),
        "not a pod uid"
    );
    assert_eq!(classify(""), None);
    let job = key("/system.slice/slurmstepd.scope/job_4242/step_0/user/task_0");
    assert_eq!(job, Workload::SlurmJob("4242".into()));
    assert_eq!((job.kind().as_str(), job.name()), ("slurm", "4242"));
}
