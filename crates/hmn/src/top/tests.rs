//! Rendering tests: snapshots collected from the test bed's fixtures (the fake NVML through the
//! real `dlopen`, the DRM fixture world, a recording read back) drawn on ratatui's test
//! backend, asserting the text on the screen.

// Test helpers: a failed step stops the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use hmn_testbed::{FakeDevice, FakeGpu, FakeNvml, FakeProc, FakeProcess, Sandbox};
use hypomnesis::{ProbeOptions, Roots};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyEventState, KeyModifiers};
use ratatui::style::Color;

use super::app::{App, Mode};
use super::collect::{CollectOptions, Collector};
use super::player::Player;
use super::recording::{Recording, write_line};
use super::snapshot::{Limits, Snapshot};
use super::theme::Theme;
use crate::health::now_ms;

pub(super) fn opts(bed: &Sandbox) -> ProbeOptions {
    ProbeOptions::default()
        .roots(
            Roots::system()
                .with_proc(bed.proc())
                .with_sys(bed.world.sys.root()),
        )
        .nvml_library(bed.env.nvml.clone())
        .nvidia_smi(bed.env.nvidia_smi.clone())
}

pub(super) fn collector(bed: &Sandbox, max: usize) -> Collector {
    Collector::new(
        opts(bed),
        CollectOptions {
            limits: Limits { max_processes: max },
            rescan: Some(Duration::from_secs(5)),
        },
    )
}

/// Two H100s: a trainer (pid 4242, child of bash 4200) with a worker child (4243) on both
/// devices, and one process whose VRAM the driver does not report.
fn nvidia_bed() -> Sandbox {
    let fake = FakeNvml::new()
        .device(FakeDevice::h100(0).memory_used(&[20 << 30]))
        .device(FakeDevice::h100_bare(1))
        .process(FakeProcess::compute(0, 4242, 12 << 30))
        .process(FakeProcess::compute(0, 4243, 3 << 30))
        .process(FakeProcess::compute(1, 4243, 1 << 30))
        .process(FakeProcess::graphics(1, 5000, 0).not_available());
    let bed = Sandbox::with_nvml(&fake);
    let f = bed.fixture();
    f.process(
        &FakeProc::new(4242, "python3")
            .cmdline(&["python3", "train.py", "--epochs", "10"])
            .uid(0),
    )
    .unwrap();
    f.process(&FakeProc::new(4243, "pt_data_worker")).unwrap();
    f.process(&FakeProc::new(5000, "Xorg")).unwrap();
    f.process(&FakeProc::new(4200, "bash")).unwrap();
    bed.fixture().stat(4242, "python3", 4200, 524_288).unwrap();
    bed.fixture()
        .stat(4243, "pt_data_worker", 4242, 1000)
        .unwrap();
    bed.fixture().stat(5000, "Xorg", 1, 2000).unwrap();
    bed.fixture().stat(4200, "bash", 1, 100).unwrap();
    bed
}

/// [`nvidia_bed`], its collector, and a live view showing its first sample (the bed is kept
/// alive with them).
pub(super) fn nvidia_shown() -> (Sandbox, Collector, App) {
    let bed = nvidia_bed();
    let mut c = collector(&bed, 100);
    let mut app = live();
    app.push(c.sample(Duration::from_secs(1)));
    (bed, c, app)
}

pub(super) fn live() -> App {
    App::new(
        Mode::Live {
            interval: Duration::from_secs(1),
            paused: false,
        },
        Theme { mono: false },
    )
}

fn screen(app: &mut App, w: u16, h: u16) -> (String, ratatui::buffer::Buffer) {
    let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
    term.draw(|f| {
        super::view::draw(&mut super::screen::Canvas::new(f.buffer_mut()), app);
    })
    .unwrap();
    let buf = term.backend().buffer().clone();
    let text = (0..h)
        .map(|y| (0..w).map(|x| buf[(x, y)].symbol()).collect::<String>())
        .collect::<Vec<_>>()
        .join("\n");
    (text, buf)
}

pub(super) fn text(app: &mut App, w: u16, h: u16) -> String {
    screen(app, w, h).0
}

pub(super) fn press(app: &mut App, code: KeyCode) {
    app.key(KeyEvent {
        code,
        modifiers: KeyModifiers::NONE,
        kind: KeyEventKind::Press,
        state: KeyEventState::NONE,
    });
}

fn row_of<'a>(screen: &'a str, needle: &str) -> &'a str {
    screen
        .lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("{needle:?} not on screen:\n{screen}"))
}

/// A GB10 (unified memory: both NVML memory calls NOT_SUPPORTED): the panel's bar and figures
/// are its pool — host RAM, used the sum of its processes (a lower bound) — never the `? / ?`
/// of the driver's own memory, and the history follows the pool.
#[test]
fn a_unified_memory_device_is_drawn_from_its_pool() {
    let fake = FakeNvml::new()
        .device(FakeDevice::gb10(0))
        .process(FakeProcess::compute(0, 4242, 60 << 30));
    let bed = Sandbox::with_nvml(&fake);
    // A DGX Spark's meminfo (KiB): 121.7 GiB total, 113.1 GiB available.
    bed.fixture().meminfo(127_600_748, 118_566_368).unwrap();
    bed.fixture()
        .process(&FakeProc::new(4242, "python3"))
        .unwrap();
    let mut c = collector(&bed, 100);
    let mut app = live();
    let snap = c.sample(Duration::from_secs(1));
    let points = super::recording::device_points(&snap);
    let fraction = points[0].memory.expect("the pool's fraction");
    assert!((fraction - 60.0 / 121.69).abs() < 0.01, "{fraction}");
    app.push(snap);
    app.now_ms = now_ms();
    let s = text(&mut app, 140, 30);
    let mem = row_of(&s, "unified with host RAM");
    assert!(mem.contains("≥60 GiB / 121.7 GiB"), "{s}");
    assert!(!mem.contains("? / ?"), "{s}");
}

#[test]
fn the_fake_nvml_draws_devices_processes_and_host_memory() {
    let (_bed, _c, mut app) = nvidia_shown();
    app.now_ms = now_ms();
    let s = text(&mut app, 120, 30);
    let gpu0 = row_of(&s, "GPU0 NVIDIA H100 80GB HBM3");
    assert!(
        gpu0.contains("util 37%  41°C  71.2 W  1980/2619 MHz"),
        "{gpu0}"
    );
    let mem0 = s.lines().nth(2).unwrap();
    assert!(mem0.contains("20 GiB + 540 MiB rsvd / 79.6 GiB"), "{s}");
    // The bare device: every telemetry value unknown, shown as `?`, never 0.
    let gpu1 = row_of(&s, "GPU1 NVIDIA H100");
    assert!(gpu1.contains("util ?  ?°C  ? W  ?/? MHz"), "{gpu1}");
    // Host RAM from the fixture's meminfo (24,684,084 kB total).
    assert!(s.lines().next().unwrap().contains("/ 23.5 GiB"), "{s}");
    // Rows: largest VRAM first, RSS from stat (524288 pages of 4 KiB), unknown VRAM as `?`.
    let header = row_of(&s, "PID");
    for col in [
        "USER", "NAME", "DEV", "KIND", "VRAM▼", "RSS", "GPU%", "WORKLOAD",
    ] {
        assert!(header.contains(col), "{header}");
    }
    let trainer = row_of(&s, "4242");
    assert!(trainer.contains("root"), "{trainer}");
    assert!(trainer.contains("python3"), "{trainer}");
    assert!(trainer.contains("12 GiB"), "{trainer}");
    assert!(trainer.contains("2 GiB"), "{trainer}");
    let xorg = row_of(&s, "Xorg");
    assert!(xorg.contains(" G "), "{xorg}");
    let cells: Vec<&str> = xorg.split_whitespace().collect();
    assert!(cells.contains(&"?"), "unknown VRAM is `?`: {xorg}");
    let order: Vec<usize> = ["4242", "4243", "5000"]
        .iter()
        .map(|p| s.find(&format!(" {p} ")).unwrap())
        .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{s}");
    assert!(s.contains("q quit"), "{s}");
}

#[test]
fn eighty_by_twenty_four_keeps_every_part_readable() {
    let bed = nvidia_bed();
    let mut app = live();
    app.push(collector(&bed, 100).sample(Duration::from_secs(1)));
    let s = text(&mut app, 80, 24);
    let lines: Vec<&str> = s.lines().collect();
    assert_eq!(lines.len(), 24);
    assert!(lines[0].starts_with("RAM ["), "{s}");
    assert!(s.contains("GPU0 NVIDIA H100 80GB HBM3"), "{s}");
    assert!(s.contains("GPU1 NVIDIA H100 80GB HBM3"), "{s}");
    assert!(row_of(&s, "PID").contains("VRAM▼"), "{s}");
    assert!(row_of(&s, "4242").contains("12 GiB"), "{s}");
    assert!(lines[22].contains("4 rows"), "status line: {s}");
    assert!(
        lines[23].starts_with("q quit ? help / filter"),
        "footer: {s}"
    );
    // Smaller still: the devices shrink to one line each, the table stays.
    let s = text(&mut app, 80, 14);
    assert!(
        row_of(&s, "GPU0").contains("] 20 GiB / 79.6 GiB  util 37%"),
        "{s}"
    );
    assert!(s.contains("4242"), "{s}");
}

#[test]
fn keys_sort_filter_tree_detail_and_help() {
    let bed = nvidia_bed();
    let mut app = live();
    app.push(collector(&bed, 100).sample(Duration::from_secs(1)));
    // Sort by RSS (the next column after VRAM), then reverse.
    press(&mut app, KeyCode::Char('>'));
    let s = text(&mut app, 120, 30);
    assert!(row_of(&s, "PID").contains("RSS▼"), "{s}");
    assert!(s.find("4242").unwrap() < s.find("Xorg").unwrap(), "{s}");
    press(&mut app, KeyCode::Char('r'));
    let s = text(&mut app, 120, 30);
    assert!(row_of(&s, "PID").contains("RSS▲"), "{s}");
    assert!(s.find("Xorg").unwrap() < s.find("4242").unwrap(), "{s}");
    // Filter by part of a command line.
    for c in "/epochs".chars() {
        press(&mut app, KeyCode::Char(c));
    }
    press(&mut app, KeyCode::Enter);
    let s = text(&mut app, 120, 30);
    assert!(s.contains("4242") && !s.contains("Xorg"), "{s}");
    assert!(s.contains("filter \"epochs\""), "{s}");
    press(&mut app, KeyCode::Esc);
    // Tree: bash (no GPU memory) above the trainer, the worker under it.
    press(&mut app, KeyCode::Char('t'));
    let s = text(&mut app, 120, 30);
    let bash = s.find("bash").unwrap();
    let trainer = row_of(&s, "4242");
    assert!(trainer.contains("└─ python3"), "{s}");
    assert!(row_of(&s, "4243").contains("   └─ pt_data_worker"), "{s}");
    assert!(bash < s.find("4242").unwrap(), "{s}");
    press(&mut app, KeyCode::Char('t'));
    // Detail of the selected (first) row, sorted by VRAM again.
    press(&mut app, KeyCode::Char('<'));
    press(&mut app, KeyCode::Home);
    press(&mut app, KeyCode::Enter);
    let s = text(&mut app, 100, 40);
    assert!(s.contains("command: python3 train.py --epochs 10"), "{s}");
    assert!(s.contains("parent 4200"), "{s}");
    assert!(
        s.contains("GPU0 NVIDIA H100 80GB HBM3: VRAM 12 GiB (compute, nvml)"),
        "{s}"
    );
    // Selection moves; help covers the screen and any key closes it.
    press(&mut app, KeyCode::Down);
    let s = text(&mut app, 100, 40);
    assert!(s.contains("PID 4243"), "{s}");
    press(&mut app, KeyCode::Char('?'));
    let s = text(&mut app, 100, 40);
    assert!(s.contains("x, F9      send SIGTERM"), "{s}");
    press(&mut app, KeyCode::Char('z'));
    assert!(!text(&mut app, 100, 40).contains("send SIGTERM"));
    // A signal asks first.
    press(&mut app, KeyCode::Char('X'));
    let s = text(&mut app, 100, 40);
    assert!(s.contains("Send SIGKILL to 4243 (pt_data_worker)?"), "{s}");
}

/// Adds an amdgpu card with two clients sharing one DRM client, and a suspended xe card.
pub(super) fn add_drm(bed: Sandbox) -> Sandbox {
    bed.gpu(FakeGpu::amdgpu("0000:03:00.0", 1, 129))
        .gpu(FakeGpu::xe_dgpu("0000:04:00.0", 2, 130).suspended());
    let era_d = hmn_testbed::fdinfo_sample("amdgpu-eraD.txt")
        .unwrap()
        .replace("0000:11:00.0", "0000:03:00.0");
    bed.client(400, "blender", &[(5, "renderD129", &era_d)])
        .client(401, "blender", &[(5, "renderD129", &era_d)]);
    bed
}

fn drm_bed() -> Sandbox {
    add_drm(Sandbox::new())
}

#[test]
fn the_drm_world_shows_regions_clients_and_a_suspended_card_unread() {
    let bed = drm_bed();
    let mut c = collector(&bed, 100);
    let mut app = live();
    app.push(c.sample(Duration::from_secs(1)));
    let s = text(&mut app, 120, 30);
    let amd = row_of(&s, "GPU0");
    assert!(amd.contains("util 7%  45°C  21.0 W"), "{s}");
    assert!(
        s.contains("6.3 GiB / 8 GiB  GTT 57.7 MiB / 15.5 GiB  vis 142 MiB / 256 MiB"),
        "{s}"
    );
    assert!(
        row_of(&s, "GPU1").contains("suspended: not read (reading would wake it)"),
        "{s}"
    );
    assert!(row_of(&s, " 400 ").contains("58.7 MiB"), "{s}");
    assert!(row_of(&s, " 401 ").contains("sh 400"), "{s}");
    // Engine use needs two samples.
    assert!(row_of(&s, " 400 ").contains(" ? "), "{s}");
    app.push(c.sample(Duration::from_secs(1)));
    press(&mut app, KeyCode::Enter);
    let s = text(&mut app, 140, 30);
    assert!(s.contains("vram: resident 58.7 MiB, total 58.7 MiB"), "{s}");
    assert!(s.contains("gtt: resident 2 MiB, total 2 MiB"), "{s}");
    assert!(s.contains("DRM clients: 185"), "{s}");
    press(&mut app, KeyCode::Down);
    let s = text(&mut app, 140, 30);
    assert!(s.contains("shared with: 400 (counted there)"), "{s}");
}

#[test]
fn no_gpu_shows_the_host_and_one_line_saying_why() {
    let bed = Sandbox::new();
    let mut app = live();
    app.push(collector(&bed, 100).sample(Duration::from_secs(1)));
    let s = text(&mut app, 100, 24);
    assert!(s.lines().next().unwrap().contains("RAM ["), "{s}");
    let why = row_of(&s, "no GPU found");
    assert!(why.contains("NVML: "), "{why}");
    assert!(s.contains("no process holds GPU memory"), "{s}");
}

#[test]
fn monochrome_draws_no_colour_at_all() {
    let bed = nvidia_bed();
    let mut app = live();
    app.theme = Theme { mono: true };
    app.push(collector(&bed, 100).sample(Duration::from_secs(1)));
    press(&mut app, KeyCode::Char('?'));
    let (_, buf) = screen(&mut app, 100, 30);
    for cell in buf.content() {
        assert_eq!((cell.fg, cell.bg), (Color::Reset, Color::Reset), "{cell:?}");
    }
    let mut app = live();
    app.push(collector(&bed, 100).sample(Duration::from_secs(1)));
    let (_, buf) = screen(&mut app, 100, 30);
    assert!(
        buf.content().iter().any(|c| c.fg != Color::Reset),
        "colour when allowed"
    );
}

#[test]
fn stale_data_is_said_and_the_cap_is_reported() {
    let bed = nvidia_bed();
    let mut app = live();
    app.push(collector(&bed, 2).sample(Duration::from_secs(1)));
    let taken = app.snap().unwrap().unix_ms;
    app.now_ms = taken + 500;
    let s = text(&mut app, 120, 30);
    assert!(s.contains("2 more not shown (largest 2 of 4 kept)"), "{s}");
    // The next collection started 1 s after the last and has not returned 7 s later.
    app.busy_since_ms = taken + 1000;
    app.now_ms = taken + 3000;
    assert!(
        !text(&mut app, 120, 30).contains("STALE"),
        "2 s is within 2 intervals"
    );
    app.now_ms = taken + 7000;
    let s = text(&mut app, 120, 30);
    let line = row_of(&s, "STALE since");
    let clock = &super::clock::utc(taken)[11..];
    assert!(
        line.starts_with(&format!(
            "STALE since {clock} (7 s): a GPU driver call has not returned"
        )),
        "{line}"
    );
    // Fresh again once the collection returns.
    app.busy_since_ms = 0;
    assert!(!text(&mut app, 120, 30).contains("STALE"));
}

#[test]
fn a_recording_replays_into_the_same_view() {
    let bed = nvidia_bed();
    let mut c = collector(&bed, 100);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("night.jsonl");
    let mut out = Vec::new();
    let mut live_app = live();
    for _ in 0..3 {
        let s = c.sample(Duration::from_secs(1));
        write_line(&mut out, &s).unwrap();
        live_app.push(s);
    }
    out.extend(b"{\"format\":\"hmn-top\",\"vers"); // cut off by a crash
    std::fs::write(&path, &out).unwrap();
    let rec = Recording::open(&path).unwrap();
    assert_eq!(rec.len(), 3);
    assert!(rec.warning.as_ref().unwrap().contains("line 4 is cut off"));
    let mut player = Player::new(rec, Instant::now());
    let mut app = App::new(
        Mode::Replay {
            file: path.display().to_string(),
            position: 0,
            len: 3,
            speed: 1.0,
            paused: false,
            start_ms: 0,
        },
        Theme { mono: false },
    );
    player.seek_end(true, Instant::now());
    player.show(&mut app);
    let replayed = text(&mut app, 120, 30);
    assert!(replayed.contains("replay night.jsonl"), "{replayed}");
    assert!(replayed.contains("3/3"), "{replayed}");
    assert!(
        replayed.contains("space pause ←→ seek [] speed"),
        "{replayed}"
    );
    // Below the host line, the view is the live one.
    let live_screen = text(&mut live_app, 120, 30);
    let body = |s: &str| {
        s.lines()
            .skip(1)
            .take(10)
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    assert_eq!(body(&replayed), body(&live_screen));
}

#[test]
fn a_fifo_command_line_never_blocks_the_collector() {
    let bed = nvidia_bed();
    let cmd = bed.proc().join("5000/cmdline");
    std::fs::remove_file(&cmd).unwrap();
    nix::unistd::mkfifo(&cmd, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let s: Snapshot = collector(&bed, 100).sample(Duration::from_secs(1));
    let xorg = s.processes.iter().find(|p| p.gpu.pid == 5000).unwrap();
    assert_eq!(xorg.cmdline, None);
    assert_eq!(xorg.gpu.name, Some("Xorg".into()));
}

#[test]
fn a_recordings_file_name_reaches_the_header_escaped() {
    let mut app = App::new(
        Mode::Replay {
            file: "\x1b]2;pwned\x07\u{9b}1m.jsonl".to_string(),
            position: 0,
            len: 1,
            speed: 1.0,
            paused: false,
            start_ms: 0,
        },
        Theme { mono: false },
    );
    app.push(Snapshot::empty(now_ms(), 1000));
    let (screen, buf) = screen(&mut app, 120, 30);
    assert!(screen.contains("ned\\x07\\x9b1m.jsonl"), "{screen}");
    for cell in buf.content() {
        assert!(
            !cell.symbol().chars().any(char::is_control),
            "a control character in a cell: {:?}",
            cell.symbol()
        );
    }
}

/// A table row is drawn again from its kept text only while everything it shows is unchanged:
/// after each change (RSS, VRAM, owner, width, sort, a process gone), the screen is what a
/// fresh view with nothing kept draws.
#[test]
fn a_kept_row_follows_every_change_of_what_it_shows() {
    let (_bed, mut c, mut app) = nvidia_shown();
    app.now_ms = now_ms();
    let fresh = |app: &App, w: u16| {
        let mut f = app.clone();
        f.drawn_rows = Default::default();
        text(&mut f, w, 30)
    };
    let first = text(&mut app, 120, 30);
    assert_eq!(first, fresh(&app, 120));
    fn snap(app: &mut App) -> &mut Snapshot {
        app.snap_mut().unwrap()
    }
    type Change = Box<dyn Fn(&mut App)>;
    // A new sample of the same figures (NVML's utilization samples start later) is drawn from
    // the kept text; what follows changes a cell each.
    let mut again = c.sample(Duration::from_secs(1));
    again.processes.clone_from(&app.snap().unwrap().processes);
    for p in &mut again.processes {
        if let Some(u) = p.gpu.utilization.as_mut() {
            u.since_unix_us += 1_000_000;
        }
    }
    *app.snap_mut().unwrap() = again;
    let built = app.drawn_rows.built;
    assert_eq!(text(&mut app, 120, 30), first);
    assert_eq!(
        app.drawn_rows.built, built,
        "every row drawn from its kept text"
    );
    let changes: Vec<(&str, Change)> = vec![
        (
            "sm",
            Box::new(|a| {
                let u = snap(a).processes[0].gpu.utilization.as_mut();
                u.expect("the fake NVML samples utilization").sm_percent = 93;
            }),
        ),
        (
            "rss",
            Box::new(|a| snap(a).processes[0].rss_bytes = Some(77 << 20)),
        ),
        (
            "vram",
            Box::new(|a| snap(a).processes[1].gpu.used_bytes = Some(5 << 30)),
        ),
        (
            "user",
            Box::new(|a| snap(a).processes[0].gpu.user = Some("alice".into())),
        ),
        ("sort", Box::new(|a| press(a, KeyCode::Char('<')))),
        (
            "gone",
            Box::new(|a| {
                snap(a).processes.remove(0);
            }),
        ),
    ];
    let mut last = first;
    for (what, change) in &changes {
        change(&mut app);
        let now = text(&mut app, 120, 30);
        assert_ne!(now, last, "{what} changed nothing on the screen");
        assert_eq!(now, fresh(&app, 120), "after {what}");
        last = now;
    }
    assert_eq!(
        text(&mut app, 100, 30),
        fresh(&app, 100),
        "a narrower screen"
    );
}

/// One RAM series per process (the worker is listed on both devices) and one VRAM series per
/// process and device; a process no longer listed is no longer followed.
#[test]
fn trends_follow_the_listed_processes_only() {
    let bed = nvidia_bed();
    let mut c = collector(&bed, 100);
    let s = c.sample(Duration::from_secs(1));
    let mut t = super::growth::Trends::default();
    t.observe(&s);
    // RAM: 4242, 4243, 5000; VRAM: 4242 on 0, 4243 on 0 and 1 (5000's is unknown).
    assert_eq!(t.series(), (3, 3));
    let mut later = s.clone();
    later.unix_ms += 1000;
    later.processes.retain(|r| r.gpu.pid != 4243);
    t.observe(&later);
    assert_eq!(t.series(), (2, 1));
}
