//! The test bed's environment wiring, in one place: where a test points `hmn` (or a `Probe`)
//! for `/proc`, `/sys`, the NVML library and `nvidia-smi`, the `HMN_*` variables that carry
//! it to a binary, and the paths that stand for an absent backend.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The proc root (`--proc-root`).
pub const ENV_PROC_ROOT: &str = "HMN_PROC_ROOT";
/// The sys root (`--sys-root`).
pub const ENV_SYS_ROOT: &str = "HMN_SYS_ROOT";
/// The dev root.
pub const ENV_DEV_ROOT: &str = "HMN_DEV_ROOT";
/// The shared-data root (`pci.ids`, `amdgpu.ids`).
pub const ENV_SHARE_ROOT: &str = "HMN_SHARE_ROOT";
/// The NVML library (`--nvml-lib`).
pub const ENV_NVML_LIB: &str = "HMN_NVML_LIB";
/// The `nvidia-smi` binary (`--nvidia-smi`).
pub const ENV_NVIDIA_SMI: &str = "HMN_NVIDIA_SMI";
/// The `nvidia-smi` time limit in milliseconds.
pub const ENV_NVIDIA_SMI_TIMEOUT_MS: &str = "HMN_NVIDIA_SMI_TIMEOUT_MS";
/// Set, `hmn run` makes no cgroup.
pub const ENV_NO_CGROUP: &str = "HMN_NO_CGROUP";
/// The log root (the kubelet's `pods/` and `containers/`, `--log-root`).
pub const ENV_LOG_ROOT: &str = "HMN_LOG_ROOT";
/// Docker's data root.
pub const ENV_DOCKER_ROOT: &str = "HMN_DOCKER_ROOT";
/// containerd's state root.
pub const ENV_CONTAINERD_ROOT: &str = "HMN_CONTAINERD_ROOT";
/// CRI-O's run root.
pub const ENV_CRIO_ROOT: &str = "HMN_CRIO_ROOT";
/// The directory of `hmn pick`'s and `hmn run --gpu`'s device locks.
pub const ENV_LOCK_DIR: &str = "HMN_LOCK_DIR";

/// Where a test's `hmn` or `Probe` reads from. Every path is inside the test's own directory
/// except a `None` proc root (this machine's `/proc`, for tests that follow real processes);
/// `/sys` is always a fixture, so a GPU on the machine running the tests never leaks in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Env {
    /// The proc root; `None` is this machine's `/proc`.
    pub proc: Option<PathBuf>,
    /// The sys root.
    pub sys: PathBuf,
    /// The shared-data root: `root/share`, empty unless a test writes device name databases
    /// there (the machine's own `pci.ids` never leaks in).
    pub share: PathBuf,
    /// The NVML library: a fake (from [`crate::FakeNvml::install`]), or a path that does not
    /// exist.
    pub nvml: PathBuf,
    /// The `nvidia-smi` binary: a fake (from [`crate::FakeSmi::install`]), or a path that does
    /// not exist.
    pub nvidia_smi: PathBuf,
    /// The log root: `root/log` (the kubelet's layout goes under it; empty unless a test
    /// writes one, so the machine's `/var/log` never leaks in).
    pub log: PathBuf,
    /// The container runtimes' roots: `root/runtimes/{docker,containerd,crio}`.
    pub runtimes: PathBuf,
    /// The device-lock directory: `root/locks`.
    pub locks: PathBuf,
}

impl Env {
    /// `root/proc` and `root/sys` (as [`crate::World::new`] makes them), and no NVIDIA backend:
    /// [`Env::absent_nvml`] and [`Env::absent_nvidia_smi`] under `root`.
    pub fn new(root: &Path) -> Env {
        Env {
            proc: Some(root.join("proc")),
            sys: root.join("sys"),
            share: root.join("share"),
            nvml: Env::absent_nvml(root),
            nvidia_smi: Env::absent_nvidia_smi(root),
            log: root.join("log"),
            runtimes: root.join("runtimes"),
            locks: root.join("locks"),
        }
    }

    /// An NVML library path under `root` that does not exist (`root/no-nvml/libnvidia-ml.so.1`):
    /// loading it fails as on a machine without the driver.
    pub fn absent_nvml(root: &Path) -> PathBuf {
        root.join("no-nvml/libnvidia-ml.so.1")
    }

    /// An `nvidia-smi` path under `root` that does not exist (`root/no-smi/nvidia-smi`).
    pub fn absent_nvidia_smi(root: &Path) -> PathBuf {
        root.join("no-smi/nvidia-smi")
    }

    /// Reads this machine's `/proc` instead of the fixture's.
    #[must_use]
    pub fn real_proc(mut self) -> Env {
        self.proc = None;
        self
    }

    /// A command for `program` in this environment: the roots and backends in the `HMN_*`
    /// variables, the variables a test does not choose (`HMN_DEV_ROOT`,
    /// `HMN_NVIDIA_SMI_TIMEOUT_MS`, `HMN_NO_CGROUP`, and `HMN_PROC_ROOT` for the real `/proc`)
    /// removed, and stdin closed. A test may still set any of them on the command.
    pub fn command(&self, program: impl AsRef<OsStr>) -> Command {
        let mut c = Command::new(program);
        for var in [
            ENV_PROC_ROOT,
            ENV_DEV_ROOT,
            ENV_NVIDIA_SMI_TIMEOUT_MS,
            ENV_NO_CGROUP,
        ] {
            c.env_remove(var);
        }
        if let Some(proc) = &self.proc {
            c.env(ENV_PROC_ROOT, proc);
        }
        c.env(ENV_SYS_ROOT, &self.sys)
            .env(ENV_SHARE_ROOT, &self.share)
            .env(ENV_NVML_LIB, &self.nvml)
            .env(ENV_NVIDIA_SMI, &self.nvidia_smi)
            .env(ENV_LOG_ROOT, &self.log)
            .env(ENV_DOCKER_ROOT, self.runtimes.join("docker"))
            .env(ENV_CONTAINERD_ROOT, self.runtimes.join("containerd"))
            .env(ENV_CRIO_ROOT, self.runtimes.join("crio"))
            .env(ENV_LOCK_DIR, &self.locks)
            .stdin(Stdio::null());
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(c: &Command) -> Vec<(String, Option<String>)> {
        c.get_envs()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.map(|v| v.to_string_lossy().into_owned()),
                )
            })
            .collect()
    }

    #[test]
    fn a_command_carries_the_roots_and_absent_backends() {
        let env = Env::new(Path::new("/t"));
        let mut got = vars(&env.command("hmn"));
        got.sort();
        let want = |k: &str, v: Option<&str>| (k.to_string(), v.map(str::to_string));
        assert_eq!(
            got,
            vec![
                want(ENV_CONTAINERD_ROOT, Some("/t/runtimes/containerd")),
                want(ENV_CRIO_ROOT, Some("/t/runtimes/crio")),
                want(ENV_DEV_ROOT, None),
                want(ENV_DOCKER_ROOT, Some("/t/runtimes/docker")),
                want(ENV_LOCK_DIR, Some("/t/locks")),
                want(ENV_LOG_ROOT, Some("/t/log")),
                want(ENV_NO_CGROUP, None),
                want(ENV_NVIDIA_SMI, Some("/t/no-smi/nvidia-smi")),
                want(ENV_NVIDIA_SMI_TIMEOUT_MS, None),
                want(ENV_NVML_LIB, Some("/t/no-nvml/libnvidia-ml.so.1")),
                want(ENV_PROC_ROOT, Some("/t/proc")),
                want(ENV_SHARE_ROOT, Some("/t/share")),
                want(ENV_SYS_ROOT, Some("/t/sys")),
            ]
        );
    }

    #[test]
    fn the_real_proc_root_removes_the_variable() {
        let mut env = Env::new(Path::new("/t")).real_proc();
        env.nvml = PathBuf::from("/t/nvml/lib.so");
        let got = vars(&env.command("hmn"));
        assert!(got.contains(&(ENV_PROC_ROOT.to_string(), None)), "{got:?}");
        assert!(
            got.contains(&(ENV_NVML_LIB.to_string(), Some("/t/nvml/lib.so".to_string()))),
            "{got:?}"
        );
    }
}
