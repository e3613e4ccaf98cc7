//! The driver table against fixtures: every entry (and the generic default) has at least one
//! fixture device (a `/sys` tree and, where the driver prints one, a recorded fdinfo), and each
//! is read through the real readers — the device view (`sysfs`), the process rows (fdinfo),
//! spill (`spill`) — with the results the entry says. Adding a driver: one entry in `ALL`,
//! one `Case` here (the test fails for an entry without one).

use std::path::Path;
use std::time::Duration;

use hmn_testbed::{FakeGpu, World, fdinfo_sample};

use super::*;
use crate::backends::drm::fdinfo;
use crate::backends::drm::{DrmBackend, DrmDevices, spill, sysfs};
use crate::system::roots::Roots;
use crate::types::{Device, Field, GpuProcess, UnknownReason};

const KIB: u64 = 1024;
const GIB: u64 = 1 << 30;

/// One fixture device of one driver and what reading it gives.
struct Case {
    /// The entry it exercises (`GENERIC` for a driver the table does not list).
    entry: &'static DrmDriver,
    label: &'static str,
    gpu: FakeGpu,
    /// Files under the `/sys` root beyond the device directory (the card node's).
    sys_files: Vec<(String, String)>,
    /// The fdinfo of one client on the device's render node.
    fdinfo: Option<String>,
    integrated: Option<bool>,
    total_bytes: Option<u64>,
    /// The client's row: `used_bytes` and KIND.
    row: Option<(Option<u64>, &'static str)>,
    /// `Ok` when spill is measurable, else a piece of the reason.
    spill: Result<(), &'static str>,
}

fn sample(name: &str) -> String {
    fdinfo_sample(name).unwrap()
}

/// A PCI device of `driver` at `slot` (the fake GPU builders' shape, another driver).
fn pci(slot: &str, vendor: u16, device: u16, driver: &str) -> FakeGpu {
    FakeGpu {
        dir_name: slot.to_string(),
        pci: true,
        vendor: Some(vendor),
        device: Some(device),
        driver: driver.to_string(),
        nodes: vec!["card1".to_string(), "renderD128".to_string()],
        runtime_status: "active".to_string(),
        files: Vec::new(),
    }
}

fn case(entry: &'static DrmDriver, label: &'static str, gpu: FakeGpu) -> Case {
    Case {
        entry,
        label,
        gpu,
        sys_files: Vec::new(),
        fdinfo: None,
        integrated: None,
        total_bytes: None,
        row: None,
        spill: Ok(()),
    }
}

fn cases() -> Vec<Case> {
    let xe = || FakeGpu::xe_dgpu("0000:03:00.0", 1, 128);
    let arc = || pci("0000:03:00.0", 0x8086, 0x56a0, I915.name);
    vec![
        Case {
            fdinfo: Some(sample("amdgpu-eraD.txt")),
            integrated: Some(false),
            total_bytes: Some(8_573_157_376),
            row: Some((Some(60060 * KIB), "compute+graphics+copy")),
            ..case(&AMDGPU, "6.13+", FakeGpu::amdgpu("0000:11:00.0", 1, 128))
        },
        Case {
            // An APU: integrated by hwmon's vddnb; `memory` stays the carve-out, its pool is
            // the carve-out plus GTT; spill is measured as on a discrete card.
            fdinfo: Some(sample("amdgpu-eraD.txt").replace("0000:11:00.0", "0000:c4:00.0")),
            integrated: Some(true),
            total_bytes: Some(536_870_912),
            row: Some((Some(60060 * KIB), "compute+graphics+copy")),
            ..case(
                &AMDGPU,
                "APU, Strix Halo",
                FakeGpu::strix_halo("0000:c4:00.0", 1, 128, 2 * GIB),
            )
        },
        Case {
            // No hwmon: whether it is an APU cannot be told.
            fdinfo: Some(sample("amdgpu-eraD.txt")),
            total_bytes: Some(536_870_912),
            row: Some((Some(60060 * KIB), "compute+graphics+copy")),
            ..case(
                &AMDGPU,
                "APU without hwmon",
                FakeGpu::strix_halo("0000:11:00.0", 1, 128, 2 * GIB).without_hwmon(),
            )
        },
        Case {
            fdinfo: Some(sample("amdgpu-eraA.txt")),
            integrated: Some(false),
            total_bytes: Some(8_573_157_376),
            row: Some((Some(2068 * KIB), "graphics")),
            ..case(
                &AMDGPU,
                "5.14–5.18",
                FakeGpu::amdgpu("0000:03:00.0", 1, 128),
            )
        },
        Case {
            fdinfo: Some(sample("i915-igpu.txt")),
            integrated: Some(true),
            row: Some((Some(317_236 * KIB), "graphics")),
            spill: Err("i915 is an integrated GPU"),
            ..case(&I915, "iGPU", FakeGpu::i915_igpu(1, 128))
        },
        Case {
            fdinfo: Some(sample("i915-arc.txt")),
            integrated: Some(false),
            row: Some((Some(4_418_400 * KIB), "graphics")),
            spill: Err("i915 exposes no VRAM size in sysfs"),
            ..case(&I915, "Arc, mainline", arc())
        },
        Case {
            sys_files: vec![(
                "class/drm/card1/lmem_total_bytes".into(),
                "8589934592".into(),
            )],
            fdinfo: Some(sample("i915-arc.txt")),
            integrated: Some(false),
            total_bytes: Some(8 * GIB),
            row: Some((Some(4_418_400 * KIB), "graphics")),
            ..case(&I915, "Arc, Intel's backport driver", arc())
        },
        Case {
            fdinfo: Some(sample("xe-dgpu-doc.txt")),
            integrated: Some(false),
            row: Some((Some(23_992 * KIB), "graphics")),
            spill: Err("xe exposes no VRAM size in sysfs"),
            ..case(&XE, "dGPU, mainline", xe())
        },
        Case {
            fdinfo: Some(sample("xe-dgpu-doc.txt")),
            integrated: Some(false),
            total_bytes: Some(12 * GIB),
            row: Some((Some(23_992 * KIB), "graphics")),
            ..case(
                &XE,
                "dGPU, non-mainline tile file",
                xe().file("tile0/physical_vram_size_bytes", "12884901888"),
            )
        },
        Case {
            fdinfo: Some(sample("xe-igpu-real.txt")),
            integrated: Some(true),
            row: Some((None, "compute+graphics")),
            spill: Err("xe is an integrated GPU"),
            ..case(&XE, "iGPU", pci("0000:00:02.0", 0x8086, 0x64a0, XE.name))
        },
        Case {
            fdinfo: Some(sample("msm-real.txt")),
            integrated: Some(true),
            row: Some((Some(116_376 * KIB), "other")),
            spill: Err("msm is an integrated GPU"),
            ..case(
                &MSM,
                "Adreno",
                FakeGpu::platform("ae00000.gpu", MSM.name, 1, 128),
            )
        },
        Case {
            fdinfo: Some(sample("panfrost-doc.txt")),
            integrated: Some(true),
            row: Some((Some(36_496 * KIB), "graphics")),
            spill: Err("panfrost is an integrated GPU"),
            ..case(
                &PANFROST,
                "Mali",
                FakeGpu::platform("fde60000.gpu", PANFROST.name, 1, 128),
            )
        },
        Case {
            fdinfo: Some(sample("panthor-doc.txt")),
            integrated: Some(true),
            row: Some((Some(16_480 * KIB), "other")),
            spill: Err("panthor is an integrated GPU"),
            ..case(
                &PANTHOR,
                "Mali CSF",
                FakeGpu::platform("fb000000.gpu", PANTHOR.name, 1, 128),
            )
        },
        Case {
            fdinfo: Some(sample("v3d-doc.txt")),
            integrated: Some(true),
            row: Some((Some(15_168 * KIB), "graphics")),
            spill: Err("v3d is an integrated GPU"),
            ..case(
                &V3D,
                "Raspberry Pi",
                FakeGpu::platform("fec00000.v3d", V3D.name, 1, 128),
            )
        },
        Case {
            spill: Err("NVIDIA on Linux"),
            ..case(
                &NVIDIA,
                "nvidia-drm nodes",
                FakeGpu::nvidia("0000:65:00.0", 1, 128),
            )
        },
        Case {
            fdinfo: Some(sample("generic-gem.txt")),
            row: Some((Some(2048 * KIB), "unknown")),
            spill: Err("virtio_gpu reports no VRAM figures"),
            ..case(
                &GENERIC,
                "unlisted, PCI",
                pci("0000:00:04.0", 0x1af4, 0x1050, "virtio_gpu"),
            )
        },
        Case {
            integrated: Some(true),
            spill: Err("lima is an integrated GPU"),
            ..case(
                &GENERIC,
                "unlisted, SoC",
                FakeGpu::platform("1c40000.gpu", "lima", 1, 128),
            )
        },
    ]
}

/// What the readers gave for one case.
struct Read {
    device: Device,
    rows: Vec<GpuProcess>,
    spill: Result<crate::backends::spill::Reading, String>,
}

fn read(c: &Case) -> Read {
    let dir = tempfile::tempdir().unwrap();
    let world = World::new(dir.path()).unwrap();
    world.gpu(c.gpu.clone()).unwrap();
    for (rel, content) in &c.sys_files {
        let path = world.sys.root().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, format!("{content}\n")).unwrap();
    }
    if let Some(text) = &c.fdinfo {
        let render = c.gpu.nodes.iter().find(|n| n.starts_with("renderD"));
        world
            .client(4242, "client", &[(3, render.unwrap(), text)])
            .unwrap();
    }
    let roots = Roots::system()
        .with_proc(dir.path().join("proc"))
        .with_sys(world.sys.root());
    let found = sysfs::discover(&roots);
    assert_eq!(found.len(), 1, "{}: {found:?}", c.label);
    let found = found.into_iter().next().unwrap();
    let device = sysfs::read(
        &roots,
        &found,
        0,
        None,
        true,
        &mut || {
            crate::backends::drm::statics::Statics::read(
                &roots,
                &found.dir,
                found.driver.as_deref(),
            )
        },
        &mut sysfs::SysfsFiles::new(crate::system::fsread::Cap::SYSFS),
    );
    let devices = DrmDevices {
        listed: vec![(found.clone(), 0)],
        merged: Vec::new(),
    };
    let age = Duration::from_secs(60);
    let rows = DrmBackend::new(roots.clone(), age)
        .processes(&devices, &mut Vec::new())
        .rows;
    let spill = spill::drm_source(&roots, &found, 0, age)
        .and_then(|mut s| s.read().ok_or_else(|| "no reading".to_string()));
    Read {
        device,
        rows,
        spill,
    }
}

#[test]
fn every_driver_has_a_fixture_and_reads_as_its_entry_says() {
    let cases = cases();
    for entry in ALL.iter().copied().chain([&GENERIC]) {
        assert!(
            cases.iter().any(|c| std::ptr::eq(c.entry, entry)),
            "no fixture for driver {:?}",
            entry.name
        );
    }
    for c in &cases {
        let label = format!("{} ({})", c.gpu.driver, c.label);
        assert!(
            std::ptr::eq(by_sysfs_name(Some(&c.gpu.driver)), c.entry),
            "{label}: sysfs name"
        );
        if let Some(text) = &c.fdinfo {
            let stats = fdinfo::parse(text);
            assert!(
                std::ptr::eq(by_fdinfo_name(stats.driver.as_deref()), c.entry),
                "{label}: drm-driver {:?}",
                stats.driver
            );
            // Every region and engine the fixture prints is in the entry's own lists.
            if !std::ptr::eq(c.entry, &GENERIC) {
                for region in stats.regions.keys() {
                    assert!(c.entry.own_bucket(region).is_some(), "{label}: {region}");
                }
                for engine in stats.engines.keys() {
                    assert!(c.entry.own_engine(engine).is_some(), "{label}: {engine}");
                }
            }
        }
        let r = read(c);
        let d = &r.device;
        assert_eq!(d.integrated, c.integrated, "{label}: integrated");
        assert_eq!(d.memory.total_bytes, c.total_bytes, "{label}: total");
        let total_unknown = d
            .unknown
            .iter()
            .find(|u| u.field == Field::MemoryTotalBytes);
        assert_eq!(
            total_unknown.is_some(),
            d.memory.total_bytes.is_none(),
            "{label}: an unknown total says why: {:?}",
            d.unknown
        );
        let row = r.rows.iter().find(|p| p.pid == 4242);
        assert_eq!(
            row.map(|p| (p.used_bytes, p.kind.as_str())),
            c.row,
            "{label}: row"
        );
        match (&r.spill, c.spill) {
            // Both paths read one VRAM size: spill's limit is the device view's total.
            (Ok(reading), Ok(())) => {
                assert_eq!(Some(reading.limit_bytes), d.memory.total_bytes, "{label}");
            }
            (Err(why), Err(part)) => {
                assert!(why.contains(part), "{label}: {why}");
                // Where the size is what is missing, both paths give the same reason.
                if c.entry.spill == Spill::ClientSums && d.integrated != Some(true) {
                    let detail = &total_unknown.unwrap().detail;
                    assert!(
                        why.starts_with(detail.as_str()),
                        "{label}: {why} / {detail}"
                    );
                    assert_eq!(total_unknown.unwrap().reason, UnknownReason::Unsupported);
                }
            }
            (got, want) => panic!("{label}: spill {got:?}, expected {want:?}"),
        }
    }
}

#[test]
fn unlisted_regions_and_engines_fall_back_to_the_shared_spellings() {
    // The generic default: every spelling drivers share (moved from `model`).
    for (name, b) in [
        ("vram", Some(Bucket::Vram)),
        ("vram1", Some(Bucket::Vram)),
        ("local0", Some(Bucket::Vram)),
        ("gtt", Some(Bucket::Gtt)),
        ("cpu", Some(Bucket::System)),
        ("system0", Some(Bucket::System)),
        ("stolen-local0", Some(Bucket::System)),
        ("memory", Some(Bucket::System)),
        ("gds", None),
        ("doorbell", None),
    ] {
        assert_eq!(GENERIC.bucket(name), b, "{name}");
    }
    // A listed driver: its own list first (amdgpu's on-chip pools are not counted), then the
    // shared spellings for a name it does not list.
    assert_eq!(AMDGPU.own_bucket("gds"), Some(None));
    assert_eq!(AMDGPU.bucket("gds"), None);
    assert_eq!(AMDGPU.own_bucket("memory"), None);
    assert_eq!(AMDGPU.bucket("memory"), Some(Bucket::System));
    assert_eq!(XE.bucket("vram1"), Some(Bucket::Vram));
    // Ring and instance suffixes are dropped before an engine is looked up.
    assert_eq!(AMDGPU.own_engine("gfx0"), Some(EngineClass::Graphics));
    assert_eq!(AMDGPU.own_engine("enc_1"), Some(EngineClass::Video));
    assert_eq!(V3D.own_engine("cache_clean"), Some(EngineClass::Other));
    assert_eq!(XE.own_engine("npu"), None);
    assert_eq!(XE.engine_class("npu"), EngineClass::Other);
}

#[test]
fn listed_engines_agree_with_the_public_classifier() {
    // `EngineClass::of` is public: a caller classing a name gets what hmn's rows say.
    for d in ALL {
        for (name, class) in d.engines {
            assert_eq!(EngineClass::of(name), *class, "{}: {name}", d.name);
        }
    }
}

#[test]
fn names_are_unique_and_framebuffers_are_not_gpus() {
    let mut names: Vec<&str> = ALL.iter().map(|d| d.name).collect();
    let mut fdinfo_names: Vec<&str> = ALL.iter().map(|d| d.fdinfo_name).collect();
    for list in [&mut names, &mut fdinfo_names] {
        assert!(list.iter().all(|n| !n.is_empty()));
        let n = list.len();
        list.sort_unstable();
        list.dedup();
        assert_eq!(list.len(), n, "{list:?}");
    }
    assert!(std::ptr::eq(by_sysfs_name(None), &GENERIC));
    assert!(std::ptr::eq(
        by_fdinfo_name(Some(NVIDIA.fdinfo_name)),
        &NVIDIA
    ));
    assert!(!is_gpu(Some(NOT_GPUS[1])));
    assert!(is_gpu(Some(AMDGPU.name)));
    assert!(is_gpu(None));
    let igpu = "0000:00:02.0".parse().ok();
    let dgpu = "0000:03:00.0".parse().ok();
    assert_eq!(XE.integrated(igpu), Some(true));
    assert_eq!(XE.integrated(dgpu), Some(false));
    assert_eq!(MSM.integrated(None), Some(true));
    assert_eq!(GENERIC.integrated(dgpu), None);
    assert_eq!(
        AMDGPU.integrated(None),
        None,
        "decided from hwmon's files (`apu`)"
    );
}

#[test]
fn only_amdgpu_has_ras_files_and_a_remedy_for_an_undecided_apu() {
    for d in ALL.iter().copied().chain([&GENERIC]) {
        let amd = std::ptr::eq(d, &AMDGPU);
        assert_eq!(d.ras == Ras::AmdgpuSysfs, amd, "{}", d.name);
        assert_eq!(
            d.integrated.undecided_remedy().is_some(),
            amd,
            "only a test that can be undecided has a remedy: {}",
            d.name
        );
    }
    assert!(
        Integrated::Vddnb
            .undecided_remedy()
            .is_some_and(|r| r.contains("amdgpu.dpm=0"))
    );
}

/// The DRM area's sources, test modules left out: no driver's name is written as a string
/// literal there, so every match on a driver is a lookup in this table.
#[test]
fn no_driver_name_is_matched_outside_the_table() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    for dir in ["backends/drm", "compat/spill"] {
        collect(&src.join(dir), &mut files);
    }
    files.push(src.join("backends/spill.rs"));
    files.push(src.join("doctor/kernel.rs"));
    // The probe's DRM health and the doctor's pool remedy ask the table too.
    files.push(src.join("probe/drm.rs"));
    files.push(src.join("probe/mod.rs"));
    files.push(src.join("doctor/pools.rs"));
    files.retain(|f| !f.starts_with(src.join("backends/drm/driver")));
    // A module's tests in a file of their own (`#[cfg(test)] mod tests;`) are test modules too.
    files.retain(|f| f.file_name().is_none_or(|n| n != "tests.rs"));
    assert!(files.len() > 8, "{files:?}");
    let mut names: Vec<&str> = ALL
        .iter()
        .flat_map(|d| [d.name, d.fdinfo_name])
        .chain(NOT_GPUS)
        .collect();
    names.sort_unstable();
    names.dedup();
    let mut found = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for (n, line) in code.lines().enumerate() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            for name in &names {
                if line.contains(&format!("\"{name}\"")) {
                    found.push(format!("{}:{}: {name}", file.display(), n + 1));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "driver names outside the table: {found:#?}"
    );
    // The same scan finds every name in the table itself.
    let table = std::fs::read_to_string(src.join("backends/drm/driver/mod.rs")).unwrap();
    for name in &names {
        assert!(table.contains(&format!("\"{name}\"")), "{name}");
    }
}

fn collect(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}
