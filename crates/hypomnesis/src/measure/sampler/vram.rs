//! The target's device memory in one sample when not every figure could be read: the figure
//! that stands (a lower bound, or none) and why ([`PartialVram`], kept per device in the
//! report). Unknown is never 0: a device whose process list failed, or whose rows of the target
//! all lack a figure, has no tree figure in that sample.

use crate::types::{Field, GpuProcess, VramSum};

#[cfg(feature = "serde")]
use serde::Serialize;

/// Why the target's device memory on a device could not be fully counted, and in how many
/// samples ([`super::SamplerReport::vram_unknown`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize))]
#[non_exhaustive]
pub struct PartialVram {
    /// Samples in which it could not be fully counted.
    pub samples: u64,
    /// Why, in the first such sample.
    pub detail: String,
}

impl PartialVram {
    /// None yet, for `detail`.
    pub(crate) fn new(detail: String) -> PartialVram {
        PartialVram { samples: 0, detail }
    }
}

/// The reason given for a device whose process list could not be read.
pub(crate) const LIST_FAILED: &str = "the device's process list could not be read";

/// Why a row of the target has no figure: the driver's reason where the row carries one.
pub(crate) fn no_figure_detail(row: &GpuProcess) -> String {
    let why = row
        .unknown
        .iter()
        .find(|u| u.field == Field::UsedBytes)
        .map_or("no figure", |u| u.detail.as_str());
    format!("pid {} has no memory figure on this device: {why}", row.pid)
}

/// The target's figure on a device in one sample: `None` when its list `failed`, or when it
/// has rows there and none has a figure; else the known sum (a lower bound when some row has
/// none). No row at all is a measured 0.
pub(crate) fn tree_figure(sum: Option<&VramSum>, failed: bool) -> Option<u64> {
    if failed {
        return None;
    }
    match sum {
        None => Some(0),
        Some(s) if s.counted_rows == 0 && s.unknown_rows > 0 => None,
        Some(s) => Some(s.known_bytes),
    }
}
