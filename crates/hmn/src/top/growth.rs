//! Steady growth of each listed process's VRAM (per device) and host RSS, for `hmn top`: the
//! library's rule (`hypomnesis::growth`) with the defaults `hmn watch` uses (a 30 min window,
//! a verdict after 10 min and 20 samples, a rise of at least 256 MiB, R² ≥ 0.8; one jump is
//! not growth), fed with every snapshot shown — live, or a replay playing forward (a seek back
//! in time starts over). A process is known by (pid, start time); a row without a start time
//! is not followed. Trackers of processes no longer listed are dropped.

use std::collections::HashMap;

use hypomnesis::growth::{GrowthFlag, GrowthRule, GrowthTracker};

use super::snapshot::Snapshot;

/// The trackers, and the flags raised at the latest snapshot.
#[derive(Debug, Clone, Default)]
pub struct Trends {
    /// Each series' tracker and the time of the latest snapshot that listed it.
    ram: HashMap<(u32, u64), (GrowthTracker, f64)>,
    vram: HashMap<(u32, u64, u32), (GrowthTracker, f64)>,
    ram_flags: HashMap<(u32, u64), GrowthFlag>,
    vram_flags: HashMap<(u32, u64, u32), GrowthFlag>,
    /// The time of the latest snapshot observed, seconds.
    last: Option<f64>,
}

impl Trends {
    /// Feeds one snapshot (its `unix_ms` is the time).
    pub fn observe(&mut self, s: &Snapshot) {
        let t = s.unix_ms as f64 / 1000.0;
        match self.last {
            Some(last) if t <= last => {
                if t < last {
                    *self = Trends::default(); // a seek back: start over
                } else {
                    return; // the same snapshot again
                }
            }
            _ => {}
        }
        self.last = Some(t);
        let rule = GrowthRule::default();
        self.ram_flags.clear();
        self.vram_flags.clear();
        // Each tracker seen in this snapshot is marked with its time; the others are dropped
        // after (the maps are kept, not rebuilt, from one snapshot to the next).
        for r in &s.processes {
            let Some(start) = r.start_time else {
                continue;
            };
            let pid = r.gpu.pid;
            if let Some(rss) = r.rss_bytes {
                let seen = self
                    .ram
                    .entry((pid, start))
                    .or_insert_with(|| (GrowthTracker::new(rule), f64::NAN));
                // A process listed on two devices is one RAM series: fed once.
                if seen.1 != t {
                    seen.1 = t;
                    if let Some(f) = seen.0.observe(t, rss) {
                        self.ram_flags.insert((pid, start), f);
                    }
                }
            }
            // On an AMD APU the process's share of the pool (VRAM + GTT): a leak in GTT shows.
            let kind = s
                .devices
                .iter()
                .find(|d| d.index == r.gpu.device_index)
                .and_then(hypomnesis::Device::pool_kind);
            if let Some(used) = r.gpu.pool_bytes(kind) {
                let key = (pid, start, r.gpu.device_index);
                let seen = self
                    .vram
                    .entry(key)
                    .or_insert_with(|| (GrowthTracker::new(rule), f64::NAN));
                seen.1 = t;
                if let Some(f) = seen.0.observe(t, used) {
                    self.vram_flags.insert(key, f);
                }
            }
        }
        self.ram.retain(|_, seen| seen.1 == t);
        self.vram.retain(|_, seen| seen.1 == t);
    }

    /// How many RAM and VRAM series are followed.
    #[cfg(test)]
    pub fn series(&self) -> (usize, usize) {
        (self.ram.len(), self.vram.len())
    }

    /// The RAM flag of (`pid`, `start`).
    pub fn ram(&self, pid: u32, start: Option<u64>) -> Option<&GrowthFlag> {
        self.ram_flags.get(&(pid, start?))
    }

    /// The VRAM flag of (`pid`, `start`) on `device`.
    pub fn vram(&self, pid: u32, start: Option<u64>, device: u32) -> Option<&GrowthFlag> {
        self.vram_flags.get(&(pid, start?, device))
    }

    /// Whether the row's process grows on its device or in RAM.
    pub fn flagged(&self, pid: u32, start: Option<u64>, device: Option<u32>) -> bool {
        self.ram(pid, start).is_some() || device.is_some_and(|d| self.vram(pid, start, d).is_some())
    }
}

/// The detail pane's line for a flag: `VRAM on GPU 0: ↑ 1.2 GiB/h for 35 min (slope 340 KiB/s,
/// R² 0.98, 70 samples)`.
pub fn flag_line(what: &str, f: &GrowthFlag) -> String {
    let g = &f.growth;
    format!(
        "{what}: {} (slope {}/s, R² {:.2}, {} samples over {:.0} s)",
        crate::watch_growth::trend_text(f),
        crate::format::bytes(g.bytes_per_second.max(0.0) as u64),
        g.r_squared,
        g.samples,
        g.window_seconds
    )
}
