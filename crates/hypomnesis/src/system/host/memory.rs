//! What the host readers return, on every platform: [`HostMemory`] (the machine's RAM),
//! [`ProcessMemory`] (one process's RSS, peak, swap, PSS) and [`MemoryDetail`] (how much to
//! read).

use crate::types::Unknown;

#[cfg(feature = "serde")]
use serde::{Deserialize, Serialize};

/// The machine's RAM, from `/proc/meminfo`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
#[non_exhaustive]
pub struct HostMemory {
    /// `MemTotal`: usable RAM.
    pub memory_total_bytes: u64,
    /// `MemAvailable`: what can be allocated without swapping (Linux 3.14+). On older kernels
    /// this is `MemFree`, a lower bound.
    pub memory_available_bytes: u64,
    /// `MemFree`: RAM not used at all (excludes reclaimable cache).
    pub memory_free_bytes: u64,
    /// `SwapTotal`.
    pub swap_total_bytes: Option<u64>,
    /// `SwapFree`.
    pub swap_free_bytes: Option<u64>,
}

/// How much to read about a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum MemoryDetail {
    /// RSS, peak RSS and swap from `status` (cheap).
    #[default]
    Basic,
    /// Also PSS from `smaps_rollup` (walks the address space; milliseconds to hundreds of
    /// milliseconds for a large process, and it briefly holds the target's mmap lock).
    WithPss,
}

/// One process's host memory, in bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize))]
#[non_exhaustive]
pub struct ProcessMemory {
    /// The process id.
    pub pid: u32,
    /// `VmRSS`: resident set size. `None` for kernel threads.
    pub rss_bytes: Option<u64>,
    /// `VmHWM`: peak resident set size since the process started (or since `clear_refs`).
    pub peak_rss_bytes: Option<u64>,
    /// `VmSwap`: anonymous memory swapped out.
    pub swap_bytes: Option<u64>,
    /// `Pss` from `smaps_rollup`: shared pages divided among their users. Only read with
    /// [`MemoryDetail::WithPss`].
    pub pss_bytes: Option<u64>,
    /// Private bytes (commit charge; Windows `PrivateUsage`). `None` on other platforms, where
    /// this figure is not read (not an unknown: not asked for).
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub private_bytes: Option<u64>,
    /// Fields that are `None` for a reason other than "not asked for".
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Vec::is_empty"))]
    pub unknown: Vec<Unknown>,
}
