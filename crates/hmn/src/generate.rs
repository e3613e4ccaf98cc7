//! `hmn completions SHELL` and `hmn man`: shell completions (clap_complete) and the man page
//! (clap_mangen), generated from the one clap definition ([`crate::args::Cli`]), so they never
//! drift from the flags; and (in tests) `docs/cli.md`, from the same definition (`cli_doc`).
//! Install commands are in the README.

use std::io::Write;
use std::process::ExitCode;

use clap::CommandFactory;

use crate::args::Cli;

/// Writes the completion script for `shell`.
pub fn completions(shell: clap_complete::Shell, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let mut cmd = Cli::command();
    // Into memory first: clap_complete panics on a write error (a closed pipe), `out` does not.
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut cmd, "hmn", &mut buf);
    out.write_all(&buf)?;
    Ok(ExitCode::SUCCESS)
}

/// Writes the man page: `hmn(1)`, with a section per subcommand.
pub fn man(out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let mut cmd = Cli::command();
    // Built, so each subcommand carries the global options (--json, the roots).
    cmd.build();
    let page = clap_mangen::Man::new(cmd.clone());
    page.render_title(out)?;
    page.render_name_section(out)?;
    page.render_synopsis_section(out)?;
    page.render_description_section(out)?;
    page.render_options_section(out)?;
    page.render_subcommands_section(out)?;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = sub.get_name();
        writeln!(out, ".SH \"HMN {}\"", name.to_uppercase())?;
        let mut buf = Vec::new();
        let sub_page = clap_mangen::Man::new(sub.clone().bin_name(format!("hmn {name}")));
        sub_page.render_synopsis_section(&mut buf)?;
        sub_page.render_description_section(&mut buf)?;
        sub_page.render_options_section(&mut buf)?;
        // The subcommand's sections become subsections of this page.
        let text = String::from_utf8_lossy(&buf).replace(".SH ", ".SS ");
        out.write_all(text.as_bytes())?;
    }
    page.render_version_section(out)?;
    Ok(ExitCode::SUCCESS)
}

// `docs/cli.md`, generated from the same definition and checked against the committed page
// (tests only, with the features the page documents: `UPDATE_GOLDEN=1 cargo test -p hmn --bin
// hmn cli_doc` rewrites it).
#[cfg(all(test, feature = "serve", feature = "top"))]
mod cli_doc;
