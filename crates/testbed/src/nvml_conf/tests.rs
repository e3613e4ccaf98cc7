use super::keys::{COMPUTE_INSTANCE, DEVICE, EVENT, GLOBAL, GPU_INSTANCE, PROCESS, SAMPLE};
use super::model::*;
use super::text::Key;

/// A scenario in which every field of every section differs from what an omitted key means,
/// so every key is written and must be read back.
fn everything() -> FakeNvml {
    let mut d = FakeDevice::omitted(0);
    d.name = Some("NVIDIA H100 80GB HBM3".into());
    d.name_bytes = Some(b"NVIDIA \xff\xfe GPU".to_vec());
    d.uuid = "GPU-3a1f7c2e-5b9d-4e61-8f0a-9c2d4b7e0000".into();
    d.pci_bus_id = "00000000:1A:00.0".into();
    d.pci_device_id = 0x2335;
    d.pci_subsystem_id = 0x18BE_10DE;
    d.memory_total = 85_520_809_984;
    d.memory_reserved = 566_231_040;
    d.memory_used = vec![4 << 20, 5 << 20, u64::MAX];
    d.utilization_gpu = Some(37);
    d.utilization_memory = Some(12);
    d.temperature_c = Some(41);
    d.power_mw = Some(71_234);
    d.energy_mj = Some(123_456_789);
    d.clocks_mhz = [Some(1980), Some(1981), Some(2619)];
    d.max_clocks_mhz = [Some(1990), Some(1991), Some(2620)];
    d.handle_error = Some(15);
    d.errors = vec![
        ("nvmlDeviceGetUUID".into(), 999),
        ("nvmlDeviceGetName".into(), 3),
    ];
    d.accounting = true;
    d.persistence = None;
    d.compute_mode = Some(3);
    d.extras = DeviceExtras {
        mig_mode: Some(true),
        mig_pending: Some(false),
        mig_max_devices: 4,
        mig_profiles: Some("h200_141gb"),
        privileged: false,
        mps_supported: false,
        mig_record_ids: false,
        unified_memory: true,
    };
    d.health = FakeHealth {
        ecc_mode: Some(true),
        ecc_pending: Some(false),
        ecc_counts: [vec![1, 2], vec![3], vec![4], vec![5, 6]],
        remapped_rows: Some([7, 8, 1, 0]),
        retired: [Some(9), Some(10)],
        retired_pending: Some(true),
        events_supported: Some(0xff9f),
    };
    let mut ev = FakeEvent::xid(1, 79);
    ev.event_type = 0x10;
    ev.after_waits = 3;
    ev.gpu_instance_id = Some(2);
    ev.compute_instance_id = Some(0);
    let mut p = FakeProcess::new(1, ProcessListKind::Mps, 4242, 0);
    p.used = vec![Used::Bytes(1 << 30), Used::NotAvailable];
    p.gpu_instance_id = Some(11);
    p.compute_instance_id = Some(0);
    p.from_tick = Some(2);
    p.until_tick = Some(5);
    p.accounting_max = Some(Used::NotAvailable);
    p.accounting_start_us = Some(1_700_000_000_000_000);
    p.accounting_util = Some((64, 21));
    let mut child = FakeProcess::new(0, ProcessListKind::Graphics, 0, 7);
    child.child_of_caller = true;
    let mut me = FakeProcess::new(0, ProcessListKind::Compute, 0, 8);
    me.caller = true;
    let mut ci =
        FakeComputeInstance::new(2, "1c.3g.40gb", "MIG-5ff0d535-9a82-5af6-80df-768b9d3ac092");
    ci.slot = Some(3);
    ci.gone_after_calls = Some(9);
    ci.gone_from_enum = Some(1);
    ci.errors = vec![("nvmlDeviceGetUUID".into(), 999)];
    ci.slices = 2;
    ci.sm = Some(16);
    let mut gi = FakeGpuInstance::new(1, 11, 9, (4, 2), 624 << 20);
    gi.memory_total = Some(40_448 << 20);
    gi.memory_reserved = 1 << 20;
    gi.memory_used = vec![1, 2];
    gi.compute_instances = vec![ci, FakeComputeInstance::new(0, "1g.10gb", "MIG-x")];
    let mut s = FakeSample::new(1, 4242, [37, 12, 1, 3]);
    s.age_ms = 250;
    s.rounds = Some((1, 4));
    s.late = true;
    let mut s_child = FakeSample::new(0, 0, [1, 2, 3, 4]);
    s_child.child_of_caller = true;
    let mut s_me = FakeSample::new(0, 0, [5, 6, 7, 8]);
    s_me.caller = true;
    FakeNvml {
        driver: Driver::default(),
        init_error: Some(18),
        driver_version: Some("550.54.15".into()),
        nvml_version: Some("12.550.54.15".into()),
        cuda_driver_version: Some(-12040),
        process_stride: 32,
        late_processes: 2,
        log_calls: true,
        device_count: Some(3),
        errors: vec![
            ("nvmlDeviceGetCount_v2".into(), 999),
            ("nvmlShutdown".into(), 1),
        ],
        devices: vec![d, FakeDevice::omitted(1)],
        processes: vec![p, child, me],
        gpu_instances: vec![gi, FakeGpuInstance::new(1, 13, 19, (6, 1), 15 << 20)],
        samples: vec![s, s_child, s_me],
        events: vec![ev],
    }
}

/// The keys of a table the text writes, in order.
fn written<T>(keys: &[Key<T>], text: &str, section: &str) -> Vec<&'static str> {
    let body = match section {
        "" => text.split("\n[").next().unwrap_or(""),
        _ => text.split(section).nth(1).unwrap_or(""),
    };
    keys.iter()
        .filter(|k| {
            body.lines()
                .any(|l| l.starts_with(&format!("{} = ", k.name)))
        })
        .map(|k| k.name)
        .collect()
}

#[test]
fn every_key_written_is_read_back_into_the_same_scenario() {
    let f = everything();
    let text = f.to_conf();
    let back = FakeNvml::from_conf(&text).unwrap();
    assert_eq!(back, f, "{text}");
    // Every key of every section was written (so the equality above covers it).
    let all = |keys: Vec<&'static str>, names: Vec<&'static str>| assert_eq!(keys, names);
    all(
        written(GLOBAL, &text, ""),
        GLOBAL.iter().map(|k| k.name).collect(),
    );
    all(
        written(DEVICE, &text, "[device]"),
        DEVICE.iter().map(|k| k.name).collect(),
    );
    all(
        written(PROCESS, &text, "[process]"),
        PROCESS.iter().map(|k| k.name).collect(),
    );
    all(
        written(GPU_INSTANCE, &text, "[gpu_instance]"),
        GPU_INSTANCE.iter().map(|k| k.name).collect(),
    );
    all(
        written(COMPUTE_INSTANCE, &text, "[compute_instance]"),
        COMPUTE_INSTANCE.iter().map(|k| k.name).collect(),
    );
    all(
        written(SAMPLE, &text, "[sample]"),
        SAMPLE.iter().map(|k| k.name).collect(),
    );
    all(
        written(EVENT, &text, "[event]"),
        EVENT.iter().map(|k| k.name).collect(),
    );
    // Written twice, read twice: the text is a fixed point.
    assert_eq!(back.to_conf(), text);
}

#[test]
fn the_builders_scenarios_read_back_unchanged() {
    for f in [
        FakeNvml::h100s(2),
        FakeNvml::h100_mig_mixed(),
        FakeNvml::h200_mig(),
        FakeNvml::mps_volta(100, [200, 300]),
        FakeNvml::mps_pre_volta(100),
        FakeNvml::new()
            .device(FakeDevice::h100(0).lost().persistence(None).accounting())
            .process(FakeProcess::compute_child_of_caller(0, 1).not_available())
            .sample(
                FakeSample::child_of_caller(0, [1, 2, 3, 4])
                    .rounds(0, 2)
                    .late(),
            ),
    ] {
        assert_eq!(FakeNvml::from_conf(&f.to_conf()).unwrap(), f);
    }
}

#[test]
fn an_omitted_key_means_the_fakes_default() {
    let f = FakeNvml::from_conf(
        "driver_version = 999.99\n[device]\nname = NVIDIA H100 NVL\nmemory_total = 0x10\n\
         [device]\n[process]\npid = 7 # a comment\n[gpu_instance]\n[compute_instance]\n[sample]\n",
    )
    .unwrap();
    assert_eq!(f.process_stride, 24);
    assert_eq!(f.devices[0].memory_total, 16);
    assert_eq!(f.devices[0].name_for_nvml(), b"NVIDIA H100 NVL");
    assert_eq!(f.devices[1].name_for_nvml(), b"NVIDIA Fake GPU");
    assert_eq!(
        f.devices[1].uuid,
        "GPU-00000000-0000-0000-0000-000000000001"
    );
    assert_eq!(f.devices[1].pci_bus_id, "00000000:02:00.0");
    assert_eq!(f.devices[1].persistence, Some(false));
    assert_eq!(
        f.devices[1].compute_mode,
        Some(0),
        "an omitted key: the default mode"
    );
    assert_eq!(f.processes[0].pid, 7);
    assert_eq!(f.processes[0].used, vec![Used::Bytes(0)]);
    assert_eq!(f.gpu_instances[0].profile_id, 19);
    assert_eq!(f.gpu_instances[0].compute_instances[0].name, "1g.10gb");
    assert_eq!(f.samples[0].age_ms, 100);
}

#[test]
fn what_the_reader_does_not_understand_is_an_error() {
    for (text, says) in [
        ("nonsense = 1\n", "unknown global key \"nonsense\""),
        ("[devices]\n", "unknown section"),
        (
            "[device]\nmemory_total = lots\n",
            "[device] memory_total: not a number",
        ),
        ("[device]\npci_bus_id = 1A:00\n", "bad pci_bus_id"),
        (
            "[device]\nmig_profiles = a100\n",
            "must be h100_80gb, h200_141gb or none",
        ),
        ("[device]\naccounting_mode = yes\n", "must be 0 or 1"),
        ("process_stride = 28\n", "must be 24 or 32"),
        ("error = nvmlInit_v2\n", "must be Symbol:code"),
        ("[process]\ndevice = 0\n[device]\n", "[process] without pid"),
        ("[process]\ndevice = 0\n", "[process] without pid"),
        (
            "[process]\npid = 1\nlist = video\n",
            "compute, graphics or mps",
        ),
        (
            "[compute_instance]\ngi = 3\n",
            "which no [gpu_instance] defines",
        ),
        ("just words\n", "expected key = value"),
    ] {
        let e = FakeNvml::from_conf(text).unwrap_err();
        assert!(e.contains(says), "{text:?}: {e}");
    }
}
