//! The parts around the table: where the detail pane goes, the status line (stale data,
//! messages, what was left out), the key footer, and the overlays (help, signal confirmation).

use std::time::Duration;

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};

use super::app::{App, Mode};
use super::clock::seconds;
use super::screen::Canvas;
use super::table::{draw_detail, draw_table};
use crate::format::sanitize;

/// How long a status message stays.
pub const MESSAGE_MS: u64 = 8000;

/// The table, and the detail pane beside it (wide screens) or below it.
pub fn table_and_detail(f: &mut Canvas<'_>, app: &mut App, area: Rect) {
    if !app.detail || area.height < 4 {
        draw_table(f, app, area);
        return;
    }
    if area.width >= 130 {
        let side = 56;
        draw_table(
            f,
            app,
            Rect::new(area.x, area.y, area.width - side, area.height),
        );
        draw_detail(
            f,
            app,
            Rect::new(area.x + area.width - side, area.y, side, area.height),
        );
    } else {
        let below = (area.height / 2).max(3);
        let top = area.height - below;
        draw_table(f, app, Rect::new(area.x, area.y, area.width, top));
        draw_detail(f, app, Rect::new(area.x, area.y + top, area.width, below));
    }
}

/// How long a collection may run before the data is stale: twice the interval, at least 2 s.
pub fn stale_limit_ms(interval_ms: u64) -> u64 {
    interval_ms.saturating_mul(2).max(2000)
}

/// Whether live data is stale: a collection has been running for longer than twice the
/// interval (at least 2 s). Returns since when (ms).
pub fn stale_since(app: &App) -> Option<u64> {
    let Mode::Live { interval, paused } = &app.mode else {
        return None;
    };
    let limit = stale_limit_ms(u64::try_from(interval.as_millis()).unwrap_or(u64::MAX));
    let busy = app.busy_since_ms;
    (!*paused && busy > 0 && app.now_ms.saturating_sub(busy) > limit)
        .then(|| app.snap().map_or(busy, |s| s.unix_ms))
}

/// The status line: stale data first, then a recent message, then what the table leaves out.
pub fn status_line(app: &App) -> Line<'static> {
    let t = app.theme;
    if let Some(since) = stale_since(app) {
        let age = app.now_ms.saturating_sub(since) / 1000;
        let text = if app.snap().is_some() {
            let clock = super::clock::utc(since);
            format!(
                "STALE since {} ({age} s): a GPU driver call has not returned; figures are from then",
                clock.get(11..).unwrap_or(&clock)
            )
        } else {
            format!("no data yet after {age} s: a GPU driver call has not returned")
        };
        return Line::from(Span::styled(text, t.warn()));
    }
    if let Some((text, at)) = &app.status {
        if app.now_ms.saturating_sub(*at) < MESSAGE_MS {
            return Line::from(Span::styled(sanitize(text), t.header()));
        }
    }
    let Some(s) = app.snap() else {
        return Line::from(Span::styled("collecting the first sample…", t.dim()));
    };
    let mut parts = Vec::new();
    let shown = app.lines().iter().filter(|l| l.row.is_some()).count();
    parts.push(format!("{shown} row{}", if shown == 1 { "" } else { "s" }));
    if s.processes_omitted > 0 {
        parts.push(format!(
            "{} more not shown (largest {} of {} kept)",
            s.processes_omitted,
            s.processes.len(),
            s.processes_total
        ));
    }
    if s.hidden_processes > 0 {
        parts.push(format!(
            "{} hidden — run as root to see all",
            s.hidden_processes
        ));
    }
    if !app.filter.is_empty() {
        parts.push(format!("filter \"{}\"", sanitize(&app.filter)));
    }
    if app.tree {
        parts.push("tree".to_string());
    }
    if let Some(w) = s.warnings.first() {
        let more = s.warnings.len() - 1;
        parts.push(format!(
            "warning: {}{}",
            sanitize(w),
            if more > 0 {
                format!(" (+{more})")
            } else {
                String::new()
            }
        ));
    }
    let text = parts.join(" · ");
    let style = if s.warnings.is_empty() {
        t.dim()
    } else {
        t.header()
    };
    Line::from(Span::styled(text, style))
}

/// The keys, in one line.
pub fn footer(app: &App) -> Line<'static> {
    let t = app.theme;
    if app.editing_filter {
        return Line::from(vec![
            Span::styled("/", t.key()),
            Span::raw(format!("{}█", sanitize(&app.filter))),
            Span::styled("   Enter keep · Esc clear", t.dim()),
        ]);
    }
    let keys: &[(&str, &str)] = match app.mode {
        Mode::Live { .. } => &[
            ("q", "quit"),
            ("?", "help"),
            ("/", "filter"),
            ("<>", "sort"),
            ("r", "reverse"),
            ("t", "tree"),
            ("↵", "detail"),
            ("p", "pause"),
            ("+-", "interval"),
            ("x/X", "term/kill"),
        ],
        Mode::Replay { .. } => &[
            ("q", "quit"),
            ("?", "help"),
            ("space", "pause"),
            ("←→", "seek"),
            ("[]", "speed"),
            ("/", "filter"),
            ("<>", "sort"),
            ("t", "tree"),
            ("↵", "detail"),
        ],
    };
    let mut spans = Vec::new();
    for (k, what) in keys {
        spans.push(Span::styled((*k).to_string(), t.key()));
        spans.push(Span::raw(format!(" {what} ")));
    }
    Line::from(spans)
}

/// The help text.
pub fn help_lines(app: &App) -> Vec<String> {
    let mut l = vec![
        "hmn top — RAM and GPU memory, live".to_string(),
        String::new(),
        "q, Ctrl+C   quit".to_string(),
        "?, h, F1    this help (any key closes)".to_string(),
        "↑ ↓ j k     select      PgUp PgDn Home End   page, first, last".to_string(),
        "< > , .     sort by the previous / next column      r  reverse the order".to_string(),
        "/           filter: name, user, pid, command line, container (Esc clears)".to_string(),
        "t           tree of parents and children".to_string(),
        "Enter, d    detail pane: regions, DRM clients, shared-with, command line".to_string(),
    ];
    match &app.mode {
        Mode::Live { .. } => {
            l.push("p, space   pause / resume".to_string());
            l.push("+ -        sample less / more often".to_string());
            l.push("x, F9      send SIGTERM to the selected process (asks first)".to_string());
            l.push("X          send SIGKILL to the selected process (asks first)".to_string());
        }
        Mode::Replay { .. } => {
            l.push("space, p   pause / play".to_string());
            l.push(
                "← →        seek 10 s (with Shift: 1 min)    b e  first / last sample".to_string(),
            );
            l.push("[ ]        slower / faster".to_string());
        }
    }
    l.push(String::new());
    l.push("Columns: DEV the GPU (/N its MIG device N); KIND C compute, G graphics,".to_string());
    l.push("V video, D copy, M MPS client, MS MPS server, - idle; VRAM on that device".to_string());
    l.push("(sh N: counted on pid N's row); RSS host memory; GPU% busiest engine".to_string());
    l.push("(DRM engine classes; NVIDIA SM, encoder, decoder from NVML's samples).".to_string());
    l.push("? means unknown (never 0). Memory bars: █ used ▒ reserved ░ free.".to_string());
    if let Some((ms, calibrated)) = app.rescan {
        l.push(format!(
            "New AMD/Intel GPU clients are found every {}{} (--rescan).",
            seconds(Duration::from_millis(ms)),
            if calibrated {
                ", calibrated to ≤ 0.5 % CPU"
            } else {
                ""
            }
        ));
    }
    l
}

/// The centred rectangle of `w` × `h` cells (clipped to `area`).
fn centred(area: Rect, w: u16, h: u16) -> Rect {
    let w = w.min(area.width);
    let h = h.min(area.height);
    Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    )
}

/// Help and the signal confirmation, over everything.
pub fn overlays(f: &mut Canvas<'_>, app: &App, area: Rect) {
    let t = app.theme;
    if app.help {
        let lines = help_lines(app);
        let w = lines.iter().map(|l| l.chars().count()).max().unwrap_or(20) + 4;
        let r = centred(
            area,
            u16::try_from(w).unwrap_or(u16::MAX),
            u16::try_from(lines.len() + 2).unwrap_or(u16::MAX),
        );
        f.render_widget(Clear, r);
        let text: Vec<Line<'_>> = lines.into_iter().map(Line::from).collect();
        f.render_widget(
            Paragraph::new(text).block(
                Block::default()
                    .borders(Borders::ALL)
                    .title(Span::styled(" help ", t.header())),
            ),
            r,
        );
    }
    if let Some(c) = &app.confirm {
        let text = format!(
            "Send {} to {} ({})?  y: send   any other key: cancel",
            c.sig.name(),
            c.pid,
            sanitize(&c.name)
        );
        let w = u16::try_from(text.chars().count() + 4).unwrap_or(u16::MAX);
        let r = centred(area, w, 3);
        f.render_widget(Clear, r);
        f.render_widget(
            Paragraph::new(Span::styled(text, t.header())).block(
                Block::default()
                    .borders(Borders::ALL)
                    .title(Span::styled(" signal ", t.bad())),
            ),
            r,
        );
    }
}
