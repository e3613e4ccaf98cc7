use super::*;
use crate::types::{DeviceRegion, MemoryPool, PoolSource, Source, Vendor};

const GIB: u64 = 1 << 30;

fn h100() -> Device {
    let mut d = Device::new(0, Vendor::Nvidia, Source::Nvml);
    d.memory.total_bytes = Some(80 * GIB);
    d.memory.used_bytes = Some(20 * GIB);
    d.memory.free_bytes = Some(60 * GIB);
    d.telemetry.utilization_percent = Some(97.0);
    d.telemetry.temperature_celsius = Some(-5.0);
    d.telemetry.power_watts = Some(700.0);
    d.telemetry.clock_graphics_mhz = Some(1980);
    d
}

fn reason(d: &Device, field: Field) -> Option<UnknownReason> {
    d.unknown
        .iter()
        .find(|u| u.field == field)
        .map(|u| u.reason)
}

#[test]
fn a_real_device_passes_untouched() {
    let mut d = h100();
    d.regions
        .insert("gtt".into(), DeviceRegion::new(Some(16 * GIB), Some(GIB)));
    let before = d.clone();
    assert!(check(&mut d).is_none());
    assert_eq!(d, before);
}

/// QA: NVML memory of `ULLONG_MAX` made `hmn fits 1TiB` say "fits — 16 EiB free".
#[test]
fn the_sentinel_is_unknown_never_a_size() {
    let mut d = h100();
    d.memory.total_bytes = Some(u64::MAX);
    d.memory.free_bytes = Some(u64::MAX);
    let w = check(&mut d).unwrap();
    assert_eq!((d.memory.total_bytes, d.memory.free_bytes), (None, None));
    assert_eq!(
        d.memory.used_bytes,
        Some(20 * GIB),
        "no total to compare it with"
    );
    assert_eq!(
        reason(&d, Field::MemoryTotalBytes),
        Some(UnknownReason::DriverSentinel)
    );
    assert_eq!(w.device_index, Some(0));
    assert!(
        w.message
            .contains("memory.total_bytes 18446744073709551615 bytes"),
        "{}",
        w.message
    );
    // Beyond any device, though not the sentinel.
    let mut d = h100();
    d.memory.total_bytes = Some(MAX_BYTES + 1);
    check(&mut d).unwrap();
    assert_eq!(
        reason(&d, Field::MemoryTotalBytes),
        Some(UnknownReason::Implausible)
    );
}

/// QA: used 5000 of a 1000-byte total gave `used 5000, free 0` with no word.
#[test]
fn more_in_use_than_the_total_makes_used_and_free_unknown() {
    let mut d = h100();
    d.memory.used_bytes = Some(90 * GIB);
    d.memory.free_bytes = Some(0);
    d.unknown.push(Unknown::new(
        Field::MemoryUsedBytes,
        UnknownReason::Unsupported,
        "an older reason",
    ));
    let w = check(&mut d).unwrap();
    assert_eq!(d.memory.total_bytes, Some(80 * GIB));
    assert_eq!((d.memory.used_bytes, d.memory.free_bytes), (None, None));
    assert_eq!(
        reason(&d, Field::MemoryUsedBytes),
        Some(UnknownReason::Implausible)
    );
    assert_eq!(
        d.unknown
            .iter()
            .filter(|u| u.field == Field::MemoryUsedBytes)
            .count(),
        1,
        "one reason per field"
    );
    assert!(w.message.contains("(total 85899345920)"), "{}", w.message);
    // A pool and a region likewise.
    let mut d = h100();
    let mut pool = MemoryPool::host_ram(PoolSource::ProcessSum, "test");
    pool.total_bytes = Some(GIB);
    pool.used_bytes = Some(2 * GIB);
    d.pool = Some(pool);
    d.regions
        .insert("vram".into(), DeviceRegion::new(Some(GIB), Some(3 * GIB)));
    let w = check(&mut d).unwrap();
    assert_eq!(d.pool.as_ref().unwrap().used_bytes, None);
    assert_eq!(
        reason(&d, Field::PoolUsedBytes),
        Some(UnknownReason::Implausible)
    );
    assert_eq!(d.regions["vram"], DeviceRegion::new(Some(GIB), None));
    assert!(w.message.contains("region vram used"), "{}", w.message);
}

/// QA: utilization 4294967295 %, 4294967295 °C, 1.8e16 J, through to `top` and `serve`.
#[test]
fn telemetry_no_device_can_report_is_unknown() {
    let mut d = h100();
    let t = &mut d.telemetry;
    t.utilization_percent = Some(4_294_967_295.0);
    t.memory_utilization_percent = Some(300.0);
    t.temperature_celsius = Some(4_294_967_295.0);
    t.power_watts = Some(18_446_744_073_709.55);
    t.energy_joules = Some(1.8e16);
    t.clock_sm_mhz = Some(u32::MAX);
    let w = check(&mut d).unwrap();
    let t = &d.telemetry;
    assert_eq!(
        (
            t.utilization_percent,
            t.memory_utilization_percent,
            t.temperature_celsius,
            t.power_watts,
            t.energy_joules,
            t.clock_sm_mhz
        ),
        (None, None, None, None, None, None)
    );
    assert_eq!(t.clock_graphics_mhz, Some(1980), "a real clock stays");
    for f in [
        Field::TelemetryUtilizationPercent,
        Field::TelemetryMemoryUtilizationPercent,
        Field::TelemetryTemperatureCelsius,
        Field::TelemetryPowerWatts,
        Field::TelemetryEnergyJoules,
        Field::TelemetryClockSmMhz,
    ] {
        assert_eq!(reason(&d, f), Some(UnknownReason::Implausible), "{f}");
    }
    assert!(w.message.contains("4294967295 %"), "{}", w.message);
    // The bounds themselves are readings a device can give.
    let mut d = h100();
    d.telemetry.utilization_percent = Some(100.0);
    d.telemetry.memory_utilization_percent = Some(0.0);
    d.telemetry.temperature_celsius = Some(200.0);
    d.telemetry.clock_memory_mhz = Some(MAX_MHZ);
    assert!(check(&mut d).is_none());
    d.telemetry.utilization_percent = Some(f64::NAN);
    assert!(check(&mut d).is_some(), "NaN is no reading");
}
