//! MIG through the `hmn` binary and the fake NVML: the device view, `ps`, `fits` against one
//! instance, `serve`'s dcgm-compatible labels, `run` and `watch`, an instance destroyed at
//! every call, and a driver too old for MIG — clear output, exit codes, never a panic.

use std::process::Command;

use hmn_testbed::{Driver, FakeNvml, FakeProc, FakeProcess};
use serde_json::Value;

use crate::util::{Bed, json, stderr, stdout};

const MIB: u64 = 1 << 20;

fn mig_bed() -> Bed {
    let bed = Bed::with_nvml(&FakeNvml::h100_mig_mixed());
    for pid in [23804, 23806, 23808] {
        bed.fixture()
            .process(&FakeProc::new(pid, "loadgen").uid(0))
            .unwrap();
    }
    bed
}

#[test]
fn the_device_view_lists_mig_devices() {
    let bed = mig_bed();
    let o = bed.run(&[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].starts_with(
            "GPU 0 [NVIDIA H100 80GB HBM3]: free 66.8 GiB / 79.6 GiB, 540 MiB reserved"
        ) && lines[0].ends_with(", MIG on (3 MIG devices)"),
        "{out}"
    );
    assert_eq!(
        lines[1],
        "  MIG 1c.3g.40gb  device 0, GI 1 CI 0: free 27.2 GiB / 39.5 GiB (GPU instance 3g.40gb), MIG-5ff0d535-9a82-5af6-80df-768b9d3ac092"
    );
    assert_eq!(
        lines[2],
        "  MIG 1g.10gb  device 1, GI 11 CI 0: free 9.7 GiB / 9.8 GiB (GPU instance 1g.10gb+me), MIG-8443519f-66f7-5962-8955-60dba0866f3a"
    );
    assert!(
        lines[3].starts_with("  MIG 1g.10gb  device 2, GI 13 CI 0: "),
        "{out}"
    );
    assert!(lines[4].starts_with("RAM: "), "{out}");

    let v = json(&bed.run(&["--json"]));
    let mig = &v["devices"][0]["mig"];
    assert_eq!(mig["current"], "enabled");
    assert_eq!(mig["pending"], "enabled");
    let i = &mig["instances"][1];
    assert_eq!(i["profile"], "1g.10gb");
    assert_eq!(i["gpu_instance_profile"], "1g.10gb+me");
    assert_eq!(i["gpu_instance_id"], 11);
    assert_eq!(i["memory"]["total_bytes"].as_u64(), Some(9984 * MIB));
    assert_eq!(i["parent_uuid"], "GPU-0d0831da-0c98-2717-6446-8acd91d39b65");
    assert!(v["devices"][0].get("cuda").is_none() && v.get("cuda").is_none());
}

#[test]
fn pending_and_empty_mig_are_stated() {
    let fake = FakeNvml::new().device(FakeNvml::h100_mig_parent());
    let o = Bed::with_nvml(&fake).run(&[]);
    assert!(o.status.success());
    assert!(
        stdout(&o)
            .lines()
            .next()
            .unwrap()
            .ends_with(", MIG on, no MIG device configured"),
        "{}",
        stdout(&o)
    );
    assert_eq!(stderr(&o), "", "no warning per empty slot");
    let fake = FakeNvml::new().device(hmn_testbed::FakeDevice::h100(0).mig(false, true));
    let o = Bed::with_nvml(&fake).run(&[]);
    assert!(
        stdout(&o)
            .lines()
            .next()
            .unwrap()
            .ends_with(", MIG off; on after the next GPU reset (hmn never resets a GPU)"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn ps_attributes_processes_to_their_instance() {
    let bed = mig_bed();
    let o = bed.run(&["ps", "--util"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let header: Vec<&str> = out.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "PID", "USER", "NAME", "DEVICE", "KIND", "VRAM", "MIG", "UTIL"
        ]
    );
    let row = out.lines().nth(1).unwrap();
    assert!(row.contains("1c.3g.40gb GI 1 CI 0"), "{out}");
    assert!(
        row.trim_end().ends_with('?'),
        "no utilization under MIG, never 0%: {out}"
    );
    let v = json(&bed.run(&["ps", "--json", "--device", "MIG-5ff0"]));
    let rows = v["processes"].as_array().unwrap();
    assert_eq!(rows.len(), 3);
    assert!(rows.iter().all(|r| r["mig_index"] == 0
        && r["gpu_instance_id"] == 1
        && r["mig_uuid"] == "MIG-5ff0d535-9a82-5af6-80df-768b9d3ac092"
        && r["utilization"].is_null()));
    let v = json(&bed.run(&["ps", "--json", "--device", "MIG-8443"]));
    assert_eq!(
        v["processes"],
        Value::Array(vec![]),
        "nothing runs in GI 11"
    );
}

#[test]
fn fits_judges_a_mig_device_against_its_own_memory() {
    let bed = Bed::with_nvml(&FakeNvml::h100_mig_two_1g10gb());
    // MIG device 0 (GI 11): 9984 MiB, 4210 used, 5774 MiB free.
    let o = bed.run(&["fits", "5GiB", "--device", "MIG-8443519f", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json(&o);
    let d = &v["devices"][0];
    assert_eq!(d["index"], 0);
    assert_eq!(d["mig_uuid"], "MIG-8443519f-66f7-5962-8955-60dba0866f3a");
    assert_eq!(d["free_bytes"].as_u64(), Some((9984 - 4210) * MIB));
    assert_eq!(d["name"], "NVIDIA H100 80GB HBM3 MIG 1g.10gb");
    let o = bed.run(&["fits", "6GiB", "--device", "MIG-8443519f"]);
    assert_eq!(o.status.code(), Some(1), "5.6 GiB free: {}", stderr(&o));
    // The other instance has 9.7 GiB free.
    let o = bed.run(&["fits", "6GiB", "--device", "MIG-ee69"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // The GPU as a whole: judged, with a note naming an instance to judge against.
    let o = bed.run(&["fits", "6GiB", "--device", "0"]);
    assert!(
        stderr(&o).contains(
            "MIG is enabled: a CUDA process runs inside one MIG device, not the whole GPU; judge against one with --device MIG-ee6996fb-86fb-5405-83f0-b20887da1bb3 (MIG 1g.10gb, 9.7 GiB free)"
        ),
        "{}",
        stderr(&o)
    );
    // --device all judges the MIG devices, not the card.
    let v = json(&bed.run(&["fits", "6GiB", "--device", "all", "--json"]));
    let uuids: Vec<&str> = v["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["mig_uuid"].as_str().unwrap())
        .collect();
    assert_eq!(uuids.len(), 2);
    assert_eq!(v["fit"], "fits");
    let o = bed.run(&["fits", "6GiB", "--device", "MIG-0000"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o)
            .starts_with("hmn: fits failed to query device MIG-0000: no device matches MIG-0000"),
        "{}",
        stderr(&o)
    );
}

/// `--device all` leaves out a GPU in MIG mode with no MIG device (nothing can run on it) and
/// says so; the other GPU is judged alone.
#[test]
fn fits_over_every_device_leaves_out_a_mig_gpu_without_mig_devices() {
    let fake = FakeNvml::new()
        .device(FakeNvml::h100_mig_parent())
        .device(hmn_testbed::FakeDevice::h100(1));
    let bed = Bed::with_nvml(&fake);
    let o = bed.run(&["fits", "6GiB", "--device", "all", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json(&o);
    let indices: Vec<u64> = v["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["index"].as_u64().unwrap())
        .collect();
    assert_eq!(indices, [1]);
    assert!(
        v["warnings"].to_string().contains(
            "MIG is enabled with no MIG device configured: nothing can run on it; not judged"
        ),
        "{}",
        v["warnings"]
    );
    let o = bed.run(&["fits", "6GiB", "--device", "all"]);
    assert!(
        stderr(&o).contains("no MIG device configured"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn serve_labels_join_dcgm_exporter() {
    let bed = mig_bed();
    let body = crate::serve::scrape_lint_clean(&bed);
    let parent = "UUID=\"GPU-0d0831da-0c98-2717-6446-8acd91d39b65\"";
    for want in [
        format!(
            "hmn_mig_memory_used_bytes{{gpu=\"0\",gpu_uuid=\"GPU-0d0831da-0c98-2717-6446-8acd91d39b65\",{parent},GPU_I_ID=\"1\",GPU_I_PROFILE=\"3g.40gb\"}} {}",
            12627 * MIB
        ),
        format!("{parent},GPU_I_ID=\"11\",GPU_I_PROFILE=\"1g.10gb+me\"}} {}", 15 * MIB),
        "hmn_device_mig_enabled{gpu=\"0\",gpu_uuid=\"GPU-0d0831da-0c98-2717-6446-8acd91d39b65\",mode=\"current\"} 1".to_string(),
        format!(
            "hmn_process_gpu_memory_bytes{{gpu=\"0\",gpu_uuid=\"GPU-0d0831da-0c98-2717-6446-8acd91d39b65\",pid=\"23804\",comm=\"loadgen\",{parent},GPU_I_ID=\"1\",GPU_I_PROFILE=\"3g.40gb\",mig_uuid=\"MIG-5ff0d535-9a82-5af6-80df-768b9d3ac092\"}} {}",
            4188 * MIB
        ),
    ] {
        assert!(body.contains(&want), "missing {want}\n{body}");
    }
    assert!(body.contains("hmn_mig_device_info{"), "{body}");
    assert!(
        !body.contains("hmn_process_gpu_utilization_ratio{"),
        "no utilization series under MIG, never 0: {body}"
    );
}

#[test]
fn run_names_the_mig_device_and_why_accounting_is_unavailable() {
    let mut fake = FakeNvml::h100_mig_two_1g10gb()
        .process(FakeProcess::compute_child_of_caller(0, 1 << 30).mig(13, 0));
    fake.devices[0] = fake.devices[0].clone().accounting();
    let bed = Bed::with_nvml(&fake).real_proc();
    let o = bed.run(&["run", "--json", "--interval", "50ms", "--", "sleep", "0.4"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json(&o);
    let d = &v["devices"][0];
    assert_eq!(
        d["mig_devices"][0],
        "MIG-ee6996fb-86fb-5405-83f0-b20887da1bb3"
    );
    assert_eq!(d["vram_accounting"], "unavailable");
    assert!(
        d["vram_accounting_detail"]
            .as_str()
            .unwrap()
            .contains("MIG-enabled"),
        "{d}"
    );
    assert!(
        stderr(&o).contains("GPU 0: in MIG device MIG-ee6996fb-86fb-5405-83f0-b20887da1bb3"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn watch_follows_a_mig_device_and_says_what_mig_hides() {
    let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    let fake = FakeNvml::h100_mig_two_1g10gb()
        .process(FakeProcess::compute(0, sleeper.id(), 2 << 30).mig(13, 0));
    let bed = Bed::with_nvml(&fake).real_proc();
    let o = bed.run(&[
        "watch",
        "--device",
        "MIG-ee69",
        "--interval",
        "100ms",
        "--duration",
        "150ms",
    ]);
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let row = crate::util::before_column(&out, 1, "WORKLOAD");
    assert!(row.contains("sleep") && row.contains("2 GiB"), "{out}");
    assert!(row.ends_with('-'), "no SM figure under MIG: {out}");
    let err = stderr(&o);
    assert!(err.contains("(top 5 on MIG-ee69)"), "{err}");
    assert!(
        err.contains("GPU 0 is in MIG mode: NVML gives no per-process utilization"),
        "{err}"
    );
}

/// `watch --device` on a GPU that is not in MIG mode says nothing of another that is (QA: the
/// MIG note named GPU 0 while GPU 1 was watched).
#[test]
fn watch_on_another_gpu_gives_no_mig_note() {
    let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    let fake = FakeNvml::h100_mig_two_1g10gb()
        .device(hmn_testbed::FakeDevice::h100(1))
        .process(FakeProcess::compute(0, sleeper.id(), 1 << 30).mig(13, 0))
        .process(FakeProcess::compute(1, sleeper.id(), 2 << 30));
    let bed = Bed::with_nvml(&fake).real_proc();
    let watch = |device: &str| {
        let o = bed.run(&[
            "watch",
            "--device",
            device,
            "--interval",
            "100ms",
            "--duration",
            "150ms",
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        stderr(&o)
    };
    let err = watch("1");
    assert!(!err.contains("MIG mode"), "{err}");
    let err = watch("0");
    assert!(err.contains("GPU 0 is in MIG mode"), "{err}");
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
}

/// The second instance vanishes after its handle answered `n` calls: every command still
/// answers (exit 0), at most one warning names it, nothing panics.
#[test]
fn an_instance_destroyed_at_any_call_never_breaks_a_command() {
    for n in 0..=12 {
        let mut fake = FakeNvml::h100_mig_two_1g10gb();
        fake.gpu_instances[1].compute_instances[0] = fake.gpu_instances[1].compute_instances[0]
            .clone()
            .gone_after_calls(n);
        let bed = Bed::with_nvml(&fake);
        for args in [&[][..], &["ps"], &["--json"]] {
            let o = bed.run(args);
            assert_eq!(o.status.code(), Some(0), "n = {n} {args:?}: {}", stderr(&o));
            let err = stderr(&o);
            assert!(!err.contains("panicked"), "{err}");
            assert!(
                err.matches("MIG device 1").count() <= 1,
                "n = {n} {args:?}: {err}"
            );
        }
    }
}

#[test]
fn a_driver_too_old_for_mig_says_so_and_still_answers() {
    let fake = FakeNvml::h100_mig_two_1g10gb().driver(Driver::PreMig);
    let bed = Bed::with_nvml(&fake);
    let o = bed.run(&["--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json(&o);
    let u: Vec<&Value> = v["devices"][0]["unknown"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|u| u["field"] == "mig")
        .collect();
    assert!(
        u[0]["detail"].as_str().unwrap().starts_with(
            "MIG: not supported by this driver's NVML (nvmlDeviceGetMigMode: symbol missing"
        ),
        "{u:?}"
    );
    let o = bed.run(&["ps", "--json"]);
    assert!(o.status.success());
    assert_eq!(json(&o)["processes"][0]["pid"], 10385);
    // A MIG selector on a driver that cannot list MIG devices names nothing: exit 2, one line.
    let o = bed.run(&["ps", "--device", "MIG-8443"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(stderr(&o).lines().count(), 1, "{}", stderr(&o));
}

#[test]
fn record_and_top_name_each_rows_mig_device() {
    let bed = mig_bed();
    let o = bed.run(&["record", "--interval", "100ms", "--duration", "150ms", "-"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let line: Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    let rows = line["processes"].as_array().unwrap();
    assert_eq!(rows.len(), 3, "{line}");
    // Each row names its MIG device and instance (`1c.3g.40gb GI 1 CI 0` on the screen): the
    // device index and ids on the row, the profile on the GPU's MIG device.
    let mig0 = &line["devices"][0]["mig"]["instances"][0];
    assert_eq!(
        (&mig0["index"], &mig0["profile"]),
        (&0.into(), &"1c.3g.40gb".into())
    );
    for r in rows {
        assert_eq!(r["mig_index"], 0, "{r}");
        assert_eq!(
            (&r["gpu_instance_id"], &r["compute_instance_id"]),
            (&1.into(), &0.into())
        );
        assert!(
            r.get("engines").is_none() && r.get("utilization").is_none(),
            "no utilization under MIG, never 0%: {r}"
        );
        assert_eq!(r["unknown"][0]["field"], "utilization", "{r}");
    }
}
