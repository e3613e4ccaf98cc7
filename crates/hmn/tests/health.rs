//! Running a GPU box (issue 24) end to end: memory health in the device view and `serve`,
//! memory no process accounts for in `ps` and `serve`, workload names from the kubelet's log
//! layout in `ps` and `serve`, and `watch`'s growth flags (VRAM and RAM) and
//! `--exit-on-growth`.

use hmn_testbed::{FakeDevice, FakeEvent, FakeHealth, FakeNvml, FakeProc, FakeProcess};
use serde_json::Value;

use crate::util::{Bed, json, stderr, stdout};

const GIB: u64 = 1 << 30;
const ID: &str = "4e9a6f0b6d7c1f1a0e8c8f5a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c";
const UID: &str = "8a1c5bc0-0cf5-4b4a-9f8b-0c2f6e7a5d11";

/// GPU 0 healthy; GPU 1 with two uncorrectable errors and a pending remap.
fn sick() -> FakeNvml {
    FakeNvml::new()
        .device(FakeDevice::h100(0).healthy_ecc())
        .device(FakeDevice::h100(1).health(FakeHealth {
            ecc_mode: Some(true),
            ecc_counts: [vec![5], vec![2], vec![9], vec![2]],
            remapped_rows: Some([1, 2, 1, 0]),
            ..FakeHealth::default()
        }))
}

#[test]
fn the_device_view_shows_health_in_json_always_and_in_text_when_not_clean() {
    let bed = Bed::with_nvml(&sick());
    let o = bed.run(&[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("GPU 0 "), "{text}");
    assert!(
        lines[1].starts_with("GPU 1 "),
        "clean GPU 0 has no health line: {text}"
    );
    assert_eq!(
        lines[2],
        "  memory health: fail: 2 uncorrectable ECC errors since the driver loaded; drain the \
         GPU; if it recurs after a reset, have the GPU serviced or replaced"
    );
    assert!(
        text.contains("  memory health: warn: a row remapping is pending; reset the GPU"),
        "{text}"
    );
    let v = json(&bed.run(&["--json"]));
    let h0 = &v["devices"][0]["health"];
    assert_eq!(h0["ecc"]["current"], true);
    assert_eq!(
        h0["ecc_errors"]["uncorrected_volatile"], 0,
        "a zero is a zero"
    );
    let h1 = &v["devices"][1]["health"];
    assert_eq!(h1["remapped_rows"]["pending"], true);
    assert_eq!(h1["ecc_errors"]["uncorrected_volatile"], 2);
    // doctor: the uncorrectable errors are a failure line, with the remedy.
    let d = bed.run(&["doctor"]);
    assert_eq!(d.status.code(), Some(2), "{}", stdout(&d));
    let report = stdout(&d) + &stderr(&d);
    assert!(
        report.contains("2 uncorrectable ECC errors since the driver loaded"),
        "{report}"
    );
    // Without ECC support: null with the reason, never 0.
    let bare = Bed::with_nvml(&FakeNvml::h100s(1));
    let v = json(&bare.run(&["--json"]));
    let h = &v["devices"][0]["health"];
    assert!(
        h["ecc"].is_null() && h["ecc_errors"]["corrected_volatile"].is_null(),
        "{h}"
    );
    assert!(
        h["unknown"]
            .as_array()
            .unwrap()
            .iter()
            .any(|u| u["field"] == "health.ecc"),
        "{h}"
    );
}

#[test]
fn ps_names_unattributed_memory_and_pods_by_name() {
    let fake = FakeNvml::new()
        .device(FakeDevice::h100(0).memory_used(&[20 * GIB]))
        .process(FakeProcess::compute(0, 48213, 8 * GIB));
    let bed = Bed::with_nvml(&fake);
    let fx = bed.fixture();
    fx.process(&FakeProc::new(48213, "vllm")).unwrap();
    let uid_ = UID.replace('-', "_");
    fx.file(
        "48213/cgroup",
        &format!(
            "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{uid_}.slice/cri-containerd-{ID}.scope\n"
        ),
    )
    .unwrap();
    bed.kubelet_container("ml", "llama-0", UID, "server", ID);
    let o = bed.run(&["ps"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("ml/llama-0/server"), "{}", stdout(&o));
    let err = stderr(&o);
    assert!(
        err.contains("hmn: ps: unattributed (device used less the processes listed): GPU 0 12 GiB"),
        "{err}"
    );
    let v = json(&bed.run(&["ps", "--json"]));
    let w = &v["processes"][0]["workload"];
    assert_eq!(
        (&w["namespace"], &w["pod_name"], &w["container_name"]),
        (
            &Value::from("ml"),
            &Value::from("llama-0"),
            &Value::from("server")
        )
    );
    assert_eq!(w["names_from"], "kubelet_logs");
    let u = &v["unattributed"][0];
    assert_eq!(u["bytes"].as_u64(), Some(12 * GIB));
    assert_eq!(u["bound"], "exact");
    assert_eq!(u["processes_bytes"].as_u64(), Some(8 * GIB));
    // serve: dcgm-exporter's label names on the process and workload series, the health and
    // unattributed gauges.
    let body = crate::serve::scrape_lint_clean(&bed);
    assert!(
        body.lines()
            .any(|l| l.starts_with("hmn_process_gpu_memory_bytes{")
                && l.contains("namespace=\"ml\",pod=\"llama-0\",container=\"server\"")),
        "{body}"
    );
    assert!(
        body.lines()
            .any(|l| l.starts_with("hmn_cgroup_gpu_memory_bytes{")
                && l.contains("namespace=\"ml\",pod=\"llama-0\"")),
        "{body}"
    );
    assert!(
        body.contains(&format!(
            "hmn_device_memory_unattributed_bytes{{gpu=\"0\",gpu_uuid=\"GPU-3a1f7c2e-5b9d-4e61-8f0a-9c2d4b7e0000\"}} {}",
            12 * GIB
        )),
        "{body}"
    );
}

#[test]
fn serve_exports_memory_health() {
    let bed = Bed::with_nvml(&sick());
    let body = crate::serve::scrape_lint_clean(&bed);
    let l1 = "gpu=\"1\",gpu_uuid=\"GPU-3a1f7c2e-5b9d-4e61-8f0a-9c2d4b7e0001\"";
    for want in [
        format!("hmn_device_ecc_errors_total{{{l1},error=\"uncorrected\",scope=\"volatile\"}} 2"),
        format!("hmn_device_remapped_rows_total{{{l1},cause=\"uncorrectable\"}} 2"),
        format!("hmn_device_row_remap_pending{{{l1}}} 1"),
        format!("hmn_device_ecc_enabled{{{l1},mode=\"current\"}} 1"),
    ] {
        assert!(body.contains(&want), "missing {want}\n{body}");
    }
}

/// A device whose XID events are counted says so even before one arrives (1, and no
/// `hmn_device_xid_events_total` series: none arrived); one whose events cannot be counted
/// says 0 — so an alert on the counter can tell "none" from "not counted" (and while the counter
/// starts, neither is claimed).
#[test]
fn serve_says_which_devices_xid_events_are_counted() {
    let fake = FakeNvml::new()
        .device(FakeDevice::h100(0).healthy_ecc())
        .device(FakeDevice::h100(1));
    // The gauge appears once the XID counter has its event set (none while it starts).
    let body = crate::serve::scrape_lint_clean_once(&Bed::with_nvml(&fake), |b| {
        b.contains("hmn_device_xid_counting{")
    });
    let uuid = |i: u32| format!("GPU-3a1f7c2e-5b9d-4e61-8f0a-9c2d4b7e000{i}");
    for (i, v) in [(0, 1), (1, 0)] {
        let want = format!(
            "hmn_device_xid_counting{{gpu=\"{i}\",gpu_uuid=\"{}\"}} {v}",
            uuid(i)
        );
        assert!(body.contains(&want), "missing {want}\n{body}");
    }
    assert!(!body.contains("hmn_device_xid_events_total{"), "{body}");
}

/// `hmn watch` of `pid` with the growth rule shortened for a test (a 900 ms window, 64 MiB),
/// every 20 ms for 1.5 s, and `extra`.
fn growth_watch<'a>(extra: &[&'a str], pid: &'a str) -> Vec<&'a str> {
    let mut args = vec![
        "watch",
        "--interval",
        "20ms",
        "--duration",
        "1500ms",
        "--growth-window",
        "900ms",
        "--growth-min",
        "64MiB",
    ];
    args.extend_from_slice(extra);
    args.push(pid);
    args
}

/// `watch PID` of a process whose VRAM follows `used` (one value per NVML list call).
fn watch_growth(used: &[u64], extra: &[&str]) -> std::process::Output {
    let mut sleeper = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let pid = sleeper.id();
    let fake = FakeNvml::h100s(1).process(FakeProcess::compute(0, pid, GIB).used_sequence(used));
    let bed = Bed::with_nvml(&fake).real_proc();
    let p = pid.to_string();
    let args = growth_watch(extra, &p);
    let o = bed.run(&args);
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
    o
}

#[test]
fn watch_flags_a_steady_rise_and_exits_on_it_when_asked() {
    let steady: Vec<u64> = (0..400u64).map(|i| GIB + i * (16 << 20)).collect();
    let o = watch_growth(&steady, &["--json"]);
    let err = stderr(&o);
    assert!(err.contains("VRAM on GPU 0 grows steadily: ↑ "), "{err}");
    let flagged = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["kind"] == "sample")
        .filter_map(|r| r["growth"]["vram_by_device"]["0"]["growth"]["bytes_per_second"].as_f64())
        .next_back()
        .expect("the JSON carries the slope");
    assert!(flagged > 0.0);
    let o = watch_growth(&steady, &["--exit-on-growth", "1MiB/s"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("watch: --exit-on-growth: pid "),
        "{}",
        stderr(&o)
    );
}

#[test]
fn watch_does_not_flag_a_model_load_that_jumps_once() {
    let mut load = vec![GIB; 10];
    load.extend(std::iter::repeat_n(20 * GIB, 390));
    let o = watch_growth(&load, &["--exit-on-growth", "1MiB/s"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!stderr(&o).contains("grows steadily"), "{}", stderr(&o));
}

/// `watch --json PID` of a fixture process whose RSS is `pages(n)` pages from its `n`th sample
/// on: the test rewrites its `stat` as each sample arrives (as the spill test fills its card),
/// so the figure follows the samples as the fake NVML's VRAM does, not the clock. Returns the
/// output and the records.
fn watch_ram_growth(
    pages: impl Fn(u64) -> u64,
    extra: &[&str],
) -> (std::process::Output, Vec<Value>) {
    use std::io::BufRead;
    const PID: u32 = 4242;
    let bed = Bed::new();
    let fx = bed.fixture();
    fx.process(&FakeProc::new(PID, "python3")).unwrap();
    fx.stat(PID, "python3", 1, pages(0)).unwrap();
    let p = PID.to_string();
    let mut args = growth_watch(extra, &p);
    args.insert(1, "--json");
    let mut watch = bed
        .cmd(&args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut records = Vec::new();
    let mut samples = 0;
    let lines = std::io::BufReader::new(watch.stdout.take().unwrap()).lines();
    for line in lines {
        let v: Value = serde_json::from_str(&line.unwrap()).unwrap();
        if v["kind"] == "sample" {
            samples += 1;
            fx.stat(PID, "python3", 1, pages(samples)).unwrap();
        }
        records.push(v);
    }
    (watch.wait_with_output().unwrap(), records)
}

#[test]
fn watch_flags_a_steady_rise_of_ram_and_exits_on_it_when_asked() {
    // 4096 pages a sample: 16 MiB at 4 KiB pages, as the VRAM test's rise.
    let steady = |n: u64| (GIB >> 12) + n * 4096;
    let (o, records) = watch_ram_growth(steady, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("pid 4242 (python3) RAM grows steadily: ↑ "),
        "{err}"
    );
    let flagged = records
        .iter()
        .filter(|r| r["kind"] == "sample")
        .filter_map(|r| r["growth"]["ram"]["growth"]["bytes_per_second"].as_f64())
        .next_back()
        .expect("the JSON carries the slope");
    assert!(flagged > 0.0);
    let (o, _) = watch_ram_growth(steady, &["--exit-on-growth", "1MiB/s"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("watch: --exit-on-growth: pid 4242 RAM ↑ "),
        "{}",
        stderr(&o)
    );
}

#[test]
fn watch_does_not_flag_ram_that_jumps_once() {
    // A model loaded into RAM at the 10th sample, then flat.
    let load = |n: u64| if n < 10 { GIB >> 12 } else { (20 * GIB) >> 12 };
    let (o, records) = watch_ram_growth(load, &["--exit-on-growth", "1MiB/s"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!stderr(&o).contains("grows steadily"), "{}", stderr(&o));
    let samples: Vec<&Value> = records.iter().filter(|r| r["kind"] == "sample").collect();
    assert!(
        samples.last().unwrap()["rss_delta_bytes"].as_i64().unwrap() > 0,
        "the jump was seen: {samples:?}"
    );
    assert!(
        samples.iter().all(|r| r["growth"].get("ram").is_none()),
        "{samples:?}"
    );
}

/// `watch PID --json` of a process holding 8 GiB on GPU 0 (used: 20 GiB, then 22 GiB) while
/// an XID 48 arrives on GPU 0; GPU 1 supports no events.
fn watch_devices(extra: &[&str]) -> std::process::Output {
    let mut sleeper = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let pid = sleeper.id();
    let mut used = vec![20 * GIB; 8];
    used.extend(std::iter::repeat_n(22 * GIB, 400));
    let mut xid = FakeEvent::xid(0, 48);
    xid.after_waits = 1;
    let fake = FakeNvml::new()
        .device(FakeDevice::h100(0).healthy_ecc().memory_used(&used))
        .device(FakeDevice::h100(1).memory_used(&[GIB]))
        .process(FakeProcess::compute(0, pid, 8 * GIB))
        .event(xid);
    let bed = Bed::with_nvml(&fake).real_proc();
    let p = pid.to_string();
    let mut args = vec!["watch", "--interval", "50ms", "--duration", "1500ms"];
    args.extend_from_slice(extra);
    args.push(&p);
    let o = bed.run(&args);
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
    o
}

#[test]
fn watch_follows_unattributed_memory_and_counts_xid_events() {
    let o = watch_devices(&["--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let records: Vec<Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let gpu0: Vec<&Value> = records
        .iter()
        .filter(|r| r["kind"] == "device" && r["index"] == 0)
        .collect();
    let first = &gpu0[0]["unattributed"];
    assert_eq!(first["bytes"].as_u64(), Some(12 * GIB), "{first}");
    assert_eq!(first["bound"], "exact");
    assert_eq!(gpu0[0]["tree_vram_bytes"].as_u64(), Some(8 * GIB));
    let last = gpu0.last().unwrap();
    assert_eq!(last["unattributed"]["bytes"].as_u64(), Some(14 * GIB));
    assert_eq!(last["xid_events"], 1, "{last}");
    let gpu1 = records
        .iter()
        .find(|r| r["kind"] == "device" && r["index"] == 1)
        .unwrap();
    assert!(gpu1["xid_events"].is_null(), "unknown, never 0: {gpu1}");
    assert!(gpu1["xid_unknown_reason"].is_string(), "{gpu1}");
    let event = records
        .iter()
        .find(|r| r["kind"] == "xid")
        .expect("an xid record");
    assert_eq!(
        (
            &event["device_index"],
            &event["xid"],
            &event["count"],
            &event["class"]
        ),
        (
            &Value::from(0),
            &Value::from(48),
            &Value::from(1),
            &Value::from("memory")
        )
    );
    let summary = records.last().unwrap();
    assert_eq!(summary["kind"], "summary");
    assert_eq!(
        summary["unattributed_peak_bytes"]["0"].as_u64(),
        Some(14 * GIB)
    );
    assert_eq!(summary["xid"]["counts"]["0"]["48"], 1, "{summary}");
    // Every event the summary counts had its record (one after the last sample too).
    let recorded: u64 = records
        .iter()
        .filter(|r| r["kind"] == "xid")
        .map(|r| r["count"].as_u64().unwrap())
        .sum();
    assert_eq!(recorded, 1);
    let err = stderr(&o);
    for want in [
        "unattributed (device used less the processes listed): GPU 0 12 GiB",
        "unattributed on GPU 0: 12 GiB → 14 GiB",
        "GPU 0: XID 48 (double bit ECC error)",
    ] {
        assert!(err.contains(want), "missing {want:?}\n{err}");
    }
    // In text, the closing report ends with the figures.
    let o = watch_devices(&[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    for want in [
        "hmn: watch: 1 process, every 50 ms, for 1.5 s;",
        "  unattributed at the end: GPU 0 14 GiB (the driver's own allocations); peak 14 GiB\n",
        "  XID events while watching on GPU 0: 1 — XID 48 (double bit ECC error) ×1\n",
        "  XID events on GPU 1: not counted (",
    ] {
        assert!(err.contains(want), "missing {want:?}\n{err}");
    }
    assert_eq!(
        err.matches("unattributed on GPU 0:").count(),
        1,
        "said once when it moved, not every interval: {err}"
    );
}
