//! Collection: one long-lived [`Probe`] turned into a [`Snapshot`] per interval, for `hmn top`
//! (on its own thread, [`spawn`]) and `hmn record` (in a loop).
//!
//! Per sample: the probe's devices and GPU processes (NVML kept loaded; the DRM fd index
//! reused between rescans), `/proc/meminfo`, and for each GPU process its `stat` (parent,
//! start time, RSS: one small read). What does not change while a process lives — name,
//! owner, cgroup workload, command line — is read once per (pid, start time) and cached.
//!
//! The DRM rescan (the walk over every process's fds that finds new AMD/Intel clients) costs
//! in proportion to the machine's fds; its period is calibrated at start so that it stays
//! within [`RESCAN_BUDGET`] of a core (between [`RESCAN_MIN`] and [`RESCAN_MAX`]), unless
//! `--rescan` sets it.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hypomnesis::process::tree::{Stat, read_stat};
use hypomnesis::process::{self, IdentityCache};
use hypomnesis::workload::WorkloadInfo;
use hypomnesis::{Field, Probe, ProbeOptions, ProcessName, Roots, Unknown, UnknownReason};

use super::snapshot::{
    Ancestor, Bound, CMDLINE_MAX, Limits, ProcessRow, Snapshot, TEXT_MAX, cut, cut_name,
};

/// The share of a core the DRM rescan may take when its period is calibrated.
pub const RESCAN_BUDGET: f64 = 0.005;
/// The shortest calibrated rescan period.
pub const RESCAN_MIN: Duration = Duration::from_secs(5);
/// The longest calibrated rescan period.
pub const RESCAN_MAX: Duration = Duration::from_secs(300);

/// Collection settings.
#[derive(Debug, Clone, Copy)]
pub struct CollectOptions {
    pub limits: Limits,
    /// The DRM rescan period; `None` calibrates it.
    pub rescan: Option<Duration>,
}

/// What a process is for as long as it lives: read once.
#[derive(Debug, Clone)]
struct Known {
    name: Option<ProcessName>,
    uid: Option<u32>,
    user: Option<String>,
    workload: Option<WorkloadInfo>,
    cmdline: Option<String>,
    last_seen: u64,
}

/// The collector: a probe and the caches kept between samples.
pub struct Collector {
    probe: Probe,
    roots: Roots,
    page_size: u64,
    limits: Limits,
    users: IdentityCache,
    known: HashMap<(u32, Option<u64>), Known>,
    tick: u64,
    /// The DRM rescan period in force, and whether it was calibrated.
    pub rescan: (Duration, bool),
}

/// CPU time this thread has used (macOS: the whole process's, which has no per-thread
/// `getrusage`; an overestimate for the calibration).
#[cfg(unix)]
fn thread_cpu() -> Duration {
    use nix::sys::resource::{UsageWho, getrusage};
    #[cfg(target_os = "linux")]
    let who = UsageWho::RUSAGE_THREAD;
    #[cfg(not(target_os = "linux"))]
    let who = UsageWho::RUSAGE_SELF;
    getrusage(who).map_or(Duration::ZERO, |u| {
        let tv = |t: nix::sys::time::TimeVal| {
            Duration::new(
                u64::try_from(t.tv_sec()).unwrap_or(0),
                u32::try_from(t.tv_usec()).unwrap_or(0) * 1000,
            )
        };
        tv(u.user_time()) + tv(u.system_time())
    })
}

/// Platform seam: no DRM walk off Unix (there is no procfs fd table to walk), so nothing is
/// calibrated there and the thread's CPU time is never asked for.
#[cfg(not(unix))]
fn thread_cpu() -> Duration {
    Duration::ZERO
}

/// The rescan period that keeps a scan costing `cpu` within the budget.
pub fn calibrated_rescan(cpu: Duration) -> Duration {
    cpu.div_f64(RESCAN_BUDGET).clamp(RESCAN_MIN, RESCAN_MAX)
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A process's command line, arguments joined by spaces, cut at [`CMDLINE_MAX`] bytes (the
/// library reads the file: only a regular file, so a FIFO in a fixture tree never blocks).
fn cmdline(roots: &Roots, pid: u32) -> Option<String> {
    let bytes = process::read_cmdline(roots, pid, CMDLINE_MAX as u64 + 1).ok()?;
    let args: Vec<String> = process::cmdline_args(&bytes)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    (!args.is_empty()).then(|| cut(args.join(" "), CMDLINE_MAX))
}

impl Collector {
    /// A collector over `opts`. Without a rescan period, and with a DRM GPU present, one DRM
    /// walk is timed first (on a probe without NVML) to calibrate it.
    pub fn new(opts: ProbeOptions, o: CollectOptions) -> Collector {
        let rescan = match o.rescan {
            Some(r) => (r, false),
            None => {
                let drm_only = Probe::with_options(
                    opts.clone()
                        .use_nvml(false)
                        .use_nvidia_smi(false)
                        .drm_index_max_age(Duration::ZERO),
                );
                if drm_only.devices().devices.is_empty() {
                    (RESCAN_MIN, true)
                } else {
                    let before = thread_cpu();
                    let _ = drm_only.gpu_usage();
                    (calibrated_rescan(thread_cpu().saturating_sub(before)), true)
                }
            }
        };
        let roots = opts.roots.clone();
        let page_size = opts.system.page_size;
        Collector {
            probe: Probe::with_options(opts.drm_index_max_age(rescan.0)),
            roots,
            page_size,
            limits: o.limits,
            users: IdentityCache::new(),
            known: HashMap::new(),
            tick: 0,
            rescan,
        }
    }

    fn known(&mut self, pid: u32, start: Option<u64>) -> &Known {
        let tick = self.tick;
        let (roots, users) = (&self.roots, &mut self.users);
        let k = self.known.entry((pid, start)).or_insert_with(|| {
            let id = users.identify(roots, pid);
            Known {
                name: id.name.map(|n| cut_name(n, TEXT_MAX)),
                uid: id.uid,
                user: id.user.map(|n| cut(n, TEXT_MAX)),
                workload: hypomnesis::workload::of_process(roots, pid).map(Bound::bounded),
                cmdline: cmdline(roots, pid),
                last_seen: tick,
            }
        });
        k.last_seen = tick;
        k
    }

    /// One snapshot, stamped with `interval`.
    pub fn sample(&mut self, interval: Duration) -> Snapshot {
        let started = Instant::now();
        self.tick += 1;
        let list = self.probe.gpu_usage();
        let mut snap = Snapshot::empty(0, u64::try_from(interval.as_millis()).unwrap_or(0));
        match self.probe.host_memory() {
            Ok(h) => snap.host = Some(h),
            Err(e) => snap.host_error = Some(cut(e.to_string(), TEXT_MAX)),
        }
        snap.devices = list.devices.iter().map(|d| d.clone().bounded()).collect();
        snap.hidden_processes = list.hidden_processes;
        snap.failed_devices.clone_from(&list.failed_devices);
        snap.warnings = list.warnings.iter().map(ToString::to_string).collect();
        if list.devices.is_empty() {
            snap.no_gpu = Some(crate::output::no_gpu_line(&list.absent_reasons()));
        }
        let mut stats: HashMap<u32, Option<Stat>> = HashMap::new();
        let roots = self.roots.clone();
        let mut stat = |pid: u32| {
            stats
                .entry(pid)
                .or_insert_with(|| read_stat(&roots, pid).ok())
                .clone()
        };
        for p in &list.processes {
            let mut row = ProcessRow::from_gpu(p);
            let st = stat(p.pid);
            match &st {
                Some(st) => {
                    row.ppid = Some(st.ppid);
                    row.start_time = Some(st.start_time);
                    row.rss_bytes = Some(st.rss_pages.saturating_mul(self.page_size));
                }
                None => match self
                    .probe
                    .process_memory(p.pid, hypomnesis::MemoryDetail::Basic)
                {
                    Ok(m) => row.rss_bytes = m.rss_bytes,
                    Err(e) => row.gpu.unknown.push(Unknown::new(
                        Field::RssBytes,
                        UnknownReason::Unreadable,
                        cut(e.to_string(), TEXT_MAX),
                    )),
                },
            }
            let k = self.known(p.pid, row.start_time);
            let g = &mut row.gpu;
            g.name = k.name.clone().or(g.name.take());
            g.uid = k.uid;
            g.user.clone_from(&k.user);
            g.workload.clone_from(&k.workload);
            row.cmdline.clone_from(&k.cmdline);
            snap.processes.push(row);
        }
        snap.cap(self.limits);
        // The parents of the listed processes that hold no GPU memory, for the tree view.
        let listed: HashSet<u32> = snap.processes.iter().map(|p| p.gpu.pid).collect();
        let mut added: HashSet<u32> = HashSet::new();
        for p in &snap.processes {
            let mut next = p.ppid;
            let mut depth = 0;
            while let Some(pid) = next.filter(|pid| *pid > 1) {
                if listed.contains(&pid) || !added.insert(pid) || depth >= 64 {
                    break;
                }
                depth += 1;
                let st = stat(pid);
                next = st.as_ref().map(|s| s.ppid);
                snap.ancestors.push(Ancestor {
                    pid,
                    ppid: next,
                    name: st.map(|s| cut(s.comm.escaped(), TEXT_MAX)),
                });
            }
        }
        snap.ancestors.truncate(super::snapshot::ANCESTORS_MAX);
        // Forget processes not seen for a minute's worth of samples.
        let tick = self.tick;
        self.known.retain(|_, k| tick - k.last_seen < 60);
        snap.unix_ms = now_ms();
        snap.collect_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        snap
    }
}

/// What the UI and the collector thread share.
#[derive(Debug)]
pub struct Control {
    /// The interval, ms.
    pub interval_ms: AtomicU64,
    /// While set, no sample is taken.
    pub paused: AtomicBool,
    /// Set to end the thread (it ends after the call in progress, if any).
    pub stop: AtomicBool,
    /// When the collection in progress started (ms since the epoch), or 0 when idle.
    pub busy_since_ms: AtomicU64,
    /// The DRM rescan period in force, ms (0 until the collector has started).
    pub rescan_ms: AtomicU64,
    /// Whether that period was calibrated.
    pub rescan_calibrated: AtomicBool,
}

impl Control {
    /// Control for a collector sampling every `interval`.
    pub fn new(interval: Duration) -> Arc<Control> {
        Arc::new(Control {
            interval_ms: AtomicU64::new(u64::try_from(interval.as_millis()).unwrap_or(1000)),
            paused: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            busy_since_ms: AtomicU64::new(0),
            rescan_ms: AtomicU64::new(0),
            rescan_calibrated: AtomicBool::new(false),
        })
    }

    /// The interval.
    pub fn interval(&self) -> Duration {
        Duration::from_millis(self.interval_ms.load(Ordering::Relaxed))
    }
}

/// Starts the collector thread: it builds the probe (calibrating the rescan), then samples
/// every interval and sends each snapshot. It is never joined: when the UI quits, the process
/// exits, so a driver call that never returns cannot hold `hmn top` open.
///
/// # Errors
/// When the thread cannot be started.
pub fn spawn(
    opts: ProbeOptions,
    o: CollectOptions,
    control: Arc<Control>,
) -> std::io::Result<mpsc::Receiver<Snapshot>> {
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("hmn-collect".to_string())
        .spawn(move || {
            control.busy_since_ms.store(now_ms(), Ordering::Relaxed);
            let mut c = Collector::new(opts, o);
            control.rescan_ms.store(
                u64::try_from(c.rescan.0.as_millis()).unwrap_or(u64::MAX),
                Ordering::Relaxed,
            );
            control
                .rescan_calibrated
                .store(c.rescan.1, Ordering::Relaxed);
            let mut next = Instant::now();
            while !control.stop.load(Ordering::Relaxed) {
                if !control.paused.load(Ordering::Relaxed) && Instant::now() >= next {
                    let interval = control.interval();
                    control.busy_since_ms.store(now_ms(), Ordering::Relaxed);
                    let s = c.sample(interval);
                    control.busy_since_ms.store(0, Ordering::Relaxed);
                    if tx.send(s).is_err() {
                        return;
                    }
                    next = Instant::now() + interval;
                }
                // Short naps, so an interval change, a pause or a stop takes effect quickly.
                let nap = next
                    .saturating_duration_since(Instant::now())
                    .min(Duration::from_millis(100))
                    .max(Duration::from_millis(10));
                std::thread::sleep(nap);
                // A shorter interval set meanwhile applies from now.
                let soonest = Instant::now() + control.interval();
                next = next.min(soonest);
            }
        })?;
    Ok(rx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rescan_period_keeps_the_walk_within_budget() {
        assert_eq!(calibrated_rescan(Duration::from_micros(300)), RESCAN_MIN);
        assert_eq!(
            calibrated_rescan(Duration::from_millis(250)),
            Duration::from_secs(50)
        );
        assert_eq!(calibrated_rescan(Duration::from_secs(9)), RESCAN_MAX);
    }
}
