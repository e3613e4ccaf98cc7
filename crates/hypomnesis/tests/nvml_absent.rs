//! NVML absent, broken or answered by `nvidia-smi`, against the fake NVML (loaded through the
//! real dlopen path) and the fake `nvidia-smi`: absent vs failed backends, devices lost, the
//! fallback's figures and its hard time bound whatever its children do.

use std::time::Duration;

use hmn_testbed::{FakeNvml, FakeSmi};
use hypomnesis::{Backend, BackendCause, BackendProblem, BackendState, Error, Probe, Source};

use crate::nvml::nvml_state;
use crate::util::Bed;

#[test]
fn library_missing_is_an_absent_backend() {
    let bed = Bed::new().real_proc();
    let missing = bed.env.nvml.clone();
    let p = bed.probe();
    let list = p.devices();
    assert!(list.devices.is_empty());
    let BackendState::Absent { cause, reason } = nvml_state(&list.backends) else {
        panic!("NVML should be absent: {:?}", list.backends)
    };
    assert!(reason.contains(&missing.display().to_string()), "{reason}");
    assert_eq!(
        *cause,
        BackendCause::LibraryMissing,
        "a path naming nothing"
    );
    assert!(matches!(p.device(0), Err(Error::NoGpu { .. })));
    assert!(p.gpu_processes().processes.is_empty());
}

#[test]
fn a_broken_nvml_is_failed_not_absent() {
    // Present but broken: GPUs may exist that nothing shows.
    // Callers match the cause; the words are for people.
    for (fake, words, want) in [
        (
            FakeNvml::h100s(1).version_mismatch(),
            "initialisation failed",
            BackendCause::VersionMismatch,
        ),
        (
            FakeNvml::h100s(1).init_error(4),
            "no permission",
            BackendCause::PermissionDenied,
        ),
        (
            FakeNvml::h100s(2).count_error(999),
            "cannot count devices",
            BackendCause::CallFailed,
        ),
    ] {
        let list = Bed::with_nvml(&fake).probe().devices();
        let BackendState::Failed { cause, reason } = nvml_state(&list.backends) else {
            panic!("NVML should have failed: {:?}", list.backends)
        };
        assert!(reason.contains(words), "{reason}");
        assert_eq!(*cause, want, "{reason}");
        assert!(list.devices.is_empty());
        let problem = BackendProblem::new(Backend::Nvml, want, reason.clone());
        assert_eq!(list.failed_reasons(), std::slice::from_ref(&problem));
        assert_eq!(
            list.absent_reasons()[0],
            problem,
            "still a reason there is no GPU"
        );
    }
    // Not here at all: no library, the driver not loaded, no GPU found.
    for fake in [
        FakeNvml::h100s(1).init_error(9),
        FakeNvml::h100s(1).init_error(28),
    ] {
        let list = Bed::with_nvml(&fake).probe().devices();
        assert!(
            matches!(nvml_state(&list.backends), BackendState::Absent { .. }),
            "{:?}",
            list.backends
        );
        assert!(list.failed_reasons().is_empty());
    }
    let list = Bed::with_nvml(&FakeNvml::h100s(1).init_error(28))
        .probe()
        .devices();
    let BackendState::Absent { cause, reason } = nvml_state(&list.backends) else {
        unreachable!()
    };
    assert_eq!(reason, "the NVIDIA driver found no GPU");
    assert_eq!(*cause, BackendCause::NoDevice);
    assert!(Bed::new().probe().devices().failed_reasons().is_empty());
}

#[test]
fn a_broken_nvml_answered_by_nvidia_smi_is_not_a_failure() {
    let bed = Bed::with_nvml(&FakeNvml::h100s(1).version_mismatch());
    let smi = FakeSmi::new(
        "0, NVIDIA H100 80GB HBM3, GPU-3a1f7c2e-5b9d-4e61-8f0a-9c2d4b7e1a55, 00000000:1A:00.0, 550.54.15, 81559, 72908, 8111, 540\n",
        "",
    )
    .install(&bed.path("smi"))
    .unwrap();
    let p = Probe::with_options(bed.options().use_nvidia_smi(true).nvidia_smi(&smi));
    let list = p.devices();
    assert!(matches!(
        nvml_state(&list.backends),
        BackendState::Failed { .. }
    ));
    assert_eq!(list.devices.len(), 1);
    assert!(
        list.failed_reasons().is_empty(),
        "the fallback listed its devices"
    );
}

#[test]
fn every_device_lost_is_listed_with_its_error() {
    let fake = FakeNvml::new()
        .device(hmn_testbed::FakeDevice::h100(0).lost())
        .device(hmn_testbed::FakeDevice::h100(1).lost());
    let list = Bed::with_nvml(&fake).probe().devices();
    assert_eq!(list.devices.len(), 2);
    assert!(list.devices.iter().all(|d| d.error.is_some()), "{list:#?}");
    assert_eq!(
        nvml_state(&list.backends),
        &BackendState::Active { devices: 2 },
        "NVML answered; its devices did not"
    );
}

#[test]
fn driver_not_loaded_falls_back_to_nvidia_smi() {
    let bed = Bed::with_nvml(&FakeNvml::h100s(1).init_error(9));
    let smi = FakeSmi::new(
        "0, NVIDIA H100 80GB HBM3, GPU-3a1f7c2e-5b9d-4e61-8f0a-9c2d4b7e1a55, 00000000:1A:00.0, 550.54.15, 81559, 72908, 8111, 540\n",
        "4242, /usr/bin/python3, 72000, GPU-3a1f7c2e-5b9d-4e61-8f0a-9c2d4b7e1a55\n",
    )
    .install(&bed.path("smi"))
    .unwrap();
    let p = Probe::with_options(bed.options().use_nvidia_smi(true).nvidia_smi(&smi));
    let list = p.devices();
    let BackendState::Absent { cause, reason } = nvml_state(&list.backends) else {
        panic!("{:?}", list.backends)
    };
    assert!(reason.contains("not loaded"), "{reason}");
    assert_eq!(*cause, BackendCause::DriverNotLoaded);
    assert_eq!(list.devices.len(), 1);
    let d = &list.devices[0];
    assert_eq!(d.source, Source::NvidiaSmi);
    assert_eq!(d.memory.total_bytes, Some(81_559 << 20));
    assert_eq!(d.memory.reserved_bytes, Some(540 << 20));
    assert_eq!(d.pci_bus_id.unwrap().to_string(), "0000:1a:00.0");
    assert!(
        d.compute_mode.is_none()
            && d.unknown
                .iter()
                .any(|u| u.field == hypomnesis::Field::ComputeMode
                    && u.reason == hypomnesis::UnknownReason::Unsupported),
        "not read through nvidia-smi: unknown with the reason: {:?}",
        d.unknown
    );
    let procs = p.gpu_processes();
    assert_eq!(procs.processes.len(), 1);
    let row = &procs.processes[0];
    assert_eq!(
        (row.pid, row.used_bytes, row.source),
        (4242, Some(72_000 << 20), Source::NvidiaSmi)
    );
    assert_eq!(
        row.name,
        Some("/usr/bin/python3".into()),
        "smi's name when /proc has none"
    );
}

/// Whether the process whose pid the fake wrote to `DIR/leftover.pid` is gone (or a zombie),
/// within a second.
fn leftover_dies(dir: &std::path::Path) -> bool {
    let until = std::time::Instant::now() + Duration::from_secs(1);
    let pid = loop {
        match std::fs::read_to_string(dir.join("leftover.pid")) {
            Ok(p) if !p.trim().is_empty() => break p.trim().to_string(),
            _ if std::time::Instant::now() > until => return false,
            _ => std::thread::sleep(Duration::from_millis(10)),
        }
    };
    while std::time::Instant::now() < until {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => return true,
            Ok(s) if s.rsplit(") ").next().is_some_and(|r| r.starts_with('Z')) => return true,
            Ok(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
    false
}

/// Issue 17: the nvidia-smi limit is a hard bound — a child left holding its stdout does not
/// keep the caller, and at the deadline a wrapper's child that ignores SIGTERM dies too.
#[test]
fn nvidia_smi_is_bounded_whatever_its_children_do() {
    use hmn_testbed::SmiBehaviour;
    let bed = Bed::with_nvml(&FakeNvml::h100s(1).init_error(9));
    let csv = "0, NVIDIA H100 80GB HBM3, GPU-3a1f7c2e-5b9d-4e61-8f0a-9c2d4b7e1a55, 00000000:1A:00.0, 550.54.15, 81559, 72908, 8111, 540\n";
    // The devices an nvidia-smi that behaves so (installed in DIR) gives within TIMEOUT, and
    // how long the listing took.
    let list_with = |dir: &std::path::Path, behaviour, timeout| {
        let smi = FakeSmi::new(csv, "")
            .behaving(behaviour)
            .install(dir)
            .unwrap();
        let p = Probe::with_options(
            bed.options()
                .use_nvidia_smi(true)
                .nvidia_smi(&smi)
                .nvidia_smi_timeout(timeout),
        );
        let started = std::time::Instant::now();
        let list = p.devices();
        (list, started.elapsed())
    };
    let dir = bed.path("leaves");
    let (list, took) = list_with(
        &dir,
        SmiBehaviour::LeavesChildHoldingStdout,
        Duration::from_secs(20),
    );
    assert!(
        took < Duration::from_secs(5),
        "held for {took:?} by a child holding the pipe"
    );
    assert_eq!(list.devices.len(), 1, "the answer is used: {list:?}");
    assert!(leftover_dies(&dir), "the leftover child was killed");

    let dir = bed.path("wrapper");
    let (list, took) = list_with(
        &dir,
        SmiBehaviour::ChildIgnoresTerm,
        Duration::from_millis(300),
    );
    assert!(took < Duration::from_secs(3), "{took:?}");
    assert!(list.devices.is_empty());
    let smi_state = list
        .backends
        .iter()
        .find(|b| b.backend == "nvidia-smi")
        .unwrap();
    assert!(
        format!("{:?}", smi_state.state).contains("did not answer within 300 ms"),
        "{:?}",
        smi_state.state
    );
    assert!(leftover_dies(&dir), "the wrapper's child was killed");
}
