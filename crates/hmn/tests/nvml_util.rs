//! NVML per-process utilization and accounting records outside MIG: `watch`'s SM column and
//! closing lines (and their JSON), `serve`'s utilization series.

use std::process::Command;

use hmn_testbed::{FakeDevice, FakeNvml, FakeProc, FakeProcess, FakeSample};
use serde_json::Value;

use crate::util::{Bed, stderr, stdout};

#[test]
fn watch_shows_sm_and_the_drivers_records() {
    let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    let pid = sleeper.id();
    let fake = FakeNvml::new()
        .device(FakeDevice::h100(0).accounting())
        .process(FakeProcess::compute(0, pid, 3 << 30).accounting_util(64, 21))
        .sample(FakeSample::new(0, pid, [37, 12, 0, 0]));
    let bed = Bed::with_nvml(&fake).real_proc();
    let o = bed.run(&[
        "watch",
        "--interval",
        "100ms",
        "--duration",
        "250ms",
        &pid.to_string(),
    ]);
    let j = bed.run(&[
        "watch",
        "--json",
        "--interval",
        "100ms",
        "--duration",
        "250ms",
        &pid.to_string(),
    ]);
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let row = crate::util::before_column(&out, 1, "WORKLOAD");
    assert!(row.ends_with("37%"), "{out}");
    let err = stderr(&o);
    assert!(
        err.contains(&format!(
            "driver accounting on GPU 0: pid {pid} peak 3 GiB, GPU 64% and memory 21% busy over its life"
        )),
        "{err}"
    );
    let records: Vec<Value> = stdout(&j)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let sample = records.iter().find(|r| r["kind"] == "sample").unwrap();
    assert_eq!(sample["utilization_by_device"]["0"]["sm_percent"], 37);
    let summary = records.last().unwrap();
    assert_eq!(summary["accounting"][0]["enabled"], true);
    let rec = &summary["accounting"][0]["processes"][0];
    assert_eq!(rec["gpu_utilization_percent"], 64);
    assert_eq!(rec["max_memory_bytes"].as_u64(), Some(3 << 30));
}

#[test]
fn serve_exports_per_process_utilization() {
    let fake = FakeNvml::h100s(1)
        .process(FakeProcess::compute(0, 4242, 1 << 30))
        .sample(FakeSample::new(0, 4242, [37, 12, 5, 0]));
    let bed = Bed::with_nvml(&fake);
    bed.fixture()
        .process(&FakeProc::new(4242, "python3"))
        .unwrap();
    let body = crate::serve::scrape_lint_clean(&bed);
    let labels = "gpu=\"0\",gpu_uuid=\"GPU-3a1f7c2e-5b9d-4e61-8f0a-9c2d4b7e0000\",pid=\"4242\",comm=\"python3\"";
    for (engine, value) in [("sm", "0.37"), ("memory", "0.12"), ("encoder", "0.05")] {
        let want =
            format!("hmn_process_gpu_utilization_ratio{{{labels},engine=\"{engine}\"}} {value}");
        assert!(body.contains(&want), "missing {want}\n{body}");
    }
    assert!(!body.contains("GPU_I_ID"), "no MIG labels outside MIG");
}

#[test]
fn record_carries_nvml_sm_encoder_and_decoder_use() {
    let fake = FakeNvml::new()
        .device(FakeDevice::h100(0))
        .process(FakeProcess::compute(0, 4242, 3 << 30))
        .sample(FakeSample::new(0, 4242, [37, 12, 5, 0]));
    let bed = Bed::with_nvml(&fake);
    bed.fixture()
        .process(&FakeProc::new(4242, "python3"))
        .unwrap();
    let o = bed.run(&["record", "--interval", "100ms", "--duration", "150ms", "-"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let line: Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    let row = &line["processes"][0];
    assert_eq!(row["pid"], 4242, "{line}");
    let u = &row["utilization"];
    assert_eq!(
        (
            &u["sm_percent"],
            &u["encoder_percent"],
            &u["decoder_percent"]
        ),
        (&37.into(), &5.into(), &0.into()),
        "{row}"
    );
}
