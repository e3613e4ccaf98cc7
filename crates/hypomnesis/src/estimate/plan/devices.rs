//! What a plan is judged on, from what the probe found: the devices a plan over every device
//! judges (a GPU in MIG mode stands as its MIG devices), and when there is no GPU to judge on,
//! whether the question goes to the CPU instead.
//!
//! | Rule | Where |
//! |---|---|
//! | a GPU in MIG mode stands as its MIG devices, each judged against its own GPU instance's memory (a CUDA process runs inside one); with no MIG device it is not judged, and a warning says so | [`judged_as`], [`judged_devices`] (`hmn fits --device all`, `hmn pick`) |
//! | the CPU: when asked, or with no GPU at all for a model (not a size), unless a device was named | [`judged_on_cpu`] |
//! | what a best-device plan does not model, per runtime (its note) | `best_device_note` |
//!
//! Nothing here reads a device: the caller passes what the probe found.

use crate::estimate::runtime::Runtime;
use crate::types::{Device, Warning};

/// One device a plan over every device judges ([`judged_as`]).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Judged {
    /// The device: the probed device itself, or one MIG device as its own device
    /// ([`crate::MigDevice::as_device`]: its index is its GPU's, its memory its GPU instance's).
    pub device: Device,
    /// The MIG device's index on its GPU, when it is one.
    pub mig_index: Option<u32>,
}

/// What `device` stands as in a plan over every device: itself; for a GPU in MIG mode, its MIG
/// devices, in order (a CUDA process runs inside one MIG device, never on the whole GPU).
///
/// # Errors
/// A GPU in MIG mode with no MIG device configured: nothing can run on it, so it is not
/// judged; the warning (about that GPU) says so.
pub fn judged_as(device: &Device) -> Result<Vec<Judged>, Warning> {
    match device.mig.as_ref().filter(|m| m.enabled()) {
        None => Ok(vec![Judged {
            device: device.clone(),
            mig_index: None,
        }]),
        Some(m) if m.instances.is_empty() => Err(Warning::device(
            device.index,
            "MIG is enabled with no MIG device configured: nothing can run on it; not judged",
        )),
        Some(m) => Ok(m
            .instances
            .iter()
            .map(|i| Judged {
                device: i.as_device(device),
                mig_index: Some(i.index),
            })
            .collect()),
    }
}

/// The devices a plan over every device judges ([`super::Target::Devices`] for
/// `hmn fits --device all`), from the devices the probe found: each as [`judged_as`] says, in
/// order, and a warning for each GPU that is not judged.
pub fn judged_devices(devices: &[Device]) -> (Vec<Device>, Vec<Warning>) {
    let mut out = Vec::new();
    let mut warnings = Vec::new();
    for d in devices {
        match judged_as(d) {
            Ok(list) => out.extend(list.into_iter().map(|j| j.device)),
            Err(w) => warnings.push(w),
        }
    }
    (out, warnings)
}

/// Which device the caller asked to judge on (`hmn fits --device`), for [`judged_on_cpu`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Asked {
    /// No device named: the first (the first N for vLLM tensor parallel N).
    Default,
    /// Every device (`--device all`).
    Every,
    /// One device named: an index, a UUID, a PCI bus id.
    Named,
    /// The CPU (`--device cpu`).
    Cpu,
}

/// Whether the question is judged on the CPU ([`super::Target::Cpu`], as llama.cpp without a
/// GPU: [`crate::estimate::Runtime::for_target`]): when the CPU was asked for; or when the
/// probe found no GPU at all (`no_gpu`) and there is a model to judge (`model`), unless a
/// device was named — a named device that is not there is an error, and a size is only ever
/// compared with a device's free memory.
pub fn judged_on_cpu(asked: Asked, no_gpu: bool, model: bool) -> bool {
    match asked {
        Asked::Cpu => true,
        Asked::Named => false,
        Asked::Default | Asked::Every => no_gpu && model,
    }
}

/// What a best-device plan does not model, per runtime.
pub(super) fn best_device_note(model: bool, runtime: Runtime) -> Option<String> {
    match (model, runtime) {
        (true, Runtime::Generic) => Some(
            "generic: the model on one device, the one with the most headroom (transformers' device_map split is not modelled)".to_string(),
        ),
        (true, Runtime::Vllm) => Some(
            "vLLM at tensor parallel 1 runs on the first visible GPU: the verdict is for the one with the most headroom (choose it with CUDA_VISIBLE_DEVICES)".to_string(),
        ),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{MigDevice, MigMode, MigState, Source, Vendor};

    const GIB: u64 = 1 << 30;

    fn gpu(index: u32) -> Device {
        let mut d = Device::new(index, Vendor::Nvidia, Source::Nvml);
        d.memory.free_bytes = Some(80 * GIB);
        d
    }

    fn mig(index: u32, free: &[u64]) -> Device {
        let mut d = gpu(index);
        let mut m = MigState::new(MigMode::Enabled, MigMode::Enabled);
        for (i, f) in (0u32..).zip(free) {
            let mut inst = MigDevice::new(i, index);
            inst.uuid = Some(format!("MIG-{index}-{i}"));
            inst.memory.free_bytes = Some(*f);
            m.instances.push(inst);
        }
        d.mig = Some(m);
        d
    }

    #[test]
    fn a_mig_gpu_stands_as_its_mig_devices_and_one_without_any_is_not_judged() {
        let devices = [gpu(0), mig(1, &[9 * GIB, 19 * GIB]), mig(2, &[])];
        let (judged, warnings) = judged_devices(&devices);
        let seen: Vec<(u32, Option<&str>, Option<u64>)> = judged
            .iter()
            .map(|d| (d.index, d.uuid.as_deref(), d.memory.free_bytes))
            .collect();
        assert_eq!(
            seen,
            [
                (0, None, Some(80 * GIB)),
                (1, Some("MIG-1-0"), Some(9 * GIB)),
                (1, Some("MIG-1-1"), Some(19 * GIB)),
            ]
        );
        assert_eq!(warnings.len(), 1);
        assert_eq!(warnings[0].device_index, Some(2));
        assert!(
            warnings[0].message.contains("no MIG device configured"),
            "{}",
            warnings[0].message
        );
        let per = judged_as(&devices[1]).unwrap();
        assert_eq!(
            per.iter().map(|j| j.mig_index).collect::<Vec<_>>(),
            [Some(0), Some(1)]
        );
        assert_eq!(judged_as(&devices[0]).unwrap()[0].mig_index, None);
        // MIG pending (not yet on) is the whole GPU.
        let mut pending = mig(3, &[GIB]);
        if let Some(m) = pending.mig.as_mut() {
            m.current = MigMode::Disabled;
        }
        assert_eq!(judged_devices(&[pending.clone()]).0, [pending]);
    }

    #[test]
    fn no_gpu_sends_a_model_to_the_cpu_unless_a_device_was_named() {
        for asked in [Asked::Default, Asked::Every] {
            assert!(judged_on_cpu(asked, true, true), "{asked:?}");
            assert!(!judged_on_cpu(asked, true, false), "a size: {asked:?}");
            assert!(!judged_on_cpu(asked, false, true), "a GPU: {asked:?}");
        }
        assert!(!judged_on_cpu(Asked::Named, true, true));
        assert!(judged_on_cpu(Asked::Cpu, false, false));
    }
}
