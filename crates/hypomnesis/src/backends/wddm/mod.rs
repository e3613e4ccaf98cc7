//! Windows GPU memory through WDDM: DXGI adapters and PDH's `GPU Process Memory` / `GPU Adapter
//! Memory` counters — the logic, platform-free, behind two traits so it is tested on every
//! platform with fakes; the Windows implementations of the traits are in `windows.rs` (FFI).
//!
//! Owns:
//! - [`Luid`], [`Adapter`] (a DXGI adapter: LUID, vendor, description, dedicated and shared
//!   memory) and [`VideoMemory`] (the caller's own usage, `QueryVideoMemoryInfo` LOCAL and
//!   NON_LOCAL);
//! - [`AdapterSource`] (DXGI) and [`CounterSource`] (PDH), the seams;
//! - NVML's devices joined to DXGI's adapters by PCI location ([`join`]);
//! - the folds: per-process rows summed over an adapter's physical segments and joined to
//!   adapters **by LUID, never by order** ([`process_rows`]); an adapter's spill [`Reading`]
//!   from `GPU Adapter Memory` ([`adapter_reading`]), all-or-nothing: one unreadable segment
//!   fails the sample (never zeroed, which would fake a falling edge).
//!
//! WDDM spill, as upstream defines it: dedicated-resident ≥ 85 % of DXGI's
//! `DedicatedVideoMemory` and shared-resident ≥ the first sample's + 256 MiB — the same
//! [`crate::spill`] fold as the Linux DRM spill, fed by [`PdhSpill`].
//!
//! Semantics (documented in SUPPORT.md): PDH `Dedicated Usage` is VidMm's committed dedicated
//! bytes per process (Task Manager's "Dedicated GPU memory"; it can exceed VRAM), `Shared Usage`
//! the resident system memory backing GPU allocations. Not compute-only: the compositor and
//! browsers are listed too.

pub(crate) mod devices;
// Used by the Windows FFI half only; tested everywhere.
#[cfg_attr(not(all(windows, feature = "dxgi")), allow(dead_code))]
pub(crate) mod join;
pub(crate) mod parse;
#[cfg(all(windows, feature = "dxgi"))]
#[allow(unsafe_code)]
pub(crate) mod windows;

use std::collections::BTreeMap;

use parse::Luid;

use crate::backends::spill::Reading;

/// Microsoft Basic Render Driver (a software adapter, never a GPU).
pub(crate) const VENDOR_MICROSOFT: u32 = 0x1414;

/// One DXGI adapter (`DXGI_ADAPTER_DESC1`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Adapter {
    pub luid: Luid,
    pub vendor_id: u32,
    /// `Description`, trailing NULs trimmed; `None` when empty.
    pub description: Option<String>,
    /// `DedicatedVideoMemory`: the VRAM capacity (0 for most integrated GPUs).
    pub dedicated_bytes: u64,
    /// `SharedSystemMemory`: the system memory the adapter may use.
    pub shared_bytes: u64,
    /// `DXGI_ADAPTER_FLAG_SOFTWARE`.
    pub software: bool,
}

impl Adapter {
    /// A hardware GPU: not software, not Microsoft's Basic Render Driver, with some memory.
    pub(crate) fn is_gpu(&self) -> bool {
        !self.software
            && self.vendor_id != VENDOR_MICROSOFT
            && (self.dedicated_bytes > 0 || self.shared_bytes > 0)
    }
}

/// One segment group of `QueryVideoMemoryInfo` for the calling process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(dead_code)]
pub(crate) struct SegmentUsage {
    /// `CurrentUsage`.
    pub usage_bytes: u64,
    /// `Budget`: what the OS lets this process use now.
    pub budget_bytes: u64,
}

/// The caller's own video memory on one adapter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(dead_code)]
pub(crate) struct VideoMemory {
    /// `DXGI_MEMORY_SEGMENT_GROUP_LOCAL` (VRAM on a discrete GPU).
    pub local: SegmentUsage,
    /// `DXGI_MEMORY_SEGMENT_GROUP_NON_LOCAL` (system memory mapped for the GPU).
    pub non_local: SegmentUsage,
}

/// DXGI: the adapters, and the caller's own usage on one.
pub(crate) trait AdapterSource {
    /// Every adapter, in DXGI's order (an adapter that cannot be described is skipped, not the
    /// end of the walk).
    fn adapters(&self) -> Result<Vec<Adapter>, String>;
    /// The caller's own usage on the adapter `luid`.
    #[allow(dead_code)]
    fn own_usage(&self, luid: Luid) -> Result<VideoMemory, String>;
}

/// One instance of a PDH counter set, with its two usage counters (`None`: unreadable).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CounterSample {
    pub instance: String,
    pub dedicated_bytes: Option<u64>,
    pub shared_bytes: Option<u64>,
}

/// PDH: one collection of a counter set's `Dedicated Usage` and `Shared Usage`.
pub(crate) trait CounterSource {
    /// Every instance of `GPU Process Memory`.
    fn process_memory(&mut self) -> Result<Vec<CounterSample>, String>;
    /// Every instance of `GPU Adapter Memory`.
    fn adapter_memory(&mut self) -> Result<Vec<CounterSample>, String>;
}

/// One process's GPU memory on one adapter, summed over the adapter's segments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProcessRow {
    pub pid: u32,
    /// The adapter's position in the list passed to [`process_rows`].
    pub adapter: usize,
    pub dedicated_bytes: u64,
    /// `None` when a segment's shared counter could not be read (unknown, not 0).
    pub shared_bytes: Option<u64>,
}

/// The per-process rows of `samples`, summed per (pid, adapter) over physical segments
/// (saturating) and joined to `adapters` by LUID. An instance that does not parse, names no
/// listed adapter, or whose dedicated counter is unreadable gives no row. Sorted by pid.
pub(crate) fn process_rows(samples: &[CounterSample], adapters: &[Adapter]) -> Vec<ProcessRow> {
    let mut rows: BTreeMap<(u32, usize), (u64, Option<u64>)> = BTreeMap::new();
    for s in samples {
        let Some((pid, luid, _phys)) = parse::process_instance(&s.instance) else {
            continue;
        };
        let Some(adapter) = adapters.iter().position(|a| a.luid == luid) else {
            continue;
        };
        let Some(dedicated) = s.dedicated_bytes else {
            continue;
        };
        let e = rows.entry((pid, adapter)).or_insert((0, Some(0)));
        e.0 = e.0.saturating_add(dedicated);
        e.1 = e.1.zip(s.shared_bytes).map(|(a, b)| a.saturating_add(b));
    }
    rows.into_iter()
        .map(
            |((pid, adapter), (dedicated_bytes, shared_bytes))| ProcessRow {
                pid,
                adapter,
                dedicated_bytes,
                shared_bytes,
            },
        )
        .collect()
}

/// The spill reading of adapter `luid` from `GPU Adapter Memory`: dedicated and shared summed
/// over its segments, with DXGI's dedicated capacity as the limit. `None` when no segment
/// matches or any matching segment has an unreadable counter (the whole sample is skipped).
pub(crate) fn adapter_reading(
    samples: &[CounterSample],
    luid: Luid,
    limit_bytes: u64,
) -> Option<Reading> {
    let mut any = false;
    let (mut dedicated, mut shared) = (0u64, 0u64);
    for s in samples {
        match parse::adapter_instance(&s.instance) {
            Some((l, _)) if l == luid => {
                dedicated = dedicated.saturating_add(s.dedicated_bytes?);
                shared = shared.saturating_add(s.shared_bytes?);
                any = true;
            }
            _ => {}
        }
    }
    any.then_some(Reading {
        dedicated_bytes: dedicated,
        shared_bytes: shared,
        limit_bytes,
    })
}

/// A [`crate::spill`] source over PDH's `GPU Adapter Memory` for one adapter.
pub(crate) struct PdhSpill<C> {
    pub counters: C,
    pub luid: Luid,
    /// DXGI `DedicatedVideoMemory` (PDH has no limit counter).
    pub limit_bytes: u64,
}

impl<C: CounterSource> PdhSpill<C> {
    /// One reading, or `None` when this sample failed (skipped, never folded as zeros).
    pub(crate) fn sample(&mut self) -> Option<Reading> {
        let samples = self.counters.adapter_memory().ok()?;
        adapter_reading(&samples, self.luid, self.limit_bytes)
    }
}

// Its fakes are shared with the spill fold's tests (`compat::spill::fold`).
#[cfg(test)]
pub(crate) mod tests;
