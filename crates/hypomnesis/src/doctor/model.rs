//! The doctor's vocabulary: which [`Platform`]'s checks apply, a [`Check`] and its
//! [`Status`].

#[cfg(feature = "serde")]
use serde::Serialize;

use crate::types::spelling::spelled;

/// Which platform's checks apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Platform {
    /// Every check of the table above.
    Linux,
    /// `nvml` (`nvml.dll`), `nvidia-smi`, `accounting`, and `gpu-backends` (DXGI and PDH).
    Windows,
    /// `nvml` (no NVIDIA driver exists for current macOS), `nvidia-smi`, `accounting`, and
    /// `gpu-backends` (Metal).
    MacOs,
}

impl Platform {
    /// This build's platform (a Unix other than macOS gets Linux's checks).
    pub const fn current() -> Platform {
        if cfg!(windows) {
            Platform::Windows
        } else if cfg!(target_os = "macos") {
            Platform::MacOs
        } else {
            Platform::Linux
        }
    }
}

spelled! {
    /// A check's verdict: `ok`, `warn` or `fail`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
    #[non_exhaustive]
    pub enum Status {
        /// Nothing is missing because of it.
        Ok = "ok",
        /// Some figures are missing, approximate or hidden because of it.
        Warn = "warn",
        /// A backend cannot work: figures are missing.
        Fail = "fail",
    }
}

/// One check: what it saw and, when not ok, the remedy.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize))]
#[non_exhaustive]
pub struct Check {
    /// The check's id (`nvml`, `hidepid`, …; see the [module docs](super)).
    pub id: &'static str,
    /// The verdict.
    pub status: Status,
    /// What was seen, in one line.
    pub saw: String,
    /// What to do about it, in one line (`None` when ok, or when nothing can be done).
    pub remedy: Option<String>,
}

impl Check {
    pub(crate) fn ok(id: &'static str, saw: impl Into<String>) -> Check {
        Check {
            id,
            status: Status::Ok,
            saw: saw.into(),
            remedy: None,
        }
    }

    pub(crate) fn warn(id: &'static str, saw: impl Into<String>, remedy: Option<String>) -> Check {
        Check {
            id,
            status: Status::Warn,
            saw: saw.into(),
            remedy,
        }
    }

    pub(crate) fn fail(id: &'static str, saw: impl Into<String>, remedy: Option<String>) -> Check {
        Check {
            id,
            status: Status::Fail,
            saw: saw.into(),
            remedy,
        }
    }
}

/// The name of the `cgroup` check's probe group: this prefix and the doctor's pid.
pub const PROBE_CGROUP_PREFIX: &str = "hmn-doctor-";
