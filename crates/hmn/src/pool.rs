//! A device's memory pool in words (the library's `Device::pool`): the device line's memory
//! part, the totals note of `hmn ps`, and the line `hmn run` and `hmn watch` print for a device
//! whose memory is host RAM.

use hypomnesis::{Device, MemoryPool, PoolKind, PoolSource, Source};

use crate::format::{bytes, opt_bytes};

/// The device line's memory part for a device with a pool: `free X / Y` with what the pool is
/// and where the used figure comes from.
pub fn memory_part(dev: &Device, p: &MemoryPool) -> String {
    let free_total = format!(
        "free {} / {}",
        opt_bytes(p.free_bytes),
        opt_bytes(p.total_bytes)
    );
    match p.kind {
        PoolKind::CarveOutPlusGtt => {
            let region = |key: &str, label: &str| {
                let r = dev.regions.get(key);
                let free = r.and_then(|r| Some(r.total_bytes?.saturating_sub(r.used_bytes?)));
                format!(
                    "{label} {} / {} free",
                    opt_bytes(free),
                    opt_bytes(r.and_then(|r| r.total_bytes))
                )
            };
            // The library counts at most `MemTotal` of a GTT larger than the RAM.
            let total = |key: &str| dev.regions.get(key).and_then(|r| r.total_bytes);
            let capped = matches!(
                (p.total_bytes, total("vram"), total("gtt")),
                (Some(t), Some(v), Some(g)) if t < v.saturating_add(g)
            );
            format!(
                "{free_total} carve-out + GTT ({}, {}, {}GTT's free at most the RAM available)",
                region("vram", "VRAM"),
                region("gtt", "GTT"),
                if capped {
                    "GTT counted at most the host's RAM, "
                } else {
                    ""
                }
            )
        }
        PoolKind::UnifiedHost => {
            let of = if p.total_source == PoolSource::MetalWorkingSet {
                " of the GPU working set"
            } else {
                " (the host's RAM)"
            };
            let mut s = format!("unified with host RAM, {free_total}{of}");
            if let Some(u) = used_part(dev, p) {
                s.push_str(&format!(", {u}"));
            }
            s
        }
        _ => {
            let mut s = if p.used_source.is_sum() && p.free_bytes.is_some() {
                format!(
                    "free at most {} / {}",
                    opt_bytes(p.free_bytes),
                    opt_bytes(p.total_bytes)
                )
            } else {
                free_total
            };
            if let Some(u) = used_part(dev, p) {
                s.push_str(&format!(", {u}"));
            }
            s
        }
    }
}

/// What the pool's used figure is, in words (`None` when it is the device's own figure).
fn used_part(dev: &Device, p: &MemoryPool) -> Option<String> {
    let used = opt_bytes(p.used_bytes);
    Some(match p.used_source {
        PoolSource::ProcessSum => format!(
            "{used} held by GPU processes (the sum of {}'s per-process figures)",
            if dev.source == Source::NvidiaSmi {
                "nvidia-smi"
            } else {
                "NVML"
            }
        ),
        // No client printed a figure: nothing to add to `free ? / …`.
        PoolSource::ClientSum if p.used_bytes.is_none() => return None,
        PoolSource::ClientSum if p.kind == PoolKind::Dedicated => {
            format!("at least {used} used (its DRM clients' resident VRAM)")
        }
        PoolSource::ClientSum => format!("at least {used} held by its DRM clients"),
        PoolSource::IokitAlloc => {
            let mut s = format!("{used} allocated by GPU clients");
            if let Some(a) = p.active_bytes {
                s.push_str(&format!(" ({} in use)", bytes(a)));
            }
            s
        }
        _ => return None,
    })
}

/// `GPU N's memory is host RAM …`, for a device whose pool shares the host's RAM: what
/// `hmn watch` prints so that its figures are not added to the RAM figures.
pub fn host_memory_note(dev: &Device) -> Option<String> {
    let kind = dev.pool_kind().filter(|k| k.shares_host_memory())?;
    Some(host_memory_line(dev.index, kind))
}

/// The words of [`host_memory_note`] for device `index` with a pool of `kind` (`hmn run` has
/// the kind alone, from its report).
pub fn host_memory_line(index: u32, kind: PoolKind) -> String {
    let what = match kind {
        PoolKind::CarveOutPlusGtt => "a carve-out plus GTT, and GTT is host RAM",
        _ => "host RAM (unified)",
    };
    format!(
        "GPU {index}'s memory is {what}: its VRAM figures are host RAM too, part of the host's \
         used RAM and possibly of the RSS (managed or host-mapped buffers are) — never add the two"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use hypomnesis::test_helpers::DeviceBuilder;
    use hypomnesis::{DeviceRegion, Vendor};

    const GIB: u64 = 1 << 30;
    const MIB: u64 = 1 << 20;

    fn pool(kind: PoolKind, sources: [PoolSource; 3], figures: [Option<u64>; 3]) -> MemoryPool {
        let mut p = MemoryPool::new(kind, sources, "evidence");
        [p.total_bytes, p.used_bytes, p.free_bytes] = figures;
        p
    }

    #[test]
    fn each_pool_in_words() {
        let mut gb10 = DeviceBuilder::new(0).name("NVIDIA GB10").build();
        gb10.pool = Some(pool(
            PoolKind::UnifiedHost,
            [
                PoolSource::HostTotal,
                PoolSource::ProcessSum,
                PoolSource::HostAvailable,
            ],
            [Some(121 * GIB), Some(61 * GIB), Some(113 * GIB)],
        ));
        assert_eq!(
            memory_part(&gb10, gb10.pool.as_ref().unwrap()),
            "unified with host RAM, free 113 GiB / 121 GiB (the host's RAM), 61 GiB held by GPU \
             processes (the sum of NVML's per-process figures)"
        );
        let mut apu = DeviceBuilder::new(1).vendor(Vendor::Amd).build();
        apu.regions.insert(
            "vram".into(),
            DeviceRegion::new(Some(512 * MIB), Some(148 * MIB)),
        );
        apu.regions.insert(
            "gtt".into(),
            DeviceRegion::new(Some(62 * GIB), Some(2 * GIB)),
        );
        let p = pool(
            PoolKind::CarveOutPlusGtt,
            [
                PoolSource::VramPlusGtt,
                PoolSource::VramPlusGtt,
                PoolSource::VramPlusGttHostBound,
            ],
            [Some(62 * GIB + 512 * MIB), None, Some(60 * GIB + 364 * MIB)],
        );
        assert_eq!(
            memory_part(&apu, &p),
            "free 60.4 GiB / 62.5 GiB carve-out + GTT (VRAM 364 MiB / 512 MiB free, GTT 60 GiB \
             / 62 GiB free, GTT's free at most the RAM available)"
        );
        // A GTT (62 GiB) above the host's RAM (48 GiB): the total counts 48 GiB of it.
        let p = pool(
            PoolKind::CarveOutPlusGtt,
            [
                PoolSource::VramPlusGttHostBound,
                PoolSource::VramPlusGtt,
                PoolSource::VramPlusGttHostBound,
            ],
            [Some(48 * GIB + 512 * MIB), None, Some(40 * GIB)],
        );
        assert_eq!(
            memory_part(&apu, &p),
            "free 40 GiB / 48.5 GiB carve-out + GTT (VRAM 364 MiB / 512 MiB free, GTT 60 GiB / \
             62 GiB free, GTT counted at most the host's RAM, GTT's free at most the RAM \
             available)"
        );
        let mut mac = DeviceBuilder::new(0)
            .vendor(Vendor::Other("apple".into()))
            .build();
        let mut p = pool(
            PoolKind::UnifiedHost,
            [
                PoolSource::MetalWorkingSet,
                PoolSource::IokitAlloc,
                PoolSource::WorkingSetMinusAllocHostBound,
            ],
            [Some(48 * GIB), Some(20 * GIB), Some(28 * GIB)],
        );
        p.active_bytes = Some(2 * GIB);
        mac.pool = Some(p.clone());
        assert_eq!(
            memory_part(&mac, &p),
            "unified with host RAM, free 28 GiB / 48 GiB of the GPU working set, 20 GiB \
             allocated by GPU clients (2 GiB in use)"
        );
        let xe = DeviceBuilder::new(2).vendor(Vendor::Intel).build();
        let sum = [
            PoolSource::VramSizeFile,
            PoolSource::ClientSum,
            PoolSource::TotalMinusUsed,
        ];
        let p = pool(
            PoolKind::Dedicated,
            sum,
            [Some(12 * GIB), Some(24 * MIB), Some(12 * GIB - 24 * MIB)],
        );
        assert_eq!(
            memory_part(&xe, &p),
            "free at most 12 GiB / 12 GiB, at least 24 MiB used (its DRM clients' resident VRAM)"
        );
        let p = pool(PoolKind::Dedicated, sum, [None, Some(24 * MIB), None]);
        assert_eq!(
            memory_part(&xe, &p),
            "free ? / ?, at least 24 MiB used (its DRM clients' resident VRAM)"
        );
        let p = pool(PoolKind::Dedicated, sum, [Some(12 * GIB), None, None]);
        assert_eq!(
            memory_part(&xe, &p),
            "free ? / 12 GiB",
            "no client figure: as before"
        );
    }

    #[test]
    fn run_and_watch_say_when_gpu_memory_is_host_ram() {
        let mut d = DeviceBuilder::new(3)
            .memory(Some(80 * GIB), None, None, None)
            .build();
        assert_eq!(host_memory_note(&d), None, "a discrete GPU");
        d.integrated = Some(true);
        assert_eq!(
            host_memory_note(&d).unwrap(),
            "GPU 3's memory is host RAM (unified): its VRAM figures are host RAM too, part of the \
             host's used RAM and possibly of the RSS (managed or host-mapped buffers are) — never \
             add the two"
        );
        d.pool = Some(MemoryPool::new(
            PoolKind::CarveOutPlusGtt,
            [PoolSource::VramPlusGtt; 3],
            "e",
        ));
        assert!(host_memory_note(&d).unwrap().contains("GTT is host RAM"));
    }
}
