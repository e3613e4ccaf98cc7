//! `hmn`: a thin command line over the hypomnesis library.
//!
//! `main` only dispatches: it parses ([`args`]; usage errors exit 2), builds the probe options
//! once, calls one function per subcommand and maps the result to an exit code. An error is
//! one line on stderr (`hmn: …`, see [`output`]; like everything hmn prints, control characters
//! escaped) and exit 2; a closed stdout (`hmn ps | head`)
//! ends the program quietly with exit 0.
//!
//! | Module | Owns |
//! |---|---|
//! | [`args`] | the command line and every value parser (typed [`args::ArgError`]) |
//! | [`output`] | JSON lines, stderr notes and warnings, the "no GPU" line |
//! | [`outfile`] | every file hmn writes: stdout or a regular file replaced atomically |
//! | [`infile`] | the files hmn opens itself for reading, never blocking on a FIFO |
//! | [`mod@format`] | sizes, terminal-safe text, CSV fields, the text table |
//! | [`select`] | `--device` values resolved (the library's selectors), `--cuda-order` |
//! | [`pick`] | `hmn pick`, and the pick `hmn run --gpu` makes: the library's pick, the lock directory, the output |
//! | [`devices`] | `hmn`: one line per device and host RAM |
//! | [`who`] | the workload and PID-namespace cells and notes of `ps` and `watch` |
//! | [`ps`], [`run`], [`spill`], [`watch`], [`fits`], [`doctor`], `serve` | one subcommand each ([`watch_gpu`]: `watch`'s NVIDIA parts; [`watch_growth`]: its growth trends) |
//! | [`top`] | `top` (feature `top`) and `record`: the live view, its snapshots, recordings |
//! | [`signals`] | the stop signals of `watch`, `record`, `top` and `pick --wait` (Ctrl+C, SIGTERM, SIGHUP; SIGQUIT too for `record` and `top`) |
//! | [`generate`] | `hmn completions` and `hmn man`, generated from the clap definition |
//!
//! `unsafe` is denied here as in the library; the three files that need it (`top/pidfd.rs`,
//! `run/helper.rs`, `run/job.rs`) are allowed at their `mod` lines.
#![deny(unsafe_code)]

mod args;
mod devices;
mod doctor;
mod fits;
mod format;
mod generate;
mod health;
mod infile;
mod outfile;
mod output;
mod pick;
mod pool;
mod ps;
mod remote;
mod run;
mod select;
#[cfg(feature = "serve")]
mod serve;
mod signals;
mod spill;
mod top;
mod watch;
mod watch_device;
mod watch_gpu;
mod watch_growth;
mod who;

use std::io::{self, Write};
use std::process::ExitCode;

use clap::Parser;
use hypomnesis::Probe;

use args::{Cli, Command};

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            // Help and version: stdout, exit 0.
            let _ = e.print();
            return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(0));
        }
        Err(e) => {
            // A usage error: one `hmn: …` line on stderr, exit 2.
            let _ = writeln!(
                io::stderr().lock(),
                "{}",
                output::usage_error(&usage_text(&e), &args::subcommand_of_argv())
            );
            return ExitCode::from(2);
        }
    };
    // Everything on stdout passes the terminal-safe writer (`output::Terminal`). Stdout is
    // locked per buffered write, not for the whole command: `hmn top` draws from two threads.
    let mut out = io::BufWriter::new(output::Terminal::new(io::stdout()));
    let result = dispatch(cli, &mut out).and_then(|code| {
        out.flush()?;
        Ok(code)
    });
    match result {
        Ok(code) => code,
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            output::error(&e);
            ExitCode::from(2)
        }
    }
}

/// A usage error's text with each argument as given. clap's own text (`Display`) drops the
/// control characters and escape sequences of an argument (`--sort $'a\e]2;x\ab'` read `invalid
/// value 'ab'`): the arguments are parsed again without styles, whose error keeps them whole,
/// and [`output::usage_error`] shows each control character as `\xNN`. An error the second
/// parse does not repeat keeps clap's text.
fn usage_text(e: &clap::Error) -> String {
    use clap::CommandFactory as _;
    match Cli::command()
        .styles(clap::builder::Styles::plain())
        .try_get_matches()
    {
        Err(plain) if plain.kind() == e.kind() => plain.render().ansi().to_string(),
        _ => e.to_string(),
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
    })
}

fn dispatch(cli: Cli, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    match &cli.command {
        #[cfg(unix)]
        Some(Command::Exec(a)) => return Ok(run::job::exec_helper(a)),
        Some(Command::Completions(a)) => return generate::completions(a.shell, out),
        Some(Command::Man) => return generate::man(out),
        _ => {}
    }
    let opts = cli.global.probe_options()?;
    // Only the device view and serve show the energy counter; every other command skips its
    // driver call (2.9 ms a device on an H200: ProbeOptions::energy). Commands that show no
    // telemetry at all skip it whole: a fresh NVML session's first telemetry calls took ~11 ms
    // on an H200, a third of `hmn ps` (ProbeOptions::telemetry).
    let lean = opts.clone().energy(false);
    let memory_only = || Probe::with_options(lean.clone().telemetry(false));
    match cli.command {
        None => devices::run(&Probe::with_options(opts.health(true)), &cli.global, out),
        Some(Command::Ps(args)) => ps::run(&memory_only(), &cli.global, &args, out),
        Some(Command::Fits(args)) => fits::run(&memory_only(), &cli.global, &args, out),
        Some(Command::Pick(args)) => pick::run(&memory_only(), &cli.global, &args, out),
        Some(Command::Run(args)) => run::run(lean, &cli.global, &args, out),
        Some(Command::Spill(args)) => spill::run(lean.telemetry(false), &cli.global, &args, out),
        Some(Command::Watch(args)) => {
            watch::run(Probe::with_options(lean), &cli.global, &args, out)
        }
        #[cfg(feature = "serve")]
        Some(Command::Serve(args)) => serve::run(opts, &args, out),
        #[cfg(feature = "top")]
        Some(Command::Top(args)) => top::run(lean, &args),
        Some(Command::Record(args)) => top::record::run(lean, &args),
        Some(Command::Doctor) => doctor::run(&opts, &cli.global, out),
        Some(Command::Exec(_) | Command::Completions(_) | Command::Man) => Ok(ExitCode::from(2)),
    }
}
