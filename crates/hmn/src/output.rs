//! Everything `hmn` writes besides a subcommand's own table: one JSON document per line on
//! stdout, the `hmn: …` notes, warnings and error on stderr (made terminal-safe), and the
//! "no GPU found (…)" line. Files are written by [`crate::outfile`].

use std::io::{self, Write};

use anyhow::Context as _;
use hypomnesis::Warning;

use crate::format::sanitize;

/// Serialises `value` as one line of JSON on `out`.
pub fn json_line(out: &mut dyn Write, value: &impl serde::Serialize) -> anyhow::Result<()> {
    serde_json::to_writer(&mut *out, value)?;
    writeln!(out)?;
    Ok(())
}

/// Writes one `hmn: …` line to stderr.
pub fn note(line: &str) -> anyhow::Result<()> {
    writeln!(io::stderr().lock(), "hmn: {}", sanitize(line)).context("writing to stderr")?;
    Ok(())
}

/// Writes warnings to stderr, one `hmn: warning: …` line each.
pub fn warnings(warnings: &[Warning]) -> anyhow::Result<()> {
    let mut err = io::stderr().lock();
    for w in warnings {
        writeln!(err, "hmn: warning: {}", sanitize(&w.to_string())).context("writing to stderr")?;
    }
    Ok(())
}

/// Writes a report (already formatted, one or more lines) to stderr as it is.
pub fn report(text: &str) -> anyhow::Result<()> {
    io::stderr().lock().write_all(text.as_bytes())?;
    Ok(())
}

/// Writes the one line that reports an error (`hmn: …`, the whole chain, [`chain`]); a
/// failure to write it has nowhere to be reported.
pub fn error(e: &anyhow::Error) {
    let _ = writeln!(io::stderr().lock(), "hmn: {}", chain(e));
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
    fn json_is_one_line() {
        let mut out = Vec::new();
        json_line(&mut out, &serde_json::json!({"a": [1, 2], "b": "x\ny"})).unwrap();
        assert_eq!(out, b"{\"a\":[1,2],\"b\":\"x\\ny\"}\n");
    }
}
