//! A GPU's compute mode through the real dlopen path: each value `nvml.h` defines, one it does
//! not (unknown with the driver's number, never guessed), and NOT_SUPPORTED (unknown with the
//! reason); and `pick`'s rule over it ([`mode_refusal`]) on what the probe read.

use hmn_testbed::{FakeDevice, FakeNvml, FakeProcess};
use hypomnesis::estimate::pick::mode_refusal;
use hypomnesis::{ComputeMode, Field, UnknownReason};

use crate::util::Bed;

#[test]
fn compute_modes_are_read_and_an_undefined_one_stays_unknown() {
    let fake = FakeNvml::new()
        .device(FakeDevice::h100(0))
        .device(FakeDevice::h100(1).compute_mode(Some(1)))
        .device(FakeDevice::h100(2).compute_mode(Some(2)))
        .device(FakeDevice::h100(3).compute_mode(Some(3)))
        .device(FakeDevice::h100(4).compute_mode(Some(7)))
        .device(FakeDevice::h100(5).compute_mode(None))
        .process(FakeProcess::compute(3, 4242, 1 << 30));
    let bed = Bed::with_nvml(&fake);
    let probe = bed.probe();
    let devices = probe.devices().devices;
    let modes: Vec<Option<ComputeMode>> = devices.iter().map(|d| d.compute_mode).collect();
    assert_eq!(
        modes,
        [
            Some(ComputeMode::Default),
            Some(ComputeMode::ExclusiveThread),
            Some(ComputeMode::Prohibited),
            Some(ComputeMode::ExclusiveProcess),
            None,
            None
        ]
    );
    let unknown = |i: usize| {
        devices[i]
            .unknown
            .iter()
            .find(|u| u.field == Field::ComputeMode)
            .cloned()
            .unwrap()
    };
    assert_eq!(unknown(4).reason, UnknownReason::DeviceError);
    assert!(
        unknown(4).detail.contains("compute mode 7"),
        "{:?}",
        unknown(4)
    );
    assert_eq!(unknown(5).reason, UnknownReason::Unsupported);
    let list = probe.gpu_processes();
    let refused: Vec<bool> = devices
        .iter()
        .map(|d| mode_refusal(d, &list).is_some())
        .collect();
    assert_eq!(refused, [false, false, true, true, false, false]);
}
