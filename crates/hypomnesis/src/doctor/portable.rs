//! The checks off Linux (pure): NVML and `nvidia-smi` as the platform ships them, NVIDIA's
//! accounting mode, and the platform's own GPU backends (DXGI and PDH on Windows, Metal on
//! macOS). There is no `/proc`, `/sys`, device node or cgroup to judge there.

use super::checks::{nvidia_smi, nvml_mode};
use super::facts::{Facts, NvmlState};
use super::model::{Check, Platform};
use crate::types::{Backend, BackendState};

/// The checks for `f.platform` (Windows or macOS).
pub(super) fn checks(f: &Facts) -> Vec<Check> {
    let mut checks = vec![nvml(f), nvidia_smi(f), accounting(f), gpu_backends(f)];
    // Metal's device is unified memory (Apple Silicon): say so, with IOKit's figures.
    if f.platform == Platform::MacOs {
        checks.push(super::pools::memory_pool(&f.pools));
    }
    checks
}

fn nvml(f: &Facts) -> Check {
    let n = &f.nvml;
    let driver_remedy = match f.platform {
        Platform::MacOs => {
            "no NVIDIA driver exists for current macOS; only an external NVML passed with \
             --nvml-lib PATH is tried"
        }
        _ => {
            "repair or reinstall the NVIDIA display driver (it installs nvml.dll into \
             %SystemRoot%\\System32), or pass --nvml-lib PATH to use another nvml.dll"
        }
    };
    match &n.state {
        NvmlState::Loaded => Check::ok(
            "nvml",
            format!(
                "NVML {} loaded ({}); driver {}; {} device{}",
                n.library_version.as_deref().unwrap_or("?"),
                n.library,
                n.driver_version.as_deref().unwrap_or("?"),
                n.devices.len(),
                if n.devices.len() == 1 { "" } else { "s" },
            ),
        ),
        NvmlState::Failed { code: Some(18), .. } => Check::fail(
            "nvml",
            format!(
                "nvmlInit failed: driver/library version mismatch (18): library {}",
                n.library_version.as_deref().unwrap_or("?")
            ),
            Some(
                "the NVIDIA library does not match the running driver (an update without a \
                 restart): restart the machine"
                    .to_string(),
            ),
        ),
        NvmlState::Failed { code, reason } => Check::fail(
            "nvml",
            format!(
                "{} is here but broken: {reason}{}",
                n.library,
                code.map(|c| format!(" (nvmlInit code {c})"))
                    .unwrap_or_default()
            ),
            Some(driver_remedy.to_string()),
        ),
        NvmlState::Absent(reason) if f.nvidia_pci_devices > 0 => Check::fail(
            "nvml",
            format!(
                "{} NVIDIA adapter{} seen by the system, but NVML is absent: {reason}",
                f.nvidia_pci_devices,
                if f.nvidia_pci_devices == 1 { "" } else { "s" }
            ),
            Some(driver_remedy.to_string()),
        ),
        NvmlState::Absent(reason) => Check::ok(
            "nvml",
            format!("NVML absent ({reason}), and no NVIDIA adapter seen by the system"),
        ),
    }
}

/// Accounting mode, with the platform's way to turn it on.
fn accounting(f: &Facts) -> Check {
    let mut c = nvml_mode(f, "accounting");
    if c.remedy.is_some() && f.platform == Platform::Windows {
        c.remedy = Some(
            "nvidia-smi -am 1 from an administrator prompt (hmn run then reads exact VRAM peaks)"
                .to_string(),
        );
    }
    c
}

/// The platform's GPU backends: a broken one is a warning (GPUs may exist it cannot show); one
/// that is absent is said as it is.
fn gpu_backends(f: &Facts) -> Check {
    let own = match f.platform {
        Platform::MacOs => Backend::Metal,
        _ => Backend::Dxgi,
    };
    let mut saw = Vec::new();
    let mut broken = Vec::new();
    for b in f.gpu_backends.iter().filter(|b| b.backend == own) {
        let name = b.backend.as_str();
        match &b.state {
            BackendState::Active { devices } => saw.push(format!(
                "{name}: {devices} device{}",
                if *devices == 1 { "" } else { "s" }
            )),
            BackendState::Absent { reason, .. } => saw.push(format!("{name}: {reason}")),
            BackendState::NotTried => saw.push(format!("{name}: not needed")),
            BackendState::Failed { reason, .. } => {
                saw.push(format!("{name}: failed: {reason}"));
                broken.push(name);
            }
        }
    }
    if saw.is_empty() {
        saw.push(format!("{}: not built in (feature off)", own.as_str()));
    }
    let saw = saw.join("; ");
    if broken.is_empty() {
        return Check::ok("gpu-backends", saw);
    }
    let remedy = match f.platform {
        Platform::MacOs => "Metal needs a GPU session: run hmn in a logged-in user's session",
        _ => {
            "DXGI and PDH see GPUs with a WDDM display driver: check the adapter in Device \
             Manager; a TCC-mode GPU is seen through NVML only"
        }
    };
    Check::warn("gpu-backends", saw, Some(remedy.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::facts::{NvmlDeviceFacts, NvmlFacts};
    use crate::doctor::model::Status;
    use crate::types::BackendStatus;

    fn facts(platform: Platform) -> Facts {
        let roots = crate::system::roots::Roots::system();
        let pid = crate::system::pidns::view(&crate::system::pidns::NamespaceFacts::new(
            Some(crate::system::pidns::INIT_PID_NS_INODE),
            Some(crate::system::pidns::INIT_PID_NS_INODE),
            vec![10],
            None,
            vec![],
        ));
        let mut f = Facts::empty(roots, pid);
        f.platform = platform;
        f
    }

    #[test]
    fn an_nvidia_adapter_without_nvml_fails_with_the_windows_remedy() {
        let mut f = facts(Platform::Windows);
        f.nvml = NvmlFacts::new("nvml.dll", NvmlState::Absent("nvml.dll not found".into()));
        f.nvidia_pci_devices = 1;
        let c = nvml(&f);
        assert_eq!(c.status, Status::Fail);
        assert!(c.saw.contains("1 NVIDIA adapter seen"), "{}", c.saw);
        assert!(c.remedy.unwrap().contains("System32"));
        // No NVIDIA adapter: nothing is missing.
        f.nvidia_pci_devices = 0;
        assert_eq!(nvml(&f).status, Status::Ok);
    }

    #[test]
    fn a_version_mismatch_asks_for_a_restart_not_modprobe() {
        let mut f = facts(Platform::Windows);
        f.nvml = NvmlFacts::new(
            "nvml.dll",
            NvmlState::Failed {
                code: Some(18),
                reason: "mismatch".into(),
            },
        );
        let c = nvml(&f);
        assert_eq!(c.status, Status::Fail);
        let r = c.remedy.unwrap();
        assert!(r.contains("restart") && !r.contains("modprobe"), "{r}");
    }

    #[test]
    fn accounting_off_gets_the_administrator_prompt_remedy() {
        let mut f = facts(Platform::Windows);
        let mut n = NvmlFacts::new("nvml.dll", NvmlState::Loaded);
        n.devices = vec![NvmlDeviceFacts::new(
            0,
            Ok(false),
            Err(crate::types::QueryError::NotOnThisPlatform),
        )];
        f.nvml = n;
        let c = accounting(&f);
        assert_eq!(c.status, Status::Warn);
        let r = c.remedy.unwrap();
        assert!(r.contains("administrator") && !r.contains("sudo"), "{r}");
    }

    #[test]
    fn a_failed_backend_warns_and_an_absent_one_is_said() {
        let mut f = facts(Platform::Windows);
        f.gpu_backends = vec![
            BackendStatus::new(
                Backend::Nvml,
                BackendState::absent(crate::types::BackendCause::LibraryMissing, "x"),
            ),
            BackendStatus::new(
                Backend::Dxgi,
                BackendState::absent(
                    crate::types::BackendCause::CallFailed,
                    "CreateDXGIFactory1 failed (0x887A0004)",
                ),
            ),
        ];
        let c = gpu_backends(&f);
        assert_eq!(c.status, Status::Ok);
        assert_eq!(c.saw, "DXGI: CreateDXGIFactory1 failed (0x887A0004)");
        f.gpu_backends = vec![BackendStatus::new(
            Backend::Dxgi,
            BackendState::failed(crate::types::BackendCause::CallFailed, "E_FAIL"),
        )];
        let c = gpu_backends(&f);
        assert_eq!(c.status, Status::Warn);
        assert!(c.remedy.unwrap().contains("Device Manager"));
        f.platform = Platform::MacOs;
        f.gpu_backends = vec![BackendStatus::new(
            Backend::Metal,
            BackendState::Active { devices: 1 },
        )];
        assert_eq!(gpu_backends(&f).saw, "Metal: 1 device");
    }
}
