//! The DRM backend: AMD, Intel and every other kernel GPU driver, through sysfs (devices) and
//! DRM client usage stats in `/proc/<pid>/fdinfo` (processes), plus ROCm's KFD files.
//!
//! Owns [`DrmBackend`], which keeps two pieces of state between queries:
//! - the pid → DRM-fd index (the expensive `/proc` walk), rebuilt only when older than
//!   [`ProbeOptions::drm_index_max_age`](crate::ProbeOptions::drm_index_max_age), so a sampler
//!   that polls often reads only the few fdinfo files of known DRM fds per tick;
//! - the previous engine counters of each client, so every query after the first reports
//!   engine utilization over the interval since the one before;
//! - the last discovery of DRM devices, reused for the same
//!   [`ProbeOptions::drm_index_max_age`](crate::ProbeOptions::drm_index_max_age) (the period in
//!   which a new client of a known card can go unseen anyway; a new card likewise) with only
//!   each device's runtime status read again (a device whose directory is gone makes it
//!   discover again), and each found device's unchanging facts ([`statics`]: driver version,
//!   product name, hwmon directory, voltage channels), kept until the next discovery — so a
//!   query lists `/sys/class/drm` and `/sys/class/accel` and reads a card's identity once per
//!   period, not per query;
//! - the files read at every query kept open ([`crate::system::kept`]: one `pread` each of a
//!   file the kernel regenerates): each device's sysfs figures and runtime status, and the
//!   fdinfo of each known DRM fd — closed when a query no longer reads them.
//!
//! Submodules: [`driver`] (what each driver is: the one table of driver names), [`fdinfo`]
//! (parser), [`model`] (regions, de-duplication, utilization), [`kind`] (a row's engine
//! classes), [`sysfs`] (devices), [`apu`] (whether an amdgpu device is an APU), [`pool`] (a
//! device's memory pool as sysfs gives it), [`scan`] (the `/proc` walk), [`kfd`] (ROCm compute).

// Whether an amdgpu device is an APU (hwmon's vddnb channel).
pub(crate) mod apu;
pub(crate) mod driver;
pub(crate) mod fdinfo;
pub(crate) mod kfd;
pub(crate) mod kind;
pub(crate) mod model;
// amdgpu's RAS counters (memory health).
pub(crate) mod ras;
// A device's memory pool as far as sysfs gives it.
pub(crate) mod pool;
pub(crate) mod scan;
// A device's unchanging sysfs facts, kept between queries.
pub(crate) mod statics;
// The spill readings of a DRM device (`hmn spill`, upstream's `SpillTracker`).
pub(crate) mod spill;
pub(crate) mod sysfs;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::system::fsread::Cap;
use crate::system::kept::{KEPT_MAX, KeptFiles};
use crate::system::roots::Roots;
use crate::types::pci::PciBusId;
use crate::types::{
    Device, Field, GpuProcess, ProcessKind, Source, Unknown, UnknownReason, Warning,
};
use model::{ClientKey, EngineSample, SeenClient};
use scan::{FdIndex, FdinfoRead};
use sysfs::Found;

/// The DRM devices of one query and how they were numbered.
#[derive(Debug, Clone, Default)]
pub(crate) struct DrmDevices {
    /// Devices listed by this backend: (sysfs record, device index).
    pub listed: Vec<(Found, u32)>,
    /// NVIDIA DRM nodes that belong to a device NVML (or nvidia-smi) already listed.
    pub merged: Vec<(Found, u32)>,
}

impl DrmDevices {
    /// `(index, suspended)` of the listed device owning `node`.
    fn by_node(&self, node: &str) -> Option<(u32, bool)> {
        self.listed
            .iter()
            .find(|(f, _)| f.nodes.iter().any(|n| n == node))
            .map(|(f, i)| (*i, f.suspended()))
    }

    /// `(index, suspended)` of the listed device at PCI address `pdev`.
    fn by_pdev(&self, pdev: &str) -> Option<(u32, bool)> {
        let pci: PciBusId = pdev.parse().ok()?;
        self.listed
            .iter()
            .find(|(f, _)| f.pci == Some(pci))
            .map(|(f, i)| (*i, f.suspended()))
    }
}

/// The most fdinfo files kept open (half of what a process table keeps of `stat`s): a query
/// reads the rest afresh.
const FDINFO_KEPT: usize = KEPT_MAX / 2;

/// The DRM backend's state. See the [module docs](self).
#[derive(Debug)]
pub(crate) struct DrmBackend {
    roots: Roots,
    max_index_age: Duration,
    epoch: Instant,
    index: Mutex<Option<(Instant, FdIndex)>>,
    previous: Mutex<HashMap<ClientKey, EngineSample>>,
    names: Mutex<HashMap<crate::system::pci_ids::PciIdentity, Option<String>>>,
    /// The last discovery: when, and what it found.
    found: Mutex<Option<(Instant, Vec<Found>)>>,
    /// Each found device's unchanging facts, by sysfs directory (cleared at each discovery).
    statics: Mutex<HashMap<std::path::PathBuf, statics::Statics>>,
    /// The devices' sysfs files read at every query, kept open (closed at each discovery).
    files: Mutex<sysfs::SysfsFiles>,
    /// Each known DRM fd's fdinfo, kept open by (pid, fd).
    fdinfo: Mutex<KeptFiles<(u32, u32)>>,
    /// Whether a device listing reads hwmon, busy and clock files (`ProbeOptions::telemetry`).
    telemetry: bool,
}

/// What one process walk found.
pub(crate) struct DrmProcesses {
    pub rows: Vec<GpuProcess>,
    pub hidden: u32,
}

impl DrmBackend {
    pub(crate) fn new(roots: Roots, max_index_age: Duration) -> DrmBackend {
        DrmBackend {
            roots,
            max_index_age,
            epoch: Instant::now(),
            index: Mutex::new(None),
            previous: Mutex::new(HashMap::new()),
            names: Mutex::new(HashMap::new()),
            found: Mutex::new(None),
            statics: Mutex::new(HashMap::new()),
            files: Mutex::new(KeptFiles::new(Cap::SYSFS)),
            fdinfo: Mutex::new(KeptFiles::new(Cap::FDINFO).at_most(FDINFO_KEPT)),
            telemetry: true,
        }
    }

    /// Whether device listings read telemetry (`ProbeOptions::telemetry`; on by default).
    #[must_use]
    pub(crate) fn telemetry(mut self, on: bool) -> DrmBackend {
        self.telemetry = on;
        self
    }

    /// Lists the DRM devices, numbered from `first_index`; NVIDIA nodes whose PCI address
    /// matches one of `nvidia` are merged into that device instead of listed again.
    pub(crate) fn devices(
        &self,
        first_index: u32,
        nvidia: &[Device],
        nvml_reason: Option<&str>,
    ) -> (Vec<Device>, DrmDevices) {
        let mut out = Vec::new();
        let mut map = DrmDevices::default();
        let mut next = first_index;
        let found = self.discover();
        let mut files = lock(&self.files);
        for f in found {
            let same = nvidia
                .iter()
                .find(|d| d.pci_bus_id.is_some() && d.pci_bus_id == f.pci);
            if let Some(d) = same {
                map.merged.push((f, d.index));
                continue;
            }
            let mut kept = lock(&self.statics);
            let mut statics = || {
                kept.entry(f.dir.clone())
                    .or_insert_with(|| {
                        statics::Statics::read(&self.roots, &f.dir, f.driver.as_deref())
                    })
                    .clone()
            };
            let mut dev = sysfs::read(
                &self.roots,
                &f,
                next,
                nvml_reason,
                self.telemetry,
                &mut statics,
                &mut files,
            );
            drop(kept);
            if dev.name.is_none() {
                if let Some(name) = f.pci_identity().and_then(|id| self.name_of(&id)) {
                    dev.name = Some(name);
                    dev.unknown.retain(|u| u.field != Field::Name);
                }
            }
            out.push(dev);
            map.listed.push((f, next));
            next += 1;
        }
        files.end_round();
        (out, map)
    }

    /// The DRM devices in sysfs: a finding younger than the index age is reused, its devices'
    /// runtime status read again (see the [module docs](self)).
    fn discover(&self) -> Vec<Found> {
        let mut last = lock(&self.found);
        if let Some((at, found)) = last.as_mut() {
            let mut files = lock(&self.files);
            if at.elapsed() < self.max_index_age
                && found.iter_mut().all(|f| sysfs::refresh(f, &mut files))
            {
                return found.clone();
            }
        }
        let found = sysfs::discover(&self.roots);
        *last = Some((Instant::now(), found.clone()));
        lock(&self.statics).clear();
        lock(&self.files).clear();
        found
    }

    /// A device's marketing name from the system's databases ([`crate::pci_ids`]), looked up
    /// once per identity for the backend's life.
    fn name_of(&self, id: &crate::system::pci_ids::PciIdentity) -> Option<String> {
        let mut names = lock(&self.names);
        names
            .entry(*id)
            .or_insert_with(|| crate::system::pci_ids::name_of(&self.roots, id))
            .clone()
    }

    /// The fd index, rebuilt when older than the configured age (or when `fresh`).
    fn index(&self, fresh: bool) -> FdIndex {
        let mut guard = lock(&self.index);
        match guard.as_ref() {
            Some((built, index)) if !fresh && built.elapsed() < self.max_index_age => index.clone(),
            _ => {
                let index = scan::build_index(&self.roots);
                *guard = Some((Instant::now(), index.clone()));
                index
            }
        }
    }

    /// Every process holding a client of a listed, awake DRM device.
    pub(crate) fn processes(&self, devs: &DrmDevices, warnings: &mut Vec<Warning>) -> DrmProcesses {
        if devs.listed.is_empty() {
            return DrmProcesses {
                rows: Vec::new(),
                hidden: 0,
            };
        }
        let index = self.index(false);
        let mut denied: BTreeSet<u32> = BTreeSet::new();
        let mut clients: Vec<SeenClient> = Vec::new();
        let mut samples: BTreeMap<ClientKey, EngineSample> = BTreeMap::new();
        let mut problems: BTreeSet<String> = BTreeSet::new();
        // Clients whose fdinfo was refused (too large, not a file) or whose memory figure is
        // malformed: (pid, device) → why.
        let mut refused: BTreeMap<(u32, u32), (UnknownReason, String)> = BTreeMap::new();
        let mut kept = lock(&self.fdinfo);
        for nf in &index.fds {
            // A node of a suspended (or unknown) device is not read: reading xe fdinfo wakes it.
            let Some((by_node, suspended)) = devs.by_node(&nf.node) else {
                continue;
            };
            if suspended {
                continue;
            }
            let text = match scan::read_fdinfo(&self.roots, nf.pid, nf.fd, &mut kept) {
                FdinfoRead::Text(t) => t,
                FdinfoRead::Denied => {
                    denied.insert(nf.pid);
                    continue;
                }
                FdinfoRead::Gone => continue,
                FdinfoRead::Refused(reason, detail) => {
                    refused.entry((nf.pid, by_node)).or_insert((reason, detail));
                    continue;
                }
            };
            let at_ns = u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX);
            let stats = fdinfo::parse(&text);
            if stats.over_key_limit {
                let detail = format!(
                    "{}: more than {} keys",
                    self.roots
                        .proc
                        .join(format!("{}/fdinfo/{}", nf.pid, nf.fd))
                        .display(),
                    fdinfo::MAX_KEYS
                );
                refused
                    .entry((nf.pid, by_node))
                    .or_insert((UnknownReason::TooLarge, detail));
                continue;
            }
            if stats.driver.is_none() {
                continue; // no DRM stats (hot-unplugged device, or the fd was reused)
            }
            problems.extend(
                stats
                    .problems
                    .iter()
                    .map(|p| format!("{} fdinfo: {p}", stats.driver.as_deref().unwrap_or("?"))),
            );
            // The device by `drm-pdev` when printed (node names can differ inside containers).
            let device = match stats.pdev.as_deref().and_then(|p| devs.by_pdev(p)) {
                Some((_, true)) => continue,
                Some((i, false)) => i,
                None => by_node,
            };
            // A size the driver printed and the parser could not read: the process's figure
            // would be short of it, so it is unknown, and says why (not "prints no memory
            // stats").
            if let Some(p) = &stats.malformed_size {
                let detail = format!(
                    "{}: the driver's memory figure could not be read: {p}",
                    self.roots
                        .proc
                        .join(format!("{}/fdinfo/{}", nf.pid, nf.fd))
                        .display()
                );
                refused
                    .entry((nf.pid, device))
                    .or_insert((UnknownReason::Unreadable, detail));
            }
            let key = ClientKey::new(device, nf.pid, nf.fd, &stats);
            samples.entry(key.clone()).or_insert(EngineSample {
                at_ns,
                engines: stats.engines.clone(),
            });
            clients.push(SeenClient {
                pid: nf.pid,
                key,
                stats,
            });
        }
        kept.end_round();
        drop(kept);
        warnings.extend(problems.into_iter().map(Warning::general));
        let kinds = kind::kinds(&clients);
        let aggregates = model::aggregate(&clients);
        let busy = self.utilization(&samples);
        let mut rows: BTreeMap<(u32, u32), GpuProcess> = BTreeMap::new();
        for ((pid, device), agg) in aggregates {
            let kind = kinds
                .get(&(pid, device))
                .copied()
                .unwrap_or(ProcessKind::Unreported);
            let mut row = GpuProcess::new(pid, device, kind, Source::Fdinfo);
            row.used_bytes = agg.regions.used_bytes();
            if row.used_bytes.is_none() {
                if agg.owned.is_empty() && !agg.shared_with.is_empty() {
                    row.used_bytes = Some(0);
                } else {
                    row.unknown.push(Unknown::new(
                        Field::UsedBytes,
                        UnknownReason::Unsupported,
                        "the driver prints no memory stats for this client",
                    ));
                }
            }
            if !agg.regions.is_empty() {
                row.regions = Some(agg.regions);
            }
            for key in &agg.owned {
                if let Some(e) = busy.get(key) {
                    model::add_engines(&mut row.engines, e);
                }
            }
            row.drm_clients = agg.client_ids.into_iter().collect();
            row.shared_with = agg.shared_with.into_iter().collect();
            rows.insert((pid, device), row);
        }
        // A process with a refused client: its figure would be an undercount, so it is unknown.
        for ((pid, device), (reason, detail)) in refused {
            let row = rows.entry((pid, device)).or_insert_with(|| {
                GpuProcess::new(pid, device, ProcessKind::Unreported, Source::Fdinfo)
            });
            row.used_bytes = None;
            row.regions = None;
            row.unknown.retain(|u| u.field != Field::UsedBytes);
            row.unknown
                .push(Unknown::new(Field::UsedBytes, reason, detail));
        }
        self.merge_kfd(devs, &mut rows);
        DrmProcesses {
            rows: rows.into_values().collect(),
            hidden: index.hidden + u32::try_from(denied.len()).unwrap_or(u32::MAX),
        }
    }

    /// Engine use since the previous query, per client; remembers this query's counters.
    fn utilization(
        &self,
        now: &BTreeMap<ClientKey, EngineSample>,
    ) -> HashMap<ClientKey, crate::types::Engines> {
        let mut prev = lock(&self.previous);
        let out = now
            .iter()
            .map(|(k, s)| (k.clone(), model::busy_percent(prev.get(k), s)))
            .collect();
        prev.clear();
        prev.extend(now.iter().map(|(k, s)| (k.clone(), s.clone())));
        out
    }

    /// ROCm compute processes: KFD VRAM merged into the rows (the larger figure; never added,
    /// as both may count the same buffers).
    fn merge_kfd(&self, devs: &DrmDevices, rows: &mut BTreeMap<(u32, u32), GpuProcess>) {
        for (pid, pci, bytes) in kfd::vram_by_process(&self.roots) {
            let Some((device, suspended)) = devs.by_pdev(&pci.to_string()) else {
                continue;
            };
            if suspended {
                continue;
            }
            let row = rows
                .entry((pid, device))
                .or_insert_with(|| GpuProcess::new(pid, device, ProcessKind::Compute, Source::Kfd));
            row.kind = row.kind.merge(ProcessKind::Compute);
            if row.used_bytes.is_none_or(|u| bytes > u) {
                row.used_bytes = Some(bytes);
                row.source = Source::Kfd;
                row.unknown.retain(|u| u.field != Field::UsedBytes);
            }
        }
    }
}

/// Locks `m`, whatever a thread that panicked while holding it left (the state is a cache).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    }
}

#[cfg(test)]
mod tests;
