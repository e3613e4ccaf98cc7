//! Upstream's `test-helpers` builders for the `#[non_exhaustive]` snapshot types, so a
//! downstream test can make a [`GpuDeviceInfo`] or a [`GpuProcessEntry`] without a GPU.
//! Every setter takes the builder by value and returns it.

use super::values::{GpuDeviceInfo, GpuProcessEntry, GpuQuerySource};

/// Builds a [`GpuDeviceInfo`]. Unset fields are `0` or `None`; nothing is derived from
/// anything else (set `used_bytes` yourself).
///
/// ```
/// # #[cfg(feature = "test-helpers")] {
/// let dev = hypomnesis::GpuDeviceInfo::builder()
///     .index(1)
///     .name(Some("Test GPU".to_string()))
///     .total_bytes(8 << 30)
///     .free_bytes(6 << 30)
///     .used_bytes(2 << 30)
///     .build();
/// assert_eq!(dev.name_or_unknown(), "Test GPU");
/// assert_eq!(dev.reserved_bytes, None);
/// # }
/// ```
#[derive(Debug, Clone, Default)]
pub struct GpuDeviceInfoBuilder {
    index: u32,
    name: Option<String>,
    total_bytes: u64,
    free_bytes: u64,
    used_bytes: u64,
    reserved_bytes: Option<u64>,
    driver_version: Option<String>,
}

impl GpuDeviceInfo {
    /// A [`GpuDeviceInfoBuilder`] with every field `0` or `None`.
    #[must_use]
    pub fn builder() -> GpuDeviceInfoBuilder {
        GpuDeviceInfoBuilder::default()
    }
}

impl GpuDeviceInfoBuilder {
    /// Sets [`GpuDeviceInfo::index`].
    #[must_use]
    pub const fn index(mut self, index: u32) -> Self {
        self.index = index;
        self
    }

    /// Sets [`GpuDeviceInfo::name`].
    #[must_use]
    pub fn name(mut self, name: Option<String>) -> Self {
        self.name = name;
        self
    }

    /// Sets [`GpuDeviceInfo::total_bytes`].
    #[must_use]
    pub const fn total_bytes(mut self, total: u64) -> Self {
        self.total_bytes = total;
        self
    }

    /// Sets [`GpuDeviceInfo::free_bytes`].
    #[must_use]
    pub const fn free_bytes(mut self, free: u64) -> Self {
        self.free_bytes = free;
        self
    }

    /// Sets [`GpuDeviceInfo::used_bytes`].
    #[must_use]
    pub const fn used_bytes(mut self, used: u64) -> Self {
        self.used_bytes = used;
        self
    }

    /// Sets [`GpuDeviceInfo::reserved_bytes`].
    #[must_use]
    pub const fn reserved_bytes(mut self, reserved: Option<u64>) -> Self {
        self.reserved_bytes = reserved;
        self
    }

    /// Sets [`GpuDeviceInfo::driver_version`].
    #[must_use]
    pub fn driver_version(mut self, driver_version: Option<String>) -> Self {
        self.driver_version = driver_version;
        self
    }

    /// The [`GpuDeviceInfo`].
    #[must_use]
    pub fn build(self) -> GpuDeviceInfo {
        GpuDeviceInfo {
            index: self.index,
            name: self.name,
            total_bytes: self.total_bytes,
            free_bytes: self.free_bytes,
            used_bytes: self.used_bytes,
            reserved_bytes: self.reserved_bytes,
            driver_version: self.driver_version,
        }
    }
}

/// Builds a [`GpuProcessEntry`]. Unset fields are `0` or `None`, and the source is
/// [`GpuQuerySource::Pdh`] (upstream's default, kept for compatibility).
///
/// ```
/// # #[cfg(feature = "test-helpers")] {
/// use hypomnesis::{GpuProcessEntry, GpuQuerySource};
/// let row = GpuProcessEntry::builder()
///     .pid(4242)
///     .used_bytes(1 << 30)
///     .source(GpuQuerySource::Nvml)
///     .build();
/// assert_eq!((row.pid, row.shared_used_bytes), (4242, 0));
/// assert_eq!(GpuProcessEntry::builder().build().source, GpuQuerySource::Pdh);
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct GpuProcessEntryBuilder {
    pid: u32,
    name: Option<String>,
    used_bytes: u64,
    shared_used_bytes: u64,
    source: GpuQuerySource,
}

impl Default for GpuProcessEntryBuilder {
    fn default() -> Self {
        GpuProcessEntryBuilder {
            pid: 0,
            name: None,
            used_bytes: 0,
            shared_used_bytes: 0,
            source: GpuQuerySource::Pdh,
        }
    }
}

impl GpuProcessEntry {
    /// A [`GpuProcessEntryBuilder`] (see its defaults).
    #[must_use]
    pub fn builder() -> GpuProcessEntryBuilder {
        GpuProcessEntryBuilder::default()
    }
}

impl GpuProcessEntryBuilder {
    /// Sets [`GpuProcessEntry::pid`].
    #[must_use]
    pub const fn pid(mut self, pid: u32) -> Self {
        self.pid = pid;
        self
    }

    /// Sets [`GpuProcessEntry::name`].
    #[must_use]
    pub fn name(mut self, name: Option<String>) -> Self {
        self.name = name;
        self
    }

    /// Sets [`GpuProcessEntry::used_bytes`].
    #[must_use]
    pub const fn used_bytes(mut self, used_bytes: u64) -> Self {
        self.used_bytes = used_bytes;
        self
    }

    /// Sets [`GpuProcessEntry::shared_used_bytes`].
    #[must_use]
    pub const fn shared_used_bytes(mut self, shared_used_bytes: u64) -> Self {
        self.shared_used_bytes = shared_used_bytes;
        self
    }

    /// Sets [`GpuProcessEntry::source`].
    #[must_use]
    pub const fn source(mut self, source: GpuQuerySource) -> Self {
        self.source = source;
        self
    }

    /// The [`GpuProcessEntry`].
    #[must_use]
    pub fn build(self) -> GpuProcessEntry {
        GpuProcessEntry {
            pid: self.pid,
            name: self.name,
            used_bytes: self.used_bytes,
            shared_used_bytes: self.shared_used_bytes,
            source: self.source,
        }
    }
}
