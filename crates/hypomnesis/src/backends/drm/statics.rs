//! What a DRM device's sysfs says that does not change while the device is bound to its driver
//! — the driver's version, the product name, the hwmon directory and amdgpu's voltage channels
//! (the APU test) — read once per discovery ([`Statics::read`]) and kept by the backend until
//! the next one, so a sampler that polls every second re-reads only the figures that move.

use std::path::{Path, PathBuf};

use super::apu::HwmonVoltages;
use super::driver::{self, Integrated};
use crate::system::fsread;
use crate::system::roots::Roots;

/// A device's unchanging facts (see the [module docs](self)).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Statics {
    /// The driver's version: an out-of-tree module's own, else the kernel release.
    pub driver_version: Option<String>,
    /// `product_name`, when sysfs has a non-empty one.
    pub name: Option<String>,
    /// The first `hwmon/hwmonN` directory (its number is not stable across driver loads).
    pub hwmon: Option<PathBuf>,
    /// amdgpu's voltage channels, for a driver whose integrated test is `vddnb`.
    pub voltages: HwmonVoltages,
}

impl Statics {
    /// Reads them for the device whose sysfs directory is `dir`, bound to `driver` (an awake
    /// device: reading a suspended one's files may wake it).
    pub(crate) fn read(roots: &Roots, dir: &Path, driver: Option<&str>) -> Statics {
        Statics {
            driver_version: driver.and_then(|d| driver_version(roots, d)),
            name: fsread::read_trimmed(&dir.join("product_name"))
                .ok()
                .filter(|n| !n.is_empty()),
            hwmon: hwmon_dir(dir),
            voltages: if driver::by_sysfs_name(driver).integrated == Integrated::Vddnb {
                HwmonVoltages::read(dir)
            } else {
                HwmonVoltages::default()
            },
        }
    }
}

/// The driver's version: an out-of-tree module's own version, else the kernel release (an
/// in-tree DRM driver is versioned with the kernel).
fn driver_version(roots: &Roots, driver: &str) -> Option<String> {
    fsread::read_trimmed(&roots.sys.join("module").join(driver).join("version"))
        .ok()
        .or_else(|| fsread::read_trimmed(&roots.proc.join("sys/kernel/osrelease")).ok())
}

/// The first `hwmon/hwmonN` directory of a device (the number is not stable).
fn hwmon_dir(dev: &Path) -> Option<PathBuf> {
    let mut dirs = fsread::list_dir(&dev.join("hwmon")).ok()?;
    dirs.sort();
    dirs.into_iter().next()
}
