//! macOS: the Metal device (`MTLCreateSystemDefaultDevice`, objc2-metal), compile-checked from
//! Linux (no macOS runner here).
//!
//! The device row: name from `MTLDevice.name`; `integrated` = `hasUnifiedMemory` (Apple
//! Silicon: the GPU's memory **is** the system RAM, stated as such); total = `hw.memsize`;
//! free = `recommendedMaxWorkingSetSize` — upstream's definition: the working-set budget the
//! kernel recommends for the GPU, a static projection, not a live gauge — and used = total −
//! free as upstream computes it. `currentAllocatedSize` counts only **this process's**
//! allocations through that device object (virtual, not resident), so it is not a device
//! figure; it is stated in the detail of the reserved-memory unknown.
//! Per-process GPU memory (upstream's private `ledger` syscall) is not read: every GPU process
//! list on macOS is empty with that reason, and nothing is denied, so `denied_pids` is empty.
//!
//! On unified memory the device has a pool (`iokit_stats::apple_pool`): the working set
//! (`recommendedMaxWorkingSetSize`) as its total, IOKit's `Alloc system memory` (every GPU
//! client's allocations, read from the `AGXAccelerator` service without privileges: `iokit`) as
//! used beside it, `In use system memory` as active; the probe bounds its free by the host's
//! available RAM. `memory` keeps upstream's figures.
//!
//! `MTLCreateSystemDefaultDevice` may switch a dual-GPU Intel Mac to its discrete GPU; the
//! device is created once per probe query.

use objc2_metal::{MTLCreateSystemDefaultDevice, MTLDevice as _};

use crate::types::{
    Backend, BackendState, BackendStatus, Device, DeviceList, Field, Source, Unknown,
    UnknownReason, Vendor,
};

/// The probe's seam (`Probe::collect` on macOS): the Metal device, numbered after the devices
/// already listed, and Metal's backend status.
pub(crate) fn append_devices(list: &mut DeviceList) {
    let first = list.devices.iter().map(|d| d.index + 1).max().unwrap_or(0);
    let Some(dev) = MTLCreateSystemDefaultDevice() else {
        list.backends.push(BackendStatus::new(
            Backend::Metal,
            BackendState::absent(
                crate::types::BackendCause::NoDevice,
                "MTLCreateSystemDefaultDevice returned no device",
            ),
        ));
        return;
    };
    let mut d = Device::new(first, Vendor::Other("apple".to_string()), Source::Metal);
    d.name = Some(dev.name().to_string());
    let unified = dev.hasUnifiedMemory();
    d.integrated = Some(unified);
    let budget = dev.recommendedMaxWorkingSetSize();
    match crate::system::host::macos::sysctl_u64(c"hw.memsize") {
        Ok(total) if unified => {
            d.memory.total_bytes = Some(total);
            d.memory.free_bytes = Some(budget.min(total));
            d.memory.used_bytes = Some(total.saturating_sub(budget));
            let stats =
                super::iokit::performance_statistics().map(super::iokit_stats::from_entries);
            let (pool, unknown) = super::iokit_stats::apple_pool(budget.min(total), stats);
            d.pool = Some(pool);
            d.unknown.extend(unknown);
        }
        Ok(_) => {
            // A discrete GPU on an Intel Mac: the budget is its VRAM working set.
            d.memory.total_bytes = Some(budget);
            d.unknown.push(Unknown::new(
                Field::MemoryUsedBytes,
                UnknownReason::Unsupported,
                "Metal reports no device-wide usage for a discrete GPU",
            ));
        }
        Err(e) => d.unknown.push(Unknown::new(
            Field::MemoryTotalBytes,
            UnknownReason::Unreadable,
            e.to_string(),
        )),
    }
    d.unknown.push(Unknown::new(
        Field::MemoryReservedBytes,
        UnknownReason::Unsupported,
        format!(
            "Metal has no carve-out (this process's own Metal allocations: {} bytes, \
             currentAllocatedSize)",
            dev.currentAllocatedSize()
        ),
    ));
    list.devices.push(d);
    list.backends.push(BackendStatus::new(
        Backend::Metal,
        BackendState::Active { devices: 1 },
    ));
}
