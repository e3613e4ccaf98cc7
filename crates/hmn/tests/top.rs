//! `hmn record` and `hmn top`: recordings written and refused, replay errors, and the real
//! `hmn top` driven in tmux (keys sent with `send-keys`, the screen read with `capture-pane`):
//! sort, filter, select, detail, help, resize, quit, replay, the tree, and a hung driver.
//!
//! tmux is installed by `scripts/test.sh`. Without it the tmux tests are skipped with a loud
//! message, except as root (CI), where a missing tmux fails them.

use std::io::Write as _;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use hmn_testbed::{FakeDevice, FakeNvml, FakeProc, FakeProcess};
use serde_json::Value;

use crate::util::{Bed, stderr, stdout};

/// One H100 with a trainer (4242, under bash 4200), its worker (4243) and Xorg (5000).
pub(crate) fn bed() -> Bed {
    let fake = FakeNvml::new()
        .device(FakeDevice::h100(0).memory_used(&[20 << 30]))
        .process(FakeProcess::compute(0, 4242, 12 << 30))
        .process(FakeProcess::compute(0, 4243, 3 << 30))
        .process(FakeProcess::graphics(0, 5000, 256 << 20));
    let bed = Bed::with_nvml(&fake);
    let f = bed.fixture();
    f.process(&FakeProc::new(4242, "python3").cmdline(&["python3", "train.py"]))
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

fn lines(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn record_writes_one_snapshot_per_line_and_leaves_no_temporary() {
    let bed = bed();
    let file = bed.path("rec.jsonl");
    let o = bed.run(&[
        "record",
        "--interval",
        "200ms",
        "--duration",
        "700ms",
        "--max-processes",
        "2",
        file.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("samples in"), "{}", stderr(&o));
    let snaps = lines(&file);
    assert!((2..=6).contains(&snaps.len()), "{}", snaps.len());
    for s in &snaps {
        assert_eq!(s["format"], "hmn-top");
        assert_eq!(s["version"], 2);
        assert_eq!(s["interval_ms"], 200);
        assert_eq!(s["devices"][0]["name"], "NVIDIA H100 80GB HBM3");
        assert_eq!(s["devices"][0]["memory"]["used_bytes"], 20u64 << 30);
        // The cap keeps the two largest and says so.
        assert_eq!(s["processes"].as_array().unwrap().len(), 2);
        assert_eq!(s["processes_total"], 3);
        assert_eq!(s["processes_omitted"], 1);
        let p = &s["processes"][0];
        assert_eq!(
            (p["pid"].as_u64(), p["ppid"].as_u64()),
            (Some(4242), Some(4200))
        );
        assert_eq!(p["used_bytes"], 12u64 << 30);
        assert_eq!(p["rss_bytes"], 524_288u64 * 4096);
        assert_eq!(p["cmdline"], "python3 train.py");
        assert_eq!(s["ancestors"][0]["name"], "bash");
        // An ancestor carries its identity, which a signal from the tree view is checked against.
        assert!(
            s["ancestors"][0]["start_time"].is_u64(),
            "{}",
            s["ancestors"]
        );
        assert!(p["start_time"].is_u64(), "{p}");
    }
    let names: Vec<String> = std::fs::read_dir(bed.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("hmn-tmp"))
        .collect();
    assert!(names.is_empty(), "{names:?}");
}

#[test]
fn record_streams_to_stdout_and_stops_on_sigterm_with_the_file_in_place() {
    let bed = bed();
    let o = bed.run(&["record", "--interval", "100ms", "--duration", "250ms", "-"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.lines().count() >= 2, "{out}");
    assert!(
        out.lines()
            .all(|l| l.starts_with("{\"format\":\"hmn-top\""))
    );

    let file = bed.path("long.jsonl");
    let mut child = bed
        .cmd(&["record", "--interval", "100ms", file.to_str().unwrap()])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Samples are flushed as they are taken: the temporary file fills while recording.
    let deadline = Instant::now() + Duration::from_secs(10);
    let partial = loop {
        let tmp = std::fs::read_dir(bed.dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.to_string_lossy().ends_with(".hmn-tmp"));
        if let Some(t) = tmp {
            let text = std::fs::read_to_string(&t).unwrap();
            if text.lines().count() >= 2 {
                break text;
            }
        }
        assert!(Instant::now() < deadline, "no sample flushed");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(partial.ends_with('\n'), "only complete lines are flushed");
    assert!(!file.exists(), "FILE appears only when recording stops");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert!(child.wait().unwrap().success());
    assert!(lines(&file).len() >= 2);
}

#[test]
fn record_refuses_targets_that_are_not_regular_files() {
    let bed = bed();
    let fifo = bed.path("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let link = bed.path("link");
    std::os::unix::fs::symlink(bed.path("elsewhere"), &link).unwrap();
    for (target, words) in [(&fifo, "is a FIFO"), (&link, "is a symbolic link")] {
        let o = bed.run(&["record", "--duration", "1s", target.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(2));
        let e = stderr(&o);
        assert_eq!(e.lines().count(), 1, "{e}");
        assert!(e.contains(words), "{e}");
    }
    let o = bed.run(&["record", "--interval", "0s", "x"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn replay_refuses_malformed_recordings_with_file_and_line() {
    let bed = bed();
    let file = bed.path("rec.jsonl");
    bed.record(&file, "100ms", "150ms");
    let good = std::fs::read_to_string(&file).unwrap();
    let first = good.lines().next().unwrap();
    let bad = bed.path("bad.jsonl");
    std::fs::write(&bad, format!("{first}\nnot json\n{first}\n")).unwrap();
    let o = bed.run(&["top", "--replay", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(
        e.starts_with(&format!("hmn: {} line 2: not a snapshot", bad.display())),
        "{e}"
    );
    let o = bed.run(&["top", "--replay", bed.path("absent").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("absent"), "{}", stderr(&o));
    // A good recording without a terminal: refused in one line.
    let o = bed.run(&["top", "--replay", file.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("top: needs a terminal"),
        "{}",
        stderr(&o)
    );
    let o = bed.run(&["top"]);
    assert_eq!(o.status.code(), Some(2));
}

/// A tmux server of the test's own, running `hmn top` in one window.
pub(crate) struct Tmux {
    pub(crate) socket: String,
    /// Where the shell writes hmn's exit status when it exits.
    status: std::path::PathBuf,
}

static SERVERS: AtomicU32 = AtomicU32::new(0);

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

impl Tmux {
    /// Starts `hmn ARGS` in the bed's environment in a `w`×`h` window; `None` (after a loud
    /// message) when tmux is absent and this is not root.
    pub(crate) fn start(bed: &Bed, args: &[&str], w: u16, h: u16) -> Option<Tmux> {
        Tmux::start_with_stderr(bed, args, w, h, None)
    }

    /// As [`Tmux::start`], with hmn's stderr sent to a file (tmux may lose what a program
    /// prints just before it exits).
    fn start_with_stderr(
        bed: &Bed,
        args: &[&str],
        w: u16,
        h: u16,
        stderr: Option<&std::path::Path>,
    ) -> Option<Tmux> {
        Tmux::start_under(bed, &[], args, w, h, stderr)
    }

    /// As [`Tmux::start_with_stderr`], with hmn started by `wrapper` (`setsid`, …).
    pub(crate) fn start_under(
        bed: &Bed,
        wrapper: &[&str],
        args: &[&str],
        w: u16,
        h: u16,
        stderr: Option<&std::path::Path>,
    ) -> Option<Tmux> {
        let have = Command::new("tmux")
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success());
        if !have {
            assert!(
                !nix::unistd::geteuid().is_root(),
                "tmux is not installed: scripts/test.sh installs it (apt-get install tmux)"
            );
            // The loud skip message is the point.
            #[allow(clippy::print_stderr)]
            {
                eprintln!(
                    "\n*** SKIPPED: tmux is not installed; the end-to-end tests of `hmn top` did not run ***\n\
                 *** (apt-get install tmux, or run scripts/test.sh as root)                            ***\n"
                );
            }
            return None;
        }
        let socket = format!(
            "hmn-test-{}-{}",
            std::process::id(),
            SERVERS.fetch_add(1, Ordering::Relaxed)
        );
        let conf = bed.path("tmux.conf");
        std::fs::write(&conf, "set -g remain-on-exit on\nset -g status off\n").unwrap();
        let env_cmd = bed.cmd(&[]);
        let mut cmd = String::from("env");
        for (k, v) in env_cmd.get_envs() {
            if v.is_none() {
                cmd.push_str(&format!(" -u {}", k.to_string_lossy()));
            }
        }
        for (k, v) in env_cmd.get_envs() {
            if let Some(v) = v {
                cmd.push_str(&format!(
                    " {}={}",
                    k.to_string_lossy(),
                    shell_quote(&v.to_string_lossy())
                ));
            }
        }
        cmd.push_str(" TERM=xterm-256color");
        for w in wrapper {
            cmd.push_str(&format!(" {}", shell_quote(w)));
        }
        cmd.push_str(&format!(" {}", shell_quote(env!("CARGO_BIN_EXE_hmn"))));
        for a in args {
            cmd.push_str(&format!(" {}", shell_quote(a)));
        }
        if let Some(e) = stderr {
            cmd.push_str(&format!(" 2>{}", shell_quote(e.to_str().unwrap())));
        }
        // tmux does not always keep a dead pane's status: the shell writes it.
        let status = bed.path(&format!("{socket}.status"));
        cmd.push_str(&format!(
            "; echo $? > {}",
            shell_quote(status.to_str().unwrap())
        ));
        let ok = Command::new("tmux")
            .args(["-L", &socket, "-f", conf.to_str().unwrap()])
            .args([
                "new-session",
                "-d",
                "-s",
                "t",
                "-x",
                &w.to_string(),
                "-y",
                &h.to_string(),
                &cmd,
            ])
            .status()
            .unwrap()
            .success();
        assert!(ok, "tmux new-session failed");
        Some(Tmux { socket, status })
    }

    pub(crate) fn tmux(&self, args: &[&str]) -> String {
        let o = Command::new("tmux")
            .args(["-L", &self.socket])
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    pub(crate) fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-t", "t"])
    }

    fn keys(&self, keys: &[&str]) {
        let mut a = vec!["send-keys", "-t", "t"];
        a.extend(keys);
        self.tmux(&a);
    }

    /// Waits (up to 10 s) until the screen shows `needle`; returns the screen.
    pub(crate) fn wait_for(&self, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let s = self.screen();
            if s.contains(needle) {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "{needle:?} never shown (exited: {:?}):\n{s}",
                self.exited()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// hmn's exit status once it has exited.
    pub(crate) fn exited(&self) -> Option<i32> {
        let text = std::fs::read_to_string(&self.status).ok()?;
        text.trim().parse().ok()
    }

    /// Sends `q` and returns how long hmn took to exit, and its status.
    fn quit(&self) -> (Duration, i32) {
        let t = Instant::now();
        self.keys(&["q"]);
        loop {
            if let Some(code) = self.exited() {
                return (t.elapsed(), code);
            }
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "hmn top did not quit:\n{}",
                self.screen()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .status();
    }
}

fn row<'a>(screen: &'a str, needle: &str) -> &'a str {
    screen
        .lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("{needle:?} not in:\n{screen}"))
}

#[test]
fn tmux_top_sorts_filters_selects_helps_resizes_and_quits() {
    let bed = bed();
    let Some(t) = Tmux::start(&bed, &["top", "--interval", "300ms"], 100, 30) else {
        return;
    };
    let s = t.wait_for("4242");
    assert!(
        row(&s, "GPU0 NVIDIA H100 80GB HBM3").contains("util 37%"),
        "{s}"
    );
    assert!(row(&s, "PID").contains("VRAM▼"), "{s}");
    assert!(s.find("python3").unwrap() < s.find("Xorg").unwrap(), "{s}");
    // Sort by name (two columns left of VRAM... by `<` from VRAM: KIND, DEV, NAME).
    t.keys(&["<", "<", "<"]);
    let s = t.wait_for("NAME▲");
    assert!(
        s.find("pt_data_worker").unwrap() < s.find("python3").unwrap(),
        "{s}"
    );
    // Filter.
    t.keys(&["/", "X", "o", "r", "g", "Enter"]);
    let s = t.wait_for("filter \"Xorg\"");
    assert!(s.contains(" 5000 ") && !s.contains(" 4242 "), "{s}");
    t.keys(&["Escape"]);
    t.wait_for(" 4242 ");
    // Select the second row and open the detail pane.
    t.keys(&["Home", "Down", "Enter"]);
    let s = t.wait_for("detail (Enter closes)");
    assert!(
        s.contains("PID 4242  python3  user root  parent 4200"),
        "{s}"
    );
    assert!(s.contains("command: python3 train.py"), "{s}");
    t.keys(&["Enter", "?"]);
    let s = t.wait_for("x, F9      send SIGTERM");
    assert!(s.contains("hmn top — RAM and GPU memory, live"), "{s}");
    t.keys(&["Escape"]);
    // Resize to the smallest supported size: every part still there.
    t.tmux(&["resize-window", "-t", "t", "-x", "80", "-y", "24"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    let s = loop {
        let s = t.screen();
        if s.lines().count() == 24 && s.lines().last().unwrap_or("").starts_with("q quit") {
            break s;
        }
        assert!(Instant::now() < deadline, "no redraw at 80x24:\n{s}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(s.lines().next().unwrap().starts_with("RAM ["), "{s}");
    assert!(
        s.contains("GPU0 NVIDIA H100") && s.contains(" 4242 "),
        "{s}"
    );
    let (took, code) = t.quit();
    assert_eq!(code, 0);
    assert!(took < Duration::from_secs(1), "{took:?}");
    // The terminal is restored: the main screen is back (hmn's screen is gone).
    assert!(!t.screen().contains("q quit"), "{}", t.screen());
}

#[test]
fn tmux_top_reads_the_tree_parents_only_while_the_tree_is_shown_and_at_once_when_it_opens() {
    let bed = bed();
    // A 60 s interval: the parent line can only come from the sample the tree's opening asks
    // for, not from the next scheduled one.
    let Some(t) = Tmux::start(&bed, &["top", "--interval", "60s"], 100, 30) else {
        return;
    };
    let s = t.wait_for(" 4242 ");
    // bash (4200) holds no GPU memory: not listed, and not read, in the flat view.
    assert!(!s.contains("bash"), "{s}");
    t.keys(&["t"]);
    let s = t.wait_for("bash");
    let (parent, child) = (s.find(" 4200 ").unwrap(), s.find(" 4242 ").unwrap());
    assert!(parent < child, "the parent line comes first:\n{s}");
    assert!(
        row(&s, "4242").contains("└─") || row(&s, "4242").contains("├─"),
        "{s}"
    );
    let (_, code) = t.quit();
    assert_eq!(code, 0);
}

#[test]
fn tmux_top_stays_responsive_when_the_driver_hangs_and_quits_within_a_second() {
    let bed = bed();
    let flag = hmn_testbed::nvml_hang_flag(&bed.env.nvml);
    let Some(t) = Tmux::start(&bed, &["top", "--interval", "250ms"], 100, 30) else {
        return;
    };
    t.wait_for(" 4242 ");
    std::fs::write(&flag, "").unwrap();
    let first = t.wait_for("STALE since");
    let age = |s: &str| -> u64 {
        let l = row(s, "STALE since");
        let open = l.find(" (").unwrap() + 2;
        l[open..].split(' ').next().unwrap().parse().unwrap()
    };
    let a = age(&first);
    std::thread::sleep(Duration::from_millis(2200));
    let second = t.screen();
    assert!(
        age(&second) >= a + 2,
        "the screen kept updating:\n{first}\n{second}"
    );
    // Keys still work while the collector is stuck.
    t.keys(&["?"]);
    t.wait_for("x, F9      send SIGTERM");
    t.keys(&["Escape"]);
    let (took, code) = t.quit();
    let _ = std::fs::remove_file(&flag);
    assert_eq!(code, 0);
    assert!(took < Duration::from_secs(1), "{took:?}");
}

#[test]
fn tmux_top_replays_a_recording_with_pause_and_seek() {
    let bed = bed();
    let file = bed.path("night.jsonl");
    bed.record(&file, "100ms", "1s");
    // A crash mid-line: the last line is cut off.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .unwrap();
    f.write_all(b"{\"format\":\"hmn-top\",\"ver").unwrap();
    drop(f);
    let errors = bed.path("stderr.txt");
    let args = ["top", "--replay", file.to_str().unwrap()];
    let Some(t) = Tmux::start_with_stderr(&bed, &args, 110, 30, Some(&errors)) else {
        return;
    };
    let s = t.wait_for("replay night.jsonl");
    assert!(s.contains(" 4242 "), "{s}");
    t.keys(&["space"]);
    t.wait_for("PAUSED");
    t.keys(&["e"]);
    let s = t.screen();
    let n = lines_of(&file);
    t.wait_for(&format!("{n}/{n}"));
    t.keys(&["b"]);
    t.wait_for(&format!("1/{n}"));
    assert!(s.contains("PAUSED"), "{s}");
    let (_, code) = t.quit();
    assert_eq!(code, 0);
    // After the view, the warning about the cut-off line remains on stderr.
    let e = std::fs::read_to_string(&errors).unwrap();
    assert_eq!(
        e,
        format!(
            "hmn: warning: {}: line {} is cut off (the recording stopped mid-line); ignored\n",
            file.display(),
            n + 1
        )
    );
}

fn lines_of(path: &std::path::Path) -> usize {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| l.ends_with('}'))
        .count()
}
