//! The budget an estimate is judged against: how much memory the runtime may use on a device,
//! and where that figure comes from. Owns [`Budget`], [`BudgetSource`], [`NoBudget`] and the
//! rules that choose it:
//!
//! | Rule | Where |
//! |---|---|
//! | a device with a memory pool (an AMD APU's larger pool, unified memory, Apple's working set): `pool_budget` | [`Budget::for_device`] |
//! | a device's free memory; an integrated GPU without one: the host's available RAM; none otherwise | [`Budget::for_device`] |
//! | whether a device needs the host's available RAM | [`Budget::needs_host_available`] |
//! | vLLM: `gpu_memory_utilization` (0.9) × total, or 0 when less than that is free | [`Budget::from_free_with`] (through `runtime_rule`) |
//! | a budget given by the caller, taken as it is | [`Budget::given`] |
//! | CPU only: the host's available RAM (`MemAvailable`) | [`Budget::host`] |

use super::pool_budget::{Origin, own_free, pool_free};
use super::runtime::{Runtime, Utilization};
use crate::types::spelling::spelled;
use crate::types::{Device, Field, Unknown, UnknownReason};

#[cfg(feature = "serde")]
use serde::Serialize;

const GIB: u64 = 1 << 30;

/// vLLM's default `gpu_memory_utilization`, 0.9, as a ratio.
pub const VLLM_UTILIZATION: (u64, u64) = (9, 10);

spelled! {
    /// Where a budget comes from.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    #[non_exhaustive]
    pub enum BudgetSource {
        /// The device's free memory.
        Free = "free",
        /// The host's available RAM (`MemAvailable`): an integrated GPU sharing system RAM
        /// that reports no free memory of its own, or a CPU-only run.
        HostAvailable = "host_available",
        /// vLLM's reservation, `gpu_memory_utilization` (0.9) × total; 0 when less than that
        /// is free, since vLLM then refuses to start.
        VllmUtilization = "vllm_utilization",
        /// Given by the caller (planning for a device that is not here).
        Given = "given",
        /// An AMD APU's GTT, the larger of its two pools: free GTT, at most the host's
        /// available RAM (GTT pages are host RAM).
        GttPool = "gtt_pool",
        /// Apple Silicon: Metal's working set less what GPU clients allocated, at most the
        /// host's available RAM.
        MetalWorkingSet = "metal_working_set",
    }
}

impl BudgetSource {
    /// Whether the budget is host RAM: a model's host part then gets what the device part
    /// leaves of it, never the same RAM twice ([`judge_host`](super::judge::judge_host)).
    pub const fn is_host_memory(self) -> bool {
        matches!(
            self,
            BudgetSource::HostAvailable | BudgetSource::GttPool | BudgetSource::MetalWorkingSet
        )
    }
}

/// What a runtime may use on a device.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize))]
#[non_exhaustive]
pub struct Budget {
    /// The bytes the runtime may use.
    pub bytes: u64,
    /// Where they come from.
    pub source: BudgetSource,
    /// Why the runtime cannot use what is free (vLLM's reservation larger than free memory);
    /// they become the verdict's notes.
    pub notes: Vec<String>,
}

/// Why a device has no budget.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NoBudget {
    /// The device could not be read at all ([`Device::error`]).
    #[error("device {index} cannot be read: {error}")]
    Unreadable {
        /// Device index.
        index: u32,
        /// What went wrong.
        error: String,
    },
    /// The device reports no free memory, and is not an integrated GPU whose host's available
    /// RAM is known (in llama.cpp's layer split, whatever the device: the split follows free
    /// memory; see [`plan`](super::plan::plan)).
    #[error(
        "device {index} does not report its free memory: {}",
        .unknown.as_ref().map_or("not reported", |u| u.detail.as_str())
    )]
    UnknownFree {
        /// Device index.
        index: u32,
        /// The device's record of why its memory is unknown, when it has one.
        unknown: Option<Unknown>,
    },
}

impl NoBudget {
    /// [`NoBudget::UnknownFree`] for `device`, with its record of why its memory is unknown
    /// (the first [`Unknown`] of a memory field, [`Field::is_memory`](crate::Field::is_memory)),
    /// when it has one.
    pub fn unknown_free(device: &Device) -> NoBudget {
        NoBudget::UnknownFree {
            index: device.index,
            unknown: device.unknown.iter().find(|u| u.field.is_memory()).cloned(),
        }
    }
}

impl Budget {
    /// A budget given by the caller, taken as it is for every runtime (there is no total to
    /// apply vLLM's 0.9 to).
    pub fn given(bytes: u64) -> Budget {
        Budget {
            bytes,
            source: BudgetSource::Given,
            notes: Vec::new(),
        }
    }

    /// The budget of a device with `free` bytes free of `total` for `runtime`: the free
    /// memory as it is, except for vLLM with a known total, which reserves
    /// [`VLLM_UTILIZATION`] × total at start: that reservation is the budget when it is free,
    /// and 0 (with a note) when it is not — vLLM refuses to start.
    pub fn from_free(free: u64, total: Option<u64>, runtime: Runtime) -> Budget {
        Budget::from_free_with(free, total, runtime, Utilization::VLLM_DEFAULT)
    }

    /// [`Budget::from_free`] with vLLM's `gpu_memory_utilization` given.
    pub fn from_free_with(
        free: u64,
        total: Option<u64>,
        runtime: Runtime,
        util: Utilization,
    ) -> Budget {
        runtime_rule(free, BudgetSource::Free, total, runtime, util)
    }

    /// The host's available RAM (`MemAvailable`) as the budget of a CPU-only run.
    pub fn host(available: u64) -> Budget {
        Budget {
            bytes: available,
            source: BudgetSource::HostAvailable,
            notes: Vec::new(),
        }
    }

    /// The budget of `device` for `runtime`: its free memory ([`Budget::from_free`]); for an
    /// integrated GPU that reports none, `host_available` (the host's `MemAvailable`, which it
    /// shares; see [`Budget::needs_host_available`]), under the same runtime rule.
    ///
    /// # Errors
    /// [`NoBudget::Unreadable`] when the device could not be read; [`NoBudget::UnknownFree`]
    /// when its free memory is unknown and no host figure stands in (with the device's
    /// [`Unknown`] for `memory…`, when it has one).
    pub fn for_device(
        device: &Device,
        host_available: Option<u64>,
        runtime: Runtime,
    ) -> Result<Budget, NoBudget> {
        Budget::for_device_with(device, host_available, runtime, Utilization::VLLM_DEFAULT)
    }

    /// [`Budget::for_device`] with vLLM's `gpu_memory_utilization` given.
    ///
    /// # Errors
    /// As [`Budget::for_device`].
    pub fn for_device_with(
        device: &Device,
        host_available: Option<u64>,
        runtime: Runtime,
        util: Utilization,
    ) -> Result<Budget, NoBudget> {
        if let Some(e) = &device.error {
            return Err(NoBudget::Unreadable {
                index: device.index,
                error: e.clone(),
            });
        }
        match pool_free(device, host_available) {
            Some(Ok(f)) => {
                let source = match f.from {
                    Origin::GttPool => BudgetSource::GttPool,
                    Origin::Free => BudgetSource::Free,
                    Origin::HostAvailable => BudgetSource::HostAvailable,
                    Origin::MetalWorkingSet => BudgetSource::MetalWorkingSet,
                };
                let mut b = runtime_rule(f.bytes, source, f.total, runtime, util);
                b.notes.extend(f.note);
                return Ok(b);
            }
            Some(Err(why)) => {
                return Err(NoBudget::UnknownFree {
                    index: device.index,
                    unknown: Some(
                        device
                            .unknown
                            .iter()
                            .find(|u| u.field == Field::PoolFreeBytes)
                            .cloned()
                            .unwrap_or_else(|| {
                                Unknown::new(Field::PoolFreeBytes, UnknownReason::Unsupported, why)
                            }),
                    ),
                });
            }
            None => {}
        }
        let total = device.memory.total_bytes;
        match own_free(device, host_available) {
            Some((host, Origin::HostAvailable)) => Ok(runtime_rule(
                host,
                BudgetSource::HostAvailable,
                total,
                runtime,
                util,
            )),
            Some((free, _)) => Ok(Budget::from_free_with(free, total, runtime, util)),
            None => Err(NoBudget::unknown_free(device)),
        }
    }

    /// Whether [`Budget::for_device`] needs the host's available RAM for `device`: a device
    /// whose pool is (partly) host RAM, or an integrated GPU that reports no free memory of its
    /// own. A caller reads host memory only then.
    pub fn needs_host_available(device: &Device) -> bool {
        device.pool.as_ref().is_some_and(|p| p.needs_host())
            || device.memory.free_bytes.is_none() && device.integrated == Some(true)
    }
}

/// `available` bytes from `source`, under `runtime`'s rule (see [`Budget::from_free`]).
fn runtime_rule(
    available: u64,
    source: BudgetSource,
    total: Option<u64>,
    runtime: Runtime,
    util: Utilization,
) -> Budget {
    let mut budget = Budget {
        bytes: available,
        source,
        notes: Vec::new(),
    };
    if let (Runtime::Vllm, Some(t)) = (runtime, total) {
        let reserve = util.of(t);
        budget.source = BudgetSource::VllmUtilization;
        if available < reserve {
            budget.notes.push(format!(
                "vLLM reserves gpu_memory_utilization {util} × total = {} at start, but only {} is free: it will refuse to start",
                gib(reserve),
                gib(available)
            ));
            budget.bytes = 0;
        } else {
            budget.bytes = reserve;
            // The memory snapshot is taken after the CUDA context exists (gpu_worker.py).
            if available - reserve < CUDA_CONTEXT {
                budget.notes.push(format!(
                    "only {} free beyond vLLM's reservation: its own CUDA context (0.3–0.6 GiB) is created before the check, so it may refuse to start",
                    gib(available - reserve)
                ));
            }
        }
    }
    budget
}

/// The high end of a CUDA context (llama.cpp PR #23604: 555 MiB).
const CUDA_CONTEXT: u64 = 600 << 20;

fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / GIB as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{
        DeviceMemory, DeviceRegion, Field, MemoryPool, PoolKind, PoolSource, Source, UnknownReason,
        Vendor,
    };

    const H100: u64 = 85_520_809_984;

    fn device(free: Option<u64>, total: Option<u64>, integrated: Option<bool>) -> Device {
        let mut d = Device::new(3, Vendor::Nvidia, Source::Nvml);
        d.memory = DeviceMemory::new(total, None, free, None);
        d.integrated = integrated;
        d
    }

    #[test]
    fn free_memory_as_it_is_except_for_vllm() {
        for runtime in [Runtime::Generic, Runtime::LlamaCpp] {
            let b = Budget::from_free(20 << 30, Some(80 << 30), runtime);
            assert_eq!(
                b,
                Budget {
                    bytes: 20 << 30,
                    source: BudgetSource::Free,
                    notes: Vec::new()
                }
            );
        }
        // vLLM without a total: nothing to apply 0.9 to.
        let b = Budget::from_free(20 << 30, None, Runtime::Vllm);
        assert_eq!((b.bytes, b.source), (20 << 30, BudgetSource::Free));
    }

    #[test]
    fn vllm_reserves_nine_tenths_of_the_total() {
        let reserve = H100 * 9 / 10;
        let idle = Budget::from_free(H100 - (1 << 30), Some(H100), Runtime::Vllm);
        assert_eq!(idle.bytes, reserve);
        assert_eq!(idle.source, BudgetSource::VllmUtilization);
        assert!(idle.notes.is_empty());
        // Exactly the reservation free: it starts.
        let exact = Budget::from_free(reserve, Some(H100), Runtime::Vllm);
        assert_eq!(
            (exact.bytes, exact.source),
            (reserve, BudgetSource::VllmUtilization)
        );
        // One byte less: it refuses to start.
        let busy = Budget::from_free(reserve - 1, Some(H100), Runtime::Vllm);
        assert_eq!(busy.bytes, 0);
        assert_eq!(busy.source, BudgetSource::VllmUtilization);
        assert_eq!(busy.notes.len(), 1);
        assert_eq!(
            busy.notes[0],
            "vLLM reserves gpu_memory_utilization 0.9 × total = 71.7 GiB at start, but only 71.7 GiB is free: it will refuse to start"
        );
    }

    #[test]
    fn a_given_budget_is_taken_as_it_is() {
        let b = Budget::given(24 << 30);
        assert_eq!((b.bytes, b.source), (24 << 30, BudgetSource::Given));
        assert!(b.notes.is_empty());
    }

    #[test]
    fn a_device_budget_is_its_free_memory() {
        let d = device(Some(20 << 30), Some(80 << 30), Some(false));
        assert!(!Budget::needs_host_available(&d));
        let b = Budget::for_device(&d, Some(1), Runtime::Generic).unwrap();
        assert_eq!((b.bytes, b.source), (20 << 30, BudgetSource::Free));
        let v = Budget::for_device(&d, None, Runtime::Vllm).unwrap();
        assert_eq!((v.bytes, v.source), (0, BudgetSource::VllmUtilization));
        // An integrated GPU with its own free figure uses it.
        let igpu = device(Some(5 << 30), None, Some(true));
        assert!(!Budget::needs_host_available(&igpu));
        let b = Budget::for_device(&igpu, Some(30 << 30), Runtime::Generic).unwrap();
        assert_eq!((b.bytes, b.source), (5 << 30, BudgetSource::Free));
    }

    #[test]
    fn an_integrated_gpu_without_free_memory_shares_the_hosts() {
        let d = device(None, None, Some(true));
        assert!(Budget::needs_host_available(&d));
        let b = Budget::for_device(&d, Some(24 << 30), Runtime::Generic).unwrap();
        assert_eq!((b.bytes, b.source), (24 << 30, BudgetSource::HostAvailable));
        // vLLM: no total, so the host figure stands.
        let v = Budget::for_device(&d, Some(24 << 30), Runtime::Vllm).unwrap();
        assert_eq!(v.source, BudgetSource::HostAvailable);
        // With a total, vLLM's rule applies to the shared RAM.
        let t = device(None, Some(32 << 30), Some(true));
        let v = Budget::for_device(&t, Some(30 << 30), Runtime::Vllm).unwrap();
        assert_eq!(
            (v.bytes, v.source),
            ((32u64 << 30) * 9 / 10, BudgetSource::VllmUtilization)
        );
        // No host figure: no budget.
        let e = Budget::for_device(&d, None, Runtime::Generic).unwrap_err();
        assert_eq!(
            e.to_string(),
            "device 3 does not report its free memory: not reported"
        );
    }

    #[test]
    fn no_budget_says_why() {
        let mut d = device(None, Some(80 << 30), Some(false));
        assert!(!Budget::needs_host_available(&d));
        // A discrete GPU never borrows the host's figure.
        let e = Budget::for_device(&d, Some(24 << 30), Runtime::Generic).unwrap_err();
        assert_eq!(
            e,
            NoBudget::UnknownFree {
                index: 3,
                unknown: None
            }
        );
        let why = Unknown::new(
            Field::MemoryFreeBytes,
            UnknownReason::DeviceError,
            "an internal driver error occurred",
        );
        d.unknown = vec![
            Unknown::new(Field::TelemetryPowerWatts, UnknownReason::Unsupported, "no"),
            why.clone(),
        ];
        let e = Budget::for_device(&d, None, Runtime::Generic).unwrap_err();
        assert_eq!(
            e,
            NoBudget::UnknownFree {
                index: 3,
                unknown: Some(why)
            }
        );
        assert_eq!(
            e.to_string(),
            "device 3 does not report its free memory: an internal driver error occurred"
        );
        // A device that could not be read at all, even with a free figure.
        let mut broken = device(Some(1), Some(2), None);
        broken.error = Some("GPU is lost".to_string());
        let e = Budget::for_device(&broken, None, Runtime::Generic).unwrap_err();
        assert_eq!(e.to_string(), "device 3 cannot be read: GPU is lost");
    }

    #[test]
    fn a_pool_decides_under_the_runtimes_rule() {
        const GIB: u64 = 1 << 30;
        // An APU (Strix Halo): GTT's free at most MemAvailable, vLLM on the GTT total.
        let mut apu = Device::new(1, Vendor::Amd, Source::Sysfs);
        apu.regions.insert(
            "vram".into(),
            DeviceRegion::new(Some(512 << 20), Some(148 << 20)),
        );
        apu.regions.insert(
            "gtt".into(),
            DeviceRegion::new(Some(65_867_993_088), Some(2 * GIB)),
        );
        apu.memory = DeviceMemory::new(Some(512 << 20), Some(148 << 20), Some(364 << 20), None);
        apu.pool = Some(MemoryPool::new(
            PoolKind::CarveOutPlusGtt,
            [
                PoolSource::VramPlusGtt,
                PoolSource::VramPlusGtt,
                PoolSource::VramPlusGttHostBound,
            ],
            "vddnb",
        ));
        assert!(Budget::needs_host_available(&apu));
        let b = Budget::for_device(&apu, Some(40 * GIB), Runtime::Generic).unwrap();
        assert_eq!((b.bytes, b.source), (40 * GIB, BudgetSource::GttPool));
        assert!(b.source.is_host_memory());
        assert_eq!(b.notes.len(), 1, "the larger pool is named");
        let v = Budget::for_device(&apu, Some(100 * GIB), Runtime::Vllm).unwrap();
        assert_eq!(v.bytes, 65_867_993_088 * 9 / 10);
        // MemAvailable unknown: no budget, with the pool's reason.
        let e = Budget::for_device(&apu, None, Runtime::Generic).unwrap_err();
        assert!(
            matches!(&e, NoBudget::UnknownFree { unknown: Some(u), .. } if u.field == Field::PoolFreeBytes),
            "{e:?}"
        );
        // Unified memory (GB10): MemAvailable, vLLM on MemTotal.
        let mut gb10 = device(None, None, Some(true));
        let mut p = MemoryPool::host_ram(PoolSource::ProcessSum, "NOT_SUPPORTED");
        p.total_bytes = Some(121 * GIB);
        p.free_bytes = Some(113 * GIB);
        gb10.pool = Some(p);
        let b = Budget::for_device(&gb10, Some(113 * GIB), Runtime::Generic).unwrap();
        assert_eq!(
            (b.bytes, b.source),
            (113 * GIB, BudgetSource::HostAvailable)
        );
        let v = Budget::for_device(&gb10, Some(113 * GIB), Runtime::Vllm).unwrap();
        assert_eq!(
            (v.bytes, v.source),
            (121 * GIB * 9 / 10, BudgetSource::VllmUtilization)
        );
        assert!(!BudgetSource::Free.is_host_memory());
    }

    #[test]
    fn source_names_are_the_json_contract() {
        assert_eq!(
            [
                BudgetSource::Free,
                BudgetSource::HostAvailable,
                BudgetSource::VllmUtilization,
                BudgetSource::Given,
                BudgetSource::GttPool,
                BudgetSource::MetalWorkingSet,
            ]
            .map(BudgetSource::as_str),
            [
                "free",
                "host_available",
                "vllm_utilization",
                "given",
                "gtt_pool",
                "metal_working_set"
            ]
        );
    }

    #[cfg(feature = "serde")]
    #[test]
    fn sources_serialise_as_the_json_contract() {
        for s in [
            BudgetSource::Free,
            BudgetSource::HostAvailable,
            BudgetSource::VllmUtilization,
            BudgetSource::Given,
            BudgetSource::GttPool,
            BudgetSource::MetalWorkingSet,
        ] {
            assert_eq!(
                serde_json::to_string(&s).unwrap(),
                format!("\"{}\"", s.as_str())
            );
        }
    }
}
