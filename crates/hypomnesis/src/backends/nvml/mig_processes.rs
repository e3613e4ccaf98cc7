//! A GPU in MIG mode lists its processes per MIG device: [`NvmlBackend::mig_processes`], each
//! row placed in the instance it runs in. The MIG state it walks is read in `mig.rs`.

use nvml_wrapper::error::NvmlError;

use super::convert::{self, describe};
use super::ffi::{self, ProcessListKind};
use super::mig::gone;
use super::{DeviceProcesses, NvmlBackend};
use crate::backends::error::BackendError;
use crate::types::{Device, GpuProcess, MigDevice, MigState, ProcessKind, Warning};

impl NvmlBackend {
    /// The processes of a GPU in MIG mode, listed per MIG device (its compute and MPS lists;
    /// MIG devices have no graphics list), each row carrying the instance it runs in.
    pub(super) fn mig_processes(
        &self,
        gpu: &nvml_wrapper::Device<'_>,
        device: &Device,
        st: &MigState,
        warnings: &mut Vec<Warning>,
    ) -> DeviceProcesses {
        let lib = self.nvml.lib();
        let index = device.index;
        let mut out = DeviceProcesses {
            rows: Vec::new(),
            failed: false,
        };
        for m in &st.instances {
            let name = || {
                format!(
                    "MIG device {}{}",
                    m.index,
                    m.uuid
                        .as_deref()
                        .map(|u| format!(" ({u})"))
                        .unwrap_or_default()
                )
            };
            let h = match gpu.mig_device_by_index(m.index) {
                Ok(h) => h,
                Err(e) if gone(&e) => {
                    warnings.push(Warning::device(
                        index,
                        format!("{} was destroyed; its processes are not listed", name()),
                    ));
                    continue;
                }
                Err(e) => {
                    out.failed = true;
                    warnings.push(Warning::device(
                        index,
                        format!("{}: process list unavailable: {}", name(), describe(&e)),
                    ));
                    continue;
                }
            };
            // A slot may hold another MIG device now ("handles may be reused").
            if let (Ok(now), Some(was)) = (h.uuid(), m.uuid.as_deref()) {
                if now != was {
                    warnings.push(Warning::device(
                        index,
                        format!(
                            "{} was replaced by {now}; its processes are not listed",
                            name()
                        ),
                    ));
                    continue;
                }
            }
            let mut rows = Vec::new();
            for (list, kind) in [
                (ProcessListKind::Compute, ProcessKind::Compute),
                (ProcessListKind::Mps, ProcessKind::Mps),
            ] {
                match ffi::running_processes(lib, &h, list, None) {
                    Ok((records, _, _)) => {
                        rows.extend(records.into_iter().map(|r| {
                            convert::to_row(r, index, m.memory.total_bytes, kind, warnings)
                        }))
                    }
                    Err(BackendError::Nvml(
                        NvmlError::NotSupported
                        | NvmlError::FailedToLoadSymbol(_)
                        | NvmlError::FunctionNotFound,
                    )) if kind == ProcessKind::Mps => {}
                    Err(BackendError::Nvml(e)) if gone(&e) => {
                        warnings.push(Warning::device(
                            index,
                            format!("{} was destroyed while its processes were read", name()),
                        ));
                        rows.clear();
                        break;
                    }
                    Err(e) => {
                        out.failed = true;
                        warnings.push(Warning::device(
                            index,
                            format!(
                                "{}: {} process list unavailable: {e}",
                                name(),
                                kind.as_str()
                            ),
                        ));
                    }
                }
            }
            let mut rows = convert::merge_rows(rows);
            for r in &mut rows {
                place(r, m, device);
            }
            out.rows.extend(rows);
        }
        out
    }
}

/// Puts a row in its MIG device: the instance's ids (the handle is authoritative; the driver may
/// write `0xFFFFFFFF` in the record), index, UUID, and the parent's UUID.
fn place(r: &mut GpuProcess, m: &MigDevice, device: &Device) {
    r.gpu_instance_id = m.gpu_instance_id.or(r.gpu_instance_id);
    r.compute_instance_id = m.compute_instance_id.or(r.compute_instance_id);
    r.mig_index = Some(m.index);
    r.mig_uuid.clone_from(&m.uuid);
    r.device_uuid.clone_from(&device.uuid);
}
