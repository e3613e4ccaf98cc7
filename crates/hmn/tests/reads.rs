//! What each command asks the NVIDIA driver, in the fake NVML's call log: the device view reads
//! telemetry and the energy counter; `ps`, `fits`, `pick` and `run --gpu`'s pick, which show no
//! telemetry, ask none
//! of it (the first telemetry calls of a fresh NVML session took ~11 ms on an H200, a third of
//! `hmn ps`: docs/validation.md, run 7).

use hmn_testbed::{FakeDevice, FakeNvml, NVML_TELEMETRY_CALLS as TELEMETRY, nvml_calls};

use crate::util::{Bed, stderr};

/// The driver calls `hmn ARGS` made (asserting it did not fail).
fn asked(bed: &Bed, args: &[&str]) -> Vec<String> {
    let before = nvml_calls(&bed.env.nvml).len();
    let o = bed.run(args);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    nvml_calls(&bed.env.nvml)[before..].to_vec()
}

fn telemetry_calls(calls: &[String]) -> Vec<&String> {
    calls
        .iter()
        .filter(|c| TELEMETRY.contains(&c.as_str()))
        .collect()
}

#[test]
fn commands_that_show_no_telemetry_do_not_ask_the_driver_for_it() {
    let bed = Bed::with_nvml(&FakeNvml::new().device(FakeDevice::h100(0)).log_calls());
    let view = asked(&bed, &["--json"]);
    let shown = telemetry_calls(&view);
    for call in TELEMETRY {
        assert!(shown.iter().any(|c| *c == call), "the device view: {call}");
    }
    for args in [
        &["ps", "--json"][..],
        &["fits", "1GiB", "--json"],
        &["pick", "--need", "1GiB", "--json"],
    ] {
        let calls = asked(&bed, args);
        assert!(
            calls.iter().any(|c| c == "nvmlDeviceGetMemoryInfo_v2"),
            "{args:?} read the memory: {calls:?}"
        );
        assert_eq!(telemetry_calls(&calls), [&""; 0], "{args:?}");
    }
    // `run --gpu auto`'s pick neither: a need no device meets ends hmn before the command and
    // its sampler start.
    let before = nvml_calls(&bed.env.nvml).len();
    let o = bed.run(&["run", "--gpu", "auto", "--need", "1000GiB", "--", "true"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let calls = nvml_calls(&bed.env.nvml)[before..].to_vec();
    assert!(
        calls.iter().any(|c| c == "nvmlDeviceGetMemoryInfo_v2"),
        "run --gpu auto read the memory: {calls:?}"
    );
    assert_eq!(telemetry_calls(&calls), [&""; 0], "run --gpu auto's pick");
}
