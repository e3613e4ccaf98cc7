//! Whether a GPU can take a new CUDA context at all, whatever its free memory: its compute mode
//! (`nvidia-smi -c`), who already holds a context there, and — for an exclusive GPU — whether
//! another pick has reserved it for a command that has not yet made its context. A pick that
//! ignored these would hand a command a GPU where context creation fails ("all CUDA-capable
//! devices are busy or unavailable").
//!
//! MIG devices are not judged here: NVML answers the compute mode for a GPU's handle, and a
//! MIG device stands as its own candidate without one ([`crate::MigDevice::as_device`]), so a
//! MIG candidate is never refused by mode (docs/pick.md).

use crate::types::{ComputeMode, Device, ProcessKind, ProcessList};

/// Why `d` cannot take a new context, or `None` when it can (or its mode is unknown: a mode
/// that could not be read refuses nothing). `list` is the GPU processes (only read when some
/// candidate is exclusive; an empty list otherwise):
/// - `prohibited`: never;
/// - `exclusive_process` / `exclusive_thread`: not while a process holds its one context — a
///   compute row, unless an MPS server runs there (clients then share the server's context,
///   the usual reason for the mode on shared machines) — nor when its process list could not
///   be read (who holds it is unknown, not "nobody").
pub fn mode_refusal(d: &Device, list: &ProcessList) -> Option<String> {
    let mode = d.compute_mode?;
    if mode == ComputeMode::Prohibited {
        return Some("compute mode prohibited: no CUDA context can be made there".to_string());
    }
    if !mode.is_exclusive() {
        return None;
    }
    if list.failed_devices.contains(&d.index) {
        return Some(format!(
            "compute mode {mode}: its process list could not be read, so who holds its one \
             context is unknown"
        ));
    }
    let mut holder = None;
    for r in list.processes.iter().filter(|r| r.device_index == d.index) {
        match r.kind {
            ProcessKind::MpsServer => return None,
            ProcessKind::Compute | ProcessKind::ComputeGraphics | ProcessKind::Mps => {
                holder = holder.or(Some(r.pid));
            }
            _ => {}
        }
    }
    holder.map(|pid| format!("compute mode {mode}: pid {pid} holds its one context"))
}

/// Why an exclusive GPU cannot be picked while others' reservations stand on it (their
/// commands will make its one context), or `None`.
pub(super) fn reserved_refusal(d: &Device, reserved_by_others: u64) -> Option<String> {
    let mode = d.compute_mode.filter(|m| m.is_exclusive())?;
    (reserved_by_others > 0).then(|| {
        format!("compute mode {mode}: another pick has reserved it for a command of its own")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{GpuProcess, Source, Vendor};

    fn gpu(index: u32, mode: Option<ComputeMode>) -> Device {
        let mut d = Device::new(index, Vendor::Nvidia, Source::Nvml);
        d.compute_mode = mode;
        d
    }

    fn list(rows: &[(u32, u32, ProcessKind)]) -> ProcessList {
        ProcessList {
            processes: rows
                .iter()
                .map(|(pid, dev, kind)| GpuProcess::new(*pid, *dev, *kind, Source::Nvml))
                .collect(),
            ..ProcessList::default()
        }
    }

    #[test]
    fn a_prohibited_gpu_never_and_a_default_one_always() {
        let busy = list(&[(7, 0, ProcessKind::Compute)]);
        assert!(
            mode_refusal(&gpu(0, Some(ComputeMode::Prohibited)), &list(&[]))
                .unwrap()
                .contains("prohibited")
        );
        assert_eq!(
            mode_refusal(&gpu(0, Some(ComputeMode::Default)), &busy),
            None
        );
        assert_eq!(
            mode_refusal(&gpu(0, None), &busy),
            None,
            "unknown refuses nothing"
        );
    }

    #[test]
    fn an_exclusive_gpu_is_taken_by_a_compute_context_unless_mps_shares_it() {
        let d = gpu(1, Some(ComputeMode::ExclusiveProcess));
        assert_eq!(mode_refusal(&d, &list(&[])), None, "nobody holds it");
        let other_gpu = list(&[(7, 0, ProcessKind::Compute)]);
        assert_eq!(
            mode_refusal(&d, &other_gpu),
            None,
            "a context on another GPU"
        );
        let display = list(&[(8, 1, ProcessKind::Graphics)]);
        assert_eq!(
            mode_refusal(&d, &display),
            None,
            "a graphics context is not CUDA's"
        );
        let held = list(&[(8, 1, ProcessKind::Graphics), (9, 1, ProcessKind::Compute)]);
        assert_eq!(
            mode_refusal(&d, &held).as_deref(),
            Some("compute mode exclusive_process: pid 9 holds its one context")
        );
        let mps = list(&[(9, 1, ProcessKind::Mps), (10, 1, ProcessKind::MpsServer)]);
        assert_eq!(
            mode_refusal(&d, &mps),
            None,
            "clients join the MPS server's context"
        );
        let clients_only = list(&[(9, 1, ProcessKind::Mps)]);
        assert!(
            mode_refusal(&d, &clients_only).is_some(),
            "a client without a listed server still holds a context"
        );
    }

    #[test]
    fn an_unreadable_process_list_is_unknown_not_free() {
        let d = gpu(2, Some(ComputeMode::ExclusiveProcess));
        let mut failed = list(&[]);
        failed.failed_devices = vec![2];
        assert!(
            mode_refusal(&d, &failed)
                .unwrap()
                .contains("could not be read")
        );
        let default = gpu(2, Some(ComputeMode::Default));
        assert_eq!(
            mode_refusal(&default, &failed),
            None,
            "only exclusive GPUs care who holds them"
        );
    }

    #[test]
    fn an_exclusive_gpu_reserved_by_another_pick_is_refused() {
        let ex = gpu(0, Some(ComputeMode::ExclusiveProcess));
        assert!(reserved_refusal(&ex, 1).unwrap().contains("another pick"));
        assert_eq!(reserved_refusal(&ex, 0), None);
        assert_eq!(
            reserved_refusal(&gpu(0, Some(ComputeMode::Default)), 5 << 30),
            None,
            "a default GPU shares its memory between picks"
        );
    }
}
