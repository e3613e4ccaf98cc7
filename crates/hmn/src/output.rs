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

/// Writes the one line that reports an error (`hmn: …`, the whole chain); a failure to write
/// it has nowhere to be reported.
pub fn error(e: &anyhow::Error) {
    let _ = writeln!(io::stderr().lock(), "hmn: {e:#}");
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
pub fn no_gpu_line(absent: &[(String, String)]) -> String {
    let reasons: Vec<String> = absent.iter().map(|(b, r)| format!("{b}: {r}")).collect();
    if reasons.is_empty() {
        "no GPU found".to_string()
    } else {
        format!("no GPU found ({})", reasons.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_gpu_line_lists_each_backends_reason() {
        assert_eq!(no_gpu_line(&[]), "no GPU found");
        let absent = [
            ("NVML".to_string(), "library not found".to_string()),
            ("nvidia-smi".to_string(), "not on PATH".to_string()),
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
