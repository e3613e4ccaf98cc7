//! The screen against ratatui: the same diff as `Buffer::diff`, the same cells as a
//! `Paragraph`, a terminal that ends up showing the frame, and nothing written for a frame
//! that changed nothing.

// Test helpers: a failed step stops the test with its message.
#![allow(
    clippy::cast_possible_truncation,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::cell::Cell;
use std::io::{self, Write};
use std::rc::Rc;

use ratatui::Terminal;
use ratatui::backend::{CrosstermBackend, TestBackend};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Widget as _};

use super::{Canvas, Screen, diff, diff_rows};

/// A small deterministic generator (xorshift), so a failure names its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn pick<'a, T>(&mut self, from: &'a [T]) -> &'a T {
        &from[(self.next() % from.len() as u64) as usize]
    }
}

/// Symbols of every kind the diff must treat alike: ASCII, one-column non-ASCII, wide
/// characters, a combining sequence, an emoji, an empty symbol.
const SYMBOLS: &[&str] = &[
    " ", "a", "Z", "7", "█", "▒", "°", "中", "日", "e\u{301}", "🦀", "", "…",
];
const STYLES: &[Style] = &[
    Style::new(),
    Style::new().fg(Color::Red),
    Style::new().bg(Color::Blue),
    Style::new().add_modifier(Modifier::BOLD),
    Style::new()
        .fg(Color::Indexed(200))
        .add_modifier(Modifier::REVERSED),
];

/// A buffer of random cells, some of them marked `skip`; `change` of a base buffer's cells
/// replaced when a base is given.
fn random(rng: &mut Rng, area: Rect, base: Option<&Buffer>, change: u64) -> Buffer {
    let mut b = base.cloned().unwrap_or_else(|| Buffer::empty(area));
    for cell in &mut b.content {
        if base.is_some() && rng.next() % 100 >= change {
            continue;
        }
        cell.set_symbol(rng.pick::<&str>(SYMBOLS))
            .set_style(*rng.pick(STYLES));
        cell.skip = rng.next().is_multiple_of(17);
    }
    b
}

/// A diff's updates with their cells owned, to compare two diffs.
fn owned(
    updates: Vec<(u16, u16, &ratatui::buffer::Cell)>,
) -> Vec<(u16, u16, ratatui::buffer::Cell)> {
    updates
        .into_iter()
        .map(|(x, y, c)| (x, y, c.clone()))
        .collect()
}

#[test]
fn the_diff_is_ratatuis_diff() {
    for seed in 1..400u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let area = Rect::new(
            (rng.next() % 3) as u16,
            (rng.next() % 3) as u16,
            1 + (rng.next() % 40) as u16,
            1 + (rng.next() % 6) as u16,
        );
        let prev = random(&mut rng, area, None, 100);
        let next = random(&mut rng, area, Some(&prev), seed % 101);
        assert_eq!(
            owned(diff(&prev, &next)),
            owned(prev.diff(&next)),
            "seed {seed}, area {area:?}"
        );
    }
    // The same frame twice: nothing.
    let mut rng = Rng(7);
    let area = Rect::new(0, 0, 30, 4);
    let b = random(&mut rng, area, None, 100);
    assert!(diff(&b, &b.clone()).is_empty());
}

#[test]
fn the_diff_of_the_rows_drawn_on_is_ratatuis_diff() {
    for seed in 1..300u64 {
        let mut rng = Rng(seed.wrapping_mul(0x2545_f491_4f6c_dd1d));
        let area = Rect::new(
            0,
            1,
            1 + (rng.next() % 30) as u16,
            1 + (rng.next() % 8) as u16,
        );
        let w = usize::from(area.width);
        let mut prev = random(&mut rng, area, None, 100);
        let mut next = random(&mut rng, area, Some(&prev), seed % 101);
        // Rows neither frame drew on are blank in both.
        let drawn: Vec<bool> = (0..area.height)
            .map(|_| !rng.next().is_multiple_of(3))
            .collect();
        for (r, d) in drawn.iter().enumerate() {
            if !d {
                for b in [&mut prev, &mut next] {
                    for c in &mut b.content[r * w..(r + 1) * w] {
                        c.reset();
                    }
                }
            }
        }
        assert_eq!(
            owned(diff_rows(&prev, &next, |r| drawn[r])),
            owned(prev.diff(&next)),
            "seed {seed}, area {area:?}, drawn {drawn:?}"
        );
    }
}

/// Lines of every kind a `top` screen draws, and some it never does.
fn lines() -> Vec<Line<'static>> {
    let bold = Style::new().add_modifier(Modifier::BOLD);
    vec![
        Line::from("plain ASCII text, longer than some of the widths below"),
        Line::from(vec![
            Span::styled("RAM ", bold),
            Span::raw("["),
            Span::styled("████", Style::new().fg(Color::Green)),
            Span::styled("░░░░░░", Style::new().fg(Color::DarkGray)),
            Span::raw("] 41°C · 3 GiB ≥ 2 GiB … ▼▲"),
        ]),
        Line::from(vec![
            Span::raw("wide 中文 in the middle"),
            Span::styled(" then e\u{301} combined", bold),
            Span::raw(" and 🦀"),
        ]),
        Line::from("a control\u{7} char and a tab\tin it"),
        Line::from(vec![
            Span::raw("line style "),
            Span::styled("patched", bold),
        ])
        .style(Style::new().fg(Color::Yellow).bg(Color::Black)),
        Line::from(""),
        Line::from("▁▂▃▄▅▆▇█ sparkline    ▂▂"),
    ]
}

#[test]
fn a_line_draws_what_a_paragraph_draws() {
    for (n, line) in lines().iter().enumerate() {
        for (x, width) in [(0, 80), (0, 12), (3, 7), (5, 1), (2, 0), (10, 30)] {
            let area = Rect::new(0, 0, 40, 2);
            let target = Rect::new(x, 1, width, 1);
            // Drawn over a used buffer: cells the line does not reach keep what was there.
            let mut used = Buffer::empty(area);
            for c in &mut used.content {
                c.set_symbol("x").set_style(Style::new().fg(Color::Cyan));
            }
            let mut ours = used.clone();
            Canvas::new(&mut ours).line(line, target);
            let mut theirs = used.clone();
            Paragraph::new(line.clone()).render(target.intersection(area), &mut theirs);
            assert_eq!(ours, theirs, "line {n} at x {x}, width {width}");
        }
    }
}

#[test]
fn the_terminal_shows_what_ratatuis_terminal_shows() {
    let area = Rect::new(0, 0, 30, 3);
    let mut screen = Screen::new(TestBackend::new(30, 3), area).unwrap();
    let mut theirs = Terminal::new(TestBackend::new(30, 3)).unwrap();
    let frames = [
        ["hello", "中文 wide", "█▒░ 41°C"],
        ["hello", "ab wide", "█▒░ 42°C"],
        ["", "中文", "🦀 crab"],
        ["last", "e\u{301}", "frame"],
    ];
    for f in &frames {
        let row = |y: usize| Rect::new(0, y as u16, 30, 1);
        screen
            .draw(|c| {
                for (y, text) in f.iter().enumerate() {
                    c.line(&Line::from(*text), row(y));
                }
            })
            .unwrap();
        theirs
            .draw(|frame| {
                for (y, text) in f.iter().enumerate() {
                    frame.render_widget(Paragraph::new(*text), row(y));
                }
            })
            .unwrap();
        assert_eq!(
            screen.backend().buffer(),
            theirs.backend().buffer(),
            "{f:?}"
        );
    }
}

#[test]
fn frames_of_lines_and_overlays_show_as_ratatuis_terminal_shows_them() {
    let (w, h) = (24u16, 7u16);
    let area = Rect::new(0, 0, w, h);
    let mut screen = Screen::new(TestBackend::new(w, h), area).unwrap();
    let mut theirs = Terminal::new(TestBackend::new(w, h)).unwrap();
    // Most are single-column text (keyed when a whole row), as most of a `top` screen is.
    let texts = [
        "util 37%",
        "util 38%",
        "mem [████░░░░] 16 GiB",
        "",
        "中文 wide 日本",
        "█▒░ 41°C",
        "🦀 e\u{301}",
        "",
        "a much longer line than the screen is wide",
    ];
    let mut rng = Rng(0x5eed);
    for n in 0..200 {
        // Each row: nothing, or one of the texts; sometimes a bordered box over them.
        let rows: Vec<Option<&str>> = (0..h)
            .map(|_| (!rng.next().is_multiple_of(3)).then(|| *rng.pick(&texts)))
            .collect();
        let boxed = (rng.next().is_multiple_of(4))
            .then(|| Rect::new((rng.next() % 10) as u16, (rng.next() % 4) as u16, 9, 3));
        // Sometimes a second line over the right half of a row (as the detail pane beside the
        // table), drawn after the row's own.
        let pane = (rng.next().is_multiple_of(3)).then(|| {
            (
                Rect::new(w / 2, (rng.next() % u64::from(h)) as u16, w / 2, 1),
                *rng.pick(&texts),
            )
        });
        let row = |y: usize| Rect::new(0, y as u16, w, 1);
        screen
            .draw(|c| {
                for (y, t) in rows.iter().enumerate() {
                    if let Some(t) = t {
                        c.line(&Line::from(*t), row(y));
                    }
                }
                if let Some((r, t)) = pane {
                    c.line(&Line::from(t), r);
                }
                if let Some(r) = boxed {
                    c.render_widget(Clear, r);
                    c.render_widget(
                        Paragraph::new("box").block(Block::default().borders(Borders::ALL)),
                        r,
                    );
                }
            })
            .unwrap();
        theirs
            .draw(|f| {
                for (y, t) in rows.iter().enumerate() {
                    if let Some(t) = t {
                        f.render_widget(Paragraph::new(*t), row(y));
                    }
                }
                if let Some((r, t)) = pane {
                    f.render_widget(Paragraph::new(t), r);
                }
                if let Some(r) = boxed {
                    f.render_widget(Clear, r);
                    f.render_widget(
                        Paragraph::new("box").block(Block::default().borders(Borders::ALL)),
                        r,
                    );
                }
            })
            .unwrap();
        assert_eq!(
            screen.backend().buffer(),
            theirs.backend().buffer(),
            "frame {n}"
        );
    }
}

/// A writer that counts the bytes written through it.
#[derive(Clone, Default)]
struct Counted(Rc<Cell<usize>>);

impl Write for Counted {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.0.set(self.0.get() + b.len());
        Ok(b.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_frame_that_changed_nothing_writes_nothing() {
    let area = Rect::new(0, 0, 40, 5);
    let out = Counted::default();
    let mut screen = Screen::new(CrosstermBackend::new(out.clone()), area).unwrap();
    let draw = |text: &'static str| {
        move |c: &mut Canvas<'_>| c.line(&Line::from(text), Rect::new(0, 2, 40, 1))
    };
    screen.draw(draw("util 37%  41°C")).unwrap();
    let first = out.0.get();
    assert!(first > 0, "the first frame is written");
    screen.draw(draw("util 37%  41°C")).unwrap();
    assert_eq!(out.0.get(), first, "same frame: no byte");
    screen.draw(draw("util 38%  41°C")).unwrap();
    let changed = out.0.get() - first;
    // One cell: a cursor move, the colours and the character; never the whole line again.
    assert!(changed > 0 && changed < 40, "{changed} bytes for one cell");
}

/// The text the terminal shows in cells `at` (by index, rows one after the other).
fn shown(screen: &Screen<TestBackend>, at: std::ops::Range<usize>) -> String {
    screen.backend().buffer().content[at]
        .iter()
        .map(ratatui::buffer::Cell::symbol)
        .collect()
}

#[test]
fn a_row_drawn_the_same_in_both_frames_is_not_compared() {
    let area = Rect::new(0, 0, 40, 6);
    let mut screen = Screen::new(TestBackend::new(40, 6), area).unwrap();
    let frame = |util: &'static str, wide: &'static str| {
        move |c: &mut Canvas<'_>| {
            for (y, text) in [
                "RAM [████░░] 2 GiB",
                util,
                "  1234 root  python  2 GiB",
                wide,
            ]
            .iter()
            .enumerate()
            {
                c.line(&Line::from(*text), Rect::new(0, y as u16, 40, 1));
            }
        }
    };
    screen.draw(frame("util 37%", "中文")).unwrap();
    assert_eq!(screen.compared, 4, "the first frame: every row drawn on");
    screen.draw(frame("util 37%", "中文")).unwrap();
    // The wide characters' row is never keyed (a wide cell hides the next one).
    assert_eq!(
        screen.compared, 1,
        "the same frame again: only the wide row"
    );
    screen.draw(frame("util 38%", "中文")).unwrap();
    assert_eq!(screen.compared, 2, "one changed line and the wide row");
    assert_eq!(shown(&screen, 40..48), "util 38%");
    // A line drawn over a keyed row (a pane or overlay) makes it compared again.
    screen
        .draw(|c| {
            frame("util 38%", "中文")(c);
            c.line(&Line::from("pane"), Rect::new(20, 0, 10, 1));
        })
        .unwrap();
    assert_eq!(
        screen.compared, 2,
        "the row under the pane and the wide row"
    );
    assert_eq!(shown(&screen, 20..24), "pane");
}

#[test]
fn the_ascii_cells_are_the_printable_characters_in_order() {
    for (i, cell) in super::ASCII.iter().enumerate() {
        let c = char::from(u8::try_from(0x20 + i).unwrap());
        assert_eq!(cell.symbol(), c.to_string());
        assert_eq!(
            cell,
            &ratatui::buffer::Cell::EMPTY.clone().set_char(c).clone()
        );
    }
}
