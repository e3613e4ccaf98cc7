//! Builders for the `#[non_exhaustive]` data types, so downstream crates can construct values in
//! their own tests (feature `test-helpers`).
//!
//! ```
//! use hypomnesis::test_helpers::{DeviceBuilder, GpuProcessBuilder};
//! let dev = DeviceBuilder::new(0)
//!     .name("NVIDIA H100 80GB HBM3")
//!     .memory(Some(80 << 30), Some(1 << 30), Some(78 << 30), Some(1 << 30))
//!     .build();
//! assert_eq!(dev.memory.free_bytes, Some(78 << 30));
//! let row = GpuProcessBuilder::new(4242, 0).used_bytes(Some(512 << 20)).build();
//! assert_eq!(row.pid, 4242);
//! ```

use crate::measure::own::{OwnGpuUsage, OwnSnapshot};
use crate::system::host::{HostMemory, ProcessMemory};
use crate::types::pci::PciBusId;
use crate::types::{
    Device, DeviceMemory, GpuProcess, ProcessKind, ProcessRegions, Source, Unknown, Vendor,
};

/// Builds a [`Device`] (defaults: NVIDIA, source NVML, everything else unknown).
#[derive(Debug, Clone)]
pub struct DeviceBuilder(Device);

impl DeviceBuilder {
    /// A device with this index.
    pub fn new(index: u32) -> Self {
        DeviceBuilder(Device::new(index, Vendor::Nvidia, Source::Nvml))
    }
    /// Sets the vendor.
    #[must_use]
    pub fn vendor(mut self, vendor: Vendor) -> Self {
        self.0.vendor = vendor;
        self
    }
    /// Sets the name.
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.0.name = Some(name.into());
        self
    }
    /// Sets the UUID.
    #[must_use]
    pub fn uuid(mut self, uuid: impl Into<String>) -> Self {
        self.0.uuid = Some(uuid.into());
        self
    }
    /// Sets the PCI bus id.
    #[must_use]
    pub fn pci_bus_id(mut self, id: PciBusId) -> Self {
        self.0.pci_bus_id = Some(id);
        self
    }
    /// Sets the driver and its version.
    #[must_use]
    pub fn driver(mut self, driver: impl Into<String>, version: Option<String>) -> Self {
        self.0.driver = Some(driver.into());
        self.0.driver_version = version;
        self
    }
    /// Sets the memory figures (total, used, free, reserved).
    #[must_use]
    pub fn memory(
        mut self,
        total: Option<u64>,
        used: Option<u64>,
        free: Option<u64>,
        reserved: Option<u64>,
    ) -> Self {
        self.0.memory = DeviceMemory::new(total, used, free, reserved);
        self
    }
    /// Sets the source.
    #[must_use]
    pub fn source(mut self, source: Source) -> Self {
        self.0.source = source;
        self
    }
    /// Adds an unknown-field record.
    #[must_use]
    pub fn unknown(mut self, unknown: Unknown) -> Self {
        self.0.unknown.push(unknown);
        self
    }
    /// Marks the device unreadable.
    #[must_use]
    pub fn error(mut self, error: impl Into<String>) -> Self {
        self.0.error = Some(error.into());
        self
    }
    /// The device.
    pub fn build(self) -> Device {
        self.0
    }
}

/// Builds a [`GpuProcess`] (defaults: compute, source NVML, used unknown).
#[derive(Debug, Clone)]
pub struct GpuProcessBuilder(GpuProcess);

impl GpuProcessBuilder {
    /// A row for `pid` on device `device_index`.
    pub fn new(pid: u32, device_index: u32) -> Self {
        GpuProcessBuilder(GpuProcess::new(
            pid,
            device_index,
            ProcessKind::Compute,
            Source::Nvml,
        ))
    }
    /// Sets the name (text, or raw bytes as a [`crate::ProcessName`]).
    #[must_use]
    pub fn name(mut self, name: impl Into<crate::types::ProcessName>) -> Self {
        self.0.name = Some(name.into());
        self
    }
    /// Sets the user and uid.
    #[must_use]
    pub fn user(mut self, user: Option<String>, uid: Option<u32>) -> Self {
        self.0.user = user;
        self.0.uid = uid;
        self
    }
    /// Sets the device UUID.
    #[must_use]
    pub fn device_uuid(mut self, uuid: impl Into<String>) -> Self {
        self.0.device_uuid = Some(uuid.into());
        self
    }
    /// Sets the kind.
    #[must_use]
    pub fn kind(mut self, kind: ProcessKind) -> Self {
        self.0.kind = kind;
        self
    }
    /// Sets the used bytes.
    #[must_use]
    pub fn used_bytes(mut self, used: Option<u64>) -> Self {
        self.0.used_bytes = used;
        self
    }
    /// Sets the source.
    #[must_use]
    pub fn source(mut self, source: Source) -> Self {
        self.0.source = source;
        self
    }
    /// Adds an unknown-field record.
    #[must_use]
    pub fn unknown(mut self, unknown: Unknown) -> Self {
        self.0.unknown.push(unknown);
        self
    }
    /// Sets the DRM regions (and the source to fdinfo, where regions come from).
    #[must_use]
    pub fn regions(mut self, regions: ProcessRegions) -> Self {
        self.0.regions = Some(regions);
        self.0.source = Source::Fdinfo;
        self
    }
    /// The row.
    pub fn build(self) -> GpuProcess {
        self.0
    }
}

/// Builds a [`OwnGpuUsage`].
pub fn own_gpu_usage(used_bytes: Option<u64>, source: Source) -> OwnGpuUsage {
    OwnGpuUsage {
        used_bytes,
        is_per_process: true,
        source,
        unknown: Vec::new(),
    }
}

/// Builds a [`OwnSnapshot`].
pub fn own_snapshot(
    ram_bytes: u64,
    gpu: Option<OwnGpuUsage>,
    gpu_device: Option<Device>,
) -> OwnSnapshot {
    OwnSnapshot {
        ram_bytes,
        gpu,
        gpu_device,
    }
}

/// Builds a [`HostMemory`] (total, available; free = available, no swap).
pub fn host_memory(total_bytes: u64, available_bytes: u64) -> HostMemory {
    HostMemory {
        memory_total_bytes: total_bytes,
        memory_available_bytes: available_bytes,
        memory_free_bytes: available_bytes,
        swap_total_bytes: None,
        swap_free_bytes: None,
    }
}

/// Builds a [`ProcessMemory`].
pub fn process_memory(
    pid: u32,
    rss_bytes: Option<u64>,
    peak_rss_bytes: Option<u64>,
) -> ProcessMemory {
    ProcessMemory {
        pid,
        rss_bytes,
        peak_rss_bytes,
        swap_bytes: None,
        pss_bytes: None,
        private_bytes: None,
        unknown: Vec::new(),
    }
}
