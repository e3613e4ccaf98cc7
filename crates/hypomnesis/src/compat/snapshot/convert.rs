//! Truthful values → upstream values (crate-private, pure): a [`Device`] or a [`GpuProcess`]
//! whose figures are `Option`s with reasons, or an `nvidia-smi` answer, becomes a
//! [`GpuDeviceInfo`], a [`GpuProcessEntry`] or a [`ProcessGpuInfo`] only when every figure the
//! upstream type needs is known. Otherwise the conversion fails (with the reason, for the
//! `debug-output` traces) and the caller leaves the value out: an unknown never becomes `0`.

use super::values::{GpuDeviceInfo, GpuProcessEntry, GpuQuerySource, ProcessGpuInfo};
use crate::backends::smi::compat::{SmiComputeApp, SmiMemory};
use crate::types::{Device, Field, GpuProcess, Source};

/// The upstream source for a truthful one: the DRM sources (sysfs, fdinfo, KFD) are all `Drm`.
pub(crate) const fn source_of(source: Source) -> GpuQuerySource {
    match source {
        Source::Nvml => GpuQuerySource::Nvml,
        Source::NvidiaSmi => GpuQuerySource::NvidiaSmi,
        Source::Sysfs | Source::Fdinfo | Source::Kfd => GpuQuerySource::Drm,
        Source::Dxgi => GpuQuerySource::Dxgi,
        Source::Pdh => GpuQuerySource::Pdh,
        Source::Metal => GpuQuerySource::Metal,
    }
}

/// Why `field` of `dev` is missing: the device's error, its `Unknown` entry, or plainly absent.
fn missing(dev: &Device, field: Field) -> String {
    dev.unknown
        .iter()
        .find(|u| u.field == field)
        .map_or_else(|| format!("{field} not reported"), ToString::to_string)
}

/// A device's upstream view: `used = total − free` (the reserved carve-out included), the
/// reserved figure when known. Fails for a device that refused its queries, or whose total or
/// free memory is unknown or inconsistent.
pub(crate) fn device_info(dev: &Device) -> Result<GpuDeviceInfo, String> {
    if let Some(e) = &dev.error {
        return Err(e.clone());
    }
    let total = dev
        .memory
        .total_bytes
        .ok_or_else(|| missing(dev, Field::MemoryTotalBytes))?;
    let free = dev
        .memory
        .free_bytes
        .ok_or_else(|| missing(dev, Field::MemoryFreeBytes))?;
    let used = total
        .checked_sub(free)
        .ok_or_else(|| format!("free memory {free} exceeds the total {total}"))?;
    Ok(GpuDeviceInfo {
        index: dev.index,
        name: dev.name.clone(),
        total_bytes: total,
        free_bytes: free,
        used_bytes: used,
        reserved_bytes: dev.memory.reserved_bytes,
        driver_version: dev.driver_version.clone(),
    })
}

/// Device `index` from upstream's `nvidia-smi --id` query: no name (the query asks for none),
/// `free = total − used`. Fails when `used` exceeds `total`.
pub(crate) fn device_info_from_smi(index: u32, m: &SmiMemory) -> Result<GpuDeviceInfo, String> {
    let free = m.total.checked_sub(m.used).ok_or_else(|| {
        format!(
            "nvidia-smi reported {} bytes used of {} total",
            m.used, m.total
        )
    })?;
    Ok(GpuDeviceInfo {
        index,
        name: None,
        total_bytes: m.total,
        free_bytes: free,
        used_bytes: m.used,
        reserved_bytes: None,
        driver_version: m.driver_version.clone(),
    })
}

/// The system memory the GPU maps for a DRM row: its resident GTT bytes when it also has
/// device-local memory, `Some(0)` when it has no GTT region or no device-local memory at all
/// (an integrated GPU's `used_bytes` already counts its GTT), `None` when a GTT region is
/// reported without a figure.
fn drm_shared_bytes(row: &GpuProcess) -> Option<u64> {
    match row.regions {
        Some(r) if r.vram.is_some() => r.gtt.map_or(Some(0), |g| g.resident_or_total()),
        _ => Some(0),
    }
}

/// A process row's upstream view, named `name`. Fails (the row is left out) when its memory is
/// unknown — upstream drops such rows (the NVML sentinel, a value above the device total).
pub(crate) fn process_entry(row: &GpuProcess, name: Option<String>) -> Option<GpuProcessEntry> {
    let used_bytes = row.used_bytes?;
    let source = source_of(row.source);
    let shared_used_bytes = match source {
        GpuQuerySource::Drm => drm_shared_bytes(row)?,
        _ => 0,
    };
    Some(GpuProcessEntry {
        pid: row.pid,
        name,
        used_bytes,
        shared_used_bytes,
        source,
    })
}

/// An `nvidia-smi --query-compute-apps` row's upstream view.
pub(crate) fn process_entry_from_smi(app: &SmiComputeApp) -> GpuProcessEntry {
    GpuProcessEntry {
        pid: app.pid,
        name: app.name.clone(),
        used_bytes: app.used,
        shared_used_bytes: 0,
        source: GpuQuerySource::NvidiaSmi,
    }
}

/// The caller's own row as its GPU use (`is_per_process: true`), when its figure is known.
pub(crate) fn own_usage(row: &GpuProcess) -> Option<ProcessGpuInfo> {
    Some(ProcessGpuInfo {
        used_bytes: row.used_bytes?,
        is_per_process: true,
        source: source_of(row.source),
    })
}

/// A device's used memory standing in for a process without a figure of its own
/// (`is_per_process: false`): the device's `used_bytes`, else `total − free`.
pub(crate) fn device_wide_usage(dev: &Device) -> Option<ProcessGpuInfo> {
    if dev.error.is_some() {
        return None;
    }
    let m = dev.memory;
    let used = m
        .used_bytes
        .or_else(|| m.total_bytes?.checked_sub(m.free_bytes?))?;
    Some(ProcessGpuInfo {
        used_bytes: used,
        is_per_process: false,
        source: source_of(dev.source),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{
        DeviceMemory, ProcessKind, ProcessRegions, RegionUsage, Unknown, UnknownReason, Vendor,
    };

    const GIB: u64 = 1 << 30;

    fn nvml_device(memory: DeviceMemory) -> Device {
        let mut d = Device::new(0, Vendor::Nvidia, Source::Nvml);
        d.name = Some("NVIDIA H100 80GB HBM3".to_string());
        d.driver_version = Some("550.54.15".to_string());
        d.memory = memory;
        d
    }

    #[test]
    fn used_is_everything_not_free_reserved_included() {
        // v2 figures: 80 GiB total, 1 GiB reserved, 4 GiB used, 75 GiB free.
        let d = nvml_device(DeviceMemory::new(
            Some(80 * GIB),
            Some(4 * GIB),
            Some(75 * GIB),
            Some(GIB),
        ));
        let info = device_info(&d).unwrap();
        assert_eq!(
            info,
            GpuDeviceInfo {
                index: 0,
                name: Some("NVIDIA H100 80GB HBM3".to_string()),
                total_bytes: 80 * GIB,
                free_bytes: 75 * GIB,
                used_bytes: 5 * GIB,
                reserved_bytes: Some(GIB),
                driver_version: Some("550.54.15".to_string()),
            }
        );
        assert_eq!(info.used_bytes + info.free_bytes, info.total_bytes);
    }

    #[test]
    fn a_device_without_known_memory_is_not_converted() {
        let mut d = nvml_device(DeviceMemory::new(None, None, Some(GIB), None));
        d.unknown.push(Unknown::new(
            Field::MemoryTotalBytes,
            UnknownReason::Suspended,
            "runtime-suspended; not woken",
        ));
        let why = device_info(&d).unwrap_err();
        assert!(why.contains("suspended"), "{why}");
        let d = nvml_device(DeviceMemory::new(Some(GIB), None, None, None));
        assert_eq!(
            device_info(&d).unwrap_err(),
            "memory.free_bytes not reported"
        );
        let d = nvml_device(DeviceMemory::new(Some(GIB), None, Some(2 * GIB), None));
        assert!(device_info(&d).is_err(), "free above total is not a figure");
        let mut lost = nvml_device(DeviceMemory::default());
        lost.error = Some("NVML refused the device handle: the GPU is lost".to_string());
        assert_eq!(
            device_info(&lost).unwrap_err(),
            "NVML refused the device handle: the GPU is lost"
        );
        assert_eq!(device_wide_usage(&lost), None);
    }

    #[test]
    fn smi_memory_becomes_a_device_without_a_name() {
        let m = SmiMemory {
            used: GIB,
            total: 16 * GIB,
            driver_version: Some("999.99".to_string()),
        };
        let info = device_info_from_smi(3, &m).unwrap();
        assert_eq!(
            (info.index, info.name, info.free_bytes, info.used_bytes),
            (3, None, 15 * GIB, GIB)
        );
        assert_eq!(info.driver_version.as_deref(), Some("999.99"));
        let over = SmiMemory {
            used: 17 * GIB,
            ..m
        };
        assert!(device_info_from_smi(0, &over).is_err());
    }

    fn drm_row(regions: Option<ProcessRegions>, used: Option<u64>) -> GpuProcess {
        let mut r = GpuProcess::new(100, 1, ProcessKind::Graphics, Source::Fdinfo);
        r.regions = regions;
        r.used_bytes = used;
        r
    }

    fn region(resident: Option<u64>, total: Option<u64>) -> RegionUsage {
        RegionUsage {
            resident_bytes: resident,
            total_bytes: total,
            ..RegionUsage::default()
        }
    }

    #[test]
    fn drm_rows_report_gtt_as_shared_usage() {
        let regions = ProcessRegions {
            vram: Some(region(Some(3 * GIB), None)),
            gtt: Some(region(Some(GIB), Some(2 * GIB))),
            system: None,
        };
        let e = process_entry(&drm_row(Some(regions), Some(3 * GIB)), Some("x".into())).unwrap();
        assert_eq!(
            (e.used_bytes, e.shared_used_bytes, e.source),
            (3 * GIB, GIB, GpuQuerySource::Drm)
        );
        // No GTT region: nothing shared.
        let vram_only = ProcessRegions {
            gtt: None,
            ..regions
        };
        let e = process_entry(&drm_row(Some(vram_only), Some(3 * GIB)), None).unwrap();
        assert_eq!(e.shared_used_bytes, 0);
        // An integrated GPU: used already counts the GTT.
        let igpu = ProcessRegions {
            vram: None,
            ..regions
        };
        let e = process_entry(&drm_row(Some(igpu), Some(GIB)), None).unwrap();
        assert_eq!((e.used_bytes, e.shared_used_bytes), (GIB, 0));
        // A GTT region without a figure: the row's shared usage is unknown, so it is left out.
        let blind = ProcessRegions {
            gtt: Some(RegionUsage::default()),
            ..regions
        };
        assert_eq!(process_entry(&drm_row(Some(blind), Some(GIB)), None), None);
    }

    #[test]
    fn rows_without_a_figure_are_left_out() {
        let mut r = GpuProcess::new(7, 0, ProcessKind::Compute, Source::Nvml);
        assert_eq!(process_entry(&r, None), None);
        assert_eq!(own_usage(&r), None);
        r.used_bytes = Some(GIB);
        let e = process_entry(&r, Some("python3".into())).unwrap();
        assert_eq!(
            (e.pid, e.name.as_deref(), e.shared_used_bytes, e.source),
            (7, Some("python3"), 0, GpuQuerySource::Nvml)
        );
        let own = own_usage(&r).unwrap();
        assert!(own.is_per_process);
        assert_eq!(own.used_bytes, GIB);
    }

    #[test]
    fn device_wide_usage_prefers_the_used_figure() {
        let mut d = Device::new(2, Vendor::Amd, Source::Sysfs);
        d.memory = DeviceMemory::new(Some(8 * GIB), Some(3 * GIB), Some(5 * GIB), None);
        let u = device_wide_usage(&d).unwrap();
        assert_eq!(
            (u.used_bytes, u.is_per_process, u.source),
            (3 * GIB, false, GpuQuerySource::Drm)
        );
        d.memory = DeviceMemory::new(Some(8 * GIB), None, Some(6 * GIB), None);
        assert_eq!(device_wide_usage(&d).unwrap().used_bytes, 2 * GIB);
        d.memory = DeviceMemory::new(Some(8 * GIB), None, None, None);
        assert_eq!(device_wide_usage(&d), None);
    }

    #[test]
    fn every_source_maps() {
        assert_eq!(source_of(Source::Nvml), GpuQuerySource::Nvml);
        assert_eq!(source_of(Source::NvidiaSmi), GpuQuerySource::NvidiaSmi);
        for s in [Source::Sysfs, Source::Fdinfo, Source::Kfd] {
            assert_eq!(source_of(s), GpuQuerySource::Drm);
        }
        let app = SmiComputeApp {
            pid: 9,
            name: None,
            used: GIB,
        };
        let e = process_entry_from_smi(&app);
        assert_eq!(
            (e.pid, e.used_bytes, e.shared_used_bytes, e.source),
            (9, GIB, 0, GpuQuerySource::NvidiaSmi)
        );
    }
}
