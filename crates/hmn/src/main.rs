//! `hmn`: a thin command line over the hypomnesis library.
//!
//! `main` parses (clap; usage errors exit 2), dispatches one function per subcommand and maps
//! the result to an exit code. An error is one line on stderr (`hmn: …`) and exit 2; a closed
//! stdout (`hmn ps | head`) ends the program quietly with exit 0.

mod cli;
mod fits;
mod format;
mod ps;
mod run;
#[cfg(feature = "serve")]
mod serve;
mod summary;
mod watch;

use std::io::{self, Write};
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use clap::Parser;
use hypomnesis::{Probe, ProbeOptions, Roots};

use cli::{Cli, Command, GlobalArgs};

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // Help and version go to stdout with exit 0; usage errors to stderr with exit 2.
            let _ = e.print();
            return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2));
        }
    };
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let result = run(cli, &mut out).and_then(|code| {
        out.flush()?;
        Ok(code)
    });
    match result {
        Ok(code) => code,
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            #[expect(clippy::print_stderr, reason = "the one place errors are reported")]
            {
                eprintln!("hmn: {e:#}");
            }
            ExitCode::from(2)
        }
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
    })
}

fn run(cli: Cli, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    if let Some(Command::CgroupExec(a)) = &cli.command {
        return Ok(run::cgroup_exec(&a.procs, &a.command));
    }
    let opts = probe_options(&cli.global)?;
    match cli.command {
        None => summary::run(&Probe::with_options(opts), &cli.global, out),
        Some(Command::Ps(args)) => ps::run(&Probe::with_options(opts), &cli.global, &args, out),
        Some(Command::Fits(args)) => fits::run(&Probe::with_options(opts), &cli.global, &args, out),
        Some(Command::Run(args)) => run::run(opts, &cli.global, &args, out),
        Some(Command::Watch(args)) => watch::run(opts, &cli.global, &args, out),
        #[cfg(feature = "serve")]
        Some(Command::Serve(args)) => serve::run(opts, &args, out),
        Some(Command::CgroupExec(_)) => Ok(ExitCode::from(2)),
    }
}

/// Writes a file atomically: a temporary file in the same directory, then a rename, so a
/// reader never sees a partial file and a failure leaves none behind.
fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.hmn-tmp-{}", std::process::id()));
    let result = std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, path));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Builds the probe's options from the global flags (which clap already merged with the
/// `HMN_*` environment variables), checking that given roots are directories.
fn probe_options(g: &GlobalArgs) -> anyhow::Result<ProbeOptions> {
    let nonempty = |p: &Option<std::path::PathBuf>| p.clone().filter(|p| !p.as_os_str().is_empty());
    let check_dir = |flag: &str, p: &Path| -> anyhow::Result<()> {
        if !p.is_dir() {
            bail!("{flag} {}: not a directory", p.display());
        }
        Ok(())
    };
    let mut roots = Roots::system();
    if let Some(p) = nonempty(&g.proc_root) {
        check_dir("--proc-root", &p)?;
        roots = roots.with_proc(p);
    }
    if let Some(p) = nonempty(&g.sys_root) {
        check_dir("--sys-root", &p)?;
        roots = roots.with_sys(p);
    }
    let mut opts = ProbeOptions::from_env().roots(roots);
    opts.nvml_library = nonempty(&g.nvml_lib);
    opts.nvidia_smi = nonempty(&g.nvidia_smi);
    Ok(opts)
}

/// Writes warnings to stderr, one `hmn: warning:` line each.
fn print_warnings(warnings: &[hypomnesis::Warning]) -> anyhow::Result<()> {
    let mut err = io::stderr().lock();
    for w in warnings {
        writeln!(err, "hmn: warning: {}", format::sanitize(&w.to_string()))
            .context("writing to stderr")?;
    }
    Ok(())
}

/// Writes one line to stderr.
fn note(line: &str) -> anyhow::Result<()> {
    writeln!(io::stderr().lock(), "hmn: {}", format::sanitize(line))
        .context("writing to stderr")?;
    Ok(())
}

/// Serialises `value` as one line of JSON on `out`.
fn write_json(out: &mut dyn Write, value: &impl serde::Serialize) -> anyhow::Result<()> {
    serde_json::to_writer(&mut *out, value)?;
    writeln!(out)?;
    Ok(())
}
