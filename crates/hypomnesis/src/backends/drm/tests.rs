//! The DRM backend's tests over fixture worlds (moved out of `mod.rs` for its size).
use super::*;
use hmn_testbed::{FakeGpu, World};

/// What a query reads every time — a device's memory figures, hwmon, busy counter and
/// runtime status, each client's fdinfo — is read through descriptors kept from the query
/// before (here of any file: the fixture is rewritten in place, which a kept descriptor
/// sees, and replaced by rename, which only a fresh open would see).
#[test]
fn every_query_reads_its_moving_figures_through_kept_files() {
    let dir = tempfile::tempdir().unwrap();
    let world = World::new(dir.path()).unwrap();
    world.gpu(FakeGpu::amdgpu("0000:03:00.0", 1, 128)).unwrap();
    let fdinfo = |kib: u64| {
        format!(
            "pos:\t0\nflags:\t02100002\ndrm-driver:\tamdgpu\ndrm-client-id:\t7\n\
             drm-pdev:\t0000:03:00.0\ndrm-memory-vram:\t{kib} KiB\n"
        )
    };
    world
        .client(4242, "llama", &[(3, "renderD128", &fdinfo(1024))])
        .unwrap();
    let roots = Roots::system()
        .with_proc(dir.path().join("proc"))
        .with_sys(world.sys.root());
    let backend = DrmBackend::new(roots.clone(), Duration::from_secs(3600));
    *lock(&backend.files) = KeptFiles::new(Cap::SYSFS).keeping_any();
    *lock(&backend.fdinfo) = KeptFiles::new(Cap::FDINFO).keeping_any();
    let query = || {
        let (devices, map) = backend.devices(0, &[], None);
        let rows = backend.processes(&map, &mut Vec::new()).rows;
        (devices, rows)
    };
    let (devices, rows) = query();
    assert_eq!(devices[0].memory.used_bytes, Some(6_812_925_952));
    assert_eq!(rows[0].used_bytes, Some(1 << 20));
    let card = world.sys.root().join("devices/0000:03:00.0");
    let client = dir.path().join("proc/4242/fdinfo/3");
    // Rewritten in place: seen through the kept descriptors.
    std::fs::write(card.join("mem_info_vram_used"), "1048576").unwrap();
    std::fs::write(card.join("hwmon/hwmon4/temp1_input"), "61000").unwrap();
    std::fs::write(&client, fdinfo(2048)).unwrap();
    let (devices, rows) = query();
    assert_eq!(devices[0].memory.used_bytes, Some(1 << 20));
    assert_eq!(devices[0].telemetry.temperature_celsius, Some(61.0));
    assert_eq!(rows[0].used_bytes, Some(2 << 20));
    let kept = lock(&backend.files).kept();
    // vram and gtt (total, used), visible vram (total, used), busy, temperature, power,
    // runtime status (read from the second query on).
    assert!(kept >= 8, "{kept} sysfs files kept");
    assert_eq!(lock(&backend.fdinfo).kept(), 1);
    // Replaced by rename: the kept descriptors still read the files they opened, so the
    // figures are the in-place ones — proof that no file was opened again.
    for (path, text) in [
        (card.join("mem_info_vram_used"), "4096".to_string()),
        (client.clone(), fdinfo(4096)),
    ] {
        let tmp = path.with_extension("new");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, &path).unwrap();
    }
    let (devices, rows) = query();
    assert_eq!(devices[0].memory.used_bytes, Some(1 << 20));
    assert_eq!(rows[0].used_bytes, Some(2 << 20));
    // A new discovery closes the devices' files (their directories may have changed).
    let rediscovering = DrmBackend::new(roots, Duration::ZERO);
    *lock(&rediscovering.files) = KeptFiles::new(Cap::SYSFS).keeping_any();
    rediscovering.devices(0, &[], None);
    let first = lock(&rediscovering.files).kept();
    rediscovering.devices(0, &[], None);
    assert_eq!(
        lock(&rediscovering.files).kept(),
        first,
        "closed, then kept again"
    );
    assert_eq!(
        rediscovering.devices(0, &[], None).0[0].memory.used_bytes,
        Some(4096)
    );
}

/// One amdgpu card at 0000:03:00.0 and one client of pid 4242 whose fdinfo (fd 3) holds
/// `drm-memory-vram: VRAM` and the line `more`: its row and the query's warnings.
fn one_client_with(vram: &str, more: &str) -> (GpuProcess, Vec<Warning>) {
    let dir = tempfile::tempdir().unwrap();
    let world = World::new(dir.path()).unwrap();
    world.gpu(FakeGpu::amdgpu("0000:03:00.0", 1, 128)).unwrap();
    let text = format!(
        "drm-driver:\tamdgpu\ndrm-client-id:\t7\ndrm-pdev:\t0000:03:00.0\n\
         drm-memory-vram:\t{vram}\n{more}\n"
    );
    world
        .client(4242, "llama", &[(3, "renderD128", &text)])
        .unwrap();
    let roots = Roots::system()
        .with_proc(dir.path().join("proc"))
        .with_sys(world.sys.root());
    let backend = DrmBackend::new(roots, Duration::from_secs(3600));
    let (_, map) = backend.devices(0, &[], None);
    let mut warnings = Vec::new();
    let mut rows = backend.processes(&map, &mut warnings).rows;
    assert_eq!(rows.len(), 1, "{rows:?}");
    (rows.remove(0), warnings)
}

/// A memory size the driver printed that cannot be read (overflowing, negative): the
/// process's figure would be short of it, so it is unknown as unreadable, naming the file —
/// not "the driver prints no memory stats" (QA), and never the rest of its sizes alone.
#[test]
fn a_malformed_size_makes_the_figure_unreadable_not_short() {
    for bad in ["18446744073709551615 KiB", "-1 KiB"] {
        let (row, warnings) = one_client_with(bad, "drm-memory-gtt:\t1024 KiB");
        assert_eq!(row.used_bytes, None, "{bad}: not the GTT alone");
        let why = row
            .unknown
            .iter()
            .find(|u| u.field == Field::UsedBytes)
            .unwrap();
        assert_eq!(why.reason, UnknownReason::Unreadable, "{bad}");
        assert!(
            why.detail.contains("4242/fdinfo/3") && why.detail.contains("malformed size"),
            "{}",
            why.detail
        );
        assert!(
            warnings
                .iter()
                .any(|w| w.message.contains("malformed size")),
            "{warnings:?}"
        );
    }
    // A malformed evicted size is a detail the figure is not made of: the figure stays, the
    // problem is still a warning.
    let (row, warnings) = one_client_with("2048 KiB", "amd-evicted-vram:\t-1 KiB");
    assert_eq!(row.used_bytes, Some(2 << 20), "{:?}", row.unknown);
    assert!(
        warnings.iter().any(|w| w.message.contains("a detail")),
        "{warnings:?}"
    );
}

#[test]
fn finding_no_gpu_is_reused_for_the_index_age_and_then_listed_again() {
    let dir = tempfile::tempdir().unwrap();
    let world = World::new(dir.path()).unwrap();
    let roots = Roots::system()
        .with_proc(dir.path().join("proc"))
        .with_sys(world.sys.root());
    let kept = DrmBackend::new(roots.clone(), Duration::from_secs(3600));
    let fresh = DrmBackend::new(roots, Duration::ZERO);
    assert!(kept.devices(0, &[], None).0.is_empty());
    assert!(fresh.devices(0, &[], None).0.is_empty());
    world
        .gpu(FakeGpu {
            dir_name: "0000:03:00.0".to_string(),
            pci: true,
            vendor: Some(0x1002),
            device: Some(0x744c),
            driver: "amdgpu".to_string(),
            nodes: vec!["card1".to_string(), "renderD128".to_string()],
            runtime_status: "active".to_string(),
            files: Vec::new(),
        })
        .unwrap();
    assert!(
        kept.devices(0, &[], None).0.is_empty(),
        "within the age: not listed again"
    );
    assert_eq!(fresh.devices(0, &[], None).0.len(), 1, "past the age");
    // Past the age, a finding with a GPU is discovered again: the card stays listed.
    assert_eq!(fresh.devices(0, &[], None).0.len(), 1);
}
