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
        BackendState::Failed {
            reason: "cannot count devices: Unknown".into(),
        },
    );
    assert_eq!(
        json(&failed),
        r#"{"backend":"NVML","state":"failed","reason":"cannot count devices: Unknown"}"#
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
    amd.pool = Some(pool);
    assert_eq!(amd.pool_kind(), Some(PoolKind::CarveOutPlusGtt));
    assert_eq!(amd.pool_used_bytes(), Some(5));
}
