//! `hmn serve`: a Prometheus/OpenMetrics exporter.
//!
//! A collector thread owns a [`Probe`] and collects on its own cadence; each collection is
//! rendered once, in both formats (and once more with every `hmn_collector_success` at 0, for
//! when it goes stale), and swapped in behind an `Arc`. A scrape only copies out the last
//! rendering: it never waits for the driver. Before the first collection completes, `/metrics`
//! answers 503; once the last completed collection is older than [`STALE_INTERVALS`]
//! intervals and [`STALE_MIN`] (a collector stuck in a hung driver), scrapes get the stale rendering and
//! `/healthz` answers 503; `--textfile` follows the same rule (a watchdog thread rewrites it
//! with the stale rendering), holds no figure before the first collection, and is left stale
//! when the server stops. The HTTP side (hyper, one tokio thread) bounds everything a client
//! controls: request head size, header count, time to send the head, connection lifetime, and
//! connection slots. SIGTERM or SIGINT ends the server within a second whatever the collector
//! is doing (a stuck collector thread is left behind, not joined). See `docs/serve.md`.

mod health;
mod http;
mod latest;
mod metrics;
mod nvidia;
mod pool;
mod series;
mod slots;

use std::collections::BTreeMap;
use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use hypomnesis::cgroup::Workload;
use hypomnesis::{Probe, ProbeOptions, XidTally};

use crate::args::ServeArgs;
use latest::{Latest, Rendered};
use metrics::Collection;

/// A collection older than this many intervals is stale…
pub const STALE_INTERVALS: u32 = 3;
/// …and at least this old (so a sub-second `--interval` does not flap on a scheduling delay).
pub const STALE_MIN: Duration = Duration::from_secs(2);

/// How long a stopping server waits for the collector thread before it leaves it behind.
const COLLECTOR_JOIN_WAIT: Duration = Duration::from_millis(300);

/// Environment variable bounding how long a connection may go without progress: send its
/// request head, or take its answer (milliseconds; default 5000). Lower it to test slow
/// clients.
const ENV_CONN_TIMEOUT_MS: &str = "HMN_SERVE_CONN_TIMEOUT_MS";

fn collect(probe: &Probe, top: usize, xid: &Mutex<XidTally>) -> Collection {
    let started = Instant::now();
    let list = probe.gpu_processes();
    let host = probe.host_memory().ok();
    let mut workloads = BTreeMap::new();
    for p in &list.processes {
        if workloads.contains_key(&p.pid) {
            continue;
        }
        if let Some(w) = &p.workload {
            workloads.insert(p.pid, Workload::from(w));
        }
    }
    Collection {
        list,
        host,
        workloads,
        top_processes: top,
        xid: xid.lock().ok().map(|t| t.clone()),
        duration_seconds: started.elapsed().as_secs_f64(),
        completed_unix_s: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64()),
    }
}

fn render(c: &Collection, interval: Duration) -> Rendered {
    let openmetrics = metrics::render(c, false);
    let prometheus = metrics::to_prometheus_text(&openmetrics);
    let stale_openmetrics = metrics::render(c, true);
    let stale_prometheus = metrics::to_prometheus_text(&stale_openmetrics);
    Rendered {
        openmetrics,
        prometheus,
        stale_openmetrics,
        stale_prometheus,
        stale_at: Instant::now() + (interval * STALE_INTERVALS).max(STALE_MIN),
    }
}

/// The textfile's name in `--textfile DIR`.
const TEXTFILE: &str = "hmn.prom";

/// Writes `DIR/hmn.prom` atomically for node_exporter's textfile collector (see
/// [`crate::outfile`]: a random temporary name, `fsync`, renamed only over a regular file).
fn write_textfile(dir: &Path, text: &str) -> std::io::Result<()> {
    crate::outfile::write_atomic(&dir.join(TEXTFILE), text.as_bytes())
}

pub fn run(opts: ProbeOptions, args: &ServeArgs, _out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let addr: SocketAddr = args
        .listen
        .parse()
        .with_context(|| format!("--listen {}: expected ADDRESS:PORT", args.listen))?;
    let timeout = crate::args::env_millis(ENV_CONN_TIMEOUT_MS)?.unwrap_or(Duration::from_secs(5));
    if let Some(dir) = &args.textfile {
        match std::fs::metadata(dir) {
            Ok(m) => anyhow::ensure!(m.is_dir(), "--textfile {}: not a directory", dir.display()),
            Err(e) => anyhow::bail!("--textfile {}: {e}", dir.display()),
        }
        // Refused before serving: a target that is not a regular file, or a directory where no
        // file can be created. Later failures are warnings (the exporter keeps serving).
        crate::outfile::AtomicFile::create(&dir.join(TEXTFILE))
            .with_context(|| format!("--textfile {}", dir.join(TEXTFILE).display()))?;
        // Until the first collection: no figure, every collector unsuccessful — never what an
        // earlier run left (a driver that hangs now would otherwise leave it "fresh").
        write_textfile(dir, &starting_text())
            .with_context(|| format!("--textfile {}", dir.join(TEXTFILE).display()))?;
    }
    let listener = std::net::TcpListener::bind(addr).with_context(|| format!("--listen {addr}"))?;
    listener.set_nonblocking(true)?;
    let local = listener.local_addr()?;

    let latest: Latest = Arc::new(RwLock::new(None));
    let stop = Arc::new(AtomicBool::new(false));
    // Memory health is read every collection; XID events are counted by a thread of their
    // own from now on (NVML keeps no record of earlier ones).
    let opts = opts.health(true);
    let xid = crate::health::spawn_xid_counter(opts.clone(), Arc::clone(&stop), |s| s)?;
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    // The textfile is written under this lock: by the collector after each collection, and
    // by the watchdog with the stale rendering once the last collection is stale.
    let textfile_lock = Arc::new(Mutex::new(()));
    let _collector = {
        let (latest, stop) = (Arc::clone(&latest), Arc::clone(&stop));
        let (interval, top, textfile) = (args.interval, args.processes, args.textfile.clone());
        let lock = Arc::clone(&textfile_lock);
        let xid = Arc::clone(&xid);
        std::thread::Builder::new()
            .name("hmn-collector".into())
            .spawn(move || {
                collector_loop(
                    &Probe::with_options(opts),
                    &latest,
                    &stop,
                    interval,
                    top,
                    textfile.as_deref().map(|d| (d, &*lock)),
                    &xid,
                );
                let _ = done_tx.send(());
            })?
    };
    if let Some(dir) = args.textfile.clone() {
        let (latest, stop) = (Arc::clone(&latest), Arc::clone(&stop));
        let lock = Arc::clone(&textfile_lock);
        std::thread::Builder::new()
            .name("hmn-textfile".into())
            .spawn(move || textfile_watchdog(&dir, &latest, &stop, &lock))?;
    }
    crate::output::note(&format!(
        "serve: listening on http://{local}/metrics (collecting every {}{})",
        crate::format::duration(args.interval),
        if local.ip().is_loopback() {
            "; loopback only"
        } else {
            ""
        }
    ))?;
    let result = http::serve(listener, Arc::clone(&latest), timeout);
    stop.store(true, Ordering::SeqCst);
    if let Some(dir) = &args.textfile {
        // Nothing collects any more: the file must not read as fresh after hmn has gone.
        let _guard = textfile_lock.lock();
        let last = latest.read().ok().and_then(|l| l.clone());
        let text = last.map_or_else(starting_text, |r| r.stale_prometheus.clone());
        if let Err(e) = write_textfile(dir, &text) {
            textfile_warning(dir, &e);
        }
    }
    // A collector between collections stops at once; one stuck in the driver is not waited
    // for (it ends with the process).
    let _ = done_rx.recv_timeout(COLLECTOR_JOIN_WAIT);
    result?;
    Ok(ExitCode::SUCCESS)
}

/// A failed write of the textfile, said on stderr naming the file (serving goes on).
fn textfile_warning(dir: &Path, e: &dyn std::fmt::Display) {
    let _ = crate::output::note(&format!(
        "serve: warning: --textfile {}: {e}",
        dir.join(TEXTFILE).display()
    ));
}

/// The textfile before the first collection (Prometheus text format).
fn starting_text() -> String {
    metrics::to_prometheus_text(&metrics::render_starting())
}

/// How often the textfile watchdog looks at the last collection's age.
const WATCHDOG_TICK: Duration = Duration::from_millis(200);

/// Rewrites the textfile with the stale rendering (every `hmn_collector_success` at 0, the
/// last success's timestamp kept) once the last collection is stale — the rule `/metrics`
/// follows — so a textfile user's staleness alert fires while the collector is stuck in the
/// driver. Once per collection; the collector's next write puts fresh figures back.
fn textfile_watchdog(dir: &Path, latest: &Latest, stop: &AtomicBool, lock: &Mutex<()>) {
    let mut marked: Option<Arc<Rendered>> = None;
    while !stop.load(Ordering::SeqCst) {
        std::thread::sleep(WATCHDOG_TICK);
        let Ok(_guard) = lock.lock() else { return };
        let current = latest.read().ok().and_then(|l| l.clone());
        let Some(r) = current else { continue };
        if Instant::now() < r.stale_at || marked.as_ref().is_some_and(|m| Arc::ptr_eq(m, &r)) {
            continue;
        }
        if let Err(e) = write_textfile(dir, &r.stale_prometheus) {
            textfile_warning(dir, &e);
        }
        marked = Some(r);
    }
}

fn collector_loop(
    probe: &Probe,
    latest: &Latest,
    stop: &AtomicBool,
    interval: Duration,
    top: usize,
    textfile: Option<(&Path, &Mutex<()>)>,
    xid: &Mutex<XidTally>,
) {
    let mut textfile_failed = false;
    while !stop.load(Ordering::SeqCst) {
        let started = Instant::now();
        let rendered = Arc::new(render(&collect(probe, top, xid), interval));
        // The textfile and the latest rendering change together (under the textfile lock), so
        // the watchdog never marks a fresh file stale.
        let guard = textfile.and_then(|(_, lock)| lock.lock().ok());
        if let Some((dir, _)) = textfile {
            match write_textfile(dir, &rendered.prometheus) {
                Ok(()) => textfile_failed = false,
                Err(e) if !textfile_failed => {
                    textfile_failed = true;
                    textfile_warning(dir, &e);
                }
                Err(_) => {}
            }
        }
        if let Ok(mut slot) = latest.write() {
            *slot = Some(rendered);
        }
        drop(guard);
        let deadline = started + interval;
        while Instant::now() < deadline && !stop.load(Ordering::SeqCst) {
            std::thread::sleep((deadline - Instant::now()).min(Duration::from_millis(50)));
        }
    }
}
