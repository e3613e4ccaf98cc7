//! What each DRM driver is: one table ([`ALL`], with [`GENERIC`] for every driver it does not
//! list), the only place a driver's name is matched. Per driver: how its fdinfo region names
//! map onto `vram` / `gtt` / `system`, which sysfs files give its device-wide memory and
//! telemetry (with their units), which files give its VRAM size, how spill is measured on it
//! (or why not), how to tell whether a device is integrated (and what to do when the test
//! cannot tell: `hmn doctor`), where its memory-health counters are, its engine names and
//! their classes, and which kernel first printed its fdinfo keys (`hmn doctor`).
//!
//! Pure data and lookups: the readers that open the files named here are `sysfs` (device view)
//! and `spill` (spill readings); `model` and `kind` ask the table about fdinfo names. Adding a
//! driver is one entry in [`ALL`] and one fixture in `driver/tests.rs` (the test fails for an
//! entry without one). The idea of a driver table is qmassa's (`DrmDriver`, ulissesf/qmassa);
//! this one is hmn's own.
//!
//! # xe's VRAM size
//! Mainline xe has no sysfs file with the VRAM size: `drivers/gpu/drm/xe/xe_tile_sysfs.c` in
//! torvalds/linux (06d0742985, the 6.9 merge window, and f057b57270, current) creates only the
//! `tileN` directory and `tileN/memory/freq0/*`; the size is given only by the
//! `DRM_XE_DEVICE_QUERY_MEM_REGIONS` ioctl. `tileN/physical_vram_size_bytes`
//! (`tile->mem.vram.actual_physical_size`, created for discrete parts other than DG1) is in
//! xe trees before and outside mainline (Intel's 2023 `xe_tile_sysfs.c`; rodrigovivi/linux
//! 839a9277, whose reader takes a runtime-PM reference) and is what Intel's Level Zero and
//! igt (`xe_sysfs_tile`: "should be more than vram size") read: the *physical* size, reserved
//! memory included. So both the device view and spill read it where it exists and say
//! otherwise that the size is unknown and why ([`VramSize::missing`]). i915's
//! `lmem_total_bytes` is likewise only in Intel's backport driver, never in mainline i915.

use crate::types::EngineClass;
use crate::types::pci::PciBusId;

/// Where a driver region belongs in the one model (`docs/memory-model.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bucket {
    Vram,
    Gtt,
    System,
}

/// A region name a driver prints in `drm-<kind>-<region>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Region {
    /// Exactly this name.
    Exact(&'static str),
    /// This name and any name starting with it (`local` for `local0`, `local1`…).
    Prefix(&'static str),
}

impl Region {
    fn matches(self, name: &str) -> bool {
        match self {
            Region::Exact(n) => name == n,
            Region::Prefix(p) => name.starts_with(p),
        }
    }
}

/// A sysfs file holding one decimal number of bytes (`%llu\n`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bytes(pub &'static str);

/// Device-wide memory figures in files of the device directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SysfsMemory {
    /// Device memory total and used.
    pub total: Bytes,
    pub used: Bytes,
    /// Why total, used or free is unknown when one of the two files cannot be read.
    pub unreadable: &'static str,
    /// Why `reserved_bytes` is unknown.
    pub reserved: &'static str,
    /// The device's `regions`: name, total, used.
    pub regions: &'static [(&'static str, Bytes, Bytes)],
}

/// Where a device's memory total / used / free come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DeviceMemory {
    /// sysfs files.
    Sysfs(&'static SysfsMemory),
    /// NVML (the NVIDIA driver has no memory figures in sysfs).
    Nvml,
    /// Nothing device-wide in sysfs: at most a VRAM size ([`VramSize`]).
    None,
}

/// Which sysfs files give the VRAM size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum VramSize {
    /// This file of the device directory.
    Device(Bytes),
    /// This file in each `tileN` directory of the device, summed (one per tile). `pattern`
    /// names it in messages.
    PerTile { file: Bytes, pattern: &'static str },
    /// This file in the card node's directory (`class/drm/cardN`).
    CardNode(Bytes),
    /// None.
    None,
}

impl VramSize {
    /// Why the VRAM size of a `driver` device whose files are missing is unknown: the same
    /// words in the device view and in spill's reason.
    pub(crate) fn missing(self, driver: &str) -> String {
        match self {
            VramSize::PerTile { pattern, .. } => format!(
                "{driver} exposes no VRAM size in sysfs (mainline {driver} only through its \
                 memory-region query ioctl; {pattern} exists only in non-mainline builds)"
            ),
            VramSize::CardNode(Bytes(file)) => format!(
                "{driver} exposes no VRAM size in sysfs (mainline {driver} only through its \
                 memory-region query ioctl; {file} exists only in Intel's backport driver)"
            ),
            VramSize::Device(Bytes(file)) => format!("{driver} without {file} in sysfs"),
            VramSize::None => format!("{driver} exposes no VRAM size in sysfs"),
        }
    }
}

/// Why the VRAM use (used, free, reserved) of a `driver` device whose sysfs gives at most a
/// VRAM size is unknown.
pub(crate) fn no_vram_use(driver: &str) -> String {
    format!(
        "{driver} exposes no device-wide VRAM use in sysfs (only through its memory-region query \
         ioctl)"
    )
}

/// How spill (VRAM overflowing into system memory) is measured on a driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Spill {
    /// Never, on any device of this driver: why.
    Never(&'static str),
    /// Device-wide files: the limit, dedicated (VRAM used) and shared (GTT used).
    DeviceWide {
        limit: Bytes,
        dedicated: Bytes,
        shared: Bytes,
    },
    /// Sums over the device's fdinfo clients (resident VRAM; resident GTT + system) against
    /// the [`VramSize`]; integrated devices are not measurable.
    ClientSums,
    /// No VRAM figures (integrated devices say so instead).
    NoFigures,
}

/// How to tell whether a device is integrated (its memory is system memory).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Integrated {
    /// Integrated exactly when at PCI `0000:00:02.0`, the slot reserved for Intel's iGPU;
    /// known either way.
    AtIntelIgpuSlot,
    /// Integrated when the device has no PCI address (a SoC GPU on a platform bus); else
    /// unknown.
    WithoutPci,
    /// amdgpu: an APU (a carve-out plus GTT) when its hwmon has the vddnb channel
    /// (`in1_label`), not one when it has vddgfx (`in0_label`) without it, except a device
    /// without VRAM (the MI300A class); unknown without hwmon. Decided from files by `apu`.
    Vddnb,
}

impl Integrated {
    /// What makes the test decide where it could not (`hmn doctor`'s `memory-pool` remedy);
    /// `None` where the test always decides, or nothing would help.
    pub(crate) fn undecided_remedy(self) -> Option<&'static str> {
        match self {
            Integrated::Vddnb => Some(
                "amdgpu says whether it is an APU only through its hwmon, registered with power \
                 management on: remove amdgpu.dpm=0 from the kernel command line (an SR-IOV \
                 virtual function cannot tell); until then an APU's pool is shown as its \
                 carve-out alone",
            ),
            Integrated::AtIntelIgpuSlot | Integrated::WithoutPci => None,
        }
    }
}

/// Where a driver's memory-health counters are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ras {
    /// amdgpu's RAS files in the device's `ras/` directory (`<block>_err_count`,
    /// `gpu_vram_bad_pages`), read by `drm::ras`.
    AmdgpuSysfs,
    /// None in sysfs: the device's health is unknown (unsupported).
    None,
}

/// Device-wide busy percentages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Utilization {
    /// Files of the device directory (`%d\n` percent): the GPU's and the memory controller's.
    Files {
        gpu: &'static str,
        memory: &'static str,
    },
    /// None in sysfs (the device's `unknown` says to see per-process engines).
    NoCounter,
    /// Not looked for.
    NotRead,
}

/// Where the current graphics clock comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Clock {
    /// hwmon's `freq1_input` (Hz).
    Hwmon,
    /// This file of the device directory (MHz), instead of hwmon's.
    Device(&'static str),
    /// The first readable of these files of the card node (MHz), instead of hwmon's.
    CardNode(&'static [&'static str]),
}

/// Which kernel first printed a driver's fdinfo keys (`hmn doctor`'s `kernel` check).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FdinfoHistory {
    /// The first kernel whose fdinfo gives per-client memory.
    pub memory_since: Option<(u32, u32)>,
    /// The first kernel whose fdinfo gives per-client engine time.
    pub engines_since: Option<(u32, u32)>,
    /// What changed, in words.
    pub note: &'static str,
}

/// One DRM driver. See the [module docs](self).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DrmDriver {
    /// The driver's name in sysfs (the device's `DRIVER=`); empty for [`GENERIC`].
    pub name: &'static str,
    /// Its `drm-driver` in fdinfo (`struct drm_driver.name`).
    pub fdinfo_name: &'static str,
    /// Its fdinfo region names, first match wins; `None` for pools that are not memory a
    /// process allocates. A name it does not list is looked up in [`GENERIC`].
    pub regions: &'static [(Region, Option<Bucket>)],
    /// Device-wide memory.
    pub memory: DeviceMemory,
    /// The VRAM size files.
    pub vram_size: VramSize,
    /// How spill is measured.
    pub spill: Spill,
    /// The integrated test.
    pub integrated: Integrated,
    /// Its memory-health counters.
    pub ras: Ras,
    /// Its engine names (`drm-engine-<e>`, trailing digits and `_` dropped) and their classes.
    /// A name it does not list is classed by [`EngineClass::of`].
    pub engines: &'static [(&'static str, EngineClass)],
    /// Device-wide busy percentages.
    pub utilization: Utilization,
    /// The current graphics clock.
    pub clock: Clock,
    /// Which kernel first printed its fdinfo keys (`None`: not recorded).
    pub fdinfo: Option<FdinfoHistory>,
}

impl DrmDriver {
    /// The model bucket of region `name` (`None`: not counted).
    pub(crate) fn bucket(&self, name: &str) -> Option<Bucket> {
        self.own_bucket(name)
            .or_else(|| GENERIC.own_bucket(name))
            .flatten()
    }

    /// The bucket of `name` by this entry's own list: `Some(None)` for a listed pool that is
    /// not counted, `None` when the entry does not list it.
    pub(crate) fn own_bucket(&self, name: &str) -> Option<Option<Bucket>> {
        self.regions
            .iter()
            .find(|(r, _)| r.matches(name))
            .map(|(_, b)| *b)
    }

    /// The class of engine `name`.
    pub(crate) fn engine_class(&self, name: &str) -> EngineClass {
        self.own_engine(name)
            .unwrap_or_else(|| EngineClass::of(name))
    }

    /// The class of engine `name` by this entry's own list.
    pub(crate) fn own_engine(&self, name: &str) -> Option<EngineClass> {
        let base = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '_');
        self.engines
            .iter()
            .find(|(e, _)| *e == base)
            .map(|(_, c)| *c)
    }

    /// Whether a device of this driver at `pci` is integrated, when the test can tell.
    pub(crate) fn integrated(&self, pci: Option<PciBusId>) -> Option<bool> {
        match self.integrated {
            Integrated::AtIntelIgpuSlot => {
                Some(pci.is_some_and(|p| p.domain == 0 && p.bus == 0 && p.device == 2))
            }
            Integrated::WithoutPci => pci.is_none().then_some(true),
            Integrated::Vddnb => None,
        }
    }

    /// Why an integrated device of this driver (`name`: as sysfs gave it) has no memory figures
    /// of its own.
    pub(crate) fn integrated_memory_detail(&self, name: &str) -> String {
        match self.integrated {
            Integrated::AtIntelIgpuSlot => {
                "integrated GPU: its memory is shared system memory".to_string()
            }
            _ => format!("{name} is an integrated GPU: its memory is shared system memory"),
        }
    }
}

/// Why an NVIDIA GPU's spill is not measurable on Linux.
pub(crate) const NVIDIA_REASON: &str = "NVIDIA on Linux: the driver has no system-memory fallback \
     for VRAM (an allocation beyond VRAM fails) and reports no shared-memory figure";

/// Firmware framebuffers that register a DRM node but are not GPUs.
pub(crate) const NOT_GPUS: [&str; 4] = [
    "simple-framebuffer",
    "simpledrm",
    "efi-framebuffer",
    "vesa-framebuffer",
];

/// Whether a device bound to `driver` is a GPU (not a firmware framebuffer).
pub(crate) fn is_gpu(driver: Option<&str>) -> bool {
    !driver.is_some_and(|d| NOT_GPUS.contains(&d))
}

const AMDGPU_VRAM_TOTAL: Bytes = Bytes("mem_info_vram_total");
const AMDGPU_VRAM_USED: Bytes = Bytes("mem_info_vram_used");
const AMDGPU_GTT_USED: Bytes = Bytes("mem_info_gtt_used");

/// amdgpu's memory files (`amdgpu_vram_mgr.c`, `amdgpu_gtt_mgr.c`; formats.md §3.2).
const AMDGPU_MEMORY: SysfsMemory = SysfsMemory {
    total: AMDGPU_VRAM_TOTAL,
    used: AMDGPU_VRAM_USED,
    unreadable: "mem_info_vram_* not readable",
    reserved: "amdgpu does not expose its reservation",
    regions: &[
        ("vram", AMDGPU_VRAM_TOTAL, AMDGPU_VRAM_USED),
        (
            "visible_vram",
            Bytes("mem_info_vis_vram_total"),
            Bytes("mem_info_vis_vram_used"),
        ),
        ("gtt", Bytes("mem_info_gtt_total"), AMDGPU_GTT_USED),
    ],
};

/// AMD (`amdgpu_fdinfo.c`; every era's region and ring names, formats.md §2.1).
pub(crate) static AMDGPU: DrmDriver = DrmDriver {
    name: "amdgpu",
    fdinfo_name: "amdgpu",
    regions: &[
        (Region::Exact("vram"), Some(Bucket::Vram)),
        (Region::Exact("gtt"), Some(Bucket::Gtt)),
        (Region::Exact("cpu"), Some(Bucket::System)),
        // On-chip pools, not memory a process allocates.
        (Region::Exact("gds"), None),
        (Region::Exact("gws"), None),
        (Region::Exact("oa"), None),
        (Region::Exact("doorbell"), None),
        (Region::Exact("mmioremap"), None),
    ],
    memory: DeviceMemory::Sysfs(&AMDGPU_MEMORY),
    vram_size: VramSize::Device(AMDGPU_VRAM_TOTAL),
    spill: Spill::DeviceWide {
        limit: AMDGPU_VRAM_TOTAL,
        dedicated: AMDGPU_VRAM_USED,
        shared: AMDGPU_GTT_USED,
    },
    // An APU is told apart by its hwmon's vddnb channel (`apu`).
    integrated: Integrated::Vddnb,
    ras: Ras::AmdgpuSysfs,
    engines: &[
        ("gfx", EngineClass::Graphics),
        ("compute", EngineClass::Compute),
        ("dma", EngineClass::Copy),
        ("dec", EngineClass::Video),
        ("enc", EngineClass::Video),
        ("jpeg", EngineClass::Video),
        ("vpe", EngineClass::Video),
    ],
    utilization: Utilization::Files {
        gpu: "gpu_busy_percent",
        memory: "mem_busy_percent",
    },
    clock: Clock::Hwmon,
    fdinfo: Some(FdinfoHistory {
        memory_since: Some((5, 14)),
        engines_since: Some((5, 14)),
        note: "5.14–5.18 a driver-specific format; drm-* keys from 5.19; per-region \
               drm-total/resident from about 6.13",
    }),
};

/// Intel before xe (`i915_drm_client.c`; formats.md §2.2, §3.3).
pub(crate) static I915: DrmDriver = DrmDriver {
    name: "i915",
    fdinfo_name: "i915",
    regions: &[
        // `stolen-system0`, `stolen-local0`: firmware reservations (docs/memory-model.md).
        (Region::Prefix("stolen"), Some(Bucket::System)),
        (Region::Prefix("system"), Some(Bucket::System)),
        (Region::Prefix("local"), Some(Bucket::Vram)),
    ],
    memory: DeviceMemory::None,
    vram_size: VramSize::CardNode(Bytes("lmem_total_bytes")),
    spill: Spill::ClientSums,
    integrated: Integrated::AtIntelIgpuSlot,
    ras: Ras::None,
    engines: &[
        ("render", EngineClass::Graphics),
        ("copy", EngineClass::Copy),
        ("video", EngineClass::Video),
        ("video-enhance", EngineClass::Video),
        ("compute", EngineClass::Compute),
    ],
    utilization: Utilization::NoCounter,
    clock: Clock::CardNode(&["gt_act_freq_mhz", "gt_cur_freq_mhz"]),
    fdinfo: Some(FdinfoHistory {
        memory_since: Some((6, 5)),
        engines_since: Some((5, 19)),
        note: "engine time from 5.19; memory regions from about 6.5–6.6",
    }),
};

/// Intel's current driver (`xe_drm_client.c`; formats.md §2.3, §3.3; VRAM size: module docs).
pub(crate) static XE: DrmDriver = DrmDriver {
    name: "xe",
    fdinfo_name: "xe",
    regions: &[
        (Region::Prefix("vram"), Some(Bucket::Vram)),
        (Region::Exact("gtt"), Some(Bucket::Gtt)),
        (Region::Exact("system"), Some(Bucket::System)),
        (Region::Exact("stolen"), Some(Bucket::System)),
    ],
    memory: DeviceMemory::None,
    vram_size: VramSize::PerTile {
        file: Bytes("physical_vram_size_bytes"),
        pattern: "tile*/physical_vram_size_bytes",
    },
    spill: Spill::ClientSums,
    integrated: Integrated::AtIntelIgpuSlot,
    ras: Ras::None,
    engines: &[
        ("rcs", EngineClass::Graphics),
        ("bcs", EngineClass::Copy),
        ("vcs", EngineClass::Video),
        ("vecs", EngineClass::Video),
        ("ccs", EngineClass::Compute),
    ],
    utilization: Utilization::NoCounter,
    clock: Clock::Device("tile0/gt0/freq0/act_freq"),
    fdinfo: Some(FdinfoHistory {
        memory_since: Some((6, 8)),
        engines_since: Some((6, 13)),
        note: "memory from 6.8 (the driver's first release); engine cycles from about 6.13",
    }),
};

/// A SoC GPU printing only the core helper's `memory` region.
const fn soc(
    name: &'static str,
    engines: &'static [(&'static str, EngineClass)],
    fdinfo: Option<FdinfoHistory>,
) -> DrmDriver {
    DrmDriver {
        name,
        fdinfo_name: name,
        regions: &[(Region::Exact("memory"), Some(Bucket::System))],
        memory: DeviceMemory::None,
        vram_size: VramSize::None,
        spill: Spill::NoFigures,
        integrated: Integrated::WithoutPci,
        ras: Ras::None,
        engines,
        utilization: Utilization::NotRead,
        clock: Clock::Hwmon,
        fdinfo,
    }
}

/// Qualcomm Adreno (Rob Clark's fdinfo patch; formats.md §2.4).
pub(crate) static MSM: DrmDriver = soc(
    "msm",
    &[("gpu", EngineClass::Other)],
    Some(FdinfoHistory {
        memory_since: Some((6, 5)),
        engines_since: Some((5, 19)),
        note: "engine time and cycles from 5.19; memory through the core helper from about 6.5",
    }),
);

/// Arm Mali before CSF (`Documentation/gpu/panfrost.rst`).
pub(crate) static PANFROST: DrmDriver = soc(
    "panfrost",
    &[
        ("fragment", EngineClass::Graphics),
        ("vertex-tiler", EngineClass::Graphics),
    ],
    Some(FdinfoHistory {
        memory_since: None,
        engines_since: None,
        note: "engine and memory keys on recent kernels (no first version recorded)",
    }),
);

/// Arm Mali with CSF (`Documentation/gpu/panthor.rst`: one engine, `panthor`).
pub(crate) static PANTHOR: DrmDriver = soc("panthor", &[("panthor", EngineClass::Other)], None);

/// Raspberry Pi (Maíra Canal's fdinfo patch).
pub(crate) static V3D: DrmDriver = soc(
    "v3d",
    &[
        ("bin", EngineClass::Graphics),
        ("render", EngineClass::Graphics),
        ("tfu", EngineClass::Copy),
        ("csd", EngineClass::Compute),
        ("cache_clean", EngineClass::Other),
        ("cpu", EngineClass::Other),
    ],
    Some(FdinfoHistory {
        memory_since: None,
        engines_since: None,
        note: "engine and memory keys on recent kernels (no first version recorded)",
    }),
);

/// NVIDIA's DRM nodes (`nvidia-drm`): read through NVML, merged into NVML's device.
pub(crate) static NVIDIA: DrmDriver = DrmDriver {
    name: "nvidia",
    // `nv_drm_driver.name` in open-gpu-kernel-modules' `nvidia-drm-drv.c`.
    fdinfo_name: "nvidia-drm",
    regions: &[],
    memory: DeviceMemory::Nvml,
    vram_size: VramSize::None,
    spill: Spill::Never(NVIDIA_REASON),
    integrated: Integrated::WithoutPci,
    ras: Ras::None,
    engines: &[],
    utilization: Utilization::NotRead,
    clock: Clock::Hwmon,
    fdinfo: None,
};

/// Every driver the table does not list: the region spellings drivers share (so an unlisted
/// driver printing `vram`, `local0`, `gtt`, `system`, `stolen`, `cpu` or the core helper's
/// `memory` is still counted), integrated without a PCI address, nothing else known.
pub(crate) static GENERIC: DrmDriver = DrmDriver {
    name: "",
    fdinfo_name: "",
    regions: &[
        (Region::Prefix("stolen"), Some(Bucket::System)),
        (Region::Prefix("system"), Some(Bucket::System)),
        (Region::Prefix("vram"), Some(Bucket::Vram)),
        (Region::Prefix("local"), Some(Bucket::Vram)),
        (Region::Exact("gtt"), Some(Bucket::Gtt)),
        (Region::Exact("cpu"), Some(Bucket::System)),
        (Region::Exact("memory"), Some(Bucket::System)),
    ],
    memory: DeviceMemory::None,
    vram_size: VramSize::None,
    spill: Spill::NoFigures,
    integrated: Integrated::WithoutPci,
    ras: Ras::None,
    engines: &[],
    utilization: Utilization::NotRead,
    clock: Clock::Hwmon,
    fdinfo: None,
};

/// Every listed driver.
pub(crate) static ALL: [&DrmDriver; 8] = [
    &AMDGPU, &I915, &XE, &MSM, &PANFROST, &PANTHOR, &V3D, &NVIDIA,
];

/// The entry of a device bound to sysfs driver `name` ([`GENERIC`] when unlisted or unknown).
pub(crate) fn by_sysfs_name(name: Option<&str>) -> &'static DrmDriver {
    name.and_then(|n| ALL.into_iter().find(|d| d.name == n))
        .unwrap_or(&GENERIC)
}

/// The entry of an fdinfo client whose `drm-driver` is `name` ([`GENERIC`] when unlisted).
pub(crate) fn by_fdinfo_name(name: Option<&str>) -> &'static DrmDriver {
    name.and_then(|n| ALL.into_iter().find(|d| d.fdinfo_name == n))
        .unwrap_or(&GENERIC)
}

#[cfg(test)]
mod tests;
