//! The device lookup of a [`SpillTracker`](super::SpillTracker): which source answers device
//! `index` of the probe's index space (NVIDIA first, then DRM devices), or why that device's
//! spill is not measurable, and whether any device is (platform seams). The sources
//! themselves are `backends::drm::spill` (DRM) and `backends::wddm` (PDH).

use crate::backends::drm::driver::NVIDIA_REASON;
use crate::backends::drm::spill::drm_source;
use crate::backends::spill::SpillSource;
use crate::probe::Probe;
use crate::system::roots::Roots;
use crate::types::Vendor;

/// The source of device `index` in `probe`'s index space (NVIDIA first, then DRM devices), or
/// why that device's spill is not measurable.
pub(crate) fn resolve(probe: &Probe, index: u32) -> Result<Box<dyn SpillSource>, String> {
    let (list, drm) = probe.collect();
    // Platform seam: Windows devices spill through PDH (WDDM's definition, the same fold).
    #[cfg(all(windows, feature = "pdh"))]
    if let Some(source) = crate::backends::wddm::windows::spill_source(&list, index) {
        return source;
    }
    if let Some((found, _)) = drm.listed.iter().find(|(_, i)| *i == index) {
        let max_age = probe.options().drm_index_max_age;
        return drm_source(probe.roots(), found, index, max_age);
    }
    match list.devices.iter().find(|d| d.index == index) {
        Some(d) if d.vendor == Vendor::Nvidia => Err(NVIDIA_REASON.to_string()),
        Some(_) => Err("this device reports no VRAM figures".to_string()),
        None => {
            let failed: String = list
                .failed_reasons()
                .iter()
                .map(|p| format!("; {} failed: {}", p.backend, p.reason))
                .collect();
            Err(format!(
                "no GPU at index {index} ({} device{} found{failed})",
                list.devices.len(),
                if list.devices.len() == 1 { "" } else { "s" }
            ))
        }
    }
}

/// Whether any device is measurable: a PDH adapter on Windows, or a DRM device under `roots`
/// (existence checks only: nothing is read from a device, so none is woken; NVIDIA devices
/// never are).
pub(crate) fn any_measurable(roots: &Roots) -> bool {
    #[cfg(all(windows, feature = "pdh"))]
    if crate::backends::wddm::windows::spill_measurable() {
        return true;
    }
    crate::backends::drm::spill::any_measurable(roots)
}
