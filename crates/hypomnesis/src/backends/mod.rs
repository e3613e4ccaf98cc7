//! Layer 2, the GPU backends: one source each — NVML, `nvidia-smi`, DRM (sysfs, fdinfo, KFD),
//! WDDM (DXGI, PDH) and Metal (with IOKit's statistics) — each turning its source's answers into the data model, with
//! one platform seam per backend. [`error`] is why a backend is absent or a query failed.
//!
//! Crate-private: the public face of the backends is the probe (layer 3). May import: `types`,
//! `system`.

pub(crate) mod drm;
pub(crate) mod error;
// macOS: Apple Silicon's `PerformanceStatistics` through IOKit (the FFI; its meaning is
// `iokit_stats`, platform-free and tested everywhere).
#[cfg(all(target_os = "macos", feature = "metal"))]
#[allow(unsafe_code)]
pub(crate) mod iokit;
#[cfg_attr(not(all(target_os = "macos", feature = "metal")), allow(dead_code))]
pub(crate) mod iokit_stats;
// macOS: the Metal device (platform seam in `Probe::collect`).
#[cfg(all(target_os = "macos", feature = "metal"))]
pub(crate) mod metal;
#[cfg(feature = "nvml")]
pub(crate) mod nvml;
pub(crate) mod smi;
// What spill is measured from: a `Reading` and the `SpillSource` trait (DRM: `drm::spill`).
pub(crate) mod spill;
// Windows GPU memory (DXGI, PDH): the logic is platform-free and tested everywhere; the FFI
// is Windows-only (`wddm/windows.rs`), dispatched from the Probe (devices, processes).
#[cfg_attr(not(all(windows, feature = "dxgi")), allow(dead_code))]
pub(crate) mod wddm;
