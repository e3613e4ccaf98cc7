//! `docs/cli.md`: the command line's reference in Markdown, generated from the clap definition
//! ([`crate::args::Cli`]) as the man page is, and the tests that keep the committed page equal
//! to it (with every feature: the page documents `serve` and `top`).

use clap::CommandFactory;

use crate::args::Cli;

/// Refreshed by `UPDATE_GOLDEN=1 cargo test -p hmn --bin hmn cli_doc`; a test fails when the
/// committed page differs from [`cli_doc`].
const CLI_DOC_HEADER: &str = "\
# Command-line reference

<!-- Generated from hmn's own command line (crates/hmn/src/args, the definition `hmn --help`,
`hmn man` and `hmn completions` use) by `generate::cli_doc`. Do not edit: change the help texts,
then run `UPDATE_GOLDEN=1 cargo test -p hmn --bin hmn cli_doc`. -->

One section per command: its usage, what it does, its options (with their defaults and
environment variables) and its exit statuses. The same text is `hmn COMMAND --help` and
`man hmn` (`hmn man`). Overview and examples: [the README](../README.md#commands).

Every command takes the [global options](#hmn) (`--json`, `--proc-root`, `--sys-root`,
`--nvml-lib`, `--nvidia-smi`, `--cuda-order`), `-h` (summary) and `--help` (this text);
`hmn --version` prints the version and the commit. Whatever the command, a usage error or any
other error is one line on stderr (`hmn: …`) and exit status 2, and a closed stdout
(`hmn ps | head`) ends `hmn` quietly with exit status 0.
";

/// `docs/cli.md`: the command line's reference in Markdown, generated from the clap
/// definition as the man page is — one section per command (anchor `#hmn-COMMAND`, `#hmn` for
/// `hmn` itself) with its usage, description, options with defaults, and exit statuses.
pub fn cli_doc() -> String {
    let mut cmd = Cli::command();
    cmd.build();
    let mut out = String::from(CLI_DOC_HEADER);
    let subs: Vec<clap::Command> = documented(&cmd).cloned().collect();
    out.push_str("\n| Command | |\n|---|---|\n");
    out.push_str(&format!("| [`hmn`](#hmn) | {} |\n", summary(&cmd)));
    for s in &subs {
        let name = s.get_name();
        out.push_str(&format!(
            "| [`hmn {name}`](#hmn-{name}) | {} |\n",
            summary(s)
        ));
    }
    section(&mut out, &mut cmd, "hmn", true);
    for mut s in subs {
        let title = format!("hmn {}", s.get_name());
        section(&mut out, &mut s, &title, false);
    }
    out
}

/// The subcommands the page documents: every one but the hidden ones and clap's `help`.
fn documented(cmd: &clap::Command) -> impl Iterator<Item = &clap::Command> {
    cmd.get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
}

/// A command's one-line `about`, escaped for a table cell.
fn summary(cmd: &clap::Command) -> String {
    let about = cmd.get_about().map(ToString::to_string).unwrap_or_default();
    markdown(&about).replace('|', "\\|")
}

/// One command's section: usage, description (its "Exit status:" paragraph set apart),
/// arguments and options. `root`: the global options are listed here, not under each command.
fn section(out: &mut String, cmd: &mut clap::Command, title: &str, root: bool) {
    out.push_str(&format!("\n## `{title}`\n\n"));
    let usage = cmd.render_usage().to_string();
    let usage = usage.strip_prefix("Usage: ").unwrap_or(&usage);
    out.push_str(&format!("```text\n{}\n```\n", usage.trim_end()));
    let about = cmd
        .get_long_about()
        .or_else(|| cmd.get_about())
        .map(ToString::to_string)
        .unwrap_or_default();
    for para in about.split("\n\n") {
        out.push('\n');
        match para.strip_prefix("Exit status:") {
            Some(rest) => out.push_str(&format!("**Exit status:**{}\n", markdown(rest))),
            None => out.push_str(&paragraph(para)),
        }
    }
    let args: Vec<&clap::Arg> = cmd
        .get_arguments()
        .filter(|a| !a.is_hide_set() && (root || !a.is_global_set()))
        .filter(|a| !matches!(a.get_id().as_str(), "help" | "version"))
        .collect();
    let (positional, options): (Vec<&clap::Arg>, Vec<&clap::Arg>) =
        args.into_iter().partition(|a| a.is_positional());
    for (heading, list) in [("Arguments", positional), ("Options", options)] {
        if list.is_empty() {
            continue;
        }
        out.push_str(&format!("\n### {title}: {}\n\n", heading.to_lowercase()));
        for a in list {
            out.push_str(&argument(a));
        }
    }
    if !root {
        out.push_str("\nAnd the [global options](#hmn).\n");
    }
}

/// One argument as a list item: its spelling, its help, its default, environment variable and
/// possible values.
fn argument(a: &clap::Arg) -> String {
    let names: Vec<String> = a
        .get_value_names()
        .map(|v| v.iter().map(|n| format!("<{n}>")).collect())
        .unwrap_or_default();
    let takes = a.get_action().takes_values();
    let spelled = if a.is_positional() {
        let many = a.get_num_args().is_some_and(|n| n.max_values() > 1);
        let name = names
            .first()
            .cloned()
            .unwrap_or_else(|| format!("<{}>", a.get_id().as_str().to_uppercase()));
        if many { format!("{name}...") } else { name }
    } else {
        let mut s = String::new();
        if let Some(c) = a.get_short() {
            s.push_str(&format!("-{c}, "));
        }
        if let Some(l) = a.get_long() {
            s.push_str(&format!("--{l}"));
        }
        if takes {
            let v = names
                .first()
                .cloned()
                .unwrap_or_else(|| format!("<{}>", a.get_id().as_str().to_uppercase()));
            s.push_str(&format!(" {v}"));
        }
        s
    };
    let help = a
        .get_long_help()
        .or_else(|| a.get_help())
        .map(ToString::to_string)
        .unwrap_or_default();
    let mut line = format!("- `{spelled}`: {}", markdown(&help.replace('\n', " ")));
    if !line.ends_with('.') {
        line.push('.');
    }
    let defaults: Vec<String> = a
        .get_default_values()
        .iter()
        .map(|v| format!("`{}`", v.to_string_lossy()))
        .collect();
    if takes && !defaults.is_empty() {
        line.push_str(&format!(" Default: {}.", defaults.join(", ")));
    }
    if let Some(env) = a.get_env() {
        line.push_str(&format!(" Environment: `{}`.", env.to_string_lossy()));
    }
    line.push('\n');
    let values: Vec<clap::builder::PossibleValue> = a
        .get_possible_values()
        .into_iter()
        .filter(|v| !v.is_hide_set())
        .collect();
    if takes && !values.is_empty() {
        for v in values {
            let aliases: Vec<String> = v
                .get_name_and_aliases()
                .skip(1)
                .map(|n| format!("`{n}`"))
                .collect();
            line.push_str(&format!("  - `{}`", v.get_name()));
            if !aliases.is_empty() {
                line.push_str(&format!(" (also {})", aliases.join(", ")));
            }
            if let Some(h) = v.get_help() {
                line.push_str(&format!(
                    ": {}",
                    markdown(&h.to_string().replace('\n', " "))
                ));
                if !line.ends_with('.') {
                    line.push('.');
                }
            }
            line.push('\n');
        }
    }
    line
}

/// A paragraph of help text: lines indented by two spaces (commands to type) become a code
/// block; the rest is one Markdown paragraph.
fn paragraph(para: &str) -> String {
    let mut out = String::new();
    let (code, text): (Vec<&str>, Vec<&str>) = para.lines().partition(|l| l.starts_with("  "));
    let text = text.join(" ");
    if !text.trim().is_empty() {
        out.push_str(&markdown(text.trim()));
        out.push('\n');
    }
    if !code.is_empty() {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str("```text\n");
        for l in code {
            out.push_str(l.trim_start());
            out.push('\n');
        }
        out.push_str("```\n");
    }
    out
}

/// Help text as Markdown: backticks are code spans already; outside them the characters
/// Markdown would read as markup (`*`, `_`, `<`, `>`, `[`, `]`, `\`) are escaped.
fn markdown(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for (i, part) in text.split('`').enumerate() {
        if i > 0 {
            out.push('`');
        }
        if i % 2 == 1 {
            out.push_str(part);
            continue;
        }
        for c in part.chars() {
            if matches!(c, '*' | '_' | '<' | '>' | '[' | ']' | '\\') {
                out.push('\\');
            }
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `docs/cli.md` is what the clap definition generates; `UPDATE_GOLDEN=1` rewrites it.
    #[test]
    fn cli_doc_matches_docs_cli_md() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/cli.md");
        let text = cli_doc();
        if std::env::var_os("UPDATE_GOLDEN").is_some() {
            std::fs::write(&path, &text).unwrap();
            return;
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == text,
            "docs/cli.md differs from the command line's definition; rerun with \
             UPDATE_GOLDEN=1 cargo test -p hmn --bin hmn cli_doc and review the diff"
        );
    }

    /// Every command, `hmn` itself included, has an "Exit status:" paragraph in its long help
    /// (so `--help`, the man page and docs/cli.md all state it), and every one is in the page.
    #[test]
    fn cli_doc_states_every_commands_exit_status() {
        let mut cmd = Cli::command();
        cmd.build();
        let text = cli_doc();
        for c in std::iter::once(&cmd).chain(documented(&cmd)) {
            let about = c
                .get_long_about()
                .map(ToString::to_string)
                .unwrap_or_default();
            let stated = about
                .split("\n\n")
                .filter(|p| p.starts_with("Exit status:"))
                .count();
            assert_eq!(
                stated,
                1,
                "{}: one \"Exit status:\" paragraph",
                c.get_name()
            );
            let title = match c.get_name() {
                "hmn" => "## `hmn`".to_string(),
                n => format!("## `hmn {n}`"),
            };
            assert!(text.contains(&format!("{title}\n")), "{title}");
        }
        assert_eq!(
            text.matches("**Exit status:**").count(),
            1 + documented(&cmd).count()
        );
    }

    #[test]
    fn markdown_escapes_outside_code_spans_only() {
        assert_eq!(markdown("/dev/dri/* and `a_b*`"), "/dev/dri/\\* and `a_b*`");
        assert_eq!(markdown("<N> [x]"), "\\<N\\> \\[x\\]");
    }
}
