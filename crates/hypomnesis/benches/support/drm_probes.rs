//! The probe pair the DRM bench and the `drm_scan` example compare: a fixture `/sys` with one
//! amdgpu card (so the DRM backend walks this machine's real `/proc`), no NVML and no
//! nvidia-smi; one probe rebuilds the fd index on every query, the other reuses it.

use std::path::Path;
use std::time::Duration;

use hmn_testbed::{FakeGpu, SysFixture};
use hypomnesis::{Probe, ProbeOptions, Roots};

/// `(full scan, cached index)` over a fixture `/sys` written under `dir`; the cached probe has
/// already built its index.
pub fn full_and_cached(dir: &Path) -> (Probe, Probe) {
    SysFixture::new(dir)
        .unwrap()
        .gpu(&FakeGpu::amdgpu("0000:03:00.0", 1, 128))
        .unwrap();
    let opts = |age: Duration| {
        ProbeOptions::default()
            .roots(Roots::system().with_sys(dir))
            .nvml_library(dir.join("no-nvml.so"))
            .use_nvidia_smi(false)
            .drm_index_max_age(age)
    };
    let full = Probe::with_options(opts(Duration::ZERO));
    let cached = Probe::with_options(opts(Duration::from_secs(3600)));
    cached.gpu_processes();
    (full, cached)
}
