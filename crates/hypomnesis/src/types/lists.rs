//! Results of a query: the device and process lists, each backend's status, and warnings.

use std::fmt;

use super::backend::{Backend, BackendCause, BackendProblem, BackendState, BackendStatus};
use super::device::Device;
use super::process::GpuProcess;
use crate::types::error::Error;

#[cfg(feature = "serde")]
use serde::Serialize;

/// A problem that did not stop the measurement: one device failed, one value was implausible.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Warning {
    /// The device concerned, if any.
    pub device_index: Option<u32>,
    /// What happened.
    pub message: String,
}

impl Warning {
    /// A warning about one device.
    pub fn device(index: u32, message: impl Into<String>) -> Self {
        Warning {
            device_index: Some(index),
            message: message.into(),
        }
    }

    /// A warning not tied to one device.
    pub fn general(message: impl Into<String>) -> Self {
        Warning {
            device_index: None,
            message: message.into(),
        }
    }
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.device_index {
            Some(i) => write!(f, "GPU {i}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

#[cfg(feature = "serde")]
impl Serialize for Warning {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Every device the probe could find.
#[derive(Debug, Clone, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(Serialize))]
#[non_exhaustive]
pub struct DeviceList {
    /// The devices, in index order.
    pub devices: Vec<Device>,
    /// Problems that did not stop the query.
    pub warnings: Vec<Warning>,
    /// What each backend did.
    pub backends: Vec<BackendStatus>,
}

impl DeviceList {
    /// Each absent backend and why: what to tell a user who sees no GPU.
    pub fn absent_reasons(&self) -> Vec<BackendProblem> {
        absent_reasons(&self.backends)
    }

    /// Each backend that failed with no fallback in its place: GPUs may exist that this list
    /// cannot show (see [`failed_reasons`]).
    pub fn failed_reasons(&self) -> Vec<BackendProblem> {
        failed_reasons(&self.backends)
    }

    /// The device at `index`.
    ///
    /// # Errors
    /// [`Error::NoGpu`] when no backend found any GPU, [`Error::DeviceIndexOutOfRange`] when
    /// there is no such device, [`Error::DeviceUnreadable`] when it refused every query.
    pub fn device(&self, index: u32) -> Result<&Device, Error> {
        pick(&self.devices, || self.absent_reasons(), index)
    }
}

/// Each backend that failed (see [`BackendState::Failed`]) while no fallback listed the devices
/// it would have: NVML's failure does not count when `nvidia-smi` answered in its place.
pub fn failed_reasons(backends: &[BackendStatus]) -> Vec<BackendProblem> {
    let smi_answered = backends.iter().any(|b| {
        b.backend == Backend::NvidiaSmi
            && matches!(b.state, BackendState::Active { devices } if devices > 0)
    });
    backends
        .iter()
        .filter_map(|b| match &b.state {
            BackendState::Failed { .. } if b.backend == Backend::Nvml && smi_answered => None,
            BackendState::Failed { cause, reason } => {
                Some(BackendProblem::new(b.backend, *cause, reason.clone()))
            }
            _ => None,
        })
        .collect()
}

/// Each backend that is absent, failed or found no device (cause
/// [`BackendCause::NoDevice`], reason `no devices`).
pub fn absent_reasons(backends: &[BackendStatus]) -> Vec<BackendProblem> {
    backends
        .iter()
        .filter_map(|b| match &b.state {
            BackendState::Absent { cause, reason } | BackendState::Failed { cause, reason } => {
                Some(BackendProblem::new(b.backend, *cause, reason.clone()))
            }
            BackendState::Active { devices: 0 } => Some(BackendProblem::new(
                b.backend,
                BackendCause::NoDevice,
                "no devices",
            )),
            BackendState::Active { .. } | BackendState::NotTried => None,
        })
        .collect()
}

/// Every GPU process the probe could find.
#[derive(Debug, Clone, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(Serialize))]
#[non_exhaustive]
pub struct ProcessList {
    /// The devices that were listed (as [`DeviceList::devices`]).
    pub devices: Vec<Device>,
    /// One row per (pid, device), sorted by device then pid.
    pub processes: Vec<GpuProcess>,
    /// Processes that may hold GPU memory but could not be inspected: listed DRM devices are
    /// present, and the process's `fd/` (or a DRM fd's `fdinfo`) cannot be read by this user
    /// (another user's process, seen without privileges), and it is neither a kernel thread nor
    /// a zombie. NVML lists every process whatever the privileges, so NVIDIA devices add none.
    pub hidden_processes: u32,
    /// Devices whose process list could not be read.
    pub failed_devices: Vec<u32>,
    /// Problems that did not stop the query.
    pub warnings: Vec<Warning>,
    /// What each backend did.
    pub backends: Vec<BackendStatus>,
}

impl ProcessList {
    /// Each absent backend and why.
    pub fn absent_reasons(&self) -> Vec<BackendProblem> {
        absent_reasons(&self.backends)
    }

    /// Each backend that failed with no fallback in its place: GPUs may
    /// exist that this list cannot show (see [`failed_reasons`]).
    pub fn failed_reasons(&self) -> Vec<BackendProblem> {
        failed_reasons(&self.backends)
    }

    /// The device at `index`, whose processes this list holds.
    ///
    /// # Errors
    /// As [`DeviceList::device`]; also [`Error::DeviceUnreadable`] when the device's process
    /// list could not be read (the reason is its warning, else the general one).
    pub fn device(&self, index: u32) -> Result<&Device, Error> {
        let dev = pick(&self.devices, || self.absent_reasons(), index)?;
        if self.failed_devices.contains(&index) {
            let reason = self
                .warnings
                .iter()
                .find(|w| w.device_index == Some(index))
                .or_else(|| self.warnings.iter().find(|w| w.device_index.is_none()))
                .map_or_else(
                    || "process list unavailable".to_string(),
                    |w| w.message.clone(),
                );
            return Err(Error::DeviceUnreadable { index, reason });
        }
        Ok(dev)
    }
}

/// The device at `index` in a list, or why there is none: no GPU at all, an index out of
/// range, or a device that refused every query.
fn pick(
    devices: &[Device],
    absent: impl FnOnce() -> Vec<BackendProblem>,
    index: u32,
) -> Result<&Device, Error> {
    let count = u32::try_from(devices.len()).unwrap_or(u32::MAX);
    if count == 0 {
        return Err(Error::NoGpu { reasons: absent() });
    }
    let dev = devices
        .iter()
        .find(|d| d.index == index)
        .ok_or(Error::DeviceIndexOutOfRange { index, count })?;
    match &dev.error {
        Some(reason) => Err(Error::DeviceUnreadable {
            index,
            reason: reason.clone(),
        }),
        None => Ok(dev),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_name_the_device() {
        assert_eq!(
            Warning::device(1, "GPU is lost").to_string(),
            "GPU 1: GPU is lost"
        );
        assert_eq!(Warning::general("x").to_string(), "x");
    }

    #[test]
    fn a_failure_counts_unless_a_fallback_listed_devices() {
        let failed = BackendStatus::new(
            Backend::Nvml,
            BackendState::failed(BackendCause::VersionMismatch, "mismatch"),
        );
        let smi =
            |devices| BackendStatus::new(Backend::NvidiaSmi, BackendState::Active { devices });
        assert_eq!(
            failed_reasons(&[failed.clone(), smi(0)]),
            [BackendProblem::new(
                Backend::Nvml,
                BackendCause::VersionMismatch,
                "mismatch"
            )]
        );
        assert!(failed_reasons(&[failed, smi(1)]).is_empty());
        let absent = BackendStatus::new(
            Backend::Nvml,
            BackendState::absent(BackendCause::LibraryMissing, "no lib"),
        );
        assert!(failed_reasons(&[absent]).is_empty());
    }

    #[test]
    fn absent_reasons_list_failed_and_empty_backends() {
        let list = DeviceList {
            backends: vec![
                BackendStatus::new(
                    Backend::Nvml,
                    BackendState::absent(BackendCause::LibraryMissing, "no lib"),
                ),
                BackendStatus::new(Backend::NvidiaSmi, BackendState::Active { devices: 0 }),
                BackendStatus::new(Backend::Drm, BackendState::NotTried),
            ],
            ..DeviceList::default()
        };
        assert_eq!(
            list.absent_reasons(),
            vec![
                BackendProblem::new(Backend::Nvml, BackendCause::LibraryMissing, "no lib"),
                BackendProblem::new(Backend::NvidiaSmi, BackendCause::NoDevice, "no devices")
            ]
        );
    }

    #[test]
    fn the_device_lookup_says_why_there_is_none() {
        use crate::types::source::{Source, Vendor};
        let mut list = ProcessList {
            backends: vec![BackendStatus::new(
                Backend::Nvml,
                BackendState::absent(BackendCause::LibraryMissing, "no lib"),
            )],
            ..ProcessList::default()
        };
        assert!(matches!(
            list.device(0),
            Err(Error::NoGpu { reasons })
                if reasons.len() == 1 && reasons[0].cause == BackendCause::LibraryMissing
                    && reasons[0].to_string() == "NVML: no lib"
        ));
        let mut lost = Device::new(2, Vendor::Nvidia, Source::Nvml);
        lost.error = Some("GPU is lost".into());
        list.devices = vec![
            Device::new(0, Vendor::Nvidia, Source::Nvml),
            Device::new(1, Vendor::Nvidia, Source::Nvml),
            lost,
        ];
        let why = |list: &ProcessList, index| list.device(index).unwrap_err().to_string();
        assert_eq!(list.device(1).unwrap().index, 1);
        assert_eq!(
            why(&list, 9),
            "device index 9 out of range (have 3 devices)"
        );
        assert_eq!(why(&list, 2), "GPU 2: GPU is lost");

        // A device whose process list failed: its own warning, else the general one.
        list.failed_devices = vec![0, 1];
        assert_eq!(why(&list, 1), "GPU 1: process list unavailable");
        list.warnings = vec![
            Warning::general("process list unavailable: timed out"),
            Warning::device(1, "compute process list unavailable: GPU is lost"),
        ];
        assert_eq!(
            [why(&list, 1), why(&list, 0)],
            [
                "GPU 1: compute process list unavailable: GPU is lost",
                "GPU 0: process list unavailable: timed out"
            ]
        );
        let devices = DeviceList {
            devices: list.devices.clone(),
            ..DeviceList::default()
        };
        assert_eq!(devices.device(0).unwrap().index, 0);
    }
}
