//! Which fdinfo keys a DRM driver prints on which kernel (pure): the table of
//! `docs/memory-model.md` and the formats reference (§1.7), as the `kernel` check uses it.

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

/// The table (versions approximate where the history is, as the reference marks them).
const TABLE: [FdinfoSupport; 6] = [
    FdinfoSupport {
        driver: "amdgpu",
        memory_since: Some((5, 14)),
        engines_since: Some((5, 14)),
        note: "5.14–5.18 a driver-specific format; drm-* keys from 5.19; per-region \
               drm-total/resident from about 6.13",
    },
    FdinfoSupport {
        driver: "i915",
        memory_since: Some((6, 5)),
        engines_since: Some((5, 19)),
        note: "engine time from 5.19; memory regions from about 6.5–6.6",
    },
    FdinfoSupport {
        driver: "xe",
        memory_since: Some((6, 8)),
        engines_since: Some((6, 13)),
        note: "memory from 6.8 (the driver's first release); engine cycles from about 6.13",
    },
    FdinfoSupport {
        driver: "msm",
        memory_since: Some((6, 5)),
        engines_since: Some((5, 19)),
        note: "engine time and cycles from 5.19; memory through the core helper from about 6.5",
    },
    FdinfoSupport {
        driver: "panfrost",
        memory_since: None,
        engines_since: None,
        note: "engine and memory keys on recent kernels (no first version recorded)",
    },
    FdinfoSupport {
        driver: "v3d",
        memory_since: None,
        engines_since: None,
        note: "engine and memory keys on recent kernels (no first version recorded)",
    },
];

/// The table's row for `driver`.
pub fn fdinfo_support(driver: &str) -> Option<FdinfoSupport> {
    TABLE.iter().find(|s| s.driver == driver).copied()
}

/// `(major, minor)` of a kernel release (`6.18.44-fc-v595` → `(6, 18)`) (pure).
pub fn parse_release(release: &str) -> Option<(u32, u32)> {
    let mut it = release.trim().split(|c: char| !c.is_ascii_digit());
    let major = it.next()?.parse().ok()?;
    let minor = it.next()?.parse().ok()?;
    Some((major, minor))
}
