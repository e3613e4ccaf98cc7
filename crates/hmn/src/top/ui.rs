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

use super::app::{Action, App, Mode};
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
