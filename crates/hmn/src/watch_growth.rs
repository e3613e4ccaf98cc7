//! `watch`'s growth trends: per followed process, one [`GrowthTracker`] for its RAM and one per
//! device for its VRAM there (the library's steady-growth rule, `hypomnesis::growth`), the line said
//! when a flag is raised or cleared (`↑ 1.2 GiB/h for 35 min`), the JSON `growth` field, and
//! `--exit-on-growth RATE`.

use std::collections::BTreeMap;

use hypomnesis::growth::{GrowthFlag, GrowthRule, GrowthTracker};
use hypomnesis::sampler::ProcessSample;
use serde::Serialize;

use crate::args::WatchArgs;
use crate::format::bytes;

/// What a process's figures do now.
#[derive(Debug, Default, Serialize)]
pub struct ProcessGrowth {
    /// RAM (RSS) grows steadily.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ram: Option<GrowthFlag>,
    /// VRAM grows steadily, per device.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub vram_by_device: BTreeMap<u32, GrowthFlag>,
}

impl ProcessGrowth {
    fn is_empty(&self) -> bool {
        self.ram.is_none() && self.vram_by_device.is_empty()
    }
}

/// Every followed process's trackers.
pub struct Trends {
    rule: GrowthRule,
    ram: BTreeMap<(u32, u64), GrowthTracker>,
    vram: BTreeMap<(u32, u64, u32), GrowthTracker>,
    /// What was flagged at the previous sample (to say changes once).
    flagged: BTreeMap<(u32, String), bool>,
    exit_rate: Option<f64>,
}

/// `↑ 1.2 GiB/h for 35 min`.
pub fn trend_text(f: &GrowthFlag) -> String {
    let per_hour = f.growth.bytes_per_hour().max(0.0);
    let minutes = f.for_seconds.max(f.growth.window_seconds) / 60.0;
    let span = if minutes >= 1.0 {
        format!("{minutes:.0} min")
    } else {
        format!("{:.0} s", minutes * 60.0)
    };
    format!("↑ {}/h for {span}", bytes(per_hour as u64))
}

impl Trends {
    /// Trackers under `--growth-window` and `--growth-min`.
    pub fn new(args: &WatchArgs) -> Trends {
        Trends {
            rule: GrowthRule::default()
                .window(args.growth_window)
                .min_rise_bytes(args.growth_min),
            ram: BTreeMap::new(),
            vram: BTreeMap::new(),
            flagged: BTreeMap::new(),
            exit_rate: args.exit_on_growth,
        }
    }

    /// Feeds one process's sample taken `t` seconds into the watch; returns its flags and
    /// the lines to say for flags raised or cleared since the last sample.
    pub fn observe(&mut self, t: f64, p: &ProcessSample) -> (ProcessGrowth, Vec<String>) {
        let rule = self.rule;
        let mut g = ProcessGrowth {
            ram: self
                .ram
                .entry((p.pid, p.start_time))
                .or_insert_with(|| GrowthTracker::new(rule))
                .observe(t, p.rss_bytes),
            vram_by_device: BTreeMap::new(),
        };
        for (dev, v) in &p.vram_bytes {
            let f = self
                .vram
                .entry((p.pid, p.start_time, *dev))
                .or_insert_with(|| GrowthTracker::new(rule))
                .observe(t, *v);
            if let Some(f) = f {
                g.vram_by_device.insert(*dev, f);
            }
        }
        let mut lines = Vec::new();
        let mut said = |what: String, flag: Option<&GrowthFlag>| {
            let was = self
                .flagged
                .insert((p.pid, what.clone()), flag.is_some())
                .unwrap_or(false);
            match (was, flag) {
                (false, Some(f)) => lines.push(format!(
                    "pid {} ({}) {what} grows steadily: {}",
                    p.pid,
                    p.name.escaped(),
                    trend_text(f)
                )),
                (true, None) => lines.push(format!(
                    "pid {} ({}) {what} no longer grows steadily",
                    p.pid,
                    p.name.escaped()
                )),
                _ => {}
            }
        };
        said("RAM".to_string(), g.ram.as_ref());
        let devices: Vec<u32> = p.vram_bytes.keys().copied().collect();
        for dev in devices {
            said(format!("VRAM on GPU {dev}"), g.vram_by_device.get(&dev));
        }
        (g, lines)
    }

    /// `--exit-on-growth`: the first flag whose slope is at least RATE, in words.
    pub fn exceeded(&self, pid: u32, g: &ProcessGrowth) -> Option<String> {
        let rate = self.exit_rate?;
        if g.is_empty() {
            return None;
        }
        let over = |f: &GrowthFlag| f.growth.bytes_per_second >= rate;
        g.ram
            .iter()
            .filter(|f| over(f))
            .map(|f| format!("pid {pid} RAM {}", trend_text(f)))
            .chain(
                g.vram_by_device
                    .iter()
                    .filter(|(_, f)| over(f))
                    .map(|(d, f)| format!("pid {pid} VRAM on GPU {d} {}", trend_text(f))),
            )
            .next()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hypomnesis::growth::GrowthTracker;

    #[test]
    fn the_trend_reads_as_a_rate_and_a_span() {
        let mut t =
            GrowthTracker::new(GrowthRule::default().window(std::time::Duration::from_secs(60)));
        let mut flag = None;
        for i in 0..=120u64 {
            // 1 GiB/h, steadily.
            flag = t.observe(i as f64, (4 << 30) + i * ((1 << 30) / 3600));
        }
        assert!(flag.is_none(), "a rise below the least rise is no flag");
        let mut t = GrowthTracker::new(
            GrowthRule::default()
                .window(std::time::Duration::from_secs(60))
                .min_rise_bytes(1 << 20),
        );
        for i in 0..=120u64 {
            flag = t.observe(i as f64, (4 << 30) + i * ((1 << 30) / 3600));
        }
        let f = flag.expect("a steady rise is flagged");
        let text = trend_text(&f);
        // 2³⁰ / 3600 bytes a second, rounded down: just under 1 GiB an hour.
        assert!(text.starts_with("↑ 1024 MiB/h for "), "{text}");
        assert!(text.ends_with(" min"), "{text}");
    }
}
