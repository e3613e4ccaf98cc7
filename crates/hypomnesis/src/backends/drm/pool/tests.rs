//! The pools sysfs gives, read from fixture trees through the real device reader.
use hmn_testbed::{FakeGpu, World};

use crate::backends::drm::sysfs;
use crate::system::roots::Roots;
use crate::types::{Device, Field, PoolKind, PoolSource};

const GIB: u64 = 1 << 30;

/// The device view of one fixture GPU (and `edit`, run on the written `/sys` tree).
fn read(gpu: FakeGpu, edit: impl FnOnce(&std::path::Path)) -> Device {
    let dir = tempfile::tempdir().unwrap();
    let world = World::new(dir.path()).unwrap();
    let slot = gpu.dir_name.clone();
    world.gpu(gpu).unwrap();
    edit(&world.sys.root().join("devices").join(slot));
    let roots = Roots::system()
        .with_proc(dir.path().join("proc"))
        .with_sys(world.sys.root());
    let found = sysfs::discover(&roots);
    sysfs::read(
        &roots,
        &found[0],
        0,
        None,
        true,
        &mut || {
            super::super::statics::Statics::read(&roots, &found[0].dir, found[0].driver.as_deref())
        },
        &mut sysfs::SysfsFiles::new(crate::system::fsread::Cap::SYSFS),
    )
}

fn integrated_reason(d: &Device) -> Option<&str> {
    d.unknown
        .iter()
        .find(|u| u.field == Field::Integrated)
        .map(|u| u.detail.as_str())
}

#[test]
fn strix_halo_is_a_carve_out_plus_gtt() {
    let d = read(FakeGpu::strix_halo("0000:c4:00.0", 1, 128, 2 * GIB), |_| {});
    assert_eq!(d.integrated, Some(true));
    let p = d.pool.as_ref().unwrap();
    assert_eq!(p.kind, PoolKind::CarveOutPlusGtt);
    assert_eq!(p.total_bytes, Some(536_870_912 + 65_867_993_088));
    assert_eq!(p.used_bytes, Some(155_189_248 + 2 * GIB));
    assert_eq!(p.free_bytes, None, "bounded by the host: the probe's part");
    assert_eq!(p.free_source, PoolSource::VramPlusGttHostBound);
    assert!(p.evidence.contains("vddnb"), "{}", p.evidence);
    // `memory` stays the carve-out, as before.
    assert_eq!(d.memory.total_bytes, Some(536_870_912));
    assert_eq!(d.memory.free_bytes, Some(536_870_912 - 155_189_248));
}

#[test]
fn a_radeon_780m_from_amd_smi_figures() {
    // amd-smi PR #1967 (a 780M laptop): VRAM 512 MB total, 489 MB used; GTT 13649 MB,
    // 964 MB used (MiB); the bytes COMPOSED from them.
    let gpu = FakeGpu::amd_apu(
        "0000:c1:00.0",
        1,
        128,
        0x15bf,
        (536_870_912, 512_753_664),
        (14_312_013_824, 1_010_827_264),
    );
    let d = read(gpu, |_| {});
    let p = d.pool.unwrap();
    assert_eq!(p.total_bytes, Some(536_870_912 + 14_312_013_824));
    assert_eq!(p.used_bytes, Some(512_753_664 + 1_010_827_264));
}

#[test]
fn a_discrete_card_has_no_pool_and_is_not_integrated() {
    let d = read(FakeGpu::amdgpu("0000:03:00.0", 1, 128), |_| {});
    assert_eq!((d.integrated, d.pool.is_none()), (Some(false), true));
    assert_eq!(integrated_reason(&d), None);
}

#[test]
fn without_hwmon_it_is_unknown_and_the_carve_out_alone() {
    let d = read(
        FakeGpu::strix_halo("0000:c4:00.0", 1, 128, 0).without_hwmon(),
        |_| {},
    );
    assert_eq!((d.integrated, d.pool.is_none()), (None, true));
    let why = integrated_reason(&d).unwrap();
    assert!(
        why.contains("amdgpu.dpm=0") && why.contains("smaller than GTT"),
        "{why}"
    );
    assert_eq!(d.memory.total_bytes, Some(536_870_912));
}

#[test]
fn the_mi300a_class_has_no_carve_out_and_no_voltage_channels() {
    // COMPOSED: an MI300A-like device (1002:74a0), VRAM 0 (ollama PR #13463), GTT 128 GiB,
    // hwmon without in0/in1 (multi-AID, hwmon_attributes_visible()).
    let gpu = FakeGpu::amd_apu("0000:02:00.0", 1, 128, 0x74a0, (0, 0), (128 * GIB, GIB))
        .without("in0_label")
        .without("in1_label");
    let d = read(gpu, |_| {});
    assert_eq!(d.integrated, Some(true));
    assert!(d.pool.unwrap().evidence.contains("MI300A"));
}

#[test]
fn an_unreadable_vddnb_label_still_marks_an_apu() {
    let d = read(FakeGpu::strix_halo("0000:c4:00.0", 1, 128, 0), |dev| {
        let label = dev.join("hwmon/hwmon5/in1_label");
        std::fs::remove_file(&label).unwrap();
        std::fs::create_dir(&label).unwrap();
    });
    assert_eq!(d.integrated, Some(true));
    assert!(
        d.pool.unwrap().evidence.contains("could not be read"),
        "the reason names the unreadable file"
    );
}

#[test]
fn an_intel_igpu_is_host_ram_and_a_discrete_card_its_clients_sum() {
    let d = read(FakeGpu::i915_igpu(0, 128), |_| {});
    let p = d.pool.unwrap();
    assert_eq!(p.kind, PoolKind::UnifiedHost);
    assert_eq!(
        (p.total_source, p.used_source, p.free_source),
        (
            PoolSource::HostTotal,
            PoolSource::ClientSum,
            PoolSource::HostAvailable
        )
    );
    assert!(p.used_is_lower_bound);
    assert!(p.evidence.contains("0000:00:02.0"));
    // xe dGPU, mainline: no size file; the pool's total says why.
    let d = read(FakeGpu::xe_dgpu("0000:03:00.0", 1, 128), |_| {});
    let p = d.pool.as_ref().unwrap();
    assert_eq!((p.kind, p.total_bytes), (PoolKind::Dedicated, None));
    let why = d.unknown.iter().find(|u| u.field == Field::PoolTotalBytes);
    assert!(why.unwrap().detail.contains("physical_vram_size_bytes"));
    // With the non-mainline tile file (12 GiB, a B580).
    let xe = FakeGpu::xe_dgpu("0000:03:00.0", 1, 128)
        .file("tile0/physical_vram_size_bytes", "12884901888");
    let d = read(xe, |_| {});
    let p = d.pool.unwrap();
    assert_eq!(
        (p.total_bytes, p.total_source),
        (Some(12 * GIB), PoolSource::VramSizeFile)
    );
    assert_eq!(p.used_source, PoolSource::ClientSum);
}
