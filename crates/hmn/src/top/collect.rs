//! Collection: one long-lived [`Probe`] turned into a [`Snapshot`] per interval, for `hmn top`
//! and `hmn record`, each on its own thread ([`spawn_into`]).
//!
//! Per sample: the probe's devices and GPU processes (NVML kept loaded; the DRM fd index
//! reused between rescans), each row's name, owner and workload (its cgroup, with the pod's
//! or container's names through the library's [`NameCache`], as `hmn ps` names them) kept
//! per process, `/proc/meminfo`, and for each GPU process its `stat` (parent, start time,
//! RSS, the kernel's name), and its ancestors' while they are wanted (`record` always, `top`
//! while the tree view is shown). Those files are kept open between samples and re-read with one
//! `pread` each (the probe's `meminfo`, a [`StatReader`]; closed once a sample no longer reads
//! them). The command line is kept per (pid, start time) and read again when
//! the kernel's name or the row's name changes (an `exec`, a `prctl`/`setproctitle` rename).
//! An NVIDIA row whose host pid this proc root cannot show (a container's own `/proc`) is left
//! as the probe gives it: nothing is read under that pid, which names a stranger or nothing.
//!
//! The DRM rescan (the walk over every process's fds that finds new AMD/Intel clients) costs
//! in proportion to the machine's fds; its period is calibrated at start so that it stays
//! within [`RESCAN_BUDGET`] of a core (between [`RESCAN_MIN`] and [`RESCAN_MAX`]), unless
//! `--rescan` sets it.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use hypomnesis::process::tree::{Stat, StatReader};
use hypomnesis::process::{self, IdentityCache};
use hypomnesis::workload::WorkloadInfo;
use hypomnesis::workload::names::NameCache;
use hypomnesis::{
    Device, Field, Probe, ProbeOptions, ProcessName, Roots, Source, Unknown, UnknownReason,
};

use crate::health::now_ms;

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

impl CollectOptions {
    /// At most `max_processes` rows a snapshot (`--max-processes`), the DRM rescan every
    /// `rescan` (`--rescan`; `None` calibrates it).
    pub fn new(max_processes: u32, rescan: Option<Duration>) -> CollectOptions {
        CollectOptions {
            limits: Limits {
                max_processes: max_processes as usize,
            },
            rescan,
        }
    }
}

/// What is known of a process besides its row, kept per (pid, start time): read again when the
/// kernel's name in its `stat` changes (an `exec`, a `prctl`/`setproctitle` rename), and at
/// least every [`IDENTITY_REFRESH`] (a setuid drop, a cgroup move).
#[derive(Debug, Clone)]
struct Known {
    /// The kernel's name when it was read (`None`: no `stat`, refreshed by the period only).
    comm: Option<ProcessName>,
    name: Option<ProcessName>,
    uid: Option<u32>,
    user: Option<String>,
    workload: Option<WorkloadInfo>,
    cmdline: Option<String>,
    read_at: Instant,
    last_seen: u64,
}

/// How often devices' memory health (ECC mode and counts, remapped rows or retired pages,
/// amdgpu RAS) is read: a few more driver calls per device, so not every sample; every
/// snapshot carries the latest reading.
pub const HEALTH_PERIOD: Duration = Duration::from_secs(30);

/// The longest a process's owner, workload and command line are kept unread while its name
/// stays the same.
pub const IDENTITY_REFRESH: Duration = Duration::from_secs(10);

/// The collector: a probe and the caches kept between samples.
pub struct Collector {
    probe: Probe,
    roots: Roots,
    page_size: u64,
    limits: Limits,
    users: IdentityCache,
    /// The names of pods and containers (the kubelet's log layout, the runtimes' configs).
    names: NameCache,
    /// How long identities are kept unread ([`IDENTITY_REFRESH`]; tests shorten it).
    identity_refresh: Duration,
    known: HashMap<(u32, Option<u64>), Known>,
    /// The `stat` files of the listed processes and their ancestors, kept open.
    stats: StatReader,
    /// The options of the health probe, built at the first health reading.
    health_opts: ProbeOptions,
    health_probe: Option<Probe>,
    /// The latest health of each device (index, PCI address, health) and when it was read.
    health: Vec<Device>,
    health_at: Option<Instant>,
    /// How often health is read ([`HEALTH_PERIOD`]; tests shorten it).
    health_period: Duration,
    tick: u64,
    /// The DRM rescan period in force, and whether it was calibrated.
    pub rescan: (Duration, bool),
    /// Whether a sample reads the ancestors of the listed processes (the parent lines of the
    /// tree view; `top` asks only while the tree is shown, `record` always).
    pub ancestors: bool,
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

/// A process's command line, arguments joined by spaces, cut at [`CMDLINE_MAX`] bytes (the
/// library reads the file: only a regular file, so a FIFO in a fixture tree never blocks).
fn cmdline(roots: &Roots, pid: u32) -> Option<String> {
    let bytes = process::read_cmdline(roots, pid, CMDLINE_MAX as u64 + 1).ok()?;
    let args: Vec<String> = process::cmdline_args(&bytes)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    (!args.is_empty()).then(|| cut(args.join(" "), CMDLINE_MAX))
}

/// A process's `stat`, read once per sample.
fn stat_of(
    reader: &mut StatReader,
    seen: &mut HashMap<u32, Option<Stat>>,
    pid: u32,
) -> Option<Stat> {
    seen.entry(pid)
        .or_insert_with(|| reader.read(pid).ok())
        .clone()
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
        let stats = StatReader::new(&roots);
        let health_opts = opts
            .clone()
            .health(true)
            .drm_index_max_age(rescan.0.max(HEALTH_PERIOD));
        let page_size = opts.system.page_size;
        Collector {
            probe: Probe::with_options(opts.drm_index_max_age(rescan.0)),
            roots,
            page_size,
            limits: o.limits,
            users: IdentityCache::new(),
            names: NameCache::new(),
            identity_refresh: IDENTITY_REFRESH,
            known: HashMap::new(),
            stats,
            health_opts,
            health_probe: None,
            health: Vec::new(),
            health_at: None,
            health_period: HEALTH_PERIOD,
            tick: 0,
            rescan,
            ancestors: true,
        }
    }

    /// What is known of (`pid`, `start`), read again when its kernel name is no longer `comm`
    /// or the refresh period has passed.
    fn known(&mut self, pid: u32, start: Option<u64>, comm: Option<&ProcessName>) -> &Known {
        let (tick, now) = (self.tick, Instant::now());
        let refresh = self.identity_refresh;
        let (roots, users, names) = (&self.roots, &mut self.users, &self.names);
        let mut read = || {
            // The name from the `comm` this sample's `stat` gave, where it gave one.
            let id = match comm {
                Some(comm) => users.identify_with_comm(roots, pid, comm),
                None => users.identify(roots, pid),
            };
            Known {
                comm: comm.cloned(),
                name: id.name.map(|n| cut_name(n, TEXT_MAX)),
                uid: id.uid,
                user: id.user.map(|n| cut(n, TEXT_MAX)),
                workload: hypomnesis::workload::of_process_named(roots, pid, names)
                    .map(Bound::bounded),
                cmdline: cmdline(roots, pid),
                read_at: now,
                last_seen: tick,
            }
        };
        let k = match self.known.entry((pid, start)) {
            Entry::Occupied(e) => {
                let k = e.into_mut();
                if k.comm.as_ref() != comm || now.duration_since(k.read_at) >= refresh {
                    *k = read();
                }
                k
            }
            Entry::Vacant(e) => e.insert(read()),
        };
        k.last_seen = tick;
        k
    }

    /// Copies the latest memory health into `devices`, read again when [`HEALTH_PERIOD`]
    /// has passed (by a probe of its own, built on first use).
    fn attach_health(&mut self, devices: &mut [Device]) {
        if self
            .health_at
            .is_none_or(|t| t.elapsed() >= self.health_period)
        {
            let opts = &self.health_opts;
            let probe = self
                .health_probe
                .get_or_insert_with(|| Probe::with_options(opts.clone()));
            self.health = probe.devices().devices;
            self.health_at = Some(Instant::now());
        }
        for d in devices {
            if let Some(h) = self
                .health
                .iter()
                .find(|h| h.index == d.index && h.pci_bus_id == d.pci_bus_id && h.uuid == d.uuid)
            {
                d.health.clone_from(&h.health);
            }
        }
    }

    /// One snapshot, stamped with `interval`.
    pub fn sample(&mut self, interval: Duration) -> Snapshot {
        let started = Instant::now();
        self.tick += 1;
        let mut list = self.probe.gpu_usage();
        let mut snap = Snapshot::empty(0, u64::try_from(interval.as_millis()).unwrap_or(0));
        match self.probe.host_memory() {
            Ok(h) => snap.host = Some(h),
            Err(e) => snap.host_error = Some(cut(e.to_string(), TEXT_MAX)),
        }
        if list.devices.is_empty() {
            snap.no_gpu = Some(crate::output::no_gpu_line(&list.absent_reasons()));
        }
        let mut devices: Vec<Device> = std::mem::take(&mut list.devices)
            .into_iter()
            .map(Bound::bounded)
            .collect();
        self.attach_health(&mut devices);
        snap.devices = devices;
        snap.hidden_processes = list.hidden_processes;
        snap.failed_devices = std::mem::take(&mut list.failed_devices);
        snap.warnings = list.warnings.iter().map(ToString::to_string).collect();
        let host_pids_visible = self.probe.pid_view().host_pids_visible();
        let mut stats: HashMap<u32, Option<Stat>> = HashMap::new();
        for p in std::mem::take(&mut list.processes) {
            // The row as the probe lists it (without names); its name, owner and workload are
            // `known`'s below.
            let (pid, source) = (p.pid, p.source);
            let mut row = ProcessRow::from_gpu(p);
            if !host_pids_visible && matches!(source, Source::Nvml | Source::NvidiaSmi) {
                // NVML's host pid names another process (or none) under this proc root (the
                // library's rule, `pidns::visible`): read nothing of it, so no stranger's name,
                // figures, parent or identity are shown.
                row.gpu.unknown.push(Unknown::new(
                    Field::Name,
                    UnknownReason::OtherPidNamespace,
                    format!(
                        "NVML reports host PID {}, which {} does not show",
                        pid,
                        self.roots.proc.display()
                    ),
                ));
                row.gpu.unknown.push(Unknown::new(
                    Field::RssBytes,
                    UnknownReason::OtherPidNamespace,
                    format!("host PID {} is not visible here", pid),
                ));
                snap.processes.push(row);
                continue;
            }
            let st = stat_of(&mut self.stats, &mut stats, pid);
            match &st {
                Some(st) => {
                    row.ppid = Some(st.ppid);
                    row.start_time = Some(st.start_time);
                    row.rss_bytes = Some(st.rss_pages.saturating_mul(self.page_size));
                }
                None => match self
                    .probe
                    .process_memory(pid, hypomnesis::MemoryDetail::Basic)
                {
                    Ok(m) => row.rss_bytes = m.rss_bytes,
                    Err(e) => row.gpu.unknown.push(Unknown::new(
                        Field::RssBytes,
                        UnknownReason::Unreadable,
                        cut(e.to_string(), TEXT_MAX),
                    )),
                },
            }
            let k = self.known(pid, row.start_time, st.as_ref().map(|s| &s.comm));
            let g = &mut row.gpu;
            g.name = k.name.clone().or(g.name.take());
            g.uid = k.uid;
            g.user.clone_from(&k.user);
            g.workload.clone_from(&k.workload);
            row.cmdline.clone_from(&k.cmdline);
            snap.processes.push(row);
        }
        snap.cap(self.limits);
        if self.ancestors {
            self.add_ancestors(&mut snap, &mut stats);
        }
        self.stats.end_round();
        // Forget processes not seen for a minute's worth of samples.
        let tick = self.tick;
        self.known.retain(|_, k| tick - k.last_seen < 60);
        snap.unix_ms = now_ms();
        snap.collect_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        snap
    }

    /// The parents of the listed processes that hold no GPU memory, for the tree view.
    fn add_ancestors(&mut self, snap: &mut Snapshot, stats: &mut HashMap<u32, Option<Stat>>) {
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
                let st = stat_of(&mut self.stats, stats, pid);
                next = st.as_ref().map(|s| s.ppid);
                snap.ancestors.push(Ancestor {
                    pid,
                    ppid: next,
                    start_time: st.as_ref().map(|s| s.start_time),
                    name: st.map(|s| cut(s.comm.escaped(), TEXT_MAX)),
                });
            }
        }
        snap.ancestors.truncate(super::snapshot::ANCESTORS_MAX);
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
    /// Whether samples read the listed processes' ancestors ([`Collector::ancestors`]).
    pub ancestors: AtomicBool,
    /// Set to take a sample at once (the tree view was opened: its parent lines are wanted
    /// now, not at the next interval).
    pub sample_now: AtomicBool,
    /// Counts the changes above ([`Control::poke`]); the thread sleeps on it between samples.
    changes: Mutex<u64>,
    changed: Condvar,
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
            ancestors: AtomicBool::new(true),
            sample_now: AtomicBool::new(false),
            changes: Mutex::new(0),
            changed: Condvar::new(),
        })
    }

    /// The interval.
    pub fn interval(&self) -> Duration {
        Duration::from_millis(self.interval_ms.load(Ordering::Relaxed))
    }

    /// Wakes the thread after a change of interval, pause or stop.
    pub fn poke(&self) {
        let mut n = self
            .changes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *n = n.wrapping_add(1);
        self.changed.notify_all();
    }

    /// How many pokes there have been: a [`Control::sleep`] given this count returns at once
    /// if a poke came after it was read.
    fn pokes(&self) -> u64 {
        *self
            .changes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Sleeps until `until` (forever with `None`) or a [`Control::poke`] after the count
    /// `seen`, whichever is first.
    fn sleep(&self, until: Option<Instant>, seen: u64) {
        let mut n = self
            .changes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        while *n == seen {
            match until {
                None => {
                    n = self
                        .changed
                        .wait(n)
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                }
                Some(t) => {
                    let left = t.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return;
                    }
                    n = self
                        .changed
                        .wait_timeout(n, left)
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .0;
                }
            }
        }
    }
}

/// Starts the collector thread: it builds the probe (calibrating the rescan), then samples
/// every interval and hands each snapshot to `sink` (which answers whether anyone still
/// listens). Between samples it sleeps until the next one is due or [`Control::poke`] says the
/// interval, the pause or the stop changed, or that a sample is wanted now
/// ([`Control::sample_now`]): no wake-up in between. It is never joined: when
/// the UI quits, the process exits, so a driver call that never returns cannot hold `hmn top`
/// open.
///
/// # Errors
/// When the thread cannot be started.
pub fn spawn_into(
    opts: ProbeOptions,
    o: CollectOptions,
    control: Arc<Control>,
    mut sink: impl FnMut(Snapshot) -> bool + Send + 'static,
) -> std::io::Result<()> {
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
                // Read before the flags, so a change made while they are looked at (or while
                // a sample is taken) ends the sleep below at once.
                let seen = control.pokes();
                if control.paused.load(Ordering::Relaxed) {
                    control.busy_since_ms.store(0, Ordering::Relaxed);
                    control.sleep(None, seen);
                    continue;
                }
                let asked = control.sample_now.swap(false, Ordering::Relaxed);
                if asked || Instant::now() >= next {
                    let interval = control.interval();
                    control.busy_since_ms.store(now_ms(), Ordering::Relaxed);
                    c.ancestors = control.ancestors.load(Ordering::Relaxed);
                    let s = c.sample(interval);
                    control.busy_since_ms.store(0, Ordering::Relaxed);
                    if !sink(s) {
                        return;
                    }
                    next = Instant::now() + interval;
                }
                control.sleep(Some(next), seen);
                // A shorter interval set meanwhile applies from now.
                next = next.min(Instant::now() + control.interval());
            }
        })?;
    Ok(())
}

#[cfg(test)]
mod tests;
