//! `hmn watch`'s upstream flags and exit codes: `--follow-new` (the entered/left notices),
//! `--filter`, `--min`, `--device`, their conflict with explicit PIDs, and exit 1 when a spill
//! was observed on the tracked device (a fixture amdgpu card a test thread fills meanwhile).

use std::process::{Child, Command};

use hmn_testbed::{FakeGpu, FakeNvml, FakeProcess};
use serde_json::Value;

use crate::util::{Bed, stderr, stdout};

const GIB: u64 = 1 << 30;

/// `sleep 30`, killed and reaped on drop.
struct Sleeper(Child);

impl Sleeper {
    fn start() -> Sleeper {
        Sleeper(Command::new("sleep").arg("30").spawn().unwrap())
    }
    fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn lines(o: &std::process::Output) -> Vec<Value> {
    stdout(o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn auto_selection_flags_with_explicit_pids_exit_2_before_measuring() {
    let bed = Bed::new().real_proc();
    for (flag, extra) in [
        ("--follow-new", &["--follow-new"][..]),
        ("--filter", &["--filter", "python"]),
        ("--min", &["--min", "1GiB"]),
    ] {
        let mut args = vec!["watch", "1"];
        args.extend_from_slice(extra);
        let o = bed.run(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert_eq!(
            stderr(&o),
            format!(
                "hmn: watch {flag} only applies to auto-selection; drop {flag} or the explicit PID list\n"
            )
        );
        assert_eq!(stdout(&o), "");
    }
    for args in [
        &["watch", "--filter", "  "][..],
        &["watch", "--min", "lots"],
        &["watch", "--device", "x"],
    ] {
        assert_eq!(bed.run(args).status.code(), Some(2), "{args:?}");
    }
    let o = bed.run(&["watch", "--device", "3"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).starts_with("hmn: watch: GPU 3: "),
        "{}",
        stderr(&o)
    );
}

#[test]
fn filter_min_and_device_narrow_the_auto_selection() {
    let (a, b, c) = (Sleeper::start(), Sleeper::start(), Sleeper::start());
    let fake = FakeNvml::h100s(2)
        .process(FakeProcess::compute(0, a.pid(), 6 * GIB))
        .process(FakeProcess::compute(0, b.pid(), GIB / 2))
        .process(FakeProcess::compute(1, c.pid(), 9 * GIB));
    let bed = Bed::with_nvml(&fake).real_proc();
    let selected = |extra: &[&str]| {
        let mut args = vec![
            "watch",
            "--json",
            "--interval",
            "100ms",
            "--duration",
            "100ms",
        ];
        args.extend_from_slice(extra);
        let o = bed.run(&args);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
        let start = lines(&o).remove(0);
        assert_eq!(start["kind"], "start");
        start["pids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_u64().unwrap() as u32)
            .collect::<Vec<u32>>()
    };
    assert_eq!(selected(&[]), [c.pid(), a.pid(), b.pid()]);
    assert_eq!(selected(&["--top", "1"]), [c.pid()]);
    assert_eq!(selected(&["--device", "0"]), [a.pid(), b.pid()]);
    assert_eq!(selected(&["--min", "1GiB"]), [c.pid(), a.pid()]);
    assert_eq!(selected(&["--filter", "SLE", "--device", "1"]), [c.pid()]);
    let o = bed.run(&["watch", "--filter", "python", "--duration", "100ms"]);
    assert_eq!(o.status.code(), Some(2), "nothing matches");
    assert!(
        stderr(&o)
            .starts_with("hmn: watch: no GPU process to auto-select (top 5 matching \"python\"); "),
        "{}",
        stderr(&o)
    );
}

#[test]
fn follow_new_reselects_and_says_who_entered_and_left() {
    let (a, b) = (Sleeper::start(), Sleeper::start());
    // The fake's process lists count calls: attach selects (call 0), then each interval
    // samples and, from the second on, re-selects. `b` appears at call 2, `a` leaves at call 4.
    let fake = FakeNvml::h100s(1)
        .process(FakeProcess::compute(0, a.pid(), GIB).visible(0, 4))
        .process(FakeProcess::compute(0, b.pid(), 2 * GIB).visible(2, 1000));
    let bed = Bed::with_nvml(&fake).real_proc();
    let o = bed.run(&[
        "watch",
        "--follow-new",
        "--top",
        "2",
        "--interval",
        "100ms",
        "--duration",
        "700ms",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let err = stderr(&o);
    let changes: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("followed set changed"))
        .collect();
    assert_eq!(changes.len(), 2, "{err}");
    assert!(changes[0].starts_with("hmn watch: +0."), "{err}");
    assert!(
        changes[0].ends_with(&format!(
            "followed set changed: entered pid={} (sleep)",
            b.pid()
        )),
        "{err}"
    );
    assert!(
        changes[1].ends_with(&format!(
            "followed set changed: left pid={} (sleep)",
            a.pid()
        )),
        "{err}"
    );
    assert!(
        err.contains("watch: following the top 2 (re-selected every interval), 1 initially"),
        "{err}"
    );
}

#[test]
fn follow_new_waits_for_work_instead_of_failing() {
    let bed = Bed::with_nvml(&FakeNvml::h100s(1)).real_proc();
    let o = bed.run(&[
        "watch",
        "--follow-new",
        "--json",
        "--interval",
        "100ms",
        "--duration",
        "250ms",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let records = lines(&o);
    assert_eq!(records[0]["pids"], Value::Array(vec![]));
    assert_eq!(records[0]["follow_new"], true);
    let summary = records.last().unwrap();
    assert_eq!(summary["kind"], "summary");
    assert_eq!(summary["spill"]["measurable"], false);
    let reason = summary["spill"]["unmeasurable_reason"].as_str().unwrap();
    assert!(reason.starts_with("NVIDIA on Linux"), "{reason}");
    assert_eq!(
        Bed::new().real_proc().run(&["watch"]).status.code(),
        Some(2)
    );
}

#[test]
fn a_spill_observed_on_the_tracked_device_exits_1() {
    use std::io::BufRead;
    let sleeper = Sleeper::start();
    let bed = Bed::new().real_proc();
    bed.gpu(FakeGpu::amdgpu("0000:03:00.0", 1, 128));
    let card = bed.world.sys.root().join("devices/0000:03:00.0");
    let pid = sleeper.pid().to_string();
    let mut watch = bed
        .cmd(&[
            "watch",
            "--json",
            "--device",
            "0",
            "--interval",
            "50ms",
            "--duration",
            "20s",
            &pid,
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // After the first sample (the baseline), VRAM fills and GTT grows by 1 GiB; once a sample
    // says so, Ctrl+C ends the watch with its summary.
    let mut records = Vec::new();
    let stdout = std::io::BufReader::new(watch.stdout.take().unwrap());
    for line in stdout.lines() {
        let v: Value = serde_json::from_str(&line.unwrap()).unwrap();
        if v["kind"] == "sample" && records.iter().all(|r: &Value| r["kind"] != "sample") {
            std::fs::write(card.join("mem_info_vram_used"), "8400000000\n").unwrap();
            std::fs::write(
                card.join("mem_info_gtt_used"),
                format!("{}\n", 60_506_112 + GIB),
            )
            .unwrap();
        }
        if v["spilling"] == true {
            let hmn = nix::unistd::Pid::from_raw(i32::try_from(watch.id()).unwrap());
            nix::sys::signal::kill(hmn, nix::sys::signal::Signal::SIGINT).unwrap();
        }
        records.push(v);
    }
    let o = watch.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let samples: Vec<&Value> = records.iter().filter(|r| r["kind"] == "sample").collect();
    assert_eq!(samples[0]["spilling"], false);
    assert_eq!(samples.last().unwrap()["spilling"], true);
    let spill = &records.last().unwrap()["spill"];
    assert_eq!(spill["spilled"], true, "{spill}");
    assert_eq!(spill["device"], 0);
    assert_eq!(spill["unmeasurable_reason"], Value::Null);
    assert_eq!(
        spill["episodes"][0]["end_label"],
        Value::Null,
        "still spilling"
    );

    // The same run in text: the spill block closes the report.
    std::fs::write(card.join("mem_info_vram_used"), "4000000000\n").unwrap();
    std::fs::write(card.join("mem_info_gtt_used"), "60506112\n").unwrap();
    let o = bed.run(&[
        "watch",
        "--device",
        "0",
        "--interval",
        "100ms",
        "--duration",
        "200ms",
        &pid,
    ]);
    assert_eq!(o.status.code(), Some(0), "no spill: {}", stderr(&o));
    assert!(
        stderr(&o).contains("hmn watch: peak dedicated 3.7 GiB / 8 GiB\n"),
        "{}",
        stderr(&o)
    );
    assert!(stderr(&o).contains("episodes       0 — no spill observed"));
}

/// A process whose row has no memory figure (NVML's `VALUE_NOT_AVAILABLE`): its VRAM is
/// unknown in every sample and in the summary — `?` and `null` with the reason, never 0 B
/// (QA). A pid given twice is watched once (it made a second row with a +1 GiB change that
/// never happened); a zombie is refused as a pid that is gone is.
#[test]
fn unknown_vram_duplicate_pids_and_zombies() {
    let (a, b) = (Sleeper::start(), Sleeper::start());
    let fake = FakeNvml::h100s(1)
        .process(FakeProcess::compute(0, a.pid(), 0).not_available())
        .process(FakeProcess::compute(0, b.pid(), GIB));
    let bed = Bed::with_nvml(&fake).real_proc();
    let (pa, pb) = (a.pid().to_string(), b.pid().to_string());
    let watch = |json: bool| {
        let mut args = vec![
            "watch",
            &pa,
            &pb,
            &pb,
            "--interval",
            "100ms",
            "--duration",
            "250ms",
        ];
        if json {
            args.push("--json");
        }
        let o = bed.run(&args);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        o
    };
    let v = lines(&watch(true));
    assert_eq!(
        v[0]["pids"],
        serde_json::json!([a.pid(), b.pid()]),
        "once each"
    );
    let samples: Vec<&Value> = v.iter().filter(|l| l["kind"] == "sample").collect();
    assert!(!samples.is_empty());
    for s in &samples {
        if s["pid"] == a.pid() {
            assert!(
                s["vram_bytes"].is_null() && s["vram_delta_bytes"].is_null(),
                "{s}"
            );
            assert!(
                s["vram_unknown"]["0"]
                    .as_str()
                    .unwrap()
                    .contains("has no memory figure"),
                "{s}"
            );
        } else {
            assert_eq!(s["vram_bytes"].as_u64(), Some(GIB), "{s}");
            assert_eq!(s["vram_delta_bytes"].as_i64(), Some(0), "{s}");
        }
    }
    let per_pid = &v.last().unwrap()["per_pid"];
    let of = |pid: u32| {
        per_pid
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["pid"] == pid)
            .unwrap()
            .clone()
    };
    assert!(of(a.pid())["peak_vram_bytes"].is_null(), "{per_pid}");
    assert_eq!(of(a.pid())["vram_is_lower_bound"], true, "{per_pid}");
    assert_eq!(
        of(b.pid())["peak_vram_bytes"].as_u64(),
        Some(GIB),
        "{per_pid}"
    );
    let o = watch(false);
    let out = stdout(&o) + &stderr(&o);
    let rows: Vec<&str> = out.lines().filter(|l| l.contains(&pa)).collect();
    assert!(!rows.is_empty(), "{out}");
    for r in rows {
        // Samples: VRAM and ΔVRAM; the summary: baseline and peak VRAM.
        let unknown = r.split_whitespace().filter(|c| *c == "?").count();
        assert_eq!(unknown, 2, "{r}");
    }
    // A zombie: exited, not reaped.
    let mut z = Command::new("true").spawn().unwrap();
    let zpid = z.id();
    while !std::fs::read_to_string(format!("/proc/{zpid}/stat"))
        .unwrap()
        .contains(") Z ")
    {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let o = bed.run(&["watch", &zpid.to_string(), "--duration", "100ms"]);
    z.wait().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(
        stderr(&o),
        format!("hmn: watch: process {zpid} has exited (state Z)\n")
    );
}
