//! Pure rules that turn parsed fdinfo clients into `hmn ps` rows: driver regions onto the
//! `vram`/`gtt`/`system` model, client de-duplication, and engine utilization from two samples.
//!
//! # De-duplication
//! A DRM client (one open `struct drm_file`) is identified by `(device, drm-client-id)` (amdgpu's
//! pre-5.19 format has no client id; its `pasid`, a per-client GPU VM id, stands in). The same
//! client reached through several fds of one process counts once. A client reached from
//! several processes (fork inheritance, fd passing) counts once, on the row of the lowest pid;
//! the other rows list that pid in `shared_with` and do not count the client. So the sum of
//! `used_bytes` over a device's rows never counts a client twice.

use std::collections::{BTreeMap, BTreeSet};

use super::driver::{self, Bucket};
use super::fdinfo::{ClientStats, EngineStats, RegionStats};
use crate::types::{EngineUsage, Engines, ProcessRegions, RegionUsage};

fn usage(r: &RegionStats) -> RegionUsage {
    RegionUsage {
        total_bytes: r.total,
        resident_bytes: r.resident_bytes(),
        shared_bytes: r.shared,
        purgeable_bytes: r.purgeable,
        active_bytes: r.active,
        evicted_bytes: r.evicted,
    }
}

/// A client's regions in the model, each driver region bucketed by its driver's entry in the
/// table ([`driver::DrmDriver::bucket`]; several driver regions of one bucket are added).
pub(crate) fn regions_of(c: &ClientStats) -> ProcessRegions {
    let drv = driver::by_fdinfo_name(c.driver.as_deref());
    let mut p = ProcessRegions::default();
    for (name, stats) in &c.regions {
        let slot = match drv.bucket(name) {
            Some(Bucket::Vram) => &mut p.vram,
            Some(Bucket::Gtt) => &mut p.gtt,
            Some(Bucket::System) => &mut p.system,
            None => continue,
        };
        let u = usage(stats);
        *slot = Some(slot.map_or(u, |s| s.plus(u)));
    }
    p
}

/// Identity of a DRM client across fds and processes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct ClientKey {
    pub device: u32,
    pub driver: String,
    /// `drm-client-id`, else amdgpu's `pasid`, else the `(pid, fd)` that was read (a client that
    /// cannot be identified is never merged with another).
    pub id: ClientId,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum ClientId {
    Drm(u64),
    Pasid(u64),
    Fd(u32, u32),
}

impl ClientKey {
    pub(crate) fn new(device: u32, pid: u32, fd: u32, c: &ClientStats) -> ClientKey {
        let id = match (c.client_id, c.pasid) {
            (Some(id), _) => ClientId::Drm(id),
            (None, Some(pasid)) => ClientId::Pasid(pasid),
            (None, None) => ClientId::Fd(pid, fd),
        };
        ClientKey {
            device,
            driver: c.driver.clone().unwrap_or_default(),
            id,
        }
    }
}

/// One DRM fd that was read.
#[derive(Debug, Clone)]
pub(crate) struct SeenClient {
    pub pid: u32,
    pub key: ClientKey,
    pub stats: ClientStats,
}

/// A process's aggregate on one device.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Aggregate {
    pub regions: ProcessRegions,
    /// Owned clients.
    pub owned: Vec<ClientKey>,
    /// Every client id it holds.
    pub client_ids: BTreeSet<u64>,
    /// Owners of the clients it holds but does not own.
    pub shared_with: BTreeSet<u32>,
}

/// Groups clients into `(pid, device)` aggregates, de-duplicated (see the module docs).
pub(crate) fn aggregate(clients: &[SeenClient]) -> BTreeMap<(u32, u32), Aggregate> {
    let mut owner: BTreeMap<&ClientKey, u32> = BTreeMap::new();
    for c in clients {
        owner
            .entry(&c.key)
            .and_modify(|p| *p = (*p).min(c.pid))
            .or_insert(c.pid);
    }
    let mut rows: BTreeMap<(u32, u32), Aggregate> = BTreeMap::new();
    let mut counted: BTreeSet<&ClientKey> = BTreeSet::new();
    for c in clients {
        let row = rows.entry((c.pid, c.key.device)).or_default();
        if let ClientId::Drm(id) | ClientId::Pasid(id) = c.key.id {
            row.client_ids.insert(id);
        }
        let own = owner.get(&c.key).copied().unwrap_or(c.pid);
        if own != c.pid {
            row.shared_with.insert(own);
        } else if counted.insert(&c.key) {
            row.regions = row.regions.plus(regions_of(&c.stats));
            row.owned.push(c.key.clone());
        }
    }
    rows
}

/// Counters of one client at one instant, for utilization.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct EngineSample {
    /// Monotonic time of the read, nanoseconds.
    pub at_ns: u64,
    pub engines: BTreeMap<String, EngineStats>,
}

/// Busy percent of each engine class between two samples of one client.
///
/// ns counters: Δbusy / (Δwall × capacity); xe cycles: Δcycles / Δtotal-cycles / capacity;
/// msm/panfrost cycles: Δcycles / (Δwall × max frequency) / capacity. A counter that went
/// backwards, or claims more busy time than elapsed, gives no figure for that interval (the
/// spec allows brief regressions; nvtop discards such samples too). amdgpu's pre-5.19 format
/// reports an instantaneous percentage, used as is.
pub(crate) fn busy_percent(prev: Option<&EngineSample>, now: &EngineSample) -> Engines {
    let mut out = Engines::new();
    for (class, e) in &now.engines {
        let capacity = e.capacity.unwrap_or(1).max(1) as f64;
        let p = prev.and_then(|p| p.engines.get(class));
        let wall = prev.map(|p| now.at_ns.saturating_sub(p.at_ns)).unwrap_or(0);
        let ratio = if let Some(pct) = e.instant_percent {
            Some(pct / 100.0)
        } else if let (Some(a), Some(b)) = (p.and_then(|p| p.busy_ns), e.busy_ns) {
            delta(a, b).and_then(|d| (wall > 0).then(|| d as f64 / (wall as f64 * capacity)))
        } else if let (Some(pc), Some(pt), Some(c), Some(t)) = (
            p.and_then(|p| p.cycles),
            p.and_then(|p| p.total_cycles),
            e.cycles,
            e.total_cycles,
        ) {
            match (delta(pc, c), delta(pt, t)) {
                (Some(dc), Some(dt)) if dt > 0 => Some(dc as f64 / dt as f64 / capacity),
                _ => None,
            }
        } else if let (Some(pc), Some(c), Some(hz)) =
            (p.and_then(|p| p.cycles), e.cycles, e.max_freq_hz)
        {
            delta(pc, c).and_then(|dc| {
                let cycles_possible = wall as f64 / 1e9 * hz as f64 * capacity;
                (cycles_possible > 0.0).then(|| dc as f64 / cycles_possible)
            })
        } else {
            None
        };
        // Reject impossible figures (more busy than elapsed, beyond rounding).
        if let Some(r) = ratio.filter(|r| r.is_finite() && (0.0..=1.02).contains(r)) {
            let busy_percent = (r * 100.0).min(100.0);
            out.insert(class.clone(), EngineUsage { busy_percent });
        }
    }
    out
}

/// `b - a` when the counter did not go backwards.
fn delta(a: u64, b: u64) -> Option<u64> {
    b.checked_sub(a)
}

/// Adds per-client engine figures into a row's (a process's clients on one class add up).
pub(crate) fn add_engines(into: &mut Engines, from: &Engines) {
    for (class, u) in from {
        let e = into.entry(class.clone()).or_default();
        e.busy_percent = (e.busy_percent + u.busy_percent).min(100.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backends::drm::fdinfo::parse;

    fn seen(pid: u32, fd: u32, text: &str) -> SeenClient {
        let stats = parse(text);
        SeenClient {
            pid,
            key: ClientKey::new(0, pid, fd, &stats),
            stats,
        }
    }

    const CLIENT_7: &str = "drm-driver:\tamdgpu\ndrm-client-id:\t7\ndrm-resident-vram:\t100 MiB\ndrm-resident-gtt:\t2 MiB\n";

    #[test]
    fn xe_vram0_and_vram1_add_up() {
        let c = parse(
            "drm-driver:\txe\ndrm-resident-vram0:\t1 MiB\ndrm-resident-vram1:\t2 MiB\ndrm-total-gtt:\t192 KiB\n",
        );
        let r = regions_of(&c);
        assert_eq!(r.vram.unwrap().resident_bytes, Some(3 << 20));
        assert_eq!(r.gtt.unwrap().total_bytes, Some(192 << 10));
        assert_eq!(r.used_bytes(), Some(3 << 20));
    }

    #[test]
    fn same_client_through_two_fds_counts_once() {
        let rows = aggregate(&[seen(10, 3, CLIENT_7), seen(10, 4, CLIENT_7)]);
        let row = &rows[&(10, 0)];
        assert_eq!(row.regions.used_bytes(), Some(100 << 20));
        assert_eq!(row.owned.len(), 1);
    }

    #[test]
    fn shared_client_counts_on_the_lowest_pid() {
        let rows = aggregate(&[seen(30, 5, CLIENT_7), seen(20, 5, CLIENT_7)]);
        assert_eq!(rows[&(20, 0)].regions.used_bytes(), Some(100 << 20));
        let other = &rows[&(30, 0)];
        assert_eq!(other.regions.used_bytes(), None);
        assert_eq!(
            other.shared_with.iter().copied().collect::<Vec<_>>(),
            vec![20]
        );
        assert!(other.client_ids.contains(&7));
    }

    #[test]
    fn unidentifiable_clients_are_never_merged() {
        let text = "drm-driver:\tv3d\ndrm-total-memory:\t1 MiB\n";
        let rows = aggregate(&[seen(1, 3, text), seen(1, 4, text)]);
        assert_eq!(rows[&(1, 0)].regions.used_bytes(), Some(2 << 20));
    }

    fn sample(at_ns: u64, text: &str) -> EngineSample {
        EngineSample {
            at_ns,
            engines: parse(text).engines,
        }
    }

    #[test]
    fn ns_utilization_over_wall_time_and_capacity() {
        let a = sample(
            0,
            "drm-engine-gfx:\t0 ns\ndrm-engine-video:\t0 ns\ndrm-engine-capacity-video:\t2\n",
        );
        let b = sample(
            1_000_000_000,
            "drm-engine-gfx:\t250000000 ns\ndrm-engine-video:\t1000000000 ns\ndrm-engine-capacity-video:\t2\n",
        );
        let u = busy_percent(Some(&a), &b);
        assert!((u["gfx"].busy_percent - 25.0).abs() < 1e-9);
        assert!((u["video"].busy_percent - 50.0).abs() < 1e-9);
        assert!(
            busy_percent(None, &b).is_empty(),
            "one sample gives no utilization"
        );
    }

    #[test]
    fn backwards_or_impossible_counters_are_rejected() {
        let a = sample(0, "drm-engine-gfx:\t500 ns\n");
        let b = sample(1000, "drm-engine-gfx:\t400 ns\n");
        assert!(busy_percent(Some(&a), &b).is_empty(), "went backwards");
        let c = sample(1000, "drm-engine-gfx:\t5000 ns\n");
        assert!(busy_percent(Some(&a), &c).is_empty(), "busier than elapsed");
    }

    #[test]
    fn xe_cycles_over_total_cycles() {
        let a = sample(
            0,
            "drm-cycles-rcs:\t100\ndrm-total-cycles-rcs:\t1000\ndrm-cycles-ccs:\t0\ndrm-total-cycles-ccs:\t1000\ndrm-engine-capacity-ccs:\t4\n",
        );
        let b = sample(
            5,
            "drm-cycles-rcs:\t400\ndrm-total-cycles-rcs:\t2000\ndrm-cycles-ccs:\t2000\ndrm-total-cycles-ccs:\t2000\ndrm-engine-capacity-ccs:\t4\n",
        );
        let u = busy_percent(Some(&a), &b);
        assert!((u["rcs"].busy_percent - 30.0).abs() < 1e-9);
        assert!((u["ccs"].busy_percent - 50.0).abs() < 1e-9);
    }

    #[test]
    fn msm_cycles_over_max_frequency() {
        let a = sample(0, "drm-cycles-gpu:\t0\ndrm-maxfreq-gpu:\t1000 Hz\n");
        let b = sample(
            2_000_000_000,
            "drm-cycles-gpu:\t500\ndrm-maxfreq-gpu:\t1000 Hz\n",
        );
        let u = busy_percent(Some(&a), &b);
        assert!((u["gpu"].busy_percent - 25.0).abs() < 1e-9);
    }
}
