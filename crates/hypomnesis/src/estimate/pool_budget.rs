//! The budget of a device with a memory pool (`Device::pool`): what one runtime process can
//! allocate there, never more than the host's available RAM where the pool is host RAM
//! ([`pool_free`]). `Budget::for_device_with` asks it before its rule for a device's own free
//! memory and applies the runtime's rule to it; `docs/memory-model.md` ("Memory pools") gives
//! the evidence.
//!
//! | Pool | Budget | Source |
//! |---|---|---|
//! | carve-out + GTT, GTT larger (the usual APU) | min(free GTT, `MemAvailable`) | `gtt_pool` |
//! | carve-out + GTT, carve-out at least as large | free carve-out | `free` |
//! | unified with the host (NVIDIA GB10-class, Intel iGPU, SoC) | `MemAvailable` | `host_available` |
//! | unified with the host (Apple) | min(working set − allocated, available RAM) | `metal_working_set` |
//! | dedicated, used = the clients' sum (discrete Intel) | total − that sum (an upper bound) | `free`, with a note |
//!
//! Why the larger pool on an APU: one ROCm/HIP process allocates from one pool. Since Linux
//! 6.10 (Lang Yu, eb853413d02c) KFD sends an APU's "VRAM" allocations to GTT, and since the
//! 6.15 cycle only when GTT is the larger (`apu_prefer_gtt`, set in `amdgpu_ttm_init()` when
//! `real_vram_size < gtt_size`; Alex Deucher, 8b0d068e7dd1 / 759e764f7d58) — so HIP sees the
//! larger of the two, as amd-smi shows (ROCm/rocm-systems PR #1967). GTT pages are host RAM, so
//! their free part is bounded by `MemAvailable`; the carve-out is outside `MemTotal` and is not.
//! The vLLM rule (`gpu_memory_utilization` × total) then applies to the chosen pool's total.

use crate::types::{Device, PoolKind, PoolSource};

/// Where a pool budget comes from (the estimate's `BudgetSource` names it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Origin {
    /// An APU's GTT, the larger pool.
    GttPool,
    /// A device's own free memory (an APU's carve-out when it is the larger; a discrete card's
    /// total less its clients' sum).
    Free,
    /// The host's available RAM (unified memory).
    HostAvailable,
    /// Apple's working set less what GPU clients allocated.
    MetalWorkingSet,
}

/// What one runtime process can allocate in a device's pool, before the runtime's own rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PoolFree {
    /// The bytes.
    pub bytes: u64,
    /// The pool's total, which vLLM's `gpu_memory_utilization` applies to.
    pub total: Option<u64>,
    /// Where they come from.
    pub from: Origin,
    /// What the verdict should say about it.
    pub note: Option<String>,
}

/// The pool budget of `device`: `None` when it has no pool, or its own free memory decides;
/// `Some(Err(why))` when a figure it needs is unknown.
pub(super) fn pool_free(
    device: &Device,
    host_available: Option<u64>,
) -> Option<Result<PoolFree, String>> {
    let pool = device.pool.as_ref()?;
    Some(match pool.kind {
        PoolKind::CarveOutPlusGtt => carve_out_plus_gtt(device, host_available).ok_or_else(|| {
            "the carve-out or GTT figures, or MemAvailable, are unknown".to_string()
        }),
        PoolKind::UnifiedHost => {
            let free = pool.free_bytes.or(match pool.free_source {
                PoolSource::HostAvailable => host_available,
                _ => None,
            });
            let from = match pool.free_source {
                PoolSource::WorkingSetMinusAllocHostBound => Origin::MetalWorkingSet,
                _ => Origin::HostAvailable,
            };
            free.map(|bytes| PoolFree {
                bytes,
                total: pool.total_bytes,
                from,
                note: None,
            })
            .ok_or_else(|| "the host's available RAM is unknown".to_string())
        }
        PoolKind::Dedicated => match (device.memory.free_bytes, pool.free_bytes) {
            // The driver's own figure, where there is one, decides.
            (Some(_), _) | (None, None) => return None,
            (None, Some(bytes)) => Ok(PoolFree {
                bytes,
                total: pool.total_bytes,
                from: Origin::Free,
                note: pool.used_source.is_sum().then(|| {
                    format!(
                        "free is the VRAM size less the resident VRAM of the clients this user \
                         can read ({}): an upper bound",
                        pool.used_bytes.map_or_else(|| "unknown".to_string(), gib)
                    )
                }),
            }),
        },
    })
}

/// What one process can allocate on `device` before a runtime's rule: the pool budget where
/// the device has one ([`pool_free`]), else its own free memory (the host's available RAM for
/// an integrated GPU that reports none). `Err(why)` when a figure it needs is unknown — never 0.
pub(super) fn allocatable_free(
    device: &Device,
    host_available: Option<u64>,
) -> Result<u64, String> {
    match pool_free(device, host_available) {
        Some(r) => r.map(|f| f.bytes),
        None => own_free(device, host_available)
            .map(|(bytes, _)| bytes)
            .ok_or_else(|| {
                if device.integrated == Some(true) {
                    "the host's available RAM is unknown".to_string()
                } else {
                    "its free memory is unknown".to_string()
                }
            }),
    }
}

/// A device whose pool does not decide ([`pool_free`] is `None`): its own free memory
/// ([`Origin::Free`]), else, for an integrated GPU that reports none, the host's available RAM
/// it shares ([`Origin::HostAvailable`]); `None` when neither is known.
pub(super) fn own_free(device: &Device, host_available: Option<u64>) -> Option<(u64, Origin)> {
    match (device.memory.free_bytes, host_available) {
        (Some(free), _) => Some((free, Origin::Free)),
        (None, Some(host)) if device.integrated == Some(true) => {
            Some((host, Origin::HostAvailable))
        }
        _ => None,
    }
}

/// `device` with its figures moved so that [`allocatable_free`] (with the same
/// `host_available`) is `free`, at most what it was: the device as another pick's reservation
/// leaves it, judged by every budget rule — an APU's pool note and a pool's total stay.
pub(super) fn with_allocatable_free(device: &Device, free: u64) -> Device {
    let mut d = device.clone();
    // Whether the pool decides does not depend on the host's figure.
    let pool_decides = pool_free(device, None).is_some();
    match d.pool.as_mut() {
        Some(p) if pool_decides && p.kind == PoolKind::CarveOutPlusGtt => {
            // The larger region is the pool: its used figure grows by what the reservation takes.
            let larger = match (d.regions.get("vram"), d.regions.get("gtt")) {
                (Some(v), Some(g)) if g.total_bytes > v.total_bytes => "gtt",
                _ => "vram",
            };
            if let Some(r) = d.regions.get_mut(larger) {
                if let Some(total) = r.total_bytes {
                    r.used_bytes = Some(total.saturating_sub(free));
                }
            }
        }
        Some(p) if pool_decides => p.free_bytes = Some(free),
        _ => d.memory.free_bytes = Some(free),
    }
    d
}

/// An AMD APU: the larger pool's free memory (GTT's at most `MemAvailable`). `None` when a
/// figure it needs is unknown.
fn carve_out_plus_gtt(device: &Device, host_available: Option<u64>) -> Option<PoolFree> {
    let vram = device.regions.get("vram")?;
    let gtt = device.regions.get("gtt")?;
    let (vt, vu) = (vram.total_bytes?, vram.used_bytes?);
    let (gt, gu) = (gtt.total_bytes?, gtt.used_bytes?);
    let vram_free = vt.saturating_sub(vu);
    if gt > vt {
        Some(PoolFree {
            bytes: gt.saturating_sub(gu).min(host_available?),
            total: Some(gt),
            from: Origin::GttPool,
            note: Some(format!(
                "an AMD APU: one ROCm/HIP process allocates from the larger pool, GTT here (the \
                 kernel's apu_prefer_gtt); a Vulkan runtime may also use the carve-out's {} free",
                gib(vram_free)
            )),
        })
    } else {
        Some(PoolFree {
            bytes: vram_free,
            total: Some(vt),
            from: Origin::Free,
            note: None,
        })
    }
}

fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{DeviceRegion, MemoryPool, Source, Vendor};

    const GIB: u64 = 1 << 30;
    const MIB: u64 = 1 << 20;

    fn apu(vram: (u64, u64), gtt: (u64, u64)) -> Device {
        let mut d = Device::new(1, Vendor::Amd, Source::Sysfs);
        d.regions
            .insert("vram".into(), DeviceRegion::new(Some(vram.0), Some(vram.1)));
        d.regions
            .insert("gtt".into(), DeviceRegion::new(Some(gtt.0), Some(gtt.1)));
        d.memory.free_bytes = Some(vram.0 - vram.1);
        d.pool = Some(MemoryPool::new(
            PoolKind::CarveOutPlusGtt,
            [
                PoolSource::VramPlusGtt,
                PoolSource::VramPlusGtt,
                PoolSource::VramPlusGttHostBound,
            ],
            "vddnb",
        ));
        d.integrated = Some(true);
        d
    }

    #[test]
    fn an_apu_offers_its_larger_pool() {
        // Strix Halo, default TTM: 512 MiB carve-out, 148 MiB used; GTT 62816 MiB.
        let d = apu((512 * MIB, 148 * MIB), (65_867_993_088, 2 * GIB));
        let f = pool_free(&d, Some(100 * GIB)).unwrap().unwrap();
        assert_eq!(
            (f.bytes, f.total, f.from),
            (
                65_867_993_088 - 2 * GIB,
                Some(65_867_993_088),
                Origin::GttPool
            )
        );
        assert!(f.note.unwrap().contains("0.4 GiB free"));
        // MemAvailable below free GTT bounds it.
        assert_eq!(
            pool_free(&d, Some(40 * GIB)).unwrap().unwrap().bytes,
            40 * GIB
        );
        // No MemAvailable: none, never the unbounded GTT figure.
        assert!(
            pool_free(&d, None)
                .unwrap()
                .unwrap_err()
                .contains("MemAvailable")
        );
        // A large carve-out (8 GiB, GTT 4 GiB): the carve-out's own free, no host needed.
        let big = apu((8 * GIB, GIB), (4 * GIB, 0));
        let f = pool_free(&big, None).unwrap().unwrap();
        assert_eq!(
            (f.bytes, f.total, f.from),
            (7 * GIB, Some(8 * GIB), Origin::Free)
        );
        // A region without a used figure: unknown.
        let mut d = d;
        d.regions
            .insert("gtt".into(), DeviceRegion::new(Some(GIB), None));
        assert!(pool_free(&d, Some(GIB)).unwrap().is_err());
    }

    #[test]
    fn unified_memory_offers_the_hosts_available_ram() {
        let mut d = Device::new(0, Vendor::Nvidia, Source::Nvml);
        let mut p = MemoryPool::host_ram(PoolSource::ProcessSum, "NOT_SUPPORTED");
        p.total_bytes = Some(121 * GIB);
        p.free_bytes = Some(113 * GIB);
        d.pool = Some(p);
        let f = pool_free(&d, Some(7 * GIB)).unwrap().unwrap();
        assert_eq!(
            (f.bytes, f.total, f.from),
            (113 * GIB, Some(121 * GIB), Origin::HostAvailable),
            "the pool's own free, completed by the probe"
        );
        d.pool.as_mut().unwrap().free_bytes = None;
        assert_eq!(
            pool_free(&d, Some(7 * GIB)).unwrap().unwrap().bytes,
            7 * GIB
        );
        assert!(pool_free(&d, None).unwrap().is_err());
        // Apple: the working set left, as the probe bounded it.
        let mut mac = Device::new(0, Vendor::Other("apple".into()), Source::Metal);
        let mut p = MemoryPool::working_set("hasUnifiedMemory");
        p.total_bytes = Some(48 * GIB);
        p.free_bytes = Some(28 * GIB);
        mac.pool = Some(p);
        let f = pool_free(&mac, None).unwrap().unwrap();
        assert_eq!((f.bytes, f.from), (28 * GIB, Origin::MetalWorkingSet));
        // Nothing from the caller stands in for Apple's own figure.
        mac.pool.as_mut().unwrap().free_bytes = None;
        assert!(pool_free(&mac, Some(GIB)).unwrap().is_err());
    }

    #[test]
    fn a_discrete_client_sum_is_an_upper_bound_and_the_drivers_figure_wins() {
        let mut d = Device::new(2, Vendor::Intel, Source::Sysfs);
        let mut p = MemoryPool::new(
            PoolKind::Dedicated,
            [
                PoolSource::VramSizeFile,
                PoolSource::ClientSum,
                PoolSource::TotalMinusUsed,
            ],
            "dGPU",
        );
        p.total_bytes = Some(12 * GIB);
        p.used_bytes = Some(2 * GIB);
        p.free_bytes = Some(10 * GIB);
        d.pool = Some(p);
        let f = pool_free(&d, None).unwrap().unwrap();
        assert_eq!((f.bytes, f.from), (10 * GIB, Origin::Free));
        assert!(f.note.unwrap().contains("upper bound"));
        d.pool.as_mut().unwrap().free_bytes = None;
        assert!(
            pool_free(&d, None).is_none(),
            "no figure: the device's own rule"
        );
        d.memory.free_bytes = Some(GIB);
        assert!(pool_free(&d, None).is_none());
        assert!(pool_free(&Device::new(0, Vendor::Amd, Source::Sysfs), None).is_none());
    }

    #[test]
    fn a_reservation_comes_out_of_the_pool_a_budget_is_drawn_from() {
        // An APU whose GTT budget is bounded by MemAvailable (40 GiB): 10 GiB reserved leave 30.
        let d = apu((512 * MIB, 148 * MIB), (65_867_993_088, 2 * GIB));
        let host = Some(40 * GIB);
        assert_eq!(allocatable_free(&d, host), Ok(40 * GIB));
        let left = with_allocatable_free(&d, 30 * GIB);
        assert_eq!(allocatable_free(&left, host), Ok(30 * GIB));
        let f = pool_free(&left, host).unwrap().unwrap();
        assert_eq!(
            (f.from, f.total),
            (Origin::GttPool, Some(65_867_993_088)),
            "still the GTT pool, its total kept"
        );
        assert_eq!(
            left.regions["vram"], d.regions["vram"],
            "the carve-out untouched"
        );
        // The carve-out the larger: its own figures move.
        let big = apu((8 * GIB, GIB), (4 * GIB, 0));
        let left = with_allocatable_free(&big, 5 * GIB);
        assert_eq!(allocatable_free(&left, None), Ok(5 * GIB));
        // Unified memory: the pool's free figure.
        let mut gb10 = Device::new(0, Vendor::Nvidia, Source::Nvml);
        gb10.pool = Some(MemoryPool::host_ram(
            PoolSource::ProcessSum,
            "NOT_SUPPORTED",
        ));
        assert!(
            allocatable_free(&gb10, None)
                .unwrap_err()
                .contains("available RAM")
        );
        assert_eq!(allocatable_free(&gb10, Some(100 * GIB)), Ok(100 * GIB));
        let left = with_allocatable_free(&gb10, 90 * GIB);
        assert_eq!(allocatable_free(&left, Some(100 * GIB)), Ok(90 * GIB));
        // No pool: the device's own free memory; unknown stays unknown, never 0.
        let mut h100 = Device::new(1, Vendor::Nvidia, Source::Nvml);
        assert!(allocatable_free(&h100, Some(GIB)).is_err());
        h100.memory.free_bytes = Some(70 * GIB);
        let left = with_allocatable_free(&h100, 60 * GIB);
        assert_eq!(allocatable_free(&left, None), Ok(60 * GIB));
        // An integrated GPU without a pool or a free figure: the host's available RAM.
        let mut igpu = Device::new(2, Vendor::Intel, Source::Sysfs);
        igpu.integrated = Some(true);
        assert_eq!(allocatable_free(&igpu, Some(8 * GIB)), Ok(8 * GIB));
        assert!(allocatable_free(&igpu, None).is_err());
    }
}
