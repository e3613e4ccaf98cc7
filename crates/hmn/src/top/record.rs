//! `hmn record [--interval] [--duration] FILE`: the snapshots `hmn top` draws, one JSON line
//! per sample, flushed per sample (`docs/top.md`). FILE goes through [`crate::outfile`]: `-`
//! streams to stdout; a file is written under a temporary name beside it and renamed into
//! place when recording stops (duration reached, Ctrl+C, SIGTERM, SIGHUP). If hmn is killed
//! outright, the temporary file keeps every sample written but the one in progress.

use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use hypomnesis::ProbeOptions;

use super::collect::{CollectOptions, Collector};
use super::recording::write_line;
use super::snapshot::Limits;
use crate::args::RecordArgs;
use crate::outfile::{Dest, Sink};

pub fn run(opts: ProbeOptions, args: &RecordArgs) -> anyhow::Result<ExitCode> {
    let dest = Dest::of(&args.file);
    let mut sink = Sink::open(&dest).with_context(|| format!("record: {}", args.file.display()))?;
    let stop = crate::signals::stop_flag()?;
    let mut collector = Collector::new(
        opts,
        CollectOptions {
            limits: Limits {
                max_processes: args.max_processes as usize,
            },
            rescan: args.rescan,
        },
    );
    let on_stdout = dest == Dest::Stdout;
    if !on_stdout {
        crate::output::note(&format!(
            "record: every {:.1} s to {}{} — Ctrl+C stops",
            args.interval.as_secs_f64(),
            args.file.display(),
            args.duration
                .map(|d| format!(" for {:.1} s", d.as_secs_f64()))
                .unwrap_or_default()
        ))?;
    }
    let started = Instant::now();
    let mut samples = 0u64;
    let mut failure = None;
    loop {
        let tick = Instant::now();
        let snap = collector.sample(args.interval);
        match write_line(&mut sink, &snap) {
            Ok(()) => samples += 1,
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe && on_stdout => break,
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
        let over = args.duration.is_some_and(|d| started.elapsed() >= d);
        if over || wait(tick + args.interval, &stop) {
            break;
        }
    }
    if let Some(e) = failure {
        drop(sink); // the temporary file is removed; FILE is as it was
        anyhow::bail!("record: {}: {e}", args.file.display());
    }
    sink.flush()
        .and_then(|()| sink.commit())
        .with_context(|| format!("record: {}", args.file.display()))?;
    if !on_stdout {
        crate::output::note(&format!(
            "record: {samples} sample{} in {:.1} s written to {}",
            if samples == 1 { "" } else { "s" },
            started.elapsed().as_secs_f64(),
            args.file.display()
        ))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Sleeps until `deadline` in short steps; true when a stop was requested.
fn wait(deadline: Instant, stop: &AtomicBool) -> bool {
    while Instant::now() < deadline {
        if stop.load(Ordering::Relaxed) {
            return true;
        }
        std::thread::sleep((deadline - Instant::now()).min(Duration::from_millis(50)));
    }
    stop.load(Ordering::Relaxed)
}
