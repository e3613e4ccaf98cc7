//! The facts `hmn doctor` judges and the pure parsers of the files they come from; the one
//! function that reads them is [`super::gather`].

use std::path::{Path, PathBuf};

use crate::system::pidns::PidView;
use crate::system::roots::Roots;
use crate::types::{BackendStatus, Device, MemoryHealth, QueryError, Unattributed};

use super::model::Platform;

/// The library NVML is loaded by when no path is given.
pub(super) const DEFAULT_LIBRARY: &str = if cfg!(windows) {
    "nvml.dll"
} else {
    "libnvidia-ml.so.1"
};

/// How NVML came up.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum NvmlState {
    /// Loaded and initialised.
    Loaded,
    /// Not here (no library, driver not loaded, no GPU, disabled): the reason.
    Absent(String),
    /// Here but broken: the `nvmlInit` return code when known, and the reason.
    Failed {
        /// `nvmlInit`'s code (18: the library does not match the kernel module).
        code: Option<u32>,
        /// In words.
        reason: String,
    },
}

/// One NVML device's modes (`Err`: why it could not be read).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NvmlDeviceFacts {
    /// NVML index.
    pub index: u32,
    /// Accounting mode.
    pub accounting: Result<bool, QueryError>,
    /// Persistence mode.
    pub persistence: Result<bool, QueryError>,
}

impl NvmlDeviceFacts {
    /// A device's facts.
    pub fn new(
        index: u32,
        accounting: Result<bool, QueryError>,
        persistence: Result<bool, QueryError>,
    ) -> NvmlDeviceFacts {
        NvmlDeviceFacts {
            index,
            accounting,
            persistence,
        }
    }
}

/// NVML's facts.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NvmlFacts {
    /// The library asked for (a path, or the soname).
    pub library: String,
    /// The file the loader mapped, when known (`<proc>/self/maps`).
    pub loaded_from: Option<PathBuf>,
    /// How it came up.
    pub state: NvmlState,
    /// `nvmlSystemGetNVMLVersion` (read without a successful init too).
    pub library_version: Option<String>,
    /// `nvmlSystemGetDriverVersion`.
    pub driver_version: Option<String>,
    /// `nvmlSystemGetCudaDriverVersion` (`12040` is 12.4).
    pub cuda_version: Option<i32>,
    /// Per device.
    pub devices: Vec<NvmlDeviceFacts>,
}

impl NvmlFacts {
    /// Facts with only a state.
    pub fn new(library: impl Into<String>, state: NvmlState) -> NvmlFacts {
        NvmlFacts {
            library: library.into(),
            loaded_from: None,
            state,
            library_version: None,
            driver_version: None,
            cuda_version: None,
            devices: Vec::new(),
        }
    }
}

/// A device node.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DevNode {
    /// Its path.
    pub path: PathBuf,
    /// Its group id.
    pub gid: u32,
    /// The group's name, when it resolves.
    pub group: Option<String>,
    /// Its permission bits.
    pub mode: u32,
    /// Whether this process may open it for reading and writing.
    pub accessible: bool,
}

/// Who `hmn` runs as.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct UserFacts {
    /// Effective UID.
    pub euid: u32,
    /// Effective GID.
    pub egid: u32,
    /// Supplementary groups.
    pub groups: Vec<u32>,
    /// `CapEff` of `<proc>/self/status`.
    pub cap_eff: Option<u64>,
    /// `<proc>/self/uid_map` (`None`: unreadable): anything but the initial namespace's
    /// identity map means a user namespace, whose uid 0 and capabilities are its own
    /// ([`super::is_initial_uid_map`]).
    pub uid_map: Option<String>,
}

impl UserFacts {
    /// Facts for a user.
    pub fn new(euid: u32, egid: u32, groups: Vec<u32>, cap_eff: Option<u64>) -> UserFacts {
        UserFacts {
            euid,
            egid,
            groups,
            cap_eff,
            uid_map: None,
        }
    }

    /// Whether the user is in group `gid`.
    pub fn in_group(&self, gid: u32) -> bool {
        self.egid == gid || self.groups.contains(&gid)
    }

    /// Whether the effective capability `bit` is set (`None`: unknown).
    pub fn has_cap(&self, bit: u32) -> Option<bool> {
        self.cap_eff.map(|c| c & (1u64 << bit) != 0)
    }
}

/// The proc mount's options that hide processes.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProcMount {
    /// `hidepid=` (`0`, `1`, `2`, `invisible`, `noaccess`, `ptraceable`, or absent).
    pub hidepid: Option<String>,
    /// `gid=`: the group exempt from it.
    pub gid: Option<u32>,
}

/// A DRM device, as the kernel-version and suspended checks need it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DrmFacts {
    /// The kernel driver.
    pub driver: String,
    /// PCI address or platform name.
    pub address: String,
    /// Whether it is runtime-suspended.
    pub suspended: bool,
}

impl DrmFacts {
    /// A device's facts.
    pub fn new(driver: &str, address: &str, suspended: bool) -> DrmFacts {
        DrmFacts {
            driver: driver.to_string(),
            address: address.to_string(),
            suspended,
        }
    }
}

/// Why no `nvidia-smi` was found (the `nvidia-smi` check); `Display` is the text it prints
/// after "nvidia-smi".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SmiMissing {
    /// The configured path is not an executable file.
    #[error("{} not found or not executable", path.display())]
    NotExecutable {
        /// The path configured (`--nvidia-smi`, `HMN_NVIDIA_SMI`).
        path: PathBuf,
    },
    /// No executable `nvidia-smi` in any directory of `PATH`.
    #[error("not on PATH")]
    NotOnPath,
    /// Not looked for (facts made for a fixture).
    #[error("not looked for")]
    NotLookedFor,
}

/// Why `hmn run` cannot make its memory cgroup here (the `cgroup` check); `Display` is the
/// text the check prints.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CgroupUnusable {
    /// The group could not be created: why, in the words of its
    /// [`CgroupError`](crate::cgroup::CgroupError) (no hierarchy, no permission, no peak file).
    #[error("{0}")]
    NotCreated(String),
    /// The group was created but could not be removed again: the error's words.
    #[error("{0}")]
    NotRemoved(String),
    /// Not looked for (off Linux; facts made for a fixture).
    #[error("not looked for")]
    NotLookedFor,
}

/// What the cgroup check saw.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CgroupFacts {
    /// `v2`, `hybrid` (v1 memory controller with a v2 hierarchy), `v1`, or `none`.
    pub version: &'static str,
    /// `Ok(group)`: `hmn run` can create its memory cgroup there (tried, and removed again);
    /// `Err(why)` otherwise.
    pub creatable: Result<PathBuf, CgroupUnusable>,
    /// `HMN_NO_CGROUP` is set: `hmn run` makes none.
    pub disabled_by_env: bool,
}

impl CgroupFacts {
    /// Facts for a cgroup setup.
    pub fn new(
        version: &'static str,
        creatable: Result<PathBuf, CgroupUnusable>,
        disabled_by_env: bool,
    ) -> CgroupFacts {
        CgroupFacts {
            version,
            creatable,
            disabled_by_env,
        }
    }
}

/// One device as these checks see it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeviceMemoryFacts {
    /// Its index.
    pub index: u32,
    /// Its name, or `unknown GPU`.
    pub name: String,
    /// Its memory, bytes.
    pub total_bytes: Option<u64>,
    /// Its memory health, when read.
    pub health: Option<MemoryHealth>,
}

impl DeviceMemoryFacts {
    /// The facts of `d`.
    pub fn of(d: &Device) -> DeviceMemoryFacts {
        DeviceMemoryFacts {
            index: d.index,
            name: d.name_or_unknown().to_string(),
            total_bytes: d.memory.total_bytes,
            health: d.health.clone(),
        }
    }
}

/// What `gather` read for these checks: every device (with its health) and its unattributed
/// memory.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MemoryFacts {
    /// The devices.
    pub devices: Vec<DeviceMemoryFacts>,
    /// Per device ([`crate::ProcessList::unattributed`]).
    pub unattributed: Vec<Unattributed>,
}

impl MemoryFacts {
    /// Facts from a listing: its devices (health read) and their unattributed memory.
    pub fn of(list: &crate::types::ProcessList) -> MemoryFacts {
        MemoryFacts {
            devices: list.devices.iter().map(DeviceMemoryFacts::of).collect(),
            unattributed: list.unattributed(),
        }
    }
}

/// Everything the checks judge.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Facts {
    /// Where `/proc`, `/sys`, `/dev` are.
    pub roots: Roots,
    /// NVML.
    pub nvml: NvmlFacts,
    /// The NVIDIA kernel module's version (`<proc>/driver/nvidia/version`, else
    /// `<sys>/module/nvidia/version`).
    pub kernel_module_version: Option<String>,
    /// NVIDIA display/3D controllers on the PCI bus (`<sys>/bus/pci/devices`).
    pub nvidia_pci_devices: u32,
    /// The `nvidia-smi` found (configured, or on `PATH`), or why none.
    pub nvidia_smi: Result<PathBuf, SmiMissing>,
    /// `/dev/nvidia*` and `/dev/dri/*` nodes.
    pub dev_nodes: Vec<DevNode>,
    /// Who runs.
    pub user: UserFacts,
    /// The proc mount (`None`: not found in `<proc>/self/mountinfo`).
    pub proc_mount: Option<ProcMount>,
    /// `<proc>/sys/kernel/yama/ptrace_scope` (`None`: no Yama).
    pub ptrace_scope: Option<u32>,
    /// `<proc>/sys/kernel/osrelease`.
    pub kernel_release: Option<String>,
    /// DRM devices.
    pub drm: Vec<DrmFacts>,
    /// cgroups.
    pub cgroup: CgroupFacts,
    /// The PID namespace verdict.
    pub pid: PidView,
    /// The platform the facts were read on (which checks apply).
    pub platform: Platform,
    /// The probe's backend states (off Linux: DXGI, Metal).
    pub gpu_backends: Vec<BackendStatus>,
    /// Devices with their memory health, and their unattributed memory (`None`: not read).
    pub memory: Option<MemoryFacts>,
    /// Each device's memory pool (the `memory-pool` check).
    pub pools: Vec<super::pools::PoolFacts>,
    /// Each NVIDIA GPU's compute mode (the `compute-mode` check).
    pub modes: Vec<super::modes::ModeFacts>,
}

impl Facts {
    /// Facts for a fixture: everything absent or empty, to be filled in.
    pub fn empty(roots: Roots, pid: PidView) -> Facts {
        Facts {
            roots,
            nvml: NvmlFacts::new(DEFAULT_LIBRARY, NvmlState::Absent("not looked for".into())),
            kernel_module_version: None,
            nvidia_pci_devices: 0,
            nvidia_smi: Err(SmiMissing::NotLookedFor),
            dev_nodes: Vec::new(),
            user: UserFacts::default(),
            proc_mount: None,
            ptrace_scope: None,
            kernel_release: None,
            drm: Vec::new(),
            cgroup: CgroupFacts::new("none", Err(CgroupUnusable::NotLookedFor), false),
            pid,
            platform: Platform::Linux,
            gpu_backends: Vec::new(),
            memory: None,
            pools: Vec::new(),
            modes: Vec::new(),
        }
    }
}

/// `CapEff` of a `status` text (pure).
pub fn parse_cap_eff(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
}

/// The NVIDIA kernel module's version from `/proc/driver/nvidia/version`'s first line (both
/// spellings: `… Kernel Module  550.135  …` and `… Open Kernel Module for x86_64  580.95.05 …`)
/// or from `/sys/module/nvidia/version` (the bare version) (pure).
pub fn parse_nvidia_version(text: &str) -> Option<String> {
    let first = text.lines().next()?.trim();
    let digits = |t: &&str| t.chars().next().is_some_and(|c| c.is_ascii_digit()) && t.contains('.');
    match first.find("Module") {
        Some(at) => first[at..].split_whitespace().find(digits),
        None => first.split_whitespace().next().filter(digits),
    }
    .map(str::to_string)
}

/// The options of the proc mount at `mount_point` in a `mountinfo` text (pure).
pub fn parse_proc_mount(mountinfo: &str, mount_point: &Path) -> Option<ProcMount> {
    let want = mount_point.to_string_lossy();
    mountinfo.lines().find_map(|l| {
        let (before, after) = l.split_once(" - ")?;
        let point = before.split(' ').nth(4)?;
        let mut rest = after.split(' ');
        let fstype = rest.next()?;
        let _source = rest.next()?;
        let options = rest.next().unwrap_or_default();
        (fstype == "proc" && point == want).then(|| {
            let opt = |k: &str| {
                options
                    .split(',')
                    .find_map(|o| o.strip_prefix(k).map(str::to_string))
            };
            ProcMount {
                hidepid: opt("hidepid="),
                gid: opt("gid=").and_then(|g| g.parse().ok()),
            }
        })
    })
}
