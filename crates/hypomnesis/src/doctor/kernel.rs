//! Which fdinfo keys a DRM driver prints on which kernel (pure): the driver table's
//! `fdinfo` history (the formats reference, §1.7), as the `kernel` check uses it.

use crate::backends::drm::driver as drm;

/// What a driver's fdinfo gives on some kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct FdinfoSupport {
    /// The driver.
    pub driver: &'static str,
    /// The first kernel whose fdinfo gives per-client memory.
    pub memory_since: Option<(u32, u32)>,
    /// The first kernel whose fdinfo gives per-client engine time.
    pub engines_since: Option<(u32, u32)>,
    /// What changed, in words.
    pub note: &'static str,
}

/// The driver table's row for sysfs driver `driver` (`backends::drm::driver`: versions
/// approximate where the history is, as the reference marks them).
pub fn fdinfo_support(driver: &str) -> Option<FdinfoSupport> {
    let d = drm::by_sysfs_name(Some(driver));
    let h = d.fdinfo?;
    Some(FdinfoSupport {
        driver: d.name,
        memory_since: h.memory_since,
        engines_since: h.engines_since,
        note: h.note,
    })
}

/// `(major, minor)` of a kernel release (`6.18.44-fc-v595` → `(6, 18)`) (pure).
pub fn parse_release(release: &str) -> Option<(u32, u32)> {
    let mut it = release.trim().split(|c: char| !c.is_ascii_digit());
    let major = it.next()?.parse().ok()?;
    let minor = it.next()?.parse().ok()?;
    Some((major, minor))
}
