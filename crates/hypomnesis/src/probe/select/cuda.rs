//! The devices a CUDA program would see, in CUDA's order: `CUDA_VISIBLE_DEVICES` read with
//! `CUDA_DEVICE_ORDER` over the listed NVIDIA devices ([`cuda_view`]). Pure: the caller passes
//! the two variables' values.
//!
//! Rules (CUDA programming guide, "Environment variables"; MIG user guide; the cases CUDA does
//! not document follow what nvitop observed, `nvml-depth.md` §4):
//!
//! - Order: `CUDA_DEVICE_ORDER=PCI_BUS_ID` sorts by PCI bus id. The default, `FASTEST_FIRST`,
//!   is an undocumented heuristic: when every NVIDIA GPU is the same model it is taken to be
//!   PCI order ([`OrderBasis::SameModel`]); otherwise the PCI order is shown as a guess
//!   ([`OrderBasis::Guess`]) and the notes say how to make it exact.
//! - `CUDA_VISIBLE_DEVICES` unset: every GPU; set but empty: none. Otherwise comma-separated
//!   entries, each an index into that order (a leading digit run: `1abc` is 1), a `GPU-` or
//!   `MIG-` UUID or unique prefix, or `MIG-GPU-<uuid>/<gi>/<ci>`. The first entry fixes the
//!   kind (indices or UUIDs); an invalid entry, one of the other kind, or one that names no
//!   device ends the list there (`0,2,-1,1` makes 0 and 2 visible). A repeated entry makes the
//!   list empty.
//! - MIG: a CUDA process enumerates at most one MIG device. When the visible list holds a MIG
//!   device, or a GPU in MIG mode (which stands for its first MIG device), only the first such
//!   is kept.

use crate::types::spelling::spelled;
use crate::types::{Device, Source, Vendor};

use super::selector::{DeviceSelector, SelectError, Selected, resolve_named};

spelled! {
    /// `CUDA_DEVICE_ORDER`, spelled as the variable's values.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    #[non_exhaustive]
    pub enum CudaDeviceOrder {
        /// The default: CUDA's "fastest first" heuristic.
        FastestFirst = "FASTEST_FIRST",
        /// By PCI bus id.
        PciBusId = "PCI_BUS_ID",
    }
}

impl CudaDeviceOrder {
    /// The order a `CUDA_DEVICE_ORDER` value asks for (unset or empty: the default), and a note
    /// when the value is not one CUDA knows (the default is then assumed).
    pub fn from_env(value: Option<&str>) -> (CudaDeviceOrder, Option<String>) {
        match value.map(str::trim) {
            None | Some("" | "FASTEST_FIRST") => (CudaDeviceOrder::FastestFirst, None),
            Some("PCI_BUS_ID") => (CudaDeviceOrder::PciBusId, None),
            Some(other) => (
                CudaDeviceOrder::FastestFirst,
                Some(format!(
                    "CUDA_DEVICE_ORDER={other:?} is neither FASTEST_FIRST nor PCI_BUS_ID: FASTEST_FIRST assumed"
                )),
            ),
        }
    }
}

spelled! {
    /// What the order shown rests on.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    #[non_exhaustive]
    pub enum OrderBasis {
        /// `CUDA_DEVICE_ORDER=PCI_BUS_ID`: exact.
        PciBusId = "pci_bus_id",
        /// `FASTEST_FIRST` with every GPU the same model: PCI order (ties broken by bus id).
        SameModel = "same_model",
        /// `FASTEST_FIRST` with different models: CUDA's heuristic is not documented; PCI
        /// order is a guess.
        Guess = "guess",
    }
}

impl OrderBasis {
    /// The basis in words, for output.
    pub const fn describe(self) -> &'static str {
        match self {
            OrderBasis::PciBusId => "CUDA_DEVICE_ORDER=PCI_BUS_ID: PCI bus order",
            OrderBasis::SameModel => {
                "CUDA_DEVICE_ORDER=FASTEST_FIRST (the default), every GPU the same model: PCI bus order"
            }
            OrderBasis::Guess => {
                "CUDA_DEVICE_ORDER=FASTEST_FIRST (the default) with different models: CUDA's order is an undocumented heuristic, PCI bus order shown as a guess; set CUDA_DEVICE_ORDER=PCI_BUS_ID or select by UUID"
            }
        }
    }
}

/// The devices CUDA would enumerate, in order: the position is the CUDA ordinal.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct CudaView {
    /// `CUDA_DEVICE_ORDER` as read.
    pub order: CudaDeviceOrder,
    /// What the order rests on.
    pub basis: OrderBasis,
    /// `CUDA_VISIBLE_DEVICES` as given (`None`: unset).
    pub visible_devices: Option<String>,
    /// The visible devices; CUDA ordinal N is `devices[N]`.
    pub devices: Vec<Selected>,
    /// What shaped the list: an entry that ended it, a repeated entry, the MIG limit, an
    /// unknown `CUDA_DEVICE_ORDER`.
    pub notes: Vec<String>,
}

impl CudaView {
    /// The device at CUDA ordinal `n`.
    ///
    /// # Errors
    /// [`SelectError::NoSuchCudaOrdinal`] beyond the visible list.
    pub fn ordinal(&self, n: u32) -> Result<Selected, SelectError> {
        self.devices
            .get(n as usize)
            .copied()
            .ok_or_else(|| SelectError::NoSuchCudaOrdinal {
                ordinal: n,
                visible: self.devices.len(),
                basis: self.summary(),
            })
    }

    /// `CUDA_VISIBLE_DEVICES=…` (or unset) and the order, in words.
    pub fn summary(&self) -> String {
        let visible = match &self.visible_devices {
            None => "CUDA_VISIBLE_DEVICES unset".to_string(),
            Some(v) => format!("CUDA_VISIBLE_DEVICES={v:?}"),
        };
        format!("{visible}; {}", self.basis.describe())
    }
}

/// The NVIDIA devices in CUDA's base order (before `CUDA_VISIBLE_DEVICES`), and its basis.
fn base_order(order: CudaDeviceOrder, devices: &[Device]) -> (Vec<&Device>, OrderBasis) {
    let mut nvidia: Vec<&Device> = devices
        .iter()
        .filter(|d| {
            d.vendor == Vendor::Nvidia && matches!(d.source, Source::Nvml | Source::NvidiaSmi)
        })
        .collect();
    // By bus id; a device without one after those with one, by index.
    nvidia.sort_by_key(|d| (d.pci_bus_id.is_none(), d.pci_bus_id, d.index));
    let basis = match order {
        CudaDeviceOrder::PciBusId => OrderBasis::PciBusId,
        CudaDeviceOrder::FastestFirst => {
            let first = nvidia.first().and_then(|d| d.name.as_deref());
            let same = first.is_some() && nvidia.iter().all(|d| d.name.as_deref() == first);
            if same || nvidia.len() <= 1 {
                OrderBasis::SameModel
            } else {
                OrderBasis::Guess
            }
        }
    };
    (nvidia, basis)
}

/// An entry's leading integer (`1abc` → 1), or `None` when it does not start with digits.
fn leading_index(token: &str) -> Option<u32> {
    let digits: String = token.chars().take_while(char::is_ascii_digit).collect();
    if digits.is_empty() {
        None
    } else {
        digits.parse().ok()
    }
}

/// The devices CUDA would see with these `CUDA_VISIBLE_DEVICES` and `CUDA_DEVICE_ORDER`
/// values (`None`: unset). See the [module docs](self).
pub fn cuda_view(
    visible_devices: Option<&str>,
    device_order: Option<&str>,
    devices: &[Device],
) -> CudaView {
    let (order, order_note) = CudaDeviceOrder::from_env(device_order);
    let (base, basis) = base_order(order, devices);
    let mut notes: Vec<String> = order_note.into_iter().collect();
    let mut picked: Vec<Selected> = Vec::new();
    match visible_devices {
        None => picked = base.iter().map(|d| Selected::device(d.index)).collect(),
        Some(v) if v.trim().is_empty() => {
            notes.push("CUDA_VISIBLE_DEVICES is set but empty: CUDA sees no device".to_string());
        }
        Some(v) => {
            let mut indices: Option<bool> = None;
            let mut seen: Vec<&str> = Vec::new();
            for token in v.split(',').map(str::trim) {
                if seen.contains(&token) {
                    notes.push(format!(
                        "CUDA_VISIBLE_DEVICES lists {token:?} twice: CUDA sees no device"
                    ));
                    picked.clear();
                    break;
                }
                seen.push(token);
                let is_index = token.starts_with(|c: char| c.is_ascii_digit());
                let kind_ok = *indices.get_or_insert(is_index) == is_index;
                let resolved = if !kind_ok {
                    None
                } else if is_index {
                    leading_index(token)
                        .and_then(|i| base.get(i as usize))
                        .map(|d| Selected::device(d.index))
                } else {
                    token
                        .parse::<DeviceSelector>()
                        .ok()
                        .filter(|s| {
                            matches!(
                                s,
                                DeviceSelector::Uuid(_)
                                    | DeviceSelector::MigUuid(_)
                                    | DeviceSelector::MigLegacy { .. }
                            )
                        })
                        .and_then(|s| resolve_named(&s, devices).ok())
                };
                match resolved {
                    Some(s) => picked.push(s),
                    None => {
                        notes.push(format!(
                            "CUDA_VISIBLE_DEVICES entry {token:?} names no visible device: the list ends before it"
                        ));
                        break;
                    }
                }
            }
        }
    }
    let devices_out = mig_limit(picked, devices, &mut notes);
    CudaView {
        order,
        basis,
        visible_devices: visible_devices.map(str::to_string),
        devices: devices_out,
        notes,
    }
}

/// At most one MIG device: the first MIG device listed, or the first MIG device of the first
/// listed GPU in MIG mode, alone.
fn mig_limit(picked: Vec<Selected>, devices: &[Device], notes: &mut Vec<String>) -> Vec<Selected> {
    let first_mig = picked.iter().find_map(|s| {
        if s.mig_index.is_some() {
            return Some(Some(*s));
        }
        let d = s.find_device(devices)?;
        if !d.mig_enabled() {
            return None;
        }
        let first = d
            .mig
            .as_ref()
            .and_then(|m| m.instances.iter().map(|i| i.index).min());
        Some(first.map(|i| Selected::mig(d.index, i)))
    });
    match first_mig {
        None => picked,
        Some(keep) => {
            let kept: Vec<Selected> = keep.into_iter().collect();
            if kept != picked {
                notes.push(
                    "MIG: a CUDA process enumerates at most one MIG device (MIG user guide): \
                     only the first MIG device listed (or the first of the first GPU in MIG \
                     mode) is visible"
                        .to_string(),
                );
            }
            kept
        }
    }
}
