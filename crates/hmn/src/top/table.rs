//! The process table and the detail pane of the selected process.

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

use super::app::App;
use super::kept::{DrawnRows, RowInputs};
use super::rows::Column;
use super::screen::Canvas;
use super::snapshot::{ProcessRow, Snapshot};
use crate::format::{bytes, fixed, opt_bytes, sanitize, sanitized};
use hypomnesis::{EngineClass, ProcessKind, RegionUsage};

/// Fixed widths of the columns other than NAME (which takes the rest).
fn width_of(c: Column) -> usize {
    match c {
        Column::Pid => 7,
        Column::User => 8,
        Column::Name => 0,
        Column::Device => 4,
        Column::Kind => 4,
        Column::Vram | Column::Rss => 9,
        Column::Engine => 8,
        Column::Workload => 13,
    }
}

fn right(c: Column) -> bool {
    matches!(
        c,
        Column::Pid | Column::Device | Column::Vram | Column::Rss | Column::Engine
    )
}

/// Cuts or pads `s` to exactly `w` display cells (`…` marks a cut).
pub fn fit(s: &str, w: usize, right_align: bool) -> String {
    let mut out = String::with_capacity(w + 4);
    push_fit(&mut out, s, w, right_align);
    out
}

/// [`fit`], appended to `out` (a table row is built without a string per cell).
fn push_fit(out: &mut String, s: &str, w: usize, right_align: bool) {
    let pad = |out: &mut String, n: usize| out.extend(std::iter::repeat_n(' ', n));
    let sw = s.width();
    if sw <= w {
        if right_align {
            pad(out, w - sw);
            out.push_str(s);
        } else {
            out.push_str(s);
            pad(out, w - sw);
        }
        return;
    }
    let mut used = 0;
    for ch in s.chars() {
        let cw = ch.width().unwrap_or(0);
        if used + cw + 1 > w {
            break;
        }
        out.push(ch);
        used += cw;
    }
    out.push('…');
    pad(out, w.saturating_sub(used + 1));
}

/// The KIND cell: a letter per engine class the process used (`C` compute, `G` graphics, `V`
/// video, `D` copy/DMA, `O` other, joined by `+`), `M` an MPS client, `MS` the MPS server, `-`
/// idle, `?` unknown.
fn kind_cell(kind: ProcessKind) -> String {
    match kind {
        ProcessKind::Mps => return "M".to_string(),
        ProcessKind::MpsServer => return "MS".to_string(),
        _ => {}
    }
    let Some(set) = kind.engines() else {
        return "?".to_string();
    };
    let letters: Vec<&str> = EngineClass::ALL
        .iter()
        .filter(|c| set.contains(**c))
        .map(|c| match c {
            EngineClass::Compute => "C",
            EngineClass::Graphics => "G",
            EngineClass::Video => "V",
            EngineClass::Copy => "D",
            _ => "O",
        })
        .collect();
    if letters.is_empty() {
        "-".to_string()
    } else {
        letters.join("+")
    }
}

/// The VRAM cell: the bytes, `?` when unknown, or where a shared client is counted.
fn vram_cell(r: &ProcessRow) -> String {
    match (r.gpu.used_bytes, r.gpu.shared_with.first()) {
        (Some(0), Some(owner)) => format!("sh {owner}"),
        (v, _) => opt_bytes(v),
    }
}

fn cell(r: &ProcessRow, c: Column) -> String {
    match c {
        Column::Pid => r.gpu.pid.to_string(),
        Column::User => r.user_cell(),
        Column::Name => r.name_or_unknown(),
        Column::Device => match r.gpu.mig_index {
            Some(m) => format!("{}/{m}", r.gpu.device_index),
            None => r.gpu.device_index.to_string(),
        },
        Column::Kind => kind_cell(r.gpu.kind),
        Column::Vram => vram_cell(r),
        Column::Rss => opt_bytes(r.rss_bytes),
        Column::Engine => r
            .busiest_engine()
            .map_or_else(|| "?".to_string(), |(k, v)| format!("{}% {k}", fixed(v, 0))),
        Column::Workload => r.workload_label().unwrap_or_else(|| "-".to_string()),
    }
}

/// The widths of the columns for a table `width` cells wide (NAME takes what is left).
fn widths(width: usize) -> Vec<(Column, usize)> {
    let fixed: usize = Column::ALL.iter().map(|c| width_of(*c) + 1).sum::<usize>() - 1;
    let name = width.saturating_sub(fixed).max(6);
    Column::ALL
        .iter()
        .map(|c| {
            (
                *c,
                if *c == Column::Name {
                    name
                } else {
                    width_of(*c)
                },
            )
        })
        .collect()
}

/// Draws the table into `area` (header line, then rows), keeping the selection in view.
pub fn draw_table(f: &mut Canvas<'_>, app: &mut App, area: Rect) {
    if area.height == 0 {
        return;
    }
    let t = app.theme;
    let cols = widths(usize::from(area.width));
    let mut header = Vec::new();
    for (i, (c, w)) in cols.iter().enumerate() {
        let mark = if *c == app.sort {
            if app.descending { "▼" } else { "▲" }
        } else {
            ""
        };
        let title = format!("{}{mark}", c.title());
        let style = if *c == app.sort {
            t.selected()
        } else {
            t.header()
        };
        if i > 0 {
            header.push(Span::styled(" ", t.header()));
        }
        header.push(Span::styled(fit(&title, *w, right(*c)), style));
    }
    f.line(
        &Line::from(header),
        Rect::new(area.x, area.y, area.width, 1),
    );
    let rows_h = usize::from(area.height - 1);
    app.page = rows_h;
    app.table_top = area.y + 1;
    if app.snap().is_none() {
        return;
    }
    let lines = app.lines();
    if lines.is_empty() {
        let none = app.snap().is_none_or(|s| s.processes.is_empty());
        let text = if none {
            "no process holds GPU memory".to_string()
        } else {
            format!("no process matches \"{}\"", sanitize(&app.filter))
        };
        f.line(
            &Line::from(Span::styled(text, t.dim())),
            Rect::new(area.x, area.y + 1, area.width, 1),
        );
        return;
    }
    let sel = app.selected_index(&lines).unwrap_or(0);
    if sel < app.scroll {
        app.scroll = sel;
    } else if rows_h > 0 && sel >= app.scroll + rows_h {
        app.scroll = sel + 1 - rows_h;
    }
    app.scroll = app.scroll.min(lines.len().saturating_sub(rows_h.max(1)));
    let mut drawn = std::mem::take(&mut app.drawn_rows);
    draw_rows(f, app, &lines, &mut drawn, area, (sel, &cols));
    app.drawn_rows = drawn;
}

/// Draws the rows of `lines` from `app.scroll` on, below the header in `area`, `sel` the
/// selected one: each from the text kept in `drawn` when its inputs are unchanged.
fn draw_rows(
    f: &mut Canvas<'_>,
    app: &App,
    lines: &[super::rows::Line],
    drawn: &mut DrawnRows,
    area: Rect,
    (sel, cols): (usize, &[(Column, usize)]),
) {
    let t = app.theme;
    let Some(snap) = app.snap() else {
        return;
    };
    let rows_h = usize::from(area.height.saturating_sub(1));
    drawn.truncate(rows_h);
    for (n, l) in lines.iter().enumerate().skip(app.scroll).take(rows_h) {
        let y = area.y + 1 + u16::try_from(n - app.scroll).unwrap_or(0);
        let inputs = RowInputs {
            width: area.width,
            line: l,
            row: l.row.map(|r| &snap.processes[r]),
            flagged: app.trends.flagged(l.pid, l.start_time, l.device),
        };
        let text = drawn.text(n - app.scroll, &inputs, |i| row_text(i, cols));
        let style = if n == sel {
            t.selected()
        } else if l.row.is_none() {
            t.dim()
        } else {
            ratatui::style::Style::default()
        };
        f.line(
            &Line::from(Span::styled(text, style)),
            Rect::new(area.x, y, area.width, 1),
        );
    }
}

/// The text of a table row, cut to the columns' widths.
fn row_text(i: &RowInputs<'_>, cols: &[(Column, usize)]) -> String {
    let l = i.line;
    let mut text = String::with_capacity(usize::from(i.width) + 16);
    for (n, (c, w)) in cols.iter().enumerate() {
        if n > 0 {
            text.push(' ');
        }
        let value = match (i.row, c) {
            (_, Column::Name) => format!(
                "{}{}{}",
                l.prefix,
                if i.flagged { "↑ " } else { "" },
                sanitized(&l.name)
            ),
            (Some(r), c) => {
                let v = cell(r, *c);
                match sanitized(&v) {
                    std::borrow::Cow::Borrowed(_) => v,
                    std::borrow::Cow::Owned(escaped) => escaped,
                }
            }
            (None, Column::Pid) => l.pid.to_string(),
            (None, _) => String::new(),
        };
        push_fit(&mut text, &value, *w, right(*c));
    }
    text
}

fn region_text(name: &str, r: Option<RegionUsage>) -> Option<String> {
    let r = r?;
    let mut parts = Vec::new();
    for (label, v) in [
        ("resident", r.resident_bytes),
        ("total", r.total_bytes),
        ("shared", r.shared_bytes),
        ("evicted", r.evicted_bytes),
    ] {
        if let Some(v) = v {
            parts.push(format!("{label} {}", bytes(v)));
        }
    }
    Some(format!("  {name}: {}", parts.join(", ")))
}

/// The detail pane's lines for the selected process.
pub fn detail_lines(s: &Snapshot, app: &App) -> Vec<String> {
    let lines = app.lines();
    let Some(l) = app.selected_index(&lines).map(|i| &lines[i]) else {
        return vec!["no process selected".to_string()];
    };
    let Some(r) = l.row.map(|i| &s.processes[i]) else {
        return vec![
            format!("PID {}  {}", l.pid, l.name),
            "a parent of GPU processes; it holds no GPU memory itself".to_string(),
        ];
    };
    let mut out = vec![format!(
        "PID {}  {}  user {}{}",
        r.gpu.pid,
        r.name_or_unknown(),
        r.user_cell(),
        r.ppid.map(|p| format!("  parent {p}")).unwrap_or_default()
    )];
    out.push(format!(
        "command: {}",
        r.cmdline.as_deref().unwrap_or("? (unreadable)")
    ));
    out.push(match &r.gpu.workload {
        Some(w) => format!("{}: {}", w.kind, w.label()),
        None => "workload: - (none named by its cgroup, or no cgroup read)".to_string(),
    });
    let devices = s.processes.iter().filter(|p| p.gpu.pid == r.gpu.pid);
    for p in devices {
        let g = &p.gpu;
        let name = s
            .device(g.device_index)
            .and_then(|d| d.name.clone())
            .unwrap_or_else(|| "?".to_string());
        out.push(format!(
            "GPU{} {name}: VRAM {} ({}, {})",
            g.device_index,
            vram_cell(p),
            g.kind,
            g.source
        ));
        if let Some(m) = s.mig_cell(p) {
            out.push(format!(
                "  MIG device {}: {m}",
                g.mig_index.unwrap_or_default()
            ));
        }
        if let Some(f) = app.trends.vram(g.pid, p.start_time, g.device_index) {
            out.push(super::growth::flag_line("  VRAM grows steadily", f));
        }
        if let Some(d) = s.device(g.device_index) {
            let u = super::health::unattributed(s, d);
            out.push(format!(
                "  unattributed: {}",
                crate::health::unattributed_cell(&u)
            ));
            if let Some(m) = d
                .compute_mode
                .filter(|m| *m != hypomnesis::ComputeMode::Default)
            {
                out.push(format!("  compute mode {m}"));
            }
            out.extend(super::health::health_lines(d));
            let tally = app.xid.as_ref().map(|t| {
                t.lock()
                    .map_or_else(|p| p.into_inner().clone(), |t| t.clone())
            });
            out.push(super::health::xid_line(tally.as_ref(), d.index));
        }
    }
    if let Some(f) = app.trends.ram(r.gpu.pid, r.start_time) {
        out.push(super::growth::flag_line("RAM grows steadily", f));
    }
    out.push(format!("host RSS {}", opt_bytes(r.rss_bytes)));
    if let Some(reg) = &r.gpu.regions {
        out.push("regions:".to_string());
        out.extend(
            [
                region_text("vram", reg.vram),
                region_text("gtt", reg.gtt),
                region_text("system", reg.system),
            ]
            .into_iter()
            .flatten(),
        );
    }
    let engines = r.engines();
    if !engines.is_empty() {
        let e: Vec<String> = engines
            .iter()
            .map(|(k, v)| format!("{k} {}%", fixed(*v, 0)))
            .collect();
        out.push(format!("engines: {}", e.join(", ")));
    }
    if !r.gpu.drm_clients.is_empty() {
        let c: Vec<String> = r.gpu.drm_clients.iter().map(ToString::to_string).collect();
        out.push(format!("DRM clients: {}", c.join(", ")));
    }
    if !r.gpu.shared_with.is_empty() {
        let c: Vec<String> = r.gpu.shared_with.iter().map(ToString::to_string).collect();
        out.push(format!("shared with: {} (counted there)", c.join(", ")));
    }
    for u in &r.gpu.unknown {
        out.push(format!("{} unknown ({}: {})", u.field, u.reason, u.detail));
    }
    out.into_iter().map(|l| sanitize(&l)).collect()
}

/// Draws the detail pane.
pub fn draw_detail(f: &mut Canvas<'_>, app: &App, area: Rect) {
    let Some(s) = app.snap() else {
        return;
    };
    let text: Vec<Line<'_>> = detail_lines(s, app).into_iter().map(Line::from).collect();
    let block = Block::default()
        .borders(Borders::TOP | Borders::LEFT)
        .title(Span::styled(" detail (Enter closes) ", app.theme.header()));
    f.render_widget(
        Paragraph::new(text).block(block).wrap(Wrap { trim: false }),
        area,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_cells_name_every_class_and_mps_role() {
        for (kind, cell) in [
            ("compute", "C"),
            ("graphics", "G"),
            ("compute+graphics", "C+G"),
            ("graphics+video+copy", "G+V+D"),
            ("other", "O"),
            ("idle", "-"),
            ("unknown", "?"),
            ("mps", "M"),
            ("mps-server", "MS"),
            ("compute+graphics+video+copy+other", "C+G+V+D+O"),
        ] {
            assert_eq!(kind_cell(kind.parse().unwrap()), cell, "{kind}");
        }
        assert!(
            "graphics+warp".parse::<ProcessKind>().is_err(),
            "no such kind reaches the table"
        );
    }

    #[test]
    fn a_mig_row_names_its_mig_device_in_dev_and_the_detail() {
        let mut g = hypomnesis::test_helpers::GpuProcessBuilder::new(7, 1)
            .used_bytes(Some(1 << 30))
            .build();
        g.mig_index = Some(2);
        let mut r = ProcessRow::from_gpu(g);
        assert_eq!(cell(&r, Column::Device), "1/2");
        r.gpu.mig_index = None;
        assert_eq!(cell(&r, Column::Device), "1");
    }

    #[test]
    fn fit_pads_cuts_and_aligns_by_display_width() {
        assert_eq!(fit("ab", 4, false), "ab  ");
        assert_eq!(fit("ab", 4, true), "  ab");
        assert_eq!(fit("abcdef", 4, false), "abc…");
        assert_eq!(fit("训练脚本", 5, false), "训练…");
        assert_eq!(fit("训练脚本", 5, false).width(), 5);
    }

    #[test]
    fn columns_fill_80_cells() {
        let w = widths(80);
        let total: usize = w.iter().map(|(_, w)| w).sum::<usize>() + w.len() - 1;
        assert_eq!(total, 80);
        assert!(w.iter().any(|(c, w)| *c == Column::Name && *w >= 10));
    }
}
