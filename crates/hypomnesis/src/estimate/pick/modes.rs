//! Whether a GPU can take a new CUDA context at all, whatever its free memory: its compute mode
//! (`nvidia-smi -c`) and who already holds a context there. A pick that ignored it would hand
//! a command a GPU where context creation fails ("all CUDA-capable devices are busy or
//! unavailable").

use crate::types::{ComputeMode, Device, GpuProcess, ProcessKind};

/// Why `d` cannot take a new context, or `None` when it can (or its mode is unknown: a mode
/// that could not be read refuses nothing). `rows` are the GPU processes listed on it:
/// - `prohibited`: never;
/// - `exclusive_process` / `exclusive_thread`: not while a process holds its one context — a
///   compute row, unless an MPS server runs there (clients then share the server's context,
///   the usual reason for the mode on shared machines).
pub fn mode_refusal<'a>(
    d: &Device,
    rows: impl IntoIterator<Item = &'a GpuProcess>,
) -> Option<String> {
    let mode = d.compute_mode?;
    if mode == ComputeMode::Prohibited {
        return Some("compute mode prohibited: no CUDA context can be made there".to_string());
    }
    if !mode.is_exclusive() {
        return None;
    }
    let mut holder = None;
    for r in rows.into_iter().filter(|r| r.device_index == d.index) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Source, Vendor};

    fn gpu(index: u32, mode: Option<ComputeMode>) -> Device {
        let mut d = Device::new(index, Vendor::Nvidia, Source::Nvml);
        d.compute_mode = mode;
        d
    }

    fn row(pid: u32, device: u32, kind: ProcessKind) -> GpuProcess {
        GpuProcess::new(pid, device, kind, Source::Nvml)
    }

    #[test]
    fn a_prohibited_gpu_never_and_a_default_one_always() {
        let busy = [row(7, 0, ProcessKind::Compute)];
        assert!(
            mode_refusal(&gpu(0, Some(ComputeMode::Prohibited)), &[])
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
        assert_eq!(mode_refusal(&d, &[]), None, "nobody holds it");
        let other_gpu = [row(7, 0, ProcessKind::Compute)];
        assert_eq!(
            mode_refusal(&d, &other_gpu),
            None,
            "a context on another GPU"
        );
        let display = [row(8, 1, ProcessKind::Graphics)];
        assert_eq!(
            mode_refusal(&d, &display),
            None,
            "a graphics context is not CUDA's"
        );
        let held = [
            row(8, 1, ProcessKind::Graphics),
            row(9, 1, ProcessKind::Compute),
        ];
        assert_eq!(
            mode_refusal(&d, &held).as_deref(),
            Some("compute mode exclusive_process: pid 9 holds its one context")
        );
        let mps = [
            row(9, 1, ProcessKind::Mps),
            row(10, 1, ProcessKind::MpsServer),
        ];
        assert_eq!(
            mode_refusal(&d, &mps),
            None,
            "clients join the MPS server's context"
        );
    }
}
