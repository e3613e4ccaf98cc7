//! Text formatting shared by the subcommands: byte sizes, terminal-safe text, CSV fields and a
//! column table measured in display width (so CJK names align).

use unicode_width::UnicodeWidthStr;

const KIB: u64 = 1024;

/// Formats bytes with binary units and one decimal (`512 B`, `1.5 KiB`, `79.6 GiB`); a whole
/// number drops the `.0`.
///
/// In integers (float formatting was a tenth of `hmn top`'s drawing), giving what `{:.1}` of
/// the exact quotient gives: ties to even. Beyond 2^53 bytes, where `n as f64` is no longer
/// exact, the float reading is kept.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if n < KIB {
        return format!("{n} B");
    }
    if n >= 1 << 53 {
        return bytes_by_float(n, &UNITS);
    }
    // The unit where the value is below 1024 (or the last).
    let mut k = 0;
    while k + 1 < UNITS.len() && u128::from(n) >= 1u128 << (10 * (k + 2)) {
        k += 1;
    }
    let divisor = 1u128 << (10 * (k + 1));
    let tenths = u128::from(n) * 10;
    let (mut q, r) = (tenths / divisor, tenths % divisor);
    if 2 * r > divisor || (2 * r == divisor && q % 2 == 1) {
        q += 1;
    }
    // Below 2^53 × 10 / 1024: a u64.
    let q = u64::try_from(q).unwrap_or(u64::MAX);
    if q % 10 == 0 {
        format!("{} {}", q / 10, UNITS[k])
    } else {
        format!("{}.{} {}", q / 10, q % 10, UNITS[k])
    }
}

/// [`bytes`] through `f64`, for sizes an `f64` does not hold exactly.
fn bytes_by_float(n: u64, units: &[&str; 6]) -> String {
    let mut value = n as f64 / KIB as f64;
    let mut unit = units[0];
    for next in &units[1..] {
        if value < 1024.0 {
            break;
        }
        value /= 1024.0;
        unit = next;
    }
    let text = format!("{value:.1}");
    let text = text.strip_suffix(".0").unwrap_or(&text);
    format!("{text} {unit}")
}

/// Formats an optional size; unknown is `?`, never `0`.
pub fn opt_bytes(n: Option<u64>) -> String {
    n.map_or_else(|| "?".to_string(), bytes)
}

/// A duration as people read it, exactly as given: `50 ms`, `1 s`, `1.25 s`, `90 s` (never
/// rounded to a figure the command does not use, such as `0.1 s` for 50 ms).
pub fn duration(d: std::time::Duration) -> String {
    if d < std::time::Duration::from_secs(1) {
        let ms = d.as_secs_f64() * 1000.0;
        let text = format!("{ms:.3}");
        format!("{} ms", text.trim_end_matches('0').trim_end_matches('.'))
    } else {
        let text = format!("{:.3}", d.as_secs_f64());
        format!("{} s", text.trim_end_matches('0').trim_end_matches('.'))
    }
}

/// `v` with `decimals` digits after the point (0 or 1), as `format!("{v:.N}")` writes it: the
/// nearest, ties to even. In integers where the value allows (non-negative and below 2^53):
/// `{:.N}` of a whole number such as a temperature falls back to bignum arithmetic, and
/// `hmn top` draws a few per device every frame.
#[cfg_attr(not(feature = "top"), allow(dead_code))]
pub fn fixed(v: f64, decimals: u8) -> String {
    let scaled = if decimals == 1 { v * 10.0 } else { v };
    // A product that lands on a tie may hide which side of it `v` is: the float reading.
    let hidden_tie = decimals == 1 && scaled.fract() == 0.5;
    if decimals > 1 || hidden_tie || v.is_sign_negative() || !(0.0..9.0e15).contains(&scaled) {
        return format!("{v:.*}", usize::from(decimals));
    }
    // A whole number below 2^53: exact as an integer.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let n = scaled.round_ties_even() as u64;
    if decimals == 1 {
        format!("{}.{}", n / 10, n % 10)
    } else {
        n.to_string()
    }
}

/// Makes text safe for a terminal: control characters (C0, DEL, C1 — so no escape sequence a
/// hostile process name, file or driver could carry survives) are shown as `\x..` / `\u{..}`
/// escapes. The one rule for everything hmn prints that came from outside: the library's
/// ([`hypomnesis::ProcessName::escape_str`], the rule its names are displayed by).
pub fn sanitize(text: &str) -> String {
    hypomnesis::ProcessName::escape_str(text)
}

/// [`sanitize`], borrowed when there is nothing to escape (most text).
#[cfg_attr(not(feature = "top"), allow(dead_code))]
pub fn sanitized(text: &str) -> std::borrow::Cow<'_, str> {
    if text.chars().any(char::is_control) {
        std::borrow::Cow::Owned(sanitize(text))
    } else {
        std::borrow::Cow::Borrowed(text)
    }
}

/// [`sanitize`] for text of several lines: line feeds and tabs are kept, every other control
/// character escaped. Borrowed when there is nothing to escape.
pub fn sanitize_lines(text: &str) -> std::borrow::Cow<'_, str> {
    let layout = |c: char| c == '\n' || c == '\t';
    if !text.chars().any(|c| c.is_control() && !layout(c)) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    let mut rest = text;
    while let Some(at) = rest.find(layout) {
        out.push_str(&sanitize(&rest[..at]));
        out.push_str(&rest[at..=at]);
        rest = &rest[at + 1..];
    }
    out.push_str(&sanitize(rest));
    std::borrow::Cow::Owned(out)
}

/// Column alignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// A plain text table: columns separated by two spaces, widths in terminal display width.
#[derive(Debug)]
pub struct Table {
    headers: Vec<(&'static str, Align)>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(headers: &[(&'static str, Align)]) -> Self {
        Table {
            headers: headers.to_vec(),
            rows: Vec::new(),
        }
    }

    /// Adds a row; cells are sanitised for the terminal.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells.iter().map(|c| sanitize(c)).collect());
    }

    /// Renders header and rows, each line ending in `\n`; the last column is not padded.
    pub fn render(&self) -> String {
        self.render_at(&self.widths())
    }

    /// [`Table::render`] for a table printed again and again under one header (`watch`'s
    /// samples): each column at least as wide as `kept` says it was, `kept` widened to this
    /// table's; `true` when a column widened (the header printed before no longer lines up).
    pub fn render_kept(&self, kept: &mut Vec<usize>) -> (String, bool) {
        let mut widths = self.widths();
        let grew = widths.len() != kept.len() || widths.iter().zip(kept.iter()).any(|(w, k)| w > k);
        for (w, k) in widths.iter_mut().zip(kept.iter()) {
            *w = (*w).max(*k);
        }
        kept.clone_from(&widths);
        (self.render_at(&widths), grew)
    }

    /// Each column's width: its widest cell or its header.
    fn widths(&self) -> Vec<usize> {
        self.headers
            .iter()
            .enumerate()
            .map(|(i, (h, _))| {
                self.rows
                    .iter()
                    .filter_map(|r| r.get(i))
                    .map(|c| c.width())
                    .chain(std::iter::once(h.width()))
                    .max()
                    .unwrap_or(0)
            })
            .collect()
    }

    fn render_at(&self, widths: &[usize]) -> String {
        let mut out = String::new();
        let header: Vec<String> = self.headers.iter().map(|(h, _)| (*h).to_string()).collect();
        for cells in std::iter::once(&header).chain(&self.rows) {
            let last = self.headers.len().saturating_sub(1);
            let mut line = String::new();
            for (i, ((_, align), width)) in self.headers.iter().zip(widths).enumerate() {
                let cell = cells.get(i).map_or("", String::as_str);
                let pad = width.saturating_sub(cell.width());
                if i > 0 {
                    line.push_str("  ");
                }
                match align {
                    Align::Right => {
                        line.push_str(&" ".repeat(pad));
                        line.push_str(cell);
                    }
                    Align::Left if i == last => line.push_str(cell),
                    Align::Left => {
                        line.push_str(cell);
                        line.push_str(&" ".repeat(pad));
                    }
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// A CSV field: control characters escaped as the table escapes them ([`sanitize`]: a CSV
/// file is read in terminals and spreadsheets too, and a hostile name must not carry an escape
/// sequence or break a record), then quoted per RFC 4180 when it needs it.
pub fn csv_field(text: &str) -> String {
    let text = sanitize(text);
    if text.contains([',', '"']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `fixed` writes what `{:.0}` and `{:.1}` write: whole numbers, tenths and hundredths (ties
    /// among them), values a hair either side of a tie, a spread of magnitudes, and the
    /// negative, huge and non-finite values it leaves to the float reading.
    #[test]
    fn fixed_matches_the_float_reading() {
        let check = |v: f64| {
            assert_eq!(fixed(v, 0), format!("{v:.0}"), "{v:?} .0");
            assert_eq!(fixed(v, 1), format!("{v:.1}"), "{v:?} .1");
            assert_eq!(fixed(v, 2), format!("{v:.2}"), "{v:?} .2");
        };
        for k in 0..20_000u32 {
            let k = f64::from(k);
            for v in [k, k / 10.0, k / 100.0, k / 1000.0, k * 0.37, k * 123.456] {
                check(v);
                check(f64::from_bits(v.to_bits() + 1));
                if v > 0.0 {
                    check(f64::from_bits(v.to_bits() - 1));
                }
            }
        }
        for v in [
            0.05,
            0.15,
            0.25,
            0.35,
            0.45,
            2.5,
            3.5,
            1e15,
            9e15,
            1e300,
            -0.0,
            -0.4,
            -2.5,
            f64::NAN,
            f64::INFINITY,
            f64::MIN_POSITIVE,
        ] {
            check(v);
        }
    }

    /// The integer formatting gives what the float one gives: every size below 1 MiB around
    /// the unit boundaries, the ties, and sizes of every magnitude.
    #[test]
    fn bytes_in_integers_match_the_float_reading() {
        const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
        let check = |n: u64| {
            let want = if n < KIB {
                format!("{n} B")
            } else {
                bytes_by_float(n, &UNITS)
            };
            assert_eq!(bytes(n), want, "{n}");
        };
        for n in 0..(1 << 20) + 4096 {
            check(n);
        }
        for k in 1..6u32 {
            let d = 1u64 << (10 * k);
            for m in [1u64, 2, 3, 7, 10, 511, 1023, 1024] {
                for delta in 0..64u64 {
                    check((m * d).saturating_add(delta));
                    check((m * d).saturating_sub(delta));
                    // Ties: d/4 times an odd number is x.x5 exactly.
                    check((d / 4) * (2 * (m + delta) + 1));
                }
            }
        }
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            check(x >> (x % 64));
        }
    }

    #[test]
    fn sizes_are_binary_with_one_decimal() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(1024), "1 KiB");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(81_559 << 20), "79.6 GiB");
        assert_eq!(bytes(540 << 20), "540 MiB");
        assert_eq!(bytes(u64::MAX), "16 EiB");
        assert_eq!(opt_bytes(None), "?");
    }

    #[test]
    fn durations_are_said_as_given() {
        let d = std::time::Duration::from_millis;
        assert_eq!(duration(d(50)), "50 ms");
        assert_eq!(duration(d(1)), "1 ms");
        assert_eq!(duration(std::time::Duration::from_micros(1500)), "1.5 ms");
        assert_eq!(duration(d(1000)), "1 s");
        assert_eq!(duration(d(1250)), "1.25 s");
        assert_eq!(duration(d(90_000)), "90 s");
    }

    #[test]
    fn several_lines_keep_their_layout_only() {
        assert_eq!(sanitize_lines("a\tb\nc\n"), "a\tb\nc\n");
        assert!(matches!(
            sanitize_lines("plain\n"),
            std::borrow::Cow::Borrowed(_)
        ));
        assert_eq!(
            sanitize_lines("t\x1b]2;x\x07\n\u{9b}1m\r\x7f\n"),
            "t\\x1b]2;x\\x07\n\\x9b1m\\x0d\\x7f\n"
        );
    }

    #[test]
    fn sanitized_borrows_plain_text_and_escapes_as_sanitize_does() {
        for text in [
            "python3 train.py",
            "训练脚本",
            "",
            "evil\x1b[2Jname",
            "tab\there\u{85}",
        ] {
            let s = sanitized(text);
            assert_eq!(s, sanitize(text), "{text:?}");
            let plain = !text.chars().any(char::is_control);
            assert_eq!(
                matches!(s, std::borrow::Cow::Borrowed(_)),
                plain,
                "{text:?}"
            );
        }
    }

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(sanitize("a\x1b[2Jb"), "a\\x1b[2Jb");
        assert_eq!(sanitize("c1\u{9b}31m del\x7f"), "c1\\x9b31m del\\x7f");
        assert_eq!(sanitize("tab\there"), "tab\\x09here");
        assert_eq!(sanitize("名前"), "名前");
    }

    #[test]
    fn table_aligns_by_display_width() {
        let mut t = Table::new(&[
            ("PID", Align::Right),
            ("NAME", Align::Left),
            ("VRAM", Align::Right),
        ]);
        t.row(vec!["7".into(), "训练脚本".into(), "1 GiB".into()]);
        t.row(vec!["12345".into(), "python".into(), "512 MiB".into()]);
        let out = t.render();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "  PID  NAME         VRAM");
        assert_eq!(lines[1], "    7  训练脚本    1 GiB");
        assert_eq!(lines[2], "12345  python    512 MiB");
        let widths: Vec<usize> = lines.iter().map(|l| l.width()).collect();
        assert!(widths.iter().all(|w| *w == widths[0]), "{widths:?}");
    }

    /// `watch`'s tables, one per sample under one header: a column never narrows, and a
    /// widening is said (the header is printed again), so rows stay under their header.
    #[test]
    fn a_kept_table_keeps_its_widest_columns() {
        let headers = [
            ("PID", Align::Right),
            ("NAME", Align::Left),
            ("RSS", Align::Right),
        ];
        let table = |name: &str| {
            let mut t = Table::new(&headers);
            t.row(vec!["7".into(), name.into(), "1 MiB".into()]);
            t
        };
        let mut kept = Vec::new();
        let (first, grew) = table("python3").render_kept(&mut kept);
        assert!(grew, "the first table sets the widths");
        let (second, grew) = table("sh").render_kept(&mut kept);
        assert!(!grew);
        assert_eq!(
            first.lines().next(),
            second.lines().next(),
            "the same header"
        );
        assert_eq!(second.lines().nth(1), Some("  7  sh       1 MiB"));
        let (third, grew) = table("a-much-longer-name").render_kept(&mut kept);
        assert!(grew, "a wider name: the header again");
        assert_eq!(third.lines().nth(1), Some("  7  a-much-longer-name  1 MiB"));
    }

    #[test]
    fn csv_quoting() {
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(csv_field("a, b"), "\"a, b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
    }
}
