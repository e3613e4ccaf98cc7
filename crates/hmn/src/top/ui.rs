//! `hmn top`: the terminal, the event loop, and the two sources it shows (the collector
//! thread, or a recording).
//!
//! The loop owns the terminal and sleeps on one channel fed by the input thread, the collector
//! thread and the signal thread; it wakes for those, and otherwise only when the clock changes
//! what is shown (a replay step, a stale age, the end of a message), and redraws only then. It
//! never calls a GPU backend, so a driver call that hangs on the collector thread shows as
//! "STALE since …" while keys still work. hmn ends, the terminal restored, on `q`, Ctrl+C,
//! SIGTERM/SIGHUP/SIGINT/SIGQUIT (within [`STOP_GRACE`] whatever the UI thread is doing), when
//! the terminal hangs up or its input ends, on an error, and after a panic in any thread (a
//! panic hook restores it before the message is printed, then exits).

use std::io::{self, BufWriter, IsTerminal as _, Stdout};
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use hypomnesis::{ProbeOptions, Roots};
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::event::{self, Event, KeyEventKind};
use ratatui::crossterm::{cursor, execute, terminal};
use ratatui::layout::Rect;

use super::app::{Action, App, Mode};
use super::collect::{CollectOptions, Control, now_ms, spawn_into};
use super::panes::{MESSAGE_MS, stale_limit_ms, stale_since};
use super::player::Player;
use super::recording::Recording;
use super::screen::Screen;
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

/// What wakes the UI thread. It sleeps on one channel until one of these comes or something
/// shown by the clock is due (a replay step, a stale age, a message's end): no polling.
enum Wake {
    /// A key, a mouse event or a resize (the input thread).
    Input(Event),
    /// The terminal hung up or its input ended (the input thread, or the hang-up watcher).
    InputEnded,
    /// A new snapshot (the collector thread).
    Snapshot(Box<Snapshot>),
    /// A stop signal (the signal thread).
    Stop,
}

enum Source {
    Live { control: Arc<Control> },
    Replay(Player),
}

/// How long after a stop signal hmn ends even if the UI thread has not (a draw stuck on a
/// terminal that stopped reading): the terminal is restored best-effort and hmn exits.
const STOP_GRACE: Duration = Duration::from_secs(1);

/// Bytes a frame is buffered in before it is written (a full 300×100 redraw in colour fits).
const FRAME_BUFFER: usize = 256 << 10;

/// The input thread: crossterm's blocking `read`, each event sent on. It ends at the first
/// error (a closed terminal), and when the UI is gone.
fn spawn_input(tx: mpsc::Sender<Wake>) -> io::Result<()> {
    std::thread::Builder::new()
        .name("hmn-input".to_string())
        .spawn(move || {
            loop {
                let wake = match event::read() {
                    Ok(e) => Wake::Input(e),
                    Err(_) => Wake::InputEnded,
                };
                let ended = matches!(wake, Wake::InputEnded);
                if tx.send(wake).is_err() || ended {
                    return;
                }
            }
        })?;
    Ok(())
}

/// Platform seam: a thread asleep in `poll(2)` on stdin asking for nothing, which the kernel
/// wakes only on a hang-up or an error (an ssh drop, a closed tmux window): the UI is told even
/// when crossterm's reader, which retries a read that returns nothing, never returns.
#[cfg(unix)]
fn spawn_hangup_watch(tx: mpsc::Sender<Wake>) -> io::Result<()> {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::os::fd::AsFd as _;
    std::thread::Builder::new()
        .name("hmn-hangup".to_string())
        .spawn(move || {
            let stdin = io::stdin();
            loop {
                let mut fds = [PollFd::new(stdin.as_fd(), PollFlags::empty())];
                match poll(&mut fds, PollTimeout::NONE) {
                    Err(nix::errno::Errno::EINTR) => {}
                    Ok(n) if n > 0 => break,
                    // Ok(0) cannot happen without a timeout; any other error ends the watch.
                    _ => break,
                }
            }
            let _ = tx.send(Wake::InputEnded);
        })?;
    Ok(())
}

/// Windows: the console has no hang-up; closing its window ends the process.
#[cfg(not(unix))]
fn spawn_hangup_watch(_tx: mpsc::Sender<Wake>) -> io::Result<()> {
    Ok(())
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
    let (tx, rx) = mpsc::channel();
    let source = match recording {
        Some(r) => Source::Replay(Player::new(r, Instant::now())),
        None => {
            let control = Control::new(args.interval);
            // Ancestors are read while the tree view shows them (see `event_loop`).
            control.ancestors.store(app.tree, Ordering::Relaxed);
            app.xid = Some(
                super::health::spawn_xid(opts.clone(), Arc::clone(&control))
                    .context("top: starting the XID counter")?,
            );
            let snapshots = tx.clone();
            spawn_into(
                opts,
                CollectOptions {
                    limits: Limits {
                        max_processes: args.max_processes as usize,
                    },
                    rescan: args.rescan,
                },
                Arc::clone(&control),
                move |s| snapshots.send(Wake::Snapshot(Box::new(s))).is_ok(),
            )
            .context("top: starting the collector")?;
            Source::Live { control }
        }
    };
    let signals = tx.clone();
    crate::signals::on_stop(move |sig| {
        let _ = signals.send(Wake::Stop);
        // The UI ends on its own within a frame; if it has not by now, it is stuck.
        std::thread::sleep(STOP_GRACE);
        restore();
        std::process::exit(128 + sig);
    })?;
    install_panic_hook();
    terminal::enable_raw_mode().context("top: the terminal refused raw mode")?;
    let guard = Guard;
    execute!(io::stdout(), terminal::EnterAlternateScreen, cursor::Hide)?;
    if args.mouse {
        execute!(io::stdout(), ratatui::crossterm::event::EnableMouseCapture)?;
    }
    spawn_input(tx.clone()).context("top: starting the input thread")?;
    spawn_hangup_watch(tx).context("top: starting the hang-up watch")?;
    // One write per frame: the frame is buffered whole and flushed at the end of the draw, so
    // a terminal (or a test reading the screen) never sees half a frame.
    // The size is read here and taken from each resize event (asking the terminal before
    // every frame costs crossterm an open of `/dev/tty` each time).
    let out = BufWriter::with_capacity(FRAME_BUFFER, io::stdout());
    let (w, h) = terminal::size().context("top: reading the terminal's size")?;
    let mut term = Screen::new(CrosstermBackend::new(out), Rect::new(0, 0, w, h))?;
    let result = event_loop(&mut term, &mut app, source, &rx, &roots);
    drop(term);
    drop(guard);
    if let Some(w) = warning {
        crate::output::note(&format!("warning: {w}"))?;
    }
    result.map(|()| ExitCode::SUCCESS)
}

/// When something the clock shows changes next (ms since the epoch): a stale age or the start
/// of staleness, the end of a status message. `None`: nothing until an event.
fn clock_due(app: &App, last_snapshot_ms: u64) -> Option<u64> {
    let mut due: Option<u64> = None;
    let mut at = |t: u64| due = Some(due.map_or(t, |d| d.min(t)));
    if let Some((_, since)) = &app.status {
        if app.now_ms < since + MESSAGE_MS {
            at(since + MESSAGE_MS);
        }
    }
    if let Mode::Live { interval, paused } = &app.mode {
        if !*paused {
            let interval = u64::try_from(interval.as_millis()).unwrap_or(u64::MAX);
            if let Some(since) = stale_since(app) {
                // The age counts up in whole seconds.
                let age = app.now_ms.saturating_sub(since);
                at(app.now_ms + 1000 - age % 1000);
            } else {
                // When a collection in progress (or the next one, if it never reports back)
                // would have run too long.
                let busy = app.busy_since_ms;
                let start = if busy > 0 {
                    busy
                } else {
                    last_snapshot_ms.saturating_add(interval)
                };
                at(start.saturating_add(stale_limit_ms(interval)) + 1);
            }
        }
    }
    due
}

fn event_loop(
    term: &mut Screen<CrosstermBackend<BufWriter<Stdout>>>,
    app: &mut App,
    mut source: Source,
    rx: &mpsc::Receiver<Wake>,
    roots: &Roots,
) -> anyhow::Result<()> {
    let mut last_snapshot_ms = now_ms();
    if let Source::Replay(p) = &mut source {
        p.show(app);
    }
    loop {
        app.now_ms = now_ms();
        let now = Instant::now();
        match &mut source {
            Source::Live { control } => {
                if control.ancestors.load(Ordering::Relaxed) != app.tree {
                    // The tree's parent lines: read from the next sample on, which is taken
                    // now when the tree opens.
                    control.ancestors.store(app.tree, Ordering::Relaxed);
                    if app.tree {
                        control.sample_now.store(true, Ordering::Relaxed);
                        control.poke();
                    }
                }
                app.busy_since_ms = control.busy_since_ms.load(Ordering::Relaxed);
                let rescan = control.rescan_ms.load(Ordering::Relaxed);
                if rescan > 0 {
                    app.rescan = Some((rescan, control.rescan_calibrated.load(Ordering::Relaxed)));
                }
            }
            Source::Replay(p) => {
                if p.tick(now) {
                    p.show(app);
                }
            }
        }
        let due = clock_due(app, last_snapshot_ms);
        // Every wake may be a change (an event, a snapshot, the clock): draw once for all of
        // it; only the cells that differ are written, and nothing when none does.
        term.draw(|f| super::view::draw(f, app))?;
        // Sleep until an event, or until the clock changes what is shown.
        let mut wait = due.map(|t| Duration::from_millis(t.saturating_sub(app.now_ms)));
        if let Source::Replay(p) = &source {
            if let Some(d) = p.due(Instant::now()) {
                wait = Some(wait.map_or(d, |w| w.min(d)));
            }
        }
        let first = match wait {
            None => rx.recv().ok(),
            Some(w) => match rx.recv_timeout(w) {
                Ok(x) => Some(x),
                Err(mpsc::RecvTimeoutError::Timeout) => continue, // the clock changed the view

                Err(mpsc::RecvTimeoutError::Disconnected) => None,
            },
        };
        let Some(first) = first else {
            return Ok(()); // every sender is gone: nothing can wake the UI again
        };
        // Everything that came meanwhile, then one draw.
        for wake in std::iter::once(first).chain(rx.try_iter()) {
            let event = match wake {
                Wake::Stop | Wake::InputEnded => return Ok(()),
                Wake::Snapshot(s) => {
                    last_snapshot_ms = now_ms();
                    app.push(*s);
                    continue;
                }
                Wake::Input(e) => e,
            };
            app.now_ms = now_ms();
            let action = match event {
                Event::Key(k) if k.kind == KeyEventKind::Press => app.key(k),
                Event::Mouse(m) => {
                    app.mouse(m);
                    None
                }
                Event::Resize(w, h) => {
                    term.resize(Rect::new(0, 0, w, h))?;
                    None
                }
                _ => None, // a key release, a focus change: redraw
            };
            let now = Instant::now();
            match (action, &mut source) {
                (None, _) => {}
                (Some(Action::Quit), _) => return Ok(()),
                (Some(Action::Interval(d)), Source::Live { control }) => {
                    control.interval_ms.store(
                        u64::try_from(d.as_millis()).unwrap_or(1000),
                        Ordering::Relaxed,
                    );
                    control.poke();
                }
                (Some(Action::Pause(p)), Source::Live { control }) => {
                    control.paused.store(p, Ordering::Relaxed);
                    control.poke();
                }
                (Some(Action::Signal(c)), Source::Live { .. }) => {
                    let text = super::kill::send(&c, roots);
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
}
