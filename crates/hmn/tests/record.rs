//! `hmn record` under a hung driver, signals, a failed write and an existing FILE (issue 22):
//! the recording is committed on `--duration` and on SIGTERM, SIGHUP, SIGINT and SIGQUIT while
//! the collector is stuck in the driver; the main thread sleeps between samples (issue 28); a
//! write error keeps every complete line; an existing FILE is refused unless `--force`; the
//! interval is announced as given.

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use hmn_testbed::{FakeDevice, FakeNvml, FakeProc, FakeProcess};
use serde_json::Value;

use crate::util::{Bed, stderr};

/// One H100 with one process.
fn bed() -> Bed {
    let fake = FakeNvml::new()
        .device(FakeDevice::h100(0).memory_used(&[20 << 30]))
        .process(FakeProcess::compute(0, 4242, 12 << 30));
    let bed = Bed::with_nvml(&fake);
    bed.fixture()
        .process(&FakeProc::new(4242, "python3"))
        .unwrap();
    bed
}

/// Every line of `text`, each complete and a snapshot.
fn snapshots(text: &str) -> Vec<Value> {
    assert!(
        text.is_empty() || text.ends_with('\n'),
        "a cut line: {text:?}"
    );
    text.lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}"));
            assert_eq!(v["format"], "hmn-top");
            v
        })
        .collect()
}

/// The temporary file of a recording in progress in `dir`.
fn temporary(dir: &std::path::Path) -> Option<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".hmn-tmp"))
}

/// Waits (up to a minute: a loaded machine) until the temporary file holds `n` lines.
fn wait_for_lines(dir: &std::path::Path, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(t) = temporary(dir)
            && std::fs::read_to_string(&t).unwrap().lines().count() >= n
        {
            return;
        }
        assert!(Instant::now() < deadline, "no {n} samples flushed");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits (up to a minute) for `child` to end; kills it and fails when it does not.
fn ends(child: &mut Child) -> std::process::Output {
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("record did not end");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    std::process::Output {
        status: child.wait().unwrap(),
        stdout: Vec::new(),
        stderr: err.into_bytes(),
    }
}

#[test]
fn duration_ends_a_recording_whose_driver_hangs_and_commits_it() {
    let bed = bed();
    // Hung from the start: not one sample completes.
    std::fs::write(hmn_testbed::nvml_hang_flag(&bed.env.nvml), "").unwrap();
    let file = bed.path("hung.jsonl");
    let mut child = bed
        .cmd(&[
            "record",
            "--interval",
            "100ms",
            "--duration",
            "3s",
            file.to_str().unwrap(),
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let o = ends(&mut child);
    assert!(o.status.success(), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("waiting on the driver"), "{e}");
    assert!(e.contains("0 samples"), "{e}");
    assert!(file.exists(), "committed");
    assert!(temporary(bed.dir.path()).is_none());
}

/// Records until the driver hangs, then sends `sig`: the samples taken before are committed.
fn a_signal_commits_the_samples_taken_before_the_driver_hung(sig: nix::sys::signal::Signal) {
    let bed = bed();
    let file = bed.path("night.jsonl");
    let mut child = bed
        .cmd(&["record", "--interval", "50ms", file.to_str().unwrap()])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_lines(bed.dir.path(), 2);
    std::fs::write(hmn_testbed::nvml_hang_flag(&bed.env.nvml), "").unwrap();
    // Every sample begun from now on hangs; the one in progress (if any) ends. Once the
    // temporary file stops growing the collector is stuck in the driver.
    let tmp = temporary(bed.dir.path()).unwrap();
    let mut last = std::fs::metadata(&tmp).unwrap().len();
    loop {
        std::thread::sleep(Duration::from_millis(500));
        let now = std::fs::metadata(&tmp).unwrap().len();
        if now == last {
            break;
        }
        last = now;
    }
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
    nix::sys::signal::kill(pid, sig).unwrap();
    let o = ends(&mut child);
    assert!(o.status.success(), "{sig}: {}", stderr(&o));
    let kept = snapshots(&std::fs::read_to_string(&file).unwrap());
    assert!(kept.len() >= 2, "{sig}: {}", kept.len());
    assert!(temporary(bed.dir.path()).is_none(), "{sig}");
}

#[test]
fn every_stop_signal_commits_the_samples_taken_before_the_driver_hung() {
    use nix::sys::signal::Signal;
    // SIGQUIT (Ctrl+\) too: its default action would leave only the temporary file.
    for sig in [
        Signal::SIGTERM,
        Signal::SIGHUP,
        Signal::SIGINT,
        Signal::SIGQUIT,
    ] {
        a_signal_commits_the_samples_taken_before_the_driver_hung(sig);
    }
}

/// The voluntary context switches of `pid`'s main thread so far.
fn main_thread_wakeups(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn the_main_thread_sleeps_between_samples() {
    let bed = bed();
    let file = bed.path("slow.jsonl");
    let mut child = bed
        .cmd(&["record", "--interval", "1h", file.to_str().unwrap()])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The first sample is taken at once, the next in an hour: until then the main thread has
    // nothing to do. A thread that blocks counts one voluntary switch each time; one that
    // looks at a flag every 100 ms counts about 20 in these 2 s, however loaded the machine.
    wait_for_lines(bed.dir.path(), 1);
    let before = main_thread_wakeups(child.id());
    std::thread::sleep(Duration::from_secs(2));
    let after = main_thread_wakeups(child.id());
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let o = ends(&mut child);
    assert!(o.status.success(), "{}", stderr(&o));
    // One for the wait it entered after the line was flushed, one to spare.
    assert!(
        after - before <= 2,
        "the main thread woke {} times in 2 s",
        after - before
    );
    assert_eq!(snapshots(&std::fs::read_to_string(&file).unwrap()).len(), 1);
}

#[test]
fn a_failed_write_keeps_every_complete_line() {
    let bed = bed();
    let file = bed.path("full.jsonl");
    let hmn = env!("CARGO_BIN_EXE_hmn");
    // A file size limit: writes past ~8 KiB fail (EFBIG) as on a full disk (the same write
    // error path as ENOSPC); SIGXFSZ ignored so the write fails instead of killing hmn.
    let o = bed
        .env
        .command("sh")
        .args([
            "-c",
            "trap '' XFSZ; ulimit -f 16; exec \"$0\" record --interval 1ms \"$1\"",
            hmn,
            file.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert_eq!(
        e.lines().count(),
        2,
        "the announcement and one error line: {e}"
    );
    let error = e.lines().nth(1).unwrap();
    assert!(error.starts_with("hmn: record: "), "{e}");
    assert!(error.contains("written before it are in"), "{e}");
    let text = std::fs::read_to_string(&file).unwrap();
    let kept = snapshots(&text);
    assert!(!kept.is_empty(), "the complete samples are kept");
    assert!(
        error.contains(&format!("the {} sample", kept.len())),
        "{e} ({} kept)",
        kept.len()
    );
    assert!(temporary(bed.dir.path()).is_none());
}

#[test]
fn an_existing_file_is_refused_unless_forced() {
    let bed = bed();
    let file = bed.path("old.jsonl");
    std::fs::write(&file, "yesterday\n").unwrap();
    let path = file.to_str().unwrap();
    let o = bed.run(&["record", "--duration", "100ms", path]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(e.contains("exists") && e.contains("--force"), "{e}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "yesterday\n");

    let o = bed.run(&["record", "--duration", "100ms", "--force", path]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!snapshots(&std::fs::read_to_string(&file).unwrap()).is_empty());
}

#[test]
fn the_interval_is_announced_as_given() {
    let bed = bed();
    let file = bed.path("fast.jsonl");
    let o = bed.record(&file, "50ms", "100ms");
    let e = stderr(&o);
    assert!(e.contains("every 50 ms"), "{e}");
    assert!(!e.contains("0.1 s"), "{e}");
    for s in snapshots(&std::fs::read_to_string(&file).unwrap()) {
        assert_eq!(s["interval_ms"], 50);
    }
}

/// Whether `pid`'s main thread is blocked writing into a full pipe (the kernel's wait channel:
/// `pipe_write`, `anon_pipe_write` since 6.x).
fn blocked_on_a_pipe(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/wchan"))
        .is_ok_and(|w| w.contains("pipe_write"))
}

/// `record -` whose reader stopped reading: the main thread is stuck in a write to stdout, and
/// a stop (or `--duration`'s end) still ends hmn within its grace, with status 2 and a line
/// that says why — never a process that outlives every signal.
#[test]
fn a_stop_ends_a_recording_whose_stdout_is_not_read() {
    for with_duration in [false, true] {
        let bed = bed();
        let mut args = vec!["record", "--interval", "10ms", "--max-processes", "64"];
        if with_duration {
            args.extend(["--duration", "4s"]);
        }
        args.push("-");
        let mut child = bed
            .cmd(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Nobody reads stdout: the pipe fills (64 KiB) and the next write blocks.
        let deadline = Instant::now() + Duration::from_secs(60);
        while !blocked_on_a_pipe(child.id()) {
            assert!(Instant::now() < deadline, "never blocked on stdout");
            std::thread::sleep(Duration::from_millis(20));
        }
        let started = Instant::now();
        if !with_duration {
            let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
            nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
        }
        let o = ends(&mut child);
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        let e = stderr(&o);
        let end = if with_duration {
            "--duration's end"
        } else {
            "the stop"
        };
        assert!(
            e.contains(&format!(
                "record: -: stdout has not taken data for 2 s after {end}"
            )),
            "{e}"
        );
        assert_eq!(e.lines().count(), 1, "{e}");
    }
}
