//! A device's telemetry (utilization, temperature, power, energy, clocks), and what NVML says
//! of a device that never changes while it is initialised ([`Fixed`]: name, UUID, PCI address,
//! maximum clocks), read once per device by a long-lived probe instead of at every query.
//!
//! NVML enumerates devices when it is initialised and keeps each index on the same GPU until it
//! is shut down; a GPU that falls off the bus answers `GPU_IS_LOST` to the calls still made at
//! every query (memory, telemetry, processes), so keeping these costs no truth. A value is kept
//! once read, and so is a NOT_SUPPORTED answer (what a device or driver cannot tell, it never
//! will); any other failure is asked again at the next query.

use std::collections::BTreeMap;
use std::sync::Mutex;

use nvml_wrapper::error::NvmlError;

use super::convert::{describe, reason_of};
use crate::backends::error::BackendError;
use crate::types::pci::PciBusId;
use crate::types::{Field, Telemetry, Unknown, UnknownReason};

/// What never changes for one device index while NVML is initialised: each value once it has
/// been read, `Some(None)` once the driver answered NOT_SUPPORTED, `None` until then.
#[derive(Debug, Clone, Default)]
pub(super) struct Fixed {
    pub name: Option<Option<String>>,
    pub uuid: Option<Option<String>>,
    pub pci_bus_id: Option<Option<PciBusId>>,
    pub max_graphics_mhz: Option<Option<u32>>,
    pub max_memory_mhz: Option<Option<u32>>,
}

/// [`Fixed`] per device index, for the life of one NVML session.
#[derive(Debug, Default)]
pub(super) struct FixedCache(Mutex<BTreeMap<u32, Fixed>>);

impl FixedCache {
    /// What is known of device `index` so far.
    pub fn get(&self, index: u32) -> Fixed {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&index)
            .cloned()
            .unwrap_or_default()
    }

    /// Keeps what `fixed` holds for device `index`.
    pub fn keep(&self, index: u32, fixed: Fixed) {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(index, fixed);
    }
}

/// An error that may be NVML's NOT_SUPPORTED, the one failure [`kept`] keeps.
pub(super) trait Unsupported {
    fn is_unsupported(&self) -> bool;
    fn unsupported() -> Self;
}

impl Unsupported for NvmlError {
    fn is_unsupported(&self) -> bool {
        matches!(self, NvmlError::NotSupported)
    }
    fn unsupported() -> Self {
        NvmlError::NotSupported
    }
}

impl Unsupported for BackendError {
    fn is_unsupported(&self) -> bool {
        matches!(self, BackendError::Nvml(NvmlError::NotSupported))
    }
    fn unsupported() -> Self {
        BackendError::Nvml(NvmlError::NotSupported)
    }
}

/// What `slot` keeps, else `read`'s answer, kept in `slot` when it is a value or NOT_SUPPORTED.
///
/// # Errors
/// NOT_SUPPORTED when that was kept; else `read`'s error (not kept).
pub(super) fn kept<T: Clone, E: Unsupported>(
    slot: &mut Option<Option<T>>,
    read: impl FnOnce() -> Result<T, E>,
) -> Result<T, E> {
    match slot {
        Some(Some(v)) => return Ok(v.clone()),
        Some(None) => return Err(E::unsupported()),
        None => {}
    }
    let r = read();
    match &r {
        Ok(v) => *slot = Some(Some(v.clone())),
        Err(e) if e.is_unsupported() => *slot = Some(None),
        Err(_) => {}
    }
    r
}

/// Utilization, temperature, power, energy and clocks; each failure is one unknown field.
pub(super) fn telemetry(
    handle: &nvml_wrapper::Device<'_>,
    fixed: &mut Fixed,
    unknown: &mut Vec<Unknown>,
    energy: bool,
) -> Telemetry {
    use nvml_wrapper::enum_wrappers::device::{Clock, TemperatureSensor};
    let mut keep = |fields: &[Field], r: Result<(), NvmlError>| {
        if let Err(e) = r {
            for field in fields {
                unknown.push(Unknown::new(*field, reason_of(&e), describe(&e)));
            }
        }
    };
    let mut t = Telemetry::default();
    keep(
        &[
            Field::TelemetryUtilizationPercent,
            Field::TelemetryMemoryUtilizationPercent,
        ],
        handle.utilization_rates().map(|u| {
            t.utilization_percent = Some(f64::from(u.gpu));
            t.memory_utilization_percent = Some(f64::from(u.memory));
        }),
    );
    keep(
        &[Field::TelemetryTemperatureCelsius],
        handle
            .temperature(TemperatureSensor::Gpu)
            .map(|c| t.temperature_celsius = Some(f64::from(c))),
    );
    keep(
        &[Field::TelemetryPowerWatts],
        handle
            .power_usage()
            .map(|mw| t.power_watts = Some(f64::from(mw) / 1000.0)),
    );
    if energy {
        keep(
            &[Field::TelemetryEnergyJoules],
            handle
                .total_energy_consumption()
                .map(|mj| t.energy_joules = Some(mj as f64 / 1000.0)),
        );
    }
    for (field, clock, max, slot) in [
        (
            Field::TelemetryClockGraphicsMhz,
            Clock::Graphics,
            false,
            &mut t.clock_graphics_mhz,
        ),
        (
            Field::TelemetryClockSmMhz,
            Clock::SM,
            false,
            &mut t.clock_sm_mhz,
        ),
        (
            Field::TelemetryClockMemoryMhz,
            Clock::Memory,
            false,
            &mut t.clock_memory_mhz,
        ),
        (
            Field::TelemetryClockGraphicsMaxMhz,
            Clock::Graphics,
            true,
            &mut t.clock_graphics_max_mhz,
        ),
        (
            Field::TelemetryClockMemoryMaxMhz,
            Clock::Memory,
            true,
            &mut t.clock_memory_max_mhz,
        ),
    ] {
        let r = match (max, clock) {
            (false, _) => handle.clock_info(clock),
            // The maximum clocks are the device's: read once.
            (true, Clock::Graphics) => {
                kept(&mut fixed.max_graphics_mhz, || handle.max_clock_info(clock))
            }
            (true, _) => kept(&mut fixed.max_memory_mhz, || handle.max_clock_info(clock)),
        };
        keep(&[field], r.map(|mhz| *slot = Some(mhz)));
    }
    if !energy {
        unknown.push(Unknown::new(
            Field::TelemetryEnergyJoules,
            UnknownReason::NotRequested,
            "not read: ProbeOptions::energy is off",
        ));
    }
    t
}

#[cfg(test)]
mod tests {
    use nvml_wrapper::error::NvmlError;

    use super::kept;

    #[test]
    fn a_value_and_not_supported_are_kept_and_other_failures_asked_again() {
        let mut slot: Option<Option<String>> = None;
        let mut asked = 0;
        let mut read = |answer: Result<&str, NvmlError>| {
            kept(&mut slot, || {
                asked += 1;
                answer.map(str::to_string)
            })
        };
        assert!(matches!(
            read(Err(NvmlError::GpuLost)),
            Err(NvmlError::GpuLost)
        ));
        assert_eq!(read(Ok("H100")).ok().as_deref(), Some("H100"));
        assert_eq!(
            read(Err(NvmlError::GpuLost)).ok().as_deref(),
            Some("H100"),
            "kept: not asked"
        );
        assert_eq!(asked, 2);
        let mut none: Option<Option<u32>> = None;
        let mut asked = 0;
        for _ in 0..3 {
            let r = kept(&mut none, || {
                asked += 1;
                Err::<u32, _>(NvmlError::NotSupported)
            });
            assert!(matches!(r, Err(NvmlError::NotSupported)));
        }
        assert_eq!(asked, 1, "NOT_SUPPORTED is the device's answer for good");
    }
}
