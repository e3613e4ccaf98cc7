//! `hmn watch`'s NVIDIA-specific parts: the `--device` selection (any selector; a MIG device
//! narrows auto-selection to its own processes), the SM column (NVML's per-process utilization
//! since the previous sample), and the closing lines from the driver's accounting records (each
//! process's peak memory and its utilization over its life), with MIG stated where neither
//! exists.

use hypomnesis::accounting::DeviceAccounting;
use hypomnesis::sampler::ProcessSample;
use hypomnesis::select::{DeviceSelector, Resolver, Selected};
use hypomnesis::{DeviceList, UnknownReason};

use crate::args::GlobalArgs;
use crate::format::{bytes, sanitize};

/// What `--device` names: a plain index is looked up as before (`watch: GPU N: …`); any other
/// selector goes through the library's resolver (integers as CUDA ordinals under
/// `--cuda-order`, whose basis is stated).
///
/// # Errors
/// One line naming the device: no such device, or one that cannot be read.
pub fn device(
    g: &GlobalArgs,
    devices: &DeviceList,
    sel: &DeviceSelector,
) -> anyhow::Result<Selected> {
    let s = match crate::select::plain_index(g, sel) {
        Some(i) => Selected::device(i),
        None => {
            let view = crate::select::cuda(g, &devices.devices);
            if let (Some(v), DeviceSelector::Index(_)) = (&view, sel) {
                crate::select::note_cuda("watch: ", v, &devices.devices)?;
            }
            Resolver::new(&devices.devices)
                .with_cuda(view.as_ref())
                .resolve(sel)
                .map_err(|e| anyhow::anyhow!("watch: {}: {}", sanitize(&sel.to_string()), e))?
        }
    };
    if let Err(e) = devices.device(s.device_index) {
        anyhow::bail!("watch: GPU {}: {e}", s.device_index);
    }
    Ok(s)
}

/// One line per GPU in MIG mode (only `only`'s, when `--device` named one): what `watch`
/// cannot show there.
pub fn mig_notes(devices: &DeviceList, only: Option<u32>) -> Vec<String> {
    devices
        .devices
        .iter()
        .filter(|d| d.mig_enabled() && only.is_none_or(|i| i == d.index))
        .map(|d| {
            format!(
                "watch: GPU {} is in MIG mode: NVML gives no per-process utilization and keeps no accounting records there",
                d.index
            )
        })
        .collect()
}

/// The SM cell: the process's SM percent since the previous sample (the largest over its
/// devices), `-` where NVML gave none (DRM devices, MIG, a process without a context).
pub fn sm_cell(p: &ProcessSample) -> String {
    p.utilization
        .values()
        .map(|u| u.sm_percent)
        .max()
        .map_or_else(|| "-".to_string(), |v| format!("{v}%"))
}

/// The closing lines from the driver's accounting records: per record, its peak memory and
/// utilization over the process's life; a GPU where accounting is unsupported (MIG) says so.
/// Nothing for a GPU with accounting off (the default).
pub fn accounting_lines(accounting: &[DeviceAccounting]) -> Vec<String> {
    let pct = |v: Option<u32>| v.map_or_else(|| "?".to_string(), |v| format!("{v}%"));
    let mut out = Vec::new();
    for a in accounting {
        match &a.unknown {
            Some(u) if u.reason == UnknownReason::Unsupported => out.push(format!(
                "driver accounting on GPU {}: {}",
                a.index,
                sanitize(&u.detail)
            )),
            Some(u) => out.push(format!(
                "driver accounting on GPU {}: unavailable ({})",
                a.index,
                sanitize(&u.detail)
            )),
            None => {}
        }
        for p in &a.processes {
            out.push(format!(
                "driver accounting on GPU {}: pid {} peak {}, GPU {} and memory {} busy over its life",
                a.index,
                p.pid,
                p.max_memory_bytes.map_or_else(|| "?".to_string(), bytes),
                pct(p.gpu_utilization_percent),
                pct(p.memory_utilization_percent)
            ));
        }
    }
    out
}
