//! [`ProbeOptions`]: how a [`Probe`](super::Probe) finds the kernel's files, the GPU libraries
//! and `nvidia-smi`, from code or from the `HMN_*` environment variables.

use std::path::PathBuf;
use std::time::Duration;

use crate::system::roots::{Roots, SystemInfo};

/// Environment variable naming the NVML library to load (a path, or a soname).
pub const ENV_NVML_LIB: &str = "HMN_NVML_LIB";
/// Environment variable naming the `nvidia-smi` binary.
pub const ENV_NVIDIA_SMI: &str = "HMN_NVIDIA_SMI";
/// Environment variable with the `nvidia-smi` time limit in milliseconds.
pub const ENV_NVIDIA_SMI_TIMEOUT_MS: &str = "HMN_NVIDIA_SMI_TIMEOUT_MS";

/// How a [`Probe`](super::Probe) finds the kernel's files and the GPU libraries.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ProbeOptions {
    /// Where `/proc`, `/sys` and `/dev` are.
    pub roots: Roots,
    /// Page size and clock ticks for the proc parsers.
    pub system: SystemInfo,
    /// The NVML library; `None` loads `libnvidia-ml.so.1` through the dynamic loader.
    pub nvml_library: Option<PathBuf>,
    /// The `nvidia-smi` binary; `None` looks it up on `PATH`.
    pub nvidia_smi: Option<PathBuf>,
    /// How long `nvidia-smi` may run before it is killed.
    pub nvidia_smi_timeout: Duration,
    /// Whether to use NVML at all.
    pub use_nvml: bool,
    /// Whether to fall back to `nvidia-smi` when NVML is absent.
    pub use_nvidia_smi: bool,
    /// Whether to look for DRM (AMD, Intel, other) devices and their clients.
    pub use_drm: bool,
    /// How long the pid → DRM-fd index (a walk over every process's fds) is reused before it
    /// is rebuilt. Queries in between read only the fdinfo of known DRM fds; a process that
    /// opens a GPU after the last rebuild appears at the next one. A discovery that found no
    /// DRM GPU at all is reused for as long (a card that appears later shows within it).
    pub drm_index_max_age: Duration,
    /// Read each device's memory health (ECC, remapped rows or retired pages, amdgpu RAS)
    /// into `Device::health`: a few more driver calls (and, on amdgpu, hardware queries) per
    /// device and query. Off by default.
    pub health: bool,
    /// Read each NVIDIA device's cumulative energy counter
    /// (`nvmlDeviceGetTotalEnergyConsumption`) into `Telemetry::energy_joules`. On by default.
    /// On an H200 (driver 580.159.04) that one call took 2.9 ms median, half of a whole device
    /// query and 500–2,000 × any other memory or telemetry call (docs/validation.md, run 2): a
    /// long-lived sampler that does not show energy turns it off, and the field is then `None`
    /// with reason [`UnknownReason::NotRequested`](crate::UnknownReason::NotRequested).
    pub energy: bool,
    /// Read each device's telemetry (utilization, temperature, power, clocks; energy as
    /// [`ProbeOptions::energy`] says) into `Device::telemetry`. On by default. Off, the device
    /// query asks none of it — `telemetry` is all `None` and `unknown` has one
    /// [`Field::Telemetry`](crate::Field::Telemetry) entry with reason
    /// [`UnknownReason::NotRequested`](crate::UnknownReason::NotRequested). On an H200 (driver
    /// 580.159.04) the first telemetry calls of a fresh NVML session took about 11 ms together
    /// (utilization 4.0 ms, the two maximum clocks 2.8 + 1.7 ms, power 1.9 ms), a third of a
    /// short-lived command (docs/validation.md, run 7): a command that shows no telemetry
    /// turns it off. On amdgpu, Intel and other DRM cards the hwmon, busy and clock files are
    /// left unread alike; the `nvidia-smi` fallback answers them in its one query either way.
    pub telemetry: bool,
}

impl Default for ProbeOptions {
    fn default() -> Self {
        ProbeOptions {
            roots: Roots::system(),
            system: SystemInfo::current(),
            nvml_library: None,
            nvidia_smi: None,
            nvidia_smi_timeout: crate::backends::smi::DEFAULT_TIMEOUT,
            use_nvml: true,
            use_nvidia_smi: true,
            use_drm: true,
            drm_index_max_age: Duration::from_secs(2),
            health: false,
            energy: true,
            telemetry: true,
        }
    }
}

impl ProbeOptions {
    /// Options from the environment: `HMN_PROC_ROOT`, `HMN_SYS_ROOT`, `HMN_DEV_ROOT`,
    /// `HMN_NVML_LIB`, `HMN_NVIDIA_SMI`, `HMN_NVIDIA_SMI_TIMEOUT_MS` (each optional).
    pub fn from_env() -> Self {
        let path = |name| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let timeout = std::env::var(ENV_NVIDIA_SMI_TIMEOUT_MS)
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .filter(|ms| *ms > 0)
            .map_or(crate::backends::smi::DEFAULT_TIMEOUT, Duration::from_millis);
        ProbeOptions {
            roots: Roots::from_env(),
            nvml_library: path(ENV_NVML_LIB),
            nvidia_smi: path(ENV_NVIDIA_SMI),
            nvidia_smi_timeout: timeout,
            ..ProbeOptions::default()
        }
    }

    /// Replaces the roots.
    #[must_use]
    pub fn roots(mut self, roots: Roots) -> Self {
        self.roots = roots;
        self
    }

    /// Loads NVML from this path.
    #[must_use]
    pub fn nvml_library(mut self, path: impl Into<PathBuf>) -> Self {
        self.nvml_library = Some(path.into());
        self
    }

    /// Runs this `nvidia-smi`.
    #[must_use]
    pub fn nvidia_smi(mut self, path: impl Into<PathBuf>) -> Self {
        self.nvidia_smi = Some(path.into());
        self
    }

    /// Kills `nvidia-smi` after this long.
    #[must_use]
    pub fn nvidia_smi_timeout(mut self, timeout: Duration) -> Self {
        self.nvidia_smi_timeout = timeout;
        self
    }

    /// Enables or disables the NVML backend.
    #[must_use]
    pub fn use_nvml(mut self, on: bool) -> Self {
        self.use_nvml = on;
        self
    }

    /// Enables or disables the DRM backend.
    #[must_use]
    pub fn use_drm(mut self, on: bool) -> Self {
        self.use_drm = on;
        self
    }

    /// Sets how long the DRM fd index is reused.
    #[must_use]
    pub fn drm_index_max_age(mut self, age: Duration) -> Self {
        self.drm_index_max_age = age;
        self
    }

    /// Reads memory health with every device query ([`ProbeOptions::health`]).
    #[must_use]
    pub fn health(mut self, on: bool) -> Self {
        self.health = on;
        self
    }

    /// Reads each NVIDIA device's energy counter with every device query
    /// ([`ProbeOptions::energy`]).
    #[must_use]
    pub fn energy(mut self, on: bool) -> Self {
        self.energy = on;
        self
    }

    /// Reads each device's telemetry with every device query ([`ProbeOptions::telemetry`]).
    #[must_use]
    pub fn telemetry(mut self, on: bool) -> Self {
        self.telemetry = on;
        self
    }

    /// What an NVML device query reads beyond memory and identity.
    #[cfg(feature = "nvml")]
    pub(crate) fn reads(&self) -> crate::backends::nvml::Reads {
        crate::backends::nvml::Reads {
            health: self.health,
            telemetry: self.telemetry,
            energy: self.energy,
        }
    }

    /// Enables or disables the `nvidia-smi` fallback.
    #[must_use]
    pub fn use_nvidia_smi(mut self, on: bool) -> Self {
        self.use_nvidia_smi = on;
        self
    }
}
