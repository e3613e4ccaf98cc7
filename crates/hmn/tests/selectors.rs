//! Device selectors in every command that chooses a device (`ps`, `watch`, `fits`, `spill`):
//! index, `GPU-`/`MIG-` UUID or prefix, PCI bus id in NVML's and sysfs's spellings,
//! `--cuda-order` with `CUDA_VISIBLE_DEVICES`/`CUDA_DEVICE_ORDER`, and one-line errors (exit 2).
//! Also MPS rows and NVML utilization in `ps`.

use hmn_testbed::{FakeNvml, FakeProc, FakeProcess, FakeSample};

use crate::util::{Bed, json, stderr, stdout};

/// Two H100s: index 0 at bus 0x1a (`GPU-…0000`), index 1 at 0x3a (`GPU-…0001`), a process on
/// each.
fn two_gpus() -> Bed {
    let fake = FakeNvml::h100s(2)
        .process(FakeProcess::compute(0, 4242, 1 << 30))
        .process(FakeProcess::compute(1, 5151, 2 << 30));
    let bed = Bed::with_nvml(&fake);
    bed.fixture()
        .process(&FakeProc::new(4242, "python3"))
        .unwrap();
    bed.fixture().process(&FakeProc::new(5151, "vllm")).unwrap();
    bed
}

fn ps_pids(bed: &Bed, args: &[&str]) -> Vec<u64> {
    bed.ps_pids(args)
}

#[test]
fn every_selector_spelling_picks_the_same_gpu() {
    let bed = two_gpus();
    for sel in [
        "1",
        "GPU-3a1f7c2e-5b9d-4e61-8f0a-9c2d4b7e0001",
        "gpu-3a1f7c2e-5b9d-4e61-8f0a-9c2d4b7e0001",
        "00000000:3A:00.0",
        "0000:3a:00.0",
        "3a:00.0",
    ] {
        assert_eq!(ps_pids(&bed, &["--device", sel]), [5151], "{sel}");
    }
    assert_eq!(
        ps_pids(&bed, &["--device", "0000:1a:00.0,1"]),
        [5151, 4242],
        "a list, sorted by memory"
    );
}

#[test]
fn a_selector_that_names_no_device_or_several_is_one_line_and_exit_2() {
    let bed = two_gpus();
    for (args, want) in [
        (
            &["ps", "--device", "GPU-3a1f"][..],
            "hmn: ps: GPU-3a1f matches 2 devices (GPU-3a1f7c2e-5b9d-4e61-8f0a-9c2d4b7e0000, GPU-3a1f7c2e-5b9d-4e61-8f0a-9c2d4b7e0001); give more of the UUID\n",
        ),
        (
            &["ps", "--device", "GPU-ffff"],
            "hmn: ps: no device matches GPU-ffff (have GPU 0 GPU-3a1f7c2e-5b9d-4e61-8f0a-9c2d4b7e0000, GPU 1 GPU-3a1f7c2e-5b9d-4e61-8f0a-9c2d4b7e0001)\n",
        ),
        (
            &["ps", "--device", "0000:99:00.0"],
            "hmn: ps: no device matches 0000:99:00.0 (have GPU 0 GPU-3a1f7c2e-5b9d-4e61-8f0a-9c2d4b7e0000, GPU 1 GPU-3a1f7c2e-5b9d-4e61-8f0a-9c2d4b7e0001)\n",
        ),
        (
            &["ps", "--device", "9"],
            "hmn: ps: no GPU 9 (have 2 devices)\n",
        ),
    ] {
        let o = bed.run(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert_eq!(stderr(&o), want, "{args:?}");
        assert!(o.stdout.is_empty());
    }
    // Malformed: clap's usage error, exit 2, naming the input.
    for args in [
        &["ps", "--device", "first"][..],
        &["watch", "--device", "GPU-"],
        &["spill", "--device", "1a:00.9", "--", "true"],
        &["fits", "1GiB", "--device", "MIG-"],
    ] {
        let o = bed.run(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(
            stderr(&o).contains("invalid device"),
            "{args:?}: {}",
            stderr(&o)
        );
    }
    let o = Bed::new().run(&["ps", "--device", "GPU-1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).starts_with("hmn: ps: no GPU found ("),
        "{}",
        stderr(&o)
    );
}

#[test]
fn watch_spill_and_fits_take_the_same_selectors() {
    let bed = two_gpus();
    let o = bed.run(&[
        "fits",
        "1GiB",
        "--device",
        "GPU-3a1f7c2e-5b9d-4e61-8f0a-9c2d4b7e0001",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(json(&o)["device"], 1);
    let o = bed.run(&["spill", "--json", "--device", "3a:00.0", "--", "true"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(v["device"], 1);
    assert_eq!(
        v["measurable"], false,
        "NVIDIA: not measurable, with the reason"
    );
    let o = bed.run(&["spill", "--device", "GPU-ffff", "--", "true"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).starts_with("hmn: spill: no device matches GPU-ffff"),
        "{}",
        stderr(&o)
    );
    let o = bed.run(&["watch", "--device", "GPU-ffff"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).starts_with("hmn: watch: GPU-ffff: no device matches GPU-ffff"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn cuda_order_reads_cuda_visible_devices_and_states_the_order() {
    let bed = two_gpus();
    // PCI order: cuda:0 = GPU 0 (0x1a), cuda:1 = GPU 1 (0x3a); CUDA_VISIBLE_DEVICES=1 leaves GPU 1.
    let o = bed
        .cmd(&["--cuda-order", "ps", "--json", "--device", "0"])
        .env("CUDA_VISIBLE_DEVICES", "1")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let pids: Vec<u64> = json(&o)["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["pid"].as_u64().unwrap())
        .collect();
    assert_eq!(pids, [5151], "CUDA device 0 is GPU 1");
    assert!(
        stderr(&o).contains("ps: CUDA order: CUDA_VISIBLE_DEVICES=\"1\"; CUDA_DEVICE_ORDER=FASTEST_FIRST (the default), every GPU the same model: PCI bus order; cuda:0 = GPU 1 (GPU-3a1f7c2e-5b9d-4e61-8f0a-9c2d4b7e0001)"),
        "{}",
        stderr(&o)
    );
    // Beyond what is visible: exit 2, saying what is.
    let o = bed
        .cmd(&["--cuda-order", "ps", "--device", "1"])
        .env("CUDA_VISIBLE_DEVICES", "1")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("hmn: ps: no CUDA device 1: 1 visible (CUDA_VISIBLE_DEVICES=\"1\""),
        "{}",
        stderr(&o)
    );
    // The device view states the mapping, in JSON too; an invalid entry ends the list.
    let o = bed
        .cmd(&["--cuda-order", "--json"])
        .env("CUDA_VISIBLE_DEVICES", "1,x,0")
        .env("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
        .output()
        .unwrap();
    let v = json(&o);
    assert_eq!(v["cuda"]["order"], "PCI_BUS_ID");
    assert_eq!(v["cuda"]["basis"], "pci_bus_id");
    assert_eq!(
        v["cuda"]["devices"],
        serde_json::json!([{"device_index": 1, "mig_index": null}])
    );
    assert!(v["cuda"]["notes"][0].as_str().unwrap().contains("\"x\""));
    let o = bed
        .cmd(&["--cuda-order"])
        .env_remove("CUDA_VISIBLE_DEVICES")
        .output()
        .unwrap();
    assert!(
        stderr(&o)
            .contains("cuda:0 = GPU 0 (GPU-3a1f7c2e-5b9d-4e61-8f0a-9c2d4b7e0000), cuda:1 = GPU 1"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn mps_rows_and_utilization_in_ps() {
    let fake = FakeNvml::mps_volta(900, [901, 902]).sample(FakeSample::new(0, 900, [95, 40, 0, 0]));
    let bed = Bed::with_nvml(&fake);
    let fx = bed.fixture();
    fx.process(&FakeProc::new(900, "nvidia-cuda-mps").cmdline(&["nvidia-cuda-mps-server"]))
        .unwrap();
    fx.process(&FakeProc::new(901, "python3")).unwrap();
    fx.process(&FakeProc::new(902, "python3")).unwrap();
    let o = bed.run(&["ps", "--util", "--interval", "50ms"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let line = |pid: &str| {
        out.lines()
            .find(|l| l.trim_start().starts_with(pid))
            .unwrap_or_else(|| panic!("{pid}: {out}"))
            .to_string()
    };
    assert!(line("901").contains(" mps "), "{out}");
    assert!(line("900").contains("mps-server"), "{out}");
    assert!(line("900").trim_end().ends_with("95% sm 40% mem"), "{out}");
    assert!(
        line("901").trim_end().ends_with("0% sm 0% mem"),
        "no sample: idle: {out}"
    );
    assert_eq!(
        stderr(&o),
        "hmn: 3 GPU processes found (8 GiB total)\n",
        "the clients once, the server's 30 MiB rounds away"
    );
    let v = json(&bed.run(&["ps", "--json"]));
    let kinds: Vec<&str> = v["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["mps", "mps", "mps-server"]);
    assert_eq!(v["processes"][2]["utilization"]["sm_percent"], 95);
}
