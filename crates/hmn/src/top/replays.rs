//! Replay tests: a recording shows the screens the live view showed — every sample, the detail
//! of every row, each sort, the tree, filters and 80×24 — for a recording written today
//! (format version 2) and for one written by hmn 0.2.16 (version 1, checked in with the
//! screens its replay showed then).

// Test helpers: a failed step stops the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::time::{Duration, Instant};

use hmn_testbed::{FakeDevice, FakeNvml, FakeProc, FakeProcess, FakeSample, Sandbox};
use ratatui::crossterm::event::KeyCode;

use super::app::{App, Mode};
use super::player::Player;
use super::recording::{Recording, write_line};
use super::snapshot::Snapshot;
use super::tests::{add_drm, collector, live, press, text};
use super::theme::Theme;

/// One frame: what it shows, and its text (each line's trailing blanks cut).
type Frame = (String, Vec<String>);

fn frame(app: &mut App, what: &str, w: u16, h: u16) -> Frame {
    let lines = text(app, w, h)
        .lines()
        .map(|l| l.trim_end().to_string())
        .collect();
    (format!("{what} ({w}x{h})"), lines)
}

/// The frames of a walk through the view: each of `samples` samples as `show` brings it, then,
/// at the last, the detail pane of every row, each sort, the tree, two filters and 80×24.
fn walk(app: &mut App, samples: usize, mut show: impl FnMut(&mut App, usize)) -> Vec<Frame> {
    let mut out = Vec::new();
    for i in 0..samples {
        show(app, i);
        out.push(frame(app, &format!("sample {}", i + 1), 120, 40));
    }
    press(app, KeyCode::Home);
    press(app, KeyCode::Enter);
    for n in 0..app.lines().len() {
        out.push(frame(app, &format!("detail of row {}", n + 1), 150, 40));
        press(app, KeyCode::Down);
    }
    press(app, KeyCode::Enter);
    for col in ["NAME", "KIND", "WORKLOAD", "GPU%", "USER"] {
        while app.sort.title() != col {
            press(app, KeyCode::Char('>'));
        }
        out.push(frame(app, &format!("sorted by {col}"), 120, 40));
    }
    press(app, KeyCode::Char('t'));
    out.push(frame(app, "tree", 120, 40));
    press(app, KeyCode::Char('t'));
    for f in ["/docker", "/mps"] {
        for c in f.chars() {
            press(app, KeyCode::Char(c));
        }
        press(app, KeyCode::Enter);
        out.push(frame(app, &format!("filter {f}"), 120, 40));
        press(app, KeyCode::Esc);
    }
    out.push(frame(app, "smallest", 80, 24));
    out
}

/// The walk through a replay of `path`, paused, one sample after another.
fn replay(path: &Path) -> Vec<Frame> {
    let rec = Recording::open(path).unwrap();
    let len = rec.len();
    let mut player = Player::new(rec, Instant::now());
    player.paused = true;
    let mut app = App::new(
        Mode::Replay {
            file: path.display().to_string(),
            position: 0,
            len,
            speed: 1.0,
            paused: true,
            start_ms: player.rec.entries[0].unix_ms,
        },
        Theme { mono: false },
    );
    walk(&mut app, len, |app, i| {
        player.pos = i;
        player.show(app);
    })
}

/// The world of the version-1 fixture: an H100 in MIG mode (three processes in one MIG
/// device) and one without (a trainer under bash with a worker child, Xorg whose VRAM the
/// driver does not report, an MPS server and a client with an escape in its name, NVML
/// utilization samples); an amdgpu card with two processes sharing a DRM client and a
/// suspended xe card; workloads of every kind.
fn world() -> Sandbox {
    const ID: &str = "4e9a6f0b6d7c1f1a0e8c8f5a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c";
    const UID_: &str = "8a1c5bc0_0cf5_4b4a_9f8b_0c2f6e7a5d11";
    let mut h100 = FakeDevice::h100(1).memory_used(&[20 << 30]);
    h100.uuid = "GPU-11111111-2222-3333-4444-555555555555".to_string();
    h100.pci_bus_id = "00000000:1A:00.0".to_string();
    let fake = FakeNvml::h100_mig_mixed()
        .device(h100)
        .process(FakeProcess::compute(1, 4242, 12 << 30))
        .process(FakeProcess::compute(1, 4243, 3 << 30))
        .process(FakeProcess::graphics(1, 5000, 0).not_available())
        .process(FakeProcess::compute(1, 6000, 30 << 20))
        .process(FakeProcess::compute(1, 6001, 1 << 30))
        .process(FakeProcess::mps(1, 6001, 1 << 30))
        .sample(FakeSample::new(1, 4242, [37, 12, 5, 0]));
    let bed = add_drm(Sandbox::with_nvml(&fake));
    let f = bed.fixture();
    let trainer =
        FakeProc::new(4242, "python3").cmdline(&["python3", "train.py", "--epochs", "10"]);
    f.process(&trainer.uid(0)).unwrap();
    for (pid, name) in [
        (4243, "pt_data_worker"),
        (5000, "Xorg"),
        (4200, "bash"),
        (6000, "nvidia-cuda-mps-server"),
        (23804, "vllm"),
        (23806, "vllm"),
        (23808, "vllm"),
    ] {
        f.process(&FakeProc::new(pid, name)).unwrap();
    }
    f.process(&FakeProc::new(6001, "cli\x1b[31ment").cmdline(&["./client", "--x"]))
        .unwrap();
    let pod = format!(
        "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/cri-containerd-{ID}.scope\n"
    );
    for (pid, cgroup) in [
        ("4242", format!("0::/system.slice/docker-{ID}.scope\n")),
        ("23804", pod),
        ("5000", "0::/system.slice/display-manager.service\n".into()),
        (
            "6001",
            "0::/system.slice/slurmstepd.scope/job_4242/step_0/user/task_0\n".into(),
        ),
        (
            "400",
            "0::/user.slice/user-1000.slice/session-2.scope\n".into(),
        ),
    ] {
        f.file(&format!("{pid}/cgroup"), &cgroup).unwrap();
    }
    f.stat(4242, "python3", 4200, 524_288).unwrap();
    f.stat(4243, "pt_data_worker", 4242, 1000).unwrap();
    f.stat(5000, "Xorg", 1, 2000).unwrap();
    f.stat(4200, "bash", 1, 100).unwrap();
    bed
}

/// A frame without its first line (live and replay say different things there) and its
/// last two (the status line and the keys).
fn body(f: &Frame) -> (&str, &[String]) {
    (&f.0, &f.1[1..f.1.len() - 2])
}

#[test]
fn a_recording_replays_every_screen_the_live_view_showed() {
    let bed = world();
    let mut c = collector(&bed, 100);
    let samples: Vec<Snapshot> = (0..3).map(|_| c.sample(Duration::from_secs(1))).collect();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rec.jsonl");
    let mut out = Vec::new();
    for s in &samples {
        write_line(&mut out, s).unwrap();
    }
    std::fs::write(&path, &out).unwrap();
    // Each line reads back to the very snapshot that was written.
    let mut rec = Recording::open(&path).unwrap();
    for (i, s) in samples.iter().enumerate() {
        assert_eq!(&rec.get(i).unwrap(), s, "sample {i}");
    }
    let mut app = live();
    let live = walk(&mut app, samples.len(), |app, i| {
        app.push(samples[i].clone())
    });
    let replayed = replay(&path);
    assert_eq!(live.len(), replayed.len());
    assert!(live.len() > 20, "{}", live.len());
    for (l, r) in live.iter().zip(&replayed) {
        assert_eq!(body(l), body(r));
    }
    let shown = live
        .iter()
        .flat_map(|f| &f.1)
        .cloned()
        .collect::<Vec<_>>()
        .join("\n");
    for needle in [
        "MIG device 0: 1c.3g.40gb GI 1 CI 0",
        "pod:8a1c5bc0-0cf5-4b4a-9f8b-0c2f6e7a5d11/containerd:4e9",
        "slurm:4242.0",
        "cli\\x1b[31ment",
        "engines: decoder 0%, encoder 5%, sm 37%",
        "shared with: 400 (counted there)",
        "suspended: not read (reading would wake it)",
    ] {
        assert!(shown.contains(needle), "{needle:?} never shown");
    }
}

/// A recording written by `hmn record` in format version 1 (when the snapshot had display
/// types of its own) replays into exactly the screens it showed then.
#[test]
fn a_version_1_recording_replays_the_screens_it_showed() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/top");
    let mut got = String::new();
    for (what, lines) in replay(&dir.join("recording-v1.jsonl")) {
        got.push_str(&format!("=== {what}\n"));
        for l in lines {
            got.push_str(&l);
            got.push('\n');
        }
    }
    let want = std::fs::read_to_string(dir.join("recording-v1.screens.txt")).unwrap();
    for (n, (g, w)) in got.lines().zip(want.lines()).enumerate() {
        assert_eq!(g, w, "line {} of the screens differs", n + 1);
    }
    assert_eq!(got.lines().count(), want.lines().count());
}
