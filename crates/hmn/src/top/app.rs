//! The state of the view and what each key does to it. Pure: no terminal, no probe. The loop
//! in [`super::ui`] feeds it snapshots and events and carries out the [`Action`]s it returns
//! (an interval change, a seek, a signal to a process).

use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseEvent, MouseEventKind};

use super::kill::{Confirm, Sig};
use super::recording::{DevicePoint, device_points};
use super::rows::{Column, Line, lines};
use super::snapshot::Snapshot;
use super::theme::Theme;

/// Points kept per device for the history charts.
pub const HISTORY: usize = 600;

/// The intervals `+` and `-` step through.
pub const INTERVALS_MS: [u64; 9] = [250, 500, 1000, 2000, 3000, 5000, 10_000, 30_000, 60_000];

/// Replay speeds `[` and `]` step through.
pub const SPEEDS: [f64; 9] = [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0];

/// What the loop must do after a key.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Quit,
    /// Live: the new interval.
    Interval(Duration),
    /// Live: pause or resume collection; replay: pause or resume playback.
    Pause(bool),
    /// Send a signal (confirmed).
    Signal(Confirm),
    /// Replay: move by this many ms of recorded time.
    Seek(i64),
    /// Replay: to the first (false) or last (true) sample.
    SeekEnd(bool),
    /// Replay: playback speed.
    Speed(f64),
}

/// Live collection or a recording.
#[derive(Debug, Clone, PartialEq)]
pub enum Mode {
    Live {
        interval: Duration,
        paused: bool,
    },
    Replay {
        file: String,
        position: usize,
        len: usize,
        speed: f64,
        paused: bool,
        start_ms: u64,
    },
}

/// What the table's lines were made of ([`App::lines`]).
#[derive(Debug, Clone, PartialEq, Eq)]
struct LinesOf {
    snap: u64,
    sort: Column,
    descending: bool,
    filter: String,
    tree: bool,
}

/// Everything the view shows besides the snapshot.
#[derive(Debug, Clone)]
pub struct App {
    /// The snapshot shown: set by [`App::push`] and [`App::show`], changed in place only
    /// through `App::snap_mut` in tests (each of which makes the kept lines stale).
    snap: Option<Snapshot>,
    /// Counts the snapshots shown and changes to them: the kept lines' key.
    snap_gen: u64,
    /// The table's lines, kept with what they were made of (the snapshot shown, the sort, the
    /// filter, the view): a frame asks for them three times (the selection, the table, the
    /// status line) and most keys change none of those.
    kept_lines: RefCell<Option<(LinesOf, Arc<Vec<Line>>)>>,
    pub history: BTreeMap<u32, VecDeque<DevicePoint>>,
    pub mode: Mode,
    pub theme: Theme,
    pub sort: Column,
    pub descending: bool,
    pub filter: String,
    pub editing_filter: bool,
    pub tree: bool,
    pub detail: bool,
    pub help: bool,
    /// The selected line: (pid, device index; `None` for an ancestor line).
    pub selected: Option<(u32, Option<u32>)>,
    /// The first line shown.
    pub scroll: usize,
    /// Rows of the table at the last draw (for paging).
    pub page: usize,
    pub confirm: Option<Confirm>,
    /// A message for the status line, with the time (ms) it was set.
    pub status: Option<(String, u64)>,
    /// Now, ms since the epoch (set by the loop before each draw).
    pub now_ms: u64,
    /// Live: when the collection in progress started (0 when idle).
    pub busy_since_ms: u64,
    /// The DRM rescan period, ms, and whether it was calibrated.
    pub rescan: Option<(u64, bool)>,
    /// Where the table's first row was drawn (y), for mouse clicks.
    pub table_top: u16,
    /// Steady-growth flags, fed with every snapshot shown.
    pub trends: super::growth::Trends,
    /// XID events counted since `top` started (live only; `None` in a replay).
    pub xid: Option<std::sync::Arc<std::sync::Mutex<hypomnesis::XidTally>>>,
    /// The table's rows as last drawn, kept to draw an unchanged row again without building it.
    pub drawn_rows: super::kept::DrawnRows,
}

impl App {
    pub fn new(mode: Mode, theme: Theme) -> App {
        App {
            snap: None,
            snap_gen: 0,
            kept_lines: RefCell::new(None),
            history: BTreeMap::new(),
            mode,
            theme,
            sort: Column::Vram,
            descending: true,
            filter: String::new(),
            editing_filter: false,
            tree: false,
            detail: false,
            help: false,
            selected: None,
            scroll: 0,
            page: 10,
            confirm: None,
            status: None,
            now_ms: 0,
            busy_since_ms: 0,
            rescan: None,
            table_top: 0,
            trends: super::growth::Trends::default(),
            xid: None,
            drawn_rows: super::kept::DrawnRows::default(),
        }
    }

    /// Shows a new snapshot, adding it to the history.
    pub fn push(&mut self, s: Snapshot) {
        for p in device_points(&s) {
            let h = self.history.entry(p.index).or_default();
            if h.len() == HISTORY {
                h.pop_front();
            }
            h.push_back(p);
        }
        self.trends.observe(&s);
        self.set_snap(s);
        self.keep_selection();
    }

    /// Shows a snapshot with the history given (replay, after a seek).
    pub fn show(&mut self, s: Snapshot, history: &[Vec<DevicePoint>]) {
        self.history.clear();
        for points in history {
            for p in points {
                self.history.entry(p.index).or_default().push_back(*p);
            }
        }
        self.trends.observe(&s);
        self.set_snap(s);
        self.keep_selection();
    }

    fn set_snap(&mut self, s: Snapshot) {
        self.snap = Some(s);
        self.snap_gen = self.snap_gen.wrapping_add(1);
    }

    /// The snapshot shown.
    pub fn snap(&self) -> Option<&Snapshot> {
        self.snap.as_ref()
    }

    /// The snapshot shown, to change in place (tests): the kept lines are made again.
    #[cfg(test)]
    pub fn snap_mut(&mut self) -> Option<&mut Snapshot> {
        self.snap_gen = self.snap_gen.wrapping_add(1);
        self.snap.as_mut()
    }

    /// The lines of the table, as drawn: made again when the snapshot, the sort, the filter or
    /// the view changed since they were last asked for.
    pub fn lines(&self) -> Arc<Vec<Line>> {
        let of = LinesOf {
            snap: self.snap_gen,
            sort: self.sort,
            descending: self.descending,
            filter: self.filter.clone(),
            tree: self.tree,
        };
        let mut kept = self.kept_lines.borrow_mut();
        if let Some((k, l)) = kept.as_ref() {
            if *k == of {
                return Arc::clone(l);
            }
        }
        let made = Arc::new(self.snap.as_ref().map_or_else(Vec::new, |s| {
            lines(s, self.sort, self.descending, &self.filter, self.tree)
        }));
        *kept = Some((of, Arc::clone(&made)));
        made
    }

    fn cursor(&self, lines: &[Line]) -> Option<usize> {
        let sel = self.selected?;
        lines.iter().position(|l| l.key() == sel)
    }

    /// The selected line's index, selecting the first line when none is.
    pub fn selected_index(&self, lines: &[Line]) -> Option<usize> {
        if lines.is_empty() {
            None
        } else {
            Some(self.cursor(lines).unwrap_or(0))
        }
    }

    fn keep_selection(&mut self) {
        let lines = self.lines();
        if self.cursor(&lines).is_none() {
            self.selected = lines.first().map(Line::key);
        }
    }

    fn move_selection(&mut self, delta: isize) {
        let lines = self.lines();
        if lines.is_empty() {
            return;
        }
        let cur = self.selected_index(&lines).unwrap_or(0);
        let last = lines.len() - 1;
        let next = cur.saturating_add_signed(delta).min(last);
        self.selected = Some(lines[next].key());
    }

    /// Sets a status message.
    pub fn say(&mut self, text: impl Into<String>) {
        self.status = Some((text.into(), self.now_ms));
    }

    fn live(&self) -> bool {
        matches!(self.mode, Mode::Live { .. })
    }

    /// Handles a key; returns what the loop must do.
    pub fn key(&mut self, k: KeyEvent) -> Option<Action> {
        let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
        if ctrl && matches!(k.code, KeyCode::Char('c' | 'C')) {
            return Some(Action::Quit);
        }
        if let Some(c) = self.confirm.take() {
            return match k.code {
                KeyCode::Char('y' | 'Y') => Some(Action::Signal(c)),
                _ => {
                    self.say(format!("{} to {} cancelled", c.sig.name(), c.pid));
                    None
                }
            };
        }
        if self.editing_filter {
            match k.code {
                KeyCode::Enter => self.editing_filter = false,
                KeyCode::Esc => {
                    self.editing_filter = false;
                    self.filter.clear();
                }
                KeyCode::Backspace => {
                    self.filter.pop();
                }
                KeyCode::Char(c) if !ctrl && self.filter.chars().count() < 64 => {
                    self.filter.push(c);
                }
                _ => {}
            }
            self.keep_selection();
            return None;
        }
        if self.help {
            if matches!(k.code, KeyCode::Char('q')) {
                return Some(Action::Quit);
            }
            self.help = false;
            return None;
        }
        match k.code {
            KeyCode::Char('q') => return Some(Action::Quit),
            KeyCode::Char('?' | 'h') | KeyCode::F(1) => self.help = true,
            KeyCode::Esc => {
                self.detail = false;
                self.filter.clear();
            }
            KeyCode::Char('/') => self.editing_filter = true,
            KeyCode::Char('<' | ',') => self.sort_by(self.sort.prev()),
            KeyCode::Char('>' | '.') => self.sort_by(self.sort.next()),
            KeyCode::Char('r') => self.descending = !self.descending,
            KeyCode::Char('t') => self.tree = !self.tree,
            KeyCode::Enter | KeyCode::Char('d') => self.detail = !self.detail,
            KeyCode::Up | KeyCode::Char('k') => self.move_selection(-1),
            KeyCode::Down | KeyCode::Char('j') => self.move_selection(1),
            KeyCode::PageUp => self.move_selection(-(self.page.max(1) as isize)),
            KeyCode::PageDown => self.move_selection(self.page.max(1) as isize),
            KeyCode::Home | KeyCode::Char('g') => self.move_selection(isize::MIN / 2),
            KeyCode::End | KeyCode::Char('G') => self.move_selection(isize::MAX / 2),
            KeyCode::Char('p' | ' ') => return self.toggle_pause(),
            _ if self.live() => return self.live_key(k),
            _ => return self.replay_key(k),
        }
        self.keep_selection();
        None
    }

    /// Sorts by `c`: numbers largest first, text A to Z.
    pub fn sort_by(&mut self, c: super::rows::Column) {
        self.sort = c;
        self.descending = c.numeric();
    }

    fn toggle_pause(&mut self) -> Option<Action> {
        match &mut self.mode {
            Mode::Live { paused, .. } | Mode::Replay { paused, .. } => {
                *paused = !*paused;
                Some(Action::Pause(*paused))
            }
        }
    }

    fn live_key(&mut self, k: KeyEvent) -> Option<Action> {
        let Mode::Live { interval, .. } = &mut self.mode else {
            return None;
        };
        let ms = u64::try_from(interval.as_millis()).unwrap_or(u64::MAX);
        let step = match k.code {
            KeyCode::Char('+' | '=') => INTERVALS_MS.iter().find(|i| **i > ms).copied(),
            KeyCode::Char('-' | '_') => INTERVALS_MS.iter().rev().find(|i| **i < ms).copied(),
            KeyCode::Char('x') | KeyCode::F(9) => return self.ask(Sig::Term),
            KeyCode::Char('X') => return self.ask(Sig::Kill),
            _ => return None,
        };
        let new = Duration::from_millis(step.unwrap_or(ms));
        *interval = new;
        let text = format!("interval {}", super::clock::seconds(new));
        self.say(text);
        Some(Action::Interval(new))
    }

    fn ask(&mut self, sig: Sig) -> Option<Action> {
        let lines = self.lines();
        let Some(line) = self.selected_index(&lines).map(|i| lines[i].clone()) else {
            self.say("no process selected");
            return None;
        };
        if line.start_time.is_none() {
            // No identity to check the pid against at `y`: a later process could have it.
            self.say(super::kill::no_identity(sig, line.pid));
            return None;
        }
        self.confirm = Some(Confirm {
            pid: line.pid,
            start_time: line.start_time,
            name: line.name,
            sig,
        });
        None
    }

    fn replay_key(&mut self, k: KeyEvent) -> Option<Action> {
        let Mode::Replay { speed, .. } = &mut self.mode else {
            return None;
        };
        let shift = k.modifiers.contains(KeyModifiers::SHIFT);
        match k.code {
            KeyCode::Left => Some(Action::Seek(if shift { -60_000 } else { -10_000 })),
            KeyCode::Right => Some(Action::Seek(if shift { 60_000 } else { 10_000 })),
            KeyCode::Char('b') => Some(Action::SeekEnd(false)),
            KeyCode::Char('e') => Some(Action::SeekEnd(true)),
            KeyCode::Char('[') | KeyCode::Char(']') => {
                let faster = k.code == KeyCode::Char(']');
                let i = SPEEDS
                    .iter()
                    .position(|s| (*s - *speed).abs() < 1e-9)
                    .unwrap_or(2);
                let j = if faster {
                    (i + 1).min(SPEEDS.len() - 1)
                } else {
                    i.saturating_sub(1)
                };
                *speed = SPEEDS[j];
                Some(Action::Speed(SPEEDS[j]))
            }
            KeyCode::Char('x' | 'X') | KeyCode::F(9) => {
                self.say("a recording cannot be signalled");
                None
            }
            _ => None,
        }
    }

    /// Handles a mouse event (with `--mouse`): the wheel moves the selection, a click on a row
    /// selects it.
    pub fn mouse(&mut self, m: MouseEvent) {
        match m.kind {
            MouseEventKind::ScrollUp => self.move_selection(-3),
            MouseEventKind::ScrollDown => self.move_selection(3),
            MouseEventKind::Down(_) if m.row >= self.table_top => {
                let lines = self.lines();
                let i = self.scroll + usize::from(m.row - self.table_top);
                if let Some(l) = lines.get(i) {
                    self.selected = Some(l.key());
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::crossterm::event::{KeyEventKind, KeyEventState};

    pub fn key(code: KeyCode) -> KeyEvent {
        KeyEvent {
            code,
            modifiers: KeyModifiers::NONE,
            kind: KeyEventKind::Press,
            state: KeyEventState::NONE,
        }
    }

    fn live() -> App {
        App::new(
            Mode::Live {
                interval: Duration::from_secs(1),
                paused: false,
            },
            Theme { mono: true },
        )
    }

    #[test]
    fn interval_steps_and_pause() {
        let mut a = live();
        assert_eq!(
            a.key(key(KeyCode::Char('+'))),
            Some(Action::Interval(Duration::from_secs(2)))
        );
        a.key(key(KeyCode::Char('-')));
        assert_eq!(
            a.key(key(KeyCode::Char('-'))),
            Some(Action::Interval(Duration::from_millis(500)))
        );
        assert_eq!(a.key(key(KeyCode::Char('p'))), Some(Action::Pause(true)));
        assert_eq!(a.key(key(KeyCode::Char(' '))), Some(Action::Pause(false)));
    }

    #[test]
    fn quit_keys_and_ctrl_c_even_while_typing_a_filter() {
        let mut a = live();
        assert_eq!(a.key(key(KeyCode::Char('q'))), Some(Action::Quit));
        a.key(key(KeyCode::Char('/')));
        assert_eq!(
            a.key(key(KeyCode::Char('q'))),
            None,
            "q is text in the filter"
        );
        assert_eq!(a.filter, "q");
        let ctrl_c = KeyEvent {
            modifiers: KeyModifiers::CONTROL,
            ..key(KeyCode::Char('c'))
        };
        assert_eq!(a.key(ctrl_c), Some(Action::Quit));
    }

    #[test]
    fn a_signal_needs_a_selection_and_a_yes() {
        let mut a = live();
        assert_eq!(a.key(key(KeyCode::Char('x'))), None);
        assert_eq!(a.status.as_ref().unwrap().0, "no process selected");
        let mut s = Snapshot::empty(1, 1000);
        let mut row = super::super::snapshot::ProcessRow::from_gpu(
            hypomnesis::test_helpers::GpuProcessBuilder::new(42, 0)
                .name("python3")
                .build(),
        );
        s.processes.push(row.clone());
        a.push(s.clone());
        // A row whose stat could not be read has no identity: no confirmation is offered.
        assert_eq!(a.key(key(KeyCode::Char('x'))), None);
        assert!(a.confirm.is_none());
        assert!(
            a.status.as_ref().unwrap().0.starts_with("SIGTERM not sent"),
            "{:?}",
            a.status
        );
        row.start_time = Some(99);
        s.processes = vec![row];
        a.push(s);
        assert_eq!(a.key(key(KeyCode::Char('X'))), None);
        assert_eq!(a.confirm.as_ref().unwrap().sig, Sig::Kill);
        assert_eq!(
            a.key(key(KeyCode::Char('n'))),
            None,
            "anything but y cancels"
        );
        assert!(a.confirm.is_none());
        a.key(key(KeyCode::Char('x')));
        match a.key(key(KeyCode::Char('y'))) {
            Some(Action::Signal(c)) => {
                assert_eq!((c.pid, c.start_time, c.sig), (42, Some(99), Sig::Term));
            }
            other => panic!("{other:?}"),
        }
    }
}
