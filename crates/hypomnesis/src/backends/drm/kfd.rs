//! ROCm compute (KFD) processes: device memory from `<sys>/class/kfd/kfd/proc/<pid>/vram_<gpu_id>`.
//!
//! ROCm allocations made through `/dev/kfd` do not show in DRM fdinfo, so a compute process can
//! look nearly idle there. The KFD exposes each process's VRAM per GPU; the `gpu_id` is mapped
//! to a PCI address through the KFD topology (`topology/nodes/<n>/gpu_id` and the node's
//! `properties`: `domain` and `location_id` = bus << 8 | device << 3 | function).

use std::collections::BTreeMap;

use crate::system::fsread::{self, Cap};
use crate::system::roots::Roots;
use crate::types::pci::PciBusId;

/// `(pid, PCI address, VRAM bytes)` for every KFD process file that could be read.
pub(crate) fn vram_by_process(roots: &Roots) -> Vec<(u32, PciBusId, u64)> {
    let procs = roots.sys.join("class/kfd/kfd/proc");
    let Ok(pids) = fsread::list_pids(&procs) else {
        return Vec::new();
    };
    let gpus = topology(roots);
    let mut out = Vec::new();
    for pid in pids {
        let Ok(files) = fsread::list_dir(&procs.join(pid.to_string())) else {
            continue;
        };
        for f in files {
            let Some(gpu_id) = f
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_prefix("vram_"))
                .and_then(|id| id.parse::<u64>().ok())
            else {
                continue;
            };
            let (Some(pci), Ok(bytes)) = (gpus.get(&gpu_id), fsread::read_u64(&f)) else {
                continue;
            };
            out.push((pid, *pci, bytes));
        }
    }
    out.sort_by_key(|(pid, pci, _)| (*pid, *pci));
    out
}

/// `gpu_id` → PCI address, from the KFD topology.
fn topology(roots: &Roots) -> BTreeMap<u64, PciBusId> {
    let mut map = BTreeMap::new();
    let Ok(nodes) = fsread::list_dir(&roots.sys.join("class/kfd/kfd/topology/nodes")) else {
        return map;
    };
    for dir in nodes {
        let gpu_id = fsread::read_u64(&dir.join("gpu_id"))
            .ok()
            .filter(|id| *id != 0); // CPU nodes have gpu_id 0
        let props = fsread::read_string(&dir.join("properties"), Cap::SYSFS).unwrap_or_default();
        if let (Some(id), Some(pci)) = (gpu_id, parse_location(&props)) {
            map.insert(id, pci);
        }
    }
    map
}

/// A KFD topology node with compute cores: what ROCr enumerates (and what
/// `ROCR_VISIBLE_DEVICES` indexes or names by UUID).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KfdNode {
    /// The node's number (its directory).
    pub node: u32,
    /// Its PCI address.
    pub pci: Option<PciBusId>,
    /// `unique_id` (0 or absent: no UUID; `GPU-<16 hex>` otherwise).
    pub unique_id: Option<u64>,
}

/// The KFD nodes with compute cores (`simd_count` > 0; CPU nodes have none), in node order:
/// ROCr's device order.
pub(crate) fn compute_nodes(roots: &Roots) -> Vec<KfdNode> {
    let Ok(nodes) = fsread::list_dir(&roots.sys.join("class/kfd/kfd/topology/nodes")) else {
        return Vec::new();
    };
    let mut out: Vec<KfdNode> = nodes
        .iter()
        .filter_map(|dir| {
            let node = dir.file_name()?.to_str()?.parse::<u32>().ok()?;
            let props = fsread::read_string(&dir.join("properties"), Cap::SYSFS).ok()?;
            let get = |key: &str| {
                props.lines().find_map(|l| {
                    let mut it = l.split_ascii_whitespace();
                    (it.next() == Some(key))
                        .then(|| it.next()?.parse::<u64>().ok())
                        .flatten()
                })
            };
            (get("simd_count").unwrap_or(0) > 0).then(|| KfdNode {
                node,
                pci: parse_location(&props),
                unique_id: get("unique_id").filter(|u| *u != 0),
            })
        })
        .collect();
    out.sort_by_key(|n| n.node);
    out
}

/// The PCI address in a KFD node's `properties` text (pure).
pub(crate) fn parse_location(properties: &str) -> Option<PciBusId> {
    let get = |key: &str| {
        properties.lines().find_map(|l| {
            let mut it = l.split_ascii_whitespace();
            (it.next() == Some(key))
                .then(|| it.next()?.parse::<u32>().ok())
                .flatten()
        })
    };
    let location = get("location_id")?;
    let domain = get("domain").unwrap_or(0);
    let bus = u8::try_from(location >> 8).ok()?;
    let device = u8::try_from((location >> 3) & 0x1f).ok()?;
    let function = u8::try_from(location & 0x7).ok()?;
    Some(PciBusId::new(domain, bus, device, function))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn location_id_decodes_to_a_pci_address() {
        let props =
            "cpu_cores_count 0\nsimd_count 304\nlocation_id 33536\ndomain 0\ngpu_id 48233\n";
        // 33536 = 0x8300: bus 0x83, device 0, function 0.
        assert_eq!(parse_location(props).unwrap().to_string(), "0000:83:00.0");
        assert_eq!(parse_location("domain 0\n"), None);
    }
}
