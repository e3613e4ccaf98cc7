//! [`Field`]: which value an [`Unknown`](super::source::Unknown) explains, spelled as the value's
//! JSON path (`"memory.reserved_bytes"`, `"used_bytes"`). Code that looks for a reason matches
//! on the variant, never on text.

use super::spelling::spelled;

spelled! {
    /// The value an [`Unknown`](crate::Unknown) stands beside, spelled (in JSON and in text) as
    /// its path in the record that holds it: a [`Device`](crate::Device), a
    /// [`MigDevice`](crate::MigDevice), a [`GpuProcess`](crate::GpuProcess), a
    /// [`ProcessMemory`](crate::ProcessMemory) or an accounting record.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
    #[non_exhaustive]
    pub enum Field {
        /// A device's, MIG device's or process's name.
        Name = "name",
        /// A device's or MIG device's UUID.
        Uuid = "uuid",
        /// A device's PCI address.
        PciBusId = "pci_bus_id",
        /// The driver's version.
        DriverVersion = "driver_version",
        /// An NVIDIA GPU's compute mode.
        ComputeMode = "compute_mode",
        /// All of a device's memory figures (the device could not be opened).
        Memory = "memory",
        /// Installed memory.
        MemoryTotalBytes = "memory.total_bytes",
        /// Memory in use.
        MemoryUsedBytes = "memory.used_bytes",
        /// Memory available.
        MemoryFreeBytes = "memory.free_bytes",
        /// Memory the driver reserves.
        MemoryReservedBytes = "memory.reserved_bytes",
        /// Whether a device is an integrated GPU (an APU), where no signal decides it.
        Integrated = "integrated",
        /// The size of a device's memory pool.
        PoolTotalBytes = "pool.total_bytes",
        /// What is in use of a device's memory pool.
        PoolUsedBytes = "pool.used_bytes",
        /// What can still be allocated from a device's memory pool.
        PoolFreeBytes = "pool.free_bytes",
        /// Every telemetry reading (no hwmon; a suspended device).
        Telemetry = "telemetry",
        /// Device utilization.
        TelemetryUtilizationPercent = "telemetry.utilization_percent",
        /// Memory controller utilization.
        TelemetryMemoryUtilizationPercent = "telemetry.memory_utilization_percent",
        /// Temperature.
        TelemetryTemperatureCelsius = "telemetry.temperature_celsius",
        /// Power draw.
        TelemetryPowerWatts = "telemetry.power_watts",
        /// Energy since the driver loaded.
        TelemetryEnergyJoules = "telemetry.energy_joules",
        /// Graphics clock.
        TelemetryClockGraphicsMhz = "telemetry.clock_graphics_mhz",
        /// SM clock.
        TelemetryClockSmMhz = "telemetry.clock_sm_mhz",
        /// Memory clock.
        TelemetryClockMemoryMhz = "telemetry.clock_memory_mhz",
        /// Maximum graphics clock.
        TelemetryClockGraphicsMaxMhz = "telemetry.clock_graphics_max_mhz",
        /// Maximum memory clock.
        TelemetryClockMemoryMaxMhz = "telemetry.clock_memory_max_mhz",
        /// A GPU's MIG state (mode, instances).
        Mig = "mig",
        /// The MIG devices of a GPU (their enumeration, or one slot).
        MigInstances = "mig.instances",
        /// The privileged names of the GPU-instance profiles.
        MigInstancesGpuInstanceProfile = "mig.instances.gpu_instance_profile",
        /// A MIG device's GPU-instance id.
        GpuInstanceId = "gpu_instance_id",
        /// A MIG device's compute-instance id.
        ComputeInstanceId = "compute_instance_id",
        /// A MIG device's multiprocessor count.
        MultiprocessorCount = "multiprocessor_count",
        /// A MIG device's profile.
        Profile = "profile",
        /// A MIG device's GPU-instance profile.
        GpuInstanceProfile = "gpu_instance_profile",
        /// Device memory a process uses.
        UsedBytes = "used_bytes",
        /// A process's utilization samples.
        Utilization = "utilization",
        /// A device's accounting records.
        Accounting = "accounting",
        /// A process's resident set size.
        RssBytes = "rss_bytes",
        /// A process's swapped-out memory.
        SwapBytes = "swap_bytes",
        /// A process's proportional set size.
        PssBytes = "pss_bytes",
        /// A process's private bytes (commit charge).
        PrivateBytes = "private_bytes",
        /// A device's memory health as a whole (no backend reads it for this device).
        Health = "health",
        /// ECC mode.
        HealthEcc = "health.ecc",
        /// Corrected ECC errors since the driver loaded.
        HealthEccErrorsCorrectedVolatile = "health.ecc_errors.corrected_volatile",
        /// Uncorrected ECC errors since the driver loaded.
        HealthEccErrorsUncorrectedVolatile = "health.ecc_errors.uncorrected_volatile",
        /// Corrected ECC errors over the GPU's life.
        HealthEccErrorsCorrectedAggregate = "health.ecc_errors.corrected_aggregate",
        /// Uncorrected ECC errors over the GPU's life.
        HealthEccErrorsUncorrectedAggregate = "health.ecc_errors.uncorrected_aggregate",
        /// Row remapping (and page retirement, when neither is supported).
        HealthRemappedRows = "health.remapped_rows",
        /// Pages retired after single-bit errors.
        HealthRetiredPagesSingleBit = "health.retired_pages.single_bit",
        /// Pages retired after a double-bit error.
        HealthRetiredPagesDoubleBit = "health.retired_pages.double_bit",
        /// Pages pending retirement.
        HealthRetiredPagesPending = "health.retired_pages.pending",
        /// amdgpu RAS error counts (the detail names the block).
        HealthRas = "health.ras",
        /// amdgpu bad VRAM pages.
        HealthBadPages = "health.bad_pages",
    }
}

impl Field {
    /// The figures of a device's memory pool: `pool.*`.
    pub const fn is_pool(self) -> bool {
        matches!(
            self,
            Field::PoolTotalBytes | Field::PoolUsedBytes | Field::PoolFreeBytes
        )
    }

    /// The device memory figures: [`Field::Memory`] and `memory.*`.
    pub const fn is_memory(self) -> bool {
        matches!(
            self,
            Field::Memory
                | Field::MemoryTotalBytes
                | Field::MemoryUsedBytes
                | Field::MemoryFreeBytes
                | Field::MemoryReservedBytes
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_fields_are_the_memory_paths() {
        for f in Field::ALL {
            assert_eq!(f.is_memory(), f.as_str().starts_with("memory"), "{f}");
            assert_eq!(f.is_pool(), f.as_str().starts_with("pool."), "{f}");
        }
    }
}
