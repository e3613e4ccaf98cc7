//! A DRM device's memory pool, as far as sysfs gives it: the kind and its evidence, and the
//! figures of the device's own files. Host figures (`MemTotal`, `MemAvailable`) and the
//! sums of the device's clients are filled in by the probe, which has them
//! (`probe::pool::complete`). See `docs/memory-model.md`, "Memory pools".
//!
//! | Device | Kind | total | used | free |
//! |---|---|---|---|---|
//! | amdgpu APU ([`apu`](super::apu)) | carve-out + GTT | VRAM + GTT totals (the probe caps the GTT part at `MemTotal`) | VRAM + GTT used | free VRAM + free GTT, the GTT part at most `MemAvailable` |
//! | integrated (Intel 00:02.0, SoC GPUs) | unified with the host | `MemTotal` | the clients' sum | `MemAvailable` |
//! | i915 / xe discrete | dedicated | the VRAM size file, where the kernel has one | the clients' resident VRAM | total − used |

use super::apu::{Apu, HwmonVoltages, decide};
use crate::types::{Device, Field, MemoryPool, PoolKind, PoolSource, Unknown, UnknownReason};

/// amdgpu (its device directory `dir`): decides whether the device is an APU (`integrated`,
/// with the reason when it cannot be told) and, for an APU, its carve-out + GTT pool from the `vram` and `gtt` regions the
/// device's files gave.
pub(crate) fn amdgpu(voltages: &HwmonVoltages, d: &mut Device) {
    let region = |name: &str| d.regions.get(name).copied();
    let (vram, gtt) = (region("vram"), region("gtt"));
    let total = |r: Option<crate::types::DeviceRegion>| r.and_then(|r| r.total_bytes);
    match decide(voltages, total(vram), total(gtt)) {
        Apu::No(_) => d.integrated = Some(false),
        Apu::Unknown(why) => d.unknown.push(Unknown::new(
            Field::Integrated,
            UnknownReason::Unsupported,
            why,
        )),
        Apu::Yes(evidence) => {
            d.integrated = Some(true);
            let mut pool = MemoryPool::new(
                PoolKind::CarveOutPlusGtt,
                [
                    PoolSource::VramPlusGtt,
                    PoolSource::VramPlusGtt,
                    PoolSource::VramPlusGttHostBound,
                ],
                evidence,
            );
            let add = |a: Option<u64>, b: Option<u64>| Some(a?.saturating_add(b?));
            pool.total_bytes = add(total(vram), total(gtt));
            pool.used_bytes = add(
                vram.and_then(|r| r.used_bytes),
                gtt.and_then(|r| r.used_bytes),
            );
            for (field, v) in [
                (Field::PoolTotalBytes, pool.total_bytes),
                (Field::PoolUsedBytes, pool.used_bytes),
            ] {
                if v.is_none() {
                    d.unknown.push(Unknown::new(
                        field,
                        UnknownReason::Unsupported,
                        "mem_info_vram_* or mem_info_gtt_* not readable",
                    ));
                }
            }
            d.pool = Some(pool);
        }
    }
}

/// An integrated GPU (its driver's test said so): its pool is the host's RAM, used as the sum
/// of its clients.
pub(crate) fn unified(d: &mut Device, evidence: String) {
    d.pool = Some(MemoryPool::host_ram(PoolSource::ClientSum, evidence));
}

/// A discrete i915 / xe card: its own VRAM, whose size is the VRAM size files' (`total`, with
/// `missing` the reason when it is unknown) and whose use is only known as the sum of its
/// clients' resident VRAM.
pub(crate) fn client_sum_dedicated(d: &mut Device, total: Option<u64>, missing: Option<&str>) {
    let mut pool = MemoryPool::new(
        PoolKind::Dedicated,
        [
            PoolSource::VramSizeFile,
            PoolSource::ClientSum,
            PoolSource::TotalMinusUsed,
        ],
        "a discrete card (not at 0000:00:02.0, the slot of Intel's integrated GPU): its own VRAM; \
         the driver has no device-wide use in sysfs",
    );
    pool.total_bytes = total;
    if let (None, Some(why)) = (total, missing) {
        d.unknown.push(Unknown::new(
            Field::PoolTotalBytes,
            UnknownReason::Unsupported,
            why,
        ));
    }
    d.pool = Some(pool);
}

#[cfg(test)]
mod tests;
