//! The budget of a device with a memory pool ([`Device::pool`]): what one runtime process can
//! allocate there, never more than the host's available RAM where the pool is host RAM. Called
//! by [`Budget::for_device_with`](super::budget::Budget::for_device_with) before its rule for a
//! device's own free memory; `docs/memory-model.md` ("Memory pools") gives the evidence.
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

use super::budget::{Budget, BudgetSource, NoBudget, runtime_rule};
use super::runtime::{Runtime, Utilization};
use crate::types::{Device, MemoryPool, PoolKind, PoolSource, Unknown, UnknownReason};

/// The budget of `device` from its pool, or `None` when it has no pool (its own free memory
/// decides).
pub(super) fn pool_budget(
    device: &Device,
    host_available: Option<u64>,
    runtime: Runtime,
    util: Utilization,
) -> Option<Result<Budget, NoBudget>> {
    let pool = device.pool.as_ref()?;
    let unknown_free = |detail: String| NoBudget::UnknownFree {
        index: device.index,
        unknown: Some(
            device
                .unknown
                .iter()
                .find(|u| u.field == "pool.free_bytes")
                .cloned()
                .unwrap_or_else(|| {
                    Unknown::new("pool.free_bytes", UnknownReason::Unsupported, detail)
                }),
        ),
    };
    Some(match pool.kind {
        PoolKind::CarveOutPlusGtt => carve_out_plus_gtt(device, host_available, runtime, util)
            .ok_or_else(|| {
                unknown_free("the carve-out or GTT figures, or MemAvailable, are unknown".into())
            }),
        PoolKind::UnifiedHost => {
            let free = pool.free_bytes.or(match pool.free_source {
                PoolSource::HostAvailable => host_available,
                _ => None,
            });
            let source = match pool.free_source {
                PoolSource::WorkingSetMinusAllocHostBound => BudgetSource::MetalWorkingSet,
                _ => BudgetSource::HostAvailable,
            };
            free.map(|f| runtime_rule(f, source, pool.total_bytes, runtime, util))
                .ok_or_else(|| unknown_free("the host's available RAM is unknown".into()))
        }
        PoolKind::Dedicated => match (device.memory.free_bytes, pool.free_bytes) {
            // The driver's own figure, where there is one, decides.
            (Some(_), _) => return None,
            (None, Some(free)) => {
                let mut b = Budget::from_free_with(free, pool.total_bytes, runtime, util);
                if pool.used_source.is_sum() {
                    b.notes.push(upper_bound_note(pool));
                }
                Ok(b)
            }
            (None, None) => return None,
        },
    })
}

/// An AMD APU: the larger pool's free memory (GTT's at most `MemAvailable`), the vLLM rule
/// applied to that pool's total. `None` when a figure it needs is unknown.
fn carve_out_plus_gtt(
    device: &Device,
    host_available: Option<u64>,
    runtime: Runtime,
    util: Utilization,
) -> Option<Budget> {
    let vram = device.regions.get("vram")?;
    let gtt = device.regions.get("gtt")?;
    let (vt, vu) = (vram.total_bytes?, vram.used_bytes?);
    let (gt, gu) = (gtt.total_bytes?, gtt.used_bytes?);
    let vram_free = vt.saturating_sub(vu);
    if gt > vt {
        let gtt_free = gt.saturating_sub(gu).min(host_available?);
        let mut b = runtime_rule(gtt_free, BudgetSource::GttPool, Some(gt), runtime, util);
        b.notes.push(format!(
            "an AMD APU: one ROCm/HIP process allocates from the larger pool, GTT here (the \
             kernel's apu_prefer_gtt); a Vulkan runtime may also use the carve-out's {} free",
            gib(vram_free)
        ));
        Some(b)
    } else {
        Some(runtime_rule(
            vram_free,
            BudgetSource::Free,
            Some(vt),
            runtime,
            util,
        ))
    }
}

fn upper_bound_note(pool: &MemoryPool) -> String {
    format!(
        "free is the VRAM size less the resident VRAM of the clients this user can read ({}): \
         an upper bound",
        pool.used_bytes.map_or_else(|| "unknown".to_string(), gib)
    )
}

fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{DeviceRegion, Source, Vendor};

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

    fn budget(d: &Device, host: Option<u64>, runtime: Runtime) -> Result<Budget, NoBudget> {
        Budget::for_device_with(d, host, runtime, Utilization::VLLM_DEFAULT)
    }

    #[test]
    fn an_apu_is_judged_against_its_larger_pool() {
        // Strix Halo, default TTM: 512 MiB carve-out, 148 MiB used; GTT 62816 MiB.
        let d = apu((512 * MIB, 148 * MIB), (65_867_993_088, 2 * GIB));
        assert!(Budget::needs_host_available(&d));
        let b = budget(&d, Some(100 * GIB), Runtime::Generic).unwrap();
        assert_eq!(
            (b.bytes, b.source),
            (65_867_993_088 - 2 * GIB, BudgetSource::GttPool)
        );
        assert!(b.notes[0].contains("0.4 GiB free"), "{:?}", b.notes);
        // MemAvailable below free GTT bounds it.
        let b = budget(&d, Some(40 * GIB), Runtime::Generic).unwrap();
        assert_eq!(b.bytes, 40 * GIB);
        // vLLM: 0.9 × the GTT pool's total.
        let v = budget(&d, Some(100 * GIB), Runtime::Vllm).unwrap();
        assert_eq!(
            (v.bytes, v.source),
            (65_867_993_088 / 10 * 9, BudgetSource::VllmUtilization)
        );
        // No MemAvailable: no budget, never the unbounded GTT figure.
        let e = budget(&d, None, Runtime::Generic).unwrap_err();
        assert!(e.to_string().contains("MemAvailable"), "{e}");
        // A large carve-out (8 GiB, GTT 4 GiB): the carve-out's own free.
        let big = apu((8 * GIB, GIB), (4 * GIB, 0));
        let b = budget(&big, None, Runtime::Generic).unwrap();
        assert_eq!((b.bytes, b.source), (7 * GIB, BudgetSource::Free));
    }

    #[test]
    fn unified_memory_is_the_hosts_available_ram() {
        let mut d = Device::new(0, Vendor::Nvidia, Source::Nvml);
        d.integrated = Some(true);
        let mut p = MemoryPool::host_ram(PoolSource::ProcessSum, "NOT_SUPPORTED");
        p.total_bytes = Some(121 * GIB);
        p.free_bytes = Some(113 * GIB);
        d.pool = Some(p);
        let b = budget(&d, Some(113 * GIB), Runtime::Generic).unwrap();
        assert_eq!(
            (b.bytes, b.source),
            (113 * GIB, BudgetSource::HostAvailable)
        );
        assert!(b.source.is_host_memory());
        // vLLM's 0.9 × MemTotal must be available, as on a GB10 (108.9 GiB ≤ 113 GiB).
        let v = budget(&d, Some(113 * GIB), Runtime::Vllm).unwrap();
        assert_eq!(v.bytes, 121 * GIB / 10 * 9);
        // The pool's free unknown (the probe could not read meminfo): the caller's figure, or
        // none.
        d.pool.as_mut().unwrap().free_bytes = None;
        assert_eq!(
            budget(&d, Some(7 * GIB), Runtime::Generic).unwrap().bytes,
            7 * GIB
        );
        let e = budget(&d, None, Runtime::Generic).unwrap_err();
        assert!(
            matches!(&e, NoBudget::UnknownFree { unknown: Some(u), .. } if u.field == "pool.free_bytes"),
            "{e:?}"
        );
    }

    #[test]
    fn apple_is_judged_against_the_working_set_left() {
        let mut d = Device::new(0, Vendor::Other("apple".into()), Source::Metal);
        let mut p = MemoryPool::new(
            PoolKind::UnifiedHost,
            [
                PoolSource::MetalWorkingSet,
                PoolSource::IokitAlloc,
                PoolSource::WorkingSetMinusAllocHostBound,
            ],
            "hasUnifiedMemory",
        );
        p.total_bytes = Some(48 * GIB);
        p.used_bytes = Some(20 * GIB);
        p.free_bytes = Some(28 * GIB);
        d.pool = Some(p);
        let b = budget(&d, None, Runtime::LlamaCpp).unwrap();
        assert_eq!(
            (b.bytes, b.source),
            (28 * GIB, BudgetSource::MetalWorkingSet)
        );
        assert!(b.source.is_host_memory());
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
        assert!(!Budget::needs_host_available(&d));
        let b = budget(&d, None, Runtime::Generic).unwrap();
        assert_eq!((b.bytes, b.source), (10 * GIB, BudgetSource::Free));
        assert!(b.notes[0].contains("upper bound"), "{:?}", b.notes);
        // Total unknown (mainline xe): the device's own reason.
        d.pool.as_mut().unwrap().free_bytes = None;
        assert!(matches!(
            budget(&d, None, Runtime::Generic),
            Err(NoBudget::UnknownFree { .. })
        ));
        d.memory.free_bytes = Some(GIB);
        assert_eq!(budget(&d, None, Runtime::Generic).unwrap().bytes, GIB);
    }
}
