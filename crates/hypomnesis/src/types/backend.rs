//! The GPU backends and what became of each during a query: [`Backend`], [`BackendStatus`],
//! [`BackendState`], and why one is absent or failed as a value callers can match:
//! [`BackendCause`] (with the text shown beside it), gathered as [`BackendProblem`]s.

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

spelled! {
    /// Why a backend is absent or failed, for callers that branch on it (the text beside it in
    /// [`BackendState`] is for people). Spelled in JSON as `"cause": "library-missing"` etc.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    #[non_exhaustive]
    pub enum BackendCause {
        /// Turned off in the probe's options.
        Disabled = "disabled",
        /// Compiled out of this build, or not on this platform.
        NotBuilt = "not-built",
        /// No library or program to load: no driver installed (`libnvidia-ml.so.1` unknown to
        /// the loader, `nvidia-smi` not on `PATH`).
        LibraryMissing = "library-missing",
        /// A library or program is there but cannot be used (does not load, is not NVML, is not
        /// executable).
        LibraryUnusable = "library-unusable",
        /// The kernel driver is not loaded.
        DriverNotLoaded = "driver-not-loaded",
        /// The driver is there and found no device.
        NoDevice = "no-device",
        /// Access to the driver or its files was refused.
        PermissionDenied = "permission-denied",
        /// The library and the kernel driver are of different versions (or the library lacks
        /// a call this one needs).
        VersionMismatch = "version-mismatch",
        /// The driver or program did not answer in time.
        Timeout = "timeout",
        /// A call failed otherwise (the text says which).
        CallFailed = "call-failed",
        /// The driver or program answered something this crate does not understand.
        BadAnswer = "bad-answer",
    }
}

/// One backend that is absent or failed (or found no device), and why: what
/// [`crate::Error::NoGpu`] lists and [`absent_reasons`](crate::types::absent_reasons) returns.
/// `Display` is `backend: reason`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize))]
#[non_exhaustive]
pub struct BackendProblem {
    /// The backend.
    pub backend: Backend,
    /// Why, as a value.
    pub cause: BackendCause,
    /// Why, in words.
    pub reason: String,
}

impl BackendProblem {
    /// A problem record.
    pub fn new(backend: Backend, cause: BackendCause, reason: impl Into<String>) -> Self {
        BackendProblem {
            backend,
            cause,
            reason: reason.into(),
        }
    }
}

impl std::fmt::Display for BackendProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.backend, self.reason)
    }
}

/// Why a driver could not answer one question about a device (NVML's accounting and
/// persistence modes in `hmn doctor`, an XID wait), for callers that branch on it; `Display`
/// is the text `hmn` shows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum QueryError {
    /// The device or driver does not support the call.
    #[error("not supported by this device or driver")]
    NotSupported,
    /// This platform has no such call (NVML's persistence mode off Linux).
    #[error("not on this platform")]
    NotOnThisPlatform,
    /// The caller may not make the call.
    #[error("no permission")]
    NoPermission,
    /// The GPU fell off the bus or needs a reset: every call to it fails until then.
    #[error("the GPU is lost (fell off the bus or needs a reset)")]
    GpuLost,
    /// The driver's library lacks the call (an older driver): the symbol.
    #[error("symbol missing from this driver's NVML ({0})")]
    MissingSymbol(String),
    /// Another failure, in the driver's words.
    #[error("{0}")]
    Failed(String),
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
        /// Why, as a value.
        cause: BackendCause,
        /// Why, in words (library missing, driver not loaded, binary not found…).
        reason: String,
    },
    /// The backend was not needed (a fallback whose primary worked).
    NotTried,
    /// The backend is here but broken (an NVML library that does not match the driver, refused
    /// access, a device count that fails): GPUs may exist that it cannot show.
    Failed {
        /// Why, as a value.
        cause: BackendCause,
        /// What failed, in words.
        reason: String,
    },
}

impl BackendState {
    /// An absent backend.
    pub fn absent(cause: BackendCause, reason: impl Into<String>) -> Self {
        BackendState::Absent {
            cause,
            reason: reason.into(),
        }
    }

    /// A failed backend.
    pub fn failed(cause: BackendCause, reason: impl Into<String>) -> Self {
        BackendState::Failed {
            cause,
            reason: reason.into(),
        }
    }
}

impl BackendStatus {
    /// A status record.
    pub const fn new(backend: Backend, state: BackendState) -> Self {
        BackendStatus { backend, state }
    }
}
