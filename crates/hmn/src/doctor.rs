//! `hmn doctor`: the library's checks ([`hypomnesis::doctor`]), one line each, with the remedy
//! under a line that is not ok; JSON (schema 1) with `--json`. Exit 0 all ok, 1 warnings, 2
//! failures.

use std::io::Write;
use std::process::ExitCode;

use hypomnesis::ProbeOptions;
use hypomnesis::doctor::{self, Check, Status};
use serde::Serialize;

use crate::args::GlobalArgs;
use crate::format::sanitize;
use crate::output;

/// `hmn doctor --json` (schema 1).
#[derive(Serialize)]
struct DoctorJson<'a> {
    schema: u32,
    status: Status,
    checks: &'a [Check],
}

pub fn run(opts: &ProbeOptions, g: &GlobalArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let report = doctor::run(opts);
    if g.json {
        output::json_line(
            out,
            &DoctorJson {
                schema: 1,
                status: report.worst(),
                checks: &report.checks,
            },
        )?;
    } else {
        out.write_all(text(&report.checks).as_bytes())?;
    }
    Ok(ExitCode::from(report.exit_code()))
}

/// `ok    nvml          what it saw` per check, and `      fix: …` under one that is not ok.
fn text(checks: &[Check]) -> String {
    let width = checks.iter().map(|c| c.id.len()).max().unwrap_or(0);
    let mut s = String::new();
    for c in checks {
        s.push_str(&format!(
            "{:<4}  {:<width$}  {}\n",
            c.status.as_str(),
            c.id,
            sanitize(&c.saw)
        ));
        if let Some(r) = &c.remedy {
            s.push_str(&format!(
                "{:<4}  {:<width$}  fix: {}\n",
                "",
                "",
                sanitize(r)
            ));
        }
    }
    s
}
