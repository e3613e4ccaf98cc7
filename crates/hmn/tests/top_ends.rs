//! `hmn top` ends when its terminal goes away or a stop signal comes, whatever it is doing:
//! the tmux server killed under a live view and a replay (the pty hangs up, as on an ssh drop),
//! in a session of hmn's own (no SIGHUP then: only the hang-up itself says so), and SIGTERM /
//! SIGQUIT while a driver call hangs, with the terminal restored, and SIGTERM while the terminal
//! has stopped reading (a pty nobody reads: a stalled ssh session). Each hmn is found by pid and
//! must be gone, not spinning in an orphaned loop.

use std::time::{Duration, Instant};

use crate::top::{Tmux, bed};

/// Whether `pid` is still running (a zombie waiting for its parent has ended).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rfind(')')
                .map(|c| s[c + 2..].starts_with('Z'))
                .map(|z| !z)
        })
        .unwrap_or(false)
}

/// The pid of the hmn in `t`'s pane.
pub(crate) fn hmn_of(t: &Tmux) -> u32 {
    let pane: u32 = t
        .tmux(&["display-message", "-p", "-t", "t", "#{pane_pid}"])
        .trim()
        .parse()
        .unwrap();
    let pids = crate::util::named_below(pane, "hmn");
    assert_eq!(pids.len(), 1, "hmn below the pane's shell {pane}: {pids:?}");
    pids[0]
}

/// Waits up to `limit` for `pid` to end; how long it took.
fn ends_within(pid: u32, limit: Duration) -> Duration {
    let t = Instant::now();
    while running(pid) {
        assert!(
            t.elapsed() < limit,
            "hmn {pid} still runs {limit:?} later: {}",
            std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    t.elapsed()
}

/// Kills `t`'s tmux server and waits (up to 3 s) for the hmn in its pane to end.
pub(crate) fn kill_server_and_expect_the_end(t: &Tmux) {
    let pid = hmn_of(t);
    t.tmux(&["kill-server"]);
    ends_within(pid, Duration::from_secs(3));
}

#[test]
fn top_ends_when_its_terminal_goes_away() {
    let bed = bed();
    let Some(t) = Tmux::start(&bed, &["top", "--interval", "250ms"], 100, 30) else {
        return;
    };
    t.wait_for(" 4242 ");
    kill_server_and_expect_the_end(&t);
}

#[test]
fn top_in_a_session_of_its_own_ends_on_the_hang_up_alone() {
    // `setsid`: the pane's pty is not hmn's controlling terminal, so the kernel sends no SIGHUP
    // when it hangs up; hmn must notice the hang-up itself.
    let bed = bed();
    let Some(t) = Tmux::start_under(
        &bed,
        &["setsid"],
        &["top", "--interval", "250ms"],
        100,
        30,
        None,
    ) else {
        return;
    };
    t.wait_for(" 4242 ");
    kill_server_and_expect_the_end(&t);
}

#[test]
fn a_replay_ends_when_its_terminal_goes_away() {
    let bed = bed();
    let file = bed.path("rec.jsonl");
    bed.record(&file, "100ms", "300ms");
    let args = ["top", "--replay", file.to_str().unwrap()];
    let Some(t) = Tmux::start_under(&bed, &["setsid"], &args, 100, 30, None) else {
        return;
    };
    t.wait_for("replay rec.jsonl");
    kill_server_and_expect_the_end(&t);
    let Some(t) = Tmux::start(&bed, &args, 100, 30) else {
        return;
    };
    t.wait_for("replay rec.jsonl");
    kill_server_and_expect_the_end(&t);
}

#[test]
fn sigterm_and_sigquit_end_top_while_the_driver_hangs_and_restore_the_terminal() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    for sig in [Signal::SIGTERM, Signal::SIGQUIT] {
        let bed = bed();
        let flag = hmn_testbed::nvml_hang_flag(&bed.env.nvml);
        // The pane lives on after hmn (tmux reports no cursor for a dead pane).
        let linger = ["sh", "-c", "\"$@\"; sleep 10", "sh"];
        let args = ["top", "--interval", "250ms"];
        let Some(t) = Tmux::start_under(&bed, &linger, &args, 100, 30, None) else {
            return;
        };
        t.wait_for(" 4242 ");
        std::fs::write(&flag, "").unwrap();
        t.wait_for("STALE since");
        let pid = hmn_of(&t);
        kill(Pid::from_raw(pid as i32), sig).unwrap();
        let took = ends_within(pid, Duration::from_secs(3));
        let _ = std::fs::remove_file(&flag);
        assert!(took < Duration::from_millis(1500), "{sig}: {took:?}");
        // The main screen is back, with the cursor shown.
        let flags = t.tmux(&[
            "display-message",
            "-p",
            "-t",
            "t",
            "#{alternate_on} #{cursor_flag}",
        ]);
        assert_eq!(flags.trim(), "0 1", "{sig}: alternate screen, cursor");
        assert!(!t.screen().contains("q quit"), "{sig}:\n{}", t.screen());
    }
}

/// The threads of `pid` asleep in a terminal write (`n_tty_write`, `wait_woken`, …).
fn waits_on_the_terminal(pid: u32) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("wchan")).ok())
        .any(|w| w.contains("tty") || w.contains("wait_woken"))
}

#[test]
fn sigterm_ends_top_while_its_terminal_has_stopped_reading() {
    use nix::pty::{Winsize, openpty};
    use nix::sys::signal::{Signal, kill};
    use nix::sys::termios::{LocalFlags, tcgetattr};
    use nix::unistd::Pid;
    let bed = bed();
    let size = Winsize {
        ws_row: 50,
        ws_col: 160,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let pty = openpty(Some(&size), None).unwrap();
    let tty = nix::unistd::ttyname(&pty.slave).unwrap();
    // `setsid -c`: a session of its own with the pty as its controlling terminal, so a resize
    // sends it SIGWINCH (a full redraw each time).
    let hmn = bed.cmd(&["top", "--interval", "100ms"]);
    let child = std::process::Command::new("setsid")
        .arg("-c")
        .arg(hmn.get_program())
        .args(hmn.get_args())
        .envs(hmn.get_envs().filter_map(|(k, v)| v.map(|v| (k, v))))
        .env("TERM", "xterm-256color")
        .stdin(pty.slave.try_clone().unwrap())
        .stdout(pty.slave.try_clone().unwrap())
        .stderr(pty.slave.try_clone().unwrap())
        .spawn()
        .unwrap();
    let pid = child.id();
    // Whatever happens below, no hmn is left blocked on a pty nobody reads.
    struct Reap(std::process::Child);
    impl Drop for Reap {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _reap = Reap(child);
    // Nobody reads the master: resizes until a write blocks (the pty's buffer full).
    let t = Instant::now();
    let mut i = 0u32;
    while !waits_on_the_terminal(pid) {
        assert!(
            t.elapsed() < Duration::from_secs(20) && running(pid),
            "hmn {pid} never blocked on its terminal"
        );
        let (rows, cols) = (40 + i % 30, 120 + i % 80);
        let _ = std::process::Command::new("stty")
            .arg("-F")
            .arg(&tty)
            .args(["rows", &rows.to_string(), "cols", &cols.to_string()])
            .status();
        i += 1;
        std::thread::sleep(Duration::from_millis(20));
    }
    kill(Pid::from_raw(pid as i32), Signal::SIGTERM).unwrap();
    let took = ends_within(pid, Duration::from_secs(5));
    assert!(took < Duration::from_millis(2000), "{took:?}");
    // Raw mode is off again: it needs no write.
    let modes = tcgetattr(&pty.slave).unwrap();
    assert!(modes.local_flags.contains(LocalFlags::ICANON), "{modes:?}");
    drop(pty.master);
}
