//! Where the kernel's files are: [`Roots`] and [`SystemInfo`].
//!
//! Every reader in this crate takes a [`Roots`] value instead of hard-coding `/proc` and `/sys`.
//! Tests point it at fixture trees; users running in a container point it at the host's `/proc`
//! mounted elsewhere (`HMN_PROC_ROOT=/host/proc`). [`SystemInfo`] carries the machine constants
//! (page size, clock ticks) a parser needs, so a captured fixture is complete without reading
//! anything from the machine running the test.

use std::path::{Path, PathBuf};

/// Environment variable naming the proc root (default `/proc`).
pub const ENV_PROC_ROOT: &str = "HMN_PROC_ROOT";
/// Environment variable naming the sys root (default `/sys`).
pub const ENV_SYS_ROOT: &str = "HMN_SYS_ROOT";
/// Environment variable naming the dev root (default `/dev`).
pub const ENV_DEV_ROOT: &str = "HMN_DEV_ROOT";
/// Environment variable naming the shared-data root (default `/usr/share`), where the system's
/// `hwdata/pci.ids`, `misc/pci.ids` and `libdrm/amdgpu.ids` are looked for.
pub const ENV_SHARE_ROOT: &str = "HMN_SHARE_ROOT";
/// Environment variable naming the log root (default `/var/log`), where the kubelet keeps
/// `pods/` and `containers/` (workload names).
pub const ENV_LOG_ROOT: &str = "HMN_LOG_ROOT";
/// Environment variable naming Docker's data root (default `/var/lib/docker`).
pub const ENV_DOCKER_ROOT: &str = "HMN_DOCKER_ROOT";
/// Environment variable naming containerd's state root (default `/run/containerd`).
pub const ENV_CONTAINERD_ROOT: &str = "HMN_CONTAINERD_ROOT";
/// Environment variable naming CRI-O's (containers/storage) run root (default
/// `/run/containers/storage`).
pub const ENV_CRIO_ROOT: &str = "HMN_CRIO_ROOT";

/// The roots of the kernel's pseudo-filesystems.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Roots {
    /// The procfs root, normally `/proc`.
    pub proc: PathBuf,
    /// The sysfs root, normally `/sys`.
    pub sys: PathBuf,
    /// The device root, normally `/dev`.
    pub dev: PathBuf,
    /// The shared-data root, normally `/usr/share`: device name databases (`pci.ids`,
    /// `amdgpu.ids`) are read from it, never bundled.
    pub share: PathBuf,
    /// The log root, normally `/var/log`: the kubelet's `pods/` and `containers/` name the
    /// pods and containers (`hypomnesis::workload::names`).
    pub log: PathBuf,
    /// Docker's data root, normally `/var/lib/docker` (`containers/<id>/config.v2.json`).
    pub docker: PathBuf,
    /// containerd's state root, normally `/run/containerd` (runtime bundles' `config.json`).
    pub containerd: PathBuf,
    /// CRI-O's run root, normally `/run/containers/storage` (`overlay-containers/<id>/
    /// userdata/config.json`).
    pub crio: PathBuf,
}

impl Default for Roots {
    fn default() -> Self {
        Roots {
            proc: PathBuf::from("/proc"),
            sys: PathBuf::from("/sys"),
            dev: PathBuf::from("/dev"),
            share: PathBuf::from("/usr/share"),
            log: PathBuf::from("/var/log"),
            docker: PathBuf::from("/var/lib/docker"),
            containerd: PathBuf::from("/run/containerd"),
            crio: PathBuf::from("/run/containers/storage"),
        }
    }
}

impl Roots {
    /// The system roots (`/proc`, `/sys`, `/dev`), ignoring the environment.
    pub fn system() -> Self {
        Roots::default()
    }

    /// The roots from `HMN_PROC_ROOT`, `HMN_SYS_ROOT`, `HMN_DEV_ROOT`, `HMN_SHARE_ROOT`,
    /// `HMN_LOG_ROOT`, `HMN_DOCKER_ROOT`, `HMN_CONTAINERD_ROOT` and `HMN_CRIO_ROOT`, each
    /// defaulting to the system path when unset or empty.
    pub fn from_env() -> Self {
        let get = |name: &str, default: &str| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map_or_else(|| PathBuf::from(default), PathBuf::from)
        };
        Roots {
            proc: get(ENV_PROC_ROOT, "/proc"),
            sys: get(ENV_SYS_ROOT, "/sys"),
            dev: get(ENV_DEV_ROOT, "/dev"),
            share: get(ENV_SHARE_ROOT, "/usr/share"),
            log: get(ENV_LOG_ROOT, "/var/log"),
            docker: get(ENV_DOCKER_ROOT, "/var/lib/docker"),
            containerd: get(ENV_CONTAINERD_ROOT, "/run/containerd"),
            crio: get(ENV_CRIO_ROOT, "/run/containers/storage"),
        }
    }

    /// Replaces the proc root.
    #[must_use]
    pub fn with_proc(mut self, proc: impl Into<PathBuf>) -> Self {
        self.proc = proc.into();
        self
    }

    /// Replaces the sys root.
    #[must_use]
    pub fn with_sys(mut self, sys: impl Into<PathBuf>) -> Self {
        self.sys = sys.into();
        self
    }

    /// Replaces the dev root.
    #[must_use]
    pub fn with_dev(mut self, dev: impl Into<PathBuf>) -> Self {
        self.dev = dev.into();
        self
    }

    /// Replaces the shared-data root.
    #[must_use]
    pub fn with_share(mut self, share: impl Into<PathBuf>) -> Self {
        self.share = share.into();
        self
    }

    /// Replaces the log root.
    #[must_use]
    pub fn with_log(mut self, log: impl Into<PathBuf>) -> Self {
        self.log = log.into();
        self
    }

    /// Replaces the container runtimes' roots (Docker, containerd, CRI-O) with directories
    /// under `dir`: `docker`, `containerd`, `crio` (for fixtures).
    #[must_use]
    pub fn with_runtimes_under(mut self, dir: impl AsRef<Path>) -> Self {
        let dir = dir.as_ref();
        self.docker = dir.join("docker");
        self.containerd = dir.join("containerd");
        self.crio = dir.join("crio");
        self
    }

    /// `<proc>/<pid>`.
    pub fn pid_dir(&self, pid: u32) -> PathBuf {
        self.proc.join(pid.to_string())
    }

    /// `<proc>/<pid>/<file>`.
    pub fn pid_file(&self, pid: u32, file: impl AsRef<Path>) -> PathBuf {
        let mut p = self.pid_dir(pid);
        p.push(file);
        p
    }

    /// True when every root is the system default, i.e. `<proc>/self` is this process.
    pub fn is_system(&self) -> bool {
        *self == Roots::default()
    }
}

/// Machine constants that parsers need to turn kernel numbers into bytes and seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct SystemInfo {
    /// Bytes per page (`/proc/<pid>/statm` counts pages): 4096 on x86-64, often 16 KiB or
    /// 64 KiB on arm64.
    pub page_size: u64,
    /// Clock ticks per second (`/proc/<pid>/stat` times count ticks).
    pub clock_ticks: u64,
}

impl SystemInfo {
    /// The running machine's constants, read once and cached.
    pub fn current() -> SystemInfo {
        static CURRENT: std::sync::OnceLock<SystemInfo> = std::sync::OnceLock::new();
        #[cfg(not(unix))]
        return *CURRENT.get_or_init(|| SystemInfo::new(4096, 100));
        #[cfg(unix)]
        *CURRENT.get_or_init(|| {
            use nix::unistd::{SysconfVar, sysconf};
            let read = |var, default: u64| {
                sysconf(var)
                    .ok()
                    .flatten()
                    .and_then(|v| u64::try_from(v).ok())
                    .filter(|v| *v > 0)
                    .unwrap_or(default)
            };
            SystemInfo {
                page_size: read(SysconfVar::PAGE_SIZE, 4096),
                clock_ticks: read(SysconfVar::CLK_TCK, 100),
            }
        })
    }

    /// Explicit constants, for fixtures captured on another machine.
    pub const fn new(page_size: u64, clock_ticks: u64) -> SystemInfo {
        SystemInfo {
            page_size,
            clock_ticks,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pid_paths_join_under_the_proc_root() {
        let r = Roots::system().with_proc("/host/proc");
        assert_eq!(
            r.pid_file(42, "status"),
            PathBuf::from("/host/proc/42/status")
        );
        assert!(!r.is_system());
        assert!(Roots::system().is_system());
    }

    #[test]
    fn system_info_is_plausible() {
        let s = SystemInfo::current();
        assert!(s.page_size >= 4096 && s.page_size.is_power_of_two());
        assert!(s.clock_ticks > 0);
    }
}
