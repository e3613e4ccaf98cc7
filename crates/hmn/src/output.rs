//! Everything `hmn` writes besides a subcommand's own table: one JSON document per line on
//! stdout, the `hmn: …` notes, warnings and error on stderr, and the "no GPU found (…)" line.
//! Files are written by [`crate::outfile`].
//!
//! Nothing from outside reaches the terminal raw. The rule is [`crate::format::sanitize`]
//! (control characters — C0, DEL, C1, so every escape sequence — shown as `\x..`); it is
//! applied here, on the way out, to every stderr line (the error and its whole chain, notes,
//! warnings, reports) and to all of stdout through [`Terminal`], which `main` puts under the
//! subcommands' writer; JSON escapes DEL and C1 itself ([`json_vec`]), staying valid JSON.

use std::io::{self, Write};

use anyhow::Context as _;
use hypomnesis::Warning;

use crate::format::{sanitize, sanitize_lines};

/// A serde_json formatter that also escapes DEL and the C1 controls (`\u007f`, `\u009b`):
/// serde_json escapes only C0, and a UTF-8 terminal acts on C1 (U+009B is CSI).
struct SafeJson;

impl serde_json::ser::Formatter for SafeJson {
    fn write_string_fragment<W: ?Sized + Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        let mut start = 0;
        for (i, c) in fragment.char_indices() {
            if c.is_control() {
                writer.write_all(&fragment.as_bytes()[start..i])?;
                write!(writer, "\\u{:04x}", u32::from(c))?;
                start = i + c.len_utf8();
            }
        }
        writer.write_all(&fragment.as_bytes()[start..])
    }
}

/// `value` as one JSON document (no newline), every control character escaped: what every
/// JSON line hmn writes is made of (stdout, `record`, `--timeline`).
///
/// # Errors
/// When `value` cannot be serialised.
pub fn json_vec(value: &impl serde::Serialize) -> serde_json::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(256);
    let mut ser = serde_json::Serializer::with_formatter(&mut out, SafeJson);
    value.serialize(&mut ser)?;
    Ok(out)
}

/// Serialises `value` as one line of JSON on `out`.
pub fn json_line(out: &mut dyn Write, value: &impl serde::Serialize) -> anyhow::Result<()> {
    let mut line = json_vec(value)?;
    line.push(b'\n');
    out.write_all(&line)?;
    Ok(())
}

/// Standard output made safe for a terminal: whatever is written through it reaches `inner`
/// with every control character but line feed and tab escaped ([`sanitize_lines`]; bytes that
/// are not UTF-8 as `\xNN`). A character split between two writes is held until it is whole.
/// Text that was sanitised already, and JSON from [`json_vec`], pass unchanged.
#[derive(Debug)]
pub struct Terminal<W: Write> {
    inner: W,
    pending: Vec<u8>,
}

impl<W: Write> Terminal<W> {
    pub fn new(inner: W) -> Terminal<W> {
        Terminal {
            inner,
            pending: Vec::new(),
        }
    }

    /// Passes on every whole character of `pending`, escaped; keeps an incomplete last one
    /// unless `all`.
    fn pass(&mut self, all: bool) -> io::Result<()> {
        let mut out = Vec::with_capacity(self.pending.len());
        let mut done = 0;
        while done < self.pending.len() {
            match std::str::from_utf8(&self.pending[done..]) {
                Ok(text) => {
                    out.extend_from_slice(sanitize_lines(text).as_bytes());
                    done = self.pending.len();
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    let text =
                        std::str::from_utf8(&self.pending[done..done + valid]).unwrap_or_default();
                    out.extend_from_slice(sanitize_lines(text).as_bytes());
                    done += valid;
                    let bad = match e.error_len() {
                        Some(n) => n,
                        None if all => self.pending.len() - done,
                        None => break,
                    };
                    for b in &self.pending[done..done + bad] {
                        out.extend_from_slice(format!("\\x{b:02x}").as_bytes());
                    }
                    done += bad;
                }
            }
        }
        self.pending.drain(..done);
        self.inner.write_all(&out)
    }
}

impl<W: Write> Write for Terminal<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.pending.extend_from_slice(buf);
        self.pass(false)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl<W: Write> Drop for Terminal<W> {
    fn drop(&mut self) {
        if !self.pending.is_empty() {
            let _ = self.pass(true);
            let _ = self.inner.flush();
        }
    }
}

/// Writes one `hmn: …` line to stderr.
pub fn note(line: &str) -> anyhow::Result<()> {
    writeln!(io::stderr().lock(), "hmn: {}", sanitize(line)).context("writing to stderr")?;
    Ok(())
}

/// Runs `write` on a thread of its own (`name`) and waits at most `wait` for it: a write to a
/// terminal that stopped reading (a stalled ssh session) or a pipe nobody reads would never
/// return, and a process about to end must not wait on it.
pub fn write_within(name: &str, wait: std::time::Duration, write: impl FnOnce() + Send + 'static) {
    let (done, waited) = std::sync::mpsc::channel();
    let writer = std::thread::Builder::new()
        .name(name.to_string())
        .spawn(move || {
            write();
            let _ = done.send(());
        });
    if writer.is_ok() {
        let _ = waited.recv_timeout(wait);
    }
}

/// [`note`] through [`write_within`]: for a process about to end whose stderr may be a pipe
/// nobody reads.
pub fn note_within(line: &str, wait: std::time::Duration) {
    let line = line.to_string();
    write_within("hmn-note", wait, move || {
        let _ = note(&line);
    });
}

/// Writes warnings to stderr, one `hmn: warning: …` line each.
pub fn warnings(warnings: &[Warning]) -> anyhow::Result<()> {
    let mut err = io::stderr().lock();
    for w in warnings {
        writeln!(err, "hmn: warning: {}", sanitize(&w.to_string())).context("writing to stderr")?;
    }
    Ok(())
}

/// Writes a report (already formatted, one or more lines) to stderr, each line made safe.
pub fn report(text: &str) -> anyhow::Result<()> {
    io::stderr()
        .lock()
        .write_all(sanitize_lines(text).as_bytes())?;
    Ok(())
}

/// Writes the one line that reports an error (`hmn: …`, the whole chain, [`chain`], made safe
/// for the terminal: paths, parser messages and anything else an error quotes); a failure to
/// write it has nowhere to be reported.
pub fn error(e: &anyhow::Error) {
    let _ = writeln!(io::stderr().lock(), "hmn: {}", sanitize(&chain(e)));
}

/// An error and its causes as one line, `outer: cause: …` as anyhow's `{:#}` joins them, each
/// text once: a cause whose text the line already holds is left out. Many error types put their
/// source's text in their own message and return it as `source()` too (thiserror's
/// `#[error("{path}: {source}")]` over a field named `source`; the library's
/// `Error::Io`, `CgroupError`, `Refusal::Create`, `BackendError::{Spawn, Wait, Output}`, the
/// replay's `ReplayError::Io`), which `{:#}` would print twice (`…: No such file or directory
/// (os error 2): No such file or directory (os error 2)`). The types keep their `source()` for
/// callers that walk the chain; the repetition is dropped here, where the chain is printed.
pub fn chain(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for (i, cause) in e.chain().enumerate() {
        let text = cause.to_string();
        if i == 0 {
            line = text;
        } else if !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
    }
    line
}

/// A usage error as one line: clap's rendering (`error: MESSAGE`, an indented detail, a `tip:`,
/// a usage block and a pointer to `--help`, over several lines) folded into `hmn: MESSAGE
/// DETAIL; TIP (see 'hmn SUBCOMMAND --help')`, terminal-safe (pure).
pub fn usage_error(rendered: &str, subcommand: &str) -> String {
    let mut message = Vec::new();
    let mut tips = Vec::new();
    for (i, paragraph) in rendered.split("\n\n").enumerate() {
        let words = paragraph
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join(" ");
        if i == 0 {
            message.push(words.strip_prefix("error: ").unwrap_or(&words).to_string());
        } else if let Some(tip) = words.strip_prefix("tip: ") {
            tips.push(tip.to_string());
        }
        // The usage block and "For more information" are replaced by the pointer to --help.
    }
    let mut line = message.join(" ");
    for tip in tips {
        line.push_str("; ");
        line.push_str(&tip);
    }
    let help = if subcommand.is_empty() {
        "hmn --help".to_string()
    } else {
        format!("hmn {subcommand} --help")
    };
    format!("hmn: {} (see '{help}')", sanitize(line.trim_end()))
}

/// `no GPU found (NVML: reason; nvidia-smi: reason)`.
pub fn no_gpu_line(absent: &[hypomnesis::BackendProblem]) -> String {
    let reasons: Vec<String> = absent.iter().map(ToString::to_string).collect();
    if reasons.is_empty() {
        "no GPU found".to_string()
    } else {
        format!("no GPU found ({})", reasons.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error whose message holds its source's text and which returns it as `source()`.
    #[derive(Debug, thiserror::Error)]
    #[error("{path}: {source}")]
    struct Repeats {
        path: String,
        source: io::Error,
    }

    #[test]
    fn a_cause_already_in_the_message_is_printed_once() {
        let io = || io::Error::from_raw_os_error(2);
        let e = anyhow::Error::new(Repeats {
            path: "/x".into(),
            source: io(),
        });
        assert_eq!(
            format!("{e:#}").matches("os error 2").count(),
            2,
            "anyhow alone repeats it"
        );
        assert_eq!(chain(&e), format!("/x: {}", io()));
        // A context above it, and a source not in the message: each kept.
        let e = anyhow::Error::new(io()).context("--timeline /x");
        assert_eq!(chain(&e), format!("--timeline /x: {}", io()));
        let e = e.context("run");
        assert_eq!(chain(&e), format!("run: --timeline /x: {}", io()));
    }

    #[test]
    fn no_gpu_line_lists_each_backends_reason() {
        assert_eq!(no_gpu_line(&[]), "no GPU found");
        use hypomnesis::{Backend, BackendCause, BackendProblem};
        let absent = [
            BackendProblem::new(
                Backend::Nvml,
                BackendCause::LibraryMissing,
                "library not found",
            ),
            BackendProblem::new(
                Backend::NvidiaSmi,
                BackendCause::LibraryMissing,
                "not on PATH",
            ),
        ];
        assert_eq!(
            no_gpu_line(&absent),
            "no GPU found (NVML: library not found; nvidia-smi: not on PATH)"
        );
    }

    #[test]
    fn usage_errors_are_one_line() {
        let rendered = "error: unexpected argument '--jsn' found\n\n  tip: a similar argument exists: '--json'\n\nUsage: hmn ps --json\n\nFor more information, try '--help'.\n";
        assert_eq!(
            usage_error(rendered, "ps"),
            "hmn: unexpected argument '--jsn' found; a similar argument exists: '--json' (see 'hmn ps --help')"
        );
        let rendered = "error: the following required arguments were not provided:\n  <SIZE|PATH>\n\nUsage: hmn fits <SIZE|PATH>\n\nFor more information, try '--help'.\n";
        assert_eq!(
            usage_error(rendered, "fits"),
            "hmn: the following required arguments were not provided: <SIZE|PATH> (see 'hmn fits --help')"
        );
        let rendered =
            "error: unrecognized subcommand 'frob\x1b[2J'\n\nUsage: hmn [OPTIONS] [COMMAND]\n";
        assert_eq!(
            usage_error(rendered, ""),
            "hmn: unrecognized subcommand 'frob\\x1b[2J' (see 'hmn --help')"
        );
    }

    #[test]
    fn json_escapes_every_control_character_and_stays_json() {
        let hostile = "a\x1b]2;t\x07\u{9b}31m\x7fz";
        let mut out = Vec::new();
        json_line(&mut out, &serde_json::json!({ "name": hostile })).unwrap();
        let text = String::from_utf8(out.clone()).unwrap();
        assert!(!text.trim_end().chars().any(char::is_control), "{text:?}");
        assert!(text.contains("\\u009b31m\\u007fz"), "{text}");
        let back: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(back["name"], hostile, "the same text once parsed");
    }

    #[test]
    fn the_terminal_writer_escapes_what_slipped_through() {
        let mut out = Vec::new();
        {
            let mut t = Terminal::new(&mut out);
            t.write_all(b"ok\tcol\n\x1b]52;c;eA==\x07 ").unwrap();
            // U+009B split between two writes, then a byte that is not UTF-8.
            t.write_all(b"\xc2").unwrap();
            t.write_all(b"\x9b2J \xff\n\xc3").unwrap();
        }
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "ok\tcol\n\\x1b]52;c;eA==\\x07 \\x9b2J \\xff\n\\xc3"
        );
    }

    #[test]
    fn the_error_line_escapes_its_whole_chain() {
        let e = anyhow::anyhow!("/tmp/a\x1b]2;x\x07b: no such file").context("record: \u{9b}1m");
        let line = sanitize(&chain(&e));
        assert!(!line.chars().any(char::is_control), "{line:?}");
        assert_eq!(line, "record: \\x9b1m: /tmp/a\\x1b]2;x\\x07b: no such file");
    }

    #[test]
    fn json_is_one_line() {
        let mut out = Vec::new();
        json_line(&mut out, &serde_json::json!({"a": [1, 2], "b": "x\ny"})).unwrap();
        assert_eq!(out, b"{\"a\":[1,2],\"b\":\"x\\ny\"}\n");
    }
}
