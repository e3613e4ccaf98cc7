//! Device selection for every command: `--device` values resolved by the library's one
//! implementation (`hypomnesis::select`), with integers read as CUDA ordinals under
//! `--cuda-order` (`CUDA_VISIBLE_DEVICES` and `CUDA_DEVICE_ORDER` are read here, at the edge).

use hypomnesis::select::{CudaView, DeviceSelector, Resolver, Selected, cuda_view};
use hypomnesis::{Device, Error};

use crate::args::GlobalArgs;
use crate::format::sanitize;
use crate::output;

/// The CUDA view of `devices` when `--cuda-order` asks for it.
pub fn cuda(g: &GlobalArgs, devices: &[Device]) -> Option<CudaView> {
    g.cuda_order.then(|| {
        let var = |name| std::env::var(name).ok();
        cuda_view(
            var("CUDA_VISIBLE_DEVICES").as_deref(),
            var("CUDA_DEVICE_ORDER").as_deref(),
            devices,
        )
    })
}

/// `cuda:0 = GPU 1 (GPU-…), cuda:1 = GPU 0 MIG 1g.10gb (MIG-…)`, or `no CUDA device`.
pub fn mapping(view: &CudaView, devices: &[Device]) -> String {
    if view.devices.is_empty() {
        return "no CUDA device".to_string();
    }
    view.devices
        .iter()
        .enumerate()
        .map(|(n, s)| {
            let uuid = match s.find_mig(devices) {
                Some(_) => String::new(),
                None => s
                    .find_device(devices)
                    .and_then(|d| d.uuid.as_deref())
                    .map(|u| format!(" ({u})"))
                    .unwrap_or_default(),
            };
            format!("cuda:{n} = {}{uuid}", s.describe(devices))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The lines that state a CUDA view on stderr: the order's basis, the mapping, the notes.
pub fn note_cuda(cmd: &str, view: &CudaView, devices: &[Device]) -> anyhow::Result<()> {
    output::note(&format!(
        "{cmd}CUDA order: {}; {}",
        sanitize(&view.summary()),
        mapping(view, devices)
    ))?;
    for n in &view.notes {
        output::note(&format!("{cmd}CUDA: {}", sanitize(n)))?;
    }
    Ok(())
}

/// Resolves `sels` against `devices` (integers as CUDA ordinals under `--cuda-order`, whose
/// basis is stated on stderr). Empty `sels`: none. With no device at all, the no-GPU reason.
///
/// # Errors
/// `<cmd>: <why>`, one line: no GPU, an index or ordinal out of range, a selector that names no
/// device or several.
pub fn resolve(
    cmd: &str,
    g: &GlobalArgs,
    devices: &[Device],
    absent: impl FnOnce() -> Vec<hypomnesis::BackendProblem>,
    sels: &[DeviceSelector],
) -> anyhow::Result<Vec<Selected>> {
    if sels.is_empty() {
        return Ok(Vec::new());
    }
    if devices.is_empty() {
        anyhow::bail!("{cmd}: {}", Error::NoGpu { reasons: absent() });
    }
    let view = cuda(g, devices);
    if let Some(v) = &view {
        if sels.iter().any(|s| matches!(s, DeviceSelector::Index(_))) {
            note_cuda(&format!("{cmd}: "), v, devices)?;
        }
    }
    Resolver::new(devices)
        .with_cuda(view.as_ref())
        .resolve_all(sels)
        .map_err(|e| anyhow::anyhow!("{cmd}: {}", sanitize(&e.to_string())))
}

/// Whether an integer selector can be answered without listing devices (no `--cuda-order`).
pub fn plain_index(g: &GlobalArgs, sel: &DeviceSelector) -> Option<u32> {
    match sel {
        DeviceSelector::Index(i) if !g.cuda_order => Some(*i),
        _ => None,
    }
}
