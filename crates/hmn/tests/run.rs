//! `hmn run` and `hmn watch` against real commands: peaks checked against the kernel's own
//! figures, exit codes, signals, timeline and plot files; VRAM through the fake NVML.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use hmn_testbed::{FakeDevice, FakeNvml, FakeProcess, Used, python};
use serde_json::Value;

use crate::util::{Bed, json, stderr};

const MIB: f64 = 1_048_576.0;

fn within(a: f64, b: f64, tolerance: f64) -> bool {
    (a - b).abs() <= tolerance * b
}

/// A Python tree: the parent allocates 300 MB, forks a child that allocates 200 MB; once both
/// hold their memory each writes its own PSS (the kernel's proportional figure, shared pages
/// divided) to a file, then both hold for a while.
fn tree_script(out: &Path) -> String {
    format!(
        r#"
import os, time
def pss():
    for line in open("/proc/self/smaps_rollup"):
        if line.startswith("Pss:"):
            return int(line.split()[1]) * 1024
x = bytearray(300 << 20)
r, w = os.pipe()
if os.fork() == 0:
    y = bytearray(200 << 20)
    os.write(w, b"x")
    time.sleep(0.3)
    open("{out}/child", "w").write(str(pss()))
    time.sleep(2.5)
    os._exit(0)
os.read(r, 1)
time.sleep(0.3)
open("{out}/parent", "w").write(str(pss()))
time.sleep(2.5)
os.wait()
"#,
        out = out.display()
    )
}

fn kernel_pss_sum(dir: &Path) -> f64 {
    ["parent", "child"]
        .iter()
        .map(|f| {
            std::fs::read_to_string(dir.join(f))
                .unwrap()
                .trim()
                .parse::<f64>()
                .unwrap()
        })
        .sum()
}

#[test]
fn peak_of_a_forked_tree_agrees_with_the_kernel() {
    let bed = Bed::new().real_proc();
    let script = tree_script(bed.dir.path());
    let o = bed.run(&["run", "--json", "--", python(), "-c", &script]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v = json(&o);
    let kernel = kernel_pss_sum(bed.dir.path());
    let peak = v["peak_ram"]["bytes"].as_f64().unwrap();
    assert!(peak >= 500.0 * MIB, "{v}");
    let pss = v["peak_pss_sum_bytes"].as_f64().unwrap();
    assert!(
        within(pss, kernel, 0.02),
        "sampled PSS sum {pss} vs the processes' own {kernel}"
    );
    match v["peak_ram"]["method"].as_str().unwrap() {
        "cgroup" => assert!(
            within(peak, kernel, 0.02),
            "cgroup peak {peak} vs kernel PSS sum {kernel}"
        ),
        "sampled" => assert!(
            peak >= kernel * 0.98,
            "an RSS sum never undercounts: {peak} vs {kernel}"
        ),
        m => panic!("unknown method {m}"),
    }
    let names: Vec<&str> = v["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert!(names.len() >= 2, "{names:?}");
    let err = String::from_utf8(o.stderr).unwrap();
    assert!(err.starts_with("hmn run: "), "{err}");
    assert!(err.contains("peak RAM"), "{err}");
}

#[test]
fn peak_without_a_cgroup_is_sampled_and_says_so() {
    let bed = Bed::new().real_proc();
    let script = tree_script(bed.dir.path());
    let o = bed.run(&[
        "run",
        "--json",
        "--no-cgroup",
        "--",
        python(),
        "-c",
        &script,
    ]);
    let v = json(&o);
    assert_eq!(v["peak_ram"]["method"], "sampled");
    assert_eq!(v["cgroup_peak_bytes"], Value::Null);
    let kernel = kernel_pss_sum(bed.dir.path());
    assert!(v["peak_ram"]["bytes"].as_f64().unwrap() >= 500.0 * MIB);
    assert!(
        within(v["peak_pss_sum_bytes"].as_f64().unwrap(), kernel, 0.02),
        "{v}"
    );
}

#[test]
fn single_process_peak_matches_gnu_time() {
    if !Path::new("/usr/bin/time").exists() {
        panic!("GNU time is missing: .ci/run installs the `time` package");
    }
    let bed = Bed::new().real_proc();
    let script = "x = bytearray(250 << 20)\nimport time; time.sleep(0.3)";
    let t = Command::new("/usr/bin/time")
        .args(["-v", python(), "-c", script])
        .output()
        .unwrap();
    let text = String::from_utf8(t.stderr).unwrap();
    let kib: f64 = text
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("Maximum resident set size (kbytes): ")
        })
        .unwrap()
        .parse()
        .unwrap();
    let o = bed.run(&["run", "--json", "--no-cgroup", "--", python(), "-c", script]);
    let ours = json(&o)["largest_process_peak_rss_bytes"].as_f64().unwrap();
    assert!(
        within(ours, kib * 1024.0, 0.01),
        "hmn {ours} vs time -v {}",
        kib * 1024.0
    );
}

/// A command that exits at once is measured, not hmn's own first step (`hmn __exec`: hmn's image,
/// several MiB, named `hmn`): sampling starts once the step has executed the command, the step
/// joins the cgroup only then, and `ru_maxrss` — which the kernel carries across `exec`, and
/// which holds the guard's image among hmn's children — is reported only when it is the
/// command's own. `cat` prints its own peak; no figure of the report may be above it (plus the
/// last pages `cat` touched and the kernel's per-CPU counting).
#[test]
fn a_command_that_exits_at_once_is_measured_not_hmns_helper() {
    let bed = Bed::new().real_proc();
    for cgroup in [false, true] {
        // Sampling that starts too early catches the step only now and then: a few tries.
        for _ in 0..3 {
            let mut args = vec!["run", "--json"];
            if !cgroup {
                args.push("--no-cgroup");
            }
            args.extend(["--", "cat", "/proc/self/status"]);
            let o = bed.run(&args);
            assert!(o.status.success(), "{}", stderr(&o));
            let out = String::from_utf8(o.stdout).unwrap();
            let own: u64 = out
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|l| l.trim().strip_suffix(" kB"))
                .unwrap()
                .trim()
                .parse::<u64>()
                .unwrap()
                * 1024;
            let v: Value =
                serde_json::from_str(out.lines().rev().find(|l| l.starts_with('{')).unwrap())
                    .unwrap();
            for p in v["processes"].as_array().unwrap() {
                assert_eq!(p["name"], "cat", "a sample of hmn's helper: {v}");
            }
            let bound = own + (1 << 20);
            for key in [
                "peak_rss_sum_bytes",
                "largest_process_peak_rss_bytes",
                "rusage_max_rss_bytes",
                "cgroup_peak_bytes",
            ] {
                if let Some(b) = v[key].as_u64() {
                    assert!(b <= bound, "{key} {b} > cat's own peak {own}: {v}");
                }
            }
            // Unknown where no sample found it alive and no kernel peak is its own: never 0.
            for key in ["peak_rss_sum_bytes", "rusage_max_rss_bytes"] {
                assert_ne!(v[key], 0, "{key}: {v}");
            }
            assert_ne!(v["peak_ram"]["bytes"], 0, "{v}");
            if let Some(peak) = v["peak_ram"]["bytes"].as_u64() {
                assert!(peak <= bound, "peak RAM {peak} > cat's own peak {own}: {v}");
            }
        }
    }
    // `true` ends before the first sample almost always: no sampled figure is 0, in JSON or text.
    for _ in 0..3 {
        let o = bed.run(&["run", "--json", "--no-cgroup", "--", "true"]);
        assert!(o.status.success(), "{}", stderr(&o));
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_ne!(v["peak_rss_sum_bytes"], 0, "{v}");
        assert_ne!(v["peak_ram"]["bytes"], 0, "{v}");
        let o = bed.run(&["run", "--no-cgroup", "--", "true"]);
        assert!(!stderr(&o).contains(" 0 B"), "{}", stderr(&o));
    }
    // Nor its device memory: no sample found it running, so its VRAM is no 0 B either (QA).
    let gpu = Bed::with_nvml(&hmn_testbed::FakeNvml::h100s(1)).real_proc();
    for _ in 0..3 {
        let o = gpu.run(&["run", "--json", "--no-cgroup", "--", "true"]);
        assert!(o.status.success(), "{}", stderr(&o));
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        let d = &v["devices"][0];
        if v["peak_rss_sum_bytes"].is_null() {
            assert!(d["peak_vram_bytes"].is_null(), "{v}");
            assert!(d["sampled_peak_vram_bytes"].is_null(), "{v}");
            assert_eq!(
                d["vram_unknown_detail"], "no sample found the command running",
                "{v}"
            );
        }
    }
}

#[test]
fn exit_codes_pass_through() {
    let bed = Bed::new().real_proc();
    let code = |args: &[&str]| bed.run(args).status.code().unwrap();
    assert_eq!(code(&["run", "--no-cgroup", "--", "sh", "-c", "exit 0"]), 0);
    assert_eq!(code(&["run", "--", "sh", "-c", "exit 3"]), 3);
    assert_eq!(
        code(&["run", "--no-cgroup", "--", "sh", "-c", "exit 255"]),
        255
    );
    assert_eq!(
        code(&["run", "--", "sh", "-c", "kill -9 $$"]),
        137,
        "128 + SIGKILL"
    );
    let o = bed.run(&["run", "--", "surely-not-a-command-hmn"]);
    assert_eq!(o.status.code(), Some(127));
    assert_eq!(
        String::from_utf8(o.stderr).unwrap(),
        "hmn: run: surely-not-a-command-hmn: command not found\n"
    );
    let plain = bed.path("data.txt");
    std::fs::write(&plain, "not a program").unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let o = bed.run(&["run", "--", plain.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(126), "found but not executable");
    let v = json(&bed.run(&["run", "--json", "--", "sh", "-c", "kill -TERM $$"]));
    assert_eq!(
        (v["exit_code"].as_u64(), v["signal"].as_i64()),
        (Some(143), Some(15))
    );
}

#[test]
fn arguments_and_stdio_reach_the_command_untouched() {
    let bed = Bed::new().real_proc();
    let o = bed
        .cmd(&[
            "run",
            "--",
            "sh",
            "-c",
            "cat; echo \"$1 $2\"; echo err >&2",
            "sh",
            "--json",
            "-x",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(b"from stdin\n")?;
            c.wait_with_output()
        })
        .unwrap();
    assert_eq!(
        String::from_utf8(o.stdout).unwrap(),
        "from stdin\n--json -x\n",
        "flags after CMD belong to it"
    );
    assert!(
        String::from_utf8(o.stderr)
            .unwrap()
            .starts_with("err\nhmn run: ")
    );
}

/// Starts `hmn ARGS` (`run`, `spill`) in its own process group so a test can signal it like a terminal would.
pub fn spawn_group(bed: &Bed, args: &[&str]) -> std::process::Child {
    use std::os::unix::process::CommandExt;
    bed.cmd(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap()
}

pub fn wait_for_child_process(parent: u32) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        let found = std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
            std::fs::read_to_string(e.path().join("stat"))
                .ok()
                .and_then(|t| t.get(t.rfind(')')? + 1..).map(str::to_string))
                .and_then(|r| r.split_whitespace().nth(1).map(|p| p == parent.to_string()))
                .unwrap_or(false)
        });
        if found {
            std::thread::sleep(Duration::from_millis(200));
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("hmn did not start its command");
}

#[test]
fn sigterm_is_forwarded_and_the_report_written() {
    let bed = Bed::new().real_proc();
    let child = spawn_group(&bed, &["run", "--json", "--", "sleep", "30"]);
    wait_for_child_process(child.id());
    let hmn = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
    nix::sys::signal::kill(hmn, nix::sys::signal::Signal::SIGTERM).unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(143),
        "the command died of the forwarded SIGTERM"
    );
    let v = json(&o);
    assert_eq!(v["forwarded_signals"], serde_json::json!([15]));
    assert!(
        String::from_utf8(o.stderr)
            .unwrap()
            .contains("killed by signal 15")
    );
}

#[test]
fn ctrl_c_at_a_terminal_still_writes_the_report() {
    let bed = Bed::new().real_proc();
    let child = spawn_group(&bed, &["run", "--", "sleep", "30"]);
    wait_for_child_process(child.id());
    // A terminal sends SIGINT to the whole foreground process group.
    let group = nix::unistd::Pid::from_raw(-i32::try_from(child.id()).unwrap());
    nix::sys::signal::kill(group, nix::sys::signal::Signal::SIGINT).unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130));
    let err = String::from_utf8(o.stderr).unwrap();
    assert!(
        err.contains("exit status   130 (killed by signal 2)"),
        "{err}"
    );
}

#[test]
fn timeline_and_plot_files() {
    let bed = Bed::new().real_proc();
    let (tl, svg) = (bed.path("t.jsonl"), bed.path("p.svg"));
    let o = bed.run(&[
        "run",
        "--json",
        "--interval",
        "20ms",
        "--timeline",
        tl.to_str().unwrap(),
        "--plot",
        svg.to_str().unwrap(),
        "--",
        python(),
        "-c",
        "x=bytearray(50<<20); import time; time.sleep(0.5)",
    ]);
    assert!(o.status.success());
    let v = json(&o);
    let lines: Vec<Value> = std::fs::read_to_string(&tl)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len() as u64, v["samples"].as_u64().unwrap());
    assert!(
        lines
            .windows(2)
            .all(|w| w[0]["t_ms"].as_u64() <= w[1]["t_ms"].as_u64())
    );
    assert!(
        lines
            .iter()
            .any(|l| l["rss_bytes"].as_f64().unwrap() > 50.0 * MIB)
    );
    let text = std::fs::read_to_string(&svg).unwrap();
    let doc = roxmltree::Document::parse(&text).unwrap();
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    assert!(text.contains("RSS (tree)"));
    let leftovers: Vec<_> = std::fs::read_dir(bed.dir.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains("hmn-tmp"))
        .collect();
    assert!(leftovers.is_empty());
}

#[test]
fn bad_run_arguments() {
    let bed = Bed::new().real_proc();
    for args in [
        &["run"][..],
        &["run", "--interval", "0s", "--", "true"],
        &[
            "run",
            "--timeline",
            "/nonexistent/dir/t.jsonl",
            "--",
            "true",
        ],
        &["run", "--plot", "/nonexistent/dir/p.svg", "--", "true"],
    ] {
        let o = bed.run(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
    }
    let o = bed.run(&[
        "run",
        "--timeline",
        "/nonexistent/dir/t.jsonl",
        "--",
        "true",
    ]);
    let err = String::from_utf8(o.stderr).unwrap();
    assert!(
        err.starts_with("hmn: --timeline /nonexistent/dir/t.jsonl: "),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1);
}

#[test]
fn vram_of_the_command_through_nvml() {
    let fake = FakeNvml::new()
        .device(FakeDevice::h100(0).memory_used(&[1 << 30, 20 << 30, 5 << 30]))
        .process(FakeProcess::compute_child_of_caller(0, 0).used_sequence(&[
            1 << 30,
            6 << 30,
            2 << 30,
        ]));
    let bed = Bed::with_nvml(&fake).real_proc();
    let o = bed.run(&["run", "--json", "--interval", "50ms", "--", "sleep", "0.6"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v = json(&o);
    let d = &v["devices"][0];
    assert_eq!(d["index"], 0);
    assert_eq!(d["peak_vram_bytes"].as_u64(), Some(6 << 30));
    assert_eq!(d["sampled_peak_vram_bytes"].as_u64(), Some(6 << 30));
    assert_eq!(d["peak_device_used_bytes"].as_u64(), Some(20 << 30));
    assert_eq!(d["vram_accounting"], "disabled");
    assert!(d["largest_process_peak_vram_bytes"].is_null());
    let err = String::from_utf8(o.stderr).unwrap();
    assert!(
        err.contains("peak VRAM     GPU 0: 6 GiB by the command; device-wide peak 20 GiB"),
        "{err}"
    );
    assert!(!err.contains("driver accounting"), "{err}");
}

/// `hmn run --json --timeline T -- CMD` where CMD ends once the timeline holds `n` samples (it
/// watches hmn's temporary timeline file): at least `n` samples of the command, however slow the
/// machine, with no timing assumption.
fn until_sampled(bed: &Bed, n: usize) -> std::process::Output {
    let timeline = bed.path("t.jsonl");
    let wait = format!(
        "until [ \"$(cat \"$0\"/.t.jsonl.*.hmn-tmp 2>/dev/null | wc -l)\" -ge {n} ]; do sleep 0.01; done"
    );
    let dir = bed.dir.path().to_str().unwrap().to_string();
    bed.run(&[
        "run",
        "--json",
        "--interval",
        "20ms",
        "--timeline",
        timeline.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        &wait,
        &dir,
    ])
}

#[test]
fn no_accounting_record_of_the_command_is_unknown_not_zero() {
    // Accounting on, but the only record is an earlier process's (its context started long
    // before the command): nothing matches.
    let fake = FakeNvml::new()
        .device(FakeDevice::h100(0).accounting())
        .process(
            FakeProcess::compute_child_of_caller(0, 1 << 30)
                .accounting_max(Used::Bytes(5 << 30))
                .accounting_start_us(1_000_000),
        );
    let bed = Bed::with_nvml(&fake).real_proc();
    let o = until_sampled(&bed, 2);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json(&o);
    let d = &v["devices"][0];
    assert_eq!(d["vram_accounting"], "enabled");
    assert!(
        d["largest_process_peak_vram_bytes"].is_null(),
        "unknown, not 0: {d}"
    );
    let why = d["vram_accounting_detail"].as_str().unwrap();
    assert!(why.contains("no record"), "{why}");
    assert_eq!(
        d["peak_vram_bytes"].as_u64(),
        Some(1 << 30),
        "the sampled sum"
    );
    let err = stderr(&o);
    assert!(
        err.contains("GPU 0: largest single process unknown: accounting is on, but"),
        "{err}"
    );
}

#[test]
fn vram_spike_between_samples_from_driver_accounting() {
    let fake = FakeNvml::new()
        .device(FakeDevice::h100(0).accounting())
        .process(
            FakeProcess::compute_child_of_caller(0, 0)
                .used_sequence(&[1 << 30, 2 << 30])
                .accounting_max(Used::Bytes(5 << 30)),
        )
        .device(FakeDevice::h100(1).error("nvmlDeviceGetAccountingMode", 4));
    let bed = Bed::with_nvml(&fake).real_proc();
    let o = until_sampled(&bed, 3);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v = json(&o);
    let d = &v["devices"][0];
    assert_eq!(d["sampled_peak_vram_bytes"].as_u64(), Some(2 << 30));
    assert_eq!(d["largest_process_peak_vram_bytes"].as_u64(), Some(5 << 30));
    assert_eq!(d["peak_vram_bytes"].as_u64(), Some(5 << 30), "floored");
    assert_eq!(d["vram_accounting"], "enabled");
    assert!(d["vram_accounting_detail"].is_null());
    let d1 = &v["devices"][1];
    assert_eq!(d1["vram_accounting"], "unavailable");
    assert!(d1["largest_process_peak_vram_bytes"].is_null());
    let detail = d1["vram_accounting_detail"].as_str().unwrap();
    assert!(detail.contains("permission"), "{detail}");
    let err = String::from_utf8(o.stderr).unwrap();
    assert!(
        err.contains("peak VRAM     GPU 0: 5 GiB by the command"),
        "{err}"
    );
    assert!(
        err.contains(
            "GPU 0: 5 GiB largest single process (driver accounting); 2 GiB largest sampled sum"
        ),
        "{err}"
    );
}

/// `hmn watch --json` of `sleeper` for 350 ms, every 100 ms: its JSON lines (the sleeper is
/// killed once hmn is done).
fn watch_json_lines(bed: &Bed, sleeper: &mut std::process::Child) -> Vec<Value> {
    let pid = sleeper.id().to_string();
    let o = bed.run(&[
        "watch",
        "--json",
        "--interval",
        "100ms",
        "--duration",
        "350ms",
        &pid,
    ]);
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn watch_explicit_pids_as_json_lines() {
    let bed = Bed::new().real_proc();
    let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    let records = watch_json_lines(&bed, &mut sleeper);
    assert_eq!(records.first().unwrap()["kind"], "start");
    assert_eq!(records.last().unwrap()["kind"], "summary");
    let samples: Vec<&Value> = records.iter().filter(|r| r["kind"] == "sample").collect();
    assert!(samples.len() >= 3, "{records:?}");
    assert!(
        samples
            .iter()
            .all(|s| s["pid"].as_u64() == Some(u64::from(sleeper.id())))
    );
    assert_eq!(samples[0]["rss_delta_bytes"], 0);
    let summary = records.last().unwrap();
    assert_eq!(summary["per_pid"][0]["name"], "sleep");
}

#[test]
fn watch_deltas_are_from_each_processs_first_sample() {
    const GIB: u64 = 1 << 30;
    let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    let fake = FakeNvml::h100s(1)
        .process(FakeProcess::compute(0, sleeper.id(), 0).used_sequence(&[GIB, 3 * GIB, 2 * GIB]));
    let bed = Bed::with_nvml(&fake).real_proc();
    let records = watch_json_lines(&bed, &mut sleeper);
    let samples: Vec<&Value> = records.iter().filter(|r| r["kind"] == "sample").collect();
    assert!(samples.len() >= 3, "{records:?}");
    let vram: Vec<u64> = samples
        .iter()
        .map(|s| s["vram_bytes"].as_u64().unwrap())
        .collect();
    assert_eq!(vram[..3], [GIB, 3 * GIB, 2 * GIB], "{records:?}");
    for s in &samples {
        assert_eq!(
            s["vram_delta_bytes"].as_i64().unwrap(),
            s["vram_bytes"].as_i64().unwrap() - GIB as i64,
            "{s}"
        );
        assert_eq!(
            s["rss_delta_bytes"].as_i64().unwrap(),
            s["rss_bytes"].as_i64().unwrap() - samples[0]["rss_bytes"].as_i64().unwrap(),
            "{s}"
        );
    }
    let summary = records.last().unwrap();
    assert_eq!(summary["per_pid"][0]["baseline_vram_bytes"], GIB);
    assert_eq!(summary["per_pid"][0]["peak_vram_bytes"], 3 * GIB);
}

#[test]
fn watch_top_by_vram_and_bad_pids() {
    let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    let fake = FakeNvml::h100s(1).process(FakeProcess::compute(0, sleeper.id(), 3 << 30));
    let bed = Bed::with_nvml(&fake).real_proc();
    let o = bed.run(&[
        "watch",
        "--top",
        "1",
        "--interval",
        "100ms",
        "--duration",
        "150ms",
    ]);
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8(o.stdout).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    // WORKLOAD follows when the process's cgroup names one (this machine's own cgroups).
    let head: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(
        head[..8],
        ["TIME", "PID", "NAME", "RSS", "ΔRSS", "VRAM", "ΔVRAM", "SM"]
    );
    assert!(head.len() == 8 || head[8..] == ["WORKLOAD"], "{head:?}");
    assert!(
        lines[1].contains("sleep") && lines[1].contains("3 GiB"),
        "{out}"
    );
    assert!(String::from_utf8(o.stderr).unwrap().contains("hmn watch: "));

    let o = Bed::new().real_proc().run(&["watch", "4000000"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        String::from_utf8(o.stderr).unwrap(),
        "hmn: watch: no process 4000000\n"
    );
    let o = Bed::new().real_proc().run(&["watch"]);
    assert_eq!(o.status.code(), Some(2), "nothing holds GPU memory");
}

#[test]
fn watch_prints_its_summary_on_ctrl_c() {
    let bed = Bed::new().real_proc();
    let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    let pid = sleeper.id().to_string();
    let child = spawn_group(&bed, &["watch", "--interval", "100ms", &pid]);
    std::thread::sleep(Duration::from_millis(400));
    let group = nix::unistd::Pid::from_raw(-i32::try_from(child.id()).unwrap());
    nix::sys::signal::kill(group, nix::sys::signal::Signal::SIGINT).unwrap();
    let o = child.wait_with_output().unwrap();
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
    assert_eq!(o.status.code(), Some(0));
    let err = String::from_utf8(o.stderr).unwrap();
    assert!(
        err.contains("hmn watch: ") && err.contains("BASELINE RSS"),
        "{err}"
    );
    assert!(
        String::from_utf8(o.stdout).unwrap().lines().count() >= 2,
        "header and rows"
    );
}

#[test]
fn an_empty_command_name_is_not_found_as_in_a_shell() {
    let bed = Bed::new().real_proc();
    let o = bed.run(&["run", "--", ""]);
    assert_eq!(o.status.code(), Some(127), "{}", stderr(&o));
    assert_eq!(stderr(&o), "hmn: run: : command not found\n");
    let o = bed.run(&["spill", "--", ""]);
    assert_eq!(o.status.code(), Some(1), "upstream's code: {}", stderr(&o));
    assert_eq!(stderr(&o), "hmn: failed to spawn \"\": command not found\n");
}

#[test]
fn non_utf8_arguments_keep_their_bytes_in_the_report() {
    use std::os::unix::ffi::OsStrExt as _;
    let bed = Bed::new().real_proc();
    let odd = std::ffi::OsStr::from_bytes(b"a\xffb\x1b]2;x\x07");
    let o = bed
        .cmd(&["run", "--json", "--no-cgroup", "--", "true", "plain"])
        .arg(odd)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(
        v["command"],
        serde_json::json!(["true", "plain", "a\u{fffd}b\u{1b}]2;x\u{7}"])
    );
    assert_eq!(
        v["command_bytes_hex"],
        serde_json::json!([null, null, "61ff621b5d323b7807"])
    );
    assert!(
        stderr(&o).contains("hmn run: true plain a\\xffb\\x1b]2;x\\x07\n"),
        "{}",
        stderr(&o)
    );
    // All UTF-8: no sibling.
    let v = json(&bed.run(&["run", "--json", "--no-cgroup", "--", "true", "é"]));
    assert!(v.get("command_bytes_hex").is_none(), "{v}");
}

#[test]
fn an_io_error_is_printed_once() {
    let bed = Bed::new().real_proc();
    let missing = bed.path("missing.jsonl");
    let o = bed.run(&["top", "--replay", missing.to_str().unwrap()]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.matches("os error 2").count(), 1, "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

/// The command's only GPU process reports no memory figure (NVML's VALUE_NOT_AVAILABLE, as
/// under MIG without privileges): its peak VRAM is unknown with the reason, never 0 B.
#[test]
fn a_command_without_a_vram_figure_has_an_unknown_peak_not_zero() {
    let fake = FakeNvml::new()
        .device(FakeDevice::h100(0))
        .process(FakeProcess::compute_child_of_caller(0, 0).not_available());
    let bed = Bed::with_nvml(&fake).real_proc();
    let o = until_sampled(&bed, 2);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json(&o);
    let d = &v["devices"][0];
    assert!(d["peak_vram_bytes"].is_null(), "{d}");
    assert!(d["sampled_peak_vram_bytes"].is_null(), "{d}");
    assert_eq!(d["peak_vram_is_lower_bound"], true);
    let why = d["vram_unknown_detail"].as_str().unwrap();
    assert!(why.contains("has no memory figure on this device"), "{why}");
    let err = stderr(&o);
    assert!(
        err.contains("peak VRAM     GPU 0: unknown by the command"),
        "{err}"
    );
    assert!(
        err.contains("GPU 0: not every figure could be read: pid "),
        "{err}"
    );
    assert!(!err.contains("GPU 0: 0 B by the command"), "{err}");
}
