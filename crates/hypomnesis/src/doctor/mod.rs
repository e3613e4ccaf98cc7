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
//! | `memory-pool` | Linux and macOS: which memory each GPU allocates from (dedicated VRAM, an AMD APU's carve-out + GTT, host RAM) and the evidence; warns where it cannot be told |
//! | `memory-health` | every device's ECC counts, remapped rows or retired pages, amdgpu RAS counters: a pending remap or retirement asks for a GPU reset or reboot, uncorrectable errors fail |
//! | `unattributed` | device memory no listed process accounts for, and the likely causes (hidden processes, other PID namespaces, MIG, an MPS server, the driver) |
//! | `compute-mode` | each NVIDIA GPU's compute mode: `prohibited` warns (nothing can run CUDA there), exclusive ones are said, the default goes unsaid (last, on every platform) |
//! | `gpu-backends` | Windows and macOS only (with `nvml`, `nvidia-smi`, `accounting`): DXGI / Metal |
//!
//! Off Linux there is no `/proc`, `/sys` or cgroup to read: [`Platform`] picks the checks, and
//! the remedies name that platform's files and tools.

// Layer 5 (ARCHITECTURE.md "Layers"): why a figure could be missing. May import every layer
// below (`types` to `measure`); never `compat`.

mod checks;
mod facts;
mod gather;
mod kernel;
mod memory;
mod model;
mod modes;
mod pools;
mod portable;
mod userns;

pub use facts::{
    CgroupFacts, CgroupUnusable, DevNode, DeviceMemoryFacts, DrmFacts, Facts, MemoryFacts,
    NvmlDeviceFacts, NvmlFacts, NvmlState, ProcMount, SmiMissing, UserFacts, parse_cap_eff,
    parse_nvidia_version, parse_proc_mount,
};
pub use gather::gather;
pub use kernel::{FdinfoSupport, fdinfo_support, parse_release};
pub use model::{Check, PROBE_CGROUP_PREFIX, Platform, Status};
pub use modes::ModeFacts;
pub use pools::PoolFacts;
pub use userns::{is_initial_uid_map, uid_outside};

#[cfg(feature = "serde")]
use serde::Serialize;

use crate::probe::ProbeOptions;

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

/// Every check over the facts, in the order of the [module docs](self): Linux's
/// (`checks.rs`), or another platform's (`portable.rs`).
pub fn checks(f: &Facts) -> Vec<Check> {
    let mut out = if f.platform == Platform::Linux {
        checks::linux(f)
    } else {
        portable::checks(f)
    };
    out.push(memory::health(f));
    out.push(memory::unattributed(f));
    out.push(modes::compute_mode(&f.modes));
    out
}

/// Gathers the facts under `options` and checks them. The `cgroup` check creates and removes
/// an empty group, `hmn-doctor-<pid>-<start>` ([`PROBE_CGROUP_PREFIX`], [`crate::system::cgroup::transient_name`]), as `hmn run` would make its
/// own, after removing such groups of doctors that were killed before they could
/// ([`crate::system::cgroup::remove_stale`]; `hmn run` removes them too); nothing else is written.
pub fn run(options: &ProbeOptions) -> Report {
    Report {
        checks: checks(&gather(options)),
    }
}

#[cfg(test)]
mod tests;
