//! A device's memory pool: what the GPU can really allocate from, beside the driver's own
//! `memory` figures. [`MemoryPool`] (kind, total / used / free, where each figure comes from,
//! the evidence for the kind), [`PoolKind`] and [`PoolSource`]. The rules every reader of a
//! pool shares are beside the types they read: a row's share of its device's pool
//! (`GpuProcess::pool_bytes`, `ProcessRegions::vram_plus_gtt_bytes`) and a device's pool kind
//! where it has no pool of its own (`Device::pool_kind`). See `docs/memory-model.md`, "Memory
//! pools".
//!
//! A discrete GPU whose `memory` is its own VRAM has no `pool` (the JSON object is absent):
//! `memory` is its pool. The other kinds — an AMD APU's carve-out plus GTT, a GPU that
//! allocates host RAM (NVIDIA GB10-class, Intel iGPUs, SoC GPUs, Apple Silicon), a discrete
//! Intel card whose use is only known as the sum of its clients — carry one, so an old reader
//! of `memory` sees what it always saw.

#[cfg(feature = "serde")]
use serde::{Deserialize, Serialize};

use super::spelling::spelled;

spelled! {
    /// What a device's memory pool is.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    #[non_exhaustive]
    pub enum PoolKind {
        /// Its own memory: a discrete GPU's VRAM or HBM (NVIDIA dGPUs and Grace Hopper-class
        /// parts that report their HBM, discrete AMD and Intel cards).
        Dedicated = "dedicated",
        /// An AMD APU: a BIOS carve-out (amdgpu's VRAM manager, outside the host's `MemTotal`)
        /// plus GTT (host RAM the GPU maps, inside it).
        CarveOutPlusGtt = "carve_out_plus_gtt",
        /// The host's RAM, allocated directly: NVIDIA GB10-class parts (NVML reports no memory
        /// of their own), Intel integrated GPUs, SoC GPUs, Apple Silicon.
        UnifiedHost = "unified_host",
    }
}

impl PoolKind {
    /// Words for a terminal: `dedicated VRAM`, `carve-out + GTT`, `unified with host RAM`.
    pub const fn label(self) -> &'static str {
        match self {
            PoolKind::Dedicated => "dedicated VRAM",
            PoolKind::CarveOutPlusGtt => "carve-out + GTT",
            PoolKind::UnifiedHost => "unified with host RAM",
        }
    }

    /// Whether the GPU's memory (all of it, or its GTT part) is host RAM: what it holds is
    /// already in the host's used memory (`MemTotal − MemAvailable`), never in addition to it.
    pub const fn shares_host_memory(self) -> bool {
        matches!(self, PoolKind::CarveOutPlusGtt | PoolKind::UnifiedHost)
    }
}

spelled! {
    /// Where one figure of a [`MemoryPool`] comes from.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    #[non_exhaustive]
    pub enum PoolSource {
        /// The driver's own device-wide figure (as in the device's `memory`).
        Device = "device",
        /// amdgpu's VRAM and GTT managers added (`mem_info_vram_*` + `mem_info_gtt_*`).
        VramPlusGtt = "vram_plus_gtt",
        /// VRAM plus GTT, the GTT part bounded by the host's RAM (GTT pages are host RAM): a
        /// total's at most `MemTotal`, free's (free VRAM plus free GTT) at most `MemAvailable`.
        VramPlusGttHostBound = "vram_plus_gtt_host_bound",
        /// The host's RAM (`MemTotal`; macOS `hw.memsize`).
        HostTotal = "host_total",
        /// The host's available RAM (`MemAvailable`; macOS free + inactive + purgeable pages).
        HostAvailable = "host_available",
        /// The sum of the driver's per-process figures (NVML `usedGpuMemory`): memory the
        /// driver holds outside processes is not in it.
        ProcessSum = "process_sum",
        /// The sum of the device's DRM clients' resident figures (fdinfo), over the clients
        /// this user can read: kernel objects and unreadable clients are not in it.
        ClientSum = "client_sum",
        /// A sysfs VRAM size file (xe `tile*/physical_vram_size_bytes`, i915
        /// `lmem_total_bytes`).
        VramSizeFile = "vram_size_file",
        /// Total minus used.
        TotalMinusUsed = "total_minus_used",
        /// Metal's `recommendedMaxWorkingSetSize`: the working set the GPU may use without
        /// hurting performance.
        MetalWorkingSet = "metal_working_set",
        /// IOKit `PerformanceStatistics` "Alloc system memory": system memory allocated to GPU
        /// clients.
        IokitAlloc = "iokit_alloc",
        /// The working set minus what GPU clients allocated, at most the host's available RAM.
        WorkingSetMinusAllocHostBound = "working_set_minus_alloc_host_bound",
    }
}

impl PoolSource {
    /// Whether a figure from this source is a sum of per-process or per-client figures, and so
    /// a lower bound of what the device holds.
    pub const fn is_sum(self) -> bool {
        matches!(self, PoolSource::ProcessSum | PoolSource::ClientSum)
    }

    /// Whether a figure from this source needs the host's memory figures.
    pub const fn needs_host(self) -> bool {
        matches!(
            self,
            PoolSource::HostTotal
                | PoolSource::HostAvailable
                | PoolSource::VramPlusGttHostBound
                | PoolSource::WorkingSetMinusAllocHostBound
        )
    }
}

/// The memory a device's GPU can really allocate from. Each figure is `None` (JSON `null`)
/// with a `pool.<field>` entry ([`Field::PoolTotalBytes`](crate::Field::PoolTotalBytes), …) in
/// the device's `unknown` when it could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
#[non_exhaustive]
pub struct MemoryPool {
    /// What the pool is.
    pub kind: PoolKind,
    /// Its size.
    pub total_bytes: Option<u64>,
    /// In use.
    pub used_bytes: Option<u64>,
    /// What can still be allocated.
    pub free_bytes: Option<u64>,
    /// Where `total_bytes` comes from.
    pub total_source: PoolSource,
    /// Where `used_bytes` comes from.
    pub used_source: PoolSource,
    /// Where `free_bytes` comes from.
    pub free_source: PoolSource,
    /// `used_bytes` is a sum of per-process or per-client figures: a lower bound (what the
    /// driver or kernel holds outside them, and clients this user cannot read, are missing).
    pub used_is_lower_bound: bool,
    /// The host's available RAM that bounded `free_bytes`, when the pool is host RAM.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub host_available_bytes: Option<u64>,
    /// Apple Silicon: IOKit's "In use system memory", the part of `used_bytes` resident for
    /// the GPU now (falls near 0 when it idles).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub active_bytes: Option<u64>,
    /// Why the pool is of this kind (the signal read, and where the rule is documented).
    pub evidence: String,
}

impl MemoryPool {
    /// A pool of `kind` whose figures come from these sources, none read yet.
    pub fn new(
        kind: PoolKind,
        [total_source, used_source, free_source]: [PoolSource; 3],
        evidence: impl Into<String>,
    ) -> MemoryPool {
        MemoryPool {
            kind,
            total_bytes: None,
            used_bytes: None,
            free_bytes: None,
            total_source,
            used_source,
            free_source,
            used_is_lower_bound: used_source.is_sum(),
            host_available_bytes: None,
            active_bytes: None,
            evidence: evidence.into(),
        }
    }

    /// The host's RAM as a GPU's pool (unified memory): total `MemTotal`, free `MemAvailable`,
    /// used from `used_source` (a sum of the driver's per-process or per-client figures).
    pub fn host_ram(used_source: PoolSource, evidence: impl Into<String>) -> MemoryPool {
        MemoryPool::new(
            PoolKind::UnifiedHost,
            [
                PoolSource::HostTotal,
                used_source,
                PoolSource::HostAvailable,
            ],
            evidence,
        )
    }

    /// Apple Silicon's pool: the Metal working set (total), what GPU clients allocated (IOKit's
    /// "Alloc system memory", used), the working set less that at most the available RAM
    /// (free).
    pub fn working_set(evidence: impl Into<String>) -> MemoryPool {
        MemoryPool::new(
            PoolKind::UnifiedHost,
            [
                PoolSource::MetalWorkingSet,
                PoolSource::IokitAlloc,
                PoolSource::WorkingSetMinusAllocHostBound,
            ],
            evidence,
        )
    }

    /// Whether completing it needs the host's memory figures.
    pub fn needs_host(&self) -> bool {
        [self.total_source, self.used_source, self.free_source]
            .iter()
            .any(|s| s.needs_host())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_are_the_json_contract() {
        assert_eq!(
            [
                PoolKind::Dedicated,
                PoolKind::CarveOutPlusGtt,
                PoolKind::UnifiedHost
            ]
            .map(PoolKind::as_str),
            ["dedicated", "carve_out_plus_gtt", "unified_host"]
        );
        assert_eq!(PoolKind::CarveOutPlusGtt.to_string(), "carve_out_plus_gtt");
        assert_eq!(
            PoolSource::WorkingSetMinusAllocHostBound.to_string(),
            "working_set_minus_alloc_host_bound"
        );
        assert!(PoolKind::UnifiedHost.shares_host_memory());
        assert!(PoolKind::CarveOutPlusGtt.shares_host_memory());
        assert!(!PoolKind::Dedicated.shares_host_memory());
    }

    #[test]
    fn a_sum_is_a_lower_bound_and_host_sources_need_the_host() {
        let p = MemoryPool::new(
            PoolKind::UnifiedHost,
            [
                PoolSource::HostTotal,
                PoolSource::ProcessSum,
                PoolSource::HostAvailable,
            ],
            "e",
        );
        assert!(p.used_is_lower_bound);
        assert!(p.needs_host());
        let d = MemoryPool::new(
            PoolKind::Dedicated,
            [
                PoolSource::VramSizeFile,
                PoolSource::Device,
                PoolSource::TotalMinusUsed,
            ],
            "e",
        );
        assert!(!d.used_is_lower_bound);
        assert!(!d.needs_host());
    }

    #[cfg(feature = "serde")]
    #[test]
    fn a_pool_serialises_with_its_sources() {
        let mut p = MemoryPool::new(
            PoolKind::UnifiedHost,
            [
                PoolSource::HostTotal,
                PoolSource::ProcessSum,
                PoolSource::HostAvailable,
            ],
            "NVML memory NOT_SUPPORTED",
        );
        p.total_bytes = Some(10);
        let v = serde_json::to_value(&p).unwrap();
        assert_eq!(v["kind"], "unified_host");
        assert_eq!(v["total_bytes"], 10);
        assert!(v["used_bytes"].is_null());
        assert_eq!(v["used_source"], "process_sum");
        assert_eq!(v["used_is_lower_bound"], true);
        assert!(v.get("host_available_bytes").is_none());
        assert!(v.get("active_bytes").is_none());
    }
}
