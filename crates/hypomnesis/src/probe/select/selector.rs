//! Device selectors and what one resolves to: [`DeviceSelector`] (parsed from the user's
//! text), [`Selected`], [`SelectError`], and the rule for every selector but a CUDA ordinal
//! ([`resolve_named`]). Public as `hypomnesis::select::…`.

use std::fmt;
use std::str::FromStr;

use crate::types::pci::PciBusId;
use crate::types::{Device, GpuProcess, MigDevice};

/// How many candidates an error names before it says "…".
const SHOWN: usize = 4;

/// One device, named as the user gave it. See the [module docs](super).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DeviceSelector {
    /// hmn's device index (or, with a [`CudaView`](super::CudaView), a CUDA ordinal).
    Index(u32),
    /// A GPU's `GPU-…` UUID, or a prefix of it (including `GPU-`).
    Uuid(String),
    /// A MIG device's `MIG-…` UUID, or a prefix of it (including `MIG-`).
    MigUuid(String),
    /// The R450/R460 MIG form `MIG-GPU-<uuid>/<gi>/<ci>` (the GPU UUID may be a prefix).
    MigLegacy {
        /// The GPU's UUID (with `GPU-`).
        gpu_uuid: String,
        /// GPU instance id.
        gpu_instance: u32,
        /// Compute instance id.
        compute_instance: u32,
    },
    /// A PCI bus id.
    PciBusId(PciBusId),
}

/// Why a selector does not name a device. The text is one line naming the input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SelectError {
    /// Not a selector at all.
    #[error(
        "invalid device {0:?}: expected an index, a GPU-… or MIG-… UUID (or a unique prefix of one), or a PCI bus id"
    )]
    Malformed(String),
    /// No device has this index.
    #[error("no GPU {index} (have {count} device{})", if *count == 1 { "" } else { "s" })]
    NoSuchIndex {
        /// The index asked for.
        index: u32,
        /// How many devices there are.
        count: usize,
    },
    /// No device matches.
    #[error("no device matches {selector}{}", known_suffix(known))]
    NoMatch {
        /// The selector as given.
        selector: String,
        /// What the devices are called (for the message).
        known: Vec<String>,
    },
    /// A prefix that matches more than one device.
    #[error("{selector} matches {} devices ({}); give more of the UUID", candidates.len(), shown(candidates))]
    Ambiguous {
        /// The selector as given.
        selector: String,
        /// What it matched.
        candidates: Vec<String>,
    },
    /// A CUDA ordinal beyond what `CUDA_VISIBLE_DEVICES` makes visible.
    #[error("no CUDA device {ordinal}: {visible} visible ({basis})")]
    NoSuchCudaOrdinal {
        /// The ordinal asked for.
        ordinal: u32,
        /// How many CUDA devices are visible.
        visible: usize,
        /// The visible list and order, in words.
        basis: String,
    },
}

fn shown(items: &[String]) -> String {
    let mut s = items
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if items.len() > SHOWN {
        s.push_str(", …");
    }
    s
}

fn known_suffix(known: &[String]) -> String {
    if known.is_empty() {
        " (no device found)".to_string()
    } else {
        format!(" (have {})", shown(known))
    }
}

impl FromStr for DeviceSelector {
    type Err = SelectError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        let bad = || SelectError::Malformed(s.to_string());
        if t.is_empty() {
            return Err(bad());
        }
        if t.bytes().all(|b| b.is_ascii_digit()) {
            return t.parse().map(DeviceSelector::Index).map_err(|_| bad());
        }
        let upper = t.to_ascii_uppercase();
        if let Some(rest) = upper.strip_prefix("MIG-GPU-") {
            let parts: Vec<&str> = rest.split('/').collect();
            let [uuid, gi, ci] = parts.as_slice() else {
                return Err(bad());
            };
            let id = |v: &str| v.trim().parse::<u32>().map_err(|_| bad());
            if uuid.is_empty() {
                return Err(bad());
            }
            // Keep the user's case for the UUID (matching ignores it).
            let orig = t.get(4..4 + 4 + uuid.len()).ok_or_else(bad)?;
            return Ok(DeviceSelector::MigLegacy {
                gpu_uuid: orig.to_string(),
                gpu_instance: id(gi)?,
                compute_instance: id(ci)?,
            });
        }
        if upper.starts_with("MIG-") {
            return (t.len() > 4)
                .then(|| DeviceSelector::MigUuid(t.to_string()))
                .ok_or_else(bad);
        }
        if upper.starts_with("GPU-") {
            return (t.len() > 4)
                .then(|| DeviceSelector::Uuid(t.to_string()))
                .ok_or_else(bad);
        }
        if t.contains(':') {
            // NVML also accepts the bus id without a function (`%x:%x:%x`): function 0.
            let full = if t.contains('.') {
                t.to_string()
            } else {
                format!("{t}.0")
            };
            return full
                .parse::<PciBusId>()
                .map(DeviceSelector::PciBusId)
                .map_err(|_| bad());
        }
        Err(bad())
    }
}

impl fmt::Display for DeviceSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceSelector::Index(i) => write!(f, "{i}"),
            DeviceSelector::Uuid(u) | DeviceSelector::MigUuid(u) => f.write_str(u),
            DeviceSelector::MigLegacy {
                gpu_uuid,
                gpu_instance,
                compute_instance,
            } => write!(f, "MIG-{gpu_uuid}/{gpu_instance}/{compute_instance}"),
            DeviceSelector::PciBusId(p) => write!(f, "{p}"),
        }
    }
}

/// What a selector resolved to: a device, and a MIG device on it when one was named.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Selected {
    /// The device's index ([`Device::index`]; a MIG device's parent).
    pub device_index: u32,
    /// The MIG device's index on it ([`MigDevice::index`]), when a MIG device was named.
    pub mig_index: Option<u32>,
}

impl Selected {
    /// A whole device.
    pub const fn device(device_index: u32) -> Selected {
        Selected {
            device_index,
            mig_index: None,
        }
    }

    /// A MIG device.
    pub const fn mig(device_index: u32, mig_index: u32) -> Selected {
        Selected {
            device_index,
            mig_index: Some(mig_index),
        }
    }

    /// Whether a process row is on what this names (a whole device: every row of it, MIG
    /// devices included; a MIG device: its rows only).
    pub fn matches(&self, p: &GpuProcess) -> bool {
        p.device_index == self.device_index && self.mig_index.is_none_or(|m| p.mig_index == Some(m))
    }

    /// The device in `devices`.
    pub fn find_device<'a>(&self, devices: &'a [Device]) -> Option<&'a Device> {
        devices.iter().find(|d| d.index == self.device_index)
    }

    /// The MIG device in `devices`, when one was named.
    pub fn find_mig<'a>(&self, devices: &'a [Device]) -> Option<&'a MigDevice> {
        let m = self.mig_index?;
        self.find_device(devices)?.mig_instance(m)
    }

    /// `GPU 0`, or `GPU 0 MIG 1g.10gb (MIG-…)` for a MIG device.
    pub fn describe(&self, devices: &[Device]) -> String {
        match self.find_mig(devices) {
            Some(m) => format!(
                "GPU {} {}{}",
                self.device_index,
                m.label(),
                m.uuid
                    .as_deref()
                    .map(|u| format!(" ({u})"))
                    .unwrap_or_default()
            ),
            None => format!("GPU {}", self.device_index),
        }
    }
}

/// How the devices are called, for "have …" in errors.
fn known(devices: &[Device]) -> Vec<String> {
    devices
        .iter()
        .map(|d| match &d.uuid {
            Some(u) => format!("GPU {} {u}", d.index),
            None => format!("GPU {}", d.index),
        })
        .collect()
}

fn starts_with_ci(text: &str, prefix: &str) -> bool {
    text.len() >= prefix.len()
        && text
            .get(..prefix.len())
            .is_some_and(|h| h.eq_ignore_ascii_case(prefix))
}

/// One candidate among several by UUID prefix: an exact match wins.
fn unique<T: Copy>(
    selector: &str,
    candidates: Vec<(String, T)>,
    devices: &[Device],
) -> Result<T, SelectError> {
    if let Some((_, t)) = candidates
        .iter()
        .find(|(u, _)| u.eq_ignore_ascii_case(selector))
    {
        return Ok(*t);
    }
    match candidates.as_slice() {
        [(_, t)] => Ok(*t),
        [] => Err(SelectError::NoMatch {
            selector: selector.to_string(),
            known: known(devices),
        }),
        many => Err(SelectError::Ambiguous {
            selector: selector.to_string(),
            candidates: many.iter().map(|(u, _)| u.clone()).collect(),
        }),
    }
}

/// A GPU by UUID prefix.
fn by_uuid(prefix: &str, devices: &[Device]) -> Result<u32, SelectError> {
    let candidates = devices
        .iter()
        .filter_map(|d| Some((d.uuid.clone()?, d.index)))
        .filter(|(u, _)| starts_with_ci(u, prefix))
        .collect();
    unique(prefix, candidates, devices)
}

/// Resolves every selector but an index (pure; used for `CUDA_VISIBLE_DEVICES` too).
pub(crate) fn resolve_named(
    sel: &DeviceSelector,
    devices: &[Device],
) -> Result<Selected, SelectError> {
    let no_match = || SelectError::NoMatch {
        selector: sel.to_string(),
        known: known(devices),
    };
    match sel {
        DeviceSelector::Index(i) => devices
            .iter()
            .find(|d| d.index == *i)
            .map(|d| Selected::device(d.index))
            .ok_or(SelectError::NoSuchIndex {
                index: *i,
                count: devices.len(),
            }),
        DeviceSelector::Uuid(prefix) => by_uuid(prefix, devices).map(Selected::device),
        DeviceSelector::MigUuid(prefix) => {
            let candidates = devices
                .iter()
                .flat_map(|d| d.mig.iter().flat_map(|m| &m.instances))
                .filter_map(|m| Some((m.uuid.clone()?, Selected::mig(m.parent_index, m.index))))
                .filter(|(u, _)| starts_with_ci(u, prefix))
                .collect();
            unique(prefix, candidates, devices)
        }
        DeviceSelector::MigLegacy {
            gpu_uuid,
            gpu_instance,
            compute_instance,
        } => {
            let parent = by_uuid(gpu_uuid, devices)?;
            devices
                .iter()
                .find(|d| d.index == parent)
                .and_then(|d| d.mig.as_ref())
                .and_then(|m| {
                    m.instances.iter().find(|i| {
                        i.gpu_instance_id == Some(*gpu_instance)
                            && i.compute_instance_id == Some(*compute_instance)
                    })
                })
                .map(|m| Selected::mig(parent, m.index))
                .ok_or_else(no_match)
        }
        DeviceSelector::PciBusId(p) => devices
            .iter()
            .find(|d| d.pci_bus_id == Some(*p))
            .map(|d| Selected::device(d.index))
            .ok_or_else(no_match),
    }
}
