//! [`Sampler`]: RAM and VRAM of a process tree (or a set of processes) over time, with peaks.
//!
//! The caller owns the sampler and decides how it runs: [`Sampler::sample`] takes one sample
//! on the calling thread; [`Sampler::start`] moves it to a thread the returned
//! [`SamplerHandle`] stops and joins. Each sample re-discovers the target's processes through a
//! [`ProcessTable`] — identity is (pid, start time), so a reused pid is never merged — and
//! reads:
//!
//! - host RSS of each member (`/proc/<pid>/stat`, one small read per member per tick; new
//!   processes on the machine cost one `stat` read when they first appear);
//! - the members' device memory per device, and each device's device-wide use, telemetry and
//!   memory no listed process accounts for ([`Unattributed`](crate::types::Unattributed)), through the [`Probe`] (NVML
//!   stays loaded; the DRM fd index is reused between ticks);
//! - peak RSS (`VmHWM`) of the members about once a second, as a floor for the peak.
//!
//! Peaks are kept as the samples arrive; the timeline is kept in memory unless disabled.
//! [`Sampler::finish`] (called by the thread at stop) adds the driver's own per-process VRAM
//! peaks where NVIDIA accounting mode is on ([`crate::accounting`]), matched to the target's
//! processes by pid and start time.

mod records;
mod vram;

pub use records::{DeviceSample, ProcessPeaks, ProcessSample, Sample, SamplerReport};
pub use vram::PartialVram;

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::probe::Probe;
use crate::system::fsread::{self, Cap};
use crate::system::host::parse::{parse_smaps_rollup, parse_status};
use crate::system::process::tree::{ProcessId, ProcessTable, Stat, parse_btime, start_unix_us};
use crate::system::roots::Roots;
use crate::types::accounting::record_belongs;
use crate::types::{Field, PoolKind, VramSum};
use crate::types::{Unknown, UnknownReason};

/// What a sampler follows: a tree (re-discovered every sample) or a list of processes.
#[doc(no_inline)]
pub use crate::system::process::tree::Target;

/// How a sampler runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct SamplerOptions {
    /// Time between samples (default 100 ms).
    pub interval: Duration,
    /// Keep every sample in [`SamplerReport::timeline`] (default true).
    pub keep_timeline: bool,
}

impl Default for SamplerOptions {
    fn default() -> Self {
        SamplerOptions {
            interval: Duration::from_millis(100),
            keep_timeline: true,
        }
    }
}

impl SamplerOptions {
    /// Sets the interval.
    #[must_use]
    pub fn interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }

    /// Keeps or drops the in-memory timeline.
    #[must_use]
    pub fn keep_timeline(mut self, keep: bool) -> Self {
        self.keep_timeline = keep;
        self
    }
}

/// Samples a target. See the [module docs](self).
#[derive(Debug)]
pub struct Sampler {
    probe: Probe,
    roots: Roots,
    target: Target,
    options: SamplerOptions,
    started: Instant,
    /// Every process seen on the machine, its `stat` read only when new (and for members).
    table: ProcessTable,
    last_hwm: Option<Instant>,
    report: SamplerReport,
    per_process: BTreeMap<ProcessId, ProcessPeaks>,
    /// Per process that left: the first sample it was missing from (Unix ms), the end of the
    /// window its GPU context must have started in (a process still here has no entry).
    gone: BTreeMap<ProcessId, u64>,
    /// The members of the previous sample.
    alive: HashSet<ProcessId>,
}

impl Sampler {
    /// A sampler of `target` reading through `probe`.
    pub fn new(probe: Probe, target: Target, options: SamplerOptions) -> Sampler {
        Sampler {
            roots: probe.roots().clone(),
            probe,
            target,
            options,
            started: Instant::now(),
            table: ProcessTable::new(),
            last_hwm: None,
            report: SamplerReport::default(),
            per_process: BTreeMap::new(),
            gone: BTreeMap::new(),
            alive: HashSet::new(),
        }
    }

    /// The options.
    pub fn options(&self) -> SamplerOptions {
        self.options
    }

    /// The probe it reads through.
    pub fn probe(&self) -> &Probe {
        &self.probe
    }

    /// Follows `target` from the next sample on (`hmn watch --follow-new` re-selects its
    /// processes every interval). The peaks of every process seen so far stay in the report,
    /// and a process followed again keeps its first baseline.
    pub fn set_target(&mut self, target: Target) {
        self.target = target;
    }

    /// The members now: one readdir of the proc root; `stat` read for new pids and members.
    /// A zombie (ended, not yet reaped) is none, nor a process that has begun to exit: it is
    /// releasing its memory, and a sample of it is not a measurement of the process (its RSS
    /// reads 0 once its address space is gone).
    fn members(&mut self) -> Vec<Stat> {
        if self.table.refresh(&self.roots).is_err() {
            return Vec::new();
        }
        let mut members = self.table.members(&self.roots, &self.target);
        members.retain(|m| !matches!(m.state, 'Z' | 'X' | 'x') && !m.is_exiting());
        members
    }

    /// Takes one sample and updates the peaks.
    pub fn sample(&mut self) -> Sample {
        let members = self.members();
        let page = self.probe.options().system.page_size;
        let gpu = self.probe.gpu_usage();
        let pids: BTreeMap<u32, usize> = members
            .iter()
            .enumerate()
            .map(|(i, m)| (m.pid, i))
            .collect();
        let mut processes: Vec<ProcessSample> = members
            .iter()
            .map(|m| ProcessSample {
                pid: m.pid,
                start_time: m.start_time,
                name: m.comm.clone(),
                rss_bytes: m.rss_pages.saturating_mul(page),
                vram_bytes: BTreeMap::new(),
                vram_unknown: BTreeMap::new(),
                utilization: BTreeMap::new(),
            })
            .collect();
        let mut tree_vram: BTreeMap<u32, VramSum> = BTreeMap::new();
        // Per device, why a row of the target has no figure (the first row's reason).
        let mut no_figure: BTreeMap<u32, String> = BTreeMap::new();
        // A row's figure is its share of its device's pool: VRAM plus GTT on an AMD APU (a
        // model in GTT is the process's), else its used memory.
        let kinds: BTreeMap<u32, Option<PoolKind>> = gpu
            .devices
            .iter()
            .map(|d| (d.index, d.pool_kind()))
            .collect();
        for row in &gpu.processes {
            let Some(&i) = pids.get(&row.pid) else {
                continue;
            };
            if let (Some(p), Some(u)) = (processes.get_mut(i), row.utilization) {
                p.utilization.insert(row.device_index, u);
            }
            if let Some(m) = &row.mig_uuid {
                let used = self.report.mig_devices.entry(row.device_index).or_default();
                used.insert(m.clone());
            }
            // The tree's sum is the library's (`VramSum`): an MPS server that may hold its
            // clients' memory is not added again; an unknown figure is not 0.
            let kind = kinds.get(&row.device_index).copied().flatten();
            tree_vram
                .entry(row.device_index)
                .or_default()
                .add_in_pool(row, kind);
            let Some(used) = row.pool_bytes(kind) else {
                let why = vram::no_figure_detail(row);
                if let Some(p) = processes.get_mut(i) {
                    p.vram_unknown
                        .entry(row.device_index)
                        .or_insert_with(|| why.clone());
                }
                no_figure.entry(row.device_index).or_insert(why);
                continue;
            };
            if let Some(p) = processes.get_mut(i) {
                *p.vram_bytes.entry(row.device_index).or_default() += used;
            }
        }
        let devices: Vec<DeviceSample> = gpu
            .devices
            .iter()
            .map(|d| {
                let sum = tree_vram.get(&d.index);
                let tree = vram::tree_figure(sum, gpu.failed_devices.contains(&d.index));
                (
                    d,
                    tree,
                    tree.is_some() && sum.is_some_and(VramSum::is_lower_bound),
                )
            })
            .map(|(d, tree, lower)| DeviceSample {
                index: d.index,
                tree_vram_bytes: tree,
                tree_vram_is_lower_bound: lower,
                // A pool that is host RAM has its own used figure (the device's may be the
                // carve-out alone, or none).
                used_bytes: if d.pool_kind().is_some_and(PoolKind::shares_host_memory) {
                    d.pool_used_bytes()
                } else {
                    d.memory.used_bytes
                },
                telemetry: d.telemetry,
                unattributed: gpu.unattributed_on(d),
            })
            .collect();
        for d in &devices {
            let why = if gpu.failed_devices.contains(&d.index) {
                Some(vram::LIST_FAILED.to_string())
            } else {
                no_figure.remove(&d.index)
            };
            if let Some(why) = why {
                self.report
                    .vram_unknown
                    .entry(d.index)
                    .or_insert_with(|| PartialVram::new(why))
                    .samples += 1;
            }
        }
        for d in &gpu.devices {
            if let Some(k) = d.pool_kind().filter(|k| k.shares_host_memory()) {
                self.report.device_pools.insert(d.index, k);
            }
        }
        let now = Instant::now();
        let t_ms = u64::try_from(now.duration_since(self.started).as_millis()).unwrap_or(u64::MAX);
        let unix_ms = unix_ms();
        let sample = Sample {
            t_ms,
            unix_ms,
            rss_bytes: processes.iter().map(|p| p.rss_bytes).sum(),
            processes,
            devices,
        };
        if self
            .last_hwm
            .is_none_or(|t| now.duration_since(t) >= Duration::from_secs(1))
        {
            self.last_hwm = Some(now);
            self.read_slow(&members);
        }
        self.account(&sample);
        sample
    }

    /// Reads `VmHWM` (the kernel's per-process peak RSS) and PSS of the members: costlier
    /// files (PSS walks every mapping), read about once a second.
    fn read_slow(&mut self, members: &[Stat]) {
        let pss: Option<u64> = members
            .iter()
            .map(|m| {
                fsread::read_pid_file(&self.roots, m.pid, "smaps_rollup", parse_smaps_rollup)
                    .ok()
                    .and_then(|r| r.pss_bytes)
            })
            .sum();
        if let Some(p) = pss.filter(|_| !members.is_empty()) {
            let r = &mut self.report.peak_pss_sum_bytes;
            *r = Some(r.map_or(p, |x| x.max(p)));
        }
        for m in members {
            let hwm = fsread::read_pid_file(&self.roots, m.pid, "status", parse_status)
                .ok()
                .and_then(|s| s.vm_hwm_bytes);
            if let Some(h) = hwm {
                let r = &mut self.report.max_process_peak_rss_bytes;
                *r = Some(r.map_or(h, |x| x.max(h)));
            }
        }
    }

    fn account(&mut self, s: &Sample) {
        let r = &mut self.report;
        if r.samples == 0 || s.rss_bytes > r.peak_rss_bytes {
            r.peak_rss_bytes = s.rss_bytes;
            r.peak_rss_t_ms = s.t_ms;
        }
        r.samples += 1;
        // A sample whose members all read no resident page measured nothing: a process caught
        // between `exec`'s new, empty address space and its first page (a command that ends
        // at once is often seen only there).
        if s.processes.iter().any(|p| p.rss_bytes > 0) {
            r.measured_samples += 1;
        }
        r.elapsed_ms = s.t_ms;
        for d in &s.devices {
            if let Some(b) = d.tree_vram_bytes {
                let v = r.peak_vram_bytes.entry(d.index).or_default();
                *v = (*v).max(b);
            }
            if let Some(u) = d.used_bytes {
                let p = r.peak_device_used_bytes.entry(d.index).or_default();
                *p = (*p).max(u);
            }
        }
        let now_alive: HashSet<ProcessId> = s
            .processes
            .iter()
            .map(|p| ProcessId {
                pid: p.pid,
                start_time: p.start_time,
            })
            .collect();
        for id in std::mem::take(&mut self.alive) {
            if !now_alive.contains(&id) {
                self.gone.insert(id, s.unix_ms);
            }
        }
        for id in &now_alive {
            self.gone.remove(id);
        }
        self.alive = now_alive;
        for p in &s.processes {
            let vram = p.vram();
            let id = ProcessId {
                pid: p.pid,
                start_time: p.start_time,
            };
            let e = self.per_process.entry(id).or_insert_with(|| ProcessPeaks {
                pid: p.pid,
                name: p.name.clone(),
                baseline_rss_bytes: p.rss_bytes,
                peak_rss_bytes: 0,
                baseline_vram_bytes: vram,
                peak_vram_bytes: None,
                vram_is_lower_bound: false,
                samples: 0,
            });
            // `comm` changes when the process execs (a shell running a program): keep the latest.
            e.name.clone_from(&p.name);
            e.peak_rss_bytes = e.peak_rss_bytes.max(p.rss_bytes);
            e.peak_vram_bytes = e.peak_vram_bytes.max(vram);
            e.vram_is_lower_bound |= p.vram_is_lower_bound();
            e.samples += 1;
        }
        if self.options.keep_timeline {
            r.timeline.push(s.clone());
        }
    }

    /// The report so far.
    pub fn report(&self) -> SamplerReport {
        let mut r = self.report.clone();
        r.processes = self.per_process.values().cloned().collect();
        r
    }

    /// The report with the driver's per-process VRAM peaks added
    /// ([`SamplerReport::max_process_peak_vram_bytes`], [`SamplerReport::vram_accounting`]).
    /// Costs one driver call per NVML device and process seen: call it once, at the end.
    ///
    /// A record counts only when its context started within the process's life (from its
    /// start time to the first sample it was missing from, see
    /// [`crate::accounting::record_belongs`]): NVML keeps one record per pid,
    /// and a reused pid's record may belong to another process.
    pub fn finish(&self) -> SamplerReport {
        let mut r = self.report();
        // Keys are ordered by pid first: a reused pid's entries are adjacent.
        let mut pids: Vec<u32> = self.per_process.keys().map(|id| id.pid).collect();
        pids.dedup();
        if pids.is_empty() {
            return r;
        }
        let btime = fsread::read_string(&self.roots.proc.join("stat"), Cap::PROC_STAT)
            .ok()
            .and_then(|t| parse_btime(&t));
        let clock = self.probe.options().system.clock_ticks;
        let now_ms = unix_ms();
        for mut dev in self.probe.vram_accounting(&pids) {
            match btime {
                Some(b) => dev.processes.retain(|rec| {
                    self.per_process.keys().any(|id| {
                        id.pid == rec.pid
                            && record_belongs(
                                rec.start_unix_us,
                                start_unix_us(id.start_time, b, clock),
                                self.gone
                                    .get(id)
                                    .copied()
                                    .unwrap_or(now_ms)
                                    .saturating_mul(1000),
                            )
                    })
                }),
                None if dev.enabled == Some(true) => {
                    dev.processes.clear();
                    dev.unknown = Some(Unknown::new(
                        Field::Accounting,
                        UnknownReason::Unsupported,
                        "no boot time in the proc root's stat: records cannot be matched to processes",
                    ));
                }
                None => {}
            }
            // No matching record with a peak: no entry (unknown, never 0; `device_peaks` says
            // why).
            if dev.complete()
                && let Some(max) = dev
                    .processes
                    .iter()
                    .filter_map(|p| p.max_memory_bytes)
                    .max()
            {
                r.max_process_peak_vram_bytes.insert(dev.index, max);
            }
            r.vram_accounting.push(dev);
        }
        r
    }

    /// Runs the sampler on its own thread, calling `on_sample` after every sample (write a
    /// timeline line, forward to a channel…). [`SamplerHandle::stop`] takes a last sample and
    /// returns the report ([`Sampler::finish`]).
    pub fn start(mut self, mut on_sample: impl FnMut(&Sample) + Send + 'static) -> SamplerHandle {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("hmn-sampler".to_string())
            .spawn(move || {
                let cpu_start = thread_cpu_ms();
                let (lock, cvar) = &*flag;
                loop {
                    let s = self.sample();
                    on_sample(&s);
                    let Ok(guard) = lock.lock() else { break };
                    let Ok((guard, _)) =
                        cvar.wait_timeout_while(guard, self.options.interval, |stopped| !*stopped)
                    else {
                        break;
                    };
                    if *guard {
                        break;
                    }
                }
                let s = self.sample();
                on_sample(&s);
                let mut report = self.finish();
                report.sampler_cpu_ms = thread_cpu_ms().zip(cpu_start).map(|(b, a)| b - a);
                report
            });
        SamplerHandle {
            stop,
            thread: thread.ok(),
        }
    }
}

/// A running sampler thread.
#[derive(Debug)]
pub struct SamplerHandle {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<JoinHandle<SamplerReport>>,
}

impl SamplerHandle {
    /// Stops the sampler (after one last sample) and returns its report; an empty report if
    /// the thread could not be started or panicked.
    pub fn stop(self) -> SamplerReport {
        let (lock, cvar) = &*self.stop;
        if let Ok(mut stopped) = lock.lock() {
            *stopped = true;
        }
        cvar.notify_all();
        self.thread.and_then(|t| t.join().ok()).unwrap_or_default()
    }
}

/// Wall-clock time, ms since the Unix epoch (0 before it).
fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// CPU time of the calling thread, milliseconds (Linux only; `None` elsewhere).
#[cfg(not(target_os = "linux"))]
fn thread_cpu_ms() -> Option<f64> {
    None
}

/// CPU time of the calling thread, milliseconds.
#[cfg(target_os = "linux")]
fn thread_cpu_ms() -> Option<f64> {
    use nix::sys::resource::{UsageWho, getrusage};
    let u = getrusage(UsageWho::RUSAGE_THREAD).ok()?;
    let ms = |tv: nix::sys::time::TimeVal| tv.tv_sec() as f64 * 1e3 + tv.tv_usec() as f64 / 1e3;
    Some(ms(u.user_time()) + ms(u.system_time()))
}

#[cfg(test)]
mod tests;
