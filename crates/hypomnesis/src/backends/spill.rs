//! What spill is measured from, on every platform: one device's [`Reading`] (dedicated bytes,
//! shared bytes, the dedicated limit) and the [`SpillSource`] that gives them over time — the
//! DRM source in `drm::spill` (Linux), PDH's in `wddm` (Windows). Upstream's tracker folds them
//! (`compat::spill`).

use std::panic::{RefUnwindSafe, UnwindSafe};

/// One successful reading of a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reading {
    /// Bytes resident in dedicated memory (VRAM).
    pub dedicated_bytes: u64,
    /// Bytes of GPU allocations resident in shared system memory.
    pub shared_bytes: u64,
    /// Dedicated capacity; 0 when unknown.
    pub limit_bytes: u64,
}

/// A device's readings over time.
pub(crate) trait SpillSource: Send + Sync + UnwindSafe + RefUnwindSafe {
    /// One reading, or `None` when this one failed (it is skipped, never folded as zeros).
    fn read(&mut self) -> Option<Reading>;
}

/// Readings given in advance (tests of the tracker without a device).
#[cfg(test)]
pub(crate) struct Scripted(pub std::collections::VecDeque<Option<Reading>>);

#[cfg(test)]
impl SpillSource for Scripted {
    fn read(&mut self) -> Option<Reading> {
        self.0.pop_front().flatten()
    }
}
