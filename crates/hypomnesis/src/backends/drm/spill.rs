//! The Linux spill source: a DRM device's VRAM and the system memory (GTT) holding its
//! buffers, as a [`SpillSource`] of [`Reading`]s (the trait: `backends::spill`; PDH's source on
//! Windows: `wddm`). The device lookup in the probe's index space is `compat::spill::resolve`;
//! the fold over the readings, `compat::spill::fold`.
//!
//! # Linux
//! The kernel moves a buffer object out of VRAM into GTT (system memory the GPU reaches through
//! its address translation) when VRAM is full: the Linux counterpart of WDDM's shared memory.
//! - **amdgpu**: device-wide from sysfs — dedicated = `mem_info_vram_used`, limit =
//!   `mem_info_vram_total`, shared = `mem_info_gtt_used` (every client and the driver).
//! - **xe, i915 (discrete)**: sysfs has no used figures, so the readings are sums over the
//!   device's DRM clients in fdinfo (each client counted once): dedicated = resident VRAM
//!   (`drm-resident-vram*`, `drm-resident-local*`), shared = resident GTT and system memory
//!   (`drm-resident-gtt`, `drm-resident-system*`); the limit is the VRAM size sysfs gives
//!   (xe `tile*/physical_vram_size_bytes`, i915 `lmem_total_bytes`: non-mainline drivers only,
//!   see `driver`'s module docs), the same files the device view reads
//!   (`sysfs::vram_size_files`) — without one the device is not measurable. Only the clients
//!   this user may read are summed.
//!
//! Which of these a driver gets is its entry's `spill` in the driver table (`driver`).
//! - **Not measurable**: NVIDIA (its Linux driver has no system-memory fallback for VRAM and
//!   reports no such figure), integrated GPUs (their memory is system memory), drivers that
//!   report no VRAM.
//!
//! A runtime-suspended device is never woken: whether a device is measurable is decided from
//! which files exist, and a reading first checks `power/runtime_status` — a suspended device's
//! reading fails (and is skipped, as upstream skips a failed sample).

use std::path::PathBuf;

use super::driver::{Bytes, Spill};
use crate::backends::drm::sysfs::{self, Found};
use crate::backends::drm::{DrmBackend, DrmDevices};
use crate::backends::spill::{Reading, SpillSource};
use crate::system::fsread;
use crate::system::roots::Roots;
use crate::types::RuntimeStatus;

/// The source of DRM device `found` (index `index` in the probe's index space), or why its
/// spill is not measurable.
pub(crate) fn drm_source(
    roots: &Roots,
    found: &Found,
    index: u32,
    drm_index_max_age: std::time::Duration,
) -> Result<Box<dyn SpillSource>, String> {
    let plan = plan(roots, found)?;
    Ok(Box::new(DrmSource {
        found: found.clone(),
        index,
        plan,
        backend: DrmBackend::new(roots.clone(), drm_index_max_age),
    }))
}

/// Whether any DRM device under `roots` is measurable (existence checks only: nothing is read
/// from a device, so none is woken).
pub(crate) fn any_measurable(roots: &Roots) -> bool {
    sysfs::discover(roots)
        .iter()
        .any(|f| plan(roots, f).is_ok())
}

/// Which readings a DRM device offers.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Plan {
    /// Device-wide figures in sysfs (amdgpu): the limit, dedicated and shared files.
    DeviceWide {
        limit: PathBuf,
        dedicated: PathBuf,
        shared: PathBuf,
    },
    /// Sums over the device's fdinfo clients, the limit from these files (summed).
    ClientSums { limit_files: Vec<PathBuf> },
}

/// The plan for a found device, from its driver's entry in the table and which files exist
/// (never from reading one), or why it is not measurable.
fn plan(roots: &Roots, f: &Found) -> Result<Plan, String> {
    let name = f.driver.as_deref().unwrap_or("unknown driver");
    let drv = f.entry();
    match drv.spill {
        Spill::Never(why) => Err(why.to_string()),
        Spill::DeviceWide {
            limit,
            dedicated,
            shared,
        } => {
            let missing: Vec<&str> = [limit, dedicated, shared]
                .into_iter()
                .map(|Bytes(n)| n)
                .filter(|n| !f.dir.join(n).exists())
                .collect();
            if missing.is_empty() {
                let at = |Bytes(n): Bytes| f.dir.join(n);
                Ok(Plan::DeviceWide {
                    limit: at(limit),
                    dedicated: at(dedicated),
                    shared: at(shared),
                })
            } else {
                Err(format!("{name} without {} in sysfs", missing.join(", ")))
            }
        }
        _ if f.integrated() == Some(true) => Err(integrated(name)),
        Spill::ClientSums => {
            let limit_files = sysfs::vram_size_files(roots, f);
            if limit_files.is_empty() {
                Err(format!(
                    "{}, so the dedicated threshold cannot be computed",
                    drv.vram_size.missing(name)
                ))
            } else {
                Ok(Plan::ClientSums { limit_files })
            }
        }
        Spill::NoFigures => Err(format!("{name} reports no VRAM figures")),
    }
}

fn integrated(driver: &str) -> String {
    format!("{driver} is an integrated GPU: its memory is system memory, with no VRAM to overflow")
}

/// A DRM device's readings.
struct DrmSource {
    found: Found,
    index: u32,
    plan: Plan,
    /// Its own fd index, for the client sums.
    backend: DrmBackend,
}

impl SpillSource for DrmSource {
    fn read(&mut self) -> Option<Reading> {
        // A suspended device is not read: its reading fails and is skipped.
        let status = fsread::read_trimmed(&self.found.dir.join("power").join("runtime_status"))
            .ok()
            .map(|s| RuntimeStatus::parse(&s));
        if status == Some(RuntimeStatus::Suspended) {
            return None;
        }
        match &self.plan {
            Plan::DeviceWide {
                limit,
                dedicated,
                shared,
            } => {
                let get = |file: &PathBuf| fsread::read_u64(file).ok();
                Some(Reading {
                    dedicated_bytes: get(dedicated)?,
                    shared_bytes: get(shared)?,
                    limit_bytes: get(limit)?,
                })
            }
            Plan::ClientSums { limit_files } => {
                let limit_bytes = sysfs::read_vram_size(limit_files)?;
                let mut found = self.found.clone();
                found.runtime_status = status;
                let devices = DrmDevices {
                    listed: vec![(found, self.index)],
                    merged: Vec::new(),
                };
                let rows = self.backend.processes(&devices, &mut Vec::new()).rows;
                let (mut dedicated_bytes, mut shared_bytes) = (0u64, 0u64);
                for row in rows {
                    let regions = match row.regions {
                        Some(r) => r,
                        // Only clients another process owns (counted on its row).
                        None if row.used_bytes == Some(0) && !row.shared_with.is_empty() => {
                            continue;
                        }
                        // A client without memory stats leaves the sum unknown: no reading.
                        None => return None,
                    };
                    let resident = |r: Option<crate::types::RegionUsage>| {
                        r.and_then(|r| r.resident_or_total()).unwrap_or(0)
                    };
                    dedicated_bytes = dedicated_bytes.saturating_add(resident(regions.vram));
                    shared_bytes = shared_bytes
                        .saturating_add(resident(regions.gtt))
                        .saturating_add(resident(regions.system));
                }
                Some(Reading {
                    dedicated_bytes,
                    shared_bytes,
                    limit_bytes,
                })
            }
        }
    }
}
