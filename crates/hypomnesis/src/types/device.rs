//! One GPU: [`Device`] (identity, memory, regions, telemetry, MIG state) and its
//! [`Telemetry`].

use std::collections::BTreeMap;

use super::health::MemoryHealth;
use super::nvidia::{ComputeMode, MigDevice, MigState};
use super::pool::{MemoryPool, PoolKind};
use super::runtime::RuntimeStatus;
use super::source::{Source, Unknown, Vendor};
use super::usage::{DeviceMemory, DeviceRegion};
use crate::types::pci::PciBusId;

#[cfg(feature = "serde")]
use serde::{Deserialize, Serialize};

/// Device telemetry: how busy, how hot, how much power. Each reading is `None` (with an
/// [`Unknown`] entry on the device) where the driver does not provide it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
#[non_exhaustive]
pub struct Telemetry {
    /// Percent of the last sample period the GPU was busy (NVML utilization, amdgpu
    /// `gpu_busy_percent`).
    pub utilization_percent: Option<f64>,
    /// Percent of the last sample period device memory was being read or written.
    pub memory_utilization_percent: Option<f64>,
    /// GPU temperature, degrees Celsius.
    pub temperature_celsius: Option<f64>,
    /// Power draw, watts.
    pub power_watts: Option<f64>,
    /// Energy since the driver loaded, joules.
    pub energy_joules: Option<f64>,
    /// Graphics clock, MHz.
    pub clock_graphics_mhz: Option<u32>,
    /// SM (streaming multiprocessor) clock, MHz.
    pub clock_sm_mhz: Option<u32>,
    /// Memory clock, MHz.
    pub clock_memory_mhz: Option<u32>,
    /// Maximum graphics clock, MHz.
    pub clock_graphics_max_mhz: Option<u32>,
    /// Maximum memory clock, MHz.
    pub clock_memory_max_mhz: Option<u32>,
}

/// One GPU (or accelerator).
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
#[non_exhaustive]
pub struct Device {
    /// The device's index in `hmn`'s numbering: NVML devices first, in NVML order.
    pub index: u32,
    /// The vendor.
    pub vendor: Vendor,
    /// Marketing name, when the driver reports one.
    pub name: Option<String>,
    /// Stable identifier (`GPU-…` for NVIDIA).
    pub uuid: Option<String>,
    /// PCI address, normalised to `0000:1a:00.0`.
    pub pci_bus_id: Option<PciBusId>,
    /// The kernel driver (`nvidia`, `amdgpu`, `i915`, `xe`, …).
    pub driver: Option<String>,
    /// The driver's version string.
    pub driver_version: Option<String>,
    /// PCI vendor and device id, `1002:73bf`.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub pci_id: Option<String>,
    /// Runtime power state from sysfs `power/runtime_status` (`active`, `suspended`, …). A
    /// suspended device is not read (reading would wake it), so its memory is unknown.
    pub runtime_status: Option<RuntimeStatus>,
    /// Whether the GPU is integrated (its memory is shared system memory), when known.
    pub integrated: Option<bool>,
    /// Device-wide memory.
    pub memory: DeviceMemory,
    /// Per-region totals where the driver exposes them (amdgpu: `vram`, `visible_vram`, `gtt`).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "BTreeMap::is_empty")
    )]
    pub regions: BTreeMap<String, DeviceRegion>,
    /// The memory the GPU can really allocate from, where that is not (only) `memory`: an AMD
    /// APU's carve-out plus GTT, host RAM (unified memory), a discrete card whose use is the
    /// sum of its clients. Absent for a discrete GPU whose `memory` is its own VRAM.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub pool: Option<MemoryPool>,
    /// Utilization, temperature, power, clocks.
    pub telemetry: Telemetry,
    /// The backend that produced this record.
    pub source: Source,
    /// Fields that are `None`, with the reason.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Vec::is_empty")
    )]
    pub unknown: Vec<Unknown>,
    /// Set when the device exists but could not be read at all.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub error: Option<String>,
    /// MIG mode and MIG devices (NVIDIA GPUs that support MIG; absent elsewhere).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub mig: Option<MigState>,
    /// Which CUDA contexts the GPU admits (NVIDIA through NVML; absent elsewhere, and `None`
    /// with an `unknown` entry where NVML gives none).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub compute_mode: Option<ComputeMode>,
    /// Memory health (ECC, remapped rows or retired pages, amdgpu RAS), when it was read
    /// (`ProbeOptions::health`): every reading `None` with an `unknown` entry where the driver
    /// gives none.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub health: Option<MemoryHealth>,
}

impl Device {
    /// A device with only an index, vendor and source known; backends fill in the rest.
    pub fn new(index: u32, vendor: Vendor, source: Source) -> Self {
        Device {
            index,
            vendor,
            name: None,
            uuid: None,
            pci_bus_id: None,
            driver: None,
            driver_version: None,
            pci_id: None,
            runtime_status: None,
            integrated: None,
            memory: DeviceMemory::default(),
            regions: BTreeMap::new(),
            pool: None,
            telemetry: Telemetry::default(),
            source,
            unknown: Vec::new(),
            error: None,
            mig: None,
            compute_mode: None,
            health: None,
        }
    }

    /// The name, or `"unknown GPU"`.
    pub fn name_or_unknown(&self) -> &str {
        self.name.as_deref().unwrap_or("unknown GPU")
    }

    /// Whether the device is runtime-suspended (and so was not read).
    pub fn is_suspended(&self) -> bool {
        self.runtime_status == Some(RuntimeStatus::Suspended)
    }

    /// Whether MIG is in effect on this GPU.
    pub fn mig_enabled(&self) -> bool {
        self.mig.as_ref().is_some_and(MigState::enabled)
    }

    /// Its MIG device with this index.
    pub fn mig_instance(&self, index: u32) -> Option<&MigDevice> {
        self.mig.as_ref().and_then(|m| m.instance(index))
    }
}

impl MigDevice {
    /// A [`Device`] standing for this MIG device, to judge budgets against its own memory:
    /// the parent's index, vendor, driver and PCI address; this instance's name, `MIG-` UUID
    /// and memory; no telemetry (NVML gives none per instance).
    pub fn as_device(&self, parent: &Device) -> Device {
        let mut d = Device::new(self.parent_index, Vendor::Nvidia, Source::Nvml);
        d.name = self
            .name
            .clone()
            .or_else(|| Some(format!("{} {}", parent.name_or_unknown(), self.label())));
        d.uuid.clone_from(&self.uuid);
        d.pci_bus_id = parent.pci_bus_id;
        d.driver.clone_from(&parent.driver);
        d.driver_version.clone_from(&parent.driver_version);
        d.memory = self.memory;
        d.unknown = self
            .unknown
            .iter()
            .filter(|u| u.field.is_memory())
            .cloned()
            .collect();
        d
    }
}

impl Device {
    /// The kind of memory this device allocates from: its pool's; without a pool, unified
    /// with the host for an integrated GPU, dedicated for a GPU known not to be integrated or
    /// an NVIDIA GPU whose driver reports a memory size of its own (NVML answers
    /// NOT_SUPPORTED on parts without a framebuffer, which get a pool); otherwise unknown.
    pub fn pool_kind(&self) -> Option<PoolKind> {
        if let Some(p) = &self.pool {
            return Some(p.kind);
        }
        match self.integrated {
            Some(true) => Some(PoolKind::UnifiedHost),
            Some(false) => Some(PoolKind::Dedicated),
            None if self.vendor == Vendor::Nvidia && self.memory.total_bytes.is_some() => {
                Some(PoolKind::Dedicated)
            }
            None => None,
        }
    }

    /// Used memory as the device line shows it: the pool's where the device has one, else the
    /// driver's own figure.
    pub fn pool_used_bytes(&self) -> Option<u64> {
        match &self.pool {
            Some(p) => p.used_bytes,
            None => self.memory.used_bytes,
        }
    }

    /// `(free, total)` of the memory the GPU can allocate from, as the device line shows them:
    /// the pool's where the device has one (an APU's VRAM + GTT, host RAM for unified memory),
    /// else the driver's own figures.
    pub fn pool_free_and_total(&self) -> (Option<u64>, Option<u64>) {
        match &self.pool {
            Some(p) => (p.free_bytes, p.total_bytes),
            None => (self.memory.free_bytes, self.memory.total_bytes),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mig_device_stands_for_itself_in_budgets() {
        let mut parent = Device::new(0, Vendor::Nvidia, Source::Nvml);
        parent.name = Some("NVIDIA H100 80GB HBM3".into());
        parent.memory = DeviceMemory::new(Some(80), None, None, None);
        let mut m = MigDevice::new(1, 0);
        m.profile = Some("1g.10gb".into());
        m.uuid = Some("MIG-1".into());
        m.memory = DeviceMemory::new(Some(10), Some(4), Some(6), Some(0));
        let d = m.as_device(&parent);
        assert_eq!(d.index, 0);
        assert_eq!(d.name.as_deref(), Some("NVIDIA H100 80GB HBM3 MIG 1g.10gb"));
        assert_eq!(d.uuid.as_deref(), Some("MIG-1"));
        assert_eq!(d.memory.free_bytes, Some(6));
        assert_eq!(m.label(), "MIG 1g.10gb");
        assert_eq!(m.dcgm_profile(), Some("1g.10gb"));
        m.gpu_instance_profile = Some("1g.10gb+me".into());
        assert_eq!(m.dcgm_profile(), Some("1g.10gb+me"));
    }
}
