//! Text formatting shared by the subcommands: byte sizes, size parsing, terminal-safe text and
//! a column table measured in display width (so CJK names align).

use std::fmt::Write as _;

use unicode_width::UnicodeWidthStr;

const KIB: u64 = 1024;

/// Formats bytes with binary units and one decimal (`512 B`, `1.5 KiB`, `79.6 GiB`); a whole
/// number drops the `.0`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if n < KIB {
        return format!("{n} B");
    }
    let mut value = n as f64 / KIB as f64;
    let mut unit = UNITS[0];
    for next in &UNITS[1..] {
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

/// Parses a size: a byte count, or a number with a unit. Binary units `K`, `KiB`, `M`, `MiB`,
/// `G`, `GiB`, `T`, `TiB` (powers of 1024) and decimal `kB`, `MB`, `GB`, `TB` (powers of 1000);
/// `B` is bytes. Case-insensitive, optional space, decimals allowed (`1.5GiB`).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let unit = unit.trim();
    let bad = || {
        format!(
            "invalid size {text:?}: expected a number with an optional unit (B, KiB, MiB, GiB, TiB, kB, MB, GB, TB)"
        )
    };
    if num.is_empty() || num.matches('.').count() > 1 {
        return Err(bad());
    }
    let factor: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        _ => return Err(bad()),
    };
    if let Ok(whole) = num.parse::<u64>() {
        return whole
            .checked_mul(factor)
            .ok_or_else(|| format!("invalid size {text:?}: too large"));
    }
    let value: f64 = num.parse().map_err(|_| bad())?;
    let bytes = (value * factor as f64).round();
    if !bytes.is_finite() || bytes >= u64::MAX as f64 {
        return Err(format!("invalid size {text:?}: too large"));
    }
    Ok(bytes as u64)
}

/// Parses a duration: a number with `ms`, `s`, `m` or `h` (a bare number is seconds), greater
/// than zero and at most a day.
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let t = text.trim();
    let bad =
        || format!("invalid duration {text:?}: expected a positive number with ms, s, m or h");
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num.parse().map_err(|_| bad())?;
    let seconds = match unit.trim() {
        "ms" => value / 1000.0,
        "" | "s" => value,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        _ => return Err(bad()),
    };
    if !(seconds > 0.0 && seconds <= 86_400.0) {
        return Err(bad());
    }
    Ok(std::time::Duration::from_secs_f64(seconds))
}

/// Makes text safe for a terminal: control characters (including escape sequences a hostile
/// process name could carry) are shown as `\x..` / `\u{..}` escapes.
pub fn sanitize(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            let code = u32::from(c);
            if code < 0x100 {
                let _ = write!(out, "\\x{code:02x}");
            } else {
                let _ = write!(out, "\\u{{{code:x}}}");
            }
        } else {
            out.push(c);
        }
    }
    out
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
        let widths: Vec<usize> = self
            .headers
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
            .collect();
        let mut out = String::new();
        let header: Vec<String> = self.headers.iter().map(|(h, _)| (*h).to_string()).collect();
        for cells in std::iter::once(&header).chain(&self.rows) {
            let last = self.headers.len().saturating_sub(1);
            let mut line = String::new();
            for (i, ((_, align), width)) in self.headers.iter().zip(&widths).enumerate() {
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

/// Quotes a CSV field per RFC 4180 when it needs it.
pub fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn size_parsing() {
        assert_eq!(parse_size("0").unwrap(), 0);
        assert_eq!(parse_size("512").unwrap(), 512);
        assert_eq!(parse_size("1GiB").unwrap(), 1 << 30);
        assert_eq!(parse_size("1.5 GiB").unwrap(), 3 << 29);
        assert_eq!(parse_size("2g").unwrap(), 2 << 30);
        assert_eq!(parse_size("100MB").unwrap(), 100_000_000);
        assert_eq!(parse_size("4 kB").unwrap(), 4000);
        for bad in ["", "GiB", "-1", "1.2.3G", "5 parsecs", "nan", "inf", "1e9"] {
            assert!(parse_size(bad).is_err(), "{bad:?}");
        }
        assert!(parse_size("99999999999999999999").is_err());
        assert!(parse_size("20000000 TiB").is_err());
    }

    #[test]
    fn durations() {
        use std::time::Duration;
        assert_eq!(parse_duration("200ms").unwrap(), Duration::from_millis(200));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("2").unwrap(), Duration::from_secs(2));
        assert_eq!(parse_duration("1m").unwrap(), Duration::from_secs(60));
        for bad in [
            "", "0", "0ms", "-1s", "1d", "ms", "1e3", "nan", "2h30m", "25h",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(sanitize("a\x1b[2Jb"), "a\\x1b[2Jb");
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

    #[test]
    fn csv_quoting() {
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(csv_field("a, b"), "\"a, b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
    }
}
