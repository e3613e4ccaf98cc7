//! `hmn top`: the terminal, the event loop, and the two sources it shows (the collector
//! thread, or a recording).
//!
//! The loop owns the terminal and redraws on its own clock (on a new snapshot, an event, and
//! every second): it never calls a GPU backend, so a driver call that hangs on the collector
//! thread shows as "STALE since …" while keys still work. The terminal is restored on `q`,
//! Ctrl+C, SIGTERM/SIGHUP/SIGINT, on an error, and after a panic in any thread (a panic hook
//! restores it before the message is printed, then exits).

use std::io::{self, IsTerminal as _, Stdout};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use hypomnesis::{ProbeOptions, Roots};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::event::{self, Event, KeyEventKind};
use ratatui::crossterm::{cursor, execute, terminal};

use super::app::{Action, App, Confirm, Mode, Sig};
use super::collect::{CollectOptions, Control, now_ms, spawn};
use super::player::Player;
use super::recording::Recording;
use super::snapshot::{Limits, Snapshot};
use super::theme::Theme;
use crate::args::TopArgs;

/// Puts the terminal back: raw mode off, main screen, cursor shown, mouse released. Safe to
/// call more than once.
fn restore() {
    let _ = terminal::disable_raw_mode();
    let _ = execute!(
        io::stdout(),
        ratatui::crossterm::event::DisableMouseCapture,
        terminal::LeaveAlternateScreen,
        cursor::Show
    );
}

/// Restores the terminal when dropped (an early return, an error, an unwinding panic).
struct Guard;

impl Drop for Guard {
    fn drop(&mut self) {
        restore();
    }
}

/// A panic in any thread restores the terminal, prints the message, and ends hmn.
fn install_panic_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore();
        previous(info);
        std::process::exit(101);
    }));
}

enum Source {
    Live {
        rx: mpsc::Receiver<Snapshot>,
        control: Arc<Control>,
    },
    Replay(Player),
}

pub fn run(opts: ProbeOptions, args: &TopArgs) -> anyhow::Result<ExitCode> {
    // A recording is read (and refused) before the terminal is touched.
    let recording = match &args.replay {
        Some(p) => Some(Recording::open(p)?),
        None => None,
    };
    if !io::stdout().is_terminal() || !io::stdin().is_terminal() {
        anyhow::bail!(
            "top: needs a terminal (stdin and stdout must be one); `hmn record FILE` records without one"
        );
    }
    let warning = recording.as_ref().and_then(|r| r.warning.clone());
    let theme = Theme::detect(args.mono);
    let mode = match &recording {
        Some(r) => Mode::Replay {
            file: r.path.display().to_string(),
            position: 0,
            len: r.len(),
            speed: 1.0,
            paused: false,
            start_ms: r.entries.first().map_or(0, |e| e.unix_ms),
        },
        None => Mode::Live {
            interval: args.interval,
            paused: false,
        },
    };
    let mut app = App::new(mode, theme);
    if let Some(w) = &warning {
        app.say(w.clone());
    }
    let roots = opts.roots.clone();
    let source = match recording {
        Some(r) => Source::Replay(Player::new(r, Instant::now())),
        None => {
            let control = Control::new(args.interval);
            let rx = spawn(
                opts,
                CollectOptions {
                    limits: Limits {
                        max_processes: args.max_processes as usize,
                    },
                    rescan: args.rescan,
                },
                Arc::clone(&control),
            )
            .context("top: starting the collector")?;
            Source::Live { rx, control }
        }
    };
    let stop = crate::signals::stop_flag()?;
    install_panic_hook();
    terminal::enable_raw_mode().context("top: the terminal refused raw mode")?;
    let guard = Guard;
    execute!(io::stdout(), terminal::EnterAlternateScreen, cursor::Hide)?;
    if args.mouse {
        execute!(io::stdout(), ratatui::crossterm::event::EnableMouseCapture)?;
    }
    let mut term = Terminal::new(CrosstermBackend::new(io::stdout()))?;
    let result = event_loop(&mut term, &mut app, source, &stop, &roots);
    drop(term);
    drop(guard);
    if let Some(w) = warning {
        crate::output::note(&format!("warning: {w}"))?;
    }
    result.map(|()| ExitCode::SUCCESS)
}

fn event_loop(
    term: &mut Terminal<CrosstermBackend<Stdout>>,
    app: &mut App,
    mut source: Source,
    stop: &AtomicBool,
    roots: &Roots,
) -> anyhow::Result<()> {
    let mut dirty = true;
    let mut drawn_second = 0;
    if let Source::Replay(p) = &mut source {
        p.show(app);
    }
    loop {
        app.now_ms = now_ms();
        let now = Instant::now();
        let timeout = match &mut source {
            Source::Live { rx, control } => {
                loop {
                    match rx.try_recv() {
                        Ok(s) => {
                            app.push(s);
                            dirty = true;
                        }
                        Err(mpsc::TryRecvError::Empty) => break,
                        Err(mpsc::TryRecvError::Disconnected) => {
                            app.say("the collector stopped");
                            break;
                        }
                    }
                }
                app.busy_since_ms = control.busy_since_ms.load(Ordering::Relaxed);
                let rescan = control.rescan_ms.load(Ordering::Relaxed);
                if rescan > 0 {
                    app.rescan = Some((rescan, control.rescan_calibrated.load(Ordering::Relaxed)));
                }
                Duration::from_millis(200)
            }
            Source::Replay(p) => {
                if p.tick(now) {
                    p.show(app);
                    dirty = true;
                }
                p.due(now).min(Duration::from_millis(200))
            }
        };
        // Redraw on change, and every second (the stale age, status messages).
        let second = app.now_ms / 1000;
        if dirty || second != drawn_second {
            term.draw(|f| super::view::draw(f, app))?;
            dirty = false;
            drawn_second = second;
        }
        if stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        if !event::poll(timeout)? {
            continue;
        }
        let action = match event::read()? {
            Event::Key(k) if k.kind == KeyEventKind::Press => app.key(k),
            Event::Mouse(m) => {
                app.mouse(m);
                None
            }
            _ => None, // a resize, or a key release: redraw
        };
        dirty = true;
        let now = Instant::now();
        match (action, &mut source) {
            (None, _) => {}
            (Some(Action::Quit), _) => return Ok(()),
            (Some(Action::Interval(d)), Source::Live { control, .. }) => control.interval_ms.store(
                u64::try_from(d.as_millis()).unwrap_or(1000),
                Ordering::Relaxed,
            ),
            (Some(Action::Pause(p)), Source::Live { control, .. }) => {
                control.paused.store(p, Ordering::Relaxed);
            }
            (Some(Action::Signal(c)), Source::Live { .. }) => {
                let text = send(&c, roots);
                app.say(text);
            }
            (Some(Action::Pause(paused)), Source::Replay(p)) => {
                p.paused = paused;
                p.set_speed(p.speed, now);
                p.show(app);
            }
            (Some(Action::Seek(ms)), Source::Replay(p)) => {
                p.seek(ms, now);
                p.show(app);
            }
            (Some(Action::SeekEnd(end)), Source::Replay(p)) => {
                p.seek_end(end, now);
                p.show(app);
            }
            (Some(Action::Speed(s)), Source::Replay(p)) => {
                p.set_speed(s, now);
                p.show(app);
            }
            (Some(_), _) => {}
        }
    }
}

/// What became of a confirmed signal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    Sent,
    /// The process belongs to another user (EPERM; Windows: access denied).
    NotPermitted,
    /// The process has already exited (ESRCH).
    Gone,
    /// Anything else, in the system's words.
    Failed(String),
}

/// The status message for a signal's outcome.
pub fn signal_result(c: &Confirm, r: Delivery) -> String {
    let (sig, pid) = (c.sig.name(), c.pid);
    match r {
        Delivery::Sent => format!("{sig} sent to {pid} ({})", c.name),
        Delivery::NotPermitted => {
            let why = if cfg!(unix) { "EPERM" } else { "access denied" };
            format!("{sig} to {pid}: not permitted ({why}): the process belongs to another user")
        }
        Delivery::Gone => format!("{sig} to {pid}: the process has already exited"),
        Delivery::Failed(e) => format!("{sig} to {pid}: {e}"),
    }
}

/// Sends a confirmed signal, only to the process that was listed: on this system's `/proc`
/// (a proc root mounted from elsewhere names pids of another namespace), and only if its start
/// time is still the one shown (a pid reused since is left alone; on Windows, which has no
/// start time here, only if its name is still the one shown).
fn send(c: &Confirm, roots: &Roots) -> String {
    if roots.proc != std::path::Path::new("/proc") {
        return format!(
            "{} not sent: signals go only to processes of this system's /proc (the proc root is {})",
            c.sig.name(),
            roots.proc.display()
        );
    }
    if let Some(start) = c.start_time {
        match hypomnesis::process::tree::read_stat(roots, c.pid) {
            Ok(st) if st.start_time == start => {}
            Ok(_) => return reused(c),
            Err(_) => return signal_result(c, Delivery::Gone),
        }
    } else if cfg!(not(unix)) {
        match hypomnesis::process_name(c.pid) {
            Some(n) if n == c.name => {}
            Some(_) => return reused(c),
            None => return signal_result(c, Delivery::Gone),
        }
    }
    signal_result(c, deliver(c.pid, c.sig))
}

fn reused(c: &Confirm) -> String {
    format!(
        "{} not sent: pid {} is now another process",
        c.sig.name(),
        c.pid
    )
}

/// Platform seam: `kill(2)`.
#[cfg(unix)]
fn deliver(pid: u32, sig: Sig) -> Delivery {
    use nix::errno::Errno;
    let sig = match sig {
        Sig::Term => nix::sys::signal::Signal::SIGTERM,
        Sig::Kill => nix::sys::signal::Signal::SIGKILL,
    };
    let pid = nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap_or(i32::MAX));
    match nix::sys::signal::kill(pid, sig) {
        Ok(()) => Delivery::Sent,
        Err(Errno::EPERM) => Delivery::NotPermitted,
        Err(Errno::ESRCH) => Delivery::Gone,
        Err(e) => Delivery::Failed(e.desc().to_string()),
    }
}

/// Platform seam: Windows has no signals. `taskkill /PID n` asks the process to close (what
/// SIGTERM asks); `/F` ends it (what SIGKILL does, `TerminateProcess`).
#[cfg(not(unix))]
fn deliver(pid: u32, sig: Sig) -> Delivery {
    let mut cmd = std::process::Command::new("taskkill");
    cmd.args(["/PID", &pid.to_string()]);
    if sig == Sig::Kill {
        cmd.arg("/F");
    }
    match cmd.output() {
        Ok(o) => taskkill_outcome(o.status.code(), &o.stdout, &o.stderr),
        Err(e) => Delivery::Failed(format!("taskkill: {e}")),
    }
}

/// What `taskkill` said, as a [`Delivery`] (pure): exit 0 sent, 128 no such process, "Access
/// is denied" another user's (or a protected) process, anything else its first line.
#[cfg_attr(unix, allow(dead_code))]
fn taskkill_outcome(code: Option<i32>, stdout: &[u8], stderr: &[u8]) -> Delivery {
    let text = String::from_utf8_lossy(if stderr.is_empty() { stdout } else { stderr });
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    match code {
        Some(0) => Delivery::Sent,
        Some(128) => Delivery::Gone,
        _ if text.to_ascii_lowercase().contains("access is denied") => Delivery::NotPermitted,
        Some(c) => Delivery::Failed(format!("taskkill exited {c}: {line}")),
        None => Delivery::Failed(format!("taskkill was killed: {line}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn confirm(pid: u32, start_time: Option<u64>) -> Confirm {
        Confirm {
            pid,
            start_time,
            name: "python3".into(),
            sig: Sig::Term,
        }
    }

    #[test]
    fn signal_outcomes_in_words() {
        let c = confirm(42, None);
        assert_eq!(
            signal_result(&c, Delivery::Sent),
            "SIGTERM sent to 42 (python3)"
        );
        assert_eq!(
            signal_result(&c, Delivery::NotPermitted),
            "SIGTERM to 42: not permitted (EPERM): the process belongs to another user"
        );
        assert_eq!(
            signal_result(&c, Delivery::Gone),
            "SIGTERM to 42: the process has already exited"
        );
    }

    #[test]
    fn taskkill_answers_in_words() {
        // Wine 8's taskkill for a pid that does not exist (exit 128), and Windows' wording for
        // a process of another user (exit 1).
        assert_eq!(
            taskkill_outcome(
                Some(128),
                b"",
                b"Error: Could not find process \"99999\".\r\n"
            ),
            Delivery::Gone
        );
        let denied = b"ERROR: The process with PID 4 could not be terminated.\r\nReason: Access is denied.\r\n";
        assert_eq!(
            taskkill_outcome(Some(1), b"", denied),
            Delivery::NotPermitted
        );
        assert_eq!(
            taskkill_outcome(
                Some(0),
                b"SUCCESS: Sent termination signal to the process with PID 42.",
                b""
            ),
            Delivery::Sent
        );
        assert_eq!(
            taskkill_outcome(Some(1), b"", b"\r\nERROR: Invalid argument/option.\r\n"),
            Delivery::Failed("taskkill exited 1: ERROR: Invalid argument/option.".into())
        );
    }

    #[test]
    fn a_reused_pid_or_a_foreign_proc_root_gets_no_signal() {
        let me = std::process::id();
        let msg = send(&confirm(me, Some(1)), &Roots::system());
        assert_eq!(
            msg,
            format!("SIGTERM not sent: pid {me} is now another process")
        );
        let msg = send(&confirm(me, None), &Roots::system().with_proc("/tmp"));
        assert!(
            msg.starts_with("SIGTERM not sent: signals go only"),
            "{msg}"
        );
    }

    #[test]
    fn a_real_child_is_signalled() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let st = hypomnesis::process::tree::read_stat(&Roots::system(), child.id()).unwrap();
        let msg = send(&confirm(child.id(), Some(st.start_time)), &Roots::system());
        assert_eq!(msg, format!("SIGTERM sent to {} (python3)", child.id()));
        use std::os::unix::process::ExitStatusExt as _;
        assert_eq!(child.wait().unwrap().signal(), Some(15));
    }
}
