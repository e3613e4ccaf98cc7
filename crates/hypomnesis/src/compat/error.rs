//! Upstream hypomnesis 0.2's error, [`HypomnesisError`], returned by the upstream-compatible API
//! at the crate root (`device_info`, `Snapshot::now`, `SpillTracker::new`, …) with upstream's
//! variants and meanings, and upstream's [`Result`] alias (public as `hypomnesis::error::…` and
//! at the crate root).
//!
//! [`Result`] defaults to upstream's error (`hypomnesis::Result<T>` is upstream's alias); the
//! truthful API spells `Result<T, Error>`.

use std::io;

/// `Result` with upstream's [`HypomnesisError`] (`hypomnesis::Result<T>`, as upstream), or with
/// any error given as the second parameter (the truthful API uses `Result<T, Error>`).
pub type Result<T, E = HypomnesisError> = std::result::Result<T, E>;

/// Upstream hypomnesis 0.2's error: what the upstream-compatible API at the crate root returns.
///
/// # Display vs structured fields
/// `Display` is a default English one-liner whose wording is not part of the API; the fields
/// (`index` and `count`, `denied`, the inner strings) are the data. Match on the variants (with
/// a wildcard arm: the enum is `#[non_exhaustive]`) to phrase them yourself.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HypomnesisError {
    /// This process's RAM could not be read.
    #[error("RAM query failed: {0}")]
    Ram(String),
    /// The NVML library loaded but could not start or count devices, and no other backend
    /// answered (for example a library/driver version mismatch at `nvmlInit_v2`).
    #[error("NVML error: {0}")]
    Nvml(String),
    /// A DXGI (Windows) query failed.
    #[error("DXGI error: {0}")]
    Dxgi(String),
    /// A PDH (Windows performance counter) query failed.
    #[error("PDH error: {0}")]
    Pdh(String),
    /// The `nvidia-smi` fallback failed.
    #[error("nvidia-smi error: {0}")]
    NvidiaSmi(String),
    /// A device index beyond the number of devices.
    #[error("device index {index} out of range (have {count} devices)")]
    DeviceIndexOutOfRange {
        /// The index asked for.
        index: u32,
        /// How many devices there are.
        count: u32,
    },
    /// No backend could measure anything (no GPU, or every backend failed or is disabled).
    #[cfg_attr(
        target_os = "windows",
        error(
            "no GPU measurement source available (NVML, DXGI, PDH, and nvidia-smi all failed or are disabled)"
        )
    )]
    #[cfg_attr(
        target_os = "macos",
        error(
            "no GPU measurement source available (Metal, NVML, and nvidia-smi all failed or are disabled)"
        )
    )]
    #[cfg_attr(
        not(any(target_os = "windows", target_os = "macos")),
        error(
            "no GPU measurement source available (NVML and nvidia-smi both failed or are disabled)"
        )
    )]
    NoGpuSource,
    /// No other process's GPU figures could be read and at least one was refused (a sandbox).
    #[error(
        "process list unreadable ({denied} refused, none other than the caller's could be read)"
    )]
    ProcessListDenied {
        /// How many processes were refused.
        denied: u32,
    },
    /// An I/O error (kept for `?` with `std::io` calls).
    #[error(transparent)]
    Io(#[from] io::Error),
}
