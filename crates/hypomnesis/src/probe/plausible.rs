//! The probe's last guard on what the backends read: a device figure no device can have
//! becomes unknown with its reason and one warning per device, whichever backend read it
//! (NVML, nvidia-smi, sysfs, DXGI, Metal). Pure over one device ([`check`]).
//!
//! | Figure | Unknown when |
//! |---|---|
//! | memory, a region's, a pool's (bytes) | `2⁶⁴ − 1`, NVML's "not available" (`driver_sentinel`); above [`MAX_BYTES`]; in use (or free) above the total (`implausible`: used and free both, as free is often total − used) |
//! | utilization, memory utilization | outside 0–100 % |
//! | temperature | outside [`CELSIUS`] |
//! | power | negative or above [`MAX_WATTS`] |
//! | energy | negative or above [`MAX_JOULES`] |
//! | a clock | above [`MAX_MHZ`] (`u32::MAX`: a driver's "not available") |
//!
//! The bounds are far from any real device's readings (an H200 holds 141 GB, draws ≤ 1 kW and
//! clocks ≤ 2 GHz): they catch sentinels, wrapped counters and misread files, not unusual
//! hardware. A process row's figure has its own guard where it is read (above the device
//! total: `implausible`, in the NVML and nvidia-smi backends).

use crate::types::{Device, Field, Unknown, UnknownReason, Warning};

/// More device memory than any device has: 1 PiB (a unified-memory pool is the host's RAM,
/// which no machine has this much of either).
pub(crate) const MAX_BYTES: u64 = 1 << 50;

/// The temperatures a working device reports, °C.
pub(crate) const CELSIUS: std::ops::RangeInclusive<f64> = -60.0..=200.0;

/// More power than one device draws, W.
pub(crate) const MAX_WATTS: f64 = 10_000.0;

/// More energy than one device's counter holds: 10 kW for 30 years, J.
pub(crate) const MAX_JOULES: f64 = 1e13;

/// A faster clock than any device's, MHz.
pub(crate) const MAX_MHZ: u32 = 20_000;

/// What one figure was, and why it is unknown now.
struct Refusal {
    field: Field,
    reason: UnknownReason,
    shown: String,
}

/// Makes every figure of `d` that no device can have unknown, with its reason; a warning
/// naming them when there is any.
pub(crate) fn check(d: &mut Device) -> Option<Warning> {
    let mut refused: Vec<Refusal> = Vec::new();
    let m = &mut d.memory;
    bytes(
        [
            (Field::MemoryTotalBytes, &mut m.total_bytes),
            (Field::MemoryUsedBytes, &mut m.used_bytes),
            (Field::MemoryFreeBytes, &mut m.free_bytes),
            (Field::MemoryReservedBytes, &mut m.reserved_bytes),
        ],
        &mut refused,
    );
    if let Some(p) = d.pool.as_mut() {
        bytes(
            [
                (Field::PoolTotalBytes, &mut p.total_bytes),
                (Field::PoolUsedBytes, &mut p.used_bytes),
                (Field::PoolFreeBytes, &mut p.free_bytes),
            ],
            &mut refused,
        );
    }
    // A region has no field of its own: its figure is dropped and the warning names it.
    let mut regions: Vec<String> = Vec::new();
    for (name, r) in &mut d.regions {
        let mut dropped = Vec::new();
        bytes(
            [
                (Field::MemoryTotalBytes, &mut r.total_bytes),
                (Field::MemoryUsedBytes, &mut r.used_bytes),
            ],
            &mut dropped,
        );
        regions.extend(dropped.into_iter().map(|x| {
            let which = if x.field == Field::MemoryTotalBytes {
                "total"
            } else {
                "used"
            };
            format!("region {name} {which} {}", x.shown)
        }));
    }
    telemetry(d, &mut refused);
    if refused.is_empty() && regions.is_empty() {
        return None;
    }
    let mut shown: Vec<String> = Vec::new();
    for r in refused {
        shown.push(format!("{} {}", r.field, r.shown));
        d.unknown.retain(|u| u.field != r.field);
        let detail = match r.reason {
            UnknownReason::DriverSentinel => {
                "the driver's \"not available\" value (2^64 - 1)".to_string()
            }
            _ => format!("the driver reported {}, which no device can have", r.shown),
        };
        d.unknown.push(Unknown::new(r.field, r.reason, detail));
    }
    shown.extend(regions);
    Some(Warning::device(
        d.index,
        format!(
            "the driver reported figures no device can have, shown as unknown: {}",
            shown.join(", ")
        ),
    ))
}

/// Total, used, free (and reserved) of one memory: the sentinel, a size beyond
/// [`MAX_BYTES`], and a used or free figure above the total.
fn bytes<const N: usize>(mut figures: [(Field, &mut Option<u64>); N], refused: &mut Vec<Refusal>) {
    for (field, v) in &mut figures {
        let reason = match **v {
            Some(u64::MAX) => UnknownReason::DriverSentinel,
            Some(b) if b > MAX_BYTES => UnknownReason::Implausible,
            _ => continue,
        };
        refused.push(Refusal {
            field: *field,
            reason,
            shown: format!("{} bytes", v.unwrap_or_default()),
        });
        **v = None;
    }
    let total = figures
        .iter()
        .find(|(f, _)| matches!(f, Field::MemoryTotalBytes | Field::PoolTotalBytes))
        .and_then(|(_, v)| **v);
    let Some(total) = total else {
        return;
    };
    let over = figures.iter().any(|(f, v)| {
        matches!(
            f,
            Field::MemoryUsedBytes
                | Field::MemoryFreeBytes
                | Field::PoolUsedBytes
                | Field::PoolFreeBytes
        ) && v.is_some_and(|b| b > total)
    });
    if !over {
        return;
    }
    for (field, v) in &mut figures {
        let used_or_free = matches!(
            field,
            Field::MemoryUsedBytes
                | Field::MemoryFreeBytes
                | Field::PoolUsedBytes
                | Field::PoolFreeBytes
        );
        if let (true, Some(b)) = (used_or_free, **v) {
            refused.push(Refusal {
                field: *field,
                reason: UnknownReason::Implausible,
                shown: format!("{b} bytes (total {total})"),
            });
            **v = None;
        }
    }
}

/// Utilization, temperature, power, energy and clocks outside what a device can report.
fn telemetry(d: &mut Device, refused: &mut Vec<Refusal>) {
    let t = &mut d.telemetry;
    let percent = 0.0..=100.0;
    for (field, v, ok, unit) in [
        (
            Field::TelemetryUtilizationPercent,
            &mut t.utilization_percent,
            &percent,
            "%",
        ),
        (
            Field::TelemetryMemoryUtilizationPercent,
            &mut t.memory_utilization_percent,
            &percent,
            "%",
        ),
        (
            Field::TelemetryTemperatureCelsius,
            &mut t.temperature_celsius,
            &CELSIUS,
            "°C",
        ),
        (
            Field::TelemetryPowerWatts,
            &mut t.power_watts,
            &(0.0..=MAX_WATTS),
            "W",
        ),
        (
            Field::TelemetryEnergyJoules,
            &mut t.energy_joules,
            &(0.0..=MAX_JOULES),
            "J",
        ),
    ] {
        if let Some(x) = *v
            && !ok.contains(&x)
        {
            refused.push(Refusal {
                field,
                reason: UnknownReason::Implausible,
                shown: format!("{x} {unit}"),
            });
            *v = None;
        }
    }
    for (field, v) in [
        (Field::TelemetryClockGraphicsMhz, &mut t.clock_graphics_mhz),
        (Field::TelemetryClockSmMhz, &mut t.clock_sm_mhz),
        (Field::TelemetryClockMemoryMhz, &mut t.clock_memory_mhz),
        (
            Field::TelemetryClockGraphicsMaxMhz,
            &mut t.clock_graphics_max_mhz,
        ),
        (
            Field::TelemetryClockMemoryMaxMhz,
            &mut t.clock_memory_max_mhz,
        ),
    ] {
        if let Some(x) = v.filter(|&x| x > MAX_MHZ) {
            refused.push(Refusal {
                field,
                reason: UnknownReason::Implausible,
                shown: format!("{x} MHz"),
            });
            *v = None;
        }
    }
}

#[cfg(test)]
mod tests;
