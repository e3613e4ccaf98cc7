//! `hmn record [--interval] [--duration] [--force] FILE`: the snapshots `hmn top` draws, one
//! JSON line per sample, flushed per sample (`docs/top.md`).
//!
//! Sampling runs on the collector's own thread ([`super::collect::spawn_into`], as `hmn
//! top`'s), and the stop signals are caught on a thread of their own
//! ([`crate::signals::on_each_stop`]); both send on one channel, and the main thread only waits
//! on it — for a sample (written), a stop, or `--duration`'s end (the wait's timeout), never
//! waking in between. So `--duration`, Ctrl+C, SIGTERM, SIGHUP (a terminal hanging up) and
//! SIGQUIT (Ctrl+\\) end the recording at once even while a driver call hangs; the thread stuck
//! in the driver is left behind (it ends with the process) and a warning says since when it has
//! been waiting. Standard input is not read: `record` runs in the background (`&`, `nohup`, a
//! unit with stdin on `/dev/null`), where stdin is at EOF from the start or reading it would
//! stop the process (`SIGTTIN`).
//!
//! FILE goes through [`crate::outfile`]: `-` streams to stdout; a file is written under a
//! temporary name beside it and renamed into place when recording stops. An existing FILE is
//! refused unless `--force`. A failed write (a full disk) cuts the temporary file back to the
//! last complete line and puts it in place, so every complete sample is kept; if even that
//! fails, the temporary file is kept and named. If hmn is killed outright, the temporary file
//! keeps every sample written but the one in progress.
//!
//! A write that does not return — stdout a pipe whose reader stopped reading, a file on a
//! disk that does not take data — would hold the main thread past any stop. So a stop (and
//! `--duration`'s end) also arms [`STOP_GRACE`]: if the main thread is still writing then, hmn
//! says so (from a thread of its own, waiting at most 200 ms: stderr may be the same stuck
//! pipe) and exits with status 2, the temporary file kept and named (every sample but the one
//! being written).

use std::io::{self, Write};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use hypomnesis::ProbeOptions;

use super::collect::{CollectOptions, Control};
use super::recording::write_line;
use super::snapshot::Snapshot;
use crate::args::RecordArgs;
use crate::format::duration;
use crate::health::now_ms;
use crate::outfile::{Dest, Sink};

/// What the main thread waits for: one channel, three senders.
enum Event {
    /// A sample from the collector thread (boxed: the other events are empty).
    Sample(Box<Snapshot>),
    /// A stop signal (from [`crate::signals::on_each_stop`]'s thread).
    Stop,
    /// The collector thread has ended (sent as its sink is dropped, a panic included).
    Ended,
}

/// The collector's end of the channel: [`Event::Ended`] when it is dropped with the collector's
/// sink, so a collector that ends (or panics) ends the recording although the signal thread
/// still holds a sender.
struct Samples(Sender<Event>);

impl Drop for Samples {
    fn drop(&mut self) {
        let _ = self.0.send(Event::Ended);
    }
}

/// How long the collector may go without finishing a sample before it counts as stuck (as
/// `serve`'s staleness: three intervals, at least 2 s). Until the first sample arrives,
/// `--duration` waits this long beyond its end for it.
fn stuck_after(interval: Duration) -> Duration {
    (interval * 3).max(Duration::from_secs(2))
}

/// How long a stop waits for a write in progress before hmn ends without it.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// Arms a grace: after `wait`, if `writing` is still set (the main thread has not left its
/// writes), ends hmn with status 2 and says why — `end` names what should have ended it (the
/// stop, `--duration`'s end); `kept`: the temporary file, for a FILE.
fn arm_grace(
    name: &str,
    kept: Option<&std::path::Path>,
    writing: Arc<AtomicBool>,
    wait: Duration,
    end: &str,
) {
    let why = match kept {
        Some(t) => format!(
            "record: {name}: a write has not returned {} after {end} (a disk that does not \
             take data); the samples written are kept in {}",
            duration(STOP_GRACE),
            t.display()
        ),
        None => format!(
            "record: {name}: stdout has not taken data for {} after {end} (its reader \
             stopped reading); ended",
            duration(STOP_GRACE)
        ),
    };
    let _ = std::thread::Builder::new()
        .name("hmn-stop-grace".to_string())
        .spawn(move || {
            std::thread::sleep(wait);
            if writing.load(Ordering::SeqCst) {
                crate::output::note_within(&why, Duration::from_millis(200));
                std::process::exit(2);
            }
        });
}

/// A writer that counts the bytes it passed on.
struct Counting<'a> {
    inner: &'a mut Sink,
    written: u64,
}

impl Write for Counting<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// What has been written so far.
#[derive(Debug, Default)]
struct Progress {
    samples: u64,
    /// Bytes of complete, flushed lines.
    good_bytes: u64,
}

pub fn run(opts: ProbeOptions, args: &RecordArgs) -> anyhow::Result<ExitCode> {
    let dest = Dest::of(&args.file);
    let name = args.file.display().to_string();
    if let Dest::File(p) = &dest {
        let exists = std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_file());
        anyhow::ensure!(
            args.force || !exists,
            "record: {name}: exists (--force replaces it)"
        );
    }
    let mut sink = Sink::open(&dest).with_context(|| format!("record: {name}"))?;
    let (tx, rx) = mpsc::channel();
    let stops = tx.clone();
    let writing = Arc::new(AtomicBool::new(true));
    let kept = match &sink {
        Sink::File(f) => Some(f.temp_path().to_path_buf()),
        Sink::Stdout(_) => None,
    };
    if let Some(d) = args.duration {
        // The end `record` keeps (it waits beyond it for a first sample), then the grace.
        let wait = d.max(stuck_after(args.interval)) + STOP_GRACE;
        arm_grace(
            &name,
            kept.as_deref(),
            Arc::clone(&writing),
            wait,
            "--duration's end",
        );
    }
    let (armed, grace) = (AtomicBool::new(false), Arc::clone(&writing));
    let grace_name = name.clone();
    crate::signals::on_each_stop(move |_| {
        let _ = stops.send(Event::Stop);
        if !armed.swap(true, Ordering::SeqCst) {
            let writing = Arc::clone(&grace);
            arm_grace(
                &grace_name,
                kept.as_deref(),
                writing,
                STOP_GRACE,
                "the stop",
            );
        }
    })?;
    let control = Control::new(args.interval);
    let samples = Samples(tx);
    super::collect::spawn_into(
        opts,
        CollectOptions::new(args.max_processes, args.rescan),
        Arc::clone(&control),
        move |s| samples.0.send(Event::Sample(Box::new(s))).is_ok(),
    )
    .context("record: starting the collector thread")?;
    let on_stdout = dest == Dest::Stdout;
    if !on_stdout {
        crate::output::note(&format!(
            "record: every {} to {name}{} — Ctrl+C stops",
            duration(args.interval),
            args.duration
                .map(|d| format!(" for {}", duration(d)))
                .unwrap_or_default()
        ))?;
    }
    let started = Instant::now();
    let mut progress = Progress::default();
    let failure = record(&rx, &mut sink, args, started, &mut progress);
    writing.store(false, Ordering::SeqCst);
    control.stop.store(true, Ordering::Relaxed);
    let failure = match failure {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe && on_stdout => None,
        Err(e) => Some(e),
        Ok(()) => None,
    };
    stuck_warning(&control, args.interval)?;
    let n = progress.samples;
    let samples = format!("{n} sample{}", if n == 1 { "" } else { "s" });
    match (sink, failure) {
        (Sink::Stdout(_), Some(e)) => anyhow::bail!("record: {name}: {e}"),
        (Sink::Stdout(_), None) => Ok(ExitCode::SUCCESS),
        (Sink::File(mut f), failure) => {
            // After a failed write: back to the last complete line, then in place as usual.
            let cut = match &failure {
                Some(_) => f.truncate(progress.good_bytes),
                None => Ok(()),
            };
            let committed = cut
                .map_err(|e| (e, None))
                .and_then(|()| f.commit_or_keep(args.force));
            match (committed, failure) {
                (Ok(()), None) => {
                    crate::output::note(&format!(
                        "record: {samples} in {} written to {name}",
                        duration(Duration::from_millis(
                            u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
                        ))
                    ))?;
                    Ok(ExitCode::SUCCESS)
                }
                (Ok(()), Some(e)) => anyhow::bail!(
                    "record: {name}: {e}; the {samples} written before it are in {name}"
                ),
                (Err((e, kept)), _) => anyhow::bail!(
                    "record: {name}: {e}; the {samples} recorded are kept in {}",
                    kept.map_or_else(|| "no file".to_string(), |p| p.display().to_string())
                ),
            }
        }
    }
}

/// Writes every snapshot that arrives until `--duration` is reached, a stop signal arrives, the
/// collector ends, or a write fails (that error returned). Between events it sleeps in the
/// channel's wait: without `--duration` until the next event, with it until the end at most.
fn record(
    rx: &Receiver<Event>,
    sink: &mut Sink,
    args: &RecordArgs,
    started: Instant,
    progress: &mut Progress,
) -> io::Result<()> {
    let grace = stuck_after(args.interval);
    let mut write = |snap: &Snapshot, progress: &mut Progress| {
        let mut out = Counting {
            inner: &mut *sink,
            written: progress.good_bytes,
        };
        write_line(&mut out, snap)?;
        progress.good_bytes = out.written;
        progress.samples += 1;
        io::Result::Ok(())
    };
    loop {
        let left = args.duration.map(|d| {
            // Until the first sample, wait beyond the end for it (a slow start), but not for a
            // collector that is stuck.
            let end = if progress.samples == 0 {
                d.max(grace)
            } else {
                d
            };
            end.saturating_sub(started.elapsed())
        });
        let event = match left {
            Some(Duration::ZERO) => break,
            // The end is looked at again when the wait runs out (the first sample may have
            // arrived meanwhile, which moves it).
            Some(left) => match rx.recv_timeout(left) {
                Ok(e) => e,
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => Event::Ended,
            },
            None => rx.recv().unwrap_or(Event::Ended),
        };
        match event {
            Event::Sample(snap) => write(&snap, progress)?,
            Event::Stop => break,
            Event::Ended => return Ok(()),
        }
    }
    // A sample finished while stopping is kept.
    while let Ok(event) = rx.try_recv() {
        if let Event::Sample(snap) = event {
            write(&snap, progress)?;
        }
    }
    Ok(())
}

/// A warning when the collector has been in one sample for longer than [`stuck_after`]: the
/// recording ends at the last sample it finished.
fn stuck_warning(control: &Control, interval: Duration) -> anyhow::Result<()> {
    let since = control.busy_since_ms.load(Ordering::Relaxed);
    let waited = Duration::from_millis(now_ms().saturating_sub(since));
    if since != 0 && waited >= stuck_after(interval) {
        crate::output::note(&format!(
            "record: warning: the collector has been waiting on the driver for {} (a hung \
             driver call); the recording ends at the last sample it finished",
            duration(Duration::from_secs(waited.as_secs()))
        ))?;
    }
    Ok(())
}
