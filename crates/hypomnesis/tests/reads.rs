//! What a probe's options leave unread (`ProbeOptions::energy`, `ProbeOptions::telemetry`):
//! the driver is not asked — checked in the fake NVML's call log and on a DRM card's sysfs —
//! and the value is `None` with reason `not_requested`, never a number.

use hmn_testbed::{FakeGpu, FakeNvml};
use hypomnesis::{Field, Probe, UnknownReason};

use crate::util::Bed;

/// The energy counter's driver call took 2.9 ms on an H200 (half of a device query): a probe
/// built with `energy(false)` skips it and says so; every other figure is still read.
#[test]
fn the_energy_counter_is_skipped_when_not_requested() {
    let bed = Bed::with_nvml(&FakeNvml::new().device(hmn_testbed::FakeDevice::h100(0)));
    let on = bed.probe().device(0).unwrap();
    assert_eq!(on.telemetry.energy_joules, Some(123_456.789));
    let off = Probe::with_options(bed.options().energy(false))
        .device(0)
        .unwrap();
    assert_eq!(off.telemetry.energy_joules, None);
    assert_eq!(off.telemetry.power_watts, Some(71.234));
    assert_eq!(off.memory, on.memory);
    let why = off
        .unknown
        .iter()
        .find(|u| u.field == Field::TelemetryEnergyJoules)
        .expect("the skipped counter has a reason");
    assert_eq!(why.reason, UnknownReason::NotRequested);
    assert!(
        !on.unknown
            .iter()
            .any(|u| u.field == Field::TelemetryEnergyJoules)
    );
}

/// A fresh NVML session's first telemetry calls took ~11 ms on an H200 (run 7 of
/// docs/validation.md): a probe built with `telemetry(false)` asks none of them — through
/// `device` and `devices` alike — and says so in one unknown entry; memory, identity and
/// compute mode are read as before.
#[test]
fn telemetry_is_not_asked_when_not_requested() {
    let bed = Bed::with_nvml(
        &FakeNvml::new()
            .device(hmn_testbed::FakeDevice::h100(0))
            .log_calls(),
    );
    let on = bed.probe().device(0).unwrap();
    assert_eq!(on.telemetry.power_watts, Some(71.234));
    let before = hmn_testbed::nvml_calls(&bed.env.nvml).len();
    let p = Probe::with_options(bed.options().telemetry(false));
    for off in [p.device(0).unwrap(), p.devices().devices.remove(0)] {
        assert_eq!(
            off.telemetry,
            hypomnesis::Telemetry::default(),
            "nothing read"
        );
        assert_eq!(off.memory, on.memory);
        assert_eq!((&off.name, &off.uuid), (&on.name, &on.uuid));
        assert_eq!(off.compute_mode, on.compute_mode);
        let why: Vec<_> = off
            .unknown
            .iter()
            .filter(|u| u.field.as_str().starts_with("telemetry"))
            .collect();
        assert_eq!(why.len(), 1, "one entry for the whole telemetry: {why:?}");
        assert_eq!(
            (why[0].field, why[0].reason),
            (Field::Telemetry, UnknownReason::NotRequested)
        );
    }
    let calls = hmn_testbed::nvml_calls(&bed.env.nvml);
    let asked: Vec<_> = calls[before..]
        .iter()
        .filter(|c| hmn_testbed::NVML_TELEMETRY_CALLS.contains(&c.as_str()))
        .collect();
    assert!(asked.is_empty(), "telemetry calls made: {asked:?}");
    assert!(
        calls[before..]
            .iter()
            .any(|c| c == "nvmlDeviceGetMemoryInfo_v2"),
        "the call log covers the second probe"
    );
}

/// On a DRM card the hwmon, busy and clock files are left unread alike; memory is read.
#[test]
fn a_drm_cards_telemetry_is_not_read_when_not_requested() {
    let w = Bed::new();
    w.gpu(FakeGpu::amdgpu("0000:03:00.0", 1, 128));
    let on = w.probe().devices().devices.remove(0);
    assert_eq!(on.telemetry.temperature_celsius, Some(45.0));
    let off = Probe::with_options(w.options().telemetry(false))
        .devices()
        .devices
        .remove(0);
    assert_eq!(off.telemetry, hypomnesis::Telemetry::default());
    assert_eq!(off.memory, on.memory);
    assert_eq!(off.regions, on.regions);
    let why: Vec<_> = off
        .unknown
        .iter()
        .filter(|u| u.field.as_str().starts_with("telemetry"))
        .map(|u| (u.field, u.reason))
        .collect();
    assert_eq!(why, [(Field::Telemetry, UnknownReason::NotRequested)]);
}
