use super::*;

#[test]
fn the_rescan_period_keeps_the_walk_within_budget() {
    assert_eq!(calibrated_rescan(Duration::from_micros(300)), RESCAN_MIN);
    assert_eq!(
        calibrated_rescan(Duration::from_millis(250)),
        Duration::from_secs(50)
    );
    assert_eq!(calibrated_rescan(Duration::from_secs(9)), RESCAN_MAX);
}

use hmn_testbed::{FakeNvml, FakeProc, FakeProcess, Sandbox};

fn collector(bed: &Sandbox, max: usize) -> Collector {
    let opts = ProbeOptions::default()
        .roots(
            Roots::system()
                .with_proc(bed.proc())
                .with_sys(bed.world.sys.root()),
        )
        .nvml_library(bed.env.nvml.clone())
        .nvidia_smi(bed.env.nvidia_smi.clone());
    let o = CollectOptions {
        limits: Limits { max_processes: max },
        rescan: Some(Duration::from_secs(5)),
    };
    Collector::new(opts, o)
}

#[test]
fn a_rename_exec_setuid_or_cgroup_move_shows_at_the_next_sample() {
    let fake = FakeNvml::h100s(1).process(FakeProcess::compute(0, 4242, 1 << 30));
    let bed = Sandbox::with_nvml(&fake);
    let f = bed.fixture();
    f.process(&FakeProc::new(4242, "python3").cmdline(&["python3", "serve.py"]))
        .unwrap();
    f.stat(4242, "python3", 1, 100).unwrap();
    f.file("4242/cgroup", "0::/system.slice/old.service\n")
        .unwrap();
    let mut c = collector(&bed, 64);
    let row = |s: &Snapshot| s.processes[0].clone();
    let before = row(&c.sample(Duration::from_secs(1)));
    assert_eq!(before.gpu.name.as_ref().unwrap().escaped(), "python3");
    assert_eq!(before.cmdline.as_deref(), Some("python3 serve.py"));
    assert_eq!(before.gpu.uid, Some(0));
    // The same process (same start time) renames itself, drops to uid 1000, moves cgroup.
    f.process(
        &FakeProc::new(4242, "VLLM::Worker")
            .cmdline(&["VLLM::Worker_TP0"])
            .uid(1000),
    )
    .unwrap();
    f.stat(4242, "VLLM::Worker", 1, 100).unwrap();
    f.file("4242/cgroup", "0::/system.slice/new.service\n")
        .unwrap();
    let after = row(&c.sample(Duration::from_secs(1)));
    assert_eq!(after.start_time, before.start_time, "the same process");
    assert_eq!(after.gpu.name.as_ref().unwrap().escaped(), "VLLM::Worker");
    assert_eq!(after.cmdline.as_deref(), Some("VLLM::Worker_TP0"));
    assert_eq!(after.gpu.uid, Some(1000));
    assert_ne!(
        after.gpu.workload, before.gpu.workload,
        "the cgroup move is seen"
    );
    // A setuid drop with the name unchanged: seen once the refresh period has passed.
    f.process(
        &FakeProc::new(4242, "VLLM::Worker")
            .cmdline(&["VLLM::Worker_TP0"])
            .uid(65534),
    )
    .unwrap();
    assert_eq!(row(&c.sample(Duration::from_secs(1))).gpu.uid, Some(1000));
    c.identity_refresh = Duration::ZERO;
    assert_eq!(row(&c.sample(Duration::from_secs(1))).gpu.uid, Some(65534));
}

#[test]
fn an_nvml_pid_hidden_by_a_pid_namespace_is_never_named_after_a_stranger() {
    // A container's own /proc: hmn is pid 1 in a namespace of its own, and pid 7 there is
    // an unrelated shell — NVML's host pid 7 is someone else.
    let fake = FakeNvml::h100s(1).process(FakeProcess::compute(0, 7, 1 << 30));
    let bed = Sandbox::with_nvml(&fake);
    let f = bed.fixture();
    f.process(&FakeProc::new(1, "hmn")).unwrap();
    f.process(&FakeProc::new(7, "bash").cmdline(&["bash", "-i"]))
        .unwrap();
    f.stat(7, "bash", 1, 100).unwrap();
    f.pid_ns(1, 4_026_532_999).unwrap();
    f.self_link(1).unwrap();
    let mut c = collector(&bed, 64);
    for _ in 0..2 {
        let s = c.sample(Duration::from_secs(1));
        let r = &s.processes[0];
        assert_eq!(r.gpu.pid, 7);
        assert!(r.gpu.name.is_none() && r.gpu.user.is_none(), "{r:?}");
        assert_eq!(
            (r.start_time, r.ppid, r.rss_bytes, r.cmdline.as_deref()),
            (None, None, None, None),
            "a stranger's figures: {r:?}"
        );
        assert!(
            r.gpu
                .unknown
                .iter()
                .any(|u| u.field == Field::RssBytes
                    && u.reason == UnknownReason::OtherPidNamespace),
            "{:?}",
            r.gpu.unknown
        );
        assert!(s.ancestors.is_empty());
    }
}

#[test]
fn ancestors_are_read_only_while_they_are_wanted() {
    // python3 (4242) under bash (4200) under sshd (4100).
    let fake = FakeNvml::h100s(1).process(FakeProcess::compute(0, 4242, 1 << 30));
    let bed = Sandbox::with_nvml(&fake);
    let f = bed.fixture();
    for (pid, name, ppid) in [
        (4242, "python3", 4200),
        (4200, "bash", 4100),
        (4100, "sshd", 1),
    ] {
        f.process(&FakeProc::new(pid, name)).unwrap();
        f.stat(pid, name, ppid, 100).unwrap();
    }
    let mut c = collector(&bed, 64);
    let names = |s: &Snapshot| -> Vec<(u32, Option<u32>, String)> {
        s.ancestors
            .iter()
            .map(|a| (a.pid, a.ppid, a.name.clone().unwrap_or_default()))
            .collect()
    };
    let both = vec![
        (4200, Some(4100), "bash".to_string()),
        (4100, Some(1), "sshd".to_string()),
    ];
    assert_eq!(
        names(&c.sample(Duration::from_secs(1))),
        both,
        "by default (record)"
    );
    c.ancestors = false;
    let s = c.sample(Duration::from_secs(1));
    assert!(s.ancestors.is_empty(), "{:?}", s.ancestors);
    assert_eq!(
        s.processes[0].ppid,
        Some(4200),
        "the row's own parent is still read"
    );
    c.ancestors = true;
    assert_eq!(names(&c.sample(Duration::from_secs(1))), both);
}

/// A pod's process is shown with its namespace, pod and container names, as `hmn ps` shows
/// it (the kubelet's log layout under the log root), in the table and in the detail pane (the
/// view: feature `top`; `record` alone collects without it).
#[cfg(feature = "top")]
#[test]
fn a_pods_process_is_shown_by_its_names_as_ps_shows_it() {
    const ID: &str = "4e9a6f0b6d7c1f1a0e8c8f5a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c";
    const UID: &str = "8a1c5bc0-0cf5-4b4a-9f8b-0c2f6e7a5d11";
    let fake = FakeNvml::h100s(1).process(FakeProcess::compute(0, 48213, 8 << 30));
    let bed = Sandbox::with_nvml(&fake);
    let f = bed.fixture();
    f.process(&FakeProc::new(48213, "vllm")).unwrap();
    f.stat(48213, "vllm", 1, 100).unwrap();
    f.file(
        "48213/cgroup",
        &format!(
            "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice/cri-containerd-{ID}.scope\n",
            UID.replace('-', "_")
        ),
    )
    .unwrap();
    bed.kubelet_container("ml", "web", UID, "srv", ID);
    let opts = crate::top::tests::opts(&bed).roots(
        Roots::system()
            .with_proc(bed.proc())
            .with_sys(bed.world.sys.root())
            .with_log(&bed.env.log)
            .with_runtimes_under(&bed.env.runtimes),
    );
    let mut c = Collector::new(
        opts,
        CollectOptions {
            limits: Limits { max_processes: 64 },
            rescan: Some(Duration::from_secs(5)),
        },
    );
    let snap = c.sample(Duration::from_secs(1));
    let w = snap.processes[0].gpu.workload.clone().unwrap();
    assert_eq!(
        (
            w.namespace.as_deref(),
            w.pod_name.as_deref(),
            w.container_name.as_deref()
        ),
        (Some("ml"), Some("web"), Some("srv"))
    );
    let mut app = crate::top::tests::live();
    app.push(snap);
    app.now_ms = crate::health::now_ms();
    let s = crate::top::tests::text(&mut app, 120, 30);
    let row = s.lines().find(|l| l.contains("48213")).unwrap();
    assert!(row.contains("ml/web/srv"), "{s}");
    crate::top::tests::press(&mut app, ratatui::crossterm::event::KeyCode::Enter);
    let s = crate::top::tests::text(&mut app, 120, 30);
    assert!(s.contains("pod: ml/web/srv"), "{s}");
}
