//! The variables that make a command see only the devices picked for it (see the parent
//! module's table): `CUDA_VISIBLE_DEVICES`, `ROCR_VISIBLE_DEVICES` (and `HIP_VISIBLE_DEVICES`
//! unset), `ZE_AFFINITY_MASK` with `ZE_ENABLE_PCI_ID_DEVICE_ORDER=1`.

use super::{Candidate, Picked};
use crate::backends::drm::kfd::{KfdNode, compute_nodes};
use crate::probe::Probe;
use crate::types::{Device, Vendor};

/// Why a picked device cannot be named to its runtime; `Display` is the text `hmn pick`
/// shows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VisibleError {
    /// An NVIDIA GPU without a UUID (`CUDA_VISIBLE_DEVICES` takes only UUIDs here).
    #[error("GPU {index} has no UUID for CUDA_VISIBLE_DEVICES")]
    NoUuid {
        /// The device.
        index: u32,
    },
    /// An AMD GPU with no KFD compute node at its PCI address (ROCm not loaded).
    #[error("GPU {index}: no KFD compute node at its PCI address (ROCm not loaded?)")]
    NoKfdNode {
        /// The device.
        index: u32,
    },
    /// An Intel GPU without a PCI address (`ZE_AFFINITY_MASK` ranks by it).
    #[error("GPU {index} has no PCI address for ZE_AFFINITY_MASK")]
    NoPciAddress {
        /// The device.
        index: u32,
    },
    /// Another vendor's GPU: no variable selects it.
    #[error("GPU {index} ({driver}): no variable selects it for a command")]
    NoVariable {
        /// The device.
        index: u32,
        /// Its driver (the vendor as the device names it).
        driver: String,
    },
}

/// The variables that make a command see only `picked` (see the [module docs](self)): `(name,
/// value)`, `None` to unset. `all`: every device (Intel ranks); `kfd`: the KFD compute nodes.
///
/// # Errors
/// A picked device that cannot be named to its runtime (no UUID; an AMD GPU without a KFD
/// node; another vendor).
pub(crate) fn visible_env(
    picked: &[Candidate],
    all: &[Device],
    kfd: &[KfdNode],
) -> Result<Vec<(String, Option<String>)>, VisibleError> {
    let mut cuda = Vec::new();
    let mut rocr = Vec::new();
    let mut ze = Vec::new();
    for c in picked {
        let d = &c.device;
        match d.vendor {
            Vendor::Nvidia => match &d.uuid {
                Some(u) => cuda.push(u.clone()),
                None => return Err(VisibleError::NoUuid { index: d.index }),
            },
            Vendor::Amd => {
                let at = kfd
                    .iter()
                    .position(|n| n.pci.is_some() && n.pci == d.pci_bus_id)
                    .ok_or(VisibleError::NoKfdNode { index: d.index })?;
                rocr.push(match kfd.get(at).and_then(|n| n.unique_id) {
                    Some(id) => format!("GPU-{id:016X}"),
                    None => at.to_string(),
                });
            }
            Vendor::Intel => {
                let mut intel: Vec<_> = all
                    .iter()
                    .filter(|x| x.vendor == Vendor::Intel)
                    .filter_map(|x| x.pci_bus_id)
                    .collect();
                intel.sort();
                let rank = d
                    .pci_bus_id
                    .and_then(|p| intel.iter().position(|x| *x == p))
                    .ok_or(VisibleError::NoPciAddress { index: d.index })?;
                ze.push(rank.to_string());
            }
            Vendor::Other(ref drv) => {
                return Err(VisibleError::NoVariable {
                    index: d.index,
                    driver: drv.clone(),
                });
            }
        }
    }
    let mut env = Vec::new();
    if !cuda.is_empty() {
        env.push(("CUDA_VISIBLE_DEVICES".to_string(), Some(cuda.join(","))));
    }
    if !rocr.is_empty() {
        env.push(("ROCR_VISIBLE_DEVICES".to_string(), Some(rocr.join(","))));
        // It would index the list ROCr already filtered.
        env.push(("HIP_VISIBLE_DEVICES".to_string(), None));
    }
    if !ze.is_empty() {
        env.push((
            "ZE_ENABLE_PCI_ID_DEVICE_ORDER".to_string(),
            Some("1".to_string()),
        ));
        env.push(("ZE_AFFINITY_MASK".to_string(), Some(ze.join(","))));
    }
    Ok(env)
}

/// `visible_env` for a pick on `probe`'s machine (reads the KFD topology when an AMD GPU
/// was picked).
///
/// # Errors
/// As `visible_env`: a [`VisibleError`].
pub fn visible_env_for(
    probe: &Probe,
    picked: &Picked,
) -> Result<Vec<(String, Option<String>)>, VisibleError> {
    let kfd = if picked
        .devices
        .iter()
        .any(|c| c.device.vendor == Vendor::Amd)
    {
        compute_nodes(probe.roots())
    } else {
        Vec::new()
    };
    let all = if picked
        .devices
        .iter()
        .any(|c| c.device.vendor == Vendor::Intel)
    {
        probe.devices().devices
    } else {
        Vec::new()
    };
    visible_env(&picked.devices, &all, &kfd)
}
