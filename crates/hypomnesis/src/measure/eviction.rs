//! [`TreeEviction`]: how much of a set of processes' GPU memory the kernel moved out of VRAM,
//! over time, per DRM device — the Linux meaning of spill for one command (`hmn spill`), from the
//! processes' own DRM clients rather than the whole device.
//!
//! Each [`TreeEviction::observe`] takes the rows of the followed processes (from
//! [`Probe::gpu_usage`](crate::Probe::gpu_usage), filtered by the caller) and, per device, adds
//! up their clients' figures (each client is counted once, on its owner's row — see
//! `docs/memory-model.md`):
//! - **evicted**: buffers that want VRAM but live elsewhere now (`drm-evicted-vram*`, amdgpu's
//!   `amd-evicted-vram`); unknown when no client prints such a key (i915, xe, amdgpu before
//!   Linux 6.4);
//! - **GTT resident**: the clients' buffers in system memory mapped for the GPU
//!   (`drm-resident-gtt`), where evicted buffers land; its growth over the first reading is the
//!   fallback signal where no evicted key exists;
//! - **VRAM resident** (`drm-resident-vram*`).
//!
//! Rows without DRM regions (NVIDIA, KFD-only compute rows, rows whose clients another process
//! owns) add nothing. Pure: no I/O.

use std::collections::BTreeMap;

#[cfg(feature = "serde")]
use serde::Serialize;

use crate::types::{GpuProcess, RegionUsage};

/// One device's figures for the followed processes over a run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize))]
#[non_exhaustive]
pub struct DeviceEviction {
    /// The device.
    pub device_index: u32,
    /// Readings in which the processes held a client with memory figures on this device.
    pub observations: u64,
    /// Bytes evicted from VRAM at the first such reading; `None` when no client reports it.
    pub baseline_evicted_bytes: Option<u64>,
    /// Largest bytes evicted from VRAM; `None` when no client reports it.
    pub peak_evicted_bytes: Option<u64>,
    /// GTT-resident bytes at the first reading; `None` when the clients have no GTT region.
    pub baseline_gtt_bytes: Option<u64>,
    /// Largest GTT-resident bytes; `None` when the clients have no GTT region.
    pub peak_gtt_bytes: Option<u64>,
    /// Largest VRAM-resident bytes; `None` when the clients have no VRAM region.
    pub peak_vram_bytes: Option<u64>,
}

impl DeviceEviction {
    /// How far GTT-resident bytes rose above the first reading (0 when they never did).
    pub fn gtt_growth_bytes(&self) -> Option<u64> {
        Some(
            self.peak_gtt_bytes?
                .saturating_sub(self.baseline_gtt_bytes?),
        )
    }

    /// How far evicted bytes rose above the first reading.
    pub fn evicted_growth_bytes(&self) -> Option<u64> {
        Some(
            self.peak_evicted_bytes?
                .saturating_sub(self.baseline_evicted_bytes?),
        )
    }
}

/// Per-device eviction of a set of processes over time. See the [module docs](self).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TreeEviction {
    devices: BTreeMap<u32, DeviceEviction>,
}

/// One reading's sums on one device.
#[derive(Default)]
struct Sums {
    evicted: Option<u64>,
    gtt: Option<u64>,
    vram: Option<u64>,
}

fn add(acc: Option<u64>, v: Option<u64>) -> Option<u64> {
    match (acc, v) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
    }
}

fn max(acc: Option<u64>, v: Option<u64>) -> Option<u64> {
    match (acc, v) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

impl TreeEviction {
    /// Nothing seen yet.
    pub fn new() -> TreeEviction {
        TreeEviction::default()
    }

    /// Folds one reading: `rows` are the followed processes' rows of one listing.
    pub fn observe<'a>(&mut self, rows: impl IntoIterator<Item = &'a GpuProcess>) {
        let mut sums: BTreeMap<u32, Sums> = BTreeMap::new();
        for row in rows {
            let Some(regions) = row.regions else {
                continue;
            };
            let s = sums.entry(row.device_index).or_default();
            let vram = regions.vram.unwrap_or_default();
            s.evicted = add(s.evicted, vram.evicted_bytes);
            s.vram = add(s.vram, regions.vram.and_then(|v| v.resident_or_total()));
            s.gtt = add(
                s.gtt,
                regions
                    .gtt
                    .as_ref()
                    .and_then(RegionUsage::resident_or_total),
            );
        }
        for (device, s) in sums {
            let d = self
                .devices
                .entry(device)
                .or_insert_with(|| DeviceEviction {
                    device_index: device,
                    baseline_evicted_bytes: s.evicted,
                    baseline_gtt_bytes: s.gtt,
                    ..DeviceEviction::default()
                });
            d.observations += 1;
            d.baseline_evicted_bytes = d.baseline_evicted_bytes.or(s.evicted);
            d.baseline_gtt_bytes = d.baseline_gtt_bytes.or(s.gtt);
            d.peak_evicted_bytes = max(d.peak_evicted_bytes, s.evicted);
            d.peak_gtt_bytes = max(d.peak_gtt_bytes, s.gtt);
            d.peak_vram_bytes = max(d.peak_vram_bytes, s.vram);
        }
    }

    /// Every device the processes held memory on, by index.
    pub fn devices(&self) -> Vec<DeviceEviction> {
        self.devices.values().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{ProcessKind, ProcessRegions, Source};

    const MIB: u64 = 1 << 20;

    fn region(resident: u64, evicted: Option<u64>) -> RegionUsage {
        RegionUsage {
            resident_bytes: Some(resident),
            evicted_bytes: evicted,
            ..RegionUsage::default()
        }
    }

    fn row(pid: u32, device: u32, vram: RegionUsage, gtt: Option<u64>) -> GpuProcess {
        let mut r = GpuProcess::new(pid, device, ProcessKind::Graphics, Source::Fdinfo);
        r.regions = Some(ProcessRegions {
            vram: Some(vram),
            gtt: gtt.map(|g| region(g, None)),
            system: None,
        });
        r
    }

    #[test]
    fn evicted_and_gtt_grow_per_device() {
        let mut t = TreeEviction::new();
        t.observe(&[
            row(1, 1, region(512 * MIB, Some(0)), Some(2 * MIB)),
            row(2, 1, region(100 * MIB, None), Some(MIB)),
        ]);
        t.observe(&[
            row(1, 1, region(300 * MIB, Some(212 * MIB)), Some(214 * MIB)),
            row(2, 1, region(100 * MIB, None), Some(MIB)),
        ]);
        t.observe(&[row(1, 1, region(512 * MIB, Some(0)), Some(2 * MIB))]);
        let d = &t.devices()[0];
        assert_eq!(d.device_index, 1);
        assert_eq!(d.observations, 3);
        assert_eq!(d.baseline_evicted_bytes, Some(0));
        assert_eq!(d.peak_evicted_bytes, Some(212 * MIB));
        assert_eq!(d.evicted_growth_bytes(), Some(212 * MIB));
        assert_eq!(d.baseline_gtt_bytes, Some(3 * MIB));
        assert_eq!(d.peak_gtt_bytes, Some(215 * MIB));
        assert_eq!(d.gtt_growth_bytes(), Some(212 * MIB));
        assert_eq!(d.peak_vram_bytes, Some(612 * MIB));
    }

    #[test]
    fn unknown_stays_unknown() {
        let mut t = TreeEviction::new();
        // i915: no evicted key, no GTT region.
        t.observe(&[row(1, 0, region(64 * MIB, None), None)]);
        let d = &t.devices()[0];
        assert_eq!(d.peak_evicted_bytes, None);
        assert_eq!(d.evicted_growth_bytes(), None);
        assert_eq!(d.gtt_growth_bytes(), None);
        assert_eq!(d.peak_vram_bytes, Some(64 * MIB));
    }

    #[test]
    fn rows_without_regions_add_nothing() {
        let mut t = TreeEviction::new();
        let nvidia = GpuProcess::new(1, 0, ProcessKind::Compute, Source::Nvml);
        t.observe(&[nvidia]);
        assert!(t.devices().is_empty());
        // A device first seen later takes its baseline then.
        t.observe(&[row(1, 2, region(MIB, Some(5)), Some(7))]);
        let d = &t.devices()[0];
        assert_eq!(
            (d.baseline_evicted_bytes, d.baseline_gtt_bytes),
            (Some(5), Some(7))
        );
        assert_eq!(d.observations, 1);
    }
}
