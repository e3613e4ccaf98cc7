//! [`gather`]: the one function of `doctor` that does I/O — the probe, the kernel module, the
//! PCI bus, device nodes, the user, the proc mount, cgroups — into [`Facts`].

use std::path::{Path, PathBuf};

use crate::probe::{Probe, ProbeOptions};
use crate::system::fsread::{self, Cap};
#[cfg(target_os = "linux")]
use crate::system::roots::Roots;

use super::facts::*;
use super::model::Platform;

/// Reads every fact under `options` (the one function of `doctor` that does I/O).
pub fn gather(options: &ProbeOptions) -> Facts {
    let probe = Probe::with_options(options.clone().health(true));
    let mut f = Facts::empty(options.roots.clone(), probe.pid_view().clone());
    f.platform = Platform::current();
    f.nvml = nvml_facts(&probe, options);
    f.memory = Some(MemoryFacts::of(&probe.gpu_processes()));
    f.nvidia_smi = find_nvidia_smi(options);
    let list = probe.devices();
    f.pools = list
        .devices
        .iter()
        .map(super::pools::PoolFacts::of)
        .collect();
    f.modes = list
        .devices
        .iter()
        .filter_map(super::modes::ModeFacts::of)
        .collect();
    #[cfg(target_os = "linux")]
    linux_facts(&mut f);
    #[cfg(not(target_os = "linux"))]
    {
        // NVIDIA adapters the platform sees that NVML did not list (DXGI lists them only then).
        let nvidia = list.devices.iter().filter(|d| {
            d.vendor == crate::types::Vendor::Nvidia && d.source != crate::types::Source::Nvml
        });
        f.nvidia_pci_devices = u32::try_from(nvidia.count()).unwrap_or(u32::MAX);
        f.gpu_backends = list.backends;
    }
    f
}

/// The Linux facts: the kernel module, the PCI bus, device nodes, the user, the proc mount,
/// ptrace, the kernel, DRM devices, cgroups.
#[cfg(target_os = "linux")]
fn linux_facts(f: &mut Facts) {
    let roots = f.roots.clone();
    f.kernel_module_version =
        fsread::read_string(&roots.proc.join("driver/nvidia/version"), Cap::PROC_OTHER)
            .ok()
            .or_else(|| fsread::read_trimmed(&roots.sys.join("module/nvidia/version")).ok())
            .and_then(|t| parse_nvidia_version(&t));
    f.nvidia_pci_devices = nvidia_pci_devices(&roots);
    f.dev_nodes = dev_nodes(&roots.dev);
    let status = fsread::read_string(&roots.proc.join("self/status"), Cap::STATUS).ok();
    f.user = UserFacts {
        euid: nix::unistd::geteuid().as_raw(),
        egid: nix::unistd::getegid().as_raw(),
        groups: nix::unistd::getgroups()
            .map(|g| g.iter().map(|g| g.as_raw()).collect())
            .unwrap_or_default(),
        cap_eff: status.as_deref().and_then(parse_cap_eff),
        uid_map: fsread::read_string(&roots.proc.join("self/uid_map"), Cap::PROC_OTHER).ok(),
    };
    f.proc_mount = fsread::read_string(&roots.proc.join("self/mountinfo"), Cap::PROC_STAT)
        .ok()
        .and_then(|t| parse_proc_mount(&t, &roots.proc));
    f.ptrace_scope = fsread::read_u64(&roots.proc.join("sys/kernel/yama/ptrace_scope"))
        .ok()
        .and_then(|v| u32::try_from(v).ok());
    f.kernel_release = fsread::read_trimmed(&roots.proc.join("sys/kernel/osrelease")).ok();
    f.drm = crate::backends::drm::sysfs::discover(&roots)
        .iter()
        .map(|d| DrmFacts {
            driver: d.driver.clone().unwrap_or_else(|| "unknown".into()),
            address: d.pci.map_or_else(
                || {
                    d.dir
                        .file_name()
                        .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
                },
                |p| p.to_string(),
            ),
            suspended: d.suspended(),
        })
        .collect();
    f.cgroup = cgroup_facts(&roots);
}

/// NVML's state, versions and modes (through the probe's own NVML session).
fn nvml_facts(probe: &Probe, options: &ProbeOptions) -> NvmlFacts {
    let library = options
        .nvml_library
        .as_ref()
        .map_or_else(|| DEFAULT_LIBRARY.to_string(), |p| p.display().to_string());
    let mut f = match probe.nvml_slot() {
        #[cfg(feature = "nvml")]
        Ok(backend) => {
            let r = backend.doctor_readings();
            let mut f = NvmlFacts::new(library.clone(), NvmlState::Loaded);
            (f.library_version, f.driver_version) = (r.library_version, r.driver_version);
            f.cuda_version = r.cuda_version;
            f.devices = (r.devices.into_iter())
                .map(|d| NvmlDeviceFacts::new(d.index, d.accounting, d.persistence))
                .collect();
            f
        }
        #[cfg(not(feature = "nvml"))]
        Ok(never) => match *never {},
        Err(e) if e.means_absent() => {
            NvmlFacts::new(library.clone(), NvmlState::Absent(e.to_string()))
        }
        Err(e) => {
            #[cfg(feature = "nvml")]
            let (code, version) = (
                crate::backends::nvml::facts::init_code(e),
                crate::backends::nvml::facts::version_without_init(std::ffi::OsStr::new(&library)),
            );
            #[cfg(not(feature = "nvml"))]
            let (code, version) = (None, None);
            let mut f = NvmlFacts::new(
                library.clone(),
                NvmlState::Failed {
                    code,
                    reason: e.to_string(),
                },
            );
            f.library_version = version;
            f
        }
    };
    if f.state != NvmlState::Loaded {
        return f;
    }
    // The file the loader mapped (this very process's maps).
    f.loaded_from = fsread::read_string(&options.roots.proc.join("self/maps"), Cap::PROC_STAT)
        .ok()
        .and_then(|maps| {
            maps.lines()
                .filter_map(|l| l.split_whitespace().nth(5))
                .find(|p| p.contains("libnvidia-ml"))
                .map(PathBuf::from)
        })
        .or_else(|| options.nvml_library.clone());
    f
}

/// NVIDIA display (class 0x03…) devices under `<sys>/bus/pci/devices`.
#[cfg(target_os = "linux")]
fn nvidia_pci_devices(roots: &Roots) -> u32 {
    let Ok(entries) = fsread::list_dir(&roots.sys.join("bus/pci/devices")) else {
        return 0;
    };
    let n = entries
        .iter()
        .filter(|d| {
            fsread::read_hex_u16(&d.join("vendor")).ok() == Some(0x10de)
                && fsread::read_trimmed(&d.join("class"))
                    .is_ok_and(|c| c.trim_start_matches("0x").starts_with("03"))
        })
        .count();
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The configured `nvidia-smi`, or the first executable one on `PATH`.
fn find_nvidia_smi(options: &ProbeOptions) -> Result<PathBuf, SmiMissing> {
    let runnable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| {
            #[cfg(unix)]
            let exec = std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o111 != 0;
            #[cfg(not(unix))]
            let exec = true;
            m.is_file() && exec
        })
    };
    if let Some(p) = &options.nvidia_smi {
        return if runnable(p) {
            Ok(p.clone())
        } else {
            Err(SmiMissing::NotExecutable { path: p.clone() })
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| {
            d.join(if cfg!(windows) {
                "nvidia-smi.exe"
            } else {
                "nvidia-smi"
            })
        })
        .find(|p| runnable(p))
        .ok_or(SmiMissing::NotOnPath)
}

/// `<dev>/nvidia*` and `<dev>/dri/*` (`card*`, `renderD*`).
#[cfg(target_os = "linux")]
fn dev_nodes(dev: &Path) -> Vec<DevNode> {
    use std::os::unix::fs::MetadataExt as _;
    let mut paths: Vec<PathBuf> = fsread::list_dir(dev)
        .unwrap_or_default()
        .into_iter()
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("nvidia"))
        })
        .collect();
    paths.extend(
        fsread::list_dir(&dev.join("dri"))
            .unwrap_or_default()
            .into_iter()
            .filter(|p| {
                p.file_name().is_some_and(|n| {
                    let n = n.to_string_lossy();
                    n.starts_with("card") || n.starts_with("renderD")
                })
            }),
    );
    paths.sort();
    paths
        .into_iter()
        .filter_map(|path| {
            let meta = std::fs::metadata(&path).ok()?;
            if meta.is_dir() {
                return None; // /dev/nvidia-caps
            }
            let gid = meta.gid();
            let accessible = nix::unistd::access(
                &path,
                nix::unistd::AccessFlags::R_OK | nix::unistd::AccessFlags::W_OK,
            )
            .is_ok();
            Some(DevNode {
                group: nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(gid))
                    .ok()
                    .flatten()
                    .map(|g| g.name),
                gid,
                mode: meta.mode() & 0o7777,
                accessible,
                path,
            })
        })
        .collect()
}

/// The cgroup version, and a real try at `hmn run`'s group (created, then removed).
#[cfg(target_os = "linux")]
fn cgroup_facts(roots: &Roots) -> CgroupFacts {
    let base = roots.sys.join("fs/cgroup");
    let version = if base.join("cgroup.controllers").exists() {
        "v2"
    } else if base.join("memory").is_dir() && base.join("unified/cgroup.controllers").exists() {
        "hybrid"
    } else if base.join("memory").is_dir() {
        "v1"
    } else {
        "none"
    };
    // A doctor killed between creating its probe group and removing it left the group: gone
    // now (it never holds a process, so nothing is moved).
    let _ = crate::system::cgroup::remove_stale(roots, super::model::PROBE_CGROUP_PREFIX);
    let name = crate::system::cgroup::transient_name(roots, super::model::PROBE_CGROUP_PREFIX);
    let creatable = match crate::system::cgroup::PeakCgroup::create(roots, &name) {
        Ok(group) => {
            let dir = group.dir().to_path_buf();
            match group.remove() {
                Ok(()) => Ok(dir),
                Err(e) => Err(CgroupUnusable::NotRemoved(e.to_string())),
            }
        }
        Err(e) => Err(CgroupUnusable::NotCreated(e.to_string())),
    };
    CgroupFacts {
        version,
        creatable,
        disabled_by_env: std::env::var_os("HMN_NO_CGROUP").is_some_and(|v| !v.is_empty()),
    }
}
