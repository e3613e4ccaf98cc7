use super::*;

#[test]
fn runtime_status_round_trips_the_kernel_text() {
    for text in [
        "active",
        "suspended",
        "suspending",
        "resuming",
        "error",
        "unsupported",
        "frozen",
        "",
    ] {
        assert_eq!(RuntimeStatus::parse(text).as_str(), text);
        assert_eq!(RuntimeStatus::parse(text).to_string(), text);
    }
    assert_eq!(RuntimeStatus::parse("suspended"), RuntimeStatus::Suspended);
    assert_eq!(
        RuntimeStatus::parse("frozen"),
        RuntimeStatus::Other("frozen".into())
    );
    let mut d = Device::new(0, Vendor::Amd, Source::Sysfs);
    assert!(!d.is_suspended());
    d.runtime_status = Some(RuntimeStatus::Suspending);
    assert!(!d.is_suspended());
    d.runtime_status = Some(RuntimeStatus::Suspended);
    assert!(d.is_suspended());
}

#[cfg(feature = "serde")]
#[test]
fn contract_enums_serialise_as_before() {
    fn json(v: &impl serde::Serialize) -> String {
        serde_json::to_string(v).unwrap()
    }
    assert_eq!(json(&RuntimeStatus::Suspended), r#""suspended""#);
    assert_eq!(json(&RuntimeStatus::Other("frozen".into())), r#""frozen""#);
    assert_eq!(json(&Backend::Nvml), r#""NVML""#);
    assert_eq!(json(&Backend::NvidiaSmi), r#""nvidia-smi""#);
    assert_eq!(json(&Backend::Drm), r#""DRM""#);
    let status = BackendStatus::new(Backend::NvidiaSmi, BackendState::NotTried);
    assert_eq!(
        json(&status),
        r#"{"backend":"nvidia-smi","state":"not_tried"}"#
    );
    let failed = BackendStatus::new(
        Backend::Nvml,
        BackendState::failed(
            crate::types::BackendCause::CallFailed,
            "cannot count devices: Unknown",
        ),
    );
    assert_eq!(
        json(&failed),
        r#"{"backend":"NVML","state":"failed","cause":"call-failed","reason":"cannot count devices: Unknown"}"#
    );
}

#[test]
fn gtt_bytes_is_known_only_for_drm_rows() {
    let mut row = GpuProcess::new(1, 0, ProcessKind::Compute, Source::Nvml);
    row.used_bytes = Some(5);
    assert_eq!(row.gtt_bytes(), None, "NVIDIA: no such figure");
    let mut drm = GpuProcess::new(1, 0, ProcessKind::Graphics, Source::Fdinfo);
    drm.regions = Some(ProcessRegions {
        vram: Some(RegionUsage {
            resident_bytes: Some(9),
            ..RegionUsage::default()
        }),
        ..ProcessRegions::default()
    });
    assert_eq!(drm.gtt_bytes(), Some(0), "no GTT region");
    if let Some(r) = drm.regions.as_mut() {
        r.gtt = Some(RegionUsage {
            total_bytes: Some(7),
            resident_bytes: Some(6),
            ..RegionUsage::default()
        });
    }
    assert_eq!(drm.gtt_bytes(), Some(6), "resident, not total");
    let mut shared = GpuProcess::new(2, 0, ProcessKind::Graphics, Source::Fdinfo);
    shared.used_bytes = Some(0);
    shared.shared_with = vec![1];
    assert_eq!(shared.gtt_bytes(), Some(0));
    shared.shared_with.clear();
    assert_eq!(shared.gtt_bytes(), None, "no memory stats");
}

#[test]
fn a_footprint_is_vram_plus_gtt_and_unknown_with_vram() {
    let mut nvidia = GpuProcess::new(1, 0, ProcessKind::Compute, Source::Nvml);
    assert_eq!(
        nvidia.footprint_bytes(),
        None,
        "unknown VRAM: unknown, never 0"
    );
    nvidia.used_bytes = Some(50);
    assert_eq!(nvidia.footprint_bytes(), Some(50), "no GTT: VRAM alone");
    let mut drm = GpuProcess::new(2, 0, ProcessKind::Graphics, Source::Fdinfo);
    drm.used_bytes = Some(10);
    drm.regions = Some(ProcessRegions {
        gtt: Some(RegionUsage {
            resident_bytes: Some(100),
            ..RegionUsage::default()
        }),
        ..ProcessRegions::default()
    });
    assert_eq!(drm.footprint_bytes(), Some(110));
    drm.used_bytes = None;
    assert_eq!(drm.footprint_bytes(), None, "GTT alone is no footprint");
    let mut kfd = GpuProcess::new(3, 0, ProcessKind::Compute, Source::Kfd);
    kfd.used_bytes = Some(u64::MAX);
    kfd.regions = Some(ProcessRegions {
        gtt: Some(RegionUsage {
            resident_bytes: Some(1),
            ..RegionUsage::default()
        }),
        ..ProcessRegions::default()
    });
    assert_eq!(kfd.footprint_bytes(), Some(u64::MAX), "saturates");
}

#[test]
fn kinds_merge() {
    use ProcessKind::*;
    assert_eq!(Compute.merge(Compute), Compute);
    assert_eq!(Graphics.merge(Graphics), Graphics);
    assert_eq!(Compute.merge(Graphics), ComputeGraphics);
    assert_eq!(ComputeGraphics.merge(Compute), ComputeGraphics);
    assert_eq!(Compute.merge(Mps), Mps);
    assert_eq!(Mps.merge(Compute), Mps);
    assert_eq!(MpsServer.merge(Compute), MpsServer);
    assert_eq!(Mps.as_str(), "mps");
    assert_eq!(MpsServer.as_str(), "mps-server");
}

#[test]
fn a_rows_share_of_the_pool() {
    let r = |resident: u64| RegionUsage {
        resident_bytes: Some(resident),
        ..RegionUsage::default()
    };
    let apu = Some(PoolKind::CarveOutPlusGtt);
    let mut row = GpuProcess::new(7, 0, ProcessKind::Graphics, Source::Fdinfo);
    row.used_bytes = Some(5);
    assert_eq!(row.pool_bytes(apu), Some(5), "no regions: used");
    row.regions = Some(ProcessRegions {
        vram: Some(r(5)),
        gtt: Some(r(100)),
        system: None,
    });
    assert_eq!(row.pool_bytes(apu), Some(105));
    assert_eq!(row.pool_bytes(Some(PoolKind::Dedicated)), Some(5));
    assert_eq!(row.pool_bytes(None), Some(5));
    // KFD: the larger, never the sum (the same buffers may be in both).
    row.source = Source::Kfd;
    row.used_bytes = Some(90);
    assert_eq!(row.pool_bytes(apu), Some(105));
    row.used_bytes = Some(400);
    assert_eq!(row.pool_bytes(apu), Some(400));
    row.used_bytes = None;
    assert_eq!(row.pool_bytes(apu), Some(105));
}

#[test]
fn the_kind_without_a_pool() {
    let mut d = Device::new(0, Vendor::Nvidia, Source::Nvml);
    assert_eq!(d.pool_kind(), None, "NVIDIA without memory figures");
    d.memory = DeviceMemory::new(Some(80), Some(1), Some(79), None);
    assert_eq!(d.pool_kind(), Some(PoolKind::Dedicated));
    assert_eq!(d.pool_used_bytes(), Some(1));
    assert_eq!(d.pool_free_and_total(), (Some(79), Some(80)));
    let mut amd = Device::new(1, Vendor::Amd, Source::Sysfs);
    amd.memory = d.memory;
    assert_eq!(amd.pool_kind(), None, "an amdgpu not known to be discrete");
    amd.integrated = Some(false);
    assert_eq!(amd.pool_kind(), Some(PoolKind::Dedicated));
    amd.integrated = Some(true);
    assert_eq!(amd.pool_kind(), Some(PoolKind::UnifiedHost));
    let mut pool = MemoryPool::new(
        PoolKind::CarveOutPlusGtt,
        [
            PoolSource::VramPlusGtt,
            PoolSource::VramPlusGtt,
            PoolSource::VramPlusGttHostBound,
        ],
        "vddnb",
    );
    pool.used_bytes = Some(5);
    pool.total_bytes = Some(900);
    amd.pool = Some(pool);
    assert_eq!(amd.pool_kind(), Some(PoolKind::CarveOutPlusGtt));
    assert_eq!(amd.pool_used_bytes(), Some(5));
    assert_eq!(
        amd.pool_free_and_total(),
        (None, Some(900)),
        "the pool's, unknown free kept unknown (not the carve-out's 79)"
    );
}

/// What `hmn --json` and `hmn record` write reads back to the same value, and writes the same
/// bytes again: every field, the open sets, a name that is not UTF-8, MIG state, regions,
/// engines, utilization and workload.
#[cfg(feature = "serde")]
#[test]
fn devices_and_processes_read_back_what_they_wrote() {
    use std::collections::BTreeMap;

    use super::workload::{ContainerRuntime, NameSource, WorkloadInfo, WorkloadKind};

    fn round_trip<T>(v: &T)
    where
        T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
    {
        let json = serde_json::to_string(v).unwrap();
        let back: T = serde_json::from_str(&json).unwrap();
        assert_eq!(&back, v, "{json}");
        assert_eq!(serde_json::to_string(&back).unwrap(), json);
    }

    let mut d = Device::new(3, Vendor::Other("panfrost".into()), Source::Sysfs);
    d.name = Some("Mali-G610".into());
    d.pci_bus_id = Some("0000:1a:00.0".parse().unwrap());
    d.runtime_status = Some(RuntimeStatus::Other("frozen".into()));
    d.integrated = Some(true);
    d.memory = DeviceMemory::new(Some(8), None, Some(3), None);
    d.regions = BTreeMap::from([("gtt".to_string(), DeviceRegion::new(Some(9), None))]);
    d.telemetry.power_watts = Some(21.5);
    let mut pool = MemoryPool::host_ram(PoolSource::ClientSum, "a non-PCI DRM driver");
    pool.total_bytes = Some(16);
    pool.used_bytes = Some(2);
    pool.host_available_bytes = Some(12);
    d.pool = Some(pool);
    d.unknown.push(Unknown::new(
        Field::MemoryUsedBytes,
        UnknownReason::Unsupported,
        "no",
    ));
    round_trip(&d);
    let mut nv = Device::new(0, Vendor::Nvidia, Source::Nvml);
    let mut mig = MigState::new(MigMode::Enabled, MigMode::Enabled);
    let mut m = MigDevice::new(1, 0);
    m.profile = Some("1g.10gb".into());
    m.placement = Some(MigPlacement::new(4, 1));
    m.profile_approximate = true;
    mig.instances.push(m);
    mig.unknown.push(Unknown::new(
        Field::MigInstancesGpuInstanceProfile,
        UnknownReason::PermissionDenied,
        "root",
    ));
    nv.mig = Some(mig);
    round_trip(&nv);
    let mut h = MemoryHealth {
        ecc: Some(health::EccMode::new(true, false)),
        remapped_rows: Some(health::RemappedRows::new(1, 0, true, false)),
        ras: vec![health::RasCount::new("umc", 0, 3)],
        ..MemoryHealth::default()
    };
    h.ecc_errors.corrected_volatile = Some(4);
    h.unknown.push(Unknown::new(
        Field::HealthEccErrorsUncorrectedAggregate,
        UnknownReason::Unsupported,
        "no",
    ));
    nv.health = Some(h);
    round_trip(&nv);

    let mut p = GpuProcess::new(7, 3, ProcessKind::Mps, Source::Nvml);
    p.name = Some(ProcessName::from_bytes(b"gpu\xff\x1bjob".to_vec()));
    p.used_bytes = Some(1 << 30);
    p.utilization = Some(ProcessUtilization::new(37, 12, 5, 0, true, 99));
    p.may_include_clients = true;
    p.mig_index = Some(1);
    p.shared_with = vec![5];
    p.drm_clients = vec![185];
    p.regions = Some(ProcessRegions {
        gtt: Some(RegionUsage {
            resident_bytes: Some(2),
            evicted_bytes: Some(0),
            ..RegionUsage::default()
        }),
        ..ProcessRegions::default()
    });
    p.engines
        .insert("gfx".into(), EngineUsage { busy_percent: 12.5 });
    p.workload = Some(WorkloadInfo {
        kind: WorkloadKind::Container,
        runtime: Some(ContainerRuntime::Docker),
        container_id: Some("4e9a".into()),
        pod_uid: None,
        slurm_job: None,
        slurm_step: None,
        unit: Some("docker-4e9a.scope".into()),
        cgroup: "/system.slice/docker-4e9a.scope".into(),
        namespace: None,
        pod_name: None,
        container_name: Some("vllm".into()),
        names_from: Some(NameSource::Docker),
    });
    p.unknown.push(Unknown::new(
        Field::Utilization,
        UnknownReason::Unsupported,
        "MIG",
    ));
    round_trip(&p);
    p.name = None;
    round_trip(&p);
    p.name = Some("python3".into());
    round_trip(&p);
    // A hostile `name_bytes_hex` is refused, not guessed at.
    let json = serde_json::to_string(&p)
        .unwrap()
        .replace(r#""name":"python3""#, r#""name":"x","name_bytes_hex":"+f""#);
    assert!(serde_json::from_str::<GpuProcess>(&json).is_err());
}
