//! The `compute-mode` check: which CUDA contexts each NVIDIA GPU admits ([`ModeFacts`] from the
//! device list, the verdict pure). A `prohibited` GPU is a warning — nothing can run CUDA there,
//! and the error programs print ("all CUDA-capable devices are busy or unavailable") does not
//! say why — with the command that changes it; an exclusive one is said (one process at a time;
//! `hmn pick` skips it while held); the default goes unsaid.

use super::model::Check;
use crate::types::{ComputeMode, Device, Field, Unknown, UnknownReason, Vendor};

/// One NVIDIA GPU's compute mode, as the check needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ModeFacts {
    /// The device's index.
    pub index: u32,
    /// Its compute mode, or why it is unknown (the device's [`Unknown`] for
    /// [`Field::ComputeMode`]).
    pub mode: Result<ComputeMode, Unknown>,
}

impl ModeFacts {
    /// The facts of an NVIDIA device of a device list (`None` for another vendor's).
    pub fn of(d: &Device) -> Option<ModeFacts> {
        if d.vendor != Vendor::Nvidia || d.error.is_some() {
            return None;
        }
        let mode = d.compute_mode.ok_or_else(|| {
            d.unknown
                .iter()
                .find(|u| u.field == Field::ComputeMode)
                .cloned()
                .unwrap_or_else(|| {
                    Unknown::new(Field::ComputeMode, UnknownReason::Unsupported, "not read")
                })
        });
        Some(ModeFacts {
            index: d.index,
            mode,
        })
    }
}

/// The verdict over every NVIDIA GPU's compute mode.
pub(super) fn compute_mode(modes: &[ModeFacts]) -> Check {
    const ID: &str = "compute-mode";
    if modes.is_empty() {
        return Check::ok(ID, "no NVIDIA GPU");
    }
    let saw: Vec<String> = modes
        .iter()
        .filter(|m| m.mode != Ok(ComputeMode::Default))
        .map(|m| match &m.mode {
            Ok(ComputeMode::Prohibited) => {
                format!(
                    "GPU {}: prohibited (no CUDA context can be made there)",
                    m.index
                )
            }
            Ok(mode) if mode.is_exclusive() => format!(
                "GPU {}: {mode} (one process's context at a time; hmn pick skips it while held)",
                m.index
            ),
            Ok(mode) => format!("GPU {}: {mode}", m.index),
            Err(why) => format!("GPU {}: unknown ({})", m.index, why.detail),
        })
        .collect();
    if saw.is_empty() {
        return Check::ok(
            ID,
            "every NVIDIA GPU admits any number of contexts (default)",
        );
    }
    let prohibited: Vec<String> = modes
        .iter()
        .filter(|m| m.mode == Ok(ComputeMode::Prohibited))
        .map(|m| m.index.to_string())
        .collect();
    if prohibited.is_empty() {
        return Check::ok(ID, saw.join("; "));
    }
    Check::warn(
        ID,
        saw.join("; "),
        Some(format!(
            "if that is not intended: sudo nvidia-smi -i {} -c DEFAULT (an administrator's \
             setting; it lasts until the driver unloads unless persistence mode keeps it)",
            prohibited.join(",")
        )),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::model::Status;

    fn m(index: u32, mode: Result<ComputeMode, Unknown>) -> ModeFacts {
        ModeFacts { index, mode }
    }

    #[test]
    fn the_default_goes_unsaid_and_prohibited_warns_with_the_command() {
        let ok = compute_mode(&[m(0, Ok(ComputeMode::Default))]);
        assert_eq!(ok.status, Status::Ok);
        assert_eq!(
            ok.saw,
            "every NVIDIA GPU admits any number of contexts (default)"
        );
        let ex = compute_mode(&[
            m(0, Ok(ComputeMode::Default)),
            m(1, Ok(ComputeMode::ExclusiveProcess)),
            m(
                2,
                Err(Unknown::new(
                    Field::ComputeMode,
                    UnknownReason::Unsupported,
                    "not supported by this device or driver",
                )),
            ),
        ]);
        assert_eq!(ex.status, Status::Ok, "exclusive is a choice, not a fault");
        assert_eq!(
            ex.saw,
            "GPU 1: exclusive_process (one process's context at a time; hmn pick skips it while \
             held); GPU 2: unknown (not supported by this device or driver)"
        );
        let no = compute_mode(&[
            m(0, Ok(ComputeMode::Prohibited)),
            m(3, Ok(ComputeMode::Prohibited)),
        ]);
        assert_eq!(no.status, Status::Warn);
        assert!(
            no.remedy
                .unwrap()
                .contains("sudo nvidia-smi -i 0,3 -c DEFAULT")
        );
        assert_eq!(compute_mode(&[]).saw, "no NVIDIA GPU");
    }

    #[test]
    fn facts_come_from_nvidia_devices_only_with_the_unknown_reason() {
        use crate::types::Source;
        let mut d = Device::new(0, Vendor::Nvidia, Source::Nvml);
        let missing = ModeFacts::of(&d).unwrap().mode.unwrap_err();
        assert_eq!(
            (missing.reason, missing.detail.as_str()),
            (UnknownReason::Unsupported, "not read"),
            "no reason recorded: said so, never a mode"
        );
        let why = Unknown::new(Field::ComputeMode, UnknownReason::PermissionDenied, "why");
        d.unknown.push(why.clone());
        assert_eq!(ModeFacts::of(&d).unwrap().mode, Err(why));
        d.compute_mode = Some(ComputeMode::Prohibited);
        assert_eq!(ModeFacts::of(&d).unwrap().mode, Ok(ComputeMode::Prohibited));
        let amd = Device::new(1, Vendor::Amd, Source::Sysfs);
        assert_eq!(ModeFacts::of(&amd), None);
    }
}
