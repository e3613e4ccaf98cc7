//! The NVIDIA-only parts of the data model: a GPU's compute mode ([`ComputeMode`]), its MIG
//! state and its MIG devices ([`MigState`], [`MigDevice`]), and a process's utilization samples from NVML
//! ([`ProcessUtilization`]). How they are read: `docs/memory-model.md` ("MIG and MPS").

use super::source::Unknown;
use super::usage::DeviceMemory;

#[cfg(feature = "serde")]
use serde::{Deserialize, Serialize};

use super::spelling::spelled;

spelled! {
    /// A MIG mode (`nvmlDeviceGetMigMode`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    #[non_exhaustive]
    pub enum MigMode {
        /// The GPU is one device.
        Disabled = "disabled",
        /// The GPU is partitioned into GPU instances.
        Enabled = "enabled",
    }
}

impl MigMode {
    /// The mode from NVML's value (`NVML_DEVICE_MIG_ENABLE` = 1).
    pub const fn from_nvml(value: u32) -> MigMode {
        if value == 1 {
            MigMode::Enabled
        } else {
            MigMode::Disabled
        }
    }
}

spelled! {
    /// Which CUDA contexts a GPU admits (`nvmlDeviceGetComputeMode`; `nvidia-smi -c`): set by
    /// an administrator, often `exclusive_process` on shared clusters.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    #[non_exhaustive]
    pub enum ComputeMode {
        /// Any number of contexts, from any process.
        Default = "default",
        /// One context, used by one thread at a time (removed from current drivers).
        ExclusiveThread = "exclusive_thread",
        /// No context at all: nothing can run CUDA there.
        Prohibited = "prohibited",
        /// One context, one process (or an MPS server whose clients share its context).
        ExclusiveProcess = "exclusive_process",
    }
}

impl ComputeMode {
    /// Whether the GPU admits a single context: a second process's context creation fails
    /// ("all CUDA-capable devices are busy or unavailable") while one holds it.
    pub const fn is_exclusive(self) -> bool {
        matches!(
            self,
            ComputeMode::ExclusiveThread | ComputeMode::ExclusiveProcess
        )
    }
}

/// A GPU's MIG state: the mode now and after the next GPU reset, and its MIG devices. Present
/// only on GPUs that support MIG (`Device::mig` is `None` elsewhere).
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
#[non_exhaustive]
pub struct MigState {
    /// The mode in effect.
    pub current: MigMode,
    /// The mode after the next GPU reset (differs from `current` while a change is pending;
    /// `hmn` never resets a GPU).
    pub pending: MigMode,
    /// The MIG devices, by MIG device index (empty when MIG is off, or on with no instance).
    pub instances: Vec<MigDevice>,
    /// What could not be read about the instances (the enumeration itself, a slot, the
    /// privileged profile names), with the reason.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Vec::is_empty")
    )]
    pub unknown: Vec<Unknown>,
}

impl MigState {
    /// A state with no instances.
    pub const fn new(current: MigMode, pending: MigMode) -> MigState {
        MigState {
            current,
            pending,
            instances: Vec::new(),
            unknown: Vec::new(),
        }
    }

    /// Whether MIG is in effect.
    pub fn enabled(&self) -> bool {
        self.current == MigMode::Enabled
    }

    /// Whether a mode change waits for a GPU reset.
    pub fn change_pending(&self) -> bool {
        self.current != self.pending
    }

    /// The MIG device with this index.
    pub fn instance(&self, index: u32) -> Option<&MigDevice> {
        self.instances.iter().find(|m| m.index == index)
    }
}

/// Placement of a GPU instance: its first memory slice and how many it spans.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
#[non_exhaustive]
pub struct MigPlacement {
    /// First slice.
    pub start: u32,
    /// Slices.
    pub size: u32,
}

impl MigPlacement {
    /// A placement.
    pub const fn new(start: u32, size: u32) -> MigPlacement {
        MigPlacement { start, size }
    }
}

/// One MIG device: a compute instance inside a GPU instance — what CUDA enumerates and
/// `nvidia-smi -L` lists as `MIG 1g.10gb Device 0`.
///
/// Memory belongs to the GPU instance: compute instances of one GPU instance show the same
/// figures, which must not be added up.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
#[non_exhaustive]
pub struct MigDevice {
    /// MIG device index on its GPU (`nvmlDeviceGetMigDeviceHandleByIndex`, `nvidia-smi -L`'s
    /// `Device N`).
    pub index: u32,
    /// The GPU's index ([`Device::index`](crate::Device::index)).
    pub parent_index: u32,
    /// The GPU's UUID (`GPU-…`): what dcgm-exporter's `UUID` label carries for MIG series.
    pub parent_uuid: Option<String>,
    /// `MIG-…` UUID (what `CUDA_VISIBLE_DEVICES` accepts).
    pub uuid: Option<String>,
    /// NVML's name for it (`NVIDIA H100 80GB HBM3 MIG 1g.10gb`).
    pub name: Option<String>,
    /// Its profile as `nvidia-smi -L` names it, without `MIG `: `1g.10gb`, or `1c.3g.40gb` for
    /// one of several compute instances of a GPU instance.
    pub profile: Option<String>,
    /// Set when `profile` was derived from the instance's slices and memory (the name did not
    /// carry it): an approximation, since a profile's name does not always give its memory
    /// (`1g.18gb` holds 16 GiB on an H200).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "std::ops::Not::not")
    )]
    pub profile_approximate: bool,
    /// The GPU instance's profile (`1g.10gb+me`, `3g.40gb`), read through the privileged
    /// GPU-instance calls: dcgm-exporter's `GPU_I_PROFILE`.
    pub gpu_instance_profile: Option<String>,
    /// The GPU instance's profile id (`nvidia-smi mig -lgip`'s ID), privileged.
    pub gpu_instance_profile_id: Option<u32>,
    /// GPU instance id (dcgm-exporter's `GPU_I_ID`; not dense: 1, 11, 13 …).
    pub gpu_instance_id: Option<u32>,
    /// Compute instance id within the GPU instance.
    pub compute_instance_id: Option<u32>,
    /// The GPU instance's placement in memory slices, privileged.
    pub placement: Option<MigPlacement>,
    /// Streaming multiprocessors of this compute instance.
    pub multiprocessor_count: Option<u32>,
    /// The GPU instance's memory (shared by its compute instances).
    pub memory: DeviceMemory,
    /// Fields that are `None`, with the reason.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Vec::is_empty")
    )]
    pub unknown: Vec<Unknown>,
}

impl MigDevice {
    /// A MIG device with only its index and parent known.
    pub fn new(index: u32, parent_index: u32) -> MigDevice {
        MigDevice {
            index,
            parent_index,
            parent_uuid: None,
            uuid: None,
            name: None,
            profile: None,
            profile_approximate: false,
            gpu_instance_profile: None,
            gpu_instance_profile_id: None,
            gpu_instance_id: None,
            compute_instance_id: None,
            placement: None,
            multiprocessor_count: None,
            memory: DeviceMemory::default(),
            unknown: Vec::new(),
        }
    }

    /// `MIG 1g.10gb` (`MIG ?` when the profile is unknown), as `nvidia-smi -L` prints it.
    pub fn label(&self) -> String {
        format!("MIG {}", self.profile.as_deref().unwrap_or("?"))
    }

    /// The profile to join dcgm-exporter's `GPU_I_PROFILE` with: the GPU instance's profile
    /// when it could be read, else the device-level one (the same except for `+me` and
    /// subdivided GPU instances).
    pub fn dcgm_profile(&self) -> Option<&str> {
        self.gpu_instance_profile
            .as_deref()
            .or(self.profile.as_deref())
    }
}

/// A process's use of a GPU's engines over the last sampling period, from
/// `nvmlDeviceGetProcessUtilization`: percent of the time each unit was busy with its work.
///
/// The driver reports only processes that used the GPU during the period: a listed process
/// without a sample is 0 % (`sampled: false`), but only when the device answered the query.
/// Under MIG the driver does not give this figure at all (the row's `utilization` is then
/// `None` with an `unknown` entry), never 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
#[non_exhaustive]
pub struct ProcessUtilization {
    /// Streaming multiprocessors (compute and graphics kernels).
    pub sm_percent: u32,
    /// Device memory read or written (the memory controller).
    pub memory_percent: u32,
    /// Video encoder.
    pub encoder_percent: u32,
    /// Video decoder.
    pub decoder_percent: u32,
    /// Whether the driver had a sample for the process (false: none in the period, so 0 %).
    pub sampled: bool,
    /// Start of the period, µs since the Unix epoch: the previous query's newest sample, or
    /// one second before the first query.
    pub since_unix_us: u64,
}

impl ProcessUtilization {
    /// A reading.
    pub const fn new(
        sm_percent: u32,
        memory_percent: u32,
        encoder_percent: u32,
        decoder_percent: u32,
        sampled: bool,
        since_unix_us: u64,
    ) -> ProcessUtilization {
        ProcessUtilization {
            sm_percent,
            memory_percent,
            encoder_percent,
            decoder_percent,
            sampled,
            since_unix_us,
        }
    }

    /// No sample in the period: 0 % everywhere.
    pub const fn idle(since_unix_us: u64) -> ProcessUtilization {
        ProcessUtilization::new(0, 0, 0, 0, false, since_unix_us)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes() {
        let mut s = MigState::new(MigMode::Disabled, MigMode::Enabled);
        assert!(!s.enabled());
        assert!(s.change_pending());
        s.current = MigMode::from_nvml(1);
        assert!(s.enabled() && !s.change_pending());
        assert_eq!(MigMode::from_nvml(0).as_str(), "disabled");
    }
}
