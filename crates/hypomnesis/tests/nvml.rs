//! The NVML backend against the fake NVML library, loaded through the real dlopen path.
//!
//! Each test installs its own copy of the fake with its own scenario file in a temporary
//! directory, so tests run in parallel without sharing state.

use hmn_testbed::{Driver, FakeNvml, FakeProc, FakeProcess};
use hypomnesis::own::OwnSnapshot;
use hypomnesis::{
    Backend, BackendCause, BackendProblem, BackendState, Error, Field, ProcessKind, Source,
    UnknownReason,
};

use crate::util::Bed;

const H100_TOTAL: u64 = 85_520_809_984;

pub fn nvml_state(list_backends: &[hypomnesis::BackendStatus]) -> &BackendState {
    &list_backends
        .iter()
        .find(|b| b.backend == "NVML")
        .unwrap()
        .state
}

#[test]
fn normal_multi_gpu() {
    let fake = FakeNvml::h100s(2)
        .process(FakeProcess::compute(0, 4242, 10 << 30))
        .process(FakeProcess::graphics(0, 4242, 2 << 30))
        .process(FakeProcess::graphics(0, 1000, 300 << 20))
        .process(FakeProcess::compute(1, 5151, 70 << 30));
    let bed = Bed::with_nvml(&fake);
    let fx = &bed.world.proc;
    fx.process(&FakeProc::new(4242, "python3").uid(0)).unwrap();
    fx.process(&FakeProc::new(5151, "pt_main_thread").cmdline(&["/usr/bin/python3", "train.py"]))
        .unwrap();
    let p = bed.probe();

    let list = p.devices();
    assert_eq!(list.devices.len(), 2);
    assert_eq!(
        nvml_state(&list.backends),
        &BackendState::Active { devices: 2 }
    );
    let d0 = &list.devices[0];
    assert_eq!(d0.name.as_deref(), Some("NVIDIA H100 80GB HBM3"));
    assert!(d0.uuid.as_deref().unwrap().starts_with("GPU-"));
    assert_ne!(d0.uuid, list.devices[1].uuid);
    let pci = d0.pci_bus_id.unwrap().to_string();
    assert_eq!(pci, pci.to_lowercase());
    assert!(pci.starts_with("0000:"), "{pci}");
    assert_eq!(d0.driver_version.as_deref(), Some("550.54.15"));
    let m = d0.memory;
    assert_eq!(m.total_bytes, Some(H100_TOTAL));
    let (used, free, reserved) = (
        m.used_bytes.unwrap(),
        m.free_bytes.unwrap(),
        m.reserved_bytes.unwrap(),
    );
    assert!(reserved > 0);
    assert_eq!(
        used + free + reserved,
        H100_TOTAL,
        "v2 semantics: used excludes reserved"
    );
    assert!(d0.unknown.is_empty(), "{:?}", d0.unknown);

    let procs = p.gpu_processes();
    assert!(procs.warnings.is_empty(), "{:?}", procs.warnings);
    assert!(procs.failed_devices.is_empty());
    let rows: Vec<(u32, u32, ProcessKind, Option<u64>)> = procs
        .processes
        .iter()
        .map(|r| (r.device_index, r.pid, r.kind, r.used_bytes))
        .collect();
    assert_eq!(
        rows,
        vec![
            (0, 1000, ProcessKind::Graphics, Some(300 << 20)),
            (0, 4242, ProcessKind::ComputeGraphics, Some(10 << 30)),
            (1, 5151, ProcessKind::Compute, Some(70 << 30)),
        ]
    );
    let r4242 = &procs.processes[1];
    assert_eq!(r4242.name, Some("python3".into()));
    assert_eq!(r4242.user.as_deref(), Some("root"));
    assert_eq!(r4242.uid, Some(0));
    assert_eq!(r4242.device_uuid, d0.uuid);
    assert_eq!(r4242.source, Source::Nvml);
    assert_eq!(
        procs.processes[0].name, None,
        "pid 1000 is not in the proc root"
    );
    assert_eq!(procs.processes[2].name, Some("pt_main_thread".into()));
}

#[test]
fn legacy_driver_degrades_single_fields() {
    let fake = FakeNvml::h100s(1)
        .driver(Driver::Legacy)
        .process(FakeProcess::compute(0, 77, 1 << 30))
        .process(FakeProcess::graphics(0, 78, 2 << 30));
    let bed = Bed::with_nvml(&fake);
    let p = bed.probe();
    let d = &p.devices().devices[0];
    assert_eq!(d.name.as_deref(), Some("NVIDIA H100 80GB HBM3"));
    assert!(d.pci_bus_id.is_some(), "PCI info from the _v2 call");
    let m = d.memory;
    assert_eq!(m.total_bytes, Some(H100_TOTAL));
    assert_eq!(
        m.reserved_bytes, None,
        "no v2 memory call: reserved unknown"
    );
    assert_eq!(
        m.used_bytes.unwrap() + m.free_bytes.unwrap(),
        H100_TOTAL,
        "v1 semantics: used includes the reservation"
    );
    let unknown = d
        .unknown
        .iter()
        .find(|u| u.field == Field::MemoryReservedBytes)
        .unwrap();
    assert_eq!(unknown.reason, UnknownReason::Unsupported);
    let procs = p.gpu_processes();
    assert!(procs.failed_devices.is_empty(), "{:?}", procs.warnings);
    let pids: Vec<(u32, Option<u64>)> = procs
        .processes
        .iter()
        .map(|r| (r.pid, r.used_bytes))
        .collect();
    assert_eq!(pids, vec![(77, Some(1 << 30)), (78, Some(2 << 30))]);
}

#[test]
fn sentinel_memory_is_unknown() {
    let bed =
        Bed::with_nvml(&FakeNvml::h100s(1).process(FakeProcess::compute(0, 9, 0).not_available()));
    let procs = bed.probe().gpu_processes();
    let row = &procs.processes[0];
    assert_eq!(row.used_bytes, None);
    assert_eq!(row.unknown[0].reason, UnknownReason::DriverSentinel);
    assert_eq!(row.unknown[0].field, Field::UsedBytes);
}

#[test]
fn used_above_total_is_unknown_with_a_warning() {
    let bed =
        Bed::with_nvml(&FakeNvml::h100s(1).process(FakeProcess::compute(0, 9, H100_TOTAL + 1)));
    let procs = bed.probe().gpu_processes();
    assert_eq!(procs.processes[0].used_bytes, None);
    assert_eq!(
        procs.processes[0].unknown[0].reason,
        UnknownReason::Implausible
    );
    assert_eq!(procs.warnings.len(), 1);
    assert!(
        procs.warnings[0]
            .to_string()
            .starts_with("GPU 0: pid 9 reported")
    );
}

#[test]
fn a_list_that_grows_between_sizing_and_fill_is_retried() {
    let mut fake = FakeNvml::h100s(1).late_processes(8);
    for pid in 100..110 {
        fake = fake.process(FakeProcess::compute(0, pid, 1 << 20));
    }
    let bed = Bed::with_nvml(&fake);
    let procs = bed.probe().gpu_processes();
    assert!(procs.failed_devices.is_empty(), "{:?}", procs.warnings);
    let pids: Vec<u32> = procs.processes.iter().map(|r| r.pid).collect();
    assert_eq!(pids, (100..110).collect::<Vec<_>>());
}

/// A long-lived probe asks for a list at once into room for last time's count (plus slack):
/// one call instead of a sizing call and a fill; a list that grew past the room is asked
/// again, and nothing is lost.
#[test]
fn a_long_lived_probe_lists_processes_in_one_call_and_still_sees_a_list_grow() {
    let mut fake = FakeNvml::h100s(1).log_calls();
    for pid in 100..103 {
        fake = fake.process(FakeProcess::compute(0, pid, 1 << 20));
    }
    // Ten more from the second listing on: more than the slack.
    for pid in 200..210 {
        fake = fake.process(FakeProcess::compute(0, pid, 1 << 20).visible(1, u64::MAX));
    }
    let bed = Bed::with_nvml(&fake);
    let p = bed.probe();
    let compute_calls = || {
        hmn_testbed::nvml_calls(&bed.env.nvml)
            .iter()
            .filter(|c| *c == "nvmlDeviceGetComputeRunningProcesses_v3")
            .count()
    };
    let pids = || -> Vec<u32> {
        let got = p.gpu_processes();
        assert!(got.failed_devices.is_empty(), "{:?}", got.warnings);
        got.processes.iter().map(|r| r.pid).collect()
    };
    assert_eq!(pids(), vec![100, 101, 102]);
    assert_eq!(
        compute_calls(),
        2,
        "the first listing sizes the list, then fills it"
    );
    let mut all: Vec<u32> = (100..103).chain(200..210).collect();
    all.sort_unstable();
    let mut second = pids();
    second.sort_unstable();
    assert_eq!(second, all, "the list grew past the room: asked again");
    assert_eq!(compute_calls(), 4);
    let mut third = pids();
    third.sort_unstable();
    assert_eq!(third, all);
    assert_eq!(compute_calls(), 5, "room for the thirteen: one call");
}

#[test]
fn the_32_byte_stride_is_detected() {
    let mut fake = FakeNvml::h100s(1).stride(32);
    for (i, pid) in [1184u32, 16040, 2_811_349].into_iter().enumerate() {
        fake = fake.process(FakeProcess::compute(0, pid, (i as u64 + 1) << 30));
    }
    let bed = Bed::with_nvml(&fake);
    let procs = bed.probe().gpu_processes();
    let got: Vec<(u32, Option<u64>)> = procs
        .processes
        .iter()
        .map(|r| (r.pid, r.used_bytes))
        .collect();
    assert_eq!(
        got,
        vec![
            (1184, Some(1 << 30)),
            (16040, Some(2 << 30)),
            (2_811_349, Some(3 << 30))
        ]
    );
}

#[test]
fn zero_devices() {
    let bed = Bed::with_nvml(&FakeNvml::new());
    let p = bed.probe();
    let list = p.devices();
    assert!(list.devices.is_empty());
    assert_eq!(
        nvml_state(&list.backends),
        &BackendState::Active { devices: 0 }
    );
    let reasons = list.absent_reasons();
    assert_eq!(
        reasons[0],
        BackendProblem::new(Backend::Nvml, BackendCause::NoDevice, "no devices")
    );
    assert_eq!(reasons[1].backend, Backend::Drm);
    assert_eq!(reasons[1].cause, BackendCause::NoDevice);
    let err = p.device(0).unwrap_err();
    assert!(matches!(err, Error::NoGpu { .. }), "{err}");
    assert!(err.to_string().contains("NVML: no devices"), "{err}");
}

#[test]
fn a_refused_handle_marks_one_device_unreadable() {
    let mut fake = FakeNvml::h100s(2).process(FakeProcess::compute(0, 5, 1 << 20));
    fake.devices[1].handle_error = Some(4);
    let bed = Bed::with_nvml(&fake);
    let p = bed.probe();
    let list = p.devices();
    assert_eq!(list.devices.len(), 2);
    assert!(list.devices[0].error.is_none());
    let e = list.devices[1].error.as_deref().unwrap();
    assert!(e.contains("no permission"), "{e}");
    assert_eq!(list.devices[1].memory.total_bytes, None);
    assert!(list.warnings.iter().any(|w| w.device_index == Some(1)));
    assert!(matches!(
        p.device(1),
        Err(Error::DeviceUnreadable { index: 1, .. })
    ));
    let procs = p.gpu_processes();
    assert_eq!(procs.failed_devices, vec![1]);
    assert_eq!(procs.processes.len(), 1);
}

#[test]
fn gpu_lost_mid_scan_keeps_the_other_devices() {
    let mut fake = FakeNvml::h100s(2)
        .process(FakeProcess::compute(0, 5, 1 << 20))
        .process(FakeProcess::compute(1, 6, 1 << 20));
    fake.devices[1]
        .errors
        .push(("nvmlDeviceGetComputeRunningProcesses_v3".to_string(), 15));
    let bed = Bed::with_nvml(&fake);
    let p = bed.probe();
    let procs = p.gpu_processes();
    assert_eq!(procs.failed_devices, vec![1]);
    assert_eq!(
        procs.processes.iter().map(|r| r.pid).collect::<Vec<_>>(),
        vec![5],
        "GPU 0 is unaffected"
    );
    let w = procs
        .warnings
        .iter()
        .find(|w| w.device_index == Some(1))
        .unwrap();
    assert!(w.message.contains("lost"), "{w}");
    assert!(matches!(
        p.gpu_processes_on(1),
        Err(Error::DeviceUnreadable { index: 1, .. })
    ));
    assert_eq!(p.gpu_processes_on(0).unwrap().len(), 1);
}

#[test]
fn a_non_utf8_name_is_decoded_lossily() {
    let mut fake = FakeNvml::h100s(1);
    fake.devices[0].name = None;
    fake.devices[0].name_bytes = Some(b"NVIDIA \xff\xfe GPU".to_vec());
    let bed = Bed::with_nvml(&fake);
    let d = &bed.probe().devices().devices[0];
    assert_eq!(d.name.as_deref(), Some("NVIDIA \u{fffd}\u{fffd} GPU"));
}

#[test]
fn own_vram_through_the_snapshot() {
    let me = std::process::id();
    let bed = Bed::with_nvml(&FakeNvml::h100s(2).process(FakeProcess::compute(1, me, 3 << 30)))
        .real_proc();
    let p = bed.probe();
    let s0 = OwnSnapshot::with_probe(&p, 0).unwrap();
    assert!(s0.ram_bytes > 0);
    assert_eq!(
        s0.gpu.unwrap().used_bytes,
        Some(0),
        "no context on GPU 0: a known zero"
    );
    let s1 = OwnSnapshot::with_probe(&p, 1).unwrap();
    let gpu = s1.gpu.unwrap();
    assert_eq!(gpu.used_bytes, Some(3 << 30));
    assert!(gpu.is_per_process);
    assert_eq!(s1.gpu_device.unwrap().index, 1);
    let all = OwnSnapshot::all_with_probe(&p).unwrap();
    assert_eq!(all.len(), 2);
    assert_eq!(all[1].gpu.as_ref().unwrap().used_bytes, Some(3 << 30));
    let bad = OwnSnapshot::with_probe(&p, 7).unwrap();
    assert!(
        bad.gpu.is_none() && bad.gpu_device.is_none(),
        "GPU errors are best effort"
    );
}

#[test]
fn the_probe_keeps_one_session() {
    // Many queries on one probe; the fake's per-list tick advances only if NVML stays loaded.
    let bed = Bed::with_nvml(
        &FakeNvml::h100s(1).process(FakeProcess::compute(0, 9, 0).used_sequence(&[
            1 << 20,
            2 << 20,
            3 << 20,
        ])),
    );
    let p = bed.probe();
    let seen: Vec<Option<u64>> = (0..4)
        .map(|_| p.gpu_processes().processes[0].used_bytes)
        .collect();
    assert_eq!(
        seen,
        vec![Some(1 << 20), Some(2 << 20), Some(3 << 20), Some(3 << 20)]
    );
}

#[test]
fn two_scenarios_loaded_at_once_stay_independent() {
    let a = Bed::with_nvml(&FakeNvml::h100s(1));
    let b = Bed::with_nvml(&FakeNvml::h100s(3).stride(32));
    let (pa, pb) = (a.probe(), b.probe());
    for _ in 0..3 {
        assert_eq!(pa.devices().devices.len(), 1);
        assert_eq!(pb.devices().devices.len(), 3);
    }
}

/// What never changes for a device (name, UUID, PCI address, maximum clocks, or that it cannot
/// tell one) is asked of the driver once per probe; what changes (memory, clocks, telemetry) at
/// every query, with the same answers as a fresh probe gives.
#[test]
fn a_long_lived_probe_asks_a_devices_fixed_facts_once() {
    // The second device answers NOT_SUPPORTED to every telemetry call, maximum clocks included:
    // an answer that is kept too.
    let fake = FakeNvml::new()
        .device(hmn_testbed::FakeDevice::h100(0))
        .device(hmn_testbed::FakeDevice::h100_bare(1))
        .log_calls();
    let bed = Bed::with_nvml(&fake);
    let p = bed.probe();
    let first = p.devices();
    assert_eq!(first.devices[1].telemetry.clock_graphics_max_mhz, None);
    for _ in 0..2 {
        assert_eq!(p.devices().devices, first.devices);
    }
    assert_eq!(
        bed.probe().devices().devices,
        first.devices,
        "a fresh probe agrees"
    );
    let calls = hmn_testbed::nvml_calls(&bed.env.nvml);
    let count = |sym: &str| calls.iter().filter(|c| *c == sym).count();
    // Two devices, three queries by the first probe and one by the second.
    for once in [
        "nvmlDeviceGetName",
        "nvmlDeviceGetUUID",
        "nvmlDeviceGetPciInfo_v3",
    ] {
        assert_eq!(count(once), 2 * 2, "{once}: once per device per probe");
    }
    assert_eq!(
        count("nvmlDeviceGetMaxClockInfo"),
        2 * 2 * 2,
        "graphics and memory"
    );
    assert_eq!(count("nvmlDeviceGetCount_v2"), 2, "once per probe");
    assert_eq!(
        count("nvmlDeviceGetHandleByIndex_v2"),
        2 * 2,
        "a handle once per device per probe"
    );
    assert_eq!(count("nvmlDeviceGetMemoryInfo_v2"), 2 * 4, "every query");
    assert_eq!(count("nvmlDeviceGetClockInfo"), 2 * 4 * 3, "every query");
}

#[test]
fn a_refused_handle_is_asked_for_again() {
    // A handle NVML refused is not kept: each query asks again (and reports the refusal), while
    // the other device's handle is asked for once.
    let fake = FakeNvml::new()
        .device(hmn_testbed::FakeDevice::h100(0).lost())
        .device(hmn_testbed::FakeDevice::h100(1))
        .log_calls();
    let bed = Bed::with_nvml(&fake);
    let p = bed.probe();
    for _ in 0..3 {
        let list = p.gpu_usage();
        assert!(list.devices[0].error.is_some(), "{:?}", list.devices[0]);
        assert_eq!(list.devices[1].error, None);
    }
    let calls = hmn_testbed::nvml_calls(&bed.env.nvml);
    let handles = calls
        .iter()
        .filter(|c| *c == "nvmlDeviceGetHandleByIndex_v2")
        .count();
    // Device 0 at each of the three queries (a device in error has no process query); device 1
    // once.
    assert_eq!(handles, 3 + 1, "{calls:?}");
}

#[test]
fn telemetry_is_read_or_unknown_with_a_reason() {
    let fake = FakeNvml::new()
        .device(hmn_testbed::FakeDevice::h100(0))
        .device(hmn_testbed::FakeDevice::h100_bare(1));
    let bed = Bed::with_nvml(&fake);
    let list = bed.probe().devices();
    let t = list.devices[0].telemetry;
    assert_eq!(t.utilization_percent, Some(37.0));
    assert_eq!(t.memory_utilization_percent, Some(12.0));
    assert_eq!(t.temperature_celsius, Some(41.0));
    assert_eq!(t.power_watts, Some(71.234));
    assert_eq!(t.energy_joules, Some(123_456.789));
    assert_eq!(t.clock_graphics_mhz, Some(1980));
    assert_eq!(t.clock_memory_mhz, Some(2619));
    let bare = &list.devices[1];
    assert_eq!(bare.telemetry, hypomnesis::Telemetry::default());
    let fields: Vec<&str> = bare.unknown.iter().map(|u| u.field.as_str()).collect();
    assert!(fields.contains(&"telemetry.power_watts"), "{fields:?}");
    assert!(
        bare.unknown
            .iter()
            .all(|u| u.reason == UnknownReason::Unsupported)
    );
}
