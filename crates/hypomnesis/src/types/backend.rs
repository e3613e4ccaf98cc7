//! The GPU backends and what became of each during a query: [`Backend`], [`BackendStatus`],
//! [`BackendState`].

#[cfg(feature = "serde")]
use serde::Serialize;

use super::spelling::spelled;

spelled! {
    /// A GPU backend. Spelled (as shown and in JSON) `NVML`, `nvidia-smi`, `DRM`, `DXGI`,
    /// `Metal`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
    #[non_exhaustive]
    pub enum Backend {
        /// NVIDIA Management Library.
        Nvml = "NVML",
        /// The `nvidia-smi` command, NVML's fallback.
        NvidiaSmi = "nvidia-smi",
        /// DRM: AMD, Intel and other kernel GPU drivers (sysfs, fdinfo, KFD).
        Drm = "DRM",
        /// Windows DXGI and PDH (WDDM adapters and their per-process counters).
        Dxgi = "DXGI",
        /// macOS Metal.
        Metal = "Metal",
    }
}

/// Compares with the name as shown (`backend == "NVML"`).
impl PartialEq<&str> for Backend {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// A GPU backend and what became of it during a query.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize))]
#[non_exhaustive]
pub struct BackendStatus {
    /// The backend.
    pub backend: Backend,
    /// Whether it was used.
    #[cfg_attr(feature = "serde", serde(flatten))]
    pub state: BackendState,
}

/// What became of a backend.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(Serialize),
    serde(tag = "state", rename_all = "snake_case")
)]
#[non_exhaustive]
pub enum BackendState {
    /// The backend answered; `devices` is how many devices it contributed.
    Active {
        /// Devices it contributed.
        devices: u32,
    },
    /// The backend is not available here.
    Absent {
        /// Why (library missing, driver not loaded, binary not found…).
        reason: String,
    },
    /// The backend was not needed (a fallback whose primary worked).
    NotTried,
    /// The backend is here but broken (an NVML library that does not match the driver, refused
    /// access, a device count that fails): GPUs may exist that it cannot show.
    Failed {
        /// What failed.
        reason: String,
    },
}

impl BackendStatus {
    /// A status record.
    pub const fn new(backend: Backend, state: BackendState) -> Self {
        BackendStatus { backend, state }
    }
}
