//! The DRM backend's part of a [`Probe`](super::Probe) query: why it found nothing, and the
//! memory health of the devices it listed (the counters its driver table entry names).

use crate::backends::drm::DrmDevices;
use crate::backends::drm::driver::Ras;
use crate::types::{BackendCause, Device, Unknown, UnknownReason};

/// Why the DRM backend found nothing. Platform seam: DRM is Linux's; elsewhere a sysfs exists
/// only as a copy passed through the roots, and without one the reason says so (not a path
/// with mixed separators that was never going to exist).
pub(super) fn absent_reason(sys: &std::path::Path) -> (BackendCause, String) {
    if cfg!(not(target_os = "linux")) && !sys.exists() {
        return (
            BackendCause::NotBuilt,
            format!(
                "not on this platform (DRM is Linux's /sys; {} names a copy)",
                crate::system::roots::ENV_SYS_ROOT
            ),
        );
    }
    (
        BackendCause::NoDevice,
        format!("no DRM GPU under {}/class/drm", sys.display()),
    )
}

/// Every listed DRM device's memory health where its driver's entry has counters
/// (`drm::driver::Ras`: amdgpu's `ras/` files), else unknown (unsupported); a suspended
/// device is not read.
pub(super) fn health(devices: &mut [Device], map: &DrmDevices) {
    for (f, index) in &map.listed {
        let Some(d) = devices.iter_mut().find(|d| d.index == *index) else {
            continue;
        };
        d.health = Some(if f.suspended() {
            let mut h = crate::types::MemoryHealth::default();
            h.unknown.push(Unknown::new(
                crate::types::Field::Health,
                UnknownReason::Suspended,
                "the device is runtime-suspended; reading it would wake it",
            ));
            h
        } else {
            match f.entry().ras {
                Ras::AmdgpuSysfs => crate::backends::drm::ras::read(&f.dir),
                Ras::None => {
                    let mut h = crate::types::MemoryHealth::default();
                    h.unknown.push(Unknown::new(
                        crate::types::Field::Health,
                        UnknownReason::Unsupported,
                        format!(
                            "the {} driver exposes no memory-health counters",
                            d.driver.as_deref().unwrap_or("DRM")
                        ),
                    ));
                    h
                }
            }
        });
    }
}
