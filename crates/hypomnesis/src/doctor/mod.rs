//! `hmn doctor`: why a figure could be missing on this machine, one check at a time, each with
//! what it saw and the exact remedy.
//!
//! Two halves, so fixtures test every verdict: [`gather`] reads the [`Facts`] (NVML's state
//! and versions, device nodes, the proc mount, capabilities, the kernel, cgroups, the PID
//! namespace) through the [`Roots`](crate::Roots) and probe options it is given, and
//! [`checks`] turns facts into [`Check`]s without any I/O. [`run`] does both.
//!
//! | id | looks at |
//! |---|---|
//! | `nvml` | NVML found, loadable, initialised; library, driver and kernel-module versions (mismatch: `nvmlInit` code 18) |
//! | `nvidia-smi` | the fallback program |
//! | `accounting` | NVIDIA accounting mode (`hmn run`'s exact VRAM peaks) |
//! | `persistence` | NVIDIA persistence mode |
//! | `device-nodes` | `/dev/nvidia*` and `/dev/dri/*`: access, and membership of their groups |
//! | `hidepid` | the proc mount's `hidepid` |
//! | `ptrace` | capabilities to read other users' DRM fdinfo (and Yama's `ptrace_scope`), and whether they are a user namespace's own |
//! | `kernel` | the kernel release against the fdinfo keys each present DRM driver prints |
//! | `suspended` | runtime-suspended DRM devices (not read, so no figures) |
//! | `cgroup` | the cgroup version, and whether `hmn run` can make its memory cgroup |
//! | `container` | whether `hmn` runs in a container, and which PID namespace `/proc` shows |
//! | `gpu-backends` | Windows and macOS only (with `nvml`, `nvidia-smi`, `accounting`): DXGI / Metal |
//!
//! Off Linux there is no `/proc`, `/sys` or cgroup to read: [`Platform`] picks the checks, and
//! the remedies name that platform's files and tools.

mod checks;
mod facts;
mod kernel;
mod portable;
mod userns;

pub use checks::checks;
pub use facts::{
    CgroupFacts, DevNode, DrmFacts, Facts, NvmlDeviceFacts, NvmlFacts, NvmlState, ProcMount,
    UserFacts, gather, parse_cap_eff, parse_nvidia_version, parse_proc_mount,
};
pub use kernel::{FdinfoSupport, fdinfo_support, parse_release};
pub use userns::{is_initial_uid_map, uid_outside};

#[cfg(feature = "serde")]
use serde::Serialize;

use crate::ProbeOptions;

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

/// A check's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(Serialize), serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum Status {
    /// Nothing is missing because of it.
    Ok,
    /// Some figures are missing, approximate or hidden because of it.
    Warn,
    /// A backend cannot work: figures are missing.
    Fail,
}

impl Status {
    /// `ok`, `warn` or `fail`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Fail => "fail",
        }
    }
}

/// One check: what it saw and, when not ok, the remedy.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize))]
#[non_exhaustive]
pub struct Check {
    /// The check's id (`nvml`, `hidepid`, …; see the [module docs](self)).
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

/// Every check's verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize))]
#[non_exhaustive]
pub struct Report {
    /// The checks, in the order of the [module docs](self).
    pub checks: Vec<Check>,
}

impl Report {
    /// The worst verdict (`Ok` for no checks).
    pub fn worst(&self) -> Status {
        self.checks
            .iter()
            .map(|c| c.status)
            .max()
            .unwrap_or(Status::Ok)
    }

    /// `hmn doctor`'s exit status: 0 all ok, 1 warnings, 2 failures.
    pub fn exit_code(&self) -> u8 {
        match self.worst() {
            Status::Ok => 0,
            Status::Warn => 1,
            Status::Fail => 2,
        }
    }
}

/// The name of the `cgroup` check's probe group: this prefix and the doctor's pid.
pub const PROBE_CGROUP_PREFIX: &str = "hmn-doctor-";

/// Gathers the facts under `options` and checks them. The `cgroup` check creates and removes
/// an empty group, `hmn-doctor-<pid>` ([`PROBE_CGROUP_PREFIX`]), as `hmn run` would make its
/// own, after removing such groups of doctors that were killed before they could
/// ([`crate::cgroup::remove_stale`]; `hmn run` removes them too); nothing else is written.
pub fn run(options: &ProbeOptions) -> Report {
    Report {
        checks: checks(&gather(options)),
    }
}

#[cfg(test)]
mod tests;
