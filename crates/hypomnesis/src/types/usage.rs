//! Memory regions and engine use, for devices and processes read through DRM (AMD, Intel and
//! other kernel drivers). One model for every vendor: driver region names are mapped onto
//! `vram` (device-local memory), `gtt` (system memory mapped for the GPU) and `system` (other
//! system memory the driver accounts, including stolen memory). See `docs/memory-model.md`.

use std::collections::BTreeMap;

#[cfg(feature = "serde")]
use serde::{Deserialize, Serialize};

/// One region's figures for a process, in bytes; `None` where the driver does not say.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
#[non_exhaustive]
pub struct RegionUsage {
    /// All buffers created in the region, resident or not (`drm-total-*`).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub total_bytes: Option<u64>,
    /// Buffers whose backing store is present in the region (`drm-resident-*`, or its
    /// deprecated alias `drm-memory-*`).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub resident_bytes: Option<u64>,
    /// Buffers shared with another client (`drm-shared-*`).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub shared_bytes: Option<u64>,
    /// Resident buffers the driver may discard (`drm-purgeable-*`).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub purgeable_bytes: Option<u64>,
    /// Resident buffers busy on an engine (`drm-active-*`).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub active_bytes: Option<u64>,
    /// Buffers evicted from the region (`drm-evicted-*`, `amd-evicted-*`).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub evicted_bytes: Option<u64>,
}

impl RegionUsage {
    /// Resident bytes where printed, else the total.
    pub fn resident_or_total(&self) -> Option<u64> {
        self.resident_bytes.or(self.total_bytes)
    }

    /// Adds another region's figures, field by field (a field stays `None` only when neither
    /// side has it).
    #[must_use]
    pub fn plus(self, o: RegionUsage) -> RegionUsage {
        let add = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
        };
        RegionUsage {
            total_bytes: add(self.total_bytes, o.total_bytes),
            resident_bytes: add(self.resident_bytes, o.resident_bytes),
            shared_bytes: add(self.shared_bytes, o.shared_bytes),
            purgeable_bytes: add(self.purgeable_bytes, o.purgeable_bytes),
            active_bytes: add(self.active_bytes, o.active_bytes),
            evicted_bytes: add(self.evicted_bytes, o.evicted_bytes),
        }
    }
}

/// A process's memory on one device, per region.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
#[non_exhaustive]
pub struct ProcessRegions {
    /// Device-local memory (amdgpu `vram`, i915 `local*`, xe `vram*`).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub vram: Option<RegionUsage>,
    /// System memory mapped through the GPU's address translation (amdgpu/xe `gtt`).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub gtt: Option<RegionUsage>,
    /// Other system memory (amdgpu `cpu`, i915 `system*`, xe `system`, stolen memory, and the
    /// generic `memory` region of msm, panfrost, v3d…).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub system: Option<RegionUsage>,
}

impl ProcessRegions {
    /// True when no region was reported.
    pub fn is_empty(&self) -> bool {
        self.vram.is_none() && self.gtt.is_none() && self.system.is_none()
    }

    /// The `used_bytes` of a DRM row: device-local resident bytes (total where resident is not
    /// printed); without a VRAM region (an integrated GPU) the resident GTT + system bytes.
    pub fn used_bytes(&self) -> Option<u64> {
        match self.vram {
            Some(v) => v.resident_or_total(),
            None => {
                let parts: Vec<u64> = [self.gtt, self.system]
                    .iter()
                    .flatten()
                    .filter_map(RegionUsage::resident_or_total)
                    .collect();
                (!parts.is_empty()).then(|| parts.iter().fold(0u64, |a, b| a.saturating_add(*b)))
            }
        }
    }

    /// Adds another set of regions.
    #[must_use]
    pub fn plus(self, o: ProcessRegions) -> ProcessRegions {
        let add = |a: Option<RegionUsage>, b: Option<RegionUsage>| match (a, b) {
            (Some(a), Some(b)) => Some(a.plus(b)),
            (a, b) => a.or(b),
        };
        ProcessRegions {
            vram: add(self.vram, o.vram),
            gtt: add(self.gtt, o.gtt),
            system: add(self.system, o.system),
        }
    }
}

/// One engine class's use by a process, over the interval between two samples.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
#[non_exhaustive]
pub struct EngineUsage {
    /// Percent of the class's capacity this process kept busy (0–100 per engine class).
    pub busy_percent: f64,
}

/// Engine use by class name (`gfx`, `compute`, `render`, `rcs`, `ccs`, …).
pub type Engines = BTreeMap<String, EngineUsage>;

/// Device-wide figures of one memory region (amdgpu `mem_info_*`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
#[non_exhaustive]
pub struct DeviceRegion {
    /// Size of the region.
    pub total_bytes: Option<u64>,
    /// In use by all clients and the driver.
    pub used_bytes: Option<u64>,
}

impl DeviceRegion {
    /// A region from its two figures.
    pub const fn new(total_bytes: Option<u64>, used_bytes: Option<u64>) -> Self {
        DeviceRegion {
            total_bytes,
            used_bytes,
        }
    }
}

/// Device-wide memory, in bytes.
///
/// NVIDIA figures follow the R510+ (`nvmlMemory_v2_t`) semantics that `nvidia-smi` shows:
/// `used` excludes `reserved`, so `used + free + reserved = total`. On drivers older than R510
/// only the v1 figures exist: `used` then includes the reservation and `reserved_bytes` is
/// `None`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
#[non_exhaustive]
pub struct DeviceMemory {
    /// Installed memory the driver reports.
    pub total_bytes: Option<u64>,
    /// Memory allocated by processes and the driver (excluding `reserved_bytes`).
    pub used_bytes: Option<u64>,
    /// Memory available for allocation.
    pub free_bytes: Option<u64>,
    /// Memory reserved by the driver and firmware, never available to processes.
    pub reserved_bytes: Option<u64>,
}

impl DeviceMemory {
    /// Device memory from its four figures.
    pub const fn new(
        total_bytes: Option<u64>,
        used_bytes: Option<u64>,
        free_bytes: Option<u64>,
        reserved_bytes: Option<u64>,
    ) -> Self {
        DeviceMemory {
            total_bytes,
            used_bytes,
            free_bytes,
            reserved_bytes,
        }
    }
}

impl ProcessRegions {
    /// A DRM row's footprint on a carve-out + GTT device (an AMD APU): its resident VRAM
    /// (carve-out) plus resident GTT bytes (totals where resident is not printed), the two
    /// regions of the device's pool; `None` when neither is printed.
    pub fn vram_plus_gtt_bytes(&self) -> Option<u64> {
        let parts: Vec<u64> = [self.vram, self.gtt]
            .iter()
            .flatten()
            .filter_map(RegionUsage::resident_or_total)
            .collect();
        (!parts.is_empty()).then(|| parts.iter().fold(0u64, |a, b| a.saturating_add(*b)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(total: Option<u64>, resident: Option<u64>) -> RegionUsage {
        RegionUsage {
            total_bytes: total,
            resident_bytes: resident,
            ..RegionUsage::default()
        }
    }

    #[test]
    fn used_is_vram_resident_else_total() {
        let p = ProcessRegions {
            vram: Some(r(Some(100), Some(60))),
            gtt: Some(r(Some(1000), Some(1000))),
            system: None,
        };
        assert_eq!(p.used_bytes(), Some(60));
        let p = ProcessRegions {
            vram: Some(r(Some(100), None)),
            ..ProcessRegions::default()
        };
        assert_eq!(p.used_bytes(), Some(100));
    }

    #[test]
    fn integrated_used_is_gtt_plus_system() {
        let p = ProcessRegions {
            vram: None,
            gtt: Some(r(None, Some(5))),
            system: Some(r(Some(7), None)),
        };
        assert_eq!(p.used_bytes(), Some(12));
        assert_eq!(
            ProcessRegions::default().used_bytes(),
            None,
            "no memory stats: unknown"
        );
    }

    #[test]
    fn adding_keeps_unknown_apart_from_zero() {
        let a = r(Some(1), None);
        let b = r(None, None);
        let s = a.plus(b);
        assert_eq!(s.total_bytes, Some(1));
        assert_eq!(s.resident_bytes, None);
    }

    #[test]
    fn carve_out_plus_gtt_footprint() {
        let r = |resident: Option<u64>, total: Option<u64>| RegionUsage {
            resident_bytes: resident,
            total_bytes: total,
            ..RegionUsage::default()
        };
        // nvtop #492: a 24 GB model in GTT, 5 MiB in VRAM.
        let p = ProcessRegions {
            vram: Some(r(Some(5348 << 10), None)),
            gtt: Some(r(Some(25_258_000 << 10), None)),
            system: Some(r(Some(0), None)),
        };
        assert_eq!(p.vram_plus_gtt_bytes(), Some((5348 + 25_258_000) << 10));
        assert_eq!(p.used_bytes(), Some(5348 << 10), "the carve-out part only");
        let only_gtt = ProcessRegions {
            gtt: Some(r(None, Some(7))),
            ..ProcessRegions::default()
        };
        assert_eq!(only_gtt.vram_plus_gtt_bytes(), Some(7));
        let only_system = ProcessRegions {
            system: Some(r(Some(9), None)),
            ..ProcessRegions::default()
        };
        assert_eq!(only_system.vram_plus_gtt_bytes(), None, "unknown, not 0");
    }
}
