//! DXGI adapters (with PDH's `GPU Adapter Memory` when it answered) as [`Device`]s, and PDH's
//! per-process rows as [`GpuProcess`]es (pure; tested on every platform).
//!
//! - Which adapters: hardware GPUs only ([`Adapter::is_gpu`]); NVIDIA adapters only when NVML
//!   and `nvidia-smi` listed no NVIDIA device (NVML's device is the row; its adapter is found
//!   by PCI location, [`super::join`], only for the caller's own VRAM and for spill — never by
//!   order).
//! - Memory: total = `DedicatedVideoMemory`, or `SharedSystemMemory` for an integrated GPU
//!   (dedicated 0, stated as integrated); used = PDH's adapter-wide `Dedicated Usage` (committed;
//!   for an integrated GPU its `Shared Usage`), unknown with the reason when PDH did not answer;
//!   free = total − used when both are known.

use super::{Adapter, CounterSample, ProcessRow, adapter_reading};
use crate::types::{
    Device, Field, GpuProcess, ProcessKind, Source, Unknown, UnknownReason, Vendor,
};

/// PCI vendor ids DXGI reports.
pub(crate) fn vendor_of(id: u32) -> Vendor {
    match id {
        0x10DE => Vendor::Nvidia,
        0x1002 => Vendor::Amd,
        0x8086 => Vendor::Intel,
        other => Vendor::Other(format!("pci-vendor-{other:04x}")),
    }
}

/// The devices for `adapters`, numbered from `first`, and the adapter each came from.
/// `adapter_memory` is PDH's `GPU Adapter Memory` collection, or why it failed.
pub(crate) fn devices(
    adapters: &[Adapter],
    adapter_memory: &Result<Vec<CounterSample>, String>,
    first: u32,
    nvidia_listed: bool,
) -> Vec<(Device, usize)> {
    let mut out = Vec::new();
    let mut index = first;
    for (pos, a) in adapters.iter().enumerate() {
        if !a.is_gpu() || (nvidia_listed && a.vendor_id == 0x10DE) {
            continue;
        }
        let mut d = Device::new(index, vendor_of(a.vendor_id), Source::Dxgi);
        index = index.saturating_add(1);
        d.name.clone_from(&a.description);
        let integrated = a.dedicated_bytes == 0;
        d.integrated = Some(integrated);
        let total = if integrated {
            a.shared_bytes
        } else {
            a.dedicated_bytes
        };
        d.memory.total_bytes = Some(total);
        let used = match adapter_memory {
            Ok(samples) => adapter_reading(samples, a.luid, a.dedicated_bytes)
                .map(|r| {
                    if integrated {
                        r.shared_bytes
                    } else {
                        r.dedicated_bytes
                    }
                })
                .ok_or_else(|| {
                    "PDH GPU Adapter Memory has no readable instance for this adapter".to_string()
                }),
            Err(e) => Err(e.clone()),
        };
        match used {
            Ok(u) => {
                d.memory.used_bytes = Some(u);
                d.memory.free_bytes = Some(total.saturating_sub(u));
            }
            Err(e) => {
                d.unknown.push(Unknown::new(
                    Field::MemoryUsedBytes,
                    UnknownReason::Unreadable,
                    e.clone(),
                ));
                d.unknown.push(Unknown::new(
                    Field::MemoryFreeBytes,
                    UnknownReason::Unreadable,
                    e,
                ));
            }
        }
        d.unknown.push(Unknown::new(
            Field::MemoryReservedBytes,
            UnknownReason::Unsupported,
            "DXGI reports no reserved carve-out",
        ));
        out.push((d, pos));
    }
    out
}

/// PDH rows as processes of the listed devices (`listed`: device index, adapter position);
/// `used_bytes` is the committed dedicated usage. Rows of adapters not listed are dropped.
pub(crate) fn processes(rows: &[ProcessRow], listed: &[(u32, usize)]) -> Vec<GpuProcess> {
    rows.iter()
        .filter_map(|r| {
            let (index, _) = listed.iter().find(|(_, pos)| *pos == r.adapter)?;
            let mut p = GpuProcess::new(r.pid, *index, ProcessKind::Graphics, Source::Pdh);
            p.used_bytes = Some(r.dedicated_bytes);
            Some(p)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backends::wddm::parse::Luid;

    const GIB: u64 = 1 << 30;

    fn a(low: u32, vendor: u32, dedicated: u64) -> Adapter {
        Adapter {
            luid: Luid { high: 0, low },
            vendor_id: vendor,
            description: Some(format!("adapter {low}")),
            dedicated_bytes: dedicated,
            shared_bytes: 16 * GIB,
            software: false,
        }
    }

    fn s(inst: &str, d: u64, sh: u64) -> CounterSample {
        CounterSample {
            instance: inst.to_string(),
            dedicated_bytes: Some(d),
            shared_bytes: Some(sh),
        }
    }

    #[test]
    fn adapters_become_devices_with_pdh_usage_or_a_reason() {
        let adapters = [
            a(1, 0x10DE, 16 * GIB),
            a(2, 0x1002, 8 * GIB),
            a(3, 0x8086, 0),
            a(4, 0x1414, 0),
        ];
        let pdh = Ok(vec![
            s("luid_0x00000000_0x00000002_phys_0", 3 * GIB, GIB),
            s("luid_0x00000000_0x00000003_phys_0", 0, 2 * GIB),
        ]);
        let got = devices(&adapters, &pdh, 1, true);
        assert_eq!(got.len(), 2, "NVIDIA is NVML's; Basic Render is no GPU");
        let (amd, pos) = &got[0];
        assert_eq!((amd.index, *pos, amd.vendor.clone()), (1, 1, Vendor::Amd));
        assert_eq!(amd.memory.total_bytes, Some(8 * GIB));
        assert_eq!(amd.memory.used_bytes, Some(3 * GIB));
        assert_eq!(amd.memory.free_bytes, Some(5 * GIB));
        let (intel, _) = &got[1];
        assert_eq!(intel.integrated, Some(true));
        assert_eq!(intel.memory.total_bytes, Some(16 * GIB));
        assert_eq!(
            intel.memory.used_bytes,
            Some(2 * GIB),
            "shared usage on an iGPU"
        );

        let without_nvml = devices(&adapters, &Err("PdhOpenQueryW failed".into()), 0, false);
        assert_eq!(without_nvml.len(), 3);
        let nv = &without_nvml[0].0;
        assert_eq!(nv.vendor, Vendor::Nvidia);
        assert_eq!(nv.memory.used_bytes, None, "unknown, not 0");
        assert!(
            nv.unknown
                .iter()
                .any(|u| u.field == Field::MemoryUsedBytes && u.detail.contains("PdhOpenQueryW"))
        );
    }

    #[test]
    fn rows_attach_to_listed_devices_only() {
        let rows = [
            ProcessRow {
                pid: 5,
                adapter: 1,
                dedicated_bytes: GIB,
                shared_bytes: None,
            },
            ProcessRow {
                pid: 6,
                adapter: 0,
                dedicated_bytes: GIB,
                shared_bytes: Some(0),
            },
        ];
        let p = processes(&rows, &[(3, 1)]);
        assert_eq!(p.len(), 1);
        assert_eq!(
            (p[0].pid, p[0].device_index, p[0].used_bytes),
            (5, 3, Some(GIB))
        );
        assert_eq!(p[0].source, Source::Pdh);
    }
}
