//! `hmn top`: the terminal, the event loop, and the two sources it shows (the collector
//! thread, or a recording).
//!
//! The terminal and the view ([`Shown`]) are shared, behind one lock, by the UI thread and the
//! collector thread. The collector thread shows each snapshot itself as soon as it is taken (one
//! thread wakes per sample, and draws what it has just read); the UI thread sleeps on one
//! channel fed by the input thread and the signal thread, and wakes for those, and otherwise
//! only when the clock changes what is shown (a replay step, a stale age, the end of a
//! message). It never calls a GPU backend and the collector holds the lock only to draw, so a
//! driver call that hangs on the collector thread shows as "STALE since …" while keys still
//! work. hmn ends, the terminal restored, on `q`, Ctrl+C, SIGTERM/SIGHUP/SIGINT/SIGQUIT (within
//! [`STOP_GRACE`] whatever the UI thread is doing), when the terminal hangs up or its input
//! ends, on an error (a draw that fails on either thread), and after a panic in any thread (a
//! panic hook restores it before the message is printed, then exits).

use std::io::{self, BufWriter, IsTerminal as _, Stdout};
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use hypomnesis::{ProbeOptions, Roots};
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::event::{self, Event, KeyEventKind};
use ratatui::crossterm::{cursor, execute, terminal};
use ratatui::layout::Rect;

use super::app::{Action, App, Mode};
use super::collect::{CollectOptions, Control, spawn_into};
use super::panes::{MESSAGE_MS, stale_limit_ms, stale_since};
use super::player::Player;
use super::recording::Recording;
use super::screen::Screen;
use super::theme::Theme;
use crate::args::TopArgs;
use crate::health::now_ms;

/// Puts the terminal back: raw mode off, main screen, cursor shown, mouse released. Safe to
/// call more than once. Returns within [`RESTORE_WAIT`] whatever the terminal does: raw mode
/// needs no write and goes first; the sequences are written by a thread of their own, which a
/// terminal that stopped reading (a stalled ssh session, a flow-controlled tty) keeps waiting —
/// as it keeps any thread holding stdout's lock mid-frame, which that write would wait for too.
fn restore() {
    let _ = terminal::disable_raw_mode();
    crate::output::write_within("hmn-restore", RESTORE_WAIT, || {
        let _ = execute!(
            io::stdout(),
            ratatui::crossterm::event::DisableMouseCapture,
            terminal::LeaveAlternateScreen,
            cursor::Show
        );
    });
}

/// The longest [`restore`] waits for the terminal to take its sequences.
const RESTORE_WAIT: Duration = Duration::from_millis(200);

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
/// shown by the clock is due (a replay step, a stale age, a message's end): no polling. A
/// snapshot does not wake it: the collector thread draws it.
enum Wake {
    /// A key, a mouse event or a resize (the input thread).
    Input(Event),
    /// The terminal hung up or its input ended (the input thread, or the hang-up watcher).
    InputEnded,
    /// The collector thread could not draw its snapshot (the terminal's error is in
    /// [`Shown::failed`]).
    DrawFailed,
    /// A stop signal (the signal thread).
    Stop,
}

/// The terminal and the view, shared by the UI thread (keys, the clock) and the collector
/// thread, which shows each snapshot as soon as it is taken: a sample wakes one thread, not
/// two, and is drawn while what it read is still in the caches.
struct Shown {
    app: App,
    term: Term,
    /// When the last snapshot came (ms since the epoch).
    last_snapshot_ms: u64,
    /// When the clock next changes what is shown ([`clock_due`] at the last frame).
    next_due: Option<u64>,
    /// The error of a draw on the collector thread.
    failed: Option<io::Error>,
    /// Set when the UI ends: nothing more is drawn (the terminal is being restored).
    closed: bool,
}

type Term = Screen<CrosstermBackend<BufWriter<Stdout>>>;

/// Locks `shown` (a thread that panicked while holding it has already ended hmn).
fn lock(shown: &Mutex<Shown>) -> std::sync::MutexGuard<'_, Shown> {
    shown
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
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
            // Ancestors are read while the tree view shows them (see `sync`).
            control.ancestors.store(app.tree, Ordering::Relaxed);
            app.xid = Some(
                super::health::spawn_xid(opts.clone(), Arc::clone(&control))
                    .context("top: starting the XID counter")?,
            );
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
    spawn_hangup_watch(tx.clone()).context("top: starting the hang-up watch")?;
    // One write per frame: the frame is buffered whole and flushed at the end of the draw, so
    // a terminal (or a test reading the screen) never sees half a frame.
    // The size is read here and taken from each resize event (asking the terminal before
    // every frame costs crossterm an open of `/dev/tty` each time).
    let out = BufWriter::with_capacity(FRAME_BUFFER, io::stdout());
    let (w, h) = terminal::size().context("top: reading the terminal's size")?;
    let term = Screen::new(CrosstermBackend::new(out), Rect::new(0, 0, w, h))?;
    let shown = Arc::new(Mutex::new(Shown {
        app,
        term,
        last_snapshot_ms: now_ms(),
        next_due: None,
        failed: None,
        closed: false,
    }));
    if let Source::Live { control } = &source {
        // Each snapshot is shown by the collector thread itself, as soon as it is taken.
        let (drawn, ctl, failed) = (Arc::clone(&shown), Arc::clone(control), tx);
        spawn_into(
            opts,
            CollectOptions::new(args.max_processes, args.rescan),
            Arc::clone(control),
            move |s| {
                let mut g = lock(&drawn);
                if g.closed {
                    return false;
                }
                g.last_snapshot_ms = now_ms();
                g.app.push(s);
                match frame(&mut g, Some(&ctl)) {
                    Ok(()) => true,
                    Err(e) => {
                        g.failed = Some(e);
                        let _ = failed.send(Wake::DrawFailed);
                        false
                    }
                }
            },
        )
        .context("top: starting the collector")?;
    } else {
        drop(tx); // a replay: only the input, hang-up and signal threads send
    }
    let result = event_loop(&shown, source, &rx, &roots);
    // The terminal is restored with the view locked and closed: the collector draws nothing
    // over it.
    let mut g = lock(&shown);
    g.closed = true;
    drop(guard);
    drop(g);
    if let Some(w) = warning {
        crate::output::note(&format!("warning: {w}"))?;
    }
    result.map(|()| ExitCode::SUCCESS)
}

/// Brings the view up to date with the collector (live) and draws it; then notes when the
/// clock next changes what is shown.
fn frame(g: &mut Shown, control: Option<&Control>) -> io::Result<()> {
    let Shown {
        app,
        term,
        last_snapshot_ms,
        next_due,
        ..
    } = g;
    app.now_ms = now_ms();
    if let Some(control) = control {
        sync(app, control);
    }
    term.draw(|f| super::view::draw(f, app))?;
    *next_due = clock_due(app, *last_snapshot_ms);
    Ok(())
}

/// What the view and the collector tell each other before a frame: whether the tree's parent
/// lines are wanted (a sample is asked for at once when the tree opens), whether a collection
/// is running, and the DRM rescan period in force.
fn sync(app: &mut App, control: &Control) {
    if control.ancestors.load(Ordering::Relaxed) != app.tree {
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
    shown: &Mutex<Shown>,
    mut source: Source,
    rx: &mpsc::Receiver<Wake>,
    roots: &Roots,
) -> anyhow::Result<()> {
    if let Source::Replay(p) = &mut source {
        p.show(&mut lock(shown).app);
    }
    let mut draw = true;
    loop {
        let wait = {
            let mut g = lock(shown);
            if let Some(e) = g.failed.take() {
                return Err(e.into());
            }
            if let Source::Replay(p) = &mut source {
                if p.tick(Instant::now()) {
                    p.show(&mut g.app);
                    draw = true;
                }
            }
            let control = match &source {
                Source::Live { control } => Some(&**control),
                Source::Replay(_) => None,
            };
            // A frame for an event, and when the clock changes what is shown (unless a frame
            // drawn since, by the collector, has moved that time on).
            if draw || g.next_due.is_some_and(|t| now_ms() >= t) {
                frame(&mut g, control)?;
                draw = false;
            }
            // Sleep until an event, or until the clock changes what is shown.
            let mut wait = g
                .next_due
                .map(|t| Duration::from_millis(t.saturating_sub(now_ms())));
            if let Source::Replay(p) = &source {
                if let Some(d) = p.due(Instant::now()) {
                    wait = Some(wait.map_or(d, |w| w.min(d)));
                }
            }
            wait
        };
        let first = match wait {
            None => rx.recv().ok(),
            Some(w) => match rx.recv_timeout(w) {
                Ok(x) => Some(x),
                Err(mpsc::RecvTimeoutError::Timeout) => continue, // the clock: see above
                Err(mpsc::RecvTimeoutError::Disconnected) => None,
            },
        };
        let Some(first) = first else {
            return Ok(()); // every sender is gone: nothing can wake the UI again
        };
        draw = true;
        let mut g = lock(shown);
        let g = &mut *g;
        // Everything that came meanwhile, then one frame.
        for wake in std::iter::once(first).chain(rx.try_iter()) {
            let event = match wake {
                Wake::Stop | Wake::InputEnded => return Ok(()),
                Wake::DrawFailed => match g.failed.take() {
                    Some(e) => return Err(e.into()),
                    None => continue,
                },
                Wake::Input(e) => e,
            };
            let (app, term) = (&mut g.app, &mut g.term);
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
