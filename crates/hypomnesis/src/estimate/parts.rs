//! What an estimate is made of: its [`Component`] lines, each in one [`Memory`], and the
//! [`Estimate`] that totals them with what it assumed; the line builders every runtime's rules
//! share. Public through `estimate::fit` (and the `estimate` root).

use super::assume::Assumptions;
use crate::types::spelling::spelled;

#[cfg(feature = "serde")]
use serde::Serialize;

pub(crate) const MIB: u64 = 1 << 20;
pub(crate) const GIB: u64 = 1 << 30;

spelled! {
    /// Which memory a component occupies.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    #[non_exhaustive]
    pub enum Memory {
        /// The device the budget is for (a GPU; the host itself for a CPU-only run).
        #[default]
        Device = "device",
        /// Host RAM beside a GPU (llama.cpp's CPU layers, host buffers), judged against the
        /// host's available RAM.
        Host = "host",
    }
}

/// One line of the estimate.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize))]
#[non_exhaustive]
pub struct Component {
    /// `weights`, `kv_cache`, `activations`, `runtime_overhead`, `cuda_graphs`, `margin`;
    /// host parts `host_weights`, `host_kv_cache`, `host_compute`, `output_buffer`.
    pub name: &'static str,
    /// Low end of the band; `None` when it cannot be estimated.
    pub low_bytes: Option<u64>,
    /// High end of the band.
    pub high_bytes: Option<u64>,
    /// Where the figure comes from.
    pub note: String,
    /// Which memory it occupies.
    pub memory: Memory,
}

pub(crate) fn line(
    name: &'static str,
    low: Option<u64>,
    high: Option<u64>,
    note: impl Into<String>,
) -> Component {
    Component {
        name,
        low_bytes: low,
        high_bytes: high,
        note: note.into(),
        memory: Memory::Device,
    }
}

pub(crate) fn host_line(
    name: &'static str,
    low: Option<u64>,
    high: Option<u64>,
    note: impl Into<String>,
) -> Component {
    Component {
        memory: Memory::Host,
        ..line(name, low, high, note)
    }
}

/// Every component, the totals, and what the estimate assumed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize))]
#[non_exhaustive]
pub struct Estimate {
    /// The lines.
    pub components: Vec<Component>,
    /// Sum of the known low ends of the [`Memory::Device`] components (what the budget is
    /// compared with).
    pub low_bytes: u64,
    /// Sum of their known high ends.
    pub high_bytes: u64,
    /// Names of components that could not be estimated (no architecture).
    pub unknown_components: Vec<&'static str>,
    /// Sum of the [`Memory::Host`] low ends, when there are any.
    pub host_low_bytes: Option<u64>,
    /// Sum of their high ends.
    pub host_high_bytes: Option<u64>,
    /// What the estimate assumed (`None` for a size given as it is).
    pub assumptions: Option<Assumptions>,
    /// Inputs outside what the estimate models, and assumptions that may be wrong.
    pub warnings: Vec<String>,
}

impl Estimate {
    /// An estimate that is one given figure, `requested` (`hmn fits SIZE`: the caller already
    /// knows what it needs).
    pub fn requested(bytes: u64) -> Estimate {
        Estimate::from_components(
            vec![line("requested", Some(bytes), Some(bytes), "as given")],
            None,
            Vec::new(),
        )
    }

    /// Totals over `components`.
    pub(crate) fn from_components(
        components: Vec<Component>,
        assumptions: Option<Assumptions>,
        warnings: Vec<String>,
    ) -> Estimate {
        let sum = |memory: Memory, high: bool| {
            components
                .iter()
                .filter(|c| c.memory == memory)
                .filter_map(|c| if high { c.high_bytes } else { c.low_bytes })
                .fold(0u64, u64::saturating_add)
        };
        let has_host = components.iter().any(|c| c.memory == Memory::Host);
        Estimate {
            low_bytes: sum(Memory::Device, false),
            high_bytes: sum(Memory::Device, true),
            host_low_bytes: has_host.then(|| sum(Memory::Host, false)),
            host_high_bytes: has_host.then(|| sum(Memory::Host, true)),
            unknown_components: components
                .iter()
                .filter(|c| c.low_bytes.is_none())
                .map(|c| c.name)
                .collect(),
            components,
            assumptions,
            warnings,
        }
    }

    /// Whether every component could be estimated (a weights-only estimate is not).
    pub fn is_complete(&self) -> bool {
        self.unknown_components.is_empty()
    }
}

/// The KV cache line for `bytes` (or unknown).
pub(crate) fn kv_line(bytes: Option<u64>, note: String) -> Component {
    line(
        "kv_cache",
        bytes,
        bytes,
        match bytes {
            Some(_) => note,
            None => "unknown: no architecture (give a model file or directory with config.json)"
                .to_string(),
        },
    )
}
