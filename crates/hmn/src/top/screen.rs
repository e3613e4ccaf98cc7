//! The terminal `top` draws on: two cell buffers, the frame drawn into one, and only the cells
//! that differ from the last frame written (ratatui's `Terminal`, cheaper where `top` spends
//! its time — issue 28's profile).
//!
//! ratatui's `Buffer::diff` measures the display width of every cell's symbol three times per
//! frame (about a quarter of `top`'s CPU at one frame a second on a 160×50 screen), and its
//! `Paragraph` segments every span into graphemes to draw one line. Here a cell whose symbol is
//! one printable ASCII byte is known to be one column wide without a table lookup, a line whose
//! characters are all single-column, non-combining ones is written cell by cell, and a frame
//! that changed nothing writes nothing. Everything else goes through ratatui's own code, so
//! what is drawn is what ratatui would draw (tested against it below).
//!
//! Most of a `top` screen is the same from one second to the next (a process's row, a device's
//! name), so a row is also remembered by what drew it: a line as wide as the screen, of
//! single-column characters, is keyed by a hash of its text, styles and place. A row whose key
//! the buffer already holds is not written again; one the terminal shows is copied from the
//! shown frame; and a row with the same key in both frames is not compared at all (its cells
//! are equal, every one a column wide, so ratatui's diff would find nothing there either). Rows
//! are blanked when first drawn on in a frame, or at its end when nothing drew on them.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::io;

use ratatui::backend::Backend;
use ratatui::buffer::{Buffer, Cell};
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::Widget;
use unicode_width::UnicodeWidthStr as _;

/// What a row of a buffer holds.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Held {
    /// Blank cells only.
    Blank,
    /// Exactly what [`Canvas::line`] draws on a blank row for the line with this key: every
    /// cell one column wide.
    Line(u64),
    /// Anything else.
    Other,
}

/// What the frame being drawn has done to a row so far.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Now {
    /// Not drawn on: still holds the older frame's cells (blanked when the frame ends).
    Untouched,
    /// Drawn on (blanked first).
    Drawn,
}

/// The rows of the buffer being drawn and of the frame on the terminal, for a [`Canvas`]
/// drawing a [`Screen`]'s frame.
struct Rows<'a> {
    held: &'a mut [Held],
    now: &'a mut [Now],
    shown: &'a Buffer,
    shown_held: &'a [Held],
}

/// Where the view draws: a buffer and the area it covers (what ratatui's `Frame` gives, without
/// a terminal, so a frame can be drawn into any buffer).
pub struct Canvas<'a> {
    buf: &'a mut Buffer,
    area: Rect,
    /// The rows' state when drawing a [`Screen`]'s frame (none for a plain buffer).
    rows: Option<Rows<'a>>,
}

impl<'a> Canvas<'a> {
    /// A canvas over all of `buf`.
    #[cfg(test)]
    pub fn new(buf: &'a mut Buffer) -> Canvas<'a> {
        let area = buf.area;
        Canvas {
            buf,
            area,
            rows: None,
        }
    }

    /// Makes the rows of `area` ready to draw on: blanked if this frame has not drawn on them
    /// yet, and no longer what a keyed line drew.
    fn touch(&mut self, area: Rect) {
        let Some(rows) = self.rows.as_mut() else {
            return;
        };
        let width = usize::from(self.buf.area.width);
        let top = usize::from(area.y.saturating_sub(self.buf.area.y));
        for r in top..(top + usize::from(area.height)).min(rows.held.len()) {
            if rows.now[r] == Now::Untouched {
                if rows.held[r] != Held::Blank {
                    blank(&mut self.buf.content[r * width..(r + 1) * width]);
                }
                rows.now[r] = Now::Drawn;
            }
            rows.held[r] = Held::Other;
        }
    }

    /// The area to draw in.
    pub fn area(&self) -> Rect {
        self.area
    }

    /// Draws `widget` in `area`.
    pub fn render_widget<W: Widget>(&mut self, widget: W, area: Rect) {
        let area = area.intersection(self.area);
        self.touch(area);
        widget.render(area, self.buf);
    }

    /// Draws one line at the top left of `area`, cut at its width: what a `Paragraph` of that
    /// line draws (no wrap, left aligned, the line's style patched by each span's), written
    /// cell by cell when every character is one column wide and cannot combine with the next,
    /// else grapheme by grapheme as the `Paragraph` would.
    ///
    /// A one-row line across the whole screen, drawn first on its row and of single-column
    /// characters only, is keyed: when the buffer or the terminal already holds it, nothing
    /// is drawn.
    pub fn line(&mut self, line: &Line<'_>, area: Rect) {
        let area = area.intersection(self.area);
        if area.is_empty() {
            return;
        }
        let key = self.keyable(line, area).then(|| key_of(line, area));
        if let Some(key) = key {
            if self.kept(key, area) {
                return;
            }
        }
        self.touch(area);
        self.write(line, area);
        if let (Some(key), Some(rows)) = (key, self.rows.as_mut()) {
            rows.held[usize::from(area.y - self.buf.area.y)] = Held::Line(key);
        }
    }

    /// Whether the row of `area` holds the keyed line `key` without drawing it: this buffer
    /// drew it two frames ago and nothing since, or the terminal shows it (its cells are copied
    /// from the shown frame).
    fn kept(&mut self, key: u64, area: Rect) -> bool {
        let Some(rows) = self.rows.as_mut() else {
            return false;
        };
        let r = usize::from(area.y - self.buf.area.y);
        if rows.held[r] != Held::Line(key) && rows.shown_held[r] != Held::Line(key) {
            return false;
        }
        if rows.held[r] != Held::Line(key) {
            let width = usize::from(self.buf.area.width);
            let row = r * width..(r + 1) * width;
            let from = &rows.shown.content[row.clone()];
            for (cell, shown) in self.buf.content[row].iter_mut().zip(from) {
                cell.clone_from(shown);
            }
            rows.held[r] = Held::Line(key);
        }
        rows.now[r] = Now::Drawn;
        true
    }

    /// Whether `line` drawn in `area` can be keyed: a screen's frame, one row as wide as the
    /// screen not drawn on yet in this frame, and characters that are all one column wide.
    fn keyable(&self, line: &Line<'_>, area: Rect) -> bool {
        self.rows.as_ref().is_some_and(|rows| {
            let r = usize::from(area.y.saturating_sub(self.buf.area.y));
            area.height == 1
                && area.x == self.buf.area.x
                && area.width == self.buf.area.width
                && rows.now.get(r) == Some(&Now::Untouched)
        }) && line
            .spans
            .iter()
            .all(|s| s.content.chars().all(single_column))
    }

    /// Writes `line` into `area` (see [`Canvas::line`]).
    fn write(&mut self, line: &Line<'_>, area: Rect) {
        let (mut x, y, right) = (area.x, area.y, area.right());
        for span in line {
            let style = line.style.patch(span.style);
            let text = span.content.as_ref();
            if text.chars().all(single_column) {
                let start = self.buf.index_of(x, y);
                let room = usize::from(right - x);
                let cells = &mut self.buf.content[start..start + room];
                let mut n = 0;
                let blank = Cell::EMPTY.style();
                for (cell, c) in cells.iter_mut().zip(text.chars()) {
                    match ASCII.get((c as usize).wrapping_sub(0x20)) {
                        // A blank cell (as a cleared row's are) becomes a copy of a ready one:
                        // no symbol to build.
                        Some(ready) if !cell.skip && cell.style() == blank => {
                            cell.clone_from(ready)
                        }
                        _ => {
                            cell.set_char(c);
                        }
                    }
                    cell.set_style(style);
                    n += 1;
                }
                x += u16::try_from(n).unwrap_or(u16::MAX);
                if x >= right {
                    return;
                }
                continue;
            }
            for g in span.styled_graphemes(line.style) {
                let w = u16::try_from(g.symbol.width()).unwrap_or(u16::MAX);
                if w > area.width {
                    continue; // wider than the whole line: left out, as ratatui does
                }
                if x.saturating_add(w) > right {
                    return; // the line is cut at the first grapheme that does not fit
                }
                if w > 0 {
                    self.buf[(x, y)].set_symbol(g.symbol).set_style(g.style);
                    x += w;
                }
            }
        }
    }
}

/// The key of `line` drawn in `area`: a hash of its place, styles and text (64 bits: two
/// different lines share a key about once in 2^64 pairs).
fn key_of(line: &Line<'_>, area: Rect) -> u64 {
    let mut h = DefaultHasher::new();
    (area.x, area.y, area.width).hash(&mut h);
    line.style.hash(&mut h);
    for s in &line.spans {
        s.style.hash(&mut h);
        s.content.as_ref().hash(&mut h);
    }
    h.finish()
}

/// Blanks `cells`.
fn blank(cells: &mut [Cell]) {
    for c in cells {
        c.reset();
    }
}

/// A blank cell for each printable ASCII character (`' '..='~'`, in order), built at compile
/// time: a cell is copied from here rather than its symbol built (ratatui's `set_char` was a
/// fifth of a frame's drawing).
#[rustfmt::skip]
static ASCII: [Cell; 95] = [
    Cell::new(" "), Cell::new("!"), Cell::new("\""), Cell::new("#"), Cell::new("$"),
    Cell::new("%"), Cell::new("&"), Cell::new("'"), Cell::new("("), Cell::new(")"),
    Cell::new("*"), Cell::new("+"), Cell::new(","), Cell::new("-"), Cell::new("."),
    Cell::new("/"), Cell::new("0"), Cell::new("1"), Cell::new("2"), Cell::new("3"),
    Cell::new("4"), Cell::new("5"), Cell::new("6"), Cell::new("7"), Cell::new("8"),
    Cell::new("9"), Cell::new(":"), Cell::new(";"), Cell::new("<"), Cell::new("="),
    Cell::new(">"), Cell::new("?"), Cell::new("@"), Cell::new("A"), Cell::new("B"),
    Cell::new("C"), Cell::new("D"), Cell::new("E"), Cell::new("F"), Cell::new("G"),
    Cell::new("H"), Cell::new("I"), Cell::new("J"), Cell::new("K"), Cell::new("L"),
    Cell::new("M"), Cell::new("N"), Cell::new("O"), Cell::new("P"), Cell::new("Q"),
    Cell::new("R"), Cell::new("S"), Cell::new("T"), Cell::new("U"), Cell::new("V"),
    Cell::new("W"), Cell::new("X"), Cell::new("Y"), Cell::new("Z"), Cell::new("["),
    Cell::new("\\"), Cell::new("]"), Cell::new("^"), Cell::new("_"), Cell::new("`"),
    Cell::new("a"), Cell::new("b"), Cell::new("c"), Cell::new("d"), Cell::new("e"),
    Cell::new("f"), Cell::new("g"), Cell::new("h"), Cell::new("i"), Cell::new("j"),
    Cell::new("k"), Cell::new("l"), Cell::new("m"), Cell::new("n"), Cell::new("o"),
    Cell::new("p"), Cell::new("q"), Cell::new("r"), Cell::new("s"), Cell::new("t"),
    Cell::new("u"), Cell::new("v"), Cell::new("w"), Cell::new("x"), Cell::new("y"),
    Cell::new("z"), Cell::new("{"), Cell::new("|"), Cell::new("}"), Cell::new("~"),
];

/// Whether `c` is always drawn in one column and begins a grapheme of its own: printable ASCII,
/// and the non-ASCII symbols `top` draws (degree and middle dot, ellipsis, arrows, ≥, box
/// drawing and block elements, triangles). A combining mark after one of them is not in this
/// set, so such a line takes ratatui's grapheme path.
fn single_column(c: char) -> bool {
    matches!(c,
        ' '..='~'
        | '°' | '·' | '×' | '…' | '≥' | '≤'
        | '\u{2190}'..='\u{2193}'
        | '\u{2500}'..='\u{259F}'
        | '▲' | '▼' | '▶' | '◀')
}

/// The display width of a cell's symbol: one for a printable ASCII byte, else what ratatui's
/// `unicode-width` says (the same crate and version, so the same answer).
fn symbol_width(s: &str) -> usize {
    match s.as_bytes() {
        [b] if (0x20..0x7f).contains(b) => 1,
        _ => s.width(),
    }
}

/// Whether two cells draw the same: ratatui's `Cell` equality (symbol, colours, modifiers,
/// `skip`), with a one-byte symbol compared as a byte.
fn same(a: &Cell, b: &Cell) -> bool {
    let (x, y) = (a.symbol().as_bytes(), b.symbol().as_bytes());
    let symbol = match (x, y) {
        ([p], [q]) => p == q,
        _ => x == y,
    };
    symbol && a.skip == b.skip && a.style() == b.style()
}

/// The cells of `next` to write over a terminal showing `prev`: ratatui's `Buffer::diff` (the
/// cells that differ, the cells after a wide character that a change uncovers, none of the
/// cells a wide character or `skip` hides), with cheaper comparisons.
#[cfg(test)]
pub fn diff<'a>(prev: &Buffer, next: &'a Buffer) -> Vec<(u16, u16, &'a Cell)> {
    diff_rows(prev, next, |_| true)
}

/// The diff (ratatui's `Buffer::diff`, as `diff` in the tests) over the rows for which `drawn`
/// is true, every other row being the same in both buffers with every cell a column wide (so
/// equal, and ending with nothing carried to the next row): only those rows are read, where
/// most of a `top` screen is blank or unchanged.
pub fn diff_rows<'a>(
    prev: &Buffer,
    next: &'a Buffer,
    drawn: impl Fn(usize) -> bool,
) -> Vec<(u16, u16, &'a Cell)> {
    let mut updates = Vec::new();
    let width = usize::from(next.area.width);
    if width == 0 || prev.area != next.area {
        return updates;
    }
    // Cells uncovered by a wide character that changed, and cells a wide character hides.
    let (mut invalidated, mut to_skip) = (0usize, 0usize);
    let rows = next.content.chunks(width).zip(prev.content.chunks(width));
    for (row, (now, before)) in rows.enumerate() {
        if invalidated == 0 && to_skip == 0 && !drawn(row) {
            continue;
        }
        for (col, (current, previous)) in now.iter().zip(before).enumerate() {
            if !current.skip && to_skip == 0 && (invalidated > 0 || !same(current, previous)) {
                let (x, y) = next.pos_of(row * width + col);
                updates.push((x, y, current));
            }
            let (w_now, w_before) = (
                symbol_width(current.symbol()),
                symbol_width(previous.symbol()),
            );
            to_skip = w_now.saturating_sub(1);
            invalidated = w_now.max(w_before).max(invalidated).saturating_sub(1);
        }
    }
    updates
}

/// A frame's cells and what each row holds.
struct Drawn {
    buf: Buffer,
    held: Vec<Held>,
    /// The frame being drawn into this buffer: which rows it drew on.
    now: Vec<Now>,
}

impl Drawn {
    fn new(area: Rect) -> Drawn {
        Drawn {
            buf: Buffer::empty(area),
            held: vec![Held::Blank; usize::from(area.height)],
            now: vec![Now::Untouched; usize::from(area.height)],
        }
    }

    /// Ends a frame: the rows it did not draw on are blanked.
    fn finish(&mut self) {
        let width = usize::from(self.buf.area.width);
        for (r, (held, now)) in self.held.iter_mut().zip(&mut self.now).enumerate() {
            if *now == Now::Untouched && *held != Held::Blank {
                blank(&mut self.buf.content[r * width..(r + 1) * width]);
                *held = Held::Blank;
            }
            *now = Now::Untouched;
        }
    }
}

/// Whether two rows are known to hold the same cells, every one a column wide: both blank, or
/// both the same keyed line.
fn same_rows(a: Held, b: Held) -> bool {
    match (a, b) {
        (Held::Blank, Held::Blank) => true,
        (Held::Line(x), Held::Line(y)) => x == y,
        _ => false,
    }
}

/// A terminal drawn a frame at a time: the frame is drawn into one buffer, the cells that
/// differ from the previous frame are written through `backend` and flushed once, and the two
/// buffers swap. Only the rows that may differ are compared (not two blank ones, nor two that
/// hold the same keyed line), so a frame costs in proportion to what changed on the screen, not
/// to the screen's size.
pub struct Screen<B: Backend> {
    backend: B,
    /// The frame on the terminal now.
    shown: Drawn,
    /// The frame being drawn.
    next: Drawn,
    /// The rows the last frame compared (tests check what is skipped).
    #[cfg(test)]
    compared: usize,
}

impl<B: Backend> Screen<B> {
    /// A screen of `area` over `backend`; the terminal is cleared.
    pub fn new(backend: B, area: Rect) -> io::Result<Screen<B>> {
        let mut s = Screen {
            backend,
            shown: Drawn::new(area),
            next: Drawn::new(area),
            #[cfg(test)]
            compared: 0,
        };
        s.resize(area)?;
        Ok(s)
    }

    /// Takes a new size: the terminal is cleared and the next frame written whole.
    pub fn resize(&mut self, area: Rect) -> io::Result<()> {
        // A cleared terminal shows blanks: what a new buffer holds.
        self.shown = Drawn::new(area);
        self.next = Drawn::new(area);
        self.backend.clear()
    }

    /// Draws a frame with `draw` and writes what changed (nothing when nothing did).
    pub fn draw(&mut self, draw: impl FnOnce(&mut Canvas<'_>)) -> io::Result<()> {
        let area = self.next.buf.area;
        draw(&mut Canvas {
            buf: &mut self.next.buf,
            area,
            rows: Some(Rows {
                held: &mut self.next.held,
                now: &mut self.next.now,
                shown: &self.shown.buf,
                shown_held: &self.shown.held,
            }),
        });
        self.next.finish();
        let (shown, next) = (&self.shown, &self.next);
        let differ = |r: usize| !same_rows(shown.held[r], next.held[r]);
        #[cfg(test)]
        {
            self.compared = (0..next.held.len()).filter(|r| differ(*r)).count();
        }
        let updates = diff_rows(&shown.buf, &next.buf, differ);
        if !updates.is_empty() {
            self.backend.draw(updates.into_iter())?;
            self.backend.flush()?;
        }
        std::mem::swap(&mut self.shown, &mut self.next);
        Ok(())
    }

    /// The backend (tests read what was written).
    #[cfg(test)]
    pub fn backend(&self) -> &B {
        &self.backend
    }
}

#[cfg(test)]
#[path = "screen_tests.rs"]
mod tests;
