//! Completes each device's memory pool with what its backend could not know: the host's RAM
//! (`MemTotal`, `MemAvailable`) and the sums of the device's processes or clients. Pure over
//! its inputs ([`complete`]); the probe gathers them (`Probe::devices`, `Probe::gpu_usage`).
//!
//! | Source of a figure | How it is completed |
//! |---|---|
//! | `host_total`, `host_available` | the host's `MemTotal`, `MemAvailable` |
//! | `vram_plus_gtt` total (an APU's, from its backend) | VRAM + min(GTT, `MemTotal`): GTT pages are host RAM, so a GTT size set above the RAM (`amdgpu.gttsize`) cannot be filled; the total's source becomes `vram_plus_gtt_host_bound` (unchanged, uncapped, when `meminfo` cannot be read) |
//! | `process_sum` | Σ of the device's rows (NVML's per-process figures; 0 when the driver listed none; unknown when it listed rows and none has a figure, or only an MPS server) |
//! | `client_sum` | Σ of the device's DRM rows that print a figure (unknown when none does) |
//! | `vram_plus_gtt_host_bound` | free VRAM + min(free GTT, `MemAvailable`): GTT pages are host RAM |
//! | `working_set_minus_alloc_host_bound` | min(working set − allocated, `MemAvailable`) |
//! | `total_minus_used` | total − used |
//!
//! A row that may include other rows' memory (an MPS server) is not added. A figure that
//! cannot be completed is `None` with a `pool.<field>` unknown saying why.

use crate::system::host::HostMemory;
use crate::types::{
    Device, Field, GpuProcess, PoolKind, PoolSource, Unknown, UnknownReason, VramSum,
};

/// What the processes of one query say, for the sums.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rows<'a> {
    /// Every row of the query.
    pub rows: &'a [GpuProcess],
    /// Devices whose process list could not be read.
    pub failed: &'a [u32],
}

/// Completes the pools of `devices`. `host` is the host's RAM, or why it could not be read.
pub(crate) fn complete(devices: &mut [Device], host: Result<&HostMemory, &str>, rows: Rows<'_>) {
    for d in devices {
        let Some(mut pool) = d.pool.take() else {
            continue;
        };
        let mut unknown: Vec<Unknown> = Vec::new();
        let no_host = |field: Field, unknown: &mut Vec<Unknown>| {
            if let Err(why) = host {
                unknown.push(Unknown::new(
                    field,
                    UnknownReason::Unreadable,
                    format!("the host's memory could not be read: {why}"),
                ));
            }
        };
        let avail = host.ok().map(|h| h.memory_available_bytes);
        if pool.needs_host() {
            pool.host_available_bytes = avail;
        }
        if pool.total_source == PoolSource::HostTotal {
            pool.total_bytes = host.ok().map(|h| h.memory_total_bytes);
            no_host(Field::PoolTotalBytes, &mut unknown);
        }
        if pool.kind == PoolKind::CarveOutPlusGtt && pool.total_source == PoolSource::VramPlusGtt {
            // GTT pages are host RAM (inside `MemTotal`), the carve-out is not.
            let region_total = |name: &str| d.regions.get(name)?.total_bytes;
            if let (Ok(h), Some(v), Some(g)) = (host, region_total("vram"), region_total("gtt")) {
                pool.total_bytes = Some(v.saturating_add(g.min(h.memory_total_bytes)));
                pool.total_source = PoolSource::VramPlusGttHostBound;
            }
        }
        if pool.used_source.is_sum() {
            pool.used_bytes = sum(d.index, pool.kind, pool.used_source, rows, &mut unknown);
        }
        let region_free = |name: &str| {
            let r = d.regions.get(name)?;
            Some(r.total_bytes?.saturating_sub(r.used_bytes?))
        };
        match pool.free_source {
            PoolSource::HostAvailable => {
                pool.free_bytes = avail;
                no_host(Field::PoolFreeBytes, &mut unknown);
            }
            PoolSource::VramPlusGttHostBound | PoolSource::WorkingSetMinusAllocHostBound => {
                let (free, why) = if pool.free_source == PoolSource::VramPlusGttHostBound {
                    (
                        region_free("vram")
                            .zip(region_free("gtt"))
                            .zip(avail)
                            .map(|((v, g), a)| v.saturating_add(g.min(a))),
                        "mem_info_vram_* or mem_info_gtt_* not readable",
                    )
                } else {
                    (
                        pool.total_bytes
                            .zip(pool.used_bytes)
                            .zip(avail)
                            .map(|((t, u), a)| t.saturating_sub(u).min(a)),
                        "the working set or the GPU's allocation is unknown",
                    )
                };
                pool.free_bytes = free;
                no_host(Field::PoolFreeBytes, &mut unknown);
                if host.is_ok() && free.is_none() {
                    unknown.push(Unknown::new(
                        Field::PoolFreeBytes,
                        UnknownReason::Unsupported,
                        why,
                    ));
                }
            }
            PoolSource::TotalMinusUsed => {
                pool.free_bytes = pool
                    .total_bytes
                    .zip(pool.used_bytes)
                    .map(|(t, u)| t.saturating_sub(u));
                if pool.free_bytes.is_none() {
                    unknown.push(Unknown::new(
                        Field::PoolFreeBytes,
                        UnknownReason::Unsupported,
                        "total − used: the total or the used figure is unknown",
                    ));
                }
            }
            _ => {}
        }
        // One reason per field: this query's replace any the backend left for the same field.
        d.unknown
            .retain(|u| !unknown.iter().any(|n| n.field == u.field));
        d.unknown.extend(unknown);
        d.pool = Some(pool);
    }
}

/// The sum of device `index`'s rows (their share of a pool of `kind`), or why there is none.
fn sum(
    index: u32,
    kind: crate::types::PoolKind,
    source: PoolSource,
    rows: Rows<'_>,
    unknown: &mut Vec<Unknown>,
) -> Option<u64> {
    if rows.failed.contains(&index) {
        unknown.push(Unknown::new(
            Field::PoolUsedBytes,
            UnknownReason::DeviceError,
            "the device's process list could not be read",
        ));
        return None;
    }
    // The library's sum (`VramSum`): an MPS server that may hold its clients' memory is left
    // out, a row with an unknown figure is not counted as 0.
    let sum = VramSum::of_pools(rows.rows.iter().filter(|r| r.device_index == index), |_| {
        Some(kind)
    });
    if sum.counted_rows == 0 && source == PoolSource::ClientSum {
        unknown.push(Unknown::new(
            Field::PoolUsedBytes,
            UnknownReason::Unsupported,
            "no DRM client of this device that this user can read prints memory figures",
        ));
        return None;
    }
    // Rows listed and none counted: not a measured 0 (the driver listing no process is).
    if sum.counted_rows == 0 && sum.unknown_rows > 0 {
        unknown.push(Unknown::new(
            Field::PoolUsedBytes,
            UnknownReason::Unsupported,
            format!(
                "none of the device's {} process rows reports its memory",
                sum.unknown_rows + sum.mps_servers_left_out
            ),
        ));
        return None;
    }
    if sum.counted_rows == 0 && sum.mps_servers_left_out > 0 {
        unknown.push(Unknown::new(
            Field::PoolUsedBytes,
            UnknownReason::Unsupported,
            "only an MPS server is listed, whose figure may hold its clients' (not listed here)",
        ));
        return None;
    }
    Some(sum.known_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{
        DeviceRegion, MemoryPool, PoolKind, ProcessKind, ProcessRegions, RegionUsage, Source,
        Vendor,
    };

    const GIB: u64 = 1 << 30;

    fn host() -> HostMemory {
        // nvitop #208 on a DGX Spark: MemTotal 127600748 kB, MemAvailable 118566368 kB.
        HostMemory {
            memory_total_bytes: 127_600_748 * 1024,
            memory_available_bytes: 118_566_368 * 1024,
            memory_free_bytes: 100_000_000 * 1024,
            swap_total_bytes: None,
            swap_free_bytes: None,
        }
    }

    fn row(pid: u32, device: u32, used: Option<u64>) -> GpuProcess {
        let mut r = GpuProcess::new(pid, device, ProcessKind::Compute, Source::Nvml);
        r.used_bytes = used;
        r
    }

    fn gb10() -> Device {
        let mut d = Device::new(0, Vendor::Nvidia, Source::Nvml);
        d.pool = Some(MemoryPool::host_ram(
            PoolSource::ProcessSum,
            "NOT_SUPPORTED",
        ));
        d
    }

    #[test]
    fn nvidia_unified_is_host_ram_with_the_process_sum() {
        let h = host();
        let mut devs = [gb10()];
        // nvtop #426: a python process holding 63931 MiB; an MPS server that may include it.
        let mut server = row(2, 0, Some(70_000 << 20));
        server.may_include_clients = true;
        let rows = [row(1, 0, Some(63_931 << 20)), server, row(3, 1, Some(GIB))];
        complete(
            &mut devs,
            Ok(&h),
            Rows {
                rows: &rows,
                failed: &[],
            },
        );
        let p = devs[0].pool.as_ref().unwrap();
        assert_eq!(p.total_bytes, Some(127_600_748 * 1024));
        assert_eq!(p.free_bytes, Some(118_566_368 * 1024));
        assert_eq!(p.host_available_bytes, Some(118_566_368 * 1024));
        assert_eq!(p.used_bytes, Some(63_931 << 20));
        assert!(p.used_is_lower_bound);
        assert!(devs[0].unknown.is_empty(), "{:?}", devs[0].unknown);
        // No process at all: the driver said so; 0 is a measurement.
        let mut idle = [gb10()];
        complete(
            &mut idle,
            Ok(&h),
            Rows {
                rows: &[],
                failed: &[],
            },
        );
        assert_eq!(idle[0].pool.as_ref().unwrap().used_bytes, Some(0));
        // Processes listed, none with a figure (NVML's VALUE_NOT_AVAILABLE), or only an MPS
        // server: not a measured 0.
        let mut server = row(2, 0, Some(GIB));
        server.may_include_clients = true;
        for rows in [vec![row(1, 0, None), row(2, 0, None)], vec![server]] {
            let mut devs = [gb10()];
            complete(
                &mut devs,
                Ok(&h),
                Rows {
                    rows: &rows,
                    failed: &[],
                },
            );
            assert_eq!(devs[0].pool.as_ref().unwrap().used_bytes, None);
            let why = devs[0]
                .unknown
                .iter()
                .find(|u| u.field == Field::PoolUsedBytes)
                .unwrap();
            assert_eq!(why.reason, UnknownReason::Unsupported, "{}", why.detail);
        }
    }

    #[test]
    fn a_failed_list_or_an_unreadable_host_is_unknown_not_zero() {
        let h = host();
        let mut devs = [gb10()];
        complete(
            &mut devs,
            Ok(&h),
            Rows {
                rows: &[],
                failed: &[0],
            },
        );
        let p = devs[0].pool.as_ref().unwrap();
        assert_eq!(p.used_bytes, None);
        assert_eq!(p.total_bytes, Some(127_600_748 * 1024));
        let u = devs[0]
            .unknown
            .iter()
            .find(|u| u.field == Field::PoolUsedBytes);
        assert_eq!(u.unwrap().reason, UnknownReason::DeviceError);
        let mut devs = [gb10()];
        complete(
            &mut devs,
            Err("meminfo: no such file"),
            Rows {
                rows: &[],
                failed: &[],
            },
        );
        let p = devs[0].pool.as_ref().unwrap();
        assert_eq!((p.total_bytes, p.free_bytes), (None, None));
        let fields: Vec<Field> = devs[0].unknown.iter().map(|u| u.field).collect();
        assert_eq!(fields, [Field::PoolTotalBytes, Field::PoolFreeBytes]);
        assert!(devs[0].unknown[0].detail.contains("no such file"));
    }

    #[test]
    fn a_client_sum_needs_a_figure() {
        let mut igpu = Device::new(0, Vendor::Intel, Source::Sysfs);
        igpu.pool = Some(MemoryPool::host_ram(PoolSource::ClientSum, "00:02.0"));
        let mut devs = [igpu.clone()];
        let mut silent = row(1, 0, None);
        silent.source = Source::Fdinfo;
        complete(
            &mut devs,
            Ok(&host()),
            Rows {
                rows: &[silent.clone()],
                failed: &[],
            },
        );
        assert_eq!(devs[0].pool.as_ref().unwrap().used_bytes, None);
        assert!(
            devs[0]
                .unknown
                .iter()
                .any(|u| u.field == Field::PoolUsedBytes)
        );
        // Running twice (a sampler's probe) leaves one reason per field.
        complete(
            &mut devs,
            Ok(&host()),
            Rows {
                rows: &[silent],
                failed: &[],
            },
        );
        assert_eq!(
            devs[0]
                .unknown
                .iter()
                .filter(|u| u.field == Field::PoolUsedBytes)
                .count(),
            1
        );
        let mut devs = [igpu];
        let rows = [row(1, 0, Some(279_968 << 10)), row(2, 0, Some(6044 << 10))];
        complete(
            &mut devs,
            Ok(&host()),
            Rows {
                rows: &rows,
                failed: &[],
            },
        );
        assert_eq!(
            devs[0].pool.as_ref().unwrap().used_bytes,
            Some((279_968 + 6044) << 10)
        );
    }

    fn apu(gtt_total: u64, gtt_used: u64) -> Device {
        let mut d = Device::new(1, Vendor::Amd, Source::Sysfs);
        d.regions.insert(
            "vram".into(),
            DeviceRegion::new(Some(512 << 20), Some(148 << 20)),
        );
        d.regions.insert(
            "gtt".into(),
            DeviceRegion::new(Some(gtt_total), Some(gtt_used)),
        );
        let mut p = MemoryPool::new(
            PoolKind::CarveOutPlusGtt,
            [
                PoolSource::VramPlusGtt,
                PoolSource::VramPlusGtt,
                PoolSource::VramPlusGttHostBound,
            ],
            "vddnb",
        );
        p.total_bytes = Some((512 << 20) + gtt_total);
        p.used_bytes = Some((148 << 20) + gtt_used);
        d.pool = Some(p);
        d
    }

    /// GTT pages are host RAM: a GTT larger than `MemTotal` (a `gttsize` set above the RAM)
    /// adds at most `MemTotal` to the carve-out; a smaller GTT counts whole.
    #[test]
    fn carve_out_plus_gtt_total_is_bounded_by_the_host() {
        let h = host();
        let mem_total = 127_600_748 * 1024;
        let none = Rows {
            rows: &[],
            failed: &[],
        };
        let gtt = 134_309_523_456;
        assert!(gtt > mem_total, "the fixture's GTT exceeds MemTotal");
        let mut devs = [apu(gtt, GIB)];
        complete(&mut devs, Ok(&h), none);
        let p = devs[0].pool.as_ref().unwrap();
        assert_eq!(p.total_bytes, Some((512 << 20) + mem_total));
        assert_eq!(p.total_source, PoolSource::VramPlusGttHostBound);
        assert_eq!(p.used_bytes, Some((148 << 20) + GIB), "used is not capped");
        let mut devs = [apu(65_867_993_088, GIB)];
        complete(&mut devs, Ok(&h), none);
        let p = devs[0].pool.as_ref().unwrap();
        assert_eq!(p.total_bytes, Some((512 << 20) + 65_867_993_088));
        assert_eq!(p.total_source, PoolSource::VramPlusGttHostBound);
        // No host figure: the files' sum, said to be uncapped by its source.
        let mut devs = [apu(gtt, GIB)];
        complete(&mut devs, Err("gone"), none);
        let p = devs[0].pool.as_ref().unwrap();
        assert_eq!(p.total_bytes, Some((512 << 20) + gtt));
        assert_eq!(p.total_source, PoolSource::VramPlusGtt);
    }

    #[test]
    fn carve_out_plus_gtt_free_is_bounded_by_the_host() {
        let h = host();
        let avail = 118_566_368 * 1024;
        // GTT smaller than what is available: its own free counts.
        let mut devs = [apu(65_867_993_088, 10 * GIB)];
        complete(
            &mut devs,
            Ok(&h),
            Rows {
                rows: &[],
                failed: &[],
            },
        );
        let p = devs[0].pool.as_ref().unwrap();
        assert_eq!(p.free_bytes, Some((364 << 20) + 65_867_993_088 - 10 * GIB));
        assert_eq!(
            p.used_bytes,
            Some((148 << 20) + 10 * GIB),
            "the files' figure stands"
        );
        // GTT capped at more than the RAM that is available: MemAvailable bounds it.
        let mut devs = [apu(134_309_523_456, GIB)];
        complete(
            &mut devs,
            Ok(&h),
            Rows {
                rows: &[],
                failed: &[],
            },
        );
        assert_eq!(
            devs[0].pool.as_ref().unwrap().free_bytes,
            Some((364 << 20) + avail)
        );
        // No host figure: free is unknown, with the reason.
        let mut devs = [apu(65_867_993_088, GIB)];
        complete(
            &mut devs,
            Err("gone"),
            Rows {
                rows: &[],
                failed: &[],
            },
        );
        assert_eq!(devs[0].pool.as_ref().unwrap().free_bytes, None);
        assert_eq!(devs[0].unknown[0].field, Field::PoolFreeBytes);
        // A region without a used figure: unknown, said so.
        let mut d = apu(65_867_993_088, GIB);
        d.regions
            .insert("gtt".into(), DeviceRegion::new(Some(1), None));
        let mut devs = [d];
        complete(
            &mut devs,
            Ok(&h),
            Rows {
                rows: &[],
                failed: &[],
            },
        );
        assert_eq!(devs[0].pool.as_ref().unwrap().free_bytes, None);
        assert!(devs[0].unknown[0].detail.contains("mem_info"));
    }

    #[test]
    fn a_discrete_client_sum_and_the_working_set() {
        let mut xe = Device::new(2, Vendor::Intel, Source::Sysfs);
        xe.pool = Some(MemoryPool::new(
            PoolKind::Dedicated,
            [
                PoolSource::VramSizeFile,
                PoolSource::ClientSum,
                PoolSource::TotalMinusUsed,
            ],
            "dGPU",
        ));
        let mut unknown_total = [xe.clone()];
        let mut r = row(9, 2, Some(23_992 << 10));
        r.source = Source::Fdinfo;
        r.regions = Some(ProcessRegions {
            vram: Some(RegionUsage {
                resident_bytes: Some(23_992 << 10),
                ..RegionUsage::default()
            }),
            ..ProcessRegions::default()
        });
        complete(
            &mut unknown_total,
            Ok(&host()),
            Rows {
                rows: &[r.clone()],
                failed: &[],
            },
        );
        let p = unknown_total[0].pool.as_ref().unwrap();
        assert_eq!((p.used_bytes, p.free_bytes), (Some(23_992 << 10), None));
        assert_eq!(p.host_available_bytes, None, "not a host pool");
        xe.pool.as_mut().unwrap().total_bytes = Some(12 * GIB);
        let mut known = [xe];
        complete(
            &mut known,
            Ok(&host()),
            Rows {
                rows: &[r],
                failed: &[],
            },
        );
        assert_eq!(
            known[0].pool.as_ref().unwrap().free_bytes,
            Some(12 * GIB - (23_992 << 10))
        );
        // Apple: min(working set − allocated, available).
        let mut mac = Device::new(0, Vendor::Other("apple".into()), Source::Metal);
        let mut p = MemoryPool::working_set("hasUnifiedMemory");
        p.total_bytes = Some(150 * GIB);
        p.used_bytes = Some(20 * GIB);
        mac.pool = Some(p);
        let mut devs = [mac];
        complete(
            &mut devs,
            Ok(&host()),
            Rows {
                rows: &[],
                failed: &[],
            },
        );
        assert_eq!(
            devs[0].pool.as_ref().unwrap().free_bytes,
            Some(118_566_368 * 1024),
            "130 GiB left of the working set, but only 113 GiB available"
        );
    }
}
