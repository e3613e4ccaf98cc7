//! Upstream's exit codes for each NVML failure (upstream-api §10.3): exit 2 when GPU processes
//! may exist that nothing can show (an NVML that cannot start or count, every device lost, every
//! process list failing); exit 0 (1 under `ps --exit-status`) when none can exist (no library,
//! driver not loaded, no GPU found, a count of 0).

use hmn_testbed::{FakeDevice, FakeNvml, FakeProcess};

use crate::util::{Bed, json, stderr, stdout};

const ALL_FAILED: &str = "hmn: ps: no device could be queried, so nothing could be listed";

fn has_line(text: &str, line: &str) -> bool {
    text.lines().any(|l| l == line)
}

fn code(o: &std::process::Output) -> i32 {
    o.status.code().unwrap()
}

#[test]
fn an_nvml_that_cannot_start_exits_2_naming_the_reason() {
    let bed = Bed::with_nvml(&FakeNvml::h100s(1).version_mismatch());
    for args in [&[][..], &["--json"]] {
        let o = bed.run(args);
        assert_eq!(code(&o), 2, "{args:?}: {}", stderr(&o));
        let err = stderr(&o);
        let line = err
            .lines()
            .find(|l| l.starts_with("hmn: failed to count devices: NVML: initialisation failed"))
            .unwrap_or_else(|| panic!("{err}"));
        assert!(line.contains("version"), "names the mismatch: {line}");
        assert!(!err.contains("no GPU found"), "not 'no GPU': {err}");
    }
    let v = json(&bed.run(&["--json"]));
    assert_eq!(v["backends"][0]["state"], "failed");
    assert!(
        v["backends"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("initialisation failed")
    );

    for args in [
        &["ps"][..],
        &["ps", "--json"],
        &["ps", "--filter", "fieldcheck", "--exit-status"],
    ] {
        let o = bed.run(args);
        assert_eq!(code(&o), 2, "{args:?}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(
            err.lines()
                .any(|l| l
                    .starts_with("hmn: ps failed to count devices: NVML: initialisation failed")),
            "{args:?}: {err}"
        );
        assert!(has_line(&err, ALL_FAILED), "{args:?}: {err}");
        // No count and no table where nothing could be read; the JSON says why (QA: it read
        // as "no GPU processes", only the exit status differed).
        assert!(!err.contains("GPU processes found"), "{args:?}: {err}");
        if args.contains(&"--json") {
            let v = json(&o);
            assert_eq!(v["failed_backends"][0]["backend"], "NVML", "{v}");
            assert_eq!(v["failed_backends"][0]["cause"], "version-mismatch", "{v}");
        } else {
            assert!(stdout(&o).is_empty(), "{args:?}: {}", stdout(&o));
        }
    }
}

#[test]
fn watch_and_spill_with_an_nvml_that_cannot_start() {
    let bed = Bed::with_nvml(&FakeNvml::h100s(1).version_mismatch()).real_proc();
    let o = bed.run(&["watch", "--interval", "100ms", "--duration", "100ms"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(
        stderr(&o).starts_with("hmn: watch failed to count devices: NVML: initialisation failed"),
        "{}",
        stderr(&o)
    );
    // `spill` still runs the command and passes its code through, saying why it measured
    // nothing.
    let o = bed.run(&["spill", "--", "sh", "-c", "exit 4"]);
    assert_eq!(code(&o), 4);
    assert!(
        stderr(&o).starts_with(
            "hmn spill: spill not measurable on GPU 0: no GPU at index 0 (0 devices found; \
             NVML failed: initialisation failed"
        ),
        "{}",
        stderr(&o)
    );
}

/// The commands that choose a GPU: a driver that cannot start may hide the one to choose, so
/// each exits 2 naming it — not "no device to pick from" with exit 1 (`run --gpu auto`, QA),
/// and the command does not start.
#[test]
fn pick_and_run_gpu_with_an_nvml_that_cannot_start() {
    let bed = Bed::with_nvml(&FakeNvml::h100s(1).version_mismatch());
    for (args, prefix) in [
        (
            &["pick", "--need", "1GiB"][..],
            "hmn: pick failed to count devices: NVML",
        ),
        (
            &[
                "run", "--gpu", "auto", "--need", "1GiB", "--", "echo", "RAN",
            ],
            "hmn: run --gpu failed to count devices: NVML",
        ),
    ] {
        let o = bed.run(args);
        assert_eq!(code(&o), 2, "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).starts_with(prefix), "{args:?}: {}", stderr(&o));
        assert!(!stdout(&o).contains("RAN"), "{args:?}: the command ran");
    }
}

#[test]
fn a_failing_device_count_exits_2() {
    let bed = Bed::with_nvml(&FakeNvml::h100s(2).count_error(999));
    let o = bed.run(&[]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(
        stderr(&o).starts_with("hmn: failed to count devices: NVML: cannot count devices: "),
        "{}",
        stderr(&o)
    );
    let o = bed.run(&["ps"]);
    assert_eq!(code(&o), 2);
    assert!(has_line(&stderr(&o), ALL_FAILED), "{}", stderr(&o));
}

#[test]
fn every_device_lost_exits_2_one_lost_of_two_exits_0() {
    let lost = Bed::with_nvml(
        &FakeNvml::new()
            .device(FakeDevice::h100(0).lost())
            .device(FakeDevice::h100(1).lost()),
    );
    for args in [&[][..], &["--json"]] {
        let o = lost.run(args);
        assert_eq!(code(&o), 2, "{args:?}: {}", stderr(&o));
        assert!(
            has_line(&stderr(&o), "hmn: 2 GPU(s) enumerated but none readable."),
            "{}",
            stderr(&o)
        );
    }
    let o = lost.run(&["ps"]);
    assert_eq!(code(&o), 2);
    assert!(has_line(&stderr(&o), ALL_FAILED), "{}", stderr(&o));

    let one = Bed::with_nvml(
        &FakeNvml::new()
            .device(FakeDevice::h100(0))
            .device(FakeDevice::h100(1).lost()),
    );
    let o = one.run(&[]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stdout(&o).starts_with("GPU 0 [NVIDIA H100 80GB HBM3]: free "));
    assert!(
        stderr(&o).contains("hmn: warning: GPU 1: "),
        "{}",
        stderr(&o)
    );
    assert_eq!(code(&one.run(&["ps"])), 0);
}

#[test]
fn a_process_list_failing_on_the_only_device_fails_ps_not_hmn() {
    let mut fake = FakeNvml::h100s(1).process(FakeProcess::compute(0, 5, 1 << 20));
    fake.devices[0]
        .errors
        .push(("nvmlDeviceGetComputeRunningProcesses_v3".to_string(), 999));
    let bed = Bed::with_nvml(&fake);
    assert_eq!(code(&bed.run(&[])), 0);
    let o = bed.run(&["ps"]);
    assert_eq!(code(&o), 2);
    assert!(has_line(&stderr(&o), ALL_FAILED), "{}", stderr(&o));
}

/// Upstream's own fake NVML (its `tests/cli_fake_nvml.rs`) has no graphics process call: such an
/// NVML lists compute contexts, so the device answered — `ps` lists its rows and exits 0, with
/// a warning that graphics-only processes cannot be seen (found by running upstream's CLI tests
/// against this `hmn`).
#[test]
fn an_nvml_without_the_graphics_call_still_lists_compute_processes() {
    // NVML_ERROR_FUNCTION_NOT_FOUND (13) on every graphics variant: the call is not there.
    let mut fake = FakeNvml::h100s(2)
        .process(FakeProcess::compute(0, 4242, 1 << 30))
        .process(FakeProcess::compute(1, 4343, 2 << 30));
    for d in &mut fake.devices {
        for sym in [
            "nvmlDeviceGetGraphicsRunningProcesses_v3",
            "nvmlDeviceGetGraphicsRunningProcesses_v2",
            "nvmlDeviceGetGraphicsRunningProcesses",
        ] {
            d.errors.push((sym.to_string(), 13));
        }
    }
    let bed = Bed::with_nvml(&fake);
    let o = bed.run(&["ps", "--json"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["failed_devices"].as_array().unwrap().len(), 0, "{v}");
    let pids: Vec<u64> = v["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["pid"].as_u64().unwrap())
        .collect();
    assert_eq!(pids, [4343, 4242], "{v}");
    assert!(
        v["warnings"].as_array().unwrap().iter().any(|w| w
            .as_str()
            .unwrap()
            .starts_with("GPU 0: graphics processes not listed")),
        "{v}"
    );
    let text = bed.run(&["ps"]);
    assert_eq!(code(&text), 0);
    assert!(
        stderr(&text).contains("hmn: warning: GPU 1: graphics processes not listed"),
        "{}",
        stderr(&text)
    );
}

#[test]
fn no_gpu_at_all_stays_0_with_the_reason() {
    for fake in [
        FakeNvml::h100s(1).init_error(9),
        FakeNvml::h100s(1).init_error(28),
        FakeNvml::new(),
    ] {
        let bed = Bed::with_nvml(&fake);
        let o = bed.run(&[]);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        assert!(
            stderr(&o).starts_with("hmn: no GPU found"),
            "{}",
            stderr(&o)
        );
        let o = bed.run(&["ps"]);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        assert!(!stderr(&o).contains(ALL_FAILED), "{}", stderr(&o));
        assert_eq!(code(&bed.run(&["ps", "--exit-status"])), 1);
    }
    let o = Bed::with_nvml(&FakeNvml::h100s(1).init_error(28)).run(&[]);
    assert!(
        stderr(&o).contains("NVML: the NVIDIA driver found no GPU"),
        "{}",
        stderr(&o)
    );
    // Without any NVML library.
    let o = Bed::new().run(&["ps", "--exit-status"]);
    assert_eq!(code(&o), 1);
}
