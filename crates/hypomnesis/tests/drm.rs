//! The DRM backend over fixture `/proc` and `/sys` trees built from real kernel output
//! (`tests/fixtures/fdinfo`, provenance in `tests/fixtures/README.md`).

use std::time::Duration;

use hmn_testbed::{FakeGpu, FakeNvml, FakeProc, FakeProcess};
use hypomnesis::{
    BackendState, Field, GpuProcess, ProcessKind, RuntimeStatus, Source, UnknownReason, Vendor,
};

use crate::util::Bed;

const KIB: u64 = 1024;
const MIB: u64 = 1 << 20;

fn fixture(name: &str) -> String {
    hmn_testbed::fdinfo_sample(name).unwrap()
}

fn row(rows: &[GpuProcess], pid: u32) -> &GpuProcess {
    rows.iter()
        .find(|r| r.pid == pid)
        .unwrap_or_else(|| panic!("no row for pid {pid}: {rows:#?}"))
}

#[test]
fn amdgpu_device_from_sysfs() {
    let w = Bed::new();
    w.gpu(FakeGpu::amdgpu("0000:03:00.0", 1, 128))
        .gpu(FakeGpu::simpledrm(0));
    let list = w.probe().devices();
    assert_eq!(list.devices.len(), 1, "simpledrm is not a GPU: {list:#?}");
    let d = &list.devices[0];
    assert_eq!(d.index, 0);
    assert_eq!(d.vendor, Vendor::Amd);
    assert_eq!(d.driver.as_deref(), Some("amdgpu"));
    assert_eq!(d.driver_version.as_deref(), Some("6.18.44"));
    assert_eq!(d.pci_bus_id.unwrap().to_string(), "0000:03:00.0");
    assert_eq!(d.pci_id.as_deref(), Some("1002:73ff"));
    assert_eq!(d.source, Source::Sysfs);
    assert_eq!(d.runtime_status, Some(RuntimeStatus::Active));
    assert_eq!(d.memory.total_bytes, Some(8_573_157_376));
    assert_eq!(d.memory.used_bytes, Some(6_812_925_952));
    assert_eq!(d.memory.free_bytes, Some(8_573_157_376 - 6_812_925_952));
    assert_eq!(d.memory.reserved_bytes, None);
    assert_eq!(d.regions["gtt"].total_bytes, Some(16_690_659_328));
    assert_eq!(d.regions["visible_vram"].used_bytes, Some(148_897_792));
    assert_eq!(d.telemetry.utilization_percent, Some(7.0));
    assert_eq!(d.telemetry.temperature_celsius, Some(45.0));
    assert_eq!(d.telemetry.power_watts, Some(21.0));
    let drm = list.backends.iter().find(|b| b.backend == "DRM").unwrap();
    assert_eq!(drm.state, BackendState::Active { devices: 1 });
}

#[test]
fn every_amdgpu_era_reports_vram_resident() {
    let w = Bed::new();
    w.gpu(FakeGpu::amdgpu("0000:03:00.0", 1, 128))
        .client(
            100,
            "eraA",
            &[(5, "renderD128", &fixture("amdgpu-eraA.txt"))],
        )
        .client(
            200,
            "eraB",
            &[(
                5,
                "renderD128",
                &fixture("amdgpu-eraB-real.txt").replace("0000:08:00.0", "0000:03:00.0"),
            )],
        )
        .client(
            300,
            "rocm",
            &[(
                5,
                "renderD128",
                &fixture("amdgpu-eraC-rocm-real.txt").replace("0000:83:00.0", "0000:03:00.0"),
            )],
        )
        .client(
            400,
            "eraD",
            &[(
                5,
                "renderD128",
                &fixture("amdgpu-eraD.txt").replace("0000:11:00.0", "0000:03:00.0"),
            )],
        );
    let list = w.probe().gpu_processes();
    let rows = &list.processes;
    assert_eq!(rows.len(), 4, "{rows:#?}");
    assert_eq!(row(rows, 100).used_bytes, Some(2068 * KIB));
    assert_eq!(row(rows, 200).used_bytes, Some(2068 * KIB));
    assert_eq!(row(rows, 300).used_bytes, Some(76 * KIB));
    let d = row(rows, 400);
    assert_eq!(
        d.used_bytes,
        Some(60060 * KIB),
        "drm-memory-vram alias is not added to resident"
    );
    let r = d.regions.unwrap();
    assert_eq!(r.gtt.unwrap().resident_bytes, Some(2 * MIB));
    assert_eq!(r.gtt.unwrap().total_bytes, Some(2 * MIB));
    assert_eq!(r.system.unwrap().resident_bytes, Some(0));
    // Its gfx, compute and dma engines all have busy time: KIND says which classes it used.
    assert_eq!(d.kind.as_str(), "compute+graphics+copy");
    assert_eq!(row(rows, 200).kind, ProcessKind::Graphics, "gfx only");
    assert_eq!(d.source, Source::Fdinfo);
    assert_eq!(d.drm_clients, vec![185]);
    assert_eq!(d.name, Some("eraD".into()));
    let rocm = row(rows, 300).regions.unwrap();
    assert_eq!(rocm.system.unwrap().resident_bytes, Some(6200 * KIB));
    assert_eq!(rocm.vram.unwrap().evicted_bytes, Some(0));
    assert_eq!(
        rocm.vram.unwrap().total_bytes,
        Some(76 * KIB),
        "amd-requested-vram"
    );
    assert_eq!(list.hidden_processes, 0);
}

#[test]
fn intel_integrated_and_discrete() {
    let w = Bed::new();
    w.gpu(FakeGpu::i915_igpu(0, 128))
        .gpu(FakeGpu::xe_dgpu("0000:03:00.0", 1, 129))
        .client(10, "igpu", &[(4, "renderD128", &fixture("i915-igpu.txt"))])
        .client(20, "arc", &[(4, "renderD129", &fixture("xe-dgpu-doc.txt"))])
        .client(
            30,
            "lunar",
            &[(4, "renderD128", &fixture("xe-igpu-real.txt"))],
        );
    let p = w.probe();
    let devs = p.devices().devices;
    assert_eq!(devs.len(), 2);
    assert_eq!(
        devs[0].pci_bus_id.unwrap().to_string(),
        "0000:00:02.0",
        "PCI bus order"
    );
    assert_eq!(devs[0].integrated, Some(true));
    assert_eq!(devs[0].memory.total_bytes, None);
    let why = devs[0]
        .unknown
        .iter()
        .find(|u| u.field == Field::MemoryTotalBytes)
        .unwrap();
    assert!(why.detail.contains("shared system memory"), "{why:?}");
    assert_eq!(devs[1].integrated, Some(false));
    assert_eq!(devs[1].telemetry.energy_joules, Some(123.456_789));
    assert_eq!(devs[1].telemetry.clock_graphics_mhz, Some(2850));

    let rows = p.gpu_processes().processes;
    let igpu = row(&rows, 10);
    assert_eq!(igpu.device_index, 0);
    assert_eq!(
        igpu.used_bytes,
        Some(317_236 * KIB),
        "integrated: resident system memory"
    );
    assert!(igpu.regions.unwrap().vram.is_none());
    let arc = row(&rows, 20);
    assert_eq!(arc.device_index, 1);
    assert_eq!(arc.used_bytes, Some(23_992 * KIB), "vram0 resident");
    assert_eq!(
        arc.regions.unwrap().gtt.unwrap().resident_bytes,
        Some(192 * KIB)
    );
    let lunar = row(&rows, 30);
    assert_eq!(lunar.used_bytes, None, "no memory keys: unknown, not 0");
    assert_eq!(lunar.unknown[0].reason, UnknownReason::Unsupported);
}

/// The VRAM size of a discrete xe card: unknown on a mainline kernel (with the reason), the sum
/// of `tile*/physical_vram_size_bytes` where a non-mainline kernel has them; used and free stay
/// unknown either way (sysfs has no used figure).
#[test]
fn xe_vram_size_where_the_kernel_has_one() {
    let device = |gpu: FakeGpu| {
        let w = Bed::new();
        w.gpu(gpu);
        w.probe().devices().devices.remove(0)
    };
    let mainline = device(FakeGpu::xe_dgpu("0000:03:00.0", 1, 128));
    assert_eq!(mainline.memory.total_bytes, None);
    let why = |d: &hypomnesis::Device, field: Field| {
        d.unknown
            .iter()
            .find(|u| u.field == field)
            .map(|u| u.detail.clone())
            .unwrap_or_else(|| panic!("no unknown {field}: {:?}", d.unknown))
    };
    let total = why(&mainline, Field::MemoryTotalBytes);
    assert!(
        total.starts_with("xe exposes no VRAM size in sysfs"),
        "{total}"
    );
    assert!(total.contains("non-mainline"), "{total}");
    let two_tiles = device(
        FakeGpu::xe_dgpu("0000:03:00.0", 1, 128)
            .file("tile0/physical_vram_size_bytes", "8589934592")
            .file("tile1/physical_vram_size_bytes", "8589934592"),
    );
    assert_eq!(two_tiles.memory.total_bytes, Some(16 << 30));
    assert_eq!(two_tiles.memory.used_bytes, None);
    assert_eq!(two_tiles.memory.free_bytes, None);
    assert!(why(&two_tiles, Field::MemoryUsedBytes).contains("no device-wide VRAM use"));
    assert!(
        two_tiles
            .unknown
            .iter()
            .all(|u| u.field != Field::MemoryTotalBytes)
    );
}

#[test]
fn i915_arc_local_memory_is_vram() {
    let w = Bed::new();
    w.gpu(
        FakeGpu::xe_dgpu("0000:03:00.0", 1, 128)
            .file("uevent", "DRIVER=i915\nPCI_SLOT_NAME=0000:03:00.0"),
    )
    .client(7, "arc", &[(3, "renderD128", &fixture("i915-arc.txt"))]);
    let rows = w.probe().gpu_processes().processes;
    let r = row(&rows, 7);
    assert_eq!(r.used_bytes, Some(4_418_400 * KIB));
    assert_eq!(
        r.regions.unwrap().system.unwrap().resident_bytes,
        Some(8 * MIB)
    );
}

#[test]
fn soc_gpus_use_the_generic_memory_region() {
    let w = Bed::new();
    w.gpu(FakeGpu::platform("ae00000.gpu", "msm", 0, 128))
        .gpu(FakeGpu::platform("fde60000.gpu", "panfrost", 1, 129))
        .gpu(FakeGpu::platform("fec00000.v3d", "v3d", 2, 130))
        .client(1, "msm", &[(3, "renderD128", &fixture("msm-real.txt"))])
        .client(2, "pan", &[(3, "renderD129", &fixture("panfrost-doc.txt"))])
        .client(3, "v3d", &[(3, "renderD130", &fixture("v3d-doc.txt"))]);
    let p = w.probe();
    let devs = p.devices().devices;
    assert_eq!(devs.len(), 3);
    assert!(
        devs.iter()
            .all(|d| d.pci_bus_id.is_none() && d.integrated == Some(true))
    );
    assert_eq!(devs[0].vendor, Vendor::Other("msm".to_string()));
    let rows = p.gpu_processes().processes;
    assert_eq!(
        row(&rows, 1).used_bytes,
        Some(116_376 * KIB),
        "total where resident is absent"
    );
    assert_eq!(row(&rows, 2).used_bytes, Some(36_496 * KIB));
    assert_eq!(row(&rows, 3).used_bytes, Some(15_168 * KIB));
}

#[test]
fn duplicated_fds_and_shared_clients_count_once() {
    let w = Bed::new();
    let text = fixture("amdgpu-eraD.txt").replace("0000:11:00.0", "0000:03:00.0");
    w.gpu(FakeGpu::amdgpu("0000:03:00.0", 1, 128))
        // One process holds the same client through a render and a card fd.
        .client(50, "dup", &[(3, "renderD128", &text), (4, "card1", &text)])
        // A child inherited it (fork), and holds a client of its own.
        .client(
            60,
            "child",
            &[
                (3, "renderD128", &text),
                (
                    5,
                    "renderD128",
                    &fixture("amdgpu-eraD.txt")
                        .replace("0000:11:00.0", "0000:03:00.0")
                        .replace("drm-client-id:\t185", "drm-client-id:\t186")
                        .replace("60060 KiB", "1024 KiB"),
                ),
            ],
        );
    let rows = w.probe().gpu_processes().processes;
    let parent = row(&rows, 50);
    assert_eq!(parent.used_bytes, Some(60060 * KIB));
    assert!(parent.shared_with.is_empty());
    let child = row(&rows, 60);
    assert_eq!(child.used_bytes, Some(1024 * KIB), "only its own client");
    assert_eq!(child.shared_with, vec![50]);
    assert_eq!(child.drm_clients, vec![185, 186]);
    let sum: u64 = rows.iter().filter_map(|r| r.used_bytes).sum();
    assert_eq!(sum, (60060 + 1024) * KIB, "no client counted twice");
}

#[test]
fn vanished_processes_and_fds_are_skipped() {
    let w = Bed::new();
    w.gpu(FakeGpu::amdgpu("0000:03:00.0", 1, 128)).client(
        70,
        "ok",
        &[(
            3,
            "renderD128",
            &fixture("amdgpu-eraB-real.txt").replace("0000:08:00.0", "0000:03:00.0"),
        )],
    );
    // pid 71's fd is listed but its fdinfo is gone; pid 72 has no fd directory at all.
    w.world.proc.process(&FakeProc::new(71, "gone")).unwrap();
    w.world.proc.fd(71, 3, "/dev/dri/renderD128").unwrap();
    w.world.proc.process(&FakeProc::new(72, "kthread")).unwrap();
    let list = w.probe().gpu_processes();
    assert_eq!(
        list.processes.iter().map(|r| r.pid).collect::<Vec<_>>(),
        vec![70]
    );
    assert_eq!(list.hidden_processes, 0);
    assert!(list.warnings.is_empty(), "{:?}", list.warnings);
}

#[test]
fn a_suspended_card_is_listed_but_not_read() {
    let w = Bed::new();
    w.gpu(FakeGpu::amdgpu("0000:03:00.0", 1, 128).suspended())
        .gpu(FakeGpu::amdgpu("0000:04:00.0", 2, 129))
        .client(
            80,
            "sleepy",
            &[(
                3,
                "renderD128",
                &fixture("amdgpu-eraD.txt").replace("0000:11:00.0", "0000:03:00.0"),
            )],
        )
        .client(
            81,
            "awake",
            &[(
                3,
                "renderD129",
                &fixture("amdgpu-eraD.txt").replace("0000:11:00.0", "0000:04:00.0"),
            )],
        );
    let p = w.probe();
    let devs = p.devices().devices;
    let s = &devs[0];
    assert_eq!(s.runtime_status, Some(RuntimeStatus::Suspended));
    assert_eq!(s.memory.total_bytes, None);
    assert!(
        s.unknown
            .iter()
            .any(|u| u.reason == UnknownReason::Suspended)
    );
    assert_eq!(s.telemetry.utilization_percent, None);
    let rows = p.gpu_processes().processes;
    assert_eq!(
        rows.iter().map(|r| r.pid).collect::<Vec<_>>(),
        vec![81],
        "no fdinfo of a suspended device is read"
    );
}

#[test]
fn unknown_keys_and_units_changing_between_reads() {
    let w = Bed::new();
    let v1 = "drm-driver:\tamdgpu\ndrm-pdev:\t0000:03:00.0\ndrm-client-id:\t9\ndrm-resident-vram:\t16 MiB\namd-future-key:\t3 widgets\ndrm-engine-gfx:\t1000000 ns\n";
    w.gpu(FakeGpu::amdgpu("0000:03:00.0", 1, 128))
        .client(90, "u", &[(3, "renderD128", v1)]);
    let p = w.probe();
    let first = p.gpu_processes();
    assert_eq!(row(&first.processes, 90).used_bytes, Some(16 * MIB));
    assert!(
        row(&first.processes, 90).engines.is_empty(),
        "one sample: no utilization"
    );
    std::thread::sleep(Duration::from_millis(20));
    // The kernel prints the same figure in another unit; the gfx counter went backwards.
    let v2 = v1
        .replace("16 MiB", "16384 KiB")
        .replace("1000000 ns", "999 ns");
    w.world.proc.fdinfo(90, 3, &v2).unwrap();
    let second = p.gpu_processes();
    let r = row(&second.processes, 90);
    assert_eq!(r.used_bytes, Some(16 * MIB));
    assert!(
        r.engines.is_empty(),
        "a counter going backwards gives no figure: {:?}",
        r.engines
    );
    assert!(second.warnings.is_empty(), "{:?}", second.warnings);
}

#[test]
fn engine_utilization_between_two_queries() {
    let w = Bed::new();
    let at = |ns: u64| {
        format!(
            "drm-driver:\tamdgpu\ndrm-pdev:\t0000:03:00.0\ndrm-client-id:\t9\ndrm-resident-vram:\t1 MiB\ndrm-engine-gfx:\t{ns} ns\n"
        )
    };
    w.gpu(FakeGpu::amdgpu("0000:03:00.0", 1, 128))
        .client(91, "busy", &[(3, "renderD128", &at(0))]);
    let p = w.probe();
    p.gpu_processes();
    let started = std::time::Instant::now();
    std::thread::sleep(Duration::from_millis(200));
    // Busy for 50 ms of the interval (a lower bound of 25 % whatever the scheduler adds).
    w.world.proc.fdinfo(91, 3, &at(50_000_000)).unwrap();
    let rows = p.gpu_processes().processes;
    let elapsed = started.elapsed().as_secs_f64();
    let busy = row(&rows, 91).engines["gfx"].busy_percent;
    let expected = 0.05 / elapsed * 100.0;
    assert!(busy > 0.0 && busy <= 25.0 + 1e-9, "{busy}");
    assert!(
        (busy - expected).abs() < expected * 0.5,
        "{busy} vs ~{expected}"
    );
}

/// A malformed line is warned about and the rest of the file read (not fatal); a memory size
/// among them makes the process's figure unknown rather than short.
#[test]
fn malformed_values_are_warned_not_fatal() {
    let w = Bed::new();
    w.gpu(FakeGpu::amdgpu("0000:03:00.0", 1, 128)).client(
        92,
        "odd",
        &[(3, "renderD128", "drm-driver:\tamdgpu\ndrm-client-id:\t4\ndrm-resident-vram:\t12 parsecs\ndrm-resident-gtt:\t4 KiB\n")],
    );
    let list = w.probe().gpu_processes();
    let r = row(&list.processes, 92);
    // The driver printed a VRAM size that cannot be read: the GTT alone would be short of it.
    assert_eq!(r.used_bytes, None, "not the GTT alone");
    let why = r
        .unknown
        .iter()
        .find(|u| u.field == hypomnesis::Field::UsedBytes)
        .unwrap();
    assert_eq!(why.reason, UnknownReason::Unreadable);
    assert!(why.detail.contains("12 parsecs"), "{}", why.detail);
    assert_eq!(list.warnings.len(), 1);
    assert!(
        list.warnings[0].message.contains("drm-resident-vram"),
        "{:?}",
        list.warnings
    );
}

#[test]
fn rocm_compute_vram_from_kfd() {
    let w = Bed::new();
    w.gpu(FakeGpu::amdgpu("0000:83:00.0", 1, 128)).client(
        300,
        "python3",
        &[(5, "renderD128", &fixture("amdgpu-eraC-rocm-real.txt"))],
    );
    w.world.sys.kfd_node(0, 0, 0, 0, 0, 0).unwrap(); // the CPU node
    w.world.sys.kfd_node(1, 48233, 0, 0x83, 0, 0).unwrap();
    w.world.sys.kfd_process(300, 48233, 17_985_175_552).unwrap();
    w.world.sys.kfd_process(301, 48233, 1 << 30).unwrap();
    w.world.proc.process(&FakeProc::new(301, "hipcc")).unwrap();
    let rows = w.probe().gpu_processes().processes;
    let r = row(&rows, 300);
    assert_eq!(r.kind, ProcessKind::Compute);
    assert_eq!(r.source, Source::Kfd);
    assert_eq!(r.used_bytes, Some(17_985_175_552));
    assert!(r.regions.is_some(), "the fdinfo regions stay");
    let k = row(&rows, 301);
    assert_eq!(
        (k.used_bytes, k.source, k.name.clone()),
        (Some(1 << 30), Source::Kfd, Some("hipcc".into()))
    );
}

#[test]
fn nvidia_drm_nodes_merge_with_nvml_and_numbering_follows() {
    let mut w = Bed::new();
    let fake = FakeNvml::h100s(1).process(FakeProcess::compute(0, 4242, 1 << 30));
    let nvml_pci = "0000:1a:00.0"; // FakeDevice::h100(0)
    w.install_nvml(&fake);
    w.gpu(FakeGpu::nvidia(nvml_pci, 0, 128).suspended())
        .gpu(FakeGpu::amdgpu("0000:03:00.0", 1, 129));
    let p = w.probe();
    let devs = p.devices().devices;
    assert_eq!(
        devs.len(),
        2,
        "the NVIDIA DRM node is not listed twice: {devs:#?}"
    );
    assert_eq!((devs[0].index, devs[0].source), (0, Source::Nvml));
    assert_eq!(
        devs[0].runtime_status,
        Some(RuntimeStatus::Suspended),
        "sysfs power state joined by bus id"
    );
    assert_eq!((devs[1].index, devs[1].source), (1, Source::Sysfs));
}

#[test]
fn nvidia_without_nvml_is_listed_with_the_reason() {
    let w = Bed::new();
    w.gpu(FakeGpu::nvidia("0000:1a:00.0", 0, 128));
    let devs = w.probe().devices().devices;
    assert_eq!(devs.len(), 1);
    assert_eq!(devs[0].vendor, Vendor::Nvidia);
    let why = devs[0]
        .unknown
        .iter()
        .find(|u| u.field == Field::MemoryTotalBytes)
        .unwrap();
    assert!(why.detail.contains("NVML"), "{why:?}");
}

#[test]
fn no_drm_devices_means_no_process_walk() {
    let w = Bed::new();
    w.client(5, "x", &[(3, "renderD128", &fixture("amdgpu-eraD.txt"))]);
    let list = w.probe().gpu_processes();
    assert!(list.processes.is_empty());
    let drm = list.backends.iter().find(|b| b.backend == "DRM").unwrap();
    assert!(matches!(drm.state, BackendState::Absent { .. }));
}

/// Issue 17: a hostile `/proc` (a container's, presented to a monitoring agent) cannot make a
/// read unbounded or hang it: an fdinfo of 1 GiB, one that is a FIFO or `/dev/zero`, and one
/// with more keys than any driver prints each give an unknown with its reason.
#[test]
fn hostile_fdinfo_files_give_bounded_unknowns() {
    let w = Bed::new();
    let era_d = fixture("amdgpu-eraD.txt").replace("0000:11:00.0", "0000:03:00.0");
    w.gpu(FakeGpu::amdgpu("0000:03:00.0", 1, 128));
    for pid in [100, 200, 300, 400, 500] {
        w.client(pid, "c", &[(5, "renderD128", &era_d)]);
    }
    let fdinfo = |pid: u32| w.proc().join(format!("{pid}/fdinfo/5"));
    // 200: 1 GiB (sparse), starting like a real file.
    let f = std::fs::File::create(fdinfo(200)).unwrap();
    std::io::Write::write_all(&mut &f, era_d.as_bytes()).unwrap();
    f.set_len(1 << 30).unwrap();
    // 300: a FIFO nobody writes to; 400: /dev/zero.
    std::fs::remove_file(fdinfo(300)).unwrap();
    nix::unistd::mkfifo(&fdinfo(300), nix::sys::stat::Mode::S_IRWXU).unwrap();
    std::fs::remove_file(fdinfo(400)).unwrap();
    std::os::unix::fs::symlink("/dev/zero", fdinfo(400)).unwrap();
    // 500: small, but with 3,000 keys.
    let mut many = era_d.clone();
    for i in 0..3000 {
        many.push_str(&format!("drm-total-r{i}:\t{i}\n"));
    }
    assert!(
        many.len() < 64 << 10,
        "under the size cap: the key cap decides"
    );
    std::fs::write(fdinfo(500), many).unwrap();

    let list = w.probe().gpu_processes();
    assert!(row(&list.processes, 100).used_bytes.is_some());
    for (pid, reason, words) in [
        (200, UnknownReason::TooLarge, "larger than 65536 bytes"),
        (300, UnknownReason::Unreadable, "not a regular file (fifo)"),
        (
            400,
            UnknownReason::Unreadable,
            "not a regular file (character device)",
        ),
        (500, UnknownReason::TooLarge, "more than 1024 keys"),
    ] {
        let r = row(&list.processes, pid);
        assert_eq!(r.used_bytes, None, "pid {pid}");
        assert!(r.regions.is_none(), "pid {pid}");
        let u = r
            .unknown
            .iter()
            .find(|u| u.field == Field::UsedBytes)
            .unwrap();
        assert_eq!(u.reason, reason, "pid {pid}: {u:?}");
        assert!(u.detail.contains(words), "pid {pid}: {u:?}");
        assert!(u.detail.contains(&format!("{pid}/fdinfo/5")), "{u:?}");
    }
}

/// Copies the excerpts of the real name databases into the bed's share root.
fn install_ids(w: &Bed, pci_dir: &str) {
    let ids = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ids");
    for (from, to) in [("pci.ids", pci_dir), ("amdgpu.ids", "libdrm")] {
        let dir = w.env.share.join(to);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(ids.join(from), dir.join(from)).unwrap();
    }
}

#[test]
fn drm_names_from_the_systems_databases() {
    let w = Bed::new();
    let rx = |slot: &str, card, rev: &str, subsystem: (&str, &str)| {
        FakeGpu::amdgpu(slot, card, 128 + card)
            .file("device", "0x73bf")
            .file("revision", rev)
            .file("subsystem_vendor", subsystem.0)
            .file("subsystem_device", subsystem.1)
    };
    w.gpu(rx("0000:03:00.0", 1, "0xc1", ("0x1da2", "0xe445")))
        .gpu(rx("0000:04:00.0", 2, "0xc2", ("0x1002", "0x0e3a")))
        .gpu(rx("0000:05:00.0", 3, "0xc2", ("0x1da2", "0xe445")).suspended())
        .gpu(FakeGpu::xe_dgpu("0000:06:00.0", 4, 132));
    // No databases: no name, as before.
    let names = |w: &Bed| -> Vec<Option<String>> {
        w.probe()
            .devices()
            .devices
            .into_iter()
            .map(|d| d.name)
            .collect()
    };
    assert_eq!(names(&w), [None, None, None, None]);
    install_ids(&w, "misc");
    let list = w.probe().devices();
    let got: Vec<Option<&str>> = list.devices.iter().map(|d| d.name.as_deref()).collect();
    assert_eq!(
        got,
        [
            Some("AMD Radeon RX 6800 XT"), // amdgpu.ids: device and revision
            Some("Radeon RX 6900 XT"),     // pci.ids: the board's subsystem line
            Some("Radeon RX 6800/6800 XT / 6900 XT"), // suspended: named without waking it
            None,                          // not in the excerpt
        ]
    );
    assert!(
        list.devices[0]
            .unknown
            .iter()
            .all(|u| u.field != Field::Name)
    );
    assert!(
        list.devices[3]
            .unknown
            .iter()
            .any(|u| u.field == Field::Name)
    );
    assert!(list.devices[2].is_suspended());
    assert_eq!(list.devices[2].memory.total_bytes, None, "still not read");
}

#[test]
fn a_cards_identity_is_read_once_per_discovery_and_its_sleep_every_query() {
    let w = Bed::new();
    w.gpu(FakeGpu::amdgpu("0000:03:00.0", 1, 128));
    let dev = w.world.sys.root().join("devices/0000:03:00.0");
    let p =
        hypomnesis::Probe::with_options(w.options().drm_index_max_age(Duration::from_secs(3600)));
    let first = p.devices().devices;
    assert_eq!(first[0].vendor, Vendor::Amd);
    // Its identity files gone: a query within the discovery's age does not read them again…
    for f in ["uevent", "vendor", "device", "revision", "product_name"] {
        let _ = std::fs::remove_file(dev.join(f));
    }
    let again = p.devices().devices;
    assert_eq!(
        (&again[0].vendor, &again[0].name, &again[0].driver_version),
        (&first[0].vendor, &first[0].name, &first[0].driver_version)
    );
    // …but the figures that move, and whether it sleeps, are read each time.
    std::fs::write(dev.join("mem_info_vram_used"), "1048576\n").unwrap();
    std::fs::write(dev.join("power/runtime_status"), "suspended\n").unwrap();
    let asleep = p.devices().devices;
    assert_eq!(asleep[0].runtime_status, Some(RuntimeStatus::Suspended));
    std::fs::write(dev.join("power/runtime_status"), "active\n").unwrap();
    assert_eq!(p.devices().devices[0].memory.used_bytes, Some(1 << 20));
    // A fresh discovery (age 0) reads the identity again: the vendor is now unknown.
    let fresh = hypomnesis::Probe::with_options(w.options().drm_index_max_age(Duration::ZERO));
    let d = fresh.devices().devices;
    assert!(d.is_empty() || d[0].vendor != Vendor::Amd, "{d:?}");
}
