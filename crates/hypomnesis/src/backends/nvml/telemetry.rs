//! A device's telemetry (utilization, temperature, power, energy, clocks), and what NVML says
//! of a device that never changes while it is initialised ([`Fixed`]: name, UUID, PCI address,
//! maximum clocks), read once per device by a long-lived probe instead of at every query.
//!
//! NVML enumerates devices when it is initialised and keeps each index on the same GPU until it
//! is shut down; a GPU that falls off the bus answers `GPU_IS_LOST` to the calls still made at
//! every query (memory, telemetry, processes), so keeping these costs no truth. A call that
//! failed is not kept: it is asked again at the next query.

use std::collections::BTreeMap;
use std::sync::Mutex;

use nvml_wrapper::error::NvmlError;

use super::convert::{describe, reason_of};
use crate::types::pci::PciBusId;
use crate::types::{Field, Telemetry, Unknown, UnknownReason};

/// What never changes for one device index while NVML is initialised: each value once it has
/// been read successfully.
#[derive(Debug, Clone, Default)]
pub(super) struct Fixed {
    pub name: Option<String>,
    pub uuid: Option<String>,
    pub pci_bus_id: Option<PciBusId>,
    pub max_graphics_mhz: Option<u32>,
    pub max_memory_mhz: Option<u32>,
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

/// The value in `slot`, else `read`'s, kept in `slot` when it succeeds.
///
/// # Errors
/// `read`'s error (nothing is kept).
pub(super) fn kept<T: Clone, E>(
    slot: &mut Option<T>,
    read: impl FnOnce() -> Result<T, E>,
) -> Result<T, E> {
    if let Some(v) = slot {
        return Ok(v.clone());
    }
    let r = read();
    if let Ok(v) = &r {
        *slot = Some(v.clone());
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
    use super::kept;

    #[test]
    fn a_failed_read_is_not_kept_and_asked_again() {
        let mut slot: Option<String> = None;
        let mut asked = 0;
        let mut read = |ok: bool| {
            kept(&mut slot, || {
                asked += 1;
                if ok {
                    Ok("H100".to_string())
                } else {
                    Err("GPU_IS_LOST")
                }
            })
        };
        assert_eq!(read(false), Err("GPU_IS_LOST"));
        assert_eq!(read(true).as_deref(), Ok("H100"));
        assert_eq!(read(false).as_deref(), Ok("H100"), "kept: not asked");
        assert_eq!(asked, 2);
    }
}
