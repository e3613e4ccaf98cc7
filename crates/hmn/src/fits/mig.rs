//! `hmn fits` and device selectors: a `--device` other than a plain index (a UUID, a PCI bus
//! id, a CUDA ordinal), and MIG — a MIG device is judged against its own GPU instance's free
//! memory ([`hypomnesis::MigDevice::as_device`]), since a CUDA process runs inside one
//! instance; a GPU in MIG mode judged as a whole gets a note saying so. (`--device all` judges
//! a MIG GPU's MIG devices instead of it: the library's `estimate::plan::judged_devices`.)
//! Also what an empty device list means for a verdict ([`none_found`]): no GPU, or a driver
//! that failed and may hide one.

use hypomnesis::select::{DeviceSelector, Resolver};
use hypomnesis::{Device, Probe, Warning};

use crate::args::GlobalArgs;

/// The devices one selector names (a MIG device as its own device), their warnings, the error
/// when it names none, and whether there is no GPU at all.
pub(super) fn one(
    probe: &Probe,
    cli: &GlobalArgs,
    sel: &DeviceSelector,
) -> (Vec<Device>, Vec<Warning>, Option<String>, bool) {
    let list = probe.devices();
    if list.devices.is_empty() {
        let (err, no_gpu) = none_found(&list);
        return (Vec::new(), Vec::new(), err, no_gpu);
    }
    let view = crate::select::cuda(cli, &list.devices);
    if let (Some(v), DeviceSelector::Index(_)) = (&view, sel) {
        let _ = crate::select::note_cuda("fits: ", v, &list.devices);
    }
    let failed = |e: &dyn std::fmt::Display| {
        (
            Vec::new(),
            Vec::new(),
            Some(format!("fits failed to query device {sel}: {e}")),
            false,
        )
    };
    let s = match Resolver::new(&list.devices)
        .with_cuda(view.as_ref())
        .resolve(sel)
    {
        Ok(s) => s,
        Err(e) => return failed(&e),
    };
    let parent = match list.device(s.device_index) {
        Ok(d) => d,
        Err(e) => return failed(&e),
    };
    match s.find_mig(&list.devices) {
        Some(m) => (vec![m.as_device(parent)], Vec::new(), None, false),
        None => (vec![parent.clone()], parent_note(parent), None, false),
    }
}

/// A note for a GPU in MIG mode judged as a whole: its processes run inside one instance.
pub(super) fn parent_note(d: &Device) -> Vec<Warning> {
    let Some(m) = d.mig.as_ref().filter(|m| m.enabled()) else {
        return Vec::new();
    };
    let best = m
        .instances
        .iter()
        .filter(|i| i.memory.free_bytes.is_some())
        .max_by_key(|i| i.memory.free_bytes);
    let hint = match best.and_then(|b| Some((b, b.uuid.as_deref()?))) {
        Some((b, uuid)) => format!(
            "; judge against one with --device {uuid} ({}, {} free)",
            b.label(),
            crate::format::opt_bytes(b.memory.free_bytes)
        ),
        None => "; it has no MIG device to run in".to_string(),
    };
    vec![Warning::device(
        d.index,
        format!(
            "MIG is enabled: a CUDA process runs inside one MIG device, not the whole GPU{hint}"
        ),
    )]
}

/// Why a list holds no device, and whether that means no GPU is here: a backend that failed
/// (NVML that cannot initialise, no `nvidia-smi` answering for it) may hide GPUs, so it is an
/// error, never "no GPU" — which would judge a model on the CPU (QA: exit 0 for the CPU on a
/// machine whose driver was broken). `(None, false)` when the list has devices.
pub(super) fn none_found(list: &hypomnesis::DeviceList) -> (Option<String>, bool) {
    if !list.devices.is_empty() {
        return (None, false);
    }
    match list.failed_reasons().first() {
        Some(failed) => (
            Some(format!("fits failed to count devices: {failed}")),
            false,
        ),
        None => (
            Some(crate::output::no_gpu_line(&list.absent_reasons())),
            true,
        ),
    }
}
