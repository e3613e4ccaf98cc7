//! Drawing: the layout of the whole screen, the host line and the device panels. The process
//! table and the panes over it are in [`super::table`] and [`super::panes`].
//!
//! Layout, top to bottom: host RAM and swap (one line); one panel per device (three lines —
//! name and telemetry, memory bar, history — or one line each when the screen is short); the
//! process table (with the detail pane beside or below it); a status line; the keys. Every
//! value that is unknown is drawn as `?`.

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::app::{App, Mode};
use super::clock::{hms, seconds, utc};
use super::recording::DevicePoint;
use super::screen::Canvas;
use super::theme::Theme;
use crate::format::{bytes, fixed, opt_bytes, sanitize};
use hypomnesis::{Device, HostMemory};

/// A bar of `width` cells: `used` then `reserved` of `total`, the rest free.
pub fn bar(
    width: usize,
    used: Option<u64>,
    reserved: Option<u64>,
    total: Option<u64>,
) -> [String; 3] {
    let Some(total) = total.filter(|t| *t > 0) else {
        return [
            String::new(),
            String::new(),
            "?".repeat(width.min(1)) + &" ".repeat(width.saturating_sub(1)),
        ];
    };
    let cells = |v: u64| ((v as f64 / total as f64) * width as f64).round() as usize;
    let u = used.map_or(0, cells).min(width);
    let r = reserved.map_or(0, cells).min(width - u);
    let unknown = used.is_none();
    [
        "█".repeat(u),
        "▒".repeat(r),
        (if unknown { "?" } else { "░" }).repeat(width - u - r),
    ]
}

fn bar_spans(
    t: Theme,
    width: usize,
    used: Option<u64>,
    reserved: Option<u64>,
    total: Option<u64>,
) -> Vec<Span<'static>> {
    let [u, r, f] = bar(width, used, reserved, total);
    vec![
        Span::raw("["),
        Span::styled(u, t.used()),
        Span::styled(r, t.reserved()),
        Span::styled(f, t.dim()),
        Span::raw("]"),
    ]
}

/// A history chart of `width` cells from the newest points (fractions 0–1); unknown points
/// are blank.
pub fn spark(points: impl DoubleEndedIterator<Item = Option<f64>>, width: usize) -> String {
    const LEVELS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let mut cells: Vec<char> = points
        .rev()
        .take(width)
        .map(|p| match p {
            Some(v) => LEVELS[((v.clamp(0.0, 1.0) * 7.0).round()) as usize],
            None => ' ',
        })
        .collect();
    cells.reverse();
    let mut s: String = " ".repeat(width - cells.len());
    s.extend(cells);
    s
}

fn pct(v: Option<f64>) -> String {
    v.map_or_else(|| "?".to_string(), |v| format!("{}%", fixed(v, 0)))
}

/// Draws the whole screen.
pub fn draw(f: &mut Canvas<'_>, app: &mut App) {
    let area = f.area();
    let t = app.theme;
    let mut y = area.y;
    let line = |y: u16| Rect::new(area.x, y, area.width, 1);
    f.line(&host_line(app, area.width), line(y));
    y += 1;
    let bottom = area.y + area.height;
    {
        // The devices are drawn from the snapshot in place (the table below needs `app`
        // mutably, so this borrow ends first).
        let app: &App = app;
        let devices: &[Device] = app.snap().map_or(&[], |s| &s.devices);
        if let Some(reason) = app.snap().and_then(|s| s.no_gpu.as_ref()) {
            if y < bottom {
                f.line(
                    &Line::from(Span::styled(sanitize(reason), t.bad())),
                    line(y),
                );
                y += 1;
            }
        }
        // Devices get three lines each while the table keeps 6 lines, else one.
        let budget = usize::from(bottom.saturating_sub(y).saturating_sub(2 + 6));
        let per = if devices.len() * 3 <= budget { 3 } else { 1 };
        let shown = devices.len().min(budget.max(1) / per.max(1));
        for d in devices.iter().take(shown) {
            for l in device_lines(app, d, usize::from(area.width), per) {
                if y < bottom {
                    f.line(&l, line(y));
                    y += 1;
                }
            }
        }
        if shown < devices.len() && y < bottom {
            let more = devices.len() - shown;
            f.line(
                &Line::from(Span::styled(
                    format!(
                        "… {more} more device{} (enlarge the window)",
                        if more == 1 { "" } else { "s" }
                    ),
                    t.dim(),
                )),
                line(y),
            );
            y += 1;
        }
    }
    let table_h = bottom.saturating_sub(y).saturating_sub(2);
    let table = Rect::new(area.x, y, area.width, table_h);
    super::panes::table_and_detail(f, app, table);
    if bottom >= 2 && y + table_h < bottom {
        f.line(&super::panes::status_line(app), line(bottom - 2));
        f.line(&super::panes::footer(app), line(bottom - 1));
    }
    super::panes::overlays(f, app, area);
}

/// `RAM [bar] 10.2 GiB / 23.5 GiB  swap [bar] 0 B / 2 GiB   live · every 1.0 s`.
fn host_line(app: &App, width: u16) -> Line<'static> {
    let t = app.theme;
    let right = match &app.mode {
        Mode::Live { interval, paused } => format!(
            "hmn top · every {}{}",
            seconds(*interval),
            if *paused { " · PAUSED" } else { "" }
        ),
        Mode::Replay {
            position,
            len,
            speed,
            paused,
            start_ms,
            file,
        } => {
            let at = app.snap().map_or(0, |s| s.unix_ms);
            format!(
                "replay {} · {} (+{}) · {}/{} · ×{speed}{}",
                short(&sanitize(file), 20),
                utc(at),
                hms(at.saturating_sub(*start_ms)),
                position + 1,
                len,
                if *paused { " · PAUSED" } else { "" }
            )
        }
    };
    let host: Option<HostMemory> = app.snap().and_then(|s| s.host);
    let w = usize::from(width);
    let right_w = unicode_width::UnicodeWidthStr::width(right.as_str());
    // The widest left part that leaves room for the right one: bars shrink, then swap goes.
    let mut spans = Vec::new();
    for (bar_w, swap) in [(20, true), (12, true), (6, true), (6, false)] {
        spans = host_spans(t, host, app, bar_w, swap);
        let used: usize = spans
            .iter()
            .map(|s| unicode_width::UnicodeWidthStr::width(s.content.as_ref()))
            .sum();
        if used + 2 + right_w <= w {
            spans.push(Span::raw(" ".repeat(w - used - right_w)));
            spans.push(Span::styled(right, t.dim()));
            break;
        }
    }
    Line::from(spans)
}

fn host_spans(
    t: Theme,
    host: Option<HostMemory>,
    app: &App,
    bar_w: usize,
    swap: bool,
) -> Vec<Span<'static>> {
    let mut spans = Vec::new();
    match host {
        Some(h) => {
            let used = h
                .memory_total_bytes
                .saturating_sub(h.memory_available_bytes);
            spans.push(Span::styled("RAM ", t.header()));
            spans.extend(bar_spans(
                t,
                bar_w,
                Some(used),
                None,
                Some(h.memory_total_bytes),
            ));
            spans.push(Span::raw(format!(
                " {} / {}",
                bytes(used),
                bytes(h.memory_total_bytes)
            )));
            if swap {
                spans.push(Span::styled("  swap ", t.header()));
                match h.swap_total_bytes {
                    Some(0) => spans.push(Span::raw("none")),
                    total => {
                        let swap_used = total
                            .zip(h.swap_free_bytes)
                            .map(|(t, f)| t.saturating_sub(f));
                        spans.extend(bar_spans(t, bar_w.min(8), swap_used, None, total));
                        spans.push(Span::raw(format!(
                            " {} / {}",
                            opt_bytes(swap_used),
                            opt_bytes(total)
                        )));
                    }
                }
            }
        }
        None => match app.snap() {
            Some(s) => spans.push(Span::styled(
                format!(
                    "RAM ? ({})",
                    sanitize(s.host_error.as_deref().unwrap_or("unreadable"))
                ),
                t.bad(),
            )),
            None => spans.push(Span::raw("RAM ? (collecting…)")),
        },
    }
    spans
}

/// The last `max` characters of a path's file name.
fn short(s: &str, max: usize) -> String {
    let name = s.rsplit('/').next().unwrap_or(s);
    let n = name.chars().count();
    if n <= max {
        name.to_string()
    } else {
        format!("…{}", name.chars().skip(n - max + 1).collect::<String>())
    }
}

fn device_lines(app: &App, d: &Device, width: usize, per: usize) -> Vec<Line<'static>> {
    let t = app.theme;
    let name = d
        .name
        .clone()
        .or_else(|| {
            d.driver.clone().map(|dr| {
                let bus = d.pci_bus_id.map(|p| p.to_string()).unwrap_or_default();
                format!("{dr} {bus}")
            })
        })
        .unwrap_or_else(|| "unknown GPU".to_string());
    let mut title = vec![
        Span::styled(format!("GPU{} ", d.index), t.header()),
        Span::raw(sanitize(&name)),
    ];
    // The worst memory-health finding, if any (the detail pane has them all).
    if let Some(worst) = d
        .health
        .as_ref()
        .and_then(|h| h.findings().into_iter().map(|f| f.severity).max())
    {
        title.push(Span::styled(format!("  memory health: {worst}"), t.bad()));
    }
    if d.is_suspended() {
        let mut l = title;
        l.push(Span::styled(
            "  suspended: not read (reading would wake it)",
            t.bad(),
        ));
        return vec![Line::from(l)];
    }
    if let Some(e) = &d.error {
        let mut l = title;
        l.push(Span::styled(format!("  error: {}", sanitize(e)), t.bad()));
        return vec![Line::from(l)];
    }
    let tel = &d.telemetry;
    let mhz = |v: Option<u32>| v.map_or_else(|| "?".to_string(), |v| v.to_string());
    let telemetry = format!(
        "util {}  {}  {}  {}/{} MHz",
        pct(tel.utilization_percent),
        tel.temperature_celsius
            .map_or_else(|| "?°C".to_string(), |c| format!("{}°C", fixed(c, 0))),
        tel.power_watts
            .map_or_else(|| "? W".to_string(), |w| format!("{} W", fixed(w, 1))),
        mhz(tel.clock_graphics_mhz),
        mhz(tel.clock_memory_mhz),
    );
    // What the bar and figures show: the device's memory pool where it has one (an APU's
    // carve-out + GTT, unified memory: what the GPU really allocates from), else its memory.
    let m = match &d.pool {
        Some(p) => hypomnesis::DeviceMemory::new(p.total_bytes, p.used_bytes, p.free_bytes, None),
        None => d.memory,
    };
    let m = &m;
    let mem_text = match &d.pool {
        Some(p) => format!(
            " {}{} / {} {}",
            if p.used_is_lower_bound { "≥" } else { "" },
            opt_bytes(p.used_bytes),
            opt_bytes(p.total_bytes),
            p.kind.label()
        ),
        None => format!(
            " {}{} / {}",
            opt_bytes(m.used_bytes),
            m.reserved_bytes
                .map(|r| format!(" + {} rsvd", bytes(r)))
                .unwrap_or_default(),
            opt_bytes(m.total_bytes)
        ),
    };
    let region = |key: &str, label: &str| {
        d.regions.get(key).map(|r| {
            format!(
                "  {label} {} / {}",
                opt_bytes(r.used_bytes),
                opt_bytes(r.total_bytes)
            )
        })
    };
    // Memory no listed process accounts for, the figure only (the detail pane names the
    // causes); not shown when it is 0.
    let unattributed = app
        .snap()
        .map(|s| super::health::unattributed(s, d))
        .filter(|u| u.bytes != Some(0))
        .map(|mut u| {
            if u.bytes.is_none() {
                return "  unattributed ?".to_string();
            }
            u.causes.clear();
            let cell = crate::health::unattributed_cell(&u);
            let prefix = format!("GPU {} ", d.index);
            format!(
                "  unattributed {}",
                cell.strip_prefix(&prefix).unwrap_or(&cell)
            )
        });
    let regions: String = [
        region("gtt", "GTT"),
        region("visible_vram", "vis"),
        unattributed,
    ]
    .into_iter()
    .flatten()
    .collect();
    if per == 1 {
        // One line: title, a short bar, the figures, utilization.
        let mut l = title;
        l.push(Span::raw(" "));
        l.extend(bar_spans(
            t,
            10,
            m.used_bytes,
            m.reserved_bytes,
            m.total_bytes,
        ));
        l.push(Span::raw(format!(
            " {} / {}  util {}",
            opt_bytes(m.used_bytes),
            opt_bytes(m.total_bytes),
            pct(tel.utilization_percent)
        )));
        return vec![Line::from(l)];
    }
    let title_w: usize = title
        .iter()
        .map(|s| unicode_width::UnicodeWidthStr::width(s.content.as_ref()))
        .sum();
    let mut first = title;
    let gap = width
        .saturating_sub(title_w + telemetry.chars().count())
        .max(2);
    first.push(Span::raw(" ".repeat(gap)));
    first.push(Span::raw(telemetry));
    let fixed = 6 + mem_text.chars().count() + regions.chars().count() + 2;
    let bar_w = width.saturating_sub(fixed).clamp(8, 60);
    let mut second = vec![Span::styled("  mem ", t.header())];
    second.extend(bar_spans(
        t,
        bar_w,
        m.used_bytes,
        m.reserved_bytes,
        m.total_bytes,
    ));
    second.push(Span::raw(mem_text));
    second.push(Span::raw(regions));
    let hist = app.history.get(&d.index);
    let chart_w = (width.saturating_sub(16) / 2).max(4);
    let points = |f: fn(&DevicePoint) -> Option<f64>| -> String {
        match hist {
            Some(h) => spark(h.iter().map(f), chart_w),
            None => " ".repeat(chart_w),
        }
    };
    let third = vec![
        Span::styled("  mem  ", t.dim()),
        Span::styled(points(|p| p.memory), t.chart()),
        Span::styled("  util ", t.dim()),
        Span::styled(points(|p| p.utilization.map(|u| u / 100.0)), t.chart()),
    ];
    vec![Line::from(first), Line::from(second), Line::from(third)]
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn bars_show_used_reserved_and_unknown() {
        assert_eq!(bar(10, Some(5), Some(1), Some(10)), ["█████", "▒", "░░░░"]);
        assert_eq!(bar(4, None, None, Some(10))[2], "????");
        assert_eq!(bar(4, Some(1), None, None)[2], "?   ");
    }

    #[test]
    fn charts_keep_the_newest_points_and_leave_unknown_blank() {
        let pts = [Some(0.0), Some(1.0), None, Some(0.5)];
        assert_eq!(spark(pts.into_iter(), 3), "█ ▅");
        assert_eq!(spark(pts.into_iter(), 6), "  ▁█ ▅");
    }

    #[test]
    fn times() {
        assert_eq!(hms(3_723_000), "01:02:03");
        assert_eq!(utc(0), "1970-01-01 00:00:00Z");
        assert_eq!(utc(1_795_000_000_000), "2026-11-18 11:06:40Z");
        assert_eq!(seconds(Duration::from_millis(250)), "250 ms");
        assert_eq!(seconds(Duration::from_secs(2)), "2.0 s");
        assert_eq!(seconds(Duration::from_millis(999)), "999 ms");
        assert_eq!(seconds(Duration::from_millis(1000)), "1.0 s");
        assert_eq!(seconds(Duration::from_millis(1249)), "1.2 s");
        assert_eq!(seconds(Duration::from_millis(1250)), "1.3 s");
        assert_eq!(seconds(Duration::from_millis(59_960)), "60.0 s");
    }
}
