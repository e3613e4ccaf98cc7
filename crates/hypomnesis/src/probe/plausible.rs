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

use crate::types::{Device, Field, Telemetry, Unknown, UnknownReason, Warning};

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

/// What a refused figure is called: its field, under which its unknown is recorded, or a
/// region's figure, which has no field of its own (the warning names it).
#[derive(Debug, Clone, Copy)]
enum Label<'a> {
    Field(Field),
    /// A region's name and which of its figures.
    Region(&'a str, &'static str),
}

impl std::fmt::Display for Label<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Label::Field(field) => write!(f, "{field}"),
            Label::Region(name, which) => write!(f, "region {name} {which}"),
        }
    }
}

/// What one figure was, and why it is unknown now.
struct Refusal<'a> {
    label: Label<'a>,
    reason: UnknownReason,
    shown: String,
}

/// One figure in bytes, and what it is called.
type Figure<'a, 'b> = (Label<'a>, &'b mut Option<u64>);

/// Makes every figure of `d` that no device can have unknown, with its reason; a warning
/// naming them when there is any.
pub(crate) fn check(d: &mut Device) -> Option<Warning> {
    let mut refused: Vec<Refusal<'_>> = Vec::new();
    let m = &mut d.memory;
    memory(
        (Label::Field(Field::MemoryTotalBytes), &mut m.total_bytes),
        [
            (Label::Field(Field::MemoryUsedBytes), &mut m.used_bytes),
            (Label::Field(Field::MemoryFreeBytes), &mut m.free_bytes),
        ],
        &mut refused,
    );
    size(
        (
            Label::Field(Field::MemoryReservedBytes),
            &mut m.reserved_bytes,
        ),
        &mut refused,
    );
    if let Some(p) = d.pool.as_mut() {
        memory(
            (Label::Field(Field::PoolTotalBytes), &mut p.total_bytes),
            [
                (Label::Field(Field::PoolUsedBytes), &mut p.used_bytes),
                (Label::Field(Field::PoolFreeBytes), &mut p.free_bytes),
            ],
            &mut refused,
        );
    }
    for (name, r) in &mut d.regions {
        memory(
            (Label::Region(name, "total"), &mut r.total_bytes),
            [(Label::Region(name, "used"), &mut r.used_bytes)],
            &mut refused,
        );
    }
    telemetry(&mut d.telemetry, &mut refused);
    if refused.is_empty() {
        return None;
    }
    let mut shown: Vec<String> = Vec::new();
    for r in refused {
        shown.push(format!("{} {}", r.label, r.shown));
        let Label::Field(field) = r.label else {
            continue;
        };
        d.unknown.retain(|u| u.field != field);
        let detail = match r.reason {
            UnknownReason::DriverSentinel => {
                "the driver's \"not available\" value (2^64 - 1)".to_string()
            }
            _ => format!("the driver reported {}, which no device can have", r.shown),
        };
        d.unknown.push(Unknown::new(field, r.reason, detail));
    }
    Some(Warning::device(
        d.index,
        format!(
            "the driver reported figures no device can have, shown as unknown: {}",
            shown.join(", ")
        ),
    ))
}

/// A size that is the sentinel or beyond [`MAX_BYTES`]: unknown.
fn size<'a>((label, v): Figure<'a, '_>, refused: &mut Vec<Refusal<'a>>) {
    let reason = match *v {
        Some(u64::MAX) => UnknownReason::DriverSentinel,
        Some(b) if b > MAX_BYTES => UnknownReason::Implausible,
        _ => return,
    };
    refused.push(Refusal {
        label,
        reason,
        shown: format!("{} bytes", v.unwrap_or_default()),
    });
    *v = None;
}

/// One memory: each figure as [`size`]; then a share of the total (used, free) above it
/// makes every share unknown (free is often total − used, so neither stands).
fn memory<'a, const N: usize>(
    total: Figure<'a, '_>,
    mut shares: [Figure<'a, '_>; N],
    refused: &mut Vec<Refusal<'a>>,
) {
    let (total_label, total_bytes) = total;
    size((total_label, &mut *total_bytes), refused);
    for (label, v) in &mut shares {
        size((*label, &mut **v), refused);
    }
    let Some(total) = *total_bytes else {
        return;
    };
    if !shares.iter().any(|(_, v)| v.is_some_and(|b| b > total)) {
        return;
    }
    for (label, v) in shares {
        if let Some(b) = v.take() {
            refused.push(Refusal {
                label,
                reason: UnknownReason::Implausible,
                shown: format!("{b} bytes (total {total})"),
            });
        }
    }
}

/// Utilization, temperature, power, energy and clocks outside what a device can report.
fn telemetry(t: &mut Telemetry, refused: &mut Vec<Refusal<'_>>) {
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
                label: Label::Field(field),
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
                label: Label::Field(field),
                reason: UnknownReason::Implausible,
                shown: format!("{x} MHz"),
            });
            *v = None;
        }
    }
}

#[cfg(test)]
mod tests;
